//! `hollywood sim bulk`: one bulk TCP transfer over a simulated path.
//!
//! Topology: sender —[data link]→ receiver and the reverse link for ACKs.
//! Each link has the given rate and half the RTT of propagation delay; the
//! data direction has the given loss; queues are drop-tail.

use crate::units::{parse_duration, parse_fraction, parse_rate, parse_size};
use clap::Args;
use hollywood_sim::{
    BulkReceiver, BulkSender, CaptureFilter, LinkConfig, LossModel, Pattern, SimBuilder, TcpHost,
};
use hollywood_tcp::{CcAlgorithm, Config, ConnectionStats, Instant, State};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Arguments of `hollywood sim bulk`.
#[derive(Args, Debug)]
pub struct BulkArgs {
    /// Bottleneck rate in each direction (e.g. 10mbit, 1gbit).
    #[arg(long, default_value = "10mbit", value_parser = parse_rate)]
    rate: u64,
    /// Round-trip propagation delay (half each way), e.g. 50ms.
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Random (Bernoulli) loss on the data direction, e.g. 1% or 0.01.
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    loss: f64,
    /// Random loss on the ACK direction.
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    ack_loss: f64,
    /// Bytes to transfer (e.g. 20MB, 1GiB).
    #[arg(long, default_value = "20MB", value_parser = parse_size)]
    bytes: u64,
    /// Drop-tail queue per link in bytes; default one bandwidth-delay
    /// product, at least 64 full-size packets.
    #[arg(long, value_parser = parse_size)]
    queue: Option<u64>,
    /// Congestion control: newreno, cubic or bbr; several, comma-separated
    /// (`bbr,cubic`), run one after the other on the same path and seed and
    /// are reported side by side (a JSON list).
    #[arg(long, default_value = "cubic", value_parser = parse_cc, value_delimiter = ',')]
    cc: Vec<CcAlgorithm>,
    /// Turn SACK off (NewReno-style loss recovery).
    #[arg(long)]
    no_sack: bool,
    /// Seed for everything random (loss, ISNs, ports).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up after this much virtual time.
    #[arg(long, default_value = "1h", value_parser = parse_duration_or_h)]
    max_time: Duration,
    /// Write every packet (at link ingress) to this pcap file.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    json: bool,
}

fn parse_cc(s: &str) -> Result<CcAlgorithm, String> {
    CcAlgorithm::parse(s)
}

fn parse_duration_or_h(s: &str) -> Result<Duration, String> {
    match s.strip_suffix('h') {
        Some(h) => parse_duration(&format!("{h}min")).map(|d| d * 60),
        None => parse_duration(s),
    }
}

/// The JSON summary.
#[derive(Serialize, Debug)]
pub struct BulkReport {
    /// Bytes the application asked to send.
    pub bytes_sent: u64,
    /// Bytes the receiving application read.
    pub bytes_delivered: u64,
    /// Every byte arrived, in order, with the right content.
    pub delivered_intact: bool,
    /// Delivered bits per second from the first SYN to the last byte read, in Mb/s.
    pub goodput_mbps: f64,
    /// Goodput as a fraction of the link rate.
    pub link_utilisation: f64,
    /// Retransmitted data segments.
    pub retransmissions: u64,
    /// Retransmitted data bytes.
    pub retransmitted_bytes: u64,
    /// Fast retransmits (entries into loss recovery).
    pub fast_retransmits: u64,
    /// Retransmission timeouts.
    pub rto_events: u64,
    /// Retransmissions found spurious (D-SACK).
    pub spurious_retransmissions: u64,
    /// Packets the data link dropped by random loss.
    pub link_loss_drops: u64,
    /// Packets the data link dropped because its queue was full.
    pub link_queue_drops: u64,
    /// Virtual seconds until the last byte was read.
    pub sim_seconds: f64,
    /// Wall-clock milliseconds for the whole run.
    pub wall_ms: f64,
    /// Payload bytes delivered per wall-clock second (simulator speed).
    pub payload_bytes_per_wall_second: f64,
    /// Congestion control used.
    pub cc: &'static str,
    /// SACK negotiated.
    pub sack: bool,
    /// Seed.
    pub seed: u64,
}

pub fn run(a: BulkArgs) -> Result<(), String> {
    if a.cc.is_empty() {
        return Err("--cc needs at least one congestion control".into());
    }
    if a.cc.len() > 1 && a.pcap.is_some() {
        return Err("--pcap takes a single --cc".into());
    }
    let mut reports = Vec::new();
    for &cc in &a.cc {
        reports.push(simulate(&a, cc)?);
    }
    if a.json {
        let text = if let [one] = reports.as_slice() {
            crate::output::json(one)
        } else {
            crate::output::json(&reports)
        };
        println!("{}", text.map_err(|e| e.to_string())?);
    } else {
        println!(
            "bulk transfer: {} over {} Mb/s, RTT {:?}, loss {}% (seed {})",
            human_bytes(a.bytes),
            a.rate as f64 / 1e6,
            a.rtt,
            a.loss * 100.0,
            a.seed
        );
        for report in &reports {
            print_report(report);
        }
        if let Some(p) = &a.pcap {
            println!("  packets written to {}", p.display());
        }
    }
    if let Some(r) = reports.iter().find(|r| !r.delivered_intact) {
        return Err(format!(
            "the {} transfer did not complete intact (see the summary)",
            r.cc
        ));
    }
    Ok(())
}

fn print_report(report: &BulkReport) {
    println!(
        "{:>7}: goodput {:.2} Mb/s ({:.1}% of the link), delivered {} ({})",
        report.cc,
        report.goodput_mbps,
        report.link_utilisation * 100.0,
        human_bytes(report.bytes_delivered),
        if report.delivered_intact {
            "intact"
        } else {
            "NOT INTACT"
        },
    );
    println!(
        "         {} retransmissions ({} fast retransmits, {} RTOs), {} random drops, {} queue drops",
        report.retransmissions,
        report.fast_retransmits,
        report.rto_events,
        report.link_loss_drops,
        report.link_queue_drops
    );
    println!(
        "         simulated {:.2} s in {:.0} ms of wall time ({:.0}x real time)",
        report.sim_seconds,
        report.wall_ms,
        report.sim_seconds * 1000.0 / report.wall_ms.max(1e-3)
    );
}

fn human_bytes(b: u64) -> String {
    if b >= 1_000_000_000 {
        format!("{:.2} GB", b as f64 / 1e9)
    } else if b >= 1_000_000 {
        format!("{:.2} MB", b as f64 / 1e6)
    } else {
        format!("{b} B")
    }
}

/// Run the scenario and summarise it.
pub fn simulate(a: &BulkArgs, cc: CcAlgorithm) -> Result<BulkReport, String> {
    if a.bytes == 0 {
        return Err("--bytes must be at least 1".into());
    }
    let wall = std::time::Instant::now();
    let mut sim = SimBuilder::new().seed(a.seed).build();
    let tx_ip: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
    let rx_ip: IpAddr = Ipv4Addr::new(10, 0, 0, 2).into();
    let bdp = (a.rate as f64 / 8.0 * a.rtt.as_secs_f64()) as u64;
    let queue = a.queue.unwrap_or(bdp.max(64 * 1500)) as usize;
    let one_way = a.rtt / 2;
    let mut cfg = Config {
        cc,
        sack: !a.no_sack,
        ..Config::default()
    };
    // Buffers large enough not to limit the window below the path's BDP + queue.
    let need = ((bdp as usize + queue) * 2).max(4 << 20);
    cfg.recv_buffer = need;
    cfg.send_buffer = need;
    let pattern = Pattern::new(a.seed ^ 0x5eed);
    let dst = SocketAddr::new(rx_ip, 5001);
    let tx_seed = sim.derive_seed(1);
    let rx_seed = sim.derive_seed(2);
    let tx = sim.add_node(TcpHost::new(
        tx_ip,
        cfg.clone(),
        tx_seed,
        BulkSender::new(SocketAddr::new(tx_ip, 0), dst, a.bytes, pattern),
    ));
    let rx = sim.add_node(TcpHost::new(
        rx_ip,
        cfg,
        rx_seed,
        BulkReceiver::new(dst, pattern, Some(a.bytes)),
    ));
    let link = |loss: f64| {
        let mut l = LinkConfig::new(a.rate, one_way).with_queue_bytes(queue);
        if loss > 0.0 {
            l = l.with_loss(LossModel::Bernoulli(loss));
        }
        l
    };
    let (fwd, _rev) = sim
        .connect(tx, 0, rx, 0, link(a.loss), link(a.ack_loss))
        .map_err(|e| e.to_string())?;
    if let Some(p) = &a.pcap {
        sim.capture_pcap_file(p, CaptureFilter::default())
            .map_err(|e| format!("cannot write pcap {}: {e}", p.display()))?;
    }

    let limit = Instant::ZERO + a.max_time;
    // Slice the run so the sender's statistics can be read before its
    // connection is retired; slices are short relative to the transfer.
    let slice = (a.rtt * 4).max(Duration::from_millis(10));
    let mut stats = ConnectionStats::default();
    let mut sack = false;
    loop {
        sim.run_for(slice).map_err(|e| e.to_string())?;
        let host = sim
            .node_mut::<TcpHost<BulkSender>>(tx)
            .expect("sender node");
        if let Some(h) = host.app().handle() {
            if let Some(c) = host.endpoint().connection(h) {
                stats = c.stats().clone();
                sack = c.negotiated().sack;
                if matches!(c.state(), State::TimeWait | State::Closed) {
                    break;
                }
            }
        }
        let done = sim
            .node_mut::<TcpHost<BulkReceiver>>(rx)
            .expect("receiver node")
            .app()
            .report()
            .eof_at
            .is_some();
        let sender_err = sim
            .node_mut::<TcpHost<BulkSender>>(tx)
            .expect("sender node")
            .app()
            .report()
            .error;
        if sender_err.is_some() || (done && stats.bytes_acked >= a.bytes) || sim.now() >= limit {
            break;
        }
    }
    sim.finish_captures().map_err(|e| format!("pcap: {e}"))?;
    let rx_report = sim
        .node_mut::<TcpHost<BulkReceiver>>(rx)
        .expect("receiver node")
        .app()
        .report();
    let tx_report = sim
        .node_mut::<TcpHost<BulkSender>>(tx)
        .expect("sender node")
        .app()
        .report();
    let intact = sim
        .node_mut::<TcpHost<BulkReceiver>>(rx)
        .expect("receiver node")
        .app()
        .intact();
    let link_stats = sim.link_stats(fwd).map_err(|e| e.to_string())?;
    let start = tx_report.started_at.unwrap_or(Instant::ZERO);
    let end = rx_report.last_byte_at.unwrap_or(sim.now());
    let secs = (end - start).as_secs_f64();
    let goodput = if secs > 0.0 {
        rx_report.bytes_received as f64 * 8.0 / secs
    } else {
        0.0
    };
    let wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
    Ok(BulkReport {
        bytes_sent: a.bytes,
        bytes_delivered: rx_report.bytes_received,
        delivered_intact: intact && rx_report.bytes_received == a.bytes,
        goodput_mbps: goodput / 1e6,
        link_utilisation: goodput / a.rate as f64,
        retransmissions: stats.retransmitted_segments,
        retransmitted_bytes: stats.data_bytes_retransmitted,
        fast_retransmits: stats.fast_retransmits,
        rto_events: stats.rto_events,
        spurious_retransmissions: stats.spurious_retransmissions,
        link_loss_drops: link_stats.dropped.loss,
        link_queue_drops: link_stats.dropped.queue_full,
        sim_seconds: end.since_epoch().as_secs_f64(),
        wall_ms,
        payload_bytes_per_wall_second: rx_report.bytes_received as f64
            / (wall_ms / 1000.0).max(1e-9),
        cc: cc.name(),
        sack,
        seed: a.seed,
    })
}
