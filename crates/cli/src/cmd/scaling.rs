//! `hollywood sim scaling`: the cost of the TCP Hollywood sender's
//! per-message bookkeeping, against standard TCP carrying the same
//! messages, as the message count grows (issue 9: "hollywood within 2× of
//! tcp's wall time, and the cost per message flat from 20 000 to 80 000
//! messages"). A benchmark: wall-clock figures, each the best of
//! `--repeat` runs, reported as ratios measured in the same invocation.
//!
//! Two workloads: the messages as given (with a lifetime, most of them
//! expire in the sender's message queue when the path cannot carry them,
//! so little reaches the message table), and the same messages reliable
//! (`--lifetime none`: every one gets sequence numbers, is tracked until
//! acknowledged and goes through loss recovery: the table's worst case).

use crate::cmd::messages::{parse_lifetime, Lifetime};
use crate::units::{parse_duration, parse_loss_model, parse_rate, parse_size};
use clap::Args;
use hollywood_media::{MessagesScenario, Transport};
use hollywood_sim::LossModel;
use serde::Serialize;
use std::time::Duration;

/// Arguments of `hollywood sim scaling`.
#[derive(Args, Debug)]
pub struct ScalingArgs {
    /// Message counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "20000,40000,80000")]
    messages: Vec<u32>,
    /// Bottleneck rate.
    #[arg(long, default_value = "100mbit", value_parser = parse_rate)]
    rate: u64,
    /// Round-trip time.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Loss on the data path.
    #[arg(long, default_value = "5%", value_parser = parse_loss_model)]
    loss: LossModel,
    /// Payload bytes per message.
    #[arg(long, default_value = "100", value_parser = parse_size)]
    size: u64,
    /// Time between messages.
    #[arg(long, default_value = "20us", value_parser = parse_duration)]
    interval: Duration,
    /// Lifetime of the first workload ("none" = reliable; the second
    /// workload is always reliable).
    #[arg(long, default_value = "300ms", value_parser = parse_lifetime)]
    lifetime: Lifetime,
    /// Seed.
    #[arg(long, default_value_t = 2)]
    seed: u64,
    /// Runs per point; the fastest counts (machines are noisy).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// One measured point.
#[derive(Serialize, Debug, Clone)]
pub struct Point {
    /// `expiring` (the given lifetime) or `reliable`.
    pub workload: &'static str,
    /// Transport.
    pub transport: &'static str,
    /// Messages.
    pub messages: u32,
    /// Best wall time, ms.
    pub wall_ms: f64,
    /// Wall time per message, µs.
    pub us_per_message: f64,
    /// Virtual seconds simulated.
    pub sim_seconds: f64,
    /// Messages delivered.
    pub delivered: u64,
    /// Delivered on time.
    pub on_time: u64,
}

/// The comparison at one count.
#[derive(Serialize, Debug, Clone)]
pub struct Ratio {
    /// Workload.
    pub workload: &'static str,
    /// Messages.
    pub messages: u32,
    /// Hollywood wall time / TCP wall time.
    pub hollywood_over_tcp: f64,
}

/// The JSON report.
#[derive(Serialize, Debug)]
pub struct ScalingReport {
    /// Every point.
    pub points: Vec<Point>,
    /// Hollywood / TCP per count and workload.
    pub ratios: Vec<Ratio>,
    /// Per workload and transport: µs per message at the largest count
    /// over µs per message at the smallest (1 = flat).
    pub growth: Vec<(String, f64)>,
}

fn measure(
    sc: &MessagesScenario,
    repeat: u32,
) -> Result<(f64, hollywood_media::MessagesRun), String> {
    let mut best: Option<(f64, hollywood_media::MessagesRun)> = None;
    for _ in 0..repeat.max(1) {
        let t = std::time::Instant::now();
        let run = sc.run()?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if best.as_ref().is_none_or(|(b, _)| ms < *b) {
            best = Some((ms, run));
        }
    }
    best.ok_or_else(|| "no run".into())
}

/// Run the command.
pub fn run(a: ScalingArgs) -> Result<(), String> {
    if a.messages.is_empty() || a.messages.contains(&0) {
        return Err("--messages needs positive counts".into());
    }
    let mut points = Vec::new();
    let mut ratios = Vec::new();
    for (workload, lifetime) in [("expiring", a.lifetime.0), ("reliable", None)] {
        if workload == "expiring" && lifetime.is_none() {
            continue;
        }
        for &n in &a.messages {
            let mut tcp_ms = 0.0;
            for t in [Transport::Tcp, Transport::HollywoodIr] {
                let sc = MessagesScenario {
                    rate_bps: a.rate,
                    uplink_bps: a.rate,
                    rtt: a.rtt,
                    loss: a.loss,
                    count: n,
                    size: a.size as usize,
                    interval: a.interval,
                    lifetime,
                    transport: t.into(),
                    seed: a.seed,
                    ..MessagesScenario::default()
                };
                if !a.json {
                    eprintln!("{workload} {} × {n}…", t.name());
                }
                let (ms, run) = measure(&sc, a.repeat)?;
                if t == Transport::Tcp {
                    tcp_ms = ms;
                } else {
                    ratios.push(Ratio {
                        workload,
                        messages: n,
                        hollywood_over_tcp: ms / tcp_ms.max(1e-9),
                    });
                }
                points.push(Point {
                    workload,
                    transport: t.name(),
                    messages: n,
                    wall_ms: ms,
                    us_per_message: ms * 1e3 / f64::from(n),
                    sim_seconds: run.sim_time.as_secs_f64(),
                    delivered: run.arrival.iter().filter(|x| x.is_some()).count() as u64,
                    on_time: run.on_time.on_time,
                });
            }
        }
    }
    let mut growth = Vec::new();
    let (lo, hi) = (
        *a.messages.iter().min().expect("non-empty"),
        *a.messages.iter().max().expect("non-empty"),
    );
    for w in ["expiring", "reliable"] {
        for t in ["tcp", "hollywood-ir"] {
            let at = |n: u32| {
                points
                    .iter()
                    .find(|p| p.workload == w && p.transport == t && p.messages == n)
                    .map(|p| p.us_per_message)
            };
            if let (Some(a), Some(b)) = (at(lo), at(hi)) {
                growth.push((format!("{w} {t}"), b / a.max(1e-12)));
            }
        }
    }
    let report = ScalingReport {
        points,
        ratios,
        growth,
    };
    if a.json {
        println!(
            "{}",
            crate::output::json(&report).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "workload | transport | messages | wall ms | µs/message | sim s | delivered | on time"
    );
    for p in &report.points {
        println!(
            "{} | {} | {} | {:.1} | {:.2} | {:.1} | {} | {}",
            p.workload,
            p.transport,
            p.messages,
            p.wall_ms,
            p.us_per_message,
            p.sim_seconds,
            p.delivered,
            p.on_time
        );
    }
    for r in &report.ratios {
        println!(
            "{} × {}: hollywood-ir / tcp wall time {:.2}",
            r.workload, r.messages, r.hollywood_over_tcp
        );
    }
    for (what, g) in &report.growth {
        println!("{what}: µs per message at {hi} over {lo} messages: {g:.2}");
    }
    Ok(())
}
