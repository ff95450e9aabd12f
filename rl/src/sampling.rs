//! DAPO's dynamic sampling: a task whose valid rollouts all earn the same
//! reward (all succeed, or all fail) carries no learning signal (every
//! advantage is zero), so it is dropped and the batch refilled from the
//! queue.

use crate::advantage::Rollout;
use std::collections::BTreeMap;

/// The (environment, task) pairs worth training on: those whose valid
/// rollouts' rewards differ (with rewards of 0 and 1, both successes and
/// failures; with partial credit, any spread).
pub fn informative_tasks(rollouts: &[Rollout]) -> Vec<(String, String)> {
    let mut spreads: BTreeMap<(&str, &str), (f64, f64)> = BTreeMap::new();
    for rollout in rollouts.iter().filter(|rollout| !rollout.masked) {
        let (least, most) = spreads
            .entry((&rollout.environment, &rollout.task))
            .or_insert((rollout.reward, rollout.reward));
        *least = least.min(rollout.reward);
        *most = most.max(rollout.reward);
    }
    spreads
        .into_iter()
        .filter(|(_, (least, most))| least < most)
        .map(|((environment, task), _)| (environment.to_owned(), task.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_right_and_all_wrong_tasks_are_dropped() {
        let rollout = |task: &str, reward: f64, masked: bool| Rollout {
            environment: "e".into(),
            task: task.into(),
            reward,
            masked,
        };
        let rollouts = [
            rollout("mixed", 1.0, false),
            rollout("mixed", 0.0, false),
            rollout("right", 1.0, false),
            rollout("right", 1.0, false),
            rollout("wrong", 0.0, false),
            rollout("masked-mix", 1.0, false),
            rollout("masked-mix", 0.0, true),
            rollout("partial", 0.5, false),
            rollout("partial", 0.25, false),
            rollout("even", 0.5, false),
            rollout("even", 0.5, false),
        ];
        assert_eq!(
            informative_tasks(&rollouts),
            [
                ("e".to_owned(), "mixed".to_owned()),
                ("e".to_owned(), "partial".to_owned())
            ]
        );
    }
}
