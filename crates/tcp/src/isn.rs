//! Initial sequence numbers (RFC 6528, RFC 9293 §3.4.1).
//!
//! RFC 6528 §3: `ISN = M + F(localip, localport, remoteip, remoteport, secretkey)`.
//!
//! - M is a timer that ticks every 4 µs (RFC 9293 §3.4.1's clock), taken
//!   from the engine's `now`, so it wraps every ~4.77 hours.
//! - F is SipHash-2-4 keyed with a 128-bit secret (RFC 6528 §3 asks for a
//!   keyed PRF that cannot be computed from outside; the secret never
//!   leaves this struct, and `Debug` does not print it).
//!
//! The secret is derived deterministically from a `u64` seed with
//! ChaCha20 so that simulations replay byte for byte; the real-I/O adapter
//! seeds it from OS entropy (RFC 6528 §3: the key SHOULD be random).

use crate::time::Instant;
use hollywood_wire::SeqNumber;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use std::net::{IpAddr, SocketAddr};

/// Nanoseconds per tick of the ISN clock M (RFC 9293 §3.4.1: 4 µs).
pub const ISN_TICK_NANOS: u64 = 4_000;

/// RFC 6528 ISN generator: a secret key plus the 4 µs clock.
#[derive(Clone)]
pub struct IsnGenerator {
    /// SipHash key halves (the 128-bit `secretkey` of RFC 6528 §3).
    k0: u64,
    k1: u64,
}

impl core::fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The key must stay secret (RFC 6528 §3); never print it.
        f.debug_struct("IsnGenerator").finish_non_exhaustive()
    }
}

impl IsnGenerator {
    /// A generator whose 128-bit secret key is derived from `seed` with
    /// ChaCha20 (`seed_from_u64`). The same seed always gives the same key.
    pub fn new(seed: u64) -> IsnGenerator {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let k0 = rng.next_u64();
        let k1 = rng.next_u64();
        IsnGenerator { k0, k1 }
    }

    /// The ISN for a connection `local` ↔ `remote` opened at `now`.
    pub fn isn(&self, now: Instant, local: SocketAddr, remote: SocketAddr) -> SeqNumber {
        //= RFC 6528 §3: M is the 4 microsecond timer; the u32 truncation
        //= is the intended wrap of the 32-bit clock.
        let m = (now.as_nanos() / ISN_TICK_NANOS) as u32;
        SeqNumber(m.wrapping_add(self.f(local, remote)))
    }

    /// The 24-bit MAC of a SYN cookie (RFC 4987 §3.6): a keyed hash of the
    /// 4-tuple, the client's ISN, the cookie's time counter `t` and its
    /// MSS index, under the same secret as F (domain-separated by a leading
    /// tag, so it reveals nothing about F).
    pub(crate) fn syn_cookie_mac(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        client_isn: u32,
        t: u32,
        mss_index: u8,
    ) -> u32 {
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        h.write(b"syncookie");
        write_addr(&mut h, local);
        write_addr(&mut h, remote);
        h.write(&client_isn.to_be_bytes());
        h.write(&t.to_be_bytes());
        h.write(&[mss_index]);
        let v = h.finish();
        ((v >> 32) ^ v) as u32 & 0x00FF_FFFF
    }

    /// F(localip, localport, remoteip, remoteport, secretkey), RFC 6528 §3.
    fn f(&self, local: SocketAddr, remote: SocketAddr) -> u32 {
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        write_addr(&mut h, local);
        write_addr(&mut h, remote);
        let v = h.finish();
        // Fold all 64 output bits into the 32-bit result.
        ((v >> 32) ^ v) as u32
    }
}

/// Feed an address to the PRF unambiguously: a family tag, the address
/// bytes, then the port in network byte order. The tag keeps an IPv4
/// address distinct from any IPv6 address with the same bytes.
fn write_addr(h: &mut SipHasher24, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            h.write(&[4]);
            h.write(&ip.octets());
        }
        IpAddr::V6(ip) => {
            h.write(&[6]);
            h.write(&ip.octets());
        }
    }
    h.write(&addr.port().to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const T0: Instant = Instant::from_nanos(1_234_567_891_011);

    #[test]
    fn same_inputs_same_isn() {
        let a = IsnGenerator::new(7);
        let b = IsnGenerator::new(7);
        let (l, r) = (sa("10.0.0.1:40000"), sa("10.0.0.2:80"));
        assert_eq!(a.isn(T0, l, r), a.isn(T0, l, r));
        assert_eq!(a.isn(T0, l, r), b.isn(T0, l, r));
        // A clone shares the key.
        assert_eq!(a.clone().isn(T0, l, r), a.isn(T0, l, r));
    }

    #[test]
    fn different_seeds_give_different_isns() {
        let (l, r) = (sa("10.0.0.1:40000"), sa("10.0.0.2:80"));
        let isns: std::collections::HashSet<u32> = (0..64)
            .map(|seed| IsnGenerator::new(seed).isn(T0, l, r).0)
            .collect();
        assert_eq!(isns.len(), 64);
    }

    #[test]
    fn different_tuples_differ() {
        let g = IsnGenerator::new(42);
        let tuples = [
            ("10.0.0.1:40000", "10.0.0.2:80"),
            ("10.0.0.1:40001", "10.0.0.2:80"),
            ("10.0.0.1:40000", "10.0.0.2:81"),
            ("10.0.0.3:40000", "10.0.0.2:80"),
            ("10.0.0.1:40000", "10.0.0.4:80"),
            // Swapped ends: the reverse direction has its own ISN.
            ("10.0.0.2:80", "10.0.0.1:40000"),
            ("[::ffff:10.0.0.1]:40000", "[::ffff:10.0.0.2]:80"),
            ("[2001:db8::1]:40000", "[2001:db8::2]:80"),
        ];
        let isns: std::collections::HashSet<u32> = tuples
            .iter()
            .map(|(l, r)| g.isn(T0, sa(l), sa(r)).0)
            .collect();
        assert_eq!(isns.len(), tuples.len());
        // Many ports: no collisions expected among 1000 32-bit values
        // (birthday probability ~1e-4; the key is fixed so this is deterministic).
        let r = sa("192.0.2.1:443");
        let isns: std::collections::HashSet<u32> = (0..1000u16)
            .map(|p| {
                g.isn(T0, SocketAddr::new(sa("192.0.2.9:0").ip(), 30000 + p), r)
                    .0
            })
            .collect();
        assert_eq!(isns.len(), 1000);
    }

    #[test]
    fn isn_advances_at_250k_per_second() {
        let g = IsnGenerator::new(1);
        let (l, r) = (sa("10.0.0.1:40000"), sa("10.0.0.2:80"));
        let a = g.isn(T0, l, r);
        let b = g.isn(T0 + std::time::Duration::from_secs(1), l, r);
        assert_eq!(b.0.wrapping_sub(a.0), 250_000);
        // One tick every 4 µs.
        let c = g.isn(Instant::from_nanos(0), l, r);
        assert_eq!(g.isn(Instant::from_nanos(3_999), l, r), c);
        assert_eq!(
            g.isn(Instant::from_nanos(4_000), l, r).0,
            c.0.wrapping_add(1)
        );
        // The clock wraps after 2^32 ticks (~4.77 h) back to the same ISN.
        let wrap = Instant::from_nanos((1u64 << 32) * ISN_TICK_NANOS);
        assert_eq!(g.isn(wrap, l, r), c);
    }

    #[test]
    fn debug_does_not_leak_the_key() {
        let g = IsnGenerator::new(9);
        let s = format!("{g:?}");
        assert!(!s.contains(&g.k0.to_string()) && !s.contains(&g.k1.to_string()));
        assert!(!s.contains(&format!("{:x}", g.k0)));
    }
}
