//! Workload messages read back from a capture of the data direction:
//! which packets first carried each message (so that, with the emulator's
//! drop log, the on-time oracle knows which messages the network lost), and
//! every stream position each message's frame occupied (so that an
//! in-order receiver's delivery order can be explained).
//!
//! Two ways a frame shows up, both handled in capture order:
//!
//! - in the sender's byte stream, possibly split over several segments
//!   (a kernel sender packs and splits messages freely): the first
//!   transmission of every stream byte is appended to a reassembly buffer
//!   and frames are found between their `0x00` markers
//!   (docs/PROTOCOL.md §1);
//! - whole, inside one retransmitted segment: an inconsistent
//!   retransmission (thesis §4.2) carries a complete frame plus zero
//!   padding, at a position where another frame was first sent.
//!
//! The capture point must be on the sender's side of any loss, so that
//! every transmission is seen once and first transmissions arrive in
//! stream order.

use crate::capture::parse_lenient;
use crate::netem::{segment_fingerprint, DropLog};
use crate::workload;
use hollywood_sim::DropReason;
use hollywood_wire::SeqNumber;
use std::collections::HashSet;
use std::path::Path;

/// What the capture says about each workload message.
#[derive(Debug, Clone, Default)]
pub struct WireMessages {
    /// Per workload id: fingerprints of the packets that carried the first
    /// transmission of its frame (`None`: never seen on the wire).
    first: Vec<Option<Vec<u64>>>,
    /// Every (stream position, id) at which a frame was seen.
    positions: Vec<(u64, u32)>,
    /// Secure mode: payloads are sealed; ids come from the frame header.
    sealed: bool,
}

/// The reassembled byte stream of first transmissions, with which packet
/// carried each byte range.
#[derive(Default)]
struct Stream {
    /// Stream offset of `bytes[0]`.
    start: u64,
    bytes: Vec<u8>,
    /// (start, end, packet fingerprint) of the packets that added bytes,
    /// in order.
    owners: Vec<(u64, u64, u64)>,
    /// Offset of the last `0x00` seen (a frame's opening marker).
    open: Option<u64>,
    /// Scanned up to here.
    scanned: u64,
}

impl Stream {
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// Append the packet's new bytes; returns the frames completed, as
    /// (position of the opening marker, COBS bytes, packets involved).
    fn push(&mut self, data: &[u8], fp: u64) -> Vec<(u64, Vec<u8>, Vec<u64>)> {
        let from = self.end();
        self.bytes.extend_from_slice(data);
        self.owners.push((from, self.end(), fp));
        let mut out = Vec::new();
        while self.scanned < self.end() {
            let at = self.scanned;
            if self.bytes[(at - self.start) as usize] == 0 {
                if let Some(o) = self.open.filter(|&o| at > o + 1) {
                    let a = (o + 1 - self.start) as usize;
                    let b = (at - self.start) as usize;
                    let owners = self
                        .owners
                        .iter()
                        .filter(|&&(s, e, _)| s <= at && e > o)
                        .map(|&(_, _, fp)| fp)
                        .collect();
                    out.push((o, self.bytes[a..b].to_vec(), owners));
                }
                self.open = Some(at);
            }
            self.scanned += 1;
        }
        // Keep only what a frame still open may need.
        let keep_from = self.open.unwrap_or(self.scanned);
        if keep_from > self.start + 65_536 {
            let cut = (keep_from - self.start) as usize;
            self.bytes.drain(..cut);
            self.start = keep_from;
            self.owners.retain(|&(_, e, _)| e > keep_from);
        }
        out
    }
}

impl WireMessages {
    /// Read `pcap` (the data direction is the flow toward `port`) for
    /// `count` workload messages of `size` payload bytes.
    pub fn read(
        pcap: &Path,
        port: u16,
        size: usize,
        count: u32,
        sealed: bool,
    ) -> std::io::Result<WireMessages> {
        let f = std::fs::File::open(pcap)?;
        let mut rd = hollywood_wire::pcap::Reader::new(std::io::BufReader::new(f))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let lt = rd.linktype();
        let mut w = WireMessages {
            first: vec![None; count as usize],
            positions: Vec::new(),
            sealed,
        };
        let mut base: Option<SeqNumber> = None;
        let mut stream = Stream::default();
        while let Some((_, frame)) = rd
            .next_packet()
            .map_err(|e| std::io::Error::other(e.to_string()))?
        {
            let Some(ip) = hollywood_wire::pcap::ip_packet(lt, &frame) else {
                continue;
            };
            let Some((_, dst, tcp, payload)) = parse_lenient(ip) else {
                continue;
            };
            if dst.port() != port {
                continue;
            }
            if tcp.flags.syn() {
                base = Some(tcp.seq + 1);
                continue;
            }
            let (Some(b), Some(fp)) = (base, segment_fingerprint(ip)) else {
                continue;
            };
            if payload.is_empty() {
                continue;
            }
            let off = tcp.seq.diff(b);
            if off < 0 {
                continue;
            }
            let off = off as u64;
            let end = off + payload.len() as u64;
            // New bytes extend the first-transmission stream.
            if end > stream.end() && off <= stream.end() {
                let skip = (stream.end() - off) as usize;
                for (pos, encoded, owners) in stream.push(&payload[skip..], fp) {
                    w.note(pos, &encoded, size, &owners);
                }
            }
            if off < stream.end().min(end) {
                // (Part of) a retransmission: whole frames inside it.
                w.scan_segment(off, payload, size, fp);
            }
        }
        Ok(w)
    }

    fn note(&mut self, pos: u64, encoded: &[u8], size: usize, owners: &[u64]) {
        let wire_size = if self.sealed {
            size + hollywood_transport::secure::TAG_LEN
        } else {
            size
        };
        let Ok(f) = hollywood_msg::decode_frame(encoded, wire_size.max(1)) else {
            return;
        };
        let Some(id) = workload::wire_id(f.header.id, &f.payload, size, self.sealed) else {
            return;
        };
        if id as usize >= self.first.len() {
            return;
        }
        self.positions.push((pos, id));
        if let Some(slot) = self.first.get_mut(id as usize) {
            if slot.is_none() {
                *slot = Some(owners.to_vec());
            }
        }
    }

    /// Whole frames inside one segment at stream offset `off`.
    fn scan_segment(&mut self, off: u64, payload: &[u8], size: usize, fp: u64) {
        let mut open: Option<usize> = None;
        for (i, &b) in payload.iter().enumerate() {
            if b != 0 {
                continue;
            }
            if let Some(o) = open {
                if i > o + 1 {
                    let encoded = payload[o + 1..i].to_vec();
                    self.note(off + o as u64, &encoded, size, &[fp]);
                }
            }
            open = Some(i);
        }
    }

    /// Per workload id: the network (the emulator's random loss, not its
    /// queue) dropped a packet that carried the message's first
    /// transmission. Messages never seen on the wire are not dropped.
    #[must_use]
    pub fn network_dropped(&self, log: &DropLog) -> Vec<bool> {
        self.first
            .iter()
            .map(|f| {
                f.as_ref().is_some_and(|fps| {
                    fps.iter().any(|&fp| {
                        matches!(log.reason_of(fp), Some(DropReason::Loss | DropReason::Rule))
                    })
                })
            })
            .collect()
    }

    /// Whether message `id` went on the wire at all.
    #[must_use]
    pub fn seen(&self, id: u32) -> bool {
        self.first.get(id as usize).is_some_and(Option::is_some)
    }

    /// Ids that appeared at a stream position out of id order: some lower
    /// id sits at a later position, or some higher id at an earlier one
    /// (a message carried in an older message's slot, or the messages it
    /// overtook). An in-order receiver can only deliver out of id order
    /// through these.
    #[must_use]
    pub fn moved(&self) -> HashSet<u32> {
        let mut v = self.positions.clone();
        v.sort_unstable();
        v.dedup();
        let n = v.len();
        let mut prefix_max = vec![0u32; n];
        let mut m: Option<u32> = None;
        for (i, &(_, id)) in v.iter().enumerate() {
            prefix_max[i] = m.unwrap_or(0);
            m = Some(m.map_or(id, |x| x.max(id)));
        }
        let mut out = HashSet::new();
        let mut suffix_min: Option<u32> = None;
        for i in (0..n).rev() {
            let id = v[i].1;
            let before = (i > 0).then_some(prefix_max[i]);
            if before.is_some_and(|b| b > id) || suffix_min.is_some_and(|s| s < id) {
                out.insert(id);
            }
            suffix_min = Some(suffix_min.map_or(id, |s| s.min(id)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: usize = 40;

    fn frame(id: u32) -> Vec<u8> {
        let mut f = hollywood_msg::Framer::new(hollywood_msg::FramerConfig {
            initial_id: id,
            ..Default::default()
        });
        let mut out = Vec::new();
        f.frame(0, false, &workload::payload(id, SIZE), &mut out)
            .unwrap();
        out
    }

    fn fresh(n: u32) -> WireMessages {
        WireMessages {
            first: vec![None; n as usize],
            positions: Vec::new(),
            sealed: false,
        }
    }

    #[test]
    fn sealed_frames_are_named_by_their_frame_id() {
        // Secure mode: the payload is ciphertext plus a tag, so the id
        // comes from the header; a payload of the wrong length, or an id
        // beyond the workload, names nothing.
        let mut w = fresh(4);
        w.sealed = true;
        let mut f = hollywood_msg::Framer::default();
        let mut bytes = Vec::new();
        let tag = hollywood_transport::secure::TAG_LEN;
        for (id, len) in [(2, SIZE + tag), (3, SIZE), (9, SIZE + tag)] {
            f.frame_id(id, 0, false, &vec![0xA5; len], &mut bytes)
                .unwrap();
        }
        let mut s = Stream::default();
        for (pos, enc, owners) in s.push(&bytes, 7) {
            w.note(pos, &enc, SIZE, &owners);
        }
        assert_eq!(w.first, vec![None, None, Some(vec![7]), None]);
        assert_eq!(w.positions.len(), 1);
    }

    #[test]
    fn frames_split_over_segments_name_every_segment_that_carried_them() {
        let mut w = fresh(3);
        let mut s = Stream::default();
        let bytes: Vec<u8> = (0..3).flat_map(frame).collect();
        // Cut the stream into three uneven segments: frame 1 straddles
        // segments 1 and 2.
        let cut1 = frame(0).len() + 5;
        let cut2 = bytes.len() - 3;
        for (fp, part) in [
            (11, &bytes[..cut1]),
            (22, &bytes[cut1..cut2]),
            (33, &bytes[cut2..]),
        ] {
            for (pos, enc, owners) in s.push(part, fp) {
                w.note(pos, &enc, SIZE, &owners);
            }
        }
        assert_eq!(w.first[0], Some(vec![11]));
        assert_eq!(w.first[1], Some(vec![11, 22]));
        assert_eq!(w.first[2], Some(vec![22, 33]));
        assert!(w.moved().is_empty(), "in id order");
    }

    #[test]
    fn a_frame_carried_in_an_older_slot_is_moved_with_what_it_overtook() {
        let mut w = fresh(6);
        let mut s = Stream::default();
        let f: Vec<Vec<u8>> = (0..6).map(frame).collect();
        let mut off = 0u64;
        let mut slot2 = 0u64;
        for id in [0u32, 1, 2, 3, 4] {
            if id == 2 {
                slot2 = off;
            }
            for (pos, enc, owners) in s.push(&f[id as usize], 100 + u64::from(id)) {
                w.note(pos, &enc, SIZE, &owners);
            }
            off += f[id as usize].len() as u64;
        }
        // The retransmission of slot 2 carries message 5 plus padding.
        let mut rtx = f[5].clone();
        rtx.resize(f[2].len().max(f[5].len()), 0);
        w.scan_segment(slot2, &rtx, SIZE, 999);
        assert_eq!(w.first[5], Some(vec![999]));
        let moved = w.moved();
        assert!(moved.contains(&5));
        assert!(!moved.contains(&0) && !moved.contains(&1));
        // Messages 3 and 4 sit after message 5's position: overtaken.
        assert!(moved.contains(&3) && moved.contains(&4));
    }

    #[test]
    fn drops_are_looked_up_by_fingerprint() {
        let mut w = fresh(2);
        w.first[0] = Some(vec![1, 2]);
        w.first[1] = Some(vec![3]);
        let mut log = DropLog::default();
        log.insert_fingerprint(2, DropReason::Loss);
        log.insert_fingerprint(3, DropReason::QueueFull);
        assert_eq!(w.network_dropped(&log), vec![true, false]);
    }
}
