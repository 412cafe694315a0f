//! The runner: every configuration × seed of a plan is one independent,
//! single-threaded, deterministic simulation; they run in parallel on a
//! `rayon` pool, so results do not depend on the number of threads. Progress
//! is drawn with `indicatif` on a terminal (nothing otherwise).
//!
//! What a reproduction provides is an [`Adapter`]: how to configure one
//! point of the plan, run it with a seed, read named metrics from the
//! result, and write its own summary and README from all results. The runner
//! does the rest: parallel runs, grouping by configuration, the plan's claim
//! checks, `summary.json` (stamped with a [`Schema`]), `summary.md`,
//! `README.md`, `runs.csv` (one row per run, every metric) and the
//! `report.json` card that `report::write_index` turns into `index.html`.

use crate::claims::{check, ClaimResult, Counts};
use crate::plan::{scalar_text, Plan, PlanError, Point};
use crate::report::{Card, Figure, CARD_FILE};
use crate::schema::{Schema, Stamped};
use crate::stats::Stat;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a reproduction must provide: one configuration → a typed result with
/// named metrics, and its report.
pub trait Adapter: Sync + Sized {
    /// One configuration's parameters, typed and checked.
    type Params: Send + Sync;
    /// One run's result.
    type Output: Send;

    /// The name plans use (`adapter = "voip"`).
    fn name(&self) -> &'static str;

    /// The metrics [`Adapter::metric`] knows; claims may use only these.
    fn metrics(&self) -> &'static [&'static str];

    /// Turn a point of the plan into parameters, or say what is wrong with it.
    fn configure(&self, point: &Point) -> Result<Self::Params, String>;

    /// Run one configuration with one seed. `keep` is true for the first
    /// seed: keep what the per-run plots need.
    fn run(&self, params: &Self::Params, seed: u64, keep: bool) -> Result<Self::Output, String>;

    /// A named metric of a run (`None`: undefined for this run, e.g. a ratio
    /// over zero).
    fn metric(&self, out: &Self::Output, name: &str) -> Option<f64>;

    /// Seconds of virtual time a run simulated (for the speed report).
    fn sim_seconds(&self, _out: &Self::Output) -> f64 {
        0.0
    }

    /// Write plots and compose the summary and README from every result.
    fn finish(&self, done: &mut Finished<'_, Self>, ctx: &Context<'_>) -> Result<Written, String>;
}

/// One configuration's results, seeds in plan order.
pub struct ConfigResult<A: Adapter> {
    /// The point of the plan.
    pub point: Point,
    /// Its parameters.
    pub params: A::Params,
    /// `(seed, result)` per seed.
    pub runs: Vec<(u64, A::Output)>,
}

impl<A: Adapter> ConfigResult<A> {
    /// `(seed, value)` of `metric` for every seed that defines it.
    pub fn values(&self, adapter: &A, metric: &str) -> Vec<(u64, f64)> {
        self.runs
            .iter()
            .filter_map(|(s, o)| Some((*s, adapter.metric(o, metric)?)))
            .collect()
    }

    /// Mean ± sd of `metric` over seeds.
    pub fn stat(&self, adapter: &A, metric: &str) -> Stat {
        Stat::of(
            &self
                .values(adapter, metric)
                .into_iter()
                .map(|v| v.1)
                .collect::<Vec<_>>(),
        )
    }
}

/// Everything a plan produced, handed to [`Adapter::finish`].
pub struct Finished<'p, A: Adapter> {
    /// The plan.
    pub plan: &'p Plan,
    /// Per configuration, in plan order.
    pub configs: Vec<ConfigResult<A>>,
    /// The plan's claims, checked.
    pub claims: Vec<ClaimResult>,
    /// Number of runs.
    pub runs: usize,
    /// Worker threads.
    pub jobs: usize,
    /// Virtual seconds simulated over all runs.
    pub sim_seconds: f64,
    /// When the run started (wall clock).
    pub started: Instant,
}

impl<A: Adapter> Finished<'_, A> {
    /// Wall-clock seconds since the start.
    pub fn wall_seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// `body` as pretty JSON with the schema `hollywood.repro.<adapter>` and
    /// the plan as its parameters.
    pub fn stamp<T: Serialize>(&self, adapter: &A, body: &T) -> Result<String, String> {
        let s = Stamped::new(
            Schema::new(format!("hollywood.repro.{}", adapter.name()), 1),
            self.plan.params_json(),
            body,
        );
        serde_json::to_string_pretty(&s).map_err(|e| e.to_string())
    }
}

/// What [`Adapter::finish`] returns: the text of the summary files and the
/// figures it wrote into the output directory.
pub struct Written {
    /// `summary.json` (see [`Finished::stamp`]).
    pub summary_json: String,
    /// `summary.md`.
    pub summary_md: String,
    /// `README.md`.
    pub readme: String,
    /// Figures written, in reading order.
    pub figures: Vec<Figure>,
}

/// The output directory and the parallel pool, for [`Adapter::finish`].
pub struct Context<'a> {
    /// Where files go.
    pub out: &'a Path,
    /// How the run was invoked (for the README).
    pub command: &'a str,
    pool: &'a rayon::ThreadPool,
    bar: &'a ProgressBar,
}

impl Context<'_> {
    /// `f` over `items` on the pool, results in the items' order, one
    /// progress step each.
    pub fn par_map<T: Sync, R: Send>(
        &self,
        items: &[T],
        label: impl Fn(&T) -> String + Sync,
        f: impl Fn(&T) -> R + Sync,
    ) -> Vec<R> {
        self.bar.inc_length(items.len() as u64);
        self.pool.install(|| {
            items
                .par_iter()
                .map(|x| {
                    let r = f(x);
                    self.bar.set_message(label(x));
                    self.bar.inc(1);
                    r
                })
                .collect()
        })
    }
}

/// How to run a plan.
#[derive(Debug, Clone)]
pub struct Options {
    /// Output directory (created if missing).
    pub out: PathBuf,
    /// Worker threads; `None` = the number of CPUs.
    pub jobs: Option<usize>,
    /// The command line that ran it, for the README.
    pub command: String,
    /// Draw a progress bar when stderr is a terminal.
    pub progress: bool,
}

/// What a finished plan reports to its caller.
#[derive(Debug, Clone)]
pub struct Done {
    /// `summary.json`'s text.
    pub summary_json: String,
    /// `summary.md`'s text.
    pub summary_md: String,
    /// Runs made.
    pub runs: usize,
    /// Worker threads.
    pub jobs: usize,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Virtual seconds simulated.
    pub sim_seconds: f64,
    /// How the claims came out.
    pub claims: Counts,
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    std::fs::write(dir.join(name), text)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
}

/// Run `plan` with `adapter`.
pub fn run<A: Adapter>(adapter: &A, plan: &Plan, opts: &Options) -> Result<Done, String> {
    #[allow(clippy::disallowed_methods)] // wall clock: how long the run took, reported
    let started = Instant::now();
    let bad = |m: String| PlanError::Invalid(m).to_string();
    // Configure every point first: a bad plan fails before anything runs.
    let mut configs = Vec::new();
    for p in plan.points() {
        configs.push((p.clone(), adapter.configure(p).map_err(bad)?));
    }
    for s in &plan.scenarios {
        for e in &s.expect {
            if !adapter.metrics().contains(&e.metric.as_str()) {
                return Err(bad(format!(
                    "unknown metric '{}' in scenario {}: use one of {}",
                    e.metric,
                    s.name,
                    adapter.metrics().join(", ")
                )));
            }
        }
    }
    let jobs = opts
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| format!("cannot start {jobs} worker threads: {e}"))?;
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| format!("cannot create {}: {e}", opts.out.display()))?;

    let bar = if opts.progress && std::io::stderr().is_terminal() {
        let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("[{bar:30}] {pos}/{len} {elapsed} {msg}") {
            b.set_style(style.progress_chars("#>."));
        }
        b
    } else {
        ProgressBar::hidden()
    };
    let ctx = Context {
        out: &opts.out,
        command: &opts.command,
        pool: &pool,
        bar: &bar,
    };

    // Every configuration × seed is one independent simulation.
    let work: Vec<(usize, u64)> = (0..configs.len())
        .flat_map(|c| plan.seeds.iter().map(move |&s| (c, s)))
        .collect();
    let first = plan.seeds[0];
    let outputs = ctx.par_map(
        &work,
        |&(c, seed)| format!("{} seed {seed}", configs[c].0.label()),
        |&(c, seed)| {
            adapter
                .run(&configs[c].1, seed, seed == first)
                .map_err(|e| format!("{} / seed {seed}: {e}", configs[c].0.label()))
        },
    );
    let mut outputs = outputs.into_iter();
    let mut results = Vec::new();
    for (point, params) in configs {
        let mut runs = Vec::with_capacity(plan.seeds.len());
        for &seed in &plan.seeds {
            let out = outputs.next().ok_or("a run went missing")??;
            runs.push((seed, out));
        }
        results.push(ConfigResult::<A> {
            point,
            params,
            runs,
        });
    }
    let sim_seconds = results
        .iter()
        .flat_map(|c| c.runs.iter().map(|(_, o)| adapter.sim_seconds(o)))
        .sum();

    // The plan's claims, per configuration they select.
    let mut claims = Vec::new();
    for s in &plan.scenarios {
        for e in &s.expect {
            for c in results
                .iter()
                .filter(|c| c.point.scenario == s.name && e.applies_to(&c.point))
            {
                let values = c.values(adapter, &e.metric);
                let claim = match e.ratio_params(&c.point) {
                    None => check(e, &c.point, &values, plan.seeds.len(), None),
                    Some(to) => {
                        // Validated when the plan was parsed: it exists.
                        let Some(base) = results.iter().find(|d| d.point.params == to) else {
                            return Err(format!(
                                "claim '{}': no configuration to take the ratio to",
                                e.claim
                            ));
                        };
                        let below = base.values(adapter, &e.metric);
                        let ratios: Vec<(u64, f64)> = values
                            .iter()
                            .filter_map(|&(seed, a)| {
                                let b = below.iter().find(|v| v.0 == seed)?.1;
                                (b != 0.0).then_some((seed, a / b))
                            })
                            .collect();
                        check(
                            e,
                            &c.point,
                            &ratios,
                            plan.seeds.len(),
                            Some(&base.point.label()),
                        )
                    }
                };
                claims.push(claim);
            }
        }
    }

    let mut done = Finished {
        plan,
        configs: results,
        claims,
        runs: work.len(),
        jobs,
        sim_seconds,
        started,
    };
    let written = adapter.finish(&mut done, &ctx)?;
    bar.finish_and_clear();
    let out = &opts.out;
    write(out, "summary.json", &written.summary_json)?;
    write(out, "summary.md", &written.summary_md)?;
    write(out, "README.md", &written.readme)?;
    write_runs_csv(adapter, &done, &out.join("runs.csv"))?;
    let card = Card {
        schema: Card::schema(),
        name: plan.name.clone(),
        title: plan.title.clone(),
        description: plan.description.clone(),
        source: plan.source.clone(),
        command: opts.command.clone(),
        seeds: plan.seeds.clone(),
        runs: done.runs,
        wall_seconds: done.wall_seconds(),
        claims: done.claims.clone(),
        figures: written.figures.clone(),
        files: ["summary.json", "summary.md", "README.md", "runs.csv"]
            .map(String::from)
            .to_vec(),
    };
    let card_json = serde_json::to_string_pretty(&card).map_err(|e| e.to_string())?;
    write(out, CARD_FILE, &card_json)?;
    Ok(Done {
        summary_json: written.summary_json,
        summary_md: written.summary_md,
        runs: done.runs,
        jobs,
        wall_seconds: done.wall_seconds(),
        sim_seconds: done.sim_seconds,
        claims: Counts::of(&done.claims),
    })
}

/// One row per run: scenario, the swept values, seed, then every metric
/// (empty where undefined).
fn write_runs_csv<A: Adapter>(
    adapter: &A,
    done: &Finished<'_, A>,
    path: &Path,
) -> Result<(), String> {
    let err = |e: csv::Error| format!("cannot write {}: {e}", path.display());
    let mut w = csv::Writer::from_path(path).map_err(err)?;
    let keys = done.plan.sweep_keys();
    let mut header = vec!["scenario".to_string()];
    header.extend(keys.iter().cloned());
    header.push("seed".into());
    header.extend(adapter.metrics().iter().map(|m| m.to_string()));
    w.write_record(&header).map_err(err)?;
    for c in &done.configs {
        for (seed, o) in &c.runs {
            let mut row = vec![c.point.scenario.clone()];
            for k in &keys {
                row.push(c.point.params.get(k).map(scalar_text).unwrap_or_default());
            }
            row.push(seed.to_string());
            for m in adapter.metrics() {
                row.push(
                    adapter
                        .metric(o, m)
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                );
            }
            w.write_record(&row).map_err(err)?;
        }
    }
    w.flush()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy adapter: the "metric" is a deterministic function of the
    /// parameters and the seed, with a little work so threads interleave.
    struct Toy;

    impl Adapter for Toy {
        type Params = f64;
        type Output = (u64, f64);
        fn name(&self) -> &'static str {
            "toy"
        }
        fn metrics(&self) -> &'static [&'static str] {
            &["x", "odd_only"]
        }
        fn configure(&self, p: &Point) -> Result<f64, String> {
            p.params
                .get("scale")
                .and_then(toml::Value::as_float)
                .ok_or_else(|| "scale must be a number".to_string())
        }
        fn run(&self, scale: &f64, seed: u64, _keep: bool) -> Result<(u64, f64), String> {
            if *scale < 0.0 {
                return Err("negative scale".into());
            }
            let mut h = seed;
            for _ in 0..10_000 {
                h = h
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
            }
            Ok((seed, scale * (h >> 40) as f64))
        }
        fn metric(&self, o: &(u64, f64), name: &str) -> Option<f64> {
            match name {
                "x" => Some(o.1),
                "odd_only" => (o.0 % 2 == 1).then_some(1.0),
                _ => None,
            }
        }
        fn finish(
            &self,
            done: &mut Finished<'_, Self>,
            _ctx: &Context<'_>,
        ) -> Result<Written, String> {
            let body: Vec<(String, Vec<(u64, f64)>)> = done
                .configs
                .iter()
                .map(|c| (c.point.label(), c.values(self, "x")))
                .collect();
            Ok(Written {
                summary_json: done.stamp(self, &body)?,
                summary_md: format!("{} claims", done.claims.len()),
                readme: "toy".into(),
                figures: vec![],
            })
        }
    }

    const PLAN: &str = r#"
name = "toy"
seeds = 7
sweep.scale = [1.0, 2.5]
[[scenario]]
name = "a"
[[scenario.expect]]
where = { scale = 1.0 }
metric = "odd_only"
every_seed_at_most = 1
min_seed_share = 0.5
claim = "odd"
"#;

    fn opts(dir: &Path, jobs: usize) -> Options {
        Options {
            out: dir.to_path_buf(),
            jobs: Some(jobs),
            command: "test".into(),
            progress: false,
        }
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hollywood-exp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let plan = Plan::parse(PLAN, None).unwrap();
        let (d1, d4) = (temp("j1"), temp("j4"));
        let one = run(&Toy, &plan, &opts(&d1, 1)).unwrap();
        let four = run(&Toy, &plan, &opts(&d4, 4)).unwrap();
        assert_eq!(one.summary_json, four.summary_json);
        assert_eq!(one.runs, 14);
        assert_eq!((one.claims.hold, one.claims.checked()), (1, 1));
        let csv1 = std::fs::read_to_string(d1.join("runs.csv")).unwrap();
        assert_eq!(csv1, std::fs::read_to_string(d4.join("runs.csv")).unwrap());
        assert!(
            csv1.starts_with("scenario,scale,seed,x,odd_only\na,1.0,1,"),
            "{csv1}"
        );
        assert_eq!(csv1.lines().count(), 15);
        let v: serde_json::Value = serde_json::from_str(&one.summary_json).unwrap();
        assert_eq!(v["schema"]["name"], "hollywood.repro.toy");
        assert_eq!(v["params"]["seeds"], 7);
        let card: Card =
            serde_json::from_str(&std::fs::read_to_string(d1.join(CARD_FILE)).unwrap()).unwrap();
        assert_eq!(card.claims.len(), 1);
        assert_eq!(card.claims[0].config, "a 1.0");
        assert!(card.claims[0].observed.ends_with("defined on 4 of 7 seeds"));
        for d in [d1, d4] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn a_ratio_is_checked_seed_by_seed_against_the_named_configuration() {
        let d = temp("ratio");
        let plan = Plan::parse(
            &format!(
                "{PLAN}[[scenario.expect]]\nwhere = {{ scale = 2.5 }}\nratio_to = {{ scale = 1.0 }}\n\
                 metric = \"x\"\nevery_seed_at_least = 2.5\nseed = 3.0\n\
                 differs = \"toy\"\nclaim = \"x scales\"\n"
            ),
            None,
        )
        .unwrap();
        let done = run(&Toy, &plan, &opts(&d, 2)).unwrap();
        let card: Card =
            serde_json::from_str(&std::fs::read_to_string(d.join(CARD_FILE)).unwrap()).unwrap();
        let c = &card.claims[1];
        assert_eq!(c.metric, "x / x of a 1.0");
        assert!(c.observed.starts_with("min 2.50"), "{}", c.observed);
        assert_eq!(c.outcome, crate::claims::Outcome::Differs);
        assert_eq!((done.claims.hold, done.claims.differ), (1, 1));
        // A ratio to a configuration the plan does not run is refused.
        let bad = plan_text_with_ratio("{ scale = 9.0 }");
        assert!(Plan::parse(&bad, None)
            .unwrap_err()
            .to_string()
            .contains("names no configuration"));
        let _ = std::fs::remove_dir_all(d);
    }

    fn plan_text_with_ratio(to: &str) -> String {
        format!(
            "{PLAN}[[scenario.expect]]\nwhere = {{ scale = 2.5 }}\nratio_to = {to}\n\
             metric = \"x\"\nmean_at_least = 1\nclaim = \"r\"\n"
        )
    }

    #[test]
    fn a_bad_point_or_metric_or_run_fails_with_its_name() {
        let d = temp("bad");
        let plan = Plan::parse(&PLAN.replace("2.5]", "\"x\"]"), None).unwrap();
        let e = run(&Toy, &plan, &opts(&d, 2)).unwrap_err();
        assert!(e.contains("scale must be a number"), "{e}");
        let plan = Plan::parse(&PLAN.replace("\"odd_only\"", "\"y\""), None).unwrap();
        let e = run(&Toy, &plan, &opts(&d, 2)).unwrap_err();
        assert!(e.contains("unknown metric 'y'"), "{e}");
        let plan = Plan::parse(&PLAN.replace("2.5]", "-1.0]"), None).unwrap();
        let e = run(&Toy, &plan, &opts(&d, 2)).unwrap_err();
        assert!(e.contains("a -1.0 / seed 1: negative scale"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }
}
