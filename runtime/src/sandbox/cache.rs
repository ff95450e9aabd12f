//! Compiled components, cached on disk.
//!
//! Compiling a component with Cranelift takes ~0.4 s; loading the compiled
//! artefact takes well under a millisecond. The cache key is the sha256 of the
//! component bytes together with the engine's compatibility hash (wasmtime
//! version and every codegen-relevant `Config` flag), so a changed engine never
//! reads an incompatible artefact.

use crate::canonical::hex;
use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub(crate) struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    /// Opens (creating) a cache directory.
    pub fn open(dir: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the component cache {}", dir.display()))?;
        Ok(Self { dir })
    }

    /// The default cache: `components/` under [`cache_root`]. `None` when no
    /// such directory can be created; callers then compile without caching.
    pub fn open_default() -> Option<Self> {
        Self::open(cache_root()?.join("components")).ok()
    }

    /// The compiled form of `wasm`, from the cache when present and loadable.
    pub fn load(&self, engine: &Engine, wasm: &[u8]) -> Result<Component> {
        let path = self.dir.join(format!("{}.cwasm", cache_key(engine, wasm)));
        if path.exists() {
            // SAFETY: the file is one this cache wrote with `Component::serialize`
            // for an engine with the same compatibility hash; a corrupt or foreign
            // file fails wasmtime's header checks and is recompiled below.
            if let Ok(component) = unsafe { Component::deserialize_file(engine, &path) } {
                return Ok(component);
            }
        }
        let component = compile(engine, wasm)?;
        // A cache that cannot be written only costs time next run.
        let _ = self.store(&path, &component);
        Ok(component)
    }

    /// Writes atomically, so concurrent processes never read a partial file.
    fn store(&self, path: &Path, component: &Component) -> Result<()> {
        let bytes = component.serialize()?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(&bytes)?;
        file.persist(path)?;
        Ok(())
    }
}

/// Forge's cache directory: `$FORGE_CACHE_DIR`, else `$XDG_CACHE_HOME/forge`,
/// else `~/.cache/forge`.
pub fn cache_root() -> Option<PathBuf> {
    std::env::var_os("FORGE_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|dir| PathBuf::from(dir).join("forge")))
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/forge")))
}

/// Compiles a component without caching.
pub(super) fn compile(engine: &Engine, wasm: &[u8]) -> Result<Component> {
    check_preamble(wasm)?;
    Component::new(engine, wasm)
        .map_err(anyhow::Error::from)
        .context("compiling the component")
}

/// Names the two commonest wrong files in one line each (the parser's own
/// message spells out the expected and found bytes as arrays): something
/// that is not WebAssembly at all, and a core module, which a component's
/// tools cannot be (it has no WIT interface to call them through).
fn check_preamble(wasm: &[u8]) -> Result<()> {
    // `\0asm`, then a 16-bit version and a 16-bit layer: 0 for a core
    // module, 1 for a component.
    const MAGIC: &[u8] = b"\0asm";
    if !wasm.starts_with(MAGIC) {
        // As bytes: text read from them would put control characters and
        // replacement marks in the message.
        let start = wasm[..wasm.len().min(8)].escape_ascii().to_string();
        bail!(
            "not WebAssembly: a component begins with the bytes `\\0asm`, this file with `{start}`"
        );
    }
    if wasm.get(6..8) == Some(&[0, 0]) {
        bail!(
            "a core WebAssembly module, not a component: build the tools for wasm32-wasip2 \
             (or wrap the module with `wasm-tools component new`)"
        );
    }
    Ok(())
}

fn cache_key(engine: &Engine, wasm: &[u8]) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.update(Sha256::digest(wasm));
    hex(&hasher.0.finalize())
}

/// Feeds `Hash` output into sha256, for a key that is stable across processes
/// (std's `DefaultHasher` is not guaranteed to be).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        unreachable!("only the sha256 state is read")
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
