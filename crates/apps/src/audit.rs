//! Wire audit of one TCP sender, from packets as they left it.
//!
//! Feed every IP packet the sender transmitted (e.g. from
//! `Simulator::on_packet` on the sender's egress link) to
//! [`WireAudit::observe`]. The audit checks the two promises of TCP
//! Hollywood's wire image (thesis §4.5): the sequence space never has a hole,
//! and every retransmission has the length of the segment it repeats; and it
//! counts retransmissions whose payload differs from the first transmission
//! (inconsistent retransmissions).

use hollywood_wire::{parse_tcp_ip, SeqNumber};
use std::collections::HashMap;
use std::net::SocketAddr;

/// Audit results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireAuditReport {
    /// Data segments seen.
    pub data_segments: u64,
    /// Data segments that started beyond the highest byte sent so far.
    pub seq_holes: u64,
    /// Segments that resent earlier bytes.
    pub retransmissions: u64,
    /// Retransmissions whose start or length does not match a segment sent
    /// before at that sequence number.
    pub length_mismatches: u64,
    /// Retransmissions whose payload differs from the first transmission.
    pub inconsistent: u64,
    /// Packets that were not TCP/IP (ignored).
    pub not_tcp: u64,
}

#[derive(Debug, Default)]
struct Flow {
    /// Highest sequence number sent + 1.
    high: Option<SeqNumber>,
    /// First transmission at each segment start: (length, payload hash).
    first: HashMap<u32, (usize, u64)>,
}

/// Collects a [`WireAuditReport`] per sender flow (all flows are summed).
#[derive(Debug, Default)]
pub struct WireAudit {
    flows: HashMap<(SocketAddr, SocketAddr), Flow>,
    report: WireAuditReport,
}

fn fnv(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl WireAudit {
    /// An empty audit.
    pub fn new() -> Self {
        Self::default()
    }

    /// The results so far.
    pub fn report(&self) -> WireAuditReport {
        self.report
    }

    /// Look at one packet sent by the audited host.
    pub fn observe(&mut self, packet: &[u8]) {
        let Ok(seg) = parse_tcp_ip(packet) else {
            self.report.not_tcp += 1;
            return;
        };
        if seg.tcp.flags.rst() {
            return;
        }
        let flow = self.flows.entry((seg.src, seg.dst)).or_default();
        if seg.tcp.flags.syn() {
            flow.high = Some(seg.tcp.seq + 1);
            return;
        }
        let len = seg.payload.len();
        if len == 0 {
            return;
        }
        self.report.data_segments += 1;
        let seq = seg.tcp.seq;
        let end = seq + len;
        let high = flow.high.unwrap_or(seq);
        if seq > high {
            self.report.seq_holes += 1;
        }
        if seq < high {
            self.report.retransmissions += 1;
            match flow.first.get(&seq.0) {
                Some(&(l, h)) if l == len => {
                    if h != fnv(seg.payload) {
                        self.report.inconsistent += 1;
                    }
                }
                _ => self.report.length_mismatches += 1,
            }
        } else {
            flow.first.insert(seq.0, (len, fnv(seg.payload)));
        }
        if end > high {
            flow.high = Some(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_wire::{build_tcp_ip, TcpFlags, TcpRepr};

    fn seg(seq: u32, payload: &[u8], flags: TcpFlags) -> Vec<u8> {
        let tcp = TcpRepr {
            seq: SeqNumber(seq),
            flags,
            ..Default::default()
        };
        build_tcp_ip(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            &tcp,
            payload,
        )
    }

    #[test]
    fn detects_holes_mismatches_and_inconsistency() {
        let mut a = WireAudit::new();
        a.observe(&seg(99, &[], TcpFlags::SYN));
        a.observe(&seg(100, &[1; 10], TcpFlags::ACK));
        a.observe(&seg(110, &[2; 10], TcpFlags::ACK));
        assert_eq!(a.report().seq_holes, 0);
        a.observe(&seg(130, &[3; 10], TcpFlags::ACK)); // hole 120..130
        assert_eq!(a.report().seq_holes, 1);
        a.observe(&seg(100, &[1; 10], TcpFlags::ACK)); // consistent rtx
        a.observe(&seg(110, &[9; 10], TcpFlags::ACK)); // inconsistent rtx
        a.observe(&seg(100, &[1; 5], TcpFlags::ACK)); // shorter rtx
        let r = a.report();
        assert_eq!(r.retransmissions, 3);
        assert_eq!(r.inconsistent, 1);
        assert_eq!(r.length_mismatches, 1);
        assert_eq!(r.data_segments, 6);
    }
}
