//! Real video for `hollywood dash`: `hollywood dash-ladder` encodes a
//! source with ffmpeg into the [DASHing-2018] ladder (eight representations at
//! 1200–5600 kb/s, H.264, 1 s chunks each starting with an I-frame,
//! MPEG-TS) with its MPD, and scores each representation frame by frame
//! against the source (the [DASHing-2018] Table 1;
//! [`hollywood_experiments::dash::quality`] decodes and scores what clients
//! received).

use crate::units::parse_duration;
use clap::Args;
use hollywood_media::dash::content::{Content, Representation, DASHING_LADDER};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Arguments of `hollywood dash-ladder`.
#[derive(Args, Debug)]
pub struct LadderArgs {
    /// Output directory (manifest.mpd, source.txt, rep1/0.ts, ...).
    #[arg(long)]
    out: PathBuf,
    /// Length of the video.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Picture size ([DASHing-2018]: 1920x1080; 1280x720 encodes about 2× faster).
    #[arg(long, default_value = "1280x720")]
    size: String,
    /// Frames per second.
    #[arg(long, default_value_t = 30)]
    fps: u32,
    /// The source: a video file, `testsrc2` (ffmpeg's synthetic pattern)
    /// or `testsrc2-grain` (the pattern with film grain: as hard to encode
    /// as camera video, where testsrc2 alone encodes nearly losslessly
    /// above 3 Mb/s at 640x360).
    #[arg(long, default_value = "testsrc2")]
    source: String,
    /// Only the lowest N representations (faster; default all eight).
    #[arg(long, default_value_t = 8)]
    reps: usize,
    /// Constant bit rate: x264 pads each representation to its rate
    /// (HRD filler), so every rung keeps its place on the ladder even where
    /// the source is too simple to need the bits (testsrc2 below 720p).
    #[arg(long)]
    cbr: bool,
}

/// The ffmpeg input arguments of the source, as `source.txt` stores them.
fn source_args(source: &str, size: &str, fps: u32, duration: Duration) -> Vec<String> {
    let secs = duration.as_secs_f64();
    if source == "testsrc2" || source == "testsrc2-grain" {
        // Film grain (temporal noise, deterministic: the filter's seed is
        // fixed) makes the pattern as hard to encode as camera video.
        let grain = if source == "testsrc2-grain" {
            ",noise=alls=8:allf=t"
        } else {
            ""
        };
        vec![
            "-f".into(),
            "lavfi".into(),
            "-i".into(),
            format!("testsrc2=size={size}:rate={fps}:duration={secs}{grain}"),
        ]
    } else {
        vec!["-t".into(), format!("{secs}"), "-i".into(), source.into()]
    }
}

fn ffmpeg(args: &[String]) -> Result<std::process::Output, String> {
    let mut all = vec!["-hide_banner".to_string(), "-nostdin".into()];
    all.extend_from_slice(args);
    hollywood_experiments::media::tool("ffmpeg", &all)
}

pub fn ladder(a: LadderArgs) -> Result<(), String> {
    let (w, h) = a
        .size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|&(w, h)| {
            (16..=7680).contains(&w) && (16..=4320).contains(&h) && w % 2 == 0 && h % 2 == 0
        })
        .ok_or_else(|| {
            format!(
                "--size {}: write WxH with even numbers, e.g. 1280x720",
                a.size
            )
        })?;
    if !(1..=120).contains(&a.fps) {
        return Err("--fps: use 1 to 120".into());
    }
    let chunks = a.duration.as_secs();
    if chunks == 0 || a.duration.subsec_nanos() != 0 || chunks > 3600 {
        return Err("--duration: whole seconds, 1 s to 1 h (1 s chunks)".into());
    }
    if a.reps == 0 || a.reps > DASHING_LADDER.len() {
        return Err(format!("--reps: use 1 to {}", DASHING_LADDER.len()));
    }
    if a.source != "testsrc2" && a.source != "testsrc2-grain" && !Path::new(&a.source).is_file() {
        return Err(format!("--source {}: no such file", a.source));
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let input = source_args(&a.source, &a.size, a.fps, a.duration);
    let mut reps = Vec::new();
    for (i, &(enc, chunk_kbps)) in DASHING_LADDER.iter().take(a.reps).enumerate() {
        let id = format!("rep{}", i + 1);
        let dir = a.out.join(&id);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut args = vec!["-loglevel".to_string(), "error".into(), "-y".into()];
        args.extend(input.iter().cloned());
        let gop = a.fps.to_string();
        for x in [
            "-an", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
        ] {
            args.push(x.into());
        }
        if a.cbr {
            args.extend([
                "-minrate".into(),
                format!("{enc}k"),
                "-x264-params".into(),
                "nal-hrd=cbr".into(),
            ]);
        }
        args.extend([
            "-vf".into(),
            format!("scale={w}:{h},fps={}", a.fps),
            "-b:v".into(),
            format!("{enc}k"),
            "-maxrate".into(),
            format!("{enc}k"),
            "-bufsize".into(),
            format!("{enc}k"),
            "-g".into(),
            gop.clone(),
            "-keyint_min".into(),
            gop,
            "-sc_threshold".into(),
            "0".into(),
            "-force_key_frames".into(),
            "expr:gte(t,n_forced*1)".into(),
            "-f".into(),
            "segment".into(),
            "-segment_time".into(),
            "1".into(),
            "-segment_format".into(),
            "mpegts".into(),
            "-segment_start_number".into(),
            "0".into(),
            "-reset_timestamps".into(),
            "0".into(),
            dir.join("%d.ts").display().to_string(),
        ]);
        eprintln!("encoding {id} at {enc} kb/s ...");
        ffmpeg(&args)?;
        let made = std::fs::read_dir(&dir).map_err(|e| e.to_string())?.count() as u64;
        if made != chunks {
            return Err(format!(
                "{id}: ffmpeg wrote {made} chunks, expected {chunks}"
            ));
        }
        reps.push(Representation {
            id,
            bandwidth_bps: enc * 1000,
            chunk_bps: chunk_kbps * 1000,
            width: w,
            height: h,
        });
    }
    // The MPD only needs the ladder, the chunk duration and the count.
    let shape = Content::synthetic(
        "video",
        reps,
        chunks as usize,
        Duration::from_secs(1),
        0.0,
        1,
    )?;
    std::fs::write(a.out.join("manifest.mpd"), shape.mpd()).map_err(|e| e.to_string())?;
    std::fs::write(a.out.join("source.txt"), input.join("\n") + "\n").map_err(|e| e.to_string())?;
    // What the encoder did to the source, for the comparison.
    std::fs::write(
        a.out.join("source-filter.txt"),
        format!("scale={w}:{h},fps={}\n", a.fps),
    )
    .map_err(|e| e.to_string())?;
    // Check it loads as the server will.
    let c = Content::from_dir(&a.out)?;
    // Each representation against the source, frame by frame ([DASHing-2018]'s
    // Table 1); `repro dash2018 --video` reads these instead of decoding
    // every intact chunk again.
    let _ = std::fs::remove_dir_all(a.out.join("quality"));
    eprintln!("scoring each representation against the source ...");
    let lq = hollywood_experiments::dash::quality::LadderQuality::load_or_compute(&a.out, &c)?;
    for ((r, &(enc, seed_chunk)), s) in c.reps.iter().zip(DASHING_LADDER.iter()).zip(&lq.reps) {
        let m = s.mean();
        println!(
            "{}: {enc} kb/s encoded, {} kb/s of chunks ([DASHing-2018]: {seed_chunk}), PSNR {:.2} dB, SSIM {:.4}",
            r.id,
            r.chunk_bps / 1000,
            m.psnr_db,
            m.ssim
        );
        if (r.chunk_bps as f64) < 0.85 * (seed_chunk * 1000) as f64 {
            eprintln!(
                "warning: {} carries {} kb/s, well under the ladder's {seed_chunk}: the source needs fewer bits at {}; use --cbr or a larger --size",
                r.id,
                r.chunk_bps / 1000,
                a.size
            );
        }
    }
    println!(
        "{}: {} representations × {} chunks; mean chunk rates {} kb/s",
        a.out.display(),
        c.reps.len(),
        c.chunks(),
        c.reps
            .iter()
            .map(|r| (r.chunk_bps / 1000).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// Arguments of `hollywood dash-ch6-video`.
#[derive(Args, Debug)]
pub struct Ch6VideoArgs {
    /// Output directory (ch6.json and one MP4 per encoding).
    #[arg(long)]
    out: PathBuf,
    /// Encoding rates, comma-separated (thesis: 7.5mbit,12mbit,24mbit,53mbit).
    #[arg(long, default_value = "7.5mbit,12mbit,24mbit,53mbit")]
    encoding: String,
    /// One picture size for every encoding (default: the thesis's,
    /// 1280x720, 1920x1080, 2560x1440 and 3840x2160 by rate).
    #[arg(long)]
    size: Option<String>,
    /// Length of the video (thesis: 180s).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    duration: Duration,
    /// Frames per second (thesis: 60).
    #[arg(long, default_value_t = 60)]
    fps: u32,
    /// Frames from one I-frame to the next = the chunk length a session
    /// can use (progressive: `--fps`, 1 s chunks; request-response: its
    /// `--chunk-frames`).
    #[arg(long)]
    gop: Option<u32>,
    /// The source: a video file, `testsrc2` (ffmpeg's synthetic pattern)
    /// or `testsrc2-grain` (the pattern with film grain: as hard to encode
    /// as camera video, where testsrc2 alone encodes nearly losslessly
    /// above 3 Mb/s at 640x360).
    #[arg(long, default_value = "testsrc2")]
    source: String,
}

/// What `dash-ch6-video` wrote: per encoding, the size of every frame in
/// decoding order (`ch6.json`).
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Ch6Video {
    /// Frames per second.
    pub fps: u32,
    /// Frames per GOP (an I-frame every `gop` frames, from the first).
    pub gop: u32,
    /// ffmpeg's input arguments.
    pub source: Vec<String>,
    /// The encodings.
    pub encodings: Vec<Ch6Encoding>,
}

/// One encoding of [`Ch6Video`].
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Ch6Encoding {
    /// Target rate (bit/s).
    pub bps: u64,
    /// Picture size.
    pub size: String,
    /// The MP4, relative to the directory.
    pub file: String,
    /// Bytes of each frame, in decoding order.
    pub frames: Vec<u32>,
}

/// The thesis's picture size for an encoding rate (REFERENCES.md thesis ch. 6, setup).
fn thesis_size(bps: u64) -> &'static str {
    match bps {
        0..=9_000_000 => "1280x720",
        9_000_001..=18_000_000 => "1920x1080",
        18_000_001..=36_000_000 => "2560x1440",
        _ => "3840x2160",
    }
}

fn parse_size(size: &str) -> Result<(u32, u32), String> {
    size.split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|&(w, h)| {
            (16..=7680).contains(&w) && (16..=4320).contains(&h) && w % 2 == 0 && h % 2 == 0
        })
        .ok_or_else(|| format!("--size {size}: write WxH with even numbers, e.g. 1280x720"))
}

/// `hollywood dash-ch6-video`: encode the thesis's fixed-rate videos
/// (H.264, I- and P-frames only, an I-frame every `gop` frames, 60 fps)
/// and record every frame's size for `dash-ch6 --video DIR`.
pub fn ch6_video(a: Ch6VideoArgs) -> Result<(), String> {
    if !(1..=240).contains(&a.fps) {
        return Err("--fps: use 1 to 240".into());
    }
    let gop = a.gop.unwrap_or(a.fps);
    if gop == 0 || gop > 60 * a.fps {
        return Err("--gop: use 1 to a minute's worth of frames".into());
    }
    let secs = a.duration.as_secs_f64();
    if !(1.0..=3600.0).contains(&secs) {
        return Err("--duration: 1 s to 1 h".into());
    }
    if a.source != "testsrc2" && a.source != "testsrc2-grain" && !Path::new(&a.source).is_file() {
        return Err(format!("--source {}: no such file", a.source));
    }
    let rates = a
        .encoding
        .split(',')
        .map(|r| crate::units::parse_rate(r.trim()))
        .collect::<Result<Vec<u64>, _>>()?;
    if let Some(s) = &a.size {
        parse_size(s)?;
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let frames_wanted = (secs * f64::from(a.fps)).round() as usize;
    let mut encodings = Vec::new();
    let mut source = Vec::new();
    for bps in rates {
        let size = a.size.clone().unwrap_or_else(|| thesis_size(bps).into());
        let (w, h) = parse_size(&size)?;
        // The source at the encoding's size (testsrc2 draws at any size).
        source = source_args(&a.source, &size, a.fps, a.duration);
        let file = format!("{}k.mp4", bps / 1000);
        let kbps = bps / 1000;
        let mut args = vec!["-loglevel".to_string(), "error".into(), "-y".into()];
        args.extend(source.iter().cloned());
        for x in [
            "-an", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-bf", "0",
        ] {
            args.push(x.into());
        }
        args.extend([
            "-vf".into(),
            format!("scale={w}:{h},fps={}", a.fps),
            "-b:v".into(),
            format!("{kbps}k"),
            "-maxrate".into(),
            format!("{kbps}k"),
            "-bufsize".into(),
            format!("{kbps}k"),
            "-g".into(),
            gop.to_string(),
            "-keyint_min".into(),
            gop.to_string(),
            "-sc_threshold".into(),
            "0".into(),
            a.out.join(&file).display().to_string(),
        ]);
        eprintln!("encoding {size} at {kbps} kb/s, {} fps ...", a.fps);
        ffmpeg(&args)?;
        let probe = Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v:0"])
            .args(["-show_entries", "packet=size,flags", "-of", "csv=p=0"])
            .arg(a.out.join(&file))
            .output()
            .map_err(|e| format!("cannot run ffprobe ({e}): it comes with ffmpeg"))?;
        if !probe.status.success() {
            return Err(format!(
                "ffprobe failed: {}",
                String::from_utf8_lossy(&probe.stderr)
            ));
        }
        let mut frames = Vec::new();
        for (i, line) in String::from_utf8_lossy(&probe.stdout).lines().enumerate() {
            let (size, flags) = line
                .split_once(',')
                .ok_or_else(|| format!("ffprobe line {line:?}"))?;
            let size: u32 = size.parse().map_err(|_| format!("ffprobe size {size:?}"))?;
            // The chunking relies on an I-frame exactly every gop frames.
            if flags.starts_with('K') != (i as u32).is_multiple_of(gop) {
                return Err(format!(
                    "{file}: frame {i} is {} an I-frame; the encoder did not keep a GOP of {gop}",
                    if flags.starts_with('K') { "" } else { "not" }
                ));
            }
            frames.push(size);
        }
        if frames.len() != frames_wanted {
            return Err(format!(
                "{file}: {} frames, expected {frames_wanted}",
                frames.len()
            ));
        }
        let got = frames.iter().map(|&b| u64::from(b)).sum::<u64>() as f64 * 8.0 / secs;
        eprintln!("  {} frames, {:.2} Mb/s", frames.len(), got / 1e6);
        encodings.push(Ch6Encoding {
            bps,
            size,
            file,
            frames,
        });
    }
    // The MPD (one representation per encoding, a segment per GOP), as
    // for the [DASHing-2018] ladder; the sessions themselves read ch6.json.
    let mut reps: Vec<Representation> = encodings
        .iter()
        .map(|e| {
            let (w, h) = parse_size(&e.size).expect("checked above");
            let bytes: u64 = e.frames.iter().map(|&b| u64::from(b)).sum();
            Representation {
                id: format!("{}k", e.bps / 1000),
                bandwidth_bps: e.bps,
                chunk_bps: (bytes as f64 * 8.0 / secs) as u64,
                width: w,
                height: h,
            }
        })
        .collect();
    reps.sort_by_key(|r| r.bandwidth_bps);
    reps.dedup_by_key(|r| r.bandwidth_bps);
    let chunk = Duration::from_secs_f64(f64::from(gop) / f64::from(a.fps));
    let chunks = (frames_wanted as u64).div_ceil(u64::from(gop)) as usize;
    match Content::synthetic("video", reps, chunks, chunk, 0.0, 1) {
        Ok(shape) => {
            std::fs::write(a.out.join("manifest.mpd"), shape.mpd()).map_err(|e| e.to_string())?
        }
        Err(e) => eprintln!("no manifest.mpd: {e}"),
    }
    let v = Ch6Video {
        fps: a.fps,
        gop,
        source,
        encodings,
    };
    let json = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    std::fs::write(a.out.join("ch6.json"), json + "\n").map_err(|e| e.to_string())?;
    println!(
        "{}: {} encodings of {} frames at {} fps, GOP {gop}",
        a.out.display(),
        v.encodings.len(),
        frames_wanted,
        a.fps
    );
    Ok(())
}

/// The encoding of `bps` in `dash-ch6-video`'s directory `dir`, as a
/// [`FrameVideo`](hollywood_media::dash::progressive::FrameVideo) of chunks of
/// `chunk_frames` (which must be the encoding's GOP: each chunk starts
/// with its I-frame).
pub fn load_ch6(
    dir: &Path,
    bps: u64,
    chunk_frames: u32,
) -> Result<hollywood_media::dash::progressive::FrameVideo, String> {
    let path = dir.join("ch6.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (made by `hollywood dash-ch6-video --out DIR`)",
            path.display()
        )
    })?;
    let v: Ch6Video =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if chunk_frames != v.gop {
        return Err(format!(
            "{}: encoded with an I-frame every {} frames, but the session needs chunks of {chunk_frames} (encode again with --gop {chunk_frames})",
            dir.display(),
            v.gop
        ));
    }
    let e = v.encodings.iter().find(|e| e.bps == bps).ok_or_else(|| {
        format!(
            "{}: no encoding at {bps} bit/s (there are {})",
            dir.display(),
            v.encodings
                .iter()
                .map(|e| e.bps.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    hollywood_media::dash::progressive::FrameVideo::from_sizes(v.fps, chunk_frames, &e.frames)
}
