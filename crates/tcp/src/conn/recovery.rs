//! Acknowledgment processing, RTT measurement and loss recovery:
//! RFC 6298 (RTO), RFC 7323 §4 (RTTM), RFC 5681 (fast retransmit / fast
//! recovery), RFC 6582 (NewReno), RFC 6675 (SACK-based recovery), RFC 3042
//! (limited transmit), RFC 2883 / RFC 3708 (D-SACK, spurious retransmission
//! detection). Congestion-window arithmetic itself belongs to the
//! [`CongestionControl`](crate::CongestionControl) in use.

use super::{Connection, Episode, Event, Recovery, RetxRecord, RETX_RECORDS};
use crate::sack::Acked;
use crate::time::Instant;
use crate::timer::Timer;
use crate::Error;
use hollywood_wire::{SackBlock, TcpRepr};

impl Connection {
    /// RFC 9293 §3.10.7.4 fifth check for an acceptable ACK
    /// (SND.UNA - MAX.SND.WND =< SEG.ACK =< SND.NXT), in a synchronized state.
    pub(super) fn on_ack(&mut self, now: Instant, seg: &TcpRepr, payload_len: usize) {
        let ack = seg.ack;
        self.heard_since_rto = true;
        // RFC 9293 §3.8.6.1: the peer answers, so probing may go on.
        self.persist_probes = 0;
        let prior_flight = self.flight_size();
        let old_wnd = self.snd_wnd;

        // Window update: if SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and
        // SND.WL2 =< SEG.ACK), set SND.WND = SEG.WND (scaled, RFC 7323 §2.3).
        let wnd = (seg.window as usize) << self.neg.snd_wscale;
        if self.snd_wl1 < seg.seq || (self.snd_wl1 == seg.seq && self.snd_wl2 <= ack) {
            self.snd_wnd = wnd;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            self.max_snd_wnd = self.max_snd_wnd.max(wnd);
            if wnd > 0 {
                self.persist_backoff = 0;
            }
        }

        // The window reopened while a probe octet is outstanding: the
        // receiver most likely dropped it, so resend it now rather than
        // let it look like a loss (RFC 9293 §3.8.6.1).
        if self.snd_wnd > 0 {
            if let Some(s) = self.probe_seq.take() {
                if s >= self.snd_una.max(ack) {
                    self.pending_rtx = Some(s);
                }
            }
        }

        // SND.UNA < SEG.ACK =< SND.NXT: new data acknowledged.
        let acked = if ack > self.snd_una {
            ack - self.snd_una
        } else {
            0
        };
        if acked > 0 {
            self.advance_una(now, seg, acked);
        }
        // SACK information (RFC 6675 §4 Update()).
        let sacked = if self.neg.sack && seg.options.sack_len > 0 {
            self.process_sacks(now, seg)
        } else {
            0
        };

        // Duplicate ACK: RFC 5681 §2 (a)-(e); with SACK, RFC 6675 §2: an
        // ACK that leaves SND.UNA and carries new SACK information.
        let is_dup = acked == 0
            && prior_flight > 0
            && if self.neg.sack {
                sacked > 0
            } else {
                payload_len == 0 && !seg.flags.syn() && !seg.flags.fin() && wnd == old_wnd
            };
        if is_dup {
            self.stats.dup_acks_received += 1;
        }
        self.update_recovery(now, acked, is_dup, prior_flight);
    }

    /// SND.UNA moves to `seg.ack`.
    fn advance_una(&mut self, now: Instant, seg: &TcpRepr, acked: usize) {
        let ack = seg.ack;
        let a = self.rtxq.ack_to(ack);
        self.snd_buf.ack_to(ack);
        self.snd_una = ack;
        self.stats.bytes_acked += acked as u64;
        self.take_rtt_sample(now, seg, &a);
        if self.recovery == Recovery::Open && self.recover < self.snd_una - 1 {
            // Keep `recover` just below SND.UNA while no loss is repaired so
            // that the serial comparison `SND.UNA > recover` stays meaningful
            // across sequence-number wrap (RFC 6582 §3.2 step 2).
            self.recover = self.snd_una - 1;
        }
        // Karn/RFC 6298 §5.7 as Linux does it: new data acknowledged ends
        // the backoff, and the consecutive-RTO count.
        self.rtt.reset_backoff();
        self.rto_count = 0;
        if self.pending_rtx.is_some_and(|s| s < ack) {
            self.pending_rtx = None;
        }
        // RFC 6298 §5.2 / §5.3: stop the timer when everything is
        // acknowledged, else restart it.
        if self.flight_size() == 0 {
            self.timers.stop(Timer::Retransmit);
        } else {
            self.timers.set(Timer::Retransmit, now + self.rtt.rto());
        }
        if self.writable_wanted && self.snd_buf.free() > 0 && !self.fin_queued {
            self.writable_wanted = false;
            self.push_event(Event::Writable);
        }
    }

    /// One RTT measurement per ACK that advances SND.UNA with timestamps
    /// (RFC 7323 §4: RTTM; the send time of a never-retransmitted segment
    /// when one is newly acknowledged, else the TSecr echo, which also
    /// disambiguates retransmissions); without timestamps, one timed segment
    /// per RTT and never a retransmitted one (RFC 6298 §3, Karn).
    fn take_rtt_sample(&mut self, now: Instant, seg: &TcpRepr, a: &Acked) {
        let sample = if self.neg.timestamps {
            a.rtt_sent
                .map(|t| now.saturating_duration_since(t))
                .or_else(|| self.ts_rtt(now, seg))
        } else {
            match self.timed {
                Some((end, t)) if seg.ack >= end => {
                    self.timed = None;
                    Some(now.saturating_duration_since(t))
                }
                _ => None,
            }
        };
        if let Some(s) = sample {
            self.rtt.on_sample(s);
            self.stats.rtt_samples += 1;
            // HyStart++ (RFC 9406) in the congestion controller.
            self.cc.on_rtt_sample(now, s, self.snd_una, self.snd_nxt);
        }
    }

    /// Apply the SACK option; returns sequence-space bytes newly SACKed.
    fn process_sacks(&mut self, now: Instant, seg: &TcpRepr) -> usize {
        let blocks = seg.options.sacks();
        let mut newly = 0;
        for (k, b) in blocks.iter().enumerate() {
            // RFC 2883 §4: the first block is a D-SACK if it lies below the
            // cumulative ACK or inside the second block.
            if k == 0 {
                let inside_second = blocks
                    .get(1)
                    .is_some_and(|s| s.left <= b.left && b.right <= s.right);
                if b.left < seg.ack || inside_second {
                    self.on_dsack(now, *b);
                    continue;
                }
            }
            // RFC 2018 §3: a block must lie within [SND.UNA, SND.NXT];
            // anything else is bogus and ignored.
            if b.left >= b.right || b.right > self.snd_nxt || b.right <= self.snd_una {
                continue;
            }
            newly += self.rtxq.sack(b.left.max(self.snd_una), b.right);
        }
        if newly > 0 {
            // RFC 6675 §4 IsLost via the scoreboard.
            self.rtxq
                .update_lost(self.config.dupack_threshold.max(1), self.neg.smss);
        }
        newly
    }

    /// A D-SACK arrived (RFC 2883): if it reports one of our
    /// retransmissions, that retransmission was spurious (RFC 3708 §3);
    /// once every retransmission of the latest episode is reported, undo
    /// its congestion response.
    fn on_dsack(&mut self, now: Instant, b: SackBlock) {
        self.stats.dsacks_received += 1;
        let Some(pos) = self
            .retx_records
            .iter()
            .position(|r| r.seq <= b.left && b.right <= r.end)
        else {
            return;
        };
        let Some(r) = self.retx_records.remove(pos) else {
            return;
        };
        self.stats.spurious_retransmissions += 1;
        let ep = &mut self.episode;
        if r.episode == ep.id {
            ep.dsacked += 1;
            if ep.dsacked >= ep.retransmissions && !ep.undone {
                ep.undone = true;
                self.cc.on_spurious_congestion(now);
                self.stats.spurious_recoveries += 1;
            }
        }
    }

    /// Start a new loss-recovery episode (for D-SACK undo).
    fn new_episode(&mut self) {
        self.episode = Episode {
            id: self.episode.id.wrapping_add(1),
            ..Episode::default()
        };
    }

    /// Remember a retransmission for D-SACK matching.
    pub(super) fn record_retransmission(
        &mut self,
        seq: hollywood_wire::SeqNumber,
        end: hollywood_wire::SeqNumber,
    ) {
        if self.retx_records.len() >= RETX_RECORDS {
            self.retx_records.pop_front();
        }
        self.retx_records.push_back(RetxRecord {
            seq,
            end,
            episode: self.episode.id,
        });
        self.episode.retransmissions += 1;
    }

    /// Loss detection and recovery state changes after an ACK.
    fn update_recovery(&mut self, now: Instant, acked: usize, is_dup: bool, prior_flight: usize) {
        let smss = self.neg.smss;
        let thresh = self.config.dupack_threshold.max(1);
        match self.recovery {
            Recovery::Open | Recovery::Loss { .. } => {
                if acked > 0 {
                    self.dupacks = 0;
                    if matches!(self.recovery, Recovery::Loss { .. })
                        && self.snd_una >= self.recover
                    {
                        // RFC 6675 §5.1: the post-RTO repair reached the
                        // recovery point.
                        self.recovery = Recovery::Open;
                    }
                    // RFC 5681 §3.1 slow start / congestion avoidance.
                    let rtt = self.rtt.srtt().unwrap_or(self.config.initial_rto);
                    self.cc.on_ack(now, acked, prior_flight, rtt);
                }
                if is_dup {
                    self.dupacks += 1;
                    // RFC 6582 §3.2 step 2 / RFC 6675 §5.1: no new recovery
                    // until the cumulative ACK covers more than `recover`.
                    let may_enter = self.snd_una > self.recover;
                    // RFC 5681 §3.2 step 2 (DupThresh duplicate ACKs); with
                    // SACK also RFC 6675 §5 step (2): IsLost(HighACK + 1).
                    let lost = self.dupacks >= thresh || (self.neg.sack && self.rtxq.front_lost());
                    if may_enter && lost {
                        self.enter_recovery(now);
                    }
                    // Otherwise RFC 3042 limited transmit may send new data
                    // (see `cwnd_limit`).
                }
            }
            Recovery::Sack { .. } => {
                if acked > 0 && self.snd_una >= self.recover {
                    // RFC 6675 §5: HighACK >= RecoveryPoint ends recovery.
                    self.exit_recovery(now);
                }
                // RFC 6675 §5 (A)-(C): the scoreboard is updated; NextSeg
                // runs in `poll_transmit`.
            }
            Recovery::NewReno { inflation } => {
                if acked > 0 {
                    if self.snd_una >= self.recover {
                        // RFC 6582 §3.2 step 3: full acknowledgment.
                        self.exit_recovery(now);
                    } else {
                        // RFC 6582 §3.2 step 3 partial ACK: retransmit the
                        // first unacknowledged segment, deflate by the
                        // amount acknowledged, add back one SMSS if at least
                        // SMSS was acknowledged. The RTO restarts on every
                        // partial ACK (RFC 6582 §4 "Slow-but-Steady").
                        self.stats.partial_acks += 1;
                        self.pending_rtx = Some(self.snd_una);
                        let back = if acked >= smss { smss as i64 } else { 0 };
                        self.recovery = Recovery::NewReno {
                            inflation: inflation - acked as i64 + back,
                        };
                    }
                } else if is_dup {
                    // RFC 6582 §3.2 step 4 / RFC 5681 §3.2 step 4: each
                    // further duplicate ACK inflates the window by SMSS.
                    self.recovery = Recovery::NewReno {
                        inflation: inflation + smss as i64,
                    };
                }
            }
        }
    }

    /// Fast retransmit and enter loss recovery (RFC 5681 §3.2 step 2,
    /// RFC 6582 §3.2 step 2, RFC 6675 §5 step 4).
    fn enter_recovery(&mut self, now: Instant) {
        // recover / RecoveryPoint = HighData.
        self.recover = self.snd_nxt;
        let flight = self.flight_size();
        self.cc.on_congestion_event(now, flight);
        self.stats.fast_retransmits += 1;
        self.new_episode();
        if self.neg.sack {
            self.stats.sack_recoveries += 1;
            self.recovery = Recovery::Sack {
                high_rxt: self.snd_una,
            };
            // (4.3): the first segment is deemed lost and resent at once.
            self.rtxq.mark_lost(0);
        } else {
            self.stats.newreno_recoveries += 1;
            // RFC 5681 §3.2 step 3: cwnd = ssthresh + 3*SMSS.
            let inflation = self.config.dupack_threshold as i64 * self.neg.smss as i64;
            self.recovery = Recovery::NewReno { inflation };
        }
        self.pending_rtx = Some(self.snd_una);
    }

    fn exit_recovery(&mut self, now: Instant) {
        self.recovery = Recovery::Open;
        self.dupacks = 0;
        self.cc.on_recovery_end(now, self.flight_size());
    }

    /// RFC 6675 §4 SetPipe (from the scoreboard counters); during NewReno
    /// recovery the RFC 6582 inflated-window equivalent FlightSize - inflation.
    pub(super) fn pipe(&self) -> usize {
        let out = self.flight_size();
        match self.recovery {
            Recovery::NewReno { inflation } => (out as i64 - inflation).max(0) as usize,
            _ => self.rtxq.pipe(out),
        }
    }

    /// Congestion window the sender may fill, with RFC 3042 limited
    /// transmit: on the first DupThresh-1 duplicate ACKs, cwnd + dupacks*SMSS.
    pub(super) fn cwnd_limit(&self) -> usize {
        let cwnd = self.cc.cwnd();
        if self.config.limited_transmit
            && self.recovery == Recovery::Open
            && self.dupacks > 0
            && self.dupacks < self.config.dupack_threshold
        {
            cwnd + self.dupacks as usize * self.neg.smss
        } else {
            cwnd
        }
    }

    /// The retransmission timer expired on data (RFC 6298 §5.4 - §5.7).
    pub(super) fn on_rto(&mut self, now: Instant) {
        if self.rtxq.is_empty() {
            return;
        }
        // RFC 9293 §3.8.3 R2 (Linux tcp_retries2): give up after
        // `max_retransmissions` consecutive timeouts. A closed peer window
        // with the peer still answering is not a failure (§3.8.6.1).
        let peer_alive_zero_window = self.snd_wnd == 0 && self.heard_since_rto;
        if !peer_alive_zero_window {
            if self.rto_count >= self.config.max_retransmissions {
                self.fail(Error::TimedOut);
                return;
            }
            self.rto_count += 1;
        }
        self.heard_since_rto = false;
        self.stats.rto_events += 1;
        // RFC 5681 §3.1 eq. (4) and the loss window.
        self.cc.on_rto(now, self.flight_size());
        // RFC 6298 §5.5: back off the timer.
        self.rtt.backoff();
        // RFC 2018 §8 / RFC 6675 §5.1: if the oldest segment is SACKed the
        // receiver reneged: forget the SACK information.
        if self.rtxq.front().is_some_and(|s| s.sacked) {
            self.rtxq.clear_sacks();
        }
        // RFC 6675 §5.1 / RFC 5681 §3.1: everything un-SACKed is lost and is
        // resent as the window allows; RecoveryPoint (RFC 6582 `recover`) =
        // HighData; any fast recovery ends.
        self.rtxq.mark_all_lost();
        self.recover = self.snd_nxt;
        self.recovery = Recovery::Loss {
            cursor: self.snd_una,
        };
        self.dupacks = 0;
        self.timed = None;
        self.new_episode();
        // RFC 6298 §5.4: retransmit the earliest unacknowledged segment;
        // §5.6: restart the timer with the backed-off RTO.
        self.pending_rtx = Some(self.snd_una);
        self.timers.set(Timer::Retransmit, now + self.rtt.rto());
    }
}
