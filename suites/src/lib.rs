//! Benchmark suites as Forge environments.
//!
//! A suite's tools are a component embedded in this crate (built from
//! `suites/<suite>/`), and its data — databases, tasks, policy — is read from
//! a directory laid out like the benchmarks' own repositories (see
//! [`Suite::load`]). The result is an ordinary [`Bundle`]: every Forge command
//! runs it, and [`replay`] re-executes each task's gold actions to compare
//! them with the reference implementation.

mod replay;
mod tau;

pub use replay::{ReplayedAction, TaskReplay, replay};

use anyhow::{Result, bail};
use forge_runtime::Bundle;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// A benchmark suite Forge can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    TauRetail,
    TauAirline,
}

impl Suite {
    pub const ALL: &[Suite] = &[Suite::TauRetail, Suite::TauAirline];

    /// The suite's name on the command line: `tau-bench/retail`.
    pub fn name(self) -> &'static str {
        match self {
            Self::TauRetail => "tau-bench/retail",
            Self::TauAirline => "tau-bench/airline",
        }
    }

    /// Reads the suite from `data`, a directory laid out like the benchmarks'
    /// data (`<data>/tau-bench/retail/orders.json`, …). Errors name the file
    /// and the field that is missing or malformed.
    pub fn load(self, data: &Path) -> Result<Bundle> {
        match self {
            Self::TauRetail => tau::load(&tau::RETAIL, data),
            Self::TauAirline => tau::load(&tau::AIRLINE, data),
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
