//! The GStreamer plugin `hollywood` (`libgsthollywood.so`):
//!
//! - `hollywoodsink`: each buffer one message with a lifetime (the
//!   `latency`), a priority and a dependency; keyframes get the group's
//!   lifetime and the highest priority, delta units depend on their
//!   group's keyframe ([`mapping`]);
//! - `hollywoodsrc`: a live source; where the caps need order, it puts
//!   messages in order and plays them out at a constant delay from the
//!   sender's clock ([`playout`], as SRT's TSBPD), otherwise it pushes
//!   them as they arrive; lost, expired and late counts on the bus.
//!
//! Both take SRT-style properties (`uri`, `latency`, `certificate`/`key`,
//! a `stats` structure) and connect with `hollywood_taps`: racing QUIC,
//! TCP Hollywood on the engine and the message layer on kernel TCP, or a
//! stream on a relay. docs/GSTREAMER.md has the pipelines.
//!
//! ```text
//! cargo build --release -p hollywood-gst
//! export GST_PLUGIN_PATH=$PWD/target/release
//! gst-inspect-1.0 hollywoodsink
//! ```
// An adapter: the elements own threads and a runtime.
#![allow(clippy::disallowed_methods)]

pub mod common;
pub mod mapping;
pub mod playout;
pub mod sink;
pub mod src;

use gst::glib;

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    sink::register(plugin)?;
    src::register(plugin)?;
    Ok(())
}

gst::plugin_define!(
    hollywood,
    env!("CARGO_PKG_DESCRIPTION"),
    plugin_init,
    env!("CARGO_PKG_VERSION"),
    "MIT/X11",
    "hollywood-gst",
    "hollywood-gst",
    // No public home yet: the origin names the workspace crate.
    "crates/gst"
);

/// Register the elements in this process without a plugin file (tests,
/// applications that link the crate).
pub fn register_static() -> Result<(), glib::BoolError> {
    plugin_register_static()
}
