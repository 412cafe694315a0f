//! `hollywood`: simulations, experiments and (later) the real-packet lab.
//!
//! Every command that produces results prints a human summary by default and
//! one JSON object with `--json`.
// The CLI is an adapter: it may read the wall clock (to report `wall_ms`).
#![allow(clippy::disallowed_methods)]
#![deny(unsafe_code)]

mod cmd;
mod units;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "hollywood",
    version,
    about = "Hollywood: a deployable transport for low-latency media"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The intercontinental VoIP comparison of standard TCP and TCP Hollywood.
    Demo(cmd::demo::DemoArgs),
    /// Run a scenario in the deterministic network simulator.
    #[command(subcommand)]
    Sim(SimCommand),
}

#[derive(Subcommand)]
enum SimCommand {
    /// Transfer bytes one way over one simulated link and report goodput.
    Bulk(cmd::bulk::BulkArgs),
    /// Send timed messages over TCP or a TCP Hollywood deployment.
    Messages(cmd::messages::MessagesArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Sim(SimCommand::Bulk(args)) => cmd::bulk::run(args),
        Command::Sim(SimCommand::Messages(args)) => cmd::messages::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hollywood: error: {e}");
            ExitCode::FAILURE
        }
    }
}
