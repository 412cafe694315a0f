//! One module per command.
pub mod bulk;
pub mod demo;
pub mod messages;
