//! `forge model merge`: LoRA adapters folded into their base model, written
//! as a checkpoint every Forge command (and Hugging Face) loads as a model.

use super::resolve;
use crate::commands::{holds_files, leave_as_found};
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_trainer::checkpoint::{self, ADAPTER_DIR, PROMPT};
use forge_trainer::peft::{self, PeftAdapters};
use forge_trainer::{Cpu, Llama};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The adapters: a directory PEFT saved them in (`adapter_config.json`,
    /// `adapter_model.safetensors`), or a checkpoint of a Forge LoRA run.
    adapters: PathBuf,
    /// The base model: a GGUF file, a checkpoint directory or a fetched
    /// model's name. By default the one the adapters' config names
    /// (`base_model_name_or_path`), when that is a path here or a fetched
    /// model.
    #[arg(long, value_name = "MODEL")]
    base: Option<String>,
    /// Where to write the merged model: a new or empty directory.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Fold adapters a Forge run trained on other base weights into these
    /// anyway (adapters trained on a quantised GGUF, folded into the
    /// full-precision model, say).
    #[arg(long)]
    any_base: bool,
}

pub fn merge(args: &MergeArgs) -> Result<()> {
    let dir = adapter_dir(&args.adapters)?;
    let adapters = PeftAdapters::open(&dir)?;
    let base_name = match (&args.base, &adapters.base) {
        (Some(base), _) => base.clone(),
        (None, Some(recorded)) => recorded.clone(),
        (None, None) => bail!(
            "{}: the adapters name no base model (base_model_name_or_path): name it with --base",
            dir.display()
        ),
    };
    let base_path = resolve(&base_name).with_context(|| match args.base {
        Some(_) => "--base".to_owned(),
        None => format!(
            "the adapters' base `{base_name}` (their config's base_model_name_or_path) is not \
             here: name it with --base"
        ),
    })?;
    // A checkpoint of a LoRA run, or a merged model, has its adapters
    // folded into its weights already: folding these in would add them twice.
    if base_path.join(ADAPTER_DIR).join(peft::CONFIG).is_file() {
        bail!(
            "the base {} already has LoRA adapters folded into its weights (its {ADAPTER_DIR}/ \
             holds them): name the model the adapters were trained on",
            base_path.display()
        );
    }
    if holds_files(&args.out)? {
        bail!(
            "{} is not empty: the merged model needs a new or empty --out",
            args.out.display()
        );
    }
    let base = Llama::<Cpu>::load(&base_path, &Default::default())
        .with_context(|| format!("loading {}", base_path.display()))?;
    let tokenizer = checkpoint::read_tokenizer(&base_path)?;
    let digest = checkpoint::weights_digest(&base.named_tensors());
    if !args.any_base && adapters.base_digest.is_some() {
        adapters.check_base(
            &digest,
            "pass the base they were trained on as --base, or --any-base to fold them into this one",
        )?;
    }
    let layers = base.config.layers;
    let adapted = adapters.apply(base).with_context(|| {
        format!(
            "folding the adapters in {} into {}",
            dir.display(),
            base_path.display()
        )
    })?;
    let prompt = checkpoint::load_prompt(&prompt_source(&dir, &base_path))?;

    let existed = args.out.exists();
    // The adapters keep the base they were trained on (which `--any-base`
    // does not change): that is where they can be folded in again.
    let trained_on = adapters.base.as_deref().unwrap_or(&base_name);
    let trained_digest = adapters.base_digest.as_deref().unwrap_or(&digest);
    let written = (|| {
        checkpoint::save(&args.out, &adapted, &tokenizer)?;
        checkpoint::save_adapter(&args.out, &adapted, trained_on, trained_digest)?;
        checkpoint::save_prompt(&args.out, &prompt)
    })();
    if let Err(err) = written {
        leave_as_found(&args.out, existed);
        return Err(err);
    }
    let lora = &adapters.lora;
    eprintln!(
        "folded rank-{} {} adapters (alpha {}) on {} of {layers} layers into the weights of {}, \
         written to {}",
        lora.rank,
        lora.kind(),
        lora.alpha,
        lora.targets.join(", "),
        base_path.display(),
        args.out.display(),
    );
    println!("{}", args.out.display());
    Ok(())
}

/// The directory holding the adapters of `path`: `path` itself, or a Forge
/// checkpoint's `adapter/`.
fn adapter_dir(path: &Path) -> Result<PathBuf> {
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    if path.join(peft::CONFIG).is_file() {
        return Ok(path.to_owned());
    }
    let inner = path.join(ADAPTER_DIR);
    if inner.join(peft::CONFIG).is_file() {
        return Ok(inner);
    }
    bail!(
        "{} holds no LoRA adapters: expected a directory with {} (as PEFT saves adapters) or a \
         checkpoint of a LoRA run (its {ADAPTER_DIR}/)",
        path.display(),
        peft::CONFIG
    )
}

/// Where the merged model's prompt settings come from: the checkpoint whose
/// `adapter/` the adapters are (they were trained prompted so), else the base.
fn prompt_source(adapters: &Path, base: &Path) -> PathBuf {
    match adapters.parent() {
        Some(checkpoint)
            if adapters.file_name() == Some(ADAPTER_DIR.as_ref())
                && checkpoint.join(PROMPT).is_file() =>
        {
            checkpoint.to_owned()
        }
        _ => base.to_owned(),
    }
}
