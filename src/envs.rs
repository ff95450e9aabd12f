//! Choosing and loading the environment a command works on.

use crate::builtin;
use anyhow::{Context, Result};
use clap::Args;
use forge_runtime::{Bundle, Environment, Sandbox};
use forge_suites::Suite;
use std::path::{Path, PathBuf};

/// `--env` or `--suite`, shared by the commands that work on one environment.
#[derive(Args, Debug, Clone)]
pub struct EnvArgs {
    /// An environment bundle directory (see `forge example`); the built-in
    /// example environment when neither this nor `--suite` is given.
    #[arg(long, value_name = "DIR", conflicts_with = "suite")]
    pub env: Option<PathBuf>,
    /// A benchmark suite (tau-bench/retail, tau-bench/airline, tau2-bench/mock, tau2-bench/airline, tau2-bench/retail, tau2-bench/telecom, tau2-bench/banking_knowledge), read from `--data`.
    #[arg(long, value_name = "SUITE", requires = "data")]
    pub suite: Option<Suite>,
    /// The benchmark data for `--suite`, laid out like the benchmarks'
    /// repositories (`<DIR>/tau-bench/retail/orders.json`, …).
    #[arg(long, value_name = "DIR", requires = "suite")]
    pub data: Option<PathBuf>,
}

impl EnvArgs {
    pub fn bundle(&self) -> Result<Bundle> {
        match (&self.env, self.suite, &self.data) {
            (Some(dir), _, _) => Source::Dir(dir.clone()).read(),
            (None, Some(suite), Some(data)) => Source::Suite {
                suite,
                data: data.clone(),
            }
            .read(),
            _ => Ok(builtin::example_bundle()),
        }
    }

    pub fn load(&self, sandbox: &Sandbox) -> Result<Environment> {
        Environment::load(sandbox, self.bundle()?)
    }
}

/// The environments of bundle directories `dirs` and benchmark `suites`
/// (read from `data`), in that order; the built-in example where neither
/// names any.
pub fn load_all(
    dirs: &[PathBuf],
    suites: &[Suite],
    data: Option<&Path>,
    sandbox: &Sandbox,
) -> Result<Vec<Environment>> {
    let mut sources: Vec<Source> = dirs.iter().cloned().map(Source::Dir).collect();
    for suite in suites {
        let data = data.context("--suite needs --data")?;
        sources.push(Source::Suite {
            suite: *suite,
            data: data.to_owned(),
        });
    }
    let bundles = match sources.is_empty() {
        true => vec![builtin::example_bundle()],
        false => sources.iter().map(Source::read).collect::<Result<_>>()?,
    };
    bundles
        .into_iter()
        .map(|bundle| Environment::load(sandbox, bundle))
        .collect()
}

/// Where an environment bundle comes from: a bundle directory, or a
/// benchmark suite read from its data directory.
pub enum Source {
    Dir(PathBuf),
    Suite { suite: Suite, data: PathBuf },
}

impl Source {
    pub fn read(&self) -> Result<Bundle> {
        match self {
            Self::Dir(dir) => Bundle::read_dir(dir)
                .with_context(|| format!("reading the environment bundle {}", dir.display())),
            Self::Suite { suite, data } => suite.load(data),
        }
    }
}

/// The flag that names the source.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dir(dir) => write!(f, "--env {}", dir.display()),
            Self::Suite { suite, .. } => write!(f, "--suite {suite}"),
        }
    }
}
