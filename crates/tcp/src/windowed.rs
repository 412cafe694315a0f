//! Kathleen Nichols' windowed min/max filter in constant memory (as BBR
//! and Linux `win_minmax` use it): the best sample of a sliding window,
//! the best of its later part and the best of its last part, so that when
//! the best ages out a good replacement is at hand. The result is the
//! exact extremum of the window up to a quarter-window of staleness.
//!
//! One implementation serves the running maximum over packet-timed rounds
//! of BBR ([`crate::cc::bbr::WindowedMax`]) and the running minimum RTT
//! over real time ([`crate::rtt::WindowedMin`]).

use crate::time::Instant;
use std::time::Duration;

/// A time axis for the filter: how far apart two times are, and a part
/// of a window.
pub(crate) trait Clock: Copy + PartialEq {
    /// Length of a window on this axis.
    type Span: Copy + PartialOrd;
    /// `self - earlier`, or zero if `earlier` is later.
    fn since(self, earlier: Self) -> Self::Span;
    /// `span / n`.
    fn part(span: Self::Span, n: u32) -> Self::Span;
}

/// Virtual time counted in whole units (packet-timed rounds).
impl Clock for u64 {
    type Span = u64;
    fn since(self, earlier: u64) -> u64 {
        self.saturating_sub(earlier)
    }
    fn part(span: u64, n: u32) -> u64 {
        span / u64::from(n)
    }
}

impl Clock for Instant {
    type Span = Duration;
    fn since(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
    fn part(span: Duration, n: u32) -> Duration {
        span / n
    }
}

/// The three samples `(time, value)`: best, second best (later), third
/// best (latest). `MAX` keeps the maximum, else the minimum; a sample
/// equal to a kept one replaces it (it is more recent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Windowed<T, V, const MAX: bool> {
    s: [(T, V); 3],
}

impl<T: Clock, V: Copy + PartialOrd, const MAX: bool> Windowed<T, V, MAX> {
    /// `a` is at least as good as `b`.
    fn as_good(a: V, b: V) -> bool {
        if MAX {
            a >= b
        } else {
            a <= b
        }
    }

    /// The best value of the window (the initial value before any sample).
    pub(crate) fn best(&self) -> V {
        self.s[0].1
    }

    /// Feed sample `v` taken at `t` (times must not go backwards) with a
    /// window of `win`; with `fresh`, forget every earlier sample. Returns
    /// the new best.
    pub(crate) fn update(&mut self, t: T, v: V, win: T::Span, fresh: bool) -> V {
        let sample = (t, v);
        if fresh || Self::as_good(v, self.s[0].1) || t.since(self.s[2].0) > win {
            // A new best, or nothing in the window is recent enough.
            self.s = [sample; 3];
            return v;
        }
        if Self::as_good(v, self.s[1].1) {
            self.s[1] = sample;
            self.s[2] = sample;
        } else if Self::as_good(v, self.s[2].1) {
            self.s[2] = sample;
        }
        let dt = t.since(self.s[0].0);
        if dt > win {
            // The best aged out: promote the others.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = sample;
            if t.since(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = sample;
            }
        } else if self.s[1].0 == self.s[0].0 && dt > T::part(win, 4) {
            // A quarter of the window passed with no second choice: take
            // this sample as the best of the rest.
            self.s[1] = sample;
            self.s[2] = sample;
        } else if self.s[2].0 == self.s[1].0 && dt > T::part(win, 2) {
            self.s[2] = sample;
        }
        self.s[0].1
    }
}
