//! `hollywood transmit` without an engine, as a user types it: asking for
//! TCP Hollywood never silently runs something else (issue 31).

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
    // The listener is up once its port accepts (within 20 s).
    let mut tries = 0;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        tries += 1;
        assert!(tries < 400, "never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
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
