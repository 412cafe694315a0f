//! [`Preconnection`] (RFC 9622 §6): endpoints, properties and security;
//! [`Preconnection::initiate`] races the candidates (RFC 9623 §4.3) and
//! [`Preconnection::listen`] listens on all of them.

use crate::connection::{Connection, Semantics};
use crate::properties::{Protocol, SecurityParameters, TransportProperties};
use crate::quic::{self, QuicListener};
use crate::Error;
use hollywood_io::engine::Stack;
use hollywood_io::kernel::{KernelOptions, KernelStream};
use hollywood_io::message::StreamError;
use hollywood_tcp::{CcAlgorithm, Config, KeepaliveConfig};
use hollywood_transport::quic::QuicIdentity;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// The delay between starting one candidate and the next (RFC 9623
/// §4.3.2 staggered racing; the RFC's example value).
pub const DEFAULT_RACING_DELAY: Duration = Duration::from_millis(250);
/// How long [`Preconnection::initiate`] tries before it gives up.
pub const DEFAULT_ESTABLISHMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Unsent bytes a kernel TCP socket may hold (Linux `TCP_NOTSENT_LOWAT`):
/// messages wait in the message layer instead, where a lifetime can still
/// expire them (thesis §4.4 at a kernel sender) and where the most urgent
/// (`msgPriority`) is handed over first — bytes in the socket buffer
/// cannot be reordered. 16 KiB: about 11 full-size segments, 13 ms at
/// 10 Mb/s, the longest an urgent message waits behind less urgent bytes
/// not yet sent; enough that the socket does not run dry between two
/// wakeups of the sending task.
pub const KERNEL_NOTSENT_LOWAT: u32 = 16 << 10;

/// Where to connect (RFC 9622 §6.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteEndpoint {
    host: Option<String>,
    ip: Option<IpAddr>,
    port: Option<u16>,
}

impl RemoteEndpoint {
    /// An empty endpoint (set a host or address and a port).
    pub fn new() -> RemoteEndpoint {
        RemoteEndpoint::default()
    }

    /// `WithHostName`: resolved when the connection is initiated.
    #[must_use]
    pub fn with_host_name(mut self, host: impl Into<String>) -> RemoteEndpoint {
        self.host = Some(host.into());
        self
    }

    /// `WithIPAddress`.
    #[must_use]
    pub fn with_ip_address(mut self, ip: IpAddr) -> RemoteEndpoint {
        self.ip = Some(ip);
        self
    }

    /// `WithPort`.
    #[must_use]
    pub fn with_port(mut self, port: u16) -> RemoteEndpoint {
        self.port = Some(port);
        self
    }

    /// Address and port at once.
    pub fn from_addr(addr: SocketAddr) -> RemoteEndpoint {
        RemoteEndpoint::new()
            .with_ip_address(addr.ip())
            .with_port(addr.port())
    }

    async fn resolve(&self) -> Result<SocketAddr, Error> {
        let port = self
            .port
            .ok_or_else(|| Error::Endpoint("the remote endpoint has no port".into()))?;
        if let Some(ip) = self.ip {
            return Ok(SocketAddr::new(ip, port));
        }
        let host = self.host.as_deref().ok_or_else(|| {
            Error::Endpoint("the remote endpoint has no host name or address".into())
        })?;
        let mut addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| Error::Endpoint(format!("resolving {host}: {e}")))?;
        addrs
            .next()
            .ok_or_else(|| Error::Endpoint(format!("{host} has no address")))
    }
}

/// Where to listen or connect from (RFC 9622 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// The address (a listener may take a wildcard).
    pub ip: IpAddr,
    /// The port (0: any).
    pub port: u16,
}

impl LocalEndpoint {
    /// From an address and port.
    pub fn from_addr(addr: SocketAddr) -> LocalEndpoint {
        LocalEndpoint {
            ip: addr.ip(),
            port: addr.port(),
        }
    }

    fn addr(self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }
}

/// TCP Hollywood on our engine: a [`Stack`] on a TUN device
/// (`hollywood_io::Stack::spawn`, which needs `CAP_NET_ADMIN`) and the
/// engine's address on it. Traffic from that address must be routed to
/// the network (in the lab, `Lab::engine_tun`; on a host, a route or NAT
/// for the TUN's subnet).
#[derive(Clone)]
pub struct Engine {
    /// The engine.
    pub stack: Stack,
    /// The engine's address on its TUN device.
    pub addr: IpAddr,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("addr", &self.addr).finish()
    }
}

impl Engine {
    /// The engine on a standing host-mode instance of this network
    /// namespace (`hollywood host up`, docs/DEPLOY.md): `name`, or the
    /// first free one. Its connections leave masqueraded from the host's
    /// address, and the instance's `--listen` ports reach it. `config`:
    /// the engine's TCP (e.g. [`Config::hollywood`]). Within a tokio
    /// runtime.
    pub fn on_host(name: Option<&str>, config: Config) -> Result<Engine, Error> {
        let (st, tun) = hollywood_io::hostmode::attach(name)
            .map_err(|e| Error::Endpoint(format!("host mode: {e}")))?;
        let addr: IpAddr = st.engine_v4.parse().map_err(|_| {
            Error::Endpoint(format!(
                "host mode: instance {} has engine address {:?}",
                st.name, st.engine_v4
            ))
        })?;
        let stack = Stack::spawn(tun, config)
            .map_err(|e| Error::Endpoint(format!("host mode: engine on {}: {e}", st.tun)))?;
        Ok(Engine { stack, addr })
    }

    /// The process's default engine: on the first standing host-mode
    /// instance of the calling thread's network namespace (`hollywood host
    /// up`), attached at the first call and shared by every later one
    /// (the kernel lets one process hold an instance's TUN device; this
    /// process holds it until it exits). TCP Hollywood's engine TCP:
    /// inconsistent retransmissions, out-of-order delivery and BBR
    /// ([`host_config`]), as `hollywood transmit --host`. Attached again
    /// when the runtime it ran in has ended. Fails with what is missing:
    /// no instance is up (and whether this process could use one), or
    /// the instance's device is held by another process.
    ///
    /// [`Preconnection::initiate`] and [`Preconnection::listen`] use it
    /// when no engine was given (see [`Preconnection::without_host_engine`]).
    pub async fn host() -> Result<Engine, Error> {
        static HOST: tokio::sync::Mutex<Option<Engine>> = tokio::sync::Mutex::const_new(None);
        let mut cached = HOST.lock().await;
        if let Some(e) = cached.as_ref() {
            if e.stack.stats().await.is_ok() {
                return Ok(e.clone());
            }
            // Its runtime ended, and the device was let go with it.
            *cached = None;
        }
        let cap = std::fs::read_to_string("/proc/self/status")
            .is_ok_and(|s| hollywood_io::hostmode::cap_net_admin_in(&s));
        let lacks = if cap {
            ""
        } else {
            ", and this process lacks CAP_NET_ADMIN to attach to one"
        };
        // Without a run directory nothing is up (and none is made here).
        let up = hollywood_io::hostmode::state::run_dir().is_dir()
            && hollywood_io::hostmode::any_up().unwrap_or(false);
        if !up {
            return Err(Error::NoCandidate(format!(
                "no host-mode instance is up in this network namespace{lacks}: \
                 `sudo hollywood host up` makes one (docs/DEPLOY.md)"
            )));
        }
        let e = Engine::on_host(None, host_config())?;
        *cached = Some(e.clone());
        Ok(e)
    }
}

/// The engine TCP of [`Engine::host`]: TCP Hollywood (inconsistent
/// retransmissions, out-of-order delivery; thesis ch. 4) with BBR.
pub fn host_config() -> Config {
    Config {
        cc: hollywood_tcp::CcAlgorithm::Bbr,
        ..Config::hollywood(true, true)
    }
}

/// Everything a connection is made from (RFC 9622 §6).
#[derive(Debug, Clone)]
pub struct Preconnection {
    remote: Option<RemoteEndpoint>,
    local: Option<LocalEndpoint>,
    properties: TransportProperties,
    security: SecurityParameters,
    racing_delay: Duration,
    establishment_timeout: Duration,
    protocols: Vec<Protocol>,
    engine: Option<Engine>,
    host_engine: bool,
    /// Why the default engine is not there, once `initiate` or `listen`
    /// looked for it.
    no_host_engine: Option<String>,
    namespace: Option<String>,
    congestion: Option<CcAlgorithm>,
    keep_alive: Option<Duration>,
    consistent_only: bool,
    listen_shards: usize,
    listen_limit: usize,
    listen_credit: Option<u32>,
}

/// Whether the one-line notice about a missing default engine was printed.
static NOTICE: std::sync::Once = std::sync::Once::new();

impl Preconnection {
    /// With the given properties and security, racing every protocol.
    pub fn new(properties: TransportProperties, security: SecurityParameters) -> Preconnection {
        Preconnection {
            remote: None,
            local: None,
            properties,
            security,
            racing_delay: DEFAULT_RACING_DELAY,
            establishment_timeout: DEFAULT_ESTABLISHMENT_TIMEOUT,
            protocols: Protocol::ALL.to_vec(),
            engine: None,
            host_engine: true,
            no_host_engine: None,
            namespace: None,
            congestion: None,
            keep_alive: None,
            consistent_only: false,
            listen_shards: 1,
            listen_limit: crate::quic::MAX_SERVER_CONNECTIONS,
            listen_credit: None,
        }
    }

    /// A listener's QUIC candidate reads `n` sockets on its port
    /// (`SO_REUSEPORT`), each from its own task, so a busy listener's
    /// receiving spreads over the runtime's worker threads (`hollywood
    /// relay` gives one per worker). The kernel keeps each client on one
    /// socket. Default 1; 0 counts as 1.
    #[must_use]
    pub fn with_listen_shards(mut self, n: usize) -> Preconnection {
        self.listen_shards = n.max(1);
        self
    }

    /// A listener's QUIC candidate serves at most `n` connections at once
    /// (default [`MAX_SERVER_CONNECTIONS`](crate::quic::MAX_SERVER_CONNECTIONS)); a datagram that would
    /// open one more is dropped, so the caller's attempt times out (an
    /// application that refuses with a reason, as `hollywood relay` does,
    /// sets this above its own limit). Kernel TCP's backlog is the
    /// kernel's.
    #[must_use]
    pub fn with_listen_limit(mut self, n: usize) -> Preconnection {
        self.listen_limit = n;
        self
    }

    /// A listener's QUIC connections let each caller open `n` streams at
    /// once at first (QUICsilver: `n` messages in flight toward the
    /// listener) instead of 1024, until the application calls
    /// [`Connection::raise_receive_credit`](crate::Connection::raise_receive_credit). quinn keeps an entry for
    /// every stream a peer may open from the connection's start (~50 KiB
    /// at 1024): a listener whose callers mostly receive (`hollywood
    /// relay`'s players) starts them low and raises it for those that
    /// send (its publishers). Default: no limit below 1024; 0 counts as 1.
    #[must_use]
    pub fn with_listen_receive_credit(mut self, n: u32) -> Preconnection {
        self.listen_credit = Some(n.max(1));
        self
    }

    /// The peer to connect to.
    #[must_use]
    pub fn with_remote(mut self, remote: RemoteEndpoint) -> Preconnection {
        self.remote = Some(remote);
        self
    }

    /// The local endpoint: where to listen, or where to connect from.
    #[must_use]
    pub fn with_local(mut self, local: LocalEndpoint) -> Preconnection {
        self.local = Some(local);
        self
    }

    /// The delay between starting candidates (default 250 ms).
    #[must_use]
    pub fn with_racing_delay(mut self, delay: Duration) -> Preconnection {
        self.racing_delay = delay;
        self
    }

    /// How long `initiate` tries (default 10 s).
    #[must_use]
    pub fn with_establishment_timeout(mut self, t: Duration) -> Preconnection {
        self.establishment_timeout = t;
        self
    }

    /// Only these protocols (in racing order after the properties').
    #[must_use]
    pub fn with_protocols(mut self, protocols: &[Protocol]) -> Preconnection {
        self.protocols = protocols.to_vec();
        self
    }

    /// Offer TCP Hollywood on this engine. Without one, `initiate` and
    /// `listen` use the default engine, [`Engine::host`], when a
    /// host-mode instance is up in the calling thread's network namespace
    /// (and the endpoint is not a loopback address, which the engine
    /// cannot reach, and no [`Preconnection::with_namespace`] was given);
    /// otherwise the candidate is left out, with a one-line notice on
    /// stderr (once per process) saying what is missing.
    #[must_use]
    pub fn with_engine(mut self, engine: Engine) -> Preconnection {
        self.engine = Some(engine);
        self
    }

    /// Never use the default engine ([`Engine::host`]): TCP Hollywood is
    /// a candidate only with [`Preconnection::with_engine`]. For an
    /// application (or a test) that must not hold a host-mode instance's
    /// TUN device, or must not change protocol when one comes up.
    #[must_use]
    pub fn without_host_engine(mut self) -> Preconnection {
        self.host_engine = false;
        self
    }

    /// With the default engine, if it is wanted and can be had: a copy
    /// with [`Engine::host`] as its engine, or with why not noted (and
    /// the notice printed). `ip`: the remote (or local) address.
    async fn with_default_engine(&self, ip: IpAddr) -> std::borrow::Cow<'_, Preconnection> {
        use std::borrow::Cow;
        let wanted = self.engine.is_none()
            && self.host_engine
            && self.namespace.is_none()
            && !ip.is_loopback()
            && self
                .properties
                .candidates(&self.protocols)
                .is_ok_and(|c| c.contains(&Protocol::TcpHollywood));
        if !wanted {
            return Cow::Borrowed(self);
        }
        let mut me = self.clone();
        match Engine::host().await {
            Ok(e) => me.engine = Some(e),
            Err(e) => {
                let why = match e {
                    Error::NoCandidate(s) => s,
                    e => e.to_string(),
                };
                NOTICE.call_once(|| {
                    eprintln!("hollywood: TCP Hollywood left out of the race: {why}");
                });
                me.no_host_engine = Some(why);
            }
        }
        Cow::Owned(me)
    }

    /// Make kernel sockets (TCP, and UDP for QUIC) in the named network
    /// namespace (`ip netns`) instead of the calling thread's; e.g. for
    /// an application in the lab's host a while its runtime runs
    /// elsewhere. Needs root.
    #[must_use]
    pub fn with_namespace(mut self, name: impl Into<String>) -> Preconnection {
        self.namespace = Some(name.into());
        self
    }

    /// The congestion controller of every candidate (thesis §7.2: a
    /// socket option selects it): on the engine and on QUIC our NewReno,
    /// CUBIC or BBR; on kernel TCP the kernel's module of that name
    /// (`TCP_CONGESTION` `reno`, `cubic`, `bbr`; an attempt fails if the
    /// kernel has none). Default: BBR on the engine (of [`Engine::host`];
    /// a given engine's own) and on QUIC, the kernel's default on kernel
    /// TCP.
    #[must_use]
    pub fn with_congestion_control(mut self, cc: CcAlgorithm) -> Preconnection {
        self.congestion = Some(cc);
        self
    }

    /// TCP Hollywood on the engine without inconsistent retransmissions:
    /// a retransmission repeats the original bytes, as standard TCP's do.
    /// For a path whose firewall resets connections that carry
    /// inconsistent retransmissions (thesis §4.5); out-of-order delivery
    /// and expiry before sequence numbers stay. `relay` switches to it
    /// after such a reset.
    #[must_use]
    pub fn with_consistent_retransmissions(mut self) -> Preconnection {
        self.consistent_only = true;
        self
    }

    /// Whether [`Preconnection::with_consistent_retransmissions`] is set.
    pub fn consistent_retransmissions(&self) -> bool {
        self.consistent_only
    }

    /// Keep-alive (RFC 9622 §8.1.4 `keepAliveTimeout`; thesis §7.1, to
    /// refresh NAT and firewall bindings while the application is silent):
    /// a probe after `idle` without traffic, on every candidate (TCP
    /// keep-alive on the engine and the kernel, a PING on QUIC). Default:
    /// off.
    #[must_use]
    pub fn with_keep_alive(mut self, idle: Duration) -> Preconnection {
        self.keep_alive = Some(idle);
        self
    }

    /// The congestion controller set with
    /// [`Preconnection::with_congestion_control`].
    pub fn congestion_control(&self) -> Option<CcAlgorithm> {
        self.congestion
    }

    /// The keep-alive set with [`Preconnection::with_keep_alive`].
    pub fn keep_alive(&self) -> Option<Duration> {
        self.keep_alive
    }

    /// The QUIC configuration of this preconnection's properties and
    /// connection options.
    fn quic_config(&self, ordered: bool) -> hollywood_transport::quic::QuicConfig {
        use hollywood_transport::quic::QuicCc;
        let mut c = quic::config(ordered);
        if let Some(cc) = self.congestion {
            c.cc = match cc {
                CcAlgorithm::NewReno => QuicCc::NewReno,
                CcAlgorithm::Cubic => QuicCc::Cubic,
                CcAlgorithm::Bbr => QuicCc::Bbr,
            };
        }
        c.keep_alive = self.keep_alive;
        c
    }

    /// The engine connection's configuration: `None` (the engine's own)
    /// unless a connection option changes it.
    fn engine_config(&self, engine: &Engine) -> Option<Config> {
        if self.congestion.is_none() && self.keep_alive.is_none() && !self.consistent_only {
            return None;
        }
        let mut c = engine.stack.config().clone();
        if self.consistent_only {
            c.hollywood.inconsistent_retransmissions = false;
        }
        if let Some(cc) = self.congestion {
            c.cc = cc;
        }
        if let Some(idle) = self.keep_alive {
            c.keepalive = Some(KeepaliveConfig {
                idle,
                interval: idle,
                ..KeepaliveConfig::default()
            });
        }
        Some(c)
    }

    /// The kernel stream options of this preconnection.
    fn kernel_options(&self) -> KernelOptions {
        KernelOptions {
            notsent_lowat: Some(KERNEL_NOTSENT_LOWAT),
            congestion: self.congestion.map(|cc| match cc {
                CcAlgorithm::NewReno => "reno",
                CcAlgorithm::Cubic => "cubic",
                CcAlgorithm::Bbr => "bbr",
            }),
            keepalive: self.keep_alive,
            ..KernelOptions::default()
        }
    }

    /// The namespace set with [`Preconnection::with_namespace`].
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The properties.
    pub fn properties(&self) -> &TransportProperties {
        &self.properties
    }

    /// The candidates in racing order, and why any were left out.
    pub fn candidates(&self) -> Result<(Vec<Protocol>, Vec<String>), Error> {
        let mut c = self
            .properties
            .candidates(&self.protocols)
            .map_err(Error::NoCandidate)?;
        let mut left_out = Vec::new();
        if self.engine.is_none() && c.contains(&Protocol::TcpHollywood) {
            c.retain(|p| *p != Protocol::TcpHollywood);
            left_out.push(match &self.no_host_engine {
                Some(why) => format!("hollywood: no engine: {why}"),
                None if !self.host_engine => {
                    "hollywood: no engine was given (and the default is off: without_host_engine)"
                        .to_string()
                }
                None => "hollywood: no engine was given, and a host-mode instance \
                         (`sudo hollywood host up`, docs/DEPLOY.md) is used only for a \
                         non-loopback endpoint of this network namespace"
                    .to_string(),
            });
        }
        if c.is_empty() {
            return Err(Error::NoCandidate(left_out.join("; ")));
        }
        Ok((c, left_out))
    }

    fn quic_client_identity(&self) -> Result<QuicIdentity, Error> {
        match &self.security {
            SecurityParameters::Pinned(id) => Ok(QuicIdentity::from_identity(id)),
            SecurityParameters::Disabled => QuicIdentity::unverified().map_err(Error::Security),
        }
    }

    /// Connect (RFC 9622 §7.1 `Initiate`): race the candidates, staggered
    /// by the racing delay (a failed attempt starts the next at once), and
    /// return the first that is Ready, after its handshake (TLS included
    /// in secure mode). The losers are aborted. If all fail, the error
    /// names each candidate's reason.
    pub async fn initiate(&self) -> Result<Connection, Error> {
        let remote = self
            .remote
            .as_ref()
            .ok_or_else(|| Error::Endpoint("no remote endpoint".into()))?
            .resolve()
            .await?;
        self.with_default_engine(remote.ip())
            .await
            .race(remote)
            .await
    }

    async fn race(&self, remote: SocketAddr) -> Result<Connection, Error> {
        let (candidates, mut reasons) = self.candidates()?;
        let mut set: JoinSet<(Protocol, Result<Connection, String>)> = JoinSet::new();
        let mut next = 0;
        let mut running = 0;
        let deadline = tokio::time::Instant::now() + self.establishment_timeout;
        let mut stagger = Box::pin(tokio::time::sleep(self.racing_delay));
        let start = |set: &mut JoinSet<_>, p: Protocol| {
            let me = self.clone();
            set.spawn(async move { (p, me.attempt(p, remote).await) });
        };
        start(&mut set, candidates[0]);
        next += 1;
        running += 1;
        loop {
            tokio::select! {
                r = set.join_next(), if running > 0 => {
                    running -= 1;
                    match r {
                        Some(Ok((_, Ok(conn)))) => {
                            set.abort_all();
                            return Ok(conn);
                        }
                        Some(Ok((p, Err(e)))) => reasons.push(format!("{p}: {e}")),
                        Some(Err(e)) => reasons.push(format!("an attempt panicked: {e}")),
                        None => {}
                    }
                    if running == 0 {
                        if next < candidates.len() {
                            start(&mut set, candidates[next]);
                            next += 1;
                            running += 1;
                            stagger.as_mut().reset(tokio::time::Instant::now() + self.racing_delay);
                        } else {
                            return Err(Error::Establishment(reasons.join("; ")));
                        }
                    }
                }
                () = &mut stagger, if next < candidates.len() => {
                    start(&mut set, candidates[next]);
                    next += 1;
                    running += 1;
                    stagger.as_mut().reset(tokio::time::Instant::now() + self.racing_delay);
                }
                () = tokio::time::sleep_until(deadline) => {
                    set.abort_all();
                    reasons.push(format!(
                        "no candidate was ready within {:?}",
                        self.establishment_timeout
                    ));
                    return Err(Error::Establishment(reasons.join("; ")));
                }
            }
        }
    }

    /// Connect over one protocol, handshake included.
    async fn attempt(&self, p: Protocol, remote: SocketAddr) -> Result<Connection, String> {
        let sem = Semantics::new(p, &self.properties);
        let local = self.local.map(LocalEndpoint::addr);
        match p {
            Protocol::Quic => {
                let id = self.quic_client_identity().map_err(|e| e.to_string())?;
                let cfg = self.quic_config(sem.ordered_default);
                let fec = self.properties.fec_config(p);
                let c =
                    quic::connect(self.namespace.as_deref(), remote, local, &id, cfg, fec).await?;
                let peer = c.peer;
                let (tx, rx) = c.split();
                Ok(Connection::spawn(p, peer, sem, tx, rx))
            }
            Protocol::TcpHollywood => {
                let engine = self.engine.as_ref().ok_or("no engine")?;
                let from = SocketAddr::new(engine.addr, local.map_or(0, |l| l.port()));
                let mut s = engine
                    .stack
                    .connect(from, remote, self.engine_config(engine))
                    .await
                    .map_err(|e| e.to_string())?;
                if let SecurityParameters::Pinned(id) = &self.security {
                    s = s.secure_client(id).await.map_err(|e| e.to_string())?;
                }
                let (tx, rx) = s.split();
                Ok(Connection::spawn(p, remote, sem, tx, rx))
            }
            Protocol::KernelTcp => {
                let socket = crate::sockets::tcp(self.namespace.as_deref(), remote)?;
                if let Some(l) = local {
                    socket.bind(l).map_err(|e| format!("bind {l}: {e}"))?;
                }
                let tcp = socket.connect(remote).await.map_err(|e| e.to_string())?;
                let mut s = KernelStream::with_options(tcp, self.kernel_options())
                    .map_err(|e| e.to_string())?;
                if let SecurityParameters::Pinned(id) = &self.security {
                    s = s.secure_client(id).await.map_err(|e| e.to_string())?;
                }
                let (tx, rx) = s.split();
                Ok(Connection::spawn(p, remote, sem, tx, rx))
            }
        }
    }

    /// Listen (RFC 9622 §7.2): on kernel TCP and QUIC at the local
    /// endpoint (QUIC on UDP with the same port), and on the engine's
    /// address too when an engine is given. TCP Hollywood clients reach
    /// the kernel TCP listener as well (thesis §4.4: the message layer on
    /// an unmodified receiver). The address may be a wildcard: QUIC then
    /// answers each client from the address it called.
    pub async fn listen(&self) -> Result<Listener, Error> {
        let local = self
            .local
            .ok_or_else(|| Error::Endpoint("listen needs a local endpoint".into()))?;
        if let SecurityParameters::Pinned(id) = &self.security {
            if !id.can_serve() {
                return Err(Error::Security(
                    "a listener needs the certificate's key (Identity::from_files), not the \
                     certificate alone (Identity::trusting_file)"
                        .into(),
                ));
            }
        }
        self.with_default_engine(local.ip)
            .await
            .listen_at(local)
            .await
    }

    async fn listen_at(&self, local: LocalEndpoint) -> Result<Listener, Error> {
        let (candidates, _) = self.candidates().or_else(|e| {
            // A server without an engine still serves engine clients.
            self.properties
                .candidates(&self.protocols)
                .map(|c| (c, vec![]))
                .map_err(|_| e)
        })?;
        let (tx, rx) = mpsc::channel(128);
        let failed = Arc::new(AtomicU64::new(0));
        let mut tcp_port = local.port;
        let mut addrs = Vec::new();
        if candidates
            .iter()
            .any(|p| matches!(p, Protocol::KernelTcp | Protocol::TcpHollywood))
        {
            let l = crate::sockets::tcp_listener(self.namespace.as_deref(), local.addr())
                .map_err(Error::Endpoint)?;
            let a = l.local_addr().map_err(|e| Error::Endpoint(e.to_string()))?;
            tcp_port = a.port();
            addrs.push((Protocol::KernelTcp, a));
            tokio::spawn(accept_kernel(l, self.clone(), tx.clone(), failed.clone()));
            if let Some(engine) = &self.engine {
                let at = SocketAddr::new(engine.addr, tcp_port);
                let mut l = engine
                    .stack
                    .listen(at, self.engine_config(engine))
                    .await
                    .map_err(|e| Error::Endpoint(format!("engine listen on {at}: {e}")))?;
                addrs.push((Protocol::TcpHollywood, at));
                let me = self.clone();
                let (tx, failed) = (tx.clone(), failed.clone());
                tokio::spawn(async move {
                    loop {
                        let (s, peer) = tokio::select! {
                            r = l.accept() => match r {
                                Ok(r) => r,
                                Err(_) => return,
                            },
                            () = tx.closed() => return,
                        };
                        let (me, tx, failed) = (me.clone(), tx.clone(), failed.clone());
                        tokio::spawn(async move {
                            let sem = Semantics::new(Protocol::TcpHollywood, &me.properties);
                            let s = match &me.security {
                                SecurityParameters::Pinned(id) => s.secure_server(id).await,
                                SecurityParameters::Disabled => Ok(s),
                            };
                            match s {
                                Ok(s) => {
                                    let (a, b) = s.split();
                                    let c =
                                        Connection::spawn(Protocol::TcpHollywood, peer, sem, a, b);
                                    let _ = tx.send(c).await;
                                }
                                Err(_) => {
                                    failed.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        });
                    }
                });
            }
        }
        // Nothing is left out of a listener today (a wildcard address
        // serves QUIC too); the list stays for candidates that may be.
        let left_out = Vec::new();
        if candidates.contains(&Protocol::Quic) {
            let id = match &self.security {
                SecurityParameters::Pinned(id) => QuicIdentity::from_identity(id),
                SecurityParameters::Disabled => {
                    QuicIdentity::unverified().map_err(Error::Security)?
                }
            };
            let sem = Semantics::new(Protocol::Quic, &self.properties);
            let at = SocketAddr::new(local.ip, tcp_port);
            let mut cfg = self.quic_config(sem.ordered_default);
            cfg.peer_streams_at_start = self.listen_credit;
            let mut l = QuicListener::bind(
                self.namespace.as_deref(),
                at,
                id,
                cfg,
                self.properties.fec_config(Protocol::Quic),
                self.listen_shards,
                self.listen_limit,
            )
            .await
            .map_err(Error::Endpoint)?;
            addrs.push((Protocol::Quic, l.local));
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    let c = tokio::select! {
                        c = l.accept() => match c {
                            Some(c) => c,
                            None => return,
                        },
                        () = tx.closed() => return,
                    };
                    let peer = c.peer;
                    let (a, b) = c.split();
                    if tx
                        .send(Connection::spawn(Protocol::Quic, peer, sem, a, b))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
        Ok(Listener {
            accepted: rx,
            addrs,
            failed,
            left_out,
        })
    }
}

async fn accept_kernel(
    l: TcpListener,
    me: Preconnection,
    tx: mpsc::Sender<Connection>,
    failed: Arc<AtomicU64>,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            r = l.accept() => match r {
                Ok(r) => r,
                Err(_) => return,
            },
            () = tx.closed() => return,
        };
        let (me, tx, failed) = (me.clone(), tx.clone(), failed.clone());
        tokio::spawn(async move {
            let s = async {
                let s = KernelStream::with_options(tcp, me.kernel_options())?;
                match &me.security {
                    SecurityParameters::Pinned(id) => s.secure_server(id).await,
                    SecurityParameters::Disabled => Ok::<_, StreamError>(s),
                }
            };
            match s.await {
                Ok(s) => {
                    let sem = Semantics::new(Protocol::KernelTcp, &me.properties);
                    let (a, b) = s.split();
                    let _ = tx
                        .send(Connection::spawn(Protocol::KernelTcp, peer, sem, a, b))
                        .await;
                }
                Err(_) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

/// A listening server (RFC 9622 §7.2): connections from every candidate.
pub struct Listener {
    accepted: mpsc::Receiver<Connection>,
    addrs: Vec<(Protocol, SocketAddr)>,
    failed: Arc<AtomicU64>,
    left_out: Vec<String>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// The next connection, once established (handshake included;
    /// RFC 9622 `ConnectionReceived`). `None` when every listener stopped.
    pub async fn accept(&mut self) -> Option<Connection> {
        self.accepted.recv().await
    }

    /// Where it listens, per protocol (kernel TCP also serves TCP
    /// Hollywood clients).
    pub fn local_addrs(&self) -> &[(Protocol, SocketAddr)] {
        &self.addrs
    }

    /// Candidates this listener does not serve, and why.
    pub fn left_out(&self) -> &[String] {
        &self.left_out
    }

    /// Incoming connections whose handshake failed (e.g. a client that
    /// does not trust our certificate).
    pub fn handshakes_failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}
