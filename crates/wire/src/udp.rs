//! UDP (RFC 768) header: a structured [`UdpRepr`] with `parse` / `emit`, and
//! whole-packet helpers [`parse_udp_ip`] / [`build_udp_ip`] over IPv4 or
//! IPv6.
//!
//! The simulator uses this for the no-retransmission baseline of the VoIP
//! experiments (thesis §5.1.2): plain datagrams, the floor any transport can
//! reach on a lossy path. The same no-panic contract as the rest of the
//! crate holds: malformed input yields an [`Error`].
//!
//! ```text
//!  0      7 8     15 16    23 24    31
//! +--------+--------+--------+--------+
//! |   source port   |    dest port    |
//! +--------+--------+--------+--------+
//! |     length      |    checksum     |
//! +--------+--------+--------+--------+
//! ```

use crate::checksum;
use crate::ip::{IpRepr, IPPROTO_UDP};
use crate::{Error, Result};
use std::net::{IpAddr, SocketAddr};

/// Length of the UDP header in bytes.
pub const HEADER_LEN: usize = 8;

/// A UDP header (the length and checksum fields are derived on emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parse a UDP datagram (header + payload) carried between `src` and
    /// `dst`, verifying the length field and the checksum (RFC 768; over
    /// IPv4 a zero checksum means "none", over IPv6 it is invalid,
    /// RFC 8200 §8.1). Returns the header and the payload; bytes beyond the
    /// length field are ignored.
    pub fn parse(datagram: &[u8], src: IpAddr, dst: IpAddr) -> Result<(UdpRepr, &[u8])> {
        if datagram.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = u16::from_be_bytes([datagram[4], datagram[5]]) as usize;
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > datagram.len() {
            return Err(Error::Truncated);
        }
        let datagram = &datagram[..len];
        let wire_sum = u16::from_be_bytes([datagram[6], datagram[7]]);
        let zero_allowed = src.is_ipv4();
        if wire_sum == 0 && !zero_allowed {
            return Err(Error::Checksum);
        }
        if wire_sum != 0 {
            let pseudo = checksum::pseudo_header(src, dst, IPPROTO_UDP, len as u32)
                .ok_or(Error::Malformed)?;
            if checksum::combine(pseudo, checksum::data(datagram)) != 0xffff {
                return Err(Error::Checksum);
            }
        }
        let repr = UdpRepr {
            src_port: u16::from_be_bytes([datagram[0], datagram[1]]),
            dst_port: u16::from_be_bytes([datagram[2], datagram[3]]),
        };
        Ok((repr, &datagram[HEADER_LEN..]))
    }

    /// Bytes `emit` writes for `payload_len` bytes of payload.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Write header and `payload` into `buf[..buffer_len(payload.len())]`
    /// with the checksum computed over the pseudo-header of `src` → `dst`.
    ///
    /// # Panics
    /// If `buf` is too short, the datagram exceeds 65535 bytes, or `src` and
    /// `dst` differ in address family (caller bugs).
    pub fn emit(&self, buf: &mut [u8], src: IpAddr, dst: IpAddr, payload: &[u8]) {
        let len = self.buffer_len(payload.len());
        let len16 = u16::try_from(len).expect("UdpRepr::emit: datagram longer than 65535 bytes");
        let buf = &mut buf[..len];
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..6].copy_from_slice(&len16.to_be_bytes());
        buf[6..8].copy_from_slice(&[0, 0]);
        buf[HEADER_LEN..].copy_from_slice(payload);
        let pseudo = checksum::pseudo_header(src, dst, IPPROTO_UDP, len as u32)
            .expect("UdpRepr::emit: source and destination must be the same address family");
        let mut sum = checksum::finish(checksum::combine(pseudo, checksum::data(buf)));
        // RFC 768: a computed zero is sent as all ones (zero means "none").
        if sum == 0 {
            sum = 0xffff;
        }
        buf[6..8].copy_from_slice(&sum.to_be_bytes());
    }
}

/// A UDP datagram parsed out of a whole IP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDatagram<'a> {
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port.
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// Parse an IPv4 or IPv6 packet carrying UDP, verifying the IP header
/// checksum (v4), the UDP length and the UDP checksum. Anything but UDP is
/// [`Error::Unsupported`].
pub fn parse_udp_ip(packet: &[u8]) -> Result<ParsedDatagram<'_>> {
    let (ip, payload) = IpRepr::parse(packet)?;
    if ip.protocol() != IPPROTO_UDP {
        return Err(Error::Unsupported);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let (udp, data) = UdpRepr::parse(payload, src, dst)?;
    Ok(ParsedDatagram {
        src: SocketAddr::new(src, udp.src_port),
        dst: SocketAddr::new(dst, udp.dst_port),
        payload: data,
    })
}

/// Build a whole IPv4 or IPv6 packet (family of `src`) carrying one UDP
/// datagram with every checksum filled in.
///
/// # Panics
/// If `src` and `dst` differ in address family or the datagram does not fit
/// the 16-bit length fields (caller bugs).
pub fn build_udp_ip(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    };
    let dlen = udp.buffer_len(payload.len());
    let ip = IpRepr::new(src.ip(), dst.ip(), IPPROTO_UDP, dlen)
        .expect("build_udp_ip: source and destination must be the same address family");
    let hlen = ip.buffer_len();
    let mut buf = vec![0u8; hlen + dlen];
    ip.emit(&mut buf);
    udp.emit(&mut buf[hlen..], src.ip(), dst.ip(), payload);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// An IPv4/UDP datagram 127.0.0.1:53000 → 127.0.0.1:5004, payload
    /// "hi", DF, TTL 64, ID 0; both checksums computed independently of
    /// this crate (RFC 1071 over the header, and over pseudo-header +
    /// datagram: 0x3ccd and 0xb6d9).
    const V4_HI: [u8; 30] = [
        0x45, 0x00, 0x00, 0x1e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x3c, 0xcd, 0x7f, 0x00, 0x00,
        0x01, 0x7f, 0x00, 0x00, 0x01, // IPv4
        0xcf, 0x08, 0x13, 0x8c, 0x00, 0x0a, 0xb6, 0xd9, // UDP
        b'h', b'i',
    ];

    fn v4(port: u16) -> SocketAddr {
        SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)
    }

    #[test]
    fn parse_known_datagram() {
        let d = parse_udp_ip(&V4_HI).unwrap();
        assert_eq!(d.src, v4(53000));
        assert_eq!(d.dst, v4(5004));
        assert_eq!(d.payload, b"hi");
    }

    #[test]
    fn build_matches_known_datagram() {
        assert_eq!(build_udp_ip(v4(53000), v4(5004), b"hi"), V4_HI.to_vec());
    }

    #[test]
    fn round_trip_v4_and_v6() {
        for (s, d) in [
            (v4(1), v4(2)),
            (
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 9),
                SocketAddr::new(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1).into(), 10),
            ),
        ] {
            for len in [0usize, 1, 160, 1400] {
                let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let p = build_udp_ip(s, d, &payload);
                let got = parse_udp_ip(&p).unwrap();
                assert_eq!((got.src, got.dst, got.payload), (s, d, &payload[..]));
            }
        }
    }

    #[test]
    fn corrupted_payload_fails_checksum() {
        let mut p = V4_HI;
        p[28] ^= 1;
        assert_eq!(parse_udp_ip(&p), Err(Error::Checksum));
    }

    #[test]
    fn zero_checksum_means_none_on_v4_only() {
        let mut p = V4_HI;
        p[26] = 0;
        p[27] = 0;
        assert_eq!(parse_udp_ip(&p).unwrap().payload, b"hi");
        let s = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 1);
        let mut p6 = build_udp_ip(s, s, b"x");
        p6[46] = 0;
        p6[47] = 0;
        assert_eq!(parse_udp_ip(&p6), Err(Error::Checksum));
    }

    #[test]
    fn bad_lengths_are_errors() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(UdpRepr::parse(&[0; 7], ip, ip), Err(Error::Truncated));
        // Length field below the header length.
        let mut d = V4_HI[20..].to_vec();
        d[5] = 4;
        assert_eq!(UdpRepr::parse(&d, ip, ip), Err(Error::Malformed));
        // Length field beyond the buffer.
        d[5] = 0x40;
        assert_eq!(UdpRepr::parse(&d, ip, ip), Err(Error::Truncated));
    }

    #[test]
    fn tcp_packet_is_unsupported() {
        let mut p = V4_HI;
        p[9] = crate::IPPROTO_TCP;
        crate::Ipv4Packet::new_unchecked(&mut p[..]).fill_checksum();
        assert_eq!(parse_udp_ip(&p), Err(Error::Unsupported));
    }

    #[test]
    fn never_panics_on_garbage() {
        let mut x: u32 = 7;
        for len in 0..200usize {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = parse_udp_ip(&buf);
            let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
            let _ = UdpRepr::parse(&buf, ip, ip);
        }
    }
}
