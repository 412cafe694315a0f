//! TCP and the TCP Hollywood deployments (thesis §4.4) as a
//! [`MessageTransport`]: our engine ([`hollywood_tcp::Endpoint`]) with the
//! intermediary layer (`hollywood-msg`: COBS framing, CRC32C, sub-streams,
//! de-duplication) on top, so applications written against the interface
//! run over standard TCP, TCP Hollywood and its partial deployments exactly
//! as they run over QUIC or UDP.
//!
//! - Sending: each [`OutMessage`] becomes one frame with the message's own
//!   id (the engine needs ids increasing in the order messages are queued,
//!   thesis §4.2) and is queued with its lifetime, dependency and
//!   sub-stream ([`MessageMeta`]). An inconsistent-retransmission sender
//!   drops what can no longer arrive in time (§4.2's liveness test) and
//!   reports it ([`TransportEvent::Expired`]); a standard sender writes the
//!   frame to the byte stream.
//! - Receiving: with out-of-order delivery (§4.3) the deframer gets each
//!   segment as it arrives; otherwise the in-order byte stream. Every
//!   message is delivered once, with the time its last byte arrived.
//! - A client connects to its `remote`; a server accepts the first
//!   connection and resets any further one (one connection per transport).
//!
//! The engine has no per-message acknowledgement, so this transport never
//! reports [`TransportEvent::Acked`].

use crate::secure::{SecureSession, SecureStats, HANDSHAKE_SUBSTREAM, TAG_LEN};
use crate::{
    ExpiryReason, InMessage, Instant, MessageTransport, OutMessage, Role, SendError,
    TransportEvent, TransportStats, MAX_MESSAGE,
};
use hollywood_msg::{Deframer, DeframerConfig, DeframerStats, Framer, FramerConfig};
use hollywood_tcp::{
    Config, ConnHandle, Endpoint, EndpointEvent, Event, ExpiredMessage, HollywoodStats,
    MessageMeta, OooStats, SendMessageError, State,
};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Which halves of TCP Hollywood are deployed (thesis §4.4). The
/// intermediary layer (framing, CRC, de-duplication) runs in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Deployment {
    /// Neither side modified: standard TCP (Nagle off) carrying framed
    /// messages in order.
    Tcp,
    /// Both extensions: inconsistent retransmissions at the sender,
    /// out-of-order delivery at the receiver.
    Hollywood,
    /// Sender only: inconsistent retransmissions (and consistent
    /// segmentation); the receiver is standard TCP.
    HollywoodIr,
    /// Receiver only: out-of-order delivery; the sender is standard TCP.
    HollywoodOoo,
    /// Not TCP Hollywood: [TCP-video] §7.2's deadline TCP, a comparison mode.
    /// The sender drops messages past their deadline before they get
    /// sequence numbers and *skips* a retransmission whose messages are
    /// all past theirs, announcing the next sequence number to expect in
    /// an experimental TCP option, which leaves a hole in the sequence
    /// space; the receiver is standard TCP that understands the option
    /// (in-order delivery, skipped bytes read as empty frames). Not
    /// deployable: a middlebox that tracks sequence numbers stalls it
    /// (thesis §4.5, `hollywood lab middlebox`). Not in
    /// [`Deployment::ALL`].
    Deadline,
}

impl Deployment {
    /// All four, in the order experiments report them.
    pub const ALL: [Deployment; 4] = [
        Deployment::Tcp,
        Deployment::HollywoodIr,
        Deployment::HollywoodOoo,
        Deployment::Hollywood,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Deployment::Tcp => "tcp",
            Deployment::Hollywood => "hollywood",
            Deployment::HollywoodIr => "hollywood-ir",
            Deployment::HollywoodOoo => "hollywood-ooo",
            Deployment::Deadline => "tcp-deadline",
        }
    }

    /// Parse a command-line name: a TCP deployment's
    /// ([`TransportKind::parse`](crate::TransportKind::parse) takes every
    /// transport's).
    pub fn parse(s: &str) -> Result<Deployment, String> {
        match crate::TransportKind::parse(s) {
            Ok(crate::TransportKind::Tcp(d)) => Ok(d),
            _ => Err(format!(
                "unknown transport '{s}': use tcp, hollywood, hollywood-ir, hollywood-ooo or tcp-deadline"
            )),
        }
    }

    /// Inconsistent retransmissions at the sender.
    pub fn sender_ir(self) -> bool {
        matches!(self, Deployment::Hollywood | Deployment::HollywoodIr)
    }

    /// The sender queues messages in the engine's message table (thesis
    /// §4.2): an inconsistent-retransmission sender, or the deadline TCP.
    /// Such a sender may drop a message before it gets sequence numbers,
    /// so where each message went is known only from its `MessageSent`
    /// reports.
    pub fn uses_message_queue(self) -> bool {
        self.sender_ir() || self == Deployment::Deadline
    }

    /// Out-of-order delivery at the receiver.
    pub fn receiver_ooo(self) -> bool {
        matches!(self, Deployment::Hollywood | Deployment::HollywoodOoo)
    }

    /// The sender's engine configuration on top of `base`: Nagle off in all
    /// cases (the thesis's evaluations set TCP_NODELAY); a modified sender
    /// also segments consistently (thesis §4.2).
    pub fn sender_config(self, base: &Config) -> Config {
        let mut c = base.clone();
        let deadline = self == Deployment::Deadline;
        c.nagle = false;
        c.consistent_segmentation = self.uses_message_queue();
        // The deadline sender uses the message queue (expiry before
        // sequence numbers) and skips instead of rewriting.
        c.hollywood.inconsistent_retransmissions = self.uses_message_queue();
        c.hollywood.seq_gap_deadlines = deadline;
        // The live-stream window (docs/LIVE-CC.md) for TCP Hollywood's
        // sender; the deadline TCP is [TCP-video]'s design, left as it was.
        c.hollywood.live_window = self.sender_ir();
        c.hollywood.out_of_order_delivery = false;
        c
    }

    /// The receiver's engine configuration on top of `base`.
    pub fn receiver_config(self, base: &Config) -> Config {
        let mut c = base.clone();
        c.nagle = false;
        c.hollywood.inconsistent_retransmissions = false;
        c.hollywood.live_window = false;
        c.hollywood.out_of_order_delivery = self.receiver_ooo();
        c.hollywood.seq_gap_receive = self == Deployment::Deadline;
        c
    }

    /// The two ends of a one-way message stream: the sender (client, at
    /// `sender`, connecting to `receiver`) and the receiver (server),
    /// each configured for its half of the deployment.
    pub fn endpoints(
        self,
        base: &Config,
        sender: SocketAddr,
        receiver: SocketAddr,
        seed: u64,
    ) -> (TcpTransport, TcpTransport) {
        let a = TcpTransport::new(
            self.name(),
            self.sender_config(base),
            Role::Client { remote: receiver },
            sender,
            seed,
        );
        let b = TcpTransport::new(
            self.name(),
            self.receiver_config(base),
            Role::Server,
            receiver,
            seed ^ 0x5eed,
        );
        (a, b)
    }

    /// [`Deployment::endpoints`] in secure mode: the receiver (server)
    /// presents `identity`, the sender trusts it (module [`crate::secure`]).
    pub fn endpoints_secure(
        self,
        base: &Config,
        sender: SocketAddr,
        receiver: SocketAddr,
        seed: u64,
        identity: &crate::secure::Identity,
    ) -> Result<(TcpTransport, TcpTransport), String> {
        let (a, b) = self.endpoints(base, sender, receiver, seed);
        Ok((
            a.with_security(SecureSession::client(identity)?),
            b.with_security(SecureSession::server(identity)?),
        ))
    }
}

/// Where a TCP Hollywood sender put a message's frame (from the engine's
/// `MessageSent` event): what an experiment needs to find the packets that
/// carried it. A message can have several: copies carried in older
/// messages' slots, then its own slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The message id.
    pub id: u32,
    /// When it went on the wire.
    pub time: Instant,
    /// First sequence number of its frame.
    pub seq: hollywood_wire::SeqNumber,
    /// Framed length.
    pub len: u32,
    /// The message's first placement.
    pub first: bool,
}

/// Engine and intermediary-layer counters beyond [`TransportStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpDetails {
    /// The sender's inconsistent-retransmission counters.
    pub hollywood: HollywoodStats,
    /// Message protection counters (secure mode only).
    pub secure: Option<SecureStats>,
    /// The receiver's out-of-order delivery counters.
    pub ooo: OooStats,
    /// The receiver's intermediary-layer counters (CRC rejections,
    /// duplicates dropped, ...).
    pub deframer: DeframerStats,
    /// Segments the engine retransmitted.
    pub retransmitted_segments: u64,
}

/// Sub-streams of recent messages on a sub-stream other than 0, for the
/// [`TransportEvent::Expired`] reports (the engine reports ids only).
/// Ids increase, so it is a window: an expiry is reported within a few
/// RTTs of queueing, long before this many later messages.
const SUBSTREAM_WINDOW: usize = 1 << 16;

/// Secure mode: bytes of messages that may wait for the keys (they arrive
/// ahead of the handshake's last message only with out-of-order delivery),
/// each charged its payload plus [`EARLY_OVERHEAD`].
const EARLY_MAX_BYTES: usize = 1 << 20;
const EARLY_OVERHEAD: usize = 64;

use crate::EVENT_OVERHEAD;
pub use crate::RX_QUEUE_LIMIT;

#[derive(Debug)]
struct Secure {
    session: SecureSession,
    early: VecDeque<(hollywood_msg::Message, Instant)>,
    early_bytes: usize,
    /// `Connected` was reported.
    announced: bool,
    /// `Failed` was reported.
    failed: bool,
}

/// TCP or a TCP Hollywood deployment behind the interface (module docs).
#[derive(Debug)]
pub struct TcpTransport {
    name: &'static str,
    ep: Endpoint,
    role: Role,
    local: SocketAddr,
    ooo: bool,
    conn: Option<ConnHandle>,
    framer: Framer,
    deframer: Deframer,
    events: VecDeque<TransportEvent>,
    stats: TransportStats,
    details: TcpDetails,
    scratch: Vec<u8>,
    /// In-order path: the latest stack arrival among the bytes of the frame
    /// in progress (`drain`).
    stream_run: Option<Instant>,
    frame: Vec<u8>,
    substreams: VecDeque<(u32, u16)>,
    placements: Option<Vec<Placement>>,
    /// Secure mode (crate::secure): the session, and messages that arrived
    /// before its keys.
    secure: Option<Box<Secure>>,
    /// Bytes of received messages in `events` (payload + EVENT_OVERHEAD).
    rx_queued: usize,
    /// Draining stopped at RX_QUEUE_LIMIT; resumes from `poll_event`.
    rx_held: bool,
    /// The latest time the transport was called with.
    last_now: Instant,
    started: bool,
    connected: bool,
    peer_closed: bool,
    closed: bool,
}

impl TcpTransport {
    /// An endpoint at `local` running the engine with `config` (its
    /// Hollywood switches say what this end does; see [`Deployment`]);
    /// `seed` keys its ISNs and ephemeral ports. `name` is what
    /// [`MessageTransport::name`] reports.
    pub fn new(
        name: &'static str,
        config: Config,
        role: Role,
        local: SocketAddr,
        seed: u64,
    ) -> TcpTransport {
        let ooo = config.hollywood.out_of_order_delivery;
        TcpTransport {
            name,
            ep: Endpoint::new(config, seed),
            role,
            local,
            ooo,
            conn: None,
            framer: Framer::new(FramerConfig::default()),
            deframer: Deframer::new(DeframerConfig::default()),
            events: VecDeque::new(),
            stats: TransportStats::default(),
            details: TcpDetails::default(),
            scratch: vec![0; 64 * 1024],
            stream_run: None,
            frame: Vec::new(),
            substreams: VecDeque::new(),
            placements: None,
            secure: None,
            rx_queued: 0,
            rx_held: false,
            last_now: Instant::ZERO,
            started: false,
            connected: false,
            peer_closed: false,
            closed: false,
        }
    }

    /// Secure mode (module [`crate::secure`]): a TLS 1.3 handshake on its
    /// own sub-stream when the connection opens, then every message sealed.
    /// `Connected` is reported once the handshake completes.
    pub fn with_security(mut self, session: SecureSession) -> TcpTransport {
        self.secure = Some(Box::new(Secure {
            session,
            early: VecDeque::new(),
            early_bytes: 0,
            announced: false,
            failed: false,
        }));
        self
    }

    /// The connection is up for the application: TCP connected, and in
    /// secure mode the handshake done.
    fn ready(&self) -> bool {
        self.connected && self.secure.as_ref().is_none_or(|s| s.session.is_ready())
    }

    /// Secure mode: send what the handshake has to say, report `Connected`
    /// when it is done and open the messages that came before the keys.
    fn secure_pump(&mut self, now: Instant) {
        let Some(sec) = self.secure.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        while let Some(m) = sec.session.poll_handshake() {
            out.push(m);
        }
        let failure = sec.session.failure().map(str::to_string);
        for (id, bytes) in out {
            self.frame.clear();
            if self
                .framer
                .frame_id(id, HANDSHAKE_SUBSTREAM, true, &bytes, &mut self.frame)
                .is_err()
            {
                self.secure_fail("handshake message too large".into());
                return;
            }
            let meta = MessageMeta {
                id,
                lifetime: None,
                depends_on: None,
                replaceable: false,
                substream: HANDSHAKE_SUBSTREAM,
                priority: 0,
            };
            let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) else {
                return;
            };
            if let Err(e) = c.send_message(now, &self.frame, meta) {
                self.secure_fail(format!("cannot send the handshake: {e:?}"));
                return;
            }
        }
        if let Some(f) = failure {
            self.secure_fail(f);
            return;
        }
        let connected = self.connected;
        let sec = self.secure.as_mut().expect("checked above");
        if connected && sec.session.is_ready() && !sec.announced {
            sec.announced = true;
            self.events.push_back(TransportEvent::Connected);
            let early: Vec<_> = sec.early.drain(..).collect();
            sec.early_bytes = 0;
            for m in early {
                self.deliver_one(now, m);
            }
        }
    }

    fn secure_fail(&mut self, why: String) {
        let Some(sec) = self.secure.as_mut() else {
            return;
        };
        if !sec.failed {
            sec.failed = true;
            self.events
                .push_back(TransportEvent::Failed(format!("secure handshake: {why}")));
            if let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) {
                c.abort();
            }
        }
    }

    /// Keep a [`Placement`] per message a TCP Hollywood sender puts on the
    /// wire (for experiments; grows with the number of messages).
    pub fn record_placements(&mut self) {
        self.placements.get_or_insert_with(Vec::new);
    }

    /// The placements recorded since [`TcpTransport::record_placements`].
    pub fn placements(&self) -> &[Placement] {
        self.placements.as_deref().unwrap_or(&[])
    }

    /// Engine and intermediary-layer counters (last seen).
    pub fn details(&self) -> TcpDetails {
        self.details
    }

    /// The engine.
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    fn substream_of(&self, id: u32) -> u16 {
        // Ids increase along the window: search back from the newest.
        self.substreams
            .iter()
            .rev()
            .find(|(i, _)| *i == id)
            .map_or(0, |x| x.1)
    }

    fn snapshot(&mut self) {
        if let Some(c) = self.conn.and_then(|h| self.ep.connection(h)) {
            self.details.hollywood = *c.hollywood_stats();
            self.details.ooo = *c.ooo_stats();
            self.details.retransmitted_segments = c.stats().retransmitted_segments;
            self.stats.srtt = c.srtt().or(self.stats.srtt);
        }
        self.details.deframer = self.deframer.stats();
        self.details.secure = self.secure.as_ref().map(|s| s.session.stats());
        self.stats.packets_lost = self.details.retransmitted_segments;
        self.stats.malformed =
            self.ep.stats().malformed_dropped + self.details.deframer.crc_rejected;
    }

    /// Room in the event queue for more received messages.
    fn rx_room(&mut self) -> bool {
        self.rx_held = self.rx_queued >= RX_QUEUE_LIMIT;
        !self.rx_held
    }

    /// Bytes of received messages waiting for the application (bounded by
    /// about [`RX_QUEUE_LIMIT`]).
    pub fn rx_queued_bytes(&self) -> usize {
        self.rx_queued
    }

    /// Hand everything readable to the deframer, then its messages to the
    /// application, while the event queue has room.
    fn drain(&mut self, now: Instant) {
        if self.ooo {
            loop {
                if !self.rx_room() {
                    return;
                }
                let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) else {
                    return;
                };
                // Each segment at the time it reached the engine: a
                // message's stack arrival is that of the segment that
                // completed it.
                let Some(s) = c.recv_segment() else {
                    // Everything below RCV.NXT has been pushed: fragments
                    // that can no longer complete may go.
                    self.deframer.advance_floor(c.rcv_nxt().0);
                    self.deliver(now, None);
                    return;
                };
                self.deframer
                    .push_segment(s.seq.0, &s.payload, s.arrival.as_nanos());
                if let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) {
                    c.recycle_segment(s.payload);
                }
                self.deliver(now, None);
            }
        }
        loop {
            if !self.rx_room() {
                return;
            }
            let piece = {
                let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) else {
                    return;
                };
                c.recv_stamped(&mut self.scratch)
            };
            let Ok((n, t)) = piece else { break };
            if n == 0 {
                break;
            }
            // The bytes of one arrival time (`recv_stamped`): the frame in
            // progress first reached the stack when the latest of its
            // pieces did.
            let t = t.unwrap_or(now);
            let run = self.stream_run.map_or(t, |r| r.max(t));
            self.deframer
                .push_stream(&self.scratch[..n], now.as_nanos());
            let delivered = self.deliver(now, Some((run, t)));
            // A piece ending in a frame delimiter (the framing's zero byte)
            // ends at a frame boundary: the next frame starts in a later
            // piece. Otherwise the rest of this piece begins the next one.
            self.stream_run = match (delivered, self.scratch[n - 1] == 0) {
                (0, _) => Some(run),
                (_, true) => None,
                (_, false) => Some(t),
            };
        }
    }

    /// Hand the deframer's messages to the application, delivered `now`.
    /// `stream`: the stack arrival of the first one (the frame in progress)
    /// and of the others (whole inside the last piece) on the in-order
    /// path; otherwise each message's own completion time. Returns how
    /// many.
    fn deliver(&mut self, now: Instant, stream: Option<(Instant, Instant)>) -> usize {
        let mut k = 0;
        let mut handshake = false;
        while let Some(m) = self.deframer.poll_message() {
            let received = match stream {
                Some((first, _)) if k == 0 => first,
                Some((_, rest)) => rest,
                None => Instant::from_nanos(m.arrival_ns),
            };
            k += 1;
            if let Some(sec) = self.secure.as_mut() {
                if m.substream == HANDSHAKE_SUBSTREAM {
                    handshake = true;
                    if let Err(e) = sec.session.handle_handshake(&m.payload) {
                        self.secure_fail(e);
                    }
                    continue;
                }
                if !sec.session.is_ready() {
                    // Out-of-order delivery can hand up a message before
                    // the handshake's last one: it waits for the keys.
                    let cost = m.payload.len() + EARLY_OVERHEAD;
                    let room = sec.early_bytes + cost <= EARLY_MAX_BYTES;
                    sec.session.note_early(!room);
                    if room {
                        sec.early_bytes += cost;
                        sec.early.push_back((m, received.min(now)));
                    }
                    continue;
                }
            }
            self.deliver_one(now, (m, received.min(now)));
        }
        if handshake {
            self.secure_pump(now);
        }
        k
    }

    /// Hand one deframed message (and when it reached the stack) to the
    /// application: opened first in secure mode.
    fn deliver_one(&mut self, now: Instant, (m, received): (hollywood_msg::Message, Instant)) {
        let payload = match self.secure.as_mut() {
            Some(sec) => match sec.session.open(m.id, m.substream, &m.payload) {
                Ok(p) => p,
                // Changed, spliced, replayed or foreign: counted, dropped.
                Err(_) => return,
            },
            None => m.payload,
        };
        self.stats.messages_delivered += 1;
        self.rx_queued += payload.len() + EVENT_OVERHEAD;
        self.events.push_back(TransportEvent::Message(InMessage {
            id: m.id,
            substream: m.substream,
            payload,
            arrival: now,
            received,
        }));
    }

    fn expired(&mut self, e: ExpiredMessage) {
        use hollywood_tcp::ExpiryReason as R;
        self.stats.messages_expired += 1;
        let reason = match e.reason {
            R::NotSent | R::ExpiredBeforeSend { .. } => ExpiryReason::BeforeSend,
            R::Replaced { .. } | R::Displaced | R::Skipped => ExpiryReason::Abandoned,
        };
        self.events.push_back(TransportEvent::Expired {
            id: e.id,
            substream: self.substream_of(e.id),
            reason,
        });
    }

    fn on_conn_event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Connected if !self.connected => {
                self.connected = true;
                if self.secure.is_some() {
                    // Ready once the handshake is done (secure_pump).
                    self.secure_pump(now);
                } else {
                    self.events.push_back(TransportEvent::Connected);
                }
                self.drain(now);
            }
            Event::Connected | Event::Readable => self.drain(now),
            Event::Writable => self.events.push_back(TransportEvent::Writable),
            Event::PeerClosed => {
                self.drain(now);
                if !self.peer_closed {
                    self.peer_closed = true;
                    self.events.push_back(TransportEvent::PeerClosed);
                }
            }
            Event::Expired(e) => self.expired(e),
            Event::MessageSent {
                id,
                seq,
                len,
                first,
            } => {
                if let Some(p) = &mut self.placements {
                    p.push(Placement {
                        id,
                        time: now,
                        seq,
                        len,
                        first,
                    });
                }
            }
            Event::Reset => self.events.push_back(TransportEvent::Failed(
                "the peer reset the connection".into(),
            )),
            Event::TimedOut => self
                .events
                .push_back(TransportEvent::Failed("the connection timed out".into())),
            Event::Closed => {
                self.drain(now);
                if !self.closed {
                    self.closed = true;
                    self.events.push_back(TransportEvent::Closed);
                }
            }
            Event::RewritingStopped => {}
        }
    }

    fn pump(&mut self, now: Instant) {
        while let Some(ev) = self.ep.poll_event() {
            match ev {
                EndpointEvent::Accepted { handle, .. } => {
                    if self.conn.is_none() {
                        self.conn = Some(handle);
                    } else if let Some(c) = self.ep.connection_mut(handle) {
                        // One connection per transport.
                        c.abort();
                    }
                }
                EndpointEvent::Conn { handle, event } if Some(handle) == self.conn => {
                    self.on_conn_event(now, event);
                }
                EndpointEvent::Conn { .. } => {}
            }
        }
        // Both directions are done once TIME-WAIT begins: the application
        // hears Closed then (as a socket user does), not 2·MSL later.
        let time_wait = self
            .conn
            .and_then(|h| self.ep.state_of(h))
            .is_some_and(|s| s == State::TimeWait);
        if time_wait && !self.closed {
            self.drain(now);
            self.closed = true;
            self.events.push_back(TransportEvent::Closed);
        }
        self.snapshot();
    }
}

impl MessageTransport for TcpTransport {
    fn name(&self) -> &'static str {
        self.name
    }

    fn start(&mut self, now: Instant) {
        if self.started {
            return;
        }
        self.started = true;
        match self.role {
            Role::Client { remote } => match self.ep.connect(now, self.local, remote) {
                Ok(h) => self.conn = Some(h),
                Err(e) => self
                    .events
                    .push_back(TransportEvent::Failed(format!("connect: {e}"))),
            },
            Role::Server => {
                if let Err(e) = self.ep.listen(self.local) {
                    self.events
                        .push_back(TransportEvent::Failed(format!("listen: {e}")));
                }
            }
        }
        self.pump(now);
    }

    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.last_now = now;
        self.stats.packets_received += 1;
        self.ep.handle_packet(now, packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.last_now = now;
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        if self
            .deframer
            .poll_timeout()
            .is_some_and(|t| t <= now.as_nanos())
        {
            self.deframer.handle_timeout(now.as_nanos());
            self.deliver(now, None);
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let p = self.ep.poll_transmit(now);
        // Building a segment may raise events (a message got its sequence
        // numbers: `MessageSent`, with this time).
        self.pump(now);
        let p = p?;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += p.len() as u64;
        Some(p)
    }

    fn recycle(&mut self, packet: Vec<u8>) {
        self.ep.recycle(packet);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let deframer = self.deframer.poll_timeout().map(Instant::from_nanos);
        [self.ep.poll_timeout(), deframer]
            .into_iter()
            .flatten()
            .min()
    }

    fn send(&mut self, now: Instant, msg: OutMessage) -> Result<(), SendError> {
        self.send_ref(now, &msg)
    }

    fn send_ref(&mut self, now: Instant, msg: &OutMessage) -> Result<(), SendError> {
        if !self.ready() || self.closed {
            return Err(SendError::NotConnected);
        }
        let tag = if self.secure.is_some() { TAG_LEN } else { 0 };
        if msg.payload.len() + tag > MAX_MESSAGE {
            return Err(SendError::TooLarge(msg.payload.len()));
        }
        if tag > 0 && msg.substream == HANDSHAKE_SUBSTREAM {
            return Err(SendError::Invalid(format!(
                "sub-stream {HANDSHAKE_SUBSTREAM} carries the secure handshake"
            )));
        }
        let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) else {
            return Err(SendError::NotConnected);
        };
        // The frame is longer than the payload: no room for the payload,
        // no room for the frame, and framing it (COBS, CRC) would be wasted.
        if !c.poll_send_room(msg.payload.len() + tag) {
            return Err(SendError::WouldBlock);
        }
        self.frame.clear();
        let sealed = match self.secure.as_mut() {
            Some(sec) => sec.session.seal(msg.id, msg.substream, &msg.payload),
            None => None,
        };
        let body = sealed.as_deref().unwrap_or(&msg.payload);
        if self
            .framer
            .frame_id(msg.id, msg.substream, false, body, &mut self.frame)
            .is_err()
        {
            return Err(SendError::TooLarge(msg.payload.len()));
        }
        let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) else {
            return Err(SendError::NotConnected);
        };
        let meta = MessageMeta {
            id: msg.id,
            lifetime: msg.lifetime,
            depends_on: msg.depends_on,
            replaceable: true,
            substream: msg.substream,
            priority: msg.priority,
        };
        // A sender without the message queue writes the frame at the end
        // of its byte stream; in secure mode its placement is recorded too
        // (sealed frames' lengths cannot be derived from the payloads).
        let end = c.snd_una() + c.send_buffered();
        let queue = c.config().hollywood.inconsistent_retransmissions;
        // The message queue keeps the frame: hand it over (no copy), and
        // frame the next message into a buffer of the same size.
        let r = if queue {
            let frame = {
                let cap = self.frame.capacity();
                std::mem::replace(&mut self.frame, Vec::with_capacity(cap))
            };
            c.send_message_cow(now, std::borrow::Cow::Owned(frame), meta)
        } else {
            c.send_message(now, &self.frame, meta)
        };
        if r.is_ok() && !queue && self.secure.is_some() {
            if let Some(p) = &mut self.placements {
                p.push(Placement {
                    id: msg.id,
                    time: now,
                    seq: end,
                    len: self.frame.len() as u32,
                    first: true,
                });
            }
        }
        if r.is_err() {
            // Nothing was queued: the retry must not leave a gap.
            self.framer.retract(msg.substream, msg.id);
        }
        match r {
            Ok(()) => {}
            Err(SendMessageError::WouldBlock) => return Err(SendError::WouldBlock),
            Err(SendMessageError::Meta(e)) => return Err(SendError::Invalid(e.to_string())),
            Err(SendMessageError::State(_)) => return Err(SendError::NotConnected),
            Err(SendMessageError::TooLarge { .. }) => {
                return Err(SendError::TooLarge(msg.payload.len()))
            }
        }
        self.stats.messages_sent += 1;
        if msg.substream != 0 {
            if self.substreams.len() == SUBSTREAM_WINDOW {
                self.substreams.pop_front();
            }
            self.substreams.push_back((msg.id, msg.substream));
        }
        self.pump(now);
        Ok(())
    }

    fn min_rtt(&self) -> Option<std::time::Duration> {
        self.conn
            .and_then(|h| self.ep.connection(h))
            .and_then(|c| c.min_rtt())
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        let e = self.events.pop_front()?;
        if let TransportEvent::Message(m) = &e {
            self.rx_queued -= m.payload.len() + EVENT_OVERHEAD;
            if self.rx_held && self.rx_queued < RX_QUEUE_LIMIT / 2 {
                let now = self.last_now;
                self.drain(now);
            }
        }
        Some(e)
    }

    fn close(&mut self, now: Instant) {
        if let Some(c) = self.conn.and_then(|h| self.ep.connection_mut(h)) {
            c.close();
        } else if !self.closed {
            self.closed = true;
            self.events.push_back(TransportEvent::Closed);
        }
        self.pump(now);
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
