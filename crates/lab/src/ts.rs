//! A real MPEG-TS stream as the comparison's workload (`hollywood compare
//! --ts`): the chunks are a file's bytes, 1316 at a time (seven TS packets,
//! what `ffmpeg … -f mpegts udp://` and `srt-live-transmit` send per
//! datagram), and the receiver writes what arrives, in arrival order, to a
//! file that ffprobe then decodes.
//!
//! Chunks carry no id of ours, so a received chunk is identified by its
//! content: the earliest chunk with those bytes not yet seen. TS chunks
//! are almost all unique (continuity counters, timestamps); identical
//! ones (null-packet padding) are interchangeable, so counting them this
//! way changes no total.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// TS packet size.
pub const TS_PACKET: usize = 188;

/// A TS file cut into datagram-sized chunks.
#[derive(Debug, Clone)]
pub struct TsSource {
    /// The chunks, in stream order.
    pub chunks: Arc<Vec<Vec<u8>>>,
    /// Where each transport's received stream is written (`<name>.ts`).
    pub out_dir: PathBuf,
    /// Video frames ffprobe decodes in the source file.
    pub source_frames: u64,
}

fn key(d: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    d.hash(&mut h);
    h.finish()
}

impl TsSource {
    /// Cut `file` into chunks of `size` bytes (a multiple of 188).
    pub fn from_file(file: &Path, size: usize, out_dir: &Path) -> Result<TsSource, String> {
        if size == 0 || !size.is_multiple_of(TS_PACKET) {
            return Err(format!(
                "with a TS source the chunk size must be a multiple of {TS_PACKET} (1316 = 7 packets), not {size}"
            ));
        }
        let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if bytes.len() < size || bytes[0] != 0x47 {
            return Err(format!("{}: not an MPEG-TS file", file.display()));
        }
        let chunks = bytes.chunks_exact(size).map(<[u8]>::to_vec).collect();
        std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
        Ok(TsSource {
            chunks: Arc::new(chunks),
            out_dir: out_dir.to_path_buf(),
            source_frames: video_frames(file)?,
        })
    }

    /// Encode a test source with ffmpeg (`testsrc2`, H.264 at about
    /// `rate_bps`, 25 fps, constant TS mux rate so chunks leave evenly)
    /// into `dir/source.ts`, and cut it.
    pub fn encode(
        dir: &Path,
        seconds: u32,
        rate_bps: u64,
        size: usize,
    ) -> Result<TsSource, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = dir.join("source.ts");
        let video = rate_bps * 8 / 10;
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg(format!("testsrc2=size=640x360:rate=25:duration={seconds}"))
            .args(["-c:v", "libx264", "-preset", "veryfast", "-g", "25"])
            .args(["-b:v", &video.to_string(), "-maxrate", &video.to_string()])
            .args(["-bufsize", &(video / 2).to_string()])
            .args(["-muxrate", &rate_bps.to_string(), "-f", "mpegts"])
            .arg(&file)
            .output()
            .map_err(|e| {
                format!("ffmpeg: {e} (Debian ffmpeg; scripts/test.sh installs it as root)")
            })?;
        if !out.status.success() {
            return Err(format!(
                "ffmpeg failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        TsSource::from_file(&file, size, dir)
    }

    /// A fresh identifier of received chunks.
    pub fn identifier(&self, n: usize) -> Identifier {
        let mut ids: HashMap<u64, VecDeque<u32>> = HashMap::new();
        for (i, c) in self.chunks.iter().take(n).enumerate() {
            ids.entry(key(c)).or_default().push_back(i as u32);
        }
        Identifier { ids }
    }

    /// Write `chunks` to `<out_dir>/<name>.ts` and count the video frames
    /// ffprobe decodes from it.
    pub fn decode(&self, name: &str, chunks: &[&[u8]]) -> Result<(PathBuf, u64), String> {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.out_dir.join(format!("{safe}.ts"));
        std::fs::write(&path, chunks.concat()).map_err(|e| format!("{}: {e}", path.display()))?;
        let frames = if chunks.is_empty() {
            0
        } else {
            video_frames(&path)?
        };
        Ok((path, frames))
    }
}

/// Which chunk a received datagram is.
#[derive(Debug)]
pub struct Identifier {
    ids: HashMap<u64, VecDeque<u32>>,
}

impl Identifier {
    /// The earliest chunk with these bytes not yet identified.
    pub fn identify(&mut self, d: &[u8]) -> Option<u32> {
        self.ids.get_mut(&key(d))?.pop_front()
    }
}

/// Video frames ffprobe decodes from `file` (`-count_frames`).
pub fn video_frames(file: &Path) -> Result<u64, String> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .map_err(|e| format!("ffprobe: {e} (Debian ffmpeg)"))?;
    let s = String::from_utf8_lossy(&out.stdout);
    // ffprobe prints the stream once per section it appears in (the
    // program and the stream list): the first number is the count.
    s.lines()
        .find_map(|l| l.trim().trim_end_matches(',').parse().ok())
        .ok_or_else(|| {
            format!(
                "ffprobe read no video stream from {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_chunks_are_taken_in_order_and_unknown_ones_refused() {
        let dir = std::env::temp_dir().join(format!("hw-ts-{}", std::process::id()));
        let src = TsSource {
            chunks: Arc::new(vec![vec![1; 4], vec![2; 4], vec![1; 4]]),
            out_dir: dir,
            source_frames: 0,
        };
        let mut id = src.identifier(3);
        assert_eq!(id.identify(&[2; 4]), Some(1));
        assert_eq!(id.identify(&[1; 4]), Some(0));
        assert_eq!(id.identify(&[1; 4]), Some(2));
        assert_eq!(id.identify(&[1; 4]), None);
        assert_eq!(id.identify(&[3; 4]), None);
    }
}
