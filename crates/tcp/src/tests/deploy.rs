//! The deployability-experiment switches (docs/HOLLYWOOD.md "Deployability
//! switches"): the thesis §5.3 test server that always retransmits
//! inconsistently, and the experimental sequence-gap design of seed 003
//! §7.2 (skip expired data, announce the next expected sequence in a TCP
//! option).

use crate::config::Config;
use crate::pair::{Dir, Pair, Verdict};
use hollywood_wire::SeqNumber;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Drop the first transmission of the `nth` data segment a→b (counting
/// from 0); returns the cell that receives its sequence number.
fn drop_nth_data_segment(p: &mut Pair, nth: usize) -> Rc<Cell<Option<SeqNumber>>> {
    let hit = Rc::new(Cell::new(None));
    let h = hit.clone();
    let mut seen = 0;
    p.ab.verdict = Some(Box::new(move |pi| {
        if pi.len == 0 || h.get().is_some() {
            return Verdict::Pass;
        }
        seen += 1;
        if seen == nth + 1 {
            h.set(Some(pi.tcp.seq));
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
    hit
}

fn data_segments_at(p: &Pair, seq: SeqNumber) -> usize {
    p.sent(Dir::AtoB)
        .filter(|t| t.len > 0 && t.tcp.seq == seq)
        .count()
}

/// Stream offset of sequence number `seq` on a connection whose first data
/// byte is `first`.
fn offset(first: SeqNumber, seq: SeqNumber) -> usize {
    seq.diff(first) as usize
}

#[test]
fn always_inconsistent_retransmission_is_the_complement_of_the_original() {
    let sender = Config {
        hollywood: crate::HollywoodConfig {
            always_inconsistent: true,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut p = Pair::new(sender, Config::default(), 11);
    let (ha, hb) = p.connect();
    let first = p.ca(ha).snd_nxt();
    let dropped = drop_nth_data_segment(&mut p, 3);
    let data = Pair::data(40_000, 5);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(30));
    let seq = dropped.get().expect("a segment was dropped");
    assert_eq!(got.len(), data.len());
    let mss = p.ca(ha).negotiated().smss;
    let at = offset(first, seq);
    // Every byte of the lost segment arrived complemented (thesis §5.3:
    // the receiver can tell the retransmission from the original) ...
    let flipped: Vec<u8> = data[at..at + mss].iter().map(|b| b ^ 0xff).collect();
    assert_eq!(&got[at..at + mss], &flipped[..]);
    // ... and everything else is the original.
    assert_eq!(&got[..at], &data[..at]);
    assert_eq!(&got[at + mss..], &data[at + mss..]);
    let st = p.ca(ha).stats().clone();
    assert!(st.always_ir_segments >= 1);
    assert_eq!(st.always_ir_segments, st.retransmitted_segments);
    // Same sequence range and length as the original: no hole, no
    // resegmentation (thesis §4.5).
    p.check_segmentation(Dir::AtoB);
}

#[test]
fn seq_gap_sender_skips_and_aware_receiver_moves_on() {
    let sender = Config {
        hollywood: crate::HollywoodConfig {
            seq_gap_lifetime: Some(Duration::ZERO),
            ..Default::default()
        },
        ..Config::default()
    };
    let receiver = Config {
        hollywood: crate::HollywoodConfig {
            seq_gap_receive: true,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut p = Pair::new(sender, receiver, 12);
    let (ha, hb) = p.connect();
    let first = p.ca(ha).snd_nxt();
    let dropped = drop_nth_data_segment(&mut p, 2);
    let data = Pair::data(30_000, 6);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(30));
    let seq = dropped.get().expect("a segment was dropped");
    let mss = p.ca(ha).negotiated().smss;
    let at = offset(first, seq);
    assert_eq!(got.len(), data.len(), "the stream went on past the gap");
    assert!(got[at..at + mss].iter().all(|&b| b == 0), "skipped = zeros");
    assert_eq!(&got[..at], &data[..at]);
    assert_eq!(&got[at + mss..], &data[at + mss..]);
    // Never retransmitted: only the (dropped) first transmission exists.
    assert_eq!(data_segments_at(&p, seq), 1);
    assert!(p.ca(ha).stats().seq_gap_skips >= 1);
    assert_eq!(p.cb(hb).stats().seq_gap_skipped_bytes, mss as u64);
    // The option announced the end of the skipped segment.
    let end = seq + mss;
    assert!(p
        .sent(Dir::AtoB)
        .any(|t| t.tcp.options.next_expected == Some(end)));
    // Everything was acknowledged in the end: the option stops.
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.ca(ha).snd_una(), p.ca(ha).snd_nxt());
    let last = p.sent(Dir::AtoB).last().expect("traffic");
    assert_eq!(last.tcp.options.next_expected, None);
}

#[test]
fn seq_gap_sender_stalls_a_standard_receiver() {
    // Seed 003 §7.2's design against a receiver without the extension
    // (what Linux is): the skipped bytes never come, the receiver's
    // application is stuck at the gap for good.
    let sender = Config {
        hollywood: crate::HollywoodConfig {
            seq_gap_lifetime: Some(Duration::ZERO),
            ..Default::default()
        },
        ..Config::default()
    };
    let mut p = Pair::new(sender, Config::default(), 13);
    let (ha, hb) = p.connect();
    let first = p.ca(ha).snd_nxt();
    let dropped = drop_nth_data_segment(&mut p, 2);
    let data = Pair::data(30_000, 7);
    p.ca(ha).send(&data).expect("fits the send buffer");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..60 {
        p.run_for(500 * MS);
        while let Ok(n) = p.cb(hb).recv(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }
    let seq = dropped.get().expect("a segment was dropped");
    assert_eq!(got.len(), offset(first, seq), "delivery stops at the gap");
    assert_eq!(got[..], data[..got.len()]);
    assert_eq!(data_segments_at(&p, seq), 1, "never retransmitted");
    assert!(p.ca(ha).stats().seq_gap_skips >= 2, "skips repeat on RTO");
    assert_eq!(p.ca(ha).snd_una(), seq, "the gap is never acknowledged");
}

#[test]
fn seq_gap_sender_retransmits_live_data() {
    // A lifetime longer than the recovery: standard retransmission.
    let sender = Config {
        hollywood: crate::HollywoodConfig {
            seq_gap_lifetime: Some(Duration::from_secs(10)),
            ..Default::default()
        },
        ..Config::default()
    };
    let receiver = Config {
        hollywood: crate::HollywoodConfig {
            seq_gap_receive: true,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut p = Pair::new(sender, receiver, 14);
    let (ha, hb) = p.connect();
    let dropped = drop_nth_data_segment(&mut p, 2);
    let data = Pair::data(30_000, 8);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(30));
    assert_eq!(got, data);
    let seq = dropped.get().expect("a segment was dropped");
    assert_eq!(data_segments_at(&p, seq), 2, "dropped once, resent once");
    assert_eq!(p.ca(ha).stats().seq_gap_skips, 0);
    assert!(p
        .sent(Dir::AtoB)
        .all(|t| t.tcp.options.next_expected.is_none()));
}
