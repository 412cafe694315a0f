//! `hollywood lab idle`: memory per idle connection, engine vs Linux in the
//! same run, and the engine's memory limit at N connections (root). See
//! `hollywood_lab::idle` and docs/ROBUSTNESS.md ("Memory per connection").

use clap::Args;
use hollywood_lab::idle::{self, IdleSpec};

/// Arguments of `hollywood lab idle`.
#[derive(Args, Debug)]
pub struct IdleArgs {
    /// Connections each run opens.
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Bytes each connection echoes once before going idle.
    #[arg(long, default_value_t = 100)]
    payload: usize,
    /// The engine's memory limit in the third run, MiB (0 = skip it).
    #[arg(long, default_value_t = 16)]
    limit_mib: usize,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// Run the command.
pub fn run(a: IdleArgs) -> Result<(), String> {
    if a.connections < 200 || a.payload == 0 {
        return Err("--connections must be at least 200 and --payload positive".into());
    }
    if !hollywood_io::is_root() {
        return Err(hollywood_lab::topology::LabError::NotRoot.to_string());
    }
    idle::remove_stale_labs();
    let mut spec = IdleSpec::new(&format!("{}-{}", idle::LAB_PREFIX, std::process::id()));
    spec.connections = a.connections;
    spec.payload = a.payload;
    spec.limit = (a.limit_mib > 0).then_some(a.limit_mib << 20);
    let json = a.json;
    let r = idle::run(&spec, |s| {
        if !json {
            eprintln!(
                "{}: {} ok, {} refused, {} failed",
                s.server, s.callers.ok, s.callers.refused, s.callers.failed
            );
        }
    })
    .map_err(|e| e.to_string())?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", idle::table(&r));
    }
    Ok(())
}
