//! `hollywood sim multipath`: a timed message stream over a connection
//! group of two disjoint simulated paths ("fibre" a and "LTE" b by
//! default) in one of the group's modes, through a hard failure of a path
//! (docs/MULTIPATH.md).

use crate::units::{parse_duration, parse_rate, parse_size};
use clap::Args;
use hollywood_media::multipath::{MultipathMode, MultipathRun, MultipathScenario, PathProfile};
use hollywood_media::GenericTransport;
use hollywood_tcp::{CcAlgorithm, Config};
use std::time::Duration;

/// Arguments of `hollywood sim multipath`.
#[derive(Args, Debug)]
pub struct MultipathArgs {
    /// single-a | single-b | broadcast | backup | aggregate; several,
    /// comma-separated, or `all`: one table.
    #[arg(long, default_value = "broadcast")]
    mode: String,
    /// Hard failure of a path (100 % loss both ways from then on):
    /// `a@10s` or `b@2.5s`.
    #[arg(long)]
    fail: Option<String>,
    /// Inner connections: hollywood (or any `sim messages` transport
    /// name: quic-pps, quicsilver, udp, ...).
    #[arg(long, default_value = "hollywood")]
    transport: String,
    /// Path a's rate.
    #[arg(long, default_value = "20mbit", value_parser = parse_rate)]
    a_rate: u64,
    /// Path a's RTT.
    #[arg(long, default_value = "40ms", value_parser = parse_duration)]
    a_rtt: Duration,
    /// Path a's loss (data direction), a fraction (0.001 = 0.1 %).
    #[arg(long, default_value_t = 0.001)]
    a_loss: f64,
    /// Path b's rate.
    #[arg(long, default_value = "10mbit", value_parser = parse_rate)]
    b_rate: u64,
    /// Path b's RTT.
    #[arg(long, default_value = "80ms", value_parser = parse_duration)]
    b_rtt: Duration,
    /// Path b's loss, a fraction.
    #[arg(long, default_value_t = 0.01)]
    b_loss: f64,
    /// Messages.
    #[arg(long, default_value_t = 6000)]
    messages: u32,
    /// Payload bytes per message.
    #[arg(long, default_value = "1316", value_parser = parse_size)]
    size: u64,
    /// Time between messages.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    interval: Duration,
    /// Message lifetime (the deadline from generation).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    lifetime: Duration,
    /// Congestion control of the inner connections: newreno, cubic or
    /// bbr. Default: each transport as the API sets it up (QUIC with BBR,
    /// `Preconnection`'s default for live media; TCP deployments with the
    /// engine's default, CUBIC with the live-stream window).
    #[arg(long, value_parser = CcAlgorithm::parse)]
    cc: Option<CcAlgorithm>,
    /// Do not resend a failed path's live messages (backup, aggregate).
    #[arg(long)]
    no_resend: bool,
    /// No group heartbeats on UDP paths (no failure detection there).
    #[arg(long)]
    no_heartbeat: bool,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

fn parse_fail(s: &str) -> Result<(usize, Duration), String> {
    let (p, t) = s
        .split_once('@')
        .ok_or_else(|| format!("--fail {s}: use PATH@TIME, e.g. a@10s"))?;
    let path = match p {
        "a" => 0,
        "b" => 1,
        _ => return Err(format!("--fail {s}: the path is a or b")),
    };
    Ok((path, parse_duration(t)?))
}

/// The scenarios of the arguments, one per mode.
fn scenarios(a: &MultipathArgs) -> Result<Vec<MultipathScenario>, String> {
    let modes: Vec<MultipathMode> = if a.mode == "all" {
        MultipathMode::ALL.to_vec()
    } else {
        a.mode
            .split(',')
            .map(|m| {
                MultipathMode::parse(m).ok_or_else(|| {
                    format!("unknown mode '{m}': single-a, single-b, broadcast, backup, aggregate or all")
                })
            })
            .collect::<Result<_, _>>()?
    };
    let transport = GenericTransport::parse(&a.transport)
        .ok_or_else(|| format!("unknown transport '{}'", a.transport))?;
    let mut base = Config::default();
    let transport = match a.cc {
        Some(cc) => {
            base.cc = cc;
            transport.with_cc(cc)
        }
        None => transport.with_cc(CcAlgorithm::Bbr),
    };
    let fail = a.fail.as_deref().map(parse_fail).transpose()?;
    Ok(modes
        .into_iter()
        .map(|mode| MultipathScenario {
            a: PathProfile {
                rate_bps: a.a_rate,
                rtt: a.a_rtt,
                loss: a.a_loss,
            },
            b: PathProfile {
                rate_bps: a.b_rate,
                rtt: a.b_rtt,
                loss: a.b_loss,
            },
            mode,
            transport: transport.clone(),
            count: a.messages,
            size: a.size as usize,
            interval: a.interval,
            lifetime: a.lifetime,
            fail,
            resend: !a.no_resend,
            heartbeat: !a.no_heartbeat,
            seed: a.seed,
            base: base.clone(),
        })
        .collect())
}

/// Run the command.
pub fn run(a: MultipathArgs) -> Result<(), String> {
    let mut runs = Vec::new();
    for sc in scenarios(&a)? {
        runs.push(sc.run()?);
    }
    if a.json {
        let v = if runs.len() > 1 {
            crate::output::json(&runs)
        } else {
            crate::output::json(&runs[0])
        };
        println!("{}", v?);
    } else {
        print_table(&runs);
    }
    check(&runs)
}

fn check(runs: &[MultipathRun]) -> Result<(), String> {
    if let Some(r) = runs.iter().find(|r| r.corrupt_or_duplicate > 0) {
        return Err(format!(
            "{}: corrupt or duplicate delivery to the application",
            r.mode
        ));
    }
    Ok(())
}

/// Arguments of `hollywood lab multipath`.
#[derive(Args, Debug)]
pub struct LabMultipathArgs {
    /// Name of the temporary labs, one per path: NAME-pa, NAME-pb
    /// (namespaces NAME-pa-a, NAME-pa-e, NAME-pa-b, ...; deleted
    /// afterwards).
    #[arg(long, default_value = "hwmp")]
    pub name: String,
    /// Also run the simulator on the same scenario and seed, and print
    /// its rows under the lab's.
    #[arg(long)]
    pub with_sim: bool,
    #[command(flatten)]
    pub multipath: MultipathArgs,
}

/// `hollywood lab multipath`: the same scenarios on real packets.
pub fn run_lab(l: LabMultipathArgs) -> Result<(), String> {
    hollywood_lab::topology::check_name(&l.name).map_err(|e| e.to_string())?;
    let a = &l.multipath;
    let mut lab_runs = Vec::new();
    let mut sim_runs = Vec::new();
    for sc in scenarios(a)? {
        let r = hollywood_lab::multipath::run(&sc, &l.name).map_err(|e| e.to_string())?;
        if !a.json {
            eprintln!("{}: done (load {})", r.run.mode, r.load);
        }
        lab_runs.push(r);
        if l.with_sim {
            sim_runs.push(sc.run()?);
        }
    }
    if a.json {
        #[derive(serde::Serialize)]
        struct Both<'a> {
            lab: &'a [hollywood_lab::multipath::LabMultipathRun],
            sim: &'a [MultipathRun],
        }
        let v = if l.with_sim {
            crate::output::json(&Both {
                lab: &lab_runs,
                sim: &sim_runs,
            })
        } else if lab_runs.len() > 1 {
            crate::output::json(&lab_runs)
        } else {
            crate::output::json(&lab_runs[0])
        };
        println!("{}", v?);
    } else {
        let runs: Vec<MultipathRun> = lab_runs.iter().map(|r| r.run.clone()).collect();
        println!("lab (real packets):");
        print_table(&runs);
        for r in &lab_runs {
            println!(
                "  {:<10} datagrams sent a/b {}/{}, received {}/{}, dropped by the failure {}, load {}",
                r.run.mode,
                r.datagrams_sent[0],
                r.datagrams_sent[1],
                r.datagrams_received[0],
                r.datagrams_received[1],
                r.dropped_by_failure,
                r.load
            );
        }
        if l.with_sim {
            println!("simulator (same scenario and seed):");
            print_table(&sim_runs);
        }
    }
    let runs: Vec<MultipathRun> = lab_runs.into_iter().map(|r| r.run).collect();
    check(&runs)?;
    check(&sim_runs)
}

fn pct(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

fn print_table(runs: &[MultipathRun]) {
    if let Some(r) = runs.first() {
        println!(
            "inner connections: {}, congestion control {}",
            r.transport, r.cc
        );
    }
    println!(
        "{:<10} {:>7} {:>8} {:>7} {:>6} {:>6} {:>9} {:>9} {:>7} {:>7}  failure window (misses before/in/after, span ms, detected s)",
        "mode", "sent", "on time", "%", "late", "lost", "a in time", "b in time", "missed*", "resent"
    );
    for r in runs {
        let w = r.failure.as_ref().map_or(String::from("-"), |w| {
            format!(
                "{}/{}/{} [{:.0}..{:.0}] det {}",
                w.misses_before,
                w.misses_in_window,
                w.misses_after,
                w.miss_span_ms.map_or(0.0, |s| s.0),
                w.miss_span_ms.map_or(0.0, |s| s.1),
                w.detected_s.map_or("-".into(), |d| format!("{d:.3}"))
            )
        });
        println!(
            "{:<10} {:>7} {:>8} {:>6.2}% {:>6} {:>6} {:>9} {:>9} {:>7} {:>7}  {}",
            r.mode,
            r.sent,
            r.on_time,
            pct(r.on_time, r.sent),
            r.late,
            r.lost,
            r.paths[0].delivered_in_time,
            r.paths[1].delivered_in_time,
            r.in_time_on_a_path_but_missed,
            r.resent,
            w
        );
    }
    println!(
        "missed*: messages some path delivered in time that the application did not get in time"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use hollywood_transport::quic::QuicCc;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: MultipathArgs,
    }

    fn scenario(args: &[&str]) -> MultipathScenario {
        let cli = Cli::parse_from(std::iter::once("multipath").chain(args.iter().copied()));
        scenarios(&cli.a).unwrap().remove(0)
    }

    fn quic_cc(sc: &MultipathScenario) -> QuicCc {
        match &sc.transport {
            GenericTransport::Quic(q) => q.cc,
            other => panic!("not QUIC: {other:?}"),
        }
    }

    #[test]
    fn quic_paths_get_bbr_as_the_api_gives_them_unless_told() {
        assert_eq!(
            quic_cc(&scenario(&["--transport", "quic-pps"])),
            QuicCc::Bbr
        );
        let sc = scenario(&["--transport", "quicsilver", "--cc", "cubic"]);
        assert_eq!(quic_cc(&sc), QuicCc::Cubic);
        // TCP deployments keep the engine's default unless told.
        assert_eq!(scenario(&[]).base.cc, Config::default().cc);
        assert_eq!(scenario(&["--cc", "bbr"]).base.cc, CcAlgorithm::Bbr);
    }
}
