//! Any [`MessageTransport`] with a [`TransportApp`] on real packets and
//! the OS clock: the real-packet twin of the simulator's `TransportHost`.
//! The application code is the same in both; only time and packets come
//! from here.
//!
//! The transports speak whole IP packets. Where they go is a [`Port`]:
//!
//! - a UDP socket ([`crate::udp::UdpPort`], for QUIC and UDP): the IP and
//!   UDP headers are unwrapped on the way out (the kernel builds its own)
//!   and rebuilt around each received datagram on the way in;
//! - a TUN device ([`TunDevice`], for the TCP deployments): the packets
//!   are written and read as they are, so the engine's segments are the
//!   ones on the wire, addresses included.
//!
//! One blocking thread per host: the port's descriptor is non-blocking
//! and waited on with `ppoll` until the earliest of the transport's and
//! the application's timers (nanosecond timeouts; a socket receive
//! timeout rounds up to scheduler ticks, which would blur pacing and send
//! times).

use crate::sys;
use crate::TunDevice;
use hollywood_tcp::Instant;
use hollywood_transport::host::Hosted;
use hollywood_transport::{MessageTransport, TransportApp};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Longest wait without a timer (to re-check the stop condition).
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Packets taken from the port per wake-up before timers run again.
const RECV_BURST: usize = 64;

/// Counters of an [`AppHost`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppHostStats {
    /// Packets (datagrams on a UDP port) received and handed to the
    /// transport.
    pub packets_in: u64,
    /// Packets (datagrams) sent.
    pub packets_out: u64,
    /// Bytes of the IP packets handed to the transport.
    pub ip_bytes_in: u64,
    /// Bytes of the IP packets the transport sent (as it built them).
    pub ip_bytes_out: u64,
    /// Packets the transport produced that the port cannot carry (not
    /// UDP on a UDP port).
    pub not_carried: u64,
    /// Packets the port refused (`EAGAIN`/`ENOBUFS`: a full send buffer
    /// or device queue); to the transport they are losses.
    pub send_refused: u64,
}

/// What became of a packet given to a [`Port`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// It went out.
    Out,
    /// The port cannot carry it (e.g. not UDP on a UDP socket).
    NotCarried,
    /// The port was full (`EAGAIN`/`ENOBUFS`); the packet is lost.
    Refused,
}

/// Where an [`AppHost`]'s packets go: a non-blocking descriptor that
/// carries whole IP packets, one at a time.
pub trait Port: AsRawFd {
    /// Send one whole IP packet as the transport built it.
    fn send(&mut self, packet: &[u8]) -> io::Result<Sent>;
    /// Receive one whole IP packet into `buf` (resized to fit), or
    /// `Ok(None)` when nothing is queued. `Ok(Some(0))` means a datagram
    /// was taken but is not for the transport (skip it).
    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>>;
}

/// A TUN device carries the transport's packets unchanged (no offloads:
/// [`TunDevice::try_send`]).
impl Port for TunDevice {
    fn send(&mut self, packet: &[u8]) -> io::Result<Sent> {
        match self.try_send(packet) {
            Ok(()) => Ok(Sent::Out),
            Err(e) if refused(&e) => Ok(Sent::Refused),
            Err(e) => Err(e),
        }
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        buf.resize(65_536, 0);
        match self.try_recv(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A full send buffer or device queue.
pub(crate) fn refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Called with every IP packet the transport sent through the port (also
/// those the port refused), with its send time.
pub type TransmitHook = Box<dyn FnMut(Instant, &[u8]) + Send>;

/// A transport and its application on one [`Port`].
pub struct AppHost<P: Port, A: TransportApp> {
    port: P,
    hosted: Hosted<A>,
    epoch: std::time::Instant,
    stats: AppHostStats,
    on_transmit: Option<TransmitHook>,
    buf: Vec<u8>,
}

impl<P: Port, A: TransportApp> std::fmt::Debug for AppHost<P, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppHost")
            .field("transport", &self.hosted.transport().name())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<P: Port, A: TransportApp> AppHost<P, A> {
    /// A host on `port`. Engine time 0 is `epoch`: hosts that share an
    /// epoch share a time base, so one host's send times and another's
    /// arrival times compare directly.
    pub fn with_port(
        port: P,
        transport: Box<dyn MessageTransport>,
        app: A,
        epoch: std::time::Instant,
    ) -> AppHost<P, A> {
        AppHost {
            port,
            hosted: Hosted::new(transport, app),
            epoch,
            stats: AppHostStats::default(),
            on_transmit: None,
            buf: vec![0u8; 65_536],
        }
    }

    /// Observe every packet sent (e.g. to match it against an emulator's
    /// drop log).
    pub fn set_transmit_hook(&mut self, hook: TransmitHook) {
        self.on_transmit = Some(hook);
    }

    /// Engine time now.
    pub fn now(&self) -> Instant {
        let d = std::time::Instant::now().saturating_duration_since(self.epoch);
        Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The port.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// The application.
    pub fn app(&self) -> &A {
        self.hosted.app()
    }

    /// The transport.
    pub fn transport(&self) -> &dyn MessageTransport {
        self.hosted.transport()
    }

    /// Counters.
    pub fn stats(&self) -> AppHostStats {
        self.stats
    }

    /// Run until `stop` says so (checked after every wake-up) or until
    /// engine time `limit`. Returns whether `stop` ended the run.
    pub fn run_until(
        &mut self,
        limit: Instant,
        mut stop: impl FnMut(&A, Instant) -> bool,
    ) -> io::Result<bool> {
        loop {
            let now = self.now();
            self.hosted.handle_timeout(now);
            while let Some(packet) = self.hosted.poll_transmit(now) {
                self.send_one(now, &packet)?;
            }
            if stop(self.hosted.app(), now) {
                return Ok(true);
            }
            if now >= limit {
                return Ok(false);
            }
            let next = self.hosted.poll_timeout().map_or(limit, |t| t.min(limit));
            let wait = next.saturating_duration_since(now).min(MAX_WAIT);
            if wait.is_zero() || sys::wait_readable(&self.port, wait)? {
                self.receive()?;
            }
        }
    }

    fn send_one(&mut self, now: Instant, packet: &[u8]) -> io::Result<()> {
        let sent = self.port.send(packet)?;
        if sent != Sent::NotCarried {
            if let Some(hook) = &mut self.on_transmit {
                hook(now, packet);
            }
        }
        match sent {
            Sent::Out => {
                self.stats.packets_out += 1;
                self.stats.ip_bytes_out += packet.len() as u64;
            }
            Sent::NotCarried => self.stats.not_carried += 1,
            Sent::Refused => self.stats.send_refused += 1,
        }
        Ok(())
    }

    /// Take what the port holds (at most a burst) into the transport.
    fn receive(&mut self) -> io::Result<()> {
        for _ in 0..RECV_BURST {
            let Some(n) = self.port.recv(&mut self.buf)? else {
                return Ok(());
            };
            if n == 0 {
                continue;
            }
            let now = self.now();
            self.stats.packets_in += 1;
            self.stats.ip_bytes_in += n as u64;
            self.hosted.handle_packet(now, &self.buf[..n]);
        }
        Ok(())
    }
}
