//! `forge synth`: domain docs in, verified environment bundles out.

use crate::output;
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_runtime::Sandbox;
use forge_synth::doc::DomainDoc;
use forge_synth::{SynthConfig, compile::Compiler};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

include!(concat!(env!("OUT_DIR"), "/domains.rs"));

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Domain docs (TOML or JSON); see env-templates/domains/README.md.
    #[arg(value_name = "DOC", required_unless_present = "all")]
    docs: Vec<PathBuf>,
    /// Every shipped domain doc.
    #[arg(long, conflicts_with = "docs")]
    all: bool,
    /// Write one bundle directory per domain here.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Seed of every random choice; the same seed and docs give identical bundles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tasks to keep per domain.
    #[arg(long, default_value_t = SynthConfig::default().tasks)]
    tasks: usize,
    /// Random-policy episodes per task in verification.
    #[arg(long, default_value_t = SynthConfig::default().random_trials)]
    random_trials: u64,
    /// One JSON object per domain, then a summary object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: SynthArgs) -> Result<ExitCode> {
    let docs = if args.all {
        DOMAIN_DOCS
            .iter()
            .map(|(name, text)| {
                let doc: DomainDoc = toml::from_str(text)
                    .with_context(|| format!("the shipped doc `{name}` is malformed"))?;
                doc.check()
                    .with_context(|| format!("the shipped doc `{name}` is inconsistent"))?;
                Ok(doc)
            })
            .collect::<Result<Vec<_>>>()?
    } else {
        args.docs
            .iter()
            .map(|path| DomainDoc::read(path))
            .collect::<Result<Vec<_>>>()?
    };
    if docs.is_empty() {
        bail!("no domain docs given");
    }
    let config = SynthConfig {
        seed: args.seed,
        tasks: args.tasks,
        random_trials: args.random_trials,
        ..SynthConfig::default()
    };
    let started = Instant::now();
    let sandbox = Sandbox::with_defaults()?;
    let compiler = Compiler::new(None)?;
    let progress = output::progress(docs.len() as u64, args.json);
    progress.set_message("compiling the generated tools");
    let outcomes =
        forge_synth::synthesize(&docs, &config, &args.out, &compiler, &sandbox, |outcome| {
            match outcome {
                Ok(report) => {
                    progress.set_message(format!("{}: {} tasks", report.domain, report.tasks))
                }
                Err((domain, _)) => progress.set_message(format!("{domain}: rejected")),
            }
            progress.inc(1);
        })?;
    progress.finish_and_clear();
    let mut reports = Vec::new();
    let mut rejected = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(report) => reports.push(report),
            Err((domain, err)) => rejected.push((domain, format!("{err:#}"))),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        for report in &reports {
            output::json_line(&serde_json::to_value(report)?);
        }
        for (domain, reason) in &rejected {
            output::json_line(&json!({"domain": domain, "rejected": reason}));
        }
        let tasks: usize = reports.iter().map(|report| report.tasks).sum();
        output::json_line(
            &json!({"summary": true, "domains": reports.len(), "rejected": rejected.len(), "tasks": tasks, "seconds": seconds}),
        );
        return Ok(exit_code(&rejected));
    }
    let mut table = output::table(&[
        "domain",
        "tools",
        "tasks",
        "calls mean",
        "calls max",
        "depth",
        "reqs",
        "writes",
        "random",
        "gold",
    ]);
    for report in &reports {
        table.add_row(vec![
            report.domain.clone(),
            report.tools.to_string(),
            report.tasks.to_string(),
            format!("{:.2}", report.mean_tool_calls),
            report.max_tool_calls.to_string(),
            format!("{:.2}", report.mean_dag_depth),
            format!("{:.2}", report.mean_requirements),
            format!("{:.2}", report.write_share),
            format!("{:.3}", report.random_success),
            format!("{:.3}", report.gold_success),
        ]);
    }
    println!("{table}");
    println!(
        "{} bundles in {} ({seconds:.1} s)",
        reports.len(),
        args.out.display()
    );
    for (domain, reason) in &rejected {
        eprintln!("rejected `{domain}`: {reason}");
    }
    Ok(exit_code(&rejected))
}

/// Non-zero when a domain was rejected.
fn exit_code(rejected: &[(String, String)]) -> ExitCode {
    if rejected.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
