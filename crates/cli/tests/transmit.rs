//! `hollywood transmit` without an engine, as a user types it: asking for
//! TCP Hollywood never silently runs something else (issue 31).
// A test of a process: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_hollywood_listener_without_an_engine_says_what_it_serves() {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hollywood"))
        .args([
            "transmit",
            &format!("hollywood://127.0.0.1:{port}?mode=listener&transport=hollywood"),
            &format!("udp://127.0.0.1:{}", free_port()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its notice comes before it listens: read stderr until it does (a
    // connect to the port as the signal could meet the test's own socket:
    // TCP's simultaneous open when the kernel picks the port as the
    // source port, which nothing else had bound yet).
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stderr = stderr;
        let mut all = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            let _ = tx.send(String::from_utf8_lossy(&all).into_owned());
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut err = String::new();
    while !err.contains("thesis §4.4") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) => err = e,
            Err(_) => break,
        }
    }
    // And it listens (a bound port: no simultaneous open any more).
    let mut tries = 0;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() && tries < 400 {
        tries += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(tries < 400, "never listened: {err}");
    assert!(
        err.contains("this listener has no engine") && err.contains("kernel TCP"),
        "{err}"
    );
}

#[test]
fn a_hollywood_caller_without_an_engine_fails_and_names_the_engine() {
    let out = Command::new(env!("CARGO_BIN_EXE_hollywood"))
        .args([
            "transmit",
            &format!("udp://127.0.0.1:{}", free_port()),
            &format!("hollywood://127.0.0.1:{}?transport=hollywood", free_port()),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no engine"), "{err}");
}
