//! A host's TCP: listeners, connection demultiplexing by 4-tuple, RSTs for
//! unknown connections (RFC 9293 §3.10.7.1), and IP wrapping.
//!
//! Input is whole IP packets (v4 or v6); output is whole IP packets. All
//! iteration is over ordered maps, and ISNs and ephemeral ports come from
//! the seed, so the same inputs give the same outputs.
//!
//! Method families (call in this order each time the caller wakes):
//! `handle_packet` / `handle_timeout`; application commands through
//! [`Endpoint::connection_mut`]; then `poll_transmit` until `None`,
//! `poll_event` until `None`, and `poll_timeout`.
//!
//! A connection is removed automatically once its
//! [`Event::Closed`](crate::Event::Closed) has been returned by
//! [`Endpoint::poll_event`] (and any final RST sent) and the application
//! has read everything that arrived ([`Connection::has_unread`]; TCP
//! acknowledged those bytes, so they are never dropped behind the
//! application's back). Until then it stays reachable through
//! [`Endpoint::connection_mut`] in state CLOSED, no longer bound to its
//! 4-tuple; [`Connection::abort`] gives the unread data up.
//!
//! # SYN floods (RFC 4987)
//!
//! Each listener keeps at most [`Config::syn_backlog`] half-open
//! connections (SYN-RECEIVED, not yet accepted; default 256). Beyond that a
//! SYN is answered with a SYN cookie ([`Config::syn_cookies`], default on)
//! or dropped ([`EndpointStats::syns_dropped`]), so spoofed SYNs cannot grow
//! memory. A cookie is the ISN of a stateless SYN-ACK (RFC 4987 §3.6):
//!
//! ```text
//! bit 31..27  t mod 32    t = now / 64 s
//! bit 26..24  m           MSS index: 536 1024 1220 1300 1360 1440 1460 8960
//! bit 23..0   MAC         SipHash-2-4 (the RFC 6528 ISN secret) of the
//!                         4-tuple, the client's ISN, t and m
//! ```
//!
//! The client's ACK (SEG.ACK − 1 = cookie, SEG.SEQ − 1 = its ISN) is
//! accepted when the MAC matches for `t` now or one period before (a
//! cookie lives 64 to 128 s) and the listener overflowed within the last
//! 128 s; the connection is then rebuilt from it. The SYN-ACK offers only
//! what can be rebuilt: the MSS (the client's, rounded down to the table)
//! and, if the client offered them, timestamps (RFC 7323; the echo of our
//! TSval also times the handshake for the first RTT sample). Window
//! scaling and SACK are not offered, so a cookie connection has a window
//! of at most 64 KiB and no SACK. Without timestamps the handshake cannot
//! be timed; the connection takes a conservative first RTT sample equal
//! to `Config::initial_rto` (1 s: RFC 6298's RTO before any sample), which
//! later samples average away; on paths under 1 s it errs long (timeouts
//! come late, not early, and the minimum RTT is left to real samples).

use crate::config::Config;
use crate::conn::{Connection, ConnectionStats, Event, State};
use crate::isn::IsnGenerator;
use crate::send_buf::StoragePool;
use crate::time::Instant;
use crate::Error;
use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// First ephemeral port (Linux `ip_local_port_range` default).
pub const EPHEMERAL_FIRST: u16 = 32_768;
/// Last ephemeral port (Linux `ip_local_port_range` default).
pub const EPHEMERAL_LAST: u16 = 60_999;
/// Endpoint-generated packets (RSTs, SYN cookie SYN-ACKs) queued at most;
/// more are dropped.
pub(crate) const MAX_QUEUED_RSTS: usize = 1024;

/// Period of the SYN cookie time counter (RFC 4987 §3.6: 64 s).
const COOKIE_PERIOD: Duration = Duration::from_secs(64);

/// MSS values a SYN cookie can carry (index in 3 bits). The client's MSS is
/// rounded down to one of them (a missing MSS option means 536, RFC 9293
/// §3.7.1); 1220 is the IPv6 minimum-MTU MSS.
pub const SYN_COOKIE_MSS: [u16; 8] = [536, 1024, 1220, 1300, 1360, 1440, 1460, 8960];

/// Names a connection of one [`Endpoint`]. Handles are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle(pub u64);

/// Something the application should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointEvent {
    /// A passive open completed (the connection reached ESTABLISHED); a
    /// `Conn { event: Connected }` for it follows.
    Accepted {
        /// The new connection.
        handle: ConnHandle,
        /// The peer.
        remote: SocketAddr,
    },
    /// An event of one connection.
    Conn {
        /// The connection.
        handle: ConnHandle,
        /// What happened.
        event: Event,
    },
}

/// A 4-tuple that gained or lost its connection
/// ([`Endpoint::take_tuple_changes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TupleChange {
    /// The endpoint's address.
    pub local: SocketAddr,
    /// The peer's address.
    pub remote: SocketAddr,
    /// A connection now holds the tuple (`true`), or none does any more.
    pub owned: bool,
}

/// Endpoint counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Packets handed to `handle_packet` that parsed.
    pub packets_in: u64,
    /// Packets returned by `poll_transmit`.
    pub packets_out: u64,
    /// Packets dropped as malformed (bad length, checksum, not TCP, ...).
    pub malformed_dropped: u64,
    /// RSTs sent for segments without a connection (RFC 9293 §3.10.7.1/2).
    pub resets_sent: u64,
    /// RSTs not sent because the queue was full.
    pub resets_suppressed: u64,
    /// Segments for no connection and no listener.
    pub no_connection: u64,
    /// Connection requests (SYNs) taken by a listener.
    pub syns_received: u64,
    /// Passive opens that reached ESTABLISHED.
    pub connections_accepted: u64,
    /// Active opens.
    pub connections_initiated: u64,
    /// Connections removed after closing.
    pub connections_closed: u64,
    /// TIME-WAIT connections replaced by a new SYN (RFC 6191).
    pub time_wait_reused: u64,
    /// SYNs dropped because the listener's backlog was full (cookies off,
    /// or the queue for the cookie SYN-ACK was full).
    pub syns_dropped: u64,
    /// SYN-ACKs carrying a SYN cookie (the backlog was full).
    pub syn_cookies_sent: u64,
    /// Connections opened by a valid SYN cookie.
    pub syn_cookies_accepted: u64,
    /// ACKs to a listener whose cookie was invalid or expired while cookies
    /// were in use (answered with RST).
    pub syn_cookies_rejected: u64,
    /// SYNs dropped and SYN-cookie ACKs reset because the endpoint held
    /// `Config::max_connections`.
    pub conn_limit_dropped: u64,
    /// SYNs answered with RST, SYN-cookie ACKs reset and `connect`s
    /// refused because the endpoint's connections held
    /// `Config::memory_limit`.
    pub memory_limit_refused: u64,
    /// Times the endpoint entered memory pressure (three quarters of
    /// `Config::memory_limit`).
    pub memory_pressure_entered: u64,
    /// Bytes the connections held at the last count (with
    /// `Config::memory_limit` only; a gauge, not a counter).
    pub memory_used: u64,
}

/// How often the endpoint recounts its connections' memory at most
/// (`Config::memory_limit`); between counts, each new connection adds
/// its estimate.
const MEMORY_RECOUNT: Duration = Duration::from_millis(10);
/// Packet buffers [`Endpoint::recycle`] keeps at most.
const SPARE_PACKETS: usize = 64;

/// Largest buffer capacity [`Endpoint::recycle`] keeps (a jumbo segment's
/// buffer is let go rather than held).
const SPARE_MAX_CAPACITY: usize = 16 << 10;

/// Bookkeeping of one connection outside [`Connection::memory`]: the
/// endpoint's entry and its map and set nodes (an estimate).
pub(crate) const ENTRY_OVERHEAD: usize = 224;

#[derive(Debug)]
struct Entry {
    /// Boxed: B-tree nodes hold eleven entries and, filled in handle
    /// order, stay about half full, so an inline 2.7 KiB connection would
    /// cost twice its size.
    conn: Box<Connection>,
    /// Reported to the application (always for active opens; on
    /// ESTABLISHED for passive ones).
    announced: bool,
    /// `Closed` was returned by `poll_event`; remove once the RST is out
    /// and the application has read what arrived.
    closed_reported: bool,
    /// Closed and reported, but holding unread data: no longer in the
    /// 4-tuple map (the tuple is free for a new connection), removed once
    /// drained ([`Connection::has_unread`]) or aborted.
    detached: bool,
    /// A half-open connection counted in this listener's backlog (until it
    /// is accepted or removed).
    backlog_of: Option<SocketAddr>,
    /// The deadline this connection is filed under in `Endpoint::timers`.
    timer: Option<Instant>,
    /// In `Endpoint::stale`: the application may have changed its timer.
    stale: bool,
}

/// One listening address.
#[derive(Debug)]
struct Listener {
    /// Configuration of accepted connections (and the backlog settings),
    /// shared by them.
    config: std::sync::Arc<Config>,
    /// Half-open connections counted against `config.syn_backlog`.
    half_open: usize,
    /// Last time the backlog was full (cookies may be outstanding).
    overflowed_at: Option<Instant>,
}

/// A host's TCP over whole IP packets.
#[derive(Debug)]
pub struct Endpoint {
    config: Config,
    isn: IsnGenerator,
    ports: ChaCha8Rng,
    next_handle: u64,
    conns: BTreeMap<u64, Entry>,
    by_tuple: BTreeMap<(SocketAddr, SocketAddr), u64>,
    listeners: BTreeMap<SocketAddr, Listener>,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<EndpointEvent>,
    /// Connections that may have events.
    dirty: DirtySet,
    /// Connections by their next timer, `(deadline, handle)`: the earliest
    /// timer and the expired ones are found without visiting every
    /// connection (a host with 10 000 idle connections pays for the few
    /// that are busy, as Linux's timer wheel does).
    timers: BTreeSet<(Instant, u64)>,
    /// Connections handed to the application (`connection_mut`) since
    /// their entry in `timers` was last refreshed.
    stale: Vec<u64>,
    /// Connections that may have something to send: touched by input, a
    /// timer or the application since `poll_transmit` last found nothing.
    /// A connection nobody touched has nothing new to send (a pacer or
    /// delayed-ACK hold is a timer), so it is not visited.
    sendable: BTreeSet<u64>,
    /// With [`Endpoint::track_touched`]: connections that took input or a
    /// timer, or raised events, since [`Endpoint::take_touched`].
    touched: Option<BTreeSet<u64>>,
    /// With [`Endpoint::track_tuples`]: 4-tuples that gained or lost a
    /// connection since [`Endpoint::take_tuple_changes`], in order.
    tuple_log: Option<Vec<TupleChange>>,
    /// Ephemeral ports are those `p` with `(p - EPHEMERAL_FIRST) % .1 ==
    /// .0` ([`Endpoint::set_ephemeral_share`]).
    ephemeral_share: (u16, u16),
    /// Round-robin cursor for `poll_transmit`.
    rr: u64,
    scratch: Vec<u8>,
    /// Packet buffers handed back by the driver ([`Endpoint::recycle`]),
    /// at most `SPARE_PACKETS`: the next data packets are built in them.
    spare: Vec<Vec<u8>>,
    /// Emptied send storages, for the next connection that writes.
    storage: StoragePool,
    stats: EndpointStats,
    /// Counters of the last [`FINAL_STATS_KEPT`] announced connections
    /// removed, oldest first ([`Endpoint::final_stats`]).
    final_stats: VecDeque<(u64, ConnectionStats)>,
    /// Memory of all connections at the last count plus estimates of the
    /// connections added since (`Config::memory_limit`).
    memory_used: usize,
    /// When `memory_used` was last counted.
    memory_counted: Option<Instant>,
    /// Connections are under memory pressure.
    memory_pressure: bool,
}

/// Removed connections whose counters [`Endpoint::final_stats`] keeps.
pub const FINAL_STATS_KEPT: usize = 64;

impl Endpoint {
    /// An endpoint whose connections use `config` unless overridden.
    /// `seed` keys the ISN generator (RFC 6528) and the ephemeral port choice.
    pub fn new(config: Config, seed: u64) -> Endpoint {
        // With a memory limit, a sixteenth of it at most.
        let storage = StoragePool::new(config.memory_limit.map_or(StoragePool::MAX_BYTES, |l| {
            (l / 16).min(StoragePool::MAX_BYTES)
        }));
        Endpoint {
            config,
            isn: IsnGenerator::new(seed),
            ports: ChaCha8Rng::seed_from_u64(seed ^ 0x005e_ed0f_9057_5eed),
            next_handle: 0,
            conns: BTreeMap::new(),
            by_tuple: BTreeMap::new(),
            listeners: BTreeMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            dirty: DirtySet::default(),
            timers: BTreeSet::new(),
            stale: Vec::new(),
            sendable: BTreeSet::new(),
            touched: None,
            tuple_log: None,
            ephemeral_share: (0, 1),
            rr: 0,
            scratch: Vec::new(),
            spare: Vec::new(),
            storage,
            stats: EndpointStats::default(),
            final_stats: VecDeque::new(),
            memory_used: 0,
            memory_counted: None,
            memory_pressure: false,
        }
    }

    /// Bytes all connections hold now ([`Connection::memory`] plus the
    /// endpoint's bookkeeping), counted.
    pub fn memory_used(&self) -> usize {
        self.conns
            .values()
            .map(|e| e.conn.memory() + ENTRY_OVERHEAD)
            .sum::<usize>()
            + self.storage.bytes()
    }

    /// With `Config::memory_limit`: recount the memory if the last count
    /// is older than [`MEMORY_RECOUNT`] (or `force`), and put connections
    /// under pressure from three quarters of the limit on (or take them
    /// out below it).
    fn memory_check(&mut self, now: Instant, force: bool) {
        let Some(limit) = self.config.memory_limit else {
            return;
        };
        let fresh = self
            .memory_counted
            .is_some_and(|t| now.saturating_duration_since(t) < MEMORY_RECOUNT);
        if fresh && !force {
            return;
        }
        self.memory_used = self.memory_used();
        self.memory_counted = Some(now);
        self.stats.memory_used = self.memory_used as u64;
        self.update_pressure(limit);
    }

    /// Enter or leave memory pressure by the running count.
    fn update_pressure(&mut self, limit: usize) {
        let pressure = self.memory_used >= limit / 4 * 3;
        if pressure != self.memory_pressure {
            self.memory_pressure = pressure;
            if pressure {
                self.stats.memory_pressure_entered += 1;
            }
            // Under pressure emptied send storage is freed, not kept.
            self.storage.set_off(pressure);
            for (&h, e) in self.conns.iter_mut() {
                e.conn.set_memory_pressure(pressure);
                self.sendable.insert(h);
                if !e.stale {
                    e.stale = true;
                    self.stale.push(h);
                }
            }
        }
    }

    /// With `Config::memory_limit`: whether one more connection would
    /// pass the limit. If not, the connection is charged to the running
    /// count (several SYNs between two counts cannot all slip in).
    fn memory_refuses(&mut self, now: Instant) -> bool {
        let Some(limit) = self.config.memory_limit else {
            return false;
        };
        self.memory_check(now, false);
        let one = std::mem::size_of::<Connection>() + ENTRY_OVERHEAD;
        if self.memory_used.saturating_add(one) > limit {
            self.stats.memory_limit_refused += 1;
            return true;
        }
        self.memory_used += one;
        self.update_pressure(limit);
        false
    }

    /// Connections are under memory pressure (`Config::memory_limit`).
    pub fn memory_pressure(&self) -> bool {
        self.memory_pressure
    }

    /// The default connection configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// Accept connections on `local` (an unspecified IP listens on every
    /// address of that family) with the default configuration.
    pub fn listen(&mut self, local: SocketAddr) -> Result<(), Error> {
        let cfg = self.config.clone();
        self.listen_with(local, cfg)
    }

    /// Accept connections on `local`, giving them `config`.
    pub fn listen_with(&mut self, local: SocketAddr, config: Config) -> Result<(), Error> {
        if local.port() == 0 {
            return Err(Error::InvalidAddress);
        }
        if self.listeners.contains_key(&local) {
            return Err(Error::AddrInUse);
        }
        self.listeners.insert(
            local,
            Listener {
                config: std::sync::Arc::new(config),
                half_open: 0,
                overflowed_at: None,
            },
        );
        Ok(())
    }

    /// Stop listening on `local`; established connections are unaffected.
    pub fn unlisten(&mut self, local: SocketAddr) -> Result<(), Error> {
        self.listeners
            .remove(&local)
            .map(|_| ())
            .ok_or(Error::InvalidAddress)
    }

    /// Open a connection from `local` (port 0 = pick an ephemeral port) to
    /// `remote` with the default configuration.
    pub fn connect(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<ConnHandle, Error> {
        let cfg = self.config.clone();
        self.connect_with(now, local, remote, cfg)
    }

    /// Open a connection with its own configuration.
    pub fn connect_with(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        config: Config,
    ) -> Result<ConnHandle, Error> {
        if local.is_ipv4() != remote.is_ipv4()
            || remote.port() == 0
            || remote.ip().is_unspecified()
            || local.ip().is_unspecified()
        {
            return Err(Error::InvalidAddress);
        }
        let local = if local.port() == 0 {
            self.ephemeral(local, remote)?
        } else {
            local
        };
        if self.by_tuple.contains_key(&(local, remote)) {
            return Err(Error::AddrInUse);
        }
        if self.conns.len() >= self.config.max_connections || self.memory_refuses(now) {
            return Err(Error::TooManyConnections);
        }
        let iss = self.isn.isn(now, local, remote);
        let conn = Connection::connect(now, config, local, remote, iss);
        self.stats.connections_initiated += 1;
        Ok(self.insert(conn, false, None))
    }

    /// Choose ephemeral ports only among every `count`-th port of the
    /// range, starting at the `index`-th: endpoints that share the
    /// engine's addresses (one per TUN queue) given distinct `index`es
    /// never pick the same 4-tuple. `count` 0 counts as 1; `index` is
    /// taken modulo `count`.
    pub fn set_ephemeral_share(&mut self, index: u16, count: u16) {
        let count = count.max(1);
        self.ephemeral_share = (index % count, count);
    }

    /// Deterministic ephemeral port: a seeded random start, then the next
    /// free one (RFC 6056 §3.3.2-like).
    fn ephemeral(&mut self, local: SocketAddr, remote: SocketAddr) -> Result<SocketAddr, Error> {
        let span = (EPHEMERAL_LAST - EPHEMERAL_FIRST) as u32 + 1;
        let start = self.ports.gen_range(0..span);
        let (index, count) = self.ephemeral_share;
        for i in 0..span {
            let offset = ((start + i) % span) as u16;
            if offset % count != index {
                continue;
            }
            let port = EPHEMERAL_FIRST + offset;
            let mut cand = local;
            cand.set_port(port);
            let listening = self.listeners.keys().any(|l| l.port() == port);
            if !listening && !self.by_tuple.contains_key(&(cand, remote)) {
                return Ok(cand);
            }
        }
        Err(Error::AddrInUse)
    }

    fn insert(
        &mut self,
        conn: Connection,
        passive: bool,
        backlog_of: Option<SocketAddr>,
    ) -> ConnHandle {
        let h = self.next_handle;
        self.next_handle += 1;
        let mut conn = conn;
        if self.memory_pressure {
            conn.set_memory_pressure(true);
        }
        conn.set_storage_pool(self.storage.clone());
        self.by_tuple.insert((conn.local(), conn.remote()), h);
        if let Some(log) = &mut self.tuple_log {
            log.push(TupleChange {
                local: conn.local(),
                remote: conn.remote(),
                owned: true,
            });
        }
        if let Some(l) = backlog_of.and_then(|k| self.listeners.get_mut(&k)) {
            l.half_open += 1;
        }
        self.conns.insert(
            h,
            Entry {
                conn: Box::new(conn),
                announced: !passive,
                closed_reported: false,
                detached: false,
                backlog_of,
                timer: None,
                stale: false,
            },
        );
        self.touch(h);
        self.reindex(h);
        ConnHandle(h)
    }

    fn remove(&mut self, h: u64) {
        self.leave_backlog(h);
        if let Some(e) = self.conns.remove(&h) {
            let key = (e.conn.local(), e.conn.remote());
            if self.by_tuple.get(&key) == Some(&h) {
                self.by_tuple.remove(&key);
                self.log_tuple_gone(key);
            }
            self.dirty.remove(&h);
            if let Some(t) = e.timer {
                self.timers.remove(&(t, h));
            }
            self.sendable.remove(&h);
            if let Some(t) = &mut self.touched {
                t.remove(&h);
            }
            self.stats.connections_closed += 1;
            if e.announced {
                if self.final_stats.len() == FINAL_STATS_KEPT {
                    self.final_stats.pop_front();
                }
                self.final_stats.push_back((h, e.conn.stats().clone()));
            }
        }
    }

    /// The counters of connection `h` as they were when the endpoint
    /// removed it (once its `Closed` was reported: a reset, a timeout, an
    /// abort, the end of TIME-WAIT); the last [`FINAL_STATS_KEPT`] are
    /// kept. An application that reads `Event::Reset` finds the connection
    /// already gone, and may need what it did last, e.g. whether it had
    /// sent inconsistent retransmissions (thesis §4.5: a firewall resets
    /// such a connection; reconnect with them disabled).
    pub fn final_stats(&self, h: ConnHandle) -> Option<&ConnectionStats> {
        self.final_stats
            .iter()
            .rev()
            .find(|(id, _)| *id == h.0)
            .map(|(_, s)| s)
    }

    /// Connection `h` no longer counts as half-open (accepted or gone).
    fn leave_backlog(&mut self, h: u64) {
        let Some(key) = self.conns.get_mut(&h).and_then(|e| e.backlog_of.take()) else {
            return;
        };
        if let Some(l) = self.listeners.get_mut(&key) {
            l.half_open = l.half_open.saturating_sub(1);
        }
    }

    /// Half-open connections (SYN-RECEIVED, not yet accepted) counted
    /// against the backlog of the listener on `local`.
    pub fn half_open(&self, local: SocketAddr) -> Option<usize> {
        self.listeners.get(&local).map(|l| l.half_open)
    }

    /// A connection (announced ones only: passive opens appear once
    /// accepted).
    pub fn connection(&self, h: ConnHandle) -> Option<&Connection> {
        self.conns
            .get(&h.0)
            .filter(|e| e.announced)
            .map(|e| &*e.conn)
    }

    /// A connection, for application commands.
    pub fn connection_mut(&mut self, h: ConnHandle) -> Option<&mut Connection> {
        let e = self.conns.get_mut(&h.0).filter(|e| e.announced)?;
        self.dirty.insert(h.0);
        self.sendable.insert(h.0);
        if !e.stale {
            e.stale = true;
            self.stale.push(h.0);
        }
        Some(&mut e.conn)
    }

    /// Handles of all announced connections, in order.
    pub fn handles(&self) -> impl Iterator<Item = ConnHandle> + '_ {
        self.conns
            .iter()
            .filter(|(_, e)| e.announced)
            .map(|(&h, _)| ConnHandle(h))
    }

    /// The listening address that takes a destination, exact match first.
    fn listener(&self, dst: SocketAddr) -> Option<SocketAddr> {
        if self.listeners.contains_key(&dst) {
            return Some(dst);
        }
        let any: SocketAddr = if dst.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, dst.port()).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, dst.port()).into()
        };
        self.listeners.contains_key(&any).then_some(any)
    }

    /// Process one IP packet from the network.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.handle_packet_with(now, packet, true);
    }

    /// [`Endpoint::handle_packet`] for a packet whose TCP checksum need not
    /// be checked because the I/O layer vouches for it: a TUN frame the
    /// kernel marked as built locally (`NEEDS_CSUM`, a GSO super-packet and
    /// the segments cut from it) or as verified (`DATA_VALID`), as Linux
    /// skips verification of a `CHECKSUM_UNNECESSARY` or
    /// `CHECKSUM_PARTIAL` skb. Everything else is checked as usual.
    pub fn handle_packet_vouched(&mut self, now: Instant, packet: &[u8]) {
        self.handle_packet_with(now, packet, false);
    }

    fn handle_packet_with(&mut self, now: Instant, packet: &[u8], verify: bool) {
        let parsed = if verify {
            hollywood_wire::parse_tcp_ip(packet)
        } else {
            hollywood_wire::parse_tcp_ip_unverified(packet)
        };
        let seg = match parsed {
            Ok(s) => s,
            Err(_) => {
                self.stats.malformed_dropped += 1;
                return;
            }
        };
        self.stats.packets_in += 1;
        self.refresh_timers();
        self.memory_check(now, false);
        let (local, remote, tcp, payload) = (seg.dst, seg.src, seg.tcp, seg.payload);
        let f = tcp.flags;
        if let Some(&h) = self.by_tuple.get(&(local, remote)) {
            let reuse = f.syn()
                && !f.ack()
                && !f.rst()
                && self.listener(local).is_some()
                && self
                    .conns
                    .get(&h)
                    .is_some_and(|e| e.conn.time_wait_accepts(&tcp));
            if !reuse {
                if let Some(e) = self.conns.get_mut(&h) {
                    e.conn.handle_segment(now, &tcp, payload);
                    self.touch(h);
                    self.reindex(h);
                }
                return;
            }
            // RFC 6191 / RFC 9293 §3.10.7.4: a new incarnation replaces the
            // TIME-WAIT connection.
            self.stats.time_wait_reused += 1;
            if self.conns.get(&h).is_some_and(|e| e.announced) {
                self.events.push_back(EndpointEvent::Conn {
                    handle: ConnHandle(h),
                    event: Event::Closed,
                });
            }
            self.remove(h);
        }
        // RFC 9293 §3.10.7.1 / §3.10.7.2: an incoming RST is never answered.
        if f.rst() {
            self.stats.no_connection += 1;
            return;
        }
        if let Some(key) = self.listener(local) {
            // RFC 9293 §3.10.7.2 LISTEN.
            if f.ack() {
                // An ACK returning a SYN cookie opens the connection.
                if !f.syn() && self.accept_cookie(now, key, local, remote, &tcp, payload) {
                    return;
                }
                // Second check: any ACK is bad: <SEQ=SEG.ACK><CTL=RST>.
                self.queue_rst(local, remote, &tcp, payload.len());
            } else if f.syn() && self.conns.len() >= self.config.max_connections {
                // No room for another connection: drop, as a full accept
                // queue does; the client retries.
                self.stats.conn_limit_dropped += 1;
            } else if f.syn() && self.memory_refuses(now) {
                // The connections hold `Config::memory_limit`: refuse with
                // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK> (RFC 9293
                // §3.10.7.1), so the client fails at once (ECONNREFUSED)
                // and sees why, rather than retrying SYNs into a limit
                // that holds as long as the connections do.
                self.queue_rst(local, remote, &tcp, payload.len());
            } else if f.syn() {
                // Third check: SYN → SYN-RECEIVED with a new TCB, unless
                // the backlog is full (RFC 4987).
                let Some(l) = self.listeners.get_mut(&key) else {
                    return;
                };
                if l.half_open < l.config.syn_backlog {
                    let cfg = l.config.clone();
                    let iss = self.isn.isn(now, local, remote);
                    let conn = Connection::accept(now, cfg, local, remote, iss, &tcp);
                    self.stats.syns_received += 1;
                    self.insert(conn, true, Some(key));
                } else {
                    l.overflowed_at = Some(now);
                    if l.config.syn_cookies {
                        let cfg = l.config.clone();
                        self.send_cookie(now, cfg, local, remote, &tcp);
                    } else {
                        self.stats.syns_dropped += 1;
                    }
                }
            }
            // Fourth: other text or control: drop.
            return;
        }
        // RFC 9293 §3.10.7.1 CLOSED: answer with RST.
        self.stats.no_connection += 1;
        self.queue_rst(local, remote, &tcp, payload.len());
    }

    /// The cookie time counter at `now`.
    fn cookie_time(now: Instant) -> u32 {
        (now.as_nanos() / COOKIE_PERIOD.as_nanos() as u64) as u32
    }

    /// The SYN cookie for `client_isn` with MSS index `m` at time counter
    /// `t` (layout in the module documentation).
    fn cookie(&self, t: u32, local: SocketAddr, remote: SocketAddr, client_isn: u32, m: u8) -> u32 {
        ((t & 31) << 27)
            | (u32::from(m) << 24)
            | self.isn.syn_cookie_mac(local, remote, client_isn, t, m)
    }

    /// The SYN as the cookie remembers it: the MSS from the table and the
    /// client's timestamp, nothing else.
    fn cookie_syn(syn: &TcpRepr, seq: SeqNumber, m: u8, ts: Option<Timestamp>) -> TcpRepr {
        TcpRepr {
            seq,
            ack: SeqNumber(0),
            flags: TcpFlags::SYN,
            urgent: 0,
            options: TcpOptions {
                mss: Some(SYN_COOKIE_MSS[usize::from(m)]),
                timestamp: ts,
                ..TcpOptions::default()
            },
            ..*syn
        }
    }

    /// Answers a SYN with a stateless SYN-ACK whose ISN is a cookie. The
    /// SYN-ACK is the one a connection accepting the reduced SYN would
    /// send, so the connection rebuilt from the ACK agrees with it.
    fn send_cookie(
        &mut self,
        now: Instant,
        cfg: std::sync::Arc<Config>,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
    ) {
        if self.out.len() >= MAX_QUEUED_RSTS {
            self.stats.syns_dropped += 1;
            return;
        }
        let mss = syn.options.mss.unwrap_or(536);
        let m = SYN_COOKIE_MSS.iter().rposition(|&v| v <= mss).unwrap_or(0) as u8;
        let cookie = self.cookie(Self::cookie_time(now), local, remote, syn.seq.0, m);
        let reduced = Self::cookie_syn(syn, syn.seq, m, syn.options.timestamp);
        let mut c = Connection::accept(now, cfg, local, remote, SeqNumber(cookie), &reduced);
        let Some(synack) = c.poll_transmit(now, &mut self.scratch) else {
            return;
        };
        self.out.push_back(hollywood_wire::build_tcp_ip(
            local,
            remote,
            &synack,
            &self.scratch,
        ));
        self.stats.syn_cookies_sent += 1;
    }

    /// If `ack` returns a valid SYN cookie of the listener `key`, opens the
    /// connection (ESTABLISHED, announced as accepted) and returns true.
    fn accept_cookie(
        &mut self,
        now: Instant,
        key: SocketAddr,
        local: SocketAddr,
        remote: SocketAddr,
        ack: &TcpRepr,
        payload: &[u8],
    ) -> bool {
        let Some(l) = self.listeners.get(&key) else {
            return false;
        };
        // Only while cookies may be outstanding: a cookie lives at most two
        // periods, so blind guesses (2^-24 each) get no chance otherwise.
        let recent = l
            .overflowed_at
            .is_some_and(|t| now.saturating_duration_since(t) <= 2 * COOKIE_PERIOD);
        if !l.config.syn_cookies || !recent || ack.flags.rst() {
            return false;
        }
        let cfg = l.config.clone();
        let cookie = ack.ack.0.wrapping_sub(1);
        let client_isn = ack.seq.0.wrapping_sub(1);
        let m = ((cookie >> 24) & 7) as u8;
        let t_now = Self::cookie_time(now);
        let valid = (0..2).any(|age| {
            let t = t_now.wrapping_sub(age);
            (t & 31) == cookie >> 27 && self.cookie(t, local, remote, client_isn, m) == cookie
        });
        if !valid {
            self.stats.syn_cookies_rejected += 1;
            return false;
        }
        if self.conns.len() >= self.config.max_connections {
            // A valid cookie, but no room: the caller answers with RST.
            self.stats.conn_limit_dropped += 1;
            return false;
        }
        if self.memory_refuses(now) {
            return false;
        }
        let iss = SeqNumber(cookie);
        // The SYN it answered, as far as the cookie and the ACK tell.
        let ts = ack.options.timestamp.map(|t| Timestamp {
            tsval: t.tsval,
            tsecr: 0,
        });
        let syn = Self::cookie_syn(ack, SeqNumber(client_isn), m, ts);
        // When the SYN-ACK left: our TSval comes back in TSecr (the clock
        // of a connection with this ISS, read at `now`, tells how long
        // ago). Without timestamps: `initial_rto` ago, a conservative
        // first RTT sample that later samples average away.
        let mut elapsed = cfg.initial_rto;
        if let Some(echo) = ack.options.timestamp.filter(|_| cfg.timestamps) {
            let mut probe = Connection::accept(now, cfg.clone(), local, remote, iss, &syn);
            if let Some(ours) = probe
                .poll_transmit(now, &mut self.scratch)
                .and_then(|r| r.options.timestamp)
            {
                let ms = ours.tsval.wrapping_sub(echo.tsecr);
                if u64::from(ms) <= 2 * COOKIE_PERIOD.as_millis() as u64 {
                    elapsed = Duration::from_millis(u64::from(ms));
                }
            }
        }
        let sent = now.checked_sub(elapsed).unwrap_or(Instant::ZERO);
        let mut conn = Connection::accept(sent, cfg, local, remote, iss, &syn);
        // The SYN-ACK went out statelessly; this one is its twin.
        let _ = conn.poll_transmit(sent, &mut self.scratch);
        conn.handle_segment(now, ack, payload);
        if matches!(conn.state(), State::SynReceived | State::Closed) {
            // Not acceptable after all (it cannot be with a valid cookie):
            // keep no state for it.
            self.stats.syn_cookies_rejected += 1;
            return false;
        }
        self.stats.syn_cookies_accepted += 1;
        self.insert(conn, true, None);
        true
    }

    /// RFC 9293 §3.10.7.1: if ACK is off, <SEQ=0><ACK=SEG.SEQ+SEG.LEN>
    /// <CTL=RST,ACK>; if ACK is on, <SEQ=SEG.ACK><CTL=RST>.
    fn queue_rst(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &TcpRepr,
        payload_len: usize,
    ) {
        if self.out.len() >= MAX_QUEUED_RSTS {
            self.stats.resets_suppressed += 1;
            return;
        }
        let (seq, ack, flags) = if seg.flags.ack() {
            (seg.ack, SeqNumber(0), TcpFlags::RST)
        } else {
            (
                SeqNumber(0),
                seg.seq + seg.segment_len(payload_len),
                TcpFlags::RST | TcpFlags::ACK,
            )
        };
        let rst = TcpRepr {
            src_port: local.port(),
            dst_port: remote.port(),
            seq,
            ack,
            flags,
            window: 0,
            urgent: 0,
            options: TcpOptions::default(),
        };
        self.out
            .push_back(hollywood_wire::build_tcp_ip(local, remote, &rst, &[]));
        self.stats.resets_sent += 1;
    }

    /// Service expired timers of every connection.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.refresh_timers();
        let due: Vec<u64> = self
            .timers
            .iter()
            .take_while(|&&(t, _)| t <= now)
            .map(|&(_, h)| h)
            .collect();
        for h in due {
            let Some(e) = self.conns.get_mut(&h) else {
                continue;
            };
            if e.conn.poll_timeout().is_some_and(|t| t <= now) {
                e.conn.handle_timeout(now);
                self.touch(h);
            }
            self.reindex(h);
        }
    }

    /// Connection `h` took input or a timer: it may have events, output
    /// and a new timer.
    fn touch(&mut self, h: u64) {
        self.dirty.insert(h);
        self.sendable.insert(h);
        if let Some(t) = &mut self.touched {
            t.insert(h);
        }
    }

    /// File connection `h` under its current timer.
    fn reindex(&mut self, h: u64) {
        let Some(e) = self.conns.get_mut(&h) else {
            return;
        };
        e.stale = false;
        let t = e.conn.poll_timeout();
        if t != e.timer {
            if let Some(old) = e.timer {
                self.timers.remove(&(old, h));
            }
            if let Some(new) = t {
                self.timers.insert((new, h));
            }
            e.timer = t;
        }
    }

    /// Refile the connections the application was given since the last
    /// refresh.
    fn refresh_timers(&mut self) {
        for h in std::mem::take(&mut self.stale) {
            self.reindex(h);
        }
    }

    /// Keep a set of the connections that took input or a timer or raised
    /// events ([`Endpoint::take_touched`]), for a driver that services
    /// only those rather than visiting every connection on every step.
    /// Off by default (nothing is kept).
    pub fn track_touched(&mut self, on: bool) {
        self.touched = on.then(BTreeSet::new);
    }

    /// The connections touched (input, timer, events) since the last call,
    /// in handle order (with [`Endpoint::track_touched`]; empty otherwise).
    /// Application commands through [`Endpoint::connection_mut`] do not
    /// count: the caller knows about those.
    pub fn take_touched(&mut self, out: &mut Vec<ConnHandle>) {
        if let Some(t) = &mut self.touched {
            out.extend(std::mem::take(t).into_iter().map(ConnHandle));
        }
    }

    /// Whether a connection holds the 4-tuple `(local, remote)`: a segment
    /// from `remote` to `local` would go to it rather than to a listener
    /// or the RST reply. For a driver that shares the 4-tuples among
    /// several endpoints (one per TUN queue) and must tell its own
    /// segments from another endpoint's.
    pub fn owns(&self, local: SocketAddr, remote: SocketAddr) -> bool {
        self.by_tuple.contains_key(&(local, remote))
    }

    /// Keep a log of the 4-tuples that gain a connection (`connect`, a
    /// SYN or SYN cookie accepted) or lose one (removed, or detached once
    /// closed), for [`Endpoint::take_tuple_changes`]. Off by default
    /// (nothing is kept); the caller must drain it regularly.
    pub fn track_tuples(&mut self, on: bool) {
        self.tuple_log = on.then(Vec::new);
    }

    /// The 4-tuple changes since the last call, oldest first (with
    /// [`Endpoint::track_tuples`]; nothing otherwise).
    pub fn take_tuple_changes(&mut self, out: &mut Vec<TupleChange>) {
        if let Some(log) = &mut self.tuple_log {
            out.append(log);
        }
    }

    fn log_tuple_gone(&mut self, (local, remote): (SocketAddr, SocketAddr)) {
        if let Some(log) = &mut self.tuple_log {
            log.push(TupleChange {
                local,
                remote,
                owned: false,
            });
        }
    }

    /// Give a packet buffer back (a received packet, once handled, or a
    /// sent one): [`Endpoint::poll_transmit`] builds the next packets in
    /// such buffers instead of allocating. Optional; at most 64 are kept,
    /// each of at most 16 KiB.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < SPARE_PACKETS && buf.capacity() <= SPARE_MAX_CAPACITY {
            self.spare.push(buf);
        }
    }

    /// The next packet to put on the wire.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if let Some(p) = self.out.pop_front() {
            self.stats.packets_out += 1;
            return Some(p);
        }
        self.refresh_timers();
        // Round robin from the connection after the last one that sent,
        // over those that may have something to send. Each visit either
        // returns a packet or takes the connection out of the set.
        let mut key = self.rr;
        for _ in 0..self.sendable.len() {
            let next = self
                .sendable
                .range(key..)
                .next()
                .or_else(|| self.sendable.iter().next())
                .copied();
            let Some(h) = next else { break };
            key = h.wrapping_add(1);
            let Some(e) = self.conns.get_mut(&h) else {
                self.sendable.remove(&h);
                continue;
            };
            let Some(repr) = e.conn.poll_transmit(now, &mut self.scratch) else {
                self.sendable.remove(&h);
                // Looking for something to send may have raised events
                // (messages expired in the queue: thesis §4.2 liveness
                // test before sequence numbers).
                if e.conn.has_events() {
                    self.dirty.insert(h);
                    if let Some(t) = &mut self.touched {
                        t.insert(h);
                    }
                }
                let retire = e.closed_reported;
                self.reindex(h);
                if retire {
                    self.retire(h);
                }
                continue;
            };
            let mut pkt = self.spare.pop().unwrap_or_default();
            hollywood_wire::build_tcp_ip_into(
                e.conn.local(),
                e.conn.remote(),
                &repr,
                &self.scratch,
                &mut pkt,
            );
            self.dirty.insert(h);
            let retire = e.closed_reported && !e.conn.rst_pending();
            self.reindex(h);
            if retire {
                self.retire(h);
            }
            self.rr = key;
            self.stats.packets_out += 1;
            return Some(pkt);
        }
        None
    }

    /// The earliest time `handle_timeout` must be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Connections handed to the application since they were filed may
        // have a new timer: those are asked directly.
        let stale = self
            .stale
            .iter()
            .filter_map(|h| self.conns.get(h)?.conn.poll_timeout())
            .min();
        // Their filed entries may be out of date: skipped (at most one
        // per stale connection).
        let filed = self
            .timers
            .iter()
            .find(|(_, h)| !self.conns.get(h).is_some_and(|e| e.stale))
            .map(|&(t, _)| t);
        match (filed, stale) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next application event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        loop {
            if let Some(e) = self.events.pop_front() {
                return Some(e);
            }
            let h = self.dirty.pop_first()?;
            self.drain_events(h);
        }
    }

    /// Move the events of connection `h` to the endpoint queue.
    fn drain_events(&mut self, h: u64) {
        let mut remove = false;
        let Some(e) = self.conns.get_mut(&h) else {
            return;
        };
        while let Some(ev) = e.conn.poll_event() {
            let handle = ConnHandle(h);
            if !e.announced {
                match ev {
                    Event::Connected => {
                        e.announced = true;
                        self.stats.connections_accepted += 1;
                        self.events.push_back(EndpointEvent::Accepted {
                            handle,
                            remote: e.conn.remote(),
                        });
                        self.events
                            .push_back(EndpointEvent::Conn { handle, event: ev });
                    }
                    // A passive open that died before ESTABLISHED (RFC 9293
                    // §3.10.7.4: "return to LISTEN") is forgotten silently.
                    Event::Closed => remove = true,
                    _ => {}
                }
                continue;
            }
            self.events
                .push_back(EndpointEvent::Conn { handle, event: ev });
            if ev == Event::Closed {
                e.closed_reported = true;
            }
        }
        // Reported closed, final RST out: forget it, or detach it while
        // the application still has data to read (checked again each time
        // the application touches it through `connection_mut`).
        let retire = e.closed_reported && !e.conn.rst_pending();
        if e.announced {
            // Accepted: no longer half-open.
            self.leave_backlog(h);
        }
        if remove {
            self.remove(h);
        } else if retire {
            self.retire(h);
        }
    }

    /// A closed connection whose `Closed` event was reported: removed, or
    /// detached from its 4-tuple while it holds unread data.
    fn retire(&mut self, h: u64) {
        let Some(e) = self.conns.get_mut(&h) else {
            return;
        };
        if !e.conn.has_unread() {
            self.remove(h);
            return;
        }
        if !e.detached {
            e.detached = true;
            let key = (e.conn.local(), e.conn.remote());
            if self.by_tuple.get(&key) == Some(&h) {
                self.by_tuple.remove(&key);
                self.log_tuple_gone(key);
            }
        }
    }

    /// Number of live connections (including not yet accepted ones and
    /// TIME-WAIT).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// State of a connection, including not yet accepted ones.
    pub fn state_of(&self, h: ConnHandle) -> Option<State> {
        self.conns.get(&h.0).map(|e| e.conn.state())
    }
}

/// Handles of connections that may have events, taken smallest first (as
/// a `BTreeSet` would give them). A sorted vector: an endpoint has few
/// connections, and a set that empties and fills again for every packet
/// would free and allocate a tree node each time.
#[derive(Debug, Default)]
struct DirtySet(Vec<u64>);

impl DirtySet {
    fn insert(&mut self, h: u64) {
        if let Err(i) = self.0.binary_search(&h) {
            self.0.insert(i, h);
        }
    }

    fn remove(&mut self, h: &u64) {
        if let Ok(i) = self.0.binary_search(h) {
            self.0.remove(i);
        }
    }

    fn pop_first(&mut self) -> Option<u64> {
        (!self.0.is_empty()).then(|| self.0.remove(0))
    }
}
