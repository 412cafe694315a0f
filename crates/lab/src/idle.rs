//! Memory per idle connection (issue 32 item 3): N connections to a
//! listener that each exchange one small echo and then stay open and
//! idle, against our engine on its TUN and against Linux, in the same run;
//! then the engine again with a memory limit that N connections exceed.
//!
//! ```text
//!  a: N client sockets (Linux) ══► e: emulator ══► b: echo server (engine on TUN | Linux socket)
//! ```
//!
//! - **Engine**: the growth of this process's RSS (`VmRSS`, after
//!   `malloc_trim` gave free heap pages back) from the
//!   first [`WARM`] connections to all of them, per connection. It holds
//!   the engine's connections, the stack's per-stream state and the echo
//!   tasks; the client sockets are kernel objects, not in the RSS. The
//!   engine's own count ([`hollywood_tcp::EndpointStats::memory_used`]) is
//!   reported too.
//! - **Linux**: the kernel's memory grows for both ends of each connection
//!   (the clients are Linux sockets in both runs), so the server's share is
//!   the growth of `Slab` (/proc/meminfo) plus TCP's buffer pages
//!   (/proc/net/sockstat `mem`) in the Linux run minus the same in the
//!   engine run, per connection. The echo tasks of the Linux server are in
//!   this process's RSS, reported separately. Both are machine-wide
//!   figures: other processes allocating kernel memory meanwhile add
//!   noise.
//! - **Limit**: the engine with `Config::memory_limit` = `limit`; every
//!   caller either gets its echo, or is refused (`ECONNREFUSED`, the
//!   engine's RST); after the last one, the first connections echo again
//!   (existing connections keep working).
//!
//! Needs root (namespaces, TUN) and file descriptors for 2 N sockets (the
//! limit is raised to the hard limit).

use crate::topology::{Host, Lab, LabSpec};
use crate::workload;
use hollywood_io::engine::Stack;
use hollywood_io::NetNs;
use hollywood_sim::LinkConfig;
use hollywood_tcp::Config;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Errors (setup failures).
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

/// Prefix of the labs this module creates.
pub const LAB_PREFIX: &str = "hwi";
/// The server's port.
const PORT: u16 = 5700;
/// Connections opened before the first memory sample (allocator and
/// runtime warm-up).
const WARM: usize = 100;
/// Connections checked again after the last one was opened.
const RECHECK: usize = 10;

/// Parameters of a run.
#[derive(Debug, Clone)]
pub struct IdleSpec {
    /// Namespace prefix of the labs.
    pub lab: String,
    /// Connections opened.
    pub connections: usize,
    /// Bytes each connection echoes once.
    pub payload: usize,
    /// The engine's memory limit in the limit run; `None` skips it.
    pub limit: Option<usize>,
    /// How long to wait after the last connection before the sample.
    pub settle: Duration,
}

impl IdleSpec {
    /// Defaults: 10 000 connections, 100-byte echoes, a 16 MiB limit.
    #[must_use]
    pub fn new(lab: &str) -> IdleSpec {
        IdleSpec {
            lab: lab.to_owned(),
            connections: 10_000,
            payload: 100,
            limit: Some(16 << 20),
            settle: Duration::from_secs(2),
        }
    }
}

/// What the clients saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Callers {
    /// Connected and echoed.
    pub ok: usize,
    /// Refused (ECONNREFUSED).
    pub refused: usize,
    /// Any other failure (timeout, reset after connecting, wrong echo).
    pub failed: usize,
    /// The first other failure.
    pub first_failure: Option<String>,
    /// Of the first [`RECHECK`] connections, those that echoed again after
    /// the last caller.
    pub rechecked_ok: usize,
}

/// One server's run.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// "engine" or "linux".
    pub server: &'static str,
    /// What the clients saw.
    pub callers: Callers,
    /// Growth of this process's RSS from [`WARM`] connections to all (KiB).
    pub rss_growth_kib: i64,
    /// Growth of the kernel's Slab + TCP buffer pages over the same (KiB).
    pub kernel_growth_kib: i64,
    /// Engine only: its count of the connections' memory at the end (B).
    pub engine_counted_bytes: Option<u64>,
    /// Engine only: SYNs refused for the memory limit.
    pub memory_limit_refused: Option<u64>,
    /// Engine only: the memory limit in force (B).
    pub memory_limit: Option<usize>,
    /// This process's RSS at the end (KiB).
    pub rss_end_kib: i64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct IdleReport {
    /// Connections each engine run opened.
    pub connections: usize,
    /// Connections the Linux run opened (fewer when the file-descriptor
    /// limit has no room for 2 N sockets).
    pub linux_connections: usize,
    /// Bytes each connection echoed.
    pub payload: usize,
    /// The engine without a binding limit.
    pub engine: Side,
    /// Linux.
    pub linux: Side,
    /// Engine per idle connection: RSS growth / connections (B).
    pub engine_bytes_per_conn: f64,
    /// Engine's own count per connection (B).
    pub engine_counted_bytes_per_conn: f64,
    /// Linux kernel per idle connection, server side: (kernel growth in
    /// the Linux run − in the engine run) / connections (B).
    pub linux_kernel_bytes_per_conn: f64,
    /// Linux server's user-space echo tasks per connection (B).
    pub linux_user_bytes_per_conn: f64,
    /// The engine's figure ÷ Linux's whole one (kernel + echo tasks: the
    /// engine's includes its echo tasks too); ≤ 1 is the target.
    pub engine_vs_linux: f64,
    /// The engine with the memory limit.
    pub limited: Option<Side>,
}

/// Remove labs of killed earlier runs.
pub fn remove_stale_labs() {
    let _ = NetNs::remove_stale(LAB_PREFIX);
}

/// Kernel memory: `Slab` (/proc/meminfo) plus TCP's pages
/// (/proc/net/sockstat `mem`, machine-wide), KiB.
fn kernel_kib(ns: &NetNs) -> i64 {
    let slab = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Slab:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        })
        .unwrap_or(0);
    let pages = ns
        .exec(&["cat", "/proc/net/sockstat"])
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("TCP:"))?.to_owned();
            let mut it = line.split_whitespace();
            while let Some(w) = it.next() {
                if w == "mem" {
                    return it.next()?.parse::<i64>().ok();
                }
            }
            None
        })
        .unwrap_or(0);
    slab + pages * 4
}

/// One connection: connect, echo `payload` bytes.
fn call(server: SocketAddr, payload: &[u8]) -> std::result::Result<TcpStream, (bool, String)> {
    let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5)).map_err(|e| {
        (
            e.kind() == std::io::ErrorKind::ConnectionRefused,
            format!("connect: {e}"),
        )
    })?;
    echo(&mut s, payload).map_err(|e| (false, e))?;
    Ok(s)
}

fn echo(s: &mut TcpStream, payload: &[u8]) -> std::result::Result<(), String> {
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(payload).map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0u8; payload.len()];
    s.read_exact(&mut back).map_err(|e| format!("read: {e}"))?;
    if back != payload {
        return Err("wrong echo".into());
    }
    Ok(())
}

/// Open `n` connections from namespace `ns` on a thread there, adding
/// them to `held`.
fn open_calls(
    ns: &NetNs,
    server: SocketAddr,
    n: usize,
    payload: Vec<u8>,
    held: Vec<TcpStream>,
    mut callers: Callers,
) -> Result<hollywood_io::netns::NsThread<(Vec<TcpStream>, Callers)>> {
    Ok(ns.spawn("hwi-callers", move || {
        let mut held = held;
        let mut failed_in_a_row = 0;
        for _ in 0..n {
            match call(server, &payload) {
                Ok(s) => {
                    held.push(s);
                    callers.ok += 1;
                    failed_in_a_row = 0;
                }
                Err((true, _)) => callers.refused += 1,
                Err((false, e)) => {
                    callers.failed += 1;
                    callers.first_failure.get_or_insert(e);
                    failed_in_a_row += 1;
                    if failed_in_a_row == 20 {
                        // The server is stuck: report, do not wait out
                        // every caller's timeout.
                        break;
                    }
                }
            }
        }
        (held, callers)
    })?)
}

/// Wait for a caller thread without blocking the runtime.
async fn join<T: Send + 'static>(t: hollywood_io::netns::NsThread<T>) -> Result<T> {
    while !t.is_finished() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(t.join()?)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Server {
    Engine,
    Linux,
}

fn run_side(spec: &IdleSpec, server: Server, limit: Option<usize>, tag: &str) -> Result<Side> {
    let lab = Lab::up(LabSpec {
        name: format!("{}-{tag}", spec.lab),
        three_hosts: false,
        a_to_b: LinkConfig::new(0, Duration::ZERO),
        b_to_a: LinkConfig::new(0, Duration::ZERO),
        seed: 1,
        hook: None,
    })?;
    let rt = crate::workload::runtime()?;
    let out = rt.block_on(side(spec, server, limit, &lab));
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(lab);
    out
}

async fn side(spec: &IdleSpec, server: Server, limit: Option<usize>, lab: &Lab) -> Result<Side> {
    let payload = workload::payload(7, spec.payload);
    let mut stack = None;
    let addr = match server {
        Server::Engine => {
            let addr = SocketAddr::new(lab.engine_addr(Host::B, false), PORT);
            let config = Config {
                max_connections: 1 << 20,
                memory_limit: Some(limit.unwrap_or(usize::MAX)),
                ..Config::default()
            };
            let s = Stack::spawn(lab.engine_tun(Host::B)?, config)?;
            let mut l = s.listen(addr, None).await?;
            let n = spec.payload;
            tokio::spawn(async move {
                loop {
                    let Ok((st, _)) = l.accept().await else {
                        // EMFILE and the like: try again shortly.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    tokio::spawn(serve_echo(st, n));
                }
            });
            stack = Some(s);
            addr
        }
        Server::Linux => {
            let addr = SocketAddr::new(lab.addr(Host::B, false), PORT);
            let std_l = lab.ns(Host::B).run(move || {
                let l = std::net::TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(l)
            })??;
            let l = tokio::net::TcpListener::from_std(std_l)?;
            let n = spec.payload;
            tokio::spawn(async move {
                loop {
                    let Ok((st, _)) = l.accept().await else {
                        // EMFILE and the like: try again shortly.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    tokio::spawn(serve_echo(st, n));
                }
            });
            addr
        }
    };
    let ns_a = lab.ns(Host::A);
    let warm = WARM.min(spec.connections);
    let (held, callers) = join(open_calls(
        ns_a,
        addr,
        warm,
        payload.clone(),
        Vec::new(),
        Callers::default(),
    )?)
    .await?;
    tokio::time::sleep(spec.settle).await;
    hollywood_io::sys::trim_heap();
    let rss0 = workload::rss_kib().unwrap_or(0);
    let k0 = kernel_kib(lab.ns(Host::B));
    let (mut held, mut callers) = join(open_calls(
        ns_a,
        addr,
        spec.connections - warm,
        payload.clone(),
        held,
        callers,
    )?)
    .await?;
    tokio::time::sleep(spec.settle).await;
    hollywood_io::sys::trim_heap();
    let rss1 = workload::rss_kib().unwrap_or(0);
    let k1 = kernel_kib(lab.ns(Host::B));
    // The first connections still work.
    let mut first: Vec<TcpStream> = held.drain(..RECHECK.min(held.len())).collect();
    let p = payload.clone();
    let (first, ok) = join(ns_a.spawn("hwi-recheck", move || {
        let mut ok = 0;
        for s in &mut first {
            ok += usize::from(echo(s, &p).is_ok());
        }
        (first, ok)
    })?)
    .await?;
    callers.rechecked_ok = ok;
    let (counted, refused, limit_used) = match &stack {
        Some(s) => {
            let (e, _) = s.stats().await?;
            (
                Some(e.memory_used),
                Some(e.memory_limit_refused),
                s.config().memory_limit,
            )
        }
        None => (None, None, None),
    };
    drop(first);
    drop(held);
    if let Some(s) = stack {
        let _ = tokio::time::timeout(Duration::from_secs(5), s.shutdown()).await;
    }
    Ok(Side {
        server: match server {
            Server::Engine => "engine",
            Server::Linux => "linux",
        },
        callers,
        rss_growth_kib: rss1 - rss0,
        kernel_growth_kib: k1 - k0,
        engine_counted_bytes: counted,
        memory_limit_refused: refused,
        memory_limit: limit_used.filter(|&l| l != usize::MAX),
        rss_end_kib: rss1,
    })
}

/// Run the engine, Linux, and (with `spec.limit`) the engine with a limit.
pub fn run(spec: &IdleSpec, progress: impl Fn(&Side)) -> Result<IdleReport> {
    // The engine runs hold one descriptor per client socket, the Linux
    // run two (client and server); without room for both, the Linux run
    // opens fewer (it measures a per-connection figure).
    let need = 2 * spec.connections as u64 + 1024;
    let got = hollywood_io::sys::raise_nofile_limit(need);
    if got < spec.connections as u64 + 1024 {
        return Err(format!(
            "{} file descriptors needed, the limit is {got}",
            spec.connections + 1024
        )
        .into());
    }
    let mut linux_spec = spec.clone();
    linux_spec.connections = spec
        .connections
        .min(usize::try_from(got.saturating_sub(1024) / 2).unwrap_or(usize::MAX));
    let linux = run_side(&linux_spec, Server::Linux, None, "l")?;
    progress(&linux);
    let engine = run_side(spec, Server::Engine, None, "e")?;
    progress(&engine);
    let limited = match spec.limit {
        Some(l) => {
            let s = run_side(spec, Server::Engine, Some(l), "m")?;
            progress(&s);
            Some(s)
        }
        None => None,
    };
    let n = (engine.callers.ok.saturating_sub(WARM)).max(1) as f64;
    let nl = (linux.callers.ok.saturating_sub(WARM)).max(1) as f64;
    Ok(IdleReport {
        connections: spec.connections,
        linux_connections: linux_spec.connections,
        payload: spec.payload,
        engine_bytes_per_conn: engine.rss_growth_kib as f64 * 1024.0 / n,
        engine_counted_bytes_per_conn: engine.engine_counted_bytes.unwrap_or(0) as f64
            / engine.callers.ok.max(1) as f64,
        linux_kernel_bytes_per_conn: (linux.kernel_growth_kib - engine.kernel_growth_kib) as f64
            * 1024.0
            / nl,
        linux_user_bytes_per_conn: linux.rss_growth_kib as f64 * 1024.0 / nl,
        engine_vs_linux: engine.rss_growth_kib as f64
            / n
            / ((linux.kernel_growth_kib - engine.kernel_growth_kib + linux.rss_growth_kib) as f64
                / nl)
                .max(f64::MIN_POSITIVE),
        engine,
        linux,
        limited,
    })
}

/// The report as text.
#[must_use]
pub fn table(r: &IdleReport) -> String {
    let mut s = format!(
        "{} idle connections ({} for Linux), one {} B echo each\n",
        r.connections, r.linux_connections, r.payload
    );
    let kib = |b: f64| b / 1024.0;
    s += &format!(
        "engine: {:.1} KiB per connection (process RSS growth; the engine's own count {:.1} KiB)\n",
        kib(r.engine_bytes_per_conn),
        kib(r.engine_counted_bytes_per_conn)
    );
    s += &format!(
        "linux:  {:.1} KiB per connection in the kernel (Slab + TCP pages, server side) + {:.1} KiB of echo tasks (RSS)\n",
        kib(r.linux_kernel_bytes_per_conn),
        kib(r.linux_user_bytes_per_conn)
    );
    s += &format!(
        "engine ÷ linux (kernel + echo tasks): {:.2}\n",
        r.engine_vs_linux
    );
    for side in [&r.engine, &r.linux].into_iter().chain(r.limited.as_ref()) {
        let c = &side.callers;
        s += &format!(
            "{:<6} {}: {} ok, {} refused, {} failed{}; first {} recheck: {} ok; RSS +{} KiB (end {} KiB), kernel +{} KiB{}{}\n",
            side.server,
            side.memory_limit
                .map_or("(no limit)".to_owned(), |l| format!("(limit {} MiB)", l >> 20)),
            c.ok,
            c.refused,
            c.failed,
            c.first_failure
                .as_ref()
                .map_or(String::new(), |f| format!(" ({f})")),
            RECHECK,
            c.rechecked_ok,
            side.rss_growth_kib,
            side.rss_end_kib,
            side.kernel_growth_kib,
            side.engine_counted_bytes
                .map_or(String::new(), |b| format!(", engine count {} KiB", b >> 10)),
            side.memory_limit_refused
                .map_or(String::new(), |b| format!(", refused for memory {b}")),
        );
    }
    s
}

/// One connection of the echo server (engine or Linux): read `n` bytes,
/// send them back, then sit idle echoing whatever comes later (the
/// recheck of old connections).
async fn serve_echo<S>(mut st: S, n: usize)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; n];
    if st.read_exact(&mut buf).await.is_err() || st.write_all(&buf).await.is_err() {
        return;
    }
    drop(buf);
    let mut b = [0u8; 256];
    while let Ok(k) = st.read(&mut b).await {
        if k == 0 || st.write_all(&b[..k]).await.is_err() {
            return;
        }
    }
}
