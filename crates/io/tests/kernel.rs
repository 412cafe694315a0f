//! `hollywood_io::kernel`: the message layer over kernel TCP sockets
//! (thesis §4.4), kernel to kernel on the loopback interface of the current
//! namespace (no root needed).
// An adapter test: real clock.
#![allow(clippy::disallowed_methods)]

mod common;

use hollywood_io::kernel::{KernelListener, KernelStream};
use hollywood_io::message::{MessageStream, SendMessage, StreamError};
use hollywood_tcp::{ExpiryReason, MetaError};
use std::future::Future;
use std::time::Duration;

fn run<F: Future<Output = ()>>(f: F) {
    common::run_with_timeout(f, Duration::from_secs(30));
}

async fn pair() -> (KernelStream, KernelStream) {
    let l = KernelListener::bind("127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind");
    let addr = l.local_addr().expect("local addr");
    let (a, b) = tokio::join!(KernelStream::connect(addr), l.accept());
    (a.expect("connect"), b.expect("accept").0)
}

fn body(id: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(id.wrapping_mul(7)) as u8)
        .collect()
}

#[test]
fn messages_both_ways_with_substreams() {
    run(async {
        let (a, b) = pair().await;
        let (a_tx, a_rx) = a.split();
        let (b_tx, b_rx) = b.split();
        const N: u32 = 500;
        let send = |mut tx: hollywood_io::kernel::KernelSender| async move {
            for i in 0..N {
                let mut m = SendMessage::new(body(i, 1 + (i as usize * 37) % 3000))
                    .substream((i % 3) as u16);
                if i % 3 == 2 {
                    m = m.ordered();
                }
                assert_eq!(tx.send_message(m).await.expect("send"), i);
            }
            tx.close().await.expect("close");
            tx.stats()
        };
        let recv = |mut rx: hollywood_io::kernel::KernelReceiver| async move {
            let mut ids = Vec::new();
            while let Some(m) = rx.recv_message().await.expect("recv") {
                assert_eq!(m.payload, body(m.id, 1 + (m.id as usize * 37) % 3000));
                assert_eq!(m.substream, (m.id % 3) as u16);
                assert_eq!(m.ordered, m.id % 3 == 2);
                ids.push(m.id);
            }
            (ids, rx.stats())
        };
        let (sa, sb, (ra, rsa), (rb, rsb)) =
            tokio::join!(send(a_tx), send(b_tx), recv(a_rx), recv(b_rx));
        let all: Vec<u32> = (0..N).collect();
        assert_eq!(ra, all, "a received b's messages in order, once");
        assert_eq!(rb, all, "b received a's messages in order, once");
        assert_eq!(sa.messages_sent, u64::from(N));
        assert_eq!(sb.messages_sent, u64::from(N));
        assert_eq!(rsa.messages_received, u64::from(N));
        assert_eq!(rsb.deframer.delivered, u64::from(N));
        assert_eq!(rsb.deframer.crc_rejected, 0);
    });
}

#[test]
fn expired_lifetime_drops_at_the_sender() {
    run(async {
        let (mut a, mut b) = pair().await;
        // Every tenth message has a zero lifetime: it is over before the
        // first byte could be written, so the sender drops and reports it.
        // The others (long or no lifetime) are written and delivered. (A
        // lifetime that ends while the message waits for socket space
        // takes the same path; a frame already partly written always
        // completes.)
        const N: u32 = 1000;
        let mut dropped = Vec::new();
        for i in 0..N {
            let mut m = SendMessage::new(body(i, 160));
            if i % 10 == 3 {
                m = m.lifetime(Duration::ZERO);
                dropped.push(i);
            } else if i % 2 == 0 {
                m = m.lifetime(Duration::from_secs(10));
            }
            assert_eq!(a.send_message(m).await.expect("send"), i);
        }
        a.close().await.expect("close");
        let expired = a.take_expired();
        assert_eq!(
            expired.iter().map(|e| e.id).collect::<Vec<_>>(),
            dropped,
            "exactly the zero-lifetime messages were reported"
        );
        assert!(expired.iter().all(|e| e.reason == ExpiryReason::NotSent));
        let stats = a.message_stats();
        assert_eq!(stats.expired, dropped.len() as u64);
        assert_eq!(stats.not_sent, dropped.len() as u64);
        assert_eq!(stats.messages_sent, u64::from(N));
        let mut got = Vec::new();
        while let Some(m) = b.recv_message().await.expect("recv") {
            assert_eq!(m.payload, body(m.id, 160), "message {} intact", m.id);
            got.push(m.id);
        }
        let want: Vec<u32> = (0..N).filter(|i| !dropped.contains(i)).collect();
        assert_eq!(got, want, "everything else arrived, in order, once");
        let d = b.message_stats().deframer;
        assert_eq!(d.crc_rejected + d.cobs_errors, 0, "no partial frame");
    });
}

#[test]
fn bad_messages_are_refused_without_consuming_ids() {
    run(async {
        let (mut a, mut b) = pair().await;
        assert_eq!(a.send_message(SendMessage::new(*b"0")).await.unwrap(), 0);
        assert_eq!(a.send_message(SendMessage::new(*b"1")).await.unwrap(), 1);
        let e = a
            .send_message(SendMessage::new(*b"x").depends_on(2))
            .await
            .expect_err("depends on itself");
        assert!(matches!(e, StreamError::Meta(MetaError::ForwardDependency)));
        let id = a
            .send_message(SendMessage::new(*b"2").depends_on(1))
            .await
            .unwrap();
        assert_eq!(id, 2, "the refused message consumed no id");
        let e = a
            .send_message(SendMessage::new(*b"x").depends_on(0))
            .await
            .expect_err("decreasing dependency");
        assert!(matches!(
            e,
            StreamError::Meta(MetaError::DecreasingDependency)
        ));
        let e = a
            .send_message(SendMessage::new(vec![0; (1 << 20) + 1]))
            .await
            .expect_err("too large");
        assert!(matches!(e, StreamError::TooLarge(_)), "{e}");
        a.close().await.unwrap();
        let e = a
            .send_message(SendMessage::new(*b"late"))
            .await
            .expect_err("closed");
        assert!(matches!(e, StreamError::Closed));
        let mut ids = Vec::new();
        while let Some(m) = b.recv_message().await.unwrap() {
            ids.push(m.id);
        }
        assert_eq!(ids, vec![0, 1, 2]);
    });
}

#[test]
fn abort_resets_the_peer() {
    run(async {
        let (a, mut b) = pair().await;
        a.abort().expect("abort");
        let e = b.recv_message().await.expect_err("reset");
        assert!(matches!(e, StreamError::Reset), "{e}");
        // Writes after the reset: Linux answers ECONNRESET once, then EPIPE;
        // both are a reset to the application, never a raw I/O error.
        for _ in 0..3 {
            let e = b
                .send_message(SendMessage::new(*b"after the reset"))
                .await
                .expect_err("the connection is gone");
            assert!(matches!(e, StreamError::Reset), "{e}");
        }
    });
}

#[test]
fn connect_to_a_closed_port_is_refused() {
    run(async {
        // Bind, learn the port, close: nobody listens there now.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = KernelStream::connect(addr).await.expect_err("refused");
        assert!(matches!(e, StreamError::ConnectionRefused), "{e}");
    });
}

#[test]
fn ordered_messages_are_never_dropped_at_the_sender() {
    // An ordered message names its predecessor; were the kernel sender to
    // drop one whose lifetime passed, the receiver would hold every later
    // message of the sub-stream waiting for it (and lose them at EOF). As
    // at the engine (`replaceable = !ordered`), ordered messages are
    // reliable whatever their lifetime.
    run(async {
        let (mut a, mut b) = pair().await;
        for i in 0..3u32 {
            let m = SendMessage::new(body(i, 100))
                .substream(1)
                .ordered()
                .lifetime(Duration::ZERO);
            assert_eq!(a.send_message(m).await.expect("send"), i);
        }
        a.close().await.expect("close");
        assert!(a.take_expired().is_empty(), "nothing dropped");
        let mut got = Vec::new();
        while let Some(m) = b.recv_message().await.expect("recv") {
            got.push(m.id);
        }
        assert_eq!(got, vec![0, 1, 2]);
    });
}

#[test]
fn secure_mode_seals_messages_both_ways() {
    use hollywood_io::kernel::KernelListener;
    use hollywood_transport::secure::Identity;
    run(async {
        let id = Identity::generate().unwrap();
        let (a, b) = pair().await;
        let (a, b) = tokio::join!(a.secure_client(&id), b.secure_server(&id));
        let (mut a, mut b) = (a.expect("client handshake"), b.expect("server handshake"));
        for i in 0..50u32 {
            let got = a
                .send_message(SendMessage::new(body(i, 300)).substream((i % 3) as u16))
                .await
                .unwrap();
            assert_eq!(got, i, "application ids from 0, the handshake apart");
        }
        b.send_message(SendMessage::new(*b"back")).await.unwrap();
        a.close().await.unwrap();
        let mut n = 0;
        while let Some(m) = b.recv_message().await.unwrap() {
            assert_eq!(m.payload, body(m.id, 300));
            assert_eq!(m.substream, (m.id % 3) as u16);
            n += 1;
        }
        assert_eq!(n, 50);
        let s = b.secure_stats().expect("secure");
        assert_eq!((s.opened, s.auth_failed), (50, 0));
        assert_eq!(a.recv_message().await.unwrap().unwrap().payload, b"back");

        // A client that trusts another certificate gives up; the server
        // learns it too.
        let other = Identity::generate().unwrap();
        let l = KernelListener::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(KernelStream::connect(addr), l.accept());
        let (c, s) = tokio::join!(
            c.unwrap().secure_client(&other),
            s.unwrap().0.secure_server(&id)
        );
        let e = c.expect_err("untrusted certificate");
        assert!(
            matches!(e, StreamError::Security(ref m) if m.contains("certificate")),
            "{e}"
        );
        assert!(s.is_err(), "the server does not complete either");

        // A plain peer is not mistaken for a secure one.
        let (c, s) = pair().await;
        let mut s = s;
        let client = tokio::spawn(async move { c.secure_client(&id).await });
        s.send_message(SendMessage::new(*b"plain hello"))
            .await
            .unwrap();
        let e = client
            .await
            .unwrap()
            .expect_err("no handshake from a plain peer");
        assert!(matches!(e, StreamError::Security(_)), "{e}");
    });
}
