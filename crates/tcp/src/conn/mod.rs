//! One TCP connection: the transmission control block (RFC 9293 §3.3.1) and
//! its state machine.
//!
//! The state machine never touches IP packets: it consumes parsed segments
//! ([`TcpRepr`] + payload) and produces them (after smoltcp's
//! `socket/tcp.rs`). Method families, in the order a caller uses them each
//! time it wakes (after quinn-proto's `Connection`):
//!
//! - getters: [`Connection::state`], [`Connection::stats`], ...;
//! - input: [`Connection::handle_segment`] for network input,
//!   [`Connection::handle_timeout`] when [`Connection::poll_timeout`] passed;
//! - application commands: [`Connection::send`], [`Connection::recv`],
//!   [`Connection::close`], [`Connection::abort`];
//! - output: [`Connection::poll_transmit`] until `None`, then
//!   [`Connection::poll_event`] until `None`, then
//!   [`Connection::poll_timeout`] for the next wake-up.
//!
//! Module map: `input` (segment arrival, RFC 9293 §3.10.7), `output`
//! (segment construction, RFC 9293 §3.8.6 / §3.7.4), `recovery` (RTT,
//! loss detection and recovery: RFC 6298, 5681, 6582, 6675, 3042, 2883).

use crate::cc::CongestionControl;
use crate::config::Config;
use crate::hollywood::{ExpiredMessage, MessageMeta, MetaError};
use crate::rack::{Prr, Rack};
use crate::recv_buf::RecvBuffer;
use crate::rtt::RttEstimator;
use crate::sack::RtxQueue;
use crate::send_buf::SendBuffer;
use crate::time::Instant;
use crate::timer::{Timer, TimerTable};
use crate::Error;
use hollywood_wire::{SeqNumber, TcpRepr};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod app;
mod choke;
mod events;
mod getters;
mod input;
mod memory;
mod output;
mod recovery;
#[cfg(test)]
mod tests;

/// Connection states (RFC 9293 §3.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection (initial state of a never-opened TCB, or after close).
    Closed,
    /// Waiting for a connection request. Listeners are held by the
    /// [`Endpoint`](crate::Endpoint); a `Connection` is created on the SYN
    /// and never reports this state.
    Listen,
    /// SYN sent, waiting for a matching SYN.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the ACK of our SYN.
    SynReceived,
    /// Open: data flows both ways.
    Established,
    /// We closed (FIN queued or sent); waiting for its ACK or the peer's FIN.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both sides closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs done; lingering 2*MSL for stray segments.
    TimeWait,
}

impl State {
    /// RFC 9293 §3.10.7.4's "synchronized states": ESTABLISHED onwards.
    pub fn is_synchronized(self) -> bool {
        !matches!(
            self,
            State::Closed | State::Listen | State::SynSent | State::SynReceived
        )
    }
}

impl core::fmt::Display for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
        })
    }
}

/// Something the application should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// The connection reached ESTABLISHED.
    Connected,
    /// New in-order data can be read with [`Connection::recv`].
    Readable,
    /// Send-buffer space was freed after a `send` could not take everything:
    /// for the byte stream any space, for a message (`send_message`,
    /// `poll_send_room`) room for the whole frame that was refused, so a
    /// sender of large messages is not woken on every ACK to fail again.
    Writable,
    /// The peer's FIN arrived: after the buffered data, `recv` returns EOF.
    PeerClosed,
    /// The connection is fully closed (after TIME-WAIT, LAST-ACK, a reset, a
    /// timeout or an abort). Always the last event.
    Closed,
    /// The peer reset the connection (followed by `Closed`).
    Reset,
    /// Retransmissions, SYN retries, zero-window probes or keep-alives were
    /// exhausted (followed by `Closed`).
    TimedOut,
    /// A message will not reach the receiver as itself (TCP Hollywood
    /// sender, thesis §4.2; RFC 9622 §9.3.2.2 *Expired*).
    Expired(ExpiredMessage),
    /// A TCP Hollywood sender put message `id` on the wire: its frame
    /// occupies the `len` bytes from sequence number `seq`, in its own slot
    /// or carried in another message's slot by an inconsistent
    /// retransmission. `first` marks the first placement (RFC 9622
    /// §9.3.2.1 *Sent*); a carried message is placed again in its own slot
    /// (the one its delivery is guaranteed by), unless it expires first.
    /// Only with inconsistent retransmissions on (other senders write
    /// messages to the byte stream in order).
    MessageSent {
        /// The message id.
        id: u32,
        /// First sequence number of its frame.
        seq: SeqNumber,
        /// Framed length.
        len: u32,
        /// The message's first placement on the wire.
        first: bool,
    },
    /// The TCP Hollywood sender stopped sending inconsistent
    /// retransmissions on this connection: a rewritten range stayed
    /// unacknowledged through several retransmissions, as behind a
    /// middlebox that drops retransmissions whose payload differs (thesis
    /// §4.5). The original bytes are being resent; messages keep expiring
    /// in the message queue, and retransmissions are consistent from now on.
    RewritingStopped,
}

/// Per-connection counters. All fields are public and only ever grow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Segments sent (any kind).
    pub segments_sent: u64,
    /// Segments received (any kind, acceptable or not).
    pub segments_received: u64,
    /// Data bytes sent, first transmissions and retransmissions.
    pub bytes_sent: u64,
    /// Data bytes sent for the first time.
    pub data_bytes_first_sent: u64,
    /// Data bytes retransmitted.
    pub data_bytes_retransmitted: u64,
    /// Data bytes retransmitted at least once, each counted once: how much
    /// of its first transmissions the sender found lost (or took for lost).
    pub data_bytes_first_retransmitted: u64,
    /// Segments retransmitted (data, FIN).
    pub retransmitted_segments: u64,
    /// SYN or SYN-ACK retransmissions.
    pub syn_retransmissions: u64,
    /// Fast retransmits (entries into loss recovery by duplicate ACKs/SACK).
    pub fast_retransmits: u64,
    /// Retransmission timer expirations on data.
    pub rto_events: u64,
    /// SACK-based recoveries entered (RFC 6675).
    pub sack_recoveries: u64,
    /// NewReno recoveries entered (RFC 6582).
    pub newreno_recoveries: u64,
    /// NewReno partial ACKs handled.
    pub partial_acks: u64,
    /// Retransmissions later reported as unnecessary by D-SACK (RFC 2883/3708).
    pub spurious_retransmissions: u64,
    /// Congestion responses undone because all their retransmissions were
    /// D-SACKed.
    pub spurious_recoveries: u64,
    /// D-SACK blocks received.
    pub dsacks_received: u64,
    /// Duplicate ACKs received (RFC 5681 §2 / RFC 6675 §2 definition).
    pub dup_acks_received: u64,
    /// Bytes of sequence space acknowledged (data and FIN).
    pub bytes_acked: u64,
    /// In-order data bytes received (delivered to the receive buffer).
    pub bytes_received: u64,
    /// Data bytes received that were already held (duplicates).
    pub duplicate_bytes_received: u64,
    /// Data segments that arrived out of order.
    pub out_of_order_segments: u64,
    /// Data bytes dropped for lack of buffer space.
    pub bytes_dropped_no_space: u64,
    /// Pure ACKs sent.
    pub acks_sent: u64,
    /// Of those, delayed ACKs sent by the delayed-ACK timer.
    pub delayed_acks_sent: u64,
    /// SACK blocks sent (D-SACK included).
    pub sack_blocks_sent: u64,
    /// D-SACK blocks sent.
    pub dsack_blocks_sent: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks_sent: u64,
    /// Challenge ACKs suppressed by the rate limit (RFC 5961 §7).
    pub challenge_acks_suppressed: u64,
    /// Segments dropped by PAWS (RFC 7323 §5).
    pub paws_rejected: u64,
    /// Segments that failed the acceptability test (RFC 9293 §3.10.7.4).
    pub unacceptable_segments: u64,
    /// Zero-window probes sent (RFC 9293 §3.8.6.1).
    pub window_probes_sent: u64,
    /// Keep-alive probes sent.
    pub keepalives_sent: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// Tail loss probes sent (RFC 8985 §7.3).
    pub tlp_probes: u64,
    /// Losses repaired by a retransmitted loss probe (RFC 8985 §7.4).
    pub tlp_recoveries: u64,
    /// Retransmissions found lost by RACK (RFC 8985 §6.2), each resent
    /// without waiting for the RTO.
    pub lost_retransmissions: u64,
    /// Retransmissions sent with every payload byte complemented
    /// (`HollywoodConfig::always_inconsistent`, thesis §5.3).
    pub always_ir_segments: u64,
    /// Retransmissions replaced by a skip (sequence-gap design, [TCP-video]
    /// §7.2): a pure ACK carrying the "next expected sequence" option.
    pub seq_gap_skips: u64,
    /// Receiver: bytes RCV.NXT jumped over because of a "next expected
    /// sequence" option (delivered as zero bytes).
    pub seq_gap_skipped_bytes: u64,
    /// Inconsistent retransmissions were stopped on this connection (a
    /// rewritten range stayed unacknowledged through several resends, as
    /// behind a middlebox that drops them): 0 or 1.
    pub rewriting_stopped: u64,
    /// Times receive autotuning grew the window clamp (`Config::autotune`).
    pub rcv_space_grown: u64,
}

/// The result of option negotiation on the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The peer's MSS option, or the RFC 9293 §3.7.1 default (536 for IPv4,
    /// 1220 for IPv6) if it sent none.
    pub peer_mss: u16,
    /// The peer sent an MSS option.
    pub peer_mss_present: bool,
    /// Data bytes per full-sized segment we send (Eff.snd.MSS minus the
    /// options every segment carries; RFC 9293 §3.7.1, RFC 6691).
    pub smss: usize,
    /// Window scaling in use (both sides offered it, RFC 7323 §2.2).
    pub window_scaling: bool,
    /// Shift applied to windows we receive (RFC 7323 §2.3, ≤ 14).
    pub snd_wscale: u8,
    /// Shift applied to windows we send.
    pub rcv_wscale: u8,
    /// SACK in use (RFC 2018 §2).
    pub sack: bool,
    /// Timestamps in use (RFC 7323 §3.2).
    pub timestamps: bool,
}

/// Loss-recovery phase of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// No loss being repaired.
    Open,
    /// RFC 6675 SACK-based loss recovery; `high_rxt` is HighRxt (§2).
    Sack {
        /// Highest sequence number retransmitted (and cursor for NextSeg).
        high_rxt: SeqNumber,
    },
    /// RFC 6582 NewReno fast recovery. `inflation` is the RFC 5681 §3.2 /
    /// RFC 6582 §3.2 window inflation on top of the controller's cwnd.
    NewReno {
        /// Bytes of inflation (may go negative after deflation).
        inflation: i64,
    },
    /// After an RTO until SND.UNA reaches the recovery point: every
    /// un-SACKed segment is lost and is resent in order as cwnd allows
    /// (RFC 5681 §3.1, RFC 6675 §5.1).
    Loss {
        /// Next segment to consider for retransmission.
        cursor: SeqNumber,
    },
}

/// Delayed-ACK bookkeeping (RFC 9293 §3.8.6.3, RFC 5681 §4.2).
#[derive(Debug, Clone, Copy, Default)]
struct AckState {
    /// An ACK must go out with the next segment, immediately.
    now: bool,
    /// Data was received that no ACK has covered yet.
    owed: bool,
    /// Data bytes received since the last ACK we sent.
    unacked_bytes: usize,
    /// Remaining quick-ACK segments (Linux quick-ACK mode).
    quickack: u32,
    /// The delayed-ACK timer fired (stats).
    by_timer: bool,
}

/// Probe the output path should send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Zero-window probe (RFC 9293 §3.8.6.1).
    ZeroWindow,
    /// Keep-alive probe: `<SEQ=SND.UNA-1><CTL=ACK>` (RFC 1122 §4.2.3.6).
    Keepalive,
}

/// A retransmission recorded for D-SACK based spurious-retransmission
/// detection (RFC 3708 §3 with D-SACK, RFC 2883 §4).
#[derive(Debug, Clone, Copy)]
struct RetxRecord {
    seq: SeqNumber,
    end: SeqNumber,
    episode: u32,
}

/// A loss-recovery episode (fast recovery or RTO) for undo (RFC 3708).
#[derive(Debug, Clone, Copy, Default)]
struct Episode {
    id: u32,
    retransmissions: u32,
    dsacked: u32,
    undone: bool,
}

/// Most retransmissions remembered for D-SACK matching.
const RETX_RECORDS: usize = 256;

/// Bytes charged per segment copy waiting for out-of-order delivery, on
/// top of its payload (queue entry, vector header, allocator slack), so
/// that a stream of tiny segments cannot exceed the memory bound (review
/// B3; the message layer charges its pieces the same way).
pub const SEGMENT_COPY_OVERHEAD: usize = 64;

/// Window of the recent minimum RTT behind the one-way delay estimate.
pub const RECENT_RTT_WINDOW: Duration = Duration::from_secs(1);

/// Part of an RTT sample above the minimum RTT that the one-way delay
/// estimate attributes to the receiver's delayed ACKs rather than to a
/// queue: Linux's (and this engine's default) delayed-ACK timeout, 40 ms.
pub const ACK_DELAY_ALLOWANCE: Duration = Duration::from_millis(40);

/// PAWS: a TS.Recent older than this is invalid (RFC 7323 §5.5: 24 days).
const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

/// Challenge-ACK accounting window (RFC 5961 §7: rate-limit per interval).
const CHALLENGE_WINDOW: Duration = Duration::from_secs(1);

/// D-SACK ranges waiting for their own ACK at most (RFC 2883 reports one
/// per ACK; more duplicates between two of our transmissions than this is
/// a burst no sender needs reported in full).
const DSACK_PENDING: usize = 8;

/// Fewest time between two ACKs answering out-of-window pure segments
/// (Linux `net.ipv4.tcp_invalid_ratelimit`: 500 ms).
const OOW_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// One TCP connection (a TCB, RFC 9293 §3.3.1).
pub struct Connection {
    config: Arc<Config>,
    local: SocketAddr,
    remote: SocketAddr,
    state: State,
    /// Opened by a SYN from the peer (passive open).
    passive: bool,

    // --- send sequence space (RFC 9293 §3.3.1)
    iss: SeqNumber,
    snd_una: SeqNumber,
    /// Next new sequence number; also the highest ever sent + 1 (HighData):
    /// retransmissions never move it back.
    snd_nxt: SeqNumber,
    /// Peer window in bytes (scaled).
    snd_wnd: usize,
    snd_wl1: SeqNumber,
    snd_wl2: SeqNumber,
    /// MAX.SND.WND (RFC 5961 §5.2).
    max_snd_wnd: usize,
    snd_buf: SendBuffer,
    rtxq: RtxQueue,
    /// The application closed: FIN follows the queued data.
    fin_queued: bool,
    /// Our FIN has been transmitted (it then sits at `snd_nxt - 1`).
    fin_sent: bool,
    /// Send a SYN or SYN-ACK.
    syn_pending: bool,
    /// SYN/SYN-ACK (re)transmissions done beyond the first.
    syn_retries: u32,
    /// When the SYN (or SYN-ACK) was first sent (RTT sample, Karn).
    syn_sent_at: Option<Instant>,

    // --- receive sequence space
    irs: SeqNumber,
    rcv_nxt: SeqNumber,
    /// Right edge of the window we last advertised (never moves left,
    /// RFC 9293 §3.8.6.2.2 "do not shrink the window").
    rcv_adv: SeqNumber,
    rcv_buf: RecvBuffer,
    /// Buffer autotuning and memory pressure (`memory.rs`).
    space: memory::Space,
    /// The peer's FIN was processed.
    fin_rcvd: bool,
    /// Sequence number of a FIN that arrived ahead of missing data.
    pending_fin: Option<SeqNumber>,
    /// Largest data segment seen from the peer (delayed-ACK "full-sized").
    rcv_mss: usize,

    // --- options
    neg: Negotiated,
    /// Our window scale (offered in the SYN when `config.window_scaling`).
    rcv_wscale_offer: u8,
    /// Random-looking offset of our timestamp clock (RFC 7323 §5.4).
    ts_offset: u32,
    /// TS.Recent (RFC 7323 §4.3) and when it was set.
    ts_recent: Option<(u32, Instant)>,
    /// Last.ACK.sent (RFC 7323 §4.3).
    last_ack_sent: SeqNumber,

    // --- congestion control, RTT
    cc: Box<dyn CongestionControl>,
    rtt: RttEstimator,
    /// Delivery-rate estimation (draft-ietf-ccwg-bbr-01 §4.5.2).
    rate: crate::delivery::RateEstimator,
    /// The highest delivery rate (bytes/s) of the last ten or so round
    /// trips, sampled while the sender had data to send (Nichols' windowed
    /// maximum, as BBR's): how fast a queued message's bytes can be
    /// expected to leave (the Hollywood liveness test, thesis §4.2). 0: no
    /// sample yet.
    delivery_bw: crate::cc::bbr::WindowedMax,
    /// Pacing (`crate::pacing`).
    pacer: crate::pacing::Pacer,
    /// The pacer held a data segment back until this time.
    pacing_at: Option<Instant>,
    /// Minimum RTT over the last [`RECENT_RTT_WINDOW`], per ACK from the
    /// most recently sent segment it delivered: the current path delay
    /// without most of the receiver's ACK delay (see `one_way_delay`).
    recent_rtt: crate::rtt::WindowedMin,
    /// The live-stream window floor (`HollywoodConfig::live_window`).
    live: crate::live::LiveSlot,
    /// Without timestamps: the one timed segment `(end, sent)` (RFC 6298 §3).
    timed: Option<(SeqNumber, Instant)>,

    // --- loss recovery
    recovery: Recovery,
    /// RFC 6582 `recover` / RFC 6675 RecoveryPoint.
    recover: SeqNumber,
    /// Consecutive duplicate ACKs.
    dupacks: u32,
    /// Consecutive RTO expirations without progress.
    rto_count: u32,
    /// An ACK arrived since the last RTO (peer alive).
    heard_since_rto: bool,
    /// Retransmit this segment next, regardless of cwnd (fast retransmit,
    /// partial ACK, RTO).
    pending_rtx: Option<SeqNumber>,
    retx_records: VecDeque<RetxRecord>,
    /// RACK-TLP state (RFC 8985), used when `config.rack` and SACK.
    rack: Rack,
    /// Proportional Rate Reduction during SACK recovery (RFC 6937).
    prr: Prr,
    episode: Episode,

    // --- ACK generation
    ack: AckState,
    /// D-SACK blocks to report (RFC 2883), sequence numbers, oldest
    /// first: one ACK each, so that two duplicates arriving before the
    /// next ACK are both reported (as Linux answers every duplicate
    /// segment with its own ACK). At most [`DSACK_PENDING`].
    dsack: VecDeque<(SeqNumber, SeqNumber)>,
    /// Recently reported SACK blocks as stream offsets, most recent first
    /// (RFC 2018 §4).
    sack_recent: Vec<(u64, u64)>,
    /// Send a window update (RFC 9293 §3.8.6.2.2).
    window_update: bool,
    challenge_start: Instant,
    challenge_count: u32,
    /// When we last answered an out-of-window pure segment (ACK-storm
    /// mitigation, see `oow_ack`).
    last_oow_ack: Option<Instant>,

    // --- control segments, probes
    /// A RST to send: `(seq, ack)`.
    rst_out: Option<(SeqNumber, Option<SeqNumber>)>,
    probe: Option<Probe>,
    /// The persist timer asked to override sender SWS avoidance once.
    force_send: bool,
    /// Unanswered zero-window probes.
    persist_probes: u32,
    /// Sequence number of the octet sent as a zero-window probe.
    probe_seq: Option<SeqNumber>,
    persist_backoff: u32,
    keepalive_probes: u32,
    /// When the latest keep-alive probe was sent.
    keepalive_sent: Instant,
    last_rcv: Instant,

    timers: TimerTable,
    events: VecDeque<Event>,
    readable_queued: bool,
    writable_wanted: bool,
    /// Free send-buffer bytes the blocked sender needs before
    /// `Event::Writable` fires (the frame that got `WouldBlock`; 1 for the
    /// byte stream), so a sender of large messages is not woken on every
    /// ACK to fail again.
    writable_low: usize,
    /// Why the connection died, for `send`/`recv`.
    error: Option<Error>,
    stats: ConnectionStats,

    // --- TCP Hollywood (thesis ch. 4)
    /// Per-message metadata for inconsistent retransmissions (§4.2).
    messages: crate::hollywood::LazyTable,
    /// Segments handed to the application as they arrived (§4.3).
    ooo: VecDeque<ArrivedSegment>,
    /// Payload bytes in `ooo` (count against the receive window).
    ooo_bytes: usize,
    /// Emptied payload buffers of segments handed over, given back with
    /// [`Connection::recycle_segment`] for the next arrivals (at most
    /// [`SPARE_SEGMENT_BUFFERS`]).
    ooo_spare: Vec<Vec<u8>>,
    /// Out-of-order delivery counters.
    ooo_stats: OooStats,
    /// Sequence-gap sender ([TCP-video] §7.2, experimental): the "next
    /// expected sequence" announced while SND.UNA is below it.
    /// Sequence-gap sender: the ranges skipped above SND.UNA, sorted and
    /// disjoint.
    seq_gap_skipped: VecDeque<(SeqNumber, SeqNumber)>,
    /// Retransmissions are consistent from now on (middlebox fallback,
    /// thesis §4.5; `Event::RewritingStopped`).
    rewriting_stopped: bool,
}

/// Most payload buffers a connection keeps for reuse
/// ([`Connection::recycle_segment`]).
pub(crate) const SPARE_SEGMENT_BUFFERS: usize = 8;

/// A data segment as it arrived, for out-of-order delivery (thesis §4.3):
/// the intermediary layer reassembles messages from these by sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrivedSegment {
    /// Sequence number of the first payload byte.
    pub seq: SeqNumber,
    /// The payload as received (may overlap bytes delivered before).
    pub payload: Vec<u8>,
    /// Arrival time.
    pub arrival: Instant,
    /// The segment arrived ahead of a hole (above RCV.NXT): a standard
    /// receiver would have held it back.
    pub out_of_order: bool,
}

/// Out-of-order delivery counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OooStats {
    /// Segments handed over.
    pub segments: u64,
    /// Of those, segments that arrived above RCV.NXT.
    pub out_of_order: u64,
    /// Bytes handed over.
    pub bytes: u64,
}

/// Why a message could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMessageError {
    /// Not enough send-buffer space for the whole framed message; retry after
    /// a `Writable` event. Nothing was queued.
    WouldBlock,
    /// Bad metadata (see [`MetaError`]).
    Meta(MetaError),
    /// The connection cannot send (closed, closing, reset).
    State(Error),
    /// The framed message is longer than the whole send buffer
    /// (`Config::send_buffer`): it could never be queued.
    TooLarge {
        /// The frame's length.
        len: usize,
        /// The send buffer's size.
        capacity: usize,
    },
}

impl core::fmt::Display for SendMessageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendMessageError::WouldBlock => f.write_str("send buffer full"),
            SendMessageError::Meta(e) => write!(f, "bad message metadata: {e}"),
            SendMessageError::State(e) => write!(f, "cannot send: {e}"),
            SendMessageError::TooLarge { len, capacity } => write!(
                f,
                "a {len}-byte message does not fit a {capacity}-byte send buffer"
            ),
        }
    }
}
impl std::error::Error for SendMessageError {}

impl core::fmt::Debug for Connection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connection")
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("state", &self.state)
            .field("snd_una", &self.snd_una)
            .field("snd_nxt", &self.snd_nxt)
            .field("rcv_nxt", &self.rcv_nxt)
            .field("cwnd", &self.cc.cwnd())
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

/// Window-scale shift for a receive buffer: the smallest shift that lets the
/// 16-bit field express the buffer, at most 14 (RFC 7323 §2.3).
pub(crate) fn wscale_for(recv_buffer: usize) -> u8 {
    let mut s = 0u8;
    while s < 14 && (recv_buffer >> s) > 65_535 {
        s += 1;
    }
    s
}

/// The MSS we announce in our SYN / SYN-ACK and the ceiling on what we
/// send, for a connection to `remote`. `Config::mss` is the IPv4 value
/// (MTU - 20 IPv4 - 20 TCP); the IPv6 header is 40 bytes (RFC 8200 §3), so
/// the same MTU leaves 20 bytes less (RFC 9293 §3.7.1, RFC 6691 §2: MSS =
/// MTU minus the fixed IP and TCP headers).
pub(crate) fn local_mss(config_mss: u16, remote: SocketAddr) -> u16 {
    let mss = if remote.is_ipv4() {
        config_mss
    } else {
        config_mss.saturating_sub(20)
    };
    mss.max(64)
}

/// Default send MSS without an MSS option (RFC 9293 §3.7.1).
fn default_mss(remote: SocketAddr) -> u16 {
    if remote.is_ipv4() {
        536
    } else {
        1220
    }
}

impl Connection {
    fn new(
        now: Instant,
        config: impl Into<Arc<Config>>,
        local: SocketAddr,
        remote: SocketAddr,
        iss: SeqNumber,
    ) -> Connection {
        // Shared with the listener's other connections (an accepted
        // connection costs a pointer, not a copy of the configuration).
        let config: Arc<Config> = config.into();
        let mss = local_mss(config.mss, remote) as usize;
        let cc = config.cc.build(mss, config.initial_cwnd_segments);
        let rtt = RttEstimator::new(config.initial_rto, config.min_rto, config.max_rto);
        let rcv_wscale_offer = if config.window_scaling {
            wscale_for(config.recv_buffer)
        } else {
            0
        };
        let quickack = config.delayed_ack.quickack_segments;
        Connection {
            snd_buf: SendBuffer::new(config.send_buffer, iss + 1),
            rcv_buf: RecvBuffer::new(config.recv_buffer.max(1)),
            space: memory::Space::new(&config, mss),
            neg: Negotiated {
                peer_mss: default_mss(remote),
                peer_mss_present: false,
                smss: mss,
                window_scaling: false,
                snd_wscale: 0,
                rcv_wscale: 0,
                sack: false,
                timestamps: false,
            },
            rcv_wscale_offer,
            // RFC 7323 §5.4: a per-connection offset hides the host clock.
            ts_offset: iss.0.wrapping_mul(0x9E37_79B9).rotate_left(7),
            ts_recent: None,
            last_ack_sent: SeqNumber(0),
            local,
            remote,
            state: State::Closed,
            passive: false,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            max_snd_wnd: 0,
            rtxq: RtxQueue::new(),
            fin_queued: false,
            fin_sent: false,
            syn_pending: false,
            syn_retries: 0,
            syn_sent_at: None,
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_adv: SeqNumber(0),
            fin_rcvd: false,
            pending_fin: None,
            rcv_mss: 536.min(mss),
            cc,
            rtt,
            recent_rtt: crate::rtt::WindowedMin::new(),
            live: crate::live::LiveSlot::new(config.hollywood.live_window),
            rate: crate::delivery::RateEstimator::default(),
            delivery_bw: crate::cc::bbr::WindowedMax::default(),
            pacer: crate::pacing::Pacer::default(),
            pacing_at: None,
            timed: None,
            recovery: Recovery::Open,
            recover: iss,
            dupacks: 0,
            rto_count: 0,
            heard_since_rto: false,
            pending_rtx: None,
            retx_records: VecDeque::new(),
            rack: Rack::default(),
            prr: Prr::default(),
            episode: Episode::default(),
            ack: AckState {
                quickack,
                ..AckState::default()
            },
            dsack: VecDeque::new(),
            sack_recent: Vec::new(),
            window_update: false,
            challenge_start: now,
            challenge_count: 0,
            last_oow_ack: None,
            rst_out: None,
            probe: None,
            force_send: false,
            persist_probes: 0,
            probe_seq: None,
            persist_backoff: 0,
            keepalive_probes: 0,
            keepalive_sent: now,
            last_rcv: now,
            timers: TimerTable::default(),
            events: VecDeque::new(),
            readable_queued: false,
            writable_wanted: false,
            writable_low: 1,
            error: None,
            stats: ConnectionStats::default(),
            messages: crate::hollywood::LazyTable::default(),
            ooo: VecDeque::new(),
            ooo_bytes: 0,
            ooo_spare: Vec::new(),
            ooo_stats: OooStats::default(),
            seq_gap_skipped: VecDeque::new(),
            rewriting_stopped: false,
            config,
        }
    }

    /// Active open (RFC 9293 §3.10.1, CLOSED → SYN-SENT): the SYN goes out
    /// on the next [`Connection::poll_transmit`]. `iss` comes from the
    /// endpoint's RFC 6528 generator.
    pub fn connect(
        now: Instant,
        config: impl Into<Arc<Config>>,
        local: SocketAddr,
        remote: SocketAddr,
        iss: SeqNumber,
    ) -> Connection {
        let mut c = Connection::new(now, config, local, remote, iss);
        c.state = State::SynSent;
        c.syn_pending = true;
        c
    }

    /// Passive open from a SYN that arrived at a listener (RFC 9293
    /// §3.10.7.2 LISTEN, third check: LISTEN → SYN-RECEIVED). The SYN-ACK
    /// goes out on the next [`Connection::poll_transmit`]. `syn` must carry
    /// SYN and not ACK or RST (the endpoint checks).
    pub fn accept(
        now: Instant,
        config: impl Into<Arc<Config>>,
        local: SocketAddr,
        remote: SocketAddr,
        iss: SeqNumber,
        syn: &TcpRepr,
    ) -> Connection {
        let mut c = Connection::new(now, config, local, remote, iss);
        c.passive = true;
        c.state = State::SynReceived;
        // RFC 9293 §3.10.7.2: RCV.NXT = SEG.SEQ+1, IRS = SEG.SEQ.
        c.irs = syn.seq;
        c.rcv_nxt = syn.seq + 1;
        c.rcv_adv = c.rcv_nxt;
        c.last_ack_sent = c.rcv_nxt;
        c.negotiate(now, syn);
        // The SYN's window is never scaled (RFC 7323 §2.2).
        c.snd_wnd = syn.window as usize;
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq;
        c.syn_pending = true;
        c.last_rcv = now;
        c
    }

    // ------------------------------------------------------------------
    // State helpers
    // ------------------------------------------------------------------

    /// Sequence-space bytes outstanding (FlightSize, RFC 5681 §2).
    fn flight_size(&self) -> usize {
        let d = self.snd_nxt.diff(self.snd_una);
        if d <= 0 || !self.state.is_synchronized() {
            return 0;
        }
        d as usize
    }

    fn push_event(&mut self, e: Event) {
        if e == Event::Readable {
            if self.readable_queued {
                return;
            }
            self.readable_queued = true;
        }
        self.events.push_back(e);
    }

    /// Enter CLOSED and report it (RFC 9293 "delete the TCB").
    fn set_closed(&mut self) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.timers.clear();
        self.syn_pending = false;
        self.pending_rtx = None;
        self.probe = None;
        self.ack.now = false;
        self.ack.owed = false;
        self.window_update = false;
        self.push_event(Event::Closed);
    }

    /// The connection died (reset or timeout).
    fn fail(&mut self, err: Error) {
        self.error = Some(err);
        self.abandon_messages();
        self.push_event(match err {
            Error::Reset => Event::Reset,
            _ => Event::TimedOut,
        });
        self.set_closed();
    }

    /// ESTABLISHED reached (RFC 9293 §3.10.7.3 / §3.10.7.4 SYN-RECEIVED).
    fn on_established(&mut self) {
        self.state = State::Established;
        self.push_event(Event::Connected);
        if self.fin_queued {
            // A CLOSE issued in SYN-RECEIVED takes effect now (§3.10.4).
            self.state = State::FinWait1;
        }
    }

    /// Enter TIME-WAIT (RFC 9293 §3.10.7.4): only the 2*MSL timer runs.
    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.clear();
        self.timers
            .set(Timer::TimeWait, now + self.config.time_wait);
        self.pending_rtx = None;
        self.probe = None;
    }

    /// Our FIN was sent and everything up to it is acknowledged.
    fn fin_acked(&self) -> bool {
        self.fin_sent && self.snd_una == self.snd_nxt
    }

    /// Send a challenge ACK unless the rate limit is exhausted (RFC 5961
    /// §3.2, §4.2, §5.2; rate limiting per §7, Linux-like).
    fn challenge_ack(&mut self, now: Instant) {
        if now.saturating_duration_since(self.challenge_start) >= CHALLENGE_WINDOW {
            self.challenge_start = now;
            self.challenge_count = 0;
        }
        if self.challenge_count < self.config.challenge_ack_limit {
            self.challenge_count += 1;
            self.ack.now = true;
            self.stats.challenge_acks_sent += 1;
        } else {
            self.stats.challenge_acks_suppressed += 1;
        }
    }

    /// RFC 9293 §3.10.7.4 (and RFC 7323 §5.3 for PAWS) answers an
    /// unacceptable segment with `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`.
    /// Two endpoints whose sequence spaces came apart (a blind injection, a
    /// middlebox) would then answer each other's ACKs forever, in zero
    /// time: an ACK storm. Segments that carry no data, SYN or FIN (`len`
    /// = 0 sequence space) are therefore answered at most once per
    /// `OOW_ACK_INTERVAL` (as Linux's `tcp_oow_rate_limited`); data
    /// segments are always answered, so a retransmission is never left
    /// without an ACK.
    fn oow_ack(&mut self, now: Instant, seg_len: usize) {
        if seg_len == 0 {
            if self
                .last_oow_ack
                .is_some_and(|t| now.saturating_duration_since(t) < OOW_ACK_INTERVAL)
            {
                return;
            }
            self.last_oow_ack = Some(now);
        }
        self.ack.now = true;
    }

    /// Our timestamp clock: milliseconds plus the connection's offset
    /// (RFC 7323 §5.4: 1 ms ticks).
    fn ts_now(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }
}
