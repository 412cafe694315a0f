//! Timed message workloads for the real-packet experiments, and the
//! receiver-side tally that checks them independently of the transport.
//!
//! Every message's payload is self-describing: the first four bytes carry
//! its id (big-endian) and the rest is a pattern derived from the id, so
//! the receiving application can tell, without trusting the message
//! layer's CRC, whether a delivered message is intact
//! ([`check_payload`]), a duplicate, or out of order.

use std::collections::HashSet;
use std::time::Duration;

/// Smallest payload: the id.
pub const MIN_PAYLOAD: usize = 4;

/// The payload of message `id`: id (big-endian) then a pattern of `id`.
///
/// # Panics
/// If `size < MIN_PAYLOAD`.
pub fn payload(id: u32, size: usize) -> Vec<u8> {
    assert!(size >= MIN_PAYLOAD, "payload of {size} B cannot hold an id");
    let mut p = Vec::with_capacity(size);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend((0..size - MIN_PAYLOAD).map(|i| pattern_byte(id, i)));
    p
}

fn pattern_byte(id: u32, i: usize) -> u8 {
    // Multiplicative hash of (id, i): neighbouring messages and offsets
    // differ, so a splice of two messages or a shifted copy never passes.
    let x = (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i as u64).wrapping_mul(0xff51);
    (x >> 29) as u8 ^ (x as u8)
}

/// The id of an intact payload of `size` bytes; `None` if the payload is
/// corrupt (wrong length or a byte that does not match the pattern).
pub fn check_payload(p: &[u8], size: usize) -> Option<u32> {
    if p.len() != size || size < MIN_PAYLOAD {
        return None;
    }
    let id = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
    p[MIN_PAYLOAD..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pattern_byte(id, i))
        .then_some(id)
}

/// The workload id of a message read back from the wire: from its payload
/// ([`check_payload`]), or, when the payload is `sealed` (secure mode,
/// docs/SECURITY.md: ciphertext plus a 16-byte tag), from the message
/// layer's `frame_id`, which equals the workload id when the sender's ids
/// count from 0 (the handshake's ids lie outside that range).
pub fn wire_id(frame_id: u32, payload: &[u8], size: usize, sealed: bool) -> Option<u32> {
    if sealed {
        (payload.len() == size + hollywood_transport::secure::TAG_LEN).then_some(frame_id)
    } else {
        check_payload(payload, size)
    }
}

/// What the receiving application saw.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    size: usize,
    count: u32,
    seen: HashSet<u32>,
    /// Highest id delivered so far.
    highest: Option<u32>,
    /// Intact messages delivered (each id once).
    pub delivered: u64,
    /// Messages whose content was wrong.
    pub corrupt: u64,
    /// Intact messages delivered a second time.
    pub duplicates: u64,
    /// Messages delivered after a message with a higher id.
    pub out_of_order: u64,
    /// Intact messages whose id is outside the workload.
    pub unknown: u64,
}

impl Tally {
    /// A tally for a workload of `count` messages of `size` bytes.
    pub fn new(count: u32, size: usize) -> Tally {
        Tally {
            size,
            count,
            ..Tally::default()
        }
    }

    /// Record one delivered message; returns its id when it is intact, in
    /// the workload and new.
    pub fn record(&mut self, p: &[u8]) -> Option<u32> {
        let Some(id) = check_payload(p, self.size) else {
            self.corrupt += 1;
            return None;
        };
        if id >= self.count {
            self.unknown += 1;
            return None;
        }
        if !self.seen.insert(id) {
            self.duplicates += 1;
            return None;
        }
        self.delivered += 1;
        match self.highest {
            Some(h) if id < h => self.out_of_order += 1,
            _ => self.highest = Some(id),
        }
        Some(id)
    }

    /// Whether every message of the workload was delivered.
    pub fn complete(&self) -> bool {
        self.delivered == u64::from(self.count)
    }
}

/// This process's resident memory in KiB (`VmRSS`), if /proc tells.
pub fn rss_kib() -> Option<i64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Milliseconds as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The runtime a lab run drives its sockets and stacks on: two workers
/// (the lab machines have two cores), timers and I/O.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_differ() {
        for id in [0, 1, 7, 65_535, u32::MAX] {
            let p = payload(id, 160);
            assert_eq!(p.len(), 160);
            assert_eq!(check_payload(&p, 160), Some(id));
        }
        assert_ne!(payload(1, 160)[4..], payload(2, 160)[4..]);
    }

    #[test]
    fn any_single_byte_change_is_caught() {
        let p = payload(42, 64);
        for i in 0..p.len() {
            let mut q = p.clone();
            q[i] ^= 0x01;
            // Changing the id bytes yields another id whose pattern does
            // not match the rest.
            assert_eq!(check_payload(&q, 64), None, "byte {i}");
        }
        assert_eq!(check_payload(&p[..63], 64), None, "short");
    }

    #[test]
    fn tally_counts_duplicates_reordering_and_corruption() {
        let mut t = Tally::new(5, 16);
        assert_eq!(t.record(&payload(0, 16)), Some(0));
        assert_eq!(t.record(&payload(2, 16)), Some(2));
        assert_eq!(t.record(&payload(1, 16)), Some(1));
        assert_eq!(t.record(&payload(2, 16)), None);
        assert_eq!(t.record(&[0u8; 16]), None); // id 0 with a zero pattern
        assert_eq!(t.record(&payload(9, 16)), None);
        assert_eq!(
            (
                t.delivered,
                t.out_of_order,
                t.duplicates,
                t.corrupt,
                t.unknown
            ),
            (3, 1, 1, 1, 1)
        );
        assert!(!t.complete());
        t.record(&payload(3, 16));
        t.record(&payload(4, 16));
        assert!(t.complete());
    }
}
