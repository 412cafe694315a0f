//! Acknowledgment processing, RTT measurement and loss recovery:
//! RFC 6298 (RTO), RFC 7323 §4 (RTTM), RFC 5681 (fast retransmit / fast
//! recovery), RFC 6582 (NewReno), RFC 6675 (SACK-based recovery), RFC 3042
//! (limited transmit), RFC 2883 / RFC 3708 (D-SACK, spurious retransmission
//! detection), and with SACK and `Config::rack` RFC 8985 (RACK-TLP loss
//! detection) with RFC 6937 (PRR) sending during SACK recovery.
//! Congestion-window arithmetic itself belongs to the
//! [`CongestionControl`](crate::CongestionControl) in use.

use super::{Connection, Episode, Recovery, RetxRecord, RETX_RECORDS};
use crate::rack::{AckInfo, Rack};
use crate::sack::Acked;
use crate::time::Instant;
use crate::timer::Timer;
use crate::Error;
use hollywood_wire::{SackBlock, TcpRepr};
use std::time::Duration;

impl Connection {
    /// RFC 9293 §3.10.7.4 fifth check for an acceptable ACK
    /// (SND.UNA - MAX.SND.WND =< SEG.ACK =< SND.NXT), in a synchronized state.
    pub(super) fn on_ack(&mut self, now: Instant, seg: &TcpRepr, payload_len: usize) {
        let ack = seg.ack;
        self.heard_since_rto = true;
        // RFC 9293 §3.8.6.1: the peer answers, so probing may go on.
        self.persist_probes = 0;
        let prior_flight = self.flight_size();
        let prior_sacked = self.rtxq.sacked_bytes();
        let old_wnd = self.snd_wnd;
        self.rack.last_dsack = None;

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
        if self.rack_active() {
            // RFC 8985 §7.4: what the ACK says about an outstanding probe,
            // then §6.2 step 5: losses by transmission time.
            if let Some(rtt) = self.rack.commit() {
                self.recent_rtt.update(super::RECENT_RTT_WINDOW, now, rtt);
                self.live_rtt_sample(now, rtt);
            }
            let pure_dup = acked == 0 && sacked == 0 && payload_len == 0 && wnd == old_wnd;
            self.tlp_on_ack(now, seg, pure_dup, prior_flight);
            self.rack_detect(now);
        }
        // Losses found by this ACK, before the recovery decisions (the
        // congestion controller sees each lost segment first).
        self.account_losses(now);
        let was_open = self.recovery == Recovery::Open;
        self.update_recovery(now, acked, is_dup, prior_flight);
        self.account_losses(now);
        self.report_delivery(now);
        if self.prr.active && matches!(self.recovery, Recovery::Sack { .. }) {
            // RFC 6937 §3.1: DeliveredData = change in SND.UNA + change in
            // SACKed bytes.
            let delivered = (acked + self.rtxq.sacked_bytes()).saturating_sub(prior_sacked);
            self.prr.on_ack(delivered, self.pipe(), self.neg.smss);
            if was_open {
                // RFC 6937 §3: the fast retransmit goes on entry.
                self.prr.sndcnt = self.prr.sndcnt.max(self.neg.smss);
            }
        }
    }

    /// Hand the segments newly deemed lost to the delivery-rate estimator
    /// and the congestion controller (draft-ietf-ccwg-bbr-01 §4.5.10.2
    /// `BBRHandleLostPacket`, with the segment's send-time state).
    pub(super) fn account_losses(&mut self, now: Instant) {
        for s in self.rtxq.take_newly_lost() {
            let len = s.seq_len() as u64;
            self.rate.on_lost(len);
            self.cc.on_segment_lost(&crate::cc::LostSegment {
                now,
                len,
                tx_in_flight: s.tx.tx_in_flight,
                lost_at_send: s.tx.lost,
                delivered_at_send: s.tx.delivered,
                is_app_limited: s.tx.is_app_limited,
            });
        }
    }

    /// End of an ACK: the delivery-rate sample and the model update of a
    /// model-based controller (draft-ietf-ccwg-bbr-01 §4.2.3
    /// `BBRUpdateOnACK`).
    fn report_delivery(&mut self, now: Instant) {
        let (rate, acked, lost) = self.rate.finish_ack(self.rtt.min_rtt());
        if acked == 0 && lost == 0 {
            return;
        }
        if let Some(rs) = &rate {
            // A windowed maximum (about ten round trips) of the delivery
            // rate of the times the sender had data to send.
            let r = rs.delivery_rate();
            let window = self
                .rtt
                .srtt()
                .map_or(core::time::Duration::from_secs(1), |s| s * 10);
            if r >= 1.0 && !rs.is_app_limited {
                self.delivery_bw.update(
                    now.as_nanos(),
                    r as u64,
                    u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
                );
            }
        }
        let ev = crate::cc::DeliveryEvent {
            now,
            delivered: self.rate.delivered(),
            lost: self.rate.lost(),
            inflight: self.pipe() as u64,
            rate,
            min_rtt: self.rtt.min_rtt(),
            srtt: self.rtt.srtt(),
            in_recovery: self.recovery != Recovery::Open,
        };
        self.cc.on_delivery(&ev);
    }

    /// SND.UNA moves to `seg.ack`.
    fn advance_una(&mut self, now: Instant, seg: &TcpRepr, acked: usize) {
        let ack = seg.ack;
        let info = self.ack_info(now, seg);
        // Hollywood: the echoed TSval names the segment that reached the
        // receiver's left edge (RFC 7323 §4.3) only if no other segment
        // this ACK covers went out with the same TSval (one RTO burst
        // shares one millisecond): count them.
        let tsecr = seg.options.timestamp.map(|t| t.tsecr);
        let ts_offset = self.ts_offset;
        let ts_of = |t: Instant| ((t.as_nanos() / 1_000_000) as u32).wrapping_add(ts_offset);
        let mut same_ts = 0usize;
        if let Some(e) = tsecr.filter(|_| self.messages.has_carried()) {
            // Segments still outstanding count too: the one that reached
            // the left edge may be any of the burst (only while a copy
            // waits for its proof, so the walk is rare).
            let from = self.rtxq.index_from(ack);
            same_ts += (from..self.rtxq.len())
                .filter_map(|i| self.rtxq.get(i))
                .filter(|s| ts_of(s.last_sent) == e)
                .count();
        }
        let rack = &mut self.rack;
        let rate = &mut self.rate;
        let a = self.rtxq.ack_to_with(ack, |s| {
            rack.on_delivered(&info, s);
            rate.on_delivered(now, s);
            same_ts += usize::from(tsecr == Some(ts_of(s.last_sent)));
        });
        self.snd_buf.ack_to(ack);
        self.snd_una = ack;
        self.sndbuf_expand();
        // Hollywood (thesis §4.2.1): metadata of acknowledged messages goes.
        // An echo shared by several segments proves nothing about any one.
        if let Some(t) = self.messages.get_mut() {
            t.on_ack(ack, tsecr.filter(|_| same_ts <= 1));
        }
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
        self.wake_writer();
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
            if !self.rack_active() {
                self.recent_rtt.update(super::RECENT_RTT_WINDOW, now, s);
                self.live_rtt_sample(now, s);
            }
            self.stats.rtt_samples += 1;
            // HyStart++ (RFC 9406) in the congestion controller.
            self.cc.on_rtt_sample(now, s, self.snd_una, self.snd_nxt);
        }
    }

    /// Apply the SACK option; returns sequence-space bytes newly SACKed.
    fn process_sacks(&mut self, now: Instant, seg: &TcpRepr) -> usize {
        let blocks = seg.options.sacks();
        // The timestamp echo of a SACK speaks for the last in-order segment
        // (RFC 7323 §4.3 updates TS.Recent only at RCV.NXT), not for the
        // segments it SACKs: RACK judges those by min_RTT alone.
        let info = AckInfo {
            tsecr: None,
            ..self.ack_info(now, seg)
        };
        let mut newly = 0;
        for (k, b) in blocks.iter().enumerate() {
            // RFC 2883 §4: the first block is a D-SACK if it lies below the
            // cumulative ACK or inside the second block.
            if k == 0 {
                let inside_second = blocks
                    .get(1)
                    .is_some_and(|s| s.left <= b.left && b.right <= s.right);
                if b.left < seg.ack || inside_second {
                    self.rack.last_dsack = Some((b.left, b.right));
                    self.on_dsack(now, *b);
                    // Hollywood: a rewrite that landed on bytes the receiver
                    // already had did not deliver its replacement.
                    if let Some(t) = self.messages.get_mut() {
                        t.on_dsack(b.left, b.right);
                    }
                    continue;
                }
            }
            // RFC 2018 §3: a block must lie within [SND.UNA, SND.NXT];
            // anything else is bogus and ignored.
            if b.left >= b.right || b.right > self.snd_nxt || b.right <= self.snd_una {
                continue;
            }
            let rack = &mut self.rack;
            let rate = &mut self.rate;
            let mut messages = self.messages.get_mut();
            newly += self.rtxq.sack_with(b.left.max(self.snd_una), b.right, |s| {
                rack.on_delivered(&info, s);
                rate.on_delivered(now, s);
                // Hollywood: only newly SACKed segments (RFC 2018 receivers
                // repeat blocks on every ACK; the scoreboard filters them).
                if let Some(t) = messages.as_mut() {
                    t.on_sack(s.seq, s.end());
                }
            });
            // Hollywood: a block edge inside one of our segments (a
            // resegmenting middlebox cut it, thesis §4.5). The scoreboard
            // marks whole segments only, but the message table must learn
            // that the receiver holds part of that segment's bytes: a slot
            // it holds in part is resent as it was (fragment rule), since
            // a rewrite would reach the receiver spliced with the old
            // bytes. At most the two edge segments per block.
            if !self.messages.is_empty() {
                let lo = b.left.max(self.snd_una);
                for at in [lo, b.right - 1] {
                    let i = self.rtxq.index_from(at);
                    if let Some(seg) = self.rtxq.get(i).copied() {
                        if !seg.sacked
                            && seg.seq <= at
                            && (seg.seq < lo || seg.seq + seg.len as usize > b.right)
                        {
                            let end = b.right.min(seg.seq + seg.len as usize);
                            self.messages.make().on_sack(lo.max(seg.seq), end);
                        }
                    }
                }
            }
            // A FIN cannot be SACKed (RFC 2018 blocks cover data), so the
            // segment carrying the last data and the FIN is never SACKed
            // whole, although the receiver may hold every data byte of it:
            // the message table still learns that those bytes arrived (it
            // would otherwise give up the last messages when the segment
            // is resent for its FIN, and report messages the receiver
            // has). Bounded by one segment, so repeated blocks cost little.
            if let Some(last) = self.rtxq.back().copied() {
                if last.fin
                    && !last.sacked
                    && b.right + 1 == last.end()
                    && last.seq < b.right
                    && b.left < b.right
                {
                    if let Some(t) = self.messages.get_mut() {
                        t.on_sack(b.left.max(last.seq), b.right);
                    }
                }
            }
        }
        if newly > 0 && !self.rack_active() {
            // RFC 6675 §4 IsLost via the scoreboard (RACK marks losses by
            // time instead, RFC 8985 §6.2).
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
        if self.rack_active() {
            // RFC 8985 §6.2 step 4: D-SACKs widen the reordering window.
            self.rack.on_dsack(self.snd_una, self.snd_nxt);
        }
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
                // RFC 6582 §3.2 step 2 / RFC 6675 §5.1: no new recovery
                // until the cumulative ACK covers more than "the highest
                // sequence number transmitted" at the last entry, i.e.
                // reaches `recover` (kept one past it, = HighData).
                let may_enter = self.snd_una >= self.recover;
                if is_dup {
                    self.dupacks += 1;
                    // RFC 5681 §3.2 step 2 (DupThresh duplicate ACKs); with
                    // SACK also RFC 6675 §5 step (2): IsLost(HighACK + 1).
                    let lost = self.dupacks >= thresh || (self.neg.sack && self.rtxq.front_lost());
                    if may_enter && lost && !self.rack_active() {
                        self.enter_recovery(now);
                    }
                    // Otherwise RFC 3042 limited transmit may send new data
                    // (see `cwnd_limit`).
                }
                // RFC 8985: with RACK-TLP, fast recovery starts as soon as
                // RACK deems a segment lost (not on a DupThresh count).
                if self.rack_active()
                    && self.recovery == Recovery::Open
                    && may_enter
                    && self.rtxq.lost_bytes() > 0
                {
                    self.enter_recovery(now);
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
        if self.rack_active() {
            // RFC 8985 + RFC 6675 §5 (4.1-4.2): RACK already marked the
            // lost segments; NextSeg resends them as PRR (RFC 6937 §3.1)
            // allows, the first one at once.
            self.stats.sack_recoveries += 1;
            self.recovery = Recovery::Sack {
                high_rxt: self.snd_una,
            };
            self.rack.clear_tlp();
            self.prr
                .start(now, flight, self.cc.ssthresh(), self.neg.smss);
            return;
        }
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

    /// The live-stream window's gate (`crate::live`) takes the same RTT
    /// samples as `recent_rtt`, over about one round trip.
    fn live_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        if self.config.hollywood.live_window {
            let round = self.rtt.srtt().unwrap_or(rtt);
            if let Some(l) = self.live.get_mut() {
                l.on_rtt(now, rtt, round);
            }
        }
    }

    fn exit_recovery(&mut self, now: Instant) {
        self.recovery = Recovery::Open;
        self.dupacks = 0;
        self.cc.on_recovery_end(now, self.flight_size());
        if self.prr.active {
            self.prr.active = false;
            self.rack.on_recovery_end();
        }
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
    /// The live-stream window (`crate::live`) is a floor under cwnd.
    pub(super) fn cwnd_limit(&self) -> usize {
        let cwnd = self.cc.cwnd().max(self.live.floor());
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

    /// Bytes that may be sent now (new data or retransmissions through
    /// NextSeg): the PRR allowance during RACK/SACK recovery (RFC 6937
    /// §3.1), else cwnd (with limited transmit) minus the pipe. A pending
    /// new-data loss probe may go whatever cwnd says (RFC 8985 §7.3).
    pub(super) fn send_allowance(&self) -> usize {
        let avail = if self.prr.active
            && matches!(self.recovery, Recovery::Sack { .. })
            && !self.cc.owns_recovery_window()
        {
            // The live-stream window's floor holds in recovery too: PRR
            // paces the reduction towards ssthresh, which the floor
            // overrides while the loss is random (`crate::live`).
            self.prr
                .sndcnt
                .max(self.live.floor().saturating_sub(self.pipe()))
        } else {
            self.cwnd_limit().saturating_sub(self.pipe())
        };
        if self.rack.tlp_new_from.is_some() {
            avail.max(self.neg.smss)
        } else {
            avail
        }
    }

    /// A segment went out: PRR counts the data and FIN (prr_out).
    pub(super) fn on_segment_sent(&mut self, r: &TcpRepr, payload_len: usize) {
        if self.prr.active && !r.flags.syn() && !r.flags.rst() {
            let len = payload_len + r.flags.fin() as usize;
            if len > 0 {
                self.prr.on_sent(len);
            }
        }
    }

    /// RACK-TLP (RFC 8985) is in use: configured, and SACK negotiated
    /// (RFC 8985 §4: RACK-TLP requires SACK).
    pub(super) fn rack_active(&self) -> bool {
        self.config.rack && self.neg.sack
    }

    /// The ACK context RACK needs for each segment it delivers.
    fn ack_info(&self, now: Instant, seg: &TcpRepr) -> AckInfo {
        AckInfo {
            now,
            tsecr: if self.neg.timestamps {
                seg.options.timestamp.map(|t| t.tsecr)
            } else {
                None
            },
            ts_offset: self.ts_offset,
            min_rtt: self.rtt.min_rtt(),
        }
    }

    /// RACK.reo_wnd for the current state (RFC 8985 §6.2 step 4).
    fn reo_wnd(&self) -> std::time::Duration {
        self.rack.reo_wnd(
            self.recovery != Recovery::Open,
            self.rtxq.sacked_segments(),
            self.config.dupack_threshold.max(1),
            self.rtt.min_rtt(),
            self.rtt.srtt(),
        )
    }

    /// RACK_detect_loss_and_arm_timer (RFC 8985 §6.2 step 5): mark losses,
    /// (re)arm or stop the reordering timer, send NextSeg back to the
    /// lowest newly lost segment. A lost retransmission is a further
    /// congestion signal (RFC 5681 §4.3: "the loss of a retransmission
    /// [...] cwnd (and ssthresh) MUST be lowered twice"; RFC 8985 §9.3
    /// leaves that response to congestion control): during SACK recovery
    /// the window is reduced once more, at most once per reduction (only
    /// retransmissions sent since the latest one count). Returns the bytes
    /// newly marked lost.
    fn rack_detect(&mut self, now: Instant) -> usize {
        let reo = self.reo_wnd();
        let d = self.rack.detect_loss(&mut self.rtxq, now, reo);
        match d.timer {
            Some(t) => self.timers.set(Timer::Reorder, t),
            None => self.timers.stop(Timer::Reorder),
        }
        if let Some(first) = d.first_lost {
            match &mut self.recovery {
                Recovery::Sack { high_rxt } => *high_rxt = (*high_rxt).min(first),
                Recovery::Loss { cursor } => *cursor = (*cursor).min(first),
                _ => {}
            }
        }
        if d.lost_retransmissions > 0 {
            self.stats.lost_retransmissions += u64::from(d.lost_retransmissions);
            let again = matches!(self.recovery, Recovery::Sack { .. })
                && self.prr.active
                && !self.cc.owns_recovery_window()
                && self
                    .prr
                    .reduced_at
                    .zip(d.latest_lost_retransmission)
                    .is_some_and(|(reduced, sent)| sent >= reduced);
            if again {
                let w = self.cc.cwnd().min(self.flight_size());
                self.cc.on_congestion_event(now, w);
                // A new round: recovery now lasts until what is out now is
                // acknowledged, and PRR spreads the new reduction over what
                // is actually in flight.
                self.recover = self.snd_nxt;
                let pipe = self.pipe();
                self.prr.start(now, pipe, self.cc.ssthresh(), 0);
            }
        }
        d.newly_lost
    }

    /// The RACK reordering timer fired (RFC 8985 §6.2 step 5): segments
    /// whose window has passed are lost; fast recovery starts if it had
    /// not (the retransmission then goes at once, RFC 6937 §3).
    pub(super) fn on_reorder_timeout(&mut self, now: Instant) {
        if !self.rack_active() || self.flight_size() == 0 || !self.can_send_data_state() {
            return;
        }
        let newly = self.rack_detect(now);
        self.account_losses(now);
        if newly > 0 && self.recovery == Recovery::Open && self.snd_una >= self.recover {
            self.enter_recovery(now);
        }
    }

    /// The loss probe timer fired (RFC 8985 §7.3): send one probe even if
    /// cwnd is full — new data if there is some and the peer's window
    /// takes it, else a retransmission of the highest outstanding segment —
    /// then arm the RTO (not the PTO).
    pub(super) fn on_pto(&mut self, now: Instant) {
        if !self.rack_active()
            || self.recovery != Recovery::Open
            || self.rack.tlp_end.is_some()
            || self.rack.tlp_new_from.is_some()
            || self.flight_size() == 0
            || !self.can_send_data_state()
            || self.snd_wnd == 0
        {
            return;
        }
        self.stats.tlp_probes += 1;
        let forced = self.force_send;
        self.force_send = true;
        let usable = (self.snd_una + self.snd_wnd).diff(self.snd_nxt) > 0;
        if usable && self.has_unsent() && !self.sws_blocked() {
            // The probe is new data; TLP.end_seq is set once it is out.
            self.rack.tlp_new_from = Some(self.snd_nxt);
            self.rack.tlp_retrans = None;
        } else if let Some(last) = self.rtxq.back().copied() {
            self.force_send = forced;
            self.pending_rtx = Some(last.seq);
            self.rack.tlp_retrans = Some((last.seq, last.end()));
            self.rack.tlp_end = Some(self.snd_nxt);
            // The probe is not a congestion response: a D-SACK for it must
            // not undo an earlier episode's reduction (RFC 3708).
            self.new_episode();
            self.episode.undone = true;
        } else {
            self.force_send = forced;
            return;
        }
        self.timers.set(Timer::Retransmit, now + self.rtt.rto());
    }

    /// RFC 8985 §7.4: an ACK while a loss probe is outstanding. A
    /// retransmitted probe whose ACK goes beyond TLP.end_seq without a
    /// D-SACK for it repaired a loss: respond as fast recovery would (one
    /// window reduction, at once complete); a D-SACK for it or a pure
    /// duplicate ACK at TLP.end_seq (no data, SACK or window change) means
    /// the original arrived too.
    fn tlp_on_ack(&mut self, now: Instant, seg: &TcpRepr, pure_dup: bool, prior_flight: usize) {
        let Some(end) = self.rack.tlp_end else {
            return;
        };
        if seg.ack < end {
            return;
        }
        match self.rack.tlp_retrans {
            None => self.rack.clear_tlp(),
            Some((l, r))
                if self
                    .rack
                    .last_dsack
                    .is_some_and(|(dl, dr)| dl < r && l < dr) =>
            {
                self.rack.clear_tlp();
            }
            Some(_) if seg.ack > end => {
                if self.recovery == Recovery::Open {
                    self.cc.on_congestion_event(now, prior_flight);
                    self.cc.on_recovery_end(now, self.flight_size());
                    self.stats.tlp_recoveries += 1;
                }
                self.rack.clear_tlp();
            }
            Some(_) if pure_dup => self.rack.clear_tlp(),
            Some(_) => {}
        }
    }

    /// Arm or stop the RACK reordering timer and the PTO (RFC 8985 §7.2,
    /// §8); called from `arm_timers`. The PTO runs while the connection is
    /// open (not recovering), nothing is SACKed and no probe is
    /// outstanding; it is restarted whenever new data is sent or
    /// acknowledged, at 2*SRTT (plus the delayed-ACK allowance for a lone
    /// segment), and never later than the RTO.
    pub(super) fn arm_rack_timers(&mut self, now: Instant) {
        let live = self.rack_active()
            && self.can_send_data_state()
            && self.flight_size() > 0
            && !self.in_persist();
        if !live {
            self.timers.stop(Timer::Reorder);
            self.timers.stop(Timer::Tlp);
            self.rack.tlp_new_from = None;
            return;
        }
        if let Some(from) = self.rack.tlp_new_from {
            if self.snd_nxt != from {
                // The new-data probe went out: TLP.end_seq = SND.NXT.
                self.rack.tlp_end = Some(self.snd_nxt);
                self.rack.tlp_new_from = None;
            }
        }
        let moved = self.snd_una != self.rack.pto_una || self.snd_nxt != self.rack.pto_nxt;
        self.rack.pto_una = self.snd_una;
        self.rack.pto_nxt = self.snd_nxt;
        let may_probe = self.recovery == Recovery::Open
            && self.rack.tlp_end.is_none()
            && self.rack.tlp_new_from.is_none()
            && self.rtxq.sacked_bytes() == 0;
        if !may_probe {
            self.timers.stop(Timer::Tlp);
            return;
        }
        if moved || !self.timers.is_set(Timer::Tlp) {
            let pto = Rack::pto(self.rtt.srtt(), self.flight_size() <= self.neg.smss);
            let mut at = now + pto;
            if let Some(rto) = self.timers.deadline(Timer::Retransmit) {
                at = at.min(rto);
            }
            self.timers.set(Timer::Tlp, at);
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
        // HighData; any fast recovery ends. With RACK (RFC 8985 §6.3):
        // the first segment, and the others whose time is up.
        if self.rack_active() {
            let reo = self.reo_wnd();
            self.rack.mark_losses_on_rto(&mut self.rtxq, now, reo);
            self.rack.clear_tlp();
            self.timers.stop(Timer::Reorder);
            self.timers.stop(Timer::Tlp);
            if self.prr.active {
                self.prr.active = false;
                self.rack.on_recovery_end();
            }
        } else {
            self.rtxq.mark_all_lost();
        }
        self.account_losses(now);
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
