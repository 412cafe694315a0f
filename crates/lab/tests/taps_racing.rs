// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

//! Racing on real packets (issue 14's first Done-when), in a two-host lab
//! with a 20 ms RTT: with UDP open QUIC wins; with UDP to the server
//! dropped by iptables, TCP Hollywood on the engine wins, and racing adds
//! at most the stagger delay plus one RTT over a direct TCP connect.
//! Needs root (namespaces, TUN, iptables); skips with a reason otherwise.

use hollywood_lab::netem::NetemConfig;
use hollywood_lab::topology::{ns_name, Host, Lab};
use hollywood_sim::LinkConfig;
use hollywood_taps::{
    Connection, Engine, LocalEndpoint, MessageContext, Preconnection, Protocol, RemoteEndpoint,
    SecurityParameters, TransportProperties,
};
use std::net::SocketAddr;
use std::time::Duration;

const PORT: u16 = 7400;
const ONE_WAY: Duration = Duration::from_millis(10);

async fn echo(mut c: Connection) {
    while let Ok(Some(m)) = c.receive().await {
        let ctx = MessageContext::default()
            .substream(m.substream)
            .ordered(false);
        if c.send(m.data, ctx).await.is_err() {
            return;
        }
    }
    let _ = c.close().await;
}

/// Ten messages there and back.
async fn exchange(c: &mut Connection) {
    for i in 0..10u8 {
        let ctx = MessageContext::lifetime(Duration::from_secs(2)).ordered(false);
        c.send(vec![i; 1000], ctx).await.unwrap();
    }
    c.close().await.unwrap();
    let mut got = 0;
    while let Some(m) = tokio::time::timeout(Duration::from_secs(10), c.receive())
        .await
        .expect("echoes within 10 s")
        .unwrap()
    {
        assert_eq!(m.data.len(), 1000);
        got += 1;
    }
    assert_eq!(got, 10, "{}", c.protocol());
}

#[test]
fn racing_picks_quic_with_udp_open_and_tcp_hollywood_with_udp_blocked() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(
            "racing_picks_quic... needs root (namespaces, TUN devices, iptables)",
        );
        return;
    }
    let name = format!("hwtr-{}", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let link = LinkConfig::new(0, ONE_WAY);
        let lab =
            Lab::up_with(&name, false, NetemConfig::new(link.clone(), link, 1), None).unwrap();
        let (ns_a, ns_b) = (ns_name(&name, Host::A), ns_name(&name, Host::B));
        let server_addr = SocketAddr::new(lab.addr(Host::B, false), PORT);
        let props = TransportProperties::media();
        let mut listener = Preconnection::new(props.clone(), SecurityParameters::Disabled)
            .with_local(LocalEndpoint::from_addr(server_addr))
            .with_namespace(ns_b.clone())
            .listen()
            .await
            .unwrap();
        tokio::spawn(async move {
            while let Some(c) = listener.accept().await {
                tokio::spawn(echo(c));
            }
        });
        let tun = lab.engine_tun(Host::A).unwrap();
        let stack =
            hollywood_io::Stack::spawn(tun, hollywood_tcp::Config::hollywood(true, true)).unwrap();
        let engine = Engine {
            stack,
            addr: lab.engine_addr(Host::A, false),
        };
        let client = Preconnection::new(props, SecurityParameters::Disabled)
            .with_remote(RemoteEndpoint::from_addr(server_addr))
            .with_namespace(ns_a.clone())
            .with_engine(engine);
        let timed = |p: Preconnection| async move {
            let t0 = tokio::time::Instant::now();
            let c = p.initiate().await.unwrap();
            (c, t0.elapsed())
        };

        // The baseline: a direct kernel TCP connect (the fastest of 5).
        let mut direct = Duration::MAX;
        for _ in 0..5 {
            let (c, t) = timed(client.clone().with_protocols(&[Protocol::KernelTcp])).await;
            assert_eq!(c.protocol(), Protocol::KernelTcp);
            direct = direct.min(t);
            c.abort();
        }

        // UDP open: QUIC wins, within a handshake.
        let (mut c, quic_took) = timed(client.clone()).await;
        assert_eq!(c.protocol(), Protocol::Quic);
        exchange(&mut c).await;

        // UDP to the server dropped: the engine starts after the stagger
        // and wins.
        let rule = ["-p", "udp", "--dport", "7400", "-j", "DROP"];
        let ipt = |op: &str| {
            let mut args = vec!["iptables", op, "INPUT"];
            args.extend_from_slice(&rule);
            lab.ns(Host::B).exec(&args)
        };
        ipt("-A").expect("iptables in the server's namespace");
        let (mut c, raced) = timed(client.clone()).await;
        ipt("-D").unwrap();
        assert_eq!(c.protocol(), Protocol::TcpHollywood);
        exchange(&mut c).await;

        let stagger = hollywood_taps::preconnection::DEFAULT_RACING_DELAY;
        let rtt = 2 * ONE_WAY;
        println!(
            "racing: direct kernel TCP connect {:.1} ms; QUIC with UDP open {:.1} ms; \
             TCP Hollywood with UDP blocked {:.1} ms (+{:.1} ms over direct; bar {} ms)",
            ms(direct),
            ms(quic_took),
            ms(raced),
            ms(raced.saturating_sub(direct)),
            ms(stagger + rtt)
        );
        // The bar is the design's (RFC 8305-style racing: the stagger,
        // then one handshake), not a noise margin. Measured 2026-11-29,
        // five runs: +251.2 to +252.1 ms over a 20.4–20.5 ms direct
        // connect, so about 18 ms under the bar with a spread of 0.9 ms.
        assert!(
            raced.saturating_sub(direct) <= stagger + rtt,
            "racing added {:?} over a direct connect ({direct:?}); bar: stagger + one RTT",
            raced.saturating_sub(direct)
        );
        // QUIC's handshake is one RTT plus the server's crypto.
        assert!(quic_took < stagger, "{quic_took:?}");
    });
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
