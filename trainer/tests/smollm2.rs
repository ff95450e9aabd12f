//! The real SmolLM2-135M-Instruct: logits for a chat prompt against a numpy
//! implementation written from the architecture's definition
//! (`fixtures/smollm2_logits.py`), and greedy decoding answers the question.
//!
//! Needs `FORGE_SMOLLM2_GGUF` (set by `.ci/run` after `forge model fetch`);
//! without it the tests say so and pass.

mod backend;

use forge_model::gguf::Gguf;
use forge_model::tokenizer::ModelTokenizer;
use serde_json::Value;
use std::path::PathBuf;

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("FORGE_SMOLLM2_GGUF").map(PathBuf::from);
    if path.is_none() {
        eprintln!("FORGE_SMOLLM2_GGUF is not set: skipping the SmolLM2 checks");
    }
    path
}

#[test]
fn logits_match_the_reference_and_greedy_decoding_says_paris() {
    let Some(path) = model_path() else { return };
    let reference: Value =
        serde_json::from_str(include_str!("fixtures/smollm2_logits.json")).unwrap();
    let prompt: Vec<u32> = reference["prompt"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_u64().unwrap() as u32)
        .collect();
    let tokenizer = ModelTokenizer::from_gguf(&Gguf::open(&path).unwrap()).unwrap();
    assert_eq!(tokenizer.encode("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n").unwrap(), prompt);
    let mut chat = forge_trainer::chat::turn("user", "What is the capital of France?");
    chat.push(forge_trainer::chat::reply_opening());
    assert_eq!(
        chat.encode(&tokenizer).unwrap(),
        prompt,
        "the chat template's ids"
    );

    let model = backend::load(&path).unwrap();
    // The shape `forge bench model` measures without the file.
    assert_eq!(model.config, forge_trainer::LlamaConfig::smollm2_135m());
    let logits = model.forward(&prompt, &mut model.new_cache());
    let vocab = model.config.vocab;
    let last = logits.into_data().to_vec::<f32>().unwrap()[(prompt.len() - 1) * vocab..].to_vec();
    // f32 here against f64 in numpy over 30 layers: agree to a few thousandths.
    for (id, expected) in reference["logits_first_32"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let expected = expected.as_f64().unwrap();
        assert!(
            (f64::from(last[id]) - expected).abs() < 2e-2,
            "logit {id}: {} vs {expected}",
            last[id]
        );
    }
    let top: Vec<u64> = reference["top_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_u64().unwrap())
        .collect();
    for (rank, (id, expected)) in top
        .iter()
        .zip(reference["top_logits"].as_array().unwrap())
        .enumerate()
        .take(5)
    {
        let expected = expected.as_f64().unwrap();
        assert!(
            (f64::from(last[*id as usize]) - expected).abs() < 2e-2,
            "top {rank} (id {id}): {} vs {expected}",
            last[*id as usize]
        );
    }
    let best = last
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0 as u64;
    assert_eq!(best, top[0]);

    let end = tokenizer.token_id("<|im_end|>").unwrap();
    let answer = tokenizer
        .decode(&model.generate_greedy(&prompt, 12, forge_trainer::Stop::tokens(&[end])))
        .unwrap();
    assert!(answer.contains("Paris"), "the model answers: {answer:?}");
}
