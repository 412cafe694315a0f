//! QUIC under tokio: the sans-IO [`QuicTransport`] (quinn-proto, our
//! stream mappings and QUICsilver) driven by a task per connection, with
//! the OS clock and a tokio UDP socket. The simulator and
//! `hollywood_io::udp` drive the same object; only time and packets
//! come from here.
//!
//! A client owns a connected socket. A server owns one socket for all its
//! connections and hands each datagram to the connection of its source
//! address (no connection migration: the transport disables it), creating
//! one for a new address only when the datagram looks like a QUIC Initial
//! (a long header in a datagram of at least 1200 bytes, RFC 9000 §14.1).

use crate::backend::{Abandoned, RecvHalf, SendHalf, SendOut};
use hollywood_io::message::{ReceivedMessage, StreamError};
use hollywood_tcp::Instant;
use hollywood_transport::clock::Clock;
use hollywood_transport::quic::{Mapping, QuicConfig, QuicIdentity, QuicTransport};
use hollywood_transport::{MessageTransport, OutMessage, Role, SendError, TransportEvent};
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

/// Datagrams waiting between the socket reader and a connection's task;
/// beyond it they are dropped (as by a full socket buffer).
const INBOUND_QUEUE: usize = 1024;
/// Received messages a connection's task hands ahead of the application.
const RX_CHANNEL: usize = 64;
/// Connections one server socket serves at most; datagrams opening more
/// are dropped.
pub const MAX_SERVER_CONNECTIONS: usize = 1024;
/// A server connection that has not completed its handshake after this
/// long is dropped (so datagrams from spoofed addresses cost little).
const SERVER_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The sub-stream of the end marker (reserved: applications cannot send
/// on it; TCP's secure mode uses it for its handshake).
pub const END_SUBSTREAM: u16 = 0xFFFF;
/// After the connection close began, how long the task waits for the peer to
/// acknowledge everything.
const CLOSE_LINGER: Duration = Duration::from_secs(10);

enum Wake {
    Datagram(Option<(Vec<u8>, SocketAddr)>),
    Cmd(Option<Cmd>),
    Timer,
    Nothing,
}

enum Cmd {
    Send(OutMessage, oneshot::Sender<Result<(), StreamError>>),
    Close,
}

/// The task of one QUIC connection.
struct Driver {
    t: QuicTransport,
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    /// Transport time ↔ the OS clock (the transport's epoch).
    clock: Clock,
    inbound: mpsc::Receiver<(Vec<u8>, SocketAddr)>,
    cmds: mpsc::Receiver<Cmd>,
    rx: mpsc::Sender<Result<Option<ReceivedMessage>, StreamError>>,
    abandoned: Arc<Mutex<VecDeque<Abandoned>>>,
    ready: Option<oneshot::Sender<Result<(), String>>>,
    /// A message the transport refused with `WouldBlock`, retried on
    /// `Writable`.
    parked: Option<(OutMessage, oneshot::Sender<Result<(), StreamError>>)>,
    /// Received messages not yet in `rx`.
    held: VecDeque<Result<Option<ReceivedMessage>, StreamError>>,
    closing_since: Option<std::time::Instant>,
    done: bool,
    /// One ordered stream (`quic-ss`): the end marker follows every
    /// message in order.
    ordered: bool,
    /// Messages accepted and not yet acknowledged or given up.
    outstanding: HashSet<u32>,
    /// The id the next accepted message gets.
    next_wire: u32,
    /// The application closed its sending direction.
    app_closed: bool,
    /// Our end marker is queued.
    fin_sent: bool,
    /// The peer's end marker arrived.
    peer_fin: bool,
    /// The application dropped its sending half.
    cmds_gone: bool,
}

impl Driver {
    fn now(&self) -> Instant {
        self.clock.from_std(std::time::Instant::now())
    }

    async fn flush(&mut self) {
        let now = self.now();
        while let Some(p) = self.t.poll_transmit(now) {
            if let Ok(d) = hollywood_wire::parse_udp_ip(&p) {
                // tokio learns a new socket is writable only from the
                // reactor, so the first `try_send_to` can refuse: wait for
                // writability once. A full socket buffer after that is a
                // loss to QUIC, which recovers.
                if let Err(e) = self.socket.try_send_to(d.payload, d.dst) {
                    if e.kind() == std::io::ErrorKind::WouldBlock {
                        let wait = self.socket.writable();
                        if tokio::time::timeout(Duration::from_millis(5), wait)
                            .await
                            .is_ok()
                        {
                            let _ = self.socket.try_send_to(d.payload, d.dst);
                        }
                    }
                }
            }
        }
    }

    fn events(&mut self) {
        // Stop taking events while the application is behind: the
        // transport then stops reading its streams and quinn's flow
        // control closes (hollywood_transport::RX_QUEUE_LIMIT).
        while self.held.len() < RX_CHANNEL {
            let Some(ev) = self.t.poll_event() else { break };
            match ev {
                TransportEvent::Connected => {
                    if let Some(r) = self.ready.take() {
                        let _ = r.send(Ok(()));
                    }
                }
                TransportEvent::Message(m) if m.substream == END_SUBSTREAM => {
                    // The peer closed its sending direction.
                    if !self.peer_fin {
                        self.peer_fin = true;
                        self.held.push_back(Ok(None));
                    }
                }
                TransportEvent::Message(m) => {
                    let arrival = tokio::time::Instant::from_std(self.clock.to_std(m.received));
                    self.held.push_back(Ok(Some(ReceivedMessage {
                        id: m.id,
                        substream: m.substream,
                        substream_seq: None,
                        payload: m.payload,
                        ordered: false,
                        arrival,
                    })));
                }
                TransportEvent::Expired { id, reason, .. } => {
                    self.outstanding.remove(&id);
                    let mut a = self.abandoned.lock().unwrap_or_else(|e| e.into_inner());
                    if a.len() >= crate::backend::ABANDONED_LIMIT {
                        a.pop_front();
                    }
                    a.push_back(Abandoned {
                        wire_id: id,
                        reason: format!("{reason:?}"),
                    });
                }
                TransportEvent::Writable => self.retry_parked(),
                TransportEvent::PeerClosed => self.held.push_back(Ok(None)),
                TransportEvent::Closed => {
                    self.held.push_back(Ok(None));
                    self.done = true;
                }
                TransportEvent::Failed(e) => {
                    if let Some(r) = self.ready.take() {
                        let _ = r.send(Err(e.clone()));
                    }
                    self.held.push_back(Err(StreamError::StackFailed(e)));
                    self.done = true;
                }
                TransportEvent::Acked { id } => {
                    self.outstanding.remove(&id);
                }
            }
        }
    }

    fn try_send(&mut self, m: OutMessage, reply: oneshot::Sender<Result<(), StreamError>>) {
        let now = self.now();
        match self.t.send_ref(now, &m) {
            Ok(()) => {
                if m.substream != END_SUBSTREAM {
                    self.outstanding.insert(m.id);
                }
                self.next_wire = m.id.wrapping_add(1);
                let _ = reply.send(Ok(()));
            }
            Err(SendError::WouldBlock) => self.parked = Some((m, reply)),
            Err(SendError::NotConnected) => {
                let _ = reply.send(Err(StreamError::Closed));
            }
            Err(e) => {
                let _ = reply.send(Err(StreamError::StackFailed(e.to_string())));
            }
        }
    }

    fn retry_parked(&mut self) {
        if let Some((m, reply)) = self.parked.take() {
            self.try_send(m, reply);
        }
    }

    /// Half-close, as TCP's FIN: QUIC closes both directions at once, so
    /// each end marks the end of its messages with a message on
    /// [`END_SUBSTREAM`], sent once every earlier message is acknowledged
    /// or given up (on one ordered stream: at once, it follows them), and
    /// the connection closes when both ends have marked theirs.
    fn progress_close(&mut self) {
        if self.app_closed
            && !self.fin_sent
            && self.parked.is_none()
            && !self.done
            && (self.ordered || self.outstanding.is_empty())
        {
            let mut m = OutMessage::new(self.next_wire, b"END".to_vec());
            m.substream = END_SUBSTREAM;
            let now = self.now();
            match self.t.send_ref(now, &m) {
                Ok(()) => {
                    self.next_wire = self.next_wire.wrapping_add(1);
                    self.fin_sent = true;
                }
                Err(SendError::WouldBlock) => {}
                Err(_) => self.fin_sent = true,
            }
        }
        // Both directions done, or nobody left to read what the peer sends.
        if self.fin_sent && (self.peer_fin || (self.cmds_gone && self.rx.is_closed())) {
            self.close();
        }
    }

    fn close(&mut self) {
        if self.closing_since.is_none() {
            self.closing_since = Some(std::time::Instant::now());
            let now = self.now();
            self.t.close(now);
        }
    }

    async fn run(mut self) {
        let now = self.now();
        self.t.start(now);
        loop {
            self.flush().await;
            self.events();
            self.progress_close();
            self.flush().await;
            while let Some(item) = self.held.pop_front() {
                match self.rx.try_send(item) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(item)) => {
                        self.held.push_front(item);
                        break;
                    }
                    // Nobody reads any more.
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
            let lingered = self
                .closing_since
                .is_some_and(|t| t.elapsed() > CLOSE_LINGER);
            if (self.done && self.held.is_empty()) || lingered {
                return;
            }
            if self.done && self.rx.is_closed() {
                return;
            }
            let deadline = self
                .t
                .poll_timeout()
                .map(|t| tokio::time::Instant::from_std(self.clock.to_std(t)));
            let room = !self.held.is_empty();
            let wake = tokio::select! {
                d = self.inbound.recv() => Wake::Datagram(d),
                c = self.cmds.recv(), if self.parked.is_none() && !self.cmds_gone => Wake::Cmd(c),
                p = self.rx.reserve(), if room => match p {
                    Ok(p) => {
                        if let Some(item) = self.held.pop_front() {
                            p.send(item);
                        }
                        Wake::Nothing
                    }
                    Err(_) => Wake::Nothing,
                },
                () = sleep_until(deadline) => Wake::Timer,
                () = tokio::time::sleep(Duration::from_millis(200)), if self.closing_since.is_some() => Wake::Nothing,
            };
            match wake {
                Wake::Datagram(None) => return,
                Wake::Datagram(Some((payload, from))) => {
                    let now = self.now();
                    let p = hollywood_wire::build_udp_ip(from, self.local, &payload);
                    self.t.handle_packet(now, &p);
                    // Take what else is waiting before the next flush.
                    while let Ok((payload, from)) = self.inbound.try_recv() {
                        let p = hollywood_wire::build_udp_ip(from, self.local, &payload);
                        self.t.handle_packet(now, &p);
                    }
                }
                Wake::Cmd(Some(Cmd::Send(m, reply))) => self.try_send(m, reply),
                Wake::Cmd(Some(Cmd::Close)) => self.app_closed = true,
                Wake::Cmd(None) => {
                    self.app_closed = true;
                    self.cmds_gone = true;
                }
                Wake::Timer => {
                    let now = self.now();
                    self.t.handle_timeout(now);
                }
                Wake::Nothing => {}
            }
        }
    }
}

async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// The application's side of a QUIC connection.
pub(crate) struct QuicConn {
    cmds: mpsc::Sender<Cmd>,
    rx: mpsc::Receiver<Result<Option<ReceivedMessage>, StreamError>>,
    abandoned: Arc<Mutex<VecDeque<Abandoned>>>,
    pub(crate) peer: SocketAddr,
}

#[allow(clippy::too_many_arguments)]
fn spawn_driver(
    t: QuicTransport,
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    peer: SocketAddr,
    inbound: mpsc::Receiver<(Vec<u8>, SocketAddr)>,
) -> (QuicConn, oneshot::Receiver<Result<(), String>>) {
    let ordered = t.config().mapping == Mapping::SingleStream;
    let (cmd_tx, cmd_rx) = mpsc::channel(1);
    let (rx_tx, rx_rx) = mpsc::channel(RX_CHANNEL);
    let (ready_tx, ready_rx) = oneshot::channel();
    let abandoned = Arc::new(Mutex::new(VecDeque::new()));
    let d = Driver {
        t,
        socket,
        local,
        clock: Clock::new(),
        inbound,
        cmds: cmd_rx,
        rx: rx_tx,
        abandoned: abandoned.clone(),
        ready: Some(ready_tx),
        parked: None,
        held: VecDeque::new(),
        closing_since: None,
        done: false,
        ordered,
        outstanding: HashSet::new(),
        next_wire: 0,
        app_closed: false,
        fin_sent: false,
        peer_fin: false,
        cmds_gone: false,
    };
    tokio::spawn(d.run());
    (
        QuicConn {
            cmds: cmd_tx,
            rx: rx_rx,
            abandoned,
            peer,
        },
        ready_rx,
    )
}

/// The QUIC configuration for the connection's properties: one ordered
/// stream when order is required, else QUICsilver (a stream per message,
/// given up at its deadline).
/// BBR (quinn's BBRv1): on a lossy path CUBIC halves its window below a
/// live stream's rate at every loss, and messages miss their deadlines
/// while it recovers (docs/TAPS.md, "Measured"); Linux defaults to BBR in
/// the deployments we compare against.
pub(crate) fn config(ordered: bool) -> QuicConfig {
    let mut c = if ordered {
        QuicConfig::of(hollywood_transport::QuicKind::SingleStream)
    } else {
        QuicConfig::of(hollywood_transport::QuicKind::Quicsilver)
    };
    c.cc = hollywood_transport::quic::QuicCc::Bbr;
    c
}

fn seed() -> u64 {
    // Per-connection variety for quinn's RNG (connection ids, padding);
    // TLS keys come from rustls's own OS entropy.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x686f6c6c);
    h.finish()
}

/// Connect to `remote`; completes after the QUIC handshake.
pub(crate) async fn connect(
    ns: Option<&str>,
    remote: SocketAddr,
    local: Option<SocketAddr>,
    identity: &QuicIdentity,
    cfg: QuicConfig,
) -> Result<QuicConn, String> {
    let bind = local.unwrap_or_else(|| {
        if remote.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        }
    });
    let socket = crate::sockets::udp(ns, bind, Some(remote))?;
    // The connected socket's address is specific (the route's source).
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    let t = QuicTransport::new(cfg, Role::Client { remote }, local, identity, seed())?;
    let socket = Arc::new(socket);
    let (in_tx, in_rx) = mpsc::channel(INBOUND_QUEUE);
    let reader = socket.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        loop {
            match reader.recv(&mut buf).await {
                Ok(n) => match in_tx.try_send((buf[..n].to_vec(), remote)) {
                    Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
                    Err(mpsc::error::TrySendError::Closed(_)) => return,
                },
                // ICMP port unreachable before the server listens: QUIC's
                // timers cope (a blocked path stays silent anyway).
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    if in_tx.is_closed() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    let (conn, ready) = spawn_driver(t, socket, local, remote, in_rx);
    match ready.await {
        Ok(Ok(())) => Ok(conn),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the QUIC connection ended before its handshake".into()),
    }
}

/// A QUIC server socket: [`QuicListener::accept`] yields each connection
/// after its handshake.
pub(crate) struct QuicListener {
    accepted: mpsc::Receiver<QuicConn>,
    pub(crate) local: SocketAddr,
}

impl QuicListener {
    /// Listen on `local`, which must be a specific address (the transport
    /// puts it in the packets it sees; a wildcard socket cannot say which
    /// of its addresses a datagram reached).
    pub(crate) async fn bind(
        ns: Option<&str>,
        local: SocketAddr,
        identity: QuicIdentity,
        cfg: QuicConfig,
    ) -> Result<QuicListener, String> {
        if local.ip().is_unspecified() {
            return Err(format!(
                "QUIC listener on {local}: needs a specific address, not the wildcard"
            ));
        }
        let socket = Arc::new(crate::sockets::udp(ns, local, None)?);
        let local = socket.local_addr().map_err(|e| e.to_string())?;
        let (acc_tx, acc_rx) = mpsc::channel(128);
        tokio::spawn(serve(socket, local, identity, cfg, acc_tx));
        Ok(QuicListener {
            accepted: acc_rx,
            local,
        })
    }

    pub(crate) async fn accept(&mut self) -> Option<QuicConn> {
        self.accepted.recv().await
    }
}

fn looks_like_initial(d: &[u8]) -> bool {
    d.len() >= 1200 && d[0] & 0xC0 == 0xC0
}

async fn serve(
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    identity: QuicIdentity,
    cfg: QuicConfig,
    accepted: mpsc::Sender<QuicConn>,
) {
    let mut conns: HashMap<SocketAddr, mpsc::Sender<(Vec<u8>, SocketAddr)>> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(_) => return,
            },
            () = accepted.closed() => return,
        };
        let mut d = buf[..n].to_vec();
        if let Some(tx) = conns.get(&from) {
            match tx.try_send((d, from)) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => continue,
                Err(mpsc::error::TrySendError::Closed((back, _))) => {
                    // That connection ended; this may open a new one.
                    conns.remove(&from);
                    d = back;
                }
            }
        }
        if !looks_like_initial(&d) {
            continue;
        }
        conns.retain(|_, tx| !tx.is_closed());
        if conns.len() >= MAX_SERVER_CONNECTIONS {
            continue;
        }
        let Ok(t) = QuicTransport::new(cfg.clone(), Role::Server, local, &identity, seed()) else {
            continue;
        };
        let (in_tx, in_rx) = mpsc::channel(INBOUND_QUEUE);
        let _ = in_tx.try_send((d, from));
        conns.insert(from, in_tx);
        let (conn, ready) = spawn_driver(t, socket.clone(), local, from, in_rx);
        let accepted = accepted.clone();
        tokio::spawn(async move {
            if let Ok(Ok(Ok(()))) = tokio::time::timeout(SERVER_HANDSHAKE_TIMEOUT, ready).await {
                let _ = accepted.send(conn).await;
            }
            // Otherwise `conn` is dropped: its task closes and ends.
        });
    }
}

/// The sending half of a QUIC connection.
pub(crate) struct QuicSender {
    cmds: mpsc::Sender<Cmd>,
    next_id: u32,
    abandoned: Arc<Mutex<VecDeque<Abandoned>>>,
}

/// The receiving half.
pub(crate) struct QuicReceiver {
    rx: mpsc::Receiver<Result<Option<ReceivedMessage>, StreamError>>,
    ended: bool,
}

impl QuicConn {
    pub(crate) fn split(self) -> (QuicSender, QuicReceiver) {
        (
            QuicSender {
                cmds: self.cmds,
                next_id: 0,
                abandoned: self.abandoned,
            },
            QuicReceiver {
                rx: self.rx,
                ended: false,
            },
        )
    }
}

impl SendHalf for QuicSender {
    fn send(&mut self, m: SendOut) -> impl Future<Output = Result<u32, StreamError>> + Send {
        let id = self.next_id;
        let out = OutMessage {
            id,
            payload: m.payload,
            lifetime: m.lifetime,
            depends_on: m.depends_on,
            substream: m.substream,
            priority: m.priority,
            group: None,
            frame: None,
            fec: true,
        };
        let cmds = self.cmds.clone();
        let next = &mut self.next_id;
        async move {
            let (tx, rx) = oneshot::channel();
            cmds.send(Cmd::Send(out, tx))
                .await
                .map_err(|_| StreamError::Closed)?;
            rx.await.map_err(|_| StreamError::Closed)??;
            *next = next.wrapping_add(1);
            Ok(id)
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send {
        let cmds = self.cmds.clone();
        async move { cmds.send(Cmd::Close).await.map_err(|_| StreamError::Closed) }
    }

    fn take_abandoned(&mut self) -> Vec<Abandoned> {
        self.abandoned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect()
    }
}

impl RecvHalf for QuicReceiver {
    async fn recv(&mut self) -> Result<Option<ReceivedMessage>, StreamError> {
        {
            if self.ended {
                return Ok(None);
            }
            match self.rx.recv().await {
                Some(Ok(Some(m))) => Ok(Some(m)),
                Some(Ok(None)) | None => {
                    self.ended = true;
                    Ok(None)
                }
                Some(Err(e)) => {
                    self.ended = true;
                    Err(e)
                }
            }
        }
    }
}
