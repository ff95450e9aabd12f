//! Choosing and loading the environment a command works on.

use crate::builtin;
use anyhow::{Context, Result};
use clap::Args;
use forge_runtime::{Bundle, Environment, Sandbox};
use std::path::PathBuf;

/// `--env`, shared by the commands that work on one environment.
#[derive(Args, Debug, Clone)]
pub struct EnvArgs {
    /// An environment bundle directory (see `forge example`); the built-in
    /// example environment when absent.
    #[arg(long, value_name = "DIR")]
    pub env: Option<PathBuf>,
}

impl EnvArgs {
    pub fn bundle(&self) -> Result<Bundle> {
        match &self.env {
            Some(dir) => Bundle::read_dir(dir)
                .with_context(|| format!("reading the environment bundle {}", dir.display())),
            None => Ok(builtin::example_bundle()),
        }
    }

    pub fn load(&self, sandbox: &Sandbox) -> Result<Environment> {
        Environment::load(sandbox, self.bundle()?)
    }
}
