//! Types shared by the two message back ends: the engine over TUN
//! ([`crate::engine::Stream`]) and an ordinary kernel TCP socket
//! ([`crate::kernel::KernelStream`], thesis §4.4 partial deployment).
//!
//! The API follows the thesis's abstract API (§7.2, Table 7.2):
//! `send_message` takes the payload with a relative deadline (lifetime), an
//! optional dependency and a sub-stream and returns the message's sequence
//! number (its id); `recv_message` returns the sub-stream and the payload.
//! Both back ends frame with the same intermediary layer
//! (`hollywood_msg::{Framer, Deframer}`, `docs/PROTOCOL.md`), so either end
//! of a connection may be either back end.

use hollywood_msg::{frame, DeframerStats, Framer, SendError};
use hollywood_tcp::{check_dependency, ExpiredMessage, MetaError};
use std::fmt;
use std::future::Future;
use std::io;
use std::time::Duration;

/// Expired-message reports kept for [`MessageStream::take_expired`] before
/// older ones are dropped (the counters in [`MessageStats`] stay exact).
pub const EXPIRED_QUEUE_LIMIT: usize = 4096;

/// One message to send (thesis §7.2 `send_message`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendMessage {
    /// The payload (any bytes, at most the framer's `max_payload`, 1 MiB by
    /// default).
    pub payload: Vec<u8>,
    /// Sub-stream identifier (thesis §4.2; 0 is the default sub-stream).
    pub substream: u16,
    /// Put the message on the sub-stream's ordered chain: the receiver
    /// releases it only after the previous ordered message of the sub-stream
    /// (thesis §8.3.2). Ordered messages are never replaced by an
    /// inconsistent retransmission (`MessageMeta::replaceable = false`).
    pub ordered: bool,
    /// Relative deadline from the `send_message` call (thesis §4.2); `None`
    /// = fully reliable.
    pub lifetime: Option<Duration>,
    /// The id of the one earlier message this one depends on. Dependencies
    /// must be non-decreasing over a stream (thesis §4.2).
    pub depends_on: Option<u32>,
    /// Which waiting message is sent first: higher first, then the oldest
    /// (the scale of `hollywood_transport::OutMessage::priority`, 0 by
    /// default). The engine gives sequence numbers to the most urgent
    /// message in its message queue (`hollywood_tcp::MessageMeta::priority`;
    /// what waits in front of that queue for room enters it in order). A
    /// kernel sender writes one message at a time and ignores it: order
    /// messages before them (the TAPS layer's send queue does, with
    /// `TCP_NOTSENT_LOWAT` keeping the socket's unsent bytes few). Never on
    /// the wire.
    pub priority: i8,
}

impl SendMessage {
    /// A reliable, unordered message on sub-stream 0.
    pub fn new(payload: impl Into<Vec<u8>>) -> SendMessage {
        SendMessage {
            payload: payload.into(),
            ..SendMessage::default()
        }
    }

    /// The same message on sub-stream `substream`.
    #[must_use]
    pub fn substream(mut self, substream: u16) -> SendMessage {
        self.substream = substream;
        self
    }

    /// The same message on the sub-stream's ordered chain.
    #[must_use]
    pub fn ordered(mut self) -> SendMessage {
        self.ordered = true;
        self
    }

    /// The same message with a lifetime.
    #[must_use]
    pub fn lifetime(mut self, lifetime: Duration) -> SendMessage {
        self.lifetime = Some(lifetime);
        self
    }

    /// The same message depending on message `id`.
    #[must_use]
    pub fn depends_on(mut self, id: u32) -> SendMessage {
        self.depends_on = Some(id);
        self
    }

    /// The same message with priority `priority` (higher is sent first).
    #[must_use]
    pub fn priority(mut self, priority: i8) -> SendMessage {
        self.priority = priority;
        self
    }
}

/// A message as delivered (thesis §7.2 `recv_message`): exactly once or
/// never, CRC32C-verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The id the sender's `send_message` returned.
    pub id: u32,
    /// Sub-stream identifier.
    pub substream: u16,
    /// The message's sequence number on its sub-stream (0, 1, 2, … per
    /// sub-stream, docs/PROTOCOL.md `SEQ`), if the sender wrote one: gaps
    /// show loss per sub-stream.
    pub substream_seq: Option<u32>,
    /// The payload, exactly as sent.
    pub payload: Vec<u8>,
    /// The message was sent on an ordered sub-stream (and is released in
    /// chain order).
    pub ordered: bool,
    /// When the last byte needed to complete the message reached the
    /// receiver's intermediary layer (before any application queueing).
    pub arrival: tokio::time::Instant,
}

/// Message-layer counters of one stream (both back ends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageStats {
    /// Messages accepted by `send_message`.
    pub messages_sent: u64,
    /// Framed bytes of those messages.
    pub framed_bytes_sent: u64,
    /// Messages reported expired (all reasons).
    pub expired: u64,
    /// Of those, replaced on the wire by an inconsistent retransmission
    /// (engine sender with `inconsistent_retransmissions`, thesis §4.2).
    pub replaced: u64,
    /// Of those, never sent because the lifetime had passed (or would have
    /// by arrival) while the message waited for sequence numbers: at the
    /// engine, in its message queue (thesis §4.2 liveness test applied
    /// before sequence numbers); at a kernel sender, before its first byte
    /// reached the socket.
    pub not_sent: u64,
    /// Of those, at the engine, a slot rewritten at its first transmission
    /// (the message expired after it got sequence numbers; rare).
    pub expired_before_send: u64,
    /// Of those, at the engine, a message that travelled in another
    /// message's slot whose earlier content the receiver kept (D-SACK), or
    /// that the sender withdrew when it stopped inconsistent
    /// retransmissions.
    pub displaced: u64,
    /// Expired reports dropped from the [`MessageStream::take_expired`]
    /// queue because it was full (counters above stay exact).
    pub expired_reports_dropped: u64,
    /// Messages handed to the application by `recv_message`.
    pub messages_received: u64,
    /// The receiver's intermediary-layer counters (CRC rejections,
    /// duplicates dropped, padding, ...).
    pub deframer: DeframerStats,
}

/// Why a stream operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamError {
    /// The peer refused the connection (RST in answer to our SYN).
    ConnectionRefused,
    /// The connection attempt did not complete within the timeout.
    ConnectTimeout(Duration),
    /// The peer reset the connection.
    Reset,
    /// Retransmissions or keep-alives were exhausted.
    TimedOut,
    /// The stream was closed (by `close`/`abort`, or the connection ended)
    /// and cannot carry this operation.
    Closed,
    /// The stack task that owned the connection has stopped (after
    /// `Stack::shutdown`, or because every handle was dropped).
    StackClosed,
    /// The stack task failed (e.g. the TUN device returned an I/O error);
    /// the message is the underlying error.
    StackFailed(String),
    /// The engine refused a command (address in use, invalid address...).
    Engine(hollywood_tcp::Error),
    /// The payload is larger than the framer accepts.
    TooLarge(SendError),
    /// Bad message metadata (dependency rules of thesis §4.2).
    Meta(MetaError),
    /// A byte-stream operation on a message-mode direction or the reverse,
    /// or a mode this connection's configuration cannot serve; says which.
    WrongMode(&'static str),
    /// A kernel socket operation failed.
    Io(io::Error),
    /// Secure mode: the TLS handshake failed (untrusted certificate, a
    /// peer that does not speak it), or the peer sent data before it.
    Security(String),
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::ConnectionRefused => f.write_str("connection refused by the peer"),
            StreamError::ConnectTimeout(d) => write!(f, "connection attempt timed out after {d:?}"),
            StreamError::Reset => f.write_str("connection reset by the peer"),
            StreamError::TimedOut => {
                f.write_str("connection timed out (retransmissions exhausted)")
            }
            StreamError::Closed => f.write_str("stream is closed"),
            StreamError::StackClosed => f.write_str("the stack task has stopped"),
            StreamError::StackFailed(e) => write!(f, "the stack task failed: {e}"),
            StreamError::Engine(e) => write!(f, "TCP engine refused the command: {e}"),
            StreamError::TooLarge(e) => write!(f, "message refused: {e}"),
            StreamError::Meta(e) => write!(f, "message refused: {e}"),
            StreamError::WrongMode(why) => write!(f, "wrong stream mode: {why}"),
            StreamError::Io(e) => write!(f, "socket error: {e}"),
            StreamError::Security(e) => write!(f, "secure handshake failed: {e}"),
        }
    }
}

impl std::error::Error for StreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StreamError::Engine(e) => Some(e),
            StreamError::TooLarge(e) => Some(e),
            StreamError::Meta(e) => Some(e),
            StreamError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for StreamError {
    /// Kernel socket errors: the connection-level kinds become the typed
    /// variants, everything else stays [`StreamError::Io`]. `EPIPE` is a
    /// reset too: Linux answers a write on a connection that a RST ended
    /// with it once the `ECONNRESET` was taken (the socket is shut down
    /// for sending); a write after our own half-close never reaches the
    /// socket (it is [`StreamError::Closed`] before).
    fn from(e: io::Error) -> StreamError {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => StreamError::ConnectionRefused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => StreamError::Reset,
            io::ErrorKind::TimedOut => StreamError::TimedOut,
            _ => StreamError::Io(e),
        }
    }
}

impl From<StreamError> for io::Error {
    fn from(e: StreamError) -> io::Error {
        let kind = match &e {
            StreamError::Io(inner) => inner.kind(),
            StreamError::ConnectionRefused => io::ErrorKind::ConnectionRefused,
            StreamError::Reset => io::ErrorKind::ConnectionReset,
            StreamError::TimedOut | StreamError::ConnectTimeout(_) => io::ErrorKind::TimedOut,
            StreamError::Closed | StreamError::StackClosed => io::ErrorKind::BrokenPipe,
            StreamError::TooLarge(_) | StreamError::Meta(_) | StreamError::WrongMode(_) => {
                io::ErrorKind::InvalidInput
            }
            StreamError::Engine(hollywood_tcp::Error::AddrInUse) => io::ErrorKind::AddrInUse,
            StreamError::Engine(_) | StreamError::StackFailed(_) => io::ErrorKind::Other,
            StreamError::Security(_) => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, e)
    }
}

/// A message stream: the intermediary layer's API (thesis §7.2), served by
/// the engine ([`crate::engine::Stream`]) or a kernel socket
/// ([`crate::kernel::KernelStream`]). Written with `impl Future + Send`
/// (the desugared `async fn`) so generic callers can spawn the futures.
pub trait MessageStream: Send {
    /// Frame and queue one message; returns its id. Waits while the send
    /// queue is full (backpressure). A message whose lifetime passes before
    /// it is sent may be dropped; it is then reported by
    /// [`take_expired`](Self::take_expired) and counted in
    /// [`MessageStats::expired`].
    fn send_message(
        &mut self,
        m: SendMessage,
    ) -> impl Future<Output = Result<u32, StreamError>> + Send;

    /// The next message; `Ok(None)` once the peer closed and every message
    /// was delivered. Messages already received are returned before an
    /// error.
    fn recv_message(
        &mut self,
    ) -> impl Future<Output = Result<Option<ReceivedMessage>, StreamError>> + Send;

    /// Close the sending direction after everything queued (FIN); the peer
    /// may keep sending.
    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send;

    /// Message-layer counters.
    fn message_stats(&self) -> MessageStats;

    /// Messages reported expired since the last call, oldest first (at most
    /// [`EXPIRED_QUEUE_LIMIT`] are kept).
    fn take_expired(&mut self) -> Vec<ExpiredMessage>;
}

/// The sender half of the intermediary layer that both back ends share:
/// checks the dependency rules (thesis §4.2) before an id is consumed, then
/// frames with [`Framer`].
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageFramer {
    framer: Framer,
    /// Latest dependency declared per sub-stream (dependencies are
    /// non-decreasing within a sub-stream, thesis §4.2).
    latest_dependency: std::collections::BTreeMap<u16, u32>,
    /// Secure mode: frames the handshake's messages, whose ids lie outside
    /// the application's sequence (a framer of their own leaves the
    /// application's next id alone).
    handshake: Option<Framer>,
}

impl MessageFramer {
    pub(crate) fn new(framer: Framer) -> MessageFramer {
        MessageFramer {
            framer,
            latest_dependency: std::collections::BTreeMap::new(),
            handshake: None,
        }
    }

    /// An upper bound on the framed length of `m` (so a sender can wait for
    /// queue space before the id is assigned).
    pub(crate) fn frame_len_bound(m: &SendMessage) -> usize {
        // header (≤ 15: SEQ and ORDERED) + payload + CRC (4), COBS adds
        // ≤ 1 per 254 + 1, plus the two markers (docs/PROTOCOL.md §1–2).
        let body = frame::MAX_HEADER_LEN + m.payload.len() + 4;
        body + body / 254 + 3
    }

    /// The largest payload whose [`frame_len_bound`](Self::frame_len_bound)
    /// fits in `bytes`.
    pub(crate) fn max_payload_within(bytes: usize) -> usize {
        let bound = |p: usize| {
            let body = frame::MAX_HEADER_LEN + p + 4;
            body + body / 254 + 3
        };
        // bound(p) ≥ p + 22, and it grows by at most 2 per payload byte
        // added across a COBS block boundary, so start close and step down.
        let mut p = (bytes.saturating_sub(22) / 255) * 254;
        while bound(p + 1) <= bytes {
            p += 1;
        }
        while p > 0 && bound(p) > bytes {
            p -= 1;
        }
        p
    }

    /// Check `m` without consuming an id.
    pub(crate) fn check(&self, m: &SendMessage) -> Result<(), StreamError> {
        let max = self.framer.max_payload();
        if m.payload.len() > max {
            return Err(StreamError::TooLarge(SendError::TooLarge {
                len: m.payload.len(),
                max,
            }));
        }
        check_dependency(
            self.framer.next_id(),
            m.depends_on,
            self.latest_dependency.get(&m.substream).copied(),
        )
        .map_err(StreamError::Meta)
    }

    /// Frame a secure-mode handshake message `id` on
    /// [`HANDSHAKE_SUBSTREAM`](hollywood_transport::secure::HANDSHAKE_SUBSTREAM),
    /// ordered (an out-of-order receiver must hand TLS its records in
    /// order), outside the application's id sequence.
    pub(crate) fn frame_handshake(
        &mut self,
        id: u32,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), StreamError> {
        self.handshake
            .get_or_insert_with(Framer::default)
            .frame_id(
                id,
                hollywood_transport::secure::HANDSHAKE_SUBSTREAM,
                true,
                payload,
                out,
            )
            .map_err(StreamError::TooLarge)
    }

    /// Check and frame `m`, appending the frame to `out`; returns the id.
    /// With `sealer` (secure mode) the payload is sealed under its id first.
    pub(crate) fn frame(
        &mut self,
        m: &SendMessage,
        sealer: Option<&mut hollywood_transport::secure::Sealer>,
        out: &mut Vec<u8>,
    ) -> Result<u32, StreamError> {
        self.check(m)?;
        let id = match sealer {
            Some(s) => {
                let id = self.framer.next_id();
                let sealed = s.seal(id, m.substream, &m.payload);
                self.framer
                    .frame_id(id, m.substream, m.ordered, &sealed, out)
                    .map_err(StreamError::TooLarge)?;
                id
            }
            None => self
                .framer
                .frame(m.substream, m.ordered, &m.payload, out)
                .map_err(StreamError::TooLarge)?,
        };
        if let Some(d) = m.depends_on {
            self.latest_dependency.insert(m.substream, d);
        }
        Ok(id)
    }
}

/// A bounded queue of expired reports plus exact counters.
#[derive(Debug, Default)]
pub(crate) struct ExpiredLog {
    queue: std::collections::VecDeque<ExpiredMessage>,
}

impl ExpiredLog {
    /// Record `e` in `stats` and the queue.
    pub(crate) fn push(&mut self, e: ExpiredMessage, stats: &mut MessageStats) {
        stats.expired += 1;
        match e.reason {
            // A skip (the deadline TCP) is a retransmission given up too.
            hollywood_tcp::ExpiryReason::Replaced { .. } | hollywood_tcp::ExpiryReason::Skipped => {
                stats.replaced += 1
            }
            hollywood_tcp::ExpiryReason::NotSent => stats.not_sent += 1,
            hollywood_tcp::ExpiryReason::ExpiredBeforeSend { .. } => stats.expired_before_send += 1,
            hollywood_tcp::ExpiryReason::Displaced => stats.displaced += 1,
        }
        if self.queue.len() >= EXPIRED_QUEUE_LIMIT {
            self.queue.pop_front();
            stats.expired_reports_dropped += 1;
        }
        self.queue.push_back(e);
    }

    pub(crate) fn take(&mut self) -> Vec<ExpiredMessage> {
        self.queue.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_msg::{Deframer, FramerConfig};
    use hollywood_tcp::ExpiryReason;

    #[test]
    fn frame_bound_holds() {
        let mut f = MessageFramer::default();
        for len in [0, 1, 160, 253, 254, 255, 1000, 70_000] {
            for ordered in [false, true] {
                let m = SendMessage {
                    payload: vec![7; len],
                    ordered,
                    ..SendMessage::default()
                };
                let mut out = Vec::new();
                f.frame(&m, None, &mut out).unwrap();
                assert!(
                    out.len() <= MessageFramer::frame_len_bound(&m),
                    "len {len}: {} > bound",
                    out.len()
                );
            }
        }
    }

    #[test]
    fn max_payload_within_inverts_the_bound() {
        for bytes in [0, 17, 18, 19, 300, 4096, 65_536, 4 << 20] {
            let p = MessageFramer::max_payload_within(bytes);
            let fits =
                |p: usize| MessageFramer::frame_len_bound(&SendMessage::new(vec![1; p])) <= bytes;
            assert!(p == 0 || fits(p), "{bytes}: {p} does not fit");
            assert!(!fits(p + 1), "{bytes}: {} would fit too", p + 1);
        }
    }

    #[test]
    fn dependency_rules_consume_no_id() {
        let mut f = MessageFramer::default();
        let mut out = Vec::new();
        assert_eq!(
            f.frame(&SendMessage::new(*b"a"), None, &mut out).unwrap(),
            0
        );
        assert_eq!(
            f.frame(&SendMessage::new(*b"b"), None, &mut out).unwrap(),
            1
        );
        // Forward (or self) dependency: id 2 would be assigned next.
        assert!(matches!(
            f.frame(&SendMessage::new(*b"c").depends_on(2), None, &mut out),
            Err(StreamError::Meta(MetaError::ForwardDependency))
        ));
        assert_eq!(
            f.frame(&SendMessage::new(*b"c").depends_on(1), None, &mut out)
                .unwrap(),
            2
        );
        assert!(matches!(
            f.frame(&SendMessage::new(*b"d").depends_on(0), None, &mut out),
            Err(StreamError::Meta(MetaError::DecreasingDependency))
        ));
        assert_eq!(
            f.frame(&SendMessage::new(*b"d").depends_on(1), None, &mut out)
                .unwrap(),
            3
        );
        let mut small = MessageFramer::new(Framer::new(FramerConfig {
            initial_id: 0,
            max_payload: 4,
            ..FramerConfig::default()
        }));
        assert!(matches!(
            small.frame(&SendMessage::new(vec![1; 5]), None, &mut out),
            Err(StreamError::TooLarge(_))
        ));
        // Everything framed decodes, in order, with the ids returned.
        let mut d = Deframer::default();
        d.push_stream(&out, 0);
        let ids: Vec<u32> = std::iter::from_fn(|| d.poll_message())
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, vec![0, 1, 2, 3]);
    }

    #[test]
    fn expired_log_is_bounded_and_counts_exactly() {
        let mut log = ExpiredLog::default();
        let mut stats = MessageStats::default();
        let n = EXPIRED_QUEUE_LIMIT as u32 + 10;
        for id in 0..n {
            let reason = match id % 4 {
                0 => ExpiryReason::Replaced { by: Some(id + 1) },
                1 => ExpiryReason::ExpiredBeforeSend { by: Some(id + 1) },
                2 => ExpiryReason::NotSent,
                _ => ExpiryReason::Displaced,
            };
            log.push(ExpiredMessage { id, reason }, &mut stats);
        }
        assert_eq!(stats.expired, u64::from(n));
        assert_eq!(
            stats.replaced + stats.expired_before_send + stats.not_sent + stats.displaced,
            u64::from(n)
        );
        assert_eq!(stats.not_sent, (0..n).filter(|i| i % 4 == 2).count() as u64);
        assert_eq!(stats.expired_reports_dropped, 10);
        let q = log.take();
        assert_eq!(q.len(), EXPIRED_QUEUE_LIMIT);
        assert_eq!(q[0].id, 10, "oldest reports go first");
        assert!(log.take().is_empty());
    }

    #[test]
    fn io_error_kinds_map_both_ways() {
        let e: StreamError = io::Error::from(io::ErrorKind::ConnectionRefused).into();
        assert!(matches!(e, StreamError::ConnectionRefused));
        let e: StreamError = io::Error::from(io::ErrorKind::ConnectionReset).into();
        assert!(matches!(e, StreamError::Reset));
        // EPIPE: a write after a RST ended the connection.
        let e: StreamError = io::Error::from_raw_os_error(32).into();
        assert!(matches!(e, StreamError::Reset), "{e}");
        let e: StreamError = io::Error::from(io::ErrorKind::UnexpectedEof).into();
        assert!(matches!(e, StreamError::Io(_)));
        assert_eq!(
            io::Error::from(StreamError::Reset).kind(),
            io::ErrorKind::ConnectionReset
        );
        assert_eq!(
            io::Error::from(StreamError::WrongMode("x")).kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
