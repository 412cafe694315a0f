//! Unidirectional links: a drop-tail queue in front of a serializing
//! transmitter, a propagation delay, and optional impairments (random loss,
//! jitter, reordering, duplication).
//!
//! # The model, per packet offered to a link at time `now`
//!
//! 1. The packet gets the next **index** on the link (0-based count of packets
//!    offered) and is recorded as [`TraceKind::Sent`](crate::TraceKind::Sent).
//! 2. The link's **rules** are consulted (see [`crate::rule`]): any `Drop`
//!    drops it ([`DropReason::Rule`]); `Delay`s add up to an extra hold time.
//! 3. **MTU**: a packet longer than [`LinkConfig::mtu`] is dropped
//!    ([`DropReason::Mtu`]).
//! 4. **Drop-tail queue**: the backlog is the bytes of accepted packets whose
//!    serialization has not finished by `now` (the packet in service
//!    included). If the backlog is non-empty and backlog + len exceeds
//!    [`LinkConfig::queue_bytes`], the packet is dropped
//!    ([`DropReason::QueueFull`]). An idle link always accepts a packet.
//! 5. **Serialization**: the transmitter is busy until `busy_until`; the packet
//!    starts at `max(now, busy_until)` and occupies the link for
//!    `ceil(len * 8 * 1e9 / rate_bps)` ns (zero when `rate_bps == 0`).
//! 6. **Random loss** ([`LossModel`]) is decided after serialization, as if the
//!    packet were corrupted on the wire: a lost packet still used its
//!    transmission time ([`DropReason::Loss`]).
//! 7. **Arrival** = end of serialization + `delay` + jitter, plus the rule
//!    delay and the reorder hold if any. With [`Jitter::preserve_order`] the
//!    jittered arrival is raised to the previous in-order arrival so jitter
//!    never reorders; rule delays and the [`Reorder`] hold bypass that clamp
//!    and do reorder.
//! 8. **Duplication**: with probability [`LinkConfig::duplicate`] a copy is
//!    offered right behind the original; the copy uses the queue and the
//!    transmitter and draws its own loss and jitter, but not the rules, and
//!    it has the same index as the original with `copy = 1`.
//!
//! Parameter changes ([`crate::Simulator::schedule_link`],
//! [`LinkModel::schedule`] with a [`LinkChange`]) apply to packets offered
//! after the change; packets already accepted keep their times.
//!
//! Steps 3–7 and the duplication roll are [`LinkModel`], a sans-IO object
//! that the simulator runs per link and the real-packet emulator
//! (`hollywood_lab::netem`) runs per direction. A [`RateTrace`] (Mahimahi
//! packet-delivery trace) can replace the fixed rate in step 5.

use crate::error::SimError;
use crate::node::NodeId;
use hollywood_tcp::Instant;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::time::Duration;

/// Identifies a link within one [`Simulator`](crate::Simulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// Random loss applied to each packet (after queueing and serialization).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LossModel {
    /// No random loss (the default).
    #[default]
    None,
    /// Each packet is lost independently with probability `p` (0..=1).
    Bernoulli(f64),
    /// A two-state Markov chain, see [`GilbertElliott`].
    GilbertElliott(GilbertElliott),
}

impl std::fmt::Display for LossModel {
    /// As a user writes it on the command line: `0`, `0.1%`, or
    /// `gilbert:P,R,BAD,GOOD` with percentages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LossModel::None => write!(f, "0"),
            LossModel::Bernoulli(p) => write!(f, "{}%", p * 100.0),
            LossModel::GilbertElliott(g) => write!(
                f,
                "gilbert:{}%,{}%,{}%,{}%",
                g.p * 100.0,
                g.r * 100.0,
                g.loss_bad * 100.0,
                g.loss_good * 100.0
            ),
        }
    }
}

impl LossModel {
    /// Long-run fraction of packets lost.
    #[must_use]
    pub fn mean_loss(&self) -> f64 {
        match self {
            LossModel::None => 0.0,
            LossModel::Bernoulli(p) => *p,
            LossModel::GilbertElliott(ge) => ge.mean_loss(),
        }
    }

    fn validate(&self) -> Result<(), SimError> {
        let prob = |name: &'static str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(SimError::InvalidProbability { name, value: v })
            }
        };
        match self {
            LossModel::None => Ok(()),
            LossModel::Bernoulli(p) => prob("loss.bernoulli", *p),
            LossModel::GilbertElliott(ge) => {
                prob("loss.gilbert_elliott.p", ge.p)?;
                prob("loss.gilbert_elliott.r", ge.r)?;
                prob("loss.gilbert_elliott.loss_good", ge.loss_good)?;
                prob("loss.gilbert_elliott.loss_bad", ge.loss_bad)
            }
        }
    }
}

/// The four-parameter Gilbert–Elliott burst-loss model.
///
/// Two states, *Good* and *Bad*; the chain starts in Good. For every packet
/// the chain first takes one step (Good→Bad with probability `p`, Bad→Good
/// with probability `r`), then the packet is lost with the loss probability
/// of the state it is now in: `loss_good` (`1 - k` in the classic notation)
/// or `loss_bad` (`1 - h`).
///
/// Stationary probability of Bad: `π_B = p / (p + r)`; mean loss
/// `loss_good · (1 - π_B) + loss_bad · π_B`; mean burst length of the Bad
/// state `1 / r` packets. The simple Gilbert model is `loss_good = 0`,
/// `loss_bad = 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Probability of moving Good → Bad at a packet.
    pub p: f64,
    /// Probability of moving Bad → Good at a packet.
    pub r: f64,
    /// Loss probability in the Good state (`1 - k`).
    pub loss_good: f64,
    /// Loss probability in the Bad state (`1 - h`).
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// The simple Gilbert model: no loss in Good, every packet lost in Bad.
    #[must_use]
    pub fn gilbert(p: f64, r: f64) -> GilbertElliott {
        GilbertElliott {
            p,
            r,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }

    /// Stationary probability of being in the Bad state, `p / (p + r)`
    /// (0 when both are 0: the chain never leaves Good).
    #[must_use]
    pub fn stationary_bad(&self) -> f64 {
        if self.p + self.r == 0.0 {
            0.0
        } else {
            self.p / (self.p + self.r)
        }
    }

    /// Long-run loss rate: `loss_good · (1 - π_B) + loss_bad · π_B`.
    #[must_use]
    pub fn mean_loss(&self) -> f64 {
        let b = self.stationary_bad();
        self.loss_good * (1.0 - b) + self.loss_bad * b
    }
}

/// Distribution of the extra per-packet delay added by [`Jitter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JitterDistribution {
    /// Uniform on `[0, max]`.
    Uniform {
        /// Largest extra delay.
        max: Duration,
    },
    /// Approximately normal with the given mean and standard deviation
    /// (Irwin–Hall: the sum of 12 uniforms, so it is bounded to
    /// `mean ± 6·std_dev`), clamped below at zero.
    Normal {
        /// Mean extra delay.
        mean: Duration,
        /// Standard deviation.
        std_dev: Duration,
    },
}

/// Random extra delay per packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Jitter {
    /// The distribution of the extra delay.
    pub distribution: JitterDistribution,
    /// `true`: a packet never arrives before a packet offered earlier on the
    /// same link (its arrival is raised to the previous arrival), so jitter
    /// alone never reorders. `false`: jitter may reorder packets.
    pub preserve_order: bool,
}

impl Jitter {
    /// Uniform jitter on `[0, max]` that preserves packet order.
    #[must_use]
    pub fn uniform(max: Duration) -> Jitter {
        Jitter {
            distribution: JitterDistribution::Uniform { max },
            preserve_order: true,
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Duration {
        match self.distribution {
            JitterDistribution::Uniform { max } => {
                let max = max.as_nanos().min(u64::MAX as u128) as u64;
                if max == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_nanos(rng.gen_range(0..=max))
                }
            }
            JitterDistribution::Normal { mean, std_dev } => {
                // Irwin–Hall: sum of 12 U(0,1) has mean 6 and variance 1.
                let z: f64 = (0..12).map(|_| rng.gen::<f64>()).sum::<f64>() - 6.0;
                let ns = mean.as_nanos() as f64 + z * std_dev.as_nanos() as f64;
                if ns <= 0.0 {
                    Duration::ZERO
                } else {
                    Duration::from_nanos(ns as u64)
                }
            }
        }
    }
}

/// Explicit reordering: a packet chosen with `probability` is held back by
/// `extra_delay` beyond its normal arrival, so packets behind it overtake it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reorder {
    /// Probability that a packet is held back.
    pub probability: f64,
    /// How long a held-back packet is held.
    pub extra_delay: Duration,
}

/// Parameters of one unidirectional link. See the [module docs](self) for
/// the exact per-packet model.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Transmitter rate in bits per second; `0` = infinite (no serialization
    /// delay, no queueing). Default: 0.
    pub rate_bps: u64,
    /// One-way propagation delay. Default: 0.
    pub delay: Duration,
    /// Drop-tail queue limit in bytes, the packet in service included.
    /// Default: 150 000 (100 packets of 1500 bytes). Ignored when
    /// `rate_bps == 0`.
    pub queue_bytes: usize,
    /// Random loss. Default: [`LossModel::None`].
    pub loss: LossModel,
    /// Random extra delay. Default: none.
    pub jitter: Option<Jitter>,
    /// Explicit reordering. Default: none.
    pub reorder: Option<Reorder>,
    /// Probability that a packet is duplicated. Default: 0.
    pub duplicate: f64,
    /// Largest packet the link carries (bytes); longer ones are dropped.
    /// Default: `None` (no limit).
    pub mtu: Option<usize>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: 0,
            delay: Duration::ZERO,
            queue_bytes: DEFAULT_QUEUE_BYTES,
            loss: LossModel::None,
            jitter: None,
            reorder: None,
            duplicate: 0.0,
            mtu: None,
        }
    }
}

/// Default drop-tail queue limit: 100 full-size (1500-byte) packets.
pub const DEFAULT_QUEUE_BYTES: usize = 100 * 1500;

impl LinkConfig {
    /// A link of `rate_bps` and one-way `delay`, other fields default.
    #[must_use]
    pub fn new(rate_bps: u64, delay: Duration) -> LinkConfig {
        LinkConfig {
            rate_bps,
            delay,
            ..LinkConfig::default()
        }
    }

    /// Builder-style: set the queue limit in bytes.
    #[must_use]
    pub fn with_queue_bytes(mut self, queue_bytes: usize) -> LinkConfig {
        self.queue_bytes = queue_bytes;
        self
    }

    /// Builder-style: set the loss model.
    #[must_use]
    pub fn with_loss(mut self, loss: LossModel) -> LinkConfig {
        self.loss = loss;
        self
    }

    /// Builder-style: set jitter.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> LinkConfig {
        self.jitter = Some(jitter);
        self
    }

    /// Builder-style: set explicit reordering.
    #[must_use]
    pub fn with_reorder(mut self, probability: f64, extra_delay: Duration) -> LinkConfig {
        self.reorder = Some(Reorder {
            probability,
            extra_delay,
        });
        self
    }

    /// Builder-style: set the duplication probability.
    #[must_use]
    pub fn with_duplicate(mut self, probability: f64) -> LinkConfig {
        self.duplicate = probability;
        self
    }

    /// Builder-style: set the MTU.
    #[must_use]
    pub fn with_mtu(mut self, mtu: usize) -> LinkConfig {
        self.mtu = Some(mtu);
        self
    }

    /// Bandwidth-delay product in bytes for a round trip of `rtt` at this
    /// link's rate (0 for an infinite-rate link). Handy for sizing queues.
    #[must_use]
    pub fn bdp_bytes(&self, rtt: Duration) -> usize {
        (u128::from(self.rate_bps) * rtt.as_nanos() / 8 / 1_000_000_000) as usize
    }

    /// Serialization time of `len` bytes, rounded up to the nanosecond.
    #[must_use]
    pub fn serialization_time(&self, len: usize) -> Duration {
        if self.rate_bps == 0 {
            return Duration::ZERO;
        }
        let bits = len as u128 * 8 * 1_000_000_000;
        let rate = u128::from(self.rate_bps);
        Duration::from_nanos(bits.div_ceil(rate).min(u64::MAX as u128) as u64)
    }

    /// Check that every probability is within `0..=1`.
    pub fn validate(&self) -> Result<(), SimError> {
        self.loss.validate()?;
        let prob = |name: &'static str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(SimError::InvalidProbability { name, value: v })
            }
        };
        prob("duplicate", self.duplicate)?;
        if let Some(r) = &self.reorder {
            prob("reorder.probability", r.probability)?;
        }
        Ok(())
    }
}

/// Why a link dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The drop-tail queue was full.
    QueueFull,
    /// Random loss ([`LossModel`]).
    Loss,
    /// A packet rule returned [`Verdict::Drop`](crate::Verdict::Drop).
    Rule,
    /// Longer than the link MTU.
    Mtu,
}

/// Per-reason drop counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Drops because the queue was full.
    pub queue_full: u64,
    /// Drops by random loss.
    pub loss: u64,
    /// Drops by a packet rule.
    pub rule: u64,
    /// Drops because the packet exceeded the MTU.
    pub mtu: u64,
}

impl DropCounts {
    /// Sum over all reasons.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.queue_full + self.loss + self.rule + self.mtu
    }

    /// The counter for `reason`.
    #[must_use]
    pub fn get(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::QueueFull => self.queue_full,
            DropReason::Loss => self.loss,
            DropReason::Rule => self.rule,
            DropReason::Mtu => self.mtu,
        }
    }

    fn bump(&mut self, reason: DropReason) {
        match reason {
            DropReason::QueueFull => self.queue_full += 1,
            DropReason::Loss => self.loss += 1,
            DropReason::Rule => self.rule += 1,
            DropReason::Mtu => self.mtu += 1,
        }
    }
}

/// Where a link starts and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEnds {
    /// Sending node.
    pub from: NodeId,
    /// Its egress interface.
    pub from_iface: usize,
    /// Receiving node.
    pub to: NodeId,
    /// Its ingress interface.
    pub to_iface: usize,
}

/// Counters of one link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered to the link by the sending node (duplicates excluded).
    pub packets_sent: u64,
    /// Bytes offered to the link (duplicates excluded).
    pub bytes_sent: u64,
    /// Packets delivered to the receiving node (duplicates included).
    pub packets_delivered: u64,
    /// Bytes delivered.
    pub bytes_delivered: u64,
    /// Extra copies created by duplication.
    pub packets_duplicated: u64,
    /// Packets dropped, by reason (duplicates included).
    pub dropped: DropCounts,
    /// Bytes dropped (all reasons).
    pub bytes_dropped: u64,
    /// Largest backlog observed in the queue (bytes, after accepting a packet).
    pub max_backlog_bytes: usize,
}

/// A Mahimahi packet-delivery trace used as a link's rate.
///
/// The file format is Mahimahi's (`mm-link`): one integer per line, a
/// timestamp in milliseconds from the start of the trace, each line an
/// **opportunity** to deliver [`RateTrace::OPPORTUNITY_BYTES`] (1500) bytes;
/// several lines with the same timestamp are several opportunities in that
/// millisecond. Timestamps must not decrease. The trace repeats with a
/// period equal to its last timestamp (so a file holding just `1` is one
/// 1500-byte opportunity per millisecond, 12 Mb/s), which therefore must be
/// positive. Blank lines and lines starting with `#` are ignored.
///
/// Accounting is per byte, as in Mahimahi: an opportunity can carry several
/// small packets whose sizes add up to 1500 bytes, a packet longer than
/// 1500 bytes spans `ceil(len / 1500)` opportunities (it departs at the one
/// that carries its last byte), and an opportunity (or what is left of it)
/// that finds no bytes waiting is wasted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateTrace {
    /// Opportunity times in ms, non-decreasing.
    opportunities_ms: Vec<u64>,
    /// Repetition period in ms (the last timestamp, > 0).
    period_ms: u64,
}

/// A trace file that could not be parsed; `line` is 1-based (0 = the file
/// as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParseError {
    /// 1-based line number, 0 when the error concerns the whole file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl core::fmt::Display for TraceParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.line == 0 {
            write!(f, "trace: {}", self.message)
        } else {
            write!(f, "trace line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for TraceParseError {}

impl RateTrace {
    /// Bytes one delivery opportunity carries (Mahimahi's MTU).
    pub const OPPORTUNITY_BYTES: usize = 1500;
    /// Most opportunities a trace may hold (bounded memory: 8 bytes each).
    pub const MAX_OPPORTUNITIES: usize = 10_000_000;
    /// Largest timestamp (ms, about 49.7 days), so that opportunity times in
    /// nanoseconds stay far from overflowing.
    pub const MAX_TIMESTAMP_MS: u64 = u32::MAX as u64;

    /// Parse the text of a Mahimahi trace file.
    pub fn parse(text: &str) -> Result<RateTrace, TraceParseError> {
        let mut opportunities_ms: Vec<u64> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: String| TraceParseError {
                line: i + 1,
                message,
            };
            let t: u64 = line.parse().map_err(|_| {
                err(format!(
                    "'{line}' is not a whole number of milliseconds (one timestamp per line)"
                ))
            })?;
            if t > Self::MAX_TIMESTAMP_MS {
                return Err(err(format!(
                    "timestamp {t} ms is beyond the largest supported ({} ms)",
                    Self::MAX_TIMESTAMP_MS
                )));
            }
            if let Some(&prev) = opportunities_ms.last() {
                if t < prev {
                    return Err(err(format!(
                        "timestamp {t} ms is before the previous one ({prev} ms); timestamps must not decrease"
                    )));
                }
            }
            if opportunities_ms.len() == Self::MAX_OPPORTUNITIES {
                return Err(err(format!(
                    "more than {} delivery opportunities",
                    Self::MAX_OPPORTUNITIES
                )));
            }
            opportunities_ms.push(t);
        }
        let Some(&period_ms) = opportunities_ms.last() else {
            return Err(TraceParseError {
                line: 0,
                message: "no timestamps (a trace needs at least one line)".into(),
            });
        };
        if period_ms == 0 {
            return Err(TraceParseError {
                line: 0,
                message:
                    "the last timestamp is 0 ms; it sets the repetition period and must be positive"
                        .into(),
            });
        }
        Ok(RateTrace {
            opportunities_ms,
            period_ms,
        })
    }

    /// Number of opportunities per period.
    #[must_use]
    pub fn opportunities(&self) -> usize {
        self.opportunities_ms.len()
    }

    /// Repetition period.
    #[must_use]
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// Long-run capacity in bits per second.
    #[must_use]
    pub fn mean_rate_bps(&self) -> f64 {
        (self.opportunities_ms.len() * Self::OPPORTUNITY_BYTES * 8) as f64
            / (self.period_ms as f64 / 1000.0)
    }

    /// Time (ns) of opportunity number `n` (counting from 0 over repetitions).
    fn opportunity_ns(&self, n: u64) -> u64 {
        let len = self.opportunities_ms.len() as u64;
        let (rep, idx) = (n / len, (n % len) as usize);
        (rep * self.period_ms + self.opportunities_ms[idx]).saturating_mul(1_000_000)
    }

    /// Index of the first opportunity at or after `t_ns`.
    fn first_at_or_after(&self, t_ns: u64) -> u64 {
        let period_ns = self.period_ms * 1_000_000;
        let len = self.opportunities_ms.len() as u64;
        let rep = t_ns / period_ns;
        let within = t_ns - rep * period_ns;
        if within == 0 && rep > 0 {
            // The previous period's last opportunities (timestamp = the
            // period) fall exactly at `t_ns`: they come first.
            let idx = self
                .opportunities_ms
                .partition_point(|&ms| ms < self.period_ms) as u64;
            return (rep - 1) * len + idx;
        }
        let idx = self
            .opportunities_ms
            .partition_point(|&ms| ms.saturating_mul(1_000_000) < within) as u64;
        rep * len + idx
    }
}

/// Where a trace-driven transmitter stands: the opportunity in use and the
/// bytes left in it.
#[derive(Debug, Clone)]
struct TraceCursor {
    trace: std::sync::Arc<RateTrace>,
    /// Number of the opportunity last (partly) used; `None` before the first.
    current: Option<u64>,
    /// Bytes left in `current`.
    left: usize,
}

impl TraceCursor {
    /// Send `len` bytes offered at `now_ns` behind everything sent before;
    /// returns the time of the opportunity that carries the last byte.
    fn send(&mut self, now_ns: u64, len: usize) -> u64 {
        let trace = &*self.trace;
        let mut remaining = len;
        let mut at = now_ns;
        // Leftover of the opportunity in use, if it is not in the past.
        if let Some(cur) = self.current {
            let t = trace.opportunity_ns(cur);
            if t >= now_ns && self.left > 0 {
                let used = remaining.min(self.left);
                self.left -= used;
                remaining -= used;
                at = t;
            }
        }
        while remaining > 0 {
            let next = match self.current {
                Some(cur) if trace.opportunity_ns(cur + 1) >= now_ns => cur + 1,
                _ => trace.first_at_or_after(now_ns),
            };
            self.current = Some(next);
            let used = remaining.min(RateTrace::OPPORTUNITY_BYTES);
            self.left = RateTrace::OPPORTUNITY_BYTES - used;
            remaining -= used;
            at = trace.opportunity_ns(next);
        }
        at
    }
}

/// A change to a link's parameters, applied at a scheduled time
/// ([`LinkModel::schedule`], [`crate::Simulator::schedule_link_change`]).
#[derive(Debug, Clone, PartialEq)]
pub enum LinkChange {
    /// New rate in bit/s (0 = unlimited).
    Rate(u64),
    /// New one-way delay.
    Delay(Duration),
    /// New queue limit in bytes.
    QueueBytes(usize),
    /// New loss model.
    Loss(LossModel),
    /// New jitter (or none).
    Jitter(Option<Jitter>),
    /// New reordering (or none).
    Reorder(Option<Reorder>),
    /// New duplication probability.
    Duplicate(f64),
    /// New MTU (or none).
    Mtu(Option<usize>),
    /// Replace every parameter.
    Config(LinkConfig),
}

impl LinkChange {
    /// Apply the change to `config`.
    pub fn apply(&self, config: &mut LinkConfig) {
        match self {
            LinkChange::Rate(r) => config.rate_bps = *r,
            LinkChange::Delay(d) => config.delay = *d,
            LinkChange::QueueBytes(q) => config.queue_bytes = *q,
            LinkChange::Loss(l) => config.loss = *l,
            LinkChange::Jitter(j) => config.jitter = *j,
            LinkChange::Reorder(r) => config.reorder = *r,
            LinkChange::Duplicate(p) => config.duplicate = *p,
            LinkChange::Mtu(m) => config.mtu = *m,
            LinkChange::Config(c) => *config = c.clone(),
        }
    }

    /// Check the probabilities the change sets (applied to a valid config,
    /// a valid change leaves it valid).
    pub fn validate(&self) -> Result<(), SimError> {
        let mut c = LinkConfig::default();
        self.apply(&mut c);
        c.validate()
    }
}

/// The link model of the [module docs](self) as a standalone, sans-IO
/// object: parameters, a seeded random stream and the queue state. The
/// simulator runs one per link; the real-packet emulator
/// (`hollywood_lab::netem`) runs one per direction, so both apply exactly the
/// same rules.
///
/// Time is the caller's: every call takes `now` (nanoseconds since an epoch
/// the caller chooses; trace opportunities and scheduled changes are
/// relative to that epoch). Calls must come with non-decreasing `now`.
///
/// Per packet the caller does what the simulator does: optionally
/// [`roll_duplicate`](LinkModel::roll_duplicate), then
/// [`offer`](LinkModel::offer) the packet (and then the copy). The random
/// draws happen in this order: duplicate roll, loss (one draw for Bernoulli,
/// one or two for Gilbert–Elliott), jitter, reorder.
#[derive(Debug, Clone)]
pub struct LinkModel {
    config: LinkConfig,
    rng: ChaCha8Rng,
    /// When the transmitter finishes the last accepted packet.
    busy_until: Instant,
    /// (end of serialization, len) of accepted packets, oldest first.
    in_queue: VecDeque<(Instant, usize)>,
    backlog: usize,
    max_backlog: usize,
    /// Latest in-order arrival time (for `Jitter::preserve_order`).
    last_arrival: Instant,
    ge_bad: bool,
    trace: Option<TraceCursor>,
    /// Pending changes, sorted by time.
    schedule: VecDeque<(Instant, LinkChange)>,
}

impl LinkModel {
    /// A model with parameters `config` whose randomness comes from `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Result<LinkModel, SimError> {
        use rand::SeedableRng;
        config.validate()?;
        Ok(LinkModel::with_rng(config, ChaCha8Rng::seed_from_u64(seed)))
    }

    /// A model drawing from `rng` (the simulator gives each link its own
    /// stream). `config` is not validated.
    #[must_use]
    pub fn with_rng(config: LinkConfig, rng: ChaCha8Rng) -> LinkModel {
        LinkModel {
            config,
            rng,
            busy_until: Instant::ZERO,
            in_queue: VecDeque::new(),
            backlog: 0,
            max_backlog: 0,
            last_arrival: Instant::ZERO,
            ge_bad: false,
            trace: None,
            schedule: VecDeque::new(),
        }
    }

    /// Drive the transmitter from a Mahimahi trace instead of
    /// [`LinkConfig::rate_bps`] (which is then ignored; the queue limit
    /// still applies). `None` goes back to the configured rate.
    pub fn set_trace(&mut self, trace: Option<std::sync::Arc<RateTrace>>) {
        self.trace = trace.map(|trace| TraceCursor {
            trace,
            current: None,
            left: 0,
        });
    }

    /// Whether a trace drives the transmitter.
    #[must_use]
    pub fn has_trace(&self) -> bool {
        self.trace.is_some()
    }

    /// Current parameters.
    #[must_use]
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Replace the parameters (packets already accepted keep their times).
    pub fn set_config(&mut self, config: LinkConfig) -> Result<(), SimError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    pub(crate) fn config_mut(&mut self) -> &mut LinkConfig {
        &mut self.config
    }

    /// At `at`, apply `change` (it takes effect for packets offered at or
    /// after `at`; see [`advance`](LinkModel::advance)). Each pending change
    /// is kept until applied, so the caller bounds the memory by what it
    /// schedules.
    pub fn schedule(&mut self, at: Instant, change: LinkChange) -> Result<(), SimError> {
        change.validate()?;
        let pos = self.schedule.partition_point(|(t, _)| *t <= at);
        self.schedule.insert(pos, (at, change));
        Ok(())
    }

    /// Time of the next pending scheduled change.
    #[must_use]
    pub fn next_change(&self) -> Option<Instant> {
        self.schedule.front().map(|(t, _)| *t)
    }

    /// Apply every scheduled change due at `now` (called by
    /// [`offer`](LinkModel::offer) too).
    pub fn advance(&mut self, now: Instant) {
        while self.schedule.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, change)) = self.schedule.pop_front() {
                change.apply(&mut self.config);
            }
        }
    }

    /// Current backlog in bytes at `now`: bytes of accepted packets whose
    /// serialization has not finished.
    pub fn backlog_at(&mut self, now: Instant) -> usize {
        while let Some(&(end, len)) = self.in_queue.front() {
            if end <= now {
                self.in_queue.pop_front();
                self.backlog -= len;
            } else {
                break;
            }
        }
        self.backlog
    }

    /// Largest backlog seen right after accepting a packet.
    #[must_use]
    pub fn max_backlog(&self) -> usize {
        self.max_backlog
    }

    fn lost(&mut self) -> bool {
        match self.config.loss {
            LossModel::None => false,
            LossModel::Bernoulli(p) => p > 0.0 && self.rng.gen::<f64>() < p,
            LossModel::GilbertElliott(ge) => {
                let flip = if self.ge_bad { ge.r } else { ge.p };
                if flip > 0.0 && self.rng.gen::<f64>() < flip {
                    self.ge_bad = !self.ge_bad;
                }
                let p = if self.ge_bad {
                    ge.loss_bad
                } else {
                    ge.loss_good
                };
                p > 0.0 && self.rng.gen::<f64>() < p
            }
        }
    }

    /// Whether to make a duplicate of the packet about to be offered (draws
    /// from the random stream only when duplication is on).
    pub fn roll_duplicate(&mut self) -> bool {
        self.config.duplicate > 0.0 && self.rng.gen::<f64>() < self.config.duplicate
    }

    /// Offer one packet of `len` bytes at `now` (steps 3–7 of the
    /// [model](self)); `hold` is extra delay added after everything else
    /// (the simulator's rule delays; `Duration::ZERO` otherwise). Returns
    /// the packet's arrival time at the far end, or why it was dropped.
    ///
    /// With a [trace](LinkModel::set_trace) the end of "serialization" is
    /// the trace opportunity that carries the packet's last byte.
    pub fn offer(
        &mut self,
        now: Instant,
        len: usize,
        hold: Duration,
    ) -> Result<Instant, DropReason> {
        self.advance(now);
        if let Some(mtu) = self.config.mtu {
            if len > mtu {
                return Err(DropReason::Mtu);
            }
        }
        let shaped = self.trace.is_some() || self.config.rate_bps != 0;
        let ser_end = if !shaped {
            now
        } else {
            let backlog = self.backlog_at(now);
            if backlog > 0 && backlog + len > self.config.queue_bytes {
                return Err(DropReason::QueueFull);
            }
            let end = match &mut self.trace {
                Some(cursor) => Instant::from_nanos(cursor.send(now.as_nanos(), len)),
                None => {
                    let start = now.max(self.busy_until);
                    start + self.config.serialization_time(len)
                }
            };
            self.busy_until = end;
            self.in_queue.push_back((end, len));
            self.backlog += len;
            self.max_backlog = self.max_backlog.max(self.backlog);
            end
        };
        if self.lost() {
            return Err(DropReason::Loss);
        }
        let mut arrival = ser_end + self.config.delay;
        if let Some(j) = self.config.jitter {
            arrival += j.sample(&mut self.rng);
            if j.preserve_order {
                arrival = arrival.max(self.last_arrival);
            }
        }
        let held = match self.config.reorder {
            Some(r) if r.probability > 0.0 && self.rng.gen::<f64>() < r.probability => {
                Some(r.extra_delay)
            }
            _ => None,
        };
        match held {
            Some(extra) => arrival += extra,
            None => self.last_arrival = self.last_arrival.max(arrival),
        }
        Ok(arrival + hold)
    }
}

/// What the link decided for one packet copy.
#[derive(Debug)]
pub(crate) enum Outcome {
    Dropped(DropReason),
    Deliver(Instant),
}

/// Mutable state of one link inside the simulator.
pub(crate) struct LinkState {
    pub(crate) from: NodeId,
    pub(crate) from_iface: usize,
    pub(crate) to: NodeId,
    pub(crate) to_iface: usize,
    pub(crate) model: LinkModel,
    pub(crate) stats: LinkStats,
    pub(crate) rules: Vec<crate::rule::Rule>,
    pub(crate) offered: u64,
}

impl LinkState {
    pub(crate) fn new(
        from: NodeId,
        from_iface: usize,
        to: NodeId,
        to_iface: usize,
        config: LinkConfig,
        rng: ChaCha8Rng,
    ) -> LinkState {
        LinkState {
            from,
            from_iface,
            to,
            to_iface,
            model: LinkModel::with_rng(config, rng),
            stats: LinkStats::default(),
            rules: Vec::new(),
            offered: 0,
        }
    }

    pub(crate) fn config(&self) -> &LinkConfig {
        self.model.config()
    }

    pub(crate) fn config_mut(&mut self) -> &mut LinkConfig {
        self.model.config_mut()
    }

    /// Current backlog in bytes at `now`.
    pub(crate) fn backlog_at(&mut self, now: Instant) -> usize {
        self.model.backlog_at(now)
    }

    pub(crate) fn record_drop(&mut self, reason: DropReason, len: usize) {
        self.stats.dropped.bump(reason);
        self.stats.bytes_dropped += len as u64;
    }

    /// Whether to make a duplicate of the packet just offered.
    pub(crate) fn roll_duplicate(&mut self) -> bool {
        self.model.roll_duplicate()
    }

    /// Queue, serialize, lose, delay one packet copy (steps 3–7 of the model).
    /// `hold` is the extra delay from rules.
    pub(crate) fn transmit(&mut self, now: Instant, len: usize, hold: Duration) -> Outcome {
        let outcome = match self.model.offer(now, len, hold) {
            Ok(at) => Outcome::Deliver(at),
            Err(reason) => Outcome::Dropped(reason),
        };
        self.stats.max_backlog_bytes = self.model.max_backlog();
        outcome
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn loss_models_print_as_a_user_writes_them() {
        assert_eq!(LossModel::None.to_string(), "0");
        assert_eq!(LossModel::Bernoulli(0.02).to_string(), "2%");
        let g = LossModel::GilbertElliott(GilbertElliott {
            p: 0.01,
            r: 0.5,
            loss_good: 0.0,
            loss_bad: 1.0,
        });
        assert_eq!(g.to_string(), "gilbert:1%,50%,100%,0%");
    }
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn at_ms(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn trace_parses_mahimahi_files() {
        let t = RateTrace::parse("# a comment\n0\n0\n1\n\n3\n").unwrap();
        assert_eq!(t.opportunities(), 4);
        assert_eq!(t.period(), Duration::from_millis(3));
        // 4 × 1500 bytes every 3 ms = 16 Mb/s.
        assert!((t.mean_rate_bps() - 16e6).abs() < 1.0);
        assert_eq!(RateTrace::parse("1").unwrap().mean_rate_bps(), 12e6);
    }

    #[test]
    fn trace_errors_name_the_line() {
        let e = RateTrace::parse("1\n2\nx3\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("trace line 3"), "{e}");
        let e = RateTrace::parse("5\n4\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("must not decrease"));
        assert!(RateTrace::parse("-1").is_err());
        assert!(RateTrace::parse("1.5").is_err());
        assert_eq!(RateTrace::parse("\n# only\n").unwrap_err().line, 0);
        assert_eq!(RateTrace::parse("0\n0\n").unwrap_err().line, 0);
    }

    #[test]
    fn trace_departures_follow_opportunities_and_loop() {
        // Opportunities at 1 ms and 3 ms, period 3 ms.
        let trace = Arc::new(RateTrace::parse("1\n3\n").unwrap());
        let mut m = LinkModel::new(LinkConfig::default().with_queue_bytes(1_000_000), 1).unwrap();
        m.set_trace(Some(trace));
        let arr: Vec<u64> = (0..5)
            .map(|_| {
                m.offer(Instant::ZERO, 1500, Duration::ZERO)
                    .unwrap()
                    .as_nanos()
                    / 1_000_000
            })
            .collect();
        // 1, 3, then the trace repeats: 4, 6, 7.
        assert_eq!(arr, vec![1, 3, 4, 6, 7]);
    }

    #[test]
    fn trace_accounts_bytes_and_wastes_idle_opportunities() {
        let trace = Arc::new(RateTrace::parse("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n").unwrap());
        let mut m = LinkModel::new(LinkConfig::default().with_queue_bytes(1_000_000), 1).unwrap();
        m.set_trace(Some(trace));
        let mut off = |now: u64, len| m.offer(at_ms(now), len, Duration::ZERO).unwrap();
        // Two 700-byte packets share the 1 ms opportunity; a third spills to 2 ms.
        assert_eq!(off(0, 700), at_ms(1));
        assert_eq!(off(0, 700), at_ms(1));
        assert_eq!(off(0, 700), at_ms(2));
        // 4000 bytes: the 900 left at 2 ms, 1500 at 3 and 4 ms, the last
        // 100 at 5 ms.
        assert_eq!(off(0, 4000), at_ms(5));
        // The 1400 bytes left at 5 ms and the 6 ms opportunity find nothing
        // waiting: wasted. At 7 ms a 100-byte packet leaves at once and the
        // next 1500 bytes take the 1400 left at 7 ms and 100 at 8 ms.
        assert_eq!(off(7, 100), at_ms(7));
        assert_eq!(off(7, 1500), at_ms(8));
    }

    #[test]
    fn absurd_trace_timestamps_are_refused_not_overflowed() {
        // Nanosecond arithmetic on a timestamp this large would overflow.
        let e = RateTrace::parse("1\n99999999999999999\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let t = RateTrace::parse(&format!("{}\n", RateTrace::MAX_TIMESTAMP_MS)).unwrap();
        let mut m = LinkModel::new(LinkConfig::default(), 1).unwrap();
        m.set_trace(Some(Arc::new(t)));
        let last = Instant::from_nanos(u64::MAX / 2);
        assert!(m.offer(last, 1500, Duration::ZERO).is_ok());
    }

    #[test]
    fn trace_opportunity_at_the_period_boundary_is_used() {
        // Opportunities at 5 and 10 ms, period 10 ms: an idle link offered
        // a packet at exactly 10 ms sends it in the 10 ms opportunity (the
        // last one of the first period), not at 15 ms.
        let trace = Arc::new(RateTrace::parse("5\n10\n").unwrap());
        let mut m = LinkModel::new(LinkConfig::default(), 1).unwrap();
        m.set_trace(Some(trace));
        assert_eq!(m.offer(at_ms(10), 100, Duration::ZERO), Ok(at_ms(10)));
        assert_eq!(m.offer(at_ms(20), 100, Duration::ZERO), Ok(at_ms(20)));
        assert_eq!(m.offer(at_ms(21), 1500, Duration::ZERO), Ok(at_ms(25)));
    }

    #[test]
    fn rate_and_delay_give_the_documented_times() {
        let mut m =
            LinkModel::new(LinkConfig::new(12_000_000, Duration::from_millis(10)), 3).unwrap();
        assert_eq!(m.offer(Instant::ZERO, 1500, Duration::ZERO), Ok(at_ms(11)));
        assert_eq!(m.offer(Instant::ZERO, 1500, Duration::ZERO), Ok(at_ms(12)));
        assert_eq!(m.backlog_at(Instant::ZERO), 3000);
        assert_eq!(m.backlog_at(at_ms(1)), 1500);
        assert_eq!(m.max_backlog(), 3000);
    }

    #[test]
    fn queue_overflow_and_mtu_drop() {
        let cfg = LinkConfig::new(1_000_000, Duration::ZERO)
            .with_queue_bytes(3000)
            .with_mtu(1500);
        let mut m = LinkModel::new(cfg, 3).unwrap();
        assert!(m.offer(Instant::ZERO, 1500, Duration::ZERO).is_ok());
        assert!(m.offer(Instant::ZERO, 1500, Duration::ZERO).is_ok());
        assert_eq!(
            m.offer(Instant::ZERO, 1500, Duration::ZERO),
            Err(DropReason::QueueFull)
        );
        assert_eq!(
            m.offer(Instant::ZERO, 1501, Duration::ZERO),
            Err(DropReason::Mtu)
        );
    }

    #[test]
    fn scheduled_changes_apply_to_later_packets() {
        let mut m = LinkModel::new(LinkConfig::new(0, Duration::from_millis(10)), 3).unwrap();
        m.schedule(at_ms(100), LinkChange::Delay(Duration::from_millis(50)))
            .unwrap();
        m.schedule(at_ms(50), LinkChange::Rate(12_000_000)).unwrap();
        assert_eq!(m.next_change(), Some(at_ms(50)));
        assert_eq!(m.offer(at_ms(10), 1500, Duration::ZERO), Ok(at_ms(20)));
        assert_eq!(m.offer(at_ms(60), 1500, Duration::ZERO), Ok(at_ms(71)));
        assert_eq!(m.offer(at_ms(100), 1500, Duration::ZERO), Ok(at_ms(151)));
        assert_eq!(m.config().rate_bps, 12_000_000);
        assert!(m.schedule(at_ms(200), LinkChange::Duplicate(1.5)).is_err());
        assert!(LinkModel::new(LinkConfig::default().with_duplicate(-1.0), 1).is_err());
    }

    #[test]
    fn bernoulli_loss_rate_is_close() {
        let cfg = LinkConfig::default().with_loss(LossModel::Bernoulli(0.1));
        let mut m = LinkModel::new(cfg, 9).unwrap();
        let lost = (0..20_000)
            .filter(|_| m.offer(Instant::ZERO, 100, Duration::ZERO).is_err())
            .count();
        assert!((1_800..2_200).contains(&lost), "{lost}");
    }

    proptest! {
        /// Without jitter or reordering, arrivals never decrease and the
        /// backlog never exceeds the queue bound (beyond the one packet an
        /// idle link always accepts), with a fixed rate or a trace.
        #[test]
        fn fifo_and_bounded_backlog(
            rate in 100_000u64..100_000_000,
            use_trace in any::<bool>(),
            queue in 0usize..20_000,
            packets in proptest::collection::vec((0u64..2_000_000, 40usize..3000), 1..200),
        ) {
            let cfg = LinkConfig::new(rate, Duration::from_millis(5)).with_queue_bytes(queue);
            let mut m = LinkModel::new(cfg, 1).unwrap();
            if use_trace {
                m.set_trace(Some(Arc::new(RateTrace::parse("0\n0\n2\n5\n5\n5\n9\n").unwrap())));
            }
            let mut now = 0u64;
            let mut last = Instant::ZERO;
            for (gap, len) in packets {
                now += gap;
                let t = Instant::from_nanos(now);
                if let Ok(arrival) = m.offer(t, len, Duration::ZERO) {
                    prop_assert!(arrival >= last);
                    prop_assert!(arrival >= t + Duration::from_millis(5));
                    last = arrival;
                }
                let backlog = m.backlog_at(t);
                prop_assert!(backlog <= queue.max(len).max(3000));
                prop_assert!(m.max_backlog() <= queue.max(3000));
            }
        }
    }
}
