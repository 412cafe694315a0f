//! `hollywood bench relay` (issue 32, item 5): how many subscribers one
//! relay process serves on time, what it costs, and SRT beside it at the
//! same load.
//!
//! ```text
//! a 10.88.1.2                       e (emulator)          b 10.88.2.2
//!   hollywood relay :9000     ── RTT, loss on a→b ──      relay-load --players N
//!   relay-load --publish                                  (one process)
//!   (srt: one srt-live-transmit                           (srt: one srt-live-transmit
//!    listener per subscriber, fed                          caller per subscriber →
//!    by one source thread)                                 a measuring socket)
//! ```
//!
//! Per subscriber count N (stepped until the smallest on-time share drops
//! below 99 %): each player's on-time share (on time ÷ messages published
//! since its first one), the relay process's CPU seconds (utime + stime
//! from `/proc/PID/stat`) per delivered gigabit over the steady part (all
//! players joined), its RSS per connection, and the emulator's CPU (it
//! forwards every packet in user space, so it may be the limit; a
//! loopback row — everything in a, no emulator — gives the relay's CPU
//! without it). SRT has no fan-out: the fair comparison is one
//! `srt-live-transmit` listener per subscriber, all fed the same
//! datagrams, its latency inside the deadline
//! ([`crate::compare::srt_latency_for`]); its CPU is summed over the
//! listeners in a. A lossy-subscriber run puts one player with extra
//! random loss (iptables on its flow in b) beside clean ones and compares
//! the clean ones' shares with a run without it.

use crate::compare::srt_latency_for;
use crate::internet::{wait_until, Proc};
use crate::topology::{Host, Lab, LabSpec};
use hollywood_sim::{LinkConfig, LossModel};
use serde::Serialize;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Errors of a run (setup failures).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The relay's port in a.
pub const PORT: u16 = 9000;
const SRT_BASE: u16 = 10_000;
const SRT_SRC_BASE: u16 = 30_000;
const SRT_OUT_BASE: u16 = 20_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct RelayBenchSpec {
    /// Subscriber counts, in order.
    pub subscribers: Vec<usize>,
    /// Stop after the first count whose smallest on-time share is below
    /// 99 % (the saturation point).
    pub stop_at_saturation: bool,
    /// The measured part, after every player joined.
    pub steady: Duration,
    /// Round-trip propagation delay (half each way).
    pub rtt: Duration,
    /// Bernoulli loss on the data direction a→b.
    pub loss: f64,
    /// Link rate each way (bit/s; 0: unlimited).
    pub rate_bps: u64,
    /// End-to-end deadline (the publisher's lifetime, the on-time bound).
    pub deadline: Duration,
    /// Message size (bytes).
    pub size: usize,
    /// Time between messages.
    pub interval: Duration,
    /// A group start every this many messages.
    pub gop: u64,
    /// Players connect this long apart.
    pub connect_gap: Duration,
    /// Players' candidates (`relay-load --transport`); `None`: racing.
    pub transport: Option<String>,
    /// SRT rows for counts up to this (0: none).
    pub srt_max: usize,
    /// A loopback-only row (no emulator) per count, for CPU figures.
    pub loopback: bool,
    /// The lossy-subscriber run: this many clean players (0: none).
    pub lossy_clean: usize,
    /// The lossy player's extra loss.
    pub lossy_loss: f64,
    /// Relay worker threads (`relay --workers`); `None`: its default.
    pub workers: Option<usize>,
    /// Emulator seed.
    pub seed: u64,
    /// Lab name.
    pub lab: String,
    /// The `hollywood` executable.
    pub bin: PathBuf,
    /// Logs, one folder per run.
    pub out_dir: PathBuf,
}

impl RelayBenchSpec {
    /// Issue 32's scenario: 60 ms RTT, 1 % loss a→b, unlimited rate,
    /// 1316-byte messages every 5 ms (2.1 Mb/s), deadline 200 ms.
    pub fn issue32(lab: &str, bin: PathBuf, out_dir: PathBuf) -> RelayBenchSpec {
        RelayBenchSpec {
            subscribers: vec![10, 100, 250, 500, 750, 1000],
            stop_at_saturation: true,
            steady: Duration::from_secs(15),
            rtt: Duration::from_millis(60),
            loss: 0.01,
            rate_bps: 0,
            deadline: Duration::from_millis(200),
            size: 1316,
            interval: Duration::from_millis(5),
            gop: 100,
            connect_gap: Duration::from_millis(10),
            transport: None,
            srt_max: 100,
            loopback: true,
            lossy_clean: 99,
            lossy_loss: 0.10,
            workers: None,
            seed: 1,
            lab: lab.into(),
            bin,
            out_dir,
        }
    }

    /// SRT's latency.
    pub fn srt_latency(&self) -> Duration {
        srt_latency_for(self.deadline, self.rtt)
    }
}

/// Shares of subscribers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Shares {
    /// Subscribers counted.
    pub count: usize,
    /// Smallest on-time share (0–1).
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// Mean.
    pub mean: f64,
    /// Subscribers that received nothing (share 0, in the figures).
    pub no_data: usize,
}

impl Shares {
    fn of(mut v: Vec<f64>, no_data: usize) -> Shares {
        if v.is_empty() {
            return Shares::default();
        }
        v.sort_by(f64::total_cmp);
        Shares {
            count: v.len(),
            min: v[0],
            p50: v[v.len() / 2],
            mean: v.iter().sum::<f64>() / v.len() as f64,
            no_data,
        }
    }
}

/// One row: a system at one subscriber count.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// `hollywood`, `hollywood-loopback` or `srt`.
    pub system: String,
    /// Subscribers.
    pub subscribers: usize,
    /// The players' protocol (racing's choice), if one.
    pub protocol: Option<String>,
    /// On-time shares.
    pub on_time: Shares,
    /// CPU seconds of the serving processes over the steady window.
    pub cpu_s: f64,
    /// The window (s).
    pub window_s: f64,
    /// Delivered in the window (Gbit; messages × size).
    pub delivered_gbit: f64,
    /// `cpu_s / delivered_gbit`.
    pub cpu_s_per_gbit: Option<f64>,
    /// Serving processes' RSS at the window's end (kB).
    pub rss_kb: u64,
    /// (RSS − RSS before anyone connected) per subscriber (kB).
    pub rss_per_conn_kb: Option<f64>,
    /// The emulator's CPU over the window ÷ the window (1.0 = one core).
    pub emulator_cpu_share: f64,
    /// The serving processes' CPU ÷ the window.
    pub server_cpu_share: f64,
    /// Machine-wide idle share of all cores over the window.
    pub machine_idle_share: f64,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

/// The lossy-subscriber comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Lossy {
    /// Clean players.
    pub clean: usize,
    /// The lossy player's extra loss.
    pub loss: f64,
    /// Clean players' shares without the lossy one.
    pub without: Shares,
    /// Clean players' shares beside it.
    pub with: Shares,
    /// The lossy player's own share.
    pub lossy_share: Option<f64>,
    /// Packets the lossy player's iptables rule dropped.
    pub lossy_dropped_packets: u64,
    /// `with.mean − without.mean` in percentage points.
    pub mean_delta_points: f64,
    /// `with.min − without.min` in percentage points.
    pub min_delta_points: f64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// RTT (ms).
    pub rtt_ms: u64,
    /// Loss a→b.
    pub loss: f64,
    /// Deadline (ms).
    pub deadline_ms: u64,
    /// Stream rate (bit/s).
    pub stream_bps: f64,
    /// SRT latency (ms).
    pub srt_latency_ms: u64,
    /// Rows in run order.
    pub rows: Vec<Row>,
    /// The first count at which Hollywood's smallest share is below 99 %.
    pub first_below_99: Option<usize>,
    /// The same for SRT (among the counts it ran).
    pub srt_first_below_99: Option<usize>,
    /// Per count with both: Hollywood CPU/Gbit ÷ SRT CPU/Gbit.
    pub cpu_ratio_hollywood_to_srt: Vec<(usize, f64)>,
    /// The lossy-subscriber run.
    pub lossy: Option<Lossy>,
}

/// Run the bench. `progress` hears what starts.
pub fn run(spec: &RelayBenchSpec, mut progress: impl FnMut(&str)) -> Result<Report, Error> {
    if !hollywood_io::is_root() {
        return Err(Box::new(crate::topology::LabError::NotRoot));
    }
    if spec.size < 16 || spec.subscribers.is_empty() || spec.interval.is_zero() {
        return Err("need --size ≥ 16, a positive interval and at least one count".into());
    }
    if spec.srt_max > 0
        && Command::new("srt-live-transmit")
            .arg("-version")
            .output()
            .is_err()
    {
        return Err("srt-live-transmit: not found (srt-tools; scripts/test.sh installs it)".into());
    }
    crate::interop::remove_stale_labs();
    std::fs::create_dir_all(&spec.out_dir)?;
    let mut rows = Vec::new();
    let mut first_below = None;
    let mut srt_first_below = None;
    let mut ratio = Vec::new();
    for &n in &spec.subscribers {
        progress(&format!("hollywood, {n} subscribers"));
        let h = run_relay(spec, n, None, false)?;
        let below = h.row.on_time.min < 0.99;
        let hcpu = h.row.cpu_s_per_gbit;
        rows.push(h.row);
        if spec.loopback {
            progress(&format!("hollywood on loopback, {n} subscribers"));
            rows.push(run_relay(spec, n, None, true)?.row);
        }
        if n <= spec.srt_max {
            progress(&format!("srt, {n} subscribers"));
            let s = run_srt(spec, n)?;
            if s.on_time.min < 0.99 && srt_first_below.is_none() {
                srt_first_below = Some(n);
            }
            if let (Some(h), Some(s)) = (hcpu, s.cpu_s_per_gbit) {
                ratio.push((n, h / s));
            }
            rows.push(s);
        }
        if below && first_below.is_none() {
            first_below = Some(n);
            if spec.stop_at_saturation {
                break;
            }
        }
    }
    let lossy = if spec.lossy_clean > 0 {
        progress(&format!("{} clean subscribers", spec.lossy_clean));
        let without = run_relay(spec, spec.lossy_clean, None, false)?;
        progress(&format!(
            "{} clean subscribers and one with {} % loss",
            spec.lossy_clean,
            spec.lossy_loss * 100.0
        ));
        let with = run_relay(spec, spec.lossy_clean, Some(spec.lossy_loss), false)?;
        if let Some(e) = with.row.error.as_ref().or(without.row.error.as_ref()) {
            eprintln!("lossy run: {e}");
        }
        let (w, wo) = (with.row.on_time.clone(), without.row.on_time.clone());
        Some(Lossy {
            clean: spec.lossy_clean,
            loss: spec.lossy_loss,
            mean_delta_points: (w.mean - wo.mean) * 100.0,
            min_delta_points: (w.min - wo.min) * 100.0,
            without: wo,
            with: w,
            lossy_share: with.lossy_share,
            lossy_dropped_packets: with.lossy_dropped,
        })
    } else {
        None
    };
    Ok(Report {
        rtt_ms: spec.rtt.as_millis() as u64,
        loss: spec.loss,
        deadline_ms: spec.deadline.as_millis() as u64,
        stream_bps: spec.size as f64 * 8.0 / spec.interval.as_secs_f64(),
        srt_latency_ms: spec.srt_latency().as_millis() as u64,
        rows,
        first_below_99: first_below,
        srt_first_below_99: srt_first_below,
        cpu_ratio_hollywood_to_srt: ratio,
        lossy,
    })
}

fn lab_up(spec: &RelayBenchSpec, loopback: bool) -> Result<Lab, Error> {
    let one_way = if loopback {
        Duration::ZERO
    } else {
        spec.rtt / 2
    };
    let mut a_to_b = LinkConfig::new(spec.rate_bps, one_way);
    if spec.loss > 0.0 && !loopback {
        a_to_b = a_to_b.with_loss(LossModel::Bernoulli(spec.loss));
    }
    Ok(Lab::up(LabSpec {
        name: spec.lab.clone(),
        three_hosts: false,
        a_to_b,
        b_to_a: LinkConfig::new(spec.rate_bps, one_way),
        seed: spec.seed,
        hook: None,
    })?)
}

fn ticks_per_s() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process or thread (`/proc/…/stat`), in seconds.
fn cpu_of(stat_path: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(stat_path) else {
        return 0.0;
    };
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / ticks_per_s()
}

fn cpu_pid(pid: u32) -> f64 {
    cpu_of(&format!("/proc/{pid}/stat"))
}

/// CPU of this process's emulator threads (named `netem-…`).
fn emulator_cpu() -> f64 {
    let mut sum = 0.0;
    for e in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if comm.starts_with("netem") {
            sum += cpu_of(&p.join("stat").to_string_lossy());
        }
    }
    sum
}

/// (idle, total) jiffies of the whole machine.
fn machine_jiffies() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(l) = s.lines().next() else {
        return (0.0, 0.0);
    };
    let v: Vec<f64> = l
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    (idle, v.iter().take(8).sum())
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn json_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter(serde_json::Value::is_object)
        .collect()
}

/// Messages the relay handed to subscribers' connections, from its last
/// statistics line.
fn forwarded(log: &Path) -> u64 {
    let Some(v) = json_lines(log)
        .into_iter()
        .rev()
        .find(|v| v.get("streams").is_some())
    else {
        return 0;
    };
    let mut n = 0;
    for s in v["streams"].as_array().into_iter().flatten() {
        n += s["departed"]["forwarded"].as_u64().unwrap_or(0);
        for sub in s["subscribers"].as_array().into_iter().flatten() {
            n += sub["queue"]["forwarded"].as_u64().unwrap_or(0);
        }
    }
    n
}

/// On-time share of each player in a `relay-load --players` output.
fn player_shares(log: &Path, last_seq: u64) -> (Vec<f64>, usize, Option<String>) {
    let mut shares = Vec::new();
    let mut none = 0;
    let mut proto = None;
    let Some(v) = json_lines(log)
        .into_iter()
        .rev()
        .find(|v| v.get("players").is_some())
    else {
        return (shares, none, proto);
    };
    for p in v["players"].as_array().into_iter().flatten() {
        match p["first_seq"].as_u64() {
            Some(f) if f <= last_seq => {
                let on = p["on_time"].as_u64().unwrap_or(0);
                shares.push(on as f64 / (last_seq - f + 1) as f64);
                if let Some(s) = p["protocol"].as_str() {
                    proto.get_or_insert_with(|| s.to_string());
                }
            }
            _ => {
                none += 1;
                shares.push(0.0);
            }
        }
    }
    (shares, none, proto)
}

struct RelayRun {
    row: Row,
    lossy_share: Option<f64>,
    lossy_dropped: u64,
}

/// Local ports of `pid`'s sockets in namespace `ns` (`ss -tuanp`).
fn ports_of(ns: &str, pid: u32) -> Vec<(String, u16)> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-Htuanp"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let tag = format!("pid={pid},");
    let mut v = Vec::new();
    for l in out.lines().filter(|l| l.contains(&tag)) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let (Some(proto), Some(local)) = (f.first(), f.get(4)) {
            if let Some(p) = local.rsplit_once(':').and_then(|(_, p)| p.parse().ok()) {
                if !v.contains(&(proto.to_string(), p)) {
                    v.push((proto.to_string(), p));
                }
            }
        }
    }
    v
}

fn iptables_drops(ns: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "iptables", "-nvxL", "INPUT"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .filter(|l| l.contains("statistic"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[allow(clippy::too_many_lines)]
fn run_relay(
    spec: &RelayBenchSpec,
    n: usize,
    lossy: Option<f64>,
    loopback: bool,
) -> Result<RelayRun, Error> {
    let system = if loopback {
        "hollywood-loopback"
    } else {
        "hollywood"
    };
    let label = match lossy {
        Some(_) => format!("{system}-{n}-lossy"),
        None => format!("{system}-{n}"),
    };
    let dir = spec.out_dir.join(&label);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let lab = lab_up(spec, loopback)?;
    let ns = |h: Host| lab.ns(h).name().unwrap_or_default().to_string();
    let (ns_a, ns_b) = (ns(Host::A), ns(Host::B));
    let ns_players = if loopback { ns_a.clone() } else { ns_b.clone() };
    let bin = spec.bin.to_string_lossy().into_owned();
    let relay_addr = format!("{}:{PORT}", lab.addr(Host::A, false));
    // QUIC needs the specific address (not 0.0.0.0).
    let listen = relay_addr.clone();
    let mut argv = vec![
        bin.as_str(),
        "relay",
        "--listen",
        &listen,
        "--open-publish",
        "--json",
        "-s",
        "1000",
    ];
    let workers = spec.workers.map(|w| w.to_string());
    if let Some(w) = &workers {
        argv.extend(["--workers", w]);
    }
    let relay_log = dir.join("relay.log");
    let relay = Proc::spawn(&ns_a, &[], &argv, &relay_log)?;
    let listening = wait_until(Duration::from_secs(10), || {
        lab.ns(Host::A)
            .exec(&["ss", "-Hltun", &format!("sport = :{PORT}")])
            .is_ok_and(|o| !o.trim().is_empty())
    });
    if !listening {
        return Err(format!("{label}: the relay never listened on {PORT}").into());
    }
    std::thread::sleep(Duration::from_millis(300));
    let rss_idle = rss_kb(relay.pid());
    let players_total = n + usize::from(lossy.is_some());
    let join = spec.connect_gap * players_total as u32 + Duration::from_secs(3);
    let pub_for = join + spec.steady + Duration::from_secs(1);
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    let (size, interval, gop, deadline) = (
        spec.size.to_string(),
        ms(spec.interval),
        spec.gop.to_string(),
        ms(spec.deadline),
    );
    let (pub_d, play_d, gap) = (
        ms(pub_for),
        ms(pub_for + Duration::from_secs(3)),
        ms(spec.connect_gap),
    );
    let publisher = Proc::spawn(
        &ns_a,
        &[],
        &[
            &bin,
            "tools",
            "relay-load",
            "--relay",
            &relay_addr,
            "--publish",
            "--size",
            &size,
            "--interval",
            &interval,
            "--gop",
            &gop,
            "--deadline",
            &deadline,
            "--duration",
            &pub_d,
        ],
        &dir.join("publisher.log"),
    )?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let players_argv = |count: String| -> Vec<String> {
        let mut v: Vec<String> = [
            &bin,
            "tools",
            "relay-load",
            "--relay",
            &relay_addr,
            "--players",
            &count,
            "--deadline",
            &deadline,
            "--duration",
            &play_d,
            "--connect-gap",
            &gap,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(t) = &spec.transport {
            v.extend(["--transport".to_string(), t.clone()]);
        }
        v
    };
    let mut problems = Vec::new();
    let lossy_proc = match lossy {
        Some(p) => {
            let a = players_argv("1".into());
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let proc_ = Proc::spawn(&ns_b, &[], &a, &dir.join("lossy.log"))?;
            let pid = proc_.pid();
            let mut ports = Vec::new();
            wait_until(Duration::from_secs(10), || {
                ports = ports_of(&ns_b, pid);
                !ports.is_empty()
            });
            // Racing opens one socket per candidate, not all at once: the
            // first found may be an attempt that loses (its rule then
            // drops next to nothing). Take every socket it has a little
            // later too.
            std::thread::sleep(Duration::from_millis(1500));
            for p in ports_of(&ns_b, pid) {
                if !ports.contains(&p) {
                    ports.push(p);
                }
            }
            if ports.is_empty() {
                problems.push("the lossy player's sockets were not found".to_string());
            }
            for (proto, port) in &ports {
                lab.ns(Host::B).exec(&[
                    "iptables",
                    "-I",
                    "INPUT",
                    "-p",
                    proto,
                    "--dport",
                    &port.to_string(),
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    &p.to_string(),
                    "-j",
                    "DROP",
                ])?;
            }
            Some(proc_)
        }
        None => None,
    };
    let a = players_argv(n.to_string());
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let players_log = dir.join("players.log");
    let mut players = Proc::spawn(&ns_players, &[], &a, &players_log)?;
    let start = t0 + join;
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let sample = || {
        (
            Instant::now(),
            cpu_pid(relay.pid()),
            emulator_cpu(),
            forwarded(&relay_log),
            machine_jiffies(),
        )
    };
    let s0 = sample();
    std::thread::sleep(spec.steady);
    // The statistics line of the window's end.
    std::thread::sleep(Duration::from_millis(1100));
    let s1 = sample();
    let rss = rss_kb(relay.pid());
    let lossy_dropped = iptables_drops(&ns_b);
    let mut publisher = publisher;
    let pub_exit = publisher.wait_for(pub_for + Duration::from_secs(30));
    let pl_exit = players.wait_for(Duration::from_secs(30));
    let lossy_exit = lossy_proc.map(|mut p| p.wait_for(Duration::from_secs(30)));
    let relay_exit = relay.terminate(Duration::from_secs(10));
    drop(lab);
    for (who, e) in [
        ("publisher", Some(pub_exit)),
        ("players", Some(pl_exit)),
        ("lossy player", lossy_exit),
        ("relay", Some(relay_exit)),
    ] {
        if let Some(e) = e {
            if !e.contains("exit status: 0") && !e.contains("signal: 15") {
                problems.push(format!("{who}: {e}"));
            }
        }
    }
    let last_seq = json_lines(&dir.join("publisher.log"))
        .iter()
        .rev()
        .find_map(|v| v["last_seq"].as_u64());
    let Some(last_seq) = last_seq else {
        problems.push("no publisher report".into());
        return Ok(RelayRun {
            row: Row {
                system: system.into(),
                subscribers: n,
                error: Some(problems.join("; ")),
                ..Row::default()
            },
            lossy_share: None,
            lossy_dropped,
        });
    };
    let (shares, none, protocol) = player_shares(&players_log, last_seq);
    if shares.len() != n {
        problems.push(format!("{} player reports of {n}", shares.len()));
    }
    let lossy_share = lossy.and_then(|_| {
        player_shares(&dir.join("lossy.log"), last_seq)
            .0
            .first()
            .copied()
    });
    let window = (s1.0 - s0.0).as_secs_f64();
    let cpu = s1.1 - s0.1;
    let gbit = (s1.3.saturating_sub(s0.3)) as f64 * spec.size as f64 * 8.0 / 1e9;
    let (idle, total) = ((s1.4 .0 - s0.4 .0), (s1.4 .1 - s0.4 .1));
    let row = Row {
        system: system.into(),
        subscribers: n,
        protocol,
        on_time: Shares::of(shares, none),
        cpu_s: cpu,
        window_s: window,
        delivered_gbit: gbit,
        cpu_s_per_gbit: (gbit > 0.0).then(|| cpu / gbit),
        rss_kb: rss,
        rss_per_conn_kb: (n > 0)
            .then(|| rss.saturating_sub(rss_idle) as f64 / players_total as f64),
        emulator_cpu_share: (s1.2 - s0.2) / window,
        server_cpu_share: cpu / window,
        machine_idle_share: if total > 0.0 { idle / total } else { 0.0 },
        error: (!problems.is_empty()).then(|| problems.join("; ")),
    };
    Ok(RelayRun {
        row,
        lossy_share,
        lossy_dropped,
    })
}

fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

#[derive(Default)]
struct Recv {
    first_seq: Option<u64>,
    on_time: u64,
}

#[allow(clippy::too_many_lines)]
fn run_srt(spec: &RelayBenchSpec, n: usize) -> Result<Row, Error> {
    let dir = spec.out_dir.join(format!("srt-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let lab = lab_up(spec, false)?;
    let ns = |h: Host| lab.ns(h).name().unwrap_or_default().to_string();
    let (ns_a, ns_b) = (ns(Host::A), ns(Host::B));
    let server = lab.addr(Host::A, false);
    let lat = spec.srt_latency().as_millis().to_string();
    let mut problems = Vec::new();
    // Listeners in a, each reading its own copy of the source.
    let mut listeners = Vec::new();
    for i in 0..n {
        let src = format!("udp://:{}", SRT_SRC_BASE + i as u16);
        let out = format!("srt://:{}?mode=listener&latency={lat}", SRT_BASE + i as u16);
        listeners.push(Proc::spawn(
            &ns_a,
            &[],
            &["srt-live-transmit", "-q", &src, &out],
            &dir.join(format!("listener-{i}.log")),
        )?);
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss_idle: u64 = listeners.iter().map(|p| rss_kb(p.pid())).sum();
    // Measuring sockets in b.
    let socks: Vec<UdpSocket> = lab.ns(Host::B).run(move || {
        (0..n)
            .map(|i| {
                let s = UdpSocket::bind(("127.0.0.1", SRT_OUT_BASE + i as u16))?;
                s.set_read_timeout(Some(Duration::from_millis(200)))?;
                Ok(s)
            })
            .collect::<std::io::Result<Vec<_>>>()
    })??;
    let stop = Arc::new(AtomicBool::new(false));
    let received: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let recvs: Arc<Vec<Mutex<Recv>>> = Arc::new((0..n).map(|_| Mutex::default()).collect());
    let bound = spec.deadline.as_micros() as i64;
    let mut threads = Vec::new();
    for (i, s) in socks.into_iter().enumerate() {
        let (stop, received, recvs) = (stop.clone(), received.clone(), recvs.clone());
        threads.push(std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                let Ok(len) = s.recv(&mut buf) else { continue };
                if len < 16 {
                    continue;
                }
                let now = wall_us();
                let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or([0; 8]));
                let sent = i64::from_be_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                received[i].fetch_add(1, Ordering::Relaxed);
                let mut r = recvs[i]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                r.first_seq.get_or_insert(seq);
                if now - sent <= bound {
                    r.on_time += 1;
                }
            }
        }));
    }
    let mut callers = Vec::new();
    for i in 0..n {
        let from = format!(
            "srt://{server}:{}?mode=caller&latency={lat}",
            SRT_BASE + i as u16
        );
        let to = format!("udp://127.0.0.1:{}", SRT_OUT_BASE + i as u16);
        callers.push(Proc::spawn(
            &ns_b,
            &[],
            &["srt-live-transmit", "-q", &from, &to],
            &dir.join(format!("caller-{i}.log")),
        )?);
        std::thread::sleep(spec.connect_gap);
    }
    // The source: one thread in a, each message to every listener.
    let join = Duration::from_secs(3);
    let total = join + spec.steady + Duration::from_secs(1);
    let msgs = (total.as_micros() / spec.interval.as_micros().max(1)) as u64;
    let src = lab
        .ns(Host::A)
        .run(|| UdpSocket::bind(("127.0.0.1", 0)))??;
    let (size, interval) = (spec.size, spec.interval);
    let source = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut p = vec![0u8; size];
        for seq in 0..msgs {
            let at = t0 + interval * seq as u32;
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            p[..8].copy_from_slice(&seq.to_be_bytes());
            p[8..16].copy_from_slice(&wall_us().to_be_bytes());
            for i in 0..n {
                let _ = src.send_to(&p, ("127.0.0.1", SRT_SRC_BASE + i as u16));
            }
        }
    });
    std::thread::sleep(join);
    let sample = || {
        (
            Instant::now(),
            listeners.iter().map(|p| cpu_pid(p.pid())).sum::<f64>(),
            emulator_cpu(),
            received
                .iter()
                .map(|r| r.load(Ordering::Relaxed))
                .sum::<u64>(),
            machine_jiffies(),
        )
    };
    let s0 = sample();
    std::thread::sleep(spec.steady);
    let s1 = sample();
    let rss: u64 = listeners.iter().map(|p| rss_kb(p.pid())).sum();
    let _ = source.join();
    std::thread::sleep(spec.deadline + spec.srt_latency() + Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let mut dead = 0;
    for p in callers.into_iter().chain(listeners) {
        let e = p.terminate(Duration::from_secs(5));
        if !e.contains("signal: 15") && !e.contains("exit status: 0") {
            dead += 1;
        }
    }
    if dead > 0 {
        problems.push(format!(
            "{dead} srt-live-transmit processes exited early or hung"
        ));
    }
    drop(lab);
    let last_seq = msgs.saturating_sub(1);
    let mut shares = Vec::new();
    let mut none = 0;
    for r in recvs.iter() {
        let r = r.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match r.first_seq {
            Some(f) if f <= last_seq => {
                shares.push(r.on_time as f64 / (last_seq - f + 1) as f64);
            }
            _ => {
                none += 1;
                shares.push(0.0);
            }
        }
    }
    let window = (s1.0 - s0.0).as_secs_f64();
    let cpu = s1.1 - s0.1;
    let gbit = s1.3.saturating_sub(s0.3) as f64 * spec.size as f64 * 8.0 / 1e9;
    let (idle, tot) = ((s1.4 .0 - s0.4 .0), (s1.4 .1 - s0.4 .1));
    Ok(Row {
        system: "srt".into(),
        subscribers: n,
        protocol: Some("srt".into()),
        on_time: Shares::of(shares, none),
        cpu_s: cpu,
        window_s: window,
        delivered_gbit: gbit,
        cpu_s_per_gbit: (gbit > 0.0).then(|| cpu / gbit),
        rss_kb: rss,
        rss_per_conn_kb: Some(rss as f64 / n.max(1) as f64).filter(|_| rss_idle > 0),
        emulator_cpu_share: (s1.2 - s0.2) / window,
        server_cpu_share: cpu / window,
        machine_idle_share: if tot > 0.0 { idle / tot } else { 0.0 },
        error: (!problems.is_empty()).then(|| problems.join("; ")),
    })
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// The rows as a text table, then the summary lines.
pub fn table(r: &Report) -> String {
    let mut s = format!(
        "{:<19} {:>5} {:>8} {:>8} {:>8} {:>7} {:>8} {:>9} {:>8} {:>7} {:>6}\n",
        "system",
        "subs",
        "protocol",
        "min on%",
        "p50 on%",
        "no-data",
        "CPU s/Gb",
        "srv cores",
        "kB/conn",
        "emu cor",
        "idle%"
    );
    for row in &r.rows {
        s += &format!(
            "{:<19} {:>5} {:>8} {:>8.2} {:>8.2} {:>7} {:>8} {:>9.2} {:>8} {:>7.2} {:>6.1}\n",
            row.system,
            row.subscribers,
            row.protocol.as_deref().unwrap_or("-"),
            row.on_time.min * 100.0,
            row.on_time.p50 * 100.0,
            row.on_time.no_data,
            opt(row.cpu_s_per_gbit, 2),
            row.server_cpu_share,
            opt(row.rss_per_conn_kb, 0),
            row.emulator_cpu_share,
            row.machine_idle_share * 100.0
        );
        if let Some(e) = &row.error {
            s += &format!("  {} {}: {e}\n", row.system, row.subscribers);
        }
    }
    s += &format!(
        "first N with min on-time < 99 %: hollywood {}, srt {}\n",
        r.first_below_99.map_or("none".into(), |n| n.to_string()),
        r.srt_first_below_99
            .map_or("none (of those run)".into(), |n| n.to_string())
    );
    for (n, x) in &r.cpu_ratio_hollywood_to_srt {
        s += &format!("CPU per Gb, hollywood / srt at {n}: {x:.2}\n");
    }
    if let Some(l) = &r.lossy {
        s += &format!(
            "lossy subscriber ({:.0} % loss) beside {} clean: clean mean {:.2} % → {:.2} % ({:+.2} points), min {:.2} % → {:.2} % ({:+.2}); its own share {}; rule dropped {} packets\n",
            l.loss * 100.0,
            l.clean,
            l.without.mean * 100.0,
            l.with.mean * 100.0,
            l.mean_delta_points,
            l.without.min * 100.0,
            l.with.min * 100.0,
            l.min_delta_points,
            opt(l.lossy_share.map(|x| x * 100.0), 2),
            l.lossy_dropped_packets
        );
    }
    s
}

/// The rows as CSV.
pub fn csv(r: &Report) -> String {
    let mut s = String::from(
        "system,subscribers,protocol,on_time_min,on_time_p50,on_time_mean,no_data,cpu_s,window_s,delivered_gbit,cpu_s_per_gbit,server_cpu_share,rss_kb,rss_per_conn_kb,emulator_cpu_share,machine_idle_share,error\n",
    );
    for row in &r.rows {
        s += &format!(
            "{},{},{},{:.5},{:.5},{:.5},{},{:.3},{:.3},{:.4},{},{:.3},{},{},{:.3},{:.3},\"{}\"\n",
            row.system,
            row.subscribers,
            row.protocol.as_deref().unwrap_or(""),
            row.on_time.min,
            row.on_time.p50,
            row.on_time.mean,
            row.on_time.no_data,
            row.cpu_s,
            row.window_s,
            row.delivered_gbit,
            opt(row.cpu_s_per_gbit, 3),
            row.server_cpu_share,
            row.rss_kb,
            opt(row.rss_per_conn_kb, 1),
            row.emulator_cpu_share,
            row.machine_idle_share,
            row.error.as_deref().unwrap_or("").replace('"', "'")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_take_min_median_and_mean() {
        let s = Shares::of(vec![1.0, 0.5, 0.9], 1);
        assert_eq!((s.count, s.min, s.p50, s.no_data), (3, 0.5, 0.9, 1));
        assert!((s.mean - 0.8).abs() < 1e-9);
    }

    #[test]
    fn player_shares_count_from_each_players_first_message() {
        let dir = std::env::temp_dir().join(format!("relaybench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("players.log");
        std::fs::write(
            &log,
            "noise\n{\"role\":\"players\",\"players\":[{\"protocol\":\"quic\",\"first_seq\":100,\"on_time\":901},{\"first_seq\":null,\"on_time\":0}]}\n",
        )
        .unwrap();
        let (v, none, p) = player_shares(&log, 1000);
        assert_eq!(v, vec![1.0, 0.0]);
        assert_eq!((none, p.as_deref()), (1, Some("quic")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
