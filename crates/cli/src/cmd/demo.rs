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
    let late_by = rec.get(rec.len() / 2).map(|d| format!("{d:.0} ms"));
    let outcomes: Vec<Outcome> = runs
        .iter()
        .map(|(run, r)| Outcome {
            kind: run.scenario.transport,
            on_time: r.on_time,
            app_lost: r.app_lost,
        })
        .collect();
    for line in wrap(
        &conclusion(&outcomes, a.messages, dropped, late_by.as_deref()),
        84,
    ) {
        println!("{line}");
    }
    println!();
    if !plots.is_empty() {
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

/// What one transport made of the call, as the conclusion compares it.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    kind: TransportKind,
    on_time: u64,
    /// Late or never arrived.
    app_lost: u64,
}

/// Two on-time counts closer than this share of the call are called parity.
const PARITY_SHARE: f64 = 0.001;

/// Compare `a` and `b` (on-time counts) in words: who played more on time,
/// or parity within `tol` messages.
fn versus(a_name: &str, a: u64, b_name: &str, b: u64, tol: u64) -> String {
    if a > b + tol {
        format!("{a_name} played more on time than {b_name} ({a} against {b})")
    } else if b > a + tol {
        format!("{b_name} played more on time than {a_name} ({b} against {a})")
    } else {
        format!(
            "{a_name} and {b_name} are at parity ({a} and {b} on time, within {tol} of each other)"
        )
    }
}

/// The demo's conclusion, worded from the measured outcomes (`late_by`:
/// standard TCP's median recovery delay, if it recovered any drop).
fn conclusion(outcomes: &[Outcome], messages: u32, dropped: u64, late_by: Option<&str>) -> String {
    let find = |k: TransportKind| outcomes.iter().find(|o| o.kind == k);
    let tol = (f64::from(messages) * PARITY_SHARE).floor() as u64;
    let mut out = Vec::new();
    let tcp = find(TransportKind::Tcp(Transport::Tcp));
    let hw = find(TransportKind::Tcp(Transport::Hollywood));
    let udp = find(TransportKind::Udp);
    let qss = find(TransportKind::Quic(QuicKind::SingleStream));
    let qs = find(TransportKind::Quic(QuicKind::Quicsilver));
    if let Some(t) = tcp {
        let recovery = match late_by {
            Some(d) => format!(
                "Standard TCP retransmits each lost packet; the copy arrived {d} late (median)."
            ),
            None => "Standard TCP recovered no drop here.".to_string(),
        };
        let cost = match t.app_lost.cmp(&dropped) {
            std::cmp::Ordering::Greater => {
                "more than the network dropped: the messages behind a hole waited for it \
                 (head-of-line blocking)"
            }
            std::cmp::Ordering::Equal => "as many as the network dropped",
            std::cmp::Ordering::Less => {
                "fewer than the network dropped: some retransmissions arrived in time"
            }
        };
        out.push(format!(
            "{recovery} It lost {} message(s) to the application for {dropped} drop(s), {cost}.",
            t.app_lost
        ));
    }
    out.push(
        "TCP Hollywood sends a newer message in a retransmission's place (inconsistent \
         retransmission) and hands over messages as they arrive (out-of-order delivery)."
            .to_string(),
    );
    if let (Some(h), Some(t)) = (hw, tcp) {
        out.push(format!(
            "Measured: {}.",
            versus("TCP Hollywood", h.on_time, "standard TCP", t.on_time, tol)
        ));
    }
    if let (Some(h), Some(u)) = (hw, udp) {
        let like = match h.app_lost.cmp(&u.app_lost) {
            std::cmp::Ordering::Equal => "as many messages as UDP",
            std::cmp::Ordering::Greater => "more messages than UDP",
            std::cmp::Ordering::Less => "fewer messages than UDP",
        };
        out.push(format!(
            "On a TCP wire image it lost {} ({like}, which lost {}).",
            h.app_lost, u.app_lost
        ));
    }
    if let (Some(q), Some(t)) = (qss, tcp) {
        out.push(format!(
            "QUIC with one stream: {}.",
            versus("standard QUIC", q.on_time, "standard TCP", t.on_time, tol)
        ));
    }
    if let (Some(q), Some(h)) = (qs, hw) {
        out.push(format!(
            "QUICsilver (a stream per message, reset when it cannot arrive in time): {}.",
            versus("QUICsilver", q.on_time, "TCP Hollywood", h.on_time, tol)
        ));
    }
    out.push(format!(
        "(Parity: within {tol} message(s), {} % of the call.)",
        PARITY_SHARE * 100.0
    ));
    out.join(" ")
}

/// `text` in lines of at most `width` characters (words never split).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(tcp: u64, hw: u64, udp: u64, qss: u64, qs: u64) -> Vec<Outcome> {
        let o = |kind, on_time: u64| Outcome {
            kind,
            on_time,
            app_lost: 3000 - on_time,
        };
        vec![
            o(TransportKind::Tcp(Transport::Tcp), tcp),
            o(TransportKind::Tcp(Transport::Hollywood), hw),
            o(TransportKind::Udp, udp),
            o(TransportKind::Quic(QuicKind::SingleStream), qss),
            o(TransportKind::Quic(QuicKind::Quicsilver), qs),
        ]
    }

    #[test]
    fn the_conclusion_follows_what_was_measured() {
        let late = Some("91 ms");
        // The usual outcome: Hollywood ahead of TCP, like UDP.
        let c = conclusion(&outcomes(2992, 2998, 2998, 2992, 2998), 3000, 2, late);
        assert!(
            c.contains("TCP Hollywood played more on time than standard TCP (2998 against 2992)"),
            "{c}"
        );
        assert!(c.contains("as many messages as UDP"), "{c}");
        assert!(
            c.contains(
                "lost 8 message(s) to the application for 2 drop(s), more than the network dropped"
            ),
            "{c}"
        );
        assert!(
            c.contains("standard QUIC and standard TCP are at parity"),
            "{c}"
        );
        assert!(
            c.contains("QUICsilver and TCP Hollywood are at parity"),
            "{c}"
        );
        // A contrary outcome: TCP ahead, Hollywood worse than UDP, QUIC
        // ahead of TCP, QUICsilver behind Hollywood.
        let c = conclusion(&outcomes(2998, 2990, 2998, 2999, 2980), 3000, 2, late);
        assert!(
            c.contains("standard TCP played more on time than TCP Hollywood (2998 against 2990)"),
            "{c}"
        );
        assert!(
            !c.contains("TCP Hollywood played more on time than standard TCP"),
            "{c}"
        );
        assert!(c.contains("more messages than UDP"), "{c}");
        assert!(c.contains("as many as the network dropped"), "{c}");
        assert!(c.contains("at parity (2999 and 2998"), "{c}");
        assert!(
            c.contains("TCP Hollywood played more on time than QUICsilver"),
            "{c}"
        );
        // Within the tolerance (3 of 3000): parity, both ways.
        let c = conclusion(&outcomes(2995, 2998, 2998, 2995, 2998), 3000, 2, None);
        assert!(
            c.contains("TCP Hollywood and standard TCP are at parity"),
            "{c}"
        );
        assert!(c.contains("recovered no drop"), "{c}");
    }

    #[test]
    fn wrapping_keeps_words_whole() {
        let lines = wrap("aaa bbb ccc dddd", 7);
        assert_eq!(lines, ["aaa bbb", "ccc", "dddd"]);
    }
}
