//! Native tests of the shop environment: its tools against an in-memory store,
//! and its bundle (initial state and tasks) against its tools.

mod store;
mod tasks;
mod tools;
