//! Keeps the GPU kernels cubecl compiles, and its autotune results, in
//! Forge's cache directory, where every forge process on the machine finds
//! them.
//!
//! The CUDA and WebGPU backends compile each kernel when it is first launched
//! (NVRTC on CUDA), and autotuning (the `autotune` feature) compiles and
//! times every candidate of an operation. On an H200's host that is about
//! half a second per kernel, and with autotuning the better part of a minute
//! before SmolLM2's first forward pass, with the GPU idle. cubecl keeps no
//! compiled kernels by default, and writes autotune results under a `target/`
//! directory it looks for from the working directory, so each process (a
//! training run, each of the RL runs sharing a GPU, each bench phase) paid it
//! all again. Kept under `<cache>/kernels`, only the first process on a
//! machine pays: later ones load what it compiled (CUDA's PTX; WebGPU's WGSL
//! is compiled by the driver, and only its autotune results are kept) and
//! what it chose. cubecl versions its cache files, so an upgrade starts
//! afresh rather than loading stale kernels.

use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
use std::path::Path;
use std::sync::{Arc, Once};

/// Points cubecl's caches at Forge's, before a GPU backend first reads its
/// configuration. A `cubecl.toml` (or `[cubecl]` in `burn.toml`) that names
/// a cache of its own keeps it. Does nothing without a cache directory (no
/// `FORGE_CACHE_DIR`, `XDG_CACHE_HOME` or `HOME`), or once cubecl has read
/// its configuration.
pub(crate) fn keep_kernels() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(root) = forge_runtime::sandbox::cache_root() else {
            return;
        };
        let mut configured = CubeClRuntimeConfig::storage().lock();
        if configured.is_none() {
            let own = CubeClRuntimeConfig::from_current_dir().override_from_env();
            *configured = Some(Arc::new(caches_in(own, &root.join("kernels"))));
        }
    });
}

/// `config` with its compiled kernels and autotune results kept in `dir`,
/// unless it names places of its own (cubecl's defaults are no compiled
/// kernels and `target/`).
fn caches_in(mut config: CubeClRuntimeConfig, dir: &Path) -> CubeClRuntimeConfig {
    config
        .compilation
        .cache
        .get_or_insert_with(|| CacheConfig::File(dir.to_owned()));
    if matches!(config.autotune.cache, CacheConfig::Target) {
        config.autotune.cache = CacheConfig::File(dir.to_owned());
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(cache: &CacheConfig) -> String {
        format!("{cache:?}")
    }

    #[test]
    fn defaults_move_to_forges_cache_and_chosen_places_stay() {
        let dir = Path::new("/cache/forge/kernels");
        let moved = caches_in(CubeClRuntimeConfig::default(), dir);
        let kept = place(&CacheConfig::File(dir.to_owned()));
        assert_eq!(
            moved.compilation.cache.as_ref().map(place),
            Some(kept.clone())
        );
        assert_eq!(place(&moved.autotune.cache), kept);

        let mut chosen = CubeClRuntimeConfig::default();
        chosen.compilation.cache = Some(CacheConfig::Global);
        chosen.autotune.cache = CacheConfig::Local;
        let chosen = caches_in(chosen, dir);
        assert_eq!(
            chosen.compilation.cache.as_ref().map(place),
            Some(place(&CacheConfig::Global))
        );
        assert_eq!(place(&chosen.autotune.cache), place(&CacheConfig::Local));
    }
}
