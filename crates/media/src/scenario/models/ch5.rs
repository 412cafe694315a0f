//! The latency model of thesis §5.1.1 and §5.2.1: when standard TCP
//! retransmissions arrive in time to be played out, when only TCP Hollywood's
//! inconsistent retransmissions help, and how many frames head-of-line
//! blocking costs.
//!
//! All quantities are milliseconds as `f64` (the thesis reasons in ms and its
//! Table 5.1 has fractional bounds such as 33.3 ms). Notation as the thesis:
//!
//! | symbol | here | meaning |
//! | --- | --- | --- |
//! | T_max | [`MediaTiming::t_max_ms`] | the application's end-to-end delay bound |
//! | T_framing | [`MediaTiming::t_framing_ms`] | media duration per frame (inter-frame interval) |
//! | T_rtt | `rtt_ms` | network round-trip time |
//! | T_playout | `playout_ms` | de-jitter buffering + decode/render time at the receiver |
//! | T_sender | `sender_ms` | capture + encode + send; the model takes T_sender = T_framing |
//!
//! The model assumes one frame per TCP segment, symmetric one-way delays,
//! negligible encode/decode time and loss detected by three duplicate
//! acknowledgements (§5.1.1).

use std::fmt;
use std::time::Duration;

/// RTT above which a path counts as intercontinental: the thesis calls links
/// "where T_rtt exceeds 70 ms" intercontinental (§5.1.1) and uses 70 ms for
/// its intercontinental scenario (§5.1.2).
pub const INTERCONTINENTAL_RTT_MS: f64 = 70.0;

/// Relative slack used when rounding `T_hol / T_framing` up (eq. 5.7), so
/// that an exact multiple computed in floating point is not counted as one
/// more frame.
const CEIL_SLACK: f64 = 1e-9;

/// Invalid model parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum AnalysisError {
    /// A value is NaN or infinite.
    NotFinite {
        /// Which parameter.
        what: &'static str,
    },
    /// A duration is negative.
    Negative {
        /// Which parameter.
        what: &'static str,
        /// The value given, in ms.
        value_ms: f64,
    },
    /// T_framing is zero: there is no frame to count (eq. 5.7 divides by it).
    ZeroFraming,
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::NotFinite { what } => write!(f, "{what} is not a finite number"),
            AnalysisError::Negative { what, value_ms } => {
                write!(f, "{what} must not be negative (got {value_ms} ms)")
            }
            AnalysisError::ZeroFraming => write!(f, "the framing interval must be above zero"),
        }
    }
}

impl std::error::Error for AnalysisError {}

/// Check that a duration in ms is finite and not negative.
pub fn check_ms(what: &'static str, value_ms: f64) -> Result<f64, AnalysisError> {
    if !value_ms.is_finite() {
        Err(AnalysisError::NotFinite { what })
    } else if value_ms < 0.0 {
        Err(AnalysisError::Negative { what, value_ms })
    } else {
        Ok(value_ms)
    }
}

/// A [`Duration`] in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One-way transport delay, thesis eq. (5.1):
/// `T_owd = T_sender + T_playout + T_rtt / 2`.
pub fn one_way_delay_ms(sender_ms: f64, playout_ms: f64, rtt_ms: f64) -> f64 {
    sender_ms + playout_ms + rtt_ms / 2.0
}

/// A closed range of playout delays `lower ≤ T_playout ≤ upper` (ms). It is
/// empty when `lower > upper`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayoutRange {
    /// Smallest playout delay in the range.
    pub lower_ms: f64,
    /// Largest playout delay in the range.
    pub upper_ms: f64,
}

impl PlayoutRange {
    /// No playout delay satisfies both bounds.
    pub fn is_empty(&self) -> bool {
        self.lower_ms > self.upper_ms
    }

    /// `lower ≤ playout ≤ upper`.
    pub fn contains(&self, playout_ms: f64) -> bool {
        self.lower_ms <= playout_ms && playout_ms <= self.upper_ms
    }
}

/// Where a (T_rtt, T_playout) point falls in the thesis's Fig. 5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// `T_playout < T_framing`: playout stalls between frames (infeasible,
    /// unshaded in Fig. 5.1).
    Stall,
    /// `T_playout > T_max − T_framing − T_rtt/2`: the one-way delay (eq. 5.1)
    /// exceeds the application's bound (infeasible, unshaded).
    OverDelayBound,
    /// Eq. (5.4) holds: a standard TCP retransmission arrives in time to be
    /// played out (green in Fig. 5.1).
    StandardUseful,
    /// Feasible but `T_playout < T_rtt + 4·T_framing`: standard
    /// retransmissions arrive too late and only an inconsistent
    /// retransmission carries useful data (red in Fig. 5.1).
    HollywoodUseful,
}

impl Region {
    /// Short kebab-case name (`stall`, `over-delay-bound`, `standard-useful`,
    /// `hollywood-useful`).
    pub fn name(self) -> &'static str {
        match self {
            Region::Stall => "stall",
            Region::OverDelayBound => "over-delay-bound",
            Region::StandardUseful => "standard-useful",
            Region::HollywoodUseful => "hollywood-useful",
        }
    }
}

/// Head-of-line blocking after one loss, thesis §5.2.1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HolBlocking {
    /// Eq. (5.6): `T_hol = T_rexmit − T_playout = T_rtt + 3·T_framing − T_playout`.
    /// Zero or negative means no frame after the lost one misses its playout.
    pub t_hol_ms: f64,
    /// Eq. (5.7): `N_hol = max(⌈T_hol / T_framing⌉, 0)`, the frames *after*
    /// the lost one that arrive in time but are discarded because standard
    /// TCP holds them back until the retransmission arrives.
    pub n_hol: u64,
    /// `T_playout < T_rexmit + T_framing` (eq. 5.3 fails): the lost frame's
    /// own retransmission is too late, a one-frame gap with or without
    /// head-of-line blocking.
    pub retransmission_late: bool,
}

/// An application's latency parameters: its delay bound and framing interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MediaTiming {
    t_max_ms: f64,
    t_framing_ms: f64,
}

impl MediaTiming {
    /// From milliseconds; both finite and non-negative, T_framing above zero.
    pub fn from_ms(t_max_ms: f64, t_framing_ms: f64) -> Result<Self, AnalysisError> {
        let t_max_ms = check_ms("T_max", t_max_ms)?;
        let t_framing_ms = check_ms("T_framing", t_framing_ms)?;
        if t_framing_ms == 0.0 {
            return Err(AnalysisError::ZeroFraming);
        }
        Ok(MediaTiming {
            t_max_ms,
            t_framing_ms,
        })
    }

    /// From durations (T_framing above zero).
    pub fn new(t_max: Duration, t_framing: Duration) -> Result<Self, AnalysisError> {
        Self::from_ms(ms(t_max), ms(t_framing))
    }

    /// T_max, the application's end-to-end delay bound (ms).
    pub fn t_max_ms(&self) -> f64 {
        self.t_max_ms
    }

    /// T_framing, the inter-frame interval (ms).
    pub fn t_framing_ms(&self) -> f64 {
        self.t_framing_ms
    }

    /// Earliest a loss can be repaired, thesis eq. (5.2):
    /// `T_rexmit = T_rtt + 3·T_framing` (three later frames raise the three
    /// duplicate ACKs that trigger fast retransmit).
    pub fn rexmit_ms(&self, rtt_ms: f64) -> f64 {
        rtt_ms + 3.0 * self.t_framing_ms
    }

    /// Largest playout delay within the delay bound: eq. (5.1) with
    /// `T_sender = T_framing` and `T_owd ≤ T_max` gives
    /// `T_playout ≤ T_max − T_framing − T_rtt/2` (right side of eq. 5.4).
    pub fn max_playout_ms(&self, rtt_ms: f64) -> f64 {
        self.t_max_ms - self.t_framing_ms - rtt_ms / 2.0
    }

    /// Smallest playout delay at which a standard retransmission is played
    /// out: eq. (5.3) `T_playout ≥ T_rexmit + T_framing` with eq. (5.2), i.e.
    /// `T_rtt + 4·T_framing` (left side of eq. 5.4).
    pub fn min_useful_playout_ms(&self, rtt_ms: f64) -> f64 {
        self.rexmit_ms(rtt_ms) + self.t_framing_ms
    }

    /// Playout delays at which standard TCP retransmissions are useful,
    /// thesis eq. (5.4):
    /// `T_rtt + 4·T_framing ≤ T_playout ≤ T_max − T_framing − T_rtt/2`.
    /// For voice (T_max 150 ms, T_framing 20 ms) this is eq. (5.5):
    /// `T_rtt + 80 ms ≤ T_playout ≤ 130 ms − T_rtt/2`.
    pub fn standard_range(&self, rtt_ms: f64) -> PlayoutRange {
        PlayoutRange {
            lower_ms: self.min_useful_playout_ms(rtt_ms),
            upper_ms: self.max_playout_ms(rtt_ms),
        }
    }

    /// Feasible playout delays, where TCP Hollywood's inconsistent
    /// retransmissions are useful (§5.1.1):
    /// `T_framing ≤ T_playout ≤ T_max − T_framing − T_rtt/2`.
    pub fn feasible_range(&self, rtt_ms: f64) -> PlayoutRange {
        PlayoutRange {
            lower_ms: self.t_framing_ms,
            upper_ms: self.max_playout_ms(rtt_ms),
        }
    }

    /// Largest RTT at which standard retransmissions can be useful: eq. (5.4)
    /// has a solution iff `T_rtt + 4·T_framing ≤ T_max − T_framing − T_rtt/2`,
    /// i.e. `T_rtt ≤ (2/3)·(T_max − 5·T_framing)`; clamped at 0 when even a
    /// zero RTT leaves no room (Table 5.1, IPTV).
    pub fn rtt_bound_standard_ms(&self) -> f64 {
        let b = 2.0 / 3.0 * (self.t_max_ms - 5.0 * self.t_framing_ms);
        if b > 0.0 {
            b
        } else {
            0.0
        }
    }

    /// Largest RTT at which TCP Hollywood has a feasible playout delay:
    /// `T_framing ≤ T_max − T_framing − T_rtt/2`, i.e.
    /// `T_rtt ≤ 2·(T_max − 2·T_framing)` (Table 5.1); clamped at 0.
    pub fn rtt_bound_hollywood_ms(&self) -> f64 {
        let b = 2.0 * (self.t_max_ms - 2.0 * self.t_framing_ms);
        if b > 0.0 {
            b
        } else {
            0.0
        }
    }

    /// Where `(T_rtt, T_playout)` falls in Fig. 5.1. A playout delay below
    /// T_framing is [`Region::Stall`] even when it is also over the bound.
    pub fn region(&self, rtt_ms: f64, playout_ms: f64) -> Region {
        if playout_ms < self.t_framing_ms {
            Region::Stall
        } else if playout_ms > self.max_playout_ms(rtt_ms) {
            Region::OverDelayBound
        } else if playout_ms >= self.min_useful_playout_ms(rtt_ms) {
            Region::StandardUseful
        } else {
            Region::HollywoodUseful
        }
    }

    /// Head-of-line blocking after a loss, thesis eqs. (5.6) and (5.7).
    ///
    /// Derivation (cross-checked with the prose of §5.2.1 and Fig. 5.12):
    /// frame `k` is lost, its retransmission arrives `T_rexmit` after the
    /// original would have; frame `k + j` arrived in time but is held back
    /// until then and, needing one framing interval to decode (as in eq.
    /// 5.3), misses its playout iff `j·T_framing < T_rexmit − T_playout`. The
    /// number of such `j ≥ 1` is `⌈T_hol / T_framing⌉` for `T_hol > 0`.
    pub fn hol(&self, rtt_ms: f64, playout_ms: f64) -> HolBlocking {
        let t_hol_ms = self.rexmit_ms(rtt_ms) - playout_ms; // eq. (5.6)
        let frames = t_hol_ms / self.t_framing_ms;
        // eq. (5.7); the slack keeps an exact multiple from rounding up.
        let n_hol = if frames > CEIL_SLACK {
            (frames - CEIL_SLACK * frames.max(1.0)).ceil() as u64
        } else {
            0
        };
        HolBlocking {
            t_hol_ms,
            n_hol,
            retransmission_late: playout_ms < self.min_useful_playout_ms(rtt_ms),
        }
    }
}

/// How far apart the ends of a path may be for a kind of retransmission to
/// be useful, judged from its RTT bound (Table 5.1's "Utility" columns).
///
/// Rule: [`Utility::None`] if the bound is 0 (no RTT works);
/// [`Utility::WithinContinent`] if `0 < bound ≤ 70 ms`;
/// [`Utility::Intercontinental`] if `bound > 70 ms`
/// ([`INTERCONTINENTAL_RTT_MS`]: intercontinental links are those "where
/// T_rtt exceeds 70 ms", §5.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Utility {
    /// Useful on no path.
    None,
    /// Useful on paths within a continent only.
    WithinContinent,
    /// Useful on intercontinental paths too.
    Intercontinental,
}

impl Utility {
    /// Classify an RTT bound (ms).
    pub fn from_rtt_bound_ms(bound_ms: f64) -> Utility {
        if bound_ms <= 0.0 {
            Utility::None
        } else if bound_ms <= INTERCONTINENTAL_RTT_MS {
            Utility::WithinContinent
        } else {
            Utility::Intercontinental
        }
    }

    /// As Table 5.1 writes it.
    pub fn label(self) -> &'static str {
        match self {
            Utility::None => "None",
            Utility::WithinContinent => "Within a continent",
            Utility::Intercontinental => "Intercontinental",
        }
    }
}

/// One row of thesis Table 5.1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableRow {
    /// The application, as the table names it.
    pub application: &'static str,
    /// Its delay bound and framing interval (§5.1.1).
    pub timing: MediaTiming,
    /// [`MediaTiming::rtt_bound_standard_ms`].
    pub rtt_bound_standard_ms: f64,
    /// [`MediaTiming::rtt_bound_hollywood_ms`].
    pub rtt_bound_hollywood_ms: f64,
    /// Utility of standard retransmissions.
    pub utility_standard: Utility,
    /// Utility of TCP Hollywood's inconsistent retransmissions.
    pub utility_hollywood: Utility,
}

impl TableRow {
    /// Compute a row from an application's timing.
    pub fn new(application: &'static str, timing: MediaTiming) -> TableRow {
        let s = timing.rtt_bound_standard_ms();
        let h = timing.rtt_bound_hollywood_ms();
        TableRow {
            application,
            timing,
            rtt_bound_standard_ms: s,
            rtt_bound_hollywood_ms: h,
            utility_standard: Utility::from_rtt_bound_ms(s),
            utility_hollywood: Utility::from_rtt_bound_ms(h),
        }
    }
}

/// The three applications of §5.1.1: `(name, T_max ms, T_framing ms)`.
/// Voice: 20 ms codec frames, 150 ms bound (ITU-T G.114); on-demand
/// MPEG-DASH video: 2 s segments, 30 s bound; IPTV over MPEG-DASH: 200 ms
/// chunks, 1 s bound (channel switching).
pub const TABLE_5_1_APPLICATIONS: [(&str, f64, f64); 3] = [
    ("Voice telephony", 150.0, 20.0),
    ("On-demand video", 30_000.0, 2_000.0),
    ("IPTV", 1_000.0, 200.0),
];

/// Thesis Table 5.1, computed.
pub fn table_5_1() -> Vec<TableRow> {
    TABLE_5_1_APPLICATIONS
        .iter()
        .map(|&(name, t_max, framing)| {
            let timing = MediaTiming::from_ms(t_max, framing)
                .expect("Table 5.1 parameters are positive and finite");
            TableRow::new(name, timing)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn voice() -> MediaTiming {
        MediaTiming::new(Duration::from_millis(150), Duration::from_millis(20)).unwrap()
    }

    /// Round to one decimal, as the table prints.
    fn one_decimal(v: f64) -> f64 {
        (v * 10.0).round() / 10.0
    }

    #[test]
    fn table_5_1_matches_the_thesis() {
        let t = table_5_1();
        let got: Vec<_> = t
            .iter()
            .map(|r| {
                (
                    r.application,
                    r.timing.t_max_ms(),
                    one_decimal(r.rtt_bound_standard_ms),
                    one_decimal(r.rtt_bound_hollywood_ms),
                    r.utility_standard.label(),
                    r.utility_hollywood.label(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "Voice telephony",
                    150.0,
                    33.3,
                    220.0,
                    "Within a continent",
                    "Intercontinental"
                ),
                (
                    "On-demand video",
                    30000.0,
                    13333.3,
                    52000.0,
                    "Intercontinental",
                    "Intercontinental"
                ),
                ("IPTV", 1000.0, 0.0, 1200.0, "None", "Intercontinental"),
            ]
        );
        // Unrounded: exactly (2/3)·50 ms and (2/3)·20 s.
        assert!(close(t[0].rtt_bound_standard_ms, 100.0 / 3.0));
        assert!(close(t[1].rtt_bound_standard_ms, 40_000.0 / 3.0));
        // IPTV: T_max − 5·T_framing = 0, and the sign is not negative zero.
        assert!(t[2].rtt_bound_standard_ms.is_sign_positive());
        assert_eq!(format!("{:.1}", t[2].rtt_bound_standard_ms), "0.0");
    }

    #[test]
    fn bounds_clamp_at_zero() {
        let m = MediaTiming::from_ms(100.0, 40.0).unwrap();
        assert_eq!(m.rtt_bound_standard_ms(), 0.0); // (2/3)(100 − 200) < 0
        assert_eq!(m.rtt_bound_hollywood_ms(), 40.0); // 2(100 − 80)
        let m = MediaTiming::from_ms(30.0, 20.0).unwrap();
        assert_eq!(m.rtt_bound_hollywood_ms(), 0.0);
        assert_eq!(Utility::from_rtt_bound_ms(0.0), Utility::None);
        assert_eq!(Utility::from_rtt_bound_ms(70.0), Utility::WithinContinent);
        assert_eq!(Utility::from_rtt_bound_ms(70.1), Utility::Intercontinental);
    }

    #[test]
    fn eq_5_5_voice_range() {
        // 130 ms − T_rtt/2 ≥ T_playout ≥ T_rtt + 80 ms, for several RTTs.
        let m = voice();
        for rtt in [0.0, 10.0, 15.0, 33.0, 50.0, 70.0] {
            let r = m.standard_range(rtt);
            assert!(close(r.lower_ms, rtt + 80.0), "rtt {rtt}: {r:?}");
            assert!(close(r.upper_ms, 130.0 - rtt / 2.0), "rtt {rtt}: {r:?}");
        }
        // Non-empty exactly up to the 33.3 ms bound.
        assert!(!m.standard_range(33.3).is_empty());
        assert!(m.standard_range(33.4).is_empty());
        let b = m.rtt_bound_standard_ms();
        let r = m.standard_range(b);
        assert!(close(r.lower_ms, r.upper_ms));
        // Hollywood: feasible up to 220 ms RTT.
        assert!(!m.feasible_range(220.0).is_empty());
        assert!(m.feasible_range(220.1).is_empty());
    }

    #[test]
    fn eq_5_1_and_5_2() {
        assert!(close(one_way_delay_ms(20.0, 30.0, 70.0), 85.0));
        assert!(close(voice().rexmit_ms(70.0), 130.0));
        // eq. 5.1 at the top of the eq. 5.4 range meets T_max exactly.
        let m = voice();
        assert!(close(
            one_way_delay_ms(m.t_framing_ms(), m.max_playout_ms(70.0), 70.0),
            m.t_max_ms()
        ));
    }

    #[test]
    fn regions_of_the_thesis_scenarios() {
        let m = voice();
        // §5.1.2: intracontinental 15 ms RTT, 110 ms playout: standard useful.
        assert_eq!(m.region(15.0, 110.0), Region::StandardUseful);
        // Intercontinental 70 ms RTT, 30 ms playout: only Hollywood helps.
        assert_eq!(m.region(70.0, 30.0), Region::HollywoodUseful);
        assert_eq!(m.region(70.0, 10.0), Region::Stall);
        assert_eq!(m.region(70.0, 96.0), Region::OverDelayBound);
        // Boundaries of eq. 5.4 are inclusive.
        assert_eq!(m.region(20.0, 100.0), Region::StandardUseful);
        assert_eq!(m.region(20.0, 99.9), Region::HollywoodUseful);
        assert_eq!(m.region(20.0, 120.0), Region::StandardUseful);
        assert_eq!(m.region(20.0, 120.1), Region::OverDelayBound);
    }

    #[test]
    fn head_of_line_blocking() {
        let m = voice();
        // 70 ms RTT, 30 ms playout: T_hol = 70 + 60 − 30 = 100 ms → 5 frames.
        let h = m.hol(70.0, 30.0);
        assert!(close(h.t_hol_ms, 100.0));
        assert_eq!(h.n_hol, 5);
        assert!(h.retransmission_late);
        // One ms less blocking still costs 5 frames; one more costs 6.
        assert_eq!(m.hol(70.0, 31.0).n_hol, 5);
        assert_eq!(m.hol(70.0, 29.0).n_hol, 6);
        // T_playout = T_rexmit: late retransmission, but no blocking (§5.2.1).
        let h = m.hol(70.0, 130.0);
        assert_eq!((h.n_hol, h.retransmission_late), (0, true));
        // 15 ms RTT, 110 ms playout: T_hol = −35 ms, nothing lost.
        let h = m.hol(15.0, 110.0);
        assert!(close(h.t_hol_ms, -35.0));
        assert_eq!((h.n_hol, h.retransmission_late), (0, false));
        // An exact multiple stays exact although 3·0.1 / 0.1 is
        // 3.0000000000000004 in floating point.
        let f = MediaTiming::from_ms(1.0, 0.1).unwrap();
        assert_eq!(f.hol(0.0, 0.0).n_hol, 3);
    }

    #[test]
    fn invalid_parameters() {
        assert_eq!(
            MediaTiming::from_ms(150.0, 0.0),
            Err(AnalysisError::ZeroFraming)
        );
        assert_eq!(
            MediaTiming::from_ms(-1.0, 20.0),
            Err(AnalysisError::Negative {
                what: "T_max",
                value_ms: -1.0
            })
        );
        assert_eq!(
            MediaTiming::from_ms(150.0, f64::NAN),
            Err(AnalysisError::NotFinite { what: "T_framing" })
        );
        assert!(check_ms("T_rtt", f64::INFINITY).is_err());
    }
}
