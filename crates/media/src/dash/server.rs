//! The DASH server: content-agnostic HTTP/1.1 over a message transport
//! ([DASHing-2018] §3): it answers GET requests in order, each response a head
//! on the control sub-stream and the body as fixed-size data messages,
//! all reliable (no lifetimes: the server does not know what is late).
//! Responses queue behind each other, so a pipelined request is served as
//! soon as the previous body is out, without waiting for a round trip.
//! Bodies are produced as the transport takes them, so memory stays at
//! one message per queued response.

use super::content::Content;
use super::http::{self, ResponseHead, CONTROL, DATA, DATA_HEADER, MESSAGE_SIZE};
use hollywood_tcp::Instant;
use hollywood_transport::{MessageTransport, OutMessage, TransportApp, TransportEvent};
use std::collections::VecDeque;
use std::sync::Arc;

/// Most responses queued at once; more requests are answered 503.
pub const MAX_QUEUED: usize = 16;

#[derive(Debug, Clone)]
enum Body {
    Bytes(Arc<Vec<u8>>),
    Chunk { n: usize, q: usize },
}

#[derive(Debug, Clone)]
struct Response {
    head: Option<Vec<u8>>,
    body: Body,
    len: u64,
    /// Stream offset of the body's first byte.
    start: u64,
    sent: u64,
    /// Its number: the group (and frame) of its messages, so a QUIC
    /// mapping per group carries each response on its own stream (as
    /// HTTP/3 does).
    index: u64,
}

/// Server counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerStats {
    /// Requests answered 200.
    pub requests: u64,
    /// Requests refused (malformed, unknown path, queue full).
    pub refused: u64,
    /// Body bytes handed to the transport.
    pub body_bytes: u64,
    /// Data messages handed to the transport.
    pub data_messages: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct DashServer {
    content: Arc<Content>,
    mpd: Arc<Vec<u8>>,
    queue: VecDeque<Response>,
    /// A message the transport refused, to offer again first.
    held: Option<OutMessage>,
    next_id: u32,
    seq: u32,
    offset: u64,
    responses: u64,
    stats: ServerStats,
    error: Option<String>,
}

impl DashServer {
    /// A server for `content`.
    pub fn new(content: Arc<Content>) -> DashServer {
        let mpd = Arc::new(content.mpd().into_bytes());
        DashServer {
            content,
            mpd,
            responses: 0,
            queue: VecDeque::new(),
            held: None,
            next_id: 0,
            seq: 0,
            offset: 0,
            stats: ServerStats::default(),
            error: None,
        }
    }

    /// Counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Why the connection failed, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn answer(&mut self, request: &[u8]) {
        let (status, location, body, len, ctype) = match http::parse_request(request) {
            Err(_) => (400, String::new(), Body::Bytes(Arc::default()), 0, ""),
            Ok(_) if self.queue.len() >= MAX_QUEUED => {
                (503, String::new(), Body::Bytes(Arc::default()), 0, "")
            }
            Ok(path) if path == self.content.manifest_path() => {
                let len = self.mpd.len() as u64;
                (
                    200,
                    path,
                    Body::Bytes(self.mpd.clone()),
                    len,
                    "application/dash+xml",
                )
            }
            Ok(path) => match self.content.parse_chunk_path(&path) {
                Some((n, q)) => match self.content.chunk_file(n, q) {
                    None => {
                        let len = u64::from(self.content.size(n, q).expect("parsed paths exist"));
                        (200, path, Body::Chunk { n, q }, len, "video/mp2t")
                    }
                    Some(Ok(bytes)) => {
                        let len = bytes.len() as u64;
                        (200, path, Body::Bytes(Arc::new(bytes)), len, "video/mp2t")
                    }
                    Some(Err(_)) => (404, path, Body::Bytes(Arc::default()), 0, ""),
                },
                None => (404, path, Body::Bytes(Arc::default()), 0, ""),
            },
        };
        if status == 200 {
            self.stats.requests += 1;
        } else {
            self.stats.refused += 1;
        }
        let head = ResponseHead {
            status,
            location,
            length: len,
            offset: self.offset,
            content_type: ctype.into(),
        };
        self.queue.push_back(Response {
            head: Some(head.encode()),
            body,
            len,
            start: self.offset,
            sent: 0,
            index: self.responses,
        });
        self.responses += 1;
        self.offset += len;
    }

    /// The next message to send, if any.
    fn next_message(&mut self) -> Option<OutMessage> {
        loop {
            let r = self.queue.front_mut()?;
            let id = self.next_id;
            if let Some(h) = r.head.take() {
                self.next_id = self.next_id.wrapping_add(1);
                let mut m = OutMessage::new(id, h);
                m.substream = CONTROL;
                m.group = Some(r.index);
                m.frame = Some(r.index);
                return Some(m);
            }
            if r.sent == r.len {
                self.queue.pop_front();
                continue;
            }
            let take = (r.len - r.sent).min((MESSAGE_SIZE - DATA_HEADER) as u64) as usize;
            let end = r.start + r.sent + take as u64;
            let seq = self.seq;
            // Header, then the body written in place (one allocation of
            // the final size).
            let mut payload = Vec::with_capacity(DATA_HEADER + take);
            payload.extend_from_slice(&http::data_header(seq, end));
            payload.resize(DATA_HEADER + take, 0);
            let body = &mut payload[DATA_HEADER..];
            match &r.body {
                Body::Bytes(b) => body.copy_from_slice(&b[r.sent as usize..r.sent as usize + take]),
                Body::Chunk { n, q } => self.content.fill(*n, *q, r.sent, body),
            }
            r.sent += take as u64;
            self.next_id = self.next_id.wrapping_add(1);
            self.seq = self.seq.wrapping_add(1);
            self.stats.body_bytes += take as u64;
            self.stats.data_messages += 1;
            let mut m = OutMessage::new(id, payload);
            m.substream = DATA;
            m.group = Some(r.index);
            m.frame = Some(r.index);
            return Some(m);
        }
    }

    fn flush(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        let mut held = self.held.take();
        let r = super::pump(now, t, &mut held, || self.next_message());
        self.held = held;
        if let Err(e) = r {
            self.error = Some(format!("send: {e}"));
            self.queue.clear();
        }
    }
}

impl TransportApp for DashServer {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        match ev {
            TransportEvent::Message(m) if m.substream == CONTROL => {
                self.answer(&m.payload);
                self.flush(now, t);
            }
            TransportEvent::Message(_) => {
                self.stats.refused += 1;
            }
            TransportEvent::Writable => self.flush(now, t),
            TransportEvent::PeerClosed => t.close(now),
            TransportEvent::Failed(e) => self.error = Some(e),
            _ => {}
        }
    }
}
