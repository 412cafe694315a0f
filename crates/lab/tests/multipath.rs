//! `lab multipath` (issue 34 item 2): a connection group over two real
//! emulated paths (fibre a, LTE b; two labs, one socket per path at each
//! end) through a hard failure of path a, with UDP inner connections and
//! the group heartbeat (root only: namespaces, TUN, the emulator).
//!
//! A 4 s stream (800 × 1316 B every 5 ms, 200 ms lifetime), path a
//! fails at 2 s:
//! - broadcast: no message that a path delivered in time is missed by
//!   the application;
//! - backup: the heartbeat's silence detects the failure within 150 ms,
//!   the group switches to b, and on time stays ≥ 95 % (without
//!   detection, everything after the failure is lost: 50 %).
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::interop::LAB_PREFIX;
use hollywood_media::multipath::{MultipathMode, MultipathScenario};
use hollywood_media::GenericTransport;
use std::time::Duration;

fn root(test: &str) -> bool {
    if hollywood_io::is_root() {
        true
    } else {
        hollywood_test_support::skip(&format!(
            "{test} needs root (network namespaces, TUN devices, the emulator)"
        ));
        false
    }
}

fn scenario(mode: MultipathMode) -> MultipathScenario {
    MultipathScenario {
        mode,
        transport: GenericTransport::Udp,
        count: 800,
        fail: Some((0, Duration::from_secs(2))),
        seed: 3,
        ..MultipathScenario::default()
    }
}

#[test]
fn lab_multipath_udp_broadcast_and_backup_through_a_failure() {
    if !root("lab_multipath_udp_broadcast_and_backup_through_a_failure") {
        return;
    }
    let name = format!("{LAB_PREFIX}-{}-mp", std::process::id());
    let b = hollywood_lab::multipath::run(&scenario(MultipathMode::Broadcast), &name)
        .expect("broadcast run");
    eprintln!("broadcast: {:?}", b);
    assert_eq!(b.run.corrupt_or_duplicate, 0);
    assert_eq!(b.run.in_time_on_a_path_but_missed, 0, "{:?}", b.run);
    assert!(b.dropped_by_failure > 0, "the failure dropped nothing");
    assert!(
        b.run.on_time * 100 >= b.run.sent * 95,
        "broadcast on time {} of {}",
        b.run.on_time,
        b.run.sent
    );

    let k =
        hollywood_lab::multipath::run(&scenario(MultipathMode::Backup), &name).expect("backup run");
    eprintln!("backup: {:?}", k);
    let w = k.run.failure.clone().expect("failure window");
    let detected = w.detected_s.expect("backup over UDP detected the failure");
    assert!(
        detected > w.fail_s && detected - w.fail_s <= 0.150,
        "detected at {detected} s, failure at {} s",
        w.fail_s
    );
    assert!(k.run.heartbeats.1 > 0, "no PONGs");
    assert_eq!(k.run.corrupt_or_duplicate, 0);
    assert!(
        k.run.on_time * 100 >= k.run.sent * 95,
        "backup on time {} of {}",
        k.run.on_time,
        k.run.sent
    );
}
