//! The one percentile definition of the workspace: nearest rank (the
//! smallest value with at least `q` of the sample at or below it). Every
//! report — VoIP delays, live video latencies, the lab's comparisons and
//! benchmarks, the experiments' aggregates — uses it, so a p99 here means
//! the same as a p99 there.

use serde::Serialize;

/// The nearest-rank `q`-quantile (`q` in `[0, 1]`) of `sorted`, which must be
/// sorted ascending; `None` when empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Percentiles of a sample (milliseconds where it is a delay).
#[derive(Serialize, Debug, Default, Clone, Copy, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `v`; zeros when empty.
    pub fn of(mut v: Vec<f64>) -> Percentiles {
        v.sort_by(f64::total_cmp);
        let at = |q: f64| percentile(&v, q).unwrap_or(0.0);
        Percentiles {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 0.5), None);
        let p = Percentiles::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((p.p50, p.p90, p.p99, p.max), (2.0, 3.0, 3.0, 3.0));
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
    }
}
