//! A simulated host running any [`MessageTransport`] (QUIC, UDP, ...) and
//! an application written against it.

use crate::node::Node;
use hollywood_tcp::Instant;
use hollywood_transport::MessageTransport;
pub use hollywood_transport::TransportApp;
use std::net::IpAddr;

/// A [`Node`] with one interface (0), one address, a transport and an app.
pub struct TransportHost<A: TransportApp> {
    addr: IpAddr,
    transport: Box<dyn MessageTransport>,
    app: A,
    started: bool,
    not_for_us: u64,
}

impl<A: TransportApp> std::fmt::Debug for TransportHost<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportHost")
            .field("addr", &self.addr)
            .field("transport", &self.transport.name())
            .finish_non_exhaustive()
    }
}

impl<A: TransportApp> TransportHost<A> {
    /// A host at `addr`.
    pub fn new(addr: IpAddr, transport: Box<dyn MessageTransport>, app: A) -> TransportHost<A> {
        TransportHost {
            addr,
            transport,
            app,
            started: false,
            not_for_us: 0,
        }
    }

    /// The application.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The transport.
    pub fn transport(&self) -> &dyn MessageTransport {
        &*self.transport
    }

    /// Packets dropped because they were not addressed to this host.
    pub fn packets_not_for_us(&self) -> u64 {
        self.not_for_us
    }

    fn ensure_started(&mut self, now: Instant) {
        if !self.started {
            self.started = true;
            self.transport.start(now);
            self.app.on_start(now, &mut *self.transport);
        }
    }

    fn pump(&mut self, now: Instant) {
        while let Some(ev) = self.transport.poll_event() {
            self.app.on_event(now, &mut *self.transport, ev);
        }
    }
}

impl<A: TransportApp> Node for TransportHost<A> {
    fn handle_packet(&mut self, now: Instant, iface: usize, packet: Vec<u8>) {
        self.ensure_started(now);
        if iface != 0 || crate::router::ip_destination(&packet) != Some(self.addr) {
            self.not_for_us += 1;
            return;
        }
        self.transport.handle_packet(now, &packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.ensure_started(now);
        if self.transport.poll_timeout().is_some_and(|t| t <= now) {
            self.transport.handle_timeout(now);
        }
        self.pump(now);
        if self.app.poll_timeout().is_some_and(|t| t <= now) {
            self.app.on_timeout(now, &mut *self.transport);
            self.pump(now);
        }
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        let p = match self.transport.poll_transmit(now) {
            Some(p) => p,
            None => {
                self.pump(now);
                self.transport.poll_transmit(now)?
            }
        };
        Some((0, p))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.started {
            return Some(Instant::ZERO);
        }
        match (self.transport.poll_timeout(), self.app.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
