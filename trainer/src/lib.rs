//! Forge's policy model in burn: a Llama-family decoder (RMSNorm, RoPE, GQA,
//! SwiGLU, optionally tied embeddings) whose configuration and weights come
//! from a GGUF file, with a KV cache for incremental decoding.
//!
//! The model is generic over the burn backend, but the crate exposes concrete
//! instantiations ([`CpuModel`]) so that the backend generics are compiled
//! here once and the rest of Forge does not rebuild them.

pub mod chat;
pub mod checkpoint;
pub mod config;
pub mod llama;
pub mod sampling;
pub mod train;

pub use config::LlamaConfig;
pub use llama::{KvCache, Llama, LoadError, WeightSource, tensor_names};
pub use sampling::{Generation, Sampling, Stop};

/// The CPU backend (tests, small models).
pub type Cpu = burn::backend::NdArray<f32>;

/// A Llama model on the CPU backend.
pub type CpuModel = Llama<Cpu>;

/// Loads a model (a GGUF file or a checkpoint directory) onto the CPU backend.
pub fn load_cpu(path: &std::path::Path) -> Result<CpuModel, LoadError> {
    Llama::load(path, &Default::default())
}

/// The CUDA backend.
#[cfg(feature = "cuda")]
pub type Gpu = burn::backend::Cuda<f32>;

/// A Llama model on the CUDA backend.
#[cfg(feature = "cuda")]
pub type GpuModel = Llama<Gpu>;

/// Loads a GGUF model onto the first CUDA device.
#[cfg(feature = "cuda")]
pub fn load_gpu(path: &std::path::Path) -> Result<GpuModel, LoadError> {
    Llama::load(path, &Default::default())
}
