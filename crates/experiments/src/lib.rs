//! Experiments as data: a plan (TOML under `scenarios/`) names parameters,
//! sweeps, seeds and the seed documents' claims; an [`run::Adapter`] runs
//! one configuration of an application; the [`run`] module runs every
//! configuration × seed in parallel, aggregates ([`stats`]), checks the
//! claims ([`claims`]) and writes `summary.json` (with a [`schema`]),
//! `summary.md`, `README.md`, CSV and a card that [`report`] gathers into
//! one `index.html`. Plots ([`plot`]) and command-line quantities
//! ([`units`]) are shared with the CLI.
//!
//! Modules are named after the adapters they hold (`adapter = "…"` in a
//! plan): [`voip`] (thesis chapter 5, `scenarios/ch5*.toml`; its
//! [`voip::report`] is also `hollywood voip` and `demo`), [`video`] (live
//! video: [QUICsilver-2019] and [RTP-QUIC]), [`vod`] (video on demand over TCP,
//! deadline TCP and TCP Hollywood: [TCP-video]), [`dash`] (MPEG-DASH:
//! [DASHing-2018]; [`dash::sessions`] also runs `hollywood dash`, and
//! [`dash::quality`] scores real video) and [`ch6`] (thesis chapter 6's DASH
//! architectures) and [`fecarq`] (FEC against retransmission against both
//! over a grid of round trips and losses, issue 34). The built-in plans are
//! listed in [`builtin`].

// The sans-IO lint (clippy.toml) holds here too: the runner's threads are
// rayon's, and the three wall-clock reads (how long a run or a reproduction
// took, reported beside the results) are allowed where they stand.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod builtin;
pub mod ch6;
pub mod claims;
pub mod dash;
pub mod fecarq;
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
