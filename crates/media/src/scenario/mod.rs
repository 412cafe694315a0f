//! A message-stream scenario: one sender, one receiver, an optional
//! middlebox, a bottleneck with loss (thesis Fig. 5.3 style dumbbell reduced
//! to its bottleneck).
//!
//! ```text
//!  sender ──[rate, rtt/2]──▶ (middlebox) ──[loss]──▶ receiver
//!  sender ◀──[uplink, rtt/2]────── (middlebox) ◀── receiver
//! ```
//!
//! What a run is judged by lives beside it: [`oracle`] (the packet→message
//! attribution and the run's report for every transport), [`ontime`] (the
//! on-time oracle), [`audit`] (the wire audit) and [`models`] (the thesis's
//! equations).

pub mod audit;
pub mod models;
pub mod ontime;
pub mod oracle;
mod path;
pub mod stats;
mod wire;

pub use path::{CrossTraffic, Impairments};

use crate::stream::Transport;
use crate::transport::{BoxedTransport, GenericTransport, ReceiverHost, SenderHost};
use audit::{WireAudit, WireAuditReport};
use hollywood_sim::{
    CaptureFilter, LinkConfig, LossModel, Middlebox, MiddleboxConfig, MiddleboxKind, SimBuilder,
    TraceKind, TransportHost,
};
use hollywood_tcp::{Config, HollywoodStats, Instant, OooStats};
use hollywood_transport::fec::{FecStats, FecTransport};
use hollywood_transport::tcp::TcpTransport;
use hollywood_transport::MessageTransport;
use hollywood_transport::{QuicKind, TransportKind};
use oracle::{Fates, Outcome};
use path::{cross_topology, RX, TX};
use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;
use wire::{altered_messages, tcp_fates, Offers, WireLog};

/// Scenario parameters. `Default` is the thesis's intercontinental VoIP
/// path (§5.1.2): 8 Mb/s down, 1 Mb/s up, 70 ms RTT, 0.1 % loss, 160-byte
/// messages every 20 ms.
#[derive(Debug, Clone)]
pub struct MessagesScenario {
    /// Rate sender → receiver (bit/s).
    pub rate_bps: u64,
    /// Rate receiver → sender (bit/s).
    pub uplink_bps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Loss on the link into the receiver (behind the middlebox, if any).
    pub loss: LossModel,
    /// Drop-tail queue per link (bytes).
    pub queue_bytes: usize,
    /// Messages.
    pub count: u32,
    /// Payload bytes per message.
    pub size: usize,
    /// Interval between messages.
    pub interval: Duration,
    /// Message lifetime (None = reliable).
    pub lifetime: Option<Duration>,
    /// The transport: a TCP deployment (standard TCP, TCP Hollywood and
    /// its partial deployments) or QUIC with a mapping, QUICsilver, UDP
    /// (`crate::transport`).
    pub transport: GenericTransport,
    /// Middlebox on the path.
    pub middlebox: MiddleboxKind,
    /// Seed for everything.
    pub seed: u64,
    /// Base engine configuration (the transport's switches are applied on top).
    pub base: Config,
    /// Write the sender-side packets here.
    pub pcap: Option<PathBuf>,
    /// QUIC transports: write the connection's TLS secrets here in
    /// SSLKEYLOGFILE format, so Wireshark decrypts the pcap.
    pub keylog: Option<PathBuf>,
    /// TCP deployments: message protection (`hollywood_transport::secure`):
    /// a TLS 1.3 handshake, then every message sealed.
    pub secure: bool,
    /// Also drop these packets (0-based indices of packets offered to the
    /// lossy link), to script exact scenarios.
    pub drop_packets: Vec<u64>,
    /// Keep every packet the receiver sent (for wire comparisons).
    pub record_receiver_packets: bool,
    /// Messages per group (GOP): the first of each group is depended upon
    /// by the rest, and the per-group QUIC mapping puts a group on one
    /// stream. 0 = none.
    pub group: u32,
    /// A timetable (frames of video, `crate::video`) instead of
    /// `interval` and `group`; `count` must be its length.
    pub schedule: Option<crate::stream::Schedule>,
    /// Traffic sharing the bottleneck (the [TCP-video] cross traffic). With any,
    /// the path is sender → router → bottleneck (rate, delay, loss, queue)
    /// → router → receiver, and each source and sink hangs off its router.
    pub cross: Vec<CrossTraffic>,
    /// More ways the lossy link (and the middlebox) mistreat packets.
    pub impair: Impairments,
    /// FEC on the message layer (`hollywood_transport::fec`) at both ends,
    /// with these settings; `None`: off. Over UDP, QUIC and the TCP
    /// Hollywood senders with the message queue (the oracle reads their
    /// placements; a byte-stream sender's offsets assume no repair).
    pub fec: Option<hollywood_fec::FecConfig>,
    /// Message *i* gets priority `priorities[i % len]` (higher is sent
    /// first where the transport schedules: QUIC streams, the TCP
    /// Hollywood message queue); empty: all the same.
    pub priorities: Vec<i8>,
}

impl Default for MessagesScenario {
    fn default() -> Self {
        MessagesScenario {
            rate_bps: 8_000_000,
            uplink_bps: 1_000_000,
            rtt: Duration::from_millis(70),
            loss: LossModel::Bernoulli(0.001),
            queue_bytes: 64 * 1500,
            count: 3000,
            size: 160,
            interval: Duration::from_millis(20),
            lifetime: Some(Duration::from_millis(65)),
            transport: GenericTransport::Tcp(Transport::Hollywood),
            middlebox: MiddleboxKind::None,
            seed: 1,
            base: Config::default(),
            pcap: None,
            keylog: None,
            secure: false,
            drop_packets: Vec::new(),
            record_receiver_packets: false,
            group: 0,
            schedule: None,
            cross: Vec::new(),
            impair: Impairments::default(),
            fec: None,
            priorities: Vec::new(),
        }
    }
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct MessagesRun {
    /// The parameters.
    pub scenario: MessagesScenario,
    /// Per message: generated at the sender.
    pub generated: Vec<Option<Instant>>,
    /// Per message: arrived at the receiving application.
    pub arrival: Vec<Option<Instant>>,
    /// Per delivered message: when the last of its bytes first reached the
    /// receiving stack (`InMessage::received`); `arrival` minus this is
    /// its head-of-line-blocking delay ([RTP-QUIC] §5.1). `None` where not
    /// measured (real packets).
    pub received: Vec<Option<Instant>>,
    /// Per message: when the packet carrying its last byte first went on
    /// the wire (TCP: from sequence numbers; otherwise attributed by time,
    /// `oracle::attribute`); generation to this is its sending
    /// delay ([RTP-QUIC] §5.2). `None` where not measured (real packets).
    pub first_sent: Vec<Option<Instant>>,
    /// Per message: the transport reported it expired.
    pub expired: Vec<bool>,
    /// Per message: the lossy link dropped the first transmission of (part
    /// of) it, for any reason.
    pub first_tx_dropped: Vec<bool>,
    /// Per message: the network (loss model or scripted rule, not the
    /// queue) dropped the first transmission of (part of) it.
    pub network_dropped: Vec<bool>,
    /// On-time delivery against the deadline (generation + lifetime), with
    /// the oracle (`ontime`).
    pub on_time: crate::OnTime,
    /// Delivered with wrong content.
    pub corrupt_delivered: u64,
    /// Delivered twice.
    pub duplicates_delivered: u64,
    /// Frames the receiver's CRC rejected.
    pub crc_rejected: u64,
    /// The receiver's intermediary-layer counters.
    pub deframer: hollywood_msg::DeframerStats,
    /// The sender's inconsistent-retransmission counters.
    pub hollywood: HollywoodStats,
    /// The sender's smoothed RTT when last seen (None before any sample).
    pub sender_srtt: Option<Duration>,
    /// The receiver's out-of-order delivery counters.
    pub ooo: OooStats,
    /// What the sender put on the wire.
    pub wire: WireAuditReport,
    /// Expired events reported to the sender.
    pub expired_events: u64,
    /// Retransmitted bytes replayed by a caching middlebox.
    pub cache_replayed_bytes: u64,
    /// Data segments the middlebox changed under a valid checksum
    /// ([`Impairments::corrupt`]).
    pub corrupted_segments: u64,
    /// Messages the middlebox forged ([`Impairments::forge`]).
    pub forged: u64,
    /// The receiver's message-protection counters (secure mode).
    pub secure: Option<hollywood_transport::secure::SecureStats>,
    /// Per message: a middlebox changed bytes of its frame (a cache
    /// replaying other bytes into its slot, thesis §4.5, or corruption),
    /// so the receiver may have lost it while the sender saw it
    /// acknowledged. Empty where not measured.
    pub altered_by_box: Vec<bool>,
    /// Virtual time at the end.
    pub sim_time: Duration,
    /// A connection-level failure, if any.
    pub error: Option<String>,
    /// Packets the receiver sent, if recorded.
    pub receiver_packets: Vec<Vec<u8>>,
    /// Transport counters of both ends (generic transports only).
    pub transport: crate::transport::GenericStats,
    /// Packets the sender offered to the data link.
    pub wire_packets: u64,
    /// Bytes (whole IP packets) the sender offered to the data link.
    pub wire_bytes: u64,
    /// Per cross-traffic flow: bytes its receiver got (TCP payload, or
    /// whole UDP packets).
    pub cross_delivered_bytes: Vec<u64>,
    /// With FEC: the layer's counters at the sender and the receiver.
    pub fec: Option<(FecStats, FecStats)>,
}

/// Per message where both times are known: `(message id, b - a in
/// milliseconds)`, in id order.
pub fn spans_ms_by_id<'a>(
    a: &'a [Option<Instant>],
    b: &'a [Option<Instant>],
) -> impl Iterator<Item = (usize, f64)> + 'a {
    a.iter().zip(b).enumerate().filter_map(|(i, (a, b))| {
        Some((
            i,
            (b.as_ref()?.as_nanos() as f64 - a.as_ref()?.as_nanos() as f64) / 1e6,
        ))
    })
}

/// Per message where both times are known, `b - a` in milliseconds.
fn spans_ms(a: &[Option<Instant>], b: &[Option<Instant>]) -> Vec<f64> {
    spans_ms_by_id(a, b).map(|(_, d)| d).collect()
}

impl MessagesRun {
    /// Per delivered message, generation → the receiving stack holding all
    /// of it (stack latency, [QUICsilver-2019] Figs. 4-5), in milliseconds.
    pub fn stack_latency_ms(&self) -> Vec<f64> {
        spans_ms(&self.generated, &self.received)
    }

    /// Per delivered message, the receiving stack holding all of it →
    /// delivery (head-of-line-blocking delay, [RTP-QUIC] §5.1), in
    /// milliseconds.
    pub fn hol_ms(&self) -> Vec<f64> {
        spans_ms(&self.received, &self.arrival)
    }

    /// Per message sent, generation → its last byte first on the wire
    /// (sending delay, [RTP-QUIC] §5.2), in milliseconds.
    pub fn sending_delay_ms(&self) -> Vec<f64> {
        spans_ms(&self.generated, &self.first_sent)
    }

    /// Per delivered message, generation → arrival at the receiving
    /// application, in milliseconds (message order).
    pub fn delays_ms(&self) -> Vec<f64> {
        spans_ms(&self.generated, &self.arrival)
    }
}

impl MessagesScenario {
    /// Run to completion (all messages generated, connection closed, or a
    /// generous time limit) and collect the results. The same sender and
    /// receiver applications ([`crate::stream`]) run over every
    /// transport; only what is measured on the wire differs (sequence
    /// numbers for TCP, packet timing otherwise: [`oracle`]).
    pub fn run(&self) -> Result<MessagesRun, String> {
        if self.count == 0 || self.size == 0 {
            return Err("message count and size must be at least 1".into());
        }
        if let Some(s) = &self.schedule {
            if s.len() != self.count as usize {
                return Err(format!(
                    "the timetable has {} messages but count is {}",
                    s.len(),
                    self.count
                ));
            }
            if let Some((i, p)) = s
                .iter()
                .enumerate()
                .find(|(_, p)| p.size.is_some_and(|n| n == 0 || n as usize > self.size))
            {
                return Err(format!(
                    "message {i} of the timetable has {} bytes: use 1 to {}",
                    p.size.unwrap_or(0),
                    self.size
                ));
            }
        }
        let mut g = self.transport.clone();
        let tcp = g.tcp();
        if tcp.is_none() && self.middlebox != MiddleboxKind::None {
            return Err(format!(
                "{} runs without a middlebox (the middleboxes model TCP boxes)",
                g.name()
            ));
        }
        let key_log = match (&mut g, &self.keylog) {
            (GenericTransport::Quic(q), Some(_)) => {
                let k = std::sync::Arc::new(hollywood_transport::quic::KeyLogLines::default());
                q.key_log = Some(k.clone());
                Some(k)
            }
            (_, Some(_)) => return Err(format!("--keylog applies to QUIC, not {}", g.name())),
            _ => None,
        };
        let mut sim = SimBuilder::new().seed(self.seed).build();
        let tx_addr = SocketAddr::new(IpAddr::V4(TX), 4000);
        let rx_addr = SocketAddr::new(IpAddr::V4(RX), 5004);
        let seed = sim.derive_seed(1);
        let (a, b): (BoxedTransport, BoxedTransport) = match tcp {
            Some(t) => {
                let (mut a, b) = if self.secure {
                    let id = hollywood_transport::secure::Identity::generate()?;
                    t.endpoints_secure(&self.base, tx_addr, rx_addr, seed, &id)?
                } else {
                    t.endpoints(&self.base, tx_addr, rx_addr, seed)
                };
                // Where an inconsistent-retransmission sender put each
                // message, for the oracle.
                a.record_placements();
                (Box::new(a), Box::new(b))
            }
            None if self.secure => {
                return Err(format!(
                    "secure mode is for the TCP deployments (QUIC has TLS), not {}",
                    g.name()
                ))
            }
            // The UDP receiver answers the peer it hears from: FEC REPORTs.
            None if self.fec.is_some() && matches!(g, GenericTransport::Udp) => (
                Box::new(hollywood_transport::udp::UdpTransport::new(
                    tx_addr,
                    Some(rx_addr),
                )),
                Box::new(
                    hollywood_transport::udp::UdpTransport::new(rx_addr, None).reply_to_peer(),
                ),
            ),
            None => g.endpoints(&self.base, tx_addr, rx_addr, seed)?,
        };
        let (a, b) = match &self.fec {
            None => (a, b),
            Some(cfg) => with_fec(&g, cfg, a, b)?,
        };
        let (sender, receiver) = crate::transport::apps(self);
        let tx = sim.add_node(TransportHost::new(tx_addr.ip(), a, sender));
        let rx = sim.add_node(TransportHost::new(rx_addr.ip(), b, receiver));
        let one_way = self.rtt / 2;
        let fwd_cfg = LinkConfig::new(self.rate_bps, one_way).with_queue_bytes(self.queue_bytes);
        let rev_cfg = LinkConfig::new(self.uplink_bps, one_way).with_queue_bytes(self.queue_bytes);
        // The loss sits on the link into the receiver. With a middlebox that
        // is the link behind it, as in the thesis's deployability method
        // (§5.3: the client drops incoming segments before its TCP stack),
        // so a cache sees the original transmission of what gets lost.
        // Room for the traffic, its repair, and a TCP handshake that needs
        // all of its SYN retransmissions (1 + 2 + ... + 64 s with the
        // default 1 s initial RTO, Linux's tcp_syn_retries = 6) on a bursty
        // path.
        let traffic = match &self.schedule {
            // A timetable may hand over much at once (a stored video, all
            // at the start): room to send all of it at a share of the
            // bottleneck (one of the flows on it, and half again).
            Some(s) => {
                let bytes: f64 = s
                    .iter()
                    .map(|p| p.size.map_or(self.size, |n| n as usize) as f64)
                    .sum();
                let flows = 2.0 + self.cross.len() as f64;
                let drain = bytes * 8.0 / self.rate_bps.max(1) as f64 * flows * 1.5;
                s.last().map_or(Duration::ZERO, |p| p.at) + Duration::from_secs_f64(drain.min(1e6))
            }
            None => self.interval * self.count,
        };
        let end_of_traffic =
            traffic + self.rtt * 20 + Duration::from_secs(30) + Duration::from_secs(127);
        let limit = Instant::ZERO + end_of_traffic;
        let mut cross_sinks = Vec::new();
        let boxed = self.middlebox != MiddleboxKind::None
            || self.impair.corrupt > 0.0
            || self.impair.forge > 0.0;
        let (fwd, lossy, mbox) = if !self.cross.is_empty() {
            if boxed || !self.drop_packets.is_empty() || self.impair != Impairments::default() {
                return Err(
                    "cross traffic runs without a middlebox, scripted drops or impairments".into(),
                );
            }
            let (access, bottleneck, sinks) = cross_topology(
                self,
                (fwd_cfg.clone(), rev_cfg.clone()),
                &mut sim,
                tx,
                rx,
                limit,
            )?;
            cross_sinks = sinks;
            (access, bottleneck, None)
        } else if !boxed {
            let (f, _) = sim
                .connect(
                    tx,
                    0,
                    rx,
                    0,
                    self.impair.apply(fwd_cfg.with_loss(self.loss)),
                    rev_cfg,
                )
                .map_err(|e| e.to_string())?;
            (f, f, None)
        } else {
            let mb = sim.add_node(Middlebox::new(MiddleboxConfig {
                kind: self.middlebox,
                seed: sim.derive_seed(3),
                corrupt_probability: self.impair.corrupt,
                forge_probability: self.impair.forge,
                ..MiddleboxConfig::default()
            }));
            let (f, _) = sim
                .connect(tx, 0, mb, 0, fwd_cfg, rev_cfg)
                .map_err(|e| e.to_string())?;
            let fast = LinkConfig::new(0, Duration::ZERO);
            let (l, _) = sim
                .connect(
                    mb,
                    1,
                    rx,
                    0,
                    self.impair.apply(fast.clone().with_loss(self.loss)),
                    fast,
                )
                .map_err(|e| e.to_string())?;
            (f, l, Some(mb))
        };
        if let Some((period, factor)) = self.impair.rate_swing {
            if period < Duration::from_millis(10) || !(0.01..=100.0).contains(&factor) {
                return Err(format!(
                    "rate swing every {period:?} by {factor}: use a period of at least 10 ms and a factor of 0.01 to 100"
                ));
            }
            let other = ((self.rate_bps as f64 * factor) as u64).max(10_000);
            let mut k = 1u32;
            while Instant::ZERO + period * k < limit {
                let r = if k % 2 == 1 { other } else { self.rate_bps };
                sim.schedule_link(fwd, Instant::ZERO + period * k, move |c| c.rate_bps = r)
                    .map_err(|e| e.to_string())?;
                k += 1;
            }
        }
        if !self.drop_packets.is_empty() {
            sim.drop_nth(lossy, self.drop_packets.iter().copied())
                .map_err(|e| e.to_string())?;
        }
        let rev_packets = Rc::new(RefCell::new(Vec::new()));
        if self.record_receiver_packets {
            let rp = rev_packets.clone();
            sim.on_packet(move |ev| {
                if ev.kind == TraceKind::Sent && ev.packet.get(12..16) == Some(&RX.octets()[..]) {
                    rp.borrow_mut().push(ev.packet.to_vec());
                }
            });
        }
        if let Some(p) = &self.pcap {
            sim.capture_pcap_file(p, CaptureFilter::default())
                .map_err(|e| format!("cannot write pcap {}: {e}", p.display()))?;
        }
        let audit = Rc::new(RefCell::new(WireAudit::new()));
        let wire_log = Rc::new(RefCell::new(WireLog::default()));
        let offered = Rc::new(RefCell::new(Offers {
            udp: matches!(g, GenericTransport::Udp),
            fec: self.fec.is_some(),
            ..Offers::default()
        }));
        {
            let audit = audit.clone();
            let log = wire_log.clone();
            let offered = offered.clone();
            sim.on_packet(move |ev| {
                // Only the measured flow's packets (cross traffic shares the
                // bottleneck).
                let ours = ev.packet.get(12..16) == Some(&TX.octets()[..]);
                if tcp.is_some() {
                    if ev.link == fwd && ev.kind == TraceKind::Sent {
                        audit.borrow_mut().observe(ev.packet);
                    }
                    if ev.link == lossy && ours {
                        log.borrow_mut()
                            .on_event(ev.time, ev.kind, ev.index, ev.copy, ev.packet);
                    }
                } else if ev.link == lossy && ours {
                    offered
                        .borrow_mut()
                        .on_event(ev.time, ev.kind, ev.index, ev.copy, ev.packet);
                }
            });
        }
        let mut done = false;
        while sim.now() < limit {
            sim.run_for(Duration::from_millis(250))
                .map_err(|e| e.to_string())?;
            let s = sim.node_mut::<SenderHost>(tx).expect("sender");
            if s.app().finished() || s.app().error().is_some() {
                done = true;
                break;
            }
            // The receiver saw the sender close: every message is in.
            if sim
                .node_mut::<ReceiverHost>(rx)
                .expect("receiver")
                .app()
                .peer_closed()
            {
                done = true;
                break;
            }
        }
        // Let the last packets land.
        sim.run_for(self.rtt * 2).map_err(|e| e.to_string())?;
        sim.finish_captures().map_err(|e| format!("pcap: {e}"))?;
        if let (Some(k), Some(path)) = (&key_log, &self.keylog) {
            std::fs::write(path, k.to_file_contents())
                .map_err(|e| format!("cannot write key log {}: {e}", path.display()))?;
        }
        let link = sim.link_stats(fwd).map_err(|e| e.to_string())?;
        let (mstats, altered) = mbox
            .and_then(|m| {
                sim.node_mut::<Middlebox>(m)
                    .map(|m| (m.stats(), m.altered().to_vec()))
            })
            .unwrap_or_default();
        let cache_replayed_bytes = mstats.cache_replayed_bytes;
        let duration = sim.now().since_epoch();
        let s = sim.node_mut::<SenderHost>(tx).expect("sender");
        let sender_stats = s.transport().stats();
        let sender = s.app().clone();
        let tx_fec = fec_of(s.transport()).map(FecTransport::fec_stats);
        let tx_tcp = tcp_of(s.transport());
        let mut placements = tx_tcp.map(|t| t.placements().to_vec()).unwrap_or_default();
        if self.fec.is_some() {
            // The application's ids; the layer's own messages are no one's.
            placements.retain_mut(|p| match hollywood_fec::app_id(p.id) {
                Some(app) => {
                    p.id = app;
                    true
                }
                None => false,
            });
        }
        let tx_details = tx_tcp.map(TcpTransport::details).unwrap_or_default();
        let r = sim.node_mut::<ReceiverHost>(rx).expect("receiver");
        let rx_details = tcp_of(r.transport())
            .map(TcpTransport::details)
            .unwrap_or_default();
        let rx_fec = fec_of(r.transport()).map(FecTransport::fec_stats);
        let offered = offered.borrow();
        let log = wire_log.borrow();
        let fates = match tcp {
            Some(t) => tcp_fates(self, t, &sender, &placements, &log),
            None => Fates::Packets(&offered.packets),
        };
        let altered_by_box = match tcp {
            Some(t) if !altered.is_empty() => {
                altered_messages(self, t, &sender, &placements, &log, &altered)
            }
            _ => vec![false; self.count as usize],
        };
        let mut run = oracle::assemble(
            self,
            Outcome {
                sender: &sender,
                sender_stats,
                receiver: r.app(),
                receiver_stats: r.transport().stats(),
                fates,
                wire_packets: link.packets_sent,
                wire_bytes: link.bytes_sent,
                duration,
                error: None,
            },
        );
        if tcp.is_some() {
            run.crc_rejected = rx_details.deframer.crc_rejected;
            run.deframer = rx_details.deframer;
            run.hollywood = tx_details.hollywood;
            run.ooo = rx_details.ooo;
            run.secure = rx_details.secure;
            run.wire = audit.borrow().report();
        }
        if !done && run.error.is_none() {
            run.error = Some(format!(
                "the sender had not finished at the run's time limit ({:.0} s)",
                end_of_traffic.as_secs_f64()
            ));
        }
        run.cache_replayed_bytes = cache_replayed_bytes;
        run.corrupted_segments = mstats.corrupted;
        run.forged = mstats.forged;
        run.altered_by_box = altered_by_box;
        run.cross_delivered_bytes = cross_sinks.iter().map(|c| c.bytes(&mut sim)).collect();
        run.receiver_packets = std::mem::take(&mut rev_packets.borrow_mut());
        run.fec = tx_fec.zip(rx_fec);
        Ok(run)
    }
}

/// `(a, b)`, the two ends of `g`, each under an FEC layer with `cfg`
/// (told whether `g` retransmits: UDP and QUIC datagrams do not). The
/// simulator's and the lab's runs of a [`MessagesScenario`] with
/// [`MessagesScenario::fec`] both build their ends with it. Over TCP only
/// the senders with the message queue (hollywood, hollywood-ir) carry it.
pub fn with_fec(
    g: &GenericTransport,
    cfg: &hollywood_fec::FecConfig,
    a: BoxedTransport,
    b: BoxedTransport,
) -> Result<(BoxedTransport, BoxedTransport), String> {
    if g.tcp().is_some_and(|t| !t.uses_message_queue()) {
        return Err(format!(
            "FEC runs over UDP, QUIC and the TCP Hollywood senders with the message queue, not {}",
            g.name()
        ));
    }
    let cfg = hollywood_fec::FecConfig {
        retransmits: !matches!(
            g.kind(),
            TransportKind::Udp | TransportKind::Quic(QuicKind::Datagram)
        ),
        message_overhead: match cfg.message_overhead {
            0 => hollywood_transport::fec::packet_overhead(g.kind()),
            n => n,
        },
        // Over TCP the first round trip's window is the SYN-ACK's 64 KiB:
        // repairs wait for the first REPORT (FecConfig::repair_before_report).
        repair_before_report: cfg.repair_before_report && g.tcp().is_none(),
        ..cfg.clone()
    };
    let a: BoxedTransport = Box::new(FecTransport::new(a, cfg.clone())?);
    let b: BoxedTransport = Box::new(FecTransport::new(b, cfg)?);
    Ok((a, b))
}

/// The FEC layer of a transport, if it has one.
fn fec_of(t: &dyn MessageTransport) -> Option<&FecTransport> {
    t.as_any().downcast_ref::<FecTransport>()
}

/// The TCP transport, under an FEC layer or not.
fn tcp_of(t: &dyn MessageTransport) -> Option<&TcpTransport> {
    let inner = fec_of(t).map_or(t, FecTransport::inner);
    inner.as_any().downcast_ref::<TcpTransport>()
}
