//! Loss recovery (§4.6.4.4): save cwnd on entering fast recovery or an
//! RTO, restore it on leaving (end or undo).

use super::{Bbr, BbrState};

impl Bbr {
    /// §4.6.4.4 BBRSaveCwnd.
    pub(super) fn save_cwnd(&mut self) {
        if !self.in_recovery && self.state != BbrState::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// §4.6.4.4 BBRRestoreCwnd.
    pub(super) fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// Enter loss recovery (§4.6.4.4 BBROnEnterFastRecovery): save cwnd.
    pub(super) fn enter_recovery(&mut self) {
        if self.in_recovery {
            self.save_cwnd();
            return;
        }
        self.save_cwnd();
        self.in_recovery = true;
        self.recovery_start_delivered = self.delivered;
    }

    /// Leave loss recovery (§4.6.4.4): restore the last known good cwnd.
    pub(super) fn exit_recovery(&mut self) {
        if !self.in_recovery {
            return;
        }
        self.in_recovery = false;
        self.restore_cwnd();
    }
}
