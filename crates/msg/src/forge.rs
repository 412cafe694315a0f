//! What an on-path attacker who knows the framing can do to a message: the
//! forger of the simulator's middlebox (`sim messages --forge`) and of the
//! `hollywood_pair` fuzz target. A frame's CRC32C detects accidents, not
//! attackers (docs/SECURITY.md); secure mode's AEAD rejects what this
//! produces.

use crate::frame::{decode_frame, encode_frame};

/// Forge the first whole frame in `bytes` (a segment's payload: a frame
/// between two `0x00` markers): flip payload bits by `x` (trying a few
/// positions), recompute the CRC32C and re-encode, keeping the frame's
/// length so that the segment keeps its size. Returns where the frame
/// starts (its opening marker) and its length with both markers; `None`
/// when there is no whole non-empty frame or no tried change keeps the
/// length.
pub fn forge_first_frame(bytes: &mut [u8], x: u8) -> Option<(usize, usize)> {
    let open = bytes.iter().position(|&b| b == 0)?;
    let close = open + 1 + bytes[open + 1..].iter().position(|&b| b == 0)?;
    if close == open + 1 {
        return None;
    }
    let frame = decode_frame(&bytes[open + 1..close], 1 << 20).ok()?;
    if frame.payload.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(close - open + 1);
    for k in 0..8 {
        let mut body = frame.payload.clone();
        let at = (usize::from(x) * 7 + k * 131) % body.len();
        body[at] ^= x.rotate_left(k as u32) | 1;
        out.clear();
        encode_frame(&frame.header, &body, &mut out);
        if out.len() == close - open + 1 {
            bytes[open..=close].copy_from_slice(&out);
            return Some((open, close - open + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Deframer, DeframerConfig, Framer};

    #[test]
    fn a_forged_frame_keeps_its_length_and_passes_the_crc() {
        let mut f = Framer::default();
        let mut wire = Vec::new();
        f.frame(0, false, b"pay the usual amount", &mut wire)
            .unwrap();
        let original = wire.clone();
        let (at, len) = forge_first_frame(&mut wire, 0x5a).expect("forged");
        assert_eq!((at, len), (0, original.len()));
        assert_ne!(wire, original);
        let mut d = Deframer::new(DeframerConfig::default());
        d.push_stream(&wire, 0);
        let m = d.poll_message().expect("the CRC does not catch it");
        assert_ne!(m.payload, b"pay the usual amount");
        assert_eq!(m.payload.len(), 20);
        assert_eq!(forge_first_frame(&mut [1, 2, 3], 1), None, "no frame");
    }
}
