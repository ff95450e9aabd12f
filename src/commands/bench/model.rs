//! `forge bench model`: the policy model's throughput — a forward pass, a
//! training step, batched decoding, multi-turn conversations — on the CPU
//! or a GPU, in the same shapes `scripts/gpu/bench_torch.py` measures
//! PyTorch in (conversations aside).

use crate::commands::train::Device;
use crate::flags::at_least_one;
use crate::output;
use anyhow::Result;
use clap::Args;
use clap::ValueEnum;
use forge_trainer::bench::{self, BenchSpec, Measurement, Shape};
use forge_trainer::train::config::Activations;
use forge_trainer::train::objective::Passes;
use forge_trainer::{LlamaConfig, Precision};
use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

#[derive(Args, Debug)]
pub struct ModelBenchArgs {
    /// Where to run: the CPU, the first CUDA GPU (a forge built with
    /// `--features cuda`) or a WebGPU adapter (`--features wgpu`). The
    /// shapes' defaults depend on it: CUDA's are the H200 targets', the
    /// others' the CPU's (a WebGPU adapter may be a software one).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// A model file (GGUF or checkpoint) or a fetched model's name. By
    /// default, random weights in SmolLM2-135M's shape: throughput depends
    /// on the shape alone.
    #[arg(long)]
    model: Option<String>,
    /// The precision of the products with the weights: `f32`, or `bf16`
    /// (mixed precision: bfloat16 factors, f32 results and weights; cuda only).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Measure with LoRA adapters of this rank on every projection (alpha
    /// 16): training steps update the adapters alone, the weights frozen;
    /// forward passes and decoding fold them in, as rollouts do.
    #[arg(long, value_name = "RANK", default_value_t = 0)]
    lora_rank: usize,
    /// Forward passes, BATCHxSEQ, comma-separated, or `none`
    /// [default: 1x128,16x1024 on cuda; 1x128 elsewhere].
    #[arg(long, value_name = "SHAPES")]
    forward: Option<List<Shape>>,
    /// Training steps (forward, backward, AdamW), BATCHxSEQ, or `none`
    /// [default: 16x1024,64x1024 on cuda; 2x128 elsewhere].
    #[arg(long, value_name = "SHAPES")]
    train: Option<List<Shape>>,
    /// Sequences per forward and backward pass of a training step.
    #[arg(long, default_value_t = 16, value_parser = at_least_one)]
    micro_batch: usize,
    /// Recompute each decoder block's activations in the backward pass of
    /// a training step instead of keeping them (`optim.activations =
    /// "recomputed"`): less memory, more compute.
    #[arg(long)]
    recompute_activations: bool,
    /// Decoding batch sizes, or `none` [default: 1,32,256 on cuda; 1,4
    /// elsewhere]. Its tokens/s are those sampled over the whole time,
    /// the prompt's pass included, as a rollout spends it.
    #[arg(long, value_name = "SIZES")]
    decode: Option<List<usize>>,
    /// Prompt tokens per decoded row.
    #[arg(long, default_value_t = 128)]
    prompt: usize,
    /// Tokens sampled per decoded row [default: 128 on cuda; 16 elsewhere].
    #[arg(long, value_parser = at_least_one)]
    new_tokens: Option<usize>,
    /// Batch sizes of multi-turn conversations, or `none`: each measured as
    /// rollouts decode it (a turn reads only the tokens the last one did
    /// not) and with every turn's prompt read whole.
    #[arg(long, value_name = "SIZES", default_value = "none")]
    conversation: List<usize>,
    /// Turns per conversation.
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    turns: usize,
    /// Tokens of the reply (a tool result, a user message) appended after
    /// each turn's sampled tokens.
    #[arg(long, default_value_t = 32)]
    message: usize,
    /// Timed repetitions after one warm-up [default: 3 on cuda; 1 elsewhere].
    #[arg(long, value_parser = at_least_one)]
    repeats: Option<usize>,
    /// Seed of the random weights and adapters, the token ids measured
    /// and the sampling.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    seed: u64,
    /// A JSON line per measurement instead of a table.
    #[arg(long)]
    json: bool,
}

/// A comma-separated list, or `none` for an empty one.
#[derive(Debug, Clone)]
pub struct List<T>(Vec<T>);

impl<T: FromStr<Err: std::fmt::Display>> FromStr for List<T> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim() == "none" {
            return Ok(Self(Vec::new()));
        }
        text.split(',')
            .map(|item| {
                item.trim()
                    .parse::<T>()
                    .map_err(|err| format!("`{item}`: {err}"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

pub fn run(args: ModelBenchArgs) -> Result<ExitCode> {
    let cuda = args.device == Device::Cuda;
    let pick = |on_cuda: &str, elsewhere: &str| if cuda { on_cuda } else { elsewhere }.to_owned();
    let shapes = |list: Option<List<Shape>>, default: String| {
        list.map_or_else(
            || default.parse().map(|List(shapes)| shapes),
            |List(shapes)| Ok(shapes),
        )
    };
    let spec = BenchSpec {
        config: LlamaConfig::smollm2_135m(),
        weights: args
            .model
            .as_deref()
            .map(crate::commands::model::resolve)
            .transpose()?,
        precision: args.precision,
        lora_rank: args.lora_rank,
        forward: shapes(args.forward, pick("1x128,16x1024", "1x128"))
            .map_err(anyhow::Error::msg)?,
        train: shapes(args.train, pick("16x1024,64x1024", "2x128")).map_err(anyhow::Error::msg)?,
        passes: Passes {
            micro_batch: args.micro_batch,
            activations: if args.recompute_activations {
                Activations::Recomputed
            } else {
                Activations::Kept
            },
        },
        decode: match args.decode {
            Some(List(sizes)) => sizes,
            None if cuda => vec![1, 32, 256],
            None => vec![1, 4],
        },
        prompt: args.prompt,
        new_tokens: args.new_tokens.unwrap_or(if cuda { 128 } else { 16 }),
        conversations: args.conversation.0,
        turns: args.turns,
        message: args.message,
        repeats: args.repeats.unwrap_or(if cuda { 3 } else { 1 }),
        seed: args.seed,
    };
    let json = args.json;
    let caption = caption(&args.device, spec.weights.as_deref(), &spec);
    let device = device_name(&args.device);
    let measurements = bench::run(&spec, args.device.accelerator(), &mut |m| {
        if json {
            // Each line says what it measured, as the table's caption does.
            let mut line = serde_json::to_value(m).expect("a measurement serialises");
            line["device"] = device.as_str().into();
            // None: random weights in SmolLM2-135M's shape.
            line["model"] =
                serde_json::json!(spec.weights.as_ref().map(|path| path.display().to_string()));
            output::json_line(&line);
        } else {
            eprintln!("{}", describe(m));
        }
    })?;
    if !json {
        let mut table = output::table(&["phase", "shape", "tokens/s", "s per repetition"]);
        for m in &measurements {
            table.add_row(vec![
                m.phase.name().to_owned(),
                shape(m),
                output::measured(m.tokens_per_s),
                format!("{:.4}", m.seconds),
            ]);
        }
        println!("{caption}");
        println!("{table}");
        let sampling = [
            bench::Phase::Decode,
            bench::Phase::Turns,
            bench::Phase::TurnsReread,
        ];
        if measurements.iter().any(|m| sampling.contains(&m.phase)) {
            println!("decode and turns: tokens sampled per second, the prompts' passes included");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What the table measured, so that a table copied elsewhere still says:
/// the device, the model, the precision and the adapters.
fn caption(device: &Device, weights: Option<&Path>, spec: &BenchSpec) -> String {
    let model = match weights {
        Some(path) => path.display().to_string(),
        None => format!("SmolLM2-135M's shape, random weights (seed {})", spec.seed),
    };
    let adapters = match (spec.lora_rank, spec.train.is_empty()) {
        (0, true) => String::new(),
        (0, false) => ", every weight trained".to_owned(),
        (rank, _) => format!(", LoRA rank {rank} on every projection"),
    };
    format!(
        "{} on {}: {} products{adapters}",
        model,
        device_name(device),
        spec.precision.name(),
    )
}

/// The device as `--device` names it.
fn device_name(device: &Device) -> String {
    device
        .to_possible_value()
        .expect("no device is skipped")
        .get_name()
        .to_owned()
}

/// `BATCHxSEQ`, or for decoding the batch, prompt and new tokens.
fn shape(m: &Measurement) -> String {
    match m.phase {
        bench::Phase::Decode => format!(
            "batch {}, prompt {}, {} new",
            m.batch,
            m.seq,
            m.tokens / m.batch
        ),
        bench::Phase::Turns | bench::Phase::TurnsReread => format!(
            "batch {}, prompt {}, {} sampled",
            m.batch,
            m.seq,
            m.tokens / m.batch
        ),
        _ => {
            let shape = Shape {
                batch: m.batch,
                seq: m.seq,
            };
            match m.activations {
                Some(Activations::Recomputed) => format!("{shape}, recomputed"),
                _ => shape.to_string(),
            }
        }
    }
}

fn describe(m: &Measurement) -> String {
    format!(
        "{} {}: {} tokens/s ({:.4} s)",
        m.phase.name(),
        shape(m),
        output::measured(m.tokens_per_s),
        m.seconds
    )
}
