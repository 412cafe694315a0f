//! Experiments as data: a plan (TOML under `scenarios/`) names parameters,
//! sweeps, seeds and the seed documents' claims; an [`run::Adapter`] runs
//! one configuration of an application; the [`run`] module runs every
//! configuration × seed in parallel, aggregates ([`stats`]), checks the
//! claims ([`claims`]) and writes `summary.json` (with a [`schema`]),
//! `summary.md`, `README.md`, CSV and a card that [`report`] gathers into
//! one `index.html`. Plots ([`plot`]) and command-line quantities
//! ([`units`]) are shared with the CLI.
//!
//! Reproductions: [`ch5`] (thesis chapter 5, the VoIP application) and
//! [`video`] (live video: [QUICsilver] and [RTP-QUIC]) and [`vod`] (video on
//! demand over TCP, deadline TCP and TCP Hollywood: [TCP-video]), [`dash2018`]
//! (MPEG-DASH: [DASHing]) and [`ch6`] (thesis chapter 6's DASH
//! architectures). The
//! built-in plans are listed in [`builtin`].

// The sans-IO lint (clippy.toml) holds here too: the runner's threads are
// rayon's, and the three wall-clock reads (how long a run or a reproduction
// took, reported beside the results) are allowed where they stand.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod builtin;
pub mod ch5;
pub mod ch6;
pub mod claims;
pub mod dash;
pub mod dash2018;
mod dash2018_video;
pub mod dash_quality;
pub mod media;
pub mod plan;
pub mod plot;
pub mod report;
pub mod run;
pub mod schema;
pub mod stats;
pub mod units;
pub mod video;
pub mod vod;
pub mod voip;
