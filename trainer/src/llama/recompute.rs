//! Gradients with the activations recomputed during the backward pass
//! rather than kept from the forward pass.
//!
//! A backward pass needs every intermediate tensor of the forward pass it
//! differentiates; kept for the whole model, they are most of a training
//! step's memory (about 2 MB a SmolLM2 token, against 69 KB for the
//! blocks' inputs). Here the forward pass runs without a tape, keeping only
//! each decoder block's input, and the loss is differentiated by the
//! log-probs alone. The backward pass then goes from the top: the output
//! head runs again a chunk of positions at a time (its logits are
//! `vocabulary` values a position), then each block runs again from its
//! input and the gradient of its output goes back through it. Only one
//! block's or one chunk's intermediates are alive at a time; the price is a
//! second forward pass (10–15% more time a training step, measured on the
//! CPU).

use super::{Llama, batch_ids};
use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;

/// Positions whose logits are alive at once: 256 SmolLM2 positions make
/// 50 MB of logits.
const HEAD_CHUNK: usize = 256;

impl<B: AutodiffBackend> Llama<B> {
    /// The gradients by the parameters of `loss` of the log-probs
    /// [`Self::token_logprobs`] gives for `at` and `tokens` over the final
    /// hidden states of `rows` (those of [`Self::hidden_batch`]): what
    /// back-propagating that loss gives, while holding one block's
    /// activations, or one chunk of positions' logits, at a time.
    pub fn logprob_gradients_recomputed(
        &self,
        rows: &[&[u32]],
        at: &[i64],
        tokens: &[i64],
        temperature: f32,
        loss: impl FnOnce(Tensor<B, 1>) -> Tensor<B, 1>,
    ) -> GradientsParams {
        let (ids, b) = batch_ids(rows);
        let n = ids.len() / b.max(1);
        let pads = vec![0; b];
        let untracked = self.valid();
        let pass = untracked.pass(b, n, 0, &pads);
        let mut inputs = Vec::with_capacity(self.layers.len());
        let mut x = untracked.embed(ids.clone());
        for index in 0..self.layers.len() {
            inputs.push(x.clone());
            x = untracked.layer(index, x, &pass, None);
        }
        drop(pass);
        let hidden = untracked.final_norm(x.clone());
        let chunks = || at.chunks(HEAD_CHUNK).zip(tokens.chunks(HEAD_CHUNK));
        let logprobs = chunks()
            .map(|(at, tokens)| untracked.token_logprobs(hidden.clone(), at, tokens, temperature))
            .collect();

        // The loss, differentiated by the log-probs alone.
        let logprobs = Tensor::<B, 1>::from_inner(Tensor::cat(logprobs, 0)).require_grad();
        let mut grads = loss(logprobs.clone()).backward();
        let by_logprobs = logprobs
            .grad_remove(&mut grads)
            .expect("the log-probs are tracked");

        // Then back through the head, the final norm, the blocks and the
        // embedding, each gradient by an output giving the one by its input.
        let mut accumulator = GradientsAccumulator::new();
        let mut by_hidden = hidden.zeros_like();
        let mut from = 0;
        for (at, tokens) in chunks() {
            let by_chunk = by_logprobs.clone().narrow(0, from, at.len());
            from += at.len();
            by_hidden = by_hidden
                + self.back_through(
                    hidden.clone(),
                    |hidden| self.token_logprobs(hidden, at, tokens, temperature),
                    by_chunk,
                    &mut accumulator,
                );
        }
        let mut upstream =
            self.back_through(x, |x| self.final_norm(x), by_hidden, &mut accumulator);
        let pass = self.pass(b, n, 0, &pads);
        for (index, input) in inputs.into_iter().enumerate().rev() {
            upstream = self.back_through(
                input,
                |x| self.layer(index, x, &pass, None),
                upstream,
                &mut accumulator,
            );
        }
        if self.embedding.val().is_require_grad() {
            let embedded = self.embed(ids) * Tensor::from_inner(upstream);
            let mut grads = embedded.sum().backward();
            accumulator.accumulate(self, GradientsParams::from_module(&mut grads, self));
        }
        accumulator.grads()
    }

    /// Runs `f` again from `input` on the autodiff backend and carries
    /// `gradient`, the loss's gradient by its output, back through it: the
    /// parameters' gradients join `accumulator`, the one by `input` is
    /// returned.
    fn back_through<const D: usize>(
        &self,
        input: Tensor<B::InnerBackend, 2>,
        f: impl FnOnce(Tensor<B, 2>) -> Tensor<B, D>,
        gradient: Tensor<B::InnerBackend, D>,
        accumulator: &mut GradientsAccumulator<Self>,
    ) -> Tensor<B::InnerBackend, 2> {
        let input = Tensor::<B, 2>::from_inner(input).require_grad();
        let mut grads = (f(input.clone()) * Tensor::from_inner(gradient))
            .sum()
            .backward();
        accumulator.accumulate(self, GradientsParams::from_module(&mut grads, self));
        input.grad(&grads).expect("the input is tracked")
    }
}
