//! ACK aggregation: `BBR.extra_acked` (§4.5.9).

use super::{Bbr, Sample};
use crate::time::Instant;

/// `BBRExtraAckedFilterLen` (§2.12): 10 packet-timed rounds.
pub const EXTRA_ACKED_FILTER_LEN: u64 = 10;

impl Bbr {
    /// §4.5.9 BBRUpdateACKAggregation.
    pub(super) fn update_ack_aggregation(&mut self, now: Instant, rs: &Sample) {
        // Find the excess ACKed beyond the expected amount over this
        // interval; reset the interval if the ACK rate is below it.
        let interval = now.saturating_duration_since(self.extra_acked_interval_start);
        let mut expected_delivered = Self::volume(self.bw, interval);
        if self.extra_acked_delivered <= expected_delivered {
            self.extra_acked_delivered = 0;
            self.extra_acked_interval_start = now;
            expected_delivered = 0;
        }
        self.extra_acked_delivered = self.extra_acked_delivered.saturating_add(rs.newly_acked);
        let extra = self
            .extra_acked_delivered
            .saturating_sub(expected_delivered)
            .min(self.cwnd);
        // In Startup, just remember one round.
        let filter_len = if self.full_bw_reached {
            EXTRA_ACKED_FILTER_LEN
        } else {
            1
        };
        self.extra_acked = self
            .extra_acked_filter
            .update(self.round_count, extra, filter_len);
    }
}
