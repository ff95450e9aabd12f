//! What goes wrong with a request, and the HTTP status each answers with.

use axum::http::StatusCode;
use std::time::Duration;

/// A request the server refuses; every protocol reports it with its message.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("no session `{0}` (it was closed, it expired, or it never existed)")]
    UnknownSession(String),
    #[error(
        "the server is full (`--max-sessions` {max}: {sessions} open, {waiting} promised to connections yet to reset); close a session or retry later"
    )]
    Full {
        sessions: usize,
        waiting: usize,
        max: usize,
    },
    #[error(
        "session `{id}` is over its rate of {rate} steps per second; retry in {:.2} s",
        retry_after.as_secs_f64()
    )]
    RateLimited {
        id: String,
        rate: f64,
        /// Until the session's rate allows another step.
        retry_after: Duration,
    },
    #[error("the episode of session `{0}` is over; reset to start another")]
    EpisodeOver(String),
    #[error("session `{0}` is busy with another request; send one at a time")]
    Busy(String),
    #[error(
        "session `{0}` is held by another connection, whose episode this would step or end; \
         act in a session of your own (reset under another `episode_id`, or none, for a \
         fresh one)"
    )]
    Held(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("{0:#}")]
    Internal(anyhow::Error),
}

impl ServeError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::UnknownSession(_) | Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Full { .. } | Self::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::EpisodeOver(_) | Self::Busy(_) | Self::Held(_) => StatusCode::CONFLICT,
            Self::BadRequest(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// How long a client should wait before it asks again, where that is
    /// known (HTTP's `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// A short machine-readable name of the error, for clients and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownSession(_) => "unknown_session",
            Self::Full { .. } => "too_many_sessions",
            Self::RateLimited { .. } => "rate_limited",
            Self::EpisodeOver(_) => "episode_over",
            Self::Busy(_) => "session_busy",
            Self::Held(_) => "session_held",
            Self::BadRequest(_) => "bad_request",
            Self::NotFound(_) => "not_found",
            Self::ShuttingDown => "shutting_down",
            Self::Internal(_) => "internal",
        }
    }
}
