//! `hollywood lab relay-chain`: a stream through a chain of relays, each
//! hop its own lossy emulated path, one end-to-end deadline; a late
//! joiner at the far end (root). See `hollywood_lab::relaychain`.

use crate::units::{parse_duration, parse_fraction, parse_rate};
use clap::Args;
use hollywood_lab::relaychain::{self, ChainSpec};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hollywood lab relay-chain`.
#[derive(Args, Debug)]
pub struct RelayChainArgs {
    /// Relays in the chain.
    #[arg(long, default_value_t = 3)]
    relays: usize,
    /// Round trip of each hop (half each way).
    #[arg(long, default_value = "40ms", value_parser = parse_duration)]
    hop_rtt: Duration,
    /// Bernoulli loss on each hop's data direction.
    #[arg(long, default_value = "1%", value_parser = parse_fraction)]
    hop_loss: f64,
    /// Each hop's rate (0: unlimited).
    #[arg(long, default_value = "20mbit", value_parser = parse_rate)]
    hop_rate: u64,
    /// The end-to-end deadline of each message.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    deadline: Duration,
    /// How long the publisher sends (1316 B every 5 ms).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    duration: Duration,
    /// Messages from one group start to the next (5 ms apart).
    #[arg(long, default_value_t = 100)]
    gop: u64,
    /// Candidates, comma-separated, one run each: quic, kernel (the
    /// message layer on kernel TCP), hollywood (TCP Hollywood on each
    /// host's engine; every relay's host-mode instance leaves by both of
    /// its interfaces).
    #[arg(long, value_delimiter = ',', default_value = "quic,kernel")]
    transports: Vec<String>,
    /// Emulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Logs, one folder per run.
    #[arg(long, default_value = "target/relay-chain")]
    out: PathBuf,
    /// One JSON list.
    #[arg(long)]
    json: bool,
}

/// Run the command.
pub fn run(a: RelayChainArgs) -> Result<(), String> {
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let bin = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
    let mut rows = Vec::new();
    for t in &a.transports {
        let spec = ChainSpec {
            name: format!("hwrc{}", std::process::id()),
            bin: bin.clone(),
            relays: a.relays,
            hop_delay: a.hop_rtt / 2,
            hop_loss: a.hop_loss,
            hop_rate_bps: a.hop_rate,
            deadline: a.deadline,
            duration: a.duration,
            gop: a.gop,
            transport: t.clone(),
            seed: a.seed,
            out_dir: a.out.join(t),
        };
        let json = a.json;
        let r = relaychain::run(&spec, |what| {
            if !json {
                eprintln!("{t}: {what}");
            }
        })
        .map_err(|e| e.to_string())?;
        rows.push(r);
    }
    if a.json {
        println!("{}", crate::output::json(&rows).map_err(|e| e.to_string())?);
        return Ok(());
    }
    println!(
        "{} relays, each hop RTT {:?} and {}% loss on the data direction, deadline {:?}, {:?} of 1316 B every 5 ms, a group start every {} messages",
        a.relays,
        a.hop_rtt,
        a.hop_loss * 100.0,
        a.deadline,
        a.duration,
        a.gop
    );
    println!("transport  published  on time (of expected)      late delivered  late joiner: first group after (bound)  its on time  per relay: in/late/forwarded/expired/path drops in; players' path drops");
    for r in &rows {
        let hops: Vec<String> = r
            .hops
            .iter()
            .map(|h| {
                format!(
                    "{}/{}/{}/{}/{}",
                    h.published, h.published_late, h.forwarded, h.expired, h.path_dropped
                )
            })
            .collect();
        println!(
            "{:9}  {:9}  {:6} of {:6} = {:7.3} %  {:14}  {:>10} ms ({:.0} ms)               {:7.3} %   {}; {}",
            r.transport,
            r.published,
            r.on_time,
            r.expected,
            r.on_time_pct,
            match r.late_by_max_ms {
                Some(by) => format!("{} (+{by:.1} ms)", r.late_delivered),
                None => r.late_delivered.to_string(),
            },
            r.late_joiner_first_group_ms
                .map_or("never".to_string(), |m| format!("{m:.1}")),
            r.late_joiner_bound_ms,
            r.late_joiner_on_time_pct,
            hops.join("  "),
            r.player_path_dropped
        );
        println!(
            "           players' sessions dropped {} past the deadline on arrival, {} at delivery; the far player's least slack {} ms, its clock bounds {:.1} ms wide",
            r.dropped_late,
            r.dropped_at_delivery,
            r.slack_min_ms.map_or("-".to_string(), |m| format!("{m:.1}")),
            r.player_clock_uncertainty_ms
        );
    }
    Ok(())
}
