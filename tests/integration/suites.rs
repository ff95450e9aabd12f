//! The benchmark suites through the CLI: `forge bench replay`, and `forge run`
//! with `--suite` (the suites' exactness against the reference is tested in
//! `suites/tests/reference.rs`).

use crate::common::{forge, json_lines, stderr};

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
    assert_eq!(lines.len(), 50);
    assert_eq!(lines[0]["task_id"], "test/0");
    assert_eq!(lines[0]["actions"][0]["name"], "book_reservation");
    assert!(
        lines[0]["actions"][0]["output"]
            .as_str()
            .unwrap()
            .starts_with("{\"reservation_id\": \"HATHAT\"")
    );
    assert_eq!(lines[0]["final_db_sha256"].as_str().unwrap().len(), 64);
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

#[test]
fn bad_suite_arguments_are_named() {
    let output = forge(&["bench", "replay", "tau-bench/banking", "--data", DATA]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("tau-bench/retail"),
        "{}",
        stderr(&output)
    );

    let output = forge(&[
        "bench",
        "replay",
        "tau-bench/retail",
        "--data",
        "/nonexistent",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("/nonexistent/tau-bench/retail"),
        "{}",
        stderr(&output)
    );

    let output = forge(&["run", "--suite", "tau-bench/retail"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--data"), "{}", stderr(&output));
}
