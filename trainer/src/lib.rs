//! Forge's policy model in burn: a Llama-family decoder (RMSNorm, RoPE, GQA,
//! SwiGLU, optionally tied embeddings) whose configuration and weights come
//! from a GGUF file, with a KV cache for incremental decoding.
//!
//! The model is generic over the burn backend, but the crate exposes concrete
//! instantiations ([`CpuModel`]) so that the backend generics are compiled
//! here once and the rest of Forge does not rebuild them.

pub mod accelerator;
mod attention;
pub mod bench;
pub mod chat;
pub mod checkpoint;
pub mod config;
mod cpu_product;
mod draw;
pub mod episodes;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod kernel_cache;
pub mod kv_cache;
pub mod llama;
pub mod lora;
pub mod peft;
pub mod rope;
pub mod sampling;
pub mod train;
pub mod user;

pub use config::LlamaConfig;
pub use kv_cache::{KvCache, Prefix, PrefixPool};
pub use llama::{Llama, LoadError, Precision, WeightSource, tensor_names};
pub use sampling::{Generation, Sampling, Stop};

/// The CPU backend (tests, small models).
pub type Cpu = burn::backend::NdArray<f32>;

/// `value` as a `U` when its type `T` is `U`, else back as it was: how code
/// generic over the backend takes a path of its own for one backend. Moved
/// through `Option`s seen as `dyn Any`, it allocates nothing.
pub(crate) fn same_type<T: 'static, U: 'static>(value: T) -> Result<U, T> {
    let mut value = Some(value);
    match (&mut value as &mut dyn std::any::Any).downcast_mut::<Option<U>>() {
        Some(cast) => Ok(cast.take().expect("just put there")),
        None => Err(value.expect("not taken")),
    }
}

/// A Llama model on the CPU backend.
pub type CpuModel = Llama<Cpu>;

/// Loads a model (a GGUF file or a checkpoint directory) onto the CPU backend.
pub fn load_cpu(path: &std::path::Path) -> Result<CpuModel, LoadError> {
    Llama::load(path, &Default::default())
}

/// The CUDA backend.
#[cfg(feature = "cuda")]
pub type Cuda = burn::backend::Cuda<f32>;

/// The first CUDA device, checked by [`started`]: the backend panics when
/// there is no driver, no GPU or no NVRTC.
#[cfg(feature = "cuda")]
pub fn cuda_device() -> anyhow::Result<burn::backend::cuda::CudaDevice> {
    started::<Cuda>(
        Default::default(),
        "no usable CUDA GPU: the CUDA backend failed to start (its own message is above); \
         --device cuda needs an NVIDIA driver, a GPU, and NVRTC with the CUDA headers \
         (under CUDA_PATH)",
    )
}

/// burn's WebGPU backend: the CUDA backend's cubecl kernel sources compiled
/// to WGSL for other GPUs (Vulkan; Metal on macOS), or for a CPU through a
/// software Vulkan driver.
#[cfg(feature = "wgpu")]
pub type Wgpu = burn::backend::Wgpu<f32>;

/// The WebGPU adapter wgpu prefers for performance (a discrete GPU first; a
/// software driver when there is no GPU; `CUBECL_WGPU_DEFAULT_DEVICE`, e.g.
/// `IntegratedGpu(0)`, picks another), checked by [`started`].
#[cfg(feature = "wgpu")]
pub fn wgpu_device() -> anyhow::Result<burn::backend::wgpu::WgpuDevice> {
    started::<Wgpu>(
        Default::default(),
        "no usable WebGPU adapter: the wgpu backend failed to start (its own message is \
         above); --device wgpu needs a Vulkan (on macOS, Metal) driver (on Linux without a \
         GPU, Mesa's lavapipe: the mesa-vulkan-drivers package)",
    )
}

/// `device`, once a round trip through it has worked. A GPU backend that
/// cannot start panics (on its own device thread); that panic becomes an
/// error saying what the device needs (`unusable`).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn started<B: burn::tensor::backend::Backend>(
    device: B::Device,
    unusable: &str,
) -> anyhow::Result<B::Device> {
    use burn::tensor::Tensor;
    kernel_cache::keep_kernels();
    let round_trip =
        std::panic::AssertUnwindSafe(|| Tensor::<B, 1>::ones([1], &device).into_data());
    std::panic::catch_unwind(round_trip).map_err(|_| anyhow::anyhow!("{unusable}"))?;
    Ok(device)
}
