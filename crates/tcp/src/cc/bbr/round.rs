//! Packet-timed round counting (§4.5.1).

use super::{Bbr, Sample};

impl Bbr {
    /// §4.5.1 BBRStartRound.
    pub(super) fn start_round(&mut self) {
        self.next_round_delivered = self.delivered;
    }

    /// §4.5.1 BBRUpdateRound.
    pub(super) fn update_round(&mut self, rs: &Sample) {
        self.round_start = false;
        if let Some(prior_delivered) = rs.prior_delivered {
            if prior_delivered >= self.next_round_delivered {
                self.start_round();
                self.round_count = self.round_count.saturating_add(1);
                self.rounds_since_bw_probe = self.rounds_since_bw_probe.saturating_add(1);
                self.round_start = true;
                // C.is_cwnd_limited looks back one round (§2.1).
                self.cwnd_limited = [false, self.cwnd_limited[0]];
            }
        }
    }
}
