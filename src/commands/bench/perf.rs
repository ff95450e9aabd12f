//! `forge bench perf`: what the sandbox costs, measured on the example
//! environment, beside the same tool compiled natively.

use super::{Row, micros, percentile};
use crate::builtin;
use crate::flags::seconds;
use anyhow::{Context, Result};
use clap::Args;
use forge_runtime::bundle::ToolCall;
use forge_runtime::environment::execute;
use forge_runtime::sandbox::{Limits, ToolComponent};
use forge_runtime::state::Record;
use forge_runtime::{Sandbox, State};
use serde_json::json;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct PerfArgs {
    /// Calls per latency measurement (each call's time is kept, so at most
    /// ten million).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    calls: u32,
    /// Seconds per throughput measurement.
    #[arg(long, default_value_t = 2.0, value_parser = seconds, allow_negative_numbers = true)]
    seconds: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// A tool call to measure: a read and a write of the example environment.
fn read_call() -> ToolCall {
    ToolCall::new("get_user", json!({"user_id": "u3"}))
}

fn write_call() -> ToolCall {
    ToolCall::new(
        "update_user_address",
        json!({"user_id": "u3", "street": "1 Test Way", "city": "Springfield", "zip": "12345"}),
    )
}

pub fn run(args: PerfArgs) -> Result<ExitCode> {
    let bundle = builtin::example_bundle();
    let state = State::from_json(&bundle.initial_state)?;
    let cache = tempfile::tempdir()?;
    let mut rows = Vec::new();

    let sandbox = Sandbox::new(Limits::default(), Some(cache.path().to_owned()))?;
    let cold = time_once(|| sandbox.load(&bundle.wasm))?;
    rows.push(Row {
        metric: "component load, cold (compile + check + describe)",
        value: cold.0.as_secs_f64() * 1e3,
        unit: "ms",
    });
    let warm_sandbox = Sandbox::new(Limits::default(), Some(cache.path().to_owned()))?;
    let (cached, component) = time_once(|| warm_sandbox.load(&bundle.wasm))?;
    rows.push(Row {
        metric: "component load, cached",
        value: cached.as_secs_f64() * 1e3,
        unit: "ms",
    });

    let instantiate = sample(1_000, || {
        let mut instance = component.instance();
        instance.instantiate().expect("the example instantiates");
    });
    rows.push(Row {
        metric: "instantiate (median)",
        value: micros(percentile(&instantiate, 0.5)),
        unit: "µs",
    });

    let reset_small = sample(10_000, || drop(std::hint::black_box(state.clone())));
    let big = big_state(100_000);
    let reset_big = sample(10_000, || drop(std::hint::black_box(big.clone())));
    let reset_with_instance = sample(1_000, || {
        let fork = std::hint::black_box(state.clone());
        let mut instance = component.instance();
        instance.instantiate().expect("the example instantiates");
        drop((fork, instance));
    });
    rows.push(Row {
        metric: "episode reset incl. a fresh instance (median)",
        value: micros(percentile(&reset_with_instance, 0.5)),
        unit: "µs",
    });
    rows.push(Row {
        metric: "episode reset, example state (median)",
        value: micros(percentile(&reset_small, 0.5)),
        unit: "µs",
    });
    rows.push(Row {
        metric: "episode reset, 100k-record state (median)",
        value: micros(percentile(&reset_big, 0.5)),
        unit: "µs",
    });

    let (read, write) = (read_call(), write_call());
    let calls = args.calls as usize;
    let read_latency = sandboxed_latency(&component, &state, &read, calls)?;
    let write_latency = sandboxed_latency(&component, &state, &write, calls)?;
    let native_read = native_latency(&state, &read, calls)?;
    let native_write = native_latency(&state, &write, calls)?;
    for (name, samples) in [
        ("read call `get_user`", &read_latency),
        ("write call `update_user_address`", &write_latency),
    ] {
        rows.push(Row {
            metric: leak(format!("{name}, sandboxed (median)")),
            value: micros(percentile(samples, 0.5)),
            unit: "µs",
        });
        rows.push(Row {
            metric: leak(format!("{name}, sandboxed (p99)")),
            value: micros(percentile(samples, 0.99)),
            unit: "µs",
        });
    }
    rows.push(Row {
        metric: "read call, native (median)",
        value: micros(percentile(&native_read, 0.5)),
        unit: "µs",
    });
    rows.push(Row {
        metric: "write call, native (median)",
        value: micros(percentile(&native_write, 0.5)),
        unit: "µs",
    });
    rows.push(Row {
        metric: "read call, sandboxed / native",
        value: percentile(&read_latency, 0.5).as_secs_f64()
            / percentile(&native_read, 0.5).as_secs_f64(),
        unit: "×",
    });
    rows.push(Row {
        metric: "write call, sandboxed / native",
        value: percentile(&write_latency, 0.5).as_secs_f64()
            / percentile(&native_write, 0.5).as_secs_f64(),
        unit: "×",
    });

    let duration = Duration::from_secs_f64(args.seconds);
    for threads in [1, 2] {
        let rate = throughput(&component, &state, &read, threads, duration)?;
        rows.push(Row {
            metric: if threads == 1 {
                "read calls/s, 1 thread"
            } else {
                "read calls/s, 2 threads"
            },
            value: rate,
            unit: "calls/s",
        });
    }

    super::report(&rows, args.json);
    Ok(ExitCode::SUCCESS)
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn time_once<T>(run: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let start = Instant::now();
    let value = run()?;
    Ok((start.elapsed(), value))
}

fn sample(iterations: usize, mut run: impl FnMut()) -> Vec<Duration> {
    let mut samples: Vec<Duration> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    samples.sort_unstable();
    samples
}

fn sandboxed_latency(
    component: &ToolComponent,
    state: &State,
    call: &ToolCall,
    calls: usize,
) -> Result<Vec<Duration>> {
    let mut instance = component.instance();
    let check = execute(&mut instance, state, call);
    anyhow::ensure!(
        matches!(check.observation, forge_runtime::Observation::Ok(_)),
        "{} failed: {:?}",
        call.name,
        check.observation
    );
    Ok(sample(calls, || {
        drop(std::hint::black_box(execute(&mut instance, state, call)))
    }))
}

fn native_latency(state: &State, call: &ToolCall, calls: usize) -> Result<Vec<Duration>> {
    let args = call.arguments.to_string();
    let mut store = NativeStore(state.clone());
    forge_guest::call(forge_example_shop::TOOLS, &mut store, &call.name, &args)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("native {}", call.name))?;
    Ok(sample(calls, || {
        // Each call starts from the same state, as the sandboxed one does.
        let mut store = NativeStore(state.clone());
        drop(std::hint::black_box(forge_guest::call(
            forge_example_shop::TOOLS,
            &mut store,
            &call.name,
            &args,
        )));
    }))
}

fn throughput(
    component: &ToolComponent,
    state: &State,
    call: &ToolCall,
    threads: usize,
    duration: Duration,
) -> Result<f64> {
    let start = Instant::now();
    let total: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut instance = component.instance();
                    let mut calls = 0;
                    while start.elapsed() < duration {
                        for _ in 0..100 {
                            std::hint::black_box(execute(&mut instance, state, call));
                        }
                        calls += 100;
                    }
                    calls
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("benchmark thread"))
            .sum()
    });
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// A state with `records` records, to show that reset does not depend on size.
fn big_state(records: usize) -> State {
    let mut state = State::default();
    for index in 0..records {
        state.put(
            "items",
            &format!("i{index}"),
            Record::from_value(json!({"id": index, "name": format!("item {index}")})),
        );
    }
    state
}

/// The host state behind the guest's `Store` trait, for native calls.
struct NativeStore(State);

impl forge_guest::Store for NativeStore {
    fn get(&self, collection: &str, key: &str) -> Option<String> {
        self.0
            .get(collection, key)
            .map(|record| record.text().to_string())
    }

    fn put(&mut self, collection: &str, key: &str, record: &str) -> Result<(), String> {
        let record = Record::from_text(record).map_err(|err| err.to_string())?;
        self.0.put(collection, key, record);
        Ok(())
    }

    fn remove(&mut self, collection: &str, key: &str) -> bool {
        self.0.remove(collection, key)
    }

    fn keys(&self, collection: &str) -> Vec<String> {
        self.0.keys(collection)
    }

    fn fresh_key(&self, collection: &str, prefix: &str) -> String {
        self.0.fresh_key(collection, prefix)
    }
}
