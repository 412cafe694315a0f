//! FEC on real packets beside SRT's FEC filter (issue 34; root only:
//! namespaces, the emulator; needs `srt-live-transmit` from Debian's
//! srt-tools).
//!
//! The path, shortened to 1500 messages (7.5 s each run): 300 ms
//! RTT, 2 % Bernoulli loss on the data direction, 8 Mb/s, 1316-byte
//! messages every 5 ms (2.1 Mb/s), deadline 200 ms. No retransmission can
//! arrive in time. UDP under the FEC layer at its default 25 % bound must
//! deliver at least 99 % on time, spending at most the bound on repair;
//! SRT with its XOR row filter at the same budget (`cols:4,rows:1`,
//! `arq:never`, latency by the comparison's rule: 200 − 150 − 15 = 35 ms)
//! runs on the same path, and Hollywood must not do worse than it (a
//! margin of 0.2 % of the stream for the emulator's independent loss
//! draws in the two runs).
// A test of an adapter: real threads, clocks and processes.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::compare::{self, CompareSpec, Contender};
use hollywood_lab::interop::LAB_PREFIX;
use hollywood_media::{GenericTransport, MessagesScenario};
use hollywood_sim::LossModel;
use std::time::Duration;

const MESSAGES: u32 = 1500;

#[test]
fn fec_over_udp_beats_the_deadline_and_srt_fec_at_the_same_budget() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, the emulator)");
        return;
    }
    if !hollywood_test_support::have_tool("srt-live-transmit", "-version") {
        hollywood_test_support::skip(
            "needs srt-live-transmit (Debian srt-tools; scripts/test.sh installs it as root)",
        );
        return;
    }
    let pid = std::process::id();
    let sc = MessagesScenario {
        rate_bps: 8_000_000,
        uplink_bps: 8_000_000,
        rtt: Duration::from_millis(300),
        loss: LossModel::Bernoulli(0.02),
        count: MESSAGES,
        size: 1316,
        interval: Duration::from_millis(5),
        lifetime: Some(Duration::from_millis(200)),
        seed: 1,
        transport: GenericTransport::Udp,
        fec: Some(hollywood_fec::FecConfig::default()),
        ..MessagesScenario::default()
    };
    let run = hollywood_lab::messages::run(&sc, &format!("{LAB_PREFIX}-{pid}-fec"))
        .unwrap_or_else(|e| panic!("udp+fec: {e}"));
    assert_eq!(run.error, None);
    let (tx, rx) = run.fec.expect("FEC counters");
    let on_time = run.on_time.on_time;
    let enc = tx.encoder;
    let overhead = enc.repair_bytes as f64 / enc.protected_bytes.max(1) as f64;
    eprintln!(
        "udp+fec: on time {on_time} of {MESSAGES}, oracle {}, overhead {:.1} %, rebuilt {}",
        run.on_time.oracle_on_time,
        overhead * 100.0,
        rx.decoder.rebuilt
    );
    assert!(
        overhead <= 0.25 + 1e-9,
        "repair {:.2} % of the protected bytes, above the 25 % bound",
        overhead * 100.0
    );
    assert!(rx.decoder.rebuilt > 0, "nothing rebuilt at 2 % loss");
    assert!(
        on_time as f64 >= 0.99 * f64::from(MESSAGES),
        "UDP + FEC: {on_time} of {MESSAGES} on time, below 99 %"
    );

    let spec = CompareSpec {
        rtt: sc.rtt,
        loss: 0.02,
        rate_bps: sc.rate_bps,
        messages: MESSAGES,
        size: sc.size,
        interval: sc.interval,
        deadline: Duration::from_millis(200),
        contenders: vec![Contender::Srt],
        srt_filter: Some("fec,cols:4,rows:1,arq:never".into()),
        ..CompareSpec::live_video(&format!("{LAB_PREFIX}-{pid}-srtfec"))
    };
    let rows = compare::run(&spec, |_| {}).expect("srt run");
    let srt = &rows[0];
    eprintln!("{}", compare::table(&rows));
    assert_eq!(srt.error, None);
    assert_eq!(
        srt.bad_deliveries, 0,
        "SRT delivered corrupt or duplicate chunks"
    );
    assert!(srt.dropped_by_emulator > 0, "the emulator dropped nothing");
    // SRT ran and delivered most of the stream: its filter is in use.
    assert!(
        srt.on_time as f64 >= 0.9 * f64::from(MESSAGES),
        "SRT: {} on time",
        srt.on_time
    );
    assert!(
        on_time + 3 >= srt.on_time,
        "Hollywood + FEC {on_time} on time, SRT + FEC {}",
        srt.on_time
    );
}
