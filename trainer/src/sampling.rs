//! Choosing the next token: greedy, or temperature with nucleus (top-p)
//! truncation, seeded.

use forge_model::tokenizer::ModelTokenizer;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// How tokens are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// 0 is greedy.
    pub temperature: f32,
    /// Sample only from the smallest set of tokens whose probability reaches this.
    pub top_p: f32,
    pub max_tokens: usize,
    pub seed: u64,
}

impl Sampling {
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 256,
            seed: 0,
        }
    }

    /// The next token and its log-probability under the sampling distribution.
    pub fn pick(&self, logits: &[f32], rng: &mut ChaCha8Rng) -> (u32, f32) {
        let temperature = if self.temperature > 0.0 {
            self.temperature
        } else {
            1.0
        };
        let logprobs = log_softmax(logits, temperature);
        if self.temperature <= 0.0 {
            let best = argmax(&logprobs);
            return (best as u32, logprobs[best]);
        }
        let mut order: Vec<usize> = (0..logprobs.len()).collect();
        order.sort_unstable_by(|a, b| logprobs[*b].total_cmp(&logprobs[*a]));
        let mut kept = Vec::new();
        let mut mass = 0.0f64;
        for index in order {
            kept.push(index);
            mass += f64::from(logprobs[index].exp());
            if mass >= f64::from(self.top_p) {
                break;
            }
        }
        let mut draw = rng.random_range(0.0..mass);
        for &index in &kept {
            draw -= f64::from(logprobs[index].exp());
            if draw <= 0.0 {
                return (index as u32, logprobs[index]);
            }
        }
        let last = *kept.last().expect("at least one token is kept");
        (last as u32, logprobs[last])
    }
}

fn argmax(values: &[f32]) -> usize {
    values
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(index, _)| index)
}

fn log_softmax(logits: &[f32], temperature: f32) -> Vec<f32> {
    let scaled: Vec<f64> = logits
        .iter()
        .map(|logit| f64::from(*logit) / f64::from(temperature))
        .collect();
    let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_sum = max
        + scaled
            .iter()
            .map(|value| (value - max).exp())
            .sum::<f64>()
            .ln();
    scaled
        .iter()
        .map(|value| (value - log_sum) as f32)
        .collect()
}

/// A sampled continuation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub logprobs: Vec<f32>,
    /// Ended on a stop token (not on the token limit).
    pub stopped: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn greedy_takes_the_argmax_with_its_logprob() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (token, logprob) = Sampling::greedy().pick(&[0.0, 2.0, 1.0], &mut rng);
        assert_eq!(token, 1);
        let expected = 2.0 - (1.0f64 + 2f64.exp() + 1f64.exp()).ln();
        assert!((f64::from(logprob) - expected).abs() < 1e-6);
    }

    #[test]
    fn top_p_keeps_only_the_nucleus_and_sampling_is_seeded() {
        let sampling = Sampling {
            temperature: 1.0,
            top_p: 0.5,
            max_tokens: 1,
            seed: 0,
        };
        // Token 0 alone holds more than half the mass: it is always chosen.
        let logits = [3.0, 0.0, 0.0, 0.0];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!((0..50).all(|_| sampling.pick(&logits, &mut rng).0 == 0));
        let wide = Sampling {
            top_p: 1.0,
            ..sampling
        };
        let draws = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..20)
                .map(|_| wide.pick(&[0.0, 0.0, 0.0, 0.0], &mut rng).0)
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(5), draws(5));
        assert!(
            draws(5).iter().any(|token| *token != draws(5)[0]),
            "uniform logits vary"
        );
    }
}

/// When a generated row is complete: at one of `tokens`, or once its text
/// contains one of `strings` — the token that completes it included either
/// way, so that what is trained is exactly what was sampled.
#[derive(Clone, Copy)]
pub struct Stop<'a> {
    tokens: &'a [u32],
    strings: &'a [String],
    tokenizer: Option<&'a ModelTokenizer>,
}

impl<'a> Stop<'a> {
    /// Stop at any of `tokens`.
    pub fn tokens(tokens: &'a [u32]) -> Self {
        Self {
            tokens,
            strings: &[],
            tokenizer: None,
        }
    }

    /// Also stop once the generated text, decoded with `tokenizer`, contains
    /// any of `strings`.
    pub fn strings(self, strings: &'a [String], tokenizer: &'a ModelTokenizer) -> Self {
        Self {
            strings,
            tokenizer: Some(tokenizer),
            ..self
        }
    }

    /// Whether a row that has generated `generated` is complete. Only the
    /// tail that could hold a new match is decoded: a match ending earlier
    /// would have stopped the row then, and every token is at least a byte.
    pub fn is_done(&self, generated: &[u32]) -> bool {
        let Some(&last) = generated.last() else {
            return false;
        };
        if self.tokens.contains(&last) {
            return true;
        }
        let Some(tokenizer) = self.tokenizer else {
            return false;
        };
        let longest = self.strings.iter().map(String::len).max().unwrap_or(0);
        if longest == 0 {
            return false;
        }
        let tail = &generated[generated.len().saturating_sub(longest)..];
        tokenizer
            .decode(tail)
            .is_ok_and(|text| self.strings.iter().any(|stop| text.contains(stop.as_str())))
    }
}
