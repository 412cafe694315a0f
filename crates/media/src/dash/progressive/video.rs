//! The video of chapter 6: a fixed rate, frame by frame ([`FrameVideo`]),
//! and the bytes and paths of its resources as the server sends them and the
//! client checks them.

use crate::dash::h2;
use std::time::Duration;

/// The video: a fixed rate, frame by frame.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameVideo {
    /// Frames per second.
    pub fps: u32,
    /// Frames per chunk.
    pub chunk_frames: u32,
    /// `sizes[c][f]`: bytes of frame `f` of chunk `c`.
    sizes: Vec<Vec<u32>>,
}

impl FrameVideo {
    /// `duration` of video at `encoding_bps`, `fps`, chunks of
    /// `chunk_frames`, I-frames `iframe_ratio` × a P-frame, complexity
    /// spread `spread`, sizes from `seed`.
    pub fn new(
        encoding_bps: u64,
        fps: u32,
        chunk_frames: u32,
        duration: Duration,
        iframe_ratio: f64,
        spread: f64,
        seed: u64,
    ) -> Result<FrameVideo, String> {
        if !(1..=240).contains(&fps) {
            return Err(format!("{fps} fps: use 1 to 240"));
        }
        if chunk_frames == 0 || chunk_frames > 60 * fps {
            return Err(format!(
                "{chunk_frames} frames per chunk: use 1 to a minute's worth"
            ));
        }
        if !(10_000..=10_000_000_000).contains(&encoding_bps) {
            return Err(format!(
                "encoding rate {encoding_bps} bit/s: use 10 kbit/s to 10 Gbit/s"
            ));
        }
        if !(iframe_ratio.is_finite() && iframe_ratio >= 1.0) {
            return Err(format!("I-frame ratio {iframe_ratio}: use at least 1"));
        }
        let frames = (duration.as_secs_f64() * f64::from(fps)).round() as u64;
        if frames == 0 || frames > 10_000_000 {
            return Err(format!(
                "{frames} frames: use a duration of at least one frame, at most 10^7 frames"
            ));
        }
        let chunks = frames.div_ceil(u64::from(chunk_frames)) as usize;
        let mut rng = crate::rng::SplitMix(seed ^ 0xc6c6);
        let mut sizes = Vec::with_capacity(chunks);
        for c in 0..chunks {
            let f =
                (frames - c as u64 * u64::from(chunk_frames)).min(u64::from(chunk_frames)) as u32;
            let k = (spread * rng.normal() - spread * spread / 2.0)
                .exp()
                .clamp(0.5, 2.0);
            let bytes = encoding_bps as f64 / 8.0 * f64::from(f) / f64::from(fps) * k;
            let p = bytes / (iframe_ratio + f64::from(f) - 1.0);
            let mut row = vec![(p.round() as u32).max(1); f as usize];
            row[0] = ((p * iframe_ratio).round() as u32).max(1);
            sizes.push(row);
        }
        Self::checked(fps, chunk_frames, sizes)
    }

    /// A video of the given frame sizes (in decoding order; a real
    /// encoding's, with an I-frame first in every chunk of
    /// `chunk_frames`).
    pub fn from_sizes(fps: u32, chunk_frames: u32, frames: &[u32]) -> Result<FrameVideo, String> {
        if !(1..=240).contains(&fps) {
            return Err(format!("{fps} fps: use 1 to 240"));
        }
        if chunk_frames == 0 || frames.is_empty() || frames.len() > 10_000_000 {
            return Err("a video needs frames, and chunks of at least one".into());
        }
        let sizes: Vec<Vec<u32>> = frames
            .chunks(chunk_frames as usize)
            .map(|c| c.iter().map(|&b| b.max(1)).collect())
            .collect();
        Self::checked(fps, chunk_frames, sizes)
    }

    fn checked(fps: u32, chunk_frames: u32, sizes: Vec<Vec<u32>>) -> Result<FrameVideo, String> {
        let largest = sizes.iter().flatten().copied().max().unwrap_or(0) as usize;
        if largest + message_overhead(largest) > hollywood_transport::MAX_MESSAGE {
            return Err(format!(
                "a frame of {largest} bytes and its HTTP/2 framing do not fit in one message (at most {} bytes): lower the I-frame ratio or the rate",
                hollywood_transport::MAX_MESSAGE
            ));
        }
        Ok(FrameVideo {
            fps,
            chunk_frames,
            sizes,
        })
    }

    /// Bytes of chunk `c` (0 past the end).
    pub fn chunk_bytes(&self, c: usize) -> usize {
        self.sizes
            .get(c)
            .map_or(0, |r| r.iter().map(|&b| b as usize).sum())
    }

    /// Where frame `f` starts in chunk `c`'s bytes.
    pub fn offset(&self, c: usize, f: usize) -> usize {
        self.sizes
            .get(c)
            .map_or(0, |r| r.iter().take(f).map(|&b| b as usize).sum())
    }

    /// Chunks.
    pub fn chunks(&self) -> usize {
        self.sizes.len()
    }

    /// Frames in all.
    pub fn frames(&self) -> u64 {
        self.sizes.iter().map(|c| c.len() as u64).sum()
    }

    /// Frames of chunk `c`.
    pub fn frames_in(&self, c: usize) -> usize {
        self.sizes.get(c).map_or(0, Vec::len)
    }

    /// Bytes of frame `f` of chunk `c`.
    pub fn size(&self, c: usize, f: usize) -> Option<u32> {
        self.sizes.get(c)?.get(f).copied()
    }

    /// Mean rate (bit/s) of what is sent.
    pub fn rate_bps(&self) -> f64 {
        let bytes: f64 = self.sizes.iter().flatten().map(|&b| f64::from(b)).sum();
        bytes * 8.0 * f64::from(self.fps) / self.frames() as f64
    }
}

/// Bytes a frame's message carries besides the frame, at most: the
/// PUSH_PROMISE and HEADERS frames with their header blocks (under 128
/// bytes each) and a 9-byte header per DATA frame.
pub fn message_overhead(size: usize) -> usize {
    256 + h2::FRAME_HEADER * size.div_ceil(h2::MAX_FRAME).max(1)
}

/// The HTTP authority the client asks.
pub(super) const AUTHORITY: &[u8] = b"hollywood";

/// The pattern of a resource's bytes: frame `f` of chunk `c` (pushed), or
/// all of chunk `c` (`f = None`, request-response).
pub(super) fn pattern_key(c: usize, f: Option<usize>) -> u8 {
    // Mixed, so that neighbouring resources ((c, f) and (f, c) included)
    // differ.
    let f = f.map_or(0, |f| f as u64 + 1);
    let h =
        (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ f.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (h.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 56) as u8
}

/// Two periods of a resource's bytes: byte `i` is `i ^ key` (low bytes).
pub(super) fn pattern(key: u8) -> [u8; 512] {
    std::array::from_fn(|i| (i as u8) ^ key)
}

/// Append bytes `offset .. offset + len` of the resource `key`.
pub(super) fn fill_pattern(out: &mut Vec<u8>, key: u8, offset: usize, len: usize) {
    let p = pattern(key);
    let (mut at, end) = (offset, offset + len);
    while at < end {
        let s = at % 256;
        let n = (end - at).min(256);
        out.extend_from_slice(&p[s..s + n]);
        at += n;
    }
}

/// Whether `bytes`, found at `offset` of the resource `key`, are its
/// bytes there (compared 256 at a time).
pub(super) fn pattern_intact(key: u8, offset: usize, bytes: &[u8]) -> bool {
    let p = pattern(key);
    let s = offset % 256;
    bytes.chunks(256).all(|b| b == &p[s..s + b.len()])
}

/// `/chunk/<c>/frame/<f>`, the path of a pushed frame.
pub(super) fn frame_path(c: usize, f: usize) -> String {
    format!("/chunk/{c}/frame/{f}")
}

pub(super) fn parse_frame_path(p: &str) -> Option<(usize, usize)> {
    let (c, f) = p.strip_prefix("/chunk/")?.split_once("/frame/")?;
    Some((c.parse().ok()?, f.parse().ok()?))
}
