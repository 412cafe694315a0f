//! Consistent Overhead Byte Stuffing (Cheshire & Baker, 1999), the escape
//! code that lets TCP Hollywood use a zero byte as its frame marker
//! (thesis §4.2: "The intermediary layer encodes messages using consistent
//! overhead byte stuffing").
//!
//! The encoding splits the input at every zero byte and into blocks of at
//! most 254 non-zero bytes. Each block is written as a code byte `n`
//! (1..=255) followed by `n - 1` data bytes; a code below 255 means "a zero
//! byte follows this block" (except after the last block), 255 means "a full
//! 254-byte block, no zero follows". The output never contains a zero byte.
//!
//! Output is the paper's canonical form (its reference code always closes
//! the last block, so input ending with a full 254-byte block gets a
//! trailing empty `01` block), byte-identical to the `cobs` crate's
//! `encode` into a buffer of [`max_encoded_len`] bytes for every non-empty
//! input. Two quirks of that crate differ: it encodes the empty input to
//! `[]` (here `[0x01]`, one empty block), and its `encode_vec` sizes its
//! buffer one byte tighter, which cuts the trailing `01` off zero-free
//! inputs whose length is a multiple of 254. The decoder accepts both.
//!
//! Speed: both directions work block by block: a word-at-a-time scan finds
//! the next zero and `copy_from_slice` moves the block (no per-byte pushes).

/// Longest data run of one COBS block.
const BLOCK: usize = 254;

/// Upper bound of the encoded length of `len` input bytes:
/// `len + len / 254 + 1`.
#[must_use]
pub const fn max_encoded_len(len: usize) -> usize {
    len + len / BLOCK + 1
}

/// Why [`encode_into`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The output slice is shorter than [`max_encoded_len`] of the input.
    BufferTooSmall {
        /// Bytes the output must be able to hold.
        needed: usize,
        /// Bytes it holds.
        got: usize,
    },
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EncodeError::BufferTooSmall { needed, got } => {
                write!(
                    f,
                    "COBS output buffer too small: need {needed} bytes, got {got}"
                )
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// Why [`decode`] / [`decode_into`] rejected its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The input contains a zero byte (COBS output never does; in a stream
    /// the zero is a frame marker and must not be passed to the decoder).
    ZeroByte {
        /// Offset of the first zero byte.
        offset: usize,
    },
    /// A code byte announces more data bytes than the input holds.
    Truncated {
        /// Offset of the offending code byte.
        offset: usize,
    },
    /// The output slice is too small for the decoded data (an output of
    /// `input.len()` bytes is always enough).
    BufferTooSmall {
        /// Bytes the output must be able to hold, at least.
        needed: usize,
        /// Bytes it holds.
        got: usize,
    },
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::ZeroByte { offset } => {
                write!(f, "zero byte in COBS data at offset {offset}")
            }
            DecodeError::Truncated { offset } => {
                write!(
                    f,
                    "COBS block at offset {offset} runs past the end of the input"
                )
            }
            DecodeError::BufferTooSmall { needed, got } => {
                write!(
                    f,
                    "COBS output buffer too small: need {needed} bytes, got {got}"
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Offset of the first zero byte in `hay` (`memchr`: SIMD where the CPU
/// has it).
#[inline]
pub(crate) fn find_zero(hay: &[u8]) -> Option<usize> {
    memchr::memchr(0, hay)
}

/// Offset of the last zero byte in `hay`.
#[inline]
pub(crate) fn rfind_zero(hay: &[u8]) -> Option<usize> {
    memchr::memrchr(0, hay)
}

/// Incremental encoder: feeds any number of slices into one COBS encoding
/// (used to encode header, payload and CRC without first concatenating
/// them). The output slice must hold [`max_encoded_len`] of the total input.
#[derive(Debug)]
pub(crate) struct Encoder {
    /// Index of the current block's code byte.
    code: usize,
    /// Write index.
    w: usize,
    /// Data bytes in the current block.
    run: usize,
}

impl Encoder {
    pub(crate) fn new() -> Self {
        Encoder {
            code: 0,
            w: 1,
            run: 0,
        }
    }

    /// Encodes `src`. Panics only if `dst` is shorter than the documented
    /// bound (a caller bug, checked by every public entry point).
    pub(crate) fn feed(&mut self, mut src: &[u8], dst: &mut [u8]) {
        while !src.is_empty() {
            let room = BLOCK - self.run;
            let window = &src[..src.len().min(room)];
            match find_zero(window) {
                Some(i) => {
                    dst[self.w..self.w + i].copy_from_slice(&window[..i]);
                    dst[self.code] = (self.run + i + 1) as u8;
                    self.w += i;
                    self.code = self.w;
                    self.w += 1;
                    self.run = 0;
                    src = &src[i + 1..];
                }
                None => {
                    let n = window.len();
                    dst[self.w..self.w + n].copy_from_slice(window);
                    self.w += n;
                    self.run += n;
                    src = &src[n..];
                    if self.run == BLOCK {
                        dst[self.code] = 0xFF;
                        self.code = self.w;
                        self.w += 1;
                        self.run = 0;
                    }
                }
            }
        }
    }

    /// Closes the last block; returns the encoded length.
    pub(crate) fn finish(self, dst: &mut [u8]) -> usize {
        dst[self.code] = (self.run + 1) as u8;
        self.w
    }
}

/// Encodes `src` into `dst`, returning the encoded length. `dst` must hold
/// at least [`max_encoded_len`]`(src.len())` bytes. No delimiter is written.
pub fn encode_into(src: &[u8], dst: &mut [u8]) -> Result<usize, EncodeError> {
    let needed = max_encoded_len(src.len());
    if dst.len() < needed {
        return Err(EncodeError::BufferTooSmall {
            needed,
            got: dst.len(),
        });
    }
    let mut e = Encoder::new();
    e.feed(src, dst);
    Ok(e.finish(dst))
}

/// Encodes `src` into a new vector (no delimiter).
#[must_use]
pub fn encode(src: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; max_encoded_len(src.len())];
    let mut e = Encoder::new();
    e.feed(src, &mut out);
    let n = e.finish(&mut out);
    out.truncate(n);
    out
}

/// Appends the encoding of the concatenation of `parts` to `out` (no
/// delimiter); returns the number of bytes appended.
///
/// The same blocks as [`Encoder`], appended as they are found: no
/// zero-filled output region first (a large frame paid a memset of its
/// whole length before).
pub(crate) fn encode_parts_append(parts: &[&[u8]], out: &mut Vec<u8>) -> usize {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let start = out.len();
    out.reserve(max_encoded_len(total));
    // Index of the current block's code byte, written when it closes.
    let mut code = out.len();
    out.push(0);
    let mut run = 0;
    for p in parts {
        let mut src = *p;
        while !src.is_empty() {
            let window = &src[..src.len().min(BLOCK - run)];
            match find_zero(window) {
                Some(i) => {
                    out.extend_from_slice(&window[..i]);
                    out[code] = (run + i + 1) as u8;
                    code = out.len();
                    out.push(0);
                    run = 0;
                    src = &src[i + 1..];
                }
                None => {
                    let n = window.len();
                    out.extend_from_slice(window);
                    run += n;
                    src = &src[n..];
                    if run == BLOCK {
                        out[code] = 0xFF;
                        code = out.len();
                        out.push(0);
                        run = 0;
                    }
                }
            }
        }
    }
    out[code] = (run + 1) as u8;
    out.len() - start
}

/// Decodes `src` (one COBS encoding, without delimiters) into `dst`,
/// returning the decoded length. A `dst` of `src.len()` bytes always
/// suffices. The empty input decodes to nothing.
pub fn decode_into(src: &[u8], dst: &mut [u8]) -> Result<usize, DecodeError> {
    if let Some(offset) = find_zero(src) {
        return Err(DecodeError::ZeroByte { offset });
    }
    decode_zero_free(src, dst)
}

/// [`decode_into`] for a `src` the caller knows holds no zero byte (the
/// deframer's runs lie between two markers): no second scan for one. A
/// zero code byte is still refused; a zero inside a block's data would be
/// copied, so the caller must keep the promise (checked in debug builds).
pub(crate) fn decode_zero_free(src: &[u8], dst: &mut [u8]) -> Result<usize, DecodeError> {
    debug_assert!(
        find_zero(src).is_none(),
        "decode_zero_free: input holds a zero"
    );
    let mut r = 0;
    let mut w = 0;
    while r < src.len() {
        let code = usize::from(src[r]);
        if code == 0 {
            return Err(DecodeError::ZeroByte { offset: r });
        }
        let n = code - 1;
        let end = r + 1 + n;
        if end > src.len() {
            return Err(DecodeError::Truncated { offset: r });
        }
        let zero = code != 0xFF && end < src.len();
        let needed = w + n + usize::from(zero);
        if needed > dst.len() {
            return Err(DecodeError::BufferTooSmall {
                needed,
                got: dst.len(),
            });
        }
        dst[w..w + n].copy_from_slice(&src[r + 1..end]);
        w += n;
        if zero {
            dst[w] = 0;
            w += 1;
        }
        r = end;
    }
    Ok(w)
}

/// [`decode_zero_free`] of the concatenation of `parts` (a run that spans
/// buffered bytes and a new segment), without first gathering them into
/// one buffer. Same result and errors (offsets into the concatenation).
pub(crate) fn decode_zero_free_parts(
    parts: &[&[u8]],
    dst: &mut [u8],
) -> Result<usize, DecodeError> {
    if let [one] = parts {
        return decode_zero_free(one, dst);
    }
    debug_assert!(parts.iter().all(|p| find_zero(p).is_none()));
    let total: usize = parts.iter().map(|p| p.len()).sum();
    // Cursor: part `pi`, offset `po` in it; `r` counts bytes consumed.
    let (mut pi, mut po) = (0, 0);
    let mut r = 0;
    let mut w = 0;
    while r < total {
        while po == parts[pi].len() {
            pi += 1;
            po = 0;
        }
        let code = usize::from(parts[pi][po]);
        if code == 0 {
            return Err(DecodeError::ZeroByte { offset: r });
        }
        let n = code - 1;
        let end = r + 1 + n;
        if end > total {
            return Err(DecodeError::Truncated { offset: r });
        }
        let zero = code != 0xFF && end < total;
        let needed = w + n + usize::from(zero);
        if needed > dst.len() {
            return Err(DecodeError::BufferTooSmall {
                needed,
                got: dst.len(),
            });
        }
        po += 1;
        let mut left = n;
        while left > 0 {
            while po == parts[pi].len() {
                pi += 1;
                po = 0;
            }
            let k = left.min(parts[pi].len() - po);
            dst[w..w + k].copy_from_slice(&parts[pi][po..po + k]);
            w += k;
            po += k;
            left -= k;
        }
        if zero {
            dst[w] = 0;
            w += 1;
        }
        r = end;
    }
    Ok(w)
}

/// Decodes `src` (one COBS encoding, without delimiters) into a new vector.
pub fn decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = vec![0u8; src.len()];
    let n = decode_into(src, &mut out)?;
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors from Cheshire & Baker and docs/PROTOCOL.md §COBS.
    #[test]
    fn vectors() {
        let cases: &[(&[u8], &[u8])] = &[
            (&[], &[0x01]),
            (&[0x00], &[0x01, 0x01]),
            (&[0x00, 0x00], &[0x01, 0x01, 0x01]),
            (&[0x11, 0x22, 0x00, 0x33], &[0x03, 0x11, 0x22, 0x02, 0x33]),
            (&[0x11, 0x22, 0x33, 0x44], &[0x05, 0x11, 0x22, 0x33, 0x44]),
            (&[0x11, 0x00, 0x00, 0x00], &[0x02, 0x11, 0x01, 0x01, 0x01]),
        ];
        for (raw, enc) in cases {
            assert_eq!(encode(raw), *enc, "encode {raw:02x?}");
            assert_eq!(decode(enc).unwrap(), *raw, "decode {enc:02x?}");
        }
    }

    #[test]
    fn full_blocks() {
        // 254 non-zero bytes: one full block and a trailing empty block.
        let raw: Vec<u8> = (1..=254).collect();
        let enc = encode(&raw);
        assert_eq!(enc.len(), 256);
        assert_eq!((enc[0], enc[255]), (0xFF, 0x01));
        assert_eq!(&enc[1..255], &raw[..]);
        assert_eq!(decode(&enc).unwrap(), raw);
        // The form without the trailing empty block decodes the same.
        assert_eq!(decode(&enc[..255]).unwrap(), raw);
        // 255 non-zero bytes: FF + 254, then 02 + 1.
        let raw: Vec<u8> = (0..255).map(|i| (i % 255 + 1) as u8).collect();
        let enc = encode(&raw);
        assert_eq!(enc.len(), 257);
        assert_eq!((enc[0], enc[255], enc[256]), (0xFF, 0x02, raw[254]));
        // 254 non-zero then a zero: FF + 254, 01, 01.
        let mut raw: Vec<u8> = vec![0x42; 254];
        raw.push(0);
        let enc = encode(&raw);
        assert_eq!(&enc[255..], &[0x01, 0x01]);
        assert_eq!(decode(&enc).unwrap(), raw);
    }

    #[test]
    fn errors() {
        assert_eq!(
            decode(&[0x03, 0x11, 0x00]),
            Err(DecodeError::ZeroByte { offset: 2 })
        );
        assert_eq!(
            decode(&[0x05, 0x11, 0x22]),
            Err(DecodeError::Truncated { offset: 0 })
        );
        assert_eq!(
            decode(&[0x02, 0x11, 0x04, 0x01]),
            Err(DecodeError::Truncated { offset: 2 })
        );
        let mut small = [0u8; 1];
        assert_eq!(
            decode_into(&[0x03, 0x11, 0x22], &mut small),
            Err(DecodeError::BufferTooSmall { needed: 2, got: 1 })
        );
        assert_eq!(
            encode_into(&[1, 2, 3], &mut small),
            Err(EncodeError::BufferTooSmall { needed: 4, got: 1 })
        );
        assert_eq!(decode(&[]).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn decoding_from_parts_matches_one_slice() {
        let inputs: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            (0..600u32).map(|i| (i % 7) as u8).collect(),
            (0..700u32).map(|i| (i % 251 + 1) as u8).collect(),
            (0..508u32).map(|i| (i % 255 + 1) as u8).collect(),
        ];
        for raw in inputs {
            let enc = encode(&raw);
            for cut in [
                0,
                1,
                raw.len() / 3,
                raw.len() / 2,
                raw.len().saturating_sub(1),
                raw.len(),
            ] {
                let cut = cut.min(raw.len());
                let mut out = vec![7u8];
                let n = encode_parts_append(&[&raw[..cut], &[], &raw[cut..]], &mut out);
                assert_eq!((n, &out[1..]), (enc.len(), &enc[..]), "cut at {cut}");
            }
            let mut one = vec![0u8; enc.len()];
            let n = decode_into(&enc, &mut one).unwrap();
            assert_eq!(&one[..n], &raw[..]);
            for i in 0..=enc.len() {
                for j in i..=enc.len().min(i + 300) {
                    let parts = [&enc[..i], &enc[i..j], &enc[j..]];
                    let mut dst = vec![0u8; enc.len()];
                    let m = decode_zero_free_parts(&parts, &mut dst).unwrap();
                    assert_eq!(&dst[..m], &raw[..], "split at {i}, {j}");
                }
            }
            // Errors and their offsets agree too.
            if enc.len() > 2 {
                let cut = &enc[..enc.len() - 1];
                let mut a = vec![0u8; enc.len()];
                let mut b = vec![0u8; enc.len()];
                let half = cut.len() / 2;
                assert_eq!(
                    decode_into(cut, &mut a),
                    decode_zero_free_parts(&[&cut[..half], &cut[half..]], &mut b)
                );
            }
        }
    }

    #[test]
    fn find_zero_all_positions() {
        for len in 0..80 {
            let mut v = vec![0xAB_u8; len];
            assert_eq!(find_zero(&v), None);
            for z in 0..len {
                v[z] = 0;
                assert_eq!(find_zero(&v), Some(z), "len {len} zero {z}");
                // A later zero must not win over an earlier one.
                if z + 1 < len {
                    v[len - 1] = 0;
                    assert_eq!(find_zero(&v), Some(z));
                    v[len - 1] = 0xAB;
                }
                v[z] = 0x80; // high bit set: a trap for word-at-a-time searches
                assert_eq!(find_zero(&v), None);
                v[z] = 0xAB;
            }
        }
        // 0x01 next to 0x00 (borrow propagation) must not mislocate.
        let v = [0x01, 0x01, 0x00, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01];
        assert_eq!(find_zero(&v), Some(2));
        assert_eq!(rfind_zero(&v), Some(2));
    }
}
