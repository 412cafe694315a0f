//! `hollywood relay`: one process, one port number, many callers; streams
//! published by name and played by many (`hollywood_taps::pubsub`,
//! docs/RELAY.md).
//!
//! ```text
//! hollywood relay --listen 0.0.0.0:9000 --publish-token K
//! hollywood transmit udp://:5000 'hollywood://relay:9000/live/cam1?mode=publish&token=K'
//! hollywood transmit 'hollywood://relay:9000/live/cam1?mode=play' udp://127.0.0.1:5001
//! hollywood relay --listen 0.0.0.0:9001 --upstream hollywood://relay:9000   # a second tier
//! ```

use crate::units::parse_duration;
use clap::Args;
use hollywood_io::hostmode;
use hollywood_taps::pubsub::{self, Policy, Relay, RelayReport, ServerConfig, Upstream};
use hollywood_taps::{
    LocalEndpoint, Preconnection, Protocol, RemoteEndpoint, SecurityParameters, TransportProperties,
};
use std::net::SocketAddr;
use std::time::Duration;

/// QUIC connections the relay's listener takes beyond `--max-connections`,
/// to tell those callers why they are refused (503) rather than let
/// their attempts time out.
const REFUSAL_MARGIN: usize = 256;
/// Streams a QUIC caller may open at once until it publishes
/// (`Preconnection::with_listen_receive_credit`): quinn's table of 1024
/// was ~50 KiB of each idle player's ~108 KiB (docs/ROBUSTNESS.md).
const CALLER_CREDIT: u32 = 16;

/// Arguments of `hollywood relay`.
#[derive(Args, Debug)]
pub struct RelayArgs {
    /// Where to listen: every candidate (QUIC on UDP, TCP Hollywood and the
    /// kernel's TCP) on this one address and port; on 0.0.0.0 or [::]
    /// QUIC answers each caller from the address it called.
    #[arg(long, default_value = "0.0.0.0:9000")]
    listen: SocketAddr,
    /// A token that may publish (repeat for several; also
    /// HOLLYWOOD_PUBLISH_TOKEN). A publisher names it in its stream id
    /// (`s=…`) or URL (`?token=…`). With none, publishing is refused
    /// unless --open-publish.
    #[arg(long = "publish-token")]
    publish_tokens: Vec<String>,
    /// Anyone may publish (a lab or a closed network).
    #[arg(long)]
    open_publish: bool,
    /// A token that may play (repeat for several). With none, anyone may.
    #[arg(long = "play-token")]
    play_tokens: Vec<String>,
    /// Connections at most; callers beyond are refused (503).
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Play streams not published here from this relay and serve them
    /// onward: `hollywood://HOST:PORT` (a chain of relays; deadlines stay
    /// end to end).
    #[arg(long)]
    upstream: Option<String>,
    /// The play token the upstream relay wants.
    #[arg(long, requires = "upstream")]
    upstream_token: Option<String>,
    /// Candidates to serve, comma-separated (quic, hollywood, kernel).
    #[arg(long, value_delimiter = ',')]
    transport: Vec<String>,
    /// TLS (--cert, --key, --server-name): callers pin this certificate;
    /// the upstream relay must present the same.
    #[command(flatten)]
    tls: super::transmit::TlsArgs,
    /// TCP Hollywood on this host's engine (`hollywood host up`), as for
    /// `transmit --host`: a standing instance NAME, or the first free one;
    /// with none up, an in-process one forwarding the listening port.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "NAME")]
    host: Option<String>,
    /// With --host and no instance up: the interfaces the in-process
    /// instance's connections may leave by, comma-separated, or `routed`
    /// (every interface an IPv4 route leaves by), as `host up --egress`;
    /// for a relay that calls upstream by one interface and serves
    /// downstream by another. Default: the default route's interface.
    #[arg(long, requires = "host", value_parser = hostmode::EgressChoice::parse, value_name = "IFACES|routed")]
    host_egress: Option<hostmode::EgressChoice>,
    /// Candidates to call the upstream relay by, comma-separated (quic,
    /// hollywood, kernel); default: every candidate, raced.
    #[arg(long, value_delimiter = ',', requires = "upstream")]
    upstream_transport: Vec<String>,
    /// Make the sockets in this network namespace (`ip netns`; root).
    #[arg(long)]
    netns: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Print statistics every this many milliseconds (0: only at the end).
    #[arg(short = 's', long = "stats", default_value_t = 0)]
    stats_ms: u64,
    /// Statistics as one JSON object per line (streams, subscribers).
    #[arg(long)]
    json: bool,
    /// Stop after this long (default: at SIGINT or SIGTERM).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

fn print(r: &RelayReport, elapsed: Duration, json: bool) {
    if json {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        v["elapsed_s"] = serde_json::json!(elapsed.as_secs_f64());
        println!("{v}");
        return;
    }
    let refused: u64 = r.refused.values().sum();
    println!(
        "{:7.1}s connections {} open {} refused {refused} {:?}",
        elapsed.as_secs_f64(),
        r.connections,
        r.active,
        r.refused
    );
    for (s, ended) in r
        .streams
        .iter()
        .map(|s| (s, false))
        .chain(r.ended.iter().map(|s| (s, true)))
    {
        let (mut fwd, mut exp, mut ovf) = (
            s.departed.forwarded,
            s.departed.expired,
            s.departed.overflow,
        );
        for sub in &s.subscribers {
            fwd += sub.queue.forwarded;
            exp += sub.queue.expired;
            ovf += sub.queue.overflow;
        }
        println!(
            "  {:20} {} published {} ({} B) late {} | {} players ({} left): forwarded {fwd} expired {exp} overflow {ovf}",
            s.name,
            if ended { "ended" } else if s.publishing { "live " } else { "idle " },
            s.published,
            s.published_bytes,
            s.published_late,
            s.subscribers.len(),
            s.departed_count
        );
    }
}

fn remote(url: &str) -> Result<RemoteEndpoint, String> {
    let rest = url
        .strip_prefix("hollywood://")
        .ok_or_else(|| format!("--upstream {url}: expected hollywood://HOST:PORT"))?;
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("--upstream {url}: no port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("--upstream {url}: bad port {port:?}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(match host.parse() {
        Ok(ip) => RemoteEndpoint::new().with_ip_address(ip),
        Err(_) => RemoteEndpoint::new().with_host_name(host),
    }
    .with_port(port))
}

/// Run the command.
pub fn run(mut a: RelayArgs) -> Result<(), String> {
    if let Ok(t) = std::env::var("HOLLYWOOD_PUBLISH_TOKEN") {
        a.publish_tokens.push(t);
    }
    let security = a.tls.security()?;
    if matches!(security, SecurityParameters::Disabled)
        && (!a.publish_tokens.is_empty() || !a.play_tokens.is_empty())
    {
        eprintln!(
            "note: without --cert/--key, tokens travel in the clear over TCP (QUIC is \
             encrypted but does not authenticate this relay): use TLS on a public network"
        );
    }
    if a.publish_tokens.is_empty() && !a.open_publish && a.upstream.is_none() {
        eprintln!("note: no --publish-token and no --open-publish: nobody can publish here");
    }
    let mut protocols = Vec::new();
    for t in &a.transport {
        protocols.push(
            Protocol::parse(t)
                .ok_or_else(|| format!("--transport {t}: quic, hollywood or kernel"))?,
        );
    }
    let mut pre = Preconnection::new(TransportProperties::media(), security.clone())
        .with_local(LocalEndpoint::from_addr(a.listen));
    if !protocols.is_empty() {
        pre = pre.with_protocols(&protocols);
    }
    if let Some(ns) = &a.netns {
        pre = pre.with_namespace(ns.clone());
    }
    let mut upstream = match &a.upstream {
        Some(u) => {
            let mut p =
                Preconnection::new(TransportProperties::media(), security).with_remote(remote(u)?);
            if let Some(ns) = &a.netns {
                p = p.with_namespace(ns.clone());
            }
            let mut up = Vec::new();
            for t in &a.upstream_transport {
                up.push(Protocol::parse(t).ok_or_else(|| {
                    format!("--upstream-transport {t}: quic, hollywood or kernel")
                })?);
            }
            if !up.is_empty() {
                p = p.with_protocols(&up);
            }
            Some(Upstream {
                preconnection: p,
                token: a.upstream_token.clone(),
            })
        }
        None => None,
    };
    if a.host.is_some() && a.netns.is_some() {
        return Err(
            "--host attaches in this process's network namespace: run the whole \
                    command there (`ip netns exec NS hollywood relay …`) instead of --netns"
                .into(),
        );
    }
    let workers = a
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut own = None;
    let r = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
        let mut int =
            signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
        if let Some(name) = &a.host {
            let egress = a.host_egress.clone().unwrap_or_default();
            let (e, made) =
                super::transmit::attach_engine(name, vec![a.listen.port()], egress)?;
            own = made;
            // The upstream relay is reached over the same engine.
            if let Some(u) = upstream.as_mut() {
                u.preconnection = u.preconnection.clone().with_engine(e.clone());
            }
            pre = pre.with_engine(e);
        }
        let policy = Policy {
            publish_tokens: a.publish_tokens.clone(),
            open_publish: a.open_publish,
            play_tokens: a.play_tokens.clone(),
        };
        let cfg = ServerConfig {
            // One QUIC socket per worker on the port (SO_REUSEPORT), room
            // for the callers it refuses with a reason beyond its own
            // limit, and little receive credit for callers until they
            // publish (players send a hello and pings).
            preconnection: pre
                .with_listen_shards(workers)
                .with_listen_limit(a.max_connections.saturating_add(REFUSAL_MARGIN))
                .with_listen_receive_credit(CALLER_CREDIT),
            policy,
            max_connections: a.max_connections,
            upstream,
        };
        let mut listener = cfg.preconnection.listen().await.map_err(|e| e.to_string())?;
        for (p, at) in listener.local_addrs() {
            eprintln!("relay: {} on {at}", p.name());
        }
        for why in listener.left_out() {
            eprintln!("relay: left out: {why}");
        }
        let relay = Relay::new(cfg);
        let t0 = tokio::time::Instant::now();
        let printer = {
            let (relay, json) = (relay.clone(), a.json);
            super::transmit::every(a.stats_ms, move || print(&relay.report(), t0.elapsed(), json))
        };
        let limit = a.duration;
        let stop = async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                () = async { match limit { Some(d) => tokio::time::sleep(d).await, None => std::future::pending().await } } => {}
            }
        };
        let r = pubsub::serve_on(relay.clone(), &mut listener, stop).await;
        printer.abort();
        print(&relay.report(), t0.elapsed(), a.json);
        r.map_err(|e| e.to_string())
    });
    drop(rt);
    drop(own);
    r
}
