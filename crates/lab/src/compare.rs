//! One live stream, every transport users would pick, the same emulated
//! path, one table (issue 9: "report SRT, Linux BBR, Linux CUBIC and our
//! engine in one table").
//!
//! The workload is a live video stream as SRT users send it: `messages`
//! self-checking chunks of `size` bytes (1316 = seven MPEG-TS packets)
//! every `interval`, each useful until `deadline` after it was handed to
//! the transport. Every contender runs on a fresh two-host lab with the
//! same link (rate, RTT, Bernoulli loss on a→b, same emulator seed):
//!
//! - `srt`: `srt-live-transmit` (Debian srt-tools) from a UDP socket in a
//!   to a UDP socket in b, live mode with `latency` (SRT's receiver
//!   buffer; it releases every packet that long after it was sent, and
//!   drops what has not arrived by then: "too late to play"). The latency
//!   is derived from the deadline and the path ([`srt_latency_for`]) unless
//!   given, and can be swept;
//! - `udp`: the chunks as plain datagrams, sent once (the floor);
//! - `linux-bbr`, `linux-cubic`: Linux TCP at both ends with that
//!   congestion control, `TCP_NODELAY`, our message layer on top
//!   (`hollywood_io::kernel`), as an application would frame messages;
//! - `engine-bbr`, `engine-cubic`: TCP Hollywood (inconsistent
//!   retransmissions, out-of-order delivery, expiry before sequence
//!   numbers) on our engine at both ends.
//!
//! For each: on time (arrived by the deadline), late, never arrived, the
//! oracle (what a transport that loses only what the network dropped would
//! deliver on time: from a capture at the sender's side of the emulator
//! and the emulator's drop log), and delay percentiles of what arrived.

use crate::capture::Capture;
use crate::interop::{self, End, InteropSpec};
use crate::netem::{segment_fingerprint, Direction};
use crate::topology::{Host, Lab, LabError, LabSpec};
use crate::workload::{check_payload, payload};
use hollywood_io::NetNs;
use hollywood_media::{oracle_in_time, OnTime, Percentiles, Timeliness};
use hollywood_sim::{DropReason, LinkConfig, LossModel};
use hollywood_tcp::{CcAlgorithm, Instant};
use serde::Serialize;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Errors of a comparison (setup failures).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A transport in the comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contender {
    /// `srt-live-transmit`, live mode.
    Srt,
    /// Plain UDP datagrams, sent once.
    Udp,
    /// Linux TCP at both ends with this congestion control.
    Linux(String),
    /// TCP Hollywood on our engine at both ends with this congestion control.
    Engine(CcAlgorithm),
    /// `hollywood transmit` at both ends (`hollywood_taps::relay`):
    /// racing, or one protocol; the caller in a has the engine on a TUN,
    /// the listener in b serves QUIC and kernel TCP.
    Transmit(Option<hollywood_taps::Protocol>),
    /// A contender on a path whose UDP to b is dropped by iptables in b
    /// (SRT cannot connect; Hollywood falls back to TCP).
    UdpBlocked(Box<Contender>),
}

impl Contender {
    /// The default line-up, in table order.
    pub fn all() -> Vec<Contender> {
        vec![
            Contender::Srt,
            Contender::Linux("bbr".into()),
            Contender::Linux("cubic".into()),
            Contender::Engine(CcAlgorithm::Bbr),
            Contender::Engine(CcAlgorithm::Cubic),
            Contender::Udp,
        ]
    }

    /// Command-line name: `srt`, `udp`, `linux-<cc>`, `engine-<cc>`.
    pub fn name(&self) -> String {
        match self {
            Contender::Srt => "srt".into(),
            Contender::Udp => "udp".into(),
            Contender::Linux(cc) => format!("linux-{cc}"),
            Contender::Engine(cc) => format!("engine-{}", cc.name()),
            Contender::Transmit(None) => "transmit".into(),
            Contender::Transmit(Some(p)) => format!("transmit-{p}"),
            Contender::UdpBlocked(c) => format!("{}+udp-blocked", c.name()),
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Result<Contender, String> {
        if let Some(inner) = s.strip_suffix("+udp-blocked") {
            let c = Contender::parse(inner)?;
            return match c {
                Contender::Srt | Contender::Transmit(_) => Ok(Contender::UdpBlocked(Box::new(c))),
                _ => Err(format!(
                    "'{s}': only srt and transmit[-…] run with UDP blocked"
                )),
            };
        }
        match s {
            "transmit" => Ok(Contender::Transmit(None)),
            "srt" => Ok(Contender::Srt),
            "udp" => Ok(Contender::Udp),
            _ => {
                if let Some(cc) = s.strip_prefix("linux-") {
                    if cc.is_empty() || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return Err(format!("bad congestion control in '{s}'"));
                    }
                    Ok(Contender::Linux(cc.into()))
                } else if let Some(cc) = s.strip_prefix("engine-") {
                    CcAlgorithm::parse(cc).map(Contender::Engine)
                } else if let Some(p) = s.strip_prefix("transmit-") {
                    hollywood_taps::Protocol::parse(p)
                        .map(|p| Contender::Transmit(Some(p)))
                        .ok_or_else(|| {
                            format!("'{s}': transmit-quic, transmit-hollywood or transmit-kernel")
                        })
                } else {
                    Err(format!(
                        "unknown transport '{s}': use srt, udp, linux-<cc> (e.g. linux-bbr), engine-<cc> (newreno, cubic, bbr), transmit[-quic|-hollywood|-kernel], or srt/transmit…+udp-blocked"
                    ))
                }
            }
        }
    }
}

/// The path and the stream.
#[derive(Debug, Clone)]
pub struct CompareSpec {
    /// Bottleneck rate each way (bit/s; 0 = unlimited).
    pub rate_bps: u64,
    /// Round-trip propagation delay (half each way).
    pub rtt: Duration,
    /// Bernoulli loss on a→b.
    pub loss: f64,
    /// Chunks.
    pub messages: u32,
    /// Bytes per chunk (≥ 4).
    pub size: usize,
    /// Time between chunks.
    pub interval: Duration,
    /// A chunk is useful until this long after it was handed over.
    pub deadline: Duration,
    /// SRT's latency (receiver buffer); `None`: derived from the deadline
    /// and the path by [`srt_latency_for`] (see [`CompareSpec::srt_latency`]).
    pub srt_latency: Option<Duration>,
    /// Run SRT once per latency here instead (each an `srt` row with its
    /// `srt_latency_ms`); empty: one SRT run at [`CompareSpec::srt_latency`].
    pub srt_latency_sweep: Vec<Duration>,
    /// Emulator seed.
    pub seed: u64,
    /// Lab name prefix (one lab per contender: `<prefix>-<index>`).
    pub lab: String,
    /// Who runs.
    pub contenders: Vec<Contender>,
    /// Send this MPEG-TS stream instead of self-checking chunks
    /// (datagram contenders only: srt, udp, transmit).
    pub ts: Option<crate::ts::TsSource>,
    /// A loss model on a→b instead of Bernoulli `loss` (e.g. Gilbert
    /// bursts); `None`: `loss`.
    pub loss_model: Option<LossModel>,
    /// SRT's packet filter on both ends (`packetfilter=` in the URIs, e.g.
    /// `fec,cols:4,rows:1,arq:never`: one XOR row packet per 4, no
    /// retransmission); `None`: none (SRT's ARQ alone).
    pub srt_filter: Option<String>,
}

impl CompareSpec {
    /// The live-video path of issue 9: 10 Mb/s, 100 ms RTT, 2 % loss,
    /// 3000 chunks of 1316 B every 5 ms (2.1 Mb/s), deadline 180 ms, SRT
    /// latency by the rule (180 − 50 − 15 = 115 ms).
    pub fn live_video(lab: &str) -> CompareSpec {
        CompareSpec {
            rate_bps: 10_000_000,
            rtt: Duration::from_millis(100),
            loss: 0.02,
            messages: 3000,
            size: 1316,
            interval: Duration::from_millis(5),
            deadline: Duration::from_millis(180),
            srt_latency: None,
            srt_latency_sweep: Vec::new(),
            seed: 1,
            lab: lab.to_string(),
            contenders: Contender::all(),
            ts: None,
            loss_model: None,
            srt_filter: None,
        }
    }

    /// SRT's latency in this comparison: the one given, or the rule's.
    pub fn srt_latency(&self) -> Duration {
        self.srt_latency
            .unwrap_or_else(|| srt_latency_for(self.deadline, self.rtt))
    }

    /// How [`CompareSpec::srt_latency`] was chosen, for reports.
    pub fn srt_latency_rule(&self, latency: Duration) -> String {
        let how = if !self.srt_latency_sweep.is_empty() {
            "swept (--srt-latency-sweep)".to_string()
        } else if self.srt_latency.is_some() {
            "given (--srt-latency)".to_string()
        } else {
            format!(
                "deadline - one-way - {} ms margin = {} - {} - {}",
                SRT_MARGIN.as_millis(),
                self.deadline.as_millis(),
                (self.rtt / 2).as_millis(),
                SRT_MARGIN.as_millis()
            )
        };
        let rtts = latency.as_secs_f64() / self.rtt.as_secs_f64().max(1e-9);
        let advice = match srt_recommended_rtt_multiplier(self.loss) {
            Some(m) if rtts + 1e-9 < f64::from(m) => format!(
                "; {rtts:.2} RTT, below SRT's recommended {m} x RTT = {} ms for {:.0} % loss: the deadline leaves SRT less than its guidelines ask",
                (self.rtt * m).as_millis(),
                self.loss * 100.0
            ),
            Some(m) => format!("; {rtts:.2} RTT, at least SRT's recommended {m} x RTT"),
            None => format!(
                "; {rtts:.2} RTT (loss {:.0} % is beyond SRT's table)",
                self.loss * 100.0
            ),
        };
        how + &advice
    }
}

/// What SRT delivers beyond `one-way + latency`, and its spread: SRT's
/// TSBPD releases a packet `latency` after its send time as mapped at the
/// handshake, plus srt-live-transmit's two local UDP legs and the
/// emulator's release jitter. Measured delay − (one-way + latency), 3000
/// chunks per run, debug build, 2 cores, 2026-11-28 (docs/LAB.md, "SRT at
/// its operating point"): 100 ms/2 %: p50 6.2, p99 11.3, max 11.6 ms;
/// 60 ms/3 %: 6.1, 11.2, 11.4; 100 ms/8 %: 6.2, 11.2, 11.4. 15 ms covers
/// those maxima with 3.4 ms to spare; a 600-chunk sweep run at 115 ms
/// (100 ms/2 %) had one outlier at 15.2 ms (1 chunk late), so the tail
/// reaches the margin now and then.
pub const SRT_MARGIN: Duration = Duration::from_millis(15);

/// SRT's latency for a comparison at `deadline` on a path of `rtt`: the
/// largest latency whose fixed delivery point (SRT releases each packet at
/// about send time + one-way + latency) still sits inside the deadline
/// with [`SRT_MARGIN`] to spare:
///
/// `latency = deadline − rtt/2 − SRT_MARGIN` (whole ms, at least 1 ms).
///
/// That is how SRT users tune it for a given end-to-end budget: SRT's
/// latency is the whole of its repair window, so it takes everything the
/// deadline leaves after the path's delay. SRT's own guidelines ask for
/// latency = RTT multiplier × RTT, the multiplier 3 to 20 by loss
/// ([`srt_recommended_rtt_multiplier`]); a deadline tighter than that
/// leaves SRT too little repair time, which the report states
/// ([`CompareSpec::srt_latency_rule`]) rather than score SRT past the
/// deadline.
pub fn srt_latency_for(deadline: Duration, rtt: Duration) -> Duration {
    let ms = deadline
        .saturating_sub(rtt / 2 + SRT_MARGIN)
        .as_millis()
        .max(1);
    Duration::from_millis(ms as u64)
}

/// The RTT multiplier SRT's deployment guide recommends for a random
/// loss rate: ≤ 1 % → 3, ≤ 3 % → 4, ≤ 7 % → 5, ≤ 10 % → 6 (Haivision,
/// "RTT Multiplier", doc.haivision.com/additional-resources/rtt-multiplier,
/// and its SRT Deployment Guide table, "a value less than 3 is too small
/// for SRT to be effective"); `None` above 10 %.
pub fn srt_recommended_rtt_multiplier(loss: f64) -> Option<u32> {
    [(0.01, 3), (0.03, 4), (0.07, 5), (0.10, 6)]
        .iter()
        .find(|(l, _)| loss <= *l + 1e-12)
        .map(|&(_, m)| m)
}

/// One contender's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Contender name.
    pub transport: String,
    /// Chunks sent.
    pub messages: u64,
    /// Arrived by the deadline.
    pub on_time: u64,
    /// Arrived after it.
    pub late: u64,
    /// Never arrived.
    pub never_arrived: u64,
    /// The oracle on this run's drops.
    pub oracle_on_time: u64,
    /// `on_time / messages`.
    pub on_time_fraction: f64,
    /// Whether the oracle was computed: it needs each chunk's first
    /// datagram in the clear (SRT, UDP, the TCP rows' own audit); the
    /// `transmit` rows carry chunks inside QUIC or TCP records, so it is
    /// not (0 is then printed as `n/a`).
    pub oracle_known: bool,
    /// Delay (handed over → delivered) of what arrived: median, ms.
    pub delay_p50_ms: f64,
    /// 99th percentile, ms.
    pub delay_p99_ms: f64,
    /// Maximum, ms.
    pub delay_max_ms: f64,
    /// Corrupt or duplicate deliveries (must be 0).
    pub bad_deliveries: u64,
    /// With a TS source: video frames ffprobe decodes from what arrived
    /// (in arrival order, late chunks included), and the file.
    pub ts_frames_decoded: Option<u64>,
    /// The received stream.
    pub ts_file: Option<String>,
    /// Data-direction packets the emulator dropped.
    pub dropped_by_emulator: u64,
    /// A failure, if any.
    pub error: Option<String>,
    /// SRT rows: the latency SRT ran with, ms.
    pub srt_latency_ms: Option<u64>,
    /// SRT rows: how that latency was chosen (the rule, an override or a
    /// sweep point) and how it compares with SRT's guidelines.
    pub srt_latency_rule: Option<String>,
}

/// Run every contender in turn.
pub fn run(spec: &CompareSpec, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    if !hollywood_io::is_root() {
        return Err(Box::new(LabError::NotRoot));
    }
    if spec.size < crate::workload::MIN_PAYLOAD || spec.size > 1400 {
        return Err("chunks must be 4 to 1400 bytes (one datagram)".into());
    }
    if spec.messages == 0 || spec.interval.is_zero() {
        return Err("need at least one chunk and a positive interval".into());
    }
    if !(0.0..1.0).contains(&spec.loss) {
        return Err(format!("loss {} is not in [0, 1)", spec.loss).into());
    }
    if let Some(ts) = &spec.ts {
        if spec
            .contenders
            .iter()
            .any(|c| matches!(c, Contender::Linux(_) | Contender::Engine(_)))
        {
            return Err("a TS source runs with srt, udp and transmit contenders only".into());
        }
        if ts.chunks.first().is_some_and(|c| c.len() != spec.size) {
            return Err("the TS chunks must be --size bytes".into());
        }
    }
    interop::remove_stale_labs();
    let latencies = if spec.srt_latency_sweep.is_empty() {
        vec![spec.srt_latency()]
    } else {
        spec.srt_latency_sweep.clone()
    };
    let mut rows = Vec::new();
    // One lab per run: `<prefix>-<k>`.
    let mut k = 0;
    let mut next_lab = || {
        k += 1;
        format!("{}-{}", spec.lab, k - 1)
    };
    for c in &spec.contenders {
        let srt_runs: &[Duration] = match c {
            Contender::Srt => &latencies,
            Contender::UdpBlocked(inner) if **inner == Contender::Srt => &latencies,
            _ => &latencies[..1],
        };
        for &srt_latency in srt_runs {
            match c {
                Contender::Srt | Contender::UdpBlocked(_) if srt_runs.len() > 1 => progress(
                    &format!("{} (latency {} ms)", c.name(), srt_latency.as_millis()),
                ),
                _ => progress(&c.name()),
            }
            let lab = next_lab();
            let row = match c {
                Contender::Linux(cc) => {
                    tcp_row(spec, &lab, End::Kernel, CcAlgorithm::Cubic, Some(cc))?
                }
                Contender::Engine(cc) => tcp_row(spec, &lab, End::Engine, *cc, None)?,
                Contender::Srt | Contender::Udp | Contender::Transmit(_) => {
                    datagram_row(spec, &lab, c, false, srt_latency)?
                }
                Contender::UdpBlocked(inner) => {
                    let mut r = datagram_row(spec, &lab, inner, true, srt_latency)?;
                    r.transport = r.transport.replacen(&inner.name(), &c.name(), 1);
                    r
                }
            };
            rows.push(row);
        }
    }
    Ok(rows)
}

fn link(spec: &CompareSpec, lossy: bool) -> LinkConfig {
    let l = LinkConfig::new(spec.rate_bps, spec.rtt / 2);
    if let (true, Some(m)) = (lossy, &spec.loss_model) {
        l.with_loss(*m)
    } else if lossy && spec.loss > 0.0 {
        l.with_loss(LossModel::Bernoulli(spec.loss))
    } else {
        l
    }
}

fn tcp_row(
    spec: &CompareSpec,
    lab: &str,
    end: End,
    engine_cc: CcAlgorithm,
    kernel_cc: Option<&str>,
) -> Result<Row, Error> {
    let mut s = InteropSpec::new(end, end, lab);
    s.rtt = spec.rtt;
    s.loss = spec.loss;
    s.messages = spec.messages;
    s.size = spec.size;
    s.interval = spec.interval;
    s.lifetime = spec.deadline;
    s.rate_bps = spec.rate_bps;
    s.seed = spec.seed;
    s.engine_cc = engine_cc;
    s.kernel_cc = kernel_cc.map(str::to_owned);
    let r = interop::run(&s)?;
    let name = match end {
        End::Engine => format!("engine-{}", engine_cc.name()),
        End::Kernel => format!("linux-{}", r.kernel_cc),
    };
    Ok(Row {
        transport: name,
        messages: u64::from(r.messages),
        on_time: r.on_time,
        late: r.late,
        never_arrived: r.never_arrived,
        oracle_on_time: r.oracle_on_time,
        oracle_known: true,
        ts_frames_decoded: None,
        ts_file: None,
        on_time_fraction: r.on_time as f64 / f64::from(r.messages.max(1)),
        delay_p50_ms: r.delay_p50_ms,
        delay_p99_ms: r.delay_p99_ms,
        delay_max_ms: r.delay_max_ms,
        bad_deliveries: r.corrupt_delivered + r.duplicates_delivered,
        dropped_by_emulator: r.dropped_by_emulator,
        error: r.error.clone(),
        srt_latency_ms: None,
        srt_latency_rule: None,
    })
}

/// Kills and reaps a child process when dropped (also on panic).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_in(ns: &NetNs, program: &str, args: &[&str]) -> Result<Reaped, Error> {
    let name = ns.name().ok_or("lab namespaces are named")?;
    let child = Command::new("ip")
        .args(["netns", "exec", name, program])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {program}: {e}"))?;
    Ok(Reaped(child))
}

/// Ports: SRT between the hosts, and the local UDP legs.
const SRT_PORT: u16 = 9000;
const UDP_PORT: u16 = 5002;
const LOCAL_IN: &str = "127.0.0.1:5000";
const LOCAL_OUT: &str = "127.0.0.1:5001";
/// SRT's data packet header (RFC-draft SRT §3.1: 16 bytes).
const SRT_HEADER: usize = 16;

fn datagram_row(
    spec: &CompareSpec,
    lab_name: &str,
    c: &Contender,
    block_udp: bool,
    srt_latency: Duration,
) -> Result<Row, Error> {
    let srt = *c == Contender::Srt;
    let transmit = matches!(c, Contender::Transmit(_));
    if srt
        && Command::new("srt-live-transmit")
            .arg("-version")
            .output()
            .is_err()
    {
        return Err(
            "srt-live-transmit is missing (Debian srt-tools; scripts/test.sh installs it as root)"
                .into(),
        );
    }
    let lab = Lab::up(LabSpec {
        name: lab_name.to_string(),
        three_hosts: false,
        a_to_b: link(spec, true),
        b_to_a: link(spec, false),
        seed: spec.seed,
        hook: None,
    })?;
    let b = lab.addr(Host::B, false);
    let ns_a = NetNs::open(lab.ns(Host::A).name().ok_or("named namespace")?)?;
    let ns_b = NetNs::open(lab.ns(Host::B).name().ok_or("named namespace")?)?;
    let (port, header) = if srt {
        (SRT_PORT, SRT_HEADER)
    } else if transmit {
        (TRANSMIT_PORT, 0)
    } else {
        (UDP_PORT, 0)
    };
    if block_udp {
        lab.ns(Host::B).exec(&[
            "iptables",
            "-A",
            "INPUT",
            "-p",
            "udp",
            "--dport",
            &port.to_string(),
            "-j",
            "DROP",
        ])?;
    }
    let dir = std::env::temp_dir().join(format!("{lab_name}-pcap"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let pcap = dir.join("sender-side.pcap");
    let e_ns = lab.ns(Host::E).name().unwrap_or_default().to_string();
    let cap = Capture::start(
        Some(&e_ns),
        &lab.iface(Host::E, Host::A),
        &pcap,
        &format!("udp port {port}"),
    )?;
    // Receiver: a UDP socket in b, fed by SRT (srt → udp://LOCAL_OUT) or
    // by the sender directly.
    let listen = if srt || transmit {
        LOCAL_OUT.to_string()
    } else {
        format!("0.0.0.0:{UDP_PORT}")
    };
    let rx_sock = ns_b.run(move || UdpSocket::bind(listen))??;
    let drain = spec.deadline + srt_latency + Duration::from_secs(2);
    rx_sock.set_read_timeout(Some(drain))?;
    let mut procs = Vec::new();
    if srt {
        let lat = srt_latency.as_millis().to_string();
        let filter = spec
            .srt_filter
            .as_ref()
            .map(|f| format!("&packetfilter={f}"))
            .unwrap_or_default();
        procs.push(spawn_in(
            lab.ns(Host::B),
            "srt-live-transmit",
            &[
                "-q",
                &format!("srt://:{SRT_PORT}?mode=listener&latency={lat}{filter}"),
                &format!("udp://{LOCAL_OUT}"),
            ],
        )?);
        std::thread::sleep(Duration::from_millis(300));
        procs.push(spawn_in(
            lab.ns(Host::A),
            "srt-live-transmit",
            &[
                "-q",
                &format!("udp://{LOCAL_IN}"),
                &format!("srt://{b}:{SRT_PORT}?mode=caller&latency={lat}{filter}"),
            ],
        )?);
        std::thread::sleep(Duration::from_millis(1000));
    }
    let relays = match c {
        Contender::Transmit(p) => Some(start_relays(spec, &lab, *p)?),
        _ => None,
    };
    let n = match &spec.ts {
        Some(ts) => spec.messages.min(ts.chunks.len() as u32),
        None => spec.messages,
    };
    let size = spec.size;
    let ts = spec.ts.clone();
    let ts_chunks = ts.as_ref().map(|t| t.chunks.clone());
    let epoch = std::time::Instant::now() + Duration::from_millis(50);
    let reader = std::thread::spawn(move || {
        let mut got: Vec<(Vec<u8>, std::time::Instant)> = Vec::new();
        let mut buf = vec![0u8; 65_536];
        while let Ok(k) = rx_sock.recv(&mut buf) {
            got.push((buf[..k].to_vec(), std::time::Instant::now()));
        }
        got
    });
    let to: SocketAddr = if srt || transmit {
        LOCAL_IN.parse()?
    } else {
        SocketAddr::new(b, UDP_PORT)
    };
    let interval = spec.interval;
    let sent_at = ns_a.run(move || -> std::io::Result<Vec<std::time::Instant>> {
        let s = UdpSocket::bind(if srt || transmit {
            "127.0.0.1:0"
        } else {
            "0.0.0.0:0"
        })?;
        let mut out = Vec::with_capacity(n as usize);
        for id in 0..n {
            let at = epoch + interval * id;
            let now = std::time::Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            out.push(std::time::Instant::now());
            match &ts_chunks {
                Some(c) => s.send_to(&c[id as usize], to)?,
                None => s.send_to(&payload(id, size), to)?,
            };
        }
        Ok(out)
    })??;
    let got = reader.join().map_err(|_| "receiver thread panicked")?;
    drop(procs);
    let (relay_error, relay_protocol) = match relays {
        Some(r) => r.stop(),
        None => (None, None),
    };
    let stopped = Capture::stop_all(vec![cap]);
    let netem = lab.netem_stats();
    let drops = lab
        .netem()
        .map(|m| m.drop_log(Direction::AtoB))
        .unwrap_or_default();
    drop(lab);
    let (pcap_file, _) = stopped?.into_iter().next().ok_or("no capture")?;
    let network_dropped = if transmit {
        vec![false; n as usize]
    } else {
        datagram_fates(&pcap_file, port, header, size, n, &drops, ts.as_ref())?
    };
    let _ = std::fs::remove_dir_all(&dir);

    let mut arrival: Vec<Option<std::time::Instant>> = vec![None; n as usize];
    let mut bad = 0;
    let mut ident = ts.as_ref().map(|t| t.identifier(n as usize));
    for (d, t) in &got {
        let id = match &mut ident {
            Some(i) => i.identify(d),
            None => check_payload(d, size),
        };
        match id {
            Some(id) if (id as usize) < arrival.len() => {
                if arrival[id as usize].is_some() {
                    bad += 1;
                } else {
                    arrival[id as usize] = Some(*t);
                }
            }
            _ => bad += 1,
        }
    }
    let t0 = sent_at.first().copied().unwrap_or(epoch);
    let inst = |t: std::time::Instant| {
        Instant::from_nanos(t.saturating_duration_since(t0).as_nanos() as u64)
    };
    let mut o = OnTime::default();
    let mut delays = Vec::new();
    let wire = size + header + 28;
    for (i, s) in sent_at.iter().enumerate() {
        let a = arrival[i];
        if let Some(a) = a {
            delays.push(a.saturating_duration_since(*s).as_secs_f64() * 1e3);
        }
        let oracle = !network_dropped[i]
            && oracle_in_time(spec.rtt / 2, spec.rate_bps, wire, Some(spec.deadline));
        o.add(
            Timeliness::of(inst(*s), a.map(inst), Some(spec.deadline)),
            oracle,
        );
    }
    let p = Percentiles::of(delays);
    let (ts_frames_decoded, ts_file) = match &ts {
        Some(t) => {
            let chunks: Vec<&[u8]> = got.iter().map(|(d, _)| d.as_slice()).collect();
            let name = match c {
                Contender::Transmit(_) if block_udp => format!("{}+udp-blocked", c.name()),
                Contender::Srt if block_udp => "srt+udp-blocked".into(),
                _ => c.name(),
            };
            let (path, frames) = t.decode(&name, &chunks)?;
            (Some(frames), Some(path.display().to_string()))
        }
        None => (None, None),
    };
    Ok(Row {
        transport: match (relay_protocol, &spec.srt_filter) {
            (Some(p), _) => format!("{} ({p})", c.name()),
            (None, Some(f)) if srt => format!("{} [{f}]", c.name()),
            (None, _) => c.name(),
        },
        messages: o.messages,
        on_time: o.on_time,
        late: o.late,
        never_arrived: o.never_arrived,
        oracle_on_time: o.oracle_on_time,
        on_time_fraction: o.fraction(),
        delay_p50_ms: p.p50,
        delay_p99_ms: p.p99,
        delay_max_ms: p.max,
        bad_deliveries: bad,
        dropped_by_emulator: netem.a_to_b.dropped_loss,
        oracle_known: !transmit,
        ts_frames_decoded,
        ts_file,
        error: relay_error,
        srt_latency_ms: srt.then_some(srt_latency.as_millis() as u64),
        srt_latency_rule: srt.then(|| spec.srt_latency_rule(srt_latency)),
    })
}

/// The port `hollywood transmit` listens on in b (TCP and UDP).
const TRANSMIT_PORT: u16 = 9100;

/// The two `hollywood transmit` relays of a run, on a runtime of their own.
struct Relays {
    rt: tokio::runtime::Runtime,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<Result<(), hollywood_taps::Error>>>,
    stats: Vec<std::sync::Arc<hollywood_taps::relay::RelayStats>>,
}

impl Relays {
    /// Stop both (closing gracefully); the first error, with the protocol.
    fn stop(self) -> (Option<String>, Option<hollywood_taps::Protocol>) {
        // The caller first: it closes, then the listener stops.
        for s in self.stops.into_iter().rev() {
            let _ = s.send(());
        }
        let tasks: Vec<_> = self.tasks.into_iter().rev().collect();
        let errors: Vec<String> = self.rt.block_on(async move {
            let mut out = Vec::new();
            for t in tasks {
                match tokio::time::timeout(Duration::from_secs(5), t).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => out.push(e.to_string()),
                    Ok(Err(e)) => out.push(e.to_string()),
                    Err(_) => out.push("a relay did not stop within 5 s".into()),
                }
            }
            out
        });
        let proto = self.stats.last().and_then(|s| s.snapshot().protocol);
        self.rt.shutdown_timeout(Duration::from_secs(1));
        let error = match (errors.first(), proto) {
            (Some(e), _) => Some(e.clone()),
            (None, Some(_)) => None,
            (None, None) => Some("the relays never connected".into()),
        };
        (error, proto)
    }
}

/// `hollywood transmit udp://LOCAL_IN hollywood://b:PORT` in a (with the
/// engine on a TUN for the TCP Hollywood candidate) and
/// `hollywood transmit hollywood://b:PORT?mode=listener udp://LOCAL_OUT`
/// in b, the chunks' deadline as the latency.
fn start_relays(
    spec: &CompareSpec,
    lab: &Lab,
    protocol: Option<hollywood_taps::Protocol>,
) -> Result<Relays, Error> {
    use hollywood_taps::relay::{self, Direction, Mode, RelayConfig, RelayStats};
    use hollywood_taps::{
        Engine, LocalEndpoint, Preconnection, RemoteEndpoint, SecurityParameters,
        TransportProperties,
    };
    let rt = crate::workload::runtime()?;
    let ns_a = lab.ns(Host::A).name().ok_or("named namespace")?.to_string();
    let ns_b = lab.ns(Host::B).name().ok_or("named namespace")?.to_string();
    let server = SocketAddr::new(lab.addr(Host::B, false), TRANSMIT_PORT);
    let base = |ns: &str| {
        let mut p = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
            .with_namespace(ns.to_string());
        if let Some(p1) = protocol {
            p = p.with_protocols(&[p1]);
        }
        p
    };
    // The chunks' deadline, as the engine and Linux rows get it: a
    // Hollywood lifetime is end to end (thesis §4.2), so the application's
    // deadline is the setting. SRT's latency is derived from the same
    // deadline (`srt_latency_for`: minus the one-way delay, since SRT's
    // latency is a receiver buffer on top of it, and a margin, since SRT
    // delivers *at* that point rather than by it).
    let latency = spec.deadline;
    let engine = rt.block_on(async {
        let tun = lab.engine_tun(Host::A)?;
        // BBR, as QUIC's candidate and the kernel's default here.
        let config = hollywood_tcp::Config {
            cc: CcAlgorithm::Bbr,
            ..hollywood_tcp::Config::hollywood(true, true)
        };
        let stack = hollywood_io::Stack::spawn(tun, config)?;
        Ok::<_, Error>(Engine {
            stack,
            addr: lab.engine_addr(Host::A, false),
        })
    })?;
    let rx = RelayConfig {
        preconnection: base(&ns_b).with_local(LocalEndpoint::from_addr(server)),
        mode: Mode::Listener,
        direction: Direction::HollywoodToUdp {
            to: LOCAL_OUT.parse()?,
        },
        latency,
        reorder: relay::default_reorder(latency),
    };
    let tx = RelayConfig {
        preconnection: base(&ns_a)
            .with_remote(RemoteEndpoint::from_addr(server))
            .with_engine(engine),
        mode: Mode::Caller,
        direction: Direction::UdpToHollywood {
            bind: LOCAL_IN.parse()?,
        },
        latency,
        reorder: relay::default_reorder(latency),
    };
    let mut relays = Relays {
        rt,
        stops: Vec::new(),
        tasks: Vec::new(),
        stats: Vec::new(),
    };
    // The listener first, as for SRT; the caller's counters stay last.
    for cfg in [rx, tx] {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let stats = std::sync::Arc::new(RelayStats::default());
        let st = stats.clone();
        relays.tasks.push(relays.rt.spawn(async move {
            relay::run(cfg, st, async {
                let _ = stop_rx.await;
            })
            .await
        }));
        relays.stops.push(stop_tx);
        relays.stats.push(stats);
        std::thread::sleep(Duration::from_millis(300));
    }
    // Listener up, caller connected (racing may wait out QUIC's stagger).
    std::thread::sleep(Duration::from_millis(1200));
    Ok(relays)
}

/// Per chunk id: the emulator's random loss dropped the first datagram
/// that carried it (after `header` bytes of protocol header).
fn datagram_fates(
    pcap: &Path,
    port: u16,
    header: usize,
    size: usize,
    n: u32,
    drops: &crate::netem::DropLog,
    ts: Option<&crate::ts::TsSource>,
) -> Result<Vec<bool>, Error> {
    let mut ident = ts.map(|t| t.identifier(n as usize));
    let f = std::fs::File::open(pcap)?;
    let mut rd =
        hollywood_wire::pcap::Reader::new(std::io::BufReader::new(f)).map_err(|e| e.to_string())?;
    let lt = rd.linktype();
    let mut first: Vec<Option<u64>> = vec![None; n as usize];
    while let Some((_, frame)) = rd.next_packet().map_err(|e| e.to_string())? {
        let Some(ip) = hollywood_wire::pcap::ip_packet(lt, &frame) else {
            continue;
        };
        let Some((dst_port, data)) = udp_lenient(ip) else {
            continue;
        };
        if dst_port != port || data.len() < header + size {
            continue;
        }
        let chunk = &data[header..header + size];
        let id = match &mut ident {
            Some(i) => i.identify(chunk),
            None => check_payload(chunk, size),
        };
        let Some(id) = id else {
            continue;
        };
        if let (Some(slot), Some(fp)) = (first.get_mut(id as usize), segment_fingerprint(ip)) {
            slot.get_or_insert(fp);
        }
    }
    Ok(first
        .iter()
        .map(|f| {
            f.is_some_and(|fp| {
                matches!(
                    drops.reason_of(fp),
                    Some(DropReason::Loss | DropReason::Rule)
                )
            })
        })
        .collect())
}

/// Destination port and payload of a UDP datagram, without checking its
/// checksum (a capture on the sending host's veth sees it before checksum
/// offload fills it in).
pub(crate) fn udp_lenient(ip: &[u8]) -> Option<(u16, &[u8])> {
    let (r, seg) = hollywood_wire::IpRepr::parse(ip).ok()?;
    if r.protocol() != 17 || seg.len() < 8 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([seg[4], seg[5]]));
    let data = seg.get(8..len.max(8))?;
    Some((u16::from_be_bytes([seg[2], seg[3]]), data))
}

/// The table, one row per contender.
pub fn table(rows: &[Row]) -> String {
    let ts = rows.iter().any(|r| r.ts_frames_decoded.is_some());
    let mut s = String::from(
        "transport | on time | of messages | oracle | late | never arrived | delay p50 ms | p99 ms | max ms | emulator drops",
    );
    s += if ts { " | frames decoded\n" } else { "\n" };
    for r in rows {
        s += &format!(
            "{} | {} ({:.2} %) | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {}{}{}\n",
            match r.srt_latency_ms {
                Some(l) => format!("{} (latency {l} ms)", r.transport),
                None => r.transport.clone(),
            },
            r.on_time,
            100.0 * r.on_time_fraction,
            r.messages,
            if r.oracle_known {
                r.oracle_on_time.to_string()
            } else {
                "n/a".to_string()
            },
            r.late,
            r.never_arrived,
            r.delay_p50_ms,
            r.delay_p99_ms,
            r.delay_max_ms,
            r.dropped_by_emulator,
            r.ts_frames_decoded
                .map(|f| format!(" | {f}"))
                .unwrap_or_default(),
            r.error
                .as_ref()
                .map(|e| format!(" (error: {e})"))
                .unwrap_or_default()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn srt_latency_puts_the_delivery_point_inside_the_deadline() {
        // The three paths of docs/LAB.md.
        assert_eq!(srt_latency_for(ms(180), ms(100)), ms(115));
        assert_eq!(srt_latency_for(ms(200), ms(60)), ms(155));
        assert_eq!(srt_latency_for(ms(300), ms(100)), ms(235));
        // Delivery at one-way + latency leaves the margin to the deadline.
        // (Whole ms: an odd RTT's half ms is rounded off the latency.)
        for (d, rtt) in [(180, 100), (200, 60), (300, 100), (1000, 7)] {
            let l = srt_latency_for(ms(d), ms(rtt));
            let point = ms(rtt) / 2 + l + SRT_MARGIN;
            assert!(point <= ms(d) && point + ms(1) > ms(d), "{d} {rtt}");
        }
        // A deadline the path cannot meet still gives SRT a latency (SRT
        // reads 0 as its 120 ms default).
        assert_eq!(srt_latency_for(ms(40), ms(100)), ms(1));
    }

    #[test]
    fn srt_recommended_multiplier_follows_the_deployment_guide() {
        assert_eq!(srt_recommended_rtt_multiplier(0.0), Some(3));
        assert_eq!(srt_recommended_rtt_multiplier(0.01), Some(3));
        assert_eq!(srt_recommended_rtt_multiplier(0.02), Some(4));
        assert_eq!(srt_recommended_rtt_multiplier(0.03), Some(4));
        assert_eq!(srt_recommended_rtt_multiplier(0.08), Some(6));
        assert_eq!(srt_recommended_rtt_multiplier(0.2), None);
    }

    #[test]
    fn the_spec_reports_how_srt_latency_was_chosen() {
        let mut s = CompareSpec::live_video("x");
        assert_eq!(s.srt_latency(), ms(115));
        let rule = s.srt_latency_rule(s.srt_latency());
        assert!(
            rule.starts_with("deadline - one-way - 15 ms margin = 180 - 50 - 15"),
            "{rule}"
        );
        assert!(
            rule.contains("below SRT's recommended 4 x RTT = 400 ms"),
            "{rule}"
        );
        s.srt_latency = Some(ms(400));
        assert_eq!(s.srt_latency(), ms(400));
        let rule = s.srt_latency_rule(ms(400));
        assert!(rule.starts_with("given"), "{rule}");
        assert!(
            rule.contains("at least SRT's recommended 4 x RTT"),
            "{rule}"
        );
        s.srt_latency_sweep = vec![ms(80), ms(120)];
        assert!(s.srt_latency_rule(ms(80)).starts_with("swept"));
    }
}
