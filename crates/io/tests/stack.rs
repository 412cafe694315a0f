//! The async stack API (root only): `hollywood_io::engine` on a TUN device
//! in namespace A against `hollywood_io::kernel` sockets in namespace B —
//! the partial deployments of thesis §4.4 in both directions — and the
//! engine against itself over two TUN devices.
//!
//! ```text
//!  namespace A (hws-PID-Na)                               namespace B (hws-PID-Nb)
//!  engine 1 10.79.1.2 fd79:1::2 ─ hwstun0 10.79.1.1/24 fd79:1::1/64
//!  engine 2 10.79.3.2 fd79:3::2 ─ hwstun1 10.79.3.1/24 fd79:3::1/64 (second TUN)
//!      kernel of A forwards (ip_forward=1)
//!  hws-a 10.79.2.1/24 fd79:2::1/64 ◄── veth ──► hws-b 10.79.2.2/24 fd79:2::2/64
//!                                                          kernel TCP (KernelStream)
//! ```
//!
//! Cases: a/b engine→kernel and kernel→engine, 2000 × 160 B messages,
//! all exactly once, in order; c/d the same with 3% loss injected at the
//! engine host and both Hollywood extensions on it: nothing corrupt or
//! duplicated, every message delivered or reported expired (c), out-of-order
//! delivery and an ordered sub-stream in chain order (d); e 4 MB byte-stream
//! echo through the `AsyncRead`/`write_all` API; f refused connects; g peer
//! resets in both roles; h engine↔engine over two TUN devices with loss;
//! i connect timeout, dropped streams and listeners; j the task ends when
//! every handle is dropped; k IPv6 both ways; l `close` after the peer
//! half-closed without sending; m out-of-order delivery with a tiny receive
//! queue (backpressure) loses nothing; n `close` while the peer's data and
//! FIN wait unread (the data stays readable after); o dropping a stream
//! with unread data resets the peer, as Linux does; p secure mode
//! (docs/SECURITY.md) engine↔engine with loss and engine→kernel, and an
//! untrusted certificate refused; q 200 idle connections beside a busy
//! one are not serviced on its steps.
//!
//! Cases run one at a time (a lock) and each builds and removes its own
//! namespaces (Drop guards, also on panic; stale ones from killed runs are
//! removed by PID).
// An adapter test: real clock on the kernel side.
#![allow(clippy::disallowed_methods)]

mod common;

use hollywood_io::engine::{Stack, StackOptions};
use hollywood_io::kernel::{KernelListener, KernelStream};
use hollywood_io::message::{MessageStream, ReceivedMessage, SendMessage, StreamError};
use hollywood_io::{NetNs, TunConfig, TunDevice, TunHost, VethPair};
use hollywood_tcp::Config;
use std::collections::HashSet;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const ENGINE: Ipv4Addr = Ipv4Addr::new(10, 79, 1, 2);
const TUN0: Ipv4Addr = Ipv4Addr::new(10, 79, 1, 1);
const ENGINE2: Ipv4Addr = Ipv4Addr::new(10, 79, 3, 2);
const TUN1: Ipv4Addr = Ipv4Addr::new(10, 79, 3, 1);
const A_V4: Ipv4Addr = Ipv4Addr::new(10, 79, 2, 1);
const B_V4: Ipv4Addr = Ipv4Addr::new(10, 79, 2, 2);
const ENGINE_V6: Ipv6Addr = Ipv6Addr::new(0xfd79, 1, 0, 0, 0, 0, 0, 2);
const A_V6: Ipv6Addr = Ipv6Addr::new(0xfd79, 2, 0, 0, 0, 0, 0, 1);
const B_V6: Ipv6Addr = Ipv6Addr::new(0xfd79, 2, 0, 0, 0, 0, 0, 2);

/// Longest any one case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(40);
/// Messages per transfer and their size (a 64 kbit/s voice frame every
/// 20 ms is 160 bytes).
const COUNT: u32 = 2000;
const SIZE: usize = 160;

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Namespaces A and B and the veth between them (field order = drop order).
struct Lab {
    _veth: VethPair,
    b: NetNs,
    a: NetNs,
}

impl Lab {
    fn new() -> Lab {
        let removed = NetNs::remove_stale("hws").expect("remove stale namespaces");
        if !removed.is_empty() {
            eprintln!("removed stale namespaces from killed runs: {removed:?}");
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let a = NetNs::create(&format!("hws-{pid}-{n}a")).expect("create namespace A");
        let b = NetNs::create(&format!("hws-{pid}-{n}b")).expect("create namespace B");
        // No duplicate address detection: IPv6 addresses are usable at once.
        for ns in [&a, &b] {
            ns.set_sysctl("net.ipv6.conf.default.accept_dad", "0")
                .expect("DAD off");
            ns.set_sysctl("net.ipv6.conf.all.accept_dad", "0")
                .expect("DAD off");
        }
        let veth = VethPair::create(&a, "hws-a", &b, "hws-b").expect("create veth");
        a.add_addr("hws-a", A_V4.into(), 24).expect("address A");
        b.add_addr("hws-b", B_V4.into(), 24).expect("address B");
        a.add_addr("hws-a", A_V6.into(), 64).expect("address A");
        b.add_addr("hws-b", B_V6.into(), 64).expect("address B");
        b.add_route("default", Some(A_V4.into()), None)
            .expect("route in B");
        b.add_route("default", Some(A_V6.into()), None)
            .expect("IPv6 route in B");
        a.set_sysctl("net.ipv4.ip_forward", "1")
            .expect("forwarding in A");
        a.set_sysctl("net.ipv6.conf.all.forwarding", "1")
            .expect("IPv6 forwarding in A");
        Lab { _veth: veth, b, a }
    }

    /// A TUN device in A whose kernel side is `kernel/24` (call inside the
    /// runtime).
    fn tun(&self, name: &str, kernel: Ipv4Addr) -> TunDevice {
        TunDevice::create(
            &self.a,
            &TunConfig {
                name: name.into(),
                mtu: 1500,
                // fd79:N::1/64 beside 10.79.N.1/24.
                addrs: vec![
                    (IpAddr::V4(kernel), 24),
                    (
                        IpAddr::V6(Ipv6Addr::new(
                            0xfd79,
                            u16::from(kernel.octets()[2]),
                            0,
                            0,
                            0,
                            0,
                            0,
                            1,
                        )),
                        64,
                    ),
                ],
                ..TunConfig::default()
            },
        )
        .expect("create TUN device")
    }

    /// An engine stack on a new TUN device, with `loss` injected both ways.
    fn stack(&self, name: &str, kernel: Ipv4Addr, config: Config, loss: f64, seed: u64) -> Stack {
        self.stack_with(name, kernel, config, loss, seed, StackOptions::default())
    }

    fn stack_with(
        &self,
        name: &str,
        kernel: Ipv4Addr,
        config: Config,
        loss: f64,
        seed: u64,
        options: StackOptions,
    ) -> Stack {
        let mut host = TunHost::new(self.tun(name, kernel), config).expect("TunHost");
        if loss > 0.0 {
            host.set_loss(loss, seed);
        }
        Stack::spawn_with(host, options)
    }
}

/// Take the per-binary lock, or print the skip line when not root.
fn start(case: &str) -> Option<MutexGuard<'static, ()>> {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(&format!(
            "stack::{case} needs root (network namespaces + TUN)"
        ));
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    eprintln!("--- stack::{case}");
    Some(guard)
}

/// Run `f` on a two-worker runtime with the case timeout.
fn run<F: Future<Output = ()>>(f: F) {
    common::run_with_timeout(f, CASE_TIMEOUT);
}

/// Deterministic payload of message `id` (SplitMix64), so a corrupted or
/// misattributed message is caught.
fn payload(seed: u64, id: u32, len: usize) -> Vec<u8> {
    let mut x = seed ^ u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// How a transfer's messages are sent.
#[derive(Debug, Clone, Copy)]
struct Plan {
    seed: u64,
    /// Pause after every `burst` messages (a paced, VoIP-like source).
    burst: u32,
    pause: Duration,
    lifetime: Option<Duration>,
    /// Every `ordered_every`-th message goes on ordered sub-stream 1.
    ordered_every: Option<u32>,
}

impl Plan {
    fn message(&self, i: u32) -> SendMessage {
        let mut m = SendMessage::new(payload(self.seed, i, SIZE));
        if self.ordered_every.is_some_and(|k| i.is_multiple_of(k)) {
            m = m.substream(1).ordered();
        }
        if let Some(l) = self.lifetime {
            m = m.lifetime(l);
        }
        m
    }
}

/// Send `COUNT` messages per `plan` (ids must be 0, 1, 2...), then close.
async fn send_all<S: MessageStream>(s: &mut S, plan: Plan) -> Vec<u32> {
    for i in 0..COUNT {
        let id = s.send_message(plan.message(i)).await.expect("send_message");
        assert_eq!(id, i, "ids count up from 0");
        if (i + 1) % plan.burst == 0 {
            tokio::time::sleep(plan.pause).await;
        }
    }
    s.close().await.expect("close");
    s.take_expired().iter().map(|e| e.id).collect()
}

/// What a receiver saw.
#[derive(Debug, Default)]
struct Received {
    ids: Vec<u32>,
    ordered: Vec<u32>,
}

/// Receive until EOF, checking every payload against `plan`; panics on a
/// corrupt or duplicate message.
async fn recv_all<S: MessageStream>(s: &mut S, plan: Plan) -> Received {
    let mut seen = HashSet::new();
    let mut r = Received::default();
    while let Some(m) = s.recv_message().await.expect("recv_message") {
        check(&m, plan);
        assert!(seen.insert(m.id), "message {} delivered twice", m.id);
        if m.ordered {
            r.ordered.push(m.id);
        }
        r.ids.push(m.id);
    }
    r
}

fn check(m: &ReceivedMessage, plan: Plan) {
    assert!(m.id < COUNT, "unknown message id {}", m.id);
    let want = plan.message(m.id);
    assert_eq!(m.payload, want.payload, "message {} corrupted", m.id);
    assert_eq!(m.substream, want.substream, "message {} sub-stream", m.id);
    assert_eq!(m.ordered, want.ordered, "message {} ordered flag", m.id);
}

fn reliable(seed: u64) -> Plan {
    Plan {
        seed,
        burst: 50,
        pause: Duration::from_millis(5),
        lifetime: None,
        ordered_every: None,
    }
}

/// Engine configuration with both TCP Hollywood extensions (thesis §4.2,
/// §4.3).
fn hollywood() -> Config {
    Config::hollywood(true, true)
}

fn kernel_addr(port: u16) -> SocketAddr {
    SocketAddr::new(B_V4.into(), port)
}

fn engine_addr(port: u16) -> SocketAddr {
    SocketAddr::new(ENGINE.into(), port)
}

/// Engine sender → kernel receiver (thesis §4.4, "only the sender
/// modified"). Returns (receiver's view, ids the sender reported expired,
/// sender stream stats).
async fn engine_to_kernel(
    lab: &Lab,
    stack: &Stack,
    plan: Plan,
    port: u16,
) -> (Received, Vec<u32>, hollywood_io::StreamStats) {
    let listener = KernelListener::bind_in(&lab.b, kernel_addr(port)).expect("kernel listen");
    let receiver = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("kernel accept");
        let r = recv_all(&mut s, plan).await;
        let stats = s.message_stats();
        (r, stats)
    });
    let mut s = stack
        .connect(engine_addr(0), kernel_addr(port), None)
        .await
        .expect("engine connect");
    let expired = send_all(&mut s, plan).await;
    let stats = s.stats();
    let (received, kstats) = receiver.await.expect("kernel receiver task");
    eprintln!("kernel receiver: {kstats:?}");
    assert_eq!(kstats.deframer.crc_rejected, 0, "no splice without a cache");
    (received, expired, stats)
}

/// Kernel sender → engine receiver (thesis §4.4, "only the receiver
/// modified"). Returns the receiver's view and its stream stats.
async fn kernel_to_engine(
    lab: &Lab,
    stack: &Stack,
    plan: Plan,
    port: u16,
) -> (Received, hollywood_io::StreamStats) {
    let mut listener = stack
        .listen(engine_addr(port), None)
        .await
        .expect("engine listen");
    let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
    let sender = tokio::spawn(async move {
        let mut s = KernelStream::connect_in(&ns_b, engine_addr(port))
            .await
            .expect("kernel connect");
        let expired = send_all(&mut s, plan).await;
        assert!(expired.is_empty(), "no lifetimes: nothing expires");
        s.message_stats()
    });
    let (mut s, peer) = listener.accept().await.expect("engine accept");
    assert_eq!(peer.ip(), IpAddr::V4(B_V4));
    let received = recv_all(&mut s, plan).await;
    // The peer closed first: our close goes through LAST-ACK and completes
    // when the peer acknowledges our FIN.
    s.close().await.expect("close after the peer's FIN");
    let stats = s.stats();
    let kstats = sender.await.expect("kernel sender task");
    assert_eq!(kstats.messages_sent, u64::from(COUNT));
    (received, stats)
}

fn all_ids_in_order(r: &Received) {
    let want: Vec<u32> = (0..COUNT).collect();
    assert_eq!(r.ids, want, "every message, once, in order");
}

#[test]
fn a_engine_sender_kernel_receiver() {
    let Some(_serial) = start("a_engine_sender_kernel_receiver") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.0, 0);
        let (r, expired, stats) = engine_to_kernel(&lab, &stack, reliable(1), 9001).await;
        all_ids_in_order(&r);
        assert!(expired.is_empty(), "reliable messages never expire");
        assert_eq!(stats.messages.messages_sent, u64::from(COUNT));
        let report = stack.shutdown().await.expect("shutdown");
        assert!(report.host.packets_out > 0 && report.host.packets_in > 0);
        eprintln!("{report:?}");
    });
}

#[test]
fn b_kernel_sender_engine_receiver() {
    let Some(_serial) = start("b_kernel_sender_engine_receiver") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.0, 0);
        let (r, stats) = kernel_to_engine(&lab, &stack, reliable(2), 9002).await;
        // Without loss nothing overtakes: the order is the sender's.
        all_ids_in_order(&r);
        assert_eq!(stats.messages.messages_received, u64::from(COUNT));
        assert_eq!(stats.messages.deframer.duplicates_dropped, 0);
        assert!(stats.ooo.segments > 0, "segments went through recv_segment");
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn c_engine_sender_with_loss_accounts_for_every_message() {
    let Some(_serial) = start("c_engine_sender_with_loss_accounts_for_every_message") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.03, 33);
        let plan = Plan {
            seed: 3,
            burst: 10,
            pause: Duration::from_millis(2),
            // A few RTTs of this lab: a retransmission often finds the
            // message expired and replaces it with a live one (thesis §4.2).
            lifetime: Some(Duration::from_millis(3)),
            ordered_every: None,
        };
        let (r, expired, stats) = engine_to_kernel(&lab, &stack, plan, 9003).await;
        eprintln!(
            "delivered {} of {COUNT}, expired {}, engine: {:?} {:?}",
            r.ids.len(),
            expired.len(),
            stats.hollywood,
            stats.messages
        );
        // Nothing lost silently: every id was delivered (once, checked by
        // recv_all) or reported expired by the engine.
        let delivered: HashSet<u32> = r.ids.iter().copied().collect();
        let reported: HashSet<u32> = expired.iter().copied().collect();
        let missing: Vec<u32> = (0..COUNT)
            .filter(|i| !delivered.contains(i) && !reported.contains(i))
            .collect();
        assert!(
            missing.is_empty(),
            "lost without an Expired report: {missing:?}"
        );
        assert!(
            stats.connection.retransmitted_segments > 0,
            "loss was repaired"
        );
        assert_eq!(stats.messages.expired, expired.len() as u64);
        let report = stack.shutdown().await.expect("shutdown");
        assert!(report.host.injected_drops_in + report.host.injected_drops_out > 0);
    });
}

#[test]
fn d_kernel_sender_with_loss_engine_delivers_out_of_order() {
    let Some(_serial) = start("d_kernel_sender_with_loss_engine_delivers_out_of_order") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.03, 44);
        let plan = Plan {
            seed: 4,
            burst: 4,
            pause: Duration::from_millis(2),
            lifetime: None,
            ordered_every: Some(4),
        };
        let (r, stats) = kernel_to_engine(&lab, &stack, plan, 9004).await;
        eprintln!(
            "engine receiver: ooo {:?}, deframer {:?}",
            stats.ooo, stats.messages.deframer
        );
        // A kernel sender is reliable: everything arrives, exactly once.
        let mut sorted = r.ids.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..COUNT).collect::<Vec<_>>(), "all, exactly once");
        assert!(
            stats.ooo.out_of_order > 0,
            "segments above a hole were handed up (thesis §4.3): {:?}",
            stats.ooo
        );
        assert!(
            r.ids.windows(2).any(|w| w[1] < w[0]),
            "some message overtook an earlier one"
        );
        // The ordered sub-stream is released in chain order, none skipped.
        let want: Vec<u32> = (0..COUNT).filter(|i| i.is_multiple_of(4)).collect();
        assert_eq!(r.ordered, want, "ordered sub-stream in order, complete");
        assert_eq!(stats.messages.deframer.ordered_skipped, 0);
        stack.shutdown().await.expect("shutdown");
    });
}

/// A plain tokio listener bound inside `ns`.
fn plain_listener(ns: &NetNs, addr: SocketAddr) -> tokio::net::TcpListener {
    let l = ns
        .run(move || -> std::io::Result<std::net::TcpListener> {
            let l = std::net::TcpListener::bind(addr)?;
            l.set_nonblocking(true)?;
            Ok(l)
        })
        .expect("thread in namespace")
        .expect("bind");
    tokio::net::TcpListener::from_std(l).expect("register listener")
}

#[test]
fn e_byte_stream_round_trip() {
    let Some(_serial) = start("e_byte_stream_round_trip") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, Config::default(), 0.0, 0);
        // A kernel echo server: whatever arrives goes back, then FIN.
        let l = plain_listener(&lab.b, kernel_addr(9005));
        let echo = tokio::spawn(async move {
            let (s, _) = l.accept().await.expect("accept");
            let (mut r, mut w) = s.into_split();
            let n = tokio::io::copy(&mut r, &mut w).await.expect("echo");
            tokio::io::AsyncWriteExt::shutdown(&mut w)
                .await
                .expect("echo shutdown");
            n
        });
        let s = stack
            .connect(engine_addr(0), kernel_addr(9005), None)
            .await
            .expect("engine connect");
        let len = 4 << 20;
        let data = payload(5, 0, len);
        let (mut tx, mut rx) = s.split();
        let out = data.clone();
        let writer = tokio::spawn(async move {
            for chunk in out.chunks(100_000) {
                tx.write_all(chunk).await.expect("write_all");
            }
            tx.close().await.expect("close");
            tx.stats()
        });
        // Read through the tokio::io::AsyncRead impl.
        let mut got = Vec::with_capacity(len);
        tokio::io::AsyncReadExt::read_to_end(&mut rx, &mut got)
            .await
            .expect("read_to_end");
        assert_eq!(got.len(), len, "all bytes came back");
        assert!(got == data, "bytes came back intact");
        let wstats = writer.await.expect("writer");
        assert_eq!(wstats.bytes_written, len as u64);
        assert_eq!(echo.await.expect("echo"), len as u64);
        // Mixing modes on a direction is refused, not corrupting.
        let err = rx.recv_message().await.expect_err("bytes then messages");
        assert!(matches!(err, StreamError::WrongMode(_)), "{err}");
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn q_idle_connections_cost_nothing_per_step() {
    // 200 idle connections beside one busy one: the task services the
    // busy one (and whatever the engine touched), not every connection on
    // every step, so a host with thousands of idle callers moves packets
    // at the cost of the busy ones (issue 32: a relay's idle players).
    let Some(_serial) = start("q_idle_connections_cost_nothing_per_step") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, Config::default(), 0.0, 0);
        let l = plain_listener(&lab.b, kernel_addr(9017));
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (s, _) = l.accept().await.expect("accept");
                held.push(s);
                if held.len() == 201 {
                    break;
                }
            }
            // The last one echoes; the others stay idle.
            let s = held.pop().expect("201 accepted");
            let (mut r, mut w) = s.into_split();
            let n = tokio::io::copy(&mut r, &mut w).await.expect("echo");
            (held, n)
        });
        let mut idle = Vec::new();
        for _ in 0..200 {
            idle.push(
                stack
                    .connect(engine_addr(0), kernel_addr(9017), None)
                    .await
                    .expect("engine connect"),
            );
        }
        let busy = stack
            .connect(engine_addr(0), kernel_addr(9017), None)
            .await
            .expect("engine connect");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_, before) = stack.stats().await.expect("stats");
        let (mut tx, mut rx) = busy.split();
        let mut got = vec![0u8; 1000];
        for i in 0..200u32 {
            let chunk = payload(17, i, 1000);
            tx.write_all(&chunk).await.expect("write");
            tokio::io::AsyncReadExt::read_exact(&mut rx, &mut got)
                .await
                .expect("echo back");
            assert!(got == chunk, "round trip {i} intact");
        }
        let (_, after) = stack.stats().await.expect("stats");
        let steps = after.steps - before.steps;
        let serviced = after.serviced - before.serviced;
        eprintln!("{steps} steps, {serviced} connection services");
        assert!(steps >= 200, "one step per round trip at least: {steps}");
        assert!(
            serviced <= 3 * steps,
            "{serviced} services in {steps} steps with 201 connections: idle ones are visited"
        );
        drop(idle);
        tx.close().await.expect("close");
        let (held, n) = server.await.expect("server");
        assert_eq!((held.len(), n), (200, 200_000));
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn f_connect_to_closed_port_is_refused() {
    let Some(_serial) = start("f_connect_to_closed_port_is_refused") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.0, 0);
        let t = tokio::time::Instant::now();
        let err = stack
            .connect(engine_addr(0), kernel_addr(9), None)
            .await
            .expect_err("nobody listens on port 9");
        assert!(matches!(err, StreamError::ConnectionRefused), "{err}");
        assert!(t.elapsed() < Duration::from_secs(2), "refused quickly");
        let io: std::io::Error = err.into();
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        // A kernel client to a port the engine does not listen on: the
        // engine answers with RST too.
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let err = KernelStream::connect_in(&ns_b, engine_addr(9))
            .await
            .expect_err("engine port 9 is closed");
        assert!(matches!(err, StreamError::ConnectionRefused), "{err}");
        let (_, s) = stack.stats().await.expect("stats");
        assert_eq!(s.connect_failed, 1);
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn g_peer_reset_is_an_error() {
    let Some(_serial) = start("g_peer_reset_is_an_error") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.0, 0);
        // Engine receiving, kernel resets after one message.
        let mut listener = stack
            .listen(engine_addr(9007), None)
            .await
            .expect("engine listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let kernel = tokio::spawn(async move {
            let mut s = KernelStream::connect_in(&ns_b, engine_addr(9007))
                .await
                .expect("kernel connect");
            s.send_message(SendMessage::new(&b"before the reset"[..]))
                .await
                .expect("send");
            tokio::time::sleep(Duration::from_millis(100)).await;
            s.abort().expect("abort");
        });
        let (mut s, _) = listener.accept().await.expect("accept");
        let m = s
            .recv_message()
            .await
            .expect("first message")
            .expect("not EOF");
        assert_eq!(m.payload, b"before the reset");
        let err = s.recv_message().await.expect_err("the peer reset");
        assert!(matches!(err, StreamError::Reset), "{err}");
        let err = s
            .send_message(SendMessage::new(&b"x"[..]))
            .await
            .expect_err("cannot send after a reset");
        assert!(matches!(err, StreamError::Reset), "{err}");
        kernel.await.expect("kernel task");

        // Engine sending, kernel resets: the sender's next operations fail.
        let l = plain_listener(&lab.b, kernel_addr(9008));
        let kernel = tokio::spawn(async move {
            let (s, _) = l.accept().await.expect("accept");
            s.set_zero_linger().expect("linger 0");
            drop(s);
        });
        let mut s = stack
            .connect(engine_addr(0), kernel_addr(9008), None)
            .await
            .expect("connect");
        kernel.await.expect("kernel task");
        let err = s.recv_message().await.expect_err("the peer reset");
        assert!(matches!(err, StreamError::Reset), "{err}");
        let err = s.close().await.expect_err("close after reset");
        assert!(matches!(err, StreamError::Reset), "{err}");
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn h_engine_to_engine_with_loss() {
    let Some(_serial) = start("h_engine_to_engine_with_loss") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        // Two engine hosts behind two TUN devices in A; A's kernel routes
        // between them. Loss on the sender's host, both extensions on.
        let sender = lab.stack("hwstun0", TUN0, hollywood(), 0.03, 77);
        let receiver = lab.stack("hwstun1", TUN1, hollywood(), 0.0, 0);
        let plan = Plan {
            seed: 8,
            burst: 10,
            pause: Duration::from_millis(2),
            lifetime: Some(Duration::from_millis(3)),
            ordered_every: None,
        };
        let remote = SocketAddr::new(ENGINE2.into(), 9009);
        let mut listener = receiver.listen(remote, None).await.expect("listen");
        let rx = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let r = recv_all(&mut s, plan).await;
            (r, s.stats())
        });
        let mut s = sender
            .connect(engine_addr(0), remote, None)
            .await
            .expect("connect");
        let expired = send_all(&mut s, plan).await;
        let (r, rstats) = rx.await.expect("receiver task");
        eprintln!(
            "delivered {}, expired {}, sender {:?}, receiver ooo {:?} deframer {:?}",
            r.ids.len(),
            expired.len(),
            s.stats().hollywood,
            rstats.ooo,
            rstats.messages.deframer
        );
        let delivered: HashSet<u32> = r.ids.iter().copied().collect();
        let missing: Vec<u32> = (0..COUNT)
            .filter(|i| !delivered.contains(i) && !expired.contains(i))
            .collect();
        assert!(
            missing.is_empty(),
            "lost without an Expired report: {missing:?}"
        );
        assert!(
            rstats.ooo.out_of_order > 0,
            "out-of-order delivery happened"
        );
        sender.shutdown().await.expect("shutdown sender");
        receiver.shutdown().await.expect("shutdown receiver");
    });
}

#[test]
fn i_connect_timeout_and_dropped_streams() {
    let Some(_serial) = start("i_connect_timeout_and_dropped_streams") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let options = StackOptions {
            connect_timeout: Duration::from_millis(500),
            ..StackOptions::default()
        };
        let stack = lab.stack_with("hwstun0", TUN0, hollywood(), 0.0, 0, options);
        // Nobody has 10.79.2.99: the SYNs go unanswered.
        let t = tokio::time::Instant::now();
        let err = stack
            .connect(
                engine_addr(0),
                SocketAddr::new(Ipv4Addr::new(10, 79, 2, 99).into(), 80),
                None,
            )
            .await
            .expect_err("unanswered SYNs");
        assert!(matches!(err, StreamError::ConnectTimeout(_)), "{err}");
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(450) && waited < Duration::from_secs(3),
            "gave up after the configured timeout, not {waited:?}"
        );

        // Dropping a stream right after queueing loses nothing: the FIN
        // follows the queued messages and the kernel reads them all.
        let listener = KernelListener::bind_in(&lab.b, kernel_addr(9010)).expect("listen");
        let plan = reliable(10);
        let receiver = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            recv_all(&mut s, plan).await
        });
        let mut s = stack
            .connect(engine_addr(0), kernel_addr(9010), None)
            .await
            .expect("connect");
        for i in 0..COUNT {
            s.send_message(plan.message(i)).await.expect("send");
        }
        drop(s);
        let r = receiver.await.expect("receiver");
        all_ids_in_order(&r);

        // A listener dropped with a connection still in its backlog: the
        // connection is closed, not leaked.
        let listener = stack.listen(engine_addr(9011), None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let mut k = KernelStream::connect_in(&ns_b, engine_addr(9011))
            .await
            .expect("kernel connect");
        // Let the engine complete the handshake and queue the connection.
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(listener);
        let end = k.recv_message().await.expect("FIN, not RST");
        assert!(end.is_none(), "the orphaned connection was closed");
        let (_, st) = stack.stats().await.expect("stats");
        assert_eq!(st.accepted, 1);
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn j_dropping_every_handle_ends_the_task() {
    let Some(_serial) = start("j_dropping_every_handle_ends_the_task") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        // An idle stack (no timers pending) ends as soon as its last
        // handle is dropped.
        let idle = lab.stack("hwstun1", TUN1, hollywood(), 0.0, 0);
        idle.stats().await.expect("idle stack runs");
        drop(idle);
        gone(&lab, "hwstun1").await;

        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.0, 0);
        let listener = KernelListener::bind_in(&lab.b, kernel_addr(9012)).expect("listen");
        let plan = reliable(12);
        let receiver = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            recv_all(&mut s, plan).await
        });
        let mut s = stack
            .connect(engine_addr(0), kernel_addr(9012), None)
            .await
            .expect("connect");
        for i in 0..COUNT {
            s.send_message(plan.message(i)).await.expect("send");
        }
        // No shutdown: the task delivers what was queued, sees its FIN
        // acknowledged, and ends, closing the TUN device.
        drop(s);
        drop(stack);
        let r = receiver.await.expect("receiver");
        all_ids_in_order(&r);
        gone(&lab, "hwstun0").await;
    });
}

/// Wait (at most 5 s) until TUN device `name` disappears from A, i.e. the
/// stack task that owned it has ended.
async fn gone(lab: &Lab, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while lab.a.ip(&["link", "show", name]).is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stack task still holds its TUN device {name}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn k_ipv6_both_directions() {
    let Some(_serial) = start("k_ipv6_both_directions") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, hollywood(), 0.0, 0);
        let engine = SocketAddr::new(ENGINE_V6.into(), 0);
        let kernel = SocketAddr::new(B_V6.into(), 9013);
        // Engine → kernel.
        let listener = KernelListener::bind_in(&lab.b, kernel).expect("listen");
        let plan = reliable(13);
        let receiver = tokio::spawn(async move {
            let (mut s, peer) = listener.accept().await.expect("accept");
            assert_eq!(peer.ip(), IpAddr::V6(ENGINE_V6));
            recv_all(&mut s, plan).await
        });
        let mut s = stack.connect(engine, kernel, None).await.expect("connect");
        send_all(&mut s, plan).await;
        all_ids_in_order(&receiver.await.expect("receiver"));
        // Kernel → engine.
        let local = SocketAddr::new(ENGINE_V6.into(), 9014);
        let mut listener = stack.listen(local, None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let plan = reliable(14);
        let sender = tokio::spawn(async move {
            let mut s = KernelStream::connect_in(&ns_b, local)
                .await
                .expect("kernel connect");
            send_all(&mut s, plan).await;
        });
        let (mut s, peer) = listener.accept().await.expect("accept");
        assert_eq!(peer.ip(), IpAddr::V6(B_V6));
        all_ids_in_order(&recv_all(&mut s, plan).await);
        sender.await.expect("sender");
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn l_close_after_the_peer_half_closed_without_data() {
    let Some(_serial) = start("l_close_after_the_peer_half_closed_without_data") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, Config::default(), 0.0, 0);
        // A server that only sends, to a client that half-closes at once
        // (sends nothing, then reads to EOF): the server never reads, and
        // there is nothing to read, so its FIN must not wait for a read.
        let local = engine_addr(9015);
        let mut listener = stack.listen(local, None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let client = tokio::spawn(async move {
            let s = ns_b
                .run(move || std::net::TcpStream::connect(local))
                .expect("thread in B")
                .expect("kernel connect");
            s.set_nonblocking(true).expect("nonblocking");
            let mut s = tokio::net::TcpStream::from_std(s).expect("register");
            tokio::io::AsyncWriteExt::shutdown(&mut s)
                .await
                .expect("half-close");
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut s, &mut got)
                .await
                .expect("read to EOF");
            got
        });
        let (mut s, _) = listener.accept().await.expect("accept");
        // Let the client's FIN arrive first.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let data = payload(15, 0, 100_000);
        s.write_all(&data).await.expect("write_all");
        tokio::time::timeout(Duration::from_secs(5), s.close())
            .await
            .expect("close completes although nothing was read")
            .expect("close");
        assert!(client.await.expect("client") == data, "client got it all");
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn n_close_while_the_peers_data_waits_unread() {
    let Some(_serial) = start("n_close_while_the_peers_data_waits_unread") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, Config::default(), 0.0, 0);
        // The client sends 300 kB and its FIN, then reads to EOF; the
        // server answers and closes before it has read a byte. Its FIN must
        // not wait for a read (the client waits for it), and the client's
        // data must stay readable after the connection ended.
        let local = engine_addr(9016);
        let mut listener = stack.listen(local, None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let sent = payload(16, 0, 300_000);
        let to_send = sent.clone();
        let client = tokio::spawn(async move {
            let s = ns_b
                .run(move || std::net::TcpStream::connect(local))
                .expect("thread in B")
                .expect("kernel connect");
            s.set_nonblocking(true).expect("nonblocking");
            let mut s = tokio::net::TcpStream::from_std(s).expect("register");
            tokio::io::AsyncWriteExt::write_all(&mut s, &to_send)
                .await
                .expect("write");
            tokio::io::AsyncWriteExt::shutdown(&mut s)
                .await
                .expect("half-close");
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut s, &mut got)
                .await
                .expect("read to EOF");
            got
        });
        let (mut s, _) = listener.accept().await.expect("accept");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let answer = payload(16, 1, 50_000);
        s.write_all(&answer).await.expect("write_all");
        tokio::time::timeout(Duration::from_secs(5), s.close())
            .await
            .expect("close completes although the peer's data is unread")
            .expect("close");
        assert!(client.await.expect("client") == answer, "client got it all");
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .expect("read does not hang")
                .expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got.len(), sent.len(), "every byte readable after the close");
        assert!(got == sent, "the bytes as sent");
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn o_dropping_a_stream_with_unread_data_resets_the_peer() {
    let Some(_serial) = start("o_dropping_a_stream_with_unread_data_resets_the_peer") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let stack = lab.stack("hwstun0", TUN0, Config::default(), 0.0, 0);
        let local = engine_addr(9017);
        let mut listener = stack.listen(local, None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let client = tokio::spawn(async move {
            let s = ns_b
                .run(move || std::net::TcpStream::connect(local))
                .expect("thread in B")
                .expect("kernel connect");
            s.set_nonblocking(true).expect("nonblocking");
            let mut s = tokio::net::TcpStream::from_std(s).expect("register");
            tokio::io::AsyncWriteExt::write_all(&mut s, b"never read")
                .await
                .expect("write");
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut s, &mut got)
                .await
                .map(|_| got)
        });
        let (s, _) = listener.accept().await.expect("accept");
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(s);
        let r = tokio::time::timeout(Duration::from_secs(5), client)
            .await
            .expect("the client learns at once")
            .expect("client task");
        let err = r.expect_err("a reset, not an orderly end");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
        let (_, st) = stack.stats().await.expect("stats");
        assert_eq!(st.reset_unread, 1);
        // Nothing unread: an orderly FIN, no reset.
        let local = engine_addr(9018);
        let mut listener = stack.listen(local, None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let client = tokio::spawn(async move {
            let s = ns_b
                .run(move || std::net::TcpStream::connect(local))
                .expect("thread in B")
                .expect("kernel connect");
            s.set_nonblocking(true).expect("nonblocking");
            let mut s = tokio::net::TcpStream::from_std(s).expect("register");
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut s, &mut got)
                .await
                .map(|_| got)
        });
        let (s, _) = listener.accept().await.expect("accept");
        drop(s);
        let got = tokio::time::timeout(Duration::from_secs(5), client)
            .await
            .expect("the client learns at once")
            .expect("client task")
            .expect("an orderly end");
        assert!(got.is_empty());
        let (_, st) = stack.stats().await.expect("stats");
        assert_eq!(st.reset_unread, 1);
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn m_out_of_order_receiver_under_backpressure_loses_nothing() {
    let Some(_serial) = start("m_out_of_order_receiver_under_backpressure_loses_nothing") else {
        return;
    };
    run(async {
        let lab = Lab::new();
        // A receive queue of a few messages: the stack stops pulling
        // segments from the engine long before the sender is done, so
        // segments wait in the engine while the application catches up.
        let options = StackOptions {
            recv_queue: 4 * SIZE,
            ..StackOptions::default()
        };
        let stack = lab.stack_with("hwstun0", TUN0, hollywood(), 0.0, 0, options);
        let plan = Plan {
            burst: 500,
            pause: Duration::from_millis(1),
            ..reliable(16)
        };
        let mut listener = stack.listen(engine_addr(9016), None).await.expect("listen");
        let ns_b = NetNs::open(lab.b.name().expect("named")).expect("open B");
        let sender = tokio::spawn(async move {
            let mut s = KernelStream::connect_in(&ns_b, engine_addr(9016))
                .await
                .expect("kernel connect");
            send_all(&mut s, plan).await;
        });
        let (mut s, _) = listener.accept().await.expect("accept");
        // A slow reader (a pause every 20 messages) that starts before the
        // sender is done: the receive queue fills while the peer is still
        // sending, and segments wait in the engine.
        let mut r = Received::default();
        let mut seen = HashSet::new();
        while let Some(m) = s.recv_message().await.expect("recv_message") {
            check(&m, plan);
            assert!(seen.insert(m.id), "message {} delivered twice", m.id);
            r.ids.push(m.id);
            if r.ids.len() % 20 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        sender.await.expect("sender");
        let st = s.stats();
        eprintln!("ooo {:?} deframer {:?}", st.ooo, st.messages.deframer);
        all_ids_in_order(&r);
        stack.shutdown().await.expect("shutdown");
    });
}

#[test]
fn p_secure_mode_engine_to_engine_with_loss_and_engine_to_kernel() {
    use hollywood_transport::secure::Identity;
    let Some(_serial) = start("p_secure_mode_engine_to_engine_with_loss_and_engine_to_kernel")
    else {
        return;
    };
    run(async {
        let lab = Lab::new();
        let id = Identity::generate().expect("identity");
        // Engine ↔ engine, 3 % loss at the sender's host, both extensions:
        // the handshake on an ordered sub-stream survives out-of-order
        // delivery, and sealed messages survive inconsistent
        // retransmissions (each replacement is a whole sealed message).
        let sender = lab.stack("hwstun0", TUN0, hollywood(), 0.03, 91);
        let receiver = lab.stack("hwstun1", TUN1, hollywood(), 0.0, 0);
        let plan = Plan {
            seed: 12,
            burst: 10,
            pause: Duration::from_millis(2),
            lifetime: Some(Duration::from_millis(3)),
            ordered_every: Some(7),
        };
        let remote = SocketAddr::new(ENGINE2.into(), 9011);
        let mut listener = receiver.listen(remote, None).await.expect("listen");
        let server_id = id.clone();
        let rx = tokio::spawn(async move {
            let (s, _) = listener.accept().await.expect("accept");
            let mut s = s.secure_server(&server_id).await.expect("secure server");
            let r = recv_all(&mut s, plan).await;
            (r, s.secure_stats().expect("secure"))
        });
        let s = sender
            .connect(engine_addr(0), remote, None)
            .await
            .expect("connect");
        let mut s = s.secure_client(&id).await.expect("secure client");
        let expired = send_all(&mut s, plan).await;
        let (r, sec) = rx.await.expect("receiver task");
        eprintln!(
            "secure engine↔engine: delivered {}, expired {}, {sec:?}, sender {:?}",
            r.ids.len(),
            expired.len(),
            s.stats().hollywood
        );
        let delivered: HashSet<u32> = r.ids.iter().copied().collect();
        let missing: Vec<u32> = (0..COUNT)
            .filter(|i| !delivered.contains(i) && !expired.contains(i))
            .collect();
        assert!(
            missing.is_empty(),
            "lost without an Expired report: {missing:?}"
        );
        assert_eq!(sec.opened, r.ids.len() as u64);
        assert_eq!((sec.auth_failed, sec.replayed), (0, 0));
        assert!(
            s.stats().hollywood.ir_sent > 0,
            "inconsistent retransmissions of sealed messages happened"
        );
        let mut chain = r.ordered.clone();
        chain.sort_unstable();
        assert_eq!(r.ordered, chain, "the ordered sub-stream in chain order");

        // Engine → kernel: the two implementations of secure mode agree.
        let listener = KernelListener::bind_in(&lab.b, kernel_addr(9012)).expect("kernel listen");
        let server_id = id.clone();
        let krx = tokio::spawn(async move {
            let (s, _) = listener.accept().await.expect("kernel accept");
            let mut s = s
                .secure_server(&server_id)
                .await
                .expect("kernel secure server");
            let r = recv_all(&mut s, reliable(13)).await;
            (r, s.secure_stats().expect("secure"))
        });
        let s = sender
            .connect(engine_addr(0), kernel_addr(9012), None)
            .await
            .expect("connect to the kernel");
        let mut s = s
            .secure_client(&id)
            .await
            .expect("secure client to the kernel");
        send_all(&mut s, reliable(13)).await;
        let (r, sec) = krx.await.expect("kernel receiver");
        all_ids_in_order(&r);
        assert_eq!((sec.opened, sec.auth_failed), (u64::from(COUNT), 0));

        // A client that trusts another certificate gives up.
        let other = Identity::generate().expect("identity");
        let remote = SocketAddr::new(ENGINE2.into(), 9013);
        let mut listener = receiver.listen(remote, None).await.expect("listen");
        let server = tokio::spawn(async move {
            let (s, _) = listener.accept().await.expect("accept");
            s.secure_server(&id).await.map(|_| ())
        });
        let s = sender
            .connect(engine_addr(0), remote, None)
            .await
            .expect("connect");
        let e = s
            .secure_client(&other)
            .await
            .expect_err("untrusted certificate");
        assert!(
            matches!(e, StreamError::Security(ref m) if m.contains("certificate")),
            "{e}"
        );
        assert!(
            server.await.expect("server task").is_err(),
            "the server gives up too"
        );
        sender.shutdown().await.expect("shutdown sender");
        receiver.shutdown().await.expect("shutdown receiver");
    });
}
