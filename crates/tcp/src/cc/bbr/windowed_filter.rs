//! The windowed maximum filter over packet-timed rounds (§4.5.9
//! `UpdateWindowedMaxFilter`).

/// A windowed running maximum over a virtual time (packet-timed rounds),
/// keeping the best, second-best and third-best samples of the window
/// (Kathleen Nichols' algorithm, as the draft's `UpdateWindowedMaxFilter`
/// suggests). Used for `BBR.extra_acked` (§4.5.9).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WindowedMax {
    /// `(time, value)` of the best, 2nd and 3rd best samples.
    s: [(u64, u64); 3],
}

impl WindowedMax {
    fn reset(&mut self, t: u64, v: u64) {
        self.s = [(t, v); 3];
    }

    /// The maximum of the window (0 before any sample).
    pub(crate) fn get(&self) -> u64 {
        self.s[0].1
    }

    /// Add sample `v` at time `t` to a window of length `win`.
    pub(crate) fn update(&mut self, t: u64, v: u64, win: u64) -> u64 {
        let sample = (t, v);
        if v >= self.s[0].1 || t.saturating_sub(self.s[2].0) > win {
            // A new maximum, or nothing left in the window.
            self.reset(t, v);
            return v;
        }
        if v >= self.s[1].1 {
            self.s[1] = sample;
            self.s[2] = sample;
        } else if v >= self.s[2].1 {
            self.s[2] = sample;
        }
        // Age the best samples out of the window, and keep the 2nd and 3rd
        // samples spread over its quarters and halves.
        let dt = t.saturating_sub(self.s[0].0);
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = sample;
            if t.saturating_sub(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = sample;
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = sample;
            self.s[2] = sample;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = sample;
        }
        self.s[0].1
    }
}
