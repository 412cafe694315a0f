//! Ordered sub-streams (thesis §8.3.2, "Improved sub-stream support"):
//! messages flagged ORDERED carry the id of their predecessor on the same
//! sub-stream and are released to the application only in chain order.
//! Messages whose predecessor has not been released yet wait in a bounded
//! buffer. Because TCP Hollywood is partially reliable (a predecessor may
//! have expired and been replaced by an inconsistent retransmission, thesis
//! §4.2), a chain that cannot continue is eventually *skipped*: when the
//! buffer bounds are hit, or a message has waited longer than the
//! configured maximum, the earliest waiting message is released as if its
//! predecessor had been, and the chain continues from it. Messages that
//! arrive after their place in the chain has been passed are dropped, so
//! release order on a sub-stream is always increasing.
//!
//! Memory: each waiting message is charged its payload plus
//! [`PIECE_OVERHEAD`] bytes (the `Message`, its map node and allocator
//! slack), so empty messages count too (review B3): with the default 4 MiB
//! at most 65 536 empty messages wait, over all sub-streams. Finding the
//! message that waited longest is logarithmic (an index by arrival time),
//! so overflow and timeouts cost the same with 65 536 sub-streams waiting
//! as with one.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::deframer::{DeframerStats, Message, PIECE_OVERHEAD};

/// `a` is strictly after `b` in serial-number order.
#[inline]
pub(crate) fn serial_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && (d as i32) > 0
}

#[derive(Debug, Default)]
struct Sub {
    /// Id of the last message released on this sub-stream.
    last: Option<u32>,
    /// Waiting messages, keyed by the id of their predecessor.
    waiting: BTreeMap<u32, Message>,
}

/// Bytes charged for one waiting message.
fn cost(m: &Message) -> usize {
    m.payload.len() + PIECE_OVERHEAD
}

#[derive(Debug)]
pub(crate) struct Ordered {
    subs: BTreeMap<u16, Sub>,
    max_per_substream: usize,
    max_bytes: usize,
    /// Charged bytes of all waiting messages.
    waiting_bytes: usize,
    /// Every waiting message as (arrival, sub-stream, predecessor key).
    by_arrival: BTreeSet<(u64, u16, u32)>,
}

impl Ordered {
    pub(crate) fn new(max_per_substream: usize, max_bytes: usize) -> Self {
        Ordered {
            subs: BTreeMap::new(),
            max_per_substream: max_per_substream.max(1),
            max_bytes,
            waiting_bytes: 0,
            by_arrival: BTreeSet::new(),
        }
    }

    /// Bytes charged for the messages waiting for their predecessor:
    /// payload plus [`PIECE_OVERHEAD`] each.
    pub(crate) fn waiting_bytes(&self) -> usize {
        self.waiting_bytes
    }

    /// Messages waiting for their predecessor.
    pub(crate) fn waiting_messages(&self) -> usize {
        self.by_arrival.len()
    }

    /// Offers an ordered message whose predecessor is `prev`; released
    /// messages are appended to `out`.
    pub(crate) fn offer(
        &mut self,
        msg: Message,
        prev: u32,
        out: &mut VecDeque<Message>,
        stats: &mut DeframerStats,
    ) {
        let substream = msg.substream;
        let sub = self.subs.entry(substream).or_default();
        if let Some(last) = sub.last {
            if !serial_after(msg.id, last) {
                stats.ordered_late += 1;
                return;
            }
        }
        if prev == msg.id || sub.last == Some(prev) {
            sub.last = Some(msg.id);
            out.push_back(msg);
            self.drain_chain(substream, out);
            return;
        }
        if sub.waiting.contains_key(&prev) {
            // Two messages claim the same predecessor: keep the first.
            stats.ordered_late += 1;
            return;
        }
        self.waiting_bytes += cost(&msg);
        self.by_arrival.insert((msg.arrival_ns, substream, prev));
        sub.waiting.insert(prev, msg);
        if sub.waiting.len() > self.max_per_substream {
            stats.ordered_overflow += 1;
            self.skip(substream, out, stats);
        }
        while self.waiting_bytes > self.max_bytes {
            let Some(&(_, victim, _)) = self.by_arrival.first() else {
                break;
            };
            stats.ordered_overflow += 1;
            self.skip(victim, out, stats);
        }
    }

    /// Takes the message waiting for `prev` on `substream` out of the
    /// buffer.
    fn unpark(&mut self, substream: u16, prev: u32) -> Option<Message> {
        let msg = self.subs.get_mut(&substream)?.waiting.remove(&prev)?;
        self.waiting_bytes -= cost(&msg);
        self.by_arrival.remove(&(msg.arrival_ns, substream, prev));
        Some(msg)
    }

    /// Releases every message that has waited `max_wait` or longer at
    /// `now` (skipping the gaps in front of them).
    pub(crate) fn expire(
        &mut self,
        now: u64,
        max_wait: u64,
        out: &mut VecDeque<Message>,
        stats: &mut DeframerStats,
    ) {
        // Oldest first; each skip releases at least one message.
        while let Some(&(t, k, _)) = self.by_arrival.first() {
            if t.saturating_add(max_wait) > now {
                break;
            }
            self.skip(k, out, stats);
        }
    }

    /// Earliest arrival time among all waiting messages.
    pub(crate) fn oldest_arrival(&self) -> Option<u64> {
        self.by_arrival.first().map(|&(t, _, _)| t)
    }

    /// Gives up on the gap in front of the earliest waiting message of
    /// `substream`: releases it and whatever chain follows it.
    fn skip(&mut self, substream: u16, out: &mut VecDeque<Message>, stats: &mut DeframerStats) {
        let Some(sub) = self.subs.get_mut(&substream) else {
            return;
        };
        let Some(first_id) = sub.waiting.values().next().map(|m| m.id) else {
            return;
        };
        // Earliest in serial order, measured from a point safely behind all
        // waiting ids (they span far less than 2^31).
        let anchor = sub.last.unwrap_or_else(|| first_id.wrapping_sub(1 << 31));
        let Some(key) = sub
            .waiting
            .iter()
            .min_by_key(|(_, m)| m.id.wrapping_sub(anchor))
            .map(|(&k, _)| k)
        else {
            return;
        };
        let Some(msg) = self.unpark(substream, key) else {
            return;
        };
        stats.ordered_skipped += 1;
        if let Some(sub) = self.subs.get_mut(&substream) {
            sub.last = Some(msg.id);
        }
        out.push_back(msg);
        self.drain_chain(substream, out);
    }

    /// Releases the chain of `substream` that continues from its last
    /// released message.
    fn drain_chain(&mut self, substream: u16, out: &mut VecDeque<Message>) {
        while let Some(last) = self.subs.get(&substream).and_then(|s| s.last) {
            let Some(next) = self.unpark(substream, last) else {
                break;
            };
            if let Some(sub) = self.subs.get_mut(&substream) {
                sub.last = Some(next.id);
            }
            out.push_back(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u32, t: u64) -> Message {
        Message {
            substream: 3,
            id,
            substream_seq: None,
            payload: vec![id as u8; 10],
            arrival_ns: t,
            ordered: true,
        }
    }

    fn ids(out: &mut VecDeque<Message>) -> Vec<u32> {
        out.drain(..).map(|m| m.id).collect()
    }

    #[test]
    fn chain_order() {
        let mut o = Ordered::new(16, 1 << 20);
        let mut out = VecDeque::new();
        let mut st = DeframerStats::default();
        o.offer(m(12, 0), 11, &mut out, &mut st);
        o.offer(m(11, 0), 10, &mut out, &mut st);
        assert!(out.is_empty());
        o.offer(m(10, 0), 10, &mut out, &mut st); // chain start
        assert_eq!(ids(&mut out), vec![10, 11, 12]);
        assert_eq!(o.waiting_bytes(), 0);
        o.offer(m(11, 0), 10, &mut out, &mut st); // behind: late
        assert_eq!(st.ordered_late, 1);
        o.offer(m(13, 0), 12, &mut out, &mut st);
        assert_eq!(ids(&mut out), vec![13]);
    }

    #[test]
    fn chain_across_wrap() {
        let mut o = Ordered::new(16, 1 << 20);
        let mut out = VecDeque::new();
        let mut st = DeframerStats::default();
        o.offer(m(1, 0), 0, &mut out, &mut st);
        o.offer(m(0, 0), u32::MAX, &mut out, &mut st);
        o.offer(m(u32::MAX, 0), u32::MAX, &mut out, &mut st);
        assert_eq!(ids(&mut out), vec![u32::MAX, 0, 1]);
    }

    #[test]
    fn overflow_skips_gap() {
        let mut o = Ordered::new(2, 1 << 20);
        let mut out = VecDeque::new();
        let mut st = DeframerStats::default();
        o.offer(m(1, 0), 1, &mut out, &mut st);
        assert_eq!(ids(&mut out), vec![1]);
        // 2 is lost for good; 3, 4 wait, 5 overflows the buffer of 2.
        o.offer(m(4, 0), 3, &mut out, &mut st);
        o.offer(m(3, 0), 2, &mut out, &mut st);
        assert!(out.is_empty());
        o.offer(m(5, 0), 4, &mut out, &mut st);
        assert_eq!(ids(&mut out), vec![3, 4, 5]);
        assert_eq!((st.ordered_overflow, st.ordered_skipped), (1, 1));
        o.offer(m(2, 0), 1, &mut out, &mut st); // too late now
        assert!(out.is_empty());
        assert_eq!(st.ordered_late, 1);
    }

    #[test]
    fn byte_cap_and_timeout() {
        // Two waiting messages fit (2 × (10 + PIECE_OVERHEAD)), three not.
        let mut o = Ordered::new(100, 2 * (10 + PIECE_OVERHEAD) + 5);
        let mut out = VecDeque::new();
        let mut st = DeframerStats::default();
        o.offer(m(10, 5), 9, &mut out, &mut st);
        o.offer(m(12, 7), 11, &mut out, &mut st);
        assert_eq!(o.oldest_arrival(), Some(5));
        o.offer(m(14, 9), 13, &mut out, &mut st); // three: skip to 10
        assert_eq!(ids(&mut out), vec![10]);
        o.expire(100, 96, &mut out, &mut st); // 7 + 96 > 100: nothing
        assert!(out.is_empty());
        o.expire(103, 96, &mut out, &mut st); // 12 expires
        assert_eq!(ids(&mut out), vec![12]);
        o.expire(105, 96, &mut out, &mut st);
        assert_eq!(ids(&mut out), vec![14]);
        assert_eq!(o.oldest_arrival(), None);
        assert_eq!(o.waiting_bytes(), 0);
        assert_eq!(o.waiting_messages(), 0);
    }

    #[test]
    fn empty_messages_are_charged() {
        // Review B3: 1000 sub-streams each park one empty message; the
        // bound admits 100 of them (by their overhead alone).
        let mut o = Ordered::new(256, 100 * PIECE_OVERHEAD);
        let mut out = VecDeque::new();
        let mut st = DeframerStats::default();
        for s in 0..1000u16 {
            let msg = Message {
                substream: s,
                id: u32::from(s) * 2 + 1,
                substream_seq: None,
                payload: Vec::new(),
                arrival_ns: u64::from(s),
                ordered: true,
            };
            o.offer(msg, u32::from(s) * 2, &mut out, &mut st);
            assert!(o.waiting_messages() <= 100);
            assert_eq!(o.waiting_bytes(), o.waiting_messages() * PIECE_OVERHEAD);
        }
        // The oldest were released first.
        assert_eq!(out.len(), 900);
        assert!(out
            .iter()
            .enumerate()
            .all(|(i, m)| m.substream as usize == i));
        assert_eq!(o.oldest_arrival(), Some(900));
    }
}
