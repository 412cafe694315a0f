//! One module per command.
pub mod analyze;
pub mod attack;
pub mod bench;
pub mod bulk;
pub mod calibrate;
pub mod chaos;
pub mod compare;
pub mod dash;
pub mod dash_ch6;
pub mod dash_gateway;
pub mod dash_video;
pub mod demo;
pub mod host;
pub mod idle;
pub mod internet;
pub mod interop;
pub mod lab;
pub mod lab_srt;
pub mod messages;
pub mod middlebox;
pub mod multipath;
pub mod netem;
pub mod relay;
pub mod relay_chain;
pub mod relay_load;
pub mod repro;
pub mod scaling;
pub mod soak;
pub mod transmit;
pub mod video;
pub mod voip;

/// Where a simulator command's runs happen (`sim X` or `lab X`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// The discrete-event simulator.
    Sim,
    /// Real packets in a lab of this name (root).
    Lab(&'a str),
}
