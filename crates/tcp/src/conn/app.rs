//! The application side of a [`Connection`] (RFC 9293 §3.10.2–§3.10.5): send
//! and receive bytes or messages, close, abort, and the writable/readable
//! bookkeeping behind them.

use super::*;

impl Connection {
    // ------------------------------------------------------------------
    // Application commands (RFC 9293 §3.10.2 - §3.10.5)
    // ------------------------------------------------------------------

    /// Queue `data` (RFC 9293 §3.10.2 SEND). Accepts as much as the send
    /// buffer has room for and returns the count; each call is one record.
    /// Before ESTABLISHED the data waits for the handshake.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        self.sendable()?;
        if self.messages.queued_messages() > 0 {
            // Bytes written now would overtake the queued messages.
            self.want_writable(1);
            return Err(Error::WouldBlock);
        }
        let room = self.send_free();
        self.write_stream(data, room)
    }

    /// Queue at most `room` bytes of `data` as one record.
    fn write_stream(&mut self, data: &[u8], room: usize) -> Result<usize, Error> {
        let n = self.snd_buf.write(&data[..data.len().min(room)]);
        if n < data.len() {
            self.want_writable(1);
            if n == 0 {
                return Err(Error::WouldBlock);
            }
        }
        Ok(n)
    }

    /// Read in-order data (RFC 9293 §3.10.3 RECEIVE). `Ok(0)` for a
    /// non-empty `buf` means end of stream (the peer's FIN was read);
    /// `Err(WouldBlock)` means no data yet.
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if self.rcv_buf.ready() > 0 {
            let n = self.rcv_buf.read(buf);
            self.readable_queued = false;
            self.check_window_update();
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        self.nothing_ready()
    }

    /// Like [`Connection::recv`] without the copy: consumes up to `max`
    /// in-order bytes in place, handing them to `f` in stream order as one
    /// or two slices of the receive buffer. Same results as `recv` with a
    /// `max`-byte buffer: the count, `Ok(0)` (with `max > 0`) at end of
    /// stream, `Err(WouldBlock)` with no data yet.
    pub fn recv_with(&mut self, max: usize, f: impl FnMut(&[u8])) -> Result<usize, Error> {
        if self.rcv_buf.ready() > 0 && max > 0 {
            let n = self.rcv_buf.read_with(max, f);
            self.readable_queued = false;
            self.check_window_update();
            return Ok(n);
        }
        if max == 0 {
            return Ok(0);
        }
        self.nothing_ready()
    }

    /// What a read finds with no in-order byte ready: end of stream,
    /// the connection's error, or nothing yet.
    fn nothing_ready(&self) -> Result<usize, Error> {
        if self.fin_rcvd {
            return Ok(0);
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.state {
            State::Closed => Err(Error::Closed),
            _ => Err(Error::WouldBlock),
        }
    }

    /// Like [`Connection::recv`], but reads only bytes that first arrived at
    /// one time, and returns that time too (`None` with no data): how long
    /// they waited in the receive buffer (behind a hole, or for the
    /// application) is the reader's `now` minus it (head-of-line-blocking
    /// delay, [RTP-QUIC] §5.1).
    pub fn recv_stamped(&mut self, buf: &mut [u8]) -> Result<(usize, Option<Instant>), Error> {
        if self.rcv_buf.ready() > 0 {
            let (n, t) = self.rcv_buf.read_stamped(buf);
            self.readable_queued = false;
            self.check_window_update();
            return Ok((n, t.map(Instant::from_nanos)));
        }
        self.recv(buf).map(|n| (n, None))
    }

    /// Queue one message (already framed by the intermediary layer, e.g.
    /// `hollywood_msg`) with its metadata (thesis §4.2). All or nothing: the
    /// whole frame is queued or nothing is. With consistent segmentation the
    /// frame starts a new segment and is sent in one segment when it fits
    /// the MSS. The metadata never goes on the wire.
    ///
    /// With inconsistent retransmissions on (the TCP Hollywood sender) the
    /// message waits in a message queue outside the sequence space and gets
    /// sequence numbers only when it is about to be transmitted; if its
    /// lifetime (which starts now) passes first, it is dropped there and
    /// reported with `Event::Expired` (`ExpiryReason::NotSent`). Standard
    /// senders write it to the send buffer at once and ignore the metadata.
    pub fn send_message(
        &mut self,
        now: Instant,
        frame: &[u8],
        meta: MessageMeta,
    ) -> Result<(), SendMessageError> {
        self.send_message_cow(now, std::borrow::Cow::Borrowed(frame), meta)
    }

    /// [`Connection::send_message`] with a frame the caller may hand over:
    /// an owned frame goes into the message queue as it is (no copy); a
    /// standard sender copies it into the send buffer either way. On an
    /// error the frame is dropped.
    pub fn send_message_cow(
        &mut self,
        now: Instant,
        frame: std::borrow::Cow<'_, [u8]>,
        meta: MessageMeta,
    ) -> Result<(), SendMessageError> {
        let ir = self.config.hollywood.inconsistent_retransmissions;
        if ir {
            self.messages
                .check(&meta, frame.len())
                .map_err(SendMessageError::Meta)?;
        } else if frame.is_empty() {
            return Err(SendMessageError::Meta(MetaError::Empty));
        }
        // Why it cannot be sent at all goes before "not now".
        self.sendable().map_err(SendMessageError::State)?;
        if frame.len() > self.snd_buf.capacity() {
            return Err(SendMessageError::TooLarge {
                len: frame.len(),
                capacity: self.snd_buf.capacity(),
            });
        }
        if !ir {
            let room = self.frame_room();
            if room < frame.len() {
                self.want_writable(frame.len());
                return Err(SendMessageError::WouldBlock);
            }
            return match self.write_stream(&frame, room) {
                Ok(n) if n == frame.len() => Ok(()),
                Ok(_) | Err(Error::WouldBlock) => Err(SendMessageError::WouldBlock),
                Err(e) => Err(SendMessageError::State(e)),
            };
        }
        if self.frame_room() < frame.len() {
            self.want_writable(frame.len());
            return Err(SendMessageError::WouldBlock);
        }
        let len = frame.len();
        self.messages.make().enqueue(now, frame.into_owned(), meta);
        // Only messages that cannot wait a round trip for the window
        // (lifetime ≤ one-way delay + SRTT) make the live-stream window:
        // a reliable or long-lived message can wait for the ACK clock, and
        // a sender that queues a backlog of them (a chunk of video with
        // its playout deadlines, a bulk transfer) must not open the window
        // to that backlog.
        let urgent = meta
            .lifetime
            .is_some_and(|l| l <= self.one_way_delay() + self.rtt.srtt().unwrap_or_default());
        if self.config.hollywood.live_window && urgent {
            if let Some(l) = self.live.get_mut() {
                l.on_offered(now, len);
            }
            self.update_live_window(now);
        }
        Ok(())
    }

    /// Recompute the live-stream window floor (`crate::live`) at `now`:
    /// open while no retransmission timer has backed off and the smallest
    /// RTT of the last round trip is within an eighth of the minimum RTT
    /// (the path does not queue).
    pub(super) fn update_live_window(&mut self, now: Instant) {
        if !self.config.hollywood.live_window {
            return;
        }
        let queue = !self
            .rtt
            .min_rtt()
            .is_some_and(|min| self.live.no_queue(min));
        let silent = self.rtt.backoff_count() > 0;
        let (srtt, cwnd) = (self.rtt.srtt(), self.cc.cwnd());
        if let Some(l) = self.live.get_mut() {
            l.update(now, srtt, queue, silent, cwnd);
        }
        if self.live.floor() > self.cc.cwnd() {
            self.sndbuf_expand();
        }
    }

    /// Give the head of the Hollywood message queue its sequence numbers if
    /// it can be transmitted now (`avail` bytes of congestion window, the
    /// peer's window, or a forced send), dropping expired messages from the
    /// head first (thesis §4.2 liveness test, applied before sequence
    /// numbers). At most one message per call: nothing unsent ever waits in
    /// the send buffer.
    pub(crate) fn refill(&mut self, now: Instant, avail: usize, force: bool) {
        if self.messages.queued_messages() == 0
            || self.snd_buf.end_seq() != self.snd_nxt
            || self.fin_queued && self.fin_sent
        {
            return;
        }
        let owd = self.one_way_delay();
        let before = self.messages.queued_bytes();
        // A message is live if its last byte can arrive in time: one-way
        // delay plus the time its bytes beyond what goes at once take to
        // be clocked out by ACKs (or paced) at the delivery rate, or
        // cwnd/SRTT before there is one (a thin stream's delivery rate is
        // its own rate, not the path's). What goes at once: one segment
        // when paced, else what the windows allow.
        let now_room = if self.pacing_rate().is_some() {
            self.neg.smss
        } else {
            let usable_now = (self.snd_una + self.snd_wnd).diff(self.snd_nxt).max(0) as usize;
            avail.min(usable_now).max(self.neg.smss)
        };
        let window_rate = match self.rtt.srtt() {
            Some(srtt) if !srtt.is_zero() => {
                self.cc.cwnd().max(self.live.floor()) as f64 / srtt.as_secs_f64()
            }
            _ => 0.0,
        };
        let rate = match self.delivery_bw.get() {
            0 => window_rate,
            bw => bw as f64,
        };
        let ns_per_byte = if rate > 0.0 { 1e9 / rate } else { 0.0 };
        if let Some(len) = self
            .messages
            .get_mut()
            .and_then(|t| t.head_len_paced(now, owd, now_room, ns_per_byte))
        {
            let first = len.min(self.neg.smss);
            let wnd_end = self.snd_una + self.snd_wnd;
            let usable = wnd_end.diff(self.snd_nxt).max(0) as usize;
            if force || ((first <= usable || self.force_send) && first <= avail) {
                let seq = self.snd_buf.end_seq();
                if let Some(frame) = self.messages.get_mut().and_then(|t| t.take_head(seq)) {
                    let n = self.snd_buf.write(&frame);
                    debug_assert_eq!(n, frame.len(), "queue accounting keeps room");
                }
            }
        }
        self.drain_message_events();
        if self.messages.queued_bytes() < before {
            self.wake_writer();
        }
    }

    /// Ask for `Event::Writable` once `len` bytes of send buffer are free.
    pub(super) fn want_writable(&mut self, len: usize) {
        self.writable_wanted = true;
        self.writable_low = len.max(1);
    }

    /// Fire `Event::Writable` if a blocked sender's frame now fits.
    pub(crate) fn wake_writer(&mut self) {
        if self.writable_wanted && !self.fin_queued && self.frame_room() >= self.writable_low {
            self.writable_wanted = false;
            self.writable_low = 1;
            self.push_event(Event::Writable);
        }
    }

    /// Whether a message frame of at least `len` bytes can fit the send
    /// buffer now. If it cannot, `Event::Writable` is asked for, to fire
    /// once `len` bytes are free, and the caller can skip framing a message
    /// that would only get `WouldBlock`. `true` when the connection cannot
    /// take messages at all or the frame can never fit: `send_message`
    /// reports why.
    pub fn poll_send_room(&mut self, len: usize) -> bool {
        if self.sendable().is_err() || len > self.snd_buf.capacity() || self.frame_room() >= len {
            return true;
        }
        self.want_writable(len);
        false
    }

    /// Whether the connection can take data now, or why not (RFC 9293
    /// §3.10.2 SEND in each state; after our FIN nothing more).
    pub(super) fn sendable(&self) -> Result<(), Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => {}
            State::Closed => return Err(Error::Closed),
            _ => return Err(Error::InvalidState),
        }
        if self.fin_queued {
            return Err(Error::InvalidState);
        }
        Ok(())
    }

    /// Length of the next record new data would come from: the unsent part
    /// of the send buffer, else the head of the message queue.
    pub(crate) fn next_record_hint(&self) -> Option<usize> {
        if self.snd_buf.end_seq() != self.snd_nxt {
            return None;
        }
        self.messages.head_len_peek()
    }

    /// Next data segment as it arrived (out-of-order delivery, thesis §4.3;
    /// only with `config.hollywood.out_of_order_delivery`). Each acceptable
    /// data segment is handed over exactly once, in arrival order, with its
    /// sequence number; retransmissions of data already handed over appear
    /// again (the intermediary layer de-duplicates messages).
    pub fn recv_segment(&mut self) -> Option<ArrivedSegment> {
        let s = self.ooo.pop_front()?;
        self.ooo_bytes -= s.payload.len() + SEGMENT_COPY_OVERHEAD;
        if self.ooo.is_empty() {
            // Everything that arrived has been handed over: the in-order
            // bytes count as read, as if a standard application had read
            // the stream now.
            self.rcv_buf.consume_ready();
            self.check_window_update();
        }
        Some(s)
    }

    /// Give back the payload buffer of a segment from
    /// [`Connection::recv_segment`] once read: the next arrival is copied
    /// into it instead of a new allocation. Optional; a few are kept.
    pub fn recycle_segment(&mut self, mut payload: Vec<u8>) {
        if self.ooo_spare.len() < SPARE_SEGMENT_BUFFERS {
            payload.clear();
            self.ooo_spare.push(payload);
        }
    }

    /// Segments waiting in [`Connection::recv_segment`].
    pub fn segments_ready(&self) -> usize {
        self.ooo.len()
    }

    /// Inconsistent-retransmission counters (thesis §4.2).
    pub fn hollywood_stats(&self) -> &crate::hollywood::HollywoodStats {
        self.messages.stats()
    }

    /// Out-of-order delivery counters (thesis §4.3).
    pub fn ooo_stats(&self) -> &OooStats {
        &self.ooo_stats
    }

    /// Close our direction (RFC 9293 §3.10.4 CLOSE): a FIN follows the
    /// queued data; the peer may keep sending (half-close).
    pub fn close(&mut self) {
        match self.state {
            // RFC 9293 §3.10.4 LISTEN / SYN-SENT: delete the TCB.
            State::Listen | State::SynSent => {
                self.syn_pending = false;
                self.set_closed();
            }
            // SYN-RECEIVED: queue the FIN until ESTABLISHED.
            State::SynReceived => self.fin_queued = true,
            // ESTABLISHED: queue the FIN, enter FIN-WAIT-1.
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            // CLOSE-WAIT: queue the FIN, enter LAST-ACK.
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            // Already closing or closed.
            _ => {}
        }
    }

    /// Abort (RFC 9293 §3.10.5 ABORT): send `<SEQ=SND.NXT><CTL=RST>` where
    /// the peer knows the connection, drop all queues, enter CLOSED.
    pub fn abort(&mut self) {
        match self.state {
            State::SynReceived
            | State::Established
            | State::FinWait1
            | State::FinWait2
            | State::CloseWait => {
                self.rst_out = Some((self.snd_nxt, None));
                self.abandon_messages();
                self.set_closed();
            }
            // CLOSED with unread data: the application gives it up, so the
            // endpoint can forget the connection.
            State::Closed => self.discard_unread(),
            _ => self.set_closed(),
        }
    }

    /// Drop received data the application did not read.
    pub(super) fn discard_unread(&mut self) {
        self.rcv_buf.consume_ready();
        self.ooo.clear();
        self.ooo_bytes = 0;
    }
}
