//! Read-only accessors of a [`Connection`]: state, statistics, RTT, windows,
//! buffers and sequence numbers.

use super::*;

impl Connection {
    // ------------------------------------------------------------------
    // Getters
    // ------------------------------------------------------------------

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Counters.
    pub fn stats(&self) -> &ConnectionStats {
        &self.stats
    }
    /// Smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// The lowest RTT measured on the connection (all-time minimum).
    pub fn min_rtt(&self) -> Option<Duration> {
        self.rtt.min_rtt()
    }
    /// The estimate of the forward one-way delay used by the TCP Hollywood
    /// liveness test (a message sent now arrives at `now + one_way_delay`):
    /// half the connection's minimum RTT (propagation) plus the queueing
    /// that persisted over the last second — the minimum RTT of the last
    /// second above the connection's minimum, less [`ACK_DELAY_ALLOWANCE`]
    /// for the receiver's delayed ACKs — all of it counted on the forward
    /// path, where a sender's queue builds.
    ///
    /// Thesis §4.2 uses SRTT/2. On a thin stream every RTT sample carries
    /// the receiver's delayed-ACK wait (with 160-byte messages every 20 ms
    /// the delayed-ACK timer fires for every ACK: +20 ms on a 70 ms path),
    /// so SRTT/2 drops messages that would arrive in time; and behind a
    /// forward queue it credits half of the queue to the ACK path
    /// (docs/HOLLYWOOD.md). Zero before the first RTT sample.
    pub fn one_way_delay(&self) -> Duration {
        let Some(min) = self.rtt.min_rtt() else {
            return Duration::ZERO;
        };
        let recent = self.recent_rtt.get().unwrap_or(min).max(min);
        let queueing = (recent - min).saturating_sub(ACK_DELAY_ALLOWANCE);
        min / 2 + queueing
    }
    /// The current retransmission timeout, backoff included.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    /// Local address.
    pub fn local(&self) -> SocketAddr {
        self.local
    }
    /// Remote address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }
    /// Option negotiation result (meaningful once SYNs were exchanged).
    pub fn negotiated(&self) -> Negotiated {
        self.neg
    }
    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The MSS we announce (RFC 9293 §3.7.1): `Config::mss` on IPv4, 20
    /// bytes less on IPv6.
    pub fn local_mss(&self) -> u16 {
        local_mss(self.config.mss, self.remote)
    }
    /// The live-stream window's floor under cwnd in force (bytes;
    /// `HollywoodConfig::live_window`, `crate::live`): 0 when off, when
    /// nothing was offered lately, or while the path queues.
    pub fn live_window(&self) -> usize {
        self.live.floor()
    }
    /// Times the live-stream window was held off because the stream at
    /// its own rate made the path queue (`crate::live`).
    pub fn live_window_holds(&self) -> u64 {
        self.live.holds()
    }
    /// Congestion window (bytes).
    pub fn cwnd(&self) -> usize {
        self.cc.cwnd()
    }
    /// The rate data segments are paced at (bytes/s), if pacing is on:
    /// the congestion controller's own (BBR), else with `Config::pacing`
    /// `cwnd / SRTT` × 2 in slow start and × 1.2 after it (Linux's
    /// `tcp_pacing_ss_ratio` / `tcp_pacing_ca_ratio`).
    /// The live-stream window (`crate::live`) is a floor under either.
    pub fn pacing_rate(&self) -> Option<u64> {
        if let Some(r) = self.cc.pacing_rate() {
            return Some(r.max(self.live.rate()).max(1));
        }
        if !self.config.pacing {
            return None;
        }
        let srtt = self.rtt.srtt()?.as_nanos().max(1);
        let ratio: u128 = if self.cc.in_slow_start() { 200 } else { 120 };
        let rate = self.cc.cwnd() as u128 * ratio * 1_000_000_000 / 100 / srtt;
        Some(
            u64::try_from(rate)
                .unwrap_or(u64::MAX)
                .max(self.live.rate())
                .max(1),
        )
    }
    /// Slow-start threshold (bytes).
    pub fn ssthresh(&self) -> usize {
        self.cc.ssthresh()
    }
    /// Name of the congestion controller.
    pub fn cc_name(&self) -> &'static str {
        self.cc.name()
    }
    /// Sequence-space bytes sent and not yet acknowledged (FlightSize).
    pub fn bytes_in_flight(&self) -> usize {
        self.flight_size()
    }
    /// Bytes queued by `send` or `send_message` and not yet acknowledged
    /// (the send buffer plus the Hollywood message queue).
    pub fn send_buffered(&self) -> usize {
        self.snd_buf.len() + self.messages.queued_bytes()
    }
    /// Free send-buffer space (shared by the send buffer and the Hollywood
    /// message queue).
    pub fn send_capacity(&self) -> usize {
        self.send_free()
    }
    /// Messages waiting in the Hollywood message queue, without sequence
    /// numbers yet (thesis §4.2 sender with inconsistent retransmissions).
    pub fn queued_messages(&self) -> usize {
        self.messages.queued_messages()
    }
    /// Free space shared by the send buffer and the message queue.
    pub(crate) fn send_free(&self) -> usize {
        self.send_limit()
            .saturating_sub(self.snd_buf.len())
            .saturating_sub(self.messages.queued_bytes())
    }
    /// In-order bytes ready for `recv`.
    pub fn recv_ready(&self) -> usize {
        self.rcv_buf.ready()
    }
    /// Received data the application has not taken yet: bytes for
    /// [`Connection::recv`] or segments for [`Connection::recv_segment`].
    /// The endpoint keeps a CLOSED connection while this holds, so that
    /// bytes TCP acknowledged are never lost to the application (an RST in
    /// TIME-WAIT or the final ACK of LAST-ACK can close the connection
    /// before the application has read everything).
    pub fn has_unread(&self) -> bool {
        self.rcv_buf.ready() > 0 || !self.ooo.is_empty()
    }
    /// The peer's current window (bytes, scaled).
    pub fn peer_window(&self) -> usize {
        self.snd_wnd
    }
    /// The receive window we currently advertise (bytes).
    pub fn advertised_window(&self) -> usize {
        self.rcv_adv.diff(self.rcv_nxt).max(0) as usize
    }
    /// SND.UNA: oldest unacknowledged sequence number.
    pub fn snd_una(&self) -> SeqNumber {
        self.snd_una
    }
    /// SND.NXT: next new sequence number to send.
    pub fn snd_nxt(&self) -> SeqNumber {
        self.snd_nxt
    }
    /// RCV.NXT: next sequence number expected from the peer.
    pub fn rcv_nxt(&self) -> SeqNumber {
        self.rcv_nxt
    }
    /// The connection is repairing a loss (fast recovery or after an RTO).
    pub fn in_recovery(&self) -> bool {
        self.recovery != Recovery::Open
    }
}
