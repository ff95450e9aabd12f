//! `/metrics`: the server's counters in Prometheus' text format.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// Every metric the server keeps. Rates (steps/s) are the scraper's
/// `rate()` of the counters.
pub struct Metrics {
    registry: Registry,
    /// Sessions open now.
    pub sessions: Gauge,
    pub sessions_opened: Counter,
    /// Sessions ended, by how: `closed`, `evicted`, `expired`, `shutdown`.
    pub sessions_ended: Family<KindLabel, Counter>,
    /// Agent actions taken, by kind: `tool_call`, `message`.
    pub steps: Family<KindLabel, Counter>,
    /// Seconds an agent action took in the server (the sandbox, the
    /// simulated user, judging the episode when it ends).
    pub step_seconds: Histogram,
    /// Tool calls the sandbox stopped (fuel, memory, traps, …).
    pub sandbox_errors: Counter,
    /// Episodes judged, by termination.
    pub episodes: Family<KindLabel, Counter>,
    /// Judged episodes `--out` could not take (a full disk): lost.
    pub unrecorded_episodes: Counter,
    /// Requests refused, by error code (see `ServeError::code`).
    refused: Family<KindLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("forge");
        let sessions = Gauge::default();
        registry.register("sessions", "Sessions open now", sessions.clone());
        let sessions_opened = Counter::default();
        registry.register(
            "sessions_opened",
            "Sessions opened",
            sessions_opened.clone(),
        );
        let sessions_ended = Family::<KindLabel, Counter>::default();
        registry.register(
            "sessions_ended",
            "Sessions ended, by how (closed, evicted, expired, shutdown)",
            sessions_ended.clone(),
        );
        let steps = Family::<KindLabel, Counter>::default();
        registry.register(
            "steps",
            "Agent actions taken, by kind (tool_call, message)",
            steps.clone(),
        );
        // 20 µs to about 5 s.
        let step_seconds = Histogram::new(exponential_buckets(20e-6, 2.0, 18));
        registry.register(
            "step_seconds",
            "Seconds an agent action took in the server",
            step_seconds.clone(),
        );
        let sandbox_errors = Counter::default();
        registry.register(
            "sandbox_errors",
            "Tool calls the sandbox stopped",
            sandbox_errors.clone(),
        );
        let episodes = Family::<KindLabel, Counter>::default();
        registry.register(
            "episodes",
            "Episodes judged, by termination",
            episodes.clone(),
        );
        let unrecorded_episodes = Counter::default();
        registry.register(
            "unrecorded_episodes",
            "Judged episodes whose trajectory could not be written to --out",
            unrecorded_episodes.clone(),
        );
        let refused = Family::<KindLabel, Counter>::default();
        registry.register(
            "refused_requests",
            "Requests refused, by error code",
            refused.clone(),
        );
        Self {
            registry,
            sessions,
            sessions_opened,
            sessions_ended,
            steps,
            step_seconds,
            sandbox_errors,
            episodes,
            unrecorded_episodes,
            refused,
        }
    }
}

impl Metrics {
    pub fn kind(kind: &str) -> KindLabel {
        KindLabel { kind: kind.into() }
    }

    /// Counts a request refused with error `code`.
    pub fn refuse(&self, code: &str) {
        self.refused.get_or_create(&Self::kind(code)).inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}
