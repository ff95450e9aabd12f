//! Episodes: a policy and a simulated user talk; the policy's tool calls run
//! in the sandbox against the episode's state.

use crate::bundle::{Actor, ToolCall};
use crate::environment::{Environment, PreparedTask, execute_synced};
use crate::sandbox::ToolInstance;
use crate::schema::ToolSpec;
use crate::state::State;
use crate::trajectory::{
    ChatFunction, ChatMessage, ChatToolCall, EnvironmentRef, EpisodeRecord, FORMAT, Role, Step,
    Termination, agent_view,
};
use crate::verify::{Check, Checks, call_matches, verify};
use anyhow::Result;

/// What the agent does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call a tool.
    Call(ToolCall),
    /// Say something to the user.
    Say(String),
}

/// The agent. Local models, remote models, scripted and replaying agents all
/// plug in here; a policy is made per episode.
pub trait Policy {
    /// The next action, given the dialogue so far and the tools.
    fn act(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> Result<Action>;

    /// What the policy wants recorded with the episode (a local model: the
    /// token ids and log-probs of its turns, so that training never
    /// re-tokenises text); asked once, when the episode ends.
    fn trace(&mut self) -> Option<serde_json::Value> {
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
    /// The user's opening message.
    fn open(&mut self) -> Result<String>;
    /// The user's answer to the agent's last message, or — after a call of
    /// its own tools — to that call's result (the transcript's last).
    fn respond(&mut self, transcript: &[ChatMessage]) -> Result<UserTurn>;
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
    let mut instance = env.component().instance();
    let sync = env.bundle().manifest.sync;
    let mut run = Progress {
        state: task.initial.clone(),
        messages: vec![ChatMessage::user(user.open()?)],
        steps: Vec::new(),
    };
    let mut termination = Termination::MaxTurns;
    'turns: for turn in 0..settings.max_turns {
        let users_calls = run.steps.iter().any(|step| step.actor == Actor::User);
        let action = match users_calls {
            true => policy.act(&agent_view(&run.messages), tools)?,
            false => policy.act(&run.messages, tools)?,
        };
        match action {
            Action::Call(call) => {
                run.call(&mut instance, sync, turn, call, ChatMessage::assistant_call);
            }
            Action::Say(text) => {
                run.messages.push(ChatMessage::assistant(text));
                // The user may use its own tools before it answers, as many
                // times in a row as the agent has turns.
                for _ in 0..settings.max_turns {
                    match user.respond(&run.messages)? {
                        UserTurn::Say(reply) => {
                            run.messages.push(ChatMessage::user(reply));
                            continue 'turns;
                        }
                        UserTurn::Stop => {
                            termination = Termination::UserStop;
                            break 'turns;
                        }
                        UserTurn::Call(call) => {
                            let call = ToolCall {
                                actor: Actor::User,
                                ..call
                            };
                            run.call(&mut instance, sync, turn, call, ChatMessage::user_call);
                        }
                    }
                }
                break 'turns;
            }
        }
    }
    let Progress {
        state,
        messages,
        steps,
    } = run;
    let agent_said: Vec<&str> = messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .filter_map(|message| message.content.as_deref())
        .collect();
    let checks = Checks {
        state_counts: task.task.state_check,
        assertions: assertions(&mut instance, task, &state),
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
        seed: settings.seed,
        max_turns: settings.max_turns,
        messages,
        steps,
        termination,
        final_state_sha256: state.sha256(),
        verdict,
        policy_trace: policy.trace(),
    })
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
        message: fn(ChatToolCall) -> ChatMessage,
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
