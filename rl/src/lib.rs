//! The algorithm half of ERPO (environment-level relative policy
//! optimisation), independent of the model and the tensor library:
//!
//! - [`advantage`]: per-task mean baseline scaled by a standard deviation
//!   pooled over the environment (ERPO), over the task (GRPO) or over the
//!   batch, for ablations;
//! - [`sampling`]: dynamic sampling (drop tasks whose valid rollouts all
//!   earn the same reward);
//! - [`judge`]: MEU masking — deciding that the simulated user gave wrong or
//!   missing information, so the rollout is dropped from advantages and loss.

pub mod advantage;
pub mod judge;
pub mod sampling;
