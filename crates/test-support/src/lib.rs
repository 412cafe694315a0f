//! Helpers shared by the workspace's tests; a dev-dependency only, never a
//! dependency of library code.
//!
//! - [`skip`]: how a test that cannot run here (not root, a tool missing)
//!   says so. Whether the process is root is runtime behaviour (lab
//!   commands refuse without it), so it stays `hollywood_io::is_root`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

/// A test that cannot run here (not root, a tool missing) skips with a
/// reason: printed, and appended to the file named by `HOLLYWOOD_SKIP_LOG`
/// if set (the test script lists every skip in its summary: cargo hides a
/// passing test's output). With `HOLLYWOOD_REQUIRE_ROOT=1` a skip is a
/// failure instead (CI runs as root: nothing may skip silently there).
///
/// # Panics
/// When `HOLLYWOOD_REQUIRE_ROOT` is set.
pub fn skip(reason: &str) {
    if std::env::var_os("HOLLYWOOD_REQUIRE_ROOT").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("HOLLYWOOD_REQUIRE_ROOT is set but a test would skip: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
    if let Some(path) = std::env::var_os("HOLLYWOOD_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{reason}");
        }
    }
}
