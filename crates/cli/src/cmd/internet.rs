//! `hollywood lab internet`: ffmpeg's live MPEG-TS from a client host
//! behind a NAT router, over a long lossy path, to a server host, through
//! `hollywood transmit` with the engine in host mode, the kernel-TCP
//! fallback (CUBIC, BBR) and SRT, each run as a user types the commands
//! (root). See `hollywood_lab::internet`.

use crate::units::{parse_duration, parse_fraction, parse_rate};
use clap::Args;
use hollywood_lab::internet::{self, InternetSpec, Transport};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hollywood lab internet`.
#[derive(Args, Debug)]
pub struct InternetArgs {
    /// Bottleneck rate each way (0 = unlimited).
    #[arg(long, default_value = "10mbit", value_parser = parse_rate)]
    rate: u64,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "80ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Bernoulli loss on the data direction (client → server).
    #[arg(long, default_value = "2%", value_parser = parse_fraction)]
    loss: f64,
    /// Seconds of live video.
    #[arg(long, default_value_t = 30)]
    seconds: u32,
    /// The stream's TS mux rate (the video gets 80 %).
    #[arg(long, default_value = "2mbit", value_parser = parse_rate)]
    stream: u64,
    /// A chunk is on time if delivered within this of being handed to the
    /// sender; also each chunk's lifetime (`transmit --latency`).
    #[arg(long, default_value = "180ms", value_parser = parse_duration)]
    deadline: Duration,
    /// SRT's latency. Default: deadline − RTT/2 − 15 ms
    /// (`hollywood_lab::compare::srt_latency_for`).
    #[arg(long, value_parser = parse_duration)]
    srt_latency: Option<Duration>,
    /// The receiving `transmit`'s reorder window (default: its own).
    #[arg(long, value_parser = parse_duration)]
    reorder: Option<Duration>,
    /// Emulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rows, comma-separated: engine, fallback-<cc>, fallback-<cc>-to-engine,
    /// srt, quic (default: engine,fallback-bbr,fallback-cubic,srt,
    /// fallback-cubic-to-engine,quic).
    #[arg(long, value_delimiter = ',', value_parser = Transport::parse)]
    transports: Vec<Transport>,
    /// Recordings, captures and each command's log, one folder per row.
    #[arg(long, default_value = "target/internet")]
    out: PathBuf,
    /// One JSON list.
    #[arg(long)]
    json: bool,
}

/// Run the command.
pub fn run(a: InternetArgs) -> Result<(), String> {
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    let lab = format!(
        "{}-{}-n",
        hollywood_lab::interop::LAB_PREFIX,
        std::process::id()
    );
    let bin = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
    let mut spec = InternetSpec::issue31(&lab, bin, a.out);
    spec.rate_bps = a.rate;
    spec.rtt = a.rtt;
    spec.loss = a.loss;
    spec.seconds = a.seconds;
    spec.stream_bps = a.stream;
    spec.deadline = a.deadline;
    spec.srt_latency = a.srt_latency;
    spec.reorder = a.reorder;
    spec.seed = a.seed;
    if !a.transports.is_empty() {
        spec.transports = a.transports;
    }
    let json = a.json;
    let rows = internet::run(&spec, |name| {
        if !json {
            eprintln!("running {name} ({} s of video)…", spec.seconds);
        }
    })
    .map_err(|e| e.to_string())?;
    if json {
        println!("{}", crate::output::json(&rows).map_err(|e| e.to_string())?);
    } else {
        println!(
            "path: client behind NAT (strict conntrack) → {} each way, RTT {:?}, loss {}% client→server → server; {} s of {} Mb/s MPEG-TS, deadline {:?}, SRT latency {:?}, seed {}",
            if spec.rate_bps == 0 { "unlimited".to_string() } else { format!("{} Mb/s", spec.rate_bps as f64 / 1e6) },
            spec.rtt,
            spec.loss * 100.0,
            spec.seconds,
            spec.stream_bps as f64 / 1e6,
            spec.deadline,
            spec.srt_latency(),
            spec.seed
        );
        print!("{}", internet::table(&rows));
        println!(
            "(rx-oo: handed over by the receiving protocol ahead of a missing chunk, put back in order by transmit's reorder buffer; ooo: left the receiver behind a later chunk; frames: decoded by ffprobe from the recording / from what was sent; retx, incons, holes: the client's data at the router)"
        );
    }
    Ok(())
}
