//! `forge bench`: measurements of the sandbox, and the benchmark suites'
//! reference replays.

mod perf;
mod replay;

use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Component load, instantiation, episode reset, tool-call latency and
    /// throughput, and the native cost of the same tool.
    Perf(perf::PerfArgs),
    /// Replays every task's gold actions of a benchmark suite, printing each
    /// call's output and the final database hash, for comparison with the
    /// suite's reference implementation.
    Replay(replay::ReplayArgs),
}

pub fn run(command: BenchCommand) -> Result<ExitCode> {
    match command {
        BenchCommand::Perf(args) => perf::run(args),
        BenchCommand::Replay(args) => replay::run(args),
    }
}
