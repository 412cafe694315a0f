//! `hollywood video`: live video (the [QUICsilver-2019] synthetic source by default)
//! over one or several transports on the same simulated link and seed:
//! useful frames, stalls, playback discrepancy and per-packet latency
//! (`hollywood_media::video`).

use crate::cmd::messages::{parse_choices, Choices};
use crate::units::parse_rate;
use clap::Args;
use hollywood_experiments::media;
use hollywood_experiments::video::{Spelling, VideoParams, VideoReport};
use hollywood_media::video::{decodable_ever, Reference};
use hollywood_media::GenericTransport;

/// A working directory for real video, removed on drop unless kept.
struct WorkDir {
    path: std::path::PathBuf,
    remove: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn parse_picture(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once('x')
        .ok_or_else(|| format!("picture '{s}': write WIDTHxHEIGHT, e.g. 320x240"))?;
    let n = |v: &str| {
        v.parse::<u32>()
            .map_err(|_| format!("picture '{s}': write WIDTHxHEIGHT, e.g. 320x240"))
    };
    Ok((n(w)?, n(h)?))
}

/// Arguments of `hollywood video`.
#[derive(Args, Debug)]
pub struct VideoArgs {
    /// tcp | hollywood | hollywood-ir | hollywood-ooo | quic-ss | quic-gop |
    /// quic-fps | quic-pps | quic-dgram | quicsilver | udp; several,
    /// comma-separated, or `all`: same link and seed, one table.
    #[arg(long, default_value = "hollywood", value_parser = parse_choices)]
    transport: Choices,
    /// The stream, the path and the player.
    #[command(flatten)]
    params: VideoParams,
    /// synthetic (the [QUICsilver-2019] packet counts), testsrc (ffmpeg's test
    /// pattern) or a video file: real video is encoded with libx264 (fixed
    /// GOP, no B-frames, no scene cuts), its frames sent as messages of
    /// their sizes, what arrived in time decoded and scored (PSNR, SSIM).
    #[arg(long, default_value = "synthetic")]
    source: String,
    /// Real video: picture size.
    #[arg(long, default_value = "320x240", value_parser = parse_picture)]
    picture: (u32, u32),
    /// Real video: encoder bit rate.
    #[arg(long, default_value = "1mbit", value_parser = parse_rate)]
    bitrate: u64,
    /// Real video: keep the encoded clip and working files here (default:
    /// a temporary directory, removed afterwards).
    #[arg(long)]
    workdir: Option<std::path::PathBuf>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write one CSV row per packet (and transport) here, as
    /// `sim messages --csv` (id = packet; frames in send order).
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// Write the sender's packets (at link ingress) to this pcap file (one
    /// transport only).
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
    /// Real packets (root): run each transport over a fresh two-host lab of
    /// this name (NAME-0, NAME-1, ...) whose user-space emulator runs the
    /// same link model (`hollywood lab messages`); no cross traffic.
    #[arg(long)]
    lab: Option<String>,
}

pub fn run(a: VideoArgs) -> Result<(), String> {
    let p = &a.params;
    let real = match a.source.as_str() {
        "synthetic" => None,
        other => Some(media::Input::parse(other)),
    };
    // The stream's checks (size first) before the lab's.
    let source = p.source(real.is_some(), Spelling::Cli)?;
    if let Some(name) = &a.lab {
        hollywood_lab::topology::check_name(name).map_err(|e| e.to_string())?;
        if !p.cross.is_empty() {
            return Err("--cross runs in the simulator only (the lab has two hosts)".into());
        }
        if (p.size as usize) < hollywood_lab::workload::MIN_PAYLOAD {
            return Err(format!(
                "--size must be at least {} bytes on real packets (a packet carries its id)",
                hollywood_lab::workload::MIN_PAYLOAD
            ));
        }
    }
    let duration = p.length(real.is_some());
    // Real video: encode once, the same clip for every transport.
    let work = match (&real, &a.workdir) {
        (None, _) => None,
        (Some(_), Some(d)) => Some(WorkDir {
            path: d.clone(),
            remove: false,
        }),
        (Some(_), None) => Some(WorkDir {
            path: std::env::temp_dir().join(format!("hollywood-video-{}", std::process::id())),
            remove: true,
        }),
    };
    let clip = match (&real, &work) {
        (Some(input), Some(w)) => Some(media::encode(
            input,
            &media::Encoding {
                width: a.picture.0,
                height: a.picture.1,
                fps: p.fps,
                seconds: duration.as_secs_f64(),
                gop: p.gop,
                bitrate: a.bitrate,
            },
            &w.path,
        )?),
        _ => None,
    };
    let encoded_quality = match &clip {
        Some(c) => {
            let all = vec![true; c.frames.len()];
            Some(c.score(&all, &all, "encoded")?)
        }
        None => None,
    };
    if a.pcap.is_some() && a.transport.0.len() > 1 {
        return Err("--pcap needs a single transport".into());
    }
    let mut csv = crate::cmd::messages::open_csv(a.csv.as_deref())?;
    let mut reports = Vec::new();
    for (index, choice) in a.transport.0.iter().enumerate() {
        let mut sc = p.scenario(
            &GenericTransport::from(*choice),
            a.seed,
            real.is_some(),
            Spelling::Cli,
        )?;
        sc.path.pcap = a.pcap.clone();
        sc.trace = clip.as_ref().map(media::Clip::trace);
        #[allow(clippy::disallowed_methods)] // wall time of the run, reported as such
        let wall = std::time::Instant::now();
        let run = match &a.lab {
            None => sc.run()?,
            Some(name) => {
                let lab = format!("{name}-{index}");
                sc.run_with(|m| hollywood_lab::messages::run(m, &lab).map_err(|e| e.to_string()))?
            }
        };
        if let Some(w) = &mut csv {
            crate::cmd::messages::write_csv_rows(w, choice.name(), &run.messages)
                .map_err(|e| e.to_string())?;
        }
        let mut report = VideoReport::of(
            choice.name(),
            &run,
            a.seed,
            wall.elapsed().as_secs_f64() * 1000.0,
        );
        if let Some(c) = &clip {
            let mut shown: Vec<bool> = run.fates.iter().map(|f| f.useful).collect();
            shown.resize(c.frames.len(), false);
            let mut decodable = decodable_ever(&run.frames, Reference::Previous);
            decodable.resize(c.frames.len(), false);
            report.quality = Some(c.score(&decodable, &shown, choice.name())?);
            report.encoded_quality = encoded_quality;
        }
        reports.push(report);
    }
    if a.json {
        let text = if let [one] = reports.as_slice() {
            crate::output::json(one)
        } else {
            crate::output::json(&reports)
        };
        println!("{}", text?);
    } else {
        let frames_text = match &clip {
            Some(c) => {
                let packets: u64 = c
                    .frames
                    .iter()
                    .map(|f| f.len.div_ceil(p.size as usize).max(1) as u64)
                    .sum();
                format!(
                    "{} frames of {} at {} fps, I-frame every {}, {packets} packets of up to {} B",
                    c.frames.len(),
                    a.source,
                    p.fps,
                    p.gop,
                    p.size
                )
            }
            None => format!(
                "{} frames at {} fps, I-frame every {} ({} packets), P-frames {} packet(s) of {} B",
                source.frames,
                p.fps,
                p.gop,
                p.iframe_packets,
                match p.pframe_packets_max {
                    Some(m) if m > p.pframe_packets => format!("{}-{m}", p.pframe_packets),
                    _ => p.pframe_packets.to_string(),
                },
                p.size
            ),
        };
        println!(
            "video: {frames_text}; one-way {} ms, {} Mb/s, loss {}; buffer {} frames; seed {}",
            p.one_way.as_secs_f64() * 1000.0,
            p.rate as f64 / 1e6,
            p.loss,
            p.buffer,
            a.seed
        );
        println!(
            "{:<14} {:>6} {:>9} {:>7} {:>7} {:>14} {:>14} {:>22}",
            "transport",
            "player",
            "useful %",
            "skipped",
            "stalls",
            "discrepancy s",
            "pkts on time",
            "latency ms p50/p99/max"
        );
        for r in &reports {
            println!(
                "{:<14} {:>6} {:>9.3} {:>7} {:>7} {:>14.3} {:>6} ({:>5}) {:>8.1}/{:.1}/{:.1}",
                r.transport,
                r.player,
                r.useful_frames_pct,
                r.skipped,
                r.stalls,
                r.discrepancy_s,
                r.packets_on_time,
                r.oracle_packets_on_time,
                r.app_latency_ms.p50,
                r.app_latency_ms.p99,
                r.app_latency_ms.max
            );
        }
        println!("(pkts on time: delivered by the frame's deadline; oracle in brackets)");
        if let Some(c) = &clip {
            let db = |q: &media::Quality| {
                q.psnr_db
                    .map_or("inf".to_string(), |p| format!("{p:.2} dB"))
            };
            println!(
                "picture ({}, {}x{}, {} frames, {} kbit/s H.264; useful frames shown, the rest concealed by the last one shown):",
                a.source,
                c.enc.width,
                c.enc.height,
                c.frames.len(),
                a.bitrate / 1000
            );
            if let Some(q) = &encoded_quality {
                println!(
                    "  {:<14} PSNR {:>9}  SSIM {:.4}",
                    "(encoded)",
                    db(q),
                    q.ssim
                );
            }
            for r in &reports {
                if let Some(q) = &r.quality {
                    println!(
                        "  {:<14} PSNR {:>9}  SSIM {:.4}",
                        r.transport,
                        db(q),
                        q.ssim
                    );
                }
            }
        }
    }
    for r in &reports {
        if let Some(e) = &r.error {
            return Err(format!("{}: the connection failed: {e}", r.transport));
        }
        if r.corrupt_or_duplicate > 0 {
            return Err(format!("{}: corrupt or duplicate delivery", r.transport));
        }
    }
    Ok(())
}
