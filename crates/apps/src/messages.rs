//! A timed message stream over TCP / TCP Hollywood (thesis ch. 4–5).
//!
//! [`MessageSender`] generates `count` messages of `size` bytes every
//! `interval`, frames them with the intermediary layer (`hollywood-msg`) and
//! queues them with their lifetime; [`MessageReceiver`] deframes whatever the
//! transport hands it — segments as they arrive (out-of-order delivery) or the
//! in-order byte stream — and records each message once. Payloads are derived
//! from `(seed, id)` so the receiver verifies every byte.

use hollywood_msg::{Deframer, DeframerConfig, DeframerStats, Framer, FramerConfig};
use hollywood_sim::App;
use hollywood_tcp::{
    Config, ConnHandle, Endpoint, EndpointEvent, Event, ExpiredMessage, HollywoodStats, Instant,
    MessageMeta, OooStats, SendMessageError,
};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// Which halves of TCP Hollywood are deployed (thesis §4.4). The
/// intermediary layer (framing, CRC, de-duplication) runs in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
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
}

impl Transport {
    /// All four, in the order experiments report them.
    pub const ALL: [Transport; 4] = [
        Transport::Tcp,
        Transport::HollywoodIr,
        Transport::HollywoodOoo,
        Transport::Hollywood,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Hollywood => "hollywood",
            Transport::HollywoodIr => "hollywood-ir",
            Transport::HollywoodOoo => "hollywood-ooo",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Result<Transport, String> {
        match s {
            "tcp" => Ok(Transport::Tcp),
            "hollywood" => Ok(Transport::Hollywood),
            "hollywood-ir" => Ok(Transport::HollywoodIr),
            "hollywood-ooo" => Ok(Transport::HollywoodOoo),
            _ => Err(format!(
                "unknown transport '{s}': use tcp, hollywood, hollywood-ir or hollywood-ooo"
            )),
        }
    }

    /// Inconsistent retransmissions at the sender.
    pub fn sender_ir(self) -> bool {
        matches!(self, Transport::Hollywood | Transport::HollywoodIr)
    }

    /// Out-of-order delivery at the receiver.
    pub fn receiver_ooo(self) -> bool {
        matches!(self, Transport::Hollywood | Transport::HollywoodOoo)
    }

    /// The sender's engine configuration on top of `base`: Nagle off in all
    /// cases (the thesis's evaluations set TCP_NODELAY); a modified sender
    /// also segments consistently (thesis §4.2).
    pub fn sender_config(self, base: &Config) -> Config {
        let mut c = base.clone();
        c.nagle = false;
        c.consistent_segmentation = self.sender_ir();
        c.hollywood.inconsistent_retransmissions = self.sender_ir();
        c.hollywood.out_of_order_delivery = false;
        c
    }

    /// The receiver's engine configuration on top of `base`.
    pub fn receiver_config(self, base: &Config) -> Config {
        let mut c = base.clone();
        c.nagle = false;
        c.hollywood.inconsistent_retransmissions = false;
        c.hollywood.out_of_order_delivery = self.receiver_ooo();
        c
    }
}

/// Deterministic payload of message `id` for stream `seed` (the receiver
/// checks every byte against it).
pub fn payload_for(seed: u64, id: u32, size: usize) -> Vec<u8> {
    let mut x = seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        for b in v.to_le_bytes() {
            if out.len() < size {
                out.push(b);
            }
        }
    }
    out
}

/// What the sender does.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// Local address (port 0 = ephemeral).
    pub local: SocketAddr,
    /// The receiver.
    pub remote: SocketAddr,
    /// Messages to send.
    pub count: u32,
    /// Payload bytes per message.
    pub size: usize,
    /// Time between messages.
    pub interval: Duration,
    /// Message lifetime from generation (thesis §4.2); `None` = reliable.
    pub lifetime: Option<Duration>,
    /// Payload seed.
    pub seed: u64,
    /// Sub-stream for every message.
    pub substream: u16,
    /// Close the connection this long after the last message was queued.
    pub linger: Duration,
}

/// Per-message sender record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderRecord {
    /// When the application generated the message.
    pub generated: Option<Instant>,
    /// When it was handed to the transport (later than `generated` only if
    /// the send buffer was full).
    pub queued: Option<Instant>,
    /// The transport reported it expired (replaced or sent too late).
    pub expired: bool,
    /// A TCP Hollywood sender put it on the wire: when, and where its frame
    /// lies in the sequence space (`Event::MessageSent`).
    pub sent: Option<(Instant, hollywood_wire::SeqNumber, u32)>,
}

/// The sending application.
#[derive(Debug)]
pub struct MessageSender {
    cfg: SenderConfig,
    framer: Framer,
    handle: Option<ConnHandle>,
    connected: bool,
    next: u32,
    next_at: Option<Instant>,
    backlog: VecDeque<(u32, Vec<u8>, Instant)>,
    records: Vec<SenderRecord>,
    expired: Vec<ExpiredMessage>,
    close_at: Option<Instant>,
    closed: bool,
    hollywood: HollywoodStats,
    srtt: Option<Duration>,
    error: Option<String>,
}

impl MessageSender {
    /// A sender; it connects at its host's first wake-up and sends the first
    /// message once connected.
    pub fn new(cfg: SenderConfig) -> MessageSender {
        let n = cfg.count as usize;
        MessageSender {
            cfg,
            framer: Framer::new(FramerConfig::default()),
            handle: None,
            connected: false,
            next: 0,
            next_at: None,
            backlog: VecDeque::new(),
            records: vec![SenderRecord::default(); n],
            expired: Vec::new(),
            close_at: None,
            closed: false,
            hollywood: HollywoodStats::default(),
            srtt: None,
            error: None,
        }
    }

    /// Per-message records, indexed by message id.
    pub fn records(&self) -> &[SenderRecord] {
        &self.records
    }

    /// Expired events in the order the transport reported them.
    pub fn expired(&self) -> &[ExpiredMessage] {
        &self.expired
    }

    /// Messages generated so far.
    pub fn generated(&self) -> u32 {
        self.next
    }

    /// Everything generated, handed to the transport and the connection closed.
    pub fn finished(&self) -> bool {
        self.closed
    }

    /// The sender's inconsistent-retransmission counters (last seen).
    pub fn hollywood_stats(&self) -> HollywoodStats {
        self.hollywood
    }

    /// The connection's smoothed RTT (RFC 6298) when last seen: the
    /// estimate TCP Hollywood's liveness test uses (thesis §4.2).
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Connection handle.
    pub fn handle(&self) -> Option<ConnHandle> {
        self.handle
    }

    /// A fatal problem (connection failed, framing error).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn meta(&self, id: u32, generated: Instant, now: Instant) -> MessageMeta {
        MessageMeta {
            id,
            // Lifetime runs from generation; time spent in the application's
            // backlog is already used up.
            lifetime: self.cfg.lifetime.map(|l| l.saturating_sub(now - generated)),
            depends_on: None,
            replaceable: true,
            substream: self.cfg.substream,
        }
    }

    fn flush(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(h) = self.handle else { return };
        while let Some((id, frame, generated)) = self.backlog.pop_front() {
            let meta = self.meta(id, generated, now);
            let Some(conn) = ep.connection_mut(h) else {
                return;
            };
            match conn.send_message(now, &frame, meta) {
                Ok(()) => {
                    if let Some(r) = self.records.get_mut(id as usize) {
                        r.queued = Some(now);
                    }
                }
                Err(SendMessageError::WouldBlock) => {
                    self.backlog.push_front((id, frame, generated));
                    return;
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
        if let Some(conn) = ep.connection(h) {
            self.hollywood = *conn.hollywood_stats();
            self.srtt = conn.srtt().or(self.srtt);
        }
    }

    fn generate_due(&mut self, now: Instant, ep: &mut Endpoint) {
        while let Some(at) = self.next_at {
            if at > now || self.next >= self.cfg.count {
                break;
            }
            let id_expected = self.next;
            let payload = payload_for(self.cfg.seed, id_expected, self.cfg.size);
            let mut frame = Vec::new();
            match self
                .framer
                .frame(self.cfg.substream, false, &payload, &mut frame)
            {
                Ok(id) => {
                    debug_assert_eq!(id, id_expected);
                    self.records[id as usize].generated = Some(at);
                    self.backlog.push_back((id, frame, at));
                }
                Err(e) => {
                    self.error = Some(format!("framing: {e:?}"));
                    self.next_at = None;
                    return;
                }
            }
            self.next += 1;
            self.next_at = if self.next < self.cfg.count {
                Some(at + self.cfg.interval)
            } else {
                None
            };
        }
        self.flush(now, ep);
        if self.next >= self.cfg.count && self.backlog.is_empty() && self.close_at.is_none() {
            self.close_at = Some(now + self.cfg.linger);
        }
    }
}

impl App for MessageSender {
    fn on_start(&mut self, now: Instant, ep: &mut Endpoint) {
        match ep.connect(now, self.cfg.local, self.cfg.remote) {
            Ok(h) => self.handle = Some(h),
            Err(e) => self.error = Some(format!("connect: {e}")),
        }
    }

    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, ev: EndpointEvent) {
        let EndpointEvent::Conn { handle, event } = ev else {
            return;
        };
        if Some(handle) != self.handle {
            return;
        }
        match event {
            Event::Connected => {
                self.connected = true;
                self.next_at = Some(now);
                self.generate_due(now, ep);
            }
            Event::Writable => self.flush(now, ep),
            Event::Expired(e) => {
                if let Some(r) = self.records.get_mut(e.id as usize) {
                    r.expired = true;
                }
                self.expired.push(e);
            }
            Event::MessageSent { id, seq, len } => {
                if let Some(r) = self.records.get_mut(id as usize) {
                    r.sent.get_or_insert((now, seq, len));
                }
            }
            Event::Reset | Event::TimedOut => {
                self.error = Some(format!("connection failed: {event:?}"))
            }
            Event::Closed => self.closed = true,
            _ => {}
        }
        if let Some(conn) = ep.connection(handle) {
            self.hollywood = *conn.hollywood_stats();
            self.srtt = conn.srtt().or(self.srtt);
        }
    }

    fn on_timeout(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.connected {
            self.generate_due(now, ep);
        }
        if let (Some(at), Some(h)) = (self.close_at, self.handle) {
            if now >= at {
                self.close_at = None;
                if let Some(c) = ep.connection_mut(h) {
                    self.hollywood = *c.hollywood_stats();
                    c.close();
                }
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.next_at, self.close_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Per-message receiver record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverRecord {
    /// When the message reached the application (first and only delivery).
    pub arrival: Option<Instant>,
}

/// The receiving application.
#[derive(Debug)]
pub struct MessageReceiver {
    listen: SocketAddr,
    seed: u64,
    size: usize,
    ooo: bool,
    deframer: Deframer,
    handle: Option<ConnHandle>,
    records: Vec<ReceiverRecord>,
    corrupt: u64,
    duplicates: u64,
    unknown: u64,
    ooo_stats: OooStats,
    eof: bool,
    scratch: Vec<u8>,
}

impl MessageReceiver {
    /// Listen on `listen` for `count` messages of `size` bytes with payload
    /// seed `seed`. `ooo` must match the engine's out-of-order switch.
    pub fn new(
        listen: SocketAddr,
        count: u32,
        size: usize,
        seed: u64,
        ooo: bool,
    ) -> MessageReceiver {
        MessageReceiver {
            listen,
            seed,
            size,
            ooo,
            deframer: Deframer::new(DeframerConfig::default()),
            handle: None,
            records: vec![ReceiverRecord::default(); count as usize],
            corrupt: 0,
            duplicates: 0,
            unknown: 0,
            ooo_stats: OooStats::default(),
            eof: false,
            scratch: vec![0; 64 * 1024],
        }
    }

    /// Per-message records, indexed by message id.
    pub fn records(&self) -> &[ReceiverRecord] {
        &self.records
    }

    /// Messages delivered with a payload different from what was sent
    /// (must be 0: the CRC rejects corrupted frames).
    pub fn corrupt_delivered(&self) -> u64 {
        self.corrupt
    }

    /// Messages delivered a second time (must be 0: exactly once or never).
    pub fn duplicates_delivered(&self) -> u64 {
        self.duplicates
    }

    /// Messages with an id that was never sent.
    pub fn unknown_delivered(&self) -> u64 {
        self.unknown
    }

    /// Intermediary-layer counters (CRC rejections, duplicates dropped, ...).
    pub fn deframer_stats(&self) -> DeframerStats {
        self.deframer.stats()
    }

    /// Out-of-order delivery counters from the engine (last seen).
    pub fn ooo_stats(&self) -> OooStats {
        self.ooo_stats
    }

    /// The sender closed and everything was read.
    pub fn eof(&self) -> bool {
        self.eof
    }

    fn drain(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(h) = self.handle else { return };
        let Some(conn) = ep.connection_mut(h) else {
            return;
        };
        if self.ooo {
            while let Some(s) = conn.recv_segment() {
                self.deframer
                    .push_segment(s.seq.0, &s.payload, s.arrival.as_nanos());
            }
            // Everything below RCV.NXT has been pushed: fragments that can no
            // longer complete may go.
            self.deframer.advance_floor(conn.rcv_nxt().0);
            self.ooo_stats = *conn.ooo_stats();
        } else {
            loop {
                match conn.recv(&mut self.scratch) {
                    Ok(0) => {
                        self.eof = true;
                        break;
                    }
                    Ok(n) => self
                        .deframer
                        .push_stream(&self.scratch[..n], now.as_nanos()),
                    Err(_) => break,
                }
            }
        }
        while let Some(m) = self.deframer.poll_message() {
            let Some(r) = self.records.get_mut(m.id as usize) else {
                self.unknown += 1;
                continue;
            };
            if r.arrival.is_some() {
                self.duplicates += 1;
                continue;
            }
            if m.payload != payload_for(self.seed, m.id, self.size) {
                self.corrupt += 1;
            }
            r.arrival = Some(Instant::from_nanos(m.arrival_ns));
        }
    }
}

impl App for MessageReceiver {
    fn on_start(&mut self, _now: Instant, ep: &mut Endpoint) {
        // A second listen on the same address is the only failure; the
        // receiver is created once per host.
        let _ = ep.listen(self.listen);
    }

    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, ev: EndpointEvent) {
        match ev {
            // The first accepted connection is the stream; others are ignored.
            EndpointEvent::Accepted { handle, .. } if self.handle.is_none() => {
                self.handle = Some(handle);
            }
            EndpointEvent::Conn { handle, event } if Some(handle) == self.handle => match event {
                Event::Readable | Event::Connected => self.drain(now, ep),
                Event::PeerClosed => {
                    self.drain(now, ep);
                    if self.ooo {
                        self.eof = true;
                    }
                    if let Some(c) = ep.connection_mut(handle) {
                        c.close();
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_deterministic_and_distinct() {
        assert_eq!(payload_for(1, 5, 160), payload_for(1, 5, 160));
        assert_ne!(payload_for(1, 5, 160), payload_for(1, 6, 160));
        assert_ne!(payload_for(1, 5, 160), payload_for(2, 5, 160));
        assert_eq!(payload_for(1, 5, 7).len(), 7);
    }

    #[test]
    fn transport_configs() {
        let base = Config::default();
        let s = Transport::Hollywood.sender_config(&base);
        assert!(s.hollywood.inconsistent_retransmissions && s.consistent_segmentation && !s.nagle);
        let r = Transport::HollywoodIr.receiver_config(&base);
        assert!(!r.hollywood.out_of_order_delivery);
        let r = Transport::HollywoodOoo.receiver_config(&base);
        assert!(r.hollywood.out_of_order_delivery);
        let s = Transport::HollywoodOoo.sender_config(&base);
        assert!(!s.hollywood.inconsistent_retransmissions && !s.consistent_segmentation);
        for t in Transport::ALL {
            assert_eq!(Transport::parse(t.name()), Ok(t));
        }
        assert!(Transport::parse("udp").is_err());
    }
}
