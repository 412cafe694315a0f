//! Live video (issue 12): the JSON summary of one stream over one transport
//! ([`VideoReport`], used by `hollywood video` too) and the `video`
//! [`Adapter`] that runs a plan of streams — the [QUICsilver-2019] QUICsilver
//! experiment is `scenarios/quicsilver.toml`, the [RTP-QUIC] stream mappings
//! `scenarios/rtp-quic.toml`.
//!
//! Plan parameters (plan level, per scenario or swept): `fps` (60), `gop`
//! (10), `iframe_packets` (4), `pframe_packets` (1), `pframe_packets_max`
//! (VBR, 0 = CBR), `redundancy` (the fraction of a frame's packets it may
//! miss and still decode, 0), `size` (1232),
//! `duration` (300s), `one_way`, `rate` (100mbit), `loss` (0), `queue`
//! (1000000), `cross` (cross traffic on the bottleneck: `["bulk",
//! "cbr:5mbit", "onoff:5mbit:500ms:500ms"]`), `buffer` (frames, 4), `cc` (bbr), `resume` (catch-up | shift),
//! `frame_reference` (gop | previous), `player` (auto | stall | skip),
//! `transport`; for the report: `scatter_loss` (the loss whose runs get a
//! per-packet plot; `scatter_one_way` narrows it to one delay), `scatter`
//! (`latency` by time, or `hol`: head-of-line-blocking delay by packet
//! number, `scatter_packets = [from, to]`), `hol_order` (transports whose
//! head-of-line delay, summed over a scenario's lossy configurations, must
//! decrease in that order) and `hol_near` (two transports whose sums must be
//! within 1.5× of each other, also checked at ≤ 1 % loss), `delay_plots`
//! (total head-of-line and sending delay against loss), `stated` (the
//! seed's own numbers for a transport and loss, shown beside ours) and
//! `notes` (Markdown for the README: why our numbers differ). The stream's
//! keys are [`VideoParams`] (shared with `hollywood sim video`); the rest
//! are this adapter's own.
//!
//! Writes, beside the runner's files: `summary.json` and `summary.md` (per
//! scenario, loss and transport: useful frames, stalls, discrepancy, delay
//! per stall, skipped frames, packets on time next to the oracle,
//! application latency, with the seed's figures where the plan states
//! them), `latency-<scenario>.png` (application latency of every packet of
//! the first seed at `scatter_loss`, one panel per transport, as seed
//! 002's Figs. 6–7) and a `README.md`.

use crate::claims::ClaimResult;
use crate::plan::Point;
use crate::plot::{self, Chart, HLine, Rgb, Series, Style};
use crate::report::Figure;
use crate::run::{Adapter, Context, Finished, Written};
use crate::stats::{Percentiles, Stat};
use crate::units::{parse_duration, parse_loss_model};
use hollywood_media::scenario::spans_ms_by_id;
use hollywood_media::video::{OnMissing, Reference, Resume, VideoRun, VideoScenario};
use hollywood_media::GenericTransport;
use hollywood_tcp::CcAlgorithm;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub mod params;

pub use crate::units::Spelling;
pub use params::VideoParams;

/// One stream over one transport.
#[derive(Serialize, Debug, Clone)]
pub struct VideoReport {
    /// Transport.
    pub transport: String,
    /// stall or skip.
    pub player: &'static str,
    /// Frames sent.
    pub frames: u64,
    /// Played and decodable (the [QUICsilver-2019] useful frames).
    pub useful_frames: u64,
    /// Useful frames / frames sent, percent: the headline figure.
    pub useful_frames_pct: f64,
    /// Played (on time or after a stall).
    pub played: u64,
    /// Played after their original playout time.
    pub delayed: u64,
    /// Concealed.
    pub skipped: u64,
    /// Playback pauses.
    pub stalls: u64,
    /// Cumulative playback discrepancy: the sum of the pauses (s).
    pub discrepancy_s: f64,
    /// Discrepancy per stall (ms; null without stalls).
    pub per_stall_ms: Option<f64>,
    /// Longest pause (ms).
    pub longest_stall_ms: f64,
    /// Packets sent (one message each).
    pub packets: u64,
    /// Packets whose first transmission the network dropped.
    pub first_tx_dropped: u64,
    /// Packets delivered by their frame's deadline (the message lifetime).
    pub packets_on_time: u64,
    /// What an oracle transport would deliver by then.
    pub oracle_packets_on_time: u64,
    /// Packet lifetime: one-way delay + buffer (ms).
    pub lifetime_ms: f64,
    /// Application latency per delivered packet: generation → delivery (ms).
    pub app_latency_ms: Percentiles,
    /// Stack latency per delivered packet: generation → the receiving
    /// stack holding all of it (ms; [QUICsilver-2019]).
    pub stack_latency_ms: Percentiles,
    /// Head-of-line-blocking delay, summed over delivered packets: the
    /// stack held a packet but could not hand it over (s; [RTP-QUIC] §5.1).
    pub hol_total_s: f64,
    /// Delivered packets that waited behind missing data (> 0.1 ms).
    pub hol_blocked_packets: u64,
    /// Sending delay, summed over sent packets: generation → its last
    /// byte first on the wire (s; [RTP-QUIC] §5.2).
    pub sending_delay_total_s: f64,
    /// Sending delay per packet (ms).
    pub sending_delay_ms: Percentiles,
    /// Messages delivered corrupt or twice (must be 0).
    pub corrupt_or_duplicate: u64,
    /// Seed.
    pub seed: u64,
    /// Virtual seconds simulated.
    pub sim_seconds: f64,
    /// Wall-clock milliseconds.
    pub wall_ms: f64,
    /// Connection failure, if any.
    pub error: Option<String>,
    /// Per cross-traffic flow: its throughput over the run (Mb/s).
    pub cross_mbps: Vec<f64>,
    /// Real video: the receiver's picture against the source (null for a
    /// synthetic source).
    pub quality: Option<crate::media::Quality>,
    /// Real video: the encoded clip, all frames shown, against the source
    /// (the best any transport can do).
    pub encoded_quality: Option<crate::media::Quality>,
}

impl VideoReport {
    /// Summarise a stream.
    pub fn of(transport: &str, run: &VideoRun, seed: u64, wall_ms: f64) -> VideoReport {
        let m = &run.messages;
        let r = &run.report;
        let hol = m.hol_ms();
        let sending = m.sending_delay_ms();
        VideoReport {
            transport: transport.to_string(),
            player: match run.on_missing {
                OnMissing::Stall => "stall",
                OnMissing::Skip => "skip",
            },
            frames: r.frames,
            useful_frames: r.useful,
            useful_frames_pct: r.useful_pct(),
            played: r.played,
            delayed: r.delayed,
            skipped: r.skipped,
            stalls: r.stalls,
            discrepancy_s: r.discrepancy.as_secs_f64(),
            per_stall_ms: (r.stalls > 0)
                .then(|| r.discrepancy.as_secs_f64() * 1000.0 / r.stalls as f64),
            longest_stall_ms: r.longest_stall.as_secs_f64() * 1000.0,
            packets: m.generated.iter().filter(|g| g.is_some()).count() as u64,
            first_tx_dropped: m.first_tx_dropped.iter().filter(|d| **d).count() as u64,
            packets_on_time: m.on_time.on_time,
            oracle_packets_on_time: m.on_time.oracle_on_time,
            lifetime_ms: run.lifetime.as_secs_f64() * 1000.0,
            app_latency_ms: Percentiles::of(m.delays_ms()),
            stack_latency_ms: Percentiles::of(m.stack_latency_ms()),
            hol_total_s: hol.iter().sum::<f64>() / 1e3,
            hol_blocked_packets: hol.iter().filter(|h| **h > 0.1).count() as u64,
            sending_delay_total_s: sending.iter().sum::<f64>() / 1e3,
            sending_delay_ms: Percentiles::of(sending),
            corrupt_or_duplicate: m.corrupt_delivered + m.duplicates_delivered,
            seed,
            sim_seconds: m.sim_time.as_secs_f64(),
            wall_ms,
            error: m.error.clone(),
            cross_mbps: m
                .cross_delivered_bytes
                .iter()
                .map(|b| *b as f64 * 8.0 / m.sim_time.as_secs_f64().max(1e-9) / 1e6)
                .collect(),
            quality: None,
            encoded_quality: None,
        }
    }
}

/// Parse `catch-up` or `shift`.
pub fn parse_resume(s: &str) -> Result<Resume, String> {
    match s {
        "catch-up" => Ok(Resume::CatchUp),
        "shift" => Ok(Resume::Shift),
        _ => Err(format!("unknown resume '{s}': use catch-up or shift")),
    }
}

/// Parse `gop` or `previous`.
pub fn parse_reference(s: &str) -> Result<Reference, String> {
    match s {
        "gop" => Ok(Reference::Gop),
        "previous" => Ok(Reference::Previous),
        _ => Err(format!("unknown reference '{s}': use gop or previous")),
    }
}

/// Parse `auto` (`None`: by transport), `stall` or `skip`.
pub fn parse_player(s: &str) -> Result<Option<OnMissing>, String> {
    match s {
        "auto" => Ok(None),
        "stall" => Ok(Some(OnMissing::Stall)),
        "skip" => Ok(Some(OnMissing::Skip)),
        _ => Err(format!("unknown player '{s}': use auto, stall or skip")),
    }
}

/// The adapter (`adapter = "video"` in a plan).
pub struct Video;

/// The seed's own figure for a transport and loss, shown beside ours.
#[derive(Deserialize, Serialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Stated {
    /// The transport it is for.
    pub transport: String,
    /// The loss it is for, as written in the plan (`1%`).
    pub loss: String,
    /// Useful frames (%).
    pub useful_pct: Option<f64>,
    /// Stalls.
    pub stalls: Option<f64>,
    /// Playback discrepancy (s).
    pub discrepancy_s: Option<f64>,
}

impl Stated {
    fn text(&self) -> String {
        let mut v = Vec::new();
        if let Some(u) = self.useful_pct {
            v.push(format!("{u} %"));
        }
        if let Some(s) = self.stalls {
            v.push(format!("{s} stalls"));
        }
        if let Some(d) = self.discrepancy_s {
            v.push(format!("{d} s"));
        }
        v.join(", ")
    }
}

fn d_scatter() -> String {
    "latency".into()
}

/// The plan's own keys (what to run over and what to report); every other
/// key of a point is a [`VideoParams`] key.
const PLAN_KEYS: [&str; 10] = [
    "transport",
    "scatter_loss",
    "scatter_one_way",
    "scatter",
    "scatter_packets",
    "hol_order",
    "hol_near",
    "delay_plots",
    "stated",
    "notes",
];

/// The plan's own keys, as written in the plan.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct PlanKeys {
    transport: String,
    scatter_loss: Option<String>,
    /// With `scatter_loss`: only the configuration at this one-way delay.
    scatter_one_way: Option<String>,
    /// What the scatter shows: `latency` (application latency by time,
    /// [QUICsilver-2019] Figs. 6-7) or `hol` (head-of-line-blocking delay by packet
    /// number, [RTP-QUIC] Fig. 5).
    #[serde(default = "d_scatter")]
    scatter: String,
    /// Packet numbers the `hol` scatter shows, `[from, to]`.
    scatter_packets: Option<[u32; 2]>,
    /// Transports whose total head-of-line-blocking delay, summed over the
    /// lossy configurations of the plan, must decrease in this order
    /// ([RTP-QUIC] Fig. 4); checked in the report.
    #[serde(default)]
    hol_order: Vec<String>,
    /// Two transports whose summed head-of-line-blocking delay must be
    /// within a factor of 1.5 of each other ([RTP-QUIC]: TCP ≈ QUIC_SS).
    #[serde(default)]
    hol_near: Vec<String>,
    /// Plot total head-of-line-blocking and sending delay against loss,
    /// one panel per transport ([RTP-QUIC] Figs. 4 and 6).
    #[serde(default)]
    delay_plots: bool,
    #[serde(default)]
    stated: Vec<Stated>,
    notes: Option<String>,
}

/// One configuration: a stream scenario (seed filled in per run).
#[derive(Debug, Clone)]
pub struct VideoPoint {
    /// The scenario's name.
    pub scenario: String,
    /// The transport's name.
    pub transport: &'static str,
    /// The loss as written in the plan.
    pub loss: String,
    /// The stream.
    pub sc: VideoScenario,
    /// The congestion controller.
    pub cc: CcAlgorithm,
    /// Plot this configuration's packets (its loss is `scatter_loss`).
    pub scatter: bool,
    /// The scatter shows head-of-line-blocking delay by packet number
    /// (these packets) instead of latency by time.
    pub hol_scatter: Option<[u32; 2]>,
    /// The long-run loss fraction (the head-of-line checks and plots).
    pub loss_rate: f64,
    /// Report-level options (the same on every configuration).
    pub report: ReportOptions,
    /// The seed's figures for this transport and loss.
    pub stated: Option<Stated>,
    /// Every stated row of the scenario (checked to match a configuration).
    pub stated_rows: Vec<Stated>,
    /// The plan's notes for the README.
    pub notes: Option<String>,
}

/// Options for the report as a whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportOptions {
    /// Transports in decreasing order of summed head-of-line delay.
    pub hol_order: Vec<String>,
    /// Two transports whose summed head-of-line delay must be close.
    pub hol_near: Vec<String>,
    /// Plot head-of-line and sending delay against loss.
    pub delay_plots: bool,
}

/// One run: the report and, for the first seed of a plotted
/// configuration, every packet's (generation s, application latency ms).
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The summary.
    pub report: VideoReport,
    /// Per delivered packet, for the scatter plot.
    pub latency: Option<Vec<(f64, f64)>>,
    /// Per packet the receiving stack got, (generation s, stack latency
    /// ms), for the stack-latency scatter ([QUICsilver-2019] Figs. 4-5).
    pub stack: Option<Vec<(f64, f64)>>,
    /// The path's one-way delay (ms).
    pub one_way_ms: f64,
}

/// The metrics claims may use.
pub const METRICS: [&str; 14] = [
    "useful_pct",
    "hol_total_s",
    "sending_delay_s",
    "stack_latency_p99_ms",
    "stalls",
    "discrepancy_s",
    "per_stall_ms",
    "skipped",
    "played_pct",
    "on_time_vs_oracle",
    "latency_p50_ms",
    "latency_p99_ms",
    "stack_excess_p99_ms",
    "stack_excess_max_ms",
];

fn metric_of(r: &VideoReport, name: &str) -> Option<f64> {
    Some(match name {
        "useful_pct" => r.useful_frames_pct,
        "stalls" => r.stalls as f64,
        "discrepancy_s" => r.discrepancy_s,
        "per_stall_ms" => r.per_stall_ms?,
        "skipped" => r.skipped as f64,
        "played_pct" => 100.0 * r.played as f64 / (r.frames as f64).max(1.0),
        "on_time_vs_oracle" => {
            if r.oracle_packets_on_time == 0 {
                return None;
            }
            r.packets_on_time as f64 / r.oracle_packets_on_time as f64
        }
        "latency_p50_ms" => r.app_latency_ms.p50,
        "latency_p99_ms" => r.app_latency_ms.p99,
        "hol_total_s" => r.hol_total_s,
        "sending_delay_s" => r.sending_delay_total_s,
        "stack_latency_p99_ms" => r.stack_latency_ms.p99,
        _ => return None,
    })
}

impl Adapter for Video {
    type Params = VideoPoint;
    type Output = RunResult;

    fn name(&self) -> &'static str {
        "video"
    }

    fn metrics(&self) -> &'static [&'static str] {
        &METRICS
    }

    fn configure(&self, point: &Point) -> Result<VideoPoint, String> {
        let (raw, params): (PlanKeys, VideoParams) = point.split_typed(&PLAN_KEYS)?;
        let g = GenericTransport::parse(&raw.transport)
            .ok_or_else(|| format!("unknown transport '{}'", raw.transport))?;
        let cc = params.cc;
        let loss = params.loss;
        let sc = params.scenario(&g, 1, false, Spelling::Plan)?;
        for st in &raw.stated {
            if GenericTransport::parse(&st.transport).is_none() {
                return Err(format!("stated: unknown transport '{}'", st.transport));
            }
            parse_loss_model(&st.loss).map_err(|e| format!("stated: {e}"))?;
        }
        let one_way = params.one_way;
        let scatter = match &raw.scatter_loss {
            Some(l) => {
                parse_loss_model(l).map_err(|e| format!("scatter_loss: {e}"))? == loss
                    && match &raw.scatter_one_way {
                        Some(w) => {
                            parse_duration(w).map_err(|e| format!("scatter_one_way: {e}"))?
                                == one_way
                        }
                        None => true,
                    }
            }
            None => false,
        };
        let hol_scatter = match raw.scatter.as_str() {
            "latency" => None,
            "hol" => Some(raw.scatter_packets.unwrap_or([0, u32::MAX])),
            other => return Err(format!("scatter must be latency or hol, not '{other}'")),
        };
        for t in raw.hol_order.iter().chain(&raw.hol_near) {
            if GenericTransport::parse(t).is_none() {
                return Err(format!("hol_order/hol_near: unknown transport '{t}'"));
            }
        }
        if !raw.hol_near.is_empty() && raw.hol_near.len() != 2 {
            return Err("hol_near names two transports".into());
        }
        let matches = |st: &Stated| {
            GenericTransport::parse(&st.transport).map(|t| t.name()) == Some(g.name())
                && parse_loss_model(&st.loss).ok() == Some(loss)
        };
        Ok(VideoPoint {
            scenario: point.scenario.clone(),
            transport: g.name(),
            scatter,
            hol_scatter,
            loss_rate: loss.mean_loss(),
            report: ReportOptions {
                hol_order: raw.hol_order.clone(),
                hol_near: raw.hol_near.clone(),
                delay_plots: raw.delay_plots,
            },
            stated: raw.stated.iter().find(|st| matches(st)).cloned(),
            stated_rows: raw.stated.clone(),
            loss: point
                .params
                .get("loss")
                .map(crate::plan::scalar_text)
                .unwrap_or_else(|| params::default::PLAN_LOSS.to_string()),
            sc,
            cc,
            notes: raw.notes,
        })
    }

    fn run(&self, p: &VideoPoint, seed: u64, keep: bool) -> Result<RunResult, String> {
        let mut sc = p.sc.clone();
        sc.path.seed = seed;
        #[allow(clippy::disallowed_methods)] // wall clock: how long the run took, reported
        let t0 = std::time::Instant::now();
        let run = sc.run()?;
        let report = VideoReport::of(p.transport, &run, seed, t0.elapsed().as_secs_f64() * 1e3);
        if let Some(e) = &report.error {
            return Err(format!("connection failed: {e}"));
        }
        if report.corrupt_or_duplicate > 0 {
            return Err("corrupt or duplicate delivery".into());
        }
        let latency = (keep && p.scatter).then(|| {
            let m = &run.messages;
            match p.hol_scatter {
                // Packet number → head-of-line-blocking delay (ms). A run
                // shorter than the plan's packet window (`repro
                // --duration`) plots its last packets, as many as the
                // window holds, rather than nothing.
                Some([from, to]) => {
                    let all: Vec<(usize, f64)> = spans_ms_by_id(&m.received, &m.arrival).collect();
                    let last = all.last().map_or(0, |p| p.0);
                    let (from, to) = if last < from as usize {
                        (last.saturating_sub((to - from) as usize), last)
                    } else {
                        (from as usize, to as usize)
                    };
                    all.into_iter()
                        .filter(|(i, _)| (from..=to).contains(i))
                        .map(|(i, d)| (i as f64, d))
                        .collect()
                }
                // Generation (s) → application latency (ms).
                None => spans_ms_by_id(&m.generated, &m.arrival)
                    .filter_map(|(i, d)| Some((m.generated[i]?.as_nanos() as f64 / 1e9, d)))
                    .collect(),
            }
        });
        let stack = (keep && p.scatter && p.hol_scatter.is_none()).then(|| {
            let m = &run.messages;
            spans_ms_by_id(&m.generated, &m.received)
                .filter_map(|(i, d)| Some((m.generated[i]?.as_nanos() as f64 / 1e9, d)))
                .collect()
        });
        Ok(RunResult {
            report,
            latency,
            stack,
            one_way_ms: p.sc.path.rtt.as_secs_f64() * 500.0,
        })
    }

    fn metric(&self, out: &RunResult, name: &str) -> Option<f64> {
        // Stack latency beyond the path's one-way delay ([QUICsilver-2019]: "within
        // 15 ms of the path latency").
        let stack = &out.report.stack_latency_ms;
        let delivered = out.report.packets > out.report.first_tx_dropped;
        match name {
            "stack_excess_p99_ms" => delivered.then_some(stack.p99 - out.one_way_ms),
            "stack_excess_max_ms" => delivered.then_some(stack.max - out.one_way_ms),
            _ => metric_of(&out.report, name),
        }
    }

    fn sim_seconds(&self, out: &RunResult) -> f64 {
        out.report.sim_seconds
    }

    fn finish(&self, done: &mut Finished<'_, Self>, ctx: &Context<'_>) -> Result<Written, String> {
        finish(done, ctx)
    }
}

/// One configuration over seeds.
#[derive(Serialize, Debug, Clone)]
struct ConfigSummary {
    transport: &'static str,
    one_way_ms: f64,
    buffer_frames: u32,
    /// The long-run loss fraction (the head-of-line checks and plots).
    #[serde(skip)]
    loss_rate: f64,
    loss: String,
    hol_total_s: Stat,
    sending_delay_s: Stat,
    stack_latency_p99_ms: Stat,
    useful_pct: Stat,
    stalls: Stat,
    discrepancy_s: Stat,
    per_stall_ms: Stat,
    skipped: Stat,
    packets_on_time: Stat,
    oracle_packets_on_time: Stat,
    latency_p50_ms: Stat,
    latency_p99_ms: Stat,
    stated: Option<Stated>,
    per_seed: Vec<VideoReport>,
}

#[derive(Serialize, Debug, Clone)]
struct ScenarioSummary {
    name: String,
    one_way_ms: f64,
    buffer_frames: u32,
    lifetime_ms: f64,
    configs: Vec<ConfigSummary>,
}

#[derive(Serialize, Debug, Clone)]
struct Summary {
    experiment: String,
    description: String,
    seeds: Vec<u64>,
    runs: usize,
    jobs: usize,
    sim_seconds: f64,
    wall_seconds: f64,
    scenarios: Vec<ScenarioSummary>,
    claims: Vec<ClaimResult>,
}

fn finish(done: &mut Finished<'_, Video>, ctx: &Context<'_>) -> Result<Written, String> {
    let Some(first) = done.configs.first().map(|c| c.params.clone()) else {
        return Err("the plan has no configuration".into());
    };
    // Scatter plots: per scenario, one panel per plotted transport.
    let mut figures = Vec::new();
    for (si, s) in done.plan.scenarios.iter().enumerate() {
        let mut charts = Vec::new();
        let mut loss = String::new();
        let mut hol_kind = false;
        for c in done.configs.iter_mut() {
            if c.point.scenario_index != si {
                continue;
            }
            let Some(points) = c.runs.first_mut().and_then(|(_, r)| r.latency.take()) else {
                continue;
            };
            let p = &c.params;
            loss.clone_from(&p.loss);
            let one_way = p.sc.path.rtt.as_secs_f64() * 500.0;
            if p.hol_scatter.is_some() {
                hol_kind = true;
                let top = points.iter().map(|q| q.1).fold(1.0, f64::max) * 1.05;
                charts.push(Chart {
                    title: format!(
                        "{}, {}, one-way {one_way:.0} ms, loss {}",
                        s.name, p.transport, p.loss
                    ),
                    x_label: "packet number".into(),
                    y_label: "head-of-line-blocking delay (ms)".into(),
                    x_range: None,
                    y_range: Some((0.0, top)),
                    series: vec![Series::new(p.transport, points, Style::Points, Rgb::RED)],
                    hlines: Vec::new(),
                    regions: Vec::new(),
                });
                continue;
            }
            let deadline = p.sc.lifetime().as_secs_f64() * 1000.0;
            charts.push(latency_chart(
                format!("{}, {}, loss {}", s.name, p.transport, p.loss),
                "application latency (ms)",
                Series::new(p.transport, points, Style::Points, Rgb::BLUE),
                one_way,
                deadline,
                (deadline, format!("deadline {deadline:.1} ms")),
            ));
        }
        if charts.is_empty() {
            continue;
        }
        let seed = done.plan.seeds.first().copied().unwrap_or(0);
        let (file, caption, reproduces) = if hol_kind {
            (
                format!("hol-{}.png", s.name),
                format!(
                    "{}: head-of-line-blocking delay (receiving stack → application) of each \
                     packet at {loss} loss, seed {seed}",
                    s.name
                ),
                "[RTP-QUIC] Fig. 5",
            )
        } else {
            (
                format!("latency-{}.png", s.name),
                format!(
                    "{}: application latency (generation → delivery) of every packet at {loss} \
                     loss, seed {seed}",
                    s.name
                ),
                "[QUICsilver-2019] Figs. 6-7",
            )
        };
        plot::draw_stacked(&charts, &ctx.out.join(&file))?;
        figures.push(Figure {
            file,
            caption,
            reproduces: Some(reproduces.into()),
        });
        // Stack latency of the same packets ([QUICsilver-2019] Figs. 4-5).
        let mut stack_charts = Vec::new();
        for c in done.configs.iter_mut() {
            if c.point.scenario_index != si {
                continue;
            }
            let Some((_, r)) = c.runs.first_mut() else {
                continue;
            };
            let Some(points) = r.stack.take() else {
                continue;
            };
            let p = &c.params;
            let one_way = r.one_way_ms;
            stack_charts.push(latency_chart(
                format!("{}, {}, loss {}", s.name, p.transport, p.loss),
                "stack latency (ms)",
                Series::new(p.transport, points, Style::Points, Rgb::BLUE),
                one_way,
                one_way + 20.0,
                (
                    one_way + 15.0,
                    format!("one-way + 15 ms ({:.0} ms)", one_way + 15.0),
                ),
            ));
        }
        if !stack_charts.is_empty() {
            let file = format!("stack-{}.png", s.name);
            plot::draw_stacked(&stack_charts, &ctx.out.join(&file))?;
            figures.push(Figure {
                file,
                caption: format!(
                    "{}: stack latency (generation → the receiving stack holding the packet) of \
                     every packet at {loss} loss, seed {seed}",
                    s.name
                ),
                reproduces: Some("[QUICsilver-2019] Figs. 4-5".into()),
            });
        }
    }

    // Every stated figure must sit beside one of ours.
    for (si, s) in done.plan.scenarios.iter().enumerate() {
        let in_s: Vec<&VideoPoint> = done
            .configs
            .iter()
            .filter(|c| c.point.scenario_index == si)
            .map(|c| &c.params)
            .collect();
        for row in in_s.iter().flat_map(|p| &p.stated_rows) {
            if !in_s.iter().any(|p| p.stated.as_ref() == Some(row)) {
                return Err(format!(
                    "scenario {}: the stated figures for {} at loss {} match no configuration",
                    s.name, row.transport, row.loss
                ));
            }
        }
    }
    let mut scenarios = Vec::new();
    for (si, s) in done.plan.scenarios.iter().enumerate() {
        let mut configs = Vec::new();
        let mut head = None;
        for c in done.configs.iter().filter(|c| c.point.scenario_index == si) {
            let p = &c.params;
            head.get_or_insert((
                p.sc.path.rtt.as_secs_f64() * 500.0,
                p.sc.buffer_frames,
                p.sc.lifetime().as_secs_f64() * 1000.0,
            ));
            let per_seed: Vec<VideoReport> = c.runs.iter().map(|(_, r)| r.report.clone()).collect();
            let stat = |m: &str| c.stat(&Video, m);
            let raw = |f: &dyn Fn(&VideoReport) -> f64| {
                Stat::of(&per_seed.iter().map(f).collect::<Vec<_>>())
            };
            configs.push(ConfigSummary {
                transport: p.transport,
                one_way_ms: p.sc.path.rtt.as_secs_f64() * 500.0,
                buffer_frames: p.sc.buffer_frames,
                loss_rate: p.loss_rate,
                loss: p.loss.clone(),
                hol_total_s: stat("hol_total_s"),
                sending_delay_s: stat("sending_delay_s"),
                stack_latency_p99_ms: stat("stack_latency_p99_ms"),
                useful_pct: stat("useful_pct"),
                stalls: stat("stalls"),
                discrepancy_s: stat("discrepancy_s"),
                per_stall_ms: stat("per_stall_ms"),
                skipped: stat("skipped"),
                packets_on_time: raw(&|r| r.packets_on_time as f64),
                oracle_packets_on_time: raw(&|r| r.oracle_packets_on_time as f64),
                latency_p50_ms: stat("latency_p50_ms"),
                latency_p99_ms: stat("latency_p99_ms"),
                stated: p.stated.clone(),
                per_seed,
            });
        }
        let (one_way_ms, buffer_frames, lifetime_ms) = head.unwrap_or_default();
        scenarios.push(ScenarioSummary {
            name: s.name.clone(),
            one_way_ms,
            buffer_frames,
            lifetime_ms,
            configs,
        });
    }
    // The report-level claims count with the plan's (the card, the CLI).
    let extra = hol_checks(&first.report, &scenarios);
    done.claims.extend(extra);
    if first.report.delay_plots {
        figures.extend(delay_plots(&scenarios, ctx)?);
    }
    let summary = Summary {
        experiment: done.plan.name.clone(),
        description: done.plan.description.clone(),
        seeds: done.plan.seeds.clone(),
        runs: done.runs,
        jobs: done.jobs,
        sim_seconds: done.sim_seconds,
        wall_seconds: done.wall_seconds(),
        scenarios,
        claims: done.claims.clone(),
    };
    let summary_json = done.stamp(&Video, &summary)?;
    let md = summary_md(&summary);
    let readme = readme(&summary, &first, &md, &figures, ctx.command);
    Ok(Written {
        summary_json,
        summary_md: md,
        readme,
        figures,
    })
}

/// A per-packet latency scatter against generation time, with the one-way
/// delay (grey) and a red `bound`; the y axis reaches at least `floor`.
fn latency_chart(
    title: String,
    y_label: &str,
    series: Series,
    one_way: f64,
    floor: f64,
    bound: (f64, String),
) -> Chart {
    let top = series.points.iter().map(|q| q.1).fold(floor, f64::max) * 1.05;
    Chart {
        title,
        x_label: "packet generated (s)".into(),
        y_label: y_label.into(),
        x_range: None,
        y_range: Some((0.0, top)),
        series: vec![series],
        hlines: vec![
            HLine {
                y: one_way,
                color: Rgb::GREY,
                label: format!("one-way {one_way:.0} ms"),
            },
            HLine {
                y: bound.0,
                color: Rgb::RED,
                label: bound.1,
            },
        ],
        regions: Vec::new(),
    }
}

/// Summed head-of-line delay per transport over a scenario's lossy
/// configurations with at most `max_loss` loss (mean over seeds of each),
/// and how many configurations it covers.
fn hol_sums(s: &ScenarioSummary, max_loss: f64) -> BTreeMap<&'static str, (f64, usize)> {
    let mut sums: BTreeMap<&'static str, (f64, usize)> = BTreeMap::new();
    for c in s
        .configs
        .iter()
        .filter(|c| c.loss_rate > 0.0 && c.loss_rate <= max_loss)
    {
        let e = sums.entry(c.transport).or_default();
        e.0 += c.hol_total_s.mean;
        e.1 += 1;
    }
    sums
}

/// The report-level head-of-line claims ([RTP-QUIC] Fig. 4), per scenario:
/// the order of the summed delays, and two transports close to each other
/// (over every lossy configuration, and over those at ≤ 1 % loss).
fn hol_checks(o: &ReportOptions, scenarios: &[ScenarioSummary]) -> Vec<ClaimResult> {
    let name = |t: &str| GenericTransport::parse(t).map_or("?", |g| g.name());
    let mut out = Vec::new();
    for s in scenarios {
        let claim = |config: &str, claim: String, expectation: &str, observed: String, holds| {
            ClaimResult::new(
                s.name.clone(),
                "",
                format!("{}: {config}", s.name),
                "hol_total_s (summed)",
                claim,
                Some("[RTP-QUIC] Fig. 4, §5.1".into()),
                Some("TCP ≈ QUIC_SS > QUIC_GOP > QUIC_FPS > QUIC_PPS = UDP = 0".into()),
                expectation,
                observed,
                holds,
            )
        };
        let all = hol_sums(s, 1.0);
        if o.hol_order.len() >= 2 {
            let vals: Vec<Option<(f64, usize)>> = o
                .hol_order
                .iter()
                .map(|t| all.get(name(t)).copied())
                .collect();
            let observed = o
                .hol_order
                .iter()
                .zip(&vals)
                .map(|(t, v)| match v {
                    Some((x, n)) => format!("{t} {x:.1} s ({n} configs)"),
                    None => format!("{t} not run"),
                })
                .collect::<Vec<_>>()
                .join(" > ");
            let all_run = vals.iter().all(Option::is_some);
            // Ours: no step rises by more than 5 %; the seed's: every step
            // falls.
            let holds = all_run
                && vals
                    .windows(2)
                    .all(|w| matches!((w[0], w[1]), (Some(a), Some(b)) if a.0 >= 0.95 * b.0));
            let strict = all_run
                && vals
                    .windows(2)
                    .all(|w| matches!((w[0], w[1]), (Some(a), Some(b)) if a.0 > b.0));
            out.push(
                claim(
                    "every lossy configuration",
                    format!(
                        "summed over the lossy configurations, head-of-line blocking decreases {}",
                        o.hol_order.join(" > ")
                    ),
                    "no step rises by more than 5 % (the seed's: strictly decreasing)",
                    observed,
                    holds,
                )
                .differs_unless(
                    strict,
                    "with a long GOP a new stream starts rarely and cuts few head-of-line staircases, so the per-GOP mapping is within noise of one stream (the gop48 scenario shows what it gains with a 2 s GOP)",
                ),
            );
        }
        if let [a, b] = o.hol_near.as_slice() {
            for (config, max_loss) in [
                ("every lossy configuration", 1.0),
                ("loss at most 1 %", 0.01),
            ] {
                let sums = hol_sums(s, max_loss);
                let ratio = match (sums.get(name(a)), sums.get(name(b))) {
                    (Some(x), Some(y)) if y.0 > 0.0 => Some(x.0 / y.0),
                    _ => None,
                };
                out.push(claim(
                    config,
                    format!("{a} and {b} suffer about the same head-of-line blocking"),
                    "ratio within [0.67, 1.5]",
                    match ratio {
                        Some(r) => format!("{a}/{b} = {r:.2}"),
                        None => "not run, or no blocking".into(),
                    },
                    ratio.is_some_and(|r| (1.0 / 1.5..=1.5).contains(&r)),
                ));
            }
        }
    }
    out
}

/// [RTP-QUIC] Figs. 4 and 6: total head-of-line-blocking and sending delay
/// against loss, one panel per transport, a line per one-way delay (mean
/// over seeds and scenarios, e.g. buffer sizes, which do not change them
/// for reliable transports).
fn delay_plots(scenarios: &[ScenarioSummary], ctx: &Context<'_>) -> Result<Vec<Figure>, String> {
    let colors = [
        Rgb::BLUE,
        Rgb::ORANGE,
        Rgb::GREEN,
        Rgb::RED,
        Rgb::PURPLE,
        Rgb::BLACK,
        Rgb::GREY,
    ];
    let mut transports: Vec<&'static str> = Vec::new();
    let mut delays: Vec<f64> = Vec::new();
    for c in scenarios.iter().flat_map(|s| &s.configs) {
        if !transports.contains(&c.transport) {
            transports.push(c.transport);
        }
        if !delays.contains(&c.one_way_ms) {
            delays.push(c.one_way_ms);
        }
    }
    delays.sort_by(f64::total_cmp);
    let mut figures = Vec::new();
    for (metric, file, label, reproduces) in [
        (
            "hol",
            "hol-total.png",
            "total head-of-line-blocking delay (s)",
            "[RTP-QUIC] Fig. 4",
        ),
        (
            "sending",
            "sending-total.png",
            "total sending delay (s)",
            "[RTP-QUIC] Fig. 6",
        ),
    ] {
        let mut charts = Vec::new();
        for t in &transports {
            let mut series = Vec::new();
            for (i, d) in delays.iter().enumerate() {
                // loss (%) → mean of the metric over the scenarios.
                let mut at: BTreeMap<u64, (f64, f64, usize)> = BTreeMap::new();
                for c in scenarios
                    .iter()
                    .flat_map(|s| &s.configs)
                    .filter(|c| c.transport == *t && c.one_way_ms == *d)
                {
                    let pct = c.loss_rate * 100.0;
                    let v = if metric == "hol" {
                        c.hol_total_s.mean
                    } else {
                        c.sending_delay_s.mean
                    };
                    let e = at.entry(pct.to_bits()).or_insert((pct, 0.0, 0));
                    e.1 += v;
                    e.2 += 1;
                }
                let mut pts: Vec<(f64, f64)> =
                    at.values().map(|(x, y, n)| (*x, y / *n as f64)).collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                series.push(Series::new(
                    format!("{d} ms"),
                    pts,
                    Style::Line,
                    colors[i % colors.len()],
                ));
            }
            charts.push(Chart {
                title: format!("{t}: {label} by loss, per one-way delay"),
                x_label: "loss (%)".into(),
                y_label: label.into(),
                x_range: None,
                y_range: None,
                series,
                hlines: Vec::new(),
                regions: Vec::new(),
            });
        }
        plot::draw_stacked(&charts, &ctx.out.join(file))?;
        figures.push(Figure {
            file: file.into(),
            caption: format!(
                "{label} against loss, one panel per transport, one line per one-way delay \
                 (mean over seeds and buffer sizes)"
            ),
            reproduces: Some(reproduces.into()),
        });
    }
    Ok(figures)
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
        "Mean ± sample sd over seeds. *useful*: frames played and decodable by then, of \
         frames sent; *stalls*: playback pauses; *discrepancy*: their sum; *per stall* = \
         discrepancy / stalls; *skipped*: frames concealed; *on time*: packets delivered by \
         their frame's deadline, with what an oracle (loses only the network's drops, adds \
         no delay) delivers in brackets; *latency*: generation → delivery to the \
         application, p50 / p99; *stack*: generation → the receiving stack holding the \
         packet, p99; *HOL*: head-of-line-blocking delay (the stack held a packet but \
         could not hand it over) summed over packets; *sending*: generation → the \
         packet's last byte first on the wire, summed (the [RTP-QUIC] definitions). *seed*: \
         the seed document's own figure for that transport and loss.\n"
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            m,
            "## {} (one-way {} ms, buffer {} frames, deadline {:.1} ms)\n",
            sc.name, sc.one_way_ms, sc.buffer_frames, sc.lifetime_ms
        );
        let _ = writeln!(
            m,
            "| one-way ms | loss | transport | useful % | stalls | discrepancy s | per stall ms | skipped | on time (oracle) | latency ms p50 / p99 | stack p99 ms | HOL s | sending s | seed |"
        );
        let _ = writeln!(
            m,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for c in &sc.configs {
            let per_stall = if c.per_stall_ms.n == 0 {
                "–".to_string()
            } else {
                format!("{:.0}", c.per_stall_ms.mean)
            };
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0} ({:.0}) | {:.1} / {:.1} | {:.1} | {:.2} | {:.2} | {} |",
                c.one_way_ms,
                c.loss,
                c.transport,
                pm3(&c.useful_pct),
                c.stalls.pm(),
                c.discrepancy_s.pm(),
                per_stall,
                c.skipped.pm(),
                c.packets_on_time.mean,
                c.oracle_packets_on_time.mean,
                c.latency_p50_ms.mean,
                c.latency_p99_ms.mean,
                c.stack_latency_p99_ms.mean,
                c.hol_total_s.mean,
                c.sending_delay_s.mean,
                c.stated.as_ref().map(Stated::text).unwrap_or_default()
            );
        }
        let _ = writeln!(m);
    }
    m.push_str(&crate::claims::markdown_section(&s.claims));
    m
}

/// Mean ± sd with three decimals (useful frames differ in the third).
fn pm3(s: &Stat) -> String {
    if s.n <= 1 {
        format!("{:.3}", s.mean)
    } else {
        format!("{:.3} ± {:.3}", s.mean, s.sd)
    }
}

fn readme(s: &Summary, first: &VideoPoint, md: &str, figures: &[Figure], command: &str) -> String {
    let src = &first.sc.source;
    let mut r = String::new();
    let _ = writeln!(r, "# {}\n", s.description);
    let _ = writeln!(
        r,
        "Produced by `{command}` in {:.2} s of wall time ({} streams, {:.0} s of video, {} \
         threads). Every number and plot here comes from that run; the simulator is \
         deterministic, so the same command gives the same numbers.\n",
        s.wall_seconds, s.runs, s.sim_seconds, s.jobs
    );
    let _ = writeln!(r, "## Setup\n");
    let _ = writeln!(
        r,
        "A synthetic live stream (`hollywood_media::video`): {} frames at {} fps, an I-frame \
         every {} frames as {} packets sent back to back, P-frames of {} packet(s), {} bytes \
         each, one message per packet; a P-frame depends on {}. A packet's lifetime is its \
         frame's playback deadline (one-way delay + buffer); a frame later frames reference \
         lives until the last of them is due. The link is symmetric, {} Mb/s, with a \
         drop-tail queue of {} bytes, random loss on the media direction only. Congestion \
         control: {} (QUIC: quinn's). The player stalls on one ordered reliable stream \
         (tcp, hollywood-ir, quic-ss) and then {}; the others skip what is late. Seeds {:?}.\n",
        src.frames,
        src.fps,
        src.gop,
        src.iframe_packets,
        src.pframe_packets,
        src.packet_size,
        match src.reference {
            Reference::Gop => "its GOP's I-frame",
            Reference::Previous => "the previous frame",
        },
        first.sc.path.rate_bps as f64 / 1e6,
        first.sc.path.queue_bytes,
        first.cc.name(),
        match first.sc.resume {
            Resume::CatchUp => {
                "catches up (plays the held-back frames at once and returns to its schedule: \
                 every head-of-line event that outlasts the buffer is a stall)"
            }
            Resume::Shift => "shifts every later frame by the pause",
        },
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

    fn points(extra: &str) -> Result<Vec<VideoPoint>, String> {
        let text = format!(
            "name = \"t\"\nadapter = \"video\"\nseeds = 1\nduration = \"2s\"\n\
             one_way = \"20ms\"\n{extra}\n[[scenario]]\nname = \"a\"\n"
        );
        let plan = Plan::parse(&text, None).map_err(|e| e.to_string())?;
        plan.scenarios
            .iter()
            .flat_map(|s| &s.points)
            .map(|p| Video.configure(p))
            .collect()
    }

    #[test]
    fn a_plan_configures_streams_and_rejects_what_it_does_not_understand() {
        let ps = points(
            "transports = [\"hollywood\", \"quic-ss\"]\nloss = \"1%\"\nscatter_loss = \"1%\"\n\
             [[stated]]\ntransport = \"quic-ss\"\nloss = \"1%\"\nstalls = 3",
        )
        .unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].transport, "hollywood");
        assert!(ps[0].stated.is_none());
        assert_eq!(ps[1].stated.as_ref().and_then(|s| s.stalls), Some(3.0));
        assert_eq!(ps[1].sc.source.frames, 120);
        assert_eq!(ps[1].sc.path.rtt, std::time::Duration::from_millis(40));
        assert!(ps.iter().all(|p| p.scatter && p.cc == CcAlgorithm::Bbr));
        // One short run: the report and the scatter points of a kept run.
        let r = Video.run(&ps[1], 1, true).unwrap();
        assert_eq!(r.report.frames, 120);
        assert_eq!(r.report.player, "stall");
        assert!(r.latency.is_some_and(|l| !l.is_empty()));
        assert!(Video.run(&ps[1], 1, false).unwrap().latency.is_none());
        assert!(metric_of(&r.report, "useful_pct").is_some());
        assert!(metric_of(&r.report, "nonsense").is_none());

        // The [RTP-QUIC] per-packet head-of-line plot: packet numbers in range,
        // and a reliable stream on a lossy link waits behind its losses.
        let hol = points(
            "transport = \"quic-ss\"\nloss = \"5%\"\nscatter_loss = \"5%\"\n\
             scatter = \"hol\"\nscatter_packets = [10, 90]\npframe_packets = 2\n\
             pframe_packets_max = 3\nredundancy = 0.3",
        )
        .unwrap();
        assert_eq!(hol[0].hol_scatter, Some([10, 90]));
        let r = Video.run(&hol[0], 1, true).unwrap();
        let pts = r.latency.unwrap();
        assert!(pts.iter().all(|p| (10.0..=90.0).contains(&p.0)) && !pts.is_empty());
        assert!(r.report.hol_total_s > 0.0 && r.report.hol_blocked_packets > 0);
        assert!(metric_of(&r.report, "hol_total_s").is_some());

        for (bad, why) in [
            ("transport = \"tcpx\"", "unknown transport"),
            ("transport = \"udp\"\ncc = \"vegas\"", "vegas"),
            ("transport = \"udp\"\nresume = \"later\"", "catch-up"),
            ("transport = \"udp\"\nsize = \"2000\"", "1400"),
            (
                "transport = \"udp\"\nframe_reference = \"next\"",
                "previous",
            ),
            ("transport = \"udp\"\nfsp = 30", "fsp"),
            ("transport = \"udp\"\nscatter = \"dots\"", "latency or hol"),
            (
                "transport = \"udp\"\nhol_near = [\"tcp\"]",
                "two transports",
            ),
            (
                "transport = \"udp\"\nhol_order = [\"tcp\", \"nope\"]",
                "nope",
            ),
            ("transport = \"udp\"\nredundancy = 1.5", "redundancy"),
            (
                "transport = \"udp\"\n[[stated]]\ntransport = \"foo\"\nloss = \"0\"",
                "stated",
            ),
        ] {
            let e = points(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
