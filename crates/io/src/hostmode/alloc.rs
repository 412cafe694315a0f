//! Instance addresses: instance `i` gets `10.203.i.0/30`, the kernel's
//! side of its TUN device `.1`, the engine `.2`; `i` is the lowest index
//! not used by another instance whose /30 overlaps no address or route
//! of the host (a home LAN or VPN in 10.203/16 is left alone).

use std::net::Ipv4Addr;

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
