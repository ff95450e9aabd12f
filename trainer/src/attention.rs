//! Attention a block of query rows at a time; under training's autodiff, its
//! backward pass recomputes each block's weights instead of keeping them.
//!
//! Materialised attention keeps its weights (heads × n × n per layer) for
//! the backward pass: at SmolLM2's shape that is 4.5 GB of a 2,048-token
//! sequence's training step, growing with the square of the sequence. The
//! backward pass here keeps only the layer's queries, keys and values
//! (heads × n × head_dim) and its mask, and computes each block's weights
//! again from them, the way FlashAttention does, at the cost of one more
//! product of queries and keys. Blocks bound the weights held at any
//! moment, in the forward pass too (a prompt pass of many long rows in
//! decoding).
//!
//! The model is generic over the backend; training's backends are
//! [`Autodiff`] over the ones this crate instantiates, recognised here by
//! type (as [`crate::cpu_product`] recognises the CPU's matrices). Every
//! other backend takes the blocks' forward pass alone, differentiated by
//! burn if it differentiates.

use crate::same_type;
use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{BasicOps, Bool, Tensor, TensorPrimitive};

/// The most attention weights one block holds: 2²⁶ (256 MiB in f32). A
/// layer of one 2,048-token SmolLM2 sequence (3 KV heads of 3 query heads'
/// rows each) is one block; 64 sequences of 1,024 tokens take ten. Larger
/// blocks mean fewer, larger products: a GPU runs those best.
const BLOCK_WEIGHTS: usize = 1 << 26;

/// `softmax(q·kᵀ/√d, masked to -∞ where mask is true) · v` over
/// `[batch, heads, rows, d]` queries and `[batch, heads, keys, d]` keys and
/// values. The mask, `[batch, 1, n, keys]`, is that of the `n` query
/// positions: `rows` is a multiple of `n` (under grouped-query attention,
/// each query head's positions in turn) and row r takes the mask of
/// position r % n. Each block takes its own rows of it, so no pass holds
/// `batch × heads × rows × keys` of it (2.3 GB for a prompt pass of 64
/// SmolLM2 rows of 2,000 tokens). Each row must see at least one key.
pub(crate) fn attention<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Tensor<B, 4, Bool>,
) -> Tensor<B, 4> {
    attention_in_blocks(Inputs { q, k, v, mask }, BLOCK_WEIGHTS)
}

struct Inputs<B: Backend> {
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Tensor<B, 4, Bool>,
}

fn attention_in_blocks<B: Backend>(inputs: Inputs<B>, budget: usize) -> Tensor<B, 4> {
    let attended = recomputing::<B, crate::Cpu>(inputs, budget);
    #[cfg(feature = "cuda")]
    let attended = attended.or_else(|inputs| recomputing::<B, crate::Cuda>(inputs, budget));
    #[cfg(feature = "wgpu")]
    let attended = attended.or_else(|inputs| recomputing::<B, crate::Wgpu>(inputs, budget));
    attended.unwrap_or_else(|Inputs { q, k, v, mask }| forward(q, k, v, mask, budget))
}

/// The attention of `inputs` through [`Recomputed`] when `B` is
/// `Autodiff<I>`; the inputs back otherwise.
fn recomputing<B: Backend, I: Backend>(
    inputs: Inputs<B>,
    budget: usize,
) -> Result<Tensor<B, 4>, Inputs<B>> {
    let inputs = same_type::<_, Inputs<Autodiff<I>>>(inputs)?;
    Ok(same_type(Recomputed::attention(inputs, budget)).expect("B is Autodiff<I>"))
}

/// The forward pass, block by block: each query row's weights and output
/// are computed as burn's softmax and product compute them for the whole.
fn forward<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Tensor<B, 4, Bool>,
    budget: usize,
) -> Tensor<B, 4> {
    let keys = k.swap_dims(2, 3);
    let blocks = blocks(&q, &keys, budget)
        .map(|(start, len)| {
            let q = q.clone().narrow(2, start, len);
            let mask = block_mask(&mask, q.dims()[1], start, len);
            weights(q, keys.clone(), mask).matmul(v.clone())
        })
        .collect();
    joined(blocks)
}

/// Blocks of rows as one tensor; a lone block as it is (decoding's
/// attention is one block: no copy for it).
fn joined<B: Backend, K: BasicOps<B>>(mut blocks: Vec<Tensor<B, 4, K>>) -> Tensor<B, 4, K> {
    if blocks.len() == 1 {
        return blocks.remove(0);
    }
    Tensor::cat(blocks, 2)
}

/// Rows `start..start + len` of the queries' mask, `[batch, heads, len,
/// keys]`, from the mask of their positions, `[batch, 1, n, keys]`: row r
/// is position r % n, the same for every head.
fn block_mask<B: Backend>(
    mask: &Tensor<B, 4, Bool>,
    heads: usize,
    start: usize,
    len: usize,
) -> Tensor<B, 4, Bool> {
    let [batch, _, n, keys] = mask.dims();
    if n == 1 {
        // Decoding: every row is the one new position; a view, no copy.
        return mask.clone().expand([batch, heads, len, keys]);
    }
    let mut runs = Vec::new();
    let mut row = start;
    while row < start + len {
        let (position, run) = (row % n, (n - row % n).min(start + len - row));
        runs.push(mask.clone().narrow(2, position, run));
        row += run;
    }
    joined(runs).expand([batch, heads, len, keys])
}

/// A block's weights, `[batch, heads, len, keys]`, from its queries and the
/// transposed keys.
fn weights<B: Backend>(
    q: Tensor<B, 4>,
    keys: Tensor<B, 4>,
    mask: Tensor<B, 4, Bool>,
) -> Tensor<B, 4> {
    let d = q.dims()[3] as f64;
    let scores = q.matmul(keys).div_scalar(d.sqrt());
    softmax(scores.mask_fill(mask, f32::NEG_INFINITY), 3)
}

/// The `(start, len)` runs of `q`'s rows whose weights against the
/// transposed `keys` fit `budget`.
fn blocks<B: Backend>(
    q: &Tensor<B, 4>,
    keys: &Tensor<B, 4>,
    budget: usize,
) -> impl Iterator<Item = (usize, usize)> + use<B> {
    let [batch, heads, rows, _] = q.dims();
    let keys = keys.dims()[3];
    let len = (budget / (batch * heads * keys).max(1)).clamp(1, rows.max(1));
    (0..rows)
        .step_by(len)
        .map(move |start| (start, len.min(rows - start)))
}

/// Attention's backward step on the inner backend: what it keeps of the
/// forward pass is [`Saved`].
#[derive(Debug)]
struct Recomputed;

/// What the backward pass keeps of the forward pass: its inputs, never the
/// weights.
#[derive(Clone, Debug)]
struct Saved<I: Backend> {
    q: Tensor<I, 4>,
    k: Tensor<I, 4>,
    v: Tensor<I, 4>,
    mask: Tensor<I, 4, Bool>,
    budget: usize,
}

impl Recomputed {
    fn attention<I: Backend>(inputs: Inputs<Autodiff<I>>, budget: usize) -> Tensor<Autodiff<I>, 4> {
        let [q, k, v] = [inputs.q, inputs.k, inputs.v].map(|t| t.into_primitive().tensor());
        let inner = |t: &FloatTensor<Autodiff<I>>| {
            Tensor::<I, 4>::from_primitive(TensorPrimitive::Float(t.primitive.clone()))
        };
        let (q_in, k_in, v_in) = (inner(&q), inner(&k), inner(&v));
        let mask = Tensor::<I, 4, Bool>::from_primitive(inputs.mask.into_primitive());
        let out = forward(
            q_in.clone(),
            k_in.clone(),
            v_in.clone(),
            mask.clone(),
            budget,
        );
        let nodes = [q.node, k.node, v.node];
        let output = match Recomputed
            .prepare::<NoCheckpointing>(nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let saved = Saved {
                    q: q_in,
                    k: k_in,
                    v: v_in,
                    mask,
                    budget,
                };
                prep.finish(saved, out.into_primitive().tensor())
            }
            OpsKind::UnTracked(prep) => prep.finish(out.into_primitive().tensor()),
        };
        Tensor::from_primitive(TensorPrimitive::Float(output))
    }
}

impl<I: Backend> Backward<I, 3> for Recomputed {
    type State = Saved<I>;

    fn backward(self, ops: Ops<Saved<I>, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let upstream =
            Tensor::<I, 4>::from_primitive(TensorPrimitive::Float(grads.consume::<I>(&ops.node)));
        let [dq, dk, dv] = ops.state.gradients(upstream);
        for (parent, grad) in ops.parents.into_iter().zip([dq, dk, dv]) {
            if let Some(parent) = parent {
                grads.register::<I>(parent.id, grad.into_primitive().tensor());
            }
        }
    }
}

impl<I: Backend> Saved<I> {
    /// The gradients of the queries, keys and values from the output's,
    /// `dO`: per block, with the block's weights `P` recomputed,
    /// `dv += Pᵀ·dO` and, through softmax's Jacobian,
    /// `dS = (dP − rowsum(dP⊙P))⊙P` with `dP = dO·vᵀ`, then `dq = dS·k/√d`
    /// and `dk += (qᵀ·dS)ᵀ/√d`. A masked weight is exactly zero, so is its
    /// `dS`.
    fn gradients(self, upstream: Tensor<I, 4>) -> [Tensor<I, 4>; 3] {
        let Saved {
            q,
            k,
            v,
            mask,
            budget,
        } = self;
        let scale = 1.0 / (q.dims()[3] as f64).sqrt() as f32;
        let (keys, values) = (k.clone().swap_dims(2, 3), v.swap_dims(2, 3));
        let (mut dq, mut dk, mut dv) = (Vec::new(), None, None);
        for (start, len) in blocks(&q, &keys, budget) {
            let block = |t: &Tensor<I, 4>| t.clone().narrow(2, start, len);
            let (q, upstream) = (block(&q), block(&upstream));
            let mask = block_mask(&mask, q.dims()[1], start, len);
            let p = weights(q.clone(), keys.clone(), mask);
            let dp = upstream.clone().matmul(values.clone());
            let rows = (dp.clone() * p.clone()).sum_dim(3);
            let ds = ((dp - rows) * p.clone()).mul_scalar(scale);
            dq.push(ds.clone().matmul(k.clone()));
            dk = sum(dk, q.swap_dims(2, 3).matmul(ds).swap_dims(2, 3));
            dv = sum(dv, p.swap_dims(2, 3).matmul(upstream));
        }
        let none = "at least one block";
        [joined(dq), dk.expect(none), dv.expect(none)]
    }
}

/// `total + term`, or `term` first.
fn sum<B: Backend>(total: Option<Tensor<B, 4>>, term: Tensor<B, 4>) -> Option<Tensor<B, 4>> {
    Some(match total {
        Some(total) => total + term,
        None => term,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, TensorData, Tolerance};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    type Train = Autodiff<crate::Cpu>;

    /// Attention as burn computes it whole, against block by block with
    /// the backward pass recomputing the weights: the same output bit for
    /// bit, the same gradients up to rounding — with grouped queries (two
    /// query heads' rows per KV head), a causal mask that differs between
    /// sequences (the second one's first column is left padding), and the
    /// rows in one block or in blocks of 3 (some across the two query
    /// heads, the last one short).
    #[test]
    fn attention_in_blocks_keeps_softmaxs_values_and_gradients() {
        let device = Default::default();
        // Seeded here: burn's generator is shared by the tests running
        // alongside. Uniform on ±2√3: a standard deviation of 2.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut random = |shape: [usize; 4]| {
            let bound = 2.0 * 3f32.sqrt();
            let values = (0..shape.iter().product())
                .map(|_| rng.random_range(-bound..bound))
                .collect();
            Tensor::<Train, 4>::from_data(TensorData::new(values, shape), &device)
        };
        let (q, k, v, upstream) = (
            random([2, 3, 10, 4]),
            random([2, 3, 5, 4]),
            random([2, 3, 5, 4]),
            random([2, 3, 10, 4]),
        );
        let hidden = (0..2).flat_map(|sequence| {
            (0..5).flat_map(move |query| {
                (0..5).map(move |key| key > query || (sequence == 1 && key == 0 && query != 0))
            })
        });
        let data = TensorData::new(hidden.collect(), [2, 1, 5, 5]);
        let mask = Tensor::<Train, 4, Bool>::from_data(data, &device);
        // Query row r is position r % 5.
        let every_row = mask.clone().repeat_dim(2, 2).expand([2, 3, 10, 5]);
        let run = |budget: Option<usize>| {
            let [q, k, v] = [&q, &k, &v].map(|t| t.clone().require_grad());
            let out = if let Some(budget) = budget {
                let inputs = Inputs {
                    q: q.clone(),
                    k: k.clone(),
                    v: v.clone(),
                    mask: mask.clone(),
                };
                attention_in_blocks(inputs, budget)
            } else {
                let scores = q.clone().matmul(k.clone().swap_dims(2, 3)).div_scalar(2.0);
                let scores = scores.mask_fill(every_row.clone(), f32::NEG_INFINITY);
                softmax(scores, 3).matmul(v.clone())
            };
            let grads = (out.clone() * upstream.clone()).sum().backward();
            let grads = [&q, &k, &v].map(|t| t.grad(&grads).unwrap().into_data());
            (out.into_data(), grads)
        };
        let theirs = run(None);
        for budget in [usize::MAX, 2 * 3 * 5 * 3] {
            let ours = run(Some(budget));
            assert_eq!(ours.0, theirs.0);
            for (ours, theirs) in ours.1.iter().zip(&theirs.1) {
                ours.assert_approx_eq::<f32>(theirs, Tolerance::rel_abs(1e-4, 1e-5));
            }
        }
        // Not vacuous: every gradient is far from zero somewhere.
        for grad in &theirs.1 {
            let largest = grad.iter::<f32>().fold(0f32, |m, g| m.max(g.abs()));
            assert!(largest > 0.1, "{largest}");
        }
    }

    /// Inputs that need no gradient leave none, and a parent that needs one
    /// gets it alone.
    #[test]
    fn only_the_inputs_that_need_gradients_get_them() {
        let device = Default::default();
        let random =
            |shape: [usize; 4]| Tensor::<Train, 4>::random(shape, Distribution::Default, &device);
        let (q, k, v) = (
            random([1, 2, 4, 4]).require_grad(),
            random([1, 2, 4, 4]),
            random([1, 2, 4, 4]),
        );
        let mask = Tensor::<Train, 4, Bool>::full([1, 1, 4, 4], false, &device);
        let out = attention(q.clone(), k.clone(), v.clone(), mask);
        let grads = out.sum().backward();
        assert!(q.grad(&grads).is_some());
        assert!(k.grad(&grads).is_none() && v.grad(&grads).is_none());
    }
}
