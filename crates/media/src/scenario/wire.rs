//! What the wire says about each message: the sender's packets as offered
//! to the lossy link (TCP stream ranges in [`WireLog`], other transports'
//! packets in [`Offers`]) and, for TCP, where each message's frame went
//! and what became of the packets that first carried it ([`tcp_fates`]).

use super::oracle::{self, Fates, Offered};
use super::MessagesScenario;
use crate::stream::MessageSender;
use hollywood_sim::{DropReason, TraceKind};
use hollywood_tcp::Instant;
use hollywood_transport::tcp::Placement;
use std::collections::HashMap;

/// Every data packet the sender offered to the lossy link, in order, and
/// what became of it: the drop trace the per-message "first transmission
/// dropped" and the oracle are computed from.
#[derive(Default)]
pub(super) struct WireLog {
    /// Sequence number of the first payload byte (SYN + 1).
    pub(super) base: Option<hollywood_wire::SeqNumber>,
    /// Data packets: when offered, stream range, fate.
    pub(super) packets: Vec<WirePacket>,
    /// Packet index on the link → position in `packets`.
    pub(super) index: HashMap<u64, usize>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct WirePacket {
    pub(super) time: Instant,
    pub(super) start: u64,
    pub(super) end: u64,
    /// Dropped by the link for any reason.
    pub(super) dropped: bool,
    /// Dropped by the network's loss model or a scripted rule (not by the
    /// drop-tail queue the sender itself filled).
    pub(super) network_dropped: bool,
}

/// A drop of the first copy of link packet `index` that the log holds at
/// some position: `(position, dropped by the network rather than a full
/// queue)`.
pub(super) fn logged_drop(
    positions: &HashMap<u64, usize>,
    kind: TraceKind,
    index: u64,
    copy: u8,
) -> Option<(usize, bool)> {
    match kind {
        TraceKind::Dropped(reason) if copy == 0 => positions
            .get(&index)
            .map(|&i| (i, matches!(reason, DropReason::Loss | DropReason::Rule))),
        _ => None,
    }
}

impl WireLog {
    pub(super) fn on_event(
        &mut self,
        time: Instant,
        kind: TraceKind,
        index: u64,
        copy: u8,
        packet: &[u8],
    ) {
        match kind {
            TraceKind::Sent => {
                let Ok(s) = hollywood_wire::parse_tcp_ip(packet) else {
                    return;
                };
                if s.tcp.flags.syn() {
                    self.base = Some(s.tcp.seq + 1);
                    return;
                }
                let Some(base) = self.base else { return };
                let start = s.tcp.seq.diff(base) as i64;
                if s.payload.is_empty() || start < 0 {
                    return;
                }
                let (a, b) = (start as u64, start as u64 + s.payload.len() as u64);
                self.index.insert(index, self.packets.len());
                self.packets.push(WirePacket {
                    time,
                    start: a,
                    end: b,
                    dropped: false,
                    network_dropped: false,
                });
            }
            _ => {
                if let Some((i, network)) = logged_drop(&self.index, kind, index, copy) {
                    let p = &mut self.packets[i];
                    (p.dropped, p.network_dropped) = (true, network);
                }
            }
        }
    }

    /// The first transmission of the frame at stream offsets `[off,
    /// off+len)` that went out at or after `since`: `(any drop, network
    /// drop, when its last byte went out)`, the drops true if some packet
    /// carrying part of it was dropped; `None` if no packet carried it.
    pub(super) fn first_fate(
        &self,
        since: Instant,
        off: u64,
        len: u64,
    ) -> Option<(bool, bool, Instant)> {
        let end = off + len;
        let from = self.packets.partition_point(|p| p.time < since);
        let mut covered = off;
        let mut fate = (false, false);
        let mut last = None;
        for p in &self.packets[from..] {
            if p.end <= covered || p.start >= end || p.start > covered {
                continue;
            }
            last = Some(p.time);
            fate.0 |= p.dropped;
            fate.1 |= p.network_dropped;
            covered = p.end;
            if covered >= end {
                break;
            }
        }
        last.map(|t| (fate.0, fate.1, t))
    }
}

/// The sender's packets offered to the lossy link, in order, and what
/// became of them (transports other than TCP; `oracle::attribute`).
#[derive(Default)]
pub(super) struct Offers {
    /// Read message ids from the packets (UDP).
    pub(super) udp: bool,
    /// The ids are the FEC layer's (`hollywood_fec::wire`): map them to
    /// the application's, and name no message for its own packets.
    pub(super) fec: bool,
    pub(super) packets: Vec<Offered>,
    /// Packet index on the link → position in `packets`.
    pub(super) index: HashMap<u64, usize>,
}

impl Offers {
    pub(super) fn on_event(
        &mut self,
        time: Instant,
        kind: TraceKind,
        index: u64,
        copy: u8,
        packet: &[u8],
    ) {
        // Only the sender's packets (the reverse link is another link).
        match kind {
            TraceKind::Sent => {
                self.index.insert(index, self.packets.len());
                self.packets.push(Offered {
                    time,
                    len: packet.len(),
                    network_dropped: false,
                    dropped: false,
                    id: self
                        .udp
                        .then(|| oracle::udp_message_id(packet))
                        .flatten()
                        .and_then(|id| {
                            if self.fec {
                                hollywood_fec::app_id(id)
                            } else {
                                Some(id)
                            }
                        }),
                });
            }
            _ => {
                if let Some((i, network)) = logged_drop(&self.index, kind, index, copy) {
                    let p = &mut self.packets[i];
                    (p.dropped, p.network_dropped) = (true, network);
                }
            }
        }
    }
}

/// Where each message's frame went on the wire, and the fate of the
/// packets that first carried it. A TCP Hollywood sender reports it
/// (`Event::MessageSent`: its messages may be dropped before they get
/// sequence numbers, or travel in another message's slot); other senders
/// write every frame in id order, back to back, so the offsets follow from
/// framing the same payloads.
pub(super) fn tcp_fates(
    sc: &MessagesScenario,
    t: crate::Transport,
    sender: &MessageSender,
    placements: &[Placement],
    log: &WireLog,
) -> Fates<'static> {
    let offsets = frame_offsets(sc);
    let n = sc.count as usize;
    let mut first_tx_dropped = vec![false; n];
    let mut network_dropped = vec![false; n];
    let mut first_sent = vec![None; n];
    let sent = sent_ranges(sc, t, sender, placements, log, &offsets, Placed::First);
    for id in 0..n {
        if let Some((t, off, len)) = sent[id] {
            if let Some((any, net, at)) = log.first_fate(t, off, len) {
                first_tx_dropped[id] = any;
                network_dropped[id] = net;
                first_sent[id] = Some(at);
            }
        }
    }
    // Frame plus IPv4 (20), TCP (20) and timestamp option (12) headers.
    let wire_len = (0..n)
        .map(|id| (offsets[id + 1] - offsets[id]) as usize + 52)
        .collect();
    Fates::Known {
        first_tx_dropped,
        network_dropped,
        wire_len,
        first_sent,
    }
}

/// Which of a message's placements [`sent_ranges`] reports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Placed {
    /// The first: where the message first went on the wire (a copy
    /// carried in an older message's slot, if it had one).
    First,
    /// The last: the one the sender counts on. A TCP Hollywood sender
    /// places carried copies only while the message waits for its own
    /// slot, so the last placement is its own slot, or, when it expired
    /// before its turn, the copy that accounts for it
    /// (`hollywood_tcp::hollywood`, "Accounting").
    Last,
}

/// Per message: when it was placed in the stream, at which offset (from
/// the first data byte) and over how many bytes.
pub(super) fn sent_ranges(
    sc: &MessagesScenario,
    t: crate::Transport,
    sender: &MessageSender,
    placements: &[Placement],
    log: &WireLog,
    offsets: &[u64],
    which: Placed,
) -> Vec<Option<(Instant, u64, u64)>> {
    let mut sent: Vec<Option<(Instant, u64, u64)>> = vec![None; sc.count as usize];
    // Placements where the sender reported them: an inconsistent-
    // retransmission sender, or any sender in secure mode.
    if t.uses_message_queue() || sc.secure {
        if let Some(base) = log.base {
            for p in placements {
                if let Some(s) = sent.get_mut(p.id as usize) {
                    if which == Placed::Last || p.first {
                        *s = Some((p.time, p.seq.diff(base).max(0) as u64, u64::from(p.len)));
                    }
                }
            }
        }
    } else {
        for (id, r) in sender.records().iter().enumerate() {
            if let Some(g) = r.generated {
                sent[id] = Some((g, offsets[id], offsets[id + 1] - offsets[id]));
            }
        }
    }
    sent
}

/// Per message: a middlebox changed a byte of its frame or of a frame
/// marker next to it (`altered`: the box's ranges by sequence number).
pub(super) fn altered_messages(
    sc: &MessagesScenario,
    t: crate::Transport,
    sender: &MessageSender,
    placements: &[Placement],
    log: &WireLog,
    altered: &[(hollywood_wire::SeqNumber, u32)],
) -> Vec<bool> {
    let n = sc.count as usize;
    let Some(base) = log.base else {
        return vec![false; n];
    };
    // Changed ranges as stream offsets, sorted by start.
    let mut ranges: Vec<(i64, i64)> = altered
        .iter()
        .map(|&(s, len)| {
            let a = i64::from(s.diff(base));
            (a, a + i64::from(len))
        })
        .collect();
    ranges.sort_unstable();
    let offsets = frame_offsets(sc);
    // The placement the sender counts on: a carried copy lost in a splice
    // (a resegmenting box makes SACK blocks cut through a slot the sender
    // then rewrites, thesis §4.5) is an early delivery missed; the message
    // must still arrive in its own slot unless a box changed that one.
    let sent = sent_ranges(sc, t, sender, placements, log, &offsets, Placed::Last);
    // The longest range bounds how far back an overlapping one can start.
    let longest = ranges.iter().map(|r| r.1 - r.0).max().unwrap_or(0);
    sent.iter()
        .map(|s| {
            let Some((_, off, len)) = *s else {
                return false;
            };
            // One byte either side: a changed marker merges or splits
            // the frames it bounds.
            let (lo, hi) = (off as i64 - 1, (off + len) as i64 + 1);
            let from = ranges.partition_point(|r| r.0 < lo - longest);
            ranges[from..]
                .iter()
                .take_while(|r| r.0 < hi)
                .any(|r| r.1 > lo)
        })
        .collect()
}

/// Stream offset of each message's frame (the sender frames messages in id
/// order, back to back, from offset 0), and the end of the last one.
pub(super) fn frame_offsets(sc: &MessagesScenario) -> Vec<u64> {
    let mut f = hollywood_msg::Framer::new(hollywood_msg::FramerConfig::default());
    let mut out = Vec::new();
    let mut offsets = Vec::with_capacity(sc.count as usize + 1);
    let mut off = 0u64;
    for id in 0..sc.count {
        offsets.push(off);
        out.clear();
        // The very payload the sender wrote (a media packet's header and
        // size included): the framing's length depends on its bytes.
        let planned = sc.schedule.as_ref().and_then(|s| s.get(id as usize));
        let payload = crate::stream::payload_of(sc.seed, id, sc.size, planned);
        if f.frame(0, false, &payload, &mut out).is_ok() {
            off += out.len() as u64;
        }
    }
    // One past the end, so that frame `i` is `offsets[i]..offsets[i + 1]`.
    offsets.push(off);
    offsets
}
