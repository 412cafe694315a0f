//! The `ch6` adapter: thesis chapter 6 ("Lowering Latency in MPEG-DASH")
//! reproduced. One configuration is one architecture (`hollywood_media::
//! dash::progressive`: request-response over TCP, progressive server push over
//! TCP, progressive over TCP Hollywood) at one fixed encoding rate, RTT,
//! loss rate and chunk or buffer size, frame by frame; the report draws
//! the thesis's simulated Figs. 6.5-6.17 (mean over seeds, standard error
//! in `summary.md`, as the thesis's error bars), its analytical Figs. 6.4,
//! 6.7, 6.11 and 6.15 (eqs. 6.10, 6.14, 6.16, 6.19), and checks the
//! chapter's claims (REFERENCES.md thesis ch. 6, claims) one by one.
//!
//! Plan parameters: `arch` (`request-response`, `push`, `hollywood`),
//! `encoding`, `rtt`, `loss`, `frames` (request-response: frames per chunk,
//! which is the buffer, eq. 6.2; progressive: the minimum playout buffer in
//! frames, with 1 s chunks as §6.2), `rate` (the bottleneck), `duration`,
//! `fps`, `iframe_ratio`, `spread`, `content_seed`, `cc`, `mtu` (eq. 6.11's
//! T_mtu; the thesis does not state it), `notes`.

use crate::claims::{self, ClaimResult};
use crate::plan::Point;
use crate::plot::{self, Chart, Rgb, Series, Style};
use crate::report::Figure;
use crate::run::{Adapter, Context, Finished, Written};
use crate::stats::Stat;
use crate::units::{parse_duration, parse_rate, Spelling};
use hollywood_media::dash::progressive::{Arch, Ch6Scenario, FrameVideo};
use hollywood_media::dash::Phase;
use hollywood_media::scenario::models::ch6::{Bounds, DashPath};
use hollywood_tcp::CcAlgorithm;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// The adapter.
pub struct Ch6;

mod params;
pub use params::Ch6Params;

fn d_mtu() -> f64 {
    1500.0
}

fn d_true() -> bool {
    true
}

/// The plan's own keys (what a point sweeps, eq. 6.11's MTU, lifetimes
/// and notes); every other key of a point is a [`Ch6Params`] key (shared
/// with `hollywood dash-ch6`).
const PLAN_KEYS: [&str; 7] = [
    "arch",
    "encoding",
    "rtt",
    "frames",
    "mtu",
    "lifetimes",
    "notes",
];

/// The plan's own keys, as written in the plan.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct PlanKeys {
    arch: String,
    encoding: String,
    rtt: String,
    /// Request-response: frames per chunk, which is the buffer (eq. 6.2);
    /// progressive: the minimum playout buffer in frames.
    frames: u32,
    #[serde(default = "d_mtu")]
    mtu: f64,
    /// Hollywood: frames carry their playout deadline as lifetime.
    #[serde(default = "d_true")]
    lifetimes: bool,
    notes: Option<String>,
}

/// One configuration.
#[derive(Debug, Clone)]
pub struct Ch6Point {
    arch: Arch,
    video: Arc<FrameVideo>,
    frames: u32,
    phases: Vec<Phase>,
    cc: CcAlgorithm,
    scenario_index: usize,
    encoding_bps: u64,
    rtt_ms: f64,
    loss: f64,
    duration_s: f64,
    bottleneck_bps: u64,
    fps: u32,
    mtu: f64,
    lifetimes: bool,
    notes: Option<String>,
}

impl Ch6Point {
    fn bounds(&self) -> Option<Bounds> {
        DashPath::new(
            self.rtt_ms / 1e3,
            self.encoding_bps as f64,
            self.bottleneck_bps as f64,
            f64::from(self.fps),
            self.mtu,
        )
        .ok()
        .map(|p| p.bounds())
    }

    /// The chapter's analytical minimum buffer for this architecture and
    /// loss (s; `None`: no buffer suffices).
    fn bound(&self) -> Option<f64> {
        let b = self.bounds()?;
        match (self.arch, self.loss > 0.0) {
            (Arch::RequestResponse, false) => b.request_response,
            (Arch::RequestResponse, true) => b.request_response_lossy,
            (Arch::Push, _) => b.progressive,
            (Arch::Hollywood, _) => b.hollywood,
        }
    }
}

/// One session's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Out {
    stall_s: f64,
    stalls: u64,
    delayed_s: f64,
    skip_s: f64,
    late_frames: u64,
    startup_s: f64,
    retransmitted: u64,
    /// Frames the server or its engine dropped before sending them
    /// (Hollywood with lifetimes).
    expired: u64,
    /// Playback ended within the time limit (else the figures are lower
    /// bounds).
    finished: bool,
    sim_seconds: f64,
}

/// The metrics plans may name.
pub const METRICS: [&str; 9] = [
    "stall_s",
    "delayed_s",
    "skip_s",
    "stalls",
    "late_frames",
    "startup_s",
    "finished",
    "retransmitted",
    "expired",
];

impl Adapter for Ch6 {
    type Params = Ch6Point;
    type Output = Out;

    fn name(&self) -> &'static str {
        "ch6"
    }

    fn metrics(&self) -> &'static [&'static str] {
        &METRICS
    }

    fn configure(&self, point: &Point) -> Result<Ch6Point, String> {
        let (raw, params): (PlanKeys, Ch6Params) = point.split_typed(&PLAN_KEYS)?;
        let arch = Arch::parse(&raw.arch)?;
        let encoding_bps = parse_rate(&raw.encoding)?;
        let rtt = parse_duration(&raw.rtt)?;
        params.validate(Spelling::Plan)?;
        if raw.frames == 0 {
            return Err("frames: at least 1".into());
        }
        if !(raw.mtu.is_finite() && raw.mtu >= 64.0) {
            return Err(format!("mtu {}: use at least 64 bytes", raw.mtu));
        }
        let video = params.video(encoding_bps, params.chunk_frames(arch, raw.frames))?;
        Ok(Ch6Point {
            arch,
            video: Arc::new(video),
            frames: raw.frames,
            phases: params.phases(rtt),
            cc: params.cc,
            scenario_index: point.scenario_index,
            encoding_bps,
            rtt_ms: rtt.as_secs_f64() * 1e3,
            loss: params.loss,
            duration_s: params.duration.as_secs_f64(),
            bottleneck_bps: params.rate,
            fps: params.fps,
            mtu: raw.mtu,
            lifetimes: raw.lifetimes,
            notes: raw.notes,
        })
    }

    fn run(&self, p: &Ch6Point, seed: u64, _keep: bool) -> Result<Out, String> {
        let run = Ch6Scenario {
            arch: p.arch,
            video: p.video.clone(),
            buffer_frames: p.frames,
            phases: p.phases.clone(),
            cc: p.cc,
            seed,
            lifetimes: p.lifetimes,
            pcap: None,
        }
        .run()?;
        let r = &run.report;
        if r.corrupt_frames > 0 {
            return Err(format!("{} corrupt frames", r.corrupt_frames));
        }
        if !run.timed_out {
            if let Some(e) = &r.error {
                return Err(e.clone());
            }
        }
        Ok(Out {
            stall_s: r.total_stall_s,
            stalls: r.stalls,
            delayed_s: r.delayed_frame_s,
            skip_s: r.skip_s,
            late_frames: r.late_frames,
            startup_s: r.startup_s.unwrap_or(f64::NAN),
            retransmitted: run.retransmitted_segments,
            expired: run.dropped_frames + run.expired_unsent,
            finished: !run.timed_out,
            sim_seconds: run.sim_seconds,
        })
    }

    fn metric(&self, o: &Out, name: &str) -> Option<f64> {
        Some(match name {
            "stall_s" => o.stall_s,
            "delayed_s" => o.delayed_s,
            "skip_s" => o.skip_s,
            "stalls" => o.stalls as f64,
            "late_frames" => o.late_frames as f64,
            "startup_s" => o.startup_s,
            "finished" => f64::from(u8::from(o.finished)),
            "retransmitted" => o.retransmitted as f64,
            "expired" => o.expired as f64,
            _ => return None,
        })
    }

    fn sim_seconds(&self, o: &Out) -> f64 {
        o.sim_seconds
    }

    fn finish(&self, done: &mut Finished<'_, Self>, ctx: &Context<'_>) -> Result<Written, String> {
        finish(done, ctx)
    }
}

/// Mean, standard error (the thesis's error bars) and range over seeds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Cell {
    /// Mean.
    pub mean: f64,
    /// Standard error of the mean.
    pub se: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
}

impl Cell {
    fn of(v: &[f64]) -> Cell {
        let s = Stat::of(v);
        Cell {
            mean: s.mean,
            se: if s.n > 1 {
                s.sd / (s.n as f64).sqrt()
            } else {
                0.0
            },
            min: s.min,
            max: s.max,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct ConfigSummary {
    encoding_mbps: f64,
    rtt_ms: f64,
    frames: u32,
    seeds: usize,
    stall_s: Cell,
    delayed_s: Cell,
    skip_s: Cell,
    stalls: Cell,
    late_frames: Cell,
    startup_s: Cell,
    /// Runs that ended within the time limit.
    finished: usize,
    /// The chapter's minimum buffer for this architecture (frames; `None`:
    /// infeasible).
    bound_frames: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct ScenarioSummary {
    name: String,
    arch: Arch,
    loss: f64,
    /// Congestion control at both ends.
    cc: &'static str,
    /// Hollywood frames carry their playout deadline as lifetime.
    lifetimes: bool,
    /// The bottleneck rate (bit/s).
    bottleneck_bps: u64,
    duration_s: f64,
    /// The thesis figures it reproduces (stall, second metric).
    figures: Option<(String, String)>,
    configs: Vec<ConfigSummary>,
}

#[derive(Debug, Clone, Serialize)]
struct Summary {
    experiment: String,
    description: String,
    seeds: Vec<u64>,
    runs: usize,
    jobs: usize,
    sim_seconds: f64,
    wall_seconds: f64,
    bounds: Vec<BoundRow>,
    scenarios: Vec<ScenarioSummary>,
    claims: Vec<ClaimResult>,
}

#[derive(Debug, Clone, Serialize)]
struct BoundRow {
    encoding_mbps: f64,
    rtt_ms: f64,
    #[serde(flatten)]
    bounds: Bounds,
}

/// The thesis's figure numbers for an architecture and loss: (stall,
/// delayed-frame or skip duration).
fn thesis_figures(arch: Arch, lossy: bool) -> Option<(String, String)> {
    let (a, b) = match (arch, lossy) {
        (Arch::RequestResponse, false) => ("6.5", "6.6"),
        (Arch::RequestResponse, true) => ("6.8", "6.9"),
        (Arch::Push, true) => ("6.12", "6.13"),
        (Arch::Hollywood, true) => ("6.16", "6.17"),
        _ => return None,
    };
    Some((a.into(), b.into()))
}

fn finish(done: &mut Finished<'_, Ch6>, ctx: &Context<'_>) -> Result<Written, String> {
    let mut seeds: Vec<u64> = done.plan.seeds.clone();
    seeds.sort_unstable();
    let mut notes = None;
    let mut scenarios = Vec::new();
    // Every (encoding, RTT) of the plan, for the analytical figures.
    let mut paths: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut link = None;
    for (si, s) in done.plan.scenarios.iter().enumerate() {
        let mut configs = Vec::new();
        let mut head = None;
        for c in done
            .configs
            .iter()
            .filter(|c| c.params.scenario_index == si)
        {
            let p = &c.params;
            if notes.is_none() {
                notes.clone_from(&p.notes);
            }
            head.get_or_insert((
                p.arch,
                p.loss,
                p.duration_s,
                p.cc.name(),
                p.lifetimes,
                p.bottleneck_bps,
            ));
            link.get_or_insert((p.bottleneck_bps, p.fps, p.mtu));
            paths.insert((p.encoding_bps, (p.rtt_ms * 1e3).round() as u64));
            let m = |f: &dyn Fn(&Out) -> f64| {
                Cell::of(&c.runs.iter().map(|(_, o)| f(o)).collect::<Vec<_>>())
            };
            configs.push(ConfigSummary {
                encoding_mbps: p.encoding_bps as f64 / 1e6,
                rtt_ms: p.rtt_ms,
                frames: p.frames,
                seeds: c.runs.len(),
                stall_s: m(&|o| o.stall_s),
                delayed_s: m(&|o| o.delayed_s),
                skip_s: m(&|o| o.skip_s),
                stalls: m(&|o| o.stalls as f64),
                late_frames: m(&|o| o.late_frames as f64),
                startup_s: m(&|o| o.startup_s),
                finished: c.runs.iter().filter(|(_, o)| o.finished).count(),
                bound_frames: p.bound().map(|b| b * f64::from(p.fps)),
            });
        }
        let Some((arch, loss, duration_s, cc, lifetimes, bottleneck_bps)) = head else {
            continue;
        };
        configs.sort_by(|a, b| {
            (a.rtt_ms, a.encoding_mbps, a.frames)
                .partial_cmp(&(b.rtt_ms, b.encoding_mbps, b.frames))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        scenarios.push(ScenarioSummary {
            name: s.name.clone(),
            arch,
            loss,
            cc,
            lifetimes: lifetimes && arch == Arch::Hollywood,
            bottleneck_bps,
            duration_s,
            // The thesis ran CUBIC (Linux's default of the time); its
            // Hollywood figures are drawn from the run with lifetimes.
            figures: if cc == "cubic" && (arch != Arch::Hollywood || lifetimes) {
                thesis_figures(arch, loss > 0.0)
            } else {
                None
            },
            configs,
        });
    }
    let mut bounds = Vec::new();
    let mut figures = Vec::new();
    if let Some((rate, fps, mtu)) = link {
        let encodings: Vec<f64> = paths
            .iter()
            .map(|p| p.0)
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .map(|e| e as f64)
            .collect();
        for &(enc, rtt_us) in &paths {
            if let Ok(p) = DashPath::new(
                rtt_us as f64 / 1e6,
                enc as f64,
                rate as f64,
                f64::from(fps),
                mtu,
            ) {
                bounds.push(BoundRow {
                    encoding_mbps: enc as f64 / 1e6,
                    rtt_ms: rtt_us as f64 / 1e3,
                    bounds: p.bounds(),
                });
            }
        }
        bounds.sort_by(|a, b| {
            (a.rtt_ms, a.encoding_mbps)
                .partial_cmp(&(b.rtt_ms, b.encoding_mbps))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (file, caption) in bound_plots(ctx.out, &encodings, |rtt, enc| {
            DashPath::new(rtt, enc, rate as f64, f64::from(fps), mtu).map_err(|e| e.to_string())
        })? {
            let fig = file
                .trim_end_matches(".png")
                .replace("fig-", "thesis Fig. ");
            figures.push(Figure {
                file,
                caption,
                reproduces: Some(fig),
            });
        }
    }
    figures.extend(plots(&scenarios, ctx)?);
    done.claims.extend(thesis_claims(&scenarios, &bounds));
    let claims = done.claims.clone();
    let summary = Summary {
        experiment: done.plan.name.clone(),
        description: done.plan.description.clone(),
        seeds,
        runs: done.runs,
        jobs: done.jobs,
        sim_seconds: done.sim_seconds,
        wall_seconds: done.wall_seconds(),
        bounds,
        scenarios,
        claims,
    };
    let md = summary_md(&summary);
    let readme = readme(&summary, &md, &figures, ctx.command, notes.as_deref());
    let summary_json = done.stamp(&Ch6, &summary)?;
    Ok(Written {
        summary_json,
        summary_md: md,
        readme,
        figures,
    })
}

/// The thesis's analytical figures, 6.4, 6.7, 6.11 and 6.15: the minimum
/// buffer against RTT (0-200 ms), one line per encoding rate the
/// bottleneck can carry. Writes `fig-6.N.png` into `dir`; returns (file,
/// caption) per figure.
pub fn bound_plots(
    dir: &Path,
    encodings: &[f64],
    path: impl Fn(f64, f64) -> Result<DashPath, String>,
) -> Result<Vec<(String, String)>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    type Pick = fn(&Bounds) -> Option<f64>;
    let figs: [(&str, &str, Pick); 4] = [
        ("fig-6.4", "request-response, lossless (eq. 6.10)", |b| {
            b.request_response
        }),
        (
            "fig-6.7",
            "request-response, one loss per chunk (eq. 6.14)",
            |b| b.request_response_lossy,
        ),
        ("fig-6.11", "progressive push over TCP (eq. 6.16)", |b| {
            b.progressive
        }),
        (
            "fig-6.15",
            "progressive over TCP Hollywood (eq. 6.19)",
            |b| b.hollywood,
        ),
    ];
    let mut out = Vec::new();
    for (file, title, pick) in figs {
        let mut series = Vec::new();
        let mut skipped = Vec::new();
        for (k, &enc) in encodings.iter().enumerate() {
            let pts: Vec<(f64, f64)> = (0..=200)
                .filter_map(|ms| {
                    let p = path(f64::from(ms) / 1e3, enc).ok()?;
                    Some((f64::from(ms), pick(&p.bounds())? * 1e3))
                })
                .collect();
            if pts.is_empty() {
                skipped.push(format!("{} Mb/s", enc / 1e6));
                continue;
            }
            series.push(Series::new(
                format!("{} Mb/s", enc / 1e6),
                pts,
                Style::Line,
                COLORS[k % COLORS.len()],
            ));
        }
        let caption = format!(
            "minimum playout buffer against RTT, {title}{}",
            if skipped.is_empty() {
                String::new()
            } else {
                format!("; {} infeasible at any buffer", skipped.join(", "))
            }
        );
        let chart = Chart {
            title: format!("Thesis {}: {caption}", file.replace("fig-", "Fig. ")),
            x_label: "RTT (ms)".into(),
            y_label: "minimum buffer (ms)".into(),
            series,
            ..Chart::default()
        };
        let name = format!("{file}.png");
        let p = dir.join(&name);
        plot::draw(&chart, &p).map_err(|e| format!("{}: {e}", p.display()))?;
        out.push((name, caption));
    }
    Ok(out)
}

const COLORS: [Rgb; 4] = [Rgb::BLUE, Rgb::GREEN, Rgb::RED, Rgb::GREY];

/// A plotted metric: file suffix, axis label, the value drawn.
type Metric = (&'static str, &'static str, fn(&ConfigSummary) -> f64);

/// Per scenario two figures (stall and delayed-frame or skip duration),
/// each a panel per RTT with a line per encoding rate against frames.
fn plots(scenarios: &[ScenarioSummary], ctx: &Context<'_>) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    for s in scenarios {
        let second: Metric = if s.arch == Arch::Hollywood {
            ("skip", "total skip duration (s)", |c| c.skip_s.mean)
        } else {
            ("delayed", "total delayed-frame duration (s)", |c| {
                c.delayed_s.mean
            })
        };
        let metrics: [Metric; 2] = [
            ("stall", "total stall duration (s)", |c| c.stall_s.mean),
            second,
        ];
        let x_label = if s.arch == Arch::RequestResponse {
            "chunk duration = buffer (frames at 60 fps)"
        } else {
            "minimum playout buffer (frames; 1 s chunks)"
        };
        let rtts: BTreeSet<u64> = s.configs.iter().map(|c| c.rtt_ms.round() as u64).collect();
        let encs: BTreeSet<u64> = s
            .configs
            .iter()
            .map(|c| (c.encoding_mbps * 1e3).round() as u64)
            .collect();
        for (k, (what, y, f)) in metrics.iter().enumerate() {
            let charts: Vec<Chart> = rtts
                .iter()
                .map(|&rtt| {
                    let series = encs
                        .iter()
                        .enumerate()
                        .map(|(i, &e)| {
                            let pts = s
                                .configs
                                .iter()
                                .filter(|c| {
                                    c.rtt_ms.round() as u64 == rtt
                                        && (c.encoding_mbps * 1e3).round() as u64 == e
                                })
                                .map(|c| (f64::from(c.frames), f(c)))
                                .collect();
                            Series::new(
                                format!("{} Mb/s", e as f64 / 1e3),
                                pts,
                                Style::Line,
                                COLORS[i % COLORS.len()],
                            )
                        })
                        .collect();
                    Chart {
                        title: format!(
                            "{}: {y}, RTT {rtt} ms, loss {}%, {} (mean of {} s sessions)",
                            s.name,
                            s.loss * 100.0,
                            s.cc,
                            s.duration_s
                        ),
                        x_label: x_label.into(),
                        y_label: y.to_string(),
                        series,
                        ..Chart::default()
                    }
                })
                .collect();
            if charts.is_empty() {
                continue;
            }
            let file = format!("{}-{what}.png", s.name);
            plot::draw_stacked(&charts, &ctx.out.join(&file)).map_err(|e| e.to_string())?;
            figures.push(Figure {
                file,
                caption: format!(
                    "{} ({}): {y} against {x_label}, one panel per RTT, one line per encoding rate",
                    s.name,
                    s.arch.name()
                ),
                reproduces: s
                    .figures
                    .as_ref()
                    .map(|(a, b)| format!("thesis Fig. {}", if k == 0 { a } else { b })),
            });
        }
    }
    Ok(figures)
}

fn claim(
    config: String,
    metric: &str,
    text: &str,
    source: &str,
    expectation: &str,
    observed: String,
    holds: bool,
) -> ClaimResult {
    ClaimResult::new(
        "ch6",
        "",
        config,
        metric,
        text,
        Some(source.into()),
        None,
        expectation,
        observed,
        holds,
    )
}

/// The scenario of `arch` (lossy or not) under congestion control `cc`.
fn find_arch<'a>(
    sc: &'a [ScenarioSummary],
    arch: Arch,
    lossy: bool,
    cc: &str,
) -> Option<&'a ScenarioSummary> {
    sc.iter().find(|s| {
        s.arch == arch
            && (s.loss > 0.0) == lossy
            && s.cc == cc
            && (arch != Arch::Hollywood || s.lifetimes)
    })
}

/// The configuration of `s` at the same encoding, RTT and frames as `c`.
fn same<'a>(s: &'a ScenarioSummary, c: &ConfigSummary) -> Option<&'a ConfigSummary> {
    s.configs.iter().find(|d| {
        d.frames == c.frames
            && (d.rtt_ms - c.rtt_ms).abs() < 1e-6
            && (d.encoding_mbps - c.encoding_mbps).abs() < 1e-9
    })
}

/// (encoding, RTT) curves of a scenario, configs sorted by frames.
fn curves(s: &ScenarioSummary) -> Vec<((f64, f64), Vec<&ConfigSummary>)> {
    let mut out: Vec<((f64, f64), Vec<&ConfigSummary>)> = Vec::new();
    for c in &s.configs {
        let key = (c.encoding_mbps, c.rtt_ms);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(c),
            None => out.push((key, vec![c])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|c| c.frames);
    }
    out
}

/// Chapter 6's checkable claims (REFERENCES.md thesis ch. 6, claims), from the means over
/// seeds. A difference counts when it exceeds `EPS` seconds (half a frame
/// at 60 fps), so identical zeros are ties, not violations.
fn thesis_claims(sc: &[ScenarioSummary], bounds: &[BoundRow]) -> Vec<ClaimResult> {
    const EPS: f64 = 1.0 / 120.0;
    let mut out = Vec::new();
    let rr0 = find_arch(sc, Arch::RequestResponse, false, "cubic");
    let rr = find_arch(sc, Arch::RequestResponse, true, "cubic");
    let push = find_arch(sc, Arch::Push, true, "cubic");
    let hw = find_arch(sc, Arch::Hollywood, true, "cubic");

    // 1. More stall with a higher encoding rate or RTT (Fig. 6.5).
    if let Some(s) = rr0 {
        let mut pairs = 0;
        let mut bad = Vec::new();
        for c in &s.configs {
            for d in &s.configs {
                if d.frames != c.frames {
                    continue;
                }
                let higher_enc =
                    (d.rtt_ms - c.rtt_ms).abs() < 1e-6 && d.encoding_mbps > c.encoding_mbps;
                let higher_rtt =
                    (d.encoding_mbps - c.encoding_mbps).abs() < 1e-9 && d.rtt_ms > c.rtt_ms;
                if higher_enc || higher_rtt {
                    pairs += 1;
                    if d.stall_s.mean + EPS < c.stall_s.mean {
                        bad.push(format!(
                            "{} fr: {} Mb/s {} ms {:.2} s > {} Mb/s {} ms {:.2} s",
                            c.frames,
                            c.encoding_mbps,
                            c.rtt_ms,
                            c.stall_s.mean,
                            d.encoding_mbps,
                            d.rtt_ms,
                            d.stall_s.mean
                        ));
                    }
                }
            }
        }
        out.push(claim(
            format!("{}: every chunk duration", s.name),
            "total stall (mean)",
            "a higher encoding rate or RTT gives more stalling at the same chunk duration (lossless, request-response)",
            "thesis §6.1.2, Fig. 6.5",
            "never less stall at the higher rate or RTT (ties within half a frame allowed) in at least 95 % of comparisons (the thesis's: in all)",
            format!(
                "{} of {pairs} comparisons hold{}",
                pairs - bad.len(),
                if bad.is_empty() {
                    String::new()
                } else {
                    format!("; against: {}", bad.iter().take(4).cloned().collect::<Vec<_>>().join("; "))
                }
            ),
            pairs > 0 && bad.len() * 20 <= pairs,
        )
        .differs_unless(
            bad.is_empty(),
            "each chunk leaves as one window-sized burst after an idle gap and can overflow the one-BDP drop-tail queue even without loss, more so at the lower rate in a few runs (the `retransmitted` column of runs.csv); eqs. 6.9/6.10 assume a chunk flows at the bottleneck rate, and the thesis says its boundaries \"are not absolute\"",
        ));
    }

    // 2. Stall falls as the chunk grows (Figs. 6.5, 6.8).
    for s in [rr0, rr].into_iter().flatten() {
        let mut obs = Vec::new();
        let mut ok = true;
        let mut any = false;
        for ((enc, rtt), v) in curves(s) {
            let (Some(first), Some(last)) = (v.first(), v.last()) else {
                continue;
            };
            // Every curve that stalls anywhere: one that starts at zero and
            // rises is exactly what the claim rules out.
            if v.iter().all(|c| c.stall_s.mean <= EPS) {
                continue;
            }
            any = true;
            let rises = v
                .windows(2)
                .filter(|w| w[1].stall_s.mean > w[0].stall_s.mean * 1.1 + EPS)
                .count();
            let falls = last.stall_s.mean < first.stall_s.mean
                || (first.stall_s.mean <= EPS && last.stall_s.mean <= EPS);
            ok &= falls;
            obs.push(format!(
                "{enc} Mb/s {rtt} ms: {:.1} → {:.1} s ({rises} rises > 10 %)",
                first.stall_s.mean, last.stall_s.mean
            ));
        }
        out.push(claim(
            format!("{}: request-response, 3 to 30 frames", s.name),
            "total stall (mean)",
            "total stall decreases (roughly monotonically) as the chunk duration grows",
            if s.loss > 0.0 {
                "thesis §6.1.3, Fig. 6.8"
            } else {
                "thesis §6.1.2, Fig. 6.5"
            },
            "stall at the longest chunk below that at the shortest (or both zero), on every curve that stalls anywhere",
            if any {
                obs.join("; ")
            } else {
                "no curve stalls".into()
            },
            any && ok,
        ));
    }

    // 3. An encoding above the bottleneck never plays smoothly. A player
    // that skips must lose at least 1 − R_bn/R_enc of the session; one
    // that stalls, R_enc/R_bn − 1 of it (more): 90 % of the smaller bound
    // leaves room for the start-up buffer and the video's variation.
    let mut over = Vec::new();
    let mut over_ok = true;
    for s in sc {
        let bn = s.bottleneck_bps as f64;
        for c in s.configs.iter().filter(|c| c.encoding_mbps * 1e6 > bn) {
            let lost = (c.stall_s.mean + c.skip_s.mean) / s.duration_s;
            let floor = 0.9 * (1.0 - bn / (c.encoding_mbps * 1e6));
            over_ok &= lost >= floor;
            over.push((lost, floor));
        }
    }
    if !over.is_empty() {
        let lo = over.iter().map(|o| o.0).fold(f64::INFINITY, f64::min);
        let floor = over.iter().map(|o| o.1).fold(0.0, f64::max);
        out.push(claim(
            "every architecture, buffer and RTT above the bottleneck rate".into(),
            "stall + skip (mean)",
            "an encoding above the bottleneck (53 Mb/s over 30 Mb/s) never plays smoothly: it stalls continuously (TCP) or skips continuously (Hollywood)",
            "thesis Figs. 6.4d, 6.7d, 6.11d, 6.15d",
            "stall + skip ≥ 90 % of 1 − R_bn/R_enc of the session at every such point",
            format!(
                "{} points; the least is {:.0} % of the session (floor {:.0} %)",
                over.len(),
                lo * 100.0,
                floor * 100.0
            ),
            over_ok,
        ));
    }

    // 4. Loss adds stall (Fig. 6.8 against 6.5) and delays most frames
    // (Fig. 6.9).
    if let (Some(a), Some(b)) = (rr0, rr) {
        let mut n = 0;
        let mut more = 0;
        let (mut sum0, mut sum1) = (0.0, 0.0);
        let bn = b.bottleneck_bps as f64 / 1e6;
        for c in a.configs.iter().filter(|c| c.encoding_mbps < bn) {
            if let Some(d) = same(b, c) {
                n += 1;
                sum0 += c.stall_s.mean;
                sum1 += d.stall_s.mean;
                if d.stall_s.mean + EPS >= c.stall_s.mean {
                    more += 1;
                }
            }
        }
        out.push(claim(
            format!("{} against {}, rates below the bottleneck", b.name, a.name),
            "total stall (mean)",
            "0.2 % random loss significantly increases total stall at the same chunk duration",
            "thesis §6.1.3, Fig. 6.8 against Fig. 6.5",
            "at least as much stall at every point, and more in total",
            format!(
                "{more} of {n} points; total {:.1} s lossless against {:.1} s lossy",
                sum0, sum1
            ),
            n > 0 && more == n && sum1 > sum0,
        ));
        let pts: Vec<&ConfigSummary> = b.configs.iter().filter(|c| c.encoding_mbps < bn).collect();
        let most = pts
            .iter()
            .filter(|c| c.delayed_s.mean >= 0.5 * b.duration_s)
            .count();
        out.push(claim(
            format!("{}, rates below the bottleneck", b.name),
            "delayed-frame duration (mean)",
            "with loss most frames are played out at some delay, even where stalls are small",
            "thesis §6.1.3, Fig. 6.9",
            "more than half the session delayed at more than half the points",
            format!(
                "{most} of {} points delay more than half the session",
                pts.len()
            ),
            !pts.is_empty() && 2 * most > pts.len(),
        ));
    }

    // 5. Progressive stalls less than request-response, delays less.
    if let (Some(p), Some(r)) = (push, rr) {
        let mut n = 0;
        let mut less = 0;
        let mut bad = Vec::new();
        let mut dl = 0;
        for c in &p.configs {
            if let Some(d) = same(r, c) {
                n += 1;
                if c.stall_s.mean <= d.stall_s.mean + EPS {
                    less += 1;
                } else {
                    bad.push(format!(
                        "{} Mb/s {} ms {} fr: {:.1} vs {:.1} s",
                        c.encoding_mbps, c.rtt_ms, c.frames, c.stall_s.mean, d.stall_s.mean
                    ));
                }
                if c.delayed_s.mean <= d.delayed_s.mean + EPS {
                    dl += 1;
                }
            }
        }
        out.push(claim(
            format!("{} against {} at the same buffer", p.name, r.name),
            "total stall (mean)",
            "progressive push (1 s chunks) stalls less than request-response for every bit-rate, RTT and buffer size",
            "thesis §6.2.2, Fig. 6.12 against Fig. 6.8",
            "push ≤ request-response at every point",
            format!(
                "{less} of {n} points{}",
                if bad.is_empty() {
                    String::new()
                } else {
                    format!("; against: {}", bad.iter().take(4).cloned().collect::<Vec<_>>().join("; "))
                }
            ),
            n > 0 && less == n,
        ));
        out.push(claim(
            format!("{} against {} at the same buffer", p.name, r.name),
            "delayed-frame duration (mean)",
            "progressive push also delays fewer frames (clearly at low rate and RTT, marginally at high rate)",
            "thesis §6.2.2, Fig. 6.13 against Fig. 6.9",
            "push ≤ request-response at every point",
            format!("{dl} of {n} points"),
            n > 0 && dl == n,
        ));
    }

    // 6. Hollywood never stalls. Our skipping player never waits, so this
    // holds by construction; the check guards the implementation.
    if let Some(h) = hw {
        let worst = h.configs.iter().map(|c| c.stall_s.max).fold(0.0, f64::max);
        let delayed = h
            .configs
            .iter()
            .map(|c| c.delayed_s.max)
            .fold(0.0, f64::max);
        out.push(claim(
            format!("{}: every point", h.name),
            "total stall and delayed-frame duration (every run)",
            "over TCP Hollywood the application does not stall: losses become skips, with no cumulative offset (eq. 6.18: T_offset = 0)",
            "thesis §6.3, Fig. 6.16",
            "0 s of stall and of delayed frames in every run",
            format!(
                "largest stall {worst:.3} s, largest delayed-frame duration {delayed:.3} s over {} points",
                h.configs.len()
            ),
            !h.configs.is_empty() && worst == 0.0 && delayed == 0.0,
        )
        .by_construction(
            "the Hollywood client skips a late frame instead of waiting for it, so it cannot stall; the check guards the implementation",
        ));
    }

    // 7. Skips below push's delayed frames at low rate, RTT and buffer.
    if let (Some(h), Some(p)) = (hw, push) {
        // Points where either loses anything: where both play perfectly
        // the comparison says nothing.
        let low: Vec<(&ConfigSummary, &ConfigSummary)> = h
            .configs
            .iter()
            .filter(|c| c.encoding_mbps * 1e6 <= 0.4 * h.bottleneck_bps as f64 && c.frames <= 15)
            .filter_map(|c| Some((c, same(p, c)?)))
            .filter(|(c, d)| c.skip_s.mean > EPS || d.delayed_s.mean > EPS)
            .collect();
        let good = low
            .iter()
            .filter(|(c, d)| c.skip_s.mean <= d.delayed_s.mean + EPS)
            .count();
        let (skip, delayed): (f64, f64) = low.iter().fold((0.0, 0.0), |a, (c, d)| {
            (a.0 + c.skip_s.mean, a.1 + d.delayed_s.mean)
        });
        out.push(claim(
            format!(
                "{} against {}: encodings ≤ 40 % of the bottleneck, ≤ 15 frames, both RTTs",
                h.name, p.name
            ),
            "skip against delayed-frame duration (means)",
            "Hollywood's total skip duration is below progressive-over-TCP's delayed-frame duration at low encoding rates, RTTs and buffers",
            "thesis §6.3, Fig. 6.17 against Fig. 6.13",
            "skip ≤ delayed-frame at every such point where either is above zero",
            format!(
                "{good} of {} points; in sum {skip:.1} s skipped against {delayed:.1} s delayed",
                low.len()
            ),
            !low.is_empty() && good == low.len(),
        ));
    }

    // Ours: the same comparison with BBR at both ends (issue 13: a BBR
    // column beside the thesis's CUBIC).
    if let (Some(h), Some(p)) = (
        find_arch(sc, Arch::Hollywood, true, "bbr"),
        find_arch(sc, Arch::Push, true, "bbr"),
    ) {
        let pairs: Vec<(&ConfigSummary, &ConfigSummary)> = h
            .configs
            .iter()
            .filter_map(|c| Some((c, same(p, c)?)))
            .collect();
        let good = pairs
            .iter()
            .filter(|(c, d)| c.skip_s.mean <= d.delayed_s.mean + EPS)
            .count();
        out.push(claim(
            format!("{} against {}", h.name, p.name),
            "skip against delayed-frame duration (means)",
            "ours, not the thesis's: with BBR at both ends Hollywood skips no more than push over TCP delays",
            "issue 13 (BBR column)",
            "skip ≤ delayed-frame at every point",
            format!(
                "{good} of {} points; {}",
                pairs.len(),
                pairs
                    .iter()
                    .map(|(c, d)| format!(
                        "{} Mb/s {} ms {} fr: {:.2} vs {:.2} s",
                        c.encoding_mbps, c.rtt_ms, c.frames, c.skip_s.mean, d.delayed_s.mean
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            !pairs.is_empty() && good == pairs.len(),
        ));
    }

    // Ours: what lifetimes change (the thesis's text gives none).
    if let (Some(h), Some(r)) = (
        hw,
        sc.iter()
            .find(|s| s.arch == Arch::Hollywood && !s.lifetimes && s.cc == "cubic" && s.loss > 0.0),
    ) {
        let pairs: Vec<(&ConfigSummary, &ConfigSummary)> = r
            .configs
            .iter()
            .filter_map(|c| Some((same(h, c)?, c)))
            .collect();
        let good = pairs
            .iter()
            .filter(|(l, c)| l.skip_s.mean <= c.skip_s.mean + EPS)
            .count();
        let (sl, sr) = pairs.iter().fold((0.0, 0.0), |a, (l, c)| {
            (a.0 + l.skip_s.mean, a.1 + c.skip_s.mean)
        });
        out.push(claim(
            format!("{} against {}", h.name, r.name),
            "skip duration (means)",
            "ours, not the thesis's: frames carrying their playout deadline as lifetime skip no more than frames sent reliably",
            "thesis §4.2 (lifetimes) applied to §6.3",
            "skip with lifetimes ≤ reliable at every point",
            format!(
                "{good} of {} points; in sum {sl:.1} s skipped with lifetimes against {sr:.1} s reliable",
                pairs.len()
            ),
            !pairs.is_empty() && good == pairs.len(),
        ));
    }

    // 8. Analytical ordering of the bounds.
    let feasible: Vec<&BoundRow> = bounds
        .iter()
        .filter(|b| b.bounds.request_response_lossy.is_some())
        .collect();
    if !feasible.is_empty() {
        type Pair = (Option<f64>, Option<f64>);
        let list = |pick: &dyn Fn(&BoundRow) -> Pair| {
            feasible
                .iter()
                .map(|b| {
                    let f = |v: Option<f64>| v.map_or("-".into(), |s| format!("{:.0}", s * 1e3));
                    let (x, y) = pick(b);
                    format!(
                        "{} Mb/s {} ms: {} > {} ms",
                        b.encoding_mbps,
                        b.rtt_ms,
                        f(x),
                        f(y)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let rr_p = |b: &BoundRow| (b.bounds.request_response_lossy, b.bounds.progressive);
        let p_h = |b: &BoundRow| (b.bounds.progressive, b.bounds.hollywood);
        let above =
            |(x, y): (Option<f64>, Option<f64>)| matches!((x, y), (Some(x), Some(y)) if x > y);
        out.push(claim(
            format!("{} feasible (rate, RTT) points", feasible.len()),
            "minimum buffer (eqs. 6.14, 6.16)",
            "the minimum buffer of request-response (lossy) is above progressive push's",
            "thesis eqs. 6.14, 6.16; Figs. 6.7, 6.11",
            "strictly above at every feasible point",
            list(&rr_p),
            feasible.iter().all(|b| above(rr_p(b))),
        ));
        out.push(
            claim(
                format!("{} feasible (rate, RTT) points", feasible.len()),
                "minimum buffer (eqs. 6.16, 6.19)",
                "progressive push's minimum buffer is above Hollywood's",
                "thesis eqs. 6.16, 6.19; Figs. 6.11, 6.15",
                "strictly above at every feasible point",
                list(&p_h),
                feasible.iter().all(|b| above(p_h(b))),
            )
            .by_construction("eq. 6.16 is eq. 6.19 plus T_rexmit, which is positive"),
        );
    }
    out
}

fn cell(c: &Cell) -> String {
    if c.se > 0.0 {
        format!("{:.2} ± {:.2}", c.mean, c.se)
    } else {
        format!("{:.2}", c.mean)
    }
}

fn summary_md(s: &Summary) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## {}\n\n{} — {} sessions over seeds {:?}, {} jobs, {:.0} s simulated in {:.1} s.\n",
        s.experiment, s.description, s.runs, s.seeds, s.jobs, s.sim_seconds, s.wall_seconds
    );
    let _ = writeln!(
        md,
        "### Analytical minimum buffer (ms; frames at 60 fps in brackets)\n\n| encoding Mb/s | RTT ms | load | eq. 6.10 request-response | eq. 6.14 + loss | eq. 6.16 progressive | eq. 6.19 Hollywood |\n|---|---|---|---|---|---|---|"
    );
    let f = |v: Option<f64>| {
        v.map_or("infeasible".into(), |x| {
            format!("{:.1} ({:.1})", x * 1e3, x * 60.0)
        })
    };
    for b in &s.bounds {
        let x = &b.bounds;
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} | {} | {} | {} | {} |",
            b.encoding_mbps,
            b.rtt_ms,
            x.load,
            f(x.request_response),
            f(x.request_response_lossy),
            f(x.progressive),
            f(x.hollywood)
        );
    }
    let _ = writeln!(
        md,
        "\nCells: mean ± standard error over seeds (the thesis's error bars). `bound`: the architecture's analytical minimum buffer in frames. `ended`: runs whose playback ended within the time limit (else the figures are lower bounds).\n"
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            md,
            "### {} ({}{}, loss {}%, {}, {} s sessions){}\n",
            sc.name,
            sc.arch.name(),
            if sc.lifetimes { " with lifetimes" } else { "" },
            sc.loss * 100.0,
            sc.cc,
            sc.duration_s,
            sc.figures
                .as_ref()
                .map(|(a, b)| format!(": thesis Figs. {a} and {b}"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            md,
            "| encoding Mb/s | RTT ms | frames | bound | stall (s) | stalls | delayed-frame (s) | skip (s) | late frames | start-up (s) | ended |\n|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for c in &sc.configs {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {:.1} | {:.3} | {}/{} |",
                c.encoding_mbps,
                c.rtt_ms,
                c.frames,
                c.bound_frames.map_or("∞".into(), |b| format!("{b:.1}")),
                cell(&c.stall_s),
                c.stalls.mean,
                cell(&c.delayed_s),
                cell(&c.skip_s),
                c.late_frames.mean,
                c.startup_s.mean,
                c.finished,
                c.seeds
            );
        }
        md.push('\n');
    }
    md.push_str(&claims::markdown_section(&s.claims));
    md
}

fn readme(s: &Summary, md: &str, figures: &[Figure], command: &str, notes: Option<&str>) -> String {
    let counts = claims::Counts::of(&s.claims);
    let intro = format!(
        "Thesis chapter 6 in our simulator: one client and one server over a bottleneck, a fixed-rate video at 60 fps, three architectures — request-response over TCP (a request per chunk, the chunk is the buffer), progressive server push over TCP (1 s chunks, one message per frame, a frame late at its time stalls playback) and progressive over TCP Hollywood (a frame late at its time is skipped). {} sessions. Claims: {counts}.",
        s.runs,
    );
    crate::report::readme_page(
        "Thesis chapter 6 reproduced: lowering latency in MPEG-DASH",
        command,
        &intro,
        figures,
        "Setup and differences from the thesis",
        notes,
        md,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    const PLAN: &str = r#"
name = "t"
adapter = "ch6"
seeds = 1
duration = "4s"
rtt = "25ms"
[sweep]
encoding = ["7.5mbit", "53mbit"]
[[scenario]]
name = "rr"
arch = "request-response"
loss = "0%"
sweep.frames = [3, 30]
[[scenario]]
name = "hw"
arch = "hollywood"
loss = "0.2%"
sweep.frames = [3]
"#;

    #[test]
    fn a_plan_configures_the_architectures_and_refuses_what_it_does_not_understand() {
        let plan = Plan::parse(PLAN, None).unwrap();
        let points: Vec<Ch6Point> = plan.points().map(|p| Ch6.configure(p).unwrap()).collect();
        assert_eq!(points.len(), 6);
        // Request-response chunks are the buffer; progressive uses 1 s.
        assert_eq!(points[0].video.chunk_frames, 3);
        let hw = points.iter().find(|p| p.arch == Arch::Hollywood).unwrap();
        assert_eq!(hw.video.chunk_frames, 60);
        // Eq. 6.10 at 7.5 Mb/s, 25 ms: 33.3 ms = 2 frames; 53 Mb/s: none.
        let b = points[0].bound().unwrap() * 60.0;
        assert!((b - 2.0).abs() < 0.01, "{b}");
        assert!(points
            .iter()
            .any(|p| p.encoding_bps == 53_000_000 && p.bound().is_none()));
        let o = Ch6.run(hw, 1, true).unwrap();
        assert!(o.finished);
        assert_eq!(o.stall_s, 0.0);
        assert_eq!(Ch6.metric(&o, "skip_s"), Some(o.skip_s));
        assert_eq!(Ch6.metric(&o, "nope"), None);
        for bad in [
            PLAN.replace("arch = \"hollywood\"", "arch = \"carrier-pigeon\""),
            PLAN.replace("sweep.frames = [3]", "sweep.frames = [0]"),
            PLAN.replace("loss = \"0%\"", "loss = \"60%\""),
            PLAN.replace("rtt = \"25ms\"", "rtt = \"25ms\"\nspeed = 3"),
        ] {
            let plan = Plan::parse(&bad, None).unwrap();
            assert!(plan.points().any(|p| Ch6.configure(p).is_err()), "{bad}");
        }
    }

    fn cfg(enc: f64, rtt: f64, frames: u32, stall: f64, delayed: f64, skip: f64) -> ConfigSummary {
        let c = |v| Cell {
            mean: v,
            se: 0.0,
            min: v,
            max: v,
        };
        ConfigSummary {
            encoding_mbps: enc,
            rtt_ms: rtt,
            frames,
            seeds: 1,
            stall_s: c(stall),
            delayed_s: c(delayed),
            skip_s: c(skip),
            stalls: c(0.0),
            late_frames: c(0.0),
            startup_s: c(0.0),
            finished: 1,
            bound_frames: None,
        }
    }

    fn scenario(name: &str, arch: Arch, loss: f64, configs: Vec<ConfigSummary>) -> ScenarioSummary {
        ScenarioSummary {
            name: name.into(),
            arch,
            loss,
            cc: "cubic",
            lifetimes: arch == Arch::Hollywood,
            bottleneck_bps: 30_000_000,
            duration_s: 30.0,
            figures: None,
            configs,
        }
    }

    #[test]
    fn the_claims_hold_on_the_thesis_shape_and_fail_on_its_opposite() {
        let rr0 = |s: f64| {
            scenario(
                "rr0",
                Arch::RequestResponse,
                0.0,
                vec![
                    cfg(7.5, 25.0, 3, 1.0 * s, 20.0, 0.0),
                    cfg(7.5, 25.0, 30, 0.0, 5.0, 0.0),
                    cfg(24.0, 25.0, 3, 4.0, 25.0, 0.0),
                    cfg(24.0, 25.0, 30, 1.0, 20.0, 0.0),
                ],
            )
        };
        let rr = scenario(
            "rr",
            Arch::RequestResponse,
            0.002,
            vec![
                cfg(7.5, 25.0, 3, 5.0, 28.0, 0.0),
                cfg(7.5, 25.0, 30, 1.0, 25.0, 0.0),
                cfg(24.0, 25.0, 3, 9.0, 29.0, 0.0),
                cfg(24.0, 25.0, 30, 3.0, 28.0, 0.0),
            ],
        );
        let push = scenario(
            "push",
            Arch::Push,
            0.002,
            vec![
                cfg(7.5, 25.0, 3, 0.5, 10.0, 0.0),
                cfg(7.5, 25.0, 30, 0.1, 5.0, 0.0),
            ],
        );
        let hw = |stall: f64| {
            scenario(
                "hw",
                Arch::Hollywood,
                0.002,
                vec![
                    cfg(7.5, 25.0, 3, stall, 0.0, 0.3),
                    cfg(7.5, 25.0, 30, 0.0, 0.0, 0.1),
                ],
            )
        };
        let good = [rr0(1.0), rr.clone(), push.clone(), hw(0.0)];
        let claims = thesis_claims(&good, &[]);
        assert_eq!(claims.len(), 9, "{claims:#?}");
        assert!(claims.iter().all(|c| c.holds), "{claims:#?}");
        // A Hollywood stall, and more stall at the lower rate, are caught.
        let bad = [rr0(10.0), rr, push, hw(0.5)];
        let claims = thesis_claims(&bad, &[]);
        let failed: Vec<&str> = claims
            .iter()
            .filter(|c| !c.holds)
            .map(|c| c.source.as_deref().unwrap())
            .collect();
        assert!(failed.contains(&"thesis §6.1.2, Fig. 6.5"), "{failed:?}");
        assert!(failed.contains(&"thesis §6.3, Fig. 6.16"), "{failed:?}");
    }
}
