//! The flags `run` and `eval` share: which of an environment's tasks they
//! play (`--tasks`), under which seed and for how many turns.

use crate::agents::{AgentArgs, PolicyKind};
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_runtime::{Environment, PreparedTask, episode_seed};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::str::FromStr;

#[derive(Args, Debug)]
pub struct PlayArgs {
    /// `all`, `first:N` (or a bare N where tasks are not numbered): the
    /// first N tasks, `split:NAME`: the tasks of one of the environment's
    /// named splits (τ²-bench's leaderboard `base`, a `test` split),
    /// `heldout:RUN_DIR`: the tasks a `forge train` run on this environment
    /// holds out (never trains on), or task ids separated by commas.
    #[arg(
        long,
        default_value = "all",
        value_name = "all|N|first:N|split:NAME|heldout:RUN_DIR|ID,ID"
    )]
    pub tasks: TaskSelection,
    /// Seed of the run; each episode's seed derives from it, the task and
    /// the trial.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub seed: u64,
    /// Most agent actions per episode (0: the agent never acts, the
    /// do-nothing baseline, which solves only tasks whose right outcome
    /// changes nothing, as some of τ-bench's refusals do) [default: 30; with `--policy
    /// replay`, the recorded episodes' own; with `--tasks heldout:RUN_DIR`,
    /// the run's `tasks.max_turns`].
    #[arg(long, value_name = "N")]
    pub max_turns: Option<usize>,
}

impl PlayArgs {
    /// With `--tasks heldout:RUN_DIR`, the limits `--max-turns` and
    /// `--max-new-tokens` leave unset are those the run evaluates its
    /// held-out tasks under (`tasks.max_turns`, `eval.max_new_tokens`): its
    /// model is scored as the run scored it, not under limits it never
    /// trained for. A replay keeps its recorded limit.
    pub fn as_run_evaluates(&mut self, agents: &mut AgentArgs) -> Result<()> {
        let TaskSelection::HeldOut(run) = &self.tasks else {
            return Ok(());
        };
        let config = crate::commands::train::saved_config(run)
            .context("`heldout:` names a `forge train` run directory")?;
        let mut taken = Vec::new();
        if self.max_turns.is_none() && agents.policy != PolicyKind::Replay {
            self.max_turns = Some(config.tasks.max_turns);
            taken.push(format!("--max-turns {}", config.tasks.max_turns));
        }
        if agents.max_new_tokens.is_none() && agents.policy == PolicyKind::Model {
            agents.max_new_tokens = Some(config.eval.max_new_tokens);
            taken.push(format!("--max-new-tokens {}", config.eval.max_new_tokens));
        }
        if !taken.is_empty() {
            eprintln!(
                "note: as the run in {} evaluates its held-out tasks: {}",
                run.display(),
                taken.join(", ")
            );
        }
        Ok(())
    }

    /// Each of `tasks`' `trials` episodes with its seed, by task, then trial.
    pub fn episodes<'a>(
        &self,
        tasks: &[&'a PreparedTask],
        trials: u64,
    ) -> Vec<(&'a PreparedTask, u64)> {
        tasks
            .iter()
            .flat_map(|task| (0..trials).map(move |trial| (*task, self.seed_of(task, trial))))
            .collect()
    }

    /// The seed of `task`'s episode `trial`.
    fn seed_of(&self, task: &PreparedTask, trial: u64) -> u64 {
        episode_seed(self.seed, &task.task.id, trial)
    }
}

/// The value of `--tasks`: `all`; `first:N` or a bare `N`, the first N
/// tasks in the bundle's order; `split:NAME`, the tasks of one of the
/// bundle's named splits (a benchmark's `test`), in the bundle's order; or
/// task ids separated by commas. Where
/// tasks are numbered (τ²-bench's), a bare number is a task's id, so
/// `--tasks 5` is task `5` there (and `--tasks 99` a task that is not
/// there) and five tasks elsewhere; `first:5` is five tasks everywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskSelection {
    All,
    First(usize),
    Split(String),
    /// `heldout:RUN_DIR`: the tasks a training run holds out.
    HeldOut(PathBuf),
    Ids(Vec<String>),
}

impl FromStr for TaskSelection {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "all" {
            return Ok(Self::All);
        }
        if let Some(count) = text.strip_prefix("first:") {
            return match count.parse() {
                Ok(count) if count >= 1 => Ok(Self::First(count)),
                Err(_) if crate::flags::too_large(count) => Err(format!(
                    "`first:` takes a whole number of at least 1; `{count}` is too large"
                )),
                _ => Err(format!(
                    "`first:` takes a whole number of at least 1, not `{count}`"
                )),
            };
        }
        if let Some(run) = text.strip_prefix("heldout:") {
            return match run.trim() {
                "" => Err("`heldout:` takes a `forge train` run directory".into()),
                run => Ok(Self::HeldOut(PathBuf::from(run))),
            };
        }
        if let Some(name) = text.strip_prefix("split:") {
            return match name.trim() {
                "" => Err("`split:` takes the name of one of the environment's splits".into()),
                name => Ok(Self::Split(name.to_owned())),
            };
        }
        let mut seen = BTreeSet::new();
        let ids = text
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(|id| match seen.insert(id) {
                true => Ok(id.to_owned()),
                // Its episodes would be the same ones again (same seeds).
                false => Err(format!("`{id}` is named twice")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ids.is_empty() {
            return Err("no task named: give `all`, `first:N`, N or task ids".into());
        }
        Ok(Self::Ids(ids))
    }
}

impl TaskSelection {
    /// The selected tasks of `env`, in the order named (ids) or the bundle's.
    pub fn select<'a>(&self, env: &'a Environment) -> Result<Vec<&'a PreparedTask>> {
        let tasks = env.tasks();
        if tasks.is_empty() {
            bail!("environment `{}` has no tasks", env.name());
        }
        if let Self::HeldOut(run) = self {
            let heldout = crate::commands::train::heldout_tasks(run, env)?;
            if heldout.is_empty() {
                bail!(
                    "the run in {} holds out no task of environment `{}`",
                    run.display(),
                    env.name()
                );
            }
            return Ok(heldout.into_iter().map(|at| &tasks[at]).collect());
        }
        let ids: Vec<&str> = tasks.iter().map(|task| task.task.id.as_str()).collect();
        let manifest = &env.bundle().manifest;
        if let Self::Split(name) = self {
            manifest
                .split(name)
                .map_err(|why| anyhow::anyhow!("environment `{}` has {why}", env.name()))?;
        }
        let chosen = self.positions(&ids, &manifest.splits).map_err(|missing| {
            let count = match missing.parse::<usize>() {
                Ok(count @ 1..) if numbered(&ids) => {
                    format!("; its tasks are numbered, so a count of them is `first:{count}`")
                }
                Ok(0) if !numbered(&ids) => "; a count of tasks is at least 1".to_owned(),
                _ => String::new(),
            };
            anyhow::anyhow!(
                "environment `{}` has no task `{missing}` (see `forge inspect`){count}",
                env.name()
            )
        })?;
        if let Some(count) = self.count(&ids)
            && count > ids.len()
        {
            // Taken as at most `count` (as `head` does), but said: a run
            // meant to cover `count` tasks covers fewer.
            eprintln!(
                "note: environment `{}` has {}, fewer than the {count} asked for: taking them all",
                env.name(),
                crate::output::count(ids.len(), "task")
            );
        }
        Ok(chosen.into_iter().map(|at| &tasks[at]).collect())
    }

    /// Where the selected tasks are among `ids` (whose named subsets are
    /// `splits`), or the id that is not there.
    fn positions(
        &self,
        ids: &[&str],
        splits: &BTreeMap<String, Vec<String>>,
    ) -> Result<Vec<usize>, String> {
        if let Some(count) = self.count(ids) {
            return Ok((0..count.min(ids.len())).collect());
        }
        match self {
            Self::All => Ok((0..ids.len()).collect()),
            Self::Split(name) => {
                let members: BTreeSet<&str> = splits
                    .get(name)
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                Ok((0..ids.len())
                    .filter(|&at| members.contains(ids[at]))
                    .collect())
            }
            Self::HeldOut(_) => unreachable!("select reads a run's held-out tasks itself"),
            Self::First(_) => unreachable!("a count is taken above"),
            Self::Ids(named) => named
                .iter()
                .map(|id| {
                    ids.iter()
                        .position(|candidate| candidate == id)
                        .ok_or_else(|| id.clone())
                })
                .collect(),
        }
    }

    /// How many tasks a count asks for: `first:N`, or a bare N where tasks
    /// (`ids`) are not numbered.
    fn count(&self, ids: &[&str]) -> Option<usize> {
        match self {
            Self::First(count) => Some(*count),
            Self::Ids(named) => match named.as_slice() {
                [only] if !numbered(ids) => only.parse().ok().filter(|&count| count >= 1),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Whether tasks go by numbers (τ²-bench's): a bare number is then an id.
fn numbered(ids: &[&str]) -> bool {
    ids.iter().any(|id| id.parse::<usize>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(selection: &str, ids: &[&str]) -> Result<Vec<usize>, String> {
        let splits = BTreeMap::from([("test".to_owned(), vec!["c".to_owned(), "a".to_owned()])]);
        selection.parse::<TaskSelection>()?.positions(ids, &splits)
    }

    #[test]
    fn a_bare_number_counts_tasks_unless_tasks_are_numbered() {
        let named = ["shop-01", "shop-02", "shop-03"];
        assert_eq!(positions("2", &named), Ok(vec![0, 1]));
        assert_eq!(positions("first:2", &named), Ok(vec![0, 1]));
        assert_eq!(positions("9", &named), Ok(vec![0, 1, 2]));
        let numbered = ["0", "1", "2", "3", "4", "5", "6"];
        assert_eq!(positions("5", &numbered), Ok(vec![5]));
        assert_eq!(positions("first:5", &numbered), Ok(vec![0, 1, 2, 3, 4]));
        assert_eq!(positions("9", &numbered), Err("9".into()));
    }

    #[test]
    fn ids_are_played_in_the_order_named() {
        let ids = ["a", "b", "c"];
        assert_eq!(positions("all", &ids), Ok(vec![0, 1, 2]));
        assert_eq!(positions("c, a", &ids), Ok(vec![2, 0]));
        assert_eq!(positions("a,x", &ids), Err("x".into()));
        assert_eq!(positions("0", &ids), Err("0".into()));
    }

    #[test]
    fn a_split_is_played_in_the_bundles_order() {
        assert_eq!(positions("split:test", &["a", "b", "c"]), Ok(vec![0, 2]));
    }

    #[test]
    fn a_runs_held_out_tasks_are_named_by_its_directory() {
        assert_eq!(
            "heldout:runs/a".parse::<TaskSelection>(),
            Ok(TaskSelection::HeldOut(PathBuf::from("runs/a")))
        );
    }

    #[test]
    fn selections_that_mean_nothing_are_refused() {
        for (text, says) in [
            ("a,a", "`a` is named twice"),
            (",", "no task named"),
            ("first:0", "not `0`"),
            ("first:x", "not `x`"),
            (
                "first:99999999999999999999",
                "`99999999999999999999` is too large",
            ),
            ("split:", "takes the name"),
            ("heldout: ", "takes a `forge train` run directory"),
        ] {
            let err = text.parse::<TaskSelection>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
