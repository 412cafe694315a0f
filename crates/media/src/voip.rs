//! The thesis's simulated voice-over-IP application (§5.1.2) over TCP, the
//! three TCP Hollywood deployments (§4.4) and plain UDP.
//!
//! # The application
//!
//! The sender generates one 160-byte message every 20 ms (G.711-like) for a
//! minute (3000 messages). The receiver plays message `i` out at a fixed
//! schedule and records, per message, the times the thesis plots in
//! Figs. 5.4–5.16:
//!
//! * **send** — generation at the sender;
//! * **arrival** — delivery to the receiving application;
//! * **playout** — the scheduled playout instant;
//! * **buffered time** = playout − arrival (Fig. 5.4: "the duration between a
//!   message arriving, and its playout time"; negative = late);
//! * **transport delay** = arrival − send ("the duration between the message
//!   being sent and it arriving at the receiver application");
//! * **outcome** — [`Outcome::Played`] (arrived at or before its playout
//!   instant), [`Outcome::Late`] or [`Outcome::NeverArrived`].
//!
//! # Playout schedule (interpretation)
//!
//! The thesis calls its 110 ms / 30 ms parameter the "playout delay" and
//! plots, per message, the time it is buffered before playout; a message
//! arriving after the normal one-way delay is buffered for exactly the
//! playout delay (Fig. 5.5: the retransmitted message 1457, delayed by
//! `T_rexmit` ≈ RTT + 3 frames = 75 ms, "is buffered for only 35 ms" =
//! 110 − 75). So message `i` is played at its sending instant plus the
//! path's one-way delay plus the playout delay (eq. 5.1's
//! `T_playout + T_rtt/2` on top of the sending instant):
//!
//! ```text
//! playout_i = send_i + owd + playout_delay,   owd = min_k (arrival_k − send_k)
//! ```
//!
//! with `owd` the smallest transport delay of the call (propagation plus
//! serialization: what every message takes when nothing goes wrong). The
//! sender is strictly periodic (`send_i = send_0 + i·interval`), so this is
//! the receiver's clock anchored on a message `k` that arrived on time:
//! `playout_i = arrival_k + playout_delay + (i − k)·interval` — the
//! reading "anchored on the first message's arrival" whenever message 0
//! arrives on time. We take the minimum rather than message 0 itself because
//! when message 0's first transmission is dropped, anchoring on its late
//! (retransmitted) arrival would shift the whole call's schedule by the
//! recovery time and hide every later loss — an artifact the thesis's
//! fixed-delay plots do not have.
//!
//! # Message lifetime
//!
//! A TCP Hollywood sender needs each message's lifetime (§4.2): the time
//! from generation after which it is useless. The sender estimates it as
//! the time to its playout instant, `RTT/2 + playout delay` (eq. 5.1 with
//! symmetric delays): 117.5 ms intracontinental, 65 ms intercontinental.
//! The engine's liveness test `now + SRTT/2 ≤ queued + lifetime` then asks
//! exactly "would a retransmission sent now arrive before playout?".
//!
//! # One application, every transport
//!
//! The call is the message stream of [`MessagesScenario`] (one sender and
//! receiver application written against the message-transport interface)
//! with the lifetime above; this module adds the playout schedule. TCP and
//! its Hollywood deployments, the QUIC mappings and QUICsilver, and UDP all
//! carry it with no per-transport code. [`TransportKind::Udp`] sends each
//! message as one datagram and never retransmits: the floor any transport
//! can reach on the path — a message is lost exactly when its one
//! transmission is dropped.

use crate::scenario::stats::Percentiles;
use crate::scenario::MessagesScenario;
use crate::stream::Transport;
use hollywood_sim::{LossModel, MiddleboxKind};
use hollywood_tcp::{Config, Instant};
use hollywood_transport::TransportKind;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The transports of the thesis's VoIP figures, in the order reports show
/// them: standard TCP, IR only, IR + out-of-order (thesis Figs. 5.4–5.16
/// cover these three), then the receiver-only deployment and UDP. Any
/// [`TransportKind`] carries the call: TCP and its deployments directly, the
/// QUIC variants and UDP through [`crate::GenericTransport`], the same call
/// over the same link through [`MessagesScenario`], no per-transport code.
pub const TRANSPORTS: [TransportKind; 5] = [
    TransportKind::Tcp(Transport::Tcp),
    TransportKind::Tcp(Transport::HollywoodIr),
    TransportKind::Tcp(Transport::Hollywood),
    TransportKind::Tcp(Transport::HollywoodOoo),
    TransportKind::Udp,
];

/// Why a VoIP run could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoipError {
    /// A parameter is out of range (the message says which).
    InvalidScenario(String),
    /// The simulator rejected the setup or failed while running.
    Simulation(String),
    /// The pcap file could not be written.
    Pcap(String),
}

impl fmt::Display for VoipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VoipError::InvalidScenario(m) => write!(f, "invalid VoIP scenario: {m}"),
            VoipError::Simulation(m) => write!(f, "simulation failed: {m}"),
            VoipError::Pcap(m) => write!(f, "pcap: {m}"),
        }
    }
}

impl std::error::Error for VoipError {}

/// A VoIP experiment (thesis §5.1.2, Fig. 5.3 reduced to its bottleneck).
/// `Default` is the intercontinental scenario with IR + out-of-order.
#[derive(Debug, Clone)]
pub struct VoipScenario {
    /// Downlink rate, sender → receiver (bit/s).
    pub rate_bps: u64,
    /// Uplink rate, receiver → sender (bit/s; carries the ACKs).
    pub uplink_bps: u64,
    /// Round-trip propagation delay (half each way).
    pub rtt: Duration,
    /// Playout delay: how long an on-time message waits in the receiver's
    /// buffer before it is played.
    pub playout: Duration,
    /// Random loss on the downlink.
    pub loss: LossModel,
    /// Drop-tail queue per link (bytes).
    pub queue_bytes: usize,
    /// Messages.
    pub count: u32,
    /// Payload bytes per message.
    pub size: usize,
    /// Interval between messages (the framing interval).
    pub interval: Duration,
    /// Message lifetime given to a TCP Hollywood sender; `None` = the
    /// estimate `rtt/2 + playout` (see the module docs).
    pub lifetime: Option<Duration>,
    /// Transport.
    pub transport: TransportKind,
    /// Seed for everything random.
    pub seed: u64,
    /// Base TCP engine configuration (the deployment's switches go on top).
    pub base: Config,
    /// Write every packet the sender sent (link ingress) here.
    pub pcap: Option<PathBuf>,
}

impl Default for VoipScenario {
    fn default() -> Self {
        VoipScenario::intercontinental()
    }
}

impl VoipScenario {
    /// ADSL 8/1 Mb/s, 0.1 % random loss, 3000 messages of 160 B every
    /// 20 ms (thesis §5.1.2), with the given RTT and playout delay.
    pub fn adsl(rtt: Duration, playout: Duration) -> VoipScenario {
        VoipScenario {
            rate_bps: 8_000_000,
            uplink_bps: 1_000_000,
            rtt,
            playout,
            loss: LossModel::Bernoulli(0.001),
            queue_bytes: 64 * 1500,
            count: 3000,
            size: 160,
            interval: Duration::from_millis(20),
            lifetime: None,
            transport: TransportKind::Tcp(Transport::Hollywood),
            seed: 1,
            base: Config::default(),
            pcap: None,
        }
    }

    /// The intracontinental scenario: 15 ms RTT, 110 ms playout delay
    /// (thesis §5.1.2; Figs. 5.4–5.6, 5.13, 5.14).
    pub fn intracontinental() -> VoipScenario {
        VoipScenario::adsl(Duration::from_millis(15), Duration::from_millis(110))
    }

    /// The intercontinental scenario: 70 ms RTT, 30 ms playout delay
    /// (thesis §5.1.2; Figs. 5.7–5.10, 5.15, 5.16).
    pub fn intercontinental() -> VoipScenario {
        VoipScenario::adsl(Duration::from_millis(70), Duration::from_millis(30))
    }

    /// The lifetime a TCP Hollywood sender gives each message: the explicit
    /// one, or `rtt/2 + playout` (the time from generation to playout).
    pub fn message_lifetime(&self) -> Duration {
        self.lifetime.unwrap_or(self.rtt / 2 + self.playout)
    }

    fn validate(&self) -> Result<(), VoipError> {
        let bad = |m: &str| Err(VoipError::InvalidScenario(m.into()));
        if self.count == 0 {
            return bad("at least one message is needed");
        }
        if self.size == 0 || self.size > 1400 {
            return bad("the message size must be between 1 and 1400 bytes (one packet)");
        }
        if self.interval.is_zero() {
            return bad("the message interval must be positive");
        }
        if self.rate_bps == 0 || self.uplink_bps == 0 {
            return bad("link rates must be positive");
        }
        Ok(())
    }

    /// Run the call to completion and compute every message's fate.
    pub fn run(&self) -> Result<VoipRun, VoipError> {
        self.validate()?;
        self.run_stream(crate::GenericTransport::from(self.transport))
    }

    /// Over `transport`.
    fn run_stream(&self, transport: crate::GenericTransport) -> Result<VoipRun, VoipError> {
        let sc = MessagesScenario {
            rate_bps: self.rate_bps,
            uplink_bps: self.uplink_bps,
            rtt: self.rtt,
            loss: self.loss,
            queue_bytes: self.queue_bytes,
            count: self.count,
            size: self.size,
            interval: self.interval,
            lifetime: Some(self.message_lifetime()),
            transport,
            middlebox: MiddleboxKind::None,
            seed: self.seed,
            base: self.base.clone(),
            pcap: self.pcap.clone(),
            keylog: None,
            secure: false,
            drop_packets: Vec::new(),
            record_receiver_packets: false,
            group: 0,
            schedule: None,
            cross: Vec::new(),
            impair: Default::default(),
            fec: None,
            priorities: Vec::new(),
        };
        let m = sc.run().map_err(VoipError::Simulation)?;
        let records = schedule(
            &m.generated,
            &m.arrival,
            &m.first_tx_dropped,
            &m.expired,
            self.playout,
            self.interval,
        );
        Ok(VoipRun {
            scenario: self.clone(),
            records,
            ir_sent: m.hollywood.ir_sent + m.hollywood.replaced_at_first_tx,
            expired_events: m.expired_events,
            retransmissions_on_wire: m.wire.retransmissions,
            srtt: m.sender_srtt,
            corrupt_delivered: m.corrupt_delivered,
            duplicates_delivered: m.duplicates_delivered,
            seq_holes_on_wire: m.wire.seq_holes,
            sim_time: m.sim_time,
            error: m.error,
            network_dropped: m.network_dropped,
        })
    }
}

/// Compute every message's playout instant: `send_i + owd + playout` with
/// `owd` the smallest transport delay of the call (see the module docs),
/// written with media time `i · interval` so that it needs only arrivals.
pub fn schedule(
    generated: &[Option<Instant>],
    arrival: &[Option<Instant>],
    first_tx_dropped: &[bool],
    expired: &[bool],
    playout: Duration,
    interval: Duration,
) -> Vec<VoipRecord> {
    // Anchor: min over arrived k of (arrival_k − k · interval), the arrival
    // time of media time 0 at the smallest transport delay (ties: lowest id).
    let iv = interval.as_nanos() as i128;
    let anchor = arrival
        .iter()
        .enumerate()
        .filter_map(|(k, a)| a.map(|a| a.as_nanos() as i128 - k as i128 * iv))
        .min();
    (0..generated.len())
        .map(|i| {
            let playout_at = anchor.map(|t0| {
                let ns = t0 + playout.as_nanos() as i128 + i as i128 * iv;
                // t0 ≥ send_0 ≥ 0 because arrival_k ≥ send_k = send_0 +
                // k·interval, so the clamp never applies.
                Instant::from_nanos(ns.max(0) as u64)
            });
            VoipRecord {
                id: i as u32,
                send: generated[i],
                arrival: arrival.get(i).copied().flatten(),
                playout: playout_at,
                first_tx_dropped: first_tx_dropped.get(i).copied().unwrap_or(false),
                expired: expired.get(i).copied().unwrap_or(false),
            }
        })
        .collect()
}

/// What happened to one message at the receiving application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Arrived at or before its playout instant.
    Played,
    /// Arrived after its playout instant (useless to the application).
    Late,
    /// Never delivered (dropped without retransmission, or replaced by an
    /// inconsistent retransmission).
    NeverArrived,
}

impl Outcome {
    /// Name used in CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Played => "played",
            Outcome::Late => "late",
            Outcome::NeverArrived => "never_arrived",
        }
    }
}

/// Everything recorded about one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VoipRecord {
    /// Message id (0-based; media time = id · interval).
    pub id: u32,
    /// Generated at the sender (`None` only if the call failed before).
    pub send: Option<Instant>,
    /// Delivered to the receiving application.
    pub arrival: Option<Instant>,
    /// Scheduled playout instant (`None` only if nothing arrived at all).
    pub playout: Option<Instant>,
    /// The downlink dropped the first transmission of (part of) it.
    pub first_tx_dropped: bool,
    /// The TCP Hollywood sender reported it expired (replaced or sent late).
    pub expired: bool,
}

fn signed_ms(a: Instant, b: Instant) -> f64 {
    (a.as_nanos() as f64 - b.as_nanos() as f64) / 1e6
}

impl VoipRecord {
    /// Playout − arrival in milliseconds (negative = late).
    pub fn buffered_ms(&self) -> Option<f64> {
        Some(signed_ms(self.playout?, self.arrival?))
    }

    /// Arrival − send in milliseconds.
    pub fn transport_delay_ms(&self) -> Option<f64> {
        Some(signed_ms(self.arrival?, self.send?))
    }

    /// Played, late or never arrived.
    pub fn outcome(&self) -> Outcome {
        match (self.arrival, self.playout) {
            (Some(a), Some(p)) if a <= p => Outcome::Played,
            (Some(_), _) => Outcome::Late,
            (None, _) => Outcome::NeverArrived,
        }
    }

    /// Lost to the application: late or never arrived.
    pub fn lost(&self) -> bool {
        self.outcome() != Outcome::Played
    }
}

/// Per-call totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VoipSummary {
    /// Messages in the call.
    pub messages: u64,
    /// Messages whose first transmission the downlink dropped.
    pub first_tx_dropped: u64,
    /// Arrived after their playout instant.
    pub late: u64,
    /// Never delivered.
    pub never_arrived: u64,
    /// Lost to the application: late + never arrived.
    pub app_lost: u64,
    /// Played.
    pub played: u64,
    /// Inconsistent retransmissions (including replacements at first
    /// transmission) the sender made.
    pub ir_sent: u64,
    /// Transport delay of delivered messages.
    pub transport_delay_ms: Percentiles,
    /// Smallest buffered time (ms; negative = the latest message).
    pub min_buffered_ms: f64,
    /// Messages the on-time oracle plays: every message whose first
    /// transmission the network did not drop (the playout schedule leaves
    /// a message sent once and delayed by the path alone always in time).
    pub oracle_on_time: u64,
}

impl VoipSummary {
    /// Loss amplification: messages lost to the application per message
    /// whose first transmission was dropped (1.0 = each drop costs exactly
    /// its own message; above 1 = head-of-line blocking or late
    /// retransmissions hurt others too). `None` when nothing was dropped.
    pub fn amplification(&self) -> Option<f64> {
        (self.first_tx_dropped > 0).then(|| self.app_lost as f64 / self.first_tx_dropped as f64)
    }
}

/// One finished call.
#[derive(Debug, Clone)]
pub struct VoipRun {
    /// The parameters.
    pub scenario: VoipScenario,
    /// Per message, indexed by id.
    pub records: Vec<VoipRecord>,
    /// Inconsistent retransmissions the sender made (0 for UDP and
    /// unmodified senders).
    pub ir_sent: u64,
    /// Expired events reported to the sending application.
    pub expired_events: u64,
    /// Retransmitted segments on the wire (sender side).
    pub retransmissions_on_wire: u64,
    /// The TCP sender's smoothed RTT at the end of the call (None for UDP):
    /// what its liveness test `now + SRTT/2 ≤ queued + lifetime` used.
    pub srtt: Option<Duration>,
    /// Messages delivered with wrong content (must be 0).
    pub corrupt_delivered: u64,
    /// Messages delivered twice (must be 0).
    pub duplicates_delivered: u64,
    /// Sequence holes on the wire (must be 0; TCP only).
    pub seq_holes_on_wire: u64,
    /// Virtual time at the end of the run.
    pub sim_time: Duration,
    /// A connection failure, if any.
    pub error: Option<String>,
    /// Per message: the network (loss model or scripted drop, not a queue
    /// the sender filled) dropped the packet that first carried it — what
    /// the on-time oracle loses (`crate::scenario::ontime`). Empty when unknown.
    pub network_dropped: Vec<bool>,
}

impl VoipRun {
    /// Totals over the call.
    pub fn summary(&self) -> VoipSummary {
        let mut s = VoipSummary {
            messages: self.records.len() as u64,
            first_tx_dropped: 0,
            late: 0,
            never_arrived: 0,
            app_lost: 0,
            played: 0,
            ir_sent: self.ir_sent,
            transport_delay_ms: Percentiles::default(),
            min_buffered_ms: 0.0,
            oracle_on_time: 0,
        };
        s.oracle_on_time = self
            .records
            .iter()
            .enumerate()
            .filter(|(i, r)| {
                !self
                    .network_dropped
                    .get(*i)
                    .copied()
                    .unwrap_or(r.first_tx_dropped)
            })
            .count() as u64;
        let mut delays = Vec::with_capacity(self.records.len());
        let mut min_buf = f64::INFINITY;
        for r in &self.records {
            s.first_tx_dropped += r.first_tx_dropped as u64;
            match r.outcome() {
                Outcome::Played => s.played += 1,
                Outcome::Late => s.late += 1,
                Outcome::NeverArrived => s.never_arrived += 1,
            }
            if let Some(d) = r.transport_delay_ms() {
                delays.push(d);
            }
            if let Some(b) = r.buffered_ms() {
                min_buf = min_buf.min(b);
            }
        }
        s.app_lost = s.late + s.never_arrived;
        s.transport_delay_ms = Percentiles::of(delays);
        s.min_buffered_ms = if min_buf.is_finite() { min_buf } else { 0.0 };
        s
    }

    /// A message to centre a zoomed plot on (Figs. 5.5, 5.8, 5.10, 5.14,
    /// 5.16 each zoom on one loss event): the first message whose first
    /// transmission was dropped, else the first one lost to the
    /// application, else the one with the largest transport delay.
    pub fn loss_event(&self) -> Option<u32> {
        self.records
            .iter()
            .find(|r| r.first_tx_dropped)
            .or_else(|| self.records.iter().find(|r| r.lost()))
            .or_else(|| {
                self.records
                    .iter()
                    .filter(|r| r.transport_delay_ms().is_some())
                    .max_by(|a, b| {
                        a.transport_delay_ms()
                            .unwrap_or(0.0)
                            .total_cmp(&b.transport_delay_ms().unwrap_or(0.0))
                    })
            })
            .map(|r| r.id)
    }

    /// For each message whose first transmission was dropped and that
    /// arrived anyway (a retransmission recovered it): how much later than
    /// the call's fastest message it arrived (ms) — the observed
    /// `T_rexmit` of thesis eq. 5.2.
    pub fn recovery_delays_ms(&self) -> Vec<f64> {
        let base = self
            .records
            .iter()
            .filter_map(|r| r.transport_delay_ms())
            .fold(f64::INFINITY, f64::min);
        self.records
            .iter()
            .filter(|r| r.first_tx_dropped)
            .filter_map(|r| Some(r.transport_delay_ms()? - base))
            .collect()
    }

    /// Messages lost to the application that were not themselves dropped
    /// on their first transmission: the head-of-line-blocking tail (or
    /// wrongly replaced messages).
    pub fn collateral_losses(&self) -> u64 {
        self.records
            .iter()
            .filter(|r| r.lost() && !r.first_tx_dropped)
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Option<Instant> {
        Some(Instant::from_nanos(ms * 1_000_000))
    }

    #[test]
    fn schedule_is_send_plus_one_way_delay_plus_playout() {
        // Sent at 0, 20, 40, 60 ms; one-way 35 ms; message 1 retransmitted
        // and 100 ms late; message 2 head-of-line blocked behind it;
        // message 3 never arrives. Playout delay 30 ms.
        let generated = [at(0), at(20), at(40), at(60)];
        let arrival = [at(35), at(155), at(155), None];
        let recs = schedule(
            &generated,
            &arrival,
            &[false, true, false, false],
            &[false; 4],
            Duration::from_millis(30),
            Duration::from_millis(20),
        );
        assert_eq!(recs[0].playout, at(65));
        assert_eq!(recs[1].playout, at(85));
        assert_eq!(recs[3].playout, at(125));
        assert_eq!(recs[0].buffered_ms(), Some(30.0));
        assert_eq!(recs[1].buffered_ms(), Some(-70.0));
        assert_eq!(recs[1].transport_delay_ms(), Some(135.0));
        let outcomes: Vec<_> = recs.iter().map(|r| r.outcome()).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Played,
                Outcome::Late,
                Outcome::Late,
                Outcome::NeverArrived
            ]
        );
    }

    #[test]
    fn anchor_is_the_smallest_delay_not_message_zero() {
        // Message 0 dropped and recovered late; message 1 arrives at its
        // normal 35 ms delay, so media time 0 plays at 55 − 20 + 30 = 65 ms.
        let recs = schedule(
            &[at(0), at(20)],
            &[at(200), at(55)],
            &[true, false],
            &[false; 2],
            Duration::from_millis(30),
            Duration::from_millis(20),
        );
        assert_eq!(recs[0].playout, at(65));
        assert_eq!(recs[1].buffered_ms(), Some(30.0));
        assert_eq!(recs[0].outcome(), Outcome::Late);
    }

    #[test]
    fn arrival_exactly_at_playout_is_played() {
        let recs = schedule(
            &[at(0), at(20)],
            &[at(10), at(60)],
            &[false; 2],
            &[false; 2],
            Duration::from_millis(30),
            Duration::from_millis(20),
        );
        assert_eq!(recs[1].buffered_ms(), Some(0.0));
        assert_eq!(recs[1].outcome(), Outcome::Played);
    }

    #[test]
    fn summary_and_amplification() {
        let generated = [at(0), at(20), at(40), at(60)];
        let arrival = [at(35), at(155), at(155), None];
        let recs = schedule(
            &generated,
            &arrival,
            &[false, true, false, true],
            &[false; 4],
            Duration::from_millis(30),
            Duration::from_millis(20),
        );
        let run = VoipRun {
            scenario: VoipScenario::default(),
            records: recs,
            ir_sent: 0,
            expired_events: 0,
            retransmissions_on_wire: 0,
            srtt: None,
            corrupt_delivered: 0,
            duplicates_delivered: 0,
            seq_holes_on_wire: 0,
            sim_time: Duration::ZERO,
            error: None,
            network_dropped: vec![false, true, false, false],
        };
        let s = run.summary();
        assert_eq!(
            (s.messages, s.played, s.late, s.never_arrived, s.app_lost),
            (4, 1, 2, 1, 3)
        );
        assert_eq!(s.first_tx_dropped, 2);
        assert_eq!(
            s.oracle_on_time, 3,
            "one network drop (the other was the queue)"
        );
        assert_eq!(s.amplification(), Some(1.5));
        assert_eq!(s.transport_delay_ms.max, 135.0);
        assert_eq!(s.min_buffered_ms, -70.0);
        assert_eq!(run.collateral_losses(), 1);
        // Message 1 was dropped and recovered 100 ms after the fastest (35 ms).
        assert_eq!(run.recovery_delays_ms(), vec![100.0]);
        assert_eq!(run.loss_event(), Some(1));
    }

    #[test]
    fn lifetime_is_one_way_delay_plus_playout() {
        assert_eq!(
            VoipScenario::intercontinental().message_lifetime(),
            Duration::from_millis(65)
        );
        assert_eq!(
            VoipScenario::intracontinental().message_lifetime(),
            Duration::from_micros(117_500)
        );
    }

    #[test]
    fn transport_names_round_trip() {
        for t in TRANSPORTS {
            assert_eq!(TransportKind::parse(t.name()), Ok(t));
        }
        assert!(TransportKind::parse("sctp").is_err());
        for q in hollywood_transport::QuicKind::ALL {
            let t = TransportKind::parse(q.name()).unwrap();
            assert_eq!(t, TransportKind::Quic(q));
            assert_eq!(t.name(), q.name());
        }
    }

    /// The call over QUIC through the message-transport interface: one
    /// stream blocks behind each loss as TCP does; QUICsilver gives up what
    /// cannot be played in time and is (almost) never late.
    #[test]
    fn voice_over_quic_one_stream_blocks_quicsilver_does_not() {
        let run = |name| {
            VoipScenario {
                transport: TransportKind::parse(name).unwrap(),
                loss: LossModel::Bernoulli(0.01),
                count: 1500,
                ..VoipScenario::intercontinental()
            }
            .run()
            .unwrap()
        };
        let (ss, qs) = (run("quic-ss").summary(), run("quicsilver").summary());
        assert!(ss.first_tx_dropped > 5, "{ss:?}");
        assert!(
            ss.late > ss.first_tx_dropped,
            "head-of-line blocking: {ss:?}"
        );
        // The srtt/2 estimate of the repair time can be a little short.
        assert!(qs.late * 5 <= ss.late, "{qs:?} vs {ss:?}");
        assert!(qs.played > ss.played, "{qs:?} vs {ss:?}");
        assert!(qs.played + 2 >= qs.oracle_on_time, "{qs:?}");
    }

    #[test]
    fn invalid_scenarios_are_rejected() {
        let sc = VoipScenario {
            count: 0,
            ..VoipScenario::default()
        };
        assert!(matches!(sc.run(), Err(VoipError::InvalidScenario(_))));
        let sc = VoipScenario {
            size: 5000,
            ..VoipScenario::default()
        };
        assert!(matches!(sc.run(), Err(VoipError::InvalidScenario(_))));
    }

    #[test]
    fn udp_loses_exactly_the_dropped_datagrams() {
        let sc = VoipScenario {
            transport: TransportKind::Udp,
            loss: LossModel::Bernoulli(0.05),
            count: 400,
            ..VoipScenario::default()
        };
        let run = sc.run().unwrap();
        let s = run.summary();
        assert!(s.first_tx_dropped > 5, "{s:?}");
        assert_eq!(s.never_arrived, s.first_tx_dropped);
        assert_eq!(s.late, 0);
        assert_eq!(run.corrupt_delivered + run.duplicates_delivered, 0);
        for r in &run.records {
            assert_eq!(r.first_tx_dropped, r.arrival.is_none());
        }
        // 35 ms propagation + serialization of 192 bytes (20 IP + 8 UDP + 4 id
        // + 160 payload) at 8 Mb/s.
        let d = s.transport_delay_ms;
        assert!(
            (d.p50 - 35.192).abs() < 0.01 && d.max - d.p50 < 0.01,
            "{d:?}"
        );
    }
}
