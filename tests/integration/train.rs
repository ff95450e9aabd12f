//! `forge train` end to end on the CPU: the smoke run trains SFT then ERPO, a run stopped
//! by a step limit, a time limit, Ctrl-C or a kill resumes exactly, bad configs and run
//! directories are refused clearly, rollouts are played against model users and judged by a
//! model, and the prepared GPU run's script works (on a tiny model).

use crate::common::{
    assert_refused, assert_replays, export_example, forge, forge_cache_dir, forge_command,
    forget_hashes, json_lines, jsonl, stderr, stdout,
};
use crate::llm_stub::{StubServer, completion};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn train(args: &[&str]) -> std::process::Output {
    let mut all = vec!["train"];
    all.extend_from_slice(args);
    forge(&all)
}

fn summary(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "{}", stderr(output));
    json_lines(output).pop().expect("a summary line")
}

/// The share of `episodes` whose first tool call is the task's gold tool.
fn right_tool_share(episodes: &Path, tasks: &Path) -> f64 {
    let gold: std::collections::BTreeMap<String, String> = jsonl(tasks)
        .into_iter()
        .map(|task| {
            let tool = task["gold_actions"][0]["name"].as_str().unwrap().to_owned();
            (task["id"].as_str().unwrap().to_owned(), tool)
        })
        .collect();
    let episodes = jsonl(episodes);
    let right = episodes
        .iter()
        .filter(|episode| {
            let called = episode["steps"][0]["tool"].as_str();
            called
                == gold
                    .get(episode["task_id"].as_str().unwrap())
                    .map(String::as_str)
        })
        .count();
    right as f64 / episodes.len() as f64
}

#[test]
fn the_smoke_run_trains_sft_then_erpo_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let summary = summary(&train(&[
        "--preset",
        "smoke",
        "--run-dir",
        run.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(summary["complete"], true);
    let steps = summary["steps"].as_u64().unwrap();
    assert!(
        summary["heldout_success_before"].as_f64().unwrap() <= 0.1,
        "a random model is near chance: {summary}"
    );
    let tasks = run.join("envs/lamps/tasks.jsonl");
    let before = right_tool_share(&run.join("episodes/eval-step-000000.jsonl"), &tasks);
    let after = right_tool_share(
        &run.join(format!("episodes/eval-step-{steps:06}.jsonl")),
        &tasks,
    );
    assert!(
        before <= 0.1,
        "a random model calls no tool right: {before}"
    );
    assert!(
        after >= 0.8,
        "the trained model picks the held-out tasks' tools: {after} ({summary})"
    );
    // And it solves some held-out tasks outright: it copies the lamp.
    let after_sft = summary["heldout_success_after_sft"].as_f64().unwrap();
    let after_rl = summary["heldout_success_after"].as_f64().unwrap();
    assert!(after_sft >= 0.5, "SFT teaches the copying: {summary}");
    assert!(
        after_rl >= 0.8 && after_rl >= after_sft,
        "ERPO keeps or raises held-out success, to at least 0.8: {summary}"
    );
    let metrics = jsonl(&run.join("metrics.jsonl"));
    let rl: Vec<&Value> = metrics.iter().filter(|m| m["kind"] == "rl").collect();
    assert!(!rl.is_empty());
    for key in [
        "reward",
        "masked_share",
        "truncated_share",
        "context_full_share",
        "advantage_std",
        "entropy",
        "episodes_per_s",
    ] {
        assert!(
            rl.iter().all(|m| m[key].is_number()),
            "rl metrics carry {key}"
        );
    }
    for step in &rl {
        // A step that trained nothing (all its advantages 0) has no loss.
        let trained = step["tokens"].as_u64().unwrap() > 0;
        assert_eq!(step["loss"].is_number(), trained, "{step}");
        assert_eq!(step["grad_norm"].is_number(), trained, "{step}");
    }
    let gaps: Vec<f64> = rl
        .iter()
        .filter_map(|m| m["logprob_gap"].as_f64())
        .collect();
    assert!(
        !gaps.is_empty() && gaps.iter().all(|gap| *gap < 1e-4),
        "sampling and training agree on the sampled tokens' log-probs: {gaps:?}"
    );
    let sft: Vec<f64> = metrics
        .iter()
        .filter(|m| m["kind"] == "sft")
        .map(|m| m["loss"].as_f64().unwrap())
        .collect();
    assert!(sft.last().unwrap() < &(sft[0] / 10.0), "SFT fits: {sft:?}");
    assert!(
        metrics
            .iter()
            .filter(|m| m["kind"] == "sft")
            .all(|m| m["grad_norm"].as_f64().is_some_and(|norm| norm > 0.0)),
        "every SFT step logs its gradient's norm"
    );
    assert!(run.join("curves.svg").is_file());
    // `forge model` reads the trained checkpoint as it reads a GGUF file.
    let final_model = run.join("final");
    let output = forge(&["model", "inspect", final_model.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let inspected = json_lines(&output).remove(0);
    assert_eq!(inspected["format"], "checkpoint", "{inspected}");
    assert_eq!(inspected["chat_template"], "chatml", "{inspected}");
    assert!(inspected["parameters"].as_u64().unwrap() > 0, "{inspected}");
    assert_eq!(
        inspected["types"]["F32"]["tensors"], inspected["tensors"],
        "checkpoints hold f32 tensors: {inspected}"
    );
    assert!(
        inspected["metadata"]["num_hidden_layers"].is_u64(),
        "{inspected}"
    );
    assert_eq!(inspected["adapters"], Value::Null, "no LoRA: {inspected}");
    let output = forge(&["model", "tokenize", final_model.to_str().unwrap(), "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let ids: Vec<u32> = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(!ids.is_empty());
    // The trained model plays through `forge run`, prompted as it was trained.
    let play = |model: &Path, more: &[&str]| {
        let env = run.join("envs/lamps");
        let mut args = vec!["run", "--env", env.to_str().unwrap(), "--policy", "model"];
        args.extend(["--model", model.to_str().unwrap()]);
        args.extend(more);
        forge(&args)
    };
    let trajectories = dir.path().join("run.jsonl");
    let output = play(
        &final_model,
        &[
            "--tasks",
            "lamps-0001,lamps-0002,lamps-0003",
            "--out",
            trajectories.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let record = jsonl(&trajectories).remove(0);
    assert!(
        record["policy_trace"]["turns"][0]["logprobs"].is_array(),
        "{record}"
    );
    assert!(record["steps"][0]["tool"].is_string(), "{record}");
    // A damaged copy of it is refused, naming what changed.
    let damaged = dir.path().join("damaged");
    std::fs::create_dir(&damaged).unwrap();
    for entry in std::fs::read_dir(&final_model).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), damaged.join(entry.file_name())).unwrap();
    }
    let weights = damaged.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    *bytes.last_mut().unwrap() ^= 0x40;
    std::fs::write(&weights, bytes).unwrap();
    let output = play(&damaged, &["--tasks", "lamps-0001"]);
    assert_refused(&output, "damaged is damaged: its model files");

    // An evaluation's episodes replay byte-identically on the run's bundle;
    // on another environment the error says which one to name.
    let evaluated = run.join(format!("episodes/eval-step-{steps:06}.jsonl"));
    assert_replays(&evaluated, &run.join("envs/lamps"));
    let output = forge(&["replay", evaluated.to_str().unwrap()]);
    assert_refused(&output, "naming the `lamps` bundle");

    rl_scores_say_what_the_update_made_of_each_episode(dir.path(), &run);
}

/// Two ERPO steps from the smoke run's trained model against a user that
/// misstates the lamp 30% of the time, rollouts saved: beside each step's
/// episodes, a score per episode says how the update used it.
fn rl_scores_say_what_the_update_made_of_each_episode(dir: &Path, trained: &Path) {
    let config = format!(
        "[model]\ninit = \"{}\"\n[sft]\nsteps = 0\n[rl]\nsteps = 2\ntasks_per_step = 4\n\
         rollouts = 4\ntemperature = 1.2\nuser_instability = 0.3\nsave_rollouts = true\n\
         [eval]\nat_start = false\n",
        trained.join("final").display()
    );
    let run = rl_run(dir, "scored", &trained.join("envs/lamps"), &config);
    let reward = |score: &Value| score["reward"].as_f64().unwrap();
    for step in 1..=2 {
        let episodes = run.join(format!("episodes/rl-step-{step:06}.jsonl"));
        let records = jsonl(&episodes);
        let scores = jsonl(&episodes.with_extension("scores.jsonl"));
        assert_eq!(scores.len(), records.len(), "a score per episode");
        let groups: Vec<&[Value]> = scores.chunks(4).collect();
        for (group, scores) in groups.iter().enumerate() {
            let task = &records[group * 4]["task_id"];
            assert!(scores.iter().all(|score| &score["task_id"] == task));
        }
        let valid = |scores: &[Value]| -> Vec<f64> {
            let valid = scores.iter().filter(|score| score["masked"] == false);
            valid.map(reward).collect()
        };
        let (kept, dropped): (Vec<&[Value]>, Vec<&[Value]>) =
            groups.iter().partition(|scores| scores[0]["kept"] == true);
        for scores in dropped {
            // Dynamic sampling dropped it: its valid rollouts scored alike.
            let rewards = valid(scores);
            assert!(
                rewards.windows(2).all(|pair| pair[0] == pair[1]),
                "{scores:?}"
            );
            assert!(scores.iter().all(|score| score["advantage"].is_null()));
        }
        // ERPO: each valid rollout's reward less its task's mean, over the
        // std of every valid rollout of the environment (one here) kept in
        // the step, plus eps; masked rollouts take no part.
        let pooled: Vec<f64> = kept.iter().flat_map(|scores| valid(scores)).collect();
        let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
        let all = mean(&pooled);
        let std = mean(&pooled.iter().map(|r| (r - all).powi(2)).collect::<Vec<_>>()).sqrt();
        for scores in kept {
            let task_mean = mean(&valid(scores));
            for score in scores {
                let expected =
                    (score["masked"] == false).then(|| (reward(score) - task_mean) / (std + 1e-6));
                let advantage = score["advantage"].as_f64();
                assert_eq!(advantage.is_some(), expected.is_some(), "{score}");
                if let (Some(advantage), Some(expected)) = (advantage, expected) {
                    assert!((advantage - expected).abs() < 1e-9, "{score}: {expected}");
                }
            }
        }
    }
    let episodes = run.join("episodes/rl-step-000001.jsonl");
    let output = forge(&["show", episodes.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(
        shown.contains("\n  update  advantage +") && shown.contains("\n  update  advantage -"),
        "{shown}"
    );
}

/// Timing fields differ between runs; everything else must not.
fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The trained model's weights file, byte for byte.
fn final_weights(run: &Path) -> Vec<u8> {
    std::fs::read(run.join("final/model.safetensors")).unwrap()
}

/// `forge train` arguments of a smoke run in `run` with the config file
/// `config` over the preset, ending with a JSON summary.
fn smoke_args(config: &str, run: &Path) -> Vec<String> {
    [
        "--preset",
        "smoke",
        "--config",
        config,
        "--run-dir",
        run.to_str().unwrap(),
        "--json",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn without_timing(path: &Path) -> Vec<Value> {
    jsonl(path)
        .into_iter()
        .map(|mut value| {
            let object = value.as_object_mut().unwrap();
            object.retain(|key, _| !key.ends_with("_per_s") && key != "seconds");
            value
        })
        .collect()
}

/// A two-step smoke run in `dir/run`, stopped after its first step (with a
/// checkpoint), and the config file it was started with.
fn run_stopped_after_one_step(dir: &Path) -> (PathBuf, PathBuf) {
    let config = dir.join("short.toml");
    std::fs::write(&config, "[sft]\nsteps = 2\n[rl]\nsteps = 0\n").unwrap();
    let run = dir.join("run");
    let mut first = smoke_args(config.to_str().unwrap(), &run);
    first.extend(["--max-steps".to_owned(), "1".to_owned()]);
    summary(&train(&as_strs(&first)));
    (run, config)
}

#[test]
fn a_run_directory_another_process_holds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (run, config) = run_stopped_after_one_step(dir.path());
    let metrics = std::fs::read(run.join("metrics.jsonl")).unwrap();
    // Held as a run under way holds it: a second process resuming it would
    // write the same steps again, interleaved with the first one's.
    let held = std::fs::File::open(&run).unwrap();
    held.try_lock().unwrap();
    let resume = ["--run-dir", run.to_str().unwrap(), "--resume", "--json"];
    assert_refused(&train(&resume), "in use by another forge process");
    assert_eq!(std::fs::read(run.join("metrics.jsonl")).unwrap(), metrics);
    // A new run in an empty directory being claimed: refused, left as is.
    let fresh = dir.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let claimed = std::fs::File::open(&fresh).unwrap();
    claimed.try_lock().unwrap();
    let output = train(&as_strs(&smoke_args(config.to_str().unwrap(), &fresh)));
    assert_refused(&output, "in use by another forge process");
    assert!(fresh.is_dir() && fresh.read_dir().unwrap().next().is_none());
    drop((held, claimed));
    assert_eq!(summary(&train(&resume))["complete"], true);
}

#[test]
fn what_a_run_quit_while_making_its_environments_left_makes_way_for_a_new_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("short.toml");
    std::fs::write(&config, "[sft]\nsteps = 1\n[rl]\nsteps = 0\n").unwrap();
    let run = dir.path().join("run");
    let staged = run.join("envs/.lamps.partial-x1y2z3");
    std::fs::create_dir_all(&staged).unwrap();
    std::fs::write(staged.join("doc.json"), "{").unwrap();
    let output = train(&as_strs(&smoke_args(config.to_str().unwrap(), &run)));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("holds only environments a run quit before it made them"),
        "{}",
        stderr(&output)
    );
    assert!(!staged.exists() && run.join("envs/lamps").is_dir());
    // Anything else there is not the run's to remove.
    let other = dir.path().join("other");
    std::fs::create_dir_all(other.join("envs/.lamps.partial-x1y2z3")).unwrap();
    std::fs::create_dir_all(other.join("envs/mine")).unwrap();
    let output = train(&as_strs(&smoke_args(config.to_str().unwrap(), &other)));
    assert_refused(&output, "is not empty and holds no run");
    assert!(other.join("envs/mine").is_dir());
}

#[test]
fn a_run_resumes_only_from_what_it_saved() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = run_stopped_after_one_step(dir.path());
    let resume = || train(&["--run-dir", run.to_str().unwrap(), "--resume"]);
    let metrics = std::fs::read(run.join("metrics.jsonl")).unwrap();
    // An edited config, or an emptied one (every key back to its default),
    // would not continue the run as it began.
    let config = run.join("config.toml");
    let saved = std::fs::read_to_string(&config).unwrap();
    let mut edited: toml::Table = toml::from_str(&saved).unwrap();
    edited["sft"]["lr"] = toml::Value::Float(0.5);
    std::fs::write(&config, toml::to_string(&edited).unwrap()).unwrap();
    assert_refused(&resume(), "sft.lr = 0.003 then, 0.5 now");
    std::fs::write(&config, "").unwrap();
    assert_refused(&resume(), "sft.steps = 2 then, 100 now");
    assert_eq!(std::fs::read(run.join("metrics.jsonl")).unwrap(), metrics);
    std::fs::write(&config, &saved).unwrap();
    // Weights or optimizer state damaged in place still parse: the
    // checkpoint's seal tells.
    for (file, damaged_part) in [
        (
            "model.safetensors",
            "its model files (the weights, model.safetensors,",
        ),
        (
            "optimizer.bin",
            "its optimizer state (optimizer.bin) changed",
        ),
    ] {
        let path = run.join("checkpoints/step-000001").join(file);
        let good = std::fs::read(&path).unwrap();
        let mut damaged = good.clone();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0xff;
        std::fs::write(&path, &damaged).unwrap();
        assert_refused(
            &resume(),
            &format!("step-000001 is damaged: {damaged_part}"),
        );
        std::fs::write(&path, &good).unwrap();
    }
    let weights = run.join("checkpoints/step-000001/model.safetensors");
    let good = std::fs::read(&weights).unwrap();
    std::fs::remove_file(&weights).unwrap();
    assert_refused(&resume(), "its model.safetensors is missing");
    std::fs::write(&weights, &good).unwrap();
    // So is a checkpoint without the config it was written under: a
    // changed config would resume unnoticed.
    let written_under = run.join("checkpoints/step-000001/config.toml");
    let kept = std::fs::read(&written_under).unwrap();
    std::fs::remove_file(&written_under).unwrap();
    assert_refused(
        &resume(),
        "step-000001/config.toml is missing, so the run's config cannot be checked",
    );
    std::fs::write(&written_under, &kept).unwrap();
    // Metrics cut short lose the steps the checkpoint holds, and a seal
    // deleted leaves the files unchecked: the run goes on, saying so.
    let first_line = metrics.split(|&byte| byte == b'\n').next().unwrap();
    std::fs::write(run.join("metrics.jsonl"), [first_line, b"\n"].concat()).unwrap();
    std::fs::remove_file(run.join("checkpoints/step-000001/checkpoint.sha256")).unwrap();
    let output = resume();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains("has no checkpoint.sha256: its files are taken as they are, unchecked"),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains(
            "note: metrics.jsonl ends at step 0, before the checkpoint's step 1 (it was cut \
             short or edited): the metrics of step 1 are lost"
        ),
        "{}",
        stderr(&output)
    );
    // Its held-out tasks, without --env, are those of its environment.
    let heldout = format!("heldout:{}", run.display());
    let output = forge(&["run", "--tasks", &heldout, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let first = &json_lines(&output)[0];
    assert!(
        first["task_id"].as_str().unwrap().starts_with("lamps-"),
        "{first}"
    );
}

#[test]
fn a_run_that_diverges_stops_at_the_first_gradient_that_is_no_number() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("huge.toml");
    std::fs::write(
        &config,
        "[sft]\nlr = 1e12\nsteps = 20\n[rl]\nsteps = 0\n[optim]\ngrad_clip = 0\nwarmup_steps = 0\n",
    )
    .unwrap();
    let run = dir.path().join("run");
    let output = train(&as_strs(&smoke_args(config.to_str().unwrap(), &run)));
    assert_refused(
        &output,
        "training diverged, and this update was not applied",
    );
    let said = stderr(&output);
    assert!(said.contains("SFT step "), "{said}");
    // The steps before it are kept: they were recorded.
    assert!(run.join("metrics.jsonl").is_file());
}

/// `forge train` with `args`, sent SIGINT (Ctrl-C) once `ready`.
fn interrupted(args: &[String], ready: impl Fn() -> bool) -> std::process::Output {
    let mut child = forge_command()
        .arg("train")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended unsignalled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    child.wait_with_output().unwrap()
}

/// Ctrl-C during an evaluation stops it at once, its episodes unkept: the
/// run stops with a checkpoint, and resumed, makes that evaluation first.
#[test]
fn a_signal_stops_an_evaluation_which_a_resumed_run_makes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("long-eval.toml");
    // Long held-out episodes: the signal comes while they are played.
    std::fs::write(
        &config,
        "[sft]\nsteps = 1\n[rl]\nsteps = 0\n[tasks]\nmax_turns = 12\n[eval]\nat_start = true\n\
         max_new_tokens = 800\n",
    )
    .unwrap();
    let run = dir.path().join("run");
    // The run has begun once its config is written: its first evaluation
    // follows.
    let output = interrupted(&smoke_args(config.to_str().unwrap(), &run), || {
        run.join("config.toml").exists()
    });
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("the evaluation at step 0 was stopped unfinished"),
        "{}",
        stderr(&output)
    );
    let metrics = run.join("metrics.jsonl");
    assert!(
        std::fs::read_to_string(&metrics)
            .unwrap_or_default()
            .is_empty(),
        "nothing of the stopped evaluation is recorded"
    );
    let latest = std::fs::read_to_string(run.join("checkpoints/latest")).unwrap();
    assert_eq!(latest, "step-000000");

    let resume = ["--run-dir", run.to_str().unwrap(), "--resume", "--json"];
    assert_eq!(summary(&train(&resume))["complete"], true);
    let logged: Vec<(String, u64)> = jsonl(&metrics)
        .iter()
        .map(|line| {
            let kind = line["kind"].as_str().unwrap().to_owned();
            (kind, line["step"].as_u64().unwrap())
        })
        .collect();
    let expected =
        [("eval", 0), ("sft", 1), ("eval", 1)].map(|(kind, step)| (kind.to_owned(), step));
    assert_eq!(
        logged, expected,
        "the evaluation at the start is made once, first"
    );
}

#[test]
fn an_interrupted_run_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("short.toml");
    std::fs::write(
        &config,
        "checkpoint_every = 2\n[sft]\nsteps = 3\nbatch = 4\n[rl]\nsteps = 2\ntasks_per_step = 2\n\
         rollouts = 4\nmax_new_tokens = 24\n[eval]\nevery = 2\nmax_new_tokens = 24\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let whole = dir.path().join("whole");
    let parts = dir.path().join("parts");
    let args = |run: &Path| smoke_args(config, run);
    summary(&train(&as_strs(&args(&whole))));
    // Stopped inside SFT, then again inside RL, then finished.
    let mut first = args(&parts);
    first.extend(["--max-steps".to_owned(), "2".to_owned()]);
    let stopped = summary(&train(&as_strs(&first)));
    assert_eq!(
        (stopped["complete"].clone(), stopped["steps"].clone()),
        (false.into(), 2.into())
    );
    // A run killed while writing a metrics line leaves half of it.
    let metrics = parts.join("metrics.jsonl");
    let mut text = std::fs::read_to_string(&metrics).unwrap();
    text.push_str("{\"kind\":\"sf");
    std::fs::write(&metrics, text).unwrap();
    let resume = [
        "--run-dir",
        parts.to_str().unwrap(),
        "--resume",
        "--json",
        "--max-steps",
        "2",
    ];
    let resumed = summary(&train(&resume));
    assert_eq!(
        (resumed["steps"].clone(), resumed["steps_run"].clone()),
        (4.into(), 2.into())
    );
    // Evaluated at steps 2 and 3, not 4: neither passes for step 4's model.
    assert!(resumed["heldout_success_after"].is_null(), "{resumed}");
    assert_eq!(summary(&train(&resume[..4]))["complete"], true);
    // Resuming a complete run does nothing, and says so.
    let output = train(&resume[..3]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("complete already"),
        "{}",
        stdout(&output)
    );
    assert_eq!(
        without_timing(&whole.join("metrics.jsonl")),
        without_timing(&parts.join("metrics.jsonl"))
    );
    assert_eq!(
        final_weights(&whole),
        final_weights(&parts),
        "the resumed run ends with the same weights"
    );
    let optimizer = |run: &Path| std::fs::read(run.join("checkpoints/step-000004/optimizer.bin"));
    assert!(
        optimizer(&whole).unwrap() == optimizer(&parts).unwrap(),
        "and the same optimizer state, byte for byte"
    );

    // A time limit stops the run after its step, evaluated and checkpointed;
    // resuming finishes it with the same weights as an uninterrupted run.
    let timed = dir.path().join("timed");
    let mut first = args(&timed);
    first.extend(["--time-limit".to_owned(), "0".to_owned()]);
    let stopped = summary(&train(&as_strs(&first)));
    assert_eq!(
        (stopped["complete"].clone(), stopped["steps"].clone()),
        (false.into(), 1.into())
    );
    let last = jsonl(&timed.join("metrics.jsonl")).pop().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["step"].as_u64()),
        (Some("eval"), Some(1))
    );
    assert_eq!(stopped["heldout_success_after"], last["heldout_success"]);
    let resume = ["--run-dir", timed.to_str().unwrap(), "--resume", "--json"];
    assert_eq!(summary(&train(&resume))["complete"], true);
    assert_eq!(
        final_weights(&whole),
        final_weights(&timed),
        "a run stopped by its time limit resumes exactly"
    );
    // A complete run resumed keeps its model, and writes again one gone.
    std::fs::remove_dir_all(timed.join("final")).unwrap();
    let output = train(&resume);
    assert!(
        stderr(&output).contains("final is gone: written again from the last checkpoint"),
        "{}",
        stderr(&output)
    );
    assert_eq!(final_weights(&whole), final_weights(&timed));
    // Without its checkpoints it has nothing to resume from, and its
    // metrics are not discarded by a restart from step 0.
    std::fs::remove_dir_all(timed.join("checkpoints")).unwrap();
    let metrics = std::fs::read(timed.join("metrics.jsonl")).unwrap();
    assert_refused(
        &train(&resume),
        "holds the model of a complete run (final/)",
    );
    // Its config is still printed: printing resumes nothing.
    let printed = train(&[
        "--run-dir",
        timed.to_str().unwrap(),
        "--resume",
        "--print-config",
    ]);
    assert!(printed.status.success(), "{}", stderr(&printed));
    assert!(stdout(&printed).contains("[sft]"), "{}", stdout(&printed));
    std::fs::remove_dir_all(timed.join("final")).unwrap();
    assert_refused(
        &train(&resume),
        "metrics.jsonl records steps up to 5, past the checkpoint",
    );
    assert_eq!(std::fs::read(timed.join("metrics.jsonl")).unwrap(), metrics);

    // Ctrl-C (SIGINT) once a step is done stops the run after the step
    // under way, with a checkpoint and exit status 130; resuming finishes
    // it with the same weights.
    let signalled = dir.path().join("signalled");
    let metrics = signalled.join("metrics.jsonl");
    let output = interrupted(&args(&signalled), || {
        std::fs::read_to_string(&metrics).is_ok_and(|text| text.contains("\"sft\""))
    });
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(stderr(&output).contains("--resume"), "{}", stderr(&output));
    let stopped = json_lines(&output).pop().expect("a summary line");
    assert_eq!(
        (stopped["interrupted"].clone(), stopped["complete"].clone()),
        (true.into(), false.into())
    );
    let latest = std::fs::read_to_string(signalled.join("checkpoints/latest")).unwrap();
    assert_eq!(
        latest,
        format!("step-{:06}", stopped["steps"].as_u64().unwrap())
    );
    let resume = [
        "--run-dir",
        signalled.to_str().unwrap(),
        "--resume",
        "--json",
    ];
    assert_eq!(summary(&train(&resume))["complete"], true);
    assert_eq!(
        final_weights(&whole),
        final_weights(&signalled),
        "a signalled run resumes exactly"
    );

    // A run killed before its first checkpoint was whole resumes from its
    // start, logging each step once.
    let killed = dir.path().join("killed");
    let mut first = args(&killed);
    first.extend(["--max-steps".to_owned(), "1".to_owned()]);
    summary(&train(&as_strs(&first)));
    // Checkpoints without the marker naming the one to resume from are
    // refused, not passed over: restarting would discard their metrics.
    let logged = std::fs::read(killed.join("metrics.jsonl")).unwrap();
    std::fs::remove_file(killed.join("checkpoints/latest")).unwrap();
    let output = train(&["--run-dir", killed.to_str().unwrap(), "--resume"]);
    assert_refused(&output, "checkpoints/latest is missing");
    assert_refused(&output, "step-000001");
    assert_eq!(std::fs::read(killed.join("metrics.jsonl")).unwrap(), logged);
    std::fs::write(killed.join("checkpoints/latest"), "step-000009").unwrap();
    let output = train(&["--run-dir", killed.to_str().unwrap(), "--resume"]);
    assert!(
        stderr(&output).contains("names `step-000009`, which is not a checkpoint"),
        "{}",
        stderr(&output)
    );
    // A position that is not its checkpoint's step would resume without
    // the state of the step it names.
    std::fs::write(killed.join("checkpoints/latest"), "step-000001").unwrap();
    std::fs::write(
        killed.join("checkpoints/step-000001/position.json"),
        r#"{"step": 9, "drawn": 0}"#,
    )
    .unwrap();
    let output = train(&["--run-dir", killed.to_str().unwrap(), "--resume"]);
    assert!(
        stderr(&output).contains("says step 9, but it is the checkpoint of step 1"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read(killed.join("metrics.jsonl")).unwrap(), logged);
    // A checkpoint without its position (the last file written) is one
    // the run was killed while writing: it restarts from step 0.
    std::fs::remove_file(killed.join("checkpoints/latest")).unwrap();
    std::fs::remove_file(killed.join("checkpoints/step-000001/position.json")).unwrap();
    // A run directory moves with the bundles synthesized into it.
    let killed = {
        let moved = dir.path().join("moved");
        std::fs::rename(&killed, &moved).unwrap();
        moved
    };
    let output = train(&["--run-dir", killed.to_str().unwrap(), "--resume"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // With no terminal to draw the bar on, evaluations and checkpoints are
    // lines of the log.
    let log = stderr(&output);
    for line in ["] 0/5 held-out 0.000", "tok/s trained", "] checkpoint "] {
        assert!(log.contains(line), "{line:?} in {log}");
    }
    // The last evaluation's line says the step's reward beside it; no
    // place is written twice (the periodic lines skip one an evaluation
    // wrote).
    assert!(
        log.lines()
            .any(|line| line.contains("] 5/5 reward ") && line.contains(" held-out ")),
        "{log}"
    );
    let places: Vec<&str> = log
        .lines()
        .filter_map(|line| line.split_once("] ").map(|(_, place)| place))
        .filter(|place| place.contains("/5 "))
        .collect();
    let distinct: std::collections::BTreeSet<&&str> = places.iter().collect();
    assert_eq!(distinct.len(), places.len(), "{log}");
    assert_eq!(
        without_timing(&whole.join("metrics.jsonl")),
        without_timing(&killed.join("metrics.jsonl"))
    );
    assert_eq!(
        final_weights(&whole),
        final_weights(&killed),
        "a run restarted from its start ends with the same weights"
    );

    // A bundle changed under a stopped run is refused on resume: its tasks,
    // and so the held-out split, would not be the run's.
    let bundle = dir.path().join("lamps");
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(whole.join("envs/lamps"))
            .arg(&bundle)
            .status()
            .unwrap()
            .success()
    );
    let changed = dir.path().join("changed");
    let mut first = args(&changed);
    first.extend([
        "--env".to_owned(),
        bundle.to_str().unwrap().to_owned(),
        "--max-steps".to_owned(),
        "1".to_owned(),
    ]);
    summary(&train(&as_strs(&first)));
    let tasks = std::fs::read_to_string(bundle.join("tasks.jsonl")).unwrap();
    let fewer: Vec<&str> = tasks.lines().skip(1).collect();
    std::fs::write(bundle.join("tasks.jsonl"), fewer.join("\n") + "\n").unwrap();
    // As re-synthesized: the manifest's file hashes no longer pin the tasks.
    forget_hashes(&bundle);
    let output = train(&["--run-dir", changed.to_str().unwrap(), "--resume"]);
    assert_refused(&output, "has changed since the run started");
}

#[test]
fn a_lora_run_trains_its_adapters_and_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lora.toml");
    std::fs::write(
        &config,
        "checkpoint_every = 2\n[lora]\nrank = 4\nalpha = 8.0\ntargets = [\"q_proj\", \"v_proj\", \"down_proj\"]\n\
         [sft]\nsteps = 3\nbatch = 4\nlr = 0.01\n[rl]\nsteps = 2\ntasks_per_step = 2\nrollouts = 4\n\
         max_new_tokens = 24\n[eval]\nevery = 0\nmax_new_tokens = 24\n",
    )
    .unwrap();
    let args = |run: &Path| smoke_args(config.to_str().unwrap(), run);
    let whole = dir.path().join("whole");
    let trained = summary(&train(&as_strs(&args(&whole))));
    assert_eq!(trained["complete"], true);
    // Rank 4 on the tiny model's two layers (width 64, 32 for the two KV
    // heads of 16, feed-forward 192): q 4·(64+64), v 4·(64+32), down
    // 4·(192+64) numbers a layer.
    assert_eq!(trained["trained_parameters"], 2 * (512 + 384 + 1024));
    assert!(trained["parameters"].as_u64().unwrap() > 20 * 3840);
    // Stopped inside SFT, then inside RL, then finished.
    let parts = dir.path().join("parts");
    let mut first = args(&parts);
    first.extend(["--max-steps".to_owned(), "2".to_owned()]);
    summary(&train(&as_strs(&first)));
    let resume = ["--run-dir", parts.to_str().unwrap(), "--resume", "--json"];
    let mut again = resume.to_vec();
    again.extend(["--max-steps", "2"]);
    assert_eq!(summary(&train(&again))["steps"], 4);
    assert_eq!(summary(&train(&resume))["complete"], true);

    let adapters = |run: &Path| std::fs::read(run.join("final/adapter/adapter_model.safetensors"));
    assert!(
        adapters(&whole).unwrap() == adapters(&parts).unwrap(),
        "the resumed run ends with the same adapters"
    );
    assert!(final_weights(&whole) == final_weights(&parts));
    let optimizer = |run: &Path| std::fs::read(run.join("checkpoints/step-000004/optimizer.bin"));
    assert!(optimizer(&whole).unwrap() == optimizer(&parts).unwrap());
    // The reference policy of the KL term is the adapters at the start of
    // RL on the frozen weights: the run keeps no copy of the weights for it.
    let reference = whole.join("reference");
    assert!(
        reference
            .join("adapter/adapter_model.safetensors")
            .is_file()
    );
    assert!(!reference.join("model.safetensors").exists());

    // The adapters are PEFT's: its config names them and their base.
    let peft: Value = serde_json::from_slice(
        &std::fs::read(whole.join("final/adapter/adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            &peft["r"],
            &peft["lora_alpha"],
            &peft["base_model_name_or_path"]
        ),
        (&json!(4), &json!(8.0), &json!("tiny"))
    );
    assert_eq!(
        peft["target_modules"],
        json!(["q_proj", "v_proj", "down_proj"])
    );
    // `forge model inspect` tells of them, and of their base's weights.
    let output = forge(&[
        "model",
        "inspect",
        whole.join("final").to_str().unwrap(),
        "--json",
    ]);
    let adapters = &json_lines(&output).remove(0)["adapters"];
    assert_eq!(
        (&adapters["rank"], &adapters["targets"], &adapters["base"]),
        (&json!(4), &peft["target_modules"], &json!("tiny"))
    );
    let digest = std::fs::read_to_string(whole.join("final/adapter/base_weights.sha256")).unwrap();
    assert_eq!(adapters["base_sha256"], json!(digest));
    assert_eq!(digest.len(), 64);
    // Adapters alone are not a model: the error says how to make one.
    let adapter_dir = whole.join("final/adapter");
    let output = forge(&["model", "inspect", adapter_dir.to_str().unwrap()]);
    assert_refused(&output, "forge model merge");
    // Nor is a run directory: the error names its trained model.
    let output = forge(&["model", "inspect", whole.to_str().unwrap()]);
    let trained = whole.join("final");
    assert_refused(
        &output,
        &format!(
            "a `forge train` run directory, not a model: its trained model is {}",
            trained.display()
        ),
    );
}

/// Recomputing activations in the backward pass changes a run's memory,
/// not its course: its losses and gradient norms are those of the run that
/// keeps them, up to rounding. (The tiny model's RL steps here have nothing
/// to learn, so train nothing in either run; the surrogate's gradients,
/// with advantages, are compared in `trainer/tests/objective.rs`.)
#[test]
fn a_run_that_recomputes_activations_follows_the_one_that_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = |activations: &str| {
        let config = dir.path().join(format!("{activations}.toml"));
        std::fs::write(
            &config,
            format!(
                "[optim]\nactivations = \"{activations}\"\n[sft]\nsteps = 4\n\
                 [rl]\nsteps = 2\ntasks_per_step = 2\nrollouts = 4\nmax_new_tokens = 24\n\
                 [eval]\nevery = 0\nmax_new_tokens = 24\n"
            ),
        )
        .unwrap();
        let run = dir.path().join(activations);
        let args = smoke_args(config.to_str().unwrap(), &run);
        assert_eq!(summary(&train(&as_strs(&args)))["complete"], true);
        jsonl(&run.join("metrics.jsonl"))
    };
    let (kept, recomputed) = (metrics("kept"), metrics("recomputed"));
    assert_eq!(kept.len(), recomputed.len());
    let mut compared = 0;
    for (kept, recomputed) in kept.iter().zip(&recomputed) {
        assert_eq!(kept["kind"], recomputed["kind"]);
        for key in ["loss", "grad_norm"] {
            // A step that trained nothing has neither, in both runs.
            assert_eq!(kept[key].is_null(), recomputed[key].is_null(), "{key}");
            let (Some(a), Some(b)) = (kept[key].as_f64(), recomputed[key].as_f64()) else {
                continue;
            };
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(1e-3),
                "{key}: {a} vs {b}"
            );
            compared += 1;
        }
    }
    assert!(
        compared >= 8,
        "every SFT step's loss and norm were compared"
    );
}

#[test]
fn lora_adapters_go_only_with_the_base_weights_they_were_trained_on() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    // Two base models alike but for their seed.
    let bases: Vec<_> = [0, 1]
        .into_iter()
        .map(|seed| {
            let config = write(
                &format!("base{seed}.toml"),
                format!("seed = {seed}\n[sft]\nsteps = 1\nbatch = 2\n[rl]\nsteps = 0\n[eval]\nevery = 0\n"),
            );
            let run = dir.path().join(format!("base{seed}"));
            summary(&train(&as_strs(&smoke_args(&config, &run))));
            run.join("final")
        })
        .collect();
    let config = write(
        "lora.toml",
        format!(
            "checkpoint_every = 1\n[model]\ninit = {:?}\n[lora]\nrank = 2\n[sft]\nsteps = 2\nbatch = 2\n\
             [rl]\nsteps = 0\n[eval]\nevery = 0\n",
            dir.path().join("base0/final")
        ),
    );
    let run = dir.path().join("lora");
    let mut first = smoke_args(&config, &run);
    first.extend(["--max-steps".to_owned(), "1".to_owned()]);
    summary(&train(&as_strs(&first)));

    // The base replaced under the run's model.init (by another run's
    // model, sealed as its own): refused, saying so.
    let sealed = ["model.safetensors", "checkpoint.sha256"];
    let original = sealed.map(|file| std::fs::read(bases[0].join(file)).unwrap());
    for file in sealed {
        std::fs::copy(bases[1].join(file), bases[0].join(file)).unwrap();
    }
    let resume = ["--run-dir", run.to_str().unwrap(), "--resume", "--json"];
    let refused = train(&resume);
    assert_refused(&refused, "other base weights");
    // Its weights changed under its seal: refused as damaged.
    std::fs::write(bases[0].join(sealed[0]), &original[0]).unwrap();
    assert_refused(&train(&resume), "base0/final is damaged: its model files");
    // The base restored: the run goes on.
    std::fs::write(bases[0].join(sealed[1]), &original[1]).unwrap();
    assert_eq!(summary(&train(&resume))["complete"], true);

    // `forge model merge` folds the adapters into the base their config
    // names, as the run's own checkpoint holds them.
    let merged = dir.path().join("merged");
    let merge = |adapters: &Path, out: &Path, more: &[&str]| {
        let mut args = vec![
            "model",
            "merge",
            adapters.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(more);
        forge(&args)
    };
    let output = merge(&run.join("final"), &merged, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let weights = |dir: &Path| std::fs::read(dir.join("model.safetensors")).unwrap();
    assert!(weights(&merged) == weights(&run.join("final")));
    for file in [
        "adapter/adapter_model.safetensors",
        "adapter/base_weights.sha256",
        "prompt.json",
    ] {
        assert!(
            std::fs::read(merged.join(file)).unwrap()
                == std::fs::read(run.join("final").join(file)).unwrap(),
            "{file}"
        );
    }
    // Into other base weights: refused unless asked for, writing nothing.
    let other = dir.path().join("other");
    let base1 = dir.path().join("base1/final");
    let refused = merge(
        &run.join("final/adapter"),
        &other,
        &["--base", base1.to_str().unwrap()],
    );
    assert_refused(&refused, "other base weights");
    assert_refused(&refused, "--any-base");
    assert!(!other.exists());
    let forced = ["--base", base1.to_str().unwrap(), "--any-base"];
    let output = merge(&run.join("final/adapter"), &other, &forced);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(weights(&other) != weights(&merged));
    // The adapters kept beside it still name the base they were trained on.
    let digest = |dir: &Path| std::fs::read(dir.join("adapter/base_weights.sha256")).unwrap();
    assert!(digest(&other) == digest(&run.join("final")));
    // A base with adapters folded in already would get them twice.
    let refused = merge(
        &run.join("final"),
        &dir.path().join("twice"),
        &["--base", merged.to_str().unwrap(), "--any-base"],
    );
    assert_refused(
        &refused,
        "already has LoRA adapters folded into its weights",
    );
    // Nothing is written over: a non-empty --out is refused.
    let refused = merge(&run.join("final"), &merged, &[]);
    assert!(
        stderr(&refused).contains("is not empty"),
        "{}",
        stderr(&refused)
    );
    // Nor are directories without adapters taken for some.
    let refused = merge(&base1, &dir.path().join("none"), &[]);
    assert!(
        stderr(&refused).contains("holds no LoRA adapters"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn bad_configs_and_run_directories_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    let run = dir.path().join("run");
    let run = run.to_str().unwrap();
    // An unknown key, then impossible values: each refused, naming the key.
    for (text, key) in [
        ("[rl]\nclipp = 0.3\n", "clipp"),
        ("[rl]\nrollouts = 1\n", "rl.rollouts"),
        ("[sft]\ntask_fraction = 0.0\n", "sft.task_fraction"),
        ("[model]\ntools = \"verbose\"\n", "model.tools"),
        ("[model]\nsystem = 5\n", "model.system"),
    ] {
        std::fs::write(&config, text).unwrap();
        let output = train(&["--config", config.to_str().unwrap(), "--run-dir", run]);
        assert_refused(&output, key);
    }
    // Of several files, the one that set the wrong key is named, and the
    // value is told in the words of the docs; a misspelt key, its meaning.
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[rl]\nsteps = 3\n").unwrap();
    for (text, said) in [
        (
            "[sft]\nsteps = -1\n",
            "bad.toml: sft.steps: invalid value: integer `-1`, expected a whole number, 0 or more",
        ),
        (
            "[rl]\nstepz = 2\n",
            "bad.toml: rl.stepz: unknown key (did you mean `steps`?)",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let output = train(&[
            "--config",
            config.to_str().unwrap(),
            "--config",
            good.to_str().unwrap(),
            "--run-dir",
            run,
        ]);
        assert_refused(&output, said);
        assert!(
            !stderr(&output).contains("good.toml"),
            "{}",
            stderr(&output)
        );
    }
    // A stage whose steps are none would train nothing.
    std::fs::write(&config, "[sft]\nsteps = 0\n").unwrap();
    let output = train(&[
        "--config",
        config.to_str().unwrap(),
        "--stage",
        "sft",
        "--print-config",
    ]);
    assert_refused(
        &output,
        "--stage sft trains for sft.steps, which is 0: nothing to train",
    );

    // Settings the model or the machine cannot honour — bf16 products need
    // the GPU backend, the smoke run's tiny model has no `<think>` to leave
    // empty — are refused, and leave nothing behind that would stand in the
    // way of running again.
    for (name, text, said) in [
        ("bf16", "precision = \"bf16\"", "--device cuda"),
        (
            "unthinking",
            "thinking = \"off\"",
            "model.thinking off is for models",
        ),
    ] {
        std::fs::write(&config, format!("[model]\n{text}\n")).unwrap();
        let run = dir.path().join(name);
        let output = train(&[
            "--preset",
            "smoke",
            "--config",
            config.to_str().unwrap(),
            "--run-dir",
            run.to_str().unwrap(),
        ]);
        assert_refused(&output, said);
        assert!(!run.exists(), "a run that never started is not kept");
    }

    // A new run refuses a directory that holds anything but a run: it
    // would write over the files there.
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("metrics.jsonl"), "mine\n").unwrap();
    let output = train(&["--preset", "smoke", "--run-dir", busy.to_str().unwrap()]);
    assert_refused(&output, "is not empty and holds no run");
    assert_eq!(
        std::fs::read_to_string(busy.join("metrics.jsonl")).unwrap(),
        "mine\n"
    );
    // Nor is it a run to resume.
    let output = train(&["--run-dir", busy.to_str().unwrap(), "--resume"]);
    assert_refused(&output, "holds no run to resume (no config.toml)");

    let output = train(&["--run-dir", run, "--resume"]);
    assert_refused(&output, "does not exist: a new run goes without --resume");
    // A resumed run keeps its own preset, as its own config and bundles.
    let output = train(&["--run-dir", run, "--resume", "--preset", "smoke"]);
    assert_refused(&output, "--preset");

    // One environment named twice is refused before anything is written.
    let shop = export_example(dir.path());
    let twice = dir.path().join("twice");
    let shop = shop.to_str().unwrap();
    let output = train(&[
        "--env",
        shop,
        "--env",
        shop,
        "--run-dir",
        twice.to_str().unwrap(),
    ]);
    assert_refused(&output, "are both environment `shop`");
    assert!(!twice.exists(), "a run that never started is not kept");

    // `--print-config` needs no run directory; a run needs one.
    let output = train(&["--preset", "smoke", "--print-config"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let printed: toml::Table = toml::from_str(&stdout(&output)).unwrap();
    assert_eq!(printed["model"]["init"].as_str(), Some("tiny"));
    assert_eq!(printed["tasks"]["heldout"].as_str(), Some("covered"));
    // A key left unset is listed too, as a comment in its table.
    assert!(
        stdout(&output).contains("[model]\n# tiny_context = 2048  # "),
        "{}",
        stdout(&output)
    );
    let output = train(&["--preset", "smoke"]);
    assert_refused(&output, "--run-dir");
    // Flags it would ignore are refused: a new run's directory (whose
    // config it would not print), a run's environments, limits or device.
    let output = train(&["--print-config", "--run-dir", "runs/x"]);
    assert_refused(&output, "without --resume, leave out --run-dir");
    for flag in [["--env", "x"], ["--time-limit", "5"], ["--device", "cpu"]] {
        let output = train(&[&["--print-config"], &flag[..]].concat());
        assert_refused(&output, "cannot be used with");
    }
    let output = train(&["--run-dir", "unused", "--time-limit=-1"]);
    assert_refused(&output, "`-1` is not a number of seconds from 0 to a year");
    // A resumed run keeps its own stages, even where the flag names the
    // default.
    let output = train(&["--run-dir", "unused", "--resume", "--stage", "all"]);
    assert_refused(&output, "cannot be used with");

    // `--stage` runs one stage: the other's steps are zero in the saved config.
    for (stage, zeroed, kept) in [("sft", "rl", "sft"), ("rl", "sft", "rl")] {
        let output = train(&["--preset", "smoke", "--stage", stage, "--print-config"]);
        assert!(output.status.success(), "{}", stderr(&output));
        let printed: toml::Table = toml::from_str(&stdout(&output)).unwrap();
        assert_eq!(
            printed[zeroed]["steps"].as_integer(),
            Some(0),
            "--stage {stage}"
        );
        assert!(
            printed[kept]["steps"].as_integer().unwrap() > 0,
            "--stage {stage}"
        );
    }
}

#[test]
fn a_run_that_holds_out_no_task_reports_no_held_out_success() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("all.toml");
    std::fs::write(
        &config,
        "[tasks]\nheldout_fraction = 0.0\n[sft]\nsteps = 2\n[rl]\nsteps = 1\n",
    )
    .unwrap();
    let run = dir.path().join("run");
    let summary = summary(&train(&[
        "--preset",
        "smoke",
        "--config",
        config.to_str().unwrap(),
        "--run-dir",
        run.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(summary["complete"], true);
    assert_eq!(summary["heldout_tasks"], 0);
    // Not a success rate of 0: no rate at all.
    for key in ["before", "after_sft", "after"] {
        let key = format!("heldout_success_{key}");
        assert_eq!(summary.get(&key), Some(&Value::Null), "{summary}");
    }
    let metrics = jsonl(&run.join("metrics.jsonl"));
    assert!(metrics.iter().all(|m| m["kind"] != "eval"));
    assert_eq!(metrics.len(), 3, "two SFT steps and one RL step");
}

/// The smoke run's lamp domain, synthesized into `dir/envs`.
fn synthesized_lamps(dir: &Path) -> PathBuf {
    let envs = dir.join("envs");
    let output = forge(&[
        "synth",
        "env-templates/train/lamps.toml",
        "--out",
        envs.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    envs
}

#[test]
fn the_gpu_training_script_runs_on_the_cpu() {
    // Its plumbing, with a tiny model and a small overlay: SFT under a time
    // limit, then four RL runs from the SFT model side by side, then the table.
    let dir = tempfile::tempdir().unwrap();
    let envs = synthesized_lamps(dir.path());
    let small = dir.path().join("small.toml");
    std::fs::write(
        &small,
        "[tasks]\nheldout_fraction = 0.1\nmax_turns = 3\n[sft]\nsteps = 2\nbatch = 2\n\
         [rl]\nsteps = 1\ntasks_per_step = 1\nrollouts = 2\nmax_draw_factor = 1\n\
         max_new_tokens = 8\n[eval]\nmax_new_tokens = 8\n",
    )
    .unwrap();
    let runs = dir.path().join("runs");
    let output = Command::new("bash")
        .arg("scripts/gpu/train-smollm2.sh")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("FORGE", env!("CARGO_BIN_EXE_forge"))
        .env("FORGE_CACHE_DIR", forge_cache_dir())
        .env("MODEL", "tiny")
        .env("ENVS", &envs)
        .env("OUT", &runs)
        .env("DEVICE", "cpu")
        .env("EXTRA_CONFIG", &small)
        .output()
        .unwrap();
    let table = stdout(&output);
    assert!(output.status.success(), "{table}{}", stderr(&output));
    // The table is `forge compare`'s, and its numbers are in compare.json.
    let compared: Value =
        serde_json::from_str(&std::fs::read_to_string(runs.join("compare.json")).unwrap()).unwrap();
    let rows = compared["runs"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|row| row["run"].as_str().unwrap())
        .collect();
    let rl_runs = [
        "erpo",
        "grpo",
        "erpo-unstable-masked",
        "erpo-unstable-unmasked",
    ];
    assert_eq!(names[0], "sft");
    assert_eq!(names[1..], rl_runs);
    let after_sft = rows[0]["heldout_after"].as_f64();
    assert!(
        after_sft.is_some(),
        "the SFT run ends with an evaluation: {}",
        rows[0]
    );
    for row in rows {
        let continues_sft = row["run"] != "sft";
        let steps = if continues_sft { (0, 1) } else { (2, 0) };
        assert_eq!(
            (row["sft_steps"].as_u64(), row["rl_steps"].as_u64()),
            (Some(steps.0), Some(steps.1)),
            "{row}"
        );
        // The largest gradient norm: the untrained tiny model's RL step may
        // have nothing to learn from, and then no gradient.
        let grad_norm = row["grad_norm_max"].as_f64();
        assert!(
            grad_norm.is_some_and(|norm| norm > 0.0) || (continues_sft && grad_norm.is_none()),
            "{row}"
        );
        if continues_sft {
            // The RL runs start from the SFT model, where its curve ended.
            assert_eq!(row["starts_from"], "sft", "{row}");
            assert_eq!(row["heldout_before"].as_f64(), after_sft, "{row}");
        }
    }
    for run in rl_runs {
        assert!(
            table.contains(&format!("{run} starts from sft's model at step 2")),
            "{table}"
        );
    }
    // Each RL run against the SFT run, task by task on the held-out tasks
    // of their last evaluations.
    let against = compared["against_first"].as_array().unwrap();
    assert_eq!(against.len(), rl_runs.len());
    for row in against {
        assert_eq!(row["baseline"], "sft", "{row}");
        let shared = row["shared_tasks"].as_u64().unwrap();
        let counted = ["better", "worse"]
            .iter()
            .map(|how| row[how].as_array().unwrap().len() as u64)
            .sum::<u64>()
            + row["same"].as_u64().unwrap();
        assert!(shared > 0 && counted == shared, "{row}");
    }
    // What sets the runs apart, setting by setting, in the runs' order.
    let differences = compared["differences"].as_array().unwrap();
    let values = |key: &str| {
        differences
            .iter()
            .find(|difference| difference["key"] == key)
            .unwrap_or_else(|| panic!("{key} is not among the differences: {compared}"))["values"]
            .clone()
    };
    assert_eq!(values("rl.scaling")[2], "grpo");
    assert_eq!(values("rl.masking")[4], false);
    assert_eq!(values("rl.user_instability")[3], 0.2);
    let init = values("model.init");
    for at in 1..=4 {
        assert!(init[at].as_str().unwrap().ends_with("sft/final"), "{init}");
    }
    assert!(
        !differences
            .iter()
            .any(|difference| difference["key"] == "seed")
    );
    let svg = std::fs::read_to_string(runs.join("compare.svg")).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("erpo-unstable-unmasked"),
        "{svg}"
    );
}

#[test]
fn a_run_on_two_environments_reports_held_out_success_for_each() {
    let dir = tempfile::tempdir().unwrap();
    let envs = synthesized_lamps(dir.path());
    let shop = export_example(dir.path());
    let small = dir.path().join("small.toml");
    std::fs::write(
        &small,
        "[tasks]\nmax_turns = 2\n[sft]\nsteps = 2\n[rl]\nsteps = 0\n[eval]\nmax_new_tokens = 8\n",
    )
    .unwrap();
    let run = dir.path().join("run");
    summary(&train(&[
        "--preset",
        "smoke",
        "--config",
        small.to_str().unwrap(),
        "--env",
        envs.join("lamps").to_str().unwrap(),
        "--env",
        shop.to_str().unwrap(),
        "--run-dir",
        run.to_str().unwrap(),
        "--json",
    ]));
    let evals: Vec<Value> = jsonl(&run.join("metrics.jsonl"))
        .into_iter()
        .filter(|line| line["kind"] == "eval")
        .collect();
    assert_eq!(evals.len(), 2, "at the start and the end");
    for eval in &evals {
        let by_environment = eval["heldout_success_by_environment"].as_object().unwrap();
        let names: Vec<&str> = by_environment.keys().map(String::as_str).collect();
        assert_eq!(names, ["lamps", "shop"], "{eval}");
    }
    // `forge compare` shows them side by side, before and after.
    let output = forge(&["compare", run.to_str().unwrap()]);
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    let header = text
        .lines()
        .find(|line| line.contains("lamps"))
        .unwrap_or_else(|| panic!("no column per environment: {text}"));
    assert!(header.contains("shop"), "{text}");
    assert!(
        text.contains("held-out success by environment, before → after"),
        "{text}"
    );

    // `--tasks heldout:RUN` plays exactly the tasks the run evaluated (and
    // never trained on), environment by environment.
    let evaluated = jsonl(&run.join("episodes/eval-step-000000.jsonl"));
    let heldout = format!("heldout:{}", run.display());
    for env in [envs.join("lamps"), shop.clone()] {
        let output = forge(&[
            "run",
            "--env",
            env.to_str().unwrap(),
            "--tasks",
            &heldout,
            "--json",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let played: Vec<String> = json_lines(&output)
            .iter()
            .filter_map(|line| line["task_id"].as_str().map(str::to_owned))
            .collect();
        let name = played[0].split('-').next().unwrap().to_owned();
        let mut expected: Vec<String> = evaluated
            .iter()
            .map(|episode| episode["task_id"].as_str().unwrap().to_owned())
            .filter(|task| task.starts_with(&name))
            .collect();
        expected.sort();
        assert_eq!(played, expected, "{}", env.display());
    }
    // And plays them as the run evaluated them: under the run's limits, its
    // final model plays each held-out episode of its last evaluation again.
    let replayed = dir.path().join("heldout.jsonl");
    let output = forge(&[
        "run",
        "--env",
        envs.join("lamps").to_str().unwrap(),
        "--tasks",
        &heldout,
        "--policy",
        "model",
        "--model",
        run.join("final").to_str().unwrap(),
        "--out",
        replayed.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--max-turns 2, --max-new-tokens 8"),
        "{}",
        stderr(&output)
    );
    let task = |episode: &Value| episode["task_id"].as_str().unwrap().to_owned();
    let mut evaluated = jsonl(&run.join("episodes/eval-step-000002.jsonl"));
    evaluated.retain(|episode| task(episode).starts_with("lamps"));
    evaluated.sort_by_key(task);
    let replayed = jsonl(&replayed);
    assert_eq!(replayed.len(), evaluated.len());
    for (played, evaluated) in replayed.iter().zip(evaluated) {
        for key in ["task_id", "max_turns", "messages", "steps", "termination"] {
            assert_eq!(played[key], evaluated[key], "{key}");
        }
    }
    // An environment the run does not train on has no held-out tasks of it.
    let other = dir.path().join("other");
    let output = forge(&["example", other.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let manifest = other.join("manifest.json");
    let renamed = std::fs::read_to_string(&manifest)
        .unwrap()
        .replacen("\"shop\"", "\"other\"", 1);
    std::fs::write(&manifest, renamed).unwrap();
    let output = forge(&["run", "--env", other.to_str().unwrap(), "--tasks", &heldout]);
    assert_refused(&output, "is not one the run in");
    // Without --env, the run's environment is played, where it has one.
    let output = forge(&["run", "--tasks", &heldout]);
    assert_refused(&output, "trains on 2 environments (lamps (");
    assert_refused(
        &output,
        "name the one whose held-out tasks to play with --env",
    );
}

#[test]
fn compare_pairs_a_run_stopped_unevaluated_through_its_continuations_first_evaluation() {
    // SFT stopped by `--max-steps` (no evaluation at its last step), then
    // RL from its last checkpoint, which evaluates that model at step 0.
    let dir = tempfile::tempdir().unwrap();
    let envs = synthesized_lamps(dir.path());
    let lamps = envs.join("lamps");
    let sft = dir.path().join("sft");
    let small = dir.path().join("sft.toml");
    std::fs::write(
        &small,
        "[tasks]\nmax_turns = 2\n[sft]\nsteps = 4\n[eval]\nmax_new_tokens = 8\nat_start = false\n",
    )
    .unwrap();
    let output = train(&[
        "--preset",
        "smoke",
        "--stage",
        "sft",
        "--config",
        small.to_str().unwrap(),
        "--env",
        lamps.to_str().unwrap(),
        "--max-steps",
        "2",
        "--run-dir",
        sft.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let rl = rl_run(
        dir.path(),
        "rl",
        &lamps,
        &format!(
            "[model]\ninit = \"{}\"\n[sft]\nsteps = 0\n[tasks]\nmax_turns = 2\n[rl]\nsteps = 1\n\
             tasks_per_step = 2\nrollouts = 2\nmax_new_tokens = 6\n[eval]\nmax_new_tokens = 8\n",
            sft.join("checkpoints/step-000002").display()
        ),
    );
    let output = forge(&[
        "compare",
        "--json",
        sft.to_str().unwrap(),
        rl.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let compared: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let against = &compared["against_first"][0];
    assert!(against["shared_tasks"].as_u64().unwrap() > 0, "{against}");

    // The RL run's weights are in its checkpoints: the model it started
    // from may move away.
    std::fs::rename(&sft, dir.path().join("sft-moved")).unwrap();
    let resume = ["--run-dir", rl.to_str().unwrap(), "--resume", "--json"];
    assert_eq!(summary(&train(&resume))["complete"], true);
}

#[test]
fn compare_refuses_a_directory_that_is_neither_run_nor_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let output = forge(&["compare", dir.path().to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("is neither a `forge train` run directory (it holds no config.toml) nor a `forge eval` results directory"),
        "{}",
        stderr(&output)
    );
}

/// The example shop with each task's email as a fact its user must state,
/// and the emails by task.
fn shop_with_user_facts(dir: &Path) -> (PathBuf, std::collections::BTreeMap<String, String>) {
    let bundle = export_example(dir);
    let path = bundle.join("tasks.jsonl");
    let mut emails = std::collections::BTreeMap::new();
    let tasks: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut task: Value = serde_json::from_str(line).unwrap();
            let instruction = task["instruction"].as_str().unwrap().to_owned();
            if let Some(start) = instruction.find("(email ") {
                let rest = &instruction[start + "(email ".len()..];
                let email = rest[..rest.find(')').unwrap()].to_owned();
                task["user_facts"] = json!({ "email": email });
                emails.insert(task["id"].as_str().unwrap().to_owned(), email);
            }
            task.to_string()
        })
        .collect();
    std::fs::write(&path, tasks.join("\n") + "\n").unwrap();
    forget_hashes(&bundle);
    (bundle, emails)
}

/// One short RL step of the tiny policy on `env` with `extra` config, its
/// rollouts saved; returns the run directory.
fn short_rl_run(dir: &Path, name: &str, env: &Path, extra: &str) -> PathBuf {
    short_rl_run_told(dir, name, env, extra).0
}

/// [`short_rl_run`], with what it wrote to stderr.
fn short_rl_run_told(dir: &Path, name: &str, env: &Path, extra: &str) -> (PathBuf, String) {
    let config = format!(
        "[sft]\nsteps = 0\n[tasks]\nmax_turns = 2\n[rl]\nsteps = 1\ntasks_per_step = 2\n\
         rollouts = 2\nmax_new_tokens = 6\ndynamic_sampling = false\nsave_rollouts = true\n\
         [eval]\nat_start = false\nmax_new_tokens = 4\n{extra}"
    );
    rl_run_told(dir, name, env, &config)
}

/// A smoke-preset run named `name` in `dir` on `env` with `config` (TOML)
/// over the preset; returns the run directory.
fn rl_run(dir: &Path, name: &str, env: &Path, config: &str) -> PathBuf {
    rl_run_told(dir, name, env, config).0
}

/// [`rl_run`], with what it wrote to stderr.
fn rl_run_told(dir: &Path, name: &str, env: &Path, config: &str) -> (PathBuf, String) {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    let run = dir.join(name);
    let output = train(&[
        "--preset",
        "smoke",
        "--config",
        path.to_str().unwrap(),
        "--env",
        env.to_str().unwrap(),
        "--run-dir",
        run.to_str().unwrap(),
        "--json",
    ]);
    summary(&output);
    (run, stderr(&output))
}

fn rl_step(run: &Path) -> (Value, Vec<Value>) {
    let step = jsonl(&run.join("metrics.jsonl"))
        .into_iter()
        .find(|line| line["kind"] == "rl")
        .expect("an RL step");
    (step, jsonl(&run.join("episodes/rl-step-000001.jsonl")))
}

fn user_messages(episode: &Value) -> Vec<String> {
    episode["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str().map(str::to_owned))
        .collect()
}

/// The length of each rollout's first prompt.
fn first_prompts(episodes: &[Value]) -> Vec<usize> {
    episodes
        .iter()
        .filter_map(|episode| episode["policy_trace"]["turns"][0]["prompt_ids"].as_array())
        .map(Vec::len)
        .collect()
}

#[test]
fn a_dialogue_that_outgrows_the_model_context_ends_there_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let replays = |run: &Path| {
        let episodes = run.join("episodes/rl-step-000001.jsonl");
        assert_replays(&episodes, &bundle);
    };
    // The prompts the tiny model reads when its context is unbounded.
    let run = short_rl_run(dir.path(), "unbounded", &bundle, "");
    // The KL anchor is a model directory the run's prompt runs as well.
    assert!(run.join("reference/prompt.json").is_file());
    let (_, rollouts) = rl_step(&run);
    let unbounded = first_prompts(&rollouts);
    let shortest = *unbounded.iter().min().unwrap();
    let longest = *unbounded.iter().max().unwrap();

    // Shorter than every first prompt: no rollout takes a turn. Each ends
    // there, is judged as it stands, and replays.
    let context = shortest - 1;
    let run = short_rl_run(
        dir.path(),
        "full",
        &bundle,
        &format!("[model]\ntiny_context = {context}\n"),
    );
    let (step, episodes) = rl_step(&run);
    assert_eq!(step["context_full_share"], 1.0, "{step}");
    for episode in &episodes {
        assert_eq!(episode["termination"], "context_full");
        assert_eq!(episode["policy_trace"]["turns"], json!([]));
        assert_eq!(episode["reward"], 0.0);
    }
    replays(&run);
    // `forge model prompts` foresees it: the gold episodes' first prompts
    // are the rollouts', and none fits.
    let output = forge(&[
        "model",
        "prompts",
        run.join("final").to_str().unwrap(),
        "--env",
        bundle.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let mut lines = json_lines(&output);
    let summary = lines.pop().unwrap();
    assert_eq!(summary["context"], context, "{summary}");
    assert_eq!(summary["tasks_past_context"], summary["tasks"], "{summary}");
    for rollout in &rollouts {
        let task = lines
            .iter()
            .find(|task| task["task"] == rollout["task_id"])
            .unwrap();
        let prompt = &rollout["policy_trace"]["turns"][0]["prompt_ids"];
        assert_eq!(
            task["first_prompt_tokens"],
            prompt.as_array().unwrap().len(),
            "{task}"
        );
    }
    // Nor does a gold turn fit, so SFT has nothing to learn from.
    let config = dir.path().join("sft.toml");
    std::fs::write(
        &config,
        format!("[model]\ntiny_context = {context}\n[sft]\nsteps = 1\n"),
    )
    .unwrap();
    let output = train(&[
        "--preset",
        "smoke",
        "--config",
        config.to_str().unwrap(),
        "--env",
        bundle.to_str().unwrap(),
        "--run-dir",
        dir.path().join("sft").to_str().unwrap(),
    ]);
    assert_refused(&output, "no gold turn fits in the model's context");
    assert!(
        !dir.path().join("sft").exists(),
        "a run that fails before it records anything leaves no run behind"
    );

    // A few tokens past the longest: turns are sampled up to where the
    // context ends, never past it.
    let context = longest + 3;
    let run = short_rl_run(
        dir.path(),
        "tight",
        &bundle,
        &format!("[model]\ntiny_context = {context}\n"),
    );
    let (step, episodes) = rl_step(&run);
    assert!(step["context_full_share"].is_number(), "{step}");
    assert!(step["truncated_share"].as_f64().unwrap() > 0.0, "{step}");
    let turns: Vec<&Value> = episodes
        .iter()
        .flat_map(|episode| episode["policy_trace"]["turns"].as_array().unwrap())
        .collect();
    let read = |turn: &Value| {
        turn["prompt_ids"].as_array().unwrap().len() + turn["ids"].as_array().unwrap().len()
    };
    assert!(turns.iter().all(|turn| read(turn) <= context));
    assert!(
        turns
            .iter()
            .any(|turn| read(turn) == context && turn["stopped"] == false),
        "a turn cut where the context ends"
    );
    replays(&run);
}

#[test]
fn two_draws_of_one_task_in_a_step_play_apart() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let tasks = bundle.join("tasks.jsonl");
    let first = std::fs::read_to_string(&tasks)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(&tasks, first + "\n").unwrap();
    forget_hashes(&bundle);

    // Two tasks a step from a queue of one: the same task is drawn twice,
    // and its four rollouts must be four samples, not two played twice.
    let (_, rollouts) = rl_step(&short_rl_run(dir.path(), "twice", &bundle, ""));
    assert_eq!(rollouts.len(), 4, "2 draws × 2 rollouts");
    let seeds: std::collections::BTreeSet<u64> = rollouts
        .iter()
        .map(|episode| episode["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seeds.len(),
        4,
        "every rollout has a seed of its own: {seeds:?}"
    );
}

#[test]
fn rollouts_are_played_against_model_users_and_judged_by_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let (shop, emails) = shop_with_user_facts(dir.path());

    // A local model plays the user: its turns are its own, seeded, and the
    // rule judge masks the rollouts in which it never states the email.
    let local = "[user]\nkind = \"model\"\nmodel = \"tiny\"\nmax_new_tokens = 10\n";
    let (step, rollouts) = rl_step(&short_rl_run(dir.path(), "local", &shop, local));
    assert_eq!(rollouts.len(), 4, "2 tasks × 2 rollouts");
    for episode in &rollouts {
        let said = user_messages(episode);
        assert!(!said.is_empty(), "the model user opened: {episode}");
        assert_eq!(
            episode["user"],
            serde_json::json!({"kind": "model", "name": "model:tiny"})
        );
        let task = episode["task_id"].as_str().unwrap();
        assert!(
            !said[0].contains(&emails[task]),
            "the opening is the model's, not the instruction: {}",
            said[0]
        );
    }
    assert_eq!(step["masked_share"], 1.0, "{step}");
    let (_, again) = rl_step(&short_rl_run(dir.path(), "local-again", &shop, local));
    assert_eq!(again, rollouts, "the same seed plays the same episodes");

    // A remote model plays the user and another judges it, which fails
    // its first request once.
    let judge_failed = std::sync::atomic::AtomicBool::new(false);
    let server = StubServer::start(200, move |request, _| {
        let messages = request["messages"].as_array().unwrap();
        let system = messages[0]["content"].as_str().unwrap_or_default();
        if request["model"] == "judge-model" {
            if !judge_failed.swap(true, std::sync::atomic::Ordering::Relaxed) {
                return (503, "{\"error\": \"overloaded\"}".to_owned());
            }
            return completion("{\"reasoning\": \"stub\", \"unreliable\": true}");
        }
        if messages.len() > 2 {
            return completion("###STOP###");
        }
        // The user opens with its situation as it was told it.
        let situation = system
            .split("Your situation and goal:\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\nSay one message").next())
            .unwrap_or_default();
        completion(situation)
    });
    let remote = format!(
        "[user]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"user-model\"\n\
         [judge]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"judge-model\"\n",
        url = server.url
    );
    let (run, told) = short_rl_run_told(dir.path(), "remote", &shop, &remote);
    assert!(
        told.contains(&format!(
            "warning: {}/chat/completions answered HTTP 503: {{\"error\": \"overloaded\"}}; \
             retry 1 of 6 in 1.0 s",
            server.url
        )),
        "the judge's retry is told of: {told}"
    );
    let (step, rollouts) = rl_step(&run);
    for episode in &rollouts {
        let task = episode["task_id"].as_str().unwrap();
        assert!(
            user_messages(episode)[0].contains(&emails[task]),
            "the remote user states its email: {episode}"
        );
        assert_eq!(episode["user"]["name"], "openai:user-model");
    }
    assert_eq!(
        step["masked_share"], 1.0,
        "the judge model, not the rule (which finds every email stated), decides: {step}"
    );
    assert!(
        told.contains("note: the RL step had nothing to learn from"),
        "every rollout masked, the run says it learned nothing: {told}"
    );
    let requests = server.requests.lock().unwrap();
    let judged = requests
        .iter()
        .filter(|request| request["model"] == "judge-model")
        .count();
    assert_eq!(
        judged, 5,
        "one verdict per rollout, one of them asked twice"
    );
    assert!(
        requests
            .iter()
            .filter(|request| request["model"] == "user-model")
            .all(|request| request["temperature"] == 0.7),
        "the remote user samples at user.temperature"
    );
    // Each of its requests seeded apart: rollouts of a task draw apart.
    let seeds: std::collections::BTreeSet<u64> = requests
        .iter()
        .filter(|request| request["model"] == "user-model")
        .map(|request| request["seed"].as_u64().expect("a seed"))
        .collect();
    let asked = requests
        .iter()
        .filter(|request| request["model"] == "user-model")
        .count();
    assert_eq!(seeds.len(), asked);
    assert!(requests.iter().any(|request| {
        request["model"] == "judge-model"
            && request["messages"][1]["content"]
                .as_str()
                .is_some_and(|prompt| prompt.contains("The facts it was given:\n- "))
    }));
}

#[test]
fn a_trained_model_plays_forge_run_and_eval_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let shop = export_example(dir.path());
    let model = short_rl_run(dir.path(), "tiny", &shop, "").join("final");
    let local = [
        "--env",
        shop.to_str().unwrap(),
        "--policy",
        "model",
        "--model",
        model.to_str().unwrap(),
    ];
    let play = |command: &str, out: &Path, extra: &[&str]| {
        let mut args = vec![command];
        args.extend_from_slice(&local);
        args.extend_from_slice(&[
            "--tasks",
            "shop-01,shop-02,shop-03",
            "--trials",
            "2",
            "--temperature",
            "1",
            "--max-new-tokens",
            "8",
            "--max-turns",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        args.extend_from_slice(extra);
        let output = forge(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        output
    };

    // Six episodes in batches of four: two batches, recorded in task and
    // trial order, each with the tokens it sampled.
    let first = dir.path().join("first.jsonl");
    let lines = json_lines(&play("run", &first, &["--batch", "4"]));
    let order: Vec<(&str, u64)> = lines[..6]
        .iter()
        .map(|line| {
            (
                line["task_id"].as_str().unwrap(),
                line["trial"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("shop-01", 0),
            ("shop-01", 1),
            ("shop-02", 0),
            ("shop-02", 1),
            ("shop-03", 0),
            ("shop-03", 1)
        ]
    );
    assert_eq!(lines[6]["episodes"], 6);
    let records = jsonl(&first);
    assert_eq!(records.len(), 6);
    for record in &records {
        let label = format!("model:{}", model.display());
        assert_eq!(record["policy"].as_str(), Some(label.as_str()));
        let turn = &record["policy_trace"]["turns"][0];
        assert_eq!(
            turn["ids"].as_array().unwrap().len(),
            turn["logprobs"].as_array().unwrap().len()
        );
    }
    // Trials differ by their seeds; the same seed and batch size replay them.
    assert_ne!(records[0]["messages"], records[1]["messages"]);
    let again = dir.path().join("again.jsonl");
    play("run", &again, &["--batch", "4"]);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&again).unwrap()
    );

    // One at a time, each episode after the first begins from what the one
    // before read of its prompt, and plays as it did in the batch of four
    // (the same tokens; log-probs equal up to rounding).
    let single = dir.path().join("single.jsonl");
    play("run", &single, &["--batch", "1"]);
    for (batched, alone) in records.iter().zip(&jsonl(&single)) {
        let turns = |record: &Value| record["policy_trace"]["turns"].as_array().unwrap().clone();
        assert_eq!(turns(batched).len(), turns(alone).len());
        for (a, b) in turns(batched).iter().zip(&turns(alone)) {
            assert_eq!(a["ids"], b["ids"]);
            for (x, y) in a["logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .zip(b["logprobs"].as_array().unwrap())
            {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!((x - y).abs() < 1e-4, "{x} vs {y}");
            }
        }
    }

    // forge eval plays the same way, and a second eval finds every trial done.
    let evals = dir.path().join("eval");
    let report = json_lines(&play("eval", &evals, &["--batch", "3"]))
        .pop()
        .unwrap();
    assert_eq!(report["tasks"], 3, "{report}");
    let trajectories = |dir: &Path| -> usize {
        walk(dir)
            .iter()
            .filter(|path| path.ends_with("trajectories.jsonl"))
            .map(|path| jsonl(path).len())
            .sum()
    };
    assert_eq!(trajectories(&evals), 6);
    play("eval", &evals, &["--batch", "3"]);
    assert_eq!(
        trajectories(&evals),
        6,
        "a resumed eval plays nothing again"
    );

    // Mixed precision needs a backend with bf16, which the CPU's lacks.
    let output = forge(&[&["run"], &local[..], &["--precision", "bf16"]].concat());
    assert_refused(&output, "bf16");
    // An evaluation that fails before its first episode leaves its
    // directory free for the next.
    let failed = dir.path().join("failed");
    let out = ["--out", failed.to_str().unwrap(), "--precision", "bf16"];
    assert_refused(&forge(&[&["eval"], &local[..], &out].concat()), "bf16");
    play("eval", &failed, &[]);
    // A device this build lacks is refused, naming the feature.
    if !cfg!(feature = "cuda") {
        let output = forge(&[&["run"], &local[..], &["--device", "cuda"]].concat());
        assert_refused(&output, "--features cuda");
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_suite_trains_on_its_training_split_and_holds_out_its_test_split() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("splits.toml");
    std::fs::write(
        &config,
        "[tasks]\ntrain_split = \"train\"\nheldout_split = \"test\"\nmax_turns = 2\n\
         [sft]\nsteps = 2\nbatch = 2\n[rl]\nsteps = 0\n[eval]\nmax_new_tokens = 4\n",
    )
    .unwrap();
    let run = dir.path().join("run");
    let args = |run: &Path| -> Vec<String> {
        [
            "--preset",
            "smoke",
            "--suite",
            "tau2-bench/telecom",
            "--data",
            "../shared/benchmarks",
            "--config",
            config.to_str().unwrap(),
            "--run-dir",
            run.to_str().unwrap(),
            "--json",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let mut first = args(&run);
    first.extend(["--max-steps".to_owned(), "1".to_owned()]);
    let stopped = summary(&train(&as_strs(&first)));
    // τ²-bench's telecom test split: 40 tasks, whose gold actions are
    // mostly the user's own calls (SFT's dialogues ask the user for them).
    assert_eq!(stopped["heldout_tasks"], 40);
    assert_eq!(stopped["complete"], false);
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("envs.json")).unwrap()).unwrap();
    assert_eq!(recorded[0]["suite"], "tau2-bench/telecom");
    // The suite comes back from the record on resume, and only from it.
    let run_dir = run.to_str().unwrap();
    let output = train(&[
        "--run-dir",
        run_dir,
        "--resume",
        "--suite",
        "tau2-bench/telecom",
        "--data",
        "../shared/benchmarks",
    ]);
    assert_refused(&output, "drop --env and --suite");
    let resumed = summary(&train(&["--run-dir", run_dir, "--resume", "--json"]));
    assert_eq!(resumed["complete"], true);
    assert_eq!(resumed["heldout_tasks"], 40);

    // A split the environment lacks is named, with those it has.
    std::fs::write(
        &config,
        "[tasks]\nheldout_split = \"dev\"\n[sft]\nsteps = 1\n[rl]\nsteps = 0\n",
    )
    .unwrap();
    let output = train(&as_strs(&args(&dir.path().join("bad"))));
    assert_refused(
        &output,
        "tasks.heldout_split: environment `tau2-bench-telecom` has no split `dev` (it has `base`, `full`, `small`, `test`, `train`)",
    );
}
