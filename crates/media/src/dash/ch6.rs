//! Thesis chapter 6's three DASH architectures in the simulator, at a
//! fixed encoding rate (no adaptation), frame by frame (REFERENCES.md thesis ch. 6, setup and
//! architectures):
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
//! The wire is HTTP/2 ([`h2`], docs/DASH.md "HTTP/2 on the wire"): the
//! client's preface and SETTINGS (push enabled for the progressive
//! architectures), one HEADERS frame per request; per pushed frame one
//! message holding its PUSH_PROMISE, HEADERS and DATA; per
//! request-response chunk HEADERS and DATA on the request stream. Header
//! blocks are stateless, so each message decodes alone in any order.
//!
//! Frame sizes (ours; the thesis encoded Big Buck Bunny): a chunk of F
//! frames carries `R_encoding × F / fps` bytes times a per-chunk
//! complexity factor (log-normal, σ = 0.1), one I-frame `iframe_ratio`
//! times the size of each of its F − 1 P-frames (the average bit-rate
//! kept, the thesis's Fig. 6.3 policy).

use super::h2;
use super::http::{self, CONTROL, DATA};
use super::{build_path, retransmitted, Phase};
use crate::stream::Transport;
use hollywood_sim::TransportHost;
use hollywood_tcp::{CcAlgorithm, Instant};
use hollywood_transport::{MessageTransport, OutMessage, TransportApp, TransportEvent};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

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

/// Sent messages whose window credit the server keeps track of.
const CREDIT_TRACKED: usize = 1 << 16;

/// The HTTP authority the client asks.
const AUTHORITY: &[u8] = b"hollywood";

/// The pattern of a resource's bytes: frame `f` of chunk `c` (pushed), or
/// all of chunk `c` (`f = None`, request-response).
fn pattern_key(c: usize, f: Option<usize>) -> u8 {
    // Mixed, so that neighbouring resources ((c, f) and (f, c) included)
    // differ.
    let f = f.map_or(0, |f| f as u64 + 1);
    let h =
        (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ f.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (h.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 56) as u8
}

/// Two periods of a resource's bytes: byte `i` is `i ^ key` (low bytes).
fn pattern(key: u8) -> [u8; 512] {
    std::array::from_fn(|i| (i as u8) ^ key)
}

/// Append bytes `offset .. offset + len` of the resource `key`.
fn fill_pattern(out: &mut Vec<u8>, key: u8, offset: usize, len: usize) {
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
fn pattern_intact(key: u8, offset: usize, bytes: &[u8]) -> bool {
    let p = pattern(key);
    let s = offset % 256;
    bytes.chunks(256).all(|b| b == &p[s..s + b.len()])
}

/// `/chunk/<c>/frame/<f>`, the path of a pushed frame.
fn frame_path(c: usize, f: usize) -> String {
    format!("/chunk/{c}/frame/{f}")
}

fn parse_frame_path(p: &str) -> Option<(usize, usize)> {
    let (c, f) = p.strip_prefix("/chunk/")?.split_once("/frame/")?;
    Some((c.parse().ok()?, f.parse().ok()?))
}

/// What the server has to send.
#[derive(Debug, Clone)]
enum Item {
    /// Connection-level frames (SETTINGS, their acknowledgement).
    Control(Vec<u8>),
    /// Frame `f` of chunk `c`, due by `deadline`: pushed on a stream of
    /// its own, or the next part of the response on `stream`.
    Frame {
        c: usize,
        f: usize,
        deadline: Option<Instant>,
        stream: u32,
        /// Pushed (the client's SETTINGS_ENABLE_PUSH when it asked).
        push: bool,
    },
    /// The response that ends request stream `stream` once every frame of
    /// its chunk was pushed.
    End { stream: u32 },
}

/// The server: HTTP/2 on the message transport (RFC 9113; [`h2`]). On
/// `GET /chunk/<c>` it either pushes every frame of chunk `c` as its own
/// resource (`/chunk/<c>/frame/<f>`), one message per frame holding its
/// PUSH_PROMISE, HEADERS and DATA, then ends the request with a 204 — or,
/// if the client disabled push (`SETTINGS_ENABLE_PUSH = 0`), answers with
/// the whole chunk, one message per frame's bytes. Frames are reliable,
/// or (with [`FrameServer::with_lifetimes`]) each has the lifetime of its
/// playout deadline and P-frames depend on their chunk's I-frame (thesis
/// §4.2, Table 7.2). It keeps to the client's connection flow-control
/// window (RFC 9113 §6.9).
#[derive(Debug)]
pub struct FrameServer {
    video: std::sync::Arc<FrameVideo>,
    queue: VecDeque<Item>,
    held: Option<OutMessage>,
    /// The held message's deadline.
    held_deadline: Option<Instant>,
    /// DATA bytes of the held message (charged to the window).
    held_data: usize,
    /// The last chunk whose I-frame was taken: (chunk, its message id, or
    /// `None` if it was dropped).
    iframe: Option<(usize, Option<u32>)>,
    lifetimes: bool,
    next_id: u32,
    /// The client's connection preface arrived.
    preface: bool,
    /// SETTINGS_ENABLE_PUSH (initially 1, RFC 9113 §6.5.2).
    push: bool,
    /// The client's SETTINGS_INITIAL_WINDOW_SIZE.
    stream_window: u32,
    /// The connection's send window.
    conn_window: i64,
    /// DATA bytes of sent messages that may still expire (they have a
    /// lifetime), until acknowledged or expired: an expiry before sending
    /// gives the bytes back to the window. At most [`CREDIT_TRACKED`]
    /// (oldest forgotten first).
    may_expire: HashMap<u32, usize>,
    may_expire_order: VecDeque<u32>,
    last_request_stream: u32,
    next_promised: u32,
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
            held_data: 0,
            iframe: None,
            lifetimes: false,
            next_id: 0,
            preface: false,
            push: true,
            stream_window: h2::INITIAL_WINDOW,
            conn_window: i64::from(h2::INITIAL_WINDOW),
            may_expire: HashMap::new(),
            may_expire_order: VecDeque::new(),
            last_request_stream: 0,
            next_promised: 2,
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

    /// Requests refused (malformed, or for chunks that do not exist).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Refuse a client that asks for more than 2^20 queued items without
    /// reading (requests, SETTINGS, PINGs: every one queues an answer).
    fn check_room(&self) -> Result<(), String> {
        if self.queue.len() >= 1 << 20 {
            return Err("more than 2^20 responses queued: the client does not read".into());
        }
        Ok(())
    }

    fn enqueue(&mut self, item: Item) -> Result<(), String> {
        self.check_room()?;
        self.queue.push_back(item);
        Ok(())
    }

    fn message(&mut self, substream: u16, bytes: Vec<u8>) -> OutMessage {
        let mut m = OutMessage::new(self.next_id, bytes);
        m.substream = substream;
        self.next_id = self.next_id.wrapping_add(1);
        m
    }

    fn next_frame(&mut self, now: Instant) -> Option<OutMessage> {
        loop {
            let item = self.queue.pop_front()?;
            self.held_deadline = None;
            self.held_data = 0;
            let (c, f, deadline, stream, push) = match item {
                Item::Control(b) => return Some(self.message(CONTROL, b)),
                Item::End { stream } => {
                    let mut b = Vec::new();
                    h2::write_headers(&mut b, stream, &[(b":status", b"204")], true);
                    return Some(self.message(CONTROL, b));
                }
                Item::Frame {
                    c,
                    f,
                    deadline,
                    stream,
                    push,
                } => (c, f, deadline, stream, push),
            };
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
            if size as i64 > self.conn_window {
                // RFC 9113 §6.9: wait for the client's WINDOW_UPDATE.
                self.queue.push_front(item);
                return None;
            }
            self.conn_window -= size as i64;
            let mut b = Vec::with_capacity(size + message_overhead(size));
            if push {
                if self.next_promised > h2::MAX_WINDOW {
                    // Server stream ids are spent (RFC 9113 §5.1.1): no
                    // more pushes on this connection.
                    self.error = Some("promised stream ids exhausted".into());
                    self.queue.clear();
                    return None;
                }
                let promised = self.next_promised;
                self.next_promised += 2;
                let path = frame_path(c, f);
                h2::write_push_promise(
                    &mut b,
                    stream,
                    promised,
                    &[
                        (b":method", b"GET"),
                        (b":scheme", b"http"),
                        (b":authority", AUTHORITY),
                        (b":path", path.as_bytes()),
                    ],
                );
                let len = size.to_string();
                h2::write_headers(
                    &mut b,
                    promised,
                    &[
                        (b":status", b"200"),
                        (b"content-type", b"video/mp4"),
                        (b"content-length", len.as_bytes()),
                    ],
                    false,
                );
                let key = pattern_key(c, Some(f));
                h2::write_data_with(&mut b, promised, size, true, |out, at, n| {
                    fill_pattern(out, key, at, n)
                });
            } else {
                if f == 0 {
                    let len = self.video.chunk_bytes(c).to_string();
                    h2::write_headers(
                        &mut b,
                        stream,
                        &[
                            (b":status", b"200"),
                            (b"content-type", b"video/mp4"),
                            (b"content-length", len.as_bytes()),
                        ],
                        false,
                    );
                }
                let offset = self.video.offset(c, f);
                let key = pattern_key(c, None);
                let last = f + 1 == self.video.frames_in(c);
                h2::write_data_with(&mut b, stream, size, last, |out, at, n| {
                    fill_pattern(out, key, offset + at, n)
                });
            }
            let mut m = self.message(DATA, b);
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
            if lifetime.is_some() {
                self.may_expire.insert(m.id, size);
                self.may_expire_order.push_back(m.id);
                if self.may_expire_order.len() > CREDIT_TRACKED {
                    if let Some(old) = self.may_expire_order.pop_front() {
                        self.may_expire.remove(&old);
                    }
                }
            }
            self.held_deadline = deadline;
            self.held_data = size;
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
                    // next message takes it; its promised stream id stays
                    // unused, which RFC 9113 §5.1.1 allows).
                    if let (Some(c), Some(k)) = (m.group, m.frame) {
                        self.drop_frame(c as usize, (k % 65536) as usize);
                    }
                    self.conn_window += self.held_data as i64;
                    self.may_expire.remove(&m.id);
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

    /// The client's bytes: its preface, SETTINGS, WINDOW_UPDATEs and
    /// requests. `Err`: a connection error (the client is not ours).
    fn on_client_bytes(
        &mut self,
        now: Instant,
        t: &dyn MessageTransport,
        mut buf: &[u8],
    ) -> Result<(), String> {
        if !self.preface {
            buf = buf
                .strip_prefix(h2::PREFACE)
                .ok_or("the first message is not an HTTP/2 connection preface")?;
            self.preface = true;
            // Our SETTINGS: stateless header blocks ([`h2`]).
            let mut b = Vec::new();
            h2::write_settings(&mut b, &[(h2::setting::HEADER_TABLE_SIZE, 0)]);
            self.queue.push_front(Item::Control(b));
        }
        for fr in h2::frames(buf) {
            let fr = fr?;
            match fr.kind {
                h2::kind::SETTINGS if fr.flags & h2::flag::ACK == 0 => {
                    for (id, v) in h2::settings(&fr)? {
                        match id {
                            h2::setting::ENABLE_PUSH if v <= 1 => self.push = v == 1,
                            h2::setting::ENABLE_PUSH => {
                                return Err(format!("SETTINGS_ENABLE_PUSH {v}"))
                            }
                            h2::setting::INITIAL_WINDOW_SIZE if v <= h2::MAX_WINDOW => {
                                self.stream_window = v
                            }
                            h2::setting::INITIAL_WINDOW_SIZE => {
                                return Err(format!("SETTINGS_INITIAL_WINDOW_SIZE {v}"))
                            }
                            _ => {}
                        }
                    }
                    // Acknowledged at once (RFC 9113 §6.5.3), ahead of
                    // queued frames.
                    let mut b = Vec::new();
                    h2::write_settings_ack(&mut b);
                    self.check_room()?;
                    self.queue.push_front(Item::Control(b));
                }
                h2::kind::WINDOW_UPDATE if fr.stream == 0 => {
                    self.conn_window += i64::from(h2::window_increment(&fr)?);
                    if self.conn_window > i64::from(h2::MAX_WINDOW) {
                        return Err("FLOW_CONTROL_ERROR: window above 2^31 - 1".into());
                    }
                }
                h2::kind::HEADERS => self.on_request(now, t, fr.stream, &fr)?,
                h2::kind::PING if fr.flags & h2::flag::ACK == 0 => {
                    // RFC 9113 §6.7: answered at once with the same data.
                    if fr.payload.len() != 8 || fr.stream != 0 {
                        return Err("malformed PING".into());
                    }
                    let mut b = Vec::new();
                    h2::write_frame(&mut b, h2::kind::PING, h2::flag::ACK, 0, fr.payload);
                    self.check_room()?;
                    self.queue.push_front(Item::Control(b));
                }
                h2::kind::GOAWAY => return Err("the client sent GOAWAY".into()),
                // Stream WINDOW_UPDATE (no response exceeds the initial
                // stream window: checked per request), PING, PRIORITY,
                // unknown types (ignored, RFC 9113 §4.1).
                _ => {}
            }
        }
        Ok(())
    }

    fn on_request(
        &mut self,
        now: Instant,
        t: &dyn MessageTransport,
        stream: u32,
        fr: &h2::Frame<'_>,
    ) -> Result<(), String> {
        if stream.is_multiple_of(2) || stream <= self.last_request_stream {
            return Err(format!("request on stream {stream}"));
        }
        self.last_request_stream = stream;
        let (block, _) = h2::header_block(fr)?;
        let fields = h2::decode_block(block)?;
        let playout_name = http::PLAYOUT_IN.to_ascii_lowercase();
        let request = (h2::field(&fields, ":method") == Some("GET"))
            .then(|| {
                h2::field(&fields, ":path")?
                    .strip_prefix("/chunk/")?
                    .parse::<usize>()
                    .ok()
            })
            .flatten()
            .filter(|&c| c < self.video.chunks());
        let Some(c) = request else {
            self.refused += 1;
            let mut b = Vec::new();
            h2::write_headers(&mut b, stream, &[(b":status", b"404")], true);
            return self.enqueue(Item::Control(b));
        };
        let playout = match h2::field(&fields, &playout_name) {
            None => None,
            Some(v) => Some(Duration::from_millis(
                v.parse().map_err(|_| format!("{playout_name}: {v:?}"))?,
            )),
        };
        let largest = if self.push {
            (0..self.video.frames_in(c))
                .map(|f| self.video.size(c, f).unwrap_or(0) as usize)
                .max()
                .unwrap_or(0)
        } else {
            self.video.chunk_bytes(c)
        };
        if largest > self.stream_window as usize {
            return Err(format!(
                "a response of {largest} bytes exceeds the client's stream window of {}",
                self.stream_window
            ));
        }
        self.check_room()?;
        self.requests += 1;
        let fps = f64::from(self.video.fps);
        // The request travelled about half the RTT, and a frame is due a
        // frame interval before it is shown (the decoder's time; the
        // thesis counts none, REFERENCES.md thesis ch. 6, setup).
        let owd = t.min_rtt().map_or(Duration::ZERO, |r| r / 2);
        let guard = Duration::from_secs_f64(1.0 / fps);
        let start = playout
            .filter(|_| self.lifetimes)
            .map(|d| now + d.saturating_sub(owd + guard));
        let push = self.push;
        self.queue.extend((0..self.video.frames_in(c)).map(|f| {
            let deadline = start.map(|s| s + Duration::from_secs_f64(f as f64 / fps));
            Item::Frame {
                c,
                f,
                deadline,
                stream,
                push,
            }
        }));
        if self.push {
            self.queue.push_back(Item::End { stream });
        }
        Ok(())
    }
}

impl TransportApp for FrameServer {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        if self.error.is_some() {
            return;
        }
        match ev {
            TransportEvent::Message(m) => match self.on_client_bytes(now, t, &m.payload) {
                Ok(()) => self.flush(now, t),
                Err(e) => {
                    self.error = Some(format!("HTTP/2: {e}"));
                    self.queue.clear();
                    t.close(now);
                }
            },
            TransportEvent::Writable => self.flush(now, t),
            TransportEvent::Acked { id } => {
                self.may_expire.remove(&id);
            }
            TransportEvent::Expired { id, reason, .. } => {
                // Never sent: the client will not count these bytes, so
                // they go back to the window (RFC 9113 §6.9 charges only
                // what is sent). Bytes abandoned after sending stay
                // charged: if they did arrive, the client counted them.
                if let Some(bytes) = self.may_expire.remove(&id) {
                    if reason == hollywood_transport::ExpiryReason::BeforeSend {
                        self.conn_window += bytes as i64;
                        self.flush(now, t);
                    }
                }
            }
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

/// The client returns the connection window every this many DATA bytes.
const WINDOW_RETURN: u64 = 1 << 20;

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
    /// The preface went out (with the first request).
    preface_sent: bool,
    next_stream: u32,
    /// Open streams: requests and pushed frames.
    streams: HashMap<u32, Incoming>,
    /// DATA bytes received since the last connection WINDOW_UPDATE.
    unacked: u64,
}

/// A stream the client receives on.
#[derive(Debug, Clone, Copy)]
struct Incoming {
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
    /// Write every packet (both directions, at link ingress) here.
    pub pcap: Option<std::path::PathBuf>,
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
            &crate::transport::GenericTransport::Tcp(self.arch.transport()),
            self.cc,
            &self.phases,
            None,
            self.seed,
            FrameServer::new(self.video.clone())
                .with_lifetimes(self.lifetimes && self.arch == Arch::Hollywood),
            FrameClient::new(self.arch, &self.video, self.buffer_frames),
        )?;
        if let Some(p) = &self.pcap {
            sim.capture_pcap_file(p, hollywood_sim::CaptureFilter::default())
                .map_err(|e| format!("cannot write pcap {}: {e}", p.display()))?;
        }
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
        sim.finish_captures().map_err(|e| format!("pcap: {e}"))?;
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
            pcap: None,
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
    fn resource_bytes_check_at_any_offset_and_a_changed_byte_shows() {
        for (offset, size) in [
            (0, 0),
            (0, 1),
            (3, 255),
            (0, 256),
            (255, 257),
            (1000, 70_000),
        ] {
            let key = pattern_key(300, Some(7));
            let mut body = Vec::new();
            fill_pattern(&mut body, key, offset, size);
            assert_eq!(body.len(), size);
            assert!(pattern_intact(key, offset, &body));
            assert!(size < 2 || !pattern_intact(pattern_key(300, Some(8)), offset, &body));
            assert!(size < 2 || !pattern_intact(key, offset + 1, &body));
            if size > 0 {
                let mut bad = body.clone();
                bad[size - 1] ^= 1;
                assert!(!pattern_intact(key, offset, &bad));
            }
            // Bytes written in pieces are the bytes written at once.
            let mut pieces = Vec::new();
            let half = size / 2;
            fill_pattern(&mut pieces, key, offset, half);
            fill_pattern(&mut pieces, key, offset + half, size - half);
            assert_eq!(pieces, body);
        }
        assert_eq!(parse_frame_path(&frame_path(12, 59)), Some((12, 59)));
        assert_eq!(parse_frame_path("/chunk/1"), None);
        assert_eq!(parse_frame_path("/chunk/x/frame/1"), None);
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

    mod hostile {
        //! Each end against a peer that breaks HTTP/2's rules: an error
        //! that ends the session, never a panic or a frame played wrong.
        use super::*;
        use crate::dash::tests::{msg, Sink};

        fn video() -> Arc<FrameVideo> {
            Arc::new(
                FrameVideo::new(3_000_000, 60, 60, Duration::from_secs(3), 5.0, 0.1, 1).unwrap(),
            )
        }

        fn preface(window: bool, push: bool) -> Vec<u8> {
            let mut b = h2::PREFACE.to_vec();
            h2::write_settings(
                &mut b,
                &[
                    (h2::setting::ENABLE_PUSH, u32::from(push)),
                    (h2::setting::INITIAL_WINDOW_SIZE, h2::MAX_WINDOW),
                ],
            );
            if window {
                h2::write_window_update(&mut b, 0, h2::MAX_WINDOW - h2::INITIAL_WINDOW);
            }
            b
        }

        fn get(b: &mut Vec<u8>, stream: u32, path: &str) {
            h2::write_headers(
                b,
                stream,
                &[(b":method", b"GET"), (b":path", path.as_bytes())],
                true,
            );
        }

        fn serve(bytes: Vec<u8>) -> (FrameServer, Sink) {
            let mut s = FrameServer::new(video());
            let mut t = Sink::default();
            s.on_event(Instant::ZERO, &mut t, msg(CONTROL, bytes));
            (s, t)
        }

        /// DATA bytes the server sent.
        fn data_sent(t: &Sink) -> usize {
            t.0.iter()
                .flat_map(|m| {
                    h2::frames(&m.payload)
                        .map(Result::unwrap)
                        .collect::<Vec<_>>()
                })
                .filter(|f| f.kind == h2::kind::DATA)
                .map(|f| f.payload.len())
                .sum()
        }

        #[test]
        fn the_server_refuses_what_is_not_http2_and_keeps_to_the_window() {
            // No preface.
            let (s, t) = serve(b"GET /chunk/0 HTTP/1.1\r\n\r\n".to_vec());
            assert!(
                s.error.as_deref().unwrap().contains("preface"),
                "{:?}",
                s.error
            );
            assert!(t.0.is_empty());
            // A request on an even (server) stream.
            let mut b = preface(true, true);
            get(&mut b, 2, "/chunk/0");
            assert!(serve(b).0.error.unwrap().contains("stream 2"));
            // A window pushed past 2^31 - 1.
            let mut b = preface(true, true);
            h2::write_window_update(&mut b, 0, 1);
            assert!(serve(b).0.error.unwrap().contains("FLOW_CONTROL"));
            // A chunk that does not exist: 404, the connection goes on.
            let mut b = preface(true, true);
            get(&mut b, 1, "/chunk/99");
            let (s, t) = serve(b);
            assert_eq!((s.error.clone(), s.refused()), (None, 1));
            let statuses: Vec<String> =
                t.0.iter()
                    .flat_map(|m| {
                        h2::frames(&m.payload)
                            .map(Result::unwrap)
                            .collect::<Vec<_>>()
                    })
                    .filter(|f| f.kind == h2::kind::HEADERS && f.stream == 1)
                    .map(|f| {
                        let h = h2::decode_block(h2::header_block(&f).unwrap().0).unwrap();
                        h2::field(&h, ":status").unwrap().to_string()
                    })
                    .collect();
            assert_eq!(statuses, ["404"]);
            // Without the client's WINDOW_UPDATE the server sends at most
            // the initial 65 535 bytes of DATA (whole frames: a frame
            // waits until the window holds all of it), and the rest once
            // the window opens.
            let mut b = preface(false, true);
            get(&mut b, 1, "/chunk/0");
            let (mut s, mut t) = serve(b);
            let first = data_sent(&t);
            assert!(first > 0 && first <= 65_535, "{first}");
            let mut w = Vec::new();
            h2::write_window_update(&mut w, 0, 10_000_000);
            s.on_event(Instant::ZERO, &mut t, msg(CONTROL, w));
            assert_eq!(data_sent(&t), s.video.chunk_bytes(0));
            assert_eq!(s.error, None);
        }

        #[test]
        fn pings_are_answered_first_a_flood_is_refused_and_unsent_bytes_come_back() {
            // A PING is answered ahead of everything queued.
            let mut b = preface(true, true);
            get(&mut b, 1, "/chunk/0");
            h2::write_frame(&mut b, h2::kind::PING, 0, 0, b"12345678");
            let (s, t) = serve(b);
            assert_eq!(s.error, None);
            let first: Vec<h2::Frame> = h2::frames(&t.0[0].payload).map(Result::unwrap).collect();
            assert_eq!(
                (first[0].kind, first[0].flags, first[0].payload),
                (h2::kind::PING, h2::flag::ACK, &b"12345678"[..])
            );
            // A client that keeps asking without reading is cut off.
            let (mut s, mut t) = serve(preface(true, true));
            s.queue
                .extend((0..1 << 20).map(|_| Item::Control(Vec::new())));
            let mut b = Vec::new();
            h2::write_settings(&mut b, &[]);
            s.on_event(Instant::ZERO, &mut t, msg(CONTROL, b));
            assert!(s.error.unwrap().contains("does not read"));
            // With lifetimes and no WINDOW_UPDATE: the window (65 535)
            // fills; a frame the engine drops before sending gives its
            // bytes back, and the next ones go.
            let mut s = FrameServer::new(video()).with_lifetimes(true);
            let mut t = Sink::default();
            let mut b = preface(false, true);
            h2::write_headers(
                &mut b,
                1,
                &[
                    (b":method", b"GET"),
                    (b":path", b"/chunk/0"),
                    (b"x-playout-in", b"60000"),
                ],
                true,
            );
            s.on_event(Instant::ZERO, &mut t, msg(CONTROL, b));
            let before = data_sent(&t);
            let frames_before = t.0.iter().filter(|m| m.substream == DATA).count();
            let dropped = t.0.iter().find(|m| m.substream == DATA).unwrap().id;
            s.on_event(
                Instant::ZERO,
                &mut t,
                TransportEvent::Expired {
                    id: dropped,
                    substream: DATA,
                    reason: hollywood_transport::ExpiryReason::BeforeSend,
                },
            );
            assert!(t.0.iter().filter(|m| m.substream == DATA).count() > frames_before);
            assert!(data_sent(&t) > before);
            // An acknowledged one gives nothing back.
            let n = t.0.len();
            let acked = t.0.iter().rev().find(|m| m.substream == DATA).unwrap().id;
            s.on_event(Instant::ZERO, &mut t, TransportEvent::Acked { id: acked });
            s.on_event(
                Instant::ZERO,
                &mut t,
                TransportEvent::Expired {
                    id: acked,
                    substream: DATA,
                    reason: hollywood_transport::ExpiryReason::BeforeSend,
                },
            );
            assert_eq!(t.0.len(), n);
        }

        #[test]
        fn the_client_refuses_broken_responses_and_counts_a_changed_byte() {
            let v = video();
            let fresh = || {
                let mut c = FrameClient::new(Arch::Push, &v, 10);
                let mut t = Sink::default();
                c.on_start(Instant::ZERO, &mut t);
                c.on_event(Instant::ZERO, &mut t, TransportEvent::Connected);
                (c, t)
            };
            // The client's first message is a preface and GET /chunk/0.
            let (_, t) = fresh();
            let first = &t.0[0].payload;
            assert!(first.starts_with(h2::PREFACE));
            // A frame pushed by our server, whole and changed.
            let mut b = preface(true, true);
            get(&mut b, 1, "/chunk/0");
            let (_, st) = serve(b);
            let frame =
                st.0.iter()
                    .find(|m| m.substream == DATA)
                    .unwrap()
                    .payload
                    .clone();
            let (mut c, mut t) = fresh();
            c.on_event(Instant::ZERO, &mut t, msg(DATA, frame.clone()));
            assert_eq!(c.report.error, None);
            assert!(c.have[0]);
            let (mut c, mut t) = fresh();
            let mut bad = frame.clone();
            *bad.last_mut().unwrap() ^= 1;
            c.on_event(Instant::ZERO, &mut t, msg(DATA, bad));
            assert_eq!((c.report.corrupt_frames, c.have[0]), (1, false));
            // Not HTTP/2, DATA on a stream never opened, a push of a frame
            // that does not exist: errors.
            for bytes in [
                b"HTTP/1.1 200 OK\r\n\r\n".to_vec(),
                {
                    let mut b = Vec::new();
                    h2::write_data(&mut b, 7, b"x", true);
                    b
                },
                {
                    let mut b = Vec::new();
                    h2::write_push_promise(&mut b, 1, 2, &[(b":path", b"/chunk/0/frame/60")]);
                    b
                },
            ] {
                let (mut c, mut t) = fresh();
                c.on_event(Instant::ZERO, &mut t, msg(DATA, bytes));
                assert!(c.report.error.is_some());
                assert!(!c.have.iter().any(|&h| h));
            }
            // A request-response client refuses pushes (it disabled them).
            let mut c = FrameClient::new(Arch::RequestResponse, &v, 10);
            let mut t = Sink::default();
            c.on_event(Instant::ZERO, &mut t, msg(DATA, frame));
            assert!(c.report.error.unwrap().contains("push disabled"));
        }
    }
}
