//! One thesis-chapter-6 session's fixed parameters, written once: the
//! options of `hollywood dash-ch6` (clap) and the keys of a `ch6` plan
//! (serde) are this struct, with the same units parsing
//! ([`crate::units`]); [`Ch6Params::video`] and [`Ch6Params::scenario`]
//! are the one place a synthetic [`FrameVideo`] and a [`Ch6Scenario`] are
//! built from them.
//!
//! Not in it, because each side has its own form: what a run sweeps
//! (the command line takes lists of architectures, encodings and RTTs
//! and runs every combination; a plan gives one of each per point and
//! its runner sweeps), the buffer (the command line's `--chunk-frames`
//! and `--buffer-frames`; a plan's one `frames`, which is both), and
//! whether Hollywood frames carry lifetimes (`--reliable`; `lifetimes`).
//!
//! The two sides keep the defaults they had: the command line's loss is
//! 0.2 % (thesis ch. 6's lossy case), and a plan must name `loss`.

use crate::units::{de, parse_duration, parse_fraction, parse_rate, Spelling};
use hollywood_media::dash::progressive::{Arch, Ch6Scenario, FrameVideo};
use hollywood_media::dash::Phase;
use hollywood_tcp::CcAlgorithm;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// The defaults, as a user writes them (thesis §6.4: a 30 Mb/s
/// bottleneck, 180 s of 60 fps video, CUBIC).
pub mod default {
    /// Bottleneck rate.
    pub const RATE: &str = "30mbit";
    /// Session length.
    pub const DURATION: &str = "180s";
    /// Frames per second.
    pub const FPS: &str = "60";
    /// I-frame size over a P-frame's (synthetic video; ours).
    pub const IFRAME_RATIO: &str = "5";
    /// Spread of the synthetic frame sizes.
    pub const SPREAD: &str = "0.1";
    /// Seed of the synthetic frame sizes.
    pub const CONTENT_SEED: &str = "1";
    /// Congestion control at both ends.
    pub const CC: &str = "cubic";
    /// Loss on the command line (a plan must name it).
    pub const CLI_LOSS: &str = "0.2%";
}

/// The session's path, video and congestion control, less what a run
/// sweeps.
#[derive(clap::Args, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Ch6Params {
    /// Bottleneck rate (thesis: 30mbit).
    #[arg(long, default_value = default::RATE, value_parser = parse_rate)]
    #[serde(default = "d_rate", deserialize_with = "de::rate")]
    pub rate: u64,
    /// Random loss server to client (thesis: 0 or 0.2%; command line:
    /// 0.2 %, a plan must name it).
    #[arg(long, default_value = default::CLI_LOSS, value_parser = parse_fraction)]
    #[serde(deserialize_with = "de::fraction")]
    pub loss: f64,
    /// Session length (thesis: 180s; with a real video, the video's own).
    #[arg(long, default_value = default::DURATION, value_parser = parse_duration)]
    #[serde(default = "d_duration", deserialize_with = "de::duration")]
    pub duration: Duration,
    /// Frames per second (thesis: 60).
    #[arg(long, default_value = default::FPS)]
    #[serde(default = "d_fps")]
    pub fps: u32,
    /// I-frame size over a P-frame's (synthetic video; ours, see docs/DASH.md).
    #[arg(long, default_value = default::IFRAME_RATIO)]
    #[serde(default = "d_iframe_ratio")]
    pub iframe_ratio: f64,
    /// Spread of the synthetic frame sizes around their mean, 0 to 1.
    #[arg(long, default_value = default::SPREAD)]
    #[serde(default = "d_spread")]
    pub spread: f64,
    /// Seed of the synthetic frame sizes.
    #[arg(long, default_value = default::CONTENT_SEED)]
    #[serde(default = "d_content_seed")]
    pub content_seed: u64,
    /// Congestion control at both ends.
    #[arg(long, default_value = default::CC, value_parser = CcAlgorithm::parse)]
    #[serde(default = "d_cc", deserialize_with = "de::cc")]
    pub cc: CcAlgorithm,
}

impl Ch6Params {
    /// Why these parameters make no session, if they do not.
    pub fn validate(&self, names: Spelling) -> Result<(), String> {
        let f = names.prefix();
        if !(0.0..0.5).contains(&self.loss) {
            return Err(format!("{f}loss {} %: use 0 to 50 %", self.loss * 100.0));
        }
        if !(self.spread.is_finite() && (0.0..=1.0).contains(&self.spread)) {
            return Err(format!("{f}spread {}: use 0 to 1", self.spread));
        }
        Ok(())
    }

    /// Frames per chunk: request-response's chunk is its buffer (eq. 6.2),
    /// `frames`; progressive streaming uses 1 s chunks (§6.2).
    pub fn chunk_frames(&self, arch: Arch, frames: u32) -> u32 {
        match arch {
            Arch::RequestResponse => frames,
            _ => self.fps,
        }
    }

    /// The synthetic video at `encoding_bps` in chunks of `chunk_frames`.
    pub fn video(&self, encoding_bps: u64, chunk_frames: u32) -> Result<FrameVideo, String> {
        FrameVideo::new(
            encoding_bps,
            self.fps,
            chunk_frames,
            self.duration,
            self.iframe_ratio,
            self.spread,
            self.content_seed,
        )
    }

    /// The static path: the bottleneck at `rtt` with the loss.
    pub fn phases(&self, rtt: Duration) -> Vec<Phase> {
        crate::dash::sessions::static_path(self.rate, rtt, self.loss)
    }

    /// One session: `video` over `arch` at `rtt`, `buffer_frames` before
    /// playback (progressive), with or without lifetimes.
    pub fn scenario(
        &self,
        arch: Arch,
        video: Arc<FrameVideo>,
        buffer_frames: u32,
        rtt: Duration,
        seed: u64,
        lifetimes: bool,
    ) -> Ch6Scenario {
        Ch6Scenario {
            arch,
            video,
            buffer_frames,
            phases: self.phases(rtt),
            cc: self.cc,
            seed,
            lifetimes,
            pcap: None,
        }
    }
}

de::text_defaults! {
    d_rate: u64 = parse_rate[default::RATE];
    d_duration: Duration = parse_duration[default::DURATION];
    d_fps: u32 = de::number[default::FPS];
    d_iframe_ratio: f64 = de::number[default::IFRAME_RATIO];
    d_spread: f64 = de::number[default::SPREAD];
    d_content_seed: u64 = de::number[default::CONTENT_SEED];
    d_cc: CcAlgorithm = CcAlgorithm::parse[default::CC];
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        p: Ch6Params,
    }

    #[test]
    fn the_cli_and_a_plan_build_the_same_session_where_their_defaults_agree() {
        // They differ in loss (0.2 % against none): given it, the defaults
        // make the same video and session.
        let cli = Cli::try_parse_from(["x"]).unwrap().p;
        let plan: Ch6Params = toml::from_str("loss = \"0.2%\"").unwrap();
        assert_eq!(cli, plan);
        let rtt = Duration::from_millis(25);
        let v =
            |p: &Ch6Params| Arc::new(p.video(12_000_000, p.chunk_frames(Arch::Push, 30)).unwrap());
        let (a, b) = (
            cli.scenario(Arch::Push, v(&cli), 10, rtt, 1, true),
            plan.scenario(Arch::Push, v(&plan), 10, rtt, 1, true),
        );
        assert_eq!(a.video.frames(), 180 * 60);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    #[test]
    fn a_plan_must_name_loss_and_bad_values_are_refused_by_name() {
        let e = toml::from_str::<Ch6Params>("").unwrap_err().to_string();
        assert!(e.contains("loss"), "{e}");
        let e = toml::from_str::<Ch6Params>("loss = \"1%\"\nfsp = 30")
            .unwrap_err()
            .to_string();
        assert!(e.contains("fsp"), "{e}");
        let p: Ch6Params = toml::from_str("loss = \"60%\"").unwrap();
        let e = p.validate(Spelling::Plan).unwrap_err();
        assert!(e.starts_with("loss 60"), "{e}");
        let p = Cli::try_parse_from(["x", "--spread", "2"]).unwrap().p;
        let e = p.validate(Spelling::Cli).unwrap_err();
        assert!(e.starts_with("--spread 2"), "{e}");
        assert_eq!(p.chunk_frames(Arch::RequestResponse, 12), 12);
        assert_eq!(p.chunk_frames(Arch::Hollywood, 12), 60);
    }
}
