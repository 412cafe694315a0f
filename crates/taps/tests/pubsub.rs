//! The relay (`hollywood_taps::pubsub`) on loopback: publish, fan out to
//! several players over both candidates, a late joiner starting at a group
//! start, refusals with their codes, a player with a short latency losing
//! alone, and a chain of three relays with one end-to-end deadline.

use hollywood_taps::pubsub::wire::{FLAG_GROUP_START, FLAG_KEY};
use hollywood_taps::pubsub::{
    self, now_us, Policy, Relay, Request, Role, ServerConfig, Session, StreamId, Upstream,
};
use hollywood_taps::{
    LocalEndpoint, Preconnection, Protocol, RemoteEndpoint, SecurityParameters, TransportProperties,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

fn pre() -> Preconnection {
    Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
}

/// A relay on loopback; its address and state.
async fn relay(
    upstream: Option<SocketAddr>,
) -> (SocketAddr, Arc<Relay>, tokio::sync::oneshot::Sender<()>) {
    let cfg = ServerConfig {
        preconnection: pre().with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap())),
        policy: Policy {
            publish_tokens: vec!["k3y".into()],
            ..Policy::default()
        },
        max_connections: 100,
        upstream: upstream.map(|a| Upstream {
            preconnection: pre().with_remote(RemoteEndpoint::from_addr(a)),
            token: None,
        }),
    };
    let mut l = cfg.preconnection.listen().await.unwrap();
    let addr = l.local_addrs()[0].1;
    let r = Relay::new(cfg);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let r2 = r.clone();
    tokio::spawn(async move {
        let _ = pubsub::serve_on(r2, &mut l, async {
            let _ = rx.await;
        })
        .await;
    });
    (addr, r, tx)
}

fn req(role: Role, token: Option<&str>, latency_ms: u64) -> Request {
    Request {
        role,
        stream: StreamId {
            resource: "live/cam1".into(),
            token: token.map(str::to_owned),
            ..StreamId::default()
        },
        latency: Duration::from_millis(latency_ms),
    }
}

fn to(a: SocketAddr, p: Protocol) -> Preconnection {
    pre()
        .with_remote(RemoteEndpoint::from_addr(a))
        .with_protocols(&[p])
}

/// A publisher over QUIC with the token.
async fn publisher(relay: SocketAddr) -> Session {
    Session::connect(
        &to(relay, Protocol::Quic),
        &req(Role::Publish, Some("k3y"), 0),
    )
    .await
    .unwrap()
}

/// Publish `n` messages 5 ms apart, a group start every `gop`.
async fn publish(s: &mut Session, from: u64, n: u64, gop: u64, lifetime: Duration) {
    for i in from..from + n {
        let flags = if i % gop == 0 {
            FLAG_GROUP_START | FLAG_KEY
        } else {
            0
        };
        let prio = if i % gop == 0 { 0 } else { 2 };
        let mut p = i.to_be_bytes().to_vec();
        p.resize(1316, 0);
        s.publish(&p, flags, prio, lifetime).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Play until the stream ends: the numbers received, all within deadline.
async fn play(mut s: Session) -> Vec<u64> {
    let mut got = Vec::new();
    while let Some(m) = s.receive().await.unwrap() {
        assert!(
            m.header.deadline_us > now_us(),
            "delivered past its deadline"
        );
        got.push(u64::from_be_bytes(m.payload[..8].try_into().unwrap()));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_publisher_fans_out_to_players_over_every_candidate() {
    let (addr, relay, stop) = relay(None).await;
    let mut publisher = publisher(addr).await;
    let mut players = Vec::new();
    for p in [Protocol::Quic, Protocol::KernelTcp, Protocol::Quic] {
        let s = Session::connect(&to(addr, p), &req(Role::Play, None, 500))
            .await
            .unwrap();
        assert_eq!(s.protocol(), p);
        players.push(tokio::spawn(play(s)));
    }
    // The first message starts a group, so every player has it.
    publish(&mut publisher, 0, 200, 50, Duration::from_millis(500)).await;
    publisher.close().await.unwrap();
    for p in players {
        let mut got = p.await.unwrap();
        got.sort_unstable();
        assert_eq!(got, (0..200).collect::<Vec<_>>());
    }
    let rep = relay.report();
    assert_eq!(rep.refused.len(), 0);
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_starts_at_the_newest_group_start() {
    let (addr, _relay, stop) = relay(None).await;
    let mut publisher = publisher(addr).await;
    // 130 messages (groups start at 0, 50, 100), then a player joins.
    publish(&mut publisher, 0, 130, 50, Duration::from_secs(5)).await;
    let late = Session::connect(&to(addr, Protocol::Quic), &req(Role::Play, None, 0))
        .await
        .unwrap();
    let player = tokio::spawn(play(late));
    publish(&mut publisher, 130, 20, 50, Duration::from_secs(5)).await;
    publisher.close().await.unwrap();
    let got = player.await.unwrap();
    // The group from 100 (cached), then what followed, and nothing older.
    assert_eq!(got.iter().min(), Some(&100));
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (100..150).collect::<Vec<_>>());
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_their_codes() {
    let (addr, _relay, stop) = relay(None).await;
    let err = |e: hollywood_taps::Error| e.to_string();
    let e = Session::connect(&to(addr, Protocol::Quic), &req(Role::Publish, None, 0))
        .await
        .unwrap_err();
    let m = err(e);
    assert!(m.contains("(401)"), "{m}");
    let e = Session::connect(
        &to(addr, Protocol::KernelTcp),
        &req(Role::Publish, Some("bad"), 0),
    )
    .await
    .unwrap_err();
    assert!(err(e).contains("wrong publish token"));
    let e = Session::connect(&to(addr, Protocol::Quic), &req(Role::Play, None, 0))
        .await
        .unwrap_err();
    assert!(err(e).contains("(404)"), "no such stream yet");
    let _p = publisher(addr).await;
    let e = Session::connect(
        &to(addr, Protocol::Quic),
        &req(Role::Publish, Some("k3y"), 0),
    )
    .await
    .unwrap_err();
    assert!(err(e).contains("(409)"));
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_three_relays_carries_one_end_to_end_deadline() {
    let (a, ra, stop_a) = relay(None).await;
    let (b, rb, stop_b) = relay(Some(a)).await;
    let (c, _rc, stop_c) = relay(Some(b)).await;
    let mut publisher = publisher(a).await;
    // A player at the far end of the chain; its relay subscribes onward.
    let player = tokio::spawn(play(
        Session::connect(&to(c, Protocol::KernelTcp), &req(Role::Play, None, 0))
            .await
            .unwrap(),
    ));
    // Until the chain has joined: the publisher's first group start is
    // then the first message each hop forwards.
    for _ in 0..100 {
        if ra
            .report()
            .streams
            .iter()
            .any(|s| !s.subscribers.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    publish(&mut publisher, 0, 200, 50, Duration::from_millis(300)).await;
    publisher.close().await.unwrap();
    let mut got = player.await.unwrap();
    got.sort_unstable();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    // The middle relay forwarded what it got, none of it late.
    let mid = rb.report();
    assert_eq!(mid.streams.iter().map(|s| s.published_late).sum::<u64>(), 0);
    for s in [stop_a, stop_b, stop_c] {
        let _ = s.send(());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_its_deadline_goes_nowhere() {
    let (addr, relay, stop) = relay(None).await;
    let mut publisher = publisher(addr).await;
    let player = tokio::spawn(play(
        Session::connect(&to(addr, Protocol::Quic), &req(Role::Play, None, 0))
            .await
            .unwrap(),
    ));
    // Wait for the player to join, then publish messages already dead on
    // the relay's clock, and live ones.
    while relay
        .report()
        .streams
        .iter()
        .all(|s| s.subscribers.is_empty())
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let now = publisher.to_relay(now_us());
    for i in 0..10u64 {
        let mut p = i.to_be_bytes().to_vec();
        p.resize(100, 0);
        let (origin, deadline) = if i % 2 == 0 {
            (now - 2_000_000, now - 1_000_000)
        } else {
            (now, now + 5_000_000)
        };
        publisher
            .publish_at(&p, FLAG_GROUP_START, 0, origin, deadline)
            .await
            .unwrap();
    }
    publisher.close().await.unwrap();
    let mut got = player.await.unwrap();
    got.sort_unstable();
    assert_eq!(got, vec![1, 3, 5, 7, 9]);
    let _ = stop.send(());
}
