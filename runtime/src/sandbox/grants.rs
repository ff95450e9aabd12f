//! What a tool component may import.

use anyhow::{Result, bail};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Interfaces granted to tools, without version. The WASI ones are the plumbing
/// that Rust's standard library links in even when a tool does no I/O; the host
/// backs them with an empty environment, no stdin and bounded output buffers.
/// `wasi:random/insecure-seed` is the seed of std's `HashMap` hasher (and of
/// `IndexMap` with its default hasher); the host answers it with a constant, so
/// hash-map iteration order is the same in every run. Real randomness
/// (`wasi:random/random`, `wasi:random/insecure`) is not granted.
const GRANTED: &[&str] = &[
    "forge:env/store",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/insecure-seed",
];

fn is_granted(import: &str) -> bool {
    let unversioned = import.split_once('@').map_or(import, |(name, _)| name);
    GRANTED.contains(&unversioned)
}

/// Refuses a component that imports anything not granted, naming every such import.
pub(super) fn check_imports(engine: &Engine, component: &Component) -> Result<()> {
    let ty = component.component_type();
    let refused: Vec<&str> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| !is_granted(name))
        .collect();
    if !refused.is_empty() {
        bail!(
            "the component imports {}, which Forge does not grant: tools may import only \
             forge:env/store, the WASI cli/io plumbing and a constant hash seed (no files, sockets, \
             clocks or randomness)",
            refused.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_granted;

    #[test]
    fn grants_ignore_versions_but_not_names() {
        assert!(is_granted("forge:env/store@0.1.0"));
        assert!(is_granted("wasi:io/streams@0.2.6"));
        assert!(!is_granted("wasi:filesystem/types@0.2.6"));
        assert!(!is_granted("wasi:clocks/wall-clock@0.2.6"));
        assert!(!is_granted("wasi:random/random@0.2.6"));
        assert!(!is_granted("wasi:random/insecure@0.2.6"));
        assert!(is_granted("wasi:random/insecure-seed@0.2.6"));
        assert!(!is_granted("wasi:sockets/tcp@0.2.6"));
        assert!(!is_granted("forge:env/store-extra"));
    }
}
