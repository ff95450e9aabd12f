//! τ²-bench `banking_knowledge`: a retail bank's customer service, whose
//! procedures the agent must find in a knowledge base, as a Forge component.
//!
//! The database (`TransactionalDB`) is twenty-three tables, each held whole
//! as one record of collection `db` (see [`db`]); the agent's toolkit
//! (`KnowledgeTools`, [`agent`]) and the user's (`KnowledgeUserTools`,
//! [`user`]) share it. Beyond their fixed tools, both reach *discoverable*
//! tools that the schemas do not list: the knowledge base names them, the
//! agent unlocks its own and gives the user theirs ([`discoverable`]). The
//! agent searches the knowledge base with `grep` ([`knowledge`]).
//!
//! Every tool reproduces the reference's answer and database change
//! exactly on the tasks' gold actions; the tool schemas and the discoverable
//! tools' docs are the reference's (`tools.json`, `user_tools.json`,
//! `discoverable.json`, from τ²-bench, MIT licence, © 2025 Sierra), as the
//! "grep_only" retrieval variant builds them.
//!
//! Known differences from the reference:
//! - Malformed JSON in a tool's `arguments` or constraints is refused with
//!   the same sentence, but the parser's own explanation after it is
//!   serde_json's, not Python's `JSONDecodeError` text.
//! - A call the reference fails with an exception after writing part of
//!   its change keeps that part in Python; here a failed call changes
//!   nothing, as the host discards its writes. (A discoverable tool's
//!   `TypeError` is no failure: its caller answers it, and what the tool
//!   wrote stays, as in Python.)
//! - `grep` patterns are Rust `regex` syntax, not Python `re`: the common
//!   subset (classes, alternation, repetition, anchors) is the same, but a
//!   pattern with look-around or back-references, which `regex` lacks, is
//!   searched as plain text, as the reference searches a pattern `re`
//!   refuses. Documents a search ranks equal come in id order; the
//!   reference's come in the order its directory listing gave.

mod agent;
mod dates;
mod db;
mod discoverable;
mod ids;
mod knowledge;
mod py;
mod user;

use agent::AGENT;
use user::USER;

forge_tau_guest::export_toolkits!(AGENT, USER, forge_guest::no_sync);
