//! In-path TCP middleboxes (thesis §4.5, §5.3, Fig. 4.3).
//!
//! A [`Middlebox`] is a two-interface [`Node`] that forwards every packet from
//! interface 0 to 1 and back, and may rewrite TCP data segments on the way:
//!
//! - **resegment**: splits data segments into smaller ones at seeded random
//!   boundaries and coalesces back-to-back contiguous segments of the same
//!   flow (held for at most `coalesce_hold`), like TSO/GRO boxes and
//!   normalising proxies. Sequence numbers stay consistent: only segment
//!   boundaries change.
//! - **cache** (with or without resegmenting): remembers the payload bytes it
//!   forwarded per flow (bounded; trimmed by the ACKs it sees going the other
//!   way) and, when a retransmission covers bytes it already forwarded,
//!   replays *its cached original bytes* instead of the new ones — what the
//!   split-connection caches the thesis found in UK mobile networks do
//!   (§5.3): an inconsistent retransmission then never reaches the receiver,
//!   and combined with resegmentation a receiver may see a splice of original
//!   and new bytes (which the message CRC must reject, §4.5).
//!
//! Non-TCP packets, SYN/RST segments and pure ACKs pass unchanged (in order
//! with the data of their flow: a held segment is flushed first).

use crate::node::Node;
use hollywood_tcp::Instant;
use hollywood_wire::{build_tcp_ip, parse_tcp_ip, SeqNumber, TcpFlags, TcpRepr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// What the middlebox does to TCP data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MiddleboxKind {
    /// Forward unchanged (a plain router between two links).
    None,
    /// Split and coalesce segments.
    Resegment,
    /// Replay cached original bytes on retransmission (no resegmenting).
    Cache,
    /// Both: resegment and replay cached bytes.
    ResegmentCache,
}

impl MiddleboxKind {
    fn resegments(self) -> bool {
        matches!(
            self,
            MiddleboxKind::Resegment | MiddleboxKind::ResegmentCache
        )
    }
    fn caches(self) -> bool {
        matches!(self, MiddleboxKind::Cache | MiddleboxKind::ResegmentCache)
    }
}

/// Middlebox configuration. Defaults: split into pieces of 200..=1000 bytes
/// with probability 0.5 per segment, coalesce for up to 1 ms up to 1460
/// bytes, cache up to 4 MiB per flow.
#[derive(Debug, Clone, Copy)]
pub struct MiddleboxConfig {
    /// Behaviour.
    pub kind: MiddleboxKind,
    /// Probability that a data segment is split.
    pub split_probability: f64,
    /// Smallest piece when splitting (bytes, ≥ 1).
    pub min_piece: usize,
    /// Largest piece when splitting (bytes).
    pub max_piece: usize,
    /// Longest time a segment is held waiting for a contiguous successor.
    /// Zero disables coalescing.
    pub coalesce_hold: Duration,
    /// Largest coalesced payload.
    pub coalesce_max: usize,
    /// Cached bytes kept per flow (oldest trimmed first).
    pub cache_bytes: usize,
    /// RNG seed for split points.
    pub seed: u64,
    /// Probability that a data segment has one payload byte changed, its
    /// TCP checksum recomputed so that the change passes TCP (a faulty
    /// box, or an on-path attacker who is not trying to hide). 0 (the
    /// default) draws nothing from the RNG.
    pub corrupt_probability: f64,
    /// Probability that a data segment holding a whole TCP Hollywood
    /// message has that message *forged*: one payload byte changed, the
    /// message CRC32C and the TCP checksum recomputed, the frame re-encoded
    /// in the same length — an on-path attacker who knows the framing
    /// (docs/PROTOCOL.md). Only message protection (secure mode) stops it.
    pub forge_probability: f64,
}

impl Default for MiddleboxConfig {
    fn default() -> Self {
        MiddleboxConfig {
            kind: MiddleboxKind::None,
            split_probability: 0.5,
            min_piece: 200,
            max_piece: 1000,
            coalesce_hold: Duration::from_millis(1),
            coalesce_max: 1460,
            cache_bytes: 4 << 20,
            seed: 0,
            corrupt_probability: 0.0,
            forge_probability: 0.0,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MiddleboxStats {
    /// Packets forwarded unchanged.
    pub forwarded: u64,
    /// Data segments split into pieces.
    pub split: u64,
    /// Data segments merged into a predecessor.
    pub coalesced: u64,
    /// Retransmitted bytes replaced by cached original bytes.
    pub cache_replayed_bytes: u64,
    /// Of those, bytes that differed from what the sender sent.
    pub cache_changed_bytes: u64,
    /// Packets that were not parseable TCP/IP (forwarded unchanged).
    pub non_tcp: u64,
    /// Data segments with a payload byte changed under a valid checksum.
    pub corrupted: u64,
    /// Messages forged (`MiddleboxConfig::forge_probability`).
    pub forged: u64,
}

type Flow = (SocketAddr, SocketAddr);

#[derive(Debug)]
struct Held {
    out_iface: usize,
    src: SocketAddr,
    dst: SocketAddr,
    tcp: TcpRepr,
    payload: Vec<u8>,
    deadline: Instant,
}

/// Bytes forwarded in one direction of a flow: disjoint ranges keyed by
/// their offset from the first byte cached.
#[derive(Debug, Default)]
struct FlowCache {
    ranges: BTreeMap<u32, Vec<u8>>, // key: raw seq
    bytes: usize,
    base: Option<SeqNumber>,
}

impl FlowCache {
    fn key(&self, seq: SeqNumber) -> i64 {
        self.base.map_or(0, |b| seq.diff(b) as i64)
    }

    /// Replace the parts of `payload` (at `seq`) that were forwarded before
    /// with the cached bytes; then remember the rest. Returns (replayed, changed).
    fn apply(&mut self, seq: SeqNumber, payload: &mut [u8], cap: usize) -> (usize, usize) {
        if self.base.is_none() {
            self.base = Some(seq);
        }
        let start = self.key(seq);
        let end = start + payload.len() as i64;
        let mut replayed = 0;
        let mut changed = 0;
        let mut covered = vec![false; payload.len()];
        for (&k, v) in self.ranges.iter() {
            let ks = self.key(SeqNumber(k));
            let ke = ks + v.len() as i64;
            if ke <= start || ks >= end {
                continue;
            }
            let lo = ks.max(start);
            let hi = ke.min(end);
            for pos in lo..hi {
                let p = (pos - start) as usize;
                let c = v[(pos - ks) as usize];
                if payload[p] != c {
                    changed += 1;
                    payload[p] = c;
                }
                covered[p] = true;
                replayed += 1;
            }
        }
        // Remember uncovered runs.
        let mut i = 0;
        while i < payload.len() {
            if covered[i] {
                i += 1;
                continue;
            }
            let j = (i..payload.len())
                .find(|&j| covered[j])
                .unwrap_or(payload.len());
            self.ranges.insert((seq + i).0, payload[i..j].to_vec());
            self.bytes += j - i;
            i = j;
        }
        // Bound memory: drop the lowest ranges.
        while self.bytes > cap {
            let Some((&k, _)) = self
                .ranges
                .iter()
                .min_by_key(|(&k, _)| self.key(SeqNumber(k)))
            else {
                break;
            };
            let v = self.ranges.remove(&k).expect("present");
            self.bytes -= v.len();
        }
        (replayed, changed)
    }

    /// Drop everything below `ack` (the receiver has it).
    fn trim(&mut self, ack: SeqNumber) {
        if self.base.is_none() {
            return;
        }
        let a = self.key(ack);
        let keys: Vec<u32> = self
            .ranges
            .iter()
            .filter(|(&k, v)| self.key(SeqNumber(k)) + v.len() as i64 <= a)
            .map(|(&k, _)| k)
            .collect();
        for k in keys {
            let v = self.ranges.remove(&k).expect("present");
            self.bytes -= v.len();
        }
    }
}

/// A two-interface in-path middlebox node.
pub struct Middlebox {
    cfg: MiddleboxConfig,
    rng: ChaCha8Rng,
    out: VecDeque<(usize, Vec<u8>)>,
    held: HashMap<Flow, Held>,
    caches: HashMap<Flow, FlowCache>,
    stats: MiddleboxStats,
    /// Byte ranges (sequence number, length) whose content the box
    /// changed: cache replays that differed, corruption.
    altered: Vec<(SeqNumber, u32)>,
}

/// Altered ranges a middlebox remembers ([`Middlebox::altered`]).
pub const ALTERED_KEPT: usize = 1 << 20;

impl Middlebox {
    /// A middlebox with `cfg`.
    pub fn new(cfg: MiddleboxConfig) -> Middlebox {
        Middlebox {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            out: VecDeque::new(),
            held: HashMap::new(),
            caches: HashMap::new(),
            stats: MiddleboxStats::default(),
            altered: Vec::new(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> MiddleboxStats {
        self.stats
    }

    /// The byte ranges (sequence number, length) whose content the box
    /// changed, in the order it did (the first [`ALTERED_KEPT`]): where a
    /// receiver may have lost a message the sender saw acknowledged.
    pub fn altered(&self) -> &[(SeqNumber, u32)] {
        &self.altered
    }

    fn note_altered(&mut self, seq: SeqNumber, len: usize) {
        if self.altered.len() < ALTERED_KEPT {
            self.altered.push((seq, len as u32));
        }
    }

    fn emit(
        &mut self,
        iface: usize,
        src: SocketAddr,
        dst: SocketAddr,
        tcp: &TcpRepr,
        payload: &[u8],
    ) {
        self.out
            .push_back((iface, build_tcp_ip(src, dst, tcp, payload)));
    }

    fn flush_flow(&mut self, flow: &Flow) {
        if let Some(h) = self.held.remove(flow) {
            self.emit(h.out_iface, h.src, h.dst, &h.tcp, &h.payload);
        }
    }

    fn forward_data(
        &mut self,
        now: Instant,
        out_iface: usize,
        src: SocketAddr,
        dst: SocketAddr,
        tcp: TcpRepr,
        payload: Vec<u8>,
    ) {
        let flow = (src, dst);
        // Coalesce with a held contiguous predecessor.
        if self.cfg.coalesce_hold > Duration::ZERO {
            if let Some(h) = self.held.get_mut(&flow) {
                let contiguous = h.tcp.seq + h.payload.len() == tcp.seq;
                let flags_ok = !tcp.flags.fin() && !h.tcp.flags.fin();
                if contiguous
                    && flags_ok
                    && h.payload.len() + payload.len() <= self.cfg.coalesce_max
                {
                    h.payload.extend_from_slice(&payload);
                    // The newer header carries the newer ACK/window/timestamp.
                    let seq = h.tcp.seq;
                    h.tcp = tcp;
                    h.tcp.seq = seq;
                    self.stats.coalesced += 1;
                    return;
                }
            }
            self.flush_flow(&flow);
        }
        // Split.
        let mut pieces: Vec<(usize, usize)> = Vec::new();
        if payload.len() > self.cfg.min_piece
            && self
                .rng
                .gen_bool(self.cfg.split_probability.clamp(0.0, 1.0))
        {
            let mut off = 0;
            while off < payload.len() {
                let lo = self.cfg.min_piece.max(1);
                let hi = self.cfg.max_piece.max(lo);
                let n = self.rng.gen_range(lo..=hi).min(payload.len() - off);
                pieces.push((off, n));
                off += n;
            }
            if pieces.len() > 1 {
                self.stats.split += 1;
            }
        } else {
            pieces.push((0, payload.len()));
        }
        let last = pieces.len() - 1;
        for (i, (off, n)) in pieces.into_iter().enumerate() {
            let mut t = tcp;
            t.seq = tcp.seq + off;
            if i != last {
                // FIN (and PSH) belong to the last piece only.
                t.flags = TcpFlags(t.flags.0 & !(TcpFlags::FIN.0 | TcpFlags::PSH.0));
            }
            let chunk = payload[off..off + n].to_vec();
            if i == last && self.cfg.coalesce_hold > Duration::ZERO && !t.flags.fin() {
                self.held.insert(
                    flow,
                    Held {
                        out_iface,
                        src,
                        dst,
                        tcp: t,
                        payload: chunk,
                        deadline: now + self.cfg.coalesce_hold,
                    },
                );
            } else {
                self.emit(out_iface, src, dst, &t, &chunk);
            }
        }
    }
}

impl Node for Middlebox {
    fn handle_packet(&mut self, now: Instant, iface: usize, packet: Vec<u8>) {
        let out_iface = if iface == 0 { 1 } else { 0 };
        let Ok(seg) = parse_tcp_ip(&packet) else {
            self.stats.non_tcp += 1;
            self.out.push_back((out_iface, packet));
            return;
        };
        let (src, dst, tcp) = (seg.src, seg.dst, seg.tcp);
        let mut payload = seg.payload.to_vec();
        // ACKs going the other way let the cache forget delivered bytes.
        if tcp.flags.ack() {
            if let Some(c) = self.caches.get_mut(&(dst, src)) {
                c.trim(tcp.ack);
            }
        }
        if tcp.flags.syn() || tcp.flags.rst() {
            self.caches.remove(&(src, dst));
        }
        if payload.is_empty() || tcp.flags.syn() || tcp.flags.rst() {
            self.flush_flow(&(src, dst));
            self.stats.forwarded += 1;
            self.out.push_back((out_iface, packet));
            return;
        }
        if self.cfg.kind.caches() {
            let cap = self.cfg.cache_bytes;
            let cache = self.caches.entry((src, dst)).or_default();
            let (replayed, changed) = cache.apply(tcp.seq, &mut payload, cap);
            self.stats.cache_replayed_bytes += replayed as u64;
            self.stats.cache_changed_bytes += changed as u64;
            if changed > 0 {
                self.note_altered(tcp.seq, payload.len());
            }
        }
        let mut changed = false;
        if self.cfg.corrupt_probability > 0.0
            && self
                .rng
                .gen_bool(self.cfg.corrupt_probability.clamp(0.0, 1.0))
        {
            let at = self.rng.gen_range(0..payload.len());
            payload[at] ^= self.rng.gen_range(1..=255u8);
            self.stats.corrupted += 1;
            self.note_altered(tcp.seq + at, 1);
            changed = true;
        }
        if self.cfg.forge_probability > 0.0
            && self
                .rng
                .gen_bool(self.cfg.forge_probability.clamp(0.0, 1.0))
        {
            let x = self.rng.gen_range(1..=255u8);
            if let Some((at, len)) = hollywood_msg::forge::forge_first_frame(&mut payload, x) {
                self.stats.forged += 1;
                self.note_altered(tcp.seq + at, len);
                changed = true;
            }
        }
        if self.cfg.kind.resegments() {
            self.forward_data(now, out_iface, src, dst, tcp, payload);
        } else if self.cfg.kind.caches() || changed {
            self.stats.forwarded += 1;
            self.emit(out_iface, src, dst, &tcp, &payload);
        } else {
            self.stats.forwarded += 1;
            self.out.push_back((out_iface, packet));
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<Flow> = self
            .held
            .iter()
            .filter(|(_, h)| h.deadline <= now)
            .map(|(f, _)| *f)
            .collect();
        let mut due = due;
        due.sort(); // deterministic order
        for f in due {
            self.flush_flow(&f);
        }
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.held.values().map(|h| h.deadline).min()
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_wire::TcpFlags;

    fn seg(seq: u32, payload: &[u8]) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq: SeqNumber(seq),
            ack: SeqNumber(1),
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 1000,
            ..Default::default()
        };
        build_tcp_ip(
            "10.0.0.1:1000".parse().unwrap(),
            "10.0.0.2:2000".parse().unwrap(),
            &tcp,
            payload,
        )
    }

    fn drain(m: &mut Middlebox, now: Instant) -> Vec<(u32, Vec<u8>)> {
        m.handle_timeout(now + Duration::from_secs(1));
        let mut v = Vec::new();
        while let Some((iface, p)) = m.poll_transmit(now) {
            assert_eq!(iface, 1);
            let s = parse_tcp_ip(&p).unwrap();
            v.push((s.tcp.seq.0, s.payload.to_vec()));
        }
        v
    }

    #[test]
    fn corruption_changes_one_byte_under_a_valid_checksum() {
        let mut m = Middlebox::new(MiddleboxConfig {
            corrupt_probability: 1.0,
            seed: 5,
            ..MiddleboxConfig::default()
        });
        let now = Instant::ZERO;
        let original: Vec<u8> = (1..=200u8).collect();
        m.handle_packet(now, 0, seg(100, &original));
        // parse_tcp_ip verifies the TCP checksum: the change passes it.
        let out = drain(&mut m, now);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 100);
        let diff = original
            .iter()
            .zip(&out[0].1)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(diff, 1);
        assert_eq!(m.stats().corrupted, 1);
        // Without it nothing is drawn or changed.
        let mut m = Middlebox::new(MiddleboxConfig::default());
        m.handle_packet(now, 0, seg(100, &original));
        assert_eq!(drain(&mut m, now)[0].1, original);
        assert_eq!(m.stats().corrupted, 0);
    }

    #[test]
    fn resegment_preserves_bytes() {
        let mut m = Middlebox::new(MiddleboxConfig {
            kind: MiddleboxKind::Resegment,
            split_probability: 1.0,
            ..Default::default()
        });
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let t = Instant::ZERO;
        m.handle_packet(t, 0, seg(100, &data[..1400]));
        m.handle_packet(t, 0, seg(1500, &data[1400..2800]));
        m.handle_packet(t, 0, seg(2900, &data[2800..]));
        let out = drain(&mut m, t);
        assert!(out.len() > 3, "segments were split: {}", out.len());
        let mut stream = Vec::new();
        let mut next = 100u32;
        for (s, p) in out {
            assert_eq!(s, next, "contiguous, in order");
            next += p.len() as u32;
            stream.extend(p);
        }
        assert_eq!(stream, data);
        assert!(m.stats().split > 0);
    }

    #[test]
    fn coalesces_contiguous_segments() {
        let mut m = Middlebox::new(MiddleboxConfig {
            kind: MiddleboxKind::Resegment,
            split_probability: 0.0,
            ..Default::default()
        });
        let t = Instant::ZERO;
        m.handle_packet(t, 0, seg(0, &[1; 100]));
        m.handle_packet(t, 0, seg(100, &[2; 100]));
        let out = drain(&mut m, t);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1.len(), 200);
        assert_eq!(m.stats().coalesced, 1);
    }

    #[test]
    fn cache_replays_original_bytes() {
        let mut m = Middlebox::new(MiddleboxConfig {
            kind: MiddleboxKind::Cache,
            ..Default::default()
        });
        let t = Instant::ZERO;
        m.handle_packet(t, 0, seg(0, &[1; 100]));
        // An inconsistent retransmission of the same range.
        m.handle_packet(t, 0, seg(0, &[2; 100]));
        let out = drain(&mut m, t);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].1, vec![1; 100], "the cache delivered the original");
        assert_eq!(m.stats().cache_changed_bytes, 100);
    }
}
