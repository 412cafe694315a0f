//! The VoIP application's results (thesis §5.1.2, Figs. 5.4–5.16): the JSON
//! summary of one call ([`VoipReport`]), its per-message CSV and the
//! two-panel per-message plot. Used by `hollywood voip`, `hollywood demo`
//! and the chapter 5 reproduction ([`crate::voip`]).

use crate::plot::{self, Chart, HLine, Rgb, Series, Style};
use crate::stats::Percentiles;
use hollywood_media::{Outcome, TransportKind, VoipRecord, VoipRun, VoipScenario};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// The JSON summary of one call.
#[derive(Serialize, Debug, Clone)]
pub struct VoipReport {
    /// Transport name.
    pub transport: &'static str,
    /// Congestion control of the TCP engines (null for UDP).
    pub cc: Option<&'static str>,
    /// Messages in the call.
    pub messages: u64,
    /// Played on time (arrived no later than their playout instant): the
    /// headline figure.
    pub on_time: u64,
    /// What a transport that loses only the packets the network dropped and
    /// adds no delay beyond the path's would play.
    pub oracle_on_time: u64,
    /// Messages whose first transmission the downlink dropped.
    pub first_tx_dropped: u64,
    /// Arrived after their playout instant.
    pub late: u64,
    /// Never delivered to the application.
    pub never_arrived: u64,
    /// Lost to the application: late + never arrived.
    pub app_lost: u64,
    /// Played out.
    pub played: u64,
    /// app_lost / first_tx_dropped (null when nothing was dropped).
    pub amplification: Option<f64>,
    /// Lost messages whose own first transmission was not dropped
    /// (head-of-line-blocking tail, or wrongly replaced).
    pub collateral_lost: u64,
    /// Inconsistent retransmissions the sender made.
    pub ir_sent: u64,
    /// Expired events reported to the sending application.
    pub expired_events: u64,
    /// Retransmitted segments on the wire.
    pub retransmissions: u64,
    /// The TCP sender's smoothed RTT at the end of the call (ms; null for UDP).
    pub srtt_ms: Option<f64>,
    /// Send → arrival at the application, delivered messages (ms).
    pub transport_delay_ms: Percentiles,
    /// Smallest buffered time (playout − arrival, ms; negative = late).
    pub min_buffered_ms: f64,
    /// Round-trip time (ms).
    pub rtt_ms: f64,
    /// Playout delay (ms).
    pub playout_ms: f64,
    /// Lifetime given to a TCP Hollywood sender (ms).
    pub lifetime_ms: f64,
    /// Messages delivered with wrong content (must be 0).
    pub corrupt_delivered: u64,
    /// Messages delivered twice (must be 0).
    pub duplicates_delivered: u64,
    /// Seed.
    pub seed: u64,
    /// Virtual seconds simulated.
    pub sim_seconds: f64,
    /// Wall-clock milliseconds.
    pub wall_ms: f64,
    /// A connection failure, if any.
    pub error: Option<String>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl VoipReport {
    /// Summarise a run.
    pub fn of(run: &VoipRun, wall_ms: f64) -> VoipReport {
        let s = run.summary();
        let sc = &run.scenario;
        VoipReport {
            transport: sc.transport.name(),
            cc: matches!(sc.transport, TransportKind::Tcp(_)).then(|| sc.base.cc.name()),
            messages: s.messages,
            on_time: s.played,
            oracle_on_time: s.oracle_on_time,
            first_tx_dropped: s.first_tx_dropped,
            late: s.late,
            never_arrived: s.never_arrived,
            app_lost: s.app_lost,
            played: s.played,
            amplification: s.amplification(),
            collateral_lost: run.collateral_losses(),
            ir_sent: s.ir_sent,
            expired_events: run.expired_events,
            retransmissions: run.retransmissions_on_wire,
            srtt_ms: run.srtt.map(ms),
            transport_delay_ms: s.transport_delay_ms,
            min_buffered_ms: s.min_buffered_ms,
            rtt_ms: ms(sc.rtt),
            playout_ms: ms(sc.playout),
            lifetime_ms: ms(sc.message_lifetime()),
            corrupt_delivered: run.corrupt_delivered,
            duplicates_delivered: run.duplicates_delivered,
            seed: sc.seed,
            sim_seconds: run.sim_time.as_secs_f64(),
            wall_ms,
            error: run.error.clone(),
        }
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_default()
}

fn instant_ms(i: Option<hollywood_tcp::Instant>) -> String {
    opt_ms(i.map(|i| i.as_nanos() as f64 / 1e6))
}

/// Write one CSV row per message: id, send_ms, arrival_ms, playout_ms,
/// buffered_ms, transport_delay_ms, outcome, first_tx_dropped, expired.
/// Times are milliseconds of virtual time since the start of the
/// simulation; empty cells = not applicable (never arrived).
pub fn write_csv(run: &VoipRun, path: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let f = std::fs::File::create(path).map_err(err)?;
    let mut w = std::io::BufWriter::new(f);
    writeln!(
        w,
        "id,send_ms,arrival_ms,playout_ms,buffered_ms,transport_delay_ms,outcome,first_tx_dropped,expired"
    )
    .map_err(err)?;
    for r in &run.records {
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{}",
            r.id,
            instant_ms(r.send),
            instant_ms(r.arrival),
            instant_ms(r.playout),
            opt_ms(r.buffered_ms()),
            opt_ms(r.transport_delay_ms()),
            r.outcome().name(),
            r.first_tx_dropped as u8,
            r.expired as u8
        )
        .map_err(err)?;
    }
    w.flush().map_err(err)
}

/// The two panels of Figs. 5.4–5.16 for messages `range` (inclusive;
/// `None` = all): buffered time per message (late ones in red, below zero;
/// never-arrived ones as red crosses at zero), and transport delay per
/// message (late ones in red) with the playout deadline as a line.
pub fn charts(run: &VoipRun, range: Option<(u32, u32)>, title: &str) -> Vec<Chart> {
    let inside = |r: &&VoipRecord| range.is_none_or(|(a, b)| r.id >= a && r.id <= b);
    let recs: Vec<&VoipRecord> = run.records.iter().filter(inside).collect();
    let zoom = range.is_some();
    let line = |pts: Vec<(f64, f64)>, name: &str| {
        Series::new(
            name,
            pts,
            if zoom { Style::Line } else { Style::Points },
            Rgb::BLUE,
        )
    };
    let pick = |f: &dyn Fn(&VoipRecord) -> Option<f64>, o: Outcome| -> Vec<(f64, f64)> {
        recs.iter()
            .filter(|r| r.outcome() == o || (o == Outcome::Played && zoom))
            .filter_map(|r| Some((r.id as f64, f(r)?)))
            .collect()
    };
    let never: Vec<(f64, f64)> = recs
        .iter()
        .filter(|r| r.outcome() == Outcome::NeverArrived)
        .map(|r| (r.id as f64, 0.0))
        .collect();
    let x_range = match range {
        Some((a, b)) => Some((a as f64 - 0.5, b as f64 + 0.5)),
        None => Some((0.0, run.records.len().max(1) as f64)),
    };
    let buffered = |r: &VoipRecord| r.buffered_ms();
    let delay = |r: &VoipRecord| r.transport_delay_ms();
    let late_b = pick(&buffered, Outcome::Late);
    let late_d = pick(&delay, Outcome::Late);
    let mut top = Chart {
        title: format!("{title}: time buffered before playout"),
        x_label: "message".into(),
        y_label: "buffered time (ms)".into(),
        x_range,
        series: vec![line(pick(&buffered, Outcome::Played), "buffered")],
        hlines: vec![HLine {
            y: 0.0,
            color: Rgb::GREY,
            label: String::new(),
        }],
        ..Chart::default()
    };
    // Playout instant − send instant: the smallest transport delay of the
    // call plus the playout delay (the schedule of hollywood_media::voip).
    let owd = run
        .records
        .iter()
        .filter_map(VoipRecord::transport_delay_ms)
        .fold(f64::INFINITY, f64::min);
    let deadline = if owd.is_finite() { owd } else { 0.0 } + ms(run.scenario.playout);
    let mut bottom = Chart {
        title: format!("{title}: transport delay"),
        x_label: "message".into(),
        y_label: "transport delay (ms)".into(),
        x_range,
        series: vec![line(pick(&delay, Outcome::Played), "transport delay")],
        hlines: vec![HLine {
            y: deadline,
            color: Rgb::GREY,
            label: format!("playout deadline ({deadline:.1} ms)"),
        }],
        ..Chart::default()
    };
    if !late_b.is_empty() {
        top.series
            .push(Series::new("late", late_b, Style::Points, Rgb::RED));
        bottom
            .series
            .push(Series::new("late", late_d, Style::Points, Rgb::RED));
    }
    if !never.is_empty() {
        top.series.push(Series::new(
            "never arrived",
            never.clone(),
            Style::Crosses,
            Rgb::RED,
        ));
        bottom.series.push(Series::new(
            "never arrived",
            never,
            Style::Crosses,
            Rgb::RED,
        ));
    }
    top.y_range = headroom(&top);
    bottom.y_range = headroom(&bottom);
    vec![top, bottom]
}

/// A y range that fits every point and reference line with a third of the
/// height free at the top, where the legend goes.
fn headroom(c: &Chart) -> Option<(f64, f64)> {
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(c.hlines.iter().map(|h| h.y))
        .filter(|y| y.is_finite());
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    if !lo.is_finite() {
        return None;
    }
    let span = (hi - lo).max(10.0);
    Some((lo - 0.05 * span, hi + 0.45 * span))
}

/// Draw [`charts`] stacked into `path` (.png or .svg).
pub fn plot_run(
    run: &VoipRun,
    range: Option<(u32, u32)>,
    title: &str,
    path: &Path,
) -> Result<(), String> {
    plot::draw_stacked(&charts(run, range, title), path).map_err(|e| e.to_string())
}

/// `±half` messages around `centre`, clipped to the call.
pub fn zoom_range(run: &VoipRun, centre: u32, half: u32) -> (u32, u32) {
    let last = run.records.len().saturating_sub(1) as u32;
    (
        centre.saturating_sub(half),
        centre.saturating_add(half).min(last),
    )
}

/// One-line description of a scenario for titles and headers.
pub fn describe(sc: &VoipScenario) -> String {
    format!(
        "{} Mb/s down, {} Mb/s up, RTT {} ms, playout delay {} ms",
        sc.rate_bps as f64 / 1e6,
        sc.uplink_bps as f64 / 1e6,
        ms(sc.rtt),
        ms(sc.playout)
    )
}
