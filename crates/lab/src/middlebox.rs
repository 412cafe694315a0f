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
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::HashMap;
use std::io::Read;
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
}

impl Kind {
    /// Every kind, in table order.
    pub const ALL: [Kind; 6] = [
        Kind::None,
        Kind::Conntrack,
        Kind::SplitProxy,
        Kind::Resegment,
        Kind::Cache,
        Kind::PayloadCheck,
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
}

impl Design {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Design::Ir => "ir",
            Design::SeqGap => "seq-gap",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Design> {
        [Design::Ir, Design::SeqGap]
            .into_iter()
            .find(|d| d.name() == s)
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
    stats: Option<ConnectionStats>,
    reset: bool,
    timed_out: bool,
    accepted: u32,
}

#[derive(Debug, Default)]
struct ClientResult {
    bytes: Vec<u8>,
    failure: Option<String>,
}

/// The client: connect (retrying while the server or proxy comes up) and
/// read until EOF, error, stall or deadline.
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
    let mut host = TunHost::new(tun, server_config(spec.design))?;
    host.listen(server_addr)?;
    let data = Arc::new(pattern(spec.seed, spec.bytes));
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let data = data.clone();
        let stop = stop.clone();
        rt.spawn(async move {
            let mut res = ServerResult::default();
            let mut conn: Option<ConnHandle> = None;
            let mut sent = 0usize;
            let mut closed = false;
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
                                    Event::Reset => res.reset = true,
                                    Event::TimedOut => res.timed_out = true,
                                    _ => {}
                                }
                            }
                            _ => {}
                        }
                    }
                    if let Some(c) = conn.and_then(|h| step.endpoint().connection_mut(h)) {
                        while sent < data.len() {
                            match c.send(&data[sent..]) {
                                Ok(n) if n > 0 => sent += n,
                                _ => break,
                            }
                        }
                        if sent == data.len() && !closed {
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
    let stats = server_res.stats.clone().unwrap_or_default();
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
    if server_res.reset {
        failure.get_or_insert_with(|| "server connection reset".into());
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
    use hollywood_wire::{build_tcp_ip, SeqNumber, TcpFlags, TcpRepr};

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
    fn names_round_trip() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()), Some(k));
        }
        for d in [Design::Ir, Design::SeqGap] {
            assert_eq!(Design::parse(d.name()), Some(d));
        }
        assert_eq!(Kind::parse("nat"), None);
    }
}
