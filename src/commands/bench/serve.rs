//! `forge bench serve`: a load test of `forge serve` on loopback.
//!
//! Opens `--sessions` OpenEnv WebSocket sessions and holds them all, then for
//! `--seconds` takes steps in them with `--concurrency` requests in flight
//! (as a trainer's rollout workers do: most sessions wait on the model most
//! of the time), then makes the clients leave — half with a close frame, half
//! by dropping the connection — and waits for its sessions to be gone (a
//! shared server's other sessions are not counted). Without `--url` the
//! server runs in this process on the built-in example environment, and its
//! memory is measured too.

use super::{Row, micros, percentile, report};
use crate::commands::serve::{hub_for, runtime, sandbox_for};
use crate::flags::{at_least_one, at_least_one_u64, seconds, session_count};
use anyhow::{Context, Result, bail};
use clap::Args;
use forge_serve::SessionLimits;
use futures_util::{SinkExt, StreamExt, stream};
use serde_json::{Value, json};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

#[derive(Args, Debug)]
pub struct ServeBenchArgs {
    /// Sessions to open and hold at once (at most 10000).
    #[arg(long, default_value_t = 2000, value_parser = session_count)]
    sessions: usize,
    /// Requests in flight at once (at most one per session).
    #[arg(long, default_value_t = 32, value_parser = at_least_one)]
    concurrency: usize,
    /// Seconds of steps.
    #[arg(long, default_value_t = 10.0, value_parser = seconds, allow_negative_numbers = true)]
    seconds: f64,
    /// Load this running server (`http://host:port`) instead of one started
    /// in this process; each step is a turn of its episode, so start it
    /// with a `--max-turns` above the steps a session takes, and a `--rate`
    /// above the steps a session takes per second. Answers that are errors
    /// (refusals, a tool's own errors) are counted apart from the steps.
    #[arg(long, value_name = "URL", value_parser = server_url)]
    url: Option<String>,
    /// The step: a tool of the served environment…
    #[arg(long, default_value = "get_product")]
    tool: String,
    /// …and its arguments.
    #[arg(long, default_value = r#"{"product_id": "p1"}"#)]
    arguments: String,
    /// Times to open the sessions, step them and make the clients leave:
    /// memory that keeps growing from round to round would be a leak (the
    /// first round warms the allocator up; from three, its growth per
    /// round after the first is measured).
    #[arg(long, default_value_t = 3, value_parser = at_least_one_u64)]
    rounds: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What one session's steps measured.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: u64,
    /// The first error answer, to show when errors swamp the measurement.
    first_error: Option<Value>,
}

/// A `forge serve` address: plain HTTP (the server speaks no TLS), a host
/// and a port.
fn server_url(text: &str) -> Result<String, String> {
    match text.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(text.to_owned()),
        _ => Err(format!(
            "`{text}` is not a server's address: give `http://HOST:PORT`"
        )),
    }
}

pub fn run(args: ServeBenchArgs) -> Result<ExitCode> {
    let arguments: Value =
        serde_json::from_str(&args.arguments).context("--arguments is not JSON")?;
    let step = json!({"type": "step", "data": {"type": "call_tool", "tool_name": args.tool, "arguments": arguments}})
        .to_string();
    let runtime = runtime(IDLE_THREADS_KEPT)?;
    let rows = runtime.block_on(load_test(&args, step))?;
    report(&rows, args.json);
    Ok(ExitCode::SUCCESS)
}

/// What one round — open, step, leave — measured.
struct Round {
    held: u64,
    open_seconds: f64,
    tally: Tally,
    step_seconds: f64,
    remaining: u64,
    drain_seconds: f64,
    rss_open: Option<u64>,
    rss_stepped: Option<u64>,
    rss_gone: Option<u64>,
}

async fn load_test(args: &ServeBenchArgs, step: String) -> Result<Vec<Row>> {
    let (base, server) = match &args.url {
        Some(url) => (url.trim_end_matches('/').to_owned(), None),
        None => {
            let (base, stop) = start_server(args.sessions, &args.tool).await?;
            (base, Some(stop))
        }
    };
    let rss_baseline = settled_resident_bytes().await;
    probe(&base, &step).await?;
    let step = Arc::new(step);
    let mut rounds = Vec::new();
    for _ in 0..args.rounds {
        rounds.push(round(args, &base, &step).await?);
    }
    if let Some(stop) = server {
        let _ = stop.send(());
    }

    let mut latencies: Vec<Duration> = rounds
        .iter()
        .flat_map(|round| round.tally.latencies.iter().copied())
        .collect();
    latencies.sort_unstable();
    let errors: u64 = rounds.iter().map(|round| round.tally.errors).sum();
    let answered = latencies.len() as u64 + errors;
    if answered == 0 {
        bail!("no step completed");
    }
    if errors * 2 >= answered {
        let first = rounds
            .iter()
            .find_map(|round| round.tally.first_error.as_ref());
        bail!(
            "{errors} of {answered} answers were errors, so the figures would measure refusals, not tool calls \
             (check --tool and --arguments, and the server's --rate and --max-turns); the first: {}",
            first.map_or_else(String::new, Value::to_string)
        );
    }
    let step_seconds: f64 = rounds.iter().map(|round| round.step_seconds).sum();
    let first = &rounds[0];
    let last = rounds.last().expect("at least one round");
    let ms = |quantile| micros(percentile(&latencies, quantile)) / 1e3;
    let mut rows = vec![
        Row {
            metric: "sessions held at once",
            value: first.held as f64,
            unit: "sessions",
        },
        Row {
            metric: "opening them",
            value: first.open_seconds,
            unit: "s",
        },
        Row {
            metric: "requests in flight",
            // A session takes one request at a time.
            value: args.concurrency.min(args.sessions) as f64,
            unit: "requests",
        },
        Row {
            metric: "steps",
            value: latencies.len() as f64,
            unit: "steps",
        },
        Row {
            metric: "throughput",
            value: latencies.len() as f64 / step_seconds,
            unit: "steps/s",
        },
        Row {
            metric: "latency p50",
            value: ms(0.50),
            unit: "ms",
        },
        Row {
            metric: "latency p90",
            value: ms(0.90),
            unit: "ms",
        },
        Row {
            metric: "latency p99",
            value: ms(0.99),
            unit: "ms",
        },
        Row {
            metric: "latency max",
            value: ms(1.0),
            unit: "ms",
        },
        Row {
            metric: "error answers",
            value: errors as f64,
            unit: "answers",
        },
        Row {
            metric: "sessions after the clients left",
            value: last.remaining as f64,
            unit: "sessions",
        },
        Row {
            metric: "time for them to end",
            value: last.drain_seconds,
            unit: "s",
        },
    ];
    let mib = |bytes: Option<u64>| bytes.map(|bytes| bytes as f64 / (1 << 20) as f64);
    if server_is_here(args)
        && let Some(baseline) = mib(rss_baseline)
    {
        rows.push(Row {
            metric: "resident memory, server up",
            value: baseline,
            unit: "MiB",
        });
        let measured = [
            ("resident memory, sessions open", first.rss_open),
            ("resident memory, after the steps", first.rss_stepped),
            ("resident memory, clients gone", first.rss_gone),
        ];
        rows.extend(measured.into_iter().filter_map(|(metric, bytes)| {
            mib(bytes).map(|value| Row {
                metric,
                value,
                unit: "MiB",
            })
        }));
        if rounds.len() > 1
            && let Some(value) = mib(last.rss_gone)
        {
            rows.push(Row {
                metric: "resident memory, clients gone, last round",
                value,
                unit: "MiB",
            });
        }
        // The first round warms the allocator's heaps up; a leak shows as
        // growth over the rounds after it.
        let after_first: Vec<f64> = rounds[1..]
            .iter()
            .filter_map(|round| mib(round.rss_gone))
            .collect();
        if after_first.len() >= 2 {
            rows.push(Row {
                metric: "resident memory growth per round after the first",
                value: slope(&after_first),
                unit: "MiB/round",
            });
        }
    }
    Ok(rows)
}

fn server_is_here(args: &ServeBenchArgs) -> bool {
    args.url.is_none()
}

/// The WebSocket endpoint of the server at `base`.
fn ws_url(base: &str) -> String {
    format!("{}/ws", base.replacen("http", "ws", 1))
}

/// Takes the step once, on a session of its own, before the load: a
/// `--tool` or `--arguments` the server refuses is named at once rather
/// than after `--seconds` of error answers. The session is gone (or given
/// up on after 5 s) before the load begins, so that no round counts it.
async fn probe(base: &str, step: &str) -> Result<()> {
    let before = sessions(base).await?;
    let mut socket = open_session(&ws_url(base), 0).await?;
    let (answer, _) = exchange(&mut socket, step).await?;
    let _ = socket
        .send(Message::Text(r#"{"type": "close"}"#.into()))
        .await;
    let _ = socket.close(None).await;
    if is_error(&answer) {
        bail!(
            "the server answered the step with an error, so the load would measure refusals, \
             not tool calls (check --tool and --arguments): {answer}"
        );
    }
    let closing = Instant::now();
    while sessions(base).await? > before && closing.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Whether `answer` to a step is no tool call done: refused, a call that
/// was no tool call (an unknown tool, one the sandbox stopped), or one the
/// tool refused (arguments it does not take).
fn is_error(answer: &Value) -> bool {
    let observation = &answer["data"]["observation"];
    answer.get("type").and_then(Value::as_str) != Some("observation")
        || !observation["error"].is_null()
        || observation["result"]["is_error"] == true
}

/// Opens the sessions, steps them, and makes the clients leave.
async fn round(args: &ServeBenchArgs, base: &str, step: &Arc<String>) -> Result<Round> {
    let ws_url = ws_url(base);
    // Sessions other clients hold on a shared server are not this round's.
    let others = sessions(base).await?;
    let ours =
        || async move { Ok::<_, anyhow::Error>(sessions(base).await?.saturating_sub(others)) };
    let opening = Instant::now();
    let sockets: Vec<Socket> = stream::iter(0..args.sessions)
        .map(|seed| open_session(&ws_url, seed))
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let open_seconds = opening.elapsed().as_secs_f64();
    let held = ours().await?;
    let rss_open = resident_bytes();

    // Deal the sessions out to the workers; each steps its own in turn.
    let mut groups: Vec<Vec<Socket>> = (0..args.concurrency).map(|_| Vec::new()).collect();
    for (index, socket) in sockets.into_iter().enumerate() {
        groups[index % args.concurrency].push(socket);
    }
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let stepping = Instant::now();
    let workers: Vec<_> = groups
        .into_iter()
        .filter(|group| !group.is_empty())
        .map(|group| tokio::spawn(work(group, step.clone(), deadline)))
        .collect();
    let mut tally = Tally::default();
    let mut leftover = Vec::new();
    for worker in workers {
        let (sockets, part) = worker.await??;
        tally.latencies.extend(part.latencies);
        tally.errors += part.errors;
        tally.first_error = tally.first_error.or(part.first_error);
        leftover.extend(sockets);
    }
    let step_seconds = stepping.elapsed().as_secs_f64();
    let rss_stepped = resident_bytes();

    // Half leave politely, half vanish.
    let leaving = Instant::now();
    for (index, mut socket) in leftover.into_iter().enumerate() {
        if index % 2 == 0 {
            let _ = socket
                .send(Message::Text(r#"{"type": "close"}"#.into()))
                .await;
            let _ = socket.close(None).await;
        }
    }
    let mut remaining = ours().await?;
    while remaining > 0 && leaving.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        remaining = ours().await?;
    }
    let drain_seconds = leaving.elapsed().as_secs_f64();
    Ok(Round {
        held,
        open_seconds,
        tally,
        step_seconds,
        remaining,
        drain_seconds,
        rss_open,
        rss_stepped,
        rss_gone: settled_resident_bytes().await,
    })
}

/// Starts a server on a free loopback port; returns its base URL and the
/// sender that stops it. A `tool` its environment lacks is refused first:
/// every step would be an error answer, found out only after `--seconds`.
async fn start_server(
    sessions: usize,
    tool: &str,
) -> Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let tool = tool.to_owned();
    let limits = SessionLimits {
        max_sessions: sessions + 8,
        steps_per_second: 1e9,
        // The load test is one long episode per session.
        max_turns: usize::MAX,
        ..SessionLimits::default()
    };
    let hub = tokio::task::spawn_blocking(move || -> Result<forge_serve::Hub> {
        let sandbox = sandbox_for(limits.max_sessions)?;
        let env = forge_runtime::Environment::load(&sandbox, crate::builtin::example_bundle())?;
        let tools: Vec<&str> = env
            .component()
            .tools()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        if !tools.contains(&tool.as_str()) {
            bail!(
                "--tool `{tool}`: the built-in example environment has no such tool (it has {})",
                tools.join(", ")
            );
        }
        hub_for(vec![env], limits, 0.0, None)
    })
    .await??;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(forge_serve::http::serve(
        Arc::new(hub),
        listener,
        forge_serve::http::HttpOptions::default(),
        async {
            let _ = stopped.await;
        },
    ));
    Ok((base, stop))
}

/// Connects and resets, which opens the connection's session on a task
/// chosen by `seed`.
async fn open_session(url: &str, seed: usize) -> Result<Socket> {
    let config = WebSocketConfig::default()
        .read_buffer_size(8 << 10)
        .write_buffer_size(0);
    let connecting = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
    let (mut socket, _) = tokio::time::timeout(ANSWER_WAIT, connecting)
        .await
        .map_err(|_| no_answer(url))?
        .with_context(|| format!("connecting to {url}"))?;
    let reset = json!({"type": "reset", "data": {"seed": seed}}).to_string();
    let (answer, _) = exchange(&mut socket, &reset).await?;
    if answer.get("type").and_then(Value::as_str) != Some("observation") {
        bail!("the server refused a session: {answer}");
    }
    Ok(socket)
}

/// Steps each of `sockets` in turn until `deadline`.
async fn work(
    mut sockets: Vec<Socket>,
    step: Arc<String>,
    deadline: Instant,
) -> Result<(Vec<Socket>, Tally)> {
    let mut tally = Tally::default();
    'steps: loop {
        for socket in &mut sockets {
            if Instant::now() >= deadline {
                break 'steps;
            }
            let (answer, latency) = exchange(socket, &step).await?;
            // An error measures no tool doing its work, so none counts
            // among the steps and their latencies.
            if is_error(&answer) {
                tally.errors += 1;
                tally.first_error.get_or_insert(answer);
            } else {
                tally.latencies.push(latency);
            }
        }
    }
    Ok((sockets, tally))
}

/// How long a connection or an answer is waited for: past it, the server
/// is stuck, is no forge server, or cannot take more connections.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

fn no_answer(url: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "no answer from {url} in {} s: the server is stuck or no forge server, or a side is out \
         of file descriptors (each session holds one on each side: see `ulimit -n`, or pass \
         fewer --sessions)",
        ANSWER_WAIT.as_secs()
    )
}

/// Sends one frame and waits for the answer.
async fn exchange(socket: &mut Socket, frame: &str) -> Result<(Value, Duration)> {
    let sent = Instant::now();
    let answered = async {
        socket.send(Message::Text(frame.into())).await?;
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    return Ok((serde_json::from_str(text.as_str())?, sent.elapsed()));
                }
                Some(Ok(Message::Close(_))) | None => bail!("the server closed a session"),
                Some(Ok(_)) => continue,
                Some(Err(err)) => return Err(err.into()),
            }
        }
    };
    tokio::time::timeout(ANSWER_WAIT, answered)
        .await
        .map_err(|_| no_answer("the server"))?
}

/// The server's open sessions (`/healthz`).
async fn sessions(base: &str) -> Result<u64> {
    let url = format!("{base}/healthz");
    let asked = url.clone();
    let health: Value = tokio::task::spawn_blocking(move || -> Result<Value> {
        Ok(ureq::get(&url).call()?.body_mut().read_json()?)
    })
    .await?
    .with_context(|| {
        format!("asking {asked} for the open sessions (--url is a forge server's base URL, as http://127.0.0.1:8000)")
    })?;
    health["sessions"]
        .as_u64()
        .context("/healthz has no session count")
}

/// How long the bench's idle blocking threads are kept: a thread's
/// allocator heap keeps what other threads freed in it (the sessions'
/// episodes, judged there) until it exits, which would count as the
/// server's memory.
const IDLE_THREADS_KEPT: Duration = Duration::from_millis(200);

/// This process's resident memory once it stops falling: the work left
/// (ended episodes being judged) done, and idle blocking threads gone,
/// having handed back what their heaps held (or after 8 s).
async fn settled_resident_bytes() -> Option<u64> {
    let mut last = resident_bytes()?;
    for _ in 0..20 {
        tokio::time::sleep(IDLE_THREADS_KEPT * 2).await;
        let now = resident_bytes()?;
        // Within a percent of the last reading: settled.
        if now + now / 100 >= last {
            return Some(now.min(last));
        }
        last = now;
    }
    Some(last)
}

/// The least-squares slope of `values` against their index.
fn slope(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = values.iter().sum::<f64>() / n;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (x, y) in values.iter().enumerate() {
        let dx = x as f64 - mean_x;
        covariance += dx * (y - mean_y);
        variance += dx * dx;
    }
    covariance / variance
}

/// This process's resident memory (Linux).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
