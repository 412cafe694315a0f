//! The node contract: anything attached to the simulated network (hosts,
//! routers, middleboxes) implements [`Node`].

use hollywood_tcp::Instant;

/// Identifies a node within one [`Simulator`](crate::Simulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// A sans-IO participant in the simulation.
///
/// After delivering any input (`handle_packet`, `handle_timeout`, or a wake-up
/// after [`Simulator::node_mut`](crate::Simulator::node_mut)), the simulator
/// calls `poll_transmit` until it returns `None`, then reads `poll_timeout`
/// and (re)arms the node's single timer. Packets are whole IP packets.
pub trait Node {
    /// A packet (whole IP packet) arrived on interface `iface`.
    fn handle_packet(&mut self, now: Instant, iface: usize, packet: Vec<u8>);
    /// The node's timer (as last reported by `poll_timeout`) fired. May be
    /// called early or spuriously; must be idempotent.
    fn handle_timeout(&mut self, now: Instant);
    /// Next packet to send, with its egress interface.
    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)>;
    /// Next wake-up, if any. A time in the past fires at the current time.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Downcast support so tests and apps can inspect nodes after a run.
    fn as_any(&mut self) -> &mut dyn std::any::Any;
}
