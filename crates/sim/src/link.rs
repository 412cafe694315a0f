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
//! Parameter changes ([`crate::Simulator::schedule_link`]) apply to packets
//! offered after the change; packets already accepted keep their times.

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
    pub(crate) config: LinkConfig,
    pub(crate) stats: LinkStats,
    pub(crate) rules: Vec<crate::rule::Rule>,
    pub(crate) rng: ChaCha8Rng,
    /// When the transmitter finishes the last accepted packet.
    busy_until: Instant,
    /// (end of serialization, len) of accepted packets, oldest first.
    in_queue: VecDeque<(Instant, usize)>,
    backlog: usize,
    /// Latest in-order arrival time (for `Jitter::preserve_order`).
    last_arrival: Instant,
    ge_bad: bool,
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
            config,
            stats: LinkStats::default(),
            rules: Vec::new(),
            rng,
            busy_until: Instant::ZERO,
            in_queue: VecDeque::new(),
            backlog: 0,
            last_arrival: Instant::ZERO,
            ge_bad: false,
            offered: 0,
        }
    }

    /// Current backlog in bytes at `now`.
    pub(crate) fn backlog_at(&mut self, now: Instant) -> usize {
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

    pub(crate) fn record_drop(&mut self, reason: DropReason, len: usize) {
        self.stats.dropped.bump(reason);
        self.stats.bytes_dropped += len as u64;
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

    /// Whether to make a duplicate of the packet just offered.
    pub(crate) fn roll_duplicate(&mut self) -> bool {
        self.config.duplicate > 0.0 && self.rng.gen::<f64>() < self.config.duplicate
    }

    /// Queue, serialize, lose, delay one packet copy (steps 3–7 of the model).
    /// `hold` is the extra delay from rules.
    pub(crate) fn transmit(&mut self, now: Instant, len: usize, hold: Duration) -> Outcome {
        if let Some(mtu) = self.config.mtu {
            if len > mtu {
                return Outcome::Dropped(DropReason::Mtu);
            }
        }
        let ser_end = if self.config.rate_bps == 0 {
            now
        } else {
            let backlog = self.backlog_at(now);
            if backlog > 0 && backlog + len > self.config.queue_bytes {
                return Outcome::Dropped(DropReason::QueueFull);
            }
            let start = now.max(self.busy_until);
            let end = start + self.config.serialization_time(len);
            self.busy_until = end;
            self.in_queue.push_back((end, len));
            self.backlog += len;
            self.stats.max_backlog_bytes = self.stats.max_backlog_bytes.max(self.backlog);
            end
        };
        if self.lost() {
            return Outcome::Dropped(DropReason::Loss);
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
        Outcome::Deliver(arrival + hold)
    }
}
