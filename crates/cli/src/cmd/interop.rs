//! `hollywood interop`: partial deployments on real packets (thesis §4.4,
//! root): our engine or Linux at either end of a lossy emulated path, the
//! wire audited from a tshark capture. See `hollywood_lab::interop` and
//! docs/LAB.md "Interop matrix".

use crate::units::{parse_duration, parse_fraction, parse_rate};
use clap::Args;
use hollywood_lab::interop::{self, End, InteropReport, InteropSpec};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hollywood interop`.
#[derive(Args, Debug)]
pub struct InteropArgs {
    /// Sender in host a: engine (TCP Hollywood: IR + OOO config) | kernel (Linux, TCP_NODELAY).
    #[arg(long, default_value = "engine")]
    sender: String,
    /// Receiver in host b: engine (out-of-order delivery on) | kernel.
    #[arg(long, default_value = "engine")]
    receiver: String,
    /// Run all four combinations and print a table (ignores --sender/--receiver).
    #[arg(long)]
    all: bool,
    /// Round-trip propagation delay (half each way).
    #[arg(long, default_value = "40ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Bernoulli loss on the data direction a→b (the ACK path is lossless).
    #[arg(long, default_value = "5%", value_parser = parse_fraction)]
    loss: f64,
    /// Messages to send.
    #[arg(long, default_value_t = 2000)]
    messages: u32,
    /// Lifetime of every message.
    #[arg(long, default_value = "60ms", value_parser = parse_duration)]
    lifetime: Duration,
    /// Payload bytes per message (≥ 4).
    #[arg(long, default_value_t = 160)]
    size: usize,
    /// Interval between messages.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    interval: Duration,
    /// Link rate each way (default: unlimited).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// Emulator seed (the loss draws).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Congestion control of the Linux ends (the namespaces'
    /// net.ipv4.tcp_congestion_control, e.g. cubic); default: the system's.
    #[arg(long)]
    kernel_cc: Option<String>,
    /// Congestion control of the engine ends: newreno, cubic or bbr.
    #[arg(long, default_value = "cubic", value_parser = hollywood_tcp::CcAlgorithm::parse)]
    engine_cc: hollywood_tcp::CcAlgorithm,
    /// Keep the captures here (interop-<sender>-<receiver>.pcap).
    #[arg(long)]
    pcap_dir: Option<PathBuf>,
    /// Secure mode at both ends (docs/SECURITY.md): TLS 1.3 handshake,
    /// every message sealed; the wire audit reads frame ids.
    #[arg(long)]
    secure: bool,
    /// Secure mode: the server's certificate (PEM or DER; default: a
    /// fresh self-signed one). The client trusts exactly this one.
    #[arg(long, requires = "key", requires = "secure")]
    cert: Option<PathBuf>,
    /// Secure mode: the certificate's PKCS#8 private key (PEM or DER).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Secure mode: the name the certificate is checked against.
    #[arg(long, default_value = hollywood_transport::secure::SERVER_NAME, requires = "cert")]
    server_name: String,
    /// One JSON object (a list with --all).
    #[arg(long)]
    json: bool,
}

fn end(s: &str) -> Result<End, String> {
    End::parse(s).ok_or_else(|| format!("unknown end '{s}': use engine or kernel"))
}

/// Run the command.
pub fn run(a: InteropArgs) -> Result<(), String> {
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    if a.size < hollywood_lab::workload::MIN_PAYLOAD {
        return Err(format!(
            "--size must be at least {} bytes (the message id)",
            hollywood_lab::workload::MIN_PAYLOAD
        ));
    }
    if a.messages == 0 {
        return Err("--messages must be at least 1".into());
    }
    // Read the certificate before any lab is built: a bad file fails fast.
    let identity = match (&a.cert, &a.key) {
        (Some(c), Some(k)) => Some(
            hollywood_transport::secure::Identity::from_files(c, k, &a.server_name)
                .map_err(|e| format!("--cert/--key: {e}"))?,
        ),
        _ => None,
    };
    let pairs: Vec<(End, End)> = if a.all {
        interop::MATRIX.to_vec()
    } else {
        vec![(end(&a.sender)?, end(&a.receiver)?)]
    };
    let mut reports: Vec<InteropReport> = Vec::new();
    for (i, (s, r)) in pairs.into_iter().enumerate() {
        let lab = format!("{}-{}-{i}", interop::LAB_PREFIX, std::process::id());
        let mut spec = InteropSpec::new(s, r, &lab);
        spec.rtt = a.rtt;
        spec.loss = a.loss;
        spec.messages = a.messages;
        spec.lifetime = a.lifetime;
        spec.size = a.size;
        spec.interval = a.interval;
        spec.rate_bps = a.rate.unwrap_or(0);
        spec.seed = a.seed;
        spec.pcap_dir = a.pcap_dir.clone();
        spec.kernel_cc = a.kernel_cc.clone();
        spec.engine_cc = a.engine_cc;
        spec.secure = a.secure;
        spec.identity = identity.clone();
        if !a.json {
            eprintln!(
                "running {} → {} ({} messages, {:?} apart)…",
                s.name(),
                r.name(),
                a.messages,
                a.interval
            );
        }
        let report =
            interop::run(&spec).map_err(|e| format!("{} → {}: {e}", s.name(), r.name()))?;
        reports.push(report);
    }
    if a.json {
        let out = if a.all {
            crate::output::json(&reports)
        } else {
            crate::output::json(&reports[0])
        };
        println!("{}", out.map_err(|e| e.to_string())?);
    } else {
        println!(
            "path: RTT {:?}, loss {}% on a→b, rate {}; {} messages of {} B every {:?}, lifetime {:?}, seed {}",
            a.rtt,
            a.loss * 100.0,
            a.rate.map_or("unlimited".to_string(), |r| format!("{r} bit/s")),
            a.messages,
            a.size,
            a.interval,
            a.lifetime,
            a.seed
        );
        for r in &reports {
            print!("{}", r.to_text());
        }
        if a.all {
            println!();
            print!("{}", interop::table(&reports));
        }
    }
    let bad: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.violations()
                .into_iter()
                .map(move |v| format!("{} → {}: {v}", r.sender.name(), r.receiver.name()))
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("invariants violated: {}", bad.join("; ")))
    }
}
