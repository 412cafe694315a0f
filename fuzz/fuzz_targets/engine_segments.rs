//! Fuzz the TCP engine with peer input.
//!
//! Two [`Connection`]s (client = active open, server = passive open) run
//! over two in-memory queues. The fuzz input is a small program: the first
//! two bytes pick the configuration, every following byte is an opcode with
//! its operands. Opcodes move, drop, duplicate or reorder queued segments,
//! advance virtual time, call `send` / `recv` / `close` / `abort`, and —
//! the point of the target — inject handcrafted segments whose sequence
//! and acknowledgment numbers are offsets from the victim's current RCV.NXT
//! and SND.UNA (so most land in the window), with arbitrary flags, windows,
//! timestamps, SACK blocks and payloads.
//!
//! After every step all output is drained and these must hold:
//! - nothing panics (peer input never may);
//! - every emitted segment survives `build_tcp_ip` → `parse_tcp_ip`
//!   unchanged, carries at most the negotiated SMSS of data, and, in a
//!   synchronized state, an ACK (RST aside) and a sequence range inside
//!   [SND.UNA - 1, SND.NXT];
//! - SND.UNA =< SND.NXT; bytes in flight =< bytes buffered + FIN =< the
//!   configured send buffer + 1;
//! - state changes follow RFC 9293 §3.3.2 (figure 5) forwards only, CLOSED
//!   is final, and `Closed` is the last event;
//! - every byte `recv` returns is the byte the peer's stream holds at that
//!   offset (both sides, and injected payloads, use one pattern per stream);
//! - after `handle_timeout(now)` no timer is still due at `now`;
//! - delivering everything in zero virtual time ends (no ACK storm).
#![no_main]

mod common;

use common::{exchange_all, next_timer, take_front, trace, Input, Queue, Queues};
use hollywood_tcp::{
    CcAlgorithm, Config, Connection, DelayedAckConfig, Event, Instant, KeepaliveConfig, State,
};
use hollywood_wire::{
    build_tcp_ip, parse_tcp_ip, SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp,
};
use libfuzzer_sys::fuzz_target;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// Most opcodes run per input (keeps each run short).
const MAX_OPS: usize = 400;
/// Largest injected payload.
const MAX_INJECT: usize = 3000;

/// Byte `k` of a stream: one pattern per direction (`tag`), defined for
/// every offset so that injected payloads agree with real ones.
fn pattern(tag: u8, k: u32) -> u8 {
    (k.wrapping_mul(2_654_435_761) >> 24) as u8 ^ tag
}

/// One side: the connection plus what the harness knows about it.
struct Side {
    conn: Connection,
    addr: SocketAddr,
    /// Pattern tag of the stream this side sends.
    tag: u8,
    /// Initial send sequence number (from its SYN).
    iss: Option<SeqNumber>,
    /// Bytes handed to `send` so far.
    written: u32,
    /// Bytes returned by `recv` so far.
    read: u32,
    /// Latest TSval it sent.
    last_tsval: u32,
    state: State,
    closed_event: bool,
    /// The peer's ISN as this side knows it is the real one: false once an
    /// injected SYN reached it in SYN-SENT (a blind forged SYN-ACK with the
    /// right ACK is accepted there, RFC 9293 §3.10.7.3, and then shifts
    /// the stream offsets).
    trusted: bool,
}

impl Side {
    fn new(conn: Connection, addr: SocketAddr, tag: u8) -> Side {
        let state = conn.state();
        Side {
            conn,
            addr,
            tag,
            iss: None,
            written: 0,
            read: 0,
            last_tsval: 0,
            state,
            closed_event: false,
            trusted: true,
        }
    }
}

/// RFC 9293 §3.3.2 figure 5 (plus simultaneous open, RST/abort/timeouts
/// to CLOSED): whether `to` can follow `from` after any number of moves.
fn reachable(from: State, to: State) -> bool {
    use State::*;
    let next = |s: State| -> &'static [State] {
        match s {
            SynSent => &[SynReceived, Established, Closed],
            SynReceived => &[Established, FinWait1, CloseWait, Closed],
            Established => &[FinWait1, CloseWait, Closed],
            FinWait1 => &[FinWait2, Closing, TimeWait, Closed],
            FinWait2 => &[TimeWait, Closed],
            CloseWait => &[LastAck, Closed],
            Closing => &[TimeWait, Closed],
            LastAck => &[Closed],
            TimeWait => &[Closed],
            Closed | Listen => &[],
        }
    };
    let mut seen = vec![from];
    let mut k = 0;
    while k < seen.len() {
        for &n in next(seen[k]) {
            if !seen.contains(&n) {
                seen.push(n);
            }
        }
        k += 1;
    }
    seen.contains(&to)
}

struct World {
    now: Instant,
    c: Side,
    s: Side,
    /// Segments from client to server, and back.
    c2s: Queue,
    s2c: Queue,
    buf: Vec<u8>,
}

impl World {
    fn side(&mut self, client: bool) -> (&mut Side, &mut Side) {
        if client {
            (&mut self.c, &mut self.s)
        } else {
            (&mut self.s, &mut self.c)
        }
    }

    /// A handcrafted segment for `to_client` (or the server), sent as if by
    /// its peer.
    fn inject(&mut self, to_client: bool, inp: &mut Input) {
        let flags_b = inp.u8();
        let mode = inp.u8();
        let seq_off = inp.u16() as i16 as i32;
        let ack_off = inp.u16() as i16 as i32;
        let window = inp.u16();
        let opts = inp.u8();
        let len = (inp.u16() as usize) % (MAX_INJECT + 1);
        let now = self.now;
        let (me, peer) = self.side(to_client);
        let mut flags = TcpFlags(flags_b & 0x2f); // FIN SYN RST PSH URG
        if flags_b & 0x10 == 0 {
            flags |= TcpFlags::ACK; // ACK on unless bit 4 says otherwise
        }
        let seq = if mode & 1 != 0 {
            SeqNumber(inp.u32())
        } else {
            me.conn.rcv_nxt() + seq_off.max(0) as usize - (-seq_off.min(0)) as usize
        };
        let ack = if mode & 2 != 0 {
            SeqNumber(inp.u32())
        } else {
            me.conn.snd_una() + ack_off.max(0) as usize - (-ack_off.min(0)) as usize
        };
        let mut options = TcpOptions::default();
        if opts & 1 != 0 {
            let d = inp.u8() as i8 as i32;
            let e = inp.u8() as u32;
            options.timestamp = Some(Timestamp {
                tsval: peer.last_tsval.wrapping_add(d as u32),
                tsecr: me.last_tsval.wrapping_sub(e),
            });
        }
        if opts & 2 != 0 {
            let n = (inp.u8() % 4) as usize + 1;
            let mut blocks = [SackBlock::default(); 4];
            for b in blocks.iter_mut().take(n) {
                let l = inp.u16() as i16 as i32;
                let w = inp.u16() as usize;
                let left = me.conn.snd_una() + l.max(0) as usize - (-l.min(0)) as usize;
                *b = SackBlock {
                    left,
                    right: left + w,
                };
            }
            options.set_sacks(&blocks[..n]);
        }
        if opts & 4 != 0 {
            options.mss = Some(inp.u16());
        }
        if opts & 8 != 0 {
            options.window_scale = Some(inp.u8() % 16);
        }
        options.sack_permitted = opts & 16 != 0;
        // Payload bytes agree with the peer's stream at their offset.
        let data_seq = seq + flags.syn() as usize;
        let base = peer.iss.map_or(SeqNumber(0), |i| i + 1);
        let off = data_seq.diff(base) as u32;
        let payload: Vec<u8> = (0..len as u32)
            .map(|i| pattern(peer.tag, off.wrapping_add(i)))
            .collect();
        let repr = TcpRepr {
            src_port: peer.addr.port(),
            dst_port: me.addr.port(),
            seq,
            ack,
            flags,
            window,
            urgent: if flags_b & 0x20 != 0 { window } else { 0 },
            options,
        };
        if flags.syn() && me.conn.state() == State::SynSent {
            me.trusted = false;
        }
        if trace() {
            eprintln!(
                "inject to {}: {repr:?} len {}",
                if to_client { "client" } else { "server" },
                payload.len()
            );
        }
        me.conn.handle_segment(now, &repr, &payload);
        if trace() {
            eprintln!("  -> {:?}", me.conn);
        }
    }

    fn send(&mut self, client: bool, n: usize) {
        let (me, _) = self.side(client);
        let data: Vec<u8> = (0..n as u32)
            .map(|i| pattern(me.tag, me.written.wrapping_add(i)))
            .collect();
        if let Ok(k) = me.conn.send(&data) {
            assert!(k <= n);
            me.written = me.written.wrapping_add(k as u32);
        }
    }

    fn recv(&mut self, client: bool) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(16 * 1024, 0);
        let (me, peer) = self.side(client);
        for _ in 0..64 {
            match me.conn.recv(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if !me.trusted => me.read = me.read.wrapping_add(n as u32),
                Ok(n) => {
                    for (i, &b) in buf[..n].iter().enumerate() {
                        let k = me.read.wrapping_add(i as u32);
                        assert_eq!(
                            b,
                            pattern(peer.tag, k),
                            "recv returned a wrong byte at offset {k}"
                        );
                    }
                    me.read = me.read.wrapping_add(n as u32);
                }
            }
        }
        self.buf = buf;
    }

    fn timeout(&mut self) {
        let now = self.now;
        for client in [true, false] {
            let (me, _) = self.side(client);
            if me.conn.poll_timeout().is_some_and(|t| t <= now) {
                me.conn.handle_timeout(now);
                assert!(
                    me.conn.poll_timeout().is_none_or(|t| t > now),
                    "a timer is still due right after handle_timeout"
                );
            }
        }
    }
}

impl Queues for World {
    fn idle(&self) -> bool {
        self.c2s.is_empty() && self.s2c.is_empty()
    }

    /// Drain output and events of both sides and check every invariant.
    fn settle(&mut self) {
        for client in [true, false] {
            let now = self.now;
            let mut out = Vec::new();
            let (me, _) = self.side(client);
            let mut payload = Vec::new();
            let mut guard = 0;
            while let Some(r) = me.conn.poll_transmit(now, &mut payload) {
                guard += 1;
                assert!(guard < 100_000, "poll_transmit never returns None");
                check_segment(me, &r, &payload);
                out.push((r, payload.clone()));
            }
            check_state(me);
            let q = if client { &mut self.c2s } else { &mut self.s2c };
            q.extend(out);
            // Keep memory bounded: a peer that never reads drops the oldest.
            while q.len() > 4096 {
                q.pop_front();
            }
        }
    }

    /// Deliver the front segment of one queue.
    fn deliver(&mut self, to_client: bool, copy: bool) {
        let q = if to_client {
            &mut self.s2c
        } else {
            &mut self.c2s
        };
        let Some((r, p)) = take_front(q, copy) else {
            return;
        };
        let now = self.now;
        let (me, _) = self.side(to_client);
        if trace() {
            eprintln!(
                "deliver to {}: {r:?} len {}",
                if to_client { "client" } else { "server" },
                p.len()
            );
        }
        me.conn.handle_segment(now, &r, &p);
    }
}

/// Per-segment checks on output of `me`.
fn check_segment(me: &mut Side, r: &TcpRepr, payload: &[u8]) {
    let c = &me.conn;
    // Emit → parse round trip through whole IP packets.
    let pkt = build_tcp_ip(c.local(), c.remote(), r, payload);
    let parsed = parse_tcp_ip(&pkt).expect("engine emitted an unparsable packet");
    // Exact: the engine never asks for more SACK blocks than fit.
    assert_eq!(parsed.tcp, *r, "header changed in an emit/parse round trip");
    assert_eq!(parsed.payload, payload);
    if let Some(ts) = r.options.timestamp {
        me.last_tsval = ts.tsval;
    }
    if r.flags.syn() {
        assert!(payload.is_empty(), "data on a SYN");
        assert!(r.options.mss.is_some_and(|m| m == c.local_mss()));
        if let Some(i) = me.iss {
            assert_eq!(i, r.seq, "ISS changed");
        }
        me.iss = Some(r.seq);
        return;
    }
    if r.flags.rst() {
        return;
    }
    let st = c.state();
    if st.is_synchronized() || st == State::Closed {
        assert!(r.flags.ack(), "segment without ACK in {st}");
        assert!(
            payload.len() <= c.negotiated().smss,
            "{} > SMSS",
            payload.len()
        );
        let end = r.seq + payload.len() + r.flags.fin() as usize;
        if st != State::Closed {
            assert!(r.seq.diff(c.snd_una()) >= -1, "segment below SND.UNA - 1");
            assert!(end.diff(c.snd_nxt()) <= 0, "segment beyond SND.NXT");
            assert_eq!(r.ack, c.rcv_nxt(), "ACK field is not RCV.NXT");
        }
    }
}

/// Per-step checks on `me`.
fn check_state(me: &mut Side) {
    let c = &mut me.conn;
    let st = c.state();
    assert!(
        reachable(me.state, st),
        "illegal transition {} -> {}",
        me.state,
        st
    );
    me.state = st;
    assert!(c.snd_una() <= c.snd_nxt(), "SND.UNA beyond SND.NXT");
    assert!(
        c.send_buffered() <= c.config().send_buffer,
        "send buffer overfull"
    );
    assert!(
        c.bytes_in_flight() <= c.send_buffered() + 1,
        "{} in flight > {} buffered + FIN",
        c.bytes_in_flight(),
        c.send_buffered()
    );
    while let Some(e) = c.poll_event() {
        assert!(!me.closed_event, "event {e:?} after Closed");
        if e == Event::Closed {
            me.closed_event = true;
        }
    }
    if me.closed_event {
        assert_eq!(st, State::Closed, "Closed reported in {st}");
    }
}

fn config(b0: u8, b1: u8) -> Config {
    let sizes = [2 * 1024, 16 * 1024, 64 * 1024, 1 << 20];
    Config {
        sack: b0 & 1 != 0,
        timestamps: b0 & 2 != 0,
        window_scaling: b0 & 4 != 0,
        consistent_segmentation: b0 & 8 != 0,
        nagle: b0 & 16 != 0,
        delayed_ack: DelayedAckConfig {
            enabled: b0 & 32 != 0,
            ..DelayedAckConfig::default()
        },
        cc: if b0 & 64 != 0 {
            CcAlgorithm::NewReno
        } else {
            CcAlgorithm::Cubic
        },
        send_buffer: sizes[(b1 & 3) as usize],
        recv_buffer: sizes[((b1 >> 2) & 3) as usize],
        dsack: b1 & 16 == 0,
        limited_transmit: b1 & 32 == 0,
        keepalive: (b1 & 64 != 0).then_some(KeepaliveConfig {
            idle: Duration::from_secs(5),
            interval: Duration::from_secs(1),
            probes: 3,
        }),
        max_retransmissions: 6,
        mss: if b1 & 128 != 0 { 536 } else { 1460 },
        ..Config::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let (b0, b1, b2) = (inp.u8(), inp.u8(), inp.u8());
    // RACK-TLP (default on) off for the client or the server by b2 bits.
    // BBR (always paced) for both ends by the top bit of b2.
    let bbr = |c: Config| {
        if b2 & 0x80 != 0 {
            Config {
                cc: CcAlgorithm::Bbr,
                ..c
            }
        } else {
            c
        }
    };
    let ccfg = bbr(Config {
        rack: b2 & 0x20 == 0,
        ..config(b0, b1)
    });
    // The server differs in a few switches so negotiation varies.
    let scfg = bbr(Config {
        rack: b2 & 0x40 == 0,
        ..config(b0 ^ (b2 & 0x1f), b1 ^ (b2 & 0x0c))
    });
    let v6 = b0 & 128 != 0;
    let (ca, sa): (SocketAddr, SocketAddr) = if v6 {
        (
            "[fd00::1]:40000".parse().unwrap(),
            "[fd00::2]:80".parse().unwrap(),
        )
    } else {
        (
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:80".parse().unwrap(),
        )
    };
    let now = Instant::from_nanos(1_000_000_000);
    // ISNs spread over the sequence space, some just below the wrap.
    let iss = u32::from(b2).wrapping_mul(0x0101_0101);
    let mut client =
        Connection::connect(now, ccfg, ca, sa, SeqNumber(iss.wrapping_add(0xFFFF_F000)));
    let mut payload = Vec::new();
    let syn = client
        .poll_transmit(now, &mut payload)
        .expect("no SYN from an active open");
    // Passive open from the client's SYN (RFC 9293 §3.10.7.2).
    let server = Connection::accept(now, scfg, sa, ca, SeqNumber(!iss), &syn);
    let mut w = World {
        now,
        c: Side::new(client, ca, 0x5a),
        s: Side::new(server, sa, 0xc3),
        c2s: VecDeque::new(),
        s2c: VecDeque::new(),
        buf: Vec::new(),
    };
    w.c.iss = Some(syn.seq);
    w.settle();

    let mut ops = 0;
    while !inp.done() && ops < MAX_OPS {
        ops += 1;
        let op = inp.u8();
        let client = op & 0x80 != 0;
        if trace() {
            eprintln!("op {} client={client} at {:?}", op & 0x7f, w.now);
        }
        match op & 0x7f {
            // Deliver, drop, duplicate, reorder on one queue.
            0..=15 => w.deliver(client, false),
            16..=19 => {
                let q = if client { &mut w.s2c } else { &mut w.c2s };
                q.pop_front();
            }
            20..=21 => w.deliver(client, true),
            22..=23 => {
                let q = if client { &mut w.s2c } else { &mut w.c2s };
                if q.len() >= 2 {
                    q.swap(0, 1);
                }
            }
            // Injected segments.
            24..=47 => w.inject(client, &mut inp),
            // Time.
            48..=55 => {
                w.now += Duration::from_micros(u64::from(inp.u16()) * 100);
                w.timeout();
            }
            56..=59 => {
                let next = next_timer(w.c.conn.poll_timeout(), w.s.conn.poll_timeout());
                if let Some(t) = next {
                    w.now = w.now.max(t);
                }
                w.timeout();
            }
            // Application commands.
            60..=75 => {
                let n = inp.u16() as usize % 20_000;
                w.send(client, n);
            }
            76..=87 => w.recv(client),
            88..=89 => {
                let (me, _) = w.side(client);
                me.conn.close();
            }
            90 => {
                let (me, _) = w.side(client);
                me.conn.abort();
            }
            // Run honestly for a while: deliver everything, read, and let
            // 5 ms pass per round.
            _ => {
                let rounds = inp.u8() % 32 + 1;
                for _ in 0..rounds {
                    exchange_all(&mut w, 20_000);
                    w.recv(true);
                    w.recv(false);
                    w.now += Duration::from_millis(5);
                    w.timeout();
                    w.settle();
                }
            }
        }
        w.settle();
    }
});
