//! Loaded components and the instances that run their calls.

use super::host::{Bindings, BindingsPre, CallData, Transaction, WitActor};
use super::{Sandbox, epoch_ticks};
use crate::bundle::Actor;
use crate::schema::ToolSpec;
use crate::state::State;
use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use wasmtime::component::Component;
use wasmtime::{Store, Trap};

/// Why a call did not end normally. The state is unchanged in every case, and
/// the next call on the same instance works (a fresh instance replaces a
/// poisoned one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("ran out of fuel (limit {limit} units): the tool does too much work or never ends")]
    OutOfFuel { limit: u64 },
    #[error("exceeded the wall-clock limit of {millis} ms")]
    Timeout { millis: u128 },
    #[error("exceeded the memory limit of {limit} bytes")]
    MemoryLimit { limit: usize },
    #[error("exceeded the table limit of {limit} elements")]
    TableLimit { limit: usize },
    #[error("overflowed the stack (unbounded recursion?)")]
    StackOverflow,
    #[error("went over a store limit: {0}")]
    StoreLimit(String),
    #[error("returned {size} bytes, over the result limit of {limit}")]
    ResultTooLarge { size: usize, limit: usize },
    #[error("trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap { trap: String, stderr: String },
    #[error("could not be instantiated: {0}")]
    Instantiation(String),
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (guest stderr: {stderr})")
    }
}

/// What one call produced.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// `Ok(Ok(result))`: success, `Ok(Err(message))`: the tool refused,
    /// `Err(_)`: the sandbox stopped the call.
    pub result: Result<Result<String, String>, SandboxError>,
    /// The state after the call: the committed writes on success, the state as
    /// before otherwise.
    pub state: State,
    /// Fuel the call consumed.
    pub fuel: u64,
}

impl CallOutcome {
    pub fn is_success(&self) -> bool {
        matches!(self.result, Ok(Ok(_)))
    }
}

/// The version of the `forge:env` contract this host speaks (`wit/`).
const CONTRACT: &str = "forge:env@0.2.0";

/// The `forge:env` version a component speaks, when it is not this host's
/// (a component built before the contract changed).
fn other_contract(component: &Component, engine: &wasmtime::Engine) -> Option<String> {
    let ty = component.component_type();
    let names = ty
        .imports(engine)
        .map(|(name, _)| name)
        .chain(ty.exports(engine).map(|(name, _)| name));
    names
        .filter_map(|name| name.strip_prefix("forge:env/"))
        .filter_map(|rest| rest.split_once('@'))
        .map(|(_, version)| format!("forge:env@{version}"))
        .find(|version| version != CONTRACT)
}

/// A compiled, checked component and its tool schemas. Cheap to clone.
#[derive(Clone)]
pub struct ToolComponent {
    inner: Arc<ComponentInner>,
    /// Whether calls are checked against the tool schemas before they enter
    /// the sandbox (see `Manifest::check_arguments`).
    checks_arguments: bool,
}

struct ComponentInner {
    sandbox: Sandbox,
    pre: BindingsPre<CallData>,
    /// The agent's tools.
    tools: Vec<ToolSpec>,
    /// The simulated user's own tools (most components have none).
    user_tools: Vec<ToolSpec>,
    wasm_sha256: String,
}

impl ToolComponent {
    pub(super) fn new(sandbox: Sandbox, component: Component, wasm: &[u8]) -> Result<Self> {
        if let Some(other) = other_contract(&component, sandbox.engine()) {
            bail!(
                "the component was built for the {other} contract; this host speaks {CONTRACT}: rebuild it (`forge synth` again for a synthesized environment)"
            );
        }
        let pre = sandbox
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .context("linking the component")?;
        let pre = BindingsPre::new(pre).map_err(anyhow::Error::from).context(
            "the component does not export the `forge:env/tools` interface of the `environment` world",
        )?;
        let wasm_sha256 = crate::canonical::hex(&Sha256::digest(wasm));
        let mut component = Self {
            inner: Arc::new(ComponentInner {
                sandbox,
                pre,
                tools: Vec::new(),
                user_tools: Vec::new(),
                wasm_sha256,
            }),
            checks_arguments: true,
        };
        let tools = component.describe(Actor::Agent)?;
        let user_tools = component.describe(Actor::User)?;
        let inner = Arc::get_mut(&mut component.inner).expect("not shared yet");
        inner.tools = tools;
        inner.user_tools = user_tools;
        Ok(component)
    }

    /// The agent's tools' schemas, as the component describes them.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.inner.tools
    }

    /// The schemas of `actor`'s tools.
    pub fn tools_of(&self, actor: Actor) -> &[ToolSpec] {
        match actor {
            Actor::Agent => &self.inner.tools,
            Actor::User => &self.inner.user_tools,
        }
    }

    /// `actor`'s tool `name`.
    pub fn tool(&self, actor: Actor, name: &str) -> Option<&ToolSpec> {
        self.tools_of(actor).iter().find(|tool| tool.name == name)
    }

    /// Hex sha256 of the component's bytes.
    pub fn wasm_sha256(&self) -> &str {
        &self.inner.wasm_sha256
    }

    /// The same component with the host's checks of tool names and
    /// arguments on or off (see `Manifest::check_arguments`).
    pub fn with_argument_checks(self, checks_arguments: bool) -> Self {
        Self {
            checks_arguments,
            ..self
        }
    }

    /// Whether the host checks calls against the tool schemas.
    pub fn checks_arguments(&self) -> bool {
        self.checks_arguments
    }

    /// A new instance for an episode.
    pub fn instance(&self) -> ToolInstance {
        ToolInstance {
            component: self.clone(),
            live: None,
        }
    }

    fn describe(&self, actor: Actor) -> Result<Vec<ToolSpec>> {
        let mut instance = self.instance();
        let (store, bindings) = instance
            .live()
            .map_err(|err| anyhow!("the component {err}"))?;
        let limits = self.inner.sandbox.limits();
        store.set_fuel(limits.fuel).map_err(anyhow::Error::from)?;
        let text = bindings
            .forge_env_tools()
            .call_describe(&mut *store, actor.into())
            // Said as a tool call's trap is (out of fuel, a panic's
            // message), not as the engine's backtrace of the guest.
            .map_err(|err| anyhow::Error::new(classify(&err, store.data(), limits, None)))
            .with_context(|| {
                format!(
                    "calling the component's `describe` for the {}",
                    actor.name()
                )
            })?;
        crate::schema::parse_tool_specs(&text).with_context(|| {
            format!(
                "the component's `describe` returned malformed tool schemas for the {}",
                actor.name()
            )
        })
    }
}

/// An instantiated component: one per episode, reused across its calls, and
/// replaced by a fresh one after a trap (a trapped instance is poisoned).
pub struct ToolInstance {
    component: ToolComponent,
    live: Option<(Store<CallData>, Bindings)>,
}

impl ToolInstance {
    pub fn component(&self) -> &ToolComponent {
        &self.component
    }

    /// Instantiates now rather than at the first call.
    pub fn instantiate(&mut self) -> Result<(), SandboxError> {
        self.live().map(|_| ())
    }

    fn live(&mut self) -> Result<&mut (Store<CallData>, Bindings), SandboxError> {
        if self.live.is_none() {
            let inner = &self.component.inner;
            let limits = inner.sandbox.limits();
            let mut store = Store::new(inner.sandbox.engine(), CallData::new(limits));
            store.limiter(|data| &mut data.limiter);
            store
                .set_fuel(limits.fuel)
                .map_err(|err| SandboxError::Instantiation(format!("{err:?}")))?;
            store.set_epoch_deadline(epoch_ticks(limits.wall_time));
            let bindings = inner
                .pre
                .instantiate(&mut store)
                .map_err(|err| SandboxError::Instantiation(format!("{err:?}")))?;
            self.live = Some((store, bindings));
        }
        Ok(self.live.as_mut().expect("just set"))
    }

    /// Calls `actor`'s tool `name` with `args` (JSON text) against `state`.
    pub fn call(&mut self, state: &State, actor: Actor, name: &str, args: &str) -> CallOutcome {
        self.run(state, |store, bindings| {
            bindings
                .forge_env_tools()
                .call_call(store, actor.into(), name, args)
        })
    }

    /// Calls `actor`'s host-only function `name` (a task's set-up step or an
    /// assertion) with `args` (JSON text) against `state`.
    pub fn invoke(&mut self, state: &State, actor: Actor, name: &str, args: &str) -> CallOutcome {
        self.run(state, |store, bindings| {
            bindings
                .forge_env_tools()
                .call_invoke(store, actor.into(), name, args)
        })
    }

    /// Runs the component's `sync` on `state`; a successful sync answers `""`.
    pub fn sync(&mut self, state: &State) -> CallOutcome {
        self.run(state, |store, bindings| {
            bindings
                .forge_env_tools()
                .call_sync(store)
                .map(|synced| synced.map(|()| String::new()))
        })
    }

    /// Runs one export against `state` in a transaction, under the limits.
    fn run(
        &mut self,
        state: &State,
        export: impl FnOnce(&mut Store<CallData>, &Bindings) -> wasmtime::Result<Result<String, String>>,
    ) -> CallOutcome {
        let limits = self.component.inner.sandbox.limits().clone();
        let (store, bindings) = match self.live() {
            Ok(live) => live,
            Err(err) => {
                return CallOutcome {
                    result: Err(err),
                    state: state.clone(),
                    fuel: 0,
                };
            }
        };
        store.data_mut().txn = Transaction::new(state.clone(), &limits);
        store.data_mut().stderr_from = store.data().stderr.contents().len();
        store.set_fuel(limits.fuel).expect("fuel is enabled");
        store.set_epoch_deadline(epoch_ticks(limits.wall_time));
        let returned = export(store, bindings);
        let fuel = limits.fuel - store.get_fuel().expect("fuel is enabled");
        let txn = std::mem::replace(
            &mut store.data_mut().txn,
            Transaction::new(State::default(), &limits),
        );
        let result = match returned {
            Ok(answer) => {
                let size = match &answer {
                    Ok(text) | Err(text) => text.len(),
                };
                if size > limits.result_bytes {
                    Err(SandboxError::ResultTooLarge {
                        size,
                        limit: limits.result_bytes,
                    })
                } else {
                    Ok(answer)
                }
            }
            Err(err) => {
                let error = classify(&err, store.data(), &limits, txn.exceeded.clone());
                self.live = None;
                Err(error)
            }
        };
        let state = if matches!(result, Ok(Ok(_))) {
            txn.state
        } else {
            state.clone()
        };
        CallOutcome {
            result,
            state,
            fuel,
        }
    }
}

impl From<Actor> for WitActor {
    fn from(actor: Actor) -> Self {
        match actor {
            Actor::Agent => Self::Agent,
            Actor::User => Self::User,
        }
    }
}

fn classify(
    err: &wasmtime::Error,
    data: &CallData,
    limits: &super::Limits,
    store_limit: Option<String>,
) -> SandboxError {
    if let Some(message) = store_limit {
        return SandboxError::StoreLimit(message);
    }
    if data.limiter.memory_exceeded {
        return SandboxError::MemoryLimit {
            limit: limits.memory_bytes,
        };
    }
    if data.limiter.table_exceeded {
        return SandboxError::TableLimit {
            limit: limits.table_elements,
        };
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => SandboxError::OutOfFuel { limit: limits.fuel },
        Some(Trap::Interrupt) => SandboxError::Timeout {
            millis: limits.wall_time.as_millis(),
        },
        Some(Trap::StackOverflow) => SandboxError::StackOverflow,
        Some(trap) => SandboxError::Trap {
            trap: trap.to_string(),
            stderr: guest_stderr(data),
        },
        None => SandboxError::Trap {
            trap: format!("{err}"),
            stderr: guest_stderr(data),
        },
    }
}

/// What the guest wrote to stderr in this call (a Rust panic message lands
/// here), on one line, without the backtrace hint.
fn guest_stderr(data: &CallData) -> String {
    let bytes = data.stderr.contents();
    let text = String::from_utf8_lossy(bytes.get(data.stderr_from..).unwrap_or_default());
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("note:"))
        .collect();
    lines.join(" ")
}
