//! A packet-level sender and path model for the BBR tests.
//!
//! [`Sim`] is a minimal engine that honours the contract in the module
//! doc of [`super::super`] (it calls `on_send`, `on_segment_lost`, the
//! recovery hooks, `on_rtt_sample` and `on_delivery` itself) over one
//! [`Path`]: a drop-tail bottleneck with seeded Bernoulli loss and a fixed
//! propagation delay, in virtual time. It builds the rate samples exactly
//! as draft-ietf-ccwg-bbr-01 §4.5.2.3 specifies, one per packet ACKed at
//! once (no delayed ACKs, no lost ACKs).
//!
//! Why not `crate::pair` (two real endpoints over simulated links): the
//! scenario tests assert on what only this model exposes. The engine
//! holds its controller as a `Box<dyn CongestionControl>`, so through
//! `pair` neither the BBR state, its recorded transitions, `max_bw`,
//! `round_count` nor `inflight_longterm` is visible, and
//! [`check_invariants`](super::check_invariants) cannot run after every
//! event on private fields (`pacing_gain`, `bw`, `bw_shortterm`,
//! `send_quantum`, ...). The observations per ACK ([`Obs`]) also need the
//! bottleneck's queue and the application's backlog at that instant, and
//! the live-video scenarios an application that writes at a fixed rate
//! and then turns from greedy to rate-limited. Finally the asserted
//! numbers (goodput ratios, ProbeRTT gaps, the millisecond transition
//! trace) are calibrated on these exact sample sequences; the engine
//! (delayed ACKs, SACK/RACK loss detection, its own sampler and timers)
//! would give different ones. BBR inside the engine, over `pair`, is
//! tested in [`super::engine`] (and in the crate's `tests/timers.rs` and
//! `tests/prop.rs`).

use super::*;
use crate::cc::RateSample;
use hollywood_wire::SeqNumber;
use rand::Rng;
use std::collections::VecDeque;

/// What the application offers.
#[derive(Debug, Clone, Copy)]
pub(super) enum App {
    /// Always has data to send.
    Greedy,
    /// Writes one SMSS every `SMSS / rate` seconds (rate in bytes/s).
    Rate(u64),
    /// Greedy for the given time, then `Rate`.
    GreedyThenRate(Duration, u64),
}

/// One bottleneck: `rate` bytes/s, a drop-tail buffer of `queue`
/// bytes, then `rtt` of propagation delay (both ways together), and
/// Bernoulli loss of data packets before the bottleneck. ACKs are never
/// lost; every data packet is ACKed at once (no delayed ACKs).
#[derive(Debug, Clone, Copy)]
pub(super) struct Path {
    pub(super) rate: u64,
    pub(super) rtt: Duration,
    queue: u64,
    loss: f64,
    seed: u64,
}

impl Path {
    pub(super) fn new(rate: u64, rtt: Duration) -> Path {
        let mut p = Path {
            rate,
            rtt,
            queue: 0,
            loss: 0.0,
            seed: 1,
        };
        p.queue = 2 * p.bdp();
        p
    }
    pub(super) fn with_loss(mut self, loss: f64) -> Path {
        self.loss = loss;
        self
    }
    pub(super) fn with_queue(mut self, bytes: u64) -> Path {
        self.queue = bytes;
        self
    }
    /// Bytes per base RTT.
    pub(super) fn bdp(&self) -> u64 {
        Bbr::volume(self.rate as f64, self.rtt)
    }
    /// Serialization time of `len` bytes at the bottleneck.
    fn ser(&self, len: u64) -> Duration {
        Duration::from_nanos(len * 1_000_000_000 / self.rate)
    }
    /// The smallest RTT a full-size packet can see.
    pub(super) fn min_rtt(&self) -> Duration {
        self.rtt + self.ser(SMSS)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    InFlight,
    Acked,
    Lost,
}

/// Per-packet send state (draft §4.5.2.3.1.2, plus what BBR's loss
/// handling needs). Every transmission is a packet of its own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pkt {
    len: u64,
    sent: Instant,
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    is_app_limited: bool,
    tx_in_flight: u64,
    lost_at_send: u64,
    retx: bool,
    fate: Fate,
}

/// What the sender saw on one ACK.
#[derive(Debug, Clone, Copy)]
pub(super) struct Obs {
    pub(super) t: Duration,
    pub(super) state: BbrState,
    pub(super) cwnd: u64,
    pub(super) pacing: u64,
    pub(super) inflight: u64,
    /// Bytes queued at the bottleneck.
    pub(super) backlog: u64,
    pub(super) rtt: Option<Duration>,
    pub(super) max_bw: u64,
    pub(super) round: u64,
    /// Bytes written by the application but not yet sent.
    pub(super) app_backlog: u64,
}

/// A state change: when, to what, and the model at that moment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Change {
    pub(super) t: Duration,
    pub(super) to: BbrState,
    pub(super) round: u64,
    pub(super) max_bw: u64,
    pub(super) backlog: u64,
    pub(super) inflight_longterm: Option<u64>,
}

/// The sender (a minimal engine honouring the contract in the module
/// doc) and the path, in virtual time, jumping from event to event.
pub(super) struct Sim {
    pub(super) cc: Bbr,
    path: Path,
    app: App,
    rng: ChaCha8Rng,
    start: Instant,
    now: Instant,
    pub(super) pkts: Vec<Pkt>,
    lowest_outstanding: usize,
    /// ACK arrival times (FIFO: one link, constant delay).
    acks: VecDeque<(Instant, usize)>,
    link_free: Instant,
    // Connection state of the delivery-rate sampler (§4.5.2.3.1.1).
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    app_limited: u64,
    pub(super) lost: u64,
    inflight: u64,
    // Application and sender queues.
    app_queue: u64,
    next_write: Instant,
    retx: VecDeque<u64>,
    next_send: Instant,
    // RTT estimation (RFC 6298) and timers.
    srtt: Option<Duration>,
    rttvar: Duration,
    latest_rtt: Duration,
    min_rtt: Option<Duration>,
    rto_at: Option<Instant>,
    rto_backoff: u32,
    in_recovery: bool,
    recovery_start: usize,
    rto_window: bool,
    // Measurements.
    goodput: u64,
    pub(super) obs: Vec<Obs>,
    pub(super) changes: Vec<Change>,
    checked: usize,
}

impl Sim {
    pub(super) fn new(path: Path, app: App) -> Sim {
        Sim {
            cc: Bbr::new(SMSS as usize, IW),
            path,
            app,
            rng: ChaCha8Rng::seed_from_u64(path.seed),
            start: T0,
            now: T0,
            pkts: Vec::new(),
            lowest_outstanding: 0,
            acks: VecDeque::new(),
            link_free: T0,
            delivered: 0,
            delivered_time: T0,
            first_sent_time: T0,
            app_limited: 0,
            lost: 0,
            inflight: 0,
            app_queue: 0,
            next_write: T0,
            retx: VecDeque::new(),
            next_send: T0,
            srtt: None,
            rttvar: Duration::ZERO,
            latest_rtt: Duration::ZERO,
            min_rtt: None,
            rto_at: None,
            rto_backoff: 0,
            in_recovery: false,
            recovery_start: 0,
            rto_window: false,
            goodput: 0,
            obs: Vec::new(),
            changes: Vec::new(),
            checked: 0,
        }
    }

    fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Bytes per second the application writes, if rate-limited now.
    fn app_rate(&self) -> Option<u64> {
        match self.app {
            App::Greedy => None,
            App::Rate(r) => Some(r),
            App::GreedyThenRate(until, r) => (self.elapsed() >= until).then_some(r),
        }
    }

    fn has_data(&self) -> bool {
        !self.retx.is_empty() || self.app_rate().is_none() || self.app_queue > 0
    }

    fn next_len(&self) -> u64 {
        match self.retx.front() {
            Some(&len) => len,
            None if self.app_rate().is_none() => SMSS,
            None => self.app_queue.min(SMSS),
        }
    }

    fn can_send(&self) -> bool {
        //= The engine limits bytes in flight to cwnd (in recovery too:
        //= owns_recovery_window).
        self.has_data() && self.inflight + self.next_len() <= self.cc.cwnd() as u64
    }

    /// §4.5.2.3.4 CheckIfApplicationLimited.
    fn check_app_limited(&mut self) {
        if self.app_rate().is_some()
            && self.app_queue < SMSS
            && self.inflight < self.cc.cwnd() as u64
            && self.retx.is_empty()
        {
            self.app_limited = (self.delivered + self.inflight).max(1);
        }
    }

    fn backlog(&self) -> u64 {
        Bbr::volume(self.path.rate as f64, self.link_free - self.now)
    }

    fn rto(&self) -> Duration {
        let base = match self.srtt {
            Some(srtt) => (srtt + 4 * self.rttvar).max(Duration::from_millis(200)),
            None => Duration::from_secs(1),
        };
        (base * (1 << self.rto_backoff.min(6))).min(Duration::from_secs(60))
    }

    fn send(&mut self) {
        let len = self.next_len();
        let retx = self.retx.pop_front().is_some();
        if !retx && self.app_rate().is_some() {
            self.app_queue -= len;
        }
        //= §4.5.2.3.2 SendPacket.
        if self.inflight == 0 {
            self.first_sent_time = self.now;
            self.delivered_time = self.now;
        }
        let app_limited_after = !self.has_data();
        self.cc
            .on_send(self.now, self.inflight, len as usize, app_limited_after);
        self.inflight += len;
        let idx = self.pkts.len();
        self.pkts.push(Pkt {
            len,
            sent: self.now,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            is_app_limited: self.app_limited != 0,
            tx_in_flight: self.inflight,
            lost_at_send: self.lost,
            retx,
            fate: Fate::InFlight,
        });
        // The path: random loss, then the drop-tail bottleneck.
        if self.rng.gen::<f64>() >= self.path.loss && self.backlog() + len <= self.path.queue {
            let depart = self.link_free.max(self.now) + self.path.ser(len);
            self.link_free = depart;
            self.acks.push_back((depart + self.path.rtt, idx));
        }
        // Pacing at the controller's rate.
        let rate = self.cc.pacing_rate().expect("BBR paces");
        let gap = Duration::from_nanos(len * 1_000_000_000 / rate);
        self.next_send = self.next_send.max(self.now) + gap;
        if self.rto_at.is_none() {
            self.rto_at = Some(self.now + self.rto());
        }
    }

    fn mark_lost(&mut self, i: usize) {
        let p = self.pkts[i];
        self.pkts[i].fate = Fate::Lost;
        self.inflight -= p.len;
        self.lost += p.len;
        self.retx.push_back(p.len);
        self.cc.on_segment_lost(&LostSegment {
            now: self.now,
            len: p.len,
            tx_in_flight: p.tx_in_flight,
            lost_at_send: p.lost_at_send,
            delivered_at_send: p.delivered,
            is_app_limited: p.is_app_limited,
        });
    }

    fn on_ack(&mut self, idx: usize) {
        self.check_app_limited();
        let flight_before = self.inflight;
        let p = self.pkts[idx];
        match p.fate {
            Fate::InFlight => {
                self.inflight -= p.len;
                self.goodput += p.len;
            }
            Fate::Lost => {} // spurious: the retransmission counts
            Fate::Acked => return,
        }
        self.pkts[idx].fate = Fate::Acked;
        //= §4.5.2.3.3 UpdateRateSample / GenerateRateSample.
        self.delivered += p.len;
        self.delivered_time = self.now;
        self.first_sent_time = p.sent;
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let rtt = (!p.retx).then(|| self.now - p.sent); // Karn
        if let Some(r) = rtt {
            match self.srtt {
                None => {
                    self.srtt = Some(r);
                    self.rttvar = r / 2;
                }
                Some(s) => {
                    let d = s.abs_diff(r);
                    self.rttvar = (self.rttvar * 3 + d) / 4;
                    self.srtt = Some((s * 7 + r) / 8);
                }
            }
            self.latest_rtt = r;
            self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        }
        let send_elapsed = p.sent - p.first_sent_time;
        let ack_elapsed = self.delivered_time - p.delivered_time;
        let mut interval = send_elapsed.max(ack_elapsed);
        if self.min_rtt.is_some_and(|m| interval < m) {
            interval = Duration::ZERO; // no reliable sample
        }
        // Loss detection: 3 packets or 9/8 RTT later (RFC 9002 §6.1).
        let thresh = self.srtt.unwrap_or(self.latest_rtt).max(self.latest_rtt) * 9 / 8;
        let lost_before = self.lost;
        for i in self.lowest_outstanding..idx {
            if self.pkts[i].fate == Fate::InFlight
                && (idx - i >= 3 || self.now - self.pkts[i].sent > thresh)
            {
                self.mark_lost(i);
            }
        }
        while self.lowest_outstanding < self.pkts.len()
            && self.pkts[self.lowest_outstanding].fate != Fate::InFlight
        {
            self.lowest_outstanding += 1;
        }
        let newly_lost = self.lost - lost_before;
        // Recovery (RFC 9002 §7.3.2: it ends when a packet sent during
        // it is acknowledged).
        if self.in_recovery && idx >= self.recovery_start {
            self.in_recovery = false;
            self.cc.on_recovery_end(self.now, self.inflight as usize);
        }
        if newly_lost > 0 && !self.in_recovery {
            self.in_recovery = true;
            self.recovery_start = self.pkts.len();
            self.cc
                .on_congestion_event(self.now, flight_before as usize);
        }
        self.rto_backoff = 0;
        self.rto_at = (self.inflight > 0).then(|| self.now + self.rto());
        if let Some(r) = rtt {
            self.cc
                .on_rtt_sample(self.now, r, SeqNumber(0), SeqNumber(0));
        }
        if !self.in_recovery {
            // Legacy hook: BBR must ignore it.
            let before = self.cc.cwnd;
            self.cc.on_ack(
                self.now,
                p.len as usize,
                flight_before as usize,
                self.srtt.unwrap_or_default(),
            );
            assert_eq!(self.cc.cwnd, before, "on_ack changed cwnd");
        }
        let rs = RateSample {
            delivered: self.delivered - p.delivered,
            interval,
            prior_delivered: p.delivered,
            is_app_limited: p.is_app_limited,
            tx_in_flight: p.tx_in_flight,
            lost: self.lost - p.lost_at_send,
            newly_acked: p.len,
            newly_lost,
            rtt,
        };
        self.cc.on_delivery(&DeliveryEvent {
            now: self.now,
            delivered: self.delivered,
            lost: self.lost,
            inflight: self.inflight,
            rate: Some(rs),
            min_rtt: self.min_rtt,
            srtt: self.srtt,
            in_recovery: self.in_recovery,
        });
        self.rto_window = false;
        self.obs.push(Obs {
            t: self.elapsed(),
            state: self.cc.state,
            cwnd: self.cc.cwnd,
            pacing: self.cc.pacing_rate().unwrap_or(0),
            inflight: self.inflight,
            backlog: self.backlog(),
            rtt,
            max_bw: self.cc.max_bw(),
            round: self.cc.round_count,
            app_backlog: self.app_queue,
        });
    }

    fn on_rto(&mut self) {
        self.cc.on_rto(self.now, self.inflight as usize);
        for i in self.lowest_outstanding..self.pkts.len() {
            if self.pkts[i].fate == Fate::InFlight {
                self.mark_lost(i);
            }
        }
        self.lowest_outstanding = self.pkts.len();
        self.in_recovery = true;
        self.recovery_start = self.pkts.len();
        self.rto_window = true;
        self.rto_backoff += 1;
        self.rto_at = None;
    }

    fn next_write(&self) -> Option<Instant> {
        match self.app {
            App::Greedy => None,
            App::Rate(_) => Some(self.next_write),
            App::GreedyThenRate(until, _) => Some(self.next_write.max(self.start + until)),
        }
    }

    fn write(&mut self) {
        self.check_app_limited();
        self.app_queue += SMSS;
        let r = self.app_rate().unwrap_or(1);
        self.next_write = self.now + Duration::from_nanos(SMSS * 1_000_000_000 / r);
    }

    /// Run until `elapsed() == t`, checking the invariants after every
    /// event.
    pub(super) fn run_until(&mut self, t: Duration) {
        let end = self.start + t;
        loop {
            let t_ack = self.acks.front().map(|a| a.0);
            let t_rto = self.rto_at;
            let t_write = self.next_write();
            let t_send = self.can_send().then(|| self.next_send.max(self.now));
            let Some(next) = [t_ack, t_rto, t_write, t_send].into_iter().flatten().min() else {
                break;
            };
            if next > end {
                break;
            }
            self.now = next;
            if t_ack == Some(next) {
                let (_, idx) = self.acks.pop_front().expect("an ACK");
                self.on_ack(idx);
            } else if t_rto == Some(next) {
                self.on_rto();
            } else if t_write == Some(next) {
                self.write();
            } else {
                self.send();
            }
            self.after_step();
        }
        self.now = end;
    }

    fn after_step(&mut self) {
        check_invariants(&self.cc, self.rto_window);
        let n = check_transitions(&self.cc, self.checked);
        for i in self.checked..n {
            let change = Change {
                t: self.elapsed(),
                to: self.cc.transitions[i].1,
                round: self.cc.round_count,
                max_bw: self.cc.max_bw(),
                backlog: self.backlog(),
                inflight_longterm: self.cc.inflight_longterm(),
            };
            self.changes.push(change);
        }
        self.checked = n;
    }

    /// Goodput (bytes/s) over the next `d`.
    pub(super) fn goodput_over(&mut self, d: Duration) -> f64 {
        let (g0, t0) = (self.goodput, self.elapsed());
        self.run_until(t0 + d);
        (self.goodput - g0) as f64 / d.as_secs_f64()
    }

    /// State-change times of `state`.
    pub(super) fn entries(&self, state: BbrState) -> Vec<&Change> {
        self.changes.iter().filter(|c| c.to == state).collect()
    }
}
