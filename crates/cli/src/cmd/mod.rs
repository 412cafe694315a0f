//! One module per command.
pub mod bulk;
