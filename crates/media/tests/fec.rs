//! FEC on the message layer in the simulator (issue 34 item 1; docs/FEC.md):
//! a 2 Mb/s live stream (1316 B every 5 ms) with a 200 ms deadline over a
//! 300 ms path with 2 % loss. Retransmission cannot make that deadline; FEC
//! must keep at least 99 % on time within 25 % overhead. Shortened from
//! the documented runs (12 000 messages) to 2 000.

use hollywood_fec::FecConfig;
use hollywood_media::{GenericTransport, MessagesRun, MessagesScenario, Transport, TransportKind};
use hollywood_sim::LossModel;
use hollywood_tcp::{CcAlgorithm, Config};
use std::time::Duration;

fn live(kind: TransportKind, cc: CcAlgorithm, fec: bool, seed: u64, count: u32) -> MessagesRun {
    let sc = MessagesScenario {
        rate_bps: 8_000_000,
        uplink_bps: 8_000_000,
        rtt: Duration::from_millis(300),
        loss: LossModel::Bernoulli(0.02),
        count,
        size: 1316,
        interval: Duration::from_millis(5),
        lifetime: Some(Duration::from_millis(200)),
        transport: GenericTransport::from(kind).with_cc(cc),
        seed,
        base: Config {
            cc,
            ..Config::default()
        },
        fec: fec.then(FecConfig::default),
        ..MessagesScenario::default()
    };
    sc.run().expect("run")
}

fn share(run: &MessagesRun) -> f64 {
    run.on_time.on_time as f64 / run.scenario.count as f64
}

/// Repair bytes over the protected bytes, as the sender counted them.
fn overhead(run: &MessagesRun) -> f64 {
    let (tx, _) = run.fec.expect("FEC counters");
    tx.encoder.repair_bytes as f64 / tx.encoder.protected_bytes.max(1) as f64
}

fn check(kind: TransportKind, cc: CcAlgorithm) {
    let count = 2000;
    let off = live(kind, cc, false, 1, count);
    let on = live(kind, cc, true, 1, count);
    let what = format!(
        "{} {:?}: {} of {count} on time without FEC, {} with ({:.1} % overhead), {:?}",
        kind.name(),
        cc,
        off.on_time.on_time,
        on.on_time.on_time,
        100.0 * overhead(&on),
        on.fec
    );
    // The check can fail: without FEC the deadline is missed for the
    // lost messages (2 %), so the stream is below 99 %.
    assert!(share(&off) < 0.99, "{what}");
    assert!(share(&on) >= 0.99, "{what}");
    assert!(overhead(&on) <= 0.25, "{what}");
    // On the wire (headers included), against the run without FEC: the
    // bound is on payload bytes, and a repair message's record header is
    // a few bytes longer than a source's (docs/FEC.md, "Open": 25.2 % on
    // the wire over UDP at the full length). Within a point of the bound.
    let wire = on.wire_bytes as f64 / off.wire_bytes as f64 - 1.0;
    assert!(
        wire <= 0.26,
        "{what}: {:.1} % more bytes on the wire",
        100.0 * wire
    );
    assert_eq!(on.corrupt_delivered + on.duplicates_delivered, 0, "{what}");
    assert_eq!(on.error, None, "{what}");
    let (_, rx) = on.fec.unwrap();
    assert!(rx.decoder.rebuilt > 0, "{what}");
}

#[test]
fn udp_with_fec_makes_the_deadline() {
    check(TransportKind::Udp, CcAlgorithm::Bbr);
}

#[test]
fn hollywood_bbr_with_fec_makes_the_deadline() {
    check(TransportKind::Tcp(Transport::Hollywood), CcAlgorithm::Bbr);
}

/// Where retransmission can make the deadline (1 s over 100 ms) a TCP
/// Hollywood sender protects nothing: FEC costs no byte.
#[test]
fn no_fec_where_retransmission_is_in_time() {
    let sc = MessagesScenario {
        rtt: Duration::from_millis(100),
        lifetime: Some(Duration::from_millis(1000)),
        count: 300,
        fec: Some(FecConfig::default()),
        ..MessagesScenario::default()
    };
    let run = sc.run().expect("run");
    let (tx, _) = run.fec.expect("FEC counters");
    assert_eq!(tx.encoder.protected, 0);
    assert_eq!(tx.repairs_sent, 0);
    assert_eq!(run.on_time.on_time, run.on_time.oracle_on_time);
}
