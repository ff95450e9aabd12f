//! Compiles Forge guest crates into WebAssembly components.
//!
//! Tool environments are Rust crates written into the `forge-guest` template
//! and compiled for `wasm32-wasip2`, whose output is a component. This crate
//! drives that compilation with the same `cargo` that builds the host, in a
//! separate target directory (a nested cargo must never share the outer
//! build's directory lock). It is used by the host's build script, by the tests
//! (to build their hostile components), and by synthesis.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target that produces components.
pub const TARGET: &str = "wasm32-wasip2";

/// Why a guest could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// `cargo` could not be started.
    Spawn(std::io::Error),
    /// The compiler failed; holds its output.
    Compile { package: String, output: String },
    /// The build succeeded but the component is not where it should be.
    Missing(PathBuf),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spawn(err) => write!(f, "could not run cargo: {err}"),
            Self::Compile { package, output } => {
                write!(f, "building `{package}` for {TARGET} failed")?;
                if output.contains("target may not be installed")
                    || output.contains("can't find crate for `core`")
                {
                    write!(
                        f,
                        " (is the target installed? run `rustup target add {TARGET}`)"
                    )?;
                }
                write!(f, ":\n{output}")
            }
            Self::Missing(path) => {
                write!(f, "the build produced no component at {}", path.display())
            }
        }
    }
}

impl std::error::Error for BuildError {}

/// Where a build script builds guests: `guests/` beside the profiles of the
/// target directory that holds its `OUT_DIR`
/// (`<target>/<profile>/build/<crate>/out`), shared by every build script of
/// the workspace so that each guest compiles once.
pub fn guests_dir_for_build_script(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside the target directory")
        .join("guests")
}

/// Builds `package` from the workspace at `manifest` (a `Cargo.toml`) in release
/// mode into `target_dir`, and returns the path of the component.
pub fn build_component(
    manifest: &Path,
    package: &str,
    target_dir: &Path,
) -> Result<PathBuf, BuildError> {
    let mut paths = build_components(manifest, &[package], target_dir)?;
    Ok(paths.remove(0))
}

/// Builds several packages of one workspace in a single cargo invocation (so
/// they share its parallelism), returning their components in order.
pub fn build_components(
    manifest: &Path,
    packages: &[&str],
    target_dir: &Path,
) -> Result<Vec<PathBuf>, BuildError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--release", "--quiet", "--target", TARGET]);
    for package in packages {
        command.args(["--package", package]);
    }
    command
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(target_dir);
    // Settings meant for the outer build (its target directory, flags and
    // wrappers such as clippy-driver) must not leak into the guest build.
    for variable in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(variable);
    }
    // Reproducible bytes: the component's sha256 is part of an environment's
    // content hash, so it must not depend on where the sources or the cargo
    // registry live (panic locations embed paths) or carry debug info.
    command
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env("CARGO_ENCODED_RUSTFLAGS", remap_flags(manifest));
    let output = command.output().map_err(BuildError::Spawn)?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        return Err(BuildError::Compile {
            package: packages.join(", "),
            output: text,
        });
    }
    packages
        .iter()
        .map(|package| {
            let path = target_dir
                .join(TARGET)
                .join("release")
                .join(format!("{}.wasm", package.replace('-', "_")));
            if path.is_file() {
                Ok(path)
            } else {
                Err(BuildError::Missing(path))
            }
        })
        .collect()
}

/// `--remap-path-prefix` flags that replace the workspace and cargo-home paths
/// with fixed names, separated as `CARGO_ENCODED_RUSTFLAGS` expects.
fn remap_flags(manifest: &Path) -> String {
    let workspace = manifest
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let workspace = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let mut flags = vec![format!(
        "--remap-path-prefix={}=/forge",
        workspace.display()
    )];
    if let Some(cargo_home) = cargo_home {
        flags.push(format!(
            "--remap-path-prefix={}=/cargo",
            cargo_home.display()
        ));
    }
    flags.join("\x1f")
}
