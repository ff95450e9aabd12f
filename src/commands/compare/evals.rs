//! Evaluations side by side: each one's pass^k and flip rate, then each
//! against the first (the baseline) task by task, as [`super::paired`]
//! measures it.

use super::Comparison;
use super::paired::{Against, Pairing, Wording, write_against};
use crate::commands::eval::{PassK, REPORT, SETTINGS};
use crate::output;
use crate::plot::{self, Curve, Panel};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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
        .map(|(evaluation, label)| {
            // Other environments' tasks are not the same tasks.
            let pairing = match evaluation.report.content_hash == baseline.report.content_hash {
                true => Pairing::new(
                    &baseline.success_rates()?,
                    &evaluation.success_rates()?,
                    bootstrap,
                ),
                false => Pairing::unpaired("another environment"),
            };
            Ok(Against {
                name: label.clone(),
                baseline: labels[0].clone(),
                pairing,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut json = serde_json::Map::new();
    json.insert("evaluations".into(), serde_json::to_value(&rows)?);
    json.insert("against_first".into(), serde_json::to_value(&against)?);
    Ok(Comparison {
        settings: evaluations.iter().map(Evaluation::compared).collect(),
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
    /// The seed the episodes' seeds derive from (not among the settings:
    /// one directory keeps the episodes of several, for their resumes).
    seed: Option<u64>,
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

    /// What sets the evaluation apart: how its episodes were played, and
    /// under which seed.
    fn compared(&self) -> Value {
        let mut settings = self.settings.clone();
        if let (Value::Object(fields), Some(seed)) = (&mut settings, self.report.seed) {
            fields.insert("seed".into(), seed.into());
        }
        settings
    }

    /// Each task's success rate over its trials.
    fn success_rates(&self) -> Result<BTreeMap<String, f64>> {
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
                (task.clone(), successes as f64 / trials.len().max(1) as f64)
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
    let wording = Wording {
        what: "evaluation",
        on: ", the baseline",
    };
    write_against(&mut text, against, &wording);
    text
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
                seed: Some(0),
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
    fn a_report_without_outcomes_is_named_with_the_way_to_refresh_it() {
        let mut old = evaluation("h", &[("a", &[true])]);
        old.report.outcomes = None;
        let err = old.success_rates().unwrap_err();
        assert!(
            err.to_string().contains("run its `forge eval` again"),
            "{err}"
        );
    }
}
