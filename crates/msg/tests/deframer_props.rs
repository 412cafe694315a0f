//! Deframer properties over random streams, segmentations, reorderings,
//! duplications, inconsistent retransmissions and adversarial input.

use std::collections::BTreeMap;

use hollywood_msg::deframer::PIECE_OVERHEAD;
use hollywood_msg::{Deframer, DeframerConfig, Framer, FramerConfig};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Msg {
    substream: u16,
    ordered: bool,
    payload: Vec<u8>,
}

fn msg() -> impl Strategy<Value = Msg> {
    (
        0u16..4,
        any::<bool>(),
        prop_oneof![
            3 => prop::collection::vec(any::<u8>(), 0..200),
            1 => prop::collection::vec(prop_oneof![4 => 1u8..=255, 1 => Just(0u8)], 200..1500),
            1 => prop::collection::vec(1u8..=255, 250..800),
        ],
    )
        .prop_map(|(substream, ordered, payload)| Msg {
            substream,
            ordered,
            payload,
        })
}

/// A framed stream: (bytes, id → message). Some frames are followed by
/// padding zeros.
fn build(msgs: &[Msg], initial_id: u32, pads: &[u8]) -> (Vec<u8>, BTreeMap<u32, Msg>) {
    let mut fr = Framer::new(FramerConfig {
        initial_id,
        ..FramerConfig::default()
    });
    let mut wire = Vec::new();
    let mut sent = BTreeMap::new();
    for (i, m) in msgs.iter().enumerate() {
        let id = fr
            .frame(m.substream, m.ordered, &m.payload, &mut wire)
            .unwrap();
        wire.extend(std::iter::repeat_n(
            0,
            usize::from(pads[i % pads.len()] % 4),
        ));
        sent.insert(id, m.clone());
    }
    (wire, sent)
}

/// Cut points → segments `(offset, len)` covering `0..n`.
fn partition(n: usize, cuts: &[usize]) -> Vec<(usize, usize)> {
    let mut c: Vec<usize> = cuts.iter().map(|&x| x % (n + 1)).collect();
    c.push(0);
    c.push(n);
    c.sort_unstable();
    c.dedup();
    c.windows(2).map(|w| (w[0], w[1] - w[0])).collect()
}

/// Checks the delivered messages against what was sent: each at most
/// once, byte-identical, ordered sub-streams in chain order.
fn check_delivery(
    d: &mut Deframer,
    sent: &BTreeMap<u32, Msg>,
    seen: &mut BTreeMap<u32, ()>,
    last_ordered: &mut BTreeMap<u16, u32>,
) -> Result<(), TestCaseError> {
    while let Some(m) = d.poll_message() {
        let s = sent
            .get(&m.id)
            .ok_or_else(|| TestCaseError::fail(format!("unknown id {}", m.id)))?;
        prop_assert_eq!(&m.payload, &s.payload, "payload of {}", m.id);
        prop_assert_eq!(m.substream, s.substream);
        prop_assert_eq!(m.ordered, s.ordered);
        prop_assert!(seen.insert(m.id, ()).is_none(), "{} delivered twice", m.id);
        if m.ordered {
            if let Some(prev) = last_ordered.insert(m.substream, m.id) {
                prop_assert!(
                    (m.id.wrapping_sub(prev) as i32) > 0,
                    "ordered {} after {}",
                    m.id,
                    prev
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// (i) Random messages, cut into random segments, some lost, some
    /// duplicated, then retransmitted with a different segmentation, all
    /// in random order ⇒ every message exactly once, byte-identical.
    #[test]
    fn reorder_duplicate_resegment(
        msgs in prop::collection::vec(msg(), 1..30),
        initial_id in prop_oneof![Just(u32::MAX - 10), any::<u32>()],
        isn in any::<u32>(),
        pads in prop::collection::vec(any::<u8>(), 1..8),
        cuts1 in prop::collection::vec(any::<usize>(), 0..60),
        cuts2 in prop::collection::vec(any::<usize>(), 0..60),
        fate in prop::collection::vec(0u8..10, 1..64),
        order in prop::collection::vec(any::<u32>(), 256),
    ) {
        let (wire, sent) = build(&msgs, initial_id, &pads);
        let mut segs = Vec::new();
        for (k, seg) in partition(wire.len(), &cuts1).into_iter().enumerate() {
            match fate[k % fate.len()] {
                0..=2 => {}                            // lost
                3 => { segs.push(seg); segs.push(seg) } // duplicated
                _ => segs.push(seg),
            }
        }
        segs.extend(partition(wire.len(), &cuts2)); // retransmission
        let mut keyed: Vec<(u32, usize, (usize, usize))> =
            segs.into_iter().enumerate().map(|(i, s)| (order[i % order.len()], i, s)).collect();
        keyed.sort_unstable();

        let mut d = Deframer::default();
        let mut seen = BTreeMap::new();
        let mut last_ordered = BTreeMap::new();
        for (t, &(_, _, (off, len))) in keyed.iter().enumerate() {
            d.push_segment(isn.wrapping_add(off as u32), &wire[off..off + len], t as u64);
            check_delivery(&mut d, &sent, &mut seen, &mut last_ordered)?;
        }
        prop_assert_eq!(seen.len(), sent.len(), "stats {:?}", d.stats());
        let st = d.stats();
        prop_assert_eq!(st.crc_rejected + st.cobs_errors + st.too_short + st.bad_version, 0);
        prop_assert_eq!(st.evicted_bytes, 0);
        let end = isn.wrapping_add(wire.len() as u32);
        d.advance_floor(end);
        // At most the last zero stays (a late duplicate of the final marker
        // or padding looks like the opener of a frame still to come).
        prop_assert!(d.buffered_bytes() <= 1, "{:?}", d.stats());
        prop_assert_eq!(d.stats().ordered_waiting_bytes, 0);
        // The stream goes on.
        let mut fr = Framer::new(FramerConfig { initial_id: initial_id.wrapping_add(msgs.len() as u32), ..FramerConfig::default() });
        let mut more = Vec::new();
        let id = fr.frame(9, false, b"next", &mut more).unwrap();
        d.push_segment(end, &more, 0);
        let m = d.poll_message().unwrap();
        prop_assert_eq!((m.id, m.payload), (id, b"next".to_vec()));
    }

    /// (g) An ordered byte stream in arbitrary chunks ⇒ all messages, in
    /// stream order, nothing left buffered.
    #[test]
    fn stream_any_chunking(
        msgs in prop::collection::vec(msg(), 1..30),
        pads in prop::collection::vec(any::<u8>(), 1..8),
        cuts in prop::collection::vec(any::<usize>(), 0..100),
    ) {
        let (wire, sent) = build(&msgs, 0, &pads);
        let mut d = Deframer::default();
        let mut got = Vec::new();
        for (off, len) in partition(wire.len(), &cuts) {
            d.push_stream(&wire[off..off + len], 0);
            while let Some(m) = d.poll_message() {
                got.push((m.id, m.payload));
            }
            // Only the unfinished frame at the end may be buffered.
            prop_assert!(d.buffered_bytes() <= hollywood_msg::frame::max_frame_len(1500, true));
        }
        let want: Vec<(u32, Vec<u8>)> = sent.iter().map(|(&id, m)| (id, m.payload.clone())).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(d.buffered_bytes(), usize::from(wire.ends_with(&[0, 0])));
    }

    /// (ii) Range R carried frame A; its retransmission carries B padded
    /// with zeros to A's length; a middlebox splices A's head with B's
    /// tail. The splice is never delivered (unless byte-identical to A or
    /// B); B alone is delivered once; the frames around R are unharmed.
    #[test]
    fn inconsistent_retransmission_splice(
        a_len in 60usize..1200,
        b_frac in 0u32..100,
        mid_frac in 0u32..1000,
        before in prop::collection::vec(any::<u8>(), 0..300),
        after in prop::collection::vec(any::<u8>(), 0..300),
        splice_as_two in any::<bool>(),
        b_first_half in any::<bool>(),
        isn in any::<u32>(),
    ) {
        let mut fr = Framer::default();
        let a_payload: Vec<u8> = (0..a_len).map(|i| (i % 251) as u8).collect();
        let b_payload: Vec<u8> = (0..(a_len as u32 * b_frac / 100) as usize).map(|i| (i % 13 + 7) as u8).collect();
        let mut w0 = Vec::new();
        let id0 = fr.frame(1, false, &before, &mut w0).unwrap();
        let mut a = Vec::new();
        let id_a = fr.frame(1, false, &a_payload, &mut a).unwrap();
        let mut w2 = Vec::new();
        let id2 = fr.frame(1, false, &after, &mut w2).unwrap();
        let mut b = Vec::new();
        let id_b = fr.frame(1, false, &b_payload, &mut b).unwrap();
        prop_assert!(b.len() <= a.len());
        b.resize(a.len(), 0); // padding (thesis §4.2)
        let mid = 1 + (mid_frac as usize * (a.len() - 1)) / 1000;
        let mut splice = a[..mid].to_vec();
        splice.extend_from_slice(&b[mid..]);

        let r = isn.wrapping_add(w0.len() as u32);
        let mut d = Deframer::default();
        d.push_segment(isn, &w0, 0);
        d.push_segment(r.wrapping_add(a.len() as u32), &w2, 0);
        if splice_as_two {
            d.push_segment(r.wrapping_add(mid as u32), &splice[mid..], 1);
            d.push_segment(r, &splice[..mid], 1);
        } else {
            d.push_segment(r, &splice, 1);
        }
        let mut got: Vec<(u32, Vec<u8>)> = std::iter::from_fn(|| d.poll_message()).map(|m| (m.id, m.payload)).collect();
        for (id, p) in &got {
            let ok = (*id == id0 && *p == before) || (*id == id2 && *p == after)
                || (*id == id_b && *p == b_payload && splice == b)
                || (*id == id_a && *p == a_payload && splice[..a.len() - 1] == a[..a.len() - 1]);
            prop_assert!(ok, "unexpected delivery of {}", id);
        }
        // B's retransmission, possibly itself resegmented.
        if b_first_half {
            d.push_segment(r, &b[..mid], 2);
            d.push_segment(r.wrapping_add(mid as u32), &b[mid..], 2);
        } else {
            d.push_segment(r, &b, 2);
        }
        got.extend(std::iter::from_fn(|| d.poll_message()).map(|m| (m.id, m.payload)));
        let bs: Vec<_> = got.iter().filter(|(id, _)| *id == id_b).collect();
        prop_assert_eq!(bs.len(), 1, "B exactly once");
        prop_assert_eq!(&bs[0].1, &b_payload);
        prop_assert!(got.iter().any(|(id, _)| *id == id0));
        prop_assert!(got.iter().any(|(id, _)| *id == id2));
    }

    /// (iii) Adversarial input: many fragments that never complete, random
    /// garbage, random positions ⇒ memory stays under the cap, no panic,
    /// nothing delivered that did not verify.
    #[test]
    fn memory_bounded_under_garbage(
        pushes in prop::collection::vec(
            (0u32..400_000, prop::collection::vec(prop_oneof![30 => 1u8..=255, 1 => Just(0u8)], 1..3000)),
            1..200,
        ),
        cap in 2_000usize..100_000,
    ) {
        let cfg = DeframerConfig { max_buffered: cap, max_payload: 4096, ..DeframerConfig::default() };
        let mut d = Deframer::new(cfg);
        for (t, (seq, bytes)) in pushes.iter().enumerate() {
            d.push_segment(*seq, bytes, t as u64);
            let st = d.stats();
            prop_assert!(d.buffered_bytes() + st.buffered_pieces as usize * PIECE_OVERHEAD <= cap);
            prop_assert_eq!(st.buffered_bytes as usize, d.buffered_bytes());
        }
        let st = d.stats();
        prop_assert_eq!(st.frames_ok, 0);
        prop_assert!(d.poll_message().is_none());
    }
}

/// Thousands of tiny never-completing fragments: bounded by the per-piece
/// charge, not only by their byte count.
#[test]
fn many_tiny_fragments_bounded() {
    let cap = 64 * 1024;
    let mut d = Deframer::new(DeframerConfig {
        max_buffered: cap,
        ..DeframerConfig::default()
    });
    for i in 0..200_000u32 {
        d.push_segment(i.wrapping_mul(2), &[0x77], 0);
    }
    let st = d.stats();
    assert!(st.buffered_bytes as usize + st.buffered_pieces as usize * PIECE_OVERHEAD <= cap);
    assert!(st.buffered_pieces > 900, "{st:?}");
    assert!(st.evicted_bytes > 190_000);
}
