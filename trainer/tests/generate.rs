//! Batched generation: left-padded rows decode exactly as each prompt would
//! alone, each with its own seeded sampler.

use forge_trainer::{Cpu, Llama, LlamaConfig, Sampling, Stop};

#[test]
fn a_batch_of_prompts_decodes_as_each_prompt_alone() {
    let model = Llama::<Cpu>::init(LlamaConfig::tiny(40), 5, &Default::default());
    let prompts: [&[u32]; 3] = [&[1, 5, 9, 3], &[1, 6], &[1, 7, 7, 7, 7, 2, 8]];
    let sampling = |seed, max_tokens| Sampling {
        temperature: 1.0,
        top_p: 0.95,
        max_tokens,
        seed,
    };
    // Different limits: rows finish at different columns.
    let samplings = [sampling(1, 6), sampling(2, 3), sampling(3, 8)];
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
    let reseeded = [sampling(9, 6), sampling(2, 3), sampling(3, 8)];
    assert_ne!(
        model.generate_batch(&prompts, &reseeded, Stop::tokens(&stop))[0].tokens,
        batch[0].tokens
    );
}

/// A stop string ends a row at the token that completes it, wherever the
/// string falls across tokens.
#[test]
fn stop_strings_end_a_row_at_the_token_that_completes_them() {
    let tokenizer = forge_model::tokenizer::ModelTokenizer::byte_level();
    let vocab = tokenizer.vocab_size();
    let model = Llama::<Cpu>::init(LlamaConfig::tiny(vocab), 11, &Default::default());
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
