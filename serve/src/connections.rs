//! Accepting HTTP connections. Each is served by hyper with deadlines on
//! what the client sends — a request's headers, and each pause within its
//! body — so that a client that connects and then stalls, or trickles its
//! bytes, cannot hold a connection (and its file descriptor) for good. An
//! idle keep-alive connection is waiting for headers, so it closes after
//! the same deadline. At most so many connections are served at once; more
//! wait in the listener's backlog until one closes.

use crate::http::HttpOptions;
use axum::Router;
use axum::serve::Listener;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::error::Error;
use std::pin::pin;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower_http::timeout::{RequestBodyTimeout, TimeoutError};

/// Serves `router` on every connection `listener` accepts until `stopping`
/// turns true; then stops accepting, lets each connection finish the
/// request it is serving, and returns once all have closed or the
/// shutdown grace is over, dropping those still open. (An upgraded
/// WebSocket is no longer hyper's, nor counted here: it watches `stopping`
/// itself, and sessions are capped by the hub.)
pub(crate) async fn accept(
    mut listener: impl Listener,
    router: Router,
    options: &HttpOptions,
    stopping: watch::Receiver<bool>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.read_timeout);
    let service = TowerToHyperService::new(RequestBodyTimeout::new(router, options.read_timeout));
    let mut connections = JoinSet::new();
    let mut stop = stopping.clone();
    loop {
        // Reap the connections that have closed, so that the set holds only
        // the open ones.
        while connections.try_join_next().is_some() {}
        if connections.len() >= options.max_connections {
            tokio::select! {
                _ = connections.join_next() => continue,
                _ = stop.wait_for(|stop| *stop) => break,
            }
        }
        let (io, _) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let connection = http
            .serve_connection(TokioIo::new(io), service.clone())
            .with_upgrades();
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            let mut connection = pin!(connection);
            let finished = tokio::select! {
                result = connection.as_mut() => Some(result),
                _ = stopping.wait_for(|stop| *stop) => None,
            };
            let result = match finished {
                Some(result) => result,
                None => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = result {
                tracing::debug!(%err, "connection ended");
            }
        });
    }
    drop(listener);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(options.shutdown_grace, drained)
        .await
        .is_err()
    {
        tracing::warn!(
            connections = connections.len(),
            "dropping the connections still open after {} s",
            options.shutdown_grace.as_secs_f64()
        );
    }
}

/// Whether a body could not be read because the client paused sending it
/// for longer than the read timeout.
pub(crate) fn stalled(err: &(dyn Error + 'static)) -> bool {
    std::iter::successors(Some(err), |&err| err.source()).any(|err| err.is::<TimeoutError>())
}
