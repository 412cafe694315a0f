//! `repro dash2018 --video DIR`: the picture-quality half of [DASHing-2018] —
//! Table 1 (each representation's PSNR and SSIM against the source), the
//! PSNR/SSIM box plots against RTT and loss (Figs 11 and 12) and the
//! violins over the varying profiles (Fig 15), from every frame of every
//! scored run ([`super::quality`]), and the claims those figures
//! carry.

use super::claim;
use super::quality::{LadderQuality, RunQuality};
use crate::claims::ClaimResult;
use crate::plot::{self, Chart, Region, Rgb, Series, Style};
use crate::report::Figure;
use hollywood_media::dash::content::{Content, DASHING_LADDER};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// The [DASHing-2018] Table 1: PSNR (dB) and SSIM of each representation.
pub(crate) const DASHING_TABLE1: [(f64, f64); 8] = [
    (37.220176, 0.955177),
    (39.142917, 0.967720),
    (40.478799, 0.974580),
    (41.515695, 0.978962),
    (42.226845, 0.981527),
    (42.845958, 0.983509),
    (43.868625, 0.986314),
    (44.387282, 0.987527),
];

/// A distribution of per-frame values.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Dist {
    frames: usize,
    mean: f64,
    min: f64,
    p5: f64,
    p25: f64,
    median: f64,
    p75: f64,
    p95: f64,
    max: f64,
}

impl Dist {
    fn of(v: &[f32]) -> Dist {
        if v.is_empty() {
            return Dist::default();
        }
        let mut s: Vec<f32> = v.to_vec();
        s.sort_by(f32::total_cmp);
        let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize] as f64;
        Dist {
            frames: s.len(),
            mean: s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64,
            min: s[0] as f64,
            p5: q(0.05),
            p25: q(0.25),
            median: q(0.5),
            p75: q(0.75),
            p95: q(0.95),
            max: s[s.len() - 1] as f64,
        }
    }
}

/// One transport at one configuration: every frame of every scored run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SideQuality {
    psnr_db: Dist,
    ssim: Dist,
    runs: usize,
    /// Runs that could not be scored (left out).
    unscored: usize,
    /// Chunks with late or lost messages, over all runs.
    damaged_chunks: usize,
    /// Frames below every representation's encoding of the same frame.
    below_floor: usize,
    /// Of those, frames in chunks that arrived whole (must be none).
    below_floor_intact: usize,
    #[serde(skip)]
    psnr: Vec<f32>,
    #[serde(skip)]
    ssim_frames: Vec<f32>,
}

impl SideQuality {
    pub(crate) fn of(runs: &[&RunQuality], unscored: usize) -> SideQuality {
        let mut psnr = Vec::new();
        let mut ssim = Vec::new();
        for r in runs {
            psnr.extend_from_slice(&r.frames.psnr);
            ssim.extend_from_slice(&r.frames.ssim);
        }
        SideQuality {
            psnr_db: Dist::of(&psnr),
            ssim: Dist::of(&ssim),
            runs: runs.len(),
            unscored,
            damaged_chunks: runs.iter().map(|r| r.damaged_chunks).sum(),
            below_floor: runs.iter().map(|r| r.below_floor).sum(),
            below_floor_intact: runs.iter().map(|r| r.below_floor_intact).sum(),
            psnr,
            ssim_frames: ssim,
        }
    }
}

/// Both transports at one configuration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConfigQuality {
    pub(crate) tcp: SideQuality,
    pub(crate) hollywood: SideQuality,
    /// The QUIC session, where the scenario has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) quic: Option<SideQuality>,
}

/// One scenario's configurations, as the report needs them.
pub(crate) struct ScenarioQuality<'a> {
    pub(crate) name: &'a str,
    pub(crate) x_axis: &'a str,
    /// `(x, x_text, quality)`, sorted by x.
    pub(crate) configs: Vec<(f64, &'a str, &'a ConfigQuality)>,
}

/// The ladder's own quality (the [DASHing-2018] Table 1), as `summary.json` keeps it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LadderRow {
    id: String,
    encoding_kbps: u64,
    chunk_kbps: u64,
    psnr_db: f64,
    ssim: f64,
    seed_chunk_kbps: Option<u64>,
    seed_psnr_db: Option<f64>,
    seed_ssim: Option<f64>,
}

pub(crate) fn ladder_rows(c: &Content, lq: &LadderQuality) -> Vec<LadderRow> {
    c.reps
        .iter()
        .zip(&lq.reps)
        .enumerate()
        .map(|(i, (r, s))| {
            let m = s.mean();
            LadderRow {
                id: r.id.clone(),
                encoding_kbps: r.bandwidth_bps / 1000,
                chunk_kbps: r.chunk_bps / 1000,
                psnr_db: m.psnr_db,
                ssim: m.ssim,
                seed_chunk_kbps: DASHING_LADDER.get(i).map(|l| l.1),
                seed_psnr_db: DASHING_TABLE1.get(i).map(|t| t.0),
                seed_ssim: DASHING_TABLE1.get(i).map(|t| t.1),
            }
        })
        .collect()
}

const TCP_COLOR: Rgb = Rgb(31, 119, 180);
const HW_COLOR: Rgb = Rgb(214, 39, 40);

/// Box plots (violins with `violin`) of one per-frame value, TCP beside
/// Hollywood at each x. Boxes: 25th–75th percentile, a line at the
/// median, whiskers to the 5th and 95th, a dot at the mean. Violins: the
/// density of every frame from the smallest to the largest value.
fn dist_chart(
    title: String,
    x_label: &str,
    y_label: &str,
    sc: &ScenarioQuality<'_>,
    value: &dyn Fn(&SideQuality) -> (&[f32], Dist),
    violin: bool,
) -> Chart {
    let xs: Vec<f64> = sc.configs.iter().map(|c| c.0).collect();
    let spacing = xs
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min);
    let spacing = if spacing.is_finite() { spacing } else { 1.0 };
    let (off, half) = (spacing * 0.2, spacing * 0.16);
    let mut chart = Chart {
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_range: Some((xs[0] - spacing * 0.6, xs[xs.len() - 1] + spacing * 0.6)),
        ..Chart::default()
    };
    let mut labelled = [false; 2];
    for (x, _, q) in &sc.configs {
        for (k, side, dx, color, name) in [
            (0, &q.tcp, -off, TCP_COLOR, "TCP"),
            (1, &q.hollywood, off, HW_COLOR, "Hollywood"),
        ] {
            let (v, d) = value(side);
            if v.is_empty() {
                continue;
            }
            let xc = x + dx;
            let label = if labelled[k] {
                String::new()
            } else {
                labelled[k] = true;
                name.to_string()
            };
            if violin {
                chart.regions.push(Region {
                    label,
                    polygon: violin_polygon(v, d, xc, half),
                    fill: color,
                    opacity: 0.5,
                });
                chart.series.push(Series::new(
                    "",
                    vec![(xc - half * 0.5, d.median), (xc + half * 0.5, d.median)],
                    Style::Line,
                    color,
                ));
            } else {
                let (x0, x1) = (xc - half, xc + half);
                chart.regions.push(Region {
                    label,
                    polygon: vec![(x0, d.p25), (x1, d.p25), (x1, d.p75), (x0, d.p75)],
                    fill: color,
                    opacity: 0.35,
                });
                for seg in [
                    vec![(x0, d.median), (x1, d.median)],
                    vec![(xc, d.p5), (xc, d.p25)],
                    vec![(xc, d.p75), (xc, d.p95)],
                ] {
                    chart.series.push(Series::new("", seg, Style::Line, color));
                }
                chart
                    .series
                    .push(Series::new("", vec![(xc, d.mean)], Style::Points, color));
            }
        }
    }
    chart
}

/// A violin's outline: a histogram of `v` over `[min, max]` in 48 bins,
/// smoothed with a 5-bin triangle, mirrored around `xc`, widest at `half`.
fn violin_polygon(v: &[f32], d: Dist, xc: f64, half: f64) -> Vec<(f64, f64)> {
    const BINS: usize = 48;
    let (lo, hi) = (d.min, d.max);
    if hi - lo < 1e-9 {
        return vec![
            (xc - half, lo),
            (xc + half, lo),
            (xc + half, hi + 1e-6),
            (xc - half, hi + 1e-6),
        ];
    }
    let mut h = [0f64; BINS];
    for &x in v {
        let b = (((x as f64 - lo) / (hi - lo)) * BINS as f64) as usize;
        h[b.min(BINS - 1)] += 1.0;
    }
    let k = [1.0, 2.0, 3.0, 2.0, 1.0];
    let smooth: Vec<f64> = (0..BINS)
        .map(|i| {
            (0..5)
                .filter_map(|j| {
                    let t = (i + j).checked_sub(2)?;
                    (t < BINS).then(|| h[t] * k[j])
                })
                .sum()
        })
        .collect();
    let peak = smooth.iter().cloned().fold(0.0, f64::max).max(1e-9);
    let y = |i: usize| lo + (hi - lo) * (i as f64 + 0.5) / BINS as f64;
    let mut poly: Vec<(f64, f64)> = vec![(xc, lo)];
    poly.extend((0..BINS).map(|i| (xc + half * smooth[i] / peak, y(i))));
    poly.push((xc, hi));
    poly.extend(
        (0..BINS)
            .rev()
            .map(|i| (xc - half * smooth[i] / peak, y(i))),
    );
    poly
}

/// Figs 11, 12 and 15: PSNR above SSIM, one image per scenario.
pub(crate) fn figures(
    scenarios: &[ScenarioQuality<'_>],
    out: &Path,
) -> Result<Vec<Figure>, String> {
    let mut figs = Vec::new();
    for sc in scenarios {
        if sc.configs.len() < 2 {
            continue;
        }
        let (x_label, violin) = match sc.x_axis {
            "rtt" => ("RTT (ms)", false),
            "loss" => ("loss (%)", false),
            "profile" => ("profile (a = 1, ..., l = 12)", true),
            _ => continue,
        };
        let reproduces = match sc.name {
            "rtt" => Some("[DASHing-2018] Fig 11".to_string()),
            "loss" => Some("[DASHing-2018] Fig 12".to_string()),
            "profiles" => Some("[DASHing-2018] Fig 15".to_string()),
            _ => None,
        };
        let kind = if violin { "violins" } else { "box plots" };
        let charts = [
            dist_chart(
                format!("{}: PSNR of every frame shown ({kind})", sc.name),
                x_label,
                "PSNR (dB)",
                sc,
                &|s| (&s.psnr, s.psnr_db),
                violin,
            ),
            dist_chart(
                format!("{}: SSIM of every frame shown ({kind})", sc.name),
                x_label,
                "SSIM",
                sc,
                &|s| (&s.ssim_frames, s.ssim),
                violin,
            ),
        ];
        let file = format!("{}-quality.png", sc.name);
        plot::draw_stacked(&charts, &out.join(&file)).map_err(|e| e.to_string())?;
        figs.push(Figure {
            file,
            caption: format!(
                "{}: frame-level PSNR and SSIM against the source, TCP beside Hollywood, every frame of every scored run ({})",
                sc.name,
                if violin {
                    "violins from the lowest to the highest frame, a line at the median"
                } else {
                    "boxes 25th–75th percentile, line at the median, whiskers 5th–95th, dot at the mean"
                }
            ),
            reproduces,
        });
    }
    Ok(figs)
}

/// The claims of Figs 12 and 15 (Fig 11 states no result).
pub(crate) fn claims(scenarios: &[ScenarioQuality<'_>]) -> Vec<ClaimResult> {
    let mut out = Vec::new();
    if let Some(loss) = scenarios.iter().find(|s| s.name == "loss") {
        let lower: Vec<String> = loss
            .configs
            .iter()
            .filter(|(_, _, q)| {
                // A side without a scored frame cannot show higher quality.
                q.hollywood.psnr_db.frames == 0
                    || q.tcp.psnr_db.frames == 0
                    || q.hollywood.psnr_db.mean < q.tcp.psnr_db.mean
                    || q.hollywood.ssim.mean < q.tcp.ssim.mean
            })
            .map(|(_, t, q)| {
                format!(
                    "{t} ({:.2} vs {:.2} dB, {:.4} vs {:.4})",
                    q.hollywood.psnr_db.mean,
                    q.tcp.psnr_db.mean,
                    q.hollywood.ssim.mean,
                    q.tcp.ssim.mean
                )
            })
            .collect();
        let all: Vec<String> = loss
            .configs
            .iter()
            .map(|(_, t, q)| {
                format!(
                    "{t}: {:.2}/{:.2} dB",
                    q.hollywood.psnr_db.mean, q.tcp.psnr_db.mean
                )
            })
            .collect();
        out.push(claim(
            format!("loss sweep, {} points", loss.configs.len()),
            "PSNR and SSIM (mean over every frame)",
            "Hollywood keeps higher (or equal) PSNR and SSIM than TCP at every loss rate",
            "Hollywood keeps higher PSNR and SSIM than TCP (Fig 12 caption)",
            "Hollywood ≥ TCP in both at every point".into(),
            if lower.is_empty() {
                format!("Hollywood/TCP PSNR {}", all.join(", "))
            } else {
                format!("Hollywood lower at {}", lower.join("; "))
            },
            lower.is_empty(),
        ));
    }
    if let Some(p) = scenarios.iter().find(|s| s.name == "profiles") {
        // Tails: frames below every rung's own encoding of the same frame.
        // A chunk that arrived whole shows one rung's frames, so such a
        // frame in a whole chunk would mean a misaligned grid or decoder
        // state leaking across chunks: the check that can fail. The
        // figures are how many there are, where, and how low they reach.
        let (mut tail, mut intact, mut tcp_tail, mut damaged) = (0usize, 0usize, 0usize, 0usize);
        let mut where_ = Vec::new();
        for (_, t, q) in &p.configs {
            tail += q.hollywood.below_floor;
            intact += q.hollywood.below_floor_intact;
            tcp_tail += q.tcp.below_floor;
            damaged += q.hollywood.damaged_chunks;
            if q.hollywood.below_floor > 0 {
                where_.push(format!(
                    "{t}: {} frames, lowest SSIM {:.4} (TCP's {:.4})",
                    q.hollywood.below_floor, q.hollywood.ssim.min, q.tcp.ssim.min
                ));
            }
        }
        out.push(claim(
            format!("{} varying profiles", p.configs.len()),
            "SSIM tail (frames)",
            "Hollywood's SSIM tail is lost messages: every frame worse than the lowest representation's own encoding of the same frame is in a chunk with late or lost messages, and TCP (which never loses one) has none",
            "SSIM tails = lost messages (Fig 15)",
            "no such frame in a whole chunk (either transport)".into(),
            format!(
                "Hollywood: {tail} such frames, {intact} of them in whole chunks; {damaged} damaged chunks{}; TCP: {tcp_tail}",
                if where_.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", where_.join("; "))
                }
            ),
            intact == 0 && tcp_tail == 0,
        ));
        let apart: Vec<String> = p
            .configs
            .iter()
            .filter(|(_, _, q)| (q.hollywood.psnr_db.median - q.tcp.psnr_db.median).abs() > 1.0)
            .map(|(_, t, q)| {
                format!(
                    "{t} ({:.2} vs {:.2} dB)",
                    q.hollywood.psnr_db.median, q.tcp.psnr_db.median
                )
            })
            .collect();
        out.push(claim(
            format!("{} varying profiles", p.configs.len()),
            "median PSNR (frames)",
            "download quality is similar: the median frame PSNR of the two transports is within 1 dB at every profile (our bar for 'similar shapes')",
            "similar shapes, similar download quality (Fig 15)",
            "|Hollywood − TCP| ≤ 1 dB at every profile".into(),
            if apart.is_empty() {
                "within 1 dB at every profile".into()
            } else {
                format!("apart at {}", apart.join(", "))
            },
            apart.is_empty(),
        ));
    }
    out
}

/// The markdown: the ladder against Table 1, then per scenario the
/// distributions.
pub(crate) fn markdown(
    ladder: &[LadderRow],
    video: &str,
    scenarios: &[ScenarioQuality<'_>],
) -> String {
    let mut md = String::new();
    let source = std::fs::read_to_string(Path::new(video).join("source.txt"))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into());
    let _ = writeln!(
        md,
        "### Picture quality (real video: `{video}`)\n\nThe source is ffmpeg `{source}` (the seed's is Big Buck Bunny at 1080p). Every run is scored frame by frame against it (PSNR, SSIM; chunks that arrived whole are looked up from the ladder's own scores, damaged ones decoded; docs/DASH.md). The ladder against the source, every frame ([DASHing-2018] Table 1):\n"
    );
    let _ = writeln!(
        md,
        "| rep | encoding kb/s | chunk kb/s (seed) | PSNR dB (seed) | SSIM (seed) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for r in ladder {
        let opt = |v: Option<f64>, p: usize| v.map_or("–".into(), |x| format!("{x:.p$}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} ({}) | {:.2} ({}) | {:.4} ({}) |",
            r.id,
            r.encoding_kbps,
            r.chunk_kbps,
            r.seed_chunk_kbps.map_or("–".into(), |v| v.to_string()),
            r.psnr_db,
            opt(r.seed_psnr_db, 2),
            r.ssim,
            opt(r.seed_ssim, 4)
        );
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "Frames shown, every scored run: mean PSNR (dB) [5th, median, 95th]; mean SSIM [5th, median, min]; chunks with late or lost messages.\n"
    );
    for sc in scenarios {
        let _ = writeln!(md, "#### {}\n", sc.name);
        let _ = writeln!(md, "| point | PSNR TCP | PSNR Hollywood | SSIM TCP | SSIM Hollywood | damaged chunks TCP / Hollywood | frames below the ladder's floor, Hollywood | QUIC PSNR / SSIM |");
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
        for (_, t, q) in &sc.configs {
            let p =
                |d: &Dist| format!("{:.2} [{:.2}, {:.2}, {:.2}]", d.mean, d.p5, d.median, d.p95);
            let s =
                |d: &Dist| format!("{:.4} [{:.4}, {:.4}, {:.4}]", d.mean, d.p5, d.median, d.min);
            let _ = writeln!(
                md,
                "| {t} | {} | {} | {} | {} | {} / {} | {} | {} |",
                p(&q.tcp.psnr_db),
                p(&q.hollywood.psnr_db),
                s(&q.tcp.ssim),
                s(&q.hollywood.ssim),
                q.tcp.damaged_chunks,
                q.hollywood.damaged_chunks,
                q.hollywood.below_floor,
                q.quic.as_ref().map_or("–".into(), |x| format!(
                    "{:.2} / {:.4} ({} damaged chunks)",
                    x.psnr_db.mean, x.ssim.mean, x.damaged_chunks
                ))
            );
        }
        md.push('\n');
    }
    let unscored: usize = scenarios
        .iter()
        .flat_map(|sc| &sc.configs)
        .map(|(_, _, q)| {
            q.tcp.unscored + q.hollywood.unscored + q.quic.as_ref().map_or(0, |x| x.unscored)
        })
        .sum();
    if unscored > 0 {
        let _ = writeln!(
            md,
            "{unscored} run(s) could not be scored (nothing played or nothing decodable; the run's warning names why) and are left out of these tables.\n"
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_and_violins() {
        let v: Vec<f32> = (0..=100).map(|i| i as f32).collect();
        let d = Dist::of(&v);
        assert_eq!(
            (d.min, d.p5, d.median, d.p95, d.max),
            (0.0, 5.0, 50.0, 95.0, 100.0)
        );
        assert_eq!(d.mean, 50.0);
        let poly = violin_polygon(&v, d, 3.0, 0.5);
        assert!(poly
            .iter()
            .all(|p| (2.5 - 1e-9..=3.5 + 1e-9).contains(&p.0)));
        assert!(poly.iter().all(|p| (0.0..=100.0).contains(&p.1)));
        // Mirrored: as wide on the left as on the right.
        let right: f64 = poly.iter().map(|p| p.0 - 3.0).fold(0.0, f64::max);
        let left: f64 = poly.iter().map(|p| 3.0 - p.0).fold(0.0, f64::max);
        assert!((right - 0.5).abs() < 1e-9 && (left - 0.5).abs() < 1e-9);
        assert_eq!(Dist::of(&[]).frames, 0);
    }
}
