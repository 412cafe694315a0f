//! Source symbols and the erasure code.
//!
//! A block's `k` source messages become `k` symbols of one size `S`:
//!
//! ```text
//! 0..4   payload length L, u32 big-endian
//! 4..6   sub-stream, u16 big-endian
//! 6..6+L payload
//! then   zero bytes up to S (S = the block's largest 6 + L, rounded up to even)
//! ```
//!
//! The code is `reed-solomon-simd`'s systematic Reed-Solomon over GF(2^16)
//! (Leopard-RS, O(n log n)): `m` recovery symbols such that any `k` of the
//! `k + m` rebuild the `k` sources — an MDS code, so the receiver needs
//! exactly as many symbols as messages it lost, never more (docs/FEC.md
//! compares it with RaptorQ).

/// Bytes of a source symbol before the payload.
pub const SYMBOL_PREFIX: usize = 6;

/// Why encoding or decoding failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// Fewer than `k` symbols: the block cannot be rebuilt (yet).
    NotEnough,
    /// Symbols of different sizes, or a size the code cannot take.
    BadSymbols,
    /// A rebuilt symbol does not hold a source (its length runs past it).
    BadSource,
    /// The code refused the shard counts or input (its message).
    Code(String),
}

impl core::fmt::Display for CodecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CodecError::NotEnough => f.write_str("fewer symbols than source messages"),
            CodecError::BadSymbols => f.write_str("symbols of different or odd sizes"),
            CodecError::BadSource => f.write_str("rebuilt symbol is not a source message"),
            CodecError::Code(e) => write!(f, "erasure code: {e}"),
        }
    }
}

impl std::error::Error for CodecError {}

/// The symbol size of a block whose payloads have these lengths.
pub fn symbol_size(lens: impl IntoIterator<Item = usize>) -> usize {
    let s = lens.into_iter().max().unwrap_or(0) + SYMBOL_PREFIX;
    s + s % 2
}

/// Message `payload` on `substream` as a source symbol of `size` bytes
/// (at least `SYMBOL_PREFIX + payload.len()`).
pub fn source_symbol(substream: u16, payload: &[u8], size: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(size);
    s.extend((payload.len() as u32).to_be_bytes());
    s.extend(substream.to_be_bytes());
    s.extend_from_slice(payload);
    s.resize(size.max(s.len()), 0);
    s
}

/// The sub-stream and payload a source symbol holds.
pub fn parse_source(symbol: &[u8]) -> Result<(u16, &[u8]), CodecError> {
    if symbol.len() < SYMBOL_PREFIX {
        return Err(CodecError::BadSource);
    }
    let len = u32::from_be_bytes([symbol[0], symbol[1], symbol[2], symbol[3]]) as usize;
    let sub = u16::from_be_bytes([symbol[4], symbol[5]]);
    let payload = symbol
        .get(SYMBOL_PREFIX..SYMBOL_PREFIX.saturating_add(len))
        .ok_or(CodecError::BadSource)?;
    Ok((sub, payload))
}

/// `m` repair symbols over `sources` (all of one even size).
pub fn encode(sources: &[Vec<u8>], m: usize) -> Result<Vec<Vec<u8>>, CodecError> {
    let size = sources.first().map_or(0, Vec::len);
    if size == 0 || !size.is_multiple_of(2) || sources.iter().any(|s| s.len() != size) {
        return Err(CodecError::BadSymbols);
    }
    reed_solomon_simd::encode(sources.len(), m, sources)
        .map_err(|e| CodecError::Code(e.to_string()))
}

/// The missing sources of a block of `k` with `m` repair symbols, from the
/// sources (index, symbol) and repair symbols (index, symbol) that arrived:
/// each missing index with its rebuilt symbol, in index order.
pub fn decode(
    k: usize,
    m: usize,
    sources: &[(usize, &[u8])],
    repairs: &[(usize, &[u8])],
) -> Result<Vec<(usize, Vec<u8>)>, CodecError> {
    if sources.len() + repairs.len() < k {
        return Err(CodecError::NotEnough);
    }
    let size = repairs.first().map_or(0, |r| r.1.len());
    if size == 0
        || !size.is_multiple_of(2)
        || sources.iter().chain(repairs).any(|s| s.1.len() != size)
        || sources.iter().any(|s| s.0 >= k)
        || repairs.iter().any(|r| r.0 >= m)
    {
        return Err(CodecError::BadSymbols);
    }
    let out = reed_solomon_simd::decode(k, m, sources.iter().copied(), repairs.iter().copied())
        .map_err(|e| CodecError::Code(e.to_string()))?;
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn source_symbols() {
        let s = source_symbol(7, b"hi", symbol_size([2, 1]));
        assert_eq!(s, [0, 0, 0, 2, 0, 7, b'h', b'i']);
        assert_eq!(parse_source(&s), Ok((7, &b"hi"[..])));
        assert_eq!(symbol_size([3]), 10);
        assert_eq!(
            parse_source(&[0, 0, 0, 9, 0, 0, 1, 2]),
            Err(CodecError::BadSource)
        );
        assert_eq!(parse_source(&[0, 0]), Err(CodecError::BadSource));
    }

    #[test]
    fn refuses_what_it_cannot_decode() {
        let src: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 8]).collect();
        let rep = encode(&src, 2).unwrap();
        // One source missing, no repair: not enough.
        let have: Vec<(usize, &[u8])> = vec![(0, &src[0]), (1, &src[1])];
        assert_eq!(decode(3, 2, &have, &[]), Err(CodecError::NotEnough));
        // Sizes that differ, indices out of range.
        let short = [0u8; 6];
        assert_eq!(
            decode(3, 2, &have, &[(0, &short[..])]),
            Err(CodecError::BadSymbols)
        );
        assert_eq!(
            decode(3, 2, &have, &[(2, &rep[0][..])]),
            Err(CodecError::BadSymbols)
        );
        assert!(encode(&[vec![1, 2, 3]], 1).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The codec invariant: any k of the n = k + m symbols rebuild the
        /// block's sources exactly.
        #[test]
        fn any_k_of_n_rebuild(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..20),
            m in 1usize..8,
            pick in any::<u64>(),
        ) {
            let k = payloads.len();
            let size = symbol_size(payloads.iter().map(Vec::len));
            let src: Vec<Vec<u8>> = payloads.iter().enumerate()
                .map(|(i, p)| source_symbol(i as u16, p, size)).collect();
            let rep = encode(&src, m).unwrap();
            // A pseudo-random subset of exactly k of the n symbols.
            let n = k + m;
            let mut order: Vec<usize> = (0..n).collect();
            let mut x = pick | 1;
            for i in (1..n).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let kept = &order[..k];
            let have: Vec<(usize, &[u8])> = kept.iter().filter(|&&i| i < k).map(|&i| (i, &src[i][..])).collect();
            let reps: Vec<(usize, &[u8])> = kept.iter().filter(|&&i| i >= k).map(|&i| (i - k, &rep[i - k][..])).collect();
            if reps.is_empty() {
                return Ok(()); // all sources kept: nothing to rebuild
            }
            let rebuilt = decode(k, m, &have, &reps).unwrap();
            let missing: Vec<usize> = (0..k).filter(|i| !kept.contains(i)).collect();
            prop_assert_eq!(rebuilt.iter().map(|r| r.0).collect::<Vec<_>>(), missing);
            for (i, s) in rebuilt {
                prop_assert_eq!(&s, &src[i]);
                let (sub, p) = parse_source(&s).unwrap();
                prop_assert_eq!(sub as usize, i);
                prop_assert_eq!(p, &payloads[i][..]);
            }
        }
    }
}
