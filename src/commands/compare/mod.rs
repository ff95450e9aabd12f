//! `forge compare`: training runs, or evaluations, side by side — the
//! settings that set them apart, then what they achieved — as an ablation
//! (ERPO against GRPO, masking on and off) or a before-and-after (the base
//! model against the trained one) is read.

mod evals;
mod paired;
mod runs;

use crate::commands::eval::{REPORT, SETTINGS};
use crate::output;
use crate::plot::{self, Panel};
use anyhow::{Result, bail};
use clap::Args;
use forge_runtime::text::shortened;
use forge_trainer::train::CONFIG_FILE;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// `forge train` run directories (finished, stopped or still under
    /// way), or `forge eval` results directories (`OUT/<hash>/<policy>`);
    /// the first is the baseline the others are measured against, task by
    /// task. A run whose `model.init` lies in another of the runs (an RL
    /// run started from an SFT run's `final/`) is read as its continuation.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Also draw the curves into this SVG file: the runs' held-out success
    /// and RL reward by step, or the evaluations' pass^k by k.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Bootstrap resamples of the tasks for the confidence interval of each
    /// one's difference in success rate from the first [default: 1000].
    #[arg(long, value_name = "N", value_parser = crate::flags::resamples)]
    bootstrap: Option<usize>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    if let Some(path) = &args.plot {
        plot::check_drawable(path)?;
    }
    let kinds = args
        .dirs
        .iter()
        .map(|dir| Kind::of(dir))
        .collect::<Result<Vec<_>>>()?;
    let mut seen = BTreeSet::new();
    if let Some(twice) = args
        .dirs
        .iter()
        .find(|dir| !seen.insert(dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())))
    {
        bail!(
            "{} is given twice: each directory is one column",
            twice.display()
        );
    }
    let labels = labels(&args.dirs);
    let bootstrap = args.bootstrap.unwrap_or(paired::BOOTSTRAP);
    let first = |wanted: Kind| kinds.iter().position(|kind| *kind == wanted);
    let comparison = match (first(Kind::Run), first(Kind::Evaluation)) {
        (Some(run), Some(evaluation)) => bail!(
            "{} is a training run and {} an evaluation: compare runs with runs, evaluations with \
             evaluations",
            args.dirs[run].display(),
            args.dirs[evaluation].display()
        ),
        (Some(_), None) => runs::compare(&args.dirs, &labels, bootstrap)?,
        _ => evals::compare(&args.dirs, &labels, bootstrap)?,
    };
    let differences = differing_settings(&comparison.settings);
    if let Some(path) = &args.plot {
        plot::svg(path, &comparison.panels)?;
    }
    if args.json {
        let mut object = comparison.json;
        object.insert("differences".into(), differences_json(&differences));
        object.insert("curves".into(), curves_json(&comparison.panels));
        output::json_line(&Value::Object(object));
    } else {
        print_differences(&labels, &differences);
        print!("{}", comparison.text);
        if let Some(path) = &args.plot {
            println!("curves in {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What one kind of directory makes of a comparison, for [`run`] to print
/// or write.
struct Comparison {
    /// Each directory's settings (a run's config, an evaluation's settings).
    settings: Vec<Value>,
    panels: Vec<Panel>,
    /// The kind's own members of the JSON output.
    json: serde_json::Map<String, Value>,
    /// The kind's own tables, printed after the differing settings.
    text: String,
}

/// What a directory given to `forge compare` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A `forge train` run directory: `config.toml`, `metrics.jsonl`.
    Run,
    /// A `forge eval` results directory: `settings.json`, `report.json`.
    Evaluation,
}

impl Kind {
    fn of(dir: &Path) -> Result<Self> {
        if !dir.exists() {
            bail!("{} does not exist", dir.display());
        }
        if !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        if dir.join(CONFIG_FILE).is_file() {
            return Ok(Self::Run);
        }
        if dir.join(REPORT).is_file() {
            return Ok(Self::Evaluation);
        }
        if dir.join(SETTINGS).is_file() {
            bail!(
                "{} is a `forge eval` results directory whose evaluation has not finished (it \
                 holds no {REPORT} yet): the same `forge eval` command resumes and finishes it",
                dir.display()
            );
        }
        bail!(
            "{} is neither a `forge train` run directory (it holds no {CONFIG_FILE}) nor a \
             `forge eval` results directory (no {}; those are `OUT/<environment hash>/<policy>`)",
            dir.display(),
            REPORT
        )
    }
}

/// Each directory's name in the tables: its own name, or where two share
/// one, what of their paths tells them apart ([`telling_apart`]); less the
/// start all the names share up to
/// a `_` or `/` (evaluations of `model:runs/a/final` and
/// `model:runs/b/final` are `a_final` and `b_final`).
fn labels(dirs: &[PathBuf]) -> Vec<String> {
    let name = |dir: &Path| {
        dir.file_name().map_or_else(
            || dir.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        )
    };
    let labels: Vec<String> = dirs
        .iter()
        .map(|dir| {
            let sharing: Vec<&Path> = dirs
                .iter()
                .filter(|other| name(other) == name(dir))
                .map(PathBuf::as_path)
                .collect();
            match sharing.len() {
                1 => name(dir),
                _ => telling_apart(dir, &sharing),
            }
        })
        .collect();
    if labels.len() < 2 {
        return labels;
    }
    let common = labels[1..]
        .iter()
        .fold(labels[0].as_str(), |common, label| {
            let same = common
                .char_indices()
                .zip(label.chars())
                .find(|((_, a), b)| a != b)
                .map_or(common.len().min(label.len()), |((at, _), _)| at);
            &common[..same]
        });
    let cut = common.rfind(['_', '/']).map_or(0, |at| at + 1);
    labels
        .iter()
        .map(|label| match &label[cut..] {
            "" => label.clone(),
            rest => rest.to_owned(),
        })
        .collect()
}

/// The path of `dir`, one of `sharing` (directories of one name), less the
/// leading components they all begin with and those they all have before
/// their name: what tells it apart, then its name (`c1/…/gold` of
/// `evals/c1/<hash>/gold` beside `evals/c2/<hash>/gold`).
fn telling_apart(dir: &Path, sharing: &[&Path]) -> String {
    let parts = |path: &Path| -> Vec<String> {
        // The root as nothing, so that a joined absolute path begins `/`.
        path.components()
            .map(|part| match part {
                std::path::Component::RootDir => String::new(),
                part => part.as_os_str().to_string_lossy().into_owned(),
            })
            .collect()
    };
    let all: Vec<Vec<String>> = sharing.iter().map(|path| parts(path)).collect();
    let own = parts(dir);
    // Each shares the name, its last part; the others may be fewer.
    let shortest = all.iter().map(Vec::len).min().unwrap_or(0);
    let common = |at: &dyn Fn(&[String]) -> &String| all.iter().all(|path| at(path) == at(&own));
    let leading = (0..shortest.saturating_sub(1))
        .take_while(|&i| common(&|path| &path[i]))
        .count();
    let trailing = (1..shortest.saturating_sub(leading))
        .take_while(|&i| common(&|path| &path[path.len() - 1 - i]))
        .count();
    let (name, telling) = own.split_last().expect("a directory's path has a name");
    // A content hash (`OUT/<hash>/<policy>`) as messages show one.
    let telling: Vec<&str> = telling
        .iter()
        .map(|part| match is_hash(part) {
            true => output::short_hash(part),
            false => part.as_str(),
        })
        .collect();
    let telling = &telling[leading.min(telling.len())..telling.len().saturating_sub(trailing)];
    match (telling.is_empty(), trailing) {
        (true, _) => name.clone(),
        (false, 0) => format!("{}/{name}", telling.join("/")),
        (false, _) => format!("{}/…/{name}", telling.join("/")),
    }
}

/// A setting and its value in each compared directory (`null` where one
/// lacks it).
type Differing = (String, Vec<Value>);

/// The settings whose values are not the same everywhere, in key order.
fn differing_settings(settings: &[Value]) -> Vec<Differing> {
    let Some(first) = settings.first() else {
        return Vec::new();
    };
    let keys: BTreeSet<String> = settings
        .iter()
        .flat_map(|other| forge_runtime::differences::differences(first, other))
        .map(|difference| difference.key)
        .collect();
    keys.into_iter()
        .map(|key| {
            let values = settings
                .iter()
                .map(|settings| setting(settings, &key).cloned().unwrap_or(Value::Null))
                .collect();
            (key, values)
        })
        .collect()
}

/// The value at a dotted key (`rl.scaling`) of a config.
fn setting<'a>(settings: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.')
        .try_fold(settings, |value, part| value.get(part))
}

/// Characters of a setting's value the table shows.
const SHOWN: usize = 80;

/// The differing settings as a table: a row per setting, a column per
/// directory.
fn print_differences(labels: &[String], differences: &[Differing]) {
    if differences.is_empty() {
        return;
    }
    let mut header = vec!["setting"];
    header.extend(labels.iter().map(String::as_str));
    let mut table = output::table(&header);
    for (key, values) in differences {
        let whole: Vec<String> = values
            .iter()
            .map(|value| match value {
                // Content hashes, as messages show them.
                Value::String(text) if is_hash(text) => output::short_hash(text).to_owned(),
                Value::String(text) => text.clone(),
                Value::Null => "-".to_owned(),
                value => value.to_string(),
            })
            .collect();
        // A long value (a system prompt) is told apart by its start, on one
        // line, where the starts differ as the values do; `--json` gives
        // them whole.
        let short: Vec<String> = whole
            .iter()
            .map(|text| {
                shortened(
                    &text.split_whitespace().collect::<Vec<_>>().join(" "),
                    SHOWN,
                )
            })
            .collect();
        let distinct = |cells: &[String]| cells.iter().collect::<BTreeSet<_>>().len();
        let mut row = vec![key.clone()];
        row.extend(match distinct(&short) == distinct(&whole) {
            true => short,
            false => whole,
        });
        table.add_row(row);
    }
    println!("{table}");
}

/// Whether `text` is a sha256 in hex.
fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// The differing settings as the JSON output gives them.
fn differences_json(differences: &[Differing]) -> Value {
    differences
        .iter()
        .map(|(key, values)| serde_json::json!({ "key": key, "values": values }))
        .collect()
}

/// The plot's points, by panel and curve: the numbers behind the SVG.
fn curves_json(panels: &[Panel]) -> Value {
    panels
        .iter()
        .map(|panel| {
            let by_curve = panel
                .curves
                .iter()
                .map(|curve| (curve.name.clone(), serde_json::json!(curve.points)))
                .collect();
            (panel.title.to_owned(), Value::Object(by_curve))
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_settings_that_differ_are_listed_with_each_value() {
        let settings = [
            json!({"seed": 0, "rl": {"scaling": "erpo", "kl": 0.1}}),
            json!({"seed": 0, "rl": {"scaling": "grpo", "kl": 0.1}}),
            json!({"seed": 0, "rl": {"scaling": "erpo", "kl": 0.1, "masking": false}}),
        ];
        assert_eq!(
            differing_settings(&settings),
            vec![
                (
                    "rl.masking".to_owned(),
                    vec![Value::Null, Value::Null, json!(false)]
                ),
                (
                    "rl.scaling".to_owned(),
                    vec![json!("erpo"), json!("grpo"), json!("erpo")]
                ),
            ]
        );
    }

    #[test]
    fn directories_are_named_by_their_name_unless_two_share_it() {
        let dirs = [
            PathBuf::from("a/erpo"),
            PathBuf::from("b/erpo/"),
            PathBuf::from("a/grpo"),
        ];
        assert_eq!(labels(&dirs), ["a/erpo", "b/erpo", "grpo"]);
        let dirs = [PathBuf::from("erpo"), PathBuf::from("erpo-unstable")];
        assert_eq!(labels(&dirs), ["erpo", "erpo-unstable"]);
        // What all the names start with, up to a separator, is left out.
        let dirs = [
            PathBuf::from("evals/1/model_runs_sm_checkpoints_step-000100"),
            PathBuf::from("evals/2/model_runs_sm_checkpoints_step-000300"),
            PathBuf::from("evals/3/model_runs_sm_final"),
        ];
        assert_eq!(
            labels(&dirs),
            [
                "checkpoints_step-000100",
                "checkpoints_step-000300",
                "final"
            ]
        );
        // And so is what the paths of names shared start with.
        let dirs = [PathBuf::from("out/a/gold"), PathBuf::from("out/b/gold")];
        assert_eq!(labels(&dirs), ["a/gold", "b/gold"]);
        // Evaluations of one policy under two `--out`s: what sets them
        // apart, not the environment's hash they share.
        let hash = "80125efafd41c5bde29bd5ffb37a8cd6c5ae0c1ba0627d92dec7a5d36d3e2307";
        let dirs = [
            PathBuf::from(format!("evals/base/{hash}/gold")),
            PathBuf::from(format!("evals/c1/{hash}/model_final")),
            PathBuf::from(format!("evals/c2/{hash}/model_final")),
        ];
        assert_eq!(
            labels(&dirs),
            ["gold", "c1/…/model_final", "c2/…/model_final"]
        );
    }
}
