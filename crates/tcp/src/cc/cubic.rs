//! CUBIC congestion control (RFC 9438), the Linux default.
//!
//! Window arithmetic follows the RFC in `f64` and in segments (`W_max`,
//! `K`, `W_cubic(t)`, `W_est`); cwnd itself is kept in bytes with a
//! fractional carry so that sub-byte increments are not lost. Growth uses
//! byte counting: "segments acked" is `bytes_acked / SMSS` (RFC 9438 §4.3's
//! adjustment for ABC, RFC 3465).
//!
//! Slow start is RFC 5681 slow start with RFC 3465 ABC (L = 2*SMSS), which
//! RFC 9438 §4.10 permits; HyStart++ (RFC 9406) is not implemented.
//! Fast convergence (§4.7) is on by default, as in Linux; §4.7 suggests
//! turning it off for a lone flow ([`Cubic::with_fast_convergence`]).

use super::hystart::{HyStart, Verdict};
use super::{is_cwnd_limited, min_window, rescale, CongestionControl, ABC_LIMIT_SEGMENTS};
use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::time::Duration;

/// `C`, the scaling constant of the cubic function, in segments/s³
/// (RFC 9438 §4.1.1, §5.1: SHOULD be 0.4).
pub const C: f64 = 0.4;
/// `β_cubic`, the multiplicative decrease factor (RFC 9438 §4.6: SHOULD
/// be 0.7).
pub const BETA_CUBIC: f64 = 0.7;
/// `α_cubic = 3 * (1 - β_cubic) / (1 + β_cubic)`, the Reno-friendly
/// additive increase in segments per RTT (RFC 9438 §4.3), ≈ 0.529.
pub const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA_CUBIC) / (1.0 + BETA_CUBIC);

/// The variables of RFC 9438 §4.1.2 that an undo restores (§4.9.2).
#[derive(Debug, Clone, Copy, PartialEq)]
struct State {
    /// Congestion window (bytes).
    cwnd: usize,
    /// Fractional bytes of cwnd growth not yet applied, in `[0, 1)`.
    carry: f64,
    /// Slow-start threshold (bytes); `usize::MAX` before the first reduction.
    ssthresh: usize,
    /// `W_max` (segments): cwnd just before the last reduction, possibly
    /// lowered by fast convergence. `None` before the first congestion event.
    w_max: Option<f64>,
    /// `cwnd_prior` (segments): cwnd when ssthresh was last set.
    cwnd_prior: f64,
    /// `K` (seconds) of the current congestion avoidance stage.
    k: f64,
    /// `t_epoch`: start of the current congestion avoidance stage, shifted
    /// forward over application-limited periods; `None` outside one.
    t_epoch: Option<Instant>,
    /// `cwnd_epoch` (segments): cwnd at `t_epoch`.
    cwnd_epoch: f64,
    /// `W_est` (segments): the Reno-friendly estimate.
    w_est: f64,
    /// The next congestion avoidance stage follows an RTO (§4.8).
    after_rto: bool,
}

/// RFC 9438 CUBIC.
#[derive(Debug, Clone)]
pub struct Cubic {
    /// Sender MSS (bytes), at least 1.
    smss: usize,
    /// RFC 9438 §4.7 fast convergence.
    fast_convergence: bool,
    /// The RFC's variables.
    s: State,
    /// A loss-recovery reduction is in force and `on_recovery_end` has not
    /// run yet.
    recovering: bool,
    /// Reductions since the last ACK outside recovery; consecutive
    /// reductions form one episode and an undo goes back to its start.
    in_episode: bool,
    /// State before the current (or last) reduction episode (§4.9.2).
    undo: Option<State>,
    /// RFC 9406 slow-start exit (RFC 9438 §4.10 allows HyStart++).
    hystart: HyStart,
    /// When the previous ACK arrived (to exclude idle periods from `t`).
    last_ack: Option<Instant>,
}

impl Cubic {
    /// A controller with sender MSS `smss` (bytes; 0 is treated as 1) and
    /// an initial window of `initial_cwnd_segments` segments (RFC 6928: 10;
    /// at least 1).
    pub fn new(smss: usize, initial_cwnd_segments: usize) -> Cubic {
        let smss = smss.max(1);
        Cubic {
            smss,
            fast_convergence: true,
            s: State {
                cwnd: smss.saturating_mul(initial_cwnd_segments.max(1)),
                carry: 0.0,
                ssthresh: usize::MAX,
                w_max: None,
                cwnd_prior: 0.0,
                k: 0.0,
                t_epoch: None,
                cwnd_epoch: 0.0,
                w_est: 0.0,
                after_rto: false,
            },
            recovering: false,
            in_episode: false,
            undo: None,
            hystart: HyStart::default(),
            last_ack: None,
        }
    }

    /// Turn fast convergence (RFC 9438 §4.7) on or off; it is on by default.
    pub fn with_fast_convergence(mut self, enabled: bool) -> Cubic {
        self.fast_convergence = enabled;
        self
    }

    /// The sender MSS the controller counts with.
    pub fn smss(&self) -> usize {
        self.smss
    }

    /// `W_max` in segments; `None` before the first congestion event.
    pub fn w_max(&self) -> Option<f64> {
        self.s.w_max
    }

    /// `K` in seconds while a congestion avoidance stage is running
    /// (negative when the stage started above `W_max`).
    pub fn k(&self) -> Option<f64> {
        self.s.t_epoch.map(|_| self.s.k)
    }

    /// `W_est` in segments while a congestion avoidance stage is running.
    pub fn w_est(&self) -> Option<f64> {
        self.s.t_epoch.map(|_| self.s.w_est)
    }

    /// cwnd in segments, fractional carry included.
    fn cwnd_segments(&self) -> f64 {
        (self.s.cwnd as f64 + self.s.carry) / self.smss as f64
    }

    /// Remember the state before the first reduction of an episode.
    fn begin_reduction(&mut self) {
        self.hystart.reset();
        if !self.in_episode {
            self.undo = Some(self.s);
            self.in_episode = true;
        }
    }

    /// `max(flight_size * β_cubic, 2*SMSS)` (RFC 9438 §4.6, also §4.8).
    fn reduced_ssthresh(&self, flight_size: usize) -> usize {
        // Truncation to whole bytes is intended; `as` saturates.
        ((flight_size as f64 * BETA_CUBIC) as usize).max(min_window(self.smss))
    }

    /// Start a congestion avoidance stage at `now` (RFC 9438 §4.2).
    fn start_epoch(&mut self, now: Instant) {
        let cwnd_epoch = self.cwnd_segments();
        let s = &mut self.s;
        if s.after_rto || s.w_max.is_none() {
            //= RFC 9438 §4.8: the first CA stage after an RTO uses K = 0 and
            //= W_max = cwnd at its start, W_est likewise. (§4.10 does the same
            //= when slow start ends without a loss, with cwnd_prior = cwnd.)
            if s.w_max.is_none() {
                s.cwnd_prior = cwnd_epoch;
            }
            s.w_max = Some(cwnd_epoch);
            s.after_rto = false;
        }
        let w_max = s.w_max.unwrap_or(cwnd_epoch);
        //= RFC 9438 §4.2 eq. (2): K = cubic_root((W_max - cwnd_epoch) / C)
        s.k = ((w_max - cwnd_epoch) / C).cbrt();
        //= RFC 9438 §4.3: W_est = cwnd_epoch at the start of the stage.
        s.w_est = cwnd_epoch;
        s.cwnd_epoch = cwnd_epoch;
        s.t_epoch = Some(now);
    }

    /// RFC 9438 §4.2 eq. (1): `W_cubic(t) = C*(t - K)^3 + W_max` (segments).
    fn w_cubic(&self, t: f64) -> f64 {
        let w_max = self.s.w_max.unwrap_or(self.s.cwnd_epoch);
        C * (t - self.s.k).powi(3) + w_max
    }

    /// Congestion avoidance growth for `bytes` newly acknowledged bytes.
    fn congestion_avoidance(&mut self, now: Instant, bytes: usize, rtt: Duration) {
        let epoch = match self.s.t_epoch {
            Some(e) => e,
            None => {
                self.start_epoch(now);
                now
            }
        };
        let smss = self.smss as f64;
        let cwnd = self.cwnd_segments();
        let segments_acked = bytes as f64 / smss;
        let t = now.saturating_duration_since(epoch).as_secs_f64();
        //= RFC 9438 §4.2: target = W_cubic(t + RTT), clamped to
        //= [cwnd, 1.5*cwnd] so growth never reverses nor beats slow start.
        let target = self
            .w_cubic(t + rtt.as_secs_f64())
            .max(cwnd)
            .min(1.5 * cwnd);
        //= RFC 9438 §4.3 eq. (4): W_est += α_cubic * segments_acked / cwnd,
        //= with α_cubic = 1 once W_est >= cwnd_prior.
        let alpha = if self.s.w_est >= self.s.cwnd_prior {
            1.0
        } else {
            ALPHA_CUBIC
        };
        self.s.w_est += alpha * segments_acked / cwnd;
        let new_cwnd = if self.w_cubic(t) < self.s.w_est {
            //= RFC 9438 §4.3: Reno-friendly region, cwnd = W_est, never
            //= lowered by an ACK. On an ACK-clocked path W_est runs at most
            //= α_cubic * segments_acked / cwnd ahead; should cwnd lag further
            //= (a stall let W_cubic(t) run ahead of it, then W_est overtook
            //= W_cubic(t)), the §4.2 bound applies as for the cubic target:
            //= growth stays below half a segment per segment acked, i.e.
            //= below slow start.
            self.s.w_est.max(cwnd).min(cwnd + 0.5 * segments_acked)
        } else {
            //= RFC 9438 §4.4 (concave) and §4.5 (convex): cwnd grows by
            //= (target - cwnd) / cwnd per segment acknowledged.
            cwnd + (target - cwnd) / cwnd * segments_acked
        };
        let bytes_f = new_cwnd * smss;
        let whole = bytes_f.floor();
        if whole >= self.s.cwnd as f64 {
            // `as` saturates; cwnd beyond 2^53 bytes is not a concern.
            self.s.cwnd = whole as usize;
            self.s.carry = bytes_f - whole;
        }
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        self.s.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.s.ssthresh
    }

    fn on_ack(&mut self, now: Instant, bytes_acked: usize, flight_size: usize, rtt: Duration) {
        self.in_episode = false;
        let slow_start = self.s.cwnd < self.s.ssthresh;
        let limited =
            bytes_acked > 0 && is_cwnd_limited(self.s.cwnd, flight_size, self.smss, slow_start);
        //= RFC 9438 §4.2 and §5.8: t excludes application-limited periods.
        //= The time since the previous ACK is excluded when this ACK finds
        //= the sender application-limited; when the sender is cwnd-limited,
        //= any silence longer than an RTT was idle time (an ACK-clocked
        //= sender hears at least one ACK per RTT).
        if let (Some(last), Some(epoch)) = (self.last_ack, self.s.t_epoch) {
            let gap = now.saturating_duration_since(last);
            let idle = if !limited {
                gap
            } else if !rtt.is_zero() && gap > rtt {
                gap - rtt
            } else {
                Duration::ZERO
            };
            self.s.t_epoch = Some((epoch + idle).min(now));
        }
        self.last_ack = Some(now);
        if !limited {
            return;
        }
        let mut ca_bytes = bytes_acked;
        if slow_start {
            //= RFC 9438 §4.10 allowing RFC 5681 §3.1 slow start, with
            //= RFC 3465 §2.2 ABC: cwnd += min(bytes_acked, 2*SMSS).
            //= RFC 9406 §4.2: divided by CSS_GROWTH_DIVISOR in CSS.
            let inc =
                bytes_acked.min(ABC_LIMIT_SEGMENTS * self.smss) / self.hystart.growth_divisor();
            let room = self.s.ssthresh - self.s.cwnd;
            if inc < room {
                self.s.cwnd += inc;
                return;
            }
            self.s.cwnd = self.s.ssthresh;
            self.s.carry = 0.0;
            ca_bytes = bytes_acked.saturating_sub(room);
            if ca_bytes == 0 {
                return;
            }
        }
        self.congestion_avoidance(now, ca_bytes, rtt);
    }

    /// Fast convergence (§4.7), then multiplicative decrease (§4.6):
    /// `ssthresh = max(flight_size * β_cubic, 2*SMSS)`, `cwnd = ssthresh`.
    /// As for NewReno, this is the window after recovery; the engine runs
    /// recovery itself (RFC 6675 / RFC 6582, §4.2 leaves them unchanged).
    fn on_congestion_event(&mut self, _now: Instant, flight_size: usize) {
        self.begin_reduction();
        let cwnd = self.s.cwnd as f64 / self.smss as f64;
        //= RFC 9438 §4.7: W_max = cwnd * (1 + β_cubic) / 2 if cwnd < W_max
        //= (the saturation point is falling), else W_max = cwnd.
        self.s.w_max = Some(match self.s.w_max {
            Some(w_max) if self.fast_convergence && cwnd < w_max => cwnd * (1.0 + BETA_CUBIC) / 2.0,
            _ => cwnd,
        });
        //= RFC 9438 §4.6: cwnd_prior = cwnd; ssthresh = flight_size * β_cubic,
        //= at least 2 MSS; cwnd = max(ssthresh, 2 MSS) on loss.
        self.s.cwnd_prior = cwnd;
        self.s.ssthresh = self.reduced_ssthresh(flight_size);
        self.s.cwnd = self.s.ssthresh;
        self.s.carry = 0.0;
        self.s.t_epoch = None;
        self.s.after_rto = false;
        self.recovering = true;
    }

    /// Leave recovery with RFC 6582 §3.2 step 3 option (1), as NewReno does:
    /// `cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS)`. With RFC 6675
    /// recovery the flight is about ssthresh at that point and this leaves
    /// cwnd = ssthresh; after NewReno-style inflation it avoids a burst. A
    /// no-op unless a reduction is in force.
    fn on_recovery_end(&mut self, _now: Instant, flight_size: usize) {
        if !self.recovering {
            return;
        }
        self.recovering = false;
        // Leave recovery with cwnd = ssthresh (RFC 6937 §3, Linux); see
        // `NewReno::on_recovery_end` for why not RFC 6582's deflation.
        let _ = flight_size;
        self.s.cwnd = self.s.ssthresh.max(self.smss);
        self.s.carry = 0.0;
    }

    /// RFC 9438 §4.8: cwnd = 1 SMSS as for Reno (RFC 5681 §3.1), but
    /// `ssthresh = max(flight_size * β_cubic, 2*SMSS)`; the next congestion
    /// avoidance stage restarts the cubic curve with K = 0.
    fn on_rto(&mut self, _now: Instant, flight_size: usize) {
        self.begin_reduction();
        self.s.cwnd_prior = self.s.cwnd as f64 / self.smss as f64;
        self.s.ssthresh = self.reduced_ssthresh(flight_size);
        self.s.cwnd = self.smss;
        self.s.carry = 0.0;
        self.s.t_epoch = None;
        self.s.after_rto = true;
        self.recovering = false;
    }

    /// Keep the window's size in segments (the RFC's variables are in
    /// segments already). Forgets any saved undo state.
    fn set_mss(&mut self, smss: usize) {
        let smss = smss.max(1);
        if smss == self.smss {
            return;
        }
        let old = self.smss;
        self.smss = smss;
        self.s.cwnd = rescale(self.s.cwnd, old, smss).max(smss);
        if self.s.ssthresh != usize::MAX {
            self.s.ssthresh = rescale(self.s.ssthresh, old, smss).max(min_window(smss));
        }
        self.s.carry = 0.0;
        self.undo = None;
        self.in_episode = false;
    }

    /// RFC 9438 §4.9: restore cwnd, cwnd_prior, ssthresh, W_max, K,
    /// t_epoch and W_est saved before the last reduction episode, if the
    /// current cwnd is below the saved one (§4.9.2; for spurious timeouts
    /// §4.9.1 points to RFC 4015's restoration). A late detection keeps the
    /// current state. Ends any recovery reduction in force.
    fn on_spurious_congestion(&mut self, _now: Instant) {
        let Some(saved) = self.undo.take() else {
            return;
        };
        self.recovering = false;
        // The episode is over: the next reduction saves afresh.
        self.in_episode = false;
        if self.s.cwnd < saved.cwnd {
            self.s = saved;
        }
    }

    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_rtt_sample(
        &mut self,
        _now: Instant,
        rtt: Duration,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
    ) {
        if self.s.cwnd < self.s.ssthresh
            && self.hystart.on_rtt_sample(rtt, snd_una, snd_nxt)
                == Verdict::EnterCongestionAvoidance
        {
            //= RFC 9406 §4.2 / RFC 9438 §4.10: leave slow start at cwnd.
            self.s.ssthresh = self.s.cwnd.max(min_window(self.smss));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::{operation, Model, Operation, IW, SMSS};
    use super::super::NewReno;
    use super::*;
    use proptest::prelude::*;

    const T0: Instant = Instant::from_nanos(1_000_000_000);

    /// Drive one RTT of cwnd-limited ACKs (one per full segment, spread
    /// evenly over the RTT), acknowledging the window as it was at the start.
    fn drive_rtt<C: CongestionControl>(cc: &mut C, now: &mut Instant, rtt: Duration) {
        let window = cc.cwnd();
        let acks = window.div_ceil(SMSS);
        let spacing = rtt / acks as u32;
        let mut left = window;
        while left > 0 {
            *now += spacing;
            let b = left.min(SMSS);
            let flight = cc.cwnd();
            cc.on_ack(*now, b, flight, rtt);
            left -= b;
        }
    }

    /// A CUBIC sender right after a loss at `w_max` segments, recovery done
    /// with plenty in flight (cwnd = ssthresh = 0.7 * w_max).
    fn after_loss(w_max: usize) -> Cubic {
        let mut cc = Cubic::new(SMSS, w_max);
        cc.on_congestion_event(T0, w_max * SMSS);
        cc.on_recovery_end(T0, w_max * SMSS);
        cc
    }

    fn seg(cc: &impl CongestionControl) -> f64 {
        cc.cwnd() as f64 / SMSS as f64
    }

    #[test]
    fn constants() {
        assert!((ALPHA_CUBIC - 0.9 / 1.7).abs() < 1e-12);
        let cc = Cubic::new(SMSS, IW);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (10 * SMSS, usize::MAX));
        assert_eq!(cc.name(), "cubic");
        assert_eq!(cc.w_max(), None);
        assert_eq!(Cubic::new(0, 0).cwnd(), 1);
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut cc = Cubic::new(SMSS, IW);
        let mut now = T0;
        for rtt in 1..=4 {
            drive_rtt(&mut cc, &mut now, Duration::from_millis(50));
            assert_eq!(cc.cwnd(), (10 << rtt) * SMSS);
        }
    }

    #[test]
    fn multiplicative_decrease() {
        let mut cc = Cubic::new(SMSS, 100);
        cc.on_congestion_event(T0, 100 * SMSS);
        assert_eq!(cc.ssthresh(), 70 * SMSS);
        assert_eq!(cc.cwnd(), 70 * SMSS);
        assert_eq!(cc.w_max(), Some(100.0));
        // Based on the flight, not cwnd (RFC 9438 §4.6), floored at 2*SMSS.
        let mut cc = Cubic::new(SMSS, 100);
        cc.on_congestion_event(T0, 40 * SMSS);
        assert_eq!(cc.ssthresh(), 28 * SMSS);
        let mut cc = Cubic::new(SMSS, 100);
        cc.on_congestion_event(T0, SMSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (2 * SMSS, 2 * SMSS));
    }

    #[test]
    fn returns_to_w_max_at_k() {
        let rtt = Duration::from_millis(100);
        let mut cc = after_loss(100);
        //= RFC 9438 §4.2 eq. (2) with cwnd_epoch = 70, W_max = 100.
        let k = ((100.0f64 - 70.0) / 0.4).cbrt();
        let mut now = T0;
        // The first ACK in congestion avoidance starts the epoch.
        cc.on_ack(now, SMSS, cc.cwnd(), rtt);
        let epoch = now;
        assert!((cc.k().unwrap() - k).abs() < 1e-6, "K = {:?}", cc.k());
        let mut checked_half = false;
        loop {
            let t = (now - epoch).as_secs_f64();
            if !checked_half && t >= k / 2.0 {
                // Concave region: cwnd tracks W_cubic(t) within a segment.
                let w = 0.4 * (t - k).powi(3) + 100.0;
                assert!((seg(&cc) - w).abs() <= 1.0, "t={t} cwnd={} W={w}", seg(&cc));
                assert!(seg(&cc) < 99.0);
                checked_half = true;
            }
            if t >= k {
                break;
            }
            // One ACK per segment, cwnd segments per RTT.
            now += rtt.mul_f64(SMSS as f64 / cc.cwnd() as f64);
            let flight = cc.cwnd();
            cc.on_ack(now, SMSS, flight, rtt);
        }
        assert!(checked_half);
        assert!((seg(&cc) - 100.0).abs() <= 1.0, "cwnd at K = {}", seg(&cc));
        // Still the cubic curve: W_est = 70 + 0.529 per RTT ≈ 92 is below it.
        assert!(cc.w_est().unwrap() < 95.0);
        // Convex region afterwards: one second past K, W_cubic = 100 + 0.4.
        let mut drive_until = |cc: &mut Cubic, end: Instant| {
            while now < end {
                now += rtt.mul_f64(SMSS as f64 / cc.cwnd() as f64);
                let flight = cc.cwnd();
                cc.on_ack(now, SMSS, flight, rtt);
            }
        };
        let at_k = epoch + Duration::from_secs_f64(k);
        drive_until(&mut cc, at_k + Duration::from_secs(1));
        assert!(cc.w_est().unwrap() < 100.0);
        assert!(
            (seg(&cc) - 100.4).abs() <= 1.0,
            "cwnd at K+1 = {}",
            seg(&cc)
        );
        // Two seconds past K, W_est (α_cubic = 1 since it passed cwnd_prior =
        // 100) overtakes W_cubic = 103.2: the Reno-friendly region again.
        drive_until(&mut cc, at_k + Duration::from_secs(2));
        let w_est = cc.w_est().unwrap();
        assert!(w_est > 103.2, "W_est = {w_est}");
        assert!(
            (seg(&cc) - w_est).abs() <= 1.0,
            "cwnd at K+2 = {}",
            seg(&cc)
        );
    }

    #[test]
    fn reno_friendly_region_keeps_up_with_reno() {
        // Small BDP: 20 segments, 1 ms RTT. K ≈ 2.47 s, i.e. thousands of
        // RTTs: the cubic curve is flat and W_est decides (RFC 9438 §4.3).
        let rtt = Duration::from_millis(1);
        let mut cubic = after_loss(20);
        let mut reno = NewReno::new(SMSS, 20);
        reno.on_congestion_event(T0, 20 * SMSS);
        reno.on_recovery_end(T0, 20 * SMSS);
        assert_eq!((seg(&cubic), seg(&reno)), (14.0, 10.0));
        let (mut tc, mut tr) = (T0, T0);
        let (mut sum_cubic, mut sum_reno) = (0usize, 0usize);
        let mut crossed = false;
        // One Reno cycle: until Reno is back at W_max.
        while reno.cwnd() < 20 * SMSS {
            sum_cubic += cubic.cwnd();
            sum_reno += reno.cwnd();
            if cubic.cwnd() < reno.cwnd() {
                crossed = true;
            }
            if !crossed {
                assert!(cubic.cwnd() >= reno.cwnd());
            } else {
                // After the crossing, Reno leads by less than a segment
                // before it reaches W_max.
                assert!(cubic.cwnd() + SMSS > reno.cwnd());
            }
            drive_rtt(&mut cubic, &mut tc, rtt);
            drive_rtt(&mut reno, &mut tr, rtt);
        }
        // Over the cycle CUBIC sent at least as much as Reno.
        assert!(sum_cubic >= sum_reno, "{sum_cubic} < {sum_reno}");
        // Still in the Reno-friendly region, far from the cubic curve.
        let t = (tc - T0).as_secs_f64();
        assert!(cubic.w_cubic(t) < cubic.w_est().unwrap());
        // Once W_est passes cwnd_prior (20), α_cubic = 1: CUBIC grows like
        // Reno, one segment per RTT (less the growth of cwnd within an RTT).
        while seg(&cubic) < 21.0 {
            drive_rtt(&mut cubic, &mut tc, rtt);
        }
        let before = seg(&cubic);
        for _ in 0..10 {
            drive_rtt(&mut cubic, &mut tc, rtt);
        }
        let grown = seg(&cubic) - before;
        assert!(
            (9.5..=10.0).contains(&grown),
            "grew {grown} segments in 10 RTTs"
        );
    }

    #[test]
    fn target_is_clamped_to_one_and_a_half_cwnd() {
        // A huge RTT puts W_cubic(t + RTT) far above 1.5*cwnd: growth per
        // segment acknowledged is then exactly (1.5*cwnd - cwnd)/cwnd = 0.5.
        // (The epoch's first ACK, at t = 0, is in the Reno-friendly region:
        // W_cubic(0) = cwnd_epoch < W_est.)
        let mut cc = after_loss(100);
        let rtt = Duration::from_secs(1000);
        cc.on_ack(T0, SMSS, cc.cwnd(), rtt);
        let now = T0 + Duration::from_millis(10);
        assert!(cc.w_cubic(0.01) > cc.w_est().unwrap());
        let before = cc.cwnd();
        cc.on_ack(now, SMSS, cc.cwnd(), rtt);
        // +0.5 segment, give or take the carried fraction of a byte.
        assert!(
            (500..=501).contains(&(cc.cwnd() - before)),
            "{}",
            cc.cwnd() - before
        );
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let rtt = Duration::from_millis(10);
        for fc in [true, false] {
            let mut cc = Cubic::new(SMSS, 100).with_fast_convergence(fc);
            cc.on_congestion_event(T0, 100 * SMSS);
            cc.on_recovery_end(T0, 100 * SMSS);
            let mut now = T0;
            while cc.cwnd() < 80 * SMSS {
                drive_rtt(&mut cc, &mut now, rtt);
            }
            let cwnd = seg(&cc);
            assert!(cwnd < 100.0);
            cc.on_congestion_event(now, cc.cwnd());
            let want = if fc { cwnd * 0.85 } else { cwnd };
            assert!((cc.w_max().unwrap() - want).abs() < 1e-9, "fc={fc}");
        }
        // No fast convergence when cwnd exceeded the old W_max.
        let mut cc = after_loss(10);
        let mut now = T0;
        while cc.cwnd() < 12 * SMSS {
            drive_rtt(&mut cc, &mut now, rtt);
        }
        let cwnd = seg(&cc);
        cc.on_congestion_event(now, cc.cwnd());
        assert_eq!(cc.w_max(), Some(cwnd));
    }

    #[test]
    fn rto_then_slow_start_then_k_zero() {
        let rtt = Duration::from_millis(20);
        let mut cc = after_loss(100); // W_max = 100
        cc.on_rto(T0, 50 * SMSS);
        assert_eq!(cc.cwnd(), SMSS);
        assert_eq!(cc.ssthresh(), 35 * SMSS);
        let mut now = T0;
        drive_rtt(&mut cc, &mut now, rtt);
        assert_eq!(cc.cwnd(), 2 * SMSS);
        while cc.in_slow_start() {
            drive_rtt(&mut cc, &mut now, rtt);
        }
        // Congestion avoidance has begun: §4.8 says K = 0 and W_max = cwnd_epoch.
        assert_eq!(cc.k(), Some(0.0));
        assert_eq!(cc.w_max(), Some(35.0));
        assert_eq!(cc.w_est().map(|w| w >= 35.0), Some(true));
        assert!(cc.cwnd() >= 35 * SMSS && cc.cwnd() < 37 * SMSS);
    }

    #[test]
    fn spurious_congestion_restores_all_variables() {
        let rtt = Duration::from_millis(10);
        let mut cc = after_loss(100);
        let mut now = T0;
        for _ in 0..20 {
            drive_rtt(&mut cc, &mut now, rtt);
        }
        let before = cc.s;
        cc.on_congestion_event(now, cc.cwnd());
        assert!(cc.cwnd() < before.cwnd);
        cc.on_spurious_congestion(now);
        assert_eq!(cc.s, before);
        // Consumed; a recovery end afterwards is a no-op.
        cc.on_recovery_end(now, 0);
        assert_eq!(cc.s, before);
        // Late detection: cwnd regrew past the saved value, keep going.
        cc.on_congestion_event(now, cc.cwnd());
        cc.on_recovery_end(now, cc.cwnd());
        while cc.cwnd() <= before.cwnd {
            drive_rtt(&mut cc, &mut now, rtt);
        }
        let current = cc.s;
        cc.on_spurious_congestion(now);
        assert_eq!(cc.s, current);
    }

    #[test]
    fn application_limited_time_does_not_count() {
        let rtt = Duration::from_millis(50);
        let mut busy = after_loss(100);
        let mut paused = after_loss(100);
        let (mut tb, mut tp) = (T0, T0);
        for _ in 0..10 {
            drive_rtt(&mut busy, &mut tb, rtt);
            drive_rtt(&mut paused, &mut tp, rtt);
        }
        assert_eq!(busy.cwnd(), paused.cwnd());
        // Ten seconds of ACKs while sending far below cwnd: no growth.
        let cwnd = paused.cwnd();
        let end = tp + Duration::from_secs(10);
        while tp < end {
            tp += rtt / 4;
            paused.on_ack(tp, SMSS, cwnd / 4, rtt);
        }
        assert_eq!(paused.cwnd(), cwnd);
        // Then thirty seconds without any ACK (idle).
        tp += Duration::from_secs(30);
        for _ in 0..20 {
            drive_rtt(&mut busy, &mut tb, rtt);
            drive_rtt(&mut paused, &mut tp, rtt);
        }
        // The paused sender resumed the curve where it left it (within the
        // one RTT that the idle rule cannot tell from ACK spacing).
        let (b, p) = (seg(&busy), seg(&paused));
        assert!((b - p).abs() < 1.0, "busy {b} paused {p}");
        assert!(p < 95.0, "paused sender jumped ahead: {p}");
    }

    #[test]
    fn set_mss_keeps_segment_counts() {
        let mut cc = Cubic::new(1460, 10);
        cc.set_mss(1000);
        assert_eq!(cc.cwnd(), 10_000);
        cc.on_congestion_event(T0, 40_000);
        cc.set_mss(500);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (14_000, 14_000));
        cc.set_mss(0);
        assert_eq!(cc.smss(), 1);
    }

    fn rtt_strategy() -> impl Strategy<Value = Duration> {
        prop_oneof![
            Just(Duration::from_millis(1)),
            Just(Duration::from_millis(20)),
            Just(Duration::from_millis(300)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn model(
            fc in any::<bool>(),
            rtt in rtt_strategy(),
            ops in proptest::collection::vec(operation(), 1..300),
        ) {
            let mut m = Model::new(Cubic::new(SMSS, IW).with_fast_convergence(fc), rtt);
            m.invariants();
            for op in ops {
                let s = m.apply(op);
                if !s.applied {
                    continue;
                }
                let (cwnd, ssthresh) = (m.cc.cwnd(), m.cc.ssthresh());
                let reduced = ((s.flight as f64 * 0.7) as usize).max(2 * SMSS);
                match s.op {
                    Operation::Ack { bytes, .. } if s.cwnd_limited => {
                        let grown = cwnd - s.cwnd_before;
                        if s.cwnd_before < s.ssthresh_before {
                            prop_assert!(grown <= bytes);
                        } else {
                            // At most half a byte per byte acknowledged
                            // (RFC 9438 §4.2: target <= 1.5*cwnd), plus the carry.
                            prop_assert!(grown <= bytes / 2 + 1,
                                "grew {} on {} bytes at cwnd {}", grown, bytes, s.cwnd_before);
                        }
                    }
                    Operation::Congestion => {
                        prop_assert_eq!(ssthresh, reduced);
                        prop_assert_eq!(cwnd, ssthresh);
                        let w_max = m.cc.w_max().unwrap();
                        let before = s.cwnd_before as f64 / SMSS as f64;
                        prop_assert!(w_max <= before + 1.0 && w_max >= before * 0.85 - 1.0);
                    }
                    Operation::Rto => {
                        prop_assert_eq!(ssthresh, reduced);
                    }
                    _ => {}
                }
            }
        }
    }
}
