//! The host side of a tool call: the `forge:env/store` implementation over a
//! transaction, the granted WASI plumbing, and the resource limiter.

use super::Limits;
use crate::state::{Record, State};
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "environment",
    imports: { default: trappable },
});

pub(super) use Environment as Bindings;
pub(super) use EnvironmentPre as BindingsPre;
pub(super) use exports::forge::env::tools::Actor as WitActor;

/// The per-instance data of a wasmtime `Store`.
pub(super) struct CallData {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Captured guest stderr (panic messages), bounded, over the instance's
    /// calls.
    pub stderr: MemoryOutputPipe,
    /// Where in `stderr` the current call's output begins: a call's error
    /// quotes its own, not what earlier calls of the episode wrote.
    pub stderr_from: usize,
    pub limiter: Limiter,
    /// The state the current call reads and writes; committed only on success.
    pub txn: Transaction,
}

impl CallData {
    pub fn new(limits: &Limits) -> Self {
        let stderr = MemoryOutputPipe::new(limits.output_bytes);
        let stdout = MemoryOutputPipe::new(limits.output_bytes);
        // No args, no env, no stdin, and a constant hash seed: nothing a tool
        // could observe differs between runs.
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .stdout(stdout)
            .stderr(stderr.clone())
            .insecure_random_seed(0)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            stderr,
            stderr_from: 0,
            limiter: Limiter::new(limits),
            txn: Transaction::new(State::default(), limits),
        }
    }
}

impl WasiView for CallData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The writes of one call, applied to a fork of the state.
pub(super) struct Transaction {
    pub state: State,
    writes: usize,
    bytes: usize,
    writes_per_call: usize,
    write_bytes_per_call: usize,
    record_bytes: usize,
    /// Set when the call went over a store limit; the host traps it.
    pub exceeded: Option<String>,
}

impl Transaction {
    pub fn new(state: State, limits: &Limits) -> Self {
        Self {
            state,
            writes: 0,
            bytes: 0,
            writes_per_call: limits.writes_per_call,
            write_bytes_per_call: limits.write_bytes_per_call,
            record_bytes: limits.record_bytes,
            exceeded: None,
        }
    }

    fn count_write(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.writes += 1;
        self.bytes += bytes;
        let exceeded = if self.writes > self.writes_per_call {
            Some(format!(
                "more than {} store writes in one call",
                self.writes_per_call
            ))
        } else if self.bytes > self.write_bytes_per_call {
            Some(format!(
                "more than {} bytes written to the store in one call",
                self.write_bytes_per_call
            ))
        } else {
            None
        };
        match exceeded {
            Some(message) => {
                self.exceeded = Some(message.clone());
                Err(wasmtime::format_err!(message))
            }
            None => Ok(()),
        }
    }
}

impl forge::env::store::Host for CallData {
    fn get(&mut self, collection: String, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self
            .txn
            .state
            .get(&collection, &key)
            .map(|record| record.text().to_string()))
    }

    fn put(
        &mut self,
        collection: String,
        key: String,
        record: String,
    ) -> wasmtime::Result<Result<(), String>> {
        let txn = &mut self.txn;
        txn.count_write(collection.len() + key.len() + record.len())?;
        if record.len() > txn.record_bytes {
            return Ok(Err(format!(
                "record {collection}/{key} has {} bytes, over the limit of {}",
                record.len(),
                txn.record_bytes
            )));
        }
        match Record::from_text(&record) {
            Ok(parsed) => {
                txn.state.put(&collection, &key, parsed);
                Ok(Ok(()))
            }
            Err(err) => Ok(Err(format!(
                "record {collection}/{key} is not valid JSON: {err}"
            ))),
        }
    }

    fn remove(&mut self, collection: String, key: String) -> wasmtime::Result<bool> {
        self.txn.count_write(0)?;
        Ok(self.txn.state.remove(&collection, &key))
    }

    fn keys(&mut self, collection: String) -> wasmtime::Result<Vec<String>> {
        Ok(self.txn.state.keys(&collection))
    }

    fn fresh_key(&mut self, collection: String, prefix: String) -> wasmtime::Result<String> {
        Ok(self.txn.state.fresh_key(&collection, &prefix))
    }
}

/// Memory and table limits that remember being hit, so that the resulting trap
/// is reported as what it is.
pub(super) struct Limiter {
    memory_bytes: usize,
    table_elements: usize,
    pub memory_exceeded: bool,
    pub table_exceeded: bool,
}

impl Limiter {
    fn new(limits: &Limits) -> Self {
        Self {
            memory_bytes: limits.memory_bytes,
            table_elements: limits.table_elements,
            memory_exceeded: false,
            table_exceeded: false,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_exceeded = true;
            wasmtime::bail!(
                "linear memory would grow to {desired} bytes, over the limit of {}",
                self.memory_bytes
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.table_exceeded = true;
            wasmtime::bail!(
                "a table would grow to {desired} elements, over the limit of {}",
                self.table_elements
            );
        }
        Ok(true)
    }
}

struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

struct Data;

impl HasData for Data {
    type Data<'a> = &'a mut CallData;
}

/// A linker that provides `forge:env/store` and the granted WASI interfaces only.
pub(super) fn linker(engine: &Engine) -> anyhow::Result<Linker<CallData>> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::p2::bindings::{cli, random, sync::io};
    use wasmtime_wasi::random::WasiRandom;

    let mut linker = Linker::new(engine);
    let wrap = anyhow::Error::from;
    forge::env::store::add_to_linker::<CallData, Data>(&mut linker, |data| data).map_err(wrap)?;
    let l = &mut linker;
    wasmtime_wasi_io::bindings::wasi::io::error::add_to_linker::<CallData, Table>(l, |d| {
        &mut d.table
    })
    .map_err(wrap)?;
    io::poll::add_to_linker::<CallData, Table>(l, |d| &mut d.table).map_err(wrap)?;
    io::streams::add_to_linker::<CallData, Table>(l, |d| &mut d.table).map_err(wrap)?;
    cli::exit::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::environment::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::stdin::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::stdout::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::stderr::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::terminal_input::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::terminal_output::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::terminal_stdin::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::terminal_stdout::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    cli::terminal_stderr::add_to_linker::<CallData, WasiCli>(l, CallData::cli).map_err(wrap)?;
    random::insecure_seed::add_to_linker::<CallData, WasiRandom>(l, |d| d.wasi.random())
        .map_err(wrap)?;
    Ok(linker)
}
