//! Receiver side of the intermediary layer (thesis §4.3): finds complete
//! frames in segments as they arrive, reassembles frames split over several
//! segments in a sparse buffer keyed by sequence number, verifies them,
//! removes duplicates and releases ordered sub-streams in order.
//!
//! # Model
//!
//! The sender's byte stream is a sequence of frames `00 COBS(..) 00`, each
//! with its own two markers, separated by any number of zero bytes
//! (padding). Positions are TCP sequence numbers, unwrapped internally to
//! 64 bits. A *run* is a maximal sequence of non-zero bytes; a run whose two
//! bounding zeros and all bytes are known is a *candidate* and is decoded at
//! once, wherever its bytes came from (thesis §4.3: "The intermediary layer
//! scans incoming segments for complete messages, delineated by the COBS
//! framing markers"). So a segment holding whole frames yields them without
//! waiting for anything else: no head-of-line blocking.
//!
//! Only bytes that may still become part of a frame are buffered ("fragment
//! reassembly buffer", thesis §4.3): runs missing a marker, the markers next
//! to them, and candidates that failed verification (a later retransmission
//! may overwrite part of them and complete a good frame). Bytes of a
//! verified frame, including its markers, are discarded at once.
//!
//! # Inconsistent bytes
//!
//! A retransmission may carry different bytes for a range already buffered
//! (an inconsistent retransmission, thesis §4.2, or a cache replaying old
//! bytes, thesis §4.5). **Newer bytes replace older ones** for the
//! overlapping range. A frame assembled from a mix of versions fails its
//! CRC32C (thesis §8.3.1) and is counted in `crc_rejected`, never delivered.
//!
//! # Bounds
//!
//! - fragment bytes: `max_buffered` (each buffered piece is charged
//!   [`PIECE_OVERHEAD`] bytes on top of its length); beyond it the lowest
//!   pieces are evicted (`evicted_bytes`);
//! - a run longer than the longest possible frame is dropped (`too_large`);
//! - [`Deframer::advance_floor`] drops fragments that can no longer complete;
//! - duplicates: one entry per delivered frame whose opening marker is
//!   still in play (at or above the floor, or in the fragment straddling
//!   it), at most `max_dedup_entries` (see below);
//! - ordered sub-streams: `ordered_max_waiting` messages per sub-stream and
//!   `ordered_max_waiting_bytes` in total, each message charged its payload
//!   plus [`PIECE_OVERHEAD`] (then the gap is skipped).
//!
//! # Exactly once
//!
//! Each message id is sent at exactly one stream position (its frame's
//! opening marker) for the whole connection; a copy of a frame is the same
//! bytes arriving again at the same position (a retransmission, or an
//! overlapping segment handed up again, thesis §4.3). So a delivered frame
//! is remembered as `(position, id)` for as long as a copy of it can still
//! be decoded, and never refused because its id is far from others (ids
//! are burned by messages that expire in the sender's queue, and an
//! inconsistent retransmission puts a newer id at an older position).
//! Pushed bytes below the floor are trimmed *before* processing and only
//! the fragment straddling the floor is kept below it, so an entry whose
//! opener is below `min(floor, lowest buffered byte)` can never match again
//! and is purged. With [`Deframer::push_stream`] every byte arrives once
//! and the floor follows the stream: entries last for one push. With
//! [`Deframer::push_segment`] they span the receive window: at most one
//! per frame between RCV.NXT and the highest byte received (plus rewrites
//! of a range by inconsistent retransmissions), each costing about
//! [`DEDUP_ENTRY_COST`] bytes. The default bound, [`DEFAULT_MAX_DEDUP_ENTRIES`],
//! covers a 4 MiB receive window of empty messages (18 bytes per frame).
//! Beyond the bound the lowest entries are evicted and a frame starting
//! below an evicted position is refused (`dedup_refused`): never twice.
//! Defensively, a frame whose id was delivered at *another* position (a
//! sender that repeats a message, which the thesis's replacement scheme
//! cannot rule out, §4.2) is dropped too (`repeated_ids`): while that
//! position is in play, or while the id is among the 2^16 at and behind
//! the highest id delivered (a fixed 8 KiB bitset that only recognises
//! ids and never refuses one).
//!
//! Worst-case work per pushed segment is linear in the segment plus the
//! fragments next to it; frames arriving in order cost linear time overall.

use std::collections::{BTreeMap, VecDeque};

use crate::cobs::{find_zero, rfind_zero};
use crate::dedup::{Seen, Verdict};
use crate::frame::{decode_run_into, max_body_len, FrameError, DEFAULT_MAX_PAYLOAD};
use crate::ordered::Ordered;

/// Bytes charged per buffered piece on top of its length (map node, vector
/// header, allocator slack), so that many tiny fragments cannot exceed the
/// memory bound.
pub const PIECE_OVERHEAD: usize = 64;

/// Default bound on buffered fragment bytes: 4 MiB.
pub const DEFAULT_MAX_BUFFERED: usize = 4 << 20;

/// Default bound on remembered delivered frames (de-duplication entries):
/// 2^18, enough for a 4 MiB receive window of empty messages (18 bytes on
/// the wire each).
pub const DEFAULT_MAX_DEDUP_ENTRIES: usize = 1 << 18;

/// Approximate heap bytes of one de-duplication entry.
pub const DEDUP_ENTRY_COST: usize = crate::dedup::ENTRY_COST;

/// Internal position of the first sequence number seen: far from zero so
/// that earlier sequence numbers unwrap without underflow.
const BASE: u64 = 1 << 40;

/// [`Deframer`] settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeframerConfig {
    /// Largest accepted payload (default 1 MiB). Larger frames are dropped
    /// and counted in `too_large`.
    pub max_payload: usize,
    /// Bound on buffered fragment bytes (default 4 MiB); should be at least
    /// twice the longest frame.
    pub max_buffered: usize,
    /// Most delivered frames remembered for de-duplication (default
    /// [`DEFAULT_MAX_DEDUP_ENTRIES`], about [`DEDUP_ENTRY_COST`] bytes
    /// each). Only frames whose opening marker is at or above the floor
    /// are remembered, so the owner of a [`Deframer::push_segment`]
    /// deframer should size this for its receive window divided by the
    /// smallest frame, and must call [`Deframer::advance_floor`]. When it
    /// is exceeded the lowest entries are evicted and frames starting
    /// below them are refused (`dedup_refused`).
    pub max_dedup_entries: usize,
    /// Ordered messages that may wait for their predecessor, per sub-stream
    /// (default 256).
    pub ordered_max_waiting: usize,
    /// Bytes that may wait in all ordered sub-streams together, each
    /// message charged its payload plus [`PIECE_OVERHEAD`] (default 4 MiB:
    /// at most 65 536 empty messages).
    pub ordered_max_waiting_bytes: usize,
    /// Longest time an ordered message waits for its predecessor before the
    /// gap is skipped (default `None`: only the bounds above skip gaps).
    pub ordered_max_wait_ns: Option<u64>,
}

impl Default for DeframerConfig {
    fn default() -> Self {
        DeframerConfig {
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_buffered: DEFAULT_MAX_BUFFERED,
            max_dedup_entries: DEFAULT_MAX_DEDUP_ENTRIES,
            ordered_max_waiting: 256,
            ordered_max_waiting_bytes: 4 << 20,
            ordered_max_wait_ns: None,
        }
    }
}

/// A message delivered to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Sub-stream identifier.
    pub substream: u16,
    /// Message identifier assigned by the sender.
    pub id: u32,
    /// The message's sequence number on its sub-stream, if the sender
    /// wrote one (`SEQ` flag).
    pub substream_seq: Option<u32>,
    /// The payload, exactly as sent.
    pub payload: Vec<u8>,
    /// `now_ns` of the push that completed the message.
    pub arrival_ns: u64,
    /// Whether the message was sent on an ordered sub-stream.
    pub ordered: bool,
}

/// Receiver counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeframerStats {
    /// Frames that passed COBS, length, CRC32C, version and size checks.
    pub frames_ok: u64,
    /// Messages handed out by [`Deframer::poll_message`].
    pub delivered: u64,
    /// Candidates whose CRC32C did not match (corrupted or spliced).
    pub crc_rejected: u64,
    /// Candidates that were not valid COBS.
    pub cobs_errors: u64,
    /// Candidates shorter than a header plus CRC.
    pub too_short: u64,
    /// Verified frames of an unknown version or with reserved flags.
    pub bad_version: u64,
    /// Frames (complete or not) longer than `max_payload` allows.
    pub too_large: u64,
    /// Verified frames whose id was already delivered: a copy at the same
    /// stream position (retransmission, overlapping segment), or see
    /// `repeated_ids`.
    pub duplicates_dropped: u64,
    /// Of `duplicates_dropped`: the id was delivered at another stream
    /// position (a sender that sent one id twice; the thesis's replacement
    /// scheme can, a sender that sends each id at one position never
    /// does).
    pub repeated_ids: u64,
    /// De-duplication entries evicted because of `max_dedup_entries`.
    pub dedup_evicted: u64,
    /// Verified frames refused because they start below an evicted
    /// de-duplication entry, so they might be copies of a delivered frame
    /// (0 unless `dedup_evicted` > 0). No frame is ever refused for its
    /// id's distance from other ids.
    pub dedup_refused: u64,
    /// Fragment bytes evicted because of `max_buffered`.
    pub evicted_bytes: u64,
    /// Fragment bytes dropped by [`Deframer::advance_floor`].
    pub floor_dropped_bytes: u64,
    /// Zero bytes between frames that were neither a frame's marker nor
    /// next to unknown bytes (padding), counted per arrival.
    pub padding_bytes: u64,
    /// Ordered messages dropped because their place in the chain was
    /// already passed or taken.
    pub ordered_late: u64,
    /// Times an ordered sub-stream hit a waiting bound.
    pub ordered_overflow: u64,
    /// Gaps skipped on ordered sub-streams (bounds or timeout).
    pub ordered_skipped: u64,
    /// Gauge: fragment bytes buffered now.
    pub buffered_bytes: u64,
    /// Gauge: fragment pieces buffered now.
    pub buffered_pieces: u64,
    /// Gauge: bytes charged for ordered messages waiting for their
    /// predecessor: payload plus [`PIECE_OVERHEAD`] per message.
    pub ordered_waiting_bytes: u64,
    /// Gauge: ordered messages waiting for their predecessor.
    pub ordered_waiting: u64,
    /// Gauge: de-duplication entries held now.
    pub dedup_entries: u64,
}

/// Receiver counters of one sub-stream ([`Deframer::substream_stats`]).
///
/// Counted when a message is first verified (after de-duplication, before
/// ordered release, so an ordered message later dropped as late, counted
/// in [`DeframerStats::ordered_late`], is counted here as received).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubstreamStats {
    /// Messages received on the sub-stream (with or without a sequence
    /// number).
    pub received: u64,
    /// Of `received`: messages that carried a sequence number.
    pub with_seq: u64,
    /// Highest sequence number received (serial-number order, RFC 1982
    /// style, so it wraps from 2^32−1 to 0); `None` before the first one.
    pub highest_seq: Option<u32>,
    /// Sequence numbers from 0 up to `highest_seq` not received (yet):
    /// lost, expired at the sender, or still on their way (a late arrival
    /// reduces it). Counts across wraps of the sequence number. Assumes a
    /// sender that numbers each message once (copies are removed by id
    /// before they are counted).
    pub missing: u64,
}

/// Internal per-sub-stream record: a few words, at most one per sub-stream.
#[derive(Debug, Clone, Copy, Default)]
struct SubRecord {
    received: u64,
    with_seq: u64,
    /// Highest sequence number, unwrapped (counts every wrap).
    highest: Option<u64>,
    /// Sequence numbers received at or below `highest` (all those not
    /// behind the first one seen by more than it is from 0).
    counted: u64,
}

impl SubRecord {
    fn record(&mut self, seq: Option<u32>) {
        self.received += 1;
        let Some(seq) = seq else {
            return;
        };
        self.with_seq += 1;
        let Some(high) = self.highest else {
            self.highest = Some(u64::from(seq));
            self.counted = 1;
            return;
        };
        // Serial arithmetic: within 2^31 of the highest, either side.
        let d = i64::from(seq.wrapping_sub(high as u32) as i32);
        match high.checked_add_signed(d) {
            Some(u) if d > 0 => {
                self.highest = Some(u);
                self.counted += 1;
            }
            // At or behind the highest, but not before sequence number 0.
            Some(_) => self.counted += 1,
            None => {}
        }
    }

    fn stats(&self) -> SubstreamStats {
        SubstreamStats {
            received: self.received,
            with_seq: self.with_seq,
            highest_seq: self.highest.map(|h| h as u32),
            missing: self
                .highest
                .map_or(0, |h| (h + 1).saturating_sub(self.counted)),
        }
    }
}

/// A buffered run of known bytes.
#[derive(Debug)]
struct Piece {
    buf: Vec<u8>,
    /// Offset of the last zero byte in `buf`.
    last_zero: Option<usize>,
}

/// What became of a candidate run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Two adjacent zeros: no run.
    Empty,
    /// Verified (delivered, duplicate, refused, bad version or too large):
    /// its bytes and markers are dropped.
    Consumed,
    /// Failed verification: kept for a later overwrite.
    Kept,
}

/// What lies on one side of a zero byte, for deciding whether to keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Unknown bytes: the zero may be a marker for what arrives later.
    Unknown,
    /// A consumed frame: the zero was its marker.
    Consumed,
    /// A buffered run that needs the zero as its marker.
    Needs,
    /// Another zero, or bytes that do not need this one.
    Nothing,
}

/// The bytes around one arrival: `lp` (buffered, ending where the segment
/// starts), the segment, `rp` (buffered, starting where it ends).
struct View<'a> {
    vs: u64,
    lp: &'a [u8],
    s: u64,
    seg: &'a [u8],
    e: u64,
    rp: &'a [u8],
}

impl View<'_> {
    fn ve(&self) -> u64 {
        self.e + self.rp.len() as u64
    }

    fn byte(&self, p: u64) -> u8 {
        if p < self.s {
            self.lp[(p - self.vs) as usize]
        } else if p < self.e {
            self.seg[(p - self.s) as usize]
        } else {
            self.rp[(p - self.e) as usize]
        }
    }

    /// `[a, b)` as one slice, if it lies within one part.
    fn slice(&self, a: u64, b: u64) -> Option<&[u8]> {
        if b <= self.s {
            Some(&self.lp[(a - self.vs) as usize..(b - self.vs) as usize])
        } else if a >= self.s && b <= self.e {
            Some(&self.seg[(a - self.s) as usize..(b - self.s) as usize])
        } else if a >= self.e {
            Some(&self.rp[(a - self.e) as usize..(b - self.e) as usize])
        } else {
            None
        }
    }

    /// `[a, b)` in up to three pieces (lp's, the segment's, rp's), in
    /// order, none empty.
    fn parts(&self, a: u64, b: u64) -> ([&[u8]; 3], usize) {
        let mut out: [&[u8]; 3] = [&[]; 3];
        let mut k = 0;
        if a < self.s {
            out[k] = &self.lp[(a - self.vs) as usize..(b.min(self.s) - self.vs) as usize];
            k += 1;
        }
        if b > self.s && a < self.e {
            out[k] =
                &self.seg[(a.max(self.s) - self.s) as usize..(b.min(self.e) - self.s) as usize];
            k += 1;
        }
        if b > self.e {
            out[k] = &self.rp[(a.max(self.e) - self.e) as usize..(b - self.e) as usize];
            k += 1;
        }
        (out, k)
    }
}

/// Verification, de-duplication, ordering and the output queue.
#[derive(Debug)]
struct Sink {
    max_payload: usize,
    scratch: Vec<u8>,
    dedup: Seen,
    ordered: Ordered,
    queue: VecDeque<Message>,
    stats: DeframerStats,
    subs: BTreeMap<u16, SubRecord>,
}

impl Sink {
    /// Decodes and verifies one candidate whose opening marker is at
    /// `pos`; returns whether it is consumed.
    fn evaluate(&mut self, run: &[&[u8]], pos: u64, now_ns: u64) -> bool {
        match decode_run_into(run, self.max_payload, &mut self.scratch) {
            Ok((h, range)) => {
                self.stats.frames_ok += 1;
                let (verdict, evicted) = self.dedup.check(pos, h.id);
                self.stats.dedup_evicted += evicted;
                match verdict {
                    Verdict::New => {
                        self.subs
                            .entry(h.substream)
                            .or_default()
                            .record(h.substream_seq);
                        let msg = Message {
                            substream: h.substream,
                            id: h.id,
                            substream_seq: h.substream_seq,
                            payload: self.scratch[range].to_vec(),
                            arrival_ns: now_ns,
                            ordered: h.ordered_prev.is_some(),
                        };
                        match h.ordered_prev {
                            Some(prev) => {
                                self.ordered
                                    .offer(msg, prev, &mut self.queue, &mut self.stats)
                            }
                            None => self.queue.push_back(msg),
                        }
                    }
                    Verdict::Duplicate => self.stats.duplicates_dropped += 1,
                    Verdict::Repeated => {
                        self.stats.duplicates_dropped += 1;
                        self.stats.repeated_ids += 1;
                    }
                    Verdict::Unverifiable => self.stats.dedup_refused += 1,
                }
                true
            }
            Err(FrameError::Crc { .. }) => {
                self.stats.crc_rejected += 1;
                false
            }
            Err(FrameError::Cobs(_)) => {
                self.stats.cobs_errors += 1;
                false
            }
            Err(FrameError::TooShort { .. }) => {
                self.stats.too_short += 1;
                false
            }
            Err(FrameError::BadVersion { .. }) => {
                self.stats.bad_version += 1;
                true
            }
            Err(FrameError::TooLarge { .. }) => {
                self.stats.too_large += 1;
                true
            }
        }
    }
}

/// Receiver side: segments in, verified messages out.
///
/// Method families (call in this order each time the caller wakes):
/// 1. input: [`push_segment`](Self::push_segment) for segments with their
///    TCP sequence numbers, in any order (out-of-order delivery, thesis
///    §4.3), or [`push_stream`](Self::push_stream) for an ordered byte
///    stream (a kernel TCP socket, thesis §4.4) — not both on one
///    deframer; [`advance_floor`](Self::advance_floor) after the in-order
///    point advanced; [`handle_timeout`](Self::handle_timeout) at the time
///    [`poll_timeout`](Self::poll_timeout) asked for;
/// 2. output: [`poll_message`](Self::poll_message) until `None`.
///
/// Deterministic: no clock, no randomness; time is the `now_ns` argument.
#[derive(Debug)]
pub struct Deframer {
    config: DeframerConfig,
    max_run: u64,
    /// Buffered pieces by unwrapped start position; never overlapping,
    /// never adjacent.
    pieces: BTreeMap<u64, Piece>,
    buffered: usize,
    /// (sequence number, position) of the highest byte end seen.
    seq_ref: Option<(u32, u64)>,
    floor: Option<u64>,
    stream_seq: u32,
    zeros: Vec<u64>,
    runs: Vec<Run>,
    plan: Vec<(u64, u64, Option<u64>)>,
    sink: Sink,
}

impl Default for Deframer {
    fn default() -> Self {
        Deframer::new(DeframerConfig::default())
    }
}

impl Deframer {
    /// A deframer with the given settings.
    #[must_use]
    pub fn new(config: DeframerConfig) -> Self {
        Deframer {
            config,
            max_run: max_body_len(config.max_payload) as u64,
            pieces: BTreeMap::new(),
            buffered: 0,
            seq_ref: None,
            floor: None,
            stream_seq: 0,
            zeros: Vec::new(),
            runs: Vec::new(),
            plan: Vec::new(),
            sink: Sink {
                max_payload: config.max_payload,
                scratch: Vec::new(),
                dedup: Seen::new(config.max_dedup_entries),
                ordered: Ordered::new(config.ordered_max_waiting, config.ordered_max_waiting_bytes),
                queue: VecDeque::new(),
                stats: DeframerStats::default(),
                subs: BTreeMap::new(),
            },
        }
    }

    /// The settings.
    #[must_use]
    pub fn config(&self) -> &DeframerConfig {
        &self.config
    }

    /// Counters and gauges.
    #[must_use]
    pub fn stats(&self) -> DeframerStats {
        let mut s = self.sink.stats;
        s.buffered_bytes = self.buffered as u64;
        s.buffered_pieces = self.pieces.len() as u64;
        s.ordered_waiting_bytes = self.sink.ordered.waiting_bytes() as u64;
        s.ordered_waiting = self.sink.ordered.waiting_messages() as u64;
        s.dedup_entries = self.sink.dedup.len() as u64;
        s
    }

    /// Counters of sub-stream `substream`, if a message was received on it.
    #[must_use]
    pub fn substream_stats(&self, substream: u16) -> Option<SubstreamStats> {
        self.sink.subs.get(&substream).map(SubRecord::stats)
    }

    /// Counters of every sub-stream a message was received on, by
    /// sub-stream id (one small record per sub-stream: at most 65 536).
    pub fn substreams(&self) -> impl Iterator<Item = (u16, SubstreamStats)> + '_ {
        self.sink.subs.iter().map(|(&k, r)| (k, r.stats()))
    }

    /// Fragment bytes buffered now.
    #[must_use]
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// The next verified message, if any.
    #[must_use]
    pub fn poll_message(&mut self) -> Option<Message> {
        let m = self.sink.queue.pop_front()?;
        self.sink.stats.delivered += 1;
        Some(m)
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called
    /// (only with `ordered_max_wait_ns` set and ordered messages waiting).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let wait = self.config.ordered_max_wait_ns?;
        self.sink
            .ordered
            .oldest_arrival()
            .map(|t| t.saturating_add(wait))
    }

    /// Releases ordered messages that waited `ordered_max_wait_ns` for a
    /// predecessor, skipping the gap.
    pub fn handle_timeout(&mut self, now_ns: u64) {
        if let Some(wait) = self.config.ordered_max_wait_ns {
            let Sink {
                ordered,
                queue,
                stats,
                ..
            } = &mut self.sink;
            ordered.expire(now_ns, wait, queue, stats);
        }
    }

    /// The byte stream ended (the peer's FIN was delivered): no missing
    /// predecessor can arrive any more, so every ordered message still
    /// waiting for one is released now, in chain order, skipping the gaps
    /// (counted in `ordered_skipped`), instead of being lost with the
    /// stream. Bytes of frames that never completed stay undelivered.
    /// Idempotent; later input is still accepted.
    pub fn finish(&mut self) {
        let Sink {
            ordered,
            queue,
            stats,
            ..
        } = &mut self.sink;
        ordered.expire(u64::MAX, 0, queue, stats);
    }

    fn unwrap_seq(&mut self, seq: u32) -> u64 {
        match self.seq_ref {
            None => {
                self.seq_ref = Some((seq, BASE));
                BASE
            }
            Some((rs, rp)) => rp.wrapping_add_signed(i64::from(seq.wrapping_sub(rs) as i32)),
        }
    }

    /// Feeds one segment: `bytes` start at TCP sequence number `seq`
    /// (wrapping). Segments may arrive in any order, repeat, overlap with
    /// different boundaries, or carry different bytes for a range seen
    /// before (newer bytes win). Bytes below the floor are ignored.
    pub fn push_segment(&mut self, seq: u32, bytes: &[u8], now_ns: u64) {
        // Large segments are taken in slices (a resegmentation, which the
        // reassembly is built for) to bound the per-push scratch memory.
        const CHUNK: usize = 16 * 1024;
        let mut seq = seq;
        for chunk in bytes.chunks(CHUNK) {
            self.push_one(seq, chunk, now_ns);
            seq = seq.wrapping_add(chunk.len() as u32);
        }
        self.handle_timeout(now_ns);
    }

    fn push_one(&mut self, seq: u32, bytes: &[u8], now_ns: u64) {
        if bytes.is_empty() {
            return;
        }
        let mut s = self.unwrap_seq(seq);
        let e = s + bytes.len() as u64;
        if self.seq_ref.is_some_and(|(_, rp)| e > rp) {
            self.seq_ref = Some((seq.wrapping_add(bytes.len() as u32), e));
        }
        let mut data = bytes;
        if let Some(f) = self.floor {
            if e <= f {
                return;
            }
            if s < f {
                data = &data[(f - s) as usize..];
                s = f;
            }
        }
        self.insert(s, data, now_ns);
        self.enforce_cap();
        self.purge_dedup();
    }

    /// Forgets the delivered frames whose opening marker lies below the
    /// horizon: the floor, or the lowest buffered byte if that is lower.
    /// Pushed bytes below the floor are trimmed before they are processed
    /// and nothing below the horizon is buffered, so no copy of such a
    /// frame can be decoded any more.
    fn purge_dedup(&mut self) {
        let Some(f) = self.floor else {
            return;
        };
        let h = self.pieces.first_key_value().map_or(f, |(&k, _)| k.min(f));
        self.sink.dedup.purge_below(h);
    }

    /// Feeds the next bytes of an ordered byte stream (a plain TCP socket,
    /// thesis §4.4: "neither side modified"). Chunk boundaries are
    /// arbitrary. The stream starts at offset 0.
    pub fn push_stream(&mut self, bytes: &[u8], now_ns: u64) {
        let seq = self.stream_seq;
        self.push_segment(seq, bytes, now_ns);
        self.stream_seq = seq.wrapping_add(bytes.len() as u32);
        self.advance_floor(self.stream_seq);
    }

    /// Declares that every byte before sequence number `seq` has been
    /// received and pushed (the engine passes RCV.NXT). Fragments that can
    /// no longer complete are dropped: everything before the last zero
    /// below `seq`, or, if the run reaching `seq` has no opening marker
    /// left, that run as well. Later bytes below `seq` are ignored.
    pub fn advance_floor(&mut self, seq: u32) {
        let f = self.unwrap_seq(seq);
        if self.floor.is_some_and(|old| old >= f) {
            return;
        }
        self.floor = Some(f);
        self.drop_below_floor(f);
        self.purge_dedup();
    }

    /// Drops the fragments that can no longer complete once every byte
    /// below `f` has arrived.
    fn drop_below_floor(&mut self, f: u64) {
        let Some((&ps, p)) = self.pieces.range(..f).next_back() else {
            return;
        };
        let pe = ps + p.buf.len() as u64;
        // Pieces wholly before `ps` are followed by bytes that were received
        // and consumed (or evicted): they can never complete.
        let upper = self.pieces.split_off(&ps);
        let lower = std::mem::replace(&mut self.pieces, upper);
        for (_, q) in lower {
            self.drop_bytes(q.buf.len());
        }
        if pe < f {
            // Same for `ps` itself when it ends before the floor.
            if let Some(q) = self.pieces.remove(&ps) {
                self.drop_bytes(q.buf.len());
            }
            return;
        }
        let Some(mut q) = self.pieces.remove(&ps) else {
            return;
        };
        let below = (f - ps) as usize;
        let last_below = match q.last_zero {
            Some(z) if z < below => Some(z),
            _ => rfind_zero(&q.buf[..below]),
        };
        // Keep from the last zero below the floor; without one, the run
        // reaching the floor has lost its opener: drop to its end.
        let cut = match last_below {
            Some(z) => z,
            None => match find_zero(&q.buf[below..]) {
                Some(z) => below + z,
                None => q.buf.len(),
            },
        };
        self.drop_bytes(cut);
        if cut == q.buf.len() {
            return;
        }
        q.buf.drain(..cut);
        q.last_zero = q.last_zero.and_then(|z| z.checked_sub(cut));
        self.pieces.insert(ps + cut as u64, q);
    }

    fn drop_bytes(&mut self, n: usize) {
        self.buffered -= n;
        self.sink.stats.floor_dropped_bytes += n as u64;
    }

    fn enforce_cap(&mut self) {
        while self.buffered + self.pieces.len() * PIECE_OVERHEAD > self.config.max_buffered {
            let Some((_, p)) = self.pieces.pop_first() else {
                break;
            };
            self.buffered -= p.buf.len();
            self.sink.stats.evicted_bytes += p.buf.len() as u64;
        }
    }

    /// Removes `[s, e)` from the buffer (the new bytes replace it).
    fn remove_range(&mut self, s: u64, e: u64) {
        if let Some((&ps, p)) = self.pieces.range(..s).next_back() {
            let pe = ps + p.buf.len() as u64;
            if pe > s {
                if let Some(mut p) = self.pieces.remove(&ps) {
                    if pe > e {
                        let cut = (e - ps) as usize;
                        let tail = p.buf[cut..].to_vec();
                        let last_zero = p.last_zero.and_then(|z| z.checked_sub(cut));
                        self.pieces.insert(
                            e,
                            Piece {
                                buf: tail,
                                last_zero,
                            },
                        );
                    }
                    self.buffered -= (pe.min(e) - s) as usize;
                    let keep = (s - ps) as usize;
                    p.buf.truncate(keep);
                    if p.last_zero.is_some_and(|z| z >= keep) {
                        p.last_zero = rfind_zero(&p.buf);
                    }
                    self.pieces.insert(ps, p);
                }
            }
        }
        while let Some((&ps, _)) = self.pieces.range(s..e).next() {
            let Some(mut p) = self.pieces.remove(&ps) else {
                break;
            };
            let pe = ps + p.buf.len() as u64;
            self.buffered -= (pe.min(e) - ps) as usize;
            if pe > e {
                let cut = (e - ps) as usize;
                p.buf.drain(..cut);
                p.last_zero = p.last_zero.and_then(|z| z.checked_sub(cut));
                self.pieces.insert(e, p);
            }
        }
    }

    /// Inserts the bytes `seg` at `s`, decodes every candidate they
    /// complete, and buffers what may still be needed.
    fn insert(&mut self, s: u64, seg: &[u8], now_ns: u64) {
        let e = s + seg.len() as u64;
        self.remove_range(s, e);
        let lp = match self.pieces.range(..s).next_back() {
            Some((&ps, p)) if ps + p.buf.len() as u64 == s => {
                self.pieces.remove(&ps).map(|p| (ps, p))
            }
            _ => None,
        };
        let rp = self.pieces.remove(&e);
        self.buffered -=
            lp.as_ref().map_or(0, |(_, p)| p.buf.len()) + rp.as_ref().map_or(0, |p| p.buf.len());

        let Deframer {
            zeros,
            runs,
            plan,
            sink,
            max_run,
            ..
        } = self;
        let max_run = *max_run;
        let view = View {
            vs: lp.as_ref().map_or(s, |(ps, _)| *ps),
            lp: lp.as_ref().map_or(&[][..], |(_, p)| &p.buf[..]),
            s,
            seg,
            e,
            rp: rp.as_ref().map_or(&[][..], |p| &p.buf[..]),
        };
        let (vs, ve) = (view.vs, view.ve());
        let lp_last = lp
            .as_ref()
            .and_then(|(ps, p)| p.last_zero.map(|z| ps + z as u64));
        let rp_last = rp.as_ref().and_then(|p| p.last_zero.map(|z| e + z as u64));

        // Every zero that can bound a run touching the new bytes: the last
        // buffered zero before them, theirs, and the first one after them.
        zeros.clear();
        zeros.extend(lp_last);
        let mut off = 0;
        while let Some(i) = find_zero(&seg[off..]) {
            zeros.push(s + (off + i) as u64);
            off += i + 1;
        }
        let rp_first = rp_last
            .and_then(|_| find_zero(view.rp))
            .map(|z| e + z as u64);
        zeros.extend(rp_first);

        plan.clear();
        let m = zeros.len();
        if m == 0 {
            // One run with no marker known on either side.
            if ve - vs > max_run {
                sink.stats.too_large += 1;
            } else {
                plan.push((vs, ve, None));
            }
        } else {
            // Decode the candidates, in stream order.
            runs.clear();
            for w in zeros.windows(2) {
                let (a, b) = (w[0], w[1]);
                let run = if b == a + 1 {
                    Run::Empty
                } else if b - a - 1 > max_run {
                    // Longer than any frame: refuse without gathering it.
                    sink.stats.too_large += 1;
                    Run::Consumed
                } else {
                    // A run across pieces is decoded from them in place.
                    let ok = match view.slice(a + 1, b) {
                        Some(sl) => sink.evaluate(&[sl], a, now_ns),
                        None => {
                            let (parts, k) = view.parts(a + 1, b);
                            sink.evaluate(&parts[..k], a, now_ns)
                        }
                    };
                    if ok {
                        Run::Consumed
                    } else {
                        Run::Kept
                    }
                };
                runs.push(run);
            }
            for i in 1..m.saturating_sub(1) {
                let z = zeros[i];
                if z >= s && z < e && zeros[i - 1] + 1 == z && zeros[i + 1] == z + 1 {
                    sink.stats.padding_bytes += 1;
                }
            }

            // Edges: bytes before the first and after the last zero. Old
            // buffered bytes beyond lp's last / rp's first zero stay; a new
            // marker-less run longer than any frame goes.
            let (z0, zl) = (zeros[0], zeros[m - 1]);
            let mut left_kept = z0 > vs;
            if left_kept && lp_last.is_none() && z0 - vs > max_run {
                left_kept = false;
                sink.stats.too_large += 1;
            }
            let mut right_kept = zl + 1 < ve;
            if right_kept && rp_first.is_none() && ve - zl - 1 > max_run {
                right_kept = false;
                sink.stats.too_large += 1;
            }
            let left_side = if z0 == vs {
                Side::Unknown
            } else if left_kept && view.byte(z0 - 1) != 0 {
                Side::Needs
            } else {
                Side::Nothing
            };
            let right_side = if zl + 1 == ve {
                Side::Unknown
            } else if right_kept && view.byte(zl + 1) != 0 {
                Side::Needs
            } else {
                Side::Nothing
            };
            let side = |r: Run| match r {
                Run::Empty => Side::Nothing,
                Run::Consumed => Side::Consumed,
                Run::Kept => Side::Needs,
            };

            let mut kept = |a: u64, b: u64| match plan.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => plan.push((a, b, None)),
            };
            if left_kept {
                kept(vs, z0);
            }
            for i in 0..m {
                let z = zeros[i];
                let l = if i == 0 { left_side } else { side(runs[i - 1]) };
                let r = if i == m - 1 {
                    right_side
                } else {
                    side(runs[i])
                };
                let keep = l == Side::Needs
                    || r == Side::Needs
                    || (l == Side::Unknown && r != Side::Consumed)
                    || (r == Side::Unknown && l != Side::Consumed);
                if keep {
                    kept(z, z + 1);
                }
                if i + 1 < m && runs[i] == Run::Kept {
                    kept(z + 1, zeros[i + 1]);
                }
            }
            if right_kept {
                kept(zl + 1, ve);
            }
        }

        // The last zero of each piece to be stored: rp's own, else the
        // largest listed zero in range, else one in lp's older prefix.
        for (a, b, last) in plan.iter_mut() {
            *last = rp_last.filter(|z| *z >= *a && *z < *b).or_else(|| {
                let k = zeros.partition_point(|z| z < b);
                (k > 0 && zeros[k - 1] >= *a).then(|| zeros[k - 1])
            });
            if last.is_none() && *a < s {
                if let Some(lz) = lp_last {
                    let hi = (*b).min(lz);
                    if *a < hi {
                        *last = rfind_zero(&view.lp[(*a - vs) as usize..(hi - vs) as usize])
                            .map(|i| *a + i as u64);
                    }
                }
            }
        }

        // Store.
        let (lp_start, mut lp_buf) = match lp {
            Some((ps, p)) => (ps, Some(p.buf)),
            None => (s, None),
        };
        let rp_buf = rp.map(|p| p.buf);
        for &(a, b, last) in plan.iter() {
            let mut buf = match lp_buf.take() {
                Some(mut v) if a == lp_start && a < s => {
                    v.truncate((b.min(s) - a) as usize);
                    v
                }
                other => {
                    let mut v = Vec::with_capacity((b - a) as usize);
                    if let Some(lb) = other.as_ref() {
                        if a < s {
                            v.extend_from_slice(
                                &lb[(a - lp_start) as usize..(b.min(s) - lp_start) as usize],
                            );
                        }
                    }
                    lp_buf = other;
                    v
                }
            };
            if b > s && a < e {
                buf.extend_from_slice(&seg[(a.max(s) - s) as usize..(b.min(e) - s) as usize]);
            }
            if b > e {
                if let Some(rb) = rp_buf.as_ref() {
                    buf.extend_from_slice(&rb[(a.max(e) - e) as usize..(b - e) as usize]);
                }
            }
            self.buffered += buf.len();
            self.pieces.insert(
                a,
                Piece {
                    buf,
                    last_zero: last.map(|z| (z - a) as usize),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests;
