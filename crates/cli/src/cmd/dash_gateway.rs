//! `hollywood dash-server` and `hollywood dash-gateway` (issue 33, "A real
//! player"): the [DASHing-2018] server and client of `sim dash` across a
//! real network, and an ordinary HTTP server on localhost in front of the
//! client, so that an unmodified player (ffmpeg, GStreamer's `dashdemux`,
//! dash.js in a browser) plays what arrived over Hollywood.
//!
//! ```text
//! hollywood dash-server --video LADDER --listen 192.0.2.1:4433        # serves the ladder over QUIC
//! hollywood dash-gateway --server 192.0.2.1:4433 --listen 127.0.0.1:8080
//! ffplay http://127.0.0.1:8080/manifest.mpd
//! ```
//!
//! The applications are the simulator's ([`DashServer`], [`DashClient`]:
//! HTTP/1.1 on Hollywood messages, pipelining with Rx_T, BOLA), on a UDP
//! socket ([`hollywood_io::UdpHost`], no privileges) with the QUIC
//! mappings `sim dash` compares (`quic-pps`, `quic-gop`, `quic-ss`). The
//! TCP deployments need a TUN device at each end: they run between lab
//! hosts (`hollywood lab dash`).
//!
//! **Who chooses the rate.** The gateway passes on the Hollywood client's
//! decisions: BOLA chooses each chunk's rung from what the Hollywood
//! transport delivered, and the player sees one representation whose
//! chunk `n` is whatever rung the client fetched for it. A proxy that let
//! the player choose would measure the localhost hop (its throughput is
//! the loopback's, so the player would always ask for the top rung) and
//! would lose the Hollywood client's own decisions — Rx_T pipelining and
//! the loss penalty — which are what is being shown. A chunk is handed on
//! once its bytes are final: all in, or past the point where the client's
//! playout model discards late messages (a whole-segment player's rule,
//! [`Lateness::ChunkStart`]); messages that never came in time are zeros,
//! as `sim dash --received` writes them.

use clap::Args;
use hollywood_experiments::dash::sessions::DashTransport;
use hollywood_io::UdpHost;
use hollywood_media::dash::client::{DashClient, Lateness};
use hollywood_media::dash::content::{self, Content, Representation};
use hollywood_media::dash::endpoint;
use hollywood_media::dash::server::DashServer;
use hollywood_media::GenericTransport;
use hollywood_tcp::{CcAlgorithm, Instant};
use hollywood_transport::quic::QuicIdentity;
use hollywood_transport::Role;
use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Arguments of `hollywood dash-server`.
#[derive(Args, Debug)]
pub struct ServerArgs {
    /// The ladder: a directory written by `hollywood tools dash-ladder --out DIR`.
    #[arg(long)]
    video: PathBuf,
    /// UDP address to serve on: a specific address (port 0 picks one; the
    /// address is printed on the first line of standard output).
    #[arg(long, default_value = "127.0.0.1:4433")]
    listen: SocketAddr,
    /// QUIC mapping: quic-pps (a stream per message, closest to TCP
    /// Hollywood's unordered delivery), quic-gop (a stream per response, as
    /// HTTP/3) or quic-ss (one stream, as HTTP/1.1 over TCP).
    #[arg(long, default_value = "quic-pps")]
    transport: String,
    /// Congestion controller.
    #[arg(long, default_value = "cubic", value_parser = CcAlgorithm::parse)]
    cc: CcAlgorithm,
    /// Serve this many sessions (one gateway each, one after the other),
    /// then exit; 0 = until stopped.
    #[arg(long, default_value_t = 0)]
    sessions: u64,
    /// Seed of the transport.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Arguments of `hollywood dash-gateway`.
#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// The Hollywood DASH server (`hollywood dash-server`), UDP address.
    #[arg(long)]
    server: SocketAddr,
    /// The manifest's path on the server.
    #[arg(long, default_value = "/video/manifest.mpd")]
    path: String,
    /// Where players connect (HTTP): the stream is
    /// `http://ADDR/manifest.mpd` (port 0 picks one; the URL is printed on
    /// the first line of standard output).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Local UDP address of the Hollywood client (default: the address
    /// the system routes to the server from, any port).
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// QUIC mapping, as the server's.
    #[arg(long, default_value = "quic-pps")]
    transport: String,
    /// Congestion controller.
    #[arg(long, default_value = "cubic", value_parser = CcAlgorithm::parse)]
    cc: CcAlgorithm,
    /// The client's largest buffer B (s).
    #[arg(long)]
    buffer: Option<f64>,
    /// Share of a chunk that counts it as downloaded and sends the next
    /// request (Rx_T; 1 = Algorithm 1, no pipelining).
    #[arg(long)]
    rx_threshold: Option<f64>,
    /// Also serve the files of this directory (plain names: `/NAME`), e.g.
    /// a page that plays the stream with dash.js and `dash.all.min.js`
    /// beside it (`scripts/dashjs-player.html`).
    #[arg(long)]
    www: Option<PathBuf>,
    /// Seed of the transport.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// A QUIC mapping `sim dash` compares, with the client that goes with it.
fn quic_transport(name: &str) -> Result<DashTransport, String> {
    let t = DashTransport::parse(name)?;
    if !matches!(t.deployment, GenericTransport::Quic(_)) {
        return Err(format!(
            "--transport {name}: the TCP deployments need a TUN device at each end; \
             run them between lab hosts with `hollywood lab dash` (here: quic-pps, quic-gop or quic-ss)"
        ));
    }
    Ok(t)
}

/// A far engine-time limit (the hosts stop on their own conditions).
fn forever() -> Instant {
    Instant::ZERO + Duration::from_secs(10 * 365 * 86_400)
}

/// `hollywood dash-server`.
pub fn server(a: ServerArgs) -> Result<(), String> {
    let t = quic_transport(&a.transport)?;
    let content = Arc::new(Content::from_dir(&a.video).map_err(|e| {
        format!("{e} (write a ladder with `hollywood tools dash-ladder --out DIR`)")
    })?);
    // The client does not check the certificate (`dash-gateway` connects
    // with an unverified identity): encrypted, not authenticated.
    let identity = QuicIdentity::generate()?;
    let mut session = 0u64;
    let mut listen = a.listen;
    loop {
        let sock = UdpSocket::bind(listen).map_err(|e| format!("udp {listen}: {e}"))?;
        let local = sock.local_addr().map_err(|e| e.to_string())?;
        if session == 0 {
            println!("udp://{local}{}", content.manifest_path());
            let _ = std::io::stdout().flush();
            eprintln!(
                "dash-server: {} chunks of {:?}, {} representations, over {} on udp {local}",
                content.chunks(),
                content.chunk,
                content.reps.len(),
                t.name
            );
        }
        // The next session binds the same port.
        listen = local;
        let ep = endpoint(
            &t.deployment,
            a.cc,
            Role::Server,
            local,
            Some(&identity),
            a.seed.wrapping_add(session),
        )?;
        let app = DashServer::new(content.clone());
        let mut host = UdpHost::new(sock, ep, app, std::time::Instant::now())
            .map_err(|e| format!("udp {local}: {e}"))?;
        host.run_until(forever(), |s, _| s.error().is_some())
            .map_err(|e| format!("udp {local}: {e}"))?;
        let s = host.app().stats();
        eprintln!(
            "dash-server: session {session} ended ({}): {} requests, {} body bytes",
            host.app().error().unwrap_or("closed"),
            s.requests,
            s.body_bytes
        );
        session += 1;
        if a.sessions != 0 && session >= a.sessions {
            return Ok(());
        }
    }
}

/// What the Hollywood client has handed on to the players.
#[derive(Debug, Default)]
struct Store {
    /// The single-representation MPD, once the manifest and chunk 0 are in.
    mpd: Option<Arc<Vec<u8>>>,
    /// Its initialization segment: chunk 0's program tables.
    init: Option<Arc<Vec<u8>>>,
    /// Chunks whose bytes are final, in order.
    chunks: Vec<Arc<Vec<u8>>>,
    /// The rung each of them came from (representation id).
    rungs: Vec<String>,
    /// Number of chunks of the video, once the manifest is in.
    total: Option<usize>,
    /// The client has stopped (ended or failed): nothing more will come.
    done: bool,
    /// Why the client failed, if it did.
    error: Option<String>,
    /// The client's report ([`hollywood_media::dash::client::ClientReport`]) once it stopped.
    report: Option<serde_json::Value>,
}

/// The RFC 6381 codec of the H.264 stream in an MPEG-TS chunk, from its
/// first sequence parameter set (`avc1.PPCCLL`), for a browser's Media
/// Source (which needs the codec in the MPD).
fn avc_codec(ts: &[u8]) -> Option<String> {
    ts.windows(7)
        .find(|w| w[..3] == [0, 0, 1] && w[3] & 0x9f == 7)
        .map(|w| format!("avc1.{:02x}{:02x}{:02x}", w[4], w[5], w[6]))
}

/// The initialization segment of an MPEG-TS chunk: its leading packets
/// up to the first one that starts a PES packet (the program tables:
/// PAT, PMT, SDT). dash.js asks for an initialization segment before any
/// media segment and appends it first; Chromium's MPEG-TS parser takes
/// the tables (they repeat in every chunk anyway).
fn ts_init(ts: &[u8]) -> Vec<u8> {
    const PACKET: usize = 188;
    let mut end = 0;
    for p in ts.chunks_exact(PACKET) {
        if p[0] != 0x47 {
            break;
        }
        let start = p[1] & 0x40 != 0;
        let payload = match (p[3] >> 4) & 3 {
            1 => 4,
            3 => 5 + usize::from(p[4]),
            _ => PACKET,
        };
        if start && payload + 3 <= PACKET && p[payload..payload + 3] == [0, 0, 1] {
            break;
        }
        end += PACKET;
    }
    ts[..end].to_vec()
}

/// Copy what the client has settled into the store; true when the client
/// has stopped.
fn export(c: &DashClient, now: Instant, store: &Mutex<Store>) -> bool {
    let mut s = store.lock().expect("store");
    let Some(m) = c.manifest() else {
        if let Some(e) = c.error() {
            s.error = Some(e.to_string());
            s.done = true;
        }
        return s.done;
    };
    s.total = Some(m.chunks);
    while s.chunks.len() < c.chunks().len() && c.chunk_settled(s.chunks.len(), now) {
        let rec = &c.chunks()[s.chunks.len()];
        if s.chunks.is_empty() {
            let top = m.bandwidths.iter().copied().max().unwrap_or(0);
            let rep = Representation {
                id: "hollywood".into(),
                bandwidth_bps: top,
                chunk_bps: top,
                width: 0,
                height: 0,
            };
            let codecs = avc_codec(rec.data());
            let xml = content::mpd(
                &[rep],
                m.chunk,
                m.chunks,
                "$Number$.ts",
                Some("init.ts"),
                codecs.as_deref(),
            );
            s.init = Some(Arc::new(ts_init(rec.data())));
            s.mpd = Some(Arc::new(xml.into_bytes()));
        }
        s.chunks.push(Arc::new(rec.data().to_vec()));
        s.rungs.push(m.ids[rec.quality].clone());
    }
    if c.finished() && !s.done {
        s.done = true;
        s.error = c.error().map(str::to_string);
        let mut report = c.report(now);
        report.chunks.clear();
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        v["rungs"] = serde_json::json!(s.rungs);
        eprintln!(
            "dash-gateway: session ended: {} chunks, start-up {:.2} s, {} stalls ({:.2} s), {:.0} kb/s, {} messages late{}",
            s.chunks.len(),
            report.startup_s.unwrap_or(f64::NAN),
            report.stalls,
            report.total_stall_s,
            report.avg_bitrate_kbps,
            report.messages_discarded,
            s.error.as_deref().map(|e| format!("; error: {e}")).unwrap_or_default()
        );
        s.report = Some(v);
    }
    s.done
}

/// `hollywood dash-gateway`.
pub fn gateway(a: GatewayArgs) -> Result<(), String> {
    let t = quic_transport(&a.transport)?;
    let mut cfg = t.client;
    cfg.keep_bytes = true;
    cfg.verify_pattern = false;
    cfg.lateness = Lateness::ChunkStart;
    if let Some(b) = a.buffer {
        cfg.buffer_s = b;
    }
    if let Some(r) = a.rx_threshold {
        cfg.rx_threshold = r;
    }
    cfg.validate()?;
    let bind = match a.bind {
        Some(b) => b,
        None => local_toward(a.server)?,
    };
    let sock = UdpSocket::bind(bind).map_err(|e| format!("udp {bind}: {e}"))?;
    let local = sock.local_addr().map_err(|e| e.to_string())?;
    let identity = QuicIdentity::unverified()?;
    let ep = endpoint(
        &t.deployment,
        a.cc,
        Role::Client { remote: a.server },
        local,
        Some(&identity),
        a.seed,
    )?;
    let app = DashClient::new(cfg, &a.path);
    let mut host = UdpHost::new(sock, ep, app, std::time::Instant::now())
        .map_err(|e| format!("udp {local}: {e}"))?;
    let store = Arc::new(Mutex::new(Store::default()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(a.listen))
        .map_err(|e| format!("http {}: {e}", a.listen))?;
    let http = listener.local_addr().map_err(|e| e.to_string())?;
    println!("http://{http}/manifest.mpd");
    let _ = std::io::stdout().flush();
    eprintln!(
        "dash-gateway: fetching udp://{}{} over {} from {local}; players: http://{http}/manifest.mpd",
        a.server, a.path, t.name
    );
    let client_store = store.clone();
    std::thread::Builder::new()
        .name("hollywood-client".into())
        .spawn(move || {
            let r = host.run_until(forever(), |c, now| export(c, now, &client_store));
            if let Err(e) = r {
                let mut s = client_store.lock().expect("store");
                s.error = Some(format!("udp: {e}"));
                s.done = true;
            }
        })
        .map_err(|e| e.to_string())?;
    rt.block_on(accept(listener, store, a.www.map(Arc::new)))
}

/// Take player connections, each on a task of its own.
async fn accept(
    listener: tokio::net::TcpListener,
    store: Arc<Mutex<Store>>,
    www: Option<Arc<PathBuf>>,
) -> Result<(), String> {
    loop {
        let (conn, _) = listener.accept().await.map_err(|e| format!("http: {e}"))?;
        tokio::spawn(serve(conn, store.clone(), www.clone()));
    }
}

/// The local address the system would send to `server` from (port 0).
fn local_toward(server: SocketAddr) -> Result<SocketAddr, String> {
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    };
    let probe = UdpSocket::bind(any).map_err(|e| e.to_string())?;
    probe
        .connect(server)
        .map_err(|e| format!("no route to {server}: {e}"))?;
    let ip = probe.local_addr().map_err(|e| e.to_string())?.ip();
    Ok(SocketAddr::new(ip, 0))
}

/// Largest request head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// Longest a request waits for its chunk.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// One player connection: HTTP/1.1 requests (heads parsed by `httparse`),
/// answered in order, kept alive unless asked otherwise.
async fn serve(
    mut conn: tokio::net::TcpStream,
    store: Arc<Mutex<Store>>,
    www: Option<Arc<PathBuf>>,
) {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let (method, path, keep_alive, used) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let close = req.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                    });
                    let keep = req.version == Some(1) && !close;
                    let body: usize = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    break (
                        req.method.unwrap_or("").to_string(),
                        req.path.unwrap_or("").to_string(),
                        keep,
                        n + body,
                    );
                }
                Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
                _ => {
                    let _ =
                        respond(&mut conn, 400, "text/plain", b"bad request\n", true, false).await;
                    return;
                }
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        // A request body (none expected) is read and ignored.
        while buf.len() < used {
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..used);
        let head_only = method == "HEAD";
        let (status, ctype, body) = if method != "GET" && !head_only {
            (405, "text/plain", Arc::new(b"GET or HEAD only\n".to_vec()))
        } else {
            route(&path, &store, www.as_deref().map(PathBuf::as_path)).await
        };
        if respond(&mut conn, status, ctype, &body, !head_only, keep_alive)
            .await
            .is_err()
            || !keep_alive
        {
            return;
        }
    }
}

/// What a player asks the gateway for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// `/manifest.mpd`.
    Mpd,
    /// `/init.ts`.
    Init,
    /// `/N.ts`.
    Chunk(usize),
}

impl Want {
    fn parse(path: &str) -> Option<Want> {
        match path {
            "/manifest.mpd" => Some(Want::Mpd),
            "/init.ts" => Some(Want::Init),
            _ => path
                .strip_prefix('/')?
                .strip_suffix(".ts")?
                .parse()
                .ok()
                .map(Want::Chunk),
        }
    }
}

/// A file of the `--www` directory: a plain name (no directories), and
/// its content type.
fn www_file(www: &std::path::Path, path: &str) -> Option<(PathBuf, &'static str)> {
    let name = path.strip_prefix('/')?;
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let file = www.join(name);
    if !plain || !file.is_file() {
        return None;
    }
    let ctype = match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    };
    Some((file, ctype))
}

/// The answer to a GET of `path`: the MPD, its initialization segment,
/// a chunk (once final), the client's report, a `--www` file, or 404.
/// Waits for what has not come yet.
async fn route(
    path: &str,
    store: &Mutex<Store>,
    www: Option<&std::path::Path>,
) -> (u16, &'static str, Arc<Vec<u8>>) {
    let path = path.split('?').next().unwrap_or("");
    let text = |s: String| Arc::new(s.into_bytes());
    if path == "/report.json" {
        let s = store.lock().expect("store");
        let v = serde_json::json!({
            "chunks_settled": s.chunks.len(),
            "chunks": s.total,
            "rungs": s.rungs,
            "done": s.done,
            "error": s.error,
            "report": s.report,
        });
        return (200, "application/json", text(format!("{v}\n")));
    }
    let Some(want) = Want::parse(path) else {
        if let Some((file, ctype)) = www.and_then(|w| www_file(w, path)) {
            return match tokio::fs::read(&file).await {
                Ok(b) => (200, ctype, Arc::new(b)),
                Err(e) => (404, "text/plain", text(format!("{path}: {e}\n"))),
            };
        }
        return (404, "text/plain", text(format!("no {path} here\n")));
    };
    let start = tokio::time::Instant::now();
    loop {
        {
            let s = store.lock().expect("store");
            let found = match want {
                Want::Mpd => s.mpd.clone().map(|b| (b, "application/dash+xml")),
                Want::Init => s.init.clone().map(|b| (b, "video/mp2t")),
                Want::Chunk(n) => s.chunks.get(n).cloned().map(|b| (b, "video/mp2t")),
            };
            if let Some((b, ctype)) = found {
                return (200, ctype, b);
            }
            if let (Want::Chunk(n), Some(total)) = (want, s.total) {
                if n >= total {
                    return (
                        404,
                        "text/plain",
                        text(format!("no {path}: past the end\n")),
                    );
                }
            }
            if s.done {
                let why = s.error.clone().unwrap_or_else(|| "ended".into());
                return (
                    502,
                    "text/plain",
                    text(format!(
                        "the Hollywood client stopped before {path}: {why}\n"
                    )),
                );
            }
        }
        if start.elapsed() > MAX_WAIT {
            return (504, "text/plain", text(format!("{path} did not come\n")));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn respond(
    conn: &mut tokio::net::TcpStream,
    status: u16,
    ctype: &str,
    body: &[u8],
    with_body: bool,
    keep_alive: bool,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Access-Control-Allow-Origin: *\r\nCache-Control: no-cache\r\nConnection: {}\r\n\r\n",
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    conn.write_all(head.as_bytes()).await?;
    if with_body {
        conn.write_all(body).await?;
    }
    conn.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_comes_from_the_first_sequence_parameter_set() {
        let mut ts = vec![0x47, 0x41, 0x00, 0x10, 0, 0, 0, 1, 0x09, 0xf0];
        ts.extend_from_slice(&[0, 0, 0, 1, 0x67, 0x64, 0x00, 0x1f, 0xac]);
        assert_eq!(avc_codec(&ts).as_deref(), Some("avc1.64001f"));
        assert_eq!(avc_codec(&[0x47; 188]), None);
    }

    #[test]
    fn the_initialization_segment_is_the_tables_before_the_first_pes() {
        let packet = |pid: u8, payload: &[u8]| {
            let mut p = vec![0x47, 0x40, pid, 0x10];
            p.extend_from_slice(payload);
            p.resize(188, 0xff);
            p
        };
        let mut ts = packet(0x00, &[0x00, 0x00, 0xb0]); // PAT
        ts.extend(packet(0x10, &[0x00, 0x02, 0xb0])); // PMT
        ts.extend(packet(0x11, &[0x00, 0x00, 0x01, 0xe0])); // PES
        ts.extend(packet(0x00, &[0x00, 0x00, 0xb0]));
        assert_eq!(ts_init(&ts), ts[..376]);
        assert!(ts_init(&[0u8; 376]).is_empty());
    }

    #[test]
    fn only_quic_mappings_run_without_a_tun_device() {
        assert!(quic_transport("quic-pps").is_ok());
        let e = quic_transport("hollywood").unwrap_err();
        assert!(e.contains("lab dash"), "{e}");
    }
}
