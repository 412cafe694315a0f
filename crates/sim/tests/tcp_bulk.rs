//! Bulk TCP transfers between two TcpHosts over impaired links: every byte
//! must arrive intact with both CUBIC and NewReno.

use hollywood_sim::{
    BulkReceiver, BulkSender, GilbertElliott, Jitter, JitterDistribution, LinkConfig, LinkId,
    LossModel, NodeId, Pattern, SharedBuffer, SimBuilder, Simulator, TcpHost,
};
use hollywood_tcp::{CcAlgorithm, Config, Instant};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

const MB5: u64 = 5_000_000;
const RATE: u64 = 10_000_000;

fn sender_ip() -> IpAddr {
    Ipv4Addr::new(10, 0, 0, 1).into()
}
fn receiver_ip() -> IpAddr {
    Ipv4Addr::new(10, 0, 0, 2).into()
}

struct Bulk {
    sim: Simulator,
    tx: NodeId,
    rx: NodeId,
    fwd: LinkId,
    pcap: SharedBuffer,
}

/// Sender (node 0) → receiver (node 1); 25 ms each way = 50 ms RTT.
fn setup(seed: u64, cc: CcAlgorithm, fwd: LinkConfig, rev: LinkConfig, bytes: u64) -> Bulk {
    let mut sim = SimBuilder::new().seed(seed).build();
    let cfg = Config {
        cc,
        ..Config::default()
    };
    let pattern = Pattern::new(seed ^ 0xb0b);
    let dst = SocketAddr::new(receiver_ip(), 5001);
    let tx_seed = sim.derive_seed(1);
    let rx_seed = sim.derive_seed(2);
    let tx = sim.add_node(TcpHost::new(
        sender_ip(),
        cfg.clone(),
        tx_seed,
        BulkSender::new(SocketAddr::new(sender_ip(), 0), dst, bytes, pattern)
            .start_at(Instant::from_nanos(1_000_000)),
    ));
    let rx = sim.add_node(TcpHost::new(
        receiver_ip(),
        cfg,
        rx_seed,
        BulkReceiver::new(dst, pattern, Some(bytes)),
    ));
    let (fwd, _) = sim.connect(tx, 0, rx, 0, fwd, rev).unwrap();
    let pcap = SharedBuffer::new();
    sim.capture_pcap(pcap.clone()).unwrap();
    Bulk {
        sim,
        tx,
        rx,
        fwd,
        pcap,
    }
}

fn link(loss: LossModel) -> LinkConfig {
    LinkConfig::new(RATE, Duration::from_millis(25)).with_loss(loss)
}

/// Run until the receiver saw the connection close (or 300 virtual seconds).
fn run(b: &mut Bulk) -> Duration {
    let limit = Instant::from_nanos(300_000_000_000);
    while b.sim.now() < limit {
        b.sim.run_for(Duration::from_millis(500)).unwrap();
        let rx = b.sim.node_mut::<TcpHost<BulkReceiver>>(b.rx).unwrap();
        if rx.app().report().closed_at.is_some() {
            break;
        }
    }
    b.sim.finish_captures().unwrap();
    let rx = b
        .sim
        .node_mut::<TcpHost<BulkReceiver>>(b.rx)
        .unwrap()
        .app()
        .report();
    rx.eof_at.expect("transfer did not finish") - rx.accepted_at.unwrap()
}

fn check_intact(b: &mut Bulk, bytes: u64, seed: u64) {
    let rx = b.sim.node_mut::<TcpHost<BulkReceiver>>(b.rx).unwrap();
    let report = rx.app().report();
    assert!(rx.app().intact(), "receiver report {report:?}");
    assert_eq!(report.bytes_received, bytes);
    assert_eq!(report.hash, Pattern::new(seed ^ 0xb0b).digest(bytes));
    let tx = b.sim.node_mut::<TcpHost<BulkSender>>(b.tx).unwrap();
    let s = tx.app().report();
    assert_eq!(s.bytes_written, bytes);
    assert!(s.error.is_none(), "sender {s:?}");
}

fn bulk_case(seed: u64, cc: CcAlgorithm, fwd: LinkConfig, rev: LinkConfig) -> (Duration, Bulk) {
    let mut b = setup(seed, cc, fwd, rev, MB5);
    let d = run(&mut b);
    check_intact(&mut b, MB5, seed);
    (d, b)
}

#[test]
fn clean_path_runs_near_line_rate() {
    for cc in [CcAlgorithm::Cubic, CcAlgorithm::NewReno] {
        let (d, mut b) = bulk_case(1, cc, link(LossModel::None), link(LossModel::None));
        // 5 MB of payload at 10 Mb/s is 4 s before headers; slow start and
        // the handshake add a little.
        assert!(d > Duration::from_secs(4), "{cc:?} {d:?}");
        assert!(d < Duration::from_secs(6), "{cc:?} took {d:?}");
        let st = b.sim.link_stats(b.fwd).unwrap();
        assert_eq!(st.dropped.loss + st.dropped.rule, 0);
        let tx = b.sim.node_mut::<TcpHost<BulkSender>>(b.tx).unwrap();
        let h = tx.app().handle();
        assert!(h.is_some());
    }
}

#[test]
fn bernoulli_one_percent_both_directions() {
    for cc in [CcAlgorithm::Cubic, CcAlgorithm::NewReno] {
        let (d, b) = bulk_case(
            2,
            cc,
            link(LossModel::Bernoulli(0.01)),
            link(LossModel::Bernoulli(0.01)),
        );
        let st = b.sim.link_stats(b.fwd).unwrap();
        assert!(
            st.dropped.loss > 10,
            "{cc:?}: only {} losses",
            st.dropped.loss
        );
        assert!(d < Duration::from_secs(120), "{cc:?} took {d:?}");
    }
}

#[test]
fn reordering_and_duplication() {
    let messy = || {
        link(LossModel::None)
            .with_reorder(0.02, Duration::from_millis(8))
            .with_duplicate(0.02)
            .with_jitter(Jitter {
                distribution: JitterDistribution::Uniform {
                    max: Duration::from_millis(2),
                },
                preserve_order: true,
            })
    };
    for cc in [CcAlgorithm::Cubic, CcAlgorithm::NewReno] {
        let (_, b) = bulk_case(3, cc, messy(), messy());
        let st = b.sim.link_stats(b.fwd).unwrap();
        assert!(st.packets_duplicated > 10);
    }
}

#[test]
fn gilbert_elliott_bursts() {
    let ge = LossModel::GilbertElliott(GilbertElliott {
        p: 0.005,
        r: 0.3,
        loss_good: 0.0,
        loss_bad: 0.5,
    });
    for cc in [CcAlgorithm::Cubic, CcAlgorithm::NewReno] {
        let (_, b) = bulk_case(4, cc, link(ge), link(LossModel::None));
        assert!(b.sim.link_stats(b.fwd).unwrap().dropped.loss > 5);
    }
}

#[test]
fn small_queue_causes_drops_but_transfer_completes() {
    let narrow = link(LossModel::None).with_queue_bytes(15_000);
    let (_, b) = bulk_case(5, CcAlgorithm::Cubic, narrow, link(LossModel::None));
    assert!(b.sim.link_stats(b.fwd).unwrap().dropped.queue_full > 0);
}

#[test]
fn tcp_runs_are_deterministic() {
    let go = |seed| {
        let mut b = setup(
            seed,
            CcAlgorithm::Cubic,
            link(LossModel::Bernoulli(0.02)),
            link(LossModel::None),
            300_000,
        );
        run(&mut b);
        check_intact(&mut b, 300_000, seed);
        (b.pcap.contents(), b.sim.now(), b.sim.stats())
    };
    let a = go(9);
    let b = go(9);
    assert_eq!(a, b);
    let c = go(10);
    assert_ne!(a.0, c.0, "different seeds give different captures");
}

#[test]
fn two_transfers_through_a_router_ipv4_and_ipv6() {
    use hollywood_sim::Router;
    use std::net::Ipv6Addr;
    let mut sim = SimBuilder::new().seed(21).build();
    let a_ip: IpAddr = Ipv4Addr::new(10, 0, 1, 1).into();
    let c_ip: IpAddr = Ipv4Addr::new(10, 0, 2, 1).into();
    let b_ip: IpAddr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1).into();
    let d_ip: IpAddr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1).into();
    let pattern = Pattern::new(77);
    let bytes = 1_000_000;
    let cfg = Config::default();
    let host_tx = |sim: &mut Simulator, ip: IpAddr, dst: IpAddr, label| {
        let seed = sim.derive_seed(label);
        let app = BulkSender::new(
            SocketAddr::new(ip, 0),
            SocketAddr::new(dst, 80),
            bytes,
            pattern,
        );
        sim.add_node(TcpHost::new(ip, cfg.clone(), seed, app))
    };
    let a = host_tx(&mut sim, a_ip, c_ip, 1);
    let b = host_tx(&mut sim, b_ip, d_ip, 2);
    let host_rx = |sim: &mut Simulator, ip: IpAddr, label| {
        let seed = sim.derive_seed(label);
        let app = BulkReceiver::new(SocketAddr::new(ip, 80), pattern, Some(bytes));
        sim.add_node(TcpHost::new(ip, cfg.clone(), seed, app))
    };
    let c = host_rx(&mut sim, c_ip, 3);
    let d = host_rx(&mut sim, d_ip, 4);
    let r = sim.add_node(
        Router::new()
            .route(a_ip, 24, 0)
            .route(b_ip, 32, 1)
            .route(c_ip, 24, 2)
            .route(d_ip, 32, 3),
    );
    let access = || LinkConfig::new(100_000_000, Duration::from_millis(5));
    let bottleneck =
        || LinkConfig::new(RATE, Duration::from_millis(20)).with_loss(LossModel::Bernoulli(0.005));
    sim.connect(a, 0, r, 0, access(), access()).unwrap();
    sim.connect(b, 0, r, 1, access(), access()).unwrap();
    sim.connect(r, 2, c, 0, bottleneck(), access()).unwrap();
    sim.connect(r, 3, d, 0, bottleneck(), access()).unwrap();
    sim.run_until(Instant::from_nanos(60_000_000_000)).unwrap();
    for rx in [c, d] {
        let host = sim.node_mut::<TcpHost<BulkReceiver>>(rx).unwrap();
        assert!(host.app().intact(), "{:?}", host.app().report());
        assert_eq!(host.stats().packets_not_for_us, 0);
    }
    let rs = sim.node_mut::<Router>(r).unwrap().stats();
    assert_eq!((rs.no_route, rs.malformed, rs.ttl_expired), (0, 0, 0));
    assert!(rs.forwarded > 1400);
}
