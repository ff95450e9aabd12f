//! The decoder: a burn module built from GGUF, a checkpoint or random
//! weights; the forward pass with a KV cache; sampling; log-probs for training.

use crate::attention::attention;
use crate::config::LlamaConfig;
use crate::cpu_product;
use crate::kv_cache::KvCache;
use crate::lora::{Adapter, Lora, TARGETS};
use burn::module::{Module, Param, ParamId};
use burn::tensor::activation::{log_softmax, silu};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, FloatDType, Int, Tensor, TensorData};
use forge_model::gguf::{Gguf, GgufError};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::path::Path;

mod decode;
mod gguf;
mod recompute;

use gguf::GgufSource;
pub use gguf::check_gguf;

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
    #[error("{0}")]
    Checkpoint(String),
    #[error("{0}")]
    Unsupported(String),
}

/// One decoder block. Projections are stored transposed, `[in, out]`, so that
/// `x @ w` applies them.
#[derive(Module, Debug)]
pub struct Layer<B: Backend> {
    attn_norm: Param<Tensor<B, 1>>,
    wq: Projection<B>,
    wk: Projection<B>,
    wv: Projection<B>,
    /// Biases of the Q, K and V projections (Qwen2), `[out]`.
    qkv_bias: Option<[Param<Tensor<B, 1>>; 3]>,
    /// RMS-norm weights of each query head and each key head (Qwen3), `[head_dim]`.
    qk_norm: Option<[Param<Tensor<B, 1>>; 2]>,
    wo: Projection<B>,
    ffn_norm: Param<Tensor<B, 1>>,
    w_gate: Projection<B>,
    w_up: Projection<B>,
    w_down: Projection<B>,
}

impl<B: Backend> Layer<B> {
    /// The projections, in the order of [`TARGETS`].
    fn projections_mut(&mut self) -> [&mut Projection<B>; 7] {
        [
            &mut self.wq,
            &mut self.wk,
            &mut self.wv,
            &mut self.wo,
            &mut self.w_gate,
            &mut self.w_up,
            &mut self.w_down,
        ]
    }

    fn projections(&self) -> [&Projection<B>; 7] {
        [
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.w_gate,
            &self.w_up,
            &self.w_down,
        ]
    }
}

/// A weight matrix `[in, out]`, applied as `x @ weight`, and its LoRA
/// adapter when the model is fine-tuned with one.
#[derive(Module, Debug)]
pub struct Projection<B: Backend> {
    weight: Param<Tensor<B, 2>>,
    adapter: Option<Adapter<B>>,
}

impl<B: Backend> Projection<B> {
    fn new(weight: Param<Tensor<B, 2>>) -> Self {
        Self {
            weight,
            adapter: None,
        }
    }

    /// `x @ weight` (plus the adapter's update) with factors in `dtype`.
    fn apply(&self, x: Tensor<B, 2>, dtype: Option<FloatDType>) -> Tensor<B, 2> {
        let y = product_in(x.clone(), self.weight.val(), dtype);
        match &self.adapter {
            Some(adapter) => y + adapter.apply(x, dtype),
            None => y,
        }
    }

    /// The weight with the adapter's update folded in.
    fn merged(&self) -> Tensor<B, 2> {
        match &self.adapter {
            Some(adapter) => self.weight.val() + adapter.delta(),
            None => self.weight.val(),
        }
    }
}

/// The precision of the model's matrix products with its weights — the
/// projections and the output head, nearly all of its arithmetic. Weights,
/// norms, attention, softmax, gradients' accumulation and the optimizer
/// stay f32 either way: mixed precision, as PyTorch's autocast does it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    /// Factors rounded to bfloat16 (tensor cores), products accumulated and
    /// returned in f32. Needs a backend with bf16 (CUDA; not the CPU nor WebGPU).
    Bf16,
}

impl Precision {
    const ALL: [Self; 2] = [Self::F32, Self::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
        }
    }

    fn dtype(self) -> Option<FloatDType> {
        match self {
            Self::F32 => None,
            Self::Bf16 => Some(FloatDType::BF16),
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    /// `f32` or `bf16`, as the config and `--precision` name them.
    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|precision| precision.name() == text)
            .ok_or_else(|| format!("`{text}`: expected f32 or bf16"))
    }
}

/// A Llama-family decoder: a burn module, so the same weights serve
/// inference (any backend) and training (the autodiff backend).
#[derive(Module, Debug)]
pub struct Llama<B: Backend> {
    pub config: LlamaConfig,
    /// How its products with the weights are computed.
    precision: Precision,
    /// `[hidden, vocab]`: the output head's layout, so that a tied head is
    /// a plain product (the CPU backend would otherwise lay the transposed
    /// vocabulary matrix out anew for every decoded token); the lookup
    /// gathers columns.
    embedding: Param<Tensor<B, 2>>,
    layers: Vec<Layer<B>>,
    norm: Param<Tensor<B, 1>>,
    /// `[hidden, vocab]`; `None` when the output projection is the embedding.
    lm_head: Option<Param<Tensor<B, 2>>>,
    /// How the projections are adapted, when they are (see [`Self::with_lora`]).
    lora: Option<Lora>,
}

/// Where a model's weights come from: the value of each tensor by its
/// Hugging Face name, in Hugging Face layout (`[out, in]` row-major, Q/K rows
/// in rotate-half order), checked against the expected shape by the source.
pub trait WeightSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError>;
}

/// The Hugging Face names of a model's tensors, with their shapes, in a
/// fixed order (which also fixes the parameters' ids).
pub fn tensor_names(config: &LlamaConfig) -> Vec<(String, Vec<usize>)> {
    let (hidden, ffn, hd) = (config.hidden, config.ffn, config.head_dim());
    let mut names = vec![(
        "model.embed_tokens.weight".to_owned(),
        vec![config.vocab, hidden],
    )];
    let (q, kv) = (config.heads * hd, config.kv_heads * hd);
    for index in 0..config.layers {
        let name = |part: &str| format!("model.layers.{index}.{part}.weight");
        names.extend([
            (name("input_layernorm"), vec![hidden]),
            (name("self_attn.q_proj"), vec![q, hidden]),
            (name("self_attn.k_proj"), vec![kv, hidden]),
            (name("self_attn.v_proj"), vec![kv, hidden]),
        ]);
        if config.architecture.qkv_bias() {
            let bias = |part: &str| format!("model.layers.{index}.self_attn.{part}.bias");
            names.extend([
                (bias("q_proj"), vec![q]),
                (bias("k_proj"), vec![kv]),
                (bias("v_proj"), vec![kv]),
            ]);
        }
        if config.architecture.qk_norm() {
            names.extend([
                (name("self_attn.q_norm"), vec![hd]),
                (name("self_attn.k_norm"), vec![hd]),
            ]);
        }
        names.extend([
            (name("self_attn.o_proj"), vec![hidden, q]),
            (name("post_attention_layernorm"), vec![hidden]),
            (name("mlp.gate_proj"), vec![ffn, hidden]),
            (name("mlp.up_proj"), vec![ffn, hidden]),
            (name("mlp.down_proj"), vec![hidden, ffn]),
        ]);
    }
    names.push(("model.norm.weight".to_owned(), vec![hidden]));
    if !config.tied_embeddings {
        names.push(("lm_head.weight".to_owned(), vec![config.vocab, hidden]));
    }
    names
}

impl<B: Backend> Llama<B> {
    /// Loads `path`: a GGUF file, or a checkpoint directory
    /// (`config.json` + `model.safetensors`).
    pub fn load(path: &Path, device: &B::Device) -> Result<Self, LoadError> {
        if path.is_dir() {
            let config = crate::checkpoint::read_model_config(path)?;
            let mut checkpoint = crate::checkpoint::SafetensorsSource::open(path)?;
            let read: HashSet<String> = tensor_names(&config)
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            // Hugging Face checkpoints may also hold the output head of tied
            // embeddings (a copy) and RoPE's frequency buffers.
            let spare = |name: &str| {
                (config.tied_embeddings && name == "lm_head.weight")
                    || name.ends_with("rotary_emb.inv_freq")
            };
            let names = checkpoint.names();
            let held = names.iter().map(String::as_str).filter(|name| !spare(name));
            unread(&config, held, &read)?;
            return Self::from_source(config, &mut checkpoint, device);
        }
        let mut source = GgufSource::checked(Gguf::open(path)?)?;
        Self::from_source(source.config().clone(), &mut source, device)
    }

    /// A model with random weights, the same for the same seed on every
    /// backend: projections uniform with standard deviation `1/√fan_in`
    /// (attention that can sharpen from the start in narrow models, where
    /// the usual 0.02 leaves every score near zero), the embedding at 0.02,
    /// norms at 1, biases at 0.
    pub fn init(config: LlamaConfig, seed: u64, device: &B::Device) -> Self {
        struct Random(ChaCha8Rng);
        impl WeightSource for Random {
            fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
                let len = shape.iter().product();
                if name.ends_with(".bias") {
                    return Ok(vec![0.0; len]);
                }
                if shape.len() == 1 {
                    return Ok(vec![1.0; len]);
                }
                let std = if name == "model.embed_tokens.weight" {
                    0.02
                } else {
                    1.0 / (shape[1] as f32).sqrt()
                };
                // Uniform on ±std·√3 has standard deviation std.
                let bound = std * 3f32.sqrt();
                Ok((0..len)
                    .map(|_| self.0.random_range(-bound..bound))
                    .collect())
            }
        }
        Self::from_source(config, &mut Random(ChaCha8Rng::seed_from_u64(seed)), device)
            .expect("random weights have the right shapes")
    }

    /// Builds the model from `source`'s tensors.
    pub fn from_source(
        config: LlamaConfig,
        source: &mut dyn WeightSource,
        device: &B::Device,
    ) -> Result<Self, LoadError> {
        let mut tensors = Vec::new();
        for (name, shape) in tensor_names(&config) {
            let data = source.tensor(&name, &shape)?;
            tensors.push((data, shape));
        }
        // Parameters take their ids from their place in `tensor_names`, so a
        // reloaded model matches its saved optimizer state.
        let mut tensors = tensors
            .into_iter()
            .zip(1u64..)
            .map(|((data, shape), id)| (ParamId::from(id), TensorData::new(data, shape)));
        let mut next = || tensors.next().expect("a tensor per name");
        let vector = |(id, data): (ParamId, TensorData)| {
            Param::initialized(id, Tensor::<B, 1>::from_data(data, device).require_grad())
        };
        let matrix = |(id, data): (ParamId, TensorData)| matrix_param::<B>(id, data, device);
        let projection = |tensor| Projection::new(matrix(tensor));
        let embedding = matrix(next());
        let layers = (0..config.layers)
            .map(|_| Layer {
                attn_norm: vector(next()),
                wq: projection(next()),
                wk: projection(next()),
                wv: projection(next()),
                qkv_bias: config
                    .architecture
                    .qkv_bias()
                    .then(|| [vector(next()), vector(next()), vector(next())]),
                qk_norm: config
                    .architecture
                    .qk_norm()
                    .then(|| [vector(next()), vector(next())]),
                wo: projection(next()),
                ffn_norm: vector(next()),
                w_gate: projection(next()),
                w_up: projection(next()),
                w_down: projection(next()),
            })
            .collect();
        let norm = vector(next());
        let lm_head = (!config.tied_embeddings).then(|| matrix(next()));
        Ok(Self {
            config,
            precision: Precision::F32,
            embedding,
            layers,
            norm,
            lm_head,
            lora: None,
        })
    }

    /// The same model fine-tuned by LoRA: adapters on `lora.targets`, read
    /// from `source` by [`Lora::tensor_names`]
    /// ([`FreshAdapters`](crate::lora::FreshAdapters) for new ones), and
    /// every other weight frozen. Their parameter ids follow the weights',
    /// so that a reloaded model matches its saved optimizer state.
    pub fn with_lora(self, lora: &Lora, source: &mut dyn WeightSource) -> Result<Self, LoadError> {
        lora.check_fits(&self.config)
            .map_err(LoadError::Unsupported)?;
        let mut model = self.no_grad();
        let device = model.device();
        let mut ids = (tensor_names(&model.config).len() as u64 + 1..).map(ParamId::from);
        let mut tensors = lora.tensor_names(&model.config).into_iter();
        let mut next = || -> Result<Param<Tensor<B, 2>>, LoadError> {
            let (name, shape) = tensors.next().expect("a tensor per adapted projection");
            let data = TensorData::new(source.tensor(&name, &shape)?, shape);
            let id = ids.next().expect("ids are unbounded");
            Ok(matrix_param(id, data, &device))
        };
        for layer in &mut model.layers {
            for (target, projection) in TARGETS.iter().zip(layer.projections_mut()) {
                if lora.adapts(target) {
                    let (down, up) = (next()?, next()?);
                    projection.adapter = Some(Adapter::new(down, up, lora.scale()));
                }
            }
        }
        model.lora = Some(lora.clone());
        Ok(model)
    }

    /// The LoRA adapters by PEFT's names, in PEFT's layout (empty without
    /// LoRA).
    pub fn adapter_tensors(&self) -> Vec<(String, TensorData)> {
        let Some(lora) = &self.lora else {
            return Vec::new();
        };
        let values = self
            .layers
            .iter()
            .flat_map(|layer| layer.projections())
            .filter_map(|projection| projection.adapter.as_ref())
            .flat_map(Adapter::peft_tensors)
            .map(Tensor::into_data);
        lora.tensor_names(&self.config)
            .into_iter()
            .map(|(name, _)| name)
            .zip(values)
            .collect()
    }

    pub fn lora(&self) -> Option<&Lora> {
        self.lora.as_ref()
    }

    /// The same model with each LoRA adapter folded into its projection's
    /// weight: what rollouts and evaluations decode with, as fast as a model
    /// without adapters (apart, an adapter costs two more products and a sum
    /// per projection at every decoded token). For inference: the folded
    /// weights are new tensors, outside any training graph.
    pub fn fold_adapters(mut self) -> Self {
        for layer in &mut self.layers {
            for projection in layer.projections_mut() {
                if projection.adapter.is_some() {
                    let weight = projection.merged();
                    projection.weight = Param::initialized(projection.weight.id, weight);
                    projection.adapter = None;
                }
            }
        }
        self.lora = None;
        self
    }

    /// How many numbers the model's weights hold (adapters aside).
    pub fn weight_count(&self) -> usize {
        self.num_params() - self.adapter_count()
    }

    /// How many numbers training updates: the adapters' with LoRA, else
    /// every weight.
    pub fn trained_count(&self) -> usize {
        match self.lora {
            Some(_) => self.adapter_count(),
            None => self.num_params(),
        }
    }

    fn adapter_count(&self) -> usize {
        (self.layers.iter().flat_map(Layer::projections))
            .filter_map(|projection| projection.adapter.as_ref())
            .map(Module::num_params)
            .sum()
    }

    /// The same model computing its products at `precision`; refused when
    /// the backend cannot hold that type on the model's device.
    pub fn with_precision(self, precision: Precision) -> Result<Self, LoadError> {
        Self::check_precision(precision, &self.device())?;
        Ok(Self { precision, ..self })
    }

    /// Refuses `precision` where the backend cannot hold its type on
    /// `device`: checked before a model's weights are read, a wrong flag
    /// fails at once rather than after the load.
    pub fn check_precision(precision: Precision, device: &B::Device) -> Result<(), LoadError> {
        match precision.dtype() {
            Some(dtype) if !B::supports_dtype(device, DType::from(dtype)) => {
                Err(LoadError::Unsupported(format!(
                    "{} products are not supported on this backend (bf16 needs the CUDA one: --device cuda)",
                    precision.name()
                )))
            }
            _ => Ok(()),
        }
    }

    /// `x @ w` at the model's precision.
    fn product<const D: usize>(&self, x: Tensor<B, D>, w: Tensor<B, D>) -> Tensor<B, D> {
        product_in(x, w, self.precision.dtype())
    }

    /// `projection` applied to `x` at the model's precision.
    fn apply(&self, x: Tensor<B, 2>, projection: &Projection<B>) -> Tensor<B, 2> {
        projection.apply(x, self.precision.dtype())
    }

    /// Every tensor by its Hugging Face name, in Hugging Face layout (what a
    /// checkpoint stores), LoRA adapters folded into their projections.
    pub fn named_tensors(&self) -> Vec<(String, TensorData)> {
        let layout = |weight: Tensor<B, 2>| weight.transpose().into_data();
        let matrix = |param: &Param<Tensor<B, 2>>| layout(param.val());
        let projection = |projection: &Projection<B>| layout(projection.merged());
        let vector = |param: &Param<Tensor<B, 1>>| param.val().into_data();
        let mut values = vec![matrix(&self.embedding)];
        for layer in &self.layers {
            values.extend([
                vector(&layer.attn_norm),
                projection(&layer.wq),
                projection(&layer.wk),
                projection(&layer.wv),
            ]);
            values.extend(layer.qkv_bias.iter().flatten().map(vector));
            values.extend(layer.qk_norm.iter().flatten().map(vector));
            values.extend([
                projection(&layer.wo),
                vector(&layer.ffn_norm),
                projection(&layer.w_gate),
                projection(&layer.w_up),
                projection(&layer.w_down),
            ]);
        }
        values.push(vector(&self.norm));
        values.extend(self.lm_head.as_ref().map(matrix));
        tensor_names(&self.config)
            .into_iter()
            .map(|(name, _)| name)
            .zip(values)
            .collect()
    }

    pub fn new_cache(&self) -> KvCache<B> {
        KvCache::new(self.config.layers)
    }

    /// Logits `[tokens, vocab]` for `tokens`, which follow the positions
    /// already in `cache`; the cache grows by `tokens.len()`.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache<B>) -> Tensor<B, 2> {
        let ids = tokens.iter().map(|&id| i64::from(id)).collect();
        self.project(self.hidden(ids, 1, &[0], Some(cache)))
    }

    /// Logits `[rows, longest, vocab]` for several sequences at once, each
    /// from position 0 (shorter rows padded at the end: causal attention
    /// keeps the padding from reaching real positions, whose logits are
    /// those of the row alone).
    pub fn forward_batch(&self, rows: &[&[u32]]) -> Tensor<B, 3> {
        let n = rows.iter().map(|row| row.len()).max().unwrap_or(0);
        self.project(self.hidden_batch(rows))
            .reshape([rows.len(), n, self.config.vocab])
    }

    /// The final hidden states `[rows · longest, hidden]` of
    /// [`Self::forward_batch`], for callers that project only some positions
    /// onto the vocabulary (with [`Self::project`]).
    pub fn hidden_batch(&self, rows: &[&[u32]]) -> Tensor<B, 2> {
        let (ids, b) = batch_ids(rows);
        self.hidden(ids, b, &vec![0; b], None)
    }

    /// Logits `[positions, vocab]` of final hidden states `[positions, hidden]`.
    pub fn project(&self, hidden: Tensor<B, 2>) -> Tensor<B, 2> {
        let lm_head = match &self.lm_head {
            Some(head) => head.val(),
            None => self.embedding.val(),
        };
        self.product(hidden, lm_head)
    }

    /// The log-probs, `[at.len()]`, at `temperature`, of `tokens[i]` after
    /// the position whose final hidden state is row `at[i]` of `hidden`.
    /// Only those rows are projected onto the vocabulary (full-vocabulary
    /// logits at every position would dwarf the model).
    pub fn token_logprobs(
        &self,
        hidden: Tensor<B, 2>,
        at: &[i64],
        tokens: &[i64],
        temperature: f32,
    ) -> Tensor<B, 1> {
        let device = self.device();
        let count = at.len();
        let at = Tensor::<B, 1, Int>::from_data(TensorData::new(at.to_vec(), [count]), &device);
        let tokens =
            Tensor::<B, 2, Int>::from_data(TensorData::new(tokens.to_vec(), [count, 1]), &device);
        let logits = self.project(hidden.select(0, at));
        log_softmax(logits.div_scalar(f64::from(temperature)), 1)
            .gather(1, tokens)
            .reshape([count])
    }

    /// The decoder's final (normalised) hidden states, `[b·n, hidden]`, over
    /// `b` rows of equally many ids (`[b·n]`, row-major), after `cache`'s
    /// positions when there is one. Row r's first `pads[r]` columns are left
    /// padding: no real position attends to them and the row's positions
    /// start after them.
    fn hidden(
        &self,
        ids: Vec<i64>,
        b: usize,
        pads: &[usize],
        mut cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 2> {
        let n = ids.len() / b.max(1);
        let start = cache.as_mut().map_or(0, |cache| cache.advance(n));
        let pass = self.pass(b, n, start, pads);
        let mut x = self.embed(ids);
        for index in 0..self.layers.len() {
            x = self.layer(index, x, &pass, cache.as_deref_mut());
        }
        self.final_norm(x)
    }

    /// The rows of the embeddings of `ids`, `[ids, hidden]`: the projections
    /// are one matrix product each; only attention needs the batch apart.
    fn embed(&self, ids: Vec<i64>) -> Tensor<B, 2> {
        let count = ids.len();
        let ids = Tensor::<B, 1, Int>::from_data(TensorData::new(ids, [count]), &self.device());
        self.embedding.val().select(1, ids).transpose()
    }

    /// What every layer of a pass over `b` rows of `n` columns after
    /// `start` cached ones shares.
    fn pass(&self, b: usize, n: usize, start: usize, pads: &[usize]) -> Pass<B> {
        let (cos, sin) = self.rope_tables(start, n, pads);
        let mask = attention_mask::<B>(n, start, pads, self.config.sliding_window, &self.device());
        Pass {
            b,
            n,
            start,
            cos,
            sin,
            mask,
        }
    }

    /// Decoder block `index` on the rows `x`, `[b·n, hidden]`; the block's
    /// keys and values join `cache` when there is one.
    fn layer(
        &self,
        index: usize,
        x: Tensor<B, 2>,
        pass: &Pass<B>,
        cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 2> {
        let config = &self.config;
        let layer = &self.layers[index];
        let Pass { b, n, start, .. } = *pass;
        let hd = config.head_dim();
        let group = config.heads / config.kv_heads;
        let heads = |t: Tensor<B, 2>, count: usize| t.reshape([b, n, count, hd]).swap_dims(1, 2);
        let h = rms_norm(x.clone(), layer.attn_norm.val(), config.rms_eps);
        let [q, k, v] = [&layer.wq, &layer.wk, &layer.wv].map(|w| self.apply(h.clone(), w));
        let row = |bias: &Param<Tensor<B, 1>>| bias.val().unsqueeze_dim::<2>(0);
        let [q, k, v] = match &layer.qkv_bias {
            Some([bq, bk, bv]) => [q + row(bq), k + row(bk), v + row(bv)],
            None => [q, k, v],
        };
        let [q, k] = match &layer.qk_norm {
            Some([q_norm, k_norm]) => [(q, q_norm), (k, k_norm)].map(|(t, weight)| {
                let [rows, width] = t.dims();
                rms_norm(
                    t.reshape([rows * width / hd, hd]),
                    weight.val(),
                    config.rms_eps,
                )
                .reshape([rows, width])
            }),
            None => [q, k],
        };
        let q = rope(heads(q, config.heads), &pass.cos, &pass.sin);
        let k = rope(heads(k, config.kv_heads), &pass.cos, &pass.sin);
        let v = heads(v, config.kv_heads);
        let (k, v) = match cache {
            Some(cache) => cache.store(index, start, k, v),
            None => (k, v),
        };
        // GQA: the `group` query heads that share a KV head attend as one
        // block of `group · n` query rows, so keys and values are never
        // copied per query head (in decoding, that copy would move the whole
        // cache three times a token).
        let q = q.reshape([b, config.kv_heads, group * n, hd]);
        let attention = attention(q, k, v, pass.mask.clone())
            .reshape([b, config.heads, n, hd])
            .swap_dims(1, 2)
            .reshape([b * n, config.heads * hd]);
        let x = x + self.apply(attention, &layer.wo);
        let h = rms_norm(x.clone(), layer.ffn_norm.val(), config.rms_eps);
        let gated = silu(self.apply(h.clone(), &layer.w_gate)) * self.apply(h, &layer.w_up);
        x + self.apply(gated, &layer.w_down)
    }

    /// The final normalisation of the last block's output.
    fn final_norm(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        rms_norm(x, self.norm.val(), self.config.rms_eps)
    }

    /// The device the weights are on.
    pub fn device(&self) -> B::Device {
        self.embedding.val().device()
    }

    /// cos and sin `[rows, 1, n, head_dim]` for rotate-half RoPE at columns
    /// `start..start + n` of rows left-padded by `pads`. The host computes
    /// one table row per position and the device gathers each column's:
    /// computing them per row and column would cost a batch of long prompts
    /// tens of millions of sines and hundreds of megabytes sent to the GPU.
    fn rope_tables(&self, start: usize, n: usize, pads: &[usize]) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let hd = self.config.head_dim();
        let rows = pads.len();
        // Every column's position (the column less its row's padding) is below this.
        let positions = start + n;
        let frequencies = self.config.rope_frequencies();
        let mut cos = Vec::with_capacity(positions * hd);
        let mut sin = Vec::with_capacity(positions * hd);
        for position in 0..positions {
            let half = cos.len();
            for frequency in &frequencies {
                let (sine, cosine) = (position as f64 * frequency).sin_cos();
                cos.push(cosine as f32);
                sin.push(sine as f32);
            }
            // The same frequencies for both halves of the head.
            cos.extend_from_within(half..);
            sin.extend_from_within(half..);
        }
        let device = self.device();
        let at: Vec<i64> = pads
            .iter()
            .flat_map(|&pad| {
                (start..positions).map(move |column| column.saturating_sub(pad) as i64)
            })
            .collect();
        let at = Tensor::<B, 1, Int>::from_data(TensorData::new(at, [rows * n]), &device);
        let gathered = |values: Vec<f32>| {
            Tensor::<B, 2>::from_data(TensorData::new(values, [positions, hd]), &device)
                .select(0, at.clone())
                .reshape([rows, 1, n, hd])
        };
        (gathered(cos), gathered(sin))
    }
}

/// Refuses a file holding a tensor the decoder would not read (say, biases
/// in a Llama file): it describes a model other than the one computed.
fn unread<'a>(
    config: &LlamaConfig,
    mut names: impl Iterator<Item = &'a str>,
    read: &HashSet<String>,
) -> Result<(), LoadError> {
    match names.find(|name| !read.contains(*name)) {
        Some(extra) => Err(LoadError::Unsupported(format!(
            "tensor `{extra}` has no place in a {} model",
            config.architecture.name()
        ))),
        None => Ok(()),
    }
}

/// `x @ w` with both factors rounded to `dtype` first and the product
/// returned in `x`'s type; `None` multiplies them as they are.
pub(crate) fn product_in<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    w: Tensor<B, D>,
    dtype: Option<FloatDType>,
) -> Tensor<B, D> {
    match dtype {
        None => cpu_product::product(x, w),
        Some(dtype) => {
            let result = x.dtype();
            x.cast(dtype).matmul(w.cast(dtype)).cast(result)
        }
    }
}

/// A weight `[out, in]` as a parameter `[in, out]`: transposed once here
/// rather than viewed transposed, as the CPU backend lays a transposed
/// operand out anew (a strided copy of the whole matrix) for every product.
fn matrix_param<B: Backend>(
    id: ParamId,
    data: TensorData,
    device: &B::Device,
) -> Param<Tensor<B, 2>> {
    let [rows, cols] = data.shape[..] else {
        unreachable!("matrices have two dims")
    };
    let values = data.into_vec::<f32>().expect("weights are f32");
    let mut transposed = vec![0.0; values.len()];
    for (row, values) in values.chunks_exact(cols).enumerate() {
        for (col, &value) in values.iter().enumerate() {
            transposed[col * rows + row] = value;
        }
    }
    let data = TensorData::new(transposed, [cols, rows]);
    Param::initialized(id, Tensor::<B, 2>::from_data(data, device).require_grad())
}

fn rope<B: Backend>(x: Tensor<B, 4>, cos: &Tensor<B, 4>, sin: &Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, heads, n, hd] = x.dims();
    let half = hd / 2;
    let rotated = Tensor::cat(
        vec![
            x.clone().narrow(3, half, half).neg(),
            x.clone().narrow(3, 0, half),
        ],
        3,
    );
    let cos = cos.clone().expand([b, heads, n, hd]);
    let sin = sin.clone().expand([b, heads, n, hd]);
    x * cos + rotated * sin
}

/// What every decoder block of one pass shares: the batch's shape, the
/// rotary tables of its positions and its attention mask.
struct Pass<B: Backend> {
    b: usize,
    n: usize,
    /// Columns already in the cache.
    start: usize,
    cos: Tensor<B, 4>,
    sin: Tensor<B, 4>,
    mask: Tensor<B, 4, Bool>,
}

/// The ids of `rows` from position 0, padded at the end to the longest
/// (`[rows · longest]`, row-major), and the number of rows.
fn batch_ids(rows: &[&[u32]]) -> (Vec<i64>, usize) {
    let n = rows.iter().map(|row| row.len()).max().unwrap_or(0);
    let ids = rows
        .iter()
        .flat_map(|row| (0..n).map(|at| row.get(at).map_or(0, |&id| i64::from(id))))
        .collect();
    (ids, rows.len())
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

/// `[rows, 1, n, start + n]`: true where query i (column start + i) must
/// not see key j — a later column, one `window` or more columns before it
/// (a sliding window: left padding shifts a row's columns and positions
/// alike), or the row's left padding (a padding column sees itself only,
/// so that its softmax stays finite: a NaN there would reach real
/// positions through `0 · NaN` in the value product). Built on the device
/// from the column indices: a prompt pass of many long rows would
/// otherwise build and upload a mask of rows × n × (start + n) values on
/// the host.
fn attention_mask<B: Backend>(
    n: usize,
    start: usize,
    pads: &[usize],
    window: Option<usize>,
    device: &B::Device,
) -> Tensor<B, 4, Bool> {
    let (rows, total) = (pads.len(), start + n);
    let shape = [rows, 1, n, total];
    let queries = Tensor::<B, 1, Int>::arange(start as i64..total as i64, device)
        .reshape([1, 1, n, 1])
        .expand(shape);
    let keys = Tensor::<B, 1, Int>::arange(0..total as i64, device)
        .reshape([1, 1, 1, total])
        .expand(shape);
    let pads = pads.iter().map(|&pad| pad as i64).collect();
    let pads = Tensor::<B, 1, Int>::from_data(TensorData::new(pads, [rows]), device)
        .reshape([rows, 1, 1, 1])
        .expand(shape);
    let later = keys.clone().greater(queries.clone());
    let hidden = match window {
        Some(window) => {
            let past = keys
                .clone()
                .lower_equal(queries.clone().sub_scalar(window as i64));
            later.bool_or(past)
        }
        None => later,
    };
    let padding = keys.clone().lower(pads).bool_and(keys.not_equal(queries));
    hidden.bool_or(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Autodiff;

    type Train = Autodiff<crate::Cpu>;

    /// Mixed precision's mechanism, checked with the one other float type
    /// the CPU backend holds (f64; bf16 needs the GPU): the product comes
    /// back in the input's type with the same values, and gradients flow
    /// back through both casts.
    #[test]
    fn a_product_in_another_type_returns_the_same_values_and_gradients() {
        let device = Default::default();
        let x = Tensor::<Train, 2>::random([3, 4], burn::tensor::Distribution::Default, &device)
            .require_grad();
        let w = Tensor::<Train, 2>::random([4, 5], burn::tensor::Distribution::Default, &device)
            .require_grad();
        let plain = product_in(x.clone(), w.clone(), None);
        let cast = product_in(x.clone(), w.clone(), Some(FloatDType::F64));
        assert_eq!(cast.dtype(), DType::F32);
        let (plain_values, cast_values) = (
            plain.clone().into_data().to_vec::<f32>().unwrap(),
            cast.clone().into_data().to_vec::<f32>().unwrap(),
        );
        for (a, b) in plain_values.iter().zip(&cast_values) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        let plain_grad = w.grad(&plain.sum().backward()).unwrap();
        let cast_grad = w.grad(&cast.sum().backward()).unwrap();
        assert_eq!(cast_grad.dtype(), DType::F32);
        let (a, b) = (
            plain_grad.into_data().to_vec::<f32>().unwrap(),
            cast_grad.into_data().to_vec::<f32>().unwrap(),
        );
        for (a, b) in a.iter().zip(&b) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn bf16_is_refused_on_the_cpu_by_name() {
        let model = Llama::<crate::Cpu>::init(LlamaConfig::tiny(40), 1, &Default::default());
        let err = model
            .with_precision(Precision::Bf16)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--device cuda"), "{err}");
    }
}
