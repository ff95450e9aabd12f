//! `forge`: train tool-using LLM agents with RL inside synthesized, sandboxed
//! tool environments.

mod agents;
mod builtin;
mod commands;
mod envs;
mod flags;
mod metrics;
mod output;
mod plot;
mod shutdown;
mod tasks;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// burn's CPU backend allocates every tensor it computes anew. glibc's
/// malloc maps buffers that large from the kernel and unmaps them when
/// freed, so each one was faulted in and zeroed again: a local model's
/// episode spent a fifth of its time in the kernel doing that. mimalloc
/// keeps freed memory for the next allocation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "forge", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Synthesize verified environment bundles from domain docs.
    Synth(commands::synth::SynthArgs),
    /// Run episodes of a policy on an environment's tasks and score them.
    Run(commands::run::RunArgs),
    /// Several trials per task: pass^k with confidence intervals, flip rates.
    Eval(commands::eval::EvalArgs),
    /// Re-execute a trajectory file and prove it byte-identical.
    Replay(commands::replay::ReplayArgs),
    /// Read a trajectory file's episodes as dialogues.
    Show(commands::show::ShowArgs),
    /// Print an environment's tools and tasks.
    Inspect(commands::inspect::InspectArgs),
    /// Write the built-in example environment as a bundle directory.
    Example(commands::example::ExampleArgs),
    /// Serve environments over the OpenEnv HTTP/WebSocket API and MCP.
    Serve(commands::serve::ServeArgs),
    /// Fine-tune the policy model: SFT on gold episodes, then ERPO.
    Train(commands::train::TrainArgs),
    /// Training runs, or evaluations, side by side: what differs and what it changed.
    Compare(commands::compare::CompareArgs),
    /// Obtain and inspect the policy's model files.
    #[command(subcommand)]
    Model(commands::model::ModelCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
}

fn main() -> ExitCode {
    restore_sigpipe();
    report_unwritable_stdout();
    let cli = Cli::parse();
    // What a command exits with when its output could not be written: its
    // status for trouble.
    let unwritten = match cli.command {
        Command::Replay(_) => ExitCode::from(commands::replay::TROUBLE),
        _ => ExitCode::FAILURE,
    };
    let run = std::panic::AssertUnwindSafe(|| match cli.command {
        Command::Synth(args) => commands::synth::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Replay(args) => commands::replay::run(args),
        Command::Show(args) => commands::show::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Example(args) => commands::example::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Train(args) => commands::train::run(args),
        Command::Compare(args) => commands::compare::run(args),
        Command::Model(command) => commands::model::run(command),
        Command::Bench(command) => commands::bench::run(command),
    });
    let result = match std::panic::catch_unwind(run) {
        Ok(result) => result,
        Err(panic) if stdout_failure(panic.as_ref()).is_some() => return unwritten,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            output::error(&err);
            ExitCode::FAILURE
        }
    }
}

/// `println!` panics where standard output cannot be written (a full disk,
/// `> /dev/full`): said as the error it is, as any other failed write is,
/// rather than as a crash with a backtrace (`main` then exits as the
/// command does for trouble).
fn report_unwritable_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| match stdout_failure(info.payload()) {
        Some(why) => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "error: writing to standard output: {why}"
            );
        }
        None => default(info),
    }));
}

/// Why standard output could not be written, where `panic` is `println!`'s
/// for that.
fn stdout_failure(panic: &(dyn std::any::Any + Send)) -> Option<&str> {
    panic
        .downcast_ref::<String>()?
        .strip_prefix("failed printing to stdout: ")
}

/// Rust ignores SIGPIPE, which turns `forge … | head` into a panic on the next
/// print; restore the default so the process ends quietly like other tools.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
