//! Checkpoints: a directory laid out as a Hugging Face model of its family
//! (Llama, Qwen2, Qwen3 or Mistral) — `config.json`, `model.safetensors` (f32,
//! Hugging Face tensor names and layout; shards and their index are read
//! too), `tokenizer.json` and `tokenizer_config.json` (special tokens, and
//! the chat template if the model has one) — so that Forge's fine-tuned
//! models load in other tools and Hugging Face checkpoints load in Forge.
//! A LoRA run's checkpoints fold the adapters into those weights and keep
//! them, as PEFT lays adapters out, in `adapter/`.

use crate::chat::PromptSettings;
use crate::config::LlamaConfig;
use crate::llama::{Llama, LoadError, WeightSource};
use crate::peft::{self, PeftAdapters};
use crate::train::run_dir;
use burn::tensor::TensorData;
use burn::tensor::backend::Backend;
use forge_model::gguf::Gguf;
use forge_model::quant::{GgmlType, dequantize};
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::bom;
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};

pub const CONFIG: &str = "config.json";
pub const WEIGHTS: &str = "model.safetensors";
pub const TOKENIZER: &str = "tokenizer.json";
pub const PROMPT: &str = "prompt.json";
/// Where Hugging Face keeps a tokenizer's settings, the chat template among them.
const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// Where newer Hugging Face checkpoints keep the chat template alone.
const CHAT_TEMPLATE: &str = "chat_template.jinja";
/// Where Hugging Face lists the files of weights split into shards.
const SHARD_INDEX: &str = "model.safetensors.index.json";
/// Where a checkpoint of a LoRA run keeps its adapters (as PEFT lays them
/// out: see [`crate::peft`]).
pub const ADAPTER_DIR: &str = "adapter";

pub(crate) fn checkpoint_error(path: &Path, what: impl std::fmt::Display) -> LoadError {
    LoadError::Checkpoint(format!("{}: {what}", path.display()))
}

/// Writes `model` and `tokenizer` into `dir` (created if needed). Each file
/// is written beside its final name and renamed into place, so an
/// interrupted save never leaves a half-written checkpoint file.
pub fn save<B: Backend>(
    dir: &Path,
    model: &Llama<B>,
    tokenizer: &ModelTokenizer,
) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let weights = serialize(&model.named_tensors())?;
    let config = model
        .config
        .to_hf_json(tokenizer.bos, tokenizer.eos)
        .to_string();
    write_atomically(&dir.join(WEIGHTS), &weights)?;
    write_atomically(&dir.join(CONFIG), config.as_bytes())?;
    let staged = dir.join(format!("{TOKENIZER}.partial"));
    tokenizer
        .save_json(&staged)
        .with_context(|| format!("writing {}", staged.display()))?;
    std::fs::rename(&staged, dir.join(TOKENIZER))?;
    write_atomically(
        &dir.join(TOKENIZER_CONFIG),
        tokenizer_settings(tokenizer).to_string().as_bytes(),
    )?;
    Ok(())
}

/// Writes the LoRA adapters of `model`, fine-tuned from `base` (whose
/// weights have [`weights_digest`] `base_digest`), into `dir/adapter/` as
/// PEFT lays them out (`adapter_config.json`, `adapter_model.safetensors`),
/// with the digest beside them: what a run resumes from, and what PEFT puts
/// on the base model. In a directory of their own, so that the checkpoint
/// beside them, which folds them in, still loads as a plain model.
pub fn save_adapter<B: Backend>(
    dir: &Path,
    model: &Llama<B>,
    base: &str,
    base_digest: &str,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let lora = model
        .lora()
        .context("the model has no LoRA adapters to save")?;
    let dir = dir.join(ADAPTER_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    write_atomically(
        &dir.join(peft::WEIGHTS),
        &serialize(&model.adapter_tensors())?,
    )?;
    write_atomically(
        &dir.join(peft::CONFIG),
        lora.peft_config(base).to_string().as_bytes(),
    )?;
    write_atomically(&dir.join(peft::BASE_DIGEST), base_digest.as_bytes())
}

/// The LoRA adapters checkpoint `dir` holds beside its folded-in weights,
/// if any.
pub fn adapters(dir: &Path) -> Result<Option<PeftAdapters>, LoadError> {
    let adapters = dir.join(ADAPTER_DIR);
    if !adapters.is_dir() {
        return Ok(None);
    }
    PeftAdapters::open(&adapters).map(Some)
}

/// The sha256 of weights (names, shapes and values, as
/// [`Llama::named_tensors`] lists them), whatever file they came from: what
/// identifies the base model of LoRA adapters, which are worthless on any
/// other.
pub fn weights_digest(tensors: &[(String, TensorData)]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (name, data) in tensors {
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        for &dim in data.shape.iter() {
            hasher.update((dim as u64).to_le_bytes());
        }
        hasher.update(&*data.bytes);
    }
    forge_runtime::canonical::hex(&hasher.finalize())
}

/// The sha256 of what the model at `path` loads from, to tell apart two
/// models found at one path (a run's `final/` written again, a file
/// replaced): a GGUF file's bytes, or of a checkpoint directory the name and
/// bytes of each top-level `.json`, `.safetensors` and `.jinja` file (the
/// config, the weights and their shards, the tokenizer, the prompt), in name
/// order. A LoRA checkpoint's `adapter/` is folded into its weights already.
pub fn files_digest(path: &Path) -> anyhow::Result<String> {
    use anyhow::Context;
    use sha2::{Digest, Sha256};
    fn hash_file(hasher: &mut Sha256, file: &Path) -> anyhow::Result<()> {
        let mut reader = File::open(file).with_context(|| format!("reading {}", file.display()))?;
        std::io::copy(&mut reader, hasher)
            .with_context(|| format!("reading {}", file.display()))?;
        Ok(())
    }
    let mut hasher = Sha256::new();
    if path.is_dir() {
        let mut files = Vec::new();
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            let file = entry?.path();
            let loaded = matches!(
                file.extension().and_then(OsStr::to_str),
                Some("json" | "safetensors" | "jinja")
            );
            if loaded && file.is_file() {
                files.push(file);
            }
        }
        files.sort();
        for file in files {
            let name = file.file_name().expect("a listed file has a name");
            hasher.update((name.len() as u64).to_le_bytes());
            hasher.update(name.as_encoded_bytes());
            hasher.update(std::fs::metadata(&file)?.len().to_le_bytes());
            hash_file(&mut hasher, &file)?;
        }
    } else {
        hash_file(&mut hasher, path)?;
    }
    Ok(forge_runtime::canonical::hex(&hasher.finalize()))
}

/// The adapters a LoRA run saved into checkpoint `dir`, to resume from.
pub fn saved_adapters(dir: &Path) -> Result<PeftAdapters, LoadError> {
    adapters(dir)?.ok_or_else(|| {
        checkpoint_error(
            dir,
            format!(
                "holds no LoRA adapters ({ADAPTER_DIR}/): it was saved by a run without [lora]"
            ),
        )
    })
}

/// `tensors` as a safetensors file (f32).
fn serialize(tensors: &[(String, TensorData)]) -> anyhow::Result<Vec<u8>> {
    // Written, such weights would load as a model that answers nothing.
    for (name, data) in tensors {
        if let Ok(values) = data.as_slice::<f32>()
            && let Some(at) = values.iter().position(|value| !value.is_finite())
        {
            anyhow::bail!(
                "tensor `{name}` holds {} (element {at}): not writing a broken model",
                values[at]
            );
        }
    }
    let views = tensors
        .iter()
        .map(|(name, data)| {
            let view =
                safetensors::tensor::TensorView::new(Dtype::F32, data.shape.to_vec(), &data.bytes)?;
            Ok((name.clone(), view))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    Ok(safetensors::serialize(
        views,
        Some([("format".into(), "pt".into())].into()),
    )?)
}

/// What Hugging Face reads from `tokenizer_config.json` beside a
/// `tokenizer.json`: the special tokens (by text) and the chat template.
fn tokenizer_settings(tokenizer: &ModelTokenizer) -> serde_json::Value {
    let mut settings = serde_json::json!({ "tokenizer_class": "PreTrainedTokenizerFast" });
    for (key, id) in [("bos_token", tokenizer.bos), ("eos_token", tokenizer.eos)] {
        if let Some(token) = id.and_then(|id| tokenizer.token(id)) {
            settings[key] = token.into();
        }
    }
    if let Some(template) = &tokenizer.chat_template {
        settings["chat_template"] = template.clone().into();
    }
    settings
}

/// Writes `bytes` beside `path` and renames them over it: a process killed
/// mid-write leaves the old file whole.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let staged = PathBuf::from(format!("{}.partial", path.display()));
    if let Err(err) = std::fs::write(&staged, bytes) {
        // What was written of it (up to a full disk) is no use to anyone.
        let _ = std::fs::remove_file(&staged);
        return Err(err).with_context(|| format!("writing {}", staged.display()));
    }
    std::fs::rename(&staged, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Records how the model in `dir` is prompted (see [`PromptSettings`]).
pub fn save_prompt(dir: &Path, prompt: &PromptSettings) -> anyhow::Result<()> {
    write_atomically(&dir.join(PROMPT), &serde_json::to_vec(prompt)?)
}

/// How the model at `path` was trained to be prompted: its checkpoint's
/// `prompt.json`, or the defaults (a GGUF file, a checkpoint without one).
pub fn load_prompt(path: &Path) -> anyhow::Result<PromptSettings> {
    use anyhow::Context;
    let file = path.join(PROMPT);
    if !path.is_dir() || !file.exists() {
        return Ok(PromptSettings::default());
    }
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(bom::strip(&text)).with_context(|| format!("parsing {}", file.display()))
}

/// The tokenizer of a model file that Forge can prompt: see
/// [`read_tokenizer`]. One whose chat template Forge does not know (see
/// [`ChatTemplate`](crate::chat::ChatTemplate)) is refused.
pub fn load_tokenizer(path: &Path) -> Result<ModelTokenizer, LoadError> {
    let tokenizer = read_tokenizer(path)?;
    crate::chat::ChatTemplate::of(&tokenizer).map_err(|err| checkpoint_error(path, err))?;
    Ok(tokenizer)
}

/// The tokenizer of a model file: a GGUF's metadata, or a checkpoint's
/// `tokenizer.json` (with the special ids from its `config.json` and the
/// chat template from its `tokenizer_config.json` or `chat_template.jinja`).
pub fn read_tokenizer(path: &Path) -> Result<ModelTokenizer, LoadError> {
    if path.is_dir() {
        let config = read_config_json(path)?;
        let id = |key: &str| config[key].as_u64().map(|id| id as u32);
        let template = read_chat_template(path)?;
        ModelTokenizer::from_json_file(
            &path.join(TOKENIZER),
            id("bos_token_id"),
            id("eos_token_id"),
        )
        .map(|tokenizer| tokenizer.with_chat_template(template))
    } else {
        let gguf = Gguf::open(path).map_err(|err| checkpoint_error(path, err))?;
        ModelTokenizer::from_gguf(&gguf)
    }
    .map_err(|err| checkpoint_error(path, err))
}

/// The chat template of the checkpoint in `dir`: `tokenizer_config.json`'s
/// `chat_template` — a string, or a list of named templates of which the
/// `default` one — or else the file `chat_template.jinja`; none if neither.
fn read_chat_template(dir: &Path) -> Result<Option<String>, LoadError> {
    let settings = dir.join(TOKENIZER_CONFIG);
    if settings.exists() {
        let text =
            std::fs::read_to_string(&settings).map_err(|err| checkpoint_error(&settings, err))?;
        let settings: serde_json::Value = serde_json::from_str(bom::strip(&text))
            .map_err(|err| checkpoint_error(&settings, err))?;
        let template = match &settings["chat_template"] {
            serde_json::Value::String(template) => Some(template.clone()),
            serde_json::Value::Array(named) => named
                .iter()
                .find(|entry| entry["name"] == "default")
                .and_then(|entry| entry["template"].as_str())
                .map(str::to_owned),
            _ => None,
        };
        if template.is_some() {
            return Ok(template);
        }
    }
    let file = dir.join(CHAT_TEMPLATE);
    if file.exists() {
        return std::fs::read_to_string(&file)
            .map(Some)
            .map_err(|err| checkpoint_error(&file, err));
    }
    Ok(None)
}

/// A checkpoint directory's `config.json`, as written.
pub fn read_config_json(dir: &Path) -> Result<serde_json::Value, LoadError> {
    let path = dir.join(CONFIG);
    if !path.exists() {
        let what = if dir.join(peft::CONFIG).is_file() {
            format!(
                "LoRA adapters ({}), not a model: fold them into their base with `forge model merge {} --out DIR` and load DIR",
                peft::CONFIG,
                dir.display()
            )
        } else if dir.join(run_dir::CONFIG).is_file() {
            let trained = dir.join(run_dir::FINAL);
            let models = if trained.is_dir() {
                format!("its trained model is {}", trained.display())
            } else {
                format!(
                    "it has no trained model yet, its checkpoints are in {}",
                    dir.join(run_dir::CHECKPOINTS).display()
                )
            };
            format!("a `forge train` run directory, not a model: {models}")
        } else {
            format!(
                "not a checkpoint directory: it has no {CONFIG} (a checkpoint holds {CONFIG}, {WEIGHTS} and {TOKENIZER})"
            )
        };
        return Err(checkpoint_error(dir, what));
    }
    let text = std::fs::read_to_string(&path).map_err(|err| checkpoint_error(&path, err))?;
    serde_json::from_str(bom::strip(&text)).map_err(|err| checkpoint_error(&path, err))
}

/// The model config of `path`, without its weights: a checkpoint
/// directory's `config.json`, or a GGUF file's metadata.
pub fn read_model_config(path: &Path) -> Result<LlamaConfig, LoadError> {
    if path.is_dir() {
        return LlamaConfig::from_hf_json(&read_config_json(path)?)
            .map_err(|err| checkpoint_error(&path.join(CONFIG), err));
    }
    let gguf = Gguf::open(path).map_err(|err| checkpoint_error(path, err))?;
    LlamaConfig::from_gguf(&gguf)
}

/// The tensors of a checkpoint directory: `model.safetensors`, or the
/// shards `model.safetensors.index.json` lists (as Hugging Face splits
/// large models). Files are mapped, not read: a tensor's bytes are paged
/// in as it loads, so a model's weights are never all in memory twice.
pub struct SafetensorsSource {
    /// The file that names the tensors (the weights or the shard index),
    /// for errors.
    path: PathBuf,
    shards: Vec<Shard>,
    /// Each tensor's shard, by name.
    places: BTreeMap<String, usize>,
}

/// One safetensors file, mapped and checked to parse.
struct Shard {
    path: PathBuf,
    map: Mmap,
}

impl Shard {
    fn open(path: PathBuf) -> Result<Self, LoadError> {
        let file = File::open(&path).map_err(|err| checkpoint_error(&path, err))?;
        // SAFETY: the map is read-only; Forge never writes a checkpoint
        // while it is open, and a concurrent external writer is outside its
        // contract.
        let map = unsafe { Mmap::map(&file) }.map_err(|err| checkpoint_error(&path, err))?;
        SafeTensors::deserialize(&map).map_err(|err| checkpoint_error(&path, err))?;
        Ok(Self { path, map })
    }

    fn tensors(&self) -> SafeTensors<'_> {
        SafeTensors::deserialize(&self.map).expect("checked when opened")
    }
}

/// What Hugging Face's shard index says: the file of each tensor.
#[derive(serde::Deserialize)]
struct ShardIndex {
    weight_map: BTreeMap<String, String>,
}

impl SafetensorsSource {
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        let weights = dir.join(WEIGHTS);
        let index = dir.join(SHARD_INDEX);
        if weights.exists() || !index.exists() {
            return Self::file(weights);
        }
        let text = std::fs::read_to_string(&index).map_err(|err| checkpoint_error(&index, err))?;
        let listed: ShardIndex =
            serde_json::from_str(bom::strip(&text)).map_err(|err| checkpoint_error(&index, err))?;
        let files: BTreeSet<&String> = listed.weight_map.values().collect();
        let mut shards = Vec::with_capacity(files.len());
        for file in &files {
            // A name, not a path: the index reads nothing outside its directory.
            if Path::new(file).file_name() != Some(OsStr::new(file)) {
                return Err(checkpoint_error(
                    &index,
                    format!("`{file}` is not a file name in the checkpoint directory"),
                ));
            }
            shards.push(Shard::open(dir.join(file))?);
        }
        let mut places = BTreeMap::new();
        for (name, file) in &listed.weight_map {
            let at = files.iter().position(|f| f == &file).expect("listed");
            if shards[at].tensors().tensor(name).is_err() {
                return Err(checkpoint_error(
                    &index,
                    format!("`{name}` is listed in {file}, which does not hold it"),
                ));
            }
            places.insert(name.clone(), at);
        }
        Ok(Self {
            path: index,
            shards,
            places,
        })
    }

    /// The tensors of one safetensors file.
    pub fn file(path: PathBuf) -> Result<Self, LoadError> {
        let shard = Shard::open(path.clone())?;
        let places = (shard.tensors().names().into_iter())
            .map(|name| (name.to_owned(), 0))
            .collect();
        Ok(Self {
            path,
            places,
            shards: vec![shard],
        })
    }

    /// The names of the tensors the checkpoint holds.
    pub fn names(&self) -> Vec<String> {
        self.places.keys().cloned().collect()
    }

    /// The dtype (as safetensors names it) and element count of each tensor.
    pub fn tensor_types(&self) -> Vec<(String, u64)> {
        self.places
            .iter()
            .map(|(name, &at)| {
                let view = self.shards[at].tensors().tensor(name).expect("placed");
                let elements = view.shape().iter().map(|&dim| dim as u64).product();
                (format!("{:?}", view.dtype()), elements)
            })
            .collect()
    }
}

impl WeightSource for SafetensorsSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let &at = self
            .places
            .get(name)
            .ok_or_else(|| checkpoint_error(&self.path, format!("it has no tensor `{name}`")))?;
        let shard = &self.shards[at];
        let tensors = shard.tensors();
        let view = tensors.tensor(name).expect("placed");
        if view.shape() != shape {
            return Err(LoadError::Shape {
                name: name.to_owned(),
                found: view.shape().iter().map(|&dim| dim as u64).collect(),
                expected: shape.iter().map(|&dim| dim as u64).collect(),
            });
        }
        let kind = match view.dtype() {
            Dtype::F32 => GgmlType::F32,
            Dtype::F16 => GgmlType::F16,
            Dtype::BF16 => GgmlType::Bf16,
            other => {
                return Err(checkpoint_error(
                    &shard.path,
                    format!("tensor `{name}` has dtype {other:?}; f32, f16 and bf16 are supported"),
                ));
            }
        };
        let elements = shape.iter().product();
        let values = dequantize(kind, view.data(), elements).ok_or_else(|| {
            checkpoint_error(&shard.path, format!("tensor `{name}` is truncated"))
        })?;
        // A NaN would spread through every activation it meets: the model
        // would answer nothing but its first token, with nothing to say why.
        if let Some(at) = values.iter().position(|value| !value.is_finite()) {
            return Err(checkpoint_error(
                &shard.path,
                format!(
                    "tensor `{name}` holds {} (element {at}): its weights are broken",
                    values[at]
                ),
            ));
        }
        Ok(values)
    }
}
