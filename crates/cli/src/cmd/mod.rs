//! One module per command.
pub mod bulk;
pub mod messages;
