//! Simple packet-level nodes for scenarios and tests: a scripted
//! [`Source`] and a recording [`Sink`].

use crate::node::Node;
use hollywood_tcp::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Sends pre-scripted packets at given times.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// (time, egress interface, packet), sorted by time (stable).
    script: VecDeque<(Instant, usize, Vec<u8>)>,
    sent: u64,
}

impl Source {
    /// A source that sends each `(time, iface, packet)`; entries are sorted by
    /// time (ties keep their order).
    #[must_use]
    pub fn new(mut script: Vec<(Instant, usize, Vec<u8>)>) -> Source {
        script.sort_by_key(|e| e.0);
        Source {
            script: script.into(),
            sent: 0,
        }
    }

    /// `count` packets on `iface`, one every `interval` from `start`; packet
    /// `i` is `make(i)`.
    #[must_use]
    pub fn periodic(
        iface: usize,
        start: Instant,
        interval: Duration,
        count: u64,
        mut make: impl FnMut(u64) -> Vec<u8>,
    ) -> Source {
        let mut t = start;
        let mut script = Vec::with_capacity(count as usize);
        for i in 0..count {
            script.push((t, iface, make(i)));
            t += interval;
        }
        Source::new(script)
    }

    /// Packets sent so far.
    #[must_use]
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Packets still to send.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.script.len()
    }
}

impl Node for Source {
    fn handle_packet(&mut self, _now: Instant, _iface: usize, _packet: Vec<u8>) {}

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        if self.script.front().is_some_and(|e| e.0 <= now) {
            let (_, iface, p) = self.script.pop_front()?;
            self.sent += 1;
            Some((iface, p))
        } else {
            None
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.script.front().map(|e| e.0)
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// One packet received by a [`Sink`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival time.
    pub time: Instant,
    /// Interface it arrived on.
    pub iface: usize,
    /// The packet (empty when the sink does not keep packets).
    pub packet: Vec<u8>,
    /// Its length.
    pub len: usize,
}

/// Records every packet it receives; sends nothing.
#[derive(Debug, Clone, Default)]
pub struct Sink {
    keep_packets: bool,
    arrivals: Vec<Arrival>,
    bytes: u64,
}

impl Sink {
    /// A sink; with `keep_packets` it stores the bytes of each packet,
    /// otherwise only time, interface and length.
    #[must_use]
    pub fn new(keep_packets: bool) -> Sink {
        Sink {
            keep_packets,
            arrivals: Vec::new(),
            bytes: 0,
        }
    }

    /// Everything received, in arrival order.
    #[must_use]
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }

    /// Total bytes received.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Node for Sink {
    fn handle_packet(&mut self, now: Instant, iface: usize, packet: Vec<u8>) {
        let len = packet.len();
        self.bytes += len as u64;
        let packet = if self.keep_packets {
            packet
        } else {
            Vec::new()
        };
        self.arrivals.push(Arrival {
            time: now,
            iface,
            packet,
            len,
        });
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
