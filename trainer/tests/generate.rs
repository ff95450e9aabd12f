//! Batched generation: left-padded rows decode exactly as each prompt would
//! alone, each with its own seeded sampler.

use forge_trainer::{Cpu, Llama, LlamaConfig, Sampling};

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
    let batch = model.generate_batch(&prompts, &samplings, &stop);
    for ((prompt, sampling), batched) in prompts.iter().zip(&samplings).zip(&batch) {
        let alone = model.generate(prompt, sampling, &stop);
        assert_eq!(batched.tokens, alone.tokens);
        assert_eq!(batched.stopped, alone.stopped);
        assert!(batched.tokens.len() <= sampling.max_tokens);
        for (a, b) in batched.logprobs.iter().zip(&alone.logprobs) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
    assert_eq!(batch[1].tokens.len(), 3);
    // Same seeds, same tokens; another seed, another sample.
    assert_eq!(model.generate_batch(&prompts, &samplings, &stop), batch);
    let reseeded = [sampling(9, 6), sampling(2, 3), sampling(3, 8)];
    assert_ne!(
        model.generate_batch(&prompts, &reseeded, &stop)[0].tokens,
        batch[0].tokens
    );
}
