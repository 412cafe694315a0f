//! `hollywood dash`: MPEG-DASH sessions ([DASHing-2018]) over standard TCP and
//! TCP Hollywood side by side on one simulated path, over one or more
//! seeds: start-up delay, total stall, average bit-rate, downward
//! switches, discarded messages.

use crate::cmd::Place;
use crate::units::{parse_duration, parse_fraction, parse_rate, parse_size};
use clap::Args;
use hollywood_experiments::dash::sessions::{
    run_all, static_path, summarise, DashTransport, Session, TransportSummary,
};
use hollywood_experiments::dash::DashParams;
use hollywood_experiments::units::Spelling;
use hollywood_media::dash::content::Content;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hollywood dash`.
#[derive(Args, Debug)]
pub struct DashArgs {
    /// Transports, comma-separated: tcp (Algorithm 1), hollywood (Algorithm
    /// 2), quic-ss (one QUIC stream; Algorithm 1), quic-gop (a stream per
    /// response, as HTTP/3) and quic-pps (a stream per message), both
    /// Algorithm 2.
    #[arg(long, default_value = "tcp,hollywood")]
    transport: String,
    /// Architecture (thesis ch. 6): request-response is the [DASHing-2018] HTTP/1.1.
    #[arg(long, default_value = "request-response")]
    arch: String,
    /// Bottleneck rate ([DASHing-2018]: 5mbit).
    #[arg(long, default_value = "5mbit", value_parser = parse_rate)]
    rate: u64,
    /// Round-trip propagation delay.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Random loss, server to client (1%, 0.01).
    #[arg(long, default_value = "1%", value_parser = parse_fraction)]
    loss: f64,
    /// The video: `synthetic` (the [DASHing-2018] ladder, see docs/DASH.md) or a
    /// directory from `hollywood dash-ladder` (real video: the first
    /// seed's received video is decoded and scored, PSNR and SSIM).
    #[arg(long, default_value = "synthetic")]
    video: String,
    /// Where the received real video goes (one .ts per transport).
    #[arg(long, default_value = "out/dash-received")]
    received: PathBuf,
    /// The session: video length, chunk, buffer, ABR, Rx_T, lateness,
    /// congestion control, content seed.
    #[command(flatten)]
    p: DashParams,
    /// Bottleneck queue; default one bandwidth-delay product, at least 64 KiB.
    #[arg(long, value_parser = parse_size)]
    queue: Option<u64>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds: SEED, SEED+1, ... ([DASHing-2018] used 10 runs and trimmed means).
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Write every chunk of every run here (CSV).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write the session's packets (both directions) to this pcap file;
    /// one transport and one seed only. `tshark -X
    /// lua_script:tools/wireshark/hollywood.lua -d tcp.port==80,hollywood
    /// -r FILE` dissects the HTTP/1.1 inside (docs/DASH.md).
    #[arg(long)]
    pcap: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report<'a> {
    rate_bps: u64,
    rtt_ms: f64,
    loss: f64,
    chunks: usize,
    chunk_s: f64,
    buffer_s: f64,
    cc: &'static str,
    abr: &'static str,
    seeds: Vec<u64>,
    transports: &'a [TransportSummary],
    /// Per transport, per seed: the headline metrics.
    runs: Vec<RunLine>,
    /// Real video: the first seed's received video per transport, scored.
    video_scores: Vec<VideoScore>,
}

#[derive(Serialize)]
struct VideoScore {
    transport: &'static str,
    seed: u64,
    file: String,
    psnr_db: f64,
    ssim: f64,
    bytes_missing: u64,
}

#[derive(Serialize)]
struct RunLine {
    transport: &'static str,
    seed: u64,
    startup_s: Option<f64>,
    total_stall_s: f64,
    stalls: usize,
    avg_bitrate_kbps: f64,
    down_switch_pct: f64,
    messages_discarded: u64,
    retransmitted_segments: u64,
    error: Option<String>,
}

pub fn run(a: DashArgs) -> Result<(), String> {
    run_in(a, Place::Sim)
}

/// `hollywood lab dash`: the same sessions on real packets, one after the
/// other (each in its own lab, `LAB-0`, `LAB-1`, ...).
pub fn run_lab(a: DashArgs, lab: &str) -> Result<(), String> {
    hollywood_lab::topology::check_name(lab).map_err(|e| e.to_string())?;
    run_in(a, Place::Lab(lab))
}

fn run_in(a: DashArgs, place: Place<'_>) -> Result<(), String> {
    if a.arch != "request-response" {
        return Err(format!(
            "--arch {}: this command runs the [DASHing-2018] request-response HTTP/1.1 client; thesis ch. 6's push and Hollywood architectures are `hollywood dash-ch6`",
            a.arch
        ));
    }
    if a.seeds == 0 || a.seeds > 1000 {
        return Err("--seeds: use 1 to 1000".into());
    }
    let transports: Vec<DashTransport> = a
        .transport
        .split(',')
        .map(|s| DashTransport::parse(s.trim()))
        .collect::<Result<_, _>>()?;
    let content = if a.video == "synthetic" {
        a.p.synthetic(Spelling::Cli)?
    } else {
        Content::from_dir(std::path::Path::new(&a.video))?
    };
    let chunk_s = content.chunk.as_secs_f64();
    let chunks = content.chunks();
    let session = a.p.session(
        content,
        static_path(a.rate, a.rtt, a.loss),
        a.queue.map(|q| q as usize),
    );
    for t in &transports {
        session.scenario(t, a.seed).validate()?;
    }
    let last = a
        .seed
        .checked_add(a.seeds)
        .ok_or("--seed + --seeds overflows")?;
    let seeds: Vec<u64> = (a.seed..last).collect();
    let runs = match (&a.pcap, place) {
        (Some(_), Place::Lab(_)) => {
            return Err("--pcap is the simulator's capture; in the lab capture with tshark (`hollywood lab exec`)".into())
        }
        (None, Place::Lab(lab)) => run_lab_sessions(&session, &transports, &seeds, lab),
        (Some(p), Place::Sim) if transports.len() == 1 && seeds.len() == 1 => {
            let mut s = session.scenario(&transports[0], a.seed);
            s.pcap = Some(p.clone());
            vec![vec![s.run()]]
        }
        (Some(_), Place::Sim) => {
            return Err("--pcap captures one session: give one --transport and --seeds 1".into())
        }
        (None, Place::Sim) => run_all(&session, &transports, &seeds, &|| {}),
    };
    let summaries: Vec<TransportSummary> = transports
        .iter()
        .zip(&runs)
        .map(|(t, r)| summarise(t.name, r))
        .collect();
    let mut lines = Vec::new();
    for (t, rs) in transports.iter().zip(&runs) {
        for (seed, r) in seeds.iter().zip(rs) {
            lines.push(match r {
                Ok(r) => RunLine {
                    transport: t.name,
                    seed: *seed,
                    startup_s: r.client.startup_s,
                    total_stall_s: r.client.total_stall_s,
                    stalls: r.client.stalls,
                    avg_bitrate_kbps: r.client.avg_bitrate_kbps,
                    down_switch_pct: r.client.down_switch_pct,
                    messages_discarded: r.client.messages_discarded,
                    retransmitted_segments: r.retransmitted_segments,
                    error: r.client.error.clone(),
                },
                Err(e) => RunLine {
                    transport: t.name,
                    seed: *seed,
                    startup_s: None,
                    total_stall_s: f64::NAN,
                    stalls: 0,
                    avg_bitrate_kbps: f64::NAN,
                    down_switch_pct: f64::NAN,
                    messages_discarded: 0,
                    retransmitted_segments: 0,
                    error: Some(e.clone()),
                },
            });
        }
    }
    let mut scores = Vec::new();
    if !session.content.is_synthetic() {
        std::fs::create_dir_all(&a.received)
            .map_err(|e| format!("{}: {e}", a.received.display()))?;
        for (t, rs) in transports.iter().zip(&runs) {
            let Some(Ok(r)) = rs.first() else { continue };
            // The chunks played: up to the first whose head never came.
            let parts: Vec<&[u8]> = r
                .client
                .chunks
                .iter()
                .take_while(|c| c.size > 0)
                .map(|c| c.data())
                .collect();
            let ts = a.received.join(format!("{}-seed{}.ts", t.name, a.seed));
            let s = hollywood_experiments::dash::quality::score(
                std::path::Path::new(&a.video),
                &parts,
                &ts,
            )?;
            scores.push(VideoScore {
                transport: t.name,
                seed: a.seed,
                file: ts.display().to_string(),
                psnr_db: s.psnr_db,
                ssim: s.ssim,
                bytes_missing: r.client.bytes_missing,
            });
        }
    }
    if let Some(path) = &a.csv {
        write_csv(path, &transports, &seeds, &runs)?;
    }
    let failed = lines.iter().filter(|l| l.error.is_some()).count();
    let first_error = lines.iter().find_map(|l| l.error.clone());
    if a.json {
        let report = Report {
            rate_bps: a.rate,
            rtt_ms: a.rtt.as_secs_f64() * 1e3,
            loss: a.loss,
            chunks,
            chunk_s,
            buffer_s: a.p.buffer.as_secs_f64(),
            cc: a.p.cc.name(),
            abr: a.p.abr.name(),
            seeds,
            transports: &summaries,
            runs: lines,
            video_scores: scores,
        };
        println!("{}", crate::output::json(&report)?);
    } else {
        println!(
            "DASH, {} chunks of {chunk_s} s, {} Mb/s, RTT {:.0} ms, loss {:.2} %, B = {} s, {} + {}, {} seed(s)",
            chunks,
            a.rate as f64 / 1e6,
            a.rtt.as_secs_f64() * 1e3,
            a.loss * 100.0,
            a.p.buffer.as_secs_f64(),
            a.p.abr.name(),
            a.p.cc.name(),
            a.seeds
        );
        println!(
            "{:<10} {:>10} {:>13} {:>7} {:>13} {:>12} {:>10} {:>9}",
            "transport",
            "startup_s",
            "total_stall_s",
            "stalls",
            "avg_kbps",
            "down_switch%",
            "discarded",
            "rexmits"
        );
        for s in &summaries {
            println!(
                "{:<10} {:>10.2} {:>13.2} {:>7.1} {:>13.0} {:>12.2} {:>10.1} {:>9.0}",
                s.transport,
                s.startup_s.mean,
                s.total_stall_s.mean,
                s.stalls.mean,
                s.avg_bitrate_kbps.mean,
                s.down_switch_pct.mean,
                s.messages_discarded.mean,
                s.retransmitted_segments.mean
            );
        }
        for v in &scores {
            println!(
                "{} (seed {}): PSNR {:.2} dB, SSIM {:.4} against the source; {} bytes missing; {}",
                v.transport, v.seed, v.psnr_db, v.ssim, v.bytes_missing, v.file
            );
        }
        if a.seeds > 2 {
            println!("(means over seeds; trimmed means and 20th/80th percentiles with --json)");
        }
        for l in lines.iter().filter(|l| l.error.is_some()) {
            println!(
                "{} seed {}: {}",
                l.transport,
                l.seed,
                l.error.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(first) = first_error {
        return Err(format!("{failed} run(s) failed; the first: {first}"));
    }
    Ok(())
}

/// Every (transport, seed) session in a lab of its own, one after the
/// other (real time: running them side by side would share the CPU),
/// results grouped as [`run_all`]'s.
fn run_lab_sessions(
    session: &Session,
    transports: &[DashTransport],
    seeds: &[u64],
    lab: &str,
) -> Vec<Vec<Result<hollywood_media::dash::DashRun, String>>> {
    let mut index = 0;
    transports
        .iter()
        .map(|t| {
            seeds
                .iter()
                .map(|&s| {
                    let mut sc = session.scenario(t, s);
                    sc.client.keep_bytes &= Some(&s) == seeds.first();
                    let name = format!("{lab}-{index}");
                    index += 1;
                    hollywood_lab::dash::run(&sc, &name).map_err(|e| format!("{}: {e}", t.name))
                })
                .collect()
        })
        .collect()
}

fn write_csv(
    path: &PathBuf,
    transports: &[DashTransport],
    seeds: &[u64],
    runs: &[Vec<Result<hollywood_media::dash::DashRun, String>>],
) -> Result<(), String> {
    let mut w = csv::Writer::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    w.write_record([
        "transport",
        "seed",
        "chunk",
        "quality",
        "bitrate_bps",
        "requested_s",
        "downloaded_s",
        "complete_s",
        "size",
        "received",
        "late_messages",
    ])
    .map_err(|e| e.to_string())?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.6}"));
    for (t, rs) in transports.iter().zip(runs) {
        for (seed, r) in seeds.iter().zip(rs) {
            let Ok(r) = r else { continue };
            for c in &r.client.chunks {
                w.write_record([
                    t.name.to_string(),
                    seed.to_string(),
                    c.n.to_string(),
                    c.quality.to_string(),
                    c.bitrate_bps.to_string(),
                    format!("{:.6}", c.requested_s),
                    opt(c.downloaded_s),
                    opt(c.complete_s),
                    c.size.to_string(),
                    c.received.to_string(),
                    c.late_messages.to_string(),
                ])
                .map_err(|e| e.to_string())?;
            }
        }
    }
    w.flush().map_err(|e| e.to_string())
}
