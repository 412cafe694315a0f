//! The throughput rule: the highest representation whose rate fits in a
//! safety share of the recent throughput (dash.js's `ThroughputRule` in
//! spirit: harmonic mean of the last three downloads, 0.9 safety factor),
//! the lowest before any download.

use super::{harmonic_throughput, quality_for_throughput, Abr, Context, Decision};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct ThroughputRule {
    /// Share of the estimate a representation may use.
    pub safety: f64,
    /// Downloads averaged.
    pub samples: usize,
}

impl Default for ThroughputRule {
    fn default() -> Self {
        ThroughputRule {
            safety: 0.9,
            samples: 3,
        }
    }
}

impl Abr for ThroughputRule {
    fn name(&self) -> &'static str {
        "throughput"
    }

    fn choose(&mut self, ctx: &Context<'_>) -> Decision {
        let quality = harmonic_throughput(ctx.samples, self.samples)
            .map_or(0, |t| quality_for_throughput(ctx.bitrates, t * self.safety));
        Decision {
            quality,
            delay_s: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Sample;
    use super::*;

    #[test]
    fn it_follows_the_throughput_with_a_margin() {
        let rates = [1_000_000, 2_000_000, 3_000_000];
        let mut r = ThroughputRule::default();
        let ctx = |samples| Context {
            now_s: 0.0,
            buffer_s: 5.0,
            last_download_end_s: None,
            bitrates: &rates,
            chunk_s: 1.0,
            samples,
        };
        assert_eq!(r.choose(&ctx(&[])).quality, 0);
        let s = [Sample {
            bits: 3.2e6,
            seconds: 1.0,
        }];
        assert_eq!(r.choose(&ctx(&s)).quality, 1, "3.2 Mb/s * 0.9 < 3 Mb/s");
        let s = [Sample {
            bits: 3.4e6,
            seconds: 1.0,
        }];
        assert_eq!(r.choose(&ctx(&s)).quality, 2);
    }
}
