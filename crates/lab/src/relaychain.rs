//! A chain of relays across lab hosts (`hollywood lab relay-chain`): does
//! one end-to-end deadline hold over three relays, each hop its own lossy
//! path?
//!
//! ```text
//! h0 ─ e1 ─ h1 ─ e2 ─ h2 ─ e3 ─ h3
//! publisher  relay 2     relay 3     players
//! relay 1
//! ```
//!
//! Every `e` is the link emulator ([`crate::netem`]) on its own path
//! (default: 20 ms each way, so 40 ms round trip per hop, 1 % loss on the
//! data direction). Relay 1 in h0 takes the publisher; relay 2 in h1 and
//! relay 3 in h2 play the stream from the relay before them
//! (`--upstream`) and serve it onward. In h3 one player joins at the start
//! and a second (the late joiner) mid-stream. Everything runs as a user
//! types it: `hollywood relay …` and `hollywood tools relay-load …` in
//! each namespace. A message is on time when the player has it within the
//! deadline of the publisher's send time (one clock: the hosts are
//! namespaces of one machine); the relay protocol itself never delivers
//! past the deadline, which the player checks (`late_delivered`).
//!
//! With transport `hollywood` every relay and the players run TCP
//! Hollywood on the engine: each relay makes its own host-mode instance
//! (`relay --host`) whose egress is every interface of its host
//! (`--host-egress to-prev,to-next`: it calls upstream by one and serves
//! downstream by the other), and calls the relay before it over the engine
//! (`--upstream-transport hollywood`); the players attach their own
//! instance in the last host. The publisher, in relay 1's host, sends on
//! kernel TCP to relay 1's address, which host mode forwards to relay 1's
//! engine (there is no emulated hop between them).

use crate::internet::Proc;
use crate::netem::{Netem, NetemConfig};
use hollywood_io::{NetNs, VethPair};
use hollywood_sim::{LinkConfig, LossModel};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors of a run.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The port every relay listens on.
pub const PORT: u16 = 9000;

/// What to run.
#[derive(Debug, Clone)]
pub struct ChainSpec {
    /// Namespace prefix.
    pub name: String,
    /// The `hollywood` executable.
    pub bin: PathBuf,
    /// Relays in the chain (1..=6).
    pub relays: usize,
    /// One-way delay of each hop.
    pub hop_delay: Duration,
    /// Loss of each hop's data direction.
    pub hop_loss: f64,
    /// Each hop's rate (bit/s; 0: unlimited).
    pub hop_rate_bps: u64,
    /// The end-to-end deadline.
    pub deadline: Duration,
    /// How long the publisher sends.
    pub duration: Duration,
    /// Messages between group starts (5 ms apart).
    pub gop: u64,
    /// The candidate every relay serves and calls upstream by: `quic`,
    /// `kernel` (the message layer on kernel TCP) or `hollywood` (TCP
    /// Hollywood on each host's engine, host mode with every interface of
    /// the host as egress).
    pub transport: String,
    /// The emulators' seed.
    pub seed: u64,
    /// Logs and JSON.
    pub out_dir: PathBuf,
}

/// A relay's figures at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Hop {
    /// 1 is the publisher's.
    pub relay: usize,
    /// Messages it took in.
    pub published: u64,
    /// Of those, already past the deadline on arrival (not forwarded).
    pub published_late: u64,
    /// Messages it handed onward.
    pub forwarded: u64,
    /// Messages that expired in its queues.
    pub expired: u64,
    /// Packets its inbound path dropped (the emulator, data direction).
    pub path_dropped: u64,
}

/// The outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ChainResult {
    /// The candidate.
    pub transport: String,
    /// The publisher's candidate to relay 1 (in the same host: `kernel`
    /// for `hollywood`, whose engine relay 1 holds).
    pub publisher_transport: String,
    /// Relays.
    pub relays: usize,
    /// Round trip of one hop (ms).
    pub hop_rtt_ms: f64,
    /// Loss of each hop (%).
    pub hop_loss_pct: f64,
    /// The deadline (ms).
    pub deadline_ms: f64,
    /// Messages published.
    pub published: u64,
    /// The first player: messages from its first to the last published.
    pub expected: u64,
    /// Of those, on time.
    pub on_time: u64,
    /// on_time / expected (%).
    pub on_time_pct: f64,
    /// Delivered past the deadline (must be 0).
    pub late_delivered: u64,
    /// How far past the deadline the latest of those was (ms).
    pub late_by_max_ms: Option<f64>,
    /// Dropped by the players' sessions as past their deadline on arrival
    /// (the relay protocol's conservative deadline), both players.
    pub dropped_late: u64,
    /// Handed over by a session in time but past the deadline when the
    /// player took it, dropped there (both players; `relay-load`).
    pub dropped_at_delivery: u64,
    /// The least time left before the deadline of a message the far
    /// player got on time (ms).
    pub slack_min_ms: Option<f64>,
    /// The width of the far player's bounds on the last relay's clock at
    /// its end (ms): how much of the deadline the last conversion spent.
    pub player_clock_uncertainty_ms: f64,
    /// Messages older than a player's first (a group start), delivered
    /// after it because the last relay took them in after it (out of
    /// order); not counted on time. Both players.
    pub before_first: u64,
    /// The late joiner: when it joined (s after the start).
    pub late_joiner_joined_s: f64,
    /// From its acceptance to its first group start (ms).
    pub late_joiner_first_group_ms: Option<f64>,
    /// One group of pictures plus one round trip of the last hop (ms): the
    /// bound the late joiner is held to.
    pub late_joiner_bound_ms: f64,
    /// The late joiner's on-time share of its part of the stream (%).
    pub late_joiner_on_time_pct: f64,
    /// Per relay.
    pub hops: Vec<Hop>,
    /// Packets the last path (last relay → players) dropped.
    pub player_path_dropped: u64,
}

/// A namespace's address on link `link` (1-based, left to right): the left
/// end .2, the right end .1 — links alternate host–emulator, emulator–host.
fn addr(link: usize, left: bool) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 90, link as u8, if left { 2 } else { 1 }))
}

/// The chain's namespaces and emulators; dropping it takes them down.
struct Chain {
    // Drop order: emulators, veths, namespaces.
    netems: Vec<Netem>,
    _veths: Vec<VethPair>,
    hosts: Vec<NetNs>,
    _emus: Vec<NetNs>,
}

fn build(spec: &ChainSpec) -> Result<Chain, Error> {
    let n = spec.relays + 1; // hosts h0..hn-1: relays, then the players
    let mut hosts = Vec::new();
    let mut emus = Vec::new();
    // A chain of the same name left by a killed run.
    let _ = NetNs::remove_stale(&format!("{}-", spec.name));
    for i in 0..n {
        hosts.push(NetNs::create(&format!("{}-h{i}", spec.name))?);
    }
    for i in 1..n {
        emus.push(NetNs::create(&format!("{}-e{i}", spec.name))?);
    }
    for ns in hosts.iter().chain(&emus) {
        for (k, v) in [
            ("net.ipv4.ip_forward", "1"),
            ("net.ipv4.conf.all.rp_filter", "0"),
            ("net.ipv4.conf.default.rp_filter", "0"),
        ] {
            ns.set_sysctl(k, v)?;
        }
    }
    let mut veths = Vec::new();
    let mut netems = Vec::new();
    for i in 1..n {
        let (left, emu, right) = (&hosts[i - 1], &emus[i - 1], &hosts[i]);
        // Link 2i-1: h(i-1) ─ e(i); link 2i: e(i) ─ h(i).
        let (l1, l2) = (2 * i - 1, 2 * i);
        veths.push(VethPair::create(left, "to-next", emu, "veth-l")?);
        veths.push(VethPair::create(emu, "veth-r", right, "to-prev")?);
        for (ns, dev) in [(left, "to-next"), (right, "to-prev")] {
            ns.steer_by_flow(dev)?;
            ns.ip(&["link", "set", "dev", dev, "gso_max_segs", "1"])?;
        }
        left.add_addr("to-next", addr(l1, true), 24)?;
        emu.add_addr("veth-l", addr(l1, false), 24)?;
        emu.add_addr("veth-r", addr(l2, true), 24)?;
        right.add_addr("to-prev", addr(l2, false), 24)?;
        left.add_route(&format!("10.90.{l2}.0/24"), Some(addr(l1, false)), None)?;
        right.add_route(&format!("10.90.{l1}.0/24"), Some(addr(l2, true)), None)?;
        // Default routes toward the publisher (h0: toward the players):
        // every host but h0 calls upstream, and the players' host-mode
        // instance leaves by the default route's interface (a relay's by
        // both of its interfaces, `--host-egress`).
        right.add_route("default", Some(addr(l2, true)), None)?;
        if i == 1 {
            left.add_route("default", Some(addr(l1, false)), None)?;
        }
        let data = LinkConfig {
            rate_bps: spec.hop_rate_bps,
            delay: spec.hop_delay,
            loss: if spec.hop_loss > 0.0 {
                LossModel::Bernoulli(spec.hop_loss)
            } else {
                LossModel::None
            },
            ..LinkConfig::default()
        };
        let back = LinkConfig {
            rate_bps: spec.hop_rate_bps,
            delay: spec.hop_delay,
            ..LinkConfig::default()
        };
        let cfg = NetemConfig::new(data, back, spec.seed + i as u64);
        netems.push(Netem::start(emu, "veth-l", "veth-r", cfg, None)?);
    }
    Ok(Chain {
        netems,
        _veths: veths,
        hosts,
        _emus: emus,
    })
}

fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    ok()
}

fn last_json(log: &Path) -> Result<serde_json::Value, Error> {
    let text = std::fs::read_to_string(log)?;
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .ok_or_else(|| format!("{}: no JSON line:\n{text}", log.display()).into())
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Relays, ended with SIGTERM (so that an in-process host-mode instance
/// is taken down) also when the run fails.
struct Terminating(Vec<Proc>);

impl Drop for Terminating {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            p.terminate(Duration::from_secs(5));
        }
    }
}

/// Run the chain once.
pub fn run(spec: &ChainSpec, mut progress: impl FnMut(&str)) -> Result<ChainResult, Error> {
    if !hollywood_io::is_root() {
        return Err("the relay chain needs root (network namespaces)".into());
    }
    let engine = match spec.transport.as_str() {
        "quic" | "kernel" => false,
        "hollywood" => true,
        t => return Err(format!("transport {t}: quic, kernel or hollywood").into()),
    };
    if !(1..=6).contains(&spec.relays) {
        return Err("--relays: 1 to 6".into());
    }
    std::fs::create_dir_all(&spec.out_dir)?;
    let chain = build(spec)?;
    let bin = spec.bin.to_string_lossy().to_string();
    let ns = |i: usize| chain.hosts[i].name().unwrap_or_default().to_string();
    let log = |what: &str| spec.out_dir.join(format!("{what}.log"));
    let port = PORT.to_string();
    let total = spec.duration + Duration::from_secs(8);
    let secs = |d: Duration| format!("{}ms", d.as_millis());
    // With the engine: host mode's state and lock per host (not the
    // machine's run directory, which other users of host mode share).
    let run_dirs: Vec<PathBuf> = (0..=spec.relays)
        .map(|i| spec.out_dir.join(format!("run-h{i}")))
        .collect();
    for d in &run_dirs {
        std::fs::create_dir_all(d)?;
    }
    let env = |i: usize| -> Vec<(&str, &Path)> {
        if engine {
            vec![("HOLLYWOOD_RUN_DIR", run_dirs[i].as_path())]
        } else {
            Vec::new()
        }
    };
    // Relays, first to last: relay i in h(i-1), listening on its address
    // toward the next hop (relay 1 also takes the publisher locally).
    let mut relays = Terminating(Vec::new());
    for i in 1..=spec.relays {
        let listen = format!("{}:{port}", addr(2 * i - 1, true));
        let mut argv = vec![
            bin.clone(),
            "relay".into(),
            "--listen".into(),
            listen,
            "--transport".into(),
            spec.transport.clone(),
            "--json".into(),
            "--duration".into(),
            secs(total),
        ];
        if i == 1 {
            argv.push("--open-publish".into());
        } else {
            // The relay before: its address on the link toward us.
            argv.push("--upstream".into());
            argv.push(format!(
                "hollywood://{}:{port}",
                addr(2 * (i - 1) - 1, true)
            ));
            argv.push("--upstream-transport".into());
            argv.push(spec.transport.clone());
        }
        if engine {
            // Its own host-mode instance, leaving by both of its
            // interfaces (relay 1's host has only the one toward the next).
            let egress = if i == 1 { "to-next" } else { "to-prev,to-next" };
            argv.extend(["--host".into(), "--host-egress".into(), egress.into()]);
        }
        let a: Vec<&str> = argv.iter().map(String::as_str).collect();
        let relay_log = log(&format!("relay{i}"));
        relays
            .0
            .push(Proc::spawn(&ns(i - 1), &env(i - 1), &a, &relay_log)?);
        // It listens (it says so on stderr) before the next one calls it.
        let listening = wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(&relay_log).is_ok_and(|l| {
                l.lines()
                    .any(|l| l.starts_with("relay: ") && l.contains(" on "))
            })
        });
        if !listening {
            return Err(format!("relay {i} never listened (see {})", relay_log.display()).into());
        }
        progress(&format!("relay {i} up in {}", ns(i - 1)));
    }
    std::thread::sleep(Duration::from_millis(800));
    let first = format!("{}:{port}", addr(1, true));
    let last = format!("{}:{port}", addr(2 * spec.relays - 1, true));
    let deadline = secs(spec.deadline);
    let gop = spec.gop.to_string();
    let pub_transport = if engine { "kernel" } else { &spec.transport };
    let publisher = Proc::spawn(
        &ns(0),
        &[],
        &[
            &bin,
            "tools",
            "relay-load",
            "--relay",
            &first,
            "--publish",
            "--gop",
            &gop,
            "--deadline",
            &deadline,
            "--duration",
            &secs(spec.duration),
            "--transport",
            pub_transport,
        ],
        &log("publisher"),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    // Two players: the second joins mid-stream (the late joiner).
    let gap = spec.duration / 2;
    let play_for = secs(spec.duration + Duration::from_secs(3));
    let gap = secs(gap);
    let mut argv = vec![
        bin.as_str(),
        "tools",
        "relay-load",
        "--relay",
        &last,
        "--players",
        "2",
        "--connect-gap",
        &gap,
        "--deadline",
        &deadline,
        "--duration",
        &play_for,
        "--transport",
        &spec.transport,
    ];
    if engine {
        argv.push("--host");
    }
    let mut players = Proc::spawn(&ns(spec.relays), &env(spec.relays), &argv, &log("players"))?;
    progress("publishing");
    let mut publisher = publisher;
    let pub_exit = publisher.wait_for(spec.duration + Duration::from_secs(15));
    let players_exit = players.wait_for(Duration::from_secs(20));
    let mut relay_reports = Vec::new();
    for (i, r) in std::mem::take(&mut relays.0).into_iter().enumerate() {
        let exit = r.terminate(Duration::from_secs(5));
        relay_reports.push(
            last_json(&log(&format!("relay{}", i + 1)))
                .map_err(|e| format!("relay {}: {e} ({exit})", i + 1))?,
        );
    }
    let mut dropped = Vec::new();
    for n in chain.netems {
        let st = n.stop()?;
        dropped.push(st.dir(crate::netem::Direction::AtoB).dropped());
    }
    let p = last_json(&log("publisher")).map_err(|e| format!("publisher ({pub_exit}): {e}"))?;
    let pl = last_json(&log("players")).map_err(|e| format!("players ({players_exit}): {e}"))?;
    let last_seq = u(&p["last_seq"]);
    let player = |k: usize| -> (u64, u64, u64, Option<f64>, f64) {
        let x = &pl["players"][k];
        let first = u(&x["first_seq"]);
        let expected = if x["first_seq"].is_null() {
            0
        } else {
            last_seq + 1 - first
        };
        (
            expected,
            u(&x["on_time"]),
            u(&x["late_delivered"]),
            x["first_group_ms"].as_f64(),
            x["joined_ms"].as_f64().unwrap_or(0.0) / 1e3,
        )
    };
    let (expected, on_time, late0, _, _) = player(0);
    let (lexp, lon, late1, lfirst, ljoined) = player(1);
    let hops = relay_reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut h = Hop {
                relay: i + 1,
                published: 0,
                published_late: 0,
                forwarded: 0,
                expired: 0,
                path_dropped: if i == 0 { 0 } else { dropped[i - 1] },
            };
            let all = r["streams"].as_array().into_iter().flatten();
            for s in all.chain(r["ended"].as_array().into_iter().flatten()) {
                h.published += u(&s["published"]);
                h.published_late += u(&s["published_late"]);
                h.forwarded += u(&s["departed"]["forwarded"]);
                h.expired += u(&s["departed"]["expired"]);
                for sub in s["subscribers"].as_array().into_iter().flatten() {
                    h.forwarded += u(&sub["queue"]["forwarded"]);
                    h.expired += u(&sub["queue"]["expired"]);
                }
            }
            h
        })
        .collect();
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let rtt = spec.hop_delay * 2;
    Ok(ChainResult {
        transport: spec.transport.clone(),
        publisher_transport: pub_transport.to_owned(),
        relays: spec.relays,
        hop_rtt_ms: rtt.as_secs_f64() * 1e3,
        hop_loss_pct: spec.hop_loss * 100.0,
        deadline_ms: spec.deadline.as_secs_f64() * 1e3,
        published: u(&p["published"]),
        expected,
        on_time,
        on_time_pct: pct(on_time, expected),
        late_delivered: late0 + late1,
        before_first: u(&pl["players"][0]["before_first"]) + u(&pl["players"][1]["before_first"]),
        late_by_max_ms: (0..2)
            .filter_map(|k| pl["players"][k]["late_by_max_ms"].as_f64())
            .reduce(f64::max),
        dropped_late: u(&pl["players"][0]["dropped_late"]) + u(&pl["players"][1]["dropped_late"]),
        dropped_at_delivery: u(&pl["players"][0]["dropped_at_delivery"])
            + u(&pl["players"][1]["dropped_at_delivery"]),
        slack_min_ms: pl["players"][0]["slack_min_ms"].as_f64(),
        player_clock_uncertainty_ms: pl["players"][0]["clock_uncertainty_ms"]
            .as_f64()
            .unwrap_or(0.0),
        late_joiner_joined_s: ljoined,
        late_joiner_first_group_ms: lfirst,
        late_joiner_bound_ms: (spec.gop as f64 * 5.0) + rtt.as_secs_f64() * 1e3,
        late_joiner_on_time_pct: pct(lon, lexp),
        hops,
        player_path_dropped: dropped.last().copied().unwrap_or(0),
    })
}
