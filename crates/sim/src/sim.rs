//! The discrete-event core: virtual time, the event queue, nodes and links.

use crate::error::SimError;
use crate::link::{LinkConfig, LinkEnds, LinkId, LinkState, LinkStats, Outcome};
use crate::node::{Node, NodeId};
use crate::rule::{PacketInfo, Verdict};
use crate::trace::{CaptureFilter, TraceEvent, TraceHook, TraceKind};
use hollywood_tcp::Instant;
use hollywood_wire::pcap;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

/// Simulation parameters. Building twice from the same config (and adding
/// the same nodes and links in the same order) gives the same simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Seed of every random choice the simulator makes (each link draws from
    /// its own ChaCha8 stream derived from it). Default: 0.
    pub seed: u64,
    /// Stop with [`SimError::EventLimit`] after this many events in total.
    /// Default: `None` (runs end when no events remain or at the requested
    /// time).
    pub max_events: Option<u64>,
    /// Consecutive firings of one node's timer at a single instant before the
    /// run fails with [`SimError::TimerLivelock`]. Default: 10 000.
    pub max_timer_spins: u32,
    /// Packets one node may emit in response to a single input before the
    /// run fails with [`SimError::TransmitLivelock`]. Default: 1 000 000.
    pub max_transmits_per_wake: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            max_events: None,
            max_timer_spins: 10_000,
            max_transmits_per_wake: 1_000_000,
        }
    }
}

/// Builder for a [`Simulator`] (after turmoil's `Builder`); every setting has
/// the default documented on [`SimConfig`].
#[derive(Debug, Clone, Default)]
pub struct SimBuilder {
    config: SimConfig,
}

impl SimBuilder {
    /// A builder with default settings.
    #[must_use]
    pub fn new() -> SimBuilder {
        SimBuilder::default()
    }
    /// Set the RNG seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> SimBuilder {
        self.config.seed = seed;
        self
    }
    /// Bound the total number of events.
    #[must_use]
    pub fn max_events(mut self, max: u64) -> SimBuilder {
        self.config.max_events = Some(max);
        self
    }
    /// Set the timer-livelock threshold.
    #[must_use]
    pub fn max_timer_spins(mut self, spins: u32) -> SimBuilder {
        self.config.max_timer_spins = spins;
        self
    }
    /// Set the transmit-livelock threshold.
    #[must_use]
    pub fn max_transmits_per_wake(mut self, n: usize) -> SimBuilder {
        self.config.max_transmits_per_wake = n;
        self
    }
    /// Build the simulator (virtual time starts at [`Instant::ZERO`]).
    #[must_use]
    pub fn build(self) -> Simulator {
        Simulator::new(self.config)
    }
}

/// Whole-simulation counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Events processed (packet deliveries, node timers that fired, link
    /// changes and actions; a timer re-armed before it fired is not one).
    pub events: u64,
    /// Packets a node sent on an interface that has no outgoing link
    /// (discarded).
    pub unattached_packets: u64,
}

enum EventKind {
    /// A link delivers a packet copy.
    Deliver {
        link: LinkId,
        index: u64,
        copy: u8,
        packet: Vec<u8>,
    },
    /// Apply scheduled link change number `id`.
    LinkChange { id: usize },
    /// Run scheduled action number `id`.
    Action { id: usize },
}

struct Event {
    time: Instant,
    seq: u64,
    kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

struct NodeSlot {
    node: Box<dyn Node>,
    /// Outgoing link per interface.
    egress: Vec<Option<LinkId>>,
    /// The node's last `poll_timeout` answer, as filed.
    armed: Option<Instant>,
    /// Its entry in `Simulator::timers`: (time, seq).
    timer_key: Option<(Instant, u64)>,
    spin_at: Instant,
    spins: u32,
    /// Queued in `Simulator::dirty`.
    dirty: bool,
}

type LinkPatch = Box<dyn FnOnce(&mut LinkConfig)>;
type Action = Box<dyn FnOnce(&mut Simulator)>;

struct Capture {
    filter: CaptureFilter,
    writer: pcap::Writer<Box<dyn Write>>,
    error: Option<io::Error>,
}

/// A deterministic discrete-event network simulator.
///
/// Time jumps from event to event (never fixed ticks). Events at the same
/// instant run in the order they were scheduled. Everything random is drawn
/// from ChaCha8 streams derived from [`SimConfig::seed`], so the same seed and
/// the same setup give byte-identical traces and captures.
///
/// Method families: setup (`add_node`, `add_link`/`connect`, `add_rule`,
/// `schedule_*`, `on_packet`, `capture_pcap*`), running (`step`,
/// `run_until`, `run_for`, `run_while`, `run_until_idle`), inspection
/// (`now`, `node_mut`, `link_stats`, `stats`).
pub struct Simulator {
    config: SimConfig,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<Event>>,
    /// Armed node timers, one entry per node at most: (time, seq, node
    /// index). Kept apart from `queue` so that re-arming a timer replaces
    /// its entry; a heap of stale timer events (about 17 per live one in
    /// a DASH run) made most of the queue's work. Ordered against `queue`
    /// by (time, seq), from the same `seq` counter: the same order as one
    /// queue.
    timers: BTreeSet<(Instant, u64, usize)>,
    nodes: Vec<NodeSlot>,
    links: Vec<LinkState>,
    link_changes: Vec<Option<(LinkId, LinkPatch)>>,
    actions: Vec<Option<Action>>,
    hooks: Vec<TraceHook>,
    captures: Vec<Capture>,
    stats: SimStats,
    /// Nodes to wake (drain output, re-read timer) before the next event.
    dirty: Vec<NodeId>,
}

impl core::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Simulator")
            .field("now", &self.now)
            .field("nodes", &self.nodes.len())
            .field("links", &self.links.len())
            .field("pending_events", &(self.queue.len() + self.timers.len()))
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn emit(hooks: &mut [TraceHook], captures: &mut [Capture], ev: &TraceEvent<'_>) {
    for h in hooks.iter_mut() {
        h(ev);
    }
    for c in captures.iter_mut() {
        if c.error.is_none() && c.filter.matches(ev) {
            if let Err(e) = c.writer.write_packet(ev.time.as_nanos(), ev.packet) {
                c.error = Some(e);
            }
        }
    }
}

impl Simulator {
    /// A simulator with the given configuration, at time zero, empty.
    #[must_use]
    pub fn new(config: SimConfig) -> Simulator {
        Simulator {
            config,
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            timers: BTreeSet::new(),
            nodes: Vec::new(),
            links: Vec::new(),
            link_changes: Vec::new(),
            actions: Vec::new(),
            hooks: Vec::new(),
            captures: Vec::new(),
            stats: SimStats::default(),
            dirty: Vec::new(),
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Current virtual time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Whole-simulation counters.
    #[must_use]
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// A seed for a node or app, derived deterministically from the
    /// simulation seed and `label` (independent of the link streams).
    #[must_use]
    pub fn derive_seed(&self, label: u64) -> u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(self.config.seed);
        rng.set_stream((1 << 63) | label);
        rng.next_u64()
    }

    fn mark_dirty(&mut self, id: NodeId) {
        let slot = &mut self.nodes[id.0];
        if !slot.dirty {
            slot.dirty = true;
            self.dirty.push(id);
        }
    }

    /// Wake every node marked by `add_node` / `node_mut` at the current time,
    /// in marking order. Returns whether any node was woken.
    fn flush_dirty(&mut self) -> Result<bool, SimError> {
        if self.dirty.is_empty() {
            return Ok(false);
        }
        let nodes = std::mem::take(&mut self.dirty);
        for id in nodes {
            self.nodes[id.0].dirty = false;
            self.after_input(id)?;
        }
        Ok(true)
    }

    fn push(&mut self, time: Instant, kind: EventKind) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(Reverse(Event { time, seq, kind }));
    }

    // ----------------------------------------------------------------- setup

    /// Add a node. It is woken (its initial output drained and its timer
    /// read) at the current time, before the next event is processed.
    pub fn add_node<N: Node + 'static>(&mut self, node: N) -> NodeId {
        self.add_boxed_node(Box::new(node))
    }

    /// Add an already boxed node (see [`Simulator::add_node`]).
    pub fn add_boxed_node(&mut self, node: Box<dyn Node>) -> NodeId {
        let id = NodeId(self.nodes.len());
        self.nodes.push(NodeSlot {
            node,
            egress: Vec::new(),
            armed: None,
            timer_key: None,
            spin_at: Instant::ZERO,
            spins: 0,
            dirty: false,
        });
        self.mark_dirty(id);
        id
    }

    /// Number of nodes.
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Mutable access to a node as its concrete type; `None` if the id is
    /// unknown or the type differs. Because the caller may change the node
    /// (e.g. issue application commands), it is woken at the current time
    /// before the next event: its output is drained and its timer re-read.
    /// A wake-up is not an event, so calling this from a
    /// [`Simulator::run_while`] condition cannot stall the clock.
    pub fn node_mut<T: 'static>(&mut self, id: NodeId) -> Option<&mut T> {
        let is_t = self.nodes.get_mut(id.0)?.node.as_any().is::<T>();
        if !is_t {
            return None;
        }
        self.mark_dirty(id);
        self.nodes[id.0].node.as_any().downcast_mut::<T>()
    }

    /// Mutable access to a node as a trait object (also wakes it, see
    /// [`Simulator::node_mut`]).
    pub fn node_dyn_mut(&mut self, id: NodeId) -> Option<&mut dyn Node> {
        if id.0 >= self.nodes.len() {
            return None;
        }
        self.mark_dirty(id);
        Some(self.nodes[id.0].node.as_mut())
    }

    fn check_node(&self, id: NodeId) -> Result<(), SimError> {
        if id.0 < self.nodes.len() {
            Ok(())
        } else {
            Err(SimError::UnknownNode(id))
        }
    }

    fn check_iface_free(&self, node: NodeId, iface: usize) -> Result<(), SimError> {
        self.check_node(node)?;
        match self.nodes[node.0].egress.get(iface) {
            Some(Some(_)) => Err(SimError::InterfaceInUse { node, iface }),
            _ => Ok(()),
        }
    }

    /// Add a unidirectional link from `from`'s interface `from_iface` to
    /// `to`'s interface `to_iface`. Each interface has at most one outgoing
    /// link; any number of links may arrive on one interface.
    pub fn add_link(
        &mut self,
        from: NodeId,
        from_iface: usize,
        to: NodeId,
        to_iface: usize,
        config: LinkConfig,
    ) -> Result<LinkId, SimError> {
        self.check_iface_free(from, from_iface)?;
        self.check_node(to)?;
        config.validate()?;
        let id = LinkId(self.links.len());
        let mut rng = ChaCha8Rng::seed_from_u64(self.config.seed);
        rng.set_stream(1 + id.0 as u64);
        self.links
            .push(LinkState::new(from, from_iface, to, to_iface, config, rng));
        let egress = &mut self.nodes[from.0].egress;
        if egress.len() <= from_iface {
            egress.resize(from_iface + 1, None);
        }
        egress[from_iface] = Some(id);
        Ok(id)
    }

    /// Connect two interfaces with a pair of links: `a_to_b` carries packets
    /// sent by `a` on `iface_a`, `b_to_a` those sent by `b` on `iface_b`.
    /// Returns `(a→b, b→a)`.
    pub fn connect(
        &mut self,
        a: NodeId,
        iface_a: usize,
        b: NodeId,
        iface_b: usize,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<(LinkId, LinkId), SimError> {
        self.check_iface_free(a, iface_a)?;
        self.check_iface_free(b, iface_b)?;
        if a == b && iface_a == iface_b {
            return Err(SimError::InterfaceInUse {
                node: a,
                iface: iface_a,
            });
        }
        a_to_b.validate()?;
        b_to_a.validate()?;
        let ab = self.add_link(a, iface_a, b, iface_b, a_to_b)?;
        let ba = self.add_link(b, iface_b, a, iface_a, b_to_a)?;
        Ok((ab, ba))
    }

    /// Number of links.
    #[must_use]
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    fn link(&self, id: LinkId) -> Result<&LinkState, SimError> {
        self.links.get(id.0).ok_or(SimError::UnknownLink(id))
    }

    fn link_state_mut(&mut self, id: LinkId) -> Result<&mut LinkState, SimError> {
        self.links.get_mut(id.0).ok_or(SimError::UnknownLink(id))
    }

    /// Counters of a link.
    pub fn link_stats(&self, id: LinkId) -> Result<LinkStats, SimError> {
        Ok(self.link(id)?.stats)
    }

    /// Current parameters of a link.
    pub fn link_config(&self, id: LinkId) -> Result<&LinkConfig, SimError> {
        Ok(self.link(id)?.config())
    }

    /// Where a link starts and ends.
    pub fn link_ends(&self, id: LinkId) -> Result<LinkEnds, SimError> {
        let l = self.link(id)?;
        Ok(LinkEnds {
            from: l.from,
            from_iface: l.from_iface,
            to: l.to,
            to_iface: l.to_iface,
        })
    }

    /// Current queue backlog of a link in bytes (see the
    /// [link model](crate::link)).
    pub fn link_backlog(&mut self, id: LinkId) -> Result<usize, SimError> {
        let now = self.now;
        Ok(self.link_state_mut(id)?.backlog_at(now))
    }

    /// Replace a link's parameters now (applies to packets offered from now on).
    pub fn set_link_config(&mut self, id: LinkId, config: LinkConfig) -> Result<(), SimError> {
        config.validate()?;
        *self.link_state_mut(id)?.config_mut() = config;
        Ok(())
    }

    /// At virtual time `at`, change a link's parameters with `patch` (e.g.
    /// `|c| c.rate_bps = 5_000_000` for a rate step). A patch that leaves a
    /// probability out of range makes the run fail with
    /// [`SimError::InvalidProbability`] when it is applied.
    pub fn schedule_link(
        &mut self,
        id: LinkId,
        at: Instant,
        patch: impl FnOnce(&mut LinkConfig) + 'static,
    ) -> Result<(), SimError> {
        self.link(id)?;
        self.check_future(at)?;
        let n = self.link_changes.len();
        self.link_changes.push(Some((id, Box::new(patch))));
        self.push(at, EventKind::LinkChange { id: n });
        Ok(())
    }

    /// At virtual time `at`, apply `change` to a link's parameters (the
    /// same [`LinkChange`](crate::LinkChange) the real-packet emulator's
    /// schedules use).
    pub fn schedule_link_change(
        &mut self,
        id: LinkId,
        at: Instant,
        change: crate::LinkChange,
    ) -> Result<(), SimError> {
        change.validate()?;
        self.schedule_link(id, at, move |c| change.apply(c))
    }

    /// At virtual time `at`, replace a link's parameters with `config`.
    pub fn schedule_link_config(
        &mut self,
        id: LinkId,
        at: Instant,
        config: LinkConfig,
    ) -> Result<(), SimError> {
        config.validate()?;
        self.schedule_link(id, at, move |c| *c = config)
    }

    /// At virtual time `at`, run `action` on the simulator (e.g. to change
    /// rules or inspect nodes mid-run).
    pub fn schedule_action(
        &mut self,
        at: Instant,
        action: impl FnOnce(&mut Simulator) + 'static,
    ) -> Result<(), SimError> {
        self.check_future(at)?;
        let n = self.actions.len();
        self.actions.push(Some(Box::new(action)));
        self.push(at, EventKind::Action { id: n });
        Ok(())
    }

    fn check_future(&self, at: Instant) -> Result<(), SimError> {
        if at < self.now {
            Err(SimError::InThePast { at, now: self.now })
        } else {
            Ok(())
        }
    }

    /// Add a packet rule to a link (see [`crate::rule`]).
    pub fn add_rule(
        &mut self,
        id: LinkId,
        rule: impl FnMut(&PacketInfo<'_>) -> Verdict + 'static,
    ) -> Result<(), SimError> {
        self.link_state_mut(id)?.rules.push(Box::new(rule));
        Ok(())
    }

    /// Remove every rule of a link.
    pub fn clear_rules(&mut self, id: LinkId) -> Result<(), SimError> {
        self.link_state_mut(id)?.rules.clear();
        Ok(())
    }

    /// Drop the packets with these 0-based indices on the link (index =
    /// count of packets offered to the link before it).
    pub fn drop_nth(
        &mut self,
        id: LinkId,
        indices: impl IntoIterator<Item = u64>,
    ) -> Result<(), SimError> {
        let mut set: Vec<u64> = indices.into_iter().collect();
        set.sort_unstable();
        self.add_rule(id, move |p| {
            if set.binary_search(&p.index).is_ok() {
                Verdict::Drop
            } else {
                Verdict::Pass
            }
        })
    }

    /// Drop every packet on the link for which `predicate` holds.
    pub fn drop_where(
        &mut self,
        id: LinkId,
        mut predicate: impl FnMut(&PacketInfo<'_>) -> bool + 'static,
    ) -> Result<(), SimError> {
        self.add_rule(id, move |p| {
            if predicate(p) {
                Verdict::Drop
            } else {
                Verdict::Pass
            }
        })
    }

    /// Call `hook` for every [`TraceEvent`] on every link.
    pub fn on_packet(&mut self, hook: impl FnMut(&TraceEvent<'_>) + 'static) {
        self.hooks.push(Box::new(hook));
    }

    /// Write a pcap (raw IP link type, nanosecond timestamps = virtual time)
    /// of every packet at link ingress on every link, to `out`. The header is
    /// written immediately. Write errors during the run are kept and reported
    /// by [`Simulator::finish_captures`].
    pub fn capture_pcap(&mut self, out: impl Write + 'static) -> io::Result<()> {
        self.capture_pcap_filtered(out, CaptureFilter::default())
    }

    /// Like [`Simulator::capture_pcap`] with a choice of capture point and links.
    pub fn capture_pcap_filtered(
        &mut self,
        out: impl Write + 'static,
        filter: CaptureFilter,
    ) -> io::Result<()> {
        let writer = pcap::Writer::new(Box::new(out) as Box<dyn Write>)?;
        self.captures.push(Capture {
            filter,
            writer,
            error: None,
        });
        Ok(())
    }

    /// [`Simulator::capture_pcap`] into a new file at `path` (buffered;
    /// call [`Simulator::finish_captures`] to flush).
    pub fn capture_pcap_file(
        &mut self,
        path: impl AsRef<Path>,
        filter: CaptureFilter,
    ) -> io::Result<()> {
        let file = std::fs::File::create(path)?;
        self.capture_pcap_filtered(io::BufWriter::new(file), filter)
    }

    /// Flush and close every capture; returns the first write error any of
    /// them met.
    pub fn finish_captures(&mut self) -> io::Result<()> {
        let mut first = None;
        for mut c in self.captures.drain(..) {
            let r = match c.error.take() {
                Some(e) => Err(e),
                None => c.writer.flush(),
            };
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    // --------------------------------------------------------------- running

    /// Time of the next pending event.
    #[must_use]
    pub fn next_event_time(&self) -> Option<Instant> {
        let queued = self.queue.peek().map(|Reverse(e)| e.time);
        let timer = self.timers.first().map(|&(t, _, _)| t);
        match (queued, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the earliest node timer comes before the earliest queued
    /// event, by (time, seq); `None` when neither exists.
    fn timer_first(&self) -> Option<bool> {
        let queued = self.queue.peek().map(|Reverse(e)| (e.time, e.seq));
        let timer = self.timers.first().map(|&(t, seq, _)| (t, seq));
        match (queued, timer) {
            (None, None) => None,
            (Some(q), Some(t)) => Some(t < q),
            (q, _) => Some(q.is_none()),
        }
    }

    /// Process one event (after waking any node touched through
    /// [`Simulator::node_mut`] or just added). `Ok(false)` when there was
    /// nothing to do.
    pub fn step(&mut self) -> Result<bool, SimError> {
        let woke = self.flush_dirty()?;
        let Some(timer) = self.timer_first() else {
            return Ok(woke);
        };
        if let Some(max) = self.config.max_events {
            if self.stats.events >= max {
                return Err(SimError::EventLimit(max));
            }
        }
        self.stats.events += 1;
        if timer {
            let (time, _, node) = self.timers.pop_first().expect("timer_first saw it");
            debug_assert!(time >= self.now);
            self.now = time;
            let slot = &mut self.nodes[node];
            slot.timer_key = None;
            slot.armed = None;
            if slot.spin_at == self.now {
                slot.spins += 1;
                if slot.spins > self.config.max_timer_spins {
                    return Err(SimError::TimerLivelock {
                        node: NodeId(node),
                        at: self.now,
                    });
                }
            } else {
                slot.spin_at = self.now;
                slot.spins = 1;
            }
            slot.node.handle_timeout(self.now);
            self.after_input(NodeId(node))?;
            return Ok(true);
        }
        let Some(Reverse(ev)) = self.queue.pop() else {
            unreachable!("timer_first saw a queued event");
        };
        debug_assert!(ev.time >= self.now);
        self.now = ev.time;
        match ev.kind {
            EventKind::Deliver {
                link,
                index,
                copy,
                packet,
            } => self.deliver(link, index, copy, packet)?,
            EventKind::LinkChange { id } => {
                if let Some((link, patch)) = self.link_changes[id].take() {
                    let link = &mut self.links[link.0];
                    let mut cfg = link.config().clone();
                    patch(&mut cfg);
                    cfg.validate()?;
                    *link.config_mut() = cfg;
                }
            }
            EventKind::Action { id } => {
                if let Some(action) = self.actions[id].take() {
                    action(self);
                }
            }
        }
        Ok(true)
    }

    /// Run every event up to and including time `t`, then set the clock to
    /// `t` (if it is later than now).
    pub fn run_until(&mut self, t: Instant) -> Result<(), SimError> {
        loop {
            self.flush_dirty()?;
            if self.next_event_time().is_none_or(|next| next > t) {
                break;
            }
            self.step()?;
        }
        self.now = self.now.max(t);
        Ok(())
    }

    /// [`Simulator::run_until`] `now + d`.
    pub fn run_for(&mut self, d: Duration) -> Result<(), SimError> {
        self.run_until(self.now + d)
    }

    /// Step while `cond(self)` holds. Returns `Ok(true)` when it stopped
    /// because the condition became false, `Ok(false)` when no events remain.
    pub fn run_while(
        &mut self,
        mut cond: impl FnMut(&mut Simulator) -> bool,
    ) -> Result<bool, SimError> {
        loop {
            if !cond(self) {
                return Ok(true);
            }
            if !self.step()? {
                return Ok(false);
            }
        }
    }

    /// Step until no events remain.
    pub fn run_until_idle(&mut self) -> Result<(), SimError> {
        while self.step()? {}
        Ok(())
    }

    // -------------------------------------------------------------- internals

    fn deliver(
        &mut self,
        link: LinkId,
        index: u64,
        copy: u8,
        packet: Vec<u8>,
    ) -> Result<(), SimError> {
        let now = self.now;
        let l = &mut self.links[link.0];
        l.stats.packets_delivered += 1;
        l.stats.bytes_delivered += packet.len() as u64;
        let (to, to_iface) = (l.to, l.to_iface);
        let ev = TraceEvent {
            time: now,
            link,
            index,
            copy,
            kind: TraceKind::Delivered,
            packet: &packet,
        };
        emit(&mut self.hooks, &mut self.captures, &ev);
        self.nodes[to.0].node.handle_packet(now, to_iface, packet);
        self.after_input(to)
    }

    /// Drain a node's transmissions, then re-arm its timer.
    fn after_input(&mut self, node: NodeId) -> Result<(), SimError> {
        let now = self.now;
        let mut n = 0usize;
        while let Some((iface, packet)) = self.nodes[node.0].node.poll_transmit(now) {
            n += 1;
            if n > self.config.max_transmits_per_wake {
                return Err(SimError::TransmitLivelock { node, at: now });
            }
            self.offer(node, iface, packet);
        }
        let slot = &mut self.nodes[node.0];
        let wanted = slot.node.poll_timeout();
        if wanted != slot.armed {
            slot.armed = wanted;
            if let Some((t, seq)) = slot.timer_key.take() {
                self.timers.remove(&(t, seq, node.0));
            }
            if let Some(t) = wanted {
                // A sequence number as a queued event would get: same-time
                // events keep their scheduling order.
                let seq = self.seq;
                self.seq += 1;
                let t = t.max(now);
                self.nodes[node.0].timer_key = Some((t, seq));
                self.timers.insert((t, seq, node.0));
            }
        }
        Ok(())
    }

    /// A node sends `packet` on `iface`: run it through the link model.
    fn offer(&mut self, node: NodeId, iface: usize, packet: Vec<u8>) {
        let Some(link_id) = self.nodes[node.0].egress.get(iface).copied().flatten() else {
            self.stats.unattached_packets += 1;
            return;
        };
        let now = self.now;
        let l = &mut self.links[link_id.0];
        let index = l.offered;
        l.offered += 1;
        l.stats.packets_sent += 1;
        l.stats.bytes_sent += packet.len() as u64;
        let ev = TraceEvent {
            time: now,
            link: link_id,
            index,
            copy: 0,
            kind: TraceKind::Sent,
            packet: &packet,
        };
        emit(&mut self.hooks, &mut self.captures, &ev);

        let l = &mut self.links[link_id.0];
        let info = PacketInfo {
            link: link_id,
            index,
            time: now,
            packet: &packet,
        };
        let mut dropped = false;
        let mut hold = Duration::ZERO;
        for rule in l.rules.iter_mut() {
            match rule(&info) {
                Verdict::Pass => {}
                Verdict::Drop => dropped = true,
                Verdict::Delay(d) => hold += d,
            }
        }
        if dropped {
            l.record_drop(crate::DropReason::Rule, packet.len());
            let ev = TraceEvent {
                time: now,
                link: link_id,
                index,
                copy: 0,
                kind: TraceKind::Dropped(crate::DropReason::Rule),
                packet: &packet,
            };
            emit(&mut self.hooks, &mut self.captures, &ev);
            return;
        }
        if l.roll_duplicate() {
            l.stats.packets_duplicated += 1;
            let dup = packet.clone();
            let ev = TraceEvent {
                time: now,
                link: link_id,
                index,
                copy: 1,
                kind: TraceKind::Duplicated,
                packet: &dup,
            };
            emit(&mut self.hooks, &mut self.captures, &ev);
            self.transmit_copy(link_id, index, 0, packet, hold);
            self.transmit_copy(link_id, index, 1, dup, Duration::ZERO);
        } else {
            self.transmit_copy(link_id, index, 0, packet, hold);
        }
    }

    fn transmit_copy(
        &mut self,
        link: LinkId,
        index: u64,
        copy: u8,
        packet: Vec<u8>,
        hold: Duration,
    ) {
        let now = self.now;
        let l = &mut self.links[link.0];
        match l.transmit(now, packet.len(), hold) {
            Outcome::Dropped(reason) => {
                l.record_drop(reason, packet.len());
                let ev = TraceEvent {
                    time: now,
                    link,
                    index,
                    copy,
                    kind: TraceKind::Dropped(reason),
                    packet: &packet,
                };
                emit(&mut self.hooks, &mut self.captures, &ev);
            }
            Outcome::Deliver(at) => self.push(
                at,
                EventKind::Deliver {
                    link,
                    index,
                    copy,
                    packet,
                },
            ),
        }
    }
}
