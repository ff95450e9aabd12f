//! `forge serve` end to end: the real binary on a loopback port, driven over
//! OpenEnv's HTTP and WebSocket API and MCP, as remote agents drive it.

use crate::common::{
    assert_refused, assert_replays, export_example, forge, forge_cache_dir, forge_command,
    guest_component, stderr, stdout,
};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `forge serve` process, killed when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let mut child = forge_command()
            .arg("serve")
            .args(["--port", "0"])
            .args(args)
            .env("FORGE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting forge serve");
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let base = loop {
            let line = lines
                .next()
                .expect("forge serve ended before it listened")
                .expect("reading stderr");
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest
                    .split_whitespace()
                    .next()
                    .expect("an address")
                    .to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, base }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn ws(&self, query: &str) -> Ws {
        let url = format!("{}/ws{query}", self.base.replace("http://", "ws://"));
        let (socket, _) = tungstenite::connect(url).expect("the WebSocket connects");
        Ws(socket)
    }

    fn sessions(&self) -> u64 {
        let (status, health) = get(&self.url("/healthz"));
        assert_eq!(status, 200);
        health["sessions"].as_u64().expect("a session count")
    }

    /// Sends SIGTERM and waits for the process to end.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        self.child.wait().expect("waiting for forge serve")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Ws(tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>);

impl Ws {
    fn send(&mut self, frame: &Value) -> Value {
        self.send_text(&frame.to_string())
    }

    fn send_text(&mut self, text: &str) -> Value {
        self.0
            .send(tungstenite::Message::Text(text.into()))
            .expect("sending a frame");
        loop {
            match self.0.read().expect("reading a frame") {
                tungstenite::Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).expect("a JSON frame");
                }
                tungstenite::Message::Close(_) => panic!("the server closed the connection"),
                _ => continue,
            }
        }
    }

    fn step(&mut self, action: Value) -> Value {
        let answer = self.send(&json!({"type": "step", "data": action}));
        assert_eq!(answer["type"], "observation", "{answer}");
        answer["data"].clone()
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.step(json!({"type": "call_tool", "tool_name": tool, "arguments": arguments}))
    }

    /// The close frame the server ends the connection with, and the last
    /// text frame before it.
    fn closed(&mut self) -> (tungstenite::protocol::CloseFrame, Option<String>) {
        let mut said = None;
        loop {
            match self.0.read() {
                Ok(tungstenite::Message::Close(frame)) => {
                    return (frame.expect("a close frame"), said);
                }
                Ok(tungstenite::Message::Text(text)) => said = Some(text.to_string()),
                Ok(_) => continue,
                Err(err) => panic!("no close frame: {err}"),
            }
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Value) {
    let mut response = response.expect("the server answers");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn get(url: &str) -> (u16, Value) {
    answer(agent().get(url).call())
}

fn post(url: &str, body: &Value) -> (u16, Value) {
    post_text(url, &body.to_string())
}

fn post_text(url: &str, body: &str) -> (u16, Value) {
    answer(
        agent()
            .post(url)
            .content_type("application/json")
            .send(body),
    )
}

/// The example environment's task `id`, from the bundle `forge example` writes.
fn example_task(id: &str) -> Value {
    let tasks = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("env-templates/example/bundle/tasks.jsonl"),
    )
    .unwrap();
    tasks
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|task| task["id"] == id)
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_openenv_websocket_episode_scores_and_replays_byte_identically() {
    let dir = tempfile::tempdir().unwrap();
    let trajectories = dir.path().join("served.jsonl");
    let server = Server::start(&["--out", trajectories.to_str().unwrap()]);
    let mut ws = server.ws("");
    // The first reset names the session, as OpenEnv's `episode_id` does.
    let reset = ws.send(
        &json!({"type": "reset", "data": {"task_id": "shop-02", "seed": 7, "episode_id": "chosen-1"}}),
    );
    assert_eq!(server.sessions(), 1, "a connection is a session");
    assert_eq!(reset["type"], "observation");
    let metadata = &reset["data"]["observation"]["metadata"];
    assert_eq!(metadata["task_id"], "shop-02");
    assert_eq!(metadata["session_id"], "chosen-1");
    let task = example_task("shop-02");
    assert_eq!(metadata["messages"][0]["content"], task["instruction"]);
    assert_eq!(reset["data"]["done"], false);
    // The environment's rules come with the reset, as `forge run` gives
    // them to its agents.
    assert!(
        metadata["instructions"]
            .as_str()
            .is_some_and(|rules| rules.starts_with("Customer service for an online shop")),
        "{metadata}"
    );

    let tools = ws.step(json!({"type": "list_tools"}));
    let names: Vec<&str> = tools["observation"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"get_order") && names.contains(&"send_message_to_user"));

    // Mistakes are answered, and the connection goes on.
    let unknown = ws.call("fly_to_the_moon", json!({}));
    assert_eq!(
        unknown["observation"]["error"]["error_type"],
        "tool_not_found"
    );
    let bad = ws.send_text("{not json");
    assert_eq!(bad["type"], "error");
    assert_eq!(bad["data"]["code"], "INVALID_JSON");
    let invalid = ws.send(&json!({"type": "step", "data": {"type": "call_tool"}}));
    assert_eq!(invalid["data"]["code"], "VALIDATION_ERROR");
    let nested = ws.send(
        &json!({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}}),
    );
    assert_eq!(
        nested["data"]["error"]["code"], -32600,
        "the connection is its session already: {nested}"
    );
    let invalid_arguments = ws.call("get_order", json!({"order": 1}));
    assert_eq!(invalid_arguments["observation"]["result"]["is_error"], true);

    for action in task["gold_actions"].as_array().unwrap() {
        let result = ws.call(
            action["name"].as_str().unwrap(),
            action["arguments"].clone(),
        );
        assert_eq!(result["observation"]["error"], Value::Null, "{result}");
        assert_eq!(result["done"], false);
    }
    let outputs: Vec<&str> = task["required_outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|output| output.as_str().unwrap())
        .collect();
    let message = format!("Here you are: {}.", outputs.join(", "));
    let last = ws.call("send_message_to_user", json!({ "message": message }));
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["reward"], 1.0, "{last}");
    let state = ws.send(&json!({"type": "state"}));
    assert_eq!(state["data"]["done"], true);
    assert_eq!(state["data"]["termination"], "user_stop");
    let over = ws.send(&json!({"type": "step", "data": {"type": "list_tools"}}));
    assert_eq!(
        over["data"]["done"], true,
        "listing tools still works: {over}"
    );
    let refused = ws.send(
        &json!({"type": "step", "data": {"type": "call_tool", "tool_name": "get_order", "arguments": {"order_id": "o1"}}}),
    );
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["data"]["reason"], "episode_over");

    // A second episode on the same connection, in the same session.
    let again =
        ws.send(&json!({"type": "reset", "data": {"task_id": "shop-01", "episode_id": "other"}}));
    let metadata = &again["data"]["observation"]["metadata"];
    assert_eq!(metadata["task_id"], "shop-01");
    assert_eq!(metadata["session_id"], "chosen-1");
    ws.call("get_product", json!({"product_id": "p2"}));
    ws.0.send(tungstenite::Message::Text(r#"{"type": "close"}"#.into()))
        .unwrap();
    wait_until("the session is gone", || server.sessions() == 0);
    assert!(server.terminate().success());

    let replay = forge(&["replay", trajectories.to_str().unwrap(), "--json"]);
    assert!(
        replay.status.success(),
        "{}{}",
        stdout(&replay),
        stderr(&replay)
    );
    let records: Vec<Value> = std::fs::read_to_string(&trajectories)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "both episodes are recorded");
    assert_eq!(records[0]["task_id"], "shop-02");
    assert_eq!(records[0]["reward"], 1.0);
    assert_eq!(records[0]["seed"], 7);
    assert_eq!(records[1]["termination"], "closed");
    // The replaying policy plays both again, the closed one to where it
    // was cut, to the same rewards.
    let replayed = dir.path().join("replayed.jsonl");
    let output = forge(&[
        "run",
        "--policy",
        "replay",
        "--from",
        trajectories.to_str().unwrap(),
        "--tasks",
        &format!(
            "{},{}",
            records[0]["task_id"].as_str().unwrap(),
            records[1]["task_id"].as_str().unwrap()
        ),
        "--out",
        replayed.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let again: Vec<Value> = std::fs::read_to_string(&replayed)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for (record, again) in records.iter().zip(&again) {
        assert_eq!(again["messages"], record["messages"]);
        assert_eq!(again["termination"], record["termination"]);
        assert_eq!(again["reward"], record["reward"]);
    }
}

#[test]
fn resets_take_the_tasks_in_turn_and_a_refused_or_named_one_takes_none() {
    let server = Server::start(&[]);
    let task = |request: Value| {
        let (status, body) = post(&server.url("/reset"), &request);
        (status, body["observation"]["metadata"]["task_id"].clone())
    };
    assert_eq!(task(json!({})), (200, json!("shop-01")));
    // Refused, or naming their task or seed: the turn stays where it was.
    assert_eq!(task(json!({"task_id": "nope"})).0, 404);
    assert_eq!(task(json!({"env": "nowhere"})).0, 404);
    assert_eq!(task(json!({"task_id": "shop-20"})), (200, json!("shop-20")));
    assert_eq!(task(json!({"seed": 4})), (200, json!("shop-05")));
    assert_eq!(task(json!({})), (200, json!("shop-02")));
    assert_eq!(task(json!({})), (200, json!("shop-03")));
    // Resets naming their environment go through its tasks in their own
    // turn: another environment's resets take none of them.
    assert_eq!(task(json!({"env": "shop"})), (200, json!("shop-01")));
    assert_eq!(task(json!({"env": "shop"})), (200, json!("shop-02")));
    assert_eq!(task(json!({})), (200, json!("shop-04")));
}

#[test]
fn a_task_id_two_environments_share_is_named_with_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let shop = export_example(dir.path());
    let copy = dir.path().join("copy");
    std::fs::rename(export_example(&dir.path().join("other")), &copy).unwrap();
    let manifest = copy.join("manifest.json");
    let mut fields: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    fields["name"] = json!("shop-copy");
    std::fs::write(&manifest, fields.to_string()).unwrap();
    let server = Server::start(&[shop.to_str().unwrap(), copy.to_str().unwrap()]);
    // There, but in which environment is not said: the request's fault.
    let (status, ambiguous) = post(&server.url("/reset"), &json!({"task_id": "shop-01"}));
    assert_eq!(status, 422, "{ambiguous}");
    assert_eq!(ambiguous["code"], "bad_request", "{ambiguous}");
    assert!(
        ambiguous["detail"]
            .as_str()
            .unwrap()
            .ends_with("is in several environments (shop, shop-copy); name it `env/task`"),
        "{ambiguous}"
    );
    let (status, named) = post(
        &server.url("/reset"),
        &json!({"task_id": "shop-copy/shop-01"}),
    );
    assert_eq!(status, 200, "{named}");
}

#[test]
fn pages_of_other_sites_are_refused_and_allowed_ones_served() {
    let server = Server::start(&[
        "--allow-origin",
        "https://app.example.com",
        "--allow-host",
        "forge.example.com",
    ]);
    let reset = |origin: &str| {
        answer(
            agent()
                .post(&server.url("/reset"))
                .header("Origin", origin)
                .content_type("application/json")
                .send("{}"),
        )
    };
    // A page elsewhere (or one rebinding its name to this machine) cannot
    // open a session, nor reach the MCP endpoint or the WebSocket.
    let (status, body) = reset("http://evil.example");
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("origin_not_allowed")),
        "{body}"
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("`--allow-origin`"),
        "{body}"
    );
    let (status, _) = answer(
        agent()
            .post(&server.url("/mcp"))
            .header("Origin", "null")
            .content_type("application/json")
            .send(r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}"#),
    );
    assert_eq!(status, 403);
    let mut request = tungstenite::client::IntoClientRequest::into_client_request(format!(
        "{}/ws",
        server.base.replace("http://", "ws://")
    ))
    .unwrap();
    request
        .headers_mut()
        .insert("Origin", "http://evil.example".parse().unwrap());
    match tungstenite::connect(request) {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403),
        other => panic!("a WebSocket from another site was not refused: {other:?}"),
    }
    assert_eq!(server.sessions(), 0);
    // This machine's pages and the allowed site are served; so is a
    // client that sends no origin, as agents do.
    for origin in [
        "http://localhost:5173",
        "http://127.0.0.1",
        "https://app.example.com",
    ] {
        let (status, body) = reset(origin);
        assert_eq!(status, 200, "{origin}: {body}");
    }
    assert_eq!(post(&server.url("/reset"), &json!({})).0, 200);
    // An allowed page may read the answers (CORS), its preflight answered.
    let response = agent()
        .options(&server.url("/mcp"))
        .header("Origin", "https://app.example.com")
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type")
        .call()
        .unwrap();
    assert_eq!(response.status(), 204);
    let header = |response: &ureq::http::Response<ureq::Body>, name: &str| {
        let value = response.headers().get(name);
        value.map(|value| value.to_str().unwrap().to_owned())
    };
    assert_eq!(
        header(&response, "access-control-allow-origin").as_deref(),
        Some("https://app.example.com")
    );
    assert!(
        header(&response, "access-control-allow-headers")
            .unwrap()
            .contains("content-type")
    );
    let response = agent()
        .post(&server.url("/reset"))
        .header("Origin", "https://app.example.com")
        .content_type("application/json")
        .send("{}")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "access-control-allow-origin").as_deref(),
        Some("https://app.example.com")
    );
    assert!(
        header(&response, "access-control-expose-headers")
            .unwrap()
            .contains("mcp-session-id")
    );

    // A page that rebinds its name to this machine sends no `Origin` with
    // a GET, but its browser names the page's site as the host.
    let metadata = |host: &str| {
        answer(
            agent()
                .get(&server.url("/metadata"))
                .header("Host", host)
                .call(),
        )
    };
    let (status, body) = metadata("evil.example:8000");
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("host_not_allowed")),
        "{body}"
    );
    assert!(
        body["detail"].as_str().unwrap().contains("`--allow-host`"),
        "{body}"
    );
    for host in ["forge.example.com", "localhost:8000", "[::1]"] {
        assert_eq!(metadata(host).0, 200, "{host}");
    }

    let output = forge(&["serve", "--allow-origin", "app.example.com/"]);
    assert_refused(&output, "is not an origin");
    let output = forge(&["serve", "--allow-host", "https://forge.example.com"]);
    assert_refused(&output, "is not a host name");
}

#[test]
fn http_requests_that_cannot_be_served_get_clear_errors() {
    let server = Server::start(&[
        "--max-sessions",
        "2",
        "--rate",
        "3",
        "--max-request-bytes",
        "2000",
    ]);
    let (status, body) = post_text(&server.url("/reset"), "{\"task_id\": ");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "bad_json");
    let (status, body) = post(&server.url("/reset"), &json!({"task_id": "no-such-task"}));
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    // A misspelt option would reset into another task than the one meant.
    let (status, body) = post(&server.url("/reset"), &json!({"taskid": "shop-05"}));
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("did you mean `task_id`?"),
        "{body}"
    );
    // So would another server's name for one.
    let (status, body) = post(&server.url("/reset"), &json!({"task": "shop-05"}));
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("did you mean `task_id`?"),
        "{body}"
    );
    // A policy name that would split `forge show`'s header line.
    let (status, body) = post(&server.url("/reset"), &json!({"policy": "my\nmodel"}));
    assert_eq!((status, body["code"].as_str()), (422, Some("bad_request")));
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("a policy name has 1 to 128"),
        "{body}"
    );
    let (status, body) = post(&server.url("/reset"), &json!({"env": "nowhere"}));
    assert_eq!(status, 404);
    assert!(
        body["detail"].as_str().unwrap().contains("serving: shop"),
        "{body}"
    );

    let (status, opened) = post(&server.url("/reset"), &json!({"task_id": "shop-01"}));
    assert_eq!(status, 200, "{opened}");
    let id = opened["observation"]["metadata"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = post(&server.url("/step"), &json!({"episode_id": id}));
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_action"))
    );
    // A session named by something other than its id says so.
    let numbered = json!({"episode_id": 5, "action": {"type": "list_tools"}});
    let (status, body) = post(&server.url("/step"), &numbered);
    assert_eq!(status, 422);
    assert_eq!(
        (&body["detail"][0]["loc"], &body["detail"][0]["msg"]),
        (
            &json!(["body", "episode_id"]),
            &json!("Input should be a valid string")
        ),
        "{body}"
    );
    // A null id is none, as OpenEnv has it: the other name is read.
    let null = json!({"episode_id": null, "session_id": id, "action": {"type": "list_tools"}});
    assert_eq!(post(&server.url("/step"), &null).0, 200);
    let bare = json!({"episode_id": id, "action": "list_tools"});
    let (status, body) = post(&server.url("/step"), &bare);
    assert_eq!(status, 422);
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .is_some_and(|msg| msg.contains("an action is an object")),
        "{body}"
    );
    // A key OpenEnv's actions do not have is refused: ignored, it would
    // spend the turn on a call without its arguments.
    let misnamed = json!({"episode_id": id, "action": {"type": "call_tool", "tool_name": "get_user", "args": {"user_id": "u1"}}});
    let steps = || get(&server.url(&format!("/state?episode_id={id}"))).1["step_count"].clone();
    let before = steps();
    let (status, body) = post(&server.url("/step"), &misnamed);
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["detail"][0]["type"], "extra_forbidden", "{body}");
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("the call's arguments go in `arguments`"),
        "{body}"
    );
    assert_eq!(steps(), before);
    // A misspelt key for the session is not taken for no session.
    let (status, body) = get(&server.url(&format!("/state?episodeid={id}")));
    assert_eq!((status, body["code"].as_str()), (422, Some("bad_request")));
    // Nor is an id no session can have looked up, on any route.
    let forged = json!({"episode_id": "x\nFAKE LOG LINE", "action": {"type": "list_tools"}});
    let (status, body) = post(&server.url("/step"), &forged);
    assert_eq!((status, body["code"].as_str()), (422, Some("bad_request")));
    // Arguments nested deeper than a record can hold (and be read back)
    // are refused before the episode records them.
    let deep = (0..70).fold(json!(1), |inner, _| json!([inner]));
    let action = json!({"type": "call_tool", "tool_name": "get_order", "arguments": {"id": deep}});
    let (status, body) = post(
        &server.url("/step"),
        &json!({"episode_id": id, "action": action}),
    );
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string()
            .contains("the arguments nest 71 levels deep; at most 64 are taken"),
        "{body}"
    );
    let (status, body) = post(
        &server.url("/step"),
        &json!({"episode_id": "nobody", "action": {"type": "list_tools"}}),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("unknown_session"))
    );
    let huge = json!({"episode_id": id, "action": {"type": "call_tool", "tool_name": "get_order", "arguments": {"order_id": "x".repeat(5000)}}});
    let (status, body) = post(&server.url("/step"), &huge);
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("request_too_large")),
        "{body}"
    );
    assert_eq!(
        body["detail"],
        "the request body is over 2000 bytes (`--max-request-bytes`)"
    );
    let (status, body) = post_text(&server.url("/reset"), "[]");
    assert_eq!(
        (status, body["detail"].as_str()),
        (422, Some("the body must be a JSON object"))
    );
    // A body announced over the limit is refused at once, not awaited.
    let mut announced = TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    announced
        .write_all(
            b"POST /reset HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999\r\n\r\n",
        )
        .unwrap();
    announced
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = [0; 64];
    let read = announced
        .read(&mut head)
        .expect("an answer before the body");
    let head = String::from_utf8_lossy(&head[..read]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    // An id that could forge a log line (a newline, an escape) is refused.
    for id in ["x\n2026-01-01 INFO shut down", "\u{1b}[31mred"] {
        let (status, body) = post(&server.url("/reset"), &json!({"episode_id": id}));
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("bad_request")),
            "{body}"
        );
    }
    // A WebSocket message over the limit cannot be read past: the
    // connection says why it ends, and closes with "message too big".
    let mut ws = server.ws("");
    let answer = ws.send_text("{");
    assert_eq!(answer["data"]["code"], "INVALID_JSON", "{answer}");
    let answer = ws.send(&json!({"type": "step"}));
    assert_eq!(answer["data"]["code"], "VALIDATION_ERROR", "{answer}");
    // A reset's options are an object.
    let answer = ws.send(&json!({"type": "reset", "data": "shop-03"}));
    assert_eq!(answer["data"]["code"], "VALIDATION_ERROR", "{answer}");
    let answer = ws.send_text(&huge.to_string());
    assert_eq!(answer["data"]["code"], "MESSAGE_TOO_BIG", "{answer}");
    let (close, _) = ws.closed();
    assert_eq!(u16::from(close.code), 1009, "{close:?}");
    // A text frame that is not UTF-8 ends it too, with its own code.
    let mut ws = server.ws("");
    let frame = tungstenite::protocol::frame::Frame::message(
        vec![0xff, 0xfe],
        tungstenite::protocol::frame::coding::OpCode::Data(
            tungstenite::protocol::frame::coding::Data::Text,
        ),
        true,
    );
    ws.0.send(tungstenite::Message::Frame(frame)).unwrap();
    let (close, said) = ws.closed();
    assert_eq!(u16::from(close.code), 1007, "{close:?}");
    assert!(said.is_some_and(|text| text.contains("INVALID_UTF8")));

    // Three steps a second, bursting to three.
    let call = json!({"episode_id": id, "action": {"type": "call_tool", "tool_name": "get_order", "arguments": {"order_id": "o1"}}});
    let statuses: Vec<u16> = (0..5)
        .map(|_| post(&server.url("/step"), &call).0)
        .collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    // A refusal says when to ask again: within the third of a second a
    // step takes to come back, so in a second.
    let mut refused = agent()
        .post(&server.url("/step"))
        .content_type("application/json")
        .send(call.to_string())
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body = refused.body_mut().read_to_string().unwrap();
    assert!(body.contains("steps per second; retry in 0."), "{body}");
    let (status, state) = get(&server.url(&format!("/state?episode_id={id}")));
    assert_eq!(status, 200);
    assert_eq!(
        state["step_count"], 3,
        "refused steps are not taken: {state}"
    );

    let (status, _) = post(&server.url("/reset"), &json!({}));
    assert_eq!(status, 200);
    let (status, body) = post(&server.url("/reset"), &json!({}));
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("too_many_sessions")),
        "{body}"
    );
    // Restarting a named session is not a new one (once its rate allows:
    // a reset spends from it too).
    std::thread::sleep(Duration::from_millis(400));
    let (status, _) = post(&server.url("/reset"), &json!({"episode_id": id}));
    assert_eq!(status, 200);

    let (status, body) = get(&server.url("/nowhere"));
    assert_eq!((status, body["detail"].as_str()), (404, Some("Not Found")));
    assert_eq!(body["code"], "not_found");
    let (status, body) = get(&server.url("/reset"));
    assert_eq!(
        (status, body["code"].as_str()),
        (405, Some("method_not_allowed"))
    );
    // MCP's stream of the server's own messages is not offered: refused
    // as any method a route lacks, saying which it takes.
    for method in ["GET", "PATCH"] {
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(server.url("/mcp"))
            .body(())
            .unwrap();
        let mut response = agent().run(request).unwrap();
        assert_eq!(response.status(), 405, "{method}");
        let allow = response.headers().get("allow").unwrap().to_str().unwrap();
        assert_eq!(allow.replace(' ', ""), "POST,DELETE", "{method}");
        let body = response.body_mut().read_to_string().unwrap();
        assert!(
            body.contains("\"code\":\"method_not_allowed\""),
            "{method}: {body}"
        );
    }
    let (status, metrics) = get(&server.url("/metrics"));
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap().to_owned();
    assert!(metrics.contains("forge_sessions 2"), "{metrics}");
    assert!(metrics.contains("forge_refused_requests_total{kind=\"rate_limited\"}"));
    // Over HTTP and the WebSocket alike.
    for (kind, count) in [("bad_json", 2), ("invalid_action", 9)] {
        let line = format!("forge_refused_requests_total{{kind=\"{kind}\"}} {count}");
        assert!(metrics.lines().any(|at| at == line), "{line} in {metrics}");
    }
    assert!(metrics.contains("forge_step_seconds_bucket"));
    for path in ["/health", "/metadata", "/schema", "/openapi.json"] {
        assert_eq!(get(&server.url(path)).0, 200, "{path}");
    }
    // The API description names each route's methods.
    let (_, api) = get(&server.url("/openapi.json"));
    for (path, method) in [("/reset", "post"), ("/state", "get"), ("/mcp", "delete")] {
        assert!(api["paths"][path][method]["summary"].is_string(), "{api}");
    }
}

#[test]
fn clients_that_stall_lose_their_connections_while_others_are_served() {
    let server = Server::start(&["--read-timeout", "1"]);
    let addr = server.base.trim_start_matches("http://").to_owned();
    let connect = || TcpStream::connect(&addr).expect("connecting");
    // Headers that never end, a body that stops coming, and a connection
    // that says nothing (as an idle keep-alive one does).
    let mut headers = connect();
    headers
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let mut body = connect();
    body.write_all(
        b"POST /reset HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .unwrap();
    let silent = connect();
    assert_eq!(get(&server.url("/health")).0, 200);

    let answer = read_until_closed(body);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("the request body stalled: nothing came for 1 s (`--read-timeout`)"),
        "{answer}"
    );
    for stream in [headers, silent] {
        read_until_closed(stream);
    }
    assert_eq!(get(&server.url("/health")).0, 200);
    let (_, metrics) = get(&server.url("/metrics"));
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("forge_refused_requests_total{kind=\"request_timeout\"} 1"),
        "{metrics}"
    );

    // At `--max-connections`, the next client waits to be accepted until a
    // connection closes, and is served then.
    let server = Server::start(&["--max-connections", "1"]);
    let addr = server.base.trim_start_matches("http://").to_owned();
    let holder = TcpStream::connect(&addr).unwrap();
    let mut waiting = TcpStream::connect(&addr).unwrap();
    waiting
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0; 1];
    let early = waiting.read(&mut byte);
    assert!(
        early.as_ref().is_err_and(|err| matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "answered while the only connection was taken: {early:?}"
    );
    drop(holder);
    let answer = read_until_closed(waiting);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// What the server sends on `stream` until it closes the connection (which
/// must happen well within the test's patience).
fn read_until_closed(mut stream: TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(err) => panic!("the server kept the connection open: {err}"),
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn mcp_clients_list_and_call_an_episodes_tools() {
    let server = Server::start(&[]);
    let url = server.url("/mcp?task_id=shop-01");
    let mut response = agent()
        .post(&url)
        .content_type("application/json")
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}).to_string())
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let init: Value = response.body_mut().read_json().unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains(example_task("shop-01")["instruction"].as_str().unwrap())
    );
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("The environment's rules:\n\nCustomer service for an online shop"),
        "{init}"
    );

    let rpc = |message: Value| {
        answer(
            agent()
                .post(server.url("/mcp"))
                .header("mcp-session-id", &session)
                .content_type("application/json")
                .send(message.to_string()),
        )
    };
    let (status, _) = rpc(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(status, 202);
    let (_, listed) = rpc(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .all(|tool| tool["inputSchema"]["type"] == "object")
    );
    assert!(
        tools
            .iter()
            .any(|tool| tool["name"] == "send_message_to_user")
    );
    let (_, called) = rpc(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "find_user_by_email", "arguments": {"email": "ava.chen@example.com"}}}),
    );
    assert_eq!(called["result"]["isError"], false, "{called}");
    assert_eq!(
        called["result"]["content"][0]["text"],
        "{\"user_id\":\"u1\"}"
    );
    let (_, refused) = rpc(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_order", "arguments": {}}}),
    );
    assert_eq!(
        refused["result"]["isError"], true,
        "a tool's refusal is a result"
    );
    let (_, unknown) =
        rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope"}}));
    assert_eq!(unknown["error"]["code"], -32602);
    assert_eq!(
        unknown["error"]["message"],
        "unknown tool `nope` (the call counts as a turn of the episode)",
        "{unknown}"
    );
    // Another episode is this transport's to start: a session ends first.
    let (_, again) = rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "initialize"}));
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("or `DELETE /mcp`) and initialize a new one"),
        "{again}"
    );
    // A misspelt `arguments` is refused, not a call without them.
    let (_, misspelt) = rpc(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_order", "args": {"order_id": "o1"}}}),
    );
    assert_eq!(misspelt["error"]["code"], -32602, "{misspelt}");
    assert!(
        misspelt["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not `args`"),
        "{misspelt}"
    );
    let (_, missing) = rpc(json!({"jsonrpc": "2.0", "id": 6, "method": "resources/list"}));
    assert_eq!(missing["error"]["code"], -32601);
    // Malformed parameters are protocol errors that take no turn, and say
    // which field is wrong.
    let (_, listed_args) = rpc(
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get_order", "arguments": [1]}}),
    );
    assert_eq!(
        listed_args["error"]["message"], "`arguments`: Input should be a valid dictionary",
        "{listed_args}"
    );
    let deep = (0..70).fold(json!(1), |inner, _| json!([inner]));
    let (_, too_deep) = rpc(
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get_order", "arguments": {"order_id": deep}}}),
    );
    assert!(
        too_deep["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("`arguments`: the arguments nest 71 levels deep"),
        "{too_deep}"
    );
    let (_, options) = rpc(
        json!({"jsonrpc": "2.0", "id": 8, "method": "openenv/session/create", "params": {"task_id": 3}}),
    );
    assert!(
        options["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`task_id`: Input should be a valid string"),
        "{options}"
    );
    let (status, parse) = post_text(&server.url("/mcp"), "[1, 2");
    assert_eq!(
        (status, parse["error"]["code"].as_i64()),
        (200, Some(-32700))
    );
    // A request that needs a session and names none is a bad request.
    let (status, sessionless) = answer(
        agent()
            .post(server.url("/mcp"))
            .content_type("application/json")
            .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string()),
    );
    assert_eq!(status, 400, "{sessionless}");
    assert_eq!(sessionless["error"]["code"], -32600, "{sessionless}");
    // An id no session can have is a bad request, not a session gone.
    let (status, unnamed) = answer(
        agent()
            .post(server.url("/mcp"))
            .header("mcp-session-id", "x".repeat(200))
            .content_type("application/json")
            .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string()),
    );
    assert_eq!(status, 422, "{unnamed}");
    assert_eq!(unnamed["error"]["data"]["code"], "bad_request", "{unnamed}");

    let deleted = agent()
        .delete(server.url("/mcp"))
        .header("mcp-session-id", &session)
        .call()
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let (status, gone) = rpc(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}));
    assert_eq!(status, 404, "a closed session is gone");
    assert_eq!(gone["id"], 7, "answered in JSON-RPC: {gone}");
    assert_eq!(gone["error"]["data"]["code"], "unknown_session");
    assert_eq!(server.sessions(), 0);
    // Every error answer counts as a refused request, by kind.
    let (_, metrics) = get(&server.url("/metrics"));
    let metrics = metrics.as_str().unwrap();
    for (kind, count) in [
        ("invalid_params", 5),
        ("method_not_found", 1),
        ("bad_request", 3),
        ("bad_json", 1),
        ("unknown_session", 1),
    ] {
        let line = format!("forge_refused_requests_total{{kind=\"{kind}\"}} {count}");
        assert!(metrics.lines().any(|at| at == line), "{line} in {metrics}");
    }
}

/// An MCP client's `initialize` request and `initialized` notification.
fn mcp_opening() -> [Value; 2] {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

/// `forge serve --stdio` with `args`, sent `lines` (each ended by a newline)
/// and then the end of its input.
fn mcp_over_stdio(args: &[&str], lines: &[Vec<u8>]) -> std::process::Output {
    let mut child = forge_command()
        .args(["serve", "--stdio"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn mcp_over_stdio_serves_an_episode_at_a_time_and_records_them() {
    let dir = tempfile::tempdir().unwrap();
    let trajectories = dir.path().join("stdio.jsonl");
    let [initialize, initialized] = mcp_opening();
    let mut again = initialize.clone();
    again["id"] = json!(5);
    // The client picks the next episode's task, as a reset's body does
    // (and a misspelt pick is refused, not ignored).
    again["params"]["task_id"] = json!("shop-02");
    let mut misspelt = again.clone();
    misspelt["params"]["taskid"] = json!("shop-03");
    let mut third = again.clone();
    third["id"] = json!(7);
    third["params"]["task_id"] = json!("shop-03");
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            .to_string()
            .into_bytes()
    };
    let output = mcp_over_stdio(
        &[
            "--task",
            "shop-01",
            "--max-request-bytes",
            "400",
            "--out",
            trajectories.to_str().unwrap(),
        ],
        &[
            initialize.to_string().into_bytes(),
            // Lines that are no message are answered with an error, and the
            // conversation goes on: bytes that are not UTF-8, a line over
            // --max-request-bytes, a JSON value that is not an object.
            b"\xff\xfe".to_vec(),
            "x".repeat(1000).into_bytes(),
            b"\"tools/list\"".to_vec(),
            initialized.to_string().into_bytes(),
            call(
                2,
                "find_user_by_email",
                json!({"email": "ava.chen@example.com"}),
            ),
            call(3, "send_message_to_user", json!({"message": "Done."})),
            // Closed, the session makes way for another episode.
            json!({"jsonrpc": "2.0", "id": 4, "method": "openenv/session/close"})
                .to_string()
                .into_bytes(),
            misspelt.to_string().into_bytes(),
            again.to_string().into_bytes(),
            call(6, "send_message_to_user", json!({"message": "Done."})),
            // Once the episode is over, `initialize` opens the next, as an
            // MCP host that knows nothing of closing sessions starts one.
            third.to_string().into_bytes(),
            call(8, "send_message_to_user", json!({"message": "Done."})),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let replies: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("stdout carries only JSON-RPC"))
        .collect();
    assert_eq!(replies.len(), 12, "the notification gets no answer");
    for reply in [
        &replies[6],
        &replies[8],
        &replies[9],
        &replies[10],
        &replies[11],
    ] {
        assert!(reply["result"].is_object(), "{reply}");
    }
    assert_eq!(replies[7]["error"]["code"], -32602, "{}", replies[7]);
    assert!(
        replies[7]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `task_id`"),
        "{}",
        replies[7]
    );
    let episodes = std::fs::read_to_string(&trajectories).unwrap();
    assert_eq!(episodes.lines().count(), 3, "{episodes}");
    let tasks: Vec<Value> = episodes
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["task_id"].clone())
        .collect();
    assert_eq!(
        tasks,
        [json!("shop-01"), json!("shop-02"), json!("shop-03")]
    );
    let codes: Vec<Option<i64>> = replies[1..4]
        .iter()
        .map(|reply| reply["error"]["code"].as_i64())
        .collect();
    assert_eq!(codes, [Some(-32700), Some(-32700), Some(-32600)]);
    assert!(
        replies[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 400 bytes"),
        "{}",
        replies[2]
    );
    let replies = [&replies[0], &replies[4], &replies[5]];
    assert_eq!(
        replies[1]["result"]["content"][0]["text"],
        "{\"user_id\":\"u1\"}"
    );
    let last = replies[2]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(last.starts_with("The episode is over: reward"), "{last}");
    let replay = forge(&["replay", trajectories.to_str().unwrap()]);
    assert!(replay.status.success(), "{}", stderr(&replay));

    // A task that is not there is refused before the conversation starts.
    let output = forge(&["serve", "--stdio", "--task", "nosuch"]);
    assert_refused(&output, "--task: no task `nosuch` here");

    // Stopped as MCP hosts stop their servers, with stdin still open, it
    // records its open episode before it goes.
    let stopped = dir.path().join("stopped.jsonl");
    let mut child = forge_command()
        .args(["serve", "--stdio", "--task", "shop-01", "--out"])
        .arg(&stopped)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
    for message in [initialize.to_string(), initialized.to_string()] {
        writeln!(stdin, "{message}").unwrap();
    }
    let asked = call(
        2,
        "find_user_by_email",
        json!({"email": "ava.chen@example.com"}),
    );
    stdin.write_all(&asked).unwrap();
    stdin.write_all(b"\n").unwrap();
    // The initialize's reply, then the call's: the step is taken.
    for _ in 0..2 {
        replies.next().unwrap().unwrap();
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "forge serve --stdio did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // 128 + SIGTERM, as a process the signal stopped.
    assert_eq!(status.code(), Some(143));
    let episodes = std::fs::read_to_string(&stopped).unwrap();
    let record: Value = serde_json::from_str(episodes.trim()).unwrap();
    assert_eq!(record["termination"], "closed", "{record}");
    assert_eq!(record["steps"].as_array().unwrap().len(), 1);
    drop(stdin);
}

#[test]
fn a_served_agent_asks_the_scripted_user_for_its_own_calls() {
    // τ²-bench telecom: the fix is the user's to make (`toggle_roaming` on
    // their phone); the agent asks for it in a message.
    let dir = tempfile::tempdir().unwrap();
    let trajectories = dir.path().join("telecom.jsonl");
    let say = |id: u64, message: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "send_message_to_user", "arguments": {"message": message}}});
    let [initialize, initialized] = mcp_opening();
    let messages = [
        initialize,
        initialized,
        say(2, "Have you tried turning it off and on again?"),
        say(
            3,
            "Please turn data roaming on: run toggle_roaming() on your phone.",
        ),
        say(4, "You should be all set now."),
    ];
    let output = mcp_over_stdio(
        &[
            "--suite",
            "tau2-bench/telecom",
            "--data",
            "../shared/benchmarks",
            "--task",
            "[mobile_data_issue]user_abroad_roaming_enabled_off[PERSONA:None]",
            "--out",
            trajectories.to_str().unwrap(),
        ],
        &messages.map(|message| message.to_string().into_bytes()),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let texts: Vec<String> = stdout(&output)
        .lines()
        .skip(1)
        .map(|line| {
            let reply: Value = serde_json::from_str(line).unwrap();
            reply["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts[0],
        "I'm not sure what to do on my side. What should I do?"
    );
    assert!(
        texts[1].starts_with("Done. `toggle_roaming()` → "),
        "{}",
        texts[1]
    );
    assert!(
        texts[2].starts_with("The episode is over: reward 1"),
        "{}",
        texts[2]
    );
    let replay = forge(&[
        "replay",
        trajectories.to_str().unwrap(),
        "--suite",
        "tau2-bench/telecom",
        "--data",
        "../shared/benchmarks",
    ]);
    assert!(replay.status.success(), "{}", stderr(&replay));
}

/// A bundle of the hostile test component, with one task.
fn hostile_bundle(dir: &Path) -> std::path::PathBuf {
    let bundle = dir.join("hostile");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("tools.wasm"),
        guest_component("forge-test-hostile"),
    )
    .unwrap();
    std::fs::write(
        bundle.join("manifest.json"),
        json!({"name": "hostile", "description": "tools that misbehave"}).to_string(),
    )
    .unwrap();
    std::fs::write(
        bundle.join("initial_state.json"),
        json!({"notes": {"n1": {"text": "original"}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        bundle.join("tasks.jsonl"),
        format!(
            "{}\n",
            json!({"id": "t1", "instruction": "Keep a note.", "gold_actions": [{"name": "write_note", "arguments": {}}], "required_outputs": []})
        ),
    )
    .unwrap();
    bundle
}

#[test]
fn a_misbehaving_tool_ends_only_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = hostile_bundle(dir.path());
    let server = Server::start(&[bundle.to_str().unwrap()]);
    let mut calm = server.ws("");
    let hostile_base = server.base.clone();
    let hostile = std::thread::spawn(move || {
        let url = format!("{}/ws", hostile_base.replace("http://", "ws://"));
        let (socket, _) = tungstenite::connect(url).unwrap();
        let mut ws = Ws(socket);
        ["spin", "memory_bomb", "panic", "write_then_trap"]
            .map(|tool| ws.call(tool, json!({}))["observation"]["error"].clone())
    });
    for _ in 0..20 {
        let note = ws_call_ok(&mut calm, "write_note");
        assert!(note["key"].as_str().unwrap().starts_with('n'));
    }
    for error in hostile.join().unwrap() {
        assert_eq!(error["error_type"], "execution_error", "{error}");
    }
    // The well-behaved session's writes are its own.
    let notes = ws_call_ok(&mut calm, "write_note");
    assert_eq!(notes["key"], "n22");
    let (_, metrics) = get(&server.url("/metrics"));
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("forge_sandbox_errors_total 4")
    );
}

fn ws_call_ok(ws: &mut Ws, tool: &str) -> Value {
    let answer = ws.call(tool, json!({}));
    assert_eq!(answer["observation"]["error"], Value::Null, "{answer}");
    answer["observation"]["result"]["data"].clone()
}

#[test]
fn dropped_clients_and_idle_sessions_leak_nothing_and_shutdown_records_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let trajectories = dir.path().join("served.jsonl");
    let example = export_example(dir.path());
    let server = Server::start(&[
        example.to_str().unwrap(),
        "--idle-timeout",
        "2",
        "--read-timeout",
        "600",
        "--out",
        trajectories.to_str().unwrap(),
    ]);
    // The file is the server's while it runs: another writer would tear
    // its lines.
    let appended = forge(&[
        "run",
        "--env",
        example.to_str().unwrap(),
        "--tasks",
        "shop-01",
        "--append",
        "--out",
        trajectories.to_str().unwrap(),
    ]);
    assert_refused(&appended, "served.jsonl is in use by another forge process");
    // Clients that vanish mid-episode, without a close frame.
    let sockets: Vec<Ws> = (0..20)
        .map(|_| {
            let mut ws = server.ws("");
            ws.call("get_product", json!({"product_id": "p1"}));
            ws
        })
        .collect();
    assert_eq!(server.sessions(), 20);
    for ws in sockets {
        let stream = ws.0.get_ref();
        if let tungstenite::stream::MaybeTlsStream::Plain(stream) = stream {
            stream.shutdown(std::net::Shutdown::Both).unwrap();
        }
    }
    wait_until("dropped connections end their sessions", || {
        server.sessions() == 0
    });
    // A client gone without a close frame was refused nothing.
    let (_, metrics) = get(&server.url("/metrics"));
    assert!(
        !metrics.as_str().unwrap().contains("kind=\"bad_request\""),
        "{metrics}"
    );
    let mut silent = server.ws("");
    // HTTP sessions nobody closes expire.
    let (_, opened) = post(&server.url("/reset"), &json!({"task_id": "shop-03"}));
    let id = opened["observation"]["metadata"]["session_id"]
        .as_str()
        .unwrap();
    post(
        &server.url("/step"),
        &json!({"episode_id": id, "action": {"type": "list_tools"}}),
    );
    wait_until("the idle session expires", || server.sessions() == 0);
    // So does a connection that never says anything.
    if let tungstenite::stream::MaybeTlsStream::Plain(stream) = silent.0.get_ref() {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
    }
    loop {
        match silent.0.read() {
            Ok(tungstenite::Message::Close(frame)) => {
                let reason = frame.map(|frame| frame.reason.to_string());
                assert_eq!(reason.as_deref(), Some("idle for 2 s (--idle-timeout)"));
                break;
            }
            Ok(_) => continue,
            Err(tungstenite::Error::Io(err)) => panic!("the silent connection stays open: {err}"),
            Err(_) => break,
        }
    }
    // An episode still open at shutdown is judged and recorded.
    let (_, opened) = post(&server.url("/reset"), &json!({"task_id": "shop-04"}));
    let id = opened["observation"]["metadata"]["session_id"]
        .as_str()
        .unwrap();
    post(
        &server.url("/step"),
        &json!({"episode_id": id, "action": {"type": "call_tool", "tool_name": "get_user", "arguments": {"user_id": "u1"}}}),
    );
    // A client stalled mid-request holds the shutdown up only for its
    // grace, not for the read timeout.
    let mut stalled = TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    stalled
        .write_all(b"POST /reset HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    // A WebSocket is told the server is going away.
    let mut watcher = server.ws("");
    // Accepted and being read by now.
    std::thread::sleep(Duration::from_millis(500));
    let stopping = Instant::now();
    assert!(server.terminate().success());
    let (close, _) = watcher.closed();
    assert_eq!(u16::from(close.code), 1001, "{close:?}");
    assert_eq!(close.reason.as_str(), "the server is shutting down");
    assert!(
        stopping.elapsed() < Duration::from_secs(60),
        "{:?}",
        stopping.elapsed()
    );
    let records: Vec<Value> = std::fs::read_to_string(&trajectories)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // Twenty dropped, and the idle one: the agent never acted in it.
    assert_eq!(records.len(), 21);
    assert!(
        records
            .iter()
            .all(|record| record["termination"] == "closed")
    );
    let last = records.last().unwrap();
    assert_eq!(last["task_id"], "shop-04");
    assert_eq!(last["steps"].as_array().unwrap().len(), 1);
    assert_replays(&trajectories, &example);
}

/// Connections let in up to `--max-sessions` all open their sessions however
/// their first resets interleave: the place a session takes is never counted
/// twice (as the session, and as its connection's promise) in between.
#[test]
fn a_full_house_of_websockets_resets_at_once() {
    const PLACES: usize = 8;
    let server = Server::start(&["--max-sessions", &PLACES.to_string()]);
    for round in 0..4 {
        let sockets: Vec<Ws> = (0..PLACES).map(|_| server.ws("")).collect();
        let start = std::sync::Barrier::new(PLACES);
        let answers: Vec<Value> = std::thread::scope(|scope| {
            let resets: Vec<_> = sockets
                .into_iter()
                .map(|mut ws| {
                    let start = &start;
                    scope.spawn(move || {
                        start.wait();
                        ws.send(&json!({"type": "reset", "data": {}}))
                    })
                })
                .collect();
            resets
                .into_iter()
                .map(|reset| reset.join().expect("a reset thread"))
                .collect()
        });
        for answer in answers {
            assert_eq!(answer["type"], "observation", "round {round}: {answer}");
        }
        wait_until("the connections' sessions close", || server.sessions() == 0);
    }
}

/// A WebSocket's session opens with its first reset (the reset's task, in
/// turn from the first); resets spend from the session's rate; a finished
/// session nothing holds gives way to a new one on a full server; a client
/// attached to a session it does not own cannot bring it back once closed.
#[test]
fn sessions_open_on_reset_pay_for_resets_and_give_way_once_finished() {
    let server = Server::start(&["--rate", "3", "--max-sessions", "1", "--max-turns", "1"]);
    let metric = |line: &str| {
        let (_, metrics) = get(&server.url("/metrics"));
        metrics.as_str().unwrap().lines().any(|at| at == line)
    };
    let mut ws = server.ws("");
    assert_eq!(server.sessions(), 0, "no episode before the reset");
    // But the connection holds its place.
    let mut second = server.ws("");
    let refused = match second.0.read().expect("an answer") {
        tungstenite::Message::Text(text) => serde_json::from_str::<Value>(text.as_str()).unwrap(),
        other => panic!("not an error frame: {other:?}"),
    };
    assert_eq!(refused["data"]["code"], "CAPACITY_REACHED", "{refused}");
    let (close, _) = second.closed();
    assert_eq!(u16::from(close.code), 1013, "try again later: {close:?}");
    // Nor does an HTTP reset take it.
    let (status, body) = post(&server.url("/reset"), &json!({}));
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("too_many_sessions")),
        "{body}"
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("0 open, 1 promised to connections yet to reset"),
        "{body}"
    );
    let reset = json!({"type": "reset", "data": {}});
    let first = ws.send(&reset);
    assert_eq!(
        first["data"]["observation"]["metadata"]["task_id"],
        "shop-01"
    );
    assert_eq!(server.sessions(), 1);
    assert!(metric("forge_sessions_opened_total 1"));
    let limited = (0..10)
        .map(|_| ws.send(&reset))
        .find(|answer| answer["type"] == "error")
        .expect("resets run out of the session's rate");
    assert_eq!(limited["data"]["reason"], "rate_limited", "{limited}");
    // The WebSocket holds the only place, finished or not.
    let (status, _) = post(&server.url("/reset"), &json!({}));
    assert_eq!(status, 503);
    drop(ws);
    wait_until("the connection's session closes", || server.sessions() == 0);

    // An HTTP episode that is over gives its place to the next, over a
    // WebSocket or plain HTTP.
    let finished_http_episode = || {
        let (status, opened) = post(&server.url("/reset"), &json!({}));
        assert_eq!(status, 200);
        let id = opened["observation"]["metadata"]["session_id"].clone();
        let (_, done) = post(
            &server.url("/step"),
            &json!({"episode_id": id, "action": {"type": "call_tool", "tool_name": "get_user", "arguments": {"user_id": "u1"}}}),
        );
        assert_eq!(done["done"], true, "{done}");
        // However fast it is asked, an ended episode is said to be over.
        for _ in 0..5 {
            let (status, over) = post(
                &server.url("/step"),
                &json!({"episode_id": id, "action": {"type": "call_tool", "tool_name": "get_user", "arguments": {"user_id": "u1"}}}),
            );
            assert_eq!(
                (status, over["code"].as_str()),
                (409, Some("episode_over")),
                "{over}"
            );
        }
    };
    finished_http_episode();
    let mut ws = server.ws("");
    // The finished session's place is promised to the connection: an HTTP
    // reset does not take it.
    let (status, body) = post(&server.url("/reset"), &json!({}));
    assert_eq!(status, 503, "{body}");
    let opened = ws.send(&reset);
    assert_eq!(opened["type"], "observation", "{opened}");
    assert!(metric("forge_sessions_ended_total{kind=\"evicted\"} 1"));
    drop(ws);
    wait_until("the connection's session closes", || server.sessions() == 0);
    finished_http_episode();
    let (status, next) = post(&server.url("/reset"), &json!({}));
    assert_eq!(status, 200, "{next}");
    assert_eq!(server.sessions(), 1);
    assert!(metric("forge_sessions_ended_total{kind=\"evicted\"} 2"));

    // Attached to a session made over MCP, then closed there: a reset
    // does not bring it back.
    let rpc = |method: &str, params: Value| {
        post(
            &server.url("/mcp"),
            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .1
    };
    let next = next["observation"]["metadata"]["session_id"]
        .as_str()
        .unwrap();
    rpc("openenv/session/close", json!({"session_id": next}));
    let created = rpc("openenv/session/create", json!({}));
    let attached = created["result"]["session_id"].as_str().unwrap().to_owned();
    let mut ws = server.ws(&format!("?session_id={attached}"));
    rpc("openenv/session/close", json!({"session_id": attached}));
    let refused = ws.send(&reset);
    assert_eq!(refused["data"]["code"], "SESSION_ERROR", "{refused}");
    assert_eq!(server.sessions(), 0);
}

/// A session a connection holds is its own: another client's reset, step
/// or close of it is refused, as it would step or end that connection's
/// episode; its own resets go on in it. Asking for the state opens nothing, and a client's
/// close frame is answered.
#[test]
fn a_held_session_is_reset_stepped_and_closed_by_its_connection_alone() {
    let server = Server::start(&[]);
    let mut owner = server.ws("");
    let state = owner.send(&json!({"type": "state"}));
    assert_eq!(state["data"], json!({"episode_id": null, "step_count": 0}));
    assert_eq!(server.sessions(), 0, "asking for the state opens nothing");
    let reset =
        |task: &str| json!({"type": "reset", "data": {"episode_id": "ep-0", "task_id": task}});
    let opened = owner.send(&reset("shop-03"));
    assert_eq!(opened["type"], "observation", "{opened}");
    owner.call("get_user", json!({"user_id": "u1"}));

    let mut other = server.ws("");
    let refused = other.send(&reset("shop-02"));
    assert_eq!(
        (&refused["data"]["code"], &refused["data"]["reason"]),
        (&json!("SESSION_ERROR"), &json!("session_held")),
        "{refused}"
    );
    let (status, body) = post(&server.url("/reset"), &json!({"episode_id": "ep-0"}));
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("session_held")),
        "{body}"
    );
    // Nor may a connection attached to it; nor may anyone else step it or
    // close it, over the WebSocket, HTTP or MCP.
    let mut attached = server.ws("?session_id=ep-0");
    let refused = attached.send(&reset("shop-02"));
    assert_eq!(refused["data"]["reason"], "session_held", "{refused}");
    let action =
        json!({"type": "call_tool", "tool_name": "get_user", "arguments": {"user_id": "u1"}});
    let refused = attached.send(&json!({"type": "step", "data": action}));
    assert_eq!(refused["data"]["reason"], "session_held", "{refused}");
    let (status, body) = post(
        &server.url("/step"),
        &json!({"episode_id": "ep-0", "action": action}),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("session_held")),
        "{body}"
    );
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "get_user", "arguments": {"user_id": "u1"}}});
    let (_, body) = answer(
        agent()
            .post(server.url("/mcp"))
            .header("mcp-session-id", "ep-0")
            .content_type("application/json")
            .send(call.to_string()),
    );
    assert_eq!(body["error"]["data"]["code"], "session_held", "{body}");
    let (status, _) = answer(
        agent()
            .delete(server.url("/mcp"))
            .header("mcp-session-id", "ep-0")
            .call(),
    );
    assert_eq!(status, 409);
    let state = owner.send(&json!({"type": "state"}));
    assert_eq!(
        (&state["data"]["task_id"], &state["data"]["step_count"]),
        (&json!("shop-03"), &json!(1)),
        "the owner's episode goes on: {state}"
    );
    let again = owner.send(&reset("shop-02"));
    assert_eq!(
        again["data"]["observation"]["metadata"]["task_id"],
        "shop-02"
    );

    // Over plain HTTP, which holds nothing, a session is reset by id.
    for _ in 0..2 {
        let (status, body) = post(&server.url("/reset"), &json!({"episode_id": "http-0"}));
        assert_eq!(status, 200, "{body}");
    }
    // Options go in the body: a query would be ignored.
    let (status, body) = post(&server.url("/reset?task_id=shop-07"), &json!({}));
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("bad_request")),
        "{body}"
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("`?task_id=shop-07`"),
        "{body}"
    );

    owner.0.close(None).expect("sending a close frame");
    loop {
        match owner.0.read() {
            Ok(tungstenite::Message::Close(_)) => break,
            Ok(_) => continue,
            Err(err) => panic!("the close was not answered: {err}"),
        }
    }
    wait_until("the owner's session closes", || server.sessions() == 1);
}

/// OpenEnv's and MCP's own Python clients (`tests/python/requirements.txt`,
/// in the virtual environment whose interpreter `FORGE_TEST_PYTHON` names;
/// `.ci/run` makes it) run episodes against `forge serve`.
#[test]
fn python_clients_from_pypi_drive_forge_serve() {
    let Some(python) = std::env::var_os("FORGE_TEST_PYTHON") else {
        eprintln!("skipped: FORGE_TEST_PYTHON names no Python with openenv-core and mcp");
        return;
    };
    let server = Server::start(&[]);
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let tasks =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("env-templates/example/bundle/tasks.jsonl");
    let runs = [
        Command::new(&python)
            .arg(scripts.join("openenv_episode.py"))
            .arg(&server.base)
            .arg(&tasks)
            .output()
            .unwrap(),
        Command::new(&python)
            .arg(scripts.join("mcp_clients.py"))
            .arg(server.url("/mcp"))
            .arg(env!("CARGO_BIN_EXE_forge"))
            .env("FORGE_CACHE_DIR", forge_cache_dir())
            .output()
            .unwrap(),
    ];
    for run in &runs {
        assert!(run.status.success(), "{}{}", stdout(run), stderr(run));
    }
    assert!(
        stdout(&runs[0]).contains("\"reward\": 1.0"),
        "{}",
        stdout(&runs[0])
    );
    assert!(stdout(&runs[1]).contains("\"transport\": \"stdio\""));
}
