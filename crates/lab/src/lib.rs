//! The real-packet lab (issue 5): the Hollywood engine, Linux TCP and real
//! middleboxes on real packets, in network namespaces on one machine.
//!
//! Design notes and the topology are in `docs/LAB.md`.
//!
//! - [`netem`]: a user-space link emulator (TUN-based) with the simulator's
//!   own link model (`hollywood_sim::LinkModel`): rate, delay, jitter,
//!   queue, loss, schedules and Mahimahi traces, per direction.
//! - [`topology`]: two- and three-host labs (namespaces, veths, addresses,
//!   routes, the emulator), idempotent and torn down on drop.
//! - [`capture`]: tshark captures on the path and their wire audit.
//! - [`daemon`]: the emulator as a background process (`lab up`/`down`).
//! - [`messages`]: `sim messages` on real packets (QUIC, UDP, TCP);
//!   [`dash`]: `sim dash` on real packets (TCP, TCP Hollywood, QUIC);
//!   [`multipath`]: `sim multipath` on two labs, one per path;
//!   [`apps`]: what they share (the simulator's apps on real hosts);
//! - [`interop`], [`middlebox`], [`calibrate`], [`bench`], [`compare`]: the
//!   experiments;
//!   [`workload`]: self-checking timed message workloads they share;
//!   [`wiremsg`]: workload messages read back from a capture (oracle, order);
//!   [`quicwire`]: QUIC STREAM frames from a decrypted capture (retransmissions).
//!
//! Everything that touches the network needs Linux and root.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// An adapter crate: real clocks, threads and processes live here.
#![allow(clippy::disallowed_methods)]

pub mod apps;
pub mod attack;
pub mod bench;
pub mod calibrate;
pub mod capture;
pub mod compare;
pub mod daemon;
pub mod dash;
pub mod idle;
pub mod internet;
pub mod interop;
pub mod messages;
pub mod middlebox;
pub mod multipath;
pub mod netem;
pub mod quicwire;
pub mod relaybench;
pub mod relaychain;
pub mod soak;
pub mod topology;
pub mod ts;
pub mod wiremsg;
pub mod workload;
