//! Bulk-transfer applications (used by `hollywood sim bulk`): a sender that
//! writes a [`Pattern`] stream as fast as the send buffer allows, and a
//! receiver that checks it on the fly with bounded memory.

use crate::pattern::{Pattern, StreamHash};
use crate::tcp_host::App;
use hollywood_tcp::{ConnHandle, Endpoint, EndpointEvent, Error, Event, Instant};
use std::net::SocketAddr;

/// Size of the chunks the apps generate, write and read.
pub const CHUNK: usize = 64 * 1024;

/// What a [`BulkSender`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderReport {
    /// When `connect` was called.
    pub started_at: Option<Instant>,
    /// When the connection reached ESTABLISHED.
    pub connected_at: Option<Instant>,
    /// Bytes accepted by the send buffer.
    pub bytes_written: u64,
    /// When the last byte was accepted and `close` called.
    pub all_written_at: Option<Instant>,
    /// When the connection was fully closed.
    pub closed_at: Option<Instant>,
    /// Why it failed, if it did (connect error, reset, timeout).
    pub error: Option<Error>,
}

/// Connects at `start`, writes `bytes` bytes of a [`Pattern`], then closes.
#[derive(Debug, Clone)]
pub struct BulkSender {
    local: SocketAddr,
    remote: SocketAddr,
    total: u64,
    pattern: Pattern,
    start: Instant,
    handle: Option<ConnHandle>,
    /// Generated but not yet accepted bytes: `pending[pending_off..]`.
    pending: Vec<u8>,
    pending_off: usize,
    closed: bool,
    report: SenderReport,
}

impl BulkSender {
    /// Send `bytes` bytes of `pattern` from `local` (port 0 = ephemeral) to
    /// `remote`, connecting at time zero.
    #[must_use]
    pub fn new(local: SocketAddr, remote: SocketAddr, bytes: u64, pattern: Pattern) -> BulkSender {
        BulkSender {
            local,
            remote,
            total: bytes,
            pattern,
            start: Instant::ZERO,
            handle: None,
            pending: Vec::new(),
            pending_off: 0,
            closed: false,
            report: SenderReport::default(),
        }
    }

    /// Builder-style: connect at `start` instead of time zero.
    #[must_use]
    pub fn start_at(mut self, start: Instant) -> BulkSender {
        self.start = start;
        self
    }

    /// What happened so far.
    #[must_use]
    pub fn report(&self) -> SenderReport {
        self.report
    }

    /// The connection, once opened.
    #[must_use]
    pub fn handle(&self) -> Option<ConnHandle> {
        self.handle
    }

    /// Bytes to send in total.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    fn open(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.report.started_at.is_some() || now < self.start {
            return;
        }
        self.report.started_at = Some(now);
        match ep.connect(now, self.local, self.remote) {
            Ok(h) => self.handle = Some(h),
            Err(e) => self.report.error = Some(e),
        }
    }

    /// Write as much as the send buffer takes; close after the last byte.
    fn fill(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(conn) = self.handle.and_then(|h| ep.connection_mut(h)) else {
            return;
        };
        while self.report.bytes_written < self.total {
            if self.pending_off == self.pending.len() {
                let n = (self.total - self.report.bytes_written).min(CHUNK as u64) as usize;
                self.pending.resize(n, 0);
                self.pattern
                    .fill(self.report.bytes_written, &mut self.pending);
                self.pending_off = 0;
            }
            match conn.send(&self.pending[self.pending_off..]) {
                Ok(n) => {
                    self.pending_off += n;
                    self.report.bytes_written += n as u64;
                    if self.pending_off < self.pending.len() {
                        return; // buffer full: wait for Writable
                    }
                }
                Err(Error::WouldBlock) => return,
                Err(e) => {
                    self.report.error.get_or_insert(e);
                    return;
                }
            }
        }
        if !self.closed {
            self.closed = true;
            conn.close();
            self.report.all_written_at = Some(now);
        }
    }
}

impl App for BulkSender {
    fn on_start(&mut self, now: Instant, ep: &mut Endpoint) {
        self.open(now, ep);
    }

    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, ev: EndpointEvent) {
        let EndpointEvent::Conn { handle, event } = ev else {
            return;
        };
        if Some(handle) != self.handle {
            return;
        }
        match event {
            Event::Connected => {
                self.report.connected_at = Some(now);
                self.fill(now, ep);
            }
            Event::Writable => self.fill(now, ep),
            Event::Reset => {
                self.report.error.get_or_insert(Error::Reset);
            }
            Event::TimedOut => {
                self.report.error.get_or_insert(Error::TimedOut);
            }
            Event::Closed => self.report.closed_at = Some(now),
            // Byte streams carry no messages: nothing expires.
            Event::Readable
            | Event::PeerClosed
            | Event::Expired(_)
            | Event::MessageSent { .. }
            | Event::RewritingStopped => {}
        }
    }

    fn on_timeout(&mut self, now: Instant, ep: &mut Endpoint) {
        self.open(now, ep);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.report.started_at.is_none().then_some(self.start)
    }
}

/// What a [`BulkReceiver`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverReport {
    /// When the connection was accepted.
    pub accepted_at: Option<Instant>,
    /// The peer.
    pub remote: Option<SocketAddr>,
    /// Bytes read.
    pub bytes_received: u64,
    /// When the first byte was read.
    pub first_byte_at: Option<Instant>,
    /// When the last byte was read.
    pub last_byte_at: Option<Instant>,
    /// When end of stream was read.
    pub eof_at: Option<Instant>,
    /// When the connection was fully closed.
    pub closed_at: Option<Instant>,
    /// Stream position of the first byte that did not match the pattern.
    pub first_mismatch: Option<u64>,
    /// [`StreamHash`] of everything read.
    pub hash: u64,
    /// Why it failed, if it did (listen error, reset, timeout).
    pub error: Option<Error>,
    /// Further connections accepted and aborted.
    pub extra_connections: u64,
}

/// Listens, accepts one connection, reads everything and checks it against
/// a [`Pattern`] as it arrives (memory stays at one [`CHUNK`]); closes after
/// end of stream. Further connections are aborted.
#[derive(Debug, Clone)]
pub struct BulkReceiver {
    listen: SocketAddr,
    pattern: Pattern,
    expected: Option<u64>,
    handle: Option<ConnHandle>,
    hash: StreamHash,
    buf: Vec<u8>,
    report: ReceiverReport,
}

impl BulkReceiver {
    /// Listen on `listen` and expect the `pattern` stream; with
    /// `expected = Some(n)` the transfer is intact only if exactly `n` bytes
    /// arrive.
    #[must_use]
    pub fn new(listen: SocketAddr, pattern: Pattern, expected: Option<u64>) -> BulkReceiver {
        BulkReceiver {
            listen,
            pattern,
            expected,
            handle: None,
            hash: StreamHash::new(),
            buf: vec![0; CHUNK],
            report: ReceiverReport {
                hash: StreamHash::new().finish(),
                ..ReceiverReport::default()
            },
        }
    }

    /// What happened so far.
    #[must_use]
    pub fn report(&self) -> ReceiverReport {
        self.report
    }

    /// End of stream was read, every byte matched the pattern, the expected
    /// length (if given) was met, and nothing failed.
    #[must_use]
    pub fn intact(&self) -> bool {
        let r = &self.report;
        r.eof_at.is_some()
            && r.first_mismatch.is_none()
            && r.error.is_none()
            && self.expected.is_none_or(|n| n == r.bytes_received)
    }

    fn drain(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(conn) = self.handle.and_then(|h| ep.connection_mut(h)) else {
            return;
        };
        loop {
            match conn.recv(&mut self.buf) {
                Ok(0) => {
                    if self.report.eof_at.is_none() {
                        self.report.eof_at = Some(now);
                        conn.close();
                    }
                    return;
                }
                Ok(n) => {
                    let data = &self.buf[..n];
                    let offset = self.report.bytes_received;
                    if self.report.first_mismatch.is_none() {
                        self.report.first_mismatch = self.pattern.first_mismatch(offset, data);
                    }
                    self.hash.update(data);
                    self.report.hash = self.hash.finish();
                    self.report.bytes_received += n as u64;
                    self.report.first_byte_at.get_or_insert(now);
                    self.report.last_byte_at = Some(now);
                }
                Err(Error::WouldBlock) => return,
                Err(e) => {
                    self.report.error.get_or_insert(e);
                    return;
                }
            }
        }
    }
}

impl App for BulkReceiver {
    fn on_start(&mut self, _now: Instant, ep: &mut Endpoint) {
        if let Err(e) = ep.listen(self.listen) {
            self.report.error = Some(e);
        }
    }

    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, ev: EndpointEvent) {
        match ev {
            EndpointEvent::Accepted { handle, remote } => {
                if self.handle.is_none() {
                    self.handle = Some(handle);
                    self.report.accepted_at = Some(now);
                    self.report.remote = Some(remote);
                } else if let Some(c) = ep.connection_mut(handle) {
                    self.report.extra_connections += 1;
                    c.abort();
                }
            }
            EndpointEvent::Conn { handle, event } if Some(handle) == self.handle => match event {
                Event::Readable | Event::PeerClosed | Event::Connected => self.drain(now, ep),
                Event::Reset => {
                    self.report.error.get_or_insert(Error::Reset);
                }
                Event::TimedOut => {
                    self.report.error.get_or_insert(Error::TimedOut);
                }
                Event::Closed => self.report.closed_at = Some(now),
                Event::Writable
                | Event::Expired(_)
                | Event::MessageSent { .. }
                | Event::RewritingStopped => {}
            },
            EndpointEvent::Conn { .. } => {}
        }
    }
}
