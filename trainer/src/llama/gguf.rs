//! Reading a GGUF file's tensors as the decoder's: llama.cpp's names and
//! its layout of the query and key rows mapped back to Hugging Face's.

use super::{LoadError, WeightSource};
use crate::config::LlamaConfig;
use forge_model::gguf::Gguf;

/// A GGUF file's tensors under their Hugging Face names, dequantized to f32,
/// Q/K rows un-permuted where llama.cpp permuted them.
pub(super) struct GgufSource {
    pub gguf: Gguf,
    pub config: LlamaConfig,
}

impl WeightSource for GgufSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
        let gguf_name = gguf_name(name);
        let info = self.gguf.tensor(&gguf_name)?;
        // GGML dims are innermost first: `[cols, rows]`.
        let expected: Vec<u64> = shape.iter().rev().map(|&dim| dim as u64).collect();
        if info.dims != expected {
            return Err(LoadError::Shape {
                name: gguf_name,
                found: info.dims.clone(),
                expected,
            });
        }
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
