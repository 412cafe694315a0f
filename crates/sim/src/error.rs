//! Simulator errors.

use crate::link::LinkId;
use crate::node::NodeId;
use hollywood_tcp::Instant;

/// Errors from building or running a simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// No node with this id.
    UnknownNode(NodeId),
    /// No link with this id.
    UnknownLink(LinkId),
    /// The node's interface already has an outgoing link.
    InterfaceInUse {
        /// The node.
        node: NodeId,
        /// The interface.
        iface: usize,
    },
    /// A probability parameter is outside `0..=1` (or NaN).
    InvalidProbability {
        /// Which parameter.
        name: &'static str,
        /// The offending value.
        value: f64,
    },
    /// A scheduled time lies before the current virtual time.
    InThePast {
        /// The requested time.
        at: Instant,
        /// The current time.
        now: Instant,
    },
    /// The run processed [`SimConfig::max_events`](crate::SimConfig::max_events)
    /// events.
    EventLimit(u64),
    /// A node's timer fired more than
    /// [`SimConfig::max_timer_spins`](crate::SimConfig::max_timer_spins) times
    /// at one instant: the node keeps asking to be woken "now" (a node bug).
    TimerLivelock {
        /// The node.
        node: NodeId,
        /// The instant at which it spun.
        at: Instant,
    },
    /// A node produced more than
    /// [`SimConfig::max_transmits_per_wake`](crate::SimConfig::max_transmits_per_wake)
    /// packets from one input (a node bug).
    TransmitLivelock {
        /// The node.
        node: NodeId,
        /// The instant.
        at: Instant,
    },
}

impl core::fmt::Display for SimError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SimError::UnknownNode(n) => write!(f, "unknown node {}", n.0),
            SimError::UnknownLink(l) => write!(f, "unknown link {}", l.0),
            SimError::InterfaceInUse { node, iface } => {
                write!(
                    f,
                    "node {} interface {iface} already has an outgoing link",
                    node.0
                )
            }
            SimError::InvalidProbability { name, value } => {
                write!(f, "probability {name} = {value} is outside 0..=1")
            }
            SimError::InThePast { at, now } => write!(
                f,
                "time {} ns is before the current time {} ns",
                at.as_nanos(),
                now.as_nanos()
            ),
            SimError::EventLimit(n) => write!(f, "event limit of {n} events reached"),
            SimError::TimerLivelock { node, at } => write!(
                f,
                "node {} keeps re-arming its timer at {} ns without progress",
                node.0,
                at.as_nanos()
            ),
            SimError::TransmitLivelock { node, at } => write!(
                f,
                "node {} produced too many packets at {} ns",
                node.0,
                at.as_nanos()
            ),
        }
    }
}

impl std::error::Error for SimError {}
