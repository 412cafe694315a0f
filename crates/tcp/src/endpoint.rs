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
//! [`Endpoint::poll_event`] (and any final RST sent).

use crate::config::Config;
use crate::conn::{Connection, Event, State};
use crate::isn::IsnGenerator;
use crate::time::Instant;
use crate::Error;
use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;

/// First ephemeral port (Linux `ip_local_port_range` default).
pub const EPHEMERAL_FIRST: u16 = 32_768;
/// Last ephemeral port (Linux `ip_local_port_range` default).
pub const EPHEMERAL_LAST: u16 = 60_999;
/// Endpoint-generated packets (RSTs) queued at most; more are dropped.
const MAX_QUEUED_RSTS: usize = 1024;

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
}

#[derive(Debug)]
struct Entry {
    conn: Connection,
    /// Reported to the application (always for active opens; on
    /// ESTABLISHED for passive ones).
    announced: bool,
    /// `Closed` was returned by `poll_event`; remove once the RST is out.
    closed_reported: bool,
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
    listeners: BTreeMap<SocketAddr, Config>,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<EndpointEvent>,
    /// Connections that may have events.
    dirty: BTreeSet<u64>,
    /// Round-robin cursor for `poll_transmit`.
    rr: u64,
    scratch: Vec<u8>,
    stats: EndpointStats,
}

impl Endpoint {
    /// An endpoint whose connections use `config` unless overridden.
    /// `seed` keys the ISN generator (RFC 6528) and the ephemeral port choice.
    pub fn new(config: Config, seed: u64) -> Endpoint {
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
            dirty: BTreeSet::new(),
            rr: 0,
            scratch: Vec::new(),
            stats: EndpointStats::default(),
        }
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
        self.listeners.insert(local, config);
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
        let iss = self.isn.isn(now, local, remote);
        let conn = Connection::connect(now, config, local, remote, iss);
        self.stats.connections_initiated += 1;
        Ok(self.insert(conn, false))
    }

    /// Deterministic ephemeral port: a seeded random start, then the next
    /// free one (RFC 6056 §3.3.2-like).
    fn ephemeral(&mut self, local: SocketAddr, remote: SocketAddr) -> Result<SocketAddr, Error> {
        let span = (EPHEMERAL_LAST - EPHEMERAL_FIRST) as u32 + 1;
        let start = self.ports.gen_range(0..span);
        for i in 0..span {
            let port = EPHEMERAL_FIRST + ((start + i) % span) as u16;
            let mut cand = local;
            cand.set_port(port);
            let listening = self.listeners.keys().any(|l| l.port() == port);
            if !listening && !self.by_tuple.contains_key(&(cand, remote)) {
                return Ok(cand);
            }
        }
        Err(Error::AddrInUse)
    }

    fn insert(&mut self, conn: Connection, passive: bool) -> ConnHandle {
        let h = self.next_handle;
        self.next_handle += 1;
        self.by_tuple.insert((conn.local(), conn.remote()), h);
        self.conns.insert(
            h,
            Entry {
                conn,
                announced: !passive,
                closed_reported: false,
            },
        );
        self.dirty.insert(h);
        ConnHandle(h)
    }

    fn remove(&mut self, h: u64) {
        if let Some(e) = self.conns.remove(&h) {
            self.by_tuple.remove(&(e.conn.local(), e.conn.remote()));
            self.dirty.remove(&h);
            self.stats.connections_closed += 1;
        }
    }

    /// A connection (announced ones only: passive opens appear once
    /// accepted).
    pub fn connection(&self, h: ConnHandle) -> Option<&Connection> {
        self.conns
            .get(&h.0)
            .filter(|e| e.announced)
            .map(|e| &e.conn)
    }

    /// A connection, for application commands.
    pub fn connection_mut(&mut self, h: ConnHandle) -> Option<&mut Connection> {
        let e = self.conns.get_mut(&h.0).filter(|e| e.announced)?;
        self.dirty.insert(h.0);
        Some(&mut e.conn)
    }

    /// Handles of all announced connections, in order.
    pub fn handles(&self) -> impl Iterator<Item = ConnHandle> + '_ {
        self.conns
            .iter()
            .filter(|(_, e)| e.announced)
            .map(|(&h, _)| ConnHandle(h))
    }

    /// The listener for a destination address, exact match first.
    fn listener(&self, dst: SocketAddr) -> Option<&Config> {
        self.listeners.get(&dst).or_else(|| {
            let any: SocketAddr = if dst.is_ipv4() {
                (std::net::Ipv4Addr::UNSPECIFIED, dst.port()).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, dst.port()).into()
            };
            self.listeners.get(&any)
        })
    }

    /// Process one IP packet from the network.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        let seg = match hollywood_wire::parse_tcp_ip(packet) {
            Ok(s) => s,
            Err(_) => {
                self.stats.malformed_dropped += 1;
                return;
            }
        };
        self.stats.packets_in += 1;
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
                    self.dirty.insert(h);
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
        if let Some(cfg) = self.listener(local) {
            // RFC 9293 §3.10.7.2 LISTEN.
            if f.ack() {
                // Second check: any ACK is bad: <SEQ=SEG.ACK><CTL=RST>.
                self.queue_rst(local, remote, &tcp, payload.len());
            } else if f.syn() {
                // Third check: SYN → SYN-RECEIVED with a new TCB.
                let cfg = cfg.clone();
                let iss = self.isn.isn(now, local, remote);
                let conn = Connection::accept(now, cfg, local, remote, iss, &tcp);
                self.stats.syns_received += 1;
                self.insert(conn, true);
            }
            // Fourth: other text or control: drop.
            return;
        }
        // RFC 9293 §3.10.7.1 CLOSED: answer with RST.
        self.stats.no_connection += 1;
        self.queue_rst(local, remote, &tcp, payload.len());
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
        for (&h, e) in self.conns.iter_mut() {
            if e.conn.poll_timeout().is_some_and(|t| t <= now) {
                e.conn.handle_timeout(now);
                self.dirty.insert(h);
            }
        }
    }

    /// The next packet to put on the wire.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if let Some(p) = self.out.pop_front() {
            self.stats.packets_out += 1;
            return Some(p);
        }
        // Round robin from the connection after the last one that sent.
        let mut key = self.rr;
        for _ in 0..self.conns.len() {
            let next = self
                .conns
                .range(key..)
                .next()
                .or_else(|| self.conns.iter().next());
            let Some((&h, _)) = next else { break };
            key = h.wrapping_add(1);
            let Some(e) = self.conns.get_mut(&h) else {
                continue;
            };
            let Some(repr) = e.conn.poll_transmit(now, &mut self.scratch) else {
                if e.closed_reported {
                    self.remove(h);
                }
                continue;
            };
            let pkt =
                hollywood_wire::build_tcp_ip(e.conn.local(), e.conn.remote(), &repr, &self.scratch);
            self.dirty.insert(h);
            if e.closed_reported && !e.conn.rst_pending() {
                self.remove(h);
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
        self.conns
            .values()
            .filter_map(|e| e.conn.poll_timeout())
            .min()
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
                remove = !e.conn.rst_pending();
            }
        }
        if remove {
            self.remove(h);
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
