//! Deterministic, position-derived byte streams for bulk transfers, and a
//! running hash to fingerprint what was received.

/// An endless byte stream where byte `i` depends only on `(seed, i)`, so a
/// sender and a receiver can generate and check it independently without
/// storing it.
///
/// Byte `i` is byte `i % 8` (little-endian) of `splitmix64(seed ^ (i / 8))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pattern {
    seed: u64,
}

/// SplitMix64's finalizer (Steele, Lea, Flood 2014).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Pattern {
    /// The stream for `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Pattern {
        Pattern { seed }
    }

    /// The seed.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    fn word(&self, block: u64) -> [u8; 8] {
        splitmix64(self.seed ^ block).to_le_bytes()
    }

    /// Byte at stream position `pos`.
    #[must_use]
    pub fn byte_at(&self, pos: u64) -> u8 {
        self.word(pos / 8)[(pos % 8) as usize]
    }

    /// Fill `buf` with the stream bytes starting at position `offset`.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let mut pos = offset;
        let mut i = 0;
        while i < buf.len() {
            let w = self.word(pos / 8);
            let start = (pos % 8) as usize;
            let n = (8 - start).min(buf.len() - i);
            buf[i..i + n].copy_from_slice(&w[start..start + n]);
            i += n;
            pos += n as u64;
        }
    }

    /// Position of the first byte of `data` that differs from the stream
    /// starting at `offset`, if any.
    #[must_use]
    pub fn first_mismatch(&self, offset: u64, data: &[u8]) -> Option<u64> {
        let mut expect = [0u8; 4096];
        let mut done = 0usize;
        while done < data.len() {
            let n = (data.len() - done).min(expect.len());
            self.fill(offset + done as u64, &mut expect[..n]);
            if let Some(k) = data[done..done + n]
                .iter()
                .zip(&expect[..n])
                .position(|(a, b)| a != b)
            {
                return Some(offset + (done + k) as u64);
            }
            done += n;
        }
        None
    }

    /// The [`StreamHash`] of the first `len` bytes of the stream.
    #[must_use]
    pub fn digest(&self, len: u64) -> u64 {
        let mut h = StreamHash::new();
        let mut buf = [0u8; 4096];
        let mut pos = 0u64;
        while pos < len {
            let n = (len - pos).min(buf.len() as u64) as usize;
            self.fill(pos, &mut buf[..n]);
            h.update(&buf[..n]);
            pos += n as u64;
        }
        h.finish()
    }
}

/// 64-bit FNV-1a over a byte stream; independent of how the stream is cut
/// into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHash(u64);

impl Default for StreamHash {
    fn default() -> Self {
        StreamHash::new()
    }
}

impl StreamHash {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The hash of the empty stream.
    #[must_use]
    pub fn new() -> StreamHash {
        StreamHash(Self::OFFSET)
    }

    /// Append bytes.
    pub fn update(&mut self, data: &[u8]) {
        let mut h = self.0;
        for &b in data {
            h ^= u64::from(b);
            h = h.wrapping_mul(Self::PRIME);
        }
        self.0 = h;
    }

    /// The hash so far.
    #[must_use]
    pub fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_matches_byte_at_from_any_offset() {
        let p = Pattern::new(99);
        for offset in [0u64, 1, 7, 8, 13, 1 << 33] {
            let mut buf = vec![0u8; 37];
            p.fill(offset, &mut buf);
            for (i, b) in buf.iter().enumerate() {
                assert_eq!(*b, p.byte_at(offset + i as u64));
            }
        }
        let head = |seed| {
            let mut v = vec![0u8; 64];
            Pattern::new(seed).fill(0, &mut v);
            v
        };
        assert_ne!(head(1), head(2));
    }

    #[test]
    fn mismatch_and_digest() {
        let p = Pattern::new(5);
        let mut data = vec![0u8; 10_000];
        p.fill(123, &mut data);
        assert_eq!(p.first_mismatch(123, &data), None);
        data[9_000] ^= 1;
        assert_eq!(p.first_mismatch(123, &data), Some(9_123));
        let mut h = StreamHash::new();
        let mut whole = vec![0u8; 5000];
        p.fill(0, &mut whole);
        h.update(&whole[..1234]);
        h.update(&whole[1234..]);
        assert_eq!(h.finish(), p.digest(5000));
        assert_ne!(p.digest(5000), p.digest(4999));
        // FNV-1a test vector: "a".
        let mut a = StreamHash::new();
        a.update(b"a");
        assert_eq!(a.finish(), 0xaf63_dc4c_8601_ec8c);
    }
}
