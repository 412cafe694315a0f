//! Helpers shared by the scenario tests.
#![allow(dead_code)]

use hollywood_sim::{
    LinkConfig, LinkId, NodeId, SimBuilder, Simulator, Sink, Source, TraceEvent, TraceKind,
};
use hollywood_tcp::Instant;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// A `len`-byte packet whose first 8 bytes are `i` (big-endian).
pub fn pkt(i: u64, len: usize) -> Vec<u8> {
    let mut p = vec![0xa5; len.max(8)];
    p[..8].copy_from_slice(&i.to_be_bytes());
    p
}

/// The index written by [`pkt`].
pub fn idx(p: &[u8]) -> u64 {
    u64::from_be_bytes(p[..8].try_into().unwrap())
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn at_ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

/// Source (node 0) → Sink (node 1) over one link with `cfg`, sending `count`
/// packets of `len` bytes every `interval` from t = 0.
pub fn source_sink(
    seed: u64,
    cfg: LinkConfig,
    count: u64,
    len: usize,
    interval: Duration,
) -> (Simulator, NodeId, LinkId) {
    let mut sim = SimBuilder::new().seed(seed).build();
    let src = sim.add_node(Source::periodic(0, Instant::ZERO, interval, count, |i| {
        pkt(i, len)
    }));
    let sink = sim.add_node(Sink::new(true));
    let link = sim.add_link(src, 0, sink, 0, cfg).unwrap();
    (sim, sink, link)
}

/// Compact, comparable form of a trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub time: u64,
    pub link: usize,
    pub index: u64,
    pub copy: u8,
    pub kind: TraceKind,
    pub len: usize,
}

/// Install a hook that records every trace event.
pub fn record(sim: &mut Simulator) -> Rc<RefCell<Vec<Rec>>> {
    let log = Rc::new(RefCell::new(Vec::new()));
    let l2 = log.clone();
    sim.on_packet(move |e: &TraceEvent<'_>| {
        l2.borrow_mut().push(Rec {
            time: e.time.as_nanos(),
            link: e.link.0,
            index: e.index,
            copy: e.copy,
            kind: e.kind,
            len: e.packet.len(),
        })
    });
    log
}

pub fn arrivals(sim: &mut Simulator, sink: NodeId) -> Vec<(u64, u64)> {
    sim.node_mut::<Sink>(sink)
        .unwrap()
        .arrivals()
        .iter()
        .map(|a| (a.time.as_nanos(), idx(&a.packet)))
        .collect()
}
