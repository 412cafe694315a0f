//! What an application asks for: selection properties with preferences
//! (RFC 9622 §6.2), security (§6.3) and the properties of one message
//! (§9.1.3).

use hollywood_transport::secure::Identity;
use std::time::Duration;

/// How much a selection property matters (RFC 9622 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Preference {
    /// Only protocols that provide it.
    Require,
    /// Protocols that provide it, if any.
    Prefer,
    /// No preference.
    #[default]
    NoPreference,
    /// Protocols that do not provide it, if any.
    Avoid,
    /// Only protocols that do not provide it.
    Prohibit,
}

/// The protocols a connection may run over, in the order they are raced
/// (RFC 9623 §4.1: the preferred first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// QUIC (quinn-proto) over UDP, a stream per message with QUICsilver's
    /// deadline-aware partial reliability ([QUICsilver-2019]), or one ordered stream
    /// when order is required.
    Quic,
    /// TCP Hollywood on our engine over a TUN device (thesis ch. 4): out of
    /// order delivery, inconsistent retransmissions, a TCP wire image.
    TcpHollywood,
    /// The Hollywood message layer over the kernel's TCP (thesis §4.4,
    /// partial deployment): messages and lifetimes at the sender's queue,
    /// in-order delivery. Works wherever TCP does.
    KernelTcp,
}

impl Protocol {
    /// Every protocol, in racing order.
    pub const ALL: [Protocol; 3] = [Protocol::Quic, Protocol::TcpHollywood, Protocol::KernelTcp];

    /// Short name (`quic`, `hollywood`, `kernel`), as `hollywood transmit`
    /// takes it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Quic => "quic",
            Protocol::TcpHollywood => "hollywood",
            Protocol::KernelTcp => "kernel",
        }
    }

    /// The protocol of a short name.
    pub fn parse(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Whether it keeps every message reliable unless told otherwise
    /// (all three do) and whether it can give up on a message sent with a
    /// lifetime once it is on the wire (`perMsgReliability`).
    fn per_message_reliability(self) -> bool {
        // The kernel cannot take back bytes it holds (RFC 9623 §5.1.1).
        self != Protocol::KernelTcp
    }

    /// Whether it can carry FEC on the message layer (docs/FEC.md): QUIC
    /// here (its sans-IO transport runs under the layer); the engine's
    /// and the kernel's TCP connections are byte streams behind a socket
    /// API the layer does not wrap.
    fn fec(self) -> bool {
        self == Protocol::Quic
    }

    fn multistreaming(self) -> bool {
        // Sub-streams without head-of-line blocking between them: QUIC's
        // streams and the engine's out-of-order delivery (thesis §4.3).
        self != Protocol::KernelTcp
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A selection property: its name, the preference, and which protocols
/// have it.
type Check = (&'static str, Preference, fn(Protocol) -> bool);

/// Selection properties (RFC 9622 §6.2) that tell the candidates apart
/// here, with the RFC's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportProperties {
    /// `reliability` (default Require). Every candidate is reliable;
    /// Prohibit or Avoid leaves none or changes nothing.
    pub reliability: Preference,
    /// `preserveMsgBoundaries` (default NoPreference). Every candidate
    /// preserves them.
    pub preserve_msg_boundaries: Preference,
    /// `perMsgReliability` (default NoPreference): a message may be given
    /// up once on the wire when its lifetime ends (QUIC, TCP Hollywood;
    /// not the kernel's TCP).
    pub per_msg_reliability: Preference,
    /// `preserveOrder` (default Require): messages are delivered in the
    /// order sent. Require makes every message ordered (`msgOrdered`'s
    /// default) and QUIC use one stream; anything else lets messages
    /// overtake each other (thesis §4.3).
    pub preserve_order: Preference,
    /// `multistreaming` (default Prefer): independent sub-streams.
    pub multistreaming: Preference,
    /// `congestionControl` (default Require). Every candidate has it.
    pub congestion_control: Preference,
    /// `fec` (ours, not RFC 9622's; default NoPreference): forward error
    /// correction on the message layer (docs/FEC.md), repair messages
    /// over blocks of messages whose retransmission could not make their
    /// deadline. Require keeps only the candidates that carry it (QUIC),
    /// Prefer races them first; either turns it on where it can run. Both
    /// ends must ask for it: the layer's message ids are not negotiated.
    pub fec: Preference,
    /// With `fec`: repair bytes at most this percentage of the protected
    /// messages' bytes on the wire (default 25).
    pub fec_overhead_percent: u16,
}

impl Default for TransportProperties {
    fn default() -> Self {
        TransportProperties {
            reliability: Preference::Require,
            preserve_msg_boundaries: Preference::NoPreference,
            per_msg_reliability: Preference::NoPreference,
            preserve_order: Preference::Require,
            multistreaming: Preference::Prefer,
            congestion_control: Preference::Require,
            fec: Preference::NoPreference,
            fec_overhead_percent: 25,
        }
    }
}

impl TransportProperties {
    /// What live media asks for: messages that may overtake each other and
    /// expire (`preserveOrder` NoPreference, `perMsgReliability` Prefer).
    pub fn media() -> TransportProperties {
        TransportProperties {
            preserve_order: Preference::NoPreference,
            per_msg_reliability: Preference::Prefer,
            ..TransportProperties::default()
        }
    }

    /// The FEC layer's settings for a connection over `p` with these
    /// properties: `None` unless `fec` is Require or Prefer and `p`
    /// carries it.
    pub fn fec_config(&self, p: Protocol) -> Option<hollywood_fec::FecConfig> {
        let on = matches!(self.fec, Preference::Require | Preference::Prefer);
        (on && p.fec()).then(|| hollywood_fec::FecConfig {
            max_overhead: f64::from(self.fec_overhead_percent) / 100.0,
            ..hollywood_fec::FecConfig::default()
        })
    }

    /// The candidates `allowed` keeps, in racing order: Require and
    /// Prohibit remove protocols (RFC 9623 §4.1), then Prefer and Avoid
    /// reorder what is left (a stable sort by how many preferences each
    /// meets, Prefer counting for and Avoid against). Returns why the list
    /// is empty, if it is.
    pub fn candidates(&self, allowed: &[Protocol]) -> Result<Vec<Protocol>, String> {
        let checks: [Check; 7] = [
            ("reliability", self.reliability, |_| true),
            (
                "preserveMsgBoundaries",
                self.preserve_msg_boundaries,
                |_| true,
            ),
            (
                "perMsgReliability",
                self.per_msg_reliability,
                Protocol::per_message_reliability,
            ),
            // Every candidate can deliver in order (one ordered stream,
            // ordered sub-streams); none is forced to.
            ("preserveOrder", self.preserve_order, |_| true),
            (
                "multistreaming",
                self.multistreaming,
                Protocol::multistreaming,
            ),
            ("congestionControl", self.congestion_control, |_| true),
            ("fec", self.fec, Protocol::fec),
        ];
        let mut out: Vec<Protocol> = Vec::new();
        let mut why = Vec::new();
        'p: for &p in allowed {
            for (name, pref, has) in checks {
                match pref {
                    Preference::Require if !has(p) => {
                        why.push(format!("{p}: {name} required"));
                        continue 'p;
                    }
                    Preference::Prohibit if has(p) && name != "preserveOrder" => {
                        why.push(format!("{p}: {name} prohibited"));
                        continue 'p;
                    }
                    _ => {}
                }
            }
            out.push(p);
        }
        if out.is_empty() {
            return Err(if why.is_empty() {
                "no candidate protocol".to_string()
            } else {
                format!("no candidate protocol ({})", why.join("; "))
            });
        }
        let score = |p: Protocol| -> i32 {
            checks
                .iter()
                .map(|(_, pref, has)| match (pref, has(p)) {
                    (Preference::Prefer, true) | (Preference::Avoid, false) => 1,
                    (Preference::Prefer, false) | (Preference::Avoid, true) => -1,
                    _ => 0,
                })
                .sum()
        };
        out.sort_by_key(|&p| -score(p));
        Ok(out)
    }
}

/// Security (RFC 9622 §6.3).
#[derive(Debug, Clone, Default)]
pub enum SecurityParameters {
    /// No security protocol over TCP. QUIC cannot run without TLS: its
    /// connections are encrypted with a throw-away certificate the client
    /// does not check (so not authenticated).
    #[default]
    Disabled,
    /// TLS 1.3 on every candidate with this certificate: a server presents
    /// it, a client trusts only it (pinned; docs/SECURITY.md). Over TCP
    /// the handshake runs on sub-stream 0xFFFF and every message is sealed.
    Pinned(Identity),
}

impl SecurityParameters {
    /// TLS with a pinned certificate.
    pub fn pinned(identity: Identity) -> SecurityParameters {
        SecurityParameters::Pinned(identity)
    }
}

/// The properties of one message (RFC 9622 §9.1.3), plus the Hollywood
/// extensions of thesis Table 7.2.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageContext {
    /// `msgLifetime`: how long after `send` the message is still useful.
    /// It expires if still queued then; with per-message reliability the
    /// protocol also gives up on it on the wire (thesis §4.2). `None`: no
    /// limit.
    pub lifetime: Option<Duration>,
    /// `msgPriority`: a lower number is a higher priority (RFC 9622
    /// §9.1.3.2; default 100). Messages waiting in the connection's send
    /// queue are handed to the protocol most urgent first (then in order of
    /// `send`); QUIC schedules streams by it, TCP Hollywood's engine gives
    /// the next sequence numbers to the most urgent message in its message
    /// queue, and kernel TCP keeps little unsent (`TCP_NOTSENT_LOWAT`) so
    /// the choice stays in the send queue. Ordered messages of a sub-stream
    /// and a message's dependency keep going first.
    pub priority: Option<u32>,
    /// `msgOrdered`: deliver after the previous ordered message of the
    /// sub-stream. `None` takes the connection's `preserveOrder`
    /// (Require: ordered).
    pub ordered: Option<bool>,
    /// `msgReliable`: `Some(false)` lets the protocol give up on the
    /// message at its lifetime (needs a lifetime and a connection with
    /// per-message reliability). `None`: reliable unless it has a
    /// lifetime and the connection has per-message reliability.
    pub reliable: Option<bool>,
    /// `safelyReplayable`: may be sent in 0-RTT data. Recorded; no
    /// candidate sends 0-RTT data, so it changes nothing.
    pub safely_replayable: bool,
    /// `final`: the last message; the sending direction is closed after it.
    pub final_message: bool,
    /// Hollywood: the sub-stream (thesis §4.3; 0 by default).
    pub substream: u16,
    /// Hollywood: the earlier message this one needs (thesis Table 7.2),
    /// by the [`MessageRef`](crate::MessageRef) `send` returned for it.
    /// Dependencies are non-decreasing per sub-stream (thesis §4.2).
    pub depends_on: Option<crate::MessageRef>,
}

impl MessageContext {
    /// A message with `lifetime`.
    pub fn lifetime(lifetime: Duration) -> MessageContext {
        MessageContext {
            lifetime: Some(lifetime),
            ..MessageContext::default()
        }
    }

    /// The same, on sub-stream `substream`.
    #[must_use]
    pub fn substream(mut self, substream: u16) -> MessageContext {
        self.substream = substream;
        self
    }

    /// The same, depending on `on`.
    #[must_use]
    pub fn depends_on(mut self, on: crate::MessageRef) -> MessageContext {
        self.depends_on = Some(on);
        self
    }

    /// The same, ordered or not.
    #[must_use]
    pub fn ordered(mut self, ordered: bool) -> MessageContext {
        self.ordered = Some(ordered);
        self
    }

    /// The same, with `msgPriority` (lower is more urgent).
    #[must_use]
    pub fn priority(mut self, priority: u32) -> MessageContext {
        self.priority = Some(priority);
        self
    }

    /// The same, as the final message.
    #[must_use]
    pub fn final_message(mut self) -> MessageContext {
        self.final_message = true;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_keep_every_candidate_in_racing_order() {
        let c = TransportProperties::default()
            .candidates(&Protocol::ALL)
            .unwrap();
        // multistreaming Prefer puts the kernel last anyway.
        assert_eq!(c, Protocol::ALL);
    }

    #[test]
    fn require_and_prohibit_filter_prefer_and_avoid_reorder() {
        let mut p = TransportProperties::media();
        p.per_msg_reliability = Preference::Require;
        assert_eq!(
            p.candidates(&Protocol::ALL).unwrap(),
            vec![Protocol::Quic, Protocol::TcpHollywood]
        );
        let p = TransportProperties {
            multistreaming: Preference::Avoid,
            ..TransportProperties::default()
        };
        assert_eq!(
            p.candidates(&Protocol::ALL).unwrap()[0],
            Protocol::KernelTcp
        );
        let p = TransportProperties {
            reliability: Preference::Prohibit,
            ..TransportProperties::default()
        };
        let e = p.candidates(&Protocol::ALL).unwrap_err();
        assert!(e.contains("reliability prohibited"), "{e}");
        let p = TransportProperties {
            multistreaming: Preference::Require,
            ..TransportProperties::default()
        };
        assert_eq!(
            p.candidates(&[Protocol::KernelTcp]).unwrap_err(),
            "no candidate protocol (kernel: multistreaming required)"
        );
    }

    #[test]
    fn protocol_names_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::parse(p.name()), Some(p));
        }
        assert_eq!(Protocol::parse("sctp"), None);
    }

    #[test]
    fn fec_keeps_or_prefers_the_candidates_that_carry_it() {
        let mut p = TransportProperties::media();
        assert_eq!(p.fec_config(Protocol::Quic), None);
        p.fec = Preference::Require;
        assert_eq!(p.candidates(&Protocol::ALL).unwrap(), vec![Protocol::Quic]);
        assert_eq!(
            p.candidates(&[Protocol::TcpHollywood]).unwrap_err(),
            "no candidate protocol (hollywood: fec required)"
        );
        p.fec_overhead_percent = 30;
        let c = p.fec_config(Protocol::Quic).expect("FEC over QUIC");
        assert!((c.max_overhead - 0.30).abs() < 1e-12);
        assert!(c.validate().is_ok());
        assert_eq!(p.fec_config(Protocol::TcpHollywood), None);
        p.fec = Preference::Prefer;
        let order = p
            .candidates(&[Protocol::TcpHollywood, Protocol::Quic])
            .unwrap();
        assert_eq!(order[0], Protocol::Quic);
        assert!(p.fec_config(Protocol::Quic).is_some());
        p.fec = Preference::Avoid;
        assert_eq!(p.fec_config(Protocol::Quic), None);
    }
}
