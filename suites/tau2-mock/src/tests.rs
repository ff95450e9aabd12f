//! Native checks against the reference: the gold replay of every task of
//! `tasks.json` (outputs and final-database hashes as `scripts/bench/tau_reference.py`
//! prints them for `tau2-bench/mock`) and the reference's answers to
//! malformed calls (`Environment.get_response` and `run_env_function_call`
//! on τ²-bench's `mock` environment, pydantic 2.12).

use super::*;
use forge_guest::{Actor, MemoryStore, Store};
use serde_json::Map;

/// What the tests do with a store.
trait Fixture {
    fn initial() -> Self;
    fn load(&mut self, prefix: &str, db: &Value);
    fn dump(&self, prefix: &str, tables: &[&str]) -> Value;
    fn hashes(&self) -> (String, String);
    fn call(&mut self, actor: Actor, name: &str, args: Value) -> Result<String, String>;
    fn invoke(&mut self, actor: Actor, name: &str, args: Value) -> Result<String, String>;
}

impl Fixture for MemoryStore {
    /// `data/tau2/domains/mock/db.json` and `user_db.json`, as the host loads them.
    fn initial() -> Self {
        let mut store = Self::default();
        store.load(
            "",
            &json!({
                "tasks": {"task_1": {"task_id": "task_1", "title": "Test task", "description": "A test task", "status": "pending"}},
                "users": {"user_1": {"user_id": "user_1", "name": "Test User", "tasks": ["task_1"]}},
            }),
        );
        store.load(
            "user_db.",
            &json!({
                "notifications": {"notif_1": {"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "status": "unread", "task_id": "task_1"}},
            }),
        );
        store
    }

    fn load(&mut self, prefix: &str, db: &Value) {
        for (table, records) in db.as_object().unwrap() {
            for (key, record) in records.as_object().unwrap() {
                self.put(&format!("{prefix}{table}"), key, &record.to_string())
                    .unwrap();
            }
        }
    }

    /// The database `{table: {key: record}}` of the collections `tables`
    /// (each named `prefix + table`).
    fn dump(&self, prefix: &str, tables: &[&str]) -> Value {
        let mut db = Map::new();
        for table in tables {
            let mut records = Map::new();
            for key in self.keys(&format!("{prefix}{table}")) {
                let text = self.get(&format!("{prefix}{table}"), &key).unwrap();
                records.insert(key, serde_json::from_str(&text).unwrap());
            }
            db.insert((*table).to_owned(), Value::Object(records));
        }
        Value::Object(db)
    }

    /// The reference script's `final_db_sha256` and `final_user_db_sha256`.
    fn hashes(&self) -> (String, String) {
        let agent = self.dump("", &["tasks", "users"]);
        let user = self.dump("user_db.", &["notifications"]);
        (
            sha256_hex(canonical(&agent).as_bytes()),
            sha256_hex(canonical(&user).as_bytes()),
        )
    }

    /// Runs a call as the host does: its writes are kept only when it succeeds.
    fn call(&mut self, actor: Actor, name: &str, args: Value) -> Result<String, String> {
        let mut scratch = self.clone();
        let answer = call(&mut scratch, actor, name, &args.to_string());
        if answer.is_ok() {
            *self = scratch;
        }
        answer
    }

    fn invoke(&mut self, actor: Actor, name: &str, args: Value) -> Result<String, String> {
        let mut scratch = self.clone();
        let answer = invoke(&mut scratch, actor, name, &args.to_string());
        if answer.is_ok() {
            *self = scratch;
        }
        answer
    }
}

/// `json.dumps(db, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).unwrap());
                out.push(':');
                write_canonical(out, item);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        // Strings of the mock data need no escapes beyond serde_json's.
        other => out.push_str(&other.to_string()),
    }
}

/// SHA-256 (FIPS 180-4), for comparing with the reference script's hashes.
fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in message.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (state, value) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *state = state.wrapping_add(value);
        }
    }
    h.iter().map(|word| format!("{word:08x}")).collect()
}

#[test]
fn sha256_matches_the_standard_vectors() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

const TASK_1: &str = r#"{"task_id": "task_1", "title": "Test task", "description": "A test task", "status": "completed"}"#;
const TASK_2_COMPLETED: &str = r#"{"task_id": "task_2", "title": "Project Review", "description": "Review Q4 project status", "status": "completed"}"#;
const IMPORTANT_MEETING: &str = r#"{"task_id": "task_2", "title": "Important Meeting", "description": null, "status": "pending"}"#;

const DB_CREATED: &str = "1301c58de2baeb3a598ff0947c2a4423058544bd3debfeda03f0cbeeaf38603d";
const DB_INITIAL: &str = "8729effbe2b2e1c7f4310be2c87e6c2d314db0fb5ff4b4444bb4df2a83c1d354";
const DB_TASK_1_DONE: &str = "e6af69c2c6ad0a7cfdae791bbcdf487acf67e9fef21245596470de3fe5b371a4";
const DB_TASK_2_DONE: &str = "2834312e4d7676dcfd475094e71eb9d49cf4f2c1f3d8157e61f7dedd14c34a82";
const DB_TASK_2_PENDING: &str = "3fca971d90dfecdfcc23bfab2b76b10e7b379da7e030a1ca2a0458b5263b053b";
const USER_DB_INITIAL: &str = "f163852ac87f600a193a7e30ae21335a6c9503c837f4351e4acfef465a4e2fc3";

/// A task's set-up as the reference's `set_state` runs it.
enum Setup {
    None,
    /// `message_history`: the assistant created task_2 (`Project Review`).
    History,
    /// `initialization_data.agent_data`: task_2 added and given to user_1.
    Data,
    /// `initialization_actions`: `create_task` on the agent's side.
    CreateAction,
    /// `initialization_actions`: `add_notification` on the user's side.
    NotificationAction,
}

struct Gold {
    task_id: &'static str,
    setup: Setup,
    /// (tool, arguments, the reference's output)
    actions: &'static [(&'static str, &'static str, &'static str)],
    final_db: &'static str,
    /// `None` where the reference's user database is not the user's: after
    /// `initialization_data`, `set_state` points the user toolkit at the
    /// agent's database.
    final_user_db: Option<&'static str>,
}

/// `/tmp/mock.jsonl` (`tau_reference.py … tau2-bench/mock`), task by task.
const GOLD: &[Gold] = &[
    Gold {
        task_id: "create_task_1",
        setup: Setup::None,
        actions: &[(
            "create_task",
            r#"{"user_id": "user_1", "title": "Important Meeting"}"#,
            IMPORTANT_MEETING,
        )],
        final_db: DB_CREATED,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "create_task_1_with_env_assertions",
        setup: Setup::None,
        actions: &[(
            "create_task",
            r#"{"user_id": "user_1", "title": "Important Meeting"}"#,
            IMPORTANT_MEETING,
        )],
        final_db: DB_CREATED,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "create_task_1_nl_eval",
        setup: Setup::None,
        actions: &[],
        final_db: DB_INITIAL,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "update_task_1",
        setup: Setup::None,
        actions: &[(
            "update_task_status",
            r#"{"task_id": "task_1", "status": "completed"}"#,
            TASK_1,
        )],
        final_db: DB_TASK_1_DONE,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "update_task_with_message_history",
        setup: Setup::History,
        actions: &[(
            "update_task_status",
            r#"{"task_id": "task_2", "status": "completed"}"#,
            TASK_2_COMPLETED,
        )],
        final_db: DB_TASK_2_DONE,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "update_task_with_initialization_data",
        setup: Setup::Data,
        actions: &[(
            "update_task_status",
            r#"{"task_id": "task_2", "status": "completed"}"#,
            TASK_2_COMPLETED,
        )],
        final_db: DB_TASK_2_DONE,
        final_user_db: None,
    },
    Gold {
        task_id: "update_task_with_initialization_actions",
        setup: Setup::CreateAction,
        actions: &[(
            "update_task_status",
            r#"{"task_id": "task_2", "status": "completed"}"#,
            TASK_2_COMPLETED,
        )],
        final_db: DB_TASK_2_DONE,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "update_task_with_history_and_env_assertions",
        setup: Setup::History,
        actions: &[],
        final_db: DB_TASK_2_PENDING,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "update_task_with_user_tools",
        setup: Setup::NotificationAction,
        actions: &[(
            "update_task_status",
            r#"{"task_id": "task_1", "status": "completed"}"#,
            TASK_1,
        )],
        final_db: DB_TASK_1_DONE,
        final_user_db: Some(USER_DB_INITIAL),
    },
    Gold {
        task_id: "impossible_task_1",
        setup: Setup::None,
        actions: &[(
            "transfer_to_human_agents",
            r#"{"summary": "User needs to delete all their current tasks. This is not possible to do with the tools available."}"#,
            "Transfer successful",
        )],
        final_db: DB_INITIAL,
        final_user_db: Some(USER_DB_INITIAL),
    },
];

const PROJECT_REVIEW: &str = r#"{"user_id": "user_1", "title": "Project Review", "description": "Review Q4 project status"}"#;

fn set_up(store: &mut MemoryStore, setup: &Setup) {
    match setup {
        Setup::None => {}
        Setup::History => {
            // `set_state` replays the history's mutating call and requires the
            // recorded output (compared as parsed JSON).
            let output = store
                .call(
                    Actor::Agent,
                    "create_task",
                    serde_json::from_str(PROJECT_REVIEW).unwrap(),
                )
                .unwrap();
            assert_eq!(
                serde_json::from_str::<Value>(&output).unwrap(),
                json!({"task_id": "task_2", "title": "Project Review", "description": "Review Q4 project status", "status": "pending"})
            );
        }
        Setup::Data => {
            // The host merges `agent_data` into the database as the reference does.
            store.load(
                "",
                &json!({
                    "tasks": {"task_2": {"task_id": "task_2", "title": "Project Review", "description": "Review Q4 project status", "status": "pending"}},
                    "users": {"user_1": {"user_id": "user_1", "name": "Test User", "tasks": ["task_1", "task_2"]}},
                }),
            );
        }
        Setup::CreateAction => {
            let answer = store
                .invoke(
                    Actor::Agent,
                    "create_task",
                    serde_json::from_str(PROJECT_REVIEW).unwrap(),
                )
                .unwrap();
            assert_eq!(
                answer,
                r#"{"task_id": "task_2", "title": "Project Review", "description": "Review Q4 project status", "status": "pending"}"#
            );
            forge_guest::no_sync(store).unwrap();
        }
        Setup::NotificationAction => {
            let answer = store
                .invoke(
                    Actor::User,
                    "add_notification",
                    json!({"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "task_id": "task_1"}),
                )
                .unwrap();
            assert_eq!(
                answer,
                r#"{"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "status": "unread", "task_id": "task_1"}"#
            );
            forge_guest::no_sync(store).unwrap();
        }
    }
}

#[test]
fn gold_replays_match_the_reference() {
    for gold in GOLD {
        let mut store = MemoryStore::initial();
        set_up(&mut store, &gold.setup);
        for (name, args, expected) in gold.actions {
            let output = store
                .call(Actor::Agent, name, serde_json::from_str(args).unwrap())
                .unwrap_or_else(|error| format!("Error: {error}"));
            assert_eq!(output, *expected, "{}: {name}", gold.task_id);
        }
        let (db, user_db) = store.hashes();
        assert_eq!(db, gold.final_db, "{}: final DB", gold.task_id);
        if let Some(expected) = gold.final_user_db {
            assert_eq!(user_db, expected, "{}: final user DB", gold.task_id);
        }
    }
}

#[test]
fn env_assertions_answer_as_the_reference() {
    // create_task_1_with_env_assertions: task_2 exists and is pending.
    let mut store = MemoryStore::initial();
    store
        .call(
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": "Important Meeting"}),
        )
        .unwrap();
    let args = json!({"task_id": "task_2", "expected_status": "pending"});
    assert_eq!(
        store.invoke(Actor::Agent, "assert_task_status", args),
        Ok("true".to_owned())
    );
    // update_task_with_user_tools: the gold actions alone leave notif_1 unread.
    let mut store = MemoryStore::initial();
    set_up(&mut store, &Setup::NotificationAction);
    let args = json!({"notification_id": "notif_1", "expected_status": "read"});
    assert_eq!(
        store.invoke(Actor::User, "assert_notification_status", args.clone()),
        Ok("false".to_owned())
    );
    assert_eq!(
        store.call(
            Actor::User,
            "dismiss_notification",
            json!({"notification_id": "notif_1"})
        ),
        Ok("Notification notif_1 dismissed".to_owned())
    );
    assert_eq!(
        store.invoke(Actor::User, "assert_notification_status", args),
        Ok("true".to_owned())
    );
    // update_task_with_history_and_env_assertions: task_2 is still pending.
    let mut store = MemoryStore::initial();
    set_up(&mut store, &Setup::History);
    let args = json!({"task_id": "task_2", "expected_status": "completed"});
    assert_eq!(
        store.invoke(Actor::Agent, "assert_task_status", args),
        Ok("false".to_owned())
    );
    // Python's `==`: 1 == 1.0 == True.
    for expected in [json!(1), json!(1.0), json!(true)] {
        let args = json!({"user_id": "user_1", "expected_number": expected});
        assert_eq!(
            store.invoke(Actor::Agent, "assert_number_of_tasks", args),
            Ok("false".to_owned()),
            "user_1 has two tasks"
        );
    }
    let args = json!({"user_id": "user_1", "expected_number": 2.0});
    assert_eq!(
        store.invoke(Actor::Agent, "assert_number_of_tasks", args),
        Ok("true".to_owned())
    );
    assert_eq!(
        store.invoke(
            Actor::Agent,
            "transfer_to_human_agents",
            json!({"summary": "s"})
        ),
        Ok(r#""Transfer successful""#.to_owned())
    );
}

/// The reference's answers to malformed and failing calls, in order on one
/// environment (`Environment.get_response`, the text after `"Error: "`).
#[test]
fn errors_read_as_the_reference_writes_them() {
    let mut store = MemoryStore::initial();
    let cases: &[(Actor, &str, Value, Result<&str, &str>)] = &[
        (
            Actor::Agent,
            "create_task",
            json!({}),
            Err(
                "MockTools.create_task() missing 2 required positional arguments: 'user_id' and 'title'",
            ),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"title": "a"}),
            Err("MockTools.create_task() missing 1 required positional argument: 'user_id'"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": 5, "description": 7}),
            Err(
                "2 validation errors for Task\ntitle\n  Input should be a valid string [type=string_type, input_value=5, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type\ndescription\n  Input should be a valid string [type=string_type, input_value=7, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type",
            ),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": null}),
            Err(
                "1 validation error for Task\ntitle\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type",
            ),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": [1], "title": "x"}),
            Err("unhashable type: 'list'"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": {"a": 1}, "title": "x"}),
            Err("unhashable type: 'dict'"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": 1.0, "title": "x"}),
            Err("User 1.0 not found"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": 1e100, "title": "x"}),
            Err("User 1e+100 not found"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": null, "title": "x"}),
            Err("User None not found"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": true, "title": "x"}),
            Err("User True not found"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": "ünï", "description": "日本"}),
            Ok(
                r#"{"task_id": "task_2", "title": "\u00fcn\u00ef", "description": "\u65e5\u672c", "status": "pending"}"#,
            ),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": "x", "description": ["a"]}),
            Err(
                "1 validation error for Task\ndescription\n  Input should be a valid string [type=string_type, input_value=['a'], input_type=list]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type",
            ),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": "x".repeat(100), "description": {"k": "v".repeat(60)}}),
            Err(
                "1 validation error for Task\ndescription\n  Input should be a valid string [type=string_type, input_value={'k': 'vvvvvvvvvvvvvvvvvv...vvvvvvvvvvvvvvvvvvvvvv'}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type",
            ),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": "x", "foo": 1}),
            Err("MockTools.create_task() got an unexpected keyword argument 'foo'"),
        ),
        (
            Actor::Agent,
            "update_task_status",
            json!({"task_id": "task_1", "status": 5}),
            Ok(
                r#"{"task_id": "task_1", "title": "Test task", "description": "A test task", "status": 5}"#,
            ),
        ),
        (
            Actor::Agent,
            "get_users",
            json!({}),
            Ok(r#"[{"user_id": "user_1", "name": "Test User", "tasks": ["task_1", "task_2"]}]"#),
        ),
        (
            Actor::Agent,
            "update_task_status",
            json!({"task_id": "task_2", "status": {"a": [1, 2.5]}}),
            Ok(
                r#"{"task_id": "task_2", "title": "\u00fcn\u00ef", "description": "\u65e5\u672c", "status": {"a": [1, 2.5]}}"#,
            ),
        ),
        (
            Actor::Agent,
            "update_task_status",
            json!({"task_id": ["task_2"], "status": "x"}),
            Err("unhashable type: 'list'"),
        ),
        (
            Actor::Agent,
            "nope",
            json!({}),
            Err("Tool 'nope' not found."),
        ),
        (
            Actor::Agent,
            "get_users",
            json!({"x": 1}),
            Err("MockTools.get_users() got an unexpected keyword argument 'x'"),
        ),
        (
            Actor::User,
            "check_notifications",
            json!({}),
            Ok(
                r#"[{"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "status": "unread", "task_id": "task_1"}]"#,
            ),
        ),
        (
            Actor::User,
            "dismiss_notification",
            json!({"notification_id": "notif_1"}),
            Ok("Notification notif_1 dismissed"),
        ),
        (
            Actor::User,
            "dismiss_notification",
            json!({"notification_id": "notif_9"}),
            Err("Notification notif_9 not found"),
        ),
        (
            Actor::User,
            "dismiss_notification",
            json!({}),
            Err(
                "MockUserTools.dismiss_notification() missing 1 required positional argument: 'notification_id'",
            ),
        ),
        (
            Actor::User,
            "check_notifications",
            json!({}),
            Ok(
                r#"[{"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "status": "read", "task_id": "task_1"}]"#,
            ),
        ),
        (
            Actor::User,
            "create_task",
            json!({}),
            Err("Tool 'create_task' not found."),
        ),
        // Functions that are not tools are no tools.
        (
            Actor::Agent,
            "assert_task_status",
            json!({"task_id": "task_1", "expected_status": "pending"}),
            Err("Tool 'assert_task_status' not found."),
        ),
    ];
    for (actor, name, args, expected) in cases {
        let answer = store.call(*actor, name, args.clone());
        assert_eq!(
            answer.as_deref().map_err(String::as_str),
            *expected,
            "{name} {args}"
        );
    }
    // The final database, as the reference dumps it.
    assert_eq!(
        store.dump("", &["tasks", "users"]),
        json!({
            "tasks": {
                "task_1": {"task_id": "task_1", "title": "Test task", "description": "A test task", "status": 5},
                "task_2": {"task_id": "task_2", "title": "ünï", "description": "日本", "status": {"a": [1, 2.5]}},
            },
            "users": {"user_1": {"user_id": "user_1", "name": "Test User", "tasks": ["task_1", "task_2"]}},
        })
    );
}

/// `Environment.run_env_function_call` on a fresh environment, in order.
#[test]
fn invoked_functions_answer_as_the_reference() {
    let mut store = MemoryStore::initial();
    let cases: &[(Actor, &str, Value, Result<&str, &str>)] = &[
        (
            Actor::Agent,
            "nope",
            json!({}),
            Err("'MockTools' object has no attribute 'nope'"),
        ),
        (
            Actor::User,
            "create_task",
            json!({}),
            Err("'MockUserTools' object has no attribute 'create_task'"),
        ),
        // `ToolKitBase`'s methods: `getattr` finds them, the component does not run them.
        (
            Actor::Agent,
            "update_db",
            json!({}),
            Err("MockTools.update_db is not a function this component runs"),
        ),
        (
            Actor::Agent,
            "assert_task_status",
            json!({"task_id": "task_1", "expected_status": "pending"}),
            Ok("true"),
        ),
        (
            Actor::Agent,
            "assert_task_status",
            json!({"task_id": "task_9", "expected_status": "pending"}),
            Err("Task task_9 not found"),
        ),
        (
            Actor::Agent,
            "assert_task_status",
            json!({"task_id": "task_1"}),
            Err(
                "MockTools.assert_task_status() missing 1 required positional argument: 'expected_status'",
            ),
        ),
        (
            Actor::Agent,
            "assert_task_status",
            json!({}),
            Err(
                "MockTools.assert_task_status() missing 2 required positional arguments: 'task_id' and 'expected_status'",
            ),
        ),
        (
            Actor::Agent,
            "assert_number_of_tasks",
            json!({"user_id": "user_1", "expected_number": 1.0}),
            Ok("true"),
        ),
        (
            Actor::Agent,
            "assert_number_of_tasks",
            json!({"user_id": "user_1", "expected_number": true}),
            Ok("true"),
        ),
        (
            Actor::Agent,
            "assert_number_of_tasks",
            json!({"user_id": "user_9", "expected_number": 1}),
            Err("User user_9 not found"),
        ),
        (
            Actor::User,
            "add_notification",
            json!({"notification_id": "n2", "message": "m"}),
            Ok(r#"{"notification_id": "n2", "message": "m", "status": "unread", "task_id": null}"#),
        ),
        (
            Actor::User,
            "add_notification",
            json!({"notification_id": 3, "message": "m", "task_id": 4}),
            Err(
                "2 validation errors for Notification\nnotification_id\n  Input should be a valid string [type=string_type, input_value=3, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type\ntask_id\n  Input should be a valid string [type=string_type, input_value=4, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type",
            ),
        ),
        (
            Actor::User,
            "add_notification",
            json!({"notification_id": "n3", "message": "m", "extra": 4}),
            Err("MockUserTools.add_notification() got an unexpected keyword argument 'extra'"),
        ),
        (
            Actor::User,
            "assert_notification_status",
            json!({"notification_id": "n2", "expected_status": "unread"}),
            Ok("true"),
        ),
        (
            Actor::User,
            "assert_notification_status",
            json!({"notification_id": "n9", "expected_status": "unread"}),
            Err("Notification n9 not found"),
        ),
        (
            Actor::Agent,
            "create_task",
            json!({"user_id": "user_1", "title": "t"}),
            Ok(r#"{"task_id": "task_2", "title": "t", "description": null, "status": "pending"}"#),
        ),
    ];
    for (actor, name, args, expected) in cases {
        let answer = store.invoke(*actor, name, args.clone());
        assert_eq!(
            answer.as_deref().map_err(String::as_str),
            *expected,
            "{name} {args}"
        );
    }
    assert_eq!(
        store.dump("user_db.", &["notifications"]),
        json!({"notifications": {
            "n2": {"notification_id": "n2", "message": "m", "status": "unread", "task_id": null},
            "notif_1": {"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "status": "unread", "task_id": "task_1"},
        }})
    );
}

#[test]
fn schemas_list_the_tools_in_the_reference_order() {
    for (actor, toolkit) in [(Actor::Agent, &AGENT), (Actor::User, &USER)] {
        let schemas: Value = serde_json::from_str(&describe(actor)).unwrap();
        let names: Vec<&str> = schemas
            .as_array()
            .unwrap()
            .iter()
            .map(|schema| schema["function"]["name"].as_str().unwrap())
            .collect();
        let tools: Vec<&str> = toolkit
            .methods
            .iter()
            .filter(|method| method.tool)
            .map(|method| method.name)
            .collect();
        assert_eq!(names, tools);
        for schema in schemas.as_array().unwrap() {
            let function = &schema["function"];
            let method = toolkit
                .methods
                .iter()
                .find(|method| method.name == function["name"])
                .unwrap();
            let properties: Vec<&str> = function["parameters"]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let parameters: Vec<&str> = method.parameters.iter().map(|(name, _)| *name).collect();
            assert_eq!(properties, parameters, "{}", method.name);
        }
    }
}
