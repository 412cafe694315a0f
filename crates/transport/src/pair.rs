//! Two transports over a fixed-delay link, in virtual time: the harness for
//! unit tests, examples and fuzzing (the simulator does the same with
//! queues, rates and loss models).

use crate::{Instant, MessageTransport, TransportEvent};
use std::collections::VecDeque;
use std::time::Duration;

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From `a` to `b`.
    AtoB,
    /// From `b` to `a`.
    BtoA,
}

/// A drop decision from the time, the direction, the 0-based packet index
/// in that direction and the packet.
pub type DropFn = Box<dyn FnMut(Instant, Dir, u64, &[u8]) -> bool>;

/// `a` and `b` joined by a link with one-way `delay` each way.
pub struct Pair {
    /// First endpoint (the client or sender).
    pub a: Box<dyn MessageTransport>,
    /// Second endpoint.
    pub b: Box<dyn MessageTransport>,
    /// Virtual time.
    pub now: Instant,
    delay: Duration,
    in_flight: VecDeque<(Instant, Dir, Vec<u8>)>,
    sent: [u64; 2],
    drop: Option<DropFn>,
    /// Events of `a`, with their time.
    pub a_events: Vec<(Instant, TransportEvent)>,
    /// Events of `b`, with their time.
    pub b_events: Vec<(Instant, TransportEvent)>,
    /// Packets dropped by `drop`, per direction.
    pub dropped: [u64; 2],
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("now", &self.now)
            .field("sent", &self.sent)
            .field("dropped", &self.dropped)
            .finish_non_exhaustive()
    }
}

impl Pair {
    /// Join `a` and `b`; both are started at time zero.
    pub fn new(
        a: Box<dyn MessageTransport>,
        b: Box<dyn MessageTransport>,
        delay: Duration,
    ) -> Pair {
        let mut p = Pair {
            a,
            b,
            now: Instant::ZERO,
            delay,
            in_flight: VecDeque::new(),
            sent: [0; 2],
            drop: None,
            a_events: Vec::new(),
            b_events: Vec::new(),
            dropped: [0; 2],
        };
        p.b.start(p.now);
        p.a.start(p.now);
        p.flush();
        p
    }

    /// Drop the packets `f` selects.
    pub fn set_drop(&mut self, f: DropFn) {
        self.drop = Some(f);
    }

    /// Packets sent so far per direction.
    pub fn sent(&self) -> [u64; 2] {
        self.sent
    }

    /// Drain both endpoints' output and events.
    pub fn flush(&mut self) {
        loop {
            let mut any = false;
            for dir in [Dir::AtoB, Dir::BtoA] {
                let t = match dir {
                    Dir::AtoB => &mut self.a,
                    Dir::BtoA => &mut self.b,
                };
                while let Some(p) = t.poll_transmit(self.now) {
                    any = true;
                    let i = &mut self.sent[dir as usize];
                    let n = *i;
                    *i += 1;
                    let now = self.now;
                    let dropped = self.drop.as_mut().is_some_and(|f| f(now, dir, n, &p));
                    if dropped {
                        self.dropped[dir as usize] += 1;
                    } else {
                        self.in_flight.push_back((self.now + self.delay, dir, p));
                    }
                }
            }
            while let Some(e) = self.a.poll_event() {
                any = true;
                self.a_events.push((self.now, e));
            }
            while let Some(e) = self.b.poll_event() {
                any = true;
                self.b_events.push((self.now, e));
            }
            if !any {
                break;
            }
        }
    }

    /// The next time anything happens.
    pub fn next_time(&self) -> Option<Instant> {
        [
            self.in_flight.front().map(|x| x.0),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Advance to the next event (or to `limit`, whichever is first);
    /// false if nothing is left before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        let Some(t) = self.next_time() else {
            return false;
        };
        if t > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(t);
        while self.in_flight.front().is_some_and(|x| x.0 <= self.now) {
            let (_, dir, p) = self.in_flight.pop_front().expect("front");
            match dir {
                Dir::AtoB => self.b.handle_packet(self.now, &p),
                Dir::BtoA => self.a.handle_packet(self.now, &p),
            }
        }
        if self.a.poll_timeout().is_some_and(|x| x <= self.now) {
            self.a.handle_timeout(self.now);
        }
        if self.b.poll_timeout().is_some_and(|x| x <= self.now) {
            self.b.handle_timeout(self.now);
        }
        self.flush();
        true
    }

    /// Run until `limit` or until nothing is left.
    pub fn run_until(&mut self, limit: Instant) {
        while self.step(limit) {}
    }
}
