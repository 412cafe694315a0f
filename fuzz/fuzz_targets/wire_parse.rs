//! Fuzz the wire parsers.
//!
//! 1. `parse_tcp_ip` on arbitrary bytes (whole IPv4/IPv6 packets) must not
//!    panic; whatever it accepts must rebuild with `build_tcp_ip` and parse
//!    back to the same segment.
//! 2. `TcpRepr::parse` on the same bytes as a bare TCP segment with fixed
//!    addresses and no checksum check (random bytes almost never carry a
//!    valid one), with the same emit → parse check.
//!
//! The only change emitting may make is dropping SACK blocks that do not fit
//! next to the other options in our (Linux-style, 4-byte aligned) layout.
#![no_main]

use hollywood_wire::{build_tcp_ip, parse_tcp_ip, ParsedSegment, TcpRepr};
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `tcp` as it must come back after emit: SACK blocks beyond what fits cut.
fn after_emit(tcp: &TcpRepr) -> TcpRepr {
    let mut e = *tcp;
    let n = tcp.options.sack_len as usize;
    let keep = n.min(tcp.options.sack_capacity());
    let kept: Vec<_> = tcp.options.sacks()[..keep].to_vec();
    e.options.sack_blocks = Default::default();
    e.options.set_sacks(&kept);
    e
}

fn check_tcp(data: &[u8], src: IpAddr, dst: IpAddr) {
    let Ok((tcp, payload)) = TcpRepr::parse(data, src, dst, false) else {
        return;
    };
    let mut buf = vec![0u8; tcp.header_len() + payload.len()];
    let n = tcp.emit(&mut buf, src, dst, payload);
    assert_eq!(n, buf.len());
    let (again, p2) = TcpRepr::parse(&buf, src, dst, true).expect("re-parse of emitted segment");
    assert_eq!(again, after_emit(&tcp));
    assert_eq!(p2, payload);
}

fuzz_target!(|data: &[u8]| {
    // Our option layout can be a few bytes longer than a peer's packed one;
    // near the 64 KiB IP length limit a rebuild may not fit (build_tcp_ip
    // documents that it panics then), so only rebuild what fits.
    let fits = |s: &ParsedSegment| 20 + s.tcp.header_len() + s.payload.len() <= 65535;
    if let Some(seg) = parse_tcp_ip(data).ok().filter(fits) {
        let rebuilt = build_tcp_ip(seg.src, seg.dst, &seg.tcp, seg.payload);
        let again = parse_tcp_ip(&rebuilt).expect("re-parse of rebuilt packet");
        assert_eq!(again.src, seg.src);
        assert_eq!(again.dst, seg.dst);
        assert_eq!(again.tcp, after_emit(&seg.tcp));
        assert_eq!(again.payload, seg.payload);
    }
    let v4 = (
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
    );
    let v6 = (
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
    );
    check_tcp(data, v4.0, v4.1);
    check_tcp(data, v6.0, v6.1);
});
