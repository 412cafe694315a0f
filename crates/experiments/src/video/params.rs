//! One live stream's parameters, written once: the options of `hollywood
//! sim video` (clap) and the keys of a `video` plan (serde) are this
//! struct, with the same units parsing ([`crate::units`]), and
//! [`VideoParams::scenario`] is the one place a [`VideoScenario`] is built
//! from them.
//!
//! The two sides keep the defaults they had: where a plan omits `loss` the
//! stream is lossless (the command line's default is 1 %), and a plan must
//! name `one_way` (the command line's default is 50 ms). Everything else has
//! one default, written once in [`default`].

use super::{parse_player, parse_reference, parse_resume};
use crate::units::{
    de, parse_cross, parse_duration, parse_loss_model, parse_rate, parse_size, Spelling,
};
use hollywood_media::video::{OnMissing, Reference, Resume, VideoScenario, VideoSource};
use hollywood_media::{CrossTraffic, GenericTransport, MessagesScenario};
use hollywood_sim::LossModel;
use hollywood_tcp::{CcAlgorithm, Config};
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// The defaults, as a user writes them (the [QUICsilver-2019] stream: 60 fps,
/// an I-frame of 4 packets every 10 frames, P-frames of one packet, a
/// 4-frame buffer).
pub mod default {
    /// Frames per second.
    pub const FPS: &str = "60";
    /// Frames per GOP.
    pub const GOP: &str = "10";
    /// Packets per I-frame.
    pub const IFRAME_PACKETS: &str = "4";
    /// Packets per P-frame.
    pub const PFRAME_PACKETS: &str = "1";
    /// Decodable with this fraction of a frame's packets missing.
    pub const REDUNDANCY: &str = "0";
    /// Payload bytes per packet.
    pub const SIZE: &str = "1232";
    /// Playout buffer, frames.
    pub const BUFFER: &str = "4";
    /// Player: by transport.
    pub const PLAYER: &str = "auto";
    /// After a stall.
    pub const RESUME: &str = "catch-up";
    /// Link rate, each direction.
    pub const RATE: &str = "100mbit";
    /// Drop-tail queue per link.
    pub const QUEUE: &str = "1000000";
    /// Congestion control.
    pub const CC: &str = "bbr";
    /// Length of a synthetic stream.
    pub const DURATION: &str = "300s";
    /// Length of a real-video stream (command line only: raw frames go to
    /// disk).
    pub const DURATION_REAL: &str = "30s";
    /// One-way delay on the command line (a plan must name it).
    pub const CLI_ONE_WAY: &str = "50ms";
    /// Loss on the command line.
    pub const CLI_LOSS: &str = "1%";
    /// Loss where a plan names none.
    pub const PLAN_LOSS: &str = "0";
}

/// The largest packet payload: one packet.
pub const MAX_SIZE: u64 = 1400;

/// `--player` / `player`: `auto` (`None`: by transport), `stall` or `skip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Player(pub Option<OnMissing>);

fn parse_player_arg(s: &str) -> Result<Player, String> {
    parse_player(s).map(Player)
}

/// A stream's source, path and player (not the transport, the seed or
/// where results go: a plan sweeps those, the CLI takes them apart; nor a
/// real video's encoding, which only the CLI has).
#[derive(clap::Args, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VideoParams {
    /// Frames per second.
    #[arg(long, default_value = default::FPS)]
    #[serde(default = "d_fps")]
    pub fps: f64,
    /// An I-frame every this many frames.
    #[arg(long, default_value = default::GOP)]
    #[serde(default = "d_gop")]
    pub gop: u32,
    /// Packets per I-frame (sent back to back).
    #[arg(long, default_value = default::IFRAME_PACKETS)]
    #[serde(default = "d_iframe_packets")]
    pub iframe_packets: u32,
    /// Packets per P-frame (the fewest, with --pframe-packets-max).
    #[arg(long, default_value = default::PFRAME_PACKETS)]
    #[serde(default = "d_pframe_packets")]
    pub pframe_packets: u32,
    /// VBR: each P-frame has between --pframe-packets and this many
    /// packets, uniformly, the same stream every run ([RTP-QUIC]: 9-11);
    /// none or 0 = CBR.
    #[arg(long)]
    #[serde(default)]
    pub pframe_packets_max: Option<u32>,
    /// The fraction of a frame's packets it may miss and still decode
    /// (the [RTP-QUIC] decoder: redundant NAL units); 0 = every packet needed.
    #[arg(long, default_value = default::REDUNDANCY)]
    #[serde(default = "d_redundancy")]
    pub redundancy: f64,
    /// Payload bytes per packet (at most 1400: one packet).
    #[arg(long, default_value = default::SIZE, value_parser = parse_size)]
    #[serde(default = "d_size", deserialize_with = "de::size")]
    pub size: u64,
    /// What a P-frame references: gop (its I-frame, [QUICsilver-2019]; the default
    /// for the synthetic source) or previous (always, for real H.264).
    /// In a plan: `frame_reference`.
    #[arg(long, value_parser = parse_reference)]
    #[serde(rename = "frame_reference", default, deserialize_with = "de_reference")]
    pub reference: Option<Reference>,
    /// Playout buffer in frames ([QUICsilver-2019]: 4).
    #[arg(long, default_value = default::BUFFER)]
    #[serde(default = "d_buffer")]
    pub buffer: u32,
    /// auto (stall on one ordered reliable stream: tcp, hollywood-ir,
    /// quic-ss; skip otherwise) | stall | skip
    #[arg(long, default_value = default::PLAYER, value_parser = parse_player_arg)]
    #[serde(default = "d_player", deserialize_with = "de_player")]
    pub player: Player,
    /// After a stall: catch-up (play the held-back frames at once and return
    /// to the schedule; [QUICsilver-2019]) | shift (shift later frames by the pause).
    #[arg(long, default_value = default::RESUME, value_parser = parse_resume)]
    #[serde(default = "d_resume", deserialize_with = "de_resume")]
    pub resume: Resume,
    /// Length of the stream (default: 300 s; 30 s for real video, whose raw
    /// frames go to disk).
    #[arg(long, value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de::opt_duration")]
    pub duration: Option<Duration>,
    /// One-way propagation delay (each direction; command line: 50 ms, a
    /// plan must name it).
    #[arg(long, default_value = default::CLI_ONE_WAY, value_parser = parse_duration)]
    #[serde(deserialize_with = "de::duration")]
    pub one_way: Duration,
    /// Link rate, each direction (bit/s).
    #[arg(long, default_value = default::RATE, value_parser = parse_rate)]
    #[serde(default = "d_rate", deserialize_with = "de::rate")]
    pub rate: u64,
    /// Loss on the media path: a probability or gilbert:P,R[,BAD[,GOOD]]
    /// (command line: 1 %; a plan: 0).
    #[arg(long, default_value = default::CLI_LOSS, value_parser = parse_loss_model)]
    #[serde(default = "d_plan_loss", deserialize_with = "de::loss")]
    pub loss: LossModel,
    /// Cross traffic sharing the bottleneck ([TCP-video]), comma-separated:
    /// bulk (greedy TCP), cbr:RATE (UDP), onoff:RATE[:ON:OFF] (UDP,
    /// exponential on/off periods, default 500ms:500ms).
    #[arg(long, value_delimiter = ',', value_parser = parse_cross)]
    #[serde(default, deserialize_with = "de::cross")]
    pub cross: Vec<CrossTraffic>,
    /// Drop-tail queue per link (bytes).
    #[arg(long, default_value = default::QUEUE, value_parser = parse_size)]
    #[serde(default = "d_queue", deserialize_with = "de::size")]
    pub queue: u64,
    /// Congestion control: newreno, cubic or bbr (QUIC: quinn's). BBR by
    /// default, as Linux on this kind of machine and what a live sender
    /// needs (CUBIC's window after random losses holds back I-frames; see
    /// docs/VIDEO.md).
    #[arg(long, default_value = default::CC, value_parser = CcAlgorithm::parse)]
    #[serde(default = "d_cc", deserialize_with = "de::cc")]
    pub cc: CcAlgorithm,
}

impl VideoParams {
    /// The stream's length: `duration`, or 300 s (30 s for real video).
    pub fn length(&self, real: bool) -> Duration {
        self.duration.unwrap_or_else(|| {
            parse_duration(if real {
                default::DURATION_REAL
            } else {
                default::DURATION
            })
            .expect("default duration")
        })
    }

    /// The stream's frames; `real`: a recorded H.264 clip replaces the
    /// synthetic frames (its P-frames reference the previous frame).
    pub fn source(&self, real: bool, names: Spelling) -> Result<VideoSource, String> {
        let f = names.prefix();
        if self.size == 0 || self.size > MAX_SIZE {
            return Err(format!(
                "{f}size must be between 1 and {MAX_SIZE} bytes (one packet)"
            ));
        }
        let frames = (self.length(real).as_secs_f64() * self.fps).round();
        if !(1.0..=10_000_000.0).contains(&frames) {
            return Err(format!(
                "{f}duration × {f}fps gives {frames} frames: use between 1 and 10 000 000"
            ));
        }
        let reference = match (real, self.reference) {
            (true, Some(Reference::Gop)) => {
                return Err(format!(
                    "{f}reference gop: a real H.264 P-frame references the previous frame"
                ))
            }
            (true, _) => Reference::Previous,
            (false, r) => r.unwrap_or(Reference::Gop),
        };
        let source = VideoSource {
            fps: self.fps,
            gop: self.gop,
            iframe_packets: self.iframe_packets,
            pframe_packets: self.pframe_packets,
            pframe_packets_max: self.pframe_packets_max.unwrap_or(0),
            packet_size: self.size as usize,
            frames: frames as u32,
            reference,
        };
        source.validate()?;
        Ok(source)
    }

    /// The stream over `transport` (its congestion control set to `cc`)
    /// with `seed`, or why these parameters make none. A real video's
    /// trace and a pcap file are the caller's to add.
    pub fn scenario(
        &self,
        transport: &GenericTransport,
        seed: u64,
        real: bool,
        names: Spelling,
    ) -> Result<VideoScenario, String> {
        let source = self.source(real, names)?;
        if !(0.0..1.0).contains(&self.redundancy) {
            return Err(format!(
                "redundancy must be in [0, 1), not {}",
                self.redundancy
            ));
        }
        Ok(VideoScenario {
            source,
            path: MessagesScenario {
                rate_bps: self.rate,
                uplink_bps: self.rate,
                rtt: self.one_way * 2,
                loss: self.loss,
                queue_bytes: self.queue as usize,
                cross: self.cross.clone(),
                transport: transport.with_cc(self.cc),
                seed,
                base: Config {
                    cc: self.cc,
                    ..Config::default()
                },
                ..MessagesScenario::default()
            },
            buffer_frames: self.buffer,
            on_missing: self.player.0,
            resume: self.resume,
            trace: None,
            redundancy: self.redundancy,
        })
    }
}

de::text_defaults! {
    d_fps: f64 = de::number[default::FPS];
    d_gop: u32 = de::number[default::GOP];
    d_iframe_packets: u32 = de::number[default::IFRAME_PACKETS];
    d_pframe_packets: u32 = de::number[default::PFRAME_PACKETS];
    d_redundancy: f64 = de::number[default::REDUNDANCY];
    d_size: u64 = parse_size[default::SIZE];
    d_buffer: u32 = de::number[default::BUFFER];
    d_player: Player = parse_player_arg[default::PLAYER];
    d_resume: Resume = parse_resume[default::RESUME];
    d_rate: u64 = parse_rate[default::RATE];
    d_plan_loss: LossModel = parse_loss_model[default::PLAN_LOSS];
    d_queue: u64 = parse_size[default::QUEUE];
    d_cc: CcAlgorithm = CcAlgorithm::parse[default::CC];
}

fn de_reference<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Reference>, D::Error> {
    de::with(d, parse_reference).map(Some)
}
fn de_player<'de, D: Deserializer<'de>>(d: D) -> Result<Player, D::Error> {
    de::with(d, parse_player_arg)
}
fn de_resume<'de, D: Deserializer<'de>>(d: D) -> Result<Resume, D::Error> {
    de::with(d, parse_resume)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        p: VideoParams,
    }

    fn udp() -> GenericTransport {
        GenericTransport::parse("udp").unwrap()
    }

    #[test]
    fn the_cli_and_a_plan_build_the_same_stream_where_their_defaults_agree() {
        // They differ in loss (1 % against 0) and one_way (50 ms against
        // none): given those, the defaults make the same stream.
        let cli = Cli::try_parse_from(["x", "--loss", "0"]).unwrap().p;
        let plan: VideoParams = toml::from_str("one_way = \"50ms\"").unwrap();
        assert_eq!(cli, plan);
        let (a, b) = (
            cli.scenario(&udp(), 3, false, Spelling::Cli).unwrap(),
            plan.scenario(&udp(), 3, false, Spelling::Plan).unwrap(),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(a.source.frames, 18_000);
        assert_eq!(a.path.base.cc, CcAlgorithm::Bbr);
        let cli = Cli::try_parse_from(["x"]).unwrap().p;
        assert_eq!(cli.loss, LossModel::Bernoulli(0.01));
        assert_eq!(cli.one_way, Duration::from_millis(50));
        assert_eq!(plan.loss, parse_loss_model("0").unwrap());
        assert_ne!(plan.loss, cli.loss);

        // Units and names: `--reference` is the plan's `frame_reference`.
        let cli = Cli::try_parse_from([
            "x",
            "--one-way",
            "20ms",
            "--loss",
            "gilbert:1%,30%",
            "--reference",
            "previous",
            "--cross",
            "bulk,cbr:5mbit",
            "--pframe-packets-max",
            "3",
            "--queue",
            "64KB",
            "--player",
            "skip",
            "--duration",
            "2s",
        ])
        .unwrap()
        .p;
        let plan: VideoParams = toml::from_str(
            "one_way = \"20ms\"\nloss = \"gilbert:1%,30%\"\nframe_reference = \"previous\"\n\
             cross = [\"bulk\", \"cbr:5mbit\"]\npframe_packets_max = 3\nqueue = \"64KB\"\n\
             player = \"skip\"\nduration = \"2s\"",
        )
        .unwrap();
        assert_eq!(cli, plan);
        assert_eq!(plan.player, Player(Some(OnMissing::Skip)));
        assert_eq!(plan.queue, 64_000);
    }

    #[test]
    fn an_unknown_or_malformed_plan_key_is_refused_by_name() {
        let e = toml::from_str::<VideoParams>("one_way = \"20ms\"\nfsp = 30").unwrap_err();
        assert!(e.to_string().contains("unknown field `fsp`"), "{e}");
        let e =
            toml::from_str::<VideoParams>("one_way = \"20ms\"\nreference = \"gop\"").unwrap_err();
        assert!(e.to_string().contains("unknown field `reference`"), "{e}");
        let e = toml::from_str::<VideoParams>("one_way = \"20 parsecs\"").unwrap_err();
        assert!(e.to_string().contains("20 parsecs"), "{e}");
        let e = toml::from_str::<VideoParams>("fps = 30").unwrap_err();
        assert!(e.to_string().contains("one_way"), "{e}");
    }

    #[test]
    fn a_stream_is_checked_before_it_runs_and_names_what_is_wrong() {
        let mut p = Cli::try_parse_from(["x", "--size", "2000"]).unwrap().p;
        let e = p.scenario(&udp(), 1, false, Spelling::Cli).unwrap_err();
        assert!(e.starts_with("--size must be") && e.contains("1400"), "{e}");
        let e = p.scenario(&udp(), 1, false, Spelling::Plan).unwrap_err();
        assert!(e.starts_with("size must be"), "{e}");
        p.size = 1000;
        p.redundancy = 1.5;
        assert!(p
            .scenario(&udp(), 1, false, Spelling::Plan)
            .unwrap_err()
            .contains("redundancy"));
        p.redundancy = 0.0;
        p.reference = Some(Reference::Gop);
        assert!(p
            .source(true, Spelling::Cli)
            .unwrap_err()
            .contains("--reference gop"));
        p.reference = None;
        let real = p.source(true, Spelling::Cli).unwrap();
        assert_eq!((real.frames, real.reference), (1800, Reference::Previous));
    }
}
