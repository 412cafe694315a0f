//! TCP Hollywood sender policy: per-message metadata, expiry before
//! sequence numbers and inconsistent retransmissions (thesis §4.2).
//!
//! The engine (the thesis's "kernel extensions") keeps, for every message
//! the intermediary layer queued, the metadata that never goes on the wire:
//! lifetime, the one message it depends on, its sub-stream, and its state.
//!
//! # Where a message waits: outside the sequence space
//!
//! A message first waits in a **message queue in front of the engine**,
//! without sequence numbers. It is given sequence numbers (its *slot*: the
//! range its framed bytes occupy in the TCP byte stream) only when the
//! engine is about to transmit it — the idea of Linux `TCP_NOTSENT_LOWAT`
//! taken to its end: nothing unsent sits in the send buffer. A message whose
//! lifetime has passed, or will have passed by the time it arrives
//! (`now + one-way delay > deadline`, the thesis's liveness test with the
//! engine's one-way delay estimate, `Connection::one_way_delay`), while it waits
//! is dropped there ([`ExpiryReason::NotSent`]) and never reaches the wire —
//! unless a live message depends on it or it is the latest dependency target
//! of a sub-stream (the dependency override, below), or it is on an ordered
//! sub-stream. This is an extension of thesis §4.2, which only acts at
//! retransmission time; it has no wire-visible effect at all.
//!
//! # Priorities: which queued message gets the next slot
//!
//! Each message has a [`MessageMeta::priority`] (higher is more urgent, the
//! scale of the QUIC stream priority, 0 by default). When the engine is
//! about to transmit new data, the next slot goes to the queued message of
//! the highest priority, the oldest among equals — so a congested
//! connection sends a keyframe queued behind a hundred P-frames first.
//! What must go before it still does:
//!
//! * on an ordered sub-stream (`replaceable = false`) the oldest queued
//!   ordered message of that sub-stream goes first (the receiver releases
//!   an ordered sub-stream in chain order; an urgent message later on the
//!   chain lifts the ones before it);
//! * a message whose dependency (thesis §4.2) is still queued brings it
//!   first (a P-frame is useless ahead of its I-frame);
//! * the liveness test applies to the chosen message as it does to the
//!   head: an expired one is dropped ([`ExpiryReason::NotSent`]) and the
//!   choice is made again. Expired messages behind the head that are not
//!   chosen are dropped when they reach the head (or are chosen), as
//!   before.
//!
//! A message's id is its place in the order of queueing, not on the wire:
//! slots are then out of id order, which the receiver's duplicate filter
//! allows (it works by stream position, docs/PROTOCOL.md §5), and the
//! table finds a slot by id through a map of slot starts. Replacement
//! candidates for an inconsistent retransmission are chosen by priority
//! too, then closest to expiry. With one priority on the connection the
//! head is always chosen: the byte stream, the slots and every report are
//! exactly those of a connection without priorities. The priority never
//! goes on the wire and standard TCP (no message table) is untouched.
//!
//! # What a retransmission carries
//!
//! When standard TCP would retransmit a range (RACK / duplicate ACKs / SACK
//! loss detection, tail loss probe or RTO), the engine asks this table what
//! to put in each whole slot inside it:
//!
//! * a message that will still arrive in time (`now + one-way delay ≤ deadline`)
//!   is retransmitted as it was;
//! * a message that a live message depends on, or that is the latest
//!   dependency target declared on a sub-stream (so a future message may
//!   still depend on it), is retransmitted as it was (dependency override,
//!   thesis §4.2: "A message will always be retransmitted if there are
//!   unexpired messages that depend on it, or if a new message could be
//!   queued that depends on it"). A dependent counts whether or not it was
//!   delivered already: a delivered P-frame needs its I-frame more, not
//!   less;
//! * bytes that complete a partially acknowledged or SACKed message are
//!   retransmitted as they were (fragment rule);
//! * otherwise the slot is rewritten — an *inconsistent retransmission* —
//!   with a live message taken from the message queue (the one closest to
//!   expiry that fits, among the first [`CANDIDATE_SCAN`] queued), padded
//!   with zero bytes to exactly the slot's length (the intermediary layer's
//!   framing treats zero bytes between frames as empty frames, see
//!   docs/PROTOCOL.md), or, when no live message fits, with zero bytes only.
//!
//! *Deviations from thesis §4.2* (docs/HOLLYWOOD.md gives the reasons):
//! replacement candidates are only live messages that have not been sent
//! (the thesis also allows expired and in-flight ones, which the receiver
//! can only discard or already has); an expired message with no live
//! candidate is replaced by padding rather than retransmitted as it was
//! (never send what is known to be useless).
//!
//! A message that travels in another message's slot (a *carried* message)
//! keeps its place in the queue and still gets a slot of its own when its
//! turn comes, unless it expires first (thesis §4.2 sends a replacement at
//! its own transmission time too). The carried copy is an early delivery;
//! the own slot is the guaranteed one: a cache that replays the original
//! bytes of a retransmitted range (thesis §4.5) or a delayed original that
//! the receiver keeps instead (a spurious retransmission) then costs
//! nothing. A message id can so appear at two stream positions; the
//! receiver keeps the first copy and drops the other (docs/PROTOCOL.md §5).
//!
//! # Accounting
//!
//! Every message the table accepted ends acknowledged (its slot, or the
//! slot carrying it, was cumulatively ACKed or SACKed) or reported once
//! through [`MessageTable::poll_expired`]; never neither (nothing is lost
//! silently), never reported twice. A carried message is accounted for by
//! its own slot (or its place in the queue) while that lasts, and by its
//! copy once it expires in the queue or its own slot *gives it up*
//! (rewritten on retransmission, skipped, or replaced before its first
//! send) while the copy is unresolved — in flight, SACKed or acknowledged:
//! the copy's slot acknowledged, the message was delivered; the copy
//! replaced, displaced (a D-SACK of its slot, below) or skipped, the
//! message is reported then. Only a message with no unresolved copy is
//! reported by its own slot, and not again whatever becomes of an earlier
//! copy. The outcome so depends on what the sender learnt of the copy's
//! slot, not on whether the own slot gave up before or after the copy's
//! ACK arrived (reporting at the give-up told the application of messages
//! whose copy then turned out acknowledged). A slot that gave its message
//! up never accounts for it again, even when a D-SACK or the middlebox
//! fallback gives the slot its first bytes back: that D-SACK may be for
//! a delayed original that arrived after the rewrite, the receiver
//! holding the rewrite.
//!
//! An acknowledgment of a rewritten slot is ambiguous: it may be for the
//! bytes sent before the rewrite (their ACK was lost, or they were only
//! delayed). Two rules keep that from losing a message silently:
//!
//! * the D-SACK (RFC 2883) for the slot carrying a copy means the receiver
//!   already held that range, so the copy did not arrive: the message is
//!   reported [`ExpiryReason::Displaced`] unless its own slot still
//!   accounts for it (our receiver sends one D-SACK per duplicate range, as
//!   Linux does, so two duplicates answered by one ACK cannot hide one);
//! * a copy put into a slot by a retransmission *without evidence* that the
//!   receiver lacked the range — an RTO (and the go-back-N after it) or a
//!   tail loss probe, which a lost ACK explains as well as a lost segment —
//!   counts for nothing when the slot is acknowledged, unless the
//!   cumulative ACK echoes that retransmission's own timestamp (TS.Recent
//!   moves only on a segment at the left edge of the receiver's window,
//!   never on a duplicate) and no other segment that ACK covers went out
//!   with the same TSval (the engine passes no echo then: the segments of
//!   one RTO burst share a millisecond, and the one that reached the left
//!   edge may be another), and only when the copy's slot is the whole
//!   segment (the echo says the segment reached the left edge, not that
//!   the receiver lacked every slot in it). A copy counts as trusted only
//!   on a connection with SACK, where a D-SACK can refute it. Otherwise
//!   the message keeps (or regains) its own way to
//!   the receiver, and is reported `Displaced` if it has none left. Retransmissions after duplicate ACKs, SACK or
//!   RACK loss marks or a partial ACK carry trusted copies.
//!
//! The price is on the other side: a message may be reported although its
//! copy did arrive (an RTO's copy that got through, or a copy whose D-SACK
//! was for a later duplicate). The table errs towards a report, since a
//! report of a message that arrived costs the application a little waste
//! and a silent loss costs it a hang. What remains unseen, for a message
//! its copy settles: a trusted copy whose range the receiver got anyway
//! from a delayed original (reordering beyond RACK's window) *and* whose
//! D-SACK is lost, and a cache that replays the original bytes of the
//! copy's range (thesis §4.5).
//!
//! # Middlebox fallback (thesis §4.5)
//!
//! A middlebox that drops retransmissions whose payload differs from the
//! original would stall a rewritten slot for ever. When one slot has been
//! sent inconsistently [`FALLBACK_AFTER`] times and is still not
//! acknowledged, the table stops rewriting on this connection: every
//! rewritten, unacknowledged slot gets its original bytes back (the next
//! retransmission is consistent) and [`MessageTable::take_fallback`] says so
//! once (the engine raises `Event::RewritingStopped`). Expiry before
//! sequence numbers goes on, since it is invisible on the wire.
//!
//! # Cost
//!
//! Lookups are binary searches over slots kept in sequence order (a
//! slot's start found by its id in a hash map) and over the queue (in id
//! order); an ACK or SACK touches only the slots it newly covers (the
//! engine reports newly SACKed segments, not repeated blocks). Choosing by
//! priority costs nothing while the head has the highest queued priority,
//! else a scan of the queue up to the chosen message and a removal from
//! the middle of the queue (both bounded by the send buffer: the queue
//! holds at most its capacity in frames).
//! Memory: per message its metadata; frames only while queued, and the
//! original bytes of slots that were rewritten on retransmission.

use crate::time::Instant;
use hollywood_wire::SeqNumber;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Application metadata for one message (thesis §4.2: lifetime and a single
/// dependency; only the sub-stream, inside the framed bytes, goes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageMeta {
    /// Message id as assigned by the intermediary layer (32-bit, wrapping;
    /// increasing in the order messages are queued).
    pub id: u32,
    /// Time from queueing until the message is useless at the receiver.
    /// `None` = never expires (fully reliable message).
    pub lifetime: Option<Duration>,
    /// The id of the one message this message depends on. Within a
    /// sub-stream, dependencies are non-decreasing (serial arithmetic,
    /// thesis §4.2, scoped per sub-stream so that interleaved chains — two
    /// video layers on two sub-streams — can each be expressed).
    pub depends_on: Option<u32>,
    /// `false` exempts the message from replacement and from expiry in the
    /// queue (ordered sub-streams, whose receiver waits for every message
    /// in order).
    pub replaceable: bool,
    /// The sub-stream the message travels on (thesis §4.2); scopes the
    /// dependency rule.
    pub substream: u16,
    /// Which queued message gets sequence numbers first: the highest
    /// `priority`, then the oldest (see *Priorities* in the module doc).
    /// The same scale as `hollywood_transport::OutMessage::priority` (the
    /// QUIC stream priority): higher is sent first, 0 by default. A
    /// connection whose messages all have one priority sends them in the
    /// order they were queued. Never on the wire.
    pub priority: i8,
}

/// Why the sender gave up on a message (it will not be sent or resent).
///
/// The sender cannot always know whether an earlier transmission arrived
/// (see `Accounting` in the module doc): in rare cases a reported message
/// did reach the receiver (the receiver's own delivery is the truth; a
/// report errs towards "not delivered", a silent loss never happens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExpiryReason {
    /// Its slot was retransmitted carrying message `by` instead, or zero
    /// padding only (`by = None`).
    Replaced {
        /// The replacement message id.
        by: Option<u32>,
    },
    /// Its lifetime passed (or would have by its arrival) while it waited
    /// in the message queue: it never got sequence numbers and never
    /// reached the wire.
    NotSent,
    /// Its lifetime passed after it got sequence numbers but before its
    /// slot's first transmission, which carried message `by` (or padding).
    ExpiredBeforeSend {
        /// The replacement message id.
        by: Option<u32>,
    },
    /// It travelled in another message's slot, but that slot's content
    /// did not stay (the receiver reported holding the range already, a
    /// D-SACK, or the sender restored the slot's original bytes after
    /// stopping inconsistent retransmissions).
    Displaced,
    /// Its slot failed the liveness test when it would have been
    /// retransmitted, and the sender skipped the range instead, announcing
    /// the gap in the next-expected option ([TCP-video] §7.2's deadline TCP,
    /// [`HollywoodConfig::seq_gap_deadlines`](crate::HollywoodConfig::seq_gap_deadlines)).
    Skipped,
}

/// Reported to the application (RFC 9622 calls this *Expired*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExpiredMessage {
    /// The message that expired.
    pub id: u32,
    /// What happened to it.
    pub reason: ExpiryReason,
}

/// Errors when queueing a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaError {
    /// `depends_on` is lower than a dependency declared earlier on the same
    /// sub-stream (thesis §4.2 requires non-decreasing dependencies).
    DecreasingDependency,
    /// A message cannot depend on itself or on a later message.
    ForwardDependency,
    /// Empty message.
    Empty,
    /// The id is not after the previous message's id: ids must increase in
    /// the order messages are queued (the intermediary layer's framer
    /// assigns them that way).
    IdOrder,
}

impl core::fmt::Display for MetaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            MetaError::DecreasingDependency => {
                "message dependencies must be non-decreasing within a sub-stream"
            }
            MetaError::ForwardDependency => "a message may only depend on an earlier message",
            MetaError::Empty => "empty message",
            MetaError::IdOrder => "message ids must increase in the order messages are queued",
        })
    }
}
impl std::error::Error for MetaError {}

/// Counters for the Hollywood sender policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HollywoodStats {
    /// Slots rewritten on retransmission (with a message or padding).
    pub ir_sent: u64,
    /// Of those, rewritten with zero padding only (no live message fitted).
    pub ir_padded: u64,
    /// Slots rewritten at their first transmission (their message expired
    /// after it got sequence numbers; rare, since messages get sequence
    /// numbers only when they are about to be sent).
    pub replaced_at_first_tx: u64,
    /// Messages dropped from the message queue before they got sequence
    /// numbers (expired while waiting).
    pub not_sent: u64,
    /// Retransmissions kept because a live/future message depends on them.
    pub kept_for_dependency: u64,
    /// Retransmissions kept by the fragment rule.
    pub kept_for_fragment: u64,
    /// Retransmissions kept because the message was still live (or is on an
    /// ordered sub-stream).
    pub kept_live: u64,
    /// Rewrites found spurious by D-SACK (the receiver already had the range).
    pub dsack_spurious_rewrites: u64,
    /// Zero padding bytes written.
    pub padding_bytes: u64,
    /// Most messages waiting in the message queue at once.
    pub queue_peak: u64,
    /// Inconsistent retransmissions were stopped on this connection (the
    /// middlebox fallback, see the module doc): 0 or 1.
    pub rewriting_stopped: u64,
}

/// A rewrite of send-buffer bytes the engine must apply before transmitting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// First sequence number to overwrite.
    pub seq: SeqNumber,
    /// The new bytes (replacement frame followed by zero padding, or the
    /// slot's original bytes), exactly the slot's length.
    pub bytes: Vec<u8>,
    /// The slot's current bytes are its first transmission's and must be
    /// kept (hand them to [`MessageTable::set_original`] before applying
    /// the rewrite) for the middlebox fallback.
    pub keep_original: bool,
}

/// How a retransmission came about (see [`MessageTable::on_retransmit`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resend {
    /// The receiver showed that it lacks the range (duplicate ACKs, SACK
    /// or RACK loss marks, a partial ACK); `false` for an RTO (and the
    /// go-back-N after it) or a tail loss probe.
    pub evidence: bool,
    /// The TSval the retransmission carries (RFC 7323), if timestamps are
    /// in use: a cumulative ACK echoing exactly it was sent for this
    /// transmission filling the receiver's hole (TS.Recent moves only on
    /// segments at the left edge of the window, never on duplicates).
    pub tsval: Option<u32>,
    /// The fraction of the connection's data that had to be resent so far
    /// (its loss rate, as the sender sees it): how surprising it is that a
    /// rewritten slot keeps failing (middlebox fallback).
    pub path_loss: f64,
}

impl Resend {
    /// A retransmission after the receiver showed the loss, on a path that
    /// loses nothing else.
    pub const EVIDENT: Resend = Resend {
        evidence: true,
        tsval: None,
        path_loss: 0.0,
    };
}

/// How many replacement candidates are examined from the head of the
/// message queue (bounds the work per retransmission).
pub const CANDIDATE_SCAN: usize = 64;

/// A slot sent inconsistently this many times and still unacknowledged
/// may make the table stop rewriting (middlebox fallback): at least this
/// many, and enough that the path's own loss rate does not explain it
/// ([`FALLBACK_SURPRISE`]). Three is far above what random loss explains
/// (p³ per slot: 2.7·10⁻⁵ at 3 % loss).
pub const FALLBACK_AFTER: u32 = 3;

/// The middlebox fallback needs the failures of one rewritten slot to be
/// this improbable as random loss: `path_loss ^ failures` below it. On a
/// congested path (measured: live video against 80 Mb/s on-off cross
/// traffic into 20 Mb/s, a third of the packets dropped) three failures in
/// a row are normal, and stopping inconsistent retransmissions for the
/// rest of the connection sent stale messages for a minute.
pub const FALLBACK_SURPRISE: f64 = 1e-4;

/// How many acknowledged rewritten slots are remembered for D-SACK matching.
const RECENT_REWRITES: usize = 256;

/// Sentinel deadline of a message that never expires.
const NEVER: u64 = u64::MAX;

/// What a slot holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Occupant {
    /// The slot's own message.
    Own,
    /// Another message, taken from the queue (a carried message).
    Other(u32),
    /// Zero padding only.
    Padding,
}

/// A message that got sequence numbers: its slot.
#[derive(Debug)]
struct Slot {
    seq: SeqNumber,
    len: u32,
    id: u32,
    deadline: u64,
    replaceable: bool,
    occupant: Occupant,
    /// What the first transmission carried (a first-transmission rewrite
    /// may have changed it).
    first_occupant: Occupant,
    /// The first transmission's bytes, kept once the slot is rewritten on
    /// retransmission (middlebox fallback).
    original: Option<Box<[u8]>>,
    /// Retransmissions whose bytes differed from the first transmission.
    inconsistent_sends: u32,
    sent: bool,
    /// Some bytes of the slot ACKed or SACKed (fragment rule).
    partially_received: bool,
    /// The whole slot ACKed or SACKed.
    slot_received: bool,
    /// The slot gave up its own message (rewritten, skipped, or replaced
    /// before its first send): it never accounts for it again, not even
    /// when a D-SACK or the fallback gives the slot its first bytes back
    /// (see [`MessageTable::give_up_own`]).
    given_up: bool,
    /// An Expired event was queued for the slot's own message.
    expired_reported: bool,
}

impl Slot {
    fn end(&self) -> SeqNumber {
        self.seq + self.len as usize
    }
}

/// A message travelling in another message's slot.
#[derive(Debug, Clone, Copy)]
struct Carried {
    deadline: u64,
    /// An acknowledgment of the carrying slot speaks for the copy: the
    /// slot's earlier content cannot have reached the receiver (a first
    /// transmission, or a retransmission after the receiver showed it
    /// lacked the range). `false` after a retransmission that a lost ACK
    /// explains as well (RTO, tail loss probe): the ACK may be for the
    /// bytes sent before, so the copy counts for nothing (see `Accounting`
    /// in the module doc) unless the cumulative ACK echoes `tsval`.
    trusted: bool,
    /// The TSval of the transmission that carried the copy.
    tsval: Option<u32>,
}

/// A message waiting for sequence numbers.
#[derive(Debug)]
struct Queued {
    id: u32,
    frame: Vec<u8>,
    deadline: u64,
    replaceable: bool,
    priority: i8,
    substream: u16,
    depends_on: Option<u32>,
    /// A copy already travels in another message's slot (it still gets a
    /// slot of its own when its turn comes, unless it expires first).
    carried: bool,
    /// A copy of it has been on the wire (in another message's slot).
    placed: bool,
}

fn deadline_of(now: Instant, lifetime: Option<Duration>) -> u64 {
    lifetime.map_or(NEVER, |l| (now + l).as_nanos().min(NEVER - 1))
}

/// thesis §4.2: "the estimate of one-way delay [SRTT/2] is used to
/// determine if the message will arrive within its lifetime".
fn live(deadline: u64, arrival: Instant) -> bool {
    deadline == NEVER || arrival.as_nanos() <= deadline
}

/// The dependency rules of thesis §4.2 for message `id` declaring
/// `depends_on`, given the latest dependency declared before on the same
/// sub-stream: a message may only depend on an earlier message, and
/// dependencies are non-decreasing (32-bit serial order). Shared by the
/// engine's message table and by senders that frame messages without the
/// engine (the message layer over a kernel socket).
pub fn check_dependency(
    id: u32,
    depends_on: Option<u32>,
    latest_dependency: Option<u32>,
) -> Result<(), MetaError> {
    let Some(d) = depends_on else {
        return Ok(());
    };
    if d == id || id_before(id, d) {
        return Err(MetaError::ForwardDependency);
    }
    if latest_dependency.is_some_and(|prev| id_before(d, prev)) {
        return Err(MetaError::DecreasingDependency);
    }
    Ok(())
}

/// Serial-number comparison of message ids (RFC 1982 style, 32 bits).
fn id_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// The per-connection message metadata table (thesis §4.2.1: "maintained in a
/// linked list structure, paired with the data already stored by TCP"),
/// with the message queue in front of the sequence space.
#[derive(Debug, Default)]
pub struct MessageTable {
    /// Messages waiting for sequence numbers, in id order.
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    /// Queued messages per priority (the highest key is the most urgent
    /// queued priority).
    priorities: BTreeMap<i8, u32>,
    /// The message [`MessageTable::head_len_paced`] chose to get sequence
    /// numbers next.
    next: Option<u32>,
    /// Messages with a slot, in sequence order, until the slot is
    /// cumulatively acknowledged (in id order too unless priorities sent a
    /// later message first).
    slots: VecDeque<Slot>,
    /// Where each slot starts, by its message's id (slots are not in id
    /// order once priorities reorder the queue).
    slot_seq: std::collections::HashMap<u32, SeqNumber>,
    /// Messages travelling in another message's slot.
    carried: BTreeMap<u32, Carried>,
    /// Messages whose carried copy was acknowledged while they still have
    /// (or wait for) a slot of their own: already delivered, so their own
    /// slot is not reported when it is replaced.
    copy_delivered: std::collections::BTreeSet<u32>,
    /// Latest dependency target declared per sub-stream.
    latest_dependency: BTreeMap<u16, u32>,
    /// Targets that are the latest of some sub-stream, with how many.
    latest_targets: BTreeMap<u32, u32>,
    /// Per message that later messages depend on: the latest deadline among
    /// its dependents (a dependent's deadline is fixed, so the maximum only
    /// grows; expired dependents no longer matter once it has passed).
    dependents: BTreeMap<u32, u64>,
    /// Id of the last message queued.
    last_id: Option<u32>,
    events: VecDeque<ExpiredMessage>,
    /// Every placement of a message on the wire: (id, start of the range
    /// carrying it, framed length, whether it is the message's first).
    sent: VecDeque<(u32, SeqNumber, u32, bool)>,
    stats: HollywoodStats,
    /// Rewritten slots acknowledged recently: (start, end, carried id). The
    /// D-SACK for a spurious rewrite usually rides on the very ACK that
    /// acknowledges the slot, so the table must remember it a little longer.
    recent_rewrites: VecDeque<(SeqNumber, SeqNumber, Option<u32>)>,
    /// Inconsistent retransmissions stopped (middlebox fallback).
    stopped: bool,
    /// The fallback happened and was not reported yet.
    fallback_pending: bool,
    /// Entries visited by lookups (binary-search probes included): the
    /// table's work, see [`MessageTable::work`].
    work: std::sync::atomic::AtomicU64,
}

/// A connection's message table, made when its first message is queued: a
/// connection that never queues one (a byte stream, or inconsistent
/// retransmissions off) holds a null pointer, not a table. Reads of a
/// table not made yet see an empty one.
#[derive(Debug, Default)]
pub(crate) struct LazyTable(Option<Box<MessageTable>>);

impl std::ops::Deref for LazyTable {
    type Target = MessageTable;

    fn deref(&self) -> &MessageTable {
        static EMPTY: std::sync::OnceLock<MessageTable> = std::sync::OnceLock::new();
        self.0
            .as_deref()
            .unwrap_or_else(|| EMPTY.get_or_init(MessageTable::default))
    }
}

impl LazyTable {
    /// The table, if made (an empty table's updates do nothing: callers
    /// skip them).
    pub(crate) fn get_mut(&mut self) -> Option<&mut MessageTable> {
        self.0.as_deref_mut()
    }

    /// The table, made if it was not.
    pub(crate) fn make(&mut self) -> &mut MessageTable {
        self.0.get_or_insert_with(Box::default)
    }

    /// Whether the table was made (for memory accounting).
    pub(crate) fn is_made(&self) -> bool {
        self.0.is_some()
    }
}

impl MessageTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counters.
    pub fn stats(&self) -> &HollywoodStats {
        &self.stats
    }

    /// Slots and queue entries visited so far by lookups, binary-search
    /// probes included: the table's work, which stays logarithmic per
    /// message however many are in flight (review B6: it was linear per
    /// ACKed slot, O(k·n) per ACK). For tests and benchmarks.
    pub fn work(&self) -> u64 {
        self.work.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn step(&self) {
        self.work.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Messages tracked: queued, in a slot not yet acknowledged, or carried.
    pub fn len(&self) -> usize {
        self.queue.len() + self.slots.len() + self.carried.len()
    }

    /// Nothing queued or tracked.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.slots.is_empty() && self.carried.is_empty()
    }

    /// Messages waiting in the message queue.
    pub fn queued_messages(&self) -> usize {
        self.queue.len()
    }

    /// Framed bytes waiting in the message queue.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Inconsistent retransmissions are still in use on this connection.
    pub fn rewriting(&self) -> bool {
        !self.stopped
    }

    /// Next Expired event for the application.
    pub fn poll_expired(&mut self) -> Option<ExpiredMessage> {
        self.events.pop_front()
    }

    /// Next placement of a message on the wire: its id, the sequence
    /// number where its frame starts, the frame's length, and whether it is
    /// the message's first placement. A message carried in another
    /// message's slot is placed again in its own slot (unless it expires
    /// first), so it has several.
    pub fn poll_sent(&mut self) -> Option<(u32, SeqNumber, u32, bool)> {
        self.sent.pop_front()
    }

    /// `true` once, right after inconsistent retransmissions were stopped
    /// (middlebox fallback).
    pub fn take_fallback(&mut self) -> bool {
        std::mem::take(&mut self.fallback_pending)
    }

    /// Check metadata before the message is queued.
    pub fn check(&self, meta: &MessageMeta, frame_len: usize) -> Result<(), MetaError> {
        if frame_len == 0 {
            return Err(MetaError::Empty);
        }
        if self.last_id.is_some_and(|l| !id_before(l, meta.id)) {
            return Err(MetaError::IdOrder);
        }
        check_dependency(
            meta.id,
            meta.depends_on,
            self.latest_dependency.get(&meta.substream).copied(),
        )
    }

    /// Queue a message (framed bytes) at `now`; its lifetime starts now.
    /// Call [`check`](Self::check) first.
    pub fn enqueue(&mut self, now: Instant, frame: Vec<u8>, meta: MessageMeta) {
        debug_assert!(self.check(&meta, frame.len()).is_ok());
        let deadline = deadline_of(now, meta.lifetime);
        if let Some(d) = meta.depends_on {
            if let Some(prev) = self.latest_dependency.insert(meta.substream, d) {
                if let Some(n) = self.latest_targets.get_mut(&prev) {
                    *n -= 1;
                    if *n == 0 {
                        self.latest_targets.remove(&prev);
                    }
                }
            }
            *self.latest_targets.entry(d).or_insert(0) += 1;
            if self.tracked(d) {
                let e = self.dependents.entry(d).or_insert(0);
                *e = (*e).max(deadline);
            }
        }
        self.last_id = Some(meta.id);
        self.queued_bytes += frame.len();
        *self.priorities.entry(meta.priority).or_insert(0) += 1;
        self.queue.push_back(Queued {
            id: meta.id,
            frame,
            deadline,
            replaceable: meta.replaceable,
            priority: meta.priority,
            substream: meta.substream,
            depends_on: meta.depends_on,
            carried: false,
            placed: false,
        });
        self.stats.queue_peak = self.stats.queue_peak.max(self.queue.len() as u64);
    }

    /// A copy of a message travels in another message's slot.
    pub fn has_carried(&self) -> bool {
        !self.carried.is_empty()
    }

    /// Whether message `id` is still queued, in a slot or carried.
    fn tracked(&self, id: u32) -> bool {
        self.carried.contains_key(&id)
            || self.queue_index(id).is_some()
            || self.slot_index_of_id(id).is_some()
    }

    /// Index of queued message `id` (the queue is in id order).
    fn queue_index(&self, id: u32) -> Option<usize> {
        self.index_of_id(&self.queue, id, |q| q.id)
    }

    /// Index of the slot whose own message is `id`.
    fn slot_index_of_id(&self, id: u32) -> Option<usize> {
        let seq = *self.slot_seq.get(&id)?;
        let i = self.slot_from(seq);
        self.slots
            .get(i)
            .filter(|s| s.seq == seq && s.id == id)
            .map(|_| i)
    }

    /// Index of the entry of `list` (in id order, ids wrapping from the
    /// front's) whose id is `id`: a binary search, each probe counted.
    fn index_of_id<T>(
        &self,
        list: &VecDeque<T>,
        id: u32,
        id_of: impl Fn(&T) -> u32,
    ) -> Option<usize> {
        let front = id_of(list.front()?);
        let key = id.wrapping_sub(front);
        let i = list.partition_point(|e| {
            self.step();
            id_of(e).wrapping_sub(front) < key
        });
        (id_of(list.get(i)?) == id).then_some(i)
    }

    /// Index of the first slot ending after `seq`.
    fn slot_from(&self, seq: SeqNumber) -> usize {
        let Some(front) = self.slots.front().map(|s| s.seq) else {
            return 0;
        };
        let key = seq.diff(front) as i64;
        self.slots.partition_point(|s| {
            self.step();
            (s.end().diff(front) as i64) <= key
        })
    }

    /// thesis §4.2 dependency override (see the module doc).
    fn protected(&self, id: u32, arrival: Instant) -> bool {
        self.latest_targets.contains_key(&id)
            || self.dependents.get(&id).is_some_and(|&d| live(d, arrival))
    }

    fn report(&mut self, id: u32, reason: ExpiryReason) {
        self.events.push_back(ExpiredMessage { id, reason });
    }

    /// Drop expired messages from the head of the queue (thesis §4.2
    /// liveness test, before sequence numbers): replaceable, not protected,
    /// and not live at `arrival`.
    fn purge_queue(&mut self, arrival: Instant) {
        self.purge_queue_paced(arrival, 0, 0.0);
    }

    /// Drops expired messages from the head of the queue, a message's
    /// arrival being `arrival` plus `ns_per_byte` per byte of it beyond
    /// `room`.
    fn purge_queue_paced(&mut self, arrival: Instant, room: usize, ns_per_byte: f64) {
        while let Some(q) = self.queue.front() {
            self.step();
            let later = q.frame.len().saturating_sub(room) as f64 * ns_per_byte;
            let ends = arrival + Duration::from_nanos(later as u64);
            if live(q.deadline, ends) || !q.replaceable || self.protected(q.id, ends) {
                return;
            }
            self.drop_queued(0);
        }
    }

    /// Whether queued message `i` would be dropped by the liveness test
    /// (see [`purge_queue_paced`](Self::purge_queue_paced)).
    fn droppable(&self, i: usize, arrival: Instant, room: usize, ns_per_byte: f64) -> bool {
        let q = &self.queue[i];
        let later = q.frame.len().saturating_sub(room) as f64 * ns_per_byte;
        let ends = arrival + Duration::from_nanos(later as u64);
        !(live(q.deadline, ends) || !q.replaceable || self.protected(q.id, ends))
    }

    /// Take queued message `i` out of the queue.
    fn remove_queued(&mut self, i: usize) -> Queued {
        let q = if i == 0 {
            self.queue.pop_front()
        } else {
            self.queue.remove(i)
        }
        .expect("index in the queue");
        self.queued_bytes -= q.frame.len();
        if let Some(n) = self.priorities.get_mut(&q.priority) {
            *n -= 1;
            if *n == 0 {
                self.priorities.remove(&q.priority);
            }
        }
        q
    }

    /// Drop queued message `i` as expired (never sent): reported
    /// [`ExpiryReason::NotSent`] unless a copy in another message's slot
    /// stands for it.
    fn drop_queued(&mut self, i: usize) {
        let q = self.remove_queued(i);
        if q.carried {
            // Its copy in another message's slot stands for it now.
            self.copy_delivered.remove(&q.id);
            return;
        }
        self.dependents.remove(&q.id);
        self.stats.not_sent += 1;
        self.report(q.id, ExpiryReason::NotSent);
    }

    /// The queued message to get sequence numbers next: the oldest of the
    /// highest priority queued — or what has to go before it: the message
    /// it depends on, if still queued, and on an ordered sub-stream (not
    /// replaceable) the oldest queued ordered message of that sub-stream.
    /// With one priority queued, the head (the order of queueing).
    fn pick(&self) -> Option<usize> {
        let front = self.queue.front()?;
        let top = *self.priorities.keys().next_back()?;
        if front.priority == top {
            return Some(0);
        }
        let mut i = self.queue.iter().position(|q| {
            self.step();
            q.priority == top
        })?;
        loop {
            let q = &self.queue[i];
            if let Some(j) = q.depends_on.and_then(|d| self.queue_index(d)) {
                i = j;
                continue;
            }
            if !q.replaceable {
                let sub = q.substream;
                if let Some(j) = self.queue.range(..i).position(|e| {
                    self.step();
                    !e.replaceable && e.substream == sub
                }) {
                    i = j;
                    continue;
                }
            }
            return Some(i);
        }
    }

    /// Message `id` will still go (or went) on the wire in a slot of its
    /// own that accounts for it: queued, or holding a slot that has not
    /// given it up.
    fn has_own_path(&self, id: u32) -> bool {
        self.queue_index(id).is_some()
            || self
                .slot_index_of_id(id)
                .is_some_and(|i| !self.slots[i].given_up)
    }

    /// Slot `i` gives up its own message (rewritten on retransmission,
    /// skipped, or replaced before its first send). A copy of the message
    /// in another slot, in flight or acknowledged, then settles it, as for
    /// a carried message that expires in the queue: its slot acknowledged
    /// (a trusted or echoed copy), it was delivered; the copy replaced,
    /// displaced (a D-SACK of its slot, an unproven ACK, the fallback) or
    /// skipped, it is reported then. Without a copy it is reported
    /// `reason` now. Either way the slot never accounts for the message
    /// again: a D-SACK that gives the slot its first bytes back may be for
    /// a delayed original that arrived after the rewrite (the receiver then
    /// holds the rewrite), so it proves nothing about the own message.
    fn give_up_own(&mut self, i: usize, reason: ExpiryReason) {
        let s = &mut self.slots[i];
        if std::mem::replace(&mut s.given_up, true) {
            return;
        }
        let id = s.id;
        if self.copy_delivered.contains(&id) || self.carried.contains_key(&id) {
            return;
        }
        self.slots[i].expired_reported = true;
        self.report(id, reason);
    }

    /// The copy of `x` carried in another message's slot is gone
    /// (replaced, displaced, withdrawn): report `x` unless its own slot
    /// still accounts for it.
    fn carried_copy_lost(&mut self, x: u32, reason: ExpiryReason) {
        self.copy_delivered.remove(&x);
        if self.carried.remove(&x).is_none() {
            return;
        }
        if let Some(i) = self.queue_index(x) {
            // Still waiting for its own slot: an ordinary queued message
            // again (sent, or reported if it expires first).
            self.queue[i].carried = false;
        } else if let Some(i) = self.slot_index_of_id(x) {
            // Its own slot gave it up while this copy was in flight (or
            // acknowledged): the copy was its last way to the receiver.
            let s = &mut self.slots[i];
            if s.given_up && !s.expired_reported {
                s.expired_reported = true;
                self.report(x, reason);
            }
        } else {
            self.dependents.remove(&x);
            self.report(x, reason);
        }
    }

    /// The framed length of the message that would get sequence numbers
    /// next, after dropping the expired ones at the head of the queue
    /// (arrival estimated at `now + owd`, `owd` the one-way delay
    /// estimate). `None`: nothing queued.
    pub fn head_len(&mut self, now: Instant, owd: Duration) -> Option<usize> {
        self.head_len_paced(now, owd, 0, 0.0)
    }

    /// [`head_len`](Self::head_len) judging each message by the arrival
    /// of its last byte: after the one-way delay, `ns_per_byte` of sending
    /// time (the inverse of the connection's sending rate) for each of its
    /// bytes beyond the `room` that can go at once. A frame of many
    /// segments that would start in time but end too late is dropped
    /// rather than sent to be discarded.
    pub fn head_len_paced(
        &mut self,
        now: Instant,
        owd: Duration,
        room: usize,
        ns_per_byte: f64,
    ) -> Option<usize> {
        let arrival = now + owd;
        self.purge_queue_paced(arrival, room, ns_per_byte);
        loop {
            let i = self.pick()?;
            // The head passed the liveness test just now; a message chosen
            // from further back by its priority takes it here.
            if i == 0 || !self.droppable(i, arrival, room, ns_per_byte) {
                let q = &self.queue[i];
                self.next = Some(q.id);
                return Some(q.frame.len());
            }
            self.drop_queued(i);
        }
    }

    /// The framed length of the message that would get sequence numbers
    /// next (by priority, then age), expired or not.
    pub fn head_len_peek(&self) -> Option<usize> {
        self.pick().map(|i| self.queue[i].frame.len())
    }

    /// Give the message [`head_len`](Self::head_len) chose (by priority,
    /// then age; the head of the queue if it chose none) its slot at
    /// `seq`; returns its framed bytes for the send buffer. Call after
    /// [`head_len`](Self::head_len) returned `Some`.
    pub fn take_head(&mut self, seq: SeqNumber) -> Option<Vec<u8>> {
        let i = self
            .next
            .take()
            .and_then(|id| self.queue_index(id))
            .unwrap_or(0);
        if self.queue.is_empty() {
            return None;
        }
        let q = self.remove_queued(i);
        debug_assert!(self.slots.back().is_none_or(|s| s.end() == seq));
        self.slot_seq.insert(q.id, seq);
        self.sent
            .push_back((q.id, seq, q.frame.len() as u32, !q.placed));
        self.slots.push_back(Slot {
            seq,
            len: q.frame.len() as u32,
            id: q.id,
            deadline: q.deadline,
            replaceable: q.replaceable,
            occupant: Occupant::Own,
            first_occupant: Occupant::Own,
            original: None,
            inconsistent_sends: 0,
            sent: false,
            partially_received: false,
            slot_received: false,
            given_up: false,
            expired_reported: false,
        });
        Some(q.frame)
    }

    /// The live queued message of the highest priority, then closest to
    /// expiry, that fits `slot_len` (thesis §4.2: "live messages that are
    /// closest to expiry given highest priority"), among the first
    /// [`CANDIDATE_SCAN`].
    fn choose(&self, slot_len: usize, arrival: Instant) -> Option<usize> {
        let mut best: Option<(usize, i8, u64)> = None;
        for (i, q) in self.queue.iter().take(CANDIDATE_SCAN).enumerate() {
            self.step();
            if q.carried || !q.replaceable || q.frame.len() > slot_len || !live(q.deadline, arrival)
            {
                continue;
            }
            if best.is_none_or(|(_, p, d)| q.priority > p || (q.priority == p && q.deadline < d)) {
                best = Some((i, q.priority, q.deadline));
            }
        }
        best.map(|(i, _, _)| i)
    }

    /// Put queued message `cand` (or padding) into slot `idx`; returns the
    /// rewrite to apply.
    fn rewrite(
        &mut self,
        idx: usize,
        cand: Option<usize>,
        retransmission: bool,
        how: Resend,
    ) -> Rewrite {
        let slot_len = self.slots[idx].len as usize;
        let slot_seq = self.slots[idx].seq;
        let mut bytes = Vec::with_capacity(slot_len);
        let occupant = match cand.and_then(|i| self.queue.get_mut(i)) {
            Some(q) => {
                // A copy: the message keeps its place in the queue and
                // still gets a slot of its own (thesis §4.2 sends a
                // replacement at its own turn too), so that nothing is lost
                // when the copy is not what reaches the receiver (a cache
                // replaying the original bytes, thesis §4.5).
                q.carried = true;
                let first = !std::mem::replace(&mut q.placed, true);
                bytes.extend_from_slice(&q.frame);
                let (id, len, deadline) = (q.id, q.frame.len() as u32, q.deadline);
                self.sent.push_back((id, slot_seq, len, first));
                self.carried.insert(
                    id,
                    Carried {
                        deadline,
                        trusted: how.evidence,
                        tsval: how.tsval,
                    },
                );
                Occupant::Other(id)
            }
            None => {
                if retransmission {
                    self.stats.ir_padded += 1;
                }
                Occupant::Padding
            }
        };
        self.stats.padding_bytes += (slot_len - bytes.len()) as u64;
        bytes.resize(slot_len, 0);
        let s = &mut self.slots[idx];
        let keep_original = retransmission && s.original.is_none();
        s.occupant = occupant;
        Rewrite {
            seq: slot_seq,
            bytes,
            keep_original,
        }
    }

    /// Keep `bytes` as the first-transmission content of the slot at `seq`
    /// (see [`Rewrite::keep_original`]).
    pub fn set_original(&mut self, seq: SeqNumber, bytes: Vec<u8>) {
        let i = self.slot_from(seq);
        if let Some(s) = self.slots.get_mut(i).filter(|s| s.seq == seq) {
            if s.original.is_none() {
                s.original = Some(bytes.into_boxed_slice());
            }
        }
    }

    fn occupant_id(occ: Occupant) -> Option<u32> {
        match occ {
            Occupant::Other(x) => Some(x),
            _ => None,
        }
    }

    /// The engine is about to retransmit `[seq, seq+len)` (RACK, fast
    /// retransmit, SACK recovery, TLP or RTO: thesis §4.2, "triggered when
    /// the standard TCP retransmission logic would be triggered"). Returns
    /// the rewrites to apply to the send buffer first (empty = retransmit
    /// as it was).
    ///
    /// `how.evidence`: the receiver showed that it lacks the range
    /// (duplicate ACKs, SACK or RACK loss marks, a partial ACK). Without it
    /// (RTO, tail loss probe) the first transmission may have arrived and
    /// only its ACK been lost, so a message put into a rewritten slot is a
    /// copy whose acknowledgment proves nothing — unless the cumulative ACK
    /// echoes `how.tsval`: it keeps (or regains) its own way to the
    /// receiver, and is reported if it has none left.
    pub fn on_retransmit(
        &mut self,
        now: Instant,
        owd: Duration,
        seq: SeqNumber,
        len: usize,
        how: Resend,
    ) -> Vec<Rewrite> {
        let mut out = Vec::new();
        if self.stopped || self.slots.is_empty() {
            return out;
        }
        let arrival = now + owd;
        self.purge_queue(arrival);
        let end = seq + len;
        let mut i = self.slot_from(seq);
        while i < self.slots.len() {
            self.step();
            let (s_seq, s_end) = (self.slots[i].seq, self.slots[i].end());
            if s_seq >= end {
                break;
            }
            if s_seq < seq || s_end > end {
                // Only part of the slot is being resent: the fragment rule
                // (a slot is replaced whole or not at all).
                self.stats.kept_for_fragment += 1;
                i += 1;
                continue;
            }
            let received = self.slots[i].partially_received || self.slots[i].slot_received;
            // An echo of this segment's TSval says the segment reached the
            // receiver's left edge, not that every slot in it was new
            // there: it speaks for a copy only when the copy's slot is the
            // whole segment (found by the `hollywood_pair` fuzz target: a
            // segment of several slots whose first ones the receiver held).
            let how = Resend {
                tsval: how.tsval.filter(|_| s_seq == seq && s_end == end),
                ..how
            };
            if let Some(r) = self.decide_retransmit(i, arrival, how) {
                out.push(r);
            }
            // Count what this retransmission carries relative to the
            // first transmission, for the middlebox fallback.
            let s = &mut self.slots[i];
            if !received && s.occupant != s.first_occupant {
                s.inconsistent_sends += 1;
                // This send means the previous ones failed: as random loss
                // that has probability path_loss^(sends - 1).
                let failed = s.inconsistent_sends - 1;
                let chance = how.path_loss.clamp(0.0, 1.0).powi(failed as i32);
                if failed >= FALLBACK_AFTER && chance < FALLBACK_SURPRISE {
                    // Rewrites decided above are not applied: the fallback
                    // puts every slot back to what its first transmission
                    // carried.
                    out = self.stop_rewriting();
                    break;
                }
            }
            i += 1;
        }
        out
    }

    /// What slot `i`'s retransmission carries.
    fn decide_retransmit(&mut self, i: usize, arrival: Instant, how: Resend) -> Option<Rewrite> {
        let s = &self.slots[i];
        if s.partially_received || s.slot_received {
            // Fragment rule (thesis §4.2): complete partially received data
            // as it was.
            self.stats.kept_for_fragment += 1;
            return None;
        }
        let slot_len = s.len as usize;
        // The message the slot carries: its own, or another's copy.
        let (id, own, keep) = match s.occupant {
            Occupant::Own => (s.id, true, live(s.deadline, arrival) || !s.replaceable),
            Occupant::Other(x) => {
                let c = *self.carried.get(&x)?;
                (x, false, live(c.deadline, arrival))
            }
            Occupant::Padding => {
                // A padded slot may still carry a live message.
                let cand = self.choose(slot_len, arrival)?;
                let r = self.rewrite(i, Some(cand), true, how);
                self.stats.ir_sent += 1;
                return Some(r);
            }
        };
        if keep {
            self.stats.kept_live += 1;
            return None;
        }
        if self.protected(id, arrival) {
            self.stats.kept_for_dependency += 1;
            return None;
        }
        let cand = self.choose(slot_len, arrival);
        let by = cand.map(|c| self.queue[c].id);
        let r = self.rewrite(i, cand, true, how);
        self.stats.ir_sent += 1;
        if own {
            self.give_up_own(i, ExpiryReason::Replaced { by });
        } else {
            self.carried_copy_lost(id, ExpiryReason::Replaced { by });
        }
        Some(r)
    }

    /// [TCP-video] §7.2's deadline TCP: the engine is about to retransmit
    /// `[seq, seq+len)`. If the range is whole slots, none (partly)
    /// received, and every message in them fails the liveness test at
    /// `now + owd` (expired, replaceable, nothing live depends on it), they
    /// are reported [`ExpiryReason::Skipped`] and the range is to be
    /// skipped: returns true. Otherwise nothing changes and the range is
    /// resent as it was.
    pub fn skip_expired(
        &mut self,
        now: Instant,
        owd: Duration,
        seq: SeqNumber,
        len: usize,
    ) -> bool {
        if self.slots.is_empty() || len == 0 {
            return false;
        }
        let arrival = now + owd;
        let end = seq + len;
        let first = self.slot_from(seq);
        let mut i = first;
        while i < self.slots.len() && self.slots[i].seq < end {
            self.step();
            let s = &self.slots[i];
            if s.seq < seq || s.end() > end || s.partially_received || s.slot_received {
                return false;
            }
            // Contiguous slots only: bytes between two slots (written
            // without the message layer) are no message's to give up.
            if i > first && self.slots[i - 1].end() != s.seq {
                return false;
            }
            let expired = match s.occupant {
                Occupant::Own => {
                    s.replaceable && !live(s.deadline, arrival) && !self.protected(s.id, arrival)
                }
                Occupant::Other(x) => self
                    .carried
                    .get(&x)
                    .is_none_or(|c| !live(c.deadline, arrival) && !self.protected(x, arrival)),
                Occupant::Padding => true,
            };
            if !expired {
                return false;
            }
            i += 1;
        }
        if i == first || self.slots[first].seq != seq || self.slots[i - 1].end() != end {
            return false;
        }
        for k in first..i {
            let s = &mut self.slots[k];
            let occ = std::mem::replace(&mut s.occupant, Occupant::Padding);
            match occ {
                Occupant::Own => self.give_up_own(k, ExpiryReason::Skipped),
                Occupant::Other(x) => self.carried_copy_lost(x, ExpiryReason::Skipped),
                Occupant::Padding => {}
            }
        }
        true
    }

    /// Middlebox fallback: every unacknowledged slot whose content differs
    /// from its first transmission gets the first transmission's bytes back
    /// (slots rewritten by a rewrite not yet applied simply keep theirs);
    /// rewriting stops for good.
    fn stop_rewriting(&mut self) -> Vec<Rewrite> {
        self.stopped = true;
        self.fallback_pending = true;
        self.stats.rewriting_stopped = 1;
        let mut out = Vec::new();
        for k in 0..self.slots.len() {
            let s = &mut self.slots[k];
            if s.slot_received || s.occupant == s.first_occupant {
                continue;
            }
            let displaced = Self::occupant_id(s.occupant);
            s.occupant = s.first_occupant;
            if let Some(orig) = s.original.take() {
                out.push(Rewrite {
                    seq: s.seq,
                    bytes: orig.into_vec(),
                    keep_original: false,
                });
            }
            if let Some(x) = displaced {
                self.carried_copy_lost(x, ExpiryReason::Displaced);
            }
        }
        out
    }

    /// The engine is about to send `[seq, seq+len)` for the first time.
    /// A slot whose message expired after it got sequence numbers carries a
    /// live queued message, or padding, instead (extension of thesis §4.2).
    pub fn on_first_transmit(
        &mut self,
        now: Instant,
        owd: Duration,
        seq: SeqNumber,
        len: usize,
    ) -> Vec<Rewrite> {
        let mut out = Vec::new();
        let arrival = now + owd;
        let end = seq + len;
        let mut i = self.slot_from(seq);
        while i < self.slots.len() && self.slots[i].seq < end {
            self.step();
            let whole = self.slots[i].seq >= seq && self.slots[i].end() <= end;
            let first = !self.slots[i].sent;
            self.slots[i].sent = true;
            let s = &self.slots[i];
            if whole
                && first
                && !self.stopped
                && s.occupant == Occupant::Own
                && s.replaceable
                && !live(s.deadline, arrival)
                && !self.protected(s.id, arrival)
            {
                let cand = self.choose(s.len as usize, arrival);
                let by = cand.map(|c| self.queue[c].id);
                // Never sent before: whatever arrives in the slot is the copy.
                out.push(self.rewrite(i, cand, false, Resend::EVIDENT));
                let s = &mut self.slots[i];
                s.first_occupant = s.occupant;
                self.stats.replaced_at_first_tx += 1;
                // As on retransmission: a copy of the message, in flight
                // or acknowledged while it waited, settles it (a D-SACK of
                // the copy's slot reports it then); reporting it here as
                // well would report it twice.
                self.give_up_own(i, ExpiryReason::ExpiredBeforeSend { by });
            }
            i += 1;
        }
        out
    }

    /// Mark every slot fully inside `[left, right)` received (its occupant
    /// delivered) and note partial reception.
    fn mark_received(&mut self, left: SeqNumber, right: SeqNumber, echo: Option<u32>) {
        if right <= left {
            return;
        }
        let mut i = self.slot_from(left);
        let mut copies = Vec::new();
        let mut unproven = Vec::new();
        while i < self.slots.len() {
            self.step();
            let s = &mut self.slots[i];
            if s.seq >= right {
                break;
            }
            if s.seq >= left && s.end() <= right {
                s.slot_received = true;
                if let Some(x) = Self::occupant_id(s.occupant) {
                    let proven = |c: &Carried| c.trusted || (echo.is_some() && echo == c.tsval);
                    if self.carried.get(&x).is_some_and(proven) {
                        // What occupies the slot now has arrived (the
                        // D-SACK check in `on_dsack` catches a delayed
                        // original).
                        copies.push(x);
                    } else {
                        // The ACK may be for the bytes sent before the
                        // rewrite: as far as accounting goes the slot
                        // delivered no message.
                        s.occupant = Occupant::Padding;
                        unproven.push(x);
                    }
                }
            } else {
                s.partially_received = true;
            }
            i += 1;
        }
        for x in copies {
            if self.has_own_path(x) {
                self.copy_delivered.insert(x);
            }
        }
        for x in unproven {
            self.carried_copy_lost(x, ExpiryReason::Displaced);
        }
    }

    /// SND.UNA advanced to `snd_una` on an ACK echoing `tsecr` (RFC 7323;
    /// `None` without timestamps): slots below it are received; slots fully
    /// acknowledged leave the table with their carried messages.
    pub fn on_ack(&mut self, snd_una: SeqNumber, tsecr: Option<u32>) {
        if let Some(front) = self.slots.front().map(|s| s.seq) {
            if snd_una > front {
                self.mark_received(front, snd_una, tsecr);
            }
        }
        while let Some(s) = self.slots.front() {
            self.step();
            if s.end() > snd_una {
                break;
            }
            let s = self.slots.pop_front().expect("front exists");
            self.slot_seq.remove(&s.id);
            self.dependents.remove(&s.id);
            self.copy_delivered.remove(&s.id);
            let carried = Self::occupant_id(s.occupant);
            if let Some(x) = carried {
                // Delivered (as far as the sender can tell); a copy still
                // waiting in the queue goes anyway (the receiver keeps one).
                self.carried.remove(&x);
            }
            if s.original.is_some() {
                // A copy whose message its own slot has already reported
                // (replaced or skipped there once its lifetime passed,
                // while this copy was still in flight) accounts for
                // nothing any more: a later D-SACK of this slot must not
                // report the message a second time. The own slot comes
                // after the copy's slot in the sequence space (it is given
                // out later), so it is still in the table here.
                let carried = carried.filter(|&x| {
                    self.slot_index_of_id(x)
                        .is_none_or(|i| !self.slots[i].expired_reported)
                });
                if self.recent_rewrites.len() == RECENT_REWRITES {
                    self.recent_rewrites.pop_front();
                }
                self.recent_rewrites.push_back((s.seq, s.end(), carried));
            }
        }
    }

    /// A segment `[left, right)` was newly SACKed (RFC 2018).
    pub fn on_sack(&mut self, left: SeqNumber, right: SeqNumber) {
        // A SACK's echo speaks for the last in-order segment, not for the
        // ones it SACKs (RFC 7323 §4.3).
        self.mark_received(left, right, None);
    }

    /// A D-SACK (RFC 2883) reported `[left, right)` as received twice: a
    /// rewrite of a slot inside it was spurious — the receiver already
    /// held the range, so the carried message most likely did not arrive
    /// there. It is reported [`ExpiryReason::Displaced`] (never lost
    /// silently); the slot is treated as holding no message.
    pub fn on_dsack(&mut self, left: SeqNumber, right: SeqNumber) {
        let mut spurious = 0;
        let mut displaced = Vec::new();
        self.recent_rewrites.retain(|&(a, b, occ)| {
            let hit = a < right && left < b;
            if hit {
                spurious += 1;
                displaced.extend(occ);
            }
            !hit
        });
        let mut i = self.slot_from(left);
        while i < self.slots.len() && self.slots[i].seq < right {
            self.step();
            let s = &mut self.slots[i];
            if s.original.take().is_some() {
                // The receiver holds the first transmission's bytes: that
                // is what the slot carries as far as delivery goes.
                spurious += 1;
                let occ = Self::occupant_id(s.occupant);
                s.occupant = s.first_occupant;
                displaced.extend(occ);
            }
            i += 1;
        }
        self.stats.dsack_spurious_rewrites += spurious;
        for x in displaced {
            // Acknowledged slots already forgot their copy: report those
            // without an own slot too.
            self.carried.insert(
                x,
                Carried {
                    deadline: 0,
                    trusted: true,
                    tsval: None,
                },
            );
            self.carried_copy_lost(x, ExpiryReason::Displaced);
        }
    }

    /// The connection failed (reset, timeout, abort): every message still
    /// in the queue is reported [`ExpiryReason::NotSent`] (it never reached
    /// the wire); what was in flight is forgotten (whether it arrived is
    /// unknown, and the connection error says so).
    pub fn abandon(&mut self) {
        while let Some(q) = self.queue.pop_front() {
            if !q.carried {
                self.report(q.id, ExpiryReason::NotSent);
            }
        }
        self.queued_bytes = 0;
        self.priorities.clear();
        self.next = None;
        self.slots.clear();
        self.slot_seq.clear();
        self.carried.clear();
        self.copy_delivered.clear();
        self.dependents.clear();
    }
}

#[cfg(test)]
mod tests;
