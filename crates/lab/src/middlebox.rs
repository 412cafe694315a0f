//! The deployability experiment of thesis §5.3 on real packets, with real
//! and emulated middleboxes (docs/LAB.md "Middlebox lab").
//!
//! Three-host lab `a – e – r – b` ([`crate::topology`]):
//!
//! - **server** in b: our engine over TUN ([`Lab::engine_tun`]) with
//!   `HollywoodConfig::always_inconsistent` — every retransmission is the
//!   byte-wise complement of the original, same length, same sequence
//!   numbers: the §5.3 server "configured to always send inconsistent
//!   retransmissions" — or, with [`Design::SeqGap`], the experimental
//!   sequence-gap design of [TCP-video] §7.2 (every retransmission replaced by
//!   a skip announced in a TCP option, `seq_gap_lifetime = 0`). It sends
//!   `bytes` bytes of a seeded pattern and closes.
//! - **client** in a: a Linux kernel TCP socket that reads everything.
//!   As in §5.3, "all incoming segments to the client were recorded by
//!   tcpdump [here tshark], and then filtered by iptables to uniformly drop
//!   5% of segments before they reached the [client's] TCP stack"
//!   (`iptables -A INPUT ... -m statistic --mode random --probability 0.05
//!   -j DROP`; packet sockets see packets before netfilter, so the capture
//!   sees every segment). [`LossPoint::Upstream`] drops instead in r's raw
//!   PREROUTING on the b side, *before* the middlebox (a variation, not the
//!   thesis's method).
//! - **middlebox** ([`Kind`]): none; a strict conntrack firewall in r; a
//!   split-connection proxy (haproxy, TCP mode) in r; or a packet hook in
//!   the emulator e (resegmenting, caching, payload-checking).
//!
//! Per run: the bytes the client application received are compared, offset
//! by offset, with the pattern (original) and its complement (what an
//! inconsistent retransmission carries); the server's and the client's
//! captures are audited ([`crate::capture`]). Outcome as in Table 5.2:
//! [`Outcome::IrDelivered`] (complemented bytes reached the application),
//! [`Outcome::OriginalDelivered`] (the whole stream arrived, all original),
//! [`Outcome::Failed`] (reset, stall or timeout before the whole stream).

use crate::capture::{self, Capture, FlowAudit, FlowState};
use crate::netem::{Direction, PacketHook};
use crate::topology::{Host, Lab, LabSpec};
use hollywood_io::TunHost;
use hollywood_sim::{LinkConfig, MiddleboxConfig, MiddleboxKind, Node};
use hollywood_tcp::{Config, ConnHandle, ConnectionStats, EndpointEvent, Event, HollywoodConfig};
use hollywood_wire::{build_tcp_ip, SeqNumber, TcpFlags, TcpRepr};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Errors of the experiment (setup failures; a failed *connection* is an
/// outcome, not an error).
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

/// The middlebox on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Plain routing.
    None,
    /// Strict stateful firewall in r: `nf_conntrack_tcp_be_liberal=0`,
    /// `nf_conntrack_tcp_loose=0`, FORWARD policy DROP, INVALID dropped,
    /// ESTABLISHED,RELATED accepted, NEW only for SYNs.
    Conntrack,
    /// Split-connection proxy: haproxy in TCP mode in r; the client
    /// connects to r, haproxy to the server.
    SplitProxy,
    /// Resegmenting box in the emulator: the simulator's `Middlebox`
    /// (resegment, coalescing off): each data segment, retransmissions
    /// included, is cut with probability 0.5 into pieces of 200..=1000
    /// bytes; bytes and sequence numbers unchanged.
    Resegment,
    /// Transparent caching box in the emulator (the simulator's cache):
    /// a retransmission's bytes it already forwarded are replaced by the
    /// cached originals (what §5.3 suspects of the mobile networks, but
    /// without splitting the connection).
    Cache,
    /// Strict normaliser in the emulator: a data segment whose bytes differ
    /// from bytes already forwarded at the same sequence numbers is dropped.
    PayloadCheck,
    /// Intrusion-prevention box in the emulator ([`ResetOnMismatchHook`]):
    /// a data segment whose bytes differ from bytes already forwarded at the
    /// same sequence numbers is dropped, both ends get a forged RST, and
    /// the 4-tuple is blocklisted (every later packet of it is dropped and
    /// answered with a RST). Thesis §4.5: a middlebox that treats an
    /// inconsistent retransmission as an attack.
    ResetOnMismatch,
}

impl Kind {
    /// Every kind, in table order.
    pub const ALL: [Kind; 7] = [
        Kind::None,
        Kind::Conntrack,
        Kind::SplitProxy,
        Kind::Resegment,
        Kind::Cache,
        Kind::PayloadCheck,
        Kind::ResetOnMismatch,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Conntrack => "conntrack",
            Kind::SplitProxy => "split-proxy",
            Kind::Resegment => "resegment",
            Kind::Cache => "cache",
            Kind::PayloadCheck => "payload-check",
            Kind::ResetOnMismatch => "reset-on-mismatch",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// What the server does instead of a standard retransmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// TCP Hollywood's wire image, the §5.3 test server: every
    /// retransmission is inconsistent (the complement of the original).
    Ir,
    /// [TCP-video] §7.2 (experimental): every retransmission is skipped and
    /// the next expected sequence announced in an option.
    SeqGap,
    /// Standard TCP: the same engine with every Hollywood wire change off
    /// (a retransmission carries the original bytes). The baseline.
    Standard,
}

impl Design {
    /// Every design.
    pub const ALL: [Design; 3] = [Design::Ir, Design::SeqGap, Design::Standard];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Design::Ir => "ir",
            Design::SeqGap => "seq-gap",
            Design::Standard => "standard",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// Where the 5 % loss is induced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossPoint {
    /// Thesis §5.3: iptables INPUT in the client, after the capture.
    Client,
    /// r's raw PREROUTING on the side of b: before any middlebox.
    Upstream,
}

/// One run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Lab name (namespace prefix; ≤ 40 characters).
    pub name: String,
    /// The middlebox.
    pub kind: Kind,
    /// The server's retransmission design.
    pub design: Design,
    /// Bytes the server sends.
    pub bytes: usize,
    /// Drop probability (§5.3: 5 %).
    pub loss: f64,
    /// Where the loss is induced.
    pub loss_point: LossPoint,
    /// One-way delay of the emulated path, each direction.
    pub delay: Duration,
    /// Give up after this long.
    pub timeout: Duration,
    /// No new byte at the client for this long = stalled.
    pub stall: Duration,
    /// Seed of the byte pattern and the emulator.
    pub seed: u64,
    /// Server port.
    pub port: u16,
    /// Keep the two pcaps here (`client.pcap`, `server.pcap`); `None` =
    /// a temporary directory removed afterwards.
    pub keep_pcaps: Option<PathBuf>,
}

impl Spec {
    /// Defaults: 5 % loss at the client, 5 ms each way, 1 MB, 20 s
    /// timeout, 4 s stall, port 4001 (one of §5.3's).
    pub fn new(name: &str, kind: Kind, design: Design) -> Spec {
        Spec {
            name: name.to_string(),
            kind,
            design,
            bytes: 1_000_000,
            loss: 0.05,
            loss_point: LossPoint::Client,
            delay: Duration::from_millis(5),
            timeout: Duration::from_secs(20),
            stall: Duration::from_secs(4),
            seed: 1,
            port: 4001,
            keep_pcaps: None,
        }
    }
}

/// Table 5.2's outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Inconsistently retransmitted bytes reached the client application.
    IrDelivered,
    /// The whole stream arrived and every byte is the original.
    OriginalDelivered,
    /// Reset, stall or timeout before the whole stream arrived.
    Failed,
}

impl Outcome {
    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::IrDelivered => "ir-delivered",
            Outcome::OriginalDelivered => "original-delivered",
            Outcome::Failed => "failed",
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The middlebox.
    pub kind: Kind,
    /// The server's design.
    pub design: Design,
    /// Where the loss was induced.
    pub loss_point: LossPoint,
    /// The verdict.
    pub outcome: Outcome,
    /// Why it failed, if it did (reset, stall, timeout, connect error).
    pub failure: Option<String>,
    /// Bytes the server sent.
    pub bytes_expected: u64,
    /// Bytes the client application received.
    pub bytes_delivered: u64,
    /// Retransmitted data segments in the server's capture (veth of b).
    pub retransmissions_sent: u64,
    /// Of those, inconsistent (payload differs from the first transmission).
    pub ir_sent: u64,
    /// The engine's own counters: retransmissions, complemented ones, skips.
    pub engine_retransmissions: u64,
    /// Retransmissions sent complemented (`always_ir_segments`).
    pub engine_always_ir: u64,
    /// Retransmissions replaced by a skip (`seq_gap_skips`).
    pub engine_seq_gap_skips: u64,
    /// The server stopped inconsistent retransmissions (a rewritten range
    /// stayed unacknowledged: the middlebox fallback, `Event::RewritingStopped`).
    pub engine_rewriting_stopped: bool,
    /// Packets the loss rule dropped.
    pub induced_drops: u64,
    /// Inconsistent retransmissions in the client's capture.
    pub ir_on_client_wire: u64,
    /// Retransmissions (any) in the client's capture.
    pub retransmissions_on_client_wire: u64,
    /// Delivered offsets holding the complement (inconsistent bytes).
    pub offsets_with_ir_bytes: u64,
    /// Delivered offsets inside a range retransmitted on the client's wire
    /// that hold the original byte.
    pub offsets_with_original_bytes: u64,
    /// Delivered offsets holding neither (e.g. a splice gone wrong).
    pub offsets_with_other_bytes: u64,
    /// Server inconsistent retransmissions (distinct segments) that the
    /// client application received partly original, partly complemented:
    /// spliced segments (see [`mixed_ranges`]).
    pub segments_spliced: u64,
    /// RST segments in either capture.
    pub resets: u64,
    /// Times the application reconnected in consistent mode after a reset
    /// that followed inconsistent retransmissions ([`ReconnectPolicy`]):
    /// 0 or 1.
    pub reconnects: u32,
    /// Why it reconnected (the server's `Reconnected` event).
    pub reconnect_reason: Option<String>,
    /// Sequence holes in the client's capture (server → client).
    pub seq_holes_on_client_wire: u64,
    /// Segments with the "next expected sequence" option at the client.
    pub next_expected_options_on_client_wire: u64,
    /// The middlebox's own counters (what it dropped, changed or split).
    pub middlebox: HashMap<String, u64>,
    /// Server → client direction at the server.
    pub server_wire: FlowAudit,
    /// Server → client direction at the client.
    pub client_wire: FlowAudit,
    /// tshark's count of server data segments flagged
    /// `tcp.analysis.retransmission` or `tcp.analysis.out_of_order` in the
    /// server capture (cross-check of `retransmissions_sent`; `None` if
    /// tshark failed).
    pub tshark_retransmissions_server: Option<u64>,
    /// Wall time of the run (ms).
    pub duration_ms: u64,
}

/// The pattern the server sends: seeded random bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_0f53).fill_bytes(&mut v);
    v
}

/// Per-offset classification of what the client received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteTally {
    /// Offsets holding the original byte.
    pub original: u64,
    /// Offsets holding the complement (an inconsistent retransmission).
    pub complement: u64,
    /// Offsets holding anything else.
    pub other: u64,
    /// Original bytes inside `ranges`.
    pub original_in_ranges: u64,
}

/// Compare `got` with `original` offset by offset; `ranges` are stream
/// ranges of interest (retransmitted on the client's wire).
pub fn tally(original: &[u8], got: &[u8], ranges: &[(u64, u64)]) -> ByteTally {
    let mut t = ByteTally::default();
    let mut in_range = vec![false; got.len()];
    for &(s, e) in ranges {
        let s = (s as usize).min(got.len());
        let e = (e as usize).min(got.len());
        in_range[s..e].iter_mut().for_each(|b| *b = true);
    }
    for (i, (&g, &o)) in got.iter().zip(original).enumerate() {
        if g == o {
            t.original += 1;
            if in_range[i] {
                t.original_in_ranges += 1;
            }
        } else if g == o ^ 0xff {
            t.complement += 1;
        } else {
            t.other += 1;
        }
    }
    t.other += got.len().saturating_sub(original.len()) as u64;
    t
}

/// How many of `ranges` (the server's inconsistent retransmissions) the
/// client application received as a mix of original and complemented
/// bytes: a segment spliced from both versions (thesis §4.5), which only
/// the message layer's CRC can catch.
pub fn mixed_ranges(original: &[u8], got: &[u8], ranges: &[(u64, u64)]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut mixed = 0;
    for &(s, e) in ranges {
        if !seen.insert((s, e)) {
            continue; // the same segment retransmitted again
        }
        let (s, e) = (s as usize, (e as usize).min(got.len()).min(original.len()));
        if s >= e {
            continue;
        }
        let orig = (s..e).filter(|&i| got[i] == original[i]).count();
        let comp = (s..e).filter(|&i| got[i] == original[i] ^ 0xff).count();
        mixed += (orig > 0 && comp > 0) as u64;
    }
    mixed
}

/// Counters shared between a hook (on the emulator thread) and the run.
type Counters = Arc<Mutex<HashMap<String, u64>>>;

fn bump(c: &Counters, key: &str, n: u64) {
    if n > 0 {
        let mut m = c.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(key.to_string()).or_default() += n;
    }
}

/// The simulator's resegmenting / caching middlebox as an emulator hook.
/// Coalescing is off (a hook has no timer to release a held segment).
pub struct SimBoxHook {
    mb: hollywood_sim::Middlebox,
    counters: Counters,
}

impl SimBoxHook {
    /// A hook around `hollywood_sim::Middlebox` of `kind`.
    pub fn new(kind: MiddleboxKind, seed: u64, counters: Counters) -> SimBoxHook {
        SimBoxHook {
            mb: hollywood_sim::Middlebox::new(MiddleboxConfig {
                kind,
                coalesce_hold: Duration::ZERO,
                seed,
                ..MiddleboxConfig::default()
            }),
            counters,
        }
    }
}

impl PacketHook for SimBoxHook {
    fn on_packet(&mut self, now_ns: u64, dir: Direction, packet: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        let now = hollywood_tcp::Instant::from_nanos(now_ns);
        let iface = match dir {
            Direction::AtoB => 0,
            Direction::BtoA => 1,
        };
        let before = self.mb.stats();
        self.mb.handle_packet(now, iface, packet);
        while let Some((_, p)) = self.mb.poll_transmit(now) {
            out.push(p);
        }
        let after = self.mb.stats();
        bump(&self.counters, "split", after.split - before.split);
        bump(
            &self.counters,
            "cache_replayed_bytes",
            after.cache_replayed_bytes - before.cache_replayed_bytes,
        );
        bump(
            &self.counters,
            "cache_changed_bytes",
            after.cache_changed_bytes - before.cache_changed_bytes,
        );
        bump(&self.counters, "non_tcp", after.non_tcp - before.non_tcp);
    }
}

/// A strict normaliser: drops a data segment whose bytes differ from the
/// bytes it already forwarded at those sequence numbers (it remembers the
/// first bytes it forwarded per flow direction, up to
/// [`capture::MAX_TRACKED_BYTES`]). Everything else passes unchanged.
pub struct PayloadCheckHook {
    flows: HashMap<(SocketAddr, SocketAddr), FlowState>,
    counters: Counters,
}

impl PayloadCheckHook {
    /// A fresh normaliser.
    pub fn new(counters: Counters) -> PayloadCheckHook {
        PayloadCheckHook {
            flows: HashMap::new(),
            counters,
        }
    }
}

impl PacketHook for PayloadCheckHook {
    fn on_packet(&mut self, _now: u64, _dir: Direction, packet: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        let verdict = match capture::parse_lenient(&packet) {
            Some((src, dst, tcp, payload)) => {
                let st = self.flows.entry((src, dst)).or_default();
                let c = st.on_segment(&tcp, payload);
                bump(
                    &self.counters,
                    "retransmissions_seen",
                    c.retransmission as u64,
                );
                c.differing == 0
            }
            None => true,
        };
        if verdict {
            out.push(packet);
        } else {
            bump(&self.counters, "dropped_inconsistent", 1);
        }
    }
}

/// An intrusion-prevention box that resets connections carrying
/// inconsistent retransmissions (thesis §4.5: a middlebox may take a
/// retransmission whose payload differs from the original for an
/// injection attack). A data segment whose bytes differ from the bytes it
/// first forwarded at those sequence numbers (as [`PayloadCheckHook`]
/// tells) is dropped; the box forges a RST toward each end and
/// blocklists the 4-tuple: from then on every packet of it, either way,
/// is dropped and its sender gets a RST. Other 4-tuples (a reconnection
/// from a new port) are not affected.
///
/// The forged RSTs carry the sequence number the receiver expects
/// (RFC 5961 §3.2: exactly `RCV.NXT` resets; elsewhere in the window it
/// only draws a challenge ACK; outside, nothing): toward the sender of a
/// packet `P`, `P.ack` (what that sender expects next); toward the other
/// end, two: the acknowledgment number of the last packet the box saw
/// from it (exact unless an ACK is still delayed), and one byte below the
/// highest sequence number forwarded to it (inside its window: its
/// challenge ACK then meets the blocklist, which answers it exactly).
pub struct ResetOnMismatchHook {
    flows: HashMap<(SocketAddr, SocketAddr), FlowState>,
    /// Last acknowledgment number seen per direction (src, dst).
    last_ack: HashMap<(SocketAddr, SocketAddr), SeqNumber>,
    /// Highest sequence number forwarded per direction (end of data).
    high: HashMap<(SocketAddr, SocketAddr), SeqNumber>,
    /// Blocklisted 4-tuples, stored as (lower, higher) address pair.
    blocked: std::collections::HashSet<(SocketAddr, SocketAddr)>,
    reverse: Vec<Vec<u8>>,
    counters: Counters,
}

impl ResetOnMismatchHook {
    /// A fresh box with an empty blocklist.
    pub fn new(counters: Counters) -> ResetOnMismatchHook {
        ResetOnMismatchHook {
            flows: HashMap::new(),
            last_ack: HashMap::new(),
            high: HashMap::new(),
            blocked: Default::default(),
            reverse: Vec::new(),
            counters,
        }
    }

    fn key(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
        if a <= b {
            (a, b)
        } else {
            (b, a)
        }
    }

    /// A RST from `from` to `to` with sequence number `seq`.
    fn rst(from: SocketAddr, to: SocketAddr, seq: SeqNumber) -> Vec<u8> {
        let tcp = TcpRepr {
            seq,
            flags: TcpFlags::RST,
            ..Default::default()
        };
        build_tcp_ip(from, to, &tcp, &[])
    }

    /// A RST to the sender of `tcp` (sent `src` → `dst`), from `dst`.
    fn rst_to_sender(src: SocketAddr, dst: SocketAddr, tcp: &TcpRepr, len: usize) -> Vec<u8> {
        if tcp.flags.ack() {
            Self::rst(dst, src, tcp.ack)
        } else {
            // RFC 9293 §3.10.7.1: no ACK → <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
            let t = TcpRepr {
                seq: SeqNumber(0),
                ack: tcp.seq + tcp.segment_len(len),
                flags: TcpFlags::RST | TcpFlags::ACK,
                ..Default::default()
            };
            build_tcp_ip(dst, src, &t, &[])
        }
    }
}

impl PacketHook for ResetOnMismatchHook {
    fn on_packet(&mut self, _now: u64, _dir: Direction, packet: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        let Some((src, dst, tcp, payload)) = capture::parse_lenient(&packet) else {
            out.push(packet);
            return;
        };
        let key = Self::key(src, dst);
        if tcp.flags.rst() {
            // A RST ends the flow; pass it (the box's blocklist stays).
            out.push(packet);
            return;
        }
        if self.blocked.contains(&key) {
            bump(&self.counters, "dropped_blocklisted", 1);
            bump(&self.counters, "rst_forged", 1);
            self.reverse
                .push(Self::rst_to_sender(src, dst, &tcp, payload.len()));
            return;
        }
        if tcp.flags.ack() {
            self.last_ack.insert((src, dst), tcp.ack);
        }
        let c = self
            .flows
            .entry((src, dst))
            .or_default()
            .on_segment(&tcp, payload);
        bump(
            &self.counters,
            "retransmissions_seen",
            c.retransmission as u64,
        );
        if c.differing == 0 {
            if !payload.is_empty() {
                let end = tcp.seq + payload.len();
                let high = self.high.entry((src, dst)).or_insert(end);
                if end > *high {
                    *high = end;
                }
            }
            out.push(packet);
            return;
        }
        // A rewritten retransmission: drop it, reset both ends, block.
        bump(&self.counters, "dropped_inconsistent", 1);
        bump(&self.counters, "flows_reset", 1);
        self.blocked.insert(key);
        self.reverse
            .push(Self::rst_to_sender(src, dst, &tcp, payload.len()));
        let exact = self.last_ack.get(&(dst, src)).copied();
        let in_window = self.high.get(&(src, dst)).map(|&h| h - 1);
        let mut seqs: Vec<SeqNumber> = [exact, in_window].into_iter().flatten().collect();
        if seqs.is_empty() {
            seqs.push(tcp.seq);
        }
        for &seq in &seqs {
            out.push(Self::rst(src, dst, seq));
        }
        bump(&self.counters, "rst_forged", 1 + seqs.len() as u64);
    }

    fn take_reverse(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.reverse)
    }
}

/// Why the application reconnected (issue 31 item 3, thesis §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReconnectReason {
    /// The connection was reset after it had sent inconsistent
    /// retransmissions: a middlebox that resets on a payload mismatch.
    ResetAfterInconsistentRetransmission,
    /// The connection was reset after its sender had already stopped
    /// rewriting (`Event::RewritingStopped`: a payload-checking path).
    ResetAfterRewritingStopped,
}

impl ReconnectReason {
    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            ReconnectReason::ResetAfterInconsistentRetransmission => {
                "reset-after-inconsistent-retransmission"
            }
            ReconnectReason::ResetAfterRewritingStopped => "reset-after-rewriting-stopped",
        }
    }
}

/// What the application does about a reset ([`ReconnectPolicy::on_reset`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetVerdict {
    /// Reconnect once, with inconsistent retransmissions off
    /// ([`consistent_config`]), and resume where the peer stopped.
    Reconnect(ReconnectReason),
    /// A real error: the connection is dead.
    Fail(String),
}

/// The application's answer to a reset on a TCP Hollywood connection.
///
/// Thesis §4.5: inconsistent retransmissions must not make a connection
/// less deployable than standard TCP. A middlebox that takes a rewritten
/// retransmission for an attack and resets the connection (an IPS: Kind
/// [`Kind::ResetOnMismatch`]) would leave the application dead, so a
/// reset that follows inconsistent retransmissions (or the payload-check
/// fallback, `Event::RewritingStopped`) is answered by reconnecting *once*
/// in consistent mode. A reset of a connection that never rewrote, or a
/// second reset after the reconnection, is a real error: no loop.
///
/// The policy is pure (no clock, no I/O): the caller feeds it what the
/// engine counted and acts on the verdict.
#[derive(Debug, Clone, Default)]
pub struct ReconnectPolicy {
    reconnected: Option<ReconnectReason>,
}

impl ReconnectPolicy {
    /// A connection was reset after sending `ir_sent` inconsistent
    /// retransmissions; `rewriting_stopped`: the engine had fallen back to
    /// the original bytes (thesis §4.5 payload-check signal).
    pub fn on_reset(&mut self, ir_sent: u64, rewriting_stopped: bool) -> ResetVerdict {
        if let Some(r) = self.reconnected {
            return ResetVerdict::Fail(format!(
                "reset again in consistent mode (after reconnecting: {})",
                r.name()
            ));
        }
        let reason = if rewriting_stopped {
            ReconnectReason::ResetAfterRewritingStopped
        } else if ir_sent > 0 {
            ReconnectReason::ResetAfterInconsistentRetransmission
        } else {
            return ResetVerdict::Fail("connection reset".into());
        };
        self.reconnected = Some(reason);
        ResetVerdict::Reconnect(reason)
    }

    /// The reconnection made, if any.
    pub fn reconnected(&self) -> Option<ReconnectReason> {
        self.reconnected
    }
}

/// `c` with every inconsistent retransmission switched off (the config of
/// a reconnection, [`ReconnectPolicy`]).
pub fn consistent_config(c: &Config) -> Config {
    let mut c = c.clone();
    c.hollywood.inconsistent_retransmissions = false;
    c.hollywood.always_inconsistent = false;
    c.hollywood.seq_gap_lifetime = None;
    c
}

/// Config of the server engine for `design`.
pub fn server_config(design: Design) -> Config {
    Config {
        hollywood: HollywoodConfig {
            always_inconsistent: design == Design::Ir,
            seq_gap_lifetime: (design == Design::SeqGap).then_some(Duration::ZERO),
            ..HollywoodConfig::default()
        },
        ..Config::default()
    }
}

#[derive(Debug, Default)]
struct ServerResult {
    /// The current connection's counters.
    stats: Option<ConnectionStats>,
    /// Counters of a connection replaced by a reconnection.
    earlier: Option<ConnectionStats>,
    /// Why the connection died (a reset the policy did not recover).
    reset: Option<String>,
    timed_out: bool,
    accepted: u32,
    reconnect: Option<ReconnectReason>,
}

/// The counters of two connections of one transfer, added up.
fn add_stats(a: &ConnectionStats, b: &ConnectionStats) -> ConnectionStats {
    let mut s = b.clone();
    s.retransmitted_segments += a.retransmitted_segments;
    s.always_ir_segments += a.always_ir_segments;
    s.seq_gap_skips += a.seq_gap_skips;
    s.rewriting_stopped = s.rewriting_stopped.max(a.rewriting_stopped);
    s
}

/// Bytes a reconnecting client sends first: the stream offset (u64, big
/// endian) it has received up to.
const RESUME_LEN: usize = 8;

#[derive(Debug, Default)]
struct ClientResult {
    bytes: Vec<u8>,
    failure: Option<String>,
    /// Connections made after a reset (at most one).
    reconnects: u32,
}

/// The client: connect (retrying while the server or proxy comes up) and
/// read until EOF, error, stall or deadline. Reset once, it reconnects
/// (from a new port) and asks the server to resume at the offset it has,
/// [`RESUME_LEN`] bytes; the server decides whether to serve it
/// ([`ReconnectPolicy`]). A second reset is a failure.
fn run_client(
    target: SocketAddr,
    expect: usize,
    timeout: Duration,
    stall: Duration,
) -> ClientResult {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut r = ClientResult::default();
    // The server or the proxy may still be coming up: retry refused
    // connections for up to 5 s.
    let connect_until = start + Duration::from_secs(5);
    let mut stream = loop {
        match TcpStream::connect_timeout(&target, Duration::from_secs(2)) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= connect_until => {
                r.failure = Some(format!("connect to {target}: {e}"));
                return r;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let reconnect = |have: usize| -> std::io::Result<TcpStream> {
        let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(2))?;
        s.write_all(&(have as u64).to_be_bytes())?;
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        Ok(s)
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut last_progress = Instant::now();
    loop {
        match stream.read(&mut buf) {
            Ok(0) => {
                if r.bytes.len() < expect {
                    r.failure = Some(format!("EOF after {} of {expect} bytes", r.bytes.len()));
                }
                return r;
            }
            Ok(n) => {
                r.bytes.extend_from_slice(&buf[..n]);
                last_progress = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && r.reconnects == 0 => {
                r.reconnects += 1;
                match reconnect(r.bytes.len()) {
                    Ok(s) => {
                        stream = s;
                        last_progress = Instant::now();
                    }
                    Err(e) => {
                        r.failure = Some(format!(
                            "reconnect after a reset: {e} after {} bytes",
                            r.bytes.len()
                        ));
                        return r;
                    }
                }
            }
            Err(e) => {
                r.failure = Some(format!("read: {e} after {} bytes", r.bytes.len()));
                return r;
            }
        }
        let now = Instant::now();
        if now.duration_since(last_progress) >= stall {
            r.failure = Some(format!(
                "stalled: no data for {:.1} s after {} of {expect} bytes",
                stall.as_secs_f64(),
                r.bytes.len()
            ));
            return r;
        }
        if now >= deadline {
            r.failure = Some(format!("timeout after {} of {expect} bytes", r.bytes.len()));
            return r;
        }
    }
}

/// A haproxy process in r, killed on drop.
struct Proxy {
    child: Child,
    cfg: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.cfg);
    }
}

fn start_proxy(
    lab: &Lab,
    listen: SocketAddr,
    backend: SocketAddr,
    dir: &std::path::Path,
) -> Result<Proxy> {
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    maxconn 64\n\
             defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\
             frontend split\n    bind {listen}\n    default_backend server\n\
             backend server\n    server s {backend}\n"
        ),
    )?;
    let ns = lab
        .ns(Host::R)
        .name()
        .ok_or("router namespace has no name")?
        .to_string();
    let child = Command::new("ip")
        .args(["netns", "exec", &ns, "haproxy", "-db", "-f"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn haproxy: {e}"))?;
    let mut proxy = Proxy { child, cfg };
    let deadline = Instant::now() + Duration::from_secs(5);
    let port = format!(":{}", listen.port());
    loop {
        let ss = lab.ns(Host::R).exec(&["ss", "-ltnH"]).unwrap_or_default();
        if ss.lines().any(|l| l.contains(&port)) {
            return Ok(proxy);
        }
        if let Ok(Some(st)) = proxy.child.try_wait() {
            return Err(format!("haproxy exited at start: {st}").into());
        }
        if Instant::now() > deadline {
            return Err("haproxy did not start listening within 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn setup_conntrack(lab: &Lab) -> Result<()> {
    let r = lab.ns(Host::R);
    for args in [
        &["iptables", "-P", "FORWARD", "DROP"][..],
        &[
            "iptables",
            "-A",
            "FORWARD",
            "-m",
            "conntrack",
            "--ctstate",
            "INVALID",
            "-j",
            "DROP",
        ],
        &[
            "iptables",
            "-A",
            "FORWARD",
            "-m",
            "conntrack",
            "--ctstate",
            "ESTABLISHED,RELATED",
            "-j",
            "ACCEPT",
        ],
        &[
            "iptables",
            "-A",
            "FORWARD",
            "-p",
            "tcp",
            "--syn",
            "-m",
            "conntrack",
            "--ctstate",
            "NEW",
            "-j",
            "ACCEPT",
        ],
    ] {
        r.exec(args)?;
    }
    // The conntrack sysctls exist once the rules loaded nf_conntrack.
    r.set_sysctl("net.netfilter.nf_conntrack_tcp_be_liberal", "0")?;
    r.set_sysctl("net.netfilter.nf_conntrack_tcp_loose", "0")?;
    Ok(())
}

/// Packet counter of the first rule in `chain` (of `table`) whose line
/// contains `needle`, from `iptables -L -v -x -n`.
fn rule_packets(lab: &Lab, host: Host, table: &str, chain: &str, needle: &str) -> u64 {
    let out = lab
        .ns(host)
        .exec(&["iptables", "-t", table, "-L", chain, "-v", "-x", "-n"])
        .unwrap_or_default();
    out.lines()
        .filter(|l| l.contains(needle))
        .find_map(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Run the experiment once. Needs root; builds and tears down its own lab
/// (also on error).
pub fn run(spec: &Spec) -> Result<Report> {
    let started = Instant::now();
    let counters: Counters = Arc::default();
    let hook: Option<Box<dyn PacketHook>> = match spec.kind {
        Kind::Resegment => Some(Box::new(SimBoxHook::new(
            MiddleboxKind::Resegment,
            spec.seed,
            counters.clone(),
        ))),
        Kind::Cache => Some(Box::new(SimBoxHook::new(
            MiddleboxKind::Cache,
            spec.seed,
            counters.clone(),
        ))),
        Kind::PayloadCheck => Some(Box::new(PayloadCheckHook::new(counters.clone()))),
        Kind::ResetOnMismatch => Some(Box::new(ResetOnMismatchHook::new(counters.clone()))),
        _ => None,
    };
    let link = LinkConfig::new(0, spec.delay);
    let lab = Lab::up(LabSpec {
        name: spec.name.clone(),
        three_hosts: true,
        a_to_b: link.clone(),
        b_to_a: link,
        seed: spec.seed,
        hook,
    })?;
    let tmp = match &spec.keep_pcaps {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            TempDir::keep(d.clone())
        }
        None => TempDir::new(&spec.name)?,
    };
    let server_addr = SocketAddr::new(lab.engine_addr(Host::B, false), spec.port);
    let proxy_addr = SocketAddr::new(lab.addr(Host::R, false), spec.port);
    let target = if spec.kind == Kind::SplitProxy {
        proxy_addr
    } else {
        server_addr
    };
    // Middlebox and loss.
    if spec.kind == Kind::Conntrack {
        setup_conntrack(&lab)?;
    }
    let _proxy = if spec.kind == Kind::SplitProxy {
        Some(start_proxy(&lab, proxy_addr, server_addr, tmp.path())?)
    } else {
        None
    };
    let prob = format!("{}", spec.loss);
    let port = spec.port.to_string();
    let (loss_host, loss_table, loss_chain) = match spec.loss_point {
        LossPoint::Client => (Host::A, "filter", "INPUT"),
        LossPoint::Upstream => (Host::R, "raw", "PREROUTING"),
    };
    if spec.loss > 0.0 {
        let b_side = lab.iface(Host::R, Host::B);
        let mut args = vec!["iptables", "-t", loss_table, "-A", loss_chain];
        if spec.loss_point == LossPoint::Upstream {
            args.extend(["-i", &b_side]);
        }
        args.extend([
            "-p",
            "tcp",
            "--sport",
            &port,
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            &prob,
            "-j",
            "DROP",
        ]);
        lab.ns(loss_host).exec(&args)?;
    }
    // Captures: the client's veth (before its INPUT filter) and b's veth.
    let filter = format!("tcp port {}", spec.port);
    let ns_name = |h: Host| lab.ns(h).name().unwrap_or_default().to_string();
    let client_pcap = tmp.path().join("client.pcap");
    let server_pcap = tmp.path().join("server.pcap");
    let client_cap = Capture::start(
        Some(&ns_name(Host::A)),
        &lab.iface(Host::A, Host::E),
        &client_pcap,
        &filter,
    )?;
    let server_cap = Capture::start(
        Some(&ns_name(Host::B)),
        &lab.iface(Host::B, Host::R),
        &server_pcap,
        &filter,
    )?;
    // Server.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let tun = {
        let _g = rt.enter();
        lab.engine_tun(Host::B)?
    };
    let config = server_config(spec.design);
    let mut host = TunHost::new(tun, config.clone())?;
    host.listen(server_addr)?;
    let data = Arc::new(pattern(spec.seed, spec.bytes));
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let data = data.clone();
        let stop = stop.clone();
        rt.spawn(async move {
            let mut res = ServerResult::default();
            let mut policy = ReconnectPolicy::default();
            let mut conn: Option<ConnHandle> = None;
            let mut sent = 0usize;
            let mut closed = false;
            // After a reconnection: the resume offset is read first.
            let mut resume: Option<Vec<u8>> = None;
            let r = host
                .drive(|step| {
                    let events: Vec<EndpointEvent> = step.events().to_vec();
                    for e in events {
                        match e {
                            EndpointEvent::Accepted { handle, .. } => {
                                res.accepted += 1;
                                conn.get_or_insert(handle);
                            }
                            EndpointEvent::Conn { handle, event } if Some(handle) == conn => {
                                match event {
                                    Event::Reset => {
                                        // The endpoint has removed the
                                        // connection: its last counters
                                        // (res.stats can miss what the
                                        // last flush sent).
                                        let ep = step.endpoint();
                                        let st = ep
                                            .connection(handle)
                                            .map(|c| c.stats())
                                            .or_else(|| ep.final_stats(handle))
                                            .cloned()
                                            .or_else(|| res.stats.clone())
                                            .unwrap_or_default();
                                        match policy.on_reset(
                                            st.always_ir_segments,
                                            st.rewriting_stopped > 0,
                                        ) {
                                            ResetVerdict::Reconnect(reason) => {
                                                // The application's
                                                // `Reconnected` event: the
                                                // next connection to this
                                                // port is consistent.
                                                res.reconnect = Some(reason);
                                                res.earlier = Some(st);
                                                res.stats = None;
                                                let ep = step.endpoint();
                                                let relisten =
                                                    ep.unlisten(server_addr).and_then(|()| {
                                                        ep.listen_with(
                                                            server_addr,
                                                            consistent_config(&config),
                                                        )
                                                    });
                                                if let Err(e) = relisten {
                                                    res.reset = Some(format!("re-listen: {e}"));
                                                }
                                                conn = None;
                                                resume = Some(Vec::new());
                                                closed = false;
                                            }
                                            ResetVerdict::Fail(why) => {
                                                res.reset = Some(format!("server: {why}"))
                                            }
                                        }
                                    }
                                    Event::TimedOut => res.timed_out = true,
                                    _ => {}
                                }
                            }
                            _ => {}
                        }
                    }
                    if let Some(c) = conn.and_then(|h| step.endpoint().connection_mut(h)) {
                        if let Some(got) = resume.as_mut() {
                            let mut buf = [0u8; RESUME_LEN];
                            let want = RESUME_LEN - got.len();
                            if let Ok(n) = c.recv(&mut buf[..want]) {
                                got.extend_from_slice(&buf[..n]);
                            }
                            if got.len() == RESUME_LEN {
                                let mut off = [0u8; RESUME_LEN];
                                off.copy_from_slice(got);
                                sent = (u64::from_be_bytes(off) as usize).min(data.len());
                                resume = None;
                            }
                        }
                        while resume.is_none() && sent < data.len() {
                            match c.send(&data[sent..]) {
                                Ok(n) if n > 0 => sent += n,
                                _ => break,
                            }
                        }
                        if resume.is_none() && sent == data.len() && !closed {
                            c.close();
                            closed = true;
                        }
                        res.stats = Some(c.stats().clone());
                    }
                    if stop.load(Ordering::Relaxed) {
                        return ControlFlow::Break(());
                    }
                    step.wake_after(Duration::from_millis(50));
                    ControlFlow::Continue(())
                })
                .await;
            // The host (and its TUN) lives on until the captures stopped:
            // without the TUN, b would route the engine's subnet back to r
            // and late client packets would loop until their TTL ran out.
            (res, r, host)
        })
    };
    // Client in a.
    let (expect, timeout, stall) = (spec.bytes, spec.timeout, spec.stall);
    let client = lab
        .ns(Host::A)
        .spawn("hwm-client", move || {
            run_client(target, expect, timeout, stall)
        })?
        .join()?;
    stop.store(true, Ordering::Relaxed);
    let (server_res, drive, host) = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), server).await })
        .map_err(|_| "server did not stop")??;
    drive?;
    // Captures and counters.
    let mut stopped = Capture::stop_all(vec![client_cap, server_cap])?.into_iter();
    let (client_pcap, _) = stopped.next().ok_or("client capture")?;
    let (server_pcap, _) = stopped.next().ok_or("server capture")?;
    {
        let _g = rt.enter();
        drop(host);
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    let induced_drops = rule_packets(&lab, loss_host, loss_table, loss_chain, "statistic");
    let mut middlebox = counters.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if spec.kind == Kind::Conntrack {
        middlebox.insert(
            "conntrack_invalid_dropped".into(),
            rule_packets(&lab, Host::R, "filter", "FORWARD", "INVALID"),
        );
    }
    let client_audit = capture::audit_pcap(&client_pcap)?;
    let server_audit = capture::audit_pcap(&server_pcap)?;
    // tshark calls a retransmission that follows its original closely
    // "out-of-order" rather than "retransmission": count both.
    let tshark_rtx = capture::tshark_count(
        &server_pcap,
        &format!(
            "tcp.srcport == {} && tcp.len > 0 && (tcp.analysis.retransmission || tcp.analysis.out_of_order)",
            spec.port
        ),
    )
    .ok();
    let client_wire = client_audit.from_port(spec.port);
    let server_wire = server_audit.from_port(spec.port);
    let resets = client_audit.totals().rsts + server_audit.totals().rsts;
    drop(lab);

    let t = tally(&data, &client.bytes, &client_wire.retransmission_ranges);
    let spliced = mixed_ranges(&data, &client.bytes, &server_wire.inconsistent_ranges);
    let current = server_res.stats.clone().unwrap_or_default();
    let stats = match &server_res.earlier {
        Some(e) => add_stats(e, &current),
        None => current,
    };
    let mut failure = client.failure;
    if failure.is_none() && client.bytes.len() < spec.bytes {
        failure = Some(format!(
            "only {} of {} bytes",
            client.bytes.len(),
            spec.bytes
        ));
    }
    if server_res.accepted == 0 {
        failure.get_or_insert_with(|| "the server never accepted a connection".into());
    }
    if let Some(why) = &server_res.reset {
        failure.get_or_insert_with(|| why.clone());
    }
    if server_res.timed_out {
        failure.get_or_insert_with(|| "server connection timed out".into());
    }
    let outcome = if t.complement > 0 {
        // Inconsistent bytes reached the application, whatever happened
        // afterwards (a later failure is reported in `failure`).
        Outcome::IrDelivered
    } else if failure.is_none() {
        Outcome::OriginalDelivered
    } else {
        Outcome::Failed
    };
    let _ = tmp;
    Ok(Report {
        kind: spec.kind,
        design: spec.design,
        loss_point: spec.loss_point,
        outcome,
        failure,
        bytes_expected: spec.bytes as u64,
        bytes_delivered: client.bytes.len() as u64,
        retransmissions_sent: server_wire.retransmissions,
        ir_sent: server_wire.inconsistent_retransmissions,
        engine_retransmissions: stats.retransmitted_segments,
        engine_always_ir: stats.always_ir_segments,
        engine_seq_gap_skips: stats.seq_gap_skips,
        engine_rewriting_stopped: stats.rewriting_stopped > 0,
        induced_drops,
        ir_on_client_wire: client_wire.inconsistent_retransmissions,
        retransmissions_on_client_wire: client_wire.retransmissions,
        offsets_with_ir_bytes: t.complement,
        offsets_with_original_bytes: t.original_in_ranges,
        offsets_with_other_bytes: t.other,
        segments_spliced: spliced,
        resets,
        reconnects: u32::from(server_res.reconnect.is_some()),
        reconnect_reason: server_res.reconnect.map(|r| r.name().to_string()),
        seq_holes_on_client_wire: client_wire.seq_holes,
        next_expected_options_on_client_wire: client_wire.next_expected_options,
        middlebox,
        server_wire: strip_ranges(server_wire),
        client_wire: strip_ranges(client_wire),
        tshark_retransmissions_server: tshark_rtx,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// The range lists are long; the report keeps the counts.
fn strip_ranges(mut f: FlowAudit) -> FlowAudit {
    f.retransmission_ranges.clear();
    f.inconsistent_ranges.clear();
    f
}

/// A directory for the run's files, removed on drop unless kept.
struct TempDir {
    path: PathBuf,
    remove: bool,
}

impl TempDir {
    fn new(tag: &str) -> Result<TempDir> {
        let path = std::env::temp_dir().join(format!("{tag}-pcaps"));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(TempDir { path, remove: true })
    }
    fn keep(path: PathBuf) -> TempDir {
        TempDir {
            path,
            remove: false,
        }
    }
    fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_tells_original_from_complement() {
        let orig = pattern(3, 100);
        let mut got = orig.clone();
        for b in &mut got[10..20] {
            *b ^= 0xff;
        }
        got[50] = orig[50].wrapping_add(1);
        let t = tally(&orig, &got, &[(30, 40), (15, 25)]);
        assert_eq!(t.complement, 10);
        assert_eq!(t.other, 1);
        assert_eq!(t.original, 89);
        assert_eq!(t.original_in_ranges, 10 + 5, "30..40 and 20..25");
    }

    #[test]
    fn spliced_segments_are_found() {
        let orig = pattern(5, 300);
        let mut got = orig.clone();
        for b in &mut got[0..100] {
            *b ^= 0xff; // segment 0..100 arrived wholly inconsistent
        }
        for b in &mut got[150..200] {
            *b ^= 0xff; // segment 100..200 half and half
        }
        let ranges = [(0, 100), (100, 200), (100, 200), (200, 300)];
        assert_eq!(mixed_ranges(&orig, &got, &ranges), 1);
    }

    fn seg(seq: u32, payload: &[u8]) -> Vec<u8> {
        let tcp = TcpRepr {
            seq: SeqNumber(seq),
            flags: TcpFlags::ACK,
            ..Default::default()
        };
        build_tcp_ip(
            "10.0.0.1:4001".parse().unwrap(),
            "10.0.0.2:5000".parse().unwrap(),
            &tcp,
            payload,
        )
    }

    #[test]
    fn payload_check_drops_inconsistent_retransmissions_only() {
        let c = Counters::default();
        let mut h = PayloadCheckHook::new(c.clone());
        let mut out = Vec::new();
        h.on_packet(0, Direction::BtoA, seg(1000, &[1; 100]), &mut out);
        h.on_packet(0, Direction::BtoA, seg(1100, &[2; 100]), &mut out);
        h.on_packet(0, Direction::BtoA, seg(1000, &[1; 100]), &mut out); // consistent
        h.on_packet(0, Direction::BtoA, seg(1100, &[0xfd; 100]), &mut out); // complement
        assert_eq!(out.len(), 3);
        let m = c.lock().unwrap();
        assert_eq!(m.get("dropped_inconsistent"), Some(&1));
        assert_eq!(m.get("retransmissions_seen"), Some(&2));
    }

    /// A segment `src` → `dst` acknowledging `ack`.
    fn seg_ack(src: &str, dst: &str, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
        let tcp = TcpRepr {
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags: TcpFlags::ACK,
            ..Default::default()
        };
        build_tcp_ip(src.parse().unwrap(), dst.parse().unwrap(), &tcp, payload)
    }

    const SRV: &str = "10.0.0.1:4001";
    const CLI: &str = "10.0.0.2:5000";

    fn parsed(p: &[u8]) -> (SocketAddr, SocketAddr, TcpRepr) {
        let s = hollywood_wire::parse_tcp_ip(p).expect("valid checksums");
        (s.src, s.dst, s.tcp)
    }

    #[test]
    fn reset_on_mismatch_passes_identical_retransmissions() {
        let c = Counters::default();
        let mut h = ResetOnMismatchHook::new(c.clone());
        let mut out = Vec::new();
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, CLI, 1000, 7, &[1; 100]),
            &mut out,
        );
        h.on_packet(
            0,
            Direction::AtoB,
            seg_ack(CLI, SRV, 7, 1000, &[]),
            &mut out,
        );
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, CLI, 1000, 7, &[1; 100]),
            &mut out,
        );
        assert_eq!(out.len(), 3, "all forwarded unchanged");
        assert!(h.take_reverse().is_empty());
        let m = c.lock().unwrap();
        assert_eq!(m.get("retransmissions_seen"), Some(&1));
        assert_eq!(m.get("flows_reset"), None);
    }

    #[test]
    fn reset_on_mismatch_resets_both_ends_and_blocks_the_four_tuple() {
        let c = Counters::default();
        let mut h = ResetOnMismatchHook::new(c.clone());
        let mut out = Vec::new();
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, CLI, 1000, 7, &[1; 100]),
            &mut out,
        );
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, CLI, 1100, 7, &[2; 100]),
            &mut out,
        );
        // The client lost 1000..1100 behind the box: it acknowledges 1000.
        h.on_packet(
            0,
            Direction::AtoB,
            seg_ack(CLI, SRV, 7, 1000, &[]),
            &mut out,
        );
        out.clear();
        // The inconsistent retransmission (the complement).
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, CLI, 1000, 7, &[0xfe; 100]),
            &mut out,
        );
        assert_eq!(out.len(), 2, "the segment is replaced by two RSTs");
        let (src, dst, tcp) = parsed(&out[0]);
        assert_eq!((src, dst), (SRV.parse().unwrap(), CLI.parse().unwrap()));
        assert!(tcp.flags.rst());
        assert_eq!(
            tcp.seq,
            SeqNumber(1000),
            "the client's RCV.NXT (its last ACK)"
        );
        let (src, dst, tcp) = parsed(&out[1]);
        assert_eq!((src, dst), (SRV.parse().unwrap(), CLI.parse().unwrap()));
        assert!(tcp.flags.rst());
        assert_eq!(tcp.seq, SeqNumber(1199), "inside the client's window");
        let back = h.take_reverse();
        assert_eq!(back.len(), 1);
        let (src, dst, tcp) = parsed(&back[0]);
        assert_eq!((src, dst), (CLI.parse().unwrap(), SRV.parse().unwrap()));
        assert!(tcp.flags.rst());
        assert_eq!(
            tcp.seq,
            SeqNumber(7),
            "the server's RCV.NXT (the segment's ACK)"
        );
        // From now on the 4-tuple is reset, either way, even consistent data.
        out.clear();
        h.on_packet(
            0,
            Direction::AtoB,
            seg_ack(CLI, SRV, 7, 1000, &[]),
            &mut out,
        );
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, CLI, 1200, 7, &[3; 100]),
            &mut out,
        );
        assert!(out.is_empty(), "blocklisted packets are dropped");
        let back = h.take_reverse();
        assert_eq!(back.len(), 2);
        let (_, dst, tcp) = parsed(&back[0]);
        assert_eq!((dst, tcp.seq), (CLI.parse().unwrap(), SeqNumber(1000)));
        let (_, dst, tcp) = parsed(&back[1]);
        assert_eq!((dst, tcp.seq), (SRV.parse().unwrap(), SeqNumber(7)));
        // Another 4-tuple (a reconnection from a new port) passes.
        h.on_packet(
            0,
            Direction::BtoA,
            seg_ack(SRV, "10.0.0.2:5001", 1000, 7, &[1; 100]),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert!(h.take_reverse().is_empty());
        let m = c.lock().unwrap();
        assert_eq!(m.get("flows_reset"), Some(&1));
        assert_eq!(m.get("dropped_inconsistent"), Some(&1));
        assert_eq!(m.get("dropped_blocklisted"), Some(&2));
        assert_eq!(m.get("rst_forged"), Some(&5));
    }

    #[test]
    fn resegment_hook_keeps_the_bytes() {
        let c = Counters::default();
        let mut h = SimBoxHook::new(MiddleboxKind::Resegment, 9, c.clone());
        let data = pattern(4, 1400 * 8);
        let mut out = Vec::new();
        for (i, chunk) in data.chunks(1400).enumerate() {
            h.on_packet(
                0,
                Direction::BtoA,
                seg(1000 + (i * 1400) as u32, chunk),
                &mut out,
            );
        }
        let mut stream = Vec::new();
        for p in &out {
            let s = hollywood_wire::parse_tcp_ip(p).unwrap();
            assert_eq!(s.tcp.seq, SeqNumber(1000 + stream.len() as u32));
            stream.extend_from_slice(s.payload);
        }
        assert_eq!(stream, data);
        assert!(out.len() > 8, "some segments were split");
        assert!(c.lock().unwrap().get("split").copied().unwrap_or(0) > 0);
    }

    #[test]
    fn reconnect_policy_reconnects_once_and_only_after_rewriting() {
        // A connection that never rewrote: a reset is a real error.
        let mut p = ReconnectPolicy::default();
        assert!(matches!(p.on_reset(0, false), ResetVerdict::Fail(_)));
        assert_eq!(p.reconnected(), None);
        // Reset after inconsistent retransmissions: reconnect, once.
        let mut p = ReconnectPolicy::default();
        assert_eq!(
            p.on_reset(4, false),
            ResetVerdict::Reconnect(ReconnectReason::ResetAfterInconsistentRetransmission)
        );
        let again = p.on_reset(0, false);
        assert!(
            matches!(&again, ResetVerdict::Fail(w) if w.contains("consistent mode")),
            "{again:?}"
        );
        // The payload-check signal counts as evidence too.
        let mut p = ReconnectPolicy::default();
        assert_eq!(
            p.on_reset(3, true),
            ResetVerdict::Reconnect(ReconnectReason::ResetAfterRewritingStopped)
        );
        // The reconnection's config rewrites nothing.
        let c = consistent_config(&server_config(Design::Ir));
        assert!(!c.hollywood.always_inconsistent);
        assert!(!c.hollywood.inconsistent_retransmissions);
        assert!(server_config(Design::Ir).hollywood.always_inconsistent);
    }

    #[test]
    fn names_round_trip() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()), Some(k));
        }
        for d in Design::ALL {
            assert_eq!(Design::parse(d.name()), Some(d));
        }
        assert_eq!(Kind::parse("nat"), None);
    }
}
