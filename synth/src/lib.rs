//! Environment synthesis: domain documentation in, verified environment
//! bundles out.
//!
//! Stages, each a module whose output is written beside the bundle (with
//! the doc itself, `doc.json`):
//! 1. [`doc`] — the state structure (collections, fields, keys, relations)
//!    read and checked from the doc → `structure.json`;
//! 2. [`codegen`] + [`compile`] + [`validate`] — tool implementations
//!    generated into the Rust guest template, compiled to a component, and
//!    exercised with valid and invalid arguments → `tools.rs`, `tools.wasm`;
//! 3. [`initial`] + [`coverage`] — seeded, referentially consistent initial
//!    state, in which a few records meet each write tool's preconditions →
//!    `initial_state.json`;
//! 4. [`graph`] — the tool graph → `tool_graph.json`;
//! 5. to 7. [`tasks`] — goal-directed walks merged into multi-requirement
//!    DAGs with reasoning nodes, executed in the sandbox for the gold final
//!    state, and phrased as user instructions → `tasks.jsonl`;
//! 8. verification (`verify_tasks`) — gold replay reaches S* on every
//!    replay, doing nothing scores 0, a random policy's success is measured
//!    and tasks it solves easily are dropped, duplicates are dropped →
//!    `report.md`.
//!
//! Docs with annotations synthesize offline, by rule. Plain docs (an API
//! reference without annotations) go through [`llm`]: a model annotates them,
//! with parse, consistency and sandbox-validation errors fed back; with a
//! model configured, instructions are also rewritten in natural language.

pub mod codegen;
pub mod compile;
pub mod coverage;
pub mod doc;
pub mod domain_dir;
pub mod graph;
pub mod initial;
pub mod llm;
pub mod tasks;
pub mod validate;
pub mod values;

use anyhow::{Context, Result, bail};
use doc::DomainDoc;
use domain_dir::{DOC_FILE, GRAPH_FILE, REPORT_FILE, SOURCE_FILE, STRUCTURE_FILE};
use forge_runtime::bundle::{Bundle, MANIFEST_FILE, Manifest};
use forge_runtime::episode::{EpisodeSettings, run_episode};
use forge_runtime::policy::{RandomPolicy, ScriptedUser};
use forge_runtime::verify::VerifyRules;
use forge_runtime::{Environment, Sandbox, State, Task};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Lower-case hex.
pub(crate) fn canonical_hex(bytes: &[u8]) -> String {
    forge_runtime::canonical::hex(bytes)
}

/// Synthesis settings.
#[derive(Debug, Clone, Serialize)]
pub struct SynthConfig {
    pub seed: u64,
    /// Tasks to keep per domain.
    pub tasks: usize,
    /// Random-policy episodes per task in verification.
    pub random_trials: u64,
    /// Tasks the random policy solves in at least this share of trials are dropped.
    pub random_drop_rate: f64,
    /// Most requirements per task (at least 1). The number drawn for a task
    /// (1–5: 20% one, 35% two, 25% three, 15% four, 5% five) is capped at
    /// this; the draws stay the same, so the default (5, no cap) gives the
    /// bundles it always gave. 1 gives single-requirement tasks, e.g. for a
    /// smoke run of training. Recorded in the manifest's provenance only
    /// when it is not the default, for the same reason.
    #[serde(skip_serializing_if = "is_default_max_requirements")]
    pub max_requirements: usize,
}

/// The most requirements a task can have, and [`SynthConfig`]'s default.
pub const MAX_REQUIREMENTS: usize = 5;

fn is_default_max_requirements(max: &usize) -> bool {
    *max == MAX_REQUIREMENTS
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            tasks: 100,
            random_trials: 4,
            random_drop_rate: 0.5,
            max_requirements: MAX_REQUIREMENTS,
        }
    }
}

/// Per-domain numbers for the report and the CLI table.
#[derive(Debug, Clone, Serialize)]
pub struct DomainReport {
    pub domain: String,
    pub tools: usize,
    pub graph_edges: usize,
    pub tasks: usize,
    pub attempts: usize,
    pub dropped_failed: usize,
    pub dropped_duplicate: usize,
    pub dropped_random: usize,
    /// Tasks drawn beyond `tasks`, as a reserve for those verification
    /// drops, and not needed.
    pub reserve_unused: usize,
    pub mean_tool_calls: f64,
    pub max_tool_calls: usize,
    pub mean_dag_depth: f64,
    pub mean_requirements: f64,
    pub write_share: f64,
    /// The random policy's success over the kept tasks; not measured with
    /// `random_trials` 0.
    pub random_success: Option<f64>,
    pub gold_success: f64,
    /// Instructions the model rewrote; the others kept their template (a
    /// rewrite that is not [`llm::faithful`] is not taken). None without a model.
    pub instructions_rewritten: Option<usize>,
}

/// What became of one domain: its report, or why it was rejected.
pub type DomainOutcome = std::result::Result<DomainReport, (String, anyhow::Error)>;

/// Where [`synthesize`] is, for a progress display.
pub enum Progress<'a> {
    /// The domain's tasks are being generated and verified (its tools
    /// compiled, and annotated by the model where it was plain).
    Synthesizing(&'a str),
    /// The domain is done with.
    Done(&'a DomainOutcome),
}

/// The model synthesis may use, and how many answers it may take per doc.
pub struct Llm<'a> {
    pub client: &'a forge_llm::ChatClient,
    pub rounds: usize,
}

/// Synthesizes every doc into `out/<domain>/`. Tool crates of all docs are
/// compiled in one cargo run. Plain docs need `llm`. A domain that fails (a
/// tool that fails validation, a model that gives no valid doc) is rejected
/// with its reason and the others go on. `progress` hears each domain begun
/// and finished.
pub fn synthesize(
    docs: &[llm::AnyDoc],
    config: &SynthConfig,
    out: &Path,
    compiler: &compile::Compiler,
    sandbox: &Sandbox,
    model: Option<&Llm<'_>>,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<DomainOutcome>> {
    if config.max_requirements == 0 {
        bail!("max_requirements must be at least 1: a task needs a requirement");
    }
    let mut names = BTreeSet::new();
    if let Some(twice) = docs
        .iter()
        .map(llm::AnyDoc::name)
        .find(|name| !names.insert(*name))
    {
        bail!("two docs name the domain `{twice}`: each bundle is named by its domain");
    }
    // Once the endpoint fails (after its retries), the domains still to
    // ask it of are skipped rather than each made to fail the same way.
    let mut failed_on: Option<String> = None;
    let skipped = |domain: &str| anyhow::anyhow!("not asked: the endpoint failed on `{domain}`");
    // Stage 1 for plain docs: the model annotates them, in some of its
    // answers.
    let mut annotated: Vec<std::result::Result<(DomainDoc, usize), anyhow::Error>> = Vec::new();
    for doc in docs {
        annotated.push(match (doc, model, &failed_on) {
            (llm::AnyDoc::Annotated(doc), ..) => Ok((doc.clone(), 0)),
            (llm::AnyDoc::Plain(_), None, _) => Err(anyhow::anyhow!("the doc has no annotations (collections, tool kinds); pass --llm-url and --model to synthesize it with a model")),
            (llm::AnyDoc::Plain(_), Some(_), Some(domain)) => Err(skipped(domain)),
            (llm::AnyDoc::Plain(plain), Some(model), None) => {
                let mut annotator = llm::Annotator::new(model.client, plain);
                let annotation = annotator.annotate(model.rounds);
                if annotation.as_ref().is_err_and(from_endpoint) {
                    failed_on = Some(plain.domain.name.clone());
                }
                annotation.map_err(|err| {
                    let Some(report) = annotator.rejection_report(&err) else {
                        return err;
                    };
                    match report_rejection(&out.join(&plain.domain.name), &report) {
                        Ok(Some(report)) => err.context(format!(
                            "the model's answers are in {}",
                            report.display()
                        )),
                        Ok(None) => err,
                        Err(unwritten) => err.context(format!(
                            "its report could not be written ({unwritten:#})"
                        )),
                    }
                })
            }
        });
    }
    let ready: Vec<&DomainDoc> = annotated
        .iter()
        .filter_map(|doc| doc.as_ref().ok().map(|(doc, _)| doc))
        .collect();
    let sources: Vec<compile::GuestSource> =
        ready.iter().map(|doc| source(doc)).collect::<Result<_>>()?;
    let (components, _cached) = compiler
        .compile(&sources)
        .context("compiling the generated tools")?;
    let mut components = components.into_iter();
    let mut outcomes = Vec::new();
    for (given, doc) in docs.iter().zip(annotated) {
        let outcome = match (doc, &failed_on) {
            (Err(err), _) => Err((given.name().to_owned(), err)),
            // Its instructions would be rewritten by the model.
            (Ok((doc, _)), Some(domain)) if model.is_some() => {
                Err((doc.domain.name.clone(), skipped(domain)))
            }
            (Ok((doc, answers)), _) => {
                let wasm = components.next().expect("one component per annotated doc");
                progress(Progress::Synthesizing(&doc.domain.name));
                let first = synthesize_domain(
                    &doc,
                    &source(&doc)?,
                    wasm,
                    config,
                    &out.join(&doc.domain.name),
                    sandbox,
                    model,
                );
                match (first, given, model) {
                    (Err(err), llm::AnyDoc::Plain(plain), Some(model)) if !from_endpoint(&err) => {
                        let rejected = Rejected {
                            doc: &doc,
                            error: err,
                            answers_left: model.rounds.saturating_sub(answers),
                        };
                        repair(plain, rejected, config, out, compiler, sandbox, model)
                    }
                    (result, _, _) => result,
                }
                .map_err(|err| (doc.domain.name.clone(), err))
            }
        };
        if let Err((domain, err)) = &outcome
            && failed_on.is_none()
            && from_endpoint(err)
        {
            failed_on = Some(domain.clone());
        }
        progress(Progress::Done(&outcome));
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Writes `report` as the `report.md` of the rejected domain in `dir`, and
/// says where; not where a bundle made before is, which a rejection never
/// replaces.
fn report_rejection(dir: &Path, report: &str) -> Result<Option<PathBuf>> {
    if dir.join(MANIFEST_FILE).is_file() {
        return Ok(None);
    }
    let staged = domain_dir::stage(dir)?;
    let written = staged.path().join(REPORT_FILE);
    std::fs::write(&written, report).with_context(|| format!("writing {}", written.display()))?;
    domain_dir::replace(dir, staged)?;
    Ok(Some(dir.join(REPORT_FILE)))
}

fn source(doc: &DomainDoc) -> Result<compile::GuestSource> {
    Ok(compile::GuestSource {
        package: codegen::package_name(doc),
        cargo_toml: codegen::cargo_toml(doc),
        lib_rs: codegen::lib_rs(doc)?,
    })
}

/// Whether `err` is the endpoint's failure (unreachable, refusing, too
/// slow) rather than a rejection of the model's doc: feeding it back as a
/// problem with the doc would only spend answers.
fn from_endpoint(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.is::<forge_llm::ChatError>())
}

/// A model's doc whose environment was rejected, and how many more answers
/// the model may give for its domain.
struct Rejected<'a> {
    doc: &'a DomainDoc,
    error: anyhow::Error,
    answers_left: usize,
}

/// The LLM path's repair loop: the model sees why its doc's environment was
/// rejected (tool validation, task generation) and tries again, within the
/// answers its rounds leave.
fn repair(
    plain: &llm::PlainDoc,
    rejected: Rejected<'_>,
    config: &SynthConfig,
    out: &Path,
    compiler: &compile::Compiler,
    sandbox: &Sandbox,
    model: &Llm<'_>,
) -> Result<DomainReport> {
    let Rejected {
        doc: rejected,
        mut error,
        answers_left,
    } = rejected;
    let spent = |error: anyhow::Error| {
        error.context(format!(
            "no environment passed in {} (--llm-rounds)",
            llm::models_answers(model.rounds)
        ))
    };
    if answers_left == 0 {
        return Err(spent(error));
    }
    let mut annotator = llm::Annotator::new(model.client, plain);
    annotator.replay_answer(&serde_json::to_string(rejected)?);
    annotator.feedback(&format!(
        "The environment built from that doc was rejected: {error:#}"
    ));
    for _ in 0..answers_left {
        // An invalid answer is fed back inside `annotate`.
        let doc = match annotator.annotate(1) {
            Ok((doc, _)) => doc,
            Err(err) if from_endpoint(&err) => return Err(err),
            Err(err) => {
                error = err;
                continue;
            }
        };
        let source = source(&doc)?;
        let (mut wasm, _) = compiler.compile(std::slice::from_ref(&source))?;
        match synthesize_domain(
            &doc,
            &source,
            wasm.remove(0),
            config,
            &out.join(&doc.domain.name),
            sandbox,
            Some(model),
        ) {
            Ok(report) => return Ok(report),
            Err(err) if from_endpoint(&err) => return Err(err),
            Err(err) => {
                annotator.feedback(&format!(
                    "The environment built from that doc was rejected: {err:#}"
                ));
                error = err;
            }
        }
    }
    Err(spent(error))
}

/// Synthesizes one domain into `dir`, which it replaces once the outcome is
/// known: a bundle, or a rejection with its report. A failure without a
/// report (an I/O error; an endpoint failing) leaves `dir` as it was, and
/// so does a rejection where `dir` holds a bundle (`--force`): a doc that
/// no longer makes one does not cost the bundle it made before.
fn synthesize_domain(
    doc: &DomainDoc,
    source: &compile::GuestSource,
    wasm: Vec<u8>,
    config: &SynthConfig,
    dir: &Path,
    sandbox: &Sandbox,
    model: Option<&Llm<'_>>,
) -> Result<DomainReport> {
    let staged = domain_dir::stage(dir)?;
    // A rejection's report takes the place of no bundle.
    let report_at = (!dir.join(MANIFEST_FILE).is_file()).then(|| dir.join(REPORT_FILE));
    let outcome = write_domain(
        doc,
        source,
        wasm,
        config,
        staged.path(),
        report_at.as_deref(),
        sandbox,
        model,
    );
    if (outcome.is_ok() || (report_at.is_some() && staged.path().join(REPORT_FILE).is_file()))
        && let Err(err) = domain_dir::replace(dir, staged)
    {
        // A rejection keeps its reason, which the model's repair reads.
        return Err(match outcome {
            Ok(_) => err,
            Err(rejected) => rejected.context(format!(
                "its report could not be moved into place ({err:#})"
            )),
        });
    }
    outcome
}

/// The stages of one domain, writing its files in `staged`; a rejection
/// names its report where it will be (`report_at`), if it is to be kept.
#[allow(clippy::too_many_arguments)]
fn write_domain(
    doc: &DomainDoc,
    source: &compile::GuestSource,
    wasm: Vec<u8>,
    config: &SynthConfig,
    staged: &Path,
    report_at: Option<&Path>,
    sandbox: &Sandbox,
    model: Option<&Llm<'_>>,
) -> Result<DomainReport> {
    let see_report = match report_at {
        Some(report) => format!(" (see {})", report.display()),
        None => String::new(),
    };
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(staged.join(name), bytes)
            .with_context(|| format!("writing {}", staged.join(name).display()))
    };
    write(DOC_FILE, &pretty(doc)?)?;
    write(
        STRUCTURE_FILE,
        &pretty(
            &json!({"domain": doc.domain, "collections": doc.collections, "generation_order": doc.generation_order()?}),
        )?,
    )?;
    write(SOURCE_FILE, source.lib_rs.as_bytes())?;

    let component = sandbox
        .load(&wasm)
        .context("loading the generated component")?;
    let initial_json = initial::initial_state(doc, config.seed)?;
    let initial = State::from_json(&initial_json)?;
    let checks = validate::validate(doc, &component, &initial, config.seed);
    let failed: Vec<String> = checks
        .iter()
        .filter(|check| !check.problems.is_empty())
        .map(|check| format!("`{}`: {}", check.tool, check.problems.join("; ")))
        .collect();
    if !failed.is_empty() {
        write(
            REPORT_FILE,
            format!(
                "# {} — rejected\n\nTool validation failed:\n\n- {}\n",
                doc.domain.name,
                failed.join("\n- ")
            )
            .as_bytes(),
        )?;
        bail!("tool validation failed{see_report}: {}", failed.join("; "));
    }
    let graph = graph::build(doc);
    write(GRAPH_FILE, &pretty(&graph)?)?;

    let generator =
        tasks::TaskGenerator::new(doc, &component, initial.clone(), config.max_requirements);
    let mut kept: Vec<tasks::GeneratedTask> = Vec::new();
    let mut seen = BTreeSet::new();
    let (mut attempts, mut failed, mut duplicate) = (0, 0, 0);
    // Verification drops some tasks (those the random policy solves): draw a
    // fifth more, keep the first `config.tasks` that pass.
    let wanted = config.tasks.saturating_add(config.tasks.div_ceil(5));
    let max_attempts = wanted.saturating_mul(30);
    while kept.len() < wanted && attempts < max_attempts {
        let seed = forge_runtime::episode_seed(config.seed, &doc.domain.name, attempts as u64);
        attempts += 1;
        let Some(mut generated) = generator.generate(seed) else {
            failed += 1;
            continue;
        };
        if !seen.insert(identity(&generated.task)) {
            duplicate += 1;
            continue;
        }
        generated.task.id = format!("{}-{:04}", doc.domain.name, kept.len() + 1);
        kept.push(generated);
    }

    let manifest = Manifest {
        name: doc.domain.name.clone(),
        description: doc.domain.description.clone(),
        // Answers are often small numbers (counts): they must be said as such.
        verify: VerifyRules {
            whole_numbers: true,
            ..VerifyRules::default()
        },
        provenance: Some(json!({
            "synthesized_by": match model {
                Some(model) => format!("forge synth (model {})", model.client.config().model),
                None => "forge synth (rule-based)".to_owned(),
            },
            "config": config,
            "doc_sha256": forge_runtime::canonical::sha256_hex(&serde_json::to_value(doc)?),
        })),
        hashes: None,
        check_arguments: true,
        sync: false,
        user_guidelines: None,
        splits: Default::default(),
        ending_tools: Vec::new(),
    };
    let tasks: Vec<Task> = kept.into_iter().map(|generated| generated.task).collect();
    let bundle = Bundle {
        manifest,
        wasm: wasm.into(),
        initial_state: initial_json,
        tasks,
    };
    let (mut bundle, verification) = verify_tasks(bundle, sandbox, config)?;
    if bundle.tasks.is_empty() {
        // An environment without a task trains and measures nothing.
        let why = format!(
            "no task survived: of {attempts} attempts, {failed} walks led nowhere or failed, \
             {duplicate} were duplicates and {} were solved too easily by the random policy",
            verification.dropped_random
        );
        write(
            REPORT_FILE,
            format!("# {} — rejected\n\n{why}.\n", doc.domain.name).as_bytes(),
        )?;
        bail!("{why}{see_report}");
    }
    let instructions_rewritten = match model
        .map(|model| llm::refine_instructions(model.client, &mut bundle.tasks))
        .transpose()
    {
        Ok(rewritten) => rewritten,
        Err(err) => {
            // An environment made before stays in place: the endpoint's
            // failure says nothing against it.
            let Some(report) = report_at else {
                return Err(err);
            };
            // The doc is sound (its tasks were made and verified): what the
            // model annotated is kept for a synthesis without it.
            write(
                REPORT_FILE,
                format!(
                    "# {} — rejected\n\nThe endpoint failed while rewriting the task \
                     instructions: {err:#}.\n\n`{DOC_FILE}` holds the doc the environment was \
                     made from: `forge synth {}` makes it again without the model (its \
                     instructions as templates).\n",
                    doc.domain.name,
                    report.with_file_name(DOC_FILE).display()
                )
                .as_bytes(),
            )?;
            return Err(err.context(format!(
                "rewriting the instructions (see {})",
                report.display()
            )));
        }
    };
    bundle.write_dir(staged)?;

    let tasks = &bundle.tasks;
    let stat = |name: &str| {
        tasks
            .iter()
            .filter_map(|task| task.stats.as_ref()?.get(name)?.as_f64())
            .collect::<Vec<f64>>()
    };
    let mean = |values: Vec<f64>| {
        if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        }
    };
    let report = DomainReport {
        domain: doc.domain.name.clone(),
        tools: doc.tools.len(),
        graph_edges: graph.edges.len(),
        tasks: tasks.len(),
        attempts,
        dropped_failed: failed,
        dropped_duplicate: duplicate,
        dropped_random: verification.dropped_random,
        reserve_unused: verification.reserve_unused,
        mean_tool_calls: mean(stat("tool_calls")),
        max_tool_calls: stat("tool_calls").into_iter().fold(0.0, f64::max) as usize,
        mean_dag_depth: mean(stat("dag_depth")),
        mean_requirements: mean(stat("requirements")),
        write_share: mean(stat("write_share")),
        random_success: verification.random_success,
        gold_success: verification.gold_success,
        instructions_rewritten,
    };
    write(
        REPORT_FILE,
        markdown_report(doc, &report, &checks).as_bytes(),
    )?;
    Ok(report)
}

struct Verification {
    dropped_random: usize,
    reserve_unused: usize,
    random_success: Option<f64>,
    gold_success: f64,
}

/// What makes two tasks the same: the same calls, answers and final state,
/// whatever the order the instruction asks for them in (an agent that does
/// one does the other).
fn identity(task: &Task) -> String {
    let mut calls: Vec<String> = task
        .gold_actions
        .iter()
        .map(|call| forge_runtime::canonical::to_string(&json!(call)))
        .collect();
    calls.sort_unstable();
    let mut outputs = task.required_outputs.clone();
    outputs.sort_unstable();
    forge_runtime::canonical::to_string(&json!([calls, outputs, task.gold_final_state_sha256]))
}

/// Stage 8: loads the bundle (which replays every task's gold actions and
/// checks the recorded S* hash), replays them once more for stability, checks
/// that doing nothing fails, measures a random policy and drops the tasks it
/// solves easily.
fn verify_tasks(
    mut bundle: Bundle,
    sandbox: &Sandbox,
    config: &SynthConfig,
) -> Result<(Bundle, Verification)> {
    // Verification replays every drawn task; the report counts those kept.
    let env = Environment::load(sandbox, bundle.clone()).context("verifying the tasks")?;
    let again = Environment::load(sandbox, bundle.clone())?;
    let mut keep = Vec::new();
    let mut rates = Vec::new();
    let mut gold_successes = 0usize;
    for (task, replayed) in env.tasks().iter().zip(again.tasks()) {
        if task.gold.sha256() != replayed.gold.sha256() {
            bail!(
                "task `{}`: two gold replays reached different states",
                task.task.id
            );
        }
        let settings = EpisodeSettings::default();
        let mut gold = forge_runtime::policy::GoldPolicy::new(&task.task);
        let record = run_episode(
            &env,
            task,
            "gold",
            &mut gold,
            &mut ScriptedUser::new(&task.task),
            None,
            settings,
        )?;
        gold_successes += usize::from(record.verdict.reward >= 1.0);
        let noop = forge_runtime::verify::verify(
            &bundle.manifest.verify,
            &task.initial,
            &task.gold,
            &task.initial,
            &task.task.required_outputs,
            &[],
            forge_runtime::verify::Checks::default(),
        );
        if noop.reward > 0.0 {
            bail!("task `{}`: doing nothing already succeeds", task.task.id);
        }
        let mut solved = 0;
        for trial in 0..config.random_trials {
            let seed = forge_runtime::episode_seed(config.seed, &task.task.id, trial);
            let mut policy = RandomPolicy::new(seed);
            let record = run_episode(
                &env,
                task,
                "random",
                &mut policy,
                &mut ScriptedUser::new(&task.task),
                None,
                EpisodeSettings { seed, ..settings },
            )?;
            solved += u64::from(record.verdict.reward >= 1.0);
        }
        let rate = solved as f64 / config.random_trials.max(1) as f64;
        keep.push(rate < config.random_drop_rate || config.random_trials == 0);
        rates.push(rate);
    }
    let before = bundle.tasks.len();
    let passed = keep.iter().filter(|kept| **kept).count();
    let kept_rates: Vec<f64> = rates
        .iter()
        .zip(&keep)
        .filter(|(_, kept)| **kept)
        .map(|(rate, _)| *rate)
        .take(config.tasks)
        .collect();
    let mut index = 0;
    bundle.tasks.retain(|_| {
        index += 1;
        keep[index - 1]
    });
    bundle.tasks.truncate(config.tasks);
    for (position, task) in bundle.tasks.iter_mut().enumerate() {
        let domain = &bundle.manifest.name;
        task.id = format!("{domain}-{:04}", position + 1);
    }
    Ok((
        bundle,
        Verification {
            dropped_random: before - passed,
            reserve_unused: passed.saturating_sub(config.tasks),
            random_success: (config.random_trials > 0 && !kept_rates.is_empty())
                .then(|| kept_rates.iter().sum::<f64>() / kept_rates.len() as f64),
            gold_success: gold_successes as f64 / before.max(1) as f64,
        },
    ))
}

fn markdown_report(
    doc: &DomainDoc,
    report: &DomainReport,
    checks: &[validate::ToolCheck],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} — synthesis report\n\n{}\n",
        doc.domain.name, doc.domain.description
    );
    let _ = writeln!(
        out,
        "## Tools ({}), validated in the sandbox\n\n| tool | kind | valid calls | succeeded |\n| --- | --- | --- | --- |",
        report.tools
    );
    for (tool, check) in doc.tools.iter().zip(checks) {
        let _ = writeln!(
            out,
            "| `{}` | {:?} | {} | {} |",
            tool.name, tool.kind, check.valid_calls, check.succeeded
        );
    }
    let _ = writeln!(out, "\nTool graph: {} edges.\n", report.graph_edges);
    let _ = writeln!(
        out,
        "## Tasks\n\n{} kept from {} attempts: {} walks led nowhere or failed, {} duplicates, {} solved too easily by the random policy, {} drawn in reserve and not needed.\n",
        report.tasks,
        report.attempts,
        report.dropped_failed,
        report.dropped_duplicate,
        report.dropped_random,
        report.reserve_unused
    );
    let _ = writeln!(out, "| measure | value |\n| --- | --- |");
    for (name, value) in [
        (
            "tool calls per task, mean",
            format!("{:.2}", report.mean_tool_calls),
        ),
        (
            "tool calls per task, max",
            report.max_tool_calls.to_string(),
        ),
        ("DAG depth, mean", format!("{:.2}", report.mean_dag_depth)),
        (
            "requirements per task, mean",
            format!("{:.2}", report.mean_requirements),
        ),
        ("share of write calls", format!("{:.2}", report.write_share)),
        ("gold policy success", format!("{:.3}", report.gold_success)),
        (
            "random policy success",
            report
                .random_success
                .map_or_else(|| "not measured".to_owned(), |rate| format!("{rate:.3}")),
        ),
    ] {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    if let Some(rewritten) = report.instructions_rewritten {
        let kept = match rewritten < report.tasks {
            true => llm::TEMPLATES_KEPT,
            false => "",
        };
        let _ = writeln!(
            out,
            "| instructions rewritten by the model | {rewritten} of {}{kept} |",
            report.tasks
        );
    }
    out
}

fn pretty<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Reads docs, naming the file of any error.
pub fn read_docs(paths: &[&Path]) -> Result<Vec<DomainDoc>> {
    paths.iter().map(|path| DomainDoc::read(path)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_max_requirements_is_not_recorded() {
        // Bundles synthesized with the default keep the provenance they had.
        let config = serde_json::to_value(SynthConfig::default()).unwrap();
        assert_eq!(
            config,
            json!({"seed": 0, "tasks": 100, "random_trials": 4, "random_drop_rate": 0.5})
        );
        let capped = SynthConfig {
            max_requirements: 1,
            ..SynthConfig::default()
        };
        assert_eq!(serde_json::to_value(capped).unwrap()["max_requirements"], 1);
    }

    #[test]
    fn tasks_asking_the_same_in_another_order_are_one() {
        let task = |calls: [&str; 2], output: &str| {
            serde_json::from_value::<Task>(json!({
                "id": "t",
                "instruction": format!("Do {} then {}.", calls[0], calls[1]),
                "gold_actions": calls.map(|name| json!({"name": name, "arguments": {"id": 1}})),
                "required_outputs": [output, "7"],
                "gold_final_state_sha256": "ab",
            }))
            .unwrap()
        };
        let first = task(["freeze", "rename"], "3");
        assert_eq!(identity(&first), identity(&task(["rename", "freeze"], "3")));
        assert_ne!(identity(&first), identity(&task(["rename", "freeze"], "4")));
        assert_ne!(identity(&first), identity(&task(["rename", "close"], "3")));
        let elsewhere = Task {
            gold_final_state_sha256: Some("cd".to_owned()),
            ..first.clone()
        };
        assert_ne!(identity(&first), identity(&elsewhere));
    }

    #[test]
    fn zero_max_requirements_is_refused() {
        let root = std::env::temp_dir().join(format!("forge-synth-zero-{}", std::process::id()));
        let compiler = compile::Compiler::new(Some(root.join("synth"))).unwrap();
        let sandbox = Sandbox::new(Default::default(), Some(root.join("components"))).unwrap();
        let config = SynthConfig {
            max_requirements: 0,
            ..SynthConfig::default()
        };
        let err = synthesize(&[], &config, &root, &compiler, &sandbox, None, |_| {})
            .expect_err("refused");
        let _ = std::fs::remove_dir_all(&root);
        assert!(
            err.to_string()
                .contains("max_requirements must be at least 1"),
            "{err}"
        );
    }
}
