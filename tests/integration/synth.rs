//! `forge synth` end to end: docs in, bundles that `forge run` and `forge
//! replay` consume.

use crate::common::{forge, json_lines, stderr};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn synth(docs: &[&Path], out: &Path, tasks: usize) -> std::process::Output {
    let mut args: Vec<String> = vec![
        "synth".into(),
        "--json".into(),
        "--tasks".into(),
        tasks.to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(docs.iter().map(|doc| doc.display().to_string()));
    forge(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn success_rate(env: &Path, policy: &str) -> f64 {
    let output = forge(&[
        "run",
        "--json",
        "--policy",
        policy,
        "--env",
        env.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    json_lines(&output).last().unwrap()["success_rate"]
        .as_f64()
        .unwrap()
}

#[test]
fn a_shipped_doc_becomes_a_bundle_gold_solves_and_random_does_not() {
    let out = tempfile::tempdir().unwrap();
    let output = synth(
        &[&repo("env-templates/domains/library.toml")],
        out.path(),
        30,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let report = &json_lines(&output)[0];
    assert_eq!(report["tasks"], 30);
    assert_eq!(report["gold_success"], 1.0);
    let bundle = out.path().join("library");
    for file in [
        "manifest.json",
        "tools.wasm",
        "initial_state.json",
        "tasks.jsonl",
        "report.md",
        "structure.json",
        "tool_graph.json",
        "tools.rs",
    ] {
        assert!(bundle.join(file).is_file(), "{file} is written");
    }
    assert_eq!(success_rate(&bundle, "gold"), 1.0);
    assert!(success_rate(&bundle, "random") < 0.1);

    // Tasks carry their DAG, user facts, S* hash and difficulty.
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(bundle.join("tasks.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    for field in [
        "instruction",
        "gold_actions",
        "user_facts",
        "dag",
        "gold_final_state_sha256",
        "stats",
    ] {
        assert!(!first[field].is_null(), "tasks have `{field}`: {first}");
    }

    // Trajectories on a synthesized bundle replay like any other.
    let trajectory = out.path().join("gold.jsonl");
    assert!(
        forge(&[
            "run",
            "--env",
            bundle.to_str().unwrap(),
            "--out",
            trajectory.to_str().unwrap()
        ])
        .status
        .success()
    );
    assert!(
        forge(&[
            "replay",
            trajectory.to_str().unwrap(),
            "--env",
            bundle.to_str().unwrap()
        ])
        .status
        .success()
    );
}

#[test]
fn synthesis_is_deterministic() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let doc = repo("env-templates/domains/shop.toml");
    for out in [a.path(), b.path()] {
        let output = synth(&[&doc], out, 10);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    for entry in std::fs::read_dir(a.path().join("shop")).unwrap() {
        let path = entry.unwrap().path();
        let other = b.path().join("shop").join(path.file_name().unwrap());
        assert!(
            std::fs::read(&path).unwrap() == std::fs::read(&other).unwrap(),
            "{} differs",
            path.display()
        );
    }
}

const PARKING: &str = r#"
[domain]
name = "parking"
description = "A city's parking office: drivers buy and cancel zone permits paid from their credit."
persona = "drivers"

[collections.drivers]
key_field = "driver_id"
key_prefix = "d"
noun = "driver"
count = 12
fields.name = { type = "string", generator = "person_name", user_knows = true }
fields.email = { type = "string", generator = "email", unique = true, user_knows = true }
fields.credit = { type = "integer", min = 0, max = 100 }

[collections.zones]
key_field = "zone_id"
key_prefix = "z"
noun = "zone"
count = 6
fields.name = { type = "string", generator = "city", unique = true, user_knows = true }
fields.spaces = { type = "integer", min = 0, max = 5 }

[collections.permits]
key_field = "permit_id"
key_prefix = "p"
noun = "permit"
count = 10
fields.driver_id = { type = "string", ref = "drivers" }
fields.zone_id = { type = "string", ref = "zones" }
fields.status = { type = "string", enum = ["active", "expired"] }

[[tools]]
name = "find_driver_by_email"
kind = "find"
collection = "drivers"
by = "email"
description = "Find a driver's id from their email."

[[tools]]
name = "get_driver"
kind = "get"
collection = "drivers"
asks = ["credit"]
description = "Get a driver's account."

[[tools]]
name = "search_zones"
kind = "list"
collection = "zones"
filters = ["name"]
description = "Find zones by name."

[[tools]]
name = "get_zone"
kind = "get"
collection = "zones"
asks = ["spaces"]
description = "Get a zone."

[[tools]]
name = "list_driver_permits"
kind = "list"
collection = "permits"
required_filters = ["driver_id"]
description = "A driver's permits."

[[tools]]
name = "buy_permit"
kind = "create"
collection = "permits"
params = ["driver_id", "zone_id"]
set = { status = "active" }
require = [
  { via = "zone_id", field = "spaces", op = ">", value = 0 },
  { via = "driver_id", field = "credit", op = ">=", value = 10 },
]
change = [
  { via = "zone_id", field = "spaces", add = -1 },
  { via = "driver_id", field = "credit", add = -10 },
]
description = "Buy a permit for a zone with a free space; costs 10 credits."
intent = "buy a parking permit for {zones.name}"

[[tools]]
name = "cancel_permit"
kind = "update"
collection = "permits"
set = { status = "cancelled" }
require = [{ field = "status", op = "==", value = "active" }]
change = [{ via = "zone_id", field = "spaces", add = 1 }]
description = "Cancel an active permit; its space is freed."
intent = "cancel your permit for {zones.name}"
"#;

#[test]
fn a_users_own_doc_works_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.toml");
    std::fs::write(&doc, PARKING).unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 20);
    assert!(output.status.success(), "{}", stderr(&output));
    let bundle = dir.path().join("out/parking");
    assert_eq!(success_rate(&bundle, "gold"), 1.0);
    assert!(success_rate(&bundle, "random") < 0.2);
}

#[test]
fn broken_docs_are_refused_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.toml");
    std::fs::write(&doc, PARKING.replace("ref = \"zones\"", "ref = \"zonez\"")).unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 5);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("parking.toml") && message.contains("unknown collection `zonez`"),
        "{message}"
    );

    // A tool whose precondition never holds fails validation: the domain is rejected with a report.
    std::fs::write(
        &doc,
        PARKING.replace(
            "{ via = \"zone_id\", field = \"spaces\", op = \">\", value = 0 }",
            "{ via = \"zone_id\", field = \"spaces\", op = \">\", value = 99 }",
        ),
    )
    .unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 5);
    assert!(!output.status.success());
    let lines = json_lines(&output);
    let rejected = lines
        .iter()
        .find(|line| line.get("rejected").is_some())
        .expect("a rejected line");
    assert!(
        rejected["rejected"]
            .as_str()
            .unwrap()
            .contains("buy_permit"),
        "{rejected}"
    );
    assert!(dir.path().join("out/parking/report.md").is_file());
}
