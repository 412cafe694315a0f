//! Experiment plans: what to run, over which seeds, and which claims of the
//! seed documents to check — as data (TOML files under `scenarios/`).
//!
//! ```toml
//! name = "ch5"                       # names the output directory
//! title = "Thesis chapter 5: VoIP"   # heading in the report (default: name)
//! description = "…"
//! adapter = "voip"                   # the application that runs a configuration
//! source = "thesis §5.1–5.2"         # where the setup and the claims come from
//! seeds = 10                         # seeds first_seed .. first_seed + seeds − 1
//! first_seed = 1
//!
//! messages = 3000                    # any other key is a parameter of the adapter,
//! rate = "8mbit"                     # shared by every scenario
//!
//! transports = ["tcp", "hollywood"]  # shorthand for sweep.transport
//! [sweep]                            # the cartesian product of these lists
//! loss = ["0%", "1%"]                # is run in every scenario
//!
//! [[scenario]]
//! name = "far"                       # letters, digits, - and _ (it names files)
//! rtt = "70ms"                       # parameters override the plan's
//! sweep.playout = ["30ms", "60ms"]   # a scenario may add or replace sweep axes
//!
//! [[scenario.expect]]                # one claim, checked over seeds
//! transport = "tcp"                  # which configurations (shorthand for where.transport)
//! where = { loss = "1%" }            # more selectors: swept values to match
//! metric = "late"                    # a metric the adapter reports
//! every_seed_at_most = 0             # exactly one of every_seed_at_most,
//!                                    # every_seed_at_least, mean_at_most, mean_at_least
//! claim = "no message is late"
//! source = "Fig. 5.4"                # where the seed says so
//! stated = "0 late"                  # the seed's own figure, shown beside ours
//! seed = 0                           # …as a number: the claim holds when we meet it
//! # differs = "why"                  # required when our bound is looser than `seed`
//! # by_construction = "why"          # cannot fail by design: shown, not counted
//! # ratio_to = { loss = "0%" }       # check metric(this) / metric(that) per seed
//! # min_seed_share = 0.8             # seeds that must define the metric (default 1)
//! ```
//!
//! A claim's outcome ([`crate::claims::Outcome`]): *holds* when the
//! measurement meets the seed's figure (or our bound, without one);
//! *DIFFERS* when it meets our bound but not the seed's figure, with both
//! figures and the `differs` reason; *does not hold* when it misses our
//! bound; *by construction* for claims that cannot fail.
//!
//! A plan is parsed and checked here without knowing the adapter; the
//! adapter then turns every [`Point`] (scenario × one value per sweep axis)
//! into its typed parameters and rejects what it does not understand.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// Why an experiment plan could not be used.
#[derive(Debug)]
pub enum PlanError {
    /// The file could not be read.
    Read(PathBuf, std::io::Error),
    /// The file is not valid TOML for a plan.
    Parse(String),
    /// A value is out of range or refers to something unknown.
    Invalid(String),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Read(p, e) => write!(f, "cannot read plan {}: {e}", p.display()),
            PlanError::Parse(m) | PlanError::Invalid(m) => write!(f, "bad experiment plan: {m}"),
        }
    }
}

impl std::error::Error for PlanError {}

/// The most seeds a plan may ask for.
pub const MAX_SEEDS: u64 = 1000;

/// The most configurations (points) a plan may expand to.
pub const MAX_POINTS: usize = 10_000;

#[derive(Deserialize, Debug, Clone)]
struct RawPlan {
    name: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    adapter: Option<String>,
    #[serde(default)]
    source: Option<String>,
    seeds: u64,
    #[serde(default = "one")]
    first_seed: u64,
    #[serde(default)]
    transports: Option<Vec<toml::Value>>,
    #[serde(default)]
    sweep: toml::Table,
    scenario: Vec<RawScenario>,
    #[serde(flatten)]
    params: toml::Table,
}

fn one() -> u64 {
    1
}

#[derive(Deserialize, Debug, Clone)]
struct RawScenario {
    name: String,
    #[serde(default)]
    transports: Option<Vec<toml::Value>>,
    #[serde(default)]
    sweep: toml::Table,
    #[serde(default)]
    expect: Vec<Expect>,
    #[serde(flatten)]
    params: toml::Table,
}

/// One of a seed document's claims, as a check over seeds.
#[derive(Deserialize, Serialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Shorthand for `where.transport`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Swept values a configuration must have for the claim to apply to it.
    #[serde(
        default,
        rename = "where",
        skip_serializing_if = "toml::Table::is_empty"
    )]
    pub selector: toml::Table,
    /// The adapter's metric.
    pub metric: String,
    /// Every seed's value must be ≤ this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_seed_at_most: Option<f64>,
    /// Every seed's value must be ≥ this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_seed_at_least: Option<f64>,
    /// The mean over seeds must be ≤ this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_at_most: Option<f64>,
    /// The mean over seeds must be ≥ this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_at_least: Option<f64>,
    /// The claim in words.
    pub claim: String,
    /// Where the seed document makes it (section, figure, table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The seed document's own figure, shown beside ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stated: Option<String>,
    /// The source document's figure (plan key `seed`, for "seed
    /// document"; not a random seed) as a number in the metric's unit, a
    /// bound in the same direction as ours: the claim *holds* when the
    /// measurement meets it. A bound looser than this needs
    /// [`Expect::differs`].
    #[serde(rename = "seed", default, skip_serializing_if = "Option::is_none")]
    pub source_figure: Option<f64>,
    /// Why our bound is looser than the seed's figure (scale, a trace we do
    /// not have, a different mechanism): when the measurement misses the
    /// seed's figure but meets our bound, the claim says DIFFERS with both
    /// figures and this reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differs: Option<String>,
    /// Why the claim cannot fail by construction (a player that never
    /// waits cannot stall): still checked, shown as a property of the
    /// design, not counted among the reproduced claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_construction: Option<String>,
    /// Check the ratio of this configuration's metric to the one of the
    /// configuration with these swept values instead (seed by seed), e.g.
    /// `ratio_to = { video = "cbr" }`: a ratio stated by the seed is
    /// checked as a ratio, not as two absolute bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to: Option<toml::Table>,
    /// The share of seeds on which the metric must be defined (a stall
    /// length needs a stall) for the claim to hold; 1 unless stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_seed_share: Option<f64>,
}

/// The bound of an [`Expect`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Every seed ≤ x.
    EverySeedAtMost(f64),
    /// Every seed ≥ x.
    EverySeedAtLeast(f64),
    /// Mean ≤ x.
    MeanAtMost(f64),
    /// Mean ≥ x.
    MeanAtLeast(f64),
}

impl Expect {
    /// The one bound the expectation sets.
    pub fn bound(&self) -> Result<Bound, String> {
        let all = [
            self.every_seed_at_most.map(Bound::EverySeedAtMost),
            self.every_seed_at_least.map(Bound::EverySeedAtLeast),
            self.mean_at_most.map(Bound::MeanAtMost),
            self.mean_at_least.map(Bound::MeanAtLeast),
        ];
        let set: Vec<Bound> = all.into_iter().flatten().collect();
        match set.as_slice() {
            [b] => Ok(*b),
            _ => Err(format!(
                "expectation '{}' needs exactly one of every_seed_at_most, every_seed_at_least, \
                 mean_at_most, mean_at_least",
                self.claim
            )),
        }
    }

    /// The source document's figure as a [`Bound`] in the direction of ours.
    pub fn source_bound(&self) -> Option<Bound> {
        let x = self.source_figure?;
        Some(match self.bound().ok()? {
            Bound::EverySeedAtMost(_) => Bound::EverySeedAtMost(x),
            Bound::EverySeedAtLeast(_) => Bound::EverySeedAtLeast(x),
            Bound::MeanAtMost(_) => Bound::MeanAtMost(x),
            Bound::MeanAtLeast(_) => Bound::MeanAtLeast(x),
        })
    }

    /// Is our bound looser than the source document's figure (by more than
    /// rounding)?
    pub fn looser_than_source(&self) -> bool {
        let (Ok(ours), Some(seed)) = (self.bound(), self.source_figure) else {
            return false;
        };
        let tol = 1e-9 * seed.abs().max(1.0);
        match ours {
            Bound::EverySeedAtMost(x) | Bound::MeanAtMost(x) => x > seed + tol,
            Bound::EverySeedAtLeast(x) | Bound::MeanAtLeast(x) => x < seed - tol,
        }
    }

    /// The share of seeds that must define the metric.
    pub fn seed_share(&self) -> f64 {
        self.min_seed_share.unwrap_or(1.0)
    }

    /// The configuration `point`'s ratio is taken against, if any: `point`
    /// with the swept values of [`Expect::ratio_to`] replaced.
    pub fn ratio_params(&self, point: &Point) -> Option<toml::Table> {
        let to = self.ratio_to.as_ref()?;
        let mut p = point.params.clone();
        for (k, v) in to {
            p.insert(k.clone(), v.clone());
        }
        Some(p)
    }

    /// Does the claim apply to `point`?
    pub fn applies_to(&self, point: &Point) -> bool {
        let transport_ok = self.transport.as_ref().is_none_or(|t| {
            point
                .params
                .get("transport")
                .and_then(toml::Value::as_str)
                .is_some_and(|v| v == t)
        });
        transport_ok
            && self
                .selector
                .iter()
                .all(|(k, v)| point.params.get(k).is_some_and(|p| same(p, v)))
    }
}

/// One configuration: a scenario with one value of every sweep axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The scenario's name.
    pub scenario: String,
    /// Index of the scenario in the plan.
    pub scenario_index: usize,
    /// The swept values, outermost axis first.
    pub sweep: Vec<(String, toml::Value)>,
    /// Every parameter: the plan's, overridden by the scenario's, overridden
    /// by the swept values.
    pub params: toml::Table,
}

/// Two TOML values are the same, numbers compared by value (`1` = `1.0`).
pub fn same(a: &toml::Value, b: &toml::Value) -> bool {
    let num = |v: &toml::Value| match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// A TOML scalar as plain text (strings without quotes).
pub fn scalar_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Point {
    /// `scenario` followed by the swept values, e.g. `far tcp 1%`.
    pub fn label(&self) -> String {
        let mut s = self.scenario.clone();
        for (_, v) in &self.sweep {
            s.push(' ');
            s.push_str(&scalar_text(v));
        }
        s
    }

    /// A file-name stem: `scenario-value-value` with unsafe characters
    /// replaced by `_`.
    pub fn stem(&self) -> String {
        let mut s = self.scenario.clone();
        for (_, v) in &self.sweep {
            s.push('-');
            s.extend(scalar_text(v).chars().map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            }));
        }
        s
    }

    /// A string parameter.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.params.get(key).and_then(toml::Value::as_str)
    }

    /// The parameters as a typed struct (use `#[serde(deny_unknown_fields)]`
    /// on it to reject keys the adapter does not know).
    pub fn typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, String> {
        self.typed_from(self.params.clone())
    }

    /// One table, two structs: the adapter's own keys (`own`: what it
    /// sweeps, plots and reports) into `A`, every other key into `B` — a
    /// parameter struct shared with a `hollywood sim` command. Both may
    /// refuse unknown keys (serde's `flatten` cannot be combined with
    /// `deny_unknown_fields`).
    pub fn split_typed<A, B>(&self, own: &[&str]) -> Result<(A, B), String>
    where
        A: serde::de::DeserializeOwned,
        B: serde::de::DeserializeOwned,
    {
        let (mine, rest): (toml::Table, toml::Table) = self
            .params
            .clone()
            .into_iter()
            .partition(|(k, _)| own.contains(&k.as_str()));
        Ok((self.typed_from(mine)?, self.typed_from(rest)?))
    }

    fn typed_from<T: serde::de::DeserializeOwned>(&self, t: toml::Table) -> Result<T, String> {
        toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| format!("scenario {}: {}", self.scenario, e.message()))
    }
}

/// A scenario of a plan, expanded.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// The claims to check.
    pub expect: Vec<Expect>,
    /// Its configurations, in sweep order (first axis outermost).
    pub points: Vec<Point>,
}

/// A parsed and checked plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Names the output directory and the results.
    pub name: String,
    /// Heading in reports.
    pub title: String,
    /// What the plan reproduces.
    pub description: String,
    /// The application adapter that runs it, if the plan names one.
    pub adapter: Option<String>,
    /// The seed document and sections it reproduces.
    pub source: Option<String>,
    /// The seeds every configuration runs with.
    pub seeds: Vec<u64>,
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
    /// The plan as written (with the seed count actually used), for the
    /// `params` of JSON results.
    pub raw: toml::Table,
}

fn file_safe(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn axes(
    transports: &Option<Vec<toml::Value>>,
    sweep: &toml::Table,
    into: &mut Vec<(String, Vec<toml::Value>)>,
) -> Result<(), PlanError> {
    let inv = PlanError::Invalid;
    let mut here: Vec<String> = Vec::new();
    let mut set = |key: &str, values: Vec<toml::Value>| -> Result<(), PlanError> {
        if here.iter().any(|k| k == key) {
            return Err(inv(format!(
                "sweep axis '{key}' is given twice (transports is shorthand for sweep.transport)"
            )));
        }
        here.push(key.to_string());
        if values.is_empty() {
            return Err(inv(format!("sweep axis '{key}' has no values")));
        }
        for (i, v) in values.iter().enumerate() {
            if values[..i].iter().any(|w| same(v, w)) {
                return Err(inv(format!(
                    "sweep axis '{key}' lists {} twice",
                    scalar_text(v)
                )));
            }
        }
        if values
            .iter()
            .any(|v| matches!(v, toml::Value::Array(_) | toml::Value::Table(_)))
        {
            return Err(inv(format!(
                "sweep axis '{key}' must list plain values (strings, numbers, booleans)"
            )));
        }
        match into.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = values,
            None => into.push((key.to_string(), values)),
        }
        Ok(())
    };
    if let Some(t) = transports {
        set("transport", t.clone())?;
    }
    for (k, v) in sweep {
        match v {
            toml::Value::Array(a) => set(k, a.clone())?,
            _ => return Err(inv(format!("sweep.{k} must be a list"))),
        }
    }
    Ok(())
}

impl Plan {
    /// Parse a plan; `seeds` overrides the plan's seed count.
    pub fn parse(text: &str, seeds: Option<u64>) -> Result<Plan, PlanError> {
        let mut raw_table: toml::Table =
            toml::from_str(text).map_err(|e| PlanError::Parse(e.to_string()))?;
        let file: RawPlan = toml::Value::Table(raw_table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| PlanError::Parse(e.to_string()))?;
        let inv = PlanError::Invalid;
        if !file_safe(&file.name) {
            return Err(inv(format!(
                "plan name '{}' must be letters, digits, '-' or '_' (it names a directory)",
                file.name
            )));
        }
        let n = seeds.unwrap_or(file.seeds);
        if n == 0 || n > MAX_SEEDS {
            return Err(inv(format!("seeds must be 1..={MAX_SEEDS}, not {n}")));
        }
        let Some(last) = file.first_seed.checked_add(n - 1) else {
            return Err(inv("first_seed + seeds overflows".into()));
        };
        if file.scenario.is_empty() {
            return Err(inv("at least one [[scenario]] is needed".into()));
        }
        let mut plan_axes = Vec::new();
        axes(&file.transports, &file.sweep, &mut plan_axes)?;
        let mut names = BTreeSet::new();
        let mut scenarios = Vec::new();
        let mut total = 0usize;
        for (si, s) in file.scenario.iter().enumerate() {
            if !file_safe(&s.name) {
                return Err(inv(format!(
                    "scenario name '{}' must be letters, digits, '-' or '_' (it names files)",
                    s.name
                )));
            }
            if !names.insert(s.name.clone()) {
                return Err(inv(format!("two scenarios are called '{}'", s.name)));
            }
            let mut ax = plan_axes.clone();
            axes(&s.transports, &s.sweep, &mut ax)?;
            for (key, _) in &ax {
                if s.params.contains_key(key) || file.params.contains_key(key) {
                    return Err(inv(format!(
                        "'{key}' is both a parameter and a sweep axis in scenario {}: give it in one \
                         place (a scenario replaces an axis with its own sweep.{key} = [...])",
                        s.name
                    )));
                }
            }
            let mut base = file.params.clone();
            for (k, v) in &s.params {
                base.insert(k.clone(), v.clone());
            }
            // The cartesian product, first axis outermost.
            let mut points = vec![Point {
                scenario: s.name.clone(),
                scenario_index: si,
                sweep: Vec::new(),
                params: base,
            }];
            for (key, values) in &ax {
                let mut next = Vec::with_capacity(points.len() * values.len());
                for p in &points {
                    for v in values {
                        let mut q = p.clone();
                        q.sweep.push((key.clone(), v.clone()));
                        q.params.insert(key.clone(), v.clone());
                        next.push(q);
                    }
                }
                points = next;
                if points.len() > MAX_POINTS {
                    return Err(inv(format!(
                        "scenario {} expands to more than {MAX_POINTS} configurations",
                        s.name
                    )));
                }
            }
            total += points.len();
            if total > MAX_POINTS {
                return Err(inv(format!(
                    "the plan expands to more than {MAX_POINTS} configurations"
                )));
            }
            for e in &s.expect {
                e.bound().map_err(inv)?;
                if !points.iter().any(|p| e.applies_to(p)) {
                    return Err(inv(format!(
                        "expectation '{}' in scenario {} selects no configuration \
                         (transport {:?}, where {:?})",
                        e.claim,
                        s.name,
                        e.transport,
                        e.selector.to_string()
                    )));
                }
                if e.looser_than_source() && e.differs.is_none() && e.by_construction.is_none() {
                    return Err(inv(format!(
                        "expectation '{}' in scenario {}: its bound is looser than the seed's \
                         figure {} but says nothing of why (set `differs`)",
                        e.claim,
                        s.name,
                        e.source_figure.unwrap_or_default()
                    )));
                }
                if let Some(share) = e.min_seed_share {
                    if !(share > 0.0 && share <= 1.0) {
                        return Err(inv(format!(
                            "expectation '{}': min_seed_share must be in (0, 1], not {share}",
                            e.claim
                        )));
                    }
                }
                for p in points.iter().filter(|p| e.applies_to(p)) {
                    if let Some(to) = e.ratio_params(p) {
                        if !points.iter().any(|q| q.params == to) {
                            return Err(inv(format!(
                                "expectation '{}' in scenario {}: ratio_to {} names no \
                                 configuration beside {}",
                                e.claim,
                                s.name,
                                e.ratio_to
                                    .as_ref()
                                    .map(|t| t.to_string())
                                    .unwrap_or_default(),
                                p.label()
                            )));
                        }
                    }
                }
            }
            scenarios.push(Scenario {
                name: s.name.clone(),
                expect: s.expect.clone(),
                points,
            });
        }
        raw_table.insert("seeds".into(), toml::Value::Integer(n as i64));
        Ok(Plan {
            title: file.title.clone().unwrap_or_else(|| file.name.clone()),
            name: file.name,
            description: file.description,
            adapter: file.adapter,
            source: file.source,
            seeds: (file.first_seed..=last).collect(),
            scenarios,
            raw: raw_table,
        })
    }

    /// Read and parse a plan file.
    pub fn load(path: &Path, seeds: Option<u64>) -> Result<Plan, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|e| PlanError::Read(path.into(), e))?;
        Plan::parse(&text, seeds)
    }

    /// Set `key = value` (a string) on every point, as if the plan wrote
    /// it at its top (`repro dash2018 --video DIR`). The plan's own `raw`
    /// table, which `summary.json` records, gets it too.
    pub fn set_str(&mut self, key: &str, value: &str) {
        for s in &mut self.scenarios {
            for p in &mut s.points {
                p.params
                    .insert(key.into(), toml::Value::String(value.into()));
            }
        }
        self.raw
            .insert(key.into(), toml::Value::String(value.into()));
    }

    /// Replace `key` with `value` (a string) on every point that has it,
    /// and in the plan's `raw` table where it is written there: `repro
    /// --duration` for a short smoke run. Points without the key keep
    /// their adapter's default. Returns how many points changed.
    pub fn replace_str(&mut self, key: &str, value: &str) -> usize {
        let mut n = 0;
        for s in &mut self.scenarios {
            for p in &mut s.points {
                if let Some(v) = p.params.get_mut(key) {
                    *v = toml::Value::String(value.into());
                    n += 1;
                }
            }
        }
        if let Some(v) = self.raw.get_mut(key) {
            *v = toml::Value::String(value.into());
        }
        if let Some(toml::Value::Array(scenarios)) = self.raw.get_mut("scenario") {
            for s in scenarios {
                if let Some(v) = s.as_table_mut().and_then(|t| t.get_mut(key)) {
                    *v = toml::Value::String(value.into());
                }
            }
        }
        n
    }

    /// Every point of every scenario, in plan order.
    pub fn points(&self) -> impl Iterator<Item = &Point> {
        self.scenarios.iter().flat_map(|s| s.points.iter())
    }

    /// The plan as JSON (the `params` of its results).
    pub fn params_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.raw).unwrap_or(serde_json::Value::Null)
    }

    /// The sweep axes used anywhere in the plan, in first-use order.
    pub fn sweep_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for p in self.points() {
            for (k, _) in &p.sweep {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        keys
    }
}

/// Scenario parameters keyed by name, as adapters often want them.
pub type Params = BTreeMap<String, toml::Value>;

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"
name = "mini"
seeds = 3
rate = "8mbit"
transports = ["tcp", "udp"]

[[scenario]]
name = "near"
rtt = "10ms"

[[scenario]]
name = "far"
rtt = "100ms"
rate = "2mbit"
sweep.loss = ["0%", "1%"]

[[scenario.expect]]
transport = "tcp"
where = { loss = "1%" }
metric = "late"
mean_at_most = 3
claim = "few late"
"#;

    #[test]
    fn replace_str_changes_only_points_that_have_the_key() {
        let mut p = Plan::parse(MINI, None).unwrap();
        // `rate` is at the top and in "far"; `rtt` only in the scenarios.
        assert_eq!(p.replace_str("rate", "1mbit"), 6);
        assert_eq!(p.replace_str("rtt", "5ms"), 6);
        assert_eq!(p.replace_str("duration", "10s"), 0);
        for q in p.points() {
            assert_eq!(q.str("rate"), Some("1mbit"));
            assert_eq!(q.str("rtt"), Some("5ms"));
            assert_eq!(q.str("duration"), None);
        }
        assert_eq!(p.raw["rate"].as_str(), Some("1mbit"));
        assert!(!p.raw.contains_key("duration"));
        assert_eq!(p.raw["scenario"][1]["rate"].as_str(), Some("1mbit"));
        assert_eq!(p.raw["scenario"][0]["rtt"].as_str(), Some("5ms"));
    }

    #[test]
    fn sweeps_expand_in_order_and_override() {
        let p = Plan::parse(MINI, None).unwrap();
        assert_eq!(p.seeds, vec![1, 2, 3]);
        assert_eq!(p.title, "mini");
        let labels: Vec<String> = p.points().map(Point::label).collect();
        assert_eq!(
            labels,
            [
                "near tcp",
                "near udp",
                "far tcp 0%",
                "far tcp 1%",
                "far udp 0%",
                "far udp 1%"
            ]
        );
        let far = &p.scenarios[1].points[1];
        assert_eq!(far.str("rate"), Some("2mbit"));
        assert_eq!(far.str("rtt"), Some("100ms"));
        assert_eq!(far.str("transport"), Some("tcp"));
        assert_eq!(far.stem(), "far-tcp-1_");
        let e = &p.scenarios[1].expect[0];
        let hits: Vec<String> = p.scenarios[1]
            .points
            .iter()
            .filter(|q| e.applies_to(q))
            .map(Point::label)
            .collect();
        assert_eq!(hits, ["far tcp 1%"]);
        assert_eq!(e.bound(), Ok(Bound::MeanAtMost(3.0)));
        // Numbers select by value.
        assert!(same(&toml::Value::Integer(1), &toml::Value::Float(1.0)));
        assert!(!same(
            &toml::Value::Integer(1),
            &toml::Value::String("1".into())
        ));
        assert_eq!(Plan::parse(MINI, Some(1)).unwrap().seeds, vec![1]);
        assert_eq!(
            Plan::parse(MINI, Some(1)).unwrap().raw["seeds"].as_integer(),
            Some(1)
        );
    }

    #[test]
    fn axes_nest_in_the_order_written() {
        let text = "name = \"o\"\nseeds = 1\n[sweep]\nrate = [\"2mbit\", \"1mbit\"]\nloss = [\"0%\", \"1%\"]\n[[scenario]]\nname = \"s\"\n";
        let p = Plan::parse(text, None).unwrap();
        let labels: Vec<String> = p.points().map(Point::label).collect();
        assert_eq!(
            labels,
            ["s 2mbit 0%", "s 2mbit 1%", "s 1mbit 0%", "s 1mbit 1%"]
        );
        assert_eq!(p.sweep_keys(), ["rate", "loss"]);
    }

    #[test]
    fn bad_plans_are_rejected_with_a_reason() {
        let cases = [
            (MINI.replace("seeds = 3", "seeds = 0"), "seeds must be"),
            (
                MINI.replace("name = \"mini\"", "name = \"a b\""),
                "plan name",
            ),
            (
                MINI.replace("name = \"far\"", "name = \"near\""),
                "two scenarios",
            ),
            (MINI.replace("mean_at_most = 3", ""), "exactly one"),
            (
                MINI.replace("mean_at_most = 3", "mean_at_most = 3\nmean_at_least = 1"),
                "exactly one",
            ),
            (
                MINI.replace("loss = \"1%\" }", "loss = \"2%\" }"),
                "selects no",
            ),
            (MINI.replace("[\"0%\", \"1%\"]", "[]"), "no values"),
            (
                MINI.replace("sweep.loss = [\"0%\", \"1%\"]", "sweep.loss = \"1%\""),
                "must be a list",
            ),
            (
                MINI.replace("claim = \"few late\"", "claim = \"x\"\nbogus = 1"),
                "unknown field",
            ),
            (
                MINI.replace("[\"tcp\", \"udp\"]", "[\"tcp\", \"tcp\"]"),
                "lists tcp twice",
            ),
            (
                MINI.replace("rtt = \"10ms\"", "rtt = \"10ms\"\ntransport = \"tcp\""),
                "both a parameter and a sweep axis",
            ),
            (
                MINI.replace(
                    "rate = \"8mbit\"",
                    "rate = \"8mbit\"\nsweep.transport = [\"a\"]",
                ),
                "given twice",
            ),
        ];
        for (text, needle) in cases {
            let e = Plan::parse(&text, None).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        assert!(matches!(
            Plan::parse("seeds = ", None),
            Err(PlanError::Parse(_))
        ));
        assert!(matches!(
            Plan::load(Path::new("/nonexistent/plan.toml"), None),
            Err(PlanError::Read(..))
        ));
        let ten = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
        let huge = MINI.replace(
            "seeds = 3",
            &format!("seeds = 1\nsweep = {{ a = {ten}, b = {ten}, c = {ten}, d = {ten} }}"),
        );
        let e = Plan::parse(&huge, None).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
    }
}
