//! The suites against their reference implementations: every task's gold
//! replay must give the reference's output strings and final database.
//!
//! The fixtures hold, per task, what `scripts/bench/tau_reference.py --digest`
//! prints when it drives the reference code (tool names, the sha256 of the
//! outputs, the final database hash). On a mismatch, run that script without
//! `--digest` and `forge bench replay <suite> --data DIR --json` to see the
//! differing strings.

use forge_runtime::{Environment, Sandbox};
use forge_suites::{Suite, TaskReplay};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/benchmarks")
}

fn fixture(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).expect("fixture lines are JSON"))
        .collect()
}

/// The compact form of a replay, as the reference script's `--digest` writes it.
fn digest(replay: &TaskReplay) -> Value {
    let outputs: Vec<&str> = replay
        .actions
        .iter()
        .map(|action| action.output.as_str())
        .collect();
    let text = forge_pycompat::to_canonical(&json!(outputs));
    json!({
        "task_id": replay.task_id,
        "names": replay.actions.iter().map(|action| action.name.as_str()).collect::<Vec<_>>(),
        "outputs_sha256": format!("{:x}", Sha256::digest(text.as_bytes())),
        "final_db_sha256": replay.final_db_sha256,
    })
}

fn check_against_reference(suite: Suite, fixture_name: &str) {
    let bundle = suite.load(&data_dir()).expect("the suite loads");
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let env = Environment::load(&sandbox, bundle).expect("every gold action runs");
    let expected = fixture(fixture_name);
    assert_eq!(env.tasks().len(), expected.len(), "{suite}: task count");
    let mut mismatches = Vec::new();
    for (task, expected) in env.tasks().iter().zip(&expected) {
        let (replay, _) = forge_suites::replay(&env, task);
        assert!(
            !replay.failed(),
            "{suite} {}: a sandbox error",
            replay.task_id
        );
        if &digest(&replay) != expected {
            mismatches.push(replay.task_id);
        }
    }
    assert!(
        mismatches.is_empty(),
        "{suite}: {} of {} tasks differ from the reference: {:?}",
        mismatches.len(),
        expected.len(),
        mismatches
    );
}

#[test]
fn tau_bench_retail_replays_exactly_as_the_reference() {
    check_against_reference(Suite::TauRetail, "tau-bench-retail.jsonl");
}

#[test]
fn tau_bench_airline_replays_exactly_as_the_reference() {
    check_against_reference(Suite::TauAirline, "tau-bench-airline.jsonl");
}

#[test]
fn tau2_bench_airline_replays_exactly_as_the_reference() {
    check_against_reference(Suite::Tau2Airline, "tau2-bench-airline.jsonl");
}

#[test]
fn tau2_bench_retail_replays_exactly_as_the_reference() {
    check_against_reference(Suite::Tau2Retail, "tau2-bench-retail.jsonl");
}

/// A copy of the retail data in a temporary directory, to break.
fn retail_copy() -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("a temporary directory");
    let from = data_dir().join("tau-bench/retail");
    let to = copy.path().join("tau-bench/retail");
    std::fs::create_dir_all(&to).expect("creating the copy");
    for entry in std::fs::read_dir(&from).expect("the retail data") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, to.join(path.file_name().expect("a file name"))).expect("copying");
    }
    copy
}

#[test]
fn missing_and_malformed_files_are_named() {
    let copy = retail_copy();
    let dir = copy.path().join("tau-bench/retail");

    std::fs::remove_file(dir.join("products.json")).expect("removing");
    let error = format!("{:#}", Suite::TauRetail.load(copy.path()).unwrap_err());
    assert!(error.contains("products.json"), "{error}");

    std::fs::write(dir.join("products.json"), "{\"p1\": 3}").expect("writing");
    let error = format!("{:#}", Suite::TauRetail.load(copy.path()).unwrap_err());
    assert!(
        error.contains("products.json") && error.contains("`p1`"),
        "{error}"
    );

    std::fs::copy(
        data_dir().join("tau-bench/retail/products.json"),
        dir.join("products.json"),
    )
    .expect("restoring");
    std::fs::write(
        dir.join("tasks_dev.json"),
        r#"[{"user_id": "u", "instruction": "i", "actions": [{"name": "x"}]}]"#,
    )
    .expect("writing");
    let error = format!("{:#}", Suite::TauRetail.load(copy.path()).unwrap_err());
    assert!(
        error.contains("tasks_dev.json") && error.contains("kwargs"),
        "{error}"
    );

    let error = format!(
        "{:#}",
        Suite::TauRetail
            .load(Path::new("/nonexistent"))
            .unwrap_err()
    );
    assert!(error.contains("tau-bench/retail"), "{error}");
}

/// A copy of the τ²-bench airline data in a temporary directory, to break.
fn tau2_airline_copy() -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("a temporary directory");
    let to = copy.path().join("tau2-bench/airline");
    std::fs::create_dir_all(&to).expect("creating the copy");
    for name in ["db.json", "tasks.json", "policy.md"] {
        let from = data_dir().join("tau2-bench/airline").join(name);
        std::fs::copy(&from, to.join(name)).expect("copying");
    }
    copy
}

#[test]
fn tau2_missing_and_malformed_input_is_named() {
    let copy = tau2_airline_copy();
    let dir = copy.path().join("tau2-bench/airline");
    let load = || format!("{:#}", Suite::Tau2Airline.load(copy.path()).unwrap_err());

    let db_text = std::fs::read_to_string(dir.join("db.json")).expect("reading");
    let mut db: Value = serde_json::from_str(&db_text).expect("the database is JSON");
    db["users"]["mia_li_3668"]
        .as_object_mut()
        .expect("a user")
        .remove("email");
    std::fs::write(dir.join("db.json"), db.to_string()).expect("writing");
    let error = load();
    assert!(
        error.contains("db.json") && error.contains("users.mia_li_3668.email: field required"),
        "{error}"
    );
    std::fs::write(dir.join("db.json"), db_text).expect("restoring");

    let tasks_text = std::fs::read_to_string(dir.join("tasks.json")).expect("reading");
    let mut tasks: Value = serde_json::from_str(&tasks_text).expect("the tasks are JSON");
    tasks[1]["evaluation_criteria"]["actions"][0]["requestor"] = json!("user");
    std::fs::write(dir.join("tasks.json"), tasks.to_string()).expect("writing");
    let error = load();
    assert!(
        error.contains("tasks.json") && error.contains("task `1`") && error.contains("`user`"),
        "{error}"
    );

    std::fs::remove_file(dir.join("policy.md")).expect("removing");
    std::fs::write(dir.join("tasks.json"), tasks_text).expect("restoring");
    assert!(load().contains("policy.md"));

    let error = format!(
        "{:#}",
        Suite::Tau2Retail
            .load(Path::new("/nonexistent"))
            .unwrap_err()
    );
    assert!(error.contains("tau2-bench/retail"), "{error}");
}

#[test]
fn suites_are_named_as_on_the_command_line() {
    for suite in Suite::ALL {
        assert_eq!(suite.name().parse::<Suite>().unwrap(), *suite);
    }
    let error = "tau-bench/bank".parse::<Suite>().unwrap_err().to_string();
    assert!(error.contains("tau-bench/retail"), "{error}");
}

/// τ²-bench's `reward_basis` decides which checks count: retail's tasks are
/// judged on the database and NL assertions (left unevaluated, listed), so
/// what the agent says is not required; airline's count `communicate_info`.
#[test]
fn tau2_reward_basis_decides_what_is_checked() {
    let retail = Suite::Tau2Retail
        .load(&data_dir())
        .expect("the suite loads");
    let with_nl = retail
        .tasks
        .iter()
        .filter(|task| !task.unevaluated.is_empty())
        .count();
    // 112 tasks count NL assertions; 40 of them have any.
    assert_eq!(with_nl, 40);
    assert!(
        retail
            .tasks
            .iter()
            .all(|task| task.required_outputs.is_empty())
    );
    assert!(
        retail
            .tasks
            .iter()
            .flat_map(|task| &task.unevaluated)
            .all(|check| check.starts_with("NL_ASSERTION: "))
    );

    let airline = Suite::Tau2Airline
        .load(&data_dir())
        .expect("the suite loads");
    assert!(airline.tasks.iter().all(|task| task.unevaluated.is_empty()));
    assert_eq!(
        airline
            .tasks
            .iter()
            .filter(|task| !task.required_outputs.is_empty())
            .count(),
        6
    );
}

/// Malformed calls reach the suites' tools (the host does not check them
/// against the schemas), which answer as the reference does: the texts below
/// are what the Python implementations print.
#[test]
fn malformed_calls_get_the_references_answers() {
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let envs: Vec<(Suite, Environment)> = [Suite::TauRetail, Suite::Tau2Retail]
        .into_iter()
        .map(|suite| {
            let bundle = suite.load(&data_dir()).expect("the suite loads");
            (
                suite,
                Environment::load(&sandbox, bundle).expect("the gold actions run"),
            )
        })
        .collect();
    let answer = |suite: Suite, name: &str, arguments: Value| {
        let env = &envs
            .iter()
            .find(|(loaded, _)| *loaded == suite)
            .expect("loaded")
            .1;
        let mut instance = env.component().instance();
        let call = forge_runtime::ToolCall {
            name: name.to_owned(),
            arguments,
        };
        forge_runtime::environment::execute(&mut instance, &env.tasks()[0].initial, &call)
            .observation
            .content()
    };
    let cases = [
        (
            Suite::TauRetail,
            "refund_everything",
            json!({}),
            "Unknown action refund_everything",
        ),
        (
            Suite::TauRetail,
            "get_order_details",
            json!({}),
            "Error: GetOrderDetails.invoke() missing 1 required positional argument: 'order_id'",
        ),
        (
            Suite::TauRetail,
            "get_user_details",
            json!({"user_id": "x", "foo": 1}),
            "Error: GetUserDetails.invoke() got an unexpected keyword argument 'foo'",
        ),
        // The schema's enum would refuse the reason; the reference looks the order up first.
        (
            Suite::TauRetail,
            "cancel_pending_order",
            json!({"order_id": "#W0000000", "reason": "because"}),
            "Error: order not found",
        ),
        (
            Suite::Tau2Retail,
            "refund_everything",
            json!({}),
            "Error: Tool 'refund_everything' not found.",
        ),
    ];
    for (suite, name, arguments, expected) in cases {
        assert_eq!(answer(suite, name, arguments), expected, "{suite} {name}");
    }
}
