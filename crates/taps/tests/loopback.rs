//! The API on loopback, no privileges: kernel TCP and QUIC candidates,
//! racing, the message contexts and the exactly-one rule of send events.

use hollywood_taps::{
    Connection, Error, Event, Identity, LocalEndpoint, MessageContext, Preconnection, Protocol,
    RemoteEndpoint, SecurityParameters, TransportProperties,
};
use std::net::SocketAddr;
use std::time::Duration;

fn local() -> LocalEndpoint {
    LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap())
}

async fn server(
    props: TransportProperties,
    sec: SecurityParameters,
    protocols: &[Protocol],
) -> (hollywood_taps::Listener, SocketAddr) {
    let l = Preconnection::new(props, sec)
        .with_local(local())
        .with_protocols(protocols)
        .listen()
        .await
        .unwrap();
    let addr = l.local_addrs()[0].1;
    (l, addr)
}

/// A caller of `addr` with media properties and no security.
fn client(addr: SocketAddr) -> Preconnection {
    Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_remote(RemoteEndpoint::from_addr(addr))
}

/// A connected pair over kernel TCP with media properties and no
/// security: (caller, the listener's side).
async fn kernel_tcp_pair() -> (Connection, Connection) {
    let (mut l, addr) = server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::KernelTcp],
    )
    .await;
    let held = tokio::spawn(async move { l.accept().await });
    let c = client(addr)
        .with_protocols(&[Protocol::KernelTcp])
        .initiate()
        .await
        .unwrap();
    (c, held.await.unwrap().unwrap())
}

/// A listener that echoes every connection (see [`echo`]).
async fn echo_server(
    props: TransportProperties,
    sec: SecurityParameters,
    protocols: &[Protocol],
) -> SocketAddr {
    let (mut l, addr) = server(props, sec, protocols).await;
    tokio::spawn(async move {
        while let Some(c) = l.accept().await {
            tokio::spawn(echo(c));
        }
    });
    addr
}

/// Echo every message back on the same sub-stream, then close.
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

/// Send `n` messages, receive their echoes, and check that each send got
/// exactly one of Sent/Expired/SendError.
async fn round_trip(c: &mut Connection, n: usize) {
    let mut refs = Vec::new();
    for i in 0..n {
        let ctx = MessageContext::default()
            .substream((i % 3) as u16)
            .ordered(false);
        refs.push(
            c.send(format!("message {i}").into_bytes(), ctx)
                .await
                .unwrap(),
        );
    }
    c.close().await.unwrap();
    let mut got = Vec::new();
    let mut outcomes = std::collections::HashMap::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(10), c.next_event())
        .await
        .expect("events within 10 s")
    {
        match e {
            Event::Received(m) => got.push(String::from_utf8(m.data).unwrap()),
            Event::Sent { msg, .. } | Event::Expired { msg } | Event::SendError { msg, .. } => {
                *outcomes.entry(msg).or_insert(0) += 1;
            }
            Event::Closed => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    got.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("message {i}")).collect();
    want.sort();
    assert_eq!(got, want);
    for r in refs {
        assert_eq!(outcomes.get(&r), Some(&1), "{r:?} has exactly one outcome");
    }
    assert_eq!(c.stats().sent, n as u64);
}

#[tokio::test]
async fn with_udp_open_quic_wins_and_echoes() {
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &Protocol::ALL,
    )
    .await;
    let mut c = client(addr).initiate().await.unwrap();
    assert_eq!(c.protocol(), Protocol::Quic);
    round_trip(&mut c, 200).await;
}

/// A listener on a wildcard address serves QUIC, and answers from the
/// address each client called: 127.0.0.2 is this host's too, but the
/// route back to the client leaves from 127.0.0.1, so a reply that did
/// not name its source would miss the client's connected socket (and the
/// race would fall back to TCP). A dual-stack `[::]` listener serves IPv4
/// and IPv6 callers alike.
#[tokio::test]
async fn a_wildcard_listener_serves_quic_from_the_address_each_client_called() {
    for (listen, callers) in [
        ("0.0.0.0:0", &["127.0.0.1", "127.0.0.2"][..]),
        ("[::]:0", &["127.0.0.2", "::1"][..]),
    ] {
        let listen: SocketAddr = listen.parse().unwrap();
        let mut l = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
            .with_local(LocalEndpoint::from_addr(listen))
            .with_protocols(&[Protocol::Quic])
            .listen()
            .await
            .unwrap();
        assert!(l.left_out().is_empty(), "{:?}", l.left_out());
        let port = l.local_addrs()[0].1.port();
        tokio::spawn(async move {
            while let Some(c) = l.accept().await {
                tokio::spawn(echo(c));
            }
        });
        for ip in callers {
            let to = SocketAddr::new(ip.parse().unwrap(), port);
            let mut c = tokio::time::timeout(
                Duration::from_secs(5),
                client(to).with_protocols(&[Protocol::Quic]).initiate(),
            )
            .await
            .unwrap_or_else(|_| panic!("{listen} answers {to} within 5 s"))
            .unwrap_or_else(|e| panic!("{listen} answers {to}: {e}"));
            assert_eq!(c.protocol(), Protocol::Quic);
            round_trip(&mut c, 50).await;
        }
    }
}

/// The UDP sockets bound to `port` (IPv4), from /proc/net/udp.
fn udp_sockets_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let want = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&want))
        })
        .count()
}

/// A sharded listener: four sockets share the port (SO_REUSEPORT), each
/// read by its own task, and every client, whichever socket the kernel
/// hands it to, completes its handshake and echoes (a client whose
/// datagrams reached two sockets could not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_listener_serves_every_client_from_several_sockets() {
    let mut l = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_local(local())
        .with_protocols(&[Protocol::Quic])
        .with_listen_shards(4)
        .listen()
        .await
        .unwrap();
    let addr = l.local_addrs()[0].1;
    assert_eq!(udp_sockets_on(addr.port()), 4);
    tokio::spawn(async move {
        while let Some(c) = l.accept().await {
            tokio::spawn(echo(c));
        }
    });
    let clients: Vec<_> = (0..16)
        .map(|_| {
            tokio::spawn(async move {
                let mut c = client(addr)
                    .with_protocols(&[Protocol::Quic])
                    .initiate()
                    .await
                    .unwrap();
                round_trip(&mut c, 20).await;
            })
        })
        .collect();
    for c in clients {
        tokio::time::timeout(Duration::from_secs(20), c)
            .await
            .expect("every client within 20 s")
            .unwrap();
    }
}

/// A listener's QUIC limit: two connections are served, a third caller's
/// Initial is dropped and its attempt times out, while the two go on.
#[tokio::test]
async fn a_quic_listener_serves_no_more_than_its_limit() {
    let mut l = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_local(local())
        .with_protocols(&[Protocol::Quic])
        .with_listen_limit(2)
        .listen()
        .await
        .unwrap();
    let addr = l.local_addrs()[0].1;
    tokio::spawn(async move {
        while let Some(c) = l.accept().await {
            tokio::spawn(echo(c));
        }
    });
    let caller = || {
        client(addr)
            .with_protocols(&[Protocol::Quic])
            .with_establishment_timeout(Duration::from_secs(2))
    };
    let mut a = caller().initiate().await.unwrap();
    let mut b = caller().initiate().await.unwrap();
    assert!(caller().initiate().await.is_err(), "a third connection");
    round_trip(&mut a, 10).await;
    round_trip(&mut b, 10).await;
}

#[tokio::test]
async fn without_a_quic_server_the_race_falls_back_to_kernel_tcp_after_the_stagger() {
    // The server listens on TCP only: QUIC's Initial goes unanswered, as on
    // a path that drops UDP.
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::KernelTcp],
    )
    .await;
    let pre = client(addr).with_racing_delay(Duration::from_millis(100));
    let t0 = tokio::time::Instant::now();
    let mut c = pre.initiate().await.unwrap();
    let took = t0.elapsed();
    assert_eq!(c.protocol(), Protocol::KernelTcp);
    // The stagger, plus a loopback connect.
    assert!(took >= Duration::from_millis(100), "{took:?}");
    assert!(took < Duration::from_millis(600), "{took:?}");
    round_trip(&mut c, 100).await;
}

#[tokio::test]
async fn secure_connections_pin_the_certificate_on_both_protocols() {
    let id = Identity::generate().unwrap();
    for p in [Protocol::Quic, Protocol::KernelTcp] {
        let addr = echo_server(
            TransportProperties::media(),
            SecurityParameters::pinned(id.clone()),
            &[p],
        )
        .await;
        let mut c = Preconnection::new(
            TransportProperties::media(),
            SecurityParameters::pinned(id.clone()),
        )
        .with_remote(RemoteEndpoint::from_addr(addr))
        .with_protocols(&[p])
        .initiate()
        .await
        .unwrap();
        assert_eq!(c.protocol(), p);
        round_trip(&mut c, 50).await;
        // A client that pins another certificate is refused.
        let other = Identity::generate().unwrap();
        let e = Preconnection::new(
            TransportProperties::media(),
            SecurityParameters::pinned(other),
        )
        .with_remote(RemoteEndpoint::from_addr(addr))
        .with_protocols(&[p])
        .with_establishment_timeout(Duration::from_secs(3))
        .initiate()
        .await
        .unwrap_err();
        assert!(matches!(e, Error::Establishment(_)), "{p}: {e}");
    }
}

#[tokio::test]
async fn nothing_listening_names_every_candidate() {
    // A port nobody listens on: TCP is refused; QUIC times out.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let e = client(addr)
        .with_racing_delay(Duration::from_millis(50))
        .with_establishment_timeout(Duration::from_secs(1))
        .initiate()
        .await
        .unwrap_err();
    let s = e.to_string();
    assert!(s.contains("kernel:"), "{s}");
    assert!(s.contains("hollywood: no engine"), "{s}");
    assert!(s.contains("within"), "{s}");
}

#[tokio::test]
async fn bad_contexts_are_refused_at_send() {
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::KernelTcp],
    )
    .await;
    let mut c = client(addr)
        .with_protocols(&[Protocol::KernelTcp])
        .initiate()
        .await
        .unwrap();
    let unreliable = MessageContext {
        reliable: Some(false),
        ..MessageContext::default()
    };
    let e = c.send(&b"x"[..], unreliable.clone()).await.unwrap_err();
    assert!(e.to_string().contains("needs a msgLifetime"), "{e}");
    let e = c
        .send(
            &b"x"[..],
            MessageContext {
                lifetime: Some(Duration::from_millis(5)),
                ..unreliable
            },
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("without per-message reliability"),
        "{e}"
    );
    let e = c
        .send(Vec::new(), MessageContext::default())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let e = c
        .send(
            &b"x"[..],
            MessageContext::default().depends_on(hollywood_taps::MessageRef(3)),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not sent yet"), "{e}");
    // None of them produced an event or used a reference.
    let r = c.send(&b"ok"[..], MessageContext::default()).await.unwrap();
    assert_eq!(r.0, 0);
}

#[tokio::test]
async fn quic_without_preserve_order_refuses_ordered_messages() {
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::Quic],
    )
    .await;
    let mut c = client(addr).initiate().await.unwrap();
    let e = c
        .send(&b"x"[..], MessageContext::default().ordered(true))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("preserveOrder"), "{e}");
}

/// A lifetime counts from the `send` call: a message whose `send` waited
/// for room in a full send queue longer than its lifetime expires (a
/// relay computes the lifetime left of its deadline just before `send`).
#[tokio::test]
async fn a_lifetime_counts_from_the_send_call_not_from_room_in_the_queue() {
    let (mut c, mut server_side) = kernel_tcp_pair().await;
    // A receiver that does not read yet: fill the path and the send queue.
    let payload = vec![7u8; 60_000];
    while tokio::time::timeout(
        Duration::from_millis(100),
        c.send(payload.clone(), MessageContext::default()),
    )
    .await
    .is_ok()
    {}
    let ctx = MessageContext::lifetime(Duration::from_millis(100)).ordered(false);
    let (r, ()) = tokio::join!(c.send(payload.clone(), ctx), async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        tokio::spawn(async move { while let Ok(Some(_)) = server_side.receive().await {} });
    });
    let urgent = r.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        match tokio::time::timeout_at(deadline, c.next_event()).await {
            Ok(Some(Event::Expired { msg })) if msg == urgent => break "expired",
            Ok(Some(Event::Sent { msg, .. })) if msg == urgent => break "sent",
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break "none",
        }
    };
    assert_eq!(
        outcome, "expired",
        "it waited 400 ms for room with a 100 ms lifetime"
    );
}

#[tokio::test]
async fn messages_that_wait_past_their_lifetime_expire_and_their_dependents_too() {
    // A receiver that never reads: the kernel path fills, messages queue in
    // front of it and outlive their lifetimes.
    let (mut c, mut server_side) = kernel_tcp_pair().await;
    let payload = vec![7u8; 60_000];
    let mut last = None;
    let mut refs = Vec::new();
    let n = 300;
    for i in 0..n {
        let mut ctx = MessageContext::lifetime(Duration::from_millis(300)).ordered(false);
        if i % 10 != 0 {
            ctx = ctx.depends_on(last.unwrap());
        }
        let r = c.send(payload.clone(), ctx).await.unwrap();
        refs.push(r);
        if i % 10 == 0 {
            last = Some(r);
        }
    }
    // Let the lifetimes run out, then read: the message the protocol was
    // writing when the path filled completes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = server_side.receive().await {} });
    // Wait for every outcome.
    let mut outcomes = std::collections::HashMap::new();
    let mut abandoned = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while outcomes.len() < n && tokio::time::Instant::now() < deadline {
        let e = tokio::time::timeout(Duration::from_secs(1), c.next_event()).await;
        match e {
            Ok(Some(Event::Sent { msg, .. })) => assert!(outcomes.insert(msg, "sent").is_none()),
            Ok(Some(Event::Expired { msg })) => {
                assert!(outcomes.insert(msg, "expired").is_none())
            }
            Ok(Some(Event::SendError { msg, error })) => panic!("{msg:?}: {error}"),
            Ok(Some(Event::Abandoned { msg, .. })) => {
                assert_eq!(outcomes.get(&msg), Some(&"sent"), "abandoned after sent");
                abandoned += 1;
            }
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => break,
        }
    }
    assert_eq!(outcomes.len(), n, "every message has an outcome");
    let expired = outcomes.values().filter(|v| **v == "expired").count();
    assert!(
        expired > 0,
        "a receiver that does not read makes messages expire"
    );
    // A message whose dependency expired unsent expires too.
    for (i, r) in refs.iter().enumerate() {
        let head = refs[i - i % 10];
        if outcomes[&head] == "expired" {
            assert_eq!(
                outcomes[r], "expired",
                "message {i} depends on an expired one"
            );
        }
    }
    let s = c.stats();
    assert_eq!(s.sent + s.expired, n as u64);
    eprintln!(
        "sent {} expired {} abandoned {abandoned}",
        s.sent, s.expired
    );
}

#[tokio::test]
async fn quic_alone_connects() {
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::Quic],
    )
    .await;
    let r = client(addr)
        .with_protocols(&[Protocol::Quic])
        .with_establishment_timeout(Duration::from_secs(3))
        .initiate()
        .await;
    assert_eq!(r.unwrap().protocol(), Protocol::Quic);
}

#[tokio::test]
async fn split_halves_receive_in_one_task_while_another_sends() {
    for protocol in [Protocol::KernelTcp, Protocol::Quic] {
        let addr = echo_server(
            TransportProperties::media(),
            SecurityParameters::Disabled,
            &[protocol],
        )
        .await;
        let c = client(addr)
            .with_protocols(&[protocol])
            .initiate()
            .await
            .unwrap();
        let (mut tx, mut rx) = c.split();
        assert_eq!((tx.protocol(), rx.protocol()), (protocol, protocol));
        assert_eq!(tx.remote_addr(), rx.remote_addr());
        let n = 200;
        // The receiver waits first: nothing has been sent yet.
        let receiver = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(m) = rx.receive().await.unwrap() {
                got.push(String::from_utf8(m.data).unwrap());
            }
            got
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !receiver.is_finished(),
            "{protocol}: nothing to receive yet"
        );
        for i in 0..n {
            let ctx = MessageContext::default().ordered(false);
            tx.send(format!("message {i}").into_bytes(), ctx)
                .await
                .unwrap();
        }
        tx.close().await.unwrap();
        let mut got = tokio::time::timeout(Duration::from_secs(10), receiver)
            .await
            .expect("the echoes within 10 s")
            .unwrap();
        got.sort();
        let mut want: Vec<String> = (0..n).map(|i| format!("message {i}")).collect();
        want.sort();
        assert_eq!(got, want, "{protocol}");
        let stats = tx.stats();
        assert_eq!(
            (stats.sent, stats.received),
            (n as u64, n as u64),
            "{protocol}"
        );
        let mut sent = 0;
        while let Some(e) = tx.try_event() {
            if matches!(e, Event::Sent { .. }) {
                sent += 1;
            }
        }
        assert_eq!(sent, n, "{protocol}: a Sent event per message");
    }
}

#[tokio::test]
async fn tcp_hollywood_alone_without_an_engine_fails_naming_host_up() {
    // No host-mode instance is up in the test's namespace (its run
    // directory is private to host-mode tests), so asking for TCP
    // Hollywood alone cannot silently run something else.
    let remote = RemoteEndpoint::from_addr("192.0.2.1:9".parse().unwrap());
    let pre = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_remote(remote)
        .with_protocols(&[Protocol::TcpHollywood]);
    match pre.initiate().await {
        Err(Error::NoCandidate(why)) => {
            assert!(why.contains("hollywood host up"), "{why}");
        }
        other => panic!("expected no candidate, got {other:?}"),
    }
    match pre.clone().without_host_engine().initiate().await {
        Err(Error::NoCandidate(why)) => {
            assert!(why.contains("without_host_engine"), "{why}");
        }
        other => panic!("expected no candidate, got {other:?}"),
    }
    // On loopback the default is not looked for: the engine cannot
    // reach it.
    let local = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_remote(RemoteEndpoint::from_addr("127.0.0.1:9".parse().unwrap()))
        .with_protocols(&[Protocol::TcpHollywood]);
    match local.initiate().await {
        Err(Error::NoCandidate(why)) => assert!(why.contains("non-loopback"), "{why}"),
        other => panic!("expected no candidate, got {other:?}"),
    }
}

#[tokio::test]
async fn congestion_control_and_keep_alive_reach_the_kernel_socket() {
    // What the kernel reports for the caller's socket (`ss -tni`):
    // its congestion module and a keep-alive timer.
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::KernelTcp],
    )
    .await;
    let ss = |c: &Connection| {
        let local_of_peer = c.remote_addr();
        let out = std::process::Command::new("ss")
            .args(["-tnio", "state", "established", "dst"])
            .arg(local_of_peer.to_string())
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let plain = client(addr)
        .with_protocols(&[Protocol::KernelTcp])
        .initiate()
        .await
        .unwrap();
    let Ok(before) = ss(&plain) else {
        eprintln!(
            "skip: congestion_control_and_keep_alive_reach_the_kernel_socket needs ss (iproute2)"
        );
        return;
    };
    assert!(!before.contains("keepalive"), "{before}");
    let pre = client(addr)
        .with_protocols(&[Protocol::KernelTcp])
        .with_congestion_control(hollywood_taps::CcAlgorithm::NewReno)
        .with_keep_alive(Duration::from_secs(30));
    assert_eq!(pre.keep_alive(), Some(Duration::from_secs(30)));
    let c = pre.initiate().await.unwrap();
    let after = ss(&c).unwrap();
    // ss lists both connections to the server; the second one has them.
    assert!(after.contains(" reno "), "{after}");
    assert!(after.contains("timer:(keepalive"), "{after}");
    drop((plain, c));
}

#[tokio::test]
async fn a_caller_with_the_certificate_alone_connects_and_a_listener_cannot_serve_with_it() {
    let id = Identity::generate().unwrap();
    let dir = std::env::temp_dir().join(format!("hollywood-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let der = dir.join("cert.der");
    std::fs::write(&der, id.cert_der().as_ref()).unwrap();
    let trusting = Identity::trusting_file(&der, id.name()).unwrap();
    assert!(id.can_serve() && !trusting.can_serve());
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::pinned(id),
        &[Protocol::KernelTcp],
    )
    .await;
    let mut conn = Preconnection::new(
        TransportProperties::media(),
        SecurityParameters::pinned(trusting.clone()),
    )
    .with_remote(RemoteEndpoint::from_addr(addr))
    .with_protocols(&[Protocol::KernelTcp])
    .initiate()
    .await
    .unwrap();
    round_trip(&mut conn, 5).await;
    let c = Preconnection::new(
        TransportProperties::media(),
        SecurityParameters::pinned(trusting),
    )
    .with_local(local());
    match c.listen().await {
        Err(Error::Security(why)) => assert!(why.contains("key"), "{why}"),
        other => panic!("a listener without the key: {other:?}"),
    }
    assert!(Identity::trusting_file(&dir.join("none.der"), "x.example").is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_event_signal_wakes_a_sender_for_each_outcome_without_polling() {
    // A sender that keeps a window of messages in flight waits on the
    // signal, never on a timer: every outcome arrives through it.
    let addr = echo_server(
        TransportProperties::media(),
        SecurityParameters::Disabled,
        &[Protocol::KernelTcp],
    )
    .await;
    let mut c = client(addr).initiate().await.unwrap();
    let signal = c.event_signal();
    let mut outcomes = 0;
    for i in 0..20u32 {
        c.send(i.to_be_bytes().to_vec(), MessageContext::default())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), signal.waiting())
            .await
            .expect("the signal fires for a waiting event");
        // Cancel-safe and takes nothing: the event is still there.
        match c.try_event() {
            Some(Event::Sent { .. }) => outcomes += 1,
            Some(other) => panic!("unexpected {other:?}"),
            None => panic!("the signal fired with no event waiting"),
        }
    }
    assert_eq!(outcomes, 20);
    // Nothing waiting now: the signal does not fire.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), signal.waiting())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_congested_kernel_tcp_receiver_gets_the_urgent_messages_first() {
    // Issue 32: a receiver that does not read fills the kernel path (the
    // socket keeps at most `KERNEL_NOTSENT_LOWAT` unsent), then the send
    // queue in front of it (`SEND_QUEUE_BYTES`): less urgent messages
    // (`msgPriority` 4) are sent until `send` waits. Then 10 urgent ones
    // (priority 0) are sent and the receiver starts reading: the urgent
    // ones overtake every less urgent one still in the queue.
    let (mut c, mut server_side) = kernel_tcp_pair().await;
    let message = |i: u32| {
        let mut m = vec![0u8; 20_000];
        m[..4].copy_from_slice(&i.to_le_bytes());
        m
    };
    let ctx = |p| MessageContext::default().priority(p).ordered(false);
    let mut slow = 0u32;
    // Until `send` waits: path and queue full (the send that timed out
    // queued nothing).
    while let Ok(r) =
        tokio::time::timeout(Duration::from_millis(300), c.send(message(slow), ctx(4))).await
    {
        r.unwrap();
        slow += 1;
        assert!(slow < 5_000, "the path never fills");
    }
    let urgent = 10u32;
    let total = (slow + urgent) as usize;
    let reader = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut order = Vec::new();
        while order.len() < total {
            let m = tokio::time::timeout(Duration::from_secs(10), server_side.receive())
                .await
                .expect("messages arrive")
                .unwrap()
                .expect("not closed");
            order.push(u32::from_le_bytes(m.data[..4].try_into().unwrap()));
            // A slow reader: the sender waits for the socket between
            // messages, as behind a slow path (a reader as fast as the
            // sender lets the sending task write the whole queue without
            // yielding, before the urgent sends could queue anything).
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        order
    });
    for i in slow..slow + urgent {
        c.send(message(i), ctx(0)).await.unwrap();
    }
    let order = reader.await.unwrap();
    let last_urgent = order.iter().rposition(|&i| i >= slow).unwrap();
    let overtaken = order[last_urgent..].iter().filter(|&&i| i < slow).count();
    eprintln!(
        "{slow} less urgent, then {urgent} urgent: {overtaken} less urgent arrive after the last urgent"
    );
    // In order of `send` none would (the queue holds about 50 when the
    // reader starts; a few leave before the urgent ones are queued).
    assert!(
        overtaken >= 10,
        "the urgent messages overtake the queued ones: {order:?}"
    );
    // Each class keeps its own order.
    let (a, b): (Vec<u32>, Vec<u32>) = order.iter().partition(|&&i| i < slow);
    assert!(a.windows(2).all(|w| w[0] < w[1]) && b.windows(2).all(|w| w[0] < w[1]));
}
