//! The event loop: run controls, timers, wake-ups, livelock guards, errors,
//! and a three-host topology through a Router.

mod common;
use common::*;
use hollywood_sim::{LinkConfig, Node, NodeId, Router, SimBuilder, SimError, Sink, Source};
use hollywood_tcp::Instant;
use std::net::Ipv4Addr;

/// A node that counts timer firings, sets its timer from a script, and can be
/// told (through `node_mut`) to send a packet.
#[derive(Default)]
struct Ticker {
    deadlines: Vec<Instant>,
    fired: Vec<Instant>,
    to_send: Vec<Vec<u8>>,
    stuck: bool,
}

impl Node for Ticker {
    fn handle_packet(&mut self, _now: Instant, _iface: usize, _packet: Vec<u8>) {}
    fn handle_timeout(&mut self, now: Instant) {
        self.fired.push(now);
        if !self.stuck {
            self.deadlines.retain(|d| *d > now);
        }
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<(usize, Vec<u8>)> {
        self.to_send.pop().map(|p| (0, p))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.iter().min().copied()
    }
    fn as_any(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[test]
fn timers_fire_at_their_deadlines_and_time_jumps() {
    let mut sim = SimBuilder::new().build();
    let t = sim.add_node(Ticker {
        deadlines: vec![at_ms(30), at_ms(10), at_ms(20)],
        ..Ticker::default()
    });
    sim.run_until(at_ms(15)).unwrap();
    assert_eq!(sim.now(), at_ms(15));
    assert_eq!(sim.node_mut::<Ticker>(t).unwrap().fired, vec![at_ms(10)]);
    sim.run_for(ms(100)).unwrap();
    assert_eq!(sim.now(), at_ms(115));
    assert_eq!(
        sim.node_mut::<Ticker>(t).unwrap().fired,
        vec![at_ms(10), at_ms(20), at_ms(30)]
    );
    // Only a handful of events: no fixed ticks.
    assert!(sim.stats().events < 20, "{:?}", sim.stats());
}

#[test]
fn a_rearmed_timer_replaces_its_event() {
    let mut sim = SimBuilder::new().build();
    let t = sim.add_node(Ticker {
        deadlines: vec![at_ms(50)],
        ..Ticker::default()
    });
    sim.run_until(at_ms(1)).unwrap();
    // Pull the deadline in, step by step: each re-arm replaces the entry.
    for d in (10..50).rev() {
        sim.node_mut::<Ticker>(t).unwrap().deadlines = vec![at_ms(d)];
        sim.run_until(at_ms(2)).unwrap();
    }
    assert_eq!(sim.next_event_time(), Some(at_ms(10)));
    sim.run_for(ms(100)).unwrap();
    assert_eq!(sim.node_mut::<Ticker>(t).unwrap().fired, vec![at_ms(10)]);
    // One event: the timer that fired (no stale ones left in the queue).
    assert_eq!(sim.stats().events, 1);
    assert_eq!(sim.next_event_time(), None);
}

#[test]
fn timers_at_the_same_time_fire_in_arming_order() {
    let mut sim = SimBuilder::new().build();
    let a = sim.add_node(Ticker::default());
    let b = sim.add_node(Ticker::default());
    // b arms first, then a: at the same instant b fires first.
    sim.node_mut::<Ticker>(b).unwrap().deadlines = vec![at_ms(5)];
    sim.run_until(at_ms(1)).unwrap();
    sim.node_mut::<Ticker>(a).unwrap().deadlines = vec![at_ms(5)];
    let order = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    sim.run_until(at_ms(2)).unwrap();
    let o = order.clone();
    sim.schedule_action(at_ms(5), move |s| {
        // Scheduled after both timers: runs after them.
        let fa = s.node_mut::<Ticker>(a).unwrap().fired.len();
        let fb = s.node_mut::<Ticker>(b).unwrap().fired.len();
        o.borrow_mut().push((fa, fb));
    })
    .unwrap();
    sim.run_for(ms(10)).unwrap();
    assert_eq!(*order.borrow(), vec![(1, 1)]);
    assert_eq!(sim.node_mut::<Ticker>(a).unwrap().fired, vec![at_ms(5)]);
    assert_eq!(sim.node_mut::<Ticker>(b).unwrap().fired, vec![at_ms(5)]);
}

#[test]
fn node_mut_wakes_the_node() {
    let mut sim = SimBuilder::new().build();
    let t = sim.add_node(Ticker::default());
    let sink = sim.add_node(Sink::new(true));
    sim.add_link(t, 0, sink, 0, LinkConfig::new(0, ms(2)))
        .unwrap();
    sim.run_until(at_ms(10)).unwrap();
    {
        let node = sim.node_mut::<Ticker>(t).unwrap();
        node.to_send.push(pkt(77, 60));
        node.deadlines.push(at_ms(50));
    }
    assert!(
        sim.node_mut::<Sink>(t).is_none(),
        "wrong type must not downcast"
    );
    assert!(sim.node_mut::<Ticker>(NodeId(99)).is_none());
    sim.run_until_idle().unwrap();
    assert_eq!(arrivals(&mut sim, sink), vec![(12_000_000, 77)]);
    assert_eq!(sim.node_mut::<Ticker>(t).unwrap().fired, vec![at_ms(50)]);
}

#[test]
fn rescheduled_timers_leave_stale_events_ignored() {
    let mut sim = SimBuilder::new().build();
    let t = sim.add_node(Ticker {
        deadlines: vec![at_ms(100)],
        ..Ticker::default()
    });
    sim.run_until(at_ms(1)).unwrap();
    // Move the deadline earlier, then later: only the final one fires.
    sim.node_mut::<Ticker>(t).unwrap().deadlines = vec![at_ms(5)];
    sim.run_until(at_ms(2)).unwrap();
    sim.node_mut::<Ticker>(t).unwrap().deadlines = vec![at_ms(200)];
    sim.run_until_idle().unwrap();
    assert_eq!(sim.node_mut::<Ticker>(t).unwrap().fired, vec![at_ms(200)]);
}

#[test]
fn a_node_stuck_in_the_past_is_a_livelock_error() {
    let mut sim = SimBuilder::new().max_timer_spins(50).build();
    let t = sim.add_node(Ticker {
        deadlines: vec![at_ms(3)],
        stuck: true,
        ..Ticker::default()
    });
    match sim.run_until_idle() {
        Err(SimError::TimerLivelock { node, at }) => {
            assert_eq!((node, at), (t, at_ms(3)));
        }
        other => panic!("expected livelock, got {other:?}"),
    }
    assert_eq!(sim.node_mut::<Ticker>(t).unwrap().fired.len(), 50);
}

#[test]
fn a_node_that_never_stops_sending_is_a_livelock_error() {
    struct Firehose;
    impl Node for Firehose {
        fn handle_packet(&mut self, _: Instant, _: usize, _: Vec<u8>) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<(usize, Vec<u8>)> {
            Some((3, vec![0; 20]))
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn as_any(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }
    let mut sim = SimBuilder::new().max_transmits_per_wake(1000).build();
    sim.add_node(Firehose);
    assert!(matches!(sim.step(), Err(SimError::TransmitLivelock { .. })));
    // Sent on an interface without a link: counted, not crashed.
    assert_eq!(sim.stats().unattached_packets, 1000);
}

#[test]
fn event_limit_and_run_while() {
    let mut sim = SimBuilder::new().max_events(10).build();
    let (src, sink) = (
        sim.add_node(Source::periodic(0, Instant::ZERO, ms(1), 100, |i| {
            pkt(i, 50)
        })),
        sim.add_node(Sink::new(false)),
    );
    sim.add_link(src, 0, sink, 0, LinkConfig::default())
        .unwrap();
    assert_eq!(sim.run_until_idle(), Err(SimError::EventLimit(10)));

    let mut sim = SimBuilder::new().build();
    let (src, sink) = (
        sim.add_node(Source::periodic(0, Instant::ZERO, ms(1), 100, |i| {
            pkt(i, 50)
        })),
        sim.add_node(Sink::new(false)),
    );
    sim.add_link(src, 0, sink, 0, LinkConfig::new(0, ms(1)))
        .unwrap();
    let stopped = sim
        .run_while(|s| s.node_mut::<Sink>(sink).unwrap().arrivals().len() < 10)
        .unwrap();
    assert!(stopped);
    assert_eq!(sim.now(), at_ms(10));
    let finished = sim.run_while(|_| true).unwrap();
    assert!(!finished, "ran out of events");
    assert_eq!(sim.node_mut::<Sink>(sink).unwrap().arrivals().len(), 100);
    // The wake-up from node_mut is the only thing left to do.
    assert!(sim.step().unwrap());
    assert!(!sim.step().unwrap());
}

#[test]
fn setup_errors_are_typed() {
    let mut sim = SimBuilder::new().build();
    let a = sim.add_node(Sink::new(false));
    let b = sim.add_node(Sink::new(false));
    sim.add_link(a, 0, b, 0, LinkConfig::default()).unwrap();
    assert_eq!(
        sim.add_link(a, 0, b, 1, LinkConfig::default()),
        Err(SimError::InterfaceInUse { node: a, iface: 0 })
    );
    assert_eq!(
        sim.connect(b, 1, a, 0, LinkConfig::default(), LinkConfig::default()),
        Err(SimError::InterfaceInUse { node: a, iface: 0 })
    );
    assert_eq!(sim.link_count(), 1, "a failed connect adds nothing");
    assert_eq!(
        sim.add_link(a, 1, NodeId(5), 0, LinkConfig::default()),
        Err(SimError::UnknownNode(NodeId(5)))
    );
    assert!(sim.link_stats(hollywood_sim::LinkId(9)).is_err());
    sim.run_until(at_ms(5)).unwrap();
    assert_eq!(
        sim.schedule_action(at_ms(1), |_| {}),
        Err(SimError::InThePast {
            at: at_ms(1),
            now: at_ms(5)
        })
    );
    let e = SimError::InterfaceInUse { node: a, iface: 0 };
    assert!(e.to_string().contains("interface 0"));
}

#[test]
fn scheduled_actions_run_in_order() {
    let mut sim = SimBuilder::new().build();
    let (src, sink) = (
        sim.add_node(Source::periodic(0, Instant::ZERO, ms(1), 20, |i| {
            pkt(i, 50)
        })),
        sim.add_node(Sink::new(true)),
    );
    let link = sim
        .add_link(src, 0, sink, 0, LinkConfig::default())
        .unwrap();
    // Partition from 5 ms to 10 ms, the turmoil way: a rule added and removed.
    sim.schedule_action(at_ms(5), move |s| s.drop_where(link, |_| true).unwrap())
        .unwrap();
    sim.schedule_action(at_ms(10), move |s| s.clear_rules(link).unwrap())
        .unwrap();
    sim.run_until_idle().unwrap();
    let got: Vec<u64> = arrivals(&mut sim, sink).iter().map(|a| a.1).collect();
    let want: Vec<u64> = (0..5).chain(10..20).collect();
    assert_eq!(got, want);
}

fn ipv4(src: [u8; 4], dst: [u8; 4], id: u16) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&28u16.to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p
}

#[test]
fn three_hosts_through_a_router() {
    let mut sim = SimBuilder::new().build();
    let a_ip = [10, 0, 1, 2];
    let b_ip = [10, 0, 2, 2];
    let c_ip = [10, 0, 3, 2];
    let a = sim.add_node(Source::new(vec![
        (at_ms(0), 0, ipv4(a_ip, b_ip, 1)),
        (at_ms(1), 0, ipv4(a_ip, c_ip, 2)),
        (at_ms(2), 0, ipv4(a_ip, [192, 0, 2, 1], 3)),
    ]));
    let b = sim.add_node(Sink::new(true));
    let c = sim.add_node(Sink::new(true));
    let r = sim.add_node(
        Router::new()
            .route(Ipv4Addr::from(a_ip).into(), 24, 0)
            .route(Ipv4Addr::from(b_ip).into(), 24, 1)
            .route(Ipv4Addr::from(c_ip).into(), 24, 2),
    );
    sim.connect(
        a,
        0,
        r,
        0,
        LinkConfig::new(0, ms(1)),
        LinkConfig::new(0, ms(1)),
    )
    .unwrap();
    sim.connect(
        b,
        0,
        r,
        1,
        LinkConfig::new(0, ms(2)),
        LinkConfig::new(0, ms(2)),
    )
    .unwrap();
    sim.connect(
        c,
        0,
        r,
        2,
        LinkConfig::new(0, ms(4)),
        LinkConfig::new(0, ms(4)),
    )
    .unwrap();
    sim.run_until_idle().unwrap();
    let got_b = sim.node_mut::<Sink>(b).unwrap().arrivals().to_vec();
    let got_c = sim.node_mut::<Sink>(c).unwrap().arrivals().to_vec();
    assert_eq!(got_b.len(), 1);
    assert_eq!(got_b[0].time, at_ms(3));
    assert_eq!(got_b[0].packet[8], 63, "TTL decremented");
    assert_eq!(got_c.len(), 1);
    assert_eq!(got_c[0].time, at_ms(6));
    assert_eq!(&got_c[0].packet[4..6], &2u16.to_be_bytes());
    let rs = sim.node_mut::<Router>(r).unwrap().stats();
    assert_eq!((rs.forwarded, rs.no_route), (2, 1));
}
