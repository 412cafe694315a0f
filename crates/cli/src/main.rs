//! `hollywood`: the demo, simulations (`sim`), the real-packet lab (`lab`),
//! reproductions (`repro`), tools (`tools`), the live relay (`transmit`),
//! host mode (`host`) and DASH to a real player (`dash-server`,
//! `dash-gateway`).
//!
//! Every command that produces results prints a human summary by default and
//! one JSON object with `--json`, stamped with its schema and parameters
//! (`output`).
// The CLI is an adapter: it may read the wall clock (to report `wall_ms`).
#![allow(clippy::disallowed_methods)]
#![deny(unsafe_code)]

mod cmd;
mod output;

use hollywood_experiments::{plot, units};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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

/// The commands, in four groups (`sim`, `lab`, `repro`, `tools`) beside the
/// demo and `transmit`. The commands that moved into a group keep their old
/// top-level names as hidden aliases, and their JSON schema names
/// (`output::schema_name`).
#[derive(Subcommand)]
enum Command {
    /// The intercontinental VoIP comparison of standard TCP and TCP Hollywood.
    Demo(cmd::demo::DemoArgs),
    /// Run an application or a scenario in the deterministic network simulator.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Real packets in network namespaces (root): the lab, its link emulator and the experiments on it.
    #[command(subcommand)]
    Lab(LabGroup),
    /// Reproduce the source documents' experiments (plots, tables, README).
    #[command(subcommand)]
    Repro(cmd::repro::ReproCommand),
    /// The thesis's models and media preparation (ffmpeg).
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Relay live UDP (MPEG-TS, RTP) over Hollywood, like srt-live-transmit: `transmit udp://:5000 hollywood://HOST:PORT`.
    Transmit(cmd::transmit::TransmitArgs),
    /// A live relay: many callers on one port publish and play streams by name, fan-out with a deadline per player, chains of relays: `relay --listen 0.0.0.0:9000 --publish-token K`.
    Relay(cmd::relay::RelayArgs),
    /// Serve a DASH ladder (`tools dash-ladder`) over Hollywood (QUIC on UDP) to `dash-gateway`: `dash-server --video DIR --listen IP:4433`.
    DashServer(cmd::dash_gateway::ServerArgs),
    /// Fetch a DASH stream over Hollywood (BOLA, Rx_T pipelining) and serve it as ordinary HTTP for any player: `dash-gateway --server IP:4433`, then `ffplay http://127.0.0.1:8080/manifest.mpd`.
    DashGateway(cmd::dash_gateway::GatewayArgs),
    /// Host mode (root): the engine on this host's own network, `host up --listen 9000` … `host down`.
    #[command(subcommand)]
    Host(cmd::host::HostCommand),

    // The old top-level names of the commands moved into a group.
    #[command(hide = true)]
    Analyze(cmd::analyze::AnalyzeArgs),
    #[command(hide = true)]
    Voip(cmd::voip::VoipArgs),
    #[command(hide = true)]
    Video(cmd::video::VideoArgs),
    #[command(hide = true)]
    Dash(cmd::dash::DashArgs),
    #[command(hide = true)]
    DashCh6(cmd::dash_ch6::Ch6Args),
    #[command(hide = true)]
    DashLadder(cmd::dash_video::LadderArgs),
    #[command(hide = true)]
    DashCh6Video(cmd::dash_video::Ch6VideoArgs),
    #[command(hide = true)]
    Report(cmd::repro::ReportArgs),
    #[command(hide = true, subcommand)]
    Netem(cmd::netem::NetemCommand),
    #[command(hide = true)]
    Bench(cmd::bench::BenchArgs),
    #[command(hide = true)]
    Middlebox(cmd::middlebox::MiddleboxArgs),
    #[command(hide = true)]
    Interop(cmd::interop::InteropArgs),
    #[command(hide = true)]
    Attack(cmd::attack::AttackArgs),
    #[command(hide = true)]
    Soak(cmd::soak::SoakArgs),
    #[command(hide = true)]
    Calibrate(cmd::calibrate::CalibrateArgs),
    #[command(hide = true)]
    Compare(cmd::compare::CompareArgs),
}

#[derive(Subcommand)]
enum SimCommand {
    /// One simulated VoIP call (thesis §5.1.2): per-message playout, JSON, CSV, plot.
    Voip(cmd::voip::VoipArgs),
    /// Live video (the [QUICsilver-2019] source) over one or several transports: useful frames, stalls, discrepancy.
    Video(cmd::video::VideoArgs),
    /// MPEG-DASH ([DASHing-2018]) over TCP and TCP Hollywood: start-up, stalls, bit-rate, switches, discards.
    Dash(cmd::dash::DashArgs),
    /// Thesis ch. 6's DASH architectures (request-response, push, Hollywood) at a fixed rate: stall, delayed frames, skips.
    DashCh6(cmd::dash_ch6::Ch6Args),
    /// Send timed messages over TCP, a TCP Hollywood deployment, QUIC or UDP.
    Messages(cmd::messages::MessagesArgs),
    /// One message stream over a connection group of two paths (broadcast, backup, aggregate) through a path failure.
    Multipath(cmd::multipath::MultipathArgs),
    /// Transfer bytes one way over one simulated link and report goodput.
    Bulk(cmd::bulk::BulkArgs),
    /// Benchmark: per-message cost of the Hollywood sender vs TCP as the message count grows.
    Scaling(cmd::scaling::ScalingArgs),
    /// Many messages through loss, bursts, reordering, duplication, corruption, middleboxes and changing rates; checks that none is corrupted, duplicated or lost silently.
    Chaos(cmd::chaos::ChaosArgs),
}

#[derive(Subcommand)]
enum LabGroup {
    #[command(flatten)]
    Namespaces(cmd::lab::LabCommand),
    /// The user-space link emulator in a lab's emulator namespace.
    #[command(subcommand)]
    Netem(cmd::netem::NetemCommand),
    /// One live stream over SRT, UDP, Linux TCP (BBR, CUBIC) and TCP Hollywood: on time, in one table.
    Compare(cmd::compare::CompareArgs),
    /// ffmpeg's live stream from a host behind NAT over a long lossy path: transmit with the engine (host mode), the kernel-TCP fallback and SRT, as a user runs them.
    /// A stream through a chain of relays (default three, 40 ms and 1 % loss per hop, 200 ms end-to-end deadline), with a late joiner (root).
    RelayChain(cmd::relay_chain::RelayChainArgs),
    Internet(cmd::internet::InternetArgs),
    /// Partial deployments on real packets: engine or Linux at each end, lossy path, wire audited.
    Interop(cmd::interop::InteropArgs),
    /// Thesis §5.3's deployability experiment through a middlebox: always-inconsistent server, lossy Linux client.
    Middlebox(cmd::middlebox::MiddleboxArgs),
    /// The thesis VoIP call over the emulator: Linux TCP vs our engine (standard mode) vs the simulator.
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Benchmarks on real packets: engine over TUN vs kernel TCP, throughput and echo latency.
    Bench(cmd::bench::BenchArgs),
    /// The attack lab: RST/SYN/data/ACK injection, SYN flood, zero window, SACK reneging against the engine and Linux.
    Attack(cmd::attack::AttackArgs),
    /// A long run on real packets: engine at both ends, loss both ways; memory, stalls, every message accounted.
    Soak(cmd::soak::SoakArgs),
    /// Memory per idle connection, engine vs Linux in the same run, and the engine's memory limit at N connections.
    Idle(cmd::idle::IdleArgs),
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// The thesis's latency model (§5.1.1, §5.2.1): Table 5.1, useful playout ranges, plots.
    Analyze(cmd::analyze::AnalyzeArgs),
    /// Encode a source with ffmpeg into the [DASHing-2018] DASH ladder (MPEG-TS chunks, MPD) for `sim dash --video DIR`.
    DashLadder(cmd::dash_video::LadderArgs),
    /// Encode thesis ch. 6's fixed-rate videos (7.5/12/24/53 Mb/s, 60 fps) with ffmpeg and record every frame's size for `sim dash-ch6 --video DIR`.
    DashCh6Video(cmd::dash_video::Ch6VideoArgs),
    /// Load and measure a relay: one paced publisher, or N players in one process, each player's on-time figures as JSON.
    RelayLoad(cmd::relay_load::RelayLoadArgs),
}

fn main() -> ExitCode {
    // `hollywood … | head` ends quietly, as Unix tools do.
    hollywood_io::sys::default_sigpipe();
    // Usage errors exit with status 1 like every other error (clap's own
    // `exit` would use 2); --help and --version print to stdout and exit 0.
    let root = Cli::command();
    let parsed = root
        .clone()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((cli, matches)) => {
            output::record(&root, &matches);
            cli
        }
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Transmit(args) => cmd::transmit::run(args),
        Command::Relay(args) => cmd::relay::run(args),
        Command::DashServer(args) => cmd::dash_gateway::server(args),
        Command::DashGateway(args) => cmd::dash_gateway::gateway(args),
        Command::Host(c) => cmd::host::run(c),
        Command::Sim(SimCommand::Voip(args)) | Command::Voip(args) => cmd::voip::run(args),
        Command::Sim(SimCommand::Video(args)) | Command::Video(args) => cmd::video::run(args),
        Command::Sim(SimCommand::Dash(args)) | Command::Dash(args) => cmd::dash::run(args),
        Command::Sim(SimCommand::DashCh6(args)) | Command::DashCh6(args) => {
            cmd::dash_ch6::run(args)
        }
        Command::Sim(SimCommand::Messages(args)) => cmd::messages::run(args),
        Command::Sim(SimCommand::Multipath(args)) => cmd::multipath::run(args),
        Command::Sim(SimCommand::Bulk(args)) => cmd::bulk::run(args),
        Command::Sim(SimCommand::Scaling(args)) => cmd::scaling::run(args),
        Command::Sim(SimCommand::Chaos(args)) => cmd::chaos::run(args),
        Command::Lab(LabGroup::Namespaces(c)) => cmd::lab::run(c),
        Command::Lab(LabGroup::Netem(c)) | Command::Netem(c) => cmd::netem::run(c),
        Command::Lab(LabGroup::Compare(args)) | Command::Compare(args) => cmd::compare::run(args),
        Command::Lab(LabGroup::Internet(args)) => cmd::internet::run(args),
        Command::Lab(LabGroup::RelayChain(args)) => cmd::relay_chain::run(args),
        Command::Lab(LabGroup::Interop(args)) | Command::Interop(args) => cmd::interop::run(args),
        Command::Lab(LabGroup::Middlebox(args)) | Command::Middlebox(args) => {
            cmd::middlebox::run(args)
        }
        Command::Lab(LabGroup::Calibrate(args)) | Command::Calibrate(args) => {
            cmd::calibrate::run(args)
        }
        Command::Lab(LabGroup::Bench(args)) | Command::Bench(args) => cmd::bench::run(args),
        Command::Lab(LabGroup::Attack(args)) | Command::Attack(args) => cmd::attack::run(args),
        Command::Lab(LabGroup::Soak(args)) | Command::Soak(args) => cmd::soak::run(args),
        Command::Lab(LabGroup::Idle(args)) => cmd::idle::run(args),
        Command::Repro(cmd::repro::ReproCommand::Report(a)) | Command::Report(a) => {
            cmd::repro::report(a)
        }
        Command::Repro(c) => cmd::repro::run(c),
        Command::Tools(ToolsCommand::Analyze(args)) | Command::Analyze(args) => {
            cmd::analyze::run(args)
        }
        Command::Tools(ToolsCommand::DashLadder(args)) | Command::DashLadder(args) => {
            cmd::dash_video::ladder(args)
        }
        Command::Tools(ToolsCommand::DashCh6Video(args)) | Command::DashCh6Video(args) => {
            cmd::dash_video::ch6_video(args)
        }
        Command::Tools(ToolsCommand::RelayLoad(args)) => cmd::relay_load::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hollywood: error: {e}");
            ExitCode::FAILURE
        }
    }
}
