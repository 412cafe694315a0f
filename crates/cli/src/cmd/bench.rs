//! `hollywood bench throughput|echo|all`: the engine over TUN against
//! Linux TCP on the same veth, measured in the same run (root only). See
//! `hollywood_lab::bench` and the "Benchmarks" section of docs/LAB.md.
//! `hollywood bench relay`: subscribers per relay process, against SRT
//! (`hollywood_lab::relaybench`, docs/RELAY-BENCH.md).

use crate::units::{parse_duration, parse_fraction};
use clap::{Args, ValueEnum};
use hollywood_lab::bench::{self, BenchOptions, OffloadModes, Switch, Which};
use hollywood_lab::relaybench::{self, RelayBenchSpec};
use std::path::PathBuf;
use std::time::Duration;

/// Which benchmark.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BenchWhich {
    /// Bulk throughput: iperf3 (kernel) vs engine → kernel sink and kernel → engine.
    Throughput,
    /// 160-byte message echo round trips: kernel client vs engine client.
    Echo,
    /// Both.
    All,
    /// The relay: on-time share, CPU per delivered Gb and RSS per
    /// subscriber as the subscriber count grows, SRT beside it.
    Relay,
}

/// Engine TUN offload settings to run.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BenchOffload {
    /// Plain TUN only.
    Off,
    /// IFF_VNET_HDR with checksum/TSO offloads only.
    On,
    /// Both (before/after in one run).
    Both,
}

/// A switch of the engine's TUN host (writer thread, whole received
/// super-packets).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BenchSwitch {
    /// The host's default (writer thread: on with offloads on a machine
    /// with more than one CPU; whole super-packets: on).
    Default,
    /// Off.
    Off,
    /// On.
    On,
    /// Both (before/after in one run).
    Both,
}

impl From<BenchSwitch> for Switch {
    fn from(s: BenchSwitch) -> Switch {
        match s {
            BenchSwitch::Default => Switch::Default,
            BenchSwitch::Off => Switch::Off,
            BenchSwitch::On => Switch::On,
            BenchSwitch::Both => Switch::Both,
        }
    }
}

/// Arguments of `hollywood bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(value_enum)]
    which: BenchWhich,
    /// Seconds per throughput run (whole seconds, as iperf3 -t).
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Timed echo round trips per client (after 200 untimed ones).
    #[arg(long, default_value_t = 20_000)]
    round_trips: usize,
    /// Run the engine with TUN offloads off, on, or both.
    #[arg(long, value_enum, default_value = "both")]
    offload: BenchOffload,
    /// Write the engine's TUN frames from a thread of their own (default:
    /// the host's choice), or run both.
    #[arg(long, value_enum, default_value = "default")]
    tx_thread: BenchSwitch,
    /// Give received TCP super-packets to the engine whole, as Linux's GRO
    /// does (default: on), or cut into segments; or run both. Offloads
    /// only.
    #[arg(long, value_enum, default_value = "default")]
    rx_whole: BenchSwitch,
    /// throughput: also run `--streams` parallel flows per direction over
    /// a multi-queue TUN device with 1 queue and with this many (one
    /// engine worker thread per queue), in the same run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    queues: u16,
    /// throughput: parallel flows of the multi-queue runs (any value
    /// above 1 turns them on even with `--queues 1`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1000))]
    streams: u16,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    /// relay: subscriber counts, stepped until the smallest on-time share
    /// is below 99 %.
    #[arg(long, value_delimiter = ',', default_value = "10,100,250,500,750,1000")]
    subscribers: Vec<usize>,
    /// relay: run every count, even past saturation.
    #[arg(long)]
    all_counts: bool,
    /// relay: the measured part, after every player joined.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    steady: Duration,
    /// relay: round-trip time.
    #[arg(long, default_value = "60ms", value_parser = parse_duration)]
    rtt: Duration,
    /// relay: loss on the data direction (relay → players).
    #[arg(long, default_value = "1%", value_parser = parse_fraction)]
    loss: f64,
    /// relay: end-to-end deadline (on-time bound).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    deadline: Duration,
    /// relay: players' candidates (quic, kernel, hollywood; default racing).
    #[arg(long)]
    transport: Option<String>,
    /// relay: SRT rows for counts up to this (0: none).
    #[arg(long, default_value_t = 100)]
    srt_max: usize,
    /// relay: no loopback-only rows.
    #[arg(long)]
    no_loopback: bool,
    /// relay: clean players beside the one lossy player (0: no lossy run).
    #[arg(long, default_value_t = 99)]
    lossy_clean: usize,
    /// relay: the lossy player's extra loss.
    #[arg(long, default_value = "10%", value_parser = parse_fraction)]
    lossy_loss: f64,
    /// relay: the relay's worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// relay: logs, one folder per run.
    #[arg(long, default_value = "target/relay-bench")]
    out: PathBuf,
    /// relay: also write the rows as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
}

fn run_relay(a: BenchArgs) -> Result<(), String> {
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let lab = format!(
        "{}-{}-r",
        hollywood_lab::interop::LAB_PREFIX,
        std::process::id()
    );
    let bin = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
    let mut spec = RelayBenchSpec::issue32(&lab, bin, a.out);
    spec.subscribers = a.subscribers;
    spec.stop_at_saturation = !a.all_counts;
    spec.steady = a.steady;
    spec.rtt = a.rtt;
    spec.loss = a.loss;
    spec.deadline = a.deadline;
    spec.transport = a.transport;
    spec.srt_max = a.srt_max;
    spec.loopback = !a.no_loopback;
    spec.lossy_clean = a.lossy_clean;
    spec.lossy_loss = a.lossy_loss;
    spec.workers = a.workers;
    let report = relaybench::run(&spec, |what| eprintln!("bench relay: {what}"))
        .map_err(|e| e.to_string())?;
    if let Some(p) = &a.csv {
        std::fs::write(p, relaybench::csv(&report)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if a.json {
        println!(
            "{}",
            crate::output::json(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", relaybench::table(&report));
    }
    Ok(())
}

/// Run `hollywood bench`.
pub fn run(a: BenchArgs) -> Result<(), String> {
    if matches!(a.which, BenchWhich::Relay) {
        return run_relay(a);
    }
    let opts = BenchOptions {
        which: match a.which {
            BenchWhich::Throughput => Which::Throughput,
            BenchWhich::Echo => Which::Echo,
            BenchWhich::All | BenchWhich::Relay => Which::All,
        },
        seconds: a.seconds,
        round_trips: a.round_trips,
        offload: match a.offload {
            BenchOffload::Off => OffloadModes::Off,
            BenchOffload::On => OffloadModes::On,
            BenchOffload::Both => OffloadModes::Both,
        },
        tx_thread: a.tx_thread.into(),
        rx_whole: a.rx_whole.into(),
        queues: usize::from(a.queues),
        streams: usize::from(a.streams),
    };
    let report = bench::run(&opts).map_err(|e| e.to_string())?;
    if a.json {
        println!(
            "{}",
            crate::output::json(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}
