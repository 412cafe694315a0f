//! [`Stream`]: one engine connection, both directions, and its counters.

use super::recv_half::StreamReceiver;
use super::send_half::StreamSender;
use super::shared::{Shared, RX_MESSAGE_OVERHEAD};
use super::stack::{Control, StackOptions};
use crate::message::{
    MessageFramer, MessageStats, MessageStream, ReceivedMessage, SendMessage, StreamError,
};
use hollywood_msg::Framer;
use hollywood_tcp::{ConnectionStats, ExpiredMessage, HollywoodStats, OooStats, State};
use hollywood_transport::secure::{Identity, SecureSession, SecureStats, HANDSHAKE_SUBSTREAM};
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Per-stream counters: message layer plus the engine connection's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Message-layer counters (both directions).
    pub messages: MessageStats,
    /// Bytes accepted by byte-mode writes.
    pub bytes_written: u64,
    /// Bytes returned by byte-mode reads.
    pub bytes_read: u64,
    /// The engine connection's counters (last seen by the stack task).
    pub connection: ConnectionStats,
    /// Inconsistent-retransmission counters (thesis §4.2).
    pub hollywood: HollywoodStats,
    /// Out-of-order delivery counters (thesis §4.3); `ooo.out_of_order` is
    /// the number of segments handed up ahead of a hole.
    pub ooo: OooStats,
    /// Smoothed RTT (RFC 6298), when known.
    pub srtt: Option<Duration>,
    /// Retransmission timeout (RFC 6298, with backoff), last seen.
    pub rto: Option<Duration>,
    /// Connection state (last seen); `None` before the first update.
    pub state: Option<State>,
}

/// One engine connection: both directions. [`Stream::split`] gives the
/// halves to separate tasks. Dropping the stream closes it gracefully
/// (FIN after everything queued) and discards what arrives afterwards.
#[derive(Debug)]
pub struct Stream {
    tx: StreamSender,
    rx: StreamReceiver,
}

/// Secure mode: application messages held while the handshake finishes.
const EARLY_MAX_BYTES: usize = 1 << 20;

impl Stream {
    pub(super) fn new(shared: Arc<Shared>, ctl: Arc<Control>, options: StackOptions) -> Stream {
        Stream {
            tx: StreamSender {
                shared: shared.clone(),
                ctl: ctl.clone(),
                framer: MessageFramer::new(Framer::new(options.framer)),
                sealer: None,
            },
            rx: StreamReceiver {
                shared,
                ctl,
                opener: None,
                early: VecDeque::new(),
            },
        }
    }

    /// Secure mode, client end (docs/SECURITY.md): a TLS 1.3 handshake in
    /// ordered messages on sub-stream
    /// [`HANDSHAKE_SUBSTREAM`](hollywood_transport::secure::HANDSHAKE_SUBSTREAM)
    /// trusting only `server`'s certificate; then every message is sealed
    /// and opened with keys from the TLS exporter. Call on a fresh
    /// connection whose peer calls [`Stream::secure_server`] (or
    /// `KernelStream::secure_server`: the two interoperate).
    pub async fn secure_client(
        self,
        server: &Identity,
    ) -> std::result::Result<Stream, StreamError> {
        let s = SecureSession::client(server).map_err(StreamError::Security)?;
        self.handshake(s).await
    }

    /// Secure mode, server end, presenting `identity`.
    pub async fn secure_server(
        self,
        identity: &Identity,
    ) -> std::result::Result<Stream, StreamError> {
        let s = SecureSession::server(identity).map_err(StreamError::Security)?;
        self.handshake(s).await
    }

    async fn handshake(
        mut self,
        mut session: SecureSession,
    ) -> std::result::Result<Stream, StreamError> {
        let timeout = self.tx.shared.connect_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut early_bytes = 0;
        loop {
            while let Some((id, bytes)) = session.poll_handshake() {
                self.tx.send_handshake(id, &bytes).await?;
            }
            if let Some(f) = session.failure() {
                return Err(StreamError::Security(f.to_string()));
            }
            if session.is_ready() {
                break;
            }
            let m = tokio::time::timeout_at(deadline, self.rx.recv_message())
                .await
                .map_err(|_| StreamError::ConnectTimeout(timeout))??
                .ok_or_else(|| {
                    StreamError::Security("the peer closed during the handshake".into())
                })?;
            if m.substream != HANDSHAKE_SUBSTREAM {
                if !self.rx.shared.ooo {
                    // In order, nothing may come before the handshake.
                    return Err(StreamError::Security(
                        "the peer sent a message before the handshake completed".into(),
                    ));
                }
                // Out-of-order delivery handed up an application message
                // before the handshake's last one: it waits for the keys.
                early_bytes += m.payload.len() + RX_MESSAGE_OVERHEAD;
                session.note_early(early_bytes > EARLY_MAX_BYTES);
                if early_bytes > EARLY_MAX_BYTES {
                    return Err(StreamError::Security(
                        "the peer sent more than 1 MiB before the handshake completed".into(),
                    ));
                }
                self.rx.early.push_back(m);
                continue;
            }
            if let Err(e) = session.handle_handshake(&m.payload) {
                // Let the peer learn why (a TLS alert), then give up.
                while let Some((id, bytes)) = session.poll_handshake() {
                    let _ = self.tx.send_handshake(id, &bytes).await;
                }
                return Err(StreamError::Security(e));
            }
        }
        let (sealer, opener) = session.into_halves().expect("ready");
        self.tx.sealer = Some(Box::new(sealer));
        self.rx.opener = Some(Box::new(opener));
        Ok(self)
    }

    /// Secure mode: the receiving direction's counters (opened,
    /// authentication failures, replays); `None` in plain mode.
    pub fn secure_stats(&self) -> Option<SecureStats> {
        self.rx.secure_stats()
    }

    /// The two halves, for use from two tasks.
    pub fn split(self) -> (StreamSender, StreamReceiver) {
        self.tx.shared.lock().split = true;
        (self.tx, self.rx)
    }

    /// The engine's address of the connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.tx.shared.local
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.tx.shared.remote
    }

    /// Byte mode: queue all of `buf`, waiting for queue space.
    pub async fn write_all(&mut self, buf: &[u8]) -> std::result::Result<(), StreamError> {
        self.tx.write_all(buf).await
    }

    /// Byte mode: read at least one byte into `buf`; `Ok(0)` at end of
    /// stream (or for an empty `buf`).
    pub async fn read(&mut self, buf: &mut [u8]) -> std::result::Result<usize, StreamError> {
        self.rx.read(buf).await
    }

    /// Message mode: see [`StreamSender::send_message`].
    pub async fn send_message(&mut self, m: SendMessage) -> std::result::Result<u32, StreamError> {
        self.tx.send_message(m).await
    }

    /// Message mode: see [`StreamReceiver::recv_message`].
    pub async fn recv_message(
        &mut self,
    ) -> std::result::Result<Option<ReceivedMessage>, StreamError> {
        self.rx.recv_message().await
    }

    /// See [`StreamSender::close`].
    pub async fn close(&mut self) -> std::result::Result<(), StreamError> {
        self.tx.close().await
    }

    /// Reset the connection (RST); queued data is discarded.
    pub fn abort(&mut self) {
        self.tx.abort();
    }

    /// Counters (both directions).
    pub fn stats(&self) -> StreamStats {
        self.tx.stats()
    }

    /// See [`StreamSender::take_expired`].
    pub fn take_expired(&mut self) -> Vec<ExpiredMessage> {
        self.tx.take_expired()
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().rx).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tx).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tx).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tx).poll_shutdown(cx)
    }
}

impl MessageStream for Stream {
    fn send_message(
        &mut self,
        m: SendMessage,
    ) -> impl Future<Output = std::result::Result<u32, StreamError>> + Send {
        self.tx.send_message(m)
    }

    fn recv_message(
        &mut self,
    ) -> impl Future<Output = std::result::Result<Option<ReceivedMessage>, StreamError>> + Send
    {
        self.rx.recv_message()
    }

    fn close(&mut self) -> impl Future<Output = std::result::Result<(), StreamError>> + Send {
        self.tx.close()
    }

    fn message_stats(&self) -> MessageStats {
        self.tx.stats().messages
    }

    fn take_expired(&mut self) -> Vec<ExpiredMessage> {
        self.tx.take_expired()
    }
}
