//! The max-bw filter (§4.5.3-§4.5.6).

use super::{Bbr, Sample};

impl Bbr {
    /// §4.5.5 BBRUpdateMaxBw, with §4.5.4: app-limited samples count only
    /// when they raise the estimate.
    pub(super) fn update_max_bw(&mut self, rs: &Sample) {
        self.update_round(rs);
        if rs.valid && (rs.rate >= self.max_bw || !rs.is_app_limited) {
            self.bw_hi[1] = self.bw_hi[1].max(rs.rate);
            self.max_bw = self.bw_hi[0].max(self.bw_hi[1]);
        }
    }

    /// §4.5.6 BBRAdvanceMaxBwFilter: forget the cycle before last.
    pub(super) fn advance_max_bw_filter(&mut self) {
        self.bw_hi = [self.bw_hi[1], 0.0];
        self.max_bw = self.bw_hi[0];
    }
}
