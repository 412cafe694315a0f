//! The live-stream window (TCP Hollywood sender, `HollywoodConfig::live_window`;
//! docs/LIVE-CC.md has the measurements behind it).
//!
//! A live message stream is application-limited: it offers a rate of its
//! own, and a message that waits behind the congestion window for longer
//! than its lifetime allows is lost although the network dropped nothing
//! (thesis §4.2: a message is worth sending only while it can still arrive
//! in time). Two windows starve such a stream on a long path:
//!
//! * the initial window (RFC 6928: ten segments) and slow start: for the
//!   first round trips the window is below what the stream offers in one
//!   round trip, and the rest expires in the message queue;
//! * a loss-based controller's response to *random* loss: CUBIC halves
//!   (×0.7) for every loss event, and at 2 % loss and 250 ms its window
//!   settles far below the stream's rate (the Mathis bound, about
//!   1.22 · MSS / (RTT · √p) ≈ 40 kB/s there, against a 240 kB/s stream).
//!
//! The floor: while the path shows no standing queue, the sender may keep
//! in flight what the application offered over the last smoothed round
//! trip as messages that cannot wait a round trip (lifetime ≤ one-way
//! delay + SRTT: waiting once for the ACK clock kills them, and no
//! retransmission can save them), times 5/4 ([`GAIN_NUM`]) — and pace at
//! least at that rate. The floor is the stream's own demand, never more:
//! a stream that offers nothing gets no floor, and reliable or long-lived
//! messages do not count (they can wait for the ACK clock; a sender that
//! queues a backlog of them — a chunk of video with its playout deadlines,
//! a bulk transfer — must not open the window to that backlog: measured on
//! thesis ch. 6's Hollywood DASH at a 5 Mb/s bottleneck, counting them
//! played 137 frames of 1200 instead of 411). *The gate*: the floor holds only while the smallest RTT
//! sample of the last round trip (smoothed RTT) is within [`QUEUE_GATE`]
//! (one eighth) of the connection's minimum RTT, and no retransmission
//! timer has backed off. No allowance is made for delayed ACKs: a thin
//! stream whose every ACK waits for the receiver's timer may find the gate
//! closed, which only leaves it standard TCP's window (a thin stream fits
//! the initial window anyway).
//! A loss without a queue at the bottleneck is not congestion at that
//! bottleneck (a drop-tail queue drops when it is full, and a full queue
//! shows in the RTT); the same test gates BBR's loss responses here
//! (docs/HOLLYWOOD.md "Congestion control and pacing"). When the stream
//! exceeds the path, a queue builds, the gate closes, and the controller's
//! own window — reduced by every loss as standard TCP's — is all the
//! sender gets; if the floor was what made the queue, it is held off for
//! a while ([`MIN_HOLD`], doubling to [`MAX_HOLD`]) rather than reopened
//! the moment the queue drains. An RTO (the path went silent) closes it
//! too until an ACK resets the backoff, without a hold (an RTO is not a
//! queue the floor made).

use crate::rtt::WindowedMin;
use crate::time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// The floor is the bytes offered over the last smoothed RTT times
/// `GAIN_NUM / GAIN_DEN` (5/4): room for the slots a retransmission takes
/// and for ACKs that come late (delayed ACKs, ACK compression).
pub const GAIN_NUM: usize = 5;
/// See [`GAIN_NUM`].
pub const GAIN_DEN: usize = 4;
/// The first hold of the floor after the stream made the path queue.
pub const MIN_HOLD: Duration = Duration::from_secs(1);
/// The longest hold (holds double while they keep being needed).
pub const MAX_HOLD: Duration = Duration::from_secs(16);
/// The gate: the path queues when the smallest RTT of the last round trip
/// is more than `min_rtt / QUEUE_GATE` above the minimum (12.5 %, as BBR's
/// queue gate in `cc::bbr`).
pub const QUEUE_GATE: u32 = 8;

/// A connection's live-stream window, made with the connection when the
/// switch is on: a connection without it holds a null pointer, and reads
/// see a window that was never opened (no floor).
#[derive(Debug, Default)]
pub(crate) struct LiveSlot(Option<Box<LiveWindow>>);

impl LiveSlot {
    /// With the switch on, a window; off, none.
    pub(crate) fn new(on: bool) -> LiveSlot {
        LiveSlot(on.then(Box::default))
    }

    /// The window, when the switch is on.
    pub(crate) fn get_mut(&mut self) -> Option<&mut LiveWindow> {
        self.0.as_deref_mut()
    }
}

impl std::ops::Deref for LiveSlot {
    type Target = LiveWindow;

    fn deref(&self) -> &LiveWindow {
        static CLOSED: std::sync::OnceLock<LiveWindow> = std::sync::OnceLock::new();
        self.0
            .as_deref()
            .unwrap_or_else(|| CLOSED.get_or_init(LiveWindow::default))
    }
}

/// The live-stream window's state: what the application offered lately.
#[derive(Debug, Default)]
pub(crate) struct LiveWindow {
    /// `(when, bytes)` of every message handed to the engine within the
    /// last window.
    offered: VecDeque<(Instant, usize)>,
    /// Sum of `offered`'s bytes.
    offered_bytes: usize,
    /// The floor (bytes) as of the last [`LiveWindow::update`]; 0 when the
    /// gate is closed.
    floor: usize,
    /// The pacing floor (bytes/s) as of the last update; 0 when closed.
    rate: u64,
    /// The smallest RTT sample of about the last round trip (the gate).
    round_rtt: WindowedMin,
    /// The floor is held off until then (see [`LiveWindow::update`]).
    hold_until: Option<Instant>,
    /// The length of the last hold.
    hold: Duration,
    /// When the last hold began.
    last_hold: Option<Instant>,
    /// Holds so far.
    holds: u64,
}

impl LiveWindow {
    /// The application handed `bytes` (a framed message) to the engine.
    pub(crate) fn on_offered(&mut self, now: Instant, bytes: usize) {
        self.offered.push_back((now, bytes));
        self.offered_bytes += bytes;
    }

    /// Recompute the floor at `now`: `window` is the smoothed RTT (`None`
    /// before the first sample: no floor); `queue`: the path shows a
    /// standing queue (the gate's RTT test); `silent`: a retransmission
    /// timer has backed off; `cwnd` the congestion controller's own
    /// window. Either closes the gate; only the queue starts a hold.
    ///
    /// *Hold*: when the path queues while the floor let more fly than the
    /// controller's window, the stream at its own rate is more than the
    /// path carries. The floor then stays off for [`MIN_HOLD`] (doubling,
    /// up to [`MAX_HOLD`], while it keeps happening), whatever the gate
    /// says: without the hold, each time the queue drained the floor would
    /// open again and refill it, a burst of losses per cycle. An RTO is
    /// no such sign: it closes the gate while the timer is backed off, but
    /// the window it leaves (one segment) says nothing about what the
    /// floor did to the path. Counted as a queue the floor made, every RTO
    /// held the floor off for a second or more (doubling to
    /// [`MAX_HOLD`]), and a 300 ms path's stream waited behind slow start
    /// for that long (issue 34, lab).
    pub(crate) fn update(
        &mut self,
        now: Instant,
        window: Option<Duration>,
        queue: bool,
        silent: bool,
        cwnd: usize,
    ) {
        let Some(window) = window.filter(|w| !w.is_zero()) else {
            self.floor = 0;
            self.rate = 0;
            return;
        };
        while let Some(&(t, b)) = self.offered.front() {
            if now.saturating_duration_since(t) <= window {
                break;
            }
            self.offered.pop_front();
            self.offered_bytes -= b;
        }
        let binding = self.floor > cwnd;
        let held = self.hold_until.is_some_and(|t| now < t);
        if queue && binding && !held {
            let again = self
                .last_hold
                .is_some_and(|t| now.saturating_duration_since(t) <= self.hold + MAX_HOLD);
            self.hold = if again {
                (self.hold * 2).clamp(MIN_HOLD, MAX_HOLD)
            } else {
                MIN_HOLD
            };
            self.hold_until = Some(now + self.hold);
            self.last_hold = Some(now);
            self.holds += 1;
        }
        let held = self.hold_until.is_some_and(|t| now < t);
        if queue || silent || held {
            self.floor = 0;
            self.rate = 0;
            return;
        }
        self.floor = self.offered_bytes.saturating_mul(GAIN_NUM) / GAIN_DEN;
        self.rate = (self.floor as f64 / window.as_secs_f64()) as u64;
    }

    /// Times the floor was held off because the stream at its own rate made
    /// the path queue.
    pub(crate) fn holds(&self) -> u64 {
        self.holds
    }

    /// An RTT sample (the engine's per-ACK one, as `recent_rtt` gets)
    /// at `now`; `round` is the window of the gate's minimum (the smoothed
    /// RTT).
    pub(crate) fn on_rtt(&mut self, now: Instant, rtt: Duration, round: Duration) {
        self.round_rtt.update(round, now, rtt);
    }

    /// The gate: the smallest RTT of the last round trip is within
    /// `min_rtt / QUEUE_GATE` of `min_rtt` (no standing queue). Open
    /// before the first sample after the handshake (whose RTT is
    /// `min_rtt`: no sign of a queue yet).
    pub(crate) fn no_queue(&self, min_rtt: Duration) -> bool {
        self.round_rtt
            .get()
            .is_none_or(|r| r <= min_rtt + min_rtt / QUEUE_GATE)
    }

    /// The window floor (bytes); 0: none.
    pub(crate) fn floor(&self) -> usize {
        self.floor
    }

    /// The pacing floor (bytes/s); 0: none.
    pub(crate) fn rate(&self) -> u64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    #[test]
    fn the_floor_is_what_was_offered_over_the_last_round_trip() {
        let mut w = LiveWindow::default();
        for i in 0..100 {
            w.on_offered(ms(i * 5), 1200);
        }
        // At 495 ms, the messages of the last 250 ms: 245..=495, 50 of them.
        w.update(ms(495), Some(Duration::from_millis(250)), false, false, 0);
        assert_eq!(w.floor(), 51 * 1200 * 5 / 4);
        assert_eq!(w.rate(), (51.0 * 1500.0 / 0.25) as u64);
        // A closed gate: no floor, but the window still slides.
        w.update(
            ms(800),
            Some(Duration::from_millis(250)),
            true,
            false,
            1 << 20,
        );
        assert_eq!((w.floor(), w.rate()), (0, 0));
        w.update(ms(800), Some(Duration::from_millis(250)), false, false, 0);
        assert_eq!(w.floor(), 0, "nothing offered since 550 ms");
    }

    #[test]
    fn no_round_trip_time_no_floor() {
        let mut w = LiveWindow::default();
        w.on_offered(ms(0), 1200);
        w.update(ms(1), None, false, false, 0);
        assert_eq!(w.floor(), 0);
    }

    #[test]
    fn a_queue_the_floor_made_holds_it_off_and_holds_double() {
        let mut w = LiveWindow::default();
        let rtt = Some(Duration::from_millis(100));
        let offer = |w: &mut LiveWindow, at: u64| {
            for i in 0..20 {
                w.on_offered(ms(at + i * 5), 1200);
            }
        };
        offer(&mut w, 0);
        w.update(ms(100), rtt, false, false, 2400);
        assert!(w.floor() > 2400, "the floor is what lets the stream fly");
        // The path queues: held off for a second even once the gate opens.
        w.update(ms(150), rtt, true, false, 2400);
        assert_eq!((w.floor(), w.holds()), (0, 1));
        offer(&mut w, 1000);
        w.update(ms(1100), rtt, false, false, 2400);
        assert_eq!(w.floor(), 0, "still held");
        w.update(ms(1151), rtt, false, false, 2400);
        assert!(w.floor() > 0, "the hold is over");
        // It queues again at once: two seconds this time.
        w.update(ms(1160), rtt, true, false, 2400);
        assert_eq!(w.holds(), 2);
        offer(&mut w, 3000);
        w.update(ms(3100), rtt, false, false, 2400);
        assert_eq!(w.floor(), 0, "held for two seconds");
        w.update(ms(3170), rtt, false, false, 2400);
        assert!(w.floor() > 0);
        // A queue the floor did not make (the controller's window was the
        // larger) is the controller's business: no hold.
        w.update(ms(3180), rtt, true, false, 1 << 20);
        assert_eq!(w.holds(), 2);
    }

    #[test]
    fn an_rto_closes_the_gate_without_a_hold() {
        let mut w = LiveWindow::default();
        let rtt = Some(Duration::from_millis(300));
        for i in 0..60 {
            w.on_offered(ms(i * 5), 1316);
        }
        w.update(ms(300), rtt, false, false, 14_480);
        assert!(w.floor() > 14_480);
        // The RTO: one segment of window, the timer backed off.
        w.update(ms(310), rtt, false, true, 1448);
        assert_eq!((w.floor(), w.holds()), (0, 0));
        // The next ACK ends the backoff: the floor is back at once.
        for i in 62..80 {
            w.on_offered(ms(i * 5), 1316);
        }
        w.update(ms(400), rtt, false, false, 2896);
        assert!(w.floor() > 2896, "{}", w.floor());
    }
}
