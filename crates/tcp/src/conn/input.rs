//! Segment arrival: RFC 9293 §3.10.7 ("SEGMENT ARRIVES") with RFC 5961
//! (blind in-window attacks), RFC 7323 (PAWS, timestamps) and RFC 2018 /
//! RFC 2883 (SACK / D-SACK generation).

use super::{Connection, Probe, State, PAWS_IDLE};
use crate::rtt::RttEstimator;
use crate::time::Instant;
use crate::timer::Timer;
use crate::Error;
use hollywood_wire::{SeqNumber, TcpRepr};
use std::time::Duration;

/// RFC 6298 §5.7: the RTO after a retransmitted SYN when no sample exists.
const RTO_AFTER_SYN_LOSS: Duration = Duration::from_secs(3);

impl Connection {
    /// Process one segment addressed to this connection (RFC 9293 §3.10.7).
    /// Malformed or unacceptable segments are dropped (answered with an ACK
    /// or RST where the RFC says so); nothing here panics on peer input.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        self.stats.segments_received += 1;
        match self.state {
            // RFC 9293 §3.10.7.1: a closed TCB takes nothing (the endpoint
            // answers unknown 4-tuples with RST). Listeners live in the
            // endpoint.
            State::Closed | State::Listen => {}
            State::SynSent => self.on_segment_syn_sent(now, seg, payload),
            _ => self.on_segment_other(now, seg, payload),
        }
        // An ACK can settle messages (a copy proven lost, reported now)
        // when nothing is left to send, so no later refill reports them.
        self.drain_message_events();
        self.arm_timers(now);
    }

    /// RFC 9293 §3.10.7.3: SYN-SENT.
    fn on_segment_syn_sent(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        let f = seg.flags;
        // First: check the ACK bit. SEG.ACK =< ISS or SEG.ACK > SND.NXT is
        // unacceptable: <SEQ=SEG.ACK><CTL=RST> unless RST is set, drop.
        if f.ack() && (seg.ack <= self.iss || seg.ack > self.snd_nxt) {
            if !f.rst() {
                self.rst_out = Some((seg.ack, None));
            }
            return;
        }
        // Second: the RST bit. With RFC 5961 §3.2 a RST is acceptable in
        // SYN-SENT only if its ACK acknowledges our SYN (checked above).
        if f.rst() {
            if f.ack() {
                self.fail(Error::Reset);
            }
            return;
        }
        // Fifth: neither SYN nor RST: drop.
        if !f.syn() {
            return;
        }
        // Fourth: the SYN bit. RCV.NXT = SEG.SEQ+1, IRS = SEG.SEQ.
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq + 1;
        self.last_ack_sent = self.rcv_nxt;
        self.negotiate(now, seg);
        self.last_rcv = now;
        // The window in a SYN is never scaled (RFC 7323 §2.2).
        self.snd_wnd = seg.window as usize;
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.rcv_adv = self.rcv_nxt + self.syn_window() as usize;
        if f.ack() {
            // SYN-ACK: SND.UNA = SEG.ACK; our SYN is acknowledged →
            // ESTABLISHED, <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
            self.snd_una = seg.ack;
            self.snd_wl2 = seg.ack;
            self.syn_acked(now, seg);
            self.on_established();
            self.ack.now = true;
            // "If there are other controls or text in the segment, then
            // continue processing at the sixth step".
            if !payload.is_empty() || f.fin() {
                self.text_and_fin(now, seg, payload);
            }
        } else {
            // Simultaneous open: SYN-RECEIVED, <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>.
            // Text in the SYN is not queued; the peer retransmits it.
            self.state = State::SynReceived;
            self.syn_pending = true;
        }
    }

    /// Our SYN was acknowledged: handshake RTT sample and RTO housekeeping.
    fn syn_acked(&mut self, now: Instant, seg: &TcpRepr) {
        self.timers.stop(Timer::Retransmit);
        // RFC 6298 §3 (Karn): time the SYN only if it was sent once; with
        // timestamps the echo identifies the transmission (RFC 7323 §4).
        let sample = match self.syn_sent_at {
            Some(t) if self.syn_retries == 0 => Some(now.saturating_duration_since(t)),
            _ => self.ts_rtt(now, seg),
        };
        self.rtt.reset_backoff();
        if let Some(s) = sample {
            self.rtt.on_sample(s);
            self.stats.rtt_samples += 1;
        } else if self.syn_retries > 0 {
            // RFC 6298 §5.7: a SYN timed out and there is no sample: data
            // transmission starts with an RTO of 3 s.
            self.rtt = RttEstimator::new(
                RTO_AFTER_SYN_LOSS.max(self.config.initial_rto),
                self.config.min_rto,
                self.config.max_rto,
            );
        }
    }

    /// RTT from the timestamp echo (RFC 7323 §4.1), millisecond ticks.
    pub(super) fn ts_rtt(&self, now: Instant, seg: &TcpRepr) -> Option<Duration> {
        if !self.neg.timestamps {
            return None;
        }
        let ts = seg.options.timestamp?;
        if ts.tsecr == 0 {
            return None;
        }
        let d = self.ts_now(now).wrapping_sub(ts.tsecr) as i32;
        (d >= 0).then(|| Duration::from_millis(d as u64))
    }

    /// Option negotiation from the peer's SYN (RFC 9293 §3.7.1, RFC 7323
    /// §2.2 / §3.2, RFC 2018 §2): each option is used only if both sides
    /// offered it.
    pub(super) fn negotiate(&mut self, now: Instant, syn: &TcpRepr) {
        let o = &syn.options;
        self.neg.peer_mss_present = o.mss.is_some();
        self.neg.peer_mss = o.mss.unwrap_or(self.neg.peer_mss).max(64);
        match o.window_scale {
            Some(ws) if self.config.window_scaling => {
                self.neg.window_scaling = true;
                // RFC 7323 §2.3: a shift above 14 is treated as 14.
                self.neg.snd_wscale = ws.min(14);
                self.neg.rcv_wscale = self.rcv_wscale_offer;
            }
            _ => {
                self.neg.window_scaling = false;
                self.neg.snd_wscale = 0;
                self.neg.rcv_wscale = 0;
            }
        }
        self.neg.sack = self.config.sack && o.sack_permitted;
        self.neg.timestamps = self.config.timestamps && o.timestamp.is_some();
        if let (true, Some(ts)) = (self.neg.timestamps, o.timestamp) {
            self.ts_recent = Some((ts.tsval, now));
        }
        // RFC 9293 §3.7.1 / RFC 6691: data per segment is the smaller MSS
        // minus the options every segment carries.
        let budget = (self.neg.peer_mss as usize).min(self.local_mss() as usize);
        self.neg.smss = budget - if self.neg.timestamps { 12 } else { 0 };
        self.cc.set_mss(self.neg.smss);
        self.rcv_mss = self.rcv_mss.min(self.local_mss() as usize);
    }

    /// RFC 9293 §3.10.7.4: SYN-RECEIVED and the synchronized states.
    fn on_segment_other(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        let f = seg.flags;
        if self.state == State::SynReceived && f.syn() && !f.rst() && seg.seq == self.irs {
            if !f.ack() {
                // The peer retransmitted its SYN: our SYN-ACK was lost.
                // The SYN-ACK we resend echoes this SYN's timestamp
                // (RFC 7323 §4.3: SEG.SEQ = IRS ≤ Last.ACK.sent), so the
                // peer's handshake RTT sample times this exchange, not the
                // one since its first SYN (which would read as an RTT of
                // a whole SYN timeout).
                self.update_ts_recent(now, seg);
                self.syn_pending = true;
                return;
            }
            if seg.ack == self.snd_nxt && !self.passive {
                // Simultaneous open: the peer's SYN-ACK acknowledges our
                // SYN (RFC 9293 §3.5 figure 7; Linux accepts it likewise).
                self.update_ts_recent(now, seg);
                self.snd_una = seg.ack;
                self.snd_wl2 = seg.ack;
                self.syn_acked(now, seg);
                self.on_established();
                return;
            }
        }
        let seg_len = seg.segment_len(payload.len());
        if self.neg.timestamps && !f.rst() {
            // RFC 7323 §3.2: once negotiated, a non-RST segment without
            // TSopt is silently dropped.
            let Some(ts) = seg.options.timestamp else {
                return;
            };
            // RFC 7323 §5.3 R1 (PAWS): SEG.TSval < TS.Recent is a duplicate
            // from an old incarnation of the sequence space.
            if let Some((recent, at)) = self.ts_recent {
                if (ts.tsval.wrapping_sub(recent) as i32) < 0 {
                    if now.saturating_duration_since(at) > PAWS_IDLE {
                        // RFC 7323 §5.5: TS.Recent is too old to compare.
                        self.ts_recent = None;
                    } else {
                        self.stats.paws_rejected += 1;
                        self.oow_ack(now, seg_len);
                        return;
                    }
                }
            }
        }
        // First check: sequence number (the acceptability table).
        if !self.seq_acceptable(seg.seq, seg_len) {
            self.stats.unacceptable_segments += 1;
            if f.rst() {
                return; // RFC 5961 §3.2: out-of-window RST: drop silently.
            }
            if f.syn() {
                // RFC 5961 §4.2: any SYN in a synchronized state.
                self.challenge_ack(now);
            } else {
                // "<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>", rate limited for
                // pure segments against ACK storms.
                self.oow_ack(now, seg_len);
            }
            let data_seq = seg.seq + f.syn() as usize;
            let data_end = data_seq + payload.len();
            if !payload.is_empty() && data_end <= self.data_nxt() {
                // RFC 2883 §4: report the duplicate with D-SACK.
                self.stats.duplicate_bytes_received += payload.len() as u64;
                self.set_dsack(data_seq, data_end);
            }
            if self.state == State::TimeWait && f.fin() {
                // TIME-WAIT: a retransmitted FIN restarts the 2 MSL timeout.
                self.timers
                    .set(Timer::TimeWait, now + self.config.time_wait);
            }
            return;
        }
        self.last_rcv = now;
        self.keepalive_probes = 0;
        if self.probe == Some(Probe::Keepalive) {
            self.probe = None;
        }
        self.update_ts_recent(now, seg);

        // Second check: RST (RFC 5961 §3.2).
        if f.rst() {
            if seg.seq == self.rcv_nxt {
                match self.state {
                    // CLOSING, LAST-ACK, TIME-WAIT: enter CLOSED.
                    State::Closing | State::LastAck | State::TimeWait => self.set_closed(),
                    // SYN-RECEIVED (passive: "return to LISTEN", i.e. the
                    // endpoint forgets it), ESTABLISHED, FIN-WAIT-*,
                    // CLOSE-WAIT: connection reset.
                    _ => self.fail(Error::Reset),
                }
            } else {
                // In the window but not exact: challenge ACK.
                self.challenge_ack(now);
            }
            return;
        }
        // Third check: security/compartment is obsolete (RFC 9293 §3.10.7.4).
        // Fourth check: SYN (RFC 5961 §4.2): challenge ACK, drop.
        if f.syn() {
            self.challenge_ack(now);
            return;
        }
        // Fifth check: the ACK field. Without ACK: drop.
        if !f.ack() {
            return;
        }
        if self.state == State::SynReceived {
            // SND.UNA < SEG.ACK =< SND.NXT → ESTABLISHED with SND.WND =
            // SEG.WND (scaled now: this is not a SYN), WL1, WL2.
            if self.snd_una < seg.ack && seg.ack <= self.snd_nxt {
                self.snd_una = seg.ack;
                self.syn_acked(now, seg);
                self.snd_wnd = (seg.window as usize) << self.neg.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = seg.seq;
                self.snd_wl2 = seg.ack;
                self.on_established();
            } else {
                // Unacceptable ACK: <SEQ=SEG.ACK><CTL=RST>.
                self.rst_out = Some((seg.ack, None));
                return;
            }
        } else {
            // RFC 5961 §5.2: acceptable iff
            // SND.UNA - MAX.SND.WND =< SEG.ACK =< SND.NXT; otherwise send
            // an ACK (rate limited) and drop (also RFC 9293: SEG.ACK >
            // SND.NXT → ACK, drop).
            let lower = self.snd_una - self.max_snd_wnd.min(i32::MAX as usize);
            if seg.ack > self.snd_nxt || seg.ack < lower {
                self.challenge_ack(now);
                return;
            }
            self.on_ack(now, seg, payload.len());
            if self.state == State::Closed {
                return;
            }
            if self.fin_acked() {
                match self.state {
                    // FIN-WAIT-1: our FIN is acknowledged → FIN-WAIT-2.
                    State::FinWait1 => self.state = State::FinWait2,
                    // CLOSING: our FIN is acknowledged → TIME-WAIT.
                    State::Closing => self.enter_time_wait(now),
                    // LAST-ACK: our FIN is acknowledged → CLOSED.
                    State::LastAck => {
                        self.set_closed();
                        return;
                    }
                    _ => {}
                }
            }
        }
        // Sixth check: URG — urgent data is not supported (RFC 6093
        // discourages it); the pointer is ignored.
        // Seventh and eighth checks: text and FIN.
        self.text_and_fin(now, seg, payload);
    }

    /// RFC 7323 §4.3 (R3): TS.Recent = SEG.TSval if SEG.TSval >= TS.Recent
    /// and SEG.SEQ =< Last.ACK.sent.
    fn update_ts_recent(&mut self, now: Instant, seg: &TcpRepr) {
        if !self.neg.timestamps {
            return;
        }
        let Some(ts) = seg.options.timestamp else {
            return;
        };
        let newer = self
            .ts_recent
            .is_none_or(|(r, _)| (ts.tsval.wrapping_sub(r) as i32) >= 0);
        if newer && seg.seq <= self.last_ack_sent {
            self.ts_recent = Some((ts.tsval, now));
        }
    }

    /// Current receive window RCV.WND (what we last advertised).
    fn rcv_wnd(&self) -> usize {
        self.rcv_adv.diff(self.rcv_nxt).max(0) as usize
    }

    /// RCV.NXT for data: RCV.NXT minus the peer's FIN once it was taken.
    pub(super) fn data_nxt(&self) -> SeqNumber {
        self.rcv_nxt - self.fin_rcvd as usize
    }

    /// RFC 9293 §3.10.7.4 first check: the acceptability table.
    fn seq_acceptable(&self, seq: SeqNumber, seg_len: usize) -> bool {
        let nxt = self.rcv_nxt;
        let wnd = self.rcv_wnd();
        let in_wnd = |s: SeqNumber| nxt <= s && s.diff(nxt) < wnd.min(i32::MAX as usize) as i32;
        match (seg_len, wnd) {
            (0, 0) => seq == nxt,
            (0, _) => in_wnd(seq),
            // RCV.WND = 0 admits nothing, "but special allowance should be
            // made to accept valid ACKs, URGs, and RSTs": a segment exactly
            // at RCV.NXT is processed for its ACK; its text is trimmed away.
            (_, 0) => seq == nxt,
            (n, _) => in_wnd(seq) || in_wnd(seq + (n - 1)),
        }
    }

    /// Seventh (text) and eighth (FIN) checks of RFC 9293 §3.10.7.4.
    pub(super) fn text_and_fin(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        let data_seq = seg.seq + seg.flags.syn() as usize;
        // Text is taken in ESTABLISHED, FIN-WAIT-1 and FIN-WAIT-2; after the
        // peer's FIN (CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT) it is ignored.
        let takes_text = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        if takes_text && self.config.hollywood.seq_gap_receive {
            if let Some(nx) = seg.options.next_expected {
                self.seq_gap_advance(now, nx);
            }
        }
        if !payload.is_empty() && takes_text {
            self.receive_data(now, data_seq, payload);
        }
        if !seg.flags.fin() || !takes_text {
            return;
        }
        let fin_seq = data_seq + payload.len();
        if fin_seq == self.rcv_nxt {
            self.process_fin(now);
        } else if self.rcv_nxt < fin_seq && fin_seq.diff(self.rcv_nxt) as usize <= self.rcv_wnd() {
            // The FIN came ahead of missing data: take it once the gap is
            // filled (the peer would retransmit it anyway).
            self.pending_fin = Some(fin_seq);
            self.ack.now = true;
        }
    }

    /// RFC 9293 §3.10.7.4 eighth check: the FIN is in order.
    fn process_fin(&mut self, now: Instant) {
        self.rcv_nxt += 1;
        self.fin_rcvd = true;
        self.pending_fin = None;
        self.ack.now = true;
        self.push_event(super::Event::PeerClosed);
        match self.state {
            // SYN-RECEIVED, ESTABLISHED → CLOSE-WAIT.
            State::SynReceived | State::Established => self.state = State::CloseWait,
            // FIN-WAIT-1: our FIN acknowledged → TIME-WAIT, else CLOSING.
            State::FinWait1 => {
                if self.fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            // FIN-WAIT-2 → TIME-WAIT.
            State::FinWait2 => self.enter_time_wait(now),
            // CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: remain.
            _ => {}
        }
    }

    /// Sequence-gap receiver ([TCP-video] §7.2, experimental): "the receiver
    /// updates its next expected sequence number to the value specified by
    /// the special option ... only if [it] has a value greater than the
    /// current next expected sequence number". Values beyond the window we
    /// advertised cannot come from a correct sender and are ignored. The
    /// bytes never received are filled with zeros; data held out of order
    /// inside the skipped range becomes readable.
    fn seq_gap_advance(&mut self, now: Instant, nx: SeqNumber) {
        let nxt = self.data_nxt();
        if self.fin_rcvd || nx <= nxt || nx > self.rcv_adv {
            return;
        }
        let target = self.rcv_buf.nxt_off() + nx.diff(nxt) as u64;
        let (in_order, zeros) = self.rcv_buf.fill_gaps(target, now.as_nanos());
        if in_order == 0 {
            return;
        }
        self.rcv_nxt += in_order;
        self.stats.seq_gap_skipped_bytes += zeros as u64;
        self.in_order_arrived(now, (in_order - zeros) as u64);
        // Tell the sender at once that the skip arrived.
        self.ack.now = true;
    }

    /// RCV.NXT has moved over `bytes` new bytes of the stream: count them,
    /// forget SACK blocks below it, tell a byte-stream reader, and take a
    /// FIN that was waiting for them.
    fn in_order_arrived(&mut self, now: Instant, bytes: u64) {
        self.stats.bytes_received += bytes;
        self.rcv_space_adjust(now);
        let nxt_off = self.rcv_buf.nxt_off();
        self.sack_recent.retain(|&(s, _)| s > nxt_off);
        if !self.config.hollywood.out_of_order_delivery {
            self.push_event(super::Event::Readable);
        }
        if self.pending_fin == Some(self.rcv_nxt) {
            self.process_fin(now);
        }
    }

    /// Data that passed the acceptability test: Hollywood tap, reassembly,
    /// SACK/D-SACK bookkeeping and the ACK decision.
    fn receive_data(&mut self, now: Instant, seq: SeqNumber, payload: &[u8]) {
        // Out-of-order delivery (thesis §4.3) hands every accepted byte to
        // the application a second time. If that copy cannot be queued
        // within its memory bound, the segment's text is refused here, as a
        // receiver without buffer space refuses it: TCP must never
        // acknowledge bytes the application will not get (review B1).
        if !self.ooo_copy_fits(payload.len()) {
            self.stats.bytes_dropped_no_space += payload.len() as u64;
            self.ack.now = true;
            return;
        }
        let nxt = self.data_nxt();
        let nxt_off = self.rcv_buf.nxt_off() as i64;
        let mut off = nxt_off + seq.diff(nxt) as i64;
        let mut data = payload;
        if off < 0 {
            // Bytes before the start of the stream cannot exist: trim.
            let skip = usize::try_from(-off).unwrap_or(usize::MAX);
            if skip >= data.len() {
                return;
            }
            data = &data[skip..];
            off = 0;
        }
        // Trim to the advertised window (RFC 9293 §3.10.7.4 seventh check:
        // only text inside the window is taken).
        let limit = nxt_off + self.rcv_adv.diff(nxt).max(0) as i64;
        let keep = (limit - off).clamp(0, data.len() as i64) as usize;
        let beyond = data.len() - keep;
        let ins = self
            .rcv_buf
            .insert_at(off as u64, &data[..keep], now.as_nanos());
        // Keep RCV.NXT in step with the buffer before mapping offsets back.
        self.rcv_nxt += ins.in_order;
        self.rcv_mss = self
            .rcv_mss
            .max(payload.len())
            .min(self.local_mss() as usize);
        if let Some((a, b)) = ins.duplicate {
            self.stats.duplicate_bytes_received += b - a;
            let (sa, sb) = (self.off_to_seq(a), self.off_to_seq(b));
            // RFC 2883 §4: the first SACK block reports the duplicate.
            self.set_dsack(sa, sb);
        }
        let dropped = ins.dropped + beyond;
        self.stats.bytes_dropped_no_space += dropped as u64;
        // Choke point for out-of-order delivery (thesis §4.3): exactly the
        // bytes TCP took (inside the window, new or already held), with
        // their own sequence numbers; ACK, SACK and window generation do
        // not depend on it.
        if keep > 0 {
            let first = seq + (payload.len() - data.len());
            self.on_data_segment(now, first, &data[..keep]);
        }
        if let Some(block) = ins.ooo_block {
            self.stats.out_of_order_segments += 1;
            self.note_sack_block(block);
        }
        if ins.in_order > 0 {
            // With out-of-order delivery the in-order bytes stay counted as
            // unread (exactly as in standard TCP) until the application has
            // drained the segments that carried them (`recv_segment`), so the
            // advertised window is byte-for-byte standard TCP's.
            self.in_order_arrived(now, ins.in_order as u64);
        }
        // ACK policy (RFC 5681 §4.2, RFC 9293 §3.8.6.3, Linux-like).
        self.ack.owed = true;
        self.ack.unacked_bytes += payload.len();
        let immediate = ins.ooo_block.is_some()
            || ins.filled_gap
            || ins.duplicate.is_some()
            || dropped > 0
            || !self.rcv_buf.ooo_ranges().is_empty();
        if immediate || !self.config.delayed_ack.enabled {
            // Out-of-order data, hole filling, duplicates: ACK at once.
            self.ack.now = true;
        } else if self.ack.quickack > 0 {
            // Quick-ACK mode at connection start.
            self.ack.quickack -= 1;
            self.ack.now = true;
        } else if self.ack.unacked_bytes > self.rcv_mss {
            // At least every second full-sized segment.
            self.ack.now = true;
        }
        // Otherwise the delayed-ACK timer (armed by `arm_timers`) sends it.
    }

    /// Stream offset of received data to a sequence number.
    fn off_to_seq(&self, off: u64) -> SeqNumber {
        let nxt_off = self.rcv_buf.nxt_off();
        let nxt = self.data_nxt();
        if off >= nxt_off {
            nxt + (off - nxt_off) as usize
        } else {
            nxt - (nxt_off - off) as usize
        }
    }

    /// Remember a D-SACK block for an ACK of its own (RFC 2883), if
    /// enabled. A duplicate adjacent to (or overlapping) the last pending
    /// one widens it, since one contiguous block reports both; beyond
    /// [`DSACK_PENDING`] ranges the oldest is forgotten (a peer cannot make
    /// us hold, or send, more).
    fn set_dsack(&mut self, left: SeqNumber, right: SeqNumber) {
        if !(self.config.dsack && self.neg.sack) {
            return;
        }
        if let Some(last) = self.dsack.back_mut() {
            if left <= last.1 && last.0 <= right {
                *last = (last.0.min(left), last.1.max(right));
                return;
            }
        }
        if self.dsack.len() == super::DSACK_PENDING {
            self.dsack.pop_front();
        }
        self.dsack.push_back((left, right));
    }

    /// RFC 2018 §4: the block holding the latest segment goes first, then
    /// the most recently reported other blocks.
    fn note_sack_block(&mut self, block: (u64, u64)) {
        if !self.neg.sack {
            return;
        }
        // Blocks merged into `block` disappear.
        self.sack_recent
            .retain(|&(s, e)| e < block.0 || s > block.1);
        self.sack_recent.insert(0, block);
        self.sack_recent.truncate(4);
    }

    /// Sequence numbers of the current SACK blocks (RFC 2018 §4), most
    /// recent first.
    pub(super) fn sack_block_seqs(&self) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        self.sack_recent
            .iter()
            .map(|&(s, e)| (self.off_to_seq(s), self.off_to_seq(e)))
    }

    /// Whether a SYN for this TIME-WAIT connection may open a new
    /// incarnation (RFC 6191 with timestamps; otherwise RFC 9293 §3.10.7.4 /
    /// BSD: the new ISN lies beyond the old RCV.NXT).
    pub(crate) fn time_wait_accepts(&self, syn: &TcpRepr) -> bool {
        if self.state != State::TimeWait {
            return false;
        }
        match (self.neg.timestamps, syn.options.timestamp, self.ts_recent) {
            (true, Some(ts), Some((recent, _))) => (ts.tsval.wrapping_sub(recent) as i32) > 0,
            _ => syn.seq > self.rcv_nxt,
        }
    }
}
