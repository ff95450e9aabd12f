//! Reading a GGUF file's tensors as the decoder's: llama.cpp's names and
//! its layout of the query and key rows mapped back to Hugging Face's.

use super::{LoadError, WeightSource, tensor_names, unread};
use crate::config::{LlamaConfig, ROPE_FREQS};
use forge_model::gguf::{Gguf, GgufError, TensorInfo};
use std::collections::HashSet;

/// The decoder `gguf` describes, once its tensors are those it needs (each
/// present, of the shape its metadata implies, in a type Forge reads) and
/// no other: what loading checks before reading any weight, and what
/// `forge model inspect` says without loading.
pub fn check_gguf(gguf: &Gguf) -> Result<LlamaConfig, LoadError> {
    // Named first: no reading of the metadata makes such a file runnable.
    if let Some(tensor) = gguf.tensors.iter().find(|t| t.kind.block().is_none()) {
        return Err(GgufError::UnsupportedType {
            name: tensor.name.clone(),
            kind: tensor.kind.to_string(),
        }
        .into());
    }
    let config = LlamaConfig::from_gguf(gguf)?;
    // Said as the count they disagree on, rather than as the first block
    // missing or left over.
    let blocks = gguf
        .tensors
        .iter()
        .filter_map(|tensor| {
            tensor
                .name
                .strip_prefix("blk.")?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(0, |last| last + 1);
    if blocks != config.layers {
        return Err(LoadError::Unsupported(format!(
            "its metadata counts {} layers, its tensors make {blocks}",
            config.layers
        )));
    }
    let needed = tensor_names(&config);
    let read: HashSet<String> = needed.iter().map(|(name, _)| gguf_name(name)).collect();
    // The RoPE divisors are read into the config.
    let held = gguf.tensors.iter().map(|t| t.name.as_str());
    unread(&config, held.filter(|name| *name != ROPE_FREQS), &read)?;
    // Their bytes lie in the file, in whole blocks: opening it checked.
    for (name, shape) in &needed {
        check_shape(gguf.tensor(&gguf_name(name))?, shape)?;
    }
    Ok(config)
}

/// Refuses `info` unless it has `shape` (Hugging Face's, outermost first).
fn check_shape(info: &TensorInfo, shape: &[usize]) -> Result<(), LoadError> {
    // GGML dims are innermost first: `[cols, rows]`.
    let expected: Vec<u64> = shape.iter().rev().map(|&dim| dim as u64).collect();
    match info.dims == expected {
        true => Ok(()),
        false => Err(LoadError::Shape {
            name: info.name.clone(),
            found: info.dims.clone(),
            expected,
        }),
    }
}

/// A GGUF file's tensors under their Hugging Face names, dequantized to f32,
/// Q/K rows un-permuted where llama.cpp permuted them.
pub(super) struct GgufSource {
    gguf: Gguf,
    config: LlamaConfig,
}

impl GgufSource {
    /// The source of `gguf`'s weights, once [`check_gguf`] passes them: every
    /// tensor asked for is then there, of its shape.
    pub fn checked(gguf: Gguf) -> Result<Self, LoadError> {
        let config = check_gguf(&gguf)?;
        Ok(Self { gguf, config })
    }

    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }
}

impl WeightSource for GgufSource {
    fn tensor(&mut self, name: &str, _shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let gguf_name = gguf_name(name);
        let values = self.gguf.dequantize(&gguf_name)?;
        let (hd, hidden) = (self.config.head_dim(), self.config.hidden);
        if !self.config.architecture.gguf_permutes_qk() {
            return Ok(values);
        }
        Ok(if name.ends_with("q_proj.weight") {
            unpermute(values, self.config.heads, hd, hidden)
        } else if name.ends_with("k_proj.weight") {
            unpermute(values, self.config.kv_heads, hd, hidden)
        } else {
            values
        })
    }
}

/// llama.cpp's name for a Hugging Face tensor name.
pub(super) fn gguf_name(hf: &str) -> String {
    const TOP: [(&str, &str); 3] = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
    ];
    const PARTS: [(&str, &str); 11] = [
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.q_norm", "attn_q_norm"),
        ("self_attn.k_norm", "attn_k_norm"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("post_attention_layernorm", "ffn_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ];
    if let Some((_, gguf)) = TOP.iter().find(|(name, _)| *name == hf) {
        return (*gguf).to_owned();
    }
    let rest = hf.strip_prefix("model.layers.").unwrap_or(hf);
    let (index, part) = rest.split_once('.').unwrap_or((rest, ""));
    let (part, kind) = part.rsplit_once('.').unwrap_or((part, "weight"));
    let part = PARTS
        .iter()
        .find(|(name, _)| *name == part)
        .map_or(part, |(_, gguf)| gguf);
    format!("blk.{index}.{part}.{kind}")
}

/// llama.cpp's converter interleaves each head's rows for its RoPE layout
/// (`gguf[h·hd + 2i + p] = hf[h·hd + p·hd/2 + i]`); undo it for rotate-half.
fn unpermute(values: Vec<f32>, heads: usize, hd: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for p in 0..2 {
            for i in 0..hd / 2 {
                let from = (h * hd + 2 * i + p) * cols;
                let to = (h * hd + p * hd / 2 + i) * cols;
                out[to..to + cols].copy_from_slice(&values[from..from + cols]);
            }
        }
    }
    out
}
