//! Every claim a built-in plan checks against a seed document, set against
//! the seed's own figure as read from the seed (this table, kept apart from
//! the plans): a bound looser than the seed's figure must say DIFFERS and
//! why (`differs`), and the plan's `seed` must be the figure below. A
//! claim that cannot fail must say so (`by_construction`), and our own
//! claims must say they are ours.

use hollywood_experiments::builtin::PLANS;
use hollywood_experiments::plan::{Bound, Expect, Plan};

/// The seed's figure for a claim, in the metric's unit.
#[derive(Clone, Copy, Debug)]
enum Stated {
    /// The seed says at least this.
    AtLeast(f64),
    /// The seed says at most this.
    AtMost(f64),
    /// The seed states the claim with no figure at our point.
    NoFigure,
}
use Stated::*;

/// `plan/scenario/selector/metric/ratio_to` → the seed's figure, each read
/// from the seed document cited in the plan's `source`.
const STATED: &[(&str, Stated)] = &[
    // Thesis ch. 5 (both loss-detection variants make the same claims).
    ("intracontinental/transport=tcp/late/", AtMost(0.0)), // Figs. 5.4-5.5: no late message
    ("intracontinental/transport=hollywood-ir/app_lost/", AtMost(0.0)), // Fig. 5.6
    ("intracontinental/transport=hollywood/app_lost/", AtMost(0.0)), // Figs. 5.13-5.14
    ("intracontinental/transport=hollywood/ir_sent/", AtMost(0.0)), // §5.2.2, message 2348
    ("intercontinental/transport=tcp/amplification/", AtLeast(5.0)), // eq. 5.7: N_hol = 5
    ("intercontinental/transport=hollywood-ir/collateral_lost/", AtLeast(4.0)), // 1291-1294 late
    ("intercontinental/transport=hollywood/amplification/", AtMost(1.0)), // 2263 lost, 2264-2267 on time
    ("intercontinental/transport=hollywood/collateral_lost/", AtMost(0.0)), // Fig. 5.16
    // [QUICsilver-2019].
    ("50ms/transport=quicsilver,loss=1%/stack_excess_max_ms/", AtMost(15.0)), // Fig. 4: always within 15 ms
    ("100ms/transport=quicsilver,loss=1%/stack_excess_max_ms/", AtMost(15.0)),
    ("150ms/transport=quicsilver,loss=1%/stack_excess_max_ms/", AtMost(15.0)),
    ("50ms/transport=quic-ss,loss=1%/stack_excess_p99_ms/", AtLeast(100.0)), // Fig. 5: bands at multiples of the RTT
    ("100ms/transport=quic-ss,loss=1%/stack_excess_p99_ms/", AtLeast(200.0)),
    ("150ms/transport=quic-ss,loss=1%/stack_excess_p99_ms/", AtLeast(300.0)),
    ("50ms/transport=quicsilver,loss=0/useful_pct/", AtLeast(100.0)), // Table 3
    ("150ms/transport=quicsilver,loss=0/useful_pct/", AtLeast(100.0)),
    ("150ms/transport=quic-ss,loss=1%/per_stall_ms/", AtLeast(333.0)), // Table 2
    ("150ms/transport=udp,loss=1%/useful_pct/", AtLeast(95.2)), // §5
    ("50ms-buffer1/transport=quic-ss,loss=1%/per_stall_ms/", AtLeast(100.0)), // Table 2
    ("100ms-buffer1/transport=quic-ss,loss=1%/stalls/", AtLeast(198.0)), // Table 1
    ("100ms-buffer1/transport=quic-ss,loss=1%/per_stall_ms/", AtLeast(216.0)), // Table 2
    ("100ms-buffer1/transport=quicsilver,loss=1%/useful_pct/", AtLeast(95.0)), // abstract: over 95 %
    ("100ms-buffer1/transport=quicsilver,loss=0.1%/useful_pct/", AtLeast(99.644)), // Table 3
    // [RTP-QUIC].
    ("buffer168ms/transport=quic-pps/hol_total_s/", AtMost(0.0)), // Fig. 4e
    ("buffer168ms/transport=udp/hol_total_s/", AtMost(0.0)), // Fig. 4f
    ("buffer168ms/transport=udp/useful_pct/", AtLeast(97.0)), // §5.3: 97-99 %
    ("buffer168ms/transport=quic-pps/useful_pct/", AtLeast(90.0)), // §5.3: > 90 %
    ("buffer168ms/transport=quic-fps,one_way=150ms,loss=1%/useful_pct/", AtLeast(70.0)),
    ("buffer168ms/transport=quic-fps,one_way=150ms,loss=5%/useful_pct/", AtLeast(50.0)),
    ("buffer168ms/transport=quic-ss,one_way=150ms,loss=10%/useful_pct/", AtMost(10.0)), // single figures
    ("buffer168ms/transport=tcp,one_way=150ms,loss=10%/useful_pct/", AtMost(10.0)),
    // [DASHing-2018].
    ("loss/loss=1%/stall_saved_s/", AtLeast(25.0)), // Fig 4: ≈ 5 s vs ≈ 30 s
    ("sec55-high-loss//stall_saved_s/", AtLeast(120.0)), // §5.5: 40 % of ≈ 300 s
    ("sec55-2pct//stall_saved_s/", AtLeast(70.0)),       // §5.5: ≈ 300 s vs ≈ 230 s
    ("sec55-low-loss//tcp_stall_s/", AtMost(0.0)),       // §5.5: no stall events
    ("sec55-low-loss//hollywood_stall_s/", AtMost(0.0)),
    // [TCP-video].
    ("bandwidth/transport=tcp,video=vbr,rate=1000kbit/initiation_zero_s/", AtLeast(453.0)), // Graph 6.1
    ("bandwidth/transport=tcp,video=vbr,rate=1000kbit/initiation_zero_s/video=cbr", AtLeast(41.0)), // 453 / 11
    ("bandwidth/transport=tcp,video=vbr,rate=2500kbit/initiation_zero_s/rate=1000kbit", AtMost(0.13)), // 59 / 453
    ("bandwidth/transport=tcp,video=vbr,rate=1000kbit/violations_pct_at_4s/", AtLeast(10.0)), // Graph 6.3
    ("bandwidth/transport=tcp-deadline,video=vbr,rate=1000kbit/violations_pct_at_1s/transport=tcp", NoFigure), // Graph 8.2: none at 1 s
    ("bandwidth/transport=tcp-deadline,video=vbr,rate=1000kbit/initiation_zero_s/transport=tcp", AtMost(0.61)), // Graph 8.1: 277 / 453
    ("clients/transport=tcp,video=cbr,clients=0/initiation_zero_s/", AtMost(8.0)), // Graph 6.2
    ("clients/transport=tcp,video=cbr,clients=4/initiation_zero_s/clients=0", NoFigure), // "almost exponentially"
];

fn table_text(t: &toml::Table) -> String {
    t.iter()
        .map(|(k, v)| match v {
            toml::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn key(scenario: &str, e: &Expect) -> String {
    let mut sel = toml::Table::new();
    if let Some(t) = &e.transport {
        sel.insert("transport".into(), t.clone().into());
    }
    // `where` keeps its own order after the transport.
    let mut text = table_text(&sel);
    let rest = table_text(&e.selector);
    if !rest.is_empty() {
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(&rest);
    }
    format!(
        "{scenario}/{text}/{}/{}",
        e.metric,
        e.ratio_to.as_ref().map(table_text).unwrap_or_default()
    )
}

/// Is `b` looser than the seed's figure `s` (both in one direction)?
fn looser(b: Bound, s: Stated) -> Result<bool, String> {
    match (b, s) {
        (Bound::EverySeedAtMost(x) | Bound::MeanAtMost(x), AtMost(y)) => Ok(x > y + 1e-9),
        (Bound::EverySeedAtLeast(x) | Bound::MeanAtLeast(x), AtLeast(y)) => Ok(x < y - 1e-9),
        (_, NoFigure) => Ok(false),
        (b, s) => Err(format!(
            "bound {b:?} and the seed's {s:?} point opposite ways"
        )),
    }
}

#[test]
fn every_bound_looser_than_the_seed_says_differs() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for b in PLANS {
        let plan = Plan::parse(b.text, None).unwrap_or_else(|e| panic!("{}: {e}", b.name));
        for s in &plan.scenarios {
            for e in &s.expect {
                let k = key(&s.name, e);
                let ours = e.source.as_deref().is_some_and(|s| s.starts_with("ours"));
                if ours != e.claim.starts_with("(ours)") {
                    problems.push(format!(
                        "{}: {k}: a claim of ours says \"(ours)\" and cites \"ours\", one without the other",
                        b.name
                    ));
                }
                if ours {
                    if e.source_figure.is_some() {
                        problems.push(format!("{}: {k}: our own claim has no seed figure", b.name));
                    }
                    continue;
                }
                let Some(&(_, stated)) = STATED.iter().find(|(x, _)| *x == k) else {
                    problems.push(format!(
                        "{}: {k}: a seed's claim missing from the table of stated figures",
                        b.name
                    ));
                    continue;
                };
                checked += 1;
                let bound = e.bound().expect("one bound");
                match (stated, e.source_figure) {
                    (NoFigure, None) => {}
                    (NoFigure, Some(x)) => problems.push(format!(
                        "{}: {k}: the seed states no figure here, the plan says {x}",
                        b.name
                    )),
                    (AtLeast(y) | AtMost(y), seed) if seed != Some(y) => problems.push(format!(
                        "{}: {k}: seed = {seed:?} in the plan, {y} in the seed",
                        b.name
                    )),
                    _ => {}
                }
                match looser(bound, stated) {
                    Err(why) => problems.push(format!("{}: {k}: {why}", b.name)),
                    Ok(true) if e.differs.is_none() && e.by_construction.is_none() => problems
                        .push(format!(
                            "{}: {k}: bound {bound:?} is looser than the seed's {stated:?} \
                             without a DIFFERS label",
                            b.name
                        )),
                    Ok(_) => {}
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 50, "only {checked} claims checked");
}

#[test]
fn the_table_names_only_claims_the_plans_make() {
    let mut keys = Vec::new();
    for b in PLANS {
        let plan = Plan::parse(b.text, None).unwrap();
        for s in &plan.scenarios {
            for e in &s.expect {
                keys.push(key(&s.name, e));
            }
        }
    }
    for (k, _) in STATED {
        assert!(keys.iter().any(|x| x == k), "stale row: {k}");
    }
}

#[test]
fn a_looser_bound_without_a_label_is_refused() {
    let text = PLANS[0].text.replacen(
        "mean_at_least = 3\nseed = 5.0",
        "mean_at_least = 1\nseed = 5.0\n# no differs",
        1,
    );
    // Drop the label the plan has.
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("differs = "))
        .collect::<Vec<_>>()
        .join("\n");
    let err = Plan::parse(&text, None).expect_err("refused").to_string();
    assert!(err.contains("looser than the seed's figure"), "{err}");
}
