//! `forge serve`: Forge environments for agents and trainers elsewhere — the
//! OpenEnv HTTP/WebSocket environment API and the Model Context Protocol
//! over one table of sessions, each an episode in its own sandbox instance.

pub mod catalog;
mod connections;
mod error;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod openenv;
pub mod origin;
pub mod sessions;
pub mod stdio;
mod ws;

pub use error::ServeError;
pub use sessions::{Hub, OpenRequest, SessionLimits, UserFactory};
