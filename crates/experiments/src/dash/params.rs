//! One DASH session's parameters, written once: the session options of
//! `hollywood dash` (clap) and the session keys of a `dash` plan (serde)
//! are this struct, with the same units parsing ([`crate::units`]), and
//! [`DashParams::session`] is the one place a [`Session`] is built from
//! them.
//!
//! Not in it, because each side has its own: the path (the command line
//! takes one static path; a plan a static path or a `profile` of phases),
//! the video directory, the transports and seeds, and the queue (only the
//! command line sets one).
//!
//! The two sides keep the defaults they had: a synthetic video is 600 s
//! on the command line and 597 s (the length of [DASHing-2018]'s Big Buck
//! Bunny) in a plan. Everything else has one default, written once in
//! [`default`].

use super::sessions::Session;
use crate::units::{de, parse_duration, parse_fraction, Spelling};
use hollywood_media::dash::abr::AbrKind;
use hollywood_media::dash::client::Lateness;
use hollywood_media::dash::content::Content;
use hollywood_media::dash::Phase;
use hollywood_tcp::CcAlgorithm;
use serde::{Deserialize, Deserializer};
use std::sync::Arc;
use std::time::Duration;

/// The defaults, as a user writes them ([DASHing-2018]: 1 s chunks, a
/// 16 s buffer, BOLA, CUBIC).
pub mod default {
    /// Chunk duration.
    pub const CHUNK: &str = "1s";
    /// Playout buffer B.
    pub const BUFFER: &str = "16s";
    /// Rate adaptation.
    pub const ABR: &str = "bola";
    /// When a Hollywood message is late.
    pub const LATE: &str = "position";
    /// Congestion control at both ends.
    pub const CC: &str = "cubic";
    /// Seed of the synthetic video's chunk sizes.
    pub const CONTENT_SEED: &str = "1";
    /// Length of a synthetic video on the command line.
    pub const CLI_DURATION: &str = "600s";
    /// Length of a synthetic video where a plan names none.
    pub const PLAN_DURATION: &str = "597s";
}

/// A session's video length, player and congestion control.
#[derive(clap::Args, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DashParams {
    /// Length of the synthetic video (whole chunks; a real one has its
    /// own): 600 s on the command line, 597 s in a plan.
    #[arg(long, value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de::opt_duration")]
    pub duration: Option<Duration>,
    /// Chunk duration.
    #[arg(long, default_value = default::CHUNK, value_parser = parse_duration)]
    #[serde(default = "d_chunk", deserialize_with = "de::duration")]
    pub chunk: Duration,
    /// Playout buffer B ([DASHing-2018]: 16 s).
    #[arg(long, default_value = default::BUFFER, value_parser = parse_duration)]
    #[serde(default = "d_buffer", deserialize_with = "de::duration")]
    pub buffer: Duration,
    /// Rate adaptation: bola (dash.js) or throughput.
    #[arg(long, default_value = default::ABR, value_parser = AbrKind::parse)]
    #[serde(default = "d_abr", deserialize_with = "de_abr")]
    pub abr: AbrKind,
    /// Hollywood's receive threshold Rx_T ([DASHing-2018]: 0.9).
    #[arg(long, value_parser = parse_fraction)]
    #[serde(default)]
    pub rx_threshold: Option<f64>,
    /// When a Hollywood message is late: position (the playhead reached
    /// its bytes; the [DASHing-2018] message-level playout buffer) or chunk-start
    /// (its chunk started playing; a whole-segment player).
    #[arg(long, default_value = default::LATE, value_parser = Lateness::parse)]
    #[serde(default = "d_late", deserialize_with = "de_late")]
    pub late: Lateness,
    /// Congestion control at both ends: cubic ([DASHing-2018]), bbr or newreno.
    #[arg(long, default_value = default::CC, value_parser = CcAlgorithm::parse)]
    #[serde(default = "d_cc", deserialize_with = "de::cc")]
    pub cc: CcAlgorithm,
    /// Seed of the synthetic video's chunk sizes.
    #[arg(long, default_value = default::CONTENT_SEED)]
    #[serde(default = "d_content_seed")]
    pub content_seed: u64,
}

impl DashParams {
    /// The synthetic video's length: `duration`, or the side's default.
    pub fn length(&self, names: Spelling) -> Duration {
        self.duration.unwrap_or_else(|| {
            de::parsed(
                match names {
                    Spelling::Cli => default::CLI_DURATION,
                    Spelling::Plan => default::PLAN_DURATION,
                },
                parse_duration,
            )
        })
    }

    /// The [DASHing-2018] synthetic ladder, `length` rounded to whole chunks.
    pub fn synthetic(&self, names: Spelling) -> Result<Content, String> {
        let chunks = (self.length(names).as_secs_f64() / self.chunk.as_secs_f64()).round() as usize;
        Content::dashing(
            chunks,
            self.chunk,
            Content::DEFAULT_SPREAD,
            self.content_seed,
        )
    }

    /// The session: `content` over the path `phases`, with a bottleneck
    /// queue of `queue_bytes` (`None`: one BDP, at least 64 KiB).
    pub fn session(
        &self,
        content: Content,
        phases: Vec<Phase>,
        queue_bytes: Option<usize>,
    ) -> Session {
        Session {
            content: Arc::new(content),
            phases,
            queue_bytes,
            cc: self.cc,
            buffer_s: self.buffer.as_secs_f64(),
            abr: self.abr,
            rx_threshold: self.rx_threshold,
            lateness: self.late,
        }
    }
}

de::text_defaults! {
    d_chunk: Duration = parse_duration[default::CHUNK];
    d_buffer: Duration = parse_duration[default::BUFFER];
    d_abr: AbrKind = AbrKind::parse[default::ABR];
    d_late: Lateness = Lateness::parse[default::LATE];
    d_cc: CcAlgorithm = CcAlgorithm::parse[default::CC];
    d_content_seed: u64 = de::number[default::CONTENT_SEED];
}

fn de_abr<'de, D: Deserializer<'de>>(d: D) -> Result<AbrKind, D::Error> {
    de::with(d, AbrKind::parse)
}
fn de_late<'de, D: Deserializer<'de>>(d: D) -> Result<Lateness, D::Error> {
    de::with(d, Lateness::parse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        p: DashParams,
    }

    #[test]
    fn the_cli_and_a_plan_build_the_same_session_where_their_defaults_agree() {
        // They differ in the synthetic video's length (600 s against
        // 597 s): given it, the defaults make the same session.
        let cli = Cli::try_parse_from(["x", "--duration", "30s"]).unwrap().p;
        let plan: DashParams = toml::from_str("duration = \"30s\"").unwrap();
        assert_eq!(cli, plan);
        let path = super::super::sessions::static_path(5_000_000, Duration::from_millis(100), 0.01);
        let (a, b) = (
            cli.session(cli.synthetic(Spelling::Cli).unwrap(), path.clone(), None),
            plan.session(plan.synthetic(Spelling::Plan).unwrap(), path, None),
        );
        assert_eq!(a.content.chunks(), 30);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    #[test]
    fn each_side_keeps_its_own_default_length() {
        let cli = Cli::try_parse_from(["x"]).unwrap().p;
        let plan: DashParams = toml::from_str("").unwrap();
        assert_eq!(cli.synthetic(Spelling::Cli).unwrap().chunks(), 600);
        assert_eq!(plan.synthetic(Spelling::Plan).unwrap().chunks(), 597);
        assert_eq!(cli.cc, CcAlgorithm::Cubic);
        assert_eq!(plan.abr, AbrKind::parse("bola").unwrap());
        assert_eq!(plan.late, Lateness::parse("position").unwrap());
    }

    #[test]
    fn bad_keys_and_units_are_refused_by_name() {
        let e = toml::from_str::<DashParams>("chunck = \"1s\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("chunck"), "{e}");
        let e = toml::from_str::<DashParams>("buffer = \"16 parsecs\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("buffer"), "{e}");
        let e = toml::from_str::<DashParams>("abr = \"fastest\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("fastest"), "{e}");
        assert!(Cli::try_parse_from(["x", "--late", "never"]).is_err());
    }
}
