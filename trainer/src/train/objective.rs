//! What the optimiser minimises: cross-entropy on gold turns (SFT) and the
//! clipped surrogate on sampled turns (RL), over token sequences whose
//! trained spans are the policy's own tokens.
//!
//! Aggregation: both losses are token-level means over every trained token
//! of the batch (DAPO's choice): a long turn weighs by its tokens, not as one
//! sample, so long failures are not diluted. Sequences go through the model
//! in micro-batches, each back-propagated on its own and the gradients
//! accumulated, which bounds memory whatever the batch size; a pass keeps
//! its activations for the backward pass or recomputes them
//! ([`Activations`]), which bounds it whatever the model's depth.

use super::config::Activations;
use crate::llama::Llama;
use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor, TensorData};

/// Tokens of which some spans are trained.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub tokens: Vec<u32>,
    pub spans: Vec<Span>,
}

/// Trained positions `start..start + logprobs.len()` of a sequence, with the
/// log-probs the tokens were sampled with (zeros for gold tokens).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub start: usize,
    pub logprobs: Vec<f32>,
}

/// One policy turn as sampled: the prompt, the completion and its log-probs.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub prompt: Vec<u32>,
    pub completion: Vec<u32>,
    pub logprobs: Vec<f32>,
}

impl Sequence {
    /// The sequences that cover `turns` with exactly their tokens: a turn
    /// whose prompt continues the previous sequence (the transcript only
    /// grew) joins it as another span, otherwise it starts a new one. Either
    /// way no text is re-tokenised.
    pub fn from_turns(turns: &[Turn]) -> Vec<Sequence> {
        let mut sequences: Vec<Sequence> = Vec::new();
        for turn in turns.iter().filter(|turn| !turn.completion.is_empty()) {
            let span = Span {
                start: turn.prompt.len(),
                logprobs: turn.logprobs.clone(),
            };
            match sequences.last_mut() {
                Some(last) if turn.prompt.starts_with(&last.tokens) => {
                    last.tokens = turn.prompt.clone();
                    last.tokens.extend(&turn.completion);
                    last.spans.push(span);
                }
                _ => sequences.push(Sequence {
                    tokens: [turn.prompt.as_slice(), &turn.completion].concat(),
                    spans: vec![span],
                }),
            }
        }
        sequences
    }

    pub fn trained_tokens(&self) -> usize {
        self.spans.iter().map(|span| span.logprobs.len()).sum()
    }

    /// The positions whose next-token prediction is trained.
    fn positions(&self) -> Vec<i64> {
        self.spans
            .iter()
            .flat_map(|span| (span.start..span.start + span.logprobs.len()).map(|p| p as i64 - 1))
            .collect()
    }

    fn old_logprobs(&self) -> Vec<f32> {
        self.spans
            .iter()
            .flat_map(|span| span.logprobs.iter().copied())
            .collect()
    }

    /// The model's log-probs of the trained tokens, `[trained_tokens]`.
    pub fn logprobs<B: Backend>(&self, model: &Llama<B>, temperature: f32) -> Tensor<B, 1> {
        trained_logprobs(model, &[self], temperature)
    }
}

/// The log-probs of the trained tokens of `sequences`, in order, from one
/// batched forward pass.
pub fn trained_logprobs<B: Backend>(
    model: &Llama<B>,
    sequences: &[&Sequence],
    temperature: f32,
) -> Tensor<B, 1> {
    let hidden = model.hidden_batch(&inputs(sequences));
    let (at, tokens) = targets(sequences);
    model.token_logprobs(hidden, &at, &tokens, temperature)
}

/// What goes through the model for `sequences`: all but each one's last token.
fn inputs<'a>(sequences: &[&'a Sequence]) -> Vec<&'a [u32]> {
    sequences
        .iter()
        .map(|sequence| &sequence.tokens[..sequence.tokens.len() - 1])
        .collect()
}

/// The trained tokens of `sequences`, in order: the rows of the batch's
/// final hidden states over their [`inputs`] that predict them, and the
/// tokens.
fn targets(sequences: &[&Sequence]) -> (Vec<i64>, Vec<i64>) {
    let width = sequences
        .iter()
        .map(|sequence| sequence.tokens.len() - 1)
        .max()
        .unwrap_or(0);
    sequences
        .iter()
        .enumerate()
        .flat_map(|(row, sequence)| {
            sequence.positions().into_iter().map(move |position| {
                let token = sequence.tokens[position as usize + 1];
                ((row * width) as i64 + position, i64::from(token))
            })
        })
        .unzip()
}

/// How a step's sequences go through the model for their gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passes {
    /// Sequences per forward and backward pass.
    pub micro_batch: usize,
    pub activations: Activations,
}

/// The gradients of `loss`, a function of the log-probs of the trained
/// tokens of `sequences` (at `temperature`), from one pass.
fn pass_gradients<B: AutodiffBackend>(
    model: &Llama<B>,
    sequences: &[&Sequence],
    temperature: f32,
    activations: Activations,
    loss: impl FnOnce(Tensor<B, 1>) -> Tensor<B, 1>,
) -> GradientsParams
where
    Llama<B>: AutodiffModule<B>,
{
    match activations {
        Activations::Kept => {
            let logprobs = trained_logprobs(model, sequences, temperature);
            GradientsParams::from_grads(loss(logprobs).backward(), model)
        }
        Activations::Recomputed => {
            let (at, tokens) = targets(sequences);
            let inputs = inputs(sequences);
            model.logprob_gradients_recomputed(&inputs, &at, &tokens, temperature, loss)
        }
    }
}

/// A sequence with its advantage; `None` marks a masked rollout, which must
/// not touch the gradient.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub sequence: Sequence,
    pub advantage: Option<f64>,
    /// Log-probs of the trained tokens under the reference policy (for the
    /// KL penalty), when one is kept.
    pub reference: Option<Vec<f32>>,
}

/// Fills in the reference policy's log-probs of the trained tokens of
/// `batch`'s unmasked rollouts (masked ones take no part in the loss),
/// `micro_batch` sequences per forward pass.
pub fn reference_logprobs<B: Backend>(
    reference: &Llama<B>,
    batch: &mut [Scored],
    temperature: f32,
    micro_batch: usize,
) {
    let mut wanted: Vec<&mut Scored> = batch
        .iter_mut()
        .filter(|scored| scored.advantage.is_some())
        .collect();
    for chunk in wanted.chunks_mut(micro_batch.max(1)) {
        let sequences: Vec<&Sequence> = chunk.iter().map(|scored| &scored.sequence).collect();
        let mut values = trained_logprobs(reference, &sequences, temperature)
            .into_data()
            .to_vec::<f32>()
            .expect("f32 log-probs")
            .into_iter();
        for scored in chunk.iter_mut() {
            let count = scored.sequence.trained_tokens();
            scored.reference = Some(values.by_ref().take(count).collect());
        }
    }
}

/// Settings of the surrogate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Surrogate {
    pub clip: f64,
    pub kl: f64,
    pub temperature: f32,
}

/// What one pass over a batch measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LossStats {
    pub loss: f64,
    pub tokens: usize,
    /// Share of trained tokens the clip takes out of the gradient: their
    /// ratio is past the clip range on the side their advantage favours.
    pub clipped: f64,
    /// Mean KL estimate to the reference (k3), when one is kept.
    pub kl: f64,
    /// Mean absolute difference between the trained tokens' log-probs as
    /// recomputed for the loss and as recorded when they were sampled. Before
    /// the first update the weights are those that sampled, so this measures
    /// how far decoding (KV cache, left padding, batch shape, precision)
    /// strays from the training forward pass: the ratios' noise floor.
    pub logprob_gap: f64,
}

/// Gradients of the token-level SFT cross-entropy over `sequences`.
pub fn sft_gradients<B: AutodiffBackend>(
    model: &Llama<B>,
    sequences: &[Sequence],
    passes: Passes,
) -> (GradientsParams, LossStats)
where
    Llama<B>: AutodiffModule<B>,
{
    let trained: Vec<&Sequence> = sequences
        .iter()
        .filter(|s| s.trained_tokens() > 0)
        .collect();
    let total: usize = trained.iter().map(|s| s.trained_tokens()).sum();
    let mut accumulator = GradientsAccumulator::new();
    let mut stats = LossStats {
        tokens: total,
        ..LossStats::default()
    };
    for chunk in trained.chunks(passes.micro_batch.max(1)) {
        let grads = pass_gradients(model, chunk, 1.0, passes.activations, |logprobs| {
            let loss = logprobs.sum().neg().div_scalar(total as f64);
            stats.loss += scalar(&loss);
            loss
        });
        accumulator.accumulate(model, grads);
    }
    (accumulator.grads(), stats)
}

/// Gradients of the clipped surrogate (plus the KL penalty) over the
/// unmasked rollouts of `batch`:
/// `−Σ_t min(r_t A, clip(r_t, 1 ± ε) A) / T + β Σ_t k3_t / T`, with
/// `r_t = p(token) / p_sampled(token)` and `T` the trained tokens of the
/// unmasked rollouts.
pub fn surrogate_gradients<B: AutodiffBackend>(
    model: &Llama<B>,
    batch: &[Scored],
    settings: Surrogate,
    passes: Passes,
) -> (GradientsParams, LossStats)
where
    Llama<B>: AutodiffModule<B>,
{
    // Masked rollouts stop here: nothing of theirs reaches a tensor.
    let valid: Vec<&Scored> = batch
        .iter()
        .filter(|scored| scored.advantage.is_some() && scored.sequence.trained_tokens() > 0)
        .collect();
    let total: usize = valid.iter().map(|s| s.sequence.trained_tokens()).sum();
    let mut accumulator = GradientsAccumulator::new();
    let mut stats = LossStats {
        tokens: total,
        ..LossStats::default()
    };
    let device = model.device();
    let vector = |values: Vec<f32>| {
        let len = values.len();
        Tensor::<B, 1>::from_data(TensorData::new(values, [len]), &device)
    };
    let mut clipped = 0i64;
    for chunk in valid.chunks(passes.micro_batch.max(1)) {
        let sequences: Vec<&Sequence> = chunk.iter().map(|scored| &scored.sequence).collect();
        let per_token = |value: &dyn Fn(&Scored) -> Vec<f32>| {
            vector(chunk.iter().flat_map(|scored| value(scored)).collect())
        };
        let surrogate = |new: Tensor<B, 1>| {
            let old = per_token(&|scored| scored.sequence.old_logprobs());
            let advantage = per_token(&|scored| {
                vec![scored.advantage.unwrap_or_default() as f32; scored.sequence.trained_tokens()]
            });
            stats.logprob_gap +=
                scalar(&(new.clone().detach() - old.clone()).abs().sum()) / total as f64;
            let ratio = (new.clone() - old).exp();
            let unclipped = ratio.clone() * advantage.clone();
            let bounded = ratio.clamp(1.0 - settings.clip, 1.0 + settings.clip) * advantage;
            clipped += bounded
                .clone()
                .lower(unclipped.clone())
                .int()
                .sum()
                .into_scalar()
                .elem::<i64>();
            let mut loss = unclipped.min_pair(bounded).sum().neg();
            if settings.kl > 0.0 && chunk.iter().all(|scored| scored.reference.is_some()) {
                let reference = per_token(&|scored| scored.reference.clone().unwrap_or_default());
                // k3 = exp(ref − new) − (ref − new) − 1: unbiased, non-negative.
                let delta = reference - new;
                let k3 = (delta.clone().exp() - delta - 1.0).sum();
                stats.kl += scalar(&k3) / total as f64;
                loss = loss + k3.mul_scalar(settings.kl);
            }
            let loss = loss.div_scalar(total as f64);
            stats.loss += scalar(&loss);
            loss
        };
        let grads = pass_gradients(
            model,
            &sequences,
            settings.temperature,
            passes.activations,
            surrogate,
        );
        accumulator.accumulate(model, grads);
    }
    stats.clipped = clipped as f64 / total.max(1) as f64;
    (accumulator.grads(), stats)
}

fn scalar<B: Backend>(value: &Tensor<B, 1>) -> f64 {
    value.clone().into_scalar().elem()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(prompt: &[u32], completion: &[u32]) -> Turn {
        Turn {
            prompt: prompt.to_vec(),
            completion: completion.to_vec(),
            logprobs: vec![-0.5; completion.len()],
        }
    }

    #[test]
    fn turns_that_continue_the_transcript_share_a_sequence() {
        let turns = [
            turn(&[1, 2, 3], &[4, 5]),
            turn(&[1, 2, 3, 4, 5, 6, 7], &[8]),
            // Not a continuation (a re-tokenised prompt would look like this).
            turn(&[1, 2, 9], &[10]),
        ];
        let sequences = Sequence::from_turns(&turns);
        assert_eq!(sequences.len(), 2);
        assert_eq!(sequences[0].tokens, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            sequences[0]
                .spans
                .iter()
                .map(|s| s.start)
                .collect::<Vec<_>>(),
            [3, 7]
        );
        assert_eq!(sequences[0].positions(), [2, 3, 6]);
        assert_eq!(sequences[0].trained_tokens(), 3);
        assert_eq!(sequences[1].tokens, [1, 2, 9, 10]);
    }
}
