//! A component whose tools misbehave in every way the sandbox must contain.
//! Built by the integration tests; never shipped.

use forge_guest::{Actor, Args, Db, Store, Tool, ToolResult, json};

fn no_params() -> forge_guest::Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// Spins forever; only fuel or the wall-clock backstop stops it.
fn spin(_: &mut Db<'_>, _: &Args) -> ToolResult {
    let mut counter = 0u64;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

/// Allocates without bound.
fn memory_bomb(_: &mut Db<'_>, _: &Args) -> ToolResult {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1u8; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}

/// Recurses without bound.
#[expect(unconditional_recursion, reason = "the sandbox must stop it")]
fn deep(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 16]);
    frame[0] + deep(std::hint::black_box(depth + 1))
}

fn recurse(_: &mut Db<'_>, _: &Args) -> ToolResult {
    Ok(json!(deep(0)))
}

fn panic(_: &mut Db<'_>, _: &Args) -> ToolResult {
    panic!("the tool gave up")
}

/// Writes to stderr and succeeds: what a later call's trap must not quote.
fn chatter(_: &mut Db<'_>, _: &Args) -> ToolResult {
    eprintln!("chatter of an earlier call");
    Ok(json!("said"))
}

/// Returns a result far over the host's result-size limit.
fn huge_result(_: &mut Db<'_>, _: &Args) -> ToolResult {
    Ok(json!("x".repeat(1 << 20)))
}

/// Writes a record, then traps: the write must not survive.
fn write_then_trap(db: &mut Db<'_>, _: &Args) -> ToolResult {
    db.put("notes", "n1", &json!({"text": "should vanish"}))?;
    std::process::abort()
}

/// Writes a record, then fails: the write must not survive either.
fn write_then_fail(db: &mut Db<'_>, _: &Args) -> ToolResult {
    db.put("notes", "n1", &json!({"text": "should vanish"}))?;
    Err("failed after writing".to_owned())
}

/// Makes the next sync refuse (its answer becomes the call's).
fn arm_sync_failure(db: &mut Db<'_>, _: &Args) -> ToolResult {
    db.put("sync", "mode", &json!("fail"))?;
    Ok(json!("armed"))
}

/// Makes the next sync trap (the host must undo the call with it).
fn arm_sync_trap(db: &mut Db<'_>, _: &Args) -> ToolResult {
    db.put("sync", "mode", &json!("trap"))?;
    Ok(json!("armed"))
}

/// A well-behaved tool, to show the host still works after the others.
fn write_note(db: &mut Db<'_>, _: &Args) -> ToolResult {
    let key = db.fresh_key("notes", "n");
    db.put("notes", &key, &json!({"text": "kept"}))?;
    Ok(json!({"key": key}))
}

pub static TOOLS: &[Tool] = &[
    Tool {
        name: "spin",
        description: "hostile",
        parameters: no_params,
        run: spin,
    },
    Tool {
        name: "memory_bomb",
        description: "hostile",
        parameters: no_params,
        run: memory_bomb,
    },
    Tool {
        name: "recurse",
        description: "hostile",
        parameters: no_params,
        run: recurse,
    },
    Tool {
        name: "panic",
        description: "hostile",
        parameters: no_params,
        run: panic,
    },
    Tool {
        name: "chatter",
        description: "noisy",
        parameters: no_params,
        run: chatter,
    },
    Tool {
        name: "huge_result",
        description: "hostile",
        parameters: no_params,
        run: huge_result,
    },
    Tool {
        name: "write_then_trap",
        description: "hostile",
        parameters: no_params,
        run: write_then_trap,
    },
    Tool {
        name: "write_then_fail",
        description: "hostile",
        parameters: no_params,
        run: write_then_fail,
    },
    Tool {
        name: "write_note",
        description: "well-behaved",
        parameters: no_params,
        run: write_note,
    },
    Tool {
        name: "arm_sync_failure",
        description: "hostile sync",
        parameters: no_params,
        run: arm_sync_failure,
    },
    Tool {
        name: "arm_sync_trap",
        description: "hostile sync",
        parameters: no_params,
        run: arm_sync_trap,
    },
];

pub fn describe(actor: Actor) -> String {
    match actor {
        Actor::Agent => forge_guest::describe(TOOLS),
        Actor::User => "[]".to_owned(),
    }
}

pub fn call(store: &mut dyn Store, actor: Actor, name: &str, args: &str) -> Result<String, String> {
    match actor {
        Actor::Agent => forge_guest::call(TOOLS, store, name, args),
        Actor::User => Err(format!("the user has no tool `{name}`")),
    }
}

/// Does what the last `arm_sync_*` tool asked for.
pub fn sync(store: &mut dyn Store) -> Result<(), String> {
    match store.get("sync", "mode").as_deref() {
        Some("\"fail\"") => Err("sync refused".to_owned()),
        Some("\"trap\"") => std::process::abort(),
        _ => Ok(()),
    }
}

forge_guest::export_component!(describe, call, forge_guest::no_function, sync);
