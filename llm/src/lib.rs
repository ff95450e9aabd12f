//! A client for OpenAI-compatible chat-completion endpoints (OpenAI, vLLM,
//! llama.cpp's server, SGLang, …), used wherever Forge asks a language model
//! for something: synthesis stages, remote models as the policy or the
//! simulated user ([`agents`]), and a judge of NL assertions ([`judge`]).
//!
//! Blocking, with a timeout per request and bounded retries with exponential
//! backoff (or the wait an endpoint's `Retry-After` asks for) on what
//! retrying can fix (connection errors, rate limits, servers' failures), and at most
//! `max_in_flight` requests out at once. A timeout is not retried: a reply
//! that took longer than the limit would take as long again. A refused
//! connection to an endpoint that has not answered yet is retried for a
//! few seconds only: nothing listens there, or a server is starting. Token usage is
//! summed for the caller to report.

pub mod agents;
pub mod judge;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How the endpoint is asked to sample a reply. The default is greedy
/// (temperature 0), as a judge and synthesis always ask.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sampling {
    pub temperature: f64,
    /// The nucleus mass; the endpoint's own default (1) where none.
    pub top_p: Option<f64>,
    /// Sent where sampling is random (temperature above 0): endpoints that
    /// take a seed (vLLM, SGLang, llama.cpp's server; OpenAI at its best
    /// effort) then sample a request again as they did. See
    /// [`Sampling::at_turn`].
    pub seed: Option<u64>,
}

impl Sampling {
    /// The sampling of the request at `turn` (its transcript's length) of
    /// an episode seeded `seed`: the seed derived from both, as episodes'
    /// seeds are from a run's ([`forge_runtime::episode_seed`]), so that
    /// each turn draws afresh while the episode as a whole can be drawn
    /// again.
    pub fn at_turn(self, seed: u64, turn: usize) -> Self {
        Self {
            seed: Some(forge_runtime::episode_seed(seed, "request", turn as u64)),
            ..self
        }
    }

    /// Writes these settings into a request `body`. A seed is sent as a
    /// non-negative 64-bit integer, which every server's schema takes.
    fn write(&self, body: &mut Value) {
        body["temperature"] = self.temperature.into();
        if let Some(top_p) = self.top_p {
            body["top_p"] = top_p.into();
        }
        if let Some(seed) = self.seed.filter(|_| self.temperature > 0.0) {
            body["seed"] = (seed & i64::MAX as u64).into();
        }
    }
}

/// Where and how to reach a model.
#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// The API base, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub model: String,
    /// Sent as a bearer token when present.
    pub api_key: Option<String>,
    /// The environment variable the key is read from, which a refusal of
    /// the request as unauthorised names.
    pub api_key_env: Option<String>,
    /// The longest a request may take, its reply included.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first retry waits this long; each further retry twice as long.
    pub backoff: Duration,
    /// Most requests in flight at once; more wait their turn (episodes run
    /// in parallel share one client).
    pub max_in_flight: usize,
}

impl ChatConfig {
    /// Defaults patient enough for a rate limit of requests per minute:
    /// six retries wait about a minute in all.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            api_key_env: None,
            timeout: DEFAULT_TIMEOUT,
            max_retries: 6,
            backoff: Duration::from_secs(1),
            max_in_flight: 8,
        }
    }

    /// The same config with the API key read from the environment variable
    /// `var` (none when it is unset or empty).
    pub fn key_from_env(self, var: &str) -> Self {
        Self {
            api_key: std::env::var(var).ok().filter(|key| !key.is_empty()),
            api_key_env: Some(var.to_owned()),
            ..self
        }
    }

    /// Refuses an endpoint no request could reach: no model name, or a
    /// base URL that is not `http://` or `https://` with a host (a refusal
    /// of a config with a model is one of its URL).
    pub fn check(&self) -> Result<(), ChatError> {
        if self.model.trim().is_empty() {
            return Err(ChatError::Endpoint(format!(
                "no model named to ask at {}",
                self.base_url
            )));
        }
        if let Err(problem) = reachable(&self.completions_url()) {
            return Err(ChatError::Endpoint(format!(
                "`{}` {problem} (an API base such as http://127.0.0.1:8000/v1)",
                self.base_url
            )));
        }
        Ok(())
    }

    /// The URL completions are asked of.
    fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base())
    }

    /// The API base without a trailing `/`, which names the same endpoint.
    pub fn base(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }

    /// What was sent as the key, as a refusal of it explains.
    fn key_sent(&self) -> String {
        match (&self.api_key_env, &self.api_key) {
            (Some(var), Some(_)) => format!("the key sent is `{var}`'s"),
            (Some(var), None) => match std::env::var_os(var) {
                Some(value) if value.is_empty() => format!("no key was sent: `{var}` is empty"),
                Some(_) => format!("no key was sent: `{var}` is not Unicode"),
                None => format!("no key was sent: `{var}` is unset"),
            },
            (None, _) => "no key was sent".to_owned(),
        }
    }
}

/// Whether a request could go to `url`, or what keeps it from it: it must
/// be an `http` or `https` URL with a host, a port (if it names one) that
/// is a port number, and no credentials, which errors and an evaluation's
/// settings would show.
fn reachable(url: &str) -> Result<(), &'static str> {
    const NOT_HTTP: &str = "is not an http:// or https:// URL with a host";
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("http" | "https")) {
        return Err(NOT_HTTP);
    }
    let uri = url
        .parse::<ureq::http::Uri>()
        .map_err(|_| "is not a URL (a space, or a character a URL cannot hold?)")?;
    let Some(authority) = uri
        .authority()
        .filter(|authority| !authority.host().is_empty())
    else {
        return Err(NOT_HTTP);
    };
    if authority.as_str().contains('@') {
        return Err("holds credentials: pass the key in an environment variable (--api-key-env)");
    }
    let port = authority
        .as_str()
        .rsplit_once(':')
        .map(|(_, after)| after)
        .filter(|after| !after.is_empty() && !after.contains(']'));
    if port.is_some() && authority.port_u16().is_none() {
        return Err("names a port that is no port number (1 to 65535)");
    }
    Ok(())
}

/// [`ChatConfig::timeout`] unless set otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Retries of a connection refused before the endpoint has answered
/// anything: with the default backoff, three seconds for a server that is
/// just starting.
const UNANSWERED_RETRIES: u32 = 2;

/// The longest wait before a retry, even where `Retry-After` asks for more.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// The largest reply read: far more than any chat completion.
const MAX_REPLY_BYTES: u64 = 16 << 20;

/// A chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system".into(),
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user".into(),
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// Why a completion failed (after retries, where retrying could help).
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("{url} answered HTTP {status}: {body}{}", not_found_hint(*.status, .url))]
    Status {
        url: String,
        status: u16,
        body: String,
        /// The wait its `Retry-After` header asked for.
        retry_after: Option<Duration>,
    },
    #[error("{url} answered HTTP {status}: {body} ({key})")]
    Unauthorized {
        url: String,
        status: u16,
        body: String,
        /// What was sent as the key.
        key: String,
    },
    /// `retryable`: a failure that may clear (a refused or dropped
    /// connection, a name not found yet), not one that will recur (a bad
    /// certificate, a redirect loop).
    #[error("could not reach {url}: {reason}")]
    Transport {
        url: String,
        reason: String,
        retryable: bool,
    },
    /// A connection refused by an endpoint that has not answered yet:
    /// nothing listens at the address, or a server is still starting.
    #[error(
        "could not reach {url}: {reason} (nothing listens there: is the server running, and is \
         the address right?)"
    )]
    Unreachable { url: String, reason: String },
    #[error("{url} sent no whole answer within {} s, the request timeout", .timeout.as_secs())]
    Timeout { url: String, timeout: Duration },
    #[error("the endpoint's answer is larger than {} MiB, more than any chat completion", MAX_REPLY_BYTES >> 20)]
    TooLarge,
    #[error("the endpoint's answer is not a chat completion: {0}")]
    Malformed(String),
    #[error("the request does not fit in the model's context: {0}")]
    ContextFull(String),
    #[error("{last} (gave up after {attempts} attempts over {} s)", .elapsed.as_secs())]
    GaveUp {
        attempts: u32,
        elapsed: Duration,
        last: Box<ChatError>,
    },
    #[error("{0}")]
    Endpoint(String),
    /// A failure left unretried because the command is stopping
    /// ([`ChatClient::give_up_when`]).
    #[error("{last} (not retried: stopping)")]
    Stopped { last: Box<ChatError> },
}

impl ChatError {
    /// Whether `err` holds a request left unretried because the command
    /// is stopping: the work it failed was stopped, not failed.
    pub fn stopped_in(err: &anyhow::Error) -> bool {
        err.chain()
            .any(|cause| matches!(cause.downcast_ref(), Some(ChatError::Stopped { .. })))
    }
}

/// A 404's likely cause where the base URL lacks the usual `/v1`; with it,
/// the endpoint more likely knows no such model.
fn not_found_hint(status: u16, url: &str) -> &'static str {
    match status == 404 && !url.ends_with("/v1/chat/completions") {
        true => " (an API base usually ends in /v1)",
        false => "",
    }
}

impl ChatError {
    fn retryable(&self) -> bool {
        match self {
            // A server's own failure, a gateway's, a timeout or a rate
            // limit may clear; "not implemented" and the like will not.
            Self::Status { status, .. } => matches!(status, 408 | 429 | 500 | 502 | 503 | 504),
            Self::Transport { retryable, .. } => *retryable,
            Self::Unreachable { .. } => true,
            Self::Unauthorized { .. }
            | Self::Timeout { .. }
            | Self::TooLarge
            | Self::Malformed(_)
            | Self::ContextFull(_)
            | Self::GaveUp { .. }
            | Self::Endpoint(_)
            | Self::Stopped { .. } => false,
        }
    }
}

/// Whether an endpoint's refusal says the request does not fit in the
/// model's context: OpenAI's `context_length_exceeded`, vLLM's and SGLang's
/// "maximum context length" / "context length", llama.cpp's
/// `exceed_context_size_error`, TGI's "`max_new_tokens` must be <=". Only
/// the error's own fields are read: some servers echo the request back,
/// and its text may say anything.
fn refused_for_length(status: u16, body: &str) -> bool {
    if !matches!(status, 400 | 413 | 422) {
        return false;
    }
    let Ok(answer) = serde_json::from_str::<Value>(body) else {
        return false;
    };
    let fields = [
        "/error/code",
        "/error/type",
        "/error/message",
        "/error",
        "/error_type",
        "/message",
        "/detail",
    ];
    let phrases = [
        "context length",
        "context_length",
        "context size",
        "context_size",
        "max_new_tokens` must be <=",
    ];
    fields
        .iter()
        .filter_map(|field| answer.pointer(field).and_then(Value::as_str))
        .map(str::to_lowercase)
        .any(|said| phrases.iter().any(|phrase| said.contains(phrase)))
}

/// Requests made and tokens used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Every request sent, retries and failures included.
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A failed request about to be tried again, as [`ChatClient::on_retry`]
/// tells of it: a long wait for a rate-limited endpoint is then seen for
/// what it is.
#[derive(Debug)]
pub struct Retrying<'a> {
    /// Why the request failed.
    pub error: &'a ChatError,
    /// Which retry this is (1 for the first).
    pub retry: u32,
    /// The most retries this failure is given ([`ChatConfig::max_retries`],
    /// fewer for an endpoint that has never answered).
    pub max_retries: u32,
    /// How long until it is sent again.
    pub wait: Duration,
}

impl std::fmt::Display for Retrying<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; retry {} of {} in {:.1} s",
            self.error,
            self.retry,
            self.max_retries,
            self.wait.as_secs_f64()
        )
    }
}

/// What [`ChatClient::on_retry`] is given: shared, so that one notice can
/// serve several clients (an agent's, a user's, a judge's).
pub type RetryNotice = Arc<dyn Fn(&Retrying) + Send + Sync>;

/// A chat-completion client.
pub struct ChatClient {
    config: ChatConfig,
    agent: ureq::Agent,
    usage: Mutex<Usage>,
    in_flight: Mutex<usize>,
    slot_freed: Condvar,
    on_retry: Mutex<Option<RetryNotice>>,
    give_up: Mutex<Option<Arc<AtomicBool>>>,
    /// Whether the endpoint has answered any request: until it has, a
    /// refused connection likely means nothing listens at the address (a
    /// wrong port, a server not started), which a minute of waiting would
    /// not mend ([`UNANSWERED_RETRIES`]).
    answered: AtomicBool,
}

impl ChatClient {
    /// A client of the endpoint `config` names, once [`ChatConfig::check`]
    /// finds it one a request could reach.
    pub fn new(config: ChatConfig) -> Result<Self, ChatError> {
        config.check()?;
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Self {
            config,
            agent,
            usage: Mutex::new(Usage::default()),
            in_flight: Mutex::new(0),
            slot_freed: Condvar::new(),
            on_retry: Mutex::new(None),
            give_up: Mutex::new(None),
            answered: AtomicBool::new(false),
        })
    }

    /// Tells `notice` of every retry from now on, before its wait (instead
    /// of what it was told before).
    pub fn on_retry(&self, notice: RetryNotice) {
        *lock(&self.on_retry) = Some(notice);
    }

    /// Once `stop` is set, a failed request is retried no more and a
    /// retry's wait is cut short: the request fails at once with
    /// [`ChatError::Stopped`], so that a command asked to stop does not
    /// wait out a backoff of a minute or more first.
    pub fn give_up_when(&self, stop: Arc<AtomicBool>) {
        *lock(&self.give_up) = Some(stop);
    }

    fn stopping(&self) -> bool {
        lock(&self.give_up)
            .as_ref()
            .is_some_and(|stop| stop.load(Ordering::Relaxed))
    }

    /// Sleeps for `wait`, or until [`Self::give_up_when`]'s flag is set:
    /// whether it slept it all.
    fn wait_unless_stopped(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            if self.stopping() {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }

    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    pub fn usage(&self) -> Usage {
        *lock(&self.usage)
    }

    /// The assistant's reply to `messages`, greedily sampled.
    pub fn complete(&self, messages: &[Message]) -> Result<String, ChatError> {
        let messages = serde_json::to_value(messages).expect("messages serialise");
        let message = self.complete_message(&messages, None, &Sampling::default())?;
        message
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                ChatError::Malformed(format!("the reply has no text content: {message}"))
            })
    }

    /// The assistant message (OpenAI JSON, possibly with `tool_calls`) that
    /// answers `messages` (a JSON array of OpenAI messages), offering
    /// `tools`, sampled as `sampling` asks.
    pub fn complete_message(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        sampling: &Sampling,
    ) -> Result<Value, ChatError> {
        let started = Instant::now();
        let mut retries = 0;
        loop {
            match self.request(messages, tools, sampling) {
                Err(err) if err.retryable() && self.stopping() => {
                    return Err(ChatError::Stopped {
                        last: Box::new(err),
                    });
                }
                Err(err) if err.retryable() && retries < self.retry_limit(&err) => {
                    let wait = self.wait_before_retry(&err, retries);
                    retries += 1;
                    // Told outside the lock: other requests' retries are
                    // told meanwhile.
                    let notice = lock(&self.on_retry).clone();
                    if let Some(notice) = notice {
                        notice(&Retrying {
                            error: &err,
                            retry: retries,
                            max_retries: self.retry_limit(&err),
                            wait,
                        });
                    }
                    if !self.wait_unless_stopped(wait) {
                        return Err(ChatError::Stopped {
                            last: Box::new(err),
                        });
                    }
                }
                // A full context ends an episode rather than failing it:
                // it is told apart by its own variant.
                Err(err) if retries > 0 && !matches!(err, ChatError::ContextFull(_)) => {
                    return Err(ChatError::GaveUp {
                        attempts: retries.saturating_add(1),
                        elapsed: started.elapsed(),
                        last: Box::new(err),
                    });
                }
                result => return result,
            }
        }
    }

    /// How many retries `err` is given: an endpoint that has never answered
    /// a few seconds' worth (a server just started; a wrong address fails
    /// soon), any other failure that may clear `max_retries`.
    fn retry_limit(&self, err: &ChatError) -> u32 {
        match err {
            ChatError::Unreachable { .. } => UNANSWERED_RETRIES.min(self.config.max_retries),
            _ => self.config.max_retries,
        }
    }

    /// The wait before retry `retries + 1`: the backoff, doubled each
    /// retry, or longer where the endpoint's `Retry-After` asks for it.
    fn wait_before_retry(&self, err: &ChatError, retries: u32) -> Duration {
        let backoff = self
            .config
            .backoff
            .saturating_mul(2u32.saturating_pow(retries));
        let asked = match err {
            ChatError::Status {
                retry_after: Some(wait),
                ..
            } => *wait,
            _ => Duration::ZERO,
        };
        backoff.max(asked).min(MAX_WAIT)
    }

    /// One request, once fewer than `max_in_flight` are out.
    fn request(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        sampling: &Sampling,
    ) -> Result<Value, ChatError> {
        let mut in_flight = self
            .slot_freed
            .wait_while(lock(&self.in_flight), |count| {
                *count >= self.config.max_in_flight.max(1)
            })
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *in_flight += 1;
        drop(in_flight);
        lock(&self.usage).requests += 1;
        let answer = self.send(messages, tools, sampling);
        *lock(&self.in_flight) -= 1;
        self.slot_freed.notify_one();
        answer
    }

    fn send(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        sampling: &Sampling,
    ) -> Result<Value, ChatError> {
        let url = self.config.completions_url();
        let mut body = json!({"model": self.config.model, "messages": messages});
        sampling.write(&mut body);
        if let Some(tools) =
            tools.filter(|tools| tools.as_array().is_some_and(|tools| !tools.is_empty()))
        {
            body["tools"] = tools.clone();
        }
        let mut request = self
            .agent
            .post(&url)
            .header("content-type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("authorization", &format!("Bearer {key}"));
        }
        let failed = |err: ureq::Error| match err {
            ureq::Error::Timeout(_) => ChatError::Timeout {
                url: url.clone(),
                timeout: self.config.timeout,
            },
            ureq::Error::BodyExceedsLimit(_) => ChatError::TooLarge,
            err if refused(&err) && !self.answered.load(Ordering::Relaxed) => {
                ChatError::Unreachable {
                    url: url.clone(),
                    reason: err.to_string(),
                }
            }
            err => ChatError::Transport {
                url: url.clone(),
                retryable: matches!(
                    err,
                    ureq::Error::Io(_)
                        | ureq::Error::ConnectionFailed
                        | ureq::Error::HostNotFound
                        | ureq::Error::Protocol(_)
                ),
                reason: err.to_string(),
            },
        };
        let mut response = request.send(body.to_string()).map_err(failed)?;
        self.answered.store(true, Ordering::Relaxed);
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // Bytes first, then text: a reply that is not UTF-8 is the
        // endpoint's fault, shown with replacement characters, not a
        // broken connection to retry (ureq's lossy reading of a whole body
        // still fails on it).
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_REPLY_BYTES)
            .read_to_vec()
            .map_err(failed)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if refused_for_length(status, &text) {
            return Err(ChatError::ContextFull(truncate(&text)));
        }
        if matches!(status, 401 | 403) {
            return Err(ChatError::Unauthorized {
                url,
                status,
                body: truncate(&text),
                key: self.config.key_sent(),
            });
        }
        if status != 200 {
            return Err(ChatError::Status {
                url,
                status,
                body: truncate(&text),
                retry_after,
            });
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|err| ChatError::Malformed(format!("{err}: {}", truncate(&text))))?;
        let message = answer
            .pointer("/choices/0/message")
            .filter(|message| message.is_object())
            .cloned()
            .ok_or_else(|| {
                ChatError::Malformed(format!("no choices[0].message in {}", truncate(&text)))
            })?;
        let mut usage = lock(&self.usage);
        usage.prompt_tokens += answer
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        usage.completion_tokens += answer
            .pointer("/usage/completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Ok(message)
    }
}

/// Whether `err` is a refused connection: nothing listening at the address.
fn refused(err: &ureq::Error) -> bool {
    matches!(err, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An endpoint's answer as errors quote it.
fn truncate(text: &str) -> String {
    forge_runtime::text::shortened(text, 500)
}

/// The JSON value in a model's reply, past the reasoning a reply may open
/// with in `<think>…</think>` (whose prose may hold braces of its own): the
/// reply itself, or the contents of its first fenced code block, or the
/// first object in it that parses whole (of the first few, so that a long
/// reply of stray braces costs no more than a few passes).
pub fn extract_json(reply: &str) -> Option<Value> {
    const CANDIDATES: usize = 32;
    let answer = reply
        .trim_start()
        .strip_prefix("<think>")
        .and_then(|thought| thought.split_once("</think>"))
        .map_or(reply, |(_, answer)| answer);
    let trimmed = answer.trim();
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Some(value);
    }
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let body_start = after.find('\n').map_or(0, |newline| newline + 1);
        if let Some(end) = after[body_start..].find("```")
            && let Ok(value) = serde_json::from_str(after[body_start..body_start + end].trim())
        {
            return Some(value);
        }
    }
    trimmed
        .match_indices('{')
        .take(CANDIDATES)
        .find_map(|(start, _)| {
            serde_json::Deserializer::from_str(&trimmed[start..])
                .into_iter::<Value>()
                .next()?
                .ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_in_common_reply_shapes() {
        let expected = json!({"a": 1});
        for reply in [
            "{\"a\": 1}",
            "Here it is:\n```json\n{\"a\": 1}\n```\nDone.",
            "Sure — {\"a\": 1} — enjoy",
            "<think>The doc needs {collections}; {a} is one.</think>\n{\"a\": 1}",
            "Fill in {placeholders}: {\"a\": 1} and {more}",
        ] {
            assert_eq!(extract_json(reply), Some(expected.clone()), "{reply}");
        }
        assert_eq!(extract_json("no json here"), None);
    }

    #[test]
    fn sampling_asks_for_greedy_replies_unless_told_and_seeds_only_random_draws() {
        let body = |sampling: Sampling| {
            let mut body = json!({});
            sampling.write(&mut body);
            body
        };
        assert_eq!(body(Sampling::default()), json!({"temperature": 0.0}));
        // Greedy replies need no seed.
        let greedy = Sampling::default().at_turn(7, 3);
        assert_eq!(body(greedy), json!({"temperature": 0.0}));
        let sampled = Sampling {
            temperature: 0.7,
            top_p: Some(0.9),
            seed: None,
        };
        assert_eq!(body(sampled), json!({"temperature": 0.7, "top_p": 0.9}));
        let seeds: Vec<u64> = (0..50)
            .map(|turn| body(sampled.at_turn(7, turn))["seed"].as_u64().unwrap())
            .collect();
        assert!(seeds.iter().all(|&seed| seed <= i64::MAX as u64));
        let distinct: std::collections::BTreeSet<_> = seeds.iter().collect();
        assert_eq!(distinct.len(), seeds.len(), "each turn draws afresh");
        assert_eq!(sampled.at_turn(7, 3), sampled.at_turn(7, 3));
        assert_ne!(sampled.at_turn(7, 3).seed, sampled.at_turn(8, 3).seed);
    }

    #[test]
    fn retries_back_off_doubling_or_as_long_as_retry_after_asks_within_a_minute() {
        let client = ChatClient::new(ChatConfig::new("http://127.0.0.1:1/v1/", "m")).unwrap();
        assert_eq!(
            client.config().completions_url(),
            "http://127.0.0.1:1/v1/chat/completions"
        );
        let failed = |retry_after: Option<u64>| ChatError::Status {
            url: String::new(),
            status: 429,
            body: String::new(),
            retry_after: retry_after.map(Duration::from_secs),
        };
        let waits: Vec<u64> = (0..7)
            .map(|retries| client.wait_before_retry(&failed(None), retries).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60]);
        assert_eq!(client.wait_before_retry(&failed(Some(20)), 0).as_secs(), 20);
        assert_eq!(client.wait_before_retry(&failed(Some(1)), 3).as_secs(), 8);
        assert_eq!(
            client.wait_before_retry(&failed(Some(3600)), 0).as_secs(),
            60
        );
    }

    #[test]
    fn only_failures_that_may_clear_are_retried() {
        let answered = |status| ChatError::Status {
            url: String::new(),
            status,
            body: String::new(),
            retry_after: None,
        };
        let retried: Vec<u16> = [400, 404, 408, 429, 500, 501, 502, 503, 504, 505, 511]
            .into_iter()
            .filter(|status| answered(*status).retryable())
            .collect();
        assert_eq!(retried, [408, 429, 500, 502, 503, 504]);
    }

    #[test]
    fn an_endpoint_no_request_could_reach_is_refused() {
        for (url, model) in [
            ("127.0.0.1:8000/v1", "m"),
            ("ftp://host/v1", "m"),
            ("http://", "m"),
            ("https:///v1", "m"),
            ("", "m"),
            ("http://127.0.0.1:8000/v1 ", "m"),
            ("http://exa mple/v1", "m"),
            ("http://127.0.0.1:99999/v1", "m"),
            ("http://[::1]:99999/v1", "m"),
            ("http://user:secret@host/v1", "m"),
            ("http://127.0.0.1:8000/v1", ""),
        ] {
            let refused = ChatClient::new(ChatConfig::new(url, model));
            assert!(
                matches!(refused, Err(ChatError::Endpoint(_))),
                "{url} {model}"
            );
        }
        let config =
            ChatConfig::new("https://api.example.com/v1", "m").key_from_env("FORGE_TEST_UNSET_KEY");
        assert_eq!(config.api_key, None);
        assert_eq!(
            config.key_sent(),
            "no key was sent: `FORGE_TEST_UNSET_KEY` is unset"
        );
        for url in [
            "http://127.0.0.1:8000/v1",
            "HTTPS://api.example.com/v1/",
            "http://[::1]:8000/v1",
            "http://[::1]/v1",
            "http://host:/v1",
            "http://host/v1",
        ] {
            assert!(ChatClient::new(ChatConfig::new(url, "m")).is_ok(), "{url}");
        }
    }

    /// A server at the returned URL that answers one request with `status`
    /// and `body`, then goes away.
    fn answer_once(status: u16, body: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            // The whole request, headers and body, before answering: a
            // socket closed with unread bytes would be reset.
            let mut reader = std::io::BufReader::new(&stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line.trim().is_empty() {
                    break;
                }
            }
            let mut request = vec![0; length];
            reader.read_exact(&mut request).unwrap();
            let head = format!(
                "HTTP/1.1 {status} Answer\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(&body).unwrap();
        });
        (url, server)
    }

    #[test]
    fn a_reply_that_is_not_utf8_is_read_with_replacement_characters() {
        let mut body =
            br#"{"choices": [{"message": {"role": "assistant", "content": "caf"#.to_vec();
        body.extend([0xe9, b' ', 0xff]);
        body.extend(br#""}}]}"#);
        let (url, server) = answer_once(200, body);
        let mut config = ChatConfig::new(&url, "m");
        // Not retried: one connection is all the server takes.
        config.max_retries = 0;
        let client = ChatClient::new(config).unwrap();
        let reply = client.complete(&[Message::user("Hi")]).unwrap();
        assert_eq!(reply, "caf\u{fffd} \u{fffd}");
        server.join().unwrap();
    }

    #[test]
    fn a_refused_connection_is_retried_briefly_until_the_endpoint_has_answered() {
        let patient = |url: &str| {
            let mut config = ChatConfig::new(url, "m");
            config.backoff = Duration::from_millis(1);
            ChatClient::new(config).unwrap()
        };
        // Nothing listens on a port just let go: a wrong address (or a
        // server starting), given a few seconds, not a minute.
        let url = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/v1", listener.local_addr().unwrap())
        };
        let client = patient(&url);
        let told = Arc::new(Mutex::new(Vec::new()));
        let telling = told.clone();
        client.on_retry(Arc::new(move |retrying: &Retrying<'_>| {
            lock(&telling).push((retrying.retry, retrying.max_retries));
        }));
        let err = client.complete(&[Message::user("Hi")]).unwrap_err();
        assert!(err.to_string().contains("nothing listens there"), "{err}");
        assert_eq!(client.usage().requests, 1 + u64::from(UNANSWERED_RETRIES));
        // Each retry is told as one of those it is given.
        assert_eq!(
            *lock(&told),
            [(1, UNANSWERED_RETRIES), (2, UNANSWERED_RETRIES)]
        );
        // An endpoint that has answered and then goes away (restarting)
        // is waited for as long as any failure that may clear.
        let (url, server) = answer_once(503, b"busy".to_vec());
        let client = patient(&url);
        let err = client.complete(&[Message::user("Hi")]).unwrap_err();
        server.join().unwrap();
        assert!(
            matches!(err, ChatError::GaveUp { attempts: 7, .. }),
            "{err}"
        );
    }

    #[test]
    fn servers_refusing_a_request_past_the_context_are_told_apart() {
        for (status, body) in [
            (
                400,
                r#"{"error": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"}}"#,
            ),
            (
                400,
                r#"{"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens."}"#,
            ),
            (
                400,
                r#"{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"}}"#,
            ),
            (
                422,
                r#"{"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 2000", "error_type": "validation"}"#,
            ),
        ] {
            assert!(refused_for_length(status, body), "{body}");
        }
        // The same words in a server error, in an echoed request, or in
        // text that is no JSON error, are not.
        let context = r#"{"error": {"message": "context length"}}"#;
        assert!(!refused_for_length(500, context));
        let echoed = r#"{"detail": [{"msg": "field required", "input": "my context length"}]}"#;
        assert!(!refused_for_length(422, echoed));
        assert!(!refused_for_length(400, "context length"));
        assert!(!refused_for_length(400, r#"{"error": "unknown model"}"#));
    }
}
