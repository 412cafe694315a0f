//! `lab dash` (issue 33, "DASH on real packets"): the simulator's DASH
//! client and server ([DASHing-2018]: HTTP/1.1 on Hollywood messages,
//! pipelining with Rx_T, BOLA) play a short video over TCP and TCP
//! Hollywood across the lab — our engine on TUN at both ends, the
//! emulator running the simulator's link model — and the figures are sane
//! (root only: namespaces, TUN, the emulator).
//!
//! Path of the point, 5 Mb/s, 100 ms RTT, 1 % loss server to
//! client, with a 12-chunk (12 s) synthetic ladder so that both sessions
//! take about half a minute.
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::interop::LAB_PREFIX;
use hollywood_media::dash::client::ClientConfig;
use hollywood_media::dash::content::Content;
use hollywood_media::dash::{DashRun, DashScenario, Phase};
use hollywood_media::stream::Transport;
use hollywood_media::GenericTransport;
use hollywood_tcp::CcAlgorithm;
use std::sync::Arc;
use std::time::Duration;

const CHUNKS: usize = 12;

/// The session over `t` with the client of [DASHing-2018]'s Algorithm 1
/// (TCP) or 2 (Hollywood).
fn scenario(t: Transport, client: ClientConfig) -> DashScenario {
    DashScenario {
        transport: GenericTransport::Tcp(t),
        client,
        content: Arc::new(
            Content::dashing(CHUNKS, Duration::from_secs(1), 0.1, 1).expect("ladder"),
        ),
        phases: vec![Phase {
            at: Duration::ZERO,
            rate_bps: 5_000_000,
            rtt: Duration::from_millis(100),
            loss: 0.01,
        }],
        queue_bytes: None,
        cc: CcAlgorithm::Cubic,
        seed: 1,
        pcap: None,
    }
}

/// A whole session that makes sense: played to the end, every chunk
/// fetched, nothing corrupt, figures inside what the ladder and the
/// path allow.
fn sane(r: &DashRun, sc: &DashScenario) {
    let c = &r.client;
    let tag = r.transport;
    assert_eq!(c.error, None, "{tag}");
    assert!(c.ended_s.is_some(), "{tag}: playback never ended");
    assert_eq!(c.chunks.len(), CHUNKS, "{tag}");
    for ch in &c.chunks {
        assert!(
            ch.downloaded_s.is_some(),
            "{tag}: chunk {} never came",
            ch.n
        );
        assert!(ch.received <= ch.size, "{tag}: chunk {}", ch.n);
    }
    assert_eq!(c.corrupt_messages, 0, "{tag}");
    let startup = c.startup_s.expect("start-up");
    // At least the handshake, the manifest and one chunk (three RTTs).
    assert!((0.3..5.0).contains(&startup), "{tag}: start-up {startup} s");
    assert!(
        c.total_stall_s < 10.0,
        "{tag}: stalled {} s",
        c.total_stall_s
    );
    let rates = sc.content.reps.iter().map(|r| r.bandwidth_bps as f64 / 1e3);
    let lowest = rates.clone().fold(f64::INFINITY, f64::min);
    let highest = rates.fold(0.0, f64::max);
    assert!(
        (lowest..=highest).contains(&c.avg_bitrate_kbps),
        "{tag}: {} kb/s outside the ladder {lowest}..{highest}",
        c.avg_bitrate_kbps
    );
    // Real time: the whole video played, and not much more.
    assert!(
        (CHUNKS as f64..CHUNKS as f64 + 15.0).contains(&r.sim_seconds),
        "{tag}: {} s",
        r.sim_seconds
    );
    assert!(
        r.server.requests > CHUNKS as u64,
        "{tag}: manifest and chunks"
    );
    assert!(
        r.server.body_bytes >= c.chunks.iter().map(|ch| ch.size).sum::<u64>(),
        "{tag}: served less than the chunks' sizes"
    );
    // 1 % loss on several thousand data segments.
    assert!(r.retransmitted_segments > 0, "{tag}: no retransmission");
}

#[test]
fn dash_plays_over_tcp_and_hollywood_on_real_packets() {
    if !hollywood_io::is_root() {
        let why = "needs root (network namespaces, TUN devices, the emulator)";
        return hollywood_test_support::skip(&format!("lab dash {why}"));
    }
    let sessions = [
        ("tcp", Transport::Tcp, ClientConfig::algorithm1()),
        ("hw", Transport::Hollywood, ClientConfig::algorithm2()),
    ];
    for (tag, t, client) in sessions {
        let sc = scenario(t, client);
        let lab = format!("{LAB_PREFIX}-{}-dash-{tag}", std::process::id());
        let r = hollywood_lab::dash::run(&sc, &lab).unwrap_or_else(|e| panic!("{tag}: {e}"));
        eprintln!(
            "{}: start-up {:?} s, stall {:.2} s, {:.0} kb/s, {} retransmitted",
            r.transport,
            r.client.startup_s,
            r.client.total_stall_s,
            r.client.avg_bitrate_kbps,
            r.retransmitted_segments
        );
        sane(&r, &sc);
    }
}
