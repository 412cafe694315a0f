//! QUICsilver on the wire (issue 10): in the scenario, the
//! decrypted capture shows no retransmission of a message after its
//! deadline — counted from the pcap (tshark with the TLS secrets), not
//! from the sender's counters — while quic-pps, which retransmits
//! everything, does retransmit expired messages (so the check can fail).
//! Needs tshark (scripts/test.sh installs it as root); skips with a
//! printed reason otherwise.
//!
//! The scenario is 8 Mb/s, 100 ms RTT, 1 % loss, 1200-byte
//! messages every 16.7 ms with a 120 ms lifetime (1500 messages here).

use hollywood_lab::quicwire::{self, Retransmission};
use hollywood_media::{GenericTransport, MessagesRun, MessagesScenario};
use hollywood_sim::LossModel;
use std::time::Duration;

fn tshark_present(test: &str) -> bool {
    let ok = std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        hollywood_test_support::skip(&format!("{test} needs tshark (Debian package tshark)"));
    }
    ok
}

/// The scenario (1500 messages) over `transport`, captured and
/// decrypted: the run and the wire's retransmissions of the sender.
fn run(transport: &str, lifetime_ms: u64) -> (MessagesRun, Vec<Retransmission>) {
    // Removed when dropped, also when an assertion fails.
    let tmp = tempfile::Builder::new()
        .prefix(&format!("hw-quicwire-{transport}-{lifetime_ms}-"))
        .tempdir()
        .expect("a temporary directory");
    let dir = tmp.path();
    let (pcap, keylog) = (dir.join("run.pcap"), dir.join("run.keys"));
    let sc = MessagesScenario {
        rate_bps: 8_000_000,
        uplink_bps: 8_000_000,
        rtt: Duration::from_millis(100),
        loss: LossModel::Bernoulli(0.01),
        count: 1500,
        size: 1200,
        interval: Duration::from_micros(16_700),
        lifetime: Some(Duration::from_millis(lifetime_ms)),
        seed: 1,
        transport: GenericTransport::parse(transport).expect("transport name"),
        pcap: Some(pcap.clone()),
        keylog: Some(keylog.clone()),
        ..MessagesScenario::default()
    };
    let r = sc.run().expect("simulation");
    let frames = quicwire::stream_frames(&pcap, &keylog).expect("tshark decrypts the capture");
    assert!(
        frames.len() as u64 >= r.on_time.on_time,
        "{transport}: decrypted {} STREAM frames",
        frames.len()
    );
    let (rtx, streams) = quicwire::retransmissions(&frames, "10.0.0.1".parse().unwrap());
    // Every message's stream was seen and named by its record.
    assert!(streams.len() as u64 >= r.on_time.on_time);
    (r, rtx)
}

/// Retransmissions sent after their message's deadline.
fn after_deadline(r: &MessagesRun, rtx: &[Retransmission]) -> usize {
    let lifetime = r.scenario.lifetime.unwrap();
    rtx.iter()
        .filter(|x| {
            let m = x.message.expect("retransmitted stream names its message") as usize;
            let deadline = r.generated[m].unwrap() + lifetime;
            x.frame.time > deadline.since_epoch()
        })
        .count()
}

#[test]
fn quicsilver_never_retransmits_an_expired_message_on_the_wire() {
    if !tshark_present("quicsilver_never_retransmits_an_expired_message_on_the_wire") {
        return;
    }
    let (qs, qs_rtx) = run("quicsilver", 120);
    let (pps, pps_rtx) = run("quic-pps", 120);
    // With time for a repair (lifetime 400 ms, four RTTs), QUICsilver
    // does retransmit — still never after a deadline.
    let (long, long_rtx) = run("quicsilver", 400);
    let (qs_late, pps_late) = (after_deadline(&qs, &qs_rtx), after_deadline(&pps, &pps_rtx));
    eprintln!(
        "retransmitted STREAM frames on the wire: quicsilver {} ({} after the deadline, {} streams reset), quic-pps {} ({} after the deadline)",
        qs_rtx.len(),
        qs_late,
        qs.transport.sender.streams_reset,
        pps_rtx.len(),
        pps_late
    );
    assert_eq!(qs_late, 0, "quicsilver retransmitted an expired message");
    assert!(
        pps_late > 0,
        "quic-pps retransmits expired messages (the check has teeth)"
    );
    assert!(qs.transport.sender.streams_reset > 0);
    let long_late = after_deadline(&long, &long_rtx);
    eprintln!(
        "quicsilver, lifetime 400 ms: {} retransmitted STREAM frames ({} after the deadline), {} on time of {} (oracle)",
        long_rtx.len(),
        long_late,
        long.on_time.on_time,
        long.on_time.oracle_on_time
    );
    assert!(
        !long_rtx.is_empty(),
        "quicsilver repairs what can still make it"
    );
    assert_eq!(long_late, 0);
}
