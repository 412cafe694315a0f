//! QUIC under tokio: the sans-IO [`QuicTransport`] (quinn-proto, our
//! stream mappings and QUICsilver) driven by a task per connection, with
//! the OS clock and a tokio UDP socket. The simulator and
//! `hollywood_io::udp` drive the same object; only time and packets
//! come from here.
//!
//! A client owns a connected socket. A server owns one socket for all its
//! connections and hands each datagram to the connection of its source
//! address and the address it reached (no connection migration: the
//! transport disables it), creating one for a new pair only when the
//! datagram looks like a QUIC Initial (a long header in a datagram of at
//! least 1200 bytes, RFC 9000 §14.1).
//!
//! A server's socket may be bound to a wildcard address (`0.0.0.0`, `[::]`,
//! what a public listener is given): `quinn-udp` reads each datagram's
//! destination address (`IP_PKTINFO` / `IPV6_PKTINFO`), the connection it
//! opens is on that address, and every reply leaves from it, so a host
//! with several addresses answers from the one the client called. A dual-stack
//! `[::]` socket serves IPv4 clients too; their addresses are kept in
//! IPv4 form and mapped back only on the socket.

use crate::backend::{Abandoned, RecvHalf, SendHalf, SendOut};
use hollywood_fec::FecConfig;
use hollywood_io::message::{ReceivedMessage, StreamError};
use hollywood_tcp::Instant;
use hollywood_transport::clock::Clock;
use hollywood_transport::fec::{packet_overhead, FecTransport};
use hollywood_transport::quic::{Mapping, QuicConfig, QuicIdentity, QuicTransport};
use hollywood_transport::{MessageTransport, OutMessage, Role, SendError, TransportEvent};
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

/// Datagrams waiting between the socket reader and a connection's task;
/// beyond it they are dropped (as by a full socket buffer).
const INBOUND_QUEUE: usize = 1024;
/// Received messages a connection's task hands ahead of the application.
const RX_CHANNEL: usize = 64;
/// Connections a listener serves at most unless told otherwise
/// ([`Preconnection::with_listen_limit`](crate::Preconnection::with_listen_limit));
/// datagrams opening more are dropped.
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

/// A server's UDP socket, shared by its reader and every connection's
/// task: sends name their source address (the one the client called)
/// when the socket is bound to a wildcard.
pub(crate) struct ServerSocket {
    io: UdpSocket,
    state: quinn_udp::UdpSocketState,
    /// Bound to `0.0.0.0` or `[::]`: replies name their source.
    wildcard: bool,
    /// An IPv6 socket: IPv4 peers are reached by their mapped address.
    v6: bool,
}

impl ServerSocket {
    fn new(io: UdpSocket) -> Result<ServerSocket, String> {
        let local = io.local_addr().map_err(|e| e.to_string())?;
        let state = quinn_udp::UdpSocketState::new((&io).into())
            .map_err(|e| format!("UDP socket at {local}: {e}"))?;
        Ok(ServerSocket {
            io,
            state,
            wildcard: local.ip().is_unspecified(),
            v6: local.is_ipv6(),
        })
    }

    /// Send `payload` to `dst` from `src` (addresses as the transport
    /// names them: IPv4 peers in IPv4 form).
    fn try_send(&self, payload: &[u8], src: SocketAddr, dst: SocketAddr) -> std::io::Result<()> {
        let destination = match dst {
            SocketAddr::V4(v4) if self.v6 => {
                SocketAddr::from((v4.ip().to_ipv6_mapped(), v4.port()))
            }
            d => d,
        };
        let t = quinn_udp::Transmit {
            destination,
            ecn: None,
            contents: payload,
            segment_size: None,
            src_ip: self.wildcard.then(|| src.ip()),
        };
        self.io.try_io(tokio::io::Interest::WRITABLE, || {
            self.state.try_send((&self.io).into(), &t)
        })
    }
}

/// Where a connection's datagrams go out.
#[derive(Clone)]
enum Out {
    /// A client's connected socket.
    Connected(Arc<UdpSocket>),
    /// A server's socket.
    Server(Arc<ServerSocket>),
}

impl Out {
    fn try_send(&self, payload: &[u8], src: SocketAddr, dst: SocketAddr) -> std::io::Result<()> {
        match self {
            Out::Connected(s) => s.try_send_to(payload, dst).map(drop),
            Out::Server(s) => s.try_send(payload, src, dst),
        }
    }

    async fn writable(&self) -> std::io::Result<()> {
        match self {
            Out::Connected(s) => s.writable().await,
            Out::Server(s) => s.io.writable().await,
        }
    }
}

enum Wake {
    Datagram(Option<(Vec<u8>, SocketAddr)>),
    Cmd(Option<Cmd>),
    Timer,
    Nothing,
}

enum Cmd {
    Send(OutMessage, oneshot::Sender<Result<(), StreamError>>),
    Close,
    /// The peer may open `max_streams` streams from now on.
    RaiseCredit,
}

/// The task of one QUIC connection.
struct Driver {
    /// The QUIC transport, under the FEC layer when the properties ask
    /// for it ([`with_fec`]).
    t: Box<dyn MessageTransport>,
    socket: Out,
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
                if let Err(e) = self.socket.try_send(d.payload, d.src, d.dst) {
                    if e.kind() == std::io::ErrorKind::WouldBlock {
                        let wait = self.socket.writable();
                        if tokio::time::timeout(Duration::from_millis(5), wait)
                            .await
                            .is_ok()
                        {
                            let _ = self.socket.try_send(d.payload, d.src, d.dst);
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
                Wake::Cmd(Some(Cmd::RaiseCredit)) => {
                    self.t.raise_receive_credit();
                }
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

/// `t`, under the FEC layer with `fec` if given (docs/FEC.md).
fn with_fec(
    t: QuicTransport,
    fec: Option<&FecConfig>,
) -> Result<Box<dyn MessageTransport>, String> {
    Ok(match fec {
        None => Box::new(t),
        Some(c) => {
            let cfg = FecConfig {
                retransmits: t.config().mapping != Mapping::Datagram,
                message_overhead: match c.message_overhead {
                    0 => {
                        packet_overhead(hollywood_transport::TransportKind::Quic(t.config().kind()))
                    }
                    n => n,
                },
                ..c.clone()
            };
            Box::new(FecTransport::new(Box::new(t), cfg)?)
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn spawn_driver(
    t: QuicTransport,
    fec: Option<&FecConfig>,
    socket: Out,
    local: SocketAddr,
    peer: SocketAddr,
    inbound: mpsc::Receiver<(Vec<u8>, SocketAddr)>,
) -> Result<(QuicConn, oneshot::Receiver<Result<(), String>>), String> {
    let ordered = t.config().mapping == Mapping::SingleStream;
    let t = with_fec(t, fec)?;
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
    Ok((
        QuicConn {
            cmds: cmd_tx,
            rx: rx_rx,
            abandoned,
            peer,
        },
        ready_rx,
    ))
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
    fec: Option<FecConfig>,
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
    let (conn, ready) = spawn_driver(
        t,
        fec.as_ref(),
        Out::Connected(socket),
        local,
        remote,
        in_rx,
    )?;
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
    /// Listen on `local`: a specific address, or a wildcard (each
    /// connection is then on the address its client called; module docs).
    /// With `shards` > 1, that many sockets share the port
    /// (`SO_REUSEPORT`), each read by its own task, so receiving spreads
    /// over the runtime's workers; the kernel keeps each client on one
    /// socket.
    pub(crate) async fn bind(
        ns: Option<&str>,
        local: SocketAddr,
        identity: QuicIdentity,
        cfg: QuicConfig,
        fec: Option<FecConfig>,
        shards: usize,
        limit: usize,
    ) -> Result<QuicListener, String> {
        let sockets = crate::sockets::udp_shards(ns, local, shards)?;
        let (acc_tx, acc_rx) = mpsc::channel(128);
        let open = Arc::new(Open {
            each: (0..sockets.len()).map(|_| AtomicUsize::new(0)).collect(),
            limit,
        });
        let mut bound = local;
        for (index, s) in sockets.into_iter().enumerate() {
            let socket = Arc::new(ServerSocket::new(s)?);
            bound = socket.io.local_addr().map_err(|e| e.to_string())?;
            let shard = Shard {
                index,
                open: open.clone(),
            };
            let (id, c, tx) = (identity.clone(), cfg.clone(), acc_tx.clone());
            tokio::spawn(serve(socket, bound, id, c, fec.clone(), tx, shard));
        }
        let local = bound;
        Ok(QuicListener {
            accepted: acc_rx,
            local,
        })
    }

    pub(crate) async fn accept(&mut self) -> Option<QuicConn> {
        self.accepted.recv().await
    }
}

/// Connections open on each socket of a listener, and the listener's
/// limit: read only when a datagram would open a connection, so the
/// per-packet path shares nothing.
struct Open {
    each: Vec<AtomicUsize>,
    limit: usize,
}

/// One socket's place in its listener.
struct Shard {
    index: usize,
    open: Arc<Open>,
}

impl Shard {
    /// Record this socket's count; whether the listener has room for one more.
    fn room(&self, mine: usize) -> bool {
        self.open.each[self.index].store(mine, Ordering::Relaxed);
        let all: usize = self
            .open
            .each
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum();
        all < self.open.limit
    }
}

fn looks_like_initial(d: &[u8]) -> bool {
    d.len() >= 1200 && d[0] & 0xC0 == 0xC0
}

/// An address in the form the transport names it: IPv4 peers of a
/// dual-stack socket in IPv4 form.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// The datagrams of one receive: `(payload, source, destination)`. With
/// GRO the kernel hands several datagrams from one source in one buffer,
/// `stride` bytes apart (the last may be shorter).
fn datagrams<'a>(
    buf: &'a [u8],
    meta: &quinn_udp::RecvMeta,
    bound: SocketAddr,
) -> impl Iterator<Item = (&'a [u8], SocketAddr, SocketAddr)> + 'a {
    let from = canonical(meta.addr);
    // The address the datagram reached; a specific bound address is
    // that address (no ancillary data needed).
    let to = match meta.dst_ip {
        Some(ip) if bound.ip().is_unspecified() => {
            Some(SocketAddr::new(ip.to_canonical(), bound.port()))
        }
        _ if bound.ip().is_unspecified() => None,
        _ => Some(canonical(bound)),
    };
    let stride = meta.stride.max(1);
    buf[..meta.len.min(buf.len())]
        .chunks(stride)
        .filter_map(move |d| to.map(|to| (d, from, to)))
}

async fn serve(
    socket: Arc<ServerSocket>,
    bound: SocketAddr,
    identity: QuicIdentity,
    cfg: QuicConfig,
    fec: Option<FecConfig>,
    accepted: mpsc::Sender<QuicConn>,
    shard: Shard,
) {
    type Inbound = mpsc::Sender<(Vec<u8>, SocketAddr)>;
    // A connection is its client's address and the address it called.
    let mut conns: HashMap<(SocketAddr, SocketAddr), Inbound> = HashMap::new();
    // Room for a GRO batch, as quinn's endpoint keeps (the pages are
    // touched only as far as datagrams fill them).
    let mut buf = vec![0u8; 65_536 * socket.state.gro_segments().max(1)];
    let mut meta = [quinn_udp::RecvMeta::default()];
    loop {
        let received = tokio::select! {
            r = socket.io.readable() => match r {
                Ok(()) => socket.io.try_io(tokio::io::Interest::READABLE, || {
                    let mut bufs = [std::io::IoSliceMut::new(&mut buf)];
                    socket.state.recv((&socket.io).into(), &mut bufs, &mut meta)
                }),
                Err(_) => return,
            },
            () = accepted.closed() => return,
        };
        match received {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        for (d, from, to) in datagrams(&buf, &meta[0], bound) {
            let mut d = d.to_vec();
            if let Some(tx) = conns.get(&(from, to)) {
                match tx.try_send((d, from)) {
                    Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => continue,
                    Err(mpsc::error::TrySendError::Closed((back, _))) => {
                        // That connection ended; this may open a new one.
                        conns.remove(&(from, to));
                        d = back;
                    }
                }
            }
            if !looks_like_initial(&d) {
                continue;
            }
            conns.retain(|_, tx| !tx.is_closed());
            if !shard.room(conns.len()) {
                continue;
            }
            let Ok(t) = QuicTransport::new(cfg.clone(), Role::Server, to, &identity, seed()) else {
                continue;
            };
            let (in_tx, in_rx) = mpsc::channel(INBOUND_QUEUE);
            let _ = in_tx.try_send((d, from));
            conns.insert((from, to), in_tx);
            let Ok((conn, ready)) = spawn_driver(
                t,
                fec.as_ref(),
                Out::Server(socket.clone()),
                to,
                from,
                in_rx,
            ) else {
                continue;
            };
            let accepted = accepted.clone();
            tokio::spawn(async move {
                if let Ok(Ok(Ok(()))) = tokio::time::timeout(SERVER_HANDSHAKE_TIMEOUT, ready).await
                {
                    let _ = accepted.send(conn).await;
                }
                // Otherwise `conn` is dropped: its task closes and ends.
            });
        }
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

    fn raise_receive_credit(&mut self) -> impl Future<Output = ()> + Send {
        let cmds = self.cmds.clone();
        async move {
            // A closed connection has nothing to raise.
            let _ = cmds.send(Cmd::RaiseCredit).await;
        }
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
