//! The send buffer: queued and unacknowledged stream bytes, record-aware and
//! rewritable in place (docs/ARCHITECTURE.md "Hollywood hooks").
//!
//! Bytes are addressed by sequence number. The buffer holds the bytes from
//! SND.UNA (the oldest unacknowledged data byte) up to the last byte the
//! application queued; SYN and FIN occupy sequence space but no buffer space
//! (RFC 9293 §3.4), so the connection maps them itself.
//!
//! Every `write` call is one *record*. Record boundaries are kept so that a
//! segment can be forbidden to span two records (thesis §4.2, consistent
//! segmentation); records larger than the MSS fragment at the MSS.
//!
//! Memory: at most `capacity` bytes of data plus one `u64` per live record.
//! The storage grows with what is queued and is given back as it is
//! acknowledged: when empty it goes to the endpoint's [`StoragePool`] (kept
//! for the next connection that writes, a bounded few) or is freed, and it
//! shrinks when at most an eighth of it was in use while a whole
//! allocation's worth of bytes was acknowledged. An idle connection holds
//! no send storage; a busy sender whose buffer empties between two writes
//! takes a storage whose pages are already there, instead of page-faulting
//! a fresh multi-megabyte one in every time (docs/LAB.md, "Send storage
//! kept").

use hollywood_wire::SeqNumber;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// Emptied send storages kept for reuse, shared by an endpoint's
/// connections: at most [`StoragePool::MAX_STORAGES`] of together at most
/// its byte bound ([`StoragePool::MAX_BYTES`] by default), none while it
/// is off (memory pressure). The lock is taken only when a buffer empties
/// or an empty one is written to.
#[derive(Debug, Clone)]
pub(crate) struct StoragePool(Arc<Mutex<PoolInner>>);

#[derive(Debug)]
struct PoolInner {
    storages: Vec<VecDeque<u8>>,
    bytes: usize,
    max_bytes: usize,
    off: bool,
}

impl Default for StoragePool {
    fn default() -> Self {
        StoragePool::new(StoragePool::MAX_BYTES)
    }
}

impl StoragePool {
    /// Storages kept at most.
    pub(crate) const MAX_STORAGES: usize = 2;
    /// Bytes kept at most by default: what an idle endpoint may hold.
    pub(crate) const MAX_BYTES: usize = 8 << 20;

    /// A pool that keeps at most `max_bytes`.
    pub(crate) fn new(max_bytes: usize) -> StoragePool {
        StoragePool(Arc::new(Mutex::new(PoolInner {
            storages: Vec::new(),
            bytes: 0,
            max_bytes,
            off: false,
        })))
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, PoolInner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep `storage` if there is room (else it is freed).
    fn put(&self, storage: VecDeque<u8>) {
        let mut p = self.inner();
        let cap = storage.capacity();
        if !p.off && p.storages.len() < Self::MAX_STORAGES && p.bytes + cap <= p.max_bytes {
            p.bytes += cap;
            p.storages.push(storage);
        }
    }

    fn take(&self) -> Option<VecDeque<u8>> {
        let mut p = self.inner();
        let s = p.storages.pop()?;
        p.bytes -= s.capacity();
        Some(s)
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.inner().bytes
    }

    /// Stop keeping storages (and free those kept), or start again.
    pub(crate) fn set_off(&self, off: bool) {
        let mut p = self.inner();
        p.off = off;
        if off {
            p.storages.clear();
            p.bytes = 0;
        }
    }
}

/// Why a rewrite was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteError {
    /// Part of the range is not in the buffer (already acknowledged, or
    /// never queued).
    OutOfRange,
}

/// Record-aware byte queue indexed by sequence number.
#[derive(Debug, Clone)]
pub(crate) struct SendBuffer {
    /// The bytes, oldest first.
    data: VecDeque<u8>,
    /// Upper bound on `data.len()`.
    capacity: usize,
    /// Sequence number of `data[0]`.
    head_seq: SeqNumber,
    /// Stream offset (bytes since the first data byte) of `data[0]`; u64 so
    /// that record boundaries never wrap.
    head_off: u64,
    /// Exclusive end offsets of live records, ascending. The last one equals
    /// the buffer's end offset.
    records: VecDeque<u64>,
    /// Bytes acknowledged since the storage last held more than a quarter
    /// of its allocation (the shrink rule's hysteresis).
    low_acked: usize,
    /// Where emptied storage goes and empty buffers take theirs from;
    /// without one, emptied storage is freed.
    pool: Option<StoragePool>,
}

impl SendBuffer {
    /// An empty buffer whose first byte will carry sequence number `first_seq`.
    pub(crate) fn new(capacity: usize, first_seq: SeqNumber) -> SendBuffer {
        SendBuffer {
            data: VecDeque::new(),
            capacity,
            head_seq: first_seq,
            head_off: 0,
            records: VecDeque::new(),
            low_acked: 0,
            pool: None,
        }
    }

    /// Share `pool` for storage (see [`StoragePool`]).
    pub(crate) fn set_pool(&mut self, pool: StoragePool) {
        self.pool = Some(pool);
    }

    /// Bytes held (unacknowledged plus unsent).
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    /// The most it can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Free space.
    pub(crate) fn free(&self) -> usize {
        self.capacity.saturating_sub(self.data.len())
    }

    /// Sequence number of the first held byte (SND.UNA for data).
    #[cfg(test)]
    pub(crate) fn head_seq(&self) -> SeqNumber {
        self.head_seq
    }

    /// Sequence number just past the last held byte.
    pub(crate) fn end_seq(&self) -> SeqNumber {
        self.head_seq + self.data.len()
    }

    /// Queue as much of `bytes` as fits, as one record. Returns the count.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.free());
        if n == 0 {
            return 0;
        }
        if self.data.capacity() == 0 {
            if let Some(mut s) = self.pool.as_ref().and_then(StoragePool::take) {
                s.clear();
                self.data = s;
            }
        }
        self.data.extend(&bytes[..n]);
        if self.data.len() > self.data.capacity() / 4 {
            self.low_acked = 0;
        }
        let end = self.head_off + self.data.len() as u64;
        self.records.push_back(end);
        n
    }

    /// Offset of `seq` from the head, if it lies within `[head, end]`.
    fn index_of(&self, seq: SeqNumber) -> Option<usize> {
        let d = seq.diff(self.head_seq);
        if d < 0 || d as usize > self.data.len() {
            return None;
        }
        Some(d as usize)
    }

    /// Append `len` bytes starting at `seq` to `out`. Bytes outside the
    /// buffer are not copied; returns the count copied.
    pub(crate) fn read(&self, seq: SeqNumber, len: usize, out: &mut Vec<u8>) -> usize {
        let Some(start) = self.index_of(seq) else {
            return 0;
        };
        let end = start.saturating_add(len).min(self.data.len());
        if end <= start {
            return 0;
        }
        let (a, b) = self.data.as_slices();
        if start < a.len() {
            let a_end = end.min(a.len());
            out.extend_from_slice(&a[start..a_end]);
            if end > a.len() {
                out.extend_from_slice(&b[..end - a.len()]);
            }
        } else {
            out.extend_from_slice(&b[start - a.len()..end - a.len()]);
        }
        end - start
    }

    /// Drop every byte before `seq` (it was acknowledged).
    pub(crate) fn ack_to(&mut self, seq: SeqNumber) {
        let d = seq.diff(self.head_seq);
        if d <= 0 {
            return;
        }
        let n = (d as usize).min(self.data.len());
        self.data.drain(..n);
        self.low_acked = self.low_acked.saturating_add(n);
        self.head_seq += n;
        self.head_off += n as u64;
        while self
            .records
            .front()
            .is_some_and(|&end| end <= self.head_off)
        {
            self.records.pop_front();
        }
        self.trim();
    }

    /// Give back storage that is no longer needed: all of it when empty (to
    /// the pool, or freed), or half and more of a large allocation that
    /// stayed at most an eighth full while a whole allocation's worth was
    /// acknowledged.
    fn trim(&mut self) {
        if self.data.is_empty() {
            if self.data.capacity() > 0 {
                let s = std::mem::take(&mut self.data);
                if let Some(p) = &self.pool {
                    p.put(s);
                }
            }
            if self.records.capacity() > 0 {
                self.records = VecDeque::new();
            }
            self.low_acked = 0;
        } else if self.data.capacity() >= 64 << 10
            && self.data.len() <= self.data.capacity() / 8
            && self.low_acked >= self.data.capacity()
        {
            self.data.shrink_to(self.data.len() * 2);
            self.low_acked = 0;
        }
    }

    /// Heap bytes held now.
    pub(crate) fn allocated(&self) -> usize {
        self.data.capacity() + self.records.capacity() * 8
    }

    /// Bytes from `seq` to the end of the record containing `seq`, or `None`
    /// if `seq` is not a held byte.
    pub(crate) fn record_remaining(&self, seq: SeqNumber) -> Option<usize> {
        let idx = self.index_of(seq)?;
        if idx >= self.data.len() {
            return None;
        }
        let off = self.head_off + idx as u64;
        // First record whose end lies beyond `off`: binary search.
        let i = self.records.partition_point(|&end| end <= off);
        let end = *self.records.get(i)?;
        Some((end - off) as usize)
    }

    /// Overwrite held bytes starting at `seq` with `bytes` in place (an
    /// inconsistent retransmission rewrites a slot before it is resent).
    pub(crate) fn rewrite(&mut self, seq: SeqNumber, bytes: &[u8]) -> Result<(), RewriteError> {
        let start = self.index_of(seq).ok_or(RewriteError::OutOfRange)?;
        let end = start
            .checked_add(bytes.len())
            .ok_or(RewriteError::OutOfRange)?;
        if end > self.data.len() {
            return Err(RewriteError::OutOfRange);
        }
        let (a, b) = self.data.as_mut_slices();
        let mut src = bytes;
        if start < a.len() {
            let n = (a.len() - start).min(src.len());
            a[start..start + n].copy_from_slice(&src[..n]);
            src = &src[n..];
            if !src.is_empty() {
                b[..src.len()].copy_from_slice(src);
            }
        } else {
            let s = start - a.len();
            b[s..s + src.len()].copy_from_slice(src);
        }
        Ok(())
    }

    /// Number of live records (for tests and memory accounting).
    #[cfg(test)]
    pub(crate) fn record_count(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(cap: usize) -> SendBuffer {
        SendBuffer::new(cap, SeqNumber(u32::MAX - 3))
    }

    #[test]
    fn storage_shrinks_only_when_it_stays_mostly_unused() {
        let mut b = buf(1 << 20);
        assert_eq!(b.allocated(), 0);
        b.write(&[7u8; 300_000]);
        let cap = b.allocated();
        assert!(cap >= 300_000);
        // A busy sender: most of it acknowledged, refilled before the
        // next acknowledgement — the storage stays (no free, no fault-in).
        for _ in 0..20 {
            b.ack_to(b.head_seq() + 290_000);
            b.write(&[7u8; 290_000]);
            assert!(b.allocated() >= cap, "kept while busy");
        }
        // A sender that slowed down: at most an eighth in use while a
        // whole allocation's worth is acknowledged — then it shrinks.
        b.ack_to(b.head_seq() + 290_000);
        let mut acked = 0;
        while b.allocated() >= cap {
            b.write(&[7u8; 1000]);
            b.ack_to(b.head_seq() + 1000);
            acked += 1000;
            assert!(acked <= cap + 1000, "never shrank");
        }
        assert!(acked + 290_000 >= 300_000, "not before: {acked}");
        assert!(b.allocated() < 100_000, "shrunk: {}", b.allocated());
        let mut out = Vec::new();
        assert_eq!(b.read(b.head_seq(), 20_000, &mut out), 10_000);
        b.ack_to(b.end_seq());
        assert_eq!(b.allocated(), 0, "empty: freed");
    }

    #[test]
    fn emptied_storage_goes_to_the_pool_and_back() {
        let pool = StoragePool::default();
        let mut a = buf(1 << 20);
        a.set_pool(pool.clone());
        a.write(&[7u8; 300_000]);
        let cap = a.allocated();
        a.ack_to(a.end_seq());
        assert_eq!(a.allocated(), 0, "an empty buffer holds nothing");
        let kept = pool.bytes();
        assert!(kept >= 300_000 && kept <= cap, "the pool has it: {kept}");
        // The next buffer to write takes it, its old bytes gone.
        let mut b = buf(1 << 20);
        b.set_pool(pool.clone());
        b.write(&[1u8; 100]);
        assert_eq!(pool.bytes(), 0);
        assert!(b.allocated() >= kept && b.allocated() < kept + 100);
        let mut out = Vec::new();
        assert_eq!(b.read(b.head_seq(), 1000, &mut out), 100);
        assert_eq!(out, vec![1u8; 100]);
        // Bounded in count and bytes; nothing kept while off.
        for _ in 0..5 {
            let mut c = buf(1 << 20);
            c.set_pool(pool.clone());
            c.write(&[1u8; 1_000_000]);
            c.ack_to(c.end_seq());
        }
        assert!(pool.bytes() <= StoragePool::MAX_BYTES);
        let small = StoragePool::new(100_000);
        let mut d = buf(1 << 20);
        d.set_pool(small.clone());
        d.write(&[1u8; 200_000]);
        d.ack_to(d.end_seq());
        assert_eq!(small.bytes(), 0, "larger than its bound: freed");
        assert!(pool.inner().storages.len() <= StoragePool::MAX_STORAGES);
        assert!(pool.bytes() >= 1_000_000);
        pool.set_off(true);
        assert_eq!(pool.bytes(), 0);
        b.ack_to(b.end_seq());
        assert_eq!(pool.bytes(), 0, "off: freed");
    }

    #[test]
    fn write_respects_capacity() {
        let mut b = buf(10);
        assert_eq!(b.write(b"hello"), 5);
        assert_eq!(b.write(b"world!!"), 5);
        assert_eq!(b.write(b"x"), 0);
        assert_eq!(b.free(), 0);
        assert_eq!(b.record_count(), 2);
    }

    #[test]
    fn read_across_wrap_and_ring_boundary() {
        let mut b = buf(8);
        b.write(b"abcdef");
        b.ack_to(b.head_seq() + 4);
        b.write(b"ghijkl"); // forces the VecDeque to wrap internally
        let mut out = Vec::new();
        assert_eq!(b.read(b.head_seq(), 100, &mut out), 8);
        assert_eq!(out, b"efghijkl");
        out.clear();
        assert_eq!(b.read(b.head_seq() + 1, 3, &mut out), 3);
        assert_eq!(out, b"fgh");
        // Outside the buffer: nothing.
        out.clear();
        assert_eq!(b.read(b.head_seq() - 1, 3, &mut out), 0);
        assert_eq!(b.read(b.end_seq(), 3, &mut out), 0);
    }

    #[test]
    fn records_bound_segments() {
        let mut b = buf(100);
        b.write(b"aaaa");
        b.write(b"bbbbbbbb");
        let h = b.head_seq();
        assert_eq!(b.record_remaining(h), Some(4));
        assert_eq!(b.record_remaining(h + 2), Some(2));
        assert_eq!(b.record_remaining(h + 4), Some(8));
        assert_eq!(b.record_remaining(h + 11), Some(1));
        assert_eq!(b.record_remaining(h + 12), None);
        b.ack_to(h + 5);
        assert_eq!(b.record_count(), 1);
        assert_eq!(b.record_remaining(h + 5), Some(7));
    }

    #[test]
    fn rewrite_in_place() {
        let mut b = buf(8);
        b.write(b"abcdef");
        b.ack_to(b.head_seq() + 4);
        b.write(b"ghijkl");
        let h = b.head_seq();
        assert_eq!(b.rewrite(h + 1, b"XYZW"), Ok(()));
        let mut out = Vec::new();
        b.read(h, 8, &mut out);
        assert_eq!(out, b"eXYZWjkl");
        assert_eq!(b.rewrite(h + 6, b"123"), Err(RewriteError::OutOfRange));
        assert_eq!(b.rewrite(h - 1, b"1"), Err(RewriteError::OutOfRange));
    }
}
