//! The Internet checksum (RFC 1071) and the TCP/UDP pseudo-headers
//! (RFC 9293 §3.1 for IPv4, RFC 8200 §8.1 for IPv6).
//!
//! Sums here are *folded but not complemented* 16-bit one's-complement sums,
//! so partial sums over several pieces can be combined with [`combine`]; the
//! value that goes into a header is `!sum` (see [`finish`]). A received header
//! verifies when the sum over everything, checksum field included, is
//! `0xffff`.
//!
//! The fast path adds 32-bit little-endian words into four 64-bit lanes
//! (plain adds, no carry to propagate: the lanes cannot overflow within a
//! block), then adds the blocks' sums with an end-around carry. This gives the
//! same result as adding 16-bit words: one's-complement addition is
//! addition modulo 2^16 - 1, and 2^16 - 1 divides 2^32 - 1 and 2^64 - 1,
//! so folding the wider sums down to 16 bits preserves it (RFC 1071 §2 (B),
//! "parallel summation"); the byte order is fixed by one swap at the end
//! (§2 (A)).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Add two 64-bit words with end-around carry.
#[inline(always)]
fn add_carry(a: u64, b: u64) -> u64 {
    let (s, c) = a.overflowing_add(b);
    // If the add overflowed, `s <= b - 1 < u64::MAX`, so adding 1 cannot
    // overflow again.
    s + c as u64
}

/// Fold a 64-bit one's-complement accumulator down to 16 bits.
#[inline(always)]
fn fold(acc: u64) -> u16 {
    let s = (acc >> 32) + (acc & 0xffff_ffff); // <= 2^33
    let s = (s >> 32) + (s & 0xffff_ffff); // <= 2^32
    let s = (s >> 16) + (s & 0xffff); // <= 2^17
    let s = (s >> 16) + (s & 0xffff); // <= 2^16
    s as u16
}

/// Bytes summed per block: a lane gains less than 2^33 per 32 bytes, so
/// it stays below 2^45 within a block (no overflow).
const BLOCK: usize = 1 << 16;

/// Plain 64-bit sums of `block` (a multiple of 32 bytes, at most
/// [`BLOCK`]) read as little-endian 64-bit words, each added as its two
/// 32-bit halves, in four lanes: no carry chain and no byte swaps in the
/// loop.
#[inline(always)]
fn lanes(block: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    for c in block.chunks_exact(32) {
        for (i, a) in acc.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&c[8 * i..8 * i + 8]);
            let w = u64::from_le_bytes(w);
            *a += (w & 0xffff_ffff) + (w >> 32);
        }
    }
    acc.iter().sum()
}

/// One's-complement sum of `data` as big-endian 16-bit words, folded to
/// 16 bits and not complemented. An odd trailing byte is padded with a zero
/// byte on the right (RFC 1071 §1).
///
/// The bytes are summed as little-endian words, whose one's-complement sum
/// is the big-endian one with its two bytes swapped (RFC 1071 §2 (A),
/// byte-order independence); the swap is done once at the end.
pub fn data(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let whole = data.len() & !31;
    for block in data[..whole].chunks(BLOCK) {
        acc = add_carry(acc, lanes(block));
    }
    // Under 32 bytes remain: 64-bit words, then the last bytes zero-padded
    // on the right (as RFC 1071 pads an odd byte).
    let mut rest = &data[whole..];
    while rest.len() >= 8 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&rest[..8]);
        acc = add_carry(acc, u64::from_le_bytes(w));
        rest = &rest[8..];
    }
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        acc = add_carry(acc, u64::from_le_bytes(w));
    }
    fold(acc).swap_bytes()
}

/// One's-complement addition of two folded sums.
#[inline]
pub fn combine(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s >> 16) + (s & 0xffff)) as u16
}

/// The value to write into a checksum field, given the folded sum of
/// everything it covers (with the field itself zero).
#[inline]
pub fn finish(sum: u16) -> u16 {
    !sum
}

/// RFC 1071 checksum of `bytes`: the complement of [`data`].
#[inline]
pub fn checksum(bytes: &[u8]) -> u16 {
    finish(data(bytes))
}

/// Folded sum of the IPv4 pseudo-header (RFC 9293 §3.1): source address,
/// destination address, zero, protocol, and the upper-layer length.
/// `length` is summed as the 16-bit field IPv4 carries; values above
/// `0xffff` cannot occur in an IPv4 packet and are summed as two 16-bit words.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u32) -> u16 {
    let s = u32::from_be_bytes(src.octets()) as u64
        + u32::from_be_bytes(dst.octets()) as u64
        + protocol as u64
        + length as u64;
    fold(s)
}

/// Folded sum of the IPv6 pseudo-header (RFC 8200 §8.1): source address,
/// destination address, 32-bit upper-layer packet length, three zero bytes
/// and the next-header value.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let s = u128::from_be_bytes(src.octets());
    let d = u128::from_be_bytes(dst.octets());
    let mut acc = add_carry((s >> 64) as u64, s as u64);
    acc = add_carry(acc, (d >> 64) as u64);
    acc = add_carry(acc, d as u64);
    acc = add_carry(acc, length as u64 + next_header as u64);
    fold(acc)
}

/// Folded pseudo-header sum for an address pair, or `None` if the two
/// addresses are of different families.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, length: u32) -> Option<u16> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some(pseudo_header_v4(s, d, protocol, length)),
        (IpAddr::V6(s), IpAddr::V6(d)) => Some(pseudo_header_v6(s, d, protocol, length)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Straightforward RFC 1071 reference: add 16-bit words in a u32 and
    /// fold the carries.
    fn reference(bytes: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for pair in bytes.chunks(2) {
            let hi = pair[0] as u32;
            let lo = pair.get(1).copied().unwrap_or(0) as u32;
            s += (hi << 8) | lo;
            s = (s >> 16) + (s & 0xffff);
        }
        s as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2
        // (big-endian), i.e. checksum 220d.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&b), 0xddf2);
        assert_eq!(checksum(&b), 0x220d);
    }

    #[test]
    fn ipv4_header_vector() {
        // A classic IPv4 header whose checksum field is b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(data(&h), 0xffff);
    }

    #[test]
    fn odd_length_and_empty() {
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn more_than_one_block() {
        // Past the per-block lane bound; all-0xff words stress the carries.
        let b = vec![0xffu8; 40 * BLOCK + 37];
        assert_eq!(data(&b), reference(&b));
        let b: Vec<u8> = (0..20 * BLOCK + 5).map(|i| (i * 131 % 251) as u8).collect();
        assert_eq!(data(&b), reference(&b));
    }

    #[test]
    fn all_ones_stays_ffff() {
        // A sum of 0xffff words must fold to 0xffff, never 0.
        let b = vec![0xffu8; 1000];
        assert_eq!(data(&b), 0xffff);
        assert_eq!(reference(&b), 0xffff);
    }

    #[test]
    fn pseudo_headers_match_byte_layout() {
        let s4 = Ipv4Addr::new(192, 168, 1, 2);
        let d4 = Ipv4Addr::new(10, 0, 0, 254);
        let mut ph = Vec::new();
        ph.extend_from_slice(&s4.octets());
        ph.extend_from_slice(&d4.octets());
        ph.extend_from_slice(&[0, 6, 0x05, 0xdc]);
        assert_eq!(pseudo_header_v4(s4, d4, 6, 1500), reference(&ph));

        let s6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d6: Ipv6Addr = "fe80::abcd:ef01:2345:6789".parse().unwrap();
        let mut ph = Vec::new();
        ph.extend_from_slice(&s6.octets());
        ph.extend_from_slice(&d6.octets());
        ph.extend_from_slice(&70_000u32.to_be_bytes());
        ph.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(pseudo_header_v6(s6, d6, 6, 70_000), reference(&ph));

        assert_eq!(pseudo_header(s4.into(), s6.into(), 6, 20), None);
    }

    proptest! {
        #[test]
        fn fast_path_matches_reference(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            prop_assert_eq!(data(&bytes), reference(&bytes));
        }

        #[test]
        fn fast_path_matches_reference_at_every_tail_length(
            bytes in proptest::collection::vec(any::<u8>(), 64..200),
        ) {
            for n in 0..bytes.len() {
                prop_assert_eq!(data(&bytes[..n]), reference(&bytes[..n]), "length {}", n);
            }
        }

        #[test]
        fn split_sums_combine(bytes in proptest::collection::vec(any::<u8>(), 0..600), cut in 0usize..300) {
            // Splitting at an even offset and combining gives the whole sum.
            let cut = (cut * 2).min(bytes.len() & !1);
            let (a, b) = bytes.split_at(cut);
            prop_assert_eq!(combine(data(a), data(b)), data(&bytes));
        }
    }
}
