//! `forge example`: the built-in environment as a bundle on disk, to read,
//! edit, or pass to `--env`.

use crate::builtin;
use crate::commands::{holds_files, leave_as_found};
use anyhow::{Result, bail};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ExampleArgs {
    /// The directory to write (must not exist or be empty).
    dir: PathBuf,
}

pub fn run(args: ExampleArgs) -> Result<ExitCode> {
    if holds_files(&args.dir)? {
        bail!("{} exists and is not empty", args.dir.display());
    }
    // Written whole or not at all: a directory left half-written (a full
    // disk) would refuse the next try as not empty.
    let existed = args.dir.exists();
    if let Err(err) = builtin::example_bundle().write_dir(&args.dir) {
        leave_as_found(&args.dir, existed);
        return Err(err);
    }
    println!("wrote the example environment to {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}
