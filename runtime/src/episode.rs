//! Episodes: a policy and a simulated user talk; the policy's tool calls run
//! in the sandbox against the episode's state.

use crate::bundle::{Actor, ToolCall};
use crate::environment::{Environment, PreparedTask, execute_synced};
use crate::sandbox::ToolInstance;
use crate::schema::ToolSpec;
use crate::state::State;
use crate::trajectory::{
    ChatFunction, ChatMessage, ChatToolCall, EnvironmentRef, EpisodeRecord, FORMAT, Role, Step,
    Termination, UserRef, agent_view,
};
use crate::verify::{Check, Checks, call_matches, verify};
use anyhow::{Result, bail};
use std::borrow::Cow;

/// What the agent does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call a tool. `remark` is what the agent wrote beside the call (a
    /// model's text beside or before it): it stays in the agent's context,
    /// and the user never sees it.
    Call {
        call: ToolCall,
        remark: Option<String>,
    },
    /// Say something to the user.
    Say(String),
}

impl Action {
    /// A call of `call` with nothing written beside it.
    pub fn call(call: ToolCall) -> Self {
        Self::Call { call, remark: None }
    }
}

/// The agent. Local models, remote models, scripted and replaying agents all
/// plug in here; a policy is made per episode.
pub trait Policy {
    /// The next action, given the dialogue so far and the tools. A
    /// [`ContextFull`] error ends the episode as [`Termination::ContextFull`]
    /// instead of failing it.
    fn act(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> Result<Action>;

    /// What the policy wants recorded with the episode (a local model: the
    /// token ids and log-probs of its turns, so that training never
    /// re-tokenises text); asked once, when the episode ends.
    fn trace(&mut self) -> Option<serde_json::Value> {
        None
    }

    /// Why the episode ends here, where the policy knows it before it acts
    /// (a replay at the point where its record was cut); asked before each
    /// action.
    fn ended(&self) -> Option<Termination> {
        None
    }
}

/// What the simulated user does after the agent speaks.
#[derive(Debug, Clone, PartialEq)]
pub enum UserTurn {
    Say(String),
    /// The user calls one of its own tools (τ²-bench's telecom user toggles
    /// airplane mode); the episode runs it, adds the call and its result to
    /// the transcript (where the agent does not see them) and asks the user
    /// again.
    Call(ToolCall),
    /// The user is done; the episode ends.
    Stop,
}

/// The simulated user, made per episode.
pub trait User {
    /// The user's opening message, given the user's own `tools` (which
    /// every turn of the user is given, as a policy is given the agent's).
    fn open(&mut self, tools: &[ToolSpec]) -> Result<String>;
    /// The user's answer to the agent's last message, or — after a call of
    /// its own tools — to that call's result (the transcript's last), given
    /// the user's own `tools`. A [`ContextFull`] error ends the episode as
    /// [`Termination::ContextFull`].
    fn respond(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> Result<UserTurn>;
    /// Who plays this user, as its episodes' records name it (`None`, the
    /// default: unnamed); a replay plays a scripted user again and repeats
    /// any other's recorded turns.
    fn played_by(&self) -> Option<UserRef> {
        None
    }

    /// Whether the user's `opening` ends the dialogue before the agent
    /// acts (a model user that says it is done as it opens; `false`, the
    /// default: a scripted user opens with its instruction, which may quote
    /// the ending for a model to say).
    fn stops_at_opening(&self, _opening: &str) -> bool {
        false
    }
}

/// A model's dialogue no longer fits in its context. Returned by a
/// [`Policy`] or by [`User::respond`], it ends the episode there, to be
/// judged as it stands: a model that cannot read the dialogue cannot go on
/// with it, and the episode is as much a result (a failure, mostly) as one
/// that ran out of turns. From [`User::open`] it fails the episode, which
/// has no dialogue without an opening.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ContextFull(pub String);

/// Whether `err` is a [`ContextFull`].
fn is_context_full(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ContextFull>().is_some()
}

/// Checks a task's natural-language assertions against an episode's
/// transcript (a judge model); made per episode.
pub trait Judge {
    /// Whether each of `assertions` holds of the dialogue `transcript`, in
    /// their order.
    fn judge(&mut self, assertions: &[String], transcript: &[ChatMessage]) -> Result<Vec<bool>>;
}

/// Episode settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpisodeSettings {
    /// Most agent actions (tool calls and messages) before the episode is cut.
    pub max_turns: usize,
    /// Recorded with the episode; policies and users derive their randomness from it.
    pub seed: u64,
}

impl Default for EpisodeSettings {
    fn default() -> Self {
        Self {
            max_turns: 30,
            seed: 0,
        }
    }
}

/// Runs one episode of `task` and judges it; the task's NL assertions are
/// checked when a `judge` is given, and left unevaluated otherwise.
pub fn run_episode(
    env: &Environment,
    task: &PreparedTask,
    policy_name: &str,
    policy: &mut dyn Policy,
    user: &mut dyn User,
    judge: Option<&mut dyn Judge>,
    settings: EpisodeSettings,
) -> Result<EpisodeRecord> {
    let tools = env.component().tools();
    let mut episode = Episode::start(env, task, user, settings)?;
    while !episode.is_over() {
        episode.step(policy, user, tools)?;
    }
    episode.finish(env, task, policy_name, policy.trace(), judge)
}

/// An episode in progress, advanced one agent action at a time — by
/// [`run_episode`] with a [`Policy`], or by an agent elsewhere (`forge
/// serve`). It holds its own sandbox instance and state, so episodes are
/// independent of each other and of the order their actions arrive in.
pub struct Episode {
    instance: ToolInstance,
    sync: bool,
    /// The agent's tools whose call ends the episode.
    ending_tools: Vec<String>,
    settings: EpisodeSettings,
    progress: Progress,
    /// Agent actions taken so far.
    turn: usize,
    termination: Option<Termination>,
    user: Option<UserRef>,
}

impl Episode {
    /// Starts an episode of `task` (an environment's): the user opens.
    pub fn start(
        env: &Environment,
        task: &PreparedTask,
        user: &mut dyn User,
        settings: EpisodeSettings,
    ) -> Result<Self> {
        let opening = user.open(env.component().tools_of(Actor::User))?;
        let termination = match (user.stops_at_opening(&opening), settings.max_turns) {
            (true, _) => Some(Termination::UserStop),
            (false, 0) => Some(Termination::MaxTurns),
            (false, _) => None,
        };
        Ok(Self {
            instance: env.component().instance(),
            sync: env.bundle().manifest.sync,
            ending_tools: env.bundle().manifest.ending_tools.clone(),
            settings,
            progress: Progress {
                state: task.initial.clone(),
                messages: vec![ChatMessage::user(opening)],
                steps: Vec::new(),
            },
            turn: 0,
            termination,
            user: user.played_by(),
        })
    }

    /// The dialogue as the agent sees it: without the user's calls of its
    /// own tools (see [`agent_view`]).
    pub fn transcript(&self) -> Cow<'_, [ChatMessage]> {
        match self
            .progress
            .steps
            .iter()
            .any(|step| step.actor == Actor::User)
        {
            true => Cow::Owned(agent_view(&self.progress.messages)),
            false => Cow::Borrowed(&self.progress.messages),
        }
    }

    /// The dialogue so far, the user's own calls included.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.progress.messages
    }

    /// The tool steps so far.
    pub fn steps(&self) -> &[Step] {
        &self.progress.steps
    }

    /// The environment's state now.
    pub fn state(&self) -> &State {
        &self.progress.state
    }

    /// Agent actions taken so far.
    pub fn turns(&self) -> usize {
        self.turn
    }

    pub fn is_over(&self) -> bool {
        self.termination.is_some()
    }

    /// Takes the agent's next action: runs its tool call, or hands its message
    /// to the user and takes the user's answer (running the user's own calls
    /// first, as many in a row as the agent has turns). Returns why the
    /// episode ended, if this action ended it.
    pub fn act(&mut self, action: Action, user: &mut dyn User) -> Result<Option<Termination>> {
        if let Some(termination) = self.termination {
            bail!("the episode is over ({termination:?}); start a new one");
        }
        let turn = self.turn;
        self.turn += 1;
        match action {
            // A call of the user's tools (a replayed record of a policy that
            // acted for both sides) runs as the user's.
            Action::Call { call, remark } => {
                let ends = call.actor == Actor::Agent && self.ending_tools.contains(&call.name);
                let (instance, sync) = (&mut self.instance, self.sync);
                self.progress
                    .call(instance, sync, turn, call, |call| ChatMessage {
                        content: remark,
                        ..ChatMessage::assistant_call(call)
                    });
                if ends {
                    self.termination = Some(Termination::AgentEnded);
                }
            }
            Action::Say(text) => {
                self.progress.messages.push(ChatMessage::assistant(text));
                // A user that only ever calls its own tools runs the
                // episode out of turns.
                let mut ended = Some(Termination::MaxTurns);
                let component = self.instance.component().clone();
                let tools = component.tools_of(Actor::User);
                for _ in 0..self.settings.max_turns {
                    let answer = match user.respond(&self.progress.messages, tools) {
                        Err(err) if is_context_full(&err) => {
                            ended = Some(Termination::ContextFull);
                            break;
                        }
                        answer => answer?,
                    };
                    match answer {
                        UserTurn::Say(reply) => {
                            self.progress.messages.push(ChatMessage::user(reply));
                            ended = None;
                            break;
                        }
                        UserTurn::Stop => {
                            ended = Some(Termination::UserStop);
                            break;
                        }
                        UserTurn::Call(call) => {
                            let call = ToolCall {
                                actor: Actor::User,
                                ..call
                            };
                            let (instance, sync) = (&mut self.instance, self.sync);
                            self.progress
                                .call(instance, sync, turn, call, ChatMessage::user_call);
                        }
                    }
                }
                self.termination = ended;
            }
        }
        if self.termination.is_none() && self.turn >= self.settings.max_turns {
            self.termination = Some(Termination::MaxTurns);
        }
        Ok(self.termination)
    }

    /// Takes `policy`'s next action, or ends the episode where the policy
    /// says it ends or finds its context full.
    pub fn step(
        &mut self,
        policy: &mut dyn Policy,
        user: &mut dyn User,
        tools: &[ToolSpec],
    ) -> Result<()> {
        if let Some(why) = policy.ended() {
            self.termination = Some(why);
            return Ok(());
        }
        match policy.act(&self.transcript(), tools) {
            Ok(action) => {
                self.act(action, user)?;
            }
            Err(err) if is_context_full(&err) => self.termination = Some(Termination::ContextFull),
            Err(err) => return Err(err),
        }
        Ok(())
    }

    /// Judges the episode (its NL assertions only when a `judge` is given)
    /// and makes its record; `trace` is the policy's (see [`Policy::trace`]).
    /// An episode finished before its end is judged as it stands and
    /// recorded as [`Termination::Closed`].
    pub fn finish(
        mut self,
        env: &Environment,
        task: &PreparedTask,
        policy_name: &str,
        trace: Option<serde_json::Value>,
        judge: Option<&mut dyn Judge>,
    ) -> Result<EpisodeRecord> {
        let Progress {
            state,
            messages,
            steps,
        } = self.progress;
        let agent_said: Vec<&str> = messages
            .iter()
            .filter(|message| message.role == Role::Assistant && message.tool_calls.is_none())
            .filter_map(|message| message.content.as_deref())
            .collect();
        let checks = Checks {
            state_counts: task.task.state_check,
            assertions: assertions(&mut self.instance, task, &state),
            calls: task
                .task
                .required_calls
                .iter()
                .map(|required| Check {
                    name: required.name.clone(),
                    met: steps
                        .iter()
                        .any(|step| call_matches(required, &step.tool, &step.arguments)),
                })
                .collect(),
            nl_assertions: match judge {
                Some(judge) if !task.task.nl_assertions.is_empty() => {
                    judged(judge, &task.task.nl_assertions, &messages)?
                }
                _ => Vec::new(),
            },
        };
        let verdict = verify(
            &env.bundle().manifest.verify,
            &task.initial,
            &task.gold,
            &state,
            &task.task.required_outputs,
            &agent_said,
            checks,
        );
        Ok(EpisodeRecord {
            format: FORMAT.into(),
            environment: EnvironmentRef {
                name: env.name().into(),
                content_hash: env.content_hash().into(),
            },
            task_id: task.task.id.clone(),
            policy: policy_name.into(),
            seed: self.settings.seed,
            max_turns: self.settings.max_turns,
            user: self.user,
            messages,
            steps,
            termination: self.termination.unwrap_or(Termination::Closed),
            final_state_sha256: state.sha256(),
            verdict,
            policy_trace: trace,
        })
    }
}

/// What an episode has come to so far.
struct Progress {
    state: State,
    messages: Vec<ChatMessage>,
    steps: Vec<Step>,
}

impl Progress {
    /// Runs `call` (the last syncing when the environment does) and records
    /// it: the message that makes it (the agent's or the user's, built by
    /// `message`), its result, and the step.
    fn call(
        &mut self,
        instance: &mut ToolInstance,
        sync: bool,
        turn: usize,
        call: ToolCall,
        message: impl FnOnce(ChatToolCall) -> ChatMessage,
    ) {
        let call_id = format!("call_{}", self.steps.len());
        self.messages.push(message(ChatToolCall {
            id: call_id.clone(),
            kind: "function".into(),
            function: ChatFunction {
                name: call.name.clone(),
                arguments: call.arguments.to_string(),
            },
        }));
        let executed = execute_synced(instance, &self.state, &call, sync);
        self.state = executed.state;
        let result = executed.observation.content();
        self.messages.push(ChatMessage::tool(&call_id, &result));
        self.steps.push(Step {
            turn,
            call_id,
            tool: call.name,
            actor: call.actor,
            arguments: call.arguments,
            status: executed.observation.status().into(),
            result,
            fuel: executed.fuel,
            state_hash: self.state.digest(),
        });
    }
}

/// The task's assertions, each answered by the component's function on the
/// final state; an assertion whose function fails is not met.
fn assertions(instance: &mut ToolInstance, task: &PreparedTask, state: &State) -> Vec<Check> {
    task.task
        .assertions
        .iter()
        .map(|assertion| {
            let call = &assertion.call;
            let outcome = instance.invoke(
                state,
                call.actor,
                &call.function,
                &call.arguments.to_string(),
            );
            let answer = match outcome.result {
                Ok(Ok(text)) => serde_json::from_str(&text).ok(),
                _ => None,
            };
            Check {
                name: call.function.clone(),
                met: answer
                    .is_some_and(|answer| forge_pycompat::py_eq(&answer, &assertion.expected)),
            }
        })
        .collect()
}

/// The judge's verdict on each NL assertion.
fn judged(
    judge: &mut dyn Judge,
    assertions: &[String],
    transcript: &[ChatMessage],
) -> Result<Vec<Check>> {
    let verdicts = judge.judge(assertions, transcript)?;
    if verdicts.len() != assertions.len() {
        anyhow::bail!(
            "the judge answered {} verdicts for {} NL assertions",
            verdicts.len(),
            assertions.len()
        );
    }
    Ok(assertions
        .iter()
        .zip(verdicts)
        .map(|(assertion, met)| Check {
            name: assertion.clone(),
            met,
        })
        .collect())
}
