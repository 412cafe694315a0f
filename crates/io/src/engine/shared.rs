//! State shared between a stream's handles and the stack task.

use super::stream::StreamStats;
use crate::message::{ExpiredLog, ReceivedMessage, StreamError};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Unset,
    Bytes,
    Messages,
}

#[derive(Debug, Clone)]
pub(super) enum Failure {
    Reset,
    TimedOut,
    StackClosed,
    StackFailed(Arc<str>),
}

impl Failure {
    pub(super) fn to_error(&self) -> StreamError {
        match self {
            Failure::Reset => StreamError::Reset,
            Failure::TimedOut => StreamError::TimedOut,
            Failure::StackClosed => StreamError::StackClosed,
            Failure::StackFailed(s) => StreamError::StackFailed(s.to_string()),
        }
    }
}

#[derive(Debug)]
pub(super) enum TxItem {
    Bytes {
        buf: Vec<u8>,
        off: usize,
    },
    Message {
        frame: Vec<u8>,
        id: u32,
        lifetime: Option<Duration>,
        depends_on: Option<u32>,
        replaceable: bool,
        substream: u16,
        priority: i8,
        /// When `send_message` was called (the lifetime runs from here).
        queued: tokio::time::Instant,
    },
}

impl TxItem {
    pub(super) fn remaining(&self) -> usize {
        match self {
            TxItem::Bytes { buf, off } => buf.len() - off,
            TxItem::Message { frame, .. } => frame.len(),
        }
    }
}

#[derive(Debug)]
pub(super) struct ConnState {
    // Application → task.
    pub(super) tx: VecDeque<TxItem>,
    pub(super) tx_bytes: usize,
    pub(super) tx_mode: Mode,
    pub(super) close_requested: bool,
    pub(super) abort_requested: bool,
    pub(super) sender_alive: bool,
    pub(super) receiver_alive: bool,
    pub(super) tx_waker: Option<Waker>,
    // Task → application.
    pub(super) rx_mode: Mode,
    pub(super) rx_bytes: VecDeque<u8>,
    pub(super) rx_msgs: VecDeque<ReceivedMessage>,
    pub(super) rx_msg_bytes: usize,
    /// The task stopped pulling because the receive queue was full.
    pub(super) rx_stalled: bool,
    pub(super) rx_waker: Option<Waker>,
    /// Everything the peer sent before its FIN is in the receive queues.
    pub(super) eof: bool,
    pub(super) failure: Option<Failure>,
    /// The connection is over in the engine (or gone from it).
    pub(super) closed: bool,
    /// The engine still holds data for the receiver, which has not started
    /// reading: a closed connection is kept until it is read.
    pub(super) rx_pending: bool,
    /// The application let go of both halves while data it never read was
    /// waiting: the task answers with RST (RFC 1122 §4.2.2.13).
    pub(super) unread_dropped: bool,
    /// The stream was split into halves that live apart.
    pub(super) split: bool,
    /// Our FIN was handed to the engine.
    pub(super) fin_sent: bool,
    /// Our FIN was acknowledged.
    pub(super) fin_acked: bool,
    // Counters.
    pub(super) stats: Counters,
    pub(super) expired: ExpiredLog,
}

impl ConnState {
    pub(super) fn new() -> ConnState {
        ConnState {
            tx: VecDeque::new(),
            tx_bytes: 0,
            tx_mode: Mode::Unset,
            close_requested: false,
            abort_requested: false,
            sender_alive: true,
            receiver_alive: true,
            tx_waker: None,
            rx_mode: Mode::Unset,
            rx_bytes: VecDeque::new(),
            rx_msgs: VecDeque::new(),
            rx_msg_bytes: 0,
            rx_stalled: false,
            rx_waker: None,
            eof: false,
            failure: None,
            closed: false,
            rx_pending: false,
            unread_dropped: false,
            split: false,
            fin_sent: false,
            fin_acked: false,
            stats: Counters::default(),
            expired: ExpiredLog::default(),
        }
    }

    /// Give back the storage of queues that are empty: an idle
    /// connection keeps no queue capacity from its last burst (a few
    /// hundred bytes each; the next burst allocates again).
    pub(super) fn release_drained_queues(&mut self) {
        if self.tx.is_empty() && self.tx.capacity() > 0 {
            self.tx = VecDeque::new();
        }
        if self.rx_bytes.is_empty() && self.rx_bytes.capacity() > 0 {
            self.rx_bytes = VecDeque::new();
        }
        if self.rx_msgs.is_empty() && self.rx_msgs.capacity() > 0 {
            self.rx_msgs = VecDeque::new();
        }
    }

    pub(super) fn wake_all(&mut self) {
        if let Some(w) = self.tx_waker.take() {
            w.wake();
        }
        if let Some(w) = self.rx_waker.take() {
            w.wake();
        }
    }

    /// An error for a send-side operation, if it cannot proceed.
    pub(super) fn send_blocked(&self) -> Option<StreamError> {
        if let Some(f) = &self.failure {
            return Some(f.to_error());
        }
        if self.closed || self.close_requested || self.abort_requested {
            return Some(StreamError::Closed);
        }
        None
    }

    pub(super) fn set_mode(
        slot: &mut Mode,
        want: Mode,
        what: &'static str,
    ) -> std::result::Result<bool, StreamError> {
        match *slot {
            Mode::Unset => {
                *slot = want;
                Ok(true)
            }
            m if m == want => Ok(false),
            _ => Err(StreamError::WrongMode(what)),
        }
    }
}

/// A stream's counters as the task and the handles keep them
/// ([`StreamStats`] is what the application sees): the message layer's
/// are made when the stream first sends or receives a message, so a byte
/// stream does not carry them.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) bytes_written: u64,
    pub(super) bytes_read: u64,
    pub(super) connection: hollywood_tcp::ConnectionStats,
    pub(super) hollywood: hollywood_tcp::HollywoodStats,
    pub(super) ooo: hollywood_tcp::OooStats,
    pub(super) srtt: Option<Duration>,
    pub(super) rto: Option<Duration>,
    pub(super) state: Option<hollywood_tcp::State>,
    messages: Option<Box<crate::message::MessageStats>>,
}

impl Counters {
    /// The message-layer counters, made on first use.
    pub(super) fn messages(&mut self) -> &mut crate::message::MessageStats {
        self.messages.get_or_insert_with(Box::default)
    }

    /// What the application sees.
    pub(super) fn snapshot(&self) -> StreamStats {
        StreamStats {
            messages: self.messages.as_deref().cloned().unwrap_or_default(),
            bytes_written: self.bytes_written,
            bytes_read: self.bytes_read,
            connection: self.connection.clone(),
            hollywood: self.hollywood,
            ooo: self.ooo,
            srtt: self.srtt,
            rto: self.rto,
            state: self.state,
        }
    }
}

#[derive(Debug)]
pub(super) struct Shared {
    /// The engine's handle of this connection (the task services it when
    /// a handle pokes it: `Control::poke`).
    pub(super) handle: hollywood_tcp::ConnHandle,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    /// The connection delivers segments out of order (thesis §4.3).
    pub(super) ooo: bool,
    pub(super) send_queue: usize,
    pub(super) recv_queue: usize,
    /// The engine's send buffer: no frame larger than this can be queued.
    pub(super) send_buffer: usize,
    /// Secure mode: the handshake's time limit.
    pub(super) connect_timeout: Duration,
    pub(super) state: Mutex<ConnState>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, ConnState> {
        // A panic while holding the lock leaves consistent data (every
        // critical section is a few field updates), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Bytes charged per received message waiting for the application, on
/// top of its payload (queue entry and vector header), so that empty or
/// tiny messages cannot grow the queue without bound under the same byte
/// limit (review B3).
pub(super) const RX_MESSAGE_OVERHEAD: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn modes_lock_on_first_use() {
        let mut m = Mode::Unset;
        assert!(ConnState::set_mode(&mut m, Mode::Bytes, "x").unwrap());
        assert!(!ConnState::set_mode(&mut m, Mode::Bytes, "x").unwrap());
        assert!(matches!(
            ConnState::set_mode(&mut m, Mode::Messages, "mixed"),
            Err(StreamError::WrongMode("mixed"))
        ));
    }
}
