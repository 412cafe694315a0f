//! Any [`MessageTransport`] (QUIC on quinn-proto, UDP) with a
//! [`TransportApp`] on a real UDP socket and the OS clock: the real-packet
//! twin of the simulator's `TransportHost`. The application code is the
//! same in both; only time and packets come from here.
//!
//! The transports speak whole IP packets (so that the simulator carries
//! real QUIC/UDP/IP and its pcap dissects); here the IP and UDP headers are
//! unwrapped on the way out (the kernel builds its own) and rebuilt around
//! each received datagram on the way in, with the socket's address as
//! destination and the sender's as source, so the transport sees exactly
//! the addresses of the real path.
//!
//! One blocking thread per host: the socket is non-blocking and waited on
//! with `ppoll` until the earliest of the transport's and the
//! application's timers (nanosecond timeouts; a socket receive timeout
//! rounds up to scheduler ticks, which would blur pacing and send times).

use crate::sys;
use hollywood_tcp::Instant;
use hollywood_transport::host::Hosted;
use hollywood_transport::{MessageTransport, TransportApp};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// Longest wait without a timer (to re-check the stop condition).
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Datagrams taken from the socket per wake-up before timers run again.
const RECV_BURST: usize = 64;

/// Counters of a [`UdpHost`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpHostStats {
    /// Datagrams received and handed to the transport.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Bytes of the IP packets handed to the transport.
    pub ip_bytes_in: u64,
    /// Bytes of the IP packets the transport sent (as it built them).
    pub ip_bytes_out: u64,
    /// Packets the transport produced that were not UDP (not sent).
    pub not_udp: u64,
    /// Datagrams the socket refused (`EAGAIN`/`ENOBUFS`: the send buffer
    /// was full); to the transport they are losses.
    pub send_refused: u64,
}

/// Called with every IP packet the transport sends, before it goes out.
pub type TransmitHook = Box<dyn FnMut(Instant, &[u8]) + Send>;

/// A transport and its application on one UDP socket.
pub struct UdpHost<A: TransportApp> {
    socket: UdpSocket,
    local: SocketAddr,
    hosted: Hosted<A>,
    epoch: std::time::Instant,
    stats: UdpHostStats,
    on_transmit: Option<TransmitHook>,
    buf: Vec<u8>,
}

impl<A: TransportApp> std::fmt::Debug for UdpHost<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpHost")
            .field("local", &self.local)
            .field("transport", &self.hosted.transport().name())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<A: TransportApp> UdpHost<A> {
    /// A host on `socket`, which must be bound to a specific address (the
    /// transport's local address; the wildcard address cannot be put in
    /// the packets the transport sees). Engine time 0 is `epoch`: hosts
    /// that share an epoch share a time base, so one host's send times and
    /// another's arrival times compare directly.
    pub fn new(
        socket: UdpSocket,
        transport: Box<dyn MessageTransport>,
        app: A,
        epoch: std::time::Instant,
    ) -> io::Result<UdpHost<A>> {
        let local = socket.local_addr()?;
        if local.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the UDP socket must be bound to a specific address, not the wildcard",
            ));
        }
        socket.set_nonblocking(true)?;
        Ok(UdpHost {
            socket,
            local,
            hosted: Hosted::new(transport, app),
            epoch,
            stats: UdpHostStats::default(),
            on_transmit: None,
            buf: vec![0u8; 65_536],
        })
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

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
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
    pub fn stats(&self) -> UdpHostStats {
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
            if wait.is_zero() || sys::wait_readable(&self.socket, wait)? {
                self.receive()?;
            }
        }
    }

    fn send_one(&mut self, now: Instant, packet: &[u8]) -> io::Result<()> {
        let Ok(d) = hollywood_wire::parse_udp_ip(packet) else {
            self.stats.not_udp += 1;
            return Ok(());
        };
        if let Some(hook) = &mut self.on_transmit {
            hook(now, packet);
        }
        match self.socket.send_to(d.payload, d.dst) {
            Ok(_) => {
                self.stats.datagrams_out += 1;
                self.stats.ip_bytes_out += packet.len() as u64;
                Ok(())
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.raw_os_error() == Some(libc::ENOBUFS) =>
            {
                self.stats.send_refused += 1;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Take what the socket holds (at most a burst) into the transport.
    fn receive(&mut self) -> io::Result<()> {
        for _ in 0..RECV_BURST {
            let (n, from) = match self.socket.recv_from(&mut self.buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // An ICMP error queued on the socket (port unreachable
                // before the peer listens): the transport's timers cope.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            if from.is_ipv4() != self.local.is_ipv4() {
                continue;
            }
            let packet = hollywood_wire::build_udp_ip(from, self.local, &self.buf[..n]);
            let now = self.now();
            self.stats.datagrams_in += 1;
            self.stats.ip_bytes_in += packet.len() as u64;
            self.hosted.handle_packet(now, &packet);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_transport::udp::UdpTransport;
    use hollywood_transport::{OutMessage, TransportEvent};

    /// Sends `n` messages at start; counts what arrives.
    struct Echo {
        send: u32,
        got: Vec<(u32, Instant)>,
    }

    impl TransportApp for Echo {
        fn on_start(&mut self, now: Instant, t: &mut dyn MessageTransport) {
            for id in 0..self.send {
                let msg = OutMessage::new(id, vec![id as u8; 100]);
                t.send(now, msg).expect("send");
            }
        }
        fn on_event(&mut self, now: Instant, _t: &mut dyn MessageTransport, ev: TransportEvent) {
            if let TransportEvent::Message(m) = ev {
                self.got.push((m.id, now));
            }
        }
    }

    /// Two hosts on loopback (no namespace, no root): UDP messages arrive
    /// through real sockets, with the IP wrapping undone and redone.
    #[test]
    fn udp_messages_cross_real_sockets() {
        let sa = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sb = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (a, b) = (sa.local_addr().unwrap(), sb.local_addr().unwrap());
        let epoch = std::time::Instant::now();
        let ta = Box::new(UdpTransport::new(a, Some(b)));
        let tb = Box::new(UdpTransport::new(b, Some(a)));
        let mut rx = UdpHost::new(
            sb,
            tb,
            Echo {
                send: 0,
                got: vec![],
            },
            epoch,
        )
        .unwrap();
        let mut tx = UdpHost::new(
            sa,
            ta,
            Echo {
                send: 20,
                got: vec![],
            },
            epoch,
        )
        .unwrap();
        let limit = tx.now() + Duration::from_secs(5);
        tx.run_until(limit, |_, _| true).unwrap();
        rx.run_until(limit, |app, _| app.got.len() == 20).unwrap();
        let ids: Vec<u32> = rx.app().got.iter().map(|g| g.0).collect();
        assert_eq!(ids, (0..20).collect::<Vec<_>>());
        assert_eq!(tx.stats().datagrams_out, 20);
        assert_eq!(rx.stats().datagrams_in, 20);
        assert_eq!(tx.stats().ip_bytes_out, rx.stats().ip_bytes_in);
    }

    #[test]
    fn wildcard_socket_is_refused() {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let t = Box::new(UdpTransport::new(a, Some(a)));
        let e = UdpHost::new(
            s,
            t,
            Echo {
                send: 0,
                got: vec![],
            },
            std::time::Instant::now(),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
