//! The windowed maximum filter over packet-timed rounds (§4.5.9
//! `UpdateWindowedMaxFilter`).

use crate::windowed::Windowed;

/// A windowed running maximum over a virtual time (packet-timed rounds),
/// keeping the best, second-best and third-best samples of the window
/// (Kathleen Nichols' algorithm, as the draft's `UpdateWindowedMaxFilter`
/// suggests: [`Windowed`]). Used for `BBR.extra_acked` (§4.5.9).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WindowedMax {
    f: Windowed<u64, u64, true>,
}

impl WindowedMax {
    /// The maximum of the window (0 before any sample).
    pub(crate) fn get(&self) -> u64 {
        self.f.best()
    }

    /// Add sample `v` at time `t` to a window of length `win`.
    pub(crate) fn update(&mut self, t: u64, v: u64, win: u64) -> u64 {
        // No sample is below the initial 0: the first one starts afresh.
        self.f.update(t, v, win, false)
    }
}
