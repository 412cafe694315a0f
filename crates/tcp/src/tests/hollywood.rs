//! TCP Hollywood in the engine, scripted over the `Pair` harness: one
//! scenario per rule of thesis §4.2 (inconsistent retransmissions) and §4.3
//! (out-of-order delivery), plus the promise that the receiver's wire image
//! is standard TCP's.

use crate::config::Config;
use crate::conn::Event;
use crate::endpoint::{ConnHandle, EndpointEvent};
use crate::hollywood::{ExpiryReason, MessageMeta};
use crate::pair::{Dir, Pair, Verdict};
use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// A message's bytes: non-zero, distinct per id (frames never contain 0x00
/// except as delimiters; these stand in for framed messages).
fn frame(id: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| 1 + ((id as usize * 31 + i) % 250) as u8)
        .collect()
}

fn meta(id: u32, lifetime_ms: u64, depends_on: Option<u32>) -> MessageMeta {
    MessageMeta {
        id,
        lifetime: Some(Duration::from_millis(lifetime_ms)),
        depends_on,
        replaceable: true,
    }
}

struct Run {
    p: Pair,
    ha: ConnHandle,
    hb: ConnHandle,
    /// Slot start of each message (sequence number).
    slots: Vec<SeqNumber>,
    /// Segments the receiver got: (seq, payload).
    got: Vec<(SeqNumber, Vec<u8>)>,
}

impl Run {
    /// Sender: IR on; receiver: out-of-order delivery on. One-way delay 50 ms.
    fn new(seed: u64) -> Run {
        Run::with(seed, true, true)
    }

    fn with(seed: u64, ir: bool, ooo: bool) -> Run {
        let mut p = Pair::new(
            Config::hollywood(ir, false),
            Config::hollywood(false, ooo),
            seed,
        );
        // 100 ms RTT: when the loss is detected, messages sent within the
        // last RTT are still unacknowledged and live (replacement candidates).
        p.ab.delay = 50 * MS;
        p.ba.delay = 50 * MS;
        let (ha, hb) = p.connect();
        Run {
            p,
            ha,
            hb,
            slots: Vec::new(),
            got: Vec::new(),
        }
    }

    fn send(&mut self, id: u32, len: usize, lifetime_ms: u64, dep: Option<u32>) {
        let seq = self.p.ca(self.ha).snd_una() + self.p.ca(self.ha).send_buffered();
        let now = self.p.now;
        self.p
            .ca(self.ha)
            .send_message(now, &frame(id, len), meta(id, lifetime_ms, dep))
            .expect("queued");
        self.slots.push(seq);
    }

    fn drain(&mut self) {
        while let Some(s) = self.p.cb(self.hb).recv_segment() {
            self.got.push((s.seq, s.payload));
        }
    }

    fn run(&mut self, d: Duration) {
        let end = self.p.now + d;
        while self.p.now < end {
            let step = (end - self.p.now).min(MS);
            self.p.run_for(step);
            self.drain();
        }
    }

    /// Every version of the bytes the receiver got at `seq`.
    fn versions_at(&self, seq: SeqNumber) -> Vec<&Vec<u8>> {
        self.got
            .iter()
            .filter(|(s, _)| *s == seq)
            .map(|(_, p)| p)
            .collect()
    }

    fn expired(&self) -> Vec<(u32, ExpiryReason)> {
        self.p
            .a_events
            .iter()
            .filter_map(|(_, e)| match e {
                EndpointEvent::Conn {
                    event: Event::Expired(x),
                    ..
                } => Some((x.id, x.reason)),
                _ => None,
            })
            .collect()
    }
}

/// Drop the first transmission of the data segment starting at `seq`.
fn drop_first_at(p: &mut Pair, seq: Rc<RefCell<Option<SeqNumber>>>) {
    let done = Rc::new(RefCell::new(false));
    p.ab.verdict = Some(Box::new(move |pi| {
        if !*done.borrow() && Some(pi.tcp.seq) == *seq.borrow() && pi.len > 0 {
            *done.borrow_mut() = true;
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
}

#[test]
fn expired_message_is_replaced_with_same_length_and_padding() {
    let mut r = Run::new(1);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    // Message 2 is 120 bytes; later ones 100: a replacement needs 20 bytes of
    // zero padding. Lifetime 80 ms: live when first sent (one-way 50 ms),
    // dead by the fast retransmit (3 messages + 1 RTT = 160 ms later).
    for id in 0..10u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        let len = if id == 2 { 120 } else { 100 };
        r.send(id, len, if id == 2 { 80 } else { 300 }, None);
        r.run(20 * MS);
    }
    r.run(500 * MS);
    let slot = r.slots[2];
    let v = r.versions_at(slot);
    assert_eq!(
        v.len(),
        1,
        "only the retransmission arrived at message 2's slot"
    );
    let rtx = v[0];
    assert_eq!(
        rtx.len(),
        120,
        "inconsistent retransmission has the original's length"
    );
    assert_ne!(rtx[..], frame(2, 120)[..], "different content");
    assert!(
        rtx[100..].iter().all(|&b| b == 0),
        "zero padding after the 100-byte replacement"
    );
    let replacement_id = (3..10)
        .find(|&id| rtx[..100] == frame(id, 100)[..])
        .expect("a whole queued message");
    assert!(r.expired().contains(&(
        2,
        ExpiryReason::Replaced {
            by: Some(replacement_id)
        }
    )));
    assert!(r.p.ca(r.ha).hollywood_stats().ir_sent >= 1);
    r.p.check_segmentation(Dir::AtoB);
}

#[test]
fn live_message_is_retransmitted_unchanged() {
    // Lifetime 500 ms: the retransmission arrives in time (thesis Fig. 5.6:
    // no wrongly triggered replacement).
    let mut r = Run::new(2);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    for id in 0..10u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        r.send(id, 100, 500, None);
        r.run(20 * MS);
    }
    r.run(500 * MS);
    let v = r.versions_at(r.slots[2]);
    assert_eq!(v, vec![&frame(2, 100)]);
    assert_eq!(r.p.ca(r.ha).hollywood_stats().ir_sent, 0);
    assert!(r.expired().is_empty());
}

#[test]
fn dependency_keeps_iframe_alive() {
    let mut r = Run::new(3);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    // Message 2 is an I-frame with a short lifetime; 3..9 depend on it.
    for id in 0..10u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        let dep = if id > 2 { Some(2) } else { None };
        let life = if id == 2 { 80 } else { 1000 };
        r.send(id, 100, life, dep);
        r.run(20 * MS);
    }
    r.run(500 * MS);
    assert_eq!(
        r.versions_at(r.slots[2]),
        vec![&frame(2, 100)],
        "the I-frame itself was retransmitted"
    );
    assert!(r.p.ca(r.ha).hollywood_stats().kept_for_dependency >= 1);
}

#[test]
fn fragment_rule_retransmits_fragments_as_they_were() {
    let mut r = Run::new(4);
    // A 3000-byte message spans three segments; drop the middle one.
    r.send(0, 100, 1000, None);
    r.run(20 * MS);
    let start = r.p.ca(r.ha).snd_nxt();
    let mss = r.p.ca(r.ha).negotiated().smss;
    let middle = start + mss;
    let target = Rc::new(RefCell::new(Some(middle)));
    drop_first_at(&mut r.p, target);
    r.send(1, 3000, 80, None);
    r.run(20 * MS);
    for id in 2..8u32 {
        r.send(id, 100, 1000, None);
        r.run(20 * MS);
    }
    r.run(500 * MS);
    let v = r.versions_at(middle);
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0][..],
        frame(1, 3000)[mss..2 * mss],
        "the fragment as it was"
    );
    assert_eq!(r.p.ca(r.ha).hollywood_stats().ir_sent, 0);
}

#[test]
fn tail_loss_without_candidate_retransmits_original_after_rto() {
    let mut r = Run::new(5);
    for id in 0..3u32 {
        r.send(id, 100, 1000, None);
        r.run(20 * MS);
    }
    // The last message is lost; nothing follows, so no duplicate ACKs: the
    // RTO path (with RACK-TLP the loss probe, capped at the RTO deadline
    // for a lone segment, takes the RTO's place, RFC 8985 §7.2). It is
    // expired by then and there is no other message.
    let target = Rc::new(RefCell::new(Some(r.p.ca(r.ha).snd_nxt())));
    drop_first_at(&mut r.p, target);
    r.send(3, 100, 80, None);
    r.run(2000 * MS);
    let st = r.p.ca(r.ha).stats().clone();
    assert!(st.rto_events + st.tlp_probes >= 1, "{st:?}");
    assert_eq!(r.versions_at(r.slots[3]), vec![&frame(3, 100)]);
    assert!(r.p.ca(r.ha).hollywood_stats().ir_no_candidate >= 1);
}

#[test]
fn rto_path_replaces_expired_message() {
    let mut r = Run::new(6);
    for id in 0..3u32 {
        r.send(id, 100, 1000, None);
        r.run(20 * MS);
    }
    // Black-hole the path for 150 ms: everything sent then is lost and no
    // ACK comes back, so the RTO fires; by then message 3 is expired and
    // later, live messages can take its slot.
    let until = r.p.now + 150 * MS;
    let clock = Rc::new(RefCell::new(r.p.now));
    let c2 = clock.clone();
    r.p.ab.verdict = Some(Box::new(move |_| {
        if *c2.borrow() < until {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    }));
    for id in 3..30u32 {
        r.send(id, 100, if id == 3 { 80 } else { 2000 }, None);
        r.run(20 * MS);
        *clock.borrow_mut() = r.p.now;
    }
    r.run(3000 * MS);
    let st = r.p.ca(r.ha).stats().clone();
    assert!(st.rto_events >= 1, "{st:?}");
    assert!(r.p.ca(r.ha).hollywood_stats().ir_sent >= 1);
    assert_ne!(r.versions_at(r.slots[3])[0][..], frame(3, 100)[..]);
    r.p.check_segmentation(Dir::AtoB);
}

#[test]
fn dsack_reports_spurious_rewrite() {
    let mut r = Run::new(7);
    // Delay (do not drop) message 2 by 100 ms: loss detection (RACK's
    // reordering timer 125 ms after sending, or three duplicate ACKs 160 ms
    // after) triggers a fast retransmission, which replaces the expired
    // message; then the original arrives first (150 ms after sending) and
    // the receiver reports the replacement as a D-SACK.
    let target = Rc::new(RefCell::new(None));
    let t2 = target.clone();
    let done = Rc::new(RefCell::new(false));
    r.p.ab.verdict = Some(Box::new(move |pi| {
        if !*done.borrow() && Some(pi.tcp.seq) == *t2.borrow() && pi.len > 0 {
            *done.borrow_mut() = true;
            return Verdict::Delay(100 * MS);
        }
        Verdict::Pass
    }));
    for id in 0..12u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        r.send(id, 100, if id == 2 { 80 } else { 300 }, None);
        r.run(20 * MS);
    }
    r.run(1000 * MS);
    let hs = *r.p.ca(r.ha).hollywood_stats();
    assert!(hs.ir_sent >= 1, "{hs:?}");
    assert!(hs.dsack_spurious_rewrites >= 1, "{hs:?}");
    let v = r.versions_at(r.slots[2]);
    assert_eq!(
        v[0][..],
        frame(2, 100)[..],
        "the delayed original arrived first"
    );
}

/// thesis §4.3: "ACKs (and SACK blocks ...) are generated in exactly the
/// same way as standard TCP". Same seed, same faults, receiver with and
/// without out-of-order delivery: every packet the receiver sends is the same.
#[test]
fn ooo_receiver_acks_are_byte_identical_to_standard() {
    let run = |ooo: bool| {
        let mut p = Pair::new(
            Config::hollywood(false, false),
            Config::hollywood(false, ooo),
            11,
        );
        p.ab.loss = 0.05;
        p.ab.reorder = 0.05;
        p.ab.reorder_delay = 30 * MS;
        p.ab.dup = 0.02;
        let (ha, hb) = p.connect();
        let mut seen = Vec::new();
        for id in 0..300u32 {
            let now = p.now;
            p.ca(ha)
                .send_message(now, &frame(id, 160), meta(id, 1000, None))
                .expect("queued");
            let end = p.now + 20 * MS;
            while p.now < end {
                p.run_for(MS);
                // Both receivers consume eagerly, as an application would.
                let c = p.cb(hb);
                if ooo {
                    while let Some(s) = c.recv_segment() {
                        seen.push(s.payload.len());
                    }
                } else {
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = c.recv(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        seen.push(n);
                    }
                }
            }
        }
        p.run_for(Duration::from_secs(5));
        let acks: Vec<_> = p.sent(Dir::BtoA).map(|t| (t.time, t.tcp, t.len)).collect();
        (acks, p.cb(hb).ooo_stats().out_of_order)
    };
    let (std_acks, _) = run(false);
    let (ooo_acks, ooo_count) = run(true);
    assert!(
        ooo_count > 0,
        "the scenario must exercise out-of-order arrival"
    );
    assert_eq!(std_acks.len(), ooo_acks.len());
    if let Some(i) = (0..std_acks.len()).find(|&i| std_acks[i] != ooo_acks[i]) {
        panic!(
            "first difference at ACK {i}:\n standard: {:?}\n ooo:      {:?}",
            std_acks[i], ooo_acks[i]
        );
    }
}

#[test]
fn ooo_delivers_segments_ahead_of_a_hole() {
    let mut r = Run::with(8, false, true);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    for id in 0..6u32 {
        if id == 1 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        r.send(id, 100, 1000, None);
        r.run(20 * MS);
    }
    r.run(300 * MS);
    // Messages 2..5 arrived while 1 was missing and were handed over at once.
    let arrived_before_repair = r.got.iter().take_while(|(s, _)| *s != r.slots[1]).count();
    assert!(arrived_before_repair >= 5, "{arrived_before_repair}");
    assert!(r.p.cb(r.hb).ooo_stats().out_of_order >= 4);
    // The repair itself arrives later and is handed over too.
    assert_eq!(r.versions_at(r.slots[1]), vec![&frame(1, 100)]);
    let _ = Instant::ZERO;
}
