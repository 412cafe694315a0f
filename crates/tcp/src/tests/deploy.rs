//! The deployability-experiment switches (docs/HOLLYWOOD.md "Deployability
//! switches"): the thesis §5.3 test server that always retransmits
//! inconsistently, and the experimental sequence-gap design of [TCP-video]
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

/// A payload-checking middlebox on the path: a data segment whose bytes
/// differ from the first ones sent at that sequence number is dropped.
fn payload_check(p: &mut Pair) -> std::rc::Rc<std::cell::Cell<u64>> {
    let seen: std::collections::HashMap<u32, Vec<u8>> = Default::default();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(seen));
    let dropped = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let d = dropped.clone();
    p.ab.verdict = Some(Box::new(move |pi| {
        if pi.len == 0 {
            return Verdict::Pass;
        }
        let mut seen = seen.borrow_mut();
        match seen.get(&pi.tcp.seq.0) {
            Some(first)
                if first[..first.len().min(pi.len)] != pi.payload[..first.len().min(pi.len)] =>
            {
                d.set(d.get() + 1);
                Verdict::Drop
            }
            Some(_) => Verdict::Pass,
            None => {
                seen.insert(pi.tcp.seq.0, pi.payload.clone());
                Verdict::Pass
            }
        }
    }));
    dropped
}

#[test]
fn always_inconsistent_sender_falls_back_behind_a_payload_checking_middlebox() {
    // Issue 9 item 9 (thesis §4.5): no middlebox may kill a connection
    // that standard TCP survives. The first transmission of one segment is
    // lost; every complemented retransmission is dropped by the middlebox;
    // after FALLBACK_AFTER of them the sender sends the original bytes,
    // says so, and the transfer completes with the original stream.
    let sender = Config {
        hollywood: crate::HollywoodConfig {
            always_inconsistent: true,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut p = Pair::new(sender, Config::default(), 13);
    let (ha, hb) = p.connect();
    let lost = drop_nth_data_segment(&mut p, 3);
    // The middlebox sees every packet; the loss is behind it (at the
    // receiver, as in thesis §5.3's method).
    let mut first_loss = p.ab.verdict.take().expect("loss verdict");
    let checked = payload_check(&mut p);
    let mut check = p.ab.verdict.take().expect("check verdict");
    p.ab.verdict = Some(Box::new(move |pi| match check(pi) {
        Verdict::Drop => Verdict::Drop,
        _ => first_loss(pi),
    }));
    let data = Pair::data(40_000, 6);
    let got = p.transfer(ha, hb, &data, Duration::from_secs(120));
    assert!(lost.get().is_some());
    assert_eq!(got, data, "the original stream arrived");
    assert!(checked.get() >= u64::from(crate::hollywood::FALLBACK_AFTER));
    assert_eq!(p.ca(ha).stats().rewriting_stopped, 1);
    let told = p.a_events.iter().any(|(_, e)| {
        matches!(
            e,
            crate::endpoint::EndpointEvent::Conn {
                event: crate::conn::Event::RewritingStopped,
                ..
            }
        )
    });
    assert!(told, "the application is told");
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
    // The option announced the end of the skipped segment, or of the
    // SACKed run after it.
    let end = seq + mss;
    let announced: Vec<SeqNumber> = p
        .sent(Dir::AtoB)
        .filter_map(|t| t.tcp.options.next_expected)
        .collect();
    assert!(!announced.is_empty() && announced.iter().all(|&n| n >= end));
    // Everything was acknowledged in the end: the option stops.
    p.run_for(Duration::from_secs(1));
    assert_eq!(p.ca(ha).snd_una(), p.ca(ha).snd_nxt());
    let last = p.sent(Dir::AtoB).last().expect("traffic");
    assert_eq!(last.tcp.options.next_expected, None);
}

#[test]
fn seq_gap_sender_stalls_a_standard_receiver() {
    // [TCP-video] §7.2's design against a receiver without the extension
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
