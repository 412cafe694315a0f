//! `hollywood calibrate`: the thesis's VoIP scenario (§5.1.2) over the
//! emulator with Linux TCP at both ends and with our engine at both ends
//! in standard mode, side by side with the simulator (root). See
//! `hollywood_lab::calibrate` and docs/LAB.md "Calibration".

use crate::units::parse_fraction;
use clap::Args;
use hollywood_lab::calibrate::{self, CalibrateSpec, CalibrationReport, Scenario};
use std::path::PathBuf;

/// Arguments of `hollywood calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// intercontinental (70 ms RTT, 30 ms playout) | intracontinental (15 ms, 110 ms) | both
    #[arg(long, default_value = "intercontinental")]
    scenario: String,
    /// Messages per call (one every 20 ms; 3000 = one minute).
    #[arg(long, default_value_t = 3000)]
    messages: u32,
    /// Random loss on the downlink (thesis: 0.1%).
    #[arg(long, default_value = "0.1%", value_parser = parse_fraction)]
    loss: f64,
    /// Emulator and simulator seed (the same in every run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Congestion control of the Linux sockets (the namespaces'
    /// net.ipv4.tcp_congestion_control); "system" = the machine's default.
    /// Default cubic, the engine's algorithm.
    #[arg(long, default_value = "cubic")]
    kernel_cc: String,
    /// Congestion control at both ends, Linux and engine alike (overrides
    /// --kernel-cc): newreno, cubic or bbr.
    #[arg(long, value_parser = hollywood_tcp::CcAlgorithm::parse)]
    cc: Option<hollywood_tcp::CcAlgorithm>,
    /// Also calibrate a bulk transfer (Linux vs engine goodput, same
    /// congestion control, same path).
    #[arg(long)]
    bulk: bool,
    /// Bulk: link rate each way.
    #[arg(long, default_value = "50mbit", value_parser = crate::units::parse_rate)]
    bulk_rate: u64,
    /// Bulk: round-trip time.
    #[arg(long, default_value = "40ms", value_parser = crate::units::parse_duration)]
    bulk_rtt: std::time::Duration,
    /// Bulk: loss on the data direction.
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    bulk_loss: f64,
    /// Bulk: bytes to transfer.
    #[arg(long, default_value = "50MB", value_parser = crate::units::parse_size)]
    bulk_bytes: u64,
    /// Leave out the simulator column.
    #[arg(long)]
    no_sim: bool,
    /// One JSON object (a list with --scenario both).
    #[arg(long)]
    json: bool,
    /// Keep the captures here (calibrate-<scenario>-<kernel|engine>.pcap).
    #[arg(long)]
    pcap_dir: Option<PathBuf>,
    /// Per-message CSV (scenario, transport, id, send, arrival, playout, delay, outcome).
    #[arg(long)]
    csv: Option<PathBuf>,
}

/// Run the command.
pub fn run(a: CalibrateArgs) -> Result<(), String> {
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let scenarios = match a.scenario.as_str() {
        "both" => vec![Scenario::Intercontinental, Scenario::Intracontinental],
        s => vec![Scenario::parse(s).ok_or_else(|| {
            format!("unknown scenario '{s}': use intercontinental, intracontinental or both")
        })?],
    };
    if a.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    let mut reports: Vec<CalibrationReport> = Vec::new();
    for (i, sc) in scenarios.into_iter().enumerate() {
        let lab = format!(
            "{}-{}-c{i}",
            hollywood_lab::interop::LAB_PREFIX,
            std::process::id()
        );
        let mut spec = CalibrateSpec::new(sc, &lab);
        spec.messages = a.messages;
        spec.loss = a.loss;
        spec.seed = a.seed;
        spec.simulate = !a.no_sim;
        spec.pcap_dir = a.pcap_dir.clone();
        spec.kernel_cc = (a.kernel_cc != "system").then(|| a.kernel_cc.clone());
        if let Some(cc) = a.cc {
            spec.kernel_cc = Some(cc.name().to_string());
            spec.engine_cc = cc;
        }
        if !a.json {
            eprintln!(
                "running {}: kernel, then engine ({} messages, {:.0} s each)…",
                sc.name(),
                a.messages,
                f64::from(a.messages) * 0.02
            );
        }
        reports.push(calibrate::run(&spec).map_err(|e| format!("{}: {e}", sc.name()))?);
    }
    let bulk = if a.bulk {
        let lab = format!(
            "{}-{}-cb",
            hollywood_lab::interop::LAB_PREFIX,
            std::process::id()
        );
        let mut spec = calibrate::BulkSpec::new(&lab);
        spec.rate_bps = a.bulk_rate;
        spec.rtt = a.bulk_rtt;
        spec.loss = a.bulk_loss;
        spec.bytes = a.bulk_bytes;
        spec.seed = a.seed;
        spec.cc = a.cc.unwrap_or(hollywood_tcp::CcAlgorithm::Bbr);
        if !a.json {
            eprintln!("running bulk: kernel, then engine ({} bytes)…", spec.bytes);
        }
        Some(calibrate::bulk(&spec).map_err(|e| format!("bulk: {e}"))?)
    } else {
        None
    };
    if let Some(p) = &a.csv {
        CalibrationReport::write_csv_file(&reports, p)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    if a.json {
        let out = match (&bulk, reports.len()) {
            (Some(b), _) => crate::output::json(&serde_json::json!({
                "voip": reports,
                "bulk": b,
            })),
            (None, 1) => crate::output::json(&reports[0]),
            (None, _) => crate::output::json(&reports),
        };
        println!("{}", out.map_err(|e| e.to_string())?);
    } else {
        for r in &reports {
            print!("{}", r.to_text());
        }
        if let Some(b) = &bulk {
            print!("{}", b.to_text());
        }
    }
    Ok(())
}
