//! The engine on a Linux TUN device.
//!
//! - [`device`]: a TUN interface read and written as whole IP packets.
//! - [`offload`]: the `virtio_net_hdr` of TUN offloads (checksum, TSO):
//!   merging engine segments into super-packets, splitting received ones.
//! - [`host`]: [`TunHost`](host::TunHost), an `Endpoint` driven over a TUN
//!   device: real clock mapped to engine time, OS-entropy seed, packets and
//!   timers in, packets out, and an application closure called after every
//!   step.

pub mod device;
pub mod host;
pub mod offload;
mod writer;
