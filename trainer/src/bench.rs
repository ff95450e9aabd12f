//! Throughput of the policy model on a backend: a forward pass, a training
//! step (forward, backward and AdamW over whole sequences), batched
//! decoding with the KV cache, and multi-turn conversations decoded as
//! rollouts decode them (each turn going on from what the last one read)
//! and, for comparison, with every turn's prompt read whole. `forge bench
//! model` prints these; `scripts/gpu/bench_torch.py` measures the same
//! shapes in PyTorch (conversations aside), so the two tables compare
//! directly.
//!
//! Tokens are random and the weights are random unless a model file is
//! given: throughput depends on the shapes alone, so the benchmark needs no
//! download.

use crate::accelerator::{self, Accelerator, OnBackend};
use crate::config::LlamaConfig;
use crate::kv_cache::Prefix;
use crate::llama::{Llama, Precision};
use crate::lora::{FreshAdapters, Lora};
use crate::sampling::{Sampling, Stop};
use crate::train::config::Activations;
use crate::train::objective::{Passes, Sequence, Span, sft_gradients};
use anyhow::{Context, Result, bail};
use burn::module::AutodiffModule;
use burn::optim::{AdamWConfig, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// `batch` sequences of `seq` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub batch: usize,
    pub seq: usize,
}

impl std::str::FromStr for Shape {
    type Err = String;

    /// `BATCHxSEQ`, as in `16x1024`. The error, like a number's, leaves
    /// naming the text to the caller (a list names the item).
    fn from_str(text: &str) -> Result<Self, String> {
        let parse = |part: &str| part.trim().parse::<usize>().ok().filter(|n| *n > 0);
        match text.split_once(['x', 'X']) {
            Some((batch, seq)) => match (parse(batch), parse(seq)) {
                (Some(batch), Some(seq)) => Ok(Self { batch, seq }),
                _ => Err("expected BATCHxSEQ with positive numbers".to_owned()),
            },
            None => Err("expected BATCHxSEQ, as in 16x1024".to_owned()),
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.batch, self.seq)
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    /// The model's shape, with random weights, unless `weights` is given.
    pub config: LlamaConfig,
    /// A model file (GGUF or checkpoint) to measure instead.
    pub weights: Option<PathBuf>,
    /// The precision of the products with the weights.
    pub precision: Precision,
    /// LoRA adapters on every projection at this rank (0: none): training
    /// steps then update the adapters alone; forward passes and decoding
    /// run with them folded in, as rollouts do.
    pub lora_rank: usize,
    /// Forward passes (no gradient) over whole sequences.
    pub forward: Vec<Shape>,
    /// Training steps: every position's next token trained, AdamW.
    pub train: Vec<Shape>,
    /// How a training step's sequences go through the model: sequences a
    /// pass (the gradients of a step's micro-batches are accumulated), and
    /// what a pass keeps for its backward pass.
    pub passes: Passes,
    /// Decoding batch sizes.
    pub decode: Vec<usize>,
    /// Prompt tokens per decoded row.
    pub prompt: usize,
    /// Tokens sampled per decoded row (no stop token ends a row early).
    pub new_tokens: usize,
    /// Batch sizes of multi-turn conversations: `prompt` tokens, then
    /// `turns` times `new_tokens` sampled and (but after the last) a
    /// `message`-token reply appended.
    pub conversations: Vec<usize>,
    pub turns: usize,
    pub message: usize,
    /// Timed repetitions of each measurement, after one untimed warm-up
    /// (which pays for kernel compilation, and autotuning, on a GPU).
    pub repeats: usize,
    pub seed: u64,
}

impl BenchSpec {
    /// Fails on settings that would measure nothing.
    pub fn validate(&self) -> Result<()> {
        if self.repeats == 0 {
            bail!("repeats must be at least 1");
        }
        if self.passes.micro_batch == 0 {
            bail!("the micro-batch must be at least 1");
        }
        if self.decode.contains(&0) || self.conversations.contains(&0) {
            bail!("decoding batch sizes must be at least 1");
        }
        let decoding = !self.decode.is_empty() || !self.conversations.is_empty();
        if decoding && (self.prompt == 0 || self.new_tokens == 0) {
            bail!("decoding needs a prompt and new tokens (at least 1 each)");
        }
        if !self.conversations.is_empty() && self.turns == 0 {
            bail!("a conversation needs at least 1 turn");
        }
        if self.forward.is_empty() && self.train.is_empty() && !decoding {
            bail!("nothing to measure: every phase is `none`");
        }
        Ok(())
    }

    /// The most tokens any measured sequence holds.
    fn longest_sequence(&self) -> usize {
        let shapes = self
            .forward
            .iter()
            .chain(&self.train)
            .map(|shape| shape.seq);
        let decoded = (!self.decode.is_empty()).then_some(self.prompt + self.new_tokens);
        let conversed = (!self.conversations.is_empty()).then(|| {
            self.prompt + self.turns * self.new_tokens + self.turns.saturating_sub(1) * self.message
        });
        shapes.chain(decoded).chain(conversed).max().unwrap_or(0)
    }

    /// Refuses sequences longer than `config`'s context, or where it names
    /// none (a tiny model), than [`UNBOUNDED_LONGEST`]: past
    /// it the model computes nothing it was trained for, and attention's
    /// memory grows with the square of the length (100,000 tokens exhaust
    /// any machine's).
    fn check_context(&self, config: &LlamaConfig) -> Result<()> {
        let longest = self.longest_sequence();
        match config.context {
            Some(context) if longest > context => bail!(
                "a sequence of {longest} tokens is longer than the model's context of {context}"
            ),
            None if longest > UNBOUNDED_LONGEST => bail!(
                "a sequence of {longest} tokens is longer than the {UNBOUNDED_LONGEST} measured \
                 of a model that names no context (attention's memory grows with the square of \
                 the length)"
            ),
            _ => Ok(()),
        }
    }
}

/// The longest sequence measured of a model that names no context: its
/// attention over 16k tokens already takes gigabytes.
const UNBOUNDED_LONGEST: usize = 16_384;

/// What a measurement times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Forward,
    Train,
    Decode,
    /// A conversation, each turn going on from what the last one read.
    Turns,
    /// A conversation of the same shape with each turn's prompt read whole.
    #[serde(rename = "turns-reread")]
    TurnsReread,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Train => "train",
            Phase::Decode => "decode",
            Phase::Turns => "turns",
            Phase::TurnsReread => "turns-reread",
        }
    }
}

/// One measurement: the mean over the timed repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    pub phase: Phase,
    pub batch: usize,
    /// Sequence length (forward, train); first prompt's length (decode, turns).
    pub seq: usize,
    /// Tokens a repetition processes: every position (forward, train) or
    /// the sampled tokens (decode and turns, whose times include the
    /// prompts' passes).
    pub tokens: usize,
    pub seconds: f64,
    pub tokens_per_s: f64,
    pub precision: Precision,
    /// The rank of the LoRA adapters measured (0: none).
    pub lora_rank: usize,
    /// What a training step's passes kept for their backward pass
    /// (training steps only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activations: Option<Activations>,
}

impl Measurement {
    /// A measurement over every position of `shape`.
    fn whole(phase: Phase, shape: Shape, seconds: f64, spec: &BenchSpec) -> Self {
        Self {
            phase,
            batch: shape.batch,
            seq: shape.seq,
            tokens: shape.batch * shape.seq,
            seconds,
            tokens_per_s: (shape.batch * shape.seq) as f64 / seconds,
            precision: spec.precision,
            lora_rank: spec.lora_rank,
            activations: (phase == Phase::Train).then_some(spec.passes.activations),
        }
    }
}

/// Runs `spec` on `accelerator`, handing each measurement to `progress` as
/// it completes; the backends are instantiated here.
pub fn run(
    spec: &BenchSpec,
    accelerator: Accelerator,
    progress: &mut dyn FnMut(&Measurement),
) -> Result<Vec<Measurement>> {
    spec.validate()?;
    accelerator::on(accelerator, Measuring { spec, progress })
}

/// A bench, to be run on the backend [`accelerator::on`] picks.
struct Measuring<'a, 'p> {
    spec: &'a BenchSpec,
    progress: &'p mut dyn FnMut(&Measurement),
}

impl OnBackend for Measuring<'_, '_> {
    type Output = Vec<Measurement>;

    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<Vec<Measurement>> {
        Bench::<B>::new(self.spec, device)?.run(self.progress)
    }
}

struct Bench<'a, B: AutodiffBackend> {
    spec: &'a BenchSpec,
    model: Llama<B>,
    rng: ChaCha8Rng,
}

impl<'a, B: AutodiffBackend> Bench<'a, B> {
    fn new(spec: &'a BenchSpec, device: B::Device) -> Result<Self> {
        Llama::<B>::check_precision(spec.precision, &device)?;
        let model = match &spec.weights {
            Some(path) => {
                Llama::load(path, &device).with_context(|| format!("loading {}", path.display()))?
            }
            None => Llama::init(spec.config.clone(), spec.seed, &device),
        };
        spec.check_context(&model.config)?;
        let model = if spec.lora_rank > 0 {
            let lora = Lora {
                rank: spec.lora_rank,
                ..Lora::default()
            };
            model.with_lora(&lora, &mut FreshAdapters::new(spec.seed))?
        } else {
            model
        }
        .with_precision(spec.precision)?;
        Ok(Self {
            spec,
            model,
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
        })
    }

    fn run(mut self, progress: &mut dyn FnMut(&Measurement)) -> Result<Vec<Measurement>> {
        let mut measurements = Vec::new();
        let mut record = |measurement: Measurement| {
            progress(&measurement);
            measurements.push(measurement);
        };
        for &shape in &self.spec.forward {
            record(self.forward(shape));
        }
        for &shape in &self.spec.train {
            record(self.train(shape));
        }
        for &batch in &self.spec.decode {
            record(self.decode(batch));
        }
        for &batch in &self.spec.conversations {
            for phase in [Phase::Turns, Phase::TurnsReread] {
                record(self.conversation(batch, phase));
            }
        }
        Ok(measurements)
    }

    fn tokens(&mut self, count: usize) -> Vec<u32> {
        let vocab = self.model.config.vocab as u32;
        (0..count)
            .map(|_| self.rng.random_range(0..vocab))
            .collect()
    }

    /// Times `repeats` calls of `work` after one untimed call; `work` must
    /// leave the device idle when it returns.
    fn time(&self, mut work: impl FnMut()) -> f64 {
        work();
        let started = Instant::now();
        for _ in 0..self.spec.repeats {
            work();
        }
        started.elapsed().as_secs_f64() / self.spec.repeats as f64
    }

    fn forward(&mut self, shape: Shape) -> Measurement {
        let model = self.model.valid().fold_adapters();
        let rows: Vec<Vec<u32>> = (0..shape.batch).map(|_| self.tokens(shape.seq)).collect();
        let rows: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
        let device = model.device();
        let seconds = self.time(|| {
            let logits = model.forward_batch(&rows);
            sync::<B::InnerBackend>(&device);
            drop(logits);
        });
        Measurement::whole(Phase::Forward, shape, seconds, self.spec)
    }

    /// Whole training steps: the gradients of every position's cross-entropy
    /// (in micro-batches), then an AdamW update, on a copy of the model so
    /// that later measurements start from the same weights.
    fn train(&mut self, shape: Shape) -> Measurement {
        let sequences: Vec<Sequence> = (0..shape.batch)
            .map(|_| Sequence {
                tokens: self.tokens(shape.seq + 1),
                spans: vec![Span {
                    start: 1,
                    logprobs: vec![0.0; shape.seq],
                }],
            })
            .collect();
        let mut optimizer = AdamWConfig::new().init::<B, Llama<B>>();
        let mut model = self.model.clone();
        let passes = self.spec.passes;
        let device = model.device();
        let seconds = self.time(|| {
            let (grads, _) = sft_gradients(&model, &sequences, passes);
            model = optimizer.step(1e-5, model.clone(), grads);
            sync::<B>(&device);
        });
        Measurement::whole(Phase::Train, shape, seconds, self.spec)
    }

    /// Sampling `new_tokens` after a `prompt`-token prompt in each of
    /// `batch` rows (temperature 1, as in rollouts), prompt pass included.
    fn decode(&mut self, batch: usize) -> Measurement {
        let model = self.model.valid().fold_adapters();
        let prompts: Vec<Vec<u32>> = (0..batch).map(|_| self.tokens(self.spec.prompt)).collect();
        let prompts: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        let samplings = self.samplings(batch);
        let seconds = self.time(|| {
            // Each step reads its draws back, so the device is idle after.
            model.generate_batch(&prompts, &samplings, Stop::tokens(&[]));
        });
        self.sampled(Phase::Decode, batch, batch * self.spec.new_tokens, seconds)
    }

    /// A `batch`-row conversation of `turns` turns: `Phase::Turns` goes on
    /// from each row's prefix as rollouts do, `Phase::TurnsReread` reads
    /// every prompt whole.
    fn conversation(&mut self, batch: usize, phase: Phase) -> Measurement {
        let model = self.model.valid().fold_adapters();
        let first: Vec<Vec<u32>> = (0..batch).map(|_| self.tokens(self.spec.prompt)).collect();
        let replies: Vec<Vec<Vec<u32>>> = (1..self.spec.turns)
            .map(|_| (0..batch).map(|_| self.tokens(self.spec.message)).collect())
            .collect();
        let samplings = self.samplings(batch);
        let seconds = self.time(|| {
            let mut prompts = first.clone();
            let mut prefixes = vec![Prefix::default(); batch];
            for turn in 0..self.spec.turns {
                let rows: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
                let stop = Stop::tokens(&[]);
                let generations = match phase {
                    Phase::Turns => model.continue_batch(&rows, &samplings, stop, &mut prefixes),
                    _ => model.generate_batch(&rows, &samplings, stop),
                };
                if let Some(replies) = replies.get(turn) {
                    for ((prompt, generation), reply) in
                        prompts.iter_mut().zip(generations).zip(replies)
                    {
                        prompt.extend(generation.tokens);
                        prompt.extend(reply);
                    }
                }
            }
        });
        let tokens = batch * self.spec.turns * self.spec.new_tokens;
        self.sampled(phase, batch, tokens, seconds)
    }

    /// Row r's sampler in a decoding measurement: temperature 1, as in rollouts.
    fn samplings(&self, batch: usize) -> Vec<Sampling> {
        (0..batch as u64)
            .map(|row| Sampling {
                temperature: 1.0,
                top_p: 1.0,
                max_tokens: self.spec.new_tokens,
                seed: self.spec.seed ^ row,
            })
            .collect()
    }

    /// A decoding measurement of `tokens` sampled tokens.
    fn sampled(&self, phase: Phase, batch: usize, tokens: usize, seconds: f64) -> Measurement {
        Measurement {
            phase,
            batch,
            seq: self.spec.prompt,
            tokens,
            seconds,
            tokens_per_s: tokens as f64 / seconds,
            precision: self.spec.precision,
            lora_rank: self.spec.lora_rank,
            activations: None,
        }
    }
}

/// Waits for the device's queued work (timings must include it).
fn sync<B: Backend>(device: &B::Device) {
    // A failed sync leaves the timing short, never wrong results; the error
    // itself surfaces at the next read of a tensor.
    let _ = B::sync(device);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_bad_ones_are_named() {
        assert_eq!(
            "16x1024".parse(),
            Ok(Shape {
                batch: 16,
                seq: 1024
            })
        );
        assert_eq!(Shape { batch: 2, seq: 8 }.to_string(), "2x8");
        let error = "16".parse::<Shape>().unwrap_err();
        assert!(error.contains("BATCHxSEQ"), "{error}");
        assert!("0x8".parse::<Shape>().is_err());
        assert!("4xz".parse::<Shape>().is_err());
    }

    #[test]
    fn every_phase_is_measured_on_a_tiny_model() {
        let spec = BenchSpec {
            config: LlamaConfig::tiny(64),
            weights: None,
            precision: Precision::F32,
            lora_rank: 0,
            forward: vec![Shape { batch: 2, seq: 8 }],
            train: vec![Shape { batch: 3, seq: 6 }],
            passes: Passes {
                micro_batch: 2,
                activations: Activations::Kept,
            },
            decode: vec![1, 3],
            prompt: 4,
            new_tokens: 5,
            conversations: vec![2],
            turns: 3,
            message: 2,
            repeats: 1,
            seed: 0,
        };
        let mut seen = Vec::new();
        let measurements =
            run(&spec, Accelerator::Cpu, &mut |m| seen.push(m.phase)).expect("the bench runs");
        assert_eq!(
            seen,
            [
                Phase::Forward,
                Phase::Train,
                Phase::Decode,
                Phase::Decode,
                Phase::Turns,
                Phase::TurnsReread
            ]
        );
        let tokens: Vec<usize> = measurements.iter().map(|m| m.tokens).collect();
        assert_eq!(tokens, [16, 18, 5, 15, 30, 30]);
        assert!(measurements.iter().all(|m| m.tokens_per_s > 0.0));
        let bf16 = BenchSpec {
            precision: Precision::Bf16,
            ..spec.clone()
        };
        let error = run(&bf16, Accelerator::Cpu, &mut |_| {}).unwrap_err();
        assert!(error.to_string().contains("--device cuda"), "{error}");
        // A model that names no context is measured no further than a bound.
        let unbounded = LlamaConfig {
            context: None,
            ..spec.config.clone()
        };
        let long = |seq| BenchSpec {
            forward: vec![Shape { batch: 1, seq }],
            ..spec.clone()
        };
        assert!(long(UNBOUNDED_LONGEST).check_context(&unbounded).is_ok());
        let error = long(UNBOUNDED_LONGEST + 1)
            .check_context(&unbounded)
            .unwrap_err();
        assert!(error.to_string().contains("names no context"), "{error}");
        // Training LoRA adapters, and saying so.
        let lora = BenchSpec {
            lora_rank: 4,
            forward: Vec::new(),
            decode: Vec::new(),
            conversations: Vec::new(),
            ..spec.clone()
        };
        let measured = run(&lora, Accelerator::Cpu, &mut |_| {}).expect("the bench runs");
        let rows: Vec<_> = measured.iter().map(|m| (m.phase, m.lora_rank)).collect();
        assert_eq!(rows, [(Phase::Train, 4)]);
        // Recomputing activations, and saying so where it applies.
        let kept: Vec<_> = measurements.iter().map(|m| m.activations).collect();
        assert_eq!(kept[..2], [None, Some(Activations::Kept)]);
        let recomputed = BenchSpec {
            passes: Passes {
                activations: Activations::Recomputed,
                ..spec.passes
            },
            ..lora.clone()
        };
        let measured = run(&recomputed, Accelerator::Cpu, &mut |_| {}).expect("the bench runs");
        let rows: Vec<_> = measured.iter().map(|m| (m.phase, m.activations)).collect();
        assert_eq!(rows, [(Phase::Train, Some(Activations::Recomputed))]);
        let zero = BenchSpec { repeats: 0, ..spec };
        let error = run(&zero, Accelerator::Cpu, &mut |_| {}).unwrap_err();
        assert!(error.to_string().contains("repeats"), "{error}");
    }
}
