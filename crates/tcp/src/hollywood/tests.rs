//! Unit tests of the message table, one thesis rule (or review finding)
//! per test, and a property test of the accounting invariant.

use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
fn at(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}
fn meta(id: u32, lifetime: Option<u64>, dep: Option<u32>) -> MessageMeta {
    MessageMeta {
        id,
        lifetime: lifetime.map(ms),
        depends_on: dep,
        replaceable: true,
        substream: 0,
        priority: 0,
    }
}
fn frame(id: u32, len: usize) -> Vec<u8> {
    vec![(id as u8).wrapping_add(1); len]
}

/// Queue a message and give it its slot at once (it is transmitted now).
fn send(t: &mut MessageTable, now: u64, seq: u32, m: MessageMeta, len: usize) {
    t.check(&m, len).unwrap();
    t.enqueue(at(now), frame(m.id, len), m);
    assert_eq!(t.head_len(at(now), Duration::ZERO), Some(len));
    let f = t.take_head(SeqNumber(seq)).unwrap();
    assert_eq!(f.len(), len);
    assert!(t
        .on_first_transmit(at(now), Duration::ZERO, SeqNumber(seq), len)
        .is_empty());
}

fn events(t: &mut MessageTable) -> Vec<ExpiredMessage> {
    std::iter::from_fn(|| t.poll_expired()).collect()
}

#[test]
fn live_message_is_retransmitted_as_is() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(200), None), 100);
    // At 50 ms with a one-way delay of 10 ms, message 0 (deadline 200 ms) is live.
    assert!(t
        .on_retransmit(at(50), ms(10), SeqNumber(1000), 100, Resend::EVIDENT)
        .is_empty());
    assert_eq!(t.stats().kept_live, 1);
    assert!(events(&mut t).is_empty());
}

#[test]
fn expired_message_is_replaced_by_the_queued_live_message_closest_to_expiry() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
    send(&mut t, 0, 1100, meta(1, Some(100), None), 100);
    // Queued, not yet sent: 2 (deadline 150+200), 3 (deadline 250, closest).
    t.enqueue(at(150), frame(2, 80), meta(2, Some(200), None));
    t.enqueue(at(150), frame(3, 60), meta(3, Some(100), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    assert_eq!(rw[0].seq, SeqNumber(1000));
    assert_eq!(rw[0].bytes.len(), 100, "same length as the original");
    assert_eq!(&rw[0].bytes[..60], &frame(3, 60)[..]);
    assert!(rw[0].bytes[60..].iter().all(|&b| b == 0), "zero padding");
    assert!(rw[0].keep_original);
    assert_eq!(t.stats().ir_sent, 1);
    assert_eq!(t.stats().padding_bytes, 40);
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 0,
            reason: ExpiryReason::Replaced { by: Some(3) }
        }]
    );
    // A copy of message 3 travels in slot 0; message 3 keeps its place in
    // the queue (its own slot is the guaranteed delivery) but is not taken
    // as a replacement again.
    assert_eq!(t.queued_messages(), 2);
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1100), 100, Resend::EVIDENT);
    assert_eq!(
        &rw[0].bytes[..80],
        &frame(2, 80)[..],
        "message 2, not 3 again"
    );
    // Message 3 is placed twice: first carried in slot 0, then in its own
    // slot, which is not its first placement.
    assert_eq!(t.head_len(at(150), ms(20)), Some(80));
    t.take_head(SeqNumber(1200)).unwrap();
    assert_eq!(t.head_len(at(150), ms(20)), Some(60));
    t.take_head(SeqNumber(1280)).unwrap();
    let sent: Vec<_> = std::iter::from_fn(|| t.poll_sent()).collect();
    let threes: Vec<_> = sent.iter().filter(|s| s.0 == 3).collect();
    assert_eq!(
        threes,
        [
            &(3, SeqNumber(1000), 60, true),
            &(3, SeqNumber(1280), 60, false)
        ]
    );
    let twos: Vec<_> = sent.iter().filter(|s| s.0 == 2).collect();
    assert_eq!(
        twos,
        [
            &(2, SeqNumber(1100), 80, true),
            &(2, SeqNumber(1200), 80, false)
        ]
    );
}

#[test]
fn no_live_candidate_means_padding_never_an_expired_filler() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 100);
    // Message 1 is queued but expired too, and 2 does not fit.
    t.enqueue(at(0), frame(1, 50), meta(1, Some(10), None));
    t.enqueue(at(0), frame(2, 101), meta(2, Some(1000), None));
    let rw = t.on_retransmit(at(100), ms(5), SeqNumber(0), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    assert!(rw[0].bytes.iter().all(|&b| b == 0), "padding only");
    assert_eq!(t.stats().ir_padded, 1);
    let ev = events(&mut t);
    assert!(ev.contains(&ExpiredMessage {
        id: 0,
        reason: ExpiryReason::Replaced { by: None }
    }));
    // The expired queued message was dropped before sequence numbers.
    assert!(ev.contains(&ExpiredMessage {
        id: 1,
        reason: ExpiryReason::NotSent
    }));
    assert_eq!(t.stats().not_sent, 1);
}

#[test]
fn expired_message_in_the_queue_never_gets_sequence_numbers() {
    let mut t = MessageTable::new();
    t.enqueue(at(0), frame(0, 100), meta(0, Some(50), None));
    t.enqueue(at(0), frame(1, 90), meta(1, Some(500), None));
    // At 40 ms with a one-way delay of 15 ms the arrival estimate is 55 ms > 50 ms.
    assert_eq!(t.head_len(at(40), ms(15)), Some(90));
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 0,
            reason: ExpiryReason::NotSent
        }]
    );
    assert_eq!(t.queued_bytes(), 90);
    let f = t.take_head(SeqNumber(7)).unwrap();
    assert_eq!(f, frame(1, 90));
}

#[test]
fn reliable_and_ordered_messages_never_expire_in_the_queue() {
    let mut t = MessageTable::new();
    let mut ordered = meta(0, Some(1), None);
    ordered.replaceable = false;
    t.enqueue(at(0), frame(0, 10), ordered);
    t.enqueue(at(0), frame(1, 10), meta(1, None, None));
    assert_eq!(t.head_len(at(10_000), ms(100)), Some(10));
    t.take_head(SeqNumber(0)).unwrap();
    assert_eq!(t.head_len(at(10_000), ms(100)), Some(10));
    assert!(events(&mut t).is_empty());
}

#[test]
fn a_live_dependent_protects_its_dependency_in_the_queue() {
    let mut t = MessageTable::new();
    // I-frame 0 (short lifetime), P-frame 1 depends on it (long lifetime).
    t.enqueue(at(0), frame(0, 100), meta(0, Some(10), None));
    t.enqueue(at(0), frame(1, 50), meta(1, Some(1000), Some(0)));
    assert_eq!(t.head_len(at(100), ms(5)), Some(100), "kept for 1");
    assert!(events(&mut t).is_empty());
}

#[test]
fn a_delivered_live_dependent_still_protects_its_dependency() {
    // Review 1a.1: thesis §4.2 protects a message while *unexpired*
    // messages depend on it, delivered or not (a delivered P-frame needs
    // its I-frame to be decoded).
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 100);
    for i in 1..4u32 {
        send(
            &mut t,
            0,
            100 + (i - 1) * 50,
            meta(i, Some(1000), Some(0)),
            50,
        );
    }
    // A later target is declared on the sub-stream (so 0 is no longer the
    // latest target) and the dependents are SACKed (delivered).
    send(&mut t, 100, 250, meta(4, Some(1000), Some(3)), 40);
    t.enqueue(at(100), frame(5, 30), meta(5, Some(1000), None));
    t.on_sack(SeqNumber(100), SeqNumber(250));
    assert!(t
        .on_retransmit(at(100), ms(5), SeqNumber(0), 100, Resend::EVIDENT)
        .is_empty());
    assert_eq!(t.stats().kept_for_dependency, 1);
    // Once the dependents have expired, the I-frame may go.
    let rw = t.on_retransmit(at(2000), ms(5), SeqNumber(0), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
}

#[test]
fn the_latest_dependency_target_is_protected_for_future_messages() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 100);
    send(&mut t, 0, 100, meta(1, Some(10), Some(0)), 50);
    // Both expired; 0 is still the latest declared target.
    assert!(t
        .on_retransmit(at(500), ms(5), SeqNumber(0), 100, Resend::EVIDENT)
        .is_empty());
    assert_eq!(t.stats().kept_for_dependency, 1);
}

#[test]
fn dependency_chains_are_per_substream() {
    let mut t = MessageTable::new();
    let on = |id: u32, dep: Option<u32>, sub: u16| MessageMeta {
        substream: sub,
        ..meta(id, Some(100), dep)
    };
    // Two interleaved chains: base layer on 1 (0 ← 2 ← 4), enhancement
    // on 2 (1 ← 3 ← 5), each depending on its own chain.
    for m in [
        on(0, None, 1),
        on(1, Some(0), 2),
        on(2, Some(0), 1),
        on(3, Some(1), 2),
        on(4, Some(2), 1),
        on(5, Some(3), 2),
    ] {
        t.check(&m, 10).unwrap();
        t.enqueue(at(0), frame(m.id, 10), m);
    }
    // Within one sub-stream a dependency may not go back.
    assert_eq!(
        t.check(&on(6, Some(0), 1), 10),
        Err(MetaError::DecreasingDependency)
    );
    assert_eq!(t.check(&on(6, Some(3), 2), 10), Ok(()));
    assert_eq!(
        t.check(&on(6, Some(6), 2), 10),
        Err(MetaError::ForwardDependency)
    );
    assert_eq!(t.check(&on(5, None, 2), 10), Err(MetaError::IdOrder));
}

#[test]
fn dependency_rules_wrap_around() {
    assert_eq!(
        check_dependency(1, Some(u32::MAX), Some(u32::MAX - 2)),
        Ok(())
    );
    assert_eq!(
        check_dependency(1, Some(u32::MAX - 3), Some(u32::MAX)),
        Err(MetaError::DecreasingDependency)
    );
    assert_eq!(
        check_dependency(u32::MAX, Some(1), None),
        Err(MetaError::ForwardDependency)
    );
}

#[test]
fn fragment_rule_keeps_partially_received_message() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 3000);
    t.enqueue(at(0), frame(1, 100), meta(1, Some(1000), None));
    // The middle of message 0 was SACKed: retransmitting the whole slot
    // (e.g. after RTO) must keep the original bytes.
    t.on_sack(SeqNumber(1500), SeqNumber(2000));
    assert!(t
        .on_retransmit(at(100), ms(5), SeqNumber(0), 3000, Resend::EVIDENT)
        .is_empty());
    assert_eq!(t.stats().kept_for_fragment, 1);
    // A retransmission of only one fragment never rewrites.
    let mut t2 = MessageTable::new();
    send(&mut t2, 0, 0, meta(0, Some(10), None), 3000);
    t2.enqueue(at(0), frame(1, 100), meta(1, Some(1000), None));
    assert!(t2
        .on_retransmit(at(100), ms(5), SeqNumber(0), 1448, Resend::EVIDENT)
        .is_empty());
    assert_eq!(t2.stats().ir_sent, 0);
}

#[test]
fn ordered_messages_are_never_replaced_nor_used_as_replacements() {
    // Review B5.
    let mut t = MessageTable::new();
    let mut o = meta(0, Some(1), None);
    o.replaceable = false;
    send(&mut t, 0, 0, o, 100);
    assert!(t
        .on_retransmit(at(100), ms(5), SeqNumber(0), 100, Resend::EVIDENT)
        .is_empty());
    send(&mut t, 0, 100, meta(1, Some(1), None), 100);
    let mut o2 = meta(2, Some(1000), None);
    o2.replaceable = false;
    t.enqueue(at(0), frame(2, 50), o2);
    let rw = t.on_retransmit(at(100), ms(5), SeqNumber(100), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    assert!(
        rw[0].bytes.iter().all(|&b| b == 0),
        "not the ordered message"
    );
    assert_eq!(t.queued_messages(), 1);
}

#[test]
fn a_carried_message_is_kept_while_live_and_replaced_when_expired() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 100);
    t.enqueue(at(0), frame(1, 60), meta(1, Some(200), None));
    t.enqueue(at(0), frame(2, 60), meta(2, Some(5000), None));
    let rw = t.on_retransmit(at(50), ms(5), SeqNumber(0), 100, Resend::EVIDENT);
    assert_eq!(rw[0].bytes[0], 2, "message 1 (closest to expiry)");
    assert!(rw[0].keep_original);
    t.set_original(SeqNumber(0), frame(0, 100));
    events(&mut t);
    // The retransmission was lost too; message 1 is still live: resend.
    assert!(t
        .on_retransmit(at(100), ms(5), SeqNumber(0), 100, Resend::EVIDENT)
        .is_empty());
    // Later it has expired: message 2 takes the slot.
    let rw = t.on_retransmit(at(300), ms(5), SeqNumber(0), 100, Resend::EVIDENT);
    assert_eq!(rw[0].bytes[0], 3);
    assert!(!rw[0].keep_original, "the original was kept the first time");
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 1,
            reason: ExpiryReason::Replaced { by: Some(2) }
        }]
    );
}

#[test]
fn ack_removes_slots_and_their_carried_messages() {
    let mut t = MessageTable::new();
    for i in 0..5 {
        send(&mut t, 0, 1000 + i * 100, meta(i, Some(100), None), 100);
    }
    t.on_ack(SeqNumber(1200), None);
    assert_eq!(t.len(), 3);
    t.enqueue(at(150), frame(9, 50), meta(9, Some(500), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1200), 100, Resend::EVIDENT);
    assert_eq!(rw[0].bytes[0], 10);
    t.on_ack(SeqNumber(1300), None);
    // Slot 2 and the copy of 9 it carried left; 9 itself still waits for
    // its own slot (slots 3 and 4 plus queued 9).
    assert_eq!(t.len(), 3);
    assert_eq!(t.queued_messages(), 1);
}

#[test]
fn dsack_on_a_rewritten_slot_reports_the_carried_message_displaced() {
    // Review B4: the ACK for a rewritten slot may be for the original
    // bytes (a spurious retransmission); the carried message must then be
    // reported, never lost silently.
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
    t.enqueue(at(150), frame(9, 50), meta(9, Some(500), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    t.set_original(SeqNumber(1000), frame(0, 100));
    events(&mut t);
    // Message 9 waits behind a closed window until it expires: its copy in
    // slot 0 is all it has (dropped from the queue without a report).
    assert_eq!(t.head_len(at(700), ms(20)), None);
    assert!(events(&mut t).is_empty());
    // The ACK for slot 0 arrives with a D-SACK for it.
    t.on_ack(SeqNumber(1100), None);
    t.on_dsack(SeqNumber(1000), SeqNumber(1100));
    assert_eq!(t.stats().dsack_spurious_rewrites, 1);
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 9,
            reason: ExpiryReason::Displaced
        }]
    );
    assert!(t.is_empty());
}

#[test]
fn a_carried_message_delivered_in_its_own_slot_is_not_reported_when_its_copy_goes() {
    // Review B7: message 9 rides in slot 0 and is then sent in its own
    // slot, which is acknowledged. Slot 0 is lost again and resent after 9
    // expired: the copy gives way, but 9 was delivered — no Expired event.
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
    t.enqueue(at(150), frame(9, 50), meta(9, Some(100), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw[0].bytes[0], 10, "slot 0 carries 9");
    t.set_original(SeqNumber(1000), frame(0, 100));
    assert_eq!(t.head_len(at(150), ms(20)), Some(50));
    t.take_head(SeqNumber(1100)).unwrap();
    assert!(t
        .on_first_transmit(at(150), ms(20), SeqNumber(1100), 50)
        .is_empty());
    t.on_sack(SeqNumber(1100), SeqNumber(1150));
    events(&mut t);
    // 9's own slot is delivered; at 400 ms 9 is dead and slot 0 is resent.
    let rw = t.on_retransmit(at(400), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    assert!(
        rw[0].bytes.iter().all(|&b| b == 0),
        "padding, not the dead copy"
    );
    assert!(events(&mut t).is_empty(), "9 was delivered in its own slot");
    t.on_ack(SeqNumber(1150), None);
    assert!(t.is_empty());
    assert!(events(&mut t).is_empty());
}

#[test]
fn a_copy_sent_by_a_timer_counts_only_when_the_ack_echoes_it() {
    // Review B4: after an RTO (no evidence that the receiver lacks the
    // range) the slot carries message 9, which then expires in the queue
    // (a closed window). An ACK echoing the RTO's own timestamp was sent
    // for that very segment filling the hole: 9 arrived. Any other echo
    // may be for the first transmission (its ACK lost): 9 is reported.
    for (echo, reported) in [(Some(500), false), (Some(499), true), (None, true)] {
        let mut t = MessageTable::new();
        send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
        t.enqueue(at(150), frame(9, 50), meta(9, Some(200), None));
        let rto = Resend {
            evidence: false,
            tsval: Some(500),
            path_loss: 0.0,
        };
        let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, rto);
        assert_eq!(rw[0].bytes[0], 10, "slot 0 carries 9");
        t.set_original(SeqNumber(1000), frame(0, 100));
        events(&mut t);
        assert_eq!(t.head_len(at(700), ms(20)), None, "9 expired in the queue");
        t.on_ack(SeqNumber(1100), echo);
        let ev = events(&mut t);
        assert_eq!(
            ev == vec![ExpiredMessage {
                id: 9,
                reason: ExpiryReason::Displaced
            }],
            reported,
            "echo {echo:?}: {ev:?}"
        );
        assert!(t.is_empty());
    }
}

#[test]
fn repeated_unacknowledged_inconsistent_sends_stop_rewriting() {
    // Thesis §4.5 / issue item 9: behind a middlebox that drops
    // retransmissions whose payload differs, the slot never gets through.
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 100);
    send(&mut t, 0, 100, meta(1, Some(10), None), 100);
    t.enqueue(at(0), frame(7, 60), meta(7, None, None));
    let rw = t.on_retransmit(at(100), ms(5), SeqNumber(0), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    t.set_original(SeqNumber(0), frame(0, 100));
    events(&mut t);
    // Resent inconsistently FALLBACK_AFTER times in all, never acknowledged.
    for k in 1..FALLBACK_AFTER {
        assert!(
            t.on_retransmit(
                at(100 + 100 * k as u64),
                ms(5),
                SeqNumber(0),
                100,
                Resend::EVIDENT
            )
            .is_empty(),
            "message 7 is reliable: kept"
        );
        assert!(t.rewriting());
    }
    let rw = t.on_retransmit(at(1000), ms(5), SeqNumber(0), 100, Resend::EVIDENT);
    assert!(!t.rewriting());
    assert!(t.take_fallback());
    assert!(!t.take_fallback(), "reported once");
    assert_eq!(rw.len(), 1);
    assert_eq!(rw[0].bytes, frame(0, 100), "the original bytes again");
    // Message 7's copy was withdrawn; it still waits for its own slot,
    // so it is not reported.
    assert!(events(&mut t).is_empty());
    assert_eq!(t.queued_messages(), 1);
    // From now on nothing is rewritten, not even expired slot 1.
    assert!(t
        .on_retransmit(at(2000), ms(5), SeqNumber(100), 100, Resend::EVIDENT)
        .is_empty());
    assert_eq!(t.stats().rewriting_stopped, 1);
}

#[test]
fn a_lossy_path_explains_repeated_failures_and_rewriting_goes_on() {
    // Three failed inconsistent sends of one slot on a path that loses a
    // third of everything (congestion, not a middlebox) are no surprise:
    // rewriting goes on; only when path_loss^failures drops below
    // FALLBACK_SURPRISE (here after 9 failures) does it stop.
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, Some(10), None), 100);
    t.enqueue(at(0), frame(7, 60), meta(7, None, None));
    let congested = Resend {
        path_loss: 0.33,
        ..Resend::EVIDENT
    };
    t.on_retransmit(at(100), ms(5), SeqNumber(0), 100, congested);
    t.set_original(SeqNumber(0), frame(0, 100));
    let mut sends = 1;
    while t.rewriting() {
        t.on_retransmit(at(100 + 100 * sends), ms(5), SeqNumber(0), 100, congested);
        sends += 1;
        assert!(sends < 100);
    }
    // 0.33^8 = 1.4e-4, 0.33^9 = 4.6e-5.
    assert_eq!(sends - 1, 9, "failures before the fallback");
}

#[test]
fn expired_after_getting_sequence_numbers_is_replaced_at_first_transmission() {
    let mut t = MessageTable::new();
    t.enqueue(at(0), frame(0, 100), meta(0, Some(10), None));
    assert_eq!(t.head_len(at(0), Duration::ZERO), Some(100));
    t.take_head(SeqNumber(0)).unwrap();
    t.enqueue(at(40), frame(1, 90), meta(1, Some(100), None));
    let rw = t.on_first_transmit(at(50), ms(10), SeqNumber(0), 100);
    assert_eq!(rw.len(), 1);
    assert_eq!(rw[0].bytes[0], 2);
    assert!(!rw[0].keep_original);
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 0,
            reason: ExpiryReason::ExpiredBeforeSend { by: Some(1) }
        }]
    );
    assert_eq!(t.stats().replaced_at_first_tx, 1);
}

#[test]
fn abandon_reports_every_queued_message() {
    let mut t = MessageTable::new();
    send(&mut t, 0, 0, meta(0, None, None), 10);
    t.enqueue(at(0), frame(1, 10), meta(1, None, None));
    t.enqueue(at(0), frame(2, 10), meta(2, Some(5), None));
    t.abandon();
    let ids: Vec<u32> = events(&mut t).iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![1, 2]);
    assert!(t.is_empty());
}

/// The table's work per message for `n` messages in flight: every other
/// slot SACKed one by one, the rest retransmitted (expired, rewritten with
/// a queued message or padding) and then everything acknowledged in ten
/// cumulative ACKs.
fn work_per_message(n: u32) -> f64 {
    let mut t = MessageTable::new();
    for i in 0..n {
        send(&mut t, 0, i * 100, meta(i, Some(100), None), 100);
    }
    for i in (0..n).step_by(2) {
        t.on_sack(SeqNumber(i * 100), SeqNumber(i * 100 + 100));
    }
    for i in 0..64 {
        t.enqueue(at(200), frame(n + i, 50), meta(n + i, Some(1000), None));
    }
    for i in (1..n).step_by(2) {
        t.on_retransmit(at(200), ms(10), SeqNumber(i * 100), 100, Resend::EVIDENT);
    }
    for k in 1..=10 {
        t.on_ack(SeqNumber(n * 100 / 10 * k), None);
    }
    assert_eq!(t.len(), t.queued_messages());
    t.work() as f64 / f64::from(n)
}

#[test]
fn work_per_message_stays_logarithmic_with_messages_in_flight() {
    // Review B6: looking up each ACKed slot's message was a linear scan
    // (O(k·n) per ACK, a lever for a peer SACKing slot by slot). The work
    // is counted, not timed: 64 times more messages in flight may cost
    // each a few more binary-search probes, never 64 times more.
    let small = work_per_message(1_000);
    let large = work_per_message(64_000);
    assert!(
        large < 2.0 * small,
        "work per message {small:.1} at 1000 in flight, {large:.1} at 64000"
    );
}

/// One step of the accounting property test: the sender's table against
/// a model of the path and of a TCP receiver (which keeps the first copy of
/// a range that arrives and reports later copies with a D-SACK).
#[derive(Debug, Clone)]
enum Op {
    /// Queue a message of `len` bytes with `life` ms (None: reliable),
    /// depending on the previous message with probability.
    Queue {
        len: usize,
        life: Option<u64>,
        dep: bool,
    },
    /// Transmit the head of the queue (gets its slot now).
    Transmit,
    /// Retransmit the `k`-th outstanding slot; `timer`: an RTO or a tail
    /// loss probe (no evidence that the receiver lacks the range; with
    /// `timer` false the sender has such evidence exactly when every
    /// earlier transmission of the slot was lost).
    Retransmit { k: usize, timer: bool },
    /// The `j`-th packet in flight arrives (or, `lost`, is dropped).
    Arrive { j: usize, lost: bool },
    /// The receiver's SACK for the `k`-th outstanding slot reaches the
    /// sender (if the receiver holds it; lost ACKs simply never come).
    Sack { k: usize },
    /// The `j`-th D-SACK the receiver sent reaches the sender (or is lost).
    Dsack { j: usize, lost: bool },
    /// Cumulative ACK of the first `n` slots (as far as the receiver holds
    /// them in order).
    Ack { n: usize },
    /// Time passes.
    Wait { ms: u64 },
    /// Messages queued from now on have priority `p` (0 before the first):
    /// the queue then gives out slots out of id order.
    Priority { p: i8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..300, proptest::option::weighted(0.8, 1u64..400), proptest::bool::weighted(0.3))
            .prop_map(|(len, life, dep)| Op::Queue { len, life, dep }),
        4 => Just(Op::Transmit),
        3 => (0usize..8, any::<bool>()).prop_map(|(k, timer)| Op::Retransmit { k, timer }),
        4 => (0usize..6, proptest::bool::weighted(0.2)).prop_map(|(j, lost)| Op::Arrive { j, lost }),
        2 => (0usize..8).prop_map(|k| Op::Sack { k }),
        2 => (0usize..4, proptest::bool::weighted(0.3)).prop_map(|(j, lost)| Op::Dsack { j, lost }),
        2 => (0usize..4).prop_map(|n| Op::Ack { n }),
        3 => (0u64..200).prop_map(|ms| Op::Wait { ms }),
        1 => (-1i8..2).prop_map(|p| Op::Priority { p }),
    ]
}

proptest! {
    /// Every queued message ends delivered (as the receiver model saw it)
    /// or reported expired, never reported twice; slots only ever carry
    /// whole messages. Reported *and* delivered happens only after a
    /// retransmission without evidence (an ACK loss looks the same as a
    /// data loss to the sender's timers: the table errs towards a report).
    #[test]
    fn every_message_is_delivered_or_reported_exactly_once(ops in proptest::collection::vec(op(), 1..240)) {
        check_accounting(ops)?;
    }
}

/// The body of the accounting property test, also run on shrunk cases
/// as plain tests (a persisted seed replays only while the strategy is
/// unchanged).
fn check_accounting(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut t = MessageTable::new();
    let mut now = 0u64;
    let mut next_id = 0u32;
    let mut seq = 0u32;
    // Slot starts and lengths, outstanding (not cumulatively ACKed).
    let mut slots: VecDeque<(u32, usize)> = VecDeque::new();
    let mut reported = BTreeSet::new();
    let mut queued = BTreeSet::new();
    // What each slot's bytes hold now in the send buffer (message id,
    // None = padding).
    let mut content: BTreeMap<u32, Option<u32>> = BTreeMap::new();
    // Packets in flight: (slot start, the message their bytes carry).
    let mut flight: Vec<(u32, Option<u32>)> = Vec::new();
    // Slots the receiver holds, and D-SACKs it sent (slot start).
    let mut held = BTreeSet::new();
    let mut dsacks: Vec<u32> = Vec::new();
    let mut delivered = BTreeSet::new();
    let mut guessed = false;
    let mut priority = 0i8;
    let id_of = |bytes: &[u8]| (bytes[0] != 0).then(|| u32::from(bytes[0]) - 1);
    let owd = ms(10);
    for o in ops {
        match o {
            Op::Priority { p } => priority = p,
            Op::Queue { len, life, dep } => {
                let m = MessageMeta {
                    priority,
                    ..meta(next_id, life, (dep && next_id > 0).then(|| next_id - 1))
                };
                if t.check(&m, len).is_ok() {
                    t.enqueue(at(now), frame(next_id, len), m);
                    queued.insert(next_id);
                    next_id += 1;
                }
            }
            Op::Transmit => {
                if let Some(len) = t.head_len(at(now), owd) {
                    let f = t.take_head(SeqNumber(seq)).unwrap();
                    content.insert(seq, id_of(&f));
                    for r in t.on_first_transmit(at(now), owd, SeqNumber(seq), len) {
                        prop_assert_eq!(r.bytes.len(), len);
                        content.insert(seq, id_of(&r.bytes));
                    }
                    flight.push((seq, content[&seq]));
                    slots.push_back((seq, len));
                    seq += len as u32;
                }
            }
            Op::Retransmit { k, timer } => {
                if let Some(&(s, len)) = slots.get(k) {
                    // Evidence (duplicate ACKs, SACK, RACK) says every
                    // earlier transmission was lost; reordering beyond
                    // RACK's window is not modelled.
                    let evidence =
                        !timer && !held.contains(&s) && flight.iter().all(|(a, _)| *a != s);
                    guessed |= !evidence;
                    for r in t.on_retransmit(
                        at(now),
                        owd,
                        SeqNumber(s),
                        len,
                        Resend {
                            evidence,
                            ..Resend::EVIDENT
                        },
                    ) {
                        // A fallback may restore other slots too.
                        let &(rs, rlen) = slots
                            .iter()
                            .find(|(a, _)| SeqNumber(*a) == r.seq)
                            .expect("a rewrite covers an outstanding slot");
                        prop_assert_eq!(r.bytes.len(), rlen);
                        if r.keep_original {
                            let orig = content[&rs].map_or(0, |i| i as u8 + 1);
                            t.set_original(r.seq, vec![orig; rlen]);
                        }
                        content.insert(rs, id_of(&r.bytes));
                    }
                    flight.push((s, content[&s]));
                }
            }
            Op::Arrive { j, lost } => {
                if j < flight.len() {
                    let (s, m) = flight.remove(j);
                    if !lost {
                        if held.insert(s) {
                            delivered.extend(m);
                        } else {
                            dsacks.push(s);
                        }
                    }
                }
            }
            Op::Sack { k } => {
                if let Some(&(s, len)) = slots.get(k).filter(|(s, _)| held.contains(s)) {
                    t.on_sack(SeqNumber(s), SeqNumber(s) + len);
                }
            }
            Op::Dsack { j, lost } => {
                if j < dsacks.len() {
                    let s = dsacks.remove(j);
                    if !lost {
                        // The slot may be cumulatively ACKed already;
                        // its length is the content's.
                        let len = slots.iter().find(|(a, _)| *a == s).map(|x| x.1);
                        let len = len.unwrap_or_else(|| {
                            content
                                .range(s + 1..)
                                .next()
                                .map_or(1, |(b, _)| (b - s) as usize)
                        });
                        t.on_dsack(SeqNumber(s), SeqNumber(s) + len);
                    }
                }
            }
            Op::Ack { n } => {
                let n = slots
                    .iter()
                    .take(n)
                    .take_while(|(s, _)| held.contains(s))
                    .count();
                if n > 0 {
                    let (s, len) = slots[n - 1];
                    slots.drain(..n);
                    t.on_ack(SeqNumber(s) + len, None);
                }
            }
            Op::Wait { ms } => now += ms,
        }
        while let Some(e) = t.poll_expired() {
            prop_assert!(reported.insert(e.id), "message {} reported twice", e.id);
            prop_assert!(queued.contains(&e.id));
        }
    }
    // The end: every D-SACK still owed arrives, every slot the receiver
    // lacks is retransmitted once more (with evidence) and arrives,
    // then everything is acknowledged and the queue drained.
    for s in std::mem::take(&mut dsacks) {
        if let Some(&(_, len)) = slots.iter().find(|(a, _)| *a == s) {
            t.on_dsack(SeqNumber(s), SeqNumber(s) + len);
        }
    }
    for &(s, len) in &slots {
        if !held.contains(&s) {
            for r in t.on_retransmit(at(now), owd, SeqNumber(s), len, Resend::EVIDENT) {
                let rs = r.seq.0;
                content.insert(rs, id_of(&r.bytes));
            }
            held.insert(s);
            delivered.extend(content[&s]);
        }
    }
    if let Some(&(s, len)) = slots.back() {
        slots.clear();
        t.on_ack(SeqNumber(s) + len, None);
    }
    t.abandon();
    while let Some(e) = t.poll_expired() {
        prop_assert!(reported.insert(e.id), "message {} reported twice", e.id);
    }
    prop_assert!(t.is_empty());
    for id in &queued {
        prop_assert!(
            delivered.contains(id) || reported.contains(id),
            "message {} neither delivered nor reported",
            id
        );
        if !guessed {
            prop_assert!(
                !(delivered.contains(id) && reported.contains(id)),
                "message {} delivered and reported (no retransmission was a guess)",
                id
            );
        }
    }
    Ok(())
}

#[test]
fn a_copy_acknowledged_after_its_own_slot_reported_it_is_not_reported_again() {
    // Shrunk by the property test above ("message 7 reported twice"; the
    // case is also in proptest-regressions, but a persisted seed replays
    // it only while the strategy is unchanged). The story: message 1's
    // lost slot is resent carrying a copy of message 7 (twice: the
    // receiver will hold the range twice); 7 then gets its own slot,
    // which is resent later with 7 expired and replaced: 7 is reported
    // Replaced there. The copy's slot is acknowledged, then 7's own slot,
    // then the D-SACK for the copy's second transmission arrives: it must
    // not report 7 (Displaced) a second time.
    let ops = vec![
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Queue {
            len: 123,
            life: Some(1),
            dep: false,
        },
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: Some(10),
            dep: true,
        },
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: Some(1),
            dep: false,
        },
        Op::Transmit,
        Op::Sack { k: 0 },
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Arrive { j: 1, lost: true },
        Op::Transmit,
        Op::Sack { k: 0 },
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Queue {
            len: 1,
            life: Some(170),
            dep: false,
        },
        Op::Wait { ms: 53 },
        Op::Arrive { j: 0, lost: false },
        Op::Queue {
            len: 1,
            life: Some(117),
            dep: true,
        },
        Op::Retransmit { k: 1, timer: false },
        Op::Retransmit { k: 1, timer: false },
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Transmit,
        Op::Ack { n: 1 },
        Op::Arrive { j: 0, lost: false },
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Arrive { j: 0, lost: false },
        Op::Wait { ms: 108 },
        Op::Retransmit { k: 5, timer: false },
        Op::Arrive { j: 0, lost: false },
        Op::Queue {
            len: 1,
            life: None,
            dep: true,
        },
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Retransmit { k: 5, timer: false },
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Arrive { j: 0, lost: false },
        Op::Arrive { j: 0, lost: false },
        Op::Ack { n: 2 },
        Op::Arrive { j: 0, lost: false },
        Op::Ack { n: 3 },
        Op::Arrive { j: 0, lost: false },
        Op::Ack { n: 1 },
        Op::Dsack { j: 0, lost: false },
    ];
    check_accounting(ops).unwrap();
}

#[test]
fn an_own_slot_expiring_while_its_copy_is_in_flight() {
    // Found by the property test (about once in 100 000 to 300 000 random
    // cases): "message 4 delivered and reported (no retransmission was a
    // guess)". Shrunk; one-way delay 10 ms, slots [0,216) message 0,
    // [216,217) 1, [217,218) 2, [218,219) 3, [219,220) 4:
    //
    //   0 ms  0 (deadline 10 ms) sent; its packet is lost. 1, 2, 3 sent.
    //         4 queued (deadline 187 ms).
    //   9 ms  evidence that the receiver lacks [0,216): it is resent; 0
    //         would arrive at 19 ms, too late, so the slot carries a
    //         trusted copy of 4 (0 reported Replaced { by: 4 }). 1 arrives.
    //         4 gets its own slot [219,220) and is sent there (live). The
    //         copy in [0,216) arrives: the receiver has 4. No ACK or SACK
    //         of it reaches the sender yet.
    // 178 ms  [217,220) is resent with evidence. 4 would arrive at 188 ms:
    //         its own slot gives it up (padding). The cumulative ACK then
    //         covers [0,216), acknowledging the trusted copy.
    //
    // The table used to report 4 Replaced when its own slot gave it up,
    // although the copy was still in flight and was then acknowledged:
    // delivered *and* reported. When the own slot gives its message up
    // while a copy is unresolved, the copy settles it (as for a carried
    // message that expires in the queue): acknowledged, delivered;
    // replaced or displaced, reported then. The slot never accounts for
    // the message again, even if a D-SACK gives it its first bytes back
    // (that D-SACK may be for a delayed original: see
    // `a_dsack_restoring_an_own_slot_does_not_give_it_its_message_back`).
    let ops = vec![
        Op::Queue {
            len: 216,
            life: Some(10),
            dep: false,
        },
        Op::Transmit,
        Op::Arrive { j: 0, lost: true },
        Op::Queue {
            len: 1,
            life: Some(10),
            dep: false,
        },
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: None,
            dep: false,
        },
        Op::Transmit,
        Op::Transmit,
        Op::Queue {
            len: 1,
            life: Some(187),
            dep: false,
        },
        Op::Wait { ms: 9 },
        Op::Retransmit { k: 0, timer: false },
        Op::Arrive { j: 0, lost: false },
        Op::Transmit,
        Op::Arrive { j: 2, lost: false },
        Op::Wait { ms: 169 },
    ];
    check_accounting(ops).unwrap();
}

/// Message 0's slot [1000,1100) is resent carrying a trusted copy of 9
/// (deadline 350 ms); 9 then gets its own slot [1100,1150), sent at 150
/// ms, and at 400 ms (9 dead) that slot is resent, by a timer or not,
/// with padding, before the sender has heard anything of the copy.
fn own_slot_given_up_with_copy_in_flight(evidence: bool) -> MessageTable {
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
    t.enqueue(at(150), frame(9, 50), meta(9, Some(200), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw[0].bytes[0], 10, "slot 0 carries 9");
    t.set_original(SeqNumber(1000), frame(0, 100));
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 0,
            reason: ExpiryReason::Replaced { by: Some(9) }
        }]
    );
    assert_eq!(t.head_len(at(150), ms(20)), Some(50));
    t.take_head(SeqNumber(1100)).unwrap();
    assert!(t
        .on_first_transmit(at(150), ms(20), SeqNumber(1100), 50)
        .is_empty());
    let how = Resend {
        evidence,
        ..Resend::EVIDENT
    };
    let rw = t.on_retransmit(at(400), ms(20), SeqNumber(1100), 50, how);
    assert!(rw[0].bytes.iter().all(|&b| b == 0), "9's own slot padded");
    t.set_original(SeqNumber(1100), frame(9, 50));
    assert!(
        events(&mut t).is_empty(),
        "9's copy in flight settles it, not its own slot"
    );
    t
}

#[test]
fn a_copy_in_flight_settles_a_message_its_own_slot_gave_up() {
    // The copy acknowledged: delivered, never reported.
    let mut t = own_slot_given_up_with_copy_in_flight(true);
    t.on_ack(SeqNumber(1100), None);
    t.on_ack(SeqNumber(1150), None);
    assert!(events(&mut t).is_empty());
    assert!(t.is_empty());
    // The copy acknowledged, then a D-SACK for its slot: the receiver held
    // the range already, the copy did not stay. Reported once.
    let mut t = own_slot_given_up_with_copy_in_flight(true);
    t.on_ack(SeqNumber(1100), None);
    t.on_dsack(SeqNumber(1000), SeqNumber(1100));
    t.on_ack(SeqNumber(1150), None);
    t.on_dsack(SeqNumber(1000), SeqNumber(1100));
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 9,
            reason: ExpiryReason::Displaced
        }]
    );
    assert!(t.is_empty());
    // The copy lost too and replaced by padding (9 is dead): reported
    // then, once, whatever the own slot does later.
    let mut t = own_slot_given_up_with_copy_in_flight(true);
    let rw = t.on_retransmit(at(400), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert!(rw[0].bytes.iter().all(|&b| b == 0));
    assert!(t
        .on_retransmit(at(450), ms(20), SeqNumber(1100), 50, Resend::EVIDENT)
        .is_empty());
    t.on_ack(SeqNumber(1150), None);
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 9,
            reason: ExpiryReason::Replaced { by: None }
        }]
    );
    assert!(t.is_empty());
}

#[test]
fn a_dsack_restoring_an_own_slot_does_not_give_it_its_message_back() {
    // The own slot was resent by a timer (its first transmission may
    // still be on its way). The padding arrives first, then the delayed
    // original: the receiver keeps the padding and D-SACKs the original.
    // The D-SACK looks the same as one for a late duplicate of the
    // padding, so the table gives the slot its first bytes back (that is
    // what it holds as far as the fallback goes) — but that must not make
    // the slot account for 9 again: when the copy is lost as well, 9 is
    // reported (a fix that let the copy take over the report and judged
    // the own slot by its restored content lost 9 silently here).
    let mut t = own_slot_given_up_with_copy_in_flight(false);
    t.on_dsack(SeqNumber(1100), SeqNumber(1150));
    assert!(events(&mut t).is_empty());
    let rw = t.on_retransmit(at(400), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert!(rw[0].bytes.iter().all(|&b| b == 0), "the copy goes");
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 9,
            reason: ExpiryReason::Replaced { by: None }
        }]
    );
    // Nothing more, whatever happens to either slot.
    t.on_dsack(SeqNumber(1100), SeqNumber(1150));
    let rw = t.on_retransmit(at(450), ms(20), SeqNumber(1100), 50, Resend::EVIDENT);
    assert!(rw[0].bytes.iter().all(|&b| b == 0), "padded again");
    t.on_ack(SeqNumber(1150), None);
    t.on_dsack(SeqNumber(1000), SeqNumber(1100));
    assert!(events(&mut t).is_empty());
    assert!(t.is_empty());
}

#[test]
fn a_dsack_of_an_acknowledged_copy_reports_a_message_its_own_slot_gave_up() {
    // The copy in slot 0 is SACKed while 9 waits for its own slot, so the
    // own slot gives 9 up later without a report (the copy stands for
    // it). Then a D-SACK for slot 0 says the receiver held that range
    // already (a delayed original arrived first and was SACKed): the copy
    // did not stay. 9's own slot is still in the table but no longer
    // carries 9, so 9 is reported (it used to be lost silently).
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
    t.enqueue(at(150), frame(9, 50), meta(9, Some(200), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw[0].bytes[0], 10, "slot 0 carries 9");
    t.set_original(SeqNumber(1000), frame(0, 100));
    events(&mut t);
    t.on_sack(SeqNumber(1000), SeqNumber(1100));
    assert_eq!(t.head_len(at(150), ms(20)), Some(50));
    t.take_head(SeqNumber(1100)).unwrap();
    assert!(t
        .on_first_transmit(at(150), ms(20), SeqNumber(1100), 50)
        .is_empty());
    let rw = t.on_retransmit(at(400), ms(20), SeqNumber(1100), 50, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    t.set_original(SeqNumber(1100), frame(9, 50));
    assert!(events(&mut t).is_empty(), "the acknowledged copy stands");
    t.on_dsack(SeqNumber(1000), SeqNumber(1100));
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 9,
            reason: ExpiryReason::Displaced
        }]
    );
    t.on_ack(SeqNumber(1150), None);
    assert!(events(&mut t).is_empty());
    assert!(t.is_empty());
}

#[test]
fn an_own_slot_expiring_before_its_first_send_defers_to_an_acknowledged_copy() {
    // The other order: the copy is acknowledged while its message still
    // waits in the queue, and the message's own slot expires between
    // getting sequence numbers and its first transmission. The copy
    // stands for the message (as on retransmission): no report then, and
    // one (Displaced) when a D-SACK shows the copy did not stay.
    let mut t = MessageTable::new();
    send(&mut t, 0, 1000, meta(0, Some(100), None), 100);
    t.enqueue(at(0), frame(1, 50), meta(1, Some(200), None));
    let rw = t.on_retransmit(at(150), ms(20), SeqNumber(1000), 100, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    t.set_original(SeqNumber(1000), frame(0, 100));
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 0,
            reason: ExpiryReason::Replaced { by: Some(1) }
        }]
    );
    t.on_ack(SeqNumber(1100), None);
    assert_eq!(t.head_len(at(150), ms(20)), Some(50));
    t.take_head(SeqNumber(1100)).unwrap();
    // Sent at 190 ms: arrives at 210 ms, after its deadline (200 ms).
    let rw = t.on_first_transmit(at(190), ms(20), SeqNumber(1100), 50);
    assert_eq!(rw.len(), 1);
    assert!(
        events(&mut t).is_empty(),
        "its acknowledged copy stands for it"
    );
    t.on_ack(SeqNumber(1150), None);
    t.on_dsack(SeqNumber(1000), SeqNumber(1100));
    assert_eq!(
        events(&mut t),
        vec![ExpiredMessage {
            id: 1,
            reason: ExpiryReason::Displaced
        }]
    );
    assert!(t.is_empty());
}

#[test]
fn a_queued_message_is_judged_by_the_arrival_of_its_last_byte() {
    // 20 ms one way, 40 ms of life: a 1000-byte message arrives in time;
    // a 30 000-byte one at 1 MB/s would end 28.5 ms after its first
    // segment (1500 bytes go at once), at 48.5 ms: dead before it starts.
    let mut t = MessageTable::new();
    let m = meta(1, Some(40), None);
    t.check(&m, 30_000).unwrap();
    t.enqueue(at(0), frame(1, 30_000), m);
    let m = meta(2, Some(40), None);
    t.check(&m, 1_000).unwrap();
    t.enqueue(at(0), frame(2, 1_000), m);
    // Judged by its start (the thesis's test), the large one is live.
    assert_eq!(t.head_len_paced(at(0), ms(20), 1_500, 0.0), Some(30_000));
    // By its last byte, it is dropped unsent and the small one is next.
    assert_eq!(t.head_len_paced(at(0), ms(20), 1_500, 1_000.0), Some(1_000));
    assert_eq!(t.stats().not_sent, 1);
    let ev = events(&mut t);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].id, 1);
    // The small one: 0 bytes beyond the first segment, live at 20 ms.
    assert_eq!(t.head_len_paced(at(0), ms(20), 1_500, 1_000.0), Some(1_000));
}

/// Give slots to everything queued (nothing expires at `now`), one after
/// the other from sequence number 0; the ids in the order they got slots.
fn drain_order(t: &mut MessageTable, now: u64) -> Vec<u32> {
    let mut seq = 0u32;
    let mut order = Vec::new();
    while let Some(len) = t.head_len(at(now), Duration::ZERO) {
        let f = t.take_head(SeqNumber(seq)).unwrap();
        assert_eq!(f.len(), len);
        order.push(u32::from(f[0]) - 1);
        seq += len as u32;
    }
    order
}

fn prio(id: u32, p: i8) -> MessageMeta {
    MessageMeta {
        priority: p,
        ..meta(id, Some(1_000), None)
    }
}

#[test]
fn the_most_urgent_queued_message_gets_the_next_slot() {
    // A congested connection: P-frames (priority 0) and audio-less data
    // (-1) wait; an I-frame (priority 1) queued last goes first, then the
    // rest by priority, oldest first within one priority.
    let mut t = MessageTable::new();
    for (id, p) in [(0, 0), (1, -1), (2, 0), (3, -1), (4, 1), (5, 0), (6, 1)] {
        t.enqueue(at(0), frame(id, 10), prio(id, p));
    }
    assert_eq!(t.head_len_peek(), Some(10));
    assert_eq!(drain_order(&mut t, 0), [4, 6, 0, 2, 5, 1, 3]);
    assert!(events(&mut t).is_empty());
}

#[test]
fn one_priority_is_the_order_of_queueing() {
    for p in [-128, 0, 5, 127] {
        let mut t = MessageTable::new();
        for id in 0..20 {
            t.enqueue(at(0), frame(id, 1 + id as usize), prio(id, p));
        }
        assert_eq!(drain_order(&mut t, 0), (0..20).collect::<Vec<_>>());
    }
}

#[test]
fn an_ordered_substream_keeps_its_order_whatever_the_priorities() {
    // Ordered (not replaceable) messages on sub-stream 1 with rising
    // priority: the urgent one waits for its predecessors on the chain,
    // which go first because of it; the unordered message on sub-stream 0
    // comes after the chain.
    let mut t = MessageTable::new();
    let ordered = |id: u32, p: i8| MessageMeta {
        replaceable: false,
        substream: 1,
        lifetime: None,
        ..prio(id, p)
    };
    t.enqueue(at(0), frame(0, 10), ordered(0, -1));
    t.enqueue(at(0), frame(1, 10), prio(1, 0));
    t.enqueue(at(0), frame(2, 10), ordered(2, 0));
    t.enqueue(at(0), frame(3, 10), ordered(3, 1));
    assert_eq!(drain_order(&mut t, 0), [0, 2, 3, 1]);
}

#[test]
fn a_dependency_goes_before_its_more_urgent_dependent() {
    let mut t = MessageTable::new();
    t.enqueue(at(0), frame(0, 10), prio(0, -1));
    t.enqueue(at(0), frame(1, 10), prio(1, 0));
    let dependent = MessageMeta {
        depends_on: Some(0),
        ..prio(2, 1)
    };
    t.enqueue(at(0), frame(2, 10), dependent);
    assert_eq!(drain_order(&mut t, 0), [0, 2, 1]);
}

#[test]
fn an_expired_urgent_message_is_reported_not_sent() {
    // The liveness test applies to a message chosen by its priority from
    // behind the head as it does to the head (thesis §4.2, before
    // sequence numbers).
    let mut t = MessageTable::new();
    t.enqueue(at(0), frame(0, 10), prio(0, 0));
    t.enqueue(
        at(0),
        frame(1, 10),
        MessageMeta {
            lifetime: Some(ms(5)),
            ..prio(1, 1)
        },
    );
    t.enqueue(at(0), frame(2, 10), prio(2, 1));
    assert_eq!(drain_order(&mut t, 10), [2, 0]);
    assert_eq!(
        events(&mut t),
        [ExpiredMessage {
            id: 1,
            reason: ExpiryReason::NotSent
        }]
    );
    assert_eq!(t.stats().not_sent, 1);
}

#[test]
fn slots_out_of_id_order_are_still_found_and_accounted() {
    // Priorities give slots out of id order: an expired slot is still
    // replaced (reported once, by id), and ACKs clear everything.
    let mut t = MessageTable::new();
    t.enqueue(
        at(0),
        frame(0, 10),
        MessageMeta {
            lifetime: Some(ms(20)),
            ..prio(0, 0)
        },
    );
    t.enqueue(
        at(0),
        frame(1, 10),
        MessageMeta {
            lifetime: Some(ms(20)),
            ..prio(1, 1)
        },
    );
    assert_eq!(drain_order(&mut t, 0), [1, 0]);
    for s in [0u32, 10] {
        assert!(t
            .on_first_transmit(at(0), Duration::ZERO, SeqNumber(s), 10)
            .is_empty());
    }
    // Message 1 (slot 0..10) has expired by its retransmission.
    let rw = t.on_retransmit(at(30), ms(1), SeqNumber(0), 10, Resend::EVIDENT);
    assert_eq!(rw.len(), 1);
    assert_eq!(
        events(&mut t),
        [ExpiredMessage {
            id: 1,
            reason: ExpiryReason::Replaced { by: None }
        }]
    );
    t.on_ack(SeqNumber(20), None);
    assert!(t.is_empty());
    assert!(events(&mut t).is_empty());
}

proptest! {
    /// Whatever the priorities, every queued message gets exactly one
    /// slot; ordered messages of a sub-stream get theirs in order; a
    /// dependency gets its slot before its dependent; each slot goes to a
    /// message of the highest priority waiting or to one that must go
    /// before such a message; with one priority the order is the order of
    /// queueing.
    #[test]
    fn slots_follow_priorities_within_the_ordering_rules(
        msgs in proptest::collection::vec((-2i8..3, any::<bool>(), 0u16..3, proptest::option::of(0usize..8)), 1..60),
        one_priority in any::<bool>(),
    ) {
        let mut t = MessageTable::new();
        let mut latest: BTreeMap<u16, u32> = BTreeMap::new();
        let mut metas = Vec::new();
        for (i, &(p, ordered, sub, dep)) in msgs.iter().enumerate() {
            let id = i as u32;
            // A dependency on an earlier message, non-decreasing per sub-stream.
            let depends_on = dep
                .and_then(|back| id.checked_sub(1 + back as u32))
                .filter(|d| latest.get(&sub).is_none_or(|l| d >= l));
            if let Some(d) = depends_on {
                latest.insert(sub, d);
            }
            let m = MessageMeta {
                id,
                lifetime: None,
                depends_on,
                replaceable: !ordered,
                substream: sub,
                priority: if one_priority { 1 } else { p },
            };
            prop_assert!(t.check(&m, 5).is_ok());
            t.enqueue(at(0), vec![1 + id as u8; 5], m);
            metas.push(m);
        }
        let mut order: Vec<u32> = Vec::new();
        let mut seq = 0u32;
        while let Some(len) = t.head_len(at(0), Duration::ZERO) {
            let waiting: Vec<u32> = (0..metas.len() as u32).filter(|i| !order.contains(i)).collect();
            let top = waiting.iter().map(|&i| metas[i as usize].priority).max().unwrap();
            let f = t.take_head(SeqNumber(seq)).unwrap();
            let id = u32::from(f[0]) - 1;
            let m = metas[id as usize];
            // Either of the top priority, or what one of the top priority
            // (transitively) has to wait for: an earlier message.
            prop_assert!(
                m.priority == top || waiting.iter().any(|&w| w > id && metas[w as usize].priority == top),
                "{id} (priority {}) went while {top} waited", m.priority
            );
            order.push(id);
            seq += len as u32;
        }
        prop_assert_eq!(order.len(), metas.len());
        let pos = |id: u32| order.iter().position(|&x| x == id).unwrap();
        for m in &metas {
            if let Some(d) = m.depends_on {
                prop_assert!(pos(d) < pos(m.id), "{} before its dependency {}", m.id, d);
            }
            if !m.replaceable {
                for e in metas.iter().filter(|e| e.id < m.id && !e.replaceable && e.substream == m.substream) {
                    prop_assert!(pos(e.id) < pos(m.id), "ordered {} before {}", m.id, e.id);
                }
            }
        }
        if one_priority {
            prop_assert_eq!(order, (0..metas.len() as u32).collect::<Vec<_>>());
        }
        prop_assert!(events(&mut t).is_empty());
    }
}
