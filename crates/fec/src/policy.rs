//! The deadline-aware, adaptive policy: which messages get FEC and how
//! much redundancy a block gets.
//!
//! - **Where.** A message needs FEC when a retransmission could not arrive
//!   before its deadline ([`needs_fec`]): the thesis's liveness rule for an
//!   inconsistent retransmission (§4.2: a message is worth sending while
//!   `now + one-way delay` is before its deadline) applied to the
//!   retransmission that a loss would cause, detected about a round trip
//!   after the send (RACK's reordering window on top, RFC 8985 §6.2). Where
//!   the transport never retransmits (UDP, QUIC datagrams), every message
//!   that can still arrive does.
//! - **How much.** The receiver measures the loss rate `p` and the mean
//!   burst length `b` of the messages it gets and REPORTs them; the sender
//!   models the path as a Gilbert chain with those two figures and gives a
//!   block of `k` the fewest repair symbols `m` whose expected share of
//!   sources left unrebuilt ([`expected_unrecovered`]) is at most the
//!   configured target ([`FecConfig::residual`]).
//! - **Bounded.** Repair bytes never exceed [`FecConfig::max_overhead`]
//!   of the protected messages' bytes: each protected message earns that
//!   share of its size as credit, each repair message spends its size.
//!   Before the first report (nothing measured) a block gets what the
//!   credit allows — over TCP only once the first report arrived
//!   ([`FecConfig::repair_before_report`]).

use std::time::Duration;

/// The FEC layer's settings (a transport property: `hollywood-taps`'
/// `TransportProperties::fec`, `hollywood sim messages --fec`).
#[derive(Debug, Clone, PartialEq)]
pub struct FecConfig {
    /// Repair bytes at most this share of the protected messages' bytes
    /// (0.25: 25 %).
    pub max_overhead: f64,
    /// Target expected share of protected messages lost for good (the
    /// block could not be rebuilt).
    pub residual: f64,
    /// Repair symbols leave this long before the block's first deadline
    /// minus the one-way delay (room for queueing and serialisation).
    pub slack: Duration,
    /// Most messages per block (at most [`crate::wire::MAX_K`]).
    pub max_block: usize,
    /// A block of messages without deadlines closes this long after its
    /// first message.
    pub idle_close: Duration,
    /// The round trip assumed until one is measured (from the transport,
    /// or echoed by REPORTs).
    pub rtt_hint: Option<Duration>,
    /// The transport under the layer repairs losses by retransmission
    /// (TCP, QUIC streams); if not (UDP, QUIC datagrams), every message
    /// is protected.
    pub retransmits: bool,
    /// A receiver REPORTs this often (when it has received messages).
    pub report_interval: Duration,
    /// Wire bytes each message costs beyond its payload and record header
    /// (packet headers: IP and UDP, QUIC's packet and frame headers, TCP's
    /// segment header), the same for a source and a repair. The bound
    /// charges it on both sides, with each message's record header, so
    /// that repair bytes on the wire stay within `max_overhead` of the
    /// protected messages' bytes on the wire (0: payload and record
    /// headers only).
    pub message_overhead: usize,
    /// Repair blocks before the receiver's first REPORT (nothing heard
    /// yet), as the credit allows. Off over TCP
    /// (`hollywood_media::scenario::with_fec`): there the first round
    /// trip is where the window is tightest (the SYN-ACK's window is
    /// never scaled, RFC 7323 §2.2: at most 64 KiB until the ACK of the
    /// first data), and repair bytes sent then take the window from the
    /// sources. On issue 34's path (2 Mb/s, 300 ms, 200 ms deadline) the
    /// stream with 25 % repair filled 64 KiB in 193 ms and 11 sources
    /// expired in the sender's queue before the first ACK; without them,
    /// 2. The first blocks then go unprotected.
    pub repair_before_report: bool,
}

impl Default for FecConfig {
    fn default() -> Self {
        FecConfig {
            max_overhead: 0.25,
            residual: 1e-3,
            slack: Duration::from_millis(10),
            max_block: 32,
            idle_close: Duration::from_millis(20),
            rtt_hint: None,
            retransmits: true,
            report_interval: Duration::from_millis(100),
            message_overhead: 0,
            repair_before_report: true,
        }
    }
}

impl FecConfig {
    /// Check the settings: overhead in (0, 10], residual in (0, 1), a block
    /// of 1 to 64 messages, a non-zero report interval.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.max_overhead > 0.0 && self.max_overhead <= 10.0) {
            return Err(format!(
                "FEC overhead {}: use more than 0 and at most 1000 %",
                self.max_overhead
            ));
        }
        if !(self.residual > 0.0 && self.residual < 1.0) {
            return Err(format!("FEC residual loss {}: use (0, 1)", self.residual));
        }
        if self.max_block == 0 || self.max_block > crate::wire::MAX_K {
            return Err(format!(
                "FEC block of {}: use 1 to {}",
                self.max_block,
                crate::wire::MAX_K
            ));
        }
        if self.report_interval.is_zero() {
            return Err("FEC report interval must not be 0".into());
        }
        Ok(())
    }
}

/// Does a message with `lifetime` left need FEC? `rtt`: the best round
/// trip known (`None`: not known yet, protect). Module docs: a
/// retransmission arrives about `1.25 RTT` (detection with RACK's
/// quarter-RTT reordering window) plus a one-way delay after the send.
pub fn needs_fec(lifetime: Option<Duration>, rtt: Option<Duration>, retransmits: bool) -> bool {
    if !retransmits {
        return true;
    }
    match (lifetime, rtt) {
        // Reliable: retransmission repairs it, however long it takes.
        (None, _) => false,
        (Some(_), None) => true,
        (Some(l), Some(r)) => l < r * 7 / 4,
    }
}

/// The measured loss: rate and mean burst length (in messages).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossEstimate {
    /// Share of messages lost.
    pub p: f64,
    /// Mean run of consecutive losses (at least 1).
    pub burst: f64,
}

/// Expected share of a block's `k` sources left unrebuilt when the `k + m`
/// symbols cross a Gilbert channel with loss rate `p` and mean burst `b`
/// (bad-state loss 1, good-state loss 0; entered at its stationary
/// state): the chance of more than `m` losses among `k + m`, each such
/// outcome weighted by the share of sources it takes (`j / (k + m)`).
pub fn expected_unrecovered(k: usize, m: usize, est: LossEstimate) -> f64 {
    let n = k + m;
    let p = est.p.clamp(0.0, 1.0);
    if n == 0 || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let burst = est.burst.max(1.0);
    // Bad → good with r = 1/b; good → bad with q such that q/(q+r) = p.
    let r = 1.0 / burst;
    let q = (p * r / (1.0 - p)).min(1.0);
    // dist[s][j]: chance of being in state s (0 good, 1 bad) after the
    // symbols so far, with j of them lost.
    let mut good = vec![0.0f64; n + 1];
    let mut bad = vec![0.0f64; n + 1];
    // First symbol: stationary.
    good[0] = 1.0 - p;
    bad[1] = p;
    for _ in 1..n {
        let mut g2 = vec![0.0f64; n + 1];
        let mut b2 = vec![0.0f64; n + 1];
        for j in 0..=n {
            let (g, b) = (good[j], bad[j]);
            if g == 0.0 && b == 0.0 {
                continue;
            }
            // Next symbol good (not lost) or bad (lost).
            g2[j] += g * (1.0 - q) + b * r;
            if j < n {
                b2[j + 1] += g * q + b * (1.0 - r);
            }
        }
        good = g2;
        bad = b2;
    }
    (m + 1..=n)
        .map(|j| (good[j] + bad[j]) * j as f64 / n as f64)
        .sum()
}

/// Repair symbols for a block of `k`: the fewest in `0..=affordable` whose
/// [`expected_unrecovered`] is at most `residual`, or `affordable` if none
/// is; without an estimate, `affordable` (spend the budget until measured).
pub fn choose_repairs(
    k: usize,
    est: Option<LossEstimate>,
    residual: f64,
    affordable: usize,
) -> usize {
    let Some(est) = est else { return affordable };
    (0..=affordable)
        .find(|&m| expected_unrecovered(k, m, est) <= residual)
        .unwrap_or(affordable)
}

/// The sender's view of the receiver's REPORTs: loss rate and burst length
/// over (about) the last [`LossMeter::WINDOW`] judged messages.
#[derive(Debug, Clone, Default)]
pub struct LossMeter {
    last: Option<crate::wire::Report>,
    /// (judged, lost, bursts) per report interval, newest last.
    deltas: std::collections::VecDeque<(u64, u64, u64)>,
}

impl LossMeter {
    /// Judged messages the estimate spans (about).
    pub const WINDOW: u64 = 2000;
    /// Judged messages needed before the estimate is used.
    pub const MIN_JUDGED: u64 = 200;

    /// Take a REPORT (cumulative counters; an older one is ignored).
    pub fn on_report(&mut self, r: crate::wire::Report) {
        let d = match self.last {
            None => (r.judged, r.lost, r.bursts),
            Some(l) if r.judged >= l.judged && r.lost >= l.lost && r.bursts >= l.bursts => {
                (r.judged - l.judged, r.lost - l.lost, r.bursts - l.bursts)
            }
            Some(_) => return, // reordered or bogus: keep the newer counters
        };
        self.last = Some(r);
        self.deltas
            .push_back((u64::from(d.0), u64::from(d.1), u64::from(d.2)));
        while self.deltas.len() > 1
            && self.deltas.iter().skip(1).map(|d| d.0).sum::<u64>() >= Self::WINDOW
        {
            self.deltas.pop_front();
        }
    }

    /// The estimate, once [`LossMeter::MIN_JUDGED`] messages were judged.
    pub fn estimate(&self) -> Option<LossEstimate> {
        let (j, l, b) = self
            .deltas
            .iter()
            .fold((0, 0, 0), |a, d| (a.0 + d.0, a.1 + d.1, a.2 + d.2));
        (j >= Self::MIN_JUDGED).then(|| LossEstimate {
            p: l as f64 / j as f64,
            burst: if b == 0 {
                1.0
            } else {
                (l as f64 / b as f64).max(1.0)
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Report;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn fec_only_where_retransmission_is_too_late() {
        // 200 ms deadline over a 300 ms path: a retransmission cannot make it.
        assert!(needs_fec(Some(200 * MS), Some(300 * MS), true));
        // 1 s over 100 ms: retransmission can.
        assert!(!needs_fec(Some(1000 * MS), Some(100 * MS), true));
        assert!(!needs_fec(None, Some(100 * MS), true));
        // Nothing measured yet: protect.
        assert!(needs_fec(Some(1000 * MS), None, true));
        // A transport that never retransmits: always.
        assert!(needs_fec(None, Some(10 * MS), false));
    }

    #[test]
    fn bernoulli_matches_the_binomial() {
        // Bernoulli loss has mean burst 1 / (1 - p): with it the chain is
        // memoryless (q = p, r = 1 - p).
        let (k, m, p) = (8usize, 2usize, 0.02f64);
        let n = k + m;
        let binom = |j: usize| {
            let c = (0..j).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64);
            c * p.powi(j as i32) * (1.0 - p).powi((n - j) as i32)
        };
        let want: f64 = (m + 1..=n).map(|j| binom(j) * j as f64 / n as f64).sum();
        let got = expected_unrecovered(
            k,
            m,
            LossEstimate {
                p,
                burst: 1.0 / (1.0 - p),
            },
        );
        assert!((got - want).abs() < 1e-12, "{got} {want}");
        assert_eq!(
            expected_unrecovered(8, 2, LossEstimate { p: 0.0, burst: 1.0 }),
            0.0
        );
    }

    #[test]
    fn bursts_need_more_repair() {
        let b1 = LossEstimate {
            p: 0.02,
            burst: 1.0,
        };
        let b3 = LossEstimate {
            p: 0.02,
            burst: 3.0,
        };
        assert!(expected_unrecovered(9, 2, b3) > expected_unrecovered(9, 2, b1));
        let m1 = choose_repairs(9, Some(b1), 1e-3, 15);
        let m3 = choose_repairs(9, Some(b3), 1e-3, 15);
        assert!(m3 > m1, "{m1} {m3}");
        assert_eq!(m1, 2);
        // Bounded by what is affordable; no estimate spends it.
        assert_eq!(choose_repairs(9, Some(b3), 1e-3, 2), 2);
        assert_eq!(choose_repairs(9, None, 1e-3, 3), 3);
        assert_eq!(
            choose_repairs(9, Some(LossEstimate { p: 0.0, burst: 1.0 }), 1e-3, 3),
            0
        );
    }

    #[test]
    fn meter_windows_the_reports() {
        let mut m = LossMeter::default();
        let rep = |judged, lost, bursts| Report {
            judged,
            lost,
            bursts,
            ..Report::default()
        };
        m.on_report(rep(100, 2, 2));
        assert_eq!(m.estimate(), None);
        m.on_report(rep(400, 8, 4));
        let e = m.estimate().unwrap();
        assert!((e.p - 0.02).abs() < 1e-9 && (e.burst - 2.0).abs() < 1e-9);
        // An older report changes nothing.
        m.on_report(rep(300, 8, 4));
        assert_eq!(m.estimate(), Some(e));
        // After a long loss-free stretch the early losses age out.
        for i in 1..=30 {
            m.on_report(rep(400 + i * 100, 8, 4));
        }
        assert_eq!(m.estimate().unwrap().p, 0.0);
    }

    #[test]
    fn config_checks() {
        assert!(FecConfig::default().validate().is_ok());
        let bad = FecConfig {
            max_overhead: 0.0,
            ..FecConfig::default()
        };
        assert!(bad.validate().is_err());
        let bad = FecConfig {
            max_block: 65,
            ..FecConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
