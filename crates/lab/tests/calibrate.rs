//! Calibration against Linux on real packets (root only): a short VoIP
//! call (300 messages, 6 s) of the intracontinental scenario with Linux at
//! both ends and with our engine at both ends, plus the simulator column.
//! Checks that both transports deliver every message intact and that the
//! report is complete and consistent. No timing-ratio assertion: the
//! 20 % goal is checked and reported by `hollywood calibrate` on full
//! calls (machines are noisy).
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::calibrate::{self, CalibrateSpec, Scenario};
use hollywood_lab::interop::LAB_PREFIX;
use std::sync::Mutex;

/// One lab test at a time, as the other lab test files do (both calls
/// measure delays and goodput on a 2-core machine).
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn short_call_delivers_everything_on_both_transports() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(
            "calibrate needs root (network namespaces, TUN devices, tshark)",
        );
        return;
    }
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = format!("{LAB_PREFIX}-{}-cal", std::process::id());
    let mut spec = CalibrateSpec::new(Scenario::Intracontinental, &lab);
    spec.messages = 300;
    // 1 % so that a few losses happen even in a short call.
    spec.loss = 0.01;
    spec.seed = 3;
    let r = calibrate::run(&spec).unwrap_or_else(|e| panic!("calibrate: {e}"));
    eprintln!("{}", r.to_text());
    let sim = r.simulator.as_ref().expect("simulator column");
    for c in [&r.kernel, &r.engine, sim] {
        let t = &c.transport;
        assert_eq!(c.error, None, "{t}");
        assert_eq!(c.messages, 300, "{t}");
        assert_eq!(c.delivered, 300, "{t}: TCP delivers everything");
        assert_eq!(c.never_arrived, 0, "{t}");
        assert_eq!(c.played + c.late, c.delivered, "{t}");
        assert_eq!(
            (c.corrupt, c.duplicates, c.seq_holes, c.resets),
            (0, 0, 0, 0),
            "{t}"
        );
        // One-way propagation is 7.5 ms; nothing arrives faster.
        assert!(c.delay_p50_ms >= 7.5, "{t}: {c:?}");
        assert!(c.delay_p50_ms <= c.delay_p90_ms, "{t}");
        assert!(c.delay_p90_ms <= c.delay_p99_ms, "{t}");
        assert!(c.delay_p99_ms <= c.delay_max_ms, "{t}");
        assert!(c.duration_s >= 5.9, "{t}: 300 messages take 6 s");
    }
    // The loss really happened in the lab and was repaired.
    for c in [&r.kernel, &r.engine] {
        assert!(c.dropped > 0, "{}: no loss drawn: {c:?}", c.transport);
        assert!(c.retransmissions_on_wire > 0, "{}", c.transport);
    }
    assert!(r.engine.srtt_ms.is_some() && r.kernel.srtt_ms.is_none());
    assert_eq!(r.ratios.len(), 5);
    for q in &r.ratios {
        if let Some(x) = q.ratio {
            assert!(x.is_finite() && x >= 0.0, "{q:?}");
            assert_eq!(q.within_20pct, (x - 1.0).abs() <= 0.2, "{q:?}");
        }
    }
    let mut csv = Vec::new();
    r.write_csv(&mut csv, true).unwrap();
    let text = String::from_utf8(csv).unwrap();
    // Header + 300 rows per column.
    assert_eq!(text.lines().count(), 1 + 3 * 300);
    assert!(!hollywood_lab::topology::Lab::exists(&format!("{lab}-k")));
    assert!(!hollywood_lab::topology::Lab::exists(&format!("{lab}-e")));
}

#[test]
fn bulk_with_bbr_on_both_transports_completes_and_is_reported() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(
            "bulk calibration needs root (network namespaces, TUN devices)",
        );
        return;
    }
    // A short transfer (10 MB at 50 Mb/s, under 2 s each): both complete
    // intact; the goodput ratio is reported (the 20 % goal is checked on
    // the full 50 MB run by `hollywood calibrate --bulk`, see docs/LAB.md).
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = format!("{LAB_PREFIX}-{}-cbl", std::process::id());
    let mut spec = calibrate::BulkSpec::new(&lab);
    spec.bytes = 10_000_000;
    let r = calibrate::bulk(&spec).unwrap_or_else(|e| panic!("bulk: {e}"));
    eprintln!("{}", r.to_text());
    for run in [&r.kernel, &r.engine] {
        assert_eq!(run.error, None, "{run:?}");
        assert_eq!(run.bytes, 10_000_000, "{run:?}");
        assert_eq!(run.cc, "bbr");
        // Over half the link even with the start-up phase in a short run.
        assert!(run.link_utilisation > 0.5, "{run:?}");
    }
    let x = r.ratio.ratio.expect("kernel goodput > 0");
    assert_eq!(r.ratio.within_20pct, (x - 1.0).abs() <= 0.2);
}
