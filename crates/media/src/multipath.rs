//! The multipath scenario (issue 34 item 2, docs/MULTIPATH.md): one
//! message stream ([`crate::stream`], unchanged) over a connection group
//! ([`GroupTransport`]) of two disjoint simulated paths, with a hard
//! failure of one path at a chosen time.
//!
//! ```text
//!  sender 10.1.0.1 ──[path a: rate, rtt/2, loss]── 10.1.0.2 receiver
//!         10.2.0.1 ──[path b: rate, rtt/2, loss]── 10.2.0.2
//! ```
//!
//! Each end is one [`MultiHomedHost`] with an address per path; each path
//! carries its own inner connection (TCP Hollywood, QUIC or UDP).

use crate::stream::{MessageReceiver, MessageSender, SenderConfig};
use crate::transport::GenericTransport;
use hollywood_sim::{LinkConfig, LossModel, MultiHomedHost, SimBuilder};
use hollywood_tcp::{Config, Instant};
use hollywood_transport::group::{GroupConfig, GroupMode, GroupStats, GroupTransport};
use hollywood_transport::udp::UdpTransport;
use hollywood_transport::MessageTransport;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// One path's link, both directions (loss on the data direction only).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PathProfile {
    /// Rate each way (bit/s).
    pub rate_bps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Random loss on the data direction (probability).
    pub loss: f64,
}

impl PathProfile {
    /// "Fibre": 20 Mb/s, 40 ms RTT, 0.1 % loss.
    pub const FIBRE: PathProfile = PathProfile {
        rate_bps: 20_000_000,
        rtt: Duration::from_millis(40),
        loss: 0.001,
    };
    /// "LTE": 10 Mb/s, 80 ms RTT, 1 % loss.
    pub const LTE: PathProfile = PathProfile {
        rate_bps: 10_000_000,
        rtt: Duration::from_millis(80),
        loss: 0.01,
    };

    /// The drop-tail queue: one bandwidth-delay product, at least 64
    /// packets.
    pub fn queue_bytes(&self) -> usize {
        ((self.rate_bps as f64 / 8.0 * self.rtt.as_secs_f64()) as usize).max(64 * 1500)
    }
}

/// Which paths the group uses and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MultipathMode {
    /// Path a alone (a group of one).
    SingleA,
    /// Path b alone.
    SingleB,
    /// Both, every message on each.
    Broadcast,
    /// a, with b as the backup.
    Backup,
    /// Both, per message the earliest predicted delivery.
    Aggregate,
}

impl MultipathMode {
    /// All modes, in table order.
    pub const ALL: [MultipathMode; 5] = [
        MultipathMode::SingleA,
        MultipathMode::SingleB,
        MultipathMode::Broadcast,
        MultipathMode::Backup,
        MultipathMode::Aggregate,
    ];

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            MultipathMode::SingleA => "single-a",
            MultipathMode::SingleB => "single-b",
            MultipathMode::Broadcast => "broadcast",
            MultipathMode::Backup => "backup",
            MultipathMode::Aggregate => "aggregate",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<MultipathMode> {
        MultipathMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Scenario parameters.
#[derive(Debug, Clone)]
pub struct MultipathScenario {
    /// Path a (the main path).
    pub a: PathProfile,
    /// Path b.
    pub b: PathProfile,
    /// The mode.
    pub mode: MultipathMode,
    /// The inner connections' transport.
    pub transport: GenericTransport,
    /// Messages.
    pub count: u32,
    /// Payload bytes.
    pub size: usize,
    /// Between messages.
    pub interval: Duration,
    /// Lifetime (the deadline is generation + lifetime).
    pub lifetime: Duration,
    /// Hard failure (100 % loss both ways from then on) of path 0 (a) or
    /// 1 (b) at this time.
    pub fail: Option<(usize, Duration)>,
    /// Resend a failed path's live messages (backup, aggregate).
    pub resend: bool,
    /// Group heartbeats on paths without feedback (UDP): without them a
    /// UDP path's failure is never detected.
    pub heartbeat: bool,
    /// Seed.
    pub seed: u64,
    /// Engine configuration for TCP deployments.
    pub base: Config,
}

impl Default for MultipathScenario {
    /// Fibre + LTE, 1316 B every 5 ms (2.1 Mb/s) for 30 s, 200 ms lifetime,
    /// TCP Hollywood, broadcast, no failure.
    fn default() -> Self {
        MultipathScenario {
            a: PathProfile::FIBRE,
            b: PathProfile::LTE,
            mode: MultipathMode::Broadcast,
            transport: GenericTransport::Tcp(crate::stream::Transport::Hollywood),
            count: 6000,
            size: 1316,
            interval: Duration::from_millis(5),
            lifetime: Duration::from_millis(200),
            fail: None,
            resend: true,
            heartbeat: true,
            seed: 1,
            base: Config::default(),
        }
    }
}

/// What one path did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PathReport {
    /// Messages the group gave this path (resends included).
    pub given: u64,
    /// Copies this path delivered to the receiving group.
    pub delivered: u64,
    /// Distinct messages this path delivered by their deadline.
    pub delivered_in_time: u64,
    /// Messages whose first copy (the one the application got) came by
    /// this path.
    pub first_copy: u64,
}

/// Misses (late or lost) around a failure, by generation time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct FailureWindow {
    /// The failure (s).
    pub fail_s: f64,
    /// The group declared the path down (s), if it did.
    pub detected_s: Option<f64>,
    /// Window start: failure − lifetime (s).
    pub window_from_s: f64,
    /// Window end: failure + the failed path's RTT (s).
    pub window_to_s: f64,
    /// Misses generated inside the window.
    pub misses_in_window: u64,
    /// Misses generated before it.
    pub misses_before: u64,
    /// Misses generated after it.
    pub misses_after: u64,
    /// First and last miss generated within 1 s of the failure, relative
    /// to it (ms).
    pub miss_span_ms: Option<(f64, f64)>,
}

/// What a run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MultipathRun {
    /// Mode.
    pub mode: &'static str,
    /// Inner transport.
    pub transport: &'static str,
    /// The inner connections' congestion control ("none" over UDP).
    pub cc: &'static str,
    /// Messages generated.
    pub sent: u64,
    /// Delivered by their deadline.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Never delivered.
    pub lost: u64,
    /// Per path (a, b); a single-path mode reports the unused one empty.
    pub paths: Vec<PathReport>,
    /// Messages some path delivered in time that the application did not
    /// get in time (broadcast's claim: 0).
    pub in_time_on_a_path_but_missed: u64,
    /// Around the failure, if any.
    pub failure: Option<FailureWindow>,
    /// Messages resent after a failure.
    pub resent: u64,
    /// Copies dropped by the receiver's de-duplication.
    pub duplicates_dropped: u64,
    /// Heartbeat PINGs sent and PONGs received (sender; UDP paths).
    pub heartbeats: (u64, u64),
    /// Times a path was declared down (sender side, s).
    pub path_failures_s: Vec<(usize, f64)>,
    /// Payload delivered by deadline over the stream's duration (bit/s).
    pub goodput_on_time_bps: f64,
    /// Delivered with wrong content, or twice (must be 0).
    pub corrupt_or_duplicate: u64,
    /// Virtual time simulated (s).
    pub sim_time_s: f64,
}

type Tx = MultiHomedHost<MessageSender>;
type Rx = MultiHomedHost<MessageReceiver>;

fn secs(t: Instant) -> f64 {
    t.as_nanos() as f64 / 1e9
}

impl<'a> MultipathOutcome<'a> {
    /// What the sending end leaves for the report: its application's
    /// generation times and its group's counters (taken first: a host
    /// may lend out one end at a time).
    pub fn sender_half(
        app: &MessageSender,
        transport: &dyn MessageTransport,
    ) -> Result<(Vec<Option<Instant>>, GroupStats), String> {
        let generated = app.records().iter().map(|r| r.generated).collect();
        let group = transport
            .as_any()
            .downcast_ref::<GroupTransport>()
            .ok_or("the sender's transport is not a group")?;
        Ok((generated, group.group_stats().clone()))
    }

    /// The outcome from the sender's half ([`Self::sender_half`]) and
    /// the receiving end.
    pub fn new(
        sender: (Vec<Option<Instant>>, GroupStats),
        app: &MessageReceiver,
        transport: &'a dyn MessageTransport,
        sim_time_s: f64,
    ) -> Result<Self, String> {
        let receiver = transport
            .as_any()
            .downcast_ref::<GroupTransport>()
            .ok_or("the receiver's transport is not a group")?;
        Ok(MultipathOutcome {
            generated: sender.0,
            arrival: app.arrival().to_vec(),
            corrupt_or_duplicate: app.corrupt_delivered() + app.duplicates_delivered(),
            sender_stats: sender.1,
            receiver,
            sim_time_s,
        })
    }
}

/// The two ends of a run, built from a scenario ([`MultipathScenario::ends`]):
/// the sender's and receiver's groups and applications, whatever hosts
/// them (the simulator's [`MultiHomedHost`]s here, real sockets in the
/// lab's `hollywood_lab::multipath`).
pub struct MultipathEnds {
    /// The sending group (the scenario's mode).
    pub sender: GroupTransport,
    /// The receiving group (records arrivals per path).
    pub receiver: GroupTransport,
    /// The stream's sender.
    pub send_app: MessageSender,
    /// The stream's receiver.
    pub recv_app: MessageReceiver,
    /// The paths used (0 = a, 1 = b), in group order.
    pub used: Vec<usize>,
}

/// What a host of the ends hands back for the report
/// ([`MultipathScenario::report`]).
pub struct MultipathOutcome<'a> {
    /// Generation time of each message (the sender application's).
    pub generated: Vec<Option<Instant>>,
    /// Arrival at the receiving application.
    pub arrival: Vec<Option<Instant>>,
    /// Corrupt or duplicate deliveries to the application.
    pub corrupt_or_duplicate: u64,
    /// The sending group's counters.
    pub sender_stats: GroupStats,
    /// The receiving group.
    pub receiver: &'a GroupTransport,
    /// Time run (s).
    pub sim_time_s: f64,
}

impl MultipathScenario {
    /// The paths the mode uses (0 = a, 1 = b).
    pub fn used_paths(&self) -> Vec<usize> {
        match self.mode {
            MultipathMode::SingleA => vec![0],
            MultipathMode::SingleB => vec![1],
            _ => vec![0, 1],
        }
    }

    /// The sender's address on path `i` (10.1.0.1, 10.2.0.1).
    pub fn tx_addr(i: usize) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 1 + i as u8, 0, 1)), 4000)
    }

    /// The receiver's address on path `i` (10.1.0.2, 10.2.0.2).
    pub fn rx_addr(i: usize) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 1 + i as u8, 0, 2)), 5004)
    }

    /// Path `i`'s profile.
    pub fn profile(&self, i: usize) -> PathProfile {
        if i == 0 {
            self.a
        } else {
            self.b
        }
    }

    /// Path `i`'s links: data direction (with the loss) and return.
    pub fn links(&self, i: usize) -> (LinkConfig, LinkConfig) {
        let p = self.profile(i);
        let one_way = p.rtt / 2;
        let fwd = LinkConfig::new(p.rate_bps, one_way)
            .with_queue_bytes(p.queue_bytes())
            .with_loss(LossModel::Bernoulli(p.loss));
        let rev = LinkConfig::new(p.rate_bps, one_way).with_queue_bytes(p.queue_bytes());
        (fwd, rev)
    }

    /// Build both ends; `seed_of(i)` seeds path `i`'s inner connections.
    pub fn ends(&self, seed_of: impl Fn(usize) -> u64) -> Result<MultipathEnds, String> {
        if self.count == 0 || self.size == 0 {
            return Err("message count and size must be at least 1".into());
        }
        let used = self.used_paths();
        let mode = match self.mode {
            MultipathMode::Backup => GroupMode::Backup,
            MultipathMode::Aggregate => GroupMode::Aggregate,
            _ => GroupMode::Broadcast,
        };
        let mut tx_paths = Vec::new();
        let mut rx_paths = Vec::new();
        for &i in &used {
            let (tx, rx) = (Self::tx_addr(i), Self::rx_addr(i));
            let (a, mut b) = self.transport.endpoints(&self.base, tx, rx, seed_of(i))?;
            if matches!(self.transport, GenericTransport::Udp) {
                // The receiver answers heartbeats to whoever sent them.
                b = Box::new(UdpTransport::new(rx, None).reply_to_peer());
            }
            tx_paths.push((a, tx.ip()));
            rx_paths.push((b, rx.ip()));
        }
        let heartbeat = if self.heartbeat {
            GroupConfig::new(mode).heartbeat
        } else {
            None
        };
        let cfg = GroupConfig {
            resend: self.resend,
            heartbeat,
            ..GroupConfig::new(mode)
        };
        let sender = GroupTransport::new(cfg, tx_paths);
        let rx_cfg = GroupConfig {
            heartbeat,
            ..GroupConfig::new(GroupMode::Broadcast)
        };
        let mut receiver = GroupTransport::new(rx_cfg, rx_paths);
        receiver.record_arrivals();
        let send_app = MessageSender::new(SenderConfig {
            count: self.count,
            size: self.size,
            interval: self.interval,
            lifetime: Some(self.lifetime),
            seed: self.seed,
            linger: Duration::from_secs(1),
            group: 0,
            schedule: None,
            priorities: Vec::new(),
        });
        let recv_app = MessageReceiver::new(self.count, self.size, self.seed);
        Ok(MultipathEnds {
            sender,
            receiver,
            send_app,
            recv_app,
            used,
        })
    }

    /// How long a run lasts: the stream, the lifetime and 3 s.
    pub fn duration(&self) -> Duration {
        self.interval * self.count + self.lifetime + Duration::from_secs(3)
    }

    /// Run the stream to its end (plus the lifetime and a margin).
    pub fn run(&self) -> Result<MultipathRun, String> {
        let e = |e: hollywood_sim::SimError| e.to_string();
        let mut sim = SimBuilder::new().seed(self.seed).build();
        let ends = self.ends(|i| sim.derive_seed(10 + i as u64))?;
        let tx_ip = |i: usize| Self::tx_addr(i).ip();
        let rx_ip = |i: usize| Self::rx_addr(i).ip();
        let addrs = |f: &dyn Fn(usize) -> IpAddr| vec![f(0), f(1)];
        let tx = sim.add_node(MultiHomedHost::new(
            addrs(&tx_ip),
            Box::new(ends.sender),
            ends.send_app,
        ));
        let rx = sim.add_node(MultiHomedHost::new(
            addrs(&rx_ip),
            Box::new(ends.receiver),
            ends.recv_app,
        ));
        let mut links = Vec::new();
        for i in 0..2 {
            let (fwd, rev) = self.links(i);
            links.push(sim.connect(tx, i, rx, i, fwd, rev).map_err(e)?);
        }
        if let Some((path, at)) = self.fail {
            let (f, r) = *links.get(path).ok_or("--fail names path a or b")?;
            for l in [f, r] {
                sim.schedule_link(l, Instant::ZERO + at, |c| {
                    c.loss = LossModel::Bernoulli(1.0)
                })
                .map_err(e)?;
            }
        }
        sim.run_until(Instant::ZERO + self.duration()).map_err(e)?;
        let sim_time_s = secs(sim.now());
        let s = sim.node_mut::<Tx>(tx).ok_or("sender")?;
        let sender = MultipathOutcome::sender_half(s.app(), s.transport())?;
        let r = sim.node_mut::<Rx>(rx).ok_or("receiver")?;
        let outcome = MultipathOutcome::new(sender, r.app(), r.transport(), sim_time_s)?;
        Ok(self.report(&ends.used, outcome))
    }

    /// The report of a run whose ends ([`MultipathScenario::ends`]) used
    /// `used` paths.
    pub fn report(&self, used: &[usize], o: MultipathOutcome<'_>) -> MultipathRun {
        let profiles = [self.a, self.b];
        let MultipathOutcome {
            generated,
            arrival,
            corrupt_or_duplicate,
            sender_stats: gstats,
            receiver: rg,
            sim_time_s,
        } = o;
        let deadline = |id: usize| generated[id].map(|g| g + self.lifetime);
        let n = self.count as usize;
        let (mut on_time, mut late, mut lost) = (0u64, 0u64, 0u64);
        let mut missed = vec![false; n];
        for id in 0..n {
            match (arrival[id], deadline(id)) {
                (Some(a), Some(d)) if a <= d => on_time += 1,
                (Some(_), _) => {
                    late += 1;
                    missed[id] = true;
                }
                (None, _) => {
                    lost += 1;
                    missed[id] = generated[id].is_some();
                }
            }
        }
        let mut paths = vec![PathReport::default(); 2];
        let mut in_time = vec![vec![false; n]; 2];
        for (k, &i) in used.iter().enumerate() {
            paths[i].given = gstats.sent_per_path.get(k).copied().unwrap_or(0);
        }
        for a in rg.arrivals() {
            let i = used[a.path];
            let id = a.id as usize;
            if id >= n {
                continue;
            }
            paths[i].delivered += 1;
            if deadline(id).is_some_and(|d| a.arrival <= d) && !in_time[i][id] {
                in_time[i][id] = true;
                paths[i].delivered_in_time += 1;
            }
            if arrival[id] == Some(a.arrival) {
                paths[i].first_copy += 1;
            }
        }
        let in_time_on_a_path_but_missed = (0..n)
            .filter(|&id| missed[id] && (in_time[0][id] || in_time[1][id]))
            .count() as u64;
        let failure = self.fail.map(|(path, at)| {
            let fail = Instant::ZERO + at;
            let from = Instant::ZERO + (at - self.lifetime.min(at));
            let to = fail + profiles[path].rtt;
            let mut w = FailureWindow {
                fail_s: secs(fail),
                detected_s: gstats
                    .failures
                    .iter()
                    .find(|(p, t)| used.get(*p) == Some(&path) && *t >= fail)
                    .map(|(_, t)| secs(*t)),
                window_from_s: secs(from),
                window_to_s: secs(to),
                ..FailureWindow::default()
            };
            for id in (0..n).filter(|&id| missed[id]) {
                let Some(g) = generated[id] else { continue };
                if g < from {
                    w.misses_before += 1;
                } else if g > to {
                    w.misses_after += 1;
                } else {
                    w.misses_in_window += 1;
                }
                let rel = (g.as_nanos() as f64 - fail.as_nanos() as f64) / 1e6;
                if rel.abs() <= 1000.0 {
                    w.miss_span_ms = Some(match w.miss_span_ms {
                        Some((lo, hi)) => (lo.min(rel), hi.max(rel)),
                        None => (rel, rel),
                    });
                }
            }
            w
        });
        let stream = (self.interval * self.count).as_secs_f64().max(1e-9);
        MultipathRun {
            mode: self.mode.name(),
            transport: self.transport.name(),
            cc: match &self.transport {
                GenericTransport::Quic(q) => q.cc.name(),
                GenericTransport::Tcp(_) => self.base.cc.name(),
                GenericTransport::Udp => "none",
            },
            sent: generated.iter().filter(|g| g.is_some()).count() as u64,
            on_time,
            late,
            lost,
            paths,
            in_time_on_a_path_but_missed,
            failure,
            resent: gstats.resent,
            duplicates_dropped: rg.group_stats().duplicates_dropped,
            heartbeats: (gstats.pings_sent, gstats.pongs_received),
            path_failures_s: gstats
                .failures
                .iter()
                .map(|&(p, t)| (used[p], secs(t)))
                .collect(),
            goodput_on_time_bps: on_time as f64 * self.size as f64 * 8.0 / stream,
            corrupt_or_duplicate,
            sim_time_s,
        }
    }
}
