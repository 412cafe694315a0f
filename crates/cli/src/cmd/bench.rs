//! `hollywood bench throughput|echo|all`: the engine over TUN against
//! Linux TCP on the same veth, measured in the same run (root only). See
//! `hollywood_lab::bench` and the "Benchmarks" section of docs/LAB.md.

use clap::{Args, ValueEnum};
use hollywood_lab::bench::{self, BenchOptions, OffloadModes, Which};

/// Which benchmark.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BenchWhich {
    /// Bulk throughput: iperf3 (kernel) vs engine → kernel sink and kernel → engine.
    Throughput,
    /// 160-byte message echo round trips: kernel client vs engine client.
    Echo,
    /// Both.
    All,
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
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

/// Run `hollywood bench`.
pub fn run(a: BenchArgs) -> Result<(), String> {
    let opts = BenchOptions {
        which: match a.which {
            BenchWhich::Throughput => Which::Throughput,
            BenchWhich::Echo => Which::Echo,
            BenchWhich::All => Which::All,
        },
        seconds: a.seconds,
        round_trips: a.round_trips,
        offload: match a.offload {
            BenchOffload::Off => OffloadModes::Off,
            BenchOffload::On => OffloadModes::On,
            BenchOffload::Both => OffloadModes::Both,
        },
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
