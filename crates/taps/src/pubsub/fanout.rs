//! The relay's per-subscriber queues and per-stream group cache (sans-IO;
//! times are relay-clock microseconds given by the caller).
//!
//! Each subscriber has its own [`SubQueue`]: a message waits there until
//! the subscriber's connection takes it, and leaves in priority order
//! (lower number first, then oldest). It expires there, for that
//! subscriber alone, at its deadline: the smaller of the end-to-end
//! deadline the message carries and the message's origin plus the
//! subscriber's own latency (MoQ's delivery timeout is likewise the
//! smaller of both ends', but restarts per hop; ours does not). So a slow
//! subscriber loses what it cannot get in time and nobody else notices.
//!
//! A subscriber joins at the newest group start the relay holds
//! ([`GroupCache`]): it is sent that group's messages still live for it,
//! and until a group start reaches it, nothing (a decoder cannot use a
//! delta without its keyframe).

use super::wire::{MediaHeader, FLAG_GROUP_START};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A published message, shared by every subscriber's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its metadata (relay clock).
    pub header: MediaHeader,
    /// Its bytes.
    pub payload: Vec<u8>,
}

impl Item {
    fn size(&self) -> usize {
        self.payload.len() + super::wire::MEDIA_HEADER
    }
}

/// Messages a subscriber's queue holds at most.
pub const QUEUE_MESSAGES: usize = 4096;
/// Bytes a subscriber's queue holds at most.
pub const QUEUE_BYTES: usize = 4 << 20;

/// Counters of one subscriber.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SubStats {
    /// Messages that entered its queue.
    pub queued: u64,
    /// Messages handed to its connection.
    pub forwarded: u64,
    /// Messages whose deadline passed before its connection took them
    /// (in its queue, or before they reached it: `arrived_late`).
    pub expired: u64,
    /// Of `expired`, those already past their deadline when published to
    /// it (late from upstream, or a join's cached group).
    pub arrived_late: u64,
    /// Messages pushed out of a full queue (the least urgent first).
    pub overflow: u64,
    /// Messages passed over before its first group start.
    pub before_group: u64,
}

/// One subscriber's queue.
#[derive(Debug)]
pub struct SubQueue {
    latency_us: Option<i64>,
    items: BTreeMap<(u8, u64), Arc<Item>>,
    bytes: usize,
    synced: bool,
    /// The group start it began at: (origin, seq).
    start: (i64, u64),
    stats: SubStats,
}

impl SubQueue {
    /// A queue for a subscriber whose own latency is `latency_us` after a
    /// message's origin (`None`: only the end-to-end deadline).
    pub fn new(latency_us: Option<i64>) -> SubQueue {
        SubQueue {
            latency_us,
            items: BTreeMap::new(),
            bytes: 0,
            synced: false,
            start: (0, 0),
            stats: SubStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> SubStats {
        self.stats
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The message's deadline for this subscriber.
    pub fn deadline(&self, it: &Item) -> i64 {
        match self.latency_us {
            Some(l) => it
                .header
                .deadline_us
                .min(it.header.origin_us.saturating_add(l)),
            None => it.header.deadline_us,
        }
    }

    /// A message for this subscriber, at `now`.
    pub fn push(&mut self, it: Arc<Item>, now: i64) {
        let live = self.deadline(&it) > now;
        if !self.synced {
            // A group start already dead is no start: its deltas would be
            // undecodable without it.
            if it.header.flags & FLAG_GROUP_START == 0 || !live {
                self.stats.before_group += 1;
                return;
            }
            self.synced = true;
            self.start = (it.header.origin_us, it.header.seq);
        } else if (it.header.origin_us, it.header.seq) < self.start {
            // Older than the group start it began at, taken in after it
            // (out of order: a repair upstream): before its first group
            // start all the same. By origin first, so a new publisher of
            // the stream, whose numbers start again at 0, is not passed
            // over.
            self.stats.before_group += 1;
            return;
        }
        if !live {
            self.stats.expired += 1;
            self.stats.arrived_late += 1;
            return;
        }
        self.stats.queued += 1;
        self.bytes += it.size();
        if let Some(old) = self.items.insert((it.header.priority, it.header.seq), it) {
            // The same message twice (a publisher's duplicate): one copy.
            self.bytes -= old.size();
            self.stats.queued -= 1;
        }
        while self.items.len() > QUEUE_MESSAGES || self.bytes > QUEUE_BYTES {
            // The least urgent class, its oldest message.
            let Some((&(p, _), _)) = self.items.last_key_value() else {
                break;
            };
            let key = *self
                .items
                .range((p, 0)..)
                .next()
                .map(|(k, _)| k)
                .unwrap_or(&(p, 0));
            if let Some(old) = self.items.remove(&key) {
                self.bytes -= old.size();
                self.stats.overflow += 1;
            }
        }
    }

    /// The most urgent live message and its deadline for this subscriber;
    /// the expired ones passed on the way are counted.
    pub fn pop(&mut self, now: i64) -> Option<(Arc<Item>, i64)> {
        while let Some((_, it)) = self.items.pop_first() {
            self.bytes -= it.size();
            let d = self.deadline(&it);
            if d > now {
                self.stats.forwarded += 1;
                return Some((it, d));
            }
            self.stats.expired += 1;
        }
        None
    }

    /// Drop what has expired by `now`.
    pub fn expire(&mut self, now: i64) {
        let lat = self.latency_us;
        let before = self.items.len();
        let mut freed = 0;
        self.items.retain(|_, it| {
            let d = match lat {
                Some(l) => it
                    .header
                    .deadline_us
                    .min(it.header.origin_us.saturating_add(l)),
                None => it.header.deadline_us,
            };
            let keep = d > now;
            if !keep {
                freed += it.size();
            }
            keep
        });
        self.bytes -= freed;
        self.stats.expired += (before - self.items.len()) as u64;
    }

    /// The earliest deadline waiting (when [`SubQueue::expire`] has work).
    pub fn next_deadline(&self) -> Option<i64> {
        self.items.values().map(|it| self.deadline(it)).min()
    }

    /// The subscriber is gone: what waited counts as expired.
    pub fn close(&mut self) {
        self.stats.expired += self.items.len() as u64;
        self.items.clear();
        self.bytes = 0;
    }
}

/// Messages of a group the cache holds at most; a longer group is not
/// cached (a late joiner then waits for the next group start).
pub const CACHE_MESSAGES: usize = 8192;
/// Bytes of a group the cache holds at most.
pub const CACHE_BYTES: usize = 16 << 20;

/// The newest group of a stream, from its group start, for late joiners.
#[derive(Debug, Default)]
pub struct GroupCache {
    items: Vec<Arc<Item>>,
    bytes: usize,
    /// The current group outgrew the cache.
    overflowed: bool,
}

impl GroupCache {
    /// An empty cache.
    pub fn new() -> GroupCache {
        GroupCache::default()
    }

    /// A published message.
    pub fn push(&mut self, it: &Arc<Item>) {
        if it.header.flags & FLAG_GROUP_START != 0 {
            self.items.clear();
            self.bytes = 0;
            self.overflowed = false;
        } else if self.items.is_empty() || self.overflowed {
            return;
        }
        if self.items.len() >= CACHE_MESSAGES || self.bytes + it.size() > CACHE_BYTES {
            self.items.clear();
            self.bytes = 0;
            self.overflowed = true;
            return;
        }
        self.bytes += it.size();
        self.items.push(it.clone());
    }

    /// The newest group, from its start (empty: none held).
    pub fn group(&self) -> &[Arc<Item>] {
        &self.items
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::wire::FLAG_KEY;
    use proptest::prelude::*;

    fn item(seq: u64, prio: u8, flags: u8, origin: i64, deadline: i64) -> Arc<Item> {
        Arc::new(Item {
            header: MediaHeader {
                flags,
                priority: prio,
                seq,
                origin_us: origin,
                deadline_us: deadline,
            },
            payload: vec![0; 100],
        })
    }

    #[test]
    fn nothing_before_the_first_group_start() {
        let mut q = SubQueue::new(None);
        q.push(item(0, 2, 0, 0, 1000), 0);
        q.push(item(1, 0, FLAG_GROUP_START | FLAG_KEY, 0, 1000), 0);
        q.push(item(2, 2, 0, 0, 1000), 0);
        assert_eq!(q.stats().before_group, 1);
        assert_eq!(q.pop(0).unwrap().0.header.seq, 1);
        assert_eq!(q.pop(0).unwrap().0.header.seq, 2);
        assert!(q.pop(0).is_none());
    }

    #[test]
    fn an_older_message_taken_in_after_the_start_is_passed_over() {
        let mut q = SubQueue::new(None);
        q.push(item(5, 0, FLAG_GROUP_START | FLAG_KEY, 50, 1000), 0);
        // 4 was repaired upstream and arrives after 5.
        q.push(item(4, 2, 0, 40, 1000), 0);
        q.push(item(6, 2, 0, 60, 1000), 0);
        // A new publisher of the stream: its numbers start again.
        q.push(item(0, 2, 0, 70, 1000), 0);
        assert_eq!(q.stats().before_group, 1);
        let mut seqs: Vec<u64> =
            std::iter::from_fn(|| q.pop(0).map(|(i, _)| i.header.seq)).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, vec![0, 5, 6]);
    }

    #[test]
    fn a_dead_group_start_does_not_start_a_join() {
        let mut q = SubQueue::new(None);
        q.push(item(0, 0, FLAG_GROUP_START, 0, 10), 50);
        q.push(item(1, 2, 0, 0, 100), 50);
        q.push(item(2, 0, FLAG_GROUP_START, 0, 100), 50);
        assert_eq!(q.stats().before_group, 2);
        assert_eq!(q.pop(50).unwrap().0.header.seq, 2);
    }

    #[test]
    fn priority_first_then_age_and_the_expired_are_counted() {
        let mut q = SubQueue::new(None);
        q.push(item(0, 0, FLAG_GROUP_START, 0, 1000), 0);
        q.push(item(1, 2, 0, 0, 500), 0);
        q.push(item(2, 2, 0, 0, 2000), 0);
        q.push(item(3, 0, FLAG_KEY, 0, 2000), 0);
        q.push(item(4, 1, 0, 0, 2000), 0);
        let order: Vec<u64> =
            std::iter::from_fn(|| q.pop(600).map(|(i, _)| i.header.seq)).collect();
        assert_eq!(order, vec![0, 3, 4, 2]);
        assert_eq!(q.stats().expired, 1);
        assert_eq!(q.stats().forwarded, 4);
    }

    #[test]
    fn a_subscribers_latency_shortens_the_deadline_for_it_alone() {
        let it = item(0, 0, FLAG_GROUP_START, 1_000, 500_000);
        let mut slow = SubQueue::new(Some(100_000));
        let mut any = SubQueue::new(None);
        assert_eq!(slow.deadline(&it), 101_000);
        assert_eq!(any.deadline(&it), 500_000);
        slow.push(it.clone(), 0);
        any.push(it, 0);
        slow.expire(200_000);
        any.expire(200_000);
        assert_eq!((slow.len(), slow.stats().expired), (0, 1));
        assert_eq!(any.len(), 1);
        assert_eq!(any.next_deadline(), Some(500_000));
    }

    #[test]
    fn a_full_queue_drops_its_least_urgent_oldest() {
        let mut q = SubQueue::new(None);
        q.push(item(0, 0, FLAG_GROUP_START, 0, i64::MAX), 0);
        for s in 1..=QUEUE_MESSAGES as u64 + 10 {
            q.push(item(s, if s % 2 == 0 { 0 } else { 3 }, 0, 0, i64::MAX), 0);
        }
        assert_eq!(q.len(), QUEUE_MESSAGES);
        assert_eq!(q.stats().overflow, 11);
        // Every urgent message is still there.
        let urgent = std::iter::from_fn(|| q.pop(0))
            .filter(|(i, _)| i.header.priority == 0)
            .count();
        assert_eq!(urgent, 1 + (QUEUE_MESSAGES + 10) / 2);
    }

    #[test]
    fn the_cache_holds_the_newest_group_from_its_start() {
        let mut c = GroupCache::new();
        c.push(&item(0, 2, 0, 0, 1));
        assert!(c.group().is_empty());
        c.push(&item(1, 0, FLAG_GROUP_START, 0, 1));
        c.push(&item(2, 2, 0, 0, 1));
        c.push(&item(3, 0, FLAG_GROUP_START, 0, 1));
        c.push(&item(4, 2, 0, 0, 1));
        let seqs: Vec<u64> = c.group().iter().map(|i| i.header.seq).collect();
        assert_eq!(seqs, vec![3, 4]);
        assert_eq!(c.bytes(), 2 * (100 + crate::pubsub::wire::MEDIA_HEADER));
    }

    proptest! {
        /// Whatever arrives, nothing leaves past its deadline, nothing
        /// leaves twice, every queued message is accounted for once, and
        /// the byte count matches what is held.
        #[test]
        fn every_message_is_accounted_for(ops in proptest::collection::vec((0u8..4, 0i64..1000, any::<bool>(), any::<bool>()), 1..300),
                                          lat in proptest::option::of(1i64..500)) {
            let mut q = SubQueue::new(lat);
            let mut now = 0i64;
            let mut seen = std::collections::HashSet::new();
            for (seq, (prio, life, start, pop)) in ops.into_iter().enumerate() {
                now += 3;
                let flags = if start { FLAG_GROUP_START } else { 0 };
                q.push(item(seq as u64, prio, flags, now, now + life), now);
                if pop {
                    if let Some((it, d)) = q.pop(now) {
                        prop_assert!(d > now);
                        prop_assert!(seen.insert(it.header.seq));
                    }
                }
                let held: usize = q.items.values().map(|i| i.size()).sum();
                prop_assert_eq!(held, q.bytes);
            }
            q.close();
            let s = q.stats();
            prop_assert_eq!(s.queued, s.forwarded + (s.expired - s.arrived_late) + s.overflow);
            prop_assert_eq!(s.forwarded as usize, seen.len());
        }
    }
}
