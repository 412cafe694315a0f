//! `hollywood netem run`: the user-space link emulator in a lab's emulator
//! namespace, in the foreground until Ctrl-C or SIGTERM.
//!
//! Link specs (`--a2b`, `--b2a`, schedule lines) are comma-separated
//! `key=value` pairs, later keys overriding earlier ones:
//!
//! | key | value | example |
//! | --- | --- | --- |
//! | `rate` | bit/s, `0` or `unlimited` for no limit | `rate=10mbit` |
//! | `delay` | one-way propagation delay | `delay=20ms` |
//! | `jitter` | uniform extra delay in `[0, max]`, order kept | `jitter=2ms` |
//! | `queue` | drop-tail queue in bytes | `queue=64kB` |
//! | `loss` | `P` or `gilbert:P,R[,BAD[,GOOD]]` | `loss=1%` |
//! | `duplicate` | probability | `duplicate=0.1%` |
//! | `reorder` | `P:HOLD` — hold a packet back by HOLD with probability P | `reorder=1%:5ms` |
//! | `mtu` | bytes, `none` for no limit | `mtu=1400` |
//!
//! A schedule file has one change per line: `AT [a2b|b2a|both] SPEC`, AT
//! counted from the emulator's start (`10s rate=5mbit,delay=40ms`); `#`
//! starts a comment.

use crate::units::{parse_duration, parse_fraction, parse_loss_model, parse_rate, parse_size};
use clap::{Args, Subcommand};
use hollywood_lab::netem::{Direction, DirectionConfig, Netem, NetemConfig, NetemStats};
use hollywood_lab::topology::{Host, Lab};
use hollywood_sim::{Jitter, LinkChange, LinkConfig, RateTrace, Reorder};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `hollywood netem …`
#[derive(Subcommand, Debug)]
pub enum NetemCommand {
    /// Run the emulator in an existing lab's e namespace until Ctrl-C/SIGTERM.
    Run(RunArgs),
}

/// Arguments of `hollywood netem run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Lab name (namespaces NAME-a, NAME-e, NAME-b), made by `hollywood lab up`.
    #[arg(long, default_value = "hw")]
    pub lab: String,
    /// Path a→b, e.g. rate=10mbit,delay=20ms,jitter=2ms,queue=64kB,loss=1%.
    #[arg(long, default_value = "")]
    pub a2b: String,
    /// Path b→a (same syntax).
    #[arg(long, default_value = "")]
    pub b2a: String,
    /// Mahimahi trace for a→b (replaces its rate).
    #[arg(long)]
    pub trace_a2b: Option<PathBuf>,
    /// Mahimahi trace for b→a.
    #[arg(long)]
    pub trace_b2a: Option<PathBuf>,
    /// Schedule file: lines `AT [a2b|b2a|both] SPEC`.
    #[arg(long)]
    pub schedule: Option<PathBuf>,
    /// Seed for loss, jitter, reordering and duplication.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the counters as JSON to this file every second and at exit
    /// (its first appearance means the emulator is running).
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// Print the final counters as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: NetemCommand) -> Result<(), String> {
    match c {
        NetemCommand::Run(a) => run_emulator(a),
    }
}

/// Split a spec on commas, keeping the commas inside `loss=gilbert:P,R,…`
/// (a piece without `=` continues the previous one).
fn spec_items(spec: &str) -> Result<Vec<(String, String)>, String> {
    let mut items: Vec<(String, String)> = Vec::new();
    for piece in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match piece.split_once('=') {
            Some((k, v)) => items.push((k.trim().to_ascii_lowercase(), v.trim().to_owned())),
            None => match items.last_mut() {
                Some((k, v)) if k == "loss" => {
                    v.push(',');
                    v.push_str(piece);
                }
                _ => {
                    return Err(format!(
                        "bad link spec '{spec}': '{piece}' is not key=value (keys: rate, delay, jitter, queue, loss, duplicate, reorder, mtu)"
                    ))
                }
            },
        }
    }
    Ok(items)
}

/// Parse a link spec into the changes it makes, in order.
pub fn parse_changes(spec: &str) -> Result<Vec<LinkChange>, String> {
    let mut out = Vec::new();
    for (k, v) in spec_items(spec)? {
        out.push(parse_change(&k, &v).map_err(|e| {
            if e.starts_with("unknown link parameter") {
                e
            } else {
                format!("{k}={v}: {e}")
            }
        })?);
    }
    Ok(out)
}

/// One `key=value` of a link spec.
fn parse_change(k: &str, v: &str) -> Result<LinkChange, String> {
    let change = match k {
            "rate" => match v.to_ascii_lowercase().as_str() {
                "0" | "unlimited" | "inf" => LinkChange::Rate(0),
                _ => LinkChange::Rate(parse_rate(v)?),
            },
            "delay" => LinkChange::Delay(parse_duration(v)?),
            "jitter" => {
                let d = parse_duration(v)?;
                LinkChange::Jitter((!d.is_zero()).then(|| Jitter::uniform(d)))
            }
            "queue" => {
                let q = parse_size(v)?;
                let q = usize::try_from(q).map_err(|_| format!("queue '{v}' is too large"))?;
                LinkChange::QueueBytes(q)
            }
            "loss" => LinkChange::Loss(parse_loss_model(v)?),
            "duplicate" | "dup" => LinkChange::Duplicate(parse_fraction(v)?),
            "reorder" => {
                let (p, hold) = v.split_once(':').ok_or_else(|| {
                    format!("bad reorder '{v}': use P:HOLD, e.g. reorder=1%:5ms")
                })?;
                let probability = parse_fraction(p)?;
                let extra_delay = parse_duration(hold)?;
                LinkChange::Reorder((probability > 0.0).then_some(Reorder {
                    probability,
                    extra_delay,
                }))
            }
            "mtu" => {
                if v.eq_ignore_ascii_case("none") {
                    LinkChange::Mtu(None)
                } else {
                    let m = parse_size(v)?;
                    if !(68..=65_535).contains(&m) {
                        return Err(format!("mtu '{v}' must be between 68 and 65535 bytes"));
                    }
                    LinkChange::Mtu(Some(m as usize))
                }
            }
            _ => {
                return Err(format!(
                    "unknown link parameter '{k}' (use rate, delay, jitter, queue, loss, duplicate, reorder, mtu)"
                ))
            }
        };
    Ok(change)
}

/// Parse a link spec into a configuration (defaults for what it omits).
pub fn parse_link_spec(spec: &str) -> Result<LinkConfig, String> {
    let mut c = LinkConfig::default();
    for change in parse_changes(spec)? {
        change.apply(&mut c);
    }
    c.validate()
        .map_err(|e| format!("bad link spec '{spec}': {e}"))?;
    Ok(c)
}

/// Which directions a schedule line applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// a→b only.
    AtoB,
    /// b→a only.
    BtoA,
    /// Both.
    Both,
}

/// One parsed schedule line.
pub type ScheduleEntry = (Duration, Which, Vec<LinkChange>);

/// Most lines a schedule may have.
const MAX_SCHEDULE_LINES: usize = 100_000;

/// Parse a schedule file's text.
pub fn parse_schedule(text: &str) -> Result<Vec<ScheduleEntry>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |m: String| format!("schedule line {}: {m}", i + 1);
        if out.len() >= MAX_SCHEDULE_LINES {
            return Err(err(format!("more than {MAX_SCHEDULE_LINES} changes")));
        }
        let mut words = line.split_whitespace();
        let at = parse_duration(words.next().unwrap_or("")).map_err(err)?;
        let rest: Vec<&str> = words.collect();
        let (which, spec) = match rest.first().map(|w| w.to_ascii_lowercase()) {
            Some(w) if w == "a2b" => (Which::AtoB, rest[1..].join(" ")),
            Some(w) if w == "b2a" => (Which::BtoA, rest[1..].join(" ")),
            Some(w) if w == "both" => (Which::Both, rest[1..].join(" ")),
            _ => (Which::Both, rest.join(" ")),
        };
        let changes = parse_changes(&spec).map_err(err)?;
        if changes.is_empty() {
            return Err(err("no change (expected e.g. `10s rate=5mbit`)".into()));
        }
        for c in &changes {
            c.validate().map_err(|e| err(e.to_string()))?;
        }
        out.push((at, which, changes));
    }
    Ok(out)
}

fn read_file(path: &Path, what: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

fn load_trace(path: &Option<PathBuf>) -> Result<Option<Arc<RateTrace>>, String> {
    path.as_ref()
        .map(|p| {
            let text = read_file(p, "trace file")?;
            RateTrace::parse(&text)
                .map(Arc::new)
                .map_err(|e| format!("{}: {e}", p.display()))
        })
        .transpose()
}

/// Build the emulator configuration from the command line (reads and
/// checks trace and schedule files).
pub fn netem_config(a: &RunArgs) -> Result<NetemConfig, String> {
    let mut config = NetemConfig::new(parse_link_spec(&a.a2b)?, parse_link_spec(&a.b2a)?, a.seed);
    config.a_to_b.trace = load_trace(&a.trace_a2b)?;
    config.b_to_a.trace = load_trace(&a.trace_b2a)?;
    if let Some(p) = &a.schedule {
        let entries = parse_schedule(&read_file(p, "schedule file")?)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        for (at, which, changes) in entries {
            let dirs: &mut [&mut DirectionConfig] = match which {
                Which::AtoB => &mut [&mut config.a_to_b],
                Which::BtoA => &mut [&mut config.b_to_a],
                Which::Both => &mut [&mut config.a_to_b, &mut config.b_to_a],
            };
            for d in dirs.iter_mut() {
                d.schedule.extend(changes.iter().map(|c| (at, c.clone())));
            }
        }
    }
    Ok(config)
}

/// One line describing a direction's configuration.
pub fn describe(d: &DirectionConfig) -> String {
    let c = &d.link;
    let rate = match &d.trace {
        Some(t) => format!(
            "trace ({} opportunities per {:?}, mean {:.3} Mb/s)",
            t.opportunities(),
            t.period(),
            t.mean_rate_bps() / 1e6
        ),
        None if c.rate_bps == 0 => "unlimited rate".to_owned(),
        None => format!("{:.3} Mb/s", c.rate_bps as f64 / 1e6),
    };
    let mut s = format!(
        "{rate}, delay {:?}, queue {} B, loss {:.3}%",
        c.delay,
        c.queue_bytes,
        c.loss.mean_loss() * 100.0
    );
    if let Some(j) = &c.jitter {
        s.push_str(&format!(", jitter {:?}", j.distribution));
    }
    if c.duplicate > 0.0 {
        s.push_str(&format!(", duplicate {}%", c.duplicate * 100.0));
    }
    if let Some(r) = &c.reorder {
        s.push_str(&format!(
            ", reorder {}% by {:?}",
            r.probability * 100.0,
            r.extra_delay
        ));
    }
    if let Some(m) = c.mtu {
        s.push_str(&format!(", mtu {m}"));
    }
    if !d.schedule.is_empty() {
        s.push_str(&format!(", {} scheduled changes", d.schedule.len()));
    }
    s
}

fn write_stats(path: &Path, stats: &NetemStats) -> Result<(), String> {
    let json = serde_json::to_string_pretty(stats).map_err(|e| e.to_string())?;
    // Write-then-rename so readers never see half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn print_stats(stats: &NetemStats) {
    for d in Direction::BOTH {
        let s = stats.dir(d);
        println!(
            "  {:?}: in {} pkts / {} B, out {} pkts / {} B, dropped queue {} loss {} mtu {} delay-line {} write {}, max backlog {} B, lateness mean {:.1} us max {:.1} us",
            d,
            s.packets_in,
            s.bytes_in,
            s.packets_out,
            s.bytes_out,
            s.dropped_queue,
            s.dropped_loss,
            s.dropped_mtu,
            s.dropped_delay_line,
            s.write_errors,
            s.max_backlog_bytes,
            s.mean_late_ns as f64 / 1e3,
            s.max_late_ns as f64 / 1e3
        );
    }
}

fn run_emulator(a: RunArgs) -> Result<(), String> {
    let config = netem_config(&a)?;
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let lab = Lab::open(&a.lab).map_err(|e| e.to_string())?;
    let (iif_a, iif_b) = lab.emulator_ifaces();
    println!(
        "netem in {}: a→b {}; b→a {}",
        lab.ns(Host::E).name().unwrap_or("?"),
        describe(&config.a_to_b),
        describe(&config.b_to_a)
    );
    let ns_handle =
        Path::new(hollywood_io::netns::NETNS_DIR).join(lab.ns(Host::E).name().unwrap_or_default());
    let netem =
        Netem::start(lab.ns(Host::E), &iif_a, &iif_b, config, None).map_err(|e| e.to_string())?;
    if let Some(p) = &a.stats_file {
        write_stats(p, &netem.stats())?;
    }
    println!("running; Ctrl-C or SIGTERM stops it");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let outcome: Result<&str, String> = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = term.recv() => return Ok("SIGTERM"),
                _ = int.recv() => return Ok("SIGINT"),
                _ = tick.tick() => {
                    if !netem.is_running() {
                        return Err("the emulator thread stopped".to_owned());
                    }
                    // The lab was deleted under us (e.g. `ip netns del`):
                    // nothing left to emulate, do not linger.
                    if !ns_handle.exists() {
                        return Ok("the lab's namespace was deleted");
                    }
                    if let Some(p) = &a.stats_file {
                        write_stats(p, &netem.stats())?;
                    }
                }
            }
        }
    });
    let stopped = netem.stop().map_err(|e| e.to_string());
    let why = outcome?;
    let stats = stopped?;
    if let Some(p) = &a.stats_file {
        write_stats(p, &stats)?;
    }
    if a.json {
        println!(
            "{}",
            crate::output::json(&stats).map_err(|e| e.to_string())?
        );
    } else {
        println!("stopped ({why}); counters:");
        print_stats(&stats);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_sim::LossModel;

    #[test]
    fn link_specs() {
        let c = parse_link_spec("rate=10mbit,delay=20ms,jitter=2ms,queue=64kB,loss=1%").unwrap();
        assert_eq!(c.rate_bps, 10_000_000);
        assert_eq!(c.delay, Duration::from_millis(20));
        assert_eq!(c.queue_bytes, 64_000);
        assert_eq!(c.loss, LossModel::Bernoulli(0.01));
        assert_eq!(c.jitter, Some(Jitter::uniform(Duration::from_millis(2))));
        let c = parse_link_spec("loss=gilbert:1%,30%,90%,delay=5ms").unwrap();
        let LossModel::GilbertElliott(g) = c.loss else {
            panic!("{c:?}")
        };
        assert_eq!((g.p, g.r, g.loss_bad), (0.01, 0.3, 0.9));
        assert_eq!(c.delay, Duration::from_millis(5));
        let c = parse_link_spec("reorder=2%:5ms,mtu=1400,duplicate=0.5%,rate=unlimited").unwrap();
        assert_eq!(c.reorder.unwrap().extra_delay, Duration::from_millis(5));
        assert_eq!(c.mtu, Some(1400));
        assert_eq!(c.rate_bps, 0);
        // Later keys override earlier ones.
        assert_eq!(
            parse_link_spec("delay=1ms,delay=2ms").unwrap().delay,
            Duration::from_millis(2)
        );
        assert_eq!(parse_link_spec("").unwrap(), LinkConfig::default());
    }

    #[test]
    fn bad_link_specs_say_what_is_wrong() {
        for (spec, needle) in [
            ("speed=10mbit", "unknown link parameter 'speed'"),
            ("10mbit", "not key=value"),
            (
                "rate=fast",
                "rate=fast: 'fast' does not start with a number",
            ),
            ("delay=20", "needs a unit"),
            ("loss=150%", "between 0% and 100%"),
            ("reorder=1%", "P:HOLD"),
            ("reorder=1%:soon", "soon"),
            ("mtu=20", "between 68"),
        ] {
            let e = parse_link_spec(spec).unwrap_err();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn schedules() {
        let s = parse_schedule(
            "# warm-up\n0s rate=10mbit\n10s a2b rate=5mbit,delay=40ms  # step\n\n12.5s b2a loss=1%\n",
        )
        .unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].0, Duration::from_secs(10));
        assert_eq!(s[1].1, Which::AtoB);
        assert_eq!(s[1].2.len(), 2);
        assert_eq!(s[2].1, Which::BtoA);
        assert_eq!(s[0].1, Which::Both);
        let e = parse_schedule("1s rate=1mbit\nsoon rate=2mbit\n").unwrap_err();
        assert!(e.starts_with("schedule line 2:"), "{e}");
        let e = parse_schedule("1s a2b\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("no change"), "{e}");
        let e = parse_schedule("1s duplicate=3\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn config_from_files() {
        let dir = std::env::temp_dir().join(format!("hwn-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("t.trace");
        std::fs::write(&trace, "1\n1\n2\n").unwrap();
        let sched = dir.join("s.txt");
        std::fs::write(&sched, "1s rate=5mbit\n").unwrap();
        let args = RunArgs {
            lab: "hw".into(),
            a2b: "delay=10ms".into(),
            b2a: String::new(),
            trace_a2b: Some(trace.clone()),
            trace_b2a: None,
            schedule: Some(sched),
            seed: 3,
            stats_file: None,
            json: false,
        };
        let c = netem_config(&args).unwrap();
        assert_eq!(c.a_to_b.trace.as_ref().unwrap().opportunities(), 3);
        assert_eq!(c.a_to_b.schedule.len(), 1);
        assert_eq!(c.b_to_a.schedule.len(), 1);
        std::fs::write(&trace, "1\nx\n").unwrap();
        let e = netem_config(&args).unwrap_err();
        assert!(e.contains("t.trace") && e.contains("trace line 2"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
