//! Picture quality of real DASH video (the [DASHing-2018] Table 1 and Figs 11, 12
//! and 15): frame-level PSNR and SSIM, full reference, against the source
//! of a ladder written by `hollywood dash-ladder`, computed with ffmpeg's
//! `psnr` and `ssim` filters ([DASHing-2018]: "frame-level PSNR/SSIM against the
//! original, computed with FFmpeg").
//!
//! **One frame grid.** Whatever the decoder makes of a stream, it is put on
//! the source's frame grid before it is compared: the stream's timestamps
//! are shifted by the ladder's first presentation time (not by the
//! stream's own first frame, which a lost I-frame would move), the `fps`
//! filter places one frame per source frame — a frame the decoder could
//! not produce is the last one it did produce (a player's concealment by
//! repetition; before the first, the first) — and the stream is padded and
//! cut to exactly the frames of the chunks played. Frame `i` of the result
//! is compared with source frame `i`, always.
//!
//! **Intact chunks are looked up, not decoded.** Every chunk starts with an
//! I-frame and decodes alone, so a chunk that arrived whole shows exactly
//! the frames its representation shows. [`LadderQuality`] scores each
//! representation's whole stream once and keeps the per-frame values in
//! `DIR/quality/<rep>.csv`; a run whose chunks all arrived whole is scored
//! by lookup. Only a run with a damaged chunk (late or lost messages, as
//! zeros) is decoded and compared in full.
//!
//! ffmpeg and ffprobe must be on `PATH` (`scripts/test.sh` installs them
//! as root).

use crate::media::tool;
use hollywood_media::dash::client::ChunkRecord;
use hollywood_media::dash::content::Content;
use std::path::{Path, PathBuf};

/// PSNR of a frame identical to its source is infinite; it is recorded as
/// this (dB), as quality tools commonly cap it.
pub const PSNR_CAP_DB: f32 = 100.0;

/// Average quality of a stream.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Score {
    /// PSNR (dB): mean over frames of each frame's PSNR (capped at
    /// [`PSNR_CAP_DB`]).
    pub psnr_db: f64,
    /// Mean SSIM over frames (all planes).
    pub ssim: f64,
}

/// Per-frame PSNR (dB) and SSIM, in display order on the source's grid.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameScores {
    /// PSNR of each frame (all planes, dB, capped).
    pub psnr: Vec<f32>,
    /// SSIM of each frame (all planes).
    pub ssim: Vec<f32>,
}

impl FrameScores {
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.psnr.len()
    }

    /// No frame.
    pub fn is_empty(&self) -> bool {
        self.psnr.is_empty()
    }

    /// The means (NaN without frames: there is nothing to score).
    pub fn mean(&self) -> Score {
        let m = |v: &[f32]| v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        Score {
            psnr_db: m(&self.psnr),
            ssim: m(&self.ssim),
        }
    }

    fn extend_from(&mut self, other: &FrameScores, range: std::ops::Range<usize>) {
        self.psnr.extend_from_slice(&other.psnr[range.clone()]);
        self.ssim.extend_from_slice(&other.ssim[range]);
    }
}

/// The ffmpeg input arguments that regenerate the ladder's source
/// (`source.txt`) and the filter chain the encoder applied to it
/// (`source-filter.txt`, with a trailing comma; empty if absent).
fn source_of(video: &Path) -> Result<(Vec<String>, String), String> {
    let src_path = video.join("source.txt");
    let source: Vec<String> = std::fs::read_to_string(&src_path)
        .map_err(|e| format!("{}: {e}", src_path.display()))?
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let filter = std::fs::read_to_string(video.join("source-filter.txt"))
        .ok()
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .map(|f| format!("{f},"))
        .unwrap_or_default();
    if filter.contains(['[', ']', ';']) {
        return Err("source-filter.txt may hold one filter chain only".into());
    }
    Ok((source, filter))
}

/// The presentation time (s) of the first frame of `ts`.
fn first_pts(ts: &Path) -> Result<f64, String> {
    let out = tool(
        "ffprobe",
        &[
            "-v".into(),
            "error".into(),
            "-select_streams".into(),
            "v:0".into(),
            "-show_entries".into(),
            "frame=pts_time".into(),
            "-read_intervals".into(),
            "%+#8".into(),
            "-of".into(),
            "csv=p=0".into(),
            ts.display().to_string(),
        ],
    )?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(',').parse::<f64>().ok())
        .min_by(f64::total_cmp)
        .ok_or_else(|| format!("{}: no decodable frame", ts.display()))
}

/// Parse a `psnr` (`psnr_avg:`) or `ssim` (`All:`) stats file.
fn parse_stats(text: &str, key: &str) -> Result<Vec<f32>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v = l
                .split_whitespace()
                .find_map(|f| f.strip_prefix(key))
                .ok_or_else(|| format!("no {key} in the stats line {l:?}"))?;
            if v == "inf" {
                return Ok(PSNR_CAP_DB);
            }
            match v.parse::<f32>() {
                Ok(x) if x.is_nan() => Err(format!("{key}{v}: not a number")),
                Ok(x) => Ok(x.min(PSNR_CAP_DB)),
                Err(e) => Err(format!("{key}{v}: {e}")),
            }
        })
        .collect()
}

/// Score the first `frames` frames of the stream in `ts` against the
/// source of the ladder in `video` on the source's frame grid (module
/// docs). `start` is the ladder's first presentation time, `fps` its frame
/// rate; stats files go beside `ts` and are removed.
pub fn score_frames(
    video: &Path,
    ts: &Path,
    start: f64,
    fps: f64,
    frames: usize,
) -> Result<FrameScores, String> {
    if frames == 0 {
        return Ok(FrameScores::default());
    }
    let (source, filter) = source_of(video)?;
    let psnr_log = ts.with_extension("psnr.log");
    let ssim_log = ts.with_extension("ssim.log");
    // The stats_file option takes a filter-graph string: keep the paths
    // free of the characters that would need escaping.
    for p in [&psnr_log, &ssim_log] {
        if p.display()
            .to_string()
            .contains([':', ',', '\'', '[', ']', ';', '\\'])
        {
            return Err(format!("{}: a path without : , ' [ ] ; \\", p.display()));
        }
    }
    let mut args = vec![
        "-hide_banner".to_string(),
        "-nostdin".into(),
        "-loglevel".into(),
        "error".into(),
        // The stream's own timestamps, not shifted to its first packet
        // (which a loss can move): the ladder's start is subtracted below.
        // (Global: the source's are shifted to zero in the graph, as the
        // encoder saw them.)
        "-copyts".into(),
        "-i".into(),
        ts.display().to_string(),
    ];
    args.extend(source);
    let grid = format!("setpts=N/({fps}*TB)");
    args.extend([
        "-lavfi".into(),
        format!(
            "[0:v]setpts=PTS-{start}/TB,fps={fps}:start_time=0,tpad=stop_mode=clone:stop={frames},\
             trim=end_frame={frames},{grid}[a];\
             [1:v]setpts=PTS-STARTPTS,{filter}tpad=stop_mode=clone:stop={frames},trim=end_frame={frames},{grid}[b];\
             [a]split[a1][a2];[b]split[b1][b2];\
             [a1][b1]psnr=stats_file={};[a2][b2]ssim=stats_file={}",
            psnr_log.display(),
            ssim_log.display()
        ),
        "-f".into(),
        "null".into(),
        "-".into(),
    ]);
    let result = tool("ffmpeg", &args).and_then(|_| {
        let read =
            |p: &PathBuf| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        let psnr = parse_stats(&read(&psnr_log)?, "psnr_avg:")?;
        let ssim = parse_stats(&read(&ssim_log)?, "All:")?;
        Ok(FrameScores { psnr, ssim })
    });
    let _ = std::fs::remove_file(&psnr_log);
    let _ = std::fs::remove_file(&ssim_log);
    let s = result?;
    if s.psnr.len() != frames || s.ssim.len() != frames {
        return Err(format!(
            "{}: ffmpeg compared {} / {} frames, expected {frames}",
            ts.display(),
            s.psnr.len(),
            s.ssim.len()
        ));
    }
    Ok(s)
}

/// Every representation of a ladder scored frame by frame, once.
#[derive(Debug, Clone)]
pub struct LadderQuality {
    /// Frames per chunk.
    pub frames_per_chunk: usize,
    /// Frames per second.
    pub fps: f64,
    /// The ladder's first presentation time (s).
    pub start: f64,
    /// Per representation (in the ladder's order), per frame.
    pub reps: Vec<FrameScores>,
}

/// How the scores are computed; a cache from another version is stale.
const METHOD: u32 = 1;

/// The frame rate, the first presentation time and the frames per chunk
/// of a ladder (a whole number, or an error).
fn grid(video: &Path, content: &Content) -> Result<(f64, f64, usize), String> {
    let fps = source_fps(video)?;
    let per_chunk = fps * content.chunk.as_secs_f64();
    if (per_chunk - per_chunk.round()).abs() > 1e-6 || per_chunk < 1.0 {
        return Err(format!(
            "{fps} frames/s × {} s chunks is not a whole number of frames",
            content.chunk.as_secs_f64()
        ));
    }
    let start = first_pts(&video.join(&content.reps[0].id).join("0.ts"))?;
    Ok((fps, start, per_chunk.round() as usize))
}

/// What a representation's cached scores depend on: the scoring method,
/// the source, its chunks' sizes and the grid.
fn fingerprint(video: &Path, content: &Content, q: usize, start: f64, fps: f64) -> String {
    let source = source_of(video)
        .map(|(s, f)| format!("{} {f}", s.join(" ")))
        .unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let bytes: u64 = (0..content.chunks())
        .filter_map(|n| content.size(n, q))
        .map(u64::from)
        .sum();
    format!(
        "method={METHOD} source={h:016x} chunks={} bytes={bytes} start={start} fps={fps}",
        content.chunks()
    )
}

impl LadderQuality {
    /// Load `video/quality/` or, when missing or stale (another source,
    /// other chunks, another method), score every representation's whole
    /// stream and write it there (about 1/30 of the video's length per
    /// representation at 640x360 on 2 cores).
    pub fn load_or_compute(video: &Path, content: &Content) -> Result<LadderQuality, String> {
        let chunks = content.chunks();
        let dir = video.join("quality");
        let (fps, start, fpc) = grid(video, content)?;
        let frames = fpc * chunks;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut reps = Vec::new();
        for (q, rep) in content.reps.iter().enumerate() {
            let csv = dir.join(format!("{}.csv", rep.id));
            let print = fingerprint(video, content, q, start, fps);
            if let Some(s) = read_csv(&csv, &print).filter(|s| s.len() == frames) {
                reps.push(s);
                continue;
            }
            let ts = dir.join(format!("{}.{}.ts", rep.id, std::process::id()));
            let mut all = Vec::new();
            for n in 0..chunks {
                let f = video.join(&rep.id).join(format!("{n}.ts"));
                all.extend(std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))?);
            }
            std::fs::write(&ts, &all).map_err(|e| format!("{}: {e}", ts.display()))?;
            let s = score_frames(video, &ts, start, fps, frames);
            let _ = std::fs::remove_file(&ts);
            let s = s?;
            write_csv(&csv, &print, &s)?;
            reps.push(s);
        }
        Ok(LadderQuality {
            frames_per_chunk: fpc,
            fps,
            start,
            reps,
        })
    }
}

/// The source's frame rate from `source.txt` / `source-filter.txt`
/// (`rate=` of testsrc2, or the `fps=` the encoder resampled to).
fn source_fps(video: &Path) -> Result<f64, String> {
    let (source, filter) = source_of(video)?;
    let find = |text: &str, key: &str| -> Option<f64> {
        let at = text.find(key)? + key.len();
        let v: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '/')
            .collect();
        match v.split_once('/') {
            Some((a, b)) => Some(a.parse::<f64>().ok()? / b.parse::<f64>().ok()?),
            None => v.parse().ok(),
        }
    };
    find(&filter, "fps=")
        .or_else(|| source.iter().find_map(|s| find(s, ":rate=")))
        .filter(|f| f.is_finite() && *f > 0.0)
        .ok_or_else(|| {
            format!(
                "{}: no frame rate in source-filter.txt or source.txt (re-run dash-ladder)",
                video.display()
            )
        })
}

fn read_csv(path: &Path, print: &str) -> Option<FrameScores> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()? != format!("# {print}") {
        return None;
    }
    let mut s = FrameScores::default();
    for line in lines.skip(1) {
        let mut f = line.split(',');
        let (_, p, q) = (f.next()?, f.next()?, f.next()?);
        s.psnr.push(p.parse().ok()?);
        s.ssim.push(q.parse().ok()?);
    }
    Some(s)
}

/// Write the scores under a fingerprint line, through a temporary file
/// renamed into place (a reader never sees half a file).
fn write_csv(path: &Path, print: &str, s: &FrameScores) -> Result<(), String> {
    let mut text = format!("# {print}\nframe,psnr_db,ssim\n");
    for (i, (p, q)) in s.psnr.iter().zip(&s.ssim).enumerate() {
        text.push_str(&format!("{i},{p},{q}\n"));
    }
    let tmp = path.with_extension(format!("csv.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// What a client showed, frame by frame.
#[derive(Debug, Clone, Default)]
pub struct RunQuality {
    /// Per frame of the chunks played.
    pub frames: FrameScores,
    /// Per frame: its chunk had late or lost messages.
    pub damaged: Vec<bool>,
    /// Chunks with late or lost messages.
    pub damaged_chunks: usize,
    /// Frames whose SSIM is below every representation's encoding of the
    /// same frame: only damage (late or lost messages) can put a frame
    /// there.
    pub below_floor: usize,
    /// Of those, frames in chunks that arrived whole: must be none (a
    /// misaligned grid or decoder state leaking across chunks would show
    /// here).
    pub below_floor_intact: usize,
}

/// Whether a chunk reached the client whole and in time.
pub fn intact(c: &ChunkRecord) -> bool {
    c.received >= c.size && c.late_messages == 0
}

/// Score what a client played (`chunks`, in order; bytes kept when any
/// chunk is damaged) on the ladder in `video`. Intact runs are looked up in
/// `lq`; a damaged run is written to `work` (a `.ts` path the caller owns;
/// removed afterwards) and decoded.
pub fn run_quality(
    video: &Path,
    lq: &LadderQuality,
    chunks: &[ChunkRecord],
    work: &Path,
) -> Result<RunQuality, String> {
    let fpc = lq.frames_per_chunk;
    let mut damaged = Vec::with_capacity(chunks.len() * fpc);
    let mut damaged_chunks = 0;
    for (i, c) in chunks.iter().enumerate() {
        if c.n != i {
            return Err(format!("chunk {i} of the run is chunk {}", c.n));
        }
        let bad = !intact(c);
        damaged_chunks += bad as usize;
        damaged.extend(std::iter::repeat_n(bad, fpc));
    }
    let frames = if damaged_chunks == 0 {
        let mut s = FrameScores::default();
        for c in chunks {
            let rep = lq
                .reps
                .get(c.quality)
                .ok_or_else(|| format!("chunk {} at representation {}", c.n, c.quality))?;
            let range = c.n * fpc..(c.n + 1) * fpc;
            if range.end > rep.len() {
                return Err(format!("chunk {} is past the ladder's end", c.n));
            }
            s.extend_from(rep, range);
        }
        s
    } else {
        let mut all = Vec::new();
        for c in chunks {
            if c.data().len() as u64 != c.size {
                return Err(format!(
                    "chunk {}: {} bytes kept of {} (the client must keep bytes)",
                    c.n,
                    c.data().len(),
                    c.size
                ));
            }
            all.extend_from_slice(c.data());
        }
        std::fs::write(work, &all).map_err(|e| format!("{}: {e}", work.display()))?;
        let s = score_frames(video, work, lq.start, lq.fps, chunks.len() * fpc);
        let _ = std::fs::remove_file(work);
        s?
    };
    let below: Vec<usize> = frames
        .ssim
        .iter()
        .enumerate()
        .filter(|&(i, &s)| {
            let floor = lq
                .reps
                .iter()
                .filter_map(|r| r.ssim.get(i))
                .fold(f32::INFINITY, |a, &b| a.min(b));
            s < floor - 1e-4
        })
        .map(|(i, _)| i)
        .collect();
    Ok(RunQuality {
        below_floor: below.len(),
        below_floor_intact: below.iter().filter(|&&i| !damaged[i]).count(),
        frames,
        damaged,
        damaged_chunks,
    })
}

/// Write `received` (the chunks in play order, missing messages as zeros)
/// to `ts`, decode it and score it against the ladder's source: the mean
/// of the frames' PSNR and SSIM on the source's frame grid (module docs).
pub fn score(video: &Path, received: &[&[u8]], ts: &Path) -> Result<Score, String> {
    let content = Content::from_dir(video)?;
    let (fps, lq_start, fpc) = grid(video, &content)?;
    if received.is_empty() {
        return Err("no chunk was played".into());
    }
    let mut all = Vec::with_capacity(received.iter().map(|c| c.len()).sum());
    for c in received {
        all.extend_from_slice(c);
    }
    std::fs::write(ts, &all).map_err(|e| format!("{}: {e}", ts.display()))?;
    Ok(score_frames(video, ts, lq_start, fps, received.len() * fpc)?.mean())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_files_parse_and_cap_identical_frames() {
        let psnr = "n:1 mse_avg:0.47 mse_y:0.60 mse_u:0.19 mse_v:0.21 psnr_avg:51.39 psnr_y:50.34 psnr_u:55.34 psnr_v:54.90 \n\
                    n:2 mse_avg:0.00 mse_y:0.00 mse_u:0.00 mse_v:0.00 psnr_avg:inf psnr_y:inf psnr_u:inf psnr_v:inf \n";
        assert_eq!(
            parse_stats(psnr, "psnr_avg:").unwrap(),
            vec![51.39, PSNR_CAP_DB]
        );
        let ssim = "n:1 Y:0.998373 U:0.998979 V:0.998944 All:0.998588 (28.501549)\n";
        assert_eq!(parse_stats(ssim, "All:").unwrap(), vec![0.998588]);
        assert!(parse_stats("n:1 garbage\n", "All:").is_err());
    }
}
