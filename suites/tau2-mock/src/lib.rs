//! τ²-bench `mock`: a small task tracker with a user-side notification inbox,
//! as a Forge component.
//!
//! The agent's database (`MockDB`) has two tables, `tasks` and `users`; the
//! user's (`MockUserDB`) has one, `notifications`, held in the store as
//! collection `user_db.notifications`. Records are kept as the reference's
//! pydantic models dump them (model field order, a missing description as
//! `null`), and records the functions create are written in that order.
//!
//! Every function reproduces the reference's answer and database change
//! exactly, down to Python's errors for malformed calls: a missing or
//! unexpected keyword is the `TypeError` of the bound method
//! (`MockTools.create_task() missing 1 required positional argument: 'title'`),
//! an id that is a list or a dict is unhashable, any other non-string id is
//! not found (`User 1.0 not found`), a title that is not a string is pydantic's
//! `ValidationError` for `Task`. The reference checks no argument types
//! beyond those, so `update_task_status` stores whatever status it is given,
//! as the reference does.
//!
//! The tools (`call`) are the methods the reference marks with `@is_tool`; the
//! host-only functions (`invoke`, for tasks' `initialization_actions` and
//! `env_assertions`) are every method of the toolkit class, tools included, as
//! the reference's `getattr(toolkit, func_name)` finds them. The mock
//! environment does not override `Environment.sync_tools`, so `sync` does
//! nothing. The tool schemas are the reference's (`tools.json`,
//! `user_tools.json`, from τ²-bench, MIT licence, © 2025 Sierra).
//!
//! Listings (`get_users`, `check_notifications`) come in the host's key order
//! (bytes), the reference's in insertion order; they differ only for tables
//! that gain keys out of byte order (`task_10` after `task_9`), which no task
//! of the suite reaches.

use forge_guest::{Actor, Store};
use forge_tau_guest::{Data, Num, dumps, list_mut, repr, set, type_name};
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};

/// The agent's tool schemas, in the reference's order.
pub const AGENT_SCHEMAS: &str = include_str!("../tools.json");

/// The user's tool schemas, in the reference's order.
pub const USER_SCHEMAS: &str = include_str!("../user_tools.json");

const TASKS: &str = "tasks";
const USERS: &str = "users";
const NOTIFICATIONS: &str = "user_db.notifications";

/// What a function returns, as Python holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A `str`.
    Text(String),
    /// A `bool`.
    Bool(bool),
    /// A pydantic model or a list of them, as `model_dump()` gives them.
    Model(Value),
}

impl Answer {
    /// `Environment.to_json_str(answer)`: what the caller of a tool sees (a
    /// bool becomes the string `str(flag)`, which is then JSON-encoded).
    pub fn to_json_str(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Bool(true) => "\"True\"".to_owned(),
            Self::Bool(false) => "\"False\"".to_owned(),
            Self::Model(value) => dumps(value),
        }
    }

    /// The answer as JSON text (`json.dumps` of the value): what `invoke`
    /// answers.
    pub fn to_json(&self) -> String {
        match self {
            Self::Text(text) => dumps(&Value::String(text.clone())),
            Self::Bool(flag) => dumps(&Value::Bool(*flag)),
            Self::Model(value) => dumps(value),
        }
    }
}

type Run = fn(&mut Data<'_>, &Args) -> Result<Answer, String>;

/// A method of a toolkit class.
struct Method {
    name: &'static str,
    /// The keyword parameters in signature order, and whether each is required.
    parameters: &'static [(&'static str, bool)],
    /// Whether the reference marks it `@is_tool`.
    tool: bool,
    run: Run,
}

/// A toolkit class: `MockTools` (the agent's) or `MockUserTools` (the user's).
struct Toolkit {
    class: &'static str,
    methods: &'static [Method],
}

static AGENT: Toolkit = Toolkit {
    class: "MockTools",
    methods: &[
        Method {
            name: "create_task",
            parameters: &[("user_id", true), ("title", true), ("description", false)],
            tool: true,
            run: create_task,
        },
        Method {
            name: "get_users",
            parameters: &[],
            tool: true,
            run: get_users,
        },
        Method {
            name: "update_task_status",
            parameters: &[("task_id", true), ("status", true)],
            tool: true,
            run: update_task_status,
        },
        Method {
            name: "assert_number_of_tasks",
            parameters: &[("user_id", true), ("expected_number", true)],
            tool: false,
            run: assert_number_of_tasks,
        },
        Method {
            name: "assert_task_status",
            parameters: &[("task_id", true), ("expected_status", true)],
            tool: false,
            run: assert_task_status,
        },
        Method {
            name: "transfer_to_human_agents",
            parameters: &[("summary", true)],
            tool: true,
            run: transfer_to_human_agents,
        },
    ],
};

static USER: Toolkit = Toolkit {
    class: "MockUserTools",
    methods: &[
        Method {
            name: "check_notifications",
            parameters: &[],
            tool: true,
            run: check_notifications,
        },
        Method {
            name: "dismiss_notification",
            parameters: &[("notification_id", true)],
            tool: true,
            run: dismiss_notification,
        },
        Method {
            name: "add_notification",
            parameters: &[
                ("notification_id", true),
                ("message", true),
                ("task_id", false),
            ],
            tool: false,
            run: add_notification,
        },
        Method {
            name: "assert_notification_status",
            parameters: &[("notification_id", true), ("expected_status", true)],
            tool: false,
            run: assert_notification_status,
        },
    ],
};

/// What every toolkit inherits from `ToolKitBase`: attributes `getattr` finds
/// that are no function a task could sensibly invoke.
const INHERITED: &[&str] = &[
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

fn toolkit(actor: Actor) -> &'static Toolkit {
    match actor {
        Actor::Agent => &AGENT,
        Actor::User => &USER,
    }
}

/// The tool schemas of `actor` (the component's `describe`).
pub fn describe(actor: Actor) -> String {
    match actor {
        Actor::Agent => AGENT_SCHEMAS.to_owned(),
        Actor::User => USER_SCHEMAS.to_owned(),
    }
}

/// Runs a tool of `actor` the way `Environment.get_response` does (the
/// component's `call`): the answer is `Environment.to_json_str` of the
/// result, an error the exception's text.
pub fn call(store: &mut dyn Store, actor: Actor, name: &str, args: &str) -> Result<String, String> {
    let toolkit = toolkit(actor);
    let Some(method) = toolkit
        .methods
        .iter()
        .find(|method| method.tool && method.name == name)
    else {
        return Err(format!("Tool '{name}' not found."));
    };
    run(toolkit, method, store, args).map(|answer| answer.to_json_str())
}

/// Runs any function of `actor`'s toolkit the way
/// `Environment.run_env_function_call` does (the component's `invoke`),
/// answering the return value as JSON text.
pub fn invoke(
    store: &mut dyn Store,
    actor: Actor,
    name: &str,
    args: &str,
) -> Result<String, String> {
    let toolkit = toolkit(actor);
    let Some(method) = toolkit.methods.iter().find(|method| method.name == name) else {
        if INHERITED.contains(&name) {
            return Err(format!(
                "{}.{name} is not a function this component runs",
                toolkit.class
            ));
        }
        return Err(format!(
            "'{}' object has no attribute '{name}'",
            toolkit.class
        ));
    };
    run(toolkit, method, store, args).map(|answer| answer.to_json())
}

/// `MockEnvironment.sync_tools`: the mock domain keeps the base class's, which
/// does nothing (the component's `sync`).
pub fn sync(_: &mut dyn Store) -> Result<(), String> {
    Ok(())
}

forge_guest::export_component!(describe, call, invoke, sync);

/// Binds the keyword arguments `args` to `method`'s parameters as Python
/// does, then runs it.
fn run(
    toolkit: &Toolkit,
    method: &Method,
    store: &mut dyn Store,
    args: &str,
) -> Result<Answer, String> {
    let args = Args::bind(toolkit, method, args)?;
    (method.run)(&mut Data::new(store), &args)
}

/// The keyword arguments of a call, bound to the method's parameters.
struct Args {
    map: Map<String, Value>,
}

impl Args {
    /// Refuses an unexpected keyword, then missing required parameters, with
    /// the `TypeError` texts of `Class.method()`.
    fn bind(toolkit: &Toolkit, method: &Method, text: &str) -> Result<Self, String> {
        let map = match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("arguments must be a JSON object".to_owned()),
            Err(err) => return Err(format!("arguments are not valid JSON: {err}")),
        };
        let callee = format!("{}.{}", toolkit.class, method.name);
        if let Some(unexpected) = map
            .keys()
            .find(|key| !method.parameters.iter().any(|(name, _)| name == key))
        {
            return Err(format!(
                "{callee}() got an unexpected keyword argument '{unexpected}'"
            ));
        }
        let missing: Vec<String> = method
            .parameters
            .iter()
            .filter(|(name, required)| *required && !map.contains_key(*name))
            .map(|(name, _)| format!("'{name}'"))
            .collect();
        if !missing.is_empty() {
            let plural = if missing.len() == 1 { "" } else { "s" };
            return Err(format!(
                "{callee}() missing {} required positional argument{plural}: {}",
                missing.len(),
                python_list(&missing)
            ));
        }
        Ok(Self { map })
    }

    /// Parameter `name`; `None` for an optional parameter not passed.
    fn get(&self, name: &str) -> &Value {
        self.map.get(name).unwrap_or(&Value::Null)
    }
}

/// `'a'`, `'a' and 'b'`, `'a', 'b', and 'c'`: how Python lists missing arguments.
fn python_list(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [first, second] => format!("{first} and {second}"),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

/// `str(value)`.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => py_repr(other),
    }
}

/// `repr(value)`.
fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        // Integers past `i64` stay exact, as Python's do.
        Value::Number(number) if number.is_u64() => number.to_string(),
        Value::Number(number) => match Num::from_value(value) {
            Some(num) => num.to_python_string(),
            None => number.to_string(),
        },
        Value::String(text) => repr(text),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{}: {}", repr(key), py_repr(value)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// Python's `a == b` on JSON values: numbers by value (`True == 1 == 1.0`),
/// containers element by element.
fn py_eq(a: &Value, b: &Value) -> bool {
    fn number(value: &Value) -> Option<Num> {
        match value {
            Value::Bool(flag) => Some(Num::Int(i64::from(*flag))),
            _ => Num::from_value(value),
        }
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| py_eq(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, value)| b.get(key).is_some_and(|other| py_eq(value, other)))
        }
        _ => match (number(a), number(b)) {
            (Some(Num::Int(a)), Some(Num::Int(b))) => a == b,
            (Some(a), Some(b)) => a.as_f64() == b.as_f64(),
            _ => false,
        },
    }
}

/// `value in table` for a dict keyed by strings: the key when present,
/// Python's `TypeError` for an unhashable value.
fn lookup(data: &Data<'_>, table: &str, value: &Value) -> Result<Option<String>, String> {
    match value {
        Value::String(key) => Ok(data.contains(table, key).then(|| key.clone())),
        Value::Array(_) | Value::Object(_) => {
            Err(format!("unhashable type: '{}'", type_name(value)))
        }
        _ => Ok(None),
    }
}

/// The key of `value` in `table`, or the reference's `"{noun} {value} not found"`.
fn find(data: &Data<'_>, table: &str, value: &Value, noun: &str) -> Result<String, String> {
    lookup(data, table, value)?.ok_or_else(|| format!("{noun} {} not found", py_str(value)))
}

/// Pydantic's validation of a model's `str` fields (`Optional[str]` ones
/// accepting `None`), with its `ValidationError` text.
fn validate_strings(model: &str, fields: &[(&str, &Value, bool)]) -> Result<(), String> {
    let invalid: Vec<_> = fields
        .iter()
        .filter(|(_, value, optional)| !(value.is_string() || *optional && value.is_null()))
        .collect();
    if invalid.is_empty() {
        return Ok(());
    }
    let plural = if invalid.len() == 1 { "" } else { "s" };
    let mut text = format!("{} validation error{plural} for {model}", invalid.len());
    for (field, value, _) in invalid {
        text.push_str(&format!(
            "\n{field}\n  Input should be a valid string [type=string_type, input_value={}, input_type={}]\n    For further information visit https://errors.pydantic.dev/2.12/v/string_type",
            truncate(&py_repr(value)),
            type_name(value),
        ));
    }
    Err(text)
}

/// Pydantic shortens an `input_value` longer than 50 characters to its first
/// 25 and last 24.
fn truncate(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 50 {
        return text.to_owned();
    }
    let head: String = chars[..25].iter().collect();
    let tail: String = chars[chars.len() - 24..].iter().collect();
    format!("{head}...{tail}")
}

/// Every record of `table`, as `list(table.values())` dumps them.
fn all(data: &Data<'_>, table: &str) -> Result<Answer, String> {
    let records = data
        .scan::<Value>(table)?
        .into_iter()
        .map(|(_, record)| record)
        .collect();
    Ok(Answer::Model(Value::Array(records)))
}

fn create_task(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let (title, description) = (args.get("title"), args.get("description"));
    let user_id = find(data, USERS, args.get("user_id"), "User")?;
    let task_id = format!("task_{}", data.scan::<IgnoredAny>(TASKS)?.len() + 1);
    validate_strings(
        "Task",
        &[("title", title, false), ("description", description, true)],
    )?;
    let task = json!({
        "task_id": task_id,
        "title": title,
        "description": description,
        "status": "pending",
    });
    data.put(TASKS, &task_id, &task)?;
    let mut user = data.require(USERS, &user_id)?;
    list_mut(&mut user, "tasks")?.push(Value::String(task_id));
    data.put(USERS, &user_id, &user)?;
    Ok(Answer::Model(task))
}

fn get_users(data: &mut Data<'_>, _: &Args) -> Result<Answer, String> {
    all(data, USERS)
}

fn update_task_status(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let task_id = find(data, TASKS, args.get("task_id"), "Task")?;
    let mut task = data.require(TASKS, &task_id)?;
    // Plain attribute assignment: pydantic does not validate it.
    set(&mut task, "status", args.get("status").clone());
    data.put(TASKS, &task_id, &task)?;
    Ok(Answer::Model(task))
}

fn assert_number_of_tasks(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let user_id = find(data, USERS, args.get("user_id"), "User")?;
    let user = data.require(USERS, &user_id)?;
    let count = user
        .get("tasks")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    Ok(Answer::Bool(py_eq(
        &Value::from(count),
        args.get("expected_number"),
    )))
}

fn assert_task_status(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let task_id = find(data, TASKS, args.get("task_id"), "Task")?;
    let task = data.require(TASKS, &task_id)?;
    let status = task.get("status").unwrap_or(&Value::Null);
    Ok(Answer::Bool(py_eq(status, args.get("expected_status"))))
}

fn transfer_to_human_agents(_: &mut Data<'_>, _: &Args) -> Result<Answer, String> {
    Ok(Answer::Text("Transfer successful".to_owned()))
}

fn check_notifications(data: &mut Data<'_>, _: &Args) -> Result<Answer, String> {
    all(data, NOTIFICATIONS)
}

fn dismiss_notification(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let id = find(
        data,
        NOTIFICATIONS,
        args.get("notification_id"),
        "Notification",
    )?;
    let mut notification = data.require(NOTIFICATIONS, &id)?;
    set(&mut notification, "status", json!("read"));
    data.put(NOTIFICATIONS, &id, &notification)?;
    Ok(Answer::Text(format!("Notification {id} dismissed")))
}

fn add_notification(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let (id, message, task_id) = (
        args.get("notification_id"),
        args.get("message"),
        args.get("task_id"),
    );
    validate_strings(
        "Notification",
        &[
            ("notification_id", id, false),
            ("message", message, false),
            ("task_id", task_id, true),
        ],
    )?;
    let notification = json!({
        "notification_id": id,
        "message": message,
        "status": "unread",
        "task_id": task_id,
    });
    let key = id.as_str().unwrap_or_default();
    data.put(NOTIFICATIONS, key, &notification)?;
    Ok(Answer::Model(notification))
}

fn assert_notification_status(data: &mut Data<'_>, args: &Args) -> Result<Answer, String> {
    let id = find(
        data,
        NOTIFICATIONS,
        args.get("notification_id"),
        "Notification",
    )?;
    let notification = data.require(NOTIFICATIONS, &id)?;
    let status = notification.get("status").unwrap_or(&Value::Null);
    Ok(Answer::Bool(py_eq(status, args.get("expected_status"))))
}

#[cfg(test)]
mod tests;
