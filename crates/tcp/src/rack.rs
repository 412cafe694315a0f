//! RACK-TLP loss detection (RFC 8985) and Proportional Rate Reduction
//! (RFC 6937) state.
//!
//! RACK ("Recent ACKnowledgment", RFC 8985 §6) deems a segment lost once a
//! segment *sent after it* has been delivered and more than one RTT plus a
//! reordering window has passed since it was sent. Because it compares
//! transmission times rather than sequence numbers, it also detects lost
//! retransmissions, which the RFC 6675 DupThresh rule cannot. TLP ("Tail
//! Loss Probe", RFC 8985 §7) sends one probe segment when the ACK clock
//! stops (the tail of a flight was lost), so that RACK gets the feedback it
//! needs instead of waiting for the RTO.
//!
//! The connection (`conn/recovery.rs`) feeds this module: every segment an
//! ACK newly delivers goes to [`Rack::on_delivered`] (RFC 8985 §6.2 steps 2
//! and 3), then [`Rack::detect_loss`] marks losses on the scoreboard (step
//! 5) and returns the reordering-timer deadline. [`Prr`] computes how much
//! may be sent per ACK during SACK recovery (RFC 6937 §3.1).
//!
//! Everything here is arithmetic on the caller's clock: no I/O, no time
//! source of its own.

use crate::sack::{RtxQueue, Sent};
use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::time::Duration;

/// RFC 8985 §7.2: worst-case delayed-ACK time added to the PTO when only
/// one segment is in flight (its ACK may be delayed).
pub(crate) const WC_DEL_ACK: Duration = Duration::from_millis(200);

/// RFC 8985 §7.2: PTO before any RTT sample.
pub(crate) const PTO_NO_RTT: Duration = Duration::from_secs(1);

/// Smallest PTO. With a (near) zero SRTT, 2*SRTT would fire probes on
/// timer granularity alone, or at once; Linux's loss-probe timer keeps the
/// same 10 ms floor.
pub(crate) const PTO_MIN: Duration = Duration::from_millis(10);

/// RFC 8985 §6.2 step 4: recoveries a widened reordering window survives.
const REO_WND_PERSIST: u32 = 16;

/// `RACK_sent_after(t1, seq1, t2, seq2)` (RFC 8985 §6.2): whether the
/// transmission `(t1, seq1)` happened after `(t2, seq2)`; segments sent at
/// the same instant are ordered by their end sequence numbers.
pub(crate) fn sent_after(t1: Instant, seq1: SeqNumber, t2: Instant, seq2: SeqNumber) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

/// What the sender knows about the ACK whose delivered segments are fed to
/// [`Rack::on_delivered`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckInfo {
    /// When the ACK arrived.
    pub now: Instant,
    /// The ACK's TSecr, if timestamps are in use and the segments fed are
    /// cumulatively acknowledged (a SACK's echo is about the last in-order
    /// segment, RFC 7323 §4.3, so it says nothing about them).
    pub tsecr: Option<u32>,
    /// Our timestamp clock offset (RFC 7323 §5.4), to express a segment's
    /// transmission time in TSval units.
    pub ts_offset: u32,
    /// RACK.min_RTT (RFC 8985 §6.2 step 1): the connection's minimum RTT.
    pub min_rtt: Option<Duration>,
}

impl AckInfo {
    /// Our TSval at `t` (the clock of `Connection::ts_now`: 1 ms ticks).
    fn tsval(&self, t: Instant) -> u32 {
        ((t.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }
}

/// Result of one run of [`Rack::detect_loss`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Detection {
    /// Sequence-space bytes newly marked lost.
    pub newly_lost: usize,
    /// Lowest sequence number newly marked lost.
    pub first_lost: Option<SeqNumber>,
    /// Retransmissions newly found lost.
    pub lost_retransmissions: u32,
    /// Latest transmission time among the lost retransmissions.
    pub latest_lost_retransmission: Option<Instant>,
    /// RFC 8985 §6.2 step 5: when the reordering timer must fire (the
    /// latest deadline of a segment that may still be in flight).
    pub timer: Option<Instant>,
}

/// RACK and TLP state of one connection (RFC 8985 §5.2 / §7.1).
#[derive(Debug, Clone, Default)]
pub(crate) struct Rack {
    /// RACK.xmit_ts / RACK.end_seq: the most recently sent segment that
    /// has been delivered.
    xmit_ts: Option<Instant>,
    end_seq: SeqNumber,
    /// RACK.rtt: the RTT of the most recently sent segment delivered by
    /// the latest ACK.
    rtt: Duration,
    /// The most recently sent segment the ACK being processed delivered:
    /// `(xmit_ts, end_seq, rtt)`, applied by [`Rack::commit`].
    latest: Option<(Instant, SeqNumber, Duration)>,
    /// RACK.fack: the highest end sequence number delivered.
    fack: Option<SeqNumber>,
    /// RACK.reordering_seen.
    reordering_seen: bool,
    /// RACK.reo_wnd_mult (0 is read as 1).
    reo_wnd_mult: u32,
    /// RACK.reo_wnd_persist.
    reo_wnd_persist: u32,
    /// RACK.dsack_round.
    dsack_round: Option<SeqNumber>,
    /// TLP.end_seq: SND.NXT when the outstanding loss probe was sent.
    pub tlp_end: Option<SeqNumber>,
    /// TLP.is_retrans: the probe was a retransmission of this range.
    pub tlp_retrans: Option<(SeqNumber, SeqNumber)>,
    /// A new-data probe may go out: SND.NXT when it was decided.
    pub tlp_new_from: Option<SeqNumber>,
    /// SND.UNA when the PTO was last (re)armed (RFC 8985 §7.2: re-arm
    /// after new data is acknowledged)...
    pub pto_una: SeqNumber,
    /// ... and SND.NXT (re-arm after new data is sent).
    pub pto_nxt: SeqNumber,
    /// The D-SACK block of the ACK being processed (RFC 8985 §7.4 looks
    /// for one covering the probe).
    pub last_dsack: Option<(SeqNumber, SeqNumber)>,
}

impl Rack {
    /// RFC 8985 §6.2 steps 2 and 3 for one newly delivered (cumulatively
    /// or selectively acknowledged) segment `s`.
    pub(crate) fn on_delivered(&mut self, ack: &AckInfo, s: &Sent) {
        let end = s.end();
        // Step 3: reordering. A never-retransmitted segment delivered below
        // the highest delivered sequence number arrived out of order.
        match self.fack {
            Some(f) if end < f => {
                if s.times_sent == 1 {
                    self.reordering_seen = true;
                }
            }
            _ => self.fack = Some(end),
        }
        // Step 2: the RTT sample and RACK.xmit_ts. For a retransmitted
        // segment the ACK may be for an earlier transmission: skip it if
        // the timestamp echo predates the retransmission, or if the RTT
        // would be shorter than the minimum RTT.
        let rtt = ack.now.saturating_duration_since(s.last_sent);
        if s.times_sent > 1 {
            if let Some(echo) = ack.tsecr {
                if (echo.wrapping_sub(ack.tsval(s.last_sent)) as i32) < 0 {
                    return;
                }
            }
            if ack.min_rtt.is_some_and(|m| rtt < m) {
                return;
            }
        }
        // The RFC walks the ACK's segments in transmission order, so what
        // stays is the most recently sent one's; keep that one.
        match self.latest {
            Some((t, e, _)) if !sent_after(s.last_sent, end, t, e) => {}
            _ => self.latest = Some((s.last_sent, end, rtt)),
        }
    }

    /// End of one ACK's deliveries (RFC 8985 §6.2 step 2): RACK.rtt is the
    /// RTT of the most recently sent segment this ACK delivered, and
    /// RACK.xmit_ts / RACK.end_seq advance to it if it was sent after the
    /// current RACK segment.
    pub(crate) fn commit(&mut self) -> Option<Duration> {
        let (t, e, rtt) = self.latest.take()?;
        self.rtt = rtt;
        if self
            .xmit_ts
            .is_none_or(|x| sent_after(t, e, x, self.end_seq))
        {
            self.xmit_ts = Some(t);
            self.end_seq = e;
        }
        Some(rtt)
    }

    /// RFC 8985 §6.2 step 4, D-SACK part: a D-SACK arrived; widen the
    /// reordering window once per round trip.
    pub(crate) fn on_dsack(&mut self, snd_una: SeqNumber, snd_nxt: SeqNumber) {
        if self.dsack_round.is_some_and(|r| snd_una >= r) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() {
            self.dsack_round = Some(snd_nxt);
            self.reo_wnd_mult = self.reo_wnd_mult.max(1).saturating_add(1);
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// RFC 8985 §6.2 step 4: a loss recovery ended; the widened window
    /// decays back after `REO_WND_PERSIST` recoveries.
    pub(crate) fn on_recovery_end(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// RACK.reo_wnd (RFC 8985 §6.2 step 4): zero while no reordering was
    /// seen and either loss recovery is under way or DupThresh segments are
    /// SACKed (RACK is then as quick as the DupThresh rule); otherwise
    /// `min(reo_wnd_mult * min_RTT / 4, SRTT)`.
    pub(crate) fn reo_wnd(
        &self,
        in_recovery: bool,
        sacked_segments: usize,
        dupthresh: u32,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
    ) -> Duration {
        if !self.reordering_seen && (in_recovery || sacked_segments >= dupthresh as usize) {
            return Duration::ZERO;
        }
        let Some(min_rtt) = min_rtt else {
            return Duration::ZERO;
        };
        let w = (min_rtt / 4).saturating_mul(self.reo_wnd_mult.max(1));
        srtt.map_or(w, |s| w.min(s))
    }

    /// RACK_detect_loss (RFC 8985 §6.2 step 5): every segment not yet
    /// delivered that was sent before the RACK segment and whose time is up
    /// (`xmit_ts + RACK.rtt + reo_wnd <= now`) is marked lost on `q`,
    /// including retransmissions (which then leave the pipe, RFC 6675 §4
    /// `SetPipe`, until sent again). Segments already marked lost and not
    /// retransmitted since are skipped (RFC 8985 sets their xmit_ts to
    /// infinity).
    ///
    /// Cost: a walk in sequence order from SND.UNA that stops at the first
    /// never-retransmitted segment sent after the RACK segment (every later
    /// one was sent later still).
    pub(crate) fn detect_loss(
        &self,
        q: &mut RtxQueue,
        now: Instant,
        reo_wnd: Duration,
    ) -> Detection {
        let mut d = Detection::default();
        let Some(rack_ts) = self.xmit_ts else {
            return d;
        };
        for i in 0..q.len() {
            let Some(&s) = q.get(i) else { break };
            if s.sacked || (s.lost && !s.retrans) {
                continue;
            }
            if !sent_after(rack_ts, self.end_seq, s.last_sent, s.end()) {
                if s.times_sent == 1 {
                    break;
                }
                continue;
            }
            let deadline = s.last_sent + self.rtt + reo_wnd;
            if deadline <= now {
                q.mark_lost_again(i);
                d.newly_lost += s.seq_len();
                d.first_lost.get_or_insert(s.seq);
                if s.times_sent > 1 {
                    d.lost_retransmissions += 1;
                    d.latest_lost_retransmission = Some(
                        d.latest_lost_retransmission
                            .map_or(s.last_sent, |t| t.max(s.last_sent)),
                    );
                }
            } else {
                d.timer = Some(d.timer.map_or(deadline, |t| t.max(deadline)));
            }
        }
        d
    }

    /// RACK_mark_losses_on_RTO (RFC 8985 §6.3): when the RTO fires, the
    /// first outstanding segment is lost, and every other one not delivered
    /// whose time is up (`xmit_ts + RACK.rtt + reo_wnd <= now`); segments
    /// sent more recently (for instance a loss probe) may still arrive.
    /// Every retransmission marked lost leaves the pipe. Returns the bytes
    /// newly marked.
    pub(crate) fn mark_losses_on_rto(
        &self,
        q: &mut RtxQueue,
        now: Instant,
        reo_wnd: Duration,
    ) -> usize {
        let mut newly = 0;
        for i in 0..q.len() {
            let Some(&s) = q.get(i) else { break };
            if s.sacked {
                continue;
            }
            let due = i == 0 || s.last_sent + self.rtt + reo_wnd <= now;
            // Not already waiting for its retransmission.
            let in_flight = !s.lost || s.retrans;
            if due && in_flight {
                q.mark_lost_again(i);
                newly += s.seq_len();
            }
        }
        newly
    }

    /// RFC 8985 §7.2: the probe timeout. `2 * SRTT` (at least `PTO_MIN`),
    /// plus the worst-case delayed-ACK time when a single segment is in
    /// flight; one second before any RTT sample.
    pub(crate) fn pto(srtt: Option<Duration>, one_segment_in_flight: bool) -> Duration {
        match srtt {
            Some(s) => {
                let p = s.saturating_mul(2).max(PTO_MIN);
                if one_segment_in_flight {
                    p.saturating_add(WC_DEL_ACK)
                } else {
                    p
                }
            }
            None => PTO_NO_RTT,
        }
    }

    /// Forget the loss probe (recovery or RTO took over).
    pub(crate) fn clear_tlp(&mut self) {
        self.tlp_end = None;
        self.tlp_retrans = None;
        self.tlp_new_from = None;
    }
}

/// Proportional Rate Reduction (RFC 6937 §3.1) for one SACK recovery.
///
/// During recovery PRR replaces cwnd as the sending allowance: while the
/// pipe is above ssthresh the sender transmits `ssthresh / RecoverFS` bytes
/// per byte delivered, spreading the window reduction over one round trip
/// instead of going silent and then bursting (RFC 6675 sends nothing until
/// pipe < cwnd, then everything at once); once pipe falls below ssthresh,
/// the slow-start reduction bound (PRR-SSRB) lets it grow back by at most
/// one SMSS more than was delivered per ACK. At the end of recovery the
/// flight is about ssthresh, so leaving with cwnd = ssthresh sends no burst.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Prr {
    /// PRR governs the sending allowance.
    pub active: bool,
    /// RecoverFS: FlightSize at the start of recovery.
    recover_fs: usize,
    /// ssthresh set by the congestion controller at the start.
    ssthresh: usize,
    /// prr_delivered: bytes delivered to the receiver since the start.
    delivered: usize,
    /// prr_out: bytes sent (new and retransmitted) since the start.
    out: usize,
    /// sndcnt: bytes that may still be sent on the latest ACK.
    pub sndcnt: usize,
    /// When the latest window reduction of this recovery happened (a lost
    /// retransmission sent after it is a new congestion signal).
    pub reduced_at: Option<Instant>,
}

impl Prr {
    /// Recovery starts (RFC 6937 §3.1 "at the beginning of recovery"):
    /// `prr_delivered = prr_out = 0`, RecoverFS = FlightSize. `min_send`
    /// bytes may go at once (the fast retransmit, which RFC 6937 §3 sends
    /// on entering recovery whatever the allowance).
    pub(crate) fn start(
        &mut self,
        now: Instant,
        recover_fs: usize,
        ssthresh: usize,
        min_send: usize,
    ) {
        *self = Prr {
            active: true,
            recover_fs: recover_fs.max(1),
            ssthresh,
            delivered: 0,
            out: 0,
            sndcnt: min_send,
            reduced_at: Some(now),
        };
    }

    /// One ACK during recovery (RFC 6937 §3.1 "on every ACK"):
    /// `delivered` is DeliveredData (change in SND.UNA plus change in
    /// SACKed bytes), `pipe` the RFC 6675 pipe after the ACK, `smss` one
    /// segment. PRR-SSRB is the reduction bound.
    pub(crate) fn on_ack(&mut self, delivered: usize, pipe: usize, smss: usize) {
        if delivered == 0 {
            // Nothing left the network: the allowance stands (as Linux's
            // tcp_cwnd_reduction; otherwise every window update or
            // duplicate ACK would add one SMSS through PRR-SSRB).
            return;
        }
        self.delivered = self.delivered.saturating_add(delivered);
        let cnt = if pipe > self.ssthresh {
            // Proportional part: CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out.
            let target =
                (self.delivered as u128 * self.ssthresh as u128).div_ceil(self.recover_fs as u128);
            usize::try_from(target)
                .unwrap_or(usize::MAX)
                .saturating_sub(self.out)
        } else {
            // PRR-SSRB: MIN(ssthresh - pipe, MAX(prr_delivered - prr_out, DeliveredData) + MSS).
            let limit = self.delivered.saturating_sub(self.out).max(delivered) + smss;
            (self.ssthresh - pipe).min(limit)
        };
        self.sndcnt = cnt;
    }

    /// `len` bytes were sent during recovery (`prr_out += DATA_SENT`).
    pub(crate) fn on_sent(&mut self, len: usize) {
        self.out = self.out.saturating_add(len);
        self.sndcnt = self.sndcnt.saturating_sub(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn s(n: u32) -> SeqNumber {
        SeqNumber(n)
    }

    /// Ten 100-byte segments at 1000.., sent 1 ms apart from t = 0.
    fn queue() -> RtxQueue {
        let mut q = RtxQueue::new();
        for i in 0..10u32 {
            q.push(s(1000 + 100 * i), 100, false, t(u64::from(i)));
        }
        q
    }

    fn ack_at(ms: u64) -> AckInfo {
        AckInfo {
            now: t(ms),
            tsecr: None,
            ts_offset: 0,
            min_rtt: Some(Duration::from_millis(20)),
        }
    }

    #[test]
    fn sent_after_orders_by_time_then_sequence() {
        assert!(sent_after(t(2), s(0), t(1), s(100)));
        assert!(!sent_after(t(1), s(100), t(2), s(0)));
        assert!(sent_after(t(1), s(200), t(1), s(100)));
        assert!(!sent_after(t(1), s(100), t(1), s(100)));
    }

    #[test]
    fn rack_follows_the_most_recently_sent_delivered_segment() {
        let mut q = queue();
        let mut r = Rack::default();
        let a = ack_at(30);
        // One ACK SACKs segments 5 and 3: RACK follows segment 5 (sent at 5 ms).
        q.sack_with(s(1500), s(1600), |x| r.on_delivered(&a, x));
        q.sack_with(s(1300), s(1400), |x| r.on_delivered(&a, x));
        r.commit();
        assert_eq!(
            (r.xmit_ts, r.end_seq, r.rtt),
            (Some(t(5)), s(1600), Duration::from_millis(25))
        );
        // A later ACK delivers only segment 2 (sent at 2 ms): RACK.rtt is
        // its RTT, RACK.xmit_ts stays; below FACK, it is reordering.
        q.sack_with(s(1200), s(1300), |x| r.on_delivered(&ack_at(32), x));
        r.commit();
        assert_eq!((r.xmit_ts, r.end_seq), (Some(t(5)), s(1600)));
        assert_eq!(r.rtt, Duration::from_millis(30));
        assert!(r.reordering_seen);
    }

    #[test]
    fn detect_loss_marks_by_time_and_arms_the_timer() {
        let mut q = queue();
        let mut r = Rack::default();
        // At 26 ms segment 6 (sent at 6 ms) is SACKed: RACK.rtt = 20 ms.
        let a = ack_at(26);
        q.sack_with(s(1600), s(1700), |x| r.on_delivered(&a, x));
        r.commit();
        // With a 5 ms window: segments sent at or before 1 ms are lost
        // (0 + 20 + 5 <= 26, 1 + 20 + 5 <= 26); 2..=5 ms still may arrive.
        let d = r.detect_loss(&mut q, t(26), Duration::from_millis(5));
        assert_eq!(d.newly_lost, 200);
        assert_eq!(d.first_lost, Some(s(1000)));
        // The latest pending deadline: segment 5, 5 + 20 + 5 = 30 ms.
        assert_eq!(d.timer, Some(t(30)));
        assert_eq!(q.lost_bytes(), 200);
        // Running again later finds the rest; already-lost ones are skipped.
        let d = r.detect_loss(&mut q, t(30), Duration::from_millis(5));
        assert_eq!(
            (d.newly_lost, d.first_lost, d.timer),
            (400, Some(s(1200)), None)
        );
        // Segments sent after the RACK segment are never lost by RACK.
        assert!(!q.get(7).unwrap().lost);
    }

    #[test]
    fn lost_retransmission_is_detected() {
        let mut q = queue();
        let mut r = Rack::default();
        // Segment 0 lost and retransmitted at 30 ms.
        q.mark_lost_again(0);
        q.on_retransmit(0, t(30));
        assert_eq!(q.pipe(1000), 1000);
        // Segment 9 (sent at 9 ms) is SACKed at 29: nothing to say about
        // the retransmission sent after it.
        let a = ack_at(29);
        q.sack_with(s(1900), s(2000), |x| r.on_delivered(&a, x));
        r.commit();
        let d = r.detect_loss(&mut q, t(29), Duration::ZERO);
        assert_eq!(d.lost_retransmissions, 0);
        // New data sent at 31 ms is SACKed at 51: the retransmission sent
        // at 30 ms before it is lost once 30 + 20 <= now.
        q.push(s(2000), 100, false, t(31));
        let a = ack_at(51);
        q.sack_with(s(2000), s(2100), |x| r.on_delivered(&a, x));
        r.commit();
        let d = r.detect_loss(&mut q, t(51), Duration::ZERO);
        assert_eq!(d.lost_retransmissions, 1);
        assert_eq!(d.latest_lost_retransmission, Some(t(30)));
        assert_eq!(d.first_lost, Some(s(1000)));
        // It left the pipe and waits to be sent again.
        let f = q.get(0).unwrap();
        assert!(f.lost && !f.retrans);
    }

    #[test]
    fn retransmission_acked_for_its_original_is_not_an_rtt_sample() {
        let mut q = queue();
        let mut r = Rack::default();
        q.on_retransmit(0, t(25));
        // ACK at 27: 2 ms after the retransmission is below min_RTT (20 ms):
        // the original was delivered; RACK learns nothing from it.
        let a = ack_at(27);
        q.ack_to_with(s(1100), |x| r.on_delivered(&a, x));
        r.commit();
        assert_eq!(r.xmit_ts, None);
        // With timestamps: an echo older than the retransmission, likewise.
        let mut q = queue();
        q.on_retransmit(0, t(50));
        let a = AckInfo {
            now: t(80),
            tsecr: Some(10),
            ts_offset: 0,
            min_rtt: Some(Duration::from_millis(20)),
        };
        q.ack_to_with(s(1100), |x| r.on_delivered(&a, x));
        r.commit();
        assert_eq!(r.xmit_ts, None);
    }

    #[test]
    fn reordering_window_rules() {
        let mut r = Rack::default();
        let m = Some(Duration::from_millis(40));
        let srtt = Some(Duration::from_millis(50));
        assert_eq!(r.reo_wnd(false, 1, 3, m, srtt), Duration::from_millis(10));
        assert_eq!(r.reo_wnd(true, 1, 3, m, srtt), Duration::ZERO);
        assert_eq!(r.reo_wnd(false, 3, 3, m, srtt), Duration::ZERO);
        r.reordering_seen = true;
        assert_eq!(r.reo_wnd(true, 5, 3, m, srtt), Duration::from_millis(10));
        // D-SACK widens it once per round, capped by SRTT; it decays after
        // 16 recoveries.
        r.on_dsack(s(0), s(1000));
        r.on_dsack(s(10), s(2000));
        assert_eq!(r.reo_wnd(false, 0, 3, m, srtt), Duration::from_millis(20));
        r.on_dsack(s(1000), s(3000));
        r.on_dsack(s(3000), s(4000));
        assert_eq!(r.reo_wnd(false, 0, 3, m, srtt), Duration::from_millis(40));
        r.on_dsack(s(4000), s(5000));
        assert_eq!(r.reo_wnd(false, 0, 3, m, srtt), Duration::from_millis(50));
        for _ in 0..15 {
            r.on_recovery_end();
        }
        assert_eq!(r.reo_wnd(false, 0, 3, m, srtt), Duration::from_millis(50));
        r.on_recovery_end();
        assert_eq!(r.reo_wnd(false, 0, 3, m, srtt), Duration::from_millis(10));
    }

    #[test]
    fn rto_marks_only_segments_whose_time_is_up() {
        let mut q = queue();
        let mut r = Rack::default();
        let a = ack_at(25);
        q.sack_with(s(1500), s(1600), |x| r.on_delivered(&a, x));
        r.commit();
        // RACK.rtt = 20 ms; at 27 ms segments sent at <= 7 ms are due,
        // the first one always.
        let n = r.mark_losses_on_rto(&mut q, t(27), Duration::ZERO);
        assert_eq!(n, 700);
        assert!(q.get(7).unwrap().lost);
        assert!(!q.get(8).unwrap().lost);
    }

    #[test]
    fn pto_values() {
        let srtt = Some(Duration::from_millis(30));
        assert_eq!(Rack::pto(srtt, false), Duration::from_millis(60));
        assert_eq!(Rack::pto(srtt, true), Duration::from_millis(260));
        assert_eq!(Rack::pto(None, false), PTO_NO_RTT);
        // Fuzz regression (engine_segments): a zero SRTT (all samples in
        // zero time) must not give a zero PTO, which would fire at once,
        // forever.
        assert_eq!(Rack::pto(Some(Duration::ZERO), false), PTO_MIN);
        assert_eq!(
            Rack::pto(Some(Duration::from_micros(100)), true),
            PTO_MIN + WC_DEL_ACK
        );
    }

    #[test]
    fn prr_spreads_the_reduction_then_bounds_the_catch_up() {
        let mut p = Prr::default();
        // 100 segments of 1000 bytes in flight, ssthresh 70 segments.
        p.start(t(0), 100_000, 70_000, 1000);
        assert_eq!(p.sndcnt, 1000);
        p.on_sent(1000);
        // Pipe above ssthresh: 7 bytes out per 10 delivered.
        let mut sent = 1000;
        for _ in 0..10 {
            p.on_ack(1000, 90_000, 1000);
            sent += p.sndcnt;
            p.on_sent(p.sndcnt);
        }
        assert_eq!(sent, 7000);
        // Pipe below ssthresh (heavy loss): catch up on what was delivered
        // and not sent (12000 - 7000), plus 1 SMSS.
        p.on_ack(2000, 30_000, 1000);
        assert_eq!(p.sndcnt, 6000);
        p.on_sent(6000);
        p.on_ack(2000, 36_000, 1000);
        assert_eq!(p.sndcnt, 3000);
        // An ACK that delivered nothing changes nothing.
        p.on_ack(0, 30_000, 1000);
        assert_eq!(p.sndcnt, 3000);
        p.on_sent(3000);
        // Never more than ssthresh - pipe.
        p.on_ack(50_000, 69_500, 1000);
        assert_eq!(p.sndcnt, 500);
    }
}
