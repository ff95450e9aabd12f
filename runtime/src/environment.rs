//! A loaded environment: a bundle whose component is compiled and checked,
//! whose tasks are validated against the tools, and whose gold final states are
//! computed by executing each task's gold actions in the sandbox.

use crate::bundle::{Actor, Bundle, SetupStep, Task, ToolCall};
use crate::sandbox::{Sandbox, ToolComponent, ToolInstance};
use crate::state::State;
use anyhow::{Context, Result, anyhow, bail};

/// The result of one executed tool call, as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// The tool's result.
    Ok(String),
    /// The tool refused (bad arguments, failed precondition); the agent sees the message.
    ToolError(String),
    /// The sandbox stopped the call; the agent sees the message.
    SandboxError(String),
}

impl Observation {
    /// The text of the `tool` message the agent sees.
    pub fn content(&self) -> String {
        match self {
            Self::Ok(text) => text.clone(),
            Self::ToolError(message) => format!("Error: {message}"),
            Self::SandboxError(message) => format!("Error: the tool {message}"),
        }
    }

    pub fn status(&self) -> &'static str {
        match self {
            Self::Ok(_) => "ok",
            Self::ToolError(_) => "tool_error",
            Self::SandboxError(_) => "sandbox_error",
        }
    }
}

/// One executed step.
#[derive(Debug, Clone)]
pub struct Executed {
    pub observation: Observation,
    pub state: State,
    pub fuel: u64,
}

/// A task ready to run.
#[derive(Debug, Clone)]
pub struct PreparedTask {
    pub task: Task,
    pub initial: State,
    /// The state the gold actions reach.
    pub gold: State,
}

/// An environment ready to run episodes on.
pub struct Environment {
    bundle: Bundle,
    component: ToolComponent,
    content_hash: String,
    tasks: Vec<PreparedTask>,
}

impl Environment {
    /// Loads a bundle: compiles and checks the component, validates every task
    /// and computes its gold final state.
    pub fn load(sandbox: &Sandbox, bundle: Bundle) -> Result<Self> {
        let name = bundle.manifest.name.clone();
        check_name(&name).context("the manifest's `name`")?;
        bundle.manifest.verify.check().map_err(|message| {
            anyhow!("environment `{name}`: the manifest's `verify`: {message}")
        })?;
        let component = sandbox
            .load(&bundle.wasm)
            .with_context(|| format!("loading the component of environment `{name}`"))?
            .with_argument_checks(bundle.manifest.check_arguments);
        if let Some(unknown) = bundle
            .manifest
            .ending_tools
            .iter()
            .find(|tool| component.tool(Actor::Agent, tool).is_none())
        {
            bail!(
                "environment `{name}`: the manifest's `ending_tools` names `{unknown}`, which is \
                 none of the agent's tools"
            );
        }
        let default_state = State::from_json(&bundle.initial_state)
            .with_context(|| format!("the initial state of environment `{name}` is malformed"))?;
        let mut seen = std::collections::BTreeSet::new();
        let mut tasks = Vec::with_capacity(bundle.tasks.len());
        for task in &bundle.tasks {
            if task.id.trim().is_empty() || task.id.chars().any(char::is_control) {
                bail!(
                    "environment `{name}`: task id {:?} is blank or holds control characters",
                    task.id
                );
            }
            if !seen.insert(task.id.as_str()) {
                bail!("environment `{name}`: task id `{}` appears twice", task.id);
            }
            let initial = match &task.initial_state {
                Some(state) => State::from_json(state)
                    .with_context(|| format!("task `{}`: initial_state", task.id))?,
                None => default_state.clone(),
            };
            let initial = set_up(&component, bundle.manifest.sync, &task.setup, initial)
                .with_context(|| format!("environment `{name}`, task `{}`", task.id))?;
            let gold = execute_gold(&component, task, &initial)
                .with_context(|| format!("environment `{name}`, task `{}`", task.id))?;
            check_checks(&component, task, &gold)
                .with_context(|| format!("environment `{name}`, task `{}`", task.id))?;
            if let Some(expected) = &task.gold_final_state_sha256
                && expected != &gold.sha256()
            {
                bail!(
                    "environment `{name}`, task `{}`: the gold actions reach a final state with sha256 {}, not the recorded {expected}",
                    task.id,
                    gold.sha256()
                );
            }
            tasks.push(PreparedTask {
                task: task.clone(),
                initial,
                gold,
            });
        }
        for (split, ids) in &bundle.manifest.splits {
            if ids.is_empty() {
                // Played, it would run nothing and report rates of nothing.
                bail!("environment `{name}`: split `{split}` names no task");
            }
            if let Some(id) = ids.iter().find(|id| !seen.contains(id.as_str())) {
                bail!(
                    "environment `{name}`: split `{split}` names task `{id}`, which it does not have"
                );
            }
            let mut named = std::collections::BTreeSet::new();
            if let Some(id) = ids.iter().find(|id| !named.insert(id.as_str())) {
                bail!("environment `{name}`: split `{split}` names task `{id}` twice");
            }
        }
        // The rules name collections the tasks' states hold (some, only
        // once a tool makes them): without a task, there is nothing to
        // check them against, nor any state they would apply to.
        if !tasks.is_empty() {
            let collections = std::iter::once(&default_state)
                .chain(tasks.iter().flat_map(|task| [&task.initial, &task.gold]))
                .flat_map(|state| state.collections().map(|(name, _)| name.as_str()))
                .collect();
            bundle
                .manifest
                .verify
                .check_collections(&collections)
                .map_err(|message| {
                    anyhow!("environment `{name}`: the manifest's `verify`: {message}")
                })?;
        }
        let content_hash = bundle.content_hash();
        Ok(Self {
            bundle,
            component,
            content_hash,
            tasks,
        })
    }

    pub fn name(&self) -> &str {
        &self.bundle.manifest.name
    }

    pub fn bundle(&self) -> &Bundle {
        &self.bundle
    }

    pub fn component(&self) -> &ToolComponent {
        &self.component
    }

    /// See [`Bundle::content_hash`].
    pub fn content_hash(&self) -> &str {
        &self.content_hash
    }

    pub fn tasks(&self) -> &[PreparedTask] {
        &self.tasks
    }

    pub fn task(&self, id: &str) -> Option<&PreparedTask> {
        self.tasks.iter().find(|task| task.task.id == id)
    }
}

/// Validates `call` against its tool's schema (unless the component's
/// environment checks its own calls), then runs it.
pub fn execute(instance: &mut ToolInstance, state: &State, call: &ToolCall) -> Executed {
    if let Some(refusal) = host_refusal(instance.component(), call) {
        return Executed {
            observation: Observation::ToolError(refusal),
            state: state.clone(),
            fuel: 0,
        };
    }
    run_call(instance, state, call)
}

/// Runs `call` in the sandbox, unchecked.
fn run_call(instance: &mut ToolInstance, state: &State, call: &ToolCall) -> Executed {
    let outcome = instance.call(state, call.actor, &call.name, &call.arguments.to_string());
    Executed {
        observation: observe(outcome.result),
        state: outcome.state,
        fuel: outcome.fuel,
    }
}

/// [`execute`], then — when the environment syncs and the call succeeded —
/// the component's `sync`, as every call of an episode runs. A sync that
/// fails becomes the call's answer and keeps the call's writes (the
/// reference suites behave so), without its own; a sync the sandbox stops is
/// a host-side fault, and the call is undone with it.
pub fn execute_synced(
    instance: &mut ToolInstance,
    state: &State,
    call: &ToolCall,
    sync: bool,
) -> Executed {
    let executed = execute(instance, state, call);
    if !sync || !matches!(executed.observation, Observation::Ok(_)) {
        return executed;
    }
    let synced = instance.sync(&executed.state);
    let fuel = executed.fuel + synced.fuel;
    match synced.result {
        Ok(Ok(_)) => Executed {
            state: synced.state,
            fuel,
            ..executed
        },
        Ok(Err(message)) => Executed {
            observation: Observation::ToolError(message),
            fuel,
            ..executed
        },
        Err(error) => Executed {
            observation: Observation::SandboxError(format!(
                "{error} (in the environment's sync after the call)"
            )),
            state: state.clone(),
            fuel,
        },
    }
}

fn observe(result: Result<Result<String, String>, crate::SandboxError>) -> Observation {
    match result {
        Ok(Ok(text)) => Observation::Ok(text),
        Ok(Err(message)) => Observation::ToolError(message),
        Err(error) => Observation::SandboxError(error.to_string()),
    }
}

/// An environment's name is how clients and files refer to it — `env/task`
/// in `forge serve`, the `environment` of every trajectory — so it is a
/// plain word: ASCII letters, digits, `-`, `_` and `.`, not led by a dot.
fn check_name(name: &str) -> Result<()> {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if name.is_empty() || !plain || name.starts_with('.') {
        bail!(
            "{name:?} is not an environment name: use ASCII letters, digits, `-`, `_` and `.` (not first)"
        );
    }
    Ok(())
}

/// Runs a task's set-up steps on its initial state, each followed by the
/// environment's sync; without set-up steps, one sync (so that an episode
/// always starts from agreeing sides). A failing function, or a sandbox
/// error, is a broken task.
fn set_up(
    component: &ToolComponent,
    sync: bool,
    steps: &[SetupStep],
    mut state: State,
) -> Result<State> {
    if steps.is_empty() && !sync {
        return Ok(state);
    }
    let mut instance = component.instance();
    for (index, step) in steps.iter().enumerate() {
        state = match step {
            SetupStep::Function(function) => {
                let outcome = instance.invoke(
                    &state,
                    function.actor,
                    &function.function,
                    &function.arguments.to_string(),
                );
                match outcome.result {
                    Ok(Ok(_)) => outcome.state,
                    Ok(Err(message)) => bail!(
                        "set-up step {index} (`{}` of the {}) failed: {message}",
                        function.function,
                        function.actor.name()
                    ),
                    Err(error) => bail!(
                        "set-up step {index} (`{}` of the {}): the sandbox stopped it: {error}",
                        function.function,
                        function.actor.name()
                    ),
                }
            }
            SetupStep::Call(call) => {
                let executed = execute_synced(&mut instance, &state, call, sync);
                if let Observation::SandboxError(message) = &executed.observation {
                    bail!(
                        "set-up step {index} (tool `{}` of the {}): {message}",
                        call.name,
                        call.actor.name()
                    );
                }
                // A replayed call has been synced already.
                executed.state
            }
        };
        if sync && matches!(step, SetupStep::Function(_)) {
            state = synced(&mut instance, state)
                .with_context(|| format!("after set-up step {index}"))?;
        }
    }
    if sync && steps.is_empty() {
        state = synced(&mut instance, state)?;
    }
    Ok(state)
}

fn synced(instance: &mut ToolInstance, state: State) -> Result<State> {
    let outcome = instance.sync(&state);
    match outcome.result {
        Ok(Ok(_)) => Ok(outcome.state),
        Ok(Err(message)) => bail!("the environment's sync failed: {message}"),
        Err(error) => bail!("the environment's sync: the sandbox stopped it: {error}"),
    }
}

/// Checks that a task's assertions answer (on its gold final state) and that
/// its required calls name tools: a misspelt function or tool would
/// otherwise fail every episode without a word.
fn check_checks(component: &ToolComponent, task: &Task, gold: &State) -> Result<()> {
    let mut instance = component.instance();
    for (index, assertion) in task.assertions.iter().enumerate() {
        let call = &assertion.call;
        let outcome = instance.invoke(
            gold,
            call.actor,
            &call.function,
            &call.arguments.to_string(),
        );
        let problem = match outcome.result {
            Ok(Ok(text)) if serde_json::from_str::<serde_json::Value>(&text).is_ok() => continue,
            Ok(Ok(text)) => format!("answered {text:?}, which is not JSON"),
            Ok(Err(message)) => format!("failed: {message}"),
            Err(error) => format!("was stopped by the sandbox: {error}"),
        };
        bail!(
            "assertion {index} (`{}` of the {}) on the gold final state {problem}",
            call.function,
            call.actor.name()
        );
    }
    for required in &task.required_calls {
        if component.tool(Actor::Agent, &required.name).is_none()
            && component.tool(Actor::User, &required.name).is_none()
        {
            bail!(
                "required call `{}` is not a tool of the agent or the user",
                required.name
            );
        }
    }
    Ok(())
}

/// Why the host refuses `call` before the component sees it: a tool its
/// actor lacks, or arguments the tool's schema refuses. `None` where the
/// component's environment checks its own calls.
fn host_refusal(component: &ToolComponent, call: &ToolCall) -> Option<String> {
    if !component.checks_arguments() {
        return None;
    }
    let Some(tool) = component.tool(call.actor, &call.name) else {
        let name = crate::schema::shortened(&call.name);
        return Some(match call.actor {
            Actor::Agent => format!("unknown tool `{name}`"),
            Actor::User => format!("the user has no tool `{name}`"),
        });
    };
    tool.validate(&call.arguments)
        .err()
        .map(|message| format!("invalid arguments: {message}"))
}

/// Executes a task's gold actions in order, without syncs between them (the
/// reference suites build their gold states so). A tool refusing is allowed
/// (some reference suites include failing calls); a call of a tool its actor
/// lacks, with arguments the host refuses, or that the sandbox stops is a
/// broken task.
fn execute_gold(component: &ToolComponent, task: &Task, initial: &State) -> Result<State> {
    let mut instance = component.instance();
    let mut state = initial.clone();
    for (index, call) in task.gold_actions.iter().enumerate() {
        let failed =
            |message: &str| anyhow!("gold action {index} (`{}`) failed: {message}", call.name);
        // A gold call of a tool its actor lacks is broken whoever checks
        // an episode's calls; one the tool's schema refuses, where the host
        // checks them.
        let Some(tool) = component.tool(call.actor, &call.name) else {
            let whose = match call.actor {
                Actor::Agent => "the agent",
                Actor::User => "the user",
            };
            return Err(failed(&format!("{whose} has no such tool")));
        };
        if component.checks_arguments()
            && let Err(message) = tool.validate(&call.arguments)
        {
            return Err(failed(&format!("invalid arguments: {message}")));
        }
        let executed = run_call(&mut instance, &state, call);
        if let Observation::SandboxError(message) = &executed.observation {
            return Err(failed(message));
        }
        state = executed.state;
    }
    Ok(state)
}
