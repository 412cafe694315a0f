//! `hollywood bench`: the engine over TUN against Linux TCP on the same
//! veth, in the same run (issue 5 item 8).
//!
//! Topology (built here, no emulator; torn down on drop, also on panic):
//!
//! ```text
//!  ns hwb-PID-Na                                          ns hwb-PID-Nb
//!  engine 10.89.1.2 ─ TUN hwbtun0 10.89.1.1/24
//!                     kernel A forwards
//!                     hwb-a 10.89.2.1/24  ◄──── veth ────►  hwb-b 10.89.2.2/24
//!  kernel TCP (iperf3 client, echo client)                  sinks, echo server, iperf3 -s
//! ```
//!
//! - **Throughput**: kernel TCP A→B with `iperf3 -J` (receiver's rate);
//!   the engine (in A, over the TUN) → a kernel sink in B; a kernel sender
//!   in B → the engine. Same veth, same duration. Every byte the engine
//!   sends or receives is checked against the sender's pattern.
//! - **Echo**: 160-byte messages, one outstanding, N round trips (after a
//!   warm-up), kernel client in A ↔ kernel echo server in B versus engine
//!   client in A ↔ the same kind of server; p50 / p99 / mean. Both clients
//!   disable Nagle. Each echo is checked byte for byte.
//!
//! The engine runs with TUN offloads off and/or on
//! ([`hollywood_io::TunConfig::offload`]) so one run shows both, and each
//! engine result carries its ratio to the kernel result of the same run.

use hollywood_io::{
    HostStats, NetNs, NsThread, ShardedHost, Step, TunConfig, TunDevice, TunHost, VethPair,
    WorkerReport,
};
use hollywood_tcp::{Config, ConnHandle, EndpointEvent, Event};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The engine's address (behind the TUN device in A).
pub const ENGINE: Ipv4Addr = Ipv4Addr::new(10, 89, 1, 2);
/// Kernel A's address on the TUN device.
pub const TUN_KERNEL: Ipv4Addr = Ipv4Addr::new(10, 89, 1, 1);
/// Kernel A's address on the veth.
pub const A: Ipv4Addr = Ipv4Addr::new(10, 89, 2, 1);
/// Kernel B's address on the veth.
pub const B: Ipv4Addr = Ipv4Addr::new(10, 89, 2, 2);
/// Size of an echo message.
pub const MESSAGE_BYTES: usize = 160;
/// Untimed round trips before the timed ones.
pub const ECHO_WARMUP: usize = 200;
/// Length of the repeating byte pattern of the throughput runs: a prime,
/// so that a segment delivered at the wrong offset never matches.
const PATTERN_LEN: usize = 65_521;
/// Socket timeouts on the kernel side (a broken engine cannot hang us).
const SOCKET_TIMEOUT: Duration = Duration::from_secs(20);

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Namespaces, veths and TUN devices need root.
    #[error("hollywood bench needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces and TUN devices; run it as root")]
    NotRoot,
    /// Setting up namespaces or the TUN device, or driving the engine.
    #[error("{0}")]
    Tun(#[from] hollywood_io::Error),
    /// A system call or process failed.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// A transfer did not complete correctly (wrong bytes, reset, timeout,
    /// iperf3 failure...).
    #[error("{0}")]
    Failed(String),
}

/// Result alias of this module.
pub type Result<T> = std::result::Result<T, BenchError>;

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}

/// Which benchmarks to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Bulk throughput only.
    Throughput,
    /// Message echo round trips only.
    Echo,
    /// Both.
    All,
}

/// Which TUN offload settings to run the engine with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadModes {
    /// Plain TUN (one system call per packet).
    Off,
    /// `IFF_VNET_HDR` + checksum/TSO offloads.
    On,
    /// Both, off first.
    Both,
}

impl OffloadModes {
    fn list(self) -> &'static [bool] {
        match self {
            OffloadModes::Off => &[false],
            OffloadModes::On => &[true],
            OffloadModes::Both => &[false, true],
        }
    }
}

/// A switch of the engine's TUN host, for a run: the writer thread
/// ([`TunHost::set_tx_thread`]) or taking received super-packets whole
/// ([`TunHost::set_rx_whole`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// The host's default (writer thread: on with offloads on a machine
    /// with more than one CPU; whole super-packets: on).
    Default,
    /// Off.
    Off,
    /// On.
    On,
    /// Both, off first (before/after in one run).
    Both,
}

impl Switch {
    fn list(self) -> &'static [Option<bool>] {
        match self {
            Switch::Default => &[None],
            Switch::Off => &[Some(false)],
            Switch::On => &[Some(true)],
            Switch::Both => &[Some(false), Some(true)],
        }
    }
}

/// One engine configuration of a run.
#[derive(Debug, Clone, Copy)]
struct EngineSetup {
    offload: bool,
    /// Writer thread; `None`: the host's default.
    tx: Option<bool>,
    /// Whole super-packets; `None`: the host's default.
    rx_whole: Option<bool>,
}

/// Every engine configuration of a run: offload setting × writer thread ×
/// whole super-packets (the last only with offloads, where it means
/// something).
fn engine_setups(opts: &BenchOptions) -> Vec<EngineSetup> {
    let mut v = Vec::new();
    for &offload in opts.offload.list() {
        for &tx in opts.tx_thread.list() {
            let rx: &[Option<bool>] = if offload {
                opts.rx_whole.list()
            } else {
                &[None]
            };
            for &rx_whole in rx {
                v.push(EngineSetup {
                    offload,
                    tx,
                    rx_whole,
                });
            }
        }
    }
    v
}

/// A TUN host for the engine with the run's settings.
fn engine_host(net: &Net, setup: EngineSetup, config: Config) -> Result<TunHost> {
    let mut host = TunHost::new(net.tun(setup.offload)?, config)?;
    if let Some(on) = setup.tx {
        host.set_tx_thread(on)?;
    }
    if let Some(on) = setup.rx_whole {
        host.set_rx_whole(on);
    }
    Ok(host)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Which benchmarks.
    pub which: Which,
    /// Length of each throughput run (whole seconds: iperf3's `-t`).
    pub seconds: u64,
    /// Timed echo round trips per client.
    pub round_trips: usize,
    /// Engine offload settings.
    pub offload: OffloadModes,
    /// Engine writer-thread settings.
    pub tx_thread: Switch,
    /// Engine settings for taking received super-packets whole.
    pub rx_whole: Switch,
    /// TUN queues of the sharded throughput runs
    /// ([`hollywood_io::ShardedHost`]): with more than 1 (or more than
    /// one stream), the throughput benchmark also runs `streams` parallel
    /// flows per direction over 1 queue and over this many, in the same
    /// run. 1 and 1 stream: no sharded runs.
    pub queues: usize,
    /// Parallel flows of each sharded run.
    pub streams: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            which: Which::All,
            seconds: 5,
            round_trips: 20_000,
            offload: OffloadModes::Both,
            tx_thread: Switch::Default,
            rx_whole: Switch::Default,
            queues: 1,
            streams: 1,
        }
    }
}

/// Everything one `hollywood bench` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Where it ran.
    pub machine: Machine,
    /// Seconds per throughput run.
    pub seconds: u64,
    /// Throughput results, if run.
    pub throughput: Option<ThroughputReport>,
    /// Echo results, if run.
    pub echo: Option<EchoReport>,
}

/// The machine the numbers come from.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `uname -r`.
    pub kernel: String,
    /// CPU model name.
    pub cpu: String,
    /// Online CPUs.
    pub cpus: usize,
    /// MTU of the veth and the TUN device.
    pub mtu: u32,
}

/// Bulk transfer results.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputReport {
    /// Kernel TCP A→B over the veth (iperf3); the baseline of
    /// `engine_to_kernel`.
    pub kernel: KernelThroughput,
    /// Kernel TCP B→A over the veth (`iperf3 -R`); the baseline of
    /// `kernel_to_engine`.
    pub kernel_reverse: KernelThroughput,
    /// Engine in A → kernel sink in B, per offload setting.
    pub engine_to_kernel: Vec<EngineThroughput>,
    /// Kernel sender in B → engine in A, per offload setting.
    pub kernel_to_engine: Vec<EngineThroughput>,
    /// Parallel flows over a multi-queue TUN device, 1 queue and
    /// [`BenchOptions::queues`], per direction and offload setting (empty
    /// unless asked for).
    pub sharded: Vec<ShardedThroughput>,
}

/// One sharded bulk transfer: `streams` flows in one direction between
/// the engine's [`ShardedHost`] workers (one per TUN queue) and the kernel.
#[derive(Debug, Clone, Serialize)]
pub struct ShardedThroughput {
    /// `engine_to_kernel` or `kernel_to_engine`.
    pub direction: &'static str,
    /// TUN queues (= engine worker threads).
    pub queues: usize,
    /// Parallel flows.
    pub streams: usize,
    /// TUN offloads on.
    pub offload: bool,
    /// Writer threads setting (`None`: the host's default).
    pub tx_thread: Option<bool>,
    /// Aggregate receiver's rate, Gbit/s: all bytes over the time from the
    /// first byte of any flow to the last byte of any flow.
    pub gbps: f64,
    /// Bytes received over all flows (all checked against the pattern).
    pub bytes: u64,
    /// Seconds from the first byte to the last.
    pub seconds: f64,
    /// Slowest and fastest flow, Gbit/s (each over its own first-to-last
    /// byte time).
    pub flow_gbps_min: f64,
    /// See `flow_gbps_min`.
    pub flow_gbps_max: f64,
    /// CPU time of this whole process during the run (engine workers,
    /// their writer threads, the kernel-side test threads, and the kernel
    /// work charged to them), seconds.
    pub process_cpu_seconds: f64,
    /// Share of all CPUs busy during the run (`/proc/stat`, everything on
    /// the machine, softirq included), 0..=1.
    pub machine_busy: f64,
    /// Per worker.
    pub workers: Vec<WorkerLoad>,
}

/// What one engine worker did in a sharded run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerLoad {
    /// The worker's (queue's) number.
    pub index: usize,
    /// Connections it owned.
    pub connections: usize,
    /// CPU seconds of its thread while driving.
    pub cpu_seconds: f64,
    /// Packets given to its engine.
    pub packets_in: u64,
    /// Packets its engine sent.
    pub packets_out: u64,
    /// TUN reads of its queue.
    pub frames_in: u64,
    /// TUN writes to its queue.
    pub frames_out: u64,
    /// Packets it read for another worker's connection and handed over.
    pub forwarded_out: u64,
    /// Packets handed over to it by the others.
    pub forwarded_in: u64,
    /// Packets for another worker dropped (inbox full).
    pub forward_drops: u64,
    /// Retransmitted segments of its connections.
    pub retransmitted_segments: u64,
}

/// iperf3's view of kernel TCP.
#[derive(Debug, Clone, Serialize)]
pub struct KernelThroughput {
    /// Receiver's rate, Gbit/s (10^9).
    pub gbps: f64,
    /// Bytes the receiver got.
    pub bytes: u64,
    /// Sender retransmissions.
    pub retransmits: u64,
}

/// One engine bulk transfer.
#[derive(Debug, Clone, Serialize)]
pub struct EngineThroughput {
    /// TUN offloads on.
    pub offload: bool,
    /// The host had a writer thread.
    pub tx_thread: bool,
    /// Frames the host handed to its writer thread (of `frames_out`).
    pub frames_handed_over: u64,
    /// Received super-packets went to the engine whole (offloads only).
    pub rx_whole: bool,
    /// Received super-packets the engine took whole (of `frames_in`).
    pub frames_whole: u64,
    /// Receiver's rate, Gbit/s: bytes over the time from first byte to EOF.
    pub gbps: f64,
    /// Bytes received (all checked against the sender's pattern).
    pub bytes: u64,
    /// Seconds from first byte to EOF at the receiver.
    pub seconds: f64,
    /// Engine / kernel (iperf3, same direction) of this run.
    pub ratio_vs_kernel: f64,
    /// Engine segments sent / received (from the TUN host's counters).
    pub packets_out: u64,
    /// Packets given to the engine.
    pub packets_in: u64,
    /// TUN writes (super-packets count once).
    pub frames_out: u64,
    /// TUN reads (super-packets count once).
    pub frames_in: u64,
    /// Segments that went out merged into super-packets.
    pub segments_merged: u64,
    /// Received frames dropped for unusable offload requests.
    pub offload_errors: u64,
    /// Engine retransmissions.
    pub retransmitted_segments: u64,
}

/// Echo round-trip statistics, microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Timed round trips.
    pub round_trips: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Fastest.
    pub min_us: f64,
    /// Slowest.
    pub max_us: f64,
}

impl Latency {
    fn from_ns(mut v: Vec<u64>) -> Latency {
        v.sort_unstable();
        let n = v.len().max(1);
        // The workspace's one percentile definition (nearest rank).
        let us: Vec<f64> = v.iter().map(|&x| x as f64 / 1e3).collect();
        let at = |q: usize| hollywood_media::percentile(&us, q as f64 / 100.0).unwrap_or(0.0);
        Latency {
            round_trips: v.len(),
            p50_us: at(50),
            p99_us: at(99),
            mean_us: v.iter().sum::<u64>() as f64 / n as f64 / 1e3,
            min_us: v.first().copied().unwrap_or(0) as f64 / 1e3,
            max_us: v.last().copied().unwrap_or(0) as f64 / 1e3,
        }
    }
}

/// Echo results.
#[derive(Debug, Clone, Serialize)]
pub struct EchoReport {
    /// Bytes per message.
    pub message_bytes: usize,
    /// Kernel client ↔ kernel echo server.
    pub kernel: Latency,
    /// Engine client ↔ kernel echo server, per offload setting.
    pub engine: Vec<EngineEcho>,
}

/// One engine echo run.
#[derive(Debug, Clone, Serialize)]
pub struct EngineEcho {
    /// TUN offloads on.
    pub offload: bool,
    /// The host had a writer thread.
    pub tx_thread: bool,
    /// Received super-packets went to the engine whole (offloads only).
    pub rx_whole: bool,
    /// Round-trip statistics.
    pub latency: Latency,
    /// Engine p50 / kernel p50 of this run.
    pub ratio_p50: f64,
    /// Engine p99 / kernel p99 of this run.
    pub ratio_p99: f64,
    /// Packets the engine sent and received (handshake, warm-up and
    /// close included): about one each per round trip when every ACK
    /// rides on data.
    pub packets_out: u64,
    /// See `packets_out`.
    pub packets_in: u64,
}

// ---------------------------------------------------------------------
// Topology
// ---------------------------------------------------------------------

/// The two namespaces and the veth. Field order is drop order.
struct Net {
    _veth: VethPair,
    b: NetNs,
    a: NetNs,
}

static NET_COUNTER: AtomicU32 = AtomicU32::new(0);

impl Net {
    fn up() -> Result<Net> {
        let removed = NetNs::remove_stale("hwb")?;
        if !removed.is_empty() {
            eprintln!("hollywood bench: removed stale namespaces {removed:?}");
        }
        let n = NET_COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let a = NetNs::create(&format!("hwb-{pid}-{n}a"))?;
        let b = NetNs::create(&format!("hwb-{pid}-{n}b"))?;
        let veth = VethPair::create(&a, "hwb-a", &b, "hwb-b")?;
        a.add_addr("hwb-a", A.into(), 24)?;
        b.add_addr("hwb-b", B.into(), 24)?;
        b.add_route("default", Some(A.into()), None)?;
        a.set_sysctl("net.ipv4.ip_forward", "1")?;
        Ok(Net { _veth: veth, b, a })
    }

    /// The engine's TUN device in A. Call inside a tokio runtime.
    fn tun(&self, offload: bool) -> Result<TunDevice> {
        Ok(TunDevice::create(
            &self.a,
            &TunConfig {
                name: "hwbtun0".into(),
                mtu: 1500,
                addrs: vec![(IpAddr::V4(TUN_KERNEL), 24)],
                offload,
            },
        )?)
    }
}

/// Run the benchmarks. Needs root.
pub fn run(opts: &BenchOptions) -> Result<BenchReport> {
    if !hollywood_io::is_root() {
        return Err(BenchError::NotRoot);
    }
    if opts.seconds == 0 || opts.round_trips == 0 {
        return Err(BenchError::Failed(
            "--seconds and --round-trips must be at least 1".into(),
        ));
    }
    let net = Net::up()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_err("start tokio runtime"))?;
    let throughput = match opts.which {
        Which::Throughput | Which::All => Some(throughput(&net, &runtime, opts)?),
        Which::Echo => None,
    };
    let echo = match opts.which {
        Which::Echo | Which::All => Some(echo(&net, &runtime, opts)?),
        Which::Throughput => None,
    };
    Ok(BenchReport {
        machine: machine(),
        seconds: opts.seconds,
        throughput,
        echo,
    })
}

fn machine() -> Machine {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_default();
    Machine {
        kernel,
        cpu,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mtu: 1500,
    }
}

// ---------------------------------------------------------------------
// Byte pattern
// ---------------------------------------------------------------------

/// The repeating pattern: stream byte `i` is `pattern()[i % PATTERN_LEN]`.
fn pattern() -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..PATTERN_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Check `got` against the pattern at stream offset `offset`.
/// A kernel sender (run in namespace B): connect to the engine at
/// `engine_addr`, write the pattern for `duration`, half-close and wait for
/// the engine's FIN so the last bytes are not reset away. The bytes sent.
fn send_pattern(engine_addr: SocketAddr, duration: Duration) -> io::Result<u64> {
    let mut s = TcpStream::connect_timeout(&engine_addr, SOCKET_TIMEOUT)?;
    s.set_write_timeout(Some(SOCKET_TIMEOUT))?;
    s.set_read_timeout(Some(SOCKET_TIMEOUT))?;
    // Whole pattern periods per write keep the stream offset trivial.
    let chunk: Vec<u8> = pattern()
        .iter()
        .copied()
        .cycle()
        .take(4 * PATTERN_LEN)
        .collect();
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < duration {
        s.write_all(&chunk)?;
        sent += chunk.len() as u64;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let mut b = [0u8; 1];
    let _ = s.read(&mut b);
    Ok(sent)
}

/// The most the engine receiver takes per read: the kernel sink's buffer.
const READ_MAX: usize = 256 * 1024;

fn check_pattern(pat: &[u8], offset: u64, got: &[u8]) -> std::result::Result<(), String> {
    let mut pos = (offset % PATTERN_LEN as u64) as usize;
    let mut rest = got;
    while !rest.is_empty() {
        let n = rest.len().min(PATTERN_LEN - pos);
        if rest[..n] != pat[pos..pos + n] {
            let i = rest[..n]
                .iter()
                .zip(&pat[pos..pos + n])
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(format!(
                "byte {} of the stream is wrong",
                offset + (got.len() - rest.len() + i) as u64
            ));
        }
        rest = &rest[n..];
        pos = 0;
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Throughput
// ---------------------------------------------------------------------

fn throughput(
    net: &Net,
    runtime: &tokio::runtime::Runtime,
    opts: &BenchOptions,
) -> Result<ThroughputReport> {
    let duration = Duration::from_secs(opts.seconds);
    let kernel = iperf3(net, opts.seconds, false)?;
    let kernel_reverse = iperf3(net, opts.seconds, true)?;
    let mut engine_to_kernel = Vec::new();
    let mut kernel_to_engine = Vec::new();
    for (i, setup) in engine_setups(opts).into_iter().enumerate() {
        let port = 5300 + 2 * i as u16;
        let mut r = runtime.block_on(engine_send(net, setup, duration, port))?;
        r.ratio_vs_kernel = r.gbps / kernel.gbps;
        engine_to_kernel.push(r);
        let mut r = runtime.block_on(engine_receive(net, setup, duration, port + 1))?;
        r.ratio_vs_kernel = r.gbps / kernel_reverse.gbps;
        kernel_to_engine.push(r);
    }
    let mut sharded = Vec::new();
    if opts.queues > 1 || opts.streams > 1 {
        let mut counts = vec![1, opts.queues];
        counts.dedup();
        let mut port = 5400;
        // The sharded hosts take super-packets whole (the default): one
        // run per offload and writer-thread setting.
        let mut setups: Vec<(bool, Option<bool>)> = engine_setups(opts)
            .into_iter()
            .map(|s| (s.offload, s.tx))
            .collect();
        setups.dedup();
        for (offload, tx) in setups {
            for &queues in &counts {
                for to_kernel in [true, false] {
                    let run = Sharded {
                        offload,
                        tx,
                        queues,
                        streams: opts.streams.max(1),
                        duration,
                        port,
                    };
                    port += 1;
                    sharded.push(if to_kernel {
                        sharded_send(net, &run)?
                    } else {
                        sharded_receive(net, &run)?
                    });
                }
            }
        }
    }
    Ok(ThroughputReport {
        kernel,
        kernel_reverse,
        engine_to_kernel,
        kernel_to_engine,
        sharded,
    })
}

// ---------------------------------------------------------------------
// Sharded throughput (multi-queue TUN)
// ---------------------------------------------------------------------

/// One sharded run's settings.
struct Sharded {
    offload: bool,
    tx: Option<bool>,
    queues: usize,
    streams: usize,
    duration: Duration,
    port: u16,
}

/// What a sharded worker's application returns: bytes moved per
/// connection (with first/last byte times) and retransmissions.
#[derive(Debug, Default)]
struct WorkerOutcome {
    flows: Vec<Received>,
    rtx: u64,
}

/// Machine-wide CPU jiffies (busy, total) from the first line of
/// /proc/stat; zeros if it cannot be read.
fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle + iowait
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// CPU accounting around a run.
struct CpuMeter {
    process: Duration,
    jiffies: (u64, u64),
}

impl CpuMeter {
    fn start() -> CpuMeter {
        CpuMeter {
            process: hollywood_io::sys::cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID),
            jiffies: cpu_jiffies(),
        }
    }

    /// (process CPU seconds, machine busy share) since `start`.
    fn stop(&self) -> (f64, f64) {
        let process = hollywood_io::sys::cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
            .saturating_sub(self.process)
            .as_secs_f64();
        let (busy, total) = cpu_jiffies();
        let d_total = total.saturating_sub(self.jiffies.1);
        let busy = if d_total > 0 {
            busy.saturating_sub(self.jiffies.0) as f64 / d_total as f64
        } else {
            0.0
        };
        (process, busy)
    }
}

/// A multi-queue TUN device for the engine in A and a [`ShardedHost`] on it.
fn sharded_host(net: &Net, run: &Sharded) -> Result<ShardedHost> {
    let queues = TunDevice::create_queues(
        &net.a,
        &TunConfig {
            name: "hwbtun0".into(),
            mtu: 1500,
            addrs: vec![(IpAddr::V4(TUN_KERNEL), 24)],
            offload: run.offload,
        },
        run.queues,
    )?;
    let mut host = ShardedHost::new(queues, Config::default())?;
    host.set_tx_thread(run.tx);
    host.set_timeout(run.duration + 2 * SOCKET_TIMEOUT);
    Ok(host)
}

/// The report of a sharded run from its workers' reports and the flows
/// received.
fn sharded_report(
    run: &Sharded,
    direction: &'static str,
    flows: &[Received],
    reports: &[WorkerReport<std::result::Result<WorkerOutcome, String>>],
    cpu: (f64, f64),
) -> ShardedThroughput {
    let bytes: u64 = flows.iter().map(|f| f.bytes).sum();
    let first = flows.iter().filter_map(|f| f.first).min();
    let last = flows.iter().filter_map(|f| f.last).max();
    let all = Received { bytes, first, last };
    let rates = flows.iter().map(Received::gbps);
    let workers = reports
        .iter()
        .map(|r| {
            let (connections, rtx) = r.result.as_ref().map_or((0, 0), |o| (o.flows.len(), o.rtx));
            WorkerLoad {
                index: r.index,
                connections,
                cpu_seconds: r.cpu.as_secs_f64(),
                packets_in: r.host.packets_in,
                packets_out: r.host.packets_out,
                frames_in: r.host.frames_in,
                frames_out: r.host.frames_out,
                forwarded_out: r.host.forwarded_out,
                forwarded_in: r.host.forwarded_in,
                forward_drops: r.host.forward_drops,
                retransmitted_segments: rtx,
            }
        })
        .collect();
    ShardedThroughput {
        direction,
        queues: run.queues,
        streams: run.streams,
        offload: run.offload,
        tx_thread: run.tx,
        gbps: all.gbps(),
        bytes,
        seconds: all.seconds(),
        flow_gbps_min: rates.clone().fold(f64::INFINITY, f64::min),
        flow_gbps_max: rates.fold(0.0, f64::max),
        process_cpu_seconds: cpu.0,
        machine_busy: cpu.1,
        workers,
    }
}

/// The workers' outcomes, or the first failure.
fn worker_results(
    reports: &[WorkerReport<std::result::Result<WorkerOutcome, String>>],
    what: &str,
) -> Result<()> {
    for r in reports {
        if let Err(e) = &r.result {
            return Err(BenchError::Failed(format!(
                "{what}, worker {}: {e}",
                r.index
            )));
        }
    }
    Ok(())
}

/// Kernel sinks in B for `n` connections on `addr`, one thread each;
/// returns once listening. Each reads to EOF checking the pattern.
fn kernel_sinks(
    ns: &NetNs,
    addr: SocketAddr,
    n: usize,
) -> Result<NsThread<io::Result<Vec<Received>>>> {
    let (tx, rx) = mpsc::channel();
    let thread = ns.spawn("hwb-sinks", move || -> io::Result<Vec<Received>> {
        let listener = TcpListener::bind(addr);
        let _ = tx.send(listener.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        let listener = listener?;
        let mut threads = Vec::new();
        for _ in 0..n {
            let (mut s, _) = accept_with_timeout(&listener)?;
            s.set_read_timeout(Some(SOCKET_TIMEOUT))?;
            let t = std::thread::Builder::new().name("hwb-sink".into()).spawn(
                move || -> io::Result<Received> {
                    let pat = pattern();
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut r = Received::default();
                    loop {
                        let n = s.read(&mut buf)?;
                        let now = Instant::now();
                        if n == 0 {
                            return Ok(r);
                        }
                        check_pattern(&pat, r.bytes, &buf[..n]).map_err(io::Error::other)?;
                        r.first.get_or_insert(now);
                        r.last = Some(now);
                        r.bytes += n as u64;
                    }
                },
            )?;
            threads.push(t);
        }
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(io::Error::other("sink panicked")))
            })
            .collect()
    })?;
    wait_ready(&rx, "kernel sinks")?;
    Ok(thread)
}

/// `streams` flows from the engine's workers (connects round robin) to
/// kernel sinks in B.
fn sharded_send(net: &Net, run: &Sharded) -> Result<ShardedThroughput> {
    let sink_addr = SocketAddr::new(B.into(), run.port);
    let sinks = kernel_sinks(&net.b, sink_addr, run.streams)?;
    let host = sharded_host(net, run)?;
    let done = Arc::new(AtomicBool::new(false));
    let (streams, duration) = (run.streams, run.duration);
    let cpu = CpuMeter::start();
    let workers = {
        let done = done.clone();
        host.start(move |w, host| {
            let mut handles = Vec::new();
            for _ in (0..streams).filter(|&k| w.opens(k)) {
                handles.push(host.connect(SocketAddr::new(ENGINE.into(), 0), sink_addr)?);
            }
            Ok(sender_app(handles, duration, done.clone()))
        })?
    };
    let received = join(sinks, "kernel sinks");
    done.store(true, Ordering::Release);
    let reports = workers.join()?;
    let cpu = cpu.stop();
    worker_results(&reports, "engine → kernel")?;
    let received = received?;
    let sent: u64 = reports
        .iter()
        .filter_map(|r| r.result.as_ref().ok())
        .flat_map(|o| o.flows.iter().map(|f| f.bytes))
        .sum();
    let got: u64 = received.iter().map(|r| r.bytes).sum();
    if got != sent {
        return Err(BenchError::Failed(format!(
            "engine workers sent {sent} bytes but the kernel sinks received {got}"
        )));
    }
    Ok(sharded_report(
        run,
        "engine_to_kernel",
        &received,
        &reports,
        cpu,
    ))
}

/// A sending worker: fill each of its connections with the pattern for
/// `duration` from its establishment, then close; done once `done` (the
/// sinks have read every FIN).
fn sender_app(
    handles: Vec<ConnHandle>,
    duration: Duration,
    done: Arc<AtomicBool>,
) -> impl FnMut(&mut Step<'_>) -> ControlFlow<std::result::Result<WorkerOutcome, String>> {
    let pat = pattern();
    // Per connection: bytes queued, start, closed, retransmissions.
    let mut flows: Vec<(u64, Option<Instant>, bool, u64)> =
        vec![(0, None, false, 0); handles.len()];
    move |step| {
        for e in step.events() {
            if let EndpointEvent::Conn { handle, event } = *e {
                if matches!(event, Event::Reset | Event::TimedOut) && handles.contains(&handle) {
                    return ControlFlow::Break(Err(format!("connection {handle:?}: {event:?}")));
                }
            }
        }
        for (h, (sent, start, closed, rtx)) in handles.iter().zip(flows.iter_mut()) {
            let Some(conn) = step.endpoint().connection_mut(*h) else {
                continue;
            };
            *rtx = conn.stats().retransmitted_segments;
            if *closed || conn.state() != hollywood_tcp::State::Established {
                continue;
            }
            let t0 = *start.get_or_insert_with(Instant::now);
            loop {
                let pos = (*sent % PATTERN_LEN as u64) as usize;
                match conn.send(&pat[pos..]) {
                    Ok(n) if n > 0 => *sent += n as u64,
                    _ => break,
                }
            }
            if t0.elapsed() >= duration {
                conn.close();
                *closed = true;
            }
        }
        if done.load(Ordering::Acquire) {
            let rtx = flows.iter().map(|f| f.3).sum();
            let flows = flows
                .iter()
                .map(|&(bytes, first, _, _)| Received {
                    bytes,
                    first,
                    last: None,
                })
                .collect();
            return ControlFlow::Break(Ok(WorkerOutcome { flows, rtx }));
        }
        step.wake_after(Duration::from_millis(1));
        ControlFlow::Continue(())
    }
}

/// `streams` kernel senders in B to the engine's workers (each accepts
/// what the kernel steers to its queue).
fn sharded_receive(net: &Net, run: &Sharded) -> Result<ShardedThroughput> {
    let engine_addr = SocketAddr::new(ENGINE.into(), run.port);
    let host = sharded_host(net, run)?;
    let done = Arc::new(AtomicBool::new(false));
    let cpu = CpuMeter::start();
    let workers = {
        let done = done.clone();
        host.start(move |_, host| {
            host.listen(engine_addr)?;
            Ok(receiver_app(done.clone()))
        })?
    };
    let duration = run.duration;
    let senders = (0..run.streams)
        .map(|_| {
            net.b
                .spawn("hwb-sender", move || send_pattern(engine_addr, duration))
        })
        .collect::<hollywood_io::Result<Vec<_>>>()?;
    let mut sent = 0;
    let mut failed = None;
    for t in senders {
        match join(t, "kernel sender") {
            Ok(n) => sent += n,
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    done.store(true, Ordering::Release);
    let reports = workers.join()?;
    let cpu = cpu.stop();
    worker_results(&reports, "kernel → engine")?;
    if let Some(e) = failed {
        return Err(e);
    }
    let flows: Vec<Received> = reports
        .iter()
        .filter_map(|r| r.result.as_ref().ok())
        .flat_map(|o| o.flows.iter().copied())
        .collect();
    let got: u64 = flows.iter().map(|f| f.bytes).sum();
    if got != sent {
        return Err(BenchError::Failed(format!(
            "kernel senders sent {sent} bytes but the engine workers received {got}"
        )));
    }
    Ok(sharded_report(
        run,
        "kernel_to_engine",
        &flows,
        &reports,
        cpu,
    ))
}

/// A receiving worker: read and check every connection it accepts, close
/// at EOF; done once `done` (every sender has seen its FIN).
fn receiver_app(
    done: Arc<AtomicBool>,
) -> impl FnMut(&mut Step<'_>) -> ControlFlow<std::result::Result<WorkerOutcome, String>> {
    let pat = pattern();
    let mut buf = vec![0u8; 256 * 1024];
    // Per connection: what arrived, EOF, retransmissions.
    let mut flows: HashMap<ConnHandle, (Received, bool, u64)> = HashMap::new();
    move |step| {
        for e in step.events() {
            match *e {
                EndpointEvent::Accepted { handle, .. } => {
                    flows.insert(handle, (Received::default(), false, 0));
                }
                EndpointEvent::Conn { handle, event } => {
                    if matches!(event, Event::Reset | Event::TimedOut) {
                        return ControlFlow::Break(Err(format!(
                            "connection {handle:?}: {event:?}"
                        )));
                    }
                }
            }
        }
        for (h, (r, eof, rtx)) in flows.iter_mut() {
            let Some(conn) = step.endpoint().connection_mut(*h) else {
                continue;
            };
            *rtx = conn.stats().retransmitted_segments;
            while !*eof {
                match conn.recv(&mut buf) {
                    Ok(0) => {
                        *eof = true;
                        conn.close();
                    }
                    Ok(n) => {
                        let now = Instant::now();
                        if let Err(e) = check_pattern(&pat, r.bytes, &buf[..n]) {
                            return ControlFlow::Break(Err(format!("engine receiver: {e}")));
                        }
                        r.first.get_or_insert(now);
                        r.last = Some(now);
                        r.bytes += n as u64;
                    }
                    Err(_) => break,
                }
            }
        }
        if done.load(Ordering::Acquire) {
            let rtx = flows.values().map(|f| f.2).sum();
            let flows = flows.values().map(|f| f.0).collect();
            return ControlFlow::Break(Ok(WorkerOutcome { flows, rtx }));
        }
        step.wake_after(Duration::from_millis(1));
        ControlFlow::Continue(())
    }
}

/// Kills a child process we started (by its pid) unless it exited.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Kernel TCP with iperf3 (one-off server in B, client in A): A→B, or
/// B→A with `reverse` (`-R`). The receiver's rate.
fn iperf3(net: &Net, seconds: u64, reverse: bool) -> Result<KernelThroughput> {
    let b = net.b.name().expect("named namespace").to_owned();
    let a = net.a.name().expect("named namespace").to_owned();
    let port = "5299";
    let server = Command::new("ip")
        .args(["netns", "exec", &b, "iperf3", "-s", "-1", "-B"])
        .arg(B.to_string())
        .args(["-p", port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io_err(
            "start `iperf3 -s` in namespace B (is iperf3 installed?)",
        ))?;
    let _server = ChildGuard(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = Command::new("ip")
            .args(["netns", "exec", &a, "iperf3", "-J", "-c"])
            .arg(B.to_string())
            .args(["-p", port, "-t", &seconds.to_string()])
            .args(reverse.then_some("-R"))
            .output()
            .map_err(io_err("run `iperf3 -c` in namespace A"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| BenchError::Failed(format!("iperf3 -J printed no JSON ({e}): {text}")))?;
        if let Some(err) = json.get("error").and_then(|e| e.as_str()) {
            // The server may not listen yet.
            if Instant::now() < deadline && err.contains("connect") {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            return Err(BenchError::Failed(format!("iperf3: {err}")));
        }
        let end = &json["end"];
        let gbps = end["sum_received"]["bits_per_second"]
            .as_f64()
            .ok_or_else(|| BenchError::Failed("iperf3 JSON lacks end.sum_received".into()))?
            / 1e9;
        return Ok(KernelThroughput {
            gbps,
            bytes: end["sum_received"]["bytes"].as_u64().unwrap_or(0),
            retransmits: end["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
        });
    }
}

/// What a receiver measured.
#[derive(Debug, Default, Clone, Copy)]
struct Received {
    bytes: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Received {
    fn seconds(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        }
    }

    fn gbps(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 {
            self.bytes as f64 * 8.0 / s / 1e9
        } else {
            0.0
        }
    }
}

/// A kernel listener in `ns` that accepts one connection, reads it to EOF
/// checking the pattern, and reports. Returns once it is listening.
fn kernel_sink(ns: &NetNs, addr: SocketAddr) -> Result<NsThread<io::Result<Received>>> {
    let (tx, rx) = mpsc::channel();
    let thread = ns.spawn("hwb-sink", move || -> io::Result<Received> {
        let listener = TcpListener::bind(addr);
        let _ = tx.send(listener.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        let (mut s, _) = accept_with_timeout(&listener?)?;
        s.set_read_timeout(Some(SOCKET_TIMEOUT))?;
        let pat = pattern();
        let mut buf = vec![0u8; READ_MAX];
        let mut r = Received::default();
        loop {
            let n = s.read(&mut buf)?;
            let now = Instant::now();
            if n == 0 {
                return Ok(r);
            }
            check_pattern(&pat, r.bytes, &buf[..n]).map_err(io::Error::other)?;
            r.first.get_or_insert(now);
            r.last = Some(now);
            r.bytes += n as u64;
        }
    })?;
    wait_ready(&rx, "kernel sink")?;
    Ok(thread)
}

fn accept_with_timeout(l: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
    l.set_nonblocking(true)?;
    let deadline = Instant::now() + SOCKET_TIMEOUT;
    loop {
        match l.accept() {
            Ok((s, a)) => {
                s.set_nonblocking(false)?;
                return Ok((s, a));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}

fn wait_ready(rx: &mpsc::Receiver<std::result::Result<(), String>>, what: &str) -> Result<()> {
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(BenchError::Failed(format!("{what} could not bind: {e}"))),
        Err(_) => Err(BenchError::Failed(format!("{what} did not start"))),
    }
}

/// Join a finished kernel-side thread.
fn join<T>(t: NsThread<io::Result<T>>, what: &str) -> Result<T> {
    t.join()?
        .map_err(|e| BenchError::Failed(format!("{what}: {e}")))
}

/// Fail on a reset or timeout of `handle`.
fn check_events(
    events: &[EndpointEvent],
    handle: Option<ConnHandle>,
) -> std::result::Result<(), String> {
    for e in events {
        if let EndpointEvent::Conn { handle: h, event } = *e {
            if Some(h) == handle {
                match event {
                    Event::Reset => return Err("engine connection reset".into()),
                    Event::TimedOut => return Err("engine connection timed out".into()),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

fn engine_result(host: &TunHost, r: &Received, rtx: u64) -> EngineThroughput {
    let stats: HostStats = host.stats();
    EngineThroughput {
        offload: host.tun().offload(),
        tx_thread: host.tx_thread(),
        frames_handed_over: stats.frames_handed_over,
        rx_whole: host.tun().offload() && host.rx_whole(),
        frames_whole: stats.frames_whole,
        gbps: r.gbps(),
        bytes: r.bytes,
        seconds: r.seconds(),
        ratio_vs_kernel: 0.0,
        packets_out: stats.packets_out,
        packets_in: stats.packets_in,
        frames_out: stats.frames_out,
        frames_in: stats.frames_in,
        segments_merged: stats.segments_merged,
        offload_errors: stats.offload_errors,
        retransmitted_segments: rtx,
    }
}

/// Engine in A sends the pattern for `duration` to a kernel sink in B.
async fn engine_send(
    net: &Net,
    setup: EngineSetup,
    duration: Duration,
    port: u16,
) -> Result<EngineThroughput> {
    let sink_addr = SocketAddr::new(B.into(), port);
    let sink = kernel_sink(&net.b, sink_addr)?;
    let mut host = engine_host(net, setup, Config::default())?;
    let handle = host.connect(SocketAddr::new(ENGINE.into(), 0), sink_addr)?;
    let pat = pattern();
    let mut sent: u64 = 0;
    let mut start: Option<Instant> = None;
    let mut closed = false;
    let mut rtx = 0;
    let mut sink = Some(sink);
    let outcome = tokio::time::timeout(
        duration + SOCKET_TIMEOUT,
        host.drive(|step| {
            if let Err(e) = check_events(step.events(), Some(handle)) {
                return ControlFlow::Break(Err(e));
            }
            if let Some(conn) = step.endpoint().connection_mut(handle) {
                rtx = conn.stats().retransmitted_segments;
                if conn.state() == hollywood_tcp::State::Established && !closed {
                    let t0 = *start.get_or_insert_with(Instant::now);
                    loop {
                        let pos = (sent % PATTERN_LEN as u64) as usize;
                        match conn.send(&pat[pos..]) {
                            Ok(n) if n > 0 => sent += n as u64,
                            _ => break,
                        }
                    }
                    if t0.elapsed() >= duration {
                        conn.close();
                        closed = true;
                    }
                }
            }
            if sink.as_ref().is_some_and(NsThread::is_finished) {
                return ControlFlow::Break(Ok(sink.take()));
            }
            step.wake_after(Duration::from_millis(1));
            ControlFlow::Continue(())
        }),
    )
    .await;
    let sink = match outcome {
        Err(_) => {
            return Err(BenchError::Failed(
                "engine → kernel transfer timed out".into(),
            ))
        }
        Ok(r) => r?.map_err(|e| BenchError::Failed(format!("engine → kernel: {e}")))?,
    };
    let received = join(sink.expect("sink finished"), "kernel sink")?;
    if received.bytes != sent {
        return Err(BenchError::Failed(format!(
            "engine sent {sent} bytes but the kernel sink received {}",
            received.bytes
        )));
    }
    Ok(engine_result(&host, &received, rtx))
}

/// A kernel sender in B writes the pattern to the engine in A for
/// `duration`; the engine checks and counts.
async fn engine_receive(
    net: &Net,
    setup: EngineSetup,
    duration: Duration,
    port: u16,
) -> Result<EngineThroughput> {
    let engine_addr = SocketAddr::new(ENGINE.into(), port);
    let mut host = engine_host(net, setup, Config::default())?;
    host.listen(engine_addr)?;
    let sender = net
        .b
        .spawn("hwb-sender", move || send_pattern(engine_addr, duration))?;
    let pat = pattern();
    let mut handle: Option<ConnHandle> = None;
    let mut r = Received::default();
    let mut eof = false;
    let mut rtx = 0;
    let mut sender = Some(sender);
    let outcome = tokio::time::timeout(
        duration + SOCKET_TIMEOUT,
        host.drive(|step| {
            for e in step.events() {
                if let EndpointEvent::Accepted { handle: h, .. } = *e {
                    handle.get_or_insert(h);
                }
            }
            if let Err(e) = check_events(step.events(), handle) {
                return ControlFlow::Break(Err(e));
            }
            if let Some(conn) = handle.and_then(|h| step.endpoint().connection_mut(h)) {
                rtx = conn.stats().retransmitted_segments;
                // The bytes are checked where the engine holds them
                // (`recv_with`, as an application that parses what it
                // reads); the kernel sink copies them out of its socket.
                while !eof {
                    let mut bad = Ok(());
                    let mut at = r.bytes;
                    let got = conn.recv_with(READ_MAX, |piece| {
                        if bad.is_ok() {
                            bad = check_pattern(&pat, at, piece);
                        }
                        at += piece.len() as u64;
                    });
                    match got {
                        Ok(0) => {
                            eof = true;
                            conn.close();
                        }
                        Ok(n) => {
                            let now = Instant::now();
                            if let Err(e) = bad {
                                return ControlFlow::Break(Err(format!("engine receiver: {e}")));
                            }
                            r.first.get_or_insert(now);
                            r.last = Some(now);
                            r.bytes += n as u64;
                        }
                        Err(_) => break,
                    }
                }
            }
            if eof && sender.as_ref().is_some_and(NsThread::is_finished) {
                return ControlFlow::Break(Ok(sender.take()));
            }
            step.wake_after(Duration::from_millis(1));
            ControlFlow::Continue(())
        }),
    )
    .await;
    let sender = match outcome {
        Err(_) => {
            return Err(BenchError::Failed(
                "kernel → engine transfer timed out".into(),
            ))
        }
        Ok(res) => res?.map_err(|e| BenchError::Failed(format!("kernel → engine: {e}")))?,
    };
    let sent = join(sender.expect("sender finished"), "kernel sender")?;
    if sent != r.bytes {
        return Err(BenchError::Failed(format!(
            "kernel sent {sent} bytes but the engine received {}",
            r.bytes
        )));
    }
    Ok(engine_result(&host, &r, rtx))
}

// ---------------------------------------------------------------------
// Echo
// ---------------------------------------------------------------------

/// Message `i` of an echo run.
fn message(i: usize) -> [u8; MESSAGE_BYTES] {
    let mut m = [0u8; MESSAGE_BYTES];
    for (k, b) in m.iter_mut().enumerate() {
        *b = (i.wrapping_mul(31) ^ k.wrapping_mul(7)) as u8;
    }
    m
}

/// A kernel echo server in `ns` for one connection of 160-byte messages.
fn echo_server(ns: &NetNs, addr: SocketAddr) -> Result<NsThread<io::Result<u64>>> {
    let (tx, rx) = mpsc::channel();
    let thread = ns.spawn("hwb-echo", move || -> io::Result<u64> {
        let listener = TcpListener::bind(addr);
        let _ = tx.send(listener.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        let (mut s, _) = accept_with_timeout(&listener?)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(SOCKET_TIMEOUT))?;
        let mut m = [0u8; MESSAGE_BYTES];
        let mut n = 0;
        loop {
            match s.read_exact(&mut m) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(n),
                Err(e) => return Err(e),
            }
            s.write_all(&m)?;
            n += 1;
        }
    })?;
    wait_ready(&rx, "echo server")?;
    Ok(thread)
}

fn echo(net: &Net, runtime: &tokio::runtime::Runtime, opts: &BenchOptions) -> Result<EchoReport> {
    let total = ECHO_WARMUP + opts.round_trips;
    // Kernel client in A.
    let addr = SocketAddr::new(B.into(), 5400);
    let server = echo_server(&net.b, addr)?;
    let client = net
        .a
        .spawn("hwb-echo-client", move || -> io::Result<Vec<u64>> {
            let mut s = TcpStream::connect_timeout(&addr, SOCKET_TIMEOUT)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(SOCKET_TIMEOUT))?;
            let mut rtts = Vec::with_capacity(total);
            let mut back = [0u8; MESSAGE_BYTES];
            for i in 0..total {
                let m = message(i);
                let t = Instant::now();
                s.write_all(&m)?;
                s.read_exact(&mut back)?;
                let rtt = t.elapsed();
                if back != m {
                    return Err(io::Error::other(format!("echo {i} came back different")));
                }
                if i >= ECHO_WARMUP {
                    rtts.push(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
                }
            }
            Ok(rtts)
        })?;
    let kernel = Latency::from_ns(join(client, "kernel echo client")?);
    let echoed = join(server, "kernel echo server")?;
    if echoed != total as u64 {
        return Err(BenchError::Failed(format!(
            "echo server answered {echoed} of {total} messages"
        )));
    }
    let mut engine = Vec::new();
    for (i, setup) in engine_setups(opts).into_iter().enumerate() {
        let addr = SocketAddr::new(B.into(), 5401 + i as u16);
        let (latency, tx_thread, rx_whole, stats) =
            runtime.block_on(engine_echo(net, setup, addr, total))?;
        engine.push(EngineEcho {
            offload: setup.offload,
            tx_thread,
            rx_whole,
            packets_out: stats.packets_out,
            packets_in: stats.packets_in,
            ratio_p50: latency.p50_us / kernel.p50_us,
            ratio_p99: latency.p99_us / kernel.p99_us,
            latency,
        });
    }
    Ok(EchoReport {
        message_bytes: MESSAGE_BYTES,
        kernel,
        engine,
    })
}

/// The engine client in A: `total` echoes of 160-byte messages, one
/// outstanding; the first [`ECHO_WARMUP`] are not timed.
async fn engine_echo(
    net: &Net,
    setup: EngineSetup,
    addr: SocketAddr,
    total: usize,
) -> Result<(Latency, bool, bool, HostStats)> {
    let server = echo_server(&net.b, addr)?;
    let config = Config {
        nagle: false,
        ..Config::default()
    };
    let mut host = engine_host(net, setup, config)?;
    let handle = host.connect(SocketAddr::new(ENGINE.into(), 0), addr)?;
    let mut rtts = Vec::with_capacity(total);
    let mut i = 0usize;
    let mut got = 0usize;
    let mut back = [0u8; MESSAGE_BYTES];
    let mut sent_at: Option<Instant> = None;
    let mut closed = false;
    let mut server = Some(server);
    let outcome = tokio::time::timeout(
        SOCKET_TIMEOUT + Duration::from_micros(total as u64 * 500),
        host.drive(|step| {
            if let Err(e) = check_events(step.events(), Some(handle)) {
                return ControlFlow::Break(Err(e));
            }
            if let Some(conn) = step.endpoint().connection_mut(handle) {
                if conn.state() == hollywood_tcp::State::Established && !closed {
                    if let Some(t) = sent_at {
                        while got < MESSAGE_BYTES {
                            match conn.recv(&mut back[got..]) {
                                Ok(0) => {
                                    return ControlFlow::Break(Err("echo server closed".into()))
                                }
                                Ok(n) => got += n,
                                Err(_) => break,
                            }
                        }
                        if got == MESSAGE_BYTES {
                            let rtt = t.elapsed();
                            if back != message(i) {
                                return ControlFlow::Break(Err(format!(
                                    "echo {i} came back different"
                                )));
                            }
                            if i >= ECHO_WARMUP {
                                rtts.push(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
                            }
                            i += 1;
                            got = 0;
                            sent_at = None;
                        }
                    }
                    if sent_at.is_none() {
                        if i == total {
                            conn.close();
                            closed = true;
                        } else {
                            match conn.send(&message(i)) {
                                Ok(MESSAGE_BYTES) => sent_at = Some(Instant::now()),
                                other => {
                                    return ControlFlow::Break(Err(format!(
                                        "engine send of echo {i}: {other:?}"
                                    )))
                                }
                            }
                        }
                    }
                }
            }
            if server.as_ref().is_some_and(NsThread::is_finished) {
                return ControlFlow::Break(Ok(server.take()));
            }
            if closed {
                step.wake_after(Duration::from_millis(1));
            }
            ControlFlow::Continue(())
        }),
    )
    .await;
    let server = match outcome {
        Err(_) => return Err(BenchError::Failed("engine echo run timed out".into())),
        Ok(r) => r?.map_err(|e| BenchError::Failed(format!("engine echo: {e}")))?,
    };
    let echoed = join(server.expect("server finished"), "kernel echo server")?;
    if echoed != total as u64 || rtts.len() != total - ECHO_WARMUP {
        return Err(BenchError::Failed(format!(
            "engine echo: server answered {echoed}, client timed {} of {total}",
            rtts.len()
        )));
    }
    Ok((
        Latency::from_ns(rtts),
        host.tx_thread(),
        setup.offload && host.rx_whole(),
        host.stats(),
    ))
}

// ---------------------------------------------------------------------
// Text output
// ---------------------------------------------------------------------

impl BenchReport {
    /// A human-readable summary.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(
            s,
            "machine: {} ({} CPUs), Linux {}, veth/TUN MTU {}",
            m.cpu, m.cpus, m.kernel, m.mtu
        );
        let off = |o: bool, t: bool, w: bool| {
            let mut l = String::from(if o { "offload on " } else { "offload off" });
            if t {
                l.push_str(", writer thread");
            }
            if o && !w {
                l.push_str(", rx split");
            }
            l
        };
        if let Some(t) = &self.throughput {
            let _ = writeln!(s, "throughput ({} s per run, same veth):", self.seconds);
            let _ = writeln!(
                s,
                "  kernel TCP A→B (iperf3)          {:7.2} Gb/s  ({} retransmits)",
                t.kernel.gbps, t.kernel.retransmits
            );
            let _ = writeln!(
                s,
                "  kernel TCP B→A (iperf3 -R)       {:7.2} Gb/s  ({} retransmits)",
                t.kernel_reverse.gbps, t.kernel_reverse.retransmits
            );
            for (name, runs) in [
                ("engine → kernel", &t.engine_to_kernel),
                ("kernel → engine", &t.kernel_to_engine),
            ] {
                for r in runs.iter() {
                    let _ = writeln!(
                        s,
                        "  {name} ({})  {:7.2} Gb/s  = {:.3} × kernel  ({} segments, {} TUN writes, {} TUN reads, {} retransmitted)",
                        off(r.offload, r.tx_thread, r.rx_whole),
                        r.gbps,
                        r.ratio_vs_kernel,
                        if name.starts_with("engine") { r.packets_out } else { r.packets_in },
                        r.frames_out,
                        r.frames_in,
                        r.retransmitted_segments,
                    );
                }
            }
            for r in &t.sharded {
                let cpu: Vec<String> = r
                    .workers
                    .iter()
                    .map(|w| {
                        format!(
                            "w{} {} conns {:.2} s CPU, {} fwd",
                            w.index, w.connections, w.cpu_seconds, w.forwarded_out
                        )
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "  sharded {} ({}, {} queue(s), {} streams)  {:7.2} Gb/s  (flows {:.2}-{:.2}; process {:.2} s CPU, machine {:.0} % busy; {})",
                    r.direction,
                    match (r.offload, r.tx_thread) {
                        (o, Some(t)) => off(o, t, true),
                        (o, None) => format!("{}, default writer", off(o, false, true).trim_end()),
                    },
                    r.queues,
                    r.streams,
                    r.gbps,
                    r.flow_gbps_min,
                    r.flow_gbps_max,
                    r.process_cpu_seconds,
                    100.0 * r.machine_busy,
                    cpu.join("; "),
                );
            }
        }
        if let Some(e) = &self.echo {
            let _ = writeln!(
                s,
                "echo ({}-byte messages, one outstanding, {} round trips):",
                e.message_bytes, e.kernel.round_trips
            );
            let line = |s: &mut String, name: &str, l: &Latency, ratio: Option<(f64, f64)>| {
                let _ = write!(
                    s,
                    "  {name:30} p50 {:7.1} µs  p99 {:7.1} µs  mean {:7.1} µs",
                    l.p50_us, l.p99_us, l.mean_us
                );
                if let Some((a, b)) = ratio {
                    let _ = write!(s, "  = {a:.2} × / {b:.2} × kernel");
                }
                s.push('\n');
            };
            line(&mut s, "kernel ↔ kernel", &e.kernel, None);
            for r in &e.engine {
                line(
                    &mut s,
                    &format!(
                        "engine ↔ kernel ({})",
                        off(r.offload, r.tx_thread, r.rx_whole)
                    ),
                    &r.latency,
                    Some((r.ratio_p50, r.ratio_p99)),
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_check_finds_misplaced_bytes() {
        let pat = pattern();
        let stream: Vec<u8> = pat.iter().copied().cycle().take(3 * PATTERN_LEN).collect();
        check_pattern(&pat, 0, &stream).unwrap();
        check_pattern(&pat, 1000, &stream[1000..70_000]).unwrap();
        // A chunk at the wrong offset fails.
        assert!(check_pattern(&pat, 1448, &stream[0..1448]).is_err());
        let mut bad = stream[5..200].to_vec();
        bad[100] ^= 1;
        let err = check_pattern(&pat, 5, &bad).unwrap_err();
        assert!(err.contains("byte 105"), "{err}");
    }

    #[test]
    fn percentiles() {
        let l = Latency::from_ns((1..=100).map(|i| i * 1000).collect());
        assert_eq!(l.round_trips, 100);
        // Nearest rank, as every other report (the floor index gave 51 and
        // 100: the maximum, not the 99th percentile).
        assert_eq!(l.p50_us, 50.0);
        assert_eq!(l.p99_us, 99.0);
        assert_eq!(l.min_us, 1.0);
        assert_eq!(l.max_us, 100.0);
        assert!((l.mean_us - 50.5).abs() < 1e-9);
    }

    #[test]
    fn messages_differ() {
        assert_ne!(message(0), message(1));
        assert_eq!(message(7), message(7));
    }
}
