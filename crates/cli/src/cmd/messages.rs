//! `hollywood sim messages`: a timed message stream over one of the four
//! TCP Hollywood deployments (thesis §4.4), optionally through a middlebox,
//! with the wire audited from the sender's side.

use crate::units::{parse_duration, parse_loss_model, parse_rate, parse_size};
use clap::Args;
use hollywood_media::{
    GenericTransport, MessagesRun, MessagesScenario, Timeliness, Transport, TransportKind,
};
use hollywood_sim::{LossModel, MiddleboxKind};
use hollywood_tcp::{CcAlgorithm, Config};
use serde::Serialize;
use std::time::Duration;

/// Arguments of `hollywood sim messages`.
#[derive(Args, Debug)]
pub struct MessagesArgs {
    /// Rate sender → receiver.
    #[arg(long, default_value = "8mbit", value_parser = parse_rate)]
    rate: u64,
    /// Rate receiver → sender (the ACK path); default: same as --rate.
    #[arg(long, value_parser = parse_rate)]
    uplink: Option<u64>,
    /// Round-trip propagation delay.
    #[arg(long, default_value = "70ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Loss on the data path: a probability (1%, 0.01) or a model
    /// (gilbert:P,R[,BAD[,GOOD]]).
    #[arg(long, default_value = "0.1%", value_parser = parse_loss_model)]
    loss: LossModel,
    /// Messages to send.
    #[arg(long, default_value_t = 3000)]
    messages: u32,
    /// Payload bytes per message.
    #[arg(long, default_value = "160", value_parser = parse_size)]
    size: u64,
    /// Time between messages.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    interval: Duration,
    /// Message lifetime from generation ("none" = reliable).
    #[arg(long, default_value = "50ms", value_parser = parse_lifetime)]
    lifetime: Lifetime,
    /// tcp | hollywood | hollywood-ir | hollywood-ooo | quic-ss | quic-gop |
    /// quic-fps | quic-pps | quic-dgram | quicsilver | udp; several,
    /// comma-separated, or `all`: run on the same link and seed, one table
    #[arg(long, default_value = "hollywood", value_parser = parse_choices)]
    transport: Choices,
    /// Messages per group (GOP) for quic-gop and for dependencies: the
    /// first message of each group is depended on by the others. 0 = none.
    #[arg(long, default_value_t = 0)]
    group: u32,
    /// Priority classes, comma-separated, given to the messages in turn
    /// (message i gets class i mod n): 0 is the most urgent, as in the
    /// relay's media header (0 keyframes, 3 the least). Where the
    /// transport schedules (the TCP Hollywood message queue, QUIC
    /// streams) the most urgent waiting message goes first. Empty: one
    /// class, sent in order.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8))]
    classes: Vec<u8>,
    /// none | resegment | cache | resegment-cache
    #[arg(long, default_value = "none", value_parser = parse_middlebox)]
    middlebox: MiddleboxKind,
    /// Drop-tail queue per link.
    #[arg(long, default_value = "96000", value_parser = parse_size)]
    queue: u64,
    /// Congestion control of both engines: newreno, cubic or bbr.
    #[arg(long, default_value = "cubic", value_parser = CcAlgorithm::parse)]
    cc: CcAlgorithm,
    /// Pace every congestion controller (BBR always paces).
    #[arg(long)]
    pacing: bool,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the sender's packets (at link ingress) to this pcap file.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
    /// QUIC: write the TLS secrets to this SSLKEYLOGFILE, so Wireshark or
    /// `tshark -o tls.keylog_file:FILE` decrypts the --pcap capture.
    #[arg(long, requires = "pcap")]
    keylog: Option<std::path::PathBuf>,
    /// Message protection for the TCP deployments: a TLS 1.3 handshake,
    /// then every message sealed (AES-256-GCM, keys from the TLS exporter;
    /// docs/SECURITY.md). `on` (`--secure` alone), `off`, or `both`: each
    /// transport plain and secure, side by side.
    #[arg(long, default_value = "off", num_args = 0..=1, default_missing_value = "on", value_parser = parse_secure)]
    secure: Secure,
    /// An on-path attacker forges this fraction of the data segments that
    /// hold a whole message: a payload byte changed, the message CRC32C
    /// and the TCP checksum recomputed (e.g. 2%).
    #[arg(long, default_value = "0", value_parser = hollywood_experiments::units::parse_fraction)]
    forge: f64,
    /// FEC on the message layer (docs/FEC.md): repair messages over blocks
    /// of messages whose retransmission could not make their deadline,
    /// redundancy from the loss the receiver reports. `on` (`--fec`
    /// alone), `off`, or `both`: each transport without and with, side by
    /// side. Over UDP, QUIC and the TCP Hollywood senders with the message
    /// queue (hollywood, hollywood-ir).
    #[arg(long, default_value = "off", num_args = 0..=1, default_missing_value = "on", value_parser = parse_fec)]
    fec: Fec,
    /// With --fec: repair bytes at most this share of the protected
    /// messages' bytes.
    #[arg(long, default_value = "25%", value_parser = hollywood_experiments::units::parse_fraction)]
    fec_overhead: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write one CSV row per message (and transport) here: transport, id,
    /// generated_ms, arrival_ms, delay_ms, outcome (on_time, late,
    /// never_arrived), expired_reported, first_tx_dropped, network_dropped.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

/// `--secure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secure {
    Off,
    On,
    Both,
}

/// `--fec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fec {
    Off,
    On,
    Both,
}

fn parse_fec(s: &str) -> Result<Fec, String> {
    match s {
        "off" => Ok(Fec::Off),
        "on" => Ok(Fec::On),
        "both" => Ok(Fec::Both),
        _ => Err(format!("--fec {s}: use on, off or both")),
    }
}

fn parse_secure(s: &str) -> Result<Secure, String> {
    match s {
        "off" => Ok(Secure::Off),
        "on" => Ok(Secure::On),
        "both" => Ok(Secure::Both),
        _ => Err(format!("--secure {s}: use on, off or both")),
    }
}

/// The scenario's transport for `kind`, with `cc` as a QUIC transport's
/// controller (quinn's: BBR is its BBRv1).
pub fn scenario_transport(kind: TransportKind, cc: CcAlgorithm) -> GenericTransport {
    GenericTransport::from(kind).with_cc(cc)
}

/// The transports to run.
#[derive(Debug, Clone)]
pub struct Choices(pub Vec<TransportKind>);

/// A transport name, a comma-separated list, or `all` (every transport but
/// the deadline TCP, a comparison mode).
pub fn parse_choices(s: &str) -> Result<Choices, String> {
    let all: Vec<TransportKind> = TransportKind::ALL
        .into_iter()
        .filter(|k| *k != TransportKind::Tcp(Transport::Deadline))
        .collect();
    if s == "all" {
        return Ok(Choices(all));
    }
    let mut out = Vec::new();
    for name in s.split(',') {
        let c = TransportKind::parse(name).map_err(|_| {
            format!(
                "unknown transport '{name}': use {}, {} or all",
                all.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                "a comma-separated list"
            )
        })?;
        out.push(c);
    }
    Ok(Choices(out))
}

/// A message lifetime; `None` = reliable (never expires).
#[derive(Debug, Clone, Copy)]
pub struct Lifetime(pub Option<Duration>);

/// A lifetime, or `none` (reliable).
pub fn parse_lifetime(s: &str) -> Result<Lifetime, String> {
    if s == "none" {
        Ok(Lifetime(None))
    } else {
        parse_duration(s).map(|d| Lifetime(Some(d)))
    }
}

fn parse_middlebox(s: &str) -> Result<MiddleboxKind, String> {
    match s {
        "none" => Ok(MiddleboxKind::None),
        "resegment" => Ok(MiddleboxKind::Resegment),
        "cache" => Ok(MiddleboxKind::Cache),
        "resegment-cache" => Ok(MiddleboxKind::ResegmentCache),
        _ => Err(format!(
            "unknown middlebox '{s}': use none, resegment, cache or resegment-cache"
        )),
    }
}

pub use hollywood_experiments::stats::Percentiles;

/// The JSON summary.
#[derive(Serialize, Debug)]
pub struct MessagesReport {
    /// Transport name.
    pub transport: &'static str,
    /// Message protection on (`--secure`).
    pub secure: bool,
    /// Messages the on-path attacker forged (`--forge`).
    pub forged: u64,
    /// Forged messages the receiving application accepted (delivered with
    /// content that was not sent).
    pub forgeries_accepted: u64,
    /// Secure mode: messages whose tag did not verify (dropped).
    pub auth_failed: u64,
    /// Middlebox name.
    pub middlebox: &'static str,
    /// Congestion control.
    pub cc: &'static str,
    /// Messages generated and handed to the transport.
    pub sent: u64,
    /// Delivered no later than generation + lifetime (the headline figure).
    pub on_time: u64,
    /// Delivered after generation + lifetime.
    pub late: u64,
    /// What a transport that loses only the packets the network dropped
    /// and adds no delay beyond the path's would deliver on time.
    pub oracle_on_time: u64,
    /// `on_time / oracle_on_time`.
    pub on_time_of_oracle: f64,
    /// Messages delivered to the receiving application (once each).
    pub delivered: u64,
    /// Messages never delivered.
    pub never_arrived: u64,
    /// Messages delivered with wrong content (must be 0).
    pub corrupt_delivered: u64,
    /// Messages delivered twice (must be 0).
    pub duplicates_delivered: u64,
    /// Frames the receiver's CRC32C rejected (spliced or corrupted).
    pub crc_rejected: u64,
    /// Inconsistent retransmissions the sender made.
    pub ir_sent: u64,
    /// Retransmissions on the wire whose payload differed from the original.
    pub ir_seen_on_wire: u64,
    /// Data segments that started beyond the highest byte sent (must be 0).
    pub seq_holes_on_wire: u64,
    /// Retransmissions whose start/length did not repeat an original segment (must be 0).
    pub retransmit_length_mismatches: u64,
    /// Expired events reported to the sending application.
    pub expired_events: u64,
    /// Messages the sender dropped before they got sequence numbers
    /// (expired in its message queue; never on the wire).
    pub not_sent: u64,
    /// Slots rewritten at their first transmission.
    pub replaced_at_first_tx: u64,
    /// Messages reported expired that reached the receiver anyway.
    pub expired_but_delivered: u64,
    /// Messages whose first transmission the link dropped.
    pub first_tx_dropped: u64,
    /// Segments the receiver got ahead of a hole and delivered at once.
    pub ooo_segments: u64,
    /// Retransmitted bytes a caching middlebox replaced with the original.
    pub cache_replayed_bytes: u64,
    /// Generation → delivery to the application, delivered messages only.
    pub transport_delay_ms: Percentiles,
    /// Packets the sender offered to the data link (all of them: data,
    /// retransmissions, acknowledgements, handshake).
    pub packets_on_wire: u64,
    /// Bytes (whole IP packets) the sender offered to the data link.
    pub bytes_on_wire: u64,
    /// Retransmissions: TCP segments repeating sequence space (from the
    /// wire); QUIC packets the sender declared lost (repaired unless
    /// abandoned); 0 for UDP.
    pub retransmissions: u64,
    /// QUIC streams the sender reset (QUICsilver giving up).
    pub streams_reset: u64,
    /// Virtual seconds simulated.
    pub sim_seconds: f64,
    /// Wall-clock milliseconds.
    pub wall_ms: f64,
    /// Seed.
    pub seed: u64,
    /// A connection failure, if any.
    pub error: Option<String>,
    /// With --fec: what the FEC layer did (absent without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<FecReport>,
}

/// What the FEC layer did in a run.
#[derive(Serialize, Debug, Clone)]
pub struct FecReport {
    /// The bound: repair bytes at most this share of protected bytes.
    pub max_overhead: f64,
    /// Messages the sender protected (their retransmission could not
    /// make the deadline).
    pub protected: u64,
    /// Blocks closed, and of them without repair.
    pub blocks: u64,
    /// Blocks closed without a repair message.
    pub blocks_unprotected: u64,
    /// REPAIR messages sent.
    pub repairs_sent: u64,
    /// REPAIR messages the transport refused or that had no id left.
    pub repairs_dropped: u64,
    /// Repair payload bytes / protected payload bytes.
    pub overhead: f64,
    /// Messages the receiver rebuilt.
    pub rebuilt: u64,
    /// Originals that arrived after their message was rebuilt (dropped).
    pub late_originals: u64,
    /// REPORTs the sender received.
    pub reports: u64,
    /// The loss rate the sender last worked with (from REPORTs).
    pub loss_rate: Option<f64>,
    /// The mean burst length it last worked with.
    pub burst: Option<f64>,
}

fn middlebox_name(m: MiddleboxKind) -> &'static str {
    match m {
        MiddleboxKind::None => "none",
        MiddleboxKind::Resegment => "resegment",
        MiddleboxKind::Cache => "cache",
        MiddleboxKind::ResegmentCache => "resegment-cache",
    }
}

/// Summarise a run.
pub fn summarise(run: &MessagesRun, wall_ms: f64) -> MessagesReport {
    // QUIC or UDP: no TCP sequence numbers to read the wire by.
    let generic = run.scenario.transport.tcp().is_none();
    let sent = run.generated.iter().filter(|g| g.is_some()).count() as u64;
    let delivered = run.arrival.iter().filter(|a| a.is_some()).count() as u64;
    let delays = run.delays_ms();
    let expired_but_delivered = run
        .expired
        .iter()
        .zip(&run.arrival)
        .filter(|(e, a)| **e && a.is_some())
        .count() as u64;
    let sec = run.secure.unwrap_or_default();
    MessagesReport {
        transport: run.scenario.transport.name(),
        secure: run.scenario.secure,
        forged: run.forged,
        forgeries_accepted: if run.scenario.impair.forge > 0.0 {
            run.corrupt_delivered
        } else {
            0
        },
        auth_failed: sec.auth_failed,
        middlebox: middlebox_name(run.scenario.middlebox),
        cc: run.scenario.base.cc.name(),
        sent,
        on_time: run.on_time.on_time,
        late: run.on_time.late,
        oracle_on_time: run.on_time.oracle_on_time,
        on_time_of_oracle: run.on_time.of_oracle(),
        delivered,
        never_arrived: sent - delivered,
        corrupt_delivered: run.corrupt_delivered,
        duplicates_delivered: run.duplicates_delivered,
        crc_rejected: run.crc_rejected,
        ir_sent: run.hollywood.ir_sent,
        ir_seen_on_wire: run.wire.inconsistent,
        seq_holes_on_wire: run.wire.seq_holes,
        retransmit_length_mismatches: run.wire.length_mismatches,
        expired_events: run.expired_events,
        not_sent: run.hollywood.not_sent,
        replaced_at_first_tx: run.hollywood.replaced_at_first_tx,
        expired_but_delivered,
        first_tx_dropped: run.first_tx_dropped.iter().filter(|d| **d).count() as u64,
        ooo_segments: run.ooo.out_of_order,
        cache_replayed_bytes: run.cache_replayed_bytes,
        transport_delay_ms: Percentiles::of(delays),
        packets_on_wire: run.wire_packets,
        bytes_on_wire: run.wire_bytes,
        retransmissions: if generic {
            run.transport.sender.packets_lost
        } else {
            run.wire.retransmissions
        },
        streams_reset: run.transport.sender.streams_reset,
        sim_seconds: run.sim_time.as_secs_f64(),
        wall_ms,
        seed: run.scenario.seed,
        error: run.error.clone(),
        fec: run.fec.map(|(tx, rx)| FecReport {
            max_overhead: run.scenario.fec.as_ref().map_or(0.0, |c| c.max_overhead),
            protected: tx.encoder.protected,
            blocks: tx.encoder.blocks,
            blocks_unprotected: tx.encoder.blocks_unprotected,
            repairs_sent: tx.repairs_sent,
            repairs_dropped: tx.repairs_dropped,
            overhead: tx.encoder.repair_bytes as f64 / tx.encoder.protected_bytes.max(1) as f64,
            rebuilt: rx.decoder.rebuilt,
            late_originals: rx.decoder.late_originals,
            reports: tx.reports_received,
            loss_rate: tx.loss.map(|l| l.p),
            burst: tx.loss.map(|l| l.burst),
        }),
    }
}

/// The columns of `--csv`.
pub const CSV_HEADER: [&str; 9] = [
    "transport",
    "id",
    "generated_ms",
    "arrival_ms",
    "delay_ms",
    "outcome",
    "expired_reported",
    "first_tx_dropped",
    "network_dropped",
];

/// Open `path` for `--csv` and write the header.
pub fn open_csv(
    path: Option<&std::path::Path>,
) -> Result<Option<csv::Writer<std::fs::File>>, String> {
    let Some(p) = path else { return Ok(None) };
    let mut w =
        csv::Writer::from_path(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    w.write_record(CSV_HEADER).map_err(|e| e.to_string())?;
    Ok(Some(w))
}

/// One row per generated message of `run` (times in ms of the run's clock;
/// empty where not applicable).
pub fn write_csv_rows<W: std::io::Write>(
    w: &mut csv::Writer<W>,
    transport: &str,
    run: &MessagesRun,
) -> Result<(), csv::Error> {
    let ms = |i: hollywood_tcp::Instant| format!("{:.3}", i.as_nanos() as f64 / 1e6);
    for (id, g) in run.generated.iter().enumerate() {
        let Some(g) = *g else { continue };
        let a = run.arrival.get(id).copied().flatten();
        let flag = |v: Option<&bool>| u8::from(v.copied().unwrap_or(false)).to_string();
        w.write_record([
            transport.to_string(),
            id.to_string(),
            ms(g),
            a.map(ms).unwrap_or_default(),
            a.map(|a| format!("{:.3}", (a.as_nanos() as f64 - g.as_nanos() as f64) / 1e6))
                .unwrap_or_default(),
            Timeliness::of(g, a, run.scenario.lifetime)
                .name()
                .to_string(),
            flag(run.expired.get(id)),
            flag(run.first_tx_dropped.get(id)),
            flag(run.network_dropped.get(id)),
        ])?;
    }
    w.flush()?;
    Ok(())
}

use crate::cmd::lab_srt::{self, SrtArgs};
use crate::cmd::Place;

pub fn run(a: MessagesArgs) -> Result<(), String> {
    run_in(a, Place::Sim, None)
}

/// `hollywood lab messages`: the same scenario on real packets, with SRT
/// beside it when `srt` names filters.
pub fn run_lab(a: MessagesArgs, lab: &str, srt: &SrtArgs) -> Result<(), String> {
    hollywood_lab::topology::check_name(lab).map_err(|e| e.to_string())?;
    run_in(a, Place::Lab(lab), Some(srt))
}

fn run_in(a: MessagesArgs, place: Place<'_>, srt: Option<&SrtArgs>) -> Result<(), String> {
    if a.size == 0 || a.size > 1 << 20 {
        return Err("--size must be between 1 byte and 1 MiB".into());
    }
    if a.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    let modes: &[bool] = match a.secure {
        Secure::Off => &[false],
        Secure::On => &[true],
        Secure::Both => &[false, true],
    };
    let fecs: &[bool] = match a.fec {
        Fec::Off => &[false],
        Fec::On => &[true],
        Fec::Both => &[false, true],
    };
    let several = a.transport.0.len() * modes.len() * fecs.len() > 1;
    if several && a.pcap.is_some() {
        return Err("--pcap needs a single transport".into());
    }
    if !(0.0..=1.0).contains(&a.forge) {
        return Err("--forge: use a fraction from 0 to 100%".into());
    }
    let mut csv = open_csv(a.csv.as_deref())?;
    let mut reports = Vec::new();
    let runs = a
        .transport
        .0
        .iter()
        .flat_map(|c| modes.iter().map(move |&s| (c, s)))
        .flat_map(|(c, s)| fecs.iter().map(move |&f| (c, s, f)));
    for (index, (choice, secure, fec)) in runs.enumerate() {
        let transport = scenario_transport(*choice, a.cc);
        let generic = transport.tcp().is_none();
        if generic && (secure || a.forge > 0.0) {
            if several {
                continue; // QUIC has TLS; the forging box models TCP framing
            }
            return Err(format!(
                "--secure and --forge apply to the TCP transports, not {}",
                choice.name()
            ));
        }
        if fec
            && (secure
                || a.middlebox != MiddleboxKind::None
                || transport.tcp().is_some_and(|t| !t.uses_message_queue()))
        {
            if several {
                continue; // FEC: UDP, QUIC, TCP Hollywood senders; plain, no middlebox
            }
            return Err(format!(
                "--fec runs over UDP, QUIC and hollywood/hollywood-ir, without --secure or --middlebox, not {}",
                choice.name()
            ));
        }
        if generic && a.middlebox != MiddleboxKind::None {
            if several {
                continue; // the middleboxes model TCP boxes
            }
            return Err(format!(
                "--middlebox applies to the TCP transports, not {}",
                choice.name()
            ));
        }
        let sc = MessagesScenario {
            rate_bps: a.rate,
            uplink_bps: a.uplink.unwrap_or(a.rate),
            rtt: a.rtt,
            loss: a.loss,
            queue_bytes: a.queue as usize,
            count: a.messages,
            size: a.size as usize,
            interval: a.interval,
            lifetime: a.lifetime.0,
            transport,
            middlebox: a.middlebox,
            seed: a.seed,
            pcap: a.pcap.clone(),
            keylog: a.keylog.clone(),
            base: Config {
                cc: a.cc,
                pacing: a.pacing,
                ..Config::default()
            },
            group: a.group,
            priorities: a.classes.iter().map(|&c| -(c.min(127) as i8)).collect(),
            secure,
            impair: hollywood_media::scenario::Impairments {
                forge: a.forge,
                ..hollywood_media::scenario::Impairments::default()
            },
            fec: fec.then(|| hollywood_fec::FecConfig {
                max_overhead: a.fec_overhead,
                ..hollywood_fec::FecConfig::default()
            }),
            ..MessagesScenario::default()
        };
        #[allow(clippy::disallowed_methods)] // wall time of the run, reported as such
        let wall = std::time::Instant::now();
        let run = match place {
            Place::Sim => sc.run()?,
            Place::Lab(lab) => {
                let lab = format!("{lab}-{index}");
                hollywood_lab::messages::run(&sc, &lab)
                    .map_err(|e| format!("{}: {e}", choice.name()))?
            }
        };
        let r = summarise(&run, wall.elapsed().as_secs_f64() * 1000.0);
        if let Some(w) = &mut csv {
            write_csv_rows(w, r.transport, &run).map_err(|e| e.to_string())?;
        }
        if !several && !a.json {
            print_human(&a, &run, &r);
        }
        reports.push(r);
    }
    let srt_rows = match (place, srt) {
        (Place::Lab(lab), Some(s)) if !s.filters.is_empty() => {
            let Some(deadline) = a.lifetime.0 else {
                return Err("--srt needs a --lifetime (the deadline)".into());
            };
            let stream = lab_srt::Stream {
                rate_bps: a.rate,
                rtt: a.rtt,
                loss: a.loss,
                messages: a.messages,
                size: a.size as usize,
                interval: a.interval,
                deadline,
                seed: a.seed,
            };
            lab_srt::run(s, &stream, lab)?
        }
        _ => Vec::new(),
    };
    if a.json {
        let v = if !srt_rows.is_empty() {
            crate::output::json(&serde_json::json!({ "runs": reports, "srt": srt_rows }))
        } else if several {
            crate::output::json(&reports)
        } else {
            crate::output::json(&reports[0])
        };
        println!("{}", v.map_err(|e| e.to_string())?);
    } else {
        if several {
            print_table(&a, &reports);
        }
        if !srt_rows.is_empty() {
            println!("SRT on the same path (on time: handed to the receiving socket within the deadline):");
            print!("{}", hollywood_lab::compare::table(&srt_rows));
        }
    }
    for r in &reports {
        if let Some(e) = &r.error {
            return Err(format!("{}: the connection failed: {e}", r.transport));
        }
        // Forgeries accepted without protection are the attack's result,
        // shown, not a transport fault; with protection there must be none.
        let corrupt = r.corrupt_delivered - r.forgeries_accepted * u64::from(!r.secure);
        if corrupt > 0 || r.duplicates_delivered > 0 || r.seq_holes_on_wire > 0 {
            return Err(format!(
                "{}: an invariant was violated (corrupt/duplicate delivery or a sequence hole)",
                r.transport
            ));
        }
    }
    Ok(())
}

fn print_table(a: &MessagesArgs, reports: &[MessagesReport]) {
    println!(
        "{} messages of {} B every {:?}, lifetime {}, {} Mb/s, RTT {:?}, loss {}, seed {} (TCP congestion control {})",
        a.messages,
        a.size,
        a.interval,
        a.lifetime.0.map_or("none".to_string(), |l| format!("{l:?}")),
        a.rate as f64 / 1e6,
        a.rtt,
        a.loss,
        a.seed,
        a.cc.name()
    );
    println!(
        "{:<21} {:>16} {:>6} {:>6} {:>9} {:>9} {:>8} {:>10} {:>6} {:>6}",
        "transport",
        "on time (oracle)",
        "late",
        "never",
        "p50 ms",
        "p99 ms",
        "packets",
        "bytes",
        "rtx",
        "resets"
    );
    for r in reports {
        let mut name = if r.secure {
            format!("{}+secure", r.transport)
        } else {
            r.transport.to_string()
        };
        if r.fec.is_some() {
            name.push_str("+fec");
        }
        println!(
            "{:<21} {:>16} {:>6} {:>6} {:>9.1} {:>9.1} {:>8} {:>10} {:>6} {:>6}",
            name,
            format!("{} ({})", r.on_time, r.oracle_on_time),
            r.late,
            r.never_arrived,
            r.transport_delay_ms.p50,
            r.transport_delay_ms.p99,
            r.packets_on_wire,
            r.bytes_on_wire,
            r.retransmissions,
            r.streams_reset
        );
    }
    if a.forge > 0.0 {
        println!("forgeries (a payload byte changed, CRC32C and TCP checksum recomputed):");
        for r in reports {
            println!(
                "  {:<21} forged {:>6}  accepted by the application {:>6}  rejected (tag) {:>6}",
                if r.secure {
                    format!("{}+secure", r.transport)
                } else {
                    r.transport.to_string()
                },
                r.forged,
                r.forgeries_accepted,
                r.auth_failed
            );
        }
    }
}

fn print_human(a: &MessagesArgs, run: &MessagesRun, r: &MessagesReport) {
    println!(
        "{} messages of {} B every {:?} over {} with {} ({} Mb/s, RTT {:?}, middlebox {}), seed {}",
        r.sent,
        a.size,
        a.interval,
        r.transport,
        r.cc,
        a.rate as f64 / 1e6,
        a.rtt,
        r.middlebox,
        a.seed
    );
    println!(
        "  {} ({:.1} % of the oracle)",
        run.on_time,
        100.0 * r.on_time_of_oracle
    );
    println!(
        "  delivered {} ({} never arrived; {} first transmissions dropped), corrupt {}, duplicates {}",
        r.delivered, r.never_arrived, r.first_tx_dropped, r.corrupt_delivered, r.duplicates_delivered
    );
    println!(
        "  inconsistent retransmissions: {} sent, {} seen on the wire; {} expired events ({} never sent, {} expired but delivered)",
        r.ir_sent, r.ir_seen_on_wire, r.expired_events, r.not_sent, r.expired_but_delivered
    );
    println!(
        "  wire: {} sequence holes, {} retransmission length mismatches; CRC rejected {}",
        r.seq_holes_on_wire, r.retransmit_length_mismatches, r.crc_rejected
    );
    println!(
        "  transport delay ms: p50 {:.1}, p99 {:.1}, max {:.1}",
        r.transport_delay_ms.p50, r.transport_delay_ms.p99, r.transport_delay_ms.max
    );
    if let Some(f) = &r.fec {
        println!(
            "  FEC: {} protected in {} blocks ({} without repair), {} repairs sent ({:.1} % of the protected bytes, bound {:.0} %), {} rebuilt, loss seen {}",
            f.protected,
            f.blocks,
            f.blocks_unprotected,
            f.repairs_sent,
            100.0 * f.overhead,
            100.0 * f.max_overhead,
            f.rebuilt,
            f.loss_rate.map_or("-".into(), |p| format!("{:.2} % in bursts of {:.2}", 100.0 * p, f.burst.unwrap_or(1.0)))
        );
    }
    if r.secure || r.forged > 0 {
        println!(
            "  security: {}; forged {}, forgeries accepted {}, tags rejected {}",
            if r.secure { "messages sealed" } else { "plain" },
            r.forged,
            r.forgeries_accepted,
            r.auth_failed
        );
    }
}
