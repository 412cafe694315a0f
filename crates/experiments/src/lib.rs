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
//! [`video`] (live video: seeds 002 and 004) and [`vod`] (video on
//! demand over TCP, deadline TCP and TCP Hollywood: seed 003), [`dash2018`]
//! (MPEG-DASH: seed 001) and [`ch6`] (thesis chapter 6's DASH
//! architectures). The
//! built-in plans are listed in [`builtin`].

// An adapter crate: the runner uses threads (rayon) and the wall clock (to
// report how long a reproduction took); the simulations it runs do not.
#![allow(clippy::disallowed_methods)]
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
