//! `forge synth` end to end: docs in, bundles that `forge run` and `forge
//! replay` consume.

use crate::common::{assert_refused, forge, json_lines, stderr, stdout};
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
    // Every attempt is accounted for.
    let count = |key: &str| report[key].as_u64().unwrap();
    assert_eq!(
        count("attempts"),
        count("tasks")
            + count("dropped_failed")
            + count("dropped_duplicate")
            + count("dropped_random")
            + count("reserve_unused"),
        "{report}"
    );
    let bundle = out.path().join("library");
    for file in [
        "manifest.json",
        "tools.wasm",
        "initial_state.json",
        "tasks.jsonl",
        "report.md",
        "doc.json",
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

    // An unreliable simulated user spoils a share of episodes; the judge finds them.
    let unstable = |probability: &str| {
        let output = forge(&[
            "run",
            "--json",
            "--user-instability",
            probability,
            "--env",
            bundle.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let summary = json_lines(&output).pop().unwrap();
        let user = match probability {
            "0" => "scripted".to_owned(),
            _ => format!("scripted (instability {probability})"),
        };
        assert_eq!(
            summary["user"], user,
            "the summary says who played the user"
        );
        summary["masked_share"].as_f64().unwrap()
    };
    assert_eq!(unstable("0"), 0.0);
    let share = unstable("0.5");
    assert!(
        (0.25..=0.75).contains(&share),
        "about half the episodes are spoiled: {share}"
    );
    assert_eq!(unstable("0.5"), share, "seeded");
    assert_eq!(unstable("1"), 1.0);
    assert!(
        !forge(&["run", "--user-instability", "1.5"])
            .status
            .success()
    );

    // An existing bundle is never replaced silently.
    let again = synth(
        &[&repo("env-templates/domains/library.toml")],
        out.path(),
        30,
    );
    assert_refused(&again, "already exists");
    let forced = forge(&[
        "synth",
        "--force",
        "--tasks",
        "30",
        "--out",
        out.path().to_str().unwrap(),
        repo("env-templates/domains/library.toml").to_str().unwrap(),
    ]);
    assert!(forced.status.success(), "{}", stderr(&forced));

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
fn synthesis_holds_its_out_directory_and_clears_what_a_stopped_one_left() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let doc = repo("env-templates/domains/library.toml");
    // What syntheses stopped mid-way (Ctrl-C) leave: a stage one was
    // writing the domain in, and one holding the old bundle another had
    // moved aside to replace it.
    let stopped = out.join(".library.partial-AbC123");
    std::fs::create_dir_all(&stopped).unwrap();
    let moved = out.join(".library.partial-XyZ789");
    std::fs::create_dir_all(moved.join("old")).unwrap();
    std::fs::write(moved.join("old/report.md"), "the old bundle").unwrap();
    // And a directory that only looks like one.
    let lookalike = out.join(".thesis.partial-2026");
    std::fs::create_dir_all(&lookalike).unwrap();
    std::fs::write(lookalike.join("thesis.tex"), "mine").unwrap();
    // Another process writing into the directory: refused before any work.
    let held = std::fs::File::open(&out).unwrap();
    held.try_lock().unwrap();
    let output = synth(&[&doc], &out, 5);
    assert_refused(&output, "is in use by another forge process");
    assert!(
        stopped.exists() && moved.exists(),
        "left to the process holding the directory"
    );
    drop(held);
    // The old bundle goes back where it was (and, there, is not replaced
    // without --force); the stages are removed.
    let output = synth(&[&doc], &out, 5);
    assert_refused(&output, "already exists (pass --force");
    assert!(
        stderr(&output).contains("back, which a synthesis stopped mid-way had moved aside"),
        "{}",
        stderr(&output)
    );
    let restored = std::fs::read_to_string(out.join("library/report.md")).unwrap();
    assert_eq!(restored, "the old bundle");
    assert!(!stopped.exists() && !moved.exists(), "{}", stderr(&output));
    assert!(lookalike.join("thesis.tex").exists());
    assert!(
        stderr(&output).contains("holds files of its own"),
        "{}",
        stderr(&output)
    );
    // A file where a domain's directory would go: refused before any work.
    std::fs::remove_dir_all(out.join("library")).unwrap();
    std::fs::write(out.join("library"), "notes").unwrap();
    let output = synth(&[&doc], &out, 5);
    assert_refused(&output, "is a file, where the bundle of `library` would go");
    std::fs::remove_file(out.join("library")).unwrap();
    let output = synth(&[&doc], &out, 5);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(out.join("library/tasks.jsonl").is_file());
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

#[test]
fn max_requirements_gives_one_call_tasks_for_the_training_doc() {
    let out = tempfile::tempdir().unwrap();
    let doc = repo("env-templates/train/lamps.toml");
    let output = forge(&[
        "synth",
        "--json",
        "--tasks",
        "16",
        "--max-requirements",
        "1",
        "--out",
        out.path().to_str().unwrap(),
        doc.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let report = &lines[0];
    assert_eq!(report["tasks"], 16);
    assert_eq!(lines[1]["tasks_asked"], 16, "{}", lines[1]);
    assert_eq!(report["max_tool_calls"], 1);
    assert_eq!(report["gold_success"], 1.0);
    assert_eq!(report["random_success"], 0.0);
    let tasks = std::fs::read_to_string(out.path().join("lamps/tasks.jsonl")).unwrap();
    for line in tasks.lines() {
        let task: Value = serde_json::from_str(line).unwrap();
        assert_eq!(task["gold_actions"].as_array().unwrap().len(), 1, "{task}");
    }

    let zero = forge(&[
        "synth",
        "--max-requirements",
        "0",
        "--out",
        out.path().to_str().unwrap(),
        doc.to_str().unwrap(),
    ]);
    assert_refused(&zero, "--max-requirements");
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
    // Any name the doc allows makes a tool, Rust's keywords too.
    let parking = PARKING
        .replace("name = \"get_zone\"", "name = \"fn\"")
        .replace("name = \"get_driver\"", "name = \"1st_driver\"");
    std::fs::write(&doc, parking).unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 20);
    assert!(output.status.success(), "{}", stderr(&output));
    let bundle = dir.path().join("out/parking");
    let tools = forge(&["inspect", bundle.to_str().unwrap(), "--json"]);
    assert!(
        stdout(&tools).contains("\"fn\"") && stdout(&tools).contains("\"1st_driver\""),
        "{}",
        stdout(&tools)
    );
    assert_eq!(success_rate(&bundle, "gold"), 1.0);
    assert!(success_rate(&bundle, "random") < 0.2);
}

#[test]
fn broken_docs_are_refused_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.toml");
    std::fs::write(&doc, PARKING.replace("ref = \"zones\"", "ref = \"zonez\"")).unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 5);
    assert_refused(&output, "parking.toml");
    assert_refused(&output, "unknown collection `zonez`");
    // A plain doc's typo is reported against the plain format.
    let plain = dir.path().join("plain.json");
    let mut typo = plain_parking();
    let tool = typo["tools"][0].as_object_mut().unwrap();
    let parameters = tool.remove("parameters").unwrap();
    tool.insert("params".into(), parameters);
    std::fs::write(&plain, typo.to_string()).unwrap();
    let output = synth(&[&plain], &dir.path().join("out"), 5);
    assert_refused(
        &output,
        "plain.json is malformed (a plain doc: it has no `collections`): unknown field `params`",
    );
    // Two docs of one domain: both files named.
    let copy = dir.path().join("parking-copy.toml");
    std::fs::write(&copy, PARKING).unwrap();
    std::fs::write(&doc, PARKING).unwrap();
    let output = synth(&[&doc, &copy], &dir.path().join("out"), 5);
    assert_refused(&output, "parking.toml and ");
    assert_refused(
        &output,
        "parking-copy.toml both document the domain `parking`",
    );
    // Two names one crate's name cannot tell apart.
    let renamed = |name: &str| PARKING.replace("name = \"parking\"", &format!("name = \"{name}\""));
    std::fs::write(&doc, renamed("city_parking")).unwrap();
    std::fs::write(&copy, renamed("city-parking")).unwrap();
    let output = synth(&[&doc, &copy], &dir.path().join("out"), 5);
    assert_refused(
        &output,
        "document the domains `city_parking` and `city-parking`, whose tools would build as one crate",
    );
    // A name too long for a file system is refused before any build.
    std::fs::write(&doc, renamed(&"p".repeat(65))).unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 5);
    assert_refused(
        &output,
        "must be lower-case letters, digits, `-` or `_`, at most 64 of them",
    );
    std::fs::remove_file(&copy).unwrap();
    // Counts that would run for days are refused up front.
    for (flag, count, said) in [
        (
            "--tasks",
            "18446744073709551615",
            "a number of tasks from 1 to 10000",
        ),
        (
            "--random-trials",
            "99999999999",
            "a number of episodes from 0 to 1000",
        ),
    ] {
        let output = forge(&[
            "synth",
            doc.to_str().unwrap(),
            "--out",
            "unused",
            flag,
            count,
        ]);
        assert_refused(&output, said);
    }

    // A sound bundle first, which the rejected synthesis below keeps.
    std::fs::write(&doc, PARKING).unwrap();
    let output = synth(&[&doc], &dir.path().join("out"), 5);
    assert!(output.status.success(), "{}", stderr(&output));
    let bundle = dir.path().join("out/parking");
    assert!(bundle.join("manifest.json").is_file());
    // A bundle given as a directory of docs is told apart, naming its doc;
    // hidden files in a directory of docs (an editor's lock) are no docs.
    let output = forge(&["synth", bundle.to_str().unwrap(), "--out", "unused"]);
    assert_refused(
        &output,
        "parking is a bundle, not a directory of docs: the doc it was made from is",
    );
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::os::unix::fs::symlink("user@host.1234", locked.join(".#parking.toml")).unwrap();
    let output = forge(&["synth", locked.to_str().unwrap(), "--out", "unused"]);
    assert_refused(&output, "locked holds no .toml or .json docs");
    let forced = |doc: &Path| {
        forge(&[
            "synth",
            "--json",
            "--force",
            "--tasks",
            "5",
            "--out",
            dir.path().join("out").to_str().unwrap(),
            doc.to_str().unwrap(),
        ])
    };

    // A tool whose precondition never holds fails validation: the domain is
    // rejected, and the bundle made before stays as it was, with no report
    // of the rejection beside it to be taken for its own.
    std::fs::write(
        &doc,
        PARKING.replace(
            "{ via = \"zone_id\", field = \"spaces\", op = \">\", value = 0 }",
            "{ via = \"zone_id\", field = \"spaces\", op = \">\", value = 99 }",
        ),
    )
    .unwrap();
    let output = forced(&doc);
    assert!(!output.status.success());
    let lines = json_lines(&output);
    let rejected = lines
        .iter()
        .find(|line| line.get("rejected").is_some())
        .expect("a rejected line");
    let reason = rejected["rejected"].as_str().unwrap();
    assert!(
        reason.contains("buy_permit") && reason.ends_with("/out/parking is kept"),
        "{rejected}"
    );
    assert!(bundle.join("manifest.json").is_file());
    let report = std::fs::read_to_string(bundle.join("report.md")).unwrap();
    assert!(!report.contains("— rejected"), "{report}");

    // `--force` replaces only what synthesis wrote: anything else is named and kept.
    std::fs::write(bundle.join("notes.txt"), "mine").unwrap();
    assert_refused(&forced(&doc), "`notes.txt`, which synthesis did not write");
    assert_eq!(std::fs::read(bundle.join("notes.txt")).unwrap(), b"mine");
    assert!(bundle.join("report.md").is_file());
}

/// The plain documentation of the parking API: no annotations.
fn plain_parking() -> Value {
    let doc: forge_synth::doc::DomainDoc = toml::from_str(PARKING).unwrap();
    let tools: Vec<Value> = doc
        .tools
        .iter()
        .map(|tool| serde_json::json!({"name": tool.name, "description": tool.description, "parameters": forge_synth::codegen::parameters(&doc, tool)}))
        .collect();
    serde_json::json!({"domain": {"name": "parking", "description": doc.domain.description}, "tools": tools})
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_plain_doc_is_annotated_by_a_model_with_errors_fed_back() {
    let annotated = serde_json::to_string_pretty(
        &toml::from_str::<forge_synth::doc::DomainDoc>(PARKING).unwrap(),
    )
    .unwrap();
    let mut incomplete: Value = serde_json::from_str(&annotated).unwrap();
    incomplete["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|tool| tool["name"] != "cancel_permit");
    // Drivers keyed by `id`: `get_driver` would take another argument
    // than the documented `driver_id`.
    let mut renamed: Value = serde_json::from_str(&annotated).unwrap();
    renamed["collections"]["drivers"]["key_field"] = "id".into();
    let annotations = std::sync::Mutex::new(0);
    // Slow enough for the rewrites, asked at once, to overlap.
    let delay = std::time::Duration::from_millis(100);
    let server = crate::llm_stub::StubServer::start_slow(500, delay, move |request, _| {
        let system = system_prompt(request);
        if system.contains("annotated Forge domain doc") {
            let mut count = annotations.lock().unwrap();
            *count += 1;
            return match *count {
                1 => crate::llm_stub::completion("I would model parking with drivers and zones."),
                2 => (500, "{\"error\": \"overloaded\"}".to_owned()),
                3 => crate::llm_stub::completion(&incomplete.to_string()),
                4 => crate::llm_stub::completion(&renamed.to_string()),
                _ => {
                    crate::llm_stub::completion(&format!("Here you go:\n```json\n{annotated}\n```"))
                }
            };
        }
        // Instruction rewrites: keep the facts for most, drop them for one in five.
        let instruction = request["messages"][1]["content"]
            .as_str()
            .unwrap_or_default();
        if instruction.len() % 5 == 0 {
            crate::llm_stub::completion("I need some help with parking.")
        } else {
            crate::llm_stub::completion(&format!("Hello there. {instruction}"))
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.json");
    std::fs::write(&doc, plain_parking().to_string()).unwrap();
    let out = dir.path().join("out");
    let output = forge(&[
        "synth",
        "--json",
        "--tasks",
        "10",
        "--llm-rounds",
        "4",
        "--llm-url",
        &server.url,
        "--model",
        "stub",
        "--out",
        out.to_str().unwrap(),
        doc.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    assert_eq!(lines[0]["tasks"], 10);
    assert!(
        lines.last().unwrap()["llm_usage"]["requests"]
            .as_u64()
            .unwrap()
            >= 13
    );

    assert!(
        server
            .peak_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
            > 1,
        "instructions are rewritten several at once"
    );
    let requests = server.requests.lock().unwrap().clone();
    let annotation_requests: Vec<&Value> = requests
        .iter()
        .filter(|request| system_prompt(request).contains("annotated Forge domain doc"))
        .collect();
    let transcript = annotation_requests.last().unwrap()["messages"].to_string();
    assert!(
        transcript.contains("the reply contains no JSON object"),
        "parse errors are fed back"
    );
    assert!(
        transcript.contains("documented tools are missing: cancel_permit"),
        "check errors are fed back"
    );
    assert!(
        transcript.contains(
            "tool `get_driver` must take the documented arguments (driver_id), but takes id"
        ),
        "{transcript}"
    );

    let bundle = out.join("parking");
    assert_eq!(success_rate(&bundle, "gold"), 1.0);
    let tasks = std::fs::read_to_string(bundle.join("tasks.jsonl")).unwrap();
    let instructions: Vec<String> = tasks
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["instruction"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        instructions
            .iter()
            .any(|text| text.starts_with("Hello there.")),
        "rewrites are used"
    );
    assert!(
        instructions
            .iter()
            .all(|text| text.contains("@example.com")),
        "a rewrite that drops facts is refused"
    );
    let rewritten = instructions
        .iter()
        .filter(|text| text.starts_with("Hello there."))
        .count();
    assert_eq!(
        lines[0]["instructions_rewritten"], rewritten,
        "{}",
        lines[0]
    );
    let report = std::fs::read_to_string(bundle.join("report.md")).unwrap();
    assert!(
        report.contains(&format!(
            "| instructions rewritten by the model | {rewritten} of 10 "
        )),
        "{report}"
    );
    let manifest = std::fs::read_to_string(bundle.join("manifest.json")).unwrap();
    assert!(manifest.contains("forge synth (model stub)"));

    // The model's annotated doc is kept: the domain synthesizes again
    // without the model, to the same tools and state.
    let again = dir.path().join("again");
    let output = synth(&[&bundle.join("doc.json")], &again, 10);
    assert!(output.status.success(), "{}", stderr(&output));
    for file in ["tools.wasm", "initial_state.json", "doc.json"] {
        assert_eq!(
            std::fs::read(bundle.join(file)).unwrap(),
            std::fs::read(again.join("parking").join(file)).unwrap(),
            "{file}"
        );
    }
    // Each task got its own instruction's rewrite (asked at once, they
    // ended in any order), or kept its template.
    let templates = std::fs::read_to_string(again.join("parking/tasks.jsonl")).unwrap();
    for (rewritten, template) in instructions.iter().zip(templates.lines()) {
        let template = serde_json::from_str::<Value>(template).unwrap()["instruction"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            *rewritten == template || *rewritten == format!("Hello there. {template}"),
            "{rewritten} / {template}"
        );
    }
}

#[test]
fn an_endpoint_that_fails_is_not_fed_back_to_the_model_as_a_problem_with_its_doc() {
    let annotated =
        serde_json::to_string(&toml::from_str::<forge_synth::doc::DomainDoc>(PARKING).unwrap())
            .unwrap();
    // The doc is annotated at once; its instructions' rewrites are refused
    // for want of a key.
    let server = crate::llm_stub::StubServer::start(50, move |request, _| {
        match system_prompt(request).contains("annotated Forge domain doc") {
            true => crate::llm_stub::completion(&annotated),
            false => (401, "{\"error\": \"no key\"}".to_owned()),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.json");
    std::fs::write(&doc, plain_parking().to_string()).unwrap();
    let output = forge(&[
        "synth",
        "--tasks",
        "3",
        "--llm-url",
        &server.url,
        "--model",
        "stub",
        "--api-key-env",
        "FORGE_TEST_UNSET_KEY",
        "--out",
        dir.path().join("out").to_str().unwrap(),
        doc.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(
            "answered HTTP 401: {\"error\": \"no key\"} (no key was sent: \
             `FORGE_TEST_UNSET_KEY` is unset)"
        ),
        "{}",
        stderr(&output)
    );
    // One answer annotated the doc, and a refusal ended the domain: no
    // repair asked for the doc again, and no refusal was retried (the
    // three rewrites go out at once: each is asked at most once).
    let requests = server.requests.lock().unwrap().clone();
    let annotations = requests
        .iter()
        .filter(|request| system_prompt(request).contains("annotated Forge domain doc"))
        .count();
    assert_eq!(annotations, 1);
    let rewrites: std::collections::BTreeSet<String> = requests
        .iter()
        .filter(|request| !system_prompt(request).contains("annotated Forge domain doc"))
        .map(|request| request["messages"][1]["content"].to_string())
        .collect();
    assert_eq!(
        rewrites.len(),
        requests.len() - 1,
        "each rewrite is asked once"
    );
    assert!(
        stdout(&output).contains(&format!("model: {} requests", requests.len())),
        "{}",
        stdout(&output)
    );
    // What the model annotated is not lost: the rejected domain keeps the
    // doc, which makes the environment again without the model.
    let rejected = dir.path().join("out/parking");
    let report = std::fs::read_to_string(rejected.join("report.md")).unwrap();
    assert!(
        report.contains("The endpoint failed while rewriting the task instructions"),
        "{report}"
    );
    assert!(!rejected.join("manifest.json").exists());
    // Given as an environment, it is named as the rejection it is.
    assert_refused(
        &forge(&["inspect", rejected.to_str().unwrap()]),
        "holds no environment bundle: synthesis rejected its domain (see ",
    );
    let again = dir.path().join("again");
    let output = forge(&[
        "synth",
        "--tasks",
        "3",
        "--out",
        again.to_str().unwrap(),
        rejected.join("doc.json").to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(success_rate(&again.join("parking"), "gold"), 1.0);

    // An endpoint no request could reach is refused before any work: the
    // flag at fault is named.
    for (url, model, problem) in [
        (
            "127.0.0.1:8000/v1",
            "stub",
            "--llm-url: `127.0.0.1:8000/v1` is not an http:// or https:// URL with a host",
        ),
        (
            "http://127.0.0.1:8000/v1",
            " ",
            "--model: no model named to ask at http://127.0.0.1:8000/v1",
        ),
    ] {
        let output = forge(&[
            "synth",
            "--llm-url",
            url,
            "--model",
            model,
            "--out",
            dir.path().join("never").to_str().unwrap(),
            doc.to_str().unwrap(),
        ]);
        assert_refused(&output, problem);
        assert!(!dir.path().join("never").exists());
    }
}

#[test]
fn a_plain_doc_without_a_model_is_rejected_with_the_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.json");
    std::fs::write(&doc, plain_parking().to_string()).unwrap();
    // Refused before any work, the annotated docs beside it included.
    let annotated = dir.path().join("library.toml");
    std::fs::copy("env-templates/domains/library.toml", &annotated).unwrap();
    let out = dir.path().join("out");
    let output = synth(&[&annotated, &doc], &out, 5);
    assert_refused(
        &output,
        "the doc of `parking` is plain (no collections or tool kinds): pass --llm-url and --model",
    );
    assert!(!out.exists());
    // A doc given twice, by a path and by its directory, is one doc: no
    // two domains clash.
    let output = synth(&[doc.as_path(), dir.path()], &out, 5);
    assert_refused(
        &output,
        "the doc of `parking` is plain (no collections or tool kinds)",
    );
}

#[test]
fn a_domain_that_yields_no_task_is_rejected_with_its_counts() {
    // One collection and a lookup: no walk writes anything or asks for an
    // answer the state decides, so no task comes of it.
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("tiny.toml");
    std::fs::write(
        &doc,
        r#"
[domain]
name = "tiny"
description = "A tiny domain."
persona = "users"

[collections.users]
key_field = "user_id"
key_prefix = "u"
noun = "user"
count = 3
fields.email = { type = "string", generator = "email", unique = true, user_knows = true }

[[tools]]
name = "find_user"
kind = "find"
collection = "users"
by = "email"
description = "Find a user."
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let output = synth(&[&doc], &out, 2);
    assert!(!output.status.success(), "{}", stdout(&output));
    let lines = json_lines(&output);
    let why = lines[0]["rejected"].as_str().unwrap();
    assert!(
        why.contains("no task survived") && why.contains("walks led nowhere"),
        "{why}"
    );
    assert_eq!(lines.last().unwrap()["rejected"], 1);
    // What was written is no bundle to load, and says why.
    assert!(!out.join("tiny/manifest.json").exists());
    let report = std::fs::read_to_string(out.join("tiny/report.md")).unwrap();
    assert!(report.contains("rejected"), "{report}");
}

/// Why `forge synth` rejected `doc`, synthesized with the model at `url`
/// and `extra` flags: the domain must be rejected.
fn rejection(url: &str, doc: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["synth", "--json", "--llm-url", url, "--model", "stub"];
    args.extend_from_slice(extra);
    args.extend(["--out", out.to_str().unwrap(), doc.to_str().unwrap()]);
    let output = forge(&args);
    assert!(!output.status.success());
    json_lines(&output)[0]["rejected"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_rejected_environment_is_fed_back_within_the_rounds_in_all() {
    // The model's first doc is valid, but a tool's precondition never
    // holds, so validation rejects its environment; its second is sound.
    let sound = toml::from_str::<forge_synth::doc::DomainDoc>(PARKING).unwrap();
    let unsound = toml::from_str::<forge_synth::doc::DomainDoc>(&PARKING.replace(
        "{ via = \"zone_id\", field = \"spaces\", op = \">\", value = 0 }",
        "{ via = \"zone_id\", field = \"spaces\", op = \">\", value = 99 }",
    ))
    .unwrap();
    let answers = [
        serde_json::to_string(&unsound).unwrap(),
        serde_json::to_string(&sound).unwrap(),
    ];
    let server = crate::llm_stub::StubServer::start(50, move |request, _| {
        let messages = request["messages"].as_array().unwrap();
        match system_prompt(request).contains("annotated Forge domain doc") {
            // The second answer follows the rejection of the first.
            true => crate::llm_stub::completion(&answers[(messages.len() > 2) as usize]),
            false => crate::llm_stub::completion("unused: facts are lost, the template stays"),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.json");
    std::fs::write(&doc, plain_parking().to_string()).unwrap();
    let annotations = || {
        server
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|request| system_prompt(request).contains("annotated Forge domain doc"))
            .cloned()
            .collect::<Vec<Value>>()
    };
    // One answer in all: the rejection is final, and says the rounds are spent.
    let rejected = rejection(
        &server.url,
        &doc,
        &dir.path().join("one"),
        &["--llm-rounds", "1", "--tasks", "2"],
    );
    assert!(
        rejected.starts_with(
            "no environment passed in the model's one answer (--llm-rounds): tool validation failed"
        ),
        "{rejected}"
    );
    assert_eq!(annotations().len(), 1);
    // Two: the rejection is fed back, and the second doc passes.
    let output = forge(&[
        "synth",
        "--json",
        "--llm-url",
        &server.url,
        "--model",
        "stub",
        "--llm-rounds",
        "2",
        "--tasks",
        "2",
        "--out",
        dir.path().join("two").to_str().unwrap(),
        doc.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let asked = annotations();
    assert_eq!(asked.len(), 3);
    assert!(
        asked[2]["messages"]
            .to_string()
            .contains("The environment built from that doc was rejected: tool validation failed"),
        "{}",
        asked[2]
    );
    assert_eq!(json_lines(&output)[0]["instructions_rewritten"], 0);
}

#[test]
fn a_model_that_never_answers_validly_rejects_the_domain() {
    let server = crate::llm_stub::StubServer::start(50, |_, _| {
        crate::llm_stub::completion("{\"domain\": 3}")
    });
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("parking.json");
    std::fs::write(&doc, plain_parking().to_string()).unwrap();
    let rejected = rejection(
        &server.url,
        &doc,
        &dir.path().join("out"),
        &["--llm-rounds", "2"],
    );
    assert!(
        rejected.contains("no valid annotated doc in the model's 2 answers"),
        "{rejected}"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    // Its answers are kept, with what was wrong with each.
    let report = dir.path().join("out/parking/report.md");
    assert!(rejected.contains(&format!("the model's answers are in {}", report.display())));
    let report = std::fs::read_to_string(report).unwrap();
    assert!(
        report.starts_with("# parking — rejected\n")
            && report.contains("## Answer 2\n\n```\n{\"domain\": 3}\n```")
            && report.contains("That doc is not valid: "),
        "{report}"
    );

    // An annotated doc whose instruction rewrites fail is rejected, not
    // quietly left with its templates.
    let server = crate::llm_stub::StubServer::start(50, |_, _| {
        (400, "{\"error\": \"no such model\"}".to_owned())
    });
    let doc = dir.path().join("parking.toml");
    std::fs::write(&doc, PARKING).unwrap();
    let rejected = rejection(
        &server.url,
        &doc,
        &dir.path().join("annotated"),
        &["--tasks", "2"],
    );
    assert!(
        rejected.contains("asking the model to rewrite task") && rejected.contains("HTTP 400"),
        "{rejected}"
    );
}
