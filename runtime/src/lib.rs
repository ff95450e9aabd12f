//! The Forge runtime: sandboxed tool environments, episodes, trajectories,
//! verification and replay.
//!
//! - [`sandbox`]: the deterministic wasmtime host that runs tool components.
//! - [`state`]: the host-side environment state (persistent, O(1) fork).
//! - [`bundle`] / [`environment`]: environments on disk and loaded.
//! - [`episode`] / [`policy`]: policy ↔ user ↔ tools episodes.
//! - [`verify`], [`trajectory`], [`replay`]: rewards, records, proofs.

pub mod bom;
pub mod bundle;
pub mod canonical;
pub mod differences;
pub mod environment;
pub mod episode;
pub mod hold;
pub mod jsonl;
pub mod parallel;
pub mod policy;
pub mod replay;
pub mod sandbox;
pub mod schema;
pub mod state;
pub mod text;
pub mod trajectory;
pub mod verify;

pub use bundle::{Actor, Bundle, Manifest, Task, ToolCall};
pub use environment::{Environment, Observation, PreparedTask};
pub use episode::{Action, Episode, EpisodeSettings, Judge, Policy, User, UserTurn, run_episode};
pub use sandbox::{Limits, Sandbox, SandboxError};
pub use state::State;
pub use trajectory::{EpisodeRecord, TrajectoryWriter};

use sha2::{Digest, Sha256};

/// The seed of one episode, derived from the run's seed, the task and the trial
/// so that episodes are independent of each other and of the order they run in.
pub fn episode_seed(run_seed: u64, task_id: &str, trial: u64) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(run_seed.to_le_bytes());
    hasher.update(trial.to_le_bytes());
    hasher.update(task_id.as_bytes());
    let digest = hasher.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("sha256 has 32 bytes"))
}
