//! One thing measured against another task by task, over the tasks both
//! played: the mean difference in success rate with a paired bootstrap
//! interval, the tasks that got better and worse, and a sign test — which
//! says whether a trained model beat its base by more than the luck of the
//! draw.

use crate::metrics::{percentile_interval, sign_test};
use crate::output;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};

/// Resamples for the interval of a difference, unless `--bootstrap` says.
pub(super) const BOOTSTRAP: usize = 1000;

/// Tasks named in the text output's lists of better and worse ones.
const TASKS_LISTED: usize = 10;

/// One of the compared (an evaluation, a run) against the first.
#[derive(Debug, Serialize)]
pub(super) struct Against {
    pub name: String,
    pub baseline: String,
    #[serde(flatten)]
    pub pairing: Pairing,
}

/// The task-by-task comparison, or why there is none.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Pairing {
    Paired(Paired),
    /// Nothing to pair: evaluations of another environment, a run not
    /// evaluated at its last step, no task played by both.
    Unpaired {
        unpaired: String,
    },
}

impl Pairing {
    /// `rates` against `baseline`, each a success rate by task, when they
    /// share a task.
    pub fn new<Task: Ord + Display>(
        baseline: &BTreeMap<Task, f64>,
        rates: &BTreeMap<Task, f64>,
        bootstrap: usize,
    ) -> Self {
        Paired::new(baseline, rates, bootstrap)
            .map_or_else(|| Self::unpaired("no task in common"), Self::Paired)
    }

    pub fn unpaired(why: &str) -> Self {
        Self::Unpaired {
            unpaired: why.to_owned(),
        }
    }
}

/// The task-by-task comparison.
#[derive(Debug, Serialize)]
pub(super) struct Paired {
    pub shared_tasks: usize,
    /// Mean over the shared tasks of (success rate here − the baseline's),
    /// with its paired bootstrap interval.
    pub success_difference: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Tasks solved more often here, and less often.
    pub better: Vec<String>,
    pub worse: Vec<String>,
    pub same: usize,
    /// The sign test of better against worse.
    pub sign_test_p: f64,
}

impl Paired {
    /// `rates` against `baseline`, each a success rate by task; none when
    /// they share no task.
    fn new<Task: Ord + Display>(
        baseline: &BTreeMap<Task, f64>,
        rates: &BTreeMap<Task, f64>,
        bootstrap: usize,
    ) -> Option<Self> {
        let paired: Vec<(&Task, f64)> = rates
            .iter()
            .filter_map(|(task, rate)| baseline.get(task).map(|base| (task, rate - base)))
            .collect();
        if paired.is_empty() {
            return None;
        }
        let differences: Vec<f64> = paired.iter().map(|(_, difference)| *difference).collect();
        let mean = differences.iter().sum::<f64>() / differences.len() as f64;
        // Tasks resampled with their pairs, from a fixed seed: the same
        // inputs give the same interval.
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let draws = (0..bootstrap)
            .map(|_| {
                let total: f64 = (0..differences.len())
                    .map(|_| differences[rng.random_range(0..differences.len())])
                    .sum();
                total / differences.len() as f64
            })
            .collect();
        let (ci_low, ci_high) = percentile_interval(draws, mean);
        let named = |keep: fn(f64) -> bool| -> Vec<String> {
            paired
                .iter()
                .filter(|(_, difference)| keep(*difference))
                .map(|(task, _)| task.to_string())
                .collect()
        };
        let better = named(|difference| difference > 0.0);
        let worse = named(|difference| difference < 0.0);
        Some(Self {
            shared_tasks: paired.len(),
            success_difference: mean,
            ci_low,
            ci_high,
            same: paired.len() - better.len() - worse.len(),
            sign_test_p: sign_test(better.len() as u64, worse.len() as u64),
            better,
            worse,
        })
    }
}

/// How [`write_against`] words its table.
pub(super) struct Wording<'a> {
    /// What the compared are (the names' column).
    pub what: &'a str,
    /// Which tasks' outcomes are compared, after "Against BASELINE".
    pub on: &'a str,
}

/// The comparisons with the baseline as a table, then the tasks that
/// changed.
pub(super) fn write_against(text: &mut String, against: &[Against], wording: &Wording) {
    let Some(first) = against.first() else {
        return;
    };
    let _ = writeln!(text, "Against {}{}:", first.baseline, wording.on);
    let mut table = output::table(&[
        wording.what,
        "shared tasks",
        "success rate − baseline's [95% CI]",
        "better",
        "worse",
        "same",
        "sign test p",
    ]);
    for row in against {
        let paired = match &row.pairing {
            Pairing::Paired(paired) => paired,
            Pairing::Unpaired { unpaired } => {
                table.add_row(vec![row.name.clone(), unpaired.clone()]);
                continue;
            }
        };
        table.add_row(vec![
            row.name.clone(),
            paired.shared_tasks.to_string(),
            format!(
                "{:+.3} [{:+.3}, {:+.3}]",
                paired.success_difference, paired.ci_low, paired.ci_high
            ),
            paired.better.len().to_string(),
            paired.worse.len().to_string(),
            paired.same.to_string(),
            probability(paired.sign_test_p),
        ]);
    }
    let _ = writeln!(text, "{table}");
    for row in against {
        let Pairing::Paired(paired) = &row.pairing else {
            continue;
        };
        for (how, tasks) in [("better", &paired.better), ("worse", &paired.worse)] {
            if tasks.is_empty() {
                continue;
            }
            let mut listed = tasks[..tasks.len().min(TASKS_LISTED)].join(", ");
            if tasks.len() > TASKS_LISTED {
                listed.push_str(&format!(" and {} more", tasks.len() - TASKS_LISTED));
            }
            let _ = writeln!(
                text,
                "{} does {how} than {} on: {listed}",
                row.name, row.baseline
            );
        }
    }
}

/// A p-value to three places, or to two significant digits below 0.001.
fn probability(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(of: &[(&str, f64)]) -> BTreeMap<String, f64> {
        of.iter()
            .map(|(task, rate)| ((*task).to_owned(), *rate))
            .collect()
    }

    #[test]
    fn rates_are_measured_against_the_baseline_task_by_task() {
        let baseline = rates(&[("a", 0.0), ("b", 0.5), ("c", 1.0), ("gone", 1.0)]);
        let trained = rates(&[("a", 1.0), ("b", 1.0), ("c", 0.5), ("new", 0.0)]);
        let Pairing::Paired(paired) = Pairing::new(&baseline, &trained, 200) else {
            panic!("a, b and c are shared");
        };
        // Over a, b, c: +1, +0.5, −0.5.
        assert_eq!(paired.shared_tasks, 3);
        assert!((paired.success_difference - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(paired.better, ["a", "b"]);
        assert_eq!(paired.worse, ["c"]);
        assert_eq!(paired.same, 0);
        assert_eq!(paired.sign_test_p, 1.0);
        let (low, high) = (paired.ci_low, paired.ci_high);
        assert!((-0.5..=1.0).contains(&low) && low <= high && high <= 1.0);
        // The same inputs give the same interval.
        let again = Paired::new(&baseline, &trained, 200).unwrap();
        assert_eq!((again.ci_low, again.ci_high), (low, high));
    }

    #[test]
    fn nothing_to_pair_is_written_as_such_with_its_reason() {
        let against = Against {
            name: "other".into(),
            baseline: "base".into(),
            pairing: Pairing::unpaired("another environment"),
        };
        let json = serde_json::to_value(&against).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "other", "baseline": "base", "unpaired": "another environment"})
        );
        let mut text = String::new();
        let wording = Wording {
            what: "evaluation",
            on: "",
        };
        write_against(&mut text, &[against], &wording);
        assert!(text.contains("another environment"), "{text}");
    }
}
