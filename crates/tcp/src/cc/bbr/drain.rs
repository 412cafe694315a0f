//! Drain (§4.3.2): empty the queue Startup built.

use super::{Bbr, BbrState};
use crate::time::Instant;

impl Bbr {
    /// §4.3.2 BBREnterDrain.
    pub(super) fn enter_drain(&mut self) {
        self.set_state(BbrState::Drain);
    }

    /// §4.3.2 BBRCheckDrainDone: the estimated queue is drained.
    pub(super) fn check_drain_done(&mut self, now: Instant) {
        if self.state == BbrState::Drain && self.inflight <= self.inflight_at(self.bw, 1.0) {
            self.enter_probe_bw(now);
        }
    }
}
