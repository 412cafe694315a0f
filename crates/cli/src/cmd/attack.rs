//! `hollywood attack`: the attack lab (root). Each attack from a third
//! namespace, against our engine on its TUN and against Linux, side by
//! side. See `hollywood_lab::attack` and docs/ATTACKS.md.

use crate::units::parse_duration;
use clap::Args;
use hollywood_lab::attack::{self, AttackSpec, Kind};
use std::time::Duration;

/// Arguments of `hollywood attack`.
#[derive(Args, Debug)]
pub struct AttackArgs {
    /// rst-in-window | rst-blind | syn-in-window | data-inject |
    /// ack-injection | syn-flood | zero-window | sack-reneging | all |
    /// none (the workload alone); several separated by commas.
    #[arg(long, default_value = "all")]
    kind: String,
    /// Round-trip time of the emulated path between client and victim.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    rtt: Duration,
    /// Messages the client sends (and the victim echoes).
    #[arg(long, default_value_t = 750)]
    messages: u32,
    /// Interval between messages.
    #[arg(long, default_value = "4ms", value_parser = parse_duration)]
    interval: Duration,
    /// When the attack starts, after the first message.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    attack_at: Duration,
    /// Seed of the emulator and of the attacker's random numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON list, one object per attack.
    #[arg(long)]
    json: bool,
}

/// Run the command.
pub fn run(a: AttackArgs) -> Result<(), String> {
    let mut kinds = Vec::new();
    for k in a.kind.split(',') {
        if k == "all" {
            kinds.extend(Kind::ALL);
        } else {
            kinds.push(Kind::parse(k).ok_or_else(|| {
                format!(
                    "unknown --kind {k:?}: use {}, all or none",
                    Kind::ALL.map(Kind::name).join(", ")
                )
            })?);
        }
    }
    if a.messages == 0 || a.interval.is_zero() {
        return Err("--messages must be at least 1 and --interval positive".into());
    }
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    attack::remove_stale_labs();
    let mut spec = AttackSpec::new(&format!("{}-{}", attack::LAB_PREFIX, std::process::id()));
    spec.rtt = a.rtt;
    spec.messages = a.messages;
    spec.interval = a.interval;
    spec.attack_at = a.attack_at;
    spec.seed = a.seed;
    let json = a.json;
    let rows = attack::run_all(&kinds, &spec, |r| {
        if !json {
            eprintln!(
                "{:<14} engine: {}\n{:<14} linux:  {}",
                r.kind.name(),
                r.engine_outcome,
                "",
                r.linux_outcome
            );
        }
    })
    .map_err(|e| e.to_string())?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", attack::table(&rows));
    }
    if rows.iter().any(|r| r.engine_worse_than_linux) {
        return Err("an attack did more harm to the engine than to Linux".into());
    }
    Ok(())
}
