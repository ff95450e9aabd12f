//! One module per subcommand.

pub mod bench;
pub mod eval;
pub mod example;
pub mod inspect;
pub mod model;
pub mod replay;
pub mod run;
pub mod serve;
pub mod synth;
pub mod train;
