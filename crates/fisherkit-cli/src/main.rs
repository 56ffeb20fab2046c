//! The `fisherkit` command-line tool (work in progress).

fn main() {}
