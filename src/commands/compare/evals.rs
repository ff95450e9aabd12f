//! Evaluations side by side: each one's pass^k, then each against the first
//! (the baseline) task by task — the difference in success rate over the
//! tasks both ran with a paired bootstrap interval, the tasks that got
//! better and worse, and a sign test — which says whether a trained model
//! beat its base by more than the luck of the draw.

use super::Comparison;
use crate::commands::eval::{PassK, REPORT, SETTINGS};
use crate::metrics::{percentile_interval, sign_test};
use crate::output;
use crate::plot::{self, Curve, Panel};
use anyhow::{Context, Result, bail};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Resamples for the interval of a difference, unless `--bootstrap` says.
pub(super) const BOOTSTRAP: usize = 1000;

/// Tasks named in the text output's lists of better and worse ones.
const TASKS_LISTED: usize = 10;

pub(super) fn compare(dirs: &[PathBuf], labels: &[String], bootstrap: usize) -> Result<Comparison> {
    let evaluations = dirs
        .iter()
        .map(|dir| Evaluation::read(dir))
        .collect::<Result<Vec<_>>>()?;
    let rows: Vec<Row> = evaluations
        .iter()
        .zip(labels)
        .map(|(evaluation, label)| Row::new(label, evaluation))
        .collect();
    let (baseline, others) = evaluations
        .split_first()
        .expect("clap requires a directory");
    let against = others
        .iter()
        .zip(&labels[1..])
        .map(|(evaluation, label)| Against::new(label, &labels[0], baseline, evaluation, bootstrap))
        .collect::<Result<Vec<_>>>()?;
    let mut json = serde_json::Map::new();
    json.insert("evaluations".into(), serde_json::to_value(&rows)?);
    json.insert("against_baseline".into(), serde_json::to_value(&against)?);
    Ok(Comparison {
        settings: evaluations
            .iter()
            .map(|evaluation| evaluation.settings.clone())
            .collect(),
        panels: panels(&evaluations, labels),
        json,
        text: tables(&rows, &against),
    })
}

/// What a `forge eval` results directory records.
struct Evaluation {
    dir: PathBuf,
    /// `settings.json`: how its episodes were played.
    settings: Value,
    report: Report,
}

/// The parts of `report.json` a comparison reads.
#[derive(Deserialize)]
struct Report {
    environment: String,
    content_hash: String,
    policy: String,
    #[serde(default)]
    user: String,
    tasks: usize,
    trials: u64,
    pass_hat_k: Vec<PassK>,
    mean_flip_rate: f64,
    /// Each task's trials, in order (absent from reports of older forges).
    #[serde(default)]
    outcomes: Option<BTreeMap<String, Vec<bool>>>,
}

impl Evaluation {
    fn read(dir: &Path) -> Result<Self> {
        let json = |name: &str| -> Result<Value> {
            let path = dir.join(name);
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not an evaluation's {name}", path.display()))
        };
        let report = serde_json::from_value(json(REPORT)?).with_context(|| {
            format!(
                "{}: not an evaluation's {REPORT}",
                dir.join(REPORT).display()
            )
        })?;
        Ok(Self {
            dir: dir.to_owned(),
            settings: json(SETTINGS)?,
            report,
        })
    }

    /// Each task's success rate over its trials.
    fn success_rates(&self) -> Result<BTreeMap<&str, f64>> {
        let Some(outcomes) = &self.report.outcomes else {
            bail!(
                "{} was written by an older forge, without each task's outcomes: run its \
                 `forge eval` again (it finds every episode done, runs none, and rewrites the report)",
                self.dir.join(REPORT).display()
            );
        };
        Ok(outcomes
            .iter()
            .map(|(task, trials)| {
                let successes = trials.iter().filter(|success| **success).count();
                (task.as_str(), successes as f64 / trials.len().max(1) as f64)
            })
            .collect())
    }
}

/// An evaluation's row of the first table.
#[derive(Debug, Serialize)]
struct Row<'a> {
    evaluation: String,
    dir: &'a Path,
    environment: &'a str,
    content_hash: &'a str,
    policy: &'a str,
    user: &'a str,
    tasks: usize,
    trials: u64,
    pass_hat_k: &'a [PassK],
    mean_flip_rate: f64,
}

impl<'a> Row<'a> {
    fn new(label: &str, evaluation: &'a Evaluation) -> Self {
        let report = &evaluation.report;
        Self {
            evaluation: label.to_owned(),
            dir: &evaluation.dir,
            environment: &report.environment,
            content_hash: &report.content_hash,
            policy: &report.policy,
            user: &report.user,
            tasks: report.tasks,
            trials: report.trials,
            pass_hat_k: &report.pass_hat_k,
            mean_flip_rate: report.mean_flip_rate,
        }
    }
}

/// An evaluation against the baseline.
#[derive(Debug, Serialize)]
struct Against {
    evaluation: String,
    baseline: String,
    /// Absent where the two evaluated different environments: their tasks
    /// are not the same tasks.
    #[serde(flatten)]
    paired: Option<Paired>,
}

/// An evaluation against the baseline over the tasks both ran.
#[derive(Debug, Serialize)]
struct Paired {
    shared_tasks: usize,
    /// Mean over the shared tasks of (success rate here − the baseline's),
    /// with its paired bootstrap interval.
    success_difference: f64,
    ci_low: f64,
    ci_high: f64,
    /// Tasks solved more often here, and less often.
    better: Vec<String>,
    worse: Vec<String>,
    same: usize,
    /// The sign test of better against worse.
    sign_test_p: f64,
}

impl Against {
    fn new(
        label: &str,
        baseline_label: &str,
        baseline: &Evaluation,
        evaluation: &Evaluation,
        bootstrap: usize,
    ) -> Result<Self> {
        let same_environment = evaluation.report.content_hash == baseline.report.content_hash;
        Ok(Self {
            evaluation: label.to_owned(),
            baseline: baseline_label.to_owned(),
            paired: match same_environment {
                true => Some(Paired::new(baseline, evaluation, bootstrap)?),
                false => None,
            },
        })
    }
}

impl Paired {
    fn new(baseline: &Evaluation, evaluation: &Evaluation, bootstrap: usize) -> Result<Self> {
        let base = baseline.success_rates()?;
        let paired: Vec<(&str, f64)> = evaluation
            .success_rates()?
            .into_iter()
            .filter_map(|(task, rate)| base.get(task).map(|base| (task, rate - base)))
            .collect();
        let differences: Vec<f64> = paired.iter().map(|(_, difference)| *difference).collect();
        let mean = differences.iter().sum::<f64>() / differences.len().max(1) as f64;
        // Tasks resampled with their pairs, from a fixed seed: the same
        // evaluations give the same interval.
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let draws = (0..bootstrap)
            .filter(|_| !differences.is_empty())
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
                .map(|(task, _)| (*task).to_owned())
                .collect()
        };
        let better = named(|difference| difference > 0.0);
        let worse = named(|difference| difference < 0.0);
        Ok(Self {
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

/// A row per evaluation, then each against the baseline with the tasks
/// that changed.
fn tables(rows: &[Row], against: &[Against]) -> String {
    let mut text = String::new();
    let mut table = output::table(&[
        "evaluation",
        "environment",
        "user",
        "tasks × trials",
        "pass^1 [95% CI]",
        "pass^k [95% CI]",
        "flip rate",
    ]);
    let pass = |pass: Option<&PassK>| {
        pass.map_or_else(
            || "-".to_owned(),
            |pass| {
                format!(
                    "{:.3} [{:.3}, {:.3}]",
                    pass.value, pass.ci_low, pass.ci_high
                )
            },
        )
    };
    for row in rows {
        let last = row.pass_hat_k.last().filter(|pass| pass.k > 1);
        table.add_row(vec![
            row.evaluation.clone(),
            format!(
                "{} ({})",
                row.environment,
                output::short_hash(row.content_hash)
            ),
            row.user.to_owned(),
            format!("{} × {}", row.tasks, row.trials),
            pass(row.pass_hat_k.first()),
            last.map_or_else(
                || "-".to_owned(),
                |last| format!("k={}: {}", last.k, pass(Some(last))),
            ),
            format!("{:.3}", row.mean_flip_rate),
        ]);
    }
    let _ = writeln!(text, "{table}");
    let Some(first) = against.first() else {
        return text;
    };
    let _ = writeln!(text, "Against the baseline, {}:", first.baseline);
    let mut table = output::table(&[
        "evaluation",
        "shared tasks",
        "success rate − baseline's [95% CI]",
        "better",
        "worse",
        "same",
        "sign test p",
    ]);
    for row in against {
        let Some(paired) = &row.paired else {
            table.add_row(vec![
                row.evaluation.clone(),
                "another environment".to_owned(),
            ]);
            continue;
        };
        table.add_row(vec![
            row.evaluation.clone(),
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
        let Some(paired) = &row.paired else {
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
                row.evaluation, row.baseline
            );
        }
    }
    text
}

/// A p-value to three places, or to two significant digits below 0.001.
fn probability(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// pass^k by k, a curve per evaluation.
fn panels(evaluations: &[Evaluation], labels: &[String]) -> Vec<Panel> {
    let curves = evaluations
        .iter()
        .zip(labels)
        .enumerate()
        .map(|(at, (evaluation, label))| Curve {
            name: label.clone(),
            points: evaluation
                .report
                .pass_hat_k
                .iter()
                .map(|pass| (pass.k as f64, pass.value))
                .collect(),
            color: plot::color(at),
        })
        .collect();
    vec![Panel {
        title: "pass^k",
        x_label: "k",
        curves,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evaluation(hash: &str, outcomes: &[(&str, &[bool])]) -> Evaluation {
        Evaluation {
            dir: PathBuf::from("evals/x"),
            settings: Value::Null,
            report: Report {
                environment: "shop".into(),
                content_hash: hash.into(),
                policy: "gold".into(),
                user: "scripted".into(),
                tasks: outcomes.len(),
                trials: 2,
                pass_hat_k: Vec::new(),
                mean_flip_rate: 0.0,
                outcomes: Some(
                    outcomes
                        .iter()
                        .map(|(task, trials)| ((*task).to_owned(), trials.to_vec()))
                        .collect(),
                ),
            },
        }
    }

    #[test]
    fn an_evaluation_is_measured_against_the_baseline_task_by_task() {
        let baseline = evaluation(
            "h",
            &[
                ("a", &[false, false]),
                ("b", &[true, false]),
                ("c", &[true, true]),
                ("gone", &[true, true]),
            ],
        );
        let trained = evaluation(
            "h",
            &[
                ("a", &[true, true]),
                ("b", &[true, true]),
                ("c", &[true, false]),
                ("new", &[false, false]),
            ],
        );
        let paired = Paired::new(&baseline, &trained, 200).unwrap();
        // Over a, b, c: +1, +0.5, −0.5.
        assert_eq!(paired.shared_tasks, 3);
        assert!((paired.success_difference - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(paired.better, ["a", "b"]);
        assert_eq!(paired.worse, ["c"]);
        assert_eq!(paired.same, 0);
        assert_eq!(paired.sign_test_p, 1.0);
        let (low, high) = (paired.ci_low, paired.ci_high);
        assert!((-0.5..=1.0).contains(&low) && low <= high && high <= 1.0);
        // The same evaluations give the same interval.
        let again = Paired::new(&baseline, &trained, 200).unwrap();
        assert_eq!((again.ci_low, again.ci_high), (low, high));
    }

    #[test]
    fn evaluations_of_other_environments_are_not_paired() {
        let baseline = evaluation("h", &[("a", &[true])]);
        let other = evaluation("other", &[("a", &[false])]);
        let against = Against::new("other", "base", &baseline, &other, 10).unwrap();
        assert!(against.paired.is_none());
        let json = serde_json::to_value(&against).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"evaluation": "other", "baseline": "base"})
        );
    }

    #[test]
    fn a_report_without_outcomes_is_named_with_the_way_to_refresh_it() {
        let baseline = evaluation("h", &[("a", &[true])]);
        let mut old = evaluation("h", &[("a", &[true])]);
        old.report.outcomes = None;
        let err = Paired::new(&baseline, &old, 10).unwrap_err();
        assert!(
            err.to_string().contains("run its `forge eval` again"),
            "{err}"
        );
    }
}
