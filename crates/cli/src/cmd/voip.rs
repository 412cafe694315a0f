//! `hollywood voip`: one call of the thesis's simulated VoIP application
//! (§5.1.2) over standard TCP, a TCP Hollywood deployment or UDP, with the
//! per-message record of Figs. 5.4–5.16 (buffered time, transport delay,
//! outcome) as JSON totals, a CSV and a Fig. 5.4-style plot.
//!
//! The results ([`VoipReport`], [`write_csv`], [`plot_run`]) live in
//! `hollywood_experiments::voip`, shared with `repro ch5` and `demo`.

use clap::Args;
pub use hollywood_experiments::voip::{
    describe, plot_run, write_csv, zoom_range, VoipParams, VoipReport,
};
use hollywood_media::{TransportKind, VoipScenario};
use std::path::PathBuf;

/// Arguments of `hollywood voip`: the call ([`VoipParams`], shared with
/// `voip` plans), its transport and seed, and where results go.
#[derive(Args, Debug)]
pub struct VoipArgs {
    #[command(flatten)]
    call: VoipParams,
    /// tcp | hollywood | hollywood-ir | hollywood-ooo | tcp-deadline | quic-ss | quic-gop | quic-fps | quic-pps | quic-dgram | quicsilver | udp
    #[arg(long, default_value = "hollywood", value_parser = TransportKind::parse)]
    transport: TransportKind,
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
    let sc = VoipScenario {
        pcap: a.pcap.clone(),
        ..a.call.scenario(a.transport, a.seed)?
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
            a.call.size,
            a.call.interval.as_secs_f64() * 1000.0,
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
