//! Exactly-once-or-never: a sliding window of seen message ids.
//!
//! thesis §4.3: out-of-order delivery hands the same segment to the
//! intermediary layer twice (once out of order, once in order), and the
//! prototype passed the resulting duplicates to the application. Here
//! duplicates are removed: a bitset ring remembers which of the `size` ids
//! at and behind the highest id seen were delivered; ids further behind are
//! refused as too old. Ids wrap at 2^32 and are compared with serial-number
//! arithmetic (RFC 1982 style): `a` is after `b` iff `(a - b) mod 2^32` is in
//! `1..2^31`.

/// Outcome of [`DedupWindow::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// First time seen: deliver.
    New,
    /// Already seen within the window.
    Duplicate,
    /// Behind the window: cannot tell, refuse.
    TooOld,
}

/// Largest accepted window (keeps serial arithmetic unambiguous).
pub(crate) const MAX_WINDOW: u32 = 1 << 30;

#[derive(Debug, Clone)]
pub(crate) struct DedupWindow {
    bits: Vec<u64>,
    /// Window size in ids, a power of two, ≥ 64.
    size: u32,
    highest: Option<u32>,
}

impl DedupWindow {
    /// A window of `size` ids, rounded up to a power of two in `64..=2^30`.
    pub(crate) fn new(size: u32) -> Self {
        let size = size.clamp(64, MAX_WINDOW).next_power_of_two();
        DedupWindow {
            bits: vec![0; (size / 64) as usize],
            size,
            highest: None,
        }
    }

    #[inline]
    fn slot(&self, id: u32) -> (usize, u64) {
        let i = id & (self.size - 1);
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Clears the slots of ids `from, from+1, …` (`count` ids, `count <
    /// size`), word-wise.
    fn clear(&mut self, from: u32, count: u32) {
        let mut i = from & (self.size - 1);
        let mut left = count;
        while left > 0 {
            let bit = i % 64;
            let take = (64 - bit).min(left);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << bit
            };
            self.bits[(i / 64) as usize] &= !mask;
            left -= take;
            i = (i + take) & (self.size - 1);
        }
    }

    /// Records `id` and says whether it is new.
    pub(crate) fn check(&mut self, id: u32) -> Verdict {
        let Some(high) = self.highest else {
            self.highest = Some(id);
            let (w, m) = self.slot(id);
            self.bits[w] |= m;
            return Verdict::New;
        };
        let ahead = id.wrapping_sub(high);
        if ahead != 0 && (ahead as i32) > 0 {
            // Slide forward: forget the slots the window now leaves behind.
            if ahead >= self.size {
                self.bits.fill(0);
            } else {
                self.clear(high.wrapping_add(1), ahead);
            }
            self.highest = Some(id);
            let (w, m) = self.slot(id);
            self.bits[w] |= m;
            return Verdict::New;
        }
        let behind = high.wrapping_sub(id);
        if behind >= self.size {
            return Verdict::TooOld;
        }
        let (w, m) = self.slot(id);
        if self.bits[w] & m != 0 {
            Verdict::Duplicate
        } else {
            self.bits[w] |= m;
            Verdict::New
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Verdict::*;

    #[test]
    fn basic() {
        let mut d = DedupWindow::new(64);
        assert_eq!(d.check(10), New);
        assert_eq!(d.check(10), Duplicate);
        assert_eq!(d.check(5), New);
        assert_eq!(d.check(5), Duplicate);
        assert_eq!(d.check(73), New); // window now 10..=73
        assert_eq!(d.check(9), TooOld);
        assert_eq!(d.check(10), Duplicate);
        assert_eq!(d.check(11), New);
        assert_eq!(d.check(74), New); // 10 leaves the window
        assert_eq!(d.check(10), TooOld);
        assert_eq!(d.check(138), New); // jump of 64: all slots cleared
        assert_eq!(d.check(75), New);
        assert_eq!(d.check(74), TooOld);
    }

    #[test]
    fn wraps_at_u32_max() {
        let mut d = DedupWindow::new(1 << 16);
        for id in (u32::MAX - 100..=u32::MAX).chain(0..100) {
            assert_eq!(d.check(id), New, "{id}");
        }
        for id in (u32::MAX - 100..=u32::MAX).chain(0..100) {
            assert_eq!(d.check(id), Duplicate, "{id}");
        }
        assert_eq!(d.check(u32::MAX - 200), New);
        // Highest is 99; 99 - 2^16 is the first id behind the window.
        assert_eq!(d.check(99u32.wrapping_sub(1 << 16)), TooOld);
        assert_eq!(d.check(100u32.wrapping_sub(1 << 16)), New);
        // An id half the space ahead is behind in serial arithmetic.
        assert_eq!(d.check(99u32.wrapping_add(1 << 31)), TooOld);
    }

    #[test]
    fn partial_word_clear() {
        let mut d = DedupWindow::new(128);
        for id in 0..128 {
            assert_eq!(d.check(id), New);
        }
        // Advance by 70 ids from 127: slots of 128..=197 are cleared, i.e.
        // ids 0..=69 are forgotten (now too old); 70..=127 still remembered.
        assert_eq!(d.check(197), New);
        assert_eq!(d.check(69), TooOld);
        assert_eq!(d.check(70), Duplicate);
        assert_eq!(d.check(127), Duplicate);
        for id in 128..197 {
            assert_eq!(d.check(id), New, "{id}");
        }
    }
}
