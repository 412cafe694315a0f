//! The simulated path: the impairments of the lossy link ([`Impairments`])
//! and the cross traffic sharing the bottleneck ([`CrossTraffic`]), with the
//! routed topology that carries it.

use super::MessagesScenario;
use hollywood_sim::{
    BulkReceiver, BulkSender, DatagramPattern, Datagrams, LinkConfig, NodeId, Pattern, Router,
    Simulator, Sink, TcpHost,
};
use hollywood_tcp::{Config, Instant};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The measured sender's address.
pub(super) const TX: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The measured receiver's address.
pub(super) const RX: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Impairments beyond loss, on the link that carries the loss; all off
/// by default (`sim chaos` turns them on).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Impairments {
    /// Each packet is held back by the extra delay with this probability
    /// (reordering it behind later ones).
    pub reorder: Option<(f64, Duration)>,
    /// Each packet is delivered twice with this probability.
    pub duplicate: f64,
    /// Each data segment has one payload byte changed, its TCP checksum
    /// recomputed, with this probability (a middlebox does it; with
    /// `MiddleboxKind::None` a plain forwarding box is added).
    pub corrupt: f64,
    /// Each data segment holding a whole message has it forged with this
    /// probability: a payload byte changed, CRC32C and TCP checksum
    /// recomputed (`MiddleboxConfig::forge_probability`).
    pub forge: f64,
    /// The bottleneck rate alternates every `period` between the
    /// scenario's rate and that rate × `factor` (0.01 ..= 100).
    pub rate_swing: Option<(Duration, f64)>,
}

impl Impairments {
    pub(super) fn apply(&self, l: LinkConfig) -> LinkConfig {
        let l = match self.reorder {
            Some((p, d)) if p > 0.0 => l.with_reorder(p, d),
            _ => l,
        };
        if self.duplicate > 0.0 {
            l.with_duplicate(self.duplicate)
        } else {
            l
        }
    }
}

/// A flow sharing the bottleneck with the measured one ([TCP-video] §6.1:
/// FTP over TCP, CBR over UDP, Poisson VBR over UDP).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CrossTraffic {
    /// A greedy TCP transfer (FTP-like) with our engine and the scenario's
    /// congestion control, for the whole run.
    Bulk,
    /// 1500-byte UDP packets, at a constant rate or exponential on-off.
    Udp(DatagramPattern),
}

/// Cross-traffic hosts: 10.0.1.i send, 10.0.2.i receive.
pub(super) fn cross_addr(side: u8, i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, side, (i + 1) as u8)
}

/// Build the routed path with cross traffic: returns (access link of the
/// sender, the bottleneck link, the sinks).
pub(super) fn cross_topology(
    sc: &MessagesScenario,
    (fwd_cfg, rev_cfg): (LinkConfig, LinkConfig),
    sim: &mut Simulator,
    tx: NodeId,
    rx: NodeId,
    until: Instant,
) -> Result<(hollywood_sim::LinkId, hollywood_sim::LinkId, Vec<CrossSink>), String> {
    let e = |e: hollywood_sim::SimError| e.to_string();
    let n = sc.cross.len();
    if n > 200 {
        return Err("at most 200 cross-traffic flows".into());
    }
    let fast = LinkConfig::new(0, Duration::ZERO);
    let host = |ip: Ipv4Addr| IpAddr::V4(ip);
    let mut r1 = Router::new()
        .route(host(RX), 32, 1)
        .route(host(Ipv4Addr::new(10, 0, 2, 0)), 24, 1)
        .route(host(TX), 32, 0);
    let mut r2 = Router::new().route(host(RX), 32, 1);
    for i in 0..n {
        r1.add_route(host(cross_addr(1, i)), 32, 2 + i);
        r2.add_route(host(cross_addr(2, i)), 32, 2 + i);
    }
    r2.add_route(host(Ipv4Addr::UNSPECIFIED), 0, 0);
    let r1 = sim.add_node(r1);
    let r2 = sim.add_node(r2);
    let (access, _) = sim
        .connect(tx, 0, r1, 0, fast.clone(), fast.clone())
        .map_err(e)?;
    let (bottleneck, _) = sim
        .connect(r1, 1, r2, 0, fwd_cfg.with_loss(sc.loss), rev_cfg)
        .map_err(e)?;
    sim.connect(r2, 1, rx, 0, fast.clone(), fast.clone())
        .map_err(e)?;
    let mut sinks = Vec::with_capacity(n);
    for (i, c) in sc.cross.iter().enumerate() {
        let (src_ip, dst_ip) = (cross_addr(1, i), cross_addr(2, i));
        let seed = sim.derive_seed(100 + i as u64);
        let (src, sink) = match *c {
            CrossTraffic::Bulk => {
                // Buffers of four times the path's capacity (bandwidth ×
                // RTT plus the bottleneck queue), between 256 KiB and
                // 8 MiB: never window-limited, and no larger than that (a
                // greedy flow fills every byte of its buffers, and
                // experiments run thousands of these).
                let bdp =
                    (sc.rate_bps as f64 / 8.0 * sc.rtt.as_secs_f64()) as usize + sc.queue_bytes;
                let buffer = (4 * bdp).clamp(256 << 10, 8 << 20);
                let cfg = Config {
                    recv_buffer: buffer,
                    send_buffer: buffer,
                    ..sc.base.clone()
                };
                let pattern = Pattern::new(seed);
                let dst = SocketAddr::new(host(dst_ip), 5001);
                let src = sim.add_node(TcpHost::new(
                    host(src_ip),
                    cfg.clone(),
                    seed,
                    BulkSender::new(SocketAddr::new(host(src_ip), 0), dst, u64::MAX / 4, pattern),
                ));
                let sink = sim.add_node(TcpHost::new(
                    host(dst_ip),
                    cfg,
                    seed ^ 1,
                    BulkReceiver::new(dst, pattern, None),
                ));
                (src, CrossSink::Tcp(sink))
            }
            CrossTraffic::Udp(pattern) => {
                let (DatagramPattern::Cbr { rate_bps } | DatagramPattern::OnOff { rate_bps, .. }) =
                    pattern;
                if rate_bps == 0 {
                    return Err("cross traffic needs a positive rate".into());
                }
                let src = sim.add_node(Datagrams::new(
                    SocketAddr::new(host(src_ip), 9000),
                    SocketAddr::new(host(dst_ip), 9000),
                    1500,
                    pattern,
                    until,
                    seed,
                ));
                (src, CrossSink::Udp(sim.add_node(Sink::new(false))))
            }
        };
        let sink_id = match sink {
            CrossSink::Tcp(id) | CrossSink::Udp(id) => id,
        };
        sim.connect(src, 0, r1, 2 + i, fast.clone(), fast.clone())
            .map_err(e)?;
        sim.connect(r2, 2 + i, sink_id, 0, fast.clone(), fast.clone())
            .map_err(e)?;
        sinks.push(sink);
    }
    Ok((access, bottleneck, sinks))
}

/// Where a cross flow's bytes end up.
#[derive(Debug, Clone, Copy)]
pub(super) enum CrossSink {
    Tcp(NodeId),
    Udp(NodeId),
}

impl CrossSink {
    pub(super) fn bytes(self, sim: &mut Simulator) -> u64 {
        match self {
            CrossSink::Tcp(id) => sim
                .node_mut::<TcpHost<BulkReceiver>>(id)
                .map_or(0, |h| h.app().report().bytes_received),
            CrossSink::Udp(id) => sim.node_mut::<Sink>(id).map_or(0, |s| s.bytes()),
        }
    }
}
