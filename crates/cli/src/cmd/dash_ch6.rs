//! `hollywood dash-ch6`: thesis chapter 6's DASH architectures at a fixed
//! encoding rate — request-response, progressive server push over TCP,
//! progressive over TCP Hollywood — frame by frame: total stall,
//! delayed-frame duration, skip duration.

use crate::units::{parse_duration, parse_rate};
use clap::Args;
use hollywood_experiments::ch6::Ch6Params;
use hollywood_experiments::dash::sessions::{run_ch6, Agg};
use hollywood_experiments::units::Spelling;
use hollywood_media::dash::progressive::{Arch, Ch6Run, Ch6Scenario};
use serde::Serialize;
use std::sync::Arc;

/// Arguments of `hollywood dash-ch6`.
#[derive(Args, Debug)]
pub struct Ch6Args {
    /// Architectures, comma-separated: request-response, push, hollywood.
    #[arg(long, default_value = "request-response,push,hollywood")]
    arch: String,
    /// Encoding rates, comma-separated (thesis: 7.5mbit,12mbit,24mbit,53mbit).
    #[arg(long, default_value = "7.5mbit,12mbit,24mbit")]
    encoding: String,
    /// Round-trip times, comma-separated (thesis: 25ms,100ms).
    #[arg(long, default_value = "25ms,100ms")]
    rtt: String,
    /// Request-response: frames per chunk (= the buffer; thesis: 3 to 30).
    #[arg(long, default_value_t = 30)]
    chunk_frames: u32,
    /// Progressive: frames buffered before playback (1 s chunks).
    #[arg(long, default_value_t = 10)]
    buffer_frames: u32,
    /// Real frame sizes: a directory `hollywood dash-ch6-video` wrote (its
    /// GOP must be the chunk: `--fps` frames for push and Hollywood,
    /// `--chunk-frames` for request-response). Default: synthetic sizes.
    #[arg(long)]
    video: Option<std::path::PathBuf>,
    /// The session: bottleneck rate, loss, length, fps, synthetic
    /// frame sizes, congestion control.
    #[command(flatten)]
    p: Ch6Params,
    /// Hollywood: send every frame reliably, without the lifetime of its
    /// playout deadline (the thesis's §6.3 text names no lifetimes).
    #[arg(long)]
    reliable: bool,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds (thesis: 5 runs).
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write the session's packets (both directions) to this pcap file;
    /// only for a single session (one architecture, encoding, RTT and
    /// seed). `tshark -X lua_script:tools/wireshark/hollywood.lua -r FILE`
    /// dissects the HTTP/2 inside (docs/DASH.md).
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct Row {
    arch: Arch,
    encoding_bps: u64,
    rtt_ms: f64,
    runs: usize,
    total_stall_s: Agg,
    delayed_frame_s: Agg,
    skip_s: Agg,
    stalls: Agg,
    late_frames: Agg,
    errors: Vec<String>,
}

#[derive(Serialize)]
struct Report {
    rate_bps: u64,
    loss: f64,
    chunk_frames: u32,
    buffer_frames: u32,
    duration_s: f64,
    /// The real video (`dash-ch6-video`), or none (synthetic sizes).
    video: Option<String>,
    fps: u32,
    cc: &'static str,
    seeds: Vec<u64>,
    rows: Vec<Row>,
}

fn list<T>(s: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',').map(|x| f(x.trim())).collect()
}

pub fn run(a: Ch6Args) -> Result<(), String> {
    let archs = list(&a.arch, Arch::parse)?;
    let encodings = list(&a.encoding, parse_rate)?;
    let rtts = list(&a.rtt, parse_duration)?;
    if a.seeds == 0 || a.seeds > 1000 {
        return Err("--seeds: use 1 to 1000".into());
    }
    if a.chunk_frames == 0 || a.buffer_frames == 0 {
        return Err("--chunk-frames and --buffer-frames: at least 1".into());
    }
    a.p.validate(Spelling::Cli)?;
    let last = a
        .seed
        .checked_add(a.seeds)
        .ok_or("--seed + --seeds overflows")?;
    let seeds: Vec<u64> = (a.seed..last).collect();
    let mut keys = Vec::new();
    let mut scenarios = Vec::new();
    for &arch in &archs {
        let cf = a.p.chunk_frames(arch, a.chunk_frames);
        for &enc in &encodings {
            let video = Arc::new(match &a.video {
                Some(dir) => {
                    let v = super::dash_video::load_ch6(dir, enc, cf)?;
                    if v.fps != a.p.fps {
                        return Err(format!(
                            "{} is at {} fps: give --fps {}",
                            dir.display(),
                            v.fps,
                            v.fps
                        ));
                    }
                    v
                }
                None => a.p.video(enc, cf)?,
            });
            for &rtt in &rtts {
                keys.push((arch, enc, rtt));
                for &seed in &seeds {
                    scenarios.push(Ch6Scenario {
                        pcap: a.pcap.clone(),
                        ..a.p
                            .scenario(arch, video.clone(), a.buffer_frames, rtt, seed, !a.reliable)
                    });
                }
            }
        }
    }
    if a.pcap.is_some() && scenarios.len() != 1 {
        return Err(format!(
            "--pcap captures one session; this asks for {} (give one --arch, --encoding and --rtt, and --seeds 1)",
            scenarios.len()
        ));
    }
    let results = run_ch6(&scenarios, &|| {});
    let rows: Vec<Row> = keys
        .iter()
        .zip(results.chunks(seeds.len()))
        .map(|(&(arch, enc, rtt), rs)| {
            let ok: Vec<&Ch6Run> = rs
                .iter()
                .filter_map(|r| r.as_ref().ok())
                .filter(|r| r.report.error.is_none())
                .collect();
            let mut errors: Vec<String> = rs
                .iter()
                .filter_map(|r| r.as_ref().err().cloned())
                .collect();
            errors.extend(
                rs.iter()
                    .filter_map(|r| r.as_ref().ok()?.report.error.clone()),
            );
            let m =
                |f: &dyn Fn(&Ch6Run) -> f64| Agg::of(&ok.iter().map(|r| f(r)).collect::<Vec<_>>());
            Row {
                arch,
                encoding_bps: enc,
                rtt_ms: rtt.as_secs_f64() * 1e3,
                runs: ok.len(),
                total_stall_s: m(&|r| r.report.total_stall_s),
                delayed_frame_s: m(&|r| r.report.delayed_frame_s),
                skip_s: m(&|r| r.report.skip_s),
                stalls: m(&|r| r.report.stalls as f64),
                late_frames: m(&|r| r.report.late_frames as f64),
                errors,
            }
        })
        .collect();
    let first_error = rows.iter().find_map(|r| r.errors.first().cloned());
    // A real video plays its own length.
    let duration_s = scenarios.first().map_or(a.p.duration.as_secs_f64(), |s| {
        s.video.frames() as f64 / f64::from(s.video.fps)
    });
    if a.json {
        let report = Report {
            rate_bps: a.p.rate,
            loss: a.p.loss,
            chunk_frames: a.chunk_frames,
            buffer_frames: a.buffer_frames,
            duration_s,
            video: a.video.as_ref().map(|p| p.display().to_string()),
            fps: a.p.fps,
            cc: a.p.cc.name(),
            seeds,
            rows,
        };
        println!("{}", crate::output::json(&report)?);
    } else {
        println!(
            "thesis ch. 6: {} s of {} video at {} fps over {} Mb/s, loss {:.2} %, {}; request-response chunks of {} frames, progressive buffer {} frames; {} seed(s)",
            duration_s,
            a.video.as_ref().map_or("synthetic".to_string(), |p| p.display().to_string()),
            a.p.fps,
            a.p.rate as f64 / 1e6,
            a.p.loss * 100.0,
            a.p.cc.name(),
            a.chunk_frames,
            a.buffer_frames,
            a.seeds
        );
        println!(
            "{:<17} {:>9} {:>7} {:>13} {:>16} {:>9}",
            "architecture", "encoding", "rtt_ms", "total_stall_s", "delayed_frame_s", "skip_s"
        );
        for r in &rows {
            if r.runs == 0 {
                println!(
                    "{:<17} {:>8.1}M {:>7.0}   no run finished: {}",
                    r.arch.name(),
                    r.encoding_bps as f64 / 1e6,
                    r.rtt_ms,
                    r.errors.first().map_or("", String::as_str)
                );
                continue;
            }
            println!(
                "{:<17} {:>8.1}M {:>7.0} {:>13.2} {:>16.2} {:>9.2}",
                r.arch.name(),
                r.encoding_bps as f64 / 1e6,
                r.rtt_ms,
                r.total_stall_s.mean,
                r.delayed_frame_s.mean,
                r.skip_s.mean
            );
        }
    }
    if let Some(e) = first_error {
        return Err(format!("a run failed: {e}"));
    }
    Ok(())
}
