//! The sandbox's contract with well-behaved components: caching, determinism,
//! argument validation, and the environment loader's errors.

use crate::common::{guest_component, sandbox, test_limits};
use forge_runtime::bundle::{Bundle, ToolCall};
use forge_runtime::environment::execute;
use forge_runtime::{Actor, Environment, Observation, Sandbox, State};
use serde_json::json;

fn example_bundle() -> Bundle {
    let dir = tempfile::tempdir().unwrap();
    Bundle::read_dir(&crate::common::export_example(dir.path())).unwrap()
}

#[test]
fn compiled_components_are_cached_and_a_corrupt_cache_entry_is_recompiled() {
    let wasm = guest_component("forge-test-hostile");
    let (first, cache) = sandbox(test_limits());
    first.load(&wasm).unwrap();
    let entries: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "one compiled artefact: {entries:?}");
    assert_eq!(entries[0].extension().unwrap(), "cwasm");

    std::fs::write(&entries[0], b"corrupt").unwrap();
    let second = Sandbox::new(test_limits(), Some(cache.path().to_owned())).unwrap();
    let component = second
        .load(&wasm)
        .expect("a corrupt cache entry is recompiled");
    assert!(component.tool(Actor::Agent, "write_note").is_some());
    assert!(
        std::fs::metadata(&entries[0]).unwrap().len() > 1000,
        "the entry was rewritten"
    );
}

#[test]
fn a_component_with_agent_tools_alone_has_no_user_side() {
    let (sandbox, _cache) = sandbox(test_limits());
    let component = sandbox
        .load(&guest_component("forge-test-hostile"))
        .unwrap();
    assert!(!component.tools().is_empty());
    assert!(component.tools_of(Actor::User).is_empty());
    let mut instance = component.instance();
    let state = State::default();
    let answer = |outcome: forge_runtime::sandbox::CallOutcome| outcome.result.unwrap();
    assert_eq!(
        answer(instance.call(&state, Actor::User, "write_note", "{}")),
        Err("the user has no tool `write_note`".to_owned())
    );
    assert_eq!(
        answer(instance.invoke(&state, Actor::Agent, "write_note", "{}")),
        Err("unknown function `write_note`".to_owned())
    );
    assert_eq!(answer(instance.sync(&state)), Ok(String::new()));
}

#[test]
fn same_calls_give_the_same_results_and_fuel_in_independent_hosts() {
    let bundle = example_bundle();
    let run = || {
        let (sandbox, _cache) = sandbox(forge_runtime::Limits::default());
        let env = Environment::load(&sandbox, bundle.clone()).unwrap();
        let task = &env.tasks()[0];
        let mut instance = env.component().instance();
        let mut state = task.initial.clone();
        let mut trace = Vec::new();
        for call in &task.task.gold_actions {
            let executed = execute(&mut instance, &state, call);
            state = executed.state;
            trace.push((executed.observation, executed.fuel, state.digest()));
        }
        trace
    };
    assert_eq!(run(), run());
}

#[test]
fn arguments_are_validated_before_the_sandbox() {
    let bundle = example_bundle();
    let (sandbox, _cache) = sandbox(forge_runtime::Limits::default());
    let env = Environment::load(&sandbox, bundle).unwrap();
    let mut instance = env.component().instance();
    let state = env.tasks()[0].initial.clone();
    let cases = [
        (
            ToolCall::new("get_user", json!({})),
            "invalid arguments: missing required argument `user_id`",
        ),
        (
            ToolCall::new("get_user", json!({"user_id": 1})),
            "invalid arguments: `user_id` must be string, got integer",
        ),
        (
            ToolCall::new("no_such_tool", json!({})),
            "unknown tool `no_such_tool`",
        ),
    ];
    for (call, expected) in cases {
        let executed = execute(&mut instance, &state, &call);
        assert_eq!(
            executed.observation,
            Observation::ToolError(expected.to_owned())
        );
        assert_eq!(executed.fuel, 0, "refused before entering the sandbox");
    }
}

#[test]
fn a_task_whose_gold_actions_break_is_refused_with_its_name() {
    let (sandbox, _cache) = sandbox(forge_runtime::Limits::default());
    // A tool the agent lacks, one the user lacks, and arguments the schema
    // refuses.
    let broken = [
        (
            ToolCall::new("teleport", json!({})),
            "the agent has no such tool",
        ),
        (
            ToolCall {
                actor: Actor::User,
                ..ToolCall::new("teleport", json!({}))
            },
            "the user has no such tool",
        ),
        (
            ToolCall::new("get_order", json!({"order_id": 7})),
            "invalid arguments",
        ),
    ];
    for (call, expected) in broken {
        let mut bundle = example_bundle();
        bundle.tasks[2].gold_actions.push(call.clone());
        let error = Environment::load(&sandbox, bundle)
            .err()
            .expect("a broken gold action is refused");
        let message = format!("{error:#}");
        assert!(
            message.contains("shop-03")
                && message.contains(&format!("(`{}`)", call.name))
                && message.contains(expected),
            "{message}"
        );
    }
}

#[test]
fn state_hash_is_python_compatible() {
    // python3 -c 'import json,hashlib; print(hashlib.sha256(json.dumps({"users": {"u1": {"name": "Zoë", "balance": 1e-05, "n": 3}}}, sort_keys=True, separators=(",",":"), ensure_ascii=False).encode()).hexdigest())'
    let state =
        State::from_json(&json!({"users": {"u1": {"name": "Zoë", "balance": 1e-05, "n": 3}}}))
            .unwrap();
    assert_eq!(
        state.canonical_json(),
        r#"{"users":{"u1":{"balance":1e-05,"n":3,"name":"Zoë"}}}"#
    );
    assert_eq!(state.sha256(), PYTHON_SHA256);
}

const PYTHON_SHA256: &str = "1188e168a5f8af08026f2332dfe56284c2c9e3119350acd7970971bbe5c748c0";
