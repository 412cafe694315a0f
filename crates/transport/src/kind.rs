//! Which message transport: the one choice every layer above names the same
//! way (command lines, plan files, JSON, reports).
//!
//! A [`TransportKind`] is only the choice. The configuration that goes with
//! it lives beside the transport: [`crate::tcp::Deployment`] *is* the TCP
//! choice (its engine switches follow from it), and
//! [`QuicConfig::of`](crate::quic::QuicConfig::of) builds a QUIC
//! configuration for a [`QuicKind`].

use crate::quic::Mapping;
use crate::tcp::Deployment;
use std::fmt;
use std::str::FromStr;

/// A QUIC variant: a stream mapping ([RTP-QUIC] §3), or QUICsilver's
/// deadline-aware partial reliability ([QUICsilver-2019] §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuicKind {
    /// `quic-ss`: one stream for every message (standard QUIC).
    SingleStream,
    /// `quic-gop`: a stream per group of pictures.
    PerGroup,
    /// `quic-fps`: a stream per frame.
    PerFrame,
    /// `quic-pps`: a stream per message (packet).
    PerMessage,
    /// `quic-dgram`: an RFC 9221 datagram per message.
    Datagram,
    /// `quicsilver`: a stream per message with deadline resets.
    Quicsilver,
}

impl QuicKind {
    /// Every variant, in the order experiments report them.
    pub const ALL: [QuicKind; 6] = [
        QuicKind::SingleStream,
        QuicKind::PerGroup,
        QuicKind::PerFrame,
        QuicKind::PerMessage,
        QuicKind::Datagram,
        QuicKind::Quicsilver,
    ];

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            QuicKind::SingleStream => "quic-ss",
            QuicKind::PerGroup => "quic-gop",
            QuicKind::PerFrame => "quic-fps",
            QuicKind::PerMessage => "quic-pps",
            QuicKind::Datagram => "quic-dgram",
            QuicKind::Quicsilver => "quicsilver",
        }
    }

    /// The stream mapping.
    pub fn mapping(self) -> Mapping {
        match self {
            QuicKind::SingleStream => Mapping::SingleStream,
            QuicKind::PerGroup => Mapping::PerGroup,
            QuicKind::PerFrame => Mapping::PerFrame,
            QuicKind::PerMessage | QuicKind::Quicsilver => Mapping::PerMessage,
            QuicKind::Datagram => Mapping::Datagram,
        }
    }

    /// Deadline-aware partial reliability.
    pub fn quicsilver(self) -> bool {
        self == QuicKind::Quicsilver
    }

    /// The variant of a mapping and QUICsilver flag (QUICsilver needs a
    /// stream per message; with another mapping the flag names nothing).
    pub fn of(mapping: Mapping, quicsilver: bool) -> QuicKind {
        match (mapping, quicsilver) {
            (Mapping::PerMessage, true) => QuicKind::Quicsilver,
            (Mapping::SingleStream, _) => QuicKind::SingleStream,
            (Mapping::PerGroup, _) => QuicKind::PerGroup,
            (Mapping::PerFrame, _) => QuicKind::PerFrame,
            (Mapping::PerMessage, false) => QuicKind::PerMessage,
            (Mapping::Datagram, _) => QuicKind::Datagram,
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<QuicKind> {
        QuicKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Which message transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransportKind {
    /// Our TCP engine: standard TCP, a TCP Hollywood deployment (thesis
    /// §4.4) or the deadline TCP of [TCP-video] §7.2.
    Tcp(Deployment),
    /// QUIC on quinn-proto.
    Quic(QuicKind),
    /// UDP: one datagram per message, sent once.
    Udp,
}

/// A name that is not a transport's; its message lists the names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTransport(pub String);

impl fmt::Display for UnknownTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown transport '{}': use {}",
            self.0,
            TransportKind::ALL.map(TransportKind::name).join(", ")
        )
    }
}

impl std::error::Error for UnknownTransport {}

impl From<UnknownTransport> for String {
    fn from(e: UnknownTransport) -> String {
        e.to_string()
    }
}

impl TransportKind {
    /// Every transport: the four TCP deployments, the deadline TCP, the
    /// QUIC variants and UDP, in the order experiments report them.
    pub const ALL: [TransportKind; 12] = [
        TransportKind::Tcp(Deployment::Tcp),
        TransportKind::Tcp(Deployment::HollywoodIr),
        TransportKind::Tcp(Deployment::HollywoodOoo),
        TransportKind::Tcp(Deployment::Hollywood),
        TransportKind::Tcp(Deployment::Deadline),
        TransportKind::Quic(QuicKind::SingleStream),
        TransportKind::Quic(QuicKind::PerGroup),
        TransportKind::Quic(QuicKind::PerFrame),
        TransportKind::Quic(QuicKind::PerMessage),
        TransportKind::Quic(QuicKind::Datagram),
        TransportKind::Quic(QuicKind::Quicsilver),
        TransportKind::Udp,
    ];

    /// The name, as command lines, plan files and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp(d) => d.name(),
            TransportKind::Quic(q) => q.name(),
            TransportKind::Udp => "udp",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Result<TransportKind, UnknownTransport> {
        TransportKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownTransport(s.to_string()))
    }

    /// The transport retransmits what the network lost (every TCP
    /// deployment and QUIC's streams; not UDP or QUIC datagrams).
    pub fn retransmits(self) -> bool {
        !matches!(
            self,
            TransportKind::Udp | TransportKind::Quic(QuicKind::Datagram)
        )
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TransportKind {
    type Err = UnknownTransport;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TransportKind::parse(s)
    }
}

impl From<Deployment> for TransportKind {
    fn from(d: Deployment) -> Self {
        TransportKind::Tcp(d)
    }
}

impl From<QuicKind> for TransportKind {
    fn from(q: QuicKind) -> Self {
        TransportKind::Quic(q)
    }
}

impl serde::Serialize for TransportKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for TransportKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        TransportKind::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_is_unique() {
        let mut names = std::collections::HashSet::new();
        for k in TransportKind::ALL {
            assert_eq!(TransportKind::parse(k.name()), Ok(k));
            assert_eq!(k.to_string().parse::<TransportKind>(), Ok(k));
            assert!(names.insert(k.name()), "{k} twice");
        }
        let e = TransportKind::parse("sctp").unwrap_err().to_string();
        assert!(e.contains("'sctp'") && e.contains("quicsilver"), "{e}");
    }

    #[test]
    fn quic_kinds_round_trip_through_mapping_and_flag() {
        for q in QuicKind::ALL {
            assert_eq!(QuicKind::of(q.mapping(), q.quicsilver()), q);
            assert_eq!(QuicKind::parse(q.name()), Some(q));
        }
    }

    #[test]
    fn serde_uses_the_name() {
        let k = TransportKind::Quic(QuicKind::PerMessage);
        let json = serde_json::to_string(&k).unwrap();
        assert_eq!(json, "\"quic-pps\"");
        assert_eq!(serde_json::from_str::<TransportKind>(&json).unwrap(), k);
        assert!(serde_json::from_str::<TransportKind>("\"nope\"").is_err());
    }

    #[test]
    fn only_udp_and_datagrams_do_not_retransmit() {
        let no: Vec<_> = TransportKind::ALL
            .into_iter()
            .filter(|k| !k.retransmits())
            .map(TransportKind::name)
            .collect();
        assert_eq!(no, ["quic-dgram", "udp"]);
    }
}
