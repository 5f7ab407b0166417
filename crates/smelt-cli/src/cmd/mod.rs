//! One module per subcommand.

mod autotune;
pub mod bench;
pub mod bench_server;
pub mod check;
pub mod compare;
pub mod compile;
pub mod explain;
pub mod inspect;
mod preset;
pub mod profile_table;
pub mod quantize;
pub mod run;
pub mod serve;
pub mod verify;
