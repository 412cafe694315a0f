//! `hollywood transmit SRC DST`: a live relay between UDP and Hollywood,
//! as `srt-live-transmit` is for SRT (see `hollywood_taps::relay`).
//!
//! ```text
//! hollywood transmit udp://:5000 hollywood://server:9000            # caller, racing
//! hollywood transmit 'hollywood://10.0.0.2:9000?mode=listener' udp://127.0.0.1:5001
//! hollywood transmit udp://:5000 'hollywood://relay:9000/live/cam1?mode=publish&token=K'
//! hollywood transmit 'hollywood://relay:9000/live/cam1?mode=play' udp://127.0.0.1:5001
//! ```

use crate::units::parse_duration;
use clap::Args;
use hollywood_io::hostmode::{self, UpOptions};
use hollywood_taps::pubsub::{self, Request, Role};
use hollywood_taps::relay::{self, Direction, Mode, RelayConfig, RelaySnapshot, RelayStats};
use hollywood_taps::uri::HollywoodUri;
use hollywood_taps::{
    Engine, Identity, Preconnection, Preference, Protocol, SecurityParameters, TransportProperties,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `hollywood transmit`.
#[derive(Args, Debug)]
pub struct TransmitArgs {
    /// Source: `udp://[IP]:PORT` (datagrams to relay) or
    /// `hollywood://HOST:PORT[?mode=caller|listener&transport=quic|hollywood|kernel]`,
    /// or a stream on a relay (`hollywood relay`):
    /// `hollywood://HOST:PORT/STREAM?mode=publish|play[&token=T&user=U]`.
    src: String,
    /// Destination, the other kind.
    dst: String,
    /// Each datagram's lifetime: one that cannot be sent within it is dropped.
    #[arg(long, default_value = "120ms", value_parser = parse_duration)]
    latency: Duration,
    /// Receiving: how long a message may wait for a missing earlier one so
    /// that datagrams leave in the sender's order (TCP Hollywood and QUIC
    /// deliver as messages arrive; an MPEG-TS demuxer needs order).
    /// Default: half of --latency. 0: forward as messages arrive.
    #[arg(long, value_parser = parse_duration)]
    reorder: Option<Duration>,
    /// Print statistics every this many milliseconds (0: only at the end).
    #[arg(short = 's', long = "stats", default_value_t = 0)]
    stats_ms: u64,
    /// Statistics as one JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tls: TlsArgs,
    /// Make the sockets in this network namespace (`ip netns`; root).
    #[arg(long)]
    netns: Option<String>,
    /// Racing delay between candidates.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    racing_delay: Duration,
    /// TCP Hollywood on this host's engine: attach to the standing
    /// host-mode instance NAME (`hollywood host up`, docs/DEPLOY.md), or
    /// with no NAME the first free one. A listener's port must be one the
    /// instance forwards (`host up --listen PORT`). With no instance up,
    /// this process makes its own (forwarding its listening port) and
    /// takes it down when it exits; after a SIGKILL, `hollywood host
    /// clear` does. Root (or the instance's `--user`). Without --host, a
    /// standing instance of this namespace is used when one is up (the
    /// library's default, `Engine::host`).
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "NAME")]
    host: Option<String>,
    /// FEC on the message layer (docs/FEC.md): repair messages over
    /// blocks of datagrams whose retransmission could not make --latency,
    /// repair bytes at most OVERHEAD of the stream's (`--fec` alone: 25%).
    /// Over QUIC only (the `fec` transport property, required); both ends
    /// need it.
    #[arg(long, num_args = 0..=1, default_missing_value = "25%", value_name = "OVERHEAD", value_parser = parse_fec_overhead)]
    fec: Option<u16>,
}

/// `--fec[=OVERHEAD]`: a percentage, more than 0 and at most 1000.
fn parse_fec_overhead(s: &str) -> Result<u16, String> {
    let f = hollywood_experiments::units::parse_fraction(s)?;
    let pct = (f * 100.0).round();
    if !(1.0..=1000.0).contains(&pct) {
        return Err(format!("--fec {s}: use 1% to 1000%"));
    }
    Ok(pct as u16)
}

/// TLS on every candidate (`transmit`, `relay`).
#[derive(Args, Debug)]
pub(crate) struct TlsArgs {
    /// TLS on every candidate: the certificate (PEM or DER) a listener
    /// presents and a caller pins (with --key; both ends need the pair).
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// The certificate's PKCS#8 private key.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// The name the certificate is issued to.
    #[arg(long, default_value = "hollywood.invalid")]
    server_name: String,
}

impl TlsArgs {
    /// Pinned TLS with the pair, or none.
    pub(crate) fn security(&self) -> Result<SecurityParameters, String> {
        Ok(match (&self.cert, &self.key) {
            (Some(c), Some(k)) => {
                SecurityParameters::pinned(Identity::from_files(c, k, &self.server_name)?)
            }
            _ => SecurityParameters::Disabled,
        })
    }
}

/// One side of the relay.
#[derive(Debug, PartialEq, Eq)]
enum Side {
    Udp(SocketAddr),
    Hollywood(HollywoodUri),
}

fn parse_side(s: &str) -> Result<Side, String> {
    if let Some(rest) = s.strip_prefix("udp://") {
        let rest = if rest.starts_with(':') {
            format!("0.0.0.0{rest}")
        } else {
            rest.to_string()
        };
        let a: SocketAddr = rest
            .parse()
            .map_err(|_| format!("{s}: expected udp://IP:PORT or udp://:PORT"))?;
        return Ok(Side::Udp(a));
    }
    if !s.starts_with("hollywood://") {
        return Err(format!(
            "{s}: expected udp://… or hollywood://… (e.g. hollywood://host:9000?mode=listener)"
        ));
    }
    HollywoodUri::parse(s).map(Side::Hollywood)
}

fn print(snap: &RelaySnapshot, elapsed: Duration, json: bool) {
    let proto = snap.protocol.map_or("-", |p| p.name());
    if json {
        let v = serde_json::json!({
            "elapsed_s": elapsed.as_secs_f64(),
            "protocol": snap.protocol.map(|p| p.name()),
            "connections": snap.connections,
            "udp_in": snap.udp_in,
            "udp_in_bytes": snap.udp_in_bytes,
            "sent": snap.sent,
            "expired": snap.expired,
            "abandoned": snap.abandoned,
            "send_errors": snap.send_errors,
            "received": snap.received,
            "udp_out": snap.udp_out,
            "udp_out_bytes": snap.udp_out_bytes,
            "reorder_held": snap.reorder.held,
            "reorder_gaps_skipped": snap.reorder.gaps_skipped,
            "reorder_behind": snap.reorder.behind,
            "reconnects": snap.reconnects,
        });
        println!("{v}");
    } else {
        println!(
            "{:7.1}s {proto:9} udp in {} ({} B) | sent {} expired {} abandoned {} errors {} | received {} udp out {} ({} B) | reordered {} gaps skipped {} behind {}",
            elapsed.as_secs_f64(),
            snap.udp_in,
            snap.udp_in_bytes,
            snap.sent,
            snap.expired,
            snap.abandoned,
            snap.send_errors,
            snap.received,
            snap.udp_out,
            snap.udp_out_bytes,
            snap.reorder.held,
            snap.reorder.gaps_skipped,
            snap.reorder.behind
        );
    }
}

/// Run the command.
pub fn run(a: TransmitArgs) -> Result<(), String> {
    let (src, dst) = (parse_side(&a.src)?, parse_side(&a.dst)?);
    let (direction, uri) = match (src, dst) {
        (Side::Udp(bind), Side::Hollywood(uri)) => {
            if uri
                .stream
                .as_ref()
                .is_some_and(|(r, _)| *r != Role::Publish)
            {
                return Err(format!("{}: from UDP to a relay is mode=publish", a.dst));
            }
            (Direction::UdpToHollywood { bind }, uri)
        }
        (Side::Hollywood(uri), Side::Udp(to)) => {
            if uri.stream.as_ref().is_some_and(|(r, _)| *r != Role::Play) {
                return Err(format!("{}: from a relay to UDP is mode=play", a.src));
            }
            if to.ip().is_unspecified() || to.port() == 0 {
                return Err(format!(
                    "{}: the destination needs an address and a port",
                    a.dst
                ));
            }
            (Direction::HollywoodToUdp { to }, uri)
        }
        _ => return Err("one side must be udp://… and the other hollywood://…".into()),
    };
    // As srt-live-transmit: no host means listener.
    let mode = uri.effective_mode();
    let (port, transport, stream) = (uri.port, uri.transport, uri.stream.clone());
    let security = a.tls.security()?;
    let mut properties = TransportProperties::media();
    if let Some(pct) = a.fec {
        properties.fec = Preference::Require;
        properties.fec_overhead_percent = pct;
    }
    let mut pre = Preconnection::new(properties, security).with_racing_delay(a.racing_delay);
    if let Some(ns) = &a.netns {
        pre = pre.with_namespace(ns.clone());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    if a.host.is_some() && a.netns.is_some() {
        return Err(
            "--host attaches in this process's network namespace: run the whole \
                    command there (`ip netns exec NS hollywood transmit …`) instead of --netns"
                .into(),
        );
    }
    // The in-process instance, if this process makes one: taken down when
    // the relay ends (SIGINT/SIGTERM or an error), after the runtime and
    // the engine on its device are gone.
    let mut own: Option<OwnInstance> = None;
    let r = rt.block_on(async {
        // SIGINT and SIGTERM are handled from here on, before any host-mode
        // instance is made: one arriving during setup ends the relay
        // cleanly (and the instance goes with it) instead of killing the
        // process and leaving the instance behind.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
        let mut int =
            signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
        let engine = match &a.host {
            Some(name) => {
                let listen = match mode {
                    Mode::Listener => vec![port],
                    Mode::Caller => Vec::new(),
                };
                let (e, made) = attach_engine(name, listen, Default::default())?;
                own = made;
                pre = pre.with_engine(e);
                true
            }
            // Without --host, the library's default (issue 31: TCP
            // Hollywood wherever a user reaches it): the engine of a
            // standing instance of this namespace if one is up
            // (`Engine::host`), else racing without it, with a notice.
            None => a.netns.is_none() && hostmode::any_up().unwrap_or(false),
        };
        if mode == Mode::Listener && transport == Some(Protocol::TcpHollywood) && !engine {
            // Not silent (issue 31): without an engine this listener
            // serves TCP Hollywood callers with the message layer on
            // kernel TCP, thesis §4.4's partial deployment — in order,
            // with head-of-line blocking at this end.
            eprintln!(
                "note: transport=hollywood: this listener has no engine (a TUN device); \
                 callers get the message layer on kernel TCP here (in-order delivery, \
                 thesis §4.4 partial deployment)"
            );
        }
        if mode == Mode::Caller && transport == Some(Protocol::TcpHollywood) && !engine {
            return Err(
                "transport=hollywood: no engine: no host-mode instance is up in \
                        this network namespace; `sudo hollywood host up` makes a standing \
                        one, --host an in-process one (docs/DEPLOY.md); or leave \
                        transport out to race QUIC and the \
                        message layer on kernel TCP, or name transport=kernel"
                    .into(),
            );
        }
        pre = uri.apply(pre)?;
        let cfg = RelayConfig {
            preconnection: pre,
            mode,
            direction,
            latency: a.latency,
            reorder: a
                .reorder
                .unwrap_or_else(|| relay::default_reorder(a.latency)),
        };
        let stats = Arc::new(RelayStats::default());
        let t0 = tokio::time::Instant::now();
        let stop = async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        };
        let printer = {
            let (stats, json) = (stats.clone(), a.json);
            every(a.stats_ms, move || {
                print(&stats.snapshot(), t0.elapsed(), json)
            })
        };
        // The reconnection after a reset (relay::run, thesis §4.5) is
        // reported when it happens.
        let watcher = {
            let stats = stats.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tick.tick().await;
                    let why = stats
                        .reconnect_reason
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    if let Some(why) = why {
                        eprintln!("note: {why}");
                        return;
                    }
                }
            })
        };
        let r = match stream {
            None => relay::run(cfg, stats.clone(), stop).await,
            Some((role, id)) => {
                let req = Request {
                    role,
                    stream: id,
                    latency: cfg.latency,
                };
                match cfg.direction {
                    Direction::UdpToHollywood { bind } => {
                        pubsub::udp::publish(
                            &cfg.preconnection,
                            &req,
                            bind,
                            cfg.latency,
                            stats.clone(),
                            stop,
                        )
                        .await
                    }
                    Direction::HollywoodToUdp { to } => {
                        pubsub::udp::play(
                            &cfg.preconnection,
                            &req,
                            to,
                            cfg.reorder,
                            stats.clone(),
                            stop,
                        )
                        .await
                    }
                }
            }
        };
        printer.abort();
        watcher.abort();
        print(&stats.snapshot(), t0.elapsed(), a.json);
        r.map_err(|e| e.to_string())
    });
    // The engine's tasks (and its hold on the TUN device) end with the
    // runtime; then the in-process instance goes.
    drop(rt);
    drop(own);
    r
}

/// Call `f` every `ms` milliseconds (never when 0), from a task.
pub(crate) fn every(ms: u64, f: impl Fn() + Send + 'static) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if ms == 0 {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(ms));
        tick.tick().await;
        loop {
            tick.tick().await;
            f();
        }
    })
}

/// `--host NAME` (empty: the first free instance): the engine of a
/// standing host-mode instance, or, with none up, of an instance this
/// process makes (forwarding `listen`, leaving by `egress`) and takes
/// down when the returned guard drops. Inside a tokio runtime.
pub(crate) fn attach_engine(
    name: &str,
    listen: Vec<u16>,
    egress: hostmode::EgressChoice,
) -> Result<(Engine, Option<OwnInstance>), String> {
    // The engine's TCP: TCP Hollywood (inconsistent retransmissions,
    // out-of-order delivery; thesis ch. 4) with BBR, as the lab's
    // engine rows.
    let config = hollywood_tcp::Config {
        cc: hollywood_tcp::CcAlgorithm::Bbr,
        ..hollywood_tcp::Config::hollywood(true, true)
    };
    let wanted = (!name.is_empty()).then_some(name);
    let mut own = None;
    // No instance up: this process makes its own (the in-process form)
    // and takes it down when it exits.
    if !hostmode::any_up().map_err(|e| e.to_string())? {
        let st = hostmode::up(&UpOptions {
            name: wanted.map(str::to_owned),
            listen,
            in_process: true,
            owner: None,
            egress,
        })
        .map_err(|e| e.to_string())?;
        eprintln!(
            "host mode: made instance {} (TUN {}) for this process",
            st.name, st.tun
        );
        own = Some(OwnInstance(st.name));
    }
    let e = Engine::on_host(wanted, config).map_err(|e| e.to_string())?;
    eprintln!("engine: attached at {}", e.addr);
    Ok((e, own))
}

/// An instance this process made (`transmit --host` with none up): taken
/// down when dropped, on an error or a panic too. After a SIGKILL, `hollywood
/// host clear` removes it.
pub(crate) struct OwnInstance(String);

impl Drop for OwnInstance {
    fn drop(&mut self) {
        match hostmode::down(&self.0) {
            Ok(_) => eprintln!("host mode: instance {} taken down", self.0),
            Err(e) => eprintln!(
                "host mode: taking instance {} down failed: {e} (`sudo hollywood host clear`)",
                self.0
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_taps::pubsub::StreamId;

    #[test]
    fn fec_overhead_is_a_percentage() {
        assert_eq!(parse_fec_overhead("25%"), Ok(25));
        assert_eq!(parse_fec_overhead("0.125"), Ok(13));
        assert!(parse_fec_overhead("0").is_err());
        assert!(parse_fec_overhead("20").is_err());
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            t: TransmitArgs,
        }
        use clap::Parser;
        let c = Cli::try_parse_from(["x", "udp://:5000", "hollywood://h:9000", "--fec"]).unwrap();
        assert_eq!(c.t.fec, Some(25));
        let c =
            Cli::try_parse_from(["x", "udp://:5000", "hollywood://h:9000", "--fec=40%"]).unwrap();
        assert_eq!(c.t.fec, Some(40));
        let c = Cli::try_parse_from(["x", "udp://:5000", "hollywood://h:9000"]).unwrap();
        assert_eq!(c.t.fec, None);
    }

    #[test]
    fn sides_parse_like_srt_live_transmit() {
        assert_eq!(
            parse_side("udp://:5000").unwrap(),
            Side::Udp("0.0.0.0:5000".parse().unwrap())
        );
        assert_eq!(
            parse_side("hollywood://10.0.0.2:9000?mode=listener&transport=quic").unwrap(),
            Side::Hollywood(HollywoodUri {
                host: "10.0.0.2".into(),
                port: 9000,
                mode: Some(Mode::Listener),
                transport: Some(Protocol::Quic),
                stream: None,
            })
        );
        assert_eq!(
            parse_side("hollywood://[fd00::1]:9000").unwrap(),
            Side::Hollywood(HollywoodUri {
                host: "fd00::1".into(),
                port: 9000,
                mode: None,
                transport: None,
                stream: None,
            })
        );
        assert_eq!(
            parse_side("hollywood://relay:9000/live/cam1?mode=publish&token=k&user=al").unwrap(),
            Side::Hollywood(HollywoodUri {
                host: "relay".into(),
                port: 9000,
                mode: None,
                transport: None,
                stream: Some((
                    Role::Publish,
                    StreamId {
                        resource: "live/cam1".into(),
                        user: Some("al".into()),
                        mode: Some(Role::Publish),
                        token: Some("k".into()),
                    }
                )),
            })
        );
        // The URI's own rules are `taps::uri`'s (tested there); here the
        // schemes and that its errors come through.
        for bad in ["srt://x:1", "udp://nowhere", "hollywood://x:1?mode=both"] {
            assert!(parse_side(bad).is_err(), "{bad}");
        }
    }
}
