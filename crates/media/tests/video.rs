//! Live video over the message transports (issue 12): the same [QUICsilver-2019]
//! stream over a reliable stream, TCP Hollywood and UDP on one lossy path.

use hollywood_media::video::{OnMissing, Resume, VideoScenario, VideoSource};
use hollywood_media::{GenericTransport, MessagesScenario};
use hollywood_sim::LossModel;
use std::time::Duration;

fn scenario(name: &str, frames: u32) -> VideoScenario {
    let g = GenericTransport::parse(name).expect("transport");
    VideoScenario {
        source: VideoSource {
            frames,
            ..VideoSource::default()
        },
        path: MessagesScenario {
            rate_bps: 100_000_000,
            uplink_bps: 100_000_000,
            rtt: Duration::from_millis(100),
            loss: LossModel::Bernoulli(0.02),
            queue_bytes: 1_000_000,
            transport: g,
            seed: 3,
            ..MessagesScenario::default()
        },
        buffer_frames: 4,
        on_missing: None,
        resume: Resume::CatchUp,
        trace: None,
        redundancy: 0.0,
    }
}

#[test]
fn a_reliable_stream_stalls_where_hollywood_and_udp_play_on() {
    // 20 s of video, 2 % loss: about 470 packets dropped.
    let tcp = scenario("tcp", 1200).run().unwrap();
    assert_eq!(tcp.on_missing, OnMissing::Stall);
    let r = tcp.report;
    assert!(r.stalls > 5, "{r:?}");
    assert_eq!(
        (r.skipped, r.played, r.useful),
        (0, 1200, 1200),
        "everything plays, late"
    );
    assert!(r.discrepancy >= Duration::from_millis(100), "{r:?}");
    // Catching up after each pause ([QUICsilver-2019]), every head-of-line event that
    // outlasts the buffer is a stall; shifting playback instead, the
    // backlog buffers against the next loss: fewer stalls than losses, and
    // less discrepancy.
    let mut shifted = scenario("tcp", 1200);
    shifted.resume = Resume::Shift;
    let shifted = shifted.run().unwrap();
    let dropped = shifted
        .messages
        .first_tx_dropped
        .iter()
        .filter(|d| **d)
        .count() as u64;
    let s = shifted.report;
    assert!(
        s.stalls > 0 && s.stalls < dropped,
        "{} stalls, {dropped} drops",
        s.stalls
    );
    assert!(
        s.stalls < r.stalls && s.discrepancy <= r.discrepancy,
        "{s:?} vs {r:?}"
    );
    assert_eq!(s.played, 1200);

    for name in ["hollywood", "udp"] {
        let run = scenario(name, 1200).run().unwrap();
        assert_eq!(run.on_missing, OnMissing::Skip);
        let r = run.report;
        assert_eq!((r.stalls, r.discrepancy), (0, Duration::ZERO), "{name}");
        // Losses cost frames (how many is the figure `hollywood video`
        // reports; here only that the accounting is sane).
        assert!(r.useful_pct() > 50.0 && r.useful < 1200, "{name}: {r:?}");
        assert!(run.messages.on_time.on_time <= run.messages.on_time.oracle_on_time);
        assert_eq!(
            run.messages.corrupt_delivered + run.messages.duplicates_delivered,
            0
        );
        // Every frame the player found whole by its deadline is useful or
        // lost its reference.
        let whole_in_time = run
            .fates
            .iter()
            .zip(&run.frames)
            .filter(|(f, t)| t.complete.is_some_and(|c| c <= f.due))
            .count() as u64;
        assert_eq!(whole_in_time, r.played, "{name}");
    }
}

#[test]
fn a_bad_source_is_refused() {
    let mut sc = scenario("udp", 10);
    sc.source.gop = 0;
    assert!(sc.run().unwrap_err().contains("gop"));
}

/// The [TCP-video] cross traffic: the stream shares a 20 Mb/s bottleneck with a
/// greedy TCP transfer, or with CBR UDP; every flow is delivered intact,
/// the cross flows get their share, and the stream's packets are delayed
/// by the queue the others build.
#[test]
fn cross_traffic_shares_the_bottleneck() {
    use hollywood_media::CrossTraffic;
    use hollywood_sim::DatagramPattern;
    let with = |name: &str, cross: Vec<CrossTraffic>| {
        let mut sc = scenario(name, 1200);
        sc.path.loss = LossModel::Bernoulli(0.0);
        sc.path.rate_bps = 20_000_000;
        sc.path.uplink_bps = 20_000_000;
        sc.path.queue_bytes = 100_000;
        sc.path.cross = cross;
        sc.run().unwrap()
    };
    let alone = with("hollywood", vec![]);
    assert!(alone.messages.cross_delivered_bytes.is_empty());
    assert_eq!(alone.report.useful, 1200);
    let worst = |r: &hollywood_media::video::VideoRun| {
        r.messages.delays_ms().into_iter().fold(0.0, f64::max)
    };
    for name in ["hollywood", "tcp", "udp"] {
        let run = with(
            name,
            vec![
                CrossTraffic::Bulk,
                CrossTraffic::Udp(DatagramPattern::Cbr {
                    rate_bps: 5_000_000,
                }),
            ],
        );
        let m = &run.messages;
        assert_eq!(m.corrupt_delivered + m.duplicates_delivered, 0, "{name}");
        let secs = m.sim_time.as_secs_f64();
        let (bulk, cbr) = (m.cross_delivered_bytes[0], m.cross_delivered_bytes[1]);
        // The bulk flow takes most of what is left (20 - 5 - 0.8 Mb/s).
        assert!(
            bulk as f64 * 8.0 / secs > 5e6,
            "{name}: bulk {bulk} B in {secs} s"
        );
        assert!(
            cbr as f64 * 8.0 / secs > 3e6,
            "{name}: cbr {cbr} B in {secs} s"
        );
        // The queue the bulk flow keeps full delays the stream.
        assert!(worst(&run) > worst(&alone) + 10.0, "{name}");
    }
    // Cross traffic is refused with a middlebox.
    let mut sc = scenario("tcp", 10);
    sc.path.cross = vec![CrossTraffic::Bulk];
    sc.path.middlebox = hollywood_sim::MiddleboxKind::Cache;
    assert!(sc.run().unwrap_err().contains("cross traffic"));
}
