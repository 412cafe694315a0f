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
/// padding zeros. `seq`: with per-sub-stream sequence numbers.
fn build(msgs: &[Msg], initial_id: u32, pads: &[u8], seq: bool) -> (Vec<u8>, BTreeMap<u32, Msg>) {
    let mut fr = Framer::new(FramerConfig {
        initial_id,
        substream_seq: seq,
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
        seq in any::<bool>(),
    ) {
        let (wire, sent) = build(&msgs, initial_id, &pads, seq);
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
        // Per sub-stream: everything received, nothing missing.
        let mut per_sub = BTreeMap::new();
        for m in sent.values() {
            *per_sub.entry(m.substream).or_insert(0u64) += 1;
        }
        let subs: Vec<(u16, hollywood_msg::SubstreamStats)> = d.substreams().collect();
        prop_assert_eq!(subs.len(), per_sub.len());
        for (k, st) in subs {
            let n = per_sub[&k];
            prop_assert_eq!(st.received, n);
            prop_assert_eq!(st.with_seq, if seq { n } else { 0 });
            prop_assert_eq!(st.highest_seq, seq.then(|| (n - 1) as u32));
            prop_assert_eq!(st.missing, 0);
        }
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
        let (wire, sent) = build(&msgs, 0, &pads, true);
        let mut d = Deframer::default();
        let mut got = Vec::new();
        for (off, len) in partition(wire.len(), &cuts) {
            d.push_stream(&wire[off..off + len], 0);
            while let Some(m) = d.poll_message() {
                got.push((m.id, m.payload));
            }
            // Only the unfinished frame at the end may be buffered.
            prop_assert!(d.buffered_bytes() <= hollywood_msg::frame::max_frame_len(1500, true));
            prop_assert_eq!(d.stats().dedup_entries, 0, "a stream keeps no entries between pushes");
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

// ---- de-duplication by position (review B2) ----------------------------

/// Ids as a sender that burns ids (messages expired in its queue) hands
/// them out: mostly +1, sometimes a few, sometimes millions.
fn id_gap() -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => Just(1u32),
        2 => 2u32..1000,
        2 => 1_000_000u32..100_000_000,
    ]
}

fn encode(substream: u16, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    hollywood_msg::encode_frame(
        &hollywood_msg::FrameHeader::unordered(substream, id),
        payload,
        &mut v,
    );
    v
}

/// The RCV.NXT a TCP receiver would have after the given byte ranges
/// arrived (ranges relative to the stream start).
#[derive(Default)]
struct RcvNxt {
    got: BTreeMap<usize, usize>,
    nxt: usize,
}

impl RcvNxt {
    fn add(&mut self, off: usize, len: usize) -> usize {
        let e = self.got.entry(off).or_insert(0);
        *e = (*e).max(off + len);
        while let Some((&o, &end)) = self.got.range(..=self.nxt).next_back() {
            self.got.remove(&o);
            if end <= self.nxt {
                continue;
            }
            self.nxt = end;
        }
        self.nxt
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// (iv) Ids that jump by millions, ranges rewritten by inconsistent
    /// retransmissions with *newer* ids at *older* positions (several
    /// versions of a range), the original and every version cut into
    /// segments, lost, duplicated, plus long runs of overlapping
    /// retransmissions at random offsets, all in random order, with the
    /// floor following RCV.NXT as the engine does ⇒ no id twice, nothing
    /// corrupted, every message whose range was never rewritten exactly
    /// once, the last version of a rewritten range exactly once when it
    /// was pushed whole above the floor, and nothing remembered once the
    /// floor has passed everything.
    #[test]
    fn id_gaps_rewrites_and_overlapping_retransmissions(
        msgs in prop::collection::vec((0u16..4, prop::collection::vec(any::<u8>(), 0..120)), 1..40),
        initial_id in any::<u32>(),
        gaps in prop::collection::vec(id_gap(), 64),
        pads in prop::collection::vec(0usize..4, 1..8),
        rewrites in prop::collection::vec((any::<usize>(), 0usize..120), 0..8),
        isn in any::<u32>(),
        cuts0 in prop::collection::vec(any::<usize>(), 0..60),
        cuts_last in prop::collection::vec(any::<usize>(), 0..60),
        fate in prop::collection::vec(0u8..10, 1..64),
        extra in prop::collection::vec((any::<usize>(), any::<usize>(), 1usize..300), 0..120),
        order in prop::collection::vec(any::<u32>(), 256),
    ) {
        // The original stream.
        let mut id = initial_id;
        let mut g = gaps.iter().cycle();
        let mut wire = Vec::new();
        let mut sent: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut ranges = Vec::new(); // (offset, len, id)
        for (i, (sub, p)) in msgs.iter().enumerate() {
            let f = encode(*sub, id, p);
            ranges.push((wire.len(), f.len(), id));
            wire.extend_from_slice(&f);
            wire.extend(std::iter::repeat_n(0, pads[i % pads.len()]));
            sent.insert(id, p.clone());
            id = id.wrapping_add(*g.next().unwrap());
        }
        // Versions: each rewrite replaces one original range (markers
        // included) with a newer message padded with zeros.
        let mut versions = vec![wire.clone()];
        let mut rewritten = BTreeMap::new(); // range index -> latest id
        for &(which, plen) in &rewrites {
            let k = which % ranges.len();
            let (off, len, _) = ranges[k];
            let mut p: Vec<u8> = (0..plen).map(|i| (i % 5) as u8).collect();
            let f = loop {
                let f = encode(9, id, &p);
                if f.len() <= len { break f; }
                p.pop();
            };
            let mut v = versions.last().unwrap().clone();
            v[off..off + len].fill(0);
            v[off..off + f.len()].copy_from_slice(&f);
            versions.push(v);
            sent.insert(id, p);
            rewritten.insert(k, (id, f.len()));
            id = id.wrapping_add(*g.next().unwrap());
        }
        let last = versions.len() - 1;
        // Segments: (version, offset, len).
        let n = wire.len();
        let mut segs = Vec::new();
        for (k, (off, len)) in partition(n, &cuts0).into_iter().enumerate() {
            match fate[k % fate.len()] {
                0..=2 => {}
                3 => { segs.push((0, off, len)); segs.push((0, off, len)) }
                _ => segs.push((0, off, len)),
            }
        }
        for (off, len) in partition(n, &cuts_last) {
            segs.push((last, off, len));
        }
        for &(v, off, len) in &extra {
            let off = off % n;
            segs.push((v % versions.len(), off, len.min(n - off)));
        }
        // The last version of each rewritten range, whole.
        let mut whole = BTreeMap::new(); // segment index -> id
        for (&k, &(rid, _)) in &rewritten {
            let (off, len, _) = ranges[k];
            whole.insert(segs.len(), rid);
            segs.push((last, off, len));
        }
        let mut keyed: Vec<(u32, usize)> =
            (0..segs.len()).map(|i| (order[i % order.len()], i)).collect();
        keyed.sort_unstable();

        let mut d = Deframer::default();
        let mut rcv = RcvNxt::default();
        let mut got: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut must = Vec::new();
        for (t, &(_, i)) in keyed.iter().enumerate() {
            let (v, off, len) = segs[i];
            if let Some(&rid) = whole.get(&i) {
                if off >= rcv.nxt {
                    must.push(rid);
                }
            }
            d.push_segment(isn.wrapping_add(off as u32), &versions[v][off..off + len], t as u64);
            let nxt = rcv.add(off, len);
            d.advance_floor(isn.wrapping_add(nxt as u32));
            while let Some(m) = d.poll_message() {
                let s = sent.get(&m.id).ok_or_else(|| TestCaseError::fail(format!("unknown id {}", m.id)))?;
                prop_assert_eq!(&m.payload, s, "payload of {}", m.id);
                prop_assert!(got.insert(m.id, m.payload).is_none(), "{} delivered twice", m.id);
            }
        }
        prop_assert_eq!(rcv.nxt, n);
        for (k, &(_, _, oid)) in ranges.iter().enumerate() {
            if !rewritten.contains_key(&k) {
                prop_assert!(got.contains_key(&oid), "{} lost; {:?}", oid, d.stats());
            }
        }
        for rid in must {
            prop_assert!(got.contains_key(&rid), "rewrite {} lost; {:?}", rid, d.stats());
        }
        let st = d.stats();
        prop_assert_eq!(st.dedup_refused + st.dedup_evicted + st.repeated_ids, 0);
        prop_assert_eq!(st.dedup_entries, 0, "floor at the end: nothing can recur");
    }
}

/// Polls every message, failing on an id delivered twice.
fn poll_once(d: &mut Deframer, delivered: &mut BTreeMap<u32, ()>) -> Result<(), TestCaseError> {
    while let Some(m) = d.poll_message() {
        prop_assert!(delivered.insert(m.id, ()).is_none(), "{} twice", m.id);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// (v) A reliable message lost in a hole, then more than 2^16 newer
    /// messages (with id gaps) delivered out of order around it, copies
    /// and overlapping retransmissions among them, then its own
    /// retransmission (inside a segment that overlaps its neighbours) ⇒
    /// delivered once; every other message once; memory follows the
    /// floor.
    #[test]
    fn reliable_message_after_more_than_2_16_newer_ids(
        initial_id in any::<u32>(),
        gaps in prop::collection::vec(id_gap(), 64),
        n_after in 65_537usize..70_000,
        hole_at in 0usize..50,
        seg_len in 100usize..3000,
        isn in any::<u32>(),
        dup_every in 3usize..20,
    ) {
        let mut id = initial_id;
        let mut g = gaps.iter().cycle();
        let mut wire = Vec::new();
        let mut ranges = Vec::new();
        for i in 0..hole_at + 1 + n_after {
            let f = encode((i % 3) as u16, id, &[(i % 7) as u8; 2]);
            ranges.push((wire.len(), f.len(), id));
            wire.extend_from_slice(&f);
            id = id.wrapping_add(*g.next().unwrap());
        }
        let (h_off, h_len, h_id) = ranges[hole_at];
        let mut d = Deframer::default();
        let mut delivered = BTreeMap::new();
        // Everything before the hole in order; RCV.NXT stops at the hole.
        d.push_segment(isn, &wire[..h_off], 0);
        d.advance_floor(isn.wrapping_add(h_off as u32));
        // Everything after it in segments, every few a copy of the one
        // before (out-of-order delivery then a spurious retransmission),
        // some overlapping the previous one.
        let mut off = h_off + h_len;
        let mut k = 0;
        while off < wire.len() {
            let end = (off + seg_len).min(wire.len());
            d.push_segment(isn.wrapping_add(off as u32), &wire[off..end], 1);
            if k % dup_every == 0 {
                let back = off.saturating_sub(seg_len / 2).max(h_off + h_len);
                d.push_segment(isn.wrapping_add(back as u32), &wire[back..end], 1);
            }
            d.advance_floor(isn.wrapping_add(h_off as u32));
            poll_once(&mut d, &mut delivered)?;
            off = end;
            k += 1;
        }
        prop_assert_eq!(delivered.len(), hole_at + n_after);
        prop_assert!(!delivered.contains_key(&h_id));
        prop_assert!(d.stats().dedup_entries as usize >= n_after);
        // The retransmission of the hole, overlapping both neighbours.
        let a = h_off.saturating_sub(10);
        let b = (h_off + h_len + 10).min(wire.len());
        d.push_segment(isn.wrapping_add(a as u32), &wire[a..b], 2);
        d.advance_floor(isn.wrapping_add(wire.len() as u32));
        poll_once(&mut d, &mut delivered)?;
        prop_assert!(delivered.contains_key(&h_id), "{:?}", d.stats());
        prop_assert_eq!(delivered.len(), hole_at + 1 + n_after);
        // A late spurious copy of the whole stream: below the floor.
        d.push_segment(isn, &wire, 3);
        poll_once(&mut d, &mut delivered)?;
        let st = d.stats();
        prop_assert_eq!(st.dedup_refused + st.dedup_evicted, 0);
        prop_assert_eq!(st.dedup_entries, 0);
        prop_assert_eq!(st.delivered as usize, hole_at + 1 + n_after);
    }
}
