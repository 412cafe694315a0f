//! `hollywood tools relay-load`: load and measure a relay as an
//! experiment needs — one paced publisher, or N players in one process,
//! each player's figures as JSON.
//!
//! The publisher sends `--size`-byte messages every `--interval`, a group
//! start every `--gop` messages, each carrying its sequence number and its
//! send time (the system clock, µs: players on the same host, in any
//! network namespace, read the same clock). A player counts a message on
//! time when it arrives within `--deadline` of that send time — measured
//! here, independently of the relay protocol's own deadline — and records
//! how long after joining its first group start arrived.

use crate::units::parse_duration;
use clap::Args;
use hollywood_taps::pubsub::wire::{FLAG_GROUP_START, FLAG_KEY};
use hollywood_taps::pubsub::{now_us, Request, Role, Session, StreamId};
use hollywood_taps::{
    Engine, Preconnection, Protocol, RemoteEndpoint, SecurityParameters, TransportProperties,
};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Arguments of `hollywood tools relay-load`.
#[derive(Args, Debug)]
pub struct RelayLoadArgs {
    /// The relay.
    #[arg(long)]
    relay: SocketAddr,
    /// The stream.
    #[arg(long, default_value = "live")]
    stream: String,
    /// The token (publish or play).
    #[arg(long)]
    token: Option<String>,
    /// Publish (else play).
    #[arg(long)]
    publish: bool,
    /// Players to run (with no --publish).
    #[arg(long, default_value_t = 1)]
    players: usize,
    /// Message size (bytes).
    #[arg(long, default_value_t = 1316)]
    size: usize,
    /// Time between messages.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    interval: Duration,
    /// A group start every this many messages.
    #[arg(long, default_value_t = 100)]
    gop: u64,
    /// The end-to-end deadline (the publisher's lifetime; a player's on-time bound).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    deadline: Duration,
    /// A player's own latency (0: the end-to-end deadline only).
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    latency: Duration,
    /// Publish for this long; players stop at the stream's end or after it.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Candidates, comma-separated (quic, hollywood, kernel).
    #[arg(long, value_delimiter = ',')]
    transport: Vec<String>,
    /// TCP Hollywood on this host's engine, as `transmit --host`.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "NAME")]
    host: Option<String>,
    /// Players connect this long apart.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    connect_gap: Duration,
}

fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// One player's figures.
#[derive(Debug, Default, Clone, serde::Serialize)]
struct Player {
    /// The protocol.
    protocol: String,
    /// Connected and accepted after this long from the start (ms).
    joined_ms: f64,
    /// The first message's sequence number (a group start).
    first_seq: Option<u64>,
    /// The last sequence number seen.
    last_seq: Option<u64>,
    /// Delivered within --deadline of the send time.
    on_time: u64,
    /// Delivered after it (must stay 0: the relay protocol drops them).
    late_delivered: u64,
    /// How far past --deadline the latest of those was (ms): none can
    /// be, each hop converting deadlines by bounds on the clocks
    /// (docs/RELAY.md, "The time left at each hop"); kept as the check.
    late_by_max_ms: Option<f64>,
    /// Dropped by the player's session as past their deadline.
    dropped_late: u64,
    /// Handed over by the session in time but past their deadline (on
    /// the relay protocol's clock) when this player took them: dropped
    /// here, as `transmit` drops one past it before writing it out.
    dropped_at_delivery: u64,
    /// The least time left before --deadline of a message delivered on
    /// time (ms): how close the relay protocol's conservative deadline
    /// let one come.
    slack_min_ms: Option<f64>,
    /// The width of the bounds on the relay's clock the player's session
    /// converted with at the end (ms): how much earlier than the truth
    /// its last hop may have put a deadline.
    clock_uncertainty_ms: f64,
    /// Delivered in time but older than the first message (a message the
    /// relay took in after the group start this player began at, out of
    /// order): not counted in `on_time`, whose share is of the messages
    /// from the first on.
    before_first: u64,
    /// From accepted to the first group start delivered (ms).
    first_group_ms: Option<f64>,
    /// A failure, if any.
    error: Option<String>,
}

fn pre(a: &RelayLoadArgs, engine: Option<&Engine>) -> Result<Preconnection, String> {
    let mut p = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_remote(RemoteEndpoint::from_addr(a.relay));
    if let Some(e) = engine {
        p = p.with_engine(e.clone());
    }
    if !a.transport.is_empty() {
        let mut ps = Vec::new();
        for t in &a.transport {
            ps.push(Protocol::parse(t).ok_or_else(|| format!("--transport {t}"))?);
        }
        p = p.with_protocols(&ps);
    }
    Ok(p)
}

fn request(a: &RelayLoadArgs, role: Role) -> Request {
    Request {
        role,
        stream: StreamId {
            resource: a.stream.clone(),
            token: a.token.clone(),
            ..StreamId::default()
        },
        latency: a.latency,
    }
}

async fn publish(a: &RelayLoadArgs, engine: Option<&Engine>) -> Result<serde_json::Value, String> {
    if a.size < 16 {
        return Err("--size: at least 16 bytes (sequence number and send time)".into());
    }
    let mut s = Session::connect(&pre(a, engine)?, &request(a, Role::Publish))
        .await
        .map_err(|e| e.to_string())?;
    let n = (a.duration.as_micros() / a.interval.as_micros().max(1)) as u64;
    let t0 = tokio::time::Instant::now();
    let mut p = vec![0u8; a.size];
    for seq in 0..n {
        tokio::time::sleep_until(t0 + a.interval * seq as u32).await;
        p[..8].copy_from_slice(&seq.to_be_bytes());
        // The deadline counts from the relay protocol's clock read before
        // the send time written: never later than send time + deadline.
        let read = now_us();
        p[8..16].copy_from_slice(&wall_us().to_be_bytes());
        let (flags, prio) = if seq % a.gop.max(1) == 0 {
            (FLAG_GROUP_START | FLAG_KEY, 0)
        } else {
            (0, 2)
        };
        s.publish_from(&p, flags, prio, read, a.deadline)
            .await
            .map_err(|e| e.to_string())?;
    }
    let st = s.stats();
    let c = s.connection_stats();
    s.close().await.map_err(|e| e.to_string())?;
    Ok(serde_json::json!({
        "role": "publisher",
        "published": st.published,
        "last_seq": n.saturating_sub(1),
        "expired": c.expired,
        "abandoned": c.abandoned,
    }))
}

async fn play_one(
    pre: Preconnection,
    req: Request,
    deadline: Duration,
    t0: tokio::time::Instant,
    stop: tokio::time::Instant,
) -> Player {
    let mut pl = Player::default();
    let mut s = match Session::connect(&pre, &req).await {
        Ok(s) => s,
        Err(e) => {
            pl.error = Some(e.to_string());
            return pl;
        }
    };
    let joined = tokio::time::Instant::now();
    pl.protocol = s.protocol().name().to_string();
    pl.joined_ms = (joined - t0).as_secs_f64() * 1e3;
    let bound = deadline.as_micros() as i64;
    loop {
        let m = tokio::select! {
            m = s.receive() => m,
            () = tokio::time::sleep_until(stop) => break,
        };
        match m {
            Ok(Some(m)) => {
                // The wall clock first, then the relay protocol's: one the
                // protocol holds live at the second reading was within its
                // deadline at the first.
                let now = wall_us();
                if m.header.deadline_us <= now_us() {
                    pl.dropped_at_delivery += 1;
                    continue;
                }
                if m.payload.len() < 16 {
                    continue;
                }
                let seq = u64::from_be_bytes(m.payload[..8].try_into().unwrap_or([0; 8]));
                let sent = i64::from_be_bytes(m.payload[8..16].try_into().unwrap_or([0; 8]));
                if pl.first_seq.is_none() {
                    pl.first_seq = Some(seq);
                }
                if m.header.flags & FLAG_GROUP_START != 0 && pl.first_group_ms.is_none() {
                    pl.first_group_ms = Some(joined.elapsed().as_secs_f64() * 1e3);
                }
                pl.last_seq = Some(pl.last_seq.map_or(seq, |l| l.max(seq)));
                if now - sent <= bound {
                    let slack = (sent + bound - now) as f64 / 1e3;
                    pl.slack_min_ms = Some(pl.slack_min_ms.map_or(slack, |m| m.min(slack)));
                    if pl.first_seq.is_some_and(|f| seq < f) {
                        pl.before_first += 1;
                    } else {
                        pl.on_time += 1;
                    }
                } else {
                    pl.late_delivered += 1;
                    let by = (now - sent - bound) as f64 / 1e3;
                    pl.late_by_max_ms = Some(pl.late_by_max_ms.map_or(by, |m| m.max(by)));
                }
            }
            Ok(None) => break,
            Err(e) => {
                pl.error = Some(e.to_string());
                break;
            }
        }
    }
    let st = s.stats();
    pl.dropped_late = st.late;
    pl.clock_uncertainty_ms = st.clock_uncertainty_us as f64 / 1e3;
    pl
}

/// Run the command.
pub fn run(a: RelayLoadArgs) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut own = None;
    let v = rt.block_on(async {
        let engine = match &a.host {
            Some(name) => {
                let (e, made) =
                    super::transmit::attach_engine(name, Vec::new(), Default::default())?;
                own = made;
                Some(e)
            }
            None => None,
        };
        if a.publish {
            return publish(&a, engine.as_ref()).await;
        }
        let t0 = tokio::time::Instant::now();
        let stop = t0 + a.duration;
        let mut set = tokio::task::JoinSet::new();
        for i in 0..a.players {
            let (p, r) = (pre(&a, engine.as_ref())?, request(&a, Role::Play));
            let d = a.deadline;
            set.spawn(async move { (i, play_one(p, r, d, t0, stop).await) });
            tokio::time::sleep(a.connect_gap).await;
        }
        let mut players = vec![Player::default(); a.players];
        while let Some(r) = set.join_next().await {
            let (i, p) = r.map_err(|e| e.to_string())?;
            players[i] = p;
        }
        Ok(serde_json::json!({ "role": "players", "players": players }))
    });
    drop(rt);
    drop(own);
    println!("{}", v?);
    Ok(())
}
