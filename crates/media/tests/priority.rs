//! Issue 32: per-message priority decides what a congested TCP receiver
//! gets first, in the TCP Hollywood engine's message queue (not only in
//! the relay's queue). A stream of 2.4 Mb/s of payload into a 2 Mb/s path
//! (a 120 ms drop-tail queue), every fourth message a keyframe-class
//! message (relay class 0, `OutMessage::priority` 0) and the rest class 3
//! (priority -3): the keyframe class arrives in time, the rest takes what
//! capacity is left. With one priority for all, every class fares alike.

use hollywood_media::{MessagesRun, MessagesScenario, Transport, TransportKind};
use hollywood_sim::LossModel;
use std::time::Duration;

const LIFETIME: Duration = Duration::from_millis(400);

fn congested(priorities: Vec<i8>) -> MessagesRun {
    let sc = MessagesScenario {
        rate_bps: 2_000_000,
        uplink_bps: 2_000_000,
        rtt: Duration::from_millis(70),
        loss: LossModel::Bernoulli(0.001),
        queue_bytes: 30_000,
        count: 800,
        size: 1200,
        interval: Duration::from_millis(4),
        lifetime: Some(LIFETIME),
        transport: hollywood_media::GenericTransport::from(TransportKind::Tcp(
            Transport::Hollywood,
        )),
        seed: 1,
        priorities,
        ..MessagesScenario::default()
    };
    sc.run().expect("scenario runs")
}

/// On-time share of the messages whose id is `class` modulo 4.
fn on_time_share(r: &MessagesRun, class: usize) -> f64 {
    let (mut on_time, mut n) = (0, 0);
    for (i, g) in r.generated.iter().enumerate().skip(class).step_by(4) {
        n += 1;
        if let (Some(g), Some(a)) = (g, r.arrival[i]) {
            if a <= *g + LIFETIME {
                on_time += 1;
            }
        }
    }
    f64::from(on_time) / f64::from(n)
}

#[test]
fn a_congested_receiver_gets_the_urgent_class_first() {
    let fifo = congested(Vec::new());
    let prio = congested(vec![0, -3, -3, -3]);
    let (f0, f3) = (on_time_share(&fifo, 0), on_time_share(&fifo, 1));
    let (p0, p3) = (on_time_share(&prio, 0), on_time_share(&prio, 1));
    eprintln!("one priority: class 0 {f0:.3}, class 3 {f3:.3}; by priority: class 0 {p0:.3}, class 3 {p3:.3}");
    assert!((f0 - f3).abs() < 0.1, "FIFO treats the classes alike");
    assert!(p0 > 0.95, "the urgent class arrives in time: {p0:.3}");
    assert!(
        p0 > f0 + 0.3,
        "priority helps the urgent class: {f0:.3} -> {p0:.3}"
    );
    assert_eq!(prio.corrupt_delivered, 0);
    assert_eq!(prio.duplicates_delivered, 0);
}
