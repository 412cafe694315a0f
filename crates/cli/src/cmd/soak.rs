//! `hollywood soak`: a long run on real packets (root), our engine at both
//! ends through the emulator with loss both ways; memory sampled every
//! second, stalls, every message accounted. See `hollywood_lab::soak` and
//! docs/SOAK.md.

use crate::units::{parse_duration, parse_fraction, parse_rate};
use clap::Args;
use hollywood_lab::soak::{self, SoakSpec};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hollywood soak`.
#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long messages are sent.
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    duration: Duration,
    /// Memory growth is measured from the end of this warm-up (long
    /// enough for the engines' receive rings to become resident: about
    /// 4 MiB at the default ~36 KB/s takes 2 minutes).
    #[arg(long, default_value = "180s", value_parser = parse_duration)]
    warmup: Duration,
    /// Round-trip time (half each way).
    #[arg(long, default_value = "40ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Bernoulli loss in each direction.
    #[arg(long, default_value = "5%", value_parser = parse_fraction)]
    loss: f64,
    /// Link rate each way.
    #[arg(long, default_value = "10mbit", value_parser = parse_rate)]
    rate: u64,
    /// Payload bytes per message (≥ 4).
    #[arg(long, default_value_t = 160)]
    size: usize,
    /// Interval between messages.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    interval: Duration,
    /// Lifetime of the messages that have one.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    lifetime: Duration,
    /// Every n-th message is reliable (no lifetime); 0 = none.
    #[arg(long, default_value_t = 10)]
    reliable_every: u32,
    /// Emulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the per-second samples here (CSV).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// One JSON object (the samples included).
    #[arg(long)]
    json: bool,
}

/// Run the command.
pub fn run(a: SoakArgs) -> Result<(), String> {
    if a.size < hollywood_lab::workload::MIN_PAYLOAD {
        return Err(format!(
            "--size must be at least {} bytes (the message id)",
            hollywood_lab::workload::MIN_PAYLOAD
        ));
    }
    if a.interval.is_zero() || a.duration < a.interval {
        return Err("--interval must be positive and --duration at least one interval".into());
    }
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let _ = hollywood_io::NetNs::remove_stale(soak::LAB_PREFIX);
    let mut spec = SoakSpec::new(&format!("{}-{}", soak::LAB_PREFIX, std::process::id()));
    spec.duration = a.duration;
    spec.warmup = a.warmup.min(a.duration);
    spec.rtt = a.rtt;
    spec.loss = a.loss;
    spec.rate_bps = a.rate;
    spec.size = a.size;
    spec.interval = a.interval;
    spec.lifetime = a.lifetime;
    spec.reliable_every = a.reliable_every;
    spec.seed = a.seed;
    let bar = indicatif::ProgressBar::new(a.duration.as_secs());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} s  {msg}")
            .map_err(|e| e.to_string())?,
    );
    let r = soak::run(&spec, |s| {
        bar.set_position(s.t_s as u64);
        bar.set_message(format!(
            "RSS {} MiB, {} delivered, {} expired, RTO {:.0} ms",
            s.rss_kib / 1024,
            s.delivered,
            s.expired,
            s.rto_ms
        ));
    })
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    if let Some(p) = &a.csv {
        std::fs::write(p, soak::samples_csv(&r)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "sent {} ({} reliable): delivered {} ({} reliable), expired only {}, expired and delivered {}, unaccounted {}",
            r.sent, r.reliable_sent, r.delivered, r.reliable_delivered, r.expired_only, r.expired_and_delivered, r.unaccounted
        );
        println!(
            "on time {:.2} %; corrupt {}, duplicates {}; network dropped {} / {} packets (a→b / b→a); {} RTOs, {} retransmitted segments",
            r.on_time_pct, r.corrupt, r.duplicates, r.network_dropped.0, r.network_dropped.1, r.rto_events, r.retransmissions
        );
        println!(
            "longest stall {:.0} ms (bar 2 RTO = {:.0} ms; largest RTO {:.0} ms)",
            r.longest_stall_ms, r.stall_bound_ms, r.max_rto_ms
        );
        println!(
            "RSS {} KiB after the warm-up, {} KiB at the end ({:+.1} %), peak {} KiB",
            r.rss_after_warmup_kib, r.rss_end_kib, r.rss_growth_pct, r.rss_peak_kib
        );
        if r.violations.is_empty() {
            println!("passed");
        }
    }
    if r.violations.is_empty() {
        Ok(())
    } else {
        Err(format!("soak failed: {}", r.violations.join("; ")))
    }
}
