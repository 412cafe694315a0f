//! `hollywood voip`: one call of the thesis's simulated VoIP application
//! (§5.1.2) over standard TCP, a TCP Hollywood deployment or UDP, with the
//! per-message record of Figs. 5.4–5.16 (buffered time, transport delay,
//! outcome) as JSON totals, a CSV and a Fig. 5.4-style plot.
//!
//! The results ([`VoipReport`], [`write_csv`], [`plot_run`]) live in
//! `hollywood_experiments::voip`, shared with `repro ch5` and `demo`.

use crate::units::{parse_duration, parse_loss_model, parse_rate, parse_size};
use clap::Args;
pub use hollywood_experiments::voip::{describe, plot_run, write_csv, zoom_range, VoipReport};
use hollywood_media::{TransportKind, VoipScenario};
use hollywood_sim::LossModel;
use hollywood_tcp::{CcAlgorithm, Config};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hollywood voip`.
#[derive(Args, Debug)]
pub struct VoipArgs {
    /// Downlink rate, sender → receiver (ADSL: 8mbit).
    #[arg(long, default_value = "8mbit", value_parser = parse_rate)]
    rate: u64,
    /// Uplink rate, receiver → sender (ADSL: 1mbit; carries the ACKs).
    #[arg(long, default_value = "1mbit", value_parser = parse_rate)]
    uplink: u64,
    /// Round-trip propagation delay (intracontinental 15ms, intercontinental 70ms).
    #[arg(long, default_value = "70ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Playout delay: how long an on-time message is buffered before it is
    /// played (thesis: 110ms intracontinental, 30ms intercontinental).
    #[arg(long, default_value = "30ms", value_parser = parse_duration)]
    playout: Duration,
    /// Loss on the downlink: a probability (0.1%, 0.001) or a model
    /// (gilbert:P,R[,BAD[,GOOD]]), as for `sim messages`.
    #[arg(long, visible_alias = "loss-model", default_value = "0.1%", value_parser = parse_loss_model)]
    loss: LossModel,
    /// Messages (3000 = one minute of audio).
    #[arg(long, default_value_t = 3000)]
    messages: u32,
    /// Payload bytes per message (G.711, 20 ms: 160).
    #[arg(long, default_value = "160", value_parser = parse_size)]
    size: u64,
    /// Time between messages (the framing interval).
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    interval: Duration,
    /// Message lifetime for a TCP Hollywood sender; default RTT/2 + playout
    /// (the time from generation to playout).
    #[arg(long, value_parser = parse_duration)]
    lifetime: Option<Duration>,
    /// tcp | hollywood | hollywood-ir | hollywood-ooo | tcp-deadline | quic-ss | quic-gop | quic-fps | quic-pps | quic-dgram | quicsilver | udp
    #[arg(long, default_value = "hollywood", value_parser = TransportKind::parse)]
    transport: TransportKind,
    /// Drop-tail queue per link.
    #[arg(long, default_value = "96000", value_parser = parse_size)]
    queue: u64,
    /// Congestion control of both TCP engines: newreno, cubic or bbr.
    #[arg(long, default_value = "cubic", value_parser = CcAlgorithm::parse)]
    cc: CcAlgorithm,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write one CSV row per message here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write a Fig. 5.4-style plot here (.png or .svg).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Write the sender's packets (link ingress) to this pcap file.
    #[arg(long)]
    pcap: Option<PathBuf>,
}

pub fn run(a: VoipArgs) -> Result<(), String> {
    if a.size == 0 || a.size > 1400 {
        return Err("--size must be between 1 and 1400 bytes (one packet)".into());
    }
    if a.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    if a.interval.is_zero() {
        return Err("--interval must be positive".into());
    }
    let sc = VoipScenario {
        rate_bps: a.rate,
        uplink_bps: a.uplink,
        rtt: a.rtt,
        playout: a.playout,
        loss: a.loss,
        queue_bytes: a.queue as usize,
        count: a.messages,
        size: a.size as usize,
        interval: a.interval,
        lifetime: a.lifetime,
        transport: a.transport,
        seed: a.seed,
        pcap: a.pcap.clone(),
        base: Config {
            cc: a.cc,
            ..Config::default()
        },
    };
    let wall = std::time::Instant::now();
    let run = sc.run().map_err(|e| e.to_string())?;
    let r = VoipReport::of(&run, wall.elapsed().as_secs_f64() * 1000.0);
    if let Some(p) = &a.csv {
        write_csv(&run, p)?;
    }
    if let Some(p) = &a.plot {
        let title = format!("{} — {}", r.transport, describe(&sc));
        plot_run(&run, None, &title, p)?;
    }
    if a.json {
        println!("{}", crate::output::json(&r).map_err(|e| e.to_string())?);
    } else {
        println!(
            "VoIP over {}: {} messages of {} B every {} ms; {}; lifetime {:.1} ms; seed {}",
            r.transport,
            r.messages,
            a.size,
            a.interval.as_secs_f64() * 1000.0,
            describe(&sc),
            r.lifetime_ms,
            r.seed
        );
        println!(
            "  on time: {} of {} (oracle {}); late {}, never arrived {}",
            r.on_time, r.messages, r.oracle_on_time, r.late, r.never_arrived
        );
        println!(
            "  first transmissions dropped {}; amplification {}; inconsistent retransmissions {}",
            r.first_tx_dropped,
            r.amplification
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "n/a".into()),
            r.ir_sent
        );
        println!(
            "  transport delay ms: p50 {:.1}, p90 {:.1}, p99 {:.1}, max {:.1}; min buffered {:.1} ms",
            r.transport_delay_ms.p50,
            r.transport_delay_ms.p90,
            r.transport_delay_ms.p99,
            r.transport_delay_ms.max,
            r.min_buffered_ms
        );
    }
    if let Some(e) = &r.error {
        return Err(format!("the connection failed: {e}"));
    }
    if r.corrupt_delivered > 0 || r.duplicates_delivered > 0 || run.seq_holes_on_wire > 0 {
        return Err(
            "an invariant was violated (corrupt/duplicate delivery or a sequence hole)".into(),
        );
    }
    Ok(())
}
