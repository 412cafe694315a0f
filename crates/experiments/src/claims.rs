//! Claim checks: a plan's [`Expect`]ation against the per-seed values of one
//! configuration, saying *holds* or *does not hold* with the figure observed.

use crate::plan::{Bound, Expect, Point};
use crate::stats::Stat;
use serde::{Deserialize, Serialize};

/// What a checked claim says about the seed's statement.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The measurement meets the seed's figure (or, without a figure, our
    /// bound).
    #[default]
    Holds,
    /// It meets our bound but not the seed's figure; the claim carries both
    /// and the reason ([`ClaimResult::differs`]).
    Differs,
    /// It misses our own bound.
    Fails,
    /// It cannot fail by construction: a property of the design, not a
    /// reproduced claim.
    ByConstruction,
}

impl Outcome {
    /// The word the tables print.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Differs => "DIFFERS",
            Outcome::Fails => "does not hold",
            Outcome::ByConstruction => "by construction",
        }
    }
}

/// One checked expectation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ClaimResult {
    /// The scenario.
    pub scenario: String,
    /// The configuration's transport, if the plan sweeps transports.
    #[serde(default)]
    pub transport: String,
    /// The configuration (scenario and swept values).
    #[serde(default)]
    pub config: String,
    /// The metric checked.
    pub metric: String,
    /// The claim in words.
    pub claim: String,
    /// Where the seed document makes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The seed document's own figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stated: Option<String>,
    /// The bound, in words (`≤ 0 on every seed`, `mean ≥ 2`).
    pub expectation: String,
    /// What we measured.
    pub observed: String,
    /// Whether the bound checked holds (for a DIFFERS claim, our bound; a
    /// false here is a failure of the reproduction).
    pub holds: bool,
    /// What the result says of the seed's statement.
    #[serde(default)]
    pub outcome: Outcome,
    /// Why we differ from the seed (DIFFERS), or why the claim cannot fail
    /// (by construction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl ClaimResult {
    /// A claim an adapter checks in code: holds or does not hold.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scenario: impl Into<String>,
        transport: impl Into<String>,
        config: impl Into<String>,
        metric: impl Into<String>,
        claim: impl Into<String>,
        source: Option<String>,
        stated: Option<String>,
        expectation: impl Into<String>,
        observed: impl Into<String>,
        holds: bool,
    ) -> Self {
        ClaimResult {
            scenario: scenario.into(),
            transport: transport.into(),
            config: config.into(),
            metric: metric.into(),
            claim: claim.into(),
            source,
            stated,
            expectation: expectation.into(),
            observed: observed.into(),
            holds,
            outcome: if holds {
                Outcome::Holds
            } else {
                Outcome::Fails
            },
            why: None,
        }
    }

    /// Mark a claim that cannot fail by construction, saying why.
    pub fn by_construction(mut self, why: impl Into<String>) -> Self {
        if self.holds {
            self.outcome = Outcome::ByConstruction;
        }
        self.why = Some(why.into());
        self
    }

    /// Mark a claim whose bound is looser than the seed's figure: when our
    /// bound holds but `meets_seed` does not, it DIFFERS, saying why.
    pub fn differs_unless(mut self, meets_seed: bool, why: impl Into<String>) -> Self {
        if self.holds && !meets_seed {
            self.outcome = Outcome::Differs;
        }
        self.why = Some(why.into());
        self
    }
}

/// How many claims came out each way.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Meet the seed's figure.
    pub hold: usize,
    /// Meet our bound, not the seed's figure.
    pub differ: usize,
    /// Miss our own bound.
    pub fail: usize,
    /// Cannot fail (not counted among the reproduced claims).
    pub by_construction: usize,
}

impl Counts {
    /// Count `claims`.
    pub fn of(claims: &[ClaimResult]) -> Counts {
        let mut c = Counts::default();
        for x in claims {
            match x.outcome {
                Outcome::Holds => c.hold += 1,
                Outcome::Differs => c.differ += 1,
                Outcome::Fails => c.fail += 1,
                Outcome::ByConstruction => c.by_construction += 1,
            }
        }
        c
    }

    /// Reproduced claims checked (every one but those by construction).
    pub fn checked(&self) -> usize {
        self.hold + self.differ + self.fail
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} hold, {} differ, {} do not hold; {} by construction",
            self.hold,
            self.checked(),
            self.differ,
            self.fail,
            self.by_construction
        )
    }
}

/// Does `b` hold on `values` (pairs of seed and value), with at least
/// `need` seeds defining the metric?
fn holds(b: Bound, values: &[(u64, f64)], need: usize) -> bool {
    const EPS: f64 = 1e-9;
    if values.is_empty() || values.len() < need {
        return false;
    }
    let mean = values.iter().map(|v| v.1).sum::<f64>() / values.len() as f64;
    match b {
        Bound::EverySeedAtMost(max) => values.iter().all(|v| v.1 <= max + EPS),
        Bound::EverySeedAtLeast(min) => values.iter().all(|v| v.1 >= min - EPS),
        Bound::MeanAtMost(max) => mean <= max + EPS,
        Bound::MeanAtLeast(min) => mean >= min - EPS,
    }
}

/// A bound in words.
fn words(b: Bound) -> String {
    match b {
        Bound::EverySeedAtMost(x) => format!("≤ {x} on every seed"),
        Bound::EverySeedAtLeast(x) => format!("≥ {x} on every seed"),
        Bound::MeanAtMost(x) => format!("mean ≤ {x}"),
        Bound::MeanAtLeast(x) => format!("mean ≥ {x}"),
    }
}

/// Check `e` on `point`'s `(seed, value)` pairs out of `seeds` seeds run.
/// Seeds where the metric is undefined are left out and the observation
/// says how many were; the claim needs the metric on `e`'s share of seeds
/// (every seed unless the plan says otherwise). `ratio_label` names the
/// configuration the values are ratios to, if they are.
pub fn check(
    e: &Expect,
    point: &Point,
    values: &[(u64, f64)],
    seeds: usize,
    ratio_label: Option<&str>,
) -> ClaimResult {
    let stat = Stat::of(&values.iter().map(|v| v.1).collect::<Vec<_>>());
    let need = (e.seed_share() * seeds as f64 - 1e-9).ceil().max(1.0) as usize;
    let extreme = |worst_high: bool| {
        let worst = values.iter().copied().max_by(|a, b| {
            if worst_high {
                a.1.total_cmp(&b.1)
            } else {
                b.1.total_cmp(&a.1)
            }
        });
        match worst {
            Some((seed, v)) => format!(
                "{} {v:.2} (seed {seed}); mean {}",
                if worst_high { "max" } else { "min" },
                stat.pm()
            ),
            None => "no seed defines it".into(),
        }
    };
    let of_seeds = if stat.n < seeds {
        format!("{} of {seeds}", stat.n)
    } else {
        stat.n.to_string()
    };
    let (expectation, held, observed) = match e.bound() {
        Ok(b) => {
            let observed = match b {
                Bound::EverySeedAtMost(_) => extreme(true),
                Bound::EverySeedAtLeast(_) => extreme(false),
                Bound::MeanAtMost(_) | Bound::MeanAtLeast(_) => {
                    format!("mean {} over {of_seeds} seeds", stat.pm())
                }
            };
            (words(b), holds(b, values, need), observed)
        }
        Err(why) => (why, false, "not checked".into()),
    };
    let every_seed = matches!(
        e.bound(),
        Ok(Bound::EverySeedAtMost(_) | Bound::EverySeedAtLeast(_))
    );
    let mut observed = if every_seed && !values.is_empty() && values.len() < seeds {
        format!("{observed}; defined on {} of {seeds} seeds", values.len())
    } else {
        observed
    };
    if !values.is_empty() && values.len() < need {
        observed.push_str(&format!(" (needs {need})"));
    }
    let metric = match ratio_label {
        Some(to) => format!("{} / {} of {to}", e.metric, e.metric),
        None => e.metric.clone(),
    };
    let mut expectation = expectation;
    let (outcome, why) = if let Some(why) = &e.by_construction {
        (
            if held {
                Outcome::ByConstruction
            } else {
                Outcome::Fails
            },
            Some(why.clone()),
        )
    } else if !held {
        (Outcome::Fails, e.differs.clone())
    } else if let Some(seed) = e.source_bound().filter(|_| e.looser_than_source()) {
        expectation = format!("{expectation} (the seed's figure: {})", words(seed));
        if holds(seed, values, need) {
            (Outcome::Holds, None)
        } else {
            (Outcome::Differs, e.differs.clone())
        }
    } else {
        (Outcome::Holds, None)
    };
    ClaimResult {
        scenario: point.scenario.clone(),
        transport: point.str("transport").unwrap_or_default().to_string(),
        config: point.label(),
        metric,
        claim: e.claim.clone(),
        source: e.source.clone(),
        stated: e.stated.clone(),
        expectation,
        observed,
        holds: held,
        outcome,
        why,
    }
}

/// The "claims, checked" section of a reproduction's summary: a heading
/// and one table row per claim (configuration, claim, bound, figure,
/// holds or differs); empty without claims.
pub fn markdown_section(claims: &[ClaimResult]) -> String {
    use std::fmt::Write as _;
    let mut m = String::new();
    if claims.is_empty() {
        return m;
    }
    let _ = writeln!(m, "## The seed's claims, checked\n");
    let _ = writeln!(
        m,
        "*holds*: we meet the seed's figure; *DIFFERS*: we meet our own bound but not the \
         seed's figure (both shown, and why); *by construction*: cannot fail, a property of \
         the design, not counted.\n"
    );
    let _ = writeln!(m, "| configuration | claim | expected | observed | |");
    let _ = writeln!(m, "|---|---|---|---|---|");
    for c in claims {
        let _ = writeln!(
            m,
            "| {} | {} | {} {} | {} | {} |",
            c.config,
            c.claim,
            c.metric,
            c.expectation,
            c.observed,
            match (&c.why, c.outcome) {
                (Some(why), Outcome::Differs | Outcome::ByConstruction) =>
                    format!("{}: {why}", c.outcome.word()),
                _ => c.outcome.word().to_string(),
            }
        );
    }
    let _ = writeln!(m, "\n{}\n", Counts::of(claims));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(bound: &str) -> Expect {
        toml::from_str(&format!("metric = \"late\"\nclaim = \"c\"\n{bound}")).unwrap()
    }

    fn point() -> Point {
        let mut params = toml::Table::new();
        params.insert("transport".into(), "tcp".into());
        Point {
            scenario: "far".into(),
            scenario_index: 0,
            sweep: vec![("transport".into(), "tcp".into())],
            params,
        }
    }

    #[test]
    fn bounds_hold_or_not_with_the_figure() {
        let v = [(1, 0.0), (2, 2.0), (3, 1.0)];
        let p = point();
        let r = check(&expect("every_seed_at_most = 1"), &p, &v, 3, None);
        assert!(!r.holds);
        assert_eq!(r.observed, "max 2.00 (seed 2); mean 1.00 ± 1.00");
        assert_eq!(
            (r.transport.as_str(), r.config.as_str()),
            ("tcp", "far tcp")
        );
        assert!(check(&expect("every_seed_at_most = 2"), &p, &v, 3, None).holds);
        let r = check(&expect("every_seed_at_least = 1"), &p, &v, 3, None);
        assert!(!r.holds);
        assert!(
            r.observed.starts_with("min 0.00 (seed 1)"),
            "{}",
            r.observed
        );
        assert!(check(&expect("mean_at_least = 1"), &p, &v, 3, None).holds);
        // A metric one seed of three defines is not "every seed"...
        let r = check(&expect("every_seed_at_most = 1"), &p, &v[..1], 3, None);
        assert!(!r.holds);
        assert_eq!(r.outcome, Outcome::Fails);
        assert!(
            r.observed.ends_with("defined on 1 of 3 seeds (needs 3)"),
            "{}",
            r.observed
        );
        let r = check(&expect("mean_at_least = 0"), &p, &v[..2], 3, None);
        assert!(!r.holds);
        assert_eq!(r.observed, "mean 1.00 ± 1.41 over 2 of 3 seeds (needs 3)");
        // ...unless the plan states the share it accepts.
        let r = check(
            &expect("mean_at_least = 0\nmin_seed_share = 0.6"),
            &p,
            &v[..2],
            3,
            None,
        );
        assert!(r.holds);
        assert!(
            !check(
                &expect("mean_at_least = 0\nmin_seed_share = 0.6"),
                &p,
                &v[..1],
                3,
                None
            )
            .holds
        );
        assert!(!check(&expect("mean_at_least = 1.5"), &p, &v, 3, None).holds);
        assert!(check(&expect("mean_at_most = 1"), &p, &v, 3, None).holds);
        assert!(!check(&expect("mean_at_most = 0.5"), &p, &v, 3, None).holds);
        // Nothing measured never holds.
        for b in ["every_seed_at_most = 1", "mean_at_least = 0"] {
            assert!(!check(&expect(b), &p, &[], 3, None).holds, "{b}");
        }
    }

    #[test]
    fn a_bound_looser_than_the_seed_says_differs_with_both_figures() {
        let p = point();
        let v = [(1, 5.0), (2, 6.0), (3, 7.0)];
        let e = expect("mean_at_least = 2\nseed = 41\ndiffers = \"our trace is smoother\"");
        let r = check(&e, &p, &v, 3, Some("cbr"));
        assert!(r.holds);
        assert_eq!(r.outcome, Outcome::Differs);
        assert_eq!(r.why.as_deref(), Some("our trace is smoother"));
        assert_eq!(r.metric, "late / late of cbr");
        assert!(
            r.expectation.contains("the seed's figure: mean ≥ 41"),
            "{}",
            r.expectation
        );
        // Meeting the seed's figure holds outright.
        let e = expect("mean_at_least = 2\nseed = 5\ndiffers = \"x\"");
        assert_eq!(check(&e, &p, &v, 3, None).outcome, Outcome::Holds);
        // Missing our own bound is a failure, whatever the label.
        let e = expect("mean_at_least = 8\nseed = 41\ndiffers = \"x\"");
        assert_eq!(check(&e, &p, &v, 3, None).outcome, Outcome::Fails);
        // A bound at the seed's figure needs no label.
        let e = expect("mean_at_least = 41\nseed = 41");
        assert!(!e.looser_than_source());
        assert_eq!(check(&e, &p, &v, 3, None).outcome, Outcome::Fails);
        let e = expect("every_seed_at_most = 10\nby_construction = \"never waits\"");
        let r = check(&e, &p, &v, 3, None);
        assert_eq!(r.outcome, Outcome::ByConstruction);
        let c = Counts::of(&[
            r.clone(),
            check(&expect("mean_at_least = 100"), &p, &v, 3, None),
        ]);
        assert_eq!(
            (c.hold, c.fail, c.by_construction, c.checked()),
            (0, 1, 1, 1)
        );
        let md = markdown_section(&[r]);
        assert!(md.contains("by construction: never waits"), "{md}");
    }
}
