//! Connection configuration. Defaults follow Linux where the issue says so.
//! (CONTRACT: field names are used by sim/tun/cli; add fields freely.)

use crate::cc::CcAlgorithm;
use std::time::Duration;

/// Delayed-ACK behaviour (RFC 9293 §3.8.6.3, RFC 5681 §4.2; Linux-like).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayedAckConfig {
    /// Delay ACKs at all. `false` = ACK every segment immediately.
    pub enabled: bool,
    /// Longest an ACK may be held (Linux: 40 ms minimum delack timer).
    pub max_delay: Duration,
    /// Number of segments ACKed immediately at connection start (Linux quick-ACK mode: 16-ish).
    pub quickack_segments: u32,
}
impl Default for DelayedAckConfig {
    fn default() -> Self {
        DelayedAckConfig {
            enabled: true,
            max_delay: Duration::from_millis(40),
            quickack_segments: 16,
        }
    }
}

/// Keep-alive (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepaliveConfig {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Interval between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is declared dead.
    pub probes: u32,
}
impl Default for KeepaliveConfig {
    fn default() -> Self {
        KeepaliveConfig {
            idle: Duration::from_secs(7200),
            interval: Duration::from_secs(75),
            probes: 9,
        }
    }
}

/// Per-connection configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// MSS we announce and the upper bound on what we send, as the IPv4
    /// value (default 1460 = 1500-byte MTU - 40). IPv6 connections use
    /// `mss - 20`, since the IPv6 header is 20 bytes longer (RFC 8200 §3;
    /// 1440 for a 1500-byte MTU), see [`Connection::local_mss`](crate::Connection::local_mss).
    pub mss: u16,
    /// Receive buffer (bytes): bounds the advertised window and reassembly memory.
    pub recv_buffer: usize,
    /// Send buffer (bytes): `send` accepts at most this much unacknowledged data.
    pub send_buffer: usize,
    /// Offer window scaling (RFC 7323 §2).
    pub window_scaling: bool,
    /// Offer SACK (RFC 2018) and use SACK loss recovery (RFC 6675) when negotiated.
    pub sack: bool,
    /// Generate D-SACK (RFC 2883) when SACK is negotiated.
    pub dsack: bool,
    /// Offer timestamps (RFC 7323 §3).
    pub timestamps: bool,
    /// Nagle's algorithm (RFC 9293 §3.7.4). `false` = TCP_NODELAY.
    pub nagle: bool,
    /// Delayed ACKs.
    pub delayed_ack: DelayedAckConfig,
    /// Minimum RTO (RFC 6298 says 1 s; Linux uses 200 ms — our default).
    pub min_rto: Duration,
    /// Maximum RTO (≥ 60 s per RFC 6298 §2.5; Linux 120 s).
    pub max_rto: Duration,
    /// RTO before any RTT sample (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// Give up after this many consecutive RTOs on data (Linux tcp_retries2 = 15).
    pub max_retransmissions: u32,
    /// Give up a SYN after this many retransmissions (Linux tcp_syn_retries = 6).
    pub max_syn_retransmissions: u32,
    /// Congestion control algorithm.
    pub cc: CcAlgorithm,
    /// Pace data segments for every congestion controller: at
    /// `cwnd / SRTT` × 2 in slow start, × 1.2 after it (Linux's defaults for
    /// `sk_pacing_rate`), in bursts of at most one millisecond of data
    /// (`pacing::default_quantum`). A controller that sets its own pacing
    /// rate (BBR) is always paced, whatever this says. Off by default, as
    /// Linux paces CUBIC only with the `fq` qdisc.
    pub pacing: bool,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_cwnd_segments: usize,
    /// Keep-alive; `None` = off (the default, as for sockets).
    pub keepalive: Option<KeepaliveConfig>,
    /// TIME-WAIT duration (2*MSL; Linux uses 60 s).
    pub time_wait: Duration,
    /// Duplicate-ACK threshold for fast retransmit (RFC 5681: 3).
    pub dupack_threshold: u32,
    /// Limited transmit (RFC 3042): send new data on the first two
    /// duplicate ACKs.
    pub limited_transmit: bool,
    /// RACK-TLP loss detection (RFC 8985) when SACK is negotiated: losses,
    /// lost retransmissions included, are found by transmission time with a
    /// reordering window, a tail loss probe replaces most tail RTOs, and
    /// SACK recovery sends by Proportional Rate Reduction (RFC 6937).
    /// `false` = RFC 6675 (DupThresh / IsLost) with cwnd - pipe sending.
    /// On by default, as in Linux.
    pub rack: bool,
    /// Challenge ACKs (RFC 5961) allowed per second on one connection
    /// (Linux `tcp_challenge_ack_limit`: 1000).
    pub challenge_ack_limit: u32,
    /// Consistent segmentation (thesis §4.2): a new segment never spans two
    /// records (one `send` call = one record); records larger than the MSS
    /// fragment at the MSS. Nagle does not apply while this is on.
    pub consistent_segmentation: bool,
    /// TCP Hollywood kernel-side extensions (thesis §4.2–4.4). All off =
    /// standard TCP; each half on alone is one of the partial deployments.
    pub hollywood: HollywoodConfig,
    /// Listener only (the configuration given to `Endpoint::listen_with`,
    /// or the endpoint's default): half-open connections (SYN-RECEIVED,
    /// not yet accepted) the listener keeps at most. Each SYN to a
    /// listener otherwise allocates a connection that lives until its
    /// SYN-ACK retransmissions give up, so spoofed SYNs would grow memory
    /// without bound (RFC 4987 §2). Beyond the limit a SYN is answered with
    /// a SYN cookie (`syn_cookies`) or dropped (`EndpointStats::syns_dropped`).
    /// Default 256 (Linux `tcp_max_syn_backlog` is 128 to 1024 by memory).
    pub syn_backlog: usize,
    /// Listener only: while the backlog is full, answer SYNs with SYN
    /// cookies (RFC 4987 §3.6; Linux `tcp_syncookies = 1`) instead of
    /// dropping them: no state is kept until the client's ACK returns the
    /// cookie. A connection opened by a cookie keeps the MSS (rounded down
    /// to one of 8 values, at most 8960) and timestamps (RFC 7323), but
    /// loses window scaling (its window is at most 64 KiB) and SACK: they do
    /// not fit in the cookie. Default true.
    pub syn_cookies: bool,
    /// Endpoint only (the configuration given to `Endpoint::new`):
    /// connections in any state the endpoint keeps at most. Beyond it a
    /// SYN to a listener is dropped, a returning SYN cookie is answered
    /// with RST (both counted in `EndpointStats::conn_limit_dropped`), and
    /// `connect` fails with `Error::TooManyConnections`. With each
    /// connection's buffers bounded (`send_buffer`, `recv_buffer`), this
    /// bounds what a peer that opens connections and never reads can make
    /// the endpoint hold (docs/ATTACKS.md, zero-window). Default 4096.
    pub max_connections: usize,
    /// Buffers that follow the need (issue 32 item 3): the advertised
    /// receive window starts at 64 KiB and grows with the bytes the
    /// application takes per round trip (Linux's receive-buffer
    /// autotuning, `tcp_rcv_space_adjust`), and the send buffer starts at
    /// twice the initial window and grows with the congestion window
    /// (Linux's `tcp_sndbuf_expand`); `recv_buffer` and `send_buffer` are
    /// then the maxima. The storage behind both grows with what is held
    /// and is released when drained whether this is on or not.
    /// `None` = the layer's default: off in the sans-IO engine (fixed
    /// windows, so the simulator's reproductions keep their results), on
    /// in host mode (`hollywood-io` sets it).
    pub autotune: Option<bool>,
    /// Endpoint only: bytes all connections of the endpoint may hold
    /// (buffers and connection state, [`Connection::memory`](crate::Connection::memory)),
    /// Linux's `tcp_mem`. From three quarters of it on, connections are
    /// under memory pressure: windows and send buffers stop growing and
    /// new growth is held to four segments (Linux's `tcp_clamp_window`
    /// and `tcp_moderate_sndbuf`). At the limit a SYN to a listener is
    /// answered with RST (a client learns at once, ECONNREFUSED, instead
    /// of retrying SYNs for a minute), a returning SYN cookie too, and
    /// `connect` fails with `Error::TooManyConnections`; counted in
    /// `EndpointStats::memory_limit_refused`. `None` = the layer's default:
    /// no limit in the sans-IO engine, 3/32 of the machine's memory in
    /// host mode (Linux's `tcp_mem[2]` default).
    pub memory_limit: Option<usize>,
}

/// The TCP Hollywood switches (thesis ch. 4). Neither changes how ACKs,
/// SACKs or windows are generated: the wire image stays standard TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HollywoodConfig {
    /// Sender: per-message metadata and inconsistent retransmissions
    /// (thesis §4.2). Messages go in with [`Connection::send_message`](crate::Connection::send_message).
    pub inconsistent_retransmissions: bool,
    /// Receiver: every arriving data segment is handed to the application
    /// (the intermediary layer) at once with its sequence number
    /// ([`Connection::recv_segment`](crate::Connection::recv_segment)),
    /// instead of the in-order byte stream (thesis §4.3).
    pub out_of_order_delivery: bool,
    /// **Test server switch** (thesis §5.3): every retransmission carries a
    /// payload different from the original, of the same length and at the
    /// same sequence numbers: each byte of the original XOR `0xFF`. The
    /// send buffer keeps the original bytes, so every retransmission of a
    /// segment is the complement of its first transmission and a receiver
    /// can tell, byte by byte, which of the two it got. This is the
    /// deployability experiment's "server that always sends inconsistent
    /// retransmissions", not a delivery model; it corrupts the stream by
    /// design. Off by default.
    pub always_inconsistent: bool,
    /// **Experimental, sender** — the sequence-gap design of [TCP-video] §7.2
    /// (a deadline TCP), built only to test its deployability against TCP
    /// Hollywood's (thesis §4.5). `Some(lifetime)`: a segment whose first
    /// transmission is at least `lifetime` old when it would be
    /// retransmitted is *skipped* instead: it is not resent, and the
    /// sender announces the next sequence number the receiver should
    /// expect (the end of the skipped segment) in the experimental option
    /// kind 253 / ExID `0x4877` (RFC 6994; `hollywood_wire::tcp::NEXT_EXPECTED_EXID`)
    /// on a pure ACK sent in the retransmission's place and on every later
    /// segment where the option fits, until the cumulative ACK passes it.
    /// `Some(Duration::ZERO)` skips every retransmission (the lab's
    /// "always" server, like [`HollywoodConfig::always_inconsistent`]).
    /// A segment carrying FIN is never skipped. A standard receiver ignores
    /// the option and waits for the skipped bytes forever.
    pub seq_gap_lifetime: Option<std::time::Duration>,
    /// **Experimental, sender** — [TCP-video] §7.2's deadline TCP with the
    /// application's own deadlines: needs `inconsistent_retransmissions`
    /// (its message queue: a message past its deadline before it got
    /// sequence numbers is dropped, "transmit the next (unexpired) data
    /// section"), but never retransmits inconsistently. A retransmission
    /// whose messages all fail the liveness test (thesis §4.2: expired by
    /// the time it would arrive, and no live message depends on them) is
    /// skipped and announced in the next-expected option as
    /// `seq_gap_lifetime` describes; any other retransmission resends the
    /// bytes as they were. The announced sequence never passes data the
    /// receiver may still need: it is the end of the run of skipped and
    /// SACKed segments from SND.UNA. Only whole messages are skipped: a
    /// segment carrying part of a message larger than the MSS is resent
    /// as it was, as plain TCP would. With it (and the message queue),
    /// `seq_gap_lifetime` is ignored: the messages' deadlines decide. Off
    /// by default.
    pub seq_gap_deadlines: bool,
    /// **Experimental, receiver** — [TCP-video] §7.2: on an acceptable segment
    /// carrying the "next expected sequence" option with a value beyond
    /// RCV.NXT (and within the advertised window), RCV.NXT advances to it;
    /// the skipped bytes the receiver never got are delivered as zero bytes
    /// (so stream offsets stay sequence offsets; with COBS framing a run of
    /// zeros is empty frames).
    pub seq_gap_receive: bool,
    /// **Sender, live messages** — the live-stream window
    /// (`crate::live`, docs/LIVE-CC.md): while the path shows no standing
    /// queue, the congestion window and the pacing rate never fall below
    /// what the application offered over the last smoothed RTT (× 5/4)
    /// as messages that cannot wait a round trip (lifetime ≤ one-way
    /// delay + SRTT), so neither the initial window nor a loss-based
    /// controller's response to random loss starves a live stream whose
    /// rate the path carries. Only such messages queued with
    /// `send_message` count (it needs `inconsistent_retransmissions`).
    /// Off by default; on in [`Config::hollywood`] with
    /// `inconsistent_retransmissions`.
    pub live_window: bool,
}

impl Config {
    /// Standard TCP as the thesis's Hollywood sender configures it for
    /// messages: consistent segmentation (one message per segment when it
    /// fits), Nagle off (thesis §4.2), plus the given Hollywood switches.
    pub fn hollywood(inconsistent_retransmissions: bool, out_of_order_delivery: bool) -> Config {
        Config {
            nagle: false,
            consistent_segmentation: true,
            hollywood: HollywoodConfig {
                inconsistent_retransmissions,
                out_of_order_delivery,
                live_window: inconsistent_retransmissions,
                ..HollywoodConfig::default()
            },
            ..Config::default()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1460,
            recv_buffer: 4 << 20,
            send_buffer: 4 << 20,
            window_scaling: true,
            sack: true,
            dsack: true,
            timestamps: true,
            nagle: true,
            delayed_ack: DelayedAckConfig::default(),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(120),
            initial_rto: Duration::from_secs(1),
            max_retransmissions: 15,
            max_syn_retransmissions: 6,
            cc: CcAlgorithm::Cubic,
            pacing: false,
            initial_cwnd_segments: 10,
            keepalive: None,
            time_wait: Duration::from_secs(60),
            dupack_threshold: 3,
            limited_transmit: true,
            rack: true,
            challenge_ack_limit: 1000,
            consistent_segmentation: false,
            hollywood: HollywoodConfig::default(),
            syn_backlog: 256,
            syn_cookies: true,
            max_connections: 4096,
            autotune: None,
            memory_limit: None,
        }
    }
}
