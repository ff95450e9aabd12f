//! LoRA: fine-tuning a low-rank update `x·A·B`, scaled by `alpha / rank`
//! (or rsLoRA's `alpha / √rank`), of chosen projections while every weight
//! of the model stays frozen.
//!
//! The optimizer then keeps moments for the adapters alone (well under a
//! percent of the weights of a 135M model at rank 16) and no gradient of a
//! frozen weight is computed or held: a model several times larger trains
//! in the same memory. Adapters are saved in PEFT's layout and names, so that
//! PEFT puts them on the base model; Forge's checkpoints also hold the weights
//! with the update folded in, which load anywhere as a plain model.

use crate::config::LlamaConfig;
use crate::llama::{LoadError, WeightSource, product_in, tensor_names};
use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Tensor};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// The projections LoRA can adapt, by their Hugging Face names, in the
/// order each layer holds them.
pub const TARGETS: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// Which projections are adapted, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Lora {
    /// The rank of each update; 0 trains every weight instead (full
    /// fine-tuning).
    pub rank: usize,
    /// The update is scaled by `alpha / rank` (`alpha / √rank` with
    /// `rslora`).
    pub alpha: f32,
    /// The adapted projections of every layer, by their Hugging Face names
    /// (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`,
    /// `down_proj`).
    pub targets: Vec<String>,
    /// Rank-stabilised LoRA: the update scaled by `alpha / √rank`, which
    /// keeps its size as the rank grows, where `alpha / rank` shrinks it
    /// (and a higher rank learns no faster).
    pub rslora: bool,
}

impl Default for Lora {
    fn default() -> Self {
        Self {
            rank: 0,
            alpha: 16.0,
            targets: TARGETS.map(str::to_owned).to_vec(),
            rslora: false,
        }
    }
}

impl Lora {
    pub fn enabled(&self) -> bool {
        self.rank > 0
    }

    /// `LoRA`, or `rsLoRA` with `rslora`: how reports name the adapters.
    pub fn kind(&self) -> &'static str {
        if self.rslora { "rsLoRA" } else { "LoRA" }
    }

    pub fn scale(&self) -> f32 {
        let rank = self.rank as f32;
        self.alpha / if self.rslora { rank.sqrt() } else { rank }
    }

    /// Refuses a setting that adapts nothing or names what is not a projection.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err("lora.alpha must be a positive number".into());
        }
        if self.targets.is_empty() {
            return Err("lora.targets must name at least one projection".into());
        }
        for (at, target) in self.targets.iter().enumerate() {
            if !TARGETS.contains(&target.as_str()) {
                return Err(format!(
                    "lora.targets: `{target}` is not a projection (expected some of {})",
                    TARGETS.join(", ")
                ));
            }
            if self.targets[..at].contains(target) {
                return Err(format!("lora.targets names `{target}` twice"));
            }
        }
        Ok(())
    }

    /// Fails where the rank exceeds a side of a projection it adapts: an
    /// update `x·A·B` through more dimensions than the projection has
    /// learns nothing a full-rank one would not, yet its adapters' memory
    /// (and the optimizer's) grows with the rank without bound.
    pub fn check_fits(&self, config: &LlamaConfig) -> Result<(), String> {
        let narrowest = self
            .adapted(config)
            .into_iter()
            .map(|(_, target, [out, input])| (out.min(input), target))
            .min();
        match narrowest {
            Some((side, target)) if self.rank > side => Err(format!(
                "lora.rank {} exceeds the {side} dimensions of the model's `{target}` \
                 projection: pick a rank of at most {side} (8 to 64 is usual)",
                self.rank
            )),
            _ => Ok(()),
        }
    }

    pub fn adapts(&self, target: &str) -> bool {
        self.enabled() && self.targets.iter().any(|t| t == target)
    }

    /// PEFT's name and shape of each adapter tensor of a model of `config`,
    /// in the order of the model's projections: `…lora_A.weight` `[rank, in]`,
    /// then `…lora_B.weight` `[out, rank]`.
    pub fn tensor_names(&self, config: &LlamaConfig) -> Vec<(String, Vec<usize>)> {
        self.adapted(config)
            .into_iter()
            .flat_map(|(projection, _, [out, input])| {
                let peft = |part: &str| format!("base_model.model.{projection}.{part}.weight");
                [
                    (peft("lora_A"), vec![self.rank, input]),
                    (peft("lora_B"), vec![out, self.rank]),
                ]
            })
            .collect()
    }

    /// Each projection of a model of `config` that these adapters adapt,
    /// in the model's order: its name (less `.weight`), its target
    /// (`q_proj`, …) and its shape `[out, in]`.
    fn adapted(&self, config: &LlamaConfig) -> Vec<(String, String, [usize; 2])> {
        tensor_names(config)
            .into_iter()
            .filter_map(|(name, shape)| {
                let projection = name.strip_suffix(".weight")?;
                let target = projection.rsplit('.').next()?;
                let shape = <[usize; 2]>::try_from(shape).ok()?;
                self.adapts(target)
                    .then(|| (projection.to_owned(), target.to_owned(), shape))
            })
            .collect()
    }

    /// PEFT's `adapter_config.json` for these adapters on `base`.
    pub fn peft_config(&self, base: &str) -> serde_json::Value {
        serde_json::json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": base,
            "r": self.rank,
            "lora_alpha": self.alpha,
            "target_modules": self.targets,
            "lora_dropout": 0.0,
            "bias": "none",
            "fan_in_fan_out": false,
            "use_rslora": self.rslora,
            "inference_mode": true,
        })
    }
}

/// Adapters as they start: `A` uniform within PEFT's bounds (±1/√in, the
/// Kaiming bound with a = √5) and `B` zero, so that the adapted model starts
/// as its base, the same for the same seed.
pub struct FreshAdapters(ChaCha8Rng);

impl FreshAdapters {
    pub fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Apart from the stream that draws a tiny model's weights.
        rng.set_stream(1);
        Self(rng)
    }
}

impl WeightSource for FreshAdapters {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let len = shape.iter().product();
        if name.ends_with("lora_B.weight") {
            return Ok(vec![0.0; len]);
        }
        let bound = 1.0 / (shape[1] as f32).sqrt();
        Ok((0..len)
            .map(|_| self.0.random_range(-bound..bound))
            .collect())
    }
}

/// A projection's low-rank update.
#[derive(Module, Debug)]
pub struct Adapter<B: Backend> {
    /// `A`, stored `[in, rank]` as the model stores its projections.
    down: Param<Tensor<B, 2>>,
    /// `B`, `[rank, out]`.
    up: Param<Tensor<B, 2>>,
    scale: f32,
}

impl<B: Backend> Adapter<B> {
    pub fn new(down: Param<Tensor<B, 2>>, up: Param<Tensor<B, 2>>, scale: f32) -> Self {
        Self { down, up, scale }
    }

    /// The update of `x`'s projection, computed through the rank: never the
    /// full `[in, out]` product.
    pub fn apply(&self, x: Tensor<B, 2>, dtype: Option<FloatDType>) -> Tensor<B, 2> {
        let low = product_in(x, self.down.val(), dtype);
        product_in(low, self.up.val(), dtype).mul_scalar(self.scale)
    }

    /// The update as a weight `[in, out]`, to fold into the projection.
    pub fn delta(&self) -> Tensor<B, 2> {
        self.down.val().matmul(self.up.val()).mul_scalar(self.scale)
    }

    /// `A` and `B` in PEFT's layout, `[rank, in]` and `[out, rank]`.
    pub fn peft_tensors(&self) -> [Tensor<B, 2>; 2] {
        [self.down.val().transpose(), self.up.val().transpose()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint;
    use crate::llama::Llama;
    use crate::train::CpuTrain;
    use crate::train::config::Activations;
    use crate::train::objective::{Passes, Sequence, Span, sft_gradients};
    use crate::{Cpu, LlamaConfig};
    use burn::module::AutodiffModule;
    use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
    use forge_model::tokenizer::ModelTokenizer;

    fn lora() -> Lora {
        Lora {
            rank: 2,
            alpha: 4.0,
            targets: ["q_proj", "v_proj", "down_proj"]
                .map(str::to_owned)
                .to_vec(),
            rslora: false,
        }
    }

    /// Adapters as after some training: `B` no longer zero.
    struct Trained(ChaCha8Rng);

    impl WeightSource for Trained {
        fn tensor(&mut self, _name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
            let len = shape.iter().product();
            Ok((0..len).map(|_| self.0.random_range(-0.5..0.5)).collect())
        }
    }

    fn logits<B: Backend>(model: &Llama<B>) -> Vec<f32> {
        model
            .forward_batch(&[&[1, 2, 3, 4, 5]])
            .into_data()
            .to_vec()
            .unwrap()
    }

    #[test]
    fn fresh_adapters_start_the_model_as_its_base() {
        let base = Llama::<Cpu>::init(LlamaConfig::tiny(32), 7, &Default::default());
        let adapted = base
            .clone()
            .with_lora(&lora(), &mut FreshAdapters::new(7))
            .unwrap();
        assert_eq!(logits(&adapted), logits(&base));
    }

    #[test]
    fn training_moves_the_adapters_and_nothing_else() {
        let device = Default::default();
        let model = Llama::<CpuTrain>::init(LlamaConfig::tiny(32), 7, &device)
            .with_lora(&lora(), &mut FreshAdapters::new(7))
            .unwrap();
        let before = model.valid().named_tensors();
        let loss = model.forward_batch(&[&[1, 2, 3]]).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        // `A` and `B` of three projections in each of two layers: no frozen
        // weight has a gradient, so the optimizer keeps no state for one.
        assert_eq!(grads.len(), 12);
        let mut optimizer = AdamWConfig::new().init();
        let model = optimizer.step(1e-2, model, grads);
        let after = model.valid().named_tensors();
        for ((name, before), (_, after)) in before.iter().zip(&after) {
            let adapted = ["q_proj", "v_proj", "down_proj"]
                .iter()
                .any(|target| name.contains(target));
            assert_eq!(adapted, before != after, "{name}");
        }
    }

    #[test]
    fn rank_stabilised_adapters_scale_by_the_root_of_the_rank() {
        let rslora = Lora {
            rank: 16,
            alpha: 8.0,
            rslora: true,
            ..Lora::default()
        };
        assert_eq!(
            (
                rslora.scale(),
                Lora {
                    rslora: false,
                    ..rslora.clone()
                }
                .scale()
            ),
            (2.0, 0.5)
        );
        // Saved as PEFT marks them, and read back so.
        let dir = tempfile::tempdir().unwrap();
        let model = Llama::<Cpu>::init(LlamaConfig::tiny(32), 7, &Default::default())
            .with_lora(&rslora, &mut FreshAdapters::new(7))
            .unwrap();
        checkpoint::save_adapter(dir.path(), &model, "tiny", "digest").unwrap();
        let saved = checkpoint::saved_adapters(dir.path()).unwrap();
        assert_eq!(saved.lora, rslora);
    }

    #[test]
    fn a_checkpoint_folds_the_adapters_in_and_keeps_them_for_peft() {
        let dir = tempfile::tempdir().unwrap();
        let device = Default::default();
        let base = Llama::<Cpu>::init(LlamaConfig::tiny(32), 7, &device);
        let trained = || Trained(ChaCha8Rng::seed_from_u64(3));
        let adapted = base.clone().with_lora(&lora(), &mut trained()).unwrap();
        checkpoint::save(dir.path(), &adapted, &ModelTokenizer::byte_level()).unwrap();
        let digest = |model: &Llama<Cpu>| checkpoint::weights_digest(&model.named_tensors());
        checkpoint::save_adapter(dir.path(), &adapted, "tiny", &digest(&base)).unwrap();
        // The adapters go with their base alone.
        let saved = checkpoint::saved_adapters(dir.path()).unwrap();
        assert_eq!(
            (&saved.lora, saved.base.as_deref()),
            (&lora(), Some("tiny"))
        );
        saved.check_base(&digest(&base), "").unwrap();
        let other = Llama::<Cpu>::init(LlamaConfig::tiny(32), 8, &device);
        let refused = saved.check_base(&digest(&other), "").unwrap_err();
        assert!(
            refused.to_string().contains("other base weights"),
            "{refused}"
        );
        let expected = logits(&adapted);
        assert_ne!(expected, logits(&base));

        // The plain model, adapters folded in: as saved, and as rollouts
        // decode with it.
        let close = |logits: Vec<f32>| {
            for (merged, expected) in logits.iter().zip(&expected) {
                assert!((merged - expected).abs() <= 1e-5 * expected.abs().max(1.0));
            }
        };
        close(logits(&Llama::<Cpu>::load(dir.path(), &device).unwrap()));
        let folded = adapted.clone().fold_adapters();
        assert!(folded.lora().is_none() && folded.adapter_tensors().is_empty());
        close(logits(&folded));
        // The adapters, put back on the base: the same model exactly.
        let mut tensors = saved.tensors(&base).unwrap();
        let names = tensors.names();
        let reloaded = base.with_lora(&lora(), &mut tensors).unwrap();
        assert_eq!(logits(&reloaded), expected);

        assert_eq!(names.len(), 12);
        assert!(
            names.contains(
                &"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight".to_owned()
            )
        );
        let config: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("adapter/adapter_config.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (&config["peft_type"], &config["r"], &config["lora_alpha"]),
            (&"LORA".into(), &2.into(), &4.0.into())
        );
        assert_eq!(config["target_modules"], serde_json::json!(lora().targets));

        // A checkpoint of a run without LoRA has none to resume from.
        std::fs::remove_dir_all(dir.path().join("adapter")).unwrap();
        let Err(err) = checkpoint::saved_adapters(dir.path()) else {
            panic!("adapters read from a checkpoint without them");
        };
        assert!(err.to_string().contains("holds no LoRA adapters"), "{err}");
    }

    /// Four sequences of 17 tokens, stepping through the vocabulary by `stride`.
    fn sequences(stride: u32) -> Vec<Sequence> {
        (0..4)
            .map(|row| Sequence {
                tokens: (0..17).map(|at| (at * stride + row * 3) % 32).collect(),
                spans: vec![Span {
                    start: 1,
                    logprobs: vec![0.0; 16],
                }],
            })
            .collect()
    }

    /// The SFT loss of `sequences` after each of `steps` AdamW steps on them.
    fn fit(
        mut model: Llama<CpuTrain>,
        data: &[Sequence],
        steps: usize,
    ) -> (Llama<CpuTrain>, Vec<f64>) {
        let mut optimizer = AdamWConfig::new().init();
        let mut losses = Vec::new();
        for _ in 0..steps {
            let passes = Passes {
                micro_batch: data.len(),
                activations: Activations::Kept,
            };
            let (grads, stats) = sft_gradients(&model, data, passes);
            losses.push(stats.loss);
            model = optimizer.step(1e-2, model, grads);
        }
        (model, losses)
    }

    #[test]
    fn adapters_learn_what_their_frozen_model_does_not_know() {
        let device = Default::default();
        // A model trained on one pattern (adapters need a trained model:
        // a random one's small frozen embedding caps its logits).
        let random = Llama::<CpuTrain>::init(LlamaConfig::tiny(32), 7, &device);
        let (trained, _) = fit(random, &sequences(7), 40);
        // Rank-8 adapters of every projection, trained on another.
        let lora = Lora {
            rank: 8,
            ..Lora::default()
        };
        let adapted = trained
            .with_lora(&lora, &mut FreshAdapters::new(7))
            .unwrap();
        let (_, losses) = fit(adapted, &sequences(5), 50);
        let (first, last) = (losses[0], losses[losses.len() - 1]);
        assert!(first > 5.0 && last < 0.1, "{first} → {last}");
    }

    #[test]
    fn settings_that_adapt_nothing_or_no_projection_are_refused() {
        let with = |targets: &[&str]| Lora {
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
            ..lora()
        };
        assert!(lora().validate().is_ok());
        let err = with(&["q_proj", "lm_head"]).validate().unwrap_err();
        assert!(err.contains("`lm_head` is not a projection"), "{err}");
        let err = with(&["q_proj", "q_proj"]).validate().unwrap_err();
        assert!(err.contains("names `q_proj` twice"), "{err}");
        assert!(with(&[]).validate().unwrap_err().contains("at least one"));
        let err = Lora {
            alpha: 0.0,
            ..lora()
        }
        .validate()
        .unwrap_err();
        assert!(err.contains("lora.alpha"), "{err}");
        // A rank wider than an adapted projection is refused, naming it.
        let config = LlamaConfig::tiny(32);
        let ranked = |rank, targets: &[&str]| Lora {
            rank,
            ..with(targets)
        };
        let err = ranked(33, &["q_proj", "k_proj"])
            .check_fits(&config)
            .unwrap_err();
        assert!(
            err.contains("exceeds the 32 dimensions of the model's `k_proj`"),
            "{err}"
        );
        assert!(
            ranked(32, &["q_proj", "k_proj"])
                .check_fits(&config)
                .is_ok()
        );
        assert!(ranked(64, &["q_proj"]).check_fits(&config).is_ok());
        let model = Llama::<Cpu>::init(config, 7, &Default::default());
        let refused = model.with_lora(&ranked(65, &["q_proj"]), &mut FreshAdapters::new(7));
        assert!(refused.is_err());
        // Off, the targets are not read.
        assert!(
            Lora {
                rank: 0,
                ..with(&[])
            }
            .validate()
            .is_ok()
        );
    }
}
