//! One Hollywood connection group over several paths (issue 34 item 2,
//! thesis §8.3.3's multipath future work): [`GroupTransport`] is itself a
//! [`MessageTransport`] over N inner transports, each bound to its own
//! local address, so every application written against the interface
//! runs over a group unchanged (docs/MULTIPATH.md).
//!
//! - **Dispatch.** A packet goes to the inner transport whose local
//!   address is its destination; [`GroupTransport::poll_transmit`] returns
//!   inner packets round-robin (the host routes each by its source address).
//! - **De-duplication without a header.** Every inner transport reports the
//!   sender's id in [`InMessage::id`] (TCP Hollywood's frame header, the
//!   QUIC and UDP record), and the group sends a message under the same id
//!   on every path, so the receiving group keeps the first copy of an id
//!   and drops the rest: a window of the last [`DEDUP_WINDOW`] ids seen.
//! - **Modes** ([`GroupMode`]): broadcast (every path), backup (the first
//!   live path in the order given; on a failure, switch and resend what
//!   is still live), aggregate (per message, the path with the earliest
//!   predicted delivery).
//! - **Failure detection** from silence: a path that has carried packets
//!   both ways and was given a message that nothing came back for during
//!   max(k·min RTT, floor) ([`GroupConfig`]) is down, as is a path whose
//!   inner transport reports [`TransportEvent::Failed`]. A packet arriving
//!   on a down path brings it back.
//! - **Heartbeats** on paths whose inner transport gives no feedback
//!   (UDP): while a path has data outstanding the sending group sends a
//!   small PING on the reserved sub-stream [`HEARTBEAT_SUBSTREAM`] every
//!   [`GroupConfig::heartbeat`]; the receiving group answers each with a
//!   PONG at once. The PONGs are the packets back that silence detection
//!   waits for, and their round trips give the path's min RTT.
//! - **Outcomes.** One event per message: `Acked` when any path acked it,
//!   `Expired` when every path that carried it gave up on it (TCP and TCP
//!   Hollywood never report `Acked`: a message one of their paths delivered
//!   gets no event, as on a single connection).
//! - **Ids and dependencies.** An inner connection gets ids in increasing
//!   order (TCP Hollywood's rule, thesis §4.2): a message whose id is not
//!   above the last one a path took is not given to that path. A
//!   `depends_on` naming a message the path did not carry is dropped for
//!   that path (the message travels as independent: it is delivered rather
//!   than held for a dependency that will never come on that path).

use crate::{
    ExpiryReason, Instant, MessageTransport, OutMessage, SendError, TransportEvent, TransportStats,
};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

/// Ids the receiving side remembers for de-duplication (a copy arriving
/// later than this many newer ids would be delivered twice).
pub const DEDUP_WINDOW: usize = 1 << 16;
/// Messages the sending side tracks (outcome, copy for a resend) at most;
/// past it the oldest is forgotten (no event). Lifetimed messages are
/// forgotten anyway [`TRACK_GRACE`] after their deadline.
pub const MAX_TRACKED: usize = 1 << 16;
/// How long past its deadline a message's record is kept for late events.
pub const TRACK_GRACE: Duration = Duration::from_secs(5);
/// After a close (or the first path's peer close), how long the group
/// waits for the other paths before reporting `Closed` (`PeerClosed`)
/// anyway: a dead path never completes its close.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// The sub-stream of group heartbeats (PING and PONG, on paths without
/// feedback): reserved on such paths, never delivered to the application.
/// (The FEC layer's is 0xFFFE.)
pub const HEARTBEAT_SUBSTREAM: u16 = 0xFFFD;
/// Heartbeat payload: kind (0 PING, 1 PONG) and the PING's send time
/// (engine nanoseconds, big-endian), echoed by the PONG.
const HEARTBEAT_LEN: usize = 9;
const PING: u8 = 0;
const PONG: u8 = 1;
/// Width of one delivery-rate sample window (aggregate mode).
const RATE_WINDOW: Duration = Duration::from_millis(50);
/// Rate assumed for a path before it was measured while busy.
const INITIAL_RATE_BPS: f64 = 1e6;

/// How a group uses its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupMode {
    /// Every message on every path; the receiver keeps the first copy.
    Broadcast,
    /// The first live path in the order given; on its failure the next,
    /// with the still-live messages it carried resent there.
    Backup,
    /// Per message, the path with the earliest predicted delivery
    /// (min RTT / 2 + backlog / measured rate); a failed path's live
    /// messages are resent on the others.
    Aggregate,
}

impl GroupMode {
    /// The name (`broadcast`, `backup`, `aggregate`).
    pub fn name(self) -> &'static str {
        match self {
            GroupMode::Broadcast => "broadcast",
            GroupMode::Backup => "backup",
            GroupMode::Aggregate => "aggregate",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<GroupMode> {
        match s {
            "broadcast" => Some(GroupMode::Broadcast),
            "backup" => Some(GroupMode::Backup),
            "aggregate" => Some(GroupMode::Aggregate),
            _ => None,
        }
    }
}

/// Group parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    /// The mode.
    pub mode: GroupMode,
    /// A path is down after `silence_rtts` × its min RTT without a packet
    /// back for one it sent (default 2)...
    pub silence_rtts: u32,
    /// ...or this long, whichever is longer (default 50 ms).
    pub silence_floor: Duration,
    /// Resend the still-live messages of a failed path on another
    /// (default on; off shows what the resend is worth).
    pub resend: bool,
    /// Heartbeat interval on paths whose inner transport gives no
    /// feedback (UDP): a PING this often while the path has data
    /// outstanding (default 10 ms; `None`: no heartbeats, so no failure
    /// detection on such paths).
    pub heartbeat: Option<Duration>,
}

impl GroupConfig {
    /// A mode with the defaults.
    pub fn new(mode: GroupMode) -> GroupConfig {
        GroupConfig {
            mode,
            silence_rtts: 2,
            silence_floor: Duration::from_millis(50),
            resend: true,
            heartbeat: Some(Duration::from_millis(10)),
        }
    }
}

/// Counters of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Copies dropped by de-duplication (receiving side).
    pub duplicates_dropped: u64,
    /// Messages resent on another path after a failure.
    pub resent: u64,
    /// Still-live messages of a failed path that could not be resent
    /// (no other path, id order, no room).
    pub resend_skipped: u64,
    /// Copies not given to a path because their id was not above the last
    /// one it took.
    pub id_order_skipped: u64,
    /// Dependencies dropped because the path did not carry the message
    /// named.
    pub dependencies_dropped: u64,
    /// (path, when) each time a path was declared down.
    pub failures: Vec<(usize, Instant)>,
    /// (path, when) each time a down path came back.
    pub recoveries: Vec<(usize, Instant)>,
    /// Heartbeat PINGs sent (paths without feedback).
    pub pings_sent: u64,
    /// PONGs received for them.
    pub pongs_received: u64,
    /// (from, to, when) each time backup mode changed its active path.
    pub switches: Vec<(usize, usize, Instant)>,
    /// Messages given to each path (first copies and resends).
    pub sent_per_path: Vec<u64>,
}

/// A copy of a message as one path delivered it (receiving side, when
/// recording: [`GroupTransport::record_arrivals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathArrival {
    /// The path.
    pub path: usize,
    /// The message.
    pub id: u32,
    /// Delivered by that path's transport at.
    pub arrival: Instant,
}

struct Path {
    t: Box<dyn MessageTransport>,
    local: IpAddr,
    connected: bool,
    peer_closed: bool,
    closed: bool,
    failed: bool,
    down: bool,
    heard: bool,
    unanswered_since: Option<Instant>,
    last_id: Option<u32>,
    /// Bytes given to the path not yet seen leaving it (estimate).
    backlog: u64,
    window_start: Option<Instant>,
    window_bytes: u64,
    window_busy: bool,
    rate_bps: Option<f64>,
    /// Heartbeats on this path (no feedback from the inner transport).
    hb: bool,
    hb_last_ping: Option<Instant>,
    hb_min_rtt: Option<Duration>,
    hb_next_id: u32,
}

impl Path {
    fn usable(&self) -> bool {
        self.connected && !self.failed && !self.closed
    }
    fn live(&self) -> bool {
        self.usable() && !self.down
    }
    fn rtt(&self) -> Option<Duration> {
        self.t.min_rtt().or(self.t.stats().srtt).or(self.hb_min_rtt)
    }
    fn silence(&self, cfg: &GroupConfig) -> Duration {
        let k = self.rtt().unwrap_or(Duration::ZERO) * cfg.silence_rtts;
        k.max(cfg.silence_floor)
    }
    fn takes(&self, id: u32) -> bool {
        self.last_id.is_none_or(|l| (id.wrapping_sub(l) as i32) > 0)
    }
    /// Predicted one-way delivery of `bytes` more.
    fn predict(&self, bytes: u64) -> Duration {
        let one_way = self.rtt().unwrap_or(Duration::ZERO) / 2;
        let rate = self.rate_bps.unwrap_or(INITIAL_RATE_BPS).max(1e4);
        one_way + Duration::from_secs_f64((self.backlog + bytes) as f64 * 8.0 / rate)
    }
    fn on_transmit(&mut self, now: Instant, bytes: u64) {
        self.backlog = self.backlog.saturating_sub(bytes);
        let start = *self.window_start.get_or_insert(now);
        self.window_bytes += bytes;
        let elapsed = now - start;
        if elapsed >= RATE_WINDOW {
            let sample = self.window_bytes as f64 * 8.0 / elapsed.as_secs_f64();
            self.rate_bps = Some(match self.rate_bps {
                // Busy: the window measured what the path lets out.
                Some(r) if self.window_busy => 0.75 * r + 0.25 * sample,
                // Idle: it carried at least this much.
                Some(r) => r.max(sample),
                None => sample.max(INITIAL_RATE_BPS),
            });
            self.window_start = Some(now);
            self.window_bytes = 0;
            self.window_busy = self.backlog > 0;
        }
        if self.backlog > 0 {
            self.window_busy = true;
        }
    }
}

struct Tracked {
    copy: Option<OutMessage>,
    deadline: Option<Instant>,
    carriers: u64,
    gave_up: u64,
    reason: ExpiryReason,
}

/// A group of message transports over disjoint paths, itself a
/// [`MessageTransport`] (module docs).
pub struct GroupTransport {
    cfg: GroupConfig,
    paths: Vec<Path>,
    active: usize,
    tracked: BTreeMap<u32, Tracked>,
    seen: HashSet<u32>,
    seen_order: VecDeque<u32>,
    events: VecDeque<TransportEvent>,
    connected_reported: bool,
    peer_closed_reported: bool,
    closed_reported: bool,
    failed_reported: bool,
    close_at: Option<Instant>,
    peer_close_at: Option<Instant>,
    next_tx: usize,
    stats: GroupStats,
    sent: u64,
    delivered: u64,
    expired: u64,
    not_ours: u64,
    arrivals: Option<Vec<PathArrival>>,
    /// The latest `now` of any input (for events drained without one).
    now: Instant,
}

impl std::fmt::Debug for GroupTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTransport")
            .field("mode", &self.cfg.mode)
            .field("paths", &self.paths.len())
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

fn bit(i: usize) -> u64 {
    1u64 << i
}

/// The source and destination of a whole IP packet, and its transport
/// payload length (TCP or UDP payload: what a path's backlog drains by).
fn ip_info(packet: &[u8]) -> Option<(IpAddr, IpAddr, u64)> {
    match packet.first()? >> 4 {
        4 => {
            let s: [u8; 4] = packet.get(12..16)?.try_into().ok()?;
            let d: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            let l4 = l4_header(*packet.get(9)?, packet.get(ihl..)?);
            Some((
                s.into(),
                d.into(),
                packet.len().saturating_sub(ihl + l4) as u64,
            ))
        }
        6 => {
            let s: [u8; 16] = packet.get(8..24)?.try_into().ok()?;
            let d: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
            let l4 = l4_header(*packet.get(6)?, packet.get(40..)?);
            Some((
                s.into(),
                d.into(),
                packet.len().saturating_sub(40 + l4) as u64,
            ))
        }
        _ => None,
    }
}

fn l4_header(proto: u8, rest: &[u8]) -> usize {
    match proto {
        6 => rest.get(12).map_or(20, |b| usize::from(b >> 4) * 4),
        17 => 8,
        _ => 0,
    }
}

impl GroupTransport {
    /// A group over `paths`: each inner transport with the local address
    /// it is bound to, in order of preference (backup mode uses the first
    /// live one). At most 64 paths.
    pub fn new(cfg: GroupConfig, paths: Vec<(Box<dyn MessageTransport>, IpAddr)>) -> Self {
        assert!(
            !paths.is_empty() && paths.len() <= 64,
            "a group has 1 to 64 paths"
        );
        let n = paths.len();
        GroupTransport {
            cfg,
            paths: paths
                .into_iter()
                .map(|(t, local)| Path {
                    hb: cfg.heartbeat.is_some() && t.as_any().is::<crate::udp::UdpTransport>(),
                    hb_last_ping: None,
                    hb_min_rtt: None,
                    hb_next_id: 0,
                    t,
                    local,
                    connected: false,
                    peer_closed: false,
                    closed: false,
                    failed: false,
                    down: false,
                    heard: false,
                    unanswered_since: None,
                    last_id: None,
                    backlog: 0,
                    window_start: None,
                    window_bytes: 0,
                    window_busy: false,
                    rate_bps: None,
                })
                .collect(),
            active: 0,
            tracked: BTreeMap::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            events: VecDeque::new(),
            connected_reported: false,
            peer_closed_reported: false,
            closed_reported: false,
            failed_reported: false,
            close_at: None,
            peer_close_at: None,
            next_tx: 0,
            stats: GroupStats {
                sent_per_path: vec![0; n],
                ..GroupStats::default()
            },
            sent: 0,
            delivered: 0,
            expired: 0,
            not_ours: 0,
            arrivals: None,
            now: Instant::ZERO,
        }
    }

    /// Keep every copy each path delivers ([`GroupTransport::arrivals`]).
    pub fn record_arrivals(&mut self) {
        self.arrivals.get_or_insert_with(Vec::new);
    }

    /// Every copy each path delivered, duplicates included, if recording.
    pub fn arrivals(&self) -> &[PathArrival] {
        self.arrivals.as_deref().unwrap_or(&[])
    }

    /// The counters.
    pub fn group_stats(&self) -> &GroupStats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    /// Paths in the group.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Inner transport `i`.
    pub fn path(&self, i: usize) -> Option<&dyn MessageTransport> {
        self.paths.get(i).map(|p| &*p.t)
    }

    /// Whether path `i` is currently considered down.
    pub fn is_down(&self, i: usize) -> bool {
        self.paths.get(i).is_some_and(|p| p.down || p.failed)
    }

    /// The path backup mode sends on.
    pub fn active(&self) -> usize {
        self.active
    }

    /// Packets whose destination is no path's address.
    pub fn packets_not_ours(&self) -> u64 {
        self.not_ours
    }

    fn drain(&mut self, now: Instant) {
        self.now = self.now.max(now);
        for i in 0..self.paths.len() {
            while let Some(ev) = self.paths[i].t.poll_event() {
                self.on_inner(now, i, ev);
            }
        }
        self.check_closes(now);
    }

    fn on_inner(&mut self, now: Instant, i: usize, ev: TransportEvent) {
        match ev {
            TransportEvent::Connected => {
                self.paths[i].connected = true;
                if !self.connected_reported {
                    self.connected_reported = true;
                    self.events.push_back(TransportEvent::Connected);
                }
            }
            TransportEvent::Message(m) => {
                if self.paths[i].hb && m.substream == HEARTBEAT_SUBSTREAM {
                    self.on_heartbeat(now, i, &m.payload);
                    return;
                }
                if let Some(a) = &mut self.arrivals {
                    a.push(PathArrival {
                        path: i,
                        id: m.id,
                        arrival: m.arrival,
                    });
                }
                if !self.seen.insert(m.id) {
                    self.stats.duplicates_dropped += 1;
                    return;
                }
                self.seen_order.push_back(m.id);
                if self.seen_order.len() > DEDUP_WINDOW {
                    if let Some(old) = self.seen_order.pop_front() {
                        self.seen.remove(&old);
                    }
                }
                self.delivered += 1;
                self.events.push_back(TransportEvent::Message(m));
            }
            TransportEvent::Expired {
                id,
                substream,
                reason,
            } => {
                let Some(t) = self.tracked.get_mut(&id) else {
                    return;
                };
                t.gave_up |= bit(i);
                t.reason = reason;
                if reason == ExpiryReason::BeforeSend {
                    let len = t.copy.as_ref().map_or(0, |c| c.payload.len() as u64);
                    let p = &mut self.paths[i];
                    p.backlog = p.backlog.saturating_sub(len);
                }
                if t.gave_up & t.carriers == t.carriers {
                    self.tracked.remove(&id);
                    self.expired += 1;
                    self.events.push_back(TransportEvent::Expired {
                        id,
                        substream,
                        reason,
                    });
                }
            }
            TransportEvent::Acked { id } => {
                if self.tracked.remove(&id).is_some() {
                    self.events.push_back(TransportEvent::Acked { id });
                }
            }
            TransportEvent::Writable => {
                if !matches!(self.events.back(), Some(TransportEvent::Writable)) {
                    self.events.push_back(TransportEvent::Writable);
                }
            }
            TransportEvent::PeerClosed => {
                self.paths[i].peer_closed = true;
                self.peer_close_at.get_or_insert(now + CLOSE_WAIT);
            }
            TransportEvent::Closed => self.paths[i].closed = true,
            TransportEvent::Failed(e) => {
                self.paths[i].failed = true;
                if self.paths.iter().all(|p| p.failed) {
                    if !self.failed_reported {
                        self.failed_reported = true;
                        self.events.push_back(TransportEvent::Failed(e));
                    }
                } else {
                    self.declare_down(now, i);
                }
            }
        }
    }

    fn check_closes(&mut self, now: Instant) {
        let done = |p: &Path| p.failed || p.down || p.closed;
        if !self.peer_closed_reported
            && self.paths.iter().any(|p| p.peer_closed)
            && (self
                .paths
                .iter()
                .all(|p| p.peer_closed || p.failed || p.down)
                || self.peer_close_at.is_some_and(|t| t <= now))
        {
            self.peer_closed_reported = true;
            self.events.push_back(TransportEvent::PeerClosed);
        }
        if !self.closed_reported
            && self.close_at.is_some()
            && (self.paths.iter().all(done) || self.close_at.is_some_and(|t| t <= now))
        {
            self.closed_reported = true;
            self.events.push_back(TransportEvent::Closed);
        }
    }

    /// Path `i` was declared down (silence or inner failure).
    fn declare_down(&mut self, now: Instant, i: usize) {
        if !self.paths[i].down {
            self.paths[i].down = true;
            self.stats.failures.push((i, now));
        }
        if self.cfg.mode == GroupMode::Backup && i == self.active {
            if let Some(next) = (0..self.paths.len()).find(|&j| self.paths[j].live()) {
                self.stats.switches.push((i, next, now));
                self.active = next;
            }
        }
        if self.cfg.mode == GroupMode::Broadcast || !self.cfg.resend {
            return;
        }
        // Resend, in id order, what only dead paths carry and is still live.
        let ids: Vec<u32> = self
            .tracked
            .iter()
            .filter(|(_, t)| {
                t.carriers & bit(i) != 0
                    && t.deadline.is_none_or(|d| d > now)
                    && !(0..self.paths.len())
                        .any(|j| t.carriers & bit(j) != 0 && self.paths[j].live())
            })
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            let Some(t) = self.tracked.get(&id) else {
                continue;
            };
            let Some(mut m) = t.copy.clone() else {
                self.stats.resend_skipped += 1;
                continue;
            };
            m.lifetime = t.deadline.map(|d| d - now);
            let deadline = t.deadline;
            match self.targets(now, &m, deadline).into_iter().next() {
                Some(j) if self.offer(now, j, &m) => {
                    self.stats.resent += 1;
                }
                _ => self.stats.resend_skipped += 1,
            }
        }
    }

    /// Paths to offer a message to, in order (broadcast: all of them).
    fn targets(&self, _now: Instant, m: &OutMessage, _deadline: Option<Instant>) -> Vec<usize> {
        let live: Vec<usize> = (0..self.paths.len())
            .filter(|&j| self.paths[j].live())
            .collect();
        match self.cfg.mode {
            GroupMode::Broadcast => (0..self.paths.len())
                .filter(|&j| self.paths[j].usable())
                .collect(),
            GroupMode::Backup => {
                if self.paths[self.active].live() {
                    vec![self.active]
                } else {
                    live.into_iter().take(1).collect()
                }
            }
            GroupMode::Aggregate => {
                // Earliest predicted delivery first; a path that meets the
                // deadline always beats one that does not, so this is "the
                // earliest that meets it", then the least late.
                let size = m.payload.len() as u64;
                let mut v = live;
                v.sort_by_key(|&j| (self.paths[j].predict(size), j));
                v
            }
        }
    }

    /// Give `m` to path `j`; whether it took it.
    fn offer(&mut self, now: Instant, j: usize, m: &OutMessage) -> bool {
        if !self.paths[j].takes(m.id) {
            self.stats.id_order_skipped += 1;
            return false;
        }
        let mut inner = m.clone();
        if let Some(dep) = m.depends_on {
            if self
                .tracked
                .get(&dep)
                .is_none_or(|t| t.carriers & bit(j) == 0)
            {
                inner.depends_on = None;
                self.stats.dependencies_dropped += 1;
            }
        }
        match self.paths[j].t.send(now, inner) {
            Ok(()) => {
                let p = &mut self.paths[j];
                // Data outstanding: something must come back.
                p.unanswered_since.get_or_insert(now);
                p.last_id = Some(m.id);
                p.backlog += m.payload.len() as u64;
                self.stats.sent_per_path[j] += 1;
                if let Some(t) = self.tracked.get_mut(&m.id) {
                    t.carriers |= bit(j);
                    t.gave_up &= !bit(j);
                }
                true
            }
            Err(_) => false,
        }
    }

    fn forget_old(&mut self, now: Instant) {
        while let Some((&id, t)) = self.tracked.first_key_value() {
            let stale = t.deadline.is_some_and(|d| d + TRACK_GRACE < now);
            if stale || self.tracked.len() > MAX_TRACKED {
                self.tracked.remove(&id);
            } else {
                break;
            }
        }
    }

    /// When path `p` is due a PING: it has heartbeats, is usable (a down
    /// path too: a PONG brings it back) and has data outstanding.
    fn ping_due(&self, p: &Path) -> Option<Instant> {
        let interval = self.cfg.heartbeat?;
        if !p.hb || !p.usable() {
            return None;
        }
        let since = p.unanswered_since?;
        Some(p.hb_last_ping.map_or(since, |l| (l + interval).max(since)))
    }

    fn send_heartbeat(&mut self, now: Instant, i: usize, kind: u8, time_ns: u64) {
        let p = &mut self.paths[i];
        let mut payload = Vec::with_capacity(HEARTBEAT_LEN);
        payload.push(kind);
        payload.extend_from_slice(&time_ns.to_be_bytes());
        let mut m = OutMessage::new(p.hb_next_id, payload);
        m.substream = HEARTBEAT_SUBSTREAM;
        m.fec = false;
        p.hb_next_id = p.hb_next_id.wrapping_add(1);
        if p.t.send(now, m).is_ok() && kind == PING {
            self.stats.pings_sent += 1;
        }
    }

    /// A heartbeat arrived on path `i`: answer a PING, measure a PONG.
    fn on_heartbeat(&mut self, now: Instant, i: usize, payload: &[u8]) {
        let (Some(&kind), Some(t)) = (payload.first(), payload.get(1..HEARTBEAT_LEN)) else {
            return;
        };
        let Ok(t) = <[u8; 8]>::try_from(t) else {
            return;
        };
        let time_ns = u64::from_be_bytes(t);
        match kind {
            PING => self.send_heartbeat(now, i, PONG, time_ns),
            PONG => {
                let sent = Instant::from_nanos(time_ns);
                if sent <= now {
                    self.stats.pongs_received += 1;
                    let rtt = now - sent;
                    let p = &mut self.paths[i];
                    p.hb_min_rtt = Some(p.hb_min_rtt.map_or(rtt, |m| m.min(rtt)));
                }
            }
            _ => {}
        }
    }

    fn silence_deadline(&self, p: &Path) -> Option<Instant> {
        if !p.heard || p.down || p.failed || p.closed {
            return None;
        }
        Some(p.unanswered_since? + p.silence(&self.cfg))
    }
}

impl MessageTransport for GroupTransport {
    fn name(&self) -> &'static str {
        match self.cfg.mode {
            GroupMode::Broadcast => "group-broadcast",
            GroupMode::Backup => "group-backup",
            GroupMode::Aggregate => "group-aggregate",
        }
    }

    fn start(&mut self, now: Instant) {
        for p in &mut self.paths {
            p.t.start(now);
        }
        self.drain(now);
    }

    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        let dst = ip_info(packet).map(|(_, d, _)| d);
        let Some(i) = self.paths.iter().position(|p| Some(p.local) == dst) else {
            self.not_ours += 1;
            return;
        };
        let p = &mut self.paths[i];
        p.heard = true;
        p.unanswered_since = None;
        p.t.handle_packet(now, packet);
        if p.down && !p.failed {
            p.down = false;
            self.stats.recoveries.push((i, now));
            if self.cfg.mode == GroupMode::Backup && i < self.active {
                self.stats.switches.push((self.active, i, now));
                self.active = i;
            }
        }
        self.drain(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        for p in &mut self.paths {
            if p.t.poll_timeout().is_some_and(|t| t <= now) {
                p.t.handle_timeout(now);
            }
        }
        self.drain(now);
        for i in 0..self.paths.len() {
            if self
                .silence_deadline(&self.paths[i])
                .is_some_and(|t| t <= now)
            {
                self.declare_down(now, i);
            }
        }
        for i in 0..self.paths.len() {
            if self.ping_due(&self.paths[i]).is_some_and(|t| t <= now) {
                self.paths[i].hb_last_ping = Some(now);
                self.send_heartbeat(now, i, PING, now.as_nanos());
            }
        }
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let n = self.paths.len();
        for k in 0..n {
            let i = (self.next_tx + k) % n;
            if let Some(pkt) = self.paths[i].t.poll_transmit(now) {
                self.next_tx = (i + 1) % n;
                let bytes = ip_info(&pkt).map_or(0, |(_, _, b)| b);
                self.paths[i].on_transmit(now, bytes);
                return Some(pkt);
            }
        }
        None
    }

    /// A buffer the host is done with goes to the path polled first for
    /// the next packet, the likeliest to build one.
    fn recycle(&mut self, packet: Vec<u8>) {
        if let Some(p) = self.paths.get_mut(self.next_tx) {
            p.t.recycle(packet);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.paths
            .iter()
            .filter_map(|p| p.t.poll_timeout())
            .chain(self.paths.iter().filter_map(|p| self.silence_deadline(p)))
            .chain(self.paths.iter().filter_map(|p| self.ping_due(p)))
            .chain(self.close_at.filter(|_| !self.closed_reported))
            .chain(self.peer_close_at.filter(|_| !self.peer_closed_reported))
            .min()
    }

    fn send(&mut self, now: Instant, msg: OutMessage) -> Result<(), SendError> {
        self.send_ref(now, &msg)
    }

    fn send_ref(&mut self, now: Instant, msg: &OutMessage) -> Result<(), SendError> {
        if !self.paths.iter().any(Path::usable) {
            return Err(SendError::NotConnected);
        }
        self.forget_old(now);
        let deadline = msg.lifetime.map(|l| now + l);
        let keep = self.cfg.mode != GroupMode::Broadcast && self.cfg.resend;
        self.tracked.insert(
            msg.id,
            Tracked {
                copy: keep.then(|| msg.clone()),
                deadline,
                carriers: 0,
                gave_up: 0,
                reason: ExpiryReason::BeforeSend,
            },
        );
        let targets = self.targets(now, msg, deadline);
        let mut took = false;
        for j in targets {
            if self.offer(now, j, msg) {
                took = true;
                if self.cfg.mode != GroupMode::Broadcast {
                    break;
                }
            }
        }
        if !took {
            self.tracked.remove(&msg.id);
            return Err(SendError::WouldBlock);
        }
        self.sent += 1;
        self.drain(now);
        Ok(())
    }

    fn min_rtt(&self) -> Option<Duration> {
        self.paths
            .iter()
            .filter(|p| p.live())
            .filter_map(Path::rtt)
            .min()
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        if self.events.is_empty() {
            // Inner events raised while transmitting.
            for i in 0..self.paths.len() {
                while let Some(ev) = self.paths[i].t.poll_event() {
                    self.on_inner(self.now, i, ev);
                }
            }
        }
        self.events.pop_front()
    }

    fn close(&mut self, now: Instant) {
        for p in &mut self.paths {
            p.t.close(now);
        }
        self.close_at.get_or_insert(now + CLOSE_WAIT);
        self.drain(now);
    }

    fn stats(&self) -> TransportStats {
        let mut s = TransportStats::default();
        for p in &self.paths {
            let t = p.t.stats();
            s.packets_sent += t.packets_sent;
            s.bytes_sent += t.bytes_sent;
            s.packets_received += t.packets_received;
            s.packets_lost += t.packets_lost;
            s.streams_reset += t.streams_reset;
            s.streams_reset_received += t.streams_reset_received;
            s.malformed += t.malformed;
            s.rx_queue_dropped += t.rx_queue_dropped;
            s.srtt = match (s.srtt, t.srtt) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        s.messages_sent = self.sent;
        s.messages_delivered = self.delivered;
        s.messages_expired = self.expired;
        s
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::Deployment;
    use hollywood_tcp::Config;
    use std::net::{Ipv4Addr, SocketAddr};

    fn ip(path: usize, host: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, path as u8 + 1, 0, host))
    }

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// A transport that takes every message and reports what the test
    /// pushes (state shared with the test).
    #[derive(Default)]
    struct FakeState {
        sent: Vec<OutMessage>,
        events: VecDeque<TransportEvent>,
        recycled: usize,
    }
    type Shared = std::sync::Arc<std::sync::Mutex<FakeState>>;
    struct Fake(Shared);

    impl MessageTransport for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn start(&mut self, _: Instant) {
            self.0
                .lock()
                .unwrap()
                .events
                .push_back(TransportEvent::Connected);
        }
        fn handle_packet(&mut self, _: Instant, _: &[u8]) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn recycle(&mut self, _: Vec<u8>) {
            self.0.lock().unwrap().recycled += 1;
        }
        fn poll_transmit(&mut self, _: Instant) -> Option<Vec<u8>> {
            None
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn send(&mut self, _: Instant, msg: OutMessage) -> Result<(), SendError> {
            self.0.lock().unwrap().sent.push(msg);
            Ok(())
        }
        fn poll_event(&mut self) -> Option<TransportEvent> {
            self.0.lock().unwrap().events.pop_front()
        }
        fn close(&mut self, _: Instant) {}
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    fn fakes(mode: GroupMode, n: usize) -> (GroupTransport, Vec<Shared>) {
        let shared: Vec<Shared> = (0..n).map(|_| Shared::default()).collect();
        let paths = shared
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    Box::new(Fake(s.clone())) as Box<dyn MessageTransport>,
                    ip(i, 1),
                )
            })
            .collect();
        let mut g = GroupTransport::new(GroupConfig::new(mode), paths);
        g.start(at(0));
        (g, shared)
    }

    fn sent(f: &Shared) -> Vec<OutMessage> {
        f.lock().unwrap().sent.clone()
    }

    fn push(f: &Shared, ev: TransportEvent) {
        f.lock().unwrap().events.push_back(ev);
    }

    fn events(g: &mut GroupTransport) -> Vec<TransportEvent> {
        std::iter::from_fn(|| g.poll_event()).collect()
    }

    fn msg(id: u32, lifetime_ms: u64) -> OutMessage {
        OutMessage {
            lifetime: Some(Duration::from_millis(lifetime_ms)),
            ..OutMessage::new(id, vec![id as u8; 100])
        }
    }

    #[test]
    fn recycled_buffers_reach_an_inner_transport() {
        let (mut g, f) = fakes(GroupMode::Broadcast, 2);
        for _ in 0..4 {
            g.recycle(Vec::with_capacity(1500));
        }
        let total: usize = f.iter().map(|s| s.lock().unwrap().recycled).sum();
        assert_eq!(total, 4);
    }

    #[test]
    fn one_outcome_per_message() {
        let (mut g, f) = fakes(GroupMode::Broadcast, 2);
        assert_eq!(events(&mut g), vec![TransportEvent::Connected]);
        g.send(at(1), msg(1, 200)).unwrap();
        g.send(at(1), msg(2, 200)).unwrap();
        assert_eq!(sent(&f[0]).len(), 2);
        assert_eq!(sent(&f[1]).len(), 2);
        let expired = |id| TransportEvent::Expired {
            id,
            substream: 0,
            reason: ExpiryReason::Abandoned,
        };
        // Expired only when every carrier gave up.
        push(&f[0], expired(1));
        assert_eq!(events(&mut g), vec![]);
        push(&f[1], expired(1));
        assert_eq!(events(&mut g), vec![expired(1)]);
        // Acked when the first path acks; the second ack is silent.
        push(&f[1], TransportEvent::Acked { id: 2 });
        push(&f[0], TransportEvent::Acked { id: 2 });
        assert_eq!(events(&mut g), vec![TransportEvent::Acked { id: 2 }]);
    }

    #[test]
    fn failure_switches_resends_and_keeps_ids_and_dependencies_valid() {
        let (mut g, f) = fakes(GroupMode::Backup, 2);
        let _ = events(&mut g);
        g.send(at(1), msg(1, 200)).unwrap();
        let mut m2 = msg(2, 200);
        m2.depends_on = Some(1);
        g.send(at(2), m2).unwrap();
        g.send(at(3), msg(3, 10)).unwrap();
        assert_eq!(sent(&f[0]).len(), 3);
        assert!(sent(&f[1]).is_empty());
        push(&f[0], TransportEvent::Failed("gone".into()));
        g.handle_timeout(at(50));
        // Switched; 1 and 2 are live and resent, 3 is dead (10 ms).
        assert_eq!(g.active(), 1);
        let ids: Vec<u32> = sent(&f[1]).iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![1, 2]);
        // The dependency was carried there, so it stays; the lifetime is
        // what is left.
        let on_b = sent(&f[1]);
        assert_eq!(on_b[1].depends_on, Some(1));
        assert_eq!(on_b[0].lifetime, Some(Duration::from_millis(151)));
        // A dependency on a message the path never carried is dropped.
        let mut m5 = msg(5, 200);
        m5.depends_on = Some(3);
        g.send(at(60), m5).unwrap();
        assert_eq!(sent(&f[1])[2].depends_on, None);
        assert_eq!(g.group_stats().dependencies_dropped, 1);
        assert_eq!(g.group_stats().resent, 2);
        assert_eq!(g.group_stats().switches, vec![(0, 1, at(50))]);
    }

    #[test]
    fn ids_stay_increasing_per_path() {
        let (mut g, _f) = fakes(GroupMode::Broadcast, 1);
        g.send(at(1), msg(7, 200)).unwrap();
        assert_eq!(g.send(at(1), msg(6, 200)), Err(SendError::WouldBlock));
        assert_eq!(g.group_stats().id_order_skipped, 1);
    }

    /// Two TCP Hollywood paths with `one_way` each way; packets on a dead
    /// path vanish.
    struct Net {
        a: GroupTransport,
        b: GroupTransport,
        flight: Vec<(Instant, bool, Vec<u8>)>,
        dead: Option<usize>,
        got: Vec<u32>,
    }

    impl Net {
        fn new(mode: GroupMode, resend: bool) -> Net {
            Net::with(mode, resend, false, true)
        }

        /// UDP paths, with or without heartbeats.
        fn udp(mode: GroupMode, heartbeat: bool) -> Net {
            Net::with(mode, true, true, heartbeat)
        }

        fn with(mode: GroupMode, resend: bool, udp: bool, heartbeat: bool) -> Net {
            let (mut tx, mut rx) = (Vec::new(), Vec::new());
            for i in 0..2 {
                let (sa, sb) = (
                    SocketAddr::new(ip(i, 1), 4000),
                    SocketAddr::new(ip(i, 2), 5004),
                );
                let (a, b): (Box<dyn MessageTransport>, Box<dyn MessageTransport>) = if udp {
                    (
                        Box::new(crate::udp::UdpTransport::new(sa, Some(sb))),
                        Box::new(crate::udp::UdpTransport::new(sb, None).reply_to_peer()),
                    )
                } else {
                    let (a, b) =
                        Deployment::Hollywood.endpoints(&Config::default(), sa, sb, 3 + i as u64);
                    (Box::new(a), Box::new(b))
                };
                tx.push((a, ip(i, 1)));
                rx.push((b, ip(i, 2)));
            }
            let heartbeat = if heartbeat {
                GroupConfig::new(mode).heartbeat
            } else {
                None
            };
            let cfg = GroupConfig {
                resend,
                heartbeat,
                ..GroupConfig::new(mode)
            };
            let mut a = GroupTransport::new(cfg, tx);
            let rx_cfg = GroupConfig {
                heartbeat,
                ..GroupConfig::new(GroupMode::Broadcast)
            };
            let mut b = GroupTransport::new(rx_cfg, rx);
            a.start(at(0));
            b.start(at(0));
            Net {
                a,
                b,
                flight: Vec::new(),
                dead: None,
                got: Vec::new(),
            }
        }

        fn step(&mut self, now: Instant) {
            let one_way = Duration::from_millis(10);
            let due: Vec<_> = {
                let (d, keep) = self.flight.drain(..).partition(|(t, _, _)| *t <= now);
                self.flight = keep;
                d
            };
            for (_, to_b, p) in due {
                if to_b {
                    self.b.handle_packet(now, &p);
                } else {
                    self.a.handle_packet(now, &p);
                }
            }
            self.a.handle_timeout(now);
            self.b.handle_timeout(now);
            for (to_b, g) in [(true, &mut self.a), (false, &mut self.b)] {
                while let Some(p) = g.poll_transmit(now) {
                    let path = usize::from(p[13]) - 1;
                    if self.dead != Some(path) {
                        self.flight.push((now + one_way, to_b, p));
                    }
                }
            }
            while let Some(ev) = self.b.poll_event() {
                if let TransportEvent::Message(m) = ev {
                    self.got.push(m.id);
                }
            }
            while self.a.poll_event().is_some() {}
        }

        /// 1 ms ticks to `end_ms`; a message every 5 ms from 100 ms to
        /// 600 ms (1 s lifetime); path 0 dies at 300 ms.
        fn run(&mut self, end_ms: u64) {
            let mut id = 0;
            for ms in 0..end_ms {
                if ms == 300 {
                    self.dead = Some(0);
                }
                if (100..600).contains(&ms) && ms % 5 == 0 {
                    self.a.send(at(ms), msg(id, 1000)).unwrap();
                    id += 1;
                }
                self.step(at(ms));
            }
        }
    }

    #[test]
    fn broadcast_delivers_each_message_once_through_a_failure() {
        let mut n = Net::new(GroupMode::Broadcast, true);
        n.run(1500);
        assert_eq!(n.got, (0..100).collect::<Vec<u32>>());
        assert!(n.b.group_stats().duplicates_dropped >= 40);
    }

    #[test]
    fn backup_detects_silence_switches_within_a_few_rtts_and_resends() {
        let mut n = Net::new(GroupMode::Backup, true);
        n.run(1500);
        let s = n.a.group_stats().clone();
        let (path, when) = s.failures[0];
        assert_eq!(path, 0);
        // RTT 20 ms: silence of max(2 RTT, 50 ms) after the first
        // unanswered packet.
        assert!(when > at(300) && when <= at(360), "{when:?}");
        assert_eq!(s.switches[0].1, 1);
        assert!(s.resent > 0);
        let mut got = n.got.clone();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got, (0..100).collect::<Vec<u32>>());
        // Without the resend what was in flight on path 0 is lost.
        let mut n = Net::new(GroupMode::Backup, false);
        n.run(1500);
        assert!(n.got.len() < 100, "{}", n.got.len());
    }

    /// UDP gives no feedback: with heartbeats (PING every 10 ms while data
    /// is outstanding, PONG at once) backup detects the failure from the
    /// silence, switches and resends, and no heartbeat reaches the
    /// application; without them the failure is never seen.
    #[test]
    fn udp_backup_detects_failure_by_heartbeat() {
        let mut n = Net::udp(GroupMode::Backup, true);
        n.run(1500);
        let s = n.a.group_stats().clone();
        assert!(s.pings_sent > 0 && s.pongs_received > 0, "{s:?}");
        let (path, when) = s.failures[0];
        assert_eq!(path, 0);
        // RTT 20 ms (measured by the PONGs): silence of max(2 RTT, 50 ms)
        // after the first unanswered message.
        assert!(when > at(300) && when <= at(360), "{when:?}");
        assert!(!n.a.is_down(1));
        assert_eq!(s.switches[0].1, 1);
        assert!(s.resent > 0);
        assert_eq!(n.a.min_rtt(), Some(Duration::from_millis(20)));
        let mut got = n.got.clone();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got, (0..100).collect::<Vec<u32>>());
        assert_eq!(
            n.got.len(),
            100,
            "heartbeats or copies reached the application"
        );
        // Without heartbeats: never detected, what path 0 took is lost.
        let mut n = Net::udp(GroupMode::Backup, false);
        n.run(1500);
        assert!(n.a.group_stats().failures.is_empty());
        assert_eq!(n.a.group_stats().pings_sent, 0);
        assert!(n.got.len() < 60, "{}", n.got.len());
    }

    /// A heartbeat-carrying UDP broadcast group delivers each message once
    /// and only the application's messages.
    #[test]
    fn udp_broadcast_heartbeats_stay_inside_the_group() {
        let mut n = Net::udp(GroupMode::Broadcast, true);
        n.run(1500);
        assert_eq!(n.got, (0..100).collect::<Vec<u32>>());
        assert!(n.a.group_stats().pongs_received > 0);
    }
}
