//! The benchmark suites through the CLI: `forge bench replay`, and `forge run`
//! with `--suite` (the suites' exactness against the reference is tested in
//! `suites/tests/reference.rs`).

use crate::common::{assert_refused, forge, json_lines, jsonl, stderr, stdout};
use serde_json::{Value, json};

const DATA: &str = "../shared/benchmarks";

#[test]
fn bench_replay_prints_a_line_per_task() {
    let output = forge(&[
        "bench",
        "replay",
        "tau-bench/airline",
        "--data",
        DATA,
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 51);
    assert_eq!(lines[0]["task_id"], "test/0");
    assert_eq!(lines[0]["actions"][0]["name"], "book_reservation");
    assert!(
        lines[0]["actions"][0]["output"]
            .as_str()
            .unwrap()
            .starts_with("{\"reservation_id\": \"HATHAT\"")
    );
    assert_eq!(lines[0]["final_db_sha256"].as_str().unwrap().len(), 64);
    let summary = &lines[50];
    assert_eq!(summary["summary"], true, "{summary}");
    assert_eq!(summary["tasks"], 50);
    assert_eq!(summary["sandbox_errors"], json!([]));
    let calls: usize = lines[..50]
        .iter()
        .map(|line| line["actions"].as_array().unwrap().len())
        .sum();
    assert_eq!(summary["gold_calls"], calls);
}

#[test]
fn gold_runs_solve_suite_tasks_and_report_pass_k() {
    let output = forge(&[
        "run",
        "--suite",
        "tau-bench/retail",
        "--data",
        DATA,
        "--policy",
        "gold",
        "--tasks",
        "test/0,test/5,dev/3",
        "--trials",
        "2",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let summary = lines.last().unwrap();
    assert_eq!(summary["episodes"], 6);
    assert_eq!(summary["success_rate"], 1.0);
    assert_eq!(summary["trials"], 2);
    assert_eq!(summary["pass_hat_k"][1]["k"], 2);
    assert_eq!(summary["pass_hat_k"][1]["value"], 1.0);
}

/// τ-bench ends an episode at the agent's transfer to a human, judged as
/// it stands then.
#[test]
fn a_transfer_to_a_human_ends_a_tau_bench_episode() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let output = forge(&[
        "run",
        "--suite",
        "tau-bench/retail",
        "--data",
        DATA,
        "--policy",
        "gold",
        "--tasks",
        "test/10",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let episode = &json_lines(&output)[0];
    assert_eq!(episode["termination"], "agent_ended", "{episode}");
    assert_eq!(episode["reward"], 1.0, "{episode}");
    let record = &jsonl(&out)[0];
    let last = record["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "tool", "nothing follows the transfer: {last}");
    let output = forge(&[
        "replay",
        out.to_str().unwrap(),
        "--suite",
        "tau-bench/retail",
        "--data",
        DATA,
    ]);
    assert!(output.status.success(), "{}", stdout(&output));
}

#[test]
fn gold_runs_on_a_suite_with_user_tools_are_judged_by_the_tasks_basis() {
    let output = forge(&[
        "run",
        "--suite",
        "tau2-bench/mock",
        "--data",
        DATA,
        "--policy",
        "gold",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let episode = |id: &str| {
        lines
            .iter()
            .find(|line| line["task_id"] == id)
            .unwrap_or_else(|| panic!("no episode of `{id}`"))
    };
    // An ACTION check with `compare_args: []`: the name alone must match.
    let transfer = episode("impossible_task_1");
    assert_eq!(
        (transfer["reward"].as_f64(), transfer["calls_made"].as_u64()),
        (Some(1.0), Some(1))
    );
    // Its assertion (on the task the gold call creates) holds.
    let asserted = episode("create_task_1_with_env_assertions");
    assert_eq!(asserted["reward"], 1.0);
    assert_eq!(
        (
            asserted["assertions_met"].as_u64(),
            asserted["assertions"].as_u64()
        ),
        (Some(1), Some(1))
    );
    // The two tasks whose assertions the gold actions alone do not satisfy
    // (the reference's gold runs score them 0 too): the user never read the
    // notification; the task's status was never completed.
    for id in [
        "update_task_with_user_tools",
        "update_task_with_history_and_env_assertions",
    ] {
        let failed = episode(id);
        assert_eq!(failed["reward"], 0.0, "{id}");
        assert_eq!(failed["assertions_met"], 0, "{id}");
    }
    let summary = lines.last().unwrap();
    assert_eq!(summary["successes"], 8);
}

#[test]
fn episodes_with_the_users_own_calls_replay_byte_identically() {
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("telecom.jsonl");
    let tasks = "[mobile_data_issue]user_abroad_roaming_enabled_off[PERSONA:None],[mobile_data_issue]data_mode_off[PERSONA:None]";
    let output = forge(&[
        "run",
        "--suite",
        "tau2-bench/telecom",
        "--data",
        DATA,
        "--policy",
        "gold",
        "--tasks",
        tasks,
        "--out",
        trajectory.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json_lines(&output).last().unwrap()["successes"], 2);
    let text = std::fs::read_to_string(&trajectory).unwrap();
    assert!(
        text.contains("\"actor\":\"user\""),
        "the user's calls are marked"
    );
    let output = forge(&[
        "replay",
        trajectory.to_str().unwrap(),
        "--suite",
        "tau2-bench/telecom",
        "--data",
        DATA,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    // An agent message edited: the scripted user answers it otherwise, and
    // that first difference is named, not the stop it leads to.
    let edited = dir.path().join("edited.jsonl");
    let first = std::fs::read_to_string(&trajectory).unwrap();
    let mut record: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let said = record["messages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|message| message["role"] == "assistant" && message["content"].is_string())
        .unwrap();
    said["content"] = json!("Hello, how can I help?");
    std::fs::write(&edited, format!("{record}\n")).unwrap();
    let output = forge(&[
        "replay",
        edited.to_str().unwrap(),
        "--suite",
        "tau2-bench/telecom",
        "--data",
        DATA,
    ]);
    let text = stdout(&output);
    assert!(
        !output.status.success()
            && text.contains("diverged: message ")
            && text.contains("(and then the replay stopped:"),
        "{text}"
    );
    // Replayed without the suite, it says how to give it.
    let output = forge(&["replay", trajectory.to_str().unwrap()]);
    assert_refused(
        &output,
        "replay it with `--suite tau2-bench/telecom --data DIR`",
    );
    // `forge show` tells the user's calls from the agent's, and cuts long
    // messages (the instruction) unless --full.
    let shown = |full: &[&str]| {
        let mut args = vec![
            "show",
            trajectory.to_str().unwrap(),
            "--task",
            "[mobile_data_issue]data_mode_off[PERSONA:None]",
        ];
        args.extend(full);
        let output = forge(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    let text = shown(&[]);
    let cut = |text: &str| text.lines().any(|line| line.ends_with('…'));
    let whole = shown(&["--full"]);
    assert!(cut(&text) && !cut(&whole), "--full shows messages whole");
    assert_eq!(text.matches("── line").count(), 1, "{text}");
    assert!(
        text.contains("── line 2 · task [mobile_data_issue]data_mode_off[PERSONA:None] · policy gold")
            && text.contains(
                "  agent   Please do this on your side: `toggle_data()`.\n\
                 \x20 user    → toggle_data()\n\
                 \x20         ← ok: Mobile Data is now ON.\n"
            )
            && text.ends_with("  end     user_stop · reward 1 · state matches · assertions 2/2 · partial credit 1.00\n"),
        "{text}"
    );
}

#[test]
fn inspect_lists_the_users_own_tools() {
    let output = forge(&[
        "inspect",
        "--suite",
        "tau2-bench/mock",
        "--data",
        DATA,
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let inspected = &json_lines(&output)[0];
    let names = |key: &str| -> Vec<String> {
        inspected[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names("user_tools"),
        ["check_notifications", "dismiss_notification"]
    );
    assert!(names("tools").contains(&"create_task".to_owned()));
    assert!(!names("tools").contains(&"check_notifications".to_owned()));
    // As text, the policy (the description) is its first line: the tools
    // follow at once.
    let output = forge(&["inspect", "--suite", "tau2-bench/mock", "--data", DATA]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let policy = inspected["description"].as_str().unwrap().trim();
    let more = policy.lines().count() - 1;
    assert!(
        text.lines().nth(1)
            == Some(
                format!("({more} more lines of the description: --json prints it whole)").as_str()
            )
            && text.lines().nth(2).unwrap().starts_with("content hash "),
        "{text}"
    );
}

#[test]
fn bad_suite_arguments_are_named() {
    let output = forge(&["bench", "replay", "tau-bench/banking", "--data", DATA]);
    assert_refused(&output, "tau-bench/retail");

    let output = forge(&[
        "bench",
        "replay",
        "tau-bench/retail",
        "--data",
        "/nonexistent",
    ]);
    assert_refused(&output, "/nonexistent/tau-bench/retail");

    let output = forge(&["run", "--suite", "tau-bench/retail"]);
    assert_refused(&output, "--data");
}

#[test]
fn a_malformed_task_is_named_with_its_field() {
    // τ²-bench's mock domain with its second task's instructions a number.
    let dir = tempfile::tempdir().unwrap();
    let shared = std::fs::canonicalize(DATA).unwrap().join("tau2-bench");
    let data = dir.path().join("tau2-bench");
    std::fs::create_dir_all(data.join("mock")).unwrap();
    std::os::unix::fs::symlink(shared.join("user_simulator"), data.join("user_simulator")).unwrap();
    for entry in std::fs::read_dir(shared.join("mock")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if name != "tasks.json" {
            std::os::unix::fs::symlink(&path, data.join("mock").join(name)).unwrap();
        }
    }
    let text = std::fs::read_to_string(shared.join("mock/tasks.json")).unwrap();
    let mut tasks: Value = serde_json::from_str(&text).unwrap();
    tasks[1]["user_scenario"]["instructions"] = json!(7);
    std::fs::write(data.join("mock/tasks.json"), tasks.to_string()).unwrap();
    let output = forge(&[
        "inspect",
        "--suite",
        "tau2-bench/mock",
        "--data",
        dir.path().to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        "tasks.json: task 1 (`create_task_1_with_env_assertions`): malformed task at \
         `user_scenario.instructions`",
    );
}

/// banking_knowledge through the CLI: gold runs (the user's own discoverable
/// calls and a task whose `initialization_data` is merged by a set-up step
/// among them) solve their tasks and replay byte-identically, and the agent
/// is offered `grep` over the knowledge base.
#[test]
fn banking_gold_runs_solve_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("banking.jsonl");
    let output = forge(&[
        "run",
        "--suite",
        "tau2-bench/banking_knowledge",
        "--data",
        DATA,
        "--policy",
        "gold",
        "--tasks",
        "task_016,task_026,task_080",
        "--max-turns",
        "100",
        "--out",
        trajectory.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json_lines(&output).last().unwrap()["successes"], 3);
    let output = forge(&[
        "replay",
        trajectory.to_str().unwrap(),
        "--suite",
        "tau2-bench/banking_knowledge",
        "--data",
        DATA,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));

    let output = forge(&[
        "inspect",
        "--suite",
        "tau2-bench/banking_knowledge",
        "--data",
        DATA,
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let inspected = &json_lines(&output)[0];
    assert_eq!(inspected["tools"][0]["function"]["name"], "grep");
    assert_eq!(inspected["tasks"].as_array().map(Vec::len), Some(97));

    // Its data with the tasks taken away: nothing to run, said as such.
    let data = dir.path().join("data/tau2-bench");
    let shared = std::fs::canonicalize(DATA).unwrap().join("tau2-bench");
    std::fs::create_dir_all(data.join("banking_knowledge/tasks")).unwrap();
    std::os::unix::fs::symlink(shared.join("user_simulator"), data.join("user_simulator")).unwrap();
    for kept in ["db.json", "documents", "prompts"] {
        std::os::unix::fs::symlink(
            shared.join("banking_knowledge").join(kept),
            data.join("banking_knowledge").join(kept),
        )
        .unwrap();
    }
    let output = forge(&[
        "run",
        "--suite",
        "tau2-bench/banking_knowledge",
        "--data",
        dir.path().join("data").to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        "environment `tau2-bench-banking_knowledge` has no tasks",
    );
}

#[test]
fn the_references_splits_select_tasks() {
    // τ²-bench's `split_tasks.json`: airline's `test` split is 20 of its 50.
    let output = forge(&[
        "run",
        "--suite",
        "tau2-bench/airline",
        "--data",
        DATA,
        "--policy",
        "gold",
        "--tasks",
        "split:test",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json_lines(&output).pop().unwrap();
    assert_eq!(summary["episodes"], 20);
    assert_eq!(summary["successes"], 20);
    // τ-bench's splits are its task files; banking_knowledge has none.
    let output = forge(&[
        "inspect",
        "--suite",
        "tau-bench/retail",
        "--data",
        DATA,
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let splits = &json_lines(&output)[0]["splits"];
    let sizes: Vec<usize> = ["test", "train", "dev"]
        .iter()
        .map(|name| splits[name].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [115, 500, 20]);
    let output = forge(&[
        "run",
        "--suite",
        "tau2-bench/banking_knowledge",
        "--data",
        DATA,
        "--tasks",
        "split:base",
    ]);
    assert_refused(&output, "has no split `base` (it has none)");
}
