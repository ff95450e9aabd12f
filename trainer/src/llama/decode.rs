//! Decoding: sampling continuations of many prompts in one batch with a
//! shared KV cache, reading what prompts share once — the common beginning
//! of one environment's tasks, the whole prompt of a task's sibling
//! rollouts — and going on from what a conversation's earlier turns read.

use super::Llama;
use crate::draw::draw;
use crate::kv_cache::{KvCache, Prefix, shared_len};
use crate::sampling::{Generation, Sampling, Stop};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

impl<B: Backend> Llama<B> {
    /// Greedy decoding: the ids after `prompt`, at most `max_tokens`, stopping
    /// as `stop` says (the stopping token included).
    pub fn generate_greedy(&self, prompt: &[u32], max_tokens: usize, stop: Stop<'_>) -> Vec<u32> {
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

    /// Samples a continuation of `prompt` (see [`Sampling`]), stopping as
    /// `stop` says (the stopping token included) or at `max_tokens`. Each token comes with its
    /// log-probability under the sampling distribution (temperature applied,
    /// before top-p truncation), which the trainer's ratios are taken against.
    pub fn generate(&self, prompt: &[u32], sampling: &Sampling, stop: Stop<'_>) -> Generation {
        self.generate_batch(&[prompt], std::slice::from_ref(sampling), stop)
            .pop()
            .expect("one row")
    }

    /// [`Self::generate`] for several prompts at once: left-padded into one
    /// batch with a shared KV cache, one forward pass per generated column.
    /// Row r samples with `samplings[r]` (its own seeded generator) and ends
    /// where `stop` says or at its token limit; the batch ends when every row has.
    pub fn generate_batch(
        &self,
        prompts: &[&[u32]],
        samplings: &[Sampling],
        stop: Stop<'_>,
    ) -> Vec<Generation> {
        let mut prefixes = vec![Prefix::default(); prompts.len()];
        self.decode_batch(prompts, samplings, stop, &mut prefixes).0
    }

    /// [`Self::generate_batch`] for conversations that go on: row r's prompt
    /// pass reads only what `prefixes[r]` has not read of its prompt, and
    /// leaves there what the row has read by the end (its prompt and all
    /// but the last sampled id), for its next turn. Rows with nothing read
    /// and the same prompt — sibling rollouts of a task — read it once.
    pub fn continue_batch(
        &self,
        prompts: &[&[u32]],
        samplings: &[Sampling],
        stop: Stop<'_>,
        prefixes: &mut [Prefix<B>],
    ) -> Vec<Generation> {
        let (generations, cache, pads) = self.decode_batch(prompts, samplings, stop, prefixes);
        // Every sampled id but a row's last went into the next pass.
        for (row, ((prompt, generation), pad)) in
            prompts.iter().zip(&generations).zip(pads).enumerate()
        {
            let sampled = &generation.tokens[..generation.tokens.len().saturating_sub(1)];
            let ids = [*prompt, sampled].concat();
            prefixes[row] = cache.prefix(row, pad..pad + ids.len(), ids);
        }
        generations
    }

    /// The batch of [`Self::continue_batch`], going on from `prefixes` (left
    /// empty), with the cache it read into and each row's left padding
    /// there: only callers that keep what was read gather it.
    fn decode_batch(
        &self,
        prompts: &[&[u32]],
        samplings: &[Sampling],
        stop: Stop<'_>,
        prefixes: &mut [Prefix<B>],
    ) -> (Vec<Generation>, KvCache<B>, Vec<usize>) {
        assert_eq!(prompts.len(), samplings.len(), "a sampling per prompt");
        assert_eq!(prompts.len(), prefixes.len(), "a prefix per prompt");
        self.read_common_beginnings(prompts, prefixes);
        self.read_shared_prompts(prompts, prefixes);
        let rows = prompts.len();
        let longest = prompts.iter().map(|prompt| prompt.len()).max().unwrap_or(0);
        let pads: Vec<usize> = prompts
            .iter()
            .map(|prompt| longest - prompt.len())
            .collect();
        // Each row reads at least its prompt's last id: its logits pick the
        // first sampled one. The pass covers the last `width` columns, as
        // many as the row with the most left to read needs; other rows read
        // again the end of what they had read (the same keys and values).
        let mut width = prompts
            .iter()
            .zip(&*prefixes)
            .map(|(prompt, prefix)| unread_ids(prompt, prefix))
            .max()
            .unwrap_or(0);
        let start = longest - width;
        let reused: Vec<usize> = pads.iter().map(|&pad| start.saturating_sub(pad)).collect();
        let ids = prompts
            .iter()
            .zip(&pads)
            .flat_map(|(prompt, &pad)| {
                (start..longest).map(move |column| {
                    column
                        .checked_sub(pad)
                        .map_or(0, |at| i64::from(prompt[at]))
                })
            })
            .collect();
        // Room for the longest prompt and its limit, up to a bound: rows
        // usually stop long before a generous limit, and past the room the
        // buffers double.
        let most = samplings.iter().map(|s| s.max_tokens).max().unwrap_or(0);
        let mut cache = KvCache::with_prefixes(
            self.config.layers,
            prefixes,
            &reused,
            start,
            longest + most.min(MAX_RESERVED_TOKENS),
        );
        // Copied into the cache: the old prefixes need not stay alive beside it.
        prefixes.fill(Prefix::default());
        let mut rngs: Vec<ChaCha8Rng> = samplings
            .iter()
            .map(|sampling| ChaCha8Rng::seed_from_u64(sampling.seed))
            .collect();
        let mut generations = vec![Generation::default(); rows];
        let mut done: Vec<bool> = samplings.iter().map(|s| s.max_tokens == 0).collect();
        let mut hidden = self.hidden(ids, rows, &pads, Some(&mut cache));
        let device = self.device();
        while !done.iter().all(|done| *done) {
            // The last column of each row.
            let last: Vec<i64> = (0..rows)
                .map(|row| (row * width + width - 1) as i64)
                .collect();
            let last = Tensor::<B, 1, Int>::from_data(TensorData::new(last, [rows]), &device);
            let logits = self.project(hidden.select(0, last));
            let picks = pick_rows(logits, samplings, &mut rngs, &done);
            let mut next = vec![0i64; rows];
            for (row, pick) in picks.into_iter().enumerate() {
                let Some((token, logprob)) = pick else {
                    continue;
                };
                let generation = &mut generations[row];
                generation.tokens.push(token);
                generation.logprobs.push(logprob);
                next[row] = i64::from(token);
                if stop.is_done(&generation.tokens) {
                    generation.stopped = true;
                }
                done[row] =
                    generation.stopped || generation.tokens.len() >= samplings[row].max_tokens;
            }
            if done.iter().all(|done| *done) || stop.interrupted() {
                break;
            }
            hidden = self.hidden(next, rows, &pads, Some(&mut cache));
            width = 1;
        }
        (generations, cache, pads)
    }

    /// Gives rows that have read nothing of their different prompts, which
    /// begin alike — the tasks of one environment, whose system prompt
    /// holds the tool schemas — the keys and values of what their prompts
    /// share, read once for each such cluster of rows.
    fn read_common_beginnings(&self, prompts: &[&[u32]], prefixes: &mut [Prefix<B>]) {
        let mut fresh: Vec<usize> = (0..prompts.len())
            .filter(|&row| prompts[row].len() > 1 && prefixes[row].shared_with(prompts[row]) == 0)
            .collect();
        fresh.sort_by_key(|&row| prompts[row]);
        // In that order, a cluster goes on while a prompt shares at least
        // half of the shorter one with the one before; it holds `common`
        // ids that all of its prompts share.
        let mut clusters: Vec<(usize, Vec<usize>)> = Vec::new();
        for row in fresh {
            let prompt = prompts[row];
            if let Some((common, rows)) = clusters.last_mut() {
                let before = prompts[*rows.last().expect("a cluster has rows")];
                let shared = shared_len(before, prompt);
                if 2 * shared >= before.len().min(prompt.len()) {
                    *common = (*common).min(shared);
                    rows.push(row);
                    continue;
                }
            }
            clusters.push((prompt.len(), vec![row]));
        }
        let groups = clusters
            .into_iter()
            // Rows of one prompt alone are `read_shared_prompts`' to group.
            .filter(|(common, rows)| rows.iter().any(|&row| prompts[row].len() > *common))
            .map(|(common, rows)| {
                // Each row reads at least its prompt's last id in the pass.
                let shortest = rows.iter().map(|&row| prompts[row].len()).min();
                let head = common.min(shortest.expect("a cluster has rows") - 1);
                (&prompts[rows[0]][..head], rows)
            })
            .collect();
        self.read_for_groups(prompts, prefixes, groups);
    }

    /// Gives rows with the same prompt that have read as much of it — sibling
    /// rollouts of a task, from nothing, a pooled prefix or a common
    /// beginning — the rest of the prompt's keys and values (all but its
    /// last id) read once for all of them.
    fn read_shared_prompts(&self, prompts: &[&[u32]], prefixes: &mut [Prefix<B>]) {
        let mut groups: BTreeMap<(&[u32], usize), Vec<usize>> = BTreeMap::new();
        for (row, (prompt, prefix)) in prompts.iter().zip(&*prefixes).enumerate() {
            let read = prefix.shared_with(prompt);
            if read + 1 < prompt.len() {
                groups.entry((prompt, read)).or_default().push(row);
            }
        }
        let groups = groups
            .into_iter()
            .filter(|(_, rows)| rows.len() > 1)
            .map(|((prompt, _), rows)| (&prompt[..prompt.len() - 1], rows))
            .collect();
        self.read_for_groups(prompts, prefixes, groups);
    }

    /// Reads once for each group its `head`, which begins all its rows'
    /// prompts, going on from what its first row has read (all of its rows
    /// have read as much of the head), and gives the group's rows what was
    /// read. A group gains only if one of its rows has more to read than
    /// the batch's prompt pass, which the other rows' unread ids set:
    /// otherwise its rows would read all of it again anyway.
    fn read_for_groups(
        &self,
        prompts: &[&[u32]],
        prefixes: &mut [Prefix<B>],
        mut groups: Vec<(&[u32], Vec<usize>)>,
    ) {
        loop {
            let mut grouped = vec![false; prompts.len()];
            for (_, rows) in &groups {
                for &row in rows {
                    grouped[row] = true;
                }
            }
            let width = prompts
                .iter()
                .zip(&*prefixes)
                .zip(grouped)
                .filter(|(_, grouped)| !grouped)
                .map(|((prompt, prefix), _)| unread_ids(prompt, prefix))
                .fold(1, usize::max);
            let before = groups.len();
            groups.retain(|(_, rows)| {
                rows.iter()
                    .any(|&row| unread_ids(prompts[row], &prefixes[row]) > width)
            });
            if groups.len() == before {
                break;
            }
        }
        if groups.is_empty() {
            return;
        }
        let (heads, rows): (Vec<&[u32]>, Vec<Vec<usize>>) = groups.into_iter().unzip();
        let reading = Sampling {
            max_tokens: 0,
            ..Sampling::greedy()
        };
        let mut read: Vec<Prefix<B>> = rows.iter().map(|rows| prefixes[rows[0]].clone()).collect();
        self.continue_batch(
            &heads,
            &vec![reading; heads.len()],
            Stop::tokens(&[]),
            &mut read,
        );
        for (rows, read) in rows.into_iter().zip(read) {
            for row in rows {
                prefixes[row] = read.clone();
            }
        }
    }
}

/// The ids of `prompt` a pass must read after `prefix`: at least its last,
/// whose logits pick the first sampled id.
fn unread_ids<B: Backend>(prompt: &[u32], prefix: &Prefix<B>) -> usize {
    prompt.len()
        - prefix
            .shared_with(prompt)
            .min(prompt.len().saturating_sub(1))
}

/// Positions past the prompt that batched generation allocates its KV cache
/// for at the start.
const MAX_RESERVED_TOKENS: usize = 1024;

/// Each unfinished row's next token from its logits `[rows, vocab]`. Greedy
/// rows and rows sampling from their whole distribution draw on the device
/// (see [`crate::draw`]); rows with a nucleus (`top_p` < 1) read their
/// logits back and are ranked on the host.
fn pick_rows<B: Backend>(
    logits: Tensor<B, 2>,
    samplings: &[Sampling],
    rngs: &mut [ChaCha8Rng],
    done: &[bool],
) -> Vec<Option<(u32, f32)>> {
    let rows = samplings.len();
    let sampled = |row: usize| samplings[row].temperature > 0.0;
    let nucleus = |row: usize| sampled(row) && samplings[row].top_p < 1.0;
    let mut picks = vec![None; rows];
    let (on_host, on_device): (Vec<usize>, Vec<usize>) = (0..rows)
        .filter(|&row| !done[row])
        .partition(|&row| nucleus(row));
    if !on_device.is_empty() {
        let temperatures: Vec<f32> = samplings
            .iter()
            .map(|sampling| match sampling.temperature {
                temperature if temperature > 0.0 => temperature,
                // Greedy: the argmax, its log-prob at temperature 1.
                _ => 1.0,
            })
            .collect();
        // One draw from each sampling row's generator; the others' are unused.
        let mut uniforms = vec![0.5; rows];
        for &row in on_device.iter().filter(|&&row| sampled(row)) {
            uniforms[row] = rngs[row].random_range(f32::EPSILON..1.0);
        }
        let draws = draw(logits.clone(), &temperatures, &uniforms);
        for row in on_device {
            picks[row] = Some(if sampled(row) {
                draws.sampled[row]
            } else {
                draws.greedy[row]
            });
        }
    }
    if !on_host.is_empty() {
        let vocab = logits.dims()[1];
        let at: Vec<i64> = on_host.iter().map(|&row| row as i64).collect();
        let at =
            Tensor::<B, 1, Int>::from_data(TensorData::new(at, [on_host.len()]), &logits.device());
        let logits: Vec<f32> = logits
            .select(0, at)
            .into_data()
            .to_vec()
            .expect("logits are f32");
        let host_samplings: Vec<&Sampling> = on_host.iter().map(|&row| &samplings[row]).collect();
        let mut host_rngs: Vec<&mut ChaCha8Rng> = rngs
            .iter_mut()
            .enumerate()
            .filter(|(row, _)| on_host.binary_search(row).is_ok())
            .map(|(_, rng)| rng)
            .collect();
        let host_picks = pick_on_host(&host_samplings, &logits, vocab, &mut host_rngs);
        for (row, pick) in on_host.into_iter().zip(host_picks) {
            picks[row] = Some(pick);
        }
    }
    picks
}

/// Each row's next token from its logits (`[rows · vocab]`), ranked on the
/// host. Rows are independent, each with its own seeded generator, so a
/// large batch is split across threads without changing any result:
/// ranking a 49,152-token vocabulary for hundreds of rows is otherwise a
/// serial bottleneck between GPU steps.
fn pick_on_host(
    samplings: &[&Sampling],
    logits: &[f32],
    vocab: usize,
    rngs: &mut [&mut ChaCha8Rng],
) -> Vec<(u32, f32)> {
    const PER_THREAD: usize = 1 << 20;
    let rows = rngs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(logits.len().div_ceil(PER_THREAD))
        .clamp(1, rows.max(1));
    let per_thread = rows.div_ceil(threads).max(1);
    let pick = |row: usize, rng: &mut ChaCha8Rng| {
        samplings[row].pick(&logits[row * vocab..(row + 1) * vocab], rng)
    };
    let mut picks = vec![(0, 0.0); rows];
    std::thread::scope(|scope| {
        for (chunk, (slots, rngs)) in picks
            .chunks_mut(per_thread)
            .zip(rngs.chunks_mut(per_thread))
            .enumerate()
        {
            let work = move || {
                for (offset, (slot, rng)) in slots.iter_mut().zip(rngs).enumerate() {
                    *slot = pick(chunk * per_thread + offset, rng);
                }
            };
            if threads == 1 {
                work();
            } else {
                scope.spawn(work);
            }
        }
    });
    picks
}
