//! The HTTP/2 pieces chapter 6's client and server put on the wire
//! (RFC 9113): the connection preface, the frame layer (§4.1: a 9-byte
//! header, then the payload), SETTINGS (§6.5), WINDOW_UPDATE (§6.9),
//! HEADERS (§6.2), PUSH_PROMISE (§6.6) and DATA (§6.1). Header blocks are
//! HPACK (RFC 7541) through the maintained `loona-hpack` crate.
//!
//! The frame layer is written here: it is a 9-byte header, and the
//! maintained HTTP/2 crates (`h2`, `loona-h2`) do not expose their frame
//! codecs apart from their own I/O runtimes.
//!
//! **Stateless header compression.** Over TCP Hollywood a message may
//! arrive out of order or never (it expired, or an inconsistent
//! retransmission replaced it), so a header block must not depend on
//! blocks sent before it. Both ends announce `SETTINGS_HEADER_TABLE_SIZE
//! = 0`, and every block we encode starts with a dynamic table size update
//! to 0 (RFC 7541 §6.3): each block decodes alone, in any order, in any
//! HPACK decoder (Wireshark's too). This costs the few bytes a dynamic
//! table would save on repeated header fields.

use std::borrow::Cow;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame header length.
pub const FRAME_HEADER: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value: the largest payload we send
/// and accept (neither end raises it).
pub const MAX_FRAME: usize = 16_384;
/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// A window's initial size (RFC 9113 §6.9.2).
pub const INITIAL_WINDOW: u32 = 65_535;

/// Frame types (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// DATA, HEADERS: the last frame the sender sends on the stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE: the header block is complete.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE: padded.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a priority block follows the padding length.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
}

/// One frame of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (31 bits).
    pub stream: u32,
    /// Payload.
    pub payload: &'a [u8],
}

/// Append a frame.
///
/// # Panics
/// If the payload is longer than [`MAX_FRAME`] or the stream id has its
/// top bit set (both are our own bugs, never input).
pub fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    assert!(payload.len() <= MAX_FRAME, "frame payload too long");
    assert!(stream >> 31 == 0, "stream id of 32 bits");
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Append `body` as DATA frames of at most [`MAX_FRAME`] bytes on
/// `stream`, the last with END_STREAM when `end`; an empty body with `end`
/// is one empty DATA frame.
pub fn write_data(out: &mut Vec<u8>, stream: u32, body: &[u8], end: bool) {
    write_data_with(out, stream, body.len(), end, |out, at, n| {
        out.extend_from_slice(&body[at..at + n])
    });
}

/// [`write_data`] of a body of `len` bytes that `fill(out, offset, n)`
/// appends `n` bytes at a time (no copy of the whole body first).
pub fn write_data_with(
    out: &mut Vec<u8>,
    stream: u32,
    len: usize,
    end: bool,
    mut fill: impl FnMut(&mut Vec<u8>, usize, usize),
) {
    assert!(stream >> 31 == 0, "stream id of 32 bits");
    if len == 0 {
        if end {
            write_frame(out, kind::DATA, flag::END_STREAM, stream, &[]);
        }
        return;
    }
    let mut at = 0;
    while at < len {
        let n = (len - at).min(MAX_FRAME);
        let flags = if at + n == len && end {
            flag::END_STREAM
        } else {
            0
        };
        out.extend_from_slice(&(n as u32).to_be_bytes()[1..]);
        out.push(kind::DATA);
        out.push(flags);
        out.extend_from_slice(&stream.to_be_bytes());
        let before = out.len();
        fill(out, at, n);
        assert_eq!(out.len() - before, n, "fill wrote the wrong length");
        at += n;
    }
}

/// Append a HEADERS frame carrying `fields` whole (END_HEADERS).
pub fn write_headers(out: &mut Vec<u8>, stream: u32, fields: &[(&[u8], &[u8])], end_stream: bool) {
    let block = encode_block(fields);
    let flags = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
    write_frame(out, kind::HEADERS, flags, stream, &block);
}

/// Append a PUSH_PROMISE on `stream` promising `promised`, the request's
/// `fields` whole (END_HEADERS).
pub fn write_push_promise(
    out: &mut Vec<u8>,
    stream: u32,
    promised: u32,
    fields: &[(&[u8], &[u8])],
) {
    let mut payload = promised.to_be_bytes().to_vec();
    payload.extend_from_slice(&encode_block(fields));
    write_frame(out, kind::PUSH_PROMISE, flag::END_HEADERS, stream, &payload);
}

/// Append a SETTINGS frame with `values`.
pub fn write_settings(out: &mut Vec<u8>, values: &[(u16, u32)]) {
    let mut payload = Vec::with_capacity(values.len() * 6);
    for &(id, v) in values {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&v.to_be_bytes());
    }
    write_frame(out, kind::SETTINGS, 0, 0, &payload);
}

/// Append a SETTINGS acknowledgement.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_frame(out, kind::SETTINGS, flag::ACK, 0, &[]);
}

/// Append a WINDOW_UPDATE of `increment` (1 ..= [`MAX_WINDOW`]).
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    debug_assert!(increment > 0 && increment <= MAX_WINDOW);
    write_frame(
        out,
        kind::WINDOW_UPDATE,
        0,
        stream,
        &increment.to_be_bytes(),
    );
}

/// Decoded header fields: (name, value) pairs in order.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// HPACK-encode `fields` as a self-contained block: a dynamic table size
/// update to 0, then the fields (static-table indices and literals).
pub fn encode_block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    // 001xxxxx with size 0 (RFC 7541 §6.3).
    let mut block = vec![0x20];
    let mut enc = loona_hpack::Encoder::new();
    enc.set_max_table_size(0);
    enc.encode_into(fields.iter().copied(), &mut block)
        .expect("writing to a Vec cannot fail");
    block
}

/// Decode a header block (with a table of size 0 at most, as we announce).
pub fn decode_block(block: &[u8]) -> Result<Fields, String> {
    let mut dec = loona_hpack::Decoder::new();
    dec.set_max_allowed_table_size(0);
    dec.set_max_table_size(0);
    let mut fields = Vec::new();
    dec.decode_with_cb(block, |n: Cow<[u8]>, v: Cow<[u8]>| {
        fields.push((n.into_owned(), v.into_owned()))
    })
    .map_err(|e| format!("HPACK: {e:?}"))?;
    Ok(fields)
}

/// The value of header field `name` (the first one).
pub fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name.as_bytes())
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// The frames of `buf`, which must hold whole frames only (every message
/// we exchange does).
pub fn frames(buf: &[u8]) -> Frames<'_> {
    Frames { rest: buf }
}

/// Iterator over [`frames`].
#[derive(Debug)]
pub struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        if self.rest.len() < FRAME_HEADER {
            let n = self.rest.len();
            self.rest = &[];
            return Some(Err(format!("{n} bytes left, less than a frame header")));
        }
        let h = &self.rest[..FRAME_HEADER];
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        if len > MAX_FRAME {
            self.rest = &[];
            return Some(Err(format!(
                "frame of {len} bytes (SETTINGS_MAX_FRAME_SIZE {MAX_FRAME})"
            )));
        }
        if self.rest.len() < FRAME_HEADER + len {
            self.rest = &[];
            return Some(Err(format!("truncated frame ({len} bytes announced)")));
        }
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_WINDOW;
        let f = Frame {
            kind: h[3],
            flags: h[4],
            stream,
            payload: &self.rest[FRAME_HEADER..FRAME_HEADER + len],
        };
        self.rest = &self.rest[FRAME_HEADER + len..];
        Some(Ok(f))
    }
}

/// A HEADERS or PUSH_PROMISE frame's header block fragment (padding and
/// the priority block or promised stream id removed) and, for
/// PUSH_PROMISE, the promised stream.
pub fn header_block<'a>(f: &Frame<'a>) -> Result<(&'a [u8], Option<u32>), String> {
    let mut p = f.payload;
    let mut pad = 0;
    if f.flags & flag::PADDED != 0 {
        let (&n, rest) = p.split_first().ok_or("PADDED frame without its length")?;
        pad = usize::from(n);
        p = rest;
    }
    let mut promised = None;
    if f.kind == kind::PUSH_PROMISE {
        if p.len() < 4 {
            return Err("PUSH_PROMISE without a promised stream".into());
        }
        promised = Some(u32::from_be_bytes(p[..4].try_into().expect("4")) & MAX_WINDOW);
        p = &p[4..];
    } else if f.flags & flag::PRIORITY != 0 {
        p = p.get(5..).ok_or("HEADERS with a short priority block")?;
    }
    if pad > p.len() {
        return Err("padding longer than the frame".into());
    }
    if f.flags & flag::END_HEADERS == 0 {
        return Err("a header block in CONTINUATION frames (not sent by this server)".into());
    }
    Ok((&p[..p.len() - pad], promised))
}

/// A DATA frame's data, padding removed.
pub fn data<'a>(f: &Frame<'a>) -> Result<&'a [u8], String> {
    let p = f.payload;
    if f.flags & flag::PADDED == 0 {
        return Ok(p);
    }
    let (&n, rest) = p.split_first().ok_or("PADDED frame without its length")?;
    rest.get(..rest.len().wrapping_sub(usize::from(n)))
        .filter(|_| usize::from(n) <= rest.len())
        .ok_or_else(|| "padding longer than the frame".to_string())
}

/// The SETTINGS values of a (non-ACK) SETTINGS frame.
pub fn settings(f: &Frame<'_>) -> Result<Vec<(u16, u32)>, String> {
    if !f.payload.len().is_multiple_of(6) || f.stream != 0 {
        return Err("malformed SETTINGS".into());
    }
    Ok(f.payload
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect())
}

/// A WINDOW_UPDATE's increment.
pub fn window_increment(f: &Frame<'_>) -> Result<u32, String> {
    let b: [u8; 4] = f
        .payload
        .try_into()
        .map_err(|_| "malformed WINDOW_UPDATE")?;
    match u32::from_be_bytes(b) & MAX_WINDOW {
        0 => Err("WINDOW_UPDATE of 0".into()),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let mut b = Vec::new();
        write_settings(
            &mut b,
            &[(setting::ENABLE_PUSH, 1), (setting::HEADER_TABLE_SIZE, 0)],
        );
        write_headers(
            &mut b,
            1,
            &[(b":method", b"GET"), (b":path", b"/chunk/3")],
            true,
        );
        write_push_promise(&mut b, 1, 2, &[(b":path", b"/chunk/3/frame/0")]);
        write_data(&mut b, 2, &vec![7u8; 40_000], true);
        write_window_update(&mut b, 0, 1000);
        // RFC 9113 §4.1: 24-bit length, type, flags, stream.
        assert_eq!(&b[..9], &[0, 0, 12, 4, 0, 0, 0, 0, 0]);
        let fs: Vec<Frame> = frames(&b).collect::<Result<_, _>>().unwrap();
        let kinds: Vec<u8> = fs.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [4, 1, 5, 0, 0, 0, 8]);
        assert_eq!(settings(&fs[0]).unwrap(), [(2, 1), (1, 0)]);
        let (block, p) = header_block(&fs[1]).unwrap();
        assert_eq!(p, None);
        let h = decode_block(block).unwrap();
        assert_eq!(field(&h, ":path"), Some("/chunk/3"));
        assert_eq!(fs[1].flags, flag::END_HEADERS | flag::END_STREAM);
        let (block, p) = header_block(&fs[2]).unwrap();
        assert_eq!(p, Some(2));
        assert_eq!(
            field(&decode_block(block).unwrap(), ":path"),
            Some("/chunk/3/frame/0")
        );
        let sizes: Vec<usize> = fs[3..6].iter().map(|f| data(f).unwrap().len()).collect();
        assert_eq!(sizes, [16_384, 16_384, 7_232]);
        assert_eq!(fs[5].flags, flag::END_STREAM);
        assert_eq!(fs[4].flags, 0);
        assert_eq!(window_increment(&fs[6]).unwrap(), 1000);
        // Truncated, oversized, malformed.
        assert!(frames(&b[..b.len() - 1]).any(|f| f.is_err()));
        assert!(frames(&[0, 0x40, 1, 0, 0, 0, 0, 0, 1])
            .next()
            .unwrap()
            .is_err());
        assert!(frames(&[0, 0]).next().unwrap().is_err());
        let f = Frame {
            kind: kind::WINDOW_UPDATE,
            flags: 0,
            stream: 0,
            payload: &[0, 0, 0, 0],
        };
        assert!(window_increment(&f).is_err());
        let f = Frame {
            kind: kind::DATA,
            flags: flag::PADDED,
            stream: 1,
            payload: &[5, 1, 2],
        };
        assert!(data(&f).is_err());
        let f = Frame {
            kind: kind::DATA,
            flags: flag::PADDED,
            stream: 1,
            payload: &[1, 1, 2],
        };
        assert_eq!(data(&f).unwrap(), &[1]);
        let f = Frame {
            kind: kind::HEADERS,
            flags: 0,
            stream: 1,
            payload: &[0x82],
        };
        assert!(header_block(&f).is_err(), "CONTINUATION needed");
    }

    #[test]
    fn every_block_decodes_alone_in_any_order() {
        let a = encode_block(&[(b":path", b"/a"), (b"x-playout-in", b"900")]);
        let b = encode_block(&[(b":path", b"/b"), (b"x-playout-in", b"900")]);
        // RFC 7541 §6.3: a size update to 0 first.
        assert_eq!(a[0], 0x20);
        // A decoder that kept its state across blocks, fed them out of
        // order and with one missing, still reads each right.
        let mut dec = loona_hpack::Decoder::new();
        for blk in [&b, &a, &b] {
            let h = dec.decode(blk).unwrap();
            assert_eq!(h[1].1, b"900");
        }
        assert_eq!(decode_block(&b).unwrap()[0].1, b"/b");
        assert!(decode_block(&[0xff]).is_err());
        // A block that indexes a dynamic entry is refused (we announce a
        // table of size 0).
        assert!(decode_block(&[0x20, 0xbe]).is_err());
    }
}
