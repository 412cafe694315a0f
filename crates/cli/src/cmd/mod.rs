//! One module per command.
pub mod analyze;
pub mod bulk;
pub mod demo;
pub mod messages;
pub mod repro;
pub mod voip;
