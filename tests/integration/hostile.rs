//! Hostile components: every misbehaviour ends in a clear error, the state is
//! unchanged, and the next call on the same host works.

use crate::common::{guest_component, sandbox, test_limits};
use forge_runtime::sandbox::{SandboxError, ToolComponent};
use forge_runtime::{Actor, Sandbox, State};
use serde_json::json;

fn hostile() -> (Sandbox, ToolComponent, tempfile::TempDir) {
    let (sandbox, cache) = sandbox(test_limits());
    let component = sandbox
        .load(&guest_component("forge-test-hostile"))
        .expect("the hostile component loads");
    (sandbox, component, cache)
}

fn initial() -> State {
    State::from_json(&json!({"notes": {"n1": {"text": "original"}}})).unwrap()
}

/// Calls `tool` and checks the sandbox error, that the state is unchanged, and
/// that a well-behaved call on the same instance still works and commits.
fn assert_contained(tool: &str, check: impl Fn(&SandboxError) -> bool) -> SandboxError {
    let (_sandbox, component, _cache) = hostile();
    let mut instance = component.instance();
    let state = initial();
    let outcome = instance.call(&state, Actor::Agent, tool, "{}");
    let error = match outcome.result {
        Err(error) => error,
        other => panic!("`{tool}` should be stopped by the sandbox, got {other:?}"),
    };
    assert!(check(&error), "`{tool}` gave an unexpected error: {error}");
    assert_eq!(
        outcome.state.digest(),
        state.digest(),
        "`{tool}` changed the state"
    );
    assert_eq!(outcome.state.sha256(), state.sha256());

    let next = instance.call(&outcome.state, Actor::Agent, "write_note", "{}");
    assert_eq!(
        next.result,
        Ok(Ok(r#"{"key":"n2"}"#.to_owned())),
        "the call after `{tool}` failed"
    );
    assert!(next.state.get("notes", "n2").is_some());
    error
}

#[test]
fn infinite_loop_runs_out_of_fuel() {
    let error = assert_contained("spin", |error| {
        matches!(error, SandboxError::OutOfFuel { .. })
    });
    assert!(error.to_string().contains("ran out of fuel"));
}

#[test]
fn memory_bomb_hits_the_memory_limit() {
    let error = assert_contained("memory_bomb", |error| {
        matches!(error, SandboxError::MemoryLimit { .. })
    });
    assert!(error.to_string().contains("memory limit"), "{error}");
}

#[test]
fn deep_recursion_is_stopped() {
    // Rust guests keep their stack in linear memory: running off its end is an
    // out-of-bounds access; a deep native wasm stack is wasmtime's stack overflow.
    assert_contained("recurse", |error| match error {
        SandboxError::StackOverflow => true,
        SandboxError::Trap { trap, .. } => trap.contains("out of bounds memory access"),
        _ => false,
    });
}

#[test]
fn panic_is_a_trap_quoting_the_message() {
    let error = assert_contained("panic", |error| matches!(error, SandboxError::Trap { .. }));
    assert!(
        error.to_string().contains("the tool gave up"),
        "the panic message is quoted: {error}"
    );
}

#[test]
fn a_trap_quotes_what_its_own_call_wrote_to_stderr() {
    let (_sandbox, component, _cache) = hostile();
    let mut instance = component.instance();
    let state = initial();
    // The episode's instance lives on after a call that succeeded.
    let chatted = instance.call(&state, Actor::Agent, "chatter", "{}");
    assert!(chatted.is_success());
    let error = match instance.call(&state, Actor::Agent, "panic", "{}").result {
        Err(error) => error.to_string(),
        other => panic!("`panic` should trap, got {other:?}"),
    };
    assert!(
        error.contains("the tool gave up") && !error.contains("chatter"),
        "{error}"
    );
}

#[test]
fn oversized_result_is_refused() {
    let error = assert_contained("huge_result", |error| {
        matches!(error, SandboxError::ResultTooLarge { .. })
    });
    assert!(
        error.to_string().contains("over the result limit"),
        "{error}"
    );
}

#[test]
fn write_then_trap_leaves_no_write() {
    assert_contained("write_then_trap", |error| {
        matches!(error, SandboxError::Trap { .. })
    });
}

#[test]
fn write_then_error_leaves_no_write() {
    let (_sandbox, component, _cache) = hostile();
    let mut instance = component.instance();
    let state = initial();
    let outcome = instance.call(&state, Actor::Agent, "write_then_fail", "{}");
    assert_eq!(outcome.result, Ok(Err("failed after writing".to_owned())));
    assert_eq!(outcome.state.digest(), state.digest());
    assert_eq!(
        outcome.state.get("notes", "n1").unwrap().value(),
        &json!({"text": "original"})
    );
}

#[test]
fn wall_clock_backstop_stops_a_call_fuel_cannot() {
    let limits = forge_runtime::Limits {
        fuel: u64::MAX / 2,
        wall_time: std::time::Duration::from_millis(200),
        ..test_limits()
    };
    let (sandbox, _cache) = sandbox(limits);
    let component = sandbox
        .load(&guest_component("forge-test-hostile"))
        .unwrap();
    let mut instance = component.instance();
    let state = initial();
    let outcome = instance.call(&state, Actor::Agent, "spin", "{}");
    assert_eq!(outcome.result, Err(SandboxError::Timeout { millis: 200 }));
    assert!(
        instance
            .call(&state, Actor::Agent, "write_note", "{}")
            .is_success()
    );
}

#[test]
fn forbidden_imports_are_refused_at_load_by_name() {
    let (sandbox, _cache) = sandbox(test_limits());
    let error = match sandbox.load(&guest_component("forge-test-escape")) {
        Ok(_) => panic!("a component importing files, clocks and sockets must be refused"),
        Err(error) => format!("{error:#}"),
    };
    for import in [
        "wasi:filesystem/",
        "wasi:clocks/wall-clock",
        "wasi:sockets/",
    ] {
        assert!(
            error.contains(import),
            "the error should name {import}: {error}"
        );
    }
    // The host carries on.
    let component = sandbox
        .load(&guest_component("forge-test-hostile"))
        .unwrap();
    assert!(
        component
            .instance()
            .call(&initial(), Actor::Agent, "write_note", "{}")
            .is_success()
    );
}

#[test]
fn garbage_is_not_a_component() {
    let (sandbox, _cache) = sandbox(test_limits());
    let refusal = |wasm: &[u8]| match sandbox.load(wasm) {
        Ok(_) => panic!("{wasm:?} is no component"),
        Err(error) => format!("{error:#}"),
    };
    let error = refusal(b"\0asm\x0d\0\x01\0 not really");
    assert!(error.contains("compiling the component"), "{error}");
    let error = refusal(b"not wasm at all");
    assert!(
        error.contains("not WebAssembly")
            && error.contains("this file with `not wasm`")
            && !error.contains('\n'),
        "{error}"
    );
    // Bytes that are no text are spelt out as bytes.
    let error = refusal(b"\xff\x1b[2J\x00");
    assert!(
        error.ends_with("this file with `\\xff\\x1b[2J\\x00`"),
        "{error}"
    );
    // The smallest core module: the magic, version 1, layer 0.
    let error = refusal(b"\0asm\x01\0\0\0");
    assert!(
        error.contains("a core WebAssembly module, not a component"),
        "{error}"
    );
}

#[test]
fn hostile_calls_do_not_disturb_other_episodes() {
    let (_sandbox, component, _cache) = hostile();
    let state = initial();
    let mut victim = component.instance();
    let before = victim.call(&state, Actor::Agent, "write_note", "{}");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut attacker = component.instance();
            for tool in ["spin", "memory_bomb", "panic", "write_then_trap"] {
                assert!(!attacker.call(&state, Actor::Agent, tool, "{}").is_success());
            }
        });
        for _ in 0..50 {
            let again = victim.call(&state, Actor::Agent, "write_note", "{}");
            assert_eq!(again.result, before.result);
            assert_eq!(again.state.digest(), before.state.digest());
        }
    });
}

#[test]
fn a_failing_sync_answers_the_call_and_a_trapping_one_undoes_it() {
    use forge_runtime::ToolCall;
    use forge_runtime::environment::{Observation, execute_synced};
    let (sandbox, _cache) = sandbox(test_limits());
    let component = sandbox
        .load(&guest_component("forge-test-hostile"))
        .unwrap();
    let mut instance = component.instance();
    let state = initial();
    let arm = |tool: &str| ToolCall::new(tool, json!({}));

    // Without syncing, the call is just a call.
    let plain = execute_synced(&mut instance, &state, &arm("arm_sync_failure"), false);
    assert_eq!(plain.observation, Observation::Ok("\"armed\"".into()));

    // A refusing sync becomes the call's answer; the call's write stays.
    let refused = execute_synced(&mut instance, &state, &arm("arm_sync_failure"), true);
    assert_eq!(
        refused.observation,
        Observation::ToolError("sync refused".into())
    );
    assert!(refused.state.collection("sync").is_some());

    // A trapping sync is the sandbox's to report, and undoes the call.
    let trapped = execute_synced(&mut instance, &state, &arm("arm_sync_trap"), true);
    match &trapped.observation {
        Observation::SandboxError(message) => {
            assert!(message.contains("in the environment's sync"), "{message}")
        }
        other => panic!("expected a sandbox error, got {other:?}"),
    }
    assert_eq!(trapped.state.digest(), state.digest());
    // The host carries on.
    let next = execute_synced(&mut instance, &state, &arm("write_note"), true);
    assert!(matches!(next.observation, Observation::Ok(_)));
}
