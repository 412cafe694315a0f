//! Round-trip time estimation and the retransmission timeout (RFC 6298).
//!
//! [`RttEstimator`] keeps SRTT and RTTVAR from RTT samples and derives the
//! RTO from them. It is pure arithmetic: the engine decides which segments
//! may be sampled (Karn's algorithm, RFC 6298 §3: never sample a
//! retransmitted segment unless timestamps disambiguate it, RFC 7323 §4),
//! when to back off (§5.5) and when to forget the backoff (§5.7).
//!
//! We follow RFC 6298 with a configurable lower bound. Linux differs in
//! detail: it computes `RTO = SRTT + 4*RTTVAR` with RTTVAR itself floored
//! near `TCP_RTO_MIN` (200 ms) and tracked per window. Here the floor
//! applies to the whole RTO (`min_rto`, 200 ms in the default `Config`,
//! where RFC 6298 §2.4 says 1 s), which gives the same 200 ms minimum.
//!
//! All arithmetic is integer nanoseconds, so the results are exact and
//! reproducible across platforms.

use crate::time::Instant;
use crate::windowed::Windowed;
use std::time::Duration;

/// Clock granularity G in `RTO = SRTT + max(G, K*RTTVAR)` (RFC 6298 §2).
/// The engine's clock has nanosecond resolution, but timers are armed with
/// millisecond care at best (Linux: one jiffy), so we use 1 ms.
pub const CLOCK_GRANULARITY: Duration = Duration::from_millis(1);

/// Backoff shifts at or beyond this count always give `max_rto`
/// (`2^32` times any non-zero RTO exceeds every sensible maximum).
const MAX_SHIFT: u32 = 32;

/// SRTT / RTTVAR estimator with RTO backoff (RFC 6298).
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// SRTT, `None` until the first sample.
    srtt: Option<Duration>,
    /// RTTVAR (zero until the first sample).
    rttvar: Duration,
    /// The most recent sample.
    latest: Option<Duration>,
    /// The smallest sample seen.
    min_rtt: Option<Duration>,
    /// RTO before backoff, already clamped to `[min_rto, max_rto]`.
    base_rto: Duration,
    /// Lower bound on the RTO.
    min_rto: Duration,
    /// Upper bound on the RTO, backoff included.
    max_rto: Duration,
    /// Number of consecutive backoffs (RFC 6298 §5.5).
    backoff: u32,
}

impl RttEstimator {
    /// A new estimator. `initial_rto` is the RTO used before the first
    /// sample (RFC 6298 §2.1: 1 s); `min_rto` / `max_rto` bound every RTO
    /// (§2.4, §2.5). If `max_rto < min_rto`, `max_rto` is raised to
    /// `min_rto`; the initial RTO is clamped into the range too.
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> RttEstimator {
        let max_rto = max_rto.max(min_rto);
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            latest: None,
            min_rtt: None,
            base_rto: initial_rto.max(min_rto).min(max_rto),
            min_rto,
            max_rto,
            backoff: 0,
        }
    }

    /// Feed one RTT measurement R (RFC 6298 §2.2 for the first, §2.3 for
    /// later ones) and recompute the RTO. Does *not* clear the backoff:
    /// whether a new sample ends the backoff (§5.7) is the engine's call,
    /// see [`RttEstimator::reset_backoff`].
    pub fn on_sample(&mut self, rtt: Duration) {
        self.latest = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        let r = rtt.as_nanos();
        match self.srtt {
            None => {
                //= RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2
                self.srtt = Some(rtt);
                self.rttvar = nanos(r / 2);
            }
            Some(srtt) => {
                let s = srtt.as_nanos();
                //= RFC 6298 §2.3: RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
                //= with beta = 1/4; computed before SRTT is updated, as the RFC requires.
                let var = (3 * self.rttvar.as_nanos() + s.abs_diff(r)) / 4;
                //= RFC 6298 §2.3: SRTT <- (1 - alpha) * SRTT + alpha * R', alpha = 1/8
                let s = (7 * s + r) / 8;
                self.rttvar = nanos(var);
                self.srtt = Some(nanos(s));
            }
        }
        self.base_rto = self.compute_rto();
    }

    /// `SRTT + max(G, 4*RTTVAR)` clamped to `[min_rto, max_rto]`
    /// (RFC 6298 §2.2/§2.3 with §2.4 and §2.5).
    fn compute_rto(&self) -> Duration {
        let srtt = self.srtt.unwrap_or(Duration::ZERO);
        let var_term = self.rttvar.saturating_mul(4).max(CLOCK_GRANULARITY);
        srtt.saturating_add(var_term)
            .max(self.min_rto)
            .min(self.max_rto)
    }

    /// Smoothed RTT; `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation (zero before the first sample).
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// The smallest sample seen on this connection.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The RTO before backoff: the initial RTO until the first sample, then
    /// the RFC 6298 value, always within `[min_rto, max_rto]`.
    pub fn base_rto(&self) -> Duration {
        self.base_rto
    }

    /// The RTO to arm the retransmission timer with: the base RTO doubled
    /// once per backoff, capped at `max_rto` (RFC 6298 §5.5, §2.5).
    pub fn rto(&self) -> Duration {
        if self.backoff >= MAX_SHIFT {
            return self.max_rto;
        }
        self.base_rto
            .saturating_mul(1u32 << self.backoff)
            .min(self.max_rto)
    }

    /// Double the RTO after the retransmission timer expired
    /// (RFC 6298 §5.5). The count saturates; [`RttEstimator::rto`] caps the
    /// result at `max_rto`.
    pub fn backoff(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// How many times the RTO has been doubled since the last reset.
    pub fn backoff_count(&self) -> u32 {
        self.backoff
    }

    /// Forget the backoff, e.g. when an ACK for new data arrives or a valid
    /// sample is taken after the backoff (RFC 6298 §5.7).
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// The configured lower bound on the RTO.
    pub fn min_rto(&self) -> Duration {
        self.min_rto
    }

    /// The configured upper bound on the RTO.
    pub fn max_rto(&self) -> Duration {
        self.max_rto
    }
}

/// Nanoseconds (u128) to a `Duration`, saturating at `u64::MAX` ns (~584 years).
fn nanos(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn rfc() -> RttEstimator {
        // RFC 6298 bounds: 1 s initial, 1 s minimum, 60 s maximum.
        RttEstimator::new(ms(1000), ms(1000), ms(60_000))
    }

    #[test]
    fn initial_rto_before_any_sample() {
        let e = rfc();
        assert_eq!(e.srtt(), None);
        assert_eq!(e.latest(), None);
        assert_eq!(e.min_rtt(), None);
        assert_eq!(e.rttvar(), Duration::ZERO);
        assert_eq!(e.rto(), ms(1000));
        // Initial RTO outside the bounds is clamped into them.
        assert_eq!(
            RttEstimator::new(ms(50), ms(200), ms(120_000)).rto(),
            ms(200)
        );
        assert_eq!(
            RttEstimator::new(ms(5000), ms(200), ms(3000)).rto(),
            ms(3000)
        );
        // An inverted range does not panic: max is raised to min.
        assert_eq!(RttEstimator::new(ms(10), ms(500), ms(100)).rto(), ms(500));
    }

    #[test]
    fn first_sample_sets_srtt_and_half_rttvar() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(120_000));
        e.on_sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        // RTO = 100 + max(1, 4*50) = 300 ms.
        assert_eq!(e.rto(), ms(300));
        assert_eq!(e.latest(), Some(ms(100)));
        assert_eq!(e.min_rtt(), Some(ms(100)));
    }

    #[test]
    fn second_sample_follows_the_formula_exactly() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(120_000));
        e.on_sample(ms(100));
        e.on_sample(ms(180));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 180| = 37.5 + 20 = 57.5 ms
        assert_eq!(e.rttvar(), Duration::from_micros(57_500));
        // SRTT = 7/8 * 100 + 1/8 * 180 = 87.5 + 22.5 = 110 ms
        assert_eq!(e.srtt(), Some(ms(110)));
        // RTO = 110 + 4 * 57.5 = 340 ms
        assert_eq!(e.rto(), ms(340));
        assert_eq!(e.latest(), Some(ms(180)));
        assert_eq!(e.min_rtt(), Some(ms(100)));
        // A third, smaller sample: RTTVAR uses the *old* SRTT (110).
        e.on_sample(ms(30));
        // RTTVAR = 3/4 * 57.5 + 1/4 * 80 = 43.125 + 20 = 63.125 ms
        assert_eq!(e.rttvar(), Duration::from_micros(63_125));
        // SRTT = 7/8 * 110 + 1/8 * 30 = 96.25 + 3.75 = 100 ms
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.min_rtt(), Some(ms(30)));
        assert_eq!(e.rto(), ms(100) + Duration::from_micros(252_500));
    }

    #[test]
    fn granularity_term_applies_when_rttvar_is_tiny() {
        let mut e = RttEstimator::new(ms(1000), Duration::ZERO, ms(60_000));
        // Identical samples drive RTTVAR towards zero; G = 1 ms remains.
        for _ in 0..200 {
            e.on_sample(ms(10));
        }
        assert_eq!(e.srtt(), Some(ms(10)));
        assert!(e.rttvar() * 4 < CLOCK_GRANULARITY);
        assert_eq!(e.rto(), ms(11));
    }

    #[test]
    fn rto_is_clamped_to_min_and_max() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(2000));
        e.on_sample(ms(10)); // 10 + 20 = 30 ms -> 200 ms
        assert_eq!(e.rto(), ms(200));
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(2000));
        e.on_sample(ms(1500)); // 1500 + 3000 -> 2000 ms
        assert_eq!(e.rto(), ms(2000));
        assert_eq!(e.base_rto(), ms(2000));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(60_000));
        e.on_sample(ms(100)); // base 300 ms
        let expected = [
            300, 600, 1200, 2400, 4800, 9600, 19_200, 38_400, 60_000, 60_000,
        ];
        for (i, &want) in expected.iter().enumerate() {
            assert_eq!(e.backoff_count(), i as u32);
            assert_eq!(e.rto(), ms(want), "after {i} backoffs");
            e.backoff();
        }
        // Far beyond any shift width: still the cap, no overflow.
        for _ in 0..100 {
            e.backoff();
        }
        assert_eq!(e.rto(), ms(60_000));
        // A sample does not clear the backoff (RFC 6298 §5.7 is the engine's call)...
        e.on_sample(ms(100));
        assert_eq!(e.rto(), ms(60_000));
        assert_eq!(e.backoff_count(), 110);
        // ...reset_backoff does. The sample moved the base: RTTVAR = 3/4 * 50
        // = 37.5 ms, SRTT = 100 ms, RTO = 100 + 150 = 250 ms.
        e.reset_backoff();
        assert_eq!(e.backoff_count(), 0);
        assert_eq!(e.rto(), ms(250));
    }

    #[test]
    fn backoff_count_saturates() {
        let mut e = rfc();
        e.backoff = u32::MAX - 1;
        e.backoff();
        e.backoff();
        assert_eq!(e.backoff_count(), u32::MAX);
        assert_eq!(e.rto(), ms(60_000));
    }

    #[test]
    fn huge_samples_do_not_overflow() {
        let mut e = rfc();
        e.on_sample(Duration::MAX);
        e.on_sample(Duration::ZERO);
        e.on_sample(Duration::MAX);
        assert_eq!(e.rto(), ms(60_000));
        assert_eq!(e.min_rtt(), Some(Duration::ZERO));
    }
}

/// A running minimum over a sliding time window, in constant memory: the
/// three-sample estimator of Nichols' windowed min/max filter (as used by
/// BBR and Linux `win_minmax`). It keeps the best sample, the best sample
/// of the later part of the window and the best of the last part, so that
/// when the best one ages out a good replacement is at hand; the result is
/// the exact minimum of the window up to a quarter-window of staleness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowedMin {
    /// The filter's samples (see [`crate::windowed`]).
    f: Windowed<Instant, Duration, false>,
    /// A sample was taken.
    set: bool,
}

impl WindowedMin {
    /// An empty filter.
    pub fn new() -> WindowedMin {
        WindowedMin::default()
    }

    /// The minimum of the window, if any sample was taken.
    pub fn get(&self) -> Option<Duration> {
        self.set.then_some(self.f.best())
    }

    /// Feed sample `v` taken at `t` (times must not go backwards) with a
    /// window of `win`; returns the new minimum.
    pub fn update(&mut self, win: Duration, t: Instant, v: Duration) -> Duration {
        let fresh = !self.set;
        self.set = true;
        self.f.update(t, v, win, fresh)
    }
}

#[cfg(test)]
mod windowed_min_tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }
    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn tracks_the_minimum_and_forgets_old_samples() {
        let win = ms(1000);
        let mut f = WindowedMin::new();
        assert_eq!(f.get(), None);
        assert_eq!(f.update(win, at(0), ms(100)), ms(100));
        assert_eq!(f.update(win, at(10), ms(70)), ms(70));
        // Larger samples do not raise it inside the window.
        for t in (20..900).step_by(20) {
            assert_eq!(f.update(win, at(t), ms(110)), ms(70));
        }
        // After the window the minimum rises to what was seen since.
        let m = f.update(win, at(1500), ms(120));
        assert_eq!(m, ms(110));
        assert_eq!(f.update(win, at(3000), ms(130)), ms(130));
    }

    #[test]
    fn equals_the_true_window_minimum_within_a_quarter_window() {
        // Pseudo-random samples; compare with a brute-force minimum over
        // windows of [win, win*5/4] (the estimator may hold a sample up to
        // a quarter window longer).
        let win = ms(400);
        let mut f = WindowedMin::new();
        let mut x: u64 = 7;
        let mut hist: Vec<(u64, u64)> = Vec::new();
        for t in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = 50 + (x >> 33) % 100;
            hist.push((t, v));
            let m = f.update(win, at(t), ms(v)).as_millis() as u64;
            let lo = hist
                .iter()
                .filter(|(s, _)| t - s <= 400 + 100)
                .map(|(_, v)| *v)
                .min()
                .unwrap();
            let hi = hist
                .iter()
                .filter(|(s, _)| t - s <= 400)
                .map(|(_, v)| *v)
                .min()
                .unwrap();
            assert!(lo <= m && m <= hi, "t={t}: {m} not in [{lo}, {hi}]");
        }
    }
}
