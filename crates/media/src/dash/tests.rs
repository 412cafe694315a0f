use super::client::ClientConfig;
use super::content::Content;
use super::*;
use crate::stream::Transport;
use hollywood_tcp::Instant;
use hollywood_transport::{
    InMessage, MessageTransport, OutMessage, SendError, TransportEvent, TransportStats,
};

/// A transport that takes every message and delivers nothing.
#[derive(Default)]
pub(crate) struct Sink(pub Vec<OutMessage>);

impl MessageTransport for Sink {
    fn name(&self) -> &'static str {
        "sink"
    }
    fn start(&mut self, _now: Instant) {}
    fn handle_packet(&mut self, _now: Instant, _packet: &[u8]) {}
    fn handle_timeout(&mut self, _now: Instant) {}
    fn poll_transmit(&mut self, _now: Instant) -> Option<Vec<u8>> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn send(&mut self, _now: Instant, msg: OutMessage) -> Result<(), SendError> {
        self.0.push(msg);
        Ok(())
    }
    fn poll_event(&mut self) -> Option<TransportEvent> {
        None
    }
    fn close(&mut self, _now: Instant) {}
    fn stats(&self) -> TransportStats {
        TransportStats::default()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

pub(crate) fn msg(substream: u16, payload: Vec<u8>) -> TransportEvent {
    TransportEvent::Message(InMessage {
        id: 0,
        substream,
        payload,
        arrival: Instant::ZERO,
        received: Instant::ZERO,
    })
}

fn scenario(
    t: Transport,
    secs: usize,
    rate: u64,
    rtt_ms: u64,
    loss: f64,
    seed: u64,
) -> DashScenario {
    DashScenario {
        transport: GenericTransport::Tcp(t),
        client: if t == Transport::Tcp {
            ClientConfig::algorithm1()
        } else {
            ClientConfig::algorithm2()
        },
        content: Arc::new(Content::dashing(secs, Duration::from_secs(1), 0.1, 1).unwrap()),
        phases: vec![Phase {
            at: Duration::ZERO,
            rate_bps: rate,
            rtt: Duration::from_millis(rtt_ms),
            loss,
        }],
        queue_bytes: None,
        cc: CcAlgorithm::Cubic,
        seed,
        pcap: None,
    }
}

fn consistent(r: &DashRun) {
    let c = &r.client;
    assert_eq!(c.error, None, "{}", r.transport);
    assert_eq!(c.corrupt_messages, 0);
    assert!(c.ended_s.is_some());
    for ch in &c.chunks {
        assert!(ch.downloaded_s.is_some(), "chunk {} never counted", ch.n);
        assert!(ch.received <= ch.size);
        assert!(ch.requested_s <= ch.downloaded_s.unwrap());
    }
    let late: u64 = c.chunks.iter().map(|ch| u64::from(ch.late_messages)).sum();
    assert_eq!(late, c.messages_discarded);
    // Every stall is inside the session and after start-up.
    let start = c.startup_s.unwrap();
    for s in &c.stall_intervals {
        assert!(s.0 >= start && s.1 >= s.0 && s.1 <= c.ended_s.unwrap());
    }
    // Playback takes the video's length plus the stalls.
    let played = c.ended_s.unwrap() - start - c.total_stall_s;
    assert!(
        (played - c.chunks.len() as f64).abs() < 1e-6,
        "played {played}"
    );
}

#[test]
fn a_clean_fast_path_plays_without_stalls_at_a_high_rate() {
    for t in [Transport::Tcp, Transport::Hollywood] {
        let r = scenario(t, 40, 20_000_000, 40, 0.0, 1).run().unwrap();
        consistent(&r);
        let c = &r.client;
        assert_eq!(c.chunks.len(), 40);
        assert_eq!(c.total_stall_s, 0.0, "{t:?}");
        assert_eq!(c.messages_discarded, 0);
        assert_eq!(c.bytes_missing, 0);
        assert!(c.startup_s.unwrap() < 2.0, "{:?}", c.startup_s);
        assert!(c.avg_bitrate_kbps > 3000.0, "{t:?}: {}", c.avg_bitrate_kbps);
        // Each body was served once.
        let bodies: u64 = c.chunks.iter().map(|ch| ch.size).sum();
        let mpd = r.server.body_bytes - bodies;
        assert!(mpd > 500 && mpd < 5000, "manifest of {mpd} bytes");
        assert_eq!(r.server.requests, 41);
    }
}

#[test]
fn standard_tcp_never_discards_and_hollywood_pipelines() {
    let tcp = scenario(Transport::Tcp, 60, 5_000_000, 300, 0.01, 3)
        .run()
        .unwrap();
    consistent(&tcp);
    assert_eq!(tcp.client.messages_discarded, 0);
    assert_eq!(tcp.client.bytes_missing, 0);
    // Algorithm 1: each request after the previous chunk is complete.
    for w in tcp.client.chunks.windows(2) {
        assert!(w[1].requested_s >= w[0].complete_s.unwrap());
    }
    let hw = scenario(Transport::Hollywood, 60, 5_000_000, 300, 0.01, 3)
        .run()
        .unwrap();
    consistent(&hw);
    assert!(hw.retransmitted_segments > 0);
    // Algorithm 2: requests leave before the previous chunk is whole.
    let early = hw
        .client
        .chunks
        .windows(2)
        .filter(|w| w[0].complete_s.is_some_and(|c| w[1].requested_s < c))
        .count();
    assert!(early > 30, "{early} pipelined requests");
}

#[test]
fn a_path_below_the_lowest_rate_stalls_and_stays_at_the_bottom() {
    let r = scenario(Transport::Hollywood, 30, 1_000_000, 50, 0.0, 1)
        .run()
        .unwrap();
    consistent(&r);
    assert!(r.client.total_stall_s > 5.0, "{}", r.client.total_stall_s);
    assert!(r.client.chunks.iter().skip(1).all(|c| c.quality == 0));
}

#[test]
fn bad_scenarios_are_refused() {
    let mut s = scenario(Transport::Tcp, 5, 5_000_000, 100, 0.0, 1);
    s.phases.clear();
    assert!(s.run().is_err());
    let mut s = scenario(Transport::Tcp, 5, 5_000_000, 100, 0.6, 1);
    assert!(s.run().is_err());
    s.phases[0].loss = 0.0;
    s.transport = GenericTransport::Tcp(Transport::Deadline);
    assert!(s.run().is_err());
    let mut s = scenario(Transport::Tcp, 5, 5_000_000, 100, 0.0, 1);
    s.client.rx_threshold = 0.0;
    assert!(s.run().is_err());
}

#[test]
fn a_varying_profile_changes_the_path_mid_session() {
    let mut s = scenario(Transport::Hollywood, 60, 8_000_000, 40, 0.0, 1);
    s.phases.push(Phase {
        at: Duration::from_secs(30),
        rate_bps: 1_500_000,
        rtt: Duration::from_millis(40),
        loss: 0.0,
    });
    let r = s.run().unwrap();
    consistent(&r);
    let c = &r.client;
    let early: f64 = c.chunks[15..25]
        .iter()
        .map(|c| c.bitrate_bps as f64)
        .sum::<f64>()
        / 10.0;
    let late: f64 = c.chunks[50..]
        .iter()
        .map(|c| c.bitrate_bps as f64)
        .sum::<f64>()
        / 10.0;
    assert!(early > 2.0 * late, "{early} then {late}");
}

#[test]
fn a_whole_segment_player_discards_what_a_message_level_buffer_still_plays() {
    use super::client::Lateness;
    let mut s = scenario(Transport::Hollywood, 90, 5_000_000, 200, 0.008, 4);
    let position = s.run().unwrap();
    consistent(&position);
    s.client.lateness = Lateness::ChunkStart;
    let chunk = s.run().unwrap();
    consistent(&chunk);
    assert!(chunk.client.stalls > 0);
    assert!(
        chunk.client.messages_discarded > position.client.messages_discarded,
        "{} vs {}",
        chunk.client.messages_discarded,
        position.client.messages_discarded
    );
    // Discarded messages leave their chunks short.
    for c in chunk.client.chunks.iter().filter(|c| c.late_messages > 0) {
        assert!(c.received < c.size, "chunk {}", c.n);
        assert!(
            c.size - c.received >= u64::from(c.late_messages),
            "chunk {}",
            c.n
        );
    }
}

#[test]
fn quic_mappings_carry_the_same_session() {
    // One stream in order (Algorithm 1), a stream per response as HTTP/3
    // and a stream per message (Algorithm 2), over a lossy path.
    for (name, pipelined) in [("quic-ss", false), ("quic-gop", true), ("quic-pps", true)] {
        let mut s = scenario(Transport::Tcp, 30, 5_000_000, 100, 0.01, 2);
        s.transport = dash_quic(name).unwrap();
        s.client = if pipelined {
            ClientConfig::algorithm2()
        } else {
            ClientConfig::algorithm1()
        };
        let r = s.run().unwrap();
        consistent(&r);
        assert_eq!(r.transport, name);
        let c = &r.client;
        assert_eq!(c.chunks.len(), 30, "{name}");
        assert_eq!(c.bytes_missing, 0, "{name}: every message is reliable");
        assert!(
            c.avg_bitrate_kbps > 1000.0,
            "{name}: {}",
            c.avg_bitrate_kbps
        );
        assert_eq!(r.server.requests, 31, "{name}");
    }
    assert!(dash_quic("quic-dgram").is_none());
    assert!(dash_quic("quicsilver").is_none());
    let mut s = scenario(Transport::Tcp, 5, 5_000_000, 100, 0.0, 1);
    s.transport = GenericTransport::Udp;
    assert!(s.run().unwrap_err().contains("reliable"));
}
