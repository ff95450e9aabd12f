//! Integration tests: the sandbox against hostile components, and the `forge`
//! CLI end to end on the built-in example environment.

mod cli;
mod common;
mod eval;
mod hostile;
mod llm_stub;
mod sandbox;
mod serve;
mod suites;
mod synth;
mod train;
