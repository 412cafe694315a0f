//! Helpers shared by the workspace's tests; a dev-dependency only, never a
//! dependency of library code.
//!
//! - [`skip`]: how a test that cannot run here (not root, a tool missing)
//!   says so. Whether the process is root is runtime behaviour (lab
//!   commands refuse without it), so it stays `hollywood_io::is_root`.
//! - [`have_tool`]: whether an external program runs here, for a test to
//!   [`skip`] without it.
//! - [`ts_packet`]: an MPEG-TS packet to classify.
#![deny(unsafe_code)]
#![warn(missing_docs)]

/// A test that cannot run here (not root, a tool missing) skips with a
/// reason: printed, and appended to the file named by `HOLLYWOOD_SKIP_LOG`
/// if set (the test script lists every skip in its summary: cargo hides a
/// passing test's output). With `HOLLYWOOD_REQUIRE_ROOT=1` a skip is a
/// failure instead (CI runs as root: nothing may skip silently there).
///
/// The line names the test (libtest runs each test on a thread named
/// after it) unless `reason` already does.
///
/// # Panics
/// When `HOLLYWOOD_REQUIRE_ROOT` is set.
pub fn skip(reason: &str) {
    let line = match std::thread::current().name() {
        Some(test) if test != "main" && !reason.contains(test_leaf(test)) => {
            format!("{test}: {reason}")
        }
        _ => reason.to_string(),
    };
    if std::env::var_os("HOLLYWOOD_REQUIRE_ROOT").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("HOLLYWOOD_REQUIRE_ROOT is set but a test would skip: {line}");
    }
    eprintln!("SKIPPED: {line}");
    if let Some(path) = std::env::var_os("HOLLYWOOD_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The test's own name without its module path (`tests::foo` → `foo`).
fn test_leaf(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// Whether `program` runs here: `program version_arg` starts and exits
/// with success. A test that needs it calls [`skip`] when it does not.
pub fn have_tool(program: &str, version_arg: &str) -> bool {
    std::process::Command::new(program)
        .arg(version_arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Accepts one connection on `listener` within `timeout` and returns it
/// blocking again, with `timeout` as its read and write timeout: std's
/// `accept` has none, so this polls a non-blocking listener. Panics
/// (failing the test) when no connection comes in time. For tests of
/// adapters, which run on real clocks.
#[allow(clippy::disallowed_methods)]
pub fn accept_within(
    listener: &std::net::TcpListener,
    timeout: std::time::Duration,
) -> std::net::TcpStream {
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let deadline = std::time::Instant::now() + timeout;
    let s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no connection within {timeout:?}"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    s.set_nonblocking(false).expect("a blocking stream");
    s.set_read_timeout(Some(timeout)).expect("read timeout");
    s.set_write_timeout(Some(timeout)).expect("write timeout");
    s
}

/// A 188-byte MPEG-TS packet on `pid` for tests: a PES start with
/// `stream_id` (`start`) or a continuation, with the random access
/// indicator set in an adaptation field when `rai`.
#[must_use]
pub fn ts_packet(pid: u16, start: Option<u8>, rai: bool) -> Vec<u8> {
    let mut p = vec![0x47, ((pid >> 8) as u8) & 0x1f, pid as u8, 0x10];
    if start.is_some() {
        p[1] |= 0x40;
    }
    if rai {
        p[3] = 0x30;
        p.extend_from_slice(&[1, 0x40]);
    }
    if let Some(sid) = start {
        p.extend_from_slice(&[0, 0, 1, sid]);
    }
    p.resize(188, 0xff);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leaf_of_a_test_name_drops_its_module_path() {
        assert_eq!(test_leaf("tests::a_test"), "a_test");
        assert_eq!(test_leaf("a_test"), "a_test");
    }

    #[test]
    fn a_missing_program_is_not_a_tool() {
        assert!(!have_tool("hollywood-no-such-program", "--version"));
    }
}
