//! Choosing the next token: greedy, or temperature with nucleus (top-p)
//! truncation, seeded.

use forge_model::tokenizer::ModelTokenizer;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, Ordering};

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

    /// The next token and its log-probability under the sampling
    /// distribution, chosen on the host. Batched generation uses it for
    /// rows with a nucleus; it draws the others where their logits are.
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
        let probability = |index: usize| f64::from(logprobs[index].exp());
        let mut ranked = Ranked::new(&logprobs);
        // The nucleus: the most probable tokens until their mass reaches
        // `top_p` (every token when it is 1, summed without ranking them).
        let (kept, mass) = if self.top_p >= 1.0 {
            (logprobs.len(), (0..logprobs.len()).map(probability).sum())
        } else {
            let mut mass = 0.0f64;
            let mut kept = 0;
            while kept < logprobs.len() {
                mass += probability(ranked.at(kept));
                kept += 1;
                if mass >= f64::from(self.top_p) {
                    break;
                }
            }
            (kept, mass)
        };
        let mut draw = rng.random_range(0.0..mass);
        for rank in 0..kept {
            let index = ranked.at(rank);
            draw -= probability(index);
            if draw <= 0.0 {
                return (index as u32, logprobs[index]);
            }
        }
        let last = ranked.at(kept - 1);
        (last as u32, logprobs[last])
    }
}

/// Token ids in descending order of probability, ranked only as far as
/// asked: a draw almost always ends among the first few dozen tokens, and
/// sorting a whole vocabulary (49,152 tokens for SmolLM2) per row per step
/// would cost more than the model's forward pass.
struct Ranked<'a> {
    logprobs: &'a [f32],
    order: Vec<u32>,
    /// `order[..ranked]` is in its final order.
    ranked: usize,
}

impl<'a> Ranked<'a> {
    fn new(logprobs: &'a [f32]) -> Self {
        Self {
            logprobs,
            order: (0..logprobs.len() as u32).collect(),
            ranked: 0,
        }
    }

    /// The token of rank `rank` (0: the most probable).
    fn at(&mut self, rank: usize) -> usize {
        if rank >= self.ranked {
            // Rank a block four times larger than the last (at least 64
            // tokens): few extensions even for flat distributions.
            let target = (rank + 1)
                .max(self.ranked * 4)
                .max(64)
                .min(self.order.len());
            let logprobs = self.logprobs;
            let descending =
                |a: &u32, b: &u32| logprobs[*b as usize].total_cmp(&logprobs[*a as usize]);
            let rest = &mut self.order[self.ranked..];
            let block = target - self.ranked;
            if block < rest.len() {
                rest.select_nth_unstable_by(block - 1, descending);
            }
            rest[..block].sort_unstable_by(descending);
            self.ranked = target;
        }
        self.order[rank] as usize
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

/// Whether `flag`, an interrupt some caller may have given, is set.
pub(crate) fn is_set(flag: Option<&AtomicBool>) -> bool {
    flag.is_some_and(|flag| flag.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_stop_string_is_found_across_a_sentencepiece_space() {
        let tokenizer = crate::chat::zephyr_tokenizer();
        let id = |piece: &str| tokenizer.token_id(piece).unwrap();
        // `e`, `▁`, `D`, `o`: decoded alone, the last three lose their space.
        let generated = [id("e"), id("\u{2581}"), id("D"), id("o")];
        let stops = [" Do".to_owned()];
        let stop = Stop::tokens(&[]).strings(&stops, &tokenizer);
        assert!(stop.is_done(&generated));
        assert!(!stop.is_done(&generated[..3]));
    }

    #[test]
    fn ranking_on_demand_matches_a_full_sort() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let logprobs: Vec<f32> = (0..1000).map(|_| rng.random_range(-20.0..0.0)).collect();
        let mut sorted: Vec<usize> = (0..logprobs.len()).collect();
        sorted.sort_by(|a, b| logprobs[*b].total_cmp(&logprobs[*a]));
        let mut ranked = Ranked::new(&logprobs);
        // Asked out of order and across the blocks it ranks at a time.
        for rank in [0, 63, 64, 300, 5, 999, 256, 998] {
            assert_eq!(ranked.at(rank), sorted[rank], "rank {rank}");
        }
    }

    #[test]
    fn draws_follow_the_distribution_with_and_without_a_nucleus() {
        let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
        let shares = |top_p: f32| {
            let sampling = Sampling {
                temperature: 1.0,
                top_p,
                max_tokens: 1,
                seed: 0,
            };
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let mut counts = [0usize; 3];
            for _ in 0..20_000 {
                counts[sampling.pick(&logits, &mut rng).0 as usize] += 1;
            }
            counts.map(|count| count as f64 / 20_000.0)
        };
        let full = shares(1.0);
        for (share, expected) in full.iter().zip([0.5, 0.3, 0.2]) {
            assert!((share - expected).abs() < 0.015, "{full:?}");
        }
        // A nucleus of 0.75 keeps the two likeliest tokens, renormalised.
        let nucleus = shares(0.75);
        assert_eq!(nucleus[2], 0.0, "{nucleus:?}");
        assert!((nucleus[0] - 0.625).abs() < 0.015, "{nucleus:?}");
    }

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
    interrupt: Option<&'a AtomicBool>,
}

impl<'a> Stop<'a> {
    /// Stop at any of `tokens`.
    pub fn tokens(tokens: &'a [u32]) -> Self {
        Self {
            tokens,
            strings: &[],
            tokenizer: None,
            interrupt: None,
        }
    }

    /// Also stops every row, cut short, once `interrupt` is set: a batch
    /// whose turns will be thrown away (an evaluation being stopped) need
    /// not be decoded to its end.
    pub fn or_interrupted(self, interrupt: Option<&'a AtomicBool>) -> Self {
        Self { interrupt, ..self }
    }

    /// Whether the batch is to stop now, every row cut short.
    pub fn interrupted(&self) -> bool {
        is_set(self.interrupt)
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
    /// The tail starts a token earlier than a match can, as decoding may
    /// drop its first token's leading space (SentencePiece's `▁`).
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
        let tail = &generated[generated.len().saturating_sub(longest + 1)..];
        tokenizer
            .decode(tail)
            .is_ok_and(|text| self.strings.iter().any(|stop| text.contains(stop.as_str())))
    }
}
