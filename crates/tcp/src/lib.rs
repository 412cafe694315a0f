//! A sans-IO TCP engine.
//!
//! **Crate promise** (after quinn-proto): no sockets, no OS clock, no OS
//! entropy, no threads. Every input carries an explicit `now`; given the same
//! inputs and the same seed, the engine produces byte-identical outputs. The
//! same engine runs in the discrete-event simulator (`hollywood-sim`) and over
//! real packets (`hollywood-io`).
//!
//! Two levels:
//! - [`Connection`]: one TCB (RFC 9293 §3.3.1). It consumes parsed segments
//!   (`TcpRepr` + payload) and produces segments.
//! - [`Endpoint`]: a host's TCP: demultiplexes whole IP packets to
//!   connections by 4-tuple, owns listeners, answers segments for unknown
//!   connections with RST (RFC 9293 §3.10.7.1), and wraps output into IP.
//!
//! Method families on both (call in this order each time the caller wakes):
//! 1. input: `handle_segment` / `handle_packet` (network), `handle_timeout` (timer);
//! 2. application commands: `send`, `recv`, `close`, `abort`, ...;
//! 3. output: `poll_transmit` until `None`, `poll_event` until `None`, then
//!    `poll_timeout` for the next wake-up.
//!
//! Standard TCP is the default; the TCP Hollywood extensions (thesis ch. 4)
//! are switches in [`Config`].
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod config;
pub mod conn;
mod delivery;
pub mod endpoint;
pub mod hollywood;
pub mod isn;
pub mod live;
pub mod pacing;
#[cfg(test)]
mod pair;
mod rack;
mod recv_buf;
pub mod rtt;
mod sack;
mod send_buf;
#[cfg(test)]
mod tests;
pub mod time;
mod timer;
mod windowed;

pub use cc::{CcAlgorithm, CongestionControl, DeliveryEvent, LostSegment, RateSample};
pub use config::{Config, DelayedAckConfig, HollywoodConfig, KeepaliveConfig};
pub use conn::{
    ArrivedSegment, Connection, ConnectionStats, Event, Negotiated, OooStats, SendMessageError,
    State,
};
pub use endpoint::{
    ConnHandle, Endpoint, EndpointEvent, EndpointStats, TupleChange, FINAL_STATS_KEPT,
};
pub use hollywood::{
    check_dependency, ExpiredMessage, ExpiryReason, HollywoodStats, MessageMeta, MetaError, Resend,
};
pub use time::Instant;

/// Errors returned by application commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The connection is not in a state that allows this (e.g. `send` after
    /// `close`, `connect` on a used 4-tuple).
    InvalidState,
    /// The send buffer is full; retry after a `Writable` event.
    WouldBlock,
    /// The peer reset the connection.
    Reset,
    /// The connection timed out (retransmissions or keep-alives exhausted).
    TimedOut,
    /// The connection is closed.
    Closed,
    /// The address is already in use (listen / connect).
    AddrInUse,
    /// Address families of local and remote differ, or port 0.
    InvalidAddress,
    /// The handle does not name a live connection.
    UnknownConnection,
    /// The endpoint holds `Config::max_connections` already.
    TooManyConnections,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::InvalidState => "operation not valid in this connection state",
            Error::WouldBlock => "send buffer full",
            Error::Reset => "connection reset by peer",
            Error::TimedOut => "connection timed out",
            Error::Closed => "connection closed",
            Error::AddrInUse => "address in use",
            Error::InvalidAddress => "invalid address",
            Error::UnknownConnection => "unknown connection",
            Error::TooManyConnections => "too many connections",
        })
    }
}
impl std::error::Error for Error {}
