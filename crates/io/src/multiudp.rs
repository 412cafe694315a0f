//! Several real UDP sockets as one [`Port`]: the real-packet twin of the
//! simulator's multi-homed host (`hollywood_sim::MultiHomedHost`), for a
//! connection group (`hollywood_transport::group::GroupTransport`) whose
//! paths are bound to different local addresses.
//!
//! Each path is a socket bound to a real address (possibly in its own
//! network namespace: a socket keeps the namespace it was created in) and
//! a pair of *group addresses*, the local and peer addresses the path's
//! inner transport was built with. A packet the transport sends leaves by
//! the socket of the path whose group address is its source, to that
//! path's real peer; a datagram received on a path's socket from its real
//! peer is handed to the transport with the path's group addresses. So
//! the group sees the same addresses on real packets as in the simulator
//! (two labs may give both paths the same real addresses), the way a NAT
//! would present them.
//!
//! One descriptor to wait on: an epoll instance over the sockets.

use crate::apphost::{refused, AppHost, Port, Sent};
use crate::sys;
use hollywood_transport::{MessageTransport, TransportApp};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// One path of a [`MultiUdpPort`].
#[derive(Debug)]
pub struct UdpPath {
    /// Bound to a specific address (the path's real local address).
    pub socket: UdpSocket,
    /// The real peer (where this path's packets go).
    pub peer: SocketAddr,
    /// The local address the inner transport was built with.
    pub group_local: SocketAddr,
    /// The peer address the inner transport was built with.
    pub group_peer: SocketAddr,
}

/// Counters of a [`MultiUdpPort`], per path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultiUdpStats {
    /// Datagrams sent per path.
    pub sent: Vec<u64>,
    /// Datagrams received per path (from the path's peer).
    pub received: Vec<u64>,
    /// Datagrams received from another address than the path's peer
    /// (skipped).
    pub strangers: u64,
}

/// Several UDP sockets, one per path, as one [`Port`].
#[derive(Debug)]
pub struct MultiUdpPort {
    paths: Vec<UdpPath>,
    epoll: OwnedFd,
    /// The socket to read first next time (round-robin fairness).
    next: usize,
    stats: MultiUdpStats,
}

impl MultiUdpPort {
    /// A port over `paths` (at least one); each socket must be bound to a
    /// specific address, and is made non-blocking.
    pub fn new(paths: Vec<UdpPath>) -> io::Result<MultiUdpPort> {
        if paths.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a multi-path port needs at least one path",
            ));
        }
        let epoll = sys::epoll_create()?;
        for (i, p) in paths.iter().enumerate() {
            if p.socket.local_addr()?.ip().is_unspecified() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "each path's socket must be bound to a specific address",
                ));
            }
            p.socket.set_nonblocking(true)?;
            sys::epoll_add_readable(&epoll, p.socket.as_raw_fd(), i as u64)?;
        }
        let n = paths.len();
        Ok(MultiUdpPort {
            paths,
            epoll,
            next: 0,
            stats: MultiUdpStats {
                sent: vec![0; n],
                received: vec![0; n],
                strangers: 0,
            },
        })
    }

    /// Per-path counters.
    pub fn stats(&self) -> &MultiUdpStats {
        &self.stats
    }
}

impl AsRawFd for MultiUdpPort {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}

impl Port for MultiUdpPort {
    fn send(&mut self, packet: &[u8]) -> io::Result<Sent> {
        let Ok(d) = hollywood_wire::parse_udp_ip(packet) else {
            return Ok(Sent::NotCarried);
        };
        let Some(i) = self.paths.iter().position(|p| p.group_local == d.src) else {
            return Ok(Sent::NotCarried);
        };
        let p = &self.paths[i];
        match p.socket.send_to(d.payload, p.peer) {
            Ok(_) => {
                self.stats.sent[i] += 1;
                Ok(Sent::Out)
            }
            Err(e) if refused(&e) => Ok(Sent::Refused),
            // The path's interface went away or has no route: a loss.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::ENETDOWN)
                ) =>
            {
                Ok(Sent::Refused)
            }
            Err(e) => Err(e),
        }
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        buf.resize(65_536, 0);
        let n = self.paths.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let p = &self.paths[i];
            let (len, from) = match p.socket.recv_from(buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                // An ICMP error queued on the socket: the transport's
                // timers cope.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.next = (i + 1) % n;
                    return Ok(Some(0));
                }
                Err(e) => return Err(e),
            };
            self.next = (i + 1) % n;
            if from != p.peer {
                self.stats.strangers += 1;
                return Ok(Some(0));
            }
            self.stats.received[i] += 1;
            let packet = hollywood_wire::build_udp_ip(p.group_peer, p.group_local, &buf[..len]);
            buf.clear();
            buf.extend_from_slice(&packet);
            return Ok(Some(packet.len()));
        }
        Ok(None)
    }
}

/// A transport (typically a connection group) and its application on
/// several UDP sockets.
pub type MultiUdpHost<A> = AppHost<MultiUdpPort, A>;

impl<A: TransportApp> AppHost<MultiUdpPort, A> {
    /// A host on `paths` ([`MultiUdpPort::new`]); engine time 0 is
    /// `epoch`.
    pub fn multi_udp(
        paths: Vec<UdpPath>,
        transport: Box<dyn MessageTransport>,
        app: A,
        epoch: std::time::Instant,
    ) -> io::Result<MultiUdpHost<A>> {
        Ok(AppHost::with_port(
            MultiUdpPort::new(paths)?,
            transport,
            app,
            epoch,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_tcp::Instant;
    use hollywood_transport::udp::UdpTransport;
    use hollywood_transport::{OutMessage, TransportEvent};
    use std::time::Duration;

    /// Sends `send` messages at start; records what arrives.
    struct Echo {
        send: u32,
        got: Vec<u32>,
    }

    impl TransportApp for Echo {
        fn on_start(&mut self, now: Instant, t: &mut dyn MessageTransport) {
            for id in 0..self.send {
                t.send(now, OutMessage::new(id, vec![id as u8; 100]))
                    .expect("send");
            }
        }
        fn on_event(&mut self, _now: Instant, _t: &mut dyn MessageTransport, ev: TransportEvent) {
            if let TransportEvent::Message(m) = ev {
                self.got.push(m.id);
            }
        }
    }

    /// Loopback (no root): a transport built with group addresses
    /// (10.1.0.1 → 10.1.0.2) talks through real sockets on other
    /// addresses, both ways translated, and the receiver sees the
    /// group addresses.
    #[test]
    fn translates_group_addresses_both_ways() {
        let sa = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sb = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (ra, rb) = (sa.local_addr().unwrap(), sb.local_addr().unwrap());
        let ga: SocketAddr = "10.1.0.1:4000".parse().unwrap();
        let gb: SocketAddr = "10.1.0.2:5004".parse().unwrap();
        let epoch = std::time::Instant::now();
        let path = |socket, peer, group_local, group_peer| UdpPath {
            socket,
            peer,
            group_local,
            group_peer,
        };
        let mut rx = AppHost::multi_udp(
            vec![path(sb, ra, gb, ga)],
            Box::new(UdpTransport::new(gb, Some(ga))),
            Echo {
                send: 0,
                got: vec![],
            },
            epoch,
        )
        .unwrap();
        let mut tx = AppHost::multi_udp(
            vec![path(sa, rb, ga, gb)],
            Box::new(UdpTransport::new(ga, Some(gb))),
            Echo {
                send: 10,
                got: vec![],
            },
            epoch,
        )
        .unwrap();
        let limit = tx.now() + Duration::from_secs(5);
        tx.run_until(limit, |_, _| true).unwrap();
        rx.run_until(limit, |app, _| app.got.len() == 10).unwrap();
        assert_eq!(rx.app().got, (0..10).collect::<Vec<_>>());
        assert_eq!(tx.port().stats().sent, vec![10]);
        assert_eq!(rx.port().stats().received, vec![10]);
    }
}
