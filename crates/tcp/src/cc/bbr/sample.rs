//! The per-ACK rate sample `rs` (§2.3) as BBR reads it, built from the
//! engine's delivery-rate sample (§4.5.2) and counters.

use super::Bbr;
use crate::cc::RateSample;
use std::time::Duration;

/// The per-ACK rate sample `rs` as BBR reads it (§2.3), built from the
/// engine's [`RateSample`] and counters.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sample {
    /// The interval was positive: `rate` is a bandwidth sample.
    pub(super) valid: bool,
    /// `rs.delivery_rate` (bytes/s), 0 when not `valid`.
    pub(super) rate: f64,
    /// `rs.delivered`.
    pub(super) delivered: u64,
    /// `rs.prior_delivered`, if the engine passed a sample.
    pub(super) prior_delivered: Option<u64>,
    /// `rs.is_app_limited`.
    pub(super) is_app_limited: bool,
    /// The sender itself had no data to send (the engine's mark, without
    /// the ProbeRTT marking in `is_app_limited`).
    pub(super) sender_app_limited: bool,
    /// `rs.tx_in_flight`.
    pub(super) tx_in_flight: u64,
    /// `rs.lost`.
    pub(super) lost: u64,
    /// `rs.newly_acked`.
    pub(super) newly_acked: u64,
    /// `rs.newly_lost`.
    pub(super) newly_lost: u64,
    /// `rs.rtt`.
    pub(super) rtt: Option<Duration>,
}

impl Bbr {
    /// The engine's sample as BBR reads it.
    pub(super) fn sample(
        &self,
        rate: Option<&RateSample>,
        newly_acked: u64,
        newly_lost: u64,
    ) -> Sample {
        let Some(r) = rate else {
            return Sample {
                newly_acked,
                newly_lost,
                ..Sample::default()
            };
        };
        let valid = !r.interval.is_zero();
        let rate_bps = if valid { r.delivery_rate() } else { 0.0 };
        let valid = valid && rate_bps.is_finite();
        let probe_rtt_app_limited = self
            .probe_rtt_app_limited
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&r.prior_delivered));
        Sample {
            valid,
            rate: if valid { rate_bps } else { 0.0 },
            delivered: r.delivered,
            prior_delivered: Some(r.prior_delivered),
            is_app_limited: r.is_app_limited || probe_rtt_app_limited,
            sender_app_limited: r.is_app_limited && !probe_rtt_app_limited,
            tx_in_flight: r.tx_in_flight,
            lost: r.lost,
            newly_acked,
            newly_lost,
            rtt: r.rtt,
        }
    }
}
