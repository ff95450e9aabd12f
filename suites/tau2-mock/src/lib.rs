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
//! environment does not override `Environment.sync_tools`, so its `sync` is
//! `forge_guest::no_sync`. The tool schemas are the reference's (`tools.json`,
//! `user_tools.json`, from τ²-bench, MIT licence, © 2025 Sierra).
//!
//! Listings (`get_users`, `check_notifications`) come in the host's key order
//! (bytes), the reference's in insertion order; they differ only for tables
//! that gain keys out of byte order (`task_10` after `task_9`), which no task
//! of the suite reaches.

use forge_tau_guest::model::{Kind, build};
use forge_tau_guest::toolkit::{Answer, Toolkit, function, tool};
use forge_tau_guest::{Data, Kwargs, dict_key, list_mut, py_eq, py_str, set, str_field};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

const TASKS: &str = "tasks";
const USERS: &str = "users";
const NOTIFICATIONS: &str = "user_db.notifications";

/// The pydantic model `Task`.
const TASK: &[(&str, Kind)] = &[
    ("task_id", Kind::Str),
    ("title", Kind::Str),
    ("description", Kind::Optional(&Kind::Str)),
    ("status", Kind::Enum(&["pending", "completed"])),
];

/// The pydantic model `Notification`.
const NOTIFICATION: &[(&str, Kind)] = &[
    ("notification_id", Kind::Str),
    ("message", Kind::Str),
    ("status", Kind::Enum(&["unread", "read"])),
    ("task_id", Kind::Optional(&Kind::Str)),
];

/// `MockTools`, the agent's toolkit: its tools in the reference's order, then
/// its other methods.
static AGENT: Toolkit = Toolkit {
    class: "MockTools",
    schemas: include_str!("../tools.json"),
    methods: &[
        tool(
            "create_task",
            &[("user_id", true), ("title", true), ("description", false)],
            create_task,
        ),
        tool("get_users", &[], get_users),
        tool(
            "update_task_status",
            &[("task_id", true), ("status", true)],
            update_task_status,
        ),
        function(
            "assert_number_of_tasks",
            &[("user_id", true), ("expected_number", true)],
            assert_number_of_tasks,
        ),
        function(
            "assert_task_status",
            &[("task_id", true), ("expected_status", true)],
            assert_task_status,
        ),
        tool(
            "transfer_to_human_agents",
            &[("summary", true)],
            transfer_to_human_agents,
        ),
    ],
    attributes: &[],
};

/// `MockUserTools`, the user's toolkit.
static USER: Toolkit = Toolkit {
    class: "MockUserTools",
    schemas: include_str!("../user_tools.json"),
    methods: &[
        tool("check_notifications", &[], check_notifications),
        tool(
            "dismiss_notification",
            &[("notification_id", true)],
            dismiss_notification,
        ),
        function(
            "add_notification",
            &[
                ("notification_id", true),
                ("message", true),
                ("task_id", false),
            ],
            add_notification,
        ),
        function(
            "assert_notification_status",
            &[("notification_id", true), ("expected_status", true)],
            assert_notification_status,
        ),
    ],
    attributes: &[],
};

forge_tau_guest::export_toolkits!(AGENT, USER, forge_guest::no_sync);

/// The key of `value` in `table`, or the reference's `"{noun} {value} not found"`.
fn find(data: &Data<'_>, table: &str, value: &Value, noun: &str) -> Result<String, String> {
    match dict_key(value)? {
        Some(key) if data.contains(table, key) => Ok(key.to_owned()),
        _ => Err(format!("{noun} {} not found", py_str(value))),
    }
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

fn create_task(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let user_id = find(data, USERS, kwargs.get("user_id")?, "User")?;
    let task_id = format!("task_{}", data.scan::<IgnoredAny>(TASKS)?.len() + 1);
    let task = build(
        "Task",
        TASK,
        &json!({
            "task_id": task_id,
            "title": kwargs.get("title")?,
            "description": kwargs.optional("description"),
            "status": "pending",
        }),
    )?;
    data.put(TASKS, &task_id, &task)?;
    let mut user = data.require(USERS, &user_id)?;
    list_mut(&mut user, "tasks")?.push(Value::String(task_id));
    data.put(USERS, &user_id, &user)?;
    Ok(Answer::Model(task))
}

fn get_users(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    all(data, USERS)
}

fn update_task_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let task_id = find(data, TASKS, kwargs.get("task_id")?, "Task")?;
    let mut task = data.require(TASKS, &task_id)?;
    // Plain attribute assignment: pydantic does not validate it.
    set(&mut task, "status", kwargs.get("status")?.clone());
    data.put(TASKS, &task_id, &task)?;
    Ok(Answer::Model(task))
}

fn assert_number_of_tasks(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let user_id = find(data, USERS, kwargs.get("user_id")?, "User")?;
    let user = data.require(USERS, &user_id)?;
    let count = user
        .get("tasks")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    Ok(Answer::Bool(py_eq(
        &Value::from(count),
        kwargs.get("expected_number")?,
    )))
}

fn assert_task_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let task_id = find(data, TASKS, kwargs.get("task_id")?, "Task")?;
    let task = data.require(TASKS, &task_id)?;
    let status = task.get("status").unwrap_or(&Value::Null);
    Ok(Answer::Bool(py_eq(status, kwargs.get("expected_status")?)))
}

fn transfer_to_human_agents(_: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    Ok(Answer::Text("Transfer successful".to_owned()))
}

fn check_notifications(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    all(data, NOTIFICATIONS)
}

fn dismiss_notification(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let id = find(
        data,
        NOTIFICATIONS,
        kwargs.get("notification_id")?,
        "Notification",
    )?;
    let mut notification = data.require(NOTIFICATIONS, &id)?;
    set(&mut notification, "status", json!("read"));
    data.put(NOTIFICATIONS, &id, &notification)?;
    Ok(Answer::Text(format!("Notification {id} dismissed")))
}

fn add_notification(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let notification = build(
        "Notification",
        NOTIFICATION,
        &json!({
            "notification_id": kwargs.get("notification_id")?,
            "message": kwargs.get("message")?,
            "status": "unread",
            "task_id": kwargs.optional("task_id"),
        }),
    )?;
    data.put(
        NOTIFICATIONS,
        str_field(&notification, "notification_id")?,
        &notification,
    )?;
    Ok(Answer::Model(notification))
}

fn assert_notification_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let id = find(
        data,
        NOTIFICATIONS,
        kwargs.get("notification_id")?,
        "Notification",
    )?;
    let notification = data.require(NOTIFICATIONS, &id)?;
    let status = notification.get("status").unwrap_or(&Value::Null);
    Ok(Answer::Bool(py_eq(status, kwargs.get("expected_status")?)))
}

#[cfg(test)]
mod tests;
