//! Claim checks: a plan's [`Expect`]ation against the per-seed values of one
//! configuration, saying *holds* or *does not hold* with the figure observed.

use crate::plan::{Bound, Expect, Point};
use crate::stats::Stat;
use serde::{Deserialize, Serialize};

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
    /// Whether the bound holds.
    pub holds: bool,
}

/// Check `e` on `point`'s `(seed, value)` pairs out of `seeds` seeds run
/// (seeds where the metric is undefined are left out, and the observation
/// says how many were; a claim no seed defines does not hold).
pub fn check(e: &Expect, point: &Point, values: &[(u64, f64)], seeds: usize) -> ClaimResult {
    let stat = Stat::of(&values.iter().map(|v| v.1).collect::<Vec<_>>());
    const EPS: f64 = 1e-9;
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
    let mean_text = || format!("mean {} over {of_seeds} seeds", stat.pm());
    let (expectation, holds, observed) = match e.bound() {
        Ok(Bound::EverySeedAtMost(max)) => (
            format!("≤ {max} on every seed"),
            !values.is_empty() && values.iter().all(|v| v.1 <= max + EPS),
            extreme(true),
        ),
        Ok(Bound::EverySeedAtLeast(min)) => (
            format!("≥ {min} on every seed"),
            !values.is_empty() && values.iter().all(|v| v.1 >= min - EPS),
            extreme(false),
        ),
        Ok(Bound::MeanAtMost(max)) => (
            format!("mean ≤ {max}"),
            stat.n > 0 && stat.mean <= max + EPS,
            mean_text(),
        ),
        Ok(Bound::MeanAtLeast(min)) => (
            format!("mean ≥ {min}"),
            stat.n > 0 && stat.mean >= min - EPS,
            mean_text(),
        ),
        Err(why) => (why, false, "not checked".into()),
    };
    let every_seed = matches!(
        e.bound(),
        Ok(Bound::EverySeedAtMost(_) | Bound::EverySeedAtLeast(_))
    );
    let observed = if every_seed && !values.is_empty() && values.len() < seeds {
        format!("{observed}; defined on {} of {seeds} seeds", values.len())
    } else {
        observed
    };
    ClaimResult {
        scenario: point.scenario.clone(),
        transport: point.str("transport").unwrap_or_default().to_string(),
        config: point.label(),
        metric: e.metric.clone(),
        claim: e.claim.clone(),
        source: e.source.clone(),
        stated: e.stated.clone(),
        expectation,
        observed,
        holds,
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
            if c.holds { "holds" } else { "DIFFERS" }
        );
    }
    let _ = writeln!(m);
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
        let r = check(&expect("every_seed_at_most = 1"), &p, &v, 3);
        assert!(!r.holds);
        assert_eq!(r.observed, "max 2.00 (seed 2); mean 1.00 ± 1.00");
        assert_eq!(
            (r.transport.as_str(), r.config.as_str()),
            ("tcp", "far tcp")
        );
        assert!(check(&expect("every_seed_at_most = 2"), &p, &v, 3).holds);
        let r = check(&expect("every_seed_at_least = 1"), &p, &v, 3);
        assert!(!r.holds);
        assert!(
            r.observed.starts_with("min 0.00 (seed 1)"),
            "{}",
            r.observed
        );
        assert!(check(&expect("mean_at_least = 1"), &p, &v, 3).holds);
        let r = check(&expect("every_seed_at_most = 1"), &p, &v[..1], 3);
        assert!(r.holds);
        assert!(
            r.observed.ends_with("defined on 1 of 3 seeds"),
            "{}",
            r.observed
        );
        let r = check(&expect("mean_at_least = 0"), &p, &v[..2], 3);
        assert_eq!(r.observed, "mean 1.00 ± 1.41 over 2 of 3 seeds");
        assert!(!check(&expect("mean_at_least = 1.5"), &p, &v, 3).holds);
        assert!(check(&expect("mean_at_most = 1"), &p, &v, 3).holds);
        assert!(!check(&expect("mean_at_most = 0.5"), &p, &v, 3).holds);
        // Nothing measured never holds.
        for b in ["every_seed_at_most = 1", "mean_at_least = 0"] {
            let r = check(&expect(b), &p, &[], 3);
            assert!(!r.holds, "{b}");
        }
    }
}
