//! A timed message stream over any [`MessageTransport`]: TCP and the TCP
//! Hollywood deployments (thesis ch. 4–5), the QUIC mappings and
//! QUICsilver, UDP — one application, no per-transport code.
//!
//! [`MessageSender`] generates `count` messages of `size` bytes every
//! `interval` and sends each with its lifetime (and, with groups, a
//! dependency on the group's first message); [`MessageReceiver`] records
//! each message once, with its arrival time. Payloads are derived from
//! `(seed, id)` so the receiver verifies every byte.

use hollywood_tcp::Instant;
pub use hollywood_transport::tcp::Deployment as Transport;
use hollywood_transport::{MessageTransport, OutMessage, SendError, TransportApp, TransportEvent};
use std::collections::VecDeque;
use std::time::Duration;

/// Deterministic payload of message `id` for stream `seed` (the receiver
/// checks every byte against it).
pub fn payload_for(seed: u64, id: u32, size: usize) -> Vec<u8> {
    let mut x = seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut out = vec![0u8; size];
    for chunk in out.chunks_mut(8) {
        // xorshift64*, eight bytes at a time (little-endian).
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        chunk.copy_from_slice(&v.to_le_bytes()[..chunk.len()]);
    }
    out
}

/// What the sender does.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// Messages.
    pub count: u32,
    /// Payload bytes.
    pub size: usize,
    /// Between messages.
    pub interval: Duration,
    /// Lifetime from generation; `None` = reliable.
    pub lifetime: Option<Duration>,
    /// Payload seed.
    pub seed: u64,
    /// Close this long after the last message.
    pub linger: Duration,
    /// Messages per group (GOP) for the per-group mapping; every message
    /// of a group after the first depends on the first (an I-frame and
    /// its P-frames). 0 = no groups, no dependencies.
    pub group: u32,
    /// A timetable instead of `interval` and `group`: message *i* is
    /// generated `schedule[i].at` after the first, with its frame, group
    /// and dependency (`count` must equal its length).
    pub schedule: Option<Schedule>,
    /// Message *i* gets priority `priorities[i % len]`
    /// (`OutMessage::priority`, higher is sent first); empty: all 0.
    pub priorities: Vec<i8>,
}

/// When one message of a timetable is generated and what it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// Offset from the first message's generation.
    pub at: Duration,
    /// The frame it carries (part of).
    pub frame: u64,
    /// The group (GOP) it belongs to.
    pub group: Option<u64>,
    /// The message it needs to be useful (thesis §4.2).
    pub depends_on: Option<u32>,
    /// Its own lifetime from generation instead of the sender's (an
    /// I-frame is useful until the last frame that references it is due).
    pub lifetime: Option<Duration>,
    /// A media packet: its payload starts with an RTP-like header
    /// ([`crate::video::RtpLike`]) naming its frame, the frame's type and
    /// its place in the frame.
    pub media: Option<MediaPacket>,
    /// Its payload size when smaller than the stream's (the last packet
    /// of a frame); `None`: the stream's size.
    pub size: Option<u32>,
}

/// Where a media packet sits in its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaPacket {
    /// The frame is an I-frame.
    pub intra: bool,
    /// This packet's index in the frame (from 0).
    pub index: u16,
    /// Packets in the frame.
    pub count: u16,
}

/// The payload of message `id` (`size` bytes, or its planned size):
/// [`payload_for`], or for a media packet of
/// the timetable an RTP-like header ([`crate::video::RtpLike`]: sequence
/// number, 90 kHz timestamp from its send time, frame number and type,
/// place in the frame) followed by the rest of [`payload_for`]. The
/// receiver checks every byte, header included.
pub fn payload_of(seed: u64, id: u32, size: usize, planned: Option<&Planned>) -> Vec<u8> {
    let size = planned.and_then(|p| p.size).map_or(size, |s| s as usize);
    let mut p = payload_for(seed, id, size);
    if let Some((pl, m)) = planned.and_then(|pl| Some((pl, pl.media?))) {
        let h = crate::video::RtpLike::for_packet(id, pl, m);
        let n = crate::video::RtpLike::LEN.min(p.len());
        p[..n].copy_from_slice(&h.encode()[..n]);
    }
    p
}

/// A sender's timetable, shared (it can be long).
pub type Schedule = std::sync::Arc<[Planned]>;

/// Per-message sender record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderRecord {
    /// Generated at.
    pub generated: Option<Instant>,
    /// Reported expired.
    pub expired: bool,
}

/// The sending application.
#[derive(Debug, Clone)]
pub struct MessageSender {
    cfg: SenderConfig,
    next: u32,
    next_at: Option<Instant>,
    /// When the first message was generated (the timetable's origin).
    started: Option<Instant>,
    backlog: VecDeque<(OutMessage, Instant)>,
    records: Vec<SenderRecord>,
    expired_events: u64,
    too_large: u64,
    close_at: Option<Instant>,
    closed: bool,
    error: Option<String>,
}

impl MessageSender {
    /// A sender that starts once the transport is connected.
    pub fn new(cfg: SenderConfig) -> MessageSender {
        let n = cfg.count as usize;
        MessageSender {
            cfg,
            next: 0,
            next_at: None,
            started: None,
            backlog: VecDeque::new(),
            records: vec![SenderRecord::default(); n],
            expired_events: 0,
            too_large: 0,
            close_at: None,
            closed: false,
            error: None,
        }
    }

    /// Per-message records.
    pub fn records(&self) -> &[SenderRecord] {
        &self.records
    }

    /// Expired events.
    pub fn expired_events(&self) -> u64 {
        self.expired_events
    }

    /// Messages the transport refused as too large (counted as expired).
    pub fn too_large(&self) -> u64 {
        self.too_large
    }

    /// Messages generated.
    pub fn generated(&self) -> u32 {
        self.next
    }

    /// Closed.
    pub fn finished(&self) -> bool {
        self.closed
    }

    /// A fatal problem.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Message `id`'s lifetime from generation.
    fn lifetime_of(&self, id: u32) -> Option<Duration> {
        self.cfg
            .schedule
            .as_ref()
            .and_then(|s| s.get(id as usize)?.lifetime)
            .or(self.cfg.lifetime)
    }

    fn flush(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        while let Some((mut m, generated)) = self.backlog.pop_front() {
            // Time spent waiting here is used up.
            m.lifetime = self
                .lifetime_of(m.id)
                .map(|l| l.saturating_sub(now - generated));
            match t.send(now, m.clone()) {
                Ok(()) => {}
                Err(SendError::WouldBlock) => {
                    self.backlog.push_front((m, generated));
                    return;
                }
                Err(SendError::TooLarge(_)) => {
                    // Not this message (a datagram before the path MTU
                    // was discovered); the stream goes on.
                    self.too_large += 1;
                    self.expired_events += 1;
                    if let Some(r) = self.records.get_mut(m.id as usize) {
                        r.expired = true;
                    }
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
    }

    fn generate_due(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        while let Some(at) = self.next_at {
            if at > now || self.next >= self.cfg.count {
                break;
            }
            let id = self.next;
            let planned = self.cfg.schedule.as_ref().and_then(|s| s.get(id as usize));
            let mut m = OutMessage::new(id, payload_of(self.cfg.seed, id, self.cfg.size, planned));
            m.lifetime = self.lifetime_of(id);
            if !self.cfg.priorities.is_empty() {
                m.priority = self.cfg.priorities[id as usize % self.cfg.priorities.len()];
            }
            let start = *self.started.get_or_insert(at);
            match &self.cfg.schedule {
                Some(s) => {
                    let p = s[id as usize];
                    m.frame = Some(p.frame);
                    m.group = p.group;
                    m.depends_on = p.depends_on;
                }
                None => {
                    if let Some(g) = id.checked_div(self.cfg.group) {
                        m.group = Some(u64::from(g));
                        let first = g * self.cfg.group;
                        if id != first {
                            m.depends_on = Some(first);
                        }
                    }
                    m.frame = Some(u64::from(id));
                }
            }
            self.records[id as usize].generated = Some(at);
            self.backlog.push_back((m, at));
            self.next += 1;
            self.next_at = (self.next < self.cfg.count).then(|| match &self.cfg.schedule {
                // Never before the message just generated.
                Some(s) => (start + s[self.next as usize].at).max(at),
                None => at + self.cfg.interval,
            });
        }
        self.flush(now, t);
        if self.next >= self.cfg.count && self.backlog.is_empty() && self.close_at.is_none() {
            self.close_at = Some(now + self.cfg.linger);
        }
    }
}

impl TransportApp for MessageSender {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        match ev {
            TransportEvent::Connected if self.next_at.is_none() && self.next == 0 => {
                self.next_at = Some(now);
                self.generate_due(now, t);
            }
            TransportEvent::Writable => self.flush(now, t),
            TransportEvent::Expired { id, .. } => {
                self.expired_events += 1;
                if let Some(r) = self.records.get_mut(id as usize) {
                    r.expired = true;
                }
            }
            TransportEvent::Closed => self.closed = true,
            TransportEvent::Failed(e) => {
                self.error = Some(e);
                self.closed = true;
            }
            _ => {}
        }
    }

    fn on_timeout(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        self.generate_due(now, t);
        if self.close_at.is_some_and(|c| c <= now) {
            self.close_at = None;
            t.close(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.next_at, self.close_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The receiving application.
#[derive(Debug)]
pub struct MessageReceiver {
    seed: u64,
    size: usize,
    schedule: Option<Schedule>,
    arrival: Vec<Option<Instant>>,
    received: Vec<Option<Instant>>,
    corrupt: u64,
    duplicates: u64,
    unknown: u64,
    peer_closed: bool,
}

impl MessageReceiver {
    /// Expect `count` messages of `size` bytes with payload seed `seed`.
    pub fn new(count: u32, size: usize, seed: u64) -> MessageReceiver {
        MessageReceiver {
            seed,
            size,
            schedule: None,
            arrival: vec![None; count as usize],
            received: vec![None; count as usize],
            corrupt: 0,
            duplicates: 0,
            unknown: 0,
            peer_closed: false,
        }
    }

    /// Expect the payloads of this timetable (media packets carry an
    /// RTP-like header: [`payload_of`]).
    pub fn with_schedule(mut self, schedule: Option<Schedule>) -> MessageReceiver {
        self.schedule = schedule;
        self
    }

    /// Arrival per message id.
    pub fn arrival(&self) -> &[Option<Instant>] {
        &self.arrival
    }

    /// Per message id: when the last of its bytes first reached the
    /// receiving stack (`InMessage::received`), if it was delivered.
    pub fn received(&self) -> &[Option<Instant>] {
        &self.received
    }

    /// Wrong content (must be 0).
    pub fn corrupt_delivered(&self) -> u64 {
        self.corrupt
    }

    /// Delivered twice (must be 0).
    pub fn duplicates_delivered(&self) -> u64 {
        self.duplicates
    }

    /// Ids never sent (must be 0).
    pub fn unknown_delivered(&self) -> u64 {
        self.unknown
    }

    /// The sender closed.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }
}

impl TransportApp for MessageReceiver {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        match ev {
            TransportEvent::Message(m) => {
                let Some(slot) = self.arrival.get_mut(m.id as usize) else {
                    self.unknown += 1;
                    return;
                };
                if slot.is_some() {
                    self.duplicates += 1;
                    return;
                }
                let planned = self.schedule.as_ref().and_then(|s| s.get(m.id as usize));
                if m.payload != payload_of(self.seed, m.id, self.size, planned) {
                    self.corrupt += 1;
                }
                *slot = Some(m.arrival);
                self.received[m.id as usize] = Some(m.received.min(m.arrival));
            }
            TransportEvent::PeerClosed => {
                // Nothing to send back: close our half too (TCP's
                // CLOSE-WAIT would otherwise hold the connection open).
                self.peer_closed = true;
                t.close(now);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_tcp::Config;

    #[test]
    fn payloads_are_deterministic_and_distinct() {
        assert_eq!(payload_for(1, 5, 160), payload_for(1, 5, 160));
        assert_ne!(payload_for(1, 5, 160), payload_for(1, 6, 160));
        assert_ne!(payload_for(1, 5, 160), payload_for(2, 5, 160));
        assert_eq!(payload_for(1, 5, 7).len(), 7);
        // The stream is xorshift64* output, little-endian, byte by byte:
        // every earlier run's payloads stay what they were.
        let mut x: u64 = 1 ^ 5u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        let mut want = Vec::new();
        while want.len() < 21 {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            want.extend(x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        want.truncate(21);
        assert_eq!(payload_for(1, 5, 21), want);
        assert!(payload_for(1, 5, 0).is_empty());
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
