//! Rate adaptation (ABR): which representation to fetch next. One file per
//! algorithm behind the [`Abr`] trait:
//!
//! - [`bola::Bola`]: BOLA as dash.js implements it (the version current
//!   when [DASHing-2018] was written; [DASHing-2018] §3 keeps its quality estimation
//!   unchanged), BOLA-O with dash.js's start-up phase, placeholder buffer
//!   and rebuffer safety;
//! - [`throughput::ThroughputRule`]: the highest rate below a safety share
//!   of the recent throughput.

pub mod bola;
pub mod throughput;

/// One download, for throughput estimates: `bits` in `seconds` from the
/// request to the end of the download (the request's RTT included, as
/// dash.js measures it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Bits received.
    pub bits: f64,
    /// Seconds from the request to the last of them.
    pub seconds: f64,
}

/// The harmonic mean throughput (bit/s) of the last `count` samples, as
/// dash.js averages them; `None` without samples.
pub fn harmonic_throughput(samples: &[Sample], count: usize) -> Option<f64> {
    let recent = &samples[samples.len().saturating_sub(count)..];
    if recent.is_empty() {
        return None;
    }
    let inverse: f64 = recent
        .iter()
        .map(|s| s.seconds.max(1e-6) / s.bits.max(1.0))
        .sum();
    Some(recent.len() as f64 / inverse)
}

/// The highest representation whose rate is at most `bps` (0 if none is).
pub fn quality_for_throughput(bitrates: &[u64], bps: f64) -> usize {
    bitrates.iter().rposition(|&b| b as f64 <= bps).unwrap_or(0)
}

/// What an algorithm sees when it decides.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Seconds since the session began.
    pub now_s: f64,
    /// Playout buffer level (seconds of video), after the client's own
    /// adjustments (the [DASHing-2018] loss penalty).
    pub buffer_s: f64,
    /// When the last download ended (seconds since the session began).
    pub last_download_end_s: Option<f64>,
    /// Encoding rates of the representations, lowest first (bit/s).
    pub bitrates: &'a [u64],
    /// Chunk duration (seconds).
    pub chunk_s: f64,
    /// Every completed download so far, oldest first.
    pub samples: &'a [Sample],
}

/// A decision: fetch `quality`, after waiting `delay_s` (an algorithm may
/// hold back a request to avoid filling the buffer with low-rate chunks;
/// the client asks again when the delay is over).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Representation index.
    pub quality: usize,
    /// Seconds to wait before fetching (0 = now).
    pub delay_s: f64,
}

/// A rate-adaptation algorithm.
pub trait Abr: std::fmt::Debug + Send {
    /// Short name.
    fn name(&self) -> &'static str;
    /// The next chunk's representation.
    fn choose(&mut self, ctx: &Context<'_>) -> Decision;
    /// The buffer ran dry (a stall began).
    fn on_rebuffer(&mut self) {}
}

/// The algorithms by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AbrKind {
    /// [`bola::Bola`].
    Bola,
    /// [`throughput::ThroughputRule`].
    Throughput,
}

impl AbrKind {
    /// Parse a name.
    pub fn parse(s: &str) -> Result<AbrKind, String> {
        match s {
            "bola" => Ok(AbrKind::Bola),
            "throughput" => Ok(AbrKind::Throughput),
            _ => Err(format!("unknown ABR {s:?}: use bola or throughput")),
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            AbrKind::Bola => "bola",
            AbrKind::Throughput => "throughput",
        }
    }

    /// A fresh instance for a ladder.
    pub fn build(self, bitrates: &[u64]) -> Box<dyn Abr> {
        match self {
            AbrKind::Bola => Box::new(bola::Bola::new(bitrates)),
            AbrKind::Throughput => Box::new(throughput::ThroughputRule::default()),
        }
    }
}

/// The [DASHing-2018] encoding rates, for tests.
#[cfg(test)]
pub(crate) const SEED_LADDER_BPS: [u64; 8] = [
    1_200_000, 1_800_000, 2_400_000, 3_000_000, 3_500_000, 4_000_000, 5_000_000, 5_600_000,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harmonic_mean_weights_slow_downloads() {
        let s = |bits, seconds| Sample { bits, seconds };
        assert_eq!(harmonic_throughput(&[], 3), None);
        let t = harmonic_throughput(&[s(1e9, 1.0), s(1e6, 1.0), s(1e6, 1.0), s(1e6, 1.0)], 3);
        assert!((t.unwrap() - 1e6).abs() < 1.0);
        let t = harmonic_throughput(&[s(2e6, 1.0), s(2e6, 2.0)], 3).unwrap();
        assert!((t - 2.0 / (0.5e-6 + 1e-6)).abs() < 1.0);
        let rates = [100, 200, 300];
        assert_eq!(quality_for_throughput(&rates, 50.0), 0);
        assert_eq!(quality_for_throughput(&rates, 250.0), 1);
        assert_eq!(quality_for_throughput(&rates, 1e9), 2);
    }
}
