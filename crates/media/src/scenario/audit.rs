//! The wire audit: what a middlebox at one point of the path sees of
//! each TCP flow direction, from the packets themselves — one
//! implementation for the simulator (packets as they left the sender) and
//! the lab (`hollywood_lab::capture` reads tshark captures into it).
//!
//! Per flow and direction (thesis §4.5 wire image, §5.3 method): data
//! segments, retransmissions, **inconsistent retransmissions** (resent
//! bytes that differ from the bytes first seen at those sequence numbers),
//! length mismatches (a retransmission that does not repeat the start and
//! length of a segment seen before), **sequence holes** (data starting
//! beyond the highest byte seen so far in that direction: never allowed on
//! a TCP wire image), RSTs and the experimental "next expected sequence"
//! option ([TCP-video] §7.2). TCP checksums are *not* verified: a capture on a
//! veth sees locally sent packets with checksums left to offload.
//!
//! [`WireAudit`] is the simulator's summary over every flow of one sender
//! ([`WireAuditReport`]); [`Auditor`] keeps the flows apart
//! ([`CaptureReport`]).

use hollywood_wire::pcap::{self, Reader};
use hollywood_wire::{IpRepr, SeqNumber, TcpRepr, IPPROTO_TCP};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;

/// Stream bytes per flow direction whose first-seen value is remembered
/// for the inconsistency check; bytes beyond are counted, not compared.
pub const MAX_TRACKED_BYTES: u64 = 64 << 20;
/// Inconsistent ranges listed per flow (all are counted).
pub const MAX_LISTED_RANGES: usize = 4096;

/// What one direction of one TCP flow looked like at the capture point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlowAudit {
    /// Sender of this direction.
    pub src: Option<SocketAddr>,
    /// Receiver of this direction.
    pub dst: Option<SocketAddr>,
    /// TCP packets seen.
    pub packets: u64,
    /// Segments with payload.
    pub data_segments: u64,
    /// Payload bytes (all segments, retransmissions included).
    pub data_bytes: u64,
    /// Highest stream offset seen (bytes of the stream this point saw).
    pub stream_bytes: u64,
    /// Data segments that started below the highest byte seen so far.
    pub retransmissions: u64,
    /// Bytes those segments carried below the highest byte seen.
    pub retransmitted_bytes: u64,
    /// Stream ranges `[start, end)` of the retransmissions (first
    /// [`MAX_LISTED_RANGES`]).
    pub retransmission_ranges: Vec<(u64, u64)>,
    /// Retransmissions with at least one byte different from the first
    /// bytes seen at that sequence number (thesis §4.5).
    pub inconsistent_retransmissions: u64,
    /// Bytes that differed.
    pub inconsistent_bytes: u64,
    /// Stream ranges `[start, end)` of the inconsistent retransmissions
    /// (first [`MAX_LISTED_RANGES`]).
    pub inconsistent_ranges: Vec<(u64, u64)>,
    /// Retransmissions whose start and length do not repeat a segment
    /// seen before (resegmentation or a changed length).
    pub length_mismatches: u64,
    /// Data segments starting beyond the highest byte seen so far.
    pub seq_holes: u64,
    /// Segments with RST.
    pub rsts: u64,
    /// Segments with SYN.
    pub syns: u64,
    /// Segments with FIN.
    pub fins: u64,
    /// Segments carrying the experimental "next expected sequence" option
    /// (kind 253, ExID 0x4877; [TCP-video] §7.2).
    pub next_expected_options: u64,
}

impl FlowAudit {
    fn add(&mut self, o: &FlowAudit) {
        self.packets += o.packets;
        self.data_segments += o.data_segments;
        self.data_bytes += o.data_bytes;
        self.stream_bytes += o.stream_bytes;
        self.retransmissions += o.retransmissions;
        self.retransmitted_bytes += o.retransmitted_bytes;
        self.inconsistent_retransmissions += o.inconsistent_retransmissions;
        self.inconsistent_bytes += o.inconsistent_bytes;
        self.length_mismatches += o.length_mismatches;
        self.seq_holes += o.seq_holes;
        self.rsts += o.rsts;
        self.syns += o.syns;
        self.fins += o.fins;
        self.next_expected_options += o.next_expected_options;
        for (mine, theirs) in [
            (&mut self.retransmission_ranges, &o.retransmission_ranges),
            (&mut self.inconsistent_ranges, &o.inconsistent_ranges),
        ] {
            let room = MAX_LISTED_RANGES.saturating_sub(mine.len());
            mine.extend(theirs.iter().take(room));
        }
    }
}

/// A whole capture's audit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CaptureReport {
    /// Records in the file.
    pub packets: u64,
    /// Records that were not parseable TCP/IP (ARP, ICMP, other link types).
    pub not_tcp: u64,
    /// One entry per flow direction, in order of first appearance.
    pub flows: Vec<FlowAudit>,
}

impl CaptureReport {
    /// The direction `src → dst`, if seen.
    pub fn flow(&self, src: SocketAddr, dst: SocketAddr) -> Option<&FlowAudit> {
        self.flows
            .iter()
            .find(|f| f.src == Some(src) && f.dst == Some(dst))
    }

    /// Every direction whose sender's port is `port` (e.g. a server's).
    pub fn from_port(&self, port: u16) -> FlowAudit {
        let mut t = FlowAudit::default();
        for f in self
            .flows
            .iter()
            .filter(|f| f.src.map(|s| s.port()) == Some(port))
        {
            t.add(f);
        }
        t
    }

    /// All directions summed (addresses left empty).
    pub fn totals(&self) -> FlowAudit {
        let mut t = FlowAudit::default();
        for f in &self.flows {
            t.add(f);
        }
        t
    }
}

/// What [`FlowState::on_segment`] made of a data segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentClass {
    /// It resent bytes seen before.
    pub retransmission: bool,
    /// Bytes that differ from the first bytes seen at their offsets.
    pub differing: u64,
}

/// Per-direction state of the audit (also the payload-check middlebox's
/// memory of first-seen bytes).
#[derive(Debug, Default)]
pub struct FlowState {
    audit: FlowAudit,
    /// Reference point mapping sequence numbers to stream offsets.
    anchor: Option<(SeqNumber, u64)>,
    /// One past the highest stream offset seen.
    high: u64,
    /// First transmissions: start offset → length.
    originals: HashMap<u64, u32>,
    /// First-seen bytes and whether each was seen.
    bytes: Vec<u8>,
    seen: Vec<bool>,
}

impl FlowState {
    fn offset(&mut self, seq: SeqNumber) -> Option<u64> {
        let (aseq, aoff) = self.anchor?;
        let off = aoff as i64 + seq.diff(aseq) as i64;
        u64::try_from(off).ok()
    }

    /// Account for one segment of this direction.
    pub fn on_segment(&mut self, tcp: &TcpRepr, payload: &[u8]) -> SegmentClass {
        let mut class = SegmentClass::default();
        let a = &mut self.audit;
        a.packets += 1;
        let f = tcp.flags;
        a.rsts += f.rst() as u64;
        a.syns += f.syn() as u64;
        a.fins += f.fin() as u64;
        a.next_expected_options += tcp.options.next_expected.is_some() as u64;
        if f.syn() {
            if self.anchor.is_none() {
                self.anchor = Some((tcp.seq + 1, 0));
            }
            return class;
        }
        if payload.is_empty() || f.rst() {
            return class;
        }
        if self.anchor.is_none() {
            // The capture started after the handshake.
            self.anchor = Some((tcp.seq, 0));
        }
        let Some(off) = self.offset(tcp.seq) else {
            return class; // before the start of the stream
        };
        let len = payload.len() as u64;
        let end = off + len;
        let a = &mut self.audit;
        a.data_segments += 1;
        a.data_bytes += len;
        if off > self.high {
            a.seq_holes += 1;
        }
        if off < self.high {
            a.retransmissions += 1;
            a.retransmitted_bytes += end.min(self.high) - off;
            if a.retransmission_ranges.len() < MAX_LISTED_RANGES {
                a.retransmission_ranges.push((off, end));
            }
            class.retransmission = true;
            if self.originals.get(&off) != Some(&(len as u32)) {
                a.length_mismatches += 1;
            }
            let mut differ = 0u64;
            for (i, &b) in payload.iter().enumerate() {
                let o = off + i as u64;
                if o >= MAX_TRACKED_BYTES {
                    break;
                }
                let o = o as usize;
                if self.seen.get(o).copied().unwrap_or(false) && self.bytes[o] != b {
                    differ += 1;
                }
            }
            class.differing = differ;
            if differ > 0 {
                a.inconsistent_retransmissions += 1;
                a.inconsistent_bytes += differ;
                if a.inconsistent_ranges.len() < MAX_LISTED_RANGES {
                    a.inconsistent_ranges.push((off, end));
                }
            }
        } else {
            self.originals.insert(off, len as u32);
        }
        // Remember the first bytes seen at each offset.
        let lim = end.min(MAX_TRACKED_BYTES) as usize;
        if (off as usize) < lim {
            if self.bytes.len() < lim {
                self.bytes.resize(lim, 0);
                self.seen.resize(lim, false);
            }
            // Below the highest offset seen, byte by byte (holes may be
            // filled); from it on nothing was seen yet: copy at once.
            let off = off as usize;
            let fresh = (self.high as usize).clamp(off, lim);
            for (i, &b) in payload[..fresh - off].iter().enumerate() {
                let o = off + i;
                if !self.seen[o] {
                    self.seen[o] = true;
                    self.bytes[o] = b;
                }
            }
            self.bytes[fresh..lim].copy_from_slice(&payload[fresh - off..lim - off]);
            self.seen[fresh..lim].fill(true);
        }
        if end > self.high {
            self.high = end;
            self.audit.stream_bytes = end;
        }
        class
    }
}

/// Audits TCP packets one by one (see the module doc).
#[derive(Debug, Default)]
pub struct Auditor {
    order: Vec<(SocketAddr, SocketAddr)>,
    flows: HashMap<(SocketAddr, SocketAddr), FlowState>,
    packets: u64,
    not_tcp: u64,
}

/// Parse a TCP/IP packet without verifying the TCP checksum.
pub fn parse_lenient(ip: &[u8]) -> Option<(SocketAddr, SocketAddr, TcpRepr, &[u8])> {
    let (r, seg) = IpRepr::parse(ip).ok()?;
    if r.protocol() != IPPROTO_TCP {
        return None;
    }
    let (src, dst) = (r.src_addr(), r.dst_addr());
    let (tcp, payload) = TcpRepr::parse(seg, src, dst, false).ok()?;
    Some((
        SocketAddr::new(src, tcp.src_port),
        SocketAddr::new(dst, tcp.dst_port),
        tcp,
        payload,
    ))
}

impl Auditor {
    /// An empty audit.
    pub fn new() -> Auditor {
        Auditor::default()
    }

    /// Look at one captured frame of link type `linktype`.
    pub fn observe_frame(&mut self, linktype: u32, frame: &[u8]) {
        self.packets += 1;
        let Some((src, dst, tcp, payload)) =
            pcap::ip_packet(linktype, frame).and_then(parse_lenient)
        else {
            self.not_tcp += 1;
            return;
        };
        let key = (src, dst);
        let st = self.flows.entry(key).or_insert_with(|| {
            self.order.push(key);
            FlowState::default()
        });
        st.on_segment(&tcp, payload);
    }

    /// The report so far.
    pub fn report(&self) -> CaptureReport {
        CaptureReport {
            packets: self.packets,
            not_tcp: self.not_tcp,
            flows: self
                .order
                .iter()
                .map(|k| {
                    let mut f = self.flows[k].audit.clone();
                    f.src = Some(k.0);
                    f.dst = Some(k.1);
                    f
                })
                .collect(),
        }
    }
}

/// Audit pcap bytes from any reader.
pub fn audit_reader<R: std::io::Read>(r: R) -> std::result::Result<CaptureReport, pcap::ReadError> {
    let mut rd = Reader::new(r)?;
    let lt = rd.linktype();
    let mut a = Auditor::new();
    while let Some((_, frame)) = rd.next_packet()? {
        a.observe_frame(lt, &frame);
    }
    Ok(a.report())
}

impl Auditor {
    /// Look at one whole IP packet.
    pub fn observe_ip(&mut self, packet: &[u8]) {
        self.observe_frame(pcap::LINKTYPE_RAW, packet);
    }
}

/// The simulator's audit results: every flow direction of the audited
/// sender summed.
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

impl WireAuditReport {
    /// The summary of a flow audit.
    pub fn of(f: &FlowAudit, not_tcp: u64) -> WireAuditReport {
        WireAuditReport {
            data_segments: f.data_segments,
            seq_holes: f.seq_holes,
            retransmissions: f.retransmissions,
            length_mismatches: f.length_mismatches,
            inconsistent: f.inconsistent_retransmissions,
            not_tcp,
        }
    }
}

/// Feed every IP packet one host transmitted (e.g. from
/// `Simulator::on_packet` on its egress link) to [`WireAudit::observe`].
#[derive(Debug, Default)]
pub struct WireAudit {
    auditor: Auditor,
}

impl WireAudit {
    /// An empty audit.
    pub fn new() -> Self {
        Self::default()
    }

    /// The results so far, every flow summed.
    pub fn report(&self) -> WireAuditReport {
        let r = self.auditor.report();
        WireAuditReport::of(&r.totals(), r.not_tcp)
    }

    /// Look at one packet sent by the audited host.
    pub fn observe(&mut self, packet: &[u8]) {
        self.auditor.observe_ip(packet);
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
