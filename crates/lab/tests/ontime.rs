//! On-time delivery on real packets (issue 9): the interop command of the
//! issue, exactly, upholds every invariant in all four combinations; and
//! with BBR at both ends our engine is on time at least as often as Linux
//! BBR → Linux (within 1 % of the messages), and 1.5 times as often as Linux CUBIC (root only).
//!
//! Path: 80 ms RTT, 3 % loss on the data direction; 1500 messages of
//! 700 B every 4 ms (1.4 Mb/s) with a 100 ms lifetime; seed 5. One run
//! takes about 7 s; the tests hold a lock, as the other lab tests do. The
//! live-video comparison (SRT, Linux, our engine, UDP) takes about 50 s.
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::interop::{self, End, InteropReport, InteropSpec};
use hollywood_tcp::CcAlgorithm;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Two runs on real packets are compared with this tolerance, a share of
/// the messages (1 %): each run's timing varies with the machine. Spread
/// measured on the live-video path over five 3000-chunk runs (docs/LAB.md):
/// engine BBR 2991–2999 on time, Linux BBR 2780–2981 (92.7–99.4 %), so the
/// two can meet within a point; on the interop path engine BBR led Linux BBR
/// by 260 of 1500 (docs/LAB.md, "Interop").
fn within_tolerance_of(ours: u64, theirs: u64, messages: u64) -> bool {
    ours * 100 + messages >= theirs * 100
}

/// `hollywood interop --rtt 80ms --loss 3% --messages 1500 --lifetime
/// 100ms --size 700 --interval 4ms --seed 5` for one combination.
fn run(
    tag: &str,
    sender: End,
    receiver: End,
    engine: CcAlgorithm,
    kernel: Option<&str>,
) -> InteropReport {
    let lab = format!("{}-{}-{tag}", interop::LAB_PREFIX, std::process::id());
    let mut spec = InteropSpec::new(sender, receiver, &lab);
    spec.rtt = Duration::from_millis(80);
    spec.loss = 0.03;
    spec.messages = 1500;
    spec.lifetime = Duration::from_millis(100);
    spec.size = 700;
    spec.interval = Duration::from_millis(4);
    spec.seed = 5;
    spec.engine_cc = engine;
    spec.kernel_cc = kernel.map(str::to_owned);
    let r = interop::run(&spec).unwrap_or_else(|e| panic!("{tag}: {e}"));
    eprintln!("{}", r.to_text());
    r
}

fn root(test: &str) -> bool {
    if hollywood_io::is_root() {
        true
    } else {
        hollywood_test_support::skip(&format!(
            "{test} needs root (network namespaces, TUN devices, tshark)"
        ));
        false
    }
}

#[test]
fn the_issue_command_upholds_every_invariant_in_all_four_combinations() {
    if !root("the_issue_command_upholds_every_invariant") {
        return;
    }
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // As typed in the issue: engine CUBIC (the default), kernel default.
    let reports: Vec<InteropReport> = interop::MATRIX
        .iter()
        .map(|&(s, r)| {
            let tag = format!("i{}{}", &s.name()[..1], &r.name()[..1]);
            run(&tag, s, r, CcAlgorithm::Cubic, None)
        })
        .collect();
    eprintln!("{}", interop::table(&reports));
    for r in &reports {
        let what = format!("{} → {}", r.sender.name(), r.receiver.name());
        assert!(r.violations().is_empty(), "{what}: {:?}", r.violations());
        if r.sender == End::Engine {
            // Never send what is known to be useless.
            assert_eq!(r.expired_but_delivered, 0, "{what}: {r:?}");
        }
    }
}

#[test]
fn engine_bbr_is_on_time_at_least_as_often_as_linux_bbr_and_far_more_than_cubic() {
    if !root("engine_bbr_is_on_time_at_least_as_often_as_linux_bbr") {
        return;
    }
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let engine = run(
        "bee",
        End::Engine,
        End::Engine,
        CcAlgorithm::Bbr,
        Some("bbr"),
    );
    let linux_bbr = run(
        "bkk",
        End::Kernel,
        End::Kernel,
        CcAlgorithm::Bbr,
        Some("bbr"),
    );
    let linux_cubic = run(
        "ckk",
        End::Kernel,
        End::Kernel,
        CcAlgorithm::Cubic,
        Some("cubic"),
    );
    eprintln!(
        "{}",
        interop::table(&[engine.clone(), linux_bbr.clone(), linux_cubic.clone()])
    );
    for r in [&engine, &linux_bbr, &linux_cubic] {
        assert!(r.violations().is_empty(), "{:?}", r.violations());
    }
    assert_eq!(engine.expired_but_delivered, 0, "{engine:?}");
    assert!(
        within_tolerance_of(
            engine.on_time,
            linux_bbr.on_time,
            u64::from(engine.messages)
        ),
        "engine {} vs Linux BBR {} on time (tolerance 1 % of the messages)",
        engine.on_time,
        linux_bbr.on_time
    );
    assert!(
        engine.on_time * 2 >= linux_cubic.on_time * 3,
        "engine {} vs Linux CUBIC {} on time",
        engine.on_time,
        linux_cubic.on_time
    );
    // The oracle bounds what is reachable without repairing losses in
    // time (a 100 ms lifetime on an 80 ms RTT leaves no room for it).
    assert!(
        engine.on_time * 100 >= engine.oracle_on_time * 97,
        "{engine:?}"
    );
}

/// The issue's live-video path (`hollywood compare`: 10 Mb/s, 100 ms RTT,
/// 2 % loss, 1316-byte chunks every 5 ms, 180 ms deadline), 1500 chunks
/// (7.5 s of stream) so the test stays short: SRT, Linux BBR and CUBIC,
/// our engine with BBR and UDP on the same emulated path. Our engine with
/// BBR is on time at least as often as Linux BBR (within 1 % of the
/// chunks) and for at least 99 % of
/// the chunks (the issue's target; measured 2999 of 3000 over the full
/// 3000), nothing is delivered corrupt or twice.
#[test]
fn live_video_path_engine_bbr_is_on_time_for_99_percent() {
    if !root("live_video_path_engine_bbr_is_on_time_for_99_percent") {
        return;
    }
    if std::process::Command::new("srt-live-transmit")
        .arg("-version")
        .output()
        .is_err()
    {
        hollywood_test_support::skip(
            "live_video_path_engine_bbr_is_on_time needs srt-live-transmit (srt-tools)",
        );
        return;
    }
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    use hollywood_lab::compare::{self, CompareSpec, Contender};
    let mut spec = CompareSpec::live_video(&format!("hwcmp-{}", std::process::id()));
    spec.messages = 1500;
    spec.contenders = vec![
        Contender::Srt,
        Contender::Linux("bbr".into()),
        Contender::Linux("cubic".into()),
        Contender::Engine(CcAlgorithm::Bbr),
        Contender::Udp,
    ];
    let rows = compare::run(&spec, |p| eprintln!("{p}")).expect("compare runs");
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.transport == name)
            .unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    };
    for r in &rows {
        eprintln!(
            "{:12} on time {:5} (oracle {:5}) late {:5} never {:5} p99 {:7.1} ms {:?}",
            r.transport,
            r.on_time,
            r.oracle_on_time,
            r.late,
            r.never_arrived,
            r.delay_p99_ms,
            r.error
        );
        assert_eq!(r.bad_deliveries, 0, "{r:?}");
    }
    let engine = row("engine-bbr");
    assert_eq!(engine.error, None, "{engine:?}");
    assert!(engine.on_time * 100 >= engine.messages * 99, "{engine:?}");
    assert!(
        within_tolerance_of(engine.on_time, row("linux-bbr").on_time, engine.messages),
        "engine BBR against Linux BBR, tolerance 1 % of the messages: {rows:?}"
    );
    assert!(engine.on_time > row("linux-cubic").on_time, "{rows:?}");
}
