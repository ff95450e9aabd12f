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
    let mut digest = json!({
        "task_id": replay.task_id,
        "names": replay.actions.iter().map(|action| action.name.as_str()).collect::<Vec<_>>(),
        "outputs_sha256": format!("{:x}", Sha256::digest(text.as_bytes())),
        "final_db_sha256": replay.final_db_sha256,
    });
    if let Some(user_db) = &replay.final_user_db_sha256 {
        digest["final_user_db_sha256"] = json!(user_db);
    }
    digest
}

fn check_against_reference(suite: Suite, fixture_name: &str) {
    check_against_reference_except(suite, fixture_name, |_, _| false);
}

/// Like [`check_against_reference`], with `explained` accepting the
/// differences the reference's own quirks account for (the test that
/// passes it says which).
fn check_against_reference_except(
    suite: Suite,
    fixture_name: &str,
    explained: impl Fn(&Value, &Value) -> bool,
) {
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
        let digest = digest(&replay);
        if &digest != expected && !explained(&digest, expected) {
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

#[test]
fn tau2_bench_mock_replays_exactly_as_the_reference() {
    // One reference quirk: after a task's `initialization_data.agent_data`,
    // the reference points the user's toolkit at the agent's database
    // (`Environment.set_state`), so the "user database" it hashes is the
    // agent's. Forge keeps the user's database; for that task the
    // reference's user hash must then be exactly its agent hash, and all
    // else agree.
    check_against_reference_except(
        Suite::Tau2Mock,
        "tau2-bench-mock.jsonl",
        |ours, reference| {
            reference["task_id"] == "update_task_with_initialization_data"
                && reference["final_user_db_sha256"] == reference["final_db_sha256"]
                && ours["final_db_sha256"] == reference["final_db_sha256"]
                && ours["outputs_sha256"] == reference["outputs_sha256"]
        },
    );
}

#[test]
fn tau2_bench_telecom_replays_exactly_as_the_reference() {
    check_against_reference(Suite::Tau2Telecom, "tau2-bench-telecom.jsonl");
}

#[test]
fn tau2_bench_banking_knowledge_replays_exactly_as_the_reference() {
    // The reference's user toolkit works on the agent's database (one
    // `TransactionalDB` object), so its "user database" hash is the agent's;
    // Forge's state has no user database apart, and all else must agree.
    check_against_reference_except(
        Suite::Tau2Banking,
        "tau2-bench-banking_knowledge.jsonl",
        |ours, reference| {
            let mut shared = reference.clone();
            shared
                .as_object_mut()
                .and_then(|fields| fields.remove("final_user_db_sha256"))
                .is_some_and(|user_db| user_db == reference["final_db_sha256"])
                && ours == &shared
        },
    );
}

/// The tasks on which a gold run does not earn reward 1: the reference's own
/// gold runs (`scripts/bench/tau_reference.py --gold-rewards`, which scores
/// each task's gold trajectory with the reference evaluator) score 1 on every
/// τ²-bench task (banking_knowledge's included) but these two mock tasks, whose assertions need more than
/// the gold actions (the task is never completed; the notification is never
/// read).
const GOLD_RUN_FAILURES: &[&str] = &[
    "update_task_with_history_and_env_assertions",
    "update_task_with_user_tools",
];

#[test]
fn gold_runs_score_as_the_references_gold_runs() {
    use forge_runtime::policy::{GoldPolicy, ScriptedUser};
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    for suite in [
        Suite::Tau2Mock,
        Suite::Tau2Airline,
        Suite::Tau2Retail,
        Suite::Tau2Telecom,
        Suite::Tau2Banking,
    ] {
        let bundle = suite.load(&data_dir()).expect("the suite loads");
        let env = Environment::load(&sandbox, bundle).expect("every gold action runs");
        let mut unexpected = Vec::new();
        for task in env.tasks() {
            let mut policy = GoldPolicy::new(&task.task);
            let mut user = ScriptedUser::new(&task.task);
            let settings = forge_runtime::EpisodeSettings {
                max_turns: 200,
                seed: 0,
            };
            let record = forge_runtime::run_episode(
                &env,
                task,
                "gold",
                &mut policy,
                &mut user,
                None,
                settings,
            )
            .expect("the episode runs");
            let expected = if GOLD_RUN_FAILURES.contains(&task.task.id.as_str()) {
                0.0
            } else {
                1.0
            };
            if record.verdict.reward != expected {
                unexpected.push((task.task.id.clone(), record.verdict));
            }
        }
        assert!(
            unexpected.is_empty(),
            "{suite}: {} gold runs score otherwise than the reference's: {:#?}",
            unexpected.len(),
            &unexpected[..unexpected.len().min(3)]
        );
    }
}

/// The scripted user of a telecom task answers the diagnostics the manual
/// has the agent ask for: it runs the user's read-only tools it is asked
/// to, which leave the phone as it was, and the task is then solved as
/// before.
#[test]
fn the_telecom_user_runs_the_checks_it_is_asked_for() {
    use forge_runtime::policy::{GoldPolicy, ScriptedUser};
    use forge_runtime::trajectory::Role;
    use forge_runtime::{Action, Actor, Episode, EpisodeSettings};
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let bundle = Suite::Tau2Telecom
        .load(&data_dir())
        .expect("the suite loads");
    let env = Environment::load(&sandbox, bundle).expect("every gold action runs");
    let task =
        env.tasks()
            .iter()
            .find(|task| {
                !GOLD_RUN_FAILURES.contains(&task.task.id.as_str())
                    && task.task.gold_actions.iter().any(|call| {
                        call.actor == Actor::User && call.name == "toggle_airplane_mode"
                    })
            })
            .expect("a task whose user turns airplane mode off");
    let mut user = ScriptedUser::new(&task.task);
    let settings = EpisodeSettings {
        max_turns: 200,
        seed: 0,
    };
    let mut episode = Episode::start(&env, task, &mut user, settings).expect("the episode starts");
    let before = episode.state().digest();
    episode
        .act(
            Action::Say(
                "Could you run `check_status_bar()` and check_network_status for me?".into(),
            ),
            &mut user,
        )
        .expect("the user answers");
    let transcript = episode.transcript();
    let answer = transcript.last().expect("an answer");
    assert_eq!(answer.role, Role::User);
    let answer = answer.content.as_deref().unwrap_or_default();
    assert!(
        answer.starts_with("Done. `check_status_bar()` → ") && answer.contains("Airplane Mode"),
        "{answer}"
    );
    assert!(answer.contains("; `check_network_status()` → "), "{answer}");
    assert_eq!(episode.steps().len(), 2);
    assert_eq!(episode.state().digest(), before, "checks change nothing");
    let mut policy = GoldPolicy::new(&task.task);
    let tools = env.component().tools();
    while !episode.is_over() {
        episode
            .step(&mut policy, &mut user, tools)
            .expect("the episode goes on");
    }
    let record = episode
        .finish(&env, task, "gold", None, None)
        .expect("the episode ends");
    assert_eq!(record.verdict.reward, 1.0, "{:?}", record.verdict);
}

/// banking_knowledge scores the database as the reference does: which
/// discoverable tools the agent unlocked is no part of it, nor is a call of a
/// read-only discoverable tool the gold actions do not make (the task's
/// read-log allowlist); a call of a tool that changes state is.
#[test]
fn banking_rewards_ignore_unlocks_and_extra_reads() {
    use forge_runtime::policy::{GoldPolicy, ScriptedUser};
    use forge_runtime::{Actor, ToolCall};
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let bundle = Suite::Tau2Banking
        .load(&data_dir())
        .expect("the suite loads");
    let env = Environment::load(&sandbox, bundle).expect("every gold action runs");
    let calls_tool = |task: &forge_runtime::Task, tool: &str| {
        task.gold_actions
            .iter()
            .any(|call| call.arguments["agent_tool_name"] == tool)
    };
    let read_tool = "get_closure_reason_history_8293";
    let task = env
        .tasks()
        .iter()
        .find(|task| {
            task.task.state_check
                && calls_tool(&task.task, "get_all_user_accounts_by_user_id_3847")
                && !calls_tool(&task.task, read_tool)
        })
        .expect("a task reading accounts");
    let agent = |name: &str, arguments: Value| ToolCall {
        name: name.to_owned(),
        arguments,
        actor: Actor::Agent,
    };
    let unlock = |tool: &str| {
        agent(
            "unlock_discoverable_agent_tool",
            json!({"agent_tool_name": tool}),
        )
    };
    let call = |tool: &str, arguments: &str| {
        agent(
            "call_discoverable_agent_tool",
            json!({"agent_tool_name": tool, "arguments": arguments}),
        )
    };
    let reward = |extra: Vec<ToolCall>| {
        let mut played = task.task.clone();
        played.gold_actions.splice(0..0, extra);
        let mut policy = GoldPolicy::new(&played);
        let mut user = ScriptedUser::new(&played);
        let settings = forge_runtime::EpisodeSettings {
            max_turns: 200,
            seed: 0,
        };
        forge_runtime::run_episode(&env, task, "gold", &mut policy, &mut user, None, settings)
            .expect("the episode runs")
            .verdict
            .reward
    };
    assert_eq!(reward(Vec::new()), 1.0);
    assert_eq!(
        reward(vec![
            unlock("example_agent_tool_0000"),
            unlock(read_tool),
            call(read_tool, r#"{"credit_card_account_id": "cc_nobody"}"#),
        ]),
        1.0,
        "unlocking and an extra read leave the database as the gold's"
    );
    assert_eq!(
        reward(vec![
            unlock("example_agent_tool_0000"),
            call("example_agent_tool_0000", "{}"),
        ]),
        0.0,
        "a tool that changes state is logged"
    );
}

/// banking_knowledge's `grep` counts matches in each document as the
/// reference's `GrepRetriever` does, and ranks them so: the fixture holds the
/// reference's counts for each pattern (`scripts/bench/tau_reference.py
/// tau2-bench/banking_knowledge --grep …`), and the sha256 of its whole answer,
/// checked where no tie decides the top ten (the reference breaks ties in the
/// order it listed its directory; Forge in id order).
#[test]
fn banking_grep_counts_and_ranks_as_the_reference() {
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let bundle = Suite::Tau2Banking
        .load(&data_dir())
        .expect("the suite loads");
    let env = Environment::load(&sandbox, bundle).expect("every gold action runs");
    let mut instance = env.component().instance();
    for case in fixture("tau2-bench-banking_knowledge-grep.jsonl") {
        let pattern = case["pattern"].as_str().expect("a pattern");
        let call = forge_runtime::ToolCall::new("grep".to_owned(), json!({ "pattern": pattern }));
        let answer =
            forge_runtime::environment::execute(&mut instance, &env.tasks()[0].initial, &call)
                .observation
                .content();
        // (id, score) of each document shown.
        let shown: Vec<(String, String)> = answer
            .lines()
            .filter_map(|line| line.strip_prefix("   ID: "))
            .zip(
                answer
                    .lines()
                    .filter_map(|line| line.strip_prefix("   Score: ")),
            )
            .map(|(id, score)| (id.to_owned(), score.to_owned()))
            .collect();
        let mut expected: Vec<(String, u64)> = case["matches"]
            .as_object()
            .expect("the counts")
            .iter()
            .map(|(id, count)| (id.clone(), count.as_u64().expect("a count")))
            .collect();
        expected.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let ties_decide = expected.len() > 10 && expected[9].1 == expected[10].1
            || expected
                .windows(2)
                .take(9)
                .any(|pair| pair[0].1 == pair[1].1);
        let expected: Vec<(String, String)> = expected
            .into_iter()
            .take(10)
            .map(|(id, count)| (id, format!("{count}.0000")))
            .collect();
        assert_eq!(shown, expected, "pattern {pattern:?}");
        if !ties_decide {
            let digest = format!("{:x}", Sha256::digest(answer.as_bytes()));
            assert_eq!(
                digest, case["output_sha256"],
                "pattern {pattern:?}: {answer}"
            );
        }
    }
}

/// τ-bench airline's certificate says its amount as the reference's
/// f-string does, a string amount without quotes.
#[test]
fn a_certificate_says_its_amount_as_python_formats_it() {
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let bundle = Suite::TauAirline
        .load(&data_dir())
        .expect("the suite loads");
    let env = Environment::load(&sandbox, bundle).expect("every gold action runs");
    let mut instance = env.component().instance();
    let initial = &env.tasks()[0].initial;
    for (amount, said) in [
        (json!(100), "100"),
        (json!("100"), "100"),
        (json!(2.5), "2.5"),
    ] {
        let call = forge_runtime::ToolCall::new(
            "send_certificate".to_owned(),
            json!({"user_id": "mia_li_3668", "amount": amount}),
        );
        let answer = forge_runtime::environment::execute(&mut instance, initial, &call)
            .observation
            .content();
        assert!(
            answer.ends_with(&format!("with amount {said}.")),
            "{amount}: {answer}"
        );
    }
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
    tasks[1]["evaluation_criteria"]["actions"][0]["requestor"] = json!("robot");
    std::fs::write(dir.join("tasks.json"), tasks.to_string()).expect("writing");
    let error = load();
    assert!(
        error.contains("tasks.json")
            && error.contains("task `1`")
            && error.contains("requestor")
            && error.contains("`robot`"),
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

#[test]
fn telecom_files_and_set_up_errors_are_named() {
    let copy = tempfile::tempdir().expect("a temporary directory");
    let dir = copy.path().join("tau2-bench/telecom");
    std::fs::create_dir_all(&dir).expect("creating the copy");
    for entry in std::fs::read_dir(data_dir().join("tau2-bench/telecom")).expect("the data") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, dir.join(path.file_name().expect("a name"))).expect("copying");
    }
    let load = || format!("{:#}", Suite::Tau2Telecom.load(copy.path()).unwrap_err());

    let db = std::fs::read_to_string(dir.join("db.toml")).expect("reading");
    std::fs::write(dir.join("db.toml"), db.replacen("[[lines]]", "[[lines]", 1)).expect("writing");
    let error = load();
    assert!(
        error.contains("db.toml") && error.contains("TOML"),
        "{error}"
    );
    std::fs::write(
        dir.join("db.toml"),
        db.replacen("phone_number = \"555-123-2001\"\n", "", 1),
    )
    .expect("writing");
    let error = load();
    assert!(
        error.contains("db.toml") && error.contains("lines.0.phone_number: field required"),
        "{error}"
    );
    std::fs::write(dir.join("db.toml"), &db).expect("restoring");

    // A set-up step the component has no function for breaks its task, named.
    let tasks_text = std::fs::read_to_string(dir.join("tasks.json")).expect("reading");
    let mut tasks: Value = serde_json::from_str(&tasks_text).expect("the tasks are JSON");
    tasks[0]["initial_state"]["initialization_actions"][0]["func_name"] = json!("set_user_infos");
    let id = tasks[0]["id"].as_str().expect("an id").to_owned();
    std::fs::write(dir.join("tasks.json"), tasks.to_string()).expect("writing");
    let bundle = Suite::Tau2Telecom
        .load(copy.path())
        .expect("the data itself reads");
    let sandbox = Sandbox::with_defaults().expect("a sandbox");
    let error = match Environment::load(&sandbox, bundle) {
        Ok(_) => panic!("a task whose set-up fails loads"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains(&id) && error.contains("set-up step 0") && error.contains("set_user_infos"),
        "{error}"
    );
}

/// The first NL assertion of a τ²-bench task, read from the task file.
fn first_nl_assertion(domain: &str, index: usize) -> Option<String> {
    let path = data_dir()
        .join("tau2-bench")
        .join(domain)
        .join("tasks.json");
    let tasks: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    tasks[index]["evaluation_criteria"]["nl_assertions"][0]
        .as_str()
        .map(str::to_owned)
}

/// τ²-bench's `reward_basis` decides which checks count: retail's tasks are
/// judged on the database and NL assertions (for a judge model), so
/// what the agent says is not required; airline's count `communicate_info`.
#[test]
fn tau2_reward_basis_decides_what_is_checked() {
    let retail = Suite::Tau2Retail
        .load(&data_dir())
        .expect("the suite loads");
    let with_nl = retail
        .tasks
        .iter()
        .filter(|task| !task.nl_assertions.is_empty())
        .count();
    // 112 tasks count NL assertions; 40 of them have any.
    assert_eq!(with_nl, 40);
    assert!(
        retail
            .tasks
            .iter()
            .all(|task| task.required_outputs.is_empty())
    );
    // Their text, as the task file has it (retail task 2 has some).
    assert_eq!(
        retail.tasks[2].nl_assertions.first().map(String::as_str),
        first_nl_assertion("retail", 2).as_deref()
    );

    let airline = Suite::Tau2Airline
        .load(&data_dir())
        .expect("the suite loads");
    assert!(
        airline
            .tasks
            .iter()
            .all(|task| task.nl_assertions.is_empty())
    );
    assert_eq!(
        airline
            .tasks
            .iter()
            .filter(|task| !task.required_outputs.is_empty())
            .count(),
        6
    );

    // Counted by hand from the task files: how many tasks count the state
    // (DB in the basis, and gold actions or assertions to build it from),
    // assertions (ENV_ASSERTION) and calls (ACTION), and the set-up steps
    // and the user's gold calls they bring.
    let summary = |suite: Suite| {
        let bundle = suite.load(&data_dir()).expect("the suite loads");
        let tasks = &bundle.tasks;
        let count =
            |check: fn(&forge_runtime::Task) -> usize| tasks.iter().map(check).sum::<usize>();
        [
            count(|task| usize::from(task.state_check)),
            count(|task| task.assertions.len()),
            count(|task| usize::from(!task.required_calls.is_empty())),
            count(|task| task.setup.len()),
            count(|task| {
                task.gold_actions
                    .iter()
                    .filter(|call| call.actor == forge_runtime::Actor::User)
                    .count()
            }),
        ]
    };
    // mock's 2 set-up steps, plus the tool call of each of its 2 message histories.
    assert_eq!(summary(Suite::Tau2Mock), [8, 3, 2, 4, 0]);
    assert_eq!(summary(Suite::Tau2Telecom), [0, 3674, 32, 18460, 10927]);
    // banking_knowledge: every task starts with the read-log allowlist of
    // its gold calls, and the 35 whose `initialization_data` changes the
    // database merge it in with one more set-up step.
    assert_eq!(summary(Suite::Tau2Banking), [88, 0, 9, 132, 102]);
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
        let call = forge_runtime::ToolCall::new(name.to_owned(), arguments);
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
