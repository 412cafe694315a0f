//! Thesis chapter 6's three DASH architectures in the simulator, at a
//! fixed encoding rate (no adaptation), frame by frame (REFERENCES.md thesis ch. 6, setup and
//! architectures):
//!
//! - **Request-response** ([`Arch::RequestResponse`], §6.1, over standard
//!   TCP): one request per chunk; a chunk plays only once all of it is in
//!   (eq. 6.2), the buffer is one chunk (T_buffer = T_chunk) and the next
//!   chunk is requested when the current one starts playing (eq. 6.3).
//! - **Progressive** ([`Arch::Push`], §6.2, over standard TCP): 1 s chunks,
//!   the server pushes every frame as its own message (RFC 9113 §8.4 server
//!   push: PUSH_PROMISE, HEADERS and DATA of one frame) as soon as the
//!   chunk is requested; the client buffers `n` frames before it starts and
//!   plays frame by frame.
//! - **Progressive over TCP Hollywood** ([`Arch::Hollywood`], §6.3): the
//!   same, one TCP Hollywood message per frame, delivered as it completes.
//!
//! A frame missing at its time **stalls** playback until it arrives (TCP:
//! the stall is cumulative, every later frame is *delayed*), or, over TCP
//! Hollywood, is **skipped**: playback goes on with the next frame at its
//! original time and the missing one is discarded if it comes later
//! (§6.3: no drift). Metrics: total stall, delayed-frame duration (frames
//! played after their original time, × 1/fps; the final offset of eq. 6.18
//! is the total stall), skip duration.
//!
//! The wire is HTTP/2 ([`h2`](super::h2), docs/DASH.md "HTTP/2 on the wire"): the
//! client's preface and SETTINGS (push enabled for the progressive
//! architectures), one HEADERS frame per request; per pushed frame one
//! message holding its PUSH_PROMISE, HEADERS and DATA; per
//! request-response chunk HEADERS and DATA on the request stream. Header
//! blocks are stateless, so each message decodes alone in any order.
//!
//! Frame sizes (ours; the thesis encoded Big Buck Bunny): a chunk of F
//! frames carries `R_encoding × F / fps` bytes times a per-chunk
//! complexity factor (log-normal, σ = 0.1), one I-frame `iframe_ratio`
//! times the size of each of its F − 1 P-frames (the average bit-rate
//! kept, the thesis's Fig. 6.3 policy).
//!
//! The files: `video` the video model (frame sizes) and the resources'
//! bytes and paths, `server` the HTTP/2 server ([`FrameServer`]), `client`
//! the client and its playback ([`FrameClient`]); this module the
//! architectures and one session ([`Ch6Scenario`]).

mod client;
mod server;
#[cfg(test)]
mod tests;
mod video;

pub use client::{FrameClient, FrameReport};
pub use server::FrameServer;
pub use video::{message_overhead, FrameVideo};

use super::{build_path, retransmitted, Phase};
use crate::stream::Transport;
use hollywood_sim::TransportHost;
use hollywood_tcp::{CcAlgorithm, Instant};
use hollywood_transport::OutMessage;
use serde::Serialize;
use std::time::Duration;

/// The three architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arch {
    /// §6.1: a request per chunk, whole chunks.
    RequestResponse,
    /// §6.2: progressive, every frame pushed, over standard TCP.
    Push,
    /// §6.3: progressive over TCP Hollywood, skip instead of stall.
    Hollywood,
}

impl Arch {
    /// Parse `request-response`, `push` or `hollywood`.
    pub fn parse(s: &str) -> Result<Arch, String> {
        match s {
            "request-response" => Ok(Arch::RequestResponse),
            "push" => Ok(Arch::Push),
            "hollywood" => Ok(Arch::Hollywood),
            _ => Err(format!(
                "unknown architecture {s:?}: use request-response, push or hollywood"
            )),
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::RequestResponse => "request-response",
            Arch::Push => "push",
            Arch::Hollywood => "hollywood",
        }
    }

    /// The transport the thesis runs it over.
    pub fn transport(self) -> Transport {
        match self {
            Arch::Hollywood => Transport::Hollywood,
            _ => Transport::Tcp,
        }
    }
}

/// One chapter 6 session.
#[derive(Debug, Clone)]
pub struct Ch6Scenario {
    /// Architecture (its transport follows: [`Arch::transport`]).
    pub arch: Arch,
    /// The video.
    pub video: std::sync::Arc<FrameVideo>,
    /// Progressive: frames buffered before playback (request-response:
    /// ignored, the buffer is a chunk).
    pub buffer_frames: u32,
    /// The path.
    pub phases: Vec<Phase>,
    /// Congestion control at both ends.
    pub cc: CcAlgorithm,
    /// Seed.
    pub seed: u64,
    /// [`Arch::Hollywood`]: frames carry the lifetime of their playout
    /// deadline ([`FrameServer::with_lifetimes`]); else every frame is
    /// reliable.
    pub lifetimes: bool,
    /// Write every packet (both directions, at link ingress) here.
    pub pcap: Option<std::path::PathBuf>,
}

/// What a session measured.
#[derive(Debug, Clone, Serialize)]
pub struct Ch6Run {
    /// Architecture.
    pub arch: Arch,
    /// The client's figures.
    pub report: FrameReport,
    /// Segments the server retransmitted.
    pub retransmitted_segments: u64,
    /// Simulated seconds.
    pub sim_seconds: f64,
    /// Playback had not ended by the time limit; the report's figures are
    /// then lower bounds (a stall going on is counted up to the limit).
    pub timed_out: bool,
    /// Frames the server dropped before sending (past their deadline).
    pub dropped_frames: u64,
    /// Messages the sender's engine dropped as expired before sending
    /// (thesis §4.2).
    pub expired_unsent: u64,
    /// Retransmission slots the sender's engine rewrote with live data
    /// (inconsistent retransmissions, thesis §4.2).
    pub rewritten_slots: u64,
    /// The sender engine's Hollywood counters.
    #[serde(skip)]
    pub hollywood: hollywood_tcp::HollywoodStats,
}

impl Ch6Scenario {
    /// Play the whole video (time limit: three times its length plus ten
    /// minutes; see [`Ch6Run::timed_out`]).
    pub fn run(&self) -> Result<Ch6Run, String> {
        if self.arch != Arch::RequestResponse && self.buffer_frames == 0 {
            return Err("a progressive client needs a buffer of at least one frame".into());
        }
        let length =
            Duration::from_secs_f64(self.video.frames() as f64 / f64::from(self.video.fps));
        let (mut sim, server, client) = build_path(
            &crate::transport::GenericTransport::Tcp(self.arch.transport()),
            self.cc,
            &self.phases,
            None,
            self.seed,
            FrameServer::new(self.video.clone())
                .with_lifetimes(self.lifetimes && self.arch == Arch::Hollywood),
            FrameClient::new(self.arch, &self.video, self.buffer_frames),
        )?;
        if let Some(p) = &self.pcap {
            sim.capture_pcap_file(p, hollywood_sim::CaptureFilter::default())
                .map_err(|e| format!("cannot write pcap {}: {e}", p.display()))?;
        }
        let limit = Instant::ZERO + length * 3 + Duration::from_secs(600);
        while sim.now() < limit {
            sim.run_for(Duration::from_secs(1))
                .map_err(|e| e.to_string())?;
            if sim
                .node_mut::<TransportHost<FrameClient>>(client)
                .expect("client")
                .app()
                .finished()
            {
                break;
            }
        }
        let now = sim.now();
        sim.finish_captures().map_err(|e| format!("pcap: {e}"))?;
        let s = sim
            .node_mut::<TransportHost<FrameServer>>(server)
            .expect("server");
        if let Some(e) = &s.app().error {
            return Err(format!("server: {e}"));
        }
        let retransmitted_segments = retransmitted(s.transport());
        let dropped_frames = s.app().dropped_frames;
        let h = s
            .transport()
            .as_any()
            .downcast_ref::<hollywood_transport::tcp::TcpTransport>()
            .map(|t| t.details().hollywood)
            .unwrap_or_default();
        let mut report = sim
            .node_mut::<TransportHost<FrameClient>>(client)
            .expect("client")
            .app()
            .report_at(now);
        let timed_out = report.ended_s.is_none() && report.error.is_none();
        if timed_out {
            report.error = Some(format!(
                "playback had not ended after {:.0} s",
                now.since_epoch().as_secs_f64()
            ));
        }
        Ok(Ch6Run {
            arch: self.arch,
            report,
            retransmitted_segments,
            sim_seconds: now.since_epoch().as_secs_f64(),
            timed_out,
            dropped_frames,
            expired_unsent: h.not_sent,
            rewritten_slots: h.ir_sent + h.replaced_at_first_tx,
            hollywood: h,
        })
    }
}
