//! Link model scenarios: exact timing, queueing, loss models, rules,
//! schedules, jitter, reordering, duplication, MTU.

mod common;
use common::*;
use hollywood_sim::{
    DropReason, GilbertElliott, Jitter, JitterDistribution, LinkConfig, LossModel, SimBuilder,
    Sink, Source, TraceKind, Verdict,
};
use hollywood_tcp::Instant;
use std::time::Duration;

#[test]
fn serialization_and_propagation_are_exact() {
    // 1500 B at 12 Mb/s = 1 ms on the wire, + 10 ms propagation.
    let cfg = LinkConfig::new(12_000_000, ms(10));
    let (mut sim, sink, link) = source_sink(1, cfg, 3, 1500, Duration::ZERO);
    sim.run_until_idle().unwrap();
    // Back-to-back packets queue behind each other: 11, 12, 13 ms.
    assert_eq!(
        arrivals(&mut sim, sink),
        vec![(11_000_000, 0), (12_000_000, 1), (13_000_000, 2)]
    );
    let st = sim.link_stats(link).unwrap();
    assert_eq!(
        (st.packets_sent, st.packets_delivered, st.dropped.total()),
        (3, 3, 0)
    );
    assert_eq!(st.max_backlog_bytes, 4500);
}

#[test]
fn idle_gaps_do_not_accumulate_delay() {
    // Packets 5 ms apart on a 1 ms serialization link never queue.
    let cfg = LinkConfig::new(12_000_000, ms(10));
    let (mut sim, sink, _) = source_sink(1, cfg, 4, 1500, ms(5));
    sim.run_until_idle().unwrap();
    let t: Vec<u64> = arrivals(&mut sim, sink).iter().map(|a| a.0).collect();
    assert_eq!(t, vec![11_000_000, 16_000_000, 21_000_000, 26_000_000]);
}

#[test]
fn serialization_rounds_up_to_the_nanosecond() {
    let cfg = LinkConfig::new(7_000_000, Duration::ZERO);
    // 100 B * 8 / 7e6 = 114285.714.. ns → 114286.
    assert_eq!(cfg.serialization_time(100), Duration::from_nanos(114_286));
    assert_eq!(
        LinkConfig::default().serialization_time(100),
        Duration::ZERO
    );
    assert_eq!(LinkConfig::new(10_000_000, ms(1)).bdp_bytes(ms(50)), 62_500);
}

#[test]
fn drop_tail_queue_overflows() {
    // Room for exactly two 1500-byte packets (the one in service included).
    let cfg = LinkConfig::new(12_000_000, ms(1)).with_queue_bytes(3000);
    let (mut sim, sink, link) = source_sink(1, cfg, 10, 1500, Duration::ZERO);
    let log = record(&mut sim);
    sim.run_until_idle().unwrap();
    assert_eq!(
        arrivals(&mut sim, sink),
        vec![(2_000_000, 0), (3_000_000, 1)]
    );
    let st = sim.link_stats(link).unwrap();
    assert_eq!(st.dropped.queue_full, 8);
    assert_eq!(st.dropped.get(DropReason::QueueFull), 8);
    assert_eq!(st.bytes_dropped, 8 * 1500);
    let dropped: Vec<u64> = log
        .borrow()
        .iter()
        .filter(|r| r.kind == TraceKind::Dropped(DropReason::QueueFull))
        .map(|r| r.index)
        .collect();
    assert_eq!(dropped, (2..10).collect::<Vec<_>>());
}

#[test]
fn queue_drains_at_line_rate() {
    // 3000-byte queue, packets every 0.5 ms at 1 ms service: the backlog
    // grows by one packet per ms and drops begin once it is full.
    let cfg = LinkConfig::new(12_000_000, Duration::ZERO).with_queue_bytes(3000);
    let (mut sim, _sink, link) = source_sink(1, cfg, 8, 1500, Duration::from_micros(500));
    let log = record(&mut sim);
    sim.run_until_idle().unwrap();
    // t=0 accept (backlog 1500), t=.5 accept (3000), t=1.0 first done →
    // backlog 1500 → accept (3000), t=1.5 drop, t=2.0 accept, t=2.5 drop, ...
    let dropped: Vec<u64> = log
        .borrow()
        .iter()
        .filter(|r| matches!(r.kind, TraceKind::Dropped(_)))
        .map(|r| r.index)
        .collect();
    assert_eq!(dropped, vec![3, 5, 7]);
    assert_eq!(sim.link_stats(link).unwrap().packets_delivered, 5);
}

#[test]
fn bernoulli_loss_rate_within_tolerance() {
    let n = 100_000u64;
    let p = 0.05;
    let cfg = LinkConfig::default().with_loss(LossModel::Bernoulli(p));
    let (mut sim, _sink, link) = source_sink(7, cfg, n, 64, Duration::from_micros(10));
    sim.run_until_idle().unwrap();
    let st = sim.link_stats(link).unwrap();
    assert_eq!(st.packets_delivered + st.dropped.loss, n);
    let rate = st.dropped.loss as f64 / n as f64;
    // σ = sqrt(p(1-p)/n) ≈ 0.00069; allow 5σ.
    assert!((rate - p).abs() < 0.0035, "loss rate {rate}");
}

#[test]
fn gilbert_elliott_matches_stationary_mean_and_is_bursty() {
    let ge = GilbertElliott {
        p: 0.01,
        r: 0.1,
        loss_good: 0.001,
        loss_bad: 0.5,
    };
    let expected = 0.001 * (0.1 / 0.11) + 0.5 * (0.01 / 0.11);
    assert!((ge.mean_loss() - expected).abs() < 1e-12);
    assert!((LossModel::GilbertElliott(ge).mean_loss() - expected).abs() < 1e-12);
    let n = 200_000u64;
    let cfg = LinkConfig::default().with_loss(LossModel::GilbertElliott(ge));
    let (mut sim, _sink, link) = source_sink(11, cfg, n, 64, Duration::from_micros(10));
    let log = record(&mut sim);
    sim.run_until_idle().unwrap();
    let st = sim.link_stats(link).unwrap();
    let rate = st.dropped.loss as f64 / n as f64;
    assert!(
        (rate - expected).abs() < 0.006,
        "GE loss {rate} vs {expected}"
    );
    // Burstiness: P(loss | previous lost) far above the mean.
    let mut lost = vec![false; n as usize];
    for r in log.borrow().iter() {
        if r.kind == TraceKind::Dropped(DropReason::Loss) {
            lost[r.index as usize] = true;
        }
    }
    let pairs = lost.windows(2).filter(|w| w[0]).count();
    let both = lost.windows(2).filter(|w| w[0] && w[1]).count();
    let cond = both as f64 / pairs as f64;
    assert!(cond > 3.0 * expected, "conditional loss {cond} not bursty");
}

#[test]
fn gilbert_model_with_no_transitions_never_loses() {
    let ge = GilbertElliott::gilbert(0.0, 0.0);
    assert_eq!(ge.mean_loss(), 0.0);
    let cfg = LinkConfig::default().with_loss(LossModel::GilbertElliott(ge));
    let (mut sim, _sink, link) = source_sink(3, cfg, 1000, 64, Duration::from_micros(10));
    sim.run_until_idle().unwrap();
    assert_eq!(sim.link_stats(link).unwrap().packets_delivered, 1000);
}

#[test]
fn rules_drop_exact_packets() {
    let (mut sim, sink, link) = source_sink(1, LinkConfig::new(0, ms(5)), 10, 100, ms(1));
    sim.drop_nth(link, [0, 5, 7]).unwrap();
    sim.drop_where(link, |p| p.index == 9 && p.packet.len() == 100)
        .unwrap();
    sim.run_until_idle().unwrap();
    let got: Vec<u64> = arrivals(&mut sim, sink).iter().map(|a| a.1).collect();
    assert_eq!(got, vec![1, 2, 3, 4, 6, 8]);
    assert_eq!(sim.link_stats(link).unwrap().dropped.rule, 4);
}

#[test]
fn rule_delay_reorders_and_rules_see_every_packet() {
    let (mut sim, sink, link) = source_sink(1, LinkConfig::new(0, ms(5)), 4, 100, ms(1));
    let mut seen = Vec::new();
    let seen_log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let s2 = seen_log.clone();
    sim.add_rule(link, move |p| {
        seen.push(p.index);
        *s2.borrow_mut() = seen.clone();
        if p.index == 1 {
            Verdict::Delay(ms(3))
        } else {
            Verdict::Pass
        }
    })
    .unwrap();
    sim.drop_nth(link, [3]).unwrap();
    sim.run_until_idle().unwrap();
    assert_eq!(*seen_log.borrow(), vec![0, 1, 2, 3]);
    // Packet 1 (sent at 1 ms) arrives at 9 ms, after packet 2 (7 ms).
    assert_eq!(
        arrivals(&mut sim, sink),
        vec![(5_000_000, 0), (7_000_000, 2), (9_000_000, 1)]
    );
}

#[test]
fn scheduled_rate_change_applies_mid_run() {
    // 12 Mb/s until 100 ms, then 6 Mb/s: serialization 1 ms → 2 ms.
    let (mut sim, sink, link) =
        source_sink(1, LinkConfig::new(12_000_000, ms(10)), 4, 1500, ms(50));
    sim.schedule_link(link, at_ms(100), |c| c.rate_bps = 6_000_000)
        .unwrap();
    sim.run_until(at_ms(75)).unwrap();
    assert_eq!(sim.link_config(link).unwrap().rate_bps, 12_000_000);
    sim.run_until_idle().unwrap();
    assert_eq!(sim.link_config(link).unwrap().rate_bps, 6_000_000);
    let t: Vec<u64> = arrivals(&mut sim, sink).iter().map(|a| a.0).collect();
    // Sent at 0, 50, 100, 150 ms. The change at 100 ms was scheduled before
    // the packet offered at 100 ms, so that packet already sees 6 Mb/s.
    assert_eq!(t, vec![11_000_000, 61_000_000, 112_000_000, 162_000_000]);
    // Whole-config replacement and errors.
    sim.schedule_link_config(link, at_ms(500), LinkConfig::new(1, ms(1)))
        .unwrap();
    assert!(sim.schedule_link(link, at_ms(1), |_| {}).is_err());
    let bad = LinkConfig::default().with_loss(LossModel::Bernoulli(1.5));
    assert!(sim.schedule_link_config(link, at_ms(600), bad).is_err());
    sim.schedule_link(link, at_ms(700), |c| c.duplicate = f64::NAN)
        .unwrap();
    assert!(sim.run_until_idle().is_err());
}

#[test]
fn jitter_preserving_order_never_reorders() {
    let j = Jitter {
        distribution: JitterDistribution::Uniform { max: ms(20) },
        preserve_order: true,
    };
    let (mut sim, sink, _) = source_sink(
        5,
        LinkConfig::new(0, ms(10)).with_jitter(j),
        2000,
        100,
        ms(1),
    );
    sim.run_until_idle().unwrap();
    let a = arrivals(&mut sim, sink);
    assert_eq!(a.len(), 2000);
    assert!(a.windows(2).all(|w| w[0].1 < w[1].1), "reordered");
    let extra: Vec<u64> = a
        .iter()
        .map(|(t, i)| t - i * 1_000_000 - 10_000_000)
        .collect();
    assert!(extra.iter().all(|&e| e <= 20_000_000));
    assert!(
        extra.iter().any(|&e| e > 10_000_000),
        "jitter had no effect"
    );
}

#[test]
fn jitter_without_order_reorders_and_normal_is_centred() {
    let j = Jitter {
        distribution: JitterDistribution::Normal {
            mean: ms(5),
            std_dev: ms(2),
        },
        preserve_order: false,
    };
    let (mut sim, sink, _) = source_sink(
        5,
        LinkConfig::new(0, ms(10)).with_jitter(j),
        5000,
        100,
        ms(1),
    );
    sim.run_until_idle().unwrap();
    let a = arrivals(&mut sim, sink);
    assert!(a.windows(2).any(|w| w[0].1 > w[1].1), "no reordering");
    let extra: Vec<f64> = a
        .iter()
        .map(|(t, i)| (t - i * 1_000_000 - 10_000_000) as f64 / 1e6)
        .collect();
    let mean = extra.iter().sum::<f64>() / extra.len() as f64;
    let var = extra.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / extra.len() as f64;
    assert!((mean - 5.0).abs() < 0.15, "mean {mean}");
    assert!((var.sqrt() - 2.0).abs() < 0.15, "std {}", var.sqrt());
    assert!(extra.iter().all(|&e| e <= 5.0 + 6.0 * 2.0));
}

#[test]
fn explicit_reordering_holds_packets_back() {
    let cfg = LinkConfig::new(0, ms(10)).with_reorder(0.1, ms(5));
    let (mut sim, sink, _) = source_sink(9, cfg, 2000, 100, ms(1));
    sim.run_until_idle().unwrap();
    let a = arrivals(&mut sim, sink);
    assert_eq!(a.len(), 2000);
    let held: Vec<&(u64, u64)> = a
        .iter()
        .filter(|(t, i)| *t == i * 1_000_000 + 15_000_000)
        .collect();
    let frac = held.len() as f64 / 2000.0;
    assert!((frac - 0.1).abs() < 0.03, "held fraction {frac}");
    assert!(a
        .iter()
        .all(|(t, i)| *t == i * 1_000_000 + 10_000_000 || *t == i * 1_000_000 + 15_000_000));
    assert!(a.windows(2).any(|w| w[0].1 > w[1].1));
}

#[test]
fn duplication_makes_extra_copies() {
    let cfg = LinkConfig::new(0, ms(1)).with_duplicate(0.2);
    let (mut sim, sink, link) = source_sink(13, cfg, 5000, 100, ms(1));
    let log = record(&mut sim);
    sim.run_until_idle().unwrap();
    let st = sim.link_stats(link).unwrap();
    assert_eq!(st.packets_sent, 5000);
    assert_eq!(st.packets_delivered, 5000 + st.packets_duplicated);
    let frac = st.packets_duplicated as f64 / 5000.0;
    assert!((frac - 0.2).abs() < 0.03, "dup fraction {frac}");
    let dups = log
        .borrow()
        .iter()
        .filter(|r| r.kind == TraceKind::Delivered && r.copy == 1)
        .count() as u64;
    assert_eq!(dups, st.packets_duplicated);
    assert_eq!(
        sim.node_mut::<Sink>(sink).unwrap().arrivals().len() as u64,
        st.packets_delivered
    );
}

#[test]
fn mtu_drops_oversized_packets() {
    let mut sim = SimBuilder::new().build();
    let src = sim.add_node(Source::new(vec![
        (Instant::ZERO, 0, pkt(0, 1500)),
        (Instant::ZERO, 0, pkt(1, 1501)),
        (Instant::ZERO, 0, pkt(2, 100)),
    ]));
    let sink = sim.add_node(Sink::new(true));
    let link = sim
        .add_link(src, 0, sink, 0, LinkConfig::default().with_mtu(1500))
        .unwrap();
    sim.run_until_idle().unwrap();
    let got: Vec<u64> = arrivals(&mut sim, sink).iter().map(|a| a.1).collect();
    assert_eq!(got, vec![0, 2]);
    assert_eq!(sim.link_stats(link).unwrap().dropped.mtu, 1);
}

#[test]
fn invalid_probabilities_are_rejected() {
    let mut sim = SimBuilder::new().build();
    let a = sim.add_node(Sink::new(false));
    let b = sim.add_node(Sink::new(false));
    for bad in [
        LinkConfig::default().with_loss(LossModel::Bernoulli(-0.1)),
        LinkConfig::default().with_duplicate(2.0),
        LinkConfig::default().with_reorder(f64::NAN, ms(1)),
        LinkConfig::default()
            .with_loss(LossModel::GilbertElliott(GilbertElliott::gilbert(0.1, 1.1))),
    ] {
        assert!(matches!(
            sim.add_link(a, 0, b, 0, bad),
            Err(hollywood_sim::SimError::InvalidProbability { .. })
        ));
    }
    assert_eq!(sim.link_count(), 0);
}
