//! A tiny random Llama, written to GGUF by the test (Q/K rows in llama.cpp's
//! permuted layout), loaded by Forge and checked against a direct f64
//! implementation of the architecture written here from its definition; and
//! the same for a Qwen2 (Q/K/V biases, rows in rotate-half layout), a Qwen3
//! (each head's queries and keys RMS-normalised) and a Llama 3 (RoPE
//! frequency divisors in `rope_freqs.weight`).

mod backend;

use backend::Backend;
use burn::tensor::Tensor;
use forge_model::gguf::{GgufWriter, Value};
use forge_trainer::{Llama, Stop};

const VOCAB: usize = 40;
const HIDDEN: usize = 32;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HD: usize = HIDDEN / HEADS;
const FFN: usize = 24;
const LAYERS: usize = 2;
const EPS: f64 = 1e-5;
const BASE: f64 = 10_000.0;

/// Deterministic pseudo-random values in [-0.5, 0.5).
struct Noise(u64);

impl Noise {
    fn take(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0 % 10_000) as f32 / 10_000.0 - 0.5
            })
            .collect()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Llama,
    Qwen2,
    Qwen3,
    /// A Llama whose RoPE frequencies are divided as Llama 3.1's are.
    Llama3,
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::Llama | Family::Llama3 => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
        }
    }
}

/// What each RoPE frequency is divided by in Llama 3's scaling with a
/// factor of 4, a context of 1000 and a band from wavelength 1000/200 to
/// 1000/1: an 8-wide head's wavelengths 6.3, 63 and 628 are blended, and
/// 6283 is stretched by the factor.
fn llama3_rope_divisors() -> Vec<f64> {
    let (factor, context, low, high) = (4.0, 1000.0, 1.0, 200.0);
    (0..HD / 2)
        .map(|i| {
            let wavelength = 2.0 * std::f64::consts::PI * BASE.powf(2.0 * i as f64 / HD as f64);
            let kept = ((context / wavelength - low) / (high - low)).clamp(0.0, 1.0);
            1.0 / ((1.0 - kept) / factor + kept)
        })
        .collect()
}

/// Row-major `[rows, cols]` matrices in HF layout.
struct Weights {
    family: Family,
    embed: Vec<f32>,
    layers: Vec<[Vec<f32>; 9]>, // attn_norm, q, k, v, o, ffn_norm, gate, up, down
    /// Per layer, the Q, K and V biases (Qwen2).
    biases: Vec<[Vec<f32>; 3]>,
    /// Per layer, the norms of each query head and each key head (Qwen3).
    qk_norms: Vec<[Vec<f32>; 2]>,
    /// What RoPE's frequencies are divided by, as llama.cpp stores it (Llama 3).
    rope_divisors: Option<Vec<f32>>,
    norm: Vec<f32>,
}

fn weights(family: Family) -> Weights {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let norm = |noise: &mut Noise| {
        noise
            .take(HIDDEN)
            .into_iter()
            .map(|v| 1.0 + v)
            .collect::<Vec<_>>()
    };
    let layers = (0..LAYERS)
        .map(|_| {
            [
                norm(&mut noise),
                noise.take(HEADS * HD * HIDDEN),
                noise.take(KV_HEADS * HD * HIDDEN),
                noise.take(KV_HEADS * HD * HIDDEN),
                noise.take(HIDDEN * HEADS * HD),
                norm(&mut noise),
                noise.take(FFN * HIDDEN),
                noise.take(FFN * HIDDEN),
                noise.take(HIDDEN * FFN),
            ]
        })
        .collect();
    let biases = match family {
        Family::Llama | Family::Llama3 | Family::Qwen3 => Vec::new(),
        Family::Qwen2 => (0..LAYERS)
            .map(|_| {
                [
                    noise.take(HEADS * HD),
                    noise.take(KV_HEADS * HD),
                    noise.take(KV_HEADS * HD),
                ]
            })
            .collect(),
    };
    let head_norm = |noise: &mut Noise| noise.take(HD).into_iter().map(|v| 1.0 + v).collect();
    let qk_norms = match family {
        Family::Qwen3 => (0..LAYERS)
            .map(|_| [head_norm(&mut noise), head_norm(&mut noise)])
            .collect(),
        _ => Vec::new(),
    };
    let rope_divisors = (family == Family::Llama3).then(|| {
        llama3_rope_divisors()
            .into_iter()
            .map(|d| d as f32)
            .collect()
    });
    Weights {
        family,
        embed: noise.take(VOCAB * HIDDEN),
        layers,
        biases,
        qk_norms,
        rope_divisors,
        norm: norm(&mut noise),
    }
}

/// HF layout → llama.cpp's interleaved rows: gguf[h·hd + 2i + p] = hf[h·hd + p·hd/2 + i].
fn permute(hf: &[f32], heads: usize) -> Vec<f32> {
    let mut out = vec![0.0; hf.len()];
    for h in 0..heads {
        for i in 0..HD / 2 {
            for p in 0..2 {
                let to = (h * HD + 2 * i + p) * HIDDEN;
                let from = (h * HD + p * HD / 2 + i) * HIDDEN;
                out[to..to + HIDDEN].copy_from_slice(&hf[from..from + HIDDEN]);
            }
        }
    }
    out
}

fn write_gguf(weights: &Weights, path: &std::path::Path) {
    let mut writer = GgufWriter::default();
    let arch = weights.family.name();
    let key = |name: &str| format!("{arch}.{name}");
    writer
        .metadata("general.architecture", Value::String(arch.into()))
        .metadata(&key("vocab_size"), Value::U32(VOCAB as u32))
        .metadata(&key("embedding_length"), Value::U32(HIDDEN as u32))
        .metadata(&key("block_count"), Value::U32(LAYERS as u32))
        .metadata(&key("attention.head_count"), Value::U32(HEADS as u32))
        .metadata(&key("attention.head_count_kv"), Value::U32(KV_HEADS as u32))
        .metadata(&key("feed_forward_length"), Value::U32(FFN as u32))
        .metadata(&key("rope.freq_base"), Value::F32(BASE as f32))
        .metadata(
            &key("attention.layer_norm_rms_epsilon"),
            Value::F32(EPS as f32),
        );
    // llama.cpp interleaves Llama's Q/K rows and leaves Qwen's as they are.
    let layout = |rows: &[f32], heads: usize| match weights.family {
        Family::Llama | Family::Llama3 => permute(rows, heads),
        Family::Qwen2 | Family::Qwen3 => rows.to_vec(),
    };
    if let Some(divisors) = &weights.rope_divisors {
        writer.tensor_f32("rope_freqs.weight", &[(HD / 2) as u64], divisors);
    }
    let (h, f) = (HIDDEN as u64, FFN as u64);
    writer.tensor_f32("token_embd.weight", &[h, VOCAB as u64], &weights.embed);
    for (index, [attn_norm, q, k, v, o, ffn_norm, gate, up, down]) in
        weights.layers.iter().enumerate()
    {
        let name = |part: &str| format!("blk.{index}.{part}.weight");
        writer
            .tensor_f32(&name("attn_norm"), &[h], attn_norm)
            .tensor_f32(
                &name("attn_q"),
                &[h, (HEADS * HD) as u64],
                &layout(q, HEADS),
            )
            .tensor_f32(
                &name("attn_k"),
                &[h, (KV_HEADS * HD) as u64],
                &layout(k, KV_HEADS),
            )
            .tensor_f32(&name("attn_v"), &[h, (KV_HEADS * HD) as u64], v)
            .tensor_f32(&name("attn_output"), &[(HEADS * HD) as u64, h], o)
            .tensor_f32(&name("ffn_norm"), &[h], ffn_norm)
            .tensor_f32(&name("ffn_gate"), &[h, f], gate)
            .tensor_f32(&name("ffn_up"), &[h, f], up)
            .tensor_f32(&name("ffn_down"), &[f, h], down);
        if let Some([bq, bk, bv]) = weights.biases.get(index) {
            let bias = |part: &str| format!("blk.{index}.{part}.bias");
            writer
                .tensor_f32(&bias("attn_q"), &[(HEADS * HD) as u64], bq)
                .tensor_f32(&bias("attn_k"), &[(KV_HEADS * HD) as u64], bk)
                .tensor_f32(&bias("attn_v"), &[(KV_HEADS * HD) as u64], bv);
        }
        if let Some([q_norm, k_norm]) = weights.qk_norms.get(index) {
            writer
                .tensor_f32(&name("attn_q_norm"), &[HD as u64], q_norm)
                .tensor_f32(&name("attn_k_norm"), &[HD as u64], k_norm);
        }
    }
    writer.tensor_f32(
        "output_norm.weight",
        &[weights.norm.len() as u64],
        &weights.norm,
    );
    writer.write(path).unwrap();
}

/// `w` (`[rows, cols]`) applied to `x` (`cols`).
fn apply(w: &[f32], x: &[f64], rows: usize) -> Vec<f64> {
    let cols = x.len();
    (0..rows)
        .map(|r| (0..cols).map(|c| f64::from(w[r * cols + c]) * x[c]).sum())
        .collect()
}

fn rms(x: &[f64], w: &[f32]) -> Vec<f64> {
    let scale = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + EPS).sqrt();
    x.iter()
        .zip(w)
        .map(|(v, w)| v * scale * f64::from(*w))
        .collect()
}

fn rope(x: &mut [f64], position: usize, divisors: &[f64]) {
    for head in x.chunks_mut(HD) {
        let original = head.to_vec();
        for i in 0..HD / 2 {
            let angle = position as f64 * BASE.powf(-2.0 * i as f64 / HD as f64) / divisors[i];
            let (cos, sin) = (angle.cos(), angle.sin());
            head[i] = original[i] * cos - original[i + HD / 2] * sin;
            head[i + HD / 2] = original[i + HD / 2] * cos + original[i] * sin;
        }
    }
}

/// The reference forward pass: logits for every position.
fn reference(weights: &Weights, tokens: &[u32]) -> Vec<Vec<f64>> {
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| {
            weights.embed[t as usize * HIDDEN..(t as usize + 1) * HIDDEN]
                .iter()
                .map(|v| f64::from(*v))
                .collect()
        })
        .collect();
    let divisors: Vec<f64> = match &weights.rope_divisors {
        Some(divisors) => divisors.iter().map(|d| f64::from(*d)).collect(),
        None => vec![1.0; HD / 2],
    };
    for (index, [attn_norm, q, k, v, o, ffn_norm, gate, up, down]) in
        weights.layers.iter().enumerate()
    {
        let mut keys = Vec::new();
        let mut values = Vec::new();
        let mut queries = Vec::new();
        let bias = |which: usize, mut projected: Vec<f64>| {
            if let Some(biases) = weights.biases.get(index) {
                for (value, bias) in projected.iter_mut().zip(&biases[which]) {
                    *value += f64::from(*bias);
                }
            }
            projected
        };
        for (position, x) in xs.iter().enumerate() {
            let h = rms(x, attn_norm);
            let mut qp = bias(0, apply(q, &h, HEADS * HD));
            let mut kp = bias(1, apply(k, &h, KV_HEADS * HD));
            if let Some([q_norm, k_norm]) = weights.qk_norms.get(index) {
                qp = qp.chunks(HD).flat_map(|head| rms(head, q_norm)).collect();
                kp = kp.chunks(HD).flat_map(|head| rms(head, k_norm)).collect();
            }
            rope(&mut qp, position, &divisors);
            rope(&mut kp, position, &divisors);
            queries.push(qp);
            keys.push(kp);
            values.push(bias(2, apply(v, &h, KV_HEADS * HD)));
        }
        for (i, x) in xs.iter_mut().enumerate() {
            let mut attention = vec![0.0; HEADS * HD];
            for head in 0..HEADS {
                let kv = head / (HEADS / KV_HEADS);
                let q = &queries[i][head * HD..(head + 1) * HD];
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        (0..HD).map(|d| q[d] * keys[j][kv * HD + d]).sum::<f64>()
                            / (HD as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = exps.iter().sum();
                for (j, e) in exps.iter().enumerate() {
                    for d in 0..HD {
                        attention[head * HD + d] += e / total * values[j][kv * HD + d];
                    }
                }
            }
            let projected = apply(o, &attention, HIDDEN);
            x.iter_mut().zip(projected).for_each(|(x, p)| *x += p);
            let h = rms(x, ffn_norm);
            let g = apply(gate, &h, FFN);
            let u = apply(up, &h, FFN);
            let act: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let projected = apply(down, &act, HIDDEN);
            x.iter_mut().zip(projected).for_each(|(x, p)| *x += p);
        }
    }
    xs.iter()
        .map(|x| apply(&weights.embed, &rms(x, &weights.norm), VOCAB))
        .collect()
}

fn rows(logits: Tensor<Backend, 2>) -> Vec<Vec<f32>> {
    let [n, vocab] = logits.dims();
    let values = logits.into_data().to_vec::<f32>().unwrap();
    (0..n)
        .map(|i| values[i * vocab..(i + 1) * vocab].to_vec())
        .collect()
}

#[test]
fn forward_matches_a_direct_implementation_and_the_cache_is_consistent() {
    matches_the_direct_implementation(Family::Llama);
}

#[test]
fn a_qwen2_model_with_its_biases_matches_the_direct_implementation() {
    matches_the_direct_implementation(Family::Qwen2);
}

#[test]
fn a_qwen3_model_with_its_query_and_key_norms_matches_the_direct_implementation() {
    matches_the_direct_implementation(Family::Qwen3);
}

#[test]
fn a_llama3_model_with_its_rope_divisors_matches_the_direct_implementation() {
    matches_the_direct_implementation(Family::Llama3);
}

#[test]
fn rope_divisors_that_are_not_llama3s_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("divided.gguf");
    let mut weights = weights(Family::Llama3);
    weights.rope_divisors = Some(vec![1.0, 1.5, 7.0, 2.0]);
    write_gguf(&weights, &path);
    let err = backend::load(&path).expect_err("the divisors would be ignored");
    assert!(err.to_string().contains("not Llama 3's scaling"), "{err}");
}

fn matches_the_direct_implementation(family: Family) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let weights = weights(family);
    write_gguf(&weights, &path);
    let model: Llama<Backend> = backend::load(&path).unwrap();
    assert_eq!(model.config.kv_heads, KV_HEADS);
    let tokens = [3u32, 17, 5, 39, 0, 22];
    let expected = reference(&weights, &tokens);
    let got = rows(model.forward(&tokens, &mut model.new_cache()));
    for (position, (got, expected)) in got.iter().zip(&expected).enumerate() {
        for (token, (g, e)) in got.iter().zip(expected).enumerate() {
            assert!(
                (f64::from(*g) - e).abs() < 1e-4,
                "position {position}, token {token}: {g} vs {e}"
            );
        }
    }
    // Feeding the tokens one at a time through the cache gives the same logits.
    let mut cache = model.new_cache();
    for (position, token) in tokens.iter().enumerate() {
        let step = rows(model.forward(&[*token], &mut cache));
        for (g, e) in step[0].iter().zip(&expected[position]) {
            assert!(
                (f64::from(*g) - e).abs() < 1e-4,
                "cached position {position}: {g} vs {e}"
            );
        }
    }
    assert_eq!(cache.len(), tokens.len());
    // Greedy decoding follows the argmax.
    let next = model.generate_greedy(&tokens, 3, Stop::tokens(&[]));
    let argmax = expected[5]
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap()
        .0 as u32;
    assert_eq!(next[0], argmax);
    assert_eq!(next.len(), 3);
}

#[test]
fn a_wrongly_shaped_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.gguf");
    let mut weights = weights(Family::Llama);
    weights.norm.push(1.0);
    write_gguf(&weights, &path);
    let err = backend::load(&path).expect_err("a bad shape is refused");
    assert!(err.to_string().contains("output_norm.weight"), "{err}");
}

#[test]
fn a_tensor_the_architecture_does_not_read_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llama-with-biases.gguf");
    // Qwen2's biases in a file that says it is a Llama.
    let mut weights = weights(Family::Qwen2);
    weights.family = Family::Llama;
    write_gguf(&weights, &path);
    let err = backend::load(&path).expect_err("the biases would be ignored");
    assert!(err.to_string().contains("blk.0.attn_q.bias"), "{err}");
}

#[test]
fn an_architecture_forge_cannot_run_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gemma.gguf");
    let mut writer = GgufWriter::default();
    writer.metadata("general.architecture", Value::String("gemma".into()));
    writer.write(&path).unwrap();
    let err = backend::load(&path).expect_err("gemma is not run");
    assert!(
        err.to_string().contains("`gemma` is not supported"),
        "{err}"
    );
}
