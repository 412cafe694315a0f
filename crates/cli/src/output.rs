//! One JSON layout for every command: `--json` prints the result with
//! `schema` (`hollywood.<command path>`, version) and `params` — every
//! argument of the command as it ran, defaults included — in front (see
//! `hollywood_experiments::schema`). A list result goes under `results`.

use clap::{ArgMatches, Command};
use hollywood_experiments::schema::{Schema, Stamped};
use serde::Serialize;
use std::sync::OnceLock;

/// The command path and its arguments, recorded once by `main`.
static INVOCATION: OnceLock<(String, serde_json::Value)> = OnceLock::new();

/// The layout version of every command's JSON. Bump it for a command when a
/// field is removed or changes meaning (see docs/EXPERIMENTS.md).
pub const VERSION: u32 = 1;

/// The leaf subcommand's name path and arguments. Values are the strings
/// given on the command line (or the defaults), so they read as typed:
/// `"8mbit"`, `"70ms"`; flags are `"true"`/`"false"`; an option that may
/// take several values (repeated or delimited) is always a list; options not
/// given and without a default are `null`.
pub fn invocation(root: &Command, matches: &ArgMatches) -> (String, serde_json::Value) {
    let mut path = vec![root.get_name().to_string()];
    let mut cmd = root;
    let mut m = matches;
    while let Some((name, sub)) = m.subcommand() {
        let Some(next) = cmd.find_subcommand(name) else {
            break;
        };
        path.push(name.to_string());
        cmd = next;
        m = sub;
    }
    let mut params = serde_json::Map::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let key = arg.get_long().unwrap_or(id).to_string();
        // An option that may take several values is always a list.
        let many = matches!(arg.get_action(), clap::ArgAction::Append)
            || arg.get_value_delimiter().is_some()
            || arg.get_num_args().is_some_and(|r| r.max_values() > 1);
        let value = match m.try_get_raw(id) {
            Ok(Some(raw)) => {
                let v: Vec<serde_json::Value> = raw
                    .map(|s| serde_json::Value::String(s.to_string_lossy().into_owned()))
                    .collect();
                match <[serde_json::Value; 1]>::try_from(v) {
                    Ok([one]) if !many => one,
                    Ok([one]) => serde_json::Value::Array(vec![one]),
                    Err(list) => serde_json::Value::Array(list),
                }
            }
            Ok(None) => serde_json::Value::Null,
            Err(_) => continue,
        };
        params.insert(key, value);
    }
    (schema_name(&path), serde_json::Value::Object(params))
}

/// Commands that moved into a group (`sim`, `lab`, `repro`, `tools`) keep
/// the schema name they had at the top level, whichever spelling ran them:
/// a schema names a result's format, not how the command was typed.
const MOVED: &[(&str, &[&str])] = &[
    ("sim", &["voip", "video", "dash", "dash-ch6"]),
    (
        "lab",
        &[
            "netem",
            "compare",
            "interop",
            "middlebox",
            "calibrate",
            "bench",
            "attack",
            "soak",
        ],
    ),
    ("repro", &["report"]),
    ("tools", &["analyze", "dash-ladder", "dash-ch6-video"]),
];

/// The schema name of a command path (`hollywood`, `sim`, `voip`, …).
pub fn schema_name(path: &[String]) -> String {
    if let [root, group, command, ..] = path {
        let moved = MOVED
            .iter()
            .any(|(g, cmds)| g == group && cmds.contains(&command.as_str()));
        if moved {
            let mut p = vec![root.clone()];
            p.extend(path[2..].iter().cloned());
            return p.join(".");
        }
    }
    path.join(".")
}

/// Record the invocation (first call wins).
pub fn record(root: &Command, matches: &ArgMatches) {
    let _ = INVOCATION.set(invocation(root, matches));
}

/// `body` as pretty JSON, stamped with the recorded command's schema and
/// parameters.
pub fn json<T: Serialize + ?Sized>(body: &T) -> Result<String, String> {
    let (name, params) = INVOCATION
        .get()
        .cloned()
        .unwrap_or_else(|| ("hollywood".into(), serde_json::Value::Null));
    serde_json::to_string_pretty(&Stamped::new(Schema::new(name, VERSION), params, body))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cli() -> Command {
        Command::new("hollywood").subcommand(
            Command::new("sim").subcommand(
                Command::new("messages")
                    .arg(Arg::new("rate").long("rate").default_value("8mbit"))
                    .arg(Arg::new("cc").long("cc").action(ArgAction::Append))
                    .arg(Arg::new("pcap").long("pcap"))
                    .arg(Arg::new("json").long("json").action(ArgAction::SetTrue)),
            ),
        )
    }

    #[test]
    fn the_leaf_command_and_every_argument_are_recorded() {
        let m = cli().get_matches_from([
            "hollywood",
            "sim",
            "messages",
            "--cc",
            "bbr",
            "--cc",
            "cubic",
            "--json",
        ]);
        let one = cli().get_matches_from(["hollywood", "sim", "messages", "--cc", "bbr"]);
        assert_eq!(invocation(&cli(), &one).1["cc"], serde_json::json!(["bbr"]));
        let (name, params) = invocation(&cli(), &m);
        assert_eq!(name, "hollywood.sim.messages");
        assert_eq!(
            params,
            serde_json::json!({"rate": "8mbit", "cc": ["bbr", "cubic"], "pcap": null, "json": "true"})
        );
    }

    #[test]
    fn moved_commands_keep_their_schema_names() {
        let p = |s: &str| s.split('.').map(String::from).collect::<Vec<_>>();
        assert_eq!(schema_name(&p("hollywood.sim.voip")), "hollywood.voip");
        assert_eq!(schema_name(&p("hollywood.voip")), "hollywood.voip");
        assert_eq!(
            schema_name(&p("hollywood.sim.messages")),
            "hollywood.sim.messages"
        );
        assert_eq!(
            schema_name(&p("hollywood.lab.netem.run")),
            "hollywood.netem.run"
        );
        assert_eq!(
            schema_name(&p("hollywood.lab.status")),
            "hollywood.lab.status"
        );
        assert_eq!(
            schema_name(&p("hollywood.tools.analyze.ch6")),
            "hollywood.analyze.ch6"
        );
        assert_eq!(
            schema_name(&p("hollywood.repro.report")),
            "hollywood.report"
        );
    }
}
