//! Chapter 6's client: it asks for chunks, checks each frame's bytes and
//! plays frame by frame, stalling or skipping ([`FrameClient`]).

use super::video::*;
use super::*;
use crate::dash::h2;
use crate::dash::http::{self, CONTROL};
use hollywood_tcp::Instant;
use hollywood_transport::{MessageTransport, TransportApp, TransportEvent};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

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
pub(super) enum Play {
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

/// The client returns the connection window every this many DATA bytes.
const WINDOW_RETURN: u64 = 1 << 20;

/// Chapter 6's client.
#[derive(Debug)]
pub struct FrameClient {
    pub(super) arch: Arch,
    /// Frames buffered before playback starts.
    pub(super) buffer_frames: u64,
    pub(super) fps: f64,
    pub(super) chunk_frames: u64,
    pub(super) frames: u64,
    pub(super) chunks: usize,
    pub(super) t0: Option<Instant>,
    /// Per frame: arrived.
    pub(super) have: Vec<bool>,
    /// Per chunk: frames arrived.
    pub(super) per_chunk: Vec<u32>,
    pub(super) chunk_len: Vec<u32>,
    pub(super) requested: usize,
    pub(super) play: Play,
    /// Playback start.
    pub(super) start: f64,
    pub(super) report: FrameReport,
    pub(super) next_id: u32,
    pub(super) outbox: VecDeque<OutMessage>,
    pub(super) held: Option<OutMessage>,
    /// The preface went out (with the first request).
    pub(super) preface_sent: bool,
    pub(super) next_stream: u32,
    /// Open streams: requests and pushed frames.
    pub(super) streams: HashMap<u32, Incoming>,
    /// DATA bytes received since the last connection WINDOW_UPDATE.
    pub(super) unacked: u64,
}

/// A stream the client receives on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Incoming {
    /// Chunk.
    c: usize,
    /// The pushed frame, or `None` for the request stream of the chunk.
    f: Option<usize>,
    /// content-length.
    len: Option<usize>,
    /// DATA bytes so far.
    got: usize,
    /// A byte was wrong.
    bad: bool,
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
            preface_sent: false,
            next_stream: 1,
            streams: HashMap::new(),
            unacked: 0,
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
        let mut b = Vec::new();
        if !self.preface_sent {
            // RFC 9113 §3.4: the preface, our SETTINGS (push only when
            // progressive; stateless header blocks; the largest stream
            // window) and the largest connection window.
            self.preface_sent = true;
            b.extend_from_slice(h2::PREFACE);
            let push = u32::from(self.arch != Arch::RequestResponse);
            h2::write_settings(
                &mut b,
                &[
                    (h2::setting::HEADER_TABLE_SIZE, 0),
                    (h2::setting::ENABLE_PUSH, push),
                    (h2::setting::INITIAL_WINDOW_SIZE, h2::MAX_WINDOW),
                ],
            );
            h2::write_window_update(&mut b, 0, h2::MAX_WINDOW - h2::INITIAL_WINDOW);
        }
        let stream = self.next_stream;
        self.next_stream += 2;
        let path = format!("/chunk/{c}");
        let playout = playout_in.map(|d| d.as_millis().to_string());
        let playout_name = http::PLAYOUT_IN.to_ascii_lowercase();
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":authority", AUTHORITY),
            (b":path", path.as_bytes()),
        ];
        if let Some(p) = &playout {
            fields.push((playout_name.as_bytes(), p.as_bytes()));
        }
        h2::write_headers(&mut b, stream, &fields, true);
        self.streams.insert(
            stream,
            Incoming {
                c,
                f: None,
                len: None,
                got: 0,
                bad: false,
            },
        );
        self.send(now, t, b);
    }

    /// Send `bytes` on the control sub-stream.
    fn send(&mut self, now: Instant, t: &mut dyn MessageTransport, bytes: Vec<u8>) {
        let mut m = OutMessage::new(self.next_id, bytes);
        self.next_id = self.next_id.wrapping_add(1);
        m.substream = CONTROL;
        self.outbox.push_back(m);
        let mut held = self.held.take();
        let outbox = &mut self.outbox;
        let r = crate::dash::pump(now, t, &mut held, || outbox.pop_front());
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

impl FrameClient {
    /// The server's HTTP/2 frames of one message. Over TCP Hollywood a
    /// message may arrive out of order or never, so each one stands alone:
    /// a pushed frame's message holds its PUSH_PROMISE, HEADERS and all
    /// its DATA, and header blocks need no earlier block ([`h2`]). A
    /// PUSH_PROMISE is accepted on a request stream that has already
    /// ended — with unordered delivery the 204 that ends it can overtake
    /// the pushes (RFC 9113 §6.6 would make that an error over TCP).
    fn on_server_bytes(
        &mut self,
        now: Instant,
        t: &mut dyn MessageTransport,
        buf: &[u8],
    ) -> Result<(), String> {
        for fr in h2::frames(buf) {
            let fr = fr?;
            match fr.kind {
                h2::kind::SETTINGS if fr.flags & h2::flag::ACK == 0 => {
                    h2::settings(&fr)?;
                    let mut b = Vec::new();
                    h2::write_settings_ack(&mut b);
                    self.send(now, t, b);
                }
                h2::kind::PUSH_PROMISE => {
                    if self.arch == Arch::RequestResponse {
                        return Err("a PUSH_PROMISE with push disabled".into());
                    }
                    let (block, promised) = h2::header_block(&fr)?;
                    let promised = promised.expect("PUSH_PROMISE");
                    let fields = h2::decode_block(block)?;
                    let (c, f) = h2::field(&fields, ":path")
                        .and_then(parse_frame_path)
                        .filter(|&(c, f)| c < self.chunks && f < self.chunk_len[c] as usize)
                        .ok_or_else(|| format!("a push of {:?}", h2::field(&fields, ":path")))?;
                    if promised % 2 == 1 || self.streams.len() >= 1 << 16 {
                        return Err(format!("promised stream {promised}"));
                    }
                    self.streams.insert(
                        promised,
                        Incoming {
                            c,
                            f: Some(f),
                            len: None,
                            got: 0,
                            bad: false,
                        },
                    );
                }
                h2::kind::HEADERS => {
                    let (block, _) = h2::header_block(&fr)?;
                    let fields = h2::decode_block(block)?;
                    let s = self
                        .streams
                        .get_mut(&fr.stream)
                        .ok_or_else(|| format!("HEADERS on stream {}", fr.stream))?;
                    let status = h2::field(&fields, ":status");
                    let request_of_push = s.f.is_none() && self.arch != Arch::RequestResponse;
                    match status {
                        Some("204") if request_of_push => {}
                        Some("200") if !request_of_push => {
                            let len = h2::field(&fields, "content-length")
                                .and_then(|v| v.parse().ok())
                                .ok_or("a response without its content-length")?;
                            s.len = Some(len);
                        }
                        _ => return Err(format!("status {status:?} on stream {}", fr.stream)),
                    }
                    if fr.flags & h2::flag::END_STREAM != 0 {
                        self.finish(now, t, fr.stream);
                    }
                }
                h2::kind::DATA => {
                    let d = h2::data(&fr)?;
                    self.unacked += fr.payload.len() as u64;
                    let s = self
                        .streams
                        .get_mut(&fr.stream)
                        .filter(|s| s.len.is_some())
                        .ok_or_else(|| format!("DATA on stream {}", fr.stream))?;
                    if !pattern_intact(pattern_key(s.c, s.f), s.got, d) {
                        s.bad = true;
                    }
                    s.got += d.len();
                    if fr.flags & h2::flag::END_STREAM != 0 {
                        self.finish(now, t, fr.stream);
                    }
                }
                h2::kind::GOAWAY => return Err("the server sent GOAWAY".into()),
                h2::kind::RST_STREAM => return Err(format!("RST_STREAM on {}", fr.stream)),
                _ => {}
            }
        }
        if self.unacked >= WINDOW_RETURN {
            // Give the connection window back (RFC 9113 §6.9).
            let mut b = Vec::new();
            h2::write_window_update(&mut b, 0, self.unacked as u32);
            self.unacked = 0;
            self.send(now, t, b);
        }
        Ok(())
    }

    /// Stream `stream` ended: a frame, or (request-response) a chunk,
    /// arrived whole, or its bytes were wrong.
    fn finish(&mut self, now: Instant, t: &mut dyn MessageTransport, stream: u32) {
        let Some(s) = self.streams.remove(&stream) else {
            return;
        };
        let whole = !s.bad && s.len == Some(s.got);
        match s.f {
            None if self.arch != Arch::RequestResponse => {}
            None => {
                if !whole {
                    self.report.corrupt_frames += u64::from(self.chunk_len[s.c]);
                    return;
                }
                for f in 0..self.chunk_len[s.c] as usize {
                    self.arrived(s.c, f);
                }
                self.advance(now, t);
            }
            Some(f) => {
                if !whole {
                    self.report.corrupt_frames += 1;
                    return;
                }
                self.arrived(s.c, f);
                self.advance(now, t);
            }
        }
    }

    /// Frame `f` of chunk `c` is in.
    fn arrived(&mut self, c: usize, f: usize) {
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
            TransportEvent::Message(m) => {
                if let Err(e) = self.on_server_bytes(now, t, &m.payload) {
                    self.report.error = Some(format!("HTTP/2: {e}"));
                }
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
