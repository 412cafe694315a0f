//! `hollywood analyze`: the latency model of thesis §5.1.1 and §5.2.1 —
//! Table 5.1, the playout delays at which standard TCP retransmissions are
//! useful (eq. 5.4), head-of-line blocking (eqs. 5.6–5.7) and the region plot
//! of Fig. 5.1/5.2.
//!
//! Durations are parsed here rather than by clap so that a bad value is an
//! ordinary error (exit status 1) like every other failure.

use crate::plot::{self, Chart, Region as PlotRegion, Rgb, Series, Style};
use crate::units::parse_duration;
use clap::{Args, Subcommand};
use hollywood_media::scenario::models::ch5::{
    self, one_way_delay_ms, HolBlocking, MediaTiming, PlayoutRange, TableRow, Utility,
};
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `hollywood analyze`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AnalyzeArgs {
    #[command(subcommand)]
    table: Option<AnalyzeCommand>,
    /// Application delay bound T_max (e.g. 150ms for voice).
    #[arg(long, allow_hyphen_values = true)]
    tmax: Option<String>,
    /// Framing interval T_framing: media per frame (e.g. 20ms).
    #[arg(long, allow_hyphen_values = true)]
    framing: Option<String>,
    /// Network round-trip time T_rtt.
    #[arg(long, allow_hyphen_values = true)]
    rtt: Option<String>,
    /// Playout delay T_playout to classify (needs --rtt); default: the
    /// largest the delay bound allows at that RTT.
    #[arg(long, allow_hyphen_values = true)]
    playout: Option<String>,
    /// Draw the Fig. 5.1-style region plot (RTT × playout delay) to this
    /// .png or .svg file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Subcommands of `hollywood analyze`.
#[derive(Subcommand, Debug)]
enum AnalyzeCommand {
    /// Thesis Table 5.1: RTT bounds for voice, on-demand video and IPTV.
    #[command(name = "table-5.1")]
    Table51 {
        /// Print JSON: schema, parameters and the rows under `results`.
        #[arg(long)]
        json: bool,
    },
    /// Thesis chapter 6, eqs. 6.1-6.19: the smallest playout buffer for
    /// smooth MPEG-DASH playback per architecture (request-response,
    /// lossless and lossy; progressive push over TCP; progressive over TCP
    /// Hollywood), per encoding rate and RTT; plots Figs. 6.4, 6.7, 6.11
    /// and 6.15 with --plot-dir.
    Ch6(Ch6Args),
}

/// Arguments of `hollywood analyze ch6`.
#[derive(Args, Debug)]
struct Ch6Args {
    /// Bottleneck rate R_bottleneck (thesis: a 30 Mb/s UK link).
    #[arg(long, default_value = "30mbit")]
    bottleneck: String,
    /// Encoding rates R_encoding, comma-separated (thesis: YouTube's 720p,
    /// 1080p, 2K and 4K at 60 fps).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "7.5mbit,12mbit,24mbit,53mbit"
    )]
    encoding: Vec<String>,
    /// RTTs, comma-separated (thesis: 25 and 100 ms).
    #[arg(long, value_delimiter = ',', default_value = "25ms,100ms")]
    rtt: Vec<String>,
    /// Frames per second.
    #[arg(long, default_value_t = 60.0)]
    fps: f64,
    /// Segment size for T_mtu in eq. 6.11 (bytes; the thesis does not
    /// state it).
    #[arg(long, default_value_t = 1500.0)]
    mtu: f64,
    /// Write Figs. 6.4, 6.7, 6.11 and 6.15 (minimum buffer against RTT,
    /// 0-200 ms) as PNG files into this directory.
    #[arg(long)]
    plot_dir: Option<PathBuf>,
    /// Also evaluate the per-chunk equations for chunks of this length
    /// (e.g. 500ms): eqs. 6.1, 6.4, 6.6-6.8, 6.11, 6.12, 6.15, 6.17.
    #[arg(long)]
    chunk: Option<String>,
    /// Session length for eq. 6.1 (thesis: 3 minutes).
    #[arg(long, default_value = "180s")]
    session: String,
    /// Frames per fragment n in eq. 6.15 (progressive download). With
    /// eq. 6.17's frames all of one size, n cancels out: the download is
    /// the chunk's frames at the bottleneck rate whatever n is.
    #[arg(long, default_value_t = 1)]
    fragment_frames: u32,
    /// Stall durations, comma-separated, for eq. 6.18's drift from the
    /// live point (e.g. 0.5s,1.2s).
    #[arg(long, value_delimiter = ',')]
    stalls: Vec<String>,
    /// Print JSON: schema, parameters and the rows under `results`.
    #[arg(long)]
    json: bool,
}

/// One row of `analyze ch6`.
#[derive(Serialize)]
struct Ch6Row {
    encoding_mbps: f64,
    rtt_ms: f64,
    #[serde(flatten)]
    bounds: hollywood_media::scenario::models::ch6::Bounds,
    /// With `--chunk`: the per-chunk equations.
    #[serde(skip_serializing_if = "Option::is_none")]
    chunk: Option<ChunkRow>,
    /// With `--stalls`: eq. 6.18's drift from the live point (s; the same
    /// in every row).
    #[serde(skip_serializing_if = "Option::is_none")]
    offset_s: Option<f64>,
}

/// The per-chunk equations of one (rate, RTT), in seconds and bits.
#[derive(Serialize)]
struct ChunkRow {
    /// T_chunk (s).
    t_chunk: f64,
    /// Eq. 6.1: requests in the session, the manifest included.
    n_requests: f64,
    /// Eq. 6.6: S_chunk (bits).
    chunk_bits: f64,
    /// Eq. 6.7: T_download (s).
    download: f64,
    /// Eq. 6.8: T_fetch without loss (s).
    fetch_lossless: f64,
    /// Eq. 6.11: T_rexmit (s).
    rexmit: f64,
    /// Eq. 6.12: T_fetch with one loss (s).
    fetch_lossy: f64,
    /// Eq. 6.4 without loss: T_chunk ≥ T_fetch.
    smooth_lossless: bool,
    /// Eq. 6.4 with one loss per chunk.
    smooth_lossy: bool,
    /// Eq. 6.17: S_iframe (bits).
    iframe_bits: f64,
    /// Eq. 6.15: progressive download of the chunk in fragments of
    /// `--fragment-frames` (s).
    download_progressive: f64,
}

fn ch6(a: &Ch6Args) -> Result<(), String> {
    use hollywood_media::scenario::models::ch6::DashPath;
    let bottleneck =
        crate::units::parse_rate(&a.bottleneck).map_err(|e| format!("--bottleneck: {e}"))? as f64;
    let encodings = a
        .encoding
        .iter()
        .map(|e| {
            crate::units::parse_rate(e)
                .map(|r| r as f64)
                .map_err(|x| format!("--encoding: {x}"))
        })
        .collect::<Result<Vec<f64>, String>>()?;
    let rtts = a
        .rtt
        .iter()
        .map(|r| duration_ms("rtt", r).map(|v| v / 1e3))
        .collect::<Result<Vec<f64>, String>>()?;
    let path = |rtt: f64, enc: f64| {
        DashPath::new(rtt, enc, bottleneck, a.fps, a.mtu).map_err(|e| e.to_string())
    };
    let chunk = a
        .chunk
        .as_deref()
        .map(|c| duration_ms("chunk", c).map(|v| v / 1e3))
        .transpose()?;
    if chunk.is_some_and(|c| c <= 0.0) {
        return Err("--chunk: use a positive duration".into());
    }
    let session = duration_ms("session", &a.session)? / 1e3;
    if a.fragment_frames == 0 {
        return Err("--fragment-frames: at least 1".into());
    }
    let stalls = a
        .stalls
        .iter()
        .map(|s| duration_ms("stalls", s).map(|v| v / 1e3))
        .collect::<Result<Vec<f64>, String>>()?;
    let mut rows = Vec::new();
    for &rtt in &rtts {
        for &enc in &encodings {
            let p = path(rtt, enc)?;
            let chunk = match chunk {
                None => None,
                Some(t) => {
                    let frames = (t * a.fps).round().max(1.0) as u32;
                    Some(ChunkRow {
                        t_chunk: t,
                        n_requests: hollywood_media::scenario::models::ch6::n_requests(session, t),
                        chunk_bits: p.chunk_bits(t),
                        download: p.download(t),
                        fetch_lossless: p.fetch_lossless(t),
                        rexmit: p.rexmit(),
                        fetch_lossy: p.fetch_lossy(t),
                        smooth_lossless: p.smooth(t, false),
                        smooth_lossy: p.smooth(t, true),
                        iframe_bits: p.iframe_bits(),
                        download_progressive: p
                            .download_progressive(frames, a.fragment_frames.min(frames))
                            .map_err(|e| e.to_string())?,
                    })
                }
            };
            rows.push(Ch6Row {
                encoding_mbps: enc / 1e6,
                rtt_ms: rtt * 1e3,
                bounds: p.bounds(),
                chunk,
                offset_s: None,
            });
        }
    }
    let offset =
        (!stalls.is_empty()).then(|| hollywood_media::scenario::models::ch6::offset(&stalls));
    if let Some(dir) = &a.plot_dir {
        ch6_plots(dir, &encodings, path)?;
    }
    if a.json {
        for r in &mut rows {
            r.offset_s = offset;
        }
        println!("{}", crate::output::json(&rows)?);
        return Ok(());
    }
    println!(
        "Thesis ch. 6: smallest playout buffer for smooth playback over {} Mb/s ({} fps, T_mtu of {} B)",
        bottleneck / 1e6,
        a.fps,
        a.mtu
    );
    println!();
    println!(
        "{:>8} {:>7} {:>6} {:>9} {:>19} {:>19} {:>19} {:>19}",
        "enc Mb/s",
        "RTT ms",
        "load",
        "frame kB",
        "6.10 req-resp",
        "6.14 +loss",
        "6.16 progressive",
        "6.19 Hollywood"
    );
    let cell = |v: Option<f64>| match v {
        Some(s) => format!("{:.1} ms ({:.1} fr)", s * 1e3, s * a.fps),
        None => "infeasible".into(),
    };
    for r in &rows {
        let b = &r.bounds;
        println!(
            "{:>8} {:>7} {:>6.2} {:>9.1} {:>19} {:>19} {:>19} {:>19}",
            r.encoding_mbps,
            r.rtt_ms,
            b.load,
            b.frame_kb,
            cell(b.request_response),
            cell(b.request_response_lossy),
            cell(b.progressive),
            cell(b.hollywood)
        );
    }
    println!();
    println!(
        "6.10  T_buffer ≥ T_rtt / (1 − R_enc/R_bn)                 request-response, lossless"
    );
    println!("6.14  T_buffer ≥ (T_rtt + T_rexmit) / (1 − R_enc/R_bn)    one loss per chunk, T_rexmit = T_rtt + 3·T_mtu (6.11)");
    println!("6.16  T_buffer ≥ T_rtt + S_iframe/R_bn + T_rexmit         progressive push over TCP, S_iframe = R_enc/fps (6.17)");
    println!("6.19  T_buffer ≥ T_rtt + S_iframe/R_bn                    progressive over TCP Hollywood (a loss is skipped)");
    println!("infeasible: R_enc ≥ R_bn, no buffer plays smoothly (Hollywood: continuous skipping)");
    if let Some(t) = chunk {
        println!();
        println!(
            "Chunks of {:.0} ms ({:.1} frames) in a {session} s session; progressive fragments of {} frame(s)",
            t * 1e3,
            t * a.fps,
            a.fragment_frames
        );
        println!();
        println!(
            "{:>8} {:>7} {:>9} {:>9} {:>10} {:>10} {:>9} {:>10} {:>8} {:>8} {:>11}",
            "enc Mb/s",
            "RTT ms",
            "6.1 reqs",
            "6.6 kB",
            "6.7 dl ms",
            "6.8 fetch",
            "6.11 rex",
            "6.12 lossy",
            "6.4 ok",
            "+loss ok",
            "6.15 prog ms"
        );
        for r in &rows {
            let Some(c) = &r.chunk else { continue };
            println!(
                "{:>8} {:>7} {:>9} {:>9.1} {:>10.1} {:>10.1} {:>9.1} {:>10.1} {:>8} {:>8} {:>11.1}",
                r.encoding_mbps,
                r.rtt_ms,
                c.n_requests,
                c.chunk_bits / 8e3,
                c.download * 1e3,
                c.fetch_lossless * 1e3,
                c.rexmit * 1e3,
                c.fetch_lossy * 1e3,
                if c.smooth_lossless { "yes" } else { "no" },
                if c.smooth_lossy { "yes" } else { "no" },
                c.download_progressive * 1e3
            );
        }
        println!();
        println!("6.1 N = ⌈T_session/T_chunk⌉ + 1; 6.6 S_chunk = R_enc·T_chunk; 6.7 T_download = S_chunk/R_bn;");
        println!("6.8 T_fetch = T_rtt + T_download; 6.11 T_rexmit = T_rtt + 3·T_mtu; 6.12 T_fetch + T_rexmit;");
        println!("6.4 smooth when T_chunk ≥ T_fetch; 6.15 S_iframe/R_bn + Σ S_pframe·n/R_bn (6.17: all frames R_enc/fps)");
    }
    if let Some(o) = offset {
        println!();
        println!(
            "6.18 T_offset = Σ T_stall = {:.3} s after {} stalls (drift from the live point; 0 over TCP Hollywood, which skips)",
            o,
            stalls.len()
        );
    }
    Ok(())
}

/// Figs. 6.4, 6.7, 6.11 and 6.15 (shared with `repro ch6`).
fn ch6_plots(
    dir: &std::path::Path,
    encodings: &[f64],
    path: impl Fn(f64, f64) -> Result<hollywood_media::scenario::models::ch6::DashPath, String>,
) -> Result<(), String> {
    for (file, _) in hollywood_experiments::ch6::bound_plots(dir, encodings, path)? {
        eprintln!("wrote {}", dir.join(file).display());
    }
    Ok(())
}

/// Run `hollywood analyze`: Table 5.1, or one application/path point.
pub fn run(a: AnalyzeArgs) -> Result<(), String> {
    match a.table {
        Some(AnalyzeCommand::Table51 { json }) => table(json),
        Some(AnalyzeCommand::Ch6(c)) => ch6(&c),
        None => point(&a),
    }
}

/// One row of Table 5.1 as JSON.
#[derive(Serialize)]
struct RowJson {
    application: &'static str,
    t_max_ms: f64,
    t_framing_ms: f64,
    rtt_bound_standard_ms: f64,
    rtt_bound_hollywood_ms: f64,
    utility_standard: &'static str,
    utility_hollywood: &'static str,
}

impl From<&TableRow> for RowJson {
    fn from(r: &TableRow) -> Self {
        RowJson {
            application: r.application,
            t_max_ms: r.timing.t_max_ms(),
            t_framing_ms: r.timing.t_framing_ms(),
            rtt_bound_standard_ms: r.rtt_bound_standard_ms,
            rtt_bound_hollywood_ms: r.rtt_bound_hollywood_ms,
            utility_standard: r.utility_standard.label(),
            utility_hollywood: r.utility_hollywood.label(),
        }
    }
}

fn table(json: bool) -> Result<(), String> {
    let rows = ch5::table_5_1();
    if json {
        let v: Vec<RowJson> = rows.iter().map(RowJson::from).collect();
        println!("{}", crate::output::json(&v).map_err(|e| e.to_string())?);
        return Ok(());
    }
    println!("Table 5.1: RTT bounds for retransmissions to be useful (thesis §5.1.1)");
    println!();
    println!(
        "{:<16} {:>9} {:>11} {:>12} {:>12} {:<20} {:<18}",
        "application",
        "T_max ms",
        "framing ms",
        "RTT std ms",
        "RTT Hwd ms",
        "utility standard",
        "utility Hollywood"
    );
    for r in &rows {
        println!(
            "{:<16} {:>9} {:>11} {:>12.1} {:>12.1} {:<20} {:<18}",
            r.application,
            r.timing.t_max_ms(),
            r.timing.t_framing_ms(),
            r.rtt_bound_standard_ms,
            r.rtt_bound_hollywood_ms,
            r.utility_standard.label(),
            r.utility_hollywood.label()
        );
    }
    println!();
    println!("standard:  T_rtt ≤ (2/3)·(T_max − 5·T_framing)  (eq. 5.4 non-empty), clamped at 0");
    println!("Hollywood: T_rtt ≤ 2·(T_max − 2·T_framing)      (T_framing ≤ T_playout ≤ T_max − T_framing − T_rtt/2)");
    println!(
        "utility: none if the bound is 0, within a continent up to {} ms, intercontinental above",
        ch5::INTERCONTINENTAL_RTT_MS
    );
    Ok(())
}

fn duration_ms(flag: &str, value: &str) -> Result<f64, String> {
    parse_duration(value)
        .map(ch5::ms)
        .map_err(|e| format!("--{flag}: {e}"))
}

/// A playout range as JSON.
#[derive(Serialize)]
struct RangeJson {
    lower_ms: f64,
    upper_ms: f64,
    empty: bool,
}

impl From<PlayoutRange> for RangeJson {
    fn from(r: PlayoutRange) -> Self {
        RangeJson {
            lower_ms: r.lower_ms,
            upper_ms: r.upper_ms,
            empty: r.is_empty(),
        }
    }
}

/// Everything about one (T_rtt, T_playout) point.
#[derive(Serialize)]
struct PointJson {
    rtt_ms: f64,
    /// eq. (5.2).
    rexmit_ms: f64,
    /// T_framing ≤ T_playout ≤ T_max − T_framing − T_rtt/2.
    feasible_playout_ms: RangeJson,
    /// eq. (5.4).
    standard_useful_playout_ms: RangeJson,
    playout_ms: f64,
    /// false: the playout delay defaulted to the largest feasible one.
    playout_given: bool,
    region: &'static str,
    /// eq. (5.1) with T_sender = T_framing.
    one_way_delay_ms: f64,
    /// eq. (5.6).
    t_hol_ms: f64,
    /// eq. (5.7).
    n_hol: u64,
    retransmission_late: bool,
}

/// The output of `hollywood analyze --tmax … --framing …`.
#[derive(Serialize)]
struct AnalyzeJson {
    t_max_ms: f64,
    t_framing_ms: f64,
    rtt_bound_standard_ms: f64,
    rtt_bound_hollywood_ms: f64,
    utility_standard: &'static str,
    utility_hollywood: &'static str,
    /// Present with --rtt.
    point: Option<PointJson>,
    /// The plot written, with --plot.
    plot: Option<PathBuf>,
}

fn point(a: &AnalyzeArgs) -> Result<(), String> {
    let (Some(tmax), Some(framing)) = (&a.tmax, &a.framing) else {
        return Err(
            "analyze needs --tmax and --framing (and --rtt, --playout or --plot), \
             or the table-5.1 subcommand; e.g. hollywood analyze --tmax 150ms --framing 20ms --rtt 70ms"
                .into(),
        );
    };
    if a.playout.is_some() && a.rtt.is_none() {
        return Err("--playout needs --rtt".into());
    }
    if a.rtt.is_none() && a.plot.is_none() {
        return Err("analyze needs --rtt, --plot or both".into());
    }
    let timing = MediaTiming::from_ms(duration_ms("tmax", tmax)?, duration_ms("framing", framing)?)
        .map_err(|e| e.to_string())?;
    let rtt_ms = a
        .rtt
        .as_deref()
        .map(|r| duration_ms("rtt", r))
        .transpose()?;
    let playout_ms = a
        .playout
        .as_deref()
        .map(|p| duration_ms("playout", p))
        .transpose()?;

    let point = rtt_ms.map(|rtt| {
        let feasible = timing.feasible_range(rtt);
        // Without --playout: the largest playout delay the bound allows, the
        // application's best case (never below zero).
        let (playout, given) = match playout_ms {
            Some(p) => (p, true),
            None => (feasible.upper_ms.max(0.0), false),
        };
        let hol: HolBlocking = timing.hol(rtt, playout);
        PointJson {
            rtt_ms: rtt,
            rexmit_ms: timing.rexmit_ms(rtt),
            feasible_playout_ms: feasible.into(),
            standard_useful_playout_ms: timing.standard_range(rtt).into(),
            playout_ms: playout,
            playout_given: given,
            region: timing.region(rtt, playout).name(),
            one_way_delay_ms: one_way_delay_ms(timing.t_framing_ms(), playout, rtt),
            t_hol_ms: hol.t_hol_ms,
            n_hol: hol.n_hol,
            retransmission_late: hol.retransmission_late,
        }
    });

    if let Some(path) = &a.plot {
        let mark = point.as_ref().map(|p| (p.rtt_ms, p.playout_ms));
        plot::draw(&region_chart(&timing, mark), path)?;
    }

    let s = timing.rtt_bound_standard_ms();
    let h = timing.rtt_bound_hollywood_ms();
    let out = AnalyzeJson {
        t_max_ms: timing.t_max_ms(),
        t_framing_ms: timing.t_framing_ms(),
        rtt_bound_standard_ms: s,
        rtt_bound_hollywood_ms: h,
        utility_standard: Utility::from_rtt_bound_ms(s).label(),
        utility_hollywood: Utility::from_rtt_bound_ms(h).label(),
        point,
        plot: a.plot.clone(),
    };
    if a.json {
        println!("{}", crate::output::json(&out).map_err(|e| e.to_string())?);
    } else {
        print_human(&timing, &out);
    }
    Ok(())
}

fn range_text(r: &RangeJson) -> String {
    if r.empty {
        format!("none ({:.1} ms > {:.1} ms)", r.lower_ms, r.upper_ms)
    } else {
        format!("{:.1} ms ≤ T_playout ≤ {:.1} ms", r.lower_ms, r.upper_ms)
    }
}

fn region_text(region: &str) -> &'static str {
    match region {
        "standard-useful" => "standard TCP retransmissions arrive in time (useful)",
        "hollywood-useful" => {
            "standard retransmissions arrive too late (wasteful); inconsistent retransmissions are useful"
        }
        "stall" => "infeasible: below the framing interval, playout stalls",
        _ => "infeasible: the one-way delay exceeds T_max",
    }
}

fn print_human(timing: &MediaTiming, o: &AnalyzeJson) {
    println!(
        "T_max {} ms, T_framing {} ms (thesis §5.1.1, T_sender = T_framing)",
        o.t_max_ms, o.t_framing_ms
    );
    println!(
        "standard TCP retransmissions useful while T_rtt ≤ {:.1} ms ({})",
        o.rtt_bound_standard_ms, o.utility_standard
    );
    println!(
        "TCP Hollywood feasible while           T_rtt ≤ {:.1} ms ({})",
        o.rtt_bound_hollywood_ms, o.utility_hollywood
    );
    if let Some(p) = &o.point {
        println!();
        println!("at T_rtt = {} ms:", p.rtt_ms);
        println!(
            "  T_rexmit = T_rtt + 3·T_framing       = {:.1} ms (eq. 5.2)",
            p.rexmit_ms
        );
        println!(
            "  feasible playout delays:               {}",
            range_text(&p.feasible_playout_ms)
        );
        println!(
            "  standard retransmissions useful for:   {} (eq. 5.4)",
            range_text(&p.standard_useful_playout_ms)
        );
        let std_lower = timing.min_useful_playout_ms(p.rtt_ms);
        let feasible = &p.feasible_playout_ms;
        if !feasible.empty && feasible.lower_ms < std_lower {
            // Up to the standard range (exclusive), or the whole feasible
            // range (inclusive) when the standard range is empty.
            let (rel, end) = if std_lower <= feasible.upper_ms {
                ("<", std_lower)
            } else {
                ("≤", feasible.upper_ms)
            };
            println!(
                "  only inconsistent retransmissions for: {:.1} ms ≤ T_playout {rel} {end:.1} ms",
                feasible.lower_ms
            );
        }
        println!();
        println!(
            "at T_playout = {} ms{}:",
            p.playout_ms,
            if p.playout_given {
                ""
            } else {
                " (the largest feasible; set --playout)"
            }
        );
        println!("  {} [{}]", region_text(p.region), p.region);
        println!(
            "  T_owd = T_framing + T_playout + T_rtt/2 = {:.1} ms (eq. 5.1)",
            p.one_way_delay_ms
        );
        println!(
            "  head-of-line blocking after a loss: T_hol = {:.1} ms (eq. 5.6), N_hol = {} frame{} (eq. 5.7){}",
            p.t_hol_ms,
            p.n_hol,
            if p.n_hol == 1 { "" } else { "s" },
            if p.retransmission_late {
                "; the lost frame's own retransmission is too late"
            } else {
                ""
            }
        );
    }
    if let Some(path) = &o.plot {
        println!();
        println!("plot written to {}", path.display());
    }
}

/// The Fig. 5.1/5.2-style chart over RTT (x) × playout delay (y): green
/// where standard retransmissions are useful (eq. 5.4), red where only
/// inconsistent retransmissions are, infeasible areas unshaded, with the
/// bounding lines and (optionally) one marked point.
fn region_chart(timing: &MediaTiming, mark: Option<(f64, f64)>) -> Chart {
    let f = timing.t_framing_ms();
    let t_max = timing.t_max_ms();
    let s = timing.rtt_bound_standard_ms();
    let h = timing.rtt_bound_hollywood_ms();
    let upper = |rtt: f64| timing.max_playout_ms(rtt);

    let x_max = [h * 1.15, mark.map_or(0.0, |m| m.0 * 1.1), 2.0 * f]
        .into_iter()
        .fold(f64::MIN, f64::max);
    let y_max = [t_max - f, 4.0 * f, mark.map_or(0.0, |m| m.1)]
        .into_iter()
        .fold(f64::MIN, f64::max)
        * 1.1;

    let mut regions = Vec::new();
    if h > 0.0 {
        // Green: T_rtt + 4·T_framing ≤ T_playout ≤ T_max − T_framing − T_rtt/2,
        // a triangle from RTT 0 to the standard bound (eq. 5.4).
        let green = s > 0.0;
        if green {
            regions.push(PlotRegion {
                label: "standard retransmissions useful (eq. 5.4)".into(),
                polygon: vec![(0.0, 4.0 * f), (s, s + 4.0 * f), (0.0, upper(0.0))],
                fill: Rgb::GREEN,
                opacity: 0.45,
            });
        }
        // Red: feasible (T_framing ≤ T_playout ≤ upper) minus green.
        let red = if green {
            vec![(0.0, f), (h, f), (s, s + 4.0 * f), (0.0, 4.0 * f)]
        } else {
            vec![(0.0, f), (h, f), (0.0, upper(0.0))]
        };
        regions.push(PlotRegion {
            label: "wasteful: only inconsistent retransmissions useful".into(),
            polygon: red,
            fill: Rgb::RED,
            opacity: 0.35,
        });
    }

    let line =
        |name: &str, pts: Vec<(f64, f64)>, color: Rgb| Series::new(name, pts, Style::Line, color);
    let mut series = vec![
        line(
            "T_playout = T_max − T_framing − T_rtt/2 (eq. 5.1)",
            vec![(0.0, upper(0.0)), (x_max, upper(x_max))],
            Rgb::BLACK,
        ),
        line(
            "T_playout = T_rtt + 4·T_framing (eq. 5.3)",
            vec![(0.0, 4.0 * f), (x_max, x_max + 4.0 * f)],
            Rgb::BLUE,
        ),
        line(
            "T_playout = T_rtt + 3·T_framing: head-of-line blocking below (eq. 5.6)",
            vec![(0.0, 3.0 * f), (x_max, x_max + 3.0 * f)],
            Rgb::ORANGE,
        ),
        line(
            "T_playout = T_framing",
            vec![(0.0, f), (x_max, f)],
            Rgb::GREY,
        ),
    ];
    if let Some(m) = mark {
        series.push(Series::new(
            format!("T_rtt {} ms, T_playout {} ms", fmt_ms(m.0), fmt_ms(m.1)),
            vec![m],
            Style::Crosses,
            Rgb::PURPLE,
        ));
    }
    Chart {
        title: format!(
            "Utility of TCP retransmissions: T_max = {} ms, T_framing = {} ms (thesis Fig. 5.1)",
            fmt_ms(t_max),
            fmt_ms(f)
        ),
        x_label: "round-trip time T_rtt (ms)".into(),
        y_label: "playout delay T_playout (ms)".into(),
        x_range: Some((0.0, x_max)),
        y_range: Some((0.0, y_max)),
        series,
        hlines: Vec::new(),
        regions,
    }
}

/// Milliseconds without trailing zeros.
fn fmt_ms(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_media::scenario::models::ch5::Region;

    fn area(poly: &[(f64, f64)]) -> f64 {
        let n = poly.len();
        (0..n)
            .map(|i| {
                let (a, b) = (poly[i], poly[(i + 1) % n]);
                a.0 * b.1 - b.0 * a.1
            })
            .sum::<f64>()
            .abs()
            / 2.0
    }

    #[test]
    fn voice_regions_match_fig_5_2() {
        let t = MediaTiming::from_ms(150.0, 20.0).unwrap();
        let c = region_chart(&t, Some((70.0, 30.0)));
        assert_eq!(c.regions.len(), 2);
        let green = &c.regions[0].polygon;
        // Apex of the green triangle at the 33.3 ms standard bound.
        assert!((green[1].0 - 100.0 / 3.0).abs() < 1e-9);
        // Every vertex of both regions is classified consistently (centroids).
        let centroid = |p: &[(f64, f64)]| {
            let n = p.len() as f64;
            (
                p.iter().map(|q| q.0).sum::<f64>() / n,
                p.iter().map(|q| q.1).sum::<f64>() / n,
            )
        };
        let g = centroid(green);
        assert_eq!(t.region(g.0, g.1), Region::StandardUseful);
        let r = centroid(&c.regions[1].polygon);
        assert_eq!(t.region(r.0, r.1), Region::HollywoodUseful);
        // Together they cover the feasible triangle: ½·220·(130 − 20).
        let total = area(green) + area(&c.regions[1].polygon);
        assert!((total - 0.5 * 220.0 * 110.0).abs() < 1e-6, "{total}");
    }

    #[test]
    fn iptv_has_no_green_region() {
        let t = MediaTiming::from_ms(1000.0, 200.0).unwrap();
        let c = region_chart(&t, None);
        assert_eq!(c.regions.len(), 1);
        assert_eq!(c.regions[0].fill, Rgb::RED);
        // Infeasible everywhere: no region at all.
        let none = MediaTiming::from_ms(30.0, 20.0).unwrap();
        assert!(region_chart(&none, None).regions.is_empty());
        let dir = std::env::temp_dir().join(format!("hollywood-analyze-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("none.svg");
        plot::draw(&region_chart(&none, None), &p).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() > 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
