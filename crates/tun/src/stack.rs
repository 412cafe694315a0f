//! An async socket-like API over the engine on a TUN device: [`Stack`],
//! [`Listener`], [`Stream`].
//!
//! [`Stack::spawn`] moves a [`TunHost`] into a tokio task that runs
//! [`TunHost::drive`] until [`Stack::shutdown`] (or until every handle is
//! gone); the [`Stack`] handle (cheap to clone) sends
//! it commands over a channel and wakes it with a [`HostWaker`]. Each
//! connection's application side ([`Stream`], or its halves
//! [`StreamSender`] / [`StreamReceiver`]) shares a small mutex-protected
//! state with the task: a bounded send queue in front of the engine and
//! bounded receive queues behind it. The task moves data between those
//! queues and the engine on every step, so the engine (sans-IO) still only
//! sees the host's clock and never an application thread.
//!
//! A stream direction is used in one of two modes, fixed by its first use:
//!
//! - **byte stream**: [`Stream::write_all`] / [`Stream::read`] or the
//!   `tokio::io::{AsyncRead, AsyncWrite}` impls, exactly TCP;
//! - **messages** (thesis §7.2): [`Stream::send_message`] /
//!   [`Stream::recv_message`] through the intermediary layer
//!   (`hollywood_msg`, `docs/PROTOCOL.md`). The sender frames each message
//!   and queues it with `Connection::send_message` and its metadata
//!   (lifetime, dependency, `replaceable = !ordered`, thesis §4.2), so with
//!   `Config.hollywood.inconsistent_retransmissions` the engine may replace
//!   expired messages on retransmission ([`StreamSender::take_expired`]
//!   reports them). The receiver deframes the in-order stream, or, with
//!   `Config.hollywood.out_of_order_delivery`, every segment as it arrives
//!   (`Connection::recv_segment`, thesis §4.3: no head-of-line blocking).
//!   Either end may be a kernel socket instead ([`crate::kernel`], thesis
//!   §4.4).
//!
//! Backpressure: `send_message` and `write_all` wait while the stream's
//! send queue ([`StackOptions::send_queue`]) is full; the queue drains
//! into the engine's send buffer as it frees space (`Event::Writable`).
//! Receiving stops pulling from the engine while the receive queue
//! ([`StackOptions::recv_queue`]) is full, so the engine's advertised window
//! shrinks as in any TCP (once the peer's FIN has arrived the rest is
//! pulled regardless, bounded by the engine's receive buffer, so that no
//! data is dropped with the connection).
//!
//! Errors are typed ([`StreamError`]): a refused connect is
//! `ConnectionRefused`, a connect that does not complete within
//! [`StackOptions::connect_timeout`] is `ConnectTimeout`, a reset is
//! `Reset`, exhausted retransmissions `TimedOut`; data already received is
//! still returned before the error. Nothing waits for ever on a dead
//! connection or a stopped stack.
//!
//! ```no_run
//! # async fn demo(tun: hollywood_tun::TunDevice) -> Result<(), Box<dyn std::error::Error>> {
//! use hollywood_tun::message::{MessageStream, SendMessage};
//! use hollywood_tun::stack::Stack;
//! use std::time::Duration;
//!
//! let config = hollywood_tcp::Config::hollywood(true, true);
//! let stack = Stack::spawn(tun, config)?;
//! let local = "10.77.1.2:0".parse()?;
//! let mut stream = stack.connect(local, "10.77.2.2:5000".parse()?, None).await?;
//! let id = stream
//!     .send_message(SendMessage::new(&b"hello"[..]).lifetime(Duration::from_millis(150)))
//!     .await?;
//! while let Some(m) = stream.recv_message().await? {
//!     println!("message {} on sub-stream {}: {} bytes", m.id, m.substream, m.payload.len());
//! }
//! stream.close().await?;
//! let report = stack.shutdown().await?;
//! println!("sent message {id}; host: {:?}", report.host);
//! # Ok(()) }
//! ```

use crate::device::{TunConfig, TunDevice};
use crate::error::Result;
use crate::host::{HostStats, HostWaker, Step, TunHost};
use crate::message::{
    ExpiredLog, MessageFramer, MessageStats, MessageStream, ReceivedMessage, SendMessage,
    StreamError,
};
use crate::netns::NetNs;
use hollywood_msg::{Deframer, DeframerConfig, Framer, FramerConfig};
use hollywood_tcp::{
    Config, ConnHandle, Connection, ConnectionStats, Endpoint, EndpointEvent, EndpointStats, Event,
    ExpiredMessage, HollywoodStats, Instant, MessageMeta, OooStats, SendMessageError, State,
};
use hollywood_transport::secure::{
    Identity, Opener, Sealer, SecureSession, SecureStats, HANDSHAKE_SUBSTREAM, TAG_LEN,
};
use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};

/// Settings of the stack's application side (the engine's own settings are
/// the `hollywood_tcp::Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackOptions {
    /// A `connect` that has not reached ESTABLISHED after this long is
    /// aborted with [`StreamError::ConnectTimeout`]. Default 10 s.
    pub connect_timeout: Duration,
    /// Bytes a stream may queue in front of the engine's send buffer before
    /// `send_message`/`write_all` wait. One message larger than this is
    /// still accepted when the queue is empty. Default 64 KiB.
    pub send_queue: usize,
    /// Bytes (byte mode) or payload bytes (message mode) received and not
    /// yet read by the application before the stack stops pulling from the
    /// engine. Default 1 MiB.
    pub recv_queue: usize,
    /// Accepted connections waiting for [`Listener::accept`]; beyond it new
    /// connections are reset (counted in [`StackStats::accept_overflow`]).
    /// Default 128.
    pub backlog: usize,
    /// The message framer (first id, largest payload).
    pub framer: FramerConfig,
    /// The message deframer (bounds, ordered sub-stream waiting).
    pub deframer: DeframerConfig,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            connect_timeout: Duration::from_secs(10),
            send_queue: 64 << 10,
            recv_queue: 1 << 20,
            backlog: 128,
            framer: FramerConfig::default(),
            deframer: DeframerConfig::default(),
        }
    }
}

/// Counters of the stack's application side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Connections accepted and handed to a [`Listener`].
    pub accepted: u64,
    /// Connections reset because the listener's backlog was full or the
    /// listener was gone.
    pub accept_overflow: u64,
    /// Connections opened by `connect` that reached ESTABLISHED.
    pub connected: u64,
    /// `connect` attempts that failed (refused, timed out, cancelled).
    pub connect_failed: u64,
    /// Connections reset because the application dropped the stream with
    /// received data it never read (RFC 1122 §4.2.2.13, as Linux does).
    pub reset_unread: u64,
}

/// What [`Stack::shutdown`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The host's packet counters.
    pub host: HostStats,
    /// The engine's counters.
    pub endpoint: EndpointStats,
    /// The application side's counters.
    pub stack: StackStats,
}

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

// ---------------------------------------------------------------------
// State shared between a stream's handles and the stack task
// ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unset,
    Bytes,
    Messages,
}

#[derive(Debug, Clone)]
enum Failure {
    Reset,
    TimedOut,
    StackClosed,
    StackFailed(Arc<str>),
}

impl Failure {
    fn to_error(&self) -> StreamError {
        match self {
            Failure::Reset => StreamError::Reset,
            Failure::TimedOut => StreamError::TimedOut,
            Failure::StackClosed => StreamError::StackClosed,
            Failure::StackFailed(s) => StreamError::StackFailed(s.to_string()),
        }
    }
}

#[derive(Debug)]
enum TxItem {
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
        /// When `send_message` was called (the lifetime runs from here).
        queued: tokio::time::Instant,
    },
}

impl TxItem {
    fn remaining(&self) -> usize {
        match self {
            TxItem::Bytes { buf, off } => buf.len() - off,
            TxItem::Message { frame, .. } => frame.len(),
        }
    }
}

#[derive(Debug)]
struct ConnState {
    // Application → task.
    tx: VecDeque<TxItem>,
    tx_bytes: usize,
    tx_mode: Mode,
    close_requested: bool,
    abort_requested: bool,
    sender_alive: bool,
    receiver_alive: bool,
    tx_waker: Option<Waker>,
    // Task → application.
    rx_mode: Mode,
    rx_bytes: VecDeque<u8>,
    rx_msgs: VecDeque<ReceivedMessage>,
    rx_msg_bytes: usize,
    /// The task stopped pulling because the receive queue was full.
    rx_stalled: bool,
    rx_waker: Option<Waker>,
    /// Everything the peer sent before its FIN is in the receive queues.
    eof: bool,
    failure: Option<Failure>,
    /// The connection is over in the engine (or gone from it).
    closed: bool,
    /// The engine still holds data for the receiver, which has not started
    /// reading: a closed connection is kept until it is read.
    rx_pending: bool,
    /// The application let go of both halves while data it never read was
    /// waiting: the task answers with RST (RFC 1122 §4.2.2.13).
    unread_dropped: bool,
    /// The stream was split into halves that live apart.
    split: bool,
    /// Our FIN was handed to the engine.
    fin_sent: bool,
    /// Our FIN was acknowledged.
    fin_acked: bool,
    // Counters.
    stats: StreamStats,
    expired: ExpiredLog,
}

impl ConnState {
    fn new() -> ConnState {
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
            stats: StreamStats::default(),
            expired: ExpiredLog::default(),
        }
    }

    fn wake_all(&mut self) {
        if let Some(w) = self.tx_waker.take() {
            w.wake();
        }
        if let Some(w) = self.rx_waker.take() {
            w.wake();
        }
    }

    /// An error for a send-side operation, if it cannot proceed.
    fn send_blocked(&self) -> Option<StreamError> {
        if let Some(f) = &self.failure {
            return Some(f.to_error());
        }
        if self.closed || self.close_requested || self.abort_requested {
            return Some(StreamError::Closed);
        }
        None
    }

    fn set_mode(
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

#[derive(Debug)]
struct Shared {
    local: SocketAddr,
    remote: SocketAddr,
    /// The connection delivers segments out of order (thesis §4.3).
    ooo: bool,
    send_queue: usize,
    recv_queue: usize,
    /// The engine's send buffer: no frame larger than this can be queued.
    send_buffer: usize,
    /// Secure mode: the handshake's time limit.
    connect_timeout: Duration,
    state: Mutex<ConnState>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ConnState> {
        // A panic while holding the lock leaves consistent data (every
        // critical section is a few field updates), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

// ---------------------------------------------------------------------
// Commands and the handle
// ---------------------------------------------------------------------

type Reply<T> = oneshot::Sender<std::result::Result<T, StreamError>>;

enum Command {
    Listen {
        local: SocketAddr,
        config: Option<Config>,
        reply: Reply<mpsc::Receiver<Arc<Shared>>>,
    },
    Unlisten(SocketAddr),
    Connect {
        local: SocketAddr,
        remote: SocketAddr,
        config: Option<Config>,
        reply: Reply<Arc<Shared>>,
    },
    Stats(oneshot::Sender<(EndpointStats, StackStats)>),
    Shutdown(oneshot::Sender<ShutdownReport>),
}

#[derive(Debug)]
struct Control {
    /// `None` only while dropping.
    cmds: Option<mpsc::UnboundedSender<Command>>,
    waker: HostWaker,
    /// Set when the task ended with an error.
    failure: Arc<Mutex<Option<Arc<str>>>>,
}

impl Control {
    fn send(&self, c: Command) -> std::result::Result<(), StreamError> {
        let cmds = self.cmds.as_ref().ok_or(StreamError::StackClosed)?;
        cmds.send(c).map_err(|_| self.stopped())?;
        self.waker.wake();
        Ok(())
    }

    fn stopped(&self) -> StreamError {
        match &*self.failure.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => StreamError::StackFailed(e.to_string()),
            None => StreamError::StackClosed,
        }
    }
}

impl Drop for Control {
    /// The last handle is gone: close the command channel, then wake the
    /// task so it notices (and ends once its connections are done).
    fn drop(&mut self) {
        drop(self.cmds.take());
        self.waker.wake();
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Listen { .. } => "Listen",
            Command::Unlisten(_) => "Unlisten",
            Command::Connect { .. } => "Connect",
            Command::Stats(_) => "Stats",
            Command::Shutdown(_) => "Shutdown",
        })
    }
}

/// Handle to an engine stack running in a tokio task (cheap to clone).
///
/// The task runs until [`Stack::shutdown`], or until every `Stack`,
/// [`Listener`] and [`Stream`] handle is dropped and every connection's
/// FIN has been acknowledged (so data written before dropping a stream is
/// delivered).
#[derive(Debug, Clone)]
pub struct Stack {
    ctl: Arc<Control>,
    options: StackOptions,
}

impl Stack {
    /// A stack on `tun` with engine configuration `config` (seeded from OS
    /// entropy) and default [`StackOptions`]. Must be called within a tokio
    /// runtime (the one the TUN device was created in).
    pub fn spawn(tun: TunDevice, config: Config) -> Result<Stack> {
        Ok(Stack::spawn_with(
            TunHost::new(tun, config)?,
            StackOptions::default(),
        ))
    }

    /// A stack on a prepared host (e.g. with [`TunHost::set_loss`] or
    /// [`TunHost::capture_to`] applied) with the given options.
    pub fn spawn_with(host: TunHost, options: StackOptions) -> Stack {
        let (tx, rx) = mpsc::unbounded_channel();
        let failure = Arc::new(Mutex::new(None));
        let ctl = Arc::new(Control {
            cmds: Some(tx),
            waker: host.waker(),
            failure: failure.clone(),
        });
        tokio::spawn(run(host, rx, options, failure));
        Stack { ctl, options }
    }

    /// Create a TUN device in `ns` with `tun` and run a stack on it: the
    /// usual way to put an engine host into a lab namespace. The engine's
    /// addresses are the other addresses of `tun.addrs`' prefixes.
    pub fn spawn_in(
        ns: &NetNs,
        tun: &TunConfig,
        config: Config,
        options: StackOptions,
    ) -> Result<Stack> {
        let dev = TunDevice::create(ns, tun)?;
        Ok(Stack::spawn_with(TunHost::new(dev, config)?, options))
    }

    /// The options the stack runs with.
    pub fn options(&self) -> &StackOptions {
        &self.options
    }

    /// Listen on `local` (the engine's address) with `config`, or the
    /// stack's configuration when `None`.
    pub async fn listen(
        &self,
        local: SocketAddr,
        config: Option<Config>,
    ) -> std::result::Result<Listener, StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Listen {
            local,
            config,
            reply,
        })?;
        let accepted = rx.await.map_err(|_| self.ctl.stopped())??;
        Ok(Listener {
            local,
            accepted,
            ctl: self.ctl.clone(),
            options: self.options,
        })
    }

    /// Open a connection from `local` (the engine's address; port 0 picks
    /// an ephemeral port) to `remote` with `config`, or the stack's
    /// configuration when `None`. Completes when the connection is
    /// ESTABLISHED; fails with [`StreamError::ConnectionRefused`] on a RST,
    /// [`StreamError::ConnectTimeout`] after
    /// [`StackOptions::connect_timeout`]. Dropping the future aborts the
    /// attempt.
    pub async fn connect(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        config: Option<Config>,
    ) -> std::result::Result<Stream, StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Connect {
            local,
            remote,
            config,
            reply,
        })?;
        let shared = rx.await.map_err(|_| self.ctl.stopped())??;
        Ok(Stream::new(shared, self.ctl.clone(), self.options))
    }

    /// The engine's and the application side's counters now.
    pub async fn stats(&self) -> std::result::Result<(EndpointStats, StackStats), StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Stats(reply))?;
        rx.await.map_err(|_| self.ctl.stopped())
    }

    /// Stop the task: every open connection is aborted (RST) and its
    /// streams fail with [`StreamError::StackClosed`]; returns the final
    /// counters. Close streams first ([`Stream::close`]) to end them
    /// cleanly.
    pub async fn shutdown(&self) -> std::result::Result<ShutdownReport, StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Shutdown(reply))?;
        rx.await.map_err(|_| self.ctl.stopped())
    }
}

/// A listening address of a [`Stack`]. Dropping it stops listening.
#[derive(Debug)]
pub struct Listener {
    local: SocketAddr,
    accepted: mpsc::Receiver<Arc<Shared>>,
    ctl: Arc<Control>,
    options: StackOptions,
}

impl Listener {
    /// The next accepted (ESTABLISHED) connection and its peer address.
    pub async fn accept(&mut self) -> std::result::Result<(Stream, SocketAddr), StreamError> {
        match self.accepted.recv().await {
            Some(shared) => {
                let peer = shared.remote;
                Ok((Stream::new(shared, self.ctl.clone(), self.options), peer))
            }
            None => Err(self.ctl.stopped()),
        }
    }

    /// The listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // The task may be gone already; nothing to undo then.
        let _ = self.ctl.send(Command::Unlisten(self.local));
    }
}

// ---------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------

/// One engine connection: both directions. [`Stream::split`] gives the
/// halves to separate tasks. Dropping the stream closes it gracefully
/// (FIN after everything queued) and discards what arrives afterwards.
#[derive(Debug)]
pub struct Stream {
    tx: StreamSender,
    rx: StreamReceiver,
}

/// The sending half of a [`Stream`]. Dropping it closes the sending
/// direction (FIN after everything queued).
#[derive(Debug)]
pub struct StreamSender {
    shared: Arc<Shared>,
    ctl: Arc<Control>,
    framer: MessageFramer,
    /// Secure mode: seals every message (docs/SECURITY.md).
    sealer: Option<Box<Sealer>>,
}

/// The receiving half of a [`Stream`]. Dropping it discards what arrives
/// afterwards.
#[derive(Debug)]
pub struct StreamReceiver {
    shared: Arc<Shared>,
    ctl: Arc<Control>,
    /// Secure mode: opens every message.
    opener: Option<Box<Opener>>,
    /// Secure mode: application messages that out-of-order delivery
    /// handed up before the handshake's last message, with their bytes
    /// (at most [`EARLY_MAX_BYTES`]).
    early: VecDeque<ReceivedMessage>,
}

/// Secure mode: application messages held while the handshake finishes.
const EARLY_MAX_BYTES: usize = 1 << 20;

impl Stream {
    fn new(shared: Arc<Shared>, ctl: Arc<Control>, options: StackOptions) -> Stream {
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
        self.ctl.waker.wake();
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
            st.stats.messages.messages_sent += 1;
            st.stats.messages.framed_bytes_sent += frame.len() as u64;
        }
        self.push(TxItem::Message {
            frame,
            id,
            lifetime: m.lifetime,
            depends_on: m.depends_on,
            replaceable: !m.ordered,
            substream: m.substream,
            queued: called,
        });
        Ok(id)
    }

    /// Secure mode: queue handshake message `id` (reliable, ordered, not
    /// replaceable, outside the application's ids).
    async fn send_handshake(
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
            queued: tokio::time::Instant::now(),
        });
        Ok(())
    }

    /// Wait until everything queued has entered the engine's send buffer.
    pub fn poll_flush_queue(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<std::result::Result<(), StreamError>> {
        let mut st = self.shared.lock();
        if st.tx.is_empty() {
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
            self.ctl.waker.wake();
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
        poll_fn(|cx| {
            let mut st = self.shared.lock();
            if st.fin_acked {
                return Poll::Ready(Ok(()));
            }
            if let Some(f) = &st.failure {
                return Poll::Ready(Err(f.to_error()));
            }
            if st.closed {
                // Closed before our FIN was acknowledged: aborted locally.
                return Poll::Ready(Err(StreamError::Closed));
            }
            st.tx_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Reset the connection (RST, RFC 9293 §3.10.5 ABORT); queued data is
    /// discarded.
    pub fn abort(&mut self) {
        let mut st = self.shared.lock();
        st.abort_requested = true;
        st.tx.clear();
        st.tx_bytes = 0;
        drop(st);
        self.ctl.waker.wake();
    }

    /// Counters (both directions).
    pub fn stats(&self) -> StreamStats {
        self.shared.lock().stats.clone()
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
        self.ctl.waker.wake();
    }
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
            self.ctl.waker.wake();
        }
        Ok(st)
    }

    /// After the application took data: let the task pull again if it had
    /// stopped for lack of room.
    fn unstall(&self, st: &mut ConnState) {
        if st.rx_stalled {
            st.rx_stalled = false;
            self.ctl.waker.wake();
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
                    self.shared.lock().stats.messages.messages_received += 1;
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
                self.shared.lock().stats.messages.messages_received += 1;
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
        self.shared.lock().stats.clone()
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
        self.ctl.waker.wake();
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

// ---------------------------------------------------------------------
// The task
// ---------------------------------------------------------------------

/// Task-side state of one connection.
#[derive(Debug)]
struct Entry {
    shared: Arc<Shared>,
    deframer: Deframer,
    peer_fin: bool,
    close_sent: bool,
    aborted: bool,
    /// The engine reported `Closed`.
    closed: bool,
}

struct Pending {
    reply: Reply<Arc<Shared>>,
    deadline: Instant,
}

struct Driver {
    cmds: mpsc::UnboundedReceiver<Command>,
    options: StackOptions,
    /// Default connection configuration (MSS clamped to the TUN MTU).
    config: Config,
    mtu: u32,
    /// tokio time of engine time zero.
    epoch: tokio::time::Instant,
    conns: HashMap<ConnHandle, Entry>,
    pending: HashMap<ConnHandle, Pending>,
    listeners: HashMap<SocketAddr, mpsc::Sender<Arc<Shared>>>,
    stats: StackStats,
    /// Every handle is gone: finish once the connections are done.
    detached: bool,
    shutdown: Option<oneshot::Sender<ShutdownReport>>,
    events: Vec<EndpointEvent>,
    scratch: Vec<u8>,
}

/// `config` with the MSS lowered so a full segment fits an `mtu`-byte IP
/// packet (the IPv4 value, MTU − 40; RFC 9293 §3.7.1), as `TunHost` does
/// for its own configuration.
fn clamp_mss(mut config: Config, mtu: u32) -> Config {
    let limit = u16::try_from(mtu.saturating_sub(40)).unwrap_or(u16::MAX);
    config.mss = config.mss.min(limit);
    config
}

async fn run(
    mut host: TunHost,
    cmds: mpsc::UnboundedReceiver<Command>,
    options: StackOptions,
    failure: Arc<Mutex<Option<Arc<str>>>>,
) {
    let mtu = host.tun().mtu();
    let config = host.config_for(std::net::Ipv4Addr::UNSPECIFIED.into());
    let mut driver = Driver {
        cmds,
        options,
        config,
        mtu,
        epoch: host.to_tokio_time(Instant::ZERO),
        conns: HashMap::new(),
        pending: HashMap::new(),
        listeners: HashMap::new(),
        stats: StackStats::default(),
        detached: false,
        shutdown: None,
        events: Vec::new(),
        scratch: vec![0; 64 << 10],
    };
    let result = host.drive(|step| driver.step(step)).await;
    let why = match result {
        Ok(()) => Failure::StackClosed,
        Err(e) => {
            let msg: Arc<str> = e.to_string().into();
            *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg.clone());
            Failure::StackFailed(msg)
        }
    };
    for (_, e) in driver.conns.drain() {
        let mut st = e.shared.lock();
        if st.failure.is_none() && !st.closed {
            st.failure = Some(why.clone());
        }
        st.closed = true;
        st.wake_all();
    }
    // Pending connects and listeners see their channels close.
    driver.pending.clear();
    driver.listeners.clear();
    if let Some(reply) = driver.shutdown.take() {
        let _ = reply.send(ShutdownReport {
            host: host.stats(),
            endpoint: host.endpoint().stats(),
            stack: driver.stats,
        });
    }
}

impl Driver {
    fn step(&mut self, step: &mut Step<'_>) -> ControlFlow<()> {
        let now = step.now();
        self.events.clear();
        self.events.extend_from_slice(step.events());
        let ep = step.endpoint();
        loop {
            match self.cmds.try_recv() {
                Ok(c) => self.command(c, ep, now),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.detached = true;
                    break;
                }
            }
        }
        let events = std::mem::take(&mut self.events);
        for &e in &events {
            self.event(e, ep);
        }
        self.events = events;
        self.expire_connects(ep, now);
        let handles: Vec<ConnHandle> = self.conns.keys().copied().collect();
        let mut wake_at: Option<Instant> = None;
        for h in handles {
            if let Some(t) = self.service(h, ep, now) {
                wake_at = Some(wake_at.map_or(t, |w| w.min(t)));
            }
        }
        if let Some(t) = self.pending.values().map(|p| p.deadline).min() {
            wake_at = Some(wake_at.map_or(t, |w| w.min(t)));
        }
        if let Some(t) = wake_at {
            step.wake_after(t.saturating_duration_since(now));
        }
        if let Some(reply) = self.shutdown.take() {
            let ep = step.endpoint();
            for &h in self.conns.keys() {
                if let Some(c) = ep.connection_mut(h) {
                    c.abort();
                }
            }
            self.shutdown = Some(reply);
            return ControlFlow::Break(());
        }
        if self.detached && self.pending.is_empty() && self.conns.values().all(Entry::finished) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn connection_config(&self, config: Option<Config>) -> Config {
        match config {
            Some(c) => clamp_mss(c, self.mtu),
            None => self.config.clone(),
        }
    }

    fn new_shared(&self, conn: &Connection) -> Arc<Shared> {
        Arc::new(Shared {
            local: conn.local(),
            remote: conn.remote(),
            ooo: conn.config().hollywood.out_of_order_delivery,
            send_queue: self.options.send_queue,
            recv_queue: self.options.recv_queue,
            send_buffer: conn.config().send_buffer,
            connect_timeout: self.options.connect_timeout,
            state: Mutex::new(ConnState::new()),
        })
    }

    fn insert(&mut self, h: ConnHandle, shared: Arc<Shared>) {
        self.conns.insert(
            h,
            Entry {
                shared,
                deframer: Deframer::new(self.options.deframer),
                peer_fin: false,
                close_sent: false,
                aborted: false,
                closed: false,
            },
        );
    }

    fn command(&mut self, c: Command, ep: &mut Endpoint, now: Instant) {
        match c {
            Command::Listen {
                local,
                config,
                reply,
            } => {
                let config = self.connection_config(config);
                let r = ep.listen_with(local, config).map(|()| {
                    let (tx, rx) = mpsc::channel(self.options.backlog.max(1));
                    self.listeners.insert(local, tx);
                    rx
                });
                let _ = reply.send(r.map_err(StreamError::Engine));
            }
            Command::Unlisten(local) => {
                if self.listeners.remove(&local).is_some() {
                    // Fails only if not listening, which cannot be here.
                    let _ = ep.unlisten(local);
                }
            }
            Command::Connect {
                local,
                remote,
                config,
                reply,
            } => {
                let config = self.connection_config(config);
                match ep.connect_with(now, local, remote, config) {
                    Ok(h) => {
                        let Some(conn) = ep.connection(h) else {
                            let _ = reply.send(Err(StreamError::Closed));
                            return;
                        };
                        let shared = self.new_shared(conn);
                        self.insert(h, shared);
                        self.pending.insert(
                            h,
                            Pending {
                                reply,
                                deadline: now + self.options.connect_timeout,
                            },
                        );
                    }
                    Err(e) => {
                        self.stats.connect_failed += 1;
                        let _ = reply.send(Err(StreamError::Engine(e)));
                    }
                }
            }
            Command::Stats(reply) => {
                let _ = reply.send((ep.stats(), self.stats));
            }
            Command::Shutdown(reply) => self.shutdown = Some(reply),
        }
    }

    /// A connect attempt ended before ESTABLISHED.
    fn connect_failed(&mut self, h: ConnHandle, ep: &mut Endpoint, err: StreamError) {
        if let Some(p) = self.pending.remove(&h) {
            self.stats.connect_failed += 1;
            let _ = p.reply.send(Err(err));
        }
        if let Some(c) = ep.connection_mut(h) {
            c.abort();
        }
        if let Some(e) = self.conns.remove(&h) {
            e.shared.lock().closed = true;
        }
    }

    fn expire_connects(&mut self, ep: &mut Endpoint, now: Instant) {
        let expired: Vec<ConnHandle> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now || p.reply.is_closed())
            .map(|(&h, _)| h)
            .collect();
        for h in expired {
            let err = StreamError::ConnectTimeout(self.options.connect_timeout);
            self.connect_failed(h, ep, err);
        }
    }

    fn event(&mut self, e: EndpointEvent, ep: &mut Endpoint) {
        match e {
            EndpointEvent::Accepted { handle, .. } => {
                let Some(conn) = ep.connection(handle) else {
                    return;
                };
                let local = conn.local();
                let shared = self.new_shared(conn);
                let listener = self.listeners.get(&local).or_else(|| {
                    let any = SocketAddr::new(
                        match local {
                            SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
                            SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
                        },
                        local.port(),
                    );
                    self.listeners.get(&any)
                });
                match listener.map(|l| l.try_send(shared.clone())) {
                    Some(Ok(())) => {
                        self.stats.accepted += 1;
                        self.insert(handle, shared);
                    }
                    _ => {
                        self.stats.accept_overflow += 1;
                        if let Some(c) = ep.connection_mut(handle) {
                            c.abort();
                        }
                    }
                }
            }
            EndpointEvent::Conn { handle, event } => {
                if self.pending.contains_key(&handle) {
                    match event {
                        Event::Connected => {
                            let p = self.pending.remove(&handle).expect("checked above");
                            let shared = self.conns.get(&handle).map(|e| e.shared.clone());
                            let sent = shared.is_some_and(|s| p.reply.send(Ok(s)).is_ok());
                            if sent {
                                self.stats.connected += 1;
                            } else {
                                // The connect future was dropped: abort.
                                self.connect_failed(handle, ep, StreamError::Closed);
                            }
                        }
                        Event::Reset => {
                            self.connect_failed(handle, ep, StreamError::ConnectionRefused)
                        }
                        Event::TimedOut => self.connect_failed(handle, ep, StreamError::TimedOut),
                        Event::Closed => self.connect_failed(handle, ep, StreamError::Closed),
                        _ => {}
                    }
                    return;
                }
                let Some(entry) = self.conns.get_mut(&handle) else {
                    return;
                };
                match event {
                    Event::PeerClosed => entry.peer_fin = true,
                    Event::Reset => entry.fail(Failure::Reset),
                    Event::TimedOut => entry.fail(Failure::TimedOut),
                    Event::Closed => entry.closed = true,
                    Event::Expired(x) => {
                        let mut st = entry.shared.lock();
                        let ConnState { expired, stats, .. } = &mut *st;
                        expired.push(x, &mut stats.messages);
                    }
                    // Visible in `StreamStats::hollywood.rewriting_stopped`.
                    Event::RewritingStopped | Event::MessageSent { .. } => {}
                    Event::Connected | Event::Readable | Event::Writable => {}
                }
            }
        }
    }

    /// Move data between connection `h` and its stream; returns when the
    /// deframer wants a timer.
    fn service(&mut self, h: ConnHandle, ep: &mut Endpoint, now: Instant) -> Option<Instant> {
        let epoch = self.epoch;
        let scratch = &mut self.scratch;
        let entry = self.conns.get_mut(&h)?;
        let Some(conn) = ep.connection_mut(h) else {
            // Gone from the engine (e.g. closed and removed).
            let mut st = entry.shared.lock();
            st.closed = true;
            if st.failure.is_none() && !entry.aborted {
                if entry.peer_fin {
                    st.eof = true;
                }
                // LAST-ACK → CLOSED: the peer acknowledged our FIN.
                if entry.close_sent {
                    st.fin_acked = true;
                }
            }
            st.wake_all();
            drop(st);
            self.conns.remove(&h);
            return None;
        };
        // Only the task holds the state (never handed out, or the handles
        // and the listener queue holding it are gone): nobody will use the
        // stream, so close it like a dropped one. A pending connect's state
        // is held only by the task until it is ESTABLISHED.
        let orphan = Arc::strong_count(&entry.shared) == 1 && !self.pending.contains_key(&h);
        let shared = entry.shared.clone();
        let mut guard = shared.lock();
        let st = &mut *guard;
        if orphan && (st.sender_alive || st.receiver_alive) {
            st.sender_alive = false;
            st.receiver_alive = false;
        }
        let mut wake_tx = false;
        let mut wake_rx = false;
        if st.abort_requested && !entry.aborted {
            conn.abort();
            entry.aborted = true;
            st.tx.clear();
            st.tx_bytes = 0;
        }
        // The application let go of the stream while data it never read
        // was waiting (or arrives afterwards): RST, as Linux's tcp_close
        // does, to tell the peer that data was lost (RFC 1122 §4.2.2.13);
        // a FIN would claim an orderly end.
        if !st.sender_alive
            && !st.receiver_alive
            && !entry.aborted
            && conn.state() != State::Closed
            && (st.unread_dropped || conn.recv_ready() > 0 || conn.segments_ready() > 0)
        {
            conn.abort();
            entry.aborted = true;
            st.tx.clear();
            st.tx_bytes = 0;
            self.stats.reset_unread += 1;
        }
        // Send side: queue → engine.
        while let Some(item) = st.tx.front_mut() {
            let before = item.remaining();
            let result = match item {
                TxItem::Bytes { buf, off } => match conn.send(&buf[*off..]) {
                    Ok(n) => {
                        *off += n;
                        Ok(n)
                    }
                    Err(hollywood_tcp::Error::WouldBlock) => Ok(0),
                    Err(e) => Err(e),
                },
                TxItem::Message {
                    frame,
                    id,
                    lifetime,
                    depends_on,
                    replaceable,
                    substream,
                    queued,
                } => {
                    // The lifetime runs from `send_message`; time spent in
                    // this queue is used up (thesis §7.2: "the time that
                    // the message has spent in the sending buffer").
                    let waited = (epoch + now.since_epoch()).saturating_duration_since(*queued);
                    let meta = MessageMeta {
                        id: *id,
                        lifetime: lifetime.map(|l| l.saturating_sub(waited)),
                        depends_on: *depends_on,
                        replaceable: *replaceable,
                        substream: *substream,
                    };
                    match conn.send_message(now, frame, meta) {
                        Ok(()) => Ok(frame.len()),
                        Err(SendMessageError::WouldBlock) => Ok(0),
                        Err(SendMessageError::State(e)) => Err(e),
                        // Checked by `MessageFramer` before the id was
                        // assigned; the engine's rules are the same.
                        Err(SendMessageError::Meta(_)) => Err(hollywood_tcp::Error::InvalidState),
                        // The framer's limit is below any send buffer the
                        // stack configures; a smaller one cannot take it.
                        Err(SendMessageError::TooLarge { .. }) => {
                            Err(hollywood_tcp::Error::InvalidState)
                        }
                    }
                }
            };
            match result {
                Ok(0) => break,
                Ok(n) => {
                    st.tx_bytes -= n;
                    wake_tx = true;
                    if n == before {
                        st.tx.pop_front();
                    } else {
                        break;
                    }
                }
                Err(e) => {
                    let f = match e {
                        hollywood_tcp::Error::Reset => Failure::Reset,
                        hollywood_tcp::Error::TimedOut => Failure::TimedOut,
                        _ => {
                            Failure::StackFailed(format!("engine refused queued data: {e}").into())
                        }
                    };
                    if st.failure.is_none() && !entry.aborted && !entry.close_sent {
                        st.failure = Some(f);
                    }
                    st.tx.clear();
                    st.tx_bytes = 0;
                    wake_tx = true;
                    break;
                }
            }
        }
        // Receive side: engine → queues.
        let mode = if st.receiver_alive {
            st.rx_mode
        } else {
            Mode::Unset
        };
        let limit = if entry.peer_fin {
            usize::MAX
        } else {
            shared.recv_queue
        };
        let now_ns = now.as_nanos();
        match mode {
            Mode::Unset if !st.receiver_alive => {
                // Nobody reads any more: discard.
                if shared.ooo {
                    while conn.recv_segment().is_some() {}
                } else {
                    while matches!(conn.recv(scratch), Ok(n) if n > 0) {}
                }
            }
            Mode::Unset => {}
            Mode::Bytes => loop {
                let room = limit.saturating_sub(st.rx_bytes.len()).min(scratch.len());
                if room == 0 {
                    st.rx_stalled = true;
                    break;
                }
                match conn.recv(&mut scratch[..room]) {
                    Ok(0) => {
                        st.eof = true;
                        wake_rx = true;
                        break;
                    }
                    Ok(n) => {
                        st.rx_bytes.extend(&scratch[..n]);
                        wake_rx = true;
                    }
                    Err(_) => break,
                }
            },
            Mode::Messages => {
                let d = &mut entry.deframer;
                if shared.ooo {
                    // Thesis §4.3: every segment as it arrives, with its
                    // sequence number; the deframer finds whole frames in
                    // it at once and reassembles the rest.
                    loop {
                        if st.rx_msg_bytes >= limit {
                            st.rx_stalled = true;
                            break;
                        }
                        let Some(s) = conn.recv_segment() else { break };
                        d.push_segment(s.seq.0, &s.payload, s.arrival.as_nanos());
                        wake_rx |= pull_messages(d, st, epoch);
                    }
                    // Only once every segment that arrived has been
                    // pushed: while the queue is full, segments below
                    // RCV.NXT still wait in the engine, and bytes below
                    // the floor would be ignored when they come.
                    if conn.segments_ready() == 0 {
                        d.advance_floor(conn.rcv_nxt().0);
                    }
                    if entry.peer_fin && conn.segments_ready() == 0 && !st.eof {
                        st.eof = true;
                        wake_rx = true;
                    }
                } else {
                    loop {
                        if st.rx_msg_bytes >= limit {
                            st.rx_stalled = true;
                            break;
                        }
                        match conn.recv(scratch) {
                            Ok(0) => {
                                st.eof = true;
                                wake_rx = true;
                                break;
                            }
                            Ok(n) => {
                                d.push_stream(&scratch[..n], now_ns);
                                wake_rx |= pull_messages(d, st, epoch);
                            }
                            Err(_) => break,
                        }
                    }
                }
                d.handle_timeout(now_ns);
                wake_rx |= pull_messages(d, st, epoch);
                st.stats.messages.deframer = d.stats();
            }
        }
        // Close: FIN after the queue drained, whether or not the peer's data
        // was read (a half-close: the peer may not wait for us to read).
        // Data the receiver has not started reading stays in the engine,
        // which keeps a closed connection while it holds unread data, and
        // this stream with it (`rx_pending`), until it is read.
        let want_close = st.close_requested || !st.sender_alive;
        if want_close && st.tx.is_empty() && !entry.close_sent && !entry.aborted {
            conn.close();
            entry.close_sent = true;
            st.fin_sent = true;
        }
        let state = conn.state();
        if entry.close_sent
            && !st.fin_acked
            && (matches!(state, State::FinWait2 | State::TimeWait)
                || (state == State::Closed && st.failure.is_none()))
        {
            st.fin_acked = true;
            wake_tx = true;
        }
        st.stats.connection = conn.stats().clone();
        st.stats.hollywood = *conn.hollywood_stats();
        st.stats.ooo = *conn.ooo_stats();
        st.stats.srtt = conn.srtt().or(st.stats.srtt);
        st.stats.rto = Some(conn.rto());
        st.stats.state = Some(state);
        st.rx_pending = st.receiver_alive
            && st.failure.is_none()
            && (conn.recv_ready() > 0 || conn.segments_ready() > 0);
        if entry.closed || state == State::Closed {
            st.closed = true;
            if entry.peer_fin && st.failure.is_none() && !st.rx_pending {
                st.eof = true;
            }
            wake_tx = true;
            wake_rx = true;
        }
        if st.eof && mode == Mode::Messages {
            // End of stream: ordered messages still waiting for a
            // predecessor that can no longer arrive are released, not lost.
            entry.deframer.finish();
            wake_rx |= pull_messages(&mut entry.deframer, st, epoch);
        }
        if wake_tx {
            if let Some(w) = st.tx_waker.take() {
                w.wake();
            }
        }
        if wake_rx {
            if let Some(w) = st.rx_waker.take() {
                w.wake();
            }
        }
        let timer = entry.deframer.poll_timeout().map(Instant::from_nanos);
        let remove = entry.closed && !st.rx_pending;
        drop(guard);
        if remove {
            self.conns.remove(&h);
        }
        timer
    }
}

/// Bytes charged per received message waiting for the application, on
/// top of its payload (queue entry and vector header), so that empty or
/// tiny messages cannot grow the queue without bound under the same byte
/// limit (review B3).
const RX_MESSAGE_OVERHEAD: usize = 64;

/// Move deframed messages into the stream's queue; whether any moved.
fn pull_messages(d: &mut Deframer, st: &mut ConnState, epoch: tokio::time::Instant) -> bool {
    let mut any = false;
    while let Some(m) = d.poll_message() {
        st.rx_msg_bytes += m.payload.len() + RX_MESSAGE_OVERHEAD;
        st.rx_msgs.push_back(ReceivedMessage {
            id: m.id,
            substream: m.substream,
            substream_seq: m.substream_seq,
            payload: m.payload,
            ordered: m.ordered,
            arrival: epoch + Duration::from_nanos(m.arrival_ns),
        });
        any = true;
    }
    any
}

impl Entry {
    fn fail(&mut self, f: Failure) {
        let mut st = self.shared.lock();
        if st.failure.is_none() {
            st.failure = Some(f);
        }
        st.wake_all();
    }

    /// Nothing more to do for a detached stack: our FIN was acknowledged,
    /// or the connection is gone or aborted.
    fn finished(&self) -> bool {
        let st = self.shared.lock();
        self.closed || self.aborted || st.fin_acked || st.failure.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mss_clamp_matches_host() {
        let c = Config::default();
        assert_eq!(clamp_mss(c.clone(), 1500).mss, 1460);
        assert_eq!(clamp_mss(c.clone(), 1280).mss, 1240);
        assert_eq!(clamp_mss(c, 65_535).mss, 1460, "never raised");
    }

    #[test]
    fn modes_lock_on_first_use() {
        let mut m = Mode::Unset;
        assert!(ConnState::set_mode(&mut m, Mode::Bytes, "x").unwrap());
        assert!(!ConnState::set_mode(&mut m, Mode::Bytes, "x").unwrap());
        assert!(matches!(
            ConnState::set_mode(&mut m, Mode::Messages, "mixed"),
            Err(StreamError::WrongMode("mixed"))
        ));
    }

    #[test]
    fn empty_messages_count_against_the_receive_limit() {
        // Review B3: a peer sending empty messages must fill the queue's
        // byte budget like any other, or the stack drains the engine into
        // an unbounded queue while the application does not read.
        let mut f = MessageFramer::default();
        let mut wire = Vec::new();
        for _ in 0..1000 {
            f.frame(&SendMessage::new(Vec::new()), None, &mut wire)
                .unwrap();
        }
        let mut d = Deframer::default();
        d.push_stream(&wire, 0);
        let mut st = ConnState::new();
        assert!(pull_messages(&mut d, &mut st, tokio::time::Instant::now()));
        assert_eq!(st.rx_msgs.len(), 1000);
        assert_eq!(st.rx_msg_bytes, 1000 * RX_MESSAGE_OVERHEAD);
    }

    #[test]
    fn deframed_messages_keep_arrival_times() {
        let mut f = MessageFramer::default();
        let mut wire = Vec::new();
        for i in 0..3u8 {
            f.frame(
                &SendMessage::new(vec![i + 1; 10]).substream(u16::from(i)),
                None,
                &mut wire,
            )
            .unwrap();
        }
        let mut d = Deframer::default();
        d.push_stream(&wire, 5_000_000);
        let mut st = ConnState::new();
        let epoch = tokio::time::Instant::now();
        assert!(pull_messages(&mut d, &mut st, epoch));
        assert!(!pull_messages(&mut d, &mut st, epoch));
        assert_eq!(st.rx_msgs.len(), 3);
        assert_eq!(st.rx_msg_bytes, 30 + 3 * RX_MESSAGE_OVERHEAD);
        let m = &st.rx_msgs[2];
        assert_eq!((m.id, m.substream, m.payload[0]), (2, 2, 3));
        assert_eq!(m.arrival - epoch, Duration::from_millis(5));
    }
}
