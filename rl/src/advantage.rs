//! Advantages for a batch of rollouts.
//!
//! For rollout j of task i in environment e, ERPO uses
//! `A_ij = (R_ij − mean_j R_ij) / (std of R over all valid rollouts of all
//! tasks of e in the batch + eps)`. GRPO divides by the task's own std
//! instead; the batch variant by the std over every valid rollout. Masked
//! rollouts get no advantage and take no part in any mean or std.

use std::collections::BTreeMap;

/// One finished rollout, as the advantage computation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    pub environment: String,
    pub task: String,
    pub reward: f64,
    /// Spoiled by the simulated user (see [`crate::judge`]).
    pub masked: bool,
}

/// Which standard deviation scales the advantages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scaling {
    /// Pooled over all valid rollouts of the task's environment (ERPO).
    Erpo,
    /// The task's own rollouts (GRPO).
    Grpo,
    /// All valid rollouts of the batch.
    Batch,
}

/// The advantage of each rollout; `None` for masked ones.
pub fn advantages(rollouts: &[Rollout], scaling: Scaling, eps: f64) -> Vec<Option<f64>> {
    let valid = || rollouts.iter().filter(|rollout| !rollout.masked);
    let mut task_rewards: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    let mut env_rewards: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for rollout in valid() {
        task_rewards
            .entry((&rollout.environment, &rollout.task))
            .or_default()
            .push(rollout.reward);
        env_rewards
            .entry(&rollout.environment)
            .or_default()
            .push(rollout.reward);
    }
    let batch: Vec<f64> = valid().map(|rollout| rollout.reward).collect();
    let batch_std = std(&batch);
    rollouts
        .iter()
        .map(|rollout| {
            if rollout.masked {
                return None;
            }
            let group = &task_rewards[&(rollout.environment.as_str(), rollout.task.as_str())];
            let scale = match scaling {
                Scaling::Erpo => std(&env_rewards[rollout.environment.as_str()]),
                Scaling::Grpo => std(group),
                Scaling::Batch => batch_std,
            };
            Some((rollout.reward - mean(group)) / (scale + eps))
        })
        .collect()
}

/// The mean (0 for no values: not the -0 an empty float sum is, which
/// metrics would show as `-0.0`).
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// Population standard deviation (0 for no values).
pub fn std(values: &[f64]) -> f64 {
    let center = mean(values);
    let squares: Vec<f64> = values
        .iter()
        .map(|value| (value - center).powi(2))
        .collect();
    mean(&squares).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_values_have_a_mean_and_spread_of_plus_zero() {
        for value in [mean(&[]), std(&[])] {
            assert_eq!(value.to_bits(), 0.0f64.to_bits(), "{value}");
        }
    }

    fn rollout(environment: &str, task: &str, reward: f64, masked: bool) -> Rollout {
        Rollout {
            environment: environment.into(),
            task: task.into(),
            reward,
            masked,
        }
    }

    fn batch() -> Vec<Rollout> {
        vec![
            rollout("shop", "a", 1.0, false),
            rollout("shop", "a", 0.0, false),
            rollout("shop", "b", 1.0, false),
            rollout("shop", "b", 1.0, false),
            rollout("shop", "b", 0.0, true),
            rollout("bank", "c", 1.0, false),
            rollout("bank", "c", 0.0, false),
            rollout("bank", "c", 0.0, false),
            rollout("bank", "c", 0.0, false),
        ]
    }

    #[test]
    fn erpo_pools_the_std_over_the_environment() {
        let advantages = advantages(&batch(), Scaling::Erpo, 0.0);
        // shop's valid rewards 1, 0, 1, 1: mean 0.75, std sqrt(3)/4.
        let shop_std = 3f64.sqrt() / 4.0;
        assert!((advantages[0].unwrap() - 0.5 / shop_std).abs() < 1e-12);
        assert!((advantages[1].unwrap() + 0.5 / shop_std).abs() < 1e-12);
        // Task b's valid rollouts all succeed: no signal.
        assert_eq!(advantages[2], Some(0.0));
        // bank: rewards 1, 0, 0, 0: task mean 0.25, env std sqrt(3)/4.
        assert!((advantages[5].unwrap() - 0.75 / shop_std).abs() < 1e-12);
    }

    #[test]
    fn masked_rollouts_get_nothing_and_change_nothing() {
        let with_mask = advantages(&batch(), Scaling::Erpo, 1e-6);
        assert_eq!(with_mask[4], None);
        // Dropping the masked rollout altogether gives the same advantages.
        let without: Vec<Rollout> = batch()
            .into_iter()
            .filter(|rollout| !rollout.masked)
            .collect();
        let unmasked: Vec<Option<f64>> = with_mask
            .into_iter()
            .enumerate()
            .filter(|(index, _)| *index != 4)
            .map(|(_, advantage)| advantage)
            .collect();
        assert_eq!(unmasked, advantages(&without, Scaling::Erpo, 1e-6));
        // Had it counted (reward 0 in task b), task b's mean would drop below 1.
        let mut unmasked_batch = batch();
        unmasked_batch[4].masked = false;
        assert_ne!(
            advantages(&unmasked_batch, Scaling::Erpo, 1e-6)[2],
            Some(0.0)
        );
    }

    #[test]
    fn grpo_and_batch_scale_differently() {
        let grpo = advantages(&batch(), Scaling::Grpo, 0.0);
        // Task a: rewards 1, 0 → std 0.5 → advantages ±1.
        assert_eq!((grpo[0], grpo[1]), (Some(1.0), Some(-1.0)));
        let batch_scaled = advantages(&batch(), Scaling::Batch, 0.0);
        let rewards = [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0];
        let expected = 0.5 / std(&rewards);
        assert!((batch_scaled[0].unwrap() - expected).abs() < 1e-12);
    }
}
