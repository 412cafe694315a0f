//! The receive buffer: a fixed ring holding in-order unread bytes and
//! out-of-order data at their final positions (reassembly, RFC 9293 §3.10.7.4
//! seventh check), plus the set of out-of-order ranges.
//!
//! Addresses are stream offsets (`u64`, bytes since the first data byte), so
//! they never wrap; the connection converts sequence numbers. Memory is the
//! ring (`capacity` bytes, allocated on first use) plus a bounded list of
//! out-of-order ranges.
//!
//! Each held byte also keeps the time it first arrived (stamps: disjoint
//! intervals of held bytes, each with one arrival time), so a reader learns
//! how long data waited here behind a hole: the head-of-line-blocking delay
//! of [RTP-QUIC] §5.1 ([`RecvBuffer::read_stamped`]).

use std::collections::VecDeque;

/// At most this many disjoint out-of-order ranges are kept; a segment that
/// would create one more is dropped (the sender retransmits it). Bounds the
/// bookkeeping under pathological patterns (RFC 9293 §3.10.7.4 allows a
/// receiver to discard out-of-order data).
pub(crate) const MAX_OOO_RANGES: usize = 512;

/// At most this many arrival-stamp intervals are kept. Beyond it a new
/// interval is merged into the one before it (the later of the two times):
/// the stamps stay an upper bound on when the bytes arrived, and memory
/// stays bounded when a peer sends tiny segments.
pub(crate) const MAX_STAMPS: usize = 4096;

/// Smallest ring allocated: one page.
const MIN_RING: usize = 4096;

/// What [`RecvBuffer::insert`] did with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Inserted {
    /// Bytes that became readable in order (RCV.NXT advanced by this much).
    pub in_order: usize,
    /// The first sub-range (stream offsets) that had already been received:
    /// a duplicate, reported by D-SACK (RFC 2883 §4).
    pub duplicate: Option<(u64, u64)>,
    /// The out-of-order range (after merging) that now contains the segment,
    /// if it was stored out of order: the first SACK block (RFC 2018 §4).
    pub ooo_block: Option<(u64, u64)>,
    /// The segment filled all or part of a gap below other out-of-order data
    /// (RFC 5681 §4.2: ACK immediately).
    pub filled_gap: bool,
    /// Bytes that did not fit (beyond capacity) or were refused (range limit).
    pub dropped: usize,
}

/// Ring buffer with an out-of-order range set.
#[derive(Debug, Clone)]
pub(crate) struct RecvBuffer {
    /// Ring storage: empty while nothing is held, grown (doubling, at
    /// least [`MIN_RING`]) to cover the bytes held, at most `capacity`, and
    /// released when the application drained everything (an idle
    /// connection holds no ring; Linux likewise frees an skb once read).
    /// Allocated at `size` bytes but filled only as far as bytes were
    /// stored (`ring.len()`): a fresh ring is not zeroed first (a memset
    /// of a page per segment when every segment is read at once). Bytes
    /// are read only where they were stored.
    ring: Vec<u8>,
    /// The ring's size (its capacity; 0 while released).
    size: usize,
    /// The most the ring may grow to (`Config::recv_buffer`).
    capacity: usize,
    /// Ring index of the first unread byte.
    read_pos: usize,
    /// Stream offset of the first unread byte.
    read_off: u64,
    /// In-order unread bytes (from `read_off`).
    ready: usize,
    /// Out-of-order ranges `[start, end)` beyond the in-order data: sorted,
    /// disjoint, not adjacent.
    ooo: Vec<(u64, u64)>,
    /// First-arrival times of held bytes: `(start, end, time in ns)`,
    /// disjoint intervals covering every held byte (module docs), sorted
    /// by start. A deque: bytes mostly arrive at the back and are read
    /// from the front (no tree node allocated and freed per segment).
    stamps: VecDeque<(u64, u64, u64)>,
}

impl RecvBuffer {
    /// A buffer of `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> RecvBuffer {
        RecvBuffer {
            ring: Vec::new(),
            size: 0,
            capacity,
            read_pos: 0,
            read_off: 0,
            ready: 0,
            ooo: Vec::new(),
            stamps: VecDeque::new(),
        }
    }

    /// Heap bytes held now: the ring and the arrival stamps (an estimate
    /// of a `BTreeMap` entry's share, 48 B).
    pub(crate) fn allocated(&self) -> usize {
        self.ring.capacity() + self.stamps.len() * 48 + self.ooo.capacity() * 16
    }

    /// Stream offset of the first unread byte (bytes consumed so far).
    pub(crate) fn read_off(&self) -> u64 {
        self.read_off
    }

    /// Bytes from the first unread byte to the end of the last held byte.
    fn held_extent(&self) -> usize {
        let ooo_end = self
            .ooo
            .last()
            .map_or(0, |&(_, e)| (e - self.read_off) as usize);
        ooo_end.max(self.ready)
    }

    /// Make the ring reach at least `need` bytes from the first unread
    /// byte: a larger ring with the held bytes moved to its start.
    fn reserve(&mut self, need: usize) {
        if need <= self.size {
            return;
        }
        let size = need
            .max(MIN_RING)
            .checked_next_power_of_two()
            .unwrap_or(need)
            .min(self.capacity)
            .max(need);
        let mut ring = Vec::with_capacity(size);
        let held = self.held_extent();
        if held > 0 {
            let old = self.size;
            let first = held.min(old - self.read_pos);
            // The held bytes up to the old ring's end may end in a gap past
            // its filled part (data wrapped to its start): zeros there.
            let filled_end = (self.read_pos + first).min(self.ring.len());
            ring.extend_from_slice(&self.ring[self.read_pos.min(filled_end)..filled_end]);
            ring.resize(first, 0);
            ring.extend_from_slice(&self.ring[..held - first]);
        }
        self.ring = ring;
        self.size = size;
        self.read_pos = 0;
    }

    /// After a read: with nothing held, give the ring back.
    fn release_if_drained(&mut self) {
        if self.ready == 0 && self.ooo.is_empty() {
            self.ring = Vec::new();
            self.size = 0;
            self.ooo = Vec::new();
            self.read_pos = 0;
        }
    }

    /// In-order bytes waiting for the application.
    pub(crate) fn ready(&self) -> usize {
        self.ready
    }

    /// Stream offset of the next in-order byte expected (RCV.NXT).
    pub(crate) fn nxt_off(&self) -> u64 {
        self.read_off + self.ready as u64
    }

    /// The out-of-order ranges (stream offsets).
    pub(crate) fn ooo_ranges(&self) -> &[(u64, u64)] {
        &self.ooo
    }

    /// Bytes held out of order.
    #[cfg(test)]
    pub(crate) fn ooo_bytes(&self) -> usize {
        self.ooo.iter().map(|&(s, e)| (e - s) as usize).sum()
    }

    /// Copy `data` into the ring at stream offset `off` (must be within the
    /// ring's reach).
    fn store(&mut self, off: u64, data: &[u8]) {
        let rel = (off - self.read_off) as usize;
        self.reserve(rel + data.len());
        let size = self.size;
        let pos = (self.read_pos + rel) % size;
        let first = data.len().min(size - pos);
        Self::put(&mut self.ring, pos, &data[..first]);
        let rest = data.len() - first;
        if rest > 0 {
            Self::put(&mut self.ring, 0, &data[first..]);
        }
    }

    /// Write `data` at `pos` of `ring` (within its capacity), extending
    /// the filled part as needed (a gap before `pos` is zero-filled; its
    /// bytes are never read before they are stored).
    fn put(ring: &mut Vec<u8>, pos: usize, data: &[u8]) {
        let filled = ring.len();
        if pos > filled {
            ring.resize(pos, 0);
        }
        let inside = data.len().min(ring.len() - pos);
        ring[pos..pos + inside].copy_from_slice(&data[..inside]);
        ring.extend_from_slice(&data[inside..]);
        debug_assert!(ring.len() <= ring.capacity());
    }

    /// [`RecvBuffer::insert_at`] at time 0 (tests of the byte logic).
    #[cfg(test)]
    pub(crate) fn insert(&mut self, off: u64, data: &[u8]) -> Inserted {
        self.insert_at(off, data, 0)
    }

    /// Record that the bytes `[a, b)`, held from now on, arrived at `t_ns`.
    fn add_stamp(stamps: &mut VecDeque<(u64, u64, u64)>, a: u64, b: u64, t_ns: u64) {
        let full = stamps.len() >= MAX_STAMPS;
        let i = stamps.partition_point(|&(s, _, _)| s < a);
        if i > 0 {
            let (_, end, t) = &mut stamps[i - 1];
            // Extend the interval before when it ends here at the same time,
            // or when there are too many (module docs: an upper bound).
            if (*end == a && *t == t_ns) || full {
                *end = (*end).max(b);
                *t = (*t).max(t_ns);
                return;
            }
        }
        match stamps.get_mut(i) {
            Some(x) if x.0 == a => *x = (a, b, t_ns),
            _ => stamps.insert(i, (a, b, t_ns)),
        }
    }

    /// Stamp the bytes of `[start, end)` not held yet (before they join the
    /// range set).
    fn stamp_new(&mut self, start: u64, end: u64, t_ns: u64) {
        let mut at = start;
        let i = self.ooo.partition_point(|&(_, e)| e <= start);
        for &(s, e) in &self.ooo[i..] {
            if s >= end {
                break;
            }
            if s > at {
                Self::add_stamp(&mut self.stamps, at, s, t_ns);
            }
            at = at.max(e);
        }
        if at < end {
            Self::add_stamp(&mut self.stamps, at, end, t_ns);
        }
    }

    /// Forget the stamps of bytes before stream offset `off` (read).
    fn drop_stamps_before(&mut self, off: u64) {
        while let Some(&(s, e, t)) = self.stamps.front() {
            if s >= off {
                break;
            }
            self.stamps.pop_front();
            if e > off {
                self.stamps.push_front((off, e, t));
                break;
            }
        }
    }

    /// Insert `data` that starts at stream offset `off`, arriving at `t_ns`.
    /// Bytes before RCV.NXT are duplicates; bytes beyond the ring's end are
    /// dropped.
    pub(crate) fn insert_at(&mut self, off: u64, data: &[u8], t_ns: u64) -> Inserted {
        let mut res = Inserted::default();
        let nxt = self.nxt_off();
        let seg_end = off.saturating_add(data.len() as u64);
        let limit = self.read_off + self.capacity as u64;
        // Duplicate part below RCV.NXT (RFC 2883 §4: D-SACK the duplicate).
        if off < nxt {
            res.duplicate = Some((off, seg_end.min(nxt)));
        }
        let start = off.max(nxt);
        let end = seg_end.min(limit);
        if seg_end > limit {
            res.dropped = (seg_end - limit.max(start)) as usize;
        }
        if start >= end {
            return res;
        }
        // Duplicate part inside already-held out-of-order data.
        if res.duplicate.is_none() {
            let i = self.ooo.partition_point(|&(_, e)| e <= start);
            if let Some(&(s, e)) = self.ooo.get(i) {
                if s < end {
                    res.duplicate = Some((s.max(start), e.min(end)));
                }
            }
        }
        // Merge [start, end) into the range set.
        let i = self.ooo.partition_point(|&(_, e)| e < start);
        let mut j = i;
        let (mut ns, mut ne) = (start, end);
        while j < self.ooo.len() && self.ooo[j].0 <= end {
            ns = ns.min(self.ooo[j].0);
            ne = ne.max(self.ooo[j].1);
            j += 1;
        }
        if i == j && start != nxt && self.ooo.len() >= MAX_OOO_RANGES {
            // A new disjoint out-of-order range over the limit: refuse it.
            res.dropped += (end - start) as usize;
            return res;
        }
        let payload = &data[(start - off) as usize..(end - off) as usize];
        self.store(start, payload);
        self.stamp_new(start, end, t_ns);
        // RFC 5681 §4.2: data at RCV.NXT while out-of-order data is held fills
        // (part of) the gap.
        res.filled_gap = start == nxt && !self.ooo.is_empty();
        self.ooo.splice(i..j, std::iter::once((ns, ne)));
        if ns == nxt {
            // The first range is now contiguous with RCV.NXT.
            let (s, e) = self.ooo.remove(0);
            debug_assert_eq!(s, nxt);
            res.in_order = (e - s) as usize;
            self.ready += res.in_order;
        } else {
            res.ooo_block = Some((ns, ne));
        }
        res
    }

    /// Make everything up to stream offset `target` (at most the ring's
    /// reach) in order, filling the bytes never received with zeros
    /// (sequence-gap receiver, [TCP-video] §7.2). Returns (bytes that became
    /// readable in order, of which zero-filled).
    pub(crate) fn fill_gaps(&mut self, target: u64, t_ns: u64) -> (usize, usize) {
        let target = target.min(self.read_off + self.capacity as u64);
        let start = self.nxt_off();
        let mut zeros = 0;
        while self.nxt_off() < target {
            let nxt = self.nxt_off();
            // Out-of-order ranges all start beyond RCV.NXT: the first one
            // ends the gap at RCV.NXT.
            let gap_end = self.ooo.first().map_or(target, |&(s, _)| s.min(target));
            let fill = vec![0u8; (gap_end - nxt) as usize];
            let ins = self.insert_at(nxt, &fill, t_ns);
            zeros += fill.len();
            if ins.in_order == 0 {
                break; // cannot happen: data at RCV.NXT is always taken
            }
        }
        ((self.nxt_off() - start) as usize, zeros)
    }

    /// Drop every in-order byte without copying (the application consumed
    /// the data another way: out-of-order delivery, thesis §4.3).
    pub(crate) fn consume_ready(&mut self) {
        let n = self.ready;
        if n > 0 {
            self.read_pos = (self.read_pos + n) % self.size;
        }
        self.read_off += n as u64;
        self.ready = 0;
        self.drop_stamps_before(self.read_off);
        self.release_if_drained();
    }

    /// Like [`RecvBuffer::read`], but only bytes that arrived at one time
    /// (at most up to the end of the first stamp interval): `(count, their
    /// arrival in ns)`; `(0, None)` when nothing is ready.
    pub(crate) fn read_stamped(&mut self, buf: &mut [u8]) -> (usize, Option<u64>) {
        let (limit, t) = match self.stamps.front() {
            Some(&(s, e, t)) if s <= self.read_off => ((e - self.read_off) as usize, Some(t)),
            // Every held byte is stamped; unreachable, but read on.
            _ => (buf.len(), None),
        };
        let n = buf.len().min(limit);
        let n = self.read(&mut buf[..n]);
        (n, t.filter(|_| n > 0))
    }

    /// Copy up to `buf.len()` in-order bytes out; returns the count.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> usize {
        let mut at = 0;
        self.read_with(buf.len(), |piece| {
            buf[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        })
    }

    /// Consume up to `max` in-order bytes in place: `f` sees them in stream
    /// order as one or two slices of the ring (two where they wrap);
    /// returns the count. No copy: a reader that parses or forwards the
    /// bytes takes them from here.
    pub(crate) fn read_with(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let n = max.min(self.ready);
        if n == 0 {
            return 0;
        }
        let size = self.size;
        let first = n.min(size - self.read_pos);
        f(&self.ring[self.read_pos..self.read_pos + first]);
        if n > first {
            f(&self.ring[..n - first]);
        }
        self.read_pos = (self.read_pos + n) % size;
        self.read_off += n as u64;
        self.ready -= n;
        self.drop_stamps_before(self.read_off);
        self.release_if_drained();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(b: &mut RecvBuffer) -> Vec<u8> {
        let mut out = vec![0; b.ready()];
        let n = b.read(&mut out);
        out.truncate(n);
        out
    }

    #[test]
    fn in_order() {
        let mut b = RecvBuffer::new(8);
        let r = b.insert(0, b"abc");
        assert_eq!(r.in_order, 3);
        assert_eq!(r.duplicate, None);
        assert_eq!(read_all(&mut b), b"abc");
        // Wraps around the ring end.
        assert_eq!(b.insert(3, b"defghij").in_order, 7);
        assert_eq!(read_all(&mut b), b"defghij");
    }

    #[test]
    fn reassembly_and_dsack() {
        let mut b = RecvBuffer::new(16);
        let r = b.insert(4, b"efgh");
        assert_eq!((r.in_order, r.ooo_block), (0, Some((4, 8))));
        let r = b.insert(10, b"kl");
        assert_eq!(r.ooo_block, Some((10, 12)));
        assert_eq!(b.ooo_ranges(), &[(4, 8), (10, 12)]);
        // Duplicate of held out-of-order data.
        let r = b.insert(5, b"fg");
        assert_eq!(r.duplicate, Some((5, 7)));
        assert_eq!(r.ooo_block, Some((4, 8)));
        // Fill the first hole: contiguous up to 8.
        let r = b.insert(0, b"abcd");
        assert!(r.filled_gap);
        assert_eq!(r.in_order, 8);
        assert_eq!(b.nxt_off(), 8);
        // Duplicate below RCV.NXT.
        let r = b.insert(2, b"cdefghij");
        assert_eq!(r.duplicate, Some((2, 8)));
        assert_eq!(r.in_order, 4);
        assert_eq!(read_all(&mut b), b"abcdefghijkl");
        assert_eq!(b.ooo_bytes(), 0);
    }

    #[test]
    fn growth_copies_a_wrapped_ring_with_an_unfilled_end() {
        let mut b = RecvBuffer::new(1 << 20);
        // Fill and read 4000 bytes: the read position sits near the end of
        // a 4096-byte ring filled only that far.
        b.insert(0, &[1u8; 4000]);
        let mut out = vec![0u8; 3990];
        assert_eq!(b.read(&mut out), 3990);
        // Out of order, wrapped to the ring's start; then far ahead (the
        // ring grows with its end still unfilled); then the gaps.
        b.insert(4200, &[2u8; 100]);
        b.insert(9000, &[3u8; 10]);
        b.insert(4000, &[4u8; 200]);
        b.insert(4300, &[5u8; 4700]);
        let mut all = vec![0u8; 5020];
        assert_eq!(b.read(&mut all), 5020);
        assert!(all[..10].iter().all(|&x| x == 1));
        assert!(all[10..210].iter().all(|&x| x == 4));
        assert!(all[210..310].iter().all(|&x| x == 2));
        assert!(all[310..5010].iter().all(|&x| x == 5));
        assert!(all[5010..].iter().all(|&x| x == 3));
        assert_eq!(b.allocated(), 0);
    }

    #[test]
    fn reading_in_place_sees_a_wrapped_ring_as_two_slices_in_order() {
        let mut b = RecvBuffer::new(1 << 20);
        b.insert(0, &[1u8; 4000]);
        assert_eq!(b.read_with(3990, |_| {}), 3990);
        // 10 bytes left before the ring's end (4096 bytes); 200 more: 96
        // fill it, 104 wrap to its start.
        let more: Vec<u8> = (0..200u8).collect();
        b.insert(4000, &more);
        let mut pieces = Vec::new();
        assert_eq!(b.read_with(150, |p| pieces.push(p.to_vec())), 150);
        assert_eq!(pieces.len(), 2, "wrapped: two slices");
        assert_eq!(pieces[0][..10], [1u8; 10]);
        assert_eq!(pieces[0][10..], more[..96]);
        assert_eq!(pieces[1], more[96..140].to_vec());
        let mut rest = Vec::new();
        assert_eq!(b.read_with(usize::MAX, |p| rest.extend_from_slice(p)), 60);
        assert_eq!(rest, more[140..].to_vec());
        assert_eq!(b.read_with(10, |_| panic!("nothing ready")), 0);
        assert_eq!(b.allocated(), 0, "released when drained, as `read`");
    }

    #[test]
    fn the_ring_grows_with_need_and_is_released_when_drained() {
        let mut b = RecvBuffer::new(1 << 20);
        assert_eq!(b.allocated(), 0, "nothing held, nothing allocated");
        b.insert(0, &[1u8; 100]);
        assert_eq!((b.size, b.ring.capacity()), (MIN_RING, MIN_RING));
        assert_eq!(b.ring.len(), 100, "filled as far as stored");
        // Out of order far ahead: the ring covers it, data kept in place.
        b.insert(50_000, &[3u8; 10]);
        assert_eq!((b.size, b.ring.capacity()), (65_536, 65_536));
        b.insert(100, &[2u8; 49_900]);
        let mut out = vec![0u8; 50_010];
        assert_eq!(b.read(&mut out), 50_010);
        assert!(out[..100].iter().all(|&x| x == 1));
        assert!(out[100..50_000].iter().all(|&x| x == 2));
        assert!(out[50_000..].iter().all(|&x| x == 3));
        assert_eq!(b.allocated(), 0, "drained: released");
        // Growth with the read position inside the ring.
        b.insert(50_010, &[4u8; 3000]);
        let mut two = [0u8; 2000];
        assert_eq!(b.read(&mut two), 2000);
        b.insert(53_010, &[5u8; 5000]);
        let mut rest = vec![0u8; 6000];
        assert_eq!(b.read(&mut rest), 6000);
        assert!(rest[..1000].iter().all(|&x| x == 4));
        assert!(rest[1000..].iter().all(|&x| x == 5));
        // Never beyond the capacity.
        let mut small = RecvBuffer::new(5000);
        small.insert(0, &[0u8; 4500]);
        assert_eq!(small.size, 5000);
    }

    #[test]
    fn capacity_is_a_hard_bound() {
        let mut b = RecvBuffer::new(4);
        let r = b.insert(0, b"abcdef");
        assert_eq!((r.in_order, r.dropped), (4, 2));
        let r = b.insert(4, b"x");
        assert_eq!((r.in_order, r.dropped), (0, 1));
        assert_eq!(read_all(&mut b), b"abcd");
        assert_eq!(b.insert(4, b"ef").in_order, 2);
    }

    #[test]
    fn fill_gaps_zero_fills_and_releases_held_data() {
        let mut b = RecvBuffer::new(32);
        b.insert(0, b"ab");
        b.insert(4, b"ef");
        b.insert(10, b"kl");
        // Skip to 8: the gap 2..4 and 6..8 are zero-filled, "ef" released;
        // "kl" stays out of order.
        assert_eq!(b.fill_gaps(8, 0), (6, 4));
        assert_eq!(b.nxt_off(), 8);
        assert_eq!(b.ooo_ranges(), &[(10, 12)]);
        // Skip into a held range: it is released whole.
        assert_eq!(b.fill_gaps(11, 0), (4, 2));
        assert_eq!(read_all(&mut b), b"ab\0\0ef\0\0\0\0kl");
        assert_eq!(b.fill_gaps(5, 0), (0, 0), "never backwards");
    }

    #[test]
    fn range_limit() {
        let mut b = RecvBuffer::new(4 * MAX_OOO_RANGES + 8);
        for i in 0..MAX_OOO_RANGES as u64 {
            assert_eq!(b.insert(2 + 2 * i, b"x").dropped, 0);
        }
        // One more disjoint range is refused, but extending one is fine.
        let far = 2 + 2 * MAX_OOO_RANGES as u64 + 1;
        assert_eq!(b.insert(far, b"y").dropped, 1);
        assert_eq!(b.insert(3, b"z").dropped, 0);
        // In-order data is always accepted.
        assert_eq!(b.insert(0, b"ab").in_order, 5);
    }

    /// Reads `n` bytes one stamp at a time: `(bytes, time)` pieces.
    fn stamped_pieces(b: &mut RecvBuffer) -> Vec<(usize, Option<u64>)> {
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            let r = b.read_stamped(&mut buf);
            if r.0 == 0 {
                return out;
            }
            out.push(r);
        }
    }

    #[test]
    fn bytes_keep_their_first_arrival_time() {
        let mut b = RecvBuffer::new(64);
        b.insert_at(0, b"abcd", 10);
        // A hole at 4..8; 8..12 arrives early, then a duplicate of it later.
        b.insert_at(8, b"ijkl", 20);
        b.insert_at(8, b"ijkl", 25);
        // The hole fills at 30, overlapping what is held (only 4..8 is new).
        b.insert_at(2, b"cdefghij", 30);
        assert_eq!(
            stamped_pieces(&mut b),
            vec![(4, Some(10)), (4, Some(30)), (4, Some(20))]
        );
        // Partial reads keep the rest's time.
        b.insert_at(12, b"mnop", 40);
        let mut two = [0u8; 2];
        assert_eq!(b.read_stamped(&mut two), (2, Some(40)));
        assert_eq!(stamped_pieces(&mut b), vec![(2, Some(40))]);
    }

    #[test]
    fn stamps_stay_bounded_and_never_earlier() {
        let mut b = RecvBuffer::new(1 << 20);
        // One-byte segments in order, each at its own time, none read yet:
        // more intervals than the limit.
        let n = (MAX_STAMPS * 2) as u64;
        for i in 0..n {
            b.insert_at(i, b"x", i + 1);
        }
        assert!(b.stamps.len() <= MAX_STAMPS);
        // Each byte's stamp is at least its arrival (merged intervals take
        // the later time) and times never go backwards.
        let mut buf = vec![0u8; 1];
        let (mut off, mut last) = (0u64, 0u64);
        loop {
            let (k, t) = b.read_stamped(&mut buf);
            if k == 0 {
                break;
            }
            let t = t.expect("stamped");
            assert!(t > off && t >= last, "byte {off} stamped {t}");
            (off, last) = (off + k as u64, t);
        }
        assert_eq!(off, n);
        assert!(b.stamps.is_empty());
    }
}
