//! The engine on a Linux TUN device.
//!
//! - [`device`]: a TUN interface read and written as whole IP packets.
//! - [`offload`]: the `virtio_net_hdr` of TUN offloads (checksum, TSO):
//!   merging engine segments into super-packets, splitting received ones.
//! - [`host`]: [`TunHost`](host::TunHost), an `Endpoint` driven over a TUN
//!   device: real clock mapped to engine time, OS-entropy seed, packets and
//!   timers in, packets out, and an application closure called after every
//!   step.
//! - [`shard`]: [`ShardedHost`](shard::ShardedHost), one such host per
//!   queue of a multi-queue TUN device, each in a thread of its own, with
//!   packets that reach the wrong queue handed to their connection's owner.

pub mod device;
pub mod host;
pub mod offload;
pub mod shard;
mod writer;
