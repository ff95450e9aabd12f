//! A Llama model's shape, read from GGUF metadata (`<arch>.*` keys) or from a
//! Hugging Face `config.json`, so other Llama-family models load without code
//! changes.

use forge_model::gguf::{Gguf, GgufError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    #[serde(rename = "vocab_size")]
    pub vocab: usize,
    #[serde(rename = "hidden_size")]
    pub hidden: usize,
    #[serde(rename = "num_hidden_layers")]
    pub layers: usize,
    #[serde(rename = "num_attention_heads")]
    pub heads: usize,
    #[serde(rename = "num_key_value_heads")]
    pub kv_heads: usize,
    #[serde(rename = "intermediate_size")]
    pub ffn: usize,
    #[serde(rename = "rope_theta", default = "default_rope_base")]
    pub rope_base: f64,
    #[serde(rename = "rms_norm_eps", default = "default_rms_eps")]
    pub rms_eps: f64,
    /// The output projection is the token embedding (SmolLM2): one matrix,
    /// trained as one.
    #[serde(rename = "tie_word_embeddings", default)]
    pub tied_embeddings: bool,
}

fn default_rope_base() -> f64 {
    10_000.0
}

fn default_rms_eps() -> f64 {
    1e-5
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
            rope_base: gguf
                .get_f64(&key("rope.freq_base"))
                .unwrap_or(default_rope_base()),
            rms_eps: gguf
                .get_f64(&key("attention.layer_norm_rms_epsilon"))
                .unwrap_or(default_rms_eps()),
            tied_embeddings: gguf.tensor("output.weight").is_err(),
        })
    }

    /// SmolLM2-135M-Instruct's shape (the default policy), for measurements
    /// that need no weights.
    pub fn smollm2_135m() -> Self {
        Self {
            vocab: 49_152,
            hidden: 576,
            layers: 30,
            heads: 9,
            kv_heads: 3,
            ffn: 1536,
            rope_base: 100_000.0,
            // As the GGUF stores it: an f32.
            rms_eps: f64::from(1e-5f32),
            tied_embeddings: true,
        }
    }

    /// A small model for CPU training runs and tests.
    pub fn tiny(vocab: usize) -> Self {
        Self {
            vocab,
            hidden: 64,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            ffn: 192,
            rope_base: 10_000.0,
            rms_eps: 1e-5,
            tied_embeddings: true,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// The `config.json` of a checkpoint: these keys plus the ones that make
    /// it a Hugging Face Llama config, so the checkpoint also loads there.
    pub fn to_hf_json(&self, bos: Option<u32>, eos: Option<u32>) -> serde_json::Value {
        let mut json = serde_json::to_value(self).expect("the config serialises");
        let object = json.as_object_mut().expect("an object");
        object.insert(
            "architectures".into(),
            serde_json::json!(["LlamaForCausalLM"]),
        );
        object.insert("model_type".into(), "llama".into());
        object.insert("hidden_act".into(), "silu".into());
        object.insert("torch_dtype".into(), "float32".into());
        object.insert("bos_token_id".into(), bos.into());
        object.insert("eos_token_id".into(), eos.into());
        json
    }
}
