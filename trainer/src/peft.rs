//! LoRA adapters as PEFT saves them — `adapter_config.json` and
//! `adapter_model.safetensors` in a directory — whether PEFT trained them or
//! a Forge LoRA run did (its checkpoints keep theirs in `adapter/`), read to
//! be folded into their base model: what PEFT's `merge_and_unload` does,
//! giving a plain model every Forge command runs.
//!
//! Only what Forge's model holds is read: LoRA (or rsLoRA) on the
//! projections of every layer, one rank and alpha for all. Any other
//! setting PEFT can save (DoRA, adapted embeddings or heads, some layers
//! only, ranks per module…) is refused by name rather than folded wrong.

use crate::checkpoint::{SafetensorsSource, checkpoint_error};
use crate::llama::{Llama, LoadError};
use crate::lora::{Lora, TARGETS};
use burn::tensor::backend::Backend;
use forge_runtime::bom;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// PEFT's names of an adapter directory's files.
pub const CONFIG: &str = "adapter_config.json";
pub const WEIGHTS: &str = "adapter_model.safetensors";
/// Beside a Forge run's adapters: the digest of the base weights they were
/// trained on ([`crate::checkpoint::weights_digest`]).
pub const BASE_DIGEST: &str = "base_weights.sha256";

/// Settings of PEFT's LoRA config that Forge cannot fold, and what they
/// mean; each must be absent, null, false or empty.
const UNSUPPORTED: [(&str, &str); 10] = [
    ("use_dora", "DoRA's magnitude vectors"),
    (
        "fan_in_fan_out",
        "weights stored transposed (GPT-2's Conv1D)",
    ),
    ("lora_bias", "biases trained beside the adapters"),
    ("modules_to_save", "whole modules saved beside the adapters"),
    ("trainable_token_indices", "trained rows of the embedding"),
    ("layers_to_transform", "adapters on some layers only"),
    ("layer_replication", "replicated layers"),
    ("exclude_modules", "projections excluded by name"),
    ("rank_pattern", "ranks per module"),
    ("alpha_pattern", "alphas per module"),
];

/// An adapter directory's LoRA adapters.
#[derive(Debug, Clone)]
pub struct PeftAdapters {
    dir: PathBuf,
    /// The adapters as Forge applies them.
    pub lora: Lora,
    /// The base model as the config names it (`base_model_name_or_path`):
    /// a Hugging Face id or a path for PEFT, `model.init` for a Forge run.
    pub base: Option<String>,
    /// The digest of the base weights, where a Forge run recorded it.
    pub base_digest: Option<String>,
}

impl PeftAdapters {
    /// Reads and checks the config of the adapters in `dir`.
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        let path = dir.join(CONFIG);
        let error = |what: String| checkpoint_error(&path, what);
        let text = std::fs::read_to_string(&path).map_err(|err| error(err.to_string()))?;
        let config: Value =
            serde_json::from_str(bom::strip(&text)).map_err(|err| error(err.to_string()))?;
        let lora = lora_of(&config).map_err(error)?;
        let digest_path = dir.join(BASE_DIGEST);
        let base_digest = match std::fs::read_to_string(&digest_path) {
            Ok(digest) => Some(digest.trim().to_owned()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(checkpoint_error(&digest_path, err)),
        };
        Ok(Self {
            dir: dir.to_owned(),
            lora,
            base: config["base_model_name_or_path"]
                .as_str()
                .map(str::to_owned),
            base_digest,
        })
    }

    /// The adapters' tensors, checked to be those of `base`'s adapted
    /// projections and nothing else: a tensor Forge would not read (an
    /// adapted embedding, say) means a model it would fold wrong.
    pub fn tensors<B: Backend>(&self, base: &Llama<B>) -> Result<SafetensorsSource, LoadError> {
        let path = self.dir.join(WEIGHTS);
        let source = SafetensorsSource::file(path.clone())?;
        let expected: BTreeSet<String> = self
            .lora
            .tensor_names(&base.config)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if let Some(extra) = source.names().into_iter().find(|n| !expected.contains(n)) {
            return Err(checkpoint_error(
                &path,
                format!(
                    "tensor `{extra}` is not an adapter of a projection the config's \
                     target_modules name on this base ({} layers)",
                    base.config.layers
                ),
            ));
        }
        Ok(source)
    }

    /// Refuses base weights (by their [`weights_digest`]) other than those a
    /// Forge run trained the adapters on, saying what to do (`remedy`):
    /// on other weights, the adapters are worth nothing.
    ///
    /// [`weights_digest`]: crate::checkpoint::weights_digest
    pub fn check_base(&self, digest: &str, remedy: &str) -> Result<(), LoadError> {
        let error = |what: String| Err(checkpoint_error(&self.dir, format!("{what}: {remedy}")));
        match &self.base_digest {
            Some(recorded) if recorded == digest => Ok(()),
            Some(recorded) => error(format!(
                "holds LoRA adapters trained on other base weights (sha256 {recorded}) than \
                 these ({digest})"
            )),
            None => error(format!(
                "records no digest of the base weights its adapters were trained on ({BASE_DIGEST})"
            )),
        }
    }

    /// `base` with the adapters on its projections (trainable; every
    /// weight frozen), as a LoRA run holds it.
    pub fn apply<B: Backend>(&self, base: Llama<B>) -> Result<Llama<B>, LoadError> {
        let mut tensors = self.tensors(&base)?;
        base.with_lora(&self.lora, &mut tensors)
    }
}

/// The adapters a PEFT LoRA config describes, or why Forge cannot fold them.
fn lora_of(config: &Value) -> Result<Lora, String> {
    match config["peft_type"].as_str() {
        Some("LORA") => {}
        Some(other) => return Err(format!("peft_type is `{other}`; only LORA adapters fold")),
        None => return Err("peft_type is missing: not a PEFT adapter config".into()),
    }
    for (key, meaning) in UNSUPPORTED {
        let unset = match &config[key] {
            Value::Null | Value::Bool(false) => true,
            Value::Array(items) => items.is_empty(),
            Value::Object(entries) => entries.is_empty(),
            _ => false,
        };
        if !unset {
            return Err(format!(
                "`{key}` is set ({}): {meaning} are not supported",
                config[key]
            ));
        }
    }
    match config["bias"].as_str() {
        None | Some("none") => {}
        Some(other) => {
            return Err(format!(
                "bias is `{other}`: trained biases are not supported"
            ));
        }
    }
    let rank = config["r"]
        .as_u64()
        .filter(|&rank| rank > 0)
        .ok_or("r must be a positive integer")?;
    let alpha = config["lora_alpha"]
        .as_f64()
        .filter(|&alpha| alpha > 0.0 && alpha.is_finite())
        .ok_or("lora_alpha must be a positive number")?;
    let lora = Lora {
        rank: rank as usize,
        alpha: alpha as f32,
        targets: targets_of(&config["target_modules"])?,
        rslora: config["use_rslora"].as_bool().unwrap_or(false),
    };
    lora.validate()?;
    Ok(lora)
}

/// The projections `target_modules` adapts, in the order of [`TARGETS`].
/// PEFT matches a listed name against the end of each module's path
/// (`q_proj`, `self_attn.q_proj`); `all-linear` is every projection.
fn targets_of(modules: &Value) -> Result<Vec<String>, String> {
    let listed: Vec<&str> = match modules {
        Value::String(all) if all == "all-linear" => TARGETS.to_vec(),
        Value::String(pattern) => {
            return Err(format!(
                "target_modules is the regular expression `{pattern}`: list the projections instead"
            ));
        }
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().ok_or("target_modules must be names"))
            .collect::<Result<_, _>>()?,
        _ => return Err("target_modules must list the adapted projections".into()),
    };
    let mut targets = BTreeSet::new();
    for module in listed {
        let name = module.rsplit('.').next().unwrap_or(module);
        let at = TARGETS.iter().position(|&target| target == name).ok_or_else(|| {
            format!(
                "target_modules names `{module}`, not a projection of every layer (expected some of {})",
                TARGETS.join(", ")
            )
        })?;
        targets.insert(at);
    }
    Ok(targets
        .into_iter()
        .map(|at| TARGETS[at].to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, LlamaConfig};
    use burn::tensor::{TensorData, bf16};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use safetensors::Dtype;
    use serde_json::json;

    /// PEFT's config as it saves one (its defaults), with `changes` on top.
    fn config(changes: Value) -> Value {
        let mut config = json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
            "r": 4,
            "lora_alpha": 8,
            "lora_dropout": 0.05,
            "target_modules": ["v_proj", "q_proj", "mlp.down_proj"],
            "bias": "none",
            "fan_in_fan_out": false,
            "use_rslora": false,
            "use_dora": false,
            "modules_to_save": null,
            "layers_to_transform": null,
            "layers_pattern": null,
            "rank_pattern": {},
            "alpha_pattern": {},
            "init_lora_weights": true,
            "inference_mode": true,
            "revision": null,
        });
        for (key, value) in changes.as_object().unwrap() {
            config[key] = value.clone();
        }
        config
    }

    fn base() -> Llama<Cpu> {
        Llama::init(LlamaConfig::tiny(32), 5, &Default::default())
    }

    /// Random adapters for `lora` on `base`, as bf16 (as PEFT saves those of
    /// a bf16 model): PEFT's names and layout, and each tensor's values.
    fn random_adapters(lora: &Lora, base: &Llama<Cpu>) -> Vec<(String, Vec<usize>, Vec<bf16>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        lora.tensor_names(&base.config)
            .into_iter()
            .map(|(name, shape)| {
                let len = shape.iter().product();
                let values = (0..len)
                    .map(|_| bf16::from_f32(rng.random_range(-0.5..0.5)))
                    .collect();
                (name, shape, values)
            })
            .collect()
    }

    fn write(dir: &Path, config: &Value, tensors: &[(String, Vec<usize>, Vec<bf16>)]) {
        std::fs::write(dir.join(CONFIG), config.to_string()).unwrap();
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, values)| values.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views = tensors.iter().zip(&bytes).map(|((name, shape, _), bytes)| {
            let view = safetensors::tensor::TensorView::new(Dtype::BF16, shape.clone(), bytes);
            (name.clone(), view.unwrap())
        });
        std::fs::write(
            dir.join(WEIGHTS),
            safetensors::serialize(views, None).unwrap(),
        )
        .unwrap();
    }

    fn opened(config: Value) -> Result<PeftAdapters, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG), config.to_string()).unwrap();
        PeftAdapters::open(dir.path()).map_err(|err| err.to_string())
    }

    #[test]
    fn peft_adapters_fold_into_their_base_as_peft_merges_them() {
        for rslora in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let config = config(json!({ "use_rslora": rslora }));
            let base = base();
            std::fs::write(dir.path().join(CONFIG), config.to_string()).unwrap();
            let adapters = PeftAdapters::open(dir.path()).unwrap();
            // Listed as PEFT may list them, read in the model's order.
            assert_eq!(adapters.lora.targets, ["q_proj", "v_proj", "down_proj"]);
            assert_eq!(
                adapters.base.as_deref(),
                config["base_model_name_or_path"].as_str()
            );
            assert_eq!(adapters.base_digest, None);
            let tensors = random_adapters(&adapters.lora, &base);
            write(dir.path(), &config, &tensors);

            let merged = adapters
                .apply(base.clone())
                .unwrap()
                .fold_adapters()
                .named_tensors();
            // PEFT's merge, computed apart: W + scale·B·A on the adapted
            // projections, `[out, in]`; every other tensor as it was.
            let scale = if rslora { 8.0 / 2.0 } else { 8.0 / 4.0 };
            let value = |name: &str| {
                let (_, shape, values) = tensors.iter().find(|(n, _, _)| n == name).unwrap();
                (
                    shape.clone(),
                    values.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
                )
            };
            let mut adapted = 0;
            for ((name, before), (_, after)) in base.named_tensors().iter().zip(&merged) {
                let projection = name.strip_suffix(".weight").unwrap_or(name);
                let peft = |part: &str| format!("base_model.model.{projection}.{part}.weight");
                if !tensors.iter().any(|(n, _, _)| *n == peft("lora_A")) {
                    assert_eq!(before, after, "{name}");
                    continue;
                }
                adapted += 1;
                let ((a_shape, a), (_, b)) = (value(&peft("lora_A")), value(&peft("lora_B")));
                let (rank, inputs) = (a_shape[0], a_shape[1]);
                let w = before.to_vec::<f32>().unwrap();
                let expected: Vec<f32> = (0..w.len())
                    .map(|at| {
                        let (row, col) = (at / inputs, at % inputs);
                        let update: f32 = (0..rank)
                            .map(|r| b[row * rank + r] * a[r * inputs + col])
                            .sum();
                        w[at] + scale * update
                    })
                    .collect();
                TensorData::new(expected, before.shape.clone())
                    .assert_approx_eq::<f32>(after, burn::tensor::Tolerance::absolute(1e-5));
            }
            assert_eq!(adapted, 3 * base.config.layers);
        }
    }

    #[test]
    fn what_forge_cannot_fold_is_refused_by_name() {
        for (change, named) in [
            (json!({ "use_dora": true }), "`use_dora` is set"),
            (
                json!({ "modules_to_save": ["lm_head"] }),
                "`modules_to_save` is set",
            ),
            (
                json!({ "rank_pattern": { "q_proj": 8 } }),
                "ranks per module",
            ),
            (json!({ "layers_to_transform": [0] }), "some layers only"),
            (json!({ "bias": "lora_only" }), "bias is `lora_only`"),
            (json!({ "peft_type": "IA3" }), "only LORA"),
            (json!({ "r": 0 }), "r must be a positive integer"),
            (
                json!({ "lora_alpha": 0 }),
                "lora_alpha must be a positive number",
            ),
            (
                json!({ "target_modules": ["q_proj", "lm_head"] }),
                "names `lm_head`",
            ),
            (
                json!({ "target_modules": ".*attn.*" }),
                "regular expression",
            ),
        ] {
            let err = opened(config(change.clone())).unwrap_err();
            assert!(err.contains(named), "{change}: {err}");
            assert!(err.contains(CONFIG), "{change}: {err}");
        }
        let all = opened(config(json!({ "target_modules": "all-linear" }))).unwrap();
        assert_eq!(all.lora.targets, TARGETS);
        let err = opened(json!({ "some": "json" })).unwrap_err();
        assert!(err.contains("not a PEFT adapter config"), "{err}");
    }

    /// A directory for adapters of the base's `q_proj` (their config there,
    /// their tensors to write), those adapters opened, and the base.
    fn q_proj_adapters() -> (tempfile::TempDir, Value, PeftAdapters, Llama<Cpu>) {
        let dir = tempfile::tempdir().unwrap();
        let config = config(json!({ "target_modules": ["q_proj"] }));
        write(dir.path(), &config, &[]);
        let adapters = PeftAdapters::open(dir.path()).unwrap();
        (dir, config, adapters, base())
    }

    #[test]
    fn adapters_holding_values_that_are_not_numbers_are_refused() {
        let (dir, config, adapters, base) = q_proj_adapters();
        for (value, said) in [(bf16::NAN, "NaN"), (bf16::INFINITY, "inf")] {
            let mut tensors = random_adapters(&adapters.lora, &base);
            tensors[1].2[3] = value;
            write(dir.path(), &config, &tensors);
            let err = adapters.apply(base.clone()).unwrap_err().to_string();
            let expected = format!("tensor `{}` holds {said} (element 3)", tensors[1].0);
            assert!(err.contains(&expected), "{err}");
        }
    }

    #[test]
    fn adapters_whose_product_overflows_are_not_written_as_a_model() {
        let (dir, config, adapters, base) = q_proj_adapters();
        let mut tensors = random_adapters(&adapters.lora, &base);
        for (_, _, values) in &mut tensors {
            values.fill(bf16::from_f32(1e30));
        }
        write(dir.path(), &config, &tensors);
        let adapted = adapters.apply(base).unwrap();
        let out = dir.path().join("merged");
        let tokenizer = forge_model::tokenizer::ModelTokenizer::byte_level();
        let err = crate::checkpoint::save(&out, &adapted, &tokenizer).unwrap_err();
        assert!(
            err.to_string().contains("not writing a broken model"),
            "{err}"
        );
    }

    #[test]
    fn tensors_the_config_does_not_account_for_are_refused() {
        let (dir, config, adapters, base) = q_proj_adapters();
        // An adapted embedding beside the projections' adapters.
        let mut tensors = random_adapters(&adapters.lora, &base);
        let embedding = "base_model.model.model.embed_tokens.lora_embedding_A".to_owned();
        tensors.push((embedding.clone(), vec![4, 32], vec![bf16::ZERO; 128]));
        write(dir.path(), &config, &tensors);
        let err = adapters.apply(base.clone()).unwrap_err().to_string();
        assert!(err.contains(&embedding), "{err}");
        // The second layer's adapter missing.
        tensors.truncate(2);
        write(dir.path(), &config, &tensors);
        let err = adapters.apply(base).unwrap_err().to_string();
        assert!(err.contains("layers.1.self_attn.q_proj.lora_A"), "{err}");
    }
}
