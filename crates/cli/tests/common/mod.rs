//! Helpers shared by the CLI's end-to-end tests: run the built `hollywood`
//! binary and read its JSON.
#![allow(dead_code)] // each test binary uses a different subset

use serde_json::Value;
use std::process::{Command, Output};

/// Run `hollywood` with `args`.
pub fn hollywood(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hollywood"))
        .args(args)
        .output()
        .expect("run hollywood")
}

/// Run `hollywood` with `args`, require success, parse stdout as JSON.
pub fn json(args: &[&str]) -> Value {
    let out = hollywood(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// A float field of `v`.
pub fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// An integer field of `v`.
pub fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// A real ladder of `reps` rungs, `seconds` 1 s chunks at 320x180
/// (`hollywood dash-ladder`, ffmpeg; a few seconds) in a fresh `dir`.
pub fn dash_ladder(dir: &std::path::Path, seconds: usize, reps: usize) {
    let _ = std::fs::remove_dir_all(dir);
    let out = hollywood(&[
        "dash-ladder",
        "--out",
        dir.to_str().unwrap(),
        "--duration",
        &format!("{seconds}s"),
        "--size",
        "320x180",
        "--reps",
        &reps.to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
