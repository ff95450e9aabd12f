//! Stopping on Ctrl-C or SIGTERM (what `kubectl delete`, `docker stop` and
//! job schedulers send): long-running commands finish what they are doing
//! and leave their work in a state to continue from.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// A signal that asks the command to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// The status a process stopped by this signal exits with: 128 plus the
    /// signal's number, which shells and job schedulers read as "stopped
    /// by" it.
    pub fn exit_status(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }
}

/// The exit status of the first signal [`signal`] returned, 0 before any.
static RECEIVED: AtomicU8 = AtomicU8::new(0);

/// Ctrl-C or SIGTERM, whichever comes first.
pub async fn signal() -> Signal {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    let received = tokio::select! {
        _ = interrupt => Signal::Interrupt,
        _ = terminate => Signal::Terminate,
    };
    // Sequentially consistent with the stop flag's store ([`flag`]): work
    // that saw the flag sees the signal.
    let _ = RECEIVED.compare_exchange(
        0,
        received.exit_status(),
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    received
}

/// The exit status of work stopped by a signal: that of the first one
/// received (130 for Ctrl-C, 143 for SIGTERM).
pub fn stopped_status() -> u8 {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => Signal::Interrupt.exit_status(),
        status => status,
    }
}

/// How soon after the first signal another is taken for the same one
/// delivered twice ([`flag`]).
const ECHO: Duration = Duration::from_millis(250);

/// What work polling a [`flag`] stops with once it is set: told apart
/// from a failure, so that the command says where it stopped and exits
/// with the signal's status ([`stopped_status`]).
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted by Ctrl-C or SIGTERM")
    }
}

impl std::error::Error for Interrupted {}

/// Whether `err` is work stopped by a signal.
pub fn interrupted(err: &anyhow::Error) -> bool {
    err.downcast_ref::<Interrupted>().is_some()
}

/// The [`flag`] of commands that play episodes: no episode starts once it
/// is set, and those under way finish and are kept.
pub fn episodes_flag() -> std::io::Result<Arc<AtomicBool>> {
    flag(|| {
        eprintln!(
            "\nstopping: the episodes under way finish and are kept (Ctrl-C again stops at once)"
        );
    })
}

/// A flag that the first Ctrl-C or SIGTERM sets, for synchronous work to
/// poll at its next safe point; `on_first` runs then (to say what happens
/// next). A second signal ends the process at once, for when the safe point
/// is too far off, saying so — unless it comes within [`ECHO`] of the
/// first: `timeout` and some supervisors send a signal to the command and
/// again to its process group, one request delivered twice.
pub fn flag(on_first: impl FnOnce() + Send + 'static) -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    on_signal(move |runtime| {
        let first = Instant::now();
        set.store(true, Ordering::SeqCst);
        on_first();
        runtime.block_on(another_signal(first));
        stop_at_once();
    })?;
    Ok(flag)
}

/// The next Ctrl-C or SIGTERM after the first, received at `first`: one
/// within [`ECHO`] of it is the same request delivered twice.
pub async fn another_signal(first: Instant) {
    loop {
        signal().await;
        if first.elapsed() >= ECHO {
            return;
        }
    }
}

/// Ends the process at once, as a second signal asks, saying so.
pub fn stop_at_once() -> ! {
    eprintln!("\nstopped at once: what was under way is not kept");
    std::process::exit(i32::from(stopped_status()));
}

/// Runs `then` on a thread of its own at the first Ctrl-C or SIGTERM, for
/// work that blocks where no flag is polled (a read of stdin); `then` gets
/// the runtime the signal was awaited on, to await another.
pub fn on_signal(
    then: impl FnOnce(&tokio::runtime::Runtime) + Send + 'static,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("forge-shutdown".into())
        .spawn(move || {
            runtime.block_on(signal());
            then(&runtime);
        })?;
    Ok(())
}
