//! Instance addresses: instance `i` gets `10.203.i.0/30`, the kernel's
//! side of its TUN device `.1`, the engine `.2`; `i` is the lowest index
//! not used by another instance whose /30 overlaps no address or route
//! of the host (a home LAN or VPN in 10.203/16 is left alone). With IPv6,
//! instance `i` also gets the ULA network `fdGG:GGGG:GGGG:i::/64` (RFC
//! 4193), kernel `::1`, engine `::2`, where the 40-bit global ID `G` is a
//! keyed hash of the host's `/etc/machine-id`: stable per host, random-
//! looking, and not the machine ID itself.

use std::hash::Hasher;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Prefix length of an instance's IPv4 network.
pub const PREFIX_V4: u8 = 30;

/// Number of instance indices (the third octet of `10.203.i.0/30`).
pub const MAX_INSTANCES: usize = 256;

/// The network `10.203.i.0` of instance `i`.
pub fn network_v4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 203, i, 0)
}

/// The kernel's address on instance `i`'s TUN device (`10.203.i.1`).
pub fn kernel_v4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 203, i, 1)
}

/// The engine's address behind instance `i`'s TUN device (`10.203.i.2`).
pub fn engine_v4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 203, i, 2)
}

/// Prefix length of an instance's IPv6 network.
pub const PREFIX_V6: u8 = 64;

/// The 40-bit ULA global ID derived from `seed` (the machine ID).
pub fn ula_global_id(seed: &[u8]) -> [u8; 5] {
    let mut h =
        siphasher::sip::SipHasher24::new_with_keys(0x686f_6c6c_7977_6f6f, 0x6420_686f_7374_6d6f);
    h.write(seed);
    let b = h.finish().to_be_bytes();
    [b[0], b[1], b[2], b[3], b[4]]
}

/// The global ID of this host, from `/etc/machine-id` (or, without one,
/// from the host name).
pub fn host_global_id() -> [u8; 5] {
    let seed = std::fs::read("/etc/machine-id")
        .or_else(|_| std::fs::read("/proc/sys/kernel/hostname"))
        .unwrap_or_default();
    ula_global_id(&seed)
}

fn v6(g: [u8; 5], i: u8, host: u16) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00 | u16::from(g[0]),
        u16::from_be_bytes([g[1], g[2]]),
        u16::from_be_bytes([g[3], g[4]]),
        u16::from(i),
        0,
        0,
        0,
        host,
    )
}

/// The kernel's IPv6 address on instance `i`'s TUN device (`…:i::1`).
pub fn kernel_v6(g: [u8; 5], i: u8) -> Ipv6Addr {
    v6(g, i, 1)
}

/// The engine's IPv6 address behind instance `i`'s TUN device (`…:i::2`).
pub fn engine_v6(g: [u8; 5], i: u8) -> Ipv6Addr {
    v6(g, i, 2)
}

/// The TUN device of instance `i` (`hwh<i>`: distinct from the lab's
/// `hwtun%d` and `hweng%d`).
pub fn tun_name(i: u8) -> String {
    format!("hwh{i}")
}

/// Whether `name` is a TUN device name of the `hwh<i>` scheme.
pub fn is_tun_name(name: &str) -> bool {
    name.strip_prefix("hwh")
        .and_then(|n| n.parse::<u8>().ok())
        .is_some_and(|i| tun_name(i) == name)
}

fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l.min(32))),
    }
}

/// Whether two prefixes share an address.
pub fn overlaps(a: (Ipv4Addr, u8), b: (Ipv4Addr, u8)) -> bool {
    let m = mask(a.1.min(b.1));
    u32::from(a.0) & m == u32::from(b.0) & m
}

/// The lowest index not in `used` whose `/30` overlaps none of `taken`
/// (the host's addresses and routes; a default route, length 0, must not
/// be passed: it overlaps everything).
pub fn allocate(used: &[u8], taken: &[(Ipv4Addr, u8)]) -> Option<u8> {
    (0..=u8::MAX).find(|&i| {
        !used.contains(&i)
            && !taken
                .iter()
                .any(|&p| overlaps((network_v4(i), PREFIX_V4), p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_overlap_when_they_share_an_address() {
        let net = |a: [u8; 4], l| (Ipv4Addr::from(a), l);
        assert!(overlaps(net([10, 203, 0, 0], 30), net([10, 203, 0, 2], 32)));
        assert!(overlaps(net([10, 203, 0, 0], 30), net([10, 0, 0, 0], 8)));
        assert!(!overlaps(
            net([10, 203, 0, 0], 30),
            net([10, 203, 0, 4], 30)
        ));
        assert!(!overlaps(
            net([10, 203, 1, 0], 30),
            net([192, 168, 1, 0], 24)
        ));
        assert!(overlaps(net([1, 2, 3, 4], 0), net([10, 203, 1, 0], 30)));
    }

    #[test]
    fn allocation_skips_used_indices_and_the_hosts_networks() {
        assert_eq!(allocate(&[], &[]), Some(0));
        assert_eq!(allocate(&[0, 1], &[]), Some(2));
        // A LAN 10.203.0.0/23 covers instances 0 and 1.
        let lan = (Ipv4Addr::new(10, 203, 0, 0), 23);
        assert_eq!(allocate(&[], &[lan]), Some(2));
        assert_eq!(allocate(&[2], &[lan]), Some(3));
        // A host route into instance 3's /30.
        let host = (Ipv4Addr::new(10, 203, 3, 1), 32);
        assert_eq!(allocate(&[2], &[lan, host]), Some(4));
        // A VPN route over all of 10/8 leaves nothing.
        assert_eq!(allocate(&[], &[(Ipv4Addr::new(10, 0, 0, 0), 8)]), None);
        let all: Vec<u8> = (0..=u8::MAX).collect();
        assert_eq!(allocate(&all, &[]), None);
    }

    #[test]
    fn ula_addresses_are_fd_slash_8_with_the_index_as_subnet() {
        let g = ula_global_id(b"0123456789abcdef0123456789abcdef\n");
        assert_eq!(g, ula_global_id(b"0123456789abcdef0123456789abcdef\n"));
        assert_ne!(g, ula_global_id(b"another machine\n"));
        let k = kernel_v6(g, 7);
        let e = engine_v6(g, 7);
        assert_eq!(k.segments()[0] >> 8, 0xfd);
        assert_eq!(k.segments()[3], 7);
        assert_eq!((k.segments()[7], e.segments()[7]), (1, 2));
        assert_eq!(k.segments()[..4], e.segments()[..4]);
        let other = engine_v6(g, 8);
        assert_ne!(other.segments()[..4], e.segments()[..4]);
    }

    #[test]
    fn tun_names_follow_the_scheme() {
        assert_eq!(tun_name(7), "hwh7");
        assert!(is_tun_name("hwh0") && is_tun_name("hwh255"));
        assert!(!is_tun_name("hwh256") && !is_tun_name("hwh07") && !is_tun_name("hwtun0"));
        assert_eq!(
            (kernel_v4(3), engine_v4(3)),
            (Ipv4Addr::new(10, 203, 3, 1), Ipv4Addr::new(10, 203, 3, 2))
        );
    }
}
