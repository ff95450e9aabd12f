//! `forge serve`: environments for agents and trainers elsewhere, over the
//! OpenEnv HTTP/WebSocket API and MCP (Streamable HTTP, or stdio).

use crate::flags::{at_least_one, at_least_one_u64, positive, probability, session_count};
use crate::output;
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use forge_runtime::policy::scripted_user;
use forge_runtime::{Environment, Limits, Sandbox, TrajectoryWriter};
use forge_serve::catalog::Catalog;
use forge_serve::http::HttpOptions;
use forge_serve::origin::{AllowedHosts, AllowedOrigins, parse_host, parse_origin};
use forge_serve::{Hub, OpenRequest, SessionLimits, UserFactory};
use forge_suites::Suite;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Environment bundle directories to serve; the built-in example
    /// environment when none is given (and no `--suite`).
    #[arg(value_name = "DIR")]
    envs: Vec<PathBuf>,
    /// A benchmark suite to serve as well, read from `--data`.
    #[arg(long, value_name = "SUITE", requires = "data")]
    suite: Vec<Suite>,
    /// The benchmark data for `--suite`.
    #[arg(long, value_name = "DIR", requires = "suite")]
    data: Option<PathBuf>,
    /// The address to listen on (an IP address, or a name such as
    /// `localhost`); loopback unless you mean to expose it.
    #[arg(long, default_value = "127.0.0.1", value_parser = host)]
    host: std::net::IpAddr,
    /// The port (0: any free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Speak MCP on stdin/stdout instead (an episode at a time, each
    /// opened by `initialize`; `--task` picks its task).
    #[arg(
        long,
        conflicts_with_all = ["host", "port", "max_sessions", "idle_timeout", "read_timeout", "max_connections", "allow_origin", "allow_host"]
    )]
    stdio: bool,
    /// With `--stdio`: the task of every episode (`env/task`, or its id);
    /// without it, each episode takes the next task in turn.
    #[arg(long)]
    task: Option<String>,
    /// Most sessions open at once.
    /// Each takes a sandbox instance's reserved memory, so at most 10000.
    #[arg(long, default_value_t = SessionLimits::default().max_sessions, value_parser = session_count)]
    max_sessions: usize,
    /// Seconds without a request after which a session is closed.
    #[arg(long, default_value_t = SessionLimits::default().idle_timeout.as_secs(), value_parser = at_least_one_u64)]
    idle_timeout: u64,
    /// Most agent actions per second per session.
    #[arg(long, default_value_t = SessionLimits::default().steps_per_second, value_parser = positive, allow_negative_numbers = true)]
    rate: f64,
    /// Largest request body, WebSocket message or `--stdio` line, in bytes.
    #[arg(long, default_value_t = HttpOptions::default().max_request_bytes, value_parser = at_least_one)]
    max_request_bytes: usize,
    /// Seconds a client may take to send a request's headers, or pause
    /// while sending its body, before its connection is closed; an idle
    /// keep-alive connection closes after it too.
    #[arg(long, default_value_t = HttpOptions::default().read_timeout.as_secs(), value_parser = at_least_one_u64)]
    read_timeout: u64,
    /// Most HTTP connections served at once; more wait to be accepted. A
    /// WebSocket leaves the count once upgraded (`--max-sessions` caps those).
    #[arg(long, default_value_t = HttpOptions::default().max_connections, value_parser = at_least_one)]
    max_connections: usize,
    /// A web page's origin (`https://app.example.com`) whose browsers may
    /// use the server, besides this machine's pages; `*` allows every page.
    /// Others are refused (403), against DNS rebinding; agents and trainers
    /// send no origin and are always served.
    #[arg(long, value_name = "ORIGIN", value_parser = parse_origin)]
    allow_origin: Vec<String>,
    /// A name requests may address the server by (`Host`), besides this
    /// machine's (`localhost`, loopback addresses), as for a proxy that
    /// passes its own name on; `*` allows any. On loopback others are
    /// refused (403), against DNS rebinding; listening beyond it, any name
    /// is served unless some are given.
    #[arg(long, value_name = "NAME", value_parser = parse_host)]
    allow_host: Vec<String>,
    /// Most agent actions per episode.
    #[arg(long, default_value_t = SessionLimits::default().max_turns, value_parser = at_least_one)]
    max_turns: usize,
    /// Append every ended episode's trajectory to this JSONL file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The probability that the scripted user misstates or withholds one of
    /// its facts (see `forge run --user-instability`).
    #[arg(long, default_value_t = 0.0, value_parser = probability, allow_negative_numbers = true)]
    user_instability: f64,
    /// Log lines as JSON objects (for log collectors) or as text.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    if args.task.is_some() && !args.stdio {
        // Over HTTP each reset picks its own task.
        bail!("--task picks the task of --stdio's episodes; over HTTP, each reset names its task");
    }
    init_logs(args.log_format);
    let limits = SessionLimits {
        max_sessions: args.max_sessions,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        steps_per_second: args.rate,
        max_turns: args.max_turns,
        ..SessionLimits::default()
    };
    let sandbox = sandbox_for(args.max_sessions)?;
    let envs = crate::envs::load_all(&args.envs, &args.suite, args.data.as_deref(), &sandbox)?;
    crate::agents::refuse_needless_instability(
        args.user_instability,
        envs.iter().flat_map(Environment::tasks),
        "served",
    )?;
    let recorder = args
        .out
        .as_deref()
        .map(|path| match path.exists() {
            true => {
                super::refuse_other_environments(path, &envs.iter().collect::<Vec<_>>())?;
                super::append_trajectories(path)
            }
            false => TrajectoryWriter::create(path),
        })
        .transpose()?;
    let hub = hub_for(envs, limits, args.user_instability, recorder)?;
    if args.stdio {
        if let Some(task) = &args.task {
            hub.catalog()
                .find(None, Some(task), 0)
                .map_err(anyhow::Error::from)
                .context("--task")?;
        }
        let open = OpenRequest {
            task_id: args.task.clone(),
            held: true,
            ..OpenRequest::default()
        };
        // Stopped (as MCP hosts stop their servers) while it waits on
        // stdin, it records the open episodes before it goes.
        let hub = Arc::new(hub);
        let stopped = Arc::clone(&hub);
        crate::shutdown::on_signal(move |_| {
            stopped.shut_down();
            std::process::exit(i32::from(crate::shutdown::stopped_status()));
        })?;
        let stdin = std::io::stdin().lock();
        let stdout = std::io::stdout().lock();
        forge_serve::stdio::serve(&hub, &open, stdin, stdout, args.max_request_bytes)?;
        return Ok(ExitCode::SUCCESS);
    }
    runtime(IDLE_THREADS_KEPT)?.block_on(listen(
        Arc::new(hub),
        SocketAddr::new(args.host, args.port),
        HttpOptions {
            max_request_bytes: args.max_request_bytes,
            read_timeout: Duration::from_secs(args.read_timeout),
            max_connections: args.max_connections,
            allowed_origins: AllowedOrigins::from_flags(args.allow_origin),
            allowed_hosts: AllowedHosts::from_flags(args.host, args.allow_host),
            ..HttpOptions::default()
        },
        args.log_format,
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The async runtime of a server. Tool calls run on its blocking pool, whose
/// threads are capped: enough that calls stopped only by the wall-clock
/// backstop cannot starve the others, few enough that a burst of requests
/// does not leave hundreds of idle threads (and their allocator arenas)
/// behind. An idle one exits after `idle_threads_kept`, handing back the
/// memory its allocator heap holds (freed there by no other thread).
pub fn runtime(idle_threads_kept: Duration) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(idle_threads_kept)
        .build()
        .context("starting the async runtime")
}

/// How long a server's idle blocking threads are kept for the next burst.
const IDLE_THREADS_KEPT: Duration = Duration::from_secs(10);

const BLOCKING_THREADS: usize = 64;

/// A sandbox whose instance pool holds `max_sessions` episodes (one
/// instance each), the episodes being judged after their sessions ended
/// (one per blocking thread at most), and a few more for loading.
pub fn sandbox_for(max_sessions: usize) -> Result<Sandbox> {
    let instances = max_sessions.saturating_add(BLOCKING_THREADS + 16);
    Sandbox::new(
        Limits {
            instances: u32::try_from(instances).unwrap_or(u32::MAX),
            ..Limits::default()
        },
        None,
    )
    .with_context(|| format!("starting the sandbox for {max_sessions} sessions (`--max-sessions`)"))
}

/// The sessions of a server of `envs`, with scripted users unreliable with
/// `instability`.
pub fn hub_for(
    envs: Vec<Environment>,
    limits: SessionLimits,
    instability: f64,
    recorder: Option<TrajectoryWriter>,
) -> Result<Hub> {
    let catalog = Catalog::new(envs)?;
    forge_serve::mcp::check_catalog(&catalog)?;
    Ok(Hub::new(catalog, limits, users(instability), recorder))
}

async fn listen(
    hub: Arc<Hub>,
    addr: SocketAddr,
    options: HttpOptions,
    log_format: LogFormat,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr()?;
    let envs: Vec<String> = hub
        .catalog()
        .envs()
        .iter()
        .map(|env| {
            format!(
                "{} ({})",
                env.name(),
                output::count(env.tasks().len(), "task")
            )
        })
        .collect();
    // Which `Host` names it answers to: any, where listening beyond
    // loopback without --allow-host, which a laptop's user may not expect.
    let hosts = match &options.allowed_hosts {
        AllowedHosts::Any => "any name (--allow-host limits them)".to_owned(),
        hosts => hosts.to_string(),
    };
    // Whatever the log filter: with port 0, the address is found only here.
    match log_format {
        LogFormat::Text => eprintln!(
            "forge serve: listening on http://{bound} (answering to {hosts}) — {}; OpenEnv at /ws (and /reset, /step, /state), MCP at /mcp, /healthz, /metrics",
            envs.join(", ")
        ),
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "message": "listening",
                "address": format!("http://{bound}"),
                "hosts": options.allowed_hosts.to_string(),
                "environments": envs,
                "routes": ["/ws", "/reset", "/step", "/state", "/mcp", "/healthz", "/metrics"],
            })
        ),
    }
    let stopped = async {
        crate::shutdown::signal().await;
        let first = std::time::Instant::now();
        tracing::info!(
            "Ctrl-C or SIGTERM again stops at once, cutting the connections still open and \
             episodes not yet recorded"
        );
        tokio::spawn(async move {
            crate::shutdown::another_signal(first).await;
            crate::shutdown::stop_at_once();
        });
    };
    forge_serve::http::serve(hub, listener, options, stopped).await
}

/// The scripted user of each episode, unreliable with `instability`.
fn users(instability: f64) -> UserFactory {
    Arc::new(move |task, seed| scripted_user(&task.task, instability, seed))
}

/// Logs to stderr (stdout may carry MCP), filtered by `FORGE_LOG`
/// (default `info`).
fn init_logs(format: LogFormat) {
    let filter = match std::env::var("FORGE_LOG") {
        Ok(text) => tracing_subscriber::EnvFilter::try_new(&text).unwrap_or_else(|err| {
            eprintln!("warning: FORGE_LOG `{text}` is no log filter ({err}): logging at `info`");
            tracing_subscriber::EnvFilter::new("info")
        }),
        Err(_) => tracing_subscriber::EnvFilter::new("info"),
    };
    // Colours only for a terminal: a log written to a file stays plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// `--host`: an IP address, or a name this machine resolves (`localhost`).
fn host(text: &str) -> Result<std::net::IpAddr, String> {
    use std::net::ToSocketAddrs;
    // An address literal resolves to itself, without a lookup.
    (text, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .map(|address| address.ip())
        .ok_or_else(|| {
            format!("`{text}` is neither an IP address nor a name this machine resolves")
        })
}
