//! `forge train`: SFT then ERPO on environments, into a run directory.

use crate::commands::{hold, holds_files, leave_as_found, non_empty};
use crate::envs::Source;
use crate::flags::{self, at_least_one_u64};
use crate::plot::{self, Curve, Panel};
use crate::{output, shutdown};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use forge_runtime::{Bundle, Environment, Sandbox};
use forge_suites::Suite;
use forge_synth::SynthConfig;
use forge_synth::compile::Compiler;
use forge_synth::llm::AnyDoc;
use forge_trainer::accelerator::Accelerator;
use forge_trainer::train::config::TrainConfig;
use forge_trainer::train::config::UserKind;
use forge_trainer::train::{
    CONFIG_FILE, METRICS_FILE, Metrics, Observer, RunSpec, check_resumable, own_weights_to_resume,
    read_metrics, train,
};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod config;

/// The tiny domain of the smoke run: one call per task, short prompts.
const SMOKE_DOC: &str = include_str!("../../../env-templates/train/lamps.toml");

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The run directory: config, metrics, checkpoints, the final model, curves.
    /// Only `--print-config` goes without one (with one and `--resume`, it
    /// prints the run's saved config).
    #[arg(long, value_name = "DIR", required_unless_present = "print_config")]
    run_dir: Option<PathBuf>,
    /// A TOML file of hyper-parameters (see `--print-config` for every key
    /// and its default); keys it leaves out keep the preset's value. Repeat
    /// it to layer files, later ones winning.
    #[arg(long, value_name = "FILE")]
    config: Vec<PathBuf>,
    /// The settings a config file starts from (not with --resume: a resumed
    /// run keeps its own).
    #[arg(long, value_enum, default_value_t = Preset::Default, conflicts_with = "resume")]
    preset: Preset,
    /// Environment bundles to train on (repeatable); by default the smoke
    /// preset synthesizes its tiny lamp domain, the default preset the shipped
    /// domain docs.
    #[arg(long, value_name = "DIR")]
    env: Vec<PathBuf>,
    /// Benchmark suites to train on (repeatable, beside any `--env`), read
    /// from `--data`: tau-bench/retail, tau-bench/airline, tau2-bench/mock,
    /// tau2-bench/airline, tau2-bench/retail, tau2-bench/telecom or
    /// tau2-bench/banking_knowledge. `tasks.train_split` and
    /// `tasks.heldout_split` choose among their splits.
    #[arg(long, value_name = "SUITE", requires = "data")]
    suite: Vec<Suite>,
    /// The benchmark data for `--suite`, laid out like the benchmarks'
    /// repositories (as for `forge run`).
    #[arg(long, value_name = "DIR", requires = "suite")]
    data: Option<PathBuf>,
    /// Which stages to run: SFT then RL, or one of them. `--stage rl` starts
    /// from `model.init`, e.g. the `final/` directory of a `--stage sft` run.
    /// Not with --resume: a resumed run keeps its own.
    #[arg(long, value_enum, default_value_t = Stage::All, conflicts_with = "resume")]
    stage: Stage,
    /// Continue the run in `--run-dir` from its latest checkpoint (from its
    /// start, if it stopped before one), with the config it was started with.
    /// Ctrl-C or SIGTERM stops a run after the step under way with a
    /// checkpoint to continue from.
    #[arg(long, requires = "run_dir")]
    resume: bool,
    /// Stop after this many more steps, counted from where the run starts
    /// or resumes (with a checkpoint to `--resume` from): long runs in
    /// bounded jobs.
    #[arg(long, value_name = "N", value_parser = at_least_one_u64)]
    max_steps: Option<u64>,
    /// Stop once the next step and then an evaluation, if they took as long
    /// as the last ones (of the step's stage; resumed, as recorded), would
    /// end after this many seconds, with a checkpoint to `--resume` from
    /// and that evaluation: runs that must fit a time slot.
    #[arg(long, value_name = "SECS", value_parser = flags::time_limit)]
    time_limit: Option<Duration>,
    /// Where to train: the CPU, the first CUDA GPU (a forge built with
    /// `--features cuda`), or a WebGPU adapter (`--features wgpu`).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// Print the effective config as TOML and exit (with `--resume`, the
    /// saved config of the run in `--run-dir`).
    #[arg(
        long,
        conflicts_with_all = ["env", "suite", "data", "max_steps", "time_limit", "device", "json"]
    )]
    print_config: bool,
    /// No progress bar; end with a JSON summary line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Preset {
    /// SmolLM2-135M-Instruct on the shipped domains (a GPU run).
    Default,
    /// A tiny model on a tiny synthesized domain: minutes on a CPU.
    Smoke,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stage {
    /// Cold-start SFT, then RL.
    All,
    /// SFT alone (`rl.steps = 0`).
    Sft,
    /// RL alone (`sft.steps = 0`).
    Rl,
}

/// Where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Device {
    /// The CPU (burn's ndarray backend).
    Cpu,
    /// The first CUDA GPU (a forge built with `--features cuda`).
    Cuda,
    /// A WebGPU adapter: another GPU, or a CPU through a software Vulkan
    /// driver such as lavapipe (a forge built with `--features wgpu`).
    Wgpu,
}

impl Device {
    pub fn accelerator(self) -> Accelerator {
        match self {
            Device::Cpu => Accelerator::Cpu,
            Device::Cuda => Accelerator::Cuda,
            Device::Wgpu => Accelerator::Wgpu,
        }
    }
}

impl TrainArgs {
    fn run_dir(&self) -> &Path {
        self.run_dir
            .as_deref()
            .expect("clap requires --run-dir unless --print-config")
    }
}

const ENVS_FILE: &str = "envs.json";
/// Where a run synthesizes its environments.
const ENVS_DIR: &str = "envs";

/// `config` as TOML, with a key left unset (which TOML cannot hold) as a
/// comment saying what unset means, just below its table's header (where
/// no multi-line string can be): `--print-config` lists every key.
fn config_text(config: &TrainConfig) -> Result<String> {
    let text = toml::to_string(config)?;
    if config.model.tiny_context.is_some() {
        return Ok(text);
    }
    let header = "[model]\n";
    let at = text
        .find(header)
        .context("the config has a [model] table")?
        + header.len();
    let unset =
        "# tiny_context = 2048  # the most tokens the tiny model reads; unset, any number\n";
    Ok(format!("{}{unset}{}", &text[..at], &text[at..]))
}

pub fn run(args: TrainArgs) -> Result<ExitCode> {
    let config = effective_config(&args)?;
    if args.print_config {
        if args.run_dir.is_some() && !args.resume {
            // It would print the preset's config, not the run's.
            bail!(
                "--print-config prints a run's saved config with --run-dir and --resume; \
                 without --resume, leave out --run-dir"
            );
        }
        print!("{}", config_text(&config)?);
        return Ok(ExitCode::SUCCESS);
    }
    let run_dir = args.run_dir();
    let stop = Stop::listen()?;
    if args.resume {
        let _held = hold(run_dir)?;
        return stopped_before_begun(start(&args, config, &stop), run_dir);
    }
    let existed = run_dir.exists();
    let refuse_if_taken = || {
        if run_dir.join(CONFIG_FILE).exists() {
            bail!(
                "{} already holds a run: pass --resume to continue it, or choose another --run-dir",
                run_dir.display()
            );
        }
        if holds_files(run_dir)? && unfinished_synthesis(run_dir)?.is_none() {
            bail!(
                "{} is not empty and holds no run: a new run needs an empty or new --run-dir",
                run_dir.display()
            );
        }
        Ok(())
    };
    refuse_if_taken()?;
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let _held = hold(run_dir)?;
    // Another process may have begun a run here between the look and the lock.
    refuse_if_taken()?;
    if let Some(staged) = unfinished_synthesis(run_dir)? {
        eprintln!(
            "note: {} holds only environments a run quit before it made them: they are removed",
            run_dir.display()
        );
        for dir in staged {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::remove_dir(run_dir.join(ENVS_DIR))
            .with_context(|| format!("removing {}", run_dir.join(ENVS_DIR).display()))?;
    }
    let outcome = start(&args, config, &stop);
    // A run that failed, or was stopped, before recording anything (a
    // setting the backend refuses, a model that does not load, Ctrl-C while
    // its environments are made) leaves nothing behind: a half-made
    // directory could be neither resumed nor begun again.
    if outcome.is_err() && !recorded(run_dir) {
        leave_as_found(run_dir, existed);
    }
    stopped_before_begun(outcome, run_dir)
}

/// Weights this large (a few million parameters) take the CPU more than
/// moments a step: a tiny model's checkpoints are far smaller, the smallest
/// pretrained model's files far larger.
const PRETRAINED_BYTES: u64 = 16 << 20;

/// Whether the model at `path` (a GGUF file, or a checkpoint directory
/// with its weights) is of a pretrained model's size.
fn pretrained_sized(path: &Path) -> bool {
    let size = |path: &Path| std::fs::metadata(path).map_or(0, |meta| meta.len());
    let bytes = match std::fs::read_dir(path) {
        Ok(entries) => entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|file| file.extension().is_some_and(|ext| ext == "safetensors"))
            .map(|file| size(&file))
            .sum(),
        Err(_) => size(path),
    };
    bytes >= PRETRAINED_BYTES
}

/// Ctrl-C and SIGTERM during a run. Before it begins (its environments
/// being made, its models found) the run stops at the next point it looks
/// ([`StoppedBeforeBegun`]); once begun, the trainer stops after the step
/// under way, with a checkpoint. A second signal quits at once.
struct Stop {
    flag: Arc<AtomicBool>,
    /// The run's progress bar, once it has begun.
    begun: Arc<OnceLock<ProgressBar>>,
}

impl Stop {
    fn listen() -> Result<Self> {
        let begun = Arc::new(OnceLock::<ProgressBar>::new());
        let told = Arc::clone(&begun);
        let flag = shutdown::flag(move || match told.get() {
            Some(bar) => bar.suspend(|| {
                eprintln!(
                    "stopping once the step under way is done (an evaluation under way stops \
                     now), with a checkpoint to --resume from; press Ctrl-C again to quit at once"
                )
            }),
            None => eprintln!("stopping before the run begins; press Ctrl-C again to quit at once"),
        })
        .context("listening for Ctrl-C")?;
        Ok(Self { flag, begun })
    }

    /// The run begins, shown by `bar`, unless a signal came first.
    fn begin(&self, bar: &ProgressBar) -> Result<()> {
        if self.flag.load(Ordering::Relaxed) {
            return Err(StoppedBeforeBegun.into());
        }
        let _ = self.begun.set(bar.clone());
        Ok(())
    }
}

/// Ctrl-C or SIGTERM came before the run began.
#[derive(Debug)]
struct StoppedBeforeBegun;

impl std::fmt::Display for StoppedBeforeBegun {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("stopped before the run began")
    }
}

impl std::error::Error for StoppedBeforeBegun {}

/// `outcome`, where a run stopped before it began exits as a stopped run
/// does (with the signal's status), saying so.
fn stopped_before_begun(outcome: Result<ExitCode>, run_dir: &Path) -> Result<ExitCode> {
    match outcome {
        Err(err) if err.is::<StoppedBeforeBegun>() => {
            eprintln!("{err}: {} is left as it was", run_dir.display());
            Ok(ExitCode::from(shutdown::stopped_status()))
        }
        outcome => outcome,
    }
}

/// What a run quit at once while it made its environments (a second
/// Ctrl-C) left in `run_dir`, when that is all it holds: `envs/` with only
/// unfinished syntheses in it.
fn unfinished_synthesis(run_dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let listed = |dir: &Path| -> Result<Vec<PathBuf>> {
        Ok(std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .collect())
    };
    let envs = run_dir.join(ENVS_DIR);
    if !envs.is_dir() || listed(run_dir)? != [envs.clone()] {
        return Ok(None);
    }
    let staged = listed(&envs)?;
    // A leftover as `forge synth` takes one: a stage holding nothing but
    // what synthesis writes.
    let only_staged = staged.iter().all(|dir| {
        dir.is_dir()
            && dir
                .file_name()
                .is_some_and(forge_synth::domain_dir::is_staged)
            && forge_synth::domain_dir::holds_only_synthesis(dir)
    });
    Ok((only_staged && !staged.is_empty()).then_some(staged))
}

/// Whether the run in `run_dir` has recorded anything (its metrics).
fn recorded(run_dir: &Path) -> bool {
    non_empty(&run_dir.join(METRICS_FILE))
}

/// Trains in `args`' run directory (new and empty, or a run to resume),
/// which [`run`] has made and holds.
fn start(args: &TrainArgs, mut config: TrainConfig, stop: &Stop) -> Result<ExitCode> {
    let run_dir = args.run_dir();
    if !args.resume {
        // A remote user's model is a name at its endpoint, whatever files
        // are here.
        let local_user = config.user.kind == UserKind::Model;
        for (model, local) in [
            (&mut config.model.init, true),
            (&mut config.user.model, local_user),
        ] {
            if local && model != "tiny" {
                *model = crate::commands::model::anchored(model);
            }
        }
    }
    let sandbox = Sandbox::with_defaults()?;
    let bundles = bundles(args, &config)?;
    let envs = bundles
        .into_iter()
        .map(|(source, bundle)| source.load(&sandbox, bundle))
        .collect::<Result<Vec<_>>>()?;
    let own_weights = match args.resume {
        true => own_weights_to_resume(run_dir, &config)?,
        false => None,
    };
    let init = match config.model.init.as_str() {
        "tiny" => None,
        _ if own_weights.is_some() => None,
        name => Some(crate::commands::model::resolve(name).context("model.init")?),
    };
    let weights = init.as_deref().or(own_weights.as_deref());
    if weights.is_some_and(pretrained_sized) && args.device == Device::Cpu {
        // Said before the minutes it takes to get there: a machine short
        // of memory ends the run without a word.
        eprintln!(
            "note: training {} on the CPU, where a pretrained model's steps take minutes and can \
             need tens of GiB of memory (its place is --device cuda; `--preset smoke` trains a \
             tiny model on the CPU in minutes)",
            config.model.init
        );
    }
    let user_model = match (config.user.kind, config.user.model.as_str()) {
        (UserKind::Model, name) if name != "tiny" => {
            Some(crate::commands::model::resolve(name).context("user.model")?)
        }
        _ => None,
    };
    let mut observer = Progress::new(config.sft.steps + config.rl.steps, args.json);
    if let Err(stopped) = stop.begin(&observer.bar) {
        observer.bar.finish_and_clear();
        return Err(stopped);
    }
    if !args.resume {
        std::fs::write(run_dir.join(CONFIG_FILE), toml::to_string(&config)?)?;
    }
    let spec = RunSpec {
        config,
        dir: run_dir,
        envs: &envs,
        init: init.as_deref(),
        user_model: user_model.as_deref(),
        resume: args.resume,
        max_steps: args.max_steps.map(|steps| steps as usize),
        time_limit: args.time_limit,
        interrupt: Some(&stop.flag),
        accelerator: args.device.accelerator(),
        on_retry: Some(Arc::new(output::retry_warnings(&observer.bar))),
    };
    let summary = train(spec, &mut observer)?;
    observer.bar.finish_and_clear();
    let curves = run_dir.join("curves.svg");
    plot(&read_metrics(&run_dir.join(METRICS_FILE))?, &curves)?;
    if args.json {
        output::json_line(&serde_json::to_value(&summary)?);
    } else if !summary.complete {
        // A time limit evaluates where it stops; `--max-steps` and Ctrl-C do not.
        let evaluated = summary
            .heldout_success_after
            .map_or(String::new(), |after| {
                format!(" (held-out success there: {after:.3})")
            });
        println!(
            "stopped at step {} of {}{evaluated}; continue with `forge train --run-dir {} --resume`",
            summary.steps,
            summary.total_steps,
            run_dir.display()
        );
    } else {
        let evaluated = match summary.heldout_success_after {
            None if summary.heldout_tasks == 0 => "no task held out".to_owned(),
            None => "held-out success not measured: its evaluation was stopped (`--resume` \
                     makes it)"
                .to_owned(),
            Some(after) => {
                let before = summary
                    .heldout_success_before
                    .map_or(String::new(), |value| format!("before {value:.3}, "));
                let after_sft = summary
                    .heldout_success_after_sft
                    .map_or(String::new(), |value| format!("after SFT {value:.3}, "));
                format!(
                    "held-out success ({}): {before}{after_sft}after {after:.3}",
                    output::count(summary.heldout_tasks, "task")
                )
            }
        };
        let done = if summary.steps_run == 0 && summary.steps > 0 {
            format!("complete already: {}", output::count(summary.steps, "step"))
        } else {
            format!(
                "{} in {:.0} s",
                output::count(summary.steps_run, "step"),
                summary.seconds
            )
        };
        println!("{done}; {evaluated}");
        if summary.trained_parameters < summary.parameters {
            println!(
                "trained {} of the model's {} parameters (LoRA adapters: {})",
                summary.trained_parameters,
                summary.parameters,
                run_dir.join("final/adapter").display()
            );
        }
        println!(
            "model: {}\ncurves: {}\nmetrics: {}",
            run_dir.join("final").display(),
            curves.display(),
            run_dir.join(METRICS_FILE).display()
        );
    }
    Ok(if summary.interrupted {
        ExitCode::from(shutdown::stopped_status())
    } else {
        ExitCode::SUCCESS
    })
}

/// The preset, overlaid with the config file; on resume, the run's own config.
fn effective_config(args: &TrainArgs) -> Result<TrainConfig> {
    if args.resume {
        let saved = args.run_dir().join(CONFIG_FILE);
        if !args.config.is_empty() {
            bail!("--resume continues with the run's own {CONFIG_FILE}; drop --config");
        }
        let run_dir = args.run_dir();
        if !saved.is_file() {
            let what = match run_dir.is_dir() {
                true => format!("holds no run to resume (no {CONFIG_FILE})"),
                false if run_dir.exists() => "is not a directory".to_owned(),
                false => "does not exist".to_owned(),
            };
            bail!(
                "{} {what}: a new run goes without --resume",
                run_dir.display()
            );
        }
        let config = saved_config(run_dir).context("resuming the run")?;
        // Printed, the config is only read: a run that cannot go on still
        // has one.
        if !args.print_config {
            check_resumable(run_dir, &config).context("resuming the run")?;
        }
        return Ok(config);
    }
    let preset = match args.preset {
        Preset::Default => TrainConfig::default(),
        Preset::Smoke => TrainConfig::smoke(),
    };
    config::layered(&preset, &args.config, args.stage)
}

/// The bundles to train on: `--env` and `--suite`, or the preset's
/// synthesized domains (written under the run directory, so the run keeps
/// what it trained on). They are recorded in the run (`envs.json`) with
/// their content hashes, where `--resume` finds them again and refuses one
/// that has changed: its tasks (and so the held-out split) would no longer
/// be the run's.
fn bundles(args: &TrainArgs, config: &TrainConfig) -> Result<Vec<(Source, Bundle)>> {
    let run_dir = args.run_dir();
    let record = run_dir.join(ENVS_FILE);
    if args.resume {
        if !args.env.is_empty() || !args.suite.is_empty() {
            bail!("--resume trains on the run's own environments; drop --env and --suite");
        }
        return recorded_bundles(run_dir)
            .context("resuming the run")?
            .iter()
            .map(|recorded| recorded.read(run_dir))
            .collect();
    }
    let mut sources: Vec<Source> = args
        .env
        .iter()
        .map(|dir| Source::Dir(std::path::absolute(dir).unwrap_or_else(|_| dir.clone())))
        .collect();
    if let Some(data) = &args.data {
        let data = std::path::absolute(data).unwrap_or_else(|_| data.clone());
        sources.extend(args.suite.iter().map(|&suite| Source::Suite {
            suite,
            data: data.clone(),
        }));
    }
    if sources.is_empty() {
        sources = synthesized(args, config)?
            .into_iter()
            .map(Source::Dir)
            .collect();
    }
    let bundles = sources
        .iter()
        .map(Source::read)
        .collect::<Result<Vec<_>>>()?;
    // Named twice, an environment's tasks would be drawn twice as often, and
    // its metrics and episodes, keyed by its name, would mix two bundles.
    for (at, bundle) in bundles.iter().enumerate() {
        let name = &bundle.manifest.name;
        if let Some(twin) = bundles[..at].iter().position(|b| &b.manifest.name == name) {
            bail!(
                "{} and {} are both environment `{name}`: name each environment once",
                sources[twin],
                sources[at]
            );
        }
    }
    let absolute_run_dir = std::path::absolute(run_dir)?;
    let recorded: Vec<RecordedBundle> = sources
        .iter()
        .zip(&bundles)
        .map(|(source, bundle)| {
            let content_hash = Some(bundle.content_hash());
            match source {
                Source::Dir(dir) => RecordedBundle::Dir {
                    // Inside the run directory, relative to it: the run can move.
                    dir: dir
                        .strip_prefix(&absolute_run_dir)
                        .map_or_else(|_| dir.clone(), Path::to_owned),
                    content_hash,
                },
                Source::Suite { suite, data } => RecordedBundle::Suite {
                    suite: suite.to_string(),
                    data: data.clone(),
                    content_hash,
                },
            }
        })
        .collect();
    std::fs::write(&record, serde_json::to_string_pretty(&recorded)?)
        .with_context(|| format!("writing {}", record.display()))?;
    Ok(sources.into_iter().zip(bundles).collect())
}

/// The config the run in `run_dir` was started with, as its `config.toml`
/// saved it.
pub(crate) fn saved_config(run_dir: &Path) -> Result<TrainConfig> {
    let saved = run_dir.join(CONFIG_FILE);
    let text =
        std::fs::read_to_string(&saved).with_context(|| format!("reading {}", saved.display()))?;
    TrainConfig::from_saved(&text).with_context(|| format!("parsing {}", saved.display()))
}

/// The bundles the run in `run_dir` trains on, as its `envs.json` records them.
fn recorded_bundles(run_dir: &Path) -> Result<Vec<RecordedBundle>> {
    let record = run_dir.join(ENVS_FILE);
    let text = std::fs::read_to_string(&record)
        .with_context(|| format!("reading {}", record.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", record.display()))
}

/// The environments the run in `run_dir` trains on, as its `envs.json`
/// names them: each bundle's directory or suite, and its content hash where
/// recorded. What `forge compare` sets beside the runs' configs.
pub(crate) fn environments_trained_on(run_dir: &Path) -> Result<Vec<String>> {
    Ok(recorded_bundles(run_dir)?
        .iter()
        .map(RecordedBundle::label)
        .collect())
}

/// The bundle the run in `run_dir` trains on, as it was then, where it
/// trains on one: what `--tasks heldout:RUN_DIR` plays without `--env`.
pub(crate) fn sole_environment(run_dir: &Path) -> Result<(Source, Bundle)> {
    let recorded =
        recorded_bundles(run_dir).context("`heldout:` names a `forge train` run directory")?;
    match recorded.as_slice() {
        [one] => one.read(run_dir),
        several => bail!(
            "the run in {} trains on {} environments ({}): name the one whose held-out tasks to \
             play with --env or --suite",
            run_dir.display(),
            several.len(),
            several
                .iter()
                .map(RecordedBundle::label)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The tasks of `env` that the run in `run_dir` holds out (and never trains
/// on), as indices in the environment's order: `env` must be one the run
/// trains on, as it was then, or the split would not be the run's.
pub(crate) fn heldout_tasks(run_dir: &Path, env: &Environment) -> Result<Vec<usize>> {
    let config = saved_config(run_dir).context("`heldout:` names a `forge train` run directory")?;
    let mut hashes = Vec::new();
    for recorded in recorded_bundles(run_dir)? {
        hashes.push(match recorded {
            RecordedBundle::Dir {
                content_hash: Some(hash),
                ..
            }
            | RecordedBundle::Suite {
                content_hash: Some(hash),
                ..
            } => hash,
            recorded => recorded.read(run_dir)?.1.content_hash(),
        });
    }
    if !hashes.iter().any(|hash| hash == env.content_hash()) {
        bail!(
            "environment `{}` ({}) is not one the run in {} trains on (its: {}): its held-out \
             tasks are those of the run's own environments, as they were",
            env.name(),
            output::short_hash(env.content_hash()),
            run_dir.display(),
            hashes
                .iter()
                .map(|hash| output::short_hash(hash))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    forge_trainer::train::data::heldout_tasks(env, &config.tasks, config.seed)
}

/// A bundle a run trains on, as `envs.json` records it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum RecordedBundle {
    /// A bundle directory, relative to the run directory when it lies
    /// inside it; the content hash is absent in runs recorded before hashes
    /// were.
    Dir {
        dir: PathBuf,
        #[serde(skip_serializing_if = "Option::is_none")]
        content_hash: Option<String>,
    },
    /// A benchmark suite and its data directory.
    Suite {
        suite: String,
        data: PathBuf,
        content_hash: Option<String>,
    },
    /// The bare path of a bundle directory, as the earliest runs recorded it.
    Path(PathBuf),
}

impl RecordedBundle {
    /// The bundle as a person names it: its directory's or suite's name,
    /// and its content hash where recorded.
    fn label(&self) -> String {
        let file_name = |dir: &Path| {
            dir.file_name().map_or_else(
                || dir.display().to_string(),
                |name| name.display().to_string(),
            )
        };
        let (name, hash) = match self {
            Self::Dir { dir, content_hash } => (file_name(dir), content_hash),
            Self::Suite {
                suite,
                content_hash,
                ..
            } => (suite.clone(), content_hash),
            Self::Path(dir) => (file_name(dir), &None),
        };
        match hash {
            Some(hash) => format!("{name} ({})", output::short_hash(hash)),
            None => name,
        }
    }

    /// The bundle, as it was when the run started, and where it is read from.
    fn read(&self, run_dir: &Path) -> Result<(Source, Bundle)> {
        let (source, content_hash) = match self {
            Self::Dir { dir, content_hash } => (Source::Dir(run_dir.join(dir)), content_hash),
            Self::Path(dir) => (Source::Dir(run_dir.join(dir)), &None),
            Self::Suite {
                suite,
                data,
                content_hash,
            } => {
                let suite = suite
                    .parse()
                    .with_context(|| format!("reading {ENVS_FILE}"))?;
                (
                    Source::Suite {
                        suite,
                        data: data.clone(),
                    },
                    content_hash,
                )
            }
        };
        let bundle = source.read().map_err(|err| match &source {
            // Moved since the run started: where the run looks for it.
            Source::Dir(dir) if !dir.exists() => err.context(format!(
                "the run's {ENVS_FILE} names it: move the bundle back, or mend the path there"
            )),
            _ => err,
        })?;
        if let Some(recorded) = content_hash
            && *recorded != bundle.content_hash()
        {
            bail!(
                "environment `{}` has changed since the run started (content hash {} then, {} \
                 now): its tasks and held-out split would not be the run's, so it cannot be \
                 resumed on it",
                bundle.manifest.name,
                output::short_hash(recorded),
                output::short_hash(&bundle.content_hash())
            );
        }
        Ok((source, bundle))
    }
}

/// The preset's domains, synthesized into the run directory.
fn synthesized(args: &TrainArgs, config: &TrainConfig) -> Result<Vec<PathBuf>> {
    let (docs, synth) = match args.preset {
        Preset::Smoke => (
            vec![AnyDoc::Annotated(toml::from_str(SMOKE_DOC)?)],
            SynthConfig {
                seed: config.seed,
                // Every lamp with every verb.
                tasks: 30,
                max_requirements: 1,
                ..SynthConfig::default()
            },
        ),
        Preset::Default => (
            crate::commands::synth::shipped_docs()?,
            SynthConfig {
                seed: config.seed,
                ..SynthConfig::default()
            },
        ),
    };
    let out = std::path::absolute(args.run_dir().join(ENVS_DIR))?;
    synthesize(&docs, &synth, &out, args.json)?;
    Ok(docs.iter().map(|doc| out.join(doc.name())).collect())
}

fn synthesize(docs: &[AnyDoc], config: &SynthConfig, out: &Path, quiet: bool) -> Result<()> {
    let sandbox = Sandbox::with_defaults()?;
    let compiler = Compiler::new(None)?;
    let progress = output::progress(docs.len() as u64, quiet);
    progress.set_message("synthesizing the training environments");
    let outcomes = forge_synth::synthesize(docs, config, out, &compiler, &sandbox, None, |step| {
        if let forge_synth::Progress::Done(_) = step {
            progress.inc(1);
        }
    })?;
    progress.finish_and_clear();
    for outcome in outcomes {
        if let Err((domain, err)) = outcome {
            bail!("synthesizing `{domain}`: {err:#}");
        }
    }
    Ok(())
}

/// The progress bar: steps, with the latest loss, reward, held-out success
/// and throughput (tokens trained, and sampled in rollouts, per second).
/// Where stderr is no terminal (a job's log file), the bar cannot draw, so
/// each evaluation and checkpoint is a line there, besides the bar's place
/// every so often ([`output::progress`]).
struct Progress {
    bar: ProgressBar,
    /// Lines instead of the bar.
    log: Option<output::PlaceLog>,
    loss: Option<f64>,
    reward: Option<f64>,
    heldout: Option<f64>,
    trained_per_s: Option<f64>,
    sampled_per_s: Option<f64>,
}

impl Progress {
    fn new(total: usize, quiet: bool) -> Self {
        let (bar, log) = output::progress_logged(total as u64, quiet);
        Self {
            log,
            bar,
            loss: None,
            reward: None,
            heldout: None,
            trained_per_s: None,
            sampled_per_s: None,
        }
    }
}

impl Observer for Progress {
    fn metrics(&mut self, metrics: &Metrics) {
        // An evaluation's step is that of the weights it evaluated.
        self.bar.set_position(metrics.step as u64);
        match metrics.kind.as_str() {
            "eval" => self.heldout = metrics.heldout_success,
            kind => {
                // A step with nothing to learn (every rollout right or
                // every one wrong) has neither: nothing to show.
                self.loss = metrics.loss;
                self.trained_per_s = metrics.train_tokens_per_s;
                if kind == "rl" {
                    self.reward = metrics.reward;
                    self.sampled_per_s = metrics.rollout_tokens_per_s;
                }
            }
        }
        let show = |label: &str, value: Option<f64>| {
            value.map_or(String::new(), |value| format!("{label} {value:.3}  "))
        };
        let rate = |label: &str, value: Option<f64>| {
            value.map_or(String::new(), |value| format!("{value:.0} tok/s {label}  "))
        };
        let message = format!(
            "{}{}{}{}{}",
            show("loss", self.loss),
            show("reward", self.reward),
            show("held-out", self.heldout),
            rate("trained", self.trained_per_s),
            rate("sampled", self.sampled_per_s),
        );
        self.bar.set_message(message.trim_end().to_owned());
        if let Some(log) = self.log.as_ref().filter(|_| metrics.kind == "eval") {
            log.place(&self.bar);
        }
    }

    fn evaluating(&mut self, tasks: usize) {
        // Held-out episodes of a large model take a while: the bar says
        // what it waits for.
        self.bar.set_message(format!(
            "evaluating on {}…",
            output::count(tasks, "held-out task")
        ));
    }

    fn checkpoint(&mut self, dir: &Path) {
        if let Some(log) = &self.log {
            log.line(&self.bar, &format!("checkpoint {}", dir.display()));
        }
    }

    fn notice(&mut self, message: &str) {
        self.bar.suspend(|| eprintln!("note: {message}"));
    }
}

/// The run's curves as SVG: training loss, RL reward and success, held-out success.
fn plot(metrics: &[Metrics], path: &Path) -> Result<()> {
    let series = |kind: &str, value: fn(&Metrics) -> Option<f64>| -> Vec<(f64, f64)> {
        metrics
            .iter()
            .filter(|m| m.kind == kind)
            .filter_map(|m| value(m).map(|v| (m.step as f64, v)))
            .collect()
    };
    let curve = |name: &str, points, color| Curve {
        name: name.to_owned(),
        points,
        color,
    };
    let (blue, red, green) = (plot::color(0), plot::color(3), plot::color(2));
    plot::svg(
        path,
        &[
            Panel {
                title: "loss",
                x_label: "step",
                curves: vec![
                    curve("SFT loss", series("sft", |m| m.loss), blue),
                    curve("RL loss", series("rl", |m| m.loss), red),
                ],
            },
            Panel {
                title: "success",
                x_label: "step",
                curves: vec![
                    curve("RL reward", series("rl", |m| m.reward), red),
                    curve(
                        "held-out success",
                        series("eval", |m| m.heldout_success),
                        green,
                    ),
                ],
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_models_of_a_pretrained_size_are_called_slow_on_the_cpu() {
        let dir = tempfile::tempdir().unwrap();
        let sized = |path: &Path, bytes: u64| {
            std::fs::File::create(path).unwrap().set_len(bytes).unwrap();
        };
        // A tiny model's checkpoint, then one as large as a pretrained one.
        let checkpoint = dir.path().join("step-000150");
        std::fs::create_dir(&checkpoint).unwrap();
        sized(&checkpoint.join("model.safetensors"), 460_000);
        sized(&checkpoint.join("optimizer.bin"), PRETRAINED_BYTES);
        assert!(!pretrained_sized(&checkpoint));
        sized(&checkpoint.join("model.safetensors"), 540 << 20);
        assert!(pretrained_sized(&checkpoint));
        let gguf = dir.path().join("model.gguf");
        sized(&gguf, 90 << 20);
        assert!(pretrained_sized(&gguf));
    }
}
