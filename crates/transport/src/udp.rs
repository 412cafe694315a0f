//! UDP as a [`MessageTransport`]: one message per datagram, sent once, never
//! retransmitted — the floor every reliable transport is compared against.
//! A message too late to be useful is still sent (UDP has no notion of it);
//! the receiver's application judges timeliness.

use crate::record;
use crate::{
    InMessage, Instant, MessageTransport, OutMessage, SendError, TransportEvent, TransportStats,
    EVENT_OVERHEAD, RX_QUEUE_LIMIT,
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
    /// Bytes of received messages in `events` (payload + EVENT_OVERHEAD).
    rx_queued: usize,
    stats: TransportStats,
    started: bool,
    closed: bool,
    /// Without a `remote`: send to the source of the first datagram.
    reply_to_peer: bool,
}

impl UdpTransport {
    /// Bytes of received messages waiting for the application (at most
    /// [`RX_QUEUE_LIMIT`]).
    pub fn rx_queued_bytes(&self) -> usize {
        self.rx_queued
    }

    /// An endpoint at `local`; a sender names its `remote`.
    pub fn new(local: SocketAddr, remote: Option<SocketAddr>) -> UdpTransport {
        UdpTransport {
            local,
            remote,
            out: VecDeque::new(),
            events: VecDeque::new(),
            rx_queued: 0,
            stats: TransportStats::default(),
            started: false,
            closed: false,
            reply_to_peer: false,
        }
    }

    /// An endpoint without a `remote` that sends to the peer it first hears
    /// from (the FEC layer's receiver REPORTs back this way).
    pub fn reply_to_peer(mut self) -> UdpTransport {
        self.reply_to_peer = true;
        self
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
        if self.reply_to_peer && self.remote.is_none() {
            self.remote = Some(d.src);
        }
        match record::parse_datagram(d.payload) {
            Ok((h, p)) => {
                let cost = p.len() + EVENT_OVERHEAD;
                if self.rx_queued + cost > RX_QUEUE_LIMIT {
                    // A full socket buffer: the datagram is dropped.
                    self.stats.rx_queue_dropped += 1;
                    return;
                }
                self.rx_queued += cost;
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
        let e = self.events.pop_front()?;
        if let TransportEvent::Message(m) = &e {
            self.rx_queued -= m.payload.len() + EVENT_OVERHEAD;
        }
        Some(e)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiving application that stops polling: datagrams beyond
    /// [`RX_QUEUE_LIMIT`] of queued messages are dropped and counted (each
    /// charged its overhead, so empty ones count); once it polls, new ones
    /// are taken again.
    #[test]
    fn a_receiver_that_does_not_poll_holds_a_bounded_queue() {
        let (ca, cb): (SocketAddr, SocketAddr) = (
            "10.0.0.1:4000".parse().unwrap(),
            "10.0.0.2:4000".parse().unwrap(),
        );
        let mut a = UdpTransport::new(ca, Some(cb));
        let mut b = UdpTransport::new(cb, None);
        let now = Instant::ZERO;
        a.start(now);
        b.start(now);
        let n = RX_QUEUE_LIMIT / EVENT_OVERHEAD + 1000;
        for i in 0..n as u32 {
            a.send(now, OutMessage::new(i, Vec::new())).unwrap();
            let p = a.poll_transmit(now).unwrap();
            b.handle_packet(now, &p);
        }
        assert!(b.rx_queued_bytes() <= RX_QUEUE_LIMIT);
        assert_eq!(b.stats().rx_queue_dropped, 1000);
        let mut got = 0;
        while let Some(e) = b.poll_event() {
            got += u64::from(matches!(e, TransportEvent::Message(_)));
        }
        assert_eq!(got, b.stats().messages_delivered);
        assert_eq!(b.rx_queued_bytes(), 0);
        a.send(now, OutMessage::new(0, vec![1; 10])).unwrap();
        let p = a.poll_transmit(now).unwrap();
        b.handle_packet(now, &p);
        assert!(matches!(b.poll_event(), Some(TransportEvent::Message(_))));
    }
}
