//! The `vod` adapter: [TCP-video] ("Effectiveness of TCP for Video
//! Transport") — a stored video sent over TCP, deadline TCP and TCP
//! Hollywood with cross traffic; the initiation latency needed for no
//! deadline violation, and the violations at shorter ones
//! (`hollywood_media::vod`).
//!
//! One run (a configuration and a seed) measures one transport:
//!
//! - a sender that ignores deadlines (standard TCP) sends the same bytes
//!   whatever the initiation latency, so one transfer gives the violations
//!   at every point of the plan's `grid` and the exact latency for none;
//! - a sender that uses them (TCP Hollywood, the deadline TCP) behaves
//!   differently at every initiation latency: one transfer per `grid`
//!   point, then `refine` bisection steps between the last grid point with
//!   violations and the next (none on the grid after it). The bisection
//!   assumes that between those two points violations stop once (the
//!   curves are not monotone further down); its answer is a latency with
//!   no violation at most `resolution_s` above the smallest it looked for,
//!   where standard TCP's figure is exact.
//!
//! Plots: violations against initiation latency ([TCP-video] Graphs 6.3, 6.4,
//! 8.2, 8.3) and the latency for none against the plan's `x_axis`
//! (bottleneck rate: Graphs 6.1, 8.1; competing clients: Graph 6.2).

use crate::claims::ClaimResult;
use crate::plan::Point;
use crate::plot::{self, Chart, Rgb, Series, Style};
use crate::report::Figure;
use crate::run::{Adapter, Context, Finished, Written};
use crate::stats::Stat;
use crate::units::{parse_cross, parse_duration, parse_rate, parse_size};
use hollywood_media::vod::{VodArrivals, VodScenario, VodSource};
use hollywood_media::{CrossTraffic, GenericTransport, MessagesScenario, Transport};
use hollywood_tcp::{CcAlgorithm, Config};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::Duration;

/// The adapter.
pub struct Vod;

/// One of the seed's numbers for a configuration.
#[derive(Deserialize, Serialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StatedZero {
    /// Transport name.
    pub transport: String,
    /// `cbr` or `vbr`.
    pub video: String,
    /// The x value it belongs to (bottleneck rate as written, or clients).
    pub at: String,
    /// The seed's initiation latency for no violation, as printed.
    pub text: String,
}

fn d_fps() -> f64 {
    30.0
}
fn d_duration() -> String {
    "60s".into()
}
fn d_size() -> String {
    "1400".into()
}
fn d_spread() -> f64 {
    0.6
}
fn d_scene() -> String {
    "3s".into()
}
fn d_gop() -> u32 {
    15
}
fn d_iratio() -> f64 {
    4.0
}
fn d_one() -> u64 {
    1
}
fn d_queue() -> String {
    "30000".into()
}
fn d_cc() -> String {
    "reno".into()
}
fn d_refine() -> u32 {
    3
}
fn d_axis() -> String {
    "rate".into()
}

/// The parameters as written in the plan.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default = "d_fps")]
    fps: f64,
    #[serde(default = "d_duration")]
    duration: String,
    /// `cbr` or `vbr`.
    video: String,
    /// The video's mean bit rate.
    mean_rate: String,
    #[serde(default = "d_spread")]
    scene_spread: f64,
    #[serde(default = "d_scene")]
    scene_mean: String,
    #[serde(default = "d_gop")]
    gop: u32,
    #[serde(default = "d_iratio")]
    iframe_ratio: f64,
    #[serde(default = "d_one")]
    trace_seed: u64,
    #[serde(default = "d_size")]
    size: String,
    rate: String,
    one_way: String,
    #[serde(default = "d_queue")]
    queue: String,
    #[serde(default)]
    cross: Vec<String>,
    /// Greedy TCP clients added to `cross` ([TCP-video] Graph 6.2).
    #[serde(default)]
    clients: u32,
    #[serde(default = "d_cc")]
    cc: String,
    /// Initiation latencies at which violations are measured.
    grid: Vec<String>,
    #[serde(default = "d_refine")]
    refine: u32,
    /// `rate` or `clients`: what the latency-for-none plot runs along.
    #[serde(default = "d_axis")]
    x_axis: String,
    transport: String,
    #[serde(default)]
    stated: Vec<StatedZero>,
    notes: Option<String>,
}

/// One configuration.
#[derive(Debug, Clone)]
pub struct VodPoint {
    scenario_index: usize,
    transport: &'static str,
    /// The sender uses the deadlines.
    aware: bool,
    video: String,
    /// The x value (bottleneck kbit/s or clients) and its text.
    x: f64,
    x_text: String,
    x_axis: String,
    grid: Vec<Duration>,
    refine: u32,
    source: VodSource,
    /// The plan's VBR σ (a CBR configuration's source has 0).
    vbr_spread: f64,
    frame_bytes: Vec<usize>,
    sc: VodScenario,
    cc: CcAlgorithm,
    cross_text: Vec<String>,
    stated: Option<String>,
    notes: Option<String>,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct VodResult {
    /// Seed.
    pub seed: u64,
    /// The initiation latency for no violation (s); `None`: none on the
    /// grid had none.
    pub initiation_zero_s: Option<f64>,
    /// Violations (%) at each grid point.
    pub curve: Vec<(f64, f64)>,
    /// The [TCP-video] `T - D` estimate from the transfer at the largest grid
    /// point (or the single transfer).
    pub formula_initiation_s: Option<f64>,
    /// The video's goodput over that transfer (kbit/s).
    pub goodput_kbps: Option<f64>,
    /// How far above the smallest latency for none `initiation_zero_s` may
    /// be (the bisection's last interval; 0 for a sender that ignores
    /// deadlines, whose figure is exact).
    pub resolution_s: f64,
    /// Transfers simulated.
    pub transfers: u32,
    /// Virtual seconds simulated.
    pub sim_seconds: f64,
}

/// The metrics claims may use.
pub const METRICS: [&str; 6] = [
    "initiation_zero_s",
    "formula_initiation_s",
    "goodput_kbps",
    "violations_pct_at_1s",
    "violations_pct_at_2s",
    "violations_pct_at_4s",
];

fn at_grid(r: &VodResult, secs: f64) -> Option<f64> {
    r.curve
        .iter()
        .find(|(i, _)| (i - secs).abs() < 1e-9)
        .map(|(_, v)| *v)
}

impl VodPoint {
    fn transfer(&self, seed: u64, initiation: Duration) -> Result<(VodArrivals, f64), String> {
        let mut sc = self.sc.clone();
        sc.initiation = initiation;
        sc.path.seed = seed;
        let r = sc.run()?;
        if let Some(e) = &r.messages.error {
            return Err(format!("{} seed {seed}: {e}", self.transport));
        }
        let secs = r.messages.sim_time.as_secs_f64();
        Ok((r.arrivals, secs))
    }
}

impl Adapter for Vod {
    type Params = VodPoint;
    type Output = VodResult;

    fn name(&self) -> &'static str {
        "vod"
    }

    fn metrics(&self) -> &'static [&'static str] {
        &METRICS
    }

    fn configure(&self, point: &Point) -> Result<VodPoint, String> {
        let raw: Raw = point.typed()?;
        let g = GenericTransport::parse(&raw.transport)
            .ok_or_else(|| format!("unknown transport '{}'", raw.transport))?;
        let GenericTransport::Tcp(d) = g else {
            return Err(format!(
                "{}: the vod adapter runs TCP and its deadline variants (tcp, tcp-deadline, \
                 hollywood, hollywood-ir, hollywood-ooo)",
                raw.transport
            ));
        };
        let aware = d.sender_ir() || d == Transport::Deadline;
        let cc = CcAlgorithm::parse(&raw.cc)?;
        let size = parse_size(&raw.size)? as usize;
        if size == 0 || size > 1400 {
            return Err("size must be between 1 and 1400 bytes (one packet)".into());
        }
        let duration = parse_duration(&raw.duration)?;
        let frames = (duration.as_secs_f64() * raw.fps).round();
        if !(1.0..=1_000_000.0).contains(&frames) {
            return Err(format!(
                "duration × fps gives {frames} frames: use between 1 and 1 000 000"
            ));
        }
        let spread = match raw.video.as_str() {
            "cbr" => 0.0,
            "vbr" => raw.scene_spread,
            other => return Err(format!("video must be cbr or vbr, not '{other}'")),
        };
        if raw.video == "vbr" && spread <= 0.0 {
            return Err("vbr needs a positive scene_spread".into());
        }
        let source = VodSource {
            fps: raw.fps,
            frames: frames as u32,
            mean_rate_bps: parse_rate(&raw.mean_rate)?,
            scene_spread: spread,
            scene_mean: parse_duration(&raw.scene_mean)?,
            gop: raw.gop,
            iframe_ratio: raw.iframe_ratio,
            trace_seed: raw.trace_seed,
        };
        source.validate()?;
        let grid = raw
            .grid
            .iter()
            .map(|s| parse_duration(s))
            .collect::<Result<Vec<_>, _>>()?;
        if grid.is_empty() || grid.len() > 64 {
            return Err("grid lists 1 to 64 initiation latencies".into());
        }
        if grid.windows(2).any(|w| w[0] >= w[1]) {
            return Err("grid must increase".into());
        }
        if raw.refine > 12 {
            return Err("refine is at most 12 bisection steps".into());
        }
        if raw.clients > 50 {
            return Err("at most 50 clients".into());
        }
        let mut cross: Vec<CrossTraffic> = raw
            .cross
            .iter()
            .map(|c| parse_cross(c))
            .collect::<Result<_, _>>()?;
        cross.extend((0..raw.clients).map(|_| CrossTraffic::Bulk));
        let rate = parse_rate(&raw.rate)?;
        let (x, x_text) = match raw.x_axis.as_str() {
            "rate" => (rate as f64 / 1e3, raw.rate.clone()),
            "clients" => (f64::from(raw.clients), raw.clients.to_string()),
            other => return Err(format!("x_axis must be rate or clients, not '{other}'")),
        };
        let transport = g.with_cc(cc);
        let frame_bytes = source.frame_bytes();
        let sc = VodScenario {
            frame_bytes: frame_bytes.clone(),
            fps: raw.fps,
            packet_size: size,
            initiation: Duration::ZERO,
            path: MessagesScenario {
                rate_bps: rate,
                uplink_bps: rate,
                rtt: parse_duration(&raw.one_way)? * 2,
                queue_bytes: parse_size(&raw.queue)? as usize,
                cross,
                transport,
                base: Config {
                    cc,
                    ..Config::default()
                },
                ..MessagesScenario::default()
            },
        };
        for st in &raw.stated {
            if GenericTransport::parse(&st.transport).is_none() {
                return Err(format!("stated: unknown transport '{}'", st.transport));
            }
        }
        let stated = raw
            .stated
            .iter()
            .find(|st| {
                GenericTransport::parse(&st.transport).map(|t| t.name()) == Some(g.name())
                    && st.video == raw.video
                    && st.at == x_text
            })
            .map(|st| st.text.clone());
        Ok(VodPoint {
            scenario_index: point.scenario_index,
            transport: g.name(),
            aware,
            video: raw.video,
            x,
            x_text,
            x_axis: raw.x_axis,
            grid,
            refine: raw.refine,
            source,
            vbr_spread: raw.scene_spread,
            frame_bytes,
            sc,
            cc,
            cross_text: raw.cross,
            stated,
            notes: raw.notes,
        })
    }

    fn run(&self, p: &VodPoint, seed: u64, _keep: bool) -> Result<VodResult, String> {
        let mut transfers = 0;
        let mut sim = 0.0;
        let mut resolution = 0.0;
        let mut go = |i: Duration| -> Result<VodArrivals, String> {
            let (a, s) = p.transfer(seed, i)?;
            transfers += 1;
            sim += s;
            Ok(a)
        };
        let secs = |d: Duration| d.as_secs_f64();
        let (curve, zero, last) = if !p.aware {
            let a = go(Duration::ZERO)?;
            let curve: Vec<(f64, f64)> = p
                .grid
                .iter()
                .map(|&i| (secs(i), a.violations_pct(i)))
                .collect();
            (curve, a.zero_violation_initiation().map(secs), a)
        } else {
            let mut curve = Vec::with_capacity(p.grid.len());
            let mut last = None;
            for &i in &p.grid {
                let a = go(i)?;
                curve.push((secs(i), a.violations_pct(i)));
                last = Some(a);
            }
            let last = last.expect("the grid is not empty");
            // The first grid point after the last one with violations.
            let k = curve
                .iter()
                .rposition(|(_, v)| *v > 0.0)
                .map_or(0, |i| i + 1);
            let zero = match p.grid.get(k) {
                None => None,
                Some(&top) => {
                    let mut hi = top;
                    let mut lo = if k == 0 {
                        Duration::ZERO
                    } else {
                        p.grid[k - 1]
                    };
                    for _ in 0..p.refine {
                        let mid = (lo + hi) / 2;
                        if go(mid)?.violations_pct(mid) == 0.0 {
                            hi = mid;
                        } else {
                            lo = mid;
                        }
                    }
                    resolution = secs(hi - lo);
                    Some(secs(hi))
                }
            };
            (curve, zero, last)
        };
        Ok(VodResult {
            seed,
            initiation_zero_s: zero,
            curve,
            formula_initiation_s: last.formula_initiation_s(),
            goodput_kbps: last.goodput_bps().map(|g| g / 1e3),
            resolution_s: resolution,
            transfers,
            sim_seconds: sim,
        })
    }

    fn metric(&self, out: &VodResult, name: &str) -> Option<f64> {
        match name {
            "initiation_zero_s" => out.initiation_zero_s,
            "formula_initiation_s" => out.formula_initiation_s,
            "goodput_kbps" => out.goodput_kbps,
            "violations_pct_at_1s" => at_grid(out, 1.0),
            "violations_pct_at_2s" => at_grid(out, 2.0),
            "violations_pct_at_4s" => at_grid(out, 4.0),
            _ => None,
        }
    }

    fn sim_seconds(&self, out: &VodResult) -> f64 {
        out.sim_seconds
    }

    fn finish(&self, done: &mut Finished<'_, Self>, ctx: &Context<'_>) -> Result<Written, String> {
        finish(done, ctx)
    }
}

/// One configuration over seeds.
#[derive(Serialize, Debug, Clone)]
struct ConfigSummary {
    transport: &'static str,
    video: String,
    x: f64,
    x_text: String,
    /// Mean over the seeds that found one; `found` says how many did.
    initiation_zero_s: Stat,
    found: usize,
    seeds: usize,
    /// The sender uses deadlines (its latency for none is searched).
    aware: bool,
    /// The largest bisection interval over seeds (s).
    resolution_s: f64,
    formula_initiation_s: Stat,
    goodput_kbps: Stat,
    /// Mean violations (%) per grid point.
    curve: Vec<(f64, f64)>,
    stated: Option<String>,
    per_seed: Vec<VodResult>,
}

#[derive(Serialize, Debug, Clone)]
struct ScenarioSummary {
    name: String,
    x_axis: String,
    rate: String,
    cross: Vec<String>,
    configs: Vec<ConfigSummary>,
}

#[derive(Serialize, Debug, Clone)]
struct Summary {
    experiment: String,
    description: String,
    seeds: Vec<u64>,
    runs: usize,
    transfers: u32,
    jobs: usize,
    sim_seconds: f64,
    wall_seconds: f64,
    scenarios: Vec<ScenarioSummary>,
    claims: Vec<ClaimResult>,
}

const COLORS: [Rgb; 5] = [
    Rgb(31, 119, 180),
    Rgb(214, 39, 40),
    Rgb(44, 160, 44),
    Rgb(148, 103, 189),
    Rgb(255, 127, 14),
];

fn finish(done: &mut Finished<'_, Vod>, ctx: &Context<'_>) -> Result<Written, String> {
    let Some(first) = done.configs.first().map(|c| c.params.clone()) else {
        return Err("the plan has no configuration".into());
    };
    let mut scenarios = Vec::new();
    let mut seeds = Vec::new();
    let mut transfers = 0;
    for (si, s) in done.plan.scenarios.iter().enumerate() {
        let mut configs = Vec::new();
        let mut meta = None;
        for c in done
            .configs
            .iter()
            .filter(|c| c.params.scenario_index == si)
        {
            let p = &c.params;
            meta.get_or_insert_with(|| {
                (
                    p.x_axis.clone(),
                    format!("{} kbit/s", p.sc.path.rate_bps / 1000),
                    p.cross_text.clone(),
                )
            });
            let runs: Vec<VodResult> = c.runs.iter().map(|(_, r)| r.clone()).collect();
            for r in &runs {
                transfers += r.transfers;
                if !seeds.contains(&r.seed) {
                    seeds.push(r.seed);
                }
            }
            let zeros: Vec<f64> = runs.iter().filter_map(|r| r.initiation_zero_s).collect();
            let curve = p
                .grid
                .iter()
                .enumerate()
                .map(|(k, i)| {
                    let v: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r.curve.get(k))
                        .map(|x| x.1)
                        .collect();
                    (i.as_secs_f64(), Stat::of(&v).mean)
                })
                .collect();
            configs.push(ConfigSummary {
                transport: p.transport,
                video: p.video.clone(),
                x: p.x,
                x_text: p.x_text.clone(),
                initiation_zero_s: Stat::of(&zeros),
                found: zeros.len(),
                seeds: runs.len(),
                aware: p.aware,
                resolution_s: runs.iter().map(|r| r.resolution_s).fold(0.0, f64::max),
                formula_initiation_s: Stat::of(
                    &runs
                        .iter()
                        .filter_map(|r| r.formula_initiation_s)
                        .collect::<Vec<_>>(),
                ),
                goodput_kbps: Stat::of(
                    &runs
                        .iter()
                        .filter_map(|r| r.goodput_kbps)
                        .collect::<Vec<_>>(),
                ),
                curve,
                stated: p.stated.clone(),
                per_seed: runs,
            });
        }
        let (x_axis, rate, cross) = meta.unwrap_or_default();
        scenarios.push(ScenarioSummary {
            name: s.name.clone(),
            x_axis,
            rate,
            cross,
            configs,
        });
    }
    seeds.sort_unstable();
    let figures = plots(&scenarios, ctx)?;
    let summary = Summary {
        experiment: done.plan.name.clone(),
        description: done.plan.description.clone(),
        seeds,
        runs: done.runs,
        transfers,
        jobs: done.jobs,
        sim_seconds: done.sim_seconds,
        wall_seconds: done.wall_seconds(),
        scenarios,
        claims: done.claims.clone(),
    };
    let md = summary_md(&summary);
    let readme = readme(&summary, &first, &md, &figures, ctx.command);
    let summary_json = done.stamp(&Vod, &summary)?;
    Ok(Written {
        summary_json,
        summary_md: md,
        readme,
        figures,
    })
}

fn transports(configs: &[ConfigSummary]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for c in configs {
        if !v.contains(&c.transport) {
            v.push(c.transport);
        }
    }
    v
}

fn videos(configs: &[ConfigSummary]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in configs {
        if !v.contains(&c.video) {
            v.push(c.video.clone());
        }
    }
    v
}

fn plots(scenarios: &[ScenarioSummary], ctx: &Context<'_>) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    for s in scenarios {
        let ts = transports(&s.configs);
        let xs: Vec<f64> = {
            let mut v: Vec<f64> = s.configs.iter().map(|c| c.x).collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        };
        // Violations against initiation latency, one panel per video kind
        // at the scenario's first x value ([TCP-video] Graphs 6.3/6.4, 8.2/8.3).
        let mut charts = Vec::new();
        for video in videos(&s.configs) {
            let series: Vec<Series> = ts
                .iter()
                .enumerate()
                .filter_map(|(k, t)| {
                    let c = s
                        .configs
                        .iter()
                        .find(|c| c.transport == *t && c.video == video && c.x == xs[0])?;
                    Some(Series::new(
                        *t,
                        c.curve.clone(),
                        Style::Line,
                        COLORS[k % COLORS.len()],
                    ))
                })
                .collect();
            charts.push(Chart {
                title: format!(
                    "{}: {} video, {} — deadline violations",
                    s.name,
                    video.to_uppercase(),
                    s.configs
                        .iter()
                        .find(|c| c.x == xs[0])
                        .map_or(String::new(), |c| axis_text(&s.x_axis, &c.x_text))
                ),
                x_label: "initiation latency (s)".into(),
                y_label: "frames past their deadline (%)".into(),
                x_range: None,
                y_range: Some((0.0, 100.0)),
                series,
                hlines: Vec::new(),
                regions: Vec::new(),
            });
        }
        let file = format!("{}-violations.png", s.name);
        plot::draw_stacked(&charts, &ctx.out.join(&file)).map_err(|e| e.to_string())?;
        figures.push(Figure {
            file,
            caption: format!(
                "{}: % of frames past their deadline against the initiation latency, per \
                 transport (mean over seeds)",
                s.name
            ),
            reproduces: Some("[TCP-video] Graphs 6.3, 6.4, 8.2, 8.3".into()),
        });
        if xs.len() < 2 {
            continue;
        }
        // Initiation latency for no violation along the x axis, one panel
        // per video kind.
        let mut charts = Vec::new();
        for video in videos(&s.configs) {
            let mut series = Vec::new();
            for (k, t) in ts.iter().enumerate() {
                let pts: Vec<(f64, f64)> = s
                    .configs
                    .iter()
                    .filter(|c| c.transport == *t && c.video == video && c.found == c.seeds)
                    .map(|c| (c.x, c.initiation_zero_s.mean))
                    .collect();
                if !pts.is_empty() {
                    series.push(Series::new(*t, pts, Style::Line, COLORS[k % COLORS.len()]));
                }
            }
            charts.push(Chart {
                title: format!(
                    "{}: {} video — initiation latency for no deadline violation",
                    s.name,
                    video.to_uppercase()
                ),
                x_label: match s.x_axis.as_str() {
                    "clients" => "competing bulk TCP clients".into(),
                    _ => "bottleneck rate (kbit/s)".into(),
                },
                y_label: "initiation latency (s)".into(),
                x_range: None,
                y_range: None,
                series,
                hlines: Vec::new(),
                regions: Vec::new(),
            });
        }
        let file = format!("{}-initiation.png", s.name);
        plot::draw_stacked(&charts, &ctx.out.join(&file)).map_err(|e| e.to_string())?;
        figures.push(Figure {
            file,
            caption: format!(
                "{}: the initiation latency needed for no deadline violation against the {} \
                 (mean over seeds that found one)",
                s.name,
                if s.x_axis == "clients" {
                    "number of competing clients"
                } else {
                    "bottleneck rate"
                }
            ),
            reproduces: Some(if s.x_axis == "clients" {
                "[TCP-video] Graph 6.2".into()
            } else {
                "[TCP-video] Graphs 6.1, 8.1".into()
            }),
        });
    }
    Ok(figures)
}

fn axis_text(axis: &str, x: &str) -> String {
    if axis == "clients" {
        format!("{x} clients")
    } else {
        format!("bottleneck {x}")
    }
}

fn zero_text(c: &ConfigSummary) -> String {
    let missing = if c.aware {
        "none on the grid"
    } else {
        "a frame never arrived"
    };
    if c.found == 0 {
        return missing.into();
    }
    let mut t = c.initiation_zero_s.pm();
    if c.resolution_s > 0.0 {
        let _ = write!(t, " (+≤{:.2})", c.resolution_s);
    }
    if c.found < c.seeds {
        let _ = write!(
            t,
            " ({} of {} seeds; the rest: {missing})",
            c.found, c.seeds
        );
    }
    t
}

fn summary_md(s: &Summary) -> String {
    let mut m = String::new();
    let _ = writeln!(
        m,
        "# {}: results over seeds {}–{}\n",
        s.experiment,
        s.seeds.first().unwrap_or(&0),
        s.seeds.last().unwrap_or(&0)
    );
    let _ = writeln!(
        m,
        "Mean ± sample sd over seeds. *for none*: the initiation latency at which no frame \
         misses its deadline (s; for a sender that uses deadlines found by bisection, \
         at most the bracketed amount above the smallest); *T − D*: the [TCP-video] estimate, the time to send the file at \
         the measured goodput minus its playback time; *goodput*: the video's bytes over the \
         transfer; *violated at I*: % of frames past their deadline (or never whole) with \
         initiation latency I. *seed*: the seed document's figure for that configuration, \
         as printed (its rates are in \"Mb/s\", ours in kbit/s: see the notes).\n"
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            m,
            "## {} ({}; cross traffic: {})\n",
            sc.name,
            if sc.x_axis == "clients" {
                format!("bottleneck {}", sc.rate)
            } else {
                "bottleneck rate swept".into()
            },
            if sc.cross.is_empty() {
                "none besides the clients".into()
            } else {
                sc.cross.join(", ")
            }
        );
        let grid: Vec<f64> = sc
            .configs
            .first()
            .map(|c| c.curve.iter().map(|x| x.0).collect())
            .unwrap_or_default();
        let head: Vec<String> = grid
            .iter()
            .map(|g| format!("violated at {g} s %"))
            .collect();
        let _ = writeln!(
            m,
            "| {} | video | transport | for none s | T − D s | goodput kbit/s | {} | seed |",
            if sc.x_axis == "clients" {
                "clients"
            } else {
                "bottleneck"
            },
            head.join(" | ")
        );
        let _ = writeln!(
            m,
            "|---|---|---|---|---|---|{}---|",
            "---|".repeat(grid.len())
        );
        for c in &sc.configs {
            let cells: Vec<String> = c.curve.iter().map(|x| format!("{:.1}", x.1)).collect();
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {:.0} | {} | {} |",
                c.x_text,
                c.video,
                c.transport,
                zero_text(c),
                if c.formula_initiation_s.n == 0 {
                    "–".to_string()
                } else {
                    format!("{:.1}", c.formula_initiation_s.mean)
                },
                c.goodput_kbps.mean,
                cells.join(" | "),
                c.stated.clone().unwrap_or_default()
            );
        }
        let _ = writeln!(m);
    }
    m.push_str(&crate::claims::markdown_section(&s.claims));
    m
}

fn readme(s: &Summary, first: &VodPoint, md: &str, figures: &[Figure], command: &str) -> String {
    let src = &first.source;
    let total: usize = first.frame_bytes.iter().sum();
    let mut r = String::new();
    let _ = writeln!(r, "# {}\n", s.description);
    let _ = writeln!(
        r,
        "Produced by `{command}` in {:.2} s of wall time ({} runs, {} transfers, {:.0} s \
         simulated, {} threads). Every number and plot here comes from that run; the \
         simulator is deterministic, so the same command gives the same numbers.\n",
        s.wall_seconds, s.runs, s.transfers, s.sim_seconds, s.jobs
    );
    let _ = writeln!(r, "## Setup\n");
    let _ = writeln!(
        r,
        "Video on demand (`hollywood_media::vod`): the whole video ({} frames at {} fps, {:.1} \
         MB, mean {} kbit/s) is handed to the transport when the connection opens, in \
         messages of at most {} bytes; frame k is due I + k/fps after that, I being the \
         initiation latency. CBR: every frame the same size. VBR: scenes of exponential \
         length (mean {:?}) whose frames are a log-normal multiple (σ = {}) of the mean, an \
         I-frame every {} frames {} times its scene's P-frames, rescaled to the same mean \
         rate, drawn once (trace seed {}) so every run sends the same video. The path: \
         sender → bottleneck (one-way {} ms, drop-tail queue of {} bytes) → receiver; cross \
         traffic from its own hosts over the same bottleneck. Congestion control: {} for \
         every TCP flow (the seed's video flow was TCP-Reno). Transports: standard TCP (the \
         sender ignores deadlines: one transfer gives every point of a curve), [TCP-video] \
         §7.2's deadline TCP (`tcp-deadline`: drops what is past its deadline before \
         sending, skips a retransmission that is, and tells the receiver in a TCP option; \
         the sequence hole makes it undeployable) and TCP Hollywood (drops the same before \
         sending, retransmits inconsistently, delivers out of order): one transfer per \
         initiation latency. Seeds {:?}.\n",
        src.frames,
        src.fps,
        total as f64 / 1e6,
        src.mean_rate_bps / 1000,
        first.sc.packet_size,
        src.scene_mean,
        first.vbr_spread,
        src.gop,
        src.iframe_ratio,
        src.trace_seed,
        first.sc.path.rtt.as_millis() / 2,
        first.sc.path.queue_bytes,
        first.cc.name(),
        s.seeds
    );
    r.push_str(&crate::report::readme_tail(
        figures,
        md,
        first.notes.as_deref(),
    ));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn points(extra: &str) -> Result<Vec<VodPoint>, String> {
        let text = format!(
            "name = \"t\"\nadapter = \"vod\"\nseeds = 1\nduration = \"4s\"\n\
             one_way = \"20ms\"\nrate = \"1mbit\"\nmean_rate = \"200kbit\"\n\
             grid = [\"100ms\", \"1s\"]\n{extra}\n[[scenario]]\nname = \"a\"\n"
        );
        let plan = Plan::parse(&text, None).map_err(|e| e.to_string())?;
        plan.points().map(|p| Vod.configure(p)).collect()
    }

    #[test]
    fn a_plan_configures_transfers_and_rejects_what_it_does_not_understand() {
        let p = points("video = \"vbr\"\ntransports = [\"tcp\", \"tcp-deadline\", \"hollywood\"]")
            .expect("valid");
        assert_eq!(p.len(), 3);
        assert!(!p[0].aware && p[1].aware && p[2].aware);
        assert_eq!(p[0].source.frames, 120);
        assert!(p[0].source.scene_spread > 0.0);
        for (bad, why) in [
            ("video = \"svc\"\ntransport = \"tcp\"", "cbr or vbr"),
            ("video = \"cbr\"\ntransport = \"udp\"", "runs TCP"),
            (
                "video = \"cbr\"\ntransport = \"tcp\"\nx_axis = \"loss\"",
                "x_axis",
            ),
            (
                "video = \"cbr\"\ntransport = \"tcp\"\nsize = \"9000\"",
                "size",
            ),
            (
                "video = \"cbr\"\ntransport = \"tcp\"\nrefine = 40",
                "refine",
            ),
            ("video = \"cbr\"\ntransport = \"tcp\"\nspeed = 2", "speed"),
        ] {
            let e = points(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = points("video = \"cbr\"\ntransport = \"tcp\"\ngrid = [\"1s\", \"100ms\"]");
        assert!(e.is_err());
    }

    #[test]
    fn standard_tcp_gives_the_whole_curve_from_one_transfer_and_deadline_senders_search() {
        let p = points("video = \"cbr\"\ntransports = [\"tcp\", \"tcp-deadline\"]").expect("valid");
        let tcp = Vod.run(&p[0], 1, true).expect("runs");
        assert_eq!(tcp.transfers, 1);
        assert_eq!(tcp.curve.len(), 2);
        // 200 kbit/s over 1 Mbit/s: the video arrives faster than it plays.
        let z = tcp.initiation_zero_s.expect("every frame arrived");
        assert!(z > 0.02 && z < 0.2, "{z}");
        assert_eq!(tcp.curve[1].1, 0.0);
        let dl = Vod.run(&p[1], 1, true).expect("runs");
        // Grid of two; 100 ms is already enough, so bisection runs in [0, 100 ms].
        assert_eq!(dl.transfers, 2 + 3);
        let z = dl.initiation_zero_s.expect("found");
        assert!(z <= 0.1, "{z}");
    }
}
