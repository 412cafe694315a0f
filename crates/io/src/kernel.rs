//! The intermediary layer over an ordinary kernel TCP socket (thesis §4.4,
//! "neither side modified" / "only the other side modified").
//!
//! [`KernelStream`] frames messages with the same `hollywood_msg::Framer`
//! as the engine's [`crate::engine::Stream`] and writes them to a tokio
//! `TcpStream` with `TCP_NODELAY` (thesis §4.2: Nagle off, so each message
//! leaves at once); the receiver feeds whatever the socket returns to
//! `Deframer::push_stream`. So a Hollywood application talks to a
//! kernel-only peer in either direction, and the engine's receiver
//! deframes whatever a kernel sender wrote (thesis §4.4: "the TCP
//! Hollywood intermediary layer can also be deployed as part of an
//! application, irrespective of the state of deployment of the kernel TCP
//! extensions").
//!
//! **Lifetimes at a kernel sender.** The kernel cannot replace bytes it
//! holds, so a lifetime only matters until the frame is written: a
//! message whose lifetime passes while `send_message` waits for socket
//! buffer space, before its first byte is written, is dropped at the
//! sender and reported as expired (`ExpiryReason::NotSent`, counted in
//! [`MessageStats::not_sent`]); its id is still returned. This is the
//! engine's "expiry before sequence numbers" rule (docs/HOLLYWOOD.md) in
//! the intermediary layer; it goes beyond thesis §4.4 (which has a
//! standard sender deliver every message) and has no wire-visible effect.
//! With [`KernelOptions::notsent_lowat`] the kernel keeps only that many
//! unsent bytes (Linux `TCP_NOTSENT_LOWAT`), so messages wait here, where
//! they can still expire, rather than in the socket buffer, where they
//! cannot. Once any byte of a frame is in the kernel's buffer the whole
//! frame is written and delivered reliably. Ordered messages are never
//! dropped (their successor names them as its predecessor; as at the
//! engine, they are not replaceable). Dependencies are checked with the
//! engine's rules (thesis §4.2, per sub-stream); the dependency override
//! never applies here: the sender holds one message at a time, so no later
//! message can have declared a dependency on the one that is waiting (at
//! the engine, later messages queue behind it and protect it).
//!
//! Messages arrive in order and reliably (thesis §4.4): no inconsistent
//! retransmissions, no out-of-order delivery.
//!
//! ```no_run
//! # async fn demo() -> Result<(), hollywood_io::message::StreamError> {
//! use hollywood_io::kernel::KernelStream;
//! use hollywood_io::message::{MessageStream, SendMessage};
//!
//! let mut s = KernelStream::connect("10.77.1.2:5000".parse().unwrap()).await?;
//! s.send_message(SendMessage::new(&b"hello"[..]).substream(3)).await?;
//! s.close().await?;
//! while let Some(m) = s.recv_message().await? {
//!     println!("{} bytes on sub-stream {}", m.payload.len(), m.substream);
//! }
//! # Ok(()) }
//! ```

use crate::message::{
    ExpiredLog, MessageFramer, MessageStats, MessageStream, ReceivedMessage, SendMessage,
    StreamError,
};
use crate::netns::NetNs;
use hollywood_msg::{encode_frame, Deframer, DeframerConfig, FrameHeader, Framer, FramerConfig};
use hollywood_tcp::{ExpiredMessage, ExpiryReason};
use hollywood_transport::secure::{
    Identity, Opener, Sealer, SecureSession, SecureStats, HANDSHAKE_SUBSTREAM,
};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Default timeout of [`KernelStream::connect`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Framer and deframer settings of a kernel stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelOptions {
    /// The message framer (first id, largest payload).
    pub framer: FramerConfig,
    /// The message deframer (bounds, ordered sub-stream waiting).
    pub deframer: DeframerConfig,
    /// Linux `TCP_NOTSENT_LOWAT` (bytes): the socket reports itself
    /// writable only while fewer unsent bytes than this wait in the kernel,
    /// so messages wait in `send_message`, where an expired one is dropped
    /// before it is written, instead of in the socket buffer. `None` (the
    /// default) leaves the kernel's default (no limit), as an ordinary
    /// socket application runs.
    pub notsent_lowat: Option<u32>,
    /// Linux `TCP_CONGESTION`: the kernel's congestion control module by
    /// name (`reno`, `cubic`, `bbr`, …). Setting it fails when the module
    /// is neither loaded nor allowed (`net.ipv4.tcp_allowed_congestion_control`)
    /// and this process may not load it. `None`: the kernel's default.
    pub congestion: Option<&'static str>,
    /// TCP keep-alive (`SO_KEEPALIVE`): the first probe after this much
    /// idle time, then probes at the same interval (`TCP_KEEPIDLE`,
    /// `TCP_KEEPINTVL`; the kernel's count of probes). `None`: off.
    pub keepalive: Option<Duration>,
}

/// The message layer over a kernel TCP connection.
#[derive(Debug)]
pub struct KernelStream {
    tx: KernelSender,
    rx: KernelReceiver,
}

/// The sending half of a [`KernelStream`].
#[derive(Debug)]
pub struct KernelSender {
    w: OwnedWriteHalf,
    framer: MessageFramer,
    /// Secure mode: seals every message ([`KernelStream::secure_client`]).
    sealer: Option<Sealer>,
    stats: MessageStats,
    expired: ExpiredLog,
    buf: Vec<u8>,
    closed: bool,
}

/// The receiving half of a [`KernelStream`].
#[derive(Debug)]
pub struct KernelReceiver {
    r: OwnedReadHalf,
    deframer: Deframer,
    /// Secure mode: opens every message; what does not open is dropped.
    opener: Option<Opener>,
    /// Time zero of the deframer's clock.
    epoch: tokio::time::Instant,
    buf: Vec<u8>,
    received: u64,
    eof: bool,
}

impl KernelStream {
    /// Connect to `remote` from the current network namespace (timeout
    /// [`CONNECT_TIMEOUT`]).
    pub async fn connect(remote: SocketAddr) -> Result<KernelStream, StreamError> {
        let s = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(remote))
            .await
            .map_err(|_| StreamError::ConnectTimeout(CONNECT_TIMEOUT))??;
        KernelStream::from_tcp(s)
    }

    /// Connect to `remote` with a socket of namespace `ns` (the socket is
    /// created on a thread inside `ns` and then driven by the calling
    /// runtime).
    pub async fn connect_in(ns: &NetNs, remote: SocketAddr) -> Result<KernelStream, StreamError> {
        let v4 = remote.is_ipv4();
        let socket = ns
            .run(move || {
                if v4 {
                    TcpSocket::new_v4()
                } else {
                    TcpSocket::new_v6()
                }
            })
            .map_err(|e| StreamError::Io(std::io::Error::other(e)))??;
        let s = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(remote))
            .await
            .map_err(|_| StreamError::ConnectTimeout(CONNECT_TIMEOUT))??;
        KernelStream::from_tcp(s)
    }

    /// Wrap a connected socket (sets `TCP_NODELAY`).
    pub fn from_tcp(stream: TcpStream) -> Result<KernelStream, StreamError> {
        KernelStream::with_options(stream, KernelOptions::default())
    }

    /// Wrap a connected socket with explicit framer/deframer settings.
    pub fn with_options(
        stream: TcpStream,
        options: KernelOptions,
    ) -> Result<KernelStream, StreamError> {
        stream.set_nodelay(true)?;
        let sock = socket2::SockRef::from(&stream);
        if let Some(lowat) = options.notsent_lowat {
            sock.set_tcp_notsent_lowat(lowat)?;
        }
        if let Some(cc) = options.congestion {
            sock.set_tcp_congestion(cc.as_bytes())
                .map_err(|e| std::io::Error::new(e.kind(), format!("TCP_CONGESTION {cc}: {e}")))?;
        }
        if let Some(idle) = options.keepalive {
            let ka = socket2::TcpKeepalive::new()
                .with_time(idle)
                .with_interval(idle);
            sock.set_tcp_keepalive(&ka)?;
        }
        let (r, w) = stream.into_split();
        Ok(KernelStream {
            tx: KernelSender {
                w,
                framer: MessageFramer::new(Framer::new(options.framer)),
                sealer: None,
                stats: MessageStats::default(),
                expired: ExpiredLog::default(),
                buf: Vec::new(),
                closed: false,
            },
            rx: KernelReceiver {
                r,
                deframer: Deframer::new(options.deframer),
                opener: None,
                epoch: tokio::time::Instant::now(),
                buf: vec![0; 64 << 10],
                received: 0,
                eof: false,
            },
        })
    }

    /// Secure mode, client end (docs/SECURITY.md): a TLS 1.3 handshake
    /// in messages on sub-stream [`HANDSHAKE_SUBSTREAM`], trusting only
    /// `server`'s certificate; then every message is sealed and opened
    /// with keys from the TLS exporter. Call on a fresh connection, with
    /// the peer calling [`KernelStream::secure_server`].
    pub async fn secure_client(self, server: &Identity) -> Result<KernelStream, StreamError> {
        let s = SecureSession::client(server).map_err(StreamError::Security)?;
        self.handshake(s).await
    }

    /// Secure mode, server end, presenting `identity`.
    pub async fn secure_server(self, identity: &Identity) -> Result<KernelStream, StreamError> {
        let s = SecureSession::server(identity).map_err(StreamError::Security)?;
        self.handshake(s).await
    }

    /// Write what the handshake has to say, as frames on
    /// [`HANDSHAKE_SUBSTREAM`] outside the application's id sequence (its
    /// ids from 0 stay as they were; the kernel keeps the order).
    async fn send_handshake(&mut self, session: &mut SecureSession) -> Result<(), StreamError> {
        use tokio::io::AsyncWriteExt;
        while let Some((id, bytes)) = session.poll_handshake() {
            self.tx.buf.clear();
            let header = FrameHeader {
                substream: HANDSHAKE_SUBSTREAM,
                id,
                substream_seq: None,
                ordered_prev: None,
            };
            encode_frame(&header, &bytes, &mut self.tx.buf);
            self.tx.w.write_all(&self.tx.buf).await?;
        }
        Ok(())
    }

    async fn handshake(mut self, mut session: SecureSession) -> Result<KernelStream, StreamError> {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        loop {
            self.send_handshake(&mut session).await?;
            if let Some(f) = session.failure() {
                return Err(StreamError::Security(f.to_string()));
            }
            if session.is_ready() {
                break;
            }
            // The peer's next handshake message. Application messages
            // that follow it stay in the deframer for `recv_message`.
            let m = loop {
                if let Some(m) = self.rx.deframer.poll_message() {
                    break m;
                }
                let n = tokio::time::timeout_at(deadline, self.rx.r.read(&mut self.rx.buf))
                    .await
                    .map_err(|_| StreamError::ConnectTimeout(CONNECT_TIMEOUT))??;
                if n == 0 {
                    return Err(StreamError::Security(
                        "the peer closed during the handshake".into(),
                    ));
                }
                let now = self.rx.now_ns();
                self.rx.deframer.push_stream(&self.rx.buf[..n], now);
            };
            if m.substream != HANDSHAKE_SUBSTREAM {
                return Err(StreamError::Security(
                    "the peer sent a message before the handshake completed".into(),
                ));
            }
            if let Err(e) = session.handle_handshake(&m.payload) {
                // Let the peer learn why (a TLS alert), then give up.
                let _ = self.send_handshake(&mut session).await;
                return Err(StreamError::Security(e));
            }
        }
        let (sealer, opener) = session.into_halves().expect("ready");
        self.tx.sealer = Some(sealer);
        self.rx.opener = Some(opener);
        Ok(self)
    }

    /// Secure mode: the receiving direction's counters (`opened`,
    /// `auth_failed`, `replayed`, `too_old`); `None` in plain mode.
    pub fn secure_stats(&self) -> Option<SecureStats> {
        self.rx.secure_stats()
    }

    /// The halves, for use from two tasks.
    pub fn split(self) -> (KernelSender, KernelReceiver) {
        (self.tx, self.rx)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<SocketAddr, StreamError> {
        Ok(self.tx.w.peer_addr()?)
    }

    /// Reset the connection: close it with `SO_LINGER` 0, so the kernel
    /// sends a RST instead of a FIN and discards unsent data.
    pub fn abort(self) -> Result<(), StreamError> {
        let stream = self
            .rx
            .r
            .reunite(self.tx.w)
            .map_err(|e| StreamError::Io(std::io::Error::other(e.to_string())))?;
        stream.set_zero_linger()?;
        drop(stream);
        Ok(())
    }

    /// The local address.
    pub fn local_addr(&self) -> Result<SocketAddr, StreamError> {
        Ok(self.tx.w.local_addr()?)
    }
}

impl KernelSender {
    /// Frame `m` and write it; returns its id. See the module docs for what
    /// a lifetime means here. Not cancellation safe once writing started:
    /// a cancelled call may leave part of a frame in the stream, which the
    /// receiver discards (counted as a CRC or COBS error), never delivers.
    pub async fn send_message(&mut self, m: SendMessage) -> Result<u32, StreamError> {
        let called = tokio::time::Instant::now();
        if self.closed {
            return Err(StreamError::Closed);
        }
        self.buf.clear();
        let id = self.framer.frame(&m, self.sealer.as_mut(), &mut self.buf)?;
        self.stats.messages_sent += 1;
        self.stats.framed_bytes_sent += self.buf.len() as u64;
        // Ordered messages are never dropped (as at the engine, where
        // `replaceable = !ordered`): the next ordered message names this
        // one as its predecessor, and the receiver would hold the rest of
        // the sub-stream waiting for it.
        let deadline = m.lifetime.filter(|_| !m.ordered).map(|l| called + l);
        let mut written = 0;
        while written < self.buf.len() {
            match deadline {
                Some(d) if written == 0 => {
                    if tokio::time::Instant::now() >= d {
                        // Lifetime over before the first byte left: drop it
                        // here (it would arrive too late anyway).
                        self.expired.push(
                            ExpiredMessage {
                                id,
                                reason: ExpiryReason::NotSent,
                            },
                            &mut self.stats,
                        );
                        return Ok(id);
                    }
                    tokio::select! {
                        biased;
                        r = self.w.writable() => r?,
                        // Re-checked at the top of the loop.
                        () = tokio::time::sleep_until(d) => continue,
                    }
                }
                _ => self.w.writable().await?,
            }
            match self.w.try_write(&self.buf[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(id)
    }

    /// Shut down the sending direction (FIN after everything written).
    pub async fn close(&mut self) -> Result<(), StreamError> {
        if !self.closed {
            self.closed = true;
            tokio::io::AsyncWriteExt::shutdown(&mut self.w).await?;
        }
        Ok(())
    }

    /// Sender counters.
    pub fn stats(&self) -> MessageStats {
        self.stats
    }

    /// Messages dropped because their lifetime passed before they were
    /// written, oldest first.
    pub fn take_expired(&mut self) -> Vec<ExpiredMessage> {
        self.expired.take()
    }
}

impl KernelReceiver {
    /// Secure mode: the message opened, or `None` if it does not open
    /// (changed, spliced, replayed, foreign: counted, dropped) or is a
    /// stray handshake message. Plain mode: the message.
    fn opened(&mut self, mut m: hollywood_msg::Message) -> Option<hollywood_msg::Message> {
        if let Some(o) = &mut self.opener {
            m.payload = o.open_application(m.id, m.substream, &m.payload)?;
        }
        Some(m)
    }

    /// Secure mode: the receiving direction's counters.
    pub fn secure_stats(&self) -> Option<SecureStats> {
        self.opener.as_ref().map(Opener::stats)
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn message(&mut self, m: hollywood_msg::Message) -> ReceivedMessage {
        self.received += 1;
        ReceivedMessage {
            id: m.id,
            substream: m.substream,
            substream_seq: m.substream_seq,
            payload: m.payload,
            ordered: m.ordered,
            arrival: self.epoch + Duration::from_nanos(m.arrival_ns),
        }
    }

    /// The next message; `Ok(None)` after the peer's FIN once everything
    /// was delivered. Cancellation safe.
    pub async fn recv_message(&mut self) -> Result<Option<ReceivedMessage>, StreamError> {
        loop {
            if let Some(m) = self.deframer.poll_message() {
                if let Some(m) = self.opened(m) {
                    return Ok(Some(self.message(m)));
                }
                continue;
            }
            if self.eof {
                // Release ordered messages still waiting for a predecessor
                // that can no longer arrive, then report the end.
                self.deframer.finish();
                while let Some(m) = self.deframer.poll_message() {
                    if let Some(m) = self.opened(m) {
                        return Ok(Some(self.message(m)));
                    }
                }
                return Ok(None);
            }
            // Ordered sub-streams may wait for a predecessor with a time
            // bound (`DeframerConfig::ordered_max_wait_ns`).
            let timer = self
                .deframer
                .poll_timeout()
                .map(|t| self.epoch + Duration::from_nanos(t));
            let read = tokio::select! {
                r = self.r.read(&mut self.buf) => Some(r),
                () = async {
                    match timer {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => None,
            };
            let now = self.now_ns();
            match read {
                Some(Ok(0)) => self.eof = true,
                Some(Ok(n)) => self.deframer.push_stream(&self.buf[..n], now),
                Some(Err(e)) => return Err(e.into()),
                None => self.deframer.handle_timeout(now),
            }
        }
    }

    /// Receiver counters (`deframer` and `messages_received`).
    pub fn stats(&self) -> MessageStats {
        MessageStats {
            messages_received: self.received,
            deframer: self.deframer.stats(),
            ..MessageStats::default()
        }
    }
}

impl MessageStream for KernelStream {
    fn send_message(
        &mut self,
        m: SendMessage,
    ) -> impl Future<Output = Result<u32, StreamError>> + Send {
        self.tx.send_message(m)
    }

    fn recv_message(
        &mut self,
    ) -> impl Future<Output = Result<Option<ReceivedMessage>, StreamError>> + Send {
        self.rx.recv_message()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send {
        self.tx.close()
    }

    fn message_stats(&self) -> MessageStats {
        let r = self.rx.stats();
        MessageStats {
            messages_received: r.messages_received,
            deframer: r.deframer,
            ..self.tx.stats()
        }
    }

    fn take_expired(&mut self) -> Vec<ExpiredMessage> {
        self.tx.take_expired()
    }
}

/// A kernel TCP listener handing out [`KernelStream`]s.
#[derive(Debug)]
pub struct KernelListener {
    listener: TcpListener,
    options: KernelOptions,
}

impl KernelListener {
    /// Listen on `addr` in the current network namespace.
    pub async fn bind(addr: SocketAddr) -> Result<KernelListener, StreamError> {
        Ok(KernelListener {
            listener: TcpListener::bind(addr).await?,
            options: KernelOptions::default(),
        })
    }

    /// Listen on `addr` with a socket of namespace `ns`. Call within a
    /// tokio runtime.
    pub fn bind_in(ns: &NetNs, addr: SocketAddr) -> Result<KernelListener, StreamError> {
        let std_listener = ns
            .run(move || -> std::io::Result<std::net::TcpListener> {
                let l = std::net::TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Ok(l)
            })
            .map_err(|e| StreamError::Io(std::io::Error::other(e)))??;
        Ok(KernelListener {
            listener: TcpListener::from_std(std_listener)?,
            options: KernelOptions::default(),
        })
    }

    /// Use `options` for the streams accepted from now on.
    #[must_use]
    pub fn with_options(mut self, options: KernelOptions) -> KernelListener {
        self.options = options;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, StreamError> {
        Ok(self.listener.local_addr()?)
    }

    /// The next connection.
    pub async fn accept(&self) -> Result<(KernelStream, SocketAddr), StreamError> {
        let (s, peer) = self.listener.accept().await?;
        Ok((KernelStream::with_options(s, self.options)?, peer))
    }
}
