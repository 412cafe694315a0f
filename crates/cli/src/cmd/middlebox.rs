//! `hollywood middlebox`: thesis §5.3's deployability experiment in the
//! three-host lab (root): our always-inconsistent server (or the [TCP-video]
//! §7.2 sequence-gap design) in b, a Linux client in a dropping 5 % of
//! incoming segments, a middlebox between them. See docs/LAB.md
//! "Middlebox lab".

use crate::units::{parse_duration, parse_fraction, parse_size};
use clap::Args;
use hollywood_lab::middlebox::{self, Design, Kind, LossPoint, Report, Spec};
use std::path::PathBuf;

/// Arguments of `hollywood middlebox`.
#[derive(Args, Debug)]
pub struct MiddleboxArgs {
    /// none | conntrack | split-proxy | resegment | cache | payload-check |
    /// reset-on-mismatch | all
    #[arg(long, default_value = "none")]
    kind: String,
    /// ir (TCP Hollywood: every retransmission inconsistent) | seq-gap
    /// ([TCP-video] §7.2, experimental: every retransmission skipped) |
    /// standard (standard TCP: retransmissions carry the original bytes)
    #[arg(long, default_value = "ir")]
    design: String,
    /// Bytes the server sends.
    #[arg(long, default_value = "1MB", value_parser = parse_size)]
    bytes: u64,
    /// Drop probability of the loss rule (thesis §5.3: 5%).
    #[arg(long, default_value = "5%", value_parser = parse_fraction)]
    loss: f64,
    /// client (thesis: iptables INPUT in a, after the capture) | upstream
    /// (r's raw PREROUTING on b's side, before the middlebox)
    #[arg(long, default_value = "client")]
    loss_at: String,
    /// One-way delay of the emulated path.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    delay: std::time::Duration,
    /// Give up after this long.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// No new byte at the client for this long = stalled.
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    stall: std::time::Duration,
    /// Seed of the byte pattern and the emulator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Server port (§5.3 used 80, 4001 and 5001).
    #[arg(long, default_value_t = 4001)]
    port: u16,
    /// Keep the captures (client.pcap, server.pcap; per kind with --kind all).
    #[arg(long)]
    pcap_dir: Option<PathBuf>,
    /// One JSON object (a list with --kind all).
    #[arg(long)]
    json: bool,
}

fn row(r: &Report) -> String {
    format!(
        "{:<17} {:<8} {:<19} {:>9}/{:<9} {:>5} {:>6} {:>6} {:>8} {:>8} {:>5} {:>6}  {}",
        r.kind.name(),
        r.design.name(),
        r.outcome.name(),
        r.bytes_delivered,
        r.bytes_expected,
        r.induced_drops,
        r.retransmissions_sent,
        r.ir_on_client_wire,
        r.offsets_with_ir_bytes,
        r.offsets_with_original_bytes,
        r.resets,
        r.reconnects,
        r.failure
            .as_deref()
            .or(r.reconnect_reason.as_deref())
            .unwrap_or("")
    )
}

/// Run the command.
pub fn run(a: MiddleboxArgs) -> Result<(), String> {
    let kinds: Vec<Kind> = if a.kind == "all" {
        Kind::ALL.to_vec()
    } else {
        vec![Kind::parse(&a.kind).ok_or_else(|| {
            format!(
                "unknown --kind {:?}: use none, conntrack, split-proxy, resegment, cache, payload-check, reset-on-mismatch or all",
                a.kind
            )
        })?]
    };
    let design = Design::parse(&a.design).ok_or_else(|| {
        format!(
            "unknown --design {:?}: use ir, seq-gap or standard",
            a.design
        )
    })?;
    let loss_point = match a.loss_at.as_str() {
        "client" => LossPoint::Client,
        "upstream" => LossPoint::Upstream,
        o => return Err(format!("unknown --loss-at {o:?}: use client or upstream")),
    };
    if !hollywood_io::is_root() {
        return Err("hollywood middlebox needs root (namespaces, TUN, iptables, tshark)".into());
    }
    let _ = hollywood_io::NetNs::remove_stale("hwm");
    let mut reports = Vec::new();
    for kind in &kinds {
        let mut s = Spec::new(&format!("hwm-{}", std::process::id()), *kind, design);
        s.bytes = usize::try_from(a.bytes).map_err(|_| "--bytes too large".to_string())?;
        s.loss = a.loss;
        s.loss_point = loss_point;
        s.delay = a.delay;
        s.timeout = a.timeout;
        s.stall = a.stall;
        s.seed = a.seed;
        s.port = a.port;
        s.keep_pcaps = a.pcap_dir.as_ref().map(|d| {
            if kinds.len() > 1 {
                d.join(kind.name())
            } else {
                d.clone()
            }
        });
        let r = middlebox::run(&s).map_err(|e| format!("{}: {e}", kind.name()))?;
        if !a.json {
            if reports.is_empty() {
                println!(
                    "{:<17} {:<8} {:<19} {:>19} {:>5} {:>6} {:>6} {:>8} {:>8} {:>5} {:>6}",
                    "middlebox",
                    "design",
                    "outcome",
                    "delivered/sent",
                    "drops",
                    "rtx",
                    "IR@cl",
                    "IRbytes",
                    "origB",
                    "RSTs",
                    "reconn"
                );
            }
            println!("{}", row(&r));
        }
        reports.push(r);
    }
    if a.json {
        let out = if reports.len() == 1 {
            crate::output::json(&reports[0])
        } else {
            crate::output::json(&reports)
        }
        .map_err(|e| e.to_string())?;
        println!("{out}");
    }
    Ok(())
}
