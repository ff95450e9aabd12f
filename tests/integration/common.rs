//! Shared fixtures: guest components built on demand, and the `forge` binary.

use forge_runtime::Sandbox;
use forge_runtime::sandbox::Limits;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the tmp dir is inside the target dir")
        .to_owned()
}

/// Builds a test guest crate (under `tests/guests/`) once per test run.
pub fn guest_component(package: &'static str) -> Vec<u8> {
    static BUILT: OnceLock<std::sync::Mutex<std::collections::BTreeMap<&'static str, Vec<u8>>>> =
        OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    built
        .entry(package)
        .or_insert_with(|| {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
            let path = forge_guest_builder::build_component(
                &manifest,
                package,
                &target_dir().join("guests"),
            )
            .unwrap_or_else(|err| panic!("{err}"));
            std::fs::read(path).expect("reading the built component")
        })
        .clone()
}

/// Limits small enough that hostile calls end quickly.
pub fn test_limits() -> Limits {
    Limits {
        fuel: 50_000_000,
        memory_bytes: 32 << 20,
        result_bytes: 64 << 10,
        wall_time: Duration::from_secs(3),
        ..Limits::default()
    }
}

/// A sandbox with its own component cache.
pub fn sandbox(limits: Limits) -> (Sandbox, tempfile::TempDir) {
    let cache = tempfile::tempdir().expect("a temp dir");
    let sandbox = Sandbox::new(limits, Some(cache.path().to_owned())).expect("the sandbox starts");
    (sandbox, cache)
}

/// The component cache of the tests' `forge` runs.
pub fn forge_cache_dir() -> PathBuf {
    target_dir().join("forge-test-cache")
}

/// The `forge` binary with a private component cache, to run or spawn.
pub fn forge_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_forge"));
    command.env("FORGE_CACHE_DIR", forge_cache_dir());
    command
}

/// Runs the `forge` binary with a private component cache.
pub fn forge(args: &[&str]) -> Output {
    forge_command().args(args).output().expect("running forge")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that a `forge` run failed and that its error says `said`: bad
/// input is refused, and the message names the problem.
#[track_caller]
pub fn assert_refused(output: &Output, said: &str) {
    let message = stderr(output);
    assert!(!output.status.success(), "it ran; its stderr: {message}");
    assert!(message.contains(said), "{said:?} not said in: {message}");
}

/// Asserts that `forge replay` proves the episodes of `file` byte-identical
/// on the environment bundle `env`.
#[track_caller]
pub fn assert_replays(file: &Path, env: &Path) {
    let output = forge(&[
        "replay",
        file.to_str().unwrap(),
        "--env",
        env.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The JSON lines of a file.
pub fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The JSON lines of `--json` output.
pub fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    stdout(output)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
        })
        .collect()
}

/// Writes the built-in example environment to `dir/shop` with `forge example`.
pub fn export_example(dir: &Path) -> PathBuf {
    let bundle = dir.join("shop");
    let output = forge(&["example", bundle.to_str().expect("a UTF-8 path")]);
    assert!(output.status.success(), "{}", stderr(&output));
    bundle
}

/// Drops the file hashes from `bundle`'s manifest, as a hand-edited (or
/// hand-written) bundle has none: its files are then read as they are.
pub fn forget_hashes(bundle: &Path) {
    let manifest = bundle.join("manifest.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    value.as_object_mut().unwrap().remove("hashes");
    std::fs::write(&manifest, value.to_string()).unwrap();
}
