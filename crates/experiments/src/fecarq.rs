//! FEC against ARQ against both (issue 34, "What to build" item 3): a live
//! stream with a deadline over a grid of round trips and loss rates, each
//! point run over transports that never repair (UDP), repair by
//! retransmission (QUICsilver, TCP Hollywood), by forward error
//! correction (the message-layer FEC of `hollywood_transport::fec` under
//! UDP), or both (FEC under QUICsilver and TCP Hollywood). The plan is
//! `scenarios/fec-arq.toml`; one run is `hollywood sim messages` with one
//! transport and `--fec on|off`.
//!
//! Plan parameters (plan level, per scenario or swept): `arm` (a transport
//! name, `+fec` for FEC under it: `udp`, `udp+fec`, `quicsilver`,
//! `hollywood+fec`, …), `rtt`, `loss` (the mean loss, a fraction or
//! percentage), `model` (`bernoulli`, or `gilbert`: a Gilbert-Elliott chain
//! with the same mean loss and mean bursts of `burst` packets), `burst`
//! (3), `rate` (both ways, 8mbit), `queue` (bytes per link, 96000), `size`
//! (payload bytes, 1316), `interval` (5ms), `lifetime` (200ms), `duration`
//! (the stream's length, 60s), `cc` (bbr), `fec_overhead` (25%), `notes`.
//!
//! Writes, beside the runner's files: `summary.json` and `summary.md` (per
//! scenario, model, loss and RTT: each arm's on-time share, the oracle's,
//! the FEC arms' repair overhead and wire bytes against the same transport
//! without FEC; ARQ's gain over UDP per RTT, which shows where
//! retransmission stops helping), `on-time-<scenario>-<model>.png` and
//! `.svg` (on-time share against RTT, a panel per loss, a line per arm
//! and the oracle) and a `README.md`. The report-level claims (ARQ in time
//! where a retransmission fits in the deadline, ARQ no better than UDP
//! where it cannot, both at least the better of the two, FEC at 99 % at
//! Bernoulli loss up to 2 %, bursts cost FEC more than ARQ, the overhead
//! bound) are checked in [`finish`] with the bounds named in this file.

use crate::claims::ClaimResult;
use crate::plan::Point;
use crate::plot::{self, Chart, HLine, Rgb, Series, Style};
use crate::report::Figure;
use crate::run::{Adapter, Context, Finished, Written};
use crate::stats::Stat;
use crate::units::{de, parse_fraction};
use hollywood_media::{GenericTransport, MessagesScenario};
use hollywood_sim::{GilbertElliott, LossModel};
use hollywood_tcp::{CcAlgorithm, Config};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::Duration;

/// The `fec` adapter.
pub struct FecArq;

/// A retransmission is in time when `ARQ_RTTS × RTT < lifetime`: a loss is
/// noticed about a round trip after the send plus RACK's quarter-RTT
/// window, and the copy needs the one-way delay (docs/FEC.md, "Which
/// messages"; the FEC layer protects by the same rule).
pub const ARQ_RTTS: f64 = 1.75;
/// ARQ in time delivers at least this share (%) on time at every point.
pub const ARQ_IN_TIME_PCT: f64 = 99.0;
/// ARQ too late: its on-time share within this many points of UDP's.
pub const ARQ_LIKE_UDP_PTS: f64 = 0.5;
/// Both: at least the better of ARQ alone and FEC alone less this many points.
pub const BOTH_TOLERANCE_PTS: f64 = 0.5;
/// FEC at Bernoulli loss up to [`FEC_TARGET_LOSS`]: at least this share (%).
pub const FEC_TARGET_PCT: f64 = 99.0;
/// The loss (fraction) up to which [`FEC_TARGET_PCT`] is claimed.
pub const FEC_TARGET_LOSS: f64 = 0.02;

/// The plan's keys.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct Raw {
    arm: String,
    #[serde(deserialize_with = "de::duration")]
    rtt: Duration,
    loss: String,
    #[serde(default = "d_model")]
    model: String,
    #[serde(default = "d_burst")]
    burst: f64,
    #[serde(default = "d_rate", deserialize_with = "de::rate")]
    rate: u64,
    #[serde(default = "d_queue", deserialize_with = "de::size")]
    queue: u64,
    #[serde(default = "d_size", deserialize_with = "de::size")]
    size: u64,
    #[serde(default = "d_interval", deserialize_with = "de::duration")]
    interval: Duration,
    #[serde(default = "d_lifetime", deserialize_with = "de::duration")]
    lifetime: Duration,
    #[serde(default = "d_duration", deserialize_with = "de::duration")]
    duration: Duration,
    #[serde(default = "d_cc", deserialize_with = "de::cc")]
    cc: CcAlgorithm,
    #[serde(default = "d_overhead", deserialize_with = "de::fraction")]
    fec_overhead: f64,
    notes: Option<String>,
}

fn d_model() -> String {
    "bernoulli".into()
}
fn d_burst() -> f64 {
    3.0
}
fn d_rate() -> u64 {
    8_000_000
}
fn d_queue() -> u64 {
    96_000
}
fn d_size() -> u64 {
    1316
}
fn d_interval() -> Duration {
    Duration::from_millis(5)
}
fn d_lifetime() -> Duration {
    Duration::from_millis(200)
}
fn d_duration() -> Duration {
    Duration::from_secs(60)
}
fn d_cc() -> CcAlgorithm {
    CcAlgorithm::Bbr
}
fn d_overhead() -> f64 {
    0.25
}

/// The loss model for a mean loss `p` (fraction): Bernoulli, or a
/// Gilbert-Elliott chain (every packet lost in the bad state, none in the
/// good one) with mean bursts of `burst` packets (bad → good `1/burst`)
/// and the same stationary loss (good → bad `p/(burst (1 − p))`).
pub fn loss_model(model: &str, p: f64, burst: f64) -> Result<LossModel, String> {
    if !(0.0..1.0).contains(&p) {
        return Err(format!("loss {p} must be below 100 %"));
    }
    if p == 0.0 {
        return Ok(LossModel::None);
    }
    match model {
        "bernoulli" => Ok(LossModel::Bernoulli(p)),
        "gilbert" => {
            if burst < 1.0 {
                return Err(format!("burst {burst}: a mean burst is at least 1 packet"));
            }
            let r = 1.0 / burst;
            Ok(LossModel::GilbertElliott(GilbertElliott::gilbert(
                p * r / (1.0 - p),
                r,
            )))
        }
        other => Err(format!("model must be bernoulli or gilbert, not '{other}'")),
    }
}

/// One configuration.
#[derive(Debug, Clone)]
pub struct ArmPoint {
    /// The arm as the plan names it (`hollywood+fec`).
    pub arm: String,
    /// The transport's name.
    pub transport: &'static str,
    /// FEC under it.
    pub fec: bool,
    /// `bernoulli` or `gilbert`.
    pub model: String,
    /// Mean loss (fraction).
    pub loss: f64,
    /// The loss as the plan writes it.
    pub loss_text: String,
    /// The scenario, seed filled in per run.
    pub sc: MessagesScenario,
    /// The plan's notes.
    pub notes: Option<String>,
}

impl ArmPoint {
    fn rtt_ms(&self) -> f64 {
        self.sc.rtt.as_secs_f64() * 1e3
    }
    fn lifetime_ms(&self) -> f64 {
        self.sc
            .lifetime
            .map_or(f64::INFINITY, |l| l.as_secs_f64() * 1e3)
    }
    /// Can a retransmission make the deadline ([`ARQ_RTTS`])?
    fn arq_in_time(&self) -> bool {
        ARQ_RTTS * self.rtt_ms() < self.lifetime_ms()
    }
}

/// One run's counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArmRun {
    /// Messages generated.
    pub sent: u64,
    /// Delivered by their deadline.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Never delivered.
    pub never: u64,
    /// What the network delivered in time with no repair (the oracle).
    pub oracle_on_time: u64,
    /// Bytes (whole IP packets) the sender put on the wire.
    pub wire_bytes: u64,
    /// Packets the sender put on the wire.
    pub wire_packets: u64,
    /// Retransmissions (TCP segments, QUIC packets declared lost).
    pub retransmissions: u64,
    /// FEC: messages protected.
    pub protected: u64,
    /// FEC: their payload bytes.
    pub protected_bytes: u64,
    /// FEC: repair payload bytes.
    pub repair_bytes: u64,
    /// FEC: messages rebuilt at the receiver.
    pub rebuilt: u64,
    /// Virtual seconds.
    pub sim_seconds: f64,
}

/// The metrics claims may use.
pub const METRICS: [&str; 9] = [
    "on_time_pct",
    "oracle_pct",
    "late_pct",
    "never_pct",
    "wire_bytes",
    "retransmissions",
    "fec_overhead_pct",
    "protected_pct",
    "rebuilt",
];

impl Adapter for FecArq {
    type Params = ArmPoint;
    type Output = ArmRun;

    fn name(&self) -> &'static str {
        "fec"
    }

    fn metrics(&self) -> &'static [&'static str] {
        &METRICS
    }

    fn configure(&self, point: &Point) -> Result<ArmPoint, String> {
        let raw: Raw = point.typed()?;
        let (name, fec) = match raw.arm.strip_suffix("+fec") {
            Some(t) => (t, true),
            None => (raw.arm.as_str(), false),
        };
        let g = GenericTransport::parse(name)
            .ok_or_else(|| format!("arm '{}': unknown transport '{name}'", raw.arm))?
            .with_cc(raw.cc);
        if fec && g.tcp().is_some_and(|t| !t.uses_message_queue()) {
            return Err(format!(
                "arm '{}': FEC runs over UDP, QUIC and hollywood/hollywood-ir",
                raw.arm
            ));
        }
        let p = parse_fraction(&raw.loss).map_err(|e| format!("loss: {e}"))?;
        let loss = loss_model(&raw.model, p, raw.burst)?;
        if raw.interval.is_zero() || raw.size == 0 || raw.size > 1 << 20 {
            return Err("interval must be above 0 and size 1 B to 1 MiB".into());
        }
        let count = (raw.duration.as_nanos() / raw.interval.as_nanos()).max(1);
        let count = u32::try_from(count).map_err(|_| "duration / interval is too large")?;
        let sc = MessagesScenario {
            rate_bps: raw.rate,
            uplink_bps: raw.rate,
            rtt: raw.rtt,
            loss,
            queue_bytes: raw.queue as usize,
            count,
            size: raw.size as usize,
            interval: raw.interval,
            lifetime: Some(raw.lifetime),
            transport: g.clone(),
            base: Config {
                cc: raw.cc,
                ..Config::default()
            },
            fec: fec.then(|| hollywood_fec::FecConfig {
                max_overhead: raw.fec_overhead,
                ..hollywood_fec::FecConfig::default()
            }),
            ..MessagesScenario::default()
        };
        Ok(ArmPoint {
            arm: raw.arm.clone(),
            transport: g.name(),
            fec,
            model: raw.model,
            loss: p,
            loss_text: raw.loss,
            sc,
            notes: raw.notes,
        })
    }

    fn run(&self, p: &ArmPoint, seed: u64, _keep: bool) -> Result<ArmRun, String> {
        let mut sc = p.sc.clone();
        sc.seed = seed;
        let run = sc.run()?;
        if let Some(e) = &run.error {
            return Err(format!("connection failed: {e}"));
        }
        if run.corrupt_delivered > 0 || run.duplicates_delivered > 0 {
            return Err("corrupt or duplicate delivery".into());
        }
        let generic = sc.transport.tcp().is_none();
        let sent = run.generated.iter().filter(|g| g.is_some()).count() as u64;
        let mut out = ArmRun {
            sent,
            on_time: run.on_time.on_time,
            late: run.on_time.late,
            never: run.on_time.never_arrived,
            oracle_on_time: run.on_time.oracle_on_time,
            wire_bytes: run.wire_bytes,
            wire_packets: run.wire_packets,
            retransmissions: if generic {
                run.transport.sender.packets_lost
            } else {
                run.wire.retransmissions
            },
            sim_seconds: run.sim_time.as_secs_f64(),
            ..ArmRun::default()
        };
        if let Some((tx, rx)) = &run.fec {
            out.protected = tx.encoder.protected;
            out.protected_bytes = tx.encoder.protected_bytes;
            out.repair_bytes = tx.encoder.repair_bytes;
            out.rebuilt = rx.decoder.rebuilt;
        }
        Ok(out)
    }

    fn metric(&self, o: &ArmRun, name: &str) -> Option<f64> {
        let pct = |n: u64| 100.0 * n as f64 / (o.sent as f64).max(1.0);
        Some(match name {
            "on_time_pct" => pct(o.on_time),
            "oracle_pct" => pct(o.oracle_on_time),
            "late_pct" => pct(o.late),
            "never_pct" => pct(o.never),
            "wire_bytes" => o.wire_bytes as f64,
            "retransmissions" => o.retransmissions as f64,
            "fec_overhead_pct" => {
                if o.protected_bytes == 0 {
                    return None;
                }
                100.0 * o.repair_bytes as f64 / o.protected_bytes as f64
            }
            "protected_pct" => pct(o.protected),
            "rebuilt" => o.rebuilt as f64,
            _ => return None,
        })
    }

    fn sim_seconds(&self, o: &ArmRun) -> f64 {
        o.sim_seconds
    }

    fn finish(&self, done: &mut Finished<'_, Self>, ctx: &Context<'_>) -> Result<Written, String> {
        finish(done, ctx)
    }
}

/// One arm at one point, over seeds.
#[derive(Serialize, Debug, Clone)]
pub struct ArmSummary {
    /// The arm (`hollywood+fec`).
    pub arm: String,
    /// On time, % of messages sent.
    pub on_time_pct: Stat,
    /// The oracle's on-time share in the same runs.
    pub oracle_pct: Stat,
    /// Late, %.
    pub late_pct: Stat,
    /// Never delivered, %.
    pub never_pct: Stat,
    /// Retransmissions per run.
    pub retransmissions: Stat,
    /// FEC arms: repair payload / protected payload, %.
    pub fec_overhead_pct: Option<Stat>,
    /// FEC arms: messages protected, % of those sent.
    pub protected_pct: Option<Stat>,
    /// FEC arms: messages rebuilt per run.
    pub rebuilt: Option<Stat>,
    /// FEC arms: bytes on the wire against the same transport without FEC
    /// at the same point (mean over seeds each), % more.
    pub wire_vs_no_fec_pct: Option<f64>,
    /// Bytes on the wire per run.
    pub wire_bytes: Stat,
}

/// One point of the grid: every arm.
#[derive(Serialize, Debug, Clone)]
pub struct GridPoint {
    /// `bernoulli` or `gilbert`.
    pub model: String,
    /// The loss as the plan writes it.
    pub loss: String,
    /// Mean loss (fraction).
    pub loss_fraction: f64,
    /// Round trip (ms).
    pub rtt_ms: f64,
    /// `ARQ_RTTS × RTT < lifetime`.
    pub arq_in_time: bool,
    /// The oracle: the mean over the arms without FEC of what the network
    /// delivered in time with no repair (%).
    pub oracle_pct: f64,
    /// Per arm, in the plan's order.
    pub arms: Vec<ArmSummary>,
}

impl GridPoint {
    fn arm(&self, name: &str) -> Option<&ArmSummary> {
        self.arms.iter().find(|a| a.arm == name)
    }
    fn on_time(&self, name: &str) -> Option<f64> {
        self.arm(name).map(|a| a.on_time_pct.mean)
    }
    fn label(&self) -> String {
        format!("{} {}, {} ms", self.model, self.loss, self.rtt_ms)
    }
}

/// One scenario of the plan.
#[derive(Serialize, Debug, Clone)]
pub struct ScenarioSummary {
    /// Its name.
    pub name: String,
    /// Congestion control.
    pub cc: &'static str,
    /// The arms, in the plan's order.
    pub arms: Vec<String>,
    /// Every point, in the plan's order.
    pub points: Vec<GridPoint>,
}

#[derive(Serialize, Debug)]
struct Summary {
    experiment: String,
    description: String,
    seeds: Vec<u64>,
    runs: usize,
    jobs: usize,
    sim_seconds: f64,
    wall_seconds: f64,
    stream: StreamSummary,
    scenarios: Vec<ScenarioSummary>,
    claims: Vec<ClaimResult>,
}

#[derive(Serialize, Debug, Clone)]
struct StreamSummary {
    size: usize,
    interval_ms: f64,
    messages: u32,
    rate_mbit: f64,
    lifetime_ms: f64,
    queue_bytes: usize,
    fec_overhead: f64,
    burst: Option<f64>,
}

fn finish(done: &mut Finished<'_, FecArq>, ctx: &Context<'_>) -> Result<Written, String> {
    let Some(first) = done.configs.first().map(|c| c.params.clone()) else {
        return Err("the plan has no configuration".into());
    };
    let mut scenarios = Vec::new();
    for (si, s) in done.plan.scenarios.iter().enumerate() {
        let configs: Vec<_> = done
            .configs
            .iter()
            .filter(|c| c.point.scenario_index == si)
            .collect();
        let mut arms: Vec<String> = Vec::new();
        let mut points: Vec<GridPoint> = Vec::new();
        for c in &configs {
            let p = &c.params;
            if !arms.contains(&p.arm) {
                arms.push(p.arm.clone());
            }
            let stat = |m: &str| c.stat(&FecArq, m);
            let fec = |m: &str| p.fec.then(|| stat(m));
            let summary = ArmSummary {
                arm: p.arm.clone(),
                on_time_pct: stat("on_time_pct"),
                oracle_pct: stat("oracle_pct"),
                late_pct: stat("late_pct"),
                never_pct: stat("never_pct"),
                retransmissions: stat("retransmissions"),
                fec_overhead_pct: fec("fec_overhead_pct"),
                protected_pct: fec("protected_pct"),
                rebuilt: fec("rebuilt"),
                wire_vs_no_fec_pct: None,
                wire_bytes: stat("wire_bytes"),
            };
            let same = |g: &GridPoint| {
                g.model == p.model && g.loss == p.loss_text && g.rtt_ms == p.rtt_ms()
            };
            match points.iter_mut().find(|g| same(g)) {
                Some(g) => g.arms.push(summary),
                None => points.push(GridPoint {
                    model: p.model.clone(),
                    loss: p.loss_text.clone(),
                    loss_fraction: p.loss,
                    rtt_ms: p.rtt_ms(),
                    arq_in_time: p.arq_in_time(),
                    oracle_pct: 0.0,
                    arms: vec![summary],
                }),
            }
        }
        for g in &mut points {
            let plain: Vec<f64> = g
                .arms
                .iter()
                .filter(|a| !a.arm.ends_with("+fec"))
                .map(|a| a.oracle_pct.mean)
                .collect();
            g.oracle_pct = if plain.is_empty() {
                Stat::of(&g.arms.iter().map(|a| a.oracle_pct.mean).collect::<Vec<_>>()).mean
            } else {
                Stat::of(&plain).mean
            };
            let bytes: Vec<(String, f64)> = g
                .arms
                .iter()
                .map(|a| (a.arm.clone(), a.wire_bytes.mean))
                .collect();
            for a in &mut g.arms {
                if let Some(base) = a.arm.strip_suffix("+fec") {
                    if let Some((_, b)) = bytes.iter().find(|(n, _)| n == base) {
                        if *b > 0.0 {
                            a.wire_vs_no_fec_pct = Some(100.0 * (a.wire_bytes.mean / b - 1.0));
                        }
                    }
                }
            }
        }
        let cc = configs
            .first()
            .map_or("bbr", |c| c.params.sc.base.cc.name());
        scenarios.push(ScenarioSummary {
            name: s.name.clone(),
            cc,
            arms,
            points,
        });
    }

    let mut figures = Vec::new();
    for s in &scenarios {
        figures.extend(on_time_plots(s, first.lifetime_ms(), ctx)?);
    }
    let extra = grid_claims(&scenarios, done);
    done.claims.extend(extra);

    let sc = &first.sc;
    let stream = StreamSummary {
        size: sc.size,
        interval_ms: sc.interval.as_secs_f64() * 1e3,
        messages: sc.count,
        rate_mbit: sc.rate_bps as f64 / 1e6,
        lifetime_ms: first.lifetime_ms(),
        queue_bytes: sc.queue_bytes,
        fec_overhead: done
            .configs
            .iter()
            .find_map(|c| c.params.sc.fec.as_ref().map(|f| f.max_overhead))
            .unwrap_or(0.0),
        burst: done.configs.iter().find_map(|c| match c.params.sc.loss {
            LossModel::GilbertElliott(ge) => Some(1.0 / ge.r),
            _ => None,
        }),
    };
    let summary = Summary {
        experiment: done.plan.name.clone(),
        description: done.plan.description.clone(),
        seeds: done.plan.seeds.clone(),
        runs: done.runs,
        jobs: done.jobs,
        sim_seconds: done.sim_seconds,
        wall_seconds: done.wall_seconds(),
        stream,
        scenarios,
        claims: done.claims.clone(),
    };
    let summary_json = done.stamp(&FecArq, &summary)?;
    let md = summary_md(&summary);
    let readme = readme(&summary, &first, &md, &figures, ctx.command);
    Ok(Written {
        summary_json,
        summary_md: md,
        readme,
        figures,
    })
}

const COLOURS: [Rgb; 8] = [
    Rgb::GREY,
    Rgb::BLACK,
    Rgb::BLUE,
    Rgb::PURPLE,
    Rgb::RED,
    Rgb::ORANGE,
    Rgb::GREEN,
    Rgb(140, 86, 75),
];

/// Per model: a panel per loss, on-time share against RTT, a line per arm
/// and the oracle dashed in light grey; PNG and SVG.
fn on_time_plots(
    s: &ScenarioSummary,
    lifetime_ms: f64,
    ctx: &Context<'_>,
) -> Result<Vec<Figure>, String> {
    let mut models: Vec<&str> = Vec::new();
    for g in &s.points {
        if !models.contains(&g.model.as_str()) {
            models.push(&g.model);
        }
    }
    // The scenario, and its congestion control where the name does not say it.
    let head = if s.name == s.cc {
        s.name.clone()
    } else {
        format!("{} ({})", s.name, s.cc)
    };
    let mut figures = Vec::new();
    for model in models {
        let mut losses: Vec<&str> = Vec::new();
        for g in s.points.iter().filter(|g| g.model == model) {
            if !losses.contains(&g.loss.as_str()) {
                losses.push(&g.loss);
            }
        }
        let mut charts = Vec::new();
        for loss in &losses {
            let pts: Vec<&GridPoint> = s
                .points
                .iter()
                .filter(|g| g.model == model && g.loss == *loss)
                .collect();
            let mut series = Vec::new();
            let mut low: f64 = 100.0;
            for (i, arm) in s.arms.iter().enumerate() {
                let line: Vec<(f64, f64)> = pts
                    .iter()
                    .filter_map(|g| Some((g.rtt_ms, g.on_time(arm)?)))
                    .collect();
                low = line.iter().map(|p| p.1).fold(low, f64::min);
                let colour = COLOURS[i % COLOURS.len()];
                series.push(Series::new(arm.clone(), line.clone(), Style::Line, colour));
                series.push(Series::new("", line, Style::Points, colour));
            }
            let oracle: Vec<(f64, f64)> = pts.iter().map(|g| (g.rtt_ms, g.oracle_pct)).collect();
            low = oracle.iter().map(|p| p.1).fold(low, f64::min);
            series.push(Series::new(
                "oracle (no repair)",
                oracle,
                Style::Crosses,
                Rgb(120, 120, 120),
            ));
            let bottom = (low - 0.5).floor().max(0.0);
            // Room on the right for the legend (drawn in the upper right
            // corner), so that it hides no point.
            let (x0, x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), g| {
                (a.min(g.rtt_ms), b.max(g.rtt_ms))
            });
            let span = (x1 - x0).max(1.0);
            charts.push(Chart {
                title: format!(
                    "{head}: {model} loss {loss} (deadline {lifetime_ms:.0} ms; ARQ in time below RTT {:.0} ms)",
                    lifetime_ms / ARQ_RTTS
                ),
                x_label: "round-trip time (ms)".into(),
                y_label: "on time (% of messages)".into(),
                x_range: Some((x0 - 0.06 * span, x1 + 0.4 * span)),
                y_range: Some((bottom, 100.2)),
                series,
                hlines: vec![HLine {
                    y: FEC_TARGET_PCT,
                    color: Rgb(200, 200, 200),
                    label: format!("{FEC_TARGET_PCT} %"),
                }],
                regions: Vec::new(),
            });
        }
        for ext in ["png", "svg"] {
            let file = format!("on-time-{}-{model}.{ext}", s.name);
            plot::draw_stacked(&charts, &ctx.out.join(&file))?;
            figures.push(Figure {
                file,
                caption: format!(
                    "{head}: share of messages on time against RTT, {model} loss, a panel per \
                     loss, a line per arm; crosses: the oracle (what the network delivered in \
                     time, no repair)"
                ),
                reproduces: None,
            });
        }
    }
    Ok(figures)
}

/// The grid's claims, checked over the means at every point of each
/// scenario that has the arms a claim compares.
fn grid_claims(scenarios: &[ScenarioSummary], done: &Finished<'_, FecArq>) -> Vec<ClaimResult> {
    let mut out = Vec::new();
    let src = || Some("ours (issue 34, item 3)".to_string());
    let arq = ["quicsilver", "hollywood"];
    for s in scenarios {
        let has = |a: &str| s.arms.iter().any(|x| x == a);
        // 1. ARQ in time: at least ARQ_IN_TIME_PCT at every in-time point.
        for a in arq.iter().filter(|a| has(a)) {
            let pts: Vec<(&GridPoint, f64)> = s
                .points
                .iter()
                .filter(|g| g.arq_in_time)
                .filter_map(|g| Some((g, g.on_time(a)?)))
                .collect();
            if let Some((g, worst)) = pts.iter().copied().min_by(|x, y| x.1.total_cmp(&y.1)) {
                out.push(ClaimResult::new(
                    &s.name,
                    *a,
                    format!("{} points with {ARQ_RTTS} RTT < deadline", pts.len()),
                    "on_time_pct",
                    format!(
                        "(ours) where a retransmission fits in the deadline ({ARQ_RTTS} RTT < \
                         200 ms), {a} (ARQ) delivers ≥ {ARQ_IN_TIME_PCT} % on time at every loss \
                         rate and model"
                    ),
                    src(),
                    None,
                    format!("mean ≥ {ARQ_IN_TIME_PCT} at every point"),
                    format!("min {worst:.2} % ({})", g.label()),
                    worst >= ARQ_IN_TIME_PCT,
                ));
            }
        }
        // 2. ARQ too late: within ARQ_LIKE_UDP_PTS of UDP.
        if has("udp") {
            for a in arq.iter().filter(|a| has(a)) {
                let pts: Vec<(&GridPoint, f64)> = s
                    .points
                    .iter()
                    .filter(|g| !g.arq_in_time)
                    .filter_map(|g| Some((g, g.on_time(a)? - g.on_time("udp")?)))
                    .collect();
                if let Some((g, worst)) = pts
                    .iter()
                    .copied()
                    .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
                {
                    out.push(ClaimResult::new(
                        &s.name,
                        *a,
                        format!("{} points with {ARQ_RTTS} RTT ≥ deadline", pts.len()),
                        "on_time_pct − udp's",
                        format!(
                            "(ours) where a retransmission cannot make the deadline, {a} (ARQ) \
                             delivers what UDP does (within {ARQ_LIKE_UDP_PTS} points): only \
                             FEC can help"
                        ),
                        src(),
                        None,
                        format!("|difference| ≤ {ARQ_LIKE_UDP_PTS} points at every point"),
                        format!("largest {worst:+.2} points ({})", g.label()),
                        worst.abs() <= ARQ_LIKE_UDP_PTS,
                    ));
                }
            }
        }
        // 3. Both ≥ max(ARQ alone, FEC alone) − tolerance.
        for a in arq.iter().filter(|a| has(a)) {
            let both = format!("{a}+fec");
            if !has(&both) || !has("udp+fec") {
                continue;
            }
            let pts: Vec<(&GridPoint, f64)> = s
                .points
                .iter()
                .filter_map(|g| {
                    let best = g.on_time(a)?.max(g.on_time("udp+fec")?);
                    Some((g, g.on_time(&both)? - best))
                })
                .collect();
            if let Some((g, worst)) = pts.iter().copied().min_by(|x, y| x.1.total_cmp(&y.1)) {
                out.push(ClaimResult::new(
                    &s.name,
                    both.clone(),
                    format!("all {} points", pts.len()),
                    "on_time_pct − max(arq, udp+fec)",
                    format!(
                        "(ours) both (FEC under {a}) deliver at least the better of ARQ alone \
                         ({a}) and FEC alone (udp+fec), less {BOTH_TOLERANCE_PTS} points"
                    ),
                    src(),
                    None,
                    format!("≥ −{BOTH_TOLERANCE_PTS} points at every point"),
                    format!("min {worst:+.2} points ({})", g.label()),
                    worst >= -BOTH_TOLERANCE_PTS,
                ));
            }
        }
        // 4. FEC at ≤ 2 % Bernoulli: ≥ 99 % on every seed, where FEC is on
        // (always over UDP; where ARQ is too late under ARQ).
        for a in s.arms.iter().filter(|a| a.ends_with("+fec")) {
            let udp = a == "udp+fec";
            let mut worst: Option<(String, f64)> = None;
            let mut n = 0;
            for c in done.configs.iter().filter(|c| {
                let p = &c.params;
                done.plan.scenarios[c.point.scenario_index].name == s.name
                    && &p.arm == a
                    && p.model == "bernoulli"
                    && p.loss <= FEC_TARGET_LOSS + 1e-12
                    && (udp || !p.arq_in_time())
            }) {
                n += 1;
                for (seed, v) in c.values(&FecArq, "on_time_pct") {
                    if worst.as_ref().is_none_or(|w| v < w.1) {
                        worst = Some((
                            format!(
                                "bernoulli {}, {} ms, seed {seed}",
                                c.params.loss_text,
                                c.params.rtt_ms()
                            ),
                            v,
                        ));
                    }
                }
            }
            if let Some((at, v)) = worst {
                let overhead = done
                    .configs
                    .iter()
                    .find_map(|c| c.params.sc.fec.as_ref().map(|f| f.max_overhead))
                    .unwrap_or(0.0);
                out.push(ClaimResult::new(
                    &s.name,
                    a.clone(),
                    format!(
                        "{n} points: Bernoulli ≤ {} %{}",
                        FEC_TARGET_LOSS * 100.0,
                        if udp { "" } else { ", ARQ too late" }
                    ),
                    "on_time_pct",
                    format!(
                        "(ours, issue 34 done-when) with FEC ({a}) at most {:.0} % overhead, \
                         ≥ {FEC_TARGET_PCT} % on time at Bernoulli loss up to {} %",
                        overhead * 100.0,
                        FEC_TARGET_LOSS * 100.0
                    ),
                    Some("issue 34, done when".into()),
                    Some("≥ 99 % on time at ≤ 25 % overhead (300 ms, 2 %)".into()),
                    format!("≥ {FEC_TARGET_PCT} on every seed"),
                    format!("min {v:.2} % ({at})"),
                    v >= FEC_TARGET_PCT,
                ));
            }
        }
        // 5. Bursts cost FEC more than ARQ: at each loss, where ARQ is in
        // time, (bernoulli − gilbert) on-time share of udp+fec exceeds
        // that of each ARQ arm (means over the in-time RTTs).
        if has("udp+fec") {
            for a in arq.iter().filter(|a| has(a)) {
                let mut losses: Vec<&str> = Vec::new();
                for g in &s.points {
                    if !losses.contains(&g.loss.as_str()) {
                        losses.push(&g.loss);
                    }
                }
                let cost = |arm: &str, loss: &str| -> Option<f64> {
                    let mean = |model: &str| {
                        let v: Vec<f64> = s
                            .points
                            .iter()
                            .filter(|g| g.arq_in_time && g.model == model && g.loss == loss)
                            .filter_map(|g| g.on_time(arm))
                            .collect();
                        (!v.is_empty()).then(|| Stat::of(&v).mean)
                    };
                    Some(mean("bernoulli")? - mean("gilbert")?)
                };
                let rows: Vec<(String, f64, f64)> = losses
                    .iter()
                    .filter_map(|l| Some((l.to_string(), cost("udp+fec", l)?, cost(a, l)?)))
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                let held = rows.iter().filter(|r| r.1 > r.2).count();
                out.push(ClaimResult::new(
                    &s.name,
                    format!("udp+fec vs {a}"),
                    format!("{} losses, RTTs where ARQ is in time", rows.len()),
                    "bernoulli − gilbert on_time_pct",
                    format!(
                        "(ours) bursts (Gilbert, same mean loss) cost FEC (udp+fec) more on-time \
                         share than ARQ ({a}), at every loss"
                    ),
                    src(),
                    None,
                    "FEC's cost > ARQ's at every loss".to_string(),
                    rows.iter()
                        .map(|(l, f, q)| format!("{l}: FEC {f:+.2}, ARQ {q:+.2}"))
                        .collect::<Vec<_>>()
                        .join("; "),
                    held == rows.len(),
                ));
            }
        }
        // 6. The overhead bound: repair payload ≤ the budget on every run.
        let fec_configs: Vec<_> = done
            .configs
            .iter()
            .filter(|c| done.plan.scenarios[c.point.scenario_index].name == s.name && c.params.fec)
            .collect();
        let mut worst: Option<f64> = None;
        for c in &fec_configs {
            for (_, v) in c.values(&FecArq, "fec_overhead_pct") {
                worst = Some(worst.map_or(v, |w: f64| w.max(v)));
            }
        }
        if let (Some(w), Some(bound)) = (
            worst,
            fec_configs
                .first()
                .and_then(|c| c.params.sc.fec.as_ref().map(|f| f.max_overhead * 100.0)),
        ) {
            out.push(ClaimResult::new(
                &s.name,
                "every +fec arm",
                format!("{} configurations", fec_configs.len()),
                "fec_overhead_pct",
                format!(
                    "(ours) repair payload stays within the {bound:.0} % budget of the protected \
                     payload on every run"
                ),
                src(),
                None,
                format!("≤ {bound:.1} on every seed"),
                format!("max {w:.2} %"),
                w <= bound + 1e-9,
            ));
        }
    }
    out
}

/// ARQ's gain over UDP per RTT (mean over the scenario's losses and
/// models), for the crossover line of the summary.
fn gain_by_rtt(s: &ScenarioSummary, arm: &str, base: &str) -> Vec<(f64, f64)> {
    let mut rtts: Vec<f64> = Vec::new();
    for g in &s.points {
        if !rtts.contains(&g.rtt_ms) {
            rtts.push(g.rtt_ms);
        }
    }
    rtts.into_iter()
        .filter_map(|r| {
            let v: Vec<f64> = s
                .points
                .iter()
                .filter(|g| g.rtt_ms == r)
                .filter_map(|g| Some(g.on_time(arm)? - g.on_time(base)?))
                .collect();
            (!v.is_empty()).then(|| (r, Stat::of(&v).mean))
        })
        .collect()
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
        "Mean over seeds of the share of messages delivered by their deadline (% of those \
         sent). *oracle*: what the network delivered in time with no repair (the mean over \
         the arms without FEC). *FEC overhead*: repair payload / protected payload (the \
         budget's measure); *wire*: bytes on the wire against the same transport without \
         FEC at the same point. A point is *ARQ in time* when {ARQ_RTTS} × RTT < the \
         deadline.\n"
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            m,
            "## Scenario `{}` (congestion control {})\n",
            sc.name, sc.cc
        );
        let fec_arms: Vec<&String> = sc.arms.iter().filter(|a| a.ends_with("+fec")).collect();
        let _ = write!(m, "| model | loss | RTT ms | ARQ in time | oracle |");
        for a in &sc.arms {
            let _ = write!(m, " {a} |");
        }
        for a in &fec_arms {
            let _ = write!(m, " {a} overhead / wire |");
        }
        let _ = writeln!(m);
        let _ = writeln!(m, "|{}", "---|".repeat(5 + sc.arms.len() + fec_arms.len()));
        for g in &sc.points {
            let _ = write!(
                m,
                "| {} | {} | {} | {} | {:.2} |",
                g.model,
                g.loss,
                g.rtt_ms,
                if g.arq_in_time { "yes" } else { "no" },
                g.oracle_pct
            );
            for a in &sc.arms {
                let _ = write!(
                    m,
                    " {} |",
                    g.on_time(a).map_or("–".into(), |v| format!("{v:.2}"))
                );
            }
            for a in &fec_arms {
                let cell = g.arm(a).map_or("–".to_string(), |x| {
                    format!(
                        "{} / {}",
                        x.fec_overhead_pct
                            .as_ref()
                            .filter(|o| o.n > 0)
                            .map_or("–".into(), |o| format!("{:.1} %", o.mean)),
                        x.wire_vs_no_fec_pct
                            .map_or("–".into(), |w| format!("{w:+.1} %"))
                    )
                });
                let _ = write!(m, " {cell} |");
            }
            let _ = writeln!(m);
        }
        let _ = writeln!(m);
        let base = if sc.arms.iter().any(|a| a == "udp") {
            Some("udp")
        } else {
            None
        };
        if let Some(base) = base {
            let _ = writeln!(
                m,
                "Gain over UDP in on-time points, mean over the losses and models, per RTT \
                 (where retransmission stops helping):\n"
            );
            let rtts = gain_by_rtt(sc, base, base);
            let _ = write!(m, "| arm |");
            for (r, _) in &rtts {
                let _ = write!(m, " {r} ms |");
            }
            let _ = writeln!(m);
            let _ = writeln!(m, "|{}", "---|".repeat(1 + rtts.len()));
            for a in sc.arms.iter().filter(|a| *a != base) {
                let _ = write!(m, "| {a} |");
                for (_, v) in gain_by_rtt(sc, a, base) {
                    let _ = write!(m, " {v:+.2} |");
                }
                let _ = writeln!(m);
            }
            let _ = writeln!(m);
        }
    }
    m.push_str(&crate::claims::markdown_section(&s.claims));
    m
}

fn readme(s: &Summary, first: &ArmPoint, md: &str, figures: &[Figure], command: &str) -> String {
    let st = &s.stream;
    let mut r = String::new();
    let _ = writeln!(r, "# {}\n", s.description);
    let _ = writeln!(
        r,
        "Produced by `{command}` in {:.2} s of wall time ({} runs, {:.0} s of stream, {} \
         threads). Every number and plot here comes from that run; the simulator is \
         deterministic, so the same command gives the same numbers.\n",
        s.wall_seconds, s.runs, s.sim_seconds, s.jobs
    );
    let _ = writeln!(r, "## Setup\n");
    let _ = writeln!(
        r,
        "`hollywood sim messages` per arm: {} messages of {} B every {} ms ({:.2} Mb/s of \
         payload), each with a {:.0} ms lifetime, over {} Mb/s both ways with drop-tail queues \
         of {} bytes; loss on the media direction, Bernoulli or Gilbert-Elliott (every packet \
         lost in the bad state, mean bursts of {} packets, the same mean loss). FEC: the \
         message layer's (docs/FEC.md), deadline-aware, at most {:.0} % repair. Seeds {:?}.\n",
        st.messages,
        st.size,
        st.interval_ms,
        st.size as f64 * 8.0 / st.interval_ms / 1e3,
        st.lifetime_ms,
        st.rate_mbit,
        st.queue_bytes,
        st.burst.map_or("–".into(), |b| format!("{b:.0}")),
        st.fec_overhead * 100.0,
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

    #[test]
    fn a_gilbert_chain_keeps_the_mean_loss_and_the_burst() {
        for p in [0.005, 0.01, 0.02, 0.05] {
            let m = loss_model("gilbert", p, 3.0).unwrap();
            assert!((m.mean_loss() - p).abs() < 1e-12, "{p}");
            let LossModel::GilbertElliott(ge) = m else {
                panic!()
            };
            assert!((1.0 / ge.r - 3.0).abs() < 1e-12);
        }
        // The figure docs/FEC.md used for 2 %: gilbert:0.0068,0.3333.
        let LossModel::GilbertElliott(ge) = loss_model("gilbert", 0.02, 3.0).unwrap() else {
            panic!()
        };
        assert!((ge.p - 0.0068).abs() < 1e-4);
        assert_eq!(loss_model("bernoulli", 0.0, 3.0), Ok(LossModel::None));
        assert!(loss_model("markov", 0.01, 3.0).is_err());
        assert!(loss_model("gilbert", 0.01, 0.5).is_err());
    }

    #[test]
    fn a_plan_configures_arms_and_rejects_what_it_does_not_understand() {
        let plan = |extra: &str| {
            Plan::parse(
                &format!(
                    "name = \"t\"\nadapter = \"fec\"\nseeds = 1\nduration = \"1s\"\n\
                     rtt = \"300ms\"\nloss = \"2%\"\n{extra}\n[[scenario]]\nname = \"a\"\n"
                ),
                None,
            )
            .unwrap()
        };
        let p = plan("sweep.arm = [\"udp\", \"hollywood+fec\"]");
        let pts: Vec<ArmPoint> = p.points().map(|x| FecArq.configure(x).unwrap()).collect();
        assert_eq!(pts[0].transport, "udp");
        assert!(!pts[0].fec && pts[1].fec);
        assert_eq!(pts[1].sc.count, 200);
        assert_eq!(pts[1].sc.size, 1316);
        assert!(!pts[1].arq_in_time());
        assert_eq!(pts[1].sc.fec.as_ref().map(|f| f.max_overhead), Some(0.25));
        for (bad, why) in [
            ("arm = \"tcp+fec\"", "FEC runs over"),
            ("arm = \"smoke\"", "unknown transport"),
            ("arm = \"udp\"\nmodel = \"x\"", "bernoulli or gilbert"),
            ("arm = \"udp\"\nspeed = 1", "unknown field"),
        ] {
            let p = plan(bad);
            let e = FecArq.configure(p.points().next().unwrap()).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
