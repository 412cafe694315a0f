//! Every transport behind the message-transport interface, by name (TCP
//! and the TCP Hollywood deployments, the QUIC mappings and QUICsilver,
//! UDP), and the hosts that run the message stream ([`crate::stream`]) over
//! one of them. What a run measured is read by the oracle
//! ([`crate::scenario::oracle`]).

use crate::stream::{MessageReceiver, MessageSender, SenderConfig, Transport};
use hollywood_sim::TransportHost;
use hollywood_tcp::Config;
use hollywood_transport::quic::{QuicConfig, QuicIdentity, QuicTransport, Role};
use hollywood_transport::udp::UdpTransport;
use hollywood_transport::{MessageTransport, TransportKind, TransportStats};
use std::net::SocketAddr;
use std::time::Duration;

/// A transport behind the interface.
pub type BoxedTransport = Box<dyn MessageTransport>;

/// A transport behind the interface, configured: the choice is a
/// [`TransportKind`] (its names, parsing and serde live there, once); this
/// adds what running it needs (a QUIC variant's [`QuicConfig`]).
#[derive(Debug, Clone)]
pub enum GenericTransport {
    /// Our TCP engine: standard TCP or a TCP Hollywood deployment.
    Tcp(Transport),
    /// QUIC with a mapping (and QUICsilver).
    Quic(QuicConfig),
    /// UDP, one datagram per message, sent once.
    Udp,
}

impl From<TransportKind> for GenericTransport {
    /// The transport at its defaults.
    fn from(kind: TransportKind) -> Self {
        match kind {
            TransportKind::Tcp(t) => GenericTransport::Tcp(t),
            TransportKind::Quic(q) => GenericTransport::Quic(QuicConfig::of(q)),
            TransportKind::Udp => GenericTransport::Udp,
        }
    }
}

impl From<Transport> for GenericTransport {
    /// A TCP deployment.
    fn from(t: Transport) -> Self {
        GenericTransport::Tcp(t)
    }
}

impl GenericTransport {
    /// Parse a transport name ([`TransportKind::parse`]), at its defaults.
    pub fn parse(s: &str) -> Option<GenericTransport> {
        TransportKind::parse(s).ok().map(GenericTransport::from)
    }

    /// Which transport this is.
    pub fn kind(&self) -> TransportKind {
        match self {
            GenericTransport::Tcp(t) => TransportKind::Tcp(*t),
            GenericTransport::Quic(c) => TransportKind::Quic(c.kind()),
            GenericTransport::Udp => TransportKind::Udp,
        }
    }

    /// The name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// This transport with `cc` as a QUIC transport's controller (quinn's:
    /// BBR is its BBRv1); a TCP deployment takes its controller from the
    /// scenario's base configuration ([`crate::MessagesScenario::base`]).
    pub fn with_cc(&self, cc: hollywood_tcp::CcAlgorithm) -> Self {
        use hollywood_tcp::CcAlgorithm;
        use hollywood_transport::quic::QuicCc;
        let mut g = self.clone();
        if let GenericTransport::Quic(q) = &mut g {
            q.cc = match cc {
                CcAlgorithm::NewReno => QuicCc::NewReno,
                CcAlgorithm::Cubic => QuicCc::Cubic,
                CcAlgorithm::Bbr => QuicCc::Bbr,
            };
        }
        g
    }

    /// The TCP deployment, if this is one.
    pub fn tcp(&self) -> Option<Transport> {
        match self {
            GenericTransport::Tcp(t) => Some(*t),
            _ => None,
        }
    }

    /// Build the two ends: `(sender, receiver)`; a TCP deployment runs
    /// the engine with `base` and its switches on top.
    pub fn endpoints(
        &self,
        base: &Config,
        sender: SocketAddr,
        receiver: SocketAddr,
        seed: u64,
    ) -> Result<(BoxedTransport, BoxedTransport), String> {
        Ok(match self {
            GenericTransport::Tcp(t) => {
                let (a, b) = t.endpoints(base, sender, receiver, seed);
                (Box::new(a), Box::new(b))
            }
            GenericTransport::Quic(cfg) => {
                let id = QuicIdentity::generate()?;
                let a = QuicTransport::new(
                    cfg.clone(),
                    Role::Client { remote: receiver },
                    sender,
                    &id,
                    seed,
                )?;
                let b = QuicTransport::new(cfg.clone(), Role::Server, receiver, &id, seed ^ 1)?;
                (Box::new(a), Box::new(b))
            }
            GenericTransport::Udp => (
                Box::new(UdpTransport::new(sender, Some(receiver))),
                Box::new(UdpTransport::new(receiver, None)),
            ),
        })
    }
}

/// Sender and receiver transport counters after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenericStats {
    /// The sender's transport.
    pub sender: TransportStats,
    /// The receiver's transport.
    pub receiver: TransportStats,
}

/// Host type aliases for the scenario.
pub type SenderHost = TransportHost<MessageSender>;
/// Host type aliases for the scenario.
pub type ReceiverHost = TransportHost<MessageReceiver>;

/// The scenario's sender and receiver applications.
pub fn apps(sc: &crate::MessagesScenario) -> (MessageSender, MessageReceiver) {
    let sender = MessageSender::new(SenderConfig {
        count: sc.count,
        size: sc.size,
        interval: sc.interval,
        lifetime: sc.lifetime,
        seed: sc.seed,
        linger: sc.rtt * 4 + Duration::from_secs(1),
        group: sc.group,
        schedule: sc.schedule.clone(),
        priorities: sc.priorities.clone(),
    });
    let receiver =
        MessageReceiver::new(sc.count, sc.size, sc.seed).with_schedule(sc.schedule.clone());
    (sender, receiver)
}
