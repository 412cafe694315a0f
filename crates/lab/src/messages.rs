//! `hollywood lab messages`: the timed message stream of `sim messages` on
//! real packets (issue 10, "a real-packet twin of `sim messages`").
//!
//! The scenario is the simulator's [`MessagesScenario`] (a fixed interval
//! or a timetable, e.g. video frames); the path is a
//! two-host lab whose user-space emulator runs the simulator's own link
//! model with the same parameters (rate and queue each way, half the RTT
//! each way, the loss model on a→b only). The result is the simulator's
//! [`MessagesRun`], so the CLI prints the same JSON keys for both.
//!
//! QUIC and UDP run their sans-IO transports (the very ones the simulator
//! runs) and the same applications ([`hollywood_media::stream`]) on real
//! UDP sockets in the lab's namespaces, through
//! [`hollywood_io::udp`], on the OS clock. The oracle is the
//! simulator's attribution of packets to messages by time
//! ([`hollywood_media::scenario::oracle::attribute`]), with each packet's fate read
//! from the emulator's drop log by its fingerprint (computed from the
//! packet as the transport built it; the kernel sends the same addresses,
//! ports and payload).

use crate::apps;
use crate::netem::{segment_fingerprint, Direction};
use crate::topology::{Host, Lab, LabError, LabSpec};
use hollywood_io::apphost::Port;
use hollywood_io::udp::UdpPort;
use hollywood_io::{AppHost, TunDevice, UdpHost};
use hollywood_media::scenario::oracle::{self, Fates, Offered, Outcome};
use hollywood_media::transport;
use hollywood_media::transport::BoxedTransport;
use hollywood_media::{GenericTransport, MessagesRun, MessagesScenario};
use hollywood_media::{MessageReceiver, MessageSender};
use hollywood_sim::{DropReason, LinkConfig, MiddleboxKind};
use hollywood_tcp::Instant;
use hollywood_transport::fec::FecTransport;
use hollywood_transport::udp::UdpTransport;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::apps::Error;

/// Sender and receiver ports (as in the simulator).
const SENDER_PORT: u16 = 4000;
const RECEIVER_PORT: u16 = 5004;

/// A packet the sender sent: when, IP length, emulator fingerprint, the
/// message it names (UDP).
type SentPacket = (Instant, usize, Option<u64>, Option<u32>);

/// The emulated links of a scenario: a→b carries data and the loss model,
/// b→a the acknowledgements.
pub fn links(sc: &MessagesScenario) -> (LinkConfig, LinkConfig) {
    let one_way = sc.rtt / 2;
    let fwd = LinkConfig::new(sc.rate_bps, one_way)
        .with_queue_bytes(sc.queue_bytes)
        .with_loss(sc.loss);
    let rev = LinkConfig::new(sc.uplink_bps, one_way).with_queue_bytes(sc.queue_bytes);
    (fwd, rev)
}

/// Run `sc` over its transport ([`MessagesScenario::transport`]) in a
/// fresh lab named `lab_name`: QUIC and UDP through [`run_generic`], the
/// TCP deployments through [`run_tcp`].
pub fn run(sc: &MessagesScenario, lab_name: &str) -> Result<MessagesRun, Error> {
    if !sc.cross.is_empty() {
        return Err("cross traffic runs in the simulator only (the lab has two hosts)".into());
    }
    match &sc.transport {
        GenericTransport::Tcp(_) if sc.fec.is_none() => run_tcp(sc, lab_name),
        g => run_generic(sc, g, lab_name),
    }
}

/// Run `sc` over `g` in a fresh lab named `lab_name`: QUIC and UDP on
/// UDP sockets; with FEC ([`MessagesScenario::fec`]) also the TCP
/// Hollywood senders with the message queue, whose sans-IO transport (the
/// simulator's: our engine and message layer) then runs on a TUN device
/// at each end ([`Lab::engine_tun`]), as `lab dash` runs it, under the
/// FEC layer ([`hollywood_media::scenario::with_fec`]).
pub fn run_generic(
    sc: &MessagesScenario,
    g: &GenericTransport,
    lab_name: &str,
) -> Result<MessagesRun, Error> {
    if !hollywood_io::is_root() {
        return Err(Box::new(LabError::NotRoot));
    }
    if sc.middlebox != MiddleboxKind::None {
        return Err(format!("{} runs without a middlebox", g.name()).into());
    }
    let tcp = g.tcp().is_some();
    if tcp && sc.fec.is_none() {
        return Err(format!("{} runs on TUN devices: `run_tcp`", g.name()).into());
    }
    if sc.pcap.is_some() {
        return Err(
            "--pcap is the simulator's capture; on real packets use `hollywood lab` with tshark"
                .into(),
        );
    }
    crate::interop::remove_stale_labs();
    let (fwd, rev) = links(sc);
    let lab = Lab::up(LabSpec {
        name: lab_name.to_string(),
        three_hosts: false,
        a_to_b: fwd,
        b_to_a: rev,
        seed: sc.seed,
        hook: None,
    })?;
    let (tx_ip, rx_ip) = if tcp {
        (
            lab.engine_addr(Host::A, false),
            lab.engine_addr(Host::B, false),
        )
    } else {
        (lab.addr(Host::A, false), lab.addr(Host::B, false))
    };
    let tx_addr = SocketAddr::new(tx_ip, SENDER_PORT);
    let rx_addr = SocketAddr::new(rx_ip, RECEIVER_PORT);
    // Same seeds as the simulator's run of this scenario.
    let transport_seed = apps::transport_seed(sc.seed);
    let (ta, tb) = match g {
        // The UDP receiver answers the peer it hears from: FEC REPORTs
        // (as in the simulator).
        GenericTransport::Udp if sc.fec.is_some() => (
            Box::new(UdpTransport::new(tx_addr, Some(rx_addr))) as BoxedTransport,
            Box::new(UdpTransport::new(rx_addr, None).reply_to_peer()) as BoxedTransport,
        ),
        _ => g.endpoints(&sc.base, tx_addr, rx_addr, transport_seed)?,
    };
    let (ta, tb) = match &sc.fec {
        Some(cfg) => hollywood_media::scenario::with_fec(g, cfg, ta, tb)?,
        None => (ta, tb),
    };
    let (sender, receiver) = transport::apps(sc);
    let epoch = std::time::Instant::now();
    let sent: Arc<Mutex<Vec<SentPacket>>> = Arc::default();
    let hook = {
        let sent = sent.clone();
        let udp = matches!(g, GenericTransport::Udp);
        let fec = sc.fec.is_some();
        Box::new(move |now, packet: &[u8]| {
            let fp = segment_fingerprint(packet);
            let id = udp
                .then(|| oracle::udp_message_id(packet))
                .flatten()
                // With FEC the ids are the layer's: the application's
                // shifted, none for the layer's own messages.
                .and_then(|id| {
                    if fec {
                        hollywood_fec::app_id(id)
                    } else {
                        Some(id)
                    }
                });
            sent.lock()
                .expect("transmit log")
                .push((now, packet.len(), fp, id));
        })
    };
    if tcp {
        // The TUN devices register with a runtime's reactor when created;
        // the hosts read and write them from their own threads.
        let rt = crate::workload::runtime()?;
        let _enter = rt.enter();
        let rx = AppHost::with_port(lab.engine_tun(Host::B)?, tb, receiver, epoch);
        let mut tx = AppHost::with_port(lab.engine_tun(Host::A)?, ta, sender, epoch);
        tx.set_transmit_hook(hook);
        drive::<TunDevice>(sc, lab, tx, rx, &sent)
    } else {
        let tx_sock = apps::bind_udp(&lab, Host::A, tx_addr)?;
        let rx_sock = apps::bind_udp(&lab, Host::B, rx_addr)?;
        let rx = UdpHost::new(rx_sock, tb, receiver, epoch)?;
        let mut tx = UdpHost::new(tx_sock, ta, sender, epoch)?;
        tx.set_transmit_hook(hook);
        drive::<UdpPort>(sc, lab, tx, rx, &sent)
    }
}

/// Run the two hosts of [`run_generic`] until the sender finishes, then
/// read the emulator's drop log, delete the lab and assemble the run.
fn drive<P: Port + Send + 'static>(
    sc: &MessagesScenario,
    lab: Lab,
    mut tx: AppHost<P, MessageSender>,
    rx: AppHost<P, MessageReceiver>,
    sent: &Mutex<Vec<SentPacket>>,
) -> Result<MessagesRun, Error> {
    let traffic = match &sc.schedule {
        Some(s) => s.last().map_or(Duration::ZERO, |p| p.at) + sc.interval,
        None => sc.interval * sc.count,
    };
    let limit = Instant::ZERO + traffic + sc.rtt * 20 + Duration::from_secs(60);
    let (finished, rx) = apps::run_beside(
        &mut tx,
        rx,
        limit,
        |app: &MessageSender, _| app.finished(),
        |_: &MessageReceiver| false,
    )?;
    let duration = tx.now().since_epoch();
    let drops = lab
        .netem()
        .map(|m| m.drop_log(Direction::AtoB))
        .unwrap_or_default();
    drop(lab);

    let sent = sent.lock().expect("transmit log");
    let offered: Vec<Offered> = sent
        .iter()
        .map(|&(time, len, fp, id)| {
            let reason = fp.and_then(|fp| drops.reason_of(fp));
            Offered {
                time,
                len,
                dropped: reason.is_some(),
                network_dropped: matches!(reason, Some(DropReason::Loss | DropReason::Rule)),
                id,
            }
        })
        .collect();
    let stats = tx.stats();
    let error = (!finished).then(|| format!("the sender did not finish within {limit:?}"));
    let fec_of = |t: &dyn hollywood_transport::MessageTransport| {
        t.as_any()
            .downcast_ref::<FecTransport>()
            .map(FecTransport::fec_stats)
    };
    let fec = fec_of(tx.transport()).zip(fec_of(rx.transport()));
    let mut run = oracle::assemble(
        sc,
        Outcome {
            sender: tx.app(),
            sender_stats: tx.transport().stats(),
            receiver: rx.app(),
            receiver_stats: rx.transport().stats(),
            fates: Fates::Packets(&offered),
            wire_packets: stats.packets_out,
            wire_bytes: stats.ip_bytes_out,
            duration,
            error,
        },
    );
    run.fec = fec;
    Ok(run)
}

/// Run `sc` over its TCP deployment (`sc.transport`: tcp, hollywood-ir,
/// hollywood-ooo, hollywood) with our engine on TUN at both ends, in a
/// fresh lab named `lab_name`: the interop runner
/// ([`crate::interop::run_pair`]) with the deployment's engine
/// configurations, its wire audit from a capture at the sender's side of
/// the emulator and its oracle from the emulator's drop log.
pub fn run_tcp(sc: &MessagesScenario, lab_name: &str) -> Result<MessagesRun, Error> {
    use crate::interop::{run_pair, End, PairSpec};
    if sc.middlebox != MiddleboxKind::None {
        return Err("middleboxes on real packets: `hollywood middlebox`".into());
    }
    if sc.pcap.is_some() {
        return Err("--pcap is the simulator's capture; real-packet captures: `hollywood interop --pcap-dir`".into());
    }
    let Some(t) = sc.transport.tcp() else {
        return Err(format!("{}: not a TCP deployment", sc.transport.name()).into());
    };
    crate::interop::remove_stale_labs();
    let (a_to_b, b_to_a) = links(sc);
    let spec = PairSpec {
        lab: lab_name.to_string(),
        sender: End::Engine,
        receiver: End::Engine,
        sender_config: t.sender_config(&sc.base),
        receiver_config: t.receiver_config(&sc.base),
        a_to_b,
        b_to_a,
        seed: sc.seed,
        messages: sc.count,
        size: sc.size.max(crate::workload::MIN_PAYLOAD),
        interval: sc.interval,
        lifetime: sc.lifetime,
        schedule: sc.schedule.clone(),
        port: 5400,
        pcap: None,
        drain: Duration::from_secs(10),
        kernel_cc: None,
        secure: false,
        identity: None,
    };
    if spec.size != sc.size {
        return Err(format!(
            "messages must be at least {} bytes on real packets (they carry their id)",
            crate::workload::MIN_PAYLOAD
        )
        .into());
    }
    let run = run_pair(&spec)?;
    let t = |d: Duration| Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let generated: Vec<Option<Instant>> = run.sent_at.iter().map(|s| s.map(t)).collect();
    let arrival: Vec<Option<Instant>> = run.arrival.iter().map(|a| a.map(t)).collect();
    let mut expired = vec![false; sc.count as usize];
    for &id in &run.sender.expired_ids {
        if let Some(e) = expired.get_mut(id as usize) {
            *e = true;
        }
    }
    let mut network_dropped = run.network_dropped.clone();
    network_dropped.resize(sc.count as usize, false);
    let hollywood = hollywood_tcp::HollywoodStats {
        ir_sent: run.sender.ir_sent.unwrap_or(0),
        replaced_at_first_tx: run.sender.replaced_at_first_tx.unwrap_or(0),
        not_sent: run.sender.expired_before_send,
        ..Default::default()
    };
    let ooo = hollywood_tcp::OooStats {
        out_of_order: run.receiver.ooo_segments.unwrap_or(0),
        ..Default::default()
    };
    let wire = hollywood_media::WireAuditReport {
        data_segments: run.wire.data_segments,
        seq_holes: run.wire.seq_holes,
        retransmissions: run.wire.retransmissions,
        length_mismatches: run.wire.length_mismatches,
        inconsistent: run.wire.inconsistent_retransmissions,
        not_tcp: 0,
    };
    Ok(MessagesRun {
        scenario: sc.clone(),
        on_time: run.on_time(),
        generated,
        arrival,
        // Not measured on real packets: the stacks are other processes.
        received: vec![None; sc.count as usize],
        first_sent: vec![None; sc.count as usize],
        expired,
        first_tx_dropped: network_dropped.clone(),
        network_dropped,
        corrupt_delivered: run.tally.corrupt + run.tally.unknown,
        duplicates_delivered: run.tally.duplicates,
        crc_rejected: run.receiver.messages.deframer.crc_rejected,
        deframer: run.receiver.messages.deframer,
        hollywood,
        sender_srtt: run
            .sender
            .srtt_ms
            .map(|ms| Duration::from_secs_f64(ms / 1e3)),
        ooo,
        wire,
        expired_events: run.sender.expired_ids.len() as u64,
        cache_replayed_bytes: 0,
        corrupted_segments: 0,
        forged: 0,
        secure: None,
        altered_by_box: Vec::new(),
        sim_time: run.duration,
        error: run.error.clone(),
        receiver_packets: Vec::new(),
        transport: Default::default(),
        wire_packets: run.netem.a_to_b.packets_in,
        wire_bytes: run.netem.a_to_b.bytes_in,
        cross_delivered_bytes: Vec::new(),
        fec: None,
    })
}
