//! `forge synth`: domain docs in, verified environment bundles out.

use crate::flags::{self, at_least_one_u64, request_timeout};
use crate::output;
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_llm::{ChatClient, ChatConfig};
use forge_runtime::Sandbox;
use forge_synth::doc::DomainDoc;
use forge_synth::llm::AnyDoc;
use forge_synth::{Llm, Progress, SynthConfig, compile::Compiler, domain_dir};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

include!(concat!(env!("OUT_DIR"), "/domains.rs"));

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Domain docs (TOML or JSON), or directories of them; see
    /// env-templates/domains/README.md.
    #[arg(value_name = "DOC", required_unless_present = "all")]
    docs: Vec<PathBuf>,
    /// Every shipped domain doc.
    #[arg(long, conflicts_with = "docs")]
    all: bool,
    /// Write one bundle directory per domain here.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Seed of every random choice; the same seed and docs give identical bundles.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    seed: u64,
    /// Tasks to keep per domain (at most 10000).
    #[arg(long, default_value_t = SynthConfig::default().tasks, value_parser = flags::synth_tasks)]
    tasks: usize,
    /// Random-policy episodes per task in verification (at most 1000).
    #[arg(long, default_value_t = SynthConfig::default().random_trials, value_parser = flags::random_trials)]
    random_trials: u64,
    /// Most requirements (writes or questions) per task, at least 1. Tasks
    /// draw 1 to 5, so the default caps nothing; 1 gives one-requirement tasks.
    #[arg(long, value_name = "N", default_value_t = SynthConfig::default().max_requirements as u64, value_parser = at_least_one_u64)]
    max_requirements: u64,
    /// An OpenAI-compatible API base (e.g. `http://127.0.0.1:8000/v1`): plain
    /// docs are annotated by the model, and task instructions rewritten by it.
    #[arg(long, value_name = "URL", requires = "model")]
    llm_url: Option<String>,
    /// The model to ask at `--llm-url`.
    #[arg(long, requires = "llm_url")]
    model: Option<String>,
    /// The environment variable holding the endpoint's API key (if it needs one).
    #[arg(
        long,
        value_name = "VAR",
        default_value = "OPENAI_API_KEY",
        requires = "llm_url"
    )]
    api_key_env: String,
    /// Most model answers per doc (each invalid one is fed back).
    #[arg(long, default_value_t = 3, value_parser = at_least_one_u64, requires = "llm_url")]
    llm_rounds: u64,
    /// The longest one request to `--llm-url` may take, its whole reply
    /// included; one that takes longer fails, unretried (it would take as
    /// long again).
    #[arg(long, value_name = "SECONDS", default_value_t = forge_llm::DEFAULT_TIMEOUT.as_secs(), value_parser = request_timeout, requires = "llm_url")]
    request_timeout: u64,
    /// Replace bundle directories that already exist under `--out` (those
    /// holding only files synthesis writes; others are refused). The new
    /// directory is moved into place whole, once its domain is done.
    #[arg(long)]
    force: bool,
    /// One JSON object per domain, then a summary object.
    #[arg(long)]
    json: bool,
}

/// The domain docs shipped in the binary (`env-templates/domains`).
pub fn shipped_docs() -> Result<Vec<AnyDoc>> {
    DOMAIN_DOCS
        .iter()
        .map(|(name, text)| {
            let doc: DomainDoc = toml::from_str(text)
                .with_context(|| format!("the shipped doc `{name}` is malformed"))?;
            doc.check()
                .with_context(|| format!("the shipped doc `{name}` is inconsistent"))?;
            Ok(AnyDoc::Annotated(doc))
        })
        .collect()
}

pub fn run(args: SynthArgs) -> Result<ExitCode> {
    let docs = if args.all {
        shipped_docs()?
    } else {
        let mut paths = expand_dirs(&args.docs)?;
        // A doc given twice (by two spellings of its path, or in a
        // directory given beside it) is one doc.
        let mut seen = std::collections::HashSet::new();
        paths.retain(|path| seen.insert(path.canonicalize().unwrap_or_else(|_| path.clone())));
        let docs = paths
            .iter()
            .map(|path| AnyDoc::read(path))
            .collect::<Result<Vec<_>>>()?;
        refuse_a_domain_named_twice(&paths, &docs)?;
        docs
    };
    let client = args
        .llm_url
        .as_ref()
        .zip(args.model.as_ref())
        .map(|(url, model)| {
            let mut config = ChatConfig::new(url, model).key_from_env(&args.api_key_env);
            config.timeout = Duration::from_secs(args.request_timeout);
            crate::agents::client(config, ["--llm-url", "--model"])
        })
        .transpose()?;
    let model = client.as_ref().map(|client| Llm {
        client,
        rounds: args.llm_rounds as usize,
    });
    if docs.is_empty() {
        bail!("no domain docs given");
    }
    let plain: Vec<&str> = docs
        .iter()
        .filter(|doc| matches!(doc, AnyDoc::Plain(_)))
        .map(AnyDoc::name)
        .collect();
    if model.is_none() && !plain.is_empty() {
        bail!(
            "{} plain (no collections or tool kinds): pass --llm-url and --model for a model to \
             annotate {}",
            match plain.as_slice() {
                [one] => format!("the doc of `{one}` is"),
                many => format!("the docs of `{}` are", many.join("`, `")),
            },
            match plain.len() {
                1 => "it",
                _ => "them",
            }
        );
    }
    if args.out.exists() && !args.out.is_dir() {
        bail!(
            "--out {} is a file: name a directory to write the bundles in",
            args.out.display()
        );
    }
    // Before any work: a long synthesis must not end in a refusal.
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating --out {}", args.out.display()))?;
    // Two syntheses into one directory would replace each other's bundles.
    let _held = super::hold(&args.out)?;
    tempfile::Builder::new()
        .prefix(".forge-probe-")
        .tempdir_in(&args.out)
        .with_context(|| format!("--out {} cannot be written to", args.out.display()))?;
    recover_stopped_syntheses(&args.out)?;
    for doc in &docs {
        let dir = args.out.join(doc.name());
        if dir.is_symlink() {
            bail!(
                "{} is a symbolic link, where the bundle of `{}` would go: not writing through it \
                 (choose another --out)",
                dir.display(),
                doc.name()
            );
        }
        if dir.exists() && !dir.is_dir() {
            bail!(
                "{} is a file, where the bundle of `{}` would go (move it away or choose another \
                 --out)",
                dir.display(),
                doc.name()
            );
        }
        if args.force {
            // Before any work: a long synthesis must not end in this refusal.
            domain_dir::check_replaceable(&dir)?;
        } else if dir
            .read_dir()
            .is_ok_and(|mut entries| entries.next().is_some())
        {
            bail!(
                "{} already exists (pass --force to replace it, or choose another --out)",
                dir.display()
            );
        }
    }
    let config = SynthConfig {
        seed: args.seed,
        tasks: args.tasks,
        random_trials: args.random_trials,
        max_requirements: args.max_requirements as usize,
        ..SynthConfig::default()
    };
    let started = Instant::now();
    // What a stop leaves is tidied by the next synthesis into --out (as
    // after a crash): the bundles already moved into place are whole.
    let out = args.out.clone();
    crate::shutdown::on_signal(move |_| {
        eprintln!(
            "\nstopped: the bundles finished so far are kept in {}; the domain under way is \
             not (the next `forge synth` into it tidies what it left)",
            out.display()
        );
        std::process::exit(i32::from(crate::shutdown::stopped_status()));
    })?;
    let sandbox = Sandbox::with_defaults()?;
    let compiler = Compiler::new(None)?;
    let progress = output::progress(docs.len() as u64, args.json);
    if let Some(client) = &client {
        output::tell_retries(client, &progress);
    }
    progress.set_message(match (&model, plain.is_empty()) {
        (None, _) => "compiling the generated tools",
        (Some(_), true) => "compiling the tools; then the model rewrites the instructions",
        (Some(_), false) => "the model annotates the plain docs; then it rewrites the instructions",
    });
    let outcomes = forge_synth::synthesize(
        &docs,
        &config,
        &args.out,
        &compiler,
        &sandbox,
        model.as_ref(),
        |step| match step {
            Progress::Synthesizing(domain) => {
                let then = match model {
                    Some(_) => "; then the model rewrites its instructions",
                    None => "",
                };
                progress.set_message(format!("{domain}: generating and verifying tasks{then}"));
            }
            Progress::Done(outcome) => {
                progress.set_message(match outcome {
                    Ok(report) => {
                        format!("{}: {}", report.domain, output::count(report.tasks, "task"))
                    }
                    Err((domain, _)) => format!("{domain}: rejected"),
                });
                progress.inc(1);
            }
        },
    )?;
    progress.finish_and_clear();
    let mut reports = Vec::new();
    let mut rejected = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(report) => reports.push(report),
            Err((domain, err)) => {
                // A rejection never takes a bundle's place: one there is
                // the one made before.
                let mut reason = format!("{err:#}");
                let dir = args.out.join(&domain);
                if dir.join(forge_runtime::bundle::MANIFEST_FILE).is_file() {
                    reason += &format!("; the bundle already in {} is kept", dir.display());
                }
                rejected.push((domain, reason));
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let tasks: usize = reports.iter().map(|report| report.tasks).sum();
    if args.json {
        for report in &reports {
            output::json_line(&serde_json::to_value(report)?);
        }
        for (domain, reason) in &rejected {
            output::json_line(&json!({"domain": domain, "rejected": reason}));
        }
        let usage = client.as_ref().map(ChatClient::usage);
        output::json_line(&json!({
            "summary": true,
            "domains": reports.len(),
            "rejected": rejected.len(),
            "tasks": tasks,
            // Per domain: a report whose `tasks` falls short of it ran out
            // of distinct tasks (see the note without `--json`).
            "tasks_asked": args.tasks,
            "seconds": seconds,
            "llm_usage": usage,
        }));
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
            report
                .random_success
                .map_or_else(|| "-".to_owned(), |rate| format!("{rate:.3}")),
            format!("{:.3}", report.gold_success),
        ]);
    }
    // No bundle, no table of none.
    if !reports.is_empty() {
        println!("{table}");
    }
    println!(
        "{} in {} ({seconds:.1} s)",
        output::count(reports.len(), "bundle"),
        args.out.display()
    );
    if let Some(usage) = client.as_ref().map(ChatClient::usage) {
        let rewritten: usize = reports
            .iter()
            .filter_map(|report| report.instructions_rewritten)
            .sum();
        let kept = match rewritten < tasks {
            true => forge_synth::llm::TEMPLATES_KEPT,
            false => "",
        };
        println!(
            "model: {}; {rewritten} of {} rewritten{kept}",
            output::usage(&usage),
            output::count(tasks, "instruction")
        );
    }
    // A small domain runs out of distinct tasks: said, not only tabled.
    for report in reports.iter().filter(|report| report.tasks < args.tasks) {
        eprintln!(
            "note: `{}` kept {} of the {} asked for: its {} attempts found no more distinct, \
             solvable tasks that the random policy does not solve (report.md counts why the \
             others were dropped)",
            report.domain,
            output::count(report.tasks, "task"),
            args.tasks,
            report.attempts,
        );
    }
    for (domain, reason) in &rejected {
        eprintln!("rejected `{domain}`: {reason}");
    }
    Ok(exit_code(&rejected))
}

/// Tidies what syntheses into `out` stopped mid-way (Ctrl-C, a crash)
/// left: a domain's old bundle, moved aside to be replaced, goes back where
/// it was if nothing took its place (once the new one is there, the old one
/// is spent), and the directories they were writing domains in are
/// removed. Nothing else writes in `out` while this process holds it.
fn recover_stopped_syntheses(out: &Path) -> Result<()> {
    let entries = out
        .read_dir()
        .with_context(|| format!("reading {}", out.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", out.display()))?;
        let name = entry.file_name();
        let Some(domain) = name.to_str().and_then(domain_dir::staged_domain) else {
            continue;
        };
        let stage = entry.path();
        if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        if !domain_dir::holds_only_synthesis(&stage) {
            eprintln!(
                "note: left {}, which looks like what a stopped synthesis leaves but holds files \
                 of its own",
                stage.display()
            );
            continue;
        }
        let (aside, home) = (stage.join(domain_dir::MOVED_ASIDE), out.join(domain));
        if aside.is_dir() && !home.exists() {
            std::fs::rename(&aside, &home)
                .with_context(|| format!("putting {} back", home.display()))?;
            eprintln!(
                "note: put {} back, which a synthesis stopped mid-way had moved aside",
                home.display()
            );
        }
        std::fs::remove_dir_all(&stage).with_context(|| format!("removing {}", stage.display()))?;
        eprintln!(
            "note: removed {}, left by a synthesis stopped mid-way",
            stage.display()
        );
    }
    Ok(())
}

/// Refuses two docs of one domain (by its name, which names its bundle),
/// naming both files; and two domains whose names differ in `_` and `-`
/// alone, whose tools would build as one crate (Cargo's package names do
/// not tell them apart).
fn refuse_a_domain_named_twice(paths: &[PathBuf], docs: &[AnyDoc]) -> Result<()> {
    let mut first: std::collections::BTreeMap<String, (&Path, &str)> = Default::default();
    for (path, doc) in paths.iter().zip(docs) {
        let name = doc.name();
        let Some((other, other_name)) = first.insert(name.replace('_', "-"), (path, name)) else {
            continue;
        };
        if other_name == name {
            bail!(
                "{} and {} both document the domain `{name}`: each bundle is named by its domain",
                other.display(),
                path.display(),
            );
        }
        bail!(
            "{} and {} document the domains `{other_name}` and `{name}`, whose tools would \
             build as one crate (`_` and `-` are one in a crate's name): rename one",
            other.display(),
            path.display(),
        );
    }
    Ok(())
}

/// The docs given: files as they are, directories as every `.toml` and
/// `.json` file in them (sorted, so the order does not depend on the file
/// system), less hidden ones (an editor's lock and backup files).
fn expand_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut docs = Vec::new();
    for path in paths {
        if !path.is_dir() {
            docs.push(path.clone());
            continue;
        }
        if path.join(forge_runtime::bundle::MANIFEST_FILE).is_file() {
            let doc = path.join(domain_dir::DOC_FILE);
            let made_from = match doc.is_file() {
                true => format!(": the doc it was made from is {}", doc.display()),
                false => String::new(),
            };
            bail!(
                "{} is a bundle, not a directory of docs{made_from}",
                path.display()
            );
        }
        let is_doc = |file: &Path| {
            let hidden = file
                .file_name()
                .is_some_and(|name| name.as_encoded_bytes().starts_with(b"."));
            let documented = file.extension().is_some_and(|ext| {
                ext.eq_ignore_ascii_case("toml") || ext.eq_ignore_ascii_case("json")
            });
            !hidden && documented && file.is_file()
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|file| is_doc(file))
            .collect();
        if found.is_empty() {
            bail!("{} holds no .toml or .json docs", path.display());
        }
        found.sort();
        docs.extend(found);
    }
    Ok(docs)
}

/// Non-zero when a domain was rejected.
fn exit_code(rejected: &[(String, String)]) -> ExitCode {
    if rejected.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
