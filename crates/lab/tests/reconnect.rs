//! `hollywood transmit`'s relay through a firewall that resets
//! connections carrying inconsistent retransmissions (thesis §4.5; the
//! lab's `reset-on-mismatch` box) — root only. The caller relays live
//! datagrams over TCP Hollywood on the engine; the path loses 3 % and the
//! datagrams' lifetime (40 ms) is shorter than a repair (RTT 60 ms), so
//! lost messages expire and are replaced by inconsistent retransmissions,
//! which the box answers with RSTs. The relay must reconnect once with
//! consistent retransmissions, say so, and go on relaying.

use hollywood_io::NetNs;
use hollywood_lab::middlebox::ResetOnMismatchHook;
use hollywood_lab::topology::{Host, Lab, LabSpec};
use hollywood_sim::{LinkConfig, LossModel};
use hollywood_taps::relay::{self, Direction, Mode, RelayConfig, RelayStats};
use hollywood_taps::{
    Engine, LocalEndpoint, Preconnection, RemoteEndpoint, SecurityParameters, TransportProperties,
};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn the_relay_reconnects_once_in_consistent_mode_after_a_reset_on_mismatch() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, TUN devices)");
        return;
    }
    let _ = NetNs::remove_stale("hwm");
    let name = format!("hwm-{}-rc", std::process::id());
    let one_way = Duration::from_millis(30);
    let lab = Lab::up(LabSpec {
        name,
        three_hosts: false,
        a_to_b: LinkConfig::new(10_000_000, one_way).with_loss(LossModel::Bernoulli(0.03)),
        b_to_a: LinkConfig::new(10_000_000, one_way),
        seed: 7,
        hook: Some(Box::new(ResetOnMismatchHook::new(Arc::new(Mutex::new(
            HashMap::new(),
        ))))),
    })
    .expect("lab");
    let ns_a = lab.ns(Host::A).name().unwrap().to_string();
    let ns_b = lab.ns(Host::B).name().unwrap().to_string();
    let server = SocketAddr::new(lab.addr(Host::B, false), 9400);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = rt.block_on(async {
        let tun = lab.engine_tun(Host::A).expect("engine TUN");
        let config = hollywood_tcp::Config {
            cc: hollywood_tcp::CcAlgorithm::Bbr,
            ..hollywood_tcp::Config::hollywood(true, true)
        };
        Engine {
            stack: hollywood_io::Stack::spawn(tun, config).expect("stack"),
            addr: lab.engine_addr(Host::A, false),
        }
    });
    let base = |ns: &str| {
        Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
            .with_namespace(ns.to_string())
            .with_protocols(&[hollywood_taps::Protocol::TcpHollywood])
    };
    let out = NetNs::open(&ns_b)
        .unwrap()
        .run(|| UdpSocket::bind("127.0.0.1:0"))
        .unwrap()
        .unwrap();
    out.set_nonblocking(true).unwrap();
    let latency = Duration::from_millis(40);
    let listener = RelayConfig {
        // The far end: the message layer on kernel TCP (thesis §4.4).
        preconnection: base(&ns_b)
            .with_protocols(&[hollywood_taps::Protocol::KernelTcp])
            .with_local(LocalEndpoint::from_addr(server)),
        mode: Mode::Listener,
        direction: Direction::HollywoodToUdp {
            to: out.local_addr().unwrap(),
        },
        latency,
        reorder: Duration::ZERO,
    };
    let caller = RelayConfig {
        preconnection: base(&ns_a)
            .with_remote(RemoteEndpoint::from_addr(server))
            .with_engine(engine),
        mode: Mode::Caller,
        direction: Direction::UdpToHollywood {
            bind: "127.0.0.1:5400".parse().unwrap(),
        },
        latency,
        reorder: Duration::ZERO,
    };
    let (rx_stats, tx_stats) = (
        Arc::new(RelayStats::default()),
        Arc::new(RelayStats::default()),
    );
    let (stop_rx, stop_rx_wait) = tokio::sync::oneshot::channel::<()>();
    let (stop_tx, stop_tx_wait) = tokio::sync::oneshot::channel::<()>();
    let rs = rx_stats.clone();
    let rx_task = rt.spawn(async move {
        relay::run(listener, rs, async {
            let _ = stop_rx_wait.await;
        })
        .await
    });
    std::thread::sleep(Duration::from_millis(300));
    let ts = tx_stats.clone();
    let tx_task = rt.spawn(async move {
        relay::run(caller, ts, async {
            let _ = stop_tx_wait.await;
        })
        .await
    });
    std::thread::sleep(Duration::from_millis(500));
    let src = NetNs::open(&ns_a)
        .unwrap()
        .run(|| UdpSocket::bind("127.0.0.1:0"))
        .unwrap()
        .unwrap();
    // 1316-byte datagrams every 5 ms for up to 12 s; after the
    // reconnection, 2 s more.
    let mut arrived = 0u64;
    let mut arrived_after = 0u64;
    let mut buf = vec![0u8; 2048];
    let mut after_reconnect = None;
    for i in 0u32..2400 {
        let mut d = vec![(i % 251) as u8; 1316];
        d[..4].copy_from_slice(&i.to_be_bytes());
        src.send_to(&d, "127.0.0.1:5400").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        while let Ok(n) = out.recv(&mut buf) {
            assert_eq!(n, 1316, "a datagram changed size");
            let id = u32::from_be_bytes(buf[..4].try_into().unwrap());
            assert!(
                buf[4..n].iter().all(|&b| b == (id % 251) as u8),
                "datagram {id} corrupted"
            );
            arrived += 1;
            if after_reconnect.is_some() {
                arrived_after += 1;
            }
        }
        if after_reconnect.is_none() && tx_stats.reconnects.load(Ordering::Relaxed) > 0 {
            after_reconnect = Some(i);
        }
        if after_reconnect.is_some_and(|at| i > at + 400) || tx_task.is_finished() {
            break;
        }
    }
    let _ = stop_tx.send(());
    let tx_result = rt.block_on(tx_task).unwrap();
    let _ = stop_rx.send(());
    let _ = rt.block_on(rx_task);
    let snap = tx_stats.snapshot();
    let why = tx_stats.reconnect_reason.lock().unwrap().clone();
    assert!(
        tx_result.is_ok(),
        "the caller failed: {tx_result:?} ({why:?}, {snap:?})"
    );
    assert_eq!(snap.reconnects, 1, "{snap:?}");
    assert_eq!(snap.connections, 2, "{snap:?}");
    let why = why.expect("a reason");
    assert!(why.contains("inconsistent retransmissions"), "{why}");
    assert!(
        arrived_after > 200,
        "relaying went on after the reconnection: {arrived_after} of {arrived}"
    );
    assert_eq!(rx_stats.snapshot().connections, 2);
    drop(lab);
}
