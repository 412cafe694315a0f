//! Any [`MessageTransport`] (QUIC on quinn-proto, UDP) with a
//! [`TransportApp`] on a real UDP socket: an [`AppHost`] on a [`UdpPort`].
//!
//! The transports speak whole IP packets (so that the simulator carries
//! real QUIC/UDP/IP and its pcap dissects); here the IP and UDP headers are
//! unwrapped on the way out (the kernel builds its own) and rebuilt around
//! each received datagram on the way in, with the socket's address as
//! destination and the sender's as source, so the transport sees exactly
//! the addresses of the real path.

use crate::apphost::{refused, AppHost, Port, Sent};
use hollywood_transport::{MessageTransport, TransportApp};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

/// A transport and its application on one UDP socket.
pub type UdpHost<A> = AppHost<UdpPort, A>;

/// Counters of a [`UdpHost`] (datagrams are its packets).
pub type UdpHostStats = crate::apphost::AppHostStats;

/// A UDP socket bound to a specific address, as an [`AppHost`]'s port.
#[derive(Debug)]
pub struct UdpPort {
    socket: UdpSocket,
    local: SocketAddr,
}

impl UdpPort {
    /// `socket`, which must be bound to a specific address (the
    /// transport's local address; the wildcard address cannot be put in
    /// the packets the transport sees); made non-blocking.
    pub fn new(socket: UdpSocket) -> io::Result<UdpPort> {
        let local = socket.local_addr()?;
        if local.ip().is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the UDP socket must be bound to a specific address, not the wildcard",
            ));
        }
        socket.set_nonblocking(true)?;
        Ok(UdpPort { socket, local })
    }

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl AsRawFd for UdpPort {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl Port for UdpPort {
    fn send(&mut self, packet: &[u8]) -> io::Result<Sent> {
        let Ok(d) = hollywood_wire::parse_udp_ip(packet) else {
            return Ok(Sent::NotCarried);
        };
        match self.socket.send_to(d.payload, d.dst) {
            Ok(_) => Ok(Sent::Out),
            Err(e) if refused(&e) => Ok(Sent::Refused),
            Err(e) => Err(e),
        }
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        buf.resize(65_536, 0);
        let (n, from) = match self.socket.recv_from(buf) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            // An ICMP error queued on the socket (port unreachable
            // before the peer listens): the transport's timers cope.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(Some(0)),
            Err(e) => return Err(e),
        };
        if from.is_ipv4() != self.local.is_ipv4() {
            return Ok(Some(0));
        }
        let packet = hollywood_wire::build_udp_ip(from, self.local, &buf[..n]);
        buf.clear();
        buf.extend_from_slice(&packet);
        Ok(Some(packet.len()))
    }
}

impl<A: TransportApp> AppHost<UdpPort, A> {
    /// A host on `socket`, bound to a specific address ([`UdpPort::new`]).
    /// Engine time 0 is `epoch` ([`AppHost::with_port`]).
    pub fn new(
        socket: UdpSocket,
        transport: Box<dyn MessageTransport>,
        app: A,
        epoch: std::time::Instant,
    ) -> io::Result<UdpHost<A>> {
        Ok(AppHost::with_port(
            UdpPort::new(socket)?,
            transport,
            app,
            epoch,
        ))
    }

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.port().local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_tcp::Instant;
    use hollywood_transport::udp::UdpTransport;
    use hollywood_transport::{OutMessage, TransportEvent};
    use std::time::Duration;

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
        assert_eq!(tx.stats().packets_out, 20);
        assert_eq!(rx.stats().packets_in, 20);
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
