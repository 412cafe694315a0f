//! One sans-IO message-transport interface for every application.
//!
//! Applications (timed message streams, VoIP, live video) are written
//! against [`MessageTransport`]: send a message with a lifetime, a
//! dependency, a sub-stream and a priority; receive messages with their
//! arrival time; hear about messages that expired. Implementations:
//!
//! - [`quic::QuicTransport`]: QUIC on `quinn-proto` with the stream mappings
//!   of [RTP-QUIC] ([`quic::Mapping`]: one stream, stream per group, per
//!   frame, per message, RFC 9221 datagrams) and QUICsilver's deadline-aware
//!   partial reliability ([QUICsilver-2019] §4, with thesis §4.2's liveness rule);
//! - [`tcp::TcpTransport`]: our TCP engine with the intermediary layer,
//!   as standard TCP or one of the TCP Hollywood deployments
//!   ([`tcp::Deployment`], thesis §4.4);
//! - [`udp::UdpTransport`]: one message per datagram, sent once (the floor).
//! - [`group::GroupTransport`]: one connection group over several paths
//!   (broadcast, backup, aggregate), itself a transport over inner ones.
//!
//! Like the TCP engine, a transport never reads a clock or touches a
//! socket: every input carries `now` ([`Instant`], nanoseconds of virtual
//! or real time), packets in and out are whole IP packets, and
//! [`MessageTransport::poll_timeout`] says when it next needs a call.
//! The simulator hosts one per node; on real packets the same object runs
//! behind a UDP socket.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
pub mod fec;
pub mod group;
pub mod host;
pub mod kind;
pub mod pair;
pub mod quic;
pub mod record;
pub mod secure;
pub mod tcp;
pub mod udp;

pub use hollywood_tcp::Instant;
pub use kind::{QuicKind, TransportKind, UnknownTransport};
use std::net::SocketAddr;
use std::time::Duration;

/// Which end of a connection a transport is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Connects to `remote` at start.
    Client {
        /// The server.
        remote: SocketAddr,
    },
    /// Accepts the first connection.
    Server,
}

/// Largest message a transport accepts (payload bytes).
pub const MAX_MESSAGE: usize = 1 << 20;

/// A message handed to a transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutMessage {
    /// The application's id for the message (the receiver reports it
    /// back): unique per connection and increasing in the order messages
    /// are sent (TCP Hollywood's engine requires it, thesis §4.2; wrapping
    /// at 2^32 in serial-number order).
    pub id: u32,
    /// Payload.
    pub payload: Vec<u8>,
    /// Lifetime from now (thesis §4.2); `None` = reliable.
    pub lifetime: Option<Duration>,
    /// The message (same sub-stream) this one needs to be useful, e.g. the
    /// I-frame of a P-frame (thesis §4.2, Table 7.2).
    pub depends_on: Option<u32>,
    /// Sub-stream (thesis §4.3).
    pub substream: u16,
    /// Higher is sent first where the transport schedules: QUIC streams,
    /// and the TCP Hollywood engine's message queue (which queued message
    /// gets sequence numbers next, `hollywood_tcp::MessageMeta::priority`);
    /// 0 = default. Never on the wire.
    pub priority: i8,
    /// The group (GOP) the message belongs to; used by the per-group QUIC
    /// mapping. `None` = a group of its own.
    pub group: Option<u64>,
    /// The frame the message belongs to; used by the per-frame QUIC
    /// mapping. `None` = a frame of its own.
    pub frame: Option<u64>,
    /// Over a transport with FEC ([`fec::FecTransport`]): may the message
    /// be protected by repair messages where the policy wants it (true,
    /// the default)? false: never (the per-message opt-out).
    pub fec: bool,
}

impl OutMessage {
    /// A reliable message with default metadata.
    pub fn new(id: u32, payload: Vec<u8>) -> OutMessage {
        OutMessage {
            id,
            payload,
            lifetime: None,
            depends_on: None,
            substream: 0,
            priority: 0,
            group: None,
            frame: None,
            fec: true,
        }
    }
}

/// A message delivered by a transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InMessage {
    /// The sender's id.
    pub id: u32,
    /// Sub-stream.
    pub substream: u16,
    /// Payload.
    pub payload: Vec<u8>,
    /// When it was delivered to the application.
    pub arrival: Instant,
    /// When the last of its bytes first reached the receiving stack, before
    /// any wait for missing data in front of it: `arrival - received` is
    /// its head-of-line-blocking delay ([RTP-QUIC] §5.1). Equal to `arrival`
    /// where the transport delivers what arrives at once (UDP, datagrams).
    pub received: Instant,
}

/// Why a message will not be delivered by the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryReason {
    /// Its lifetime ran out before it was first sent: nothing went on the wire.
    BeforeSend,
    /// It was sent, but could no longer arrive in time; the transport gave
    /// up on it (QUIC: its stream was reset, no retransmission follows).
    Abandoned,
    /// The transport's send queue was full and the message was dropped
    /// (datagrams).
    QueueFull,
}

/// What a transport reports to its application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportEvent {
    /// The connection is up (or, without connections, ready to send).
    Connected,
    /// A message arrived.
    Message(InMessage),
    /// A message will not be delivered by the transport.
    Expired {
        /// Its id.
        id: u32,
        /// Its sub-stream.
        substream: u16,
        /// Why.
        reason: ExpiryReason,
    },
    /// The peer acknowledged a message completely.
    Acked {
        /// Its id.
        id: u32,
    },
    /// Room for more messages after [`SendError::WouldBlock`].
    Writable,
    /// The peer closed; everything it sent has been delivered or expired.
    PeerClosed,
    /// The connection is closed (both directions).
    Closed,
    /// The connection failed.
    Failed(String),
}

/// Why a send was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No room now; retry after [`TransportEvent::Writable`].
    #[error("the transport cannot take the message now")]
    WouldBlock,
    /// Larger than the transport can carry.
    #[error("message of {0} bytes is larger than the transport can carry")]
    TooLarge(usize),
    /// Not connected yet, or closed.
    #[error("not connected")]
    NotConnected,
    /// The metadata breaks a rule of the transport (TCP Hollywood: ids
    /// increasing, dependencies on earlier messages and non-decreasing per
    /// sub-stream, thesis §4.2).
    #[error("invalid message: {0}")]
    Invalid(String),
}

/// Received messages waiting in a transport's event queue for the
/// application: past this many bytes (each message charged its payload
/// plus [`EVENT_OVERHEAD`], so empty messages count too) a transport stops
/// taking more. TCP and TCP Hollywood stop pulling from the engine, whose
/// window closes; QUIC stops reading its streams and datagrams, so
/// quinn's flow control closes; UDP drops the datagram, as a full socket
/// buffer does ([`TransportStats::rx_queue_dropped`]). Reading resumes
/// when the application has taken half.
pub const RX_QUEUE_LIMIT: usize = 8 << 20;
/// What each queued received message is charged besides its payload.
pub(crate) const EVENT_OVERHEAD: usize = 64;

/// Counters every transport keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// IP packets sent.
    pub packets_sent: u64,
    /// IP bytes sent (headers included).
    pub bytes_sent: u64,
    /// IP packets received and accepted.
    pub packets_received: u64,
    /// Packets the transport declared lost (and repaired if reliable).
    pub packets_lost: u64,
    /// Messages handed to the transport.
    pub messages_sent: u64,
    /// Messages delivered to the application.
    pub messages_delivered: u64,
    /// Messages reported expired.
    pub messages_expired: u64,
    /// Streams the sender reset (QUIC): partial reliability at work.
    pub streams_reset: u64,
    /// Streams the receiver saw reset before they completed.
    pub streams_reset_received: u64,
    /// Packets or records refused as malformed.
    pub malformed: u64,
    /// Messages dropped because the application had left
    /// [`RX_QUEUE_LIMIT`] of received ones untaken (UDP only; the others
    /// stop reading instead).
    pub rx_queue_dropped: u64,
    /// Smoothed RTT when last known.
    pub srtt: Option<Duration>,
}

/// The sans-IO message-transport contract.
///
/// After any input (`start`, `handle_packet`, `handle_timeout`, `send`,
/// `close`), the host drains `poll_transmit` and `poll_event`, then reads
/// `poll_timeout`.
pub trait MessageTransport: Send {
    /// Short name (`quic-pps`, `udp`, ...).
    fn name(&self) -> &'static str;
    /// Begin: a client connects, a server listens.
    fn start(&mut self, now: Instant);
    /// A whole IP packet arrived for this host.
    fn handle_packet(&mut self, now: Instant, packet: &[u8]);
    /// The time from `poll_timeout` has come (may be early or spurious).
    fn handle_timeout(&mut self, now: Instant);
    /// The next whole IP packet to send.
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>>;
    /// Hand back a packet buffer the host is done with (a received packet
    /// after [`handle_packet`](Self::handle_packet)): a transport may build
    /// later packets in it instead of allocating. Optional for both sides;
    /// by default the buffer is dropped.
    fn recycle(&mut self, packet: Vec<u8>) {
        drop(packet);
    }
    /// When the transport next needs `handle_timeout`.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Queue a message.
    fn send(&mut self, now: Instant, msg: OutMessage) -> Result<(), SendError>;
    /// [`send`](Self::send) for a caller that keeps the message, to offer
    /// it again after [`SendError::WouldBlock`]: a transport that only
    /// reads the payload (TCP, TCP Hollywood: it frames a copy anyway)
    /// queues it without the caller copying it first.
    fn send_ref(&mut self, now: Instant, msg: &OutMessage) -> Result<(), SendError> {
        self.send(now, msg.clone())
    }
    /// The lowest round-trip time measured on the connection, if the
    /// transport measures one: half of it estimates the one-way delay a
    /// peer's request travelled, e.g. to turn a deadline the peer gave
    /// into a message lifetime.
    fn min_rtt(&self) -> Option<Duration> {
        None
    }
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<TransportEvent>;
    /// Close gracefully once everything queued is delivered or expired.
    fn close(&mut self, now: Instant);
    /// Counters.
    fn stats(&self) -> TransportStats;
    /// Let the peer have as many messages in flight toward this end as
    /// the configuration allows, where it started with fewer
    /// ([`quic::QuicConfig::peer_streams_at_start`]); `false` where there
    /// is nothing to raise (every transport but QUIC, or not connected).
    fn raise_receive_credit(&mut self) -> bool {
        false
    }
    /// The concrete transport, for what only it knows (e.g.
    /// [`tcp::TcpTransport::details`]).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Application logic written against a [`MessageTransport`]: the same code
/// runs on a simulated host (`hollywood_sim::TransportHost`, virtual time)
/// and on real packets (`hollywood_io::udp`, the OS clock).
pub trait TransportApp: Send + 'static {
    /// Called once, at the host's first wake-up, after the transport started.
    fn on_start(&mut self, now: Instant, t: &mut dyn MessageTransport);
    /// A transport event.
    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent);
    /// The app's own timer is due (may be early or spurious).
    fn on_timeout(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}
    /// The app's next wake-up.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}
