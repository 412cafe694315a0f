//! Thesis chapter 6's three DASH architectures in the simulator, at a
//! fixed encoding rate (no adaptation), frame by frame (RESULTS.md 1(a),
//! 1(b)):
//!
//! - **Request-response** ([`Arch::RequestResponse`], §6.1, over standard
//!   TCP): one request per chunk; a chunk plays only once all of it is in
//!   (eq. 6.2), the buffer is one chunk (T_buffer = T_chunk) and the next
//!   chunk is requested when the current one starts playing (eq. 6.3).
//! - **Progressive** ([`Arch::Push`], §6.2, over standard TCP): 1 s chunks,
//!   the server pushes every frame as its own message (RFC 9113 §8.4 server
//!   push: PUSH_PROMISE, HEADERS and DATA of one frame) as soon as the
//!   chunk is requested; the client buffers `n` frames before it starts and
//!   plays frame by frame.
//! - **Progressive over TCP Hollywood** ([`Arch::Hollywood`], §6.3): the
//!   same, one TCP Hollywood message per frame, delivered as it completes.
//!
//! A frame missing at its time **stalls** playback until it arrives (TCP:
//! the stall is cumulative, every later frame is *delayed*), or, over TCP
//! Hollywood, is **skipped**: playback goes on with the next frame at its
//! original time and the missing one is discarded if it comes later
//! (§6.3: no drift). Metrics: total stall, delayed-frame duration (frames
//! played after their original time, × 1/fps; the final offset of eq. 6.18
//! is the total stall), skip duration.
//!
//! Like the thesis's own simulator ("mimics HTTP/2's behaviour"), the
//! wire carries HTTP/1.1 requests (`httparse`) and, per frame, one message
//! standing for the HTTP/2 PUSH_PROMISE + HEADERS + DATA of that frame:
//! an 8-byte header (chunk u32, frame u16, frames in the chunk u16, big
//! endian) and the frame's bytes; no HTTP/2 framing or HPACK is sent.
//!
//! Frame sizes (ours; the thesis encoded Big Buck Bunny): a chunk of F
//! frames carries `R_encoding × F / fps` bytes times a per-chunk
//! complexity factor (log-normal, σ = 0.1), one I-frame `iframe_ratio`
//! times the size of each of its F − 1 P-frames (the average bit-rate
//! kept, the thesis's Fig. 6.3 policy).

use super::http::{self, CONTROL, DATA};
use super::{build_path, retransmitted, Phase};
use crate::messages::Transport;
use hollywood_sim::TransportHost;
use hollywood_tcp::{CcAlgorithm, Instant};
use hollywood_transport::{MessageTransport, OutMessage, TransportApp, TransportEvent};
use serde::Serialize;
use std::collections::VecDeque;
use std::time::Duration;

/// Frame header bytes.
pub const FRAME_HEADER: usize = 8;

/// The three architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arch {
    /// §6.1: a request per chunk, whole chunks.
    RequestResponse,
    /// §6.2: progressive, every frame pushed, over standard TCP.
    Push,
    /// §6.3: progressive over TCP Hollywood, skip instead of stall.
    Hollywood,
}

impl Arch {
    /// Parse `request-response`, `push` or `hollywood`.
    pub fn parse(s: &str) -> Result<Arch, String> {
        match s {
            "request-response" => Ok(Arch::RequestResponse),
            "push" => Ok(Arch::Push),
            "hollywood" => Ok(Arch::Hollywood),
            _ => Err(format!(
                "unknown architecture {s:?}: use request-response, push or hollywood"
            )),
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::RequestResponse => "request-response",
            Arch::Push => "push",
            Arch::Hollywood => "hollywood",
        }
    }

    /// The transport the thesis runs it over.
    pub fn transport(self) -> Transport {
        match self {
            Arch::Hollywood => Transport::Hollywood,
            _ => Transport::Tcp,
        }
    }
}

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
        let mut rng = super::content::SplitMix(seed ^ 0xc6c6);
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
        let largest = sizes.iter().flatten().copied().max().unwrap_or(0) as usize;
        if largest + FRAME_HEADER > hollywood_transport::MAX_MESSAGE {
            return Err(format!(
                "a frame of {largest} bytes does not fit in one message (at most {} bytes): lower the I-frame ratio or the rate",
                hollywood_transport::MAX_MESSAGE - FRAME_HEADER
            ));
        }
        Ok(FrameVideo {
            fps,
            chunk_frames,
            sizes,
        })
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

fn frame_message(c: u32, f: u16, n: u16, size: usize) -> Vec<u8> {
    let mut m = Vec::with_capacity(FRAME_HEADER + size);
    m.extend_from_slice(&c.to_be_bytes());
    m.extend_from_slice(&f.to_be_bytes());
    m.extend_from_slice(&n.to_be_bytes());
    // The frame's bytes: a pattern of its position, checkable.
    let period = frame_pattern(c, f);
    let mut left = size;
    while left > 0 {
        let n = left.min(period.len());
        m.extend_from_slice(&period[..n]);
        left -= n;
    }
    m
}

/// One 256-byte period of frame `f` of chunk `c`'s bytes: byte `i` of the
/// frame is `i ^ f ^ c` (low bytes).
fn frame_pattern(c: u32, f: u16) -> [u8; 256] {
    let key = (f as u8) ^ (c as u8);
    std::array::from_fn(|i| (i as u8) ^ key)
}

/// Whether `body` is frame `f` of chunk `c`'s pattern, compared a period
/// at a time.
fn frame_intact(c: u32, f: u16, body: &[u8]) -> bool {
    let period = frame_pattern(c, f);
    body.chunks(period.len()).all(|b| b == &period[..b.len()])
}

fn parse_frame(m: &[u8]) -> Result<(u32, u16, u16, &[u8]), String> {
    if m.len() < FRAME_HEADER {
        return Err(format!("frame message of {} bytes", m.len()));
    }
    let c = u32::from_be_bytes(m[..4].try_into().expect("4"));
    let f = u16::from_be_bytes(m[4..6].try_into().expect("2"));
    let n = u16::from_be_bytes(m[6..8].try_into().expect("2"));
    Ok((c, f, n, &m[FRAME_HEADER..]))
}

/// The server: on `GET /chunk/<c>`, every frame of chunk `c` as a message,
/// in order; reliable, or (with [`FrameServer::with_lifetimes`]) each
/// frame with the lifetime of its playout deadline and P-frames depending
/// on their chunk's I-frame (thesis §4.2, Table 7.2).
#[derive(Debug)]
pub struct FrameServer {
    video: std::sync::Arc<FrameVideo>,
    /// (chunk, frame, playout deadline).
    queue: VecDeque<(usize, usize, Option<Instant>)>,
    held: Option<OutMessage>,
    /// The held message's deadline.
    held_deadline: Option<Instant>,
    /// The last chunk whose I-frame was taken: (chunk, its message id, or
    /// `None` if it was dropped).
    iframe: Option<(usize, Option<u32>)>,
    lifetimes: bool,
    next_id: u32,
    requests: u64,
    refused: u64,
    /// Frames dropped before sending: past their deadline, or their
    /// I-frame was.
    pub dropped_frames: u64,
    error: Option<String>,
}

impl FrameServer {
    /// A server for `video`, every frame reliable.
    pub fn new(video: std::sync::Arc<FrameVideo>) -> FrameServer {
        FrameServer {
            video,
            queue: VecDeque::new(),
            held: None,
            held_deadline: None,
            iframe: None,
            lifetimes: false,
            next_id: 0,
            requests: 0,
            refused: 0,
            dropped_frames: 0,
            error: None,
        }
    }

    /// Give every frame of a request carrying [`http::PLAYOUT_IN`] the
    /// lifetime of its playout time (frame `f` plays `f / fps` after the
    /// chunk starts), and every P-frame a dependency on its I-frame. A
    /// frame past its deadline, or whose I-frame was dropped, is not sent.
    /// Only a TCP Hollywood sender acts on lifetimes (thesis §4.2). The
    /// request's own one-way delay is taken as half the transport's
    /// lowest RTT ([`MessageTransport::min_rtt`]), and a frame is due one
    /// frame interval before it is shown (time to decode it).
    pub fn with_lifetimes(mut self, on: bool) -> FrameServer {
        self.lifetimes = on;
        self
    }

    fn next_frame(&mut self, now: Instant) -> Option<OutMessage> {
        loop {
            let (c, f, deadline) = self.queue.pop_front()?;
            let lifetime = match deadline {
                Some(d) if d <= now => None,
                Some(d) => Some(Some(d - now)),
                None => Some(None),
            };
            let iframe_lost = f > 0 && matches!(self.iframe, Some((ic, None)) if ic == c);
            let Some(lifetime) = lifetime.filter(|_| !iframe_lost) else {
                self.drop_frame(c, f);
                continue;
            };
            let size = self.video.size(c, f).expect("queued frames exist") as usize;
            let n = self.video.frames_in(c) as u16;
            let mut m = OutMessage::new(self.next_id, frame_message(c as u32, f as u16, n, size));
            m.substream = DATA;
            m.frame = Some(c as u64 * 65536 + f as u64);
            m.group = Some(c as u64);
            m.lifetime = lifetime;
            if f == 0 {
                self.iframe = Some((c, Some(m.id)));
            } else if lifetime.is_some() {
                m.depends_on = match self.iframe {
                    Some((ic, Some(id))) if ic == c => Some(id),
                    _ => None,
                };
            }
            self.next_id = self.next_id.wrapping_add(1);
            self.held_deadline = deadline;
            return Some(m);
        }
    }

    /// Frame `f` of chunk `c` is not sent; an I-frame takes its P-frames
    /// with it.
    fn drop_frame(&mut self, c: usize, f: usize) {
        if f == 0 {
            self.iframe = Some((c, None));
        }
        self.dropped_frames += 1;
    }

    fn flush(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        let mut held = self.held.take();
        if let Some(m) = &mut held {
            // Waiting used up some of its lifetime.
            match self.held_deadline {
                Some(d) if d <= now => {
                    // Too late now: drop it (its id was never sent, so the
                    // next message takes it).
                    if let (Some(c), Some(k)) = (m.group, m.frame) {
                        self.drop_frame(c as usize, (k % 65536) as usize);
                    }
                    self.next_id = m.id;
                    held = None;
                }
                Some(d) => m.lifetime = Some(d - now),
                None => {}
            }
        }
        let r = super::pump(now, t, &mut held, || self.next_frame(now));
        self.held = held;
        if let Err(e) = r {
            self.error = Some(format!("send: {e}"));
            self.queue.clear();
        }
    }
}

impl TransportApp for FrameServer {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        match ev {
            TransportEvent::Message(m) if m.substream == CONTROL => {
                let request = http::parse_request_head(&m.payload)
                    .ok()
                    .and_then(|(p, playout)| {
                        let c = p.strip_prefix("/chunk/")?.parse::<usize>().ok()?;
                        (c < self.video.chunks()).then_some((c, playout))
                    });
                match request {
                    Some((c, playout)) if self.queue.len() < 1 << 20 => {
                        self.requests += 1;
                        let fps = f64::from(self.video.fps);
                        // The request travelled about half the RTT, and a
                        // frame is due a frame interval before it is shown
                        // (the decoder's time; the thesis counts none,
                        // RESULTS.md 1(a)).
                        let owd = t.min_rtt().map_or(Duration::ZERO, |r| r / 2);
                        let guard = Duration::from_secs_f64(1.0 / fps);
                        let start = playout
                            .filter(|_| self.lifetimes)
                            .map(|d| now + d.saturating_sub(owd + guard));
                        self.queue.extend((0..self.video.frames_in(c)).map(|f| {
                            let due = start.map(|s| s + Duration::from_secs_f64(f as f64 / fps));
                            (c, f, due)
                        }));
                        self.flush(now, t);
                    }
                    _ => self.refused += 1,
                }
            }
            TransportEvent::Writable => self.flush(now, t),
            TransportEvent::PeerClosed => t.close(now),
            TransportEvent::Failed(e) => self.error = Some(e),
            _ => {}
        }
    }

    fn on_timeout(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        // The frame held back for room passed its deadline: drop it and
        // offer the next ones (smaller ones may fit now).
        self.flush(now, t);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.held.as_ref().and(self.held_deadline)
    }
}

/// What the client measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrameReport {
    /// When playback started (s from the session's start).
    pub startup_s: Option<f64>,
    /// Total stall (s).
    pub total_stall_s: f64,
    /// Stall events.
    pub stalls: u64,
    /// Frames played after their original time.
    pub delayed_frames: u64,
    /// `delayed_frames / fps` (s).
    pub delayed_frame_s: f64,
    /// Frames skipped (Hollywood).
    pub skipped_frames: u64,
    /// `skipped_frames / fps` (s).
    pub skip_s: f64,
    /// Frames played.
    pub played_frames: u64,
    /// Frames that arrived after they were skipped.
    pub late_frames: u64,
    /// Frames whose bytes were wrong (must be 0).
    pub corrupt_frames: u64,
    /// When playback ended (s).
    pub ended_s: Option<f64>,
    /// Why the client stopped early.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Play {
    /// Filling the start-up buffer.
    Startup,
    /// Frame `next` is due at `due` (s).
    Playing {
        next: u64,
        due: f64,
    },
    /// Waiting for frame `next` since `since`.
    Stalled {
        next: u64,
        since: f64,
    },
    Ended,
}

/// Chapter 6's client.
#[derive(Debug)]
pub struct FrameClient {
    arch: Arch,
    /// Frames buffered before playback starts.
    buffer_frames: u64,
    fps: f64,
    chunk_frames: u64,
    frames: u64,
    chunks: usize,
    t0: Option<Instant>,
    /// Per frame: arrived.
    have: Vec<bool>,
    /// Per chunk: frames arrived.
    per_chunk: Vec<u32>,
    chunk_len: Vec<u32>,
    requested: usize,
    play: Play,
    /// Playback start.
    start: f64,
    report: FrameReport,
    next_id: u32,
    outbox: VecDeque<OutMessage>,
    held: Option<OutMessage>,
}

impl FrameClient {
    /// A client for `video` (sizes unknown to it but the frame counts,
    /// which a manifest would give) under `arch`, starting after
    /// `buffer_frames` (request-response: a chunk).
    pub fn new(arch: Arch, video: &FrameVideo, buffer_frames: u32) -> FrameClient {
        let chunks = video.chunks();
        FrameClient {
            arch,
            buffer_frames: u64::from(buffer_frames.max(1)),
            fps: f64::from(video.fps),
            chunk_frames: u64::from(video.chunk_frames),
            frames: video.frames(),
            chunks,
            t0: None,
            have: vec![false; video.frames() as usize],
            per_chunk: vec![0; chunks],
            chunk_len: (0..chunks).map(|c| video.frames_in(c) as u32).collect(),
            requested: 0,
            play: Play::Startup,
            start: 0.0,
            report: FrameReport {
                startup_s: None,
                total_stall_s: 0.0,
                stalls: 0,
                delayed_frames: 0,
                delayed_frame_s: 0.0,
                skipped_frames: 0,
                skip_s: 0.0,
                played_frames: 0,
                late_frames: 0,
                corrupt_frames: 0,
                ended_s: None,
                error: None,
            },
            next_id: 0,
            outbox: VecDeque::new(),
            held: None,
        }
    }

    /// Playback ended or the client gave up.
    pub fn finished(&self) -> bool {
        self.play == Play::Ended || self.report.error.is_some()
    }

    /// What it measured.
    pub fn report(&self) -> FrameReport {
        let mut r = self.report.clone();
        r.delayed_frame_s = r.delayed_frames as f64 / self.fps;
        r.skip_s = r.skipped_frames as f64 / self.fps;
        r
    }

    /// What it measured by `now`, a stall still going on counted up to
    /// `now` (for a session cut short).
    pub fn report_at(&self, now: Instant) -> FrameReport {
        let mut r = self.report();
        if let Play::Stalled { since, .. } = self.play {
            r.total_stall_s += (self.secs(now) - since).max(0.0);
        }
        r
    }

    fn secs(&self, now: Instant) -> f64 {
        (now - self.t0.unwrap_or(now)).as_secs_f64()
    }

    /// Ask for chunk `c`, which will start playing `playout_in` from now
    /// if playback does not stall (`None`: not known yet).
    fn request(
        &mut self,
        now: Instant,
        t: &mut dyn MessageTransport,
        c: usize,
        playout_in: Option<Duration>,
    ) {
        if c >= self.chunks || c < self.requested {
            return;
        }
        self.requested = c + 1;
        let path = format!("/chunk/{c}");
        let mut m = OutMessage::new(self.next_id, http::request_playing_in(&path, playout_in));
        self.next_id = self.next_id.wrapping_add(1);
        m.substream = CONTROL;
        self.outbox.push_back(m);
        let mut held = self.held.take();
        let outbox = &mut self.outbox;
        let r = super::pump(now, t, &mut held, || outbox.pop_front());
        self.held = held;
        if let Err(e) = r {
            self.report.error = Some(format!("send: {e}"));
        }
    }

    /// Whether frame `k` can be played: its chunk complete under
    /// request-response, the frame itself otherwise.
    fn playable(&self, k: u64) -> bool {
        match self.arch {
            Arch::RequestResponse => {
                let c = (k / self.chunk_frames) as usize;
                self.per_chunk[c] == self.chunk_len[c]
            }
            _ => self.have[k as usize],
        }
    }

    /// The buffer to fill before playback (frames from 0).
    fn startup_ready(&self) -> bool {
        let need = match self.arch {
            Arch::RequestResponse => self.chunk_frames,
            _ => self.buffer_frames,
        }
        .min(self.frames);
        (0..need).all(|k| self.playable(k))
    }

    /// Play what is due by `now`; request the next chunk as a chunk starts.
    fn advance(&mut self, now_i: Instant, t: &mut dyn MessageTransport) {
        let now = self.secs(now_i);
        if self.play == Play::Startup && self.startup_ready() {
            self.start = now;
            self.report.startup_s = Some(now);
            self.play = Play::Playing { next: 0, due: now };
        }
        loop {
            match self.play {
                Play::Playing { next, due } if due <= now + 1e-9 => {
                    if next >= self.frames {
                        self.play = Play::Ended;
                        self.report.ended_s = Some(due);
                        return;
                    }
                    if next % self.chunk_frames == 0 {
                        // A chunk begins: ask for the next one (§6.1, §6.2).
                        let c = (next / self.chunk_frames) as usize;
                        let left = self.chunk_len[c] as f64 / self.fps;
                        self.request(now_i, t, c + 1, Some(Duration::from_secs_f64(left)));
                    }
                    if self.playable(next) {
                        if due > self.start + next as f64 / self.fps + 1e-9 {
                            self.report.delayed_frames += 1;
                        }
                        self.report.played_frames += 1;
                        self.play = Play::Playing {
                            next: next + 1,
                            due: due + 1.0 / self.fps,
                        };
                    } else if self.arch == Arch::Hollywood {
                        self.report.skipped_frames += 1;
                        self.play = Play::Playing {
                            next: next + 1,
                            due: due + 1.0 / self.fps,
                        };
                    } else {
                        self.report.stalls += 1;
                        self.play = Play::Stalled { next, since: due };
                    }
                }
                Play::Stalled { next, since } if self.playable(next) => {
                    let waited = (now - since).max(0.0);
                    self.report.total_stall_s += waited;
                    self.play = Play::Playing { next, due: now };
                }
                _ => return,
            }
        }
    }
}

impl TransportApp for FrameClient {
    fn on_start(&mut self, now: Instant, _t: &mut dyn MessageTransport) {
        self.t0 = Some(now);
    }

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        if self.finished() {
            return;
        }
        match ev {
            TransportEvent::Connected => {
                // Fill the buffer: the first chunk (request-response holds
                // one chunk; progressive asks for chunk 1 when 0 starts).
                self.request(now, t, 0, None);
            }
            TransportEvent::Message(m) if m.substream == DATA => match parse_frame(&m.payload) {
                Ok((c, f, n, body)) => {
                    let (c, f) = (c as usize, f as usize);
                    if c >= self.chunks
                        || f >= self.chunk_len[c] as usize
                        || usize::from(n) != self.chunk_len[c] as usize
                    {
                        self.report.error = Some(format!("frame {f} of chunk {c} does not exist"));
                        return;
                    }
                    if !frame_intact(c as u32, f as u16, body) {
                        self.report.corrupt_frames += 1;
                        return;
                    }
                    let k = c as u64 * self.chunk_frames + f as u64;
                    if self.have[k as usize] {
                        return;
                    }
                    // Already skipped: discarded (Hollywood).
                    let passed = matches!(self.play, Play::Playing { next, .. } | Play::Stalled { next, .. } if next > k);
                    if passed {
                        self.report.late_frames += 1;
                    }
                    self.have[k as usize] = true;
                    self.per_chunk[c] += 1;
                    self.advance(now, t);
                }
                Err(e) => self.report.error = Some(e),
            },
            TransportEvent::Message(m) => {
                self.report.error = Some(format!("a message on sub-stream {}", m.substream));
            }
            TransportEvent::PeerClosed | TransportEvent::Closed => {
                self.report.error = Some("the server closed the connection".into());
            }
            TransportEvent::Failed(e) => {
                self.report.error = Some(format!("connection failed: {e}"))
            }
            _ => {}
        }
    }

    fn on_timeout(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        if !self.finished() {
            self.advance(now, t);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.play {
            Play::Playing { due, .. } if !self.finished() => {
                Some(self.t0? + Duration::from_secs_f64(due.max(0.0)) + Duration::from_nanos(2))
            }
            _ => None,
        }
    }
}

/// One chapter 6 session.
#[derive(Debug, Clone)]
pub struct Ch6Scenario {
    /// Architecture (its transport follows: [`Arch::transport`]).
    pub arch: Arch,
    /// The video.
    pub video: std::sync::Arc<FrameVideo>,
    /// Progressive: frames buffered before playback (request-response:
    /// ignored, the buffer is a chunk).
    pub buffer_frames: u32,
    /// The path.
    pub phases: Vec<Phase>,
    /// Congestion control at both ends.
    pub cc: CcAlgorithm,
    /// Seed.
    pub seed: u64,
    /// [`Arch::Hollywood`]: frames carry the lifetime of their playout
    /// deadline ([`FrameServer::with_lifetimes`]); else every frame is
    /// reliable.
    pub lifetimes: bool,
}

/// What a session measured.
#[derive(Debug, Clone, Serialize)]
pub struct Ch6Run {
    /// Architecture.
    pub arch: Arch,
    /// The client's figures.
    pub report: FrameReport,
    /// Segments the server retransmitted.
    pub retransmitted_segments: u64,
    /// Simulated seconds.
    pub sim_seconds: f64,
    /// Playback had not ended by the time limit; the report's figures are
    /// then lower bounds (a stall going on is counted up to the limit).
    pub timed_out: bool,
    /// Frames the server dropped before sending (past their deadline).
    pub dropped_frames: u64,
    /// Messages the sender's engine dropped as expired before sending
    /// (thesis §4.2).
    pub expired_unsent: u64,
    /// Retransmission slots the sender's engine rewrote with live data
    /// (inconsistent retransmissions, thesis §4.2).
    pub rewritten_slots: u64,
    /// The sender engine's Hollywood counters.
    #[serde(skip)]
    pub hollywood: hollywood_tcp::HollywoodStats,
}

impl Ch6Scenario {
    /// Play the whole video (time limit: three times its length plus ten
    /// minutes; see [`Ch6Run::timed_out`]).
    pub fn run(&self) -> Result<Ch6Run, String> {
        if self.arch != Arch::RequestResponse && self.buffer_frames == 0 {
            return Err("a progressive client needs a buffer of at least one frame".into());
        }
        let length =
            Duration::from_secs_f64(self.video.frames() as f64 / f64::from(self.video.fps));
        let (mut sim, server, client) = build_path(
            &crate::generic::GenericTransport::Tcp(self.arch.transport()),
            self.cc,
            &self.phases,
            None,
            self.seed,
            FrameServer::new(self.video.clone())
                .with_lifetimes(self.lifetimes && self.arch == Arch::Hollywood),
            FrameClient::new(self.arch, &self.video, self.buffer_frames),
        )?;
        let limit = Instant::ZERO + length * 3 + Duration::from_secs(600);
        while sim.now() < limit {
            sim.run_for(Duration::from_secs(1))
                .map_err(|e| e.to_string())?;
            if sim
                .node_mut::<TransportHost<FrameClient>>(client)
                .expect("client")
                .app()
                .finished()
            {
                break;
            }
        }
        let now = sim.now();
        let s = sim
            .node_mut::<TransportHost<FrameServer>>(server)
            .expect("server");
        if let Some(e) = &s.app().error {
            return Err(format!("server: {e}"));
        }
        let retransmitted_segments = retransmitted(s);
        let dropped_frames = s.app().dropped_frames;
        let h = s
            .transport()
            .as_any()
            .downcast_ref::<hollywood_transport::tcp::TcpTransport>()
            .map(|t| t.details().hollywood)
            .unwrap_or_default();
        let mut report = sim
            .node_mut::<TransportHost<FrameClient>>(client)
            .expect("client")
            .app()
            .report_at(now);
        let timed_out = report.ended_s.is_none() && report.error.is_none();
        if timed_out {
            report.error = Some(format!(
                "playback had not ended after {:.0} s",
                now.since_epoch().as_secs_f64()
            ));
        }
        Ok(Ch6Run {
            arch: self.arch,
            report,
            retransmitted_segments,
            sim_seconds: now.since_epoch().as_secs_f64(),
            timed_out,
            dropped_frames,
            expired_unsent: h.not_sent,
            rewritten_slots: h.ir_sent + h.replaced_at_first_tx,
            hollywood: h,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn run(
        arch: Arch,
        enc: u64,
        chunk_frames: u32,
        buffer: u32,
        rtt_ms: u64,
        loss: f64,
        secs: u64,
    ) -> Ch6Run {
        run_with(arch, enc, chunk_frames, buffer, rtt_ms, loss, secs, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_with(
        arch: Arch,
        enc: u64,
        chunk_frames: u32,
        buffer: u32,
        rtt_ms: u64,
        loss: f64,
        secs: u64,
        lifetimes: bool,
    ) -> Ch6Run {
        let video = FrameVideo::new(
            enc,
            60,
            chunk_frames,
            Duration::from_secs(secs),
            5.0,
            0.1,
            1,
        )
        .unwrap();
        Ch6Scenario {
            arch,
            video: Arc::new(video),
            buffer_frames: buffer,
            phases: vec![Phase {
                at: Duration::ZERO,
                rate_bps: 30_000_000,
                rtt: Duration::from_millis(rtt_ms),
                loss,
            }],
            cc: CcAlgorithm::Cubic,
            seed: 1,
            lifetimes,
        }
        .run()
        .unwrap()
    }

    fn sane(r: &Ch6Run, frames: u64) {
        let p = &r.report;
        assert_eq!(p.error, None);
        assert_eq!(p.corrupt_frames, 0);
        assert_eq!(p.played_frames + p.skipped_frames, frames);
        assert!(p.delayed_frames <= p.played_frames);
        // Playback time = the video + the stalls.
        let span = p.ended_s.unwrap() - p.startup_s.unwrap();
        assert!(
            (span - frames as f64 / 60.0 - p.total_stall_s).abs() < 1e-6,
            "{span}"
        );
    }

    #[test]
    fn frame_bytes_round_trip_and_a_changed_byte_shows() {
        for size in [0, 1, 255, 256, 257, 70_000] {
            let m = frame_message(300, 7, 60, size);
            let (c, f, n, body) = parse_frame(&m).unwrap();
            assert_eq!((c, f, n, body.len()), (300, 7, 60, size));
            assert!(frame_intact(c, f, body));
            assert!(body.len() < 2 || !frame_intact(c, f + 1, body));
            if size > 0 {
                let mut bad = body.to_vec();
                bad[size - 1] ^= 1;
                assert!(!frame_intact(c, f, &bad));
            }
        }
    }

    #[test]
    fn frame_sizes_keep_the_rate_with_a_large_i_frame() {
        let v = FrameVideo::new(12_000_000, 60, 30, Duration::from_secs(60), 10.0, 0.1, 3).unwrap();
        assert_eq!(v.frames(), 3600);
        assert_eq!(v.chunks(), 120);
        assert!((v.rate_bps() / 12e6 - 1.0).abs() < 0.03, "{}", v.rate_bps());
        let ratio = f64::from(v.size(5, 0).unwrap()) / f64::from(v.size(5, 1).unwrap());
        assert!((ratio - 10.0).abs() < 1e-3, "{ratio}");
        // An I-frame too large for one message is refused.
        assert!(FrameVideo::new(53_000_000, 60, 60, Duration::from_secs(2), 20.0, 0.0, 1).is_err());
        assert!(FrameVideo::new(12_000_000, 60, 0, Duration::from_secs(1), 10.0, 0.1, 1).is_err());
        assert!(FrameVideo::new(12_000_000, 60, 30, Duration::ZERO, 10.0, 0.1, 1).is_err());
        assert!(FrameVideo::new(12_000_000, 60, 30, Duration::from_secs(1), 0.5, 0.1, 1).is_err());
    }

    #[test]
    fn lossless_low_rate_plays_smoothly_everywhere() {
        for arch in [Arch::RequestResponse, Arch::Push, Arch::Hollywood] {
            let r = run(arch, 7_500_000, 30, 10, 25, 0.0, 20);
            sane(&r, 1200);
            assert_eq!(r.report.total_stall_s, 0.0, "{arch:?}");
            assert_eq!(r.report.skipped_frames, 0, "{arch:?}");
        }
    }

    #[test]
    fn an_encoding_above_the_bottleneck_stalls_or_skips_continuously() {
        let rr = run(Arch::RequestResponse, 53_000_000, 30, 10, 25, 0.0, 10);
        sane(&rr, 600);
        assert!(rr.report.total_stall_s > 5.0, "{}", rr.report.total_stall_s);
        let hw = run(Arch::Hollywood, 53_000_000, 60, 10, 25, 0.0, 10);
        sane(&hw, 600);
        assert_eq!(hw.report.total_stall_s, 0.0);
        assert!(
            hw.report.skipped_frames > 100,
            "{}",
            hw.report.skipped_frames
        );
    }

    #[test]
    fn short_chunks_at_a_long_rtt_stall_request_response_but_hollywood_never_stalls() {
        // 6 frames = 100 ms < one 100 ms RTT + the download: eq. 6.9 fails.
        let rr = run(Arch::RequestResponse, 12_000_000, 6, 6, 100, 0.002, 20);
        sane(&rr, 1200);
        assert!(
            rr.report.total_stall_s > 1.0 && rr.report.delayed_frames > 600,
            "{:?}",
            rr.report
        );
        let hw = run(Arch::Hollywood, 12_000_000, 60, 12, 100, 0.002, 20);
        sane(&hw, 1200);
        assert_eq!(hw.report.total_stall_s, 0.0);
        assert_eq!(hw.report.delayed_frames, 0);
    }

    #[test]
    fn frames_with_their_deadline_as_lifetime_skip_less_when_the_path_cannot_keep_up() {
        // CUBIC through 0.2 % loss at 100 ms carries about 4-5 Mb/s: a
        // 7.5 Mb/s stream cannot all come in time.
        let lt = run_with(Arch::Hollywood, 7_500_000, 60, 6, 100, 0.002, 20, true);
        let rel = run_with(Arch::Hollywood, 7_500_000, 60, 6, 100, 0.002, 20, false);
        sane(&lt, 1200);
        sane(&rel, 1200);
        assert_eq!(lt.report.total_stall_s, 0.0);
        // Reliable: the sender falls ever further behind and almost
        // everything after start-up comes too late.
        assert!(rel.report.skipped_frames > 600, "{:?}", rel.report);
        assert_eq!(rel.expired_unsent + rel.dropped_frames, 0);
        // With lifetimes the engine drops what cannot arrive in time and
        // what it sends mostly plays.
        assert!(lt.expired_unsent + lt.dropped_frames > 100, "{lt:?}");
        assert!(
            lt.report.played_frames > rel.report.played_frames * 3 / 2,
            "{} vs {}",
            lt.report.played_frames,
            rel.report.played_frames
        );
        assert!(
            lt.report.late_frames * 3 < rel.report.late_frames,
            "{:?}",
            lt.report
        );
        // Standard TCP ignores lifetimes: push is the same either way.
        let a = run_with(Arch::Push, 7_500_000, 60, 6, 100, 0.002, 10, true);
        let b = run_with(Arch::Push, 7_500_000, 60, 6, 100, 0.002, 10, false);
        assert_eq!(a.report, b.report);
    }
}
