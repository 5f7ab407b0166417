//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod inspect;
pub mod run;
