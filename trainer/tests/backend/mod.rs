//! The backend the model tests run on: the CPU one, or with `--features wgpu`
//! burn's WebGPU one, whose cubecl kernel sources and fusion (and autotuning,
//! with `--features autotune`) are the CUDA backend's. On a machine without a
//! GPU that runs through Mesa's lavapipe (`scripts/gpu/rehearse.sh`): the GPU
//! code path, tested on a CPU.

#![allow(dead_code)] // each test file uses its own part of it

use forge_trainer::{Llama, LoadError};
use std::path::Path;

#[cfg(not(feature = "wgpu"))]
pub type Backend = forge_trainer::Cpu;
#[cfg(feature = "wgpu")]
pub type Backend = forge_trainer::Wgpu;

/// The training backend: autodiff over [`Backend`].
pub type TrainBackend = burn::backend::Autodiff<Backend>;

/// Loads a model file or checkpoint directory onto [`Backend`]'s default device.
pub fn load(path: &Path) -> Result<Llama<Backend>, LoadError> {
    Llama::load(path, &Default::default())
}
