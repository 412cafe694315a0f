//! Aggregation over seeds and samples: mean ± sample standard deviation,
//! trimmed means ([DASHing-2018] reports means with the extremes dropped) and
//! nearest-rank percentiles.

use serde::Serialize;

/// Mean, sample standard deviation, min and max of a set of values (one per
/// seed, typically).
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Stat {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one value.
    pub sd: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub n: usize,
}

impl Stat {
    /// The statistics of `v`; all zero (n = 0) when empty.
    pub fn of(v: &[f64]) -> Stat {
        if v.is_empty() {
            return Stat::default();
        }
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Stat {
            mean,
            sd,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n,
        }
    }

    /// `mean ± sd` with two decimals, or `n/a` when there were no values.
    pub fn pm(&self) -> String {
        if self.n == 0 {
            "n/a".into()
        } else {
            format!("{:.2} ± {:.2}", self.mean, self.sd)
        }
    }
}

/// The mean of `v` without its `trim` smallest and `trim` largest values
/// ([DASHing-2018] averages its runs this way). `None` when fewer than
/// `2·trim + 1` values remain to average.
pub fn trimmed_mean(v: &[f64], trim: usize) -> Option<f64> {
    if v.len() < 2 * trim + 1 {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let kept = &s[trim..s.len() - trim];
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

pub use hollywood_media::scenario::stats::{percentile, Percentiles};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_mean_and_sample_sd() {
        let s = Stat::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((s.mean, s.min, s.max, s.n), (2.5, 1.0, 4.0, 4));
        assert!((s.sd - 1.290_994).abs() < 1e-6);
        assert_eq!(Stat::of(&[5.0]).sd, 0.0);
        assert_eq!(Stat::of(&[]).pm(), "n/a");
        assert_eq!(Stat::of(&[1.0, 3.0]).pm(), "2.00 ± 1.41");
    }

    #[test]
    fn trimmed_mean_drops_the_extremes() {
        assert_eq!(trimmed_mean(&[100.0, 1.0, 2.0, 3.0, -50.0], 1), Some(2.0));
        assert_eq!(trimmed_mean(&[1.0, 2.0], 1), None);
        assert_eq!(trimmed_mean(&[4.0], 0), Some(4.0));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 0.5), None);
        let p = Percentiles::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((p.p50, p.p90, p.max), (2.0, 3.0, 3.0));
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
    }
}
