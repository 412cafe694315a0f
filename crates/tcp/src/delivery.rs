//! Delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation-02,
//! as used by draft-ietf-ccwg-bbr-01 §4.5.2 and Linux `tcp_rate.c`).
//!
//! Every data segment is stamped when it is (re)transmitted with the
//! connection's delivery state ([`TxState`]); when an ACK delivers segments
//! (cumulatively or by SACK) the most recently sent of them yields a
//! [`RateSample`]: bytes delivered between its send and now, over the
//! longer of the send interval and the ACK interval. Segments sent while
//! the sender had nothing more to send are marked application-limited, so
//! a controller can tell that the rate is a lower bound.
//!
//! Sizes are bytes; a retransmission is stamped anew (it is a new packet
//! for this purpose, draft §3.2).

use crate::cc::RateSample;
use crate::sack::Sent;
use crate::time::Instant;
use std::time::Duration;

/// The connection's delivery state copied into a segment when it is sent
/// (draft §3.2 `P.delivered`, `P.delivered_time`, `P.first_send_time`,
/// `P.is_app_limited`, plus BBRv3's `P.tx_in_flight` and `P.lost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TxState {
    pub delivered: u64,
    pub delivered_time: Instant,
    pub first_send_time: Instant,
    pub is_app_limited: bool,
    pub tx_in_flight: u64,
    pub lost: u64,
}

/// The most recently sent segment an ACK delivered, with its stamp.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    tx: TxState,
    sent: Instant,
    end: hollywood_wire::SeqNumber,
    rtt: Option<Duration>,
}

/// Per-connection delivery-rate estimator (draft §3.1 `C.*` variables).
#[derive(Debug, Clone, Default)]
pub(crate) struct RateEstimator {
    /// `C.delivered`: bytes delivered so far.
    delivered: u64,
    /// `C.delivered_time`: when `delivered` last grew.
    delivered_time: Instant,
    /// `C.first_send_time`: send time of the packet that started the
    /// current sampling interval.
    first_send_time: Instant,
    /// `C.app_limited`: `delivered + inflight` when the sender last ran
    /// out of data (0 = not application-limited).
    app_limited: u64,
    /// `C.lost`: bytes marked lost so far.
    lost: u64,
    /// The ACK being processed.
    candidate: Option<Candidate>,
    newly_acked: u64,
    newly_lost: u64,
}

impl RateEstimator {
    /// `C.delivered`.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// `C.lost`.
    pub(crate) fn lost(&self) -> u64 {
        self.lost
    }

    /// The sender is application-limited now.
    pub(crate) fn is_app_limited(&self) -> bool {
        self.app_limited != 0
    }

    /// A data segment of `len` bytes is sent at `now` with `inflight_before`
    /// bytes in flight (draft §3.2 `OnPacketSent`): its stamp.
    pub(crate) fn on_send(&mut self, now: Instant, inflight_before: u64, len: u64) -> TxState {
        if inflight_before == 0 {
            self.first_send_time = now;
            self.delivered_time = now;
        }
        TxState {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_send_time: self.first_send_time,
            is_app_limited: self.app_limited != 0,
            tx_in_flight: inflight_before + len,
            lost: self.lost,
        }
    }

    /// The sender has nothing more to send while `inflight` bytes are out
    /// and the window would allow more (draft §3.4 `CheckIfApplicationLimited`).
    pub(crate) fn on_app_limited(&mut self, inflight: u64) {
        self.app_limited = (self.delivered + inflight).max(1);
    }

    /// Segment `s` was newly delivered by the ACK arriving at `now` (draft
    /// §3.3 `UpdateRateSample`).
    pub(crate) fn on_delivered(&mut self, now: Instant, s: &Sent) {
        let len = s.seq_len() as u64;
        self.delivered += len;
        self.delivered_time = now;
        self.newly_acked += len;
        let newer = self
            .candidate
            .is_none_or(|c| s.last_sent > c.sent || (s.last_sent == c.sent && s.end() > c.end));
        if newer {
            let rtt = (s.times_sent == 1).then(|| now.saturating_duration_since(s.last_sent));
            self.candidate = Some(Candidate {
                tx: s.tx,
                sent: s.last_sent,
                end: s.end(),
                rtt,
            });
            // Draft §3.3: the next interval starts at this packet's send.
            self.first_send_time = s.last_sent;
        }
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
    }

    /// A segment of `len` bytes was newly marked lost.
    pub(crate) fn on_lost(&mut self, len: u64) {
        self.lost += len;
        self.newly_lost += len;
    }

    /// End of one ACK: the rate sample, if the ACK delivered data (with a
    /// zero interval when it is shorter than `min_rtt`, too short to be a
    /// bandwidth sample, draft §3.3 `GenerateRateSample`). Returns it with
    /// the bytes the ACK delivered and marked lost.
    pub(crate) fn finish_ack(
        &mut self,
        min_rtt: Option<Duration>,
    ) -> (Option<RateSample>, u64, u64) {
        let acked = std::mem::take(&mut self.newly_acked);
        let lost = std::mem::take(&mut self.newly_lost);
        let Some(c) = self.candidate.take() else {
            return (None, acked, lost);
        };
        let send_elapsed = c.sent.saturating_duration_since(c.tx.first_send_time);
        let ack_elapsed = self
            .delivered_time
            .saturating_duration_since(c.tx.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - c.tx.delivered;
        // Too short an interval gives no bandwidth sample; the rest of the
        // sample (round counting, loss) is still meaningful, so it is
        // returned with a zero interval (a zero delivery rate).
        let usable = !interval.is_zero() && min_rtt.is_none_or(|m| interval >= m);
        let rs = RateSample {
            delivered,
            interval: if usable { interval } else { Duration::ZERO },
            prior_delivered: c.tx.delivered,
            is_app_limited: c.tx.is_app_limited,
            tx_in_flight: c.tx.tx_in_flight,
            lost: self.lost - c.tx.lost,
            newly_acked: acked,
            newly_lost: lost,
            rtt: c.rtt,
        };
        (Some(rs), acked, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_wire::SeqNumber;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn sent(seq: u32, len: u32, t: Instant, tx: TxState) -> Sent {
        Sent {
            seq: SeqNumber(seq),
            len,
            fin: false,
            first_sent: t,
            last_sent: t,
            times_sent: 1,
            sacked: false,
            lost: false,
            retrans: false,
            tx,
        }
    }

    #[test]
    fn a_paced_flight_measures_its_sending_rate() {
        // Ten 1000-byte segments 1 ms apart (1 MB/s), RTT 50 ms: each ACK
        // delivers one; the sample covers what was delivered since the
        // delivered segment was sent.
        let mut r = RateEstimator::default();
        let mut segs = Vec::new();
        for i in 0..10u64 {
            let tx = r.on_send(at(i), i * 1000, 1000);
            segs.push(sent(i as u32 * 1000, 1000, at(i), tx));
        }
        let mut last = None;
        for (i, s) in segs.iter().enumerate() {
            r.on_delivered(at(50 + i as u64), s);
            let (rs, acked, lost) = r.finish_ack(Some(Duration::from_millis(1)));
            assert_eq!((acked, lost), (1000, 0));
            if let Some(rs) = rs {
                last = Some(rs);
            }
        }
        let rs = last.expect("samples");
        // The last sample: segment 9 sent at 9 ms, stamped with 0 bytes
        // delivered at 0 ms (the flight started from idle); 10 000 bytes
        // delivered over max(9 ms send, 59 ms ack) = 59 ms.
        assert_eq!(rs.delivered, 10_000);
        assert_eq!(rs.interval, Duration::from_millis(59));
        assert_eq!(rs.tx_in_flight, 10_000);
        assert_eq!(rs.rtt, Some(Duration::from_millis(50)));
        assert!(!rs.is_app_limited);
    }

    #[test]
    fn samples_shorter_than_min_rtt_are_dropped_and_app_limit_clears() {
        let mut r = RateEstimator::default();
        r.on_app_limited(0);
        assert!(r.is_app_limited());
        let tx = r.on_send(at(0), 0, 1000);
        assert!(tx.is_app_limited);
        let s = sent(0, 1000, at(0), tx);
        r.on_delivered(at(10), &s);
        let (rs, _, _) = r.finish_ack(Some(Duration::from_millis(20)));
        let rs = rs.expect("a sample, without a bandwidth");
        assert_eq!(
            rs.interval,
            Duration::ZERO,
            "10 ms interval < 20 ms min RTT"
        );
        assert_eq!(rs.delivery_rate(), 0.0);
        assert!(rs.is_app_limited);
        assert!(!r.is_app_limited(), "delivered beyond the app-limited mark");
        r.on_lost(500);
        assert_eq!(r.lost(), 500);
        assert_eq!(r.delivered(), 1000);
    }
}
