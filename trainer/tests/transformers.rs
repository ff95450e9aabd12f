//! Checkpoints as Hugging Face Transformers writes them, with their logits
//! (made by `fixtures/transformers_tiny.py`): a Qwen2, a Qwen3, a Llama with
//! Llama 3's RoPE scaling and a Mistral with a sliding window. Forge loads
//! each directory unchanged, computes the same logits, and saves it back as
//! a checkpoint Transformers would load as the same model.

mod backend;

use backend::Backend;
use forge_model::tokenizer::ModelTokenizer;
use forge_trainer::config::Architecture;
use std::path::Path;

const FIXTURE: &str = "tests/fixtures/qwen2_tiny";
const LLAMA3: &str = "tests/fixtures/llama3_tiny";
const MISTRAL: &str = "tests/fixtures/mistral_tiny";
const QWEN3: &str = "tests/fixtures/qwen3_tiny";

/// The tokens of the fixture in `dir` and the logits Transformers computed.
fn reference_of(dir: &str) -> (Vec<u32>, Vec<Vec<f64>>) {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(dir).join("logits.json")).unwrap())
            .unwrap();
    (
        serde_json::from_value(json["tokens"].clone()).unwrap(),
        serde_json::from_value(json["logits"].clone()).unwrap(),
    )
}

fn reference() -> (Vec<u32>, Vec<Vec<f64>>) {
    reference_of(FIXTURE)
}

fn logits(model: &forge_trainer::Llama<Backend>, tokens: &[u32]) -> Vec<f32> {
    model
        .forward(tokens, &mut model.new_cache())
        .into_data()
        .to_vec()
        .unwrap()
}

/// The largest gap between `model`'s logits and the fixture's in `dir`,
/// relative to the larger of the logit and 1.
fn gap(model: &forge_trainer::Llama<Backend>, dir: &str) -> f64 {
    let (tokens, expected) = reference_of(dir);
    let got = logits(model, &tokens);
    let vocab = model.config.vocab;
    expected
        .iter()
        .enumerate()
        .flat_map(|(position, row)| {
            let got = &got[position * vocab..];
            row.iter()
                .zip(got)
                .map(|(e, g)| (f64::from(*g) - e).abs() / e.abs().max(1.0))
        })
        .fold(0.0, f64::max)
}

#[test]
fn a_transformers_qwen2_checkpoint_gives_transformers_logits() {
    let model = backend::load(Path::new(FIXTURE)).unwrap();
    assert_eq!(model.config.architecture, Architecture::Qwen2);
    assert_eq!(model.config.rms_eps, 1e-6);
    let gap = gap(&model, FIXTURE);
    assert!(gap < 1e-4, "{gap}");
}

#[test]
fn a_llama3_checkpoint_scales_rope_as_transformers_does() {
    let model = backend::load(Path::new(LLAMA3)).unwrap();
    assert!(model.config.rope_scaling.is_some());
    let scaled = gap(&model, LLAMA3);
    assert!(scaled < 1e-4, "{scaled}");
    let mut unscaled = model.clone();
    unscaled.config.rope_scaling = None;
    assert!(
        gap(&unscaled, LLAMA3) > 0.1,
        "without the scaling the logits are another model's"
    );
    let dir = tempfile::tempdir().unwrap();
    forge_trainer::checkpoint::save(dir.path(), &model, &ModelTokenizer::byte_level()).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(written["rope_scaling"]["rope_type"], "llama3");
    assert_eq!(
        written["rope_scaling"]["original_max_position_embeddings"],
        64
    );
    let reloaded = backend::load(dir.path()).unwrap();
    assert_eq!(reloaded.config, model.config);
    assert_eq!(gap(&reloaded, LLAMA3), scaled);
}

#[test]
fn a_mistral_checkpoint_attends_within_its_sliding_window() {
    let model = backend::load(Path::new(MISTRAL)).unwrap();
    assert_eq!(model.config.architecture, Architecture::Mistral);
    assert_eq!(model.config.sliding_window, Some(8));
    let windowed = gap(&model, MISTRAL);
    assert!(windowed < 1e-4, "{windowed}");
    let mut unwindowed = model.clone();
    unwindowed.config.sliding_window = None;
    assert!(
        gap(&unwindowed, MISTRAL) > 0.1,
        "the 16 positions past the window see further without it"
    );
    // Decoding a token at a time, each position's window lies in the cache.
    let (tokens, expected) = reference_of(MISTRAL);
    let mut cache = model.new_cache();
    for (token, row) in tokens.iter().zip(&expected) {
        let got: Vec<f32> = model
            .forward(&[*token], &mut cache)
            .into_data()
            .to_vec()
            .unwrap();
        for (g, e) in got.iter().zip(row) {
            assert!((f64::from(*g) - e).abs() / e.abs().max(1.0) < 1e-4);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    forge_trainer::checkpoint::save(dir.path(), &model, &ModelTokenizer::byte_level()).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(written["architectures"][0], "MistralForCausalLM");
    assert_eq!(written["sliding_window"], 8);
    let reloaded = backend::load(dir.path()).unwrap();
    assert_eq!(reloaded.config, model.config);
    assert_eq!(gap(&reloaded, MISTRAL), windowed);
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
    assert_eq!(
        weight_names(dir.path()),
        weight_names(Path::new(FIXTURE)),
        "the same tensors, biases included"
    );
    let reloaded = backend::load(dir.path()).unwrap();
    assert_eq!(reloaded.config, model.config);
    let (tokens, _) = reference();
    assert_eq!(logits(&reloaded, &tokens), logits(&model, &tokens));
}

/// The sorted names of the tensors in `dir`'s `model.safetensors`.
fn weight_names(dir: &Path) -> Vec<String> {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let mut names: Vec<String> = safetensors::SafeTensors::deserialize(&bytes)
        .unwrap()
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

#[test]
fn a_qwen3_checkpoint_normalises_queries_and_keys_as_transformers_does() {
    let model = backend::load(Path::new(QWEN3)).unwrap();
    assert_eq!(model.config.architecture, Architecture::Qwen3);
    assert_eq!(model.config.head_dim(), 16, "wider than hidden / heads");
    let gap = gap(&model, QWEN3);
    assert!(gap < 1e-4, "{gap}");
    let dir = tempfile::tempdir().unwrap();
    forge_trainer::checkpoint::save(dir.path(), &model, &ModelTokenizer::byte_level()).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(config["architectures"][0], "Qwen3ForCausalLM");
    assert_eq!(
        weight_names(dir.path()),
        weight_names(Path::new(QWEN3)),
        "the same tensors, the norms of queries and keys included"
    );
    let reloaded = backend::load(dir.path()).unwrap();
    assert_eq!(reloaded.config, model.config);
    let (tokens, _) = reference_of(QWEN3);
    assert_eq!(logits(&reloaded, &tokens), logits(&model, &tokens));
}

#[test]
fn a_shard_index_that_does_not_match_its_shards_is_named() {
    let refused = |change: &dyn Fn(&mut serde_json::Value)| {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(MISTRAL).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
        let index = dir.path().join("model.safetensors.index.json");
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        change(&mut json["weight_map"]);
        std::fs::write(&index, json.to_string()).unwrap();
        backend::load(dir.path()).unwrap_err().to_string()
    };
    let norm = "model.norm.weight";
    let err = refused(&|map| map[norm] = "model-00004-of-00003.safetensors".into());
    assert!(err.contains("model-00004-of-00003.safetensors"), "{err}");
    let err = refused(&|map| {
        let elsewhere = if map[norm] == "model-00001-of-00003.safetensors" {
            "model-00002-of-00003.safetensors"
        } else {
            "model-00001-of-00003.safetensors"
        };
        map[norm] = elsewhere.into();
    });
    assert!(err.contains("`model.norm.weight` is listed in"), "{err}");
    let err = refused(&|map| map[norm] = "../model-00001-of-00003.safetensors".into());
    assert!(err.contains("not a file name"), "{err}");
    let err = refused(&|map| {
        map.as_object_mut().unwrap().remove(norm);
    });
    assert!(err.contains("`model.norm.weight`"), "{err}");
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
