//! Segment construction: what to send next (control segments,
//! retransmissions, new data, probes, ACKs), sender SWS avoidance and Nagle
//! (RFC 9293 §3.8.6.2.1, §3.7.4), receiver window selection (§3.8.6.2.2,
//! RFC 7323 §2), SACK option generation (RFC 2018 §4, RFC 2883 §4).

use super::{Connection, Probe, Recovery, State};
use crate::time::Instant;
use crate::timer::Timer;
use hollywood_wire::{SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp};

/// Bytes of the timestamps option on every segment once negotiated
/// (10, padded to 12; RFC 7323 Appendix A layout).
const TS_OPT_LEN: usize = 12;

impl Connection {
    /// The next segment to send, if any: its header is returned and its
    /// payload written to `payload` (cleared first). Call until `None`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, payload: &mut Vec<u8>) -> Option<TcpRepr> {
        payload.clear();
        self.pacing_at = None;
        self.update_live_window(now);
        let repr = self.next_segment(now, payload);
        if let Some(r) = &repr {
            self.after_send(r, payload.len());
            // PRR's prr_out (RFC 6937 §3.1).
            self.on_segment_sent(r, payload.len());
        } else {
            self.check_app_limited();
        }
        self.arm_timers(now);
        repr
    }

    /// Delivery-rate estimation (draft-ietf-ccwg-bbr-01 §4.5.2.4,
    /// `CheckIfApplicationLimited`): the sender ran out of data while the
    /// window would allow more and no loss waits for its retransmission.
    fn check_app_limited(&mut self) {
        if !self.can_send_data_state() || self.pacing_at.is_some() || self.has_unsent() {
            return;
        }
        let pipe = self.pipe();
        let lost_waiting = self.rtxq.lost_bytes() > self.rtxq.retrans_bytes();
        // The live-stream window's floor (`crate::live`) is window too.
        if !lost_waiting && pipe < self.cc.cwnd().max(self.live_window()) {
            self.rate.on_app_limited(pipe as u64);
        }
    }

    /// Pacing gate for a data segment of `len` bytes (`crate::pacing`):
    /// `true` if it may go now; otherwise the pacer's release time is
    /// kept for the timer and `false` returned. Consumes nothing.
    fn paced(&mut self, now: Instant, len: usize) -> bool {
        let Some(rate) = self.pacing_rate() else {
            return true;
        };
        let quantum = self
            .cc
            .send_quantum()
            .unwrap_or_else(|| crate::pacing::default_quantum(rate, self.neg.smss));
        match self.pacer.check(now, rate, quantum, len.max(1)) {
            Ok(()) => true,
            Err(t) => {
                self.pacing_at = Some(self.pacing_at.map_or(t, |p| p.min(t)));
                false
            }
        }
    }

    /// Bookkeeping for a data segment of `seq_len` sequence-space bytes
    /// about to leave: the congestion controller's `on_send`, the
    /// delivery-rate stamp, the pacer.
    fn on_data_sent(&mut self, now: Instant, seq_len: usize) -> crate::delivery::TxState {
        let inflight = self.pipe() as u64;
        let app_limited = self.rate.is_app_limited();
        self.cc.on_send(now, inflight, seq_len, app_limited);
        if self.pacing_rate().is_some() {
            self.pacer.on_sent(seq_len);
        }
        self.rate.on_send(now, inflight, seq_len as u64)
    }

    /// A RST is waiting (after `abort`, or in answer to a bad segment).
    pub(crate) fn rst_pending(&self) -> bool {
        self.rst_out.is_some()
    }

    fn next_segment(&mut self, now: Instant, payload: &mut Vec<u8>) -> Option<TcpRepr> {
        if let Some((seq, ack)) = self.rst_out.take() {
            return Some(self.rst_repr(seq, ack));
        }
        match self.state {
            State::Closed | State::Listen => return None,
            State::SynSent => return self.syn_segment(now, false),
            State::SynReceived => {
                if self.syn_pending {
                    return self.syn_segment(now, true);
                }
                return self.ack.now.then(|| self.ack_repr(now));
            }
            State::TimeWait => return self.ack.now.then(|| self.ack_repr(now)),
            _ => {}
        }
        let sending = self.can_send_data_state();
        // 1. A retransmission that does not wait for the window: fast
        //    retransmit (RFC 5681 §3.2 step 2), NewReno partial ACK (RFC 6582
        //    §3.2), RTO (RFC 6298 §5.4), zero-window probe retransmission.
        if let Some(seq) = self.pending_rtx {
            if sending && seq >= self.snd_una {
                let i = self.rtxq.index_from(seq);
                let len = self.rtxq.get(i).map_or(0, |s| s.seq_len());
                if self.paced(now, len) {
                    self.pending_rtx = None;
                    if let Some(r) = self.retransmit(now, i, payload) {
                        return Some(r);
                    }
                }
            } else {
                self.pending_rtx = None;
            }
        }
        // 2. SACK information is reported at once in a pure ACK, before any
        //    full-sized data segment that would have no room for it
        //    (RFC 2018 §4, RFC 5681 §4.2).
        if self.ack.now && self.neg.sack && (!self.dsack.is_empty() || !self.sack_recent.is_empty())
        {
            return Some(self.ack_repr(now));
        }
        // 3. Loss recovery retransmissions and new data.
        if sending {
            if let Some(r) = self.next_data_segment(now, payload) {
                return Some(r);
            }
        }
        // 4. Probes.
        match self.probe.take() {
            Some(Probe::Keepalive) => {
                self.stats.keepalives_sent += 1;
                // RFC 1122 §4.2.3.6: <SEQ=SND.UNA-1>, no data.
                let seq = self.snd_una - 1;
                return Some(self.data_header(now, seq, TcpFlags::ACK, 0));
            }
            Some(Probe::ZeroWindow) if sending => {
                if let Some(r) = self.zero_window_probe(now, payload) {
                    return Some(r);
                }
            }
            _ => {}
        }
        // 5. A pure ACK or window update.
        if self.ack.now || self.window_update {
            return Some(self.ack_repr(now));
        }
        None
    }

    /// Retransmission or new data, within cwnd (RFC 6675 §5 (C) NextSeg;
    /// RFC 5681 §3.1 after an RTO).
    fn next_data_segment(&mut self, now: Instant, payload: &mut Vec<u8>) -> Option<TcpRepr> {
        let smss = self.neg.smss;
        let avail = self.send_allowance();
        let mut rule3 = None;
        if let Some(i) = self.loss_candidate() {
            let s = *self.rtxq.get(i)?;
            let sack_recovery = matches!(self.recovery, Recovery::Sack { .. });
            // NextSeg considers only sequence numbers below HighACK
            // (the highest SACKed) during SACK recovery; RACK marks losses
            // by time, anywhere (RFC 8985 §6.2).
            let below_high = !sack_recovery
                || self.rack_active()
                || self.rtxq.high_sacked().is_some_and(|h| s.seq < h);
            if s.lost && below_high {
                // Rule (1): the first lost, not yet retransmitted segment.
                if avail >= s.seq_len().clamp(1, smss) && self.paced(now, s.seq_len()) {
                    return self.retransmit(now, i, payload);
                }
                return None;
            }
            // With RACK-TLP only segments deemed lost are retransmitted
            // (RFC 8985 §9.3); the reordering timer and TLP take the place
            // of rule (3).
            if sack_recovery && below_high && !self.rack_active() {
                rule3 = Some(i);
            }
        }
        // Rule (2): new data. A Hollywood sender's next message gets its
        // sequence numbers now, if it can go (thesis §4.2, expiry before
        // sequence numbers).
        if self.config.hollywood.inconsistent_retransmissions {
            if let Some(h) = self.next_record_hint() {
                if !self.paced(now, h.min(smss)) {
                    return None;
                }
            }
            self.refill(now, avail, false);
        }
        if let Some((len, fin)) = self.new_segment(avail, false) {
            if !self.paced(now, len + fin as usize) {
                return None;
            }
            return Some(self.transmit_new(now, len, fin, payload));
        }
        // Rule (3): an un-SACKed segment not yet deemed lost.
        if let Some(i) = rule3 {
            let len = self.rtxq.get(i).map_or(0, |s| s.seq_len());
            if avail >= smss && self.paced(now, len) {
                return self.retransmit(now, i, payload);
            }
        }
        None
    }

    /// The first outstanding segment at or after the recovery cursor that is
    /// neither SACKed nor already retransmitted; advances the cursor over
    /// the ones skipped so that each is visited once per episode.
    fn loss_candidate(&mut self) -> Option<usize> {
        let cursor = match self.recovery {
            Recovery::Sack { high_rxt } => high_rxt,
            Recovery::Loss { cursor } => cursor,
            _ => return None,
        };
        let from = self.rtxq.index_from(cursor.max(self.snd_una));
        let i = (from..self.rtxq.len())
            .find(|&k| self.rtxq.get(k).is_some_and(|s| !s.sacked && !s.retrans))?;
        let seq = self.rtxq.get(i)?.seq;
        match &mut self.recovery {
            Recovery::Sack { high_rxt } => *high_rxt = (*high_rxt).max(seq),
            Recovery::Loss { cursor } => *cursor = (*cursor).max(seq),
            _ => {}
        }
        Some(i)
    }

    /// Whether sender SWS avoidance / Nagle holds back the unsent data
    /// while nothing is outstanding (so the override timer must run).
    pub(super) fn sws_blocked(&self) -> bool {
        self.can_send_data_state() && self.new_segment(usize::MAX, true).is_none()
    }

    /// Length and FIN flag of the next new segment, if one may go now
    /// (`avail` = cwnd - pipe). With `queue_head`, an empty send buffer
    /// counts the head of the Hollywood message queue as its next record
    /// (to decide whether the sender is blocked; only bytes in the send
    /// buffer are ever sent).
    fn new_segment(&self, avail: usize, queue_head: bool) -> Option<(usize, bool)> {
        if self.fin_sent {
            return None;
        }
        let smss = self.neg.smss;
        let end = self.snd_buf.end_seq();
        let mut unsent = end.diff(self.snd_nxt).max(0) as usize; // D
        let mut head_record = None;
        if unsent == 0 && queue_head {
            if let Some(h) = self.next_record_hint() {
                unsent = h;
                head_record = Some(h);
            }
        }
        let wnd_end = self.snd_una + self.snd_wnd;
        let usable = wnd_end.diff(self.snd_nxt).max(0) as usize; // U
        let closing = self.fin_queued;
        let queue_empty = self.messages.queued_messages() == 0;
        if unsent == 0 {
            // A FIN alone needs one unit of window (the persist timer
            // probes a closed window); it follows every queued message.
            return (closing && queue_empty && usable >= 1).then_some((0, true));
        }
        let len = if self.config.consistent_segmentation {
            // Thesis §4.2: a segment never spans two records; records
            // larger than the MSS fragment at the MSS. Nagle does not apply;
            // a fragment waits for a window that takes it whole.
            // The override timeout (4) sends the fragment into a window too
            // small for it rather than split it.
            let frag = head_record
                .or_else(|| self.snd_buf.record_remaining(self.snd_nxt))
                .unwrap_or(unsent)
                .min(smss);
            if frag > usable && !self.force_send {
                return None;
            }
            frag
        } else {
            let len = unsent.min(smss).min(usable);
            if len == 0 {
                return None;
            }
            // RFC 9293 §3.8.6.2.1 sender SWS avoidance; the bracketed
            // "SND.NXT = SND.UNA" conditions are Nagle (§3.7.4), which a
            // pending FIN turns off (Linux pushes on close).
            let idle = self.flight_size() == 0;
            let nagle_ok = idle || !self.config.nagle || closing;
            let min_du = unsent.min(usable);
            let ok = len >= smss // (1) a full segment
                || (nagle_ok && unsent <= usable) // (2) all pushed data fits
                || (nagle_ok && min_du >= self.max_snd_wnd / 2) // (3) half the max window
                || self.force_send; // (4) override timeout
            if !ok {
                return None;
            }
            len
        };
        // Congestion window (RFC 5681 §3.1 / RFC 6675 §5 (C)).
        if len > avail {
            return None;
        }
        let fin = closing && queue_empty && self.snd_nxt + len == end && usable > len;
        Some((len, fin))
    }

    /// First transmission of `len` bytes (plus FIN) at SND.NXT.
    fn transmit_new(
        &mut self,
        now: Instant,
        len: usize,
        fin: bool,
        payload: &mut Vec<u8>,
    ) -> TcpRepr {
        let seq = self.snd_nxt;
        self.prepare_first_transmit(now, seq, len);
        self.snd_buf.read(seq, len, payload);
        let tx = self.on_data_sent(now, len + fin as usize);
        self.rtxq.push(seq, len as u32, fin, now);
        self.rtxq.stamp(self.rtxq.len() - 1, tx);
        self.snd_nxt = seq + len + fin as usize;
        self.fin_sent |= fin;
        self.force_send = false;
        if !self.neg.timestamps && self.timed.is_none() && len > 0 {
            // RFC 6298 §3: time one segment per RTT.
            self.timed = Some((seq + len, now));
        }
        let mut flags = TcpFlags::ACK;
        if fin {
            flags |= TcpFlags::FIN;
        }
        if len > 0 && seq + len == self.snd_buf.end_seq() {
            flags |= TcpFlags::PSH;
        }
        self.data_header(now, seq, flags, len)
    }

    /// Retransmit outstanding segment `i` with its original boundaries.
    fn retransmit(&mut self, now: Instant, i: usize, payload: &mut Vec<u8>) -> Option<TcpRepr> {
        let s = *self.rtxq.get(i)?;
        if self.seq_gap_expired(now, &s) {
            return Some(self.seq_gap_skip(now, i));
        }
        if self.config.hollywood.seq_gap_deadlines && !s.fin && !self.messages.is_empty() {
            let owd = self.one_way_delay();
            if self
                .messages
                .make()
                .skip_expired(now, owd, s.seq, s.len as usize)
            {
                self.drain_message_events();
                return Some(self.seq_gap_skip(now, i));
            }
        }
        let len = s.len as usize;
        if s.times_sent == 1 {
            self.stats.data_bytes_first_retransmitted += len as u64;
        }
        // Whether the receiver showed that it lacks this segment (duplicate
        // ACKs, SACK or RACK loss marks, a NewReno partial ACK), or the
        // retransmission is a guess that an ACK loss can explain as well
        // (RTO and the go-back-N after it, a tail loss probe).
        let evidence = match self.recovery {
            Recovery::NewReno { .. } => true,
            Recovery::Sack { .. } => self.rack.tlp_retrans != Some((s.seq, s.end())),
            Recovery::Open | Recovery::Loss { .. } => false,
        };
        self.prepare_retransmit(now, s.seq, len, evidence);
        self.snd_buf.read(s.seq, len, payload);
        if self.config.hollywood.always_inconsistent
            && len > 0
            && !self.rewriting_stopped
            && s.times_sent > crate::hollywood::FALLBACK_AFTER
        {
            // The segment went out inconsistently FALLBACK_AFTER times and
            // is still not acknowledged: a middlebox drops retransmissions
            // whose payload differs (thesis §4.5). Send the original and
            // stop (as the Hollywood sender policy does for its rewrites).
            self.stop_rewriting();
        }
        if self.config.hollywood.always_inconsistent && len > 0 && !self.rewriting_stopped {
            // Thesis §5.3: the test server's retransmissions always differ
            // from the original (same length, same sequence numbers); the
            // send buffer keeps the original, so every retransmission of a
            // segment is the same complement.
            for b in payload.iter_mut() {
                *b ^= 0xff;
            }
            self.stats.always_ir_segments += 1;
        }
        let tx = self.on_data_sent(now, s.seq_len());
        self.rtxq.on_retransmit(i, now);
        self.rtxq.stamp(i, tx);
        if s.seq == self.snd_una {
            // Retransmitting the oldest segment restarts the RTO, as Linux
            // does (tcp_xmit_retransmit_queue): left running from the last
            // cumulative ACK, it would expire before this retransmission
            // could be acknowledged whenever loss detection took longer than
            // RTO - RTT (RACK or three duplicate ACKs of a thin stream on a
            // long path: a loss found RTT + 50 ms after it was sent at
            // 60 packets/s and 200 ms RTT, RTO 233 ms), and the spurious
            // RTO's D-SACK widens RACK's reordering window for the next 16
            // recoveries (RFC 8985 §6.2 step 4).
            //
            // Also while RACK's reordering timer runs for a later segment.
            // Linux skips the restart then only because that timer and the
            // RTO share one slot (`icsk_pending`); when the reordering timer
            // fires it re-arms the RTO from the head's latest transmission
            // (`tcp_rack_reo_timeout` -> `tcp_rearm_rto`), so the RTO still
            // counts from this retransmission. Here the timers are separate
            // and nothing re-arms it: on real packets at 300 ms RTT (lab,
            // issue 34) the RTO fired 1-280 ms after such a retransmission,
            // before its ACK could return, 8 times in 20 s; each spurious
            // RTO collapsed the window and its D-SACK widened the
            // reordering window, which made the next one likelier.
            self.timers.set(Timer::Retransmit, now + self.rtt.rto());
        }
        if self.timed.is_some_and(|(end, _)| s.seq < end) {
            // RFC 6298 §3 (Karn): never time a retransmitted segment.
            self.timed = None;
        }
        self.record_retransmission(s.seq, s.end());
        match &mut self.recovery {
            Recovery::Sack { high_rxt } => *high_rxt = (*high_rxt).max(s.end()),
            Recovery::Loss { cursor } => *cursor = (*cursor).max(s.end()),
            _ => {}
        }
        let mut flags = TcpFlags::ACK;
        if s.fin {
            flags |= TcpFlags::FIN;
        }
        if len > 0 {
            flags |= TcpFlags::PSH;
        }
        Some(self.data_header(now, s.seq, flags, len))
    }

    /// Sequence-gap sender ([TCP-video] §7.2, experimental): whether segment
    /// `s` is past its deadline and is skipped rather than retransmitted.
    fn seq_gap_expired(&self, now: Instant, s: &crate::sack::Sent) -> bool {
        let Some(lifetime) = self.config.hollywood.seq_gap_lifetime else {
            return false;
        };
        if self.config.hollywood.seq_gap_deadlines
            && self.config.hollywood.inconsistent_retransmissions
        {
            // The messages' own deadlines decide (`MessageTable::skip_expired`):
            // a skip the table did not see would count its messages as
            // delivered once the hole is acknowledged.
            return false;
        }
        // A FIN cannot be skipped: the receiver must see it.
        !s.fin && s.len > 0 && now.saturating_duration_since(s.first_sent) >= lifetime
    }

    /// [TCP-video] §7.2: "the sender discards the packets associated with the
    /// current data section" and "explicitly notifies the receiver of the
    /// next expected sequence number ... by utilizing the TCP options".
    /// The next expected sequence is the end of the run of skipped and
    /// SACKed segments from SND.UNA: a byte below it that the receiver
    /// lacks is one the sender gave up (with a lifetime since the first
    /// transmission the older bytes are expired too, but not yet skipped
    /// if their own retransmission has not come up; with the
    /// application's deadlines an older message may still be live, e.g.
    /// an I-frame that later frames depend on). In place of
    /// the retransmission a pure ACK carries the option (its sequence
    /// number is SND.NXT, inside the receiver's window, so a receiver
    /// processes it); the segment is marked as retransmitted so the
    /// recovery cursor moves on, and RACK or the RTO calls here again if
    /// the skip is not acknowledged.
    fn seq_gap_skip(&mut self, now: Instant, i: usize) -> TcpRepr {
        let s = *self.rtxq.get(i).expect("caller checked");
        let end = s.end();
        self.seq_gap_skipped.retain(|&(_, e)| e > self.snd_una);
        if self.seq_gap_skipped.back().is_none_or(|&(_, e)| e < s.seq) {
            self.seq_gap_skipped.push_back((s.seq, end));
        } else {
            // Skips come in sequence order within a recovery, but a later
            // recovery may skip below an earlier skip: keep the ranges
            // sorted and merged.
            let mut v: Vec<_> = self.seq_gap_skipped.drain(..).collect();
            v.push((s.seq, end));
            v.sort_by_key(|&(a, _)| a.diff(self.snd_una));
            for (a, b) in v {
                match self.seq_gap_skipped.back_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => self.seq_gap_skipped.push_back((a, b)),
                }
            }
        }
        self.stats.seq_gap_skips += 1;
        self.rtxq.on_retransmit(i, now);
        if self.timed.is_some_and(|(e, _)| s.seq < e) {
            self.timed = None;
        }
        match &mut self.recovery {
            Recovery::Sack { high_rxt } => *high_rxt = (*high_rxt).max(end),
            Recovery::Loss { cursor } => *cursor = (*cursor).max(end),
            _ => {}
        }
        // At SND.NXT while the peer's window has room there; with the
        // window full, SND.NXT is past it and the receiver would reject the
        // segment (RFC 9293 §3.10.7.4), so at SND.UNA: the skipped hole
        // starts there, so it is the receiver's RCV.NXT, acceptable even
        // with a zero window.
        let seq = if self.snd_nxt < self.snd_una + self.snd_wnd {
            self.snd_nxt
        } else {
            self.snd_una
        };
        self.data_header(now, seq, TcpFlags::ACK, 0)
    }

    /// The end of the run of skipped and SACKed segments from SND.UNA
    /// (`None`: SND.UNA itself is neither).
    fn seq_gap_reach(&self) -> Option<SeqNumber> {
        if self.seq_gap_skipped.is_empty() {
            return None;
        }
        let mut ne = self.snd_una;
        let mut skipped = self.seq_gap_skipped.iter().peekable();
        loop {
            let before = ne;
            while let Some(&&(a, b)) = skipped.peek() {
                if a > ne {
                    break;
                }
                ne = ne.max(b);
                skipped.next();
            }
            let mut k = self.rtxq.index_from(ne);
            while let Some(s) = self.rtxq.get(k) {
                if s.seq > ne || !s.sacked {
                    break;
                }
                ne = ne.max(s.end());
                k += 1;
            }
            if ne == before {
                break;
            }
        }
        (ne > self.snd_una).then_some(ne)
    }

    /// RFC 9293 §3.8.6.1: send one octet of new data (or the FIN) into
    /// the closed window.
    fn zero_window_probe(&mut self, now: Instant, payload: &mut Vec<u8>) -> Option<TcpRepr> {
        if self.fin_sent || self.flight_size() > 0 {
            return None;
        }
        if self.config.hollywood.inconsistent_retransmissions {
            // The probe carries the next message (thesis §4.2: records are
            // never split), which gets its sequence numbers now.
            self.refill(now, 0, true);
        }
        let unsent = self.snd_buf.end_seq().diff(self.snd_nxt).max(0) as usize;
        if unsent > 0 {
            // One octet; with consistent segmentation the whole first
            // fragment, so that records are never split (thesis §4.2).
            let len = if self.config.consistent_segmentation {
                self.snd_buf
                    .record_remaining(self.snd_nxt)
                    .unwrap_or(1)
                    .min(self.neg.smss)
                    .max(1)
            } else {
                1
            };
            let fin = self.fin_queued && unsent == len && self.messages.queued_messages() == 0;
            self.probe_seq = Some(self.snd_nxt);
            Some(self.transmit_new(now, len, fin, payload))
        } else if self.fin_queued && self.messages.queued_messages() == 0 {
            Some(self.transmit_new(now, 0, true, payload))
        } else {
            None
        }
    }

    /// SYN (active) or SYN-ACK (passive / simultaneous open) with our
    /// options (RFC 9293 §3.7.1, RFC 7323 §2.2 / §3.2, RFC 2018 §2).
    fn syn_segment(&mut self, now: Instant, synack: bool) -> Option<TcpRepr> {
        if !self.syn_pending {
            return None;
        }
        self.syn_pending = false;
        if self.syn_sent_at.is_none() {
            self.syn_sent_at = Some(now);
        }
        self.snd_nxt = self.iss + 1;
        let window = self.syn_window();
        let mut o = TcpOptions {
            mss: Some(self.local_mss()),
            ..TcpOptions::default()
        };
        let mut flags = TcpFlags::SYN;
        let mut ack = SeqNumber(0);
        if synack {
            // Answer only what the peer offered (and we want).
            flags |= TcpFlags::ACK;
            ack = self.rcv_nxt;
            if self.neg.window_scaling {
                o.window_scale = Some(self.neg.rcv_wscale);
            }
            o.sack_permitted = self.neg.sack;
            if self.neg.timestamps {
                let tsecr = self.ts_recent.map_or(0, |(r, _)| r);
                o.timestamp = Some(Timestamp {
                    tsval: self.ts_now(now),
                    tsecr,
                });
            }
            self.rcv_adv = self.rcv_nxt + window as usize;
        } else {
            if self.config.window_scaling {
                o.window_scale = Some(self.rcv_wscale_offer);
            }
            o.sack_permitted = self.config.sack;
            if self.config.timestamps {
                o.timestamp = Some(Timestamp {
                    tsval: self.ts_now(now),
                    tsecr: 0,
                });
            }
        }
        // RFC 6298 §5.1: start the retransmission timer.
        self.timers.set(Timer::Retransmit, now + self.rtt.rto());
        Some(TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq: self.iss,
            ack,
            flags,
            window,
            urgent: 0,
            options: o,
        })
    }

    /// The window field of a SYN or SYN-ACK: never scaled (RFC 7323 §2.2).
    pub(super) fn syn_window(&self) -> u16 {
        self.rcv_space().min(65_535) as u16
    }

    /// RST segment `<SEQ=seq>[<ACK=ack>]<CTL=RST[,ACK]>`.
    fn rst_repr(&self, seq: SeqNumber, ack: Option<SeqNumber>) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq,
            ack: ack.unwrap_or(SeqNumber(0)),
            flags: if ack.is_some() {
                TcpFlags::RST | TcpFlags::ACK
            } else {
                TcpFlags::RST
            },
            window: 0,
            urgent: 0,
            options: TcpOptions::default(),
        }
    }

    /// A pure ACK `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, or with SEQ at
    /// the right edge of the peer's window (SND.UNA + SND.WND) when
    /// SND.NXT lies past it (the window shrank, or data sent into it is
    /// still missing at the peer while its window is closed): the
    /// receiver's acceptability test (RFC 9293 §3.10.7.4) rejects a
    /// segment beyond its window, and Linux drops such an ACK whole, ACK
    /// field included (`tcp_sequence`), however RFC 9293 asks receivers to
    /// take valid ACKs even with a zero window. Linux picks its own ACKs'
    /// sequence number the same way (`tcp_acceptable_seq`).
    fn ack_repr(&mut self, now: Instant) -> TcpRepr {
        let edge = self.snd_una + self.snd_wnd;
        let seq = if self.snd_nxt > edge {
            edge
        } else {
            self.snd_nxt
        };
        self.data_header(now, seq, TcpFlags::ACK, 0)
    }

    /// Header of a synchronized-state segment: ACK, window, timestamps and
    /// as many SACK blocks as fit beside `payload_len` data bytes.
    fn data_header(
        &mut self,
        now: Instant,
        seq: SeqNumber,
        flags: TcpFlags,
        payload_len: usize,
    ) -> TcpRepr {
        let window = self.select_window();
        let mut options = TcpOptions::default();
        if self.neg.timestamps {
            let tsecr = self.ts_recent.map_or(0, |(r, _)| r);
            options.timestamp = Some(Timestamp {
                tsval: self.ts_now(now),
                tsecr,
            });
        }
        // Sequence-gap sender ([TCP-video] §7.2): announce the next expected
        // sequence (`seq_gap_reach`) while skipped ranges lie above
        // SND.UNA, on every
        // segment where the 8-byte option fits within the MSS (a
        // full-sized segment has no room; the skip ACK always carries it).
        if !self.seq_gap_skipped.is_empty() {
            self.seq_gap_skipped.retain(|&(_, e)| e > self.snd_una);
        }
        if let Some(nx) = self.seq_gap_reach() {
            let ts = if self.neg.timestamps { TS_OPT_LEN } else { 0 };
            let budget = (self.neg.peer_mss as usize).min(self.local_mss() as usize);
            let len = hollywood_wire::tcp::NEXT_EXPECTED_LEN;
            if payload_len == 0 || ts + len + payload_len <= budget {
                options.next_expected = Some(nx);
            }
        }
        if self.neg.sack {
            self.add_sack_blocks(&mut options, payload_len);
        }
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq,
            ack: self.rcv_nxt,
            flags: flags | TcpFlags::ACK,
            window,
            urgent: 0,
            options,
        }
    }

    /// RFC 2018 §4 / RFC 2883 §4: D-SACK first, then the block with the
    /// most recent segment, then older blocks; 4 blocks fit without
    /// timestamps, 3 with; a data segment carries only what fits beside its
    /// payload within the peer's MSS (so segment sizes never change).
    fn add_sack_blocks(&mut self, o: &mut TcpOptions, payload_len: usize) {
        if self.dsack.is_empty() && self.sack_recent.is_empty() {
            return;
        }
        let ts = if self.neg.timestamps { TS_OPT_LEN } else { 0 };
        let nx = if o.next_expected.is_some() {
            hollywood_wire::tcp::NEXT_EXPECTED_LEN
        } else {
            0
        };
        let max_by_header = o.sack_capacity();
        let budget = (self.neg.peer_mss as usize).min(self.local_mss() as usize);
        let room = budget.saturating_sub(ts + nx + payload_len);
        let fit = if payload_len == 0 {
            max_by_header
        } else {
            (room.saturating_sub(4) / 8).min(max_by_header)
        };
        if fit == 0 {
            return;
        }
        let mut blocks = [SackBlock::default(); 4];
        let mut n = 0;
        if let Some((l, r)) = self.dsack.pop_front() {
            blocks[0] = SackBlock { left: l, right: r };
            n = 1;
            self.stats.dsack_blocks_sent += 1;
        }
        for (l, r) in self.sack_block_seqs() {
            if n >= fit {
                break;
            }
            blocks[n] = SackBlock { left: l, right: r };
            n += 1;
        }
        o.set_sacks(&blocks[..n]);
        self.stats.sack_blocks_sent += n as u64;
    }

    /// Largest window the receive buffer can back. With scaling, the
    /// buffer keeps `2^shift - 1` bytes spare so that rounding the field up
    /// (to avoid shrinking the window) never offers space we lack.
    fn rcv_window_cap(&self) -> usize {
        let buf = self.rcv_space();
        if self.neg.window_scaling {
            let ws = self.neg.rcv_wscale;
            buf.saturating_sub((1usize << ws) - 1)
                .min(65_535usize << ws)
        } else {
            buf.min(65_535)
        }
    }

    /// Free window space right now and the window currently advertised.
    fn window_candidates(&self) -> (usize, usize) {
        let cap = self.rcv_window_cap();
        // Unread in-order data occupies the buffer. With out-of-order
        // delivery (thesis §4.3) the same bytes count until the application
        // drained the segment queue, so the window is standard TCP's.
        let free = cap.saturating_sub(self.rcv_buf.ready());
        let cur = self.rcv_adv.diff(self.rcv_nxt).max(0) as usize;
        (free, cur)
    }

    /// The window field to send (RFC 9293 §3.8.6.2.2 receiver SWS
    /// avoidance: move the right edge only by at least
    /// min(RCV.BUFF/2, MSS); never shrink the window; RFC 7323 §2.3
    /// scaling). Records the advertised right edge.
    fn select_window(&mut self) -> u16 {
        let ws = self.neg.rcv_wscale as u32;
        let (free, cur) = self.window_candidates();
        let thresh = (self.rcv_window_cap() / 2).min(self.local_mss() as usize);
        let wnd = if free >= cur.saturating_add(thresh) {
            free
        } else {
            cur
        };
        // Round up so that the advertised right edge never moves left.
        let field = (wnd.div_ceil(1usize << ws)).min(65_535);
        let adv = field << ws;
        let edge = self.rcv_nxt + adv;
        if edge > self.rcv_adv {
            self.rcv_adv = edge;
        }
        field as u16
    }

    /// After `recv`: announce a window that opened enough (receiver SWS
    /// threshold, and at least doubled, as Linux does).
    pub(super) fn check_window_update(&mut self) {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return;
        }
        let (free, cur) = self.window_candidates();
        let thresh = (self.rcv_window_cap() / 2).min(self.local_mss() as usize);
        if free >= cur.saturating_add(thresh) && free >= cur.saturating_mul(2) {
            self.window_update = true;
        }
    }

    /// Bookkeeping for a segment handed to the caller.
    fn after_send(&mut self, r: &TcpRepr, payload_len: usize) {
        self.stats.segments_sent += 1;
        self.stats.bytes_sent += payload_len as u64;
        if r.flags.ack() && !r.flags.rst() {
            self.last_ack_sent = r.ack;
            let pure = payload_len == 0 && !r.flags.syn() && !r.flags.fin();
            if pure {
                self.stats.acks_sent += 1;
                if self.ack.by_timer {
                    self.stats.delayed_acks_sent += 1;
                }
            }
            // Any ACK-bearing segment satisfies the owed ACK; a D-SACK
            // still pending gets an ACK of its own (RFC 2883 §4: one
            // duplicate range per ACK).
            self.ack.now = !self.dsack.is_empty() && self.neg.sack;
            self.ack.owed = false;
            self.ack.unacked_bytes = 0;
            self.ack.by_timer = false;
            self.window_update = false;
            self.timers.stop(Timer::DelayedAck);
        }
    }
}
