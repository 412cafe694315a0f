//! The engine sharded over a two-queue TUN device (root only):
//! [`ShardedHost`] workers accept connections from Linux clients in
//! namespace B, and open connections (round robin) to a Linux sink in B;
//! each connection carries 1 MiB one way, checked by its receiver, which
//! replies with the count. With the
//! test hook that hands every third packet a worker reads to the other
//! worker, every connection only survives if misrouted packets are
//! forwarded to the worker that owns their connection.

mod common;

use common::*;
use hollywood_io::{NetNs, NsThread, ShardedHost, Step, TunConfig, TunDevice, WorkerReport};
use hollywood_tcp::{Config, ConnHandle, EndpointEvent, Event};
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Bytes each connection carries each way.
const LEN: usize = 1 << 20;
/// Connections the kernel opens to the engine.
const KERNEL_CLIENTS: u8 = 4;
/// Connections the engine opens to the kernel.
const ENGINE_CLIENTS: u8 = 4;
const ENGINE_PORT: u16 = 7000;
const KERNEL_PORT: u16 = 9000;
const TIMEOUT: Duration = Duration::from_secs(60);

/// The bytes connection `id` carries after its first byte (the id):
/// distinct per connection, no short period.
fn pattern(id: u8) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9 ^ u32::from(id).wrapping_mul(0x85eb_ca6b);
    (0..LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// The whole stream of connection `id`: its id, then its pattern.
fn stream(id: u8) -> Vec<u8> {
    let mut v = vec![id];
    v.extend_from_slice(&pattern(id));
    v
}

/// Check a received stream; the reply its receiver sends back: the byte
/// count, 8 bytes big-endian.
fn check_stream(got: &[u8]) -> Result<[u8; 8], String> {
    let Some(&id) = got.first() else {
        return Err("empty stream".into());
    };
    if got[1..] != pattern(id)[..] {
        return Err(format!(
            "stream {id}: {} bytes received differ from the {LEN} sent",
            got.len() - 1
        ));
    }
    Ok((got.len() as u64).to_be_bytes())
}

/// One engine connection and what it still has to do.
struct EngineConn {
    handle: ConnHandle,
    /// Bytes to write: the stream (opened here) or, once the peer's
    /// stream has arrived whole, the reply (accepted).
    out: Vec<u8>,
    written: usize,
    got: Vec<u8>,
    /// Opened here: the stream's id.
    client: Option<u8>,
    eof: bool,
    closed: bool,
}

/// A worker's application: check the streams of accepted connections and
/// reply, send the streams of its share of the engine's connections and
/// check the replies. Ends once its own connections are done and the
/// kernel's clients are (`kernel_done`).
fn worker_app(
    opened: Vec<(u8, ConnHandle)>,
    kernel_done: Arc<AtomicBool>,
) -> impl FnMut(&mut Step<'_>) -> ControlFlow<Result<usize, String>> {
    let mut conns: Vec<EngineConn> = opened
        .into_iter()
        .map(|(id, handle)| EngineConn {
            handle,
            out: stream(id),
            written: 0,
            got: Vec::new(),
            client: Some(id),
            eof: false,
            closed: false,
        })
        .collect();
    let mut buf = vec![0u8; 64 << 10];
    let mut accepted = 0;
    move |step| {
        for e in step.events() {
            match *e {
                EndpointEvent::Accepted { handle, .. } => {
                    accepted += 1;
                    conns.push(EngineConn {
                        handle,
                        out: Vec::new(),
                        written: 0,
                        got: Vec::new(),
                        client: None,
                        eof: false,
                        closed: false,
                    });
                }
                EndpointEvent::Conn {
                    handle,
                    event: ev @ (Event::Reset | Event::TimedOut),
                } => {
                    return ControlFlow::Break(Err(format!("connection {handle:?}: {ev:?}")));
                }
                _ => {}
            }
        }
        for c in &mut conns {
            let Some(conn) = step.endpoint().connection_mut(c.handle) else {
                continue;
            };
            while !c.eof {
                match conn.recv(&mut buf) {
                    Ok(0) => {
                        c.eof = true;
                        if c.client.is_none() {
                            match check_stream(&c.got) {
                                Ok(reply) => c.out = reply.to_vec(),
                                Err(e) => return ControlFlow::Break(Err(e)),
                            }
                        }
                    }
                    Ok(n) => c.got.extend_from_slice(&buf[..n]),
                    Err(_) => break,
                }
            }
            while c.written < c.out.len() {
                match conn.send(&c.out[c.written..]) {
                    Ok(n) if n > 0 => c.written += n,
                    _ => break,
                }
            }
            // Opened here: close after the whole stream; accepted: after
            // the reply.
            if !c.closed && !c.out.is_empty() && c.written == c.out.len() {
                conn.close();
                c.closed = true;
            }
        }
        let clients_done = conns.iter().filter(|c| c.client.is_some()).all(|c| c.eof);
        if clients_done && kernel_done.load(Ordering::Acquire) {
            for c in &conns {
                if let Some(id) = c.client {
                    let want = (LEN as u64 + 1).to_be_bytes();
                    if c.got != want {
                        return ControlFlow::Break(Err(format!(
                            "engine client {id}: reply {:?}, not {want:?}",
                            c.got
                        )));
                    }
                }
            }
            return ControlFlow::Break(Ok(accepted));
        }
        step.wake_after(Duration::from_millis(5));
        ControlFlow::Continue(())
    }
}

/// Read a whole stream from `s`, check it and reply with its length.
fn sink_one(mut s: TcpStream) -> Result<(), String> {
    let mut got = Vec::new();
    s.set_read_timeout(Some(TIMEOUT))
        .and_then(|()| s.read_to_end(&mut got))
        .map_err(|e| format!("kernel sink: {e}"))?;
    let reply = check_stream(&got)?;
    s.write_all(&reply)
        .and_then(|()| s.shutdown(Shutdown::Write))
        .map_err(|e| format!("kernel sink reply: {e}"))
}

/// A Linux sink in `ns` for `n` connections, one thread each.
fn kernel_sink(ns: &NetNs, addr: SocketAddr, n: u8) -> NsThread<Result<(), String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = ns
        .spawn("sink", move || -> Result<(), String> {
            let l = TcpListener::bind(addr).map_err(|e| e.to_string())?;
            tx.send(()).expect("test waits");
            let mut threads = Vec::new();
            for _ in 0..n {
                let (s, _) = l.accept().map_err(|e| e.to_string())?;
                let t = std::thread::Builder::new()
                    .name("sink-conn".into())
                    .spawn(move || sink_one(s))
                    .map_err(|e| e.to_string())?;
                threads.push(t);
            }
            for t in threads {
                t.join().expect("sink thread")?;
            }
            Ok(())
        })
        .expect("spawn sink");
    rx.recv_timeout(Duration::from_secs(5))
        .expect("sink listening");
    t
}

/// A Linux client in `ns`: write stream `id` to `addr`, half-close, and
/// check the reply.
fn kernel_client(ns: &NetNs, addr: SocketAddr, id: u8) -> NsThread<Result<(), String>> {
    ns.spawn("client", move || -> Result<(), String> {
        let run = || -> std::io::Result<Vec<u8>> {
            let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.set_write_timeout(Some(TIMEOUT))?;
            s.write_all(&stream(id))?;
            s.shutdown(Shutdown::Write)?;
            let mut got = Vec::new();
            s.read_to_end(&mut got)?;
            Ok(got)
        };
        let want = (LEN as u64 + 1).to_be_bytes();
        match run() {
            Ok(got) if got == want => Ok(()),
            Ok(got) => Err(format!("kernel client {id}: reply {got:?}, not {want:?}")),
            Err(e) => Err(format!("kernel client {id}: {e}")),
        }
    })
    .expect("spawn client")
}

/// Run the exchange over a two-queue device; `misroute_every` as
/// [`ShardedHost::misroute_every`]. Returns the workers' reports.
fn exchange(test: &str, misroute_every: u64) -> Option<Vec<WorkerReport<Result<usize, String>>>> {
    let rt = root_runtime_or_skip(test)?;
    let _enter = rt.enter();
    let offload = std::env::var_os("HWT_TUN_OFFLOAD").is_some();
    let (lab, tun) = Lab::with_offload(offload).expect("lab");
    let tun_config = TunConfig {
        name: "hwtmq%d".into(),
        mtu: 1500,
        addrs: vec![(IpAddr::V4(TUN_V4), 24)],
        offload,
    };
    // The lab's single-queue device gives way to a two-queue one.
    drop::<TunDevice>(tun);
    let queues = TunDevice::create_queues(&lab.a, &tun_config, 2).expect("two queues");
    assert_eq!(queues.len(), 2);
    assert_eq!(queues[0].name(), queues[1].name());
    let sink_addr = SocketAddr::new(B_V4.into(), KERNEL_PORT);
    let sink = kernel_sink(&lab.b, sink_addr, ENGINE_CLIENTS);
    let kernel_done = Arc::new(AtomicBool::new(false));
    let mut host = ShardedHost::new(queues, Config::default()).expect("sharded host");
    host.set_timeout(TIMEOUT);
    host.misroute_every(misroute_every);
    let done = kernel_done.clone();
    let engine_addr = SocketAddr::new(ENGINE_V4.into(), ENGINE_PORT);
    let run = host
        .start(move |worker, host| {
            host.listen(engine_addr)?;
            let mut opened = Vec::new();
            for id in 0..ENGINE_CLIENTS {
                if worker.opens(usize::from(id)) {
                    let h = host.connect(SocketAddr::new(ENGINE_V4.into(), 0), sink_addr)?;
                    opened.push((100 + id, h));
                }
            }
            Ok(worker_app(opened, done.clone()))
        })
        .expect("workers start");
    let clients: Vec<_> = (0..KERNEL_CLIENTS)
        .map(|id| kernel_client(&lab.b, engine_addr, id))
        .collect();
    for c in clients {
        c.join().expect("client thread").expect("kernel client");
    }
    kernel_done.store(true, Ordering::Release);
    let reports = run.join().expect("workers");
    sink.join().expect("sink thread").expect("kernel sink");
    let mut accepted = 0;
    for r in &reports {
        accepted += r.result.as_ref().expect("worker");
        assert_eq!(r.host.forward_drops, 0, "worker {}: {:?}", r.index, r.host);
    }
    assert_eq!(
        accepted,
        usize::from(KERNEL_CLIENTS),
        "every connection accepted once"
    );
    Some(reports)
}

#[test]
fn two_queues_carry_connections_both_ways_intact() {
    let Some(reports) = exchange("two_queues_carry_connections_both_ways_intact", 0) else {
        return;
    };
    for r in &reports {
        assert_eq!(r.host.misrouted_for_test, 0);
        eprintln!("worker {}: {:?}", r.index, r.host);
    }
    let out: u64 = reports.iter().map(|r| r.host.forwarded_out).sum();
    let into: u64 = reports.iter().map(|r| r.host.forwarded_in).sum();
    // Without misrouting forced, the kernel's flow steering sends each
    // flow to the worker that writes it: few or no packets to forward. A
    // worker that has finished leaves what is still in its inbox.
    assert!(into <= out, "forwarded {out}, taken over {into}");
}

#[test]
fn misrouted_packets_are_forwarded_to_the_worker_that_owns_their_connection() {
    let test = "misrouted_packets_are_forwarded_to_the_worker_that_owns_their_connection";
    let Some(reports) = exchange(test, 3) else {
        return;
    };
    for r in &reports {
        eprintln!("worker {}: {:?}", r.index, r.host);
        // Every third frame read (with offloads a super-packet, taken
        // whole, counts once).
        assert!(
            r.host.misrouted_for_test > 20,
            "worker {} misrouted only {} packets",
            r.index,
            r.host.misrouted_for_test
        );
        assert!(r.host.forwarded_out > 0 && r.host.forwarded_in > 0);
    }
    let out: u64 = reports.iter().map(|r| r.host.forwarded_out).sum();
    let into: u64 = reports.iter().map(|r| r.host.forwarded_in).sum();
    // A worker that has finished leaves what is still in its inbox.
    assert!(
        into > 0 && into <= out,
        "forwarded {out}, taken over {into}"
    );
}
