//! Real video through the simulator (issue 12): encode a clip with ffmpeg
//! (libx264, fixed GOP, no B-frames, no scene cuts), split the H.264
//! elementary stream into frames (ffprobe), and after a run rebuild what
//! the receiver could show — every frame that arrived whole with its
//! reference chain is decoded, as a receiver's decoder would; the useful
//! ones (also in time for their play time) are shown and every other frame
//! is concealed by repeating the last one shown — and score it against the
//! source with ffmpeg's `psnr` and `ssim` filters.
//!
//! The transport carries messages of the frames' sizes (`⌈size / packet⌉`
//! packets each, [`hollywood_media::video::VideoSource::timetable_for`]); the
//! simulator checks every delivered message's content, so which frames
//! arrive whole and when is what the transport did, and the picture is
//! rebuilt from the original bytes of exactly those frames.
//!
//! ffmpeg and ffprobe must be on `PATH` (`scripts/test.sh` installs them as
//! root). Raw frames go to a working directory the caller owns.

use hollywood_media::video::TraceFrame;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to encode.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// ffmpeg's `testsrc2` test pattern (moving, with a counter).
    TestSrc,
    /// A video file ffmpeg can read.
    File(PathBuf),
}

impl Input {
    /// `testsrc` or a file name.
    pub fn parse(s: &str) -> Input {
        match s {
            "testsrc" => Input::TestSrc,
            f => Input::File(PathBuf::from(f)),
        }
    }
}

/// How to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoding {
    /// Picture width and height.
    pub width: u32,
    /// Picture height.
    pub height: u32,
    /// Frames per second.
    pub fps: f64,
    /// Seconds of video.
    pub seconds: f64,
    /// An I-frame every this many frames.
    pub gop: u32,
    /// Target bit rate (bit/s).
    pub bitrate: u64,
}

/// One encoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedFrame {
    /// Byte offset in the elementary stream.
    pub offset: usize,
    /// Its size.
    pub len: usize,
    /// An I-frame.
    pub intra: bool,
}

/// An encoded clip and its source frames on disk.
#[derive(Debug, Clone)]
pub struct Clip {
    /// The encoding.
    pub enc: Encoding,
    /// The source's raw frames (yuv420p).
    pub source_yuv: PathBuf,
    /// The H.264 elementary stream (Annex B).
    pub h264: Vec<u8>,
    /// Its frames, in decode (= display) order; the first starts after
    /// the stream's parameter sets.
    pub frames: Vec<EncodedFrame>,
    /// Bytes before the first frame (SPS, PPS, SEI), which a decoder needs
    /// before any frame.
    pub header: usize,
    /// Where the files are.
    pub dir: PathBuf,
}

/// Picture quality against the source.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Quality {
    /// PSNR of the mean squared error over all frames (ffmpeg's
    /// `average`, dB; `None` = identical, infinite).
    pub psnr_db: Option<f64>,
    /// Mean SSIM (all planes), 1 = identical.
    pub ssim: f64,
}

/// Run ffmpeg or ffprobe (`name`) with `args`; a failure names the tool,
/// its exit status and the last lines it printed, a missing tool how to
/// install it.
pub fn tool(name: &str, args: &[String]) -> Result<std::process::Output, String> {
    let out = Command::new(name).args(args).output().map_err(|e| {
        format!(
            "cannot run {name} ({e}): install ffmpeg (Debian: apt-get install ffmpeg; \
             scripts/test.sh does as root)"
        )
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "{name} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(out)
}

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// ffmpeg, quiet, overwriting its output, with `args`.
fn ffmpeg(args: Vec<String>) -> Result<std::process::Output, String> {
    let mut all = vec![s("-hide_banner"), s("-loglevel"), s("error"), s("-y")];
    all.extend(args);
    tool("ffmpeg", &all)
}

impl Encoding {
    fn frame_bytes(&self) -> usize {
        (self.width as usize * self.height as usize * 3).div_ceil(2)
    }

    fn frames(&self) -> u64 {
        (self.seconds * self.fps).round() as u64
    }

    fn size(&self) -> String {
        format!("{}x{}", self.width, self.height)
    }

    /// ffmpeg input options for raw frames of this encoding at `path`.
    fn raw_input(&self, path: &Path) -> Vec<String> {
        vec![
            s("-f"),
            s("rawvideo"),
            s("-pix_fmt"),
            s("yuv420p"),
            s("-s"),
            self.size(),
            s("-r"),
            s(self.fps),
            s("-i"),
            path.display().to_string(),
        ]
    }

    /// Check the numbers (and the raw size on disk: at most 4 GiB).
    pub fn validate(&self) -> Result<(), String> {
        if self.width < 16 || self.height < 16 || self.width % 2 == 1 || self.height % 2 == 1 {
            return Err("the picture must be at least 16x16 with even sides".into());
        }
        if !(self.fps > 0.0 && self.fps <= 240.0) || self.gop == 0 || self.bitrate < 10_000 {
            return Err("fps in (0, 240], gop ≥ 1 and bit rate ≥ 10 kbit/s".into());
        }
        let raw = self.frames() * self.frame_bytes() as u64;
        if self.frames() == 0 || raw > 4 << 30 {
            return Err(format!(
                "{} frames of {}: {raw} bytes of raw frames; use between 1 frame and 4 GiB \
                 (a shorter --duration or a smaller --picture)",
                self.frames(),
                self.size()
            ));
        }
        Ok(())
    }
}

/// Encode `input` into `dir` (created if missing).
pub fn encode(input: &Input, enc: &Encoding, dir: &Path) -> Result<Clip, String> {
    enc.validate()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let source_yuv = dir.join("source.yuv");
    let h264_path = dir.join("encoded.h264");
    let mut args = Vec::new();
    match input {
        Input::TestSrc => args.extend([
            s("-f"),
            s("lavfi"),
            s("-i"),
            format!("testsrc2=size={}:rate={}", enc.size(), enc.fps),
        ]),
        Input::File(f) => {
            if !f.is_file() {
                return Err(format!("no video file {}", f.display()));
            }
            args.extend([s("-i"), f.display().to_string()]);
        }
    }
    args.extend([
        s("-frames:v"),
        s(enc.frames()),
        s("-vf"),
        format!("scale={}:{},fps={}", enc.width, enc.height, enc.fps),
        s("-pix_fmt"),
        s("yuv420p"),
        s("-f"),
        s("rawvideo"),
        source_yuv.display().to_string(),
    ]);
    ffmpeg(args)?;
    let have = std::fs::metadata(&source_yuv)
        .map_err(|e| e.to_string())?
        .len();
    let frames = have / enc.frame_bytes() as u64;
    if frames == 0 {
        return Err("the input gave no frame".into());
    }
    // libx264 for live video: no B-frames (decode order = display order),
    // an I-frame exactly every `gop` frames, constrained rate.
    let rate = enc.bitrate.to_string();
    let mut args = enc.raw_input(&source_yuv);
    args.extend([
        s("-c:v"),
        s("libx264"),
        s("-preset"),
        s("veryfast"),
        s("-tune"),
        s("zerolatency"),
        // One thread: the same clip, byte for byte, on every run.
        s("-threads"),
        s("1"),
        s("-bf"),
        s("0"),
        s("-g"),
        s(enc.gop),
        s("-keyint_min"),
        s(enc.gop),
        s("-sc_threshold"),
        s("0"),
        s("-b:v"),
        rate.clone(),
        s("-maxrate"),
        rate.clone(),
        s("-bufsize"),
        rate,
        s("-f"),
        s("h264"),
        h264_path.display().to_string(),
    ]);
    ffmpeg(args)?;
    let h264 = std::fs::read(&h264_path).map_err(|e| e.to_string())?;
    let probe = tool(
        "ffprobe",
        &[
            s("-v"),
            s("error"),
            s("-f"),
            s("h264"),
            s("-show_entries"),
            s("packet=pos,size,flags"),
            s("-of"),
            s("compact=p=0"),
            h264_path.display().to_string(),
        ],
    )?;
    let frames_found = parse_probe(&String::from_utf8_lossy(&probe.stdout), h264.len())?;
    let header = frames_found.first().map_or(0, |f| f.offset);
    if frames_found.len() as u64 != frames {
        return Err(format!(
            "the encoder gave {} frames for {frames} source frames",
            frames_found.len()
        ));
    }
    let mut enc = enc.clone();
    enc.seconds = frames as f64 / enc.fps;
    Ok(Clip {
        enc,
        source_yuv,
        h264,
        frames: frames_found,
        header,
        dir: dir.to_path_buf(),
    })
}

/// ffprobe's `size=…|pos=…|flags=…` lines → frames, checked to tile the
/// stream.
fn parse_probe(text: &str, total: usize) -> Result<Vec<EncodedFrame>, String> {
    let mut frames = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let field = |k: &str| {
            line.trim()
                .split('|')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
        };
        let bad = |what: &str| format!("ffprobe: bad {what} in '{line}'");
        let size: usize = field("size")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad("size"))?;
        let pos: usize = field("pos")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad("pos"))?;
        let flags = field("flags").ok_or_else(|| bad("flags"))?;
        frames.push(EncodedFrame {
            offset: pos,
            len: size,
            intra: flags.contains('K'),
        });
    }
    // Elementary-stream positions can lag the start codes; what matters is
    // that consecutive frames tile the stream: take each frame as running
    // from its offset to the next frame's.
    frames.sort_by_key(|f| f.offset);
    for i in 0..frames.len() {
        let end = frames.get(i + 1).map_or(total, |n| n.offset);
        if end < frames[i].offset || end > total {
            return Err("ffprobe: frame positions do not tile the stream".into());
        }
        frames[i].len = end - frames[i].offset;
    }
    if frames.first().is_some_and(|f| !f.intra) {
        return Err("the stream does not start with an I-frame".into());
    }
    Ok(frames)
}

impl Clip {
    /// The frames as a trace for [`hollywood_media::video::VideoScenario`].
    pub fn trace(&self) -> Vec<TraceFrame> {
        self.frames
            .iter()
            .map(|f| TraceFrame {
                bytes: f.len,
                intra: f.intra,
            })
            .collect()
    }

    /// Quality of the receiver's picture: the frames with `decodable[i]`
    /// (arrived whole at some time, with their reference chain) are decoded
    /// in order, as a receiver's decoder would; those with `shown[i]` (also
    /// in time for their play time, a subset) are displayed, every other
    /// frame is concealed by repeating the last one displayed (grey before
    /// the first). `tag` names the working files.
    pub fn score(&self, decodable: &[bool], shown: &[bool], tag: &str) -> Result<Quality, String> {
        use std::io::{BufReader, BufWriter, Read, Write};
        let n = self.frames.len();
        if decodable.len() != n || shown.len() != n {
            return Err(format!(
                "{} decodable and {} shown flags for a clip of {n} frames",
                decodable.len(),
                shown.len()
            ));
        }
        if let Some(i) = (0..n).find(|&i| shown[i] && !decodable[i]) {
            return Err(format!("frame {i} is shown but not decodable"));
        }
        let fb = self.enc.frame_bytes();
        // The decoder's input: parameter sets, then every decodable frame.
        let mut stream = self.h264[..self.header].to_vec();
        for (f, _) in self.frames.iter().zip(decodable).filter(|(_, d)| **d) {
            stream.extend_from_slice(&self.h264[f.offset..f.offset + f.len]);
        }
        let received = self.dir.join(format!("{tag}.h264"));
        let decoded = self.dir.join(format!("{tag}.decoded.yuv"));
        let rebuilt = self.dir.join(format!("{tag}.yuv"));
        let fed = decodable.iter().filter(|d| **d).count();
        if fed > 0 {
            std::fs::write(&received, &stream).map_err(|e| e.to_string())?;
            ffmpeg(vec![
                s("-f"),
                s("h264"),
                s("-i"),
                received.display().to_string(),
                s("-pix_fmt"),
                s("yuv420p"),
                s("-f"),
                s("rawvideo"),
                decoded.display().to_string(),
            ])?;
            let _ = std::fs::remove_file(&received);
            let got = std::fs::metadata(&decoded)
                .map_err(|e| e.to_string())?
                .len();
            if got != (fed * fb) as u64 {
                let _ = std::fs::remove_file(&decoded);
                return Err(format!(
                    "the decoder gave {} pictures for the {fed} decodable frames",
                    got / fb as u64
                ));
            }
        }
        // Display: frame by frame, streaming (a clip may be gigabytes).
        let rebuild = || -> Result<(), String> {
            let io = |e: std::io::Error| e.to_string();
            let mut input = if fed > 0 {
                Some(BufReader::new(std::fs::File::open(&decoded).map_err(io)?))
            } else {
                None
            };
            let mut out = BufWriter::new(std::fs::File::create(&rebuilt).map_err(io)?);
            let mut picture = vec![0u8; fb];
            let mut last = vec![128u8; fb];
            for i in 0..n {
                if decodable[i] {
                    let r = input.as_mut().ok_or("decoder output missing")?;
                    r.read_exact(&mut picture).map_err(io)?;
                    if shown[i] {
                        last.copy_from_slice(&picture);
                    }
                }
                out.write_all(&last).map_err(io)?;
            }
            out.flush().map_err(io)
        };
        let built = rebuild();
        let _ = std::fs::remove_file(&decoded);
        let q = built.and_then(|()| self.compare(&rebuilt));
        let _ = std::fs::remove_file(&rebuilt);
        q
    }

    /// PSNR and SSIM of raw frames at `path` against the source.
    fn compare(&self, path: &Path) -> Result<Quality, String> {
        let run = |filter: &str| -> Result<String, String> {
            let mut args = vec![s("-hide_banner"), s("-nostats")];
            args.extend(self.enc.raw_input(path));
            args.extend(self.enc.raw_input(&self.source_yuv));
            args.extend([
                s("-lavfi"),
                format!("[0:v][1:v]{filter}"),
                s("-f"),
                s("null"),
                s("-"),
            ]);
            let out = tool("ffmpeg", &args)?;
            Ok(String::from_utf8_lossy(&out.stderr).into_owned())
        };
        let psnr = run("psnr")?;
        let ssim = run("ssim")?;
        let psnr_db = value_after(&psnr, "average:")
            .ok_or_else(|| "ffmpeg's psnr filter printed no average".to_string())?;
        let ssim = value_after(&ssim, "All:")
            .flatten()
            .ok_or_else(|| "ffmpeg's ssim filter printed no value".to_string())?;
        Ok(Quality { psnr_db, ssim })
    }
}

/// The number after the last `key` in `text`: `Some(None)` for `inf`.
fn value_after(text: &str, key: &str) -> Option<Option<f64>> {
    let at = text.rfind(key)? + key.len();
    let word: String = text[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '(')
        .collect();
    if word == "inf" {
        return Some(None);
    }
    word.parse().ok().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ffprobe_lines_become_frames_that_tile_the_stream() {
        let f = parse_probe(
            "size=1000|pos=30|flags=K__\nsize=200|pos=1030|flags=___\npos=1230|size=300|flags=___\n",
            1600,
        )
        .unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!((f[0].offset, f[0].len, f[0].intra), (30, 1000, true));
        assert_eq!((f[1].offset, f[1].len), (1030, 200));
        assert_eq!((f[2].offset, f[2].len), (1230, 370), "to the end");
        assert!(
            parse_probe("size=10|pos=0|flags=___\n", 10).is_err(),
            "must start intra"
        );
        assert!(parse_probe("size=10|pos=0\n", 10).is_err());
        assert!(parse_probe("size=x|pos=0|flags=K_\n", 10).is_err());
        assert!(
            parse_probe("size=10|pos=0|flags=K_\nsize=5|pos=20|flags=__\n", 10).is_err(),
            "past the end"
        );
    }

    #[test]
    fn filter_summaries_are_parsed() {
        let psnr = "[Parsed_psnr_0 @ 0x1] PSNR y:40.1 u:44.0 v:45.2 average:41.23 min:30.0 max:inf";
        assert_eq!(value_after(psnr, "average:"), Some(Some(41.23)));
        assert_eq!(value_after("average:inf min:inf", "average:"), Some(None));
        let ssim = "[Parsed_ssim_0 @ 0x1] SSIM Y:0.99 (20.0) U:0.98 V:0.98 All:0.987 (18.9)";
        assert_eq!(value_after(ssim, "All:"), Some(Some(0.987)));
        assert_eq!(value_after("nothing", "All:"), None);
    }

    #[test]
    fn bad_encodings_are_refused() {
        let ok = Encoding {
            width: 320,
            height: 240,
            fps: 60.0,
            seconds: 30.0,
            gop: 10,
            bitrate: 1_000_000,
        };
        assert!(ok.validate().is_ok());
        for bad in [
            Encoding {
                width: 321,
                ..ok.clone()
            },
            Encoding {
                gop: 0,
                ..ok.clone()
            },
            Encoding {
                seconds: 0.0,
                ..ok.clone()
            },
            Encoding {
                seconds: 100_000.0,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
