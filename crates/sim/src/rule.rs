//! Packet rules: scripted verdicts for exact scenarios (after turmoil).
//!
//! A rule is a closure attached to one link. Every packet offered to the link
//! (duplicates made by the link excepted) is shown to **every** rule of the
//! link, in the order they were added; if any returns [`Verdict::Drop`] the
//! packet is dropped ([`DropReason::Rule`](crate::DropReason::Rule)),
//! otherwise the [`Verdict::Delay`]s add up to an extra hold applied on top of
//! the packet's normal arrival time (a held packet may be overtaken).

use crate::link::LinkId;
use hollywood_tcp::Instant;
use std::time::Duration;

/// What a rule decides for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let the packet through unchanged.
    Pass,
    /// Drop the packet.
    Drop,
    /// Deliver the packet this much later than it would otherwise arrive.
    Delay(Duration),
}

/// A packet as seen by a rule.
#[derive(Debug, Clone, Copy)]
pub struct PacketInfo<'a> {
    /// The link the packet was offered to.
    pub link: LinkId,
    /// 0-based count of packets offered to this link before this one.
    pub index: u64,
    /// Virtual time at which the packet was offered.
    pub time: Instant,
    /// The whole IP packet.
    pub packet: &'a [u8],
}

/// A boxed rule closure.
pub type Rule = Box<dyn FnMut(&PacketInfo<'_>) -> Verdict>;
