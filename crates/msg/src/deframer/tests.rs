//! Deframer behaviour, one scenario per test (stream built with `Framer`).

use super::*;
use crate::frame::{encode_frame, FrameHeader};
use crate::framer::Framer;

const ISN: u32 = 1000;

fn frame(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    encode_frame(&FrameHeader::unordered(0, id), payload, &mut v);
    v
}

fn drain(d: &mut Deframer) -> Vec<(u32, Vec<u8>)> {
    std::iter::from_fn(|| d.poll_message())
        .map(|m| (m.id, m.payload))
        .collect()
}

fn ids(d: &mut Deframer) -> Vec<u32> {
    drain(d).into_iter().map(|(id, _)| id).collect()
}

fn payload(i: u32, len: usize) -> Vec<u8> {
    // Contains zeros, so COBS has work to do.
    (0..len)
        .map(|k| ((k as u32).wrapping_mul(31).wrapping_add(i) % 7) as u8)
        .collect()
}

// ---- whole frames -------------------------------------------------------

#[test]
fn whole_frames_any_order_no_head_of_line_blocking() {
    let f: Vec<Vec<u8>> = (0..4).map(|i| frame(i, &payload(i, 50))).collect();
    let mut seq = vec![ISN];
    for x in &f {
        seq.push(seq.last().unwrap() + x.len() as u32);
    }
    let mut d = Deframer::default();
    // Segments 3, 1, 0 arrive; 2 is lost for now: each yields its message.
    for i in [3usize, 1, 0] {
        d.push_segment(seq[i], &f[i], 7);
        assert_eq!(ids(&mut d), vec![i as u32]);
    }
    assert_eq!(d.buffered_bytes(), 0, "whole frames leave nothing behind");
    d.push_segment(seq[2], &f[2], 9);
    let m = d.poll_message().unwrap();
    assert_eq!((m.id, m.arrival_ns, m.payload), (2, 9, payload(2, 50)));
    // The in-order copy of everything (thesis §4.3's second delivery) is
    // recognised as duplicates.
    let all: Vec<u8> = f.concat();
    d.push_segment(ISN, &all, 10);
    assert!(d.poll_message().is_none());
    let st = d.stats();
    assert_eq!(
        (st.frames_ok, st.duplicates_dropped, st.delivered),
        (8, 4, 4)
    );
}

#[test]
fn protocol_vector_over_stream() {
    let v1 = crate::frame::tests::V1;
    let mut d = Deframer::default();
    for b in v1 {
        d.push_stream(std::slice::from_ref(b), 0);
    }
    assert_eq!(drain(&mut d), vec![(1, b"hi".to_vec())]);
    assert_eq!(d.buffered_bytes(), 0);
}

#[test]
fn protocol_stream_with_padding() {
    // docs/PROTOCOL.md §3: V1 || 00 00 00 || V2.
    let mut wire = crate::frame::tests::V1.to_vec();
    wire.extend_from_slice(&[0, 0, 0]);
    wire.extend_from_slice(crate::frame::tests::V2);
    let mut d = Deframer::default();
    d.push_stream(&wire, 0);
    let a = d.poll_message().unwrap();
    assert_eq!(
        (a.substream, a.id, a.payload, a.ordered),
        (1, 1, b"hi".to_vec(), false)
    );
    assert!(d.poll_message().is_none(), "V2 waits for its predecessor");
    assert_eq!(d.stats().padding_bytes, 3);
    assert_eq!(d.buffered_bytes(), 0);
    assert_eq!(d.stats().ordered_waiting_bytes, 3 + PIECE_OVERHEAD as u64);
    assert_eq!(d.stats().ordered_waiting, 1);
    // The predecessor: first ordered message of sub-stream 0x0203.
    let mut first = Vec::new();
    let h = FrameHeader {
        substream: 0x0203,
        id: 0x0a0b_0c0c,
        substream_seq: None,
        ordered_prev: Some(0x0a0b_0c0c),
    };
    encode_frame(&h, b"first", &mut first);
    d.push_stream(&first, 1);
    let got: Vec<u32> = std::iter::from_fn(|| d.poll_message())
        .map(|m| m.id)
        .collect();
    assert_eq!(got, vec![0x0a0b_0c0c, 0x0a0b_0c0d]);
}

// ---- reassembly ----------------------------------------------------------

#[test]
fn frame_split_in_three_any_order() {
    let f = frame(42, &payload(42, 300));
    let cuts = [0, 97, 211, f.len()];
    let parts: Vec<(u32, &[u8])> = (0..3)
        .map(|i| (ISN + cuts[i] as u32, &f[cuts[i]..cuts[i + 1]]))
        .collect();
    for order in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ] {
        let mut d = Deframer::default();
        for (k, &i) in order.iter().enumerate() {
            d.push_segment(parts[i].0, parts[i].1, 0);
            let got = ids(&mut d);
            if k < 2 {
                assert!(got.is_empty(), "{order:?}");
            } else {
                assert_eq!(got, vec![42], "{order:?}");
            }
        }
        assert_eq!(d.buffered_bytes(), 0, "{order:?}");
        assert_eq!(d.stats().buffered_pieces, 0);
    }
}

#[test]
fn coalesced_two_and_a_half_frames() {
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(i, &payload(i, 40))).collect();
    let all = f.concat();
    let half = f[0].len() + f[1].len() + f[2].len() / 2;
    let mut d = Deframer::default();
    d.push_segment(ISN, &all[..half], 0);
    assert_eq!(ids(&mut d), vec![0, 1]);
    assert!(d.buffered_bytes() > 0 && d.buffered_bytes() <= f[2].len() / 2);
    d.push_segment(ISN + half as u32, &all[half..], 0);
    assert_eq!(ids(&mut d), vec![2]);
    assert_eq!(d.buffered_bytes(), 0);
}

#[test]
fn split_right_after_the_opening_marker() {
    // A segment boundary right after a frame's opening zero: the lone zero
    // must be kept as the opener of the tail that arrives first.
    let f: Vec<Vec<u8>> = (0..2).map(|i| frame(i, &payload(i, 20))).collect();
    let all = f.concat();
    let cut = f[0].len() + 1;
    let mut d = Deframer::default();
    d.push_segment(ISN + cut as u32, &all[cut..], 0);
    assert!(ids(&mut d).is_empty());
    d.push_segment(ISN, &all[..cut], 0);
    assert_eq!(ids(&mut d), vec![0, 1]);
    assert_eq!(d.buffered_bytes(), 0);
    // And the other way round.
    let mut d = Deframer::default();
    d.push_segment(ISN, &all[..cut], 0);
    assert_eq!(ids(&mut d), vec![0]);
    assert_eq!(d.buffered_bytes(), 1);
    d.push_segment(ISN + cut as u32, &all[cut..], 0);
    assert_eq!(ids(&mut d), vec![1]);
    assert_eq!(d.buffered_bytes(), 0);
}

#[test]
fn overlapping_retransmissions_with_new_boundaries() {
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(i, &payload(i, 100))).collect();
    let all = f.concat();
    let n = all.len();
    let mut d = Deframer::default();
    d.push_segment(ISN + 10, &all[10..60], 0);
    d.push_segment(ISN + 150, &all[150..n - 5], 0);
    d.push_segment(ISN + 40, &all[40..200], 0); // overlaps both
    d.push_segment(ISN, &all[..30], 0);
    d.push_segment(ISN + 20, &all[20..45], 0);
    d.push_segment(ISN + n as u32 - 50, &all[n - 50..], 0);
    let mut got = ids(&mut d);
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2]);
    // [20, 45) re-covered an already consumed frame: a marker-less
    // fragment that only the floor can prove useless.
    assert_eq!(d.buffered_bytes(), 25);
    d.advance_floor(ISN + n as u32);
    assert_eq!(d.buffered_bytes(), 0);
    assert_eq!(d.stats().floor_dropped_bytes, 25);
}

#[test]
fn sequence_numbers_wrap() {
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(i, &payload(i, 64))).collect();
    let all = f.concat();
    let start = u32::MAX - 80; // the stream crosses 2^32 inside frame 1
    let mut d = Deframer::default();
    let cut = 100;
    d.push_segment(start.wrapping_add(cut), &all[cut as usize..], 0);
    d.push_segment(start, &all[..cut as usize], 0);
    let mut got = ids(&mut d);
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2]);
    d.advance_floor(start.wrapping_add(all.len() as u32));
    assert_eq!(d.buffered_bytes(), 0);
}

// ---- inconsistent bytes ----------------------------------------------------

/// Original frame A at a range; retransmission of the same range carries B
/// padded with zeros to A's length.
fn a_and_padded_b() -> (Vec<u8>, Vec<u8>) {
    let a = frame(1, &payload(1, 200));
    let mut b = frame(2, &payload(2, 120));
    assert!(b.len() < a.len());
    b.resize(a.len(), 0);
    (a, b)
}

#[test]
fn newer_bytes_win_and_splices_are_rejected() {
    let (a, b) = a_and_padded_b();
    let mid = a.len() / 3;
    // First third of A buffered; then the rest of the range arrives from
    // the retransmission (B's bytes): A-head + B-tail is a splice.
    let mut d = Deframer::default();
    d.push_segment(ISN, &a[..mid], 0);
    d.push_segment(ISN + mid as u32, &b[mid..], 0);
    assert!(d.poll_message().is_none());
    let st = d.stats();
    assert!(
        st.crc_rejected + st.cobs_errors + st.too_short >= 1,
        "{st:?}"
    );
    // The missing head of B arrives later (resegmented retransmission):
    // newer bytes replace A's head, B completes.
    d.push_segment(ISN, &b[..mid], 0);
    assert_eq!(drain(&mut d), vec![(2, payload(2, 120))]);
    // A cache replays A in full: A is a different message, delivered once.
    d.push_segment(ISN, &a, 0);
    assert_eq!(drain(&mut d), vec![(1, payload(1, 200))]);
    d.push_segment(ISN, &a, 0);
    d.push_segment(ISN, &b, 0);
    assert!(d.poll_message().is_none());
    assert!(d.stats().padding_bytes > 0);
}

#[test]
fn spliced_segment_never_delivers_corruption() {
    let (a, b) = a_and_padded_b();
    for mid in 1..a.len() {
        let mut splice = a[..mid].to_vec();
        splice.extend_from_slice(&b[mid..]);
        let mut d = Deframer::default();
        d.push_segment(ISN, &splice, 0);
        // Near the ends a splice can be byte-identical to A or to B (their
        // first bytes coincide; A's tail after its last byte is a zero like
        // B's padding): then that message is legitimately delivered.
        // Anything else is never delivered.
        let a_whole = (1, payload(1, 200));
        let b_whole = (2, payload(2, 120));
        let got = drain(&mut d);
        assert!(
            got.iter().all(|m| *m == a_whole || *m == b_whole),
            "mid {mid}"
        );
        let spliced_was_b = got.contains(&b_whole);
        d.push_segment(ISN, &b, 0);
        let again = drain(&mut d);
        assert_eq!(
            again.is_empty(),
            spliced_was_b,
            "mid {mid}: B delivered exactly once"
        );
        assert!(again.iter().all(|m| *m == b_whole));
        if !got.is_empty() {
            assert!(
                splice == b || splice[..a.len() - 1] == a[..a.len() - 1],
                "mid {mid}"
            );
        }
    }
}

// ---- bounds ---------------------------------------------------------------

#[test]
fn advance_floor_drops_only_useless_fragments() {
    let f: Vec<Vec<u8>> = (0..3).map(|i| frame(i, &payload(i, 80))).collect();
    let all = f.concat();
    let l0 = f[0].len();
    let mut d = Deframer::default();
    // Frame 0 and the first half of frame 1 arrive in order.
    let half = l0 + f[1].len() / 2;
    d.push_segment(ISN, &all[..half], 0);
    assert_eq!(ids(&mut d), vec![0]);
    let kept = d.buffered_bytes();
    d.advance_floor(ISN + half as u32);
    assert_eq!(
        d.buffered_bytes(),
        kept,
        "the head of frame 1 is still useful"
    );
    // A stray fragment below the floor with no opener: useless.
    let mut d2 = Deframer::default();
    d2.push_segment(ISN + 5, &all[5..20], 0);
    d2.push_segment(ISN + 30, &all[30..l0 + 4], 0);
    assert!(d2.buffered_bytes() > 0);
    d2.advance_floor(ISN + l0 as u32 + 4);
    // Only frame 1's opener and the following bytes up to the floor stay.
    assert_eq!(d2.buffered_bytes(), 4);
    d2.push_segment(ISN + l0 as u32 + 4, &all[l0 + 4..], 0);
    assert_eq!(ids(&mut d2), vec![1, 2]);
    // Bytes below the floor are ignored.
    d2.push_segment(ISN, &all[..l0], 0);
    assert!(d2.poll_message().is_none());
    // The rest of frame 1 completes the original.
    d.push_segment(ISN + half as u32, &all[half..], 0);
    assert_eq!(ids(&mut d), vec![1, 2]);
    assert_eq!(d.buffered_bytes(), 0);
}

#[test]
fn memory_cap_evicts_lowest() {
    let cfg = DeframerConfig {
        max_buffered: 10_000,
        ..DeframerConfig::default()
    };
    let mut d = Deframer::new(cfg);
    // 1000 fragments of 50 non-zero bytes, spaced so they never join.
    for i in 0..1000u32 {
        d.push_segment(ISN + i * 100, &[0x55; 50], 0);
        assert!(d.buffered_bytes() + d.stats().buffered_pieces as usize * PIECE_OVERHEAD <= 10_000);
    }
    let st = d.stats();
    assert!(st.evicted_bytes >= 50 * 800, "{st:?}");
    // The survivors are the highest ones.
    let low = d.unwrap_seq(ISN + 800 * 100);
    assert!(d.pieces.keys().all(|&k| k >= low));
}

#[test]
fn oversized_runs_are_dropped() {
    let cfg = DeframerConfig {
        max_payload: 100,
        ..DeframerConfig::default()
    };
    let mut d = Deframer::new(cfg);
    let mut seq = ISN;
    for _ in 0..10 {
        d.push_segment(seq, &[0x33; 60], 0);
        seq += 60;
    }
    assert!(d.buffered_bytes() <= crate::frame::max_body_len(100));
    assert!(d.stats().too_large >= 1);
    // A complete frame over the limit is dropped and counted.
    let big = frame(9, &[1; 101]);
    let before = d.stats().too_large;
    d.push_segment(50_000, &big, 0);
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().too_large, before + 1);
}

#[test]
fn bad_version_counted_not_delivered() {
    let mut raw = vec![0x20, 0, 1, 0, 0, 0, 1, 0x68, 0x69];
    let crc = crc32c::crc32c(&raw);
    raw.extend_from_slice(&crc.to_be_bytes());
    let mut wire = vec![0];
    wire.extend(crate::cobs::encode(&raw));
    wire.push(0);
    let mut d = Deframer::default();
    d.push_stream(&wire, 0);
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().bad_version, 1);
}

// ---- exactly once and ordering ---------------------------------------------

#[test]
fn ids_wrap_around_2_32() {
    let mut fr = Framer::new(crate::FramerConfig {
        initial_id: u32::MAX - 2,
        ..Default::default()
    });
    let mut wire = Vec::new();
    for i in 0..6u8 {
        fr.frame(0, false, &[i + 1], &mut wire).unwrap();
    }
    let mut d = Deframer::default();
    d.push_stream(&wire, 0);
    assert_eq!(
        ids(&mut d),
        vec![u32::MAX - 2, u32::MAX - 1, u32::MAX, 0, 1, 2]
    );
    let mut d2 = Deframer::default();
    d2.push_segment(0, &wire, 0);
    d2.push_segment(0, &wire, 0);
    assert_eq!(ids(&mut d2).len(), 6);
    assert_eq!(d2.stats().duplicates_dropped, 6);
}

#[test]
fn ordered_substream_released_in_chain_order() {
    let mut fr = Framer::default();
    let mut segs = Vec::new();
    for i in 0..6u8 {
        let mut w = Vec::new();
        // Sub-stream 1 ordered, sub-stream 2 unordered, interleaved.
        let sub = if i % 2 == 0 { 1 } else { 2 };
        fr.frame(sub, sub == 1, &[i + 1; 10], &mut w).unwrap();
        segs.push(w);
    }
    let mut seq = vec![ISN];
    for s in &segs {
        seq.push(seq.last().unwrap() + s.len() as u32);
    }
    let mut d = Deframer::default();
    // Reverse arrival: unordered ones at once, ordered ones wait for id 0.
    for i in (0..6).rev() {
        d.push_segment(seq[i], &segs[i], i as u64);
    }
    let got: Vec<(u16, u32, bool)> = std::iter::from_fn(|| d.poll_message())
        .map(|m| (m.substream, m.id, m.ordered))
        .collect();
    assert_eq!(
        got,
        vec![
            (2, 5, false),
            (2, 3, false),
            (2, 1, false),
            (1, 0, true),
            (1, 2, true),
            (1, 4, true)
        ]
    );
}

#[test]
fn ordered_timeout_skips_a_lost_message() {
    let cfg = DeframerConfig {
        ordered_max_wait_ns: Some(1_000),
        ..DeframerConfig::default()
    };
    let mut fr = Framer::default();
    let segs: Vec<Vec<u8>> = (0..3u8)
        .map(|i| {
            let mut w = Vec::new();
            fr.frame(7, true, &[i + 1], &mut w).unwrap();
            w
        })
        .collect();
    let mut d = Deframer::new(cfg);
    d.push_segment(ISN, &segs[0], 0);
    // Message 1 is lost for good (expired at the sender).
    let s2 = ISN + (segs[0].len() + segs[1].len()) as u32;
    d.push_segment(s2, &segs[2], 100);
    assert_eq!(ids(&mut d), vec![0]);
    assert_eq!(d.poll_timeout(), Some(1_100));
    d.handle_timeout(1_099);
    assert!(d.poll_message().is_none());
    d.handle_timeout(1_100);
    assert_eq!(ids(&mut d), vec![2]);
    assert_eq!(d.stats().ordered_skipped, 1);
    // The lost one turning up late is dropped: order is never violated.
    d.push_segment(ISN + segs[0].len() as u32, &segs[1], 2_000);
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().ordered_late, 1);
    assert_eq!(d.poll_timeout(), None);
}

#[test]
fn finish_releases_ordered_messages_waiting_for_a_lost_predecessor() {
    // No time bound: without `finish` the chain after the gap would wait
    // for ever (and be lost with the stream).
    let mut fr = Framer::default();
    let segs: Vec<Vec<u8>> = (0..4u8)
        .map(|i| {
            let mut w = Vec::new();
            fr.frame(3, true, &[i + 1], &mut w).unwrap();
            w
        })
        .collect();
    let mut d = Deframer::new(DeframerConfig::default());
    d.push_segment(ISN, &segs[0], 0);
    // Message 1 never arrives; 2 and 3 come after the gap.
    let s2 = ISN + (segs[0].len() + segs[1].len()) as u32;
    d.push_segment(s2, &segs[2], 10);
    d.push_segment(s2 + segs[2].len() as u32, &segs[3], 20);
    assert_eq!(ids(&mut d), vec![0]);
    assert_eq!(d.poll_timeout(), None, "no time bound configured");
    d.finish();
    assert_eq!(ids(&mut d), vec![2, 3], "released in chain order");
    assert_eq!(d.stats().ordered_skipped, 1, "one gap skipped");
    d.finish();
    assert!(d.poll_message().is_none(), "idempotent");
}

#[test]
fn one_mebibyte_message_in_mss_segments() {
    let big = payload(5, crate::frame::DEFAULT_MAX_PAYLOAD);
    let f = frame(5, &big);
    // In order over a stream in 1400-byte reads.
    let mut d = Deframer::default();
    for c in f.chunks(1400) {
        d.push_stream(c, 0);
    }
    assert_eq!(drain(&mut d), vec![(5, big.clone())]);
    assert_eq!(d.buffered_bytes(), 0);
    // Segments in reverse order, then in one push.
    let mut d = Deframer::default();
    let n = f.len().div_ceil(1400);
    for k in (0..n).rev() {
        let lo = k * 1400;
        d.push_segment(ISN + lo as u32, &f[lo..(lo + 1400).min(f.len())], 0);
    }
    assert_eq!(drain(&mut d), vec![(5, big.clone())]);
    assert_eq!(d.buffered_bytes(), 0);
    d.push_segment(ISN, &f, 0);
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().duplicates_dropped, 1);
    // One byte over the limit: refused at the sender, dropped at the receiver.
    let mut fr = Framer::default();
    let mut out = Vec::new();
    assert!(fr
        .frame(
            0,
            false,
            &[1; crate::frame::DEFAULT_MAX_PAYLOAD + 1],
            &mut out
        )
        .is_err());
    let mut d = Deframer::default();
    d.push_stream(&frame(6, &[1; crate::frame::DEFAULT_MAX_PAYLOAD + 1]), 0);
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().too_large, 1);
}

#[test]
fn reliable_message_behind_more_than_2_16_newer_ids_is_delivered() {
    // Review B2: the first message is lost, the 70 000 messages after it
    // arrive out of order (tiny messages: 70 000 fit in a 4 MiB window),
    // then the retransmission of the first one arrives. It is more than
    // 2^16 ids behind the highest id seen, yet TCP delivered (and ACKed)
    // it: it must be delivered, once.
    let n = 70_000u32;
    let lost = frame(0, b"reliable");
    let mut seq = ISN + lost.len() as u32;
    let mut d = Deframer::default();
    for id in 1..=n {
        let f = frame(id, &[]);
        d.push_segment(seq, &f, 0);
        seq += f.len() as u32;
        d.advance_floor(ISN); // RCV.NXT stays at the hole
    }
    assert_eq!(drain(&mut d).len(), n as usize);
    d.push_segment(ISN, &lost, 1);
    assert_eq!(drain(&mut d), vec![(0, b"reliable".to_vec())]);
    // The hole is filled: RCV.NXT jumps to the end.
    d.advance_floor(seq);
    // A segment that starts below the floor (a retransmission of the last
    // frame) and extends above it (a new frame): only the new one.
    let last = frame(n, &[]);
    let next = frame(n + 1, b"next");
    let mut seg = last.clone();
    seg.extend_from_slice(&next);
    d.push_segment(seq - last.len() as u32, &seg, 2);
    assert_eq!(ids(&mut d), vec![n + 1]);
    // A spurious copy of the new frame above the floor: a duplicate.
    d.push_segment(seq, &next, 3);
    assert!(d.poll_message().is_none());
    let st = d.stats();
    assert_eq!(st.delivered, u64::from(n) + 2);
    assert_eq!(st.duplicates_dropped, 1);
}

#[test]
fn newer_id_at_an_older_position_and_huge_id_gaps() {
    // The sender burned millions of ids (messages expired in its queue)
    // and then rewrote the range of message 5 with a newer message 9e6
    // (an inconsistent retransmission): ids go down by millions in stream
    // order. Every message once, every copy dropped.
    let a = frame(5, &payload(5, 100));
    let mut b = frame(9_000_000, &payload(6, 40));
    b.resize(a.len(), 0);
    let c = frame(4_000_000_000, b"c");
    let e = frame(3, b"e"); // ids wrap: 3 is "after" 4e9
    let pa = ISN;
    let pc = ISN + a.len() as u32;
    let pe = pc + c.len() as u32;
    let mut d = Deframer::default();
    d.push_segment(pc, &c, 0);
    d.push_segment(pa, &b, 1); // the rewrite first
    d.push_segment(pe, &e, 2);
    d.push_segment(pa, &a, 3); // then the original (delayed)
    assert_eq!(ids(&mut d), vec![4_000_000_000, 9_000_000, 3, 5]);
    for (p, f) in [(pa, &a), (pa, &b), (pc, &c), (pe, &e), (pa, &a)] {
        d.push_segment(p, f, 4);
    }
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().duplicates_dropped, 5);
    assert_eq!(d.stats().dedup_entries, 4);
    // RCV.NXT passes everything: nothing can recur, nothing is remembered.
    d.advance_floor(pe + e.len() as u32);
    assert_eq!(d.stats().dedup_entries, 0);
}

#[test]
fn dedup_entries_follow_the_floor() {
    let f: Vec<Vec<u8>> = (0..10).map(|i| frame(i * 1000, &payload(i, 30))).collect();
    let mut pos = vec![ISN];
    for x in &f {
        pos.push(pos.last().unwrap() + x.len() as u32);
    }
    let mut d = Deframer::default();
    // Frame 0 is missing: RCV.NXT stays at ISN, 1..9 are remembered.
    for i in 1..10 {
        d.push_segment(pos[i], &f[i], 0);
        d.advance_floor(ISN);
    }
    assert_eq!(d.stats().dedup_entries, 9);
    // Frame 0 plus the start of frame 1 arrive; RCV.NXT jumps to the end
    // of frame 4 (the engine had 1..4 in order already): entries of frames
    // whose opener is below it go, the others stay.
    let mut seg = f[0].clone();
    seg.extend_from_slice(&f[1][..5]);
    d.push_segment(ISN, &seg, 1);
    d.advance_floor(pos[5]);
    assert_eq!(ids(&mut d).len(), 10);
    assert_eq!(d.stats().dedup_entries, 5);
    // A segment straddling the floor: its part below is trimmed, frame 5
    // above it is a duplicate.
    let mut seg = f[4][3..].to_vec();
    seg.extend_from_slice(&f[5]);
    d.push_segment(pos[4] + 3, &seg, 2);
    assert!(d.poll_message().is_none());
    assert_eq!(d.stats().duplicates_dropped, 1);
    // An ordered byte stream keeps nothing between pushes.
    let mut s = Deframer::default();
    for x in &f {
        s.push_stream(&x[..7], 0);
        s.push_stream(&x[7..], 0);
        assert_eq!(s.stats().dedup_entries, 0);
    }
    assert_eq!(ids(&mut s).len(), 10);
}

#[test]
fn dedup_entry_bound_refuses_rather_than_duplicates() {
    // An owner that never advances the floor: entries are bounded; a copy
    // of an evicted frame is refused, never delivered twice. (Ids far
    // apart, so that the window of recent ids does not know them either.)
    let cfg = DeframerConfig {
        max_dedup_entries: 4,
        ..DeframerConfig::default()
    };
    let f: Vec<Vec<u8>> = (0..6).map(|i| frame(i << 20, b"x")).collect();
    let mut d = Deframer::new(cfg);
    let mut p = ISN;
    let mut pos = Vec::new();
    for x in &f {
        pos.push(p);
        d.push_segment(p, x, 0);
        p += x.len() as u32;
    }
    assert_eq!(ids(&mut d).len(), 6);
    let st = d.stats();
    assert_eq!((st.dedup_entries, st.dedup_evicted), (4, 2));
    d.push_segment(pos[0], &f[0], 1);
    d.push_segment(pos[1], &f[1], 1);
    d.push_segment(pos[2], &f[2], 1);
    assert!(d.poll_message().is_none());
    let st = d.stats();
    assert_eq!((st.dedup_refused, st.duplicates_dropped), (2, 1));
}

#[test]
fn an_id_repeated_at_another_position_is_dropped() {
    // A non-conforming sender sends message 7 twice, at two positions.
    let a = frame(7, b"seven");
    let mut d = Deframer::default();
    d.push_segment(ISN, &a, 0);
    d.push_segment(ISN + a.len() as u32, &a, 0);
    assert_eq!(ids(&mut d), vec![7]);
    let st = d.stats();
    assert_eq!((st.duplicates_dropped, st.repeated_ids), (1, 1));
}

// ---- per-sub-stream sequence numbers ----------------------------------------

#[test]
fn protocol_vectors_with_and_without_seq_in_one_stream() {
    use crate::frame::tests::{V1, V2, V3, V4};
    let mut d = Deframer::default();
    for v in [V1, V3, V4] {
        d.push_stream(v, 0);
    }
    // V4 (sub-stream 0x0203) waits for its predecessor.
    let got: Vec<(u16, u32, Option<u32>)> = std::iter::from_fn(|| d.poll_message())
        .map(|m| (m.substream, m.id, m.substream_seq))
        .collect();
    assert_eq!(got, vec![(1, 1, None), (1, 0, Some(0))]);
    let s1 = d.substream_stats(1).unwrap();
    assert_eq!(
        s1,
        SubstreamStats {
            received: 2,
            with_seq: 1,
            highest_seq: Some(0),
            missing: 0
        }
    );
    // V4 carries sequence number 7 on 0x0203: 0..=6 missing.
    let s2 = d.substream_stats(0x0203).unwrap();
    assert_eq!((s2.received, s2.with_seq, s2.missing), (1, 1, 7));
    assert_eq!(d.substream_stats(2), None);
    assert_eq!(
        d.substreams().map(|(k, _)| k).collect::<Vec<_>>(),
        [1, 0x0203]
    );
    // V2 is the same message (same id) without the SEQ field: a repeat.
    d.push_stream(V2, 0);
    assert_eq!(d.stats().repeated_ids, 1);
    assert_eq!(d.substream_stats(0x0203).unwrap().received, 1);
}

#[test]
fn substream_sequence_numbers_show_loss_per_substream() {
    let mut fr = Framer::default();
    let mut segs = Vec::new(); // (sub, seq, position, frame)
    let mut pos = ISN;
    for i in 0..15u32 {
        let sub = if i % 3 == 2 { 2 } else { 1 };
        let seq = fr.next_substream_seq(sub);
        let mut w = Vec::new();
        fr.frame(sub, false, &payload(i, 20), &mut w).unwrap();
        segs.push((sub, seq, pos, w.clone()));
        pos += w.len() as u32;
    }
    let lost = |sub: u16, seq: u32| sub == 1 && (seq == 3 || seq == 7);
    let mut d = Deframer::default();
    for (sub, seq, p, w) in &segs {
        if !lost(*sub, *seq) {
            d.push_segment(*p, w, 0);
        }
    }
    let got: Vec<(u16, Option<u32>)> = std::iter::from_fn(|| d.poll_message())
        .map(|m| (m.substream, m.substream_seq))
        .collect();
    assert_eq!(got.len(), 13);
    assert!(got.contains(&(2, Some(4))) && !got.contains(&(1, Some(3))));
    let one = d.substream_stats(1).unwrap();
    assert_eq!(
        one,
        SubstreamStats {
            received: 8,
            with_seq: 8,
            highest_seq: Some(9),
            missing: 2
        }
    );
    assert_eq!(d.substream_stats(2).unwrap().missing, 0);
    // A late arrival reduces it; a copy of it does not.
    let (_, _, p, w) = segs.iter().find(|s| lost(s.0, s.1)).unwrap();
    d.push_segment(*p, w, 1);
    d.push_segment(*p, w, 1);
    assert_eq!(d.substream_stats(1).unwrap().missing, 1);
    assert_eq!(d.substream_stats(1).unwrap().received, 9);
}

#[test]
fn substream_sequence_numbers_wrap() {
    let mut r = SubRecord::default();
    for seq in [u32::MAX - 1, u32::MAX, 1, 0] {
        r.record(Some(seq));
    }
    let st = r.stats();
    assert_eq!(st.highest_seq, Some(1));
    // Unwrapped: 0 ..= 2^32 + 1; received 2^32 - 2, 2^32 - 1, 2^32, 2^32 + 1.
    assert_eq!(st.missing, (1u64 << 32) + 2 - 4);
    // Behind the first one seen and before sequence number 0: not counted
    // as filling a gap.
    let mut r = SubRecord::default();
    r.record(Some(5));
    r.record(Some(u32::MAX));
    r.record(None);
    let st = r.stats();
    assert_eq!((st.received, st.with_seq, st.missing), (3, 2, 5));
}

// ---- ordered sub-streams: memory -------------------------------------------

#[test]
fn empty_ordered_messages_are_charged_per_message() {
    // Review B3: ordered messages waiting for their predecessor were
    // bounded by payload bytes only, so empty ones were free: 65 536
    // sub-streams × 2 empty messages, each chain waiting for a predecessor
    // that never comes, were all kept (131 072 messages under a "4 MiB"
    // bound; × 256 per sub-stream, 16.7 M). Each waiting message is now
    // charged PIECE_OVERHEAD bytes: at most 4 MiB / 64 = 65 536 wait.
    let subs = 1usize << 16;
    let mut wire = Vec::new();
    for s in 0..subs {
        let base = s as u32 * 4;
        for (id, prev) in [(base + 1, base), (base + 2, base + 1)] {
            let h = FrameHeader {
                substream: s as u16,
                id,
                substream_seq: None,
                ordered_prev: Some(prev),
            };
            encode_frame(&h, &[], &mut wire);
        }
    }
    let mut d = Deframer::default();
    d.push_stream(&wire, 0);
    let released = std::iter::from_fn(|| d.poll_message()).count();
    let waiting = 2 * subs - released;
    let cap = DeframerConfig::default().ordered_max_waiting_bytes / PIECE_OVERHEAD;
    assert!(
        waiting <= cap,
        "{waiting} empty messages waiting, bound {cap}"
    );
    let st = d.stats();
    assert_eq!(st.ordered_waiting as usize, waiting);
    assert_eq!(st.ordered_waiting_bytes as usize, waiting * PIECE_OVERHEAD);
    assert!(st.ordered_overflow > 0 && st.ordered_skipped > 0);
    // Nothing is lost for good: the end of the stream releases the rest.
    d.finish();
    assert_eq!(std::iter::from_fn(|| d.poll_message()).count(), waiting);
    assert_eq!(d.stats().ordered_waiting, 0);
}
