//! `hollywood lab multipath`: the multipath scenario of `sim multipath`
//! ([`MultipathScenario`], docs/MULTIPATH.md) on real packets.
//!
//! ```text
//!  path a: lab NAME-pa   a 10.88.1.2 ─ e (emulator: fibre) ─ 10.88.2.2 b
//!  path b: lab NAME-pb   a 10.88.1.2 ─ e (emulator: LTE)   ─ 10.88.2.2 b
//! ```
//!
//! Two disjoint paths, each a two-host lab of its own with its own
//! user-space emulator running the simulator's link model with the
//! path's profile (rate and queue each way, half the RTT each way, the
//! loss on the data direction). Each end is one process with one UDP
//! socket per path, each socket bound in its path's end namespace
//! ([`hollywood_io::MultiUdpPort`]): the sender's sockets together are
//! the multi-homed host of the simulator. The groups, inner transports
//! and applications are the simulator's ([`MultipathScenario::ends`]);
//! the inner transports are built with the simulator's addresses
//! (10.1.0.1 → 10.1.0.2 for a, 10.2.0.x for b), which the port maps to
//! and from each path's real addresses.
//!
//! The failure (`--fail a@10s`) is a hard link-down in the failed path's
//! emulator: from that time on (on the run's clock) it drops every packet
//! both ways before its link model, so packets already in the emulated
//! link still land, as in the simulator.
//!
//! QUIC and UDP inner connections only: the TCP deployments need the
//! engine on a TUN device per path (not done).

use crate::apps;
use crate::netem::{Direction, NetemConfig, PacketHook};
use crate::topology::{Host, Lab, LabError};
use hollywood_io::{AppHost, UdpPath};
use hollywood_media::multipath::{MultipathOutcome, MultipathRun, MultipathScenario};
use hollywood_media::{MessageReceiver, MessageSender};
use hollywood_tcp::Instant;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

pub use crate::apps::Error;

/// Drops every packet, both ways, from a time on: a path's hard failure.
#[derive(Debug, Clone, Default)]
pub struct LinkDown {
    at: Arc<OnceLock<std::time::Instant>>,
    dropped: Arc<AtomicU64>,
}

impl LinkDown {
    /// Fail at `at` (once; later calls are ignored).
    pub fn set(&self, at: std::time::Instant) {
        let _ = self.at.set(at);
    }

    /// Packets dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl PacketHook for LinkDown {
    fn on_packet(
        &mut self,
        _now_ns: u64,
        _dir: Direction,
        packet: Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) {
        if self
            .at
            .get()
            .is_some_and(|t| std::time::Instant::now() >= *t)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        out.push(packet);
    }
}

/// The lab of path `i` of a run named `name`.
pub fn path_lab_name(name: &str, i: usize) -> String {
    format!("{name}-p{}", if i == 0 { 'a' } else { 'b' })
}

/// A run on real packets, with what the simulator does not report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LabMultipathRun {
    /// The report, as `sim multipath` prints it.
    #[serde(flatten)]
    pub run: MultipathRun,
    /// Datagrams the sender sent on each path (a, b).
    pub datagrams_sent: [u64; 2],
    /// Datagrams the receiver got on each path.
    pub datagrams_received: [u64; 2],
    /// Packets the failed path's emulator dropped after the failure.
    pub dropped_by_failure: u64,
    /// `uptime`'s load averages at the end of the run.
    pub load: String,
}

/// Run `sc` in fresh labs `NAME-pa`, `NAME-pb` (deleted afterwards).
pub fn run(sc: &MultipathScenario, name: &str) -> Result<LabMultipathRun, Error> {
    if !hollywood_io::is_root() {
        return Err(Box::new(LabError::NotRoot));
    }
    if sc.transport.tcp().is_some() {
        return Err(format!(
            "lab multipath runs QUIC and UDP inner connections (quic-pps, quicsilver, udp, ...); {} needs the engine on a TUN per path (not done: use `sim multipath`)",
            sc.transport.name()
        )
        .into());
    }
    crate::interop::remove_stale_labs();
    let ends = sc.ends(|i| sim_seed(sc.seed, 10 + i as u64))?;
    let used = ends.used.clone();
    let down = LinkDown::default();
    let mut labs = Vec::new();
    let mut tx_paths = Vec::new();
    let mut rx_paths = Vec::new();
    for &i in &used {
        let (fwd, rev) = sc.links(i);
        let hook: Option<Box<dyn PacketHook>> = match sc.fail {
            Some((p, _)) if p == i => Some(Box::new(down.clone())),
            _ => None,
        };
        let config = NetemConfig::new(fwd, rev, sim_seed(sc.seed, 20 + i as u64));
        let lab = Lab::up_with(&path_lab_name(name, i), false, config, hook)?;
        let tx_real = SocketAddr::new(lab.addr(Host::A, false), 4000);
        let rx_real = SocketAddr::new(lab.addr(Host::B, false), 5004);
        tx_paths.push(UdpPath {
            socket: apps::bind_udp(&lab, Host::A, tx_real)?,
            peer: rx_real,
            group_local: MultipathScenario::tx_addr(i),
            group_peer: MultipathScenario::rx_addr(i),
        });
        rx_paths.push(UdpPath {
            socket: apps::bind_udp(&lab, Host::B, rx_real)?,
            peer: tx_real,
            group_local: MultipathScenario::rx_addr(i),
            group_peer: MultipathScenario::tx_addr(i),
        });
        labs.push(lab);
    }
    let epoch = std::time::Instant::now();
    if let Some((_, at)) = sc.fail {
        down.set(epoch + at);
    }
    let rx = AppHost::multi_udp(rx_paths, Box::new(ends.receiver), ends.recv_app, epoch)?;
    let mut tx = AppHost::multi_udp(tx_paths, Box::new(ends.sender), ends.send_app, epoch)?;
    let limit = Instant::ZERO + sc.duration();
    let (_, rx) = apps::run_beside(
        &mut tx,
        rx,
        limit,
        |_: &MessageSender, _| false,
        |_: &MessageReceiver| false,
    )?;
    let sim_time_s = tx.now().as_nanos() as f64 / 1e9;
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    drop(labs);

    let sender = MultipathOutcome::sender_half(tx.app(), tx.transport())?;
    let outcome = MultipathOutcome::new(sender, rx.app(), rx.transport(), sim_time_s)?;
    let run = sc.report(&used, outcome);
    let per_path = |v: &[u64]| {
        let mut out = [0u64; 2];
        for (k, &i) in used.iter().enumerate() {
            out[i] = v.get(k).copied().unwrap_or(0);
        }
        out
    };
    Ok(LabMultipathRun {
        run,
        datagrams_sent: per_path(&tx.port().stats().sent),
        datagrams_received: per_path(&rx.port().stats().received),
        dropped_by_failure: down.dropped(),
        load,
    })
}

/// The seed the simulator derives with `label` in a run seeded `seed`.
fn sim_seed(seed: u64, label: u64) -> u64 {
    hollywood_sim::SimBuilder::new()
        .seed(seed)
        .build()
        .derive_seed(label)
}
