//! Builds the built-in example environment's component, which the `forge`
//! binary embeds (it is the environment the CLI runs without `--env`).

use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let target_dir = forge_guest_builder::guests_dir_for_build_script(&out_dir);
    for path in [
        "wit",
        "env-templates/guest/src",
        "env-templates/guest/Cargo.toml",
        "env-templates/example/src",
        "env-templates/example/Cargo.toml",
    ] {
        println!("cargo::rerun-if-changed={path}");
    }
    let wasm = match forge_guest_builder::build_component(
        &root.join("Cargo.toml"),
        "forge-example-shop",
        &target_dir,
    ) {
        Ok(wasm) => wasm,
        Err(err) => {
            eprintln!("{err}");
            std::process::exit(1);
        }
    };
    std::fs::copy(&wasm, out_dir.join("example-shop.wasm")).expect("copying the example component");
    embed_domain_docs(&root, &out_dir);
}

/// Writes `domains.rs`: every shipped domain doc as `(name, text)`, so that
/// `forge synth --all` needs no source checkout.
fn embed_domain_docs(root: &std::path::Path, out_dir: &std::path::Path) {
    let dir = root.join("env-templates/domains");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut docs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reading env-templates/domains")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    docs.sort();
    let entries: Vec<String> = docs
        .iter()
        .map(|path| {
            format!(
                "    ({:?}, include_str!({:?})),",
                path.file_stem().unwrap().to_string_lossy(),
                path.display().to_string()
            )
        })
        .collect();
    let code = format!(
        "/// The shipped domain docs.\npub const DOMAIN_DOCS: &[(&str, &str)] = &[\n{}\n];\n",
        entries.join("\n")
    );
    std::fs::write(out_dir.join("domains.rs"), code).expect("writing domains.rs");
}
