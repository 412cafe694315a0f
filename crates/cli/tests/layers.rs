//! The crate layering of docs/ARCHITECTURE.md as a test: every dependency
//! between our crates points down the layers (wire → engines → I/O and
//! simulation → API and media → lab and experiments → CLI), the test-support
//! crate is only ever a dev-dependency, and exactly the crates listed here
//! opt out of the sans-IO lint (`clippy::disallowed_methods`, clippy.toml).
//!
//! A new crate must be given a layer here; the test fails until it is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Our crates by layer: a crate may depend only on crates of a lower layer.
const LAYERS: &[(&str, u32)] = &[
    ("hollywood-test-support", 0),
    ("hollywood-wire", 0),
    ("hollywood-msg", 1),
    ("hollywood-fec", 1),
    ("hollywood-tcp", 1),
    ("hollywood-transport", 2),
    ("hollywood-sim", 3),
    ("hollywood-io", 3),
    ("hollywood-taps", 4),
    ("hollywood-media", 4),
    ("hollywood-taps-c", 5),
    ("hollywood-lab", 5),
    ("hollywood-experiments", 5),
    ("hollywood-cli", 6),
    ("hollywood-gst", 6),
];

/// Crates that may only be dev-dependencies of others.
const DEV_ONLY: &[&str] = &["hollywood-test-support"];

/// Adapter crates that opt out of the sans-IO lint crate-wide (they talk to
/// the OS: sockets, TUN, threads, the wall clock). Every other crate keeps
/// clippy.toml's `disallowed-methods` (`Instant::now`, `thread::spawn`, …).
const SANS_IO_OPT_OUTS: &[&str] = &[
    "hollywood-io",
    "hollywood-taps",
    "hollywood-taps-c",
    "hollywood-lab",
    "hollywood-cli",
    "hollywood-gst",
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate under `crates/`: package name → (manifest, its directory).
fn manifests() -> BTreeMap<String, (toml::Table, PathBuf)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(crates_dir()).expect("read crates/") {
        let dir = entry.expect("dir entry").path();
        let path = dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let manifest: toml::Table = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = manifest["package"]["name"]
            .as_str()
            .expect("package.name")
            .to_string();
        out.insert(name, (manifest, dir));
    }
    out
}

fn layer(name: &str) -> u32 {
    LAYERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| {
            panic!("crate {name} has no layer in crates/cli/tests/layers.rs (and docs/ARCHITECTURE.md)")
        })
}

#[test]
fn dependencies_point_down_the_layers() {
    let crates = manifests();
    assert!(crates.len() >= LAYERS.len() - 1, "found {crates:?}");
    let mut wrong = Vec::new();
    for (name, (manifest, _)) in &crates {
        let mine = layer(name);
        for kind in ["dependencies", "build-dependencies", "dev-dependencies"] {
            let Some(deps) = manifest.get(kind).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys().filter(|d| d.starts_with("hollywood-")) {
                if DEV_ONLY.contains(&dep.as_str()) {
                    if kind != "dev-dependencies" {
                        wrong.push(format!("{name} has {dep} in [{kind}]: it is dev-only"));
                    }
                    continue;
                }
                let theirs = layer(dep);
                if theirs >= mine {
                    wrong.push(format!(
                        "{name} (layer {mine}) depends on {dep} (layer {theirs}) in [{kind}]"
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies pointing up or across the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn only_the_adapter_crates_opt_out_of_the_sans_io_lint() {
    let mut opted_out = Vec::new();
    for (name, (_, dir)) in manifests() {
        for root in ["src/lib.rs", "src/main.rs"] {
            let Ok(text) = std::fs::read_to_string(dir.join(root)) else {
                continue;
            };
            if text.contains("#![allow(clippy::disallowed_methods)]") {
                opted_out.push(name.clone());
                break;
            }
        }
    }
    let mut expected: Vec<String> = SANS_IO_OPT_OUTS.iter().map(|s| s.to_string()).collect();
    expected.sort();
    opted_out.sort();
    assert_eq!(
        opted_out, expected,
        "crates opting out of clippy.toml's disallowed-methods (the sans-IO rule) crate-wide; \
         update docs/ARCHITECTURE.md and this list together"
    );
}
