//! Wrapping 32-bit TCP sequence numbers (RFC 9293 §3.4 arithmetic).

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A TCP sequence number. Comparison is modular (serial-number arithmetic):
/// `a < b` iff `(b - a) as i32 > 0`. Do not compare numbers more than 2^31 apart.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// Signed distance `self - other`, valid when the two are within 2^31.
    #[inline]
    pub fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// The larger of two sequence numbers (modular).
    #[inline]
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self >= other {
            self
        } else {
            other
        }
    }
    /// The smaller of two sequence numbers (modular).
    #[inline]
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self <= other {
            self
        } else {
            other
        }
    }
}

impl fmt::Debug for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn add(self, rhs: usize) -> SeqNumber {
        // Sequence arithmetic is modulo 2^32: truncation is the point.
        SeqNumber(self.0.wrapping_add(rhs as u32))
    }
}
impl AddAssign<usize> for SeqNumber {
    #[inline]
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}
impl Sub<usize> for SeqNumber {
    type Output = SeqNumber;
    #[inline]
    fn sub(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs as u32))
    }
}
/// `a - b` as a byte count. Panics in debug builds if `b > a` (modular), which
/// is always a caller bug; use [`SeqNumber::diff`] when the sign is unknown.
impl Sub for SeqNumber {
    type Output = usize;
    #[inline]
    fn sub(self, rhs: SeqNumber) -> usize {
        let d = self.diff(rhs);
        debug_assert!(
            d >= 0,
            "sequence subtraction underflow: {} - {}",
            self.0,
            rhs.0
        );
        d.max(0) as usize
    }
}
impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn wraps() {
        let a = SeqNumber(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b.0, 2);
        assert!(a < b);
        assert_eq!(b - a, 4);
        assert_eq!(a.diff(b), -4);
        assert_eq!(a.max(b), b);
        assert_eq!(b - 4usize, a);
    }
}
