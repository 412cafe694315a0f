//! [`StreamReceiver`]: the receiving half of a [`Stream`](super::Stream).

use super::shared::{ConnState, Mode, Shared, RX_MESSAGE_OVERHEAD};
use super::stack::Control;
use super::stream::StreamStats;
use crate::message::{ReceivedMessage, StreamError};
use hollywood_transport::secure::{Opener, SecureStats};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The receiving half of a [`Stream`](super::Stream). Dropping it
/// discards what arrives afterwards.
#[derive(Debug)]
pub struct StreamReceiver {
    pub(super) shared: Arc<Shared>,
    pub(super) ctl: Arc<Control>,
    /// Secure mode: opens every message.
    pub(super) opener: Option<Box<Opener>>,
    /// Secure mode: application messages that out-of-order delivery
    /// handed up before the handshake's last message, with their bytes
    /// (at most [`EARLY_MAX_BYTES`]).
    pub(super) early: VecDeque<ReceivedMessage>,
}

impl StreamReceiver {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared.remote
    }

    /// Lock and switch to `mode`, waking the task when this is the first
    /// use (it starts pulling data from the engine then).
    fn lock_mode(&self, mode: Mode) -> std::result::Result<MutexGuard<'_, ConnState>, StreamError> {
        if mode == Mode::Bytes && self.shared.ooo {
            return Err(StreamError::WrongMode(
                "byte-stream reads need Config.hollywood.out_of_order_delivery off",
            ));
        }
        let what = if mode == Mode::Bytes {
            "byte-stream read on a stream that receives messages"
        } else {
            "message receive on a stream that reads bytes"
        };
        let mut st = self.shared.lock();
        if ConnState::set_mode(&mut st.rx_mode, mode, what)? {
            self.ctl.poke(self.shared.handle);
        }
        Ok(st)
    }

    /// After the application took data: let the task pull again if it had
    /// stopped for lack of room.
    fn unstall(&self, st: &mut ConnState) {
        if st.rx_stalled {
            st.rx_stalled = false;
            self.ctl.poke(self.shared.handle);
        }
    }

    /// Byte mode: read into `buf`; `Ok(0)` at end of stream.
    pub fn poll_read_bytes(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::result::Result<usize, StreamError>> {
        let mut st = self.lock_mode(Mode::Bytes)?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if !st.rx_bytes.is_empty() {
            let n = buf.len().min(st.rx_bytes.len());
            for (d, s) in buf.iter_mut().zip(st.rx_bytes.drain(..n)) {
                *d = s;
            }
            if st.rx_bytes.is_empty() && st.rx_bytes.capacity() > 0 {
                // Drained: give the storage back (an idle stream holds
                // none; it grows again with the next data).
                st.rx_bytes = std::collections::VecDeque::new();
            }
            st.stats.bytes_read += n as u64;
            self.unstall(&mut st);
            return Poll::Ready(Ok(n));
        }
        if st.eof {
            return Poll::Ready(Ok(0));
        }
        if let Some(f) = &st.failure {
            return Poll::Ready(Err(f.to_error()));
        }
        if st.closed && !st.rx_pending {
            return Poll::Ready(Ok(0));
        }
        st.rx_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Byte mode: read at least one byte into `buf`; `Ok(0)` at end of
    /// stream (or for an empty `buf`).
    pub async fn read(&mut self, buf: &mut [u8]) -> std::result::Result<usize, StreamError> {
        poll_fn(|cx| self.poll_read_bytes(cx, buf)).await
    }

    /// Message mode: the next message (thesis §7.2 `recv_message`).
    pub fn poll_recv_message(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<std::result::Result<Option<ReceivedMessage>, StreamError>> {
        if self.opener.is_some() {
            while let Some(m) = self.early.pop_front() {
                if let Some(m) = self.opened(m) {
                    self.shared.lock().stats.messages().messages_received += 1;
                    return Poll::Ready(Ok(Some(m)));
                }
            }
        }
        loop {
            let m = {
                let mut st = self.lock_mode(Mode::Messages)?;
                let Some(m) = st.rx_msgs.pop_front() else {
                    if st.eof {
                        return Poll::Ready(Ok(None));
                    }
                    if let Some(f) = &st.failure {
                        return Poll::Ready(Err(f.to_error()));
                    }
                    if st.closed && !st.rx_pending {
                        return Poll::Ready(Ok(None));
                    }
                    st.rx_waker = Some(cx.waker().clone());
                    return Poll::Pending;
                };
                st.rx_msg_bytes -= m.payload.len() + RX_MESSAGE_OVERHEAD;
                self.unstall(&mut st);
                m
            };
            if let Some(m) = self.opened(m) {
                self.shared.lock().stats.messages().messages_received += 1;
                return Poll::Ready(Ok(Some(m)));
            }
        }
    }

    /// Secure mode: the message opened, or `None` if it does not open
    /// (changed, spliced, replayed, foreign: counted in
    /// [`StreamReceiver::secure_stats`], dropped) or is a stray handshake
    /// message. Plain mode: the message.
    fn opened(&mut self, mut m: ReceivedMessage) -> Option<ReceivedMessage> {
        if let Some(o) = &mut self.opener {
            m.payload = o.open_application(m.id, m.substream, &m.payload)?;
        }
        Some(m)
    }

    /// Secure mode: the receiving direction's counters; `None` in plain
    /// mode.
    pub fn secure_stats(&self) -> Option<SecureStats> {
        self.opener.as_deref().map(Opener::stats)
    }

    /// Message mode: the next message, in arrival order (ordered
    /// sub-streams in chain order); `Ok(None)` once the peer closed and
    /// everything was delivered. Exactly once or never, CRC-verified.
    /// Cancellation safe.
    pub async fn recv_message(
        &mut self,
    ) -> std::result::Result<Option<ReceivedMessage>, StreamError> {
        poll_fn(|cx| self.poll_recv_message(cx)).await
    }

    /// Counters (both directions).
    pub fn stats(&self) -> StreamStats {
        self.shared.lock().stats.snapshot()
    }
}

impl Drop for StreamReceiver {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.receiver_alive = false;
        if !st.sender_alive {
            // The last handle goes with data unread: the task resets.
            st.unread_dropped |= !st.rx_bytes.is_empty() || !st.rx_msgs.is_empty();
        }
        st.rx_bytes.clear();
        st.rx_msgs.clear();
        st.rx_msg_bytes = 0;
        drop(st);
        self.ctl.poke(self.shared.handle);
    }
}

impl AsyncRead for StreamReceiver {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let n = std::task::ready!(this.poll_read_bytes(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}
