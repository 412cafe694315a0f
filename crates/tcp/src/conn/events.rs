//! What a [`Connection`] tells its caller: events, the next timer and what
//! each timer does when it fires (SYN, keep-alive, persist; retransmission
//! timers are in `recovery`).

use super::*;

impl Connection {
    // ------------------------------------------------------------------
    // Output: events and timers
    // ------------------------------------------------------------------

    /// Whether [`Connection::poll_event`] has something.
    #[must_use]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Next application event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front();
        if e == Some(Event::Readable) {
            self.readable_queued = false;
        }
        e
    }

    /// When [`Connection::handle_timeout`] must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Service expired timers (RFC 9293 §3.10.8).
    pub fn handle_timeout(&mut self, now: Instant) {
        for t in Timer::ALL {
            if self.timers.is_expired(t, now) {
                self.timers.stop(t);
                self.on_timer(now, t);
            }
        }
        self.drain_message_events();
        self.arm_timers(now);
    }

    pub(super) fn on_timer(&mut self, now: Instant, t: Timer) {
        match t {
            // RFC 9293 §3.10.8: TIME-WAIT timeout → CLOSED.
            Timer::TimeWait => {
                if self.state == State::TimeWait {
                    self.set_closed();
                }
            }
            Timer::Retransmit => match self.state {
                State::SynSent | State::SynReceived => self.on_syn_timeout(now),
                s if s.is_synchronized() && s != State::TimeWait => self.on_rto(now),
                _ => {}
            },
            Timer::Persist => self.on_persist(now),
            Timer::DelayedAck => {
                // RFC 9293 §3.8.6.3: the delay bound is reached.
                if self.ack.owed {
                    self.ack.now = true;
                    self.ack.by_timer = true;
                }
            }
            Timer::Keepalive => self.on_keepalive(now),
            // RFC 8985 §6.2 step 5 / §7.3.
            Timer::Reorder => self.on_reorder_timeout(now),
            Timer::Tlp => self.on_pto(now),
            // The pacer's release time: `poll_transmit` sends what is due
            // (and finds the next release time, if it is held back again).
            Timer::Pacing => self.pacing_at = None,
        }
    }

    /// SYN or SYN-ACK retransmission timer (RFC 6298 §5, RFC 9293 §3.8.1;
    /// Linux tcp_syn_retries / tcp_synack_retries).
    pub(super) fn on_syn_timeout(&mut self, _now: Instant) {
        if self.syn_retries >= self.config.max_syn_retransmissions {
            self.fail(Error::TimedOut);
            return;
        }
        self.syn_retries += 1;
        self.stats.syn_retransmissions += 1;
        self.rtt.backoff();
        self.syn_pending = true;
    }

    /// Keep-alive timer (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).
    pub(super) fn on_keepalive(&mut self, now: Instant) {
        let Some(ka) = self.config.keepalive else {
            return;
        };
        if !matches!(self.state, State::Established | State::CloseWait) {
            return;
        }
        if self.keepalive_probes >= ka.probes {
            self.fail(Error::TimedOut);
            return;
        }
        self.keepalive_probes += 1;
        self.keepalive_sent = now;
        self.probe = Some(Probe::Keepalive);
    }

    /// Persist timer: a zero-window probe (RFC 9293 §3.8.6.1) or the
    /// sender-SWS override timeout (RFC 9293 §3.8.6.2.1 (4)).
    pub(super) fn on_persist(&mut self, _now: Instant) {
        if !self.can_send_data_state() {
            return;
        }
        if self.snd_wnd == 0 {
            if self.persist_probes >= self.config.max_retransmissions {
                self.fail(Error::TimedOut);
                return;
            }
            self.persist_probes += 1;
            self.persist_backoff = self.persist_backoff.saturating_add(1);
            if self.flight_size() > 0 {
                // The probe byte is outstanding: retransmit it.
                self.pending_rtx = Some(self.snd_una);
            } else {
                self.probe = Some(Probe::ZeroWindow);
            }
            self.stats.window_probes_sent += 1;
        } else {
            self.force_send = true;
        }
    }

    /// States in which data/FIN may be (re)transmitted.
    pub(super) fn can_send_data_state(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }

    /// Unsent data (in the send buffer or the message queue) or an unsent FIN.
    pub(super) fn has_unsent(&self) -> bool {
        (self.state.is_synchronized()
            && (self.snd_buf.end_seq() != self.snd_nxt || self.messages.queued_messages() > 0)
            && !self.fin_sent)
            || (self.fin_queued && !self.fin_sent)
    }

    /// Zero-window persist mode: the peer's window is closed, something
    /// waits to be sent and at most a one-byte probe is outstanding
    /// (RFC 9293 §3.8.6.1).
    pub(super) fn in_persist(&self) -> bool {
        self.snd_wnd == 0
            && self.flight_size() <= 1
            && (self.has_unsent() || self.flight_size() == 1)
    }

    /// Interval of the persist timer: the RTO, doubled per probe, capped.
    pub(super) fn persist_interval(&self) -> Duration {
        let base = self.rtt.base_rto();
        let shift = self.persist_backoff.min(31);
        base.saturating_mul(1u32 << shift).min(self.config.max_rto)
    }

    /// Arm or stop timers from the current state (RFC 6298 §5.1-5.3 for the
    /// retransmission timer).
    pub(crate) fn arm_timers(&mut self, now: Instant) {
        match self.state {
            State::Closed | State::Listen => {
                self.timers.clear();
                return;
            }
            State::TimeWait => {
                for t in [
                    Timer::Retransmit,
                    Timer::Persist,
                    Timer::DelayedAck,
                    Timer::Keepalive,
                    Timer::Reorder,
                    Timer::Tlp,
                    Timer::Pacing,
                ] {
                    self.timers.stop(t);
                }
                return;
            }
            State::SynSent | State::SynReceived => return,
            _ => {}
        }
        // Delayed ACK.
        if self.ack.owed && !self.ack.now {
            if !self.timers.is_set(Timer::DelayedAck) {
                self.timers
                    .set(Timer::DelayedAck, now + self.config.delayed_ack.max_delay);
            }
        } else {
            self.timers.stop(Timer::DelayedAck);
        }
        let outstanding = self.flight_size() > 0;
        if self.in_persist() {
            // RFC 9293 §3.8.6.1: probes on the persist timer, not the RTO.
            self.timers.stop(Timer::Retransmit);
            if !self.timers.is_set(Timer::Persist) {
                self.timers
                    .set(Timer::Persist, now + self.persist_interval());
            }
        } else {
            if outstanding {
                // RFC 6298 §5.1: start the timer if it is not running.
                if !self.timers.is_set(Timer::Retransmit) {
                    self.timers.set(Timer::Retransmit, now + self.rtt.rto());
                }
            } else {
                // RFC 6298 §5.2: all data acknowledged: stop the timer.
                self.timers.stop(Timer::Retransmit);
            }
            if !outstanding && self.has_unsent() && self.sws_blocked() {
                // RFC 9293 §3.8.6.2.1 (4): override timeout.
                if !self.timers.is_set(Timer::Persist) {
                    self.timers
                        .set(Timer::Persist, now + self.persist_interval());
                }
            } else {
                self.timers.stop(Timer::Persist);
            }
        }
        // Keep-alive: only while idle (RFC 1122 §4.2.3.6).
        match self.config.keepalive {
            Some(ka)
                if matches!(self.state, State::Established | State::CloseWait)
                    && !outstanding
                    && !self.has_unsent() =>
            {
                // Unanswered probes are spaced by the interval from the
                // previous probe, not from the last segment received, so
                // that a late timer never fires several probes at once
                // (RFC 1122 §4.2.3.6; Linux tcp_keepalive_timer likewise).
                let at = if self.keepalive_probes == 0 {
                    self.last_rcv + ka.idle
                } else {
                    self.keepalive_sent + ka.interval
                };
                self.timers.set(Timer::Keepalive, at);
            }
            _ => self.timers.stop(Timer::Keepalive),
        }
        // RACK reordering timer and tail loss probe (RFC 8985 §8).
        self.arm_rack_timers(now);
        // The pacer holds back a data segment until then.
        match self.pacing_at {
            Some(t) if t > now && self.can_send_data_state() => self.timers.set(Timer::Pacing, t),
            _ => self.timers.stop(Timer::Pacing),
        }
    }
}
