//! MPEG-DASH over TCP and TCP Hollywood ([DASHing-2018], "DASHing Towards
//! Hollywood"; thesis chapter 6): a server and a client written against
//! the message-transport interface, over one simulated bottleneck.
//!
//! - [`content`]: the representations, chunk sizes and bytes, the MPD;
//! - [`http`]: HTTP/1.1 on messages (requests and heads on a control
//!   sub-stream, bodies as 1400-byte data messages with sequence number
//!   and stream offset);
//! - [`server`]: the content-agnostic server; [`client`]: [DASHing-2018]'s
//!   client (Algorithms 1 and 2, the playout buffer, the metrics);
//! - [`abr`]: rate adaptation, one file per algorithm (BOLA as dash.js,
//!   a throughput rule);
//! - [`progressive`]: thesis chapter 6's progressive streaming (server
//!   push or one TCP Hollywood message per frame) and request-response, at
//!   a fixed encoding rate.
//!
//! [`DashScenario::run`] sets them up as [DASHing-2018] did (REFERENCES.md [DASHing-2018], setup):
//! one client, one server, the path shaped at the server's side — rate,
//! delay and random loss on the server-to-client direction — and the same
//! congestion controller at both ends of every compared transport.

pub mod abr;
pub mod client;
pub mod content;
pub mod h2;
pub mod http;
pub mod progressive;
pub mod server;

use crate::transport::GenericTransport;
use client::{ClientConfig, ClientReport, DashClient};
use content::Content;
use hollywood_sim::{LinkConfig, LossModel, NodeId, SimBuilder, Simulator, TransportHost};
use hollywood_tcp::{CcAlgorithm, Config, Instant};
use hollywood_transport::quic::{QuicIdentity, QuicTransport};
use hollywood_transport::tcp::TcpTransport;
use hollywood_transport::{MessageTransport, TransportApp};
use hollywood_transport::{Role, TransportStats};
use server::{DashServer, ServerStats};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// One network condition, from `at` on.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Phase {
    /// When it starts (from the session's start).
    pub at: Duration,
    /// Bottleneck rate, bit/s.
    pub rate_bps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Random loss on the server-to-client direction (0..1).
    pub loss: f64,
}

/// A DASH session over one transport and path.
#[derive(Debug, Clone)]
pub struct DashScenario {
    /// The transport: a TCP deployment (the server is its sender side,
    /// the client its receiver side; `Tcp` or `Hollywood` in [DASHing-2018]) or
    /// a QUIC mapping ([`dash_quic`]).
    pub transport: GenericTransport,
    /// The client's rules (Algorithm 1 or 2).
    pub client: ClientConfig,
    /// What the server offers.
    pub content: Arc<Content>,
    /// The path: the first phase from 0, later ones as they come (a
    /// varying profile); at least one.
    pub phases: Vec<Phase>,
    /// Drop-tail queue at the bottleneck (bytes); `None` = one
    /// bandwidth-delay product of the first phase, at least 64 KiB.
    pub queue_bytes: Option<usize>,
    /// Congestion controller at both ends.
    pub cc: CcAlgorithm,
    /// Seed of the path's randomness and the transports.
    pub seed: u64,
    /// Write every packet (both directions, at link ingress) here.
    pub pcap: Option<std::path::PathBuf>,
}

/// What a session measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DashRun {
    /// The transport's name.
    pub transport: &'static str,
    /// The client's measurements.
    pub client: ClientReport,
    /// Server counters.
    pub server: ServerStats,
    /// The server's transport counters (retransmissions as `packets_lost`).
    #[serde(skip)]
    pub server_transport: TransportStats,
    /// Segments the server retransmitted.
    pub retransmitted_segments: u64,
    /// Simulated time (s).
    pub sim_seconds: f64,
}

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The server's port (HTTP).
pub const SERVER_PORT: u16 = 80;
/// The client's port.
pub const CLIENT_PORT: u16 = 40000;

type ClientHost = TransportHost<DashClient>;
type ServerHost = TransportHost<DashServer>;

impl DashScenario {
    /// Refuse a scenario that makes no sense, saying why.
    pub fn validate(&self) -> Result<(), String> {
        self.client.validate()?;
        let first = self
            .phases
            .first()
            .ok_or("the path needs at least one phase")?;
        if first.at != Duration::ZERO {
            return Err("the first phase must start at 0".into());
        }
        if self.phases.windows(2).any(|w| w[1].at <= w[0].at) {
            return Err("phases must start at increasing times".into());
        }
        for p in &self.phases {
            if p.rate_bps < 10_000 {
                return Err(format!("rate {} bit/s: use at least 10 kbit/s", p.rate_bps));
            }
            if p.rtt > Duration::from_secs(10) {
                return Err(format!("RTT {:?}: use at most 10 s", p.rtt));
            }
            if !(0.0..0.5).contains(&p.loss) {
                return Err(format!("loss {}: use 0 to 50 %", p.loss));
            }
        }
        use crate::stream::Transport;
        let ok = match &self.transport {
            GenericTransport::Tcp(t) => matches!(
                t,
                Transport::Tcp
                    | Transport::Hollywood
                    | Transport::HollywoodOoo
                    | Transport::HollywoodIr
            ),
            GenericTransport::Quic(q) => {
                use hollywood_transport::quic::Mapping;
                q.mapping != Mapping::Datagram && !q.quicsilver
            }
            GenericTransport::Udp => false,
        };
        if !ok {
            return Err(format!(
                "{} is not a DASH transport: HTTP needs a reliable one (TCP, TCP Hollywood or a QUIC stream mapping)",
                self.transport.name()
            ));
        }
        Ok(())
    }

    /// The emulated links of phase `p` (server to client, client to
    /// server): rate, half the RTT and the loss down, rate and half the
    /// RTT up, a drop-tail queue of `queue` bytes each way. The simulator
    /// and the lab (`hollywood lab dash`) build their paths from these.
    pub fn link(p: &Phase, queue: usize) -> (LinkConfig, LinkConfig) {
        let down = LinkConfig::new(p.rate_bps, p.rtt / 2)
            .with_queue_bytes(queue)
            .with_loss(if p.loss > 0.0 {
                LossModel::Bernoulli(p.loss)
            } else {
                LossModel::None
            });
        let up = LinkConfig::new(p.rate_bps, p.rtt / 2).with_queue_bytes(queue);
        (down, up)
    }

    /// The bottleneck queue: `queue_bytes`, or one bandwidth-delay
    /// product of the first phase, at least 64 KiB.
    pub fn queue(&self) -> usize {
        queue_for(&self.phases, self.queue_bytes)
    }

    /// How long a session may take before it gives up: three times the
    /// video's length plus ten minutes.
    pub fn time_limit(&self) -> Duration {
        self.content.duration() * 3 + Duration::from_secs(600)
    }

    /// The session's applications: the server and the client.
    pub fn apps(&self) -> (DashServer, DashClient) {
        (
            DashServer::new(self.content.clone()),
            DashClient::new(self.client, &self.content.manifest_path()),
        )
    }

    /// Play the whole video (or give up at a generous time limit: three
    /// times the video's length plus ten minutes).
    pub fn run(&self) -> Result<DashRun, String> {
        self.validate()?;
        let name = self.transport.name();
        let (server_app, client_app) = self.apps();
        let (mut sim, server, client) = build_path(
            &self.transport,
            self.cc,
            &self.phases,
            self.queue_bytes,
            self.seed,
            server_app,
            client_app,
        )?;
        if let Some(p) = &self.pcap {
            sim.capture_pcap_file(p, hollywood_sim::CaptureFilter::default())
                .map_err(|e| format!("cannot write pcap {}: {e}", p.display()))?;
        }
        let limit = Instant::ZERO + self.time_limit();
        while sim.now() < limit {
            sim.run_for(Duration::from_secs(1))
                .map_err(|e| e.to_string())?;
            let c = sim.node_mut::<ClientHost>(client).expect("client");
            if c.app().finished() {
                break;
            }
            if let Some(e) = sim
                .node_mut::<ServerHost>(server)
                .expect("server")
                .app()
                .error()
            {
                return Err(format!("server: {e}"));
            }
        }
        let now = sim.now();
        sim.finish_captures().map_err(|e| format!("pcap: {e}"))?;
        let s = sim.node_mut::<ServerHost>(server).expect("server");
        let (server_stats, server_transport) = (s.app().stats(), s.transport().stats());
        let retransmitted_segments = retransmitted(s.transport());
        let c = sim.node_mut::<ClientHost>(client).expect("client");
        let report = c.app().report(now);
        Ok(DashRun::new(
            name,
            report,
            server_stats,
            server_transport,
            retransmitted_segments,
            now,
        ))
    }
}

impl DashRun {
    /// The run of a session that ended at `now`: a client report with
    /// neither an end nor an error gets the error "playback had not
    /// ended" (shared by the simulator and the lab).
    pub fn new(
        transport: &'static str,
        mut client: ClientReport,
        server: ServerStats,
        server_transport: TransportStats,
        retransmitted_segments: u64,
        now: Instant,
    ) -> DashRun {
        if client.ended_s.is_none() && client.error.is_none() {
            client.error = Some(format!(
                "playback had not ended after {:.0} s",
                now.since_epoch().as_secs_f64()
            ));
        }
        DashRun {
            transport,
            client,
            server,
            server_transport,
            retransmitted_segments,
            sim_seconds: now.since_epoch().as_secs_f64(),
        }
    }
}

/// The queue of a path: `queue_bytes`, or one bandwidth-delay product of
/// the first phase, at least 64 KiB.
fn queue_for(phases: &[Phase], queue_bytes: Option<usize>) -> usize {
    let bdp = phases.first().map_or(0, |p| {
        (p.rate_bps as f64 * p.rtt.as_secs_f64() / 8.0) as usize
    });
    queue_bytes.unwrap_or(bdp.max(64 * 1024))
}

/// A server and a client over the path of `phases` (the first from 0,
/// the others scheduled): rate, half the RTT and the loss server to
/// client, half the RTT back, a drop-tail queue of `queue_bytes` (default
/// one BDP of the first phase, at least 64 KiB); the server is the
/// deployment's sender side, the client its receiver side (over QUIC: the
/// server and client of the connection, `cc` as quinn's controller).
/// Shared by the [DASHing-2018] sessions and chapter 6's ([`progressive`]).
pub(crate) fn build_path<S: TransportApp, C: TransportApp>(
    transport: &GenericTransport,
    cc: CcAlgorithm,
    phases: &[Phase],
    queue_bytes: Option<usize>,
    seed: u64,
    server_app: S,
    client_app: C,
) -> Result<(Simulator, NodeId, NodeId), String> {
    let first = *phases.first().ok_or("the path needs at least one phase")?;
    let queue = queue_for(phases, queue_bytes);
    let mut sim = SimBuilder::new().seed(seed).build();
    let server_addr = SocketAddr::new(IpAddr::V4(SERVER), SERVER_PORT);
    let client_addr = SocketAddr::new(IpAddr::V4(CLIENT), CLIENT_PORT);
    let (server_t, client_t) =
        endpoints(transport, cc, server_addr, client_addr, sim.derive_seed(1))?;
    let server = sim.add_node(TransportHost::new(server_addr.ip(), server_t, server_app));
    let client = sim.add_node(TransportHost::new(client_addr.ip(), client_t, client_app));
    let (down, up) = DashScenario::link(&first, queue);
    let (down_id, up_id) = sim
        .connect(server, 0, client, 0, down, up)
        .map_err(|e| e.to_string())?;
    for p in &phases[1..] {
        let (d, u) = DashScenario::link(p, queue);
        let at = Instant::ZERO + p.at;
        sim.schedule_link_config(down_id, at, d)
            .map_err(|e| e.to_string())?;
        sim.schedule_link_config(up_id, at, u)
            .map_err(|e| e.to_string())?;
    }
    Ok((sim, server, client))
}

/// One end's transport.
pub type Endpoint = Box<dyn MessageTransport>;

/// The server's and the client's transports of `transport` at
/// `server_addr` and `client_addr`, `cc` at both ends: the deployment's
/// sender side serves, its receiver side is the client (over QUIC: the
/// server and client of the connection, `cc` as quinn's controller).
/// `seed` seeds the client, `seed ^ 0x5eed` the server (the simulator
/// passes its first derived seed; the lab the same, so both start alike).
pub fn endpoints(
    transport: &GenericTransport,
    cc: CcAlgorithm,
    server_addr: SocketAddr,
    client_addr: SocketAddr,
    seed: u64,
) -> Result<(Endpoint, Endpoint), String> {
    let id = match transport {
        GenericTransport::Quic(_) => Some(QuicIdentity::generate()?),
        _ => None,
    };
    let server = endpoint(
        transport,
        cc,
        Role::Server,
        server_addr,
        id.as_ref(),
        seed ^ 0x5eed,
    )?;
    let client = endpoint(
        transport,
        cc,
        Role::Client {
            remote: server_addr,
        },
        client_addr,
        id.as_ref(),
        seed,
    )?;
    Ok((server, client))
}

/// One end of [`endpoints`], for a server and a client in different
/// processes (`hollywood dash-server`, `hollywood dash-gateway`): the
/// server (`Role::Server`, the deployment's sender side) or the client
/// (its receiver side) at `local`. QUIC needs `identity` (the server's
/// certificate and key; a client checks the server against it unless it
/// was made [`QuicIdentity::unverified`]).
pub fn endpoint(
    transport: &GenericTransport,
    cc: CcAlgorithm,
    role: Role,
    local: SocketAddr,
    identity: Option<&QuicIdentity>,
    seed: u64,
) -> Result<Endpoint, String> {
    let base = Config {
        cc,
        ..Config::default()
    };
    let name = transport.name();
    let server = matches!(role, Role::Server);
    Ok(match transport.with_cc(cc) {
        GenericTransport::Tcp(t) => {
            let config = if server {
                t.sender_config(&base)
            } else {
                t.receiver_config(&base)
            };
            Box::new(TcpTransport::new(name, config, role, local, seed))
        }
        GenericTransport::Quic(q) => {
            let id = identity.ok_or("QUIC needs the server's identity")?;
            Box::new(QuicTransport::new(q, role, local, id, seed)?)
        }
        GenericTransport::Udp => {
            return Err(format!(
            "{name}: HTTP needs a reliable transport (TCP, TCP Hollywood or a QUIC stream mapping)"
        ))
        }
    })
}

/// A QUIC mapping for HTTP: `quic-ss` (one stream, in order, as HTTP/1.1
/// over TCP), `quic-gop` (a stream per response, as HTTP/3) or `quic-pps`
/// (a stream per message, the closest to TCP Hollywood's unordered
/// delivery); older streams are sent first (HTTP/3's default order), so a
/// pipelined response never overtakes the one before it. `None` for
/// other names (the datagram mapping is unreliable; QUICsilver drops
/// messages by lifetime, and DASH's are reliable).
pub fn dash_quic(name: &str) -> Option<GenericTransport> {
    use hollywood_transport::QuicKind;
    let kind = QuicKind::parse(name)?;
    if !matches!(
        kind,
        QuicKind::SingleStream | QuicKind::PerGroup | QuicKind::PerMessage
    ) {
        return None;
    }
    let mut q = hollywood_transport::quic::QuicConfig::of(kind);
    q.oldest_first = true;
    Some(GenericTransport::Quic(q))
}

/// Offer messages to `t` until it would block: first the one `held`
/// back last time, then what `next` yields; a message refused with
/// `WouldBlock` goes back into `held` (to go first after `Writable`).
/// Any other refusal is returned.
pub(crate) fn pump(
    now: Instant,
    t: &mut dyn hollywood_transport::MessageTransport,
    held: &mut Option<hollywood_transport::OutMessage>,
    mut next: impl FnMut() -> Option<hollywood_transport::OutMessage>,
) -> Result<(), hollywood_transport::SendError> {
    use hollywood_transport::SendError;
    while let Some(m) = held.take().or_else(&mut next) {
        match t.send_ref(now, &m) {
            Ok(()) => {}
            Err(SendError::WouldBlock) => {
                *held = Some(m);
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Segments a TCP transport retransmitted; over QUIC the packets it
/// declared lost (their frames are sent again in new packets).
pub fn retransmitted(t: &dyn MessageTransport) -> u64 {
    t.as_any()
        .downcast_ref::<TcpTransport>()
        .map_or(t.stats().packets_lost, |t| {
            t.details().retransmitted_segments
        })
}

#[cfg(test)]
mod tests;
