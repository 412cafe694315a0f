//! Chapter 6's server: HTTP/2 server push of one message per frame, or the
//! whole chunk per request ([`FrameServer`]).

use super::video::*;
use crate::dash::h2;
use crate::dash::http::{self, CONTROL, DATA};
use hollywood_tcp::Instant;
use hollywood_transport::{MessageTransport, OutMessage, TransportApp, TransportEvent};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Sent messages whose window credit the server keeps track of.
const CREDIT_TRACKED: usize = 1 << 16;

/// What the server has to send.
#[derive(Debug, Clone)]
pub(super) enum Item {
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
    pub(super) video: std::sync::Arc<FrameVideo>,
    pub(super) queue: VecDeque<Item>,
    pub(super) held: Option<OutMessage>,
    /// The held message's deadline.
    pub(super) held_deadline: Option<Instant>,
    /// DATA bytes of the held message (charged to the window).
    pub(super) held_data: usize,
    /// The last chunk whose I-frame was taken: (chunk, its message id, or
    /// `None` if it was dropped).
    pub(super) iframe: Option<(usize, Option<u32>)>,
    pub(super) lifetimes: bool,
    pub(super) next_id: u32,
    /// The client's connection preface arrived.
    pub(super) preface: bool,
    /// SETTINGS_ENABLE_PUSH (initially 1, RFC 9113 §6.5.2).
    pub(super) push: bool,
    /// The client's SETTINGS_INITIAL_WINDOW_SIZE.
    pub(super) stream_window: u32,
    /// The connection's send window.
    pub(super) conn_window: i64,
    /// DATA bytes of sent messages that may still expire (they have a
    /// lifetime), until acknowledged or expired: an expiry before sending
    /// gives the bytes back to the window. At most [`CREDIT_TRACKED`]
    /// (oldest forgotten first).
    pub(super) may_expire: HashMap<u32, usize>,
    pub(super) may_expire_order: VecDeque<u32>,
    pub(super) last_request_stream: u32,
    pub(super) next_promised: u32,
    pub(super) requests: u64,
    pub(super) refused: u64,
    /// Frames dropped before sending: past their deadline, or their
    /// I-frame was.
    pub dropped_frames: u64,
    pub(super) error: Option<String>,
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
        let r = crate::dash::pump(now, t, &mut held, || self.next_frame(now));
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
