//! The decoder: weights from GGUF, forward pass with a KV cache.

use crate::config::LlamaConfig;
use crate::sampling::{Generation, Sampling};
use burn::tensor::activation::{silu, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};
use forge_model::gguf::{Gguf, GgufError};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("tensor `{name}` has dims {found:?}, expected {expected:?}")]
    Shape {
        name: String,
        found: Vec<u64>,
        expected: Vec<u64>,
    },
}

struct Layer<B: Backend> {
    attn_norm: Tensor<B, 1>,
    /// Projections stored transposed, `[in, out]`, so that `x @ w` applies them.
    wq: Tensor<B, 2>,
    wk: Tensor<B, 2>,
    wv: Tensor<B, 2>,
    wo: Tensor<B, 2>,
    ffn_norm: Tensor<B, 1>,
    w_gate: Tensor<B, 2>,
    w_up: Tensor<B, 2>,
    w_down: Tensor<B, 2>,
}

/// A Llama-family decoder.
pub struct Llama<B: Backend> {
    pub config: LlamaConfig,
    device: B::Device,
    /// `[vocab, hidden]`.
    embedding: Tensor<B, 2>,
    layers: Vec<Layer<B>>,
    norm: Tensor<B, 1>,
    /// `[hidden, vocab]`: the output projection, or the embedding transposed when tied.
    lm_head: Tensor<B, 2>,
}

/// Keys and values of the positions seen so far, per layer: `[kv_heads, len, head_dim]`.
pub struct KvCache<B: Backend> {
    layers: Vec<Option<(Tensor<B, 3>, Tensor<B, 3>)>>,
    len: usize,
}

impl<B: Backend> KvCache<B> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<B: Backend> Llama<B> {
    /// Loads `path`: the config from its metadata, the weights dequantized to f32.
    pub fn load(path: &Path, device: &B::Device) -> Result<Self, LoadError> {
        let gguf = Gguf::open(path)?;
        let config = LlamaConfig::from_gguf(&gguf)?;
        let hd = config.head_dim();
        let matrix = |name: &str, rows: usize, cols: usize| -> Result<Vec<f32>, LoadError> {
            let info = gguf.tensor(name)?;
            // GGML dims are [cols, rows]: rows of `cols` values.
            if info.dims != [cols as u64, rows as u64] {
                return Err(LoadError::Shape {
                    name: name.to_owned(),
                    found: info.dims.clone(),
                    expected: vec![cols as u64, rows as u64],
                });
            }
            Ok(gguf.dequantize(name)?)
        };
        let vector = |name: &str, len: usize| -> Result<Tensor<B, 1>, LoadError> {
            let info = gguf.tensor(name)?;
            if info.dims != [len as u64] {
                return Err(LoadError::Shape {
                    name: name.to_owned(),
                    found: info.dims.clone(),
                    expected: vec![len as u64],
                });
            }
            Ok(Tensor::from_data(
                TensorData::new(gguf.dequantize(name)?, [len]),
                device,
            ))
        };
        // `[out, in]` row-major values → `[in, out]` tensor.
        let projection = |values: Vec<f32>, out: usize, input: usize| {
            Tensor::<B, 2>::from_data(TensorData::new(values, [out, input]), device).transpose()
        };
        let (hidden, ffn) = (config.hidden, config.ffn);
        let mut layers = Vec::with_capacity(config.layers);
        for index in 0..config.layers {
            let name = |part: &str| format!("blk.{index}.{part}.weight");
            let q = unpermute(
                matrix(&name("attn_q"), config.heads * hd, hidden)?,
                config.heads,
                hd,
                hidden,
            );
            let k = unpermute(
                matrix(&name("attn_k"), config.kv_heads * hd, hidden)?,
                config.kv_heads,
                hd,
                hidden,
            );
            layers.push(Layer {
                attn_norm: vector(&name("attn_norm"), hidden)?,
                wq: projection(q, config.heads * hd, hidden),
                wk: projection(k, config.kv_heads * hd, hidden),
                wv: projection(
                    matrix(&name("attn_v"), config.kv_heads * hd, hidden)?,
                    config.kv_heads * hd,
                    hidden,
                ),
                wo: projection(
                    matrix(&name("attn_output"), hidden, config.heads * hd)?,
                    hidden,
                    config.heads * hd,
                ),
                ffn_norm: vector(&name("ffn_norm"), hidden)?,
                w_gate: projection(matrix(&name("ffn_gate"), ffn, hidden)?, ffn, hidden),
                w_up: projection(matrix(&name("ffn_up"), ffn, hidden)?, ffn, hidden),
                w_down: projection(matrix(&name("ffn_down"), hidden, ffn)?, hidden, ffn),
            });
        }
        let embedding = Tensor::<B, 2>::from_data(
            TensorData::new(
                matrix("token_embd.weight", config.vocab, hidden)?,
                [config.vocab, hidden],
            ),
            device,
        );
        let lm_head = match gguf.tensor("output.weight") {
            Ok(_) => projection(
                matrix("output.weight", config.vocab, hidden)?,
                config.vocab,
                hidden,
            ),
            Err(_) => embedding.clone().transpose(),
        };
        let norm = vector("output_norm.weight", hidden)?;
        Ok(Self {
            config,
            device: device.clone(),
            embedding,
            layers,
            norm,
            lm_head,
        })
    }

    pub fn new_cache(&self) -> KvCache<B> {
        KvCache {
            layers: vec![None; self.config.layers],
            len: 0,
        }
    }

    /// Logits `[tokens, vocab]` for `tokens`, which follow the positions
    /// already in `cache`; the cache grows by `tokens.len()`.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache<B>) -> Tensor<B, 2> {
        let config = &self.config;
        let (n, hd, start) = (tokens.len(), config.head_dim(), cache.len);
        let ids = Tensor::<B, 1, Int>::from_data(
            TensorData::new(
                tokens.iter().map(|&id| i64::from(id)).collect::<Vec<_>>(),
                [n],
            ),
            &self.device,
        );
        let mut x = self.embedding.clone().select(0, ids);
        let (cos, sin) = self.rope_tables(start, n);
        for (layer, slot) in self.layers.iter().zip(&mut cache.layers) {
            let h = rms_norm(x.clone(), layer.attn_norm.clone(), config.rms_eps);
            let q = rope(
                heads(h.clone().matmul(layer.wq.clone()), config.heads, hd),
                &cos,
                &sin,
            );
            let k = rope(
                heads(h.clone().matmul(layer.wk.clone()), config.kv_heads, hd),
                &cos,
                &sin,
            );
            let v = heads(h.matmul(layer.wv.clone()), config.kv_heads, hd);
            let (k, v) = match slot.take() {
                Some((past_k, past_v)) => (
                    Tensor::cat(vec![past_k, k], 1),
                    Tensor::cat(vec![past_v, v], 1),
                ),
                None => (k, v),
            };
            *slot = Some((k.clone(), v.clone()));
            let group = config.heads / config.kv_heads;
            let total = start + n;
            // GQA: each KV head serves `group` query heads.
            let k = k
                .unsqueeze_dim::<4>(1)
                .expand([config.kv_heads, group, total, hd])
                .reshape([config.heads, total, hd]);
            let v = v
                .unsqueeze_dim::<4>(1)
                .expand([config.kv_heads, group, total, hd])
                .reshape([config.heads, total, hd]);
            let scores = q.matmul(k.swap_dims(1, 2)).div_scalar((hd as f64).sqrt());
            let scores = scores.mask_fill(
                causal_mask::<B>(n, start, &self.device)
                    .unsqueeze_dim::<3>(0)
                    .expand([config.heads, n, total]),
                f32::NEG_INFINITY,
            );
            let attention = softmax(scores, 2)
                .matmul(v)
                .swap_dims(0, 1)
                .reshape([n, config.heads * hd]);
            x = x + attention.matmul(layer.wo.clone());
            let h = rms_norm(x.clone(), layer.ffn_norm.clone(), config.rms_eps);
            let gated = silu(h.clone().matmul(layer.w_gate.clone())) * h.matmul(layer.w_up.clone());
            x = x + gated.matmul(layer.w_down.clone());
        }
        cache.len += n;
        rms_norm(x, self.norm.clone(), config.rms_eps).matmul(self.lm_head.clone())
    }

    /// Greedy decoding: the ids after `prompt`, at most `max_tokens`, stopping
    /// after any of `stop` (included).
    pub fn generate_greedy(&self, prompt: &[u32], max_tokens: usize, stop: &[u32]) -> Vec<u32> {
        self.generate(
            prompt,
            &Sampling {
                max_tokens,
                ..Sampling::greedy()
            },
            stop,
        )
        .tokens
    }

    /// Samples a continuation of `prompt` (see [`Sampling`]), stopping after
    /// any of `stop` (included) or at `max_tokens`. Each token comes with its
    /// log-probability under the sampling distribution (temperature applied,
    /// before top-p truncation), which the trainer's ratios are taken against.
    pub fn generate(&self, prompt: &[u32], sampling: &Sampling, stop: &[u32]) -> Generation {
        let mut rng = ChaCha8Rng::seed_from_u64(sampling.seed);
        let mut cache = self.new_cache();
        let mut logits = self.forward(prompt, &mut cache);
        let mut generation = Generation::default();
        while generation.tokens.len() < sampling.max_tokens {
            let rows = logits.dims()[0];
            let last: Vec<f32> = logits
                .narrow(0, rows - 1, 1)
                .into_data()
                .to_vec::<f32>()
                .expect("logits are f32");
            let (next, logprob) = sampling.pick(&last, &mut rng);
            generation.tokens.push(next);
            generation.logprobs.push(logprob);
            if stop.contains(&next) {
                generation.stopped = true;
                break;
            }
            logits = self.forward(&[next], &mut cache);
        }
        generation
    }

    /// cos and sin `[positions, head_dim]` for rotate-half RoPE.
    fn rope_tables(&self, start: usize, n: usize) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let hd = self.config.head_dim();
        let mut cos = Vec::with_capacity(n * hd);
        let mut sin = Vec::with_capacity(n * hd);
        for position in start..start + n {
            // The same frequencies for both halves of the head.
            for _ in 0..2 {
                for i in 0..hd / 2 {
                    let angle =
                        position as f64 * self.config.rope_base.powf(-2.0 * i as f64 / hd as f64);
                    cos.push(angle.cos() as f32);
                    sin.push(angle.sin() as f32);
                }
            }
        }
        let table = |values: Vec<f32>| {
            Tensor::<B, 2>::from_data(TensorData::new(values, [n, hd]), &self.device)
        };
        (table(cos), table(sin))
    }
}

/// `[n, heads * hd]` → `[heads, n, hd]`.
fn heads<B: Backend>(x: Tensor<B, 2>, heads: usize, hd: usize) -> Tensor<B, 3> {
    let n = x.dims()[0];
    x.reshape([n, heads, hd]).swap_dims(0, 1)
}

fn rope<B: Backend>(x: Tensor<B, 3>, cos: &Tensor<B, 2>, sin: &Tensor<B, 2>) -> Tensor<B, 3> {
    let [heads, n, hd] = x.dims();
    let half = hd / 2;
    let rotated = Tensor::cat(
        vec![
            x.clone().narrow(2, half, half).neg(),
            x.clone().narrow(2, 0, half),
        ],
        2,
    );
    let cos = cos.clone().unsqueeze_dim::<3>(0).expand([heads, n, hd]);
    let sin = sin.clone().unsqueeze_dim::<3>(0).expand([heads, n, hd]);
    x * cos + rotated * sin
}

fn rms_norm<B: Backend>(x: Tensor<B, 2>, weight: Tensor<B, 1>, eps: f64) -> Tensor<B, 2> {
    let scale = x
        .clone()
        .powf_scalar(2.0)
        .mean_dim(1)
        .add_scalar(eps)
        .sqrt()
        .recip();
    x * scale * weight.unsqueeze_dim::<2>(0)
}

/// `[n, start + n]`: true where query i (at position start + i) must not see key j.
fn causal_mask<B: Backend>(n: usize, start: usize, device: &B::Device) -> Tensor<B, 2, Bool> {
    let mask: Vec<bool> = (0..n)
        .flat_map(|i| (0..start + n).map(move |j| j > start + i))
        .collect();
    Tensor::from_data(TensorData::new(mask, [n, start + n]), device)
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
