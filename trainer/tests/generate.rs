//! Batched generation: left-padded rows decode exactly as each prompt would
//! alone, each with its own seeded sampler.

mod backend;

use backend::Backend;
use forge_trainer::{Generation, Llama, LlamaConfig, Prefix, PrefixPool, Sampling, Stop};

#[test]
fn a_batch_of_prompts_decodes_as_each_prompt_alone() {
    // Left padding shifts a row's columns, not the distances within a
    // sliding window: windowed rows decode as alone too.
    for sliding_window in [None, Some(3)] {
        decodes_as_each_prompt_alone(&Llama::<Backend>::init(
            LlamaConfig {
                sliding_window,
                ..LlamaConfig::tiny(40)
            },
            5,
            &Default::default(),
        ));
    }
}

/// Rows of a batch sample what each prompt alone would, seeded alike.
fn decodes_as_each_prompt_alone(model: &Llama<Backend>) {
    let prompts: [&[u32]; 3] = [&[1, 5, 9, 3], &[1, 6], &[1, 7, 7, 7, 7, 2, 8]];
    let sampling = |seed, max_tokens, top_p| Sampling {
        temperature: 1.0,
        top_p,
        max_tokens,
        seed,
    };
    // Different limits: rows finish at different columns. Rows with a
    // nucleus are ranked on the host, the others drawn on the device.
    let samplings = [
        sampling(1, 6, 1.0),
        sampling(2, 3, 0.95),
        sampling(3, 8, 1.0),
    ];
    let stop = [39];
    let batch = model.generate_batch(&prompts, &samplings, Stop::tokens(&stop));
    for ((prompt, sampling), batched) in prompts.iter().zip(&samplings).zip(&batch) {
        let alone = model.generate(prompt, sampling, Stop::tokens(&stop));
        assert_eq!(batched.tokens, alone.tokens);
        assert_eq!(batched.stopped, alone.stopped);
        assert!(batched.tokens.len() <= sampling.max_tokens);
        for (a, b) in batched.logprobs.iter().zip(&alone.logprobs) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
    assert_eq!(batch[1].tokens.len(), 3);
    // Same seeds, same tokens; another seed, another sample.
    assert_eq!(
        model.generate_batch(&prompts, &samplings, Stop::tokens(&stop)),
        batch
    );
    let reseeded = [
        sampling(9, 6, 1.0),
        sampling(2, 3, 0.95),
        sampling(3, 8, 1.0),
    ];
    assert_ne!(
        model.generate_batch(&prompts, &reseeded, Stop::tokens(&stop))[0].tokens,
        batch[0].tokens
    );
}

/// A conversation that goes on: each row's next prompt pass reads only what
/// its prefix has not, sibling rows with one prompt read it once, and every
/// row samples what a pass over its whole prompt would.
#[test]
fn turns_that_go_on_read_only_what_is_new_and_sample_as_a_fresh_pass() {
    let model = Llama::<Backend>::init(LlamaConfig::tiny(40), 5, &Default::default());
    let sampling = |seed, top_p| Sampling {
        temperature: 1.0,
        top_p,
        max_tokens: 5,
        seed,
    };
    let samplings = [sampling(1, 1.0), sampling(2, 1.0), sampling(3, 0.95)];
    let fresh = |prompts: &[Vec<u32>]| {
        let prompts: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        model.generate_batch(&prompts, &samplings, Stop::tokens(&[]))
    };
    let same = |a: &[Generation], b: &[Generation]| {
        for (a, b) in a.iter().zip(b) {
            assert_eq!(a.tokens, b.tokens);
            for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
                assert!((x - y).abs() < 1e-4, "{x} vs {y}");
            }
        }
    };
    // Two siblings with one prompt, and another prompt.
    let first: Vec<Vec<u32>> = vec![vec![1, 5, 9, 3, 4], vec![1, 5, 9, 3, 4], vec![1, 6]];
    let mut prefixes: Vec<Prefix<Backend>> = vec![Prefix::default(); 3];
    let prompts: Vec<&[u32]> = first.iter().map(Vec::as_slice).collect();
    let turn = model.continue_batch(&prompts, &samplings, Stop::tokens(&[]), &mut prefixes);
    same(&turn, &fresh(&first));
    assert_ne!(turn[0].tokens, turn[1].tokens, "siblings sample apart");
    for ((prefix, prompt), generation) in prefixes.iter().zip(&first).zip(&turn) {
        let sampled = &generation.tokens[..generation.tokens.len() - 1];
        assert_eq!(prefix.ids(), [&prompt[..], sampled].concat());
    }
    // The next prompts: the reply and a new message; the second row's reply
    // is re-rendered differently, so its prefix serves only in part.
    let next: Vec<Vec<u32>> = first
        .iter()
        .zip(&turn)
        .enumerate()
        .map(|(row, (prompt, generation))| {
            let mut reply = generation.tokens.clone();
            if row == 1 {
                reply[1] = (reply[1] + 1) % 40;
            }
            [&prompt[..], &reply, &[2, 7, 7]].concat()
        })
        .collect();
    let prompts: Vec<&[u32]> = next.iter().map(Vec::as_slice).collect();
    let mut going_on = prefixes.clone();
    let turn = model.continue_batch(&prompts, &samplings, Stop::tokens(&[]), &mut going_on);
    same(&turn, &fresh(&next));
    // Beside a new row longer than all of them, the rows go on as well.
    let mut joined = next.clone();
    joined.push((0..24).map(|at| at % 40).collect());
    let rows: Vec<&[u32]> = joined.iter().map(Vec::as_slice).collect();
    let mut with_new = [prefixes.clone(), vec![Prefix::default()]].concat();
    let four = [samplings.to_vec(), vec![sampling(4, 1.0)]].concat();
    let beside = model.continue_batch(&rows, &four, Stop::tokens(&[]), &mut with_new);
    same(&beside[..3], &turn);
    same(
        &beside[3..],
        &model.generate_batch(&rows[3..], &four[3..], Stop::tokens(&[])),
    );
    // The prefixes are read, not recomputed: another model's keys and
    // values under the same ids change what is sampled.
    let other = Llama::<Backend>::init(LlamaConfig::tiny(40), 6, &Default::default());
    let mut foreign = vec![Prefix::default(); 3];
    let read: Vec<&[u32]> = prefixes.iter().map(Prefix::ids).collect();
    let reading = Sampling {
        max_tokens: 0,
        ..Sampling::greedy()
    };
    other.continue_batch(
        &read,
        &[reading.clone(), reading.clone(), reading],
        Stop::tokens(&[]),
        &mut foreign,
    );
    assert_eq!(foreign.iter().map(Prefix::ids).collect::<Vec<_>>(), read);
    let misled = model.continue_batch(&prompts, &samplings, Stop::tokens(&[]), &mut foreign);
    assert_ne!(
        misled
            .iter()
            .map(|g| g.logprobs.clone())
            .collect::<Vec<_>>(),
        turn.iter().map(|g| g.logprobs.clone()).collect::<Vec<_>>()
    );
}

/// Different prompts that begin alike (the tasks of one environment) read
/// what they share once, siblings among them the rest of theirs once, and
/// every row samples what it would alone.
#[test]
fn prompts_that_begin_alike_sample_as_each_alone() {
    let model = Llama::<Backend>::init(LlamaConfig::tiny(40), 5, &Default::default());
    let system: Vec<u32> = (0..12).map(|at| (7 * at + 1) % 40).collect();
    let task = |tail: &[u32]| [&system[..], tail].concat();
    let (first, second) = (task(&[3, 4, 5]), task(&[9]));
    // Ordered apart, beside a prompt that begins otherwise and a row that
    // is all system prompt.
    let prompts: [&[u32]; 5] = [&first, &[2, 2, 3], &second, &first, &system];
    let samplings: Vec<Sampling> = (0..5)
        .map(|seed| Sampling {
            temperature: 1.0,
            top_p: 1.0,
            max_tokens: 5,
            seed,
        })
        .collect();
    let mut prefixes = vec![Prefix::default(); 5];
    let batch = model.continue_batch(&prompts, &samplings, Stop::tokens(&[]), &mut prefixes);
    for (((prompt, sampling), batched), prefix) in
        prompts.iter().zip(&samplings).zip(&batch).zip(&prefixes)
    {
        let alone = model.generate(prompt, sampling, Stop::tokens(&[]));
        assert_eq!(batched.tokens, alone.tokens);
        for (a, b) in batched.logprobs.iter().zip(&alone.logprobs) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
        let sampled = &batched.tokens[..batched.tokens.len() - 1];
        assert_eq!(prefix.ids(), [prompt, sampled].concat());
    }
}

/// First prompts that begin like an earlier one go on from the pool's
/// longest prefix of them; siblings that begin from one prefix read the rest
/// of their prompt once, from there; and every row samples what a pass over
/// its whole prompt would.
#[test]
fn first_prompts_go_on_from_the_pool_of_earlier_ones() {
    let model = Llama::<Backend>::init(LlamaConfig::tiny(40), 5, &Default::default());
    let sampling = |seed| Sampling {
        temperature: 1.0,
        top_p: 1.0,
        max_tokens: 5,
        seed,
    };
    let samplings = [sampling(1), sampling(2), sampling(3)];
    let system: Vec<u32> = (0..12).map(|at| (7 * at + 1) % 40).collect();
    let task = |tail: &[u32]| [&system[..], tail].concat();
    let (first, second) = (task(&[3, 4, 5]), task(&[9, 9]));
    let reading = Sampling {
        max_tokens: 0,
        ..Sampling::greedy()
    };
    // What `model` read of the first task's prompt, pooled.
    let read_by = |model: &Llama<Backend>| {
        let mut read = vec![Prefix::default()];
        model.continue_batch(
            &[&first],
            std::slice::from_ref(&reading),
            Stop::tokens(&[]),
            &mut read,
        );
        let mut pool = PrefixPool::new(2);
        pool.keep(read.remove(0));
        pool
    };
    let logprobs = |generations: &[Generation]| -> Vec<Vec<f32>> {
        generations.iter().map(|g| g.logprobs.clone()).collect()
    };

    // Two siblings of another task share the system prompt with the pooled
    // one; a trial of the same task shares all of it.
    let prompts = [&second[..], &second[..], &first[..]];
    let mut pool = read_by(&model);
    let mut begun: Vec<Prefix<Backend>> = prompts.iter().map(|p| pool.longest(p)).collect();
    assert_eq!(begun[0].shared_with(&second), system.len());
    assert_eq!(begun[2].ids(), first);
    let turn = model.continue_batch(&prompts, &samplings, Stop::tokens(&[]), &mut begun);
    let fresh = model.generate_batch(&prompts, &samplings, Stop::tokens(&[]));
    for (a, b) in turn.iter().zip(&fresh) {
        assert_eq!(a.tokens, b.tokens);
        for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
    }

    // The siblings read their rest from the pooled keys and values: those of
    // another model under the same ids mislead both of them alike, as they
    // do a row alone.
    let other = Llama::<Backend>::init(LlamaConfig::tiny(40), 6, &Default::default());
    let mut foreign = read_by(&other);
    let mut begun: Vec<Prefix<Backend>> = prompts[..2].iter().map(|p| foreign.longest(p)).collect();
    let misled = model.continue_batch(
        &prompts[..2],
        &samplings[..2],
        Stop::tokens(&[]),
        &mut begun,
    );
    let mut alone = vec![foreign.longest(&second)];
    let misled_alone =
        model.continue_batch(&[&second], &samplings[1..2], Stop::tokens(&[]), &mut alone);
    assert_eq!(misled[1].tokens, misled_alone[0].tokens);
    for (x, y) in misled[1].logprobs.iter().zip(&misled_alone[0].logprobs) {
        assert!((x - y).abs() < 1e-5, "{x} vs {y}");
    }
    assert_ne!(logprobs(&misled), logprobs(&fresh[..2]));
}

/// A stop string ends a row at the token that completes it, wherever the
/// string falls across tokens.
#[test]
fn stop_strings_end_a_row_at_the_token_that_completes_them() {
    let tokenizer = forge_model::tokenizer::ModelTokenizer::byte_level();
    let vocab = tokenizer.vocab_size();
    let model = Llama::<Backend>::init(LlamaConfig::tiny(vocab), 11, &Default::default());
    let prompt: Vec<u32> = tokenizer.encode("lamp 7 on").unwrap();
    let sampling = Sampling {
        temperature: 1.0,
        top_p: 1.0,
        max_tokens: 40,
        seed: 3,
    };
    let free = model.generate(&prompt, &sampling, Stop::tokens(&[]));
    assert_eq!(free.tokens.len(), 40);
    let text = tokenizer.decode(&free.tokens).unwrap();
    // Two characters from the middle of the free run, as the stop string.
    let start = text.char_indices().nth(20).unwrap().0;
    let end = text.char_indices().nth(22).map_or(text.len(), |(at, _)| at);
    let stops = vec![text[start..end].to_owned()];
    let stopped = model.generate(
        &prompt,
        &sampling,
        Stop::tokens(&[]).strings(&stops, &tokenizer),
    );
    assert!(stopped.stopped);
    // The same samples up to the first token whose text completes the string.
    let cut = (1..=free.tokens.len())
        .find(|&n| {
            tokenizer
                .decode(&free.tokens[..n])
                .unwrap()
                .contains(&stops[0])
        })
        .unwrap();
    assert_eq!(stopped.tokens, free.tokens[..cut]);
    assert_eq!(stopped.logprobs, free.logprobs[..cut]);
}
