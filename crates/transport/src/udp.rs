//! UDP as a [`MessageTransport`]: one message per datagram, sent once, never
//! retransmitted — the floor every reliable transport is compared against.
//! A message too late to be useful is still sent (UDP has no notion of it);
//! the receiver's application judges timeliness.

use crate::record;
use crate::{
    InMessage, Instant, MessageTransport, OutMessage, SendError, TransportEvent, TransportStats,
};
use std::collections::VecDeque;
use std::net::SocketAddr;

/// Largest UDP payload sent (an IPv4 1500-byte MTU without fragmentation).
pub const MAX_DATAGRAM: usize = 1500 - 20 - 8;

/// UDP endpoint between two fixed addresses.
#[derive(Debug)]
pub struct UdpTransport {
    local: SocketAddr,
    remote: Option<SocketAddr>,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<TransportEvent>,
    stats: TransportStats,
    started: bool,
    closed: bool,
}

impl UdpTransport {
    /// An endpoint at `local`; a sender names its `remote`.
    pub fn new(local: SocketAddr, remote: Option<SocketAddr>) -> UdpTransport {
        UdpTransport {
            local,
            remote,
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: TransportStats::default(),
            started: false,
            closed: false,
        }
    }
}

impl MessageTransport for UdpTransport {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn start(&mut self, _now: Instant) {
        if !self.started {
            self.started = true;
            self.events.push_back(TransportEvent::Connected);
        }
    }

    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        let Ok(d) = hollywood_wire::parse_udp_ip(packet) else {
            self.stats.malformed += 1;
            return;
        };
        if d.dst != self.local || self.closed {
            return;
        }
        self.stats.packets_received += 1;
        match record::parse_datagram(d.payload) {
            Ok((h, p)) => {
                self.stats.messages_delivered += 1;
                self.events.push_back(TransportEvent::Message(InMessage {
                    id: h.id,
                    substream: h.substream,
                    payload: p.to_vec(),
                    arrival: now,
                    received: now,
                }));
            }
            Err(_) => self.stats.malformed += 1,
        }
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn send(&mut self, _now: Instant, msg: OutMessage) -> Result<(), SendError> {
        let Some(remote) = self.remote.filter(|_| !self.closed) else {
            return Err(SendError::NotConnected);
        };
        let len = record::encoded_len(msg.id, msg.substream, msg.depends_on, msg.payload.len());
        if len > MAX_DATAGRAM {
            return Err(SendError::TooLarge(msg.payload.len()));
        }
        let mut b = Vec::with_capacity(len);
        record::encode(&mut b, msg.id, msg.substream, msg.depends_on, &msg.payload);
        let p = hollywood_wire::build_udp_ip(self.local, remote, &b);
        self.stats.messages_sent += 1;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += p.len() as u64;
        self.out.push_back(p);
        Ok(())
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        self.events.pop_front()
    }

    fn close(&mut self, _now: Instant) {
        if !self.closed {
            self.closed = true;
            self.events.push_back(TransportEvent::Closed);
        }
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
