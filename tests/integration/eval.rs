//! `forge eval` and remote models (policy and user) against a loopback stub
//! of an OpenAI-compatible endpoint.

use crate::common::{
    assert_refused, assert_replays, export_example, forge, json_lines, jsonl, stderr, stdout,
};
use crate::llm_stub::{StubServer, completion};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The example environment's tasks by instruction, read from its bundle.
fn gold_by_instruction(bundle: &std::path::Path) -> BTreeMap<String, Value> {
    std::fs::read_to_string(bundle.join("tasks.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let task: Value = serde_json::from_str(line).unwrap();
            (task["instruction"].as_str().unwrap().to_owned(), task)
        })
        .collect()
}

/// A stub agent that knows the gold actions: it calls them one by one (as
/// OpenAI tool calls, every other one with its arguments as JSON itself,
/// as some servers send them, rather than a string; the first with a
/// remark beside it), then tells the user the required outputs.
fn gold_agent(
    tasks: BTreeMap<String, Value>,
) -> impl Fn(&Value, usize) -> (u16, String) + Send + 'static {
    move |request, _| {
        let messages = request["messages"].as_array().unwrap();
        let instruction = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        let Some(task) = tasks.get(instruction) else {
            return completion("I cannot help with that.");
        };
        assert!(
            request["tools"]
                .as_array()
                .is_some_and(|tools| !tools.is_empty()),
            "the tools are offered"
        );
        let done = messages.iter().filter(|m| m["role"] == "tool").count();
        let actions = task["gold_actions"].as_array().unwrap();
        if let Some(action) = actions.get(done) {
            let arguments = match done % 2 {
                0 => action["arguments"].to_string().into(),
                _ => action["arguments"].clone(),
            };
            let call = json!({"id": format!("x{done}"), "type": "function", "function": {"name": action["name"], "arguments": arguments}});
            let remark = (done == 0).then_some(REMARK);
            let body = json!({"choices": [{"message": {"role": "assistant", "content": remark, "tool_calls": [call]}}]});
            return (200, body.to_string());
        }
        let outputs: Vec<&str> = task["required_outputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        completion(&format!("Done: {}", outputs.join(", ")))
    }
}

/// What [`gold_agent`] writes beside its first call.
const REMARK: &str = "Let me look that up.";

/// A stop (here SIGTERM, as schedulers send it; Ctrl-C likewise) lets the
/// episode under way finish and keeps it, starts no other, and says where
/// the run stopped.
#[test]
fn a_stopped_run_keeps_the_episodes_it_finished() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let delay = std::time::Duration::from_millis(150);
    let server = StubServer::start_slow(500, delay, gold_agent(gold_by_instruction(&bundle)));
    let out = dir.path().join("stopped.jsonl");
    let child = crate::common::forge_command()
        .args([
            "run",
            "--env",
            bundle.to_str().unwrap(),
            "--policy",
            "openai",
        ])
        .args([
            "--base-url",
            &server.url,
            "--model",
            "stub",
            "--tasks",
            "first:12",
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let recorded = || std::fs::read_to_string(&out).map_or(0, |text| text.lines().count());
    let waited = std::time::Instant::now();
    while recorded() == 0 {
        assert!(waited.elapsed().as_secs() < 120, "no episode recorded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    let signalled = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(signalled.unwrap().success());
    let output = child.wait_with_output().unwrap();
    // 128 + SIGTERM, as a process the signal stopped.
    assert_eq!(output.status.code(), Some(143), "{}", stderr(&output));
    let kept = recorded();
    assert!((1..12).contains(&kept), "{kept} of 12 kept");
    assert!(
        stderr(&output).contains(&format!(
            "stopped after {kept} of 12 episodes, which {} keeps",
            out.display()
        )),
        "{}",
        stderr(&output)
    );
    assert_replays(&out, &bundle);
}

/// Ctrl-C while an endpoint's failures are being retried stops the run
/// at once rather than after the backoff (a minute), as one Ctrl-C even
/// when delivered twice, as `timeout` delivers it.
#[test]
fn ctrl_c_cuts_an_endpoints_retries_short() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let server = StubServer::start(100, |_, _| (500, "overloaded".to_owned()));
    let mut child = crate::common::forge_command()
        .args([
            "run",
            "--env",
            bundle.to_str().unwrap(),
            "--policy",
            "openai",
        ])
        .args([
            "--base-url",
            &server.url,
            "--model",
            "stub",
            "--tasks",
            "first:3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = {
        let said = said.clone();
        std::thread::spawn(move || {
            let mut chunk = [0; 4096];
            while let Ok(read @ 1..) = std::io::Read::read(&mut stderr_pipe, &mut chunk) {
                said.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..read]));
            }
        })
    };
    let waited = std::time::Instant::now();
    while !said.lock().unwrap().contains("retry 2 of") {
        assert!(
            waited.elapsed().as_secs() < 60,
            "no retry: {}",
            said.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let signalled = std::time::Instant::now();
    let pid = child.id().to_string();
    // Twice at once, as `timeout` sends it: to the command and to its group.
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid, &pid])
        .status();
    assert!(kill.unwrap().success());
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let said = said.lock().unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(
        signalled.elapsed().as_secs() < 20,
        "the retries' backoff was waited out: {said}"
    );
    assert!(
        said.contains("stopped before any episode finished"),
        "{said}"
    );
    assert!(!said.contains("stopped at once"), "{said}");
}

#[test]
fn eval_with_a_remote_policy_reports_pass_k_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let server = StubServer::start(500, gold_agent(gold_by_instruction(&bundle)));
    let out = dir.path().join("eval");
    let args = [
        "eval",
        "--json",
        "--env",
        bundle.to_str().unwrap(),
        "--policy",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--tasks",
        "shop-01,shop-05,shop-14",
        "--trials",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let output = forge(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = &json_lines(&output)[0];
    assert_eq!(report["policy"], "openai:stub");
    assert_eq!(report["episodes_run"], 6);
    assert_eq!(report["pass_hat_k"][0]["value"], 1.0, "{report}");
    assert_eq!(report["pass_hat_k"][1]["k"], 2);
    assert_eq!(report["mean_flip_rate"], 0.0);
    assert_eq!(report["terminations"], json!({"user_stop": 6}));
    assert!(report["llm_usage"]["requests"].as_u64().unwrap() > 6);
    let results = out
        .join(report["content_hash"].as_str().unwrap())
        .join("openai_stub");
    for file in [
        "report.md",
        "report.json",
        "trajectories.jsonl",
        "pass_k.svg",
    ] {
        assert!(results.join(file).is_file(), "{file}");
    }
    // The remark beside the first call is kept with it, and the model sees
    // it again in its next request; the user does not, and it replays.
    let records = jsonl(&results.join("trajectories.jsonl"));
    for record in &records {
        let first_call = record["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|message| message["tool_calls"].is_array())
            .unwrap();
        assert_eq!(first_call["content"], REMARK, "{record}");
    }
    let requests = server.requests.lock().unwrap().clone();
    assert!(requests.iter().any(|request| {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|message| message["content"] == REMARK && message["tool_calls"].is_array())
    }));
    assert_replays(&results.join("trajectories.jsonl"), &bundle);
    // Its directory, or the --out holding it alone, names its episodes.
    for named in [results.as_path(), results.parent().unwrap(), out.as_path()] {
        let output = forge(&["show", named.to_str().unwrap(), "--task", "shop-05"]);
        assert!(stdout(&output).contains("shop-05"), "{}", stderr(&output));
    }

    // Running again resumes: nothing new is asked of the model.
    let before = server.requests.lock().unwrap().len();
    let output = forge(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = &json_lines(&output)[0];
    assert_eq!(
        (
            report["episodes_run"].as_u64(),
            report["episodes_resumed"].as_u64()
        ),
        (Some(0), Some(6))
    );
    assert_eq!(server.requests.lock().unwrap().len(), before);

    // Another trial runs that trial alone; the others are counted once.
    let mut more = args.to_vec();
    let trials = more.len() - 3;
    more[trials] = "3";
    let output = forge(&more);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = &json_lines(&output)[0];
    assert_eq!(
        (
            report["episodes_run"].as_u64(),
            report["episodes_resumed"].as_u64()
        ),
        (Some(3), Some(6))
    );

    // Episodes played under other settings are not taken as this
    // evaluation's: the directory is refused, naming the setting.
    let trajectories = std::fs::read(results.join("trajectories.jsonl")).unwrap();
    let output = forge(&[&more[..], &["--max-turns", "1"]].concat());
    assert_refused(&output, "`max_turns`: 30 then, 1 now");
    assert_eq!(
        std::fs::read(results.join("trajectories.jsonl")).unwrap(),
        trajectories
    );
    // So are the policy's episodes played to another limit of turns.
    let appended = forge(&[
        "run",
        "--env",
        bundle.to_str().unwrap(),
        "--policy",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--tasks",
        "shop-02",
        "--max-turns",
        "1",
        "--out",
        results.join("trajectories.jsonl").to_str().unwrap(),
        "--append",
    ]);
    assert!(appended.status.success(), "{}", stderr(&appended));
    assert_refused(
        &forge(&more),
        "line 10 is an episode played to at most 1 agent action, not this evaluation's 30",
    );
    std::fs::write(results.join("trajectories.jsonl"), &trajectories).unwrap();
    // So are another policy's episodes in the file (copied in).
    let appended = forge(&[
        "run",
        "--env",
        bundle.to_str().unwrap(),
        "--tasks",
        "shop-02",
        "--out",
        results.join("trajectories.jsonl").to_str().unwrap(),
        "--append",
    ]);
    assert!(appended.status.success(), "{}", stderr(&appended));
    assert_refused(
        &forge(&more),
        "holds an episode of policy `gold` on environment `shop`",
    );
    // A damaged line stops the resumption, which says how to go on, and
    // the file is left as it was.
    let damaged = [b"{\"format\": \n".as_slice(), &trajectories].concat();
    std::fs::write(results.join("trajectories.jsonl"), &damaged).unwrap();
    let output = forge(&more);
    assert_refused(
        &output,
        "trajectories.jsonl line 1 is not a trajectory record",
    );
    assert_refused(&output, "delete that line (its episode is played again)");
    assert_eq!(
        std::fs::read(results.join("trajectories.jsonl")).unwrap(),
        damaged
    );
}

#[test]
fn parallel_episodes_keep_to_the_request_limit_and_match_a_serial_run() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let server = StubServer::start_slow(
        1000,
        std::time::Duration::from_millis(20),
        gold_agent(gold_by_instruction(&bundle)),
    );
    let run = |name: &str, concurrency: &str| {
        let out = dir.path().join(name);
        let output = forge(&[
            "eval",
            "--json",
            "--env",
            bundle.to_str().unwrap(),
            "--policy",
            "openai",
            "--base-url",
            &server.url,
            "--model",
            "stub",
            "--tasks",
            "shop-01,shop-02,shop-03,shop-05,shop-07,shop-14",
            "--trials",
            "2",
            "--concurrency",
            concurrency,
            "--max-requests",
            "2",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let report = json_lines(&output).remove(0);
        let file = out
            .join(report["content_hash"].as_str().unwrap())
            .join("openai_stub")
            .join("trajectories.jsonl");
        (report, std::fs::read(file).unwrap())
    };
    let (serial, serial_episodes) = run("serial", "1");
    assert_eq!(
        server
            .peak_in_flight
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let (parallel, parallel_episodes) = run("parallel", "4");
    assert_eq!(
        server
            .peak_in_flight
            .load(std::sync::atomic::Ordering::SeqCst),
        2,
        "four episodes at once, at most two requests out"
    );
    assert_eq!(parallel["episodes_run"], 12);
    assert_eq!(parallel["pass_hat_k"], serial["pass_hat_k"]);
    assert!(
        parallel_episodes == serial_episodes,
        "the same episodes, in the same order, whatever order they finished in"
    );
}

#[test]
fn a_remote_model_can_play_the_user() {
    // The stub user states its goal (from its system prompt), then ends the dialogue.
    let server = StubServer::start(100, |request, _| {
        let system = request["messages"][0]["content"]
            .as_str()
            .unwrap_or_default();
        let goal = system
            .split("Your situation and goal:\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap_or_default();
        let turns = request["messages"].as_array().unwrap().len();
        if turns <= 2 {
            completion(goal)
        } else {
            completion("Thanks! ###STOP###")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("t.jsonl");
    let output = forge(&[
        "run",
        "--json",
        "--policy",
        "gold",
        "--user",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--tasks",
        "shop-03",
        "--out",
        trajectory.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = json_lines(&output).pop().unwrap();
    assert_eq!(summary["success_rate"], 1.0);
    assert_eq!(summary["user"], "openai:stub");
    let record: Value = serde_json::from_str(
        std::fs::read_to_string(&trajectory)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(
        record["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Carla Mendes"),
        "the model's opening message is the goal"
    );
    assert_eq!(record["termination"], "user_stop");
    assert_eq!(
        record["user"],
        json!({"kind": "model", "name": "openai:stub"})
    );
    // The recorded dialogue replays without the model.
    assert!(
        forge(&["replay", trajectory.to_str().unwrap()])
            .status
            .success()
    );
}

/// A model user that ends the dialogue as it opens it ends the episode
/// there: the agent takes no turn.
#[test]
fn a_user_that_stops_at_once_ends_the_episode_before_the_agent_acts() {
    let server = StubServer::start(10, |_, _| completion("###STOP###"));
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("t.jsonl");
    let output = forge(&[
        "run",
        "--policy",
        "openai",
        "--user",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--tasks",
        "shop-03",
        "--out",
        trajectory.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let record = &jsonl(&trajectory)[0];
    assert_eq!(record["termination"], "user_stop");
    assert_eq!(record["messages"].as_array().unwrap().len(), 1, "{record}");
    assert_eq!(server.requests.lock().unwrap().len(), 1, "the user's alone");
    assert!(
        forge(&["replay", trajectory.to_str().unwrap()])
            .status
            .success()
    );
}

#[test]
fn remote_agents_and_users_sample_as_asked_with_seeds_drawn_from_the_episode() {
    // The user opens, the agent (the one offered tools) says a line, and
    // the user then ends the dialogue.
    let server = StubServer::start(200, |request, _| {
        match (
            request.get("tools").is_some(),
            request["messages"].as_array().unwrap().len(),
        ) {
            (true, _) => completion("Fine."),
            (false, ..=2) => completion("Hello, I need help."),
            (false, _) => completion("Fine. ###STOP###"),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let sent = |sampling: &[&str], out: &str| -> (Vec<Value>, Vec<Value>) {
        let before = server.requests.lock().unwrap().len();
        let mut args = vec!["eval", "--policy", "openai", "--user", "openai"];
        args.extend(["--base-url", &server.url, "--model", "stub"]);
        args.extend(["--tasks", "shop-01,shop-02", "--trials", "2", "--json"]);
        let out = dir.path().join(out);
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend(sampling);
        let output = forge(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        let requests = server.requests.lock().unwrap()[before..].to_vec();
        let sampled = |request: &Value| {
            json!({
                "temperature": request["temperature"],
                "top_p": request["top_p"],
                "seed": request["seed"],
            })
        };
        let (agent, user): (Vec<&Value>, Vec<&Value>) = requests
            .iter()
            .partition(|request| request.get("tools").is_some());
        let sorted = |requests: Vec<&Value>| {
            let mut sampled: Vec<Value> = requests.into_iter().map(sampled).collect();
            sampled.sort_by_key(Value::to_string);
            sampled
        };
        (sorted(agent), sorted(user))
    };

    // Unasked, both are greedy and sent no seed.
    let (agent, user) = sent(&[], "greedy");
    assert_eq!(agent.len(), 4, "one agent turn in each of 4 episodes");
    assert_eq!(user.len(), 8);
    for request in agent.iter().chain(&user) {
        assert_eq!(
            request,
            &json!({"temperature": 0.0, "top_p": null, "seed": null})
        );
    }

    let flags = [
        "--temperature",
        "0.7",
        "--top-p",
        "0.9",
        "--user-temperature",
        "0.5",
    ];
    let (agent, user) = sent(&flags, "sampled");
    assert!(agent.iter().all(|request| request["temperature"] == 0.7
        && request["top_p"] == 0.9
        && request["seed"].is_u64()));
    assert!(user.iter().all(|request| request["temperature"] == 0.5
        && request["top_p"].is_null()
        && request["seed"].is_u64()));
    // Every request draws with its own seed, and the same run draws the same.
    let seeds: std::collections::BTreeSet<String> = agent
        .iter()
        .chain(&user)
        .map(|request| request["seed"].to_string())
        .collect();
    assert_eq!(seeds.len(), 12);
    assert_eq!(sent(&flags, "again"), (agent, user));

    // Sampled otherwise, the evaluation's episodes are not resumed as its own.
    let mut other = flags;
    other[1] = "0.8";
    let mut args = vec!["eval", "--policy", "openai", "--user", "openai"];
    args.extend(["--base-url", &server.url, "--model", "stub"]);
    args.extend(["--tasks", "shop-01,shop-02", "--trials", "2"]);
    let out = dir.path().join("sampled");
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(other);
    assert_refused(&forge(&args), "`endpoint.temperature`: 0.7 then, 0.8 now");
}

/// OpenAI's answer to a request longer than the model's context.
fn past_the_context() -> (u16, String) {
    let error = json!({"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }});
    (400, error.to_string())
}

#[test]
fn a_remote_model_whose_context_fills_ends_the_episode_there() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, args: &[&str]| {
        let path = dir.path().join(name);
        let mut all = vec!["run", "--json", "--tasks", "shop-03"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--out", path.to_str().unwrap()]);
        let output = forge(&all);
        assert!(output.status.success(), "{}", stderr(&output));
        let summary = json_lines(&output).pop().unwrap();
        assert_eq!(summary["episodes_context_full"], 1, "{summary}");
        let record: Value = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        // The episode is judged as it stood, and replays without the model.
        let replayed = forge(&["replay", path.to_str().unwrap()]);
        assert!(replayed.status.success(), "{}", stderr(&replayed));
        record
    };

    // The agent looks the user up; its next request no longer fits.
    let agent = StubServer::start(10, |_, index| match index {
        0 => {
            let call = json!({"id": "call_0", "type": "function", "function": {
                "name": "find_user_by_email",
                "arguments": "{\"email\": \"carla.mendes@example.com\"}",
            }});
            let message = json!({"role": "assistant", "content": null, "tool_calls": [call]});
            (
                200,
                json!({"choices": [{"index": 0, "message": message}]}).to_string(),
            )
        }
        _ => past_the_context(),
    });
    let record = run(
        "agent.jsonl",
        &[
            "--policy",
            "openai",
            "--base-url",
            &agent.url,
            "--model",
            "stub",
        ],
    );
    assert_eq!(record["termination"], "context_full", "{record}");
    assert_eq!(record["steps"][0]["status"], "ok", "{record}");
    assert_eq!(record["reward"], 0.0);
    // The replaying policy finds the recorded context full where it was.
    let recorded = dir.path().join("agent.jsonl");
    let again = run(
        "again.jsonl",
        &["--policy", "replay", "--from", recorded.to_str().unwrap()],
    );
    assert_eq!(again["messages"], record["messages"]);
    assert_eq!(again["termination"], "context_full");

    // The user opens; its answer to the agent no longer fits.
    let user = StubServer::start(10, |_, index| match index {
        0 => completion("I would like to check my order."),
        _ => past_the_context(),
    });
    let record = run(
        "user.jsonl",
        &[
            "--policy",
            "gold",
            "--user",
            "openai",
            "--base-url",
            &user.url,
            "--model",
            "stub",
        ],
    );
    assert_eq!(record["termination"], "context_full", "{record}");
    let last = record["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "assistant", "the user said no more: {record}");
}

#[test]
fn a_remote_policy_without_an_endpoint_is_a_clear_error() {
    let output = forge(&["run", "--policy", "openai"]);
    assert_refused(&output, "need --base-url and --model");
    let output = forge(&[
        "run",
        "--policy",
        "openai",
        "--base-url",
        "127.0.0.1:8000/v1",
        "--model",
        "m",
    ]);
    assert_refused(
        &output,
        "`127.0.0.1:8000/v1` is not an http:// or https:// URL with a host",
    );
}

/// A failure that may clear is retried, and each retry is told of as it
/// waits.
#[test]
fn a_failing_endpoint_is_retried_and_each_retry_told_of() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let agent = gold_agent(gold_by_instruction(&bundle));
    let server = StubServer::start(50, move |request, index| match index {
        0 => (503, "{\"error\": \"overloaded\"}".to_owned()),
        _ => agent(request, index),
    });
    let output = forge(&[
        "run",
        "--env",
        bundle.to_str().unwrap(),
        "--policy",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--tasks",
        "shop-01",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "warning: {}/chat/completions answered HTTP 503: {{\"error\": \"overloaded\"}}; \
             retry 1 of 6 in 1.0 s",
            server.url
        )),
        "{}",
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("success rate 1/1"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn an_endpoint_that_fails_says_why_and_what_was_kept() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    let mut known = gold_by_instruction(&bundle);
    known.retain(|_, task| task["id"] == "shop-01");
    let played: String = known.keys().next().unwrap().clone();
    let agent = gold_agent(known.clone());
    // The agent plays shop-01; any other task's request is refused for
    // want of a key, which is not retried.
    let server = StubServer::start(50, move |request, index| {
        let instruction = request["messages"][1]["content"]
            .as_str()
            .unwrap_or_default();
        match known.contains_key(instruction) {
            true => agent(request, index),
            false => (401, "{\"error\": \"no key\"}".to_owned()),
        }
    });
    let agent = [
        "--env",
        bundle.to_str().unwrap(),
        "--policy",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--api-key-env",
        "FORGE_TEST_UNSET_KEY",
        "--tasks",
        "shop-01,shop-03",
    ];
    let trajectory = dir.path().join("t.jsonl");
    let output = forge(
        &[
            &["run"],
            &agent[..],
            &["--out", trajectory.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&format!(
            "stopped after 1 of 2 episodes, which {} keeps: task `shop-03`: {}/chat/completions \
             answered HTTP 401: {{\"error\": \"no key\"}} (no key was sent: \
             `FORGE_TEST_UNSET_KEY` is unset)",
            trajectory.display(),
            server.url
        )),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(&trajectory)
            .unwrap()
            .lines()
            .count(),
        1
    );
    // The finished episode's row is printed, with no summary of a run that
    // did not finish.
    assert!(
        stdout(&output).contains("│ shop-01 "),
        "{}",
        stdout(&output)
    );
    assert!(
        !stdout(&output).contains("success rate"),
        "{}",
        stdout(&output)
    );
    let refused = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|request| request["messages"][1]["content"] != played.as_str())
        .count();
    assert_eq!(refused, 1, "a refused key is not retried");
    // An evaluation stopped so resumes.
    let out = dir.path().join("eval");
    let output = forge(
        &[
            &["eval"],
            &agent[..],
            &["--trials", "1", "--out", out.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("stopped after 1 of 2 episodes, which ")
            && stderr(&output).contains(
                "trajectories.jsonl keeps (the same command resumes there): task `shop-03`"
            ),
        "{}",
        stderr(&output)
    );
    // `forge compare` says of its results that they are unfinished.
    let first_in = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    let results = first_in(&first_in(&out));
    assert_refused(
        &forge(&["compare", results.to_str().unwrap()]),
        "whose evaluation has not finished",
    );
    // One that fails before its first episode leaves nothing behind, which
    // `forge compare` would take for a result.
    let never = dir.path().join("never");
    let output = forge(
        &[
            &["eval"],
            &agent[..10],
            &["--tasks", "shop-03", "--out", never.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_refused(&output, "answered HTTP 401");
    assert!(!never.exists());

    // A request past --request-timeout fails at once, unretried.
    let slow = StubServer::start_slow(10, std::time::Duration::from_secs(3), |_, _| {
        completion("too late")
    });
    let output = forge(&[
        "run",
        "--policy",
        "openai",
        "--base-url",
        &slow.url,
        "--model",
        "stub",
        "--request-timeout",
        "1",
        "--tasks",
        "shop-01",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&format!(
            "{}/chat/completions sent no whole answer within 1 s, the request timeout",
            slow.url
        )),
        "{}",
        stderr(&output)
    );
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert_eq!(
        slow.requests.lock().unwrap().len(),
        1,
        "a timeout is not retried"
    );
}

#[test]
fn an_evaluation_counts_the_episodes_whose_nl_assertions_no_judge_evaluated() {
    // τ²-bench retail task 2 has an NL assertion; task 0 has none.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("evals");
    let eval = |json: bool| {
        let mut args = vec![
            "eval",
            "--suite",
            "tau2-bench/retail",
            "--data",
            "../shared/benchmarks",
            "--policy",
            "gold",
            "--tasks",
            "0,2",
            "--trials",
            "2",
            "--out",
            out.to_str().unwrap(),
        ];
        if json {
            args.push("--json");
        }
        let output = forge(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        output
    };
    let report = json_lines(&eval(true)).pop().unwrap();
    assert_eq!(report["episodes_with_unevaluated_checks"], 2, "{report}");
    assert_eq!(report["bootstrap_resamples"], 1000, "{report}");
    let note = "2 of 4 episodes' tasks have NL assertions that no judge evaluated";
    assert!(stdout(&eval(false)).contains(note));
    let results = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let markdown = std::fs::read_to_string(results.join("gold/report.md")).unwrap();
    assert!(markdown.contains(note), "{markdown}");
    assert!(
        markdown.contains("95% bootstrap CI (1000 resamples)"),
        "{markdown}"
    );
}

#[test]
fn a_judge_model_decides_nl_assertions_and_replays_take_its_verdicts() {
    // τ²-bench retail task 2 counts the database and one NL assertion. The
    // stub judge meets it in the first episode and not in the second; its
    // first answer, in prose, is asked again, saying why.
    let server = StubServer::start(10, |request, index| {
        let messages = request["messages"].as_array().unwrap();
        let prompt = messages[1]["content"].as_str().unwrap_or_default();
        assert!(prompt.contains("Expected outcomes:\n1. "), "{prompt}");
        if index == 0 {
            return completion("The agent did what was expected.");
        }
        if index == 1 {
            let told = messages.last().unwrap()["content"].as_str().unwrap();
            assert!(
                told.contains("could not be read: the judge's reply is not JSON"),
                "{told}"
            );
        }
        let met = index == 1;
        completion(&format!(
            "{{\"results\": [{{\"expectedOutcome\": \"x\", \"reasoning\": \"r\", \"metExpectation\": {met}}}]}}"
        ))
    });
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| {
        let trajectory = dir.path().join(name);
        let output = forge(&[
            "run",
            "--suite",
            "tau2-bench/retail",
            "--data",
            "../shared/benchmarks",
            "--policy",
            "gold",
            "--tasks",
            "2",
            "--judge-model",
            "judge",
            "--judge-base-url",
            &server.url,
            "--json",
            "--out",
            trajectory.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        (json_lines(&output), trajectory)
    };
    let (met, met_trajectory) = run("met.jsonl");
    assert_eq!(met[0]["reward"], 1.0);
    assert_eq!(met[0]["nl_assertions_judged"], 1);
    assert_eq!(met.last().unwrap()["episodes_with_unevaluated_checks"], 0);
    // The gold agent asks no model; the judge's requests are counted.
    assert_eq!(met.last().unwrap()["llm_usage"], Value::Null);
    let judged = met.last().unwrap()["judge_usage"]["requests"].as_u64();
    let (unmet, unmet_trajectory) = run("unmet.jsonl");
    assert_eq!(unmet[0]["reward"], 0.0);
    assert_eq!(unmet[0]["state_match"], true);
    assert_eq!(unmet[0]["nl_assertions_met"], 0);
    assert_eq!(server.requests.lock().unwrap().len(), 3);
    let judged_again = unmet.last().unwrap()["judge_usage"]["requests"].as_u64();
    assert_eq!(judged.zip(judged_again).map(|(a, b)| a + b), Some(3));
    // Replays reproduce both verdicts without asking the judge again.
    for trajectory in [met_trajectory, unmet_trajectory] {
        let output = forge(&[
            "replay",
            trajectory.to_str().unwrap(),
            "--suite",
            "tau2-bench/retail",
            "--data",
            "../shared/benchmarks",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    assert_eq!(server.requests.lock().unwrap().len(), 3);
    // A judge for tasks without NL assertions would decide nothing.
    let output = forge(&[
        "run",
        "--judge-model",
        "judge",
        "--judge-base-url",
        &server.url,
    ]);
    assert_refused(&output, "--judge-model: no task chosen has NL assertions");
}

#[test]
fn a_remote_user_calls_its_own_tools_out_of_the_agents_sight() {
    // τ²-bench mock task `update_task_with_user_tools` asserts that the user
    // read its notification, which only the user's own tool can do. The stub
    // user opens, answers the agent by dismissing the notification, then stops.
    let server = StubServer::start(10, |request, index| match index {
        0 => {
            // Briefed by τ²-bench's own guidelines for users with tools.
            let system = request["messages"][0]["content"].as_str().unwrap();
            assert!(
                system.contains("<scenario>") && system.contains("tool"),
                "{system}"
            );
            completion("Please mark task_1 as completed.")
        }
        1 => {
            assert!(
                request["tools"]
                    .to_string()
                    .contains("dismiss_notification")
            );
            let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "u1", "type": "function", "function": {
                    "name": "dismiss_notification",
                    "arguments": "{\"notification_id\": \"notif_1\"}"}}]}}]});
            (200, body.to_string())
        }
        _ => {
            // The user sees its call's result.
            let last = request["messages"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(last["role"], "tool", "{last}");
            assert_eq!(last["content"], "Notification notif_1 dismissed");
            completion("Thanks! ###STOP###")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let trajectory = dir.path().join("t.jsonl");
    let data = [
        "--suite",
        "tau2-bench/mock",
        "--data",
        "../shared/benchmarks",
    ];
    let mut args = vec!["run", "--json", "--policy", "gold", "--user", "openai"];
    args.extend(data);
    args.extend([
        "--base-url",
        &server.url,
        "--model",
        "stub",
        "--tasks",
        "update_task_with_user_tools",
        "--out",
        trajectory.to_str().unwrap(),
    ]);
    let output = forge(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let episode = &json_lines(&output)[0];
    assert_eq!(episode["assertions_met"], 1, "{episode}");
    assert_eq!(episode["steps"], 2);
    let record: Value =
        serde_json::from_str(std::fs::read_to_string(&trajectory).unwrap().trim()).unwrap();
    assert_eq!(record["steps"][1]["actor"], "user");
    assert_eq!(record["steps"][1]["tool"], "dismiss_notification");
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    // The agent's greeting opens the user's side of the dialogue every
    // time, which the user's opening answers: turns alternate.
    let roles: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles[..4], ["system", "user", "assistant", "user"]);
    // The recorded dialogue, the user's calls included, replays without the model.
    let mut replay = vec!["replay", trajectory.to_str().unwrap()];
    replay.extend(data);
    let output = forge(&replay);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn compare_measures_evaluations_against_a_baseline_task_by_task() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export_example(dir.path());
    // A remote agent that knows half the tasks' gold actions.
    let tasks = [
        "shop-01", "shop-02", "shop-03", "shop-04", "shop-05", "shop-06",
    ];
    let mut known = gold_by_instruction(&bundle);
    known.retain(|_, task| {
        ["shop-01", "shop-03", "shop-05"].contains(&task["id"].as_str().unwrap())
    });
    let server = StubServer::start(500, gold_agent(known));
    let out = dir.path().join("eval");
    let evaluate = |policy: &[&str]| -> std::path::PathBuf {
        let mut args = vec!["eval", "--json", "--env", bundle.to_str().unwrap()];
        args.extend(policy);
        let selection = tasks.join(",");
        args.extend([
            "--tasks",
            &selection,
            "--trials",
            "2",
            "--out",
            out.to_str().unwrap(),
        ]);
        let output = forge(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        let report = &json_lines(&output)[0];
        let label = report["policy"].as_str().unwrap().replace(':', "_");
        out.join(report["content_hash"].as_str().unwrap())
            .join(label)
    };
    let gold = evaluate(&["--policy", "gold"]);
    let random = evaluate(&["--policy", "random"]);
    let half = evaluate(&[
        "--policy",
        "openai",
        "--base-url",
        &server.url,
        "--model",
        "stub",
    ]);
    // Each report counts the tasks solved always, sometimes and never, and
    // lists them, the least solved first.
    let report = std::fs::read_to_string(half.join("report.md")).unwrap();
    assert!(
        report.contains("Tasks solved in every trial: 3; in some: 0; in none: 3."),
        "{report}"
    );
    let rows: Vec<&str> = report
        .lines()
        .filter(|line| line.starts_with("| shop-"))
        .collect();
    assert_eq!(rows[0], "| shop-02 | 0/2 | 0.000 |", "{report}");
    assert_eq!(rows[5], "| shop-05 | 2/2 | 0.000 |", "{report}");
    let dirs = [
        gold.to_str().unwrap(),
        random.to_str().unwrap(),
        half.to_str().unwrap(),
    ];

    let output = forge(&[&["compare", "--json"][..], &dirs].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let compared = &json_lines(&output)[0];
    let rows = compared["evaluations"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["pass_hat_k"][0]["value"], 1.0, "{compared}");
    let against = compared["against_first"].as_array().unwrap();
    let (random, half) = (&against[0], &against[1]);
    assert_eq!(
        (&random["name"], &random["baseline"]),
        (&json!("random"), &json!("gold"))
    );
    assert_eq!(random["shared_tasks"], 6);
    assert_eq!(random["success_difference"], -1.0);
    assert_eq!(
        (&random["ci_low"], &random["ci_high"]),
        (&json!(-1.0), &json!(-1.0))
    );
    assert_eq!(random["worse"].as_array().unwrap().len(), 6);
    // Six of six worse: 2 × 2^-6.
    let p = |against: &Value| against["sign_test_p"].as_f64().unwrap();
    assert!((p(random) - 2.0 / 64.0).abs() < 1e-12, "{random}");
    assert_eq!(half["success_difference"], -0.5, "{half}");
    assert_eq!(half["worse"], json!(["shop-02", "shop-04", "shop-06"]));
    assert_eq!(half["same"], 3);
    assert!((p(half) - 0.25).abs() < 1e-12, "{half}");
    // The settings that differ: the policy, and the remote one's endpoint,
    // setting by setting (the others have none).
    let keys: Vec<&str> = compared["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|difference| difference["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "endpoint.base_url",
            "endpoint.model",
            "endpoint.temperature",
            "policy"
        ]
    );

    let output = forge(&[&["compare"][..], &dirs].concat());
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        text.contains("openai_stub does worse than gold on: shop-02, shop-04, shop-06"),
        "{text}"
    );
    // The curves are drawn into a new file or over a drawing, never over
    // anything else (a file of the evaluations compared).
    let plot = dir.path().join("curves.svg");
    for _ in 0..2 {
        let output = forge(&[&["compare", "--plot", plot.to_str().unwrap()][..], &dirs].concat());
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let trajectories = gold.join("trajectories.jsonl");
    let kept = std::fs::read(&trajectories).unwrap();
    let output = forge(
        &[
            &["compare", "--plot", trajectories.to_str().unwrap()][..],
            &dirs,
        ]
        .concat(),
    );
    assert_refused(&output, "exists and is not an SVG drawing");
    assert_eq!(std::fs::read(&trajectories).unwrap(), kept);

    // A seed sets evaluations apart too (one directory keeps several
    // seeds' episodes: the report's is compared).
    let reseeded = dir.path().join("reseeded");
    let output = forge(&[
        "eval",
        "--json",
        "--env",
        bundle.to_str().unwrap(),
        "--tasks",
        &tasks.join(","),
        "--trials",
        "2",
        "--seed",
        "7",
        "--out",
        reseeded.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let reseeded = reseeded.join(gold.strip_prefix(&out).unwrap());
    let output = forge(&["compare", "--json", dirs[0], reseeded.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        json_lines(&output)[0]["differences"],
        json!([{"key": "seed", "values": [0, 7]}])
    );
    let report = std::fs::read_to_string(reseeded.join("report.md")).unwrap();
    assert!(report.contains("6 tasks × 2 trials, seed 7."), "{report}");
    assert_refused(&forge(&["compare", dirs[0], dirs[0]]), "is given twice");

    // Runs and evaluations do not mix.
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("config.toml"), "").unwrap();
    let output = forge(&["compare", run.to_str().unwrap(), dirs[0]]);
    assert_refused(
        &output,
        "compare runs with runs, evaluations with evaluations",
    );
}
