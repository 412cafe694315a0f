//! Fuzz two TCP Hollywood engines and the message layer between them.
//!
//! A sender (inconsistent retransmissions on, thesis §4.2) and a receiver
//! (out-of-order delivery on, §4.3) exchange framed messages over two
//! in-memory queues. The fuzz input is a program: the first bytes pick the
//! configuration, every following byte is an opcode. Opcodes deliver,
//! drop, duplicate, reorder or *corrupt* (one payload byte changed under a
//! valid checksum, as a middlebox would) queued segments, advance virtual
//! time, and send messages with lifetimes, dependencies, sub-streams and
//! an ordered sub-stream (thesis §8.3.2), or close, or *forge* a message
//! (a payload byte changed, its CRC32C recomputed: an on-path attacker).
//! One configuration bit turns secure mode on (`hollywood_transport::
//! secure`: the TLS 1.3 handshake is run in memory, every message is
//! sealed before framing and opened after deframing). A final honest
//! phase delivers everything until the connection is quiet.
//!
//! The delivery invariants, checked after every step:
//! - nothing panics;
//! - every message handed up has exactly the bytes sent under its id, on
//!   its sub-stream (a corrupted frame fails its CRC32C, never arrives
//!   changed), at most once — in plain mode a forged message may arrive
//!   changed (the attack works); in secure mode never;
//! - an ordered sub-stream's messages come up in the order they were sent;
//! - no data segment from the sender starts above every byte sent before
//!   it (no sequence hole on the wire, thesis §4.2);
//! - each message is reported expired at most once;
//! - at the end, when no byte was corrupted and no side failed, every
//!   message was delivered or reported expired: nothing is lost silently.
#![no_main]

mod common;

use common::{exchange_all, next_timer, take_front, trace, Input, Queue, Queues};
use hollywood_msg::{Deframer, DeframerConfig, Framer, FramerConfig};
use hollywood_tcp::{
    CcAlgorithm, Config, Connection, Event, Instant, MessageMeta, SendMessageError, State,
};
use hollywood_transport::secure::{handshake_in_memory, Identity, SecureSession};
use hollywood_wire::SeqNumber;
use libfuzzer_sys::fuzz_target;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// Most opcodes per input.
const MAX_OPS: usize = 500;
/// The ordered sub-stream.
const ORDERED: u16 = 3;

/// The payload of message `id` (its bytes follow from the id, so a
/// delivery is checked without keeping every payload).
fn payload(id: u32, len: usize) -> Vec<u8> {
    let mut x = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

struct Sent {
    len: usize,
    substream: u16,
    ordered: bool,
}

struct World {
    now: Instant,
    tx: Connection,
    rx: Connection,
    framer: Framer,
    deframer: Deframer,
    /// Segments from sender to receiver, and back.
    c2s: Queue,
    s2c: Queue,
    sent: Vec<Sent>,
    delivered: Vec<bool>,
    expired: Vec<bool>,
    /// Last id delivered per ordered sub-stream.
    ordered_last: HashMap<u16, u32>,
    /// Last id sent per sub-stream (dependency targets).
    last_on: HashMap<u16, u32>,
    /// End of the highest data byte the sender has sent.
    high: Option<SeqNumber>,
    corrupted: bool,
    /// A message was forged (CRC recomputed).
    forged: bool,
    /// Secure mode: the sender's and the receiver's sessions.
    sec: Option<(SecureSession, SecureSession)>,
    failed: bool,
    /// The receiver delivers out of order (segments), else a byte stream.
    ooo: bool,
    buf: Vec<u8>,
}

impl World {
    fn timeout(&mut self) {
        let now = self.now;
        for c in [&mut self.tx, &mut self.rx] {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
    }

    fn send(&mut self, inp: &mut Input) {
        let len = usize::from(inp.u16()) % 4000 + 1;
        let sel = inp.u8();
        let substream = u16::from(sel & 3);
        let ordered = substream == ORDERED;
        let lifetime = match (sel >> 2) & 3 {
            0 => None,
            k => Some(Duration::from_millis(
                u64::from(inp.u8()) * 4 * u64::from(k) + 1,
            )),
        };
        let depends_on = if sel & 0x10 != 0 {
            self.last_on.get(&substream).copied()
        } else {
            None
        };
        let id = self.sent.len() as u32;
        self.buf.clear();
        let plain = payload(id, len);
        let body = match &mut self.sec {
            Some((tx, _)) => tx.seal(id, substream, &plain).expect("keys"),
            None => plain,
        };
        self.framer
            .frame_id(id, substream, ordered, &body, &mut self.buf)
            .expect("within the framer's limit");
        let meta = MessageMeta {
            id,
            lifetime: if ordered { None } else { lifetime },
            depends_on,
            replaceable: !ordered,
            substream,
            priority: 0,
        };
        let r = self.tx.send_message(self.now, &self.buf, meta);
        if trace() {
            eprintln!(
                "send {id} len {len} frame {} {meta:?} -> {r:?}",
                self.buf.len()
            );
        }
        match r {
            Ok(()) => {
                self.sent.push(Sent {
                    len,
                    substream,
                    ordered,
                });
                self.delivered.push(false);
                self.expired.push(false);
                self.last_on.insert(substream, id);
            }
            Err(
                SendMessageError::WouldBlock
                | SendMessageError::State(_)
                | SendMessageError::TooLarge { .. }
                | SendMessageError::Meta(_),
            ) => {
                // Refused (no room, closed, or a dependency the rules
                // forbid): the id and the ordered chain are given back.
                assert!(
                    self.framer.retract(substream, id),
                    "retract the refused frame"
                );
            }
        }
    }

    /// Forge the first whole message in the front segment to the receiver:
    /// a payload byte changed, CRC32C recomputed, same length.
    fn forge(&mut self, x: u8) {
        let Some((_, p)) = self.c2s.front_mut() else {
            return;
        };
        if hollywood_msg::forge::forge_first_frame(p, x).is_some() {
            self.forged = true;
        }
    }

    /// Deliver everything and let time pass until nothing is left to do.
    fn run_quiet(&mut self, rounds: usize) {
        for _ in 0..rounds {
            exchange_all(self, 50_000);
            let next = next_timer(self.tx.poll_timeout(), self.rx.poll_timeout());
            let Some(t) = next else { break };
            self.now = self.now.max(t);
            self.timeout();
            self.settle();
        }
    }
}

impl Queues for World {
    fn idle(&self) -> bool {
        self.c2s.is_empty() && self.s2c.is_empty()
    }

    /// Drain both sides: transmit, events, received segments.
    fn settle(&mut self) {
        let now = self.now;
        let mut bytes = Vec::new();
        let mut guard = 0;
        while let Some(r) = self.tx.poll_transmit(now, &mut bytes) {
            guard += 1;
            assert!(guard < 100_000, "poll_transmit never returns None");
            if !bytes.is_empty() && self.tx.state() != State::SynSent {
                let end = r.seq + bytes.len();
                if let Some(h) = self.high {
                    assert!(r.seq <= h, "sequence hole: {:?} above {:?}", r.seq, h);
                    if end > h {
                        self.high = Some(end);
                    }
                } else {
                    self.high = Some(end);
                }
            }
            self.c2s.push_back((r, bytes.clone()));
        }
        while let Some(r) = self.rx.poll_transmit(now, &mut bytes) {
            guard += 1;
            assert!(guard < 100_000, "poll_transmit never returns None");
            self.s2c.push_back((r, bytes.clone()));
        }
        for q in [&mut self.c2s, &mut self.s2c] {
            while q.len() > 4096 {
                q.pop_front();
            }
        }
        while let Some(e) = self.tx.poll_event() {
            match e {
                Event::Expired(x) => {
                    if trace() {
                        eprintln!("expired {} {:?}", x.id, x.reason);
                    }
                    let i = x.id as usize;
                    assert!(i < self.sent.len(), "expired id {} never sent", x.id);
                    assert!(!self.expired[i], "message {} reported twice", x.id);
                    self.expired[i] = true;
                }
                Event::Reset | Event::TimedOut => self.failed = true,
                _ => {}
            }
        }
        while let Some(e) = self.rx.poll_event() {
            if matches!(e, Event::Reset | Event::TimedOut) {
                self.failed = true;
            }
        }
        let now_ns = now.as_nanos();
        if self.ooo {
            while let Some(s) = self.rx.recv_segment() {
                self.deframer.push_segment(s.seq.0, &s.payload, now_ns);
            }
            if self.rx.segments_ready() == 0 {
                self.deframer.advance_floor(self.rx.rcv_nxt().0);
            }
        } else {
            let mut chunk = [0u8; 16384];
            while let Ok(n) = self.rx.recv(&mut chunk) {
                if n == 0 {
                    break;
                }
                self.deframer.push_stream(&chunk[..n], now_ns);
            }
        }
        self.deframer.handle_timeout(now_ns);
        while let Some(mut m) = self.deframer.poll_message() {
            let i = m.id as usize;
            if let Some((_, rx)) = &mut self.sec {
                match rx.open(m.id, m.substream, &m.payload) {
                    Ok(p) => m.payload = p,
                    // A forgery, or a replay at another position.
                    Err(_) => continue,
                }
            }
            assert!(i < self.sent.len(), "message {} never sent", m.id);
            assert!(!self.delivered[i], "message {} delivered twice", m.id);
            let s = &self.sent[i];
            assert_eq!(m.substream, s.substream, "message {} sub-stream", m.id);
            if m.payload != payload(m.id, s.len) {
                // Only a forgery without protection gets through changed.
                assert!(
                    self.forged && self.sec.is_none(),
                    "message {} delivered with bytes that were not sent",
                    m.id
                );
            }
            if s.ordered {
                if let Some(&last) = self.ordered_last.get(&m.substream) {
                    assert!(m.id > last, "ordered {} after {}", m.id, last);
                }
                self.ordered_last.insert(m.substream, m.id);
            }
            if trace() {
                eprintln!("delivered {}", m.id);
            }
            self.delivered[i] = true;
        }
    }

    fn deliver(&mut self, to_rx: bool, copy: bool) {
        let q = if to_rx { &mut self.c2s } else { &mut self.s2c };
        let Some((r, p)) = take_front(q, copy) else {
            return;
        };
        if trace() {
            eprintln!(
                "deliver to {}: {:?} len {}",
                if to_rx { "rx" } else { "tx" },
                r.seq,
                p.len()
            );
        }
        let now = self.now;
        if to_rx {
            self.rx.handle_segment(now, &r, &p);
        } else {
            self.tx.handle_segment(now, &r, &p);
        }
    }
}

/// Two sessions after a TLS 1.3 handshake in memory (one identity per
/// process: generating a key per input would dominate the run).
fn secure_pair() -> (SecureSession, SecureSession) {
    static ID: std::sync::OnceLock<Identity> = std::sync::OnceLock::new();
    let id = ID.get_or_init(|| Identity::generate().expect("identity"));
    let mut c = SecureSession::client(id).expect("client");
    let mut s = SecureSession::server(id).expect("server");
    handshake_in_memory(&mut c, &mut s).expect("handshake");
    assert!(c.is_ready() && s.is_ready());
    (c, s)
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let (b0, b1) = (inp.u8(), inp.u8());
    let sizes = [16 * 1024, 64 * 1024, 1 << 20];
    let base = |c: Config| Config {
        sack: b0 & 1 == 0,
        timestamps: b0 & 2 == 0,
        rack: b0 & 4 == 0,
        cc: match (b0 >> 3) & 3 {
            0 => CcAlgorithm::NewReno,
            1 => CcAlgorithm::Bbr,
            _ => CcAlgorithm::Cubic,
        },
        send_buffer: sizes[usize::from(b1 & 3) % 3],
        recv_buffer: sizes[usize::from((b1 >> 2) & 3) % 3],
        mss: if b1 & 16 != 0 { 536 } else { 1460 },
        max_retransmissions: 8,
        ..c
    };
    // Both extensions at both ends unless the input turns one off (the
    // four deployments of thesis §4.4).
    let txc = base(Config::hollywood(b0 & 0x20 == 0, false));
    let rxc = base(Config::hollywood(false, b0 & 0x40 == 0));
    let (ca, sa): (SocketAddr, SocketAddr) = (
        "10.0.0.1:40000".parse().unwrap(),
        "10.0.0.2:80".parse().unwrap(),
    );
    let now = Instant::from_nanos(1_000_000_000);
    let mut tx = Connection::connect(
        now,
        txc,
        ca,
        sa,
        SeqNumber(u32::from(b1).wrapping_mul(0x0101_0101)),
    );
    let mut p = Vec::new();
    let syn = tx.poll_transmit(now, &mut p).expect("SYN");
    let rx = Connection::accept(now, rxc, sa, ca, SeqNumber(0x8000_0000), &syn);
    let mut w = World {
        now,
        tx,
        rx,
        c2s: VecDeque::new(),
        s2c: VecDeque::new(),
        framer: Framer::new(FramerConfig::default()),
        deframer: Deframer::new(DeframerConfig::default()),
        sent: Vec::new(),
        delivered: Vec::new(),
        expired: Vec::new(),
        ordered_last: HashMap::new(),
        last_on: HashMap::new(),
        high: None,
        corrupted: false,
        forged: false,
        sec: (b1 & 0x40 != 0).then(secure_pair),
        failed: false,
        ooo: b0 & 0x40 == 0,
        buf: Vec::new(),
    };
    w.settle();
    // Handshake honestly, so that the program is about data.
    w.run_quiet(4);
    let mut ops = 0;
    while !inp.done() && ops < MAX_OPS {
        ops += 1;
        let op = inp.u8();
        if trace() {
            eprintln!("op {op} at {:?}", w.now);
        }
        match op {
            0..=39 => w.deliver(true, false),
            40..=59 => w.deliver(false, false),
            60..=69 => {
                w.c2s.pop_front();
            }
            70..=74 => {
                w.s2c.pop_front();
            }
            75..=79 => w.deliver(true, true),
            80..=84 => {
                if w.c2s.len() >= 2 {
                    let k = 1 + usize::from(inp.u8()) % (w.c2s.len() - 1);
                    w.c2s.swap(0, k);
                }
            }
            85..=87 => {
                // A middlebox changes one payload byte and fixes the
                // checksum: the segment arrives valid, the frame does not.
                let at = usize::from(inp.u16());
                let x = inp.u8() | 1;
                if let Some((_, p)) = w.c2s.front_mut() {
                    if !p.is_empty() {
                        let k = at % p.len();
                        p[k] ^= x;
                        w.corrupted = true;
                    }
                }
            }
            88..=99 => {
                w.now += Duration::from_micros(u64::from(inp.u16()) * 50);
                w.timeout();
            }
            100..=109 => {
                let next = next_timer(w.tx.poll_timeout(), w.rx.poll_timeout());
                if let Some(t) = next {
                    w.now = w.now.max(t);
                }
                w.timeout();
            }
            110..=199 => w.send(&mut inp),
            200 => w.tx.close(),
            201..=210 => {
                let x = inp.u8();
                w.forge(x);
            }
            _ => {
                let rounds = usize::from(inp.u8() % 16) + 1;
                w.run_quiet(rounds);
            }
        }
        w.settle();
    }
    w.run_quiet(10_000);
    if !w.corrupted && !w.forged && !w.failed {
        for i in 0..w.sent.len() {
            assert!(
                w.delivered[i] || w.expired[i],
                "message {i} neither delivered nor reported ({} sent)",
                w.sent.len()
            );
        }
    }
});
