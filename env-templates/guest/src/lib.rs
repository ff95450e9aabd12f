//! The guest side of the `forge:env` contract.
//!
//! An environment is a static list of [`Tool`]s. Each tool is a plain function
//! from a [`Db`] (typed access to the host-side state) and its JSON arguments to
//! a JSON result. [`export_environment!`] turns such a list into a WebAssembly
//! component that implements the `forge:env/environment` world.
//!
//! Tools reach the state only through the [`Store`] trait, so the same tool code
//! also runs natively against any in-memory store, such as [`MemoryStore`] (the
//! host's benchmarks compare the sandboxed and the native call this way).
//!
//! Guest code must stay deterministic: no clocks, no randomness, no I/O — the
//! host refuses components that import them. (`HashMap` is fine: the host
//! answers its seed request with a constant.)

mod args;
mod db;
mod host;
mod memory;
pub mod ops;

pub use args::Args;
pub use db::{Db, Store};
pub use host::HostStore;
pub use memory::MemoryStore;
pub use serde_json::{Value, json};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "environment",
        pub_export_macro: true,
        default_bindings_module: "forge_guest::bindings",
    });
}

/// What a tool returns: a JSON result for the agent, or a tool-level error
/// message (a failed precondition, an unknown id…) that the agent also sees.
pub type ToolResult = Result<Value, String>;

/// One tool of an environment.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    /// The JSON schema of the arguments object (OpenAI function-calling form).
    pub parameters: fn() -> Value,
    pub run: fn(&mut Db<'_>, &Args) -> ToolResult,
}

/// The tool schemas as the host expects them from `describe`.
pub fn describe(tools: &[Tool]) -> String {
    let schemas: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": (tool.parameters)(),
                }
            })
        })
        .collect();
    Value::Array(schemas).to_string()
}

/// Runs tool `name` on `args` (JSON text) against `store`.
pub fn call(
    tools: &[Tool],
    store: &mut dyn Store,
    name: &str,
    args: &str,
) -> Result<String, String> {
    let tool = tools
        .iter()
        .find(|tool| tool.name == name)
        .ok_or_else(|| format!("unknown tool `{name}`"))?;
    let args = Args::parse(args)?;
    let mut db = Db::new(store);
    (tool.run)(&mut db, &args).map(|value| value.to_string())
}

/// Exports a tool list as the component's `forge:env/tools` interface.
///
/// ```ignore
/// pub static TOOLS: &[forge_guest::Tool] = &[/* … */];
/// forge_guest::export_environment!(TOOLS);
/// ```
#[macro_export]
macro_rules! export_environment {
    ($tools:expr) => {
        #[cfg(target_arch = "wasm32")]
        fn __forge_describe() -> ::std::string::String {
            $crate::describe($tools)
        }

        #[cfg(target_arch = "wasm32")]
        fn __forge_call(
            store: &mut dyn $crate::Store,
            name: &str,
            args: &str,
        ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
            $crate::call($tools, store, name, args)
        }

        $crate::export_component!(__forge_describe, __forge_call);
    };
}

/// Who acts in a call (the WIT `actor`): the agent, or a simulated user
/// that has tools of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Agent,
    User,
}

/// Exports functions as the component's `forge:env/tools` interface, for
/// environments whose tools answer with text of their own making rather than
/// through [`Tool`] (for example suites that must reproduce another
/// implementation's output strings exactly).
///
/// With two functions the component has agent tools only:
///
/// ```ignore
/// fn describe() -> String { /* the OpenAI tool schemas */ }
/// fn call(store: &mut dyn forge_guest::Store, name: &str, args: &str) -> Result<String, String> { /* … */ }
/// forge_guest::export_component!(describe, call);
/// ```
///
/// With four it also has user tools, host-only functions (task set-up and
/// assertions) and a state sync:
///
/// ```ignore
/// use forge_guest::{Actor, Store};
/// fn describe(actor: Actor) -> String { /* … */ }
/// fn call(store: &mut dyn Store, actor: Actor, name: &str, args: &str) -> Result<String, String> { /* … */ }
/// fn invoke(store: &mut dyn Store, actor: Actor, name: &str, args: &str) -> Result<String, String> { /* … */ }
/// fn sync(store: &mut dyn Store) -> Result<(), String> { /* … */ }
/// forge_guest::export_component!(describe, call, invoke, sync);
/// ```
#[macro_export]
macro_rules! export_component {
    ($describe:path, $call:path) => {
        #[cfg(target_arch = "wasm32")]
        fn __forge_describe_agent(actor: $crate::Actor) -> ::std::string::String {
            match actor {
                $crate::Actor::Agent => $describe(),
                $crate::Actor::User => "[]".into(),
            }
        }

        #[cfg(target_arch = "wasm32")]
        fn __forge_call_agent(
            store: &mut dyn $crate::Store,
            actor: $crate::Actor,
            name: &str,
            args: &str,
        ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
            match actor {
                $crate::Actor::Agent => $call(store, name, args),
                $crate::Actor::User => Err(::std::format!("the user has no tool `{name}`")),
            }
        }

        $crate::export_component!(
            __forge_describe_agent,
            __forge_call_agent,
            $crate::no_function,
            $crate::no_sync
        );
    };
    ($describe:path, $call:path, $invoke:path, $sync:path) => {
        #[cfg(target_arch = "wasm32")]
        mod __forge_export {
            use $crate::bindings::exports::forge::env::tools::{Actor, Guest};

            struct Component;

            fn actor(actor: Actor) -> $crate::Actor {
                match actor {
                    Actor::Agent => $crate::Actor::Agent,
                    Actor::User => $crate::Actor::User,
                }
            }

            impl Guest for Component {
                fn describe(who: Actor) -> ::std::string::String {
                    super::__forge_describe_fn(actor(who))
                }

                fn call(
                    who: Actor,
                    name: ::std::string::String,
                    args: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                    super::__forge_call_fn(&mut $crate::HostStore, actor(who), &name, &args)
                }

                fn invoke(
                    who: Actor,
                    name: ::std::string::String,
                    args: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                    super::__forge_invoke_fn(&mut $crate::HostStore, actor(who), &name, &args)
                }

                fn sync() -> ::std::result::Result<(), ::std::string::String> {
                    super::__forge_sync_fn(&mut $crate::HostStore)
                }
            }

            $crate::bindings::export!(Component with_types_in $crate::bindings);
        }

        #[cfg(target_arch = "wasm32")]
        fn __forge_describe_fn(actor: $crate::Actor) -> ::std::string::String {
            $describe(actor)
        }

        #[cfg(target_arch = "wasm32")]
        fn __forge_call_fn(
            store: &mut dyn $crate::Store,
            actor: $crate::Actor,
            name: &str,
            args: &str,
        ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
            $call(store, actor, name, args)
        }

        #[cfg(target_arch = "wasm32")]
        fn __forge_invoke_fn(
            store: &mut dyn $crate::Store,
            actor: $crate::Actor,
            name: &str,
            args: &str,
        ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
            $invoke(store, actor, name, args)
        }

        #[cfg(target_arch = "wasm32")]
        fn __forge_sync_fn(
            store: &mut dyn $crate::Store,
        ) -> ::std::result::Result<(), ::std::string::String> {
            $sync(store)
        }
    };
}

/// The `invoke` of a component without host-only functions.
pub fn no_function(_: &mut dyn Store, _: Actor, name: &str, _: &str) -> Result<String, String> {
    Err(format!("unknown function `{name}`"))
}

/// The `sync` of a component whose state has no mirrored parts.
pub fn no_sync(_: &mut dyn Store) -> Result<(), String> {
    Ok(())
}
