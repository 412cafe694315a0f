//! "No message older than its deadline is delivered anywhere", through a
//! chain of relays in virtual time (sans-IO): publisher → relay 1 →
//! relay 2 → relay 3 → player, each node on its own clock, each caller
//! with its estimate of its relay's clock made from ping/pong exchanges
//! whose two directions may take different times (a pong queued behind
//! media or a retransmission on the data direction, a ping delayed
//! behind the publisher's media), and each message with whatever transit
//! and queueing per hop. The conversions are the ones a [`Session`]
//! makes ([`stamp`] when publishing, [`arrive`] when receiving), the
//! relay's drops the ones of its queues ([`SubQueue`]).
//!
//! [`Session`]: super::Session

use super::client::{arrive, stamp};
use super::clock::ClockOffset;
use super::fanout::{Item, SubQueue};
use super::wire::{MediaHeader, FLAG_GROUP_START};
use proptest::prelude::*;
use std::sync::Arc;

const MS: i64 = 1000;
const S: i64 = 1_000_000;

/// Nodes: 0 publisher, 1–3 relays, 4 player. Link k (0..4) joins node
/// k (caller side for k ≥ 1: relay k+1 and the player call the node
/// before them; the publisher calls relay 1) to node k+1.
struct Chain {
    /// Each node's clock minus the true time (µs).
    off: [i64; 5],
    /// The caller's estimate of its relay's clock on each link: link 0
    /// the publisher's of relay 1, link k the one of node k+1 of node k.
    clock: [ClockOffset; 4],
}

/// One ping/pong: when sent (true time), its ping's and its pong's
/// one-way times.
type Exchange = (i64, i64, i64);

impl Chain {
    fn new(off: [i64; 5], exchanges: [&[Exchange]; 4]) -> Chain {
        let mut clock: [ClockOffset; 4] = Default::default();
        for (k, xs) in exchanges.iter().enumerate() {
            // Link 0: the publisher (node 0) calls relay 1 (node 1); link
            // k ≥ 1: node k+1 calls node k.
            let (caller, relay) = if k == 0 { (0, 1) } else { (k + 1, k) };
            for &(at, up, down) in *xs {
                let t1 = at + off[caller];
                let t2 = at + up + off[relay];
                let t4 = at + up + down + off[caller];
                clock[k].sample(t1, t2, t4);
            }
        }
        Chain { off, clock }
    }

    /// A message read by the publisher at true time `t0`, useful for
    /// `lifetime`; `transit[k]` the true time it spends on link k (with
    /// its repairs), `wait[k]` in relay k+1's queue. The true time it is
    /// handed to the player, or `None` where a check dropped it.
    fn deliver(&self, t0: i64, lifetime: i64, transit: [i64; 4], wait: [i64; 3]) -> Option<i64> {
        let local = t0 + self.off[0];
        let (origin, deadline) = stamp(&self.clock[0], local, lifetime, local);
        let mut h = MediaHeader {
            flags: FLAG_GROUP_START,
            priority: 0,
            seq: 0,
            origin_us: origin,
            deadline_us: deadline,
        };
        let mut t = t0;
        for r in 1..=3 {
            t += transit[r - 1];
            let now = t + self.off[r];
            if r > 1 {
                // Relay r calls relay r−1: its session converts.
                h = arrive(&self.clock[r - 1], h, now)?;
            }
            // The relay's queue for its next hop (the relay drops a
            // message past its deadline on arrival and in the queue).
            let mut q = SubQueue::new(None);
            let it = Arc::new(Item {
                header: h,
                payload: vec![0],
            });
            q.push(it, now);
            t += wait[r - 1];
            let (it, d) = q.pop(t + self.off[r])?;
            h = it.header;
            h.deadline_us = d;
        }
        t += transit[3];
        arrive(&self.clock[3], h, t + self.off[4]).map(|_| t)
    }
}

/// Eight exchanges a second apart before `t`, each way as given.
fn pings(t: i64, up: i64, down: i64) -> Vec<Exchange> {
    (1..=8).map(|i| (t - i * S, up, down)).collect()
}

/// The reproduction: every hop 20 ms each way, but each pong on the data
/// direction waits 8 ms behind media (and the publisher's pings 8 ms
/// behind its own). A message that lost time to repairs reaches the
/// player 5 ms past its 200 ms deadline: it must not be delivered. A
/// midpoint estimate of each clock is wrong by 4 ms per link, in the
/// same direction on every link, and lets it through.
#[test]
fn a_message_past_its_deadline_is_not_delivered_whatever_the_asymmetry() {
    let t = 100 * S;
    let p0 = pings(t, MS + 8 * MS, MS);
    let hop = pings(t, 20 * MS, 28 * MS);
    let c = Chain::new([0, 5 * S, -3 * S, 11 * S, 7 * S], [&p0, &hop, &hop, &hop]);
    let lifetime = 200 * MS;
    // 1 ms to relay 1, 20 ms per hop, plus 144 ms of repairs on hop 2.
    let late = c.deliver(t, lifetime, [MS, 20 * MS, 164 * MS, 20 * MS], [0; 3]);
    assert_eq!(
        late,
        None,
        "delivered {} ms past the deadline",
        (late.unwrap_or(0) - t - lifetime) / MS
    );
    // One that lost a round trip or two to repairs is still on time.
    let repaired = c.deliver(t, lifetime, [MS, 20 * MS, 80 * MS, 20 * MS], [0; 3]);
    assert_eq!(repaired, Some(t + 121 * MS));
}

proptest! {
    /// Whatever the clocks, the exchanges' asymmetry, the transits and
    /// the queueing, a message the player is handed is within its
    /// deadline on the true clock.
    #[test]
    fn nothing_reaches_the_player_past_its_deadline(
        off in proptest::array::uniform5(-1_000 * S..1_000 * S),
        ways in proptest::array::uniform4(proptest::collection::vec((0..200 * MS, 0..200 * MS), 1..10)),
        transit in proptest::array::uniform4(0..150 * MS),
        wait in proptest::array::uniform3(0..100 * MS),
        lifetime in 1..400 * MS,
    ) {
        let t = 1_000 * S;
        let xs: Vec<Vec<Exchange>> = ways
            .iter()
            .map(|w| w.iter().enumerate().map(|(i, &(u, d))| (t - (i as i64 + 1) * S, u, d)).collect())
            .collect();
        let c = Chain::new(off, [&xs[0], &xs[1], &xs[2], &xs[3]]);
        if let Some(at) = c.deliver(t, lifetime, transit, wait) {
            prop_assert!(at < t + lifetime, "delivered {} µs past its deadline", at - t - lifetime);
        }
    }
}
