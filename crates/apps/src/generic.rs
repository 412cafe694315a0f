//! The timed message stream over any [`MessageTransport`] (QUIC mappings,
//! QUICsilver, UDP): the same workload, records and on-time accounting as
//! [`crate::messages`] over TCP, with no per-transport code in the
//! applications.
//!
//! The oracle (`crate::ontime`) needs the fate of each message's first
//! transmission. QUIC packets are encrypted, so the packets carrying a
//! message are attributed by time: messages in id order take the sender's
//! data-sized packets (at least [`ATTRIBUTE_MIN`] bytes; handshake-size
//! packets excluded by time, since messages start after it) in the order
//! they were offered to the lossy link, each message the first ones offered
//! at or after its generation, as many as its record needs. This is exact
//! for UDP and for QUIC senders that are not window-limited (media rates);
//! under window limits it attributes a later packet, never an earlier one.

use crate::messages::payload_for;
use hollywood_sim::{TransportApp, TransportHost};
use hollywood_tcp::Instant;
use hollywood_transport::quic::{QuicConfig, QuicIdentity, QuicTransport, Role};
use hollywood_transport::udp::UdpTransport;
use hollywood_transport::{
    MessageTransport, OutMessage, SendError, TransportEvent, TransportStats,
};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// A transport behind the interface.
pub type BoxedTransport = Box<dyn MessageTransport>;

/// Smallest packet attributed to a message by the oracle.
pub const ATTRIBUTE_MIN: usize = 100;

/// A transport other than the TCP deployments.
#[derive(Debug, Clone)]
pub enum GenericTransport {
    /// QUIC with a mapping (and QUICsilver).
    Quic(QuicConfig),
    /// UDP, one datagram per message, sent once.
    Udp,
}

impl GenericTransport {
    /// Names accepted by [`GenericTransport::parse`].
    pub const NAMES: [&'static str; 7] = [
        "quic-ss",
        "quic-gop",
        "quic-fps",
        "quic-pps",
        "quic-dgram",
        "quicsilver",
        "udp",
    ];

    /// Parse a transport name.
    pub fn parse(s: &str) -> Option<GenericTransport> {
        if s == "udp" {
            return Some(GenericTransport::Udp);
        }
        QuicConfig::named(s).map(GenericTransport::Quic)
    }

    /// The name.
    pub fn name(&self) -> &'static str {
        match self {
            GenericTransport::Quic(c) => c.name(),
            GenericTransport::Udp => "udp",
        }
    }

    /// Build the two ends: `(sender, receiver)`.
    pub fn endpoints(
        &self,
        sender: SocketAddr,
        receiver: SocketAddr,
        seed: u64,
    ) -> Result<(BoxedTransport, BoxedTransport), String> {
        Ok(match self {
            GenericTransport::Quic(cfg) => {
                let id = QuicIdentity::generate()?;
                let a = QuicTransport::new(
                    cfg.clone(),
                    Role::Client { remote: receiver },
                    sender,
                    &id,
                    seed,
                )?;
                let b = QuicTransport::new(cfg.clone(), Role::Server, receiver, &id, seed ^ 1)?;
                (Box::new(a), Box::new(b))
            }
            GenericTransport::Udp => (
                Box::new(UdpTransport::new(sender, Some(receiver))),
                Box::new(UdpTransport::new(receiver, None)),
            ),
        })
    }
}

/// What the sender does (as [`crate::messages::SenderConfig`]).
#[derive(Debug, Clone)]
pub struct GenericSenderConfig {
    /// Messages.
    pub count: u32,
    /// Payload bytes.
    pub size: usize,
    /// Between messages.
    pub interval: Duration,
    /// Lifetime from generation; `None` = reliable.
    pub lifetime: Option<Duration>,
    /// Payload seed.
    pub seed: u64,
    /// Close this long after the last message.
    pub linger: Duration,
    /// Messages per group (GOP) for the per-group mapping; every message
    /// of a group after the first depends on the first (an I-frame and
    /// its P-frames). 0 = no groups, no dependencies.
    pub group: u32,
}

/// Per-message sender record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenericRecord {
    /// Generated at.
    pub generated: Option<Instant>,
    /// Reported expired.
    pub expired: bool,
}

/// The sending application.
#[derive(Debug, Clone)]
pub struct GenericSender {
    cfg: GenericSenderConfig,
    next: u32,
    next_at: Option<Instant>,
    backlog: VecDeque<(OutMessage, Instant)>,
    records: Vec<GenericRecord>,
    expired_events: u64,
    too_large: u64,
    close_at: Option<Instant>,
    closed: bool,
    error: Option<String>,
}

impl GenericSender {
    /// A sender that starts once the transport is connected.
    pub fn new(cfg: GenericSenderConfig) -> GenericSender {
        let n = cfg.count as usize;
        GenericSender {
            cfg,
            next: 0,
            next_at: None,
            backlog: VecDeque::new(),
            records: vec![GenericRecord::default(); n],
            expired_events: 0,
            too_large: 0,
            close_at: None,
            closed: false,
            error: None,
        }
    }

    /// Per-message records.
    pub fn records(&self) -> &[GenericRecord] {
        &self.records
    }

    /// Expired events.
    pub fn expired_events(&self) -> u64 {
        self.expired_events
    }

    /// Messages the transport refused as too large (counted as expired).
    pub fn too_large(&self) -> u64 {
        self.too_large
    }

    /// Messages generated.
    pub fn generated(&self) -> u32 {
        self.next
    }

    /// Closed.
    pub fn finished(&self) -> bool {
        self.closed
    }

    /// A fatal problem.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn flush(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        while let Some((mut m, generated)) = self.backlog.pop_front() {
            // Time spent waiting here is used up.
            m.lifetime = self.cfg.lifetime.map(|l| l.saturating_sub(now - generated));
            match t.send(now, m.clone()) {
                Ok(()) => {}
                Err(SendError::WouldBlock) => {
                    self.backlog.push_front((m, generated));
                    return;
                }
                Err(SendError::TooLarge(_)) => {
                    // Not this message (a datagram before the path MTU
                    // was discovered); the stream goes on.
                    self.too_large += 1;
                    self.expired_events += 1;
                    if let Some(r) = self.records.get_mut(m.id as usize) {
                        r.expired = true;
                    }
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
    }

    fn generate_due(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        while let Some(at) = self.next_at {
            if at > now || self.next >= self.cfg.count {
                break;
            }
            let id = self.next;
            let mut m = OutMessage::new(id, payload_for(self.cfg.seed, id, self.cfg.size));
            m.lifetime = self.cfg.lifetime;
            if let Some(g) = id.checked_div(self.cfg.group) {
                m.group = Some(u64::from(g));
                let first = g * self.cfg.group;
                if id != first {
                    m.depends_on = Some(first);
                }
            }
            m.frame = Some(u64::from(id));
            self.records[id as usize].generated = Some(at);
            self.backlog.push_back((m, at));
            self.next += 1;
            self.next_at = (self.next < self.cfg.count).then(|| at + self.cfg.interval);
        }
        self.flush(now, t);
        if self.next >= self.cfg.count && self.backlog.is_empty() && self.close_at.is_none() {
            self.close_at = Some(now + self.cfg.linger);
        }
    }
}

impl TransportApp for GenericSender {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        match ev {
            TransportEvent::Connected if self.next_at.is_none() && self.next == 0 => {
                self.next_at = Some(now);
                self.generate_due(now, t);
            }
            TransportEvent::Writable => self.flush(now, t),
            TransportEvent::Expired { id, .. } => {
                self.expired_events += 1;
                if let Some(r) = self.records.get_mut(id as usize) {
                    r.expired = true;
                }
            }
            TransportEvent::Closed => self.closed = true,
            TransportEvent::Failed(e) => {
                self.error = Some(e);
                self.closed = true;
            }
            _ => {}
        }
    }

    fn on_timeout(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        self.generate_due(now, t);
        if self.close_at.is_some_and(|c| c <= now) {
            self.close_at = None;
            t.close(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.next_at, self.close_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The receiving application.
#[derive(Debug)]
pub struct GenericReceiver {
    seed: u64,
    size: usize,
    arrival: Vec<Option<Instant>>,
    corrupt: u64,
    duplicates: u64,
    unknown: u64,
    peer_closed: bool,
}

impl GenericReceiver {
    /// Expect `count` messages of `size` bytes with payload seed `seed`.
    pub fn new(count: u32, size: usize, seed: u64) -> GenericReceiver {
        GenericReceiver {
            seed,
            size,
            arrival: vec![None; count as usize],
            corrupt: 0,
            duplicates: 0,
            unknown: 0,
            peer_closed: false,
        }
    }

    /// Arrival per message id.
    pub fn arrival(&self) -> &[Option<Instant>] {
        &self.arrival
    }

    /// Wrong content (must be 0).
    pub fn corrupt_delivered(&self) -> u64 {
        self.corrupt
    }

    /// Delivered twice (must be 0).
    pub fn duplicates_delivered(&self) -> u64 {
        self.duplicates
    }

    /// Ids never sent (must be 0).
    pub fn unknown_delivered(&self) -> u64 {
        self.unknown
    }

    /// The sender closed.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }
}

impl TransportApp for GenericReceiver {
    fn on_start(&mut self, _now: Instant, _t: &mut dyn MessageTransport) {}

    fn on_event(&mut self, _now: Instant, _t: &mut dyn MessageTransport, ev: TransportEvent) {
        match ev {
            TransportEvent::Message(m) => {
                let Some(slot) = self.arrival.get_mut(m.id as usize) else {
                    self.unknown += 1;
                    return;
                };
                if slot.is_some() {
                    self.duplicates += 1;
                    return;
                }
                if m.payload != payload_for(self.seed, m.id, self.size) {
                    self.corrupt += 1;
                }
                *slot = Some(m.arrival);
            }
            TransportEvent::PeerClosed => self.peer_closed = true,
            _ => {}
        }
    }
}

/// Sender and receiver transport counters after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenericStats {
    /// The sender's transport.
    pub sender: TransportStats,
    /// The receiver's transport.
    pub receiver: TransportStats,
}

/// Host type aliases for the scenario.
pub type SenderHost = TransportHost<GenericSender>;
/// Host type aliases for the scenario.
pub type ReceiverHost = TransportHost<GenericReceiver>;

/// One packet the sender offered to the lossy link.
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
}

/// The scenario's sender and receiver applications.
pub fn apps(sc: &crate::MessagesScenario) -> (GenericSender, GenericReceiver) {
    let sender = GenericSender::new(GenericSenderConfig {
        count: sc.count,
        size: sc.size,
        interval: sc.interval,
        lifetime: sc.lifetime,
        seed: sc.seed,
        linger: sc.rtt * 4 + Duration::from_secs(1),
        group: sc.group,
    });
    (sender, GenericReceiver::new(sc.count, sc.size, sc.seed))
}

/// The oracle's attribution of packets to messages (module docs): per
/// message, whether the link dropped (for any reason) a packet of its
/// first transmission, and whether the network's loss did.
pub fn attribute(
    generated: &[Option<Instant>],
    packets: &[Offered],
    size: usize,
) -> (Vec<bool>, Vec<bool>) {
    let n = generated.len();
    let mut first_tx_dropped = vec![false; n];
    let mut network_dropped = vec![false; n];
    let mut at = 0;
    for id in 0..n {
        let Some(gen) = generated[id] else { continue };
        while at < packets.len() && (packets[at].time < gen || packets[at].len < ATTRIBUTE_MIN) {
            at += 1;
        }
        let mut carried = 0;
        while at < packets.len() && carried < size {
            let p = packets[at];
            at += 1;
            if p.len < ATTRIBUTE_MIN {
                continue;
            }
            carried += p.len.saturating_sub(PACKET_OVERHEAD).max(1);
            first_tx_dropped[id] |= p.dropped;
            network_dropped[id] |= p.network_dropped;
        }
    }
    (first_tx_dropped, network_dropped)
}

/// What one run of the generic stream measured, wherever it ran.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// The sending application after the run.
    pub sender: &'a GenericSender,
    /// Its transport's counters.
    pub sender_stats: TransportStats,
    /// The receiving application after the run.
    pub receiver: &'a GenericReceiver,
    /// Its transport's counters.
    pub receiver_stats: TransportStats,
    /// The sender's packets as offered to the lossy link, in order.
    pub offered: &'a [Offered],
    /// Packets the sender put on the data link.
    pub wire_packets: u64,
    /// Their bytes (whole IP packets).
    pub wire_bytes: u64,
    /// How long the run took (virtual or real).
    pub duration: Duration,
    /// Connection failure, if any.
    pub error: Option<String>,
}

/// Results of a run in the shape of the TCP runs (same report keys).
pub fn assemble(sc: &crate::MessagesScenario, o: Outcome<'_>) -> crate::MessagesRun {
    let generated: Vec<Option<Instant>> = o.sender.records().iter().map(|r| r.generated).collect();
    let expired: Vec<bool> = o.sender.records().iter().map(|r| r.expired).collect();
    let arrival = o.receiver.arrival().to_vec();
    let (first_tx_dropped, network_dropped) = attribute(&generated, o.offered, sc.size);
    let one_way = sc.rtt / 2;
    let fits = crate::oracle_in_time(one_way, sc.rate_bps, sc.size + PACKET_OVERHEAD, sc.lifetime);
    let on_time = crate::OnTime::of_run(&generated, &arrival, sc.lifetime, |id| {
        fits && !network_dropped[id]
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
        sim_time: o.duration,
        error,
        receiver_packets: Vec::new(),
        transport: GenericStats {
            sender: o.sender_stats,
            receiver: o.receiver_stats,
        },
        wire_packets: o.wire_packets,
        wire_bytes: o.wire_bytes,
    }
}

/// Bytes of a packet that are not message: IPv4 (20) + UDP (8) + a short
/// QUIC header and AEAD tag (about 30).
const PACKET_OVERHEAD: usize = 60;

/// Run `sc` over `g` (see [`crate::MessagesScenario::run`]).
pub(crate) fn run(
    sc: &crate::MessagesScenario,
    g: &GenericTransport,
) -> Result<crate::MessagesRun, String> {
    use hollywood_sim::{CaptureFilter, DropReason, LinkConfig, SimBuilder, TraceKind};
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr};
    use std::rc::Rc;

    if sc.middlebox != hollywood_sim::MiddleboxKind::None {
        return Err(format!(
            "{} runs without a middlebox (the middleboxes model TCP boxes)",
            g.name()
        ));
    }
    let mut sim = SimBuilder::new().seed(sc.seed).build();
    let tx_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 4000);
    let rx_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5004);
    let mut g = g.clone();
    let key_log = match (&mut g, &sc.keylog) {
        (GenericTransport::Quic(q), Some(_)) => {
            let k = std::sync::Arc::new(hollywood_transport::quic::KeyLogLines::default());
            q.key_log = Some(k.clone());
            Some(k)
        }
        (_, Some(_)) => return Err(format!("--keylog applies to QUIC, not {}", g.name())),
        _ => None,
    };
    let (a, b) = g.endpoints(tx_addr, rx_addr, sim.derive_seed(1))?;
    let (sender, receiver) = apps(sc);
    let tx = sim.add_node(TransportHost::new(tx_addr.ip(), a, sender));
    let rx = sim.add_node(TransportHost::new(rx_addr.ip(), b, receiver));
    let one_way = sc.rtt / 2;
    let fwd_cfg = LinkConfig::new(sc.rate_bps, one_way)
        .with_queue_bytes(sc.queue_bytes)
        .with_loss(sc.loss);
    let rev_cfg = LinkConfig::new(sc.uplink_bps, one_way).with_queue_bytes(sc.queue_bytes);
    let (fwd, _) = sim
        .connect(tx, 0, rx, 0, fwd_cfg, rev_cfg)
        .map_err(|e| e.to_string())?;
    if !sc.drop_packets.is_empty() {
        sim.drop_nth(fwd, sc.drop_packets.iter().copied())
            .map_err(|e| e.to_string())?;
    }
    if let Some(p) = &sc.pcap {
        sim.capture_pcap_file(p, CaptureFilter::default())
            .map_err(|e| format!("cannot write pcap {}: {e}", p.display()))?;
    }
    let offered = Rc::new(RefCell::new((
        Vec::<Offered>::new(),
        HashMap::<u64, usize>::new(),
    )));
    {
        let offered = offered.clone();
        sim.on_packet(move |ev| {
            if ev.link != fwd {
                return;
            }
            let mut o = offered.borrow_mut();
            match ev.kind {
                TraceKind::Sent => {
                    let i = o.0.len();
                    o.1.insert(ev.index, i);
                    o.0.push(Offered {
                        time: ev.time,
                        len: ev.packet.len(),
                        network_dropped: false,
                        dropped: false,
                    });
                }
                TraceKind::Dropped(reason) if ev.copy == 0 => {
                    if let Some(&i) = o.1.get(&ev.index) {
                        o.0[i].dropped = true;
                        o.0[i].network_dropped =
                            matches!(reason, DropReason::Loss | DropReason::Rule);
                    }
                }
                _ => {}
            }
        });
    }
    let end_of_traffic = sc.interval * sc.count + sc.rtt * 20 + Duration::from_secs(60);
    let limit = Instant::ZERO + end_of_traffic;
    while sim.now() < limit {
        sim.run_for(Duration::from_millis(250))
            .map_err(|e| e.to_string())?;
        let s = sim.node_mut::<SenderHost>(tx).expect("sender");
        if s.app().finished() {
            break;
        }
    }
    sim.run_for(sc.rtt * 2).map_err(|e| e.to_string())?;
    sim.finish_captures().map_err(|e| format!("pcap: {e}"))?;
    if let (Some(k), Some(path)) = (&key_log, &sc.keylog) {
        std::fs::write(path, k.to_file_contents())
            .map_err(|e| format!("cannot write key log {}: {e}", path.display()))?;
    }
    let link = sim.link_stats(fwd).map_err(|e| e.to_string())?;

    let wire_packets = link.packets_sent;
    let wire_bytes = link.bytes_sent;
    let duration = sim.now().since_epoch();
    let sender = sim.node_mut::<SenderHost>(tx).expect("sender");
    let sender_stats = sender.transport().stats();
    let sender_app = sender.app().clone();
    let r = sim.node_mut::<ReceiverHost>(rx).expect("receiver");
    let receiver_stats = r.transport().stats();
    let offered = offered.borrow();
    Ok(assemble(
        sc,
        Outcome {
            sender: &sender_app,
            sender_stats,
            receiver: r.app(),
            receiver_stats,
            offered: &offered.0,
            wire_packets,
            wire_bytes,
            duration,
            error: None,
        },
    ))
}
