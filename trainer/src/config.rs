//! A Llama model's shape, read from GGUF metadata (`<arch>.*` keys), so other
//! Llama-family models load without code changes.

use forge_model::gguf::{Gguf, GgufError};

#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub rope_base: f64,
    pub rms_eps: f64,
}

impl LlamaConfig {
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, GgufError> {
        let arch = gguf.get_str("general.architecture")?.to_owned();
        let key = |name: &str| format!("{arch}.{name}");
        let get = |name: &str| gguf.get_u64(&key(name)).map(|value| value as usize);
        let vocab = match gguf.get_u64(&key("vocab_size")) {
            Ok(vocab) => vocab as usize,
            Err(_) => gguf.get_array("tokenizer.ggml.tokens")?.len(),
        };
        let heads = get("attention.head_count")?;
        Ok(Self {
            vocab,
            hidden: get("embedding_length")?,
            layers: get("block_count")?,
            heads,
            kv_heads: get("attention.head_count_kv").unwrap_or(heads),
            ffn: get("feed_forward_length")?,
            rope_base: gguf.get_f64(&key("rope.freq_base")).unwrap_or(10_000.0),
            rms_eps: gguf
                .get_f64(&key("attention.layer_norm_rms_epsilon"))
                .unwrap_or(1e-5),
        })
    }

    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }
}
