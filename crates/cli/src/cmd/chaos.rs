//! `hollywood sim chaos`: many messages through everything a path can do
//! to them, checking the invariants that must hold whatever happens.
//!
//! The messages are split into segments (one connection each, run in
//! parallel). Each segment draws its conditions from the seed: a
//! deployment (standard TCP, Hollywood sender only, receiver only, both:
//! thesis §4.4), a rate that alternates with a second one during the run,
//! an RTT, random or burst (Gilbert) loss, reordering, duplication,
//! corruption under a valid TCP checksum, a resegmenting and/or caching
//! middlebox (thesis §4.5), message sizes and lifetimes. Checked over all
//! of them:
//!
//! - `corrupt_delivered`: messages handed to the application with wrong
//!   bytes (the receiver checks every byte): 0.
//! - `duplicates_delivered`: a message handed up twice: 0.
//! - `seq_holes_on_wire`: a data segment that starts above every byte sent
//!   before it (the TCP wire image has no gaps, thesis §4.2): 0.
//! - `panics`: 0 (each segment runs under `catch_unwind`).
//! - `unaccounted`: messages neither delivered nor reported expired by
//!   the sender, beyond those a corrupted segment explains (a frame the
//!   receiver rejected on its CRC32C; the sender saw it acknowledged): 0.
//! - `peak_rss_mb`: the process's peak resident memory (VmHWM), within
//!   `--max-rss-mb`.

use clap::Args;
use hollywood_media::rng::SplitMix;
use hollywood_media::scenario::Impairments;
use hollywood_media::{MessagesScenario, Transport};
use hollywood_sim::{GilbertElliott, LossModel, MiddleboxKind};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Arguments of `hollywood sim chaos`.
#[derive(Args, Debug)]
pub struct ChaosArgs {
    /// Messages in all.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Seed of the conditions and of every run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Messages per segment (one connection each).
    #[arg(long, default_value_t = 25_000)]
    per_segment: u64,
    /// Fail if the process's peak resident memory exceeds this (MiB).
    #[arg(long, default_value_t = 2048)]
    max_rss_mb: u64,
    /// Run only these segments (comma-separated indices, from a failed
    /// run's report) to reproduce them.
    #[arg(long, value_delimiter = ',')]
    only: Vec<usize>,
    /// Capture the run's packets to this pcap file (with a single
    /// `--only` segment), to study a failure in Wireshark.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// One segment's conditions.
#[derive(Debug, Clone, Serialize)]
struct Conditions {
    transport: &'static str,
    middlebox: &'static str,
    rate_bps: u64,
    /// The rate alternates with `rate_bps × rate_factor` every `swing_s`.
    rate_factor: f64,
    swing_s: f64,
    rtt_ms: f64,
    loss: String,
    reorder: f64,
    duplicate: f64,
    corrupt: f64,
    size: usize,
    interval_us: f64,
    lifetime_ms: Option<f64>,
    messages: u32,
    seed: u64,
}

/// What one segment gave.
#[derive(Debug, Clone, Default, Serialize)]
struct Outcome {
    delivered: u64,
    expired: u64,
    missing: u64,
    /// Of the missing: a middlebox changed bytes of their frames.
    lost_to_boxes: u64,
    crc_rejected: u64,
    /// Frames the receiver's deframer refused besides bad CRCs: its
    /// exactly-once record could not vouch for them, or their id was
    /// delivered at another position (`hollywood_msg::DeframerStats`).
    dedup_refused: u64,
    repeated_ids: u64,
    corrupted_segments: u64,
    corrupt_delivered: u64,
    duplicates_delivered: u64,
    seq_holes_on_wire: u64,
    unaccounted: u64,
    /// The first few unaccounted messages (indices in sending order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unaccounted_messages: Vec<usize>,
    panicked: bool,
    error: Option<String>,
}

#[derive(Serialize)]
struct Segment {
    index: usize,
    conditions: Conditions,
    outcome: Outcome,
}

#[derive(Serialize)]
struct Report {
    messages: u64,
    segments: usize,
    seed: u64,
    delivered: u64,
    expired: u64,
    lost_to_boxes: u64,
    crc_rejected: u64,
    corrupted_segments: u64,
    corrupt_delivered: u64,
    duplicates_delivered: u64,
    seq_holes_on_wire: u64,
    panics: u64,
    unaccounted: u64,
    errors: u64,
    peak_rss_mb: f64,
    wall_s: f64,
    ok: bool,
    runs: Vec<Segment>,
}

/// The conditions' draws.
struct Draw(SplitMix);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.0.unit()
    }
    fn unit(&mut self) -> f64 {
        self.0.unit()
    }
}

fn conditions(seed: u64, index: usize, messages: u32) -> (Conditions, MessagesScenario) {
    let mut d = Draw(SplitMix(
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ index as u64,
    ));
    // Every deployment and middlebox in turn, the rest drawn.
    let transport = Transport::ALL[index % 4];
    let middlebox = [
        MiddleboxKind::None,
        MiddleboxKind::Resegment,
        MiddleboxKind::Cache,
        MiddleboxKind::ResegmentCache,
    ][(index / 4) % 4];
    let rate_bps = d.pick(&[2_000_000u64, 5_000_000, 10_000_000, 20_000_000, 50_000_000]);
    let rate_factor = d.pick(&[0.3, 0.5, 2.0]);
    let swing = Duration::from_millis(d.pick(&[500u64, 2_000, 5_000]));
    let rtt = Duration::from_millis(d.pick(&[10u64, 40, 100, 250]));
    let (loss, loss_name) = if d.unit() < 0.5 {
        let p = d.range(0.002, 0.05);
        (
            LossModel::Bernoulli(p),
            format!("random {:.2} %", p * 100.0),
        )
    } else {
        // Bursts: a Bad state of 1/r packets on average, entered with
        // probability p per packet, losing `bad` of its packets. Not all
        // of them: the chain moves per packet, so a Bad state that loses
        // everything traps a sender in RTO backoff (one packet per
        // timeout) for minutes, an outage rather than a burst.
        let (p, r, bad) = (d.range(0.001, 0.01), d.range(0.2, 0.6), d.range(0.3, 0.7));
        (
            LossModel::GilbertElliott(GilbertElliott {
                p,
                r,
                loss_good: 0.0,
                loss_bad: bad,
            }),
            format!("Gilbert-Elliott p={p:.4} r={r:.2} bad={bad:.2}"),
        )
    };
    let reorder = d.pick(&[0.0, 0.01, 0.05]);
    let duplicate = d.pick(&[0.0, 0.005, 0.02]);
    let corrupt = d.pick(&[0.0, 0.0, 0.001, 0.01]);
    let size = d.pick(&[40usize, 160, 400, 1200, 3000]);
    // Offered load: 30-60 % of what the path can carry: the lower of the
    // two rates, and what a loss-based TCP keeps through this loss
    // (Mathis et al.: 1.22 MSS / (RTT sqrt(p))); more and a reliable
    // stream could never finish.
    let low = (rate_bps as f64 * rate_factor).min(rate_bps as f64);
    let mathis = 1.22 * 1448.0 * 8.0 / (rtt.as_secs_f64() * loss.mean_loss().max(1e-4).sqrt());
    let load = d.range(0.3, 0.6);
    let interval = Duration::from_secs_f64((size as f64 + 30.0) * 8.0 / (low.min(mathis) * load));
    let lifetime = match d.next() % 3 {
        0 => None,
        1 => Some(rtt * 2 + Duration::from_millis(100)),
        _ => Some(rtt + Duration::from_millis(d.pick(&[20u64, 60, 200]))),
    };
    let run_seed = d.next();
    let sc = MessagesScenario {
        rate_bps,
        uplink_bps: rate_bps,
        rtt,
        loss,
        queue_bytes: ((rate_bps as f64 * rtt.as_secs_f64() / 8.0) as usize).max(30_000),
        count: messages,
        size,
        interval,
        lifetime,
        transport: transport.into(),
        middlebox,
        seed: run_seed,
        impair: Impairments {
            reorder: (reorder > 0.0).then_some((reorder, Duration::from_millis(5))),
            duplicate,
            corrupt,
            // Forgery is an attack, not chaos: `sim messages --forge`.
            forge: 0.0,
            rate_swing: Some((swing, rate_factor)),
        },
        ..MessagesScenario::default()
    };
    let c = Conditions {
        transport: transport.name(),
        middlebox: match middlebox {
            MiddleboxKind::None => "none",
            MiddleboxKind::Resegment => "resegment",
            MiddleboxKind::Cache => "cache",
            MiddleboxKind::ResegmentCache => "resegment-cache",
        },
        rate_bps,
        rate_factor,
        swing_s: swing.as_secs_f64(),
        rtt_ms: rtt.as_secs_f64() * 1e3,
        loss: loss_name,
        reorder,
        duplicate,
        corrupt,
        size,
        interval_us: interval.as_secs_f64() * 1e6,
        lifetime_ms: lifetime.map(|l| l.as_secs_f64() * 1e3),
        messages,
        seed: run_seed,
    };
    (c, sc)
}

fn run_one(sc: &MessagesScenario) -> Outcome {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sc.run()));
    let mut run = match r {
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            return Outcome {
                panicked: true,
                error: Some(msg),
                ..Outcome::default()
            };
        }
        Ok(Err(e)) => {
            return Outcome {
                error: Some(e),
                ..Outcome::default()
            }
        }
        Ok(Ok(run)) => run,
    };
    // A sender still closing at the time limit (its last FIN or ACK in
    // RTO backoff) fails nothing by itself: what it did not deliver counts
    // as missing below.
    if run
        .error
        .as_deref()
        .is_some_and(|e| e.starts_with("the sender had not finished"))
    {
        run.error = None;
    }
    let delivered = run.arrival.iter().filter(|a| a.is_some()).count() as u64;
    let expired = run
        .arrival
        .iter()
        .zip(&run.expired)
        .filter(|(a, &e)| a.is_none() && e)
        .count() as u64;
    let missing = run.arrival.len() as u64 - delivered - expired;
    let altered = |i: usize| run.altered_by_box.get(i).copied().unwrap_or(false);
    let lost_to_boxes = (0..run.arrival.len())
        .filter(|&i| run.arrival[i].is_none() && !run.expired[i] && altered(i))
        .count() as u64;
    let unaccounted_messages = (0..run.arrival.len())
        .filter(|&i| run.arrival[i].is_none() && !run.expired[i] && !altered(i))
        .take(10)
        .collect();
    Outcome {
        delivered,
        expired,
        missing,
        lost_to_boxes,
        crc_rejected: run.crc_rejected,
        dedup_refused: run.deframer.dedup_refused,
        repeated_ids: run.deframer.repeated_ids,
        corrupted_segments: run.corrupted_segments,
        corrupt_delivered: run.corrupt_delivered,
        duplicates_delivered: run.duplicates_delivered,
        seq_holes_on_wire: run.wire.seq_holes,
        // A middlebox that changed a frame's bytes (corruption: the frame
        // fails its CRC32C; a cache replaying old bytes over an
        // inconsistent retransmission, thesis §4.5) can lose it while the
        // sender saw it acknowledged; nothing else may.
        unaccounted: missing - lost_to_boxes,
        unaccounted_messages,
        panicked: false,
        error: run.error.clone(),
    }
}

/// Peak resident memory of this process (MiB), from /proc.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

pub fn run(a: ChaosArgs) -> Result<(), String> {
    if a.messages == 0 || a.messages > 100_000_000 {
        return Err("--messages: use 1 to 10^8".into());
    }
    if a.per_segment < 100 || a.per_segment > 1_000_000 {
        return Err("--per-segment: use 100 to 10^6".into());
    }
    let started = Instant::now();
    let segments = a.messages.div_ceil(a.per_segment) as usize;
    if let Some(&bad) = a.only.iter().find(|&&i| i >= segments) {
        return Err(format!("--only {bad}: there are {segments} segments"));
    }
    if a.pcap.is_some() && a.only.len() != 1 {
        return Err("--pcap: name one segment with --only".into());
    }
    let plans: Vec<(usize, Conditions, MessagesScenario)> = (0..segments)
        .filter(|i| a.only.is_empty() || a.only.contains(i))
        .map(|i| {
            let n = (a.messages - i as u64 * a.per_segment).min(a.per_segment) as u32;
            let (c, mut sc) = conditions(a.seed, i, n);
            sc.pcap.clone_from(&a.pcap);
            (i, c, sc)
        })
        .collect();
    // Keep panics of a segment from printing over the report; they are
    // counted and reported.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcomes: Vec<Outcome> = {
        use rayon::prelude::*;
        plans.par_iter().map(|(_, _, sc)| run_one(sc)).collect()
    };
    std::panic::set_hook(hook);
    let sum = |f: &dyn Fn(&Outcome) -> u64| outcomes.iter().map(f).sum::<u64>();
    let panics = sum(&|o| u64::from(o.panicked));
    let errors = sum(&|o| u64::from(o.error.is_some() && !o.panicked));
    let peak = peak_rss_mb();
    let r = Report {
        messages: a.messages,
        segments,
        seed: a.seed,
        delivered: sum(&|o| o.delivered),
        expired: sum(&|o| o.expired),
        lost_to_boxes: sum(&|o| o.lost_to_boxes),
        crc_rejected: sum(&|o| o.crc_rejected),
        corrupted_segments: sum(&|o| o.corrupted_segments),
        corrupt_delivered: sum(&|o| o.corrupt_delivered),
        duplicates_delivered: sum(&|o| o.duplicates_delivered),
        seq_holes_on_wire: sum(&|o| o.seq_holes_on_wire),
        panics,
        unaccounted: sum(&|o| o.unaccounted),
        errors,
        peak_rss_mb: peak,
        wall_s: started.elapsed().as_secs_f64(),
        ok: false,
        runs: plans
            .into_iter()
            .map(|(i, c, _)| (i, c))
            .zip(outcomes)
            .map(|((index, conditions), outcome)| Segment {
                index,
                conditions,
                outcome,
            })
            .collect(),
    };
    let ok = r.corrupt_delivered == 0
        && r.duplicates_delivered == 0
        && r.seq_holes_on_wire == 0
        && r.panics == 0
        && r.unaccounted == 0
        && r.errors == 0
        && (peak.is_nan() || peak <= a.max_rss_mb as f64);
    let r = Report { ok, ..r };
    if a.json {
        println!("{}", crate::output::json(&r)?);
    } else {
        println!(
            "chaos: {} messages in {} segments (seed {}), {:.1} s, peak RSS {:.0} MiB",
            r.messages, r.segments, r.seed, r.wall_s, r.peak_rss_mb
        );
        println!(
            "delivered {}  expired {}  lost where a middlebox changed bytes {}  corrupted segments {}  CRC-rejected frames {}",
            r.delivered, r.expired, r.lost_to_boxes, r.corrupted_segments, r.crc_rejected
        );
        println!(
            "corrupt_delivered {}  duplicates_delivered {}  seq_holes_on_wire {}  panics {}  unaccounted {}  errors {}",
            r.corrupt_delivered,
            r.duplicates_delivered,
            r.seq_holes_on_wire,
            r.panics,
            r.unaccounted,
            r.errors
        );
        for s in r.runs.iter().filter(|s| {
            s.outcome.error.is_some()
                || s.outcome.unaccounted > 0
                || s.outcome.corrupt_delivered > 0
                || s.outcome.duplicates_delivered > 0
                || s.outcome.seq_holes_on_wire > 0
        }) {
            println!(
                "FAILED segment {} (--only {}): {:?}\n   -> {:?}",
                s.index, s.index, s.conditions, s.outcome
            );
        }
    }
    if ok {
        Ok(())
    } else {
        Err("an invariant failed (see above)".into())
    }
}
