//! A deterministic discrete-event network simulator for Hollywood.
//!
//! In the spirit of turmoil and quinn-proto's test harness: virtual time in
//! nanoseconds ([`hollywood_tcp::Instant`]) jumps from event to event, never
//! in fixed ticks; all randomness comes from ChaCha streams derived from one
//! seed; no threads, no OS clock. The same seed and the same setup give
//! byte-identical results, pcap captures included.
//!
//! - [`Node`]: the contract for anything on the network (hosts, routers).
//! - [`Simulator`] (built by [`SimBuilder`]): nodes, unidirectional links
//!   ([`LinkConfig`]: rate, delay, drop-tail queue, [`LossModel`], [`Jitter`],
//!   reordering, duplication, MTU), scheduled link changes, packet rules
//!   ([`Verdict`]), trace hooks ([`TraceEvent`]) and pcap capture.
//! - [`LinkModel`]: one link's queue, transmitter and impairments as a
//!   standalone sans-IO object (the simulator runs one per link, the
//!   real-packet emulator `hollywood_lab::netem` one per direction), with
//!   Mahimahi rate traces ([`RateTrace`]) and scheduled [`LinkChange`]s.
//! - [`Source`]/[`Sink`]: scripted packet sender and recorder.
//! - [`Router`]: a static IPv4/IPv6 router node for multi-host topologies.
//! - [`TcpHost`]: a node running a [`hollywood_tcp::Endpoint`] plus an
//!   [`App`]; [`BulkSender`]/[`BulkReceiver`] are the bulk-transfer apps,
//!   exchanging a position-derived [`Pattern`] stream.
//!
//! ```
//! use hollywood_sim::{Instant, LinkConfig, SimBuilder, Sink, Source};
//! use std::time::Duration;
//!
//! let mut sim = SimBuilder::new().seed(7).build();
//! let src = sim.add_node(Source::new(vec![(Instant::ZERO, 0, vec![0x45; 1500])]));
//! let dst = sim.add_node(Sink::new(false));
//! // 12 Mb/s: 1 ms to serialize 1500 bytes, then 10 ms of propagation.
//! sim.add_link(src, 0, dst, 0, LinkConfig::new(12_000_000, Duration::from_millis(10)))?;
//! sim.run_until_idle()?;
//! let sink = sim.node_mut::<Sink>(dst).unwrap();
//! assert_eq!(sink.arrivals()[0].time, Instant::from_nanos(11_000_000));
//! # Ok::<(), hollywood_sim::SimError>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod apps;
pub mod error;
pub mod link;
pub mod middlebox;
pub mod multi_host;
pub mod node;
pub mod nodes;
pub mod pattern;
pub mod router;
pub mod rule;
pub mod sim;
pub mod tcp_host;
pub mod trace;
pub mod transport_host;

pub use apps::{BulkReceiver, BulkSender, ReceiverReport, SenderReport};
pub use error::SimError;
pub use hollywood_tcp::Instant;
pub use link::{
    DropCounts, DropReason, GilbertElliott, Jitter, JitterDistribution, LinkChange, LinkConfig,
    LinkEnds, LinkId, LinkModel, LinkStats, LossModel, RateTrace, Reorder, TraceParseError,
    DEFAULT_QUEUE_BYTES,
};
pub use middlebox::{Middlebox, MiddleboxConfig, MiddleboxKind, MiddleboxStats};
pub use multi_host::MultiHomedHost;
pub use node::{Node, NodeId};
pub use nodes::{Arrival, DatagramPattern, Datagrams, Sink, Source};
pub use pattern::{Pattern, StreamHash};
pub use router::{Route, Router, RouterStats};
pub use rule::{PacketInfo, Verdict};
pub use sim::{SimBuilder, SimConfig, SimStats, Simulator};
pub use tcp_host::{App, HostStats, TcpHost};
pub use trace::{CaptureFilter, CapturePoint, SharedBuffer, TraceEvent, TraceKind};
pub use transport_host::{TransportApp, TransportHost};
