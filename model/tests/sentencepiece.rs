//! A SentencePiece tokenizer (Llama 2's and Mistral's kind) read from a GGUF
//! file against the ids the `sentencepiece` library itself gives: the pieces
//! of a tiny model it trained (`fixtures/sentencepiece_tiny.py`) are written
//! into a GGUF file as llama.cpp's converter writes them.

use forge_model::gguf::{Gguf, GgufWriter, Value};
use forge_model::tokenizer::ModelTokenizer;

fn fixture() -> serde_json::Value {
    serde_json::from_str(include_str!("fixtures/sentencepiece_tiny.json")).unwrap()
}

/// The fixture's tokenizer, read back from a GGUF file written with
/// `extra` metadata on top.
fn tokenizer(extra: &[(&str, Value)]) -> ModelTokenizer {
    let fixture = fixture();
    let pieces = fixture["pieces"].as_array().unwrap();
    let column = |f: &dyn Fn(&serde_json::Value) -> Value| pieces.iter().map(f).collect();
    let mut writer = GgufWriter::default();
    writer
        .metadata("tokenizer.ggml.model", Value::String("llama".into()))
        .metadata(
            "tokenizer.ggml.tokens",
            Value::Array(column(&|p| {
                Value::String(p["piece"].as_str().unwrap().into())
            })),
        )
        .metadata(
            "tokenizer.ggml.scores",
            Value::Array(column(&|p| Value::F32(p["score"].as_f64().unwrap() as f32))),
        )
        .metadata(
            "tokenizer.ggml.token_type",
            Value::Array(column(&|p| Value::I32(p["type"].as_i64().unwrap() as i32))),
        )
        .metadata(
            "tokenizer.ggml.bos_token_id",
            Value::U32(fixture["bos"].as_u64().unwrap() as u32),
        )
        .metadata(
            "tokenizer.ggml.eos_token_id",
            Value::U32(fixture["eos"].as_u64().unwrap() as u32),
        );
    for (key, value) in extra {
        writer.metadata(key, value.clone());
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spm.gguf");
    writer.write(&path).unwrap();
    ModelTokenizer::from_gguf(&Gguf::open(&path).unwrap()).unwrap()
}

#[test]
fn ids_are_the_sentencepiece_librarys_and_text_round_trips() {
    let tokenizer = tokenizer(&[]);
    assert_eq!((tokenizer.bos, tokenizer.eos), (Some(1), Some(2)));
    // A checkpoint keeps the tokenizer as `tokenizer.json`.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tokenizer.json");
    tokenizer.save_json(&json).unwrap();
    let saved = ModelTokenizer::from_json_file(&json, Some(1), Some(2)).unwrap();
    // Other tools that encode with the special tokens get Llama 2's `<s>`;
    // Forge's own encoding places none.
    let other = tokenizers::Tokenizer::from_file(&json).unwrap();
    let hello = other.encode("Hello world", true).unwrap();
    assert_eq!(hello.get_ids()[0], 1);
    assert_eq!(
        hello.get_ids()[1..],
        tokenizer.encode("Hello world").unwrap()
    );
    for case in fixture()["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(tokenizer.encode(text).unwrap(), expected, "{text:?}");
        assert_eq!(
            tokenizer.encode_literal(text).unwrap(),
            expected,
            "{text:?}"
        );
        assert_eq!(saved.encode(text).unwrap(), expected, "{text:?}");
        assert_eq!(tokenizer.decode(&expected).unwrap(), text, "{expected:?}");
    }
}

#[test]
fn user_defined_pieces_are_matched_whole_as_llama_cpp_does() {
    let tokenizer = tokenizer(&[]);
    let call = tokenizer.token_id("<tool_call>").unwrap();
    let after = tokenizer.encode("{\"name\": 1}").unwrap();
    for ids in [
        tokenizer.encode("<tool_call>{\"name\": 1}").unwrap(),
        tokenizer
            .encode_literal("<tool_call>{\"name\": 1}")
            .unwrap(),
    ] {
        // The text after the piece starts with a space, as the text's start does.
        assert_eq!(ids, [&[call][..], &after].concat());
    }
    // So it does in a reply, which only before the piece continues its prompt.
    let reply = tokenizer
        .encode_continuing("the<tool_call>{\"name\": 1}")
        .unwrap();
    let the = tokenizer.encode_continuing("the").unwrap();
    assert_eq!(reply, [&the[..], &[call], &after].concat());
}

#[test]
fn control_tokens_are_single_ids_only_outside_literal_text() {
    let tokenizer = tokenizer(&[]);
    let ids = tokenizer.encode("<s>Hi</s>").unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(*ids.last().unwrap(), 2);
    let literal = tokenizer.encode_literal("<s>Hi</s>").unwrap();
    assert!(
        !literal.contains(&1) && !literal.contains(&2),
        "{literal:?}"
    );
    assert_eq!(tokenizer.decode(&literal).unwrap(), "<s>Hi</s>");
    assert_eq!(tokenizer.decode_text(&ids).unwrap(), "Hi");
}

#[test]
fn a_file_may_turn_the_leading_space_off_and_replies_go_without_it() {
    let with = tokenizer(&[]);
    let without = tokenizer(&[("tokenizer.ggml.add_space_prefix", Value::Bool(false))]);
    let text = "the user";
    assert_eq!(
        without.encode(&format!(" {text}")).unwrap(),
        with.encode(text).unwrap()
    );
    assert_eq!(
        without.decode(&without.encode(text).unwrap()).unwrap(),
        text
    );
    // A reply continues its prompt: no space is put before it.
    assert_eq!(
        with.encode_continuing(text).unwrap(),
        without.encode(text).unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tokenizer.json");
    with.save_json(&json).unwrap();
    let saved = ModelTokenizer::from_json_file(&json, Some(1), Some(2)).unwrap();
    assert_eq!(
        saved.encode_continuing(text).unwrap(),
        without.encode(text).unwrap()
    );
}
