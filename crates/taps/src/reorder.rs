//! A bounded reorder buffer for a relay's receiving side.
//!
//! TCP Hollywood (thesis §4.3) and QUIC with a stream per message hand
//! messages over as they arrive, so one lost and retransmitted segment
//! lets the messages behind it overtake. That is the point for an
//! application that plays out by timestamp (the thesis's VoIP and video
//! receivers keep their own playout buffer, §5.1), but `hollywood
//! transmit` hands datagrams to programs that do not reorder: an MPEG-TS
//! demuxer reads a packet behind a later one as a continuity error and
//! drops it. So the relay puts messages back in the sender's order — the
//! protocol's message ids are consecutive per connection — and waits for a
//! missing one at most `window`: a message held behind a gap leaves once
//! the gap fills or once it has waited `window`, whichever comes first
//! (then the gap is given up: its message was abandoned by the sender,
//! expired, or is still on its way). A message that arrives behind a gap
//! already given up is passed on at once, out of order, rather than
//! dropped: nothing is lost silently, and the counters say it happened.
//!
//! A limit: a message the sender let expire before it reached the wire
//! (`NotSent`, or a QUIC message dropped before sending) leaves a gap in
//! the ids that never fills, and what arrives behind it waits the whole
//! window. The receiver cannot tell such a gap from a loss being repaired;
//! a "lowest live id" from the sender would (not built).
//!
//! Sans-IO: every call takes `now`; [`Reorder::next_timeout`] says when
//! [`Reorder::poll`] has work.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Messages held at most (beyond it the oldest gap is given up).
pub const MAX_HELD: usize = 4096;
/// Bytes held at most (beyond it the oldest gap is given up).
pub const MAX_HELD_BYTES: usize = 8 << 20;

/// Counters of a [`Reorder`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Messages that waited for a gap before leaving.
    pub held: u64,
    /// Gaps given up (a missing run of ids, counted once per run).
    pub gaps_skipped: u64,
    /// Messages that arrived behind a gap already given up (or repeated an
    /// id already passed on), passed on out of order.
    pub behind: u64,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Reorder {
    window: Duration,
    /// The id expected next, as an unwrapped 64-bit id.
    next: Option<i64>,
    /// Held messages by unwrapped id, with when they arrived.
    held: BTreeMap<i64, (Vec<u8>, Instant)>,
    held_bytes: usize,
    stats: ReorderStats,
}

impl std::ops::Add for ReorderStats {
    type Output = ReorderStats;
    fn add(self, o: ReorderStats) -> ReorderStats {
        ReorderStats {
            held: self.held + o.held,
            gaps_skipped: self.gaps_skipped + o.gaps_skipped,
            behind: self.behind + o.behind,
        }
    }
}

impl Reorder {
    /// A buffer that holds a message behind a gap at most `window`
    /// (zero: pass every message on as it arrives).
    pub fn new(window: Duration) -> Reorder {
        Reorder {
            window,
            next: None,
            held: BTreeMap::new(),
            held_bytes: 0,
            stats: ReorderStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Messages held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Message `id` (the sender's consecutive protocol id) arrived at
    /// `now`: what may leave now, in order, appended to `out`.
    pub fn push(&mut self, id: u32, data: Vec<u8>, now: Instant, out: &mut Vec<Vec<u8>>) {
        if self.window.is_zero() {
            out.push(data);
            return;
        }
        let next = *self.next.get_or_insert(i64::from(id));
        // Serial-number distance (RFC 1982): ids wrap at 2^32.
        let ext = next + i64::from(id.wrapping_sub(next as u32) as i32);
        if ext < next || self.held.contains_key(&ext) {
            self.stats.behind += 1;
            out.push(data);
            return;
        }
        self.held_bytes += data.len();
        self.held.insert(ext, (data, now));
        if ext != next {
            self.stats.held += 1;
        }
        self.release(out);
        while self.held.len() > MAX_HELD || self.held_bytes > MAX_HELD_BYTES {
            self.skip_to_first(out);
        }
    }

    /// Give up the gaps whose messages have waited `window`; what leaves,
    /// in order, appended to `out`.
    pub fn poll(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) {
        // The last held id that has waited its window: everything up to
        // it leaves (in order, gaps given up).
        let due = self
            .held
            .iter()
            .filter(|(_, (_, at))| *at + self.window <= now)
            .map(|(id, _)| *id)
            .next_back();
        if let Some(due) = due {
            while self
                .held
                .first_key_value()
                .is_some_and(|(id, _)| *id <= due)
            {
                self.skip_to_first(out);
            }
        }
    }

    /// When [`Reorder::poll`] next has work.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.held.values().map(|(_, at)| *at + self.window).min()
    }

    /// The connection ended: everything held leaves, in order.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        while !self.held.is_empty() {
            self.skip_to_first(out);
        }
        self.next = None;
    }

    /// Give up the gap before the first held message and release from it.
    fn skip_to_first(&mut self, out: &mut Vec<Vec<u8>>) {
        if let Some((&first, _)) = self.held.first_key_value() {
            if self.next.is_some_and(|n| first > n) {
                self.stats.gaps_skipped += 1;
            }
            self.next = Some(first);
            self.release(out);
        }
    }

    fn release(&mut self, out: &mut Vec<Vec<u8>>) {
        let Some(mut next) = self.next else { return };
        while let Some((data, _)) = self.held.remove(&next) {
            self.held_bytes -= data.len();
            out.push(data);
            next += 1;
        }
        self.next = Some(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(t0: Instant, m: u64) -> Instant {
        t0 + Duration::from_millis(m)
    }

    fn b(x: u8) -> Vec<u8> {
        vec![x]
    }

    #[test]
    fn a_gap_that_fills_in_time_puts_messages_back_in_order() {
        let t0 = Instant::now();
        let mut r = Reorder::new(Duration::from_millis(90));
        let mut out = Vec::new();
        r.push(10, b(10), t0, &mut out);
        r.push(12, b(12), ms(t0, 5), &mut out);
        r.push(13, b(13), ms(t0, 10), &mut out);
        assert_eq!(out, vec![b(10)]);
        assert_eq!(r.next_timeout(), Some(ms(t0, 95)));
        r.poll(ms(t0, 94), &mut out);
        assert_eq!(out.len(), 1);
        r.push(11, b(11), ms(t0, 80), &mut out);
        assert_eq!(out, vec![b(10), b(11), b(12), b(13)]);
        assert!(r.is_empty());
        assert_eq!(
            r.stats(),
            ReorderStats {
                held: 2,
                gaps_skipped: 0,
                behind: 0
            }
        );
    }

    #[test]
    fn a_gap_is_given_up_after_the_window_and_a_straggler_still_leaves() {
        let t0 = Instant::now();
        let mut r = Reorder::new(Duration::from_millis(90));
        let mut out = Vec::new();
        r.push(0, b(0), t0, &mut out);
        r.push(2, b(2), ms(t0, 10), &mut out);
        r.push(3, b(3), ms(t0, 20), &mut out);
        r.poll(ms(t0, 99), &mut out);
        assert_eq!(out, vec![b(0)]);
        r.poll(ms(t0, 100), &mut out);
        assert_eq!(out, vec![b(0), b(2), b(3)]);
        // 1 arrives after its gap was given up: passed on, counted.
        r.push(1, b(1), ms(t0, 120), &mut out);
        assert_eq!(out.last(), Some(&b(1)));
        assert_eq!(
            r.stats(),
            ReorderStats {
                held: 2,
                gaps_skipped: 1,
                behind: 1
            }
        );
        assert_eq!(r.next_timeout(), None);
    }

    #[test]
    fn ids_wrap_and_a_zero_window_passes_everything_through() {
        let t0 = Instant::now();
        let mut r = Reorder::new(Duration::from_millis(50));
        let mut out = Vec::new();
        r.push(u32::MAX, b(1), t0, &mut out);
        r.push(1, b(3), t0, &mut out);
        r.push(0, b(2), t0, &mut out);
        assert_eq!(out, vec![b(1), b(2), b(3)]);
        let mut z = Reorder::new(Duration::ZERO);
        let mut out = Vec::new();
        z.push(5, b(5), t0, &mut out);
        z.push(3, b(3), t0, &mut out);
        assert_eq!(out, vec![b(5), b(3)]);
        assert!(z.is_empty());
    }

    #[test]
    fn held_bytes_are_bounded() {
        let t0 = Instant::now();
        let mut r = Reorder::new(Duration::from_secs(10));
        let mut out = Vec::new();
        r.push(0, b(0), t0, &mut out);
        let big = vec![0u8; 1 << 20];
        for id in 2..20u32 {
            r.push(id, big.clone(), t0, &mut out);
            assert!(r.held_bytes <= MAX_HELD_BYTES);
        }
        assert!(r.stats().gaps_skipped >= 1);
    }

    #[test]
    fn memory_is_bounded() {
        let t0 = Instant::now();
        let mut r = Reorder::new(Duration::from_secs(10));
        let mut out = Vec::new();
        r.push(0, b(0), t0, &mut out);
        for id in 2..(MAX_HELD as u32 + 100) {
            r.push(id, b(0), t0, &mut out);
            assert!(r.len() <= MAX_HELD);
        }
        assert!(out.len() > 1);
    }

    proptest! {
        /// Every message leaves exactly once; what leaves without having
        /// been counted `behind` leaves in id order; nothing waits beyond
        /// its window.
        #[test]
        fn every_message_leaves_once_in_order_within_its_window(
            perm in Just((0u32..60).collect::<Vec<_>>()).prop_shuffle(),
            keep in proptest::collection::vec(any::<bool>(), 60),
            gaps in proptest::collection::vec(0u64..40, 60),
        ) {
            let t0 = Instant::now();
            let window = Duration::from_millis(50);
            let mut r = Reorder::new(window);
            let mut now = t0;
            let mut left: Vec<(u32, Instant)> = Vec::new();
            let mut pushed = Vec::new();
            let mut arrived = std::collections::HashMap::new();
            for (k, id) in perm.iter().enumerate() {
                if !keep[k] { continue; }
                now += Duration::from_millis(gaps[k]);
                let mut out = Vec::new();
                r.poll(now, &mut out);
                r.push(*id, id.to_be_bytes().to_vec(), now, &mut out);
                arrived.insert(*id, now);
                pushed.push(*id);
                left.extend(out.iter().map(|d| (u32::from_be_bytes([d[0], d[1], d[2], d[3]]), now)));
                if let Some(t) = r.next_timeout() {
                    prop_assert!(t <= now + window);
                }
            }
            let mut out = Vec::new();
            r.flush(&mut out);
            left.extend(out.iter().map(|d| (u32::from_be_bytes([d[0], d[1], d[2], d[3]]), now)));
            let mut ids: Vec<u32> = left.iter().map(|(i, _)| *i).collect();
            ids.sort_unstable();
            pushed.sort_unstable();
            prop_assert_eq!(ids, pushed);
            let inversions = left.windows(2).filter(|w| w[1].0 < w[0].0).count() as u64;
            prop_assert!(inversions <= r.stats().behind);
        }
    }
}
