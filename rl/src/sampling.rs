//! DAPO's dynamic sampling: a task whose valid rollouts all succeed or all
//! fail carries no learning signal (every advantage is zero), so it is
//! dropped and the batch refilled from the queue.

use crate::advantage::Rollout;
use std::collections::BTreeMap;

/// The (environment, task) pairs worth training on: those whose valid
/// rollouts have both successes and failures.
pub fn informative_tasks(rollouts: &[Rollout]) -> Vec<(String, String)> {
    let mut outcomes: BTreeMap<(&str, &str), (bool, bool)> = BTreeMap::new();
    for rollout in rollouts.iter().filter(|rollout| !rollout.masked) {
        let entry = outcomes
            .entry((&rollout.environment, &rollout.task))
            .or_default();
        if rollout.reward >= 1.0 {
            entry.0 = true;
        } else {
            entry.1 = true;
        }
    }
    outcomes
        .into_iter()
        .filter(|(_, (succeeded, failed))| *succeeded && *failed)
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
        ];
        assert_eq!(
            informative_tasks(&rollouts),
            [("e".to_owned(), "mixed".to_owned())]
        );
    }
}
