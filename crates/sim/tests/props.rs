//! Property tests of the link model: packet conservation, causality,
//! FIFO order without reordering impairments, and determinism.

mod common;
use common::*;
use hollywood_sim::{
    GilbertElliott, Jitter, JitterDistribution, LinkConfig, LossModel, SimBuilder, Sink, Source,
    TraceKind,
};
use hollywood_tcp::Instant;
use proptest::prelude::*;
use std::time::Duration;

fn loss() -> impl Strategy<Value = LossModel> {
    prop_oneof![
        Just(LossModel::None),
        (0.0..0.5f64).prop_map(LossModel::Bernoulli),
        (0.0..0.2f64, 0.05..1.0f64, 0.0..0.1f64, 0.2..1.0f64).prop_map(|(p, r, g, b)| {
            LossModel::GilbertElliott(GilbertElliott {
                p,
                r,
                loss_good: g,
                loss_bad: b,
            })
        }),
    ]
}

prop_compose! {
    fn link_config()(
        rate in prop_oneof![Just(0u64), 100_000u64..100_000_000],
        delay_us in 0u64..50_000,
        queue in 0usize..60_000,
        loss in loss(),
        jitter_us in proptest::option::of(0u64..5_000),
        ordered in any::<bool>(),
        reorder in proptest::option::of((0.0..0.3f64, 0u64..10_000)),
        duplicate in 0.0..0.2f64,
        mtu in proptest::option::of(500usize..1500),
    ) -> LinkConfig {
        LinkConfig {
            rate_bps: rate,
            delay: Duration::from_micros(delay_us),
            queue_bytes: queue,
            loss,
            jitter: jitter_us.map(|j| Jitter {
                distribution: JitterDistribution::Uniform { max: Duration::from_micros(j) },
                preserve_order: ordered,
            }),
            reorder: reorder.map(|(p, us)| hollywood_sim::Reorder {
                probability: p,
                extra_delay: Duration::from_micros(us),
            }),
            duplicate,
            mtu,
        }
    }
}

fn script() -> impl Strategy<Value = Vec<(u64, usize)>> {
    proptest::collection::vec((0u64..200_000, 40usize..1500), 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_packet_is_delivered_or_dropped(cfg in link_config(), script in script(), seed in any::<u64>()) {
        let run = |seed: u64| {
            let mut sim = SimBuilder::new().seed(seed).build();
            let pkts = script
                .iter()
                .enumerate()
                .map(|(i, &(us, len))| (Instant::from_nanos(us * 1000), 0, pkt(i as u64, len)))
                .collect();
            let src = sim.add_node(Source::new(pkts));
            let sink = sim.add_node(Sink::new(true));
            let link = sim.add_link(src, 0, sink, 0, cfg.clone()).unwrap();
            let log = record(&mut sim);
            sim.run_until_idle().unwrap();
            let st = sim.link_stats(link).unwrap();
            let recs = log.borrow().clone();
            (st, recs, arrivals(&mut sim, sink))
        };
        let (st, recs, got) = run(seed);
        prop_assert_eq!(st.packets_sent, script.len() as u64);
        prop_assert_eq!(st.packets_sent + st.packets_duplicated, st.packets_delivered + st.dropped.total());
        prop_assert_eq!(got.len() as u64, st.packets_delivered);

        // Causality: nothing arrives before its offer time plus delay and
        // its own serialization time.
        let mut offered = std::collections::HashMap::new();
        for r in &recs {
            if r.kind == TraceKind::Sent {
                offered.insert(r.index, (r.time, r.len));
            }
        }
        for r in recs.iter().filter(|r| r.kind == TraceKind::Delivered) {
            let (t0, len) = offered[&r.index];
            let min = t0 + cfg.delay.as_nanos() as u64 + cfg.serialization_time(len).as_nanos() as u64;
            prop_assert!(r.time >= min, "index {} arrived at {} < {}", r.index, r.time, min);
        }

        // Without jitter-reordering, holds or duplicates, order is FIFO in
        // offer order.
        let may_reorder = cfg.reorder.is_some_and(|r| r.probability > 0.0)
            || cfg.jitter.is_some_and(|j| !j.preserve_order)
            || cfg.duplicate > 0.0;
        if !may_reorder {
            let mut sent_order: Vec<(u64, u64)> =
                script.iter().enumerate().map(|(i, &(us, _))| (us, i as u64)).collect();
            sent_order.sort();
            let rank: std::collections::HashMap<u64, usize> =
                sent_order.iter().enumerate().map(|(r, &(_, i))| (i, r)).collect();
            prop_assert!(got.windows(2).all(|w| rank[&w[0].1] < rank[&w[1].1]));
        }

        // Determinism.
        let (st2, recs2, got2) = run(seed);
        prop_assert_eq!(st, st2);
        prop_assert_eq!(recs, recs2);
        prop_assert_eq!(got, got2);
    }
}
