//! The Hollywood choke points (docs/ARCHITECTURE.md, "Hollywood hooks"):
//! every first transmission, every retransmission and every arriving data
//! segment passes through one function here (thesis §4.2, §4.3).

use super::*;

impl Connection {
    // ------------------------------------------------------------------
    // Hollywood choke points (docs/ARCHITECTURE.md "Hollywood hooks")
    // ------------------------------------------------------------------

    /// Every first transmission of `len` data bytes at `seq` passes here
    /// right before the segment is built (thesis §4.2: a message whose
    /// lifetime passed before its first transmission may be replaced here).
    pub(super) fn prepare_first_transmit(&mut self, now: Instant, seq: SeqNumber, len: usize) {
        self.stats.data_bytes_first_sent += len as u64;
        if self.config.hollywood.inconsistent_retransmissions && !self.messages.is_empty() {
            let owd = self.one_way_delay();
            let rewrites = self.messages.make().on_first_transmit(now, owd, seq, len);
            self.apply_rewrites(rewrites);
        }
    }

    /// Write the Hollywood policy's replacements into the send buffer and
    /// report expired messages. A rewrite always covers exactly one slot
    /// inside unacknowledged data, so it cannot fail; if it ever did, the
    /// original bytes stay (standard retransmission) and nothing is lost.
    pub(super) fn apply_rewrites(&mut self, rewrites: Vec<crate::hollywood::Rewrite>) {
        for r in rewrites {
            if r.keep_original {
                let mut old = Vec::with_capacity(r.bytes.len());
                self.snd_buf.read(r.seq, r.bytes.len(), &mut old);
                self.messages.make().set_original(r.seq, old);
            }
            let ok = self.snd_buf.rewrite(r.seq, &r.bytes).is_ok();
            debug_assert!(ok, "rewrite outside the send buffer");
        }
        self.drain_message_events();
    }

    /// Hand the message table's Expired reports (and a middlebox fallback)
    /// to the application.
    pub(super) fn drain_message_events(&mut self) {
        while let Some((id, seq, len, first)) = self.messages.get_mut().and_then(|t| t.poll_sent())
        {
            self.push_event(Event::MessageSent {
                id,
                seq,
                len,
                first,
            });
        }
        while let Some(e) = self.messages.get_mut().and_then(|t| t.poll_expired()) {
            self.push_event(Event::Expired(e));
        }
        if self.messages.get_mut().is_some_and(|t| t.take_fallback()) {
            self.stop_rewriting();
        }
    }

    /// Inconsistent retransmissions stop on this connection (a middlebox
    /// dropped them; thesis §4.5): once, with an event.
    pub(crate) fn stop_rewriting(&mut self) {
        if !self.rewriting_stopped {
            self.rewriting_stopped = true;
            self.stats.rewriting_stopped = 1;
            self.push_event(Event::RewritingStopped);
        }
    }

    /// The connection failed or was aborted: queued messages never went out.
    pub(super) fn abandon_messages(&mut self) {
        if let Some(t) = self.messages.get_mut() {
            t.abandon();
        }
        self.drain_message_events();
    }

    /// Every retransmission (fast retransmit, NewReno partial ACK, SACK
    /// NextSeg, RTO, zero-window probe) of `len` bytes at `seq` passes here
    /// right before the segment is built; the bytes may be rewritten in
    /// place through `SendBuffer::rewrite` (thesis §4.2, inconsistent
    /// retransmissions). `evidence`: the receiver showed it lacks the
    /// segment (see `MessageTable::on_retransmit`).
    pub(super) fn prepare_retransmit(
        &mut self,
        now: Instant,
        seq: SeqNumber,
        len: usize,
        evidence: bool,
    ) {
        self.stats.retransmitted_segments += 1;
        self.stats.data_bytes_retransmitted += len as u64;
        if self.config.hollywood.inconsistent_retransmissions
            && !self.config.hollywood.seq_gap_deadlines
            && !self.messages.is_empty()
        {
            // thesis §4.2: "the estimate of one-way delay is used to
            // determine if the message will arrive within its lifetime"
            // (see `one_way_delay` for the estimate).
            let owd = self.one_way_delay();
            // The path's loss rate from first transmissions only: a slot
            // that keeps failing must not explain itself.
            let path_loss = self.stats.data_bytes_first_retransmitted as f64
                / self.stats.data_bytes_first_sent.max(1) as f64;
            let how = crate::hollywood::Resend {
                // A copy counts as delivered with its slot only if a
                // D-SACK could say otherwise (RFC 2883 needs SACK): without
                // SACK a delayed original that the receiver kept instead
                // would hide the copy's loss (found by `hollywood_pair`).
                evidence: evidence && self.neg.sack,
                tsval: self.neg.timestamps.then(|| self.ts_now(now)),
                path_loss,
            };
            let rewrites = self.messages.make().on_retransmit(now, owd, seq, len, how);
            self.apply_rewrites(rewrites);
        }
    }

    /// Every data segment that passed the acceptability test (RFC 9293
    /// §3.10.7.4) is seen here with its own sequence number, before
    /// reassembly (thesis §4.3, out-of-order delivery). ACK, SACK and window
    /// generation do not depend on it.
    pub(super) fn on_data_segment(&mut self, now: Instant, seq: SeqNumber, payload: &[u8]) {
        if !self.config.hollywood.out_of_order_delivery || payload.is_empty() {
            return;
        }
        // `receive_data` checked `ooo_copy_fits` for the whole segment;
        // this is its accepted part.
        let out_of_order = seq > self.data_nxt();
        self.ooo_stats.segments += 1;
        self.ooo_stats.bytes += payload.len() as u64;
        self.ooo_stats.out_of_order += out_of_order as u64;
        self.ooo_bytes += payload.len() + SEGMENT_COPY_OVERHEAD;
        let mut buf = self.ooo_spare.pop().unwrap_or_default();
        buf.extend_from_slice(payload);
        self.ooo.push_back(ArrivedSegment {
            seq,
            payload: buf,
            arrival: now,
            out_of_order,
        });
        self.push_event(Event::Readable);
    }

    /// Whether a copy of a `len`-byte segment fits the out-of-order
    /// delivery queue's memory bound: twice the receive buffer, each
    /// segment charged [`SEGMENT_COPY_OVERHEAD`] on top of its bytes (the
    /// window bounds new bytes to one receive buffer; the rest is room for
    /// retransmitted copies of bytes already held). Always true without
    /// out-of-order delivery.
    pub(crate) fn ooo_copy_fits(&self, len: usize) -> bool {
        !self.config.hollywood.out_of_order_delivery
            || len == 0
            || self.ooo_bytes + len + SEGMENT_COPY_OVERHEAD
                <= self.config.recv_buffer.saturating_mul(2)
    }

    /// Overwrite unacknowledged bytes at `seq` in the send buffer (thesis
    /// §4.2). Used by the Hollywood policy from `prepare_retransmit`.
    #[allow(dead_code)]
    pub(crate) fn rewrite(&mut self, seq: SeqNumber, bytes: &[u8]) -> Result<(), Error> {
        self.snd_buf
            .rewrite(seq, bytes)
            .map_err(|_| Error::InvalidState)
    }
}
