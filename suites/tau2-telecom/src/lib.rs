//! τ²-bench `telecom`: a mobile carrier's support desk and the customer's
//! phone, as a Forge component.
//!
//! Two toolkits share the state. The agent's (`TelecomTools`) works on the
//! carrier's database, `TelecomDB`: five lists (`plans`, `customers`,
//! `lines`, `bills`, `devices`), each held whole as one record of
//! collection `db`. The user's (`TelecomUserTools`) works on the user's
//! database, `TelecomUserDB`: the phone's settings (`device`) and its
//! surroundings (`surroundings`: the user's number, whether they are abroad,
//! the signal there, a pending payment request), records of collection
//! `user_db`. Records are kept as the reference's pydantic models dump them
//! (model field order, unset optional fields as `null`, dates as `str()`
//! writes them), and records the methods create are written in that order.
//!
//! The component reproduces the reference's answers and state changes
//! exactly: tools (`call`) answer as `Environment.to_json_str` renders the
//! result, including the status bar the user's tools report after a
//! change; every other method of either toolkit (`invoke`: the
//! `initialization_actions` that break a task's phone or account, the
//! `env_assertions` that check the repair) answers its return value as
//! JSON; `sync` is `TelecomEnvironment.sync_tools`. Malformed calls get
//! Python's errors (`TypeError`s for missing or unexpected arguments,
//! `Tool 'x' not found.`, pydantic's `ValidationError` for APN settings).
//! The tool schemas are the reference's (`tools.json`, `user_tools.json`,
//! from τ²-bench, MIT licence, © 2025 Sierra).
//!
//! The host builds the initial records from the database files with the
//! models' JSON schemas: `db.schema.json` is `TelecomDB.model_json_schema()`,
//! `user_db.schema.json` is `TelecomUserDB.model_json_schema()` with one
//! addition, the values the `default_factory` of the two dict fields
//! (`MockPhoneAttributes.app_statuses`, `UserSurroundings.signal_strength`)
//! builds, as their `default`: pydantic leaves factories out of a schema,
//! and `user_db.toml` has no `surroundings`, so without it the user would
//! start with no signal anywhere.
//!
//! Known differences from the reference:
//! - `refuel_data` for a customer without a draft bill opens one whose id
//!   the reference draws from `uuid4`; here it is the first free id of
//!   `B00000001`, `B00000002`, … (no randomness in the sandbox). No task
//!   reaches this: the tasks' customer has a draft bill.
//! - The reference's `connect_vpn` hands out one shared default-server
//!   object that `break_vpn` degrades in place, so after any `break_vpn` in
//!   a Python process every later connection is poor. Here a connection
//!   always gets the excellent default server.
//! - A call the reference fails after writing part of its change (a
//!   mode or APN settings that are no string or dict, a dangling id met
//!   half-way through `refuel_data` or `sync`) keeps that part in Python;
//!   here a failed call changes nothing, as the host discards its writes.
//! - Setup functions that assign their arguments unvalidated
//!   (`set_user_info`, `set_user_location`, `set_wifi_calling`) refuse
//!   values of a type the typed phone record cannot hold.

mod agent;
mod python;
mod sync;
mod user;

#[cfg(test)]
mod tests;

use agent::AGENT;
use forge_guest::Store;
use forge_tau_guest::Data;
use user::USER;

/// `TelecomEnvironment.sync_tools` (the component's `sync`).
pub fn sync(store: &mut dyn Store) -> Result<(), String> {
    sync::sync_tools(&mut Data::new(store))
}

forge_tau_guest::export_toolkits!(AGENT, USER, sync);
