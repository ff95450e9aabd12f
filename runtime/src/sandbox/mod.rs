//! The wasmtime host that runs tool components.
//!
//! One [`Sandbox`] owns one `Engine`, configured so that the same component,
//! state and arguments always give the same result and the same fuel count:
//! fuel metering, NaN canonicalisation, deterministic relaxed SIMD, no threads.
//! Components may import the `forge:env/store` interface and the WASI cli/io
//! plumbing that Rust's standard library links in (given an empty environment,
//! no stdin, and stdout/stderr captured into a small buffer); anything else —
//! files, sockets, clocks, randomness — is refused when the component loads.
//! Each call runs under fuel, memory, table, result-size, store-write and
//! wall-clock limits; a misbehaving call is a [`SandboxError`], never a panic
//! or a hung host.

mod cache;
mod grants;
mod host;
mod instance;

use cache::ComponentCache;
pub use cache::cache_root;
pub use instance::{CallOutcome, SandboxError, ToolComponent, ToolInstance};

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The limits every tool call runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly, WebAssembly instructions) per call; instantiating an
    /// episode's instance has a budget of its own, uncounted in any call's.
    pub fuel: u64,
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Table elements per table.
    pub table_elements: usize,
    /// Largest result (or error) text a call may return.
    pub result_bytes: usize,
    /// Wall-clock backstop per call. Fuel stops runaway code deterministically;
    /// this only catches what fuel cannot (a host bug, a pathological import).
    pub wall_time: Duration,
    /// Records a single call may write or remove.
    pub writes_per_call: usize,
    /// Bytes of record text a single call may write.
    pub write_bytes_per_call: usize,
    /// Largest single record.
    pub record_bytes: usize,
    /// Captured stdout/stderr per instance (quoted in trap messages).
    pub output_bytes: usize,
    /// Most instances alive at once, one per live episode: the capacity of
    /// the instance pool, whose address space is reserved up front.
    pub instances: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 200_000_000,
            memory_bytes: 64 << 20,
            table_elements: 20_000,
            result_bytes: 1 << 20,
            wall_time: Duration::from_secs(5),
            writes_per_call: 10_000,
            write_bytes_per_call: 16 << 20,
            record_bytes: 1 << 20,
            output_bytes: 16 << 10,
            instances: 1_000,
        }
    }
}

/// How often the epoch ticks for the wall-clock backstop.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The host. Cheap to clone; clones share the engine, cache and ticker.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<SandboxInner>,
}

struct SandboxInner {
    engine: Engine,
    linker: wasmtime::component::Linker<host::CallData>,
    limits: Limits,
    cache: Option<ComponentCache>,
}

impl Sandbox {
    /// A host with `limits`, caching compiled components in `cache_dir`
    /// (`None`: the default cache directory; compile without caching if it
    /// cannot be created).
    pub fn new(limits: Limits, cache_dir: Option<PathBuf>) -> Result<Self> {
        // Each pooled memory is a 4 GiB reservation (plus its guard), so
        // that bounds checks cost nothing: address space, not memory, but
        // what a limit on virtual memory counts.
        let reserved_gib = u64::from(limits.instances.max(1)) * 2 * 4;
        let engine = Engine::new(&engine_config(&limits))
            .map_err(anyhow::Error::from)
            .with_context(|| {
                format!(
                    "configuring the wasmtime engine, whose pool of {} instances reserves about \
                     {reserved_gib} GiB of virtual address space up front (not memory; a limit \
                     on virtual memory, as `ulimit -v` sets, must allow it)",
                    limits.instances.max(1)
                )
            })?;
        let linker = host::linker(&engine)?;
        spawn_epoch_ticker(&engine);
        let cache = match cache_dir {
            Some(dir) => Some(ComponentCache::open(dir)?),
            None => ComponentCache::open_default(),
        };
        Ok(Self {
            inner: Arc::new(SandboxInner {
                engine,
                linker,
                limits,
                cache,
            }),
        })
    }

    /// A host with the default limits and cache.
    pub fn with_defaults() -> Result<Self> {
        Self::new(Limits::default(), None)
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Compiles (or loads from the cache) a component, checks what it imports,
    /// and reads its tool schemas.
    pub fn load(&self, wasm: &[u8]) -> Result<ToolComponent> {
        let component = match &self.inner.cache {
            Some(cache) => cache.load(&self.inner.engine, wasm)?,
            None => cache::compile(&self.inner.engine, wasm)?,
        };
        grants::check_imports(&self.inner.engine, &component)?;
        ToolComponent::new(self.clone(), component, wasm)
    }
}

fn engine_config(limits: &Limits) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_nan_canonicalization(true)
        .relaxed_simd_deterministic(true)
        .max_wasm_stack(1 << 20);
    let mut pool = PoolingAllocationConfig::default();
    let instances = limits.instances.max(1);
    pool.total_component_instances(instances)
        .total_core_instances(instances * 8)
        .total_memories(instances * 2)
        .total_tables(instances * 4)
        .max_memory_size(limits.memory_bytes)
        .table_elements(limits.table_elements);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

/// Ticks the engine's epoch so that calls past their wall-clock deadline trap.
/// The thread ends once the engine is gone.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("forge-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch thread");
}

/// Epoch ticks for a wall-clock budget (at least one full tick).
fn epoch_ticks(budget: Duration) -> u64 {
    (budget.as_micros() / EPOCH_TICK.as_micros()).max(1) as u64 + 1
}
