//! A transport and its application, driven together: the part of a host
//! that does not depend on where packets and time come from. The
//! simulator's `TransportHost` (virtual time) and the real-packet
//! `hollywood_io::udp::UdpHost` (OS clock, UDP socket) both wrap it.

use crate::{Instant, MessageTransport, TransportApp};

/// A [`MessageTransport`] with its [`TransportApp`].
pub struct Hosted<A: TransportApp> {
    transport: Box<dyn MessageTransport>,
    app: A,
    started: bool,
}

impl<A: TransportApp> std::fmt::Debug for Hosted<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosted")
            .field("transport", &self.transport.name())
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl<A: TransportApp> Hosted<A> {
    /// Not started yet: the first call with a `now` starts both.
    pub fn new(transport: Box<dyn MessageTransport>, app: A) -> Hosted<A> {
        Hosted {
            transport,
            app,
            started: false,
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

    /// Whether [`Hosted::start`] ran.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Start the transport, then the application (once).
    pub fn start(&mut self, now: Instant) {
        if !self.started {
            self.started = true;
            self.transport.start(now);
            self.app.on_start(now, &mut *self.transport);
        }
    }

    /// A whole IP packet for the transport.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.start(now);
        self.transport.handle_packet(now, packet);
        self.pump(now);
    }

    /// Hand a packet buffer back to the transport once done with it
    /// ([`MessageTransport::recycle`]).
    pub fn recycle(&mut self, packet: Vec<u8>) {
        self.transport.recycle(packet);
    }

    /// Fire the transport's and the application's due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.start(now);
        if self.transport.poll_timeout().is_some_and(|t| t <= now) {
            self.transport.handle_timeout(now);
        }
        self.pump(now);
        if self.app.poll_timeout().is_some_and(|t| t <= now) {
            self.app.on_timeout(now, &mut *self.transport);
            self.pump(now);
        }
    }

    /// The next packet to send; hands pending events to the application
    /// first when there is none (what it sends in reply goes out now).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if let Some(p) = self.transport.poll_transmit(now) {
            return Some(p);
        }
        self.pump(now);
        self.transport.poll_transmit(now)
    }

    /// The earliest of the transport's and the application's timers (now,
    /// before the start).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.started {
            return Some(Instant::ZERO);
        }
        [self.transport.poll_timeout(), self.app.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    fn pump(&mut self, now: Instant) {
        while let Some(ev) = self.transport.poll_event() {
            self.app.on_event(now, &mut *self.transport, ev);
        }
    }
}
