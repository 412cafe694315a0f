//! The simulator's links and a standalone `LinkModel` fed the same packets
//! with the same random stream make identical decisions (one link model for
//! the simulator and the real-packet emulator), and
//! `Simulator::schedule_link_change` applies a `LinkChange` like
//! `LinkModel::schedule` does.

use hollywood_sim::{
    Instant, Jitter, LinkChange, LinkConfig, LinkModel, LossModel, SimBuilder, Sink, Source,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

fn script() -> Vec<(Instant, usize, Vec<u8>)> {
    (0..400u64)
        .map(|i| {
            let len = 60 + (i as usize * 37) % 1440;
            (Instant::from_nanos(i * 150_000), 0, vec![i as u8; len])
        })
        .collect()
}

/// Arrival times of the script through one simulated link.
fn simulated(config: LinkConfig, seed: u64, change: Option<(Instant, LinkChange)>) -> Vec<u64> {
    let mut sim = SimBuilder::new().seed(seed).build();
    let src = sim.add_node(Source::new(script()));
    let dst = sim.add_node(Sink::new(false));
    let link = sim.add_link(src, 0, dst, 0, config).unwrap();
    if let Some((at, c)) = change {
        sim.schedule_link_change(link, at, c).unwrap();
    }
    sim.run_until_idle().unwrap();
    let sink = sim.node_mut::<Sink>(dst).unwrap();
    let mut t: Vec<u64> = sink.arrivals().iter().map(|a| a.time.as_nanos()).collect();
    t.sort_unstable();
    t
}

/// The same through a standalone model with the simulator's stream for
/// link 0 (seed, stream 1).
fn modelled(config: LinkConfig, seed: u64, change: Option<(Instant, LinkChange)>) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1);
    let mut m = LinkModel::with_rng(config, rng);
    if let Some((at, c)) = change {
        m.schedule(at, c).unwrap();
    }
    let mut t = Vec::new();
    for (now, _, packet) in script() {
        let copies = if m.roll_duplicate() { 2 } else { 1 };
        for _ in 0..copies {
            if let Ok(at) = m.offer(now, packet.len(), Duration::ZERO) {
                t.push(at.as_nanos());
            }
        }
    }
    t.sort_unstable();
    t
}

#[test]
fn simulator_and_standalone_model_agree() {
    let config = LinkConfig::new(40_000_000, Duration::from_millis(10))
        .with_queue_bytes(20_000)
        .with_loss(LossModel::Bernoulli(0.05))
        .with_jitter(Jitter::uniform(Duration::from_micros(500)))
        .with_reorder(0.02, Duration::from_millis(3))
        .with_duplicate(0.03);
    for seed in [1, 2, 3] {
        let sim = simulated(config.clone(), seed, None);
        assert!(sim.len() > 300 && sim.len() < 420, "{}", sim.len());
        assert_eq!(sim, modelled(config.clone(), seed, None), "seed {seed}");
    }
}

#[test]
fn scheduled_changes_agree() {
    let config = LinkConfig::new(20_000_000, Duration::from_millis(5));
    let change = (Instant::from_nanos(30_000_000), LinkChange::Rate(5_000_000));
    let sim = simulated(config.clone(), 9, Some(change.clone()));
    assert_eq!(sim, modelled(config.clone(), 9, Some(change)));
    // The change made a difference.
    assert_ne!(sim, simulated(config, 9, None));
}
