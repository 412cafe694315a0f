//! The Hollywood TCP engine over Linux TUN devices, on tokio.
//!
//! This is an I/O adapter: it owns the real clock, OS entropy, threads and
//! file descriptors that the sans-IO engine (`hollywood-tcp`) must not touch.
//!
//! - [`netns`]: network namespaces, veth pairs, `ip` configuration and
//!   running code inside a namespace — the lab in which the engine meets the
//!   Linux kernel's TCP.
//! - [`tun`]: the engine on a TUN device: [`device`](tun::device) (a TUN
//!   interface read and written as whole IP packets),
//!   [`offload`](tun::offload) (the `virtio_net_hdr` of TUN offloads:
//!   checksum, TSO) and [`host`](tun::host) ([`TunHost`], an `Endpoint`
//!   driven over a TUN device: real clock mapped to engine time, OS-entropy
//!   seed, packets and timers in, packets out, and an application closure
//!   called after every step).
//! - [`engine`]: the async API over a `TunHost`: [`Stack`], [`Listener`],
//!   [`Stream`] in byte-stream or message mode (thesis §7.2).
//! - [`kernel`]: the same message layer over an ordinary kernel TCP socket
//!   (thesis §4.4 partial deployment).
//! - [`apphost`]: any `hollywood_transport::MessageTransport` with its
//!   application on real packets and the OS clock ([`AppHost`]): on a TUN
//!   device (the TCP deployments) or, through [`udp`], on a real UDP
//!   socket (QUIC, UDP), or through [`multiudp`] on one socket per path
//!   (a connection group over several local addresses).
//! - [`hostmode`]: the engine on the host's own network: a persistent
//!   TUN device, forwarding and NAT (masquerade, DNAT) set up and torn
//!   down as one thing (`hollywood host up|down|status|clear`).
//! - [`sys`]: the raw system calls (the only module with `unsafe`).
//! - [`message`]: what both share: [`SendMessage`], [`ReceivedMessage`],
//!   [`MessageStream`], [`StreamError`].
//!
//! Everything needs Linux and root (`CAP_NET_ADMIN`).
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Adapters own the clock: this crate is where real time, threads and OS
// entropy enter, so the workspace's sans-IO lint does not apply here.
#![allow(clippy::disallowed_methods)]

pub mod apphost;
pub mod engine;
pub mod error;
pub mod hostmode;
pub mod kernel;
pub mod message;
pub mod multiudp;
pub mod netns;
pub mod sys;
pub mod tun;
pub mod udp;

pub use apphost::{AppHost, AppHostStats};
pub use engine::{Listener, Stack, StackOptions, Stream, StreamStats};
pub use error::{Error, Result};
pub use kernel::{KernelListener, KernelStream};
pub use message::{MessageStats, MessageStream, ReceivedMessage, SendMessage, StreamError};
pub use multiudp::{MultiUdpHost, MultiUdpPort, UdpPath};
pub use netns::{is_root, NetNs, NsThread, VethPair};
pub use tun::device::{TunConfig, TunDevice, TunQueue};
pub use tun::host::{HostStats, HostWaker, Step, TunHost};
pub use tun::shard::{ShardedHost, ShardedRun, Worker, WorkerReport};
pub use udp::{UdpHost, UdpHostStats, UdpPort};
