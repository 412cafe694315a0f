//! `hollywood repro …` and `hollywood report`: the CLI side of
//! `hollywood_experiments` — parse arguments, run a plan with its adapter,
//! print. Plans, the runner, aggregation, claim checks, writers, plots and
//! the HTML report live in the library.
//!
//! * `repro ch5` — thesis chapter 5 (`scenarios/ch5.toml`, the VoIP adapter);
//! * `repro quicsilver` — [QUICsilver-2019] (`scenarios/quicsilver.toml`, the video
//!   adapter);
//! * `repro rtp-quic` — [RTP-QUIC] (`scenarios/rtp-quic.toml`, the video
//!   adapter);
//! * `repro tcp-video` — [TCP-video] (`scenarios/tcp-video.toml`, the vod
//!   adapter);
//! * `repro dash2018` — [DASHing-2018] (`scenarios/dash2018.toml`, the dash
//!   adapter);
//! * `repro ch6` — thesis chapter 6 (`scenarios/ch6.toml`, the ch6
//!   adapter);
//! * `repro fec-arq` — FEC vs ARQ vs both (`scenarios/fec-arq.toml`, the
//!   fec adapter);
//! * `repro plan FILE` — any plan file, with the adapter it names;
//! * `repro all --out DIR` — every built-in plan into `DIR/<plan>/`, then
//!   `DIR/index.html`;
//! * `report DIR` — rebuild `DIR/index.html` from existing results.

use clap::{Args, Subcommand};
use hollywood_experiments::builtin;
use hollywood_experiments::plan::Plan;
use hollywood_experiments::report;
use hollywood_experiments::run::{Done, Options};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `hollywood repro …`
#[derive(Subcommand, Debug)]
pub enum ReproCommand {
    /// Thesis chapter 5: VoIP over standard TCP and TCP Hollywood
    /// (Figs. 5.4–5.16), intra- and intercontinental, over several seeds.
    Ch5(Ch5Args),
    /// [QUICsilver-2019] (QUICsilver): live video over standard QUIC, QUICsilver,
    /// TCP Hollywood and UDP; 50/100/150 ms one-way × 0–1 % loss, 300 s
    /// streams (Tables 1–3).
    Quicsilver(BuiltinArgs),
    /// [RTP-QUIC] (Walker): video over TCP, UDP, QUIC per stream, GOP, frame
    /// and packet, TCP Hollywood and QUICsilver; 10–150 ms one-way × 0–10 %
    /// loss, 42 and 168 ms jitter buffers (head-of-line-blocking and
    /// sending delay, Figs. 4–8).
    RtpQuic(BuiltinArgs),
    /// [TCP-video] (Mutlu and Jain): a stored video over TCP, [TCP-video]'s
    /// deadline TCP and TCP Hollywood with cross traffic; the initiation
    /// latency for no deadline violation against bottleneck rate and
    /// competing clients, CBR and VBR, and the violation curves (Graphs
    /// 6.1-6.4, 8.1-8.3).
    TcpVideo(BuiltinArgs),
    /// [DASHing-2018] (DASHing Towards Hollywood): MPEG-DASH over TCP and TCP
    /// Hollywood, 5 Mb/s, RTT 150-400 ms at 0.2 %, loss 0-1 % at 100 ms,
    /// [DASHing-2018] §5.5's points and 12 varying profiles; 10 paired runs
    /// each (Figs 3-10, 13-18; with --video DIR also Table 1 and Figs 11,
    /// 12, 15).
    Dash2018(Dash2018Args),
    /// Thesis chapter 6: MPEG-DASH request-response (3-30 frame chunks,
    /// lossless and 0.2 % loss), progressive push over TCP and progressive
    /// over TCP Hollywood (3-30 frame buffers) at 7.5/12/24/53 Mb/s over
    /// 30 Mb/s, 25 and 100 ms (Figs. 6.4-6.17 and the analytical bounds).
    Ch6(BuiltinArgs),
    /// FEC vs ARQ vs both (issue 34): UDP, UDP+FEC, QUICsilver and TCP
    /// Hollywood with and without FEC, a 2.1 Mb/s stream with a 200 ms
    /// deadline, RTT 50-350 ms × loss 0.5-5 %, Bernoulli and Gilbert bursts.
    FecArq(BuiltinArgs),
    /// Run an experiment plan file (TOML) with the adapter it names.
    Plan(PlanArgs),
    /// Every built-in plan into DIR/<plan>/, then one page: DIR/index.html.
    All(AllArgs),
    /// Rebuild DIR/index.html from the results of `repro all --out DIR`.
    Report(ReportArgs),
}

/// Options every reproduction takes.
#[derive(Args, Debug)]
pub struct Common {
    /// Number of seeds (overrides the plan's `seeds`).
    #[arg(long)]
    seeds: Option<u64>,
    /// Worker threads; default: the number of CPUs (results do not depend on it).
    #[arg(long)]
    jobs: Option<usize>,
    /// Simulated length of every run that has one, replacing the plan's
    /// (e.g. 20s): a quick smoke run of the whole pipeline. The claims are
    /// then checked on shorter runs than the seeds' and may not hold.
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// Print the summary JSON to stdout instead of the tables.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hollywood repro ch5`.
#[derive(Args, Debug)]
pub struct Ch5Args {
    /// Output directory (created if missing).
    #[arg(long, default_value = "out/ch5")]
    out: PathBuf,
    /// Experiment plan (TOML); default: the built-in scenarios/ch5.toml.
    #[arg(long)]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// Arguments of a built-in reproduction other than ch5.
#[derive(Args, Debug)]
pub struct BuiltinArgs {
    /// Output directory (created if missing); default: out/<plan name>.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// Arguments of `hollywood repro dash2018`.
#[derive(Args, Debug)]
pub struct Dash2018Args {
    #[command(flatten)]
    builtin: BuiltinArgs,
    /// Real video: a ladder from `hollywood dash-ladder` instead of the
    /// synthetic one. Its length replaces the plan's 597 s; every run is
    /// scored frame by frame (PSNR, SSIM; [DASHing-2018] Table 1, Figs 11, 12,
    /// 15). The ladder's own scores are computed once and kept in
    /// DIR/quality/.
    #[arg(long)]
    video: Option<PathBuf>,
}

/// Arguments of `hollywood repro plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The plan (TOML; see scenarios/).
    plan: PathBuf,
    /// Output directory; default: out/<plan name>.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// Arguments of `hollywood repro all`.
#[derive(Args, Debug)]
pub struct AllArgs {
    /// Output directory: one subdirectory per plan and index.html.
    #[arg(long, default_value = "out/repro")]
    out: PathBuf,
    #[command(flatten)]
    common: Common,
}

/// Arguments of `hollywood report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A directory written by `hollywood repro all` (or holding several
    /// reproductions' directories).
    dir: PathBuf,
}

/// A simulated connection allocates and frees buffers per segment (the
/// receive ring), per chunk (the send buffer grows with what is queued) and
/// per packet; glibc gives freed memory above its trim threshold (and every
/// block above its mmap threshold) back to the kernel, and the next chunk
/// faults it in again (about 2 % of a `repro dash2018`, sys time mostly).
/// A repro is one batch process: keep the memory. The results do not
/// depend on it.
#[allow(unsafe_code)]
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets allocator parameters (a failure leaves
    // the defaults); it is called before the worker threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

pub fn run(cmd: ReproCommand) -> Result<(), String> {
    keep_freed_memory();
    match cmd {
        ReproCommand::Ch5(a) => {
            let plan = match &a.scenario {
                None => builtin::load("ch5", a.common.seeds),
                Some(p) => Plan::load(p, a.common.seeds),
            }
            .map_err(|e| e.to_string())?;
            let plan = overridden(plan, &a.common)?;
            let command = format!(
                "hollywood repro ch5 --out {}{}{}",
                a.out.display(),
                a.scenario
                    .as_ref()
                    .map(|p| format!(" --scenario {}", p.display()))
                    .unwrap_or_default(),
                seeds_flag(&a.common)
            );
            one(&plan, Some("voip"), &a.out, command, &a.common)
        }
        ReproCommand::Quicsilver(a) => builtin_one("quicsilver", &a),
        ReproCommand::RtpQuic(a) => builtin_one("rtp-quic", &a),
        ReproCommand::TcpVideo(a) => builtin_one("tcp-video", &a),
        ReproCommand::Dash2018(a) => dash2018(&a),
        ReproCommand::Ch6(a) => builtin_one("ch6", &a),
        ReproCommand::FecArq(a) => builtin_one("fec-arq", &a),
        ReproCommand::Report(a) => report(a),
        ReproCommand::Plan(a) => {
            let plan = Plan::load(&a.plan, a.common.seeds).map_err(|e| e.to_string())?;
            let plan = overridden(plan, &a.common)?;
            let out = a
                .out
                .clone()
                .unwrap_or_else(|| Path::new("out").join(&plan.name));
            let command = format!(
                "hollywood repro plan {} --out {}{}",
                a.plan.display(),
                out.display(),
                seeds_flag(&a.common)
            );
            one(&plan, None, &out, command, &a.common)
        }
        ReproCommand::All(a) => all(&a),
    }
}

fn builtin_one(name: &str, a: &BuiltinArgs) -> Result<(), String> {
    let plan = builtin::load(name, a.common.seeds).map_err(|e| e.to_string())?;
    let plan = overridden(plan, &a.common)?;
    let out = a.out.clone().unwrap_or_else(|| Path::new("out").join(name));
    let command = format!(
        "hollywood repro {name} --out {}{}",
        out.display(),
        seeds_flag(&a.common)
    );
    one(&plan, None, &out, command, &a.common)
}

fn dash2018(a: &Dash2018Args) -> Result<(), String> {
    let Some(video) = &a.video else {
        return builtin_one("dash2018", &a.builtin);
    };
    if !video.join("manifest.mpd").is_file() {
        return Err(format!(
            "--video {}: no manifest.mpd there (make one with `hollywood dash-ladder --out {}`)",
            video.display(),
            video.display()
        ));
    }
    let b = &a.builtin;
    let plan = builtin::load("dash2018", b.common.seeds).map_err(|e| e.to_string())?;
    let mut plan = overridden(plan, &b.common)?;
    let dir = video
        .canonicalize()
        .map_err(|e| format!("{}: {e}", video.display()))?;
    let dir = dir
        .to_str()
        .ok_or_else(|| format!("{}: not UTF-8", dir.display()))?
        .to_string();
    plan.set_str("video", &dir);
    let out = b
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join("dash2018-video"));
    let command = format!(
        "hollywood repro dash2018 --video {} --out {}{}",
        video.display(),
        out.display(),
        seeds_flag(&b.common)
    );
    one(&plan, None, &out, command, &b.common)
}

/// The command-line flags of `c` that change what runs, for the results'
/// `command`.
fn seeds_flag(c: &Common) -> String {
    let mut f = c.seeds.map(|n| format!(" --seeds {n}")).unwrap_or_default();
    if let Some(d) = &c.duration {
        f.push_str(&format!(" --duration {d}"));
    }
    f
}

/// `plan` with `c`'s overrides applied (`--duration`).
fn overridden(mut plan: Plan, c: &Common) -> Result<Plan, String> {
    if let Some(d) = &c.duration {
        let t = hollywood_experiments::units::parse_duration(d)
            .map_err(|e| format!("--duration {d}: {e}"))?;
        if t.is_zero() {
            return Err(format!("--duration {d}: must be longer than zero"));
        }
        plan.replace_str("duration", d);
    }
    Ok(plan)
}

fn options(out: &Path, command: String, c: &Common) -> Options {
    Options {
        out: out.to_path_buf(),
        jobs: c.jobs,
        command,
        progress: !c.json,
    }
}

fn footer(d: &Done, out: &Path) -> String {
    format!(
        "{} runs ({:.0} s simulated) in {:.2} s on {} threads ({:.0}x real time); \
         claims: {}; wrote {}",
        d.runs,
        d.sim_seconds,
        d.wall_seconds,
        d.jobs,
        d.sim_seconds / d.wall_seconds.max(1e-9),
        d.claims,
        out.display()
    )
}

fn one(
    plan: &Plan,
    adapter: Option<&str>,
    out: &Path,
    command: String,
    c: &Common,
) -> Result<(), String> {
    let d = builtin::run(plan, adapter, &options(out, command, c))?;
    if c.json {
        println!("{}", d.summary_json);
    } else {
        print!("{}", d.summary_md);
        println!("{}", footer(&d, out));
    }
    Ok(())
}

/// One reproduction in `repro all`'s JSON.
#[derive(Serialize)]
struct AllEntry {
    plan: &'static str,
    dir: PathBuf,
    runs: usize,
    wall_seconds: f64,
    /// Reproduced claims that meet the seed's figure.
    claims_hold: usize,
    /// Reproduced claims checked (held, differing or failing; not those
    /// by construction).
    claims: usize,
    /// Meet our bound but not the seed's figure (labelled DIFFERS).
    claims_differ: usize,
    /// Miss our own bound.
    claims_fail: usize,
    /// Cannot fail by construction: shown, not counted.
    claims_by_construction: usize,
}

fn all(a: &AllArgs) -> Result<(), String> {
    let mut entries = Vec::new();
    for b in builtin::PLANS {
        let plan = Plan::parse(b.text, a.common.seeds).map_err(|e| format!("{}: {e}", b.name))?;
        let plan = overridden(plan, &a.common)?;
        let out = a.out.join(b.name);
        let command = format!(
            "hollywood repro all --out {}{}",
            a.out.display(),
            seeds_flag(&a.common)
        );
        if !a.common.json {
            eprintln!("{}: {}", b.name, plan.title);
        }
        let d = builtin::run(&plan, None, &options(&out, command, &a.common))
            .map_err(|e| format!("{}: {e}", b.name))?;
        if !a.common.json {
            println!("{}: {}", b.name, footer(&d, &out));
        }
        entries.push(AllEntry {
            plan: b.name,
            dir: out,
            runs: d.runs,
            wall_seconds: d.wall_seconds,
            claims_hold: d.claims.hold,
            claims: d.claims.checked(),
            claims_differ: d.claims.differ,
            claims_fail: d.claims.fail,
            claims_by_construction: d.claims.by_construction,
        });
    }
    let index = report::write_index(&a.out)?;
    if a.common.json {
        let body = serde_json::json!({ "index": index, "reproductions": entries });
        println!("{}", crate::output::json(&body)?);
    } else {
        println!("wrote {}", index.display());
    }
    Ok(())
}

/// `hollywood report DIR`.
pub fn report(a: ReportArgs) -> Result<(), String> {
    let index = report::write_index(&a.dir)?;
    println!("wrote {}", index.display());
    Ok(())
}
