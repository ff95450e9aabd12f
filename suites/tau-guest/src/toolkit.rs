//! τ²-bench's toolkit classes (`ToolKitBase` subclasses: `MockTools`,
//! `TelecomUserTools`, …) as a component's functions reach them.
//!
//! [`Toolkit::call`] runs a tool the way `Environment.get_response` does:
//! only methods the reference marks `@is_tool`, an unknown name refused with
//! `ToolKitBase.use_tool`'s error, and the result shown as
//! `Environment.to_json_str` renders it. [`Toolkit::invoke`] runs any method
//! the way `Environment.run_env_function_call` reaches it through `getattr`
//! (tools included) and answers the return value as JSON; a name `getattr`
//! finds that is no method here (what `ToolKitBase` defines, a class's
//! helpers and properties) is refused as such, any other name with Python's
//! `AttributeError`. Both bind the keyword arguments as Python binds them to
//! the bound method, with its `TypeError`s.

use crate::{Data, Kwargs, dumps, num};
use forge_guest::Store;
use serde_json::Value;

/// What a method returns, as Python holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A `str`.
    Text(String),
    /// A `bool`.
    Bool(bool),
    /// `None`.
    Nothing,
    /// A model, a list of models, or a dict holding a model, as
    /// `model_dump()` gives the models.
    Model(Value),
    /// A dict or tuple of plain values, no model in it.
    Plain(Value),
}

impl Answer {
    /// `Environment.to_json_str(answer)`: a string as it is; anything else
    /// through `json.dumps`, after `_process` has turned every number and
    /// `bool` outside a model into its `str()`.
    pub fn to_json_str(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Bool(flag) => dumps(&shown(&Value::Bool(*flag))),
            Self::Nothing => "null".to_owned(),
            Self::Model(value) => dumps(value),
            Self::Plain(value) => dumps(&shown(value)),
        }
    }

    /// `json.dumps(answer)`: what `invoke` answers. (A dict holding a model
    /// is answered as `to_json_str` shows it: Python's `json.dumps` would
    /// refuse the model, and no task invokes such a method.)
    pub fn to_json(&self) -> String {
        match self {
            Self::Text(text) => dumps(&Value::String(text.clone())),
            Self::Bool(flag) => dumps(&Value::Bool(*flag)),
            Self::Nothing => "null".to_owned(),
            Self::Model(value) | Self::Plain(value) => dumps(value),
        }
    }
}

impl From<String> for Answer {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

/// `to_json_str`'s `_process` of plain data.
fn shown(value: &Value) -> Value {
    match value {
        Value::Bool(true) => Value::String("True".to_owned()),
        Value::Bool(false) => Value::String("False".to_owned()),
        Value::Number(_) => {
            Value::String(num(value).map_or_else(|err| err, |num| num.to_python_string()))
        }
        Value::Array(items) => Value::Array(items.iter().map(shown).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), shown(item)))
                .collect(),
        ),
        Value::Null | Value::String(_) => value.clone(),
    }
}

/// The body of a method.
pub type Run = fn(&mut Data<'_>, &Kwargs) -> Result<Answer, String>;

/// A method of a toolkit class.
pub struct Method {
    pub name: &'static str,
    /// The keyword parameters in signature order, each with whether it is required.
    pub parameters: &'static [(&'static str, bool)],
    /// Whether the reference marks it `@is_tool`.
    pub tool: bool,
    pub run: Run,
}

/// A method the reference marks `@is_tool`.
pub const fn tool(
    name: &'static str,
    parameters: &'static [(&'static str, bool)],
    run: Run,
) -> Method {
    Method {
        name,
        parameters,
        tool: true,
        run,
    }
}

/// A method that is no tool: a task's set-up step or assertion.
pub const fn function(
    name: &'static str,
    parameters: &'static [(&'static str, bool)],
    run: Run,
) -> Method {
    Method {
        name,
        parameters,
        tool: false,
        run,
    }
}

/// A toolkit class.
pub struct Toolkit {
    /// The class name, as Python's errors name it.
    pub class: &'static str,
    /// The tools' schemas as the reference gives them to the LLM.
    pub schemas: &'static str,
    /// The tools in the reference's order, then the other methods.
    pub methods: &'static [Method],
    /// The class's other attributes, beyond [`INHERITED`]: names `getattr`
    /// finds that are no method here (private helpers, properties).
    pub attributes: &'static [&'static str],
}

/// What every toolkit has from `ToolKitBase` (its `db` included): names
/// `getattr` finds that are no function a task could sensibly invoke.
pub const INHERITED: &[&str] = &[
    "_func_tools",
    "db",
    "tools",
    "use_tool",
    "get_tools",
    "has_tool",
    "is_discoverable",
    "get_discoverable_tools",
    "has_discoverable_tool",
    "tool_type",
    "tool_mutates_state",
    "get_statistics",
    "update_db",
    "get_db_hash",
];

impl Toolkit {
    /// Runs tool `name` (the component's `call`).
    pub fn call(&self, store: &mut dyn Store, name: &str, args: &str) -> Result<String, String> {
        let method = self
            .methods
            .iter()
            .find(|method| method.tool && method.name == name)
            .ok_or_else(|| format!("Tool '{name}' not found."))?;
        self.run(method, store, args)
            .map(|answer| answer.to_json_str())
    }

    /// Runs method `name` (the component's `invoke`).
    pub fn invoke(&self, store: &mut dyn Store, name: &str, args: &str) -> Result<String, String> {
        let Some(method) = self.methods.iter().find(|method| method.name == name) else {
            if INHERITED.contains(&name) || self.attributes.contains(&name) {
                return Err(format!(
                    "{}.{name} is not a function this component runs",
                    self.class
                ));
            }
            return Err(format!("'{}' object has no attribute '{name}'", self.class));
        };
        self.run(method, store, args).map(|answer| answer.to_json())
    }

    fn run(&self, method: &Method, store: &mut dyn Store, args: &str) -> Result<Answer, String> {
        let callee = format!("{}.{}", self.class, method.name);
        let kwargs = Kwargs::bind(args, callee, method.parameters)?;
        (method.run)(&mut Data::new(store), &kwargs)
    }
}

/// Makes a τ²-bench domain's agent and user toolkits and its `sync_tools`
/// the component's `forge:env/tools`: defines the crate's `describe`, `call`
/// and `invoke` (public, so native tests reach them too) and exports them.
///
/// ```ignore
/// forge_tau_guest::export_toolkits!(AGENT, USER, sync);
/// ```
#[macro_export]
macro_rules! export_toolkits {
    ($agent:path, $user:path, $sync:path) => {
        fn toolkit(actor: $crate::__forge_guest::Actor) -> &'static $crate::toolkit::Toolkit {
            match actor {
                $crate::__forge_guest::Actor::Agent => &$agent,
                $crate::__forge_guest::Actor::User => &$user,
            }
        }

        /// The tool schemas of `actor`, in the reference's order (the
        /// component's `describe`).
        pub fn describe(actor: $crate::__forge_guest::Actor) -> ::std::string::String {
            toolkit(actor).schemas.to_owned()
        }

        /// Runs a tool of `actor` the way `Environment.get_response` does (the
        /// component's `call`).
        pub fn call(
            store: &mut dyn $crate::__forge_guest::Store,
            actor: $crate::__forge_guest::Actor,
            name: &str,
            args: &str,
        ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
            toolkit(actor).call(store, name, args)
        }

        /// Runs any method of `actor`'s toolkit the way
        /// `Environment.run_env_function_call` does (the component's
        /// `invoke`), answering the return value as JSON text.
        pub fn invoke(
            store: &mut dyn $crate::__forge_guest::Store,
            actor: $crate::__forge_guest::Actor,
            name: &str,
            args: &str,
        ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
            toolkit(actor).invoke(store, name, args)
        }

        $crate::__forge_guest::export_component!(describe, call, invoke, $sync);
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_guest::MemoryStore;
    use serde_json::json;

    /// `Environment.to_json_str` of `True`, `None`, `(True, "x")` and a dict
    /// of numbers.
    #[test]
    fn answers_show_as_to_json_str_renders_them() {
        assert_eq!(Answer::Bool(true).to_json_str(), "\"True\"");
        assert_eq!(Answer::Nothing.to_json_str(), "null");
        assert_eq!(
            Answer::Plain(json!([true, "x"])).to_json_str(),
            "[\"True\", \"x\"]"
        );
        assert_eq!(
            Answer::Plain(json!({"gb": 2.0, "n": 3, "none": null})).to_json_str(),
            "{\"gb\": \"2.0\", \"n\": \"3\", \"none\": null}"
        );
        assert_eq!(Answer::Plain(json!([true, "x"])).to_json(), "[true, \"x\"]");
        assert_eq!(Answer::Bool(false).to_json(), "false");
        assert_eq!(Answer::Text("a\"b".to_owned()).to_json(), "\"a\\\"b\"");
    }

    fn echo(_: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
        Ok(Answer::Plain(kwargs.get("a")?.clone()))
    }

    static K: Toolkit = Toolkit {
        class: "K",
        schemas: "[]",
        methods: &[
            tool("echo", &[("a", true), ("b", false)], echo),
            function("check", &[("a", true)], echo),
        ],
        attributes: &["_helper"],
    };

    /// `class K(ToolKitBase)` with tool `echo(a, b=None)`, function
    /// `check(a)` and a helper `_helper`.
    #[test]
    fn calls_and_invocations_reach_methods_as_the_reference_does() {
        let store = &mut MemoryStore::default();
        assert_eq!(K.call(store, "echo", r#"{"a": 1}"#), Ok("\"1\"".to_owned()));
        assert_eq!(K.invoke(store, "echo", r#"{"a": 1}"#), Ok("1".to_owned()));
        assert_eq!(
            K.call(store, "check", r#"{"a": 1}"#),
            Err("Tool 'check' not found.".to_owned())
        );
        assert_eq!(
            K.invoke(store, "check", r#"{"a": true}"#),
            Ok("true".to_owned())
        );
        assert_eq!(
            K.call(store, "echo", r#"{"b": 1}"#),
            Err("K.echo() missing 1 required positional argument: 'a'".to_owned())
        );
        assert_eq!(
            K.invoke(store, "check", r#"{"a": 1, "c": 2}"#),
            Err("K.check() got an unexpected keyword argument 'c'".to_owned())
        );
        for name in ["update_db", "_helper"] {
            assert_eq!(
                K.invoke(store, name, "{}"),
                Err(format!("K.{name} is not a function this component runs"))
            );
        }
        assert_eq!(
            K.invoke(store, "nope", "{}"),
            Err("'K' object has no attribute 'nope'".to_owned())
        );
    }
}
