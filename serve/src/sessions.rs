//! Sessions: one episode each, driven by a remote agent one action at a time.
//!
//! The table of sessions is shared by every protocol (OpenEnv over HTTP and
//! WebSocket, MCP). Each session owns its episode — its own sandbox instance
//! and state — so sessions never see each other, and a tool that traps or
//! runs out of fuel in one ends only that call. Every episode that ends (the
//! user stops, the turns run out, the client closes the session, it expires,
//! the server shuts down) is judged and written to the trajectory file —
//! unless the agent never acted in it.

use crate::ServeError;
use crate::catalog::{Catalog, TaskRef};
use crate::metrics::Metrics;
use forge_runtime::trajectory::{ChatMessage, EpisodeRecord, Role, Termination};
use forge_runtime::{Action, Episode, EpisodeSettings, PreparedTask, TrajectoryWriter, User};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// Makes the simulated user of an episode of a task, from the episode's seed.
pub type UserFactory = Arc<dyn Fn(&PreparedTask, u64) -> Box<dyn User + Send> + Send + Sync>;

/// How sessions are held.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    /// Most sessions open at once; a reset beyond it is refused.
    pub max_sessions: usize,
    /// A session with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A session whose episode is over, and that no connection holds, is
    /// closed after this long without a request (or at once when the table
    /// is full and a new session needs its place): clients of plain HTTP
    /// cannot close sessions, and finished ones would otherwise take places
    /// and count as open until the idle timeout.
    pub finished_linger: Duration,
    /// Most agent actions per second per session (a burst of as many is allowed).
    pub steps_per_second: f64,
    /// Most agent actions per episode.
    pub max_turns: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_sessions: 4096,
            idle_timeout: Duration::from_secs(600),
            finished_linger: Duration::from_secs(60),
            steps_per_second: 1000.0,
            max_turns: 30,
        }
    }
}

/// What a reset asks for; every field is optional.
#[derive(Debug, Clone, Default)]
pub struct OpenRequest {
    /// The environment (by name).
    pub env: Option<String>,
    /// The task (`env/task`, or the bare id when unambiguous); without it,
    /// the `seed`-th task, or the next one in turn.
    pub task_id: Option<String>,
    /// The episode's seed (the simulated user's randomness).
    pub seed: Option<u64>,
    /// The session id to use (OpenEnv's `episode_id`); a fresh one otherwise.
    pub session_id: Option<String>,
    /// Recorded as the episode's policy; `remote` otherwise.
    pub policy: Option<String>,
    /// Refuse (as an unknown session) when `session_id` names no open
    /// session, rather than opening one: a client attached to a session it
    /// does not own must not bring it back once it is closed.
    pub existing_only: bool,
    /// The client holds the session and can close it (a WebSocket, stdio,
    /// MCP), so a finished episode stays until it does (or the idle timeout);
    /// the sessions of plain HTTP, which cannot be closed, go soon after
    /// their episode ends (see [`SessionLimits::finished_linger`]). A reset
    /// of a held session keeps it held.
    pub held: bool,
    /// The WebSocket connection asking (see [`Hub::connection_id`]), if
    /// any. A session opened by a connection is that connection's: a reset,
    /// step or close of it from anywhere else is refused
    /// ([`ServeError::Held`]), as it would step or end the connection's
    /// episode (and a reset leave it acting in another).
    pub connection: Option<u64>,
    /// The client asking holds one of the places counted in
    /// [`Hub::waiting`] (a WebSocket connection let in before its first
    /// reset), which this session takes: opened, it is counted out of
    /// the waiting ones.
    pub reserved: bool,
}

/// The result of a tool call, as the agent sees it.
#[derive(Debug, Clone, Serialize)]
pub struct CallResult {
    pub tool: String,
    /// Whether the agent has such a tool (the call of one it lacks is still
    /// a turn of the episode, answered with the host's refusal).
    pub known: bool,
    /// `ok`, `tool_error` or `sandbox_error`.
    pub status: String,
    pub content: String,
}

impl CallResult {
    /// Whether the sandbox stopped the call (rather than the tool answering).
    pub fn is_sandbox_error(&self) -> bool {
        self.status == "sandbox_error"
    }
}

/// What the agent learns from a reset or an action.
#[derive(Debug, Clone, Serialize)]
pub struct Observation {
    pub session_id: String,
    pub env: String,
    pub task_id: String,
    /// On a reset's observation, the environment's rules for its agent (a
    /// benchmark's policy, a synthesized environment's description): what
    /// `forge run` gives an agent as its system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Messages the agent has not seen yet: the user's, and tool results
    /// (OpenAI chat format).
    pub messages: Vec<ChatMessage>,
    /// The result of the action, when it was a tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CallResult>,
    pub done: bool,
    /// The episode's reward, once it is over.
    pub reward: Option<f64>,
    /// Agent actions taken so far.
    pub step_count: usize,
}

impl Observation {
    /// What the action answered, as text: the tool's result, or what the
    /// user said; and whether it is an error (a tool's refusal, or the
    /// sandbox stopping the call).
    pub fn answer(&self) -> (String, bool) {
        match &self.result {
            Some(result) => (result.content.clone(), result.status != "ok"),
            None => (
                self.messages
                    .iter()
                    .filter_map(|message| message.content.as_deref())
                    .collect::<Vec<_>>()
                    .join("\n"),
                false,
            ),
        }
    }
}

/// A session's state (OpenEnv's `/state`).
#[derive(Debug, Clone, Serialize)]
pub struct SessionState {
    pub episode_id: String,
    pub step_count: usize,
    pub env: String,
    pub task_id: String,
    pub content_hash: String,
    pub done: bool,
    pub reward: Option<f64>,
    pub termination: Option<Termination>,
    pub partial_credit: Option<f64>,
    /// sha256 of the environment's state (Python-compatible; the final
    /// state's, once the episode is over).
    pub state_sha256: String,
}

enum Phase {
    Running(Box<Episode>),
    Over(Box<EpisodeRecord>),
    /// Judging the episode failed (a judge model that could not be reached).
    Failed(String),
}

struct Session {
    task: TaskRef,
    phase: Phase,
    user: Box<dyn User + Send>,
    policy: String,
    /// Messages of the agent's view already delivered.
    seen: usize,
    /// Agent actions taken.
    turns: usize,
    last_active: Instant,
    bucket: TokenBucket,
    held: bool,
    /// The WebSocket connection whose session this is.
    connection: Option<u64>,
    /// Taken out of the table: a request that got hold of it before then
    /// finds it gone.
    closed: bool,
}

/// What a reset keeps of the open session it restarts.
struct Reopened {
    /// The session as the reset found it: replaced only if it is still
    /// the one in the table.
    session: Arc<Mutex<Session>>,
    bucket: TokenBucket,
    held: bool,
    connection: Option<u64>,
}

/// The sessions of one server.
pub struct Hub {
    catalog: Catalog,
    limits: SessionLimits,
    users: UserFactory,
    recorder: Option<Mutex<TrajectoryWriter>>,
    metrics: Metrics,
    sessions: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
    /// Resets so far: salts session ids and episode seeds.
    resets: AtomicU64,
    /// The next task in turn, for a reset that names neither a task nor a
    /// seed: one rotation through the whole catalog (`None`) and one through
    /// each environment's tasks, for resets naming their environment; only
    /// such resets, when served, move theirs on.
    in_turn: HashMap<Option<String>, AtomicU64>,
    id_salt: u64,
    closing: AtomicBool,
    /// Held while [`Hub::shut_down`] ends the sessions.
    shutting_down: Mutex<()>,
    /// Places promised to connections that have yet to open their session:
    /// they count against `--max-sessions` for every other opening.
    waiting: Arc<AtomicUsize>,
    /// Connections named so far ([`Hub::connection_id`]).
    connections: AtomicU64,
}

impl Hub {
    /// `recorder` receives every ended episode.
    pub fn new(
        catalog: Catalog,
        limits: SessionLimits,
        users: UserFactory,
        recorder: Option<TrajectoryWriter>,
    ) -> Self {
        let in_turn = std::iter::once(None)
            .chain(catalog.env_names().into_iter().map(Some))
            .map(|rotation| (rotation, AtomicU64::new(0)))
            .collect();
        Self {
            catalog,
            limits,
            users,
            recorder: recorder.map(Mutex::new),
            metrics: Metrics::default(),
            sessions: Mutex::new(HashMap::new()),
            resets: AtomicU64::new(0),
            in_turn,
            id_salt: rand::random(),
            closing: AtomicBool::new(false),
            shutting_down: Mutex::new(()),
            waiting: Arc::default(),
            connections: AtomicU64::new(0),
        }
    }

    /// The count of places promised to connections not yet in a session
    /// (see [`OpenRequest::reserved`]).
    pub(crate) fn waiting(&self) -> &Arc<AtomicUsize> {
        &self.waiting
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// Whether session `id` is open.
    pub fn contains(&self, id: &str) -> bool {
        self.table().contains_key(id)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The task a reset asks for: the one it names, the `seed`-th, or the
    /// next in turn — which a reset naming its task or seed leaves where it
    /// was, as does one refused before its task is drawn (every refusal but
    /// a race lost for the last place, or to shutting down, while its
    /// episode was being set up: that one's turn is spent).
    fn task_for(&self, request: &OpenRequest) -> Result<TaskRef, ServeError> {
        let find = |ordinal| {
            self.catalog
                .find(request.env.as_deref(), request.task_id.as_deref(), ordinal)
        };
        if request.task_id.is_some() || request.seed.is_some() {
            return find(request.seed.unwrap_or(0));
        }
        let Some(in_turn) = self.in_turn.get(&request.env) else {
            // An environment not served: `find` says so.
            return find(0);
        };
        loop {
            let turn = in_turn.load(Ordering::Relaxed);
            let task = find(turn)?;
            // Another reset may have taken this turn meanwhile: then the
            // next is this one's.
            if in_turn
                .compare_exchange(turn, turn + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(task);
            }
        }
    }

    /// Starts an episode in a new session (or, when the request names an
    /// open session, in that one, ending its episode first).
    pub fn open(&self, request: OpenRequest) -> Result<Observation, ServeError> {
        if let Some(id) = &request.session_id {
            check_id(id)?;
        }
        if let Some(policy) = &request.policy {
            check_name("a policy name", policy)?;
        }
        // Before the task is drawn, so that a refused reset takes no turn.
        let open = match &request.session_id {
            Some(id) => self.charge_reset(id, &request)?,
            None => None,
        };
        let (seen, bucket, held, connection) = match open {
            Some(Reopened {
                session,
                bucket,
                held,
                connection,
            }) => (Some(session), bucket, held, connection),
            None => (
                None,
                TokenBucket::new(self.limits.steps_per_second),
                false,
                request.connection,
            ),
        };
        // Checked again when the session is put in the table; here so that
        // a reset refused for want of a place takes no turn either.
        if let Some(full) = self.no_place(
            &self.table(),
            request.session_id.as_deref(),
            request.reserved,
        ) {
            return Err(full);
        }
        let task = self.task_for(&request)?;
        let ordinal = self.resets.fetch_add(1, Ordering::Relaxed);
        let prepared = task.task();
        let seed = request.seed.unwrap_or_else(|| {
            forge_runtime::episode_seed(self.id_salt, &task.qualified_id(), ordinal)
        });
        let settings = EpisodeSettings {
            max_turns: self.limits.max_turns,
            seed,
        };
        let id = request.session_id.unwrap_or_else(|| self.fresh_id(ordinal));
        let mut user = (self.users)(prepared, seed);
        let episode = Episode::start(&task.env, prepared, user.as_mut(), settings)
            .map_err(ServeError::Internal)?;
        let mut session = Session {
            task,
            phase: Phase::Running(Box::new(episode)),
            user,
            policy: request.policy.unwrap_or_else(|| "remote".into()),
            seen: 0,
            turns: 0,
            last_active: Instant::now(),
            bucket,
            held: held || request.held,
            connection,
            closed: false,
        };
        let mut observation = self.observe(&id, &mut session, None);
        let rules = &session.task.env.bundle().manifest.description;
        observation.instructions = Some(rules.clone()).filter(|rules| !rules.trim().is_empty());
        let (replaced, evicted) = {
            let mut table = self.table();
            // Checked under the table's lock, which shutting down holds
            // while it sets the flag: no session slips in after the drain.
            if self.closing.load(Ordering::Relaxed) {
                return Err(ServeError::ShuttingDown);
            }
            // Again under the lock: the session may have closed meanwhile,
            // or another client opened it.
            if request.existing_only && !table.contains_key(&id) {
                return Err(ServeError::UnknownSession(id));
            }
            // Another session of this id than the one the reset found.
            let taken = match (table.get(&id), &seen) {
                (Some(now), Some(seen)) => !Arc::ptr_eq(now, seen),
                (Some(_), None) => true,
                (None, _) => false,
            };
            if taken {
                return Err(ServeError::Busy(id));
            }
            if let Some(full) = self.no_place(&table, Some(&id), request.reserved) {
                return Err(full);
            }
            // A place is free: if the table is full, a finished session's
            // (unless a request took it up meanwhile).
            let mut evicted = None;
            if !table.contains_key(&id) && table.len() >= self.limits.max_sessions {
                evicted = Self::evict_finished(&mut table);
                if evicted.is_none() {
                    return Err(ServeError::Full {
                        sessions: table.len(),
                        waiting: self.waiting.load(Ordering::Relaxed),
                        max: self.limits.max_sessions,
                    });
                }
            }
            let replaced = table.insert(id.clone(), Arc::new(Mutex::new(session)));
            // The session takes the place promised to its connection: the
            // count moves under the lock, so that no one sees the place
            // counted twice (as a session and as a promise) in between.
            if request.reserved {
                self.waiting.fetch_sub(1, Ordering::Relaxed);
            }
            (replaced, evicted)
        };
        tracing::debug!(session = %observation.session_id, env = %observation.env, task = %observation.task_id, seed, "episode started");
        if let Some(evicted) = evicted {
            self.end(&evicted, "evicted");
            self.metrics.sessions.dec();
        }
        match replaced {
            Some(old) => self.end(&old, "closed"),
            None => {
                self.metrics.sessions.inc();
            }
        }
        self.metrics.sessions_opened.inc();
        Ok(observation)
    }

    /// What `request`'s reset of session `id` keeps of it when it is open
    /// ([`Reopened`]), its rate charged for the reset (a reset is one of its
    /// requests, and waits its turn). `None` when no such session is open
    /// (refused when `existing_only`).
    fn charge_reset(
        &self,
        id: &str,
        request: &OpenRequest,
    ) -> Result<Option<Reopened>, ServeError> {
        let open = self.table().get(id).cloned();
        let Some(open) = open else {
            return match request.existing_only {
                true => Err(ServeError::UnknownSession(id.into())),
                false => Ok(None),
            };
        };
        let mut session = match open.try_lock() {
            Ok(session) => session,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(ServeError::Busy(id.into())),
        };
        if session
            .connection
            .is_some_and(|owner| request.connection != Some(owner))
        {
            return Err(ServeError::Held(id.into()));
        }
        session.bucket.take(id)?;
        Ok(Some(Reopened {
            bucket: session.bucket.clone(),
            held: session.held,
            connection: session.connection,
            session: Arc::clone(&open),
        }))
    }

    /// A fresh id for a WebSocket connection, to name it in
    /// [`OpenRequest::connection`].
    pub(crate) fn connection_id(&self) -> u64 {
        self.connections.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a new connection among those promised a place, and says
    /// whether there is one for it: its sessions and the connections still
    /// to open theirs are fewer than `--max-sessions`. Counted and checked
    /// under the table's lock, where an opening session takes over its
    /// connection's promise: read outside it, a session just opened could
    /// be counted twice (as a promise, then as a session) and a place that
    /// is free refused.
    pub(crate) fn promise_place(&self) -> bool {
        let table = self.table();
        let before = self.waiting.fetch_add(1, Ordering::Relaxed);
        Self::held(&table) + before < self.limits.max_sessions
    }

    /// Places taken by sessions that would not give way to a new one (a
    /// finished session nothing holds would).
    pub fn places_taken(&self) -> usize {
        Self::held(&self.table())
    }

    /// The sessions of `table` that would not give way to a new one.
    fn held(table: &HashMap<String, Arc<Mutex<Session>>>) -> usize {
        let lingering = table
            .values()
            .filter(|session| lingering_since(session).is_some())
            .count();
        table.len() - lingering
    }

    /// Takes the agent's next action in session `id`, for the WebSocket
    /// connection `by` (if any: see [`OpenRequest::connection`]).
    pub fn step(
        &self,
        id: &str,
        by: Option<u64>,
        action: Action,
    ) -> Result<Observation, ServeError> {
        let started = Instant::now();
        self.with_session(id, |session| {
            session.refuse_others(id, by)?;
            // An ended episode is said to be over however fast it is asked.
            let Phase::Running(episode) = &mut session.phase else {
                return Err(ServeError::EpisodeOver(id.into()));
            };
            session.bucket.take(id)?;
            let known = match &action {
                Action::Call { call, .. } => Some(
                    session
                        .task
                        .env
                        .component()
                        .tool(forge_runtime::Actor::Agent, &call.name)
                        .is_some(),
                ),
                Action::Say(_) => None,
            };
            let kind = match known {
                Some(_) => "tool_call",
                None => "message",
            };
            let steps_before = episode.steps().len();
            episode
                .act(action, session.user.as_mut())
                .map_err(ServeError::Internal)?;
            let result = known.and_then(|known| {
                episode.steps().get(steps_before).map(|step| CallResult {
                    tool: step.tool.clone(),
                    known,
                    status: step.status.clone(),
                    content: step.result.clone(),
                })
            });
            if let Some(result) = result.as_ref().filter(|result| result.is_sandbox_error()) {
                tracing::warn!(session = %id, tool = %result.tool, error = %result.content, "the sandbox stopped a tool call");
                self.metrics.sandbox_errors.inc();
            }
            let observation = self.observe(id, session, result);
            self.metrics.steps.get_or_create(&Metrics::kind(kind)).inc();
            self.metrics
                .step_seconds
                .observe(started.elapsed().as_secs_f64());
            Ok(observation)
        })
    }

    /// Session `id`'s state.
    pub fn state(&self, id: &str) -> Result<SessionState, ServeError> {
        self.with_session(id, |session| Self::state_of(id, session))
    }

    fn state_of(id: &str, session: &Session) -> Result<SessionState, ServeError> {
        let (env, task) = (&session.task.env, session.task.task());
        let common = |step_count, done, state_sha256| SessionState {
            episode_id: id.into(),
            step_count,
            env: env.name().into(),
            task_id: task.task.id.clone(),
            content_hash: env.content_hash().into(),
            done,
            reward: None,
            termination: None,
            partial_credit: None,
            state_sha256,
        };
        Ok(match &session.phase {
            Phase::Running(episode) => common(session.turns, false, episode.state().sha256()),
            Phase::Over(record) => SessionState {
                reward: Some(record.verdict.reward),
                termination: Some(record.termination),
                partial_credit: Some(record.verdict.partial_credit),
                ..common(session.turns, true, record.final_state_sha256.clone())
            },
            Phase::Failed(message) => {
                return Err(ServeError::Internal(anyhow::anyhow!(
                    "judging the episode failed: {message}"
                )));
            }
        })
    }

    /// The tools of session `id`'s agent.
    pub fn tools(&self, id: &str) -> Result<Vec<forge_runtime::schema::ToolSpec>, ServeError> {
        self.with_session(id, |session| {
            Ok(session.task.env.component().tools().to_vec())
        })
    }

    /// Whether session `id`'s episode is over, and its reward if so.
    pub fn outcome(&self, id: &str) -> Result<(bool, Option<f64>), ServeError> {
        self.with_session(id, |session| {
            Ok(match &session.phase {
                Phase::Running(_) => (false, None),
                Phase::Over(record) => (true, Some(record.verdict.reward)),
                Phase::Failed(_) => (true, None),
            })
        })
    }

    /// Closes session `id` for the WebSocket connection `by` (if any),
    /// judging its episode if it was still running.
    pub fn close(&self, id: &str, by: Option<u64>) -> Result<(), ServeError> {
        check_id(id)?;
        let unknown = || ServeError::UnknownSession(id.into());
        let found = self.table().get(id).cloned().ok_or_else(unknown)?;
        // Its owner is read after the request it is serving: the table is
        // not held meanwhile.
        found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .refuse_others(id, by)?;
        let session = {
            let mut table = self.table();
            match table.get(id) {
                Some(now) if Arc::ptr_eq(now, &found) => table.remove(id),
                // Closed, or opened again, meanwhile.
                _ => None,
            }
        }
        .ok_or_else(unknown)?;
        self.end(&session, "closed");
        self.metrics.sessions.dec();
        Ok(())
    }

    /// Closes the sessions idle for longer than the idle timeout; returns how many.
    pub fn expire_idle(&self) -> usize {
        let now = Instant::now();
        let idle: Vec<(String, Arc<Mutex<Session>>)> = {
            let mut table = self.table();
            let ids: Vec<String> = table
                .iter()
                .filter(|(_, session)| {
                    let idle = |session: &Session| {
                        let limit = match session.lingers() {
                            true => self.limits.finished_linger.min(self.limits.idle_timeout),
                            false => self.limits.idle_timeout,
                        };
                        now.duration_since(session.last_active) > limit
                    };
                    match session.try_lock() {
                        Ok(session) => idle(&session),
                        Err(TryLockError::Poisoned(poisoned)) => idle(&poisoned.into_inner()),
                        // Busy with a request: not idle.
                        Err(TryLockError::WouldBlock) => false,
                    }
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| table.remove(&id).map(|session| (id, session)))
                .collect()
        };
        for (id, session) in &idle {
            tracing::info!(session = %id, "session expired");
            self.end(session, "expired");
            self.metrics.sessions.dec();
        }
        idle.len()
    }

    /// Whether episodes are written (`forge serve --out`).
    pub fn records(&self) -> bool {
        self.recorder.is_some()
    }

    /// Refuses new sessions and ends every open one (their episodes are
    /// judged and written), as a server stops. A second caller (a signal
    /// while stdin's end shuts a stdio server down) waits until the first
    /// has written every episode.
    pub fn shut_down(&self) -> usize {
        let _one_at_a_time = self
            .shutting_down
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let sessions: Vec<Arc<Mutex<Session>>> = {
            let mut table = self.table();
            self.closing.store(true, Ordering::Relaxed);
            table.drain().map(|(_, session)| session).collect()
        };
        for session in &sessions {
            self.end(session, "shutdown");
            self.metrics.sessions.dec();
        }
        sessions.len()
    }

    /// Runs `work` on session `id`, which is now active. A session busy
    /// with another request is refused rather than waited for, so that
    /// requests piling onto one session cannot tie up the server's threads.
    fn with_session<T>(
        &self,
        id: &str,
        work: impl FnOnce(&mut Session) -> Result<T, ServeError>,
    ) -> Result<T, ServeError> {
        // Once shutting down has ended every session, a request for one is
        // told why it is gone.
        let unknown = || match self.closing.load(Ordering::Relaxed) {
            true => ServeError::ShuttingDown,
            false => ServeError::UnknownSession(id.into()),
        };
        check_id(id)?;
        let session = self.table().get(id).cloned().ok_or_else(unknown)?;
        let mut session = match session.try_lock() {
            Ok(session) => session,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) if self.closing.load(Ordering::Relaxed) => {
                return Err(ServeError::ShuttingDown);
            }
            Err(TryLockError::WouldBlock) => return Err(ServeError::Busy(id.into())),
        };
        if session.closed {
            return Err(unknown());
        }
        session.last_active = Instant::now();
        work(&mut session)
    }

    /// Why the session `id` (a new one when none or unknown) finds no place
    /// to run an episode, if it does not. Places are counted as a WebSocket
    /// connection is let in ([`Self::promise_place`]): the sessions that are
    /// not finished-and-unheld (those give way to new ones), and the places
    /// promised to connections yet to reset, other than the asker's own.
    /// A finished session restarted takes a place again.
    fn no_place(
        &self,
        table: &HashMap<String, Arc<Mutex<Session>>>,
        id: Option<&str>,
        reserved: bool,
    ) -> Option<ServeError> {
        if let Some(session) = id.and_then(|id| table.get(id))
            && lingering_since(session).is_none()
        {
            return None;
        }
        let open = Self::held(table);
        let waiting = self
            .waiting
            .load(Ordering::Relaxed)
            .saturating_sub(usize::from(reserved));
        (open + waiting >= self.limits.max_sessions).then_some(ServeError::Full {
            sessions: open,
            waiting,
            max: self.limits.max_sessions,
        })
    }

    /// Takes out of a full `table` the finished session, held by no
    /// connection and busy with no request, that has waited longest.
    fn evict_finished(
        table: &mut HashMap<String, Arc<Mutex<Session>>>,
    ) -> Option<Arc<Mutex<Session>>> {
        let id = table
            .iter()
            .filter_map(|(id, session)| Some((lingering_since(session)?, id)))
            .min()
            .map(|(_, id)| id.clone())?;
        table.remove(&id)
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<Mutex<Session>>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fresh_id(&self, ordinal: u64) -> String {
        let mixed = forge_runtime::episode_seed(self.id_salt, "session", ordinal);
        format!("{ordinal:x}-{mixed:016x}")
    }

    /// What the agent has not seen yet; judges and records the episode if it
    /// just ended.
    fn observe(&self, id: &str, session: &mut Session, result: Option<CallResult>) -> Observation {
        let messages = match &session.phase {
            Phase::Running(episode) => {
                let transcript = episode.transcript();
                let new: Vec<ChatMessage> = transcript[session.seen.min(transcript.len())..]
                    .iter()
                    .filter(|message| message.role != Role::Assistant)
                    .cloned()
                    .collect();
                session.seen = transcript.len();
                session.turns = episode.turns();
                new
            }
            Phase::Over(_) | Phase::Failed(_) => Vec::new(),
        };
        let done = match &session.phase {
            Phase::Running(episode) => episode.is_over(),
            Phase::Over(_) | Phase::Failed(_) => true,
        };
        if done {
            self.finish(session);
        }
        let reward = match &session.phase {
            Phase::Over(record) => Some(record.verdict.reward),
            Phase::Running(_) | Phase::Failed(_) => None,
        };
        Observation {
            session_id: id.into(),
            env: session.task.env.name().into(),
            task_id: session.task.task().task.id.clone(),
            instructions: None,
            messages,
            result,
            done,
            reward,
            step_count: session.turns,
        }
    }

    /// Judges a running episode as it stands and records it.
    fn finish(&self, session: &mut Session) {
        let Phase::Running(_) = &session.phase else {
            return;
        };
        let judging = Phase::Failed("the episode is being judged".into());
        let Phase::Running(episode) = std::mem::replace(&mut session.phase, judging) else {
            unreachable!("checked above")
        };
        let task = session.task.task();
        match episode.finish(&session.task.env, task, &session.policy, None, None) {
            Ok(record) => {
                let termination = record.termination.name();
                self.metrics
                    .episodes
                    .get_or_create(&Metrics::kind(termination))
                    .inc();
                if let Some(recorder) = &self.recorder {
                    let mut recorder = recorder.lock().unwrap_or_else(|p| p.into_inner());
                    if let Err(err) = recorder.write(&record) {
                        self.metrics.unrecorded_episodes.inc();
                        tracing::error!(error = %format!("{err:#}"), "writing a trajectory");
                    }
                }
                tracing::debug!(
                    task = %record.task_id,
                    reward = record.verdict.reward,
                    termination = %termination,
                    steps = record.steps.len(),
                    "episode judged"
                );
                session.phase = Phase::Over(Box::new(record));
            }
            Err(err) => {
                let message = format!("{err:#}");
                tracing::error!(error = %message, task = %task.task.id, "judging an episode");
                session.phase = Phase::Failed(message);
            }
        }
    }

    /// Ends a session taken out of the table. An episode in which the agent
    /// took no action (one a reset replaced, one its client left at once)
    /// is not worth a record.
    fn end(&self, session: &Arc<Mutex<Session>>, how: &str) {
        let mut session = lock(session);
        session.closed = true;
        let untouched = matches!(&session.phase, Phase::Running(episode) if episode.turns() == 0);
        if !untouched {
            self.finish(&mut session);
        }
        self.metrics
            .sessions_ended
            .get_or_create(&Metrics::kind(how))
            .inc();
    }
}

impl Session {
    /// Whether the session only lingers: its episode is over and no
    /// connection holds it.
    fn lingers(&self) -> bool {
        !self.held && !matches!(self.phase, Phase::Running(_))
    }

    /// Refuses the WebSocket connection `by` (none: a client that holds
    /// nothing) acting in this session when another connection holds it:
    /// it would step, or end, that connection's episode.
    fn refuse_others(&self, id: &str, by: Option<u64>) -> Result<(), ServeError> {
        match self.connection {
            Some(owner) if by != Some(owner) => Err(ServeError::Held(id.into())),
            _ => Ok(()),
        }
    }
}

/// Since when `session` has waited, when it only lingers and no request is
/// busy with it: a session that would give way to a new one.
fn lingering_since(session: &Arc<Mutex<Session>>) -> Option<Instant> {
    let session = session.try_lock().ok()?;
    session.lingers().then_some(session.last_active)
}

fn lock(session: &Arc<Mutex<Session>>) -> MutexGuard<'_, Session> {
    session
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A token bucket: `rate` tokens a second, holding at most `rate`.
#[derive(Clone)]
struct TokenBucket {
    rate: f64,
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    fn new(rate: f64) -> Self {
        Self {
            rate,
            tokens: rate.max(1.0),
            refilled: Instant::now(),
        }
    }

    /// Takes a token for a request of session `id`, or says how long until
    /// there is one.
    fn take(&mut self, id: &str) -> Result<(), ServeError> {
        let now = Instant::now();
        let capacity = self.rate.max(1.0);
        self.tokens = (self.tokens + now.duration_since(self.refilled).as_secs_f64() * self.rate)
            .min(capacity);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(ServeError::RateLimited {
            id: id.into(),
            rate: self.rate,
            // A rate too small to wait for is waited for "for ever".
            retry_after: Duration::try_from_secs_f64((1.0 - self.tokens) / self.rate)
                .unwrap_or(Duration::MAX),
        })
    }
}

/// Refuses a session id no session can have. Ids reach the logs, the
/// trajectories and error messages as they are: a control character could
/// forge a log line.
pub fn check_id(id: &str) -> Result<(), ServeError> {
    check_name("a session id", id)
}

/// Refuses an empty `name`, one over 128 characters, or one holding a
/// control character (it would split a log line or `forge show`'s header);
/// `what` names it in the error.
fn check_name(what: &str, name: &str) -> Result<(), ServeError> {
    if name.is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control) {
        return Err(ServeError::BadRequest(format!(
            "{what} has 1 to 128 characters, none of them control characters"
        )));
    }
    Ok(())
}
