//! The `smelt` command line.

fn main() {}
