//! A simulated host running any [`MessageTransport`] (QUIC, UDP, ...) and
//! an application written against it.

use crate::node::Node;
use hollywood_tcp::Instant;
use hollywood_transport::host::Hosted;
use hollywood_transport::MessageTransport;
pub use hollywood_transport::TransportApp;
use std::net::IpAddr;

/// A [`Node`] with one interface (0), one address, a transport and an app.
pub struct TransportHost<A: TransportApp> {
    addr: IpAddr,
    hosted: Hosted<A>,
    not_for_us: u64,
}

impl<A: TransportApp> std::fmt::Debug for TransportHost<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportHost")
            .field("addr", &self.addr)
            .field("transport", &self.hosted.transport().name())
            .finish_non_exhaustive()
    }
}

impl<A: TransportApp> TransportHost<A> {
    /// A host at `addr`.
    pub fn new(addr: IpAddr, transport: Box<dyn MessageTransport>, app: A) -> TransportHost<A> {
        TransportHost {
            addr,
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

    /// Packets dropped because they were not addressed to this host.
    pub fn packets_not_for_us(&self) -> u64 {
        self.not_for_us
    }
}

impl<A: TransportApp> Node for TransportHost<A> {
    fn handle_packet(&mut self, now: Instant, iface: usize, packet: Vec<u8>) {
        self.hosted.start(now);
        if iface != 0 || crate::router::ip_destination(&packet) != Some(self.addr) {
            self.not_for_us += 1;
            return;
        }
        self.hosted.handle_packet(now, &packet);
        // Its buffer carries one of our next packets.
        self.hosted.recycle(packet);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.hosted.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        self.hosted.poll_transmit(now).map(|p| (0, p))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.hosted.poll_timeout()
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
