//! A user-space link emulator on TUN devices, with the simulator's own link
//! model ([`hollywood_sim::LinkModel`]).
//!
//! # How packets flow
//!
//! The emulator lives in the lab's emulator namespace (`<lab>-e`), which
//! sits between host a and host b (or the router r). [`Netem::start`]
//! creates one TUN device per direction (`tun-ab`, `tun-ba`) and installs
//! policy routing, for IPv4 and IPv6:
//!
//! ```text
//! ip rule add iif <veth from a> lookup 101     ip route add default dev tun-ab table 101
//! ip rule add iif <veth from b> lookup 102     ip route add default dev tun-ba table 102
//! ```
//!
//! so every packet that arrives from a (whatever its protocol: kernel TCP,
//! UDP, ICMP, our engine) is routed into `tun-ab`, where the emulator reads
//! it. A dedicated OS thread runs the optional [`PacketHook`], then the
//! direction's [`LinkModel`] (drop-tail queue, rate or Mahimahi trace,
//! loss, delay, jitter, reordering, duplication, scheduled changes), keeps
//! the packet in a bounded delay line and writes it back into the same TUN
//! at its computed arrival time. The kernel sees the packet arrive on
//! `tun-ab`, which matches no rule, and routes it with the main table out of
//! the veth toward b.
//!
//! # Why TUN and not NFQUEUE
//!
//! NFQUEUE hands a packet to user space for a verdict but the packet stays
//! in the kernel's queue: holding thousands of packets for a 100 ms delay
//! means thousands of outstanding verdicts (the queue has a fixed length
//! and the kernel drops or bypasses beyond it), and "release at time t" is
//! a reinjection with its own ordering rules. A TUN device gives the packet
//! to us outright; we own its bytes, its queue and its departure time, and
//! the model's drop-tail queue is the only queue (the TUN's own transmit
//! queue is drained as fast as packets arrive). It also needs no iptables
//! rules, so it coexists with the firewalls the middlebox experiments put
//! in the router namespace.
//!
//! # Timing
//!
//! The thread waits with `ppoll(2)` (nanosecond timeout) on both TUNs and a
//! wake socket, with its timer slack set to 1 ns (`PR_SET_TIMERSLACK`; the
//! default 50 µs slack would delay every wake-up by up to 50 µs). Departure
//! times come from the model, not from when the thread woke, so wake-up
//! latency (tens of µs, reported as [`DirectionStats::mean_late_ns`] and
//! [`DirectionStats::max_late_ns`]) adds jitter to individual packets but
//! never accumulates into a rate error. tokio's timer (1 ms granularity)
//! would be far too coarse: one 1500-byte packet at 50 Mb/s takes 240 µs.
//!
//! # Memory
//!
//! The model's drop-tail queue bounds the bytes waiting for the
//! transmitter; the delay line (packets already "on the wire") holds at most
//! [`NetemConfig::max_in_flight`] packets per direction and drops beyond
//! that ([`DirectionStats::dropped_delay_line`]).
//!
//! Needs Linux and root.

use crate::topology::{LabError, Result};
use hollywood_io::sys;
use hollywood_io::{NetNs, TunConfig, TunDevice};
use hollywood_sim::{DropReason, LinkChange, LinkConfig, LinkModel, RateTrace};
use serde::Serialize;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Which way a packet travels through the emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Direction {
    /// From host a toward host b.
    AtoB,
    /// From host b toward host a.
    BtoA,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::AtoB => 0,
            Direction::BtoA => 1,
        }
    }

    /// The other way.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::AtoB => Direction::BtoA,
            Direction::BtoA => Direction::AtoB,
        }
    }

    /// Both directions, a→b first.
    pub const BOTH: [Direction; 2] = [Direction::AtoB, Direction::BtoA];
}

/// Code that sees every packet before the link model (the resegmenting
/// middlebox uses it). Runs on the emulator thread: keep it quick.
pub trait PacketHook: Send {
    /// `packet` is a whole IP packet travelling in `dir`; push zero or more
    /// packets to `out` (they go through the link model in that order).
    /// `now_ns` counts from the emulator's start.
    fn on_packet(&mut self, now_ns: u64, dir: Direction, packet: Vec<u8>, out: &mut Vec<Vec<u8>>);

    /// Packets to send back the other way, taken right after each
    /// [`PacketHook::on_packet`] (a middlebox answering the sender, e.g. a
    /// forged RST). They skip the link model: the box answers from where it
    /// sits, at once. None by default.
    fn take_reverse(&mut self) -> Vec<Vec<u8>> {
        Vec::new()
    }
}

/// The emulated path in one direction.
#[derive(Debug, Clone, Default)]
pub struct DirectionConfig {
    /// Rate, delay, queue, loss, jitter, reordering, duplication, MTU.
    pub link: LinkConfig,
    /// A Mahimahi trace that replaces `link.rate_bps` (opportunity times
    /// count from the emulator's start).
    pub trace: Option<Arc<RateTrace>>,
    /// Changes applied at offsets from the emulator's start.
    pub schedule: Vec<(Duration, LinkChange)>,
}

impl DirectionConfig {
    /// A fixed link, no trace, no schedule.
    #[must_use]
    pub fn new(link: LinkConfig) -> DirectionConfig {
        DirectionConfig {
            link,
            trace: None,
            schedule: Vec::new(),
        }
    }
}

/// Everything the emulator needs besides its interfaces.
#[derive(Debug, Clone)]
pub struct NetemConfig {
    /// Path a→b.
    pub a_to_b: DirectionConfig,
    /// Path b→a.
    pub b_to_a: DirectionConfig,
    /// Seed of both directions' random streams (a→b uses stream 1, b→a
    /// stream 2 of the ChaCha8 generator seeded with it).
    pub seed: u64,
    /// Most packets per direction in the delay line (accepted by the link,
    /// waiting for their arrival time). Default 65 536.
    pub max_in_flight: usize,
}

impl NetemConfig {
    /// Default [`NetemConfig::max_in_flight`].
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 65_536;

    /// Fixed links in both directions.
    #[must_use]
    pub fn new(a_to_b: LinkConfig, b_to_a: LinkConfig, seed: u64) -> NetemConfig {
        NetemConfig {
            a_to_b: DirectionConfig::new(a_to_b),
            b_to_a: DirectionConfig::new(b_to_a),
            seed,
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
        }
    }

    fn dir(&self, d: Direction) -> &DirectionConfig {
        match d {
            Direction::AtoB => &self.a_to_b,
            Direction::BtoA => &self.b_to_a,
        }
    }

    /// Build the two link models (validates every parameter).
    fn models(&self) -> Result<[LinkModel; 2]> {
        use rand::SeedableRng;
        let make = |d: Direction| -> Result<LinkModel> {
            let cfg = self.dir(d);
            cfg.link
                .validate()
                .map_err(|e| LabError::Config(format!("{d:?} link: {e}")))?;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(1 + d.index() as u64);
            let mut m = LinkModel::with_rng(cfg.link.clone(), rng);
            m.set_trace(cfg.trace.clone());
            for (at, change) in &cfg.schedule {
                let at = hollywood_sim::Instant::from_nanos(
                    at.as_nanos().min(u128::from(u64::MAX)) as u64,
                );
                m.schedule(at, change.clone())
                    .map_err(|e| LabError::Config(format!("{d:?} schedule: {e}")))?;
            }
            Ok(m)
        };
        if self.max_in_flight == 0 {
            return Err(LabError::Config("max_in_flight must be at least 1".into()));
        }
        Ok([make(Direction::AtoB)?, make(Direction::BtoA)?])
    }
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    /// Packets read from the TUN.
    pub packets_in: u64,
    /// Bytes read from the TUN.
    pub bytes_in: u64,
    /// Packets the hook produced (equals `packets_in` without a hook).
    pub packets_hooked: u64,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Packets written back (delivered).
    pub packets_out: u64,
    /// Bytes written back.
    pub bytes_out: u64,
    /// Dropped by the drop-tail queue.
    pub dropped_queue: u64,
    /// Dropped by random loss.
    pub dropped_loss: u64,
    /// Dropped for exceeding the link MTU.
    pub dropped_mtu: u64,
    /// Dropped because the delay line was full.
    pub dropped_delay_line: u64,
    /// Writes to the TUN that failed (the packet is lost).
    pub write_errors: u64,
    /// Largest queue backlog in bytes.
    pub max_backlog_bytes: u64,
    /// Largest number of packets in the delay line.
    pub max_in_flight: u64,
    /// Mean lateness of writes behind their computed arrival time (ns).
    pub mean_late_ns: u64,
    /// Largest lateness (ns).
    pub max_late_ns: u64,
}

impl DirectionStats {
    /// Packets dropped for any reason.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped_queue
            + self.dropped_loss
            + self.dropped_mtu
            + self.dropped_delay_line
            + self.write_errors
    }
}

/// Counters of both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NetemStats {
    /// Path a→b.
    pub a_to_b: DirectionStats,
    /// Path b→a.
    pub b_to_a: DirectionStats,
}

impl NetemStats {
    /// The counters of `dir`.
    #[must_use]
    pub fn dir(&self, dir: Direction) -> &DirectionStats {
        match dir {
            Direction::AtoB => &self.a_to_b,
            Direction::BtoA => &self.b_to_a,
        }
    }

    fn dir_mut(&mut self, dir: Direction) -> &mut DirectionStats {
        match dir {
            Direction::AtoB => &mut self.a_to_b,
            Direction::BtoA => &mut self.b_to_a,
        }
    }
}

/// Most entries the drop log keeps per direction (later drops are counted
/// in [`DropLog::overflow`] only).
pub const DROP_LOG_LIMIT: usize = 4 << 20;

/// Which packets the link model dropped, by a fingerprint of the packet's
/// transport segment (the IP payload, which forwarding does not change,
/// unlike the IP header's TTL and checksum): a capture taken before the
/// emulator can then tell, packet by packet, which ones the network lost.
#[derive(Debug, Clone, Default)]
pub struct DropLog {
    /// Fingerprint → (reason, how many packets with it).
    entries: std::collections::HashMap<u64, (DropReason, u32)>,
    /// Drops not logged because the log was full.
    pub overflow: u64,
}

impl DropLog {
    fn record(&mut self, packet: &[u8], reason: DropReason) {
        if self.entries.len() >= DROP_LOG_LIMIT {
            self.overflow += 1;
            return;
        }
        if let Some(fp) = segment_fingerprint(packet) {
            self.entries.entry(fp).or_insert((reason, 0)).1 += 1;
        }
    }

    /// Why the packet with this IP packet's transport segment was dropped,
    /// if it was.
    #[must_use]
    pub fn reason(&self, packet: &[u8]) -> Option<DropReason> {
        self.entries.get(&segment_fingerprint(packet)?).map(|e| e.0)
    }

    /// Log a drop by fingerprint (tests).
    #[cfg(test)]
    pub(crate) fn insert_fingerprint(&mut self, fp: u64, reason: DropReason) {
        self.entries.entry(fp).or_insert((reason, 0)).1 += 1;
    }

    /// Why the packet with fingerprint `fp` ([`segment_fingerprint`]) was
    /// dropped, if it was.
    #[must_use]
    pub fn reason_of(&self, fp: u64) -> Option<DropReason> {
        self.entries.get(&fp).map(|e| e.0)
    }

    /// Packets logged.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.values().map(|e| e.1 as usize).sum()
    }

    /// Nothing logged.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A fingerprint of an IPv4 or IPv6 packet's transport segment and
/// addresses (SipHash-1-3 with fixed keys; stable across processes). The
/// TCP or UDP checksum is left out: a capture on the sending host's veth
/// sees it before checksum offload completes it.
#[must_use]
pub fn segment_fingerprint(packet: &[u8]) -> Option<u64> {
    use std::hash::Hasher;
    let (addrs, proto, payload) = match packet.first()? >> 4 {
        4 => {
            let ihl = usize::from(packet.first()? & 0x0f) * 4;
            (packet.get(12..20)?, *packet.get(9)?, packet.get(ihl..)?)
        }
        6 => (packet.get(8..40)?, *packet.get(6)?, packet.get(40..)?),
        _ => return None,
    };
    let checksum_at = match proto {
        6 => Some(16),
        17 => Some(6),
        _ => None,
    };
    let mut h =
        siphasher::sip::SipHasher13::new_with_keys(0x486f_6c6c_7977_6f6f, 0x6420_6472_6f70_6c6f);
    h.write(addrs);
    match checksum_at.filter(|&c| payload.len() >= c + 2) {
        Some(c) => {
            h.write(&payload[..c]);
            h.write(&payload[c + 2..]);
        }
        None => h.write(payload),
    }
    Some(h.finish())
}

/// Routing table used for packets arriving from a (b→a uses the next one).
pub const TABLE_A_TO_B: u32 = 101;
/// Priority of the emulator's `ip rule`s (before the main table's 32766).
const RULE_PRIORITY: &str = "1001";
/// TUN names in the emulator namespace.
const TUN_NAMES: [&str; 2] = ["tun-ab", "tun-ba"];
/// TUN MTU: large, so the TUN never fragments or refuses what the veths
/// deliver; the emulated MTU is [`LinkConfig::mtu`].
const TUN_MTU: u32 = 65_535;

/// A running emulator. [`Netem::stop`] (or dropping it) stops the thread,
/// removes the policy rules and deletes the TUN devices.
pub struct Netem {
    ns_name: String,
    iifs: [String; 2],
    stop: Arc<AtomicBool>,
    wake: UnixStream,
    thread: Option<JoinHandle<io::Result<()>>>,
    stats: Arc<Mutex<NetemStats>>,
    drops: Arc<Mutex<[DropLog; 2]>>,
    tuns: Vec<TunDevice>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Netem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netem")
            .field("ns", &self.ns_name)
            .field("iifs", &self.iifs)
            .finish_non_exhaustive()
    }
}

impl Netem {
    /// Start emulating in namespace `ns` (which must have forwarding on):
    /// packets arriving on interface `iif_from_a` take the a→b path, those
    /// arriving on `iif_from_b` the b→a path. Replaces rules left by an
    /// earlier emulator on the same interfaces.
    pub fn start(
        ns: &NetNs,
        iif_from_a: &str,
        iif_from_b: &str,
        config: NetemConfig,
        hook: Option<Box<dyn PacketHook>>,
    ) -> Result<Netem> {
        let models = config.models()?;
        let ns_name = ns
            .name()
            .ok_or_else(|| LabError::Config("the emulator needs a named namespace".into()))?
            .to_owned();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| LabError::io("build a tokio runtime for the TUN devices", e))?;
        let (wake, wake_rx) =
            UnixStream::pair().map_err(|e| LabError::io("create the wake socket pair", e))?;
        wake_rx
            .set_nonblocking(true)
            .map_err(|e| LabError::io("make the wake socket non-blocking", e))?;
        let mut netem = Netem {
            ns_name,
            iifs: [iif_from_a.to_owned(), iif_from_b.to_owned()],
            stop: Arc::new(AtomicBool::new(false)),
            wake,
            thread: None,
            stats: Arc::new(Mutex::new(NetemStats::default())),
            drops: Arc::default(),
            tuns: Vec::new(),
            runtime: None,
        };
        // From here on, dropping `netem` undoes whatever was done.
        netem.remove_rules(ns);
        {
            let _guard = runtime.enter();
            for name in TUN_NAMES {
                let tun = TunDevice::create(
                    ns,
                    &TunConfig {
                        name: name.to_owned(),
                        mtu: TUN_MTU,
                        addrs: Vec::new(),
                        // Raw descriptor I/O: no virtio_net_hdr frames.
                        offload: false,
                    },
                )?;
                netem.tuns.push(tun);
            }
        }
        netem.runtime = Some(runtime);
        for (i, name) in TUN_NAMES.iter().enumerate() {
            ns.set_sysctl(&format!("net.ipv4.conf.{name}.rp_filter"), "0")?;
            let table = (TABLE_A_TO_B + i as u32).to_string();
            for fam in ["-4", "-6"] {
                ns.ip(&[
                    fam, "route", "replace", "default", "dev", name, "table", &table,
                ])?;
                ns.ip(&[
                    fam,
                    "rule",
                    "add",
                    "iif",
                    &netem.iifs[i],
                    "lookup",
                    &table,
                    "priority",
                    RULE_PRIORITY,
                ])?;
            }
        }
        let files = netem
            .tuns
            .iter()
            .map(|t| {
                t.as_fd()
                    .try_clone_to_owned()
                    .map(File::from)
                    .map_err(|e| LabError::io(format!("duplicate TUN descriptor {}", t.name()), e))
            })
            .collect::<Result<Vec<File>>>()?;
        let [f0, f1]: [File; 2] = files
            .try_into()
            .map_err(|_| LabError::Config("expected two TUN devices".into()))?;
        let worker = Worker {
            tuns: [f0, f1],
            wake: wake_rx,
            stop: netem.stop.clone(),
            models,
            hook,
            stats: netem.stats.clone(),
            drops: netem.drops.clone(),
            max_in_flight: config.max_in_flight,
        };
        let thread = std::thread::Builder::new()
            .name(format!("netem-{}", netem.ns_name))
            .spawn(move || worker.run())
            .map_err(|e| LabError::io("spawn the emulator thread", e))?;
        netem.thread = Some(thread);
        Ok(netem)
    }

    /// A snapshot of the counters (updated after every batch of packets).
    #[must_use]
    pub fn stats(&self) -> NetemStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the drop log of direction `dir` (see [`DropLog`]).
    #[must_use]
    pub fn drop_log(&self, dir: Direction) -> DropLog {
        self.drops.lock().unwrap_or_else(|p| p.into_inner())[dir.index()].clone()
    }

    /// Whether the emulator thread is still running (it stops only when
    /// asked or on an I/O error; see [`Netem::stop`]).
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stop the thread and tear everything down; returns the final counters
    /// or the I/O error that ended the thread early.
    pub fn stop(mut self) -> Result<NetemStats> {
        let result = self.shutdown();
        let stats = self.stats();
        result.map(|()| stats)
    }

    fn shutdown(&mut self) -> Result<()> {
        let mut result = Ok(());
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            // A full socket buffer still wakes the thread: ignore errors.
            let _ = (&self.wake).write(&[1]);
            result = match thread.join() {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(LabError::io("emulator thread", e)),
                Err(_) => Err(LabError::Config("the emulator thread panicked".into())),
            };
        }
        if let Ok(ns) = NetNs::open(&self.ns_name) {
            self.remove_rules(&ns);
        }
        // Close the devices while the runtime they are registered with is
        // alive, then shut it down without blocking (we may be inside
        // another runtime's async context).
        self.tuns.clear();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        result
    }

    /// Delete our `ip rule`s (any number of copies, v4 and v6). Routes in
    /// tables 101/102 disappear with the TUN devices.
    fn remove_rules(&self, ns: &NetNs) {
        for (i, iif) in self.iifs.iter().enumerate() {
            let table = (TABLE_A_TO_B + i as u32).to_string();
            for fam in ["-4", "-6"] {
                for _ in 0..16 {
                    if ns
                        .ip(&[fam, "rule", "del", "iif", iif, "lookup", &table])
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    }
}

impl Drop for Netem {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("hollywood-lab: netem: {e}");
        }
    }
}

/// A packet accepted by the link, waiting for its arrival time.
struct InFlight {
    at_ns: u64,
    seq: u64,
    packet: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ns, self.seq) == (other.at_ns, other.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    /// Reversed: `BinaryHeap` is a max-heap, we want the earliest first
    /// (ties in offer order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at_ns, other.seq).cmp(&(self.at_ns, self.seq))
    }
}

/// SCHED_FIFO priority of the emulator thread (low among RT priorities:
/// above every normal process, below kernel threads that use RT).
const REALTIME_PRIORITY: i32 = 10;
/// Largest packet read from a TUN.
const READ_BUF: usize = 65_536;
/// Packets read from one TUN before looking at the other and the clock.
const READ_BATCH: usize = 64;

/// The emulator thread's state.
struct Worker {
    tuns: [File; 2],
    wake: UnixStream,
    stop: Arc<AtomicBool>,
    models: [LinkModel; 2],
    hook: Option<Box<dyn PacketHook>>,
    stats: Arc<Mutex<NetemStats>>,
    drops: Arc<Mutex<[DropLog; 2]>>,
    max_in_flight: usize,
}

impl Worker {
    fn run(mut self) -> io::Result<()> {
        sys::set_timer_slack_ns(1)?;
        // Best effort: without CAP_SYS_NICE the thread keeps normal priority.
        let _ = sys::set_realtime(REALTIME_PRIORITY);
        // Best effort: one CPU, so the emulator cannot reorder the packets
        // it writes. A write to a TUN device queues the packet on the
        // backlog of the CPU the writer runs on; after a migration, the new
        // CPU's backlog can be processed before the old one's (measured
        // under load: up to 144 of 1382 segments of one transfer reordered
        // at the receiving host).
        let _ = sys::pin_to_current_cpu();
        let epoch = std::time::Instant::now();
        let now_ns = || epoch.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut lines: [BinaryHeap<InFlight>; 2] = [BinaryHeap::new(), BinaryHeap::new()];
        let mut stats = NetemStats::default();
        let mut late_sum = [0u128; 2];
        let mut seq = 0u64;
        let mut buf = vec![0u8; READ_BUF];
        let mut hooked = Vec::new();
        let mut wake_buf = [0u8; 64];
        while !self.stop.load(Ordering::SeqCst) {
            // Deliver everything due.
            let now = now_ns();
            for d in Direction::BOTH {
                let i = d.index();
                while lines[i].peek().is_some_and(|p| p.at_ns <= now) {
                    let Some(p) = lines[i].pop() else { break };
                    let s = stats.dir_mut(d);
                    match (&self.tuns[i]).write(&p.packet) {
                        Ok(n) if n == p.packet.len() => {
                            s.packets_out += 1;
                            s.bytes_out += n as u64;
                            let late = now_ns().saturating_sub(p.at_ns);
                            late_sum[i] += u128::from(late);
                            s.max_late_ns = s.max_late_ns.max(late);
                            s.mean_late_ns = (late_sum[i] / u128::from(s.packets_out)) as u64;
                        }
                        Ok(_) | Err(_) => s.write_errors += 1,
                    }
                }
            }
            *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = stats;

            // Sleep until the next arrival or a packet or a wake-up.
            let next = lines.iter().filter_map(|l| l.peek().map(|p| p.at_ns)).min();
            let timeout = next.map(|t| Duration::from_nanos(t.saturating_sub(now_ns())));
            let mut fds = [
                sys::pollfd(self.tuns[0].as_raw_fd()),
                sys::pollfd(self.tuns[1].as_raw_fd()),
                sys::pollfd(self.wake.as_raw_fd()),
            ];
            sys::poll(&mut fds, timeout)?;
            if sys::readable(&fds[2]) {
                while matches!((&self.wake).read(&mut wake_buf), Ok(n) if n > 0) {}
                continue;
            }
            for d in Direction::BOTH {
                let i = d.index();
                if !sys::readable(&fds[i]) {
                    continue;
                }
                for _ in 0..READ_BATCH {
                    let n = match (&self.tuns[i]).read(&mut buf) {
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    let now = now_ns();
                    let s = stats.dir_mut(d);
                    s.packets_in += 1;
                    s.bytes_in += n as u64;
                    let packet = buf[..n].to_vec();
                    hooked.clear();
                    match self.hook.as_mut() {
                        Some(h) => {
                            h.on_packet(now, d, packet, &mut hooked);
                            let back = d.reverse().index();
                            for p in h.take_reverse() {
                                seq += 1;
                                lines[back].push(InFlight {
                                    at_ns: now,
                                    seq,
                                    packet: p,
                                });
                            }
                        }
                        None => hooked.push(packet),
                    }
                    for packet in hooked.drain(..) {
                        let s = stats.dir_mut(d);
                        s.packets_hooked += 1;
                        let model = &mut self.models[i];
                        let t = hollywood_sim::Instant::from_nanos(now);
                        let copies = if model.roll_duplicate() {
                            s.duplicated += 1;
                            2
                        } else {
                            1
                        };
                        let mut packet = Some(packet);
                        for c in 0..copies {
                            let p = if c + 1 == copies {
                                packet.take().unwrap_or_default()
                            } else {
                                packet.clone().unwrap_or_default()
                            };
                            match model.offer(t, p.len(), Duration::ZERO) {
                                Ok(at) => {
                                    if lines[i].len() >= self.max_in_flight {
                                        s.dropped_delay_line += 1;
                                        continue;
                                    }
                                    seq += 1;
                                    lines[i].push(InFlight {
                                        at_ns: at.as_nanos(),
                                        seq,
                                        packet: p,
                                    });
                                    s.max_in_flight = s.max_in_flight.max(lines[i].len() as u64);
                                }
                                Err(why) => {
                                    match why {
                                        DropReason::QueueFull => s.dropped_queue += 1,
                                        DropReason::Loss => s.dropped_loss += 1,
                                        DropReason::Mtu => s.dropped_mtu += 1,
                                        DropReason::Rule => {}
                                    }
                                    self.drops.lock().unwrap_or_else(|p| p.into_inner())[i]
                                        .record(&p, why);
                                }
                            }
                        }
                        s.max_backlog_bytes = model.max_backlog() as u64;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_line_orders_by_time_then_offer_order() {
        let mut h = BinaryHeap::new();
        for (at, seq) in [(30, 1), (10, 2), (10, 3), (20, 4)] {
            h.push(InFlight {
                at_ns: at,
                seq,
                packet: Vec::new(),
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| h.pop().map(|p| p.seq)).collect();
        assert_eq!(order, vec![2, 3, 4, 1]);
    }

    #[test]
    fn bad_configs_are_rejected_before_anything_is_created() {
        let mut c = NetemConfig::new(LinkConfig::default(), LinkConfig::default(), 1);
        c.b_to_a.link.duplicate = 2.0;
        let e = c.models().unwrap_err();
        assert!(e.to_string().contains("BtoA"), "{e}");
        let mut c = NetemConfig::new(LinkConfig::default(), LinkConfig::default(), 1);
        c.a_to_b
            .schedule
            .push((Duration::from_secs(1), LinkChange::Duplicate(-0.5)));
        assert!(c.models().is_err());
        let mut c = NetemConfig::new(LinkConfig::default(), LinkConfig::default(), 1);
        c.max_in_flight = 0;
        assert!(c.models().is_err());
    }

    #[test]
    fn directions_draw_from_different_streams() {
        let lossy = LinkConfig::default().with_loss(hollywood_sim::LossModel::Bernoulli(0.5));
        let c = NetemConfig::new(lossy.clone(), lossy, 7);
        let [mut ab, mut ba] = c.models().unwrap();
        let t = hollywood_sim::Instant::ZERO;
        let a: Vec<bool> = (0..64)
            .map(|_| ab.offer(t, 100, Duration::ZERO).is_ok())
            .collect();
        let b: Vec<bool> = (0..64)
            .map(|_| ba.offer(t, 100, Duration::ZERO).is_ok())
            .collect();
        assert_ne!(a, b);
    }

    #[test]
    fn poll_times_out_with_sub_millisecond_precision() {
        sys::set_timer_slack_ns(1).unwrap();
        let (_a, b) = UnixStream::pair().unwrap();
        let mut fds = [sys::pollfd(b.as_raw_fd())];
        let start = std::time::Instant::now();
        sys::poll(&mut fds, Some(Duration::from_micros(300))).unwrap();
        let took = start.elapsed();
        assert!(!sys::readable(&fds[0]));
        assert!(took >= Duration::from_micros(300), "{took:?}");
        // Generous: a loaded 2-core machine may be late, but not by 1 ms.
        assert!(took < Duration::from_micros(1_300), "{took:?}");
    }
}
