//! TCP Hollywood in the engine, scripted over the `Pair` harness: one
//! scenario per rule of thesis §4.2 (inconsistent retransmissions) and §4.3
//! (out-of-order delivery), plus the promise that the receiver's wire image
//! is standard TCP's.

use crate::config::Config;
use crate::conn::Event;
use crate::endpoint::{ConnHandle, EndpointEvent};
use crate::hollywood::{ExpiryReason, MessageMeta};
use crate::pair::{Dir, Pair, Verdict};
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
        substream: 0,
        priority: 0,
    }
}

struct Run {
    p: Pair,
    ha: ConnHandle,
    hb: ConnHandle,
    /// Length of each message sent, by id.
    lens: Vec<usize>,
    /// Segments the receiver got: (seq, payload).
    got: Vec<(SeqNumber, Vec<u8>)>,
}

impl Run {
    /// Sender: IR on; receiver: out-of-order delivery on. One-way delay 50 ms.
    fn new(seed: u64) -> Run {
        Run::with(seed, true, true)
    }

    fn with(seed: u64, ir: bool, ooo: bool) -> Run {
        Run::with_config(seed, Config::hollywood(ir, false), ooo)
    }

    fn with_config(seed: u64, sender: Config, ooo: bool) -> Run {
        let mut p = Pair::new(sender, Config::hollywood(false, ooo), seed);
        // 100 ms RTT: when the loss is detected, messages sent within the
        // last RTT are still unacknowledged and live (replacement candidates).
        p.ab.delay = 50 * MS;
        p.ba.delay = 50 * MS;
        let (ha, hb) = p.connect();
        Run {
            p,
            ha,
            hb,
            lens: Vec::new(),
            got: Vec::new(),
        }
    }

    fn send(&mut self, id: u32, len: usize, lifetime_ms: u64, dep: Option<u32>) {
        assert_eq!(id as usize, self.lens.len(), "ids in order from 0");
        let now = self.p.now;
        self.p
            .ca(self.ha)
            .send_message(now, &frame(id, len), meta(id, lifetime_ms, dep))
            .expect("queued");
        self.lens.push(len);
        self.p.flush();
    }

    /// The slot of message `id`: where its first transmission started,
    /// from the sender's packet trace. `None`: it never got one (dropped
    /// before sequence numbers, or carried in another message's slot).
    fn slot_of(&self, id: u32) -> Option<SeqNumber> {
        let f = frame(id, self.lens[id as usize]);
        let mut high: Option<SeqNumber> = None;
        for t in self.p.sent(Dir::AtoB) {
            if t.len == 0 {
                continue;
            }
            let new = high.is_none_or(|h| t.tcp.seq >= h);
            if new && t.payload.len() <= f.len() && f.starts_with(&t.payload) {
                return Some(t.tcp.seq);
            }
            let end = t.tcp.seq + t.len;
            high = Some(high.map_or(end, |h| h.max(end)));
        }
        None
    }

    /// Every stream position at which message `id`'s bytes were sent.
    fn positions_of(&self, id: u32) -> Vec<SeqNumber> {
        let f = frame(id, self.lens[id as usize]);
        let mut v: Vec<SeqNumber> = self
            .p
            .sent(Dir::AtoB)
            .filter(|t| t.len >= f.len() && t.payload.starts_with(&f))
            .map(|t| t.tcp.seq)
            .collect();
        v.dedup();
        v
    }

    /// Message ids (whole frames) found in what the receiver got.
    fn received_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = (0..self.lens.len() as u32)
            .filter(|&id| {
                let f = frame(id, self.lens[id as usize]);
                self.got.iter().any(|(_, p)| p.starts_with(&f))
            })
            .collect();
        ids.dedup();
        ids
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

/// A sender whose congestion window holds two 1000-byte messages, so that
/// the application's messages wait in the message queue.
/// A sender that the congestion window holds back (two segments), so
/// that messages wait in the queue. Without the live-stream window: it
/// would open the window to what the application offers
/// (`the_live_window_lets_a_burst_offered_within_a_round_trip_go_at_once`).
fn queue_limited(seed: u64) -> Run {
    let mut c = Config::hollywood(true, false);
    c.initial_cwnd_segments = 2;
    c.hollywood.live_window = false;
    Run::with_config(seed, c, true)
}

#[test]
fn the_live_window_lets_a_burst_offered_within_a_round_trip_go_at_once() {
    // The same two-segment initial window, with the live-stream window
    // (`crate::live`): eight messages offered at once all leave in the
    // first round trip (the floor is what was offered over the last SRTT,
    // × 5/4), and none expires in the queue. Without it, six wait a round
    // trip for ACKs and the ones with a 90 ms lifetime die there. Messages
    // that can wait a round trip (5 s) do not make the floor.
    for (live, lifetime, sent_at_once) in [(true, 90, 8), (false, 90, 2), (true, 5000, 2)] {
        let mut c = Config::hollywood(true, false);
        c.initial_cwnd_segments = 2;
        c.hollywood.live_window = live;
        let mut r = Run::with_config(40, c, true);
        for id in 0..8u32 {
            r.send(id, 1000, lifetime, None);
        }
        r.run(MS);
        let conn = r.p.ca(r.ha);
        let what = format!("live {live}, lifetime {lifetime} ms");
        assert_eq!(conn.queued_messages(), 8 - sent_at_once, "{what}");
        assert_eq!(conn.live_window() > 0, sent_at_once == 8, "{what}");
        r.run(1000 * MS);
        let not_sent = r
            .expired()
            .iter()
            .filter(|(_, why)| *why == ExpiryReason::NotSent)
            .count();
        assert_eq!(not_sent == 0, live, "{what}: {:?}", r.expired());
        assert_eq!(r.received_ids().len() + not_sent, 8, "{what}");
    }
}

#[test]
fn the_live_window_closes_when_the_path_queues() {
    // A stream that offers 4 Mb/s into a 1 Mb/s bottleneck with a deep
    // queue: the RTT rises more than an eighth above its minimum, the gate
    // closes, and the congestion controller's window is all the sender
    // gets (`crate::live`): congestion is answered as standard TCP does.
    let mut c = Config::hollywood(true, false);
    c.hollywood.live_window = true;
    let mut r = Run::with_config(41, c, true);
    r.p.ab.rate_bps = Some(1_000_000);
    r.p.ab.queue_limit = 1 << 20;
    let mut opened = false;
    let mut closed_at = None;
    for id in 0..400u32 {
        // 120 ms: less than one-way delay + RTT, a message that cannot
        // wait a round trip (only such messages make the floor).
        r.send(id, 1000, 120, None);
        r.run(2 * MS);
        let floor = r.p.ca(r.ha).live_window();
        opened |= floor > 0;
        if opened && floor == 0 && closed_at.is_none() {
            closed_at = Some(id);
        }
    }
    assert!(opened, "the floor held before the queue built");
    let at = closed_at.expect("the gate closed once the path queued");
    assert!(at < 200, "closed at message {at}");
    // It stays closed while the queue stands, and the stream's rate made
    // that queue: the floor is held off (`crate::live`).
    assert_eq!(r.p.ca(r.ha).live_window(), 0);
    assert!(r.p.ca(r.ha).live_window_holds() >= 1);
}

#[test]
fn expired_message_without_a_waiting_message_is_replaced_by_padding() {
    let mut r = Run::new(1);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    // Lifetime 80 ms: live when first sent (one-way 50 ms), dead by the
    // retransmission (RACK, about one RTT later). Every message is sent at
    // once, so none waits to take the slot: zero padding, same length.
    for id in 0..10u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        r.send(
            id,
            if id == 2 { 120 } else { 100 },
            if id == 2 { 80 } else { 300 },
            None,
        );
        r.run(20 * MS);
    }
    r.run(500 * MS);
    let slot = r.slot_of(2).expect("message 2 was sent");
    let v = r.versions_at(slot);
    assert_eq!(
        v.len(),
        1,
        "only the retransmission arrived at message 2's slot"
    );
    assert_eq!(
        v[0].len(),
        120,
        "inconsistent retransmission has the original's length"
    );
    assert!(
        v[0].iter().all(|&b| b == 0),
        "zero padding: never an expired filler"
    );
    assert!(r
        .expired()
        .contains(&(2, ExpiryReason::Replaced { by: None })));
    let hs = *r.p.ca(r.ha).hollywood_stats();
    assert!(hs.ir_sent >= 1 && hs.ir_padded >= 1, "{hs:?}");
    // Every other message arrived; message 2 was reported.
    assert_eq!(
        r.received_ids(),
        (0..10).filter(|&i| i != 2).collect::<Vec<_>>()
    );
    r.p.check_segmentation(Dir::AtoB);
}

#[test]
fn expired_message_is_replaced_by_a_waiting_message_with_same_length_and_padding() {
    let mut r = queue_limited(11);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    // Message 0 (1200 bytes, lifetime 80 ms) is lost; eight 1000-byte
    // messages wait behind the two-segment window.
    *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
    r.send(0, 1200, 80, None);
    for id in 1..10u32 {
        r.send(id, 1000, 5000, None);
    }
    assert!(r.p.ca(r.ha).queued_messages() >= 5);
    r.run(3000 * MS);
    let slot = r.slot_of(0).expect("message 0 was sent");
    let v = r.versions_at(slot);
    assert_eq!(v.len(), 1);
    let rtx = v[0];
    assert_eq!(rtx.len(), 1200);
    assert!(rtx[1000..].iter().all(|&b| b == 0), "200 bytes of padding");
    let by = (1..10u32)
        .find(|&id| rtx[..1000] == frame(id, 1000)[..])
        .expect("a whole waiting message");
    assert!(r
        .expired()
        .contains(&(0, ExpiryReason::Replaced { by: Some(by) })));
    // The replacement's copy went first, in message 0's slot; it still got
    // a slot of its own at its turn (the guaranteed delivery, should the
    // copy not be what reaches the receiver).
    let own = r.slot_of(by).expect("its own slot");
    assert!(own > slot);
    assert_eq!(r.positions_of(by), vec![slot, own]);
    for id in (1..10).filter(|&i| i != by) {
        assert_eq!(r.positions_of(id).len(), 1, "message {id}");
    }
    assert_eq!(r.received_ids(), (1..10).collect::<Vec<_>>());
    r.p.check_segmentation(Dir::AtoB);
}

#[test]
fn a_message_that_expires_in_the_queue_never_reaches_the_wire() {
    let mut r = queue_limited(12);
    // A burst far beyond the window with a 150 ms lifetime: what cannot be
    // sent in time is dropped before it gets sequence numbers.
    for id in 0..40u32 {
        r.send(id, 1000, 150, None);
    }
    r.run(3000 * MS);
    let expired = r.expired();
    let not_sent: Vec<u32> = expired
        .iter()
        .filter(|(_, why)| *why == ExpiryReason::NotSent)
        .map(|(id, _)| *id)
        .collect();
    assert!(not_sent.len() >= 10, "{expired:?}");
    for &id in &not_sent {
        assert!(
            r.positions_of(id).is_empty(),
            "message {id} reached the wire"
        );
    }
    // Everything else arrived; nothing was both reported and delivered.
    let got = r.received_ids();
    for id in 0..40u32 {
        let reported = expired.iter().any(|(e, _)| *e == id);
        assert!(
            got.contains(&id) != reported,
            "message {id}: delivered xor reported"
        );
    }
    assert_eq!(
        r.p.ca(r.ha).hollywood_stats().not_sent,
        not_sent.len() as u64
    );
    assert_eq!(
        r.p.ca(r.ha).hollywood_stats().ir_sent,
        0,
        "no loss, no rewrite"
    );
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
    let v = r.versions_at(r.slot_of(2).unwrap());
    assert_eq!(v, vec![&frame(2, 100)]);
    assert_eq!(r.p.ca(r.ha).hollywood_stats().ir_sent, 0);
    assert!(r.expired().is_empty());
}

#[test]
fn a_live_dependent_keeps_the_iframe_alive() {
    let mut r = Run::new(3);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    // Message 2 is an I-frame with a short lifetime; 3 depends on it and
    // each later message on its predecessor, so when the loss is repaired
    // the latest declared target is 8, not 2: only the live (and already
    // delivered) dependent 3 can keep 2 (thesis §4.2).
    for id in 0..10u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        let dep = (id > 2).then(|| id - 1);
        let life = if id == 2 { 80 } else { 1000 };
        r.send(id, 100, life, dep);
        r.run(20 * MS);
    }
    r.run(500 * MS);
    assert_eq!(
        r.versions_at(r.slot_of(2).unwrap()),
        vec![&frame(2, 100)],
        "the I-frame itself was retransmitted"
    );
    assert!(r.p.ca(r.ha).hollywood_stats().kept_for_dependency >= 1);
    assert!(r.expired().is_empty());
}

#[test]
fn an_expired_iframe_without_live_dependents_is_replaced() {
    // The control for the test above: the same, but the dependents'
    // lifetimes are as short as the I-frame's.
    let mut r = Run::new(3);
    let target = Rc::new(RefCell::new(None));
    drop_first_at(&mut r.p, target.clone());
    for id in 0..10u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        let dep = (id > 2).then(|| id - 1);
        r.send(id, 100, if id <= 3 { 80 } else { 1000 }, dep);
        r.run(20 * MS);
    }
    r.run(500 * MS);
    assert_ne!(r.versions_at(r.slot_of(2).unwrap()), vec![&frame(2, 100)]);
    assert!(r
        .expired()
        .contains(&(2, ExpiryReason::Replaced { by: None })));
}

#[test]
fn a_slot_the_receiver_holds_in_part_is_resent_as_it_was() {
    // A resegmenting middlebox cut message 0's segment in two and the
    // first piece was lost: the receiver SACKs the second half, a block
    // whose edge lies inside one of the sender's segments. Rewriting the
    // slot would reach the receiver spliced with the bytes it holds (a
    // frame that fails its CRC, thesis §4.5), so the slot is resent as it
    // was although message 0 expired and live messages wait.
    let mut r = queue_limited(11);
    let slot = r.p.ca(r.ha).snd_nxt();
    let done = Rc::new(RefCell::new(false));
    r.p.ab.verdict = Some(Box::new(move |pi| {
        if !*done.borrow() && pi.tcp.seq == slot && pi.len == 1200 {
            *done.borrow_mut() = true;
            return Verdict::LoseHead(600);
        }
        Verdict::Pass
    }));
    r.send(0, 1200, 80, None);
    for id in 1..10u32 {
        r.send(id, 1000, 5000, None);
    }
    r.run(3000 * MS);
    let v = r.versions_at(slot);
    assert_eq!(
        v.len(),
        1,
        "{:?}",
        v.iter().map(|p| p.len()).collect::<Vec<_>>()
    );
    assert!(v[0][..] == frame(0, 1200)[..], "the original bytes");
    assert_eq!(r.p.ca(r.ha).hollywood_stats().ir_sent, 0);
    assert!(
        r.expired().iter().all(|&(id, _)| id != 0),
        "{:?}",
        r.expired()
    );
    assert_eq!(r.received_ids(), (0..10).collect::<Vec<_>>());
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
fn tail_loss_of_an_expired_message_is_padded_after_the_probe_timeout() {
    let mut r = Run::new(5);
    for id in 0..3u32 {
        r.send(id, 100, 1000, None);
        r.run(20 * MS);
    }
    // The last message is lost; nothing follows, so no duplicate ACKs: the
    // RTO path (with RACK-TLP the loss probe, capped at the RTO deadline
    // for a lone segment, takes the RTO's place, RFC 8985 §7.2). It is
    // expired by then and nothing waits to take its slot.
    let target = Rc::new(RefCell::new(Some(r.p.ca(r.ha).snd_nxt())));
    drop_first_at(&mut r.p, target);
    r.send(3, 100, 80, None);
    r.run(2000 * MS);
    let st = r.p.ca(r.ha).stats().clone();
    assert!(st.rto_events + st.tlp_probes >= 1, "{st:?}");
    let v = r.versions_at(r.slot_of(3).unwrap());
    assert_eq!(v.len(), 1);
    assert!(v[0].iter().all(|&b| b == 0));
    assert!(r.p.ca(r.ha).hollywood_stats().ir_padded >= 1);
    assert_eq!(r.expired(), vec![(3, ExpiryReason::Replaced { by: None })]);
}

#[test]
fn rto_path_replaces_expired_message() {
    let mut r = Run::new(6);
    for id in 0..3u32 {
        r.send(id, 100, 1000, None);
        r.run(20 * MS);
    }
    // Black-hole the path for 500 ms, well past the RTO (200 ms, the
    // minimum): everything sent then is lost and no ACK comes back, so the
    // RTO fires; by then message 3 is expired. (After 150 or 300 ms the
    // tail loss probe and RACK repair it without the RTO, now that
    // retransmitting the head restarts the RTO also while the reordering
    // timer runs.)
    let until = r.p.now + 500 * MS;
    let clock = Rc::new(RefCell::new(r.p.now));
    let c2 = clock.clone();
    r.p.ab.verdict = Some(Box::new(move |_| Verdict::drop_if(*c2.borrow() < until)));
    for id in 3..30u32 {
        r.send(id, 100, if id == 3 { 80 } else { 2000 }, None);
        r.run(20 * MS);
        *clock.borrow_mut() = r.p.now;
    }
    r.run(3000 * MS);
    let st = r.p.ca(r.ha).stats().clone();
    assert!(st.rto_events >= 1, "{st:?}");
    assert!(r.p.ca(r.ha).hollywood_stats().ir_sent >= 1);
    assert_ne!(
        r.versions_at(r.slot_of(3).unwrap())[0][..],
        frame(3, 100)[..]
    );
    // Everything else arrived.
    assert_eq!(
        r.received_ids(),
        (0..30).filter(|&i| i != 3).collect::<Vec<_>>()
    );
    r.p.check_segmentation(Dir::AtoB);
}

/// Delay (do not drop) the first transmission at `seq` by `d`.
fn delay_first_at(p: &mut Pair, seq: Rc<RefCell<Option<SeqNumber>>>, d: Duration) {
    let done = Rc::new(RefCell::new(false));
    p.ab.verdict = Some(Box::new(move |pi| {
        if !*done.borrow() && Some(pi.tcp.seq) == *seq.borrow() && pi.len > 0 {
            *done.borrow_mut() = true;
            return Verdict::Delay(d);
        }
        Verdict::Pass
    }));
}

#[test]
fn dsack_counts_a_spurious_rewrite() {
    let mut r = Run::new(7);
    // Delay (do not drop) message 2 by 100 ms: loss detection (RACK's
    // reordering timer) triggers a retransmission, which replaces the
    // expired message; then the original arrives first and the receiver
    // reports the replacement as a D-SACK.
    let target = Rc::new(RefCell::new(None));
    delay_first_at(&mut r.p, target.clone(), 100 * MS);
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
    let v = r.versions_at(r.slot_of(2).unwrap());
    assert_eq!(
        v[0][..],
        frame(2, 100)[..],
        "the delayed original arrived first"
    );
}

#[test]
fn a_carried_message_whose_copy_the_receiver_discards_still_arrives() {
    // Review B4: the replacement rides in the slot of a message whose
    // original was only delayed; the receiver keeps the original. The
    // carried message must be delivered or reported — never lost
    // silently: here its own slot delivers it.
    let mut r = queue_limited(13);
    let target = Rc::new(RefCell::new(None));
    delay_first_at(&mut r.p, target.clone(), 120 * MS);
    *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
    r.send(0, 1000, 80, None);
    for id in 1..12u32 {
        r.send(id, 1000, 5000, None);
    }
    r.run(5000 * MS);
    let hs = *r.p.ca(r.ha).hollywood_stats();
    assert!(hs.ir_sent >= 1, "{hs:?}");
    let got = r.received_ids();
    let expired = r.expired();
    for id in 0..12u32 {
        assert!(
            got.contains(&id) || expired.iter().any(|(e, _)| *e == id),
            "message {id} neither delivered nor reported: {expired:?}"
        );
    }
    // The receiver kept the delayed original (a D-SACK told the sender)
    // and got the carried message from its own slot.
    assert!(hs.dsack_spurious_rewrites >= 1, "{hs:?}");
    let carried = (1..12u32)
        .find(|&id| r.positions_of(id).len() == 2)
        .expect("a message went twice: carried, then in its own slot");
    assert!(got.contains(&carried));
    assert!(got.contains(&0), "the delayed original");
}

#[test]
fn rewriting_stops_behind_a_middlebox_that_drops_inconsistent_retransmissions() {
    // Issue item 9, thesis §4.5: a middlebox drops every retransmission
    // whose payload differs from the first transmission at that sequence
    // number. The sender must notice, resend the original bytes and stop
    // rewriting, so the connection survives as standard TCP would.
    let mut r = Run::new(14);
    let first: Rc<RefCell<std::collections::HashMap<u32, Vec<u8>>>> = Rc::default();
    let target = Rc::new(RefCell::new(None));
    let (f2, t2) = (first.clone(), target.clone());
    let dropped_once = Rc::new(RefCell::new(false));
    r.p.ab.verdict = Some(Box::new(move |pi| {
        if pi.len == 0 {
            return Verdict::Pass;
        }
        // The test sees only headers here; the payload check is done by
        // comparing lengths of what the sender recorded (below): instead,
        // drop the first transmission of the target, then every later
        // transmission of it until the sender restored the original.
        if Some(pi.tcp.seq) == *t2.borrow() {
            let mut d = dropped_once.borrow_mut();
            if !*d {
                *d = true;
                return Verdict::Drop;
            }
            return if f2.borrow().contains_key(&pi.tcp.seq.0) {
                Verdict::Pass
            } else {
                Verdict::Drop
            };
        }
        Verdict::Pass
    }));
    for id in 0..6u32 {
        if id == 2 {
            *target.borrow_mut() = Some(r.p.ca(r.ha).snd_nxt());
        }
        r.send(id, 100, if id == 2 { 80 } else { 300 }, None);
        r.run(20 * MS);
    }
    // Run until the sender gives up rewriting, then let the original pass.
    let slot = r.slot_of(2).unwrap();
    let deadline = r.p.now + Duration::from_secs(60);
    while r.p.ca(r.ha).hollywood_stats().rewriting_stopped == 0 && r.p.now < deadline {
        r.run(10 * MS);
    }
    assert_eq!(r.p.ca(r.ha).hollywood_stats().rewriting_stopped, 1);
    // (The retransmission that stopped rewriting already carried the
    // original, which this test's box, blind to payloads, dropped: the
    // next one comes after the backed-off RTO.)
    first.borrow_mut().insert(slot.0, frame(2, 100));
    r.run(30_000 * MS);
    let stopped = r.p.a_events.iter().any(|(_, e)| {
        matches!(
            e,
            EndpointEvent::Conn {
                event: Event::RewritingStopped,
                ..
            }
        )
    });
    assert!(stopped, "the application is told");
    assert!(
        r.versions_at(slot).contains(&&frame(2, 100)),
        "the original bytes went through"
    );
    assert_eq!(
        r.p.ca(r.ha).snd_una(),
        r.p.ca(r.ha).snd_nxt(),
        "all acknowledged"
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
        (
            acks,
            p.cb(hb).ooo_stats().out_of_order,
            seen.iter().sum::<usize>(),
        )
    };
    let (std_acks, _, std_bytes) = run(false);
    let (ooo_acks, ooo_count, ooo_bytes) = run(true);
    // Both applications got the whole stream; the out-of-order one also
    // got the retransmitted copies of bytes it had already.
    assert_eq!(std_bytes, 300 * 160);
    assert!(ooo_bytes >= 300 * 160, "{ooo_bytes}");
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
    let slot1 = r.slot_of(1).unwrap();
    let arrived_before_repair = r.got.iter().take_while(|(s, _)| *s != slot1).count();
    assert!(arrived_before_repair >= 5, "{arrived_before_repair}");
    assert!(r.p.cb(r.hb).ooo_stats().out_of_order >= 4);
    // The repair itself arrives later and is handed over too.
    assert_eq!(r.versions_at(slot1), vec![&frame(1, 100)]);
}

/// Review B1: with out-of-order delivery, every byte TCP acknowledges must
/// reach the application. A stalled reader with a small receive buffer
/// lets the window close; the sender's override timer then pushes a whole
/// message into a window smaller than it (consistent segmentation never
/// splits a record), and duplicates arrive while the copy queue is full.
/// Whatever the receiver accepted must be handed up, in full, once the
/// application reads again.
#[test]
fn ooo_receiver_hands_up_every_byte_it_acknowledges() {
    let mut rx = Config::hollywood(false, true);
    rx.recv_buffer = 6000;
    let mut p = Pair::new(Config::hollywood(true, false), rx, 21);
    p.ab.dup = 0.2;
    p.ab.loss = 0.02;
    let (ha, hb) = p.connect();
    let base = p.ca(ha).snd_nxt();
    // 40 messages of 1400 bytes, reliable, queued at once.
    for id in 0..40u32 {
        let now = p.now;
        p.ca(ha)
            .send_message(
                now,
                &frame(id, 1400),
                MessageMeta {
                    lifetime: None,
                    ..meta(id, 0, None)
                },
            )
            .expect("queued");
    }
    // The reader stalls for 3 s, then reads everything as it comes.
    p.run_for(Duration::from_secs(3));
    let mut got: Vec<(SeqNumber, Vec<u8>)> = Vec::new();
    for _ in 0..20_000 {
        p.run_for(MS);
        while let Some(s) = p.cb(hb).recv_segment() {
            got.push((s.seq, s.payload));
        }
        if p.ca(ha).snd_una() == p.ca(ha).snd_nxt() && p.ca(ha).queued_messages() == 0 {
            break;
        }
    }
    let end = p.cb(hb).rcv_nxt();
    assert_eq!(end, base + 40 * 1400, "everything was acknowledged");
    // Every acknowledged byte was handed up at least once.
    let mut ranges: Vec<(u32, u32)> = got
        .iter()
        .map(|(s, d)| (s.diff(base) as u32, s.diff(base) as u32 + d.len() as u32))
        .collect();
    ranges.sort_unstable();
    let mut covered = 0u32;
    for (a, b) in ranges {
        assert!(
            a <= covered,
            "bytes {covered}..{a} acknowledged but never handed up"
        );
        covered = covered.max(b);
    }
    assert_eq!(covered, 40 * 1400);
    // And they are the bytes that were sent.
    for (s, d) in &got {
        let off = s.diff(base) as usize;
        for (k, b) in d.iter().enumerate() {
            let id = (off + k) / 1400;
            assert_eq!(*b, frame(id as u32, 1400)[(off + k) % 1400]);
        }
    }
}

#[test]
fn the_last_messages_before_a_fin_are_not_given_up_once_sacked() {
    // Found in the lab (issue 9, interop at 3 % loss): a FIN cannot be
    // SACKed, so the segment carrying the last message and the FIN is
    // never SACKed whole although the receiver holds its data. RACK then
    // resends it after the last message expired, and the table rewrote it
    // with padding and reported the message, which the receiver had
    // delivered long before (a false Expired event).
    let mut r = Run::new(31);
    let first: Rc<RefCell<Vec<SeqNumber>>> = Rc::default();
    let f2 = first.clone();
    r.p.ab.verdict = Some(Box::new(move |pi| {
        // Drop the first transmissions of the segments of messages 1 and 2.
        if pi.len > 0 && !f2.borrow().contains(&pi.tcp.seq) {
            f2.borrow_mut().push(pi.tcp.seq);
            let n = f2.borrow().len();
            if n == 2 || n == 3 {
                return Verdict::Drop;
            }
        }
        Verdict::Pass
    }));
    r.send(0, 1000, 5000, None);
    r.send(1, 1000, 5000, None);
    r.send(2, 1000, 5000, None);
    r.run(10 * MS);
    // The last message and the FIN leave in one segment.
    let now = r.p.now;
    r.p.ca(r.ha)
        .send_message(now, &frame(3, 1000), meta(3, 100, None))
        .expect("queued");
    r.lens.push(1000);
    r.p.ca(r.ha).close();
    r.p.flush();
    let fin_segment =
        r.p.sent(Dir::AtoB)
            .find(|t| t.tcp.flags.fin())
            .map(|t| (t.tcp.seq, t.len));
    assert!(
        fin_segment.is_some_and(|(_, len)| len > 0),
        "FIN rides with message 3: {fin_segment:?}"
    );
    r.run(2000 * MS);
    let got = r.received_ids();
    assert_eq!(got, vec![0, 1, 2, 3], "everything arrives");
    assert!(
        r.expired().is_empty(),
        "nothing the receiver has is reported: {:?}",
        r.expired()
    );
}

/// [TCP-video] §7.2's deadline TCP: the sender's message queue with
/// `seq_gap_deadlines`, a standard in-order receiver that understands the
/// next-expected option. One-way delay 50 ms.
fn deadline_tcp(seed: u64) -> Run {
    let mut sender = Config::hollywood(true, false);
    sender.hollywood.seq_gap_deadlines = true;
    let mut receiver = Config::hollywood(false, false);
    receiver.hollywood.seq_gap_receive = true;
    let mut p = Pair::new(sender, receiver, seed);
    p.ab.delay = 50 * MS;
    p.ba.delay = 50 * MS;
    let (ha, hb) = p.connect();
    Run {
        p,
        ha,
        hb,
        lens: Vec::new(),
        got: Vec::new(),
    }
}

/// Drop the first k transmissions of the data segment starting at a
/// sequence listed k times in `seqs` (filled in as the messages get their
/// slots).
fn drop_first_at_each(p: &mut Pair, seqs: Rc<RefCell<Vec<SeqNumber>>>) {
    let mut done: Vec<SeqNumber> = Vec::new();
    p.ab.verdict = Some(Box::new(move |pi| {
        let s = pi.tcp.seq;
        let listed = seqs.borrow().iter().filter(|&&x| x == s).count();
        if pi.len > 0 && done.iter().filter(|&&x| x == s).count() < listed {
            done.push(s);
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
}

/// The in-order byte stream the deadline receiver delivered.
fn read_stream(r: &mut Run) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = r.p.cb(r.hb).recv(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn deadline_tcp_skips_an_expired_message_and_resends_a_live_one_below_it() {
    let mut r = deadline_tcp(31);
    let targets = Rc::new(RefCell::new(Vec::new()));
    drop_first_at_each(&mut r.p, targets.clone());
    // Message 2 (lifetime 5 s; its first retransmission is lost too) and
    // message 4 (lifetime 80 ms: dead by the retransmission, about one RTT
    // later) are lost. The skip of message 4 must not announce a
    // next-expected sequence past message 2, which the receiver still
    // lacks and which is resent as it was: the receiver would read zeros
    // there.
    let mut slots = Vec::new();
    for id in 0..10u32 {
        let seq = r.p.ca(r.ha).snd_nxt();
        slots.push(seq);
        if id == 2 {
            targets.borrow_mut().extend([seq, seq]);
        }
        if id == 4 {
            targets.borrow_mut().push(seq);
        }
        r.send(id, 100, if id == 4 { 80 } else { 5000 }, None);
        r.run(10 * MS);
    }
    r.run(2000 * MS);
    let stream = read_stream(&mut r);
    let first = slots[0];
    let at = |id: usize| slots[id].diff(first) as usize;
    // Everything but message 4 arrived in order; message 4's bytes are zeros.
    assert_eq!(stream.len(), 1000, "the stream went on past the gap");
    for id in 0..10usize {
        let got = &stream[at(id)..at(id) + 100];
        if id == 4 {
            assert!(got.iter().all(|&b| b == 0), "skipped = zeros");
        } else {
            assert_eq!(got, &frame(id as u32, 100)[..], "message {id}");
        }
    }
    assert_eq!(r.expired(), vec![(4, ExpiryReason::Skipped)]);
    // Message 2 was sent three times with its own bytes; message 4 once.
    assert_eq!(r.positions_of(2), vec![slots[2]]);
    let sends = |seq: SeqNumber| {
        r.p.sent(Dir::AtoB)
            .filter(|t| t.len > 0 && t.tcp.seq == seq)
            .count()
    };
    assert_eq!(sends(slots[2]), 3);
    assert_eq!(sends(slots[4]), 1);
    // Never announced past the live message's slot while it was missing;
    // announced past message 4 in the end.
    let end4 = slots[4] + 100;
    let announced: Vec<SeqNumber> =
        r.p.sent(Dir::AtoB)
            .filter_map(|t| t.tcp.options.next_expected)
            .collect();
    assert!(!announced.is_empty());
    assert!(announced.iter().all(|&n| n >= end4), "{announced:?}");
    assert_eq!(r.p.cb(r.hb).stats().seq_gap_skipped_bytes, 100);
    // No retransmission ever differed from the original.
    assert_eq!(r.p.ca(r.ha).hollywood_stats().ir_sent, 0);
}

#[test]
fn deadline_tcp_drops_a_message_that_expires_in_the_queue() {
    // A two-segment window: messages wait in the queue, and one that
    // expires there never gets sequence numbers ([TCP-video] §7.2: "transmit
    // the next (unexpired) data section").
    let mut sender = Config::hollywood(true, false);
    sender.hollywood.seq_gap_deadlines = true;
    sender.initial_cwnd_segments = 2;
    // As the deadline deployment configures it (`Deployment::sender_config`).
    sender.hollywood.live_window = false;
    let mut receiver = Config::hollywood(false, false);
    receiver.hollywood.seq_gap_receive = true;
    let mut p = Pair::new(sender, receiver, 32);
    p.ab.delay = 50 * MS;
    p.ba.delay = 50 * MS;
    let (ha, hb) = p.connect();
    let mut r = Run {
        p,
        ha,
        hb,
        lens: Vec::new(),
        got: Vec::new(),
    };
    for id in 0..6u32 {
        r.send(id, 1000, if id == 3 { 60 } else { 5000 }, None);
    }
    r.run(2000 * MS);
    let stream = read_stream(&mut r);
    let mut want = Vec::new();
    for id in [0u32, 1, 2, 4, 5] {
        want.extend_from_slice(&frame(id, 1000));
    }
    assert_eq!(stream, want, "message 3 never reached the wire");
    assert_eq!(r.expired(), vec![(3, ExpiryReason::NotSent)]);
    assert_eq!(r.p.ca(r.ha).stats().seq_gap_skips, 0);
}

#[test]
fn deadline_tcp_skips_into_a_full_window() {
    // The receiver's window (8000 bytes) fills behind a lost first message
    // that expires: SND.NXT is at the window's edge, so a skip announced
    // there would be rejected (RFC 9293 §3.10.7.4) and the connection
    // would stall for good. Announced at SND.UNA (= RCV.NXT) it is taken.
    let mut sender = Config::hollywood(true, false);
    sender.hollywood.seq_gap_deadlines = true;
    let mut receiver = Config::hollywood(false, false);
    receiver.hollywood.seq_gap_receive = true;
    receiver.recv_buffer = 8000;
    let mut p = Pair::new(sender, receiver, 33);
    p.ab.delay = 50 * MS;
    p.ba.delay = 50 * MS;
    let (ha, hb) = p.connect();
    let mut r = Run {
        p,
        ha,
        hb,
        lens: Vec::new(),
        got: Vec::new(),
    };
    let targets = Rc::new(RefCell::new(vec![r.p.ca(r.ha).snd_nxt()]));
    drop_first_at_each(&mut r.p, targets);
    for id in 0..40u32 {
        r.send(id, 1000, if id == 0 { 60 } else { 60_000 }, None);
    }
    // The application reads only after the hole is skipped: nothing is
    // readable before, and the window stays full.
    let mut stream = Vec::new();
    for _ in 0..100 {
        r.run(100 * MS);
        stream.extend(read_stream(&mut r));
    }
    assert_eq!(stream.len(), 40_000, "the stream went on past the skip");
    assert!(stream[..1000].iter().all(|&b| b == 0));
    for id in 1..40u32 {
        let at = id as usize * 1000;
        assert_eq!(&stream[at..at + 1000], &frame(id, 1000)[..], "message {id}");
    }
    assert_eq!(r.expired(), vec![(0, ExpiryReason::Skipped)]);
}

#[test]
fn an_autotuned_send_buffer_grows_with_the_live_window() {
    // Host mode autotunes the send buffer (twice the initial window at
    // first, growing with cwnd). A live stream that needs more in flight
    // than that in its first round trip (1200 B every 5 ms on a 250 ms
    // path: 60 kB) must not be held to it by the buffer: the buffer grows
    // with the live-stream window's floor too. Without that, measured on
    // real packets: 17 messages lost before the wire in the first 0.2 s.
    for (live, ok) in [(true, true), (false, false)] {
        let mut c = Config::hollywood(true, false);
        c.autotune = Some(true);
        c.hollywood.live_window = live;
        let mut p = Pair::new(c, Config::hollywood(false, true), 42);
        p.ab.delay = 125 * MS;
        p.ba.delay = 125 * MS;
        let (ha, _hb) = p.connect();
        let mut refused = 0;
        for id in 0..80u32 {
            let now = p.now;
            if p.ca(ha)
                .send_message(now, &frame(id, 1200), meta(id, 180, None))
                .is_err()
            {
                refused += 1;
            }
            p.flush();
            p.run_for(5 * MS);
        }
        p.run_for(1000 * MS);
        let not_sent = p.ca(ha).hollywood_stats().not_sent;
        let what = format!("live {live}: {refused} refused, {not_sent} not sent");
        assert_eq!(refused + not_sent == 0, ok, "{what}");
    }
}
