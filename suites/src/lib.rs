//! Benchmark suites as Forge environments.
//!
//! A suite's tools are a component embedded in this crate (built from
//! `suites/<suite>/`: τ-bench's in `tau-<domain>`, τ²-bench's in
//! `tau2-<domain>`), and its data — databases, tasks, policy — is read from
//! a directory laid out like the benchmarks' own repositories (see
//! [`Suite::load`]). The result is an ordinary [`Bundle`]: every Forge command
//! runs it, and [`replay`] re-executes each task's gold actions to compare
//! them with the reference implementation.

mod layout;
mod pydantic;
mod replay;
mod tau;
mod tau2;

pub use replay::{ReplayedAction, TaskReplay, replay};

use anyhow::{Result, bail};
use forge_runtime::Bundle;
use serde_json::Value;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// A benchmark suite Forge can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    TauRetail,
    TauAirline,
    Tau2Mock,
    Tau2Airline,
    Tau2Retail,
    Tau2Telecom,
    Tau2Banking,
}

impl Suite {
    pub const ALL: &[Suite] = &[
        Suite::TauRetail,
        Suite::TauAirline,
        Suite::Tau2Mock,
        Suite::Tau2Airline,
        Suite::Tau2Retail,
        Suite::Tau2Telecom,
        Suite::Tau2Banking,
    ];

    /// The suite's name on the command line: `tau-bench/retail`.
    pub fn name(self) -> &'static str {
        match self {
            Self::TauRetail => "tau-bench/retail",
            Self::TauAirline => "tau-bench/airline",
            Self::Tau2Mock => "tau2-bench/mock",
            Self::Tau2Airline => "tau2-bench/airline",
            Self::Tau2Retail => "tau2-bench/retail",
            Self::Tau2Telecom => "tau2-bench/telecom",
            Self::Tau2Banking => "tau2-bench/banking_knowledge",
        }
    }

    /// The suite whose environment is named `environment`
    /// (`tau2-bench-mock`), as trajectories record it.
    pub fn of_environment(environment: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|suite| suite.name().replacen('/', "-", 1) == environment)
    }

    /// Reads the suite from `data`, a directory laid out like the benchmarks'
    /// data (`<data>/tau-bench/retail/orders.json`,
    /// `<data>/tau2-bench/airline/db.json`, …). Errors name the file
    /// and the field that is missing or malformed.
    pub fn load(self, data: &Path) -> Result<Bundle> {
        match self {
            Self::TauRetail => tau::load(&tau::RETAIL, data),
            Self::TauAirline => tau::load(&tau::AIRLINE, data),
            Self::Tau2Mock => tau2::load(&tau2::MOCK, data),
            Self::Tau2Airline => tau2::load(&tau2::AIRLINE, data),
            Self::Tau2Retail => tau2::load(&tau2::RETAIL, data),
            Self::Tau2Telecom => tau2::load(&tau2::TELECOM, data),
            Self::Tau2Banking => tau2::load(&tau2::BANKING, data),
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Suite {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> Result<Self> {
        match Self::ALL.iter().find(|suite| suite.name() == name) {
            Some(suite) => Ok(*suite),
            None => {
                let known: Vec<&str> = Self::ALL.iter().map(|suite| suite.name()).collect();
                bail!("unknown suite `{name}` (known: {})", known.join(", "))
            }
        }
    }
}

/// `value` as a task of `file`, where it is the `index`th of a list (or
/// the file's one task): errors name the task, by place and id, and the
/// field at fault (`user_scenario.instructions`), not the file alone.
fn parse_task<T: serde::de::DeserializeOwned>(
    file: &Path,
    index: Option<usize>,
    value: Value,
) -> Result<T> {
    let id = value
        .get("id")
        .map(|id| id.as_str().map_or_else(|| id.to_string(), str::to_owned));
    serde_path_to_error::deserialize(value).map_err(|err| {
        let task = match (index, id) {
            (Some(index), Some(id)) => format!(" task {index} (`{id}`):"),
            (Some(index), None) => format!(" task {index}:"),
            (None, Some(id)) => format!(" task `{id}`:"),
            (None, None) => String::new(),
        };
        let field = match err.path().to_string() {
            at if at == "." => String::new(),
            at => format!(" at `{at}`"),
        };
        anyhow::anyhow!(
            "{}:{task} malformed task{field}: {}",
            file.display(),
            err.inner()
        )
    })
}

/// A JSON file of the benchmark data; errors name the file.
fn read_json(path: &Path) -> Result<serde_json::Value> {
    use anyhow::Context;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not valid JSON", path.display()))
}
