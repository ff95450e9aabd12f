//! A Llama-family model's shape, read from GGUF metadata (`<arch>.*` keys) or
//! from a Hugging Face `config.json`, so other Llama-family models load
//! without code changes. What the decoder cannot compute faithfully (RoPE
//! scalings other than Llama 3's, Qwen2's sliding-window layers, another
//! architecture) is refused by name rather than run wrongly.

use crate::llama::LoadError;
use crate::rope::{self, RopeScaling};
use forge_model::gguf::Gguf;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The decoder families Forge runs. They share one forward pass and differ
/// in what the checkpoint holds and how llama.cpp stores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Architecture {
    /// Llama and SmolLM: no biases; llama.cpp stores Q/K rows interleaved
    /// for its RoPE layout.
    #[default]
    Llama,
    /// Qwen2 / Qwen2.5: biases on the Q, K and V projections; llama.cpp
    /// keeps the rotate-half layout.
    Qwen2,
    /// Mistral: Llama's decoder, whose positions see only a window of the
    /// last ones where the config sets one (v0.1's `sliding_window`).
    Mistral,
    /// Qwen3 (dense): no biases, each head's queries and keys RMS-normalised
    /// before RoPE; llama.cpp keeps the rotate-half layout.
    Qwen3,
}

impl Architecture {
    const SUPPORTED: &'static str = "llama, qwen2, qwen3, mistral";

    /// The architecture named `name` (GGUF `general.architecture`, Hugging
    /// Face `model_type`).
    pub fn from_name(name: &str) -> Result<Self, LoadError> {
        match name {
            "llama" => Ok(Self::Llama),
            "qwen2" => Ok(Self::Qwen2),
            "mistral" => Ok(Self::Mistral),
            "qwen3" => Ok(Self::Qwen3),
            other => Err(LoadError::Unsupported(format!(
                "architecture `{other}` is not supported (supported: {})",
                Self::SUPPORTED
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Mistral => "mistral",
            Self::Qwen3 => "qwen3",
        }
    }

    /// The Q, K and V projections carry biases.
    pub fn qkv_bias(self) -> bool {
        self == Self::Qwen2
    }

    /// Each head's queries and keys are RMS-normalised before RoPE.
    pub fn qk_norm(self) -> bool {
        self == Self::Qwen3
    }

    /// llama.cpp's converter permuted the Q/K rows (see `llama::unpermute`).
    pub fn gguf_permutes_qk(self) -> bool {
        matches!(self, Self::Llama | Self::Mistral)
    }

    fn hf_class(self) -> &'static str {
        match self {
            Self::Llama => "LlamaForCausalLM",
            Self::Qwen2 => "Qwen2ForCausalLM",
            Self::Mistral => "MistralForCausalLM",
            Self::Qwen3 => "Qwen3ForCausalLM",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    /// Set from `model_type` (Hugging Face) or `general.architecture` (GGUF).
    #[serde(skip)]
    pub architecture: Architecture,
    #[serde(rename = "vocab_size")]
    pub vocab: usize,
    #[serde(rename = "hidden_size")]
    pub hidden: usize,
    #[serde(rename = "num_hidden_layers")]
    pub layers: usize,
    #[serde(rename = "num_attention_heads")]
    pub heads: usize,
    /// Hugging Face configs may leave it out: then as many as `heads`.
    #[serde(rename = "num_key_value_heads", default)]
    pub kv_heads: usize,
    #[serde(rename = "intermediate_size")]
    pub ffn: usize,
    #[serde(rename = "rope_theta", default = "default_rope_base")]
    pub rope_base: f64,
    /// Llama 3.1's and 3.2's stretching of long wavelengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
    #[serde(rename = "rms_norm_eps", default = "default_rms_eps")]
    pub rms_eps: f64,
    /// The output projection is the token embedding (SmolLM2): one matrix,
    /// trained as one.
    #[serde(rename = "tie_word_embeddings", default)]
    pub tied_embeddings: bool,
    /// Width of an attention head, when it is not `hidden / heads`.
    #[serde(rename = "head_dim", default, skip_serializing_if = "Option::is_none")]
    pub explicit_head_dim: Option<usize>,
    /// How many positions, itself included, each position attends to
    /// (Mistral v0.1's sliding window); all before it when `None`. Read
    /// and written for Mistral only: Qwen2 configs state a window they use
    /// only with `use_sliding_window`, which is refused.
    #[serde(skip)]
    pub sliding_window: Option<usize>,
    /// The positions the model was trained to attend over (GGUF's
    /// `context_length`), where its file says: written into checkpoints so
    /// that Transformers does not assume its default of 2048.
    #[serde(
        rename = "max_position_embeddings",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub context: Option<usize>,
}

/// llama.cpp's tensor of RoPE frequency divisors.
pub(crate) const ROPE_FREQS: &str = "rope_freqs.weight";

fn default_rope_base() -> f64 {
    10_000.0
}

fn default_rms_eps() -> f64 {
    1e-5
}

impl LlamaConfig {
    /// The tokens a reply to a prompt of `prompt` tokens may take within the
    /// context (any number where it is not known), or why there is no room:
    /// past it the model computes nothing it was trained for.
    pub fn room_after(&self, prompt: usize) -> Result<usize, String> {
        match self.context {
            Some(context) if prompt >= context => Err(format!(
                "the prompt of {prompt} tokens fills the model's context of {context}"
            )),
            Some(context) => Ok(context - prompt),
            None => Ok(usize::MAX),
        }
    }

    pub fn from_gguf(gguf: &Gguf) -> Result<Self, LoadError> {
        let arch = gguf.get_str("general.architecture")?.to_owned();
        let architecture = Architecture::from_name(&arch)?;
        let key = |name: &str| format!("{arch}.{name}");
        let get = |name: &str| gguf.get_u64(&key(name)).map(|value| value as usize);
        if let Ok(scaling) = gguf.get_str(&key("rope.scaling.type"))
            && scaling != "none"
        {
            return Err(LoadError::Unsupported(format!(
                "RoPE scaling `{scaling}` is not supported"
            )));
        }
        let vocab = match gguf.get_u64(&key("vocab_size")) {
            Ok(vocab) => vocab as usize,
            Err(_) => gguf.get_array("tokenizer.ggml.tokens")?.len(),
        };
        let heads = get("attention.head_count")?;
        let hidden = get("embedding_length")?;
        if let (Ok(keys), Ok(values)) = (get("attention.key_length"), get("attention.value_length"))
            && keys != values
        {
            return Err(LoadError::Unsupported(format!(
                "keys of width {keys} with values of width {values} are not supported"
            )));
        }
        let config = Self {
            architecture,
            vocab,
            hidden,
            layers: get("block_count")?,
            heads,
            kv_heads: get("attention.head_count_kv").unwrap_or(heads),
            ffn: get("feed_forward_length")?,
            rope_base: gguf
                .get_f64(&key("rope.freq_base"))
                .unwrap_or(default_rope_base()),
            rope_scaling: None,
            rms_eps: gguf
                .get_f64(&key("attention.layer_norm_rms_epsilon"))
                .unwrap_or(default_rms_eps()),
            tied_embeddings: gguf.tensor("output.weight").is_err(),
            explicit_head_dim: get("attention.key_length").ok(),
            sliding_window: None,
            context: get("context_length").ok(),
        }
        .checked()?;
        if gguf.tensor(ROPE_FREQS).is_err() {
            return Ok(config);
        }
        let divisors = gguf.dequantize(ROPE_FREQS)?;
        let scaling = RopeScaling::fit(&config.base_frequencies(), &divisors)
            .map_err(|err| LoadError::Unsupported(err.to_string()))?;
        Ok(Self {
            rope_scaling: Some(scaling),
            ..config
        })
    }

    /// RoPE's frequencies before any scaling.
    fn base_frequencies(&self) -> Vec<f64> {
        rope::base_frequencies(self.rope_base, self.head_dim())
    }

    /// RoPE's frequencies, one per pair of a head's dimensions, scaled where
    /// the model scales them.
    pub fn rope_frequencies(&self) -> Vec<f64> {
        let frequencies = self.base_frequencies();
        match &self.rope_scaling {
            Some(scaling) => scaling.apply(&frequencies),
            None => frequencies,
        }
    }

    /// The shape a Hugging Face `config.json` describes (Transformers 4's
    /// `rope_theta`/`rope_scaling` or 5's `rope_parameters`).
    pub fn from_hf_json(json: &Value) -> Result<Self, LoadError> {
        let architecture = Architecture::from_name(json["model_type"].as_str().unwrap_or("llama"))?;
        let unsupported = |what: String| Err(LoadError::Unsupported(what));
        let rope = &json["rope_parameters"];
        let mut rope_scaling = None;
        for scaling in [&json["rope_scaling"], rope] {
            let kind = scaling["rope_type"].as_str().or(scaling["type"].as_str());
            match kind {
                None | Some("default") => {}
                Some("llama3") => {
                    rope_scaling =
                        Some(serde_json::from_value(scaling.clone()).map_err(|err| {
                            LoadError::Checkpoint(format!("rope_scaling: {err}"))
                        })?);
                }
                Some(kind) => {
                    return unsupported(format!(
                        "RoPE scaling `{kind}` is not supported (Llama 3's, `llama3`, is)"
                    ));
                }
            }
        }
        for flag in ["attention_bias", "mlp_bias", "use_sliding_window"] {
            if json[flag].as_bool() == Some(true) {
                return unsupported(format!("`{flag}: true` is not supported"));
            }
        }
        if let Some(act) = json["hidden_act"].as_str().filter(|act| *act != "silu") {
            return unsupported(format!("the activation `{act}` is not supported (SiLU is)"));
        }
        let layer_types = json["layer_types"].as_array().into_iter().flatten();
        if let Some(kind) = layer_types
            .filter_map(Value::as_str)
            .find(|kind| *kind != "full_attention")
        {
            return unsupported(format!("`{kind}` layers are not supported"));
        }
        let mut fields = json.clone();
        if let Some(fields) = fields.as_object_mut() {
            // Read above, from whichever of the two places states it.
            fields.remove("rope_scaling");
        }
        let mut config: Self =
            serde_json::from_value(fields).map_err(|err| LoadError::Checkpoint(err.to_string()))?;
        config.architecture = architecture;
        config.rope_scaling = rope_scaling;
        if architecture == Architecture::Mistral {
            config.sliding_window = json["sliding_window"]
                .as_u64()
                .map(|window| window as usize);
        }
        if config.kv_heads == 0 {
            config.kv_heads = config.heads;
        }
        if let Some(base) = rope["rope_theta"].as_f64() {
            config.rope_base = base;
        }
        config.checked()
    }

    /// The config, if its numbers describe a model the decoder can run, a
    /// head width stated as the one implied by the others no longer explicit.
    pub(crate) fn checked(mut self) -> Result<Self, LoadError> {
        let sizes = [
            ("vocabulary", Some(self.vocab)),
            ("width", Some(self.hidden)),
            ("layer count", Some(self.layers)),
            ("head count", Some(self.heads)),
            ("key/value head count", Some(self.kv_heads)),
            ("feed-forward width", Some(self.ffn)),
            ("sliding window", self.sliding_window),
            ("context length", self.context),
        ];
        let implied = self.hidden / self.heads.max(1);
        self.explicit_head_dim = self.explicit_head_dim.filter(|&width| width != implied);
        // A broken number here makes every output NaN, not an error.
        let unusable = |value: f64| !(value.is_finite() && value > 0.0);
        let problem = if let Some((size, _)) = sizes.iter().find(|(_, value)| *value == Some(0)) {
            Some(format!("its {size} is zero"))
        } else if unusable(self.rope_base) {
            Some(format!(
                "RoPE's base frequency is {}, not a positive number",
                self.rope_base
            ))
        } else if unusable(self.rms_eps) {
            Some(format!(
                "the norms' epsilon is {}, not a positive number",
                self.rms_eps
            ))
        } else if !self.heads.is_multiple_of(self.kv_heads) {
            Some(format!(
                "{} query heads do not share {} key/value heads evenly",
                self.heads, self.kv_heads
            ))
        } else if self.explicit_head_dim.is_none() && !self.hidden.is_multiple_of(self.heads) {
            Some(format!(
                "a width of {} does not split into {} heads",
                self.hidden, self.heads
            ))
        } else if !self.head_dim().is_multiple_of(2) {
            Some(format!(
                "RoPE needs an even head width, not {}",
                self.head_dim()
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => Err(LoadError::Unsupported(format!(
                "the model's shape: {problem}"
            ))),
            None => Ok(self),
        }
    }

    /// SmolLM2-135M-Instruct's shape (the default policy), for measurements
    /// that need no weights.
    pub fn smollm2_135m() -> Self {
        Self {
            architecture: Architecture::Llama,
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
            explicit_head_dim: None,
            rope_scaling: None,
            sliding_window: None,
            context: Some(8192),
        }
    }

    /// A small model for CPU training runs and tests.
    pub fn tiny(vocab: usize) -> Self {
        Self {
            architecture: Architecture::Llama,
            vocab,
            hidden: 64,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            ffn: 192,
            rope_base: 10_000.0,
            rms_eps: 1e-5,
            tied_embeddings: true,
            explicit_head_dim: None,
            rope_scaling: None,
            sliding_window: None,
            context: None,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.explicit_head_dim.unwrap_or(self.hidden / self.heads)
    }

    /// How many parameters a model of this shape has (saturating: a shape
    /// whose count overflows is refused as too large, not wrapped round).
    pub fn parameters(&self) -> u64 {
        let size = |n: usize| n as u64;
        let (hidden, head, ffn) = (size(self.hidden), size(self.head_dim()), size(self.ffn));
        let (queries, keys) = (
            size(self.heads).saturating_mul(head),
            size(self.kv_heads).saturating_mul(head),
        );
        let mut layer = [
            // q and o, k and v, the MLP's three, two norms.
            hidden.saturating_mul(queries).saturating_mul(2),
            hidden.saturating_mul(keys).saturating_mul(2),
            hidden.saturating_mul(ffn).saturating_mul(3),
            hidden.saturating_mul(2),
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add);
        if self.architecture.qkv_bias() {
            layer = layer.saturating_add(queries.saturating_add(keys.saturating_mul(2)));
        }
        if self.architecture.qk_norm() {
            layer = layer.saturating_add(head.saturating_mul(2));
        }
        let embeddings = size(self.vocab).saturating_mul(hidden);
        let output = if self.tied_embeddings { 0 } else { embeddings };
        layer
            .saturating_mul(size(self.layers))
            .saturating_add(embeddings)
            .saturating_add(output)
            .saturating_add(hidden)
    }

    /// The `config.json` of a checkpoint: these keys plus the ones that make
    /// it a Hugging Face config of its architecture, so the checkpoint also
    /// loads there.
    pub fn to_hf_json(&self, bos: Option<u32>, eos: Option<u32>) -> Value {
        let mut json = serde_json::to_value(self).expect("the config serialises");
        let object = json.as_object_mut().expect("an object");
        let architecture = self.architecture;
        object.insert(
            "architectures".into(),
            serde_json::json!([architecture.hf_class()]),
        );
        object.insert("model_type".into(), architecture.name().into());
        if architecture == Architecture::Mistral {
            // Stated even when `None`: Transformers' Mistral otherwise
            // assumes a window of 4096.
            object.insert("sliding_window".into(), self.sliding_window.into());
        }
        object.insert("hidden_act".into(), "silu".into());
        object.insert("torch_dtype".into(), "float32".into());
        object.insert("bos_token_id".into(), bos.into());
        object.insert("eos_token_id".into(), eos.into());
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hugging_face_configs_of_both_transformers_generations_are_read() {
        let qwen = json!({
            "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
            "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
            "intermediate_size": 4864, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
            "tie_word_embeddings": true, "use_sliding_window": false, "rope_scaling": null,
            "sliding_window": 32768,
        });
        let config = LlamaConfig::from_hf_json(&qwen).unwrap();
        assert_eq!(config.architecture, Architecture::Qwen2);
        assert_eq!(config.sliding_window, None, "a window Qwen2 does not use");
        assert_eq!((config.head_dim(), config.rope_base), (64, 1e6));
        let mut v5 = qwen.clone();
        v5.as_object_mut().unwrap().remove("rope_theta");
        v5["rope_parameters"] = json!({"rope_type": "default", "rope_theta": 5e5});
        assert_eq!(LlamaConfig::from_hf_json(&v5).unwrap().rope_base, 5e5);
        let llama3 = json!({
            "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 8192, "rope_theta": 500000.0, "tie_word_embeddings": true,
            "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        });
        let config = LlamaConfig::from_hf_json(&llama3).unwrap();
        assert!(config.rope_scaling.is_some());
        assert_eq!(
            config.to_hf_json(None, None)["rope_scaling"],
            llama3["rope_scaling"],
            "written back as read"
        );
        assert_eq!(
            LlamaConfig::from_hf_json(&config.to_hf_json(None, None)).unwrap(),
            config
        );
        let mut v5 = llama3.clone();
        v5["rope_parameters"] = v5["rope_scaling"].take();
        v5["rope_parameters"]["rope_theta"] = json!(500000.0);
        assert_eq!(LlamaConfig::from_hf_json(&v5).unwrap(), config);
        let config = LlamaConfig::from_hf_json(&qwen).unwrap();
        // A checkpoint's own config reads back as it was written.
        let written = config.to_hf_json(Some(1), Some(2));
        assert_eq!(written["architectures"], json!(["Qwen2ForCausalLM"]));
        assert_eq!(LlamaConfig::from_hf_json(&written).unwrap(), config);
        // Mistral v0.2 on: no window, and written so, since Transformers'
        // Mistral assumes one of 4096 where the config is silent.
        let mistral = json!({
            "model_type": "mistral", "vocab_size": 32768, "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 14336, "rope_theta": 1000000.0, "sliding_window": null,
            "head_dim": 128,
        });
        let config = LlamaConfig::from_hf_json(&mistral).unwrap();
        assert_eq!(config.architecture, Architecture::Mistral);
        assert_eq!(config.sliding_window, None);
        let written = config.to_hf_json(None, None);
        assert_eq!(written["sliding_window"], Value::Null);
        assert!(written.as_object().unwrap().contains_key("sliding_window"));
        assert_eq!(LlamaConfig::from_hf_json(&written).unwrap(), config);
    }

    #[test]
    fn a_shape_counts_its_parameters_as_its_weights_do() {
        // SmolLM2-135M-Instruct's GGUF holds 134,515,008.
        assert_eq!(LlamaConfig::smollm2_135m().parameters(), 134_515_008);
        let untied = LlamaConfig {
            tied_embeddings: false,
            ..LlamaConfig::smollm2_135m()
        };
        assert_eq!(untied.parameters(), 134_515_008 + 49_152 * 576);
        let huge = LlamaConfig {
            hidden: usize::MAX / 2,
            ..LlamaConfig::tiny(40)
        };
        assert_eq!(huge.parameters(), u64::MAX);
    }

    #[test]
    fn what_the_decoder_cannot_compute_is_refused_by_name() {
        let base = serde_json::to_value(LlamaConfig::tiny(40)).unwrap();
        let refused = |change: Value| {
            let mut json = base.clone();
            json.as_object_mut()
                .unwrap()
                .extend(change.as_object().unwrap().clone());
            LlamaConfig::from_hf_json(&json).unwrap_err().to_string()
        };
        assert!(refused(json!({"model_type": "gemma"})).contains("`gemma`"));
        assert!(refused(json!({"rope_scaling": {"rope_type": "llama3"}})).contains("factor"));
        assert!(
            refused(json!({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
                .contains("linear")
        );
        assert!(
            refused(json!({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}))
                .contains("yarn")
        );
        assert!(refused(json!({"attention_bias": true})).contains("attention_bias"));
        assert!(refused(json!({"use_sliding_window": true})).contains("use_sliding_window"));
        assert!(refused(json!({"hidden_act": "gelu"})).contains("gelu"));
        assert!(
            refused(json!({"layer_types": ["full_attention", "sliding_attention"]}))
                .contains("sliding_attention")
        );
        assert!(refused(json!({"num_key_value_heads": 3})).contains("evenly"));
        assert!(refused(json!({"num_attention_heads": 0})).contains("zero"));
        assert!(refused(json!({"model_type": "mistral", "sliding_window": 0})).contains("zero"));
        let mut no_kv = base.clone();
        no_kv.as_object_mut().unwrap().remove("num_key_value_heads");
        let config = LlamaConfig::from_hf_json(&no_kv).unwrap();
        assert_eq!(config.kv_heads, config.heads, "as many as the query heads");
    }
}
