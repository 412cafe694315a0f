//! TCP Hollywood sender policy: per-message metadata and inconsistent
//! retransmissions (thesis §4.2).
//!
//! The engine (the thesis's "kernel extensions") keeps, for every message the
//! intermediary layer queued, the metadata that never goes on the wire:
//! sequence range, length, queue time, lifetime, the one message it depends
//! on, and its state. When standard TCP would retransmit a range (duplicate
//! ACKs / SACK loss detection or RTO), the engine asks this table what to put
//! in it:
//!
//! * a message that will still arrive in time (`now + SRTT/2 ≤ queued +
//!   lifetime`) is retransmitted as it was;
//! * a message that a live (or future) message depends on is retransmitted as
//!   it was (dependency override);
//! * bytes that complete a partially acknowledged or SACKed message are
//!   retransmitted as they were (fragment rule);
//! * otherwise the message's *slot* (its original sequence range) is rewritten
//!   with a different, complete message, padded with zero bytes to exactly the
//!   slot's length (the intermediary layer's framing treats zero bytes between
//!   frames as empty frames, see docs/PROTOCOL.md) — an *inconsistent
//!   retransmission*. Candidates: live messages closest to expiry first,
//!   expired messages farthest from expiry last; no candidate ⇒ the original.
//!
//! A message used as a replacement is marked; when its own slot is first
//! transmitted it is treated as expired there and may itself be replaced
//! (thesis §4.2, "marked such that when its original transmission time …
//! is reached, it is treated as if it has expired").
//!
//! Beyond the thesis: with D-SACK (RFC 2883) the sender learns when a rewrite
//! landed on a range the receiver already had; the replacement message is then
//! known not to have arrived that way, its mark is cleared and it is sent
//! again (in its own slot, or as a later replacement) while still live.
//! Also beyond the thesis, a message that has already expired when its slot
//! is first transmitted may be replaced by a *live, not yet sent* candidate
//! right there (only a queue-limited sender ever hits this; a candidate
//! already in flight would gain nothing).
//!
//! Unit of replacement: a whole slot contained in the retransmitted range.
//! Fragments of a message larger than one segment are always retransmitted as
//! they were (conservative reading of the fragment rule: the sender cannot
//! know that no fragment arrived unless all of them are being retransmitted
//! together).

use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::collections::VecDeque;
use std::time::Duration;

/// Application metadata for one message (thesis §4.2: lifetime and a single
/// dependency; only the sub-stream, inside the framed bytes, goes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageMeta {
    /// Message id as assigned by the intermediary layer (32-bit, wrapping).
    pub id: u32,
    /// Time from queueing until the message is useless at the receiver.
    /// `None` = never expires (fully reliable message).
    pub lifetime: Option<Duration>,
    /// The id of the one message this message depends on. Dependencies must be
    /// non-decreasing (serial arithmetic) across a connection (thesis §4.2).
    pub depends_on: Option<u32>,
    /// `false` exempts the message from replacement (used for ordered
    /// sub-streams, whose receiver waits for every message in order).
    pub replaceable: bool,
}

/// Why a message will not reach the receiver as itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExpiryReason {
    /// Its slot was retransmitted carrying message `by` instead (or zero
    /// padding only, `by = None`, which this policy never chooses today).
    Replaced {
        /// The replacement message id.
        by: Option<u32>,
    },
    /// Its lifetime had passed before its first transmission and its slot
    /// carried message `by` instead.
    ExpiredBeforeSend {
        /// The replacement message id.
        by: u32,
    },
}

/// Reported to the application (RFC 9622 calls this *Expired*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExpiredMessage {
    /// The message that expired.
    pub id: u32,
    /// What happened to it.
    pub reason: ExpiryReason,
}

/// Errors when queueing a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaError {
    /// `depends_on` is lower than a dependency declared earlier (thesis §4.2
    /// requires non-decreasing dependencies).
    DecreasingDependency,
    /// A message cannot depend on itself or on a later message.
    ForwardDependency,
    /// Empty message.
    Empty,
}

impl core::fmt::Display for MetaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            MetaError::DecreasingDependency => "message dependencies must be non-decreasing",
            MetaError::ForwardDependency => "a message may only depend on an earlier message",
            MetaError::Empty => "empty message",
        })
    }
}
impl std::error::Error for MetaError {}

/// Counters for the inconsistent-retransmission policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HollywoodStats {
    /// Slots rewritten with a different message on retransmission.
    pub ir_sent: u64,
    /// Slots rewritten at their first transmission (replacement already sent,
    /// or lifetime passed before sending).
    pub replaced_at_first_tx: u64,
    /// Retransmissions of expired messages that had no candidate.
    pub ir_no_candidate: u64,
    /// Retransmissions kept because a live/future message depends on them.
    pub kept_for_dependency: u64,
    /// Retransmissions kept by the fragment rule.
    pub kept_for_fragment: u64,
    /// Retransmissions kept because the message was still live.
    pub kept_live: u64,
    /// Rewrites found spurious by D-SACK (the receiver already had the range).
    pub dsack_spurious_rewrites: u64,
    /// Zero padding bytes written.
    pub padding_bytes: u64,
}

/// A rewrite of send-buffer bytes the engine must apply before transmitting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// First sequence number to overwrite.
    pub seq: SeqNumber,
    /// The new bytes (replacement frame followed by zero padding), exactly the
    /// slot's length.
    pub bytes: Vec<u8>,
}

#[derive(Debug)]
struct Msg {
    id: u32,
    /// Start of the message's own slot.
    seq: SeqNumber,
    /// The framed bytes as queued (also the slot's length).
    frame: Box<[u8]>,
    deadline: Option<Instant>,
    depends_on: Option<u32>,
    replaceable: bool,
    /// Id of the message whose bytes are in this slot now.
    occupant: u32,
    /// Slots (other than its own) whose current content is this message.
    copies: Vec<SeqNumber>,
    /// Known to have reached the receiver (a slot holding it was ACKed or SACKed).
    delivered: bool,
    /// Own slot transmitted at least once.
    sent: bool,
    /// Some bytes of the own slot ACKed or SACKed (fragment rule).
    partially_received: bool,
    /// Own slot fully ACKed or SACKed.
    slot_received: bool,
    /// An Expired event was queued for this message.
    expired_reported: bool,
}

impl Msg {
    fn len(&self) -> usize {
        self.frame.len()
    }
    fn end(&self) -> SeqNumber {
        self.seq + self.len()
    }
    /// thesis §4.2: "the estimate of one-way delay [SRTT/2] is used to
    /// determine if the message will arrive within its lifetime".
    fn live_at(&self, arrival: Instant) -> bool {
        self.deadline.is_none_or(|d| arrival <= d)
    }
}

/// The per-connection message metadata table (thesis §4.2.1: "maintained in a
/// linked list structure, paired with the data already stored by TCP").
///
/// Memory: one copy of each unacknowledged message's framed bytes (needed to
/// write it into another slot), so at most the send buffer's size again.
#[derive(Debug, Default)]
pub struct MessageTable {
    msgs: VecDeque<Msg>,
    /// Highest dependency target declared so far.
    latest_dependency: Option<u32>,
    events: VecDeque<ExpiredMessage>,
    stats: HollywoodStats,
    /// Rewritten slots acknowledged recently: (start, end, occupant). The
    /// D-SACK for a spurious rewrite usually rides on the very ACK that
    /// acknowledges the slot, so the table must remember it a little longer.
    recent_rewrites: VecDeque<(SeqNumber, SeqNumber, u32)>,
}

/// How many acknowledged rewritten slots are remembered for D-SACK matching.
const RECENT_REWRITES: usize = 256;

/// The dependency rules of thesis §4.2 for message `id` declaring
/// `depends_on`, given the latest dependency declared before on the
/// connection: a message may only depend on an earlier message, and
/// dependencies are non-decreasing (32-bit serial order). Shared by the
/// engine's message table and by senders that frame messages without the
/// engine (the message layer over a kernel socket).
pub fn check_dependency(
    id: u32,
    depends_on: Option<u32>,
    latest_dependency: Option<u32>,
) -> Result<(), MetaError> {
    let Some(d) = depends_on else {
        return Ok(());
    };
    if d == id || id_before(id, d) {
        return Err(MetaError::ForwardDependency);
    }
    if latest_dependency.is_some_and(|prev| id_before(d, prev)) {
        return Err(MetaError::DecreasingDependency);
    }
    Ok(())
}

/// Serial-number comparison of message ids (RFC 1982 style, 32 bits).
fn id_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl MessageTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counters.
    pub fn stats(&self) -> &HollywoodStats {
        &self.stats
    }

    /// Number of messages tracked (not yet fully acknowledged).
    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// No messages tracked.
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Next Expired event for the application.
    pub fn poll_expired(&mut self) -> Option<ExpiredMessage> {
        self.events.pop_front()
    }

    /// Check metadata before the bytes are queued.
    pub fn check(&self, meta: &MessageMeta, frame_len: usize) -> Result<(), MetaError> {
        if frame_len == 0 {
            return Err(MetaError::Empty);
        }
        check_dependency(meta.id, meta.depends_on, self.latest_dependency)
    }

    /// Record a message whose framed bytes were queued at `seq` (its slot).
    /// Call [`check`](Self::check) first.
    pub fn push(&mut self, now: Instant, seq: SeqNumber, frame: &[u8], meta: MessageMeta) {
        debug_assert!(self.check(&meta, frame.len()).is_ok());
        if let Some(d) = meta.depends_on {
            self.latest_dependency = Some(d);
        }
        self.msgs.push_back(Msg {
            id: meta.id,
            seq,
            frame: frame.into(),
            deadline: meta.lifetime.map(|l| now + l),
            depends_on: meta.depends_on,
            replaceable: meta.replaceable,
            occupant: meta.id,
            copies: Vec::new(),
            delivered: false,
            sent: false,
            partially_received: false,
            slot_received: false,
            expired_reported: false,
        });
    }

    fn index_of_id(&self, id: u32) -> Option<usize> {
        // Ids are assigned in queue order by the intermediary layer; a linear
        // scan from the back is short in practice (recent ids) and correct
        // regardless of order.
        self.msgs.iter().rposition(|m| m.id == id)
    }

    /// Indices of slots lying entirely inside `[seq, seq+len)`.
    fn slots_within(&self, seq: SeqNumber, len: usize) -> Vec<usize> {
        let Some(front) = self.msgs.front().map(|m| m.seq) else {
            return Vec::new();
        };
        let start = seq.diff(front) as i64;
        let end = start + len as i64;
        let first = self
            .msgs
            .partition_point(|m| (m.seq.diff(front) as i64) < start);
        let mut out = Vec::new();
        for i in first..self.msgs.len() {
            let m = &self.msgs[i];
            let ms = m.seq.diff(front) as i64;
            if ms + m.len() as i64 > end {
                break;
            }
            out.push(i);
        }
        out
    }

    /// thesis §4.2 dependency override: "A message will always be retransmitted
    /// if there are unexpired messages that depend on it, or if a new message
    /// could be queued that depends on it." Dependencies are non-decreasing,
    /// so the only message a *future* message may still depend on without a
    /// declaration we have not seen is the latest declared target (or a later
    /// one, which would be declared first); we protect the latest target.
    fn protected(&self, idx: usize, arrival: Instant) -> bool {
        let id = self.msgs[idx].id;
        if self.latest_dependency == Some(id) {
            return true;
        }
        self.msgs
            .iter()
            .skip(idx + 1)
            .any(|m| m.depends_on == Some(id) && !m.delivered && m.live_at(arrival))
    }

    /// Choose a replacement for slot `slot_idx` of `slot_len` bytes whose
    /// current occupant is `occupant`. thesis §4.2: "all complete messages
    /// (i.e., excluding those that have been partially acknowledged) in the
    /// sending queue" are candidates; "live messages that are closest to
    /// expiry given highest priority, and expired messages farthest from
    /// expiry given lowest priority". `live_only` restricts to live ones;
    /// `unsent_only` to messages whose own slot was not transmitted yet
    /// (used at first transmission, where only those gain by going earlier).
    fn choose(
        &self,
        slot_idx: usize,
        slot_len: usize,
        occupant: u32,
        arrival: Instant,
        live_only: bool,
        unsent_only: bool,
    ) -> Option<usize> {
        let mut best: Option<(usize, (bool, i128))> = None;
        for (i, m) in self.msgs.iter().enumerate() {
            if i == slot_idx
                || m.id == occupant
                || m.delivered
                || m.partially_received
                || !m.copies.is_empty()
                || m.len() > slot_len
                || (unsent_only && m.sent)
            {
                continue;
            }
            let live = m.live_at(arrival);
            if live_only && !live {
                continue;
            }
            // Rank: live before expired; live by time left ascending (no
            // deadline = infinitely far); expired by time since expiry
            // ascending ("farthest from expiry last").
            let key = match m.deadline {
                None => (false, i128::MAX),
                Some(d) => {
                    let left = d.as_nanos() as i128 - arrival.as_nanos() as i128;
                    if live {
                        (false, left)
                    } else {
                        (true, -left)
                    }
                }
            };
            if best.as_ref().is_none_or(|(_, k)| key < *k) {
                best = Some((i, key));
            }
        }
        best.map(|(i, _)| i)
    }

    /// Put message `cand` into slot `slot`; returns the rewrite to apply.
    fn rewrite(&mut self, slot: usize, cand: usize) -> Rewrite {
        let slot_seq = self.msgs[slot].seq;
        let slot_len = self.msgs[slot].len();
        let old = self.msgs[slot].occupant;
        // The previous occupant, if it was a copy of another message, no
        // longer sits in this slot.
        if old != self.msgs[slot].id {
            if let Some(o) = self.index_of_id(old) {
                self.msgs[o].copies.retain(|s| *s != slot_seq);
            }
        }
        let mut bytes = Vec::with_capacity(slot_len);
        bytes.extend_from_slice(&self.msgs[cand].frame);
        let pad = slot_len - bytes.len();
        bytes.resize(slot_len, 0);
        self.stats.padding_bytes += pad as u64;
        let cand_id = self.msgs[cand].id;
        self.msgs[cand].copies.push(slot_seq);
        self.msgs[slot].occupant = cand_id;
        Rewrite {
            seq: slot_seq,
            bytes,
        }
    }

    fn report(&mut self, idx: usize, reason: ExpiryReason) {
        let m = &mut self.msgs[idx];
        if !m.expired_reported && !m.delivered {
            m.expired_reported = true;
            self.events.push_back(ExpiredMessage { id: m.id, reason });
        }
    }

    /// The engine is about to retransmit `[seq, seq+len)` (fast retransmit,
    /// SACK recovery or RTO: thesis §4.2, "triggered when the standard TCP
    /// retransmission logic would be triggered"). Returns the rewrites to
    /// apply to the send buffer first (empty = retransmit as it was).
    pub fn on_retransmit(
        &mut self,
        now: Instant,
        srtt: Duration,
        seq: SeqNumber,
        len: usize,
    ) -> Vec<Rewrite> {
        let arrival = now + srtt / 2;
        let mut out = Vec::new();
        for slot in self.slots_within(seq, len) {
            let m = &self.msgs[slot];
            if m.partially_received || m.slot_received {
                // Fragment rule (thesis §4.2): complete partially received data as it was.
                self.stats.kept_for_fragment += 1;
                continue;
            }
            let occ = m.occupant;
            let Some(oi) = self.index_of_id(occ) else {
                // The occupant's own slot was acknowledged and dropped from
                // the table: it is delivered; nothing to decide.
                continue;
            };
            let o = &self.msgs[oi];
            if o.delivered {
                // The receiver has this message already (its own slot was
                // ACKed/SACKed): sending it again here is useless; any live
                // candidate is better, otherwise keep.
                if let Some(c) = self.choose(slot, self.msgs[slot].len(), occ, arrival, true, false)
                {
                    out.push(self.rewrite(slot, c));
                    self.stats.ir_sent += 1;
                }
                continue;
            }
            if o.live_at(arrival) {
                self.stats.kept_live += 1;
                continue;
            }
            if !o.replaceable {
                self.stats.kept_live += 1;
                continue;
            }
            if self.protected(oi, arrival) {
                self.stats.kept_for_dependency += 1;
                continue;
            }
            match self.choose(slot, self.msgs[slot].len(), occ, arrival, false, false) {
                Some(c) => {
                    let by = self.msgs[c].id;
                    out.push(self.rewrite(slot, c));
                    self.stats.ir_sent += 1;
                    self.report(oi, ExpiryReason::Replaced { by: Some(by) });
                }
                None => self.stats.ir_no_candidate += 1,
            }
        }
        out
    }

    /// The engine is about to send `[seq, seq+len)` for the first time.
    /// A slot whose message was already used as a replacement is treated as
    /// expired (thesis §4.2); a slot whose message expired before its first
    /// transmission may carry a live candidate instead (extension).
    pub fn on_first_transmit(
        &mut self,
        now: Instant,
        srtt: Option<Duration>,
        seq: SeqNumber,
        len: usize,
    ) -> Vec<Rewrite> {
        let arrival = now + srtt.unwrap_or_default() / 2;
        let mut out = Vec::new();
        let Some(front) = self.msgs.front().map(|m| m.seq) else {
            return out;
        };
        // Mark every slot touched by this transmission as sent.
        let start = seq.diff(front) as i64;
        let end = start + len as i64;
        let first = self
            .msgs
            .partition_point(|m| (m.seq.diff(front) as i64 + m.len() as i64) <= start);
        for i in first..self.msgs.len() {
            if (self.msgs[i].seq.diff(front) as i64) >= end {
                break;
            }
            self.msgs[i].sent = true;
        }
        for slot in self.slots_within(seq, len) {
            let m = &self.msgs[slot];
            if m.occupant != m.id || !m.replaceable {
                continue;
            }
            let used_elsewhere = !m.copies.is_empty() || m.delivered;
            let expired = !m.live_at(arrival);
            if !(used_elsewhere || expired) || self.protected(slot, arrival) {
                continue;
            }
            if let Some(c) = self.choose(slot, m.len(), m.id, arrival, true, true) {
                let by = self.msgs[c].id;
                out.push(self.rewrite(slot, c));
                self.stats.replaced_at_first_tx += 1;
                if expired && !used_elsewhere {
                    self.report(slot, ExpiryReason::ExpiredBeforeSend { by });
                }
            }
        }
        out
    }

    /// Mark the occupant of every slot fully inside `[left, right)` as
    /// delivered and note partial reception.
    fn mark_received(&mut self, left: SeqNumber, right: SeqNumber) {
        let Some(front) = self.msgs.front().map(|m| m.seq) else {
            return;
        };
        let l = left.diff(front) as i64;
        let r = right.diff(front) as i64;
        if r <= l {
            return;
        }
        let first = self
            .msgs
            .partition_point(|m| (m.seq.diff(front) as i64 + m.len() as i64) <= l);
        let mut delivered = Vec::new();
        for i in first..self.msgs.len() {
            let m = &mut self.msgs[i];
            let ms = m.seq.diff(front) as i64;
            let me = ms + m.len() as i64;
            if ms >= r {
                break;
            }
            if ms >= l && me <= r {
                m.slot_received = true;
                delivered.push(m.occupant);
            } else {
                m.partially_received = true;
            }
        }
        for id in delivered {
            if let Some(i) = self.index_of_id(id) {
                self.msgs[i].delivered = true;
            }
        }
    }

    /// SND.UNA advanced to `snd_una`: slots below it are received; messages
    /// whose slot is fully acknowledged leave the table.
    pub fn on_ack(&mut self, snd_una: SeqNumber) {
        if let Some(front) = self.msgs.front().map(|m| m.seq) {
            if snd_una > front {
                self.mark_received(front, snd_una);
            }
        }
        while let Some(m) = self.msgs.front() {
            if m.end() <= snd_una {
                let m = self.msgs.pop_front().expect("front exists");
                // Copies of this message in later slots stay there (their
                // bytes are in the send buffer); without its record they are
                // simply no longer candidates.
                if m.occupant != m.id {
                    if self.recent_rewrites.len() == RECENT_REWRITES {
                        self.recent_rewrites.pop_front();
                    }
                    self.recent_rewrites.push_back((m.seq, m.end(), m.occupant));
                }
            } else {
                break;
            }
        }
    }

    /// A SACK block `[left, right)` arrived (RFC 2018).
    pub fn on_sack(&mut self, left: SeqNumber, right: SeqNumber) {
        self.mark_received(left, right);
    }

    /// A D-SACK (RFC 2883) reported `[left, right)` as received twice: any
    /// rewrite of a slot inside it was spurious — the receiver kept the
    /// earlier bytes, so the replacement did not arrive there. Clear its mark
    /// so it is sent again while live.
    pub fn on_dsack(&mut self, left: SeqNumber, right: SeqNumber) {
        // Rewritten slots that were acknowledged already.
        let mut spurious = Vec::new();
        self.recent_rewrites.retain(|&(a, b, occ)| {
            let hit = a < right && left < b;
            if hit {
                spurious.push((a, occ));
            }
            !hit
        });
        for (slot_seq, occ) in spurious {
            self.stats.dsack_spurious_rewrites += 1;
            self.forget_copy(occ, slot_seq);
        }
        let Some(front) = self.msgs.front().map(|m| m.seq) else {
            return;
        };
        let l = left.diff(front) as i64;
        let r = right.diff(front) as i64;
        for i in 0..self.msgs.len() {
            let ms = self.msgs[i].seq.diff(front) as i64;
            let me = ms + self.msgs[i].len() as i64;
            if ms >= r {
                break;
            }
            if me <= l || self.msgs[i].occupant == self.msgs[i].id {
                continue;
            }
            let slot_seq = self.msgs[i].seq;
            let occ = self.msgs[i].occupant;
            self.stats.dsack_spurious_rewrites += 1;
            self.forget_copy(occ, slot_seq);
        }
    }

    /// The copy of message `occ` in slot `slot_seq` did not reach the
    /// receiver: it may be sent again (as itself or as a replacement).
    fn forget_copy(&mut self, occ: u32, slot_seq: SeqNumber) {
        if let Some(o) = self.index_of_id(occ) {
            self.msgs[o].copies.retain(|s| *s != slot_seq);
            // The replacement may have been marked delivered by the ACK
            // that carried this D-SACK; it was not.
            if self.msgs[o].copies.is_empty() && !self.msgs[o].slot_received {
                self.msgs[o].delivered = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn at(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }
    fn meta(id: u32, lifetime: Option<u64>, dep: Option<u32>) -> MessageMeta {
        MessageMeta {
            id,
            lifetime: lifetime.map(ms),
            depends_on: dep,
            replaceable: true,
        }
    }
    /// A table with `n` messages of `len` bytes each, queued every 20 ms from
    /// seq 1000, lifetime `life` ms.
    fn voip(n: u32, len: usize, life: u64) -> MessageTable {
        let mut t = MessageTable::new();
        for i in 0..n {
            let frame = vec![i as u8 + 1; len];
            let m = meta(i, Some(life), None);
            t.check(&m, len).unwrap();
            t.push(
                at(20 * i as u64),
                SeqNumber(1000) + i as usize * len,
                &frame,
                m,
            );
        }
        t
    }

    #[test]
    fn live_message_is_retransmitted_as_is() {
        let mut t = voip(3, 100, 200);
        // At 50 ms with SRTT 20 ms, message 0 (deadline 200 ms) is live.
        assert!(t
            .on_retransmit(at(50), ms(20), SeqNumber(1000), 100)
            .is_empty());
        assert_eq!(t.stats().kept_live, 1);
        assert!(t.poll_expired().is_none());
    }

    #[test]
    fn expired_message_is_replaced_by_live_closest_to_expiry() {
        let mut t = voip(4, 100, 100);
        // At 150 ms, SRTT 40: arrival 170. Deadlines 100,120,140,160 → all expired.
        // Add two live messages with different lengths/deadlines.
        let a = meta(10, Some(200), None); // deadline 150+200 = 350
        t.push(at(150), SeqNumber(1400), &[0xaa; 80], a);
        let b = meta(11, Some(100), None); // deadline 250: closest live
        t.push(at(150), SeqNumber(1480), &[0xbb; 60], b);
        let rw = t.on_retransmit(at(150), ms(40), SeqNumber(1000), 100);
        assert_eq!(rw.len(), 1);
        assert_eq!(rw[0].seq, SeqNumber(1000));
        assert_eq!(rw[0].bytes.len(), 100, "same length as the original");
        assert_eq!(&rw[0].bytes[..60], &[0xbb; 60]);
        assert!(rw[0].bytes[60..].iter().all(|&b| b == 0), "zero padding");
        assert_eq!(t.stats().ir_sent, 1);
        assert_eq!(t.stats().padding_bytes, 40);
        assert_eq!(
            t.poll_expired(),
            Some(ExpiredMessage {
                id: 0,
                reason: ExpiryReason::Replaced { by: Some(11) }
            })
        );
        // Message 11, used as a replacement, is treated as expired at its own
        // slot: the only live candidate left is 10 (80 > 60 bytes: does not fit).
        assert!(t
            .on_first_transmit(at(151), Some(ms(40)), SeqNumber(1480), 60)
            .is_empty());
        // Message 10's slot is large enough for nobody else live; sent as is.
        assert!(t
            .on_first_transmit(at(151), Some(ms(40)), SeqNumber(1400), 80)
            .is_empty());
    }

    #[test]
    fn expired_candidates_rank_last_most_recently_expired_first() {
        let mut t = voip(4, 100, 100);
        // All four expired at arrival 170 (deadlines 100..160). Replacing
        // slot 0: no live candidate; expired ones ranked by time since
        // expiry: message 3 (deadline 160) first.
        let rw = t.on_retransmit(at(150), ms(40), SeqNumber(1000), 100);
        assert_eq!(rw.len(), 1);
        assert_eq!(rw[0].bytes[0], 4, "message 3's bytes (filled with 3+1)");
    }

    #[test]
    fn no_candidate_keeps_original() {
        let mut t = voip(1, 100, 10);
        assert!(t
            .on_retransmit(at(500), ms(40), SeqNumber(1000), 100)
            .is_empty());
        assert_eq!(t.stats().ir_no_candidate, 1);
    }

    #[test]
    fn larger_candidates_do_not_fit() {
        let mut t = MessageTable::new();
        t.push(at(0), SeqNumber(0), &[1; 50], meta(0, Some(10), None));
        t.push(at(0), SeqNumber(50), &[2; 51], meta(1, Some(1000), None));
        assert!(t
            .on_retransmit(at(100), ms(10), SeqNumber(0), 50)
            .is_empty());
        assert_eq!(t.stats().ir_no_candidate, 1);
    }

    #[test]
    fn dependency_keeps_iframe_alive() {
        let mut t = MessageTable::new();
        // I-frame 0 (short lifetime), P-frames 1..3 depend on it (long lifetime).
        t.push(at(0), SeqNumber(0), &[9; 100], meta(0, Some(10), None));
        for i in 1..4u32 {
            let m = meta(i, Some(1000), Some(0));
            t.check(&m, 50).unwrap();
            t.push(
                at(0),
                SeqNumber(100) + (i as usize - 1) * 50,
                &[i as u8; 50],
                m,
            );
        }
        assert!(t
            .on_retransmit(at(100), ms(10), SeqNumber(0), 100)
            .is_empty());
        assert_eq!(t.stats().kept_for_dependency, 1);
        // Once a later target is declared and the dependents are delivered,
        // the I-frame is no longer protected.
        let m = meta(4, Some(1000), Some(3));
        t.check(&m, 40).unwrap();
        t.push(at(100), SeqNumber(250), &[4; 40], m);
        t.on_sack(SeqNumber(100), SeqNumber(250));
        let rw = t.on_retransmit(at(100), ms(10), SeqNumber(0), 100);
        assert_eq!(rw.len(), 1);
        assert_eq!(rw[0].bytes[0], 4);
    }

    #[test]
    fn dependencies_must_not_decrease() {
        let mut t = MessageTable::new();
        t.push(at(0), SeqNumber(0), &[1; 10], meta(5, None, Some(3)));
        assert_eq!(
            t.check(&meta(6, None, Some(2)), 10),
            Err(MetaError::DecreasingDependency)
        );
        assert_eq!(
            t.check(&meta(6, None, Some(6)), 10),
            Err(MetaError::ForwardDependency)
        );
        assert_eq!(
            t.check(&meta(6, None, Some(7)), 10),
            Err(MetaError::ForwardDependency)
        );
        assert_eq!(t.check(&meta(6, None, Some(3)), 10), Ok(()));
        assert_eq!(t.check(&meta(6, None, None), 0), Err(MetaError::Empty));
        // Wrap-around: id 1 after u32::MAX depending on u32::MAX is fine.
        let mut w = MessageTable::new();
        w.push(
            at(0),
            SeqNumber(0),
            &[1; 10],
            meta(u32::MAX - 1, None, Some(u32::MAX - 2)),
        );
        assert_eq!(w.check(&meta(1, None, Some(u32::MAX)), 10), Ok(()));
        assert_eq!(
            w.check(&meta(1, None, Some(u32::MAX - 3)), 10),
            Err(MetaError::DecreasingDependency)
        );
    }

    #[test]
    fn fragment_rule_keeps_partially_received_message() {
        let mut t = MessageTable::new();
        t.push(at(0), SeqNumber(0), &[1; 3000], meta(0, Some(10), None));
        t.push(at(0), SeqNumber(3000), &[2; 100], meta(1, Some(1000), None));
        // The middle of message 0 was SACKed: retransmitting the whole slot
        // (e.g. after RTO) must keep the original bytes.
        t.on_sack(SeqNumber(1500), SeqNumber(2000));
        assert!(t
            .on_retransmit(at(100), ms(10), SeqNumber(0), 3000)
            .is_empty());
        assert_eq!(t.stats().kept_for_fragment, 1);
        // A retransmission of only one fragment never rewrites (slot not contained).
        let mut t2 = MessageTable::new();
        t2.push(at(0), SeqNumber(0), &[1; 3000], meta(0, Some(10), None));
        t2.push(at(0), SeqNumber(3000), &[2; 100], meta(1, Some(1000), None));
        assert!(t2
            .on_retransmit(at(100), ms(10), SeqNumber(0), 1448)
            .is_empty());
    }

    #[test]
    fn ack_removes_and_marks_delivered() {
        let mut t = voip(5, 100, 100);
        t.on_ack(SeqNumber(1200));
        assert_eq!(t.len(), 3);
        t.on_sack(SeqNumber(1300), SeqNumber(1400));
        // Message 3 is delivered: not a candidate for slot 2.
        let rw = t.on_retransmit(at(150), ms(40), SeqNumber(1200), 100);
        assert_eq!(rw.len(), 1);
        assert_eq!(rw[0].bytes[0], 5, "message 4, not the SACKed message 3");
    }

    #[test]
    fn dsack_clears_replacement_mark() {
        let mut t = voip(2, 100, 100);
        t.push(at(150), SeqNumber(1200), &[7; 50], meta(9, Some(500), None));
        let rw = t.on_retransmit(at(150), ms(40), SeqNumber(1000), 100);
        assert_eq!(rw.len(), 1);
        // The ACK for slot 0 arrives with a D-SACK for it: the receiver had
        // the original; message 9 did not arrive there.
        t.on_sack(SeqNumber(1000), SeqNumber(1100));
        t.on_dsack(SeqNumber(1000), SeqNumber(1100));
        assert_eq!(t.stats().dsack_spurious_rewrites, 1);
        // Its own slot is therefore sent normally, not treated as used.
        assert!(t
            .on_first_transmit(at(160), Some(ms(40)), SeqNumber(1200), 50)
            .is_empty());
        // And it is a candidate again for the next expired slot.
        let rw = t.on_retransmit(at(170), ms(40), SeqNumber(1100), 100);
        assert_eq!(rw.len(), 1);
        assert_eq!(rw[0].bytes[0], 7);
    }

    #[test]
    fn expired_before_first_transmission_is_replaced_by_live() {
        let mut t = MessageTable::new();
        t.push(at(0), SeqNumber(0), &[1; 100], meta(0, Some(10), None));
        t.push(at(40), SeqNumber(100), &[2; 90], meta(1, Some(100), None));
        let rw = t.on_first_transmit(at(50), Some(ms(20)), SeqNumber(0), 100);
        assert_eq!(rw.len(), 1);
        assert_eq!(rw[0].bytes[0], 2);
        assert_eq!(
            t.poll_expired(),
            Some(ExpiredMessage {
                id: 0,
                reason: ExpiryReason::ExpiredBeforeSend { by: 1 }
            })
        );
    }

    #[test]
    fn unreplaceable_messages_are_kept() {
        let mut t = MessageTable::new();
        let mut m = meta(0, Some(1), None);
        m.replaceable = false;
        t.push(at(0), SeqNumber(0), &[1; 100], m);
        t.push(at(0), SeqNumber(100), &[2; 50], meta(1, Some(1000), None));
        assert!(t
            .on_retransmit(at(100), ms(10), SeqNumber(0), 100)
            .is_empty());
    }
}
