//! Kernel sockets, made in the network namespace the application chose
//! ([`Preconnection::with_namespace`](crate::Preconnection::with_namespace))
//! and then driven by the calling tokio runtime: a socket belongs to the
//! namespace of the thread that created it, whichever thread uses it.

use hollywood_io::NetNs;
use std::io;
use std::net::SocketAddr;

fn in_ns<T: Send + 'static>(
    ns: Option<&str>,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, String> {
    match ns {
        None => f().map_err(|e| e.to_string()),
        Some(name) => NetNs::open(name)
            .map_err(|e| e.to_string())?
            .run(f)
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string()),
    }
}

/// A UDP socket bound to `bind` and, if given, connected to `remote`.
pub(crate) fn udp(
    ns: Option<&str>,
    bind: SocketAddr,
    remote: Option<SocketAddr>,
) -> Result<tokio::net::UdpSocket, String> {
    let s = in_ns(ns, move || {
        let s = std::net::UdpSocket::bind(bind)?;
        if let Some(r) = remote {
            s.connect(r)?;
        }
        s.set_nonblocking(true)?;
        Ok(s)
    })
    .map_err(|e| format!("UDP socket at {bind}: {e}"))?;
    tokio::net::UdpSocket::from_std(s).map_err(|e| e.to_string())
}

/// `n` UDP sockets bound to the same address and port with
/// `SO_REUSEPORT` (one when `n` is 1, without it): the kernel hands each
/// a share of the peers, by a hash of their addresses, so a peer's
/// datagrams always reach the same socket while the set is unchanged.
/// With port 0 the first socket picks the port and the rest join it.
pub(crate) fn udp_shards(
    ns: Option<&str>,
    bind: SocketAddr,
    n: usize,
) -> Result<Vec<tokio::net::UdpSocket>, String> {
    use socket2::{Domain, Protocol, Socket, Type};
    let n = n.max(1);
    let socks = in_ns(ns, move || {
        let mut at = bind;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let s = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
            if n > 1 {
                s.set_reuse_port(true)?;
            }
            s.bind(&at.into())?;
            s.set_nonblocking(true)?;
            let s: std::net::UdpSocket = s.into();
            at = s.local_addr()?;
            out.push(s);
        }
        Ok(out)
    })
    .map_err(|e| format!("UDP socket at {bind}: {e}"))?;
    socks
        .into_iter()
        .map(|s| tokio::net::UdpSocket::from_std(s).map_err(|e| e.to_string()))
        .collect()
}

/// An unconnected TCP socket for `remote`'s family.
pub(crate) fn tcp(ns: Option<&str>, remote: SocketAddr) -> Result<tokio::net::TcpSocket, String> {
    let v4 = remote.is_ipv4();
    in_ns(ns, move || {
        if v4 {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
    })
    .map_err(|e| format!("TCP socket: {e}"))
}

/// A TCP listener on `at`.
pub(crate) fn tcp_listener(
    ns: Option<&str>,
    at: SocketAddr,
) -> Result<tokio::net::TcpListener, String> {
    let l = in_ns(ns, move || {
        let l = std::net::TcpListener::bind(at)?;
        l.set_nonblocking(true)?;
        Ok(l)
    })
    .map_err(|e| format!("TCP listen on {at}: {e}"))?;
    tokio::net::TcpListener::from_std(l).map_err(|e| e.to_string())
}
