//! A static IP router node, for topologies with more than two hosts (and as
//! the pattern for middleboxes: a node that forwards between interfaces).

use crate::node::Node;
use hollywood_tcp::Instant;
use std::collections::VecDeque;
use std::net::IpAddr;

/// One static route: packets whose destination is in `prefix/len` leave on
/// `iface`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Network address (bits beyond `len` are ignored).
    pub prefix: IpAddr,
    /// Prefix length in bits (0 = default route).
    pub len: u8,
    /// Egress interface.
    pub iface: usize,
}

impl Route {
    fn matches(&self, dst: IpAddr) -> bool {
        match (self.prefix, dst) {
            (IpAddr::V4(p), IpAddr::V4(d)) => prefix_eq(&p.octets(), &d.octets(), self.len),
            (IpAddr::V6(p), IpAddr::V6(d)) => prefix_eq(&p.octets(), &d.octets(), self.len),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let bits = usize::from(len).min(a.len() * 8);
    let full = bits / 8;
    if a[..full] != b[..full] {
        return false;
    }
    let rest = bits % 8;
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[full] & mask == b[full] & mask
}

/// Router counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Packets forwarded.
    pub forwarded: u64,
    /// Dropped: no route to the destination.
    pub no_route: u64,
    /// Dropped: TTL / hop limit would reach zero.
    pub ttl_expired: u64,
    /// Dropped: not a well-formed IPv4/IPv6 header.
    pub malformed: u64,
}

/// Forwards IPv4/IPv6 packets by destination address with a static table
/// (longest prefix wins; among equal lengths, the route added first).
/// Decrements the IPv4 TTL (updating the header checksum incrementally,
/// RFC 1624) or the IPv6 hop limit and drops a packet whose TTL would reach
/// zero. Forwarding takes no time; queueing is the links' business. No ICMP
/// is generated.
#[derive(Debug, Clone, Default)]
pub struct Router {
    routes: Vec<Route>,
    out: VecDeque<(usize, Vec<u8>)>,
    stats: RouterStats,
}

impl Router {
    /// A router with an empty table.
    #[must_use]
    pub fn new() -> Router {
        Router::default()
    }

    /// Builder-style [`Router::add_route`].
    #[must_use]
    pub fn route(mut self, prefix: IpAddr, len: u8, iface: usize) -> Router {
        self.add_route(prefix, len, iface);
        self
    }

    /// Add a route for `prefix/len` via `iface` (`len` is clamped to 32 or 128).
    pub fn add_route(&mut self, prefix: IpAddr, len: u8, iface: usize) {
        let max = if prefix.is_ipv4() { 32 } else { 128 };
        self.routes.push(Route {
            prefix,
            len: len.min(max),
            iface,
        });
    }

    /// The routing table.
    #[must_use]
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> RouterStats {
        self.stats
    }

    /// The egress interface for `dst`, if any route matches.
    #[must_use]
    pub fn lookup(&self, dst: IpAddr) -> Option<usize> {
        let mut best: Option<&Route> = None;
        for r in &self.routes {
            if r.matches(dst) && best.is_none_or(|b| r.len > b.len) {
                best = Some(r);
            }
        }
        best.map(|r| r.iface)
    }

    /// Decrement the TTL / hop limit in place and return the destination
    /// (`Err` = why the packet must be dropped).
    fn forward_in_place(&mut self, packet: &mut [u8]) -> Result<IpAddr, Drop> {
        match packet.first().map(|b| b >> 4) {
            Some(4) => {
                let ihl = usize::from(packet[0] & 0x0f) * 4;
                if packet.len() < 20 || ihl < 20 || packet.len() < ihl {
                    return Err(Drop::Malformed);
                }
                let ttl = packet[8];
                if ttl <= 1 {
                    return Err(Drop::Ttl);
                }
                // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m = word with TTL.
                let old = u16::from_be_bytes([packet[8], packet[9]]);
                packet[8] = ttl - 1;
                let new = u16::from_be_bytes([packet[8], packet[9]]);
                let hc = u16::from_be_bytes([packet[10], packet[11]]);
                let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
                while sum > 0xffff {
                    sum = (sum & 0xffff) + (sum >> 16);
                }
                packet[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
                let d: [u8; 4] = packet[16..20].try_into().map_err(|_| Drop::Malformed)?;
                Ok(IpAddr::from(d))
            }
            Some(6) => {
                if packet.len() < 40 {
                    return Err(Drop::Malformed);
                }
                if packet[7] <= 1 {
                    return Err(Drop::Ttl);
                }
                packet[7] -= 1;
                let d: [u8; 16] = packet[24..40].try_into().map_err(|_| Drop::Malformed)?;
                Ok(IpAddr::from(d))
            }
            _ => Err(Drop::Malformed),
        }
    }
}

/// Destination address of an IPv4 or IPv6 packet (`None` if the header is
/// too short or the version unknown).
pub(crate) fn ip_destination(packet: &[u8]) -> Option<IpAddr> {
    ip_address(packet, 16, 24)
}

/// Source address of an IPv4 or IPv6 packet (as [`ip_destination`]).
pub(crate) fn ip_source(packet: &[u8]) -> Option<IpAddr> {
    ip_address(packet, 12, 8)
}

/// The address at byte `v4` of an IPv4 header or `v6` of an IPv6 one.
fn ip_address(packet: &[u8], v4: usize, v6: usize) -> Option<IpAddr> {
    match packet.first()? >> 4 {
        4 => {
            let a: [u8; 4] = packet.get(v4..v4 + 4)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        6 => {
            let a: [u8; 16] = packet.get(v6..v6 + 16)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        _ => None,
    }
}

enum Drop {
    Malformed,
    Ttl,
}

impl Node for Router {
    fn handle_packet(&mut self, _now: Instant, _iface: usize, mut packet: Vec<u8>) {
        match self.forward_in_place(&mut packet) {
            Ok(dst) => match self.lookup(dst) {
                Some(iface) => {
                    self.stats.forwarded += 1;
                    self.out.push_back((iface, packet));
                }
                None => self.stats.no_route += 1,
            },
            Err(Drop::Malformed) => self.stats.malformed += 1,
            Err(Drop::Ttl) => self.stats.ttl_expired += 1,
        }
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn source_and_destination_of_either_version() {
        for (src, dst) in [("10.0.0.1:5", "10.0.0.2:6"), ("[fd00::1]:5", "[fd00::2]:6")] {
            let (src, dst): (std::net::SocketAddr, std::net::SocketAddr) =
                (src.parse().unwrap(), dst.parse().unwrap());
            let p = hollywood_wire::build_udp_ip(src, dst, b"x");
            assert_eq!(ip_source(&p), Some(src.ip()));
            assert_eq!(ip_destination(&p), Some(dst.ip()));
            assert_eq!(ip_source(&p[..4]), None);
        }
    }

    fn ipv4(dst: [u8; 4], ttl: u8) -> Vec<u8> {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[3] = 20;
        p[8] = ttl;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&dst);
        let c = header_checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn header_checksum(h: &[u8]) -> u16 {
        let mut sum = 0u32;
        for (i, w) in h.chunks(2).enumerate() {
            if i != 5 {
                sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
            }
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn longest_prefix_wins() {
        let r = Router::new()
            .route(Ipv4Addr::new(0, 0, 0, 0).into(), 0, 9)
            .route(Ipv4Addr::new(10, 0, 0, 0).into(), 8, 1)
            .route(Ipv4Addr::new(10, 1, 0, 0).into(), 16, 2)
            .route(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0).into(), 8, 3);
        assert_eq!(r.lookup(Ipv4Addr::new(10, 1, 2, 3).into()), Some(2));
        assert_eq!(r.lookup(Ipv4Addr::new(10, 2, 2, 3).into()), Some(1));
        assert_eq!(r.lookup(Ipv4Addr::new(192, 0, 2, 1).into()), Some(9));
        assert_eq!(
            r.lookup(Ipv6Addr::new(0xfd12, 0, 0, 0, 0, 0, 0, 1).into()),
            Some(3)
        );
        assert_eq!(
            r.lookup(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1).into()),
            None
        );
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut r = Router::new().route(Ipv4Addr::new(10, 0, 0, 0).into(), 8, 1);
        for ttl in [2u8, 64, 255] {
            r.handle_packet(Instant::ZERO, 0, ipv4([10, 0, 0, 2], ttl));
            let (iface, p) = r.poll_transmit(Instant::ZERO).unwrap();
            assert_eq!(iface, 1);
            assert_eq!(p[8], ttl - 1);
            assert_eq!(u16::from_be_bytes([p[10], p[11]]), header_checksum(&p));
        }
        r.handle_packet(Instant::ZERO, 0, ipv4([10, 0, 0, 2], 1));
        r.handle_packet(Instant::ZERO, 0, ipv4([11, 0, 0, 2], 9));
        r.handle_packet(Instant::ZERO, 0, vec![0x45, 0, 0]);
        assert!(r.poll_transmit(Instant::ZERO).is_none());
        let s = r.stats();
        assert_eq!(
            (s.forwarded, s.ttl_expired, s.no_route, s.malformed),
            (3, 1, 1, 1)
        );
    }
}
