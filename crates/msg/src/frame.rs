//! The TCP Hollywood frame: `0x00 || COBS(header || payload || CRC32C) || 0x00`
//! (byte-for-byte in `docs/PROTOCOL.md`).
//!
//! - thesis §4.2: messages are COBS-encoded and framed "using a leading and
//!   trailing marker", so that re-segmentation and coalescing by middleboxes
//!   cannot hide message boundaries; the sub-stream identifier is "appended
//!   to messages before they are encoded".
//! - thesis §4.5 / §8.3.1: a checksum is attached to every message, because a
//!   caching, re-segmenting middlebox can splice an original transmission and
//!   an inconsistent retransmission into a message that was never sent.
//! - thesis §8.3.2: ordered sub-streams, carried as a pointer to the previous
//!   message of the same sub-stream.
//! - per-sub-stream sequence numbers (optional `SEQ` field, not in the
//!   thesis): message ids are global, so only a count per sub-stream shows
//!   on which sub-stream messages were lost.
//!
//! Header layout: byte 0 = `version << 4 | flags`, bytes 1–2 sub-stream,
//! 3–6 id, then the 4-byte sub-stream sequence number if `SEQ` is set,
//! then the 4-byte previous id if `ORDERED` is set.

use core::ops::Range;

use crate::cobs::{self, max_encoded_len};

/// Protocol version carried in the high nibble of header byte 0.
pub const VERSION: u8 = 1;
/// Header flag (low nibble of byte 0): the message belongs to an ordered
/// sub-stream and carries the id of its predecessor (thesis §8.3.2).
pub const FLAG_ORDERED: u8 = 0x01;
/// Header flag (low nibble of byte 0): the header carries the message's
/// sequence number on its sub-stream (u32 big-endian, right after the id).
pub const FLAG_SEQ: u8 = 0x02;
/// Flags a receiver of this version understands; the other bits of the
/// low nibble are reserved and must be 0.
pub const KNOWN_FLAGS: u8 = FLAG_ORDERED | FLAG_SEQ;
/// Header length without optional fields: version/flags, sub-stream, id.
pub const HEADER_LEN: usize = 7;
/// Length of each optional header field (sequence number, previous id).
pub const FIELD_LEN: usize = 4;
/// Header length of an ordered message without a sequence number (adds
/// the predecessor id).
pub const ORDERED_HEADER_LEN: usize = HEADER_LEN + FIELD_LEN;
/// Longest header: both optional fields (`SEQ` and `ORDERED`).
pub const MAX_HEADER_LEN: usize = HEADER_LEN + 2 * FIELD_LEN;
/// Length of the CRC32C trailer (big-endian).
pub const CRC_LEN: usize = 4;
/// Default maximum payload of one message: 1 MiB.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;
/// The frame marker.
pub const DELIMITER: u8 = 0x00;

/// The header of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Sub-stream identifier (thesis §4.2); 0 is the default sub-stream.
    pub substream: u16,
    /// Message identifier (thesis §4.2: "the 32-bit identifier of a
    /// message"), assigned by the sender, wrapping at 2^32.
    pub id: u32,
    /// The message's sequence number on its sub-stream (`SEQ` flag): 0 for
    /// the first message the sender framed on the sub-stream, +1 for each
    /// further one, wrapping at 2^32. `None`: the field is absent.
    pub substream_seq: Option<u32>,
    /// For a message on an ordered sub-stream (thesis §8.3.2): the id of the
    /// previous message of the same sub-stream, or `id` itself for the first
    /// one. `None` for unordered messages.
    pub ordered_prev: Option<u32>,
}

impl FrameHeader {
    /// An unordered header without a sequence number.
    #[must_use]
    pub const fn unordered(substream: u16, id: u32) -> Self {
        FrameHeader {
            substream,
            id,
            substream_seq: None,
            ordered_prev: None,
        }
    }

    /// The same header with the sub-stream sequence number `seq`.
    #[must_use]
    pub const fn with_seq(mut self, seq: u32) -> Self {
        self.substream_seq = Some(seq);
        self
    }

    /// The flags (low nibble of byte 0) this header is encoded with.
    #[must_use]
    pub const fn flags(&self) -> u8 {
        let mut f = 0;
        if self.ordered_prev.is_some() {
            f |= FLAG_ORDERED;
        }
        if self.substream_seq.is_some() {
            f |= FLAG_SEQ;
        }
        f
    }

    /// Encoded header length: [`HEADER_LEN`] plus [`FIELD_LEN`] for each
    /// optional field present (at most [`MAX_HEADER_LEN`]).
    #[must_use]
    pub const fn len(&self) -> usize {
        header_len(self.flags())
    }

    /// Always false: a header is never empty (present for API symmetry).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header into `buf`, returning its length.
    pub fn emit(&self, buf: &mut [u8; MAX_HEADER_LEN]) -> usize {
        buf[0] = (VERSION << 4) | self.flags();
        buf[1..3].copy_from_slice(&self.substream.to_be_bytes());
        buf[3..7].copy_from_slice(&self.id.to_be_bytes());
        let mut at = HEADER_LEN;
        for field in [self.substream_seq, self.ordered_prev]
            .into_iter()
            .flatten()
        {
            buf[at..at + FIELD_LEN].copy_from_slice(&field.to_be_bytes());
            at += FIELD_LEN;
        }
        at
    }

    /// Parses a header from the start of a decoded, CRC-checked body
    /// (`header || payload`), returning it and its length.
    pub fn parse(body: &[u8]) -> Result<(FrameHeader, usize), FrameError> {
        let b0 = *body
            .first()
            .ok_or(FrameError::TooShort { len: body.len() })?;
        // Reserved flag bits may change the header layout: an unknown
        // flag is as unknown as an unknown version.
        let flags = b0 & 0x0F;
        if b0 >> 4 != VERSION || flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::BadVersion { byte: b0 });
        }
        let hlen = header_len(flags);
        if body.len() < hlen {
            return Err(FrameError::TooShort { len: body.len() });
        }
        let u32_at =
            |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let substream = u16::from_be_bytes([body[1], body[2]]);
        let id = u32_at(3);
        let mut at = HEADER_LEN;
        let mut field = |present: bool| {
            present.then(|| {
                at += FIELD_LEN;
                u32_at(at - FIELD_LEN)
            })
        };
        let substream_seq = field(flags & FLAG_SEQ != 0);
        let ordered_prev = field(flags & FLAG_ORDERED != 0);
        Ok((
            FrameHeader {
                substream,
                id,
                substream_seq,
                ordered_prev,
            },
            hlen,
        ))
    }
}

/// Header length for the flags `flags` (known flags only).
const fn header_len(flags: u8) -> usize {
    HEADER_LEN
        + FIELD_LEN * ((flags & FLAG_SEQ != 0) as usize + (flags & FLAG_ORDERED != 0) as usize)
}

/// A decoded message: header and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The header.
    pub header: FrameHeader,
    /// The application payload.
    pub payload: Vec<u8>,
}

/// Why a frame was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes between the markers are not valid COBS.
    Cobs(cobs::DecodeError),
    /// The decoded body is shorter than header + CRC.
    TooShort {
        /// Decoded body length (header + payload + CRC).
        len: usize,
    },
    /// Version nibble other than [`VERSION`], or reserved flag bits (2–3)
    /// set.
    BadVersion {
        /// Header byte 0.
        byte: u8,
    },
    /// The CRC32C trailer does not match (a corrupted or spliced frame).
    Crc {
        /// CRC carried in the frame.
        carried: u32,
        /// CRC computed over header and payload.
        computed: u32,
    },
    /// The payload exceeds the configured maximum.
    TooLarge {
        /// Payload length; for a frame refused before decoding, its
        /// encoded length (which already proves the payload too large).
        len: usize,
        /// The configured maximum payload.
        max: usize,
    },
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::Cobs(e) => write!(f, "bad COBS encoding: {e}"),
            FrameError::TooShort { len } => write!(f, "frame body of {len} bytes is too short"),
            FrameError::BadVersion { byte } => {
                write!(f, "unknown frame version/flags byte {byte:#04x}")
            }
            FrameError::Crc { carried, computed } => {
                write!(
                    f,
                    "CRC32C mismatch: carried {carried:#010x}, computed {computed:#010x}"
                )
            }
            FrameError::TooLarge { len, max } => {
                write!(f, "payload of {len} bytes exceeds maximum {max}")
            }
        }
    }
}

impl std::error::Error for FrameError {}

impl From<cobs::DecodeError> for FrameError {
    fn from(e: cobs::DecodeError) -> Self {
        FrameError::Cobs(e)
    }
}

/// Longest encoded body (between the markers) of a frame whose payload is
/// at most `max_payload` bytes.
#[must_use]
pub const fn max_body_len(max_payload: usize) -> usize {
    max_encoded_len(MAX_HEADER_LEN + max_payload + CRC_LEN)
}

/// Upper bound of the on-wire length (markers included) of one frame with
/// a `payload_len`-byte payload, ordered or not, with or without the
/// sub-stream sequence number (counted as present).
#[must_use]
pub const fn max_frame_len(payload_len: usize, ordered: bool) -> usize {
    let h = if ordered {
        MAX_HEADER_LEN
    } else {
        HEADER_LEN + FIELD_LEN
    };
    2 + max_encoded_len(h + payload_len + CRC_LEN)
}

/// Appends one frame, `00 || COBS(header || payload || CRC32C) || 00`, to
/// `out`; returns the number of bytes appended. No size limit is applied
/// here ([`crate::Framer`] enforces the configured maximum).
pub fn encode_frame(header: &FrameHeader, payload: &[u8], out: &mut Vec<u8>) -> usize {
    let mut hbuf = [0u8; MAX_HEADER_LEN];
    let hlen = header.emit(&mut hbuf);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&hbuf[..hlen]), payload);
    let start = out.len();
    out.reserve(max_frame_len(payload.len(), header.ordered_prev.is_some()));
    out.push(DELIMITER);
    cobs::encode_parts_append(&[&hbuf[..hlen], payload, &crc.to_be_bytes()], out);
    out.push(DELIMITER);
    out.len() - start
}

/// Decodes one frame body (the bytes between two markers) into `scratch`,
/// returning the header and the payload's range in `scratch`.
///
/// Checks, in order: encoded length (`TooLarge`), COBS, minimum length,
/// CRC32C, version, payload length. The CRC is checked before the version
/// so that a spliced frame counts as corrupt, not as a foreign version
/// (every version keeps the CRC32C as the last 4 body bytes).
pub fn decode_frame_into(
    encoded: &[u8],
    max_payload: usize,
    scratch: &mut Vec<u8>,
) -> Result<(FrameHeader, Range<usize>), FrameError> {
    decode_body_into(&[encoded], max_payload, scratch, false)
}

/// [`decode_frame_into`] for a run the caller knows holds no zero byte
/// (the deframer's runs lie between two markers): COBS skips its scan
/// for one.
pub(crate) fn decode_run_into(
    run: &[&[u8]],
    max_payload: usize,
    scratch: &mut Vec<u8>,
) -> Result<(FrameHeader, Range<usize>), FrameError> {
    decode_body_into(run, max_payload, scratch, true)
}

/// `parts`: the encoded body, in pieces (one unless `zero_free`).
fn decode_body_into(
    parts: &[&[u8]],
    max_payload: usize,
    scratch: &mut Vec<u8>,
    zero_free: bool,
) -> Result<(FrameHeader, Range<usize>), FrameError> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > max_body_len(max_payload) {
        return Err(FrameError::TooLarge {
            len,
            max: max_payload,
        });
    }
    if scratch.len() < len {
        scratch.resize(len, 0);
    }
    let n = match (zero_free, parts) {
        (true, _) => cobs::decode_zero_free_parts(parts, &mut scratch[..])?,
        (false, [one]) => cobs::decode_into(one, &mut scratch[..])?,
        (false, _) => unreachable!("checked decoding takes one slice"),
    };
    let body = &scratch[..n];
    if n < HEADER_LEN + CRC_LEN {
        return Err(FrameError::TooShort { len: n });
    }
    let (data, trailer) = body.split_at(n - CRC_LEN);
    let carried = u32::from_be_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let computed = crc32c::crc32c(data);
    if carried != computed {
        return Err(FrameError::Crc { carried, computed });
    }
    let (header, hlen) = FrameHeader::parse(data).map_err(|e| match e {
        FrameError::TooShort { .. } => FrameError::TooShort { len: n },
        other => other,
    })?;
    let plen = data.len() - hlen;
    if plen > max_payload {
        return Err(FrameError::TooLarge {
            len: plen,
            max: max_payload,
        });
    }
    Ok((header, hlen..data.len()))
}

/// Decodes one frame body (the bytes between two markers) into a [`Frame`].
pub fn decode_frame(encoded: &[u8], max_payload: usize) -> Result<Frame, FrameError> {
    let mut scratch = Vec::new();
    let (header, range) = decode_frame_into(encoded, max_payload, &mut scratch)?;
    scratch.truncate(range.end);
    scratch.drain(..range.start);
    Ok(Frame {
        header,
        payload: scratch,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// docs/PROTOCOL.md, vector 1: unordered, sub-stream 1, id 1, "hi".
    pub(crate) const V1: &[u8] = &[
        0x00, 0x02, 0x10, 0x02, 0x01, 0x01, 0x01, 0x08, 0x01, 0x68, 0x69, 0x07, 0x50, 0xeb, 0xda,
        0x00,
    ];
    /// docs/PROTOCOL.md, vector 2: ordered, sub-stream 0x0203, id 0x0a0b0c0d,
    /// prev 0x0a0b0c0c, payload 00 ff 00.
    pub(crate) const V2: &[u8] = &[
        0x00, 0x0c, 0x11, 0x02, 0x03, 0x0a, 0x0b, 0x0c, 0x0d, 0x0a, 0x0b, 0x0c, 0x0c, 0x02, 0xff,
        0x05, 0x56, 0x1f, 0x05, 0x52, 0x00,
    ];
    /// docs/PROTOCOL.md, vector 3: SEQ, unordered, sub-stream 1, id 0,
    /// sequence number 0, "hi" (a default `Framer`'s first message).
    pub(crate) const V3: &[u8] = &[
        0x00, 0x02, 0x12, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x07, 0x68, 0x69,
        0x4d, 0x65, 0x91, 0xbc, 0x00,
    ];
    /// docs/PROTOCOL.md, vector 4: SEQ and ORDERED, sub-stream 0x0203, id
    /// 0x0a0b0c0d, sequence number 7, prev 0x0a0b0c0c, payload 00 ff 00.
    pub(crate) const V4: &[u8] = &[
        0x00, 0x08, 0x13, 0x02, 0x03, 0x0a, 0x0b, 0x0c, 0x0d, 0x01, 0x01, 0x06, 0x07, 0x0a, 0x0b,
        0x0c, 0x0c, 0x02, 0xff, 0x05, 0x29, 0x04, 0xb6, 0xdc, 0x00,
    ];

    fn enc(h: FrameHeader, p: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let n = encode_frame(&h, p, &mut out);
        assert_eq!(n, out.len());
        assert!(n <= max_frame_len(p.len(), h.ordered_prev.is_some()));
        out
    }

    #[test]
    fn vector_unordered() {
        let h = FrameHeader::unordered(1, 1);
        assert_eq!(enc(h, b"hi"), V1);
        let f = decode_frame(&V1[1..V1.len() - 1], DEFAULT_MAX_PAYLOAD).unwrap();
        assert_eq!(
            f,
            Frame {
                header: h,
                payload: b"hi".to_vec()
            }
        );
    }

    #[test]
    fn vector_ordered() {
        let h = FrameHeader {
            substream: 0x0203,
            id: 0x0a0b_0c0d,
            substream_seq: None,
            ordered_prev: Some(0x0a0b_0c0c),
        };
        assert_eq!(enc(h, &[0x00, 0xff, 0x00]), V2);
        let f = decode_frame(&V2[1..V2.len() - 1], DEFAULT_MAX_PAYLOAD).unwrap();
        assert_eq!(f.header, h);
        assert_eq!(f.payload, vec![0x00, 0xff, 0x00]);
    }

    #[test]
    fn vector_seq() {
        let h = FrameHeader::unordered(1, 0).with_seq(0);
        assert_eq!(h.len(), 11);
        assert_eq!(enc(h, b"hi"), V3);
        let f = decode_frame(&V3[1..V3.len() - 1], DEFAULT_MAX_PAYLOAD).unwrap();
        assert_eq!(f.header, h);
        assert_eq!(f.payload, b"hi".to_vec());
        // What a default framer emits for its first message.
        let mut out = Vec::new();
        crate::Framer::default()
            .frame(1, false, b"hi", &mut out)
            .unwrap();
        assert_eq!(out, V3);
    }

    #[test]
    fn vector_seq_ordered() {
        let h = FrameHeader {
            substream: 0x0203,
            id: 0x0a0b_0c0d,
            substream_seq: Some(7),
            ordered_prev: Some(0x0a0b_0c0c),
        };
        assert_eq!(h.len(), MAX_HEADER_LEN);
        assert_eq!(enc(h, &[0x00, 0xff, 0x00]), V4);
        let f = decode_frame(&V4[1..V4.len() - 1], DEFAULT_MAX_PAYLOAD).unwrap();
        assert_eq!(f.header, h);
        assert_eq!(f.payload, vec![0x00, 0xff, 0x00]);
    }

    #[test]
    fn crc_is_crc32c_big_endian() {
        // CRC32C check value (RFC 3720 B.4): "123456789" -> e3069283.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let body = cobs::decode(&V1[1..V1.len() - 1]).unwrap();
        let n = body.len();
        assert_eq!(
            &body[n - 4..],
            &crc32c::crc32c(&body[..n - 4]).to_be_bytes()
        );
    }

    #[test]
    fn rejects() {
        let body = &V1[1..V1.len() - 1];
        // Flip one payload bit: CRC.
        let mut raw = cobs::decode(body).unwrap();
        raw[7] ^= 0x01;
        let bad = cobs::encode(&raw);
        assert!(matches!(
            decode_frame(&bad, 100),
            Err(FrameError::Crc { .. })
        ));
        // Version 2 with a valid CRC: BadVersion.
        let mut raw = cobs::decode(body).unwrap();
        raw[0] = 0x21;
        let n = raw.len();
        let crc = crc32c::crc32c(&raw[..n - 4]);
        raw[n - 4..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            decode_frame(&cobs::encode(&raw), 100),
            Err(FrameError::BadVersion { byte: 0x21 })
        );
        // Reserved flag bits 2 and 3: also refused.
        for b0 in [0x14, 0x18, 0x1f] {
            raw[0] = b0;
            let crc = crc32c::crc32c(&raw[..n - 4]);
            raw[n - 4..].copy_from_slice(&crc.to_be_bytes());
            assert_eq!(
                decode_frame(&cobs::encode(&raw), 100),
                Err(FrameError::BadVersion { byte: b0 })
            );
        }
        // Too short, bad COBS, too large.
        assert_eq!(
            decode_frame(&[0x01], 100),
            Err(FrameError::TooShort { len: 0 })
        );
        assert_eq!(
            decode_frame(&[0x09, 1, 2], 100),
            Err(FrameError::Cobs(cobs::DecodeError::Truncated { offset: 0 }))
        );
        assert_eq!(
            decode_frame(body, 1),
            Err(FrameError::TooLarge { len: 2, max: 1 })
        );
        assert!(matches!(
            decode_frame(&[1u8; 100], 1),
            Err(FrameError::TooLarge { len: 100, max: 1 })
        ));
        // An ORDERED flag on a body too short to hold the predecessor.
        let mut raw = vec![0x11, 0, 1, 0, 0, 0, 1, 9, 9];
        let crc = crc32c::crc32c(&raw);
        raw.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(
            decode_frame(&cobs::encode(&raw), 100),
            Err(FrameError::TooShort { len: 13 })
        );
        // SEQ and ORDERED on a body that holds only one of the two fields.
        let mut raw = vec![0x13, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5];
        let crc = crc32c::crc32c(&raw);
        raw.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(
            decode_frame(&cobs::encode(&raw), 100),
            Err(FrameError::TooShort { len: 15 })
        );
    }

    #[test]
    fn empty_payload_and_zero_ids() {
        for substream_seq in [None, Some(0), Some(u32::MAX)] {
            let h = FrameHeader {
                substream: 0,
                id: 0,
                substream_seq,
                ordered_prev: Some(0),
            };
            let f = enc(h, &[]);
            let d = decode_frame(&f[1..f.len() - 1], 0).unwrap();
            assert_eq!(d.header, h);
            assert!(d.payload.is_empty());
            assert!(!f[1..f.len() - 1].contains(&0));
        }
    }
}
