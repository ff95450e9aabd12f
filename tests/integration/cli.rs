//! The `forge` CLI end to end on the built-in example environment.

use crate::common::{
    assert_refused, export_example, forge, forget_hashes, json_lines, stderr, stdout,
};
use forge_model::tokenizer::ModelTokenizer;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn summary(lines: &[Value]) -> &Value {
    let last = lines.last().expect("output");
    assert_eq!(
        last["summary"], true,
        "the last line is the summary: {last}"
    );
    last
}

fn run_json(args: &[&str]) -> Vec<Value> {
    let mut full = vec!["run", "--json"];
    full.extend_from_slice(args);
    let output = forge(&full);
    assert!(
        output.status.success(),
        "forge {full:?} failed: {}",
        stderr(&output)
    );
    json_lines(&output)
}

#[test]
fn gold_policy_solves_every_task() {
    let lines = run_json(&["--policy", "gold"]);
    let summary = summary(&lines);
    assert!(summary["episodes"].as_u64().unwrap() >= 20);
    assert_eq!(summary["success_rate"], 1.0);
    for episode in &lines[..lines.len() - 1] {
        assert_eq!(episode["reward"], 1.0, "{episode}");
        assert_eq!(episode["partial_credit"], 1.0, "{episode}");
    }
}

#[test]
fn random_policy_scores_chance_and_is_seeded() {
    let first = run_json(&["--policy", "random", "--seed", "3"]);
    let again = run_json(&["--policy", "random", "--seed", "3"]);
    let other = run_json(&["--policy", "random", "--seed", "4"]);
    assert_eq!(first, again, "same seed, same episodes");
    assert_ne!(first, other, "another seed, other episodes");
    let rate = summary(&first)["success_rate"].as_f64().unwrap();
    assert!(
        rate < 0.2,
        "random calls should rarely solve a task, got {rate}"
    );
}

#[test]
fn a_policy_that_does_nothing_never_scores() {
    // Zero turns: the agent never acts, so no task's gold state or outputs are met.
    let lines = run_json(&["--policy", "gold", "--max-turns", "0"]);
    assert_eq!(summary(&lines)["success_rate"], 0.0);
}

#[test]
fn same_seed_gives_byte_identical_trajectory_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    for path in [&a, &b] {
        let output = forge(&[
            "run",
            "--policy",
            "random",
            "--seed",
            "11",
            "--out",
            path.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(!a.is_empty());
    assert!(a == b, "the two trajectory files differ");
}

fn record(dir: &Path, policy: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{policy}.jsonl"));
    let output = forge(&[
        "run",
        "--policy",
        policy,
        "--seed",
        "5",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    path
}

#[test]
fn replay_proves_a_recorded_run_identical() {
    let dir = tempfile::tempdir().unwrap();
    for policy in ["gold", "random"] {
        let path = record(dir.path(), policy);
        let output = forge(&["replay", path.to_str().unwrap()]);
        assert!(
            output.status.success(),
            "replay of {policy} failed: {}{}",
            stdout(&output),
            stderr(&output)
        );
        assert!(stdout(&output).contains("replayed byte-identically"));
    }
    // Records of the earlier formats replay as identical as they were
    // written: `/3` is `/4` without text beside calls, `/2` is `/3`
    // without model users, `/1` names no user.
    let path = dir.path().join("gold.jsonl");
    let records: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for format in [
        "forge.trajectory/3",
        "forge.trajectory/2",
        "forge.trajectory/1",
    ] {
        let older: String = records
            .iter()
            .map(|record| {
                let mut record = record.clone();
                record["format"] = json!(format);
                if format.ends_with("/1") {
                    record.as_object_mut().unwrap().remove("user");
                }
                format!("{record}\n")
            })
            .collect();
        let file = dir.path().join("older.jsonl");
        std::fs::write(&file, older).unwrap();
        let output = forge(&["replay", file.to_str().unwrap()]);
        assert!(output.status.success(), "{format}: {}", stdout(&output));
    }
}

#[test]
fn replay_names_the_step_where_a_changed_result_diverges() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "gold");
    let text = std::fs::read_to_string(&path).unwrap();
    // Change one byte of the third step's recorded result in the first episode.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut episode: Value = serde_json::from_str(&lines[0]).unwrap();
    let result = episode["steps"][2]["result"].as_str().unwrap().to_owned();
    let mut bytes = result.into_bytes();
    let index = bytes
        .iter()
        .position(u8::is_ascii_digit)
        .expect("a digit to change");
    bytes[index] = if bytes[index] == b'9' {
        b'8'
    } else {
        bytes[index] + 1
    };
    episode["steps"][2]["result"] = Value::String(String::from_utf8(bytes).unwrap());
    lines[0] = episode.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let output = forge(&["replay", path.to_str().unwrap()]);
    assert!(
        !output.status.success(),
        "a tampered trajectory must not replay"
    );
    let report = stdout(&output);
    assert!(
        report.contains("line 1") && report.contains("step 2") && report.contains("result differs"),
        "{report}"
    );

    let output = forge(&["replay", "--json", path.to_str().unwrap()]);
    let lines = json_lines(&output);
    assert_eq!(lines[0]["identical"], false);
    assert_eq!(lines[0]["divergence"]["step"], 2);
    assert_eq!(lines[1]["identical"], true);
    assert_eq!(summary(&lines)["diverged"], 1);

    // A changed field outside the steps is named, as the file spells it.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut episode: Value = serde_json::from_str(&lines[0]).unwrap();
    episode["environment"]["name"] = "elsewhere".into();
    lines[0] = episode.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = forge(&["replay", path.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stdout(&output).contains("`environment` differs: recorded {")
            && stdout(&output).contains("\"name\":\"elsewhere\""),
        "{}",
        stdout(&output)
    );

    // A step whose call is not the one its messages make: the record
    // disagrees with itself, which replay says rather than blame a side.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut episode: Value = serde_json::from_str(&lines[0]).unwrap();
    episode["steps"][0]["arguments"] = json!({"edited": true});
    lines[0] = episode.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = forge(&["replay", path.to_str().unwrap()]);
    assert!(
        !output.status.success()
            && stdout(&output).contains(
                "step 0: the record's steps and messages disagree on the call's arguments: \
                 {\"edited\":true} in its steps"
            ),
        "{}",
        stdout(&output)
    );
}

/// An episode that cannot be replayed is named with why and the others
/// are replayed; the exit status is `diff`'s: 1 for a divergence, 2 where
/// there is none but the replay was in trouble.
#[test]
fn replay_goes_past_an_episode_it_cannot_play() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "gold");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut episode: Value = serde_json::from_str(&lines[0]).unwrap();
    episode["task_id"] = "no-such-task".into();
    lines[0] = episode.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let output = forge(&["replay", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let report = stdout(&output);
    assert!(
        report.contains(
            "line 1 (task no-such-task) could not be replayed: environment `shop` has no task \
             `no-such-task`"
        ) && report.contains(&format!(
            "0 of {} episodes diverged, 1 could not be replayed",
            lines.len()
        )),
        "{report}"
    );
    let output = forge(&["replay", "--json", path.to_str().unwrap()]);
    let said = json_lines(&output);
    assert_eq!(said[0]["identical"], Value::Null);
    assert!(said[0]["error"].as_str().unwrap().contains("has no task"));
    assert_eq!(said[1]["identical"], true, "the next episode is replayed");
    let summary = summary(&said);
    assert_eq!(summary["unreplayable"], 1);
    assert_eq!(summary["identical"], lines.len() - 1);

    // A divergence besides decides the status.
    let mut episode: Value = serde_json::from_str(&lines[1]).unwrap();
    episode["steps"][0]["fuel"] = json!(1);
    lines[1] = episode.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = forge(&["replay", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stdout(&output).contains(&format!(
            "1 of {} episodes diverged, 1 could not be replayed",
            lines.len()
        )),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_file_of_several_environments_replays_given_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let shop = export_example(dir.path());
    let shop = shop.to_str().unwrap();
    let mock = [
        "--suite",
        "tau2-bench/mock",
        "--data",
        "../shared/benchmarks",
    ];
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    let output = forge(&[
        "run",
        "--env",
        shop,
        "--tasks",
        "2",
        "--out",
        a.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = forge(
        &[
            &["run", "--tasks", "first:1", "--out", b.to_str().unwrap()],
            &mock[..],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    // As a server of both writes them: one file.
    let both = dir.path().join("both.jsonl");
    let mut lines = std::fs::read(&a).unwrap();
    lines.extend(std::fs::read(&b).unwrap());
    std::fs::write(&both, lines).unwrap();
    let both = both.to_str().unwrap();

    let output = forge(&[&["replay", both, "--env", shop], &mock[..]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("3 episodes replayed"),
        "{}",
        stdout(&output)
    );
    // Without the other environment, its episode could not be replayed
    // and those of the one given are.
    let output = forge(&["replay", both, "--env", shop]);
    assert_eq!(output.status.code(), Some(2), "trouble, not a divergence");
    assert!(
        stdout(&output).contains(
            "could not be replayed: it was recorded on environment `tau2-bench-mock`, which is \
             not given (given: `shop`)"
        ) && stdout(&output).contains("0 of 3 episodes diverged, 1 could not be replayed"),
        "{}",
        stdout(&output)
    );
    // Given none of the file's environments, that is said once.
    let output = forge(&["replay", b.to_str().unwrap(), "--env", shop]);
    assert_refused(
        &output,
        "recorded on environment `tau2-bench-mock`, which is not given (given: `shop`)",
    );
    // A server of one of them does not append to it.
    let output = forge(&["serve", "--port", "0", shop, "--out", both]);
    assert_refused(&output, "holds episodes of environment `tau2-bench-mock`");
    // Over HTTP each reset names its task: `--task` is --stdio's.
    let output = forge(&["serve", "--port", "0", shop, "--task", "shop-01"]);
    assert_refused(&output, "--task picks the task of --stdio's episodes");
}

#[test]
fn replay_plays_the_scripted_user_again_and_so_catches_an_edited_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unstable.jsonl");
    // τ-bench's users state their user id, which an unreliable one gets wrong.
    let suite = [
        "--suite",
        "tau-bench/airline",
        "--data",
        "../shared/benchmarks",
    ];
    let mut args = vec![
        "run",
        "--policy",
        "gold",
        "--user-instability",
        "1",
        "--tasks",
        "first:1",
        "--out",
        path.to_str().unwrap(),
    ];
    args.extend(suite);
    let output = forge(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&path).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["user"],
        json!({"kind": "scripted", "instability": 1.0})
    );
    let replay_edited = |edit: &dyn Fn(&mut Value)| {
        let mut episode = first.clone();
        edit(&mut episode);
        let edited = dir.path().join("edited.jsonl");
        std::fs::write(&edited, format!("{episode}\n")).unwrap();
        let mut args = vec!["replay", edited.to_str().unwrap()];
        args.extend(suite);
        forge(&args)
    };
    assert!(replay_edited(&|_| {}).status.success());
    // The user's words are the scripted user's again: an edit shows, at
    // the place it was made.
    let output = replay_edited(&|episode| {
        let opening = episode["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        episode["messages"][0]["content"] = format!("{opening} (edited)").into();
    });
    assert!(!output.status.success());
    assert!(
        stdout(&output).contains("message 0 differs: recorded …")
            && stdout(&output).contains("(edited)\"}, replayed …"),
        "{}",
        stdout(&output)
    );
    // So is what the seed made the unreliable user misremember (another
    // seed may spoil the same fact the same way: of eight, some do not).
    let diverged = (1..=8)
        .filter(|&change| {
            let output = replay_edited(&|episode| {
                episode["seed"] = (episode["seed"].as_u64().unwrap() ^ change).into();
            });
            !output.status.success() && stdout(&output).contains("message 0 differs")
        })
        .count();
    assert!(diverged > 0, "no other seed changed the user's words");
    // A record that names no user (made before users were recorded) has its
    // user's turns repeated.
    let output = replay_edited(&|episode| {
        episode.as_object_mut().unwrap().remove("user");
    });
    assert!(output.status.success(), "{}", stdout(&output));
}

#[test]
fn replay_policy_reproduces_the_recorded_rewards() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "gold");
    let lines = run_json(&["--policy", "replay", "--from", path.to_str().unwrap()]);
    assert_eq!(summary(&lines)["success_rate"], 1.0);
    // Replayed under the turn limit they were recorded under: a record of
    // one turn's limit ends where it ended.
    let short = dir.path().join("short.jsonl");
    let output = forge(&[
        "run",
        "--policy",
        "gold",
        "--tasks",
        "shop-01,shop-02",
        "--max-turns",
        "1",
        "--out",
        short.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let from = ["--policy", "replay", "--from", short.to_str().unwrap()];
    let lines = run_json(&[&from[..], &["--tasks", "shop-01,shop-02"]].concat());
    assert!(
        lines[..2]
            .iter()
            .all(|line| line["termination"] == "max_turns"),
        "{lines:?}"
    );
    // Without --tasks, the tasks the file has; a task it has no episode of
    // is named, with those it has.
    let lines = run_json(&from);
    assert_eq!(summary(&lines)["episodes"], 2);
    // An evaluation of a replay plays each episode once, without being told.
    let evaluated = dir.path().join("eval");
    let output = forge(
        &[
            &["eval", "--json", "--out", evaluated.to_str().unwrap()],
            &from[..],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json_lines(&output).pop().unwrap();
    assert_eq!(
        (report["trials"].as_u64(), report["tasks"].as_u64()),
        (Some(1), Some(2)),
        "{report}"
    );
    // Of those, the tasks the environment lacks are skipped, and said to be.
    let renamed = dir.path().join("renamed.jsonl");
    let text = std::fs::read_to_string(&short).unwrap();
    assert_eq!(text.matches("\"task_id\":\"shop-02\"").count(), 1);
    std::fs::write(
        &renamed,
        text.replace("\"task_id\":\"shop-02\"", "\"task_id\":\"shop-99\""),
    )
    .unwrap();
    let output = forge(&[
        "run",
        "--policy",
        "replay",
        "--from",
        renamed.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("lacks 1 of the 2 tasks")
            && stderr(&output).contains("has episodes of: skipping shop-99"),
        "{}",
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("user as recorded, seeds as recorded: success rate 0/1 "),
        "one episode, cut short as recorded: {}",
        stdout(&output)
    );
    let output = forge(&[&["run"], &from[..], &["--tasks", "shop-01,shop-03"]].concat());
    assert_refused(
        &output,
        "has no episode of task `shop-03` (it has shop-01, shop-02): pass --tasks",
    );
    // An episode recorded on this version of the environment is replayed
    // before one of another version; one of another alone is, and said to be.
    let full = std::fs::read_to_string(&path).unwrap();
    let mut other: Value = serde_json::from_str(full.lines().next().unwrap()).unwrap();
    other["environment"]["content_hash"] = json!("0".repeat(64));
    let versions = dir.path().join("versions.jsonl");
    std::fs::write(&versions, format!("{other}\n{text}")).unwrap();
    let versions = versions.to_str().unwrap();
    let output = forge(&[
        "run", "--policy", "replay", "--from", versions, "--tasks", "shop-01", "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json_lines(&output)[0]["termination"], "max_turns");
    assert!(
        !stderr(&output).contains("another version"),
        "{}",
        stderr(&output)
    );
    std::fs::write(&renamed, format!("{other}\n")).unwrap();
    let output = forge(&[
        "run",
        "--policy",
        "replay",
        "--from",
        renamed.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "holds episodes of 1 task only as recorded on another version of the environment"
        ),
        "{}",
        stderr(&output)
    );
    // Episodes of another environment are not replayed on this one.
    let bundle = export_example(dir.path());
    let manifest = bundle.join("manifest.json");
    let mut fields: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    fields["name"] = json!("shop-copy");
    std::fs::write(&manifest, fields.to_string()).unwrap();
    let output = forge(&[
        "run",
        "--env",
        bundle.to_str().unwrap(),
        "--policy",
        "replay",
        "--from",
        path.to_str().unwrap(),
    ]);
    assert!(
        stderr(&output).contains("holds episodes of `shop`, none of `shop-copy`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_torn_last_line_is_skipped_and_cut_before_appending_and_a_whole_one_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "gold");
    let complete = std::fs::read_to_string(&path).unwrap();
    let episodes = complete.lines().count();
    // A process killed while writing leaves half a line.
    std::fs::write(&path, format!("{complete}{{\"format\":\"forge.traj")).unwrap();
    let output = forge(&["replay", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("torn line"));
    assert!(stdout(&output).contains(&format!("{episodes} episodes replayed")));
    // `--json` says so in its summary too.
    let output = forge(&["replay", path.to_str().unwrap(), "--json"]);
    let summary = json_lines(&output).pop().unwrap();
    assert_eq!(summary["torn_tail_skipped"], true, "{summary}");

    // Appending one episode keeps every complete one before it, and says
    // what it cut.
    let append_one = || {
        let output = forge(&[
            "run",
            "--tasks",
            "shop-01",
            "--out",
            path.to_str().unwrap(),
            "--append",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let appended = std::fs::read_to_string(&path).unwrap();
        assert!(appended.starts_with(&complete));
        assert_eq!(appended.lines().count(), episodes + 1);
        stderr(&output)
    };
    assert!(append_one().contains("torn line (a run was killed while writing it): its 21 bytes"));
    assert!(forge(&["replay", path.to_str().unwrap()]).status.success());

    // A last record that only lacks its newline (an edited file) is whole:
    // it is replayed, and appending ends it rather than cutting it.
    std::fs::write(&path, complete.trim_end()).unwrap();
    let output = forge(&["replay", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("torn line"));
    assert!(stdout(&output).contains(&format!("{episodes} episodes replayed")));
    assert!(!append_one().contains("torn line"));

    // Another environment's episodes (here another version of the shop)
    // do not go into the same file.
    let edited = export_example(&dir.path().join("edited"));
    let manifest = edited.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replacen("\"description\": \"", "\"description\": \"Edited. ", 1),
    )
    .unwrap();
    let before = std::fs::read_to_string(&path).unwrap();
    let output = forge(&[
        "run",
        "--env",
        edited.to_str().unwrap(),
        "--out",
        path.to_str().unwrap(),
        "--append",
    ]);
    assert_refused(&output, "holds episodes of environment `shop` (");
    assert_refused(&output, "pass another --out");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    // A file that is not a trajectory file is neither appended to nor cut,
    // and one without an episode proves nothing.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes\nthe last line").unwrap();
    let output = forge(&["run", "--out", notes.to_str().unwrap(), "--append"]);
    assert_refused(&output, "notes.txt line 1 is not a trajectory record");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "my notes\nthe last line"
    );
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let output = forge(&["replay", empty.to_str().unwrap()]);
    assert_refused(&output, "holds no episode");
}

#[test]
fn an_existing_trajectory_file_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "gold");
    let before = std::fs::read(&path).unwrap();
    let output = forge(&["run", "--out", path.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("already exists") && !stderr(&output).contains("os error"),
        "said once: {}",
        stderr(&output)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // A directory is not taken for a file that exists.
    for append in [false, true] {
        let mut args = vec!["run", "--out", dir.path().to_str().unwrap()];
        args.extend(append.then_some("--append"));
        let output = forge(&args);
        assert!(
            stderr(&output).contains("is a directory: name a JSONL file"),
            "{}",
            stderr(&output)
        );
    }
}

#[test]
fn a_bundle_directory_runs_like_the_built_in_environment() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let lines = run_json(&[
        "--env",
        bundle.to_str().unwrap(),
        "--tasks",
        "shop-01,shop-02",
    ]);
    assert_eq!(summary(&lines)["episodes"], 2);
    assert_eq!(summary(&lines)["success_rate"], 1.0);

    // A recording of the built-in environment replays against the exported bundle.
    let path = record(dir.path(), "gold");
    assert!(
        forge(&[
            "replay",
            path.to_str().unwrap(),
            "--env",
            bundle.to_str().unwrap()
        ])
        .status
        .success()
    );
}

#[test]
fn bad_input_gets_errors_that_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    std::fs::write(bundle.join("tasks.jsonl"), "{\"id\": 1}\n").unwrap();
    let output = forge(&["run", "--env", bundle.to_str().unwrap()]);
    assert_refused(&output, "tasks.jsonl does not match the sha256");
    // Without recorded hashes (a hand-written bundle) the malformed line is named.
    let manifest_path = bundle.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest.as_object_mut().unwrap().remove("hashes");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let output = forge(&["run", "--env", bundle.to_str().unwrap()]);
    assert_refused(&output, "tasks.jsonl is malformed");
    assert_refused(&output, "line 1");

    // A name that is no plain word, a blank task id: refused, named.
    let task = json!({"id": " ", "instruction": "i", "gold_actions": [], "required_outputs": []});
    std::fs::write(bundle.join("tasks.jsonl"), format!("{task}\n")).unwrap();
    let output = forge(&["run", "--env", bundle.to_str().unwrap()]);
    assert!(
        stderr(&output).contains("task id \" \" is blank"),
        "{}",
        stderr(&output)
    );
    manifest["name"] = json!("../shop");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let output = forge(&["run", "--env", bundle.to_str().unwrap()]);
    assert!(
        stderr(&output).contains(&format!(
            "loading the environment bundle {}: the manifest's `name`: \"../shop\" is not an \
             environment name",
            bundle.display()
        )),
        "the bundle is named, then what is wrong with it: {}",
        stderr(&output)
    );
    // A verify rule whose collection no state holds (misspelt) would apply
    // to nothing.
    let bundle = export_example(&dir.path().join("rules"));
    let manifest_path = bundle.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["verify"]["unordered_lists"] = json!(["order.returned_items"]);
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let output = forge(&["run", "--env", bundle.to_str().unwrap()]);
    assert_refused(
        &output,
        "`unordered_lists` rule `order.returned_items` names collection `order`, which no state",
    );

    // A split names the bundle's tasks; `--tasks split:NAME` plays it, in
    // the bundle's order.
    let bundle = export_example(&dir.path().join("splits"));
    let manifest_path = bundle.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest.as_object_mut().unwrap().remove("hashes");
    manifest["splits"] = json!({"test": ["shop-03", "shop-99"]});
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let env = bundle.to_str().unwrap();
    let output = forge(&["run", "--env", env]);
    assert_refused(
        &output,
        "split `test` names task `shop-99`, which it does not have",
    );
    for (split, refusal) in [
        (json!([]), "split `test` names no task"),
        (
            json!(["shop-03", "shop-03"]),
            "split `test` names task `shop-03` twice",
        ),
    ] {
        manifest["splits"] = json!({ "test": split });
        std::fs::write(&manifest_path, manifest.to_string()).unwrap();
        assert_refused(&forge(&["run", "--env", env]), refusal);
    }
    manifest["splits"] = json!({"test": ["shop-03", "shop-01"]});
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let output = forge(&["run", "--env", env, "--tasks", "split:test", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let ids: Vec<&Value> = lines[..lines.len() - 1]
        .iter()
        .map(|episode| &episode["task_id"])
        .collect();
    assert_eq!(ids, [&json!("shop-01"), &json!("shop-03")]);
    let output = forge(&["run", "--env", env, "--tasks", "split:train"]);
    assert_refused(&output, "has no split `train` (it has `test`)");

    // A count plays the bundle's first tasks; ids play in the order named.
    let played = |selection: &str| {
        let output = forge(&["run", "--tasks", selection, "--json"]);
        assert!(output.status.success(), "{}", stderr(&output));
        let lines = json_lines(&output);
        let (summary, episodes) = lines.split_last().unwrap();
        assert_eq!(summary["episodes"], episodes.len());
        episodes
            .iter()
            .map(|episode| episode["task_id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(played("3"), ["shop-01", "shop-02", "shop-03"]);
    assert_eq!(played("first:2"), ["shop-01", "shop-02"]);
    assert_eq!(played("shop-03,shop-01"), ["shop-03", "shop-01"]);

    let output = forge(&["run", "--tasks", "shop-99"]);
    assert_refused(&output, "no task `shop-99`");
    let output = forge(&["run", "--tasks", "0"]);
    assert_refused(
        &output,
        "no task `0` (see `forge inspect`); a count of tasks is at least 1",
    );
    // A count beyond the tasks there are plays them all, and says so.
    let output = forge(&["run", "--tasks", "first:99", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json_lines(&output).last().unwrap()["episodes"], 28);
    assert!(
        stderr(&output).contains("has 28 tasks, fewer than the 99 asked for: taking them all"),
        "{}",
        stderr(&output)
    );

    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "{\"not\": \"a trajectory\"}\n").unwrap();
    // A line that is no record could not be replayed, and is named.
    let unreplayable = |output: &std::process::Output, said: &str| {
        assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
        assert!(stdout(output).contains(said), "{}", stdout(output));
    };
    let output = forge(&["replay", garbage.to_str().unwrap()]);
    unreplayable(
        &output,
        "line 1 could not be replayed: it is not a trajectory record",
    );
    // Bytes that are not UTF-8 are named by their line too.
    std::fs::write(&garbage, b"\n{\"task_id\": \"\xff\"}\n").unwrap();
    let output = forge(&["replay", garbage.to_str().unwrap()]);
    unreplayable(&output, "line 2 could not be replayed");

    // So is a field a record does not have (a misspelt one, say).
    let recorded = std::fs::read_to_string(record(dir.path(), "gold")).unwrap();
    let mut misspelt: Value = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
    misspelt["rewrd"] = json!(1.0);
    std::fs::write(&garbage, format!("{misspelt}\n")).unwrap();
    let output = forge(&["replay", garbage.to_str().unwrap()]);
    unreplayable(&output, "line 1 could not be replayed");
    unreplayable(&output, "unknown field `rewrd`");
    // The episodes around a damaged line are replayed all the same.
    let mut lines: Vec<String> = recorded.lines().take(3).map(str::to_owned).collect();
    lines[1] = lines[1][..40].to_owned();
    std::fs::write(&garbage, lines.join("\n") + "\n").unwrap();
    let output = forge(&["replay", garbage.to_str().unwrap(), "--json"]);
    unreplayable(&output, "EOF while parsing");
    let summary = json_lines(&output).pop().unwrap();
    assert_eq!(
        (&summary["identical"], &summary["unreplayable"]),
        (&json!(2), &json!(1)),
        "{summary}"
    );
    // `forge show` shows them too, naming the damaged line it leaves out.
    let output = forge(&["show", garbage.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("warning: line 2 of")
            && stderr(&output).contains("is not a trajectory record (EOF while parsing"),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output).matches("── line ").count(), 2);
    assert_refused(
        &forge(&["show", garbage.to_str().unwrap(), "--line", "2"]),
        "--line 2: that line of",
    );
    // A device is no file to append episodes to (nor to read them first).
    let output = forge(&["run", "--tasks", "1", "--out", "/dev/null", "--append"]);
    assert_refused(
        &output,
        "/dev/null is not a regular file (a device or pipe)",
    );
    // Nor is a link to nothing a file that "already exists".
    let dangling = dir.path().join("dangling.jsonl");
    std::os::unix::fs::symlink(dir.path().join("nowhere/x.jsonl"), &dangling).unwrap();
    let output = forge(&["run", "--tasks", "1", "--out", dangling.to_str().unwrap()]);
    assert_refused(&output, "dangling.jsonl is a symbolic link to nothing");

    let output = forge(&["run", "--policy", "replay"]);
    assert!(!output.status.success(), "--policy replay needs --from");

    // Output that cannot be written is an error saying so, not a crash.
    if let Ok(full) = std::fs::File::create("/dev/full") {
        let output = crate::common::forge_command()
            .args(["inspect", "--json"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert_eq!(
            stderr(&output),
            "error: writing to standard output: No space left on device (os error 28)\n"
        );
        // As trouble, not a divergence, for `forge replay`.
        let output = crate::common::forge_command()
            .args(["replay", dir.path().join("gold.jsonl").to_str().unwrap()])
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    }

    // A model that does not load leaves no empty trajectory file behind, on
    // which the run tried again once the model is mended would be refused.
    let empty_model = dir.path().join("empty.gguf");
    std::fs::write(&empty_model, b"").unwrap();
    let out = dir.path().join("model-episodes.jsonl");
    for _ in 0..2 {
        let output = model_turn(empty_model.to_str().unwrap(), &out, &[]);
        assert!(!output.status.success());
        assert!(
            !stderr(&output).contains("already exists"),
            "{}",
            stderr(&output)
        );
        assert!(!out.exists(), "{}", stderr(&output));
    }

    // A directory to write that is a file is named as such, and so is a
    // link to nothing.
    let output = forge(&["example", garbage.to_str().unwrap()]);
    assert!(
        stderr(&output).contains("garbage.jsonl is a file, not a directory"),
        "{}",
        stderr(&output)
    );
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let output = forge(&["example", dangling.to_str().unwrap()]);
    assert_refused(&output, "dangling is a symbolic link to nothing");

    // Settings under which no episode could mean anything are refused before
    // any is played, the flag and the value named.
    for (flag, value) in [
        ("--temperature", "-1"),
        ("--temperature", "nan"),
        ("--top-p", "0"),
        ("--max-new-tokens", "0"),
        ("--batch", "0"),
        ("--max-requests", "0"),
    ] {
        for command in ["run", "eval"] {
            let output = forge(&[command, &format!("{flag}={value}")]);
            assert!(!output.status.success(), "{command} {flag}={value}");
            let message = stderr(&output);
            assert!(
                message.contains(flag) && message.contains(&format!("`{value}`")),
                "{command} {flag}={value}: {message}"
            );
        }
    }
    // A flag the agent chosen would not use is refused, not ignored: the
    // episodes would not be the ones asked for.
    for (args, says) in [
        (
            &["run", "--temperature", "0.7"][..],
            "--temperature is for --policy model and --policy openai only",
        ),
        (
            &["run", "--policy", "random", "--from", "x.jsonl"],
            "--from is for --policy replay only",
        ),
        (
            &["run", "--policy", "model", "--top-p", "0.5"],
            "greedy decoding (--temperature 0, the default) takes the likeliest alone",
        ),
        (
            &["eval", "--out", "unused", "--batch", "8"],
            "--batch is for --policy model only",
        ),
        (
            &["run", "--base-url", "http://127.0.0.1:9/v1"],
            "--base-url is for",
        ),
        (&["run", "--max-requests", "4"], "--max-requests is for"),
        (
            &["run", "--user-instability", "0.2"],
            "no task chosen has a fact for the user to misstate",
        ),
        (
            &["eval", "--out", "unused", "--api-key-env", "KEY"],
            "--api-key-env is for",
        ),
        (
            &[
                "run", "--policy", "replay", "--from", "x.jsonl", "--user", "openai",
            ],
            "--user openai would be ignored",
        ),
        (
            &[
                "run",
                "--policy",
                "replay",
                "--from",
                "x.jsonl",
                "--user-instability",
                "0.2",
            ],
            "--user-instability would be ignored",
        ),
        (
            &["serve", "--stdio", "--port", "9000"],
            "cannot be used with '--port",
        ),
    ] {
        assert_refused(&forge(args), says);
    }
    // A run refused for its selection leaves no --out file behind.
    let unstable = dir.path().join("unstable.jsonl");
    let output = forge(&[
        "run",
        "--user-instability",
        "0.2",
        "--out",
        unstable.to_str().unwrap(),
    ]);
    assert_refused(&output, "no task chosen");
    assert!(!unstable.exists());
    // A negative value after a space is a value too, refused for itself.
    for (command, flag) in [
        (&["run"][..], "--user-instability"),
        (&["serve", "--port", "0"], "--user-instability"),
        (&["run"], "--seed"),
    ] {
        let output = forge(&[command, &[flag, "-0.5"]].concat());
        assert!(!output.status.success());
        let message = stderr(&output);
        assert!(
            message.contains(flag)
                && message.contains("-0.5")
                && !message.contains("unexpected argument"),
            "{command:?}: {message}"
        );
    }
    // So are limits under which `forge serve` could serve nothing, before
    // it listens, and measurements or trial counts that could only crash.
    for (command, flag, value) in [
        (&["serve", "--port", "0"][..], "--user-instability", "1.5"),
        (&["serve", "--port", "0"], "--rate", "0"),
        (&["serve", "--port", "0"], "--rate", "inf"),
        (&["serve", "--port", "0"], "--max-sessions", "0"),
        (&["serve", "--port", "0"], "--max-turns", "0"),
        (&["serve", "--port", "0"], "--idle-timeout", "0"),
        (&["serve", "--port", "0"], "--max-sessions", "15000"),
        (&["serve", "--port", "0"], "--max-request-bytes", "0"),
        (&["bench", "perf"], "--calls", "0"),
        (&["bench", "perf"], "--calls", "18446744073709551615"),
        (&["bench", "perf"], "--seconds", "nan"),
        (&["bench", "serve"], "--seconds", "1e30"),
        (&["bench", "serve"], "--sessions", "0"),
        (&["bench", "serve"], "--url", "notaurl"),
        (&["bench", "serve"], "--url", "https://127.0.0.1:9"),
        (&["run"], "--trials", "18446744073709551615"),
        (&["eval", "--out", "unused"], "--trials", "100001"),
        (&["eval", "--out", "unused"], "--bootstrap", "1"),
        (&["compare", "unused"], "--bootstrap", "99"),
        (&["eval"], "--out", "Cargo.toml"),
        (&["synth", "--all", "--out", "unused"], "--tasks", "0"),
        (&["synth", "--all"], "--out", "Cargo.toml"),
        (&["model", "chat", "hi"], "--max-tokens", "0"),
        (&["model", "chat", "hi"], "--stop", ""),
        (&["run"], "--tasks", "shop-01,shop-01"),
    ] {
        let output = forge(&[command, &[&format!("{flag}={value}")]].concat());
        assert!(!output.status.success(), "{command:?} {flag}={value}");
        let message = stderr(&output);
        assert!(
            message.contains(flag) && message.contains(value) && !message.contains("panicked"),
            "{command:?} {flag}={value}: {message}"
        );
    }
}

#[test]
fn files_saved_with_a_byte_order_mark_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    forget_hashes(&bundle);
    let with_bom = |path: &Path| {
        let text = std::fs::read(path).unwrap();
        std::fs::write(path, [&b"\xef\xbb\xbf"[..], &text].concat()).unwrap();
    };
    for file in ["manifest.json", "initial_state.json", "tasks.jsonl"] {
        with_bom(&bundle.join(file));
    }
    let out = dir.path().join("episodes.jsonl");
    let bundle = bundle.to_str().unwrap();
    let output = forge(&[
        "run",
        "--env",
        bundle,
        "--tasks",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    with_bom(&out);
    let output = forge(&["replay", "--env", bundle, out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("2 episodes replayed"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn inspect_lists_tools_and_tasks() {
    let output = forge(&["inspect", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let info = &json_lines(&output)[0];
    assert!(info["tools"].as_array().unwrap().len() >= 8);
    assert!(info["tasks"].as_array().unwrap().len() >= 20);
    assert_eq!(info["tools"][0]["type"], "function");
    // A bundle is named as for `run` and `eval`, or by its bare path.
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let bundle = bundle.to_str().unwrap();
    let flagged = forge(&["inspect", "--env", bundle, "--json"]);
    assert!(flagged.status.success(), "{}", stderr(&flagged));
    assert_eq!(json_lines(&flagged)[0], *info);
    assert_eq!(
        stdout(&forge(&["inspect", bundle, "--json"])),
        stdout(&flagged)
    );
    let both = forge(&["inspect", bundle, "--env", bundle]);
    assert_refused(&both, "cannot be used with");
}

#[test]
fn bench_perf_reports_every_metric() {
    let output = forge(&[
        "bench",
        "perf",
        "--calls",
        "200",
        "--seconds",
        "0.05",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = &json_lines(&output)[0];
    for metric in [
        "component load, cold (compile + check + describe)",
        "component load, cached",
        "instantiate (median)",
        "episode reset, 100k-record state (median)",
        "read call `get_user`, sandboxed (p99)",
        "read call, sandboxed / native",
        "read calls/s, 2 threads",
    ] {
        let value = report[metric]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("missing {metric}: {report}"));
        assert!(value > 0.0, "{metric} = {value}");
    }
}

#[test]
fn bench_serve_measures_tool_calls_not_refusals() {
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "serve",
            "--sessions",
            "4",
            "--seconds",
            "0.3",
            "--rounds",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        forge(&args)
    };
    let output = bench(&[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json_lines(&output).pop().unwrap();
    assert_eq!(report["error answers"]["value"], 0.0, "{report}");
    assert!(
        report["sessions held at once"]["value"].as_f64() == Some(4.0),
        "{report}"
    );
    // From three rounds, memory growth over those after the first.
    let output = forge(&[
        "bench",
        "serve",
        "--sessions",
        "4",
        "--seconds",
        "0.3",
        "--rounds",
        "3",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json_lines(&output).pop().unwrap();
    let growth = &report["resident memory growth per round after the first"];
    assert_eq!(growth["unit"], "MiB/round", "{report}");
    // A tool the served environment lacks is refused before any step.
    let output = bench(&["--tool", "nope"]);
    assert_refused(
        &output,
        "--tool `nope`: the built-in example environment has no such tool (it has ",
    );
    // So do calls the tool refuses (an argument it needs is missing).
    let output = bench(&["--tool", "get_user", "--arguments", "{}"]);
    assert_refused(&output, "the server answered the step with an error");
}

#[test]
fn bench_model_measures_each_phase_and_names_bad_shapes() {
    // SmolLM2-135M's shape with random weights: no model file needed.
    let output = forge(&[
        "bench",
        "model",
        "--forward",
        "1x8",
        "--train",
        "none",
        "--decode",
        "2",
        "--prompt",
        "4",
        "--new-tokens",
        "2",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let phases: Vec<(&str, u64, u64)> = lines
        .iter()
        .map(|line| {
            (
                line["phase"].as_str().unwrap(),
                line["batch"].as_u64().unwrap(),
                line["tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(phases, [("forward", 1, 8), ("decode", 2, 4)]);
    assert!(
        lines
            .iter()
            .all(|line| line["tokens_per_s"].as_f64().unwrap() > 0.0)
    );
    // A line copied elsewhere still says what it measured: random weights
    // on the CPU.
    assert!(
        lines
            .iter()
            .all(|line| line["device"] == "cpu" && line["model"].is_null()),
        "{lines:?}"
    );

    // The bad item of a list is named, once.
    let output = forge(&["bench", "model", "--train", "4x8,16"]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("`16`: expected BATCHxSEQ"), "{message}");
    assert_eq!(message.matches("`16`").count(), 1, "{message}");
    // Sequences past the model's context (their attention alone would
    // exhaust memory), and nothing at all to measure, are refused.
    let only = |forward: &str| {
        forge(&[
            "bench",
            "model",
            "--forward",
            forward,
            "--train",
            "none",
            "--decode",
            "none",
        ])
    };
    assert_refused(&only("1x100000"), "longer than the model's context of 8192");
    assert_refused(&only("none"), "nothing to measure");
    // A precision the device cannot compute at is refused before the model
    // is read (this file is no model).
    let output = forge(&[
        "bench",
        "model",
        "--precision",
        "bf16",
        "--model",
        concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
    ]);
    assert_refused(&output, "bf16 needs the CUDA one");
    // A device whose backend this build lacks names the feature to build with.
    for (device, built) in [
        ("cuda", cfg!(feature = "cuda")),
        ("wgpu", cfg!(feature = "wgpu")),
    ] {
        if built {
            continue;
        }
        let output = forge(&["bench", "model", "--device", device]);
        assert_refused(&output, &format!("--features {device}"));
    }
}

/// `forge run` of the local `model` for one short turn of the example's
/// first task, with `extra` options, into `out`.
fn model_turn(model: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "--policy",
        "model",
        "--model",
        model,
        "--tasks",
        "shop-01",
        "--max-turns",
        "1",
        "--max-new-tokens",
        "4",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    forge(&args)
}

/// The record of one agent turn of `model` (4 new tokens at most) on the
/// example's first task, with `extra` options, written to `out`.
fn one_model_turn(model: &str, out: &Path, extra: &[&str]) -> Value {
    let output = model_turn(model, out, extra);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(out).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// What `forge model inspect --json` says of the checkpoint `model`, and the
/// prompt of its first turn on the example, decoded, once the episode has
/// replayed.
fn inspect_and_first_prompt(model: &Path, tokenizer: &ModelTokenizer) -> (Value, String) {
    let output = forge(&["model", "inspect", model.to_str().unwrap(), "--json"]);
    let inspected = json_lines(&output).remove(0);
    let path = model.with_extension("jsonl");
    let record = one_model_turn(model.to_str().unwrap(), &path, &[]);
    assert!(forge(&["replay", path.to_str().unwrap()]).status.success());
    let prompt: Vec<u32> =
        serde_json::from_value(record["policy_trace"]["turns"][0]["prompt_ids"].clone()).unwrap();
    (inspected, tokenizer.decode(&prompt).unwrap())
}

#[test]
fn a_llama3_model_is_prompted_in_its_own_template() {
    use forge_trainer::rope::RopeScaling;
    use forge_trainer::{CpuModel, LlamaConfig, checkpoint};
    // A tiny random Llama 3: its control tokens, its RoPE scaling.
    let control = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
    ];
    let tokenizer = ModelTokenizer::byte_level_with(&control, control[0], control[4]);
    let config = LlamaConfig {
        rope_scaling: Some(RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64,
        }),
        ..LlamaConfig::tiny(tokenizer.vocab_size())
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("llama3");
    checkpoint::save(
        &model,
        &CpuModel::init(config.clone(), 7, &Default::default()),
        &tokenizer,
    )
    .unwrap();
    let (inspected, decoded) = inspect_and_first_prompt(&model, &tokenizer);
    assert_eq!(inspected["chat_template"], "llama3", "{inspected}");
    assert_eq!(inspected["decoder"]["architecture"], "llama", "{inspected}");
    assert_eq!(inspected["decoder"]["layers"], config.layers, "{inspected}");
    assert!(
        decoded.starts_with("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"),
        "{decoded}"
    );
    assert!(
        decoded.ends_with("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
        "{decoded}"
    );
    // Numbers no decoder could run on are inspected all the same, and named.
    let config_json = model.join("config.json");
    let mut numbers: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_json).unwrap()).unwrap();
    numbers["num_attention_heads"] = json!(0);
    std::fs::write(&config_json, numbers.to_string()).unwrap();
    let output = forge(&["model", "inspect", model.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("decoder: Forge cannot run it: ")
            && stdout(&output).contains("its head count is zero"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_thinking_model_replies_at_once_with_thinking_off() {
    use forge_trainer::{CpuModel, LlamaConfig, checkpoint};
    let dir = tempfile::tempdir().unwrap();
    let save = |name: &str, tokenizer: &ModelTokenizer| {
        let path = dir.path().join(name);
        let config = LlamaConfig::tiny(tokenizer.vocab_size());
        checkpoint::save(
            &path,
            &CpuModel::init(config, 7, &Default::default()),
            tokenizer,
        )
        .unwrap();
        path
    };
    let thinking_off = ["--thinking", "off"];
    // A tiny ChatML model with Qwen3's `<think>` and `</think>`.
    let control = [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
    ];
    let qwen3 = ModelTokenizer::byte_level_with(&control, control[1], control[2]);
    let model = save("qwen3", &qwen3);
    let out = model.with_extension("jsonl");
    let record = one_model_turn(model.to_str().unwrap(), &out, &thinking_off);
    let prompt: Vec<u32> =
        serde_json::from_value(record["policy_trace"]["turns"][0]["prompt_ids"].clone()).unwrap();
    let think = qwen3.token_id("<think>").unwrap();
    assert_eq!(prompt.iter().filter(|&&id| id == think).count(), 1);
    let decoded = qwen3.decode(&prompt).unwrap();
    assert!(
        decoded.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"),
        "{decoded}"
    );
    // An evaluation played with thinking off is not resumed with it on:
    // the same model, prompted otherwise, plays other episodes.
    let results = dir.path().join("eval");
    let eval = |extra: &[&str]| {
        let mut args = vec!["eval", "--policy", "model", "--model"];
        args.extend([model.to_str().unwrap(), "--tasks", "shop-01", "--trials"]);
        args.extend(["1", "--max-turns", "1", "--max-new-tokens", "4", "--out"]);
        args.push(results.to_str().unwrap());
        args.extend(extra);
        forge(&args)
    };
    let output = eval(&thinking_off);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_refused(
        &eval(&[]),
        "`model.prompt.thinking`: \"off\" then, \"on\" now",
    );
    // Nor is it resumed with another model written to the same path.
    let retrained = CpuModel::init(
        LlamaConfig::tiny(qwen3.vocab_size()),
        8,
        &Default::default(),
    );
    checkpoint::save(&model, &retrained, &qwen3).unwrap();
    assert_refused(&eval(&thinking_off), "`model.sha256`");
    // A model that cannot think is refused before it loads.
    let model = save("smollm", &ModelTokenizer::byte_level());
    let out = model.with_extension("jsonl");
    let output = model_turn(model.to_str().unwrap(), &out, &thinking_off);
    assert_refused(&output, "thinking off is for models that think");
    assert!(!out.exists() || std::fs::read_to_string(&out).unwrap().is_empty());
}

/// TinyLlama-1.1B-Chat-v1.0's chat template, as its files carry it.
const TINYLLAMA_TEMPLATE: &str = "{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}";

/// A tiny random TinyLlama-style chat model in `dir`, its context
/// `context`: a SentencePiece vocabulary of `<unk>`, `<s>`, `</s>`, the
/// byte pieces and the space `▁`, and Zephyr's template.
fn zephyr(dir: &Path, context: Option<usize>) -> (PathBuf, ModelTokenizer) {
    use forge_model::gguf::{Gguf, GgufWriter, Value};
    use forge_trainer::{CpuModel, LlamaConfig, checkpoint};
    let mut pieces = vec!["<unk>".to_owned(), "<s>".into(), "</s>".into()];
    pieces.extend((0..=255).map(|byte| format!("<0x{byte:02X}>")));
    pieces.push("\u{2581}".into());
    let mut types = vec![Value::I32(2), Value::I32(3), Value::I32(3)];
    types.resize(pieces.len() - 1, Value::I32(6));
    types.push(Value::I32(1));
    let mut writer = GgufWriter::default();
    writer
        .metadata("tokenizer.ggml.model", Value::String("llama".into()))
        .metadata(
            "tokenizer.ggml.scores",
            Value::Array(vec![Value::F32(0.0); pieces.len()]),
        )
        .metadata(
            "tokenizer.ggml.tokens",
            Value::Array(pieces.into_iter().map(Value::String).collect()),
        )
        .metadata("tokenizer.ggml.token_type", Value::Array(types))
        .metadata("tokenizer.ggml.bos_token_id", Value::U32(1))
        .metadata("tokenizer.ggml.eos_token_id", Value::U32(2))
        .metadata(
            "tokenizer.chat_template",
            Value::String(TINYLLAMA_TEMPLATE.into()),
        );
    let file = dir.join("tokenizer.gguf");
    writer.write(&file).unwrap();
    let tokenizer = ModelTokenizer::from_gguf(&Gguf::open(&file).unwrap()).unwrap();
    let model = dir.join("zephyr");
    let config = LlamaConfig {
        context,
        ..LlamaConfig::tiny(tokenizer.vocab_size())
    };
    checkpoint::save(
        &model,
        &CpuModel::init(config, 7, &Default::default()),
        &tokenizer,
    )
    .unwrap();
    (model, tokenizer)
}

#[test]
fn a_sentencepiece_model_with_zephyrs_template_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (model, tokenizer) = zephyr(dir.path(), None);
    let (inspected, decoded) = inspect_and_first_prompt(&model, &tokenizer);
    assert_eq!(inspected["chat_template"], "zephyr", "{inspected}");
    assert_eq!(inspected["tokenizer"], "SentencePiece BPE", "{inspected}");
    assert!(decoded.starts_with("<s> <|system|>\n"), "{decoded}");
    assert!(decoded.ends_with("</s> \n<|assistant|>\n"), "{decoded}");
}

#[test]
fn inspect_names_a_tensor_type_forge_cannot_read() {
    use forge_model::gguf::GgufWriter;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iq2.gguf");
    let mut writer = GgufWriter::default();
    writer.tensor_f32("w", &[4], &[1.0; 4]);
    writer.write(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // The tensor's header (its name, one dimension of 4), then its type:
    // F32 becomes IQ2_XXS.
    let mut header = 1u64.to_le_bytes().to_vec();
    header.push(b'w');
    header.extend(1u32.to_le_bytes());
    header.extend(4u64.to_le_bytes());
    let at = bytes
        .windows(header.len())
        .position(|window| window == header)
        .unwrap()
        + header.len();
    bytes[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let output = forge(&["model", "inspect", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(
            "decoder: Forge cannot run it: tensor `w` has type IQ2_XXS (GGML type 16), which \
             Forge cannot dequantize"
        ),
        "{}",
        stdout(&output)
    );
}

#[test]
fn chat_keeps_within_the_models_context() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = zephyr(dir.path(), Some(64));
    let model = model.to_str().unwrap();
    let long = "a".repeat(100);
    let output = forge(&["model", "chat", "--model", model, &long]);
    assert_refused(&output, "tokens fills the model's context of 64");
    let output = forge(&[
        "model",
        "chat",
        "--model",
        model,
        "--max-tokens",
        "500",
        "hi",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("leaves room for"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_local_model_policy_records_its_tokens_and_replays() {
    let Some(model) = std::env::var_os("FORGE_SMOLLM2_GGUF") else {
        eprintln!("FORGE_SMOLLM2_GGUF is not set: skipping the local-model policy check");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.jsonl");
    let record = one_model_turn(model.to_str().unwrap(), &path, &[]);
    assert!(record["policy"].as_str().unwrap().starts_with("model:"));
    let turn = &record["policy_trace"]["turns"][0];
    assert!(
        turn["prompt_ids"].as_array().unwrap().len() > 100,
        "the prompt holds the tool schemas"
    );
    assert_eq!(
        turn["ids"].as_array().unwrap().len(),
        turn["logprobs"].as_array().unwrap().len()
    );
    assert!(
        turn["logprobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|logprob| logprob.as_f64().unwrap() <= 0.0)
    );
    assert!(forge(&["replay", path.to_str().unwrap()]).status.success());

    // A file whose metadata counts more layers than its tensors make is
    // one Forge cannot run, said by `model inspect` and its exit status.
    let mut bytes = std::fs::read(&model).unwrap();
    let mut key = (b"llama.block_count".len() as u64).to_le_bytes().to_vec();
    key.extend(b"llama.block_count");
    key.extend(4u32.to_le_bytes());
    let at = bytes
        .windows(key.len())
        .position(|window| window == key)
        .unwrap()
        + key.len();
    assert_eq!(bytes[at..at + 4], 30u32.to_le_bytes());
    bytes[at..at + 4].copy_from_slice(&31u32.to_le_bytes());
    let deeper = dir.path().join("deeper.gguf");
    std::fs::write(&deeper, bytes).unwrap();
    let output = forge(&["model", "inspect", deeper.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("its metadata counts 31 layers, its tensors make 30"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_local_model_plays_the_user_beside_a_local_agent() {
    use forge_trainer::{CpuModel, LlamaConfig, checkpoint};
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = ModelTokenizer::byte_level();
    let save = |name: &str, seed: u64| {
        let path = dir.path().join(name);
        let config = LlamaConfig::tiny(tokenizer.vocab_size());
        let model = CpuModel::init(config, seed, &Default::default());
        checkpoint::save(&path, &model, &tokenizer).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (agent, user) = (save("agent", 7), save("user", 8));
    let played = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "run", "--policy", "model", "--model", &agent, "--user", "model",
        ];
        args.extend([
            "--tasks",
            "shop-01",
            "--max-turns",
            "3",
            "--max-new-tokens",
            "4",
        ]);
        args.extend(["--user-max-new-tokens", "6", "--out", out.to_str().unwrap()]);
        args.extend(extra);
        let output = forge(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        std::fs::read_to_string(out).unwrap()
    };
    // The agent's own model plays the user unless another is named.
    for (name, extra) in [("same", vec![]), ("apart", vec!["--user-model", &user])] {
        let out = dir.path().join(format!("{name}.jsonl"));
        let text = played(&out, &extra);
        let record: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let said = |role: &str| {
            record["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|message| message["role"] == role)
                .count()
        };
        // The model user opened, then answered each of the agent's turns;
        // only the agent's turns are the policy's to train on.
        assert_eq!(record["termination"], "max_turns", "{name}: {record}");
        assert_eq!(said("user"), 4, "{name}: {record}");
        let user_model = match name {
            "same" => &agent,
            _ => &user,
        };
        assert_eq!(
            record["user"],
            serde_json::json!({"kind": "model", "name": format!("model:{user_model}")})
        );
        assert_eq!(said("assistant"), 3, "{name}: {record}");
        let turns = record["policy_trace"]["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3, "{name}");
        assert_eq!(
            played(&dir.path().join(format!("{name}-again.jsonl")), &extra),
            text,
            "{name}: the same seed plays the same dialogue"
        );
        assert!(forge(&["replay", out.to_str().unwrap()]).status.success());
        let shown = stdout(&forge(&["show", out.to_str().unwrap()]));
        assert!(
            shown.starts_with(&format!(
                "── line 1 · task shop-01 · policy model:{agent} · seed "
            )) && shown.contains(&format!(" · user model:{user_model} ──\n")),
            "{shown}"
        );
    }
    let same = std::fs::read_to_string(dir.path().join("same.jsonl")).unwrap();
    let apart = std::fs::read_to_string(dir.path().join("apart.jsonl")).unwrap();
    assert_ne!(same, apart, "another user model says other things");

    // An evaluation is not resumed with the user sampled otherwise.
    let results = dir.path().join("eval");
    let eval = |temperature: &str| {
        let mut args = vec!["eval", "--policy", "model", "--model", &agent, "--user"];
        args.extend([
            "model",
            "--user-temperature",
            temperature,
            "--tasks",
            "shop-01",
        ]);
        args.extend(["--trials", "1", "--max-turns", "1", "--max-new-tokens", "2"]);
        args.extend([
            "--user-max-new-tokens",
            "2",
            "--json",
            "--out",
            results.to_str().unwrap(),
        ]);
        forge(&args)
    };
    let output = eval("0.7");
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json_lines(&output).pop().unwrap();
    assert_eq!(report["user"], format!("model:{agent}"), "{report}");
    assert_refused(&eval("0.5"), "`user_model.temperature`");

    // A local model user needs a local agent, and its flags need it.
    assert_refused(
        &forge(&["run", "--policy", "gold", "--user", "model"]),
        "--user model plays the user with a local model beside a local agent",
    );
    assert_refused(
        &forge(&["run", "--policy", "model", "--user-model", &user]),
        "--user-model is for --user model only",
    );
}

#[test]
fn show_prints_episodes_as_dialogues_and_names_what_it_cannot_find() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), "gold");
    let file = path.to_str().unwrap();
    let output = forge(&["show", file]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.matches("── line").count(), 28, "every episode: {text}");
    assert!(
        text.starts_with("── line 1 · task shop-01 · policy gold · seed ")
            && text.contains(
                "  agent   → find_user_by_email(email=\"ava.chen@example.com\")\n\
                 \x20         ← ok: {\"user_id\":\"u1\"}\n"
            )
            && text.contains("  end     user_stop · reward 1 · state matches · outputs 1/1"),
        "{text}"
    );
    // One line, or the episodes of some tasks.
    let shown = |args: &[&str]| {
        let mut all = vec!["show", file];
        all.extend(args);
        let output = forge(&all);
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    let third = shown(&["--line", "3"]);
    assert!(third.starts_with("── line 3 · task shop-03 ·"), "{third}");
    assert_eq!(third.matches("── line").count(), 1);
    assert_eq!(shown(&["--task", "shop-03"]), third);
    let both = shown(&["--task", "shop-02,shop-05"]);
    assert!(both.contains("task shop-02 ·") && both.contains("task shop-05 ·"));
    assert_eq!(both.matches("── line").count(), 2);

    assert_refused(
        &forge(&["show", file, "--line", "29"]),
        "--line 29: no episode is on that line of ",
    );
    assert_refused(
        &forge(&["show", file, "--line", "29"]),
        "holds 28 episodes (on lines 1 to 28)",
    );
    // Lines are the file's, blank ones included, as replay names them.
    let spaced = dir.path().join("spaced.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&spaced, text.replacen('\n', "\n\n", 1)).unwrap();
    let spaced = spaced.to_str().unwrap();
    let output = forge(&["show", spaced, "--line", "4"]);
    assert!(
        stdout(&output).starts_with("── line 4 · task shop-03 ·"),
        "{}",
        stdout(&output)
    );
    assert_refused(
        &forge(&["show", spaced, "--line", "2"]),
        "--line 2: no episode",
    );
    let edited = text.replacen(
        "\"task_id\":\"shop-03\"",
        "\"task_id\":\"shop-03\\u001b[2J\"",
        1,
    );
    std::fs::write(
        dir.path().join("spaced.jsonl"),
        edited.replacen('\n', "\n\n", 1),
    )
    .unwrap();
    let output = forge(&["replay", spaced]);
    assert!(
        stdout(&output).contains("line 4 (task shop-03\\u{1b}[2J) could not be replayed"),
        "the file's line, its control characters escaped: {}",
        stdout(&output)
    );
    assert_refused(
        &forge(&["show", file, "--task", "shop-99"]),
        "--task `shop-99`: ",
    );
    assert_refused(
        &forge(&["show", file, "--task", "shop-01", "--line", "2"]),
        "--line 2 is an episode of task `shop-02`, not of --task shop-01",
    );
    assert_refused(
        &forge(&["show", "/nonexistent.jsonl"]),
        "/nonexistent.jsonl",
    );
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    assert_refused(
        &forge(&["show", empty.to_str().unwrap()]),
        "holds no episode to show",
    );
}
