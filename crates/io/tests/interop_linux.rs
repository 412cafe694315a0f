//! Interop smoke test (root only): our engine, attached to a TUN device in
//! namespace A, against the Linux kernel's TCP in namespace B. See
//! `tests/common/mod.rs` or the crate README for the topology.
//!
//! Cases (each builds and tears down its own namespaces; they run one at a
//! time under a lock):
//! - `a_handshakes`: engine → kernel listener and kernel → engine listener;
//!   MSS, window scaling, SACK-permitted and timestamps negotiated, checked
//!   on both sides (engine `negotiated()`, kernel `ss -tin`);
//! - `b_bulk_5mb_each_way`: 5 MB each way at once, byte-exact on both
//!   sides, then FIN both ways; engine reaches TIME-WAIT/CLOSED, kernel
//!   reads EOF;
//! - `c_bulk_with_1pct_loss`: the same with 1% loss injected by the host in
//!   both directions (seeded); the engine must have retransmitted;
//! - `d_ipv6_bulk`: 1 MB each way over IPv6.
//!
//! `HWT_PCAP_DIR=/dir` writes `/dir/CASE.pcap` with what the engine saw.
// An adapter test: real clock and threads on the kernel side.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use hollywood_io::{NetNs, NsThread, TunDevice, TunHost};
use hollywood_tcp::{Config, ConnHandle, ConnectionStats, Endpoint, EndpointEvent, Event, State};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest any one case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(30);
/// Kernel socket timeouts (so a broken engine cannot hang the threads).
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);

static SERIAL: Mutex<()> = Mutex::new(());

/// Take the per-binary lock, or print the skip line when not root.
fn start(case: &str) -> Option<MutexGuard<'static, ()>> {
    if !root_or_skip("interop_linux") {
        return None;
    }
    let guard = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    eprintln!("--- interop_linux::{case}");
    Some(guard)
}

/// Engine configuration: defaults (Linux-like), everything offered.
fn engine_config() -> Config {
    Config::default()
}

fn new_host(tun: TunDevice, case: &str) -> TunHost {
    let mut host = TunHost::new(tun, engine_config()).expect("create TunHost");
    if let Some(dir) = std::env::var_os("HWT_PCAP_DIR") {
        let path = std::path::Path::new(&dir).join(format!("{case}.pcap"));
        host.capture_to(&path).expect("open pcap capture");
        eprintln!("capturing to {}", path.display());
    }
    host
}

// ---------------------------------------------------------------------
// Deterministic byte streams
// ---------------------------------------------------------------------

/// `len` bytes of stream `id`: a SplitMix64 sequence, so that a byte at the
/// wrong offset or from the other direction's stream is caught.
fn pattern(id: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x = id.wrapping_mul(0xA076_1D64_78BD_642F);
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Check that `got` is `expected[offset..offset + got.len()]`.
fn check_slice(who: &str, expected: &[u8], offset: usize, got: &[u8]) -> Result<(), String> {
    let end = offset + got.len();
    if end > expected.len() {
        return Err(format!(
            "{who}: received {end} bytes, more than the {} sent",
            expected.len()
        ));
    }
    if let Some(i) = got
        .iter()
        .zip(&expected[offset..end])
        .position(|(a, b)| a != b)
    {
        return Err(format!(
            "{who}: byte {} differs: got {:#04x}, expected {:#04x}",
            offset + i,
            got[i],
            expected[offset + i]
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Kernel side (threads inside namespace B)
// ---------------------------------------------------------------------

/// What a kernel socket saw.
#[derive(Debug)]
struct KernelReport {
    /// Bytes received and verified before EOF.
    received: usize,
    /// Bytes written before shutdown(Write).
    sent: usize,
    /// `ss -tin` line for the connection, captured while it was open.
    ss: String,
}

/// Write `out` then shut down the write side, while reading and verifying
/// `expect` until EOF; returns when both are done.
fn kernel_exchange(
    stream: TcpStream,
    out: Vec<u8>,
    expect: Vec<u8>,
    ss_filter: Option<String>,
) -> io::Result<KernelReport> {
    stream.set_read_timeout(Some(SOCKET_TIMEOUT))?;
    stream.set_write_timeout(Some(SOCKET_TIMEOUT))?;
    let ss = match ss_filter {
        Some(filter) => ss_info(&filter)?,
        None => String::new(),
    };
    let mut writer = stream.try_clone()?;
    let sent = out.len();
    let write_side = std::thread::spawn(move || -> io::Result<()> {
        for chunk in out.chunks(64 * 1024) {
            writer.write_all(chunk)?;
        }
        writer.shutdown(std::net::Shutdown::Write)
    });
    let mut reader = stream;
    let mut buf = vec![0u8; 64 * 1024];
    let mut received = 0;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        check_slice("kernel receiver", &expect, received, &buf[..n]).map_err(io::Error::other)?;
        received += n;
    }
    if received != expect.len() {
        return Err(io::Error::other(format!(
            "kernel receiver: EOF after {received} of {} bytes",
            expect.len()
        )));
    }
    write_side
        .join()
        .map_err(|_| io::Error::other("kernel writer panicked"))??;
    Ok(KernelReport { received, sent, ss })
}

/// `ss -tinH` for the socket(s) matching `filter`, run from this thread (a
/// child process inherits the thread's network namespace).
fn ss_info(filter: &str) -> io::Result<String> {
    let mut args = vec!["-tinH"];
    args.extend(filter.split_whitespace());
    let out = std::process::Command::new("ss").args(&args).output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" "))
}

/// Start a kernel listener on `addr` in `ns`; once it accepted one
/// connection it runs [`kernel_exchange`]. Returns after the listener is bound.
fn kernel_server(
    ns: &NetNs,
    addr: SocketAddr,
    out: Vec<u8>,
    expect: Vec<u8>,
    ss: bool,
) -> NsThread<io::Result<KernelReport>> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let thread = ns
        .spawn("kernel-server", move || -> io::Result<KernelReport> {
            let listener = TcpListener::bind(addr);
            let _ = ready_tx.send(listener.as_ref().map(|_| ()).map_err(|e| e.to_string()));
            let listener = listener?;
            listener.set_nonblocking(true)?;
            let deadline = Instant::now() + SOCKET_TIMEOUT;
            let (stream, peer) = loop {
                match listener.accept() {
                    Ok(s) => break s,
                    Err(e)
                        if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => return Err(e),
                }
            };
            stream.set_nonblocking(false)?;
            let filter = ss.then(|| format!("src {addr} dst {peer}"));
            kernel_exchange(stream, out, expect, filter)
        })
        .expect("spawn kernel server thread in B");
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("kernel server thread did not start")
        .expect("kernel server could not bind");
    thread
}

/// Connect from `ns` to `engine` and run [`kernel_exchange`].
fn kernel_client(
    ns: &NetNs,
    engine: SocketAddr,
    out: Vec<u8>,
    expect: Vec<u8>,
    ss: bool,
) -> NsThread<io::Result<KernelReport>> {
    ns.spawn("kernel-client", move || -> io::Result<KernelReport> {
        let stream = TcpStream::connect_timeout(&engine, Duration::from_secs(10))?;
        let filter = ss.then(|| format!("dst {engine}"));
        kernel_exchange(stream, out, expect, filter)
    })
    .expect("spawn kernel client thread in B")
}

// ---------------------------------------------------------------------
// Engine side
// ---------------------------------------------------------------------

/// One engine connection sending `out` and receiving `expect`, then closing.
struct EngineSide {
    handle: Option<ConnHandle>,
    out: Vec<u8>,
    sent: usize,
    expect: Vec<u8>,
    received: usize,
    eof: bool,
    close_called: bool,
    connected: bool,
    closed_event: bool,
    /// Last state seen while the connection existed.
    last_state: Option<State>,
    /// Last stats seen while the connection existed.
    stats: ConnectionStats,
    negotiated: Option<hollywood_tcp::conn::Negotiated>,
    buf: Vec<u8>,
}

impl EngineSide {
    fn new(out: Vec<u8>, expect: Vec<u8>) -> EngineSide {
        EngineSide {
            handle: None,
            out,
            sent: 0,
            expect,
            received: 0,
            eof: false,
            close_called: false,
            connected: false,
            closed_event: false,
            last_state: None,
            stats: ConnectionStats::default(),
            negotiated: None,
            buf: vec![0u8; 64 * 1024],
        }
    }

    /// React to this step's events for our connection.
    fn on_events(&mut self, events: &[EndpointEvent]) -> Result<(), String> {
        for e in events {
            match *e {
                EndpointEvent::Accepted { handle, .. } if self.handle.is_none() => {
                    self.handle = Some(handle);
                    self.connected = true;
                }
                EndpointEvent::Conn { handle, event } if Some(handle) == self.handle => match event
                {
                    Event::Connected => self.connected = true,
                    Event::Closed => self.closed_event = true,
                    Event::Reset => return Err("engine: connection reset by the kernel".into()),
                    Event::TimedOut => return Err("engine: connection timed out".into()),
                    Event::Readable
                    | Event::Writable
                    | Event::PeerClosed
                    | Event::Expired(_)
                    | Event::MessageSent { .. }
                    | Event::RewritingStopped => {}
                },
                _ => {}
            }
        }
        Ok(())
    }

    /// Send what fits, read what is there, close when all is queued.
    fn pump(&mut self, ep: &mut Endpoint) -> Result<(), String> {
        let Some(h) = self.handle else { return Ok(()) };
        let Some(conn) = ep.connection_mut(h) else {
            return Ok(());
        };
        self.last_state = Some(conn.state());
        self.stats = conn.stats().clone();
        if !self.connected {
            return Ok(());
        }
        self.negotiated.get_or_insert_with(|| conn.negotiated());
        while self.sent < self.out.len() {
            match conn.send(&self.out[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(hollywood_tcp::Error::WouldBlock) => break,
                Err(e) => return Err(format!("engine send after {} bytes: {e}", self.sent)),
            }
        }
        if self.sent == self.out.len() && !self.close_called {
            conn.close();
            self.close_called = true;
        }
        while !self.eof {
            match conn.recv(&mut self.buf) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    check_slice(
                        "engine receiver",
                        &self.expect,
                        self.received,
                        &self.buf[..n],
                    )?;
                    self.received += n;
                }
                Err(hollywood_tcp::Error::WouldBlock) => break,
                Err(e) => return Err(format!("engine recv after {} bytes: {e}", self.received)),
            }
        }
        self.last_state = Some(conn.state());
        self.stats = conn.stats().clone();
        Ok(())
    }

    /// Everything sent and received, EOF seen, and the connection in
    /// TIME-WAIT or CLOSED (or already gone after its `Closed` event).
    fn done(&self, ep: &Endpoint) -> bool {
        let Some(h) = self.handle else { return false };
        let state_ok = match ep.connection(h) {
            Some(c) => matches!(c.state(), State::TimeWait | State::Closed),
            None => self.closed_event,
        };
        self.eof && self.close_called && self.received == self.expect.len() && state_ok
    }

    fn summary(&self) -> String {
        format!(
            "state {:?}, sent {} B, received {} B, segments out {}, retransmitted {}, fast retransmits {}, RTOs {}, SACK recoveries {}",
            self.last_state,
            self.sent,
            self.received,
            self.stats.segments_sent,
            self.stats.retransmitted_segments,
            self.stats.fast_retransmits,
            self.stats.rto_events,
            self.stats.sack_recoveries,
        )
    }
}

/// Who opens the connection in a transfer.
#[derive(Debug, Clone, Copy)]
enum Opener {
    Engine,
    Kernel,
}

/// One connection between the engine and a kernel socket in B.
struct Transfer {
    opener: Opener,
    /// The engine's address (listening port when the kernel opens).
    engine_addr: SocketAddr,
    /// The kernel's listening address (when the engine opens).
    kernel_addr: SocketAddr,
    /// What the engine sends (and the kernel expects).
    engine_out: Vec<u8>,
    /// What the kernel sends (and the engine expects).
    kernel_out: Vec<u8>,
    /// Record the kernel's `ss -tin` view of the connection.
    ss: bool,
}

/// Run one connection to completion, both sides sending at once, then
/// closing. Returns the engine side and the kernel report.
async fn transfer(lab: &Lab, host: &mut TunHost, t: Transfer) -> (EngineSide, KernelReport) {
    let Transfer {
        opener,
        engine_addr,
        kernel_addr,
        engine_out,
        kernel_out,
        ss,
    } = t;
    let mut side = EngineSide::new(engine_out.clone(), kernel_out.clone());
    let kernel = match opener {
        Opener::Engine => {
            let k = kernel_server(&lab.b, kernel_addr, kernel_out, engine_out, ss);
            let local = SocketAddr::new(engine_addr.ip(), 0);
            side.handle = Some(host.connect(local, kernel_addr).expect("engine connect"));
            k
        }
        Opener::Kernel => {
            host.listen(engine_addr).expect("engine listen");
            kernel_client(&lab.b, engine_addr, kernel_out, engine_out, ss)
        }
    };
    let started = Instant::now();
    let mut kernel = Some(kernel);
    let mut report = None;
    let outcome = tokio::time::timeout(
        CASE_TIMEOUT,
        host.drive(|step| {
            let result = side
                .on_events(step.events())
                .and_then(|()| side.pump(step.endpoint()));
            if let Err(e) = result {
                return ControlFlow::Break(Err(e));
            }
            if kernel.as_ref().is_some_and(NsThread::is_finished) {
                match kernel.take().map(NsThread::join) {
                    Some(Ok(Ok(r))) => report = Some(r),
                    Some(Ok(Err(e))) => {
                        return ControlFlow::Break(Err(format!("kernel side: {e}")))
                    }
                    Some(Err(e)) => return ControlFlow::Break(Err(format!("kernel thread: {e}"))),
                    None => {}
                }
            }
            // Keep driving the engine until the kernel side is done too, so
            // a lost final ACK is still answered from TIME-WAIT.
            if side.done(step.endpoint()) && report.is_some() {
                return ControlFlow::Break(Ok(()));
            }
            step.wake_after(Duration::from_millis(5));
            ControlFlow::Continue(())
        }),
    )
    .await;
    let elapsed = started.elapsed();
    match outcome {
        Err(_) => panic!(
            "case timed out after {CASE_TIMEOUT:?}; engine: {}",
            side.summary()
        ),
        Ok(Err(e)) => panic!("host failed: {e}; engine: {}", side.summary()),
        Ok(Ok(Err(e))) => panic!("{e}; engine: {}", side.summary()),
        Ok(Ok(Ok(()))) => {}
    }
    let report = report.expect("kernel report");
    let mbps = (side.sent + side.received) as f64 * 8.0 / elapsed.as_secs_f64() / 1e6;
    eprintln!(
        "{opener:?} opened; done in {elapsed:.2?} ({mbps:.0} Mbit/s both ways); engine: {}",
        side.summary()
    );
    eprintln!("host: {:?}", host.stats());
    (side, report)
}

// ---------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------

/// Assert the engine negotiated every option with Linux, and that Linux
/// agrees. `ss -tin` prints `wscale:SND,RCV`, which must mirror the
/// engine's shifts, and `mss:1448` only when timestamps are in use
/// (1500 - 40 - 12). (This kernel's `tcp_info` does not set the `ts`/`sack`
/// option flags even on loopback, so SACK is checked from the engine's side
/// here and in use by `c_bulk_with_1pct_loss`, where Linux's SACK blocks
/// drive the engine's SACK recoveries.)
fn assert_negotiated(side: &EngineSide, report: &KernelReport) {
    let n = side.negotiated.expect("engine connection was established");
    eprintln!("engine negotiated: {n:?}");
    eprintln!("kernel ss: {}", report.ss);
    assert!(n.peer_mss_present, "Linux always sends MSS");
    assert_eq!(
        n.peer_mss, 1460,
        "Linux over a 1500-byte veth announces MSS 1460"
    );
    assert_eq!(
        n.smss,
        1460 - 12,
        "timestamps take 12 bytes of every segment"
    );
    assert!(n.window_scaling, "window scaling negotiated");
    assert!(
        n.snd_wscale > 0 && n.snd_wscale <= 14,
        "Linux announces a window scale shift"
    );
    assert!(n.sack, "SACK-permitted negotiated");
    assert!(n.timestamps, "timestamps negotiated");
    let ss = format!(" {} ", report.ss);
    let wscale = format!(" wscale:{},{} ", n.rcv_wscale, n.snd_wscale);
    assert!(
        ss.contains(&wscale),
        "kernel's wscale:SND,RCV must mirror the engine's ({wscale}): {ss}"
    );
    assert!(
        ss.contains(" mss:1448 "),
        "kernel's MSS must account for timestamps: {ss}"
    );
}

#[test]
fn a_handshakes() {
    let Some(_serial) = start("a_handshakes") else {
        return;
    };
    current_thread_runtime().block_on(async {
        let (lab, tun) = Lab::new().expect("build lab");
        let mut host = new_host(tun, "a_handshakes");
        let engine = SocketAddr::new(ENGINE_V4.into(), 7002);
        let kernel = SocketAddr::new(B_V4.into(), 7001);
        let msg_e = pattern(1, 1000);
        let msg_k = pattern(2, 1000);
        for opener in [Opener::Engine, Opener::Kernel] {
            let t = Transfer {
                opener,
                engine_addr: engine,
                kernel_addr: kernel,
                engine_out: msg_e.clone(),
                kernel_out: msg_k.clone(),
                ss: true,
            };
            let (side, report) = transfer(&lab, &mut host, t).await;
            assert_negotiated(&side, &report);
        }
    });
}

/// 5 MB each way at once; returns the engine side.
async fn bulk(case: &str, loss: f64, v6: bool, size: usize, opener: Opener) -> EngineSide {
    let (lab, tun) = Lab::new().expect("build lab");
    let mut host = new_host(tun, case);
    if loss > 0.0 {
        host.set_loss(loss, 0x4857_5400 + size as u64);
    }
    let (engine, kernel): (IpAddr, IpAddr) = if v6 {
        (ENGINE_V6.into(), B_V6.into())
    } else {
        (ENGINE_V4.into(), B_V4.into())
    };
    let t = Transfer {
        opener,
        engine_addr: SocketAddr::new(engine, 8002),
        kernel_addr: SocketAddr::new(kernel, 8001),
        engine_out: pattern(10, size),
        kernel_out: pattern(11, size),
        ss: false,
    };
    let (side, report) = transfer(&lab, &mut host, t).await;
    assert_eq!(side.received, size, "engine received everything");
    assert!(side.eof, "engine saw the kernel's FIN as EOF");
    assert!(
        matches!(side.last_state, Some(State::TimeWait | State::Closed)) || side.closed_event,
        "engine reached TIME-WAIT or CLOSED, last state {:?}",
        side.last_state
    );
    assert_eq!(
        report.received, size,
        "kernel received everything, then EOF"
    );
    assert_eq!(report.sent, size);
    if loss > 0.0 {
        let h = host.stats();
        assert!(
            h.injected_drops_in > 0 && h.injected_drops_out > 0,
            "loss was injected both ways: {h:?}"
        );
    }
    side
}

#[test]
fn b_bulk_5mb_each_way() {
    let Some(_serial) = start("b_bulk_5mb_each_way") else {
        return;
    };
    current_thread_runtime().block_on(async {
        let side = bulk("b_bulk_5mb_each_way", 0.0, false, 5 << 20, Opener::Engine).await;
        assert!(side.stats.segments_sent > 0);
    });
}

#[test]
fn c_bulk_with_1pct_loss() {
    let Some(_serial) = start("c_bulk_with_1pct_loss") else {
        return;
    };
    current_thread_runtime().block_on(async {
        let side = bulk(
            "c_bulk_with_1pct_loss",
            0.01,
            false,
            5 << 20,
            Opener::Kernel,
        )
        .await;
        assert!(
            side.stats.retransmitted_segments > 0,
            "engine retransmitted under loss: {}",
            side.summary()
        );
        assert!(
            side.stats.sack_recoveries > 0,
            "Linux's SACK blocks drove SACK recovery: {}",
            side.summary()
        );
    });
}

#[test]
fn d_ipv6_bulk() {
    let Some(_serial) = start("d_ipv6_bulk") else {
        return;
    };
    current_thread_runtime().block_on(async {
        let side = bulk("d_ipv6_bulk", 0.0, true, 1 << 20, Opener::Engine).await;
        let n = side.negotiated.expect("established");
        assert_eq!(n.peer_mss, 1440, "Linux announces 1500 - 60 over IPv6");
        assert_eq!(n.smss, 1440 - 12);
        assert!(n.window_scaling && n.sack && n.timestamps, "{n:?}");
    });
}
