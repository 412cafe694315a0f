//! Real video for `hollywood dash`: `hollywood dash-ladder` encodes a
//! source with ffmpeg into seed 001's ladder (eight representations at
//! 1200–5600 kb/s, H.264, 1 s chunks each starting with an I-frame,
//! MPEG-TS) with its MPD; [`score`] decodes what a client received (late
//! and lost messages missing) and scores it with ffmpeg's PSNR and SSIM
//! against the source.

use crate::units::parse_duration;
use clap::Args;
use hollywood_apps::dash::content::{Content, Representation, SEED001_LADDER};
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
    /// Picture size (seed 001: 1920x1080; 1280x720 encodes about 2× faster).
    #[arg(long, default_value = "1280x720")]
    size: String,
    /// Frames per second.
    #[arg(long, default_value_t = 30)]
    fps: u32,
    /// The source: a video file, or `testsrc2` (ffmpeg's synthetic pattern).
    #[arg(long, default_value = "testsrc2")]
    source: String,
    /// Only the lowest N representations (faster; default all eight).
    #[arg(long, default_value_t = 8)]
    reps: usize,
}

/// The ffmpeg input arguments of the source, as `source.txt` stores them.
fn source_args(source: &str, size: &str, fps: u32, duration: Duration) -> Vec<String> {
    let secs = duration.as_secs_f64();
    if source == "testsrc2" {
        vec![
            "-f".into(),
            "lavfi".into(),
            "-i".into(),
            format!("testsrc2=size={size}:rate={fps}:duration={secs}"),
        ]
    } else {
        vec!["-t".into(), format!("{secs}"), "-i".into(), source.into()]
    }
}

fn ffmpeg(args: &[String]) -> Result<std::process::Output, String> {
    let out = Command::new("ffmpeg")
        .arg("-hide_banner")
        .arg("-nostdin")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ffmpeg ({e}): install it (apt-get install ffmpeg; scripts/test.sh does as root)"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "ffmpeg failed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(out)
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
    if a.reps == 0 || a.reps > SEED001_LADDER.len() {
        return Err(format!("--reps: use 1 to {}", SEED001_LADDER.len()));
    }
    if a.source != "testsrc2" && !Path::new(&a.source).is_file() {
        return Err(format!("--source {}: no such file", a.source));
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let input = source_args(&a.source, &a.size, a.fps, a.duration);
    let mut reps = Vec::new();
    for (i, &(enc, chunk_kbps)) in SEED001_LADDER.iter().take(a.reps).enumerate() {
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

/// PSNR and SSIM of a received video against its source.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Score {
    /// Mean PSNR over frames (dB).
    pub psnr_db: f64,
    /// Mean SSIM over frames (all planes).
    pub ssim: f64,
}

fn after<'a>(text: &'a str, line_has: &str, key: &str) -> Option<&'a str> {
    let line = text.lines().rev().find(|l| l.contains(line_has))?;
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()
}

/// Write `received` (the chunks in play order, missing messages as zeros)
/// to `ts`, decode it and score it against the source named in
/// `video/source.txt`.
pub fn score(video: &Path, received: &[&[u8]], ts: &Path) -> Result<Score, String> {
    let mut all = Vec::with_capacity(received.iter().map(|c| c.len()).sum());
    for c in received {
        all.extend_from_slice(c);
    }
    std::fs::write(ts, &all).map_err(|e| format!("{}: {e}", ts.display()))?;
    let src_path = video.join("source.txt");
    let source: Vec<String> = std::fs::read_to_string(&src_path)
        .map_err(|e| format!("{}: {e}", src_path.display()))?
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    // The source as the encoder saw it (scaled, resampled); a ladder from
    // before source-filter.txt existed had the source at its own size.
    let filter = std::fs::read_to_string(video.join("source-filter.txt"))
        .map(|f| format!("{},", f.trim()))
        .unwrap_or_default();
    if filter.contains(['[', ']', ';']) {
        return Err("source-filter.txt may hold one filter chain only".into());
    }
    let mut args = vec![
        "-loglevel".to_string(),
        "info".into(),
        "-i".into(),
        ts.display().to_string(),
    ];
    args.extend(source);
    args.extend([
        "-lavfi".into(),
        format!(
            "[0:v]setpts=PTS-STARTPTS,settb=AVTB[a];[1:v]{filter}setpts=PTS-STARTPTS,settb=AVTB[b];\
             [a]split[a1][a2];[b]split[b1][b2];[a1][b1]psnr;[a2][b2]ssim"
        ),
        "-f".into(),
        "null".into(),
        "-".into(),
    ]);
    let out = ffmpeg(&args)?;
    let err = String::from_utf8_lossy(&out.stderr);
    let psnr = after(&err, "PSNR y:", "average:")
        .and_then(|v| {
            if v == "inf" {
                Some(f64::INFINITY)
            } else {
                v.parse().ok()
            }
        })
        .ok_or_else(|| "no PSNR in ffmpeg's output".to_string())?;
    let ssim = after(&err, "SSIM Y:", "All:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "no SSIM in ffmpeg's output".to_string())?;
    Ok(Score {
        psnr_db: psnr,
        ssim,
    })
}
