//! Fuzz the TCP Hollywood deframer (hollywood-msg).
//!
//! Mode 0 (first byte even): arbitrary bytes as `(seq delta, length, bytes)`
//! records pushed into a `Deframer`, with occasional floor advances. Must
//! never panic; memory stays under the cap; every delivered message was
//! counted as verified (`frames_ok`).
//!
//! Mode 1 (first byte odd): real messages from a `Framer`, then cut into
//! fuzz-chosen segments, reordered, duplicated, some bytes corrupted or
//! overwritten with other frames (inconsistent retransmissions). Every
//! delivered message must be byte-identical to a sent one: a corrupted or
//! spliced frame must be stopped by the CRC32C.
#![no_main]

use std::collections::BTreeMap;

use hollywood_msg::deframer::PIECE_OVERHEAD;
use hollywood_msg::{Deframer, DeframerConfig, Framer, FramerConfig};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 64 * 1024;

fn config() -> DeframerConfig {
    DeframerConfig {
        max_buffered: CAP,
        max_payload: 8192,
        ordered_max_waiting: 8,
        ..DeframerConfig::default()
    }
}

fn check_bounds(d: &Deframer) {
    let st = d.stats();
    assert!(d.buffered_bytes() + st.buffered_pieces as usize * PIECE_OVERHEAD <= CAP);
}

fn raw(data: &[u8]) {
    let mut d = Deframer::new(config());
    let mut seq = 0u32;
    let mut polled = 0u64;
    let mut i = 0;
    while i + 3 <= data.len() {
        let delta = i16::from_le_bytes([data[i], data[i + 1]]);
        let len = usize::from(data[i + 2]);
        i += 3;
        seq = seq.wrapping_add(delta as i32 as u32);
        if len == 255 {
            d.advance_floor(seq);
            continue;
        }
        let end = (i + len).min(data.len());
        d.push_segment(seq, &data[i..end], i as u64);
        i = end;
        check_bounds(&d);
        while d.poll_message().is_some() {
            polled += 1;
        }
    }
    let st = d.stats();
    assert_eq!(st.delivered, polled);
    assert!(st.delivered + st.duplicates_dropped + st.dedup_refused + st.ordered_late <= st.frames_ok);
}

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fn structured(data: &[u8]) {
    let mut inp = Bytes(data);
    let initial_id = u32::from(inp.u16()).wrapping_sub(100);
    let mut fr = Framer::new(FramerConfig {
        initial_id,
        max_payload: 8192,
        substream_seq: initial_id & 1 == 0,
    });
    let mut wire = Vec::new();
    let mut sent: BTreeMap<u32, (u16, Vec<u8>)> = BTreeMap::new();
    let n_msgs = usize::from(inp.u8() % 16) + 1;
    for _ in 0..n_msgs {
        let ctl = inp.u8();
        let len = usize::from(inp.u8()) * usize::from(ctl % 4 + 1);
        let payload = inp.take(len).to_vec();
        let sub = u16::from(ctl >> 5);
        let id = fr.frame(sub, ctl & 0x10 != 0, &payload, &mut wire).unwrap();
        sent.insert(id, (sub, payload));
        for _ in 0..(ctl >> 2) % 3 {
            wire.push(0); // padding
        }
    }
    let isn = u32::from(inp.u16()) << 16;
    let mut d = Deframer::new(config());
    let mut seen = BTreeMap::new();
    let n = wire.len() as u32;
    // Operations: push a range of the true stream, of a corrupted copy,
    // or of another frame written over it; advance the floor.
    for t in 0..256u64 {
        if inp.0.is_empty() {
            break;
        }
        let op = inp.u8();
        let off = u32::from(inp.u16()) % n;
        let len = (u32::from(inp.u8()) + 1).min(n - off);
        let (o, l) = (off as usize, len as usize);
        match op % 8 {
            0..=3 => d.push_segment(isn.wrapping_add(off), &wire[o..o + l], t),
            4 => {
                let mut bad = wire[o..o + l].to_vec();
                let k = usize::from(inp.u8()) % l;
                bad[k] ^= inp.u8() | 1;
                d.push_segment(isn.wrapping_add(off), &bad, t);
            }
            5 => {
                // An inconsistent retransmission: other bytes of the stream
                // (whole frames or not) written at this position.
                let src = usize::from(inp.u16()) % wire.len();
                let l2 = l.min(wire.len() - src);
                d.push_segment(isn.wrapping_add(off), &wire[src..src + l2], t);
            }
            6 => d.advance_floor(isn.wrapping_add(off)),
            _ => {
                // A whole retransmission with a new segmentation.
                let step = usize::from(inp.u8() | 1);
                let mut p = 0;
                while p < wire.len() {
                    let q = (p + step).min(wire.len());
                    d.push_segment(isn.wrapping_add(p as u32), &wire[p..q], t);
                    p = q;
                }
            }
        }
        check_bounds(&d);
        while let Some(m) = d.poll_message() {
            let (sub, payload) = sent
                .get(&m.id)
                .expect("delivered an id that was never sent");
            assert_eq!(
                &m.payload, payload,
                "corrupted payload delivered for id {}",
                m.id
            );
            assert_eq!(m.substream, *sub);
            assert!(
                seen.insert(m.id, ()).is_none(),
                "id {} delivered twice",
                m.id
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((mode, rest)) if mode & 1 == 1 => structured(rest),
        Some((_, rest)) => raw(rest),
        None => {}
    }
});
