//! Where models run, and the one place that names the concrete backends: the
//! entry points of training, the model bench and local episodes hand their
//! backend-generic work to [`on`], so it is monomorphised here for each
//! backend this build has, and callers compile none of it.

use crate::train::CpuTrain;
use anyhow::{Result, bail};
use burn::tensor::backend::AutodiffBackend;

/// Where a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accelerator {
    Cpu,
    /// The first CUDA GPU (needs the `cuda` feature).
    Cuda,
    /// A WebGPU adapter: another GPU, or a CPU through a software Vulkan
    /// driver (needs the `wgpu` feature).
    Wgpu,
}

/// Work generic over the training backend (inference uses its inner
/// backend, on the same device).
pub trait OnBackend {
    type Output;
    fn run<B: AutodiffBackend>(self, device: B::Device) -> Result<Self::Output>;
}

/// Runs `work` on `accelerator`'s backend, once its device has started; a
/// backend this build lacks is an error naming the feature to build with.
pub fn on<W: OnBackend>(accelerator: Accelerator, work: W) -> Result<W::Output> {
    match accelerator {
        Accelerator::Cpu => work.run::<CpuTrain>(Default::default()),
        #[cfg(feature = "cuda")]
        Accelerator::Cuda => work.run::<crate::train::CudaTrain>(crate::cuda_device()?),
        #[cfg(not(feature = "cuda"))]
        Accelerator::Cuda => {
            bail!("this forge was built without CUDA: rebuild it with `--features cuda`")
        }
        #[cfg(feature = "wgpu")]
        Accelerator::Wgpu => work.run::<crate::train::WgpuTrain>(crate::wgpu_device()?),
        #[cfg(not(feature = "wgpu"))]
        Accelerator::Wgpu => {
            bail!("this forge was built without WebGPU: rebuild it with `--features wgpu`")
        }
    }
}
