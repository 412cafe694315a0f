//! The packet→message oracle: what a run of the message stream
//! ([`crate::stream`]) over any transport measured.
//!
//! The oracle (`crate::scenario::ontime`) needs the fate of each message's first
//! transmission. Over TCP the scenario reads it from sequence numbers
//! (`crate::scenario`). QUIC packets are encrypted, so the packets carrying a
//! message are attributed by time: messages in id order take the bytes of
//! the sender's data-sized packets (at least [`ATTRIBUTE_MIN`] bytes;
//! handshake-size packets excluded by time, since messages start after it)
//! in the order they were offered to the lossy link, each message the next
//! bytes its record needs, never from a packet offered before it was
//! generated. This is exact for UDP (packets name their message) and close
//! for QUIC senders that go idle between frames (media rates): a
//! retransmission is taken for new data only until the next idle moment,
//! and never makes a message look sent earlier than it was.

use crate::stream::{MessageReceiver, MessageSender};
use crate::transport::GenericStats;
use hollywood_tcp::Instant;
use hollywood_transport::TransportStats;
use std::time::Duration;

/// Smallest packet attributed to a message by the oracle.
pub const ATTRIBUTE_MIN: usize = 100;

/// A packet the sender offered to the lossy link, for the oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offered {
    /// When it was sent.
    pub time: Instant,
    /// Whole IP packet length.
    pub len: usize,
    /// The network's random loss (or a drop rule) took it.
    pub network_dropped: bool,
    /// Dropped for any reason (loss or a full queue).
    pub dropped: bool,
    /// The message it carries, when that can be read from the packet
    /// (UDP: [`udp_message_id`]); then it is attributed exactly.
    pub id: Option<u32>,
}

/// The message id of a [`UdpTransport`](hollywood_transport::udp::UdpTransport) datagram (whole IP packet).
pub fn udp_message_id(packet: &[u8]) -> Option<u32> {
    let d = hollywood_wire::parse_udp_ip(packet).ok()?;
    hollywood_transport::record::parse_datagram(d.payload)
        .ok()
        .map(|(h, _)| h.id)
}

/// What the packets say about each message's first transmission
/// ([`attribute`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributed {
    /// A packet of it was dropped by the link, for any reason.
    pub first_tx_dropped: Vec<bool>,
    /// The network's loss (or a drop rule) took one.
    pub network_dropped: Vec<bool>,
    /// When the packet carrying its last byte was offered to the link:
    /// generation to this is its sending delay ([RTP-QUIC] §5.2).
    pub first_sent: Vec<Option<Instant>>,
}

/// The oracle's attribution of packets to messages (module docs; exact
/// where packets name their message, [`Offered::id`]): per message, the
/// fate and time of its first transmission. A guessed time is bounded by
/// `received` (when the receiving stack got the message) minus `one_way`:
/// a packet that arrived left at least a propagation delay before, which
/// catches a guess that ran past the end of a burst (header sizes are
/// estimates).
pub fn attribute(
    generated: &[Option<Instant>],
    packets: &[Offered],
    size: usize,
    received: &[Option<Instant>],
    one_way: Duration,
) -> Attributed {
    let n = generated.len();
    let mut a = Attributed {
        first_tx_dropped: vec![false; n],
        network_dropped: vec![false; n],
        first_sent: vec![None; n],
    };
    if packets.iter().any(|p| p.id.is_some()) {
        // Each packet names its message: its first packet is the first
        // transmission.
        for p in packets {
            let Some(id) = p.id.map(|i| i as usize).filter(|&i| i < n) else {
                continue;
            };
            if a.first_sent[id].is_none() {
                a.first_sent[id] = Some(p.time);
                a.first_tx_dropped[id] = p.dropped;
                a.network_dropped[id] = p.network_dropped;
            }
        }
        return a;
    }
    // The packets' payloads as one byte sequence, each message the next
    // `size + MESSAGE_OVERHEAD` bytes of it, never in a packet offered
    // before the message was generated (which re-aligns the two after
    // every idle moment: a retransmission counts as new data only until
    // then).
    let need_per_message = size + MESSAGE_OVERHEAD;
    let (mut at, mut used) = (0usize, 0usize);
    for (id, gen) in generated.iter().enumerate() {
        let Some(gen) = *gen else { continue };
        while at < packets.len() && (packets[at].time < gen || packets[at].len < ATTRIBUTE_MIN) {
            at += 1;
            used = 0;
        }
        let mut need = need_per_message;
        while at < packets.len() && need > 0 {
            let p = packets[at];
            if p.len < ATTRIBUTE_MIN {
                at += 1;
                used = 0;
                continue;
            }
            let payload = p.len.saturating_sub(PACKET_OVERHEAD).max(1);
            let take = (payload - used.min(payload)).min(need);
            need -= take;
            used += take;
            a.first_tx_dropped[id] |= p.dropped;
            a.network_dropped[id] |= p.network_dropped;
            a.first_sent[id] = Some(p.time);
            if used >= payload {
                at += 1;
                used = 0;
                // What is left is within the headers' guess: the message
                // ended in this packet.
                if need <= HEADER_SLACK {
                    need = 0;
                }
            }
        }
        if let (Some(f), Some(r)) = (a.first_sent[id], received.get(id).copied().flatten()) {
            let bound = r.as_nanos().saturating_sub(one_way.as_nanos() as u64);
            a.first_sent[id] = Some(f.min(Instant::from_nanos(bound.max(gen.as_nanos()))));
        }
    }
    a
}

/// How the oracle learns the fate of each message's first transmission.
#[derive(Debug)]
pub enum Fates<'a> {
    /// From the sender's packets as offered to the lossy link, in order,
    /// attributed by time ([`attribute`]; QUIC, UDP).
    Packets(&'a [Offered]),
    /// Known per message (TCP: from sequence numbers).
    Known {
        /// A packet of its first transmission was dropped, for any reason.
        first_tx_dropped: Vec<bool>,
        /// The network (loss model, scripted rule) dropped one.
        network_dropped: Vec<bool>,
        /// Whole packet bytes of the message alone (frame and headers):
        /// what the oracle's serialisation time is computed from.
        wire_len: Vec<usize>,
        /// When the packet carrying its last byte first went out.
        first_sent: Vec<Option<Instant>>,
    },
}

/// What one run of the message stream measured, wherever it ran.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// The sending application after the run.
    pub sender: &'a MessageSender,
    /// Its transport's counters.
    pub sender_stats: TransportStats,
    /// The receiving application after the run.
    pub receiver: &'a MessageReceiver,
    /// Its transport's counters.
    pub receiver_stats: TransportStats,
    /// The fate of each message's first transmission.
    pub fates: Fates<'a>,
    /// Packets the sender put on the data link.
    pub wire_packets: u64,
    /// Their bytes (whole IP packets).
    pub wire_bytes: u64,
    /// How long the run took (virtual or real).
    pub duration: Duration,
    /// Connection failure, if any.
    pub error: Option<String>,
}

/// The run's results (the same report for every transport).
pub fn assemble(sc: &crate::MessagesScenario, o: Outcome<'_>) -> crate::MessagesRun {
    let generated: Vec<Option<Instant>> = o.sender.records().iter().map(|r| r.generated).collect();
    let expired: Vec<bool> = o.sender.records().iter().map(|r| r.expired).collect();
    let arrival = o.receiver.arrival().to_vec();
    let (first_tx_dropped, network_dropped, wire_len, first_sent) = match o.fates {
        Fates::Packets(offered) => {
            let a = attribute(
                &generated,
                offered,
                sc.size,
                o.receiver.received(),
                sc.rtt / 2,
            );
            (
                a.first_tx_dropped,
                a.network_dropped,
                vec![sc.size + PACKET_OVERHEAD; generated.len()],
                a.first_sent,
            )
        }
        Fates::Known {
            first_tx_dropped,
            network_dropped,
            wire_len,
            first_sent,
        } => (first_tx_dropped, network_dropped, wire_len, first_sent),
    };
    let one_way = sc.rtt / 2;
    let on_time = crate::OnTime::of_run(&generated, &arrival, sc.lifetime, |id| {
        !network_dropped[id]
            && crate::oracle_in_time(one_way, sc.rate_bps, wire_len[id], sc.lifetime)
    });
    let error = o
        .error
        .or_else(|| o.sender.error().map(str::to_owned))
        .or_else(|| {
            (o.sender.generated() == 0).then(|| "the connection was not established".to_string())
        });
    crate::MessagesRun {
        scenario: sc.clone(),
        generated,
        arrival,
        received: o.receiver.received().to_vec(),
        first_sent,
        expired,
        first_tx_dropped,
        network_dropped,
        on_time,
        corrupt_delivered: o.receiver.corrupt_delivered() + o.receiver.unknown_delivered(),
        duplicates_delivered: o.receiver.duplicates_delivered(),
        crc_rejected: 0,
        deframer: Default::default(),
        hollywood: Default::default(),
        sender_srtt: o.sender_stats.srtt,
        ooo: Default::default(),
        wire: Default::default(),
        expired_events: o.sender.expired_events(),
        cache_replayed_bytes: 0,
        corrupted_segments: 0,
        forged: 0,
        secure: None,
        altered_by_box: Vec::new(),
        sim_time: o.duration,
        error,
        receiver_packets: Vec::new(),
        transport: GenericStats {
            sender: o.sender_stats,
            receiver: o.receiver_stats,
        },
        wire_packets: o.wire_packets,
        wire_bytes: o.wire_bytes,
        cross_delivered_bytes: Vec::new(),
        fec: None,
    }
}

/// Bytes of a packet that are not message: IPv4 (20) + UDP (8) + a short
/// QUIC header and AEAD tag (about 30).
const PACKET_OVERHEAD: usize = 60;

/// Bytes a message takes in a QUIC packet beyond its payload: its record
/// header (`hollywood_transport::record`) and a share of a STREAM frame
/// header.
const MESSAGE_OVERHEAD: usize = 12;

/// How far the header sizes above may be off for one message
/// ([`attribute`], which also bounds each guess by when the receiver got
/// the message).
const HEADER_SLACK: usize = 32;
