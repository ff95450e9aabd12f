//! Every quantized type Forge reads, dequantized from a GGUF file and
//! checked against the values the `gguf` package (llama.cpp's Python
//! reference) gives the same blocks of random bits
//! (`fixtures/ggml_blocks.py`).

use forge_model::gguf::{Gguf, GgufWriter};
use forge_model::quant::GgmlType;

fn ggml_type(name: &str) -> GgmlType {
    (0..40)
        .map(GgmlType::from_id)
        .find(|kind| kind.to_string() == name)
        .unwrap_or_else(|| panic!("Forge has no type {name}"))
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
        .collect()
}

#[test]
fn quantized_tensors_dequantize_as_the_reference_does() {
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("fixtures/ggml_blocks.json")).unwrap();
    let mut writer = GgufWriter::default();
    for case in &cases {
        let name = case["type"].as_str().unwrap();
        let values = case["values"].as_array().unwrap().len() as u64;
        writer.tensor_raw(
            name,
            &[values],
            ggml_type(name),
            hex(case["bytes"].as_str().unwrap()),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quantized.gguf");
    writer.write(&path).unwrap();
    let file = Gguf::open(&path).unwrap();
    for case in &cases {
        let name = case["type"].as_str().unwrap();
        let got = file.dequantize(name).unwrap();
        let expected: Vec<f32> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|value| value.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(got.len(), expected.len(), "{name}");
        for (at, (got, expected)) in got.iter().zip(&expected).enumerate() {
            // Products taken in another order may round apart in the last bit.
            assert!(
                (got - expected).abs() <= 1e-6 * expected.abs().max(1.0),
                "{name}, value {at}: {got} vs the reference's {expected}"
            );
        }
    }
}
