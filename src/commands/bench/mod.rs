//! `forge bench`: measurements of the sandbox, the policy model and
//! `forge serve`, and the benchmark suites' reference replays.

mod model;
mod perf;
mod replay;
mod serve;

use crate::output;
use anyhow::Result;
use clap::Subcommand;
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Component load, instantiation, episode reset, tool-call latency and
    /// throughput, and the native cost of the same tool.
    Perf(perf::PerfArgs),
    /// The policy model's throughput: a forward pass, a training step
    /// (forward, backward, AdamW) and batched decoding, in tokens/s, on the
    /// CPU or a GPU (compare with `scripts/gpu/bench_torch.py`).
    Model(model::ModelBenchArgs),
    /// Replays every task's gold actions of a benchmark suite: a summary and
    /// what an episode's operations cost on its database; with `--json`,
    /// each call's output and the final database hash, for comparison with
    /// the suite's reference implementation.
    Replay(replay::ReplayArgs),
    /// A load test of `forge serve`: many concurrent WebSocket sessions on
    /// loopback, sessions held, steps/s and latency percentiles, and whether
    /// sessions and memory return to baseline when the clients leave.
    Serve(serve::ServeBenchArgs),
}

pub fn run(command: BenchCommand) -> Result<ExitCode> {
    match command {
        BenchCommand::Perf(args) => perf::run(args),
        BenchCommand::Model(args) => model::run(args),
        BenchCommand::Replay(args) => replay::run(args),
        BenchCommand::Serve(args) => serve::run(args),
    }
}

/// One measurement of a benchmark table.
struct Row {
    metric: &'static str,
    value: f64,
    unit: &'static str,
}

/// Prints `rows` as a table, or as one JSON object keyed by metric.
fn report(rows: &[Row], json: bool) {
    if json {
        let object: serde_json::Map<String, Value> = rows
            .iter()
            .map(|row| {
                (
                    row.metric.to_owned(),
                    json!({"value": row.value, "unit": row.unit}),
                )
            })
            .collect();
        output::json_line(&Value::Object(object));
    } else {
        let mut table = output::table(&["metric", "value", "unit"]);
        for row in rows {
            // Counts as the whole numbers they are.
            let count = matches!(row.unit, "answers" | "requests" | "sessions" | "steps");
            let value = match count {
                true => format!("{:.0}", row.value),
                false => output::measured(row.value),
            };
            table.add_row(vec![row.metric.to_owned(), value, row.unit.to_owned()]);
        }
        println!("{table}");
    }
}

/// The `quantile` of sorted samples.
fn percentile(sorted: &[Duration], quantile: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * quantile).round() as usize]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
