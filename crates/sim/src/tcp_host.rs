//! A simulated host: one [`Endpoint`] (the host's TCP) driven by an [`App`].

use crate::node::Node;
use hollywood_tcp::{Config, Endpoint, EndpointEvent, Instant};
use std::net::IpAddr;

/// Application logic running on a [`TcpHost`].
///
/// The host calls the app after every input to the engine, so the app can
/// read and write at once; then the host drains the endpoint's output.
pub trait App: 'static {
    /// Called once, at the first wake-up of the host (the time it was added
    /// to the simulator): listen or connect here.
    fn on_start(&mut self, now: Instant, ep: &mut Endpoint);
    /// An endpoint event (accepted connection, readable, writable, closed...).
    fn on_event(&mut self, now: Instant, ep: &mut Endpoint, ev: EndpointEvent);
    /// The app's own timer (see [`App::poll_timeout`]) is due. May be called
    /// early or spuriously.
    fn on_timeout(&mut self, _now: Instant, _ep: &mut Endpoint) {}
    /// The app's next wake-up, if any (default: none).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

/// Host counters (the engine's own are in [`Endpoint::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Packets handed to the endpoint.
    pub packets_in: u64,
    /// Packets sent.
    pub packets_out: u64,
    /// Packets dropped because they arrived on an interface other than 0,
    /// were not IP, or were not addressed to this host.
    pub packets_not_for_us: u64,
    /// Application events delivered.
    pub app_events: u64,
}

/// A [`Node`] running a TCP [`Endpoint`] and an application `A`, with one
/// interface (0) and one IP address.
#[derive(Debug)]
pub struct TcpHost<A: App> {
    addr: IpAddr,
    endpoint: Endpoint,
    app: A,
    started: bool,
    stats: HostStats,
}

impl<A: App> TcpHost<A> {
    /// A host with address `addr` whose endpoint uses `config` and `seed`
    /// (ISN secret and ephemeral ports; derive it from the simulation seed,
    /// e.g. [`Simulator::derive_seed`](crate::Simulator::derive_seed), for
    /// seed-dependent runs).
    #[must_use]
    pub fn new(addr: IpAddr, config: Config, seed: u64, app: A) -> TcpHost<A> {
        TcpHost {
            addr,
            endpoint: Endpoint::new(config, seed),
            app,
            started: false,
            stats: HostStats::default(),
        }
    }

    /// The host's IP address.
    #[must_use]
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The TCP endpoint.
    #[must_use]
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The TCP endpoint, mutably (for commands issued from outside the app;
    /// reach the host through [`Simulator::node_mut`](crate::Simulator::node_mut)
    /// so the output is drained).
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// The application.
    #[must_use]
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application, mutably.
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    /// Host counters.
    #[must_use]
    pub fn stats(&self) -> HostStats {
        self.stats
    }

    fn ensure_started(&mut self, now: Instant) {
        if !self.started {
            self.started = true;
            self.app.on_start(now, &mut self.endpoint);
        }
    }

    /// Hand every pending endpoint event to the app.
    fn pump(&mut self, now: Instant) {
        while let Some(ev) = self.endpoint.poll_event() {
            self.stats.app_events += 1;
            self.app.on_event(now, &mut self.endpoint, ev);
        }
    }
}

impl<A: App> Node for TcpHost<A> {
    fn handle_packet(&mut self, now: Instant, iface: usize, packet: Vec<u8>) {
        self.ensure_started(now);
        if iface != 0 || crate::router::ip_destination(&packet) != Some(self.addr) {
            self.stats.packets_not_for_us += 1;
            return;
        }
        self.stats.packets_in += 1;
        self.endpoint.handle_packet(now, &packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.ensure_started(now);
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        self.pump(now);
        if self.app.poll_timeout().is_some_and(|t| t <= now) {
            self.app.on_timeout(now, &mut self.endpoint);
            self.pump(now);
        }
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        let p = match self.endpoint.poll_transmit(now) {
            Some(p) => p,
            None => {
                // Events may appear once output was generated (e.g. a
                // connection that finished closing); the app may answer
                // them with more output.
                self.pump(now);
                self.endpoint.poll_transmit(now)?
            }
        };
        self.stats.packets_out += 1;
        Some((0, p))
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.started {
            // Start at the first wake-up (the simulator clamps past times
            // to now).
            return Some(Instant::ZERO);
        }
        match (self.endpoint.poll_timeout(), self.app.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
