//! [`TunHost`]: one `hollywood_tcp::Endpoint` attached to a TUN device and
//! driven by tokio.
//!
//! The host owns the three things the sans-IO engine may not touch:
//!
//! - **the clock**: engine time is nanoseconds since the host was created
//!   (a tokio `Instant`, so `tokio::time::pause` works in tests);
//! - **entropy**: [`TunHost::new`] seeds the engine (ISN secret, ephemeral
//!   ports) from `/dev/urandom`; [`TunHost::with_seed`] takes a fixed seed;
//! - **I/O**: packets read from the TUN device go to `handle_packet`,
//!   `poll_transmit` output is written back, and the engine's next timer is
//!   awaited with `sleep_until`. On a device with offloads
//!   ([`crate::TunConfig::offload`]) consecutive engine segments of a flow
//!   are written as one TCP super-packet that the kernel segments, and
//!   super-packets read are split back into ordinary segments, so the
//!   engine sees exactly what it would without offloads
//!   ([`crate::tun::offload`]).
//!
//! The application sees the engine between steps through a closure given
//! to [`TunHost::drive`]: it is called after every wake-up with the events
//! that happened, may issue commands (`connect`, `send`, `recv`, `close`...)
//! on the endpoint, and returns `ControlFlow::Break(result)` when done.
//! An async stream API can grow on top of this: a task owns the host, its
//! closure drains a command channel and completes per-connection wakers,
//! and [`HostWaker`] lets other tasks wake it when they queue a command.

use crate::error::{Error, Result};
use crate::tun::device::{split_frame_vouched, TunDevice, MAX_FRAME};
use crate::tun::offload::{
    whole_tcp_gso, Coalescer, Push, VnetHdr, MAX_SUPER_PACKET, VNET_HDR_LEN,
};
use crate::tun::shard::{tcp_tuple, HandedOver, Handoff, Shard};
use crate::tun::writer::{self, TxThread};
use hollywood_tcp::{Config, ConnHandle, Endpoint, EndpointEvent, Instant};
use hollywood_wire::pcap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fs::File;
use std::io::{BufWriter, Read};
use std::net::{IpAddr, SocketAddr};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// Most packets given to the engine in one wake-up before the
/// application closure runs again (engine output is written after each),
/// as NAPI's budget of 64 packets per poll. Counted in packets, not TUN
/// reads: with offloads one read is a super-packet of up to 44 segments,
/// and 64 of them (4 MB) read without the application running filled an
/// autotuned receive window (a few hundred KB on a short path) and stalled
/// the sender: `lab bench throughput` kernel → engine went from 0.2-0.5x
/// to 0.5-0.8x the kernel's rate when the budget counted packets.
const RX_BATCH: u64 = 64;

/// Flows whose outgoing segments are merged at once ([`TunHost`] with
/// offloads): the engine serves its connections round robin, so with
/// several busy flows consecutive segments alternate between flows, and
/// one open batch would be cut at every change (measured: 1.3–3 segments
/// per TUN write with 4 flows instead of 44). Beyond this many flows the
/// oldest batch is written early.
const OPEN_BATCHES: usize = 8;

/// A TCP connection's key: the engine's address, the peer's.
type FlowKey = (SocketAddr, SocketAddr);

/// Counters kept by the host (the engine keeps its own in `Endpoint::stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Packets read from the TUN device and given to the engine.
    pub packets_in: u64,
    /// Packets taken from the engine and written to the TUN device.
    pub packets_out: u64,
    /// Bytes read from the TUN device and given to the engine.
    pub bytes_in: u64,
    /// Bytes written to the TUN device.
    pub bytes_out: u64,
    /// Incoming packets dropped by the loss injector.
    pub injected_drops_in: u64,
    /// Outgoing packets dropped by the loss injector.
    pub injected_drops_out: u64,
    /// Times the engine's timer fired (`handle_timeout` calls).
    pub timer_fires: u64,
    /// Frames written to the TUN device: one per packet without offloads;
    /// with offloads a frame may be a super-packet of several segments.
    pub frames_out: u64,
    /// Frames read from the TUN device: with offloads a frame may be a
    /// super-packet that was split into several `packets_in`.
    pub frames_in: u64,
    /// Outgoing segments that went out merged into super-packets.
    pub segments_merged: u64,
    /// Received frames dropped because their offload request could not be
    /// carried out (see [`crate::tun::offload::OffloadError`]).
    pub offload_errors: u64,
    /// Super-packets the kernel refused (`EINVAL`) and that were written
    /// as their individual segments instead.
    pub offload_fallbacks: u64,
    /// Frames handed to the writer thread ([`TunHost::set_tx_thread`]);
    /// the rest of `frames_out` the host wrote itself.
    pub frames_handed_over: u64,
    /// Received super-packets given to the engine whole, as one segment
    /// ([`TunHost::set_rx_whole`]); each counts its segments in
    /// `packets_in`.
    pub frames_whole: u64,
    /// Packets read here whose connection another worker of a
    /// [`ShardedHost`](crate::tun::shard::ShardedHost) owns, handed over
    /// to it.
    pub forwarded_out: u64,
    /// Packets another worker read and handed over to this one, the
    /// owner of their connection, given to the engine.
    pub forwarded_in: u64,
    /// Packets for another worker dropped because its inbox was full.
    pub forward_drops: u64,
    /// Packets handed to the next worker by the test hook
    /// [`ShardedHost::misroute_every`](crate::tun::shard::ShardedHost::misroute_every).
    pub misrouted_for_test: u64,
}

/// Random packet loss injected by the host in both directions, from a
/// seeded RNG (so a run's drop pattern is reproducible for a given packet
/// order).
#[derive(Debug, Clone)]
struct LossInjector {
    rate: f64,
    rng: ChaCha8Rng,
}

impl LossInjector {
    fn drop_next(&mut self) -> bool {
        self.rng.gen::<f64>() < self.rate
    }
}

/// Wakes a [`TunHost::drive`] loop from another task, so its closure runs
/// again (e.g. because a command was queued for it). Cheap to clone.
#[derive(Debug, Clone)]
pub struct HostWaker(Arc<Notify>);

impl HostWaker {
    /// Make the host run its closure soon. Wake-ups while it is busy are
    /// coalesced into one.
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// What the application closure of [`TunHost::drive`] sees on each step.
#[derive(Debug)]
pub struct Step<'a> {
    now: Instant,
    endpoint: &'a mut Endpoint,
    events: &'a [EndpointEvent],
    wake_at: Option<Instant>,
}

impl Step<'_> {
    /// Engine time of this step.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The engine, for commands (`connect`, `listen`, `connection_mut`...).
    /// Output it produces is transmitted right after the closure returns.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        self.endpoint
    }

    /// Events since the previous step, in the order the engine produced them.
    pub fn events(&self) -> &[EndpointEvent] {
        self.events
    }

    /// Call the closure again no later than `after` from now, even if
    /// nothing happens on the network (e.g. to poll something outside).
    pub fn wake_after(&mut self, after: Duration) {
        let t = self.now + after;
        self.wake_at = Some(self.wake_at.map_or(t, |w| w.min(t)));
    }
}

/// A TCP host: a [`hollywood_tcp::Endpoint`] whose IP packets travel
/// through a [`TunDevice`].
#[derive(Debug)]
pub struct TunHost {
    tun: TunDevice,
    endpoint: Endpoint,
    /// The configuration given at creation (before per-family MSS clamping).
    config: Config,
    /// Engine time zero.
    epoch: tokio::time::Instant,
    /// Wall-clock nanoseconds at `epoch`, for capture timestamps.
    wall_epoch_ns: u64,
    loss: Option<LossInjector>,
    capture: Option<pcap::Writer<BufWriter<File>>>,
    stats: HostStats,
    notify: Arc<Notify>,
    /// Receive buffer: one packet, or one frame with offloads.
    buf: Vec<u8>,
    /// Segments of a split super-packet are built here.
    scratch: Vec<u8>,
    /// Merges outgoing segments into super-packets (offloads only).
    coalescer: Option<Coalescer>,
    /// The thread that writes frames, if on ([`TunHost::set_tx_thread`]).
    tx: Option<TxThread>,
    /// A written super-packet buffer, for the coalescer's next batch.
    spare_frame: Option<Vec<u8>>,
    /// Received super-packets go to the engine whole
    /// ([`TunHost::set_rx_whole`]).
    rx_whole: bool,
    /// Membership of a sharded host (one worker of several).
    shard: Option<Shard>,
    /// Open batches of outgoing segments, one per flow, oldest first, at
    /// most [`OPEN_BATCHES`] (offloads only). Each is written through the
    /// `coalescer` slot ([`TunHost::write_open_batch`]).
    batches: Vec<(Option<FlowKey>, Coalescer)>,
    /// Empty coalescers for new batches.
    spare_coalescers: Vec<Coalescer>,
}

/// `config` with its MSS lowered, if needed, so that a full segment fits
/// an `mtu`-byte IP packet: MTU minus 40 bytes of IPv4+TCP headers, or 60
/// for IPv6 (RFC 9293 §3.7.1, RFC 8200 §5).
fn clamp_mss(mut config: Config, mtu: u32) -> Config {
    // `Config::mss` is the IPv4 value (MTU - 40); the engine announces 20
    // bytes less on IPv6 itself (RFC 8200 §3: 40-byte header).
    let limit = u16::try_from(mtu.saturating_sub(40)).unwrap_or(u16::MAX);
    config.mss = config.mss.min(limit);
    host_memory_defaults(config)
}

/// Host mode's memory defaults (docs/ROBUSTNESS.md, "Memory per
/// connection"): buffer autotuning on and a memory limit for the engine's
/// connections of 3/32 of the machine's memory, Linux's default
/// `tcp_mem[2]` (`tcp_init_mem`: a sixteenth of the free buffer pages ×
/// 3/2), where the configuration leaves them to the layer (`None`).
pub(crate) fn host_memory_defaults(mut config: Config) -> Config {
    config.autotune.get_or_insert(true);
    if config.memory_limit.is_none() {
        config.memory_limit = Some(default_memory_limit());
    }
    config
}

/// 3/32 of `MemTotal` (/proc/meminfo), at least 64 MiB; 256 MiB when it
/// cannot be read.
pub fn default_memory_limit() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
    });
    match total_kib {
        Some(k) => (k.saturating_mul(1024) / 32 * 3).max(64 << 20),
        None => 256 << 20,
    }
}

/// Read 8 bytes of OS entropy.
fn os_seed() -> Result<u64> {
    let mut bytes = [0u8; 8];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("read seed from /dev/urandom", e))?;
    Ok(u64::from_le_bytes(bytes))
}

impl TunHost {
    /// A host for `tun` whose endpoint uses `config` as its default and is
    /// seeded from OS entropy (RFC 6528 §3: the ISN key should be random).
    /// Must be called within a tokio runtime.
    pub fn new(tun: TunDevice, config: Config) -> Result<TunHost> {
        Ok(TunHost::with_seed(tun, config, os_seed()?))
    }

    /// Like [`TunHost::new`] with a fixed engine seed (reproducible ISNs and
    /// ephemeral ports).
    pub fn with_seed(tun: TunDevice, config: Config, seed: u64) -> TunHost {
        let wall_epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let buf = if tun.offload() {
            vec![0u8; MAX_FRAME]
        } else {
            vec![0u8; (tun.mtu() as usize).max(1500) + 64]
        };
        let coalescer = tun.offload().then(Coalescer::default);
        let ep_config = clamp_mss(config.clone(), tun.mtu());
        let mut host = TunHost {
            tun,
            endpoint: Endpoint::new(ep_config, seed),
            config,
            epoch: tokio::time::Instant::now(),
            wall_epoch_ns,
            loss: None,
            capture: None,
            stats: HostStats::default(),
            notify: Arc::new(Notify::new()),
            buf,
            scratch: Vec::new(),
            coalescer,
            tx: None,
            spare_frame: None,
            rx_whole: true,
            shard: None,
            batches: Vec::new(),
            spare_coalescers: Vec::new(),
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if host.tun.offload() && cores > 1 {
            // Without a thread the host writes itself: slower, not wrong.
            let _ = host.set_tx_thread(true);
        }
        host
    }

    /// Write frames to the device from a thread of its own (on), or in
    /// the host's own task (off). On by default for a device with offloads
    /// on a machine with more than one CPU: the kernel's copy of a 64 KB
    /// super-packet in `write(2)` then runs beside the engine instead of
    /// in its turn (docs/LAB.md, "TUN writer thread"). Frames keep their
    /// order either way; a small packet with nothing queued is still
    /// written by the host itself, so latency-bound exchanges pay no
    /// thread hand-over. Turning it off waits for what is queued.
    pub fn set_tx_thread(&mut self, on: bool) -> Result<()> {
        if on == self.tx.is_some() {
            return Ok(());
        }
        if !on {
            self.tx = None;
            return Ok(());
        }
        let ctx = || format!("start the writer thread of {}", self.tun.name());
        let file = self.tun.try_clone_file().map_err(|e| Error::io(ctx(), e))?;
        let t = TxThread::spawn(file, self.tun.offload(), self.tun.name())
            .map_err(|e| Error::io(ctx(), e))?;
        self.tx = Some(t);
        Ok(())
    }

    /// Give received TCP super-packets to the engine whole, as one large
    /// segment, as Linux's GRO gives them to its TCP (on, the default), or
    /// cut into the segments they stand for (off). Only with offloads;
    /// while a capture or the loss injector is on, super-packets are cut
    /// regardless, so the capture shows and the injector drops the
    /// segments as they were on the wire (docs/LAB.md, "Receiving
    /// super-packets whole").
    pub fn set_rx_whole(&mut self, on: bool) {
        self.rx_whole = on;
    }

    /// Whether received super-packets go to the engine whole.
    pub fn rx_whole(&self) -> bool {
        self.rx_whole
    }

    /// Whether frames are written by a thread of their own.
    pub fn tx_thread(&self) -> bool {
        self.tx.is_some()
    }

    /// The configuration for connections with `peer`'s address family: the
    /// host's configuration with the MSS clamped to the TUN MTU minus 40
    /// (the IPv4 value; the engine subtracts 20 more on IPv6).
    pub fn config_for(&self, peer: IpAddr) -> Config {
        let _ = peer;
        clamp_mss(self.config.clone(), self.tun.mtu())
    }

    /// Open a connection from `local` (port 0 = ephemeral) to `remote` with
    /// [`TunHost::config_for`]`(remote)`. The SYN goes out on the next
    /// [`TunHost::drive`] step.
    pub fn connect(&mut self, local: SocketAddr, remote: SocketAddr) -> Result<ConnHandle> {
        let now = self.now();
        let config = self.config_for(remote.ip());
        Ok(self.endpoint.connect_with(now, local, remote, config)?)
    }

    /// Listen on `local` with [`TunHost::config_for`]`(local)`.
    pub fn listen(&mut self, local: SocketAddr) -> Result<()> {
        let config = self.config_for(local.ip());
        Ok(self.endpoint.listen_with(local, config)?)
    }

    /// Drop each packet, in either direction, with probability `rate`
    /// (0.0 turns injection off), using an RNG seeded with `seed`.
    /// For experiments and tests: the engine sees real loss.
    pub fn set_loss(&mut self, rate: f64, seed: u64) {
        self.loss = (rate > 0.0).then(|| LossInjector {
            rate: rate.min(1.0),
            rng: ChaCha8Rng::seed_from_u64(seed),
        });
    }

    /// Record every packet the engine receives or sends (after loss
    /// injection) to a pcap file at `path` (link type RAW, wall-clock
    /// timestamps). Replaces an earlier capture.
    pub fn capture_to(&mut self, path: &Path) -> Result<()> {
        let ctx = || format!("create pcap capture {}", path.display());
        let file = File::create(path).map_err(|e| Error::io(ctx(), e))?;
        self.capture =
            Some(pcap::Writer::new(BufWriter::new(file)).map_err(|e| Error::io(ctx(), e))?);
        Ok(())
    }

    /// Flush the capture file, if any.
    pub fn flush_capture(&mut self) -> Result<()> {
        match &mut self.capture {
            Some(w) => w.flush().map_err(|e| Error::io("flush pcap capture", e)),
            None => Ok(()),
        }
    }

    /// A handle that makes [`TunHost::drive`] run its closure again.
    pub fn waker(&self) -> HostWaker {
        HostWaker(self.notify.clone())
    }

    /// Current engine time.
    pub fn now(&self) -> Instant {
        self.to_engine_time(tokio::time::Instant::now())
    }

    /// Map a tokio instant to engine time (saturating at the epoch).
    pub fn to_engine_time(&self, t: tokio::time::Instant) -> Instant {
        let d = t.saturating_duration_since(self.epoch);
        Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Map engine time to a tokio instant.
    pub fn to_tokio_time(&self, t: Instant) -> tokio::time::Instant {
        self.epoch + t.since_epoch()
    }

    /// The engine.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The engine, mutably (commands issued here are transmitted on the
    /// next [`TunHost::drive`] step).
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// The TUN device.
    pub fn tun(&self) -> &TunDevice {
        &self.tun
    }

    /// The host's packet counters.
    pub fn stats(&self) -> HostStats {
        let mut s = self.stats;
        if let Some(t) = &self.tx {
            s.offload_fallbacks += t.fallbacks();
        }
        s
    }

    fn capture(&mut self, now: Instant, packet: &[u8]) -> Result<()> {
        if let Some(w) = &mut self.capture {
            w.write_packet(self.wall_epoch_ns.saturating_add(now.as_nanos()), packet)
                .map_err(|e| Error::io("write pcap capture", e))?;
        }
        Ok(())
    }

    /// Wake through `notify` instead (a sharded host's worker).
    pub(crate) fn set_notify(&mut self, notify: Arc<Notify>) {
        self.notify = notify;
    }

    /// Set or clear the shard membership; returns the previous one.
    pub(crate) fn set_shard(&mut self, shard: Option<Shard>) -> Option<Shard> {
        std::mem::replace(&mut self.shard, shard)
    }

    /// Hand what was read into `buf` (`len` bytes: a packet, or a frame
    /// with offloads) to the engine.
    fn deliver(&mut self, now: Instant, len: usize) -> Result<()> {
        self.stats.frames_in += 1;
        let mut frame = std::mem::take(&mut self.buf);
        let result = if let Some(n) = self.whole(&frame[..len]) {
            let packet = &frame[VNET_HDR_LEN..len];
            // In a sharded host it may be another worker's (its owner
            // takes it whole too).
            if !(self.shard.is_some() && self.steer(packet, true, true)) {
                self.endpoint.handle_packet_vouched(now, packet);
                self.stats.frames_whole += 1;
                self.stats.packets_in += n as u64;
                self.stats.bytes_in += packet.len() as u64;
            }
            Ok(())
        } else if self.coalescer.is_some() {
            let mut scratch = std::mem::take(&mut self.scratch);
            let mut out = Ok(());
            // Checksums the kernel vouches for are neither computed nor
            // verified, unless a capture records the packets.
            let checksums = self.capture.is_some();
            let split = split_frame_vouched(&mut frame[..len], &mut scratch, checksums, |p, v| {
                if out.is_ok() {
                    out = self.deliver_packet(now, p, v);
                }
            });
            self.scratch = scratch;
            if split.is_err() {
                // Never hand the engine something we could not make sense
                // of: TCP recovers from the loss.
                self.stats.offload_errors += 1;
            }
            out
        } else {
            self.deliver_packet(now, &frame[..len], false)
        };
        self.buf = frame;
        result
    }

    /// The number of segments `frame` stands for if it goes to the engine
    /// whole ([`TunHost::set_rx_whole`], [`whole_tcp_gso`]).
    fn whole(&self, frame: &[u8]) -> Option<usize> {
        if !self.rx_whole
            || self.coalescer.is_none()
            || self.capture.is_some()
            || self.loss.is_some()
        {
            return None;
        }
        let hdr = VnetHdr::decode(frame)?;
        whole_tcp_gso(&hdr, &frame[VNET_HDR_LEN..])
    }

    /// Hand one ordinary packet read from the device to the engine, or,
    /// in a sharded host, to the worker that owns its connection.
    fn deliver_packet(&mut self, now: Instant, packet: &[u8], vouched: bool) -> Result<()> {
        if self.shard.is_some() && self.steer(packet, vouched, true) {
            return Ok(());
        }
        self.engine_input(now, packet, vouched)
    }

    /// In a sharded host: hand `packet` over to the worker that owns its
    /// 4-tuple if that is another one (or, with `may_misroute`, to the
    /// next worker when the test hook says so). Whether it was taken
    /// (handed over or dropped); `false`: this worker's engine handles
    /// it. The engine's own connections are recognised without a lock;
    /// the shared table is read only for the others.
    fn steer(&mut self, packet: &[u8], vouched: bool, may_misroute: bool) -> bool {
        let Some(shard) = &mut self.shard else {
            return false;
        };
        let tuple = match tcp_tuple(packet) {
            Some(t) => t,
            // IPv6 extension headers and the like: the full parser.
            None => match hollywood_wire::parse_tcp_ip_unverified(packet) {
                Ok(seg) => (seg.dst, seg.src),
                Err(_) => return false,
            },
        };
        if may_misroute && shard.misroute_due() {
            let next = (shard.index() + 1) % shard.count();
            let h = Handoff::Misrouted {
                packet: packet.to_vec(),
                vouched,
            };
            match shard.hand_over(next, h) {
                HandedOver::Sent => self.stats.misrouted_for_test += 1,
                HandedOver::Full => self.stats.forward_drops += 1,
                HandedOver::Gone => return false,
            }
            return true;
        }
        if self.endpoint.owns(tuple.0, tuple.1) {
            return false;
        }
        match shard.owner(tuple) {
            Some(w) if w != shard.index() => {
                let h = Handoff::Owned {
                    packet: packet.to_vec(),
                    vouched,
                };
                match shard.hand_over(w, h) {
                    HandedOver::Sent => self.stats.forwarded_out += 1,
                    HandedOver::Full => self.stats.forward_drops += 1,
                    // Its worker has ended: answered here (RST).
                    HandedOver::Gone => return false,
                }
                true
            }
            _ => false,
        }
    }

    /// Give the engine the packets other workers handed over (at most
    /// [`RX_BATCH`] per call; the host wakes again for the rest), each
    /// followed by writing the engine's output.
    async fn take_handoffs(&mut self, now: Instant) -> Result<()> {
        for _ in 0..RX_BATCH {
            let Some(h) = self.shard.as_ref().and_then(Shard::try_take) else {
                return Ok(());
            };
            match h {
                Handoff::Owned { packet, vouched } => {
                    self.stats.forwarded_in += 1;
                    self.engine_input(now, &packet, vouched)?;
                }
                Handoff::Misrouted { packet, vouched } => {
                    if !self.steer(&packet, vouched, false) {
                        self.engine_input(now, &packet, vouched)?;
                    }
                }
            }
            self.flush(now).await?;
        }
        self.notify.notify_one();
        Ok(())
    }

    /// Hand one ordinary packet to the engine (unless the injector drops
    /// it); `vouched`: the kernel vouches for its integrity, so the engine
    /// skips its checksum check ([`Endpoint::handle_packet_vouched`]).
    fn engine_input(&mut self, now: Instant, packet: &[u8], vouched: bool) -> Result<()> {
        if self.loss.as_mut().is_some_and(LossInjector::drop_next) {
            self.stats.injected_drops_in += 1;
            return Ok(());
        }
        self.capture(now, packet)?;
        if vouched {
            self.endpoint.handle_packet_vouched(now, packet);
        } else {
            self.endpoint.handle_packet(now, packet);
        }
        self.stats.packets_in += 1;
        self.stats.bytes_in += packet.len() as u64;
        Ok(())
    }

    /// Write everything the engine wants to send now. With offloads,
    /// consecutive segments of one flow go out as one super-packet that
    /// the kernel cuts back into the same segments (see
    /// [`crate::tun::offload::Coalescer`]); the capture records the engine's
    /// segments.
    async fn flush(&mut self, now: Instant) -> Result<()> {
        // New connections' 4-tuples are published before their first
        // segment goes out, so the replies find them.
        if let Some(s) = &mut self.shard {
            s.sync(&mut self.endpoint);
        }
        while let Some(packet) = self.endpoint.poll_transmit(now) {
            if self.loss.as_mut().is_some_and(LossInjector::drop_next) {
                self.stats.injected_drops_out += 1;
                self.endpoint.recycle(packet);
                continue;
            }
            self.capture(now, &packet)?;
            self.stats.packets_out += 1;
            self.stats.bytes_out += packet.len() as u64;
            if self.coalescer.is_none() {
                self.write_owned(packet).await?;
                continue;
            }
            self.push_batched(&packet).await?;
            // The coalescer copied it: the engine may reuse it.
            self.endpoint.recycle(packet);
        }
        // Every flow's batch, oldest first.
        for i in 0..self.batches.len() {
            self.write_open_batch(i).await?;
        }
        for (_, c) in self.batches.drain(..) {
            if self.spare_coalescers.len() < OPEN_BATCHES {
                self.spare_coalescers.push(c);
            }
        }
        Ok(())
    }

    /// Add an outgoing segment to its flow's open batch (writing that
    /// batch first if the segment does not continue it), opening one if
    /// needed (writing the oldest if [`OPEN_BATCHES`] are open). Segments
    /// of one flow keep their order; flows may overtake each other.
    async fn push_batched(&mut self, packet: &[u8]) -> Result<()> {
        let key = tcp_tuple(packet);
        let found = key.and_then(|k| self.batches.iter().position(|(b, _)| *b == Some(k)));
        let i = match found {
            Some(i) => i,
            None => {
                if self.batches.len() >= OPEN_BATCHES {
                    self.write_open_batch(0).await?;
                    let (_, c) = self.batches.remove(0);
                    self.spare_coalescers.push(c);
                }
                let c = self.spare_coalescers.pop().unwrap_or_default();
                self.batches.push((key, c));
                self.batches.len() - 1
            }
        };
        if self.batches[i].1.push(packet) == Push::Full {
            self.write_open_batch(i).await?;
            let pushed = self.batches[i].1.push(packet);
            debug_assert_eq!(pushed, Push::Added);
        }
        Ok(())
    }

    /// Write open batch `i` (and leave it empty) through the `coalescer`
    /// slot that [`TunHost::write_batch`] writes.
    async fn write_open_batch(&mut self, i: usize) -> Result<()> {
        let Some(slot) = self.coalescer.as_mut() else {
            return Ok(());
        };
        std::mem::swap(slot, &mut self.batches[i].1);
        let written = self.write_batch().await;
        if let Some(slot) = self.coalescer.as_mut() {
            std::mem::swap(slot, &mut self.batches[i].1);
        }
        written
    }

    /// Write `frame` (a packet, or a frame with offloads): by the writer
    /// thread if it is on and the frame is large or others wait for it
    /// (order is kept), else here. Its buffer is reused.
    async fn write_owned(&mut self, frame: Vec<u8>) -> Result<()> {
        if let Some(t) = &self.tx {
            if frame.len() > writer::INLINE_MAX || t.queued() > 0 {
                t.send(frame)
                    .map_err(|e| Error::io(format!("write to {}", self.tun.name()), e))?;
                self.stats.frames_out += 1;
                self.stats.frames_handed_over += 1;
                if let Some(b) = t.reuse() {
                    self.give_back(b);
                }
                return Ok(());
            }
            t.check()
                .map_err(|e| Error::io(format!("write to {}", self.tun.name()), e))?;
        }
        write_frame(&self.tun, &frame).await?;
        self.stats.frames_out += 1;
        self.give_back(frame);
        Ok(())
    }

    /// Keep a written buffer: a super-packet's for the coalescer, a
    /// packet's for the engine.
    fn give_back(&mut self, buf: Vec<u8>) {
        if buf.capacity() >= VNET_HDR_LEN + MAX_SUPER_PACKET {
            if self.spare_frame.is_none() {
                self.spare_frame = Some(buf);
            }
        } else {
            self.endpoint.recycle(buf);
        }
    }

    /// Write the coalescer's open batch, if any. Should the kernel refuse
    /// a super-packet (`EINVAL`), its segments are written one by one
    /// without offload instead, and counted in
    /// [`HostStats::offload_fallbacks`].
    async fn write_batch(&mut self) -> Result<()> {
        let Some(c) = &mut self.coalescer else {
            return Ok(());
        };
        let before = c.merged_segments();
        if self.tx.is_some() {
            if c.is_empty() {
                return Ok(());
            }
            let spare = self
                .spare_frame
                .take()
                .or_else(|| self.tx.as_ref().and_then(TxThread::reuse))
                .unwrap_or_default();
            let frame = c.take_frame(spare).expect("a batch is open");
            self.stats.segments_merged += c.merged_segments() - before;
            return self.write_owned(frame).await;
        }
        if let Some(frame) = c.frame() {
            match self.tun.send_frame(frame).await {
                Ok(()) => self.stats.frames_out += 1,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput && frame[1] != 0 => {
                    self.stats.offload_fallbacks += 1;
                    let segments =
                        writer::split_refused(frame, &mut self.scratch).map_err(|e| {
                            Error::io(
                                format!("split a refused super-packet for {}", self.tun.name()),
                                e,
                            )
                        })?;
                    for f in &segments {
                        write_frame(&self.tun, f).await?;
                        self.stats.frames_out += 1;
                    }
                }
                Err(e) => {
                    return Err(Error::io(
                        format!("write {}-byte frame to {}", frame.len(), self.tun.name()),
                        e,
                    ))
                }
            }
        }
        self.stats.segments_merged += c.merged_segments() - before;
        c.clear();
        Ok(())
    }

    /// Run the host until `app` returns `ControlFlow::Break(r)`; returns `r`.
    ///
    /// Each step: expired engine timers fire (`handle_timeout`), then `app`
    /// runs with the events since the last step, then all engine output is
    /// written to the TUN device; the host then sleeps until a packet
    /// arrives, the engine's next timer ([`Endpoint::poll_timeout`]), a
    /// [`Step::wake_after`] deadline or a [`HostWaker`] wake-up. Up to 64
    /// queued packets are read per wake-up, each followed by writing the
    /// engine's output, so ACK timing is the engine's own.
    ///
    /// Bound the run with `tokio::time::timeout`. Cancelling it between
    /// steps loses nothing; cancelling it while it writes may lose the
    /// packet being written, which TCP recovers like any loss.
    pub async fn drive<R, F>(&mut self, mut app: F) -> Result<R>
    where
        F: FnMut(&mut Step<'_>) -> ControlFlow<R>,
    {
        let mut events: Vec<EndpointEvent> = Vec::new();
        loop {
            let now = self.now();
            if self.shard.is_some() {
                self.take_handoffs(now).await?;
            }
            if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint.handle_timeout(now);
                self.stats.timer_fires += 1;
            }
            // Transmit what the input produced before the application runs,
            // so ACKs are not delayed by application work.
            self.flush(now).await?;
            while let Some(e) = self.endpoint.poll_event() {
                events.push(e);
            }
            let mut step = Step {
                now,
                endpoint: &mut self.endpoint,
                events: &events,
                wake_at: None,
            };
            let flow = app(&mut step);
            let wake_at = step.wake_at;
            events.clear();
            self.flush(now).await?;
            if let ControlFlow::Break(r) = flow {
                self.flush_capture()?;
                return Ok(r);
            }
            // Commands may have produced events (e.g. `abort`): run the
            // application again before sleeping.
            while let Some(e) = self.endpoint.poll_event() {
                events.push(e);
            }
            if !events.is_empty() {
                continue;
            }
            let deadline = match (self.endpoint.poll_timeout(), wake_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|t| self.to_tokio_time(t));
            let received = {
                let sleep = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    r = self.tun.recv_frame(&mut self.buf) => Some(r),
                    () = sleep => None,
                    () = self.notify.notified() => None,
                }
            };
            if let Some(r) = received {
                let len = r.map_err(|e| Error::io(format!("read from {}", self.tun.name()), e))?;
                let taken = |s: &HostStats| {
                    s.packets_in
                        + s.injected_drops_in
                        + s.offload_errors
                        + s.forwarded_out
                        + s.forward_drops
                        + s.misrouted_for_test
                };
                let first = taken(&self.stats);
                let now = self.now();
                self.deliver(now, len)?;
                // Transmit after every packet: ACK decisions (immediate
                // duplicate ACKs, ACK every second segment) are the
                // engine's, and batching input here would coalesce them.
                self.flush(now).await?;
                for _ in 1..RX_BATCH {
                    if taken(&self.stats) - first >= RX_BATCH {
                        break;
                    }
                    match self.tun.try_recv_frame(&mut self.buf) {
                        Ok(len) => {
                            let now = self.now();
                            self.deliver(now, len)?;
                            self.flush(now).await?;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            return Err(Error::io(format!("read from {}", self.tun.name()), e))
                        }
                    }
                }
            }
        }
    }
}

/// Write one packet (or, with offloads, one frame) to `tun`.
async fn write_frame(tun: &TunDevice, frame: &[u8]) -> Result<()> {
    tun.send_frame(frame).await.map_err(|e| {
        Error::io(
            format!("write {}-byte packet to {}", frame.len(), tun.name()),
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_mode_defaults_autotuning_and_a_memory_limit_unless_configured() {
        let c = clamp_mss(Config::default(), 1500);
        assert_eq!(c.autotune, Some(true));
        assert!(c.memory_limit.is_some_and(|l| l >= 64 << 20));
        let own = Config {
            autotune: Some(false),
            memory_limit: Some(1 << 20),
            ..Config::default()
        };
        let c = clamp_mss(own, 1500);
        assert_eq!((c.autotune, c.memory_limit), (Some(false), Some(1 << 20)));
    }

    #[test]
    fn loss_injector_rate_is_about_right_and_reproducible() {
        let run = |seed| {
            let mut l = LossInjector {
                rate: 0.01,
                rng: ChaCha8Rng::seed_from_u64(seed),
            };
            (0..100_000).map(|_| l.drop_next()).collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7), "same seed, same drops");
        assert_ne!(a, run(8), "different seed, different drops");
        let drops = a.iter().filter(|&&d| d).count();
        assert!(
            (800..1200).contains(&drops),
            "1% of 100000 should be ~1000, got {drops}"
        );
    }

    #[test]
    fn mss_is_clamped_to_the_mtu() {
        let c = Config {
            mss: 1460,
            ..Config::default()
        };
        // The IPv4 value; the engine itself announces 20 bytes less on IPv6.
        assert_eq!(clamp_mss(c.clone(), 1500).mss, 1460);
        assert_eq!(clamp_mss(c.clone(), 1280).mss, 1240);
        assert_eq!(clamp_mss(c, 9000).mss, 1460, "never raised");
    }

    #[test]
    fn os_seeds_differ() {
        assert_ne!(os_seed().unwrap(), os_seed().unwrap());
    }
}
