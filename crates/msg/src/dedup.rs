//! Exactly-once-or-never, bounded by stream position (not by ids).
//!
//! thesis §4.3: out-of-order delivery hands the same bytes to the
//! intermediary layer more than once (out of order, then again in a
//! retransmission or an overlapping segment), and the prototype passed the
//! resulting duplicates to the application. Here they are removed.
//!
//! # Why positions, not an id window
//!
//! A TCP Hollywood sender sends each message id at exactly **one** stream
//! position (the sequence number of its frame's opening marker) for the
//! whole connection. Ids carry no distance information: an id whose message
//! expired in the sender's queue is burned and never appears on the wire
//! (so two messages in flight may be any number of ids apart), and an
//! inconsistent retransmission (thesis §4.2) puts a *newer* id at an
//! *older* position. A window of ids behind the highest one seen would
//! therefore refuse a reliable message that TCP delivered (and ACKed) after
//! many newer ones. Instead, each delivered frame is remembered as
//! `(position, id)` for as long as a copy of it can still be decoded, and
//! no frame is ever refused for its id's distance from others.
//!
//! A copy can only be decoded while its opening marker can still be seen:
//! the deframer trims every pushed byte below the floor (RCV.NXT, or the
//! end of what an ordered stream delivered) *before* processing it, and
//! keeps below the floor at most the fragment that straddles it. So the
//! entries of frames whose opener lies below the *horizon* — the floor, or
//! the start of the lowest buffered fragment if that is lower — can never
//! match again and are purged ([`Seen::purge_below`]). What remains are
//! the frames delivered at or above the horizon: with the floor advanced
//! as the owner should, at most one entry per frame in the receive window
//! (plus the rewrites of its ranges by inconsistent retransmissions).
//!
//! An owner that never advances the floor, or a peer that rewrites one
//! range with ever new frames, is stopped by `max_entries`: beyond it the
//! lowest-position entries are evicted, and a verified frame whose opener
//! lies below an evicted position (it may be a copy of a forgotten one)
//! is refused ([`Verdict::Unverifiable`]) — never delivered twice.
//!
//! Defensively, a frame whose id was delivered at *another* position is a
//! duplicate too ([`Verdict::Repeated`]): a sender that follows the thesis
//! literally (§4.2: marking a message used as a replacement "reduces the
//! likelihood that it is sent twice ... but cannot guarantee" it), or a
//! buggy one. Such a repeat may come long after the first copy's position
//! has passed the floor, so besides the entries in play the ids delivered
//! recently are remembered in a fixed bitset ([`IdWindow`], the
//! [`RECENT_IDS`] ids at and behind the highest id delivered, 8 KiB). It
//! only ever *recognises* ids: an id outside it is never refused.

use std::collections::{BTreeMap, BTreeSet};

/// Outcome of [`Seen::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// First time seen: deliver.
    New,
    /// The same id was delivered from the same position: a copy.
    Duplicate,
    /// The same id was delivered from another position (a sender that
    /// repeated an id; a conforming sender never does).
    Repeated,
    /// The frame starts below an entry evicted by the entry bound: it may
    /// be a copy of a forgotten frame, so it is refused.
    Unverifiable,
}

/// Rough heap cost of one entry (one key in each of two B-trees, with node
/// slack), for documentation and sizing.
pub(crate) const ENTRY_COST: usize = 48;

/// Ids remembered by [`IdWindow`] behind the highest id delivered.
pub(crate) const RECENT_IDS: u32 = 1 << 16;

/// The ids delivered recently: a bitset ring over the [`RECENT_IDS`] ids at
/// and behind the highest id recorded (serial-number order, RFC 1982
/// style: `a` is after `b` iff `(a - b) mod 2^32` is in `1..2^31`). A set
/// bit always stands for an id that was recorded (slots are cleared as the
/// window slides over them), so it never mistakes a new id for an old one;
/// ids behind the window are simply not known.
#[derive(Debug, Clone)]
pub(crate) struct IdWindow {
    bits: Vec<u64>,
    highest: Option<u32>,
}

impl IdWindow {
    pub(crate) fn new() -> Self {
        // The 8 KiB bitset comes with the first id (a byte-stream or idle
        // connection never pays for it).
        IdWindow {
            bits: Vec::new(),
            highest: None,
        }
    }

    #[inline]
    fn slot(id: u32) -> (usize, u64) {
        let i = id & (RECENT_IDS - 1);
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Whether `id` is at or behind the highest id by less than the window.
    fn in_window(&self, id: u32) -> bool {
        self.highest
            .is_some_and(|h| h.wrapping_sub(id) < RECENT_IDS)
    }

    /// Whether `id` was recorded (and is still inside the window).
    pub(crate) fn contains(&self, id: u32) -> bool {
        let (w, m) = Self::slot(id);
        self.in_window(id) && self.bits[w] & m != 0
    }

    /// Records `id`, sliding the window forward if it is ahead. An id
    /// behind the window is not recorded.
    pub(crate) fn record(&mut self, id: u32) {
        if self.bits.is_empty() {
            self.bits = vec![0; (RECENT_IDS / 64) as usize];
        }
        match self.highest {
            Some(h) if !self.in_window(id) => {
                let ahead = id.wrapping_sub(h);
                if (ahead as i32) < 0 {
                    return; // behind the window
                }
                if ahead >= RECENT_IDS {
                    self.bits.fill(0);
                } else {
                    // Forget the slots of h+1 ..= id (they now stand for
                    // new ids).
                    let mut i = h.wrapping_add(1);
                    for _ in 0..ahead {
                        let (w, m) = Self::slot(i);
                        self.bits[w] &= !m;
                        i = i.wrapping_add(1);
                    }
                }
                self.highest = Some(id);
            }
            Some(_) => {}
            None => self.highest = Some(id),
        }
        let (w, m) = Self::slot(id);
        self.bits[w] |= m;
    }
}

/// The delivered frames still in play.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// `(position, id)` of every remembered frame.
    by_pos: BTreeSet<(u64, u32)>,
    /// Id → the position it is remembered at (one per id).
    by_id: BTreeMap<u32, u64>,
    max_entries: usize,
    /// Frames with an opener below this may have lost their entry to the
    /// bound (0: nothing evicted).
    forgotten_below: u64,
    /// Ids delivered recently, wherever they were.
    recent: IdWindow,
}

impl Seen {
    /// At most `max_entries` entries (at least 1).
    pub(crate) fn new(max_entries: usize) -> Self {
        Seen {
            by_pos: BTreeSet::new(),
            by_id: BTreeMap::new(),
            max_entries: max_entries.max(1),
            forgotten_below: 0,
            recent: IdWindow::new(),
        }
    }

    /// Entries held now.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Checks the verified frame `id` whose opening marker is at `pos`,
    /// and records it if new. Returns the verdict and the number of
    /// entries evicted to stay within the bound.
    pub(crate) fn check(&mut self, pos: u64, id: u32) -> (Verdict, u64) {
        if let Some(&p) = self.by_id.get(&id) {
            if p == pos {
                return (Verdict::Duplicate, 0);
            }
            if pos > p {
                // Keep the entry alive as long as the later copy can recur.
                self.by_pos.remove(&(p, id));
                self.by_pos.insert((pos, id));
                self.by_id.insert(id, pos);
            }
            return (Verdict::Repeated, 0);
        }
        if self.recent.contains(id) {
            // Delivered from a position no longer in play: bytes below the
            // floor are trimmed, so this is another position.
            return (Verdict::Repeated, 0);
        }
        if pos < self.forgotten_below {
            return (Verdict::Unverifiable, 0);
        }
        self.by_pos.insert((pos, id));
        self.by_id.insert(id, pos);
        self.recent.record(id);
        let mut evicted = 0;
        while self.by_id.len() > self.max_entries {
            let Some((p, old)) = self.by_pos.pop_first() else {
                break;
            };
            self.by_id.remove(&old);
            self.forgotten_below = self.forgotten_below.max(p + 1);
            evicted += 1;
        }
        // If its own entry was the lowest and went, it is still new (an
        // entry at `pos` would have been kept): a copy will be refused.
        (Verdict::New, evicted)
    }

    /// Forgets the frames whose opening marker lies below `horizon`: no
    /// copy of them can be decoded any more.
    pub(crate) fn purge_below(&mut self, horizon: u64) {
        while let Some(&(p, id)) = self.by_pos.first() {
            if p >= horizon {
                break;
            }
            self.by_pos.pop_first();
            self.by_id.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Verdict::*;

    #[test]
    fn by_position_not_by_id_distance() {
        let mut s = Seen::new(100);
        assert_eq!(s.check(1000, 7), (New, 0));
        assert_eq!(s.check(1000, 7), (Duplicate, 0));
        // Ids millions apart, in any order: all new.
        assert_eq!(s.check(2000, 7_000_007), (New, 0));
        assert_eq!(s.check(3000, 3), (New, 0));
        assert_eq!(s.check(3000, u32::MAX), (New, 0)); // a rewrite
                                                       // A newer id at an older position (inconsistent retransmission).
        assert_eq!(s.check(1000, 9_000_000), (New, 0));
        assert_eq!(s.check(1000, 9_000_000), (Duplicate, 0));
        // The same id at another position: defensive duplicate.
        assert_eq!(s.check(5000, 7), (Repeated, 0));
        assert_eq!(s.len(), 5);
        // Frames below the horizon are forgotten; 7 moved to 5000.
        s.purge_below(2001);
        assert_eq!(s.len(), 3);
        assert_eq!(s.check(5000, 7), (Duplicate, 0));
        assert_eq!(s.check(3000, 3), (Duplicate, 0));
        // 7_000_007 is purged and 2e6 ids behind the highest (9e6): not
        // known any more (a conforming sender never repeats it).
        assert_eq!(s.check(2000, 7_000_007), (New, 0));
        // A purged id close to the highest is still recognised.
        assert_eq!(s.check(6000, 9_000_001), (New, 0));
        s.purge_below(7000);
        assert_eq!(s.len(), 0);
        assert_eq!(s.check(8000, 9_000_001), (Repeated, 0));
        assert_eq!(s.check(8000, 8_999_999), (New, 0));
    }

    #[test]
    fn recent_ids_window() {
        let mut w = IdWindow::new();
        assert!(!w.contains(0));
        w.record(10);
        assert!(w.contains(10) && !w.contains(9) && !w.contains(11));
        w.record(5);
        assert!(w.contains(5));
        // Slide by less than the window: 10 stays, 5 stays.
        w.record(10 + RECENT_IDS - 6);
        assert!(w.contains(10) && w.contains(5));
        // One more: 5 leaves the window.
        w.record(10 + RECENT_IDS - 4);
        assert!(!w.contains(5) && w.contains(10));
        // A jump of millions clears everything; older ids are unknown, not
        // refused, and recording them is a no-op.
        w.record(50_000_000);
        assert!(!w.contains(10) && w.contains(50_000_000));
        w.record(10);
        assert!(!w.contains(10));
        // Wrapping at 2^32.
        let mut w = IdWindow::new();
        for id in (u32::MAX - 100..=u32::MAX).chain(0..100) {
            w.record(id);
        }
        assert!((u32::MAX - 100..=u32::MAX)
            .chain(0..100)
            .all(|id| w.contains(id)));
        assert!(!w.contains(100) && !w.contains(u32::MAX - 101));
        // A slot reused by a newer id does not stand for the old one.
        w.record(99 + RECENT_IDS);
        assert!(!w.contains(99) && w.contains(99 + RECENT_IDS));
    }

    #[test]
    fn bound_evicts_lowest_and_refuses_below() {
        let mut s = Seen::new(3);
        for (i, pos) in [10u64, 20, 30].into_iter().enumerate() {
            assert_eq!(s.check(pos, i as u32), (New, 0));
        }
        assert_eq!(s.check(40, 3), (New, 1)); // evicts (10, 0)
        assert_eq!(s.len(), 3);
        assert_eq!(s.check(10, 0), (Repeated, 0), "recent id: never twice");
        s.recent = IdWindow::new(); // as if the ids were far apart
        assert_eq!(s.check(10, 0), (Unverifiable, 0), "never twice");
        assert_eq!(s.check(5, 99), (Unverifiable, 0));
        assert_eq!(s.check(11, 99), (New, 1)); // evicts (11, 99) itself
        assert_eq!(s.check(11, 99), (Repeated, 0)); // the id window knows it
        s.recent = IdWindow::new();
        assert_eq!(s.check(11, 99), (Unverifiable, 0));
        assert_eq!(s.check(20, 1), (Duplicate, 0));
    }
}
