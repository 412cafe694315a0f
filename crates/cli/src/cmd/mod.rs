//! One module per command.
pub mod analyze;
pub mod bench;
pub mod bulk;
pub mod calibrate;
pub mod compare;
pub mod dash;
pub mod dash_video;
pub mod demo;
pub mod interop;
pub mod lab;
pub mod messages;
pub mod middlebox;
pub mod netem;
pub mod repro;
pub mod scaling;
pub mod video;
pub mod voip;
