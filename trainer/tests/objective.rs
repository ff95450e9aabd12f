//! The training objectives on a tiny random model: masked rollouts never
//! touch the gradient, the sign of the advantage decides which way a
//! sequence's probability moves, the clip stops the push past the trust
//! region, RL learns a bandit from its rewards, SFT lowers the loss;
//! checkpoints round-trip exactly.

mod backend;

use backend::{Backend, TrainBackend};
use burn::module::AutodiffModule;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer, SgdConfig};
use burn::tensor::TensorData;
use forge_model::tokenizer::ModelTokenizer;
use forge_rl::advantage::{Rollout, Scaling, advantages};
use forge_trainer::lora::{FreshAdapters, Lora};
use forge_trainer::train::config::Activations;
use forge_trainer::train::objective::{
    Passes, Scored, Sequence, Span, Surrogate, reference_logprobs, sft_gradients,
    surrogate_gradients,
};
use forge_trainer::{Llama, LlamaConfig, Prefix, Sampling, Stop};

type Model = Llama<TrainBackend>;

fn model() -> Model {
    Llama::init(LlamaConfig::tiny(40), 7, &Default::default())
}

/// A sequence whose last `trained` tokens are trained, sampled with `logprob` each.
fn sequence(tokens: &[u32], trained: usize, logprob: f32) -> Sequence {
    Sequence {
        tokens: tokens.to_vec(),
        spans: vec![Span {
            start: tokens.len() - trained,
            logprobs: vec![logprob; trained],
        }],
    }
}

fn scored(sequence: Sequence, advantage: Option<f64>) -> Scored {
    Scored {
        sequence,
        advantage,
        reference: None,
    }
}

const SURROGATE: Surrogate = Surrogate {
    clip: 0.2,
    kl: 0.0,
    temperature: 1.0,
};

/// `micro_batch` sequences a pass, activations kept.
fn passes(micro_batch: usize) -> Passes {
    Passes {
        micro_batch,
        activations: Activations::Kept,
    }
}

/// `model` after one plain gradient step of size `lr`.
fn stepped(model: &Model, grads: GradientsParams, lr: f64) -> Model {
    let mut sgd = SgdConfig::new().init::<TrainBackend, Model>();
    sgd.step(lr, model.clone(), grads)
}

fn weights(model: &Model) -> Vec<(String, TensorData)> {
    model.valid().named_tensors()
}

/// How far a unit gradient step moves each of `model`'s tensors (that
/// LoRA adapters are folded in keeps the adapters' steps apart per
/// projection).
fn step(model: &Model, grads: GradientsParams) -> Vec<(String, Vec<f32>)> {
    let values = |model: &Model| {
        weights(model)
            .into_iter()
            .map(|(name, data)| (name, data.to_vec::<f32>().unwrap()))
    };
    values(&stepped(model, grads, 1.0))
        .zip(values(model))
        .map(|((name, after), (_, before))| {
            let step = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            (name, step)
        })
        .collect()
}

/// The summed log-prob of a sequence's trained tokens.
fn logprob(model: &Model, sequence: &Sequence) -> f32 {
    sequence.logprobs(&model.valid(), 1.0).sum().into_scalar()
}

/// Current log-prob of every trained token: what an on-policy sampler recorded.
fn on_policy(model: &Model, tokens: &[u32], trained: usize) -> Sequence {
    let mut sequence = sequence(tokens, trained, 0.0);
    sequence.spans[0].logprobs = sequence
        .logprobs(&model.valid(), 1.0)
        .into_data()
        .to_vec()
        .unwrap();
    sequence
}

/// What the trainer's ratios stand on: the log-probs recorded while sampling
/// (batched, left-padded, through the KV cache, and in a later turn going
/// on from what the first one read) are those the training pass computes
/// for the same tokens.
#[test]
fn sampled_log_probs_are_the_training_passes() {
    let model = model().valid();
    let first: Vec<Vec<u32>> = vec![vec![1, 5, 9, 3, 4, 4, 2], vec![1, 6], vec![1, 7, 7, 2]];
    // Drawn on the device (whole distribution) and ranked on the host (nucleus).
    let samplings: Vec<Sampling> = [1.0, 0.9, 1.0]
        .into_iter()
        .zip(0..)
        .map(|(top_p, seed)| Sampling {
            temperature: 0.7,
            top_p,
            max_tokens: 12,
            seed,
        })
        .collect();
    let mut prefixes = vec![Prefix::default(); 3];
    let mut prompts = first;
    for _turn in 0..2 {
        let rows: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        let generations = model.continue_batch(&rows, &samplings, Stop::tokens(&[]), &mut prefixes);
        for (prompt, generation) in prompts.iter_mut().zip(&generations) {
            assert_eq!(generation.tokens.len(), 12);
            let sequence = Sequence {
                tokens: [prompt, &generation.tokens[..]].concat(),
                spans: vec![Span {
                    start: prompt.len(),
                    logprobs: generation.logprobs.clone(),
                }],
            };
            let trained: Vec<f32> = sequence.logprobs(&model, 0.7).into_data().to_vec().unwrap();
            for (sampled, trained) in generation.logprobs.iter().zip(&trained) {
                assert!((sampled - trained).abs() < 1e-5, "{sampled} vs {trained}");
            }
            // The next turn's prompt: this one, the reply, a new message.
            *prompt = [&sequence.tokens[..], &[2, 8, 8, 3]].concat();
        }
    }
}

#[test]
fn a_masked_rollout_does_not_touch_the_gradient() {
    let model = model();
    let good = on_policy(&model, &[1, 5, 9, 3, 4, 8], 3);
    let bad = on_policy(&model, &[1, 6, 2, 7, 7, 2], 3);
    let spoiled = on_policy(&model, &[1, 3, 3, 3, 9, 9, 9, 9], 5);
    let with_mask = vec![
        scored(good.clone(), Some(1.0)),
        scored(spoiled.clone(), None),
        scored(bad.clone(), Some(-1.0)),
    ];
    let without = vec![scored(good, Some(1.0)), scored(bad, Some(-1.0))];
    let (grads, stats) = surrogate_gradients(&model, &with_mask, SURROGATE, passes(2));
    let (reference, reference_stats) = surrogate_gradients(&model, &without, SURROGATE, passes(2));
    assert_eq!(stats.tokens, 6, "masked tokens are not counted");
    assert_eq!(stats, reference_stats);
    assert_eq!(
        weights(&stepped(&model, grads, 1.0)),
        weights(&stepped(&model, reference, 1.0))
    );
    // Had the spoiled rollout counted, the step would differ.
    let unmasked = vec![
        with_mask[0].clone(),
        scored(spoiled, Some(-1.0)),
        with_mask[2].clone(),
    ];
    let (leaked, _) = surrogate_gradients(&model, &unmasked, SURROGATE, passes(2));
    let (reference, _) = surrogate_gradients(&model, &without, SURROGATE, passes(2));
    assert_ne!(
        weights(&stepped(&model, leaked, 1.0)),
        weights(&stepped(&model, reference, 1.0))
    );
}

#[test]
fn the_advantage_sign_decides_which_way_a_sequence_moves() {
    let mut model = model();
    let good = on_policy(&model, &[1, 5, 9, 3, 4, 8], 3);
    let bad = on_policy(&model, &[1, 6, 2, 7, 7, 2], 3);
    let (good_before, bad_before) = (logprob(&model, &good), logprob(&model, &bad));
    for _ in 0..3 {
        let batch = [
            scored(good.clone(), Some(1.0)),
            scored(bad.clone(), Some(-1.0)),
        ];
        let (grads, _) = surrogate_gradients(&model, &batch, SURROGATE, passes(2));
        model = stepped(&model, grads, 0.05);
    }
    assert!(
        logprob(&model, &good) > good_before + 1e-3,
        "a positive advantage makes the sequence likelier"
    );
    assert!(
        logprob(&model, &bad) < bad_before - 1e-3,
        "a negative advantage makes it less likely"
    );
}

#[test]
fn the_clip_stops_pushing_a_ratio_past_the_trust_region() {
    let model = model();
    // Recorded log-probs far below the current ones: the ratio is far above
    // 1 + clip, so a positive advantage has nothing left to push.
    let mut far = on_policy(&model, &[1, 5, 9, 3, 4, 8], 3);
    for logprob in &mut far.spans[0].logprobs {
        *logprob -= 5.0;
    }
    let (grads, stats) = surrogate_gradients(
        &model,
        &[scored(far.clone(), Some(1.0))],
        SURROGATE,
        passes(2),
    );
    assert_eq!(stats.clipped, 1.0);
    assert_eq!(weights(&stepped(&model, grads, 1.0)), weights(&model));
    // A negative advantage is not clipped there: it pulls the ratio back,
    // and no token counts as clipped.
    let (grads, stats) =
        surrogate_gradients(&model, &[scored(far, Some(-1.0))], SURROGATE, passes(2));
    assert_eq!(stats.clipped, 0.0);
    assert_ne!(weights(&stepped(&model, grads, 1.0)), weights(&model));
}

#[test]
fn reference_logprobs_are_batched_for_unmasked_rollouts_alone() {
    let reference = model().valid();
    let rows = [
        sequence(&[1, 5, 9, 3, 4, 8], 3, 0.0),
        sequence(&[1, 6, 2], 1, 0.0),
        sequence(&[2, 2, 7, 7, 1, 3, 3, 9], 5, 0.0),
        sequence(&[4, 4, 4, 4], 2, 0.0),
    ];
    let mut batch: Vec<Scored> = rows
        .iter()
        .zip([Some(1.0), None, Some(-0.5), Some(0.25)])
        .map(|(row, advantage)| scored(row.clone(), advantage))
        .collect();
    // Micro-batches of two: ragged rows share a forward pass.
    reference_logprobs(&reference, &mut batch, 0.7, 2);
    for (scored, row) in batch.iter().zip(&rows) {
        let Some(values) = &scored.reference else {
            assert!(scored.advantage.is_none(), "an unmasked rollout lacks them");
            continue;
        };
        let alone: Vec<f32> = row.logprobs(&reference, 0.7).into_data().to_vec().unwrap();
        assert_eq!(values.len(), alone.len());
        for (batched, alone) in values.iter().zip(&alone) {
            assert!((batched - alone).abs() < 1e-5, "{values:?} vs {alone:?}");
        }
    }
}

#[test]
fn sft_lowers_the_loss_on_its_data() {
    let mut model = model();
    let data = [
        sequence(&[1, 5, 9, 3, 4, 8], 3, 0.0),
        sequence(&[1, 6, 2, 7, 7, 2], 2, 0.0),
    ];
    let (grads, first) = sft_gradients(&model, &data, passes(1));
    assert_eq!(first.tokens, 5);
    assert!(first.loss > 0.0);
    model = stepped(&model, grads, 0.5);
    let (_, second) = sft_gradients(&model, &data, passes(1));
    assert!(second.loss < first.loss, "{} → {}", first.loss, second.loss);
}

/// Recomputing each block's activations in the backward pass is a memory
/// trade alone: the gradients are those of the kept activations, for SFT
/// and for the surrogate with its KL term, whether the head is tied or not,
/// and for LoRA adapters (whose frozen weights take no gradient).
#[test]
fn recomputed_activations_give_the_kept_ones_gradients() {
    let untied = LlamaConfig {
        tied_embeddings: false,
        layers: 3,
        ..LlamaConfig::tiny(40)
    };
    let lora = Lora {
        rank: 2,
        alpha: 4.0,
        ..Lora::default()
    };
    let models = [
        model(),
        Llama::init(untied, 11, &Default::default()),
        model()
            .with_lora(&lora, &mut FreshAdapters::new(5))
            .unwrap(),
    ];
    // The long one's trained tokens take the output head several passes.
    let long: Vec<u32> = (0..700).map(|i| i * 7 % 39 + 1).collect();
    let rows = [
        sequence(&[1, 5, 9, 3, 4, 8], 3, -1.5),
        sequence(&long, 600, -3.0),
        sequence(&[1, 6, 2], 1, -2.0),
        sequence(&[2, 2, 7, 7, 1, 3, 3, 9], 5, -0.5),
    ];
    let batch: Vec<Scored> = rows
        .iter()
        .zip([Some(1.0), Some(-0.5), Some(0.25), Some(-1.0)])
        .map(|(row, advantage)| scored(row.clone(), advantage))
        .collect();
    let settings = Surrogate {
        kl: 0.1,
        ..SURROGATE
    };
    for model in &models {
        let mut batch = batch.clone();
        reference_logprobs(&model.valid(), &mut batch, 1.0, 2);
        let recomputed = Passes {
            micro_batch: 2,
            activations: Activations::Recomputed,
        };
        let kept = [
            sft_gradients(model, &rows, passes(2)),
            surrogate_gradients(model, &batch, settings, passes(2)),
        ];
        let again = [
            sft_gradients(model, &rows, recomputed),
            surrogate_gradients(model, &batch, settings, recomputed),
        ];
        let base = weights(model);
        for ((kept, kept_stats), (again, again_stats)) in kept.into_iter().zip(again) {
            assert!((kept_stats.loss - again_stats.loss).abs() < 1e-6);
            let (kept, again) = (step(model, kept), step(model, again));
            assert!(kept.iter().flat_map(|(_, step)| step).any(|&v| v != 0.0));
            for (((name, kept), (_, again)), (_, base)) in kept.iter().zip(&again).zip(&base) {
                let largest = kept.iter().fold(0f32, |max, value| max.max(value.abs()));
                let base = base.to_vec::<f32>().unwrap();
                for ((kept, again), weight) in kept.iter().zip(again).zip(base) {
                    // A step is read as a weight's change, to within the
                    // weight's last bits (GPU kernels round the two passes
                    // apart; the CPU's do not).
                    let resolution = 2.0 * f32::EPSILON * weight.abs();
                    assert!(
                        (kept - again).abs() <= 1e-4 * largest + resolution,
                        "{name}: {kept} vs {again}"
                    );
                }
            }
        }
    }
}

/// Four prompts in two environments, each rewarding the quarter of the
/// vocabulary whose ids are its own number modulo four: a bandit the tiny
/// model starts at chance on.
const BANDIT: [(&str, [u32; 3]); 4] = [
    ("a", [1, 5, 9]),
    ("a", [1, 6, 2]),
    ("b", [1, 7, 7]),
    ("b", [1, 3, 8]),
];

/// Rollouts of each prompt a step.
const ROLLOUTS: usize = 16;

fn bandit_reward(prompt: usize, token: u32) -> f64 {
    f64::from(token as usize % BANDIT.len() == prompt)
}

/// The probability, averaged over the bandit's prompts, that `model`
/// samples a rewarded token: its expected reward.
fn bandit_success(model: &Model) -> f64 {
    let model = model.valid();
    let total: f64 = BANDIT
        .iter()
        .enumerate()
        .map(|(prompt, (_, tokens))| {
            let logits = model.forward(tokens, &mut model.new_cache());
            let last = logits.narrow(0, tokens.len() - 1, 1);
            let probs: Vec<f32> = burn::tensor::activation::softmax(last, 1)
                .into_data()
                .to_vec()
                .unwrap();
            (0u32..)
                .zip(&probs)
                .map(|(token, p)| bandit_reward(prompt, token) * f64::from(*p))
                .sum::<f64>()
        })
        .sum();
    total / BANDIT.len() as f64
}

/// How RL on the bandit runs.
#[derive(Debug, Clone, Copy)]
struct Bandit {
    scaling: Scaling,
    /// Multiplies every advantage: -1 is a sign error.
    sign: f64,
    /// Rollouts of each prompt's [`ROLLOUTS`] whose simulated user spoils
    /// them: their reward says the opposite of what the policy did.
    spoiled: usize,
    /// Whether the judge catches the spoiled rollouts (MEU masking).
    masking: bool,
}

const BANDIT_RL: Bandit = Bandit {
    scaling: Scaling::Erpo,
    sign: 1.0,
    spoiled: 0,
    masking: true,
};

/// The tiny model after 20 steps of RL on the bandit, taken as `forge
/// train` takes them: [`ROLLOUTS`] rollouts a prompt sampled with their
/// log-probs, advantages, the clipped surrogate, AdamW.
fn learn_bandit(settings: Bandit) -> Model {
    let mut model = model();
    let mut optimizer = AdamWConfig::new().init::<TrainBackend, Model>();
    let prompts: Vec<(usize, &[u32])> = BANDIT
        .iter()
        .enumerate()
        .flat_map(|(prompt, (_, tokens))| [(prompt, &tokens[..]); ROLLOUTS])
        .collect();
    let rows: Vec<&[u32]> = prompts.iter().map(|(_, tokens)| *tokens).collect();
    for step in 0..20 {
        let samplings: Vec<Sampling> = (0..rows.len() as u64)
            .map(|row| Sampling {
                temperature: 1.0,
                top_p: 1.0,
                max_tokens: 1,
                seed: step * 1000 + row,
            })
            .collect();
        let generations = model
            .valid()
            .generate_batch(&rows, &samplings, Stop::tokens(&[]));
        let rollouts: Vec<Rollout> = prompts
            .iter()
            .zip(&generations)
            .enumerate()
            .map(|(row, ((prompt, _), generation))| {
                let spoiled = row % ROLLOUTS < settings.spoiled;
                let reward = bandit_reward(*prompt, generation.tokens[0]);
                Rollout {
                    environment: BANDIT[*prompt].0.into(),
                    task: prompt.to_string(),
                    reward: if spoiled { 1.0 - reward } else { reward },
                    masked: spoiled && settings.masking,
                }
            })
            .collect();
        let batch: Vec<Scored> = advantages(&rollouts, settings.scaling, 1e-6)
            .into_iter()
            .zip(prompts.iter().zip(&generations))
            .map(|(advantage, ((_, tokens), generation))| {
                let sequence = Sequence {
                    tokens: [tokens, &generation.tokens[..]].concat(),
                    spans: vec![Span {
                        start: tokens.len(),
                        logprobs: generation.logprobs.clone(),
                    }],
                };
                scored(sequence, advantage.map(|value| settings.sign * value))
            })
            .collect();
        let (grads, _) = surrogate_gradients(&model, &batch, SURROGATE, passes(16));
        model = optimizer.step(1e-2, model, grads);
    }
    model
}

/// The policy-gradient machinery, end to end, learns from rewards alone:
/// sampled log-probs, advantages, the surrogate and the optimizer together
/// take the bandit from chance to a rewarded token nearly every time,
/// whichever standard deviation scales the advantages, and with most
/// rollouts spoiled by the user as long as the judge masks them. A sign
/// error in the advantages, or spoiled rollouts left in, unlearn it.
#[test]
fn the_policy_learns_a_bandit_from_rewards_alone() {
    let chance = bandit_success(&model());
    assert!((0.1..0.4).contains(&chance), "{chance}");
    let learns = [
        BANDIT_RL,
        Bandit {
            scaling: Scaling::Grpo,
            ..BANDIT_RL
        },
        Bandit {
            scaling: Scaling::Batch,
            ..BANDIT_RL
        },
        Bandit {
            spoiled: 11,
            ..BANDIT_RL
        },
    ];
    let unlearns = [
        Bandit {
            sign: -1.0,
            ..BANDIT_RL
        },
        Bandit {
            spoiled: 11,
            masking: false,
            ..BANDIT_RL
        },
    ];
    for settings in learns {
        let learned = bandit_success(&learn_bandit(settings));
        assert!(learned >= 0.8, "{settings:?}: {chance} → {learned}");
    }
    for settings in unlearns {
        let unlearned = bandit_success(&learn_bandit(settings));
        assert!(unlearned < chance, "{settings:?}: {chance} → {unlearned}");
    }
}

#[test]
fn a_checkpoint_round_trips_exactly_in_hugging_face_layout() {
    let model = Llama::<Backend>::init(LlamaConfig::tiny(259), 3, &Default::default());
    let tokenizer = ModelTokenizer::byte_level();
    let dir = tempfile::tempdir().unwrap();
    forge_trainer::checkpoint::save(dir.path(), &model, &tokenizer).unwrap();
    let loaded = backend::load(dir.path()).unwrap();
    assert_eq!(loaded.config, model.config);
    assert_eq!(loaded.named_tensors(), model.named_tensors());
    let tokens = [1, 40, 41, 42];
    assert_eq!(
        loaded.forward(&tokens, &mut loaded.new_cache()).into_data(),
        model.forward(&tokens, &mut model.new_cache()).into_data()
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "llama");
    assert_eq!(config["hidden_size"], 64);
    assert_eq!(config["tie_word_embeddings"], true);
    let reloaded = forge_trainer::checkpoint::load_tokenizer(dir.path()).unwrap();
    assert_eq!(reloaded.encode("<|im_start|>hi").unwrap(), [1, 107, 108]);
    // A truncated weights file is refused with the file named.
    let weights = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = backend::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");
}

#[test]
fn a_batch_of_ragged_rows_gives_each_row_its_own_logits() {
    let model = Llama::<Backend>::init(LlamaConfig::tiny(40), 1, &Default::default());
    let (long, short) = ([1u32, 5, 9, 3, 4, 8], [1u32, 6, 2]);
    let batch = model.forward_batch(&[&long, &short]);
    assert_eq!(batch.dims(), [2, 6, 40]);
    for (row, tokens) in [(0, &long[..]), (1, &short[..])] {
        let alone: Vec<f32> = model
            .forward(tokens, &mut model.new_cache())
            .into_data()
            .to_vec()
            .unwrap();
        let batched: Vec<f32> = batch
            .clone()
            .narrow(0, row, 1)
            .narrow(1, 0, tokens.len())
            .into_data()
            .to_vec()
            .unwrap();
        for (a, b) in alone.iter().zip(&batched) {
            assert!((a - b).abs() < 1e-5, "row {row}: {a} vs {b}");
        }
    }
}
