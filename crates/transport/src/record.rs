//! The message record our QUIC and UDP glue puts in front of each payload.
//!
//! ```text
//! record := varint(id) varint(substream) flags:u8 [varint(depends_on)] varint(len) payload[len]
//! flags  := bit 0: depends_on present; other bits must be 0
//! ```
//!
//! Varints are QUIC's (RFC 9000 §16: two length bits, 1/2/4/8 bytes). A
//! QUIC stream carries records back to back (a stream per message carries
//! one); a datagram carries exactly one. Everything here parses peer bytes,
//! so every field is checked: ids and sub-streams must fit their types, the
//! length must not exceed [`MAX_MESSAGE`], and a stream parser keeps at most
//! one record's bytes (bounded memory). Integrity comes from QUIC's AEAD
//! (UDP datagrams are protected by the UDP checksum only, as RTP is).

use crate::MAX_MESSAGE;

/// A record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message id.
    pub id: u32,
    /// Sub-stream.
    pub substream: u16,
    /// Dependency.
    pub depends_on: Option<u32>,
    /// Payload length.
    pub len: usize,
}

/// Why peer bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A field is larger than its type or the payload than [`MAX_MESSAGE`].
    #[error("record field out of range")]
    OutOfRange,
    /// Unknown flag bits.
    #[error("unknown record flags {0:#x}")]
    Flags(u8),
    /// A datagram's length does not match its record.
    #[error("datagram length does not match its record")]
    Length,
    /// A stream ended inside a record.
    #[error("stream ended inside a record")]
    Truncated,
}

const FLAG_DEPENDS: u8 = 1;

/// Append `v` as a QUIC varint. Panics if `v >= 2^62` (never for our fields).
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
    } else {
        assert!(v < 1 << 62, "varint out of range");
        out.extend_from_slice(&(v | 0xC000_0000_0000_0000).to_be_bytes());
    }
}

/// Read a QUIC varint from the front of `b`: `(value, bytes used)`, or
/// `None` if `b` is too short.
pub fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3F);
    for &x in &b[1..len] {
        v = (v << 8) | u64::from(x);
    }
    Some((v, len))
}

/// Append a record (header and payload) to `out`.
pub fn encode(out: &mut Vec<u8>, id: u32, substream: u16, depends_on: Option<u32>, payload: &[u8]) {
    put_varint(out, u64::from(id));
    put_varint(out, u64::from(substream));
    out.push(if depends_on.is_some() {
        FLAG_DEPENDS
    } else {
        0
    });
    if let Some(d) = depends_on {
        put_varint(out, u64::from(d));
    }
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Bytes [`encode`] produces for a record.
pub fn encoded_len(id: u32, substream: u16, depends_on: Option<u32>, len: usize) -> usize {
    let v = |x: u64| match x {
        0..=63 => 1,
        64..=16383 => 2,
        16384..=0x3FFF_FFFF => 4,
        _ => 8,
    };
    v(u64::from(id))
        + v(u64::from(substream))
        + 1
        + depends_on.map_or(0, |d| v(u64::from(d)))
        + v(len as u64)
        + len
}

/// Parse a header from the front of `b`: `Ok(None)` if more bytes are needed.
pub fn parse_header(b: &[u8]) -> Result<Option<(Header, usize)>, RecordError> {
    let mut at = 0;
    let mut next = |b: &[u8]| -> Option<u64> {
        let (v, n) = get_varint(&b[at..])?;
        at += n;
        Some(v)
    };
    let Some(id) = next(b) else { return Ok(None) };
    let Some(substream) = next(b) else {
        return Ok(None);
    };
    let id = u32::try_from(id).map_err(|_| RecordError::OutOfRange)?;
    let substream = u16::try_from(substream).map_err(|_| RecordError::OutOfRange)?;
    let Some(&flags) = b.get(at) else {
        return Ok(None);
    };
    if flags & !FLAG_DEPENDS != 0 {
        return Err(RecordError::Flags(flags));
    }
    at += 1;
    let mut next = |b: &[u8]| -> Option<u64> {
        let (v, n) = get_varint(&b[at..])?;
        at += n;
        Some(v)
    };
    let depends_on = if flags & FLAG_DEPENDS != 0 {
        let Some(d) = next(b) else { return Ok(None) };
        Some(u32::try_from(d).map_err(|_| RecordError::OutOfRange)?)
    } else {
        None
    };
    let Some(len) = next(b) else { return Ok(None) };
    if len > MAX_MESSAGE as u64 {
        return Err(RecordError::OutOfRange);
    }
    Ok(Some((
        Header {
            id,
            substream,
            depends_on,
            len: len as usize,
        },
        at,
    )))
}

/// Parse a datagram holding exactly one record.
pub fn parse_datagram(b: &[u8]) -> Result<(Header, &[u8]), RecordError> {
    let Some((h, n)) = parse_header(b)? else {
        return Err(RecordError::Length);
    };
    if b.len() - n != h.len {
        return Err(RecordError::Length);
    }
    Ok((h, &b[n..]))
}

/// Incremental parser for one stream's records.
#[derive(Debug, Default)]
pub struct StreamParser {
    buf: Vec<u8>,
    failed: bool,
}

impl StreamParser {
    /// A parser at the start of a stream.
    pub fn new() -> StreamParser {
        StreamParser::default()
    }

    /// Feed the next in-order bytes; complete records are appended to `out`.
    /// After an error the stream is unusable and further bytes are ignored.
    pub fn push(
        &mut self,
        mut data: &[u8],
        out: &mut Vec<(Header, Vec<u8>)>,
    ) -> Result<(), RecordError> {
        if self.failed {
            return Ok(());
        }
        while !data.is_empty() {
            // Take just enough to finish the header, then the payload: the
            // buffer never holds more than one record.
            let need = match parse_header(&self.buf) {
                Err(e) => {
                    self.failed = true;
                    self.buf = Vec::new();
                    return Err(e);
                }
                Ok(None) => 1,
                Ok(Some((h, n))) => n + h.len - self.buf.len(),
            };
            let take = need.min(data.len());
            if need > 0 {
                self.buf.extend_from_slice(&data[..take]);
                data = &data[take..];
            }
            if let Ok(Some((h, n))) = parse_header(&self.buf) {
                if self.buf.len() == n + h.len {
                    let payload = self.buf.split_off(n);
                    self.buf.clear();
                    out.push((h, payload));
                }
            }
        }
        Ok(())
    }

    /// The stream ended: an error if it ended inside a record.
    pub fn finish(&self) -> Result<(), RecordError> {
        if self.failed || self.buf.is_empty() {
            Ok(())
        } else {
            Err(RecordError::Truncated)
        }
    }

    /// Bytes held for an incomplete record.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        for v in [
            0u64,
            63,
            64,
            16383,
            16384,
            (1 << 30) - 1,
            1 << 30,
            (1 << 62) - 1,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(get_varint(&b), Some((v, b.len())));
            assert_eq!(get_varint(&b[..b.len() - 1]), None);
        }
    }

    #[test]
    fn datagram_records_are_checked() {
        let mut b = Vec::new();
        encode(&mut b, 7, 2, Some(5), b"abc");
        assert_eq!(encoded_len(7, 2, Some(5), 3), b.len());
        assert_eq!(
            encoded_len(1 << 30, 300, None, 70_000),
            8 + 2 + 1 + 4 + 70_000
        );
        let (h, p) = parse_datagram(&b).unwrap();
        assert_eq!(
            (h.id, h.substream, h.depends_on, h.len, p),
            (7, 2, Some(5), 3, &b"abc"[..])
        );
        b.push(0);
        assert_eq!(parse_datagram(&b), Err(RecordError::Length));
        assert_eq!(parse_datagram(&b[..3]), Err(RecordError::Length));
        // An id beyond u32, a sub-stream beyond u16, a huge length, flags.
        let mut x = Vec::new();
        put_varint(&mut x, 1 << 32);
        assert_eq!(
            parse_header(&[x.clone(), vec![0, 0, 0]].concat()),
            Err(RecordError::OutOfRange)
        );
        let mut x = vec![1];
        put_varint(&mut x, 1 << 16);
        x.extend([0, 0]);
        assert_eq!(parse_header(&x), Err(RecordError::OutOfRange));
        let mut x = vec![1, 0, 0];
        put_varint(&mut x, MAX_MESSAGE as u64 + 1);
        assert_eq!(parse_header(&x), Err(RecordError::OutOfRange));
        assert_eq!(
            parse_header(&[1, 0, 0x80, 0]),
            Err(RecordError::Flags(0x80))
        );
    }

    #[test]
    fn a_failed_stream_stays_failed_and_holds_nothing() {
        let mut p = StreamParser::new();
        let mut out = Vec::new();
        assert!(p.push(&[1, 0, 0xFF, 0, 0, 0], &mut out).is_err());
        assert_eq!(p.buffered(), 0);
        assert!(p.push(&[1, 0, 0, 0], &mut out).is_ok());
        assert!(out.is_empty());
    }

    #[test]
    fn truncated_streams_are_reported() {
        let mut b = Vec::new();
        encode(&mut b, 1, 0, None, &[9; 10]);
        let mut p = StreamParser::new();
        let mut out = Vec::new();
        p.push(&b[..8], &mut out).unwrap();
        assert_eq!(p.finish(), Err(RecordError::Truncated));
        p.push(&b[8..], &mut out).unwrap();
        assert_eq!(p.finish(), Ok(()));
        assert_eq!(out.len(), 1);
    }

    proptest! {
        /// Any split of a stream of records yields the same records, and the
        /// parser never holds more than one record.
        #[test]
        fn stream_parsing_is_split_independent(
            msgs in proptest::collection::vec(
                (any::<u32>(), any::<u16>(), proptest::option::of(any::<u32>()),
                 proptest::collection::vec(any::<u8>(), 0..300)), 0..12),
            cuts in proptest::collection::vec(1usize..64, 1..40),
        ) {
            let mut wire = Vec::new();
            for (id, ss, dep, p) in &msgs {
                encode(&mut wire, *id, *ss, *dep, p);
            }
            let mut parser = StreamParser::new();
            let mut out = Vec::new();
            let mut at = 0;
            let mut i = 0;
            while at < wire.len() {
                let n = cuts[i % cuts.len()].min(wire.len() - at);
                parser.push(&wire[at..at + n], &mut out).unwrap();
                // One record at most: a payload under 300 bytes and a
                // header of at most 8 + 4 + 1 + 8 + 2 bytes (id, sub-stream,
                // flags, dependency, length).
                prop_assert!(parser.buffered() <= 299 + 23);
                at += n;
                i += 1;
            }
            prop_assert_eq!(parser.finish(), Ok(()));
            prop_assert_eq!(out.len(), msgs.len());
            for ((h, p), (id, ss, dep, q)) in out.iter().zip(&msgs) {
                prop_assert_eq!((h.id, h.substream, h.depends_on), (*id, *ss, *dep));
                prop_assert_eq!(p, q);
            }
        }

        /// Arbitrary bytes never panic and never make the parser hold more
        /// than a record's header plus `MAX_MESSAGE`.
        #[test]
        fn arbitrary_bytes_are_safe(b in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let _ = parse_datagram(&b);
            let mut p = StreamParser::new();
            let mut out = Vec::new();
            let _ = p.push(&b, &mut out);
            prop_assert!(p.buffered() <= b.len());
        }
    }
}
