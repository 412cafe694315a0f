//! `hollywood compare`: one live stream over SRT, plain UDP, Linux TCP
//! (BBR, CUBIC) and TCP Hollywood on our engine (BBR, CUBIC), each on a
//! fresh lab with the same emulated path, in one table (root). See
//! `hollywood_lab::compare`.

use crate::units::{parse_duration, parse_fraction, parse_rate};
use clap::Args;
use hollywood_lab::compare::{self, CompareSpec, Contender};
use std::time::Duration;

/// Arguments of `hollywood compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Bottleneck rate each way (0 = unlimited).
    #[arg(long, default_value = "10mbit", value_parser = parse_rate)]
    rate: u64,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Bernoulli loss on the data direction a→b.
    #[arg(long, default_value = "2%", value_parser = parse_fraction)]
    loss: f64,
    /// Chunks to send.
    #[arg(long, default_value_t = 3000)]
    messages: u32,
    /// Bytes per chunk (1316 = seven MPEG-TS packets, SRT's usual).
    #[arg(long, default_value_t = 1316)]
    size: usize,
    /// Time between chunks (5 ms of 1316 B = 2.1 Mb/s).
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    interval: Duration,
    /// A chunk is on time if delivered within this of being handed over.
    #[arg(long, default_value = "180ms", value_parser = parse_duration)]
    deadline: Duration,
    /// SRT's latency (its receive buffer). Default: derived from the
    /// deadline and the path, deadline − RTT/2 − 15 ms, so SRT's fixed
    /// delivery point sits inside the deadline
    /// (`hollywood_lab::compare::srt_latency_for`; 115 ms at the defaults).
    #[arg(long, value_parser = parse_duration)]
    srt_latency: Option<Duration>,
    /// Run SRT once per latency, comma-separated (e.g. 80ms,115ms,200ms),
    /// one row each, instead of one run at --srt-latency or the rule.
    #[arg(long, value_delimiter = ',', value_parser = parse_duration, conflicts_with = "srt_latency")]
    srt_latency_sweep: Vec<Duration>,
    /// Emulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Transports, comma-separated: srt, udp, linux-<cc>, engine-<cc>
    /// (default: srt,linux-bbr,linux-cubic,engine-bbr,engine-cubic,udp).
    #[arg(long, value_delimiter = ',', value_parser = Contender::parse)]
    transports: Vec<Contender>,
    /// One JSON list.
    #[arg(long)]
    json: bool,
    /// Send a real MPEG-TS stream: a .ts file, or `testsrc` to encode one
    /// with ffmpeg (testsrc2, H.264, TS mux rate = --size × 8 / --interval,
    /// so chunks leave as `ffmpeg -re` sends them). Each transport's
    /// received stream is written to --ts-out and decoded with ffprobe.
    #[arg(long)]
    ts: Option<String>,
    /// Where the TS files go.
    #[arg(long, default_value = "target/compare-ts")]
    ts_out: std::path::PathBuf,
}

/// Run the command.
pub fn run(a: CompareArgs) -> Result<(), String> {
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let lab = format!(
        "{}-{}-c",
        hollywood_lab::interop::LAB_PREFIX,
        std::process::id()
    );
    let mut spec = CompareSpec::live_video(&lab);
    spec.rate_bps = a.rate;
    spec.rtt = a.rtt;
    spec.loss = a.loss;
    spec.messages = a.messages;
    spec.size = a.size;
    spec.interval = a.interval;
    spec.deadline = a.deadline;
    spec.srt_latency = a.srt_latency;
    spec.srt_latency_sweep = a.srt_latency_sweep;
    spec.seed = a.seed;
    if !a.transports.is_empty() {
        spec.contenders = a.transports;
    }
    if let Some(ts) = &a.ts {
        let source = if ts == "testsrc" {
            let rate = (a.size as f64 * 8.0 / a.interval.as_secs_f64()) as u64;
            // One second more than the run, so every chunk exists.
            let seconds = (a.interval.as_secs_f64() * f64::from(a.messages)).ceil() as u32 + 1;
            hollywood_lab::ts::TsSource::encode(&a.ts_out, seconds, rate, a.size)?
        } else {
            hollywood_lab::ts::TsSource::from_file(std::path::Path::new(ts), a.size, &a.ts_out)?
        };
        if !a.json {
            eprintln!(
                "TS source: {} chunks, {} video frames decodable",
                source.chunks.len(),
                source.source_frames
            );
        }
        spec.ts = Some(source);
    }
    let json = a.json;
    let rows = compare::run(&spec, |name| {
        if !json {
            eprintln!(
                "running {name} ({} chunks, {:?} apart)…",
                spec.messages, spec.interval
            );
        }
    })
    .map_err(|e| e.to_string())?;
    if json {
        println!("{}", crate::output::json(&rows).map_err(|e| e.to_string())?);
    } else {
        println!(
            "path: {} each way, RTT {:?}, loss {}% on a→b; {} chunks of {} B every {:?}, deadline {:?}, SRT latency {}, seed {}",
            if spec.rate_bps == 0 { "unlimited".to_string() } else { format!("{} Mb/s", spec.rate_bps as f64 / 1e6) },
            spec.rtt,
            spec.loss * 100.0,
            spec.messages,
            spec.size,
            spec.interval,
            spec.deadline,
            if spec.srt_latency_sweep.is_empty() {
                let l = spec.srt_latency();
                format!("{l:?} ({})", spec.srt_latency_rule(l))
            } else {
                let l: Vec<String> = spec
                    .srt_latency_sweep
                    .iter()
                    .map(|l| format!("{l:?}"))
                    .collect();
                format!("swept over {}", l.join(", "))
            },
            spec.seed
        );
        print!("{}", compare::table(&rows));
    }
    // A transport that cannot keep up (a sender blocked past the end of
    // the run) is a result, shown in the table; a corrupt or duplicate
    // delivery is a failure.
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.bad_deliveries > 0)
        .map(|r| {
            format!(
                "{}: {} corrupt or duplicate deliveries",
                r.transport, r.bad_deliveries
            )
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("failures: {}", bad.join("; ")))
    }
}
