//! `hollywood demo`: the project's first command. A one-minute voice call on
//! the thesis's intercontinental path (§5.1.2: 8 Mb/s down, 1 Mb/s up,
//! 70 ms RTT, 0.1 % random loss, 160-byte messages every 20 ms, 30 ms
//! playout delay) over standard TCP, the three TCP Hollywood deployments
//! (§4.4), standard QUIC (one stream), QUICsilver (stream per message,
//! deadline-aware resets) and plain UDP, side by side: a short table a newcomer can read,
//! and per-message plots in the style of the thesis's Figs. 5.7–5.16.

use crate::cmd::voip::{plot_run, zoom_range, VoipReport};
use clap::Args;
use hollywood_media::{QuicKind, Transport, TransportKind, VoipRun, VoipScenario};
use std::path::PathBuf;

/// Arguments of `hollywood demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Seed (which packets the network drops).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Messages per call (3000 = one minute of audio).
    #[arg(long, default_value_t = 3000)]
    messages: u32,
    /// Directory for the plots (created if missing).
    #[arg(long, default_value = "out/demo")]
    out: PathBuf,
    /// Do not write plots.
    #[arg(long)]
    no_plots: bool,
    /// Print one JSON object (schema, parameters, results) instead of the table.
    #[arg(long)]
    json: bool,
}

/// The transports in the order the table shows them.
const TRANSPORTS: [TransportKind; 7] = [
    TransportKind::Tcp(Transport::Tcp),
    TransportKind::Tcp(Transport::HollywoodIr),
    TransportKind::Tcp(Transport::HollywoodOoo),
    TransportKind::Tcp(Transport::Hollywood),
    TransportKind::Quic(QuicKind::SingleStream),
    TransportKind::Quic(QuicKind::Quicsilver),
    TransportKind::Udp,
];

fn what(t: TransportKind) -> &'static str {
    match t {
        TransportKind::Tcp(Transport::Tcp) => "standard TCP",
        TransportKind::Tcp(Transport::HollywoodIr) => "Hollywood sender only",
        TransportKind::Tcp(Transport::HollywoodOoo) => "Hollywood receiver only",
        TransportKind::Tcp(Transport::Hollywood) => "TCP Hollywood, both ends",
        TransportKind::Tcp(Transport::Deadline) => "deadline TCP, sequence gaps",
        TransportKind::Udp => "UDP, never retransmits",
        TransportKind::Quic(QuicKind::Quicsilver) => "QUIC, deadline resets",
        TransportKind::Quic(QuicKind::SingleStream) => "standard QUIC, one stream",
        TransportKind::Quic(_) => "QUIC",
    }
}

pub fn run(a: DemoArgs) -> Result<(), String> {
    if a.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    let base = VoipScenario {
        seed: a.seed,
        count: a.messages,
        ..VoipScenario::intercontinental()
    };
    // Simulate (the simulator alone: this is what "times real time" measures).
    let sim_wall = std::time::Instant::now();
    let mut runs: Vec<(VoipRun, VoipReport)> = Vec::new();
    for t in TRANSPORTS {
        let t0 = std::time::Instant::now();
        let run = VoipScenario {
            transport: t,
            ..base.clone()
        }
        .run()
        .map_err(|e| format!("{t}: {e}"))?;
        let report = VoipReport::of(&run, t0.elapsed().as_secs_f64() * 1000.0);
        if let Some(e) = &report.error {
            return Err(format!("{t}: the connection failed: {e}"));
        }
        runs.push((run, report));
    }
    let sim_wall_s = sim_wall.elapsed().as_secs_f64();
    let audio_s: f64 = runs.iter().map(|(r, _)| r.sim_time.as_secs_f64()).sum();
    let speedup = audio_s / sim_wall_s.max(1e-9);

    let mut plots = Vec::new();
    if !a.no_plots {
        std::fs::create_dir_all(&a.out)
            .map_err(|e| format!("cannot create {}: {e}", a.out.display()))?;
        // Zoom every transport on the same message: the first one standard
        // TCP saw dropped (the same seed drops the same packets).
        let centre = runs.first().and_then(|(r, _)| r.loss_event());
        for (run, r) in &runs {
            let full = a.out.join(format!("{}.png", r.transport));
            let title = format!(
                "intercontinental call, {} ({})",
                r.transport,
                what(run.scenario.transport)
            );
            plot_run(run, None, &title, &full)?;
            plots.push(full);
            if let Some(c) = centre {
                let (lo, hi) = zoom_range(run, c, 50);
                let zoom = a.out.join(format!("{}-zoom.png", r.transport));
                plot_run(
                    run,
                    Some((lo, hi)),
                    &format!("{title}, messages {lo}-{hi}"),
                    &zoom,
                )?;
                plots.push(zoom);
            }
        }
    }

    if a.json {
        let v: Vec<_> = runs
            .iter()
            .map(|(_, r)| serde_json::json!({ "report": r, "lost_to_application": r.app_lost }))
            .collect();
        let out = serde_json::json!({
            "calls": v,
            "seconds_of_audio": audio_s,
            "simulation_wall_seconds": sim_wall_s,
            "times_real_time": speedup,
            "plots": plots,
        });
        println!("{}", crate::output::json(&out).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let dropped = runs.first().map_or(0, |(_, r)| r.first_tx_dropped);
    println!("A one-minute voice call between continents, simulated (thesis §5.1.2):");
    println!(
        "8 Mb/s down, 1 Mb/s up, 70 ms round trip, 0.1% random packet loss (seed {}).",
        a.seed
    );
    println!(
        "{} voice messages of 160 B, one every 20 ms; the receiver plays each one 30 ms",
        a.messages
    );
    println!("after it would normally arrive (the playout delay). Later than that, it is useless.");
    println!();
    println!(
        "The network dropped {dropped} packet(s) carrying a message. What each transport made of that:"
    );
    println!();
    println!(
        "{:<14} {:<25} {:>20} {:>6} {:>14} {:>12}",
        "transport", "", "on time (oracle)", "late", "never arrived", "worst delay"
    );
    for (run, r) in &runs {
        println!(
            "{:<14} {:<25} {:>20} {:>6} {:>14} {:>9.1} ms",
            r.transport,
            what(run.scenario.transport),
            format!("{} ({})", r.on_time, r.oracle_on_time),
            r.late,
            r.never_arrived,
            r.transport_delay_ms.max
        );
    }
    println!();
    println!(
        "On time = played at its playout instant, of {}; the oracle loses only what the",
        a.messages
    );
    println!("network dropped and adds no delay.");
    println!();
    let mut rec: Vec<f64> = runs
        .first()
        .map(|(r, _)| r.recovery_delays_ms())
        .unwrap_or_default();
    rec.sort_by(f64::total_cmp);
    let late_by = rec
        .get(rec.len() / 2)
        .map(|d| format!("{d:.0} ms"))
        .unwrap_or_else(|| "too".into());
    println!("Standard TCP retransmits the lost packet, but the copy arrives {late_by} late, and");
    println!("every message behind it waits (head-of-line blocking): one drop costs several");
    println!("messages. TCP Hollywood sends a newer message in the retransmission's place");
    println!("(inconsistent retransmission) and hands over messages as they arrive (out-of-order");
    println!("delivery): it loses only the dropped message, like UDP, on a TCP wire image.");
    println!("QUIC with one stream blocks like TCP; QUICsilver (a stream per message, reset");
    println!("when it cannot arrive in time) matches TCP Hollywood where UDP passes.");
    if !plots.is_empty() {
        println!();
        println!(
            "Plots (time buffered and delay per message, red = lost; *-zoom = around one drop): {}/",
            a.out.display()
        );
    }
    println!(
        "Simulated {} calls ({:.0} s of audio) in {:.3} s: {:.0}x faster than real time.",
        runs.len(),
        audio_s,
        sim_wall_s,
        speedup
    );
    println!(
        "More: `hollywood sim voip --help`, `hollywood repro ch5` (all thesis chapter 5 figures)."
    );
    Ok(())
}
