//! Test harness: two [`Endpoint`]s joined by in-memory links, with a
//! virtual clock that jumps to the next event (after quinn-proto's
//! `tests/util.rs`). Links have a one-way delay, an optional rate (FIFO
//! serialization), seeded random loss / duplication / reordering, and a
//! per-packet verdict closure for scripted faults. Every packet is traced.

use crate::config::Config;
use crate::conn::Connection;
use crate::endpoint::{ConnHandle, Endpoint, EndpointEvent};
use crate::time::Instant;
use hollywood_wire::TcpRepr;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

/// Direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// From `a` to `b`.
    AtoB,
    /// From `b` to `a`.
    BtoA,
}

/// What a verdict closure decides for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Normal handling (random faults still apply).
    Pass,
    /// Drop it.
    Drop,
    /// Deliver it twice.
    Duplicate,
    /// Deliver it this much later than normal.
    Delay(Duration),
    /// Lose the first `n` payload bytes and deliver the rest as a segment
    /// of its own: a resegmenting middlebox cut the segment there and the
    /// first piece was dropped (thesis §4.5).
    LoseHead(usize),
}

impl Verdict {
    /// [`Verdict::Drop`] when `drop`, else [`Verdict::Pass`].
    pub(crate) fn drop_if(drop: bool) -> Verdict {
        if drop {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    }
}

/// A packet offered to a verdict closure.
#[derive(Debug, Clone)]
pub(crate) struct PacketInfo {
    /// TCP header.
    pub tcp: TcpRepr,
    /// Payload length.
    pub len: usize,
    /// The payload.
    pub payload: Vec<u8>,
}

/// One traced packet.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    pub time: Instant,
    pub dir: Dir,
    pub tcp: TcpRepr,
    pub len: usize,
    pub dropped: bool,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

type VerdictFn = Box<dyn FnMut(&PacketInfo) -> Verdict>;

/// A packet on the wire: (arrival, order, towards b?, bytes).
type InFlight = (Instant, u64, bool, Vec<u8>);

/// One direction of the path.
pub(crate) struct Link {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bottleneck rate in bits per second (`None` = infinite).
    pub rate_bps: Option<u64>,
    /// Drop-tail limit on queued bytes when rate-limited.
    pub queue_limit: usize,
    /// Random loss probability.
    pub loss: f64,
    /// Random duplication probability.
    pub dup: f64,
    /// Probability of an extra delay (reordering) ...
    pub reorder: f64,
    /// ... of up to this much.
    pub reorder_delay: Duration,
    /// Scripted verdicts.
    pub verdict: Option<VerdictFn>,
    busy_until: Instant,
    /// Packets dropped (random, scripted, or queue overflow).
    pub dropped: u64,
}

impl Link {
    fn new(delay: Duration) -> Link {
        Link {
            delay,
            rate_bps: None,
            queue_limit: usize::MAX,
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            verdict: None,
            busy_until: Instant::ZERO,
            dropped: 0,
        }
    }
}

/// Two endpoints and the path between them.
pub(crate) struct Pair {
    pub a: Endpoint,
    pub b: Endpoint,
    pub a_addr: SocketAddr,
    pub b_addr: SocketAddr,
    pub now: Instant,
    pub ab: Link,
    pub ba: Link,
    /// Packets in flight, earliest first.
    in_flight: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    rng: ChaCha8Rng,
    pub trace: Vec<Trace>,
    pub a_events: Vec<(Instant, EndpointEvent)>,
    pub b_events: Vec<(Instant, EndpointEvent)>,
}

impl Pair {
    /// Two endpoints with the given configs, 10 ms one-way delay.
    pub fn new(ca: Config, cb: Config, seed: u64) -> Pair {
        Pair {
            a: Endpoint::new(ca, seed),
            b: Endpoint::new(cb, seed.wrapping_add(1)),
            a_addr: "10.0.0.1:0".parse().unwrap(),
            b_addr: "10.0.0.2:80".parse().unwrap(),
            now: Instant::from_nanos(1_000_000_000),
            ab: Link::new(Duration::from_millis(10)),
            ba: Link::new(Duration::from_millis(10)),
            in_flight: BinaryHeap::new(),
            order: 0,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xA5A5),
            trace: Vec::new(),
            a_events: Vec::new(),
            b_events: Vec::new(),
        }
    }

    /// Default configs on both sides.
    pub fn default_pair(seed: u64) -> Pair {
        Pair::new(Config::default(), Config::default(), seed)
    }

    /// Send everything both endpoints want to send now.
    pub fn flush(&mut self) {
        while let Some(p) = self.a.poll_transmit(self.now) {
            self.enqueue(true, p);
        }
        while let Some(p) = self.b.poll_transmit(self.now) {
            self.enqueue(false, p);
        }
        while let Some(e) = self.a.poll_event() {
            self.a_events.push((self.now, e));
        }
        while let Some(e) = self.b.poll_event() {
            self.b_events.push((self.now, e));
        }
    }

    fn enqueue(&mut self, to_b: bool, pkt: Vec<u8>) {
        let now = self.now;
        let parsed = hollywood_wire::parse_tcp_ip(&pkt).expect("engine emitted a malformed packet");
        let (src, dst) = (parsed.src, parsed.dst);
        let mut info = PacketInfo {
            tcp: parsed.tcp,
            len: parsed.payload.len(),
            payload: parsed.payload.to_vec(),
        };
        let link = if to_b { &mut self.ab } else { &mut self.ba };
        let mut verdict = link.verdict.as_mut().map_or(Verdict::Pass, |f| f(&info));
        let mut pkt = pkt;
        if let Verdict::LoseHead(n) = verdict {
            assert!(
                n > 0 && n < info.len,
                "LoseHead({n}) of a {}-byte segment",
                info.len
            );
            info.tcp.seq += n;
            info.tcp.flags =
                hollywood_wire::TcpFlags(info.tcp.flags.0 & !hollywood_wire::TcpFlags::SYN.0);
            info.payload.drain(..n);
            info.len -= n;
            pkt = hollywood_wire::build_tcp_ip(src, dst, &info.tcp, &info.payload);
            verdict = Verdict::Pass;
        }
        let mut drop = verdict == Verdict::Drop;
        if !drop && link.loss > 0.0 && self.rng.gen_bool(link.loss) {
            drop = true;
        }
        // Serialization at the bottleneck (drop-tail queue).
        let mut depart = now;
        if let (false, Some(rate)) = (drop, link.rate_bps) {
            let backlog = link.busy_until.saturating_duration_since(now);
            let queued_bytes = (backlog.as_nanos() * rate as u128 / 8 / 1_000_000_000) as usize;
            if queued_bytes + pkt.len() > link.queue_limit {
                drop = true;
            } else {
                let tx = Duration::from_nanos((pkt.len() as u64 * 8 * 1_000_000_000) / rate);
                depart = link.busy_until.max(now) + tx;
                link.busy_until = depart;
            }
        }
        self.trace.push(Trace {
            time: now,
            dir: if to_b { Dir::AtoB } else { Dir::BtoA },
            tcp: info.tcp,
            len: info.len,
            dropped: drop,
            payload: info.payload,
        });
        if drop {
            link.dropped += 1;
            return;
        }
        let mut arrive = depart + link.delay;
        if let Verdict::Delay(d) = verdict {
            arrive += d;
        }
        if link.reorder > 0.0 && self.rng.gen_bool(link.reorder) {
            let max = link.reorder_delay.as_nanos().max(1) as u64;
            arrive += Duration::from_nanos(self.rng.gen_range(0..max));
        }
        let dup = verdict == Verdict::Duplicate || (link.dup > 0.0 && self.rng.gen_bool(link.dup));
        if dup {
            self.order += 1;
            self.in_flight.push(Reverse((
                arrive + Duration::from_micros(50),
                self.order,
                to_b,
                pkt.clone(),
            )));
        }
        self.order += 1;
        self.in_flight
            .push(Reverse((arrive, self.order, to_b, pkt)));
    }

    /// Time of the next event, if any.
    fn next_event(&self) -> Option<Instant> {
        let pkt = self.in_flight.peek().map(|Reverse((t, ..))| *t);
        [pkt, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Flush output, then advance the clock to the next event and process
    /// everything due. Returns `false` when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(next) = self.next_event() else {
            return false;
        };
        self.now = self.now.max(next);
        while let Some(Reverse((t, ..))) = self.in_flight.peek() {
            if *t > self.now {
                break;
            }
            let Some(Reverse((_, _, to_b, pkt))) = self.in_flight.pop() else {
                break;
            };
            if to_b {
                self.b.handle_packet(self.now, &pkt);
            } else {
                self.a.handle_packet(self.now, &pkt);
            }
        }
        let now = self.now;
        for ep in [&mut self.a, &mut self.b] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
                // Engine contract: servicing the timers leaves none due.
                assert!(
                    ep.poll_timeout().is_none_or(|t| t > now),
                    "a timer is still due right after handle_timeout"
                );
            }
        }
        self.flush();
        true
    }

    /// Step until `done` holds; panics if virtual time passes `limit` from
    /// now or the system goes idle first.
    pub fn drive_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) {
        let deadline = self.now + limit;
        while !done(self) {
            assert!(
                self.now <= deadline,
                "condition not reached within {limit:?}"
            );
            assert!(self.step(), "went idle before the condition held");
        }
    }

    /// Step for `d` of virtual time (or until idle).
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.flush();
            match self.next_event() {
                Some(t) if t <= end => {
                    self.step();
                }
                _ => break,
            }
        }
        self.now = self.now.max(end);
        self.flush();
    }

    /// Connect `a` (client) to `b` (server listening on `b_addr`).
    pub fn connect(&mut self) -> (ConnHandle, ConnHandle) {
        if self.b.listen(self.b_addr).is_err() {
            // Already listening.
        }
        let ha = self
            .a
            .connect(self.now, self.a_addr, self.b_addr)
            .expect("connect");
        let mut hb = None;
        let mark = self.b_events.len();
        self.drive_until(Duration::from_secs(300), |p| {
            if hb.is_none() {
                hb = p.b_events[mark..].iter().find_map(|(_, e)| match e {
                    EndpointEvent::Accepted { handle, .. } => Some(*handle),
                    _ => None,
                });
            }
            hb.is_some()
                && p.a
                    .connection(ha)
                    .is_some_and(|c| c.state() == crate::State::Established)
        });
        (ha, hb.unwrap())
    }

    /// Client-side connection.
    pub fn ca(&mut self, h: ConnHandle) -> &mut Connection {
        self.a.connection_mut(h).expect("client connection")
    }

    /// Server-side connection.
    pub fn cb(&mut self, h: ConnHandle) -> &mut Connection {
        self.b.connection_mut(h).expect("server connection")
    }

    /// Send `data` from `a`'s `ha` to `b`'s `hb`; returns what `b` read.
    /// The sender writes whenever it has room; the receiver reads every step.
    pub fn transfer(
        &mut self,
        ha: ConnHandle,
        hb: ConnHandle,
        data: &[u8],
        limit: Duration,
    ) -> Vec<u8> {
        self.transfer_chunked(ha, hb, data, usize::MAX, limit)
    }

    /// Like [`Pair::transfer`], with application writes of at most `chunk`
    /// bytes each.
    pub fn transfer_chunked(
        &mut self,
        ha: ConnHandle,
        hb: ConnHandle,
        data: &[u8],
        chunk: usize,
        limit: Duration,
    ) -> Vec<u8> {
        self.transfer_between(true, ha, hb, data, chunk, limit)
    }

    /// Send from `b`'s `hb` to `a`'s `ha`.
    pub fn transfer_back(
        &mut self,
        hb: ConnHandle,
        ha: ConnHandle,
        data: &[u8],
        limit: Duration,
    ) -> Vec<u8> {
        self.transfer_between(false, ha, hb, data, usize::MAX, limit)
    }

    fn transfer_between(
        &mut self,
        a_sends: bool,
        ha: ConnHandle,
        hb: ConnHandle,
        data: &[u8],
        chunk: usize,
        limit: Duration,
    ) -> Vec<u8> {
        let (tx, rx) = if a_sends { (ha, hb) } else { (hb, ha) };
        let mut sent = 0;
        let mut got = Vec::with_capacity(data.len());
        let mut buf = vec![0u8; 64 * 1024];
        let deadline = self.now + limit;
        while got.len() < data.len() {
            // Write in `chunk`-sized records until the buffer is full.
            while sent < data.len() {
                let end = data.len().min(sent.saturating_add(chunk));
                let c = if a_sends { self.ca(tx) } else { self.cb(tx) };
                match c.send(&data[sent..end]) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            loop {
                let c = if a_sends { self.cb(rx) } else { self.ca(rx) };
                let Ok(n) = c.recv(&mut buf) else { break };
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if got.len() >= data.len() {
                break;
            }
            assert!(
                self.now <= deadline,
                "transfer incomplete: {} of {} bytes",
                got.len(),
                data.len()
            );
            assert!(
                self.step(),
                "idle with {} of {} bytes delivered",
                got.len(),
                data.len()
            );
        }
        got
    }

    /// Deterministic test data.
    pub fn data(len: usize, seed: u64) -> Vec<u8> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut v = vec![0u8; len];
        rng.fill(&mut v[..]);
        v
    }

    /// Wire invariants of the data `dir` carried: new data always starts
    /// where the previous new data ended (no sequence hole), and every
    /// retransmission repeats an earlier segment's exact range (original
    /// boundaries, docs/ARCHITECTURE.md "Hollywood hooks").
    pub fn check_segmentation(&self, dir: Dir) {
        let mut originals = std::collections::HashMap::new();
        let mut high = None;
        for t in self.sent(dir) {
            if t.tcp.flags.syn() || t.tcp.flags.rst() {
                high = Some(t.tcp.seq + 1);
                continue;
            }
            let len = t.len + t.tcp.flags.fin() as usize;
            if len == 0 {
                continue;
            }
            let h = high.expect("data before SYN");
            if t.tcp.seq == h {
                originals.insert(t.tcp.seq.0, len);
                high = Some(h + len);
            } else if t.tcp.seq < h {
                assert_eq!(
                    originals.get(&t.tcp.seq.0),
                    Some(&len),
                    "retransmission at {} len {len} does not repeat an original",
                    t.tcp.seq
                );
            } else {
                panic!(
                    "sequence hole: segment at {} while next new is {h}",
                    t.tcp.seq
                );
            }
        }
    }

    /// Traced packets in one direction.
    pub fn sent(&self, dir: Dir) -> impl Iterator<Item = &Trace> {
        self.trace.iter().filter(move |t| t.dir == dir)
    }
}
