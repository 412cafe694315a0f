//! A simulated host with several interfaces, one address on each, running
//! one [`MessageTransport`] (typically a `hollywood_transport::group::
//! GroupTransport` whose paths are bound to those addresses) and an
//! application: the multipath topology of docs/MULTIPATH.md.

use crate::node::Node;
use hollywood_tcp::Instant;
use hollywood_transport::host::Hosted;
use hollywood_transport::{MessageTransport, TransportApp};
use std::net::IpAddr;

/// A [`Node`] whose interface *i* has address `addrs[i]`. A packet
/// addressed to any of them is the transport's, whatever interface it came
/// in on; a packet the transport sends leaves by the interface of its
/// source address (interface 0 for an unknown source).
pub struct MultiHomedHost<A: TransportApp> {
    addrs: Vec<IpAddr>,
    hosted: Hosted<A>,
    not_for_us: u64,
}

impl<A: TransportApp> std::fmt::Debug for MultiHomedHost<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiHomedHost")
            .field("addrs", &self.addrs)
            .field("transport", &self.hosted.transport().name())
            .finish_non_exhaustive()
    }
}

impl<A: TransportApp> MultiHomedHost<A> {
    /// A host with `addrs[i]` on interface `i`.
    pub fn new(
        addrs: Vec<IpAddr>,
        transport: Box<dyn MessageTransport>,
        app: A,
    ) -> MultiHomedHost<A> {
        MultiHomedHost {
            addrs,
            hosted: Hosted::new(transport, app),
            not_for_us: 0,
        }
    }

    /// The application.
    pub fn app(&self) -> &A {
        self.hosted.app()
    }

    /// The transport.
    pub fn transport(&self) -> &dyn MessageTransport {
        self.hosted.transport()
    }

    /// Packets dropped because they were addressed to none of the host's
    /// addresses.
    pub fn packets_not_for_us(&self) -> u64 {
        self.not_for_us
    }
}

impl<A: TransportApp> Node for MultiHomedHost<A> {
    fn handle_packet(&mut self, now: Instant, _iface: usize, packet: Vec<u8>) {
        self.hosted.start(now);
        match crate::router::ip_destination(&packet) {
            Some(d) if self.addrs.contains(&d) => self.hosted.handle_packet(now, &packet),
            _ => self.not_for_us += 1,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.hosted.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        let p = self.hosted.poll_transmit(now)?;
        let src = crate::router::ip_source(&p);
        let iface = self.addrs.iter().position(|a| Some(*a) == src).unwrap_or(0);
        Some((iface, p))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.hosted.poll_timeout()
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
