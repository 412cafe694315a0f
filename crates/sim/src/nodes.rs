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

/// How a [`Datagrams`] source paces its packets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DatagramPattern {
    /// One packet every `size · 8 / rate_bps` seconds (constant bit rate).
    Cbr {
        /// Bit rate while sending (whole IP packets).
        rate_bps: u64,
    },
    /// Exponential on-off (NS-2's `Application/Traffic/Exponential`, seed
    /// 003's "Poisson VBR"): on for an exponentially distributed time with
    /// mean `mean_on`, sending at `rate_bps`, then silent for an
    /// exponentially distributed time with mean `mean_off`.
    OnOff {
        /// Bit rate while on.
        rate_bps: u64,
        /// Mean on period.
        mean_on: Duration,
        /// Mean off period.
        mean_off: Duration,
    },
}

/// Generates UDP datagrams (cross traffic) as it goes, so a long run holds
/// no script: `size`-byte IPv4/UDP packets from `src` to `dst` on interface
/// 0, from time zero until `until`, paced by a [`DatagramPattern`] with its
/// own seeded generator.
#[derive(Debug, Clone)]
pub struct Datagrams {
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    size: usize,
    interval: Duration,
    pattern: DatagramPattern,
    until: Instant,
    next: Option<Instant>,
    on_until: Option<Instant>,
    rng: rand_chacha::ChaCha8Rng,
    sent: u64,
}

impl Datagrams {
    /// A source of `size`-byte packets (at least 28: the IPv4 and UDP
    /// headers) sending until `until`.
    ///
    /// # Panics
    /// If `src` and `dst` are not both IPv4, `size` is below 28 or above
    /// 65535, or the rate is zero.
    #[must_use]
    pub fn new(
        src: std::net::SocketAddr,
        dst: std::net::SocketAddr,
        size: usize,
        pattern: DatagramPattern,
        until: Instant,
        seed: u64,
    ) -> Datagrams {
        use rand::SeedableRng;
        assert!(src.is_ipv4() && dst.is_ipv4(), "IPv4 only");
        assert!((28..=65_535).contains(&size), "size {size}");
        let rate = match pattern {
            DatagramPattern::Cbr { rate_bps } | DatagramPattern::OnOff { rate_bps, .. } => rate_bps,
        };
        assert!(rate > 0, "a datagram source needs a positive rate");
        let interval = Duration::from_nanos((size as u64 * 8 * 1_000_000_000).div_ceil(rate));
        let mut d = Datagrams {
            src,
            dst,
            size,
            interval,
            pattern,
            until,
            next: Some(Instant::ZERO),
            on_until: None,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            sent: 0,
        };
        if let DatagramPattern::OnOff { mean_on, .. } = pattern {
            d.on_until = Some(Instant::ZERO + d.exponential(mean_on));
        }
        d
    }

    /// An exponentially distributed duration with mean `mean`.
    fn exponential(&mut self, mean: Duration) -> Duration {
        use rand::Rng;
        let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
        Duration::from_secs_f64(-mean.as_secs_f64() * u.ln())
    }

    /// Packets sent so far.
    #[must_use]
    pub fn sent(&self) -> u64 {
        self.sent
    }

    fn advance(&mut self, from: Instant) {
        let mut next = from + self.interval;
        if let DatagramPattern::OnOff {
            mean_on, mean_off, ..
        } = self.pattern
        {
            // Past the on period: off for a while, then a new on period.
            while self.on_until.is_some_and(|end| next >= end) {
                let end = self.on_until.unwrap_or(next);
                let start = end + self.exponential(mean_off);
                self.on_until = Some(start + self.exponential(mean_on));
                next = start;
            }
        }
        self.next = (next < self.until).then_some(next);
    }
}

impl Node for Datagrams {
    fn handle_packet(&mut self, _now: Instant, _iface: usize, _packet: Vec<u8>) {}

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        let due = self.next.filter(|t| *t <= now)?;
        self.advance(due);
        self.sent += 1;
        let payload = vec![0u8; self.size - 28];
        Some((
            0,
            hollywood_wire::udp::build_udp_ip(self.src, self.dst, &payload),
        ))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod datagram_tests {
    use super::*;

    fn count(pattern: DatagramPattern, secs: u64) -> (u64, Vec<Instant>) {
        let until = Instant::ZERO + Duration::from_secs(secs);
        let mut d = Datagrams::new(
            "10.0.1.1:9".parse().unwrap(),
            "10.0.2.1:9".parse().unwrap(),
            1500,
            pattern,
            until,
            7,
        );
        let mut times = Vec::new();
        while let Some(t) = d.poll_timeout() {
            let (iface, p) = d.poll_transmit(t).expect("due");
            assert_eq!((iface, p.len()), (0, 1500));
            times.push(t);
        }
        assert!(times.windows(2).all(|w| w[1] > w[0]));
        assert!(times.last().is_some_and(|t| *t < until));
        (d.sent(), times)
    }

    #[test]
    fn cbr_sends_at_its_rate_and_on_off_at_its_duty_cycle() {
        // 12 Mb/s of 1500-byte packets: 1000 a second.
        let (n, _) = count(
            DatagramPattern::Cbr {
                rate_bps: 12_000_000,
            },
            10,
        );
        assert_eq!(n, 10_000);
        let (n, times) = count(
            DatagramPattern::OnOff {
                rate_bps: 12_000_000,
                mean_on: Duration::from_millis(200),
                mean_off: Duration::from_millis(600),
            },
            100,
        );
        // On a quarter of the time: about 25 000 packets.
        assert!((20_000..30_000).contains(&n), "{n}");
        let gaps = times
            .windows(2)
            .filter(|w| w[1] - w[0] > Duration::from_millis(2))
            .count();
        assert!(gaps > 50, "{gaps} off periods in 100 s");
    }
}
