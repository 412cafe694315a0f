//! [`StreamSender`]: the sending half of a [`Stream`](super::Stream).

use super::shared::{ConnState, Mode, Shared, TxItem};
use super::stack::Control;
use super::stream::StreamStats;
use crate::message::{MessageFramer, SendMessage, StreamError};
use hollywood_tcp::ExpiredMessage;
use hollywood_transport::secure::{Sealer, HANDSHAKE_SUBSTREAM, TAG_LEN};
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;

/// The sending half of a [`Stream`](super::Stream). Dropping it closes
/// the sending direction (FIN after everything queued).
#[derive(Debug)]
pub struct StreamSender {
    pub(super) shared: Arc<Shared>,
    pub(super) ctl: Arc<Control>,
    pub(super) framer: MessageFramer,
    /// Secure mode: seals every message (docs/SECURITY.md).
    pub(super) sealer: Option<Box<Sealer>>,
}

impl StreamSender {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared.remote
    }

    /// Wait until `need` bytes fit in the send queue (or it is empty).
    fn poll_space(
        &self,
        cx: &mut Context<'_>,
        need: usize,
        mode: Mode,
    ) -> Poll<std::result::Result<(), StreamError>> {
        let mut st = self.shared.lock();
        if let Some(e) = st.send_blocked() {
            return Poll::Ready(Err(e));
        }
        let what = if mode == Mode::Bytes {
            "byte-stream write on a stream that sends messages"
        } else {
            "message send on a stream that writes bytes"
        };
        if let Err(e) = ConnState::set_mode(&mut st.tx_mode, mode, what) {
            return Poll::Ready(Err(e));
        }
        if st.tx.is_empty() || st.tx_bytes + need <= self.shared.send_queue {
            Poll::Ready(Ok(()))
        } else {
            st.tx_waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn push(&self, item: TxItem) {
        let mut st = self.shared.lock();
        st.tx_bytes += item.remaining();
        st.tx.push_back(item);
        drop(st);
        self.ctl.poke(self.shared.handle);
    }

    /// Byte mode: queue up to `buf.len()` bytes, at least one; waits for
    /// space.
    pub fn poll_write_bytes(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::result::Result<usize, StreamError>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        std::task::ready!(self.poll_space(cx, 1, Mode::Bytes))?;
        let n = {
            let mut st = self.shared.lock();
            let room = self.shared.send_queue.saturating_sub(st.tx_bytes).max(1);
            let n = buf.len().min(room);
            st.stats.bytes_written += n as u64;
            n
        };
        self.push(TxItem::Bytes {
            buf: buf[..n].to_vec(),
            off: 0,
        });
        Poll::Ready(Ok(n))
    }

    /// Byte mode: queue all of `buf`, waiting for queue space.
    pub async fn write_all(&mut self, mut buf: &[u8]) -> std::result::Result<(), StreamError> {
        while !buf.is_empty() {
            let n = poll_fn(|cx| self.poll_write_bytes(cx, buf)).await?;
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Message mode: frame `m` and queue it (thesis §7.2 `send_message`);
    /// returns its id. Waits while the send queue is full (an id is only
    /// assigned once the message is queued, so dropping the future
    /// loses nothing). The lifetime runs from this call; the engine gets
    /// what is left of it when the message enters its send buffer, and
    /// `replaceable = !m.ordered`.
    pub async fn send_message(&mut self, m: SendMessage) -> std::result::Result<u32, StreamError> {
        let called = tokio::time::Instant::now();
        self.framer.check(&m)?;
        let bound = MessageFramer::frame_len_bound(&m);
        if bound > self.shared.send_buffer {
            // All or nothing (`Connection::send_message`): a frame larger
            // than the engine's whole send buffer could never be queued.
            return Err(StreamError::TooLarge(hollywood_msg::SendError::TooLarge {
                len: m.payload.len(),
                max: MessageFramer::max_payload_within(self.shared.send_buffer),
            }));
        }
        let bound = bound + if self.sealer.is_some() { TAG_LEN } else { 0 };
        poll_fn(|cx| self.poll_space(cx, bound, Mode::Messages)).await?;
        let mut frame = Vec::with_capacity(bound);
        let id = self
            .framer
            .frame(&m, self.sealer.as_deref_mut(), &mut frame)?;
        {
            let mut st = self.shared.lock();
            let m = st.stats.messages();
            m.messages_sent += 1;
            m.framed_bytes_sent += frame.len() as u64;
        }
        self.push(TxItem::Message {
            frame,
            id,
            lifetime: m.lifetime,
            depends_on: m.depends_on,
            replaceable: !m.ordered,
            substream: m.substream,
            priority: m.priority,
            queued: called,
        });
        Ok(id)
    }

    /// Secure mode: queue handshake message `id` (reliable, ordered, not
    /// replaceable, outside the application's ids).
    pub(super) async fn send_handshake(
        &mut self,
        id: u32,
        bytes: &[u8],
    ) -> std::result::Result<(), StreamError> {
        let mut frame = Vec::new();
        self.framer.frame_handshake(id, bytes, &mut frame)?;
        poll_fn(|cx| self.poll_space(cx, frame.len(), Mode::Messages)).await?;
        self.push(TxItem::Message {
            frame,
            id,
            lifetime: None,
            depends_on: None,
            replaceable: false,
            substream: HANDSHAKE_SUBSTREAM,
            priority: 0,
            queued: tokio::time::Instant::now(),
        });
        Ok(())
    }

    /// Wait until everything queued has entered the engine's send buffer.
    pub fn poll_flush_queue(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<std::result::Result<(), StreamError>> {
        self.poll_sent(cx, |st| st.tx.is_empty())
    }

    /// Ready when `done` holds; else an error once the connection failed or
    /// closed (closed before `done`: aborted locally); else pending, woken
    /// by the next change on the sending side.
    fn poll_sent(
        &self,
        cx: &mut Context<'_>,
        done: impl Fn(&ConnState) -> bool,
    ) -> Poll<std::result::Result<(), StreamError>> {
        let mut st = self.shared.lock();
        if done(&st) {
            return Poll::Ready(Ok(()));
        }
        if let Some(f) = &st.failure {
            return Poll::Ready(Err(f.to_error()));
        }
        if st.closed {
            return Poll::Ready(Err(StreamError::Closed));
        }
        st.tx_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    fn request_close(&self) {
        let mut st = self.shared.lock();
        if !st.close_requested {
            st.close_requested = true;
            drop(st);
            self.ctl.poke(self.shared.handle);
        }
    }

    /// Close the sending direction: FIN after everything queued; waits
    /// until the peer has acknowledged the FIN (so everything sent before
    /// was delivered to its TCP). The peer may keep sending, and what it
    /// sent stays readable after the connection ends, read or not (as a
    /// kernel socket after `shutdown(SHUT_WR)`). Dropping every handle of
    /// the stream while received data waits unread resets the connection
    /// instead of closing it (RST, RFC 1122 §4.2.2.13, as Linux's `close`
    /// does): the peer learns that data was lost. Idempotent.
    pub async fn close(&mut self) -> std::result::Result<(), StreamError> {
        self.request_close();
        poll_fn(|cx| self.poll_sent(cx, |st| st.fin_acked)).await
    }

    /// Reset the connection (RST, RFC 9293 §3.10.5 ABORT); queued data is
    /// discarded.
    pub fn abort(&mut self) {
        let mut st = self.shared.lock();
        st.abort_requested = true;
        st.tx.clear();
        st.tx_bytes = 0;
        drop(st);
        self.ctl.poke(self.shared.handle);
    }

    /// Counters (both directions).
    pub fn stats(&self) -> StreamStats {
        self.shared.lock().stats.snapshot()
    }

    /// Messages the engine reported expired since the last call (replaced
    /// by an inconsistent retransmission, or expired before their first
    /// transmission; thesis §4.2), oldest first.
    pub fn take_expired(&mut self) -> Vec<ExpiredMessage> {
        self.shared.lock().expired.take()
    }
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.sender_alive = false;
        if !st.split {
            // A whole `Stream` goes: its receiving half goes with it, at
            // once. The task must not see the sender gone and the receiver
            // alive in between, or it would close with a FIN (which the
            // peer reads as an orderly end) before it learns that data was
            // left unread and resets (RFC 1122 §4.2.2.13). Split halves
            // dropped one by one are a half-close first, by design.
            st.receiver_alive = false;
            st.unread_dropped |= !st.rx_bytes.is_empty() || !st.rx_msgs.is_empty();
        }
        drop(st);
        self.ctl.poke(self.shared.handle);
    }
}

impl AsyncWrite for StreamSender {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .poll_write_bytes(cx, buf)
            .map_err(std::io::Error::from)
    }

    /// Everything written has entered the engine's send buffer.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut()
            .poll_flush_queue(cx)
            .map_err(std::io::Error::from)
    }

    /// Queue the FIN after everything written (does not wait for its
    /// acknowledgement; [`StreamSender::close`] does).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.request_close();
        let st = this.shared.lock();
        if st.fin_sent || st.fin_acked || st.closed {
            return Poll::Ready(Ok(()));
        }
        drop(st);
        this.poll_flush_queue(cx).map_err(std::io::Error::from)
    }
}
