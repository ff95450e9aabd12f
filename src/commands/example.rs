//! `forge example`: the built-in environment as a bundle on disk, to read,
//! edit, or pass to `--env`.

use crate::builtin;
use anyhow::{Context, Result, bail};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ExampleArgs {
    /// The directory to write (must not exist or be empty).
    dir: PathBuf,
}

pub fn run(args: ExampleArgs) -> Result<ExitCode> {
    let listing = match args.dir.exists() {
        true => Some(
            args.dir
                .read_dir()
                .with_context(|| format!("reading {}", args.dir.display()))?,
        ),
        false => None,
    };
    if listing.is_some_and(|mut entries| entries.next().is_some()) {
        bail!("{} exists and is not empty", args.dir.display());
    }
    builtin::example_bundle().write_dir(&args.dir)?;
    println!("wrote the example environment to {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}
