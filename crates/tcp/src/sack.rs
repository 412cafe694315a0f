//! The retransmission queue and SACK scoreboard (RFC 6675 §3, §4).
//!
//! Every transmitted data (or FIN) segment is remembered with its original
//! boundaries, so a retransmission covers exactly the original sequence
//! range (docs/ARCHITECTURE.md "Hollywood hooks"). Each entry carries the
//! scoreboard flags of RFC 6675: SACKed, lost (`IsLost`, §4) and
//! retransmitted. Byte counters are kept up to date on every flag change so
//! that `pipe` (§4 `SetPipe`) is O(1) instead of a scan.
//!
//! Cost per ACK: O(log n) searches plus the segments whose flags change;
//! already-SACKed data is tracked as merged ranges so that a SACK block that
//! repeats known information does not walk its segments again.
//!
//! Memory: one entry per outstanding segment (bounded by the send buffer)
//! plus at most one SACKed range per entry.

use crate::delivery::TxState;
use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::collections::VecDeque;

/// One transmitted segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    /// First sequence number.
    pub seq: SeqNumber,
    /// Data bytes.
    pub len: u32,
    /// The segment carries FIN (one more unit of sequence space).
    pub fin: bool,
    /// Time of the first transmission.
    pub first_sent: Instant,
    /// Time of the latest transmission.
    pub last_sent: Instant,
    /// Number of transmissions so far (1 = never retransmitted).
    pub times_sent: u32,
    /// Selectively acknowledged (RFC 2018).
    pub sacked: bool,
    /// Deemed lost (RFC 6675 §4 `IsLost`, or an RTO).
    pub lost: bool,
    /// A retransmission of this segment is outstanding (RFC 6675 §4
    /// `SetPipe`: counted in the pipe a second time unless lost).
    pub retrans: bool,
    /// Delivery state when it was last sent (delivery-rate estimation).
    pub tx: TxState,
}

impl Sent {
    /// Sequence-space length (data plus FIN).
    pub fn seq_len(&self) -> usize {
        self.len as usize + self.fin as usize
    }
    /// One past the last sequence number.
    pub fn end(&self) -> SeqNumber {
        self.seq + self.seq_len()
    }
    /// Contributions to the (sacked, lost, retransmitted) byte counters
    /// and the SACKed-segment counter.
    fn contrib(&self) -> (usize, usize, usize, usize) {
        let l = self.seq_len();
        if self.sacked {
            (l, 0, 0, 1)
        } else {
            (
                0,
                if self.lost { l } else { 0 },
                if self.retrans { l } else { 0 },
                0,
            )
        }
    }
}

/// What a cumulative ACK removed from the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Acked {
    /// Segments fully acknowledged.
    pub segments: usize,
    /// Send time of the oldest newly acknowledged segment that was sent only
    /// once and not SACKed before: an unambiguous RTT sample (Karn).
    pub rtt_sent: Option<Instant>,
    /// Some newly acknowledged segment had been retransmitted.
    pub retransmitted: bool,
    /// A FIN was acknowledged.
    pub fin: bool,
}

/// Most SACKed ranges remembered. A receiver has at most one range per
/// hole, and a 4 MiB window of 536-byte segments has fewer than 4 000
/// holes; a hostile peer that SACKs scattered single bytes would otherwise
/// grow the set by one entry per block, each costing a shift of the whole
/// set. Beyond the cap a block that would add a range is still matched
/// against the segments (their flags are exact), just not remembered.
pub(crate) const MAX_SACKED_RANGES: usize = 8192;

/// Retransmission queue with SACK scoreboard.
#[derive(Debug, Clone, Default)]
pub(crate) struct RtxQueue {
    segs: VecDeque<Sent>,
    sacked_bytes: usize,
    lost_bytes: usize,
    retrans_bytes: usize,
    /// Segments SACKed (RACK.segs_sacked, RFC 8985 §6.2 step 4).
    sacked_segs: usize,
    /// Merged SACKed ranges above the cumulative ACK.
    sacked_set: Vec<(SeqNumber, SeqNumber)>,
    /// End of the highest SACKed segment (RFC 6675 HighACK-side marker).
    high_sacked: Option<SeqNumber>,
    /// Every un-SACKed segment ending at or before this is marked lost.
    lost_upto: Option<SeqNumber>,
    /// Segments newly deemed lost, not yet taken.
    lost_log: Vec<Sent>,
}

impl RtxQueue {
    /// An empty queue.
    pub(crate) fn new() -> RtxQueue {
        RtxQueue::default()
    }

    /// Number of outstanding segments.
    pub(crate) fn len(&self) -> usize {
        self.segs.len()
    }

    /// No segment outstanding.
    pub(crate) fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Segment at `i`.
    pub(crate) fn get(&self, i: usize) -> Option<&Sent> {
        self.segs.get(i)
    }

    /// The oldest outstanding segment.
    pub(crate) fn front(&self) -> Option<&Sent> {
        self.segs.front()
    }

    /// Remember a first transmission (must follow the previous segment).
    pub(crate) fn push(&mut self, seq: SeqNumber, len: u32, fin: bool, now: Instant) {
        debug_assert!(self.segs.back().is_none_or(|b| b.end() == seq));
        self.segs.push_back(Sent {
            seq,
            len,
            fin,
            first_sent: now,
            last_sent: now,
            times_sent: 1,
            sacked: false,
            lost: false,
            retrans: false,
            tx: TxState::default(),
        });
    }

    /// Stamp segment `i` with the delivery state of its latest transmission.
    pub(crate) fn stamp(&mut self, i: usize, tx: TxState) {
        if let Some(s) = self.segs.get_mut(i) {
            s.tx = tx;
        }
    }

    /// Segments newly deemed lost since the last call (each transition of
    /// a segment into "lost and not being retransmitted", in the order it
    /// happened), for delivery-rate and congestion-control accounting.
    pub(crate) fn take_newly_lost(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.lost_log)
    }

    /// Bytes SACKed.
    pub(crate) fn sacked_bytes(&self) -> usize {
        self.sacked_bytes
    }

    /// Segments SACKed.
    pub(crate) fn sacked_segments(&self) -> usize {
        self.sacked_segs
    }

    /// Bytes marked lost and not SACKed.
    pub(crate) fn lost_bytes(&self) -> usize {
        self.lost_bytes
    }

    /// The highest outstanding segment.
    pub(crate) fn back(&self) -> Option<&Sent> {
        self.segs.back()
    }

    /// Bytes retransmitted, outstanding and not SACKed.
    pub(crate) fn retrans_bytes(&self) -> usize {
        self.retrans_bytes
    }

    /// End of the highest SACKed segment.
    pub(crate) fn high_sacked(&self) -> Option<SeqNumber> {
        self.high_sacked
    }

    /// RFC 6675 §4 `SetPipe` from the counters: every outstanding byte that
    /// is not SACKed counts once unless lost, and once more if retransmitted.
    pub(crate) fn pipe(&self, outstanding: usize) -> usize {
        (outstanding + self.retrans_bytes).saturating_sub(self.sacked_bytes + self.lost_bytes)
    }

    /// Index of the first segment whose end lies beyond `seq` (the segment
    /// containing `seq`, or the next one).
    pub(crate) fn index_from(&self, seq: SeqNumber) -> usize {
        self.segs.partition_point(|s| s.end() <= seq)
    }

    /// Change the flags of segment `i` through `f`, keeping counters right.
    fn update(&mut self, i: usize, f: impl FnOnce(&mut Sent)) {
        let s = &mut self.segs[i];
        let (a, b, c, d) = s.contrib();
        let was_lost = s.lost && !s.retrans && !s.sacked;
        f(s);
        if !was_lost && s.lost && !s.retrans && !s.sacked {
            self.lost_log.push(*s);
        }
        let (x, y, z, w) = s.contrib();
        self.sacked_bytes = self.sacked_bytes - a + x;
        self.lost_bytes = self.lost_bytes - b + y;
        self.retrans_bytes = self.retrans_bytes - c + z;
        self.sacked_segs = self.sacked_segs - d + w;
    }

    /// Remove everything below `una` (the new cumulative ACK). A segment
    /// acknowledged in part is trimmed at the front.
    #[cfg(test)]
    pub(crate) fn ack_to(&mut self, una: SeqNumber) -> Acked {
        self.ack_to_with(una, |_| {})
    }

    /// [`RtxQueue::ack_to`], calling `delivered` for every segment the ACK
    /// newly delivers (wholly acknowledged and not SACKed before), before
    /// it is removed (RFC 8985 §6.2 steps 2-3 look at each one).
    pub(crate) fn ack_to_with(
        &mut self,
        una: SeqNumber,
        mut delivered: impl FnMut(&Sent),
    ) -> Acked {
        let mut out = Acked::default();
        while let Some(s) = self.segs.front() {
            if s.end() <= una {
                let s = *s;
                if !s.sacked {
                    delivered(&s);
                }
                self.update(0, |s| {
                    s.sacked = false;
                    s.lost = false;
                    s.retrans = false;
                });
                self.segs.pop_front();
                out.segments += 1;
                out.fin |= s.fin;
                if s.times_sent > 1 {
                    out.retransmitted = true;
                } else if !s.sacked && out.rtt_sent.is_none() {
                    out.rtt_sent = Some(s.first_sent);
                }
            } else if s.seq < una {
                // Partially acknowledged: keep the rest as its own segment.
                let cut = una - s.seq;
                if s.times_sent > 1 {
                    out.retransmitted = true;
                }
                self.update(0, |s| {
                    s.seq = una;
                    s.len = s.len.saturating_sub(cut as u32);
                });
                break;
            } else {
                break;
            }
        }
        // Drop SACK state at or below the cumulative ACK.
        let k = self.sacked_set.partition_point(|&(_, r)| r <= una);
        self.sacked_set.drain(..k);
        if let Some(first) = self.sacked_set.first_mut() {
            if first.0 < una {
                first.0 = una;
            }
        }
        if self.segs.is_empty() {
            self.high_sacked = None;
            self.lost_upto = None;
            self.sacked_set.clear();
        }
        out
    }

    /// Apply one (validated, non-duplicate) SACK block `[left, right)`.
    /// Returns the sequence-space bytes newly marked SACKed.
    #[cfg(test)]
    pub(crate) fn sack(&mut self, left: SeqNumber, right: SeqNumber) -> usize {
        self.sack_with(left, right, |_| {})
    }

    /// [`RtxQueue::sack`], calling `delivered` for every segment newly
    /// marked SACKed.
    pub(crate) fn sack_with(
        &mut self,
        left: SeqNumber,
        right: SeqNumber,
        mut delivered: impl FnMut(&Sent),
    ) -> usize {
        if left >= right {
            return 0;
        }
        // Parts of the block not already known as SACKed.
        let mut uncovered: [(SeqNumber, SeqNumber); 5] = Default::default();
        let mut nu = 0;
        let i = self.sacked_set.partition_point(|&(_, r)| r < left);
        let mut j = i;
        let mut cursor = left;
        let (mut ml, mut mr) = (left, right);
        while j < self.sacked_set.len() && self.sacked_set[j].0 <= right {
            let (l, r) = self.sacked_set[j];
            if l > cursor && nu < uncovered.len() {
                uncovered[nu] = (cursor, l.min(right));
                nu += 1;
            }
            cursor = cursor.max(r);
            ml = ml.min(l);
            mr = mr.max(r);
            j += 1;
        }
        if cursor < right {
            if nu == uncovered.len() {
                // Many small pieces: fall back to one walk over the block.
                uncovered[0] = (left, right);
                nu = 1;
            } else {
                uncovered[nu] = (cursor, right);
                nu += 1;
            }
        }
        if j > i || self.sacked_set.len() < MAX_SACKED_RANGES {
            self.sacked_set.splice(i..j, std::iter::once((ml, mr)));
        }
        let mut newly = 0;
        for &(ul, ur) in &uncovered[..nu] {
            let mut k = self.index_from(ul);
            while k < self.segs.len() && self.segs[k].seq < ur {
                let s = self.segs[k];
                if !s.sacked && s.seq >= ml && s.end() <= mr {
                    newly += s.seq_len();
                    delivered(&s);
                    self.update(k, |s| s.sacked = true);
                    let end = s.end();
                    self.high_sacked = Some(self.high_sacked.map_or(end, |h| h.max(end)));
                }
                k += 1;
            }
        }
        newly
    }

    /// RFC 6675 §4 `IsLost` applied to the whole queue: an un-SACKed segment
    /// is lost once `dupthresh` SACKed segments, or more than
    /// `(dupthresh - 1) * smss` SACKed bytes, lie above it. Because that set
    /// only grows downwards, lost segments form a prefix of the un-SACKed
    /// ones; we find its new end by walking down from the highest SACKed
    /// segment and mark only the newly lost. Returns bytes newly marked.
    pub(crate) fn update_lost(&mut self, dupthresh: u32, smss: usize) -> usize {
        let Some(high) = self.high_sacked else {
            return 0;
        };
        let floor = self.lost_upto.map_or(0, |u| self.index_from(u));
        let mut k = self.index_from(high).min(self.segs.len());
        let (mut cnt, mut bytes) = (0u32, 0usize);
        let limit = (dupthresh.saturating_sub(1) as usize).saturating_mul(smss);
        let mut boundary = None;
        while k > floor {
            k -= 1;
            let s = &self.segs[k];
            if s.sacked {
                cnt += 1;
                bytes += s.seq_len();
                if cnt >= dupthresh || bytes > limit {
                    boundary = Some(k);
                    break;
                }
            }
        }
        let Some(b) = boundary else { return 0 };
        let mut newly = 0;
        for k in floor..b {
            let s = self.segs[k];
            if !s.sacked && !s.lost {
                newly += s.seq_len();
                self.update(k, |s| s.lost = true);
            }
        }
        self.lost_upto = Some(self.segs[b].seq);
        newly
    }

    /// `IsLost` for the oldest outstanding segment.
    pub(crate) fn front_lost(&self) -> bool {
        self.segs.front().is_some_and(|s| s.lost && !s.sacked)
    }

    /// Segment `i` is lost (RACK, RFC 8985 §6.2 step 5 / §6.3): marked
    /// lost, and a retransmission of it no longer counts as in flight (it
    /// was lost too), so that it is sent again.
    pub(crate) fn mark_lost_again(&mut self, i: usize) {
        if i < self.segs.len() && !self.segs[i].sacked {
            self.update(i, |s| {
                s.lost = true;
                s.retrans = false;
            });
        }
    }

    /// Mark segment `i` lost (fast retransmit of the first segment).
    pub(crate) fn mark_lost(&mut self, i: usize) {
        if i < self.segs.len() {
            self.update(i, |s| s.lost = true);
        }
    }

    /// RTO (RFC 6675 §5.1, RFC 5681 §3.1): every un-SACKed segment is lost
    /// and no retransmission is outstanding any more.
    pub(crate) fn mark_all_lost(&mut self) {
        for k in 0..self.segs.len() {
            if !self.segs[k].sacked {
                self.update(k, |s| {
                    s.lost = true;
                    s.retrans = false;
                });
            }
        }
        self.lost_upto = self.segs.back().map(|s| s.end());
    }

    /// Forget all SACK information (the receiver reneged, RFC 2018 §8).
    pub(crate) fn clear_sacks(&mut self) {
        for k in 0..self.segs.len() {
            if self.segs[k].sacked {
                self.update(k, |s| s.sacked = false);
            }
        }
        self.sacked_set.clear();
        self.high_sacked = None;
    }

    /// Record a retransmission of segment `i` at `now`.
    pub(crate) fn on_retransmit(&mut self, i: usize, now: Instant) {
        if i < self.segs.len() {
            self.update(i, |s| {
                s.times_sent = s.times_sent.saturating_add(1);
                s.last_sent = now;
                s.retrans = true;
            });
        }
    }

    /// First segment at or after index `from` that is lost, not SACKed and
    /// not yet retransmitted (RFC 6675 §4 `NextSeg` rule 1 candidates).
    #[cfg(test)]
    pub(crate) fn next_lost(&self, from: usize) -> Option<usize> {
        (from..self.segs.len()).find(|&k| {
            let s = &self.segs[k];
            !s.sacked && s.lost && !s.retrans
        })
    }

    /// The merged SACKed ranges (tests).
    #[cfg(test)]
    pub(crate) fn sacked_ranges(&self) -> &[(SeqNumber, SeqNumber)] {
        &self.sacked_set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Instant = Instant::ZERO;

    /// Ten 100-byte segments starting at 1000.
    fn queue() -> RtxQueue {
        let mut q = RtxQueue::new();
        for i in 0..10u32 {
            q.push(SeqNumber(1000 + 100 * i), 100, false, T);
        }
        q
    }

    fn s(n: u32) -> SeqNumber {
        SeqNumber(n)
    }

    #[test]
    fn sack_marks_whole_segments_and_counts() {
        let mut q = queue();
        assert_eq!(q.sack(s(1200), s(1400)), 200);
        // Repeating the block adds nothing.
        assert_eq!(q.sack(s(1200), s(1400)), 0);
        // A partial block marks nothing until the rest is covered.
        assert_eq!(q.sack(s(1500), s(1550)), 0);
        assert_eq!(q.sack(s(1550), s(1600)), 100);
        assert_eq!(q.sacked_bytes(), 300);
        assert_eq!(q.high_sacked(), Some(s(1600)));
        assert_eq!(q.sacked_ranges(), &[(s(1200), s(1400)), (s(1500), s(1600))]);
        // Bridging block merges ranges.
        assert_eq!(q.sack(s(1200), s(1600)), 100);
        assert_eq!(q.sacked_ranges(), &[(s(1200), s(1600))]);
        assert_eq!(q.pipe(1000), 600);
    }

    #[test]
    fn scattered_single_byte_sacks_keep_the_set_bounded() {
        // 20 000 segments of 100 bytes; a hostile peer SACKs one byte of
        // each, which covers no segment.
        let mut q = RtxQueue::new();
        for i in 0..20_000u32 {
            q.push(SeqNumber(1000 + 100 * i), 100, false, T);
        }
        for i in 0..20_000u32 {
            let l = s(1000 + 100 * i + 50);
            assert_eq!(q.sack(l, l + 1), 0);
        }
        assert_eq!(q.sacked_ranges().len(), MAX_SACKED_RANGES);
        // Whole segments are still marked, beyond the cap too, and a block
        // that joins a remembered range still merges.
        assert_eq!(q.sack(s(1000 + 100 * 19_000), s(1000 + 100 * 19_002)), 200);
        assert_eq!(q.sack(s(1000), s(1100)), 100);
        assert_eq!(q.sacked_bytes(), 300);
        assert!(q.sacked_ranges().len() <= MAX_SACKED_RANGES);
    }

    #[test]
    fn is_lost_prefix() {
        let mut q = queue();
        q.sack(s(1300), s(1500)); // two segments above 1000..1300
        assert_eq!(q.update_lost(3, 100), 0);
        q.sack(s(1600), s(1700)); // third SACKed segment
                                  // Segments 1000, 1100, 1200 are lost; 1500 is not (only one above).
        assert_eq!(q.update_lost(3, 100), 300);
        assert!(q.front_lost());
        assert_eq!(q.lost_bytes(), 300);
        assert!(!q.get(5).unwrap().lost);
        // pipe = 1000 - 300 sacked - 300 lost
        assert_eq!(q.pipe(1000), 400);
        let i = q.next_lost(0).unwrap();
        q.on_retransmit(i, T);
        assert_eq!(q.pipe(1000), 500);
        assert_eq!(q.next_lost(0), Some(1));
        // Cumulative ACK removes counted state.
        let a = q.ack_to(s(1500));
        assert_eq!(a.segments, 5);
        assert!(a.retransmitted);
        assert_eq!(
            (q.sacked_bytes(), q.lost_bytes(), q.retrans_bytes()),
            (100, 0, 0)
        );
    }

    #[test]
    fn partial_ack_trims_and_rto_marks_all() {
        let mut q = queue();
        let a = q.ack_to(s(1050));
        assert_eq!(a.segments, 0);
        assert_eq!(q.front().unwrap().seq, s(1050));
        assert_eq!(q.front().unwrap().len, 50);
        q.sack(s(1500), s(1600));
        q.mark_all_lost();
        assert_eq!(q.lost_bytes(), 950 - 100);
        assert_eq!(q.pipe(950), 0);
        q.clear_sacks();
        assert_eq!(q.sacked_bytes(), 0);
    }

    #[test]
    fn rtt_sample_only_from_clean_segments() {
        let mut q = RtxQueue::new();
        q.push(s(0), 10, false, Instant::from_nanos(5));
        q.push(s(10), 10, false, Instant::from_nanos(7));
        q.on_retransmit(0, Instant::from_nanos(9));
        let a = q.ack_to(s(20));
        assert_eq!(a.rtt_sent, Some(Instant::from_nanos(7)));
        assert!(a.retransmitted);
    }
}
