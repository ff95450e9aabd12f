//! Drawing the next tokens where the logits are. Reading a batch's logits
//! back to sample on the host moves rows × vocabulary floats per decoded
//! token — 50 MB at batch 256 with SmolLM2's 49,152 tokens — and leaves the
//! GPU idle while the CPU works through them; drawing on the device reads
//! back two ids and two log-probs per row.
//!
//! Each row draws by inverse transform sampling from one uniform number of
//! its own seeded generator, so a row's tokens do not depend on the rows
//! beside it. The transform has two levels: it finds the vocabulary block
//! whose cumulative mass passes the draw, then the token within that block.
//! Cumulative sums thus run over a few hundred values, never over a whole
//! vocabulary (burn's GPU cumulative sum reads every earlier element for
//! each output: quadratic in the length).

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData, Transaction};

/// Tokens per block of the two-level transform.
const BLOCK: usize = 256;

/// Each row's choices: `(token, log-probability)`.
pub(crate) struct Draws {
    /// A token drawn from the row's distribution.
    pub sampled: Vec<(u32, f32)>,
    /// The row's most probable token.
    pub greedy: Vec<(u32, f32)>,
}

/// The draws from `logits` `[rows, vocab]` at `temperatures[r]` (each > 0),
/// with `uniforms[r]` in (0, 1] as row r's random number. Log-probabilities
/// are under the tempered distribution.
pub(crate) fn draw<B: Backend>(
    logits: Tensor<B, 2>,
    temperatures: &[f32],
    uniforms: &[f32],
) -> Draws {
    let [rows, vocab] = logits.dims();
    let device = logits.device();
    let column = |values: &[f32]| {
        Tensor::<B, 2>::from_data(TensorData::new(values.to_vec(), [rows, 1]), &device)
    };
    let logprobs = log_softmax(logits / column(temperatures).expand([rows, vocab]), 1);
    let greedy = logprobs.clone().argmax(1);
    // Probabilities, the vocabulary padded with impossible tokens to whole blocks.
    let blocks = vocab.div_ceil(BLOCK);
    let mut probabilities = logprobs.clone().exp();
    if blocks * BLOCK > vocab {
        let padding = Tensor::zeros([rows, blocks * BLOCK - vocab], &device);
        probabilities = Tensor::cat(vec![probabilities, padding], 1);
    }
    let probabilities = probabilities.reshape([rows, blocks, BLOCK]);
    let masses = probabilities.clone().sum_dim(2).reshape([rows, blocks]);
    let through = masses.cumsum(1);
    let total = through.clone().narrow(1, blocks - 1, 1);
    let target = column(uniforms) * total;
    // The first block whose cumulative mass reaches the target; as the
    // target is positive, that block has mass.
    let block = count_below(through.clone(), target.clone()).clamp_max(blocks as i64 - 1);
    // The mass of the blocks before each, as `through` summed it.
    let mut before = Tensor::zeros([rows, 1], &device);
    if blocks > 1 {
        before = Tensor::cat(vec![before, through.narrow(1, 0, blocks - 1)], 1);
    }
    let before = before.gather(1, block.clone());
    let within = probabilities
        .gather(
            1,
            block.clone().reshape([rows, 1, 1]).expand([rows, 1, BLOCK]),
        )
        .reshape([rows, BLOCK]);
    // The block's last possible token bounds the choice: summed in another
    // order than the blocks' masses, the block may fall short of the target.
    let last_possible = (within.clone().greater_elem(0.0).int()
        * Tensor::<B, 1, Int>::arange(0..BLOCK as i64, &device)
            .reshape([1, BLOCK])
            .expand([rows, BLOCK]))
    .max_dim(1);
    // Compared at the block's scale: added to the mass before it, the
    // smallest probabilities would round away.
    let offset = count_below(within.cumsum(1), target - before).min_pair(last_possible);
    let sampled = block * BLOCK as i64 + offset;
    let [sampled_ids, greedy_ids, sampled_logprobs, greedy_logprobs] = Transaction::default()
        .register(sampled.clone())
        .register(greedy.clone())
        .register(logprobs.clone().gather(1, sampled))
        .register(logprobs.gather(1, greedy))
        .execute()
        .try_into()
        .expect("four tensors read");
    let ids = |data: TensorData| -> Vec<u32> {
        data.convert::<i64>()
            .to_vec::<i64>()
            .expect("ids are integers")
            .into_iter()
            .map(|id| id as u32)
            .collect()
    };
    let values = |data: TensorData| -> Vec<f32> {
        data.convert::<f32>()
            .to_vec::<f32>()
            .expect("log-probs are floats")
    };
    let pair = |ids: Vec<u32>, logprobs: Vec<f32>| ids.into_iter().zip(logprobs).collect();
    Draws {
        sampled: pair(ids(sampled_ids), values(sampled_logprobs)),
        greedy: pair(ids(greedy_ids), values(greedy_logprobs)),
    }
}

/// Per row, how many of `values` `[rows, n]` are below the row's `target` `[rows, 1]`.
fn count_below<B: Backend>(values: Tensor<B, 2>, target: Tensor<B, 2>) -> Tensor<B, 2, Int> {
    let shape = values.dims();
    values.lower(target.expand(shape)).int().sum_dim(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cpu;

    fn logits(rows: &[Vec<f32>]) -> Tensor<Cpu, 2> {
        let vocab = rows[0].len();
        let values: Vec<f32> = rows.concat();
        Tensor::from_data(
            TensorData::new(values, [rows.len(), vocab]),
            &Default::default(),
        )
    }

    #[test]
    fn draws_follow_the_tempered_distribution_across_blocks() {
        // 600 tokens (three blocks, the last padded); the mass sits on a few
        // tokens in different blocks, the rest nearly impossible.
        let mut row = vec![-30.0f32; 600];
        let expected: [(u32, f64); 4] = [(3, 0.4), (255, 0.1), (256, 0.2), (599, 0.3)];
        for (token, share) in expected {
            row[token as usize] = share.ln() as f32;
        }
        let draws = 4000;
        let uniforms: Vec<f32> = (0..draws)
            .map(|i| (i as f32 + 0.5) / draws as f32)
            .collect();
        let drawn = draw(
            logits(&vec![row.clone(); draws]),
            &vec![1.0; draws],
            &uniforms,
        );
        for (token, share) in expected {
            let count = drawn.sampled.iter().filter(|(id, _)| *id == token).count();
            let found = count as f64 / draws as f64;
            assert!((found - share).abs() < 0.01, "token {token}: {found}");
        }
        for &(token, logprob) in &drawn.sampled {
            let share = expected.iter().find(|(id, _)| *id == token).unwrap().1;
            assert!((f64::from(logprob) - f64::ln(share)).abs() < 1e-4);
        }
        assert!(drawn.greedy.iter().all(|&(token, _)| token == 3));
        // At temperature 2 the shares flatten: p^(1/2), renormalised.
        let tempered = draw(logits(&[row.clone()]), &[2.0], &[0.5]);
        let norm: f64 =
            expected.iter().map(|(_, p)| f64::sqrt(*p)).sum::<f64>() + 596.0 * f64::exp(-15.0);
        let (token, logprob) = tempered.greedy[0];
        assert_eq!(token, 3);
        assert!((f64::from(logprob) - (f64::sqrt(0.4) / norm).ln()).abs() < 1e-4);
    }

    #[test]
    fn extreme_uniforms_draw_possible_tokens() {
        // Impossible tokens at both ends of every block.
        let mut row = vec![f32::NEG_INFINITY; 40];
        row[7] = 0.0;
        row[20] = 0.0;
        let rows = vec![row; 3];
        let drawn = draw(logits(&rows), &[1.0; 3], &[f32::EPSILON, 0.5, 1.0]);
        let tokens: Vec<u32> = drawn.sampled.iter().map(|(id, _)| *id).collect();
        assert_eq!(tokens, [7, 7, 20]);
        assert!(
            drawn
                .sampled
                .iter()
                .all(|(_, lp)| (lp - 0.5f32.ln()).abs() < 1e-6)
        );
    }
}
