//! A Qwen2 checkpoint as Hugging Face Transformers writes it (made by
//! `fixtures/qwen2_tiny.py`, with its logits): Forge loads the directory
//! unchanged, computes the same logits, and saves it back as a checkpoint
//! Transformers would load as the same Qwen2.

mod backend;

use backend::Backend;
use forge_model::tokenizer::ModelTokenizer;
use forge_trainer::config::Architecture;
use std::path::Path;

const FIXTURE: &str = "tests/fixtures/qwen2_tiny";

fn reference() -> (Vec<u32>, Vec<Vec<f64>>) {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(FIXTURE).join("logits.json")).unwrap())
            .unwrap();
    (
        serde_json::from_value(json["tokens"].clone()).unwrap(),
        serde_json::from_value(json["logits"].clone()).unwrap(),
    )
}

fn logits(model: &forge_trainer::Llama<Backend>, tokens: &[u32]) -> Vec<f32> {
    model
        .forward(tokens, &mut model.new_cache())
        .into_data()
        .to_vec()
        .unwrap()
}

#[test]
fn a_transformers_qwen2_checkpoint_gives_transformers_logits() {
    let model = backend::load(Path::new(FIXTURE)).unwrap();
    assert_eq!(model.config.architecture, Architecture::Qwen2);
    assert_eq!(model.config.rms_eps, 1e-6);
    let (tokens, expected) = reference();
    let got = logits(&model, &tokens);
    let vocab = model.config.vocab;
    for (position, expected) in expected.iter().enumerate() {
        for (token, e) in expected.iter().enumerate() {
            let g = f64::from(got[position * vocab + token]);
            assert!(
                (g - e).abs() < 1e-4 * e.abs().max(1.0),
                "position {position}, token {token}: {g} vs {e}"
            );
        }
    }
}

#[test]
fn a_qwen2_model_saves_as_a_qwen2_checkpoint() {
    let model = backend::load(Path::new(FIXTURE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    forge_trainer::checkpoint::save(dir.path(), &model, &ModelTokenizer::byte_level()).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "qwen2");
    assert_eq!(config["architectures"][0], "Qwen2ForCausalLM");
    let saved = std::fs::read(dir.path().join("model.safetensors")).unwrap();
    let original = std::fs::read(Path::new(FIXTURE).join("model.safetensors")).unwrap();
    let names = |bytes: &[u8]| {
        let mut names: Vec<String> = safetensors::SafeTensors::deserialize(bytes)
            .unwrap()
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(&saved),
        names(&original),
        "the same tensors, biases included"
    );
    let reloaded = backend::load(dir.path()).unwrap();
    assert_eq!(reloaded.config, model.config);
    let (tokens, _) = reference();
    assert_eq!(logits(&reloaded, &tokens), logits(&model, &tokens));
}

#[test]
fn sharded_weights_are_named_rather_than_missing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(FIXTURE).join("config.json"),
        dir.path().join("config.json"),
    )
    .unwrap();
    std::fs::write(dir.path().join("model.safetensors.index.json"), "{}").unwrap();
    let err = backend::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("sharded"), "{err}");
}

#[test]
fn a_tensor_the_configured_architecture_does_not_read_is_named() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(Path::new(FIXTURE).join(file), dir.path().join(file)).unwrap();
    }
    // Qwen2's weights under a config that says Llama: the biases would be lost.
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["model_type"] = "llama".into();
    std::fs::write(&path, config.to_string()).unwrap();
    let err = backend::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(".bias` has no place in a llama model"),
        "{err}"
    );
}
