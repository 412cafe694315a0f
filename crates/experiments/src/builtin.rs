//! The reproductions built into the binary: every plan under `scenarios/`
//! (as it was when the binary was built) and the adapters that run them.

use crate::plan::{Plan, PlanError};
use crate::run::{self, Done, Options};

/// A plan shipped with Hollywood.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The plan's name (also its file: `scenarios/<name>.toml`).
    pub name: &'static str,
    /// The plan's text.
    pub text: &'static str,
}

/// Every built-in plan, in the order `repro all` runs them.
pub const PLANS: &[Builtin] = &[
    Builtin {
        name: "ch5",
        text: include_str!("../../../scenarios/ch5.toml"),
    },
    Builtin {
        name: "ch5-dupack",
        text: include_str!("../../../scenarios/ch5-dupack.toml"),
    },
    Builtin {
        name: "quicsilver",
        text: include_str!("../../../scenarios/quicsilver.toml"),
    },
    Builtin {
        name: "rtp-quic",
        text: include_str!("../../../scenarios/rtp-quic.toml"),
    },
    Builtin {
        name: "dash2018",
        text: include_str!("../../../scenarios/dash2018.toml"),
    },
    Builtin {
        name: "ch6",
        text: include_str!("../../../scenarios/ch6.toml"),
    },
    Builtin {
        name: "tcp-video",
        text: include_str!("../../../scenarios/tcp-video.toml"),
    },
    Builtin {
        name: "fec-arq",
        text: include_str!("../../../scenarios/fec-arq.toml"),
    },
];

/// The adapters a plan may name.
pub const ADAPTERS: &[&str] = &["voip", "video", "vod", "dash", "ch6", "fec"];

/// The built-in plan called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    PLANS.iter().find(|p| p.name == name)
}

/// Parse the built-in plan `name`.
pub fn load(name: &str, seeds: Option<u64>) -> Result<Plan, PlanError> {
    let b = find(name).ok_or_else(|| {
        PlanError::Invalid(format!(
            "no built-in plan '{name}': use one of {}",
            PLANS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
        ))
    })?;
    Plan::parse(b.text, seeds)
}

/// Run `plan` with the adapter it names (or `default_adapter` if it names
/// none).
pub fn run(plan: &Plan, default_adapter: Option<&str>, opts: &Options) -> Result<Done, String> {
    let name = plan.adapter.as_deref().or(default_adapter).ok_or_else(|| {
        format!(
            "bad experiment plan: plan '{}' names no adapter (adapter = \"…\"; one of {})",
            plan.name,
            ADAPTERS.join(", ")
        )
    })?;
    match name {
        "voip" => run::run(&crate::voip::Voip, plan, opts),
        "video" => run::run(&crate::video::Video, plan, opts),
        "vod" => run::run(&crate::vod::Vod, plan, opts),
        "dash" => run::run(&crate::dash::Dash, plan, opts),
        "ch6" => run::run(&crate::ch6::Ch6, plan, opts),
        "fec" => run::run(&crate::fecarq::FecArq, plan, opts),
        other => Err(format!(
            "bad experiment plan: unknown adapter '{other}': use one of {}",
            ADAPTERS.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_plan_parses_and_names_its_file() {
        for b in PLANS {
            let p = Plan::parse(b.text, None).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(p.name, b.name);
            assert!(
                ADAPTERS.contains(&p.adapter.as_deref().unwrap_or("")),
                "{}",
                b.name
            );
        }
        assert!(load("ch7", None)
            .unwrap_err()
            .to_string()
            .contains("ch5-dupack"));
    }
}
