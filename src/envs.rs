//! Choosing and loading the environment a command works on.

use crate::builtin;
use crate::tasks::TaskSelection;
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_runtime::{Bundle, Environment, Sandbox};
use forge_suites::Suite;
use std::path::{Path, PathBuf};

/// `--env` or `--suite`, shared by the commands that work on one environment.
#[derive(Args, Debug, Clone)]
pub struct EnvArgs {
    /// An environment bundle directory (see `forge example`); when neither
    /// this nor `--suite` is given, the built-in example environment (with
    /// `--tasks heldout:RUN_DIR`, the one the run trains on).
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
    pub fn load(&self, sandbox: &Sandbox) -> Result<Environment> {
        match self.source() {
            Some(source) => source.load(sandbox, source.read()?),
            None => Environment::load(sandbox, builtin::example_bundle()),
        }
    }

    /// As [`Self::load`], except that with neither flag, `--tasks
    /// heldout:RUN_DIR` plays the environment the run trains on (where it
    /// trains on one), not the built-in example.
    pub fn load_for(&self, sandbox: &Sandbox, tasks: &TaskSelection) -> Result<Environment> {
        if let (None, TaskSelection::HeldOut(run_dir)) = (self.source(), tasks) {
            let (source, bundle) = crate::commands::train::sole_environment(run_dir)?;
            return source.load(sandbox, bundle);
        }
        self.load(sandbox)
    }

    /// Where the environment comes from (`None`: the built-in example).
    fn source(&self) -> Option<Source> {
        match (&self.env, self.suite, &self.data) {
            (Some(dir), _, _) => Some(Source::Dir(dir.clone())),
            (None, Some(suite), Some(data)) => Some(Source::Suite {
                suite,
                data: data.clone(),
            }),
            _ => None,
        }
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
    if sources.is_empty() {
        return Ok(vec![Environment::load(sandbox, builtin::example_bundle())?]);
    }
    // Every bundle read before any is loaded (which takes longer): a
    // missing one is said at once.
    let bundles = sources
        .iter()
        .map(Source::read)
        .collect::<Result<Vec<_>>>()?;
    sources
        .iter()
        .zip(bundles)
        .map(|(source, bundle)| source.load(sandbox, bundle))
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
            // What synthesis left of a domain it rejected: its report.
            Self::Dir(dir)
                if !dir.join(forge_runtime::bundle::MANIFEST_FILE).exists()
                    && dir.join(forge_synth::domain_dir::REPORT_FILE).is_file() =>
            {
                bail!(
                    "{} holds no environment bundle: synthesis rejected its domain (see {})",
                    dir.display(),
                    dir.join(forge_synth::domain_dir::REPORT_FILE).display()
                )
            }
            Self::Dir(dir) => Bundle::read_dir(dir)
                .with_context(|| format!("reading the environment bundle {}", dir.display())),
            Self::Suite { suite, data } => suite.load(data),
        }
    }

    /// Loads `bundle`, read from here: what is wrong with it (a task id
    /// given twice, a gold action that fails) says where it came from.
    pub fn load(&self, sandbox: &Sandbox, bundle: Bundle) -> Result<Environment> {
        Environment::load(sandbox, bundle).with_context(|| match self {
            Self::Dir(dir) => format!("loading the environment bundle {}", dir.display()),
            Self::Suite { suite, .. } => format!("loading the suite {suite}"),
        })
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
