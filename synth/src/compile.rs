//! Compiling generated tool crates into components.
//!
//! Generated crates are built in a small workspace under Forge's cache
//! directory that holds a copy of the guest template (embedded in this binary,
//! so synthesis needs no source checkout) and the exact dependency versions
//! of this build (its `Cargo.lock`). Components are cached by the sha256 of
//! everything that goes into them, so re-synthesizing an unchanged domain
//! compiles nothing.

use crate::canonical_hex;
use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The guest template and the contract, as compiled into this binary.
const TEMPLATE: &[(&str, &str)] = &[
    ("wit/forge-env.wit", include_str!("../../wit/forge-env.wit")),
    (
        "env-templates/guest/src/lib.rs",
        include_str!("../../env-templates/guest/src/lib.rs"),
    ),
    (
        "env-templates/guest/src/args.rs",
        include_str!("../../env-templates/guest/src/args.rs"),
    ),
    (
        "env-templates/guest/src/db.rs",
        include_str!("../../env-templates/guest/src/db.rs"),
    ),
    (
        "env-templates/guest/src/host.rs",
        include_str!("../../env-templates/guest/src/host.rs"),
    ),
    (
        "env-templates/guest/src/memory.rs",
        include_str!("../../env-templates/guest/src/memory.rs"),
    ),
    (
        "env-templates/guest/src/ops.rs",
        include_str!("../../env-templates/guest/src/ops.rs"),
    ),
    ("Cargo.lock", include_str!("../../Cargo.lock")),
];

/// The guest template's manifest in the build workspace. Its dependencies
/// are those of the repository's workspace (a test keeps them in step).
const GUEST_MANIFEST: &str = r#"[package]
name = "forge-guest"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
serde = { version = "1.0", features = ["derive"] }
serde_json = { version = "1.0", features = ["preserve_order", "float_roundtrip"] }
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }
"#;

/// One crate to compile.
pub struct GuestSource {
    pub package: String,
    pub cargo_toml: String,
    pub lib_rs: String,
}

impl GuestSource {
    /// sha256 over the template and this crate's sources.
    fn cache_key(&self) -> String {
        let mut hasher = Sha256::new();
        for (path, text) in TEMPLATE.iter().copied().chain([
            ("guest", GUEST_MANIFEST),
            ("Cargo.toml", self.cargo_toml.as_str()),
            ("lib.rs", self.lib_rs.as_str()),
        ]) {
            for part in [path, text] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
        }
        canonical_hex(&hasher.finalize())
    }
}

/// Where generated crates are built and their components cached.
pub struct Compiler {
    root: PathBuf,
}

impl Compiler {
    /// A compiler working under `root` (default: `synth/` in Forge's cache).
    pub fn new(root: Option<PathBuf>) -> Result<Self> {
        let root = match root {
            Some(root) => root,
            None => forge_runtime::sandbox::cache_root()
                .context("no cache directory: set FORGE_CACHE_DIR")?
                .join("synth"),
        };
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        Ok(Self { root })
    }

    /// Compiles every source (one cargo run for those not cached) and returns
    /// the component bytes in order, with how many came from the cache.
    pub fn compile(&self, sources: &[GuestSource]) -> Result<(Vec<Vec<u8>>, usize)> {
        let cache = self.root.join("components");
        std::fs::create_dir_all(&cache)?;
        let cached_path = |source: &GuestSource| cache.join(format!("{}.wasm", source.cache_key()));
        // One build at a time per cache: processes share its workspace and target dir.
        let lock =
            std::fs::File::create(self.root.join("lock")).context("creating the build lock")?;
        lock.lock().context("taking the build lock")?;
        let missing: Vec<&GuestSource> = sources
            .iter()
            .filter(|source| !cached_path(source).is_file())
            .collect();
        if !missing.is_empty() {
            let workspace = self.write_workspace(&missing)?;
            let packages: Vec<&str> = missing
                .iter()
                .map(|source| source.package.as_str())
                .collect();
            let built = forge_guest_builder::build_components(
                &workspace.join("Cargo.toml"),
                &packages,
                &self.root.join("target"),
            )
            .map_err(|err| anyhow::anyhow!("{err}"))?;
            for (source, path) in missing.iter().zip(built) {
                std::fs::copy(&path, cached_path(source))
                    .with_context(|| format!("caching {}", path.display()))?;
            }
        }
        let components = sources
            .iter()
            .map(|source| {
                std::fs::read(cached_path(source))
                    .with_context(|| format!("reading the component of {}", source.package))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((components, sources.len() - missing.len()))
    }

    /// Lays out the build workspace: the template, and one crate per source.
    fn write_workspace(&self, sources: &[&GuestSource]) -> Result<PathBuf> {
        let workspace = self.root.join("workspace");
        let envs = workspace.join("envs");
        if envs.exists() {
            std::fs::remove_dir_all(&envs)
                .with_context(|| format!("clearing {}", envs.display()))?;
        }
        for (path, text) in TEMPLATE {
            write(&workspace.join(path), text)?;
        }
        write(
            &workspace.join("env-templates/guest/Cargo.toml"),
            GUEST_MANIFEST,
        )?;
        let members: Vec<String> = sources
            .iter()
            .map(|source| format!("\"envs/{}\"", source.package))
            .collect();
        write(
            &workspace.join("Cargo.toml"),
            &format!(
                "[workspace]\nmembers = [\"env-templates/guest\", {}]\nresolver = \"3\"\n\n[workspace.dependencies]\nforge-guest = {{ path = \"env-templates/guest\" }}\n\n[profile.release]\nopt-level = 3\n",
                members.join(", ")
            ),
        )?;
        for source in sources {
            let dir = envs.join(&source.package);
            write(&dir.join("Cargo.toml"), &source.cargo_toml)?;
            write(&dir.join("src/lib.rs"), &source.lib_rs)?;
        }
        Ok(workspace)
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::{GUEST_MANIFEST, TEMPLATE};

    /// Every source file of the guest template is compiled into the binary
    /// (a module added to the template and not listed here breaks every
    /// synthesized environment's build).
    #[test]
    fn the_embedded_template_has_every_guest_source_file() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../env-templates/guest/src");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let path = format!("env-templates/guest/src/{name}");
            assert!(
                TEMPLATE.iter().any(|(embedded, _)| *embedded == path),
                "{path} is not in compile.rs's TEMPLATE"
            );
        }
    }

    /// The build workspace must compile the template with the same dependency
    /// requirements as the repository does.
    #[test]
    fn guest_manifest_matches_the_workspace() {
        let root: toml::Table = toml::from_str(include_str!("../../Cargo.toml")).unwrap();
        let guest: toml::Table = toml::from_str(GUEST_MANIFEST).unwrap();
        let workspace_deps = root["workspace"]["dependencies"].as_table().unwrap();
        for (name, requirement) in guest["dependencies"].as_table().unwrap() {
            assert_eq!(&workspace_deps[name], requirement, "dependency `{name}`");
        }
    }
}
