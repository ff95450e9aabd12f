//! Builds the suites' tool components, which this crate embeds.

use std::path::PathBuf;

/// (package, file name under `OUT_DIR`).
const COMPONENTS: &[(&str, &str)] = &[
    ("forge-suite-tau-retail", "tau-retail.wasm"),
    ("forge-suite-tau-airline", "tau-airline.wasm"),
    ("forge-suite-tau2-airline", "tau2-airline.wasm"),
    ("forge-suite-tau2-retail", "tau2-retail.wasm"),
    ("forge-suite-tau2-mock", "tau2-mock.wasm"),
    ("forge-suite-tau2-telecom", "tau2-telecom.wasm"),
    ("forge-suite-tau2-banking", "tau2-banking.wasm"),
];

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = dir.parent().expect("the suites live inside the workspace");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let target_dir = forge_guest_builder::guests_dir_for_build_script(&out_dir);
    for path in [
        "wit",
        "env-templates/guest",
        "pycompat",
        "suites/tau-guest",
        "suites/tau-retail",
        "suites/tau-airline",
        "suites/tau2-airline",
        "suites/tau2-retail",
        "suites/tau2-mock",
        "suites/tau2-telecom",
        "suites/tau2-banking",
    ] {
        println!("cargo::rerun-if-changed={}", root.join(path).display());
    }
    let packages: Vec<&str> = COMPONENTS.iter().map(|(package, _)| *package).collect();
    let built = match forge_guest_builder::build_components(
        &root.join("Cargo.toml"),
        &packages,
        &target_dir,
    ) {
        Ok(paths) => paths,
        Err(err) => {
            eprintln!("{err}");
            std::process::exit(1);
        }
    };
    for (path, (_, name)) in built.iter().zip(COMPONENTS) {
        std::fs::copy(path, out_dir.join(name)).expect("copying a suite component");
    }
}
