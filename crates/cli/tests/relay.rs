//! `hollywood relay` and `hollywood transmit` to and from it, as a user
//! types them on one host (loopback): a refused publisher, one publisher,
//! two players over different candidates, every datagram out in order,
//! and the players ending when the publisher ends.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn hollywood(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hollywood"));
    c.args(args);
    c
}

/// `hollywood lab relay-chain --duration 6s --transports T --out DIR
/// --json`, which must succeed: its JSON.
fn relay_chain_6s(transports: &str, dir: &std::path::Path) -> serde_json::Value {
    let out = hollywood(&[
        "lab",
        "relay-chain",
        "--duration",
        "6s",
        "--transports",
        transports,
        "--out",
        &dir.to_string_lossy(),
        "--json",
    ])
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

fn term(c: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status();
}

/// Children killed when the test ends, passing or not.
struct Kids(Vec<u32>);

impl Drop for Kids {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Wait for a child to exit, at most `secs`; its status, or None.
fn wait_for(c: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    for _ in 0..secs * 20 {
        if let Some(s) = c.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_relay_fans_a_published_stream_out_to_players() {
    let port = free_port();
    let relay_at = format!("127.0.0.1:{port}");
    let mut relay = hollywood(&[
        "relay",
        "--listen",
        &relay_at,
        "--publish-token",
        "K",
        "--duration",
        "60s",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut kids = Kids(vec![relay.id()]);
    let mut tries = 0;
    while std::net::TcpStream::connect(&relay_at).is_err() {
        tries += 1;
        assert!(tries < 400, "the relay never listened");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A wrong token: refused, with the code and the reason.
    let out = hollywood(&[
        "transmit",
        &format!("udp://127.0.0.1:{}", free_port()),
        &format!("hollywood://{relay_at}/live/cam1?mode=publish&token=nope"),
    ])
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("(401)") && err.contains("wrong publish token"),
        "{err}"
    );

    // The publisher first (a stream exists once published), then players.
    let src = UdpSocket::bind("127.0.0.1:0").unwrap();
    let pub_port = free_port();
    let mut publisher = hollywood(&[
        "transmit",
        &format!("udp://127.0.0.1:{pub_port}"),
        &format!("hollywood://{relay_at}/live/cam1?mode=publish&token=K"),
        "--latency",
        "400ms",
    ])
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    kids.0.push(publisher.id());
    std::thread::sleep(Duration::from_secs(2));
    let mut players = Vec::new();
    let mut sinks = Vec::new();
    for transport in ["quic", "kernel"] {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let to = sink.local_addr().unwrap();
        let p = hollywood(&[
            "transmit",
            &format!("hollywood://{relay_at}/live/cam1?mode=play&transport={transport}"),
            &format!("udp://{to}"),
            "--latency",
            "400ms",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
        kids.0.push(p.id());
        players.push(p);
        sinks.push(sink);
    }
    std::thread::sleep(Duration::from_secs(2));
    // 300 datagrams, 5 ms apart (not MPEG-TS: each starts a group),
    // read as they come (a socket buffer holds fewer than 300).
    let n = 300u32;
    let mut got = vec![Vec::new(); sinks.len()];
    let mut b = [0u8; 2048];
    let mut drain = |got: &mut Vec<Vec<u32>>, wait: bool| {
        for (sink, got) in sinks.iter().zip(got.iter_mut()) {
            sink.set_nonblocking(!wait).unwrap();
            while got.len() < n as usize {
                match sink.recv(&mut b) {
                    Ok(k) => {
                        assert_eq!(k, 1316);
                        got.push(u32::from_be_bytes(b[..4].try_into().unwrap()));
                    }
                    Err(e) if !wait && e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("after {} datagrams: {e}", got.len()),
                }
            }
        }
    };
    for i in 0..n {
        let mut d = i.to_be_bytes().to_vec();
        d.resize(1316, 0x47);
        src.send_to(&d, ("127.0.0.1", pub_port)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        drain(&mut got, false);
    }
    drain(&mut got, true);
    for g in got {
        assert_eq!(g, (0..n).collect::<Vec<_>>(), "every datagram, in order");
    }
    // The publisher ends the stream; the players finish and exit cleanly.
    term(&publisher);
    assert!(wait_for(&mut publisher, 10).is_some_and(|s| s.success()));
    for mut p in players {
        let s = wait_for(&mut p, 15);
        if s.is_none() {
            let _ = p.kill();
        }
        assert!(
            s.is_some_and(|s| s.success()),
            "a player did not end with the stream: {s:?}"
        );
    }
    term(&relay);
    assert!(wait_for(&mut relay, 10).is_some_and(|s| s.success()));
}

/// Three relays on lab hosts, 40 ms and 1 % loss per hop, one 200 ms
/// end-to-end deadline (issue 32): the far player has ≥ 99 % on time,
/// nothing past its deadline, and a late joiner starts within one group
/// plus one round trip.
#[test]
fn a_chain_of_three_relays_keeps_one_deadline() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("hw-relay-chain-{}", std::process::id()));
    let v = relay_chain_6s("quic", &dir);
    let r = &v["results"][0];
    assert_eq!(r["relays"], 3);
    assert!(r["expected"].as_u64().unwrap() > 900, "{r}");
    assert!(r["on_time_pct"].as_f64().unwrap() >= 99.0, "{r}");
    assert_eq!(r["late_delivered"], 0, "{r}");
    let first = r["late_joiner_first_group_ms"]
        .as_f64()
        .expect("the late joiner never started");
    assert!(first <= r["late_joiner_bound_ms"].as_f64().unwrap(), "{r}");
    // Each relay after the first took in what the one before forwarded.
    let hops = r["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 3);
    assert!(hops[2]["published"].as_u64().unwrap() > 900, "{r}");
}

/// The same chain on TCP Hollywood on each host's engine (issue 32): each
/// relay's host-mode instance leaves by both of its interfaces (it calls
/// upstream by one and serves downstream by the other), the relays call
/// upstream over their engines, the players play over theirs. The far
/// player has ≥ 99 % on time and nothing is delivered past its deadline,
/// anywhere.
#[test]
fn a_chain_of_three_relays_on_the_engine_keeps_one_deadline() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, TUN devices, nftables)");
        return;
    }
    if !hollywood_test_support::have_tool("nft", "--version") {
        hollywood_test_support::skip("needs the nft tool (package nftables)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("hw-relay-chain-engine-{}", std::process::id()));
    let v = relay_chain_6s("hollywood", &dir);
    let r = &v["results"][0];
    assert_eq!(r["transport"], "hollywood", "{r}");
    assert_eq!(r["relays"], 3);
    assert!(r["expected"].as_u64().unwrap() > 900, "{r}");
    assert!(r["on_time_pct"].as_f64().unwrap() >= 99.0, "{r}");
    // No message older than its deadline delivered: not to the players,
    // and no relay forwarded one it got late (it counts them apart).
    assert_eq!(r["late_delivered"], 0, "{r}");
    let hops = r["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 3);
    for h in hops {
        assert_eq!(h["published_late"], 0, "{r}");
    }
    assert!(hops[2]["published"].as_u64().unwrap() > 900, "{r}");
    let first = r["late_joiner_first_group_ms"]
        .as_f64()
        .expect("the late joiner never started");
    assert!(first <= r["late_joiner_bound_ms"].as_f64().unwrap(), "{r}");
    // The players played over their engine, and every relay made its own
    // host-mode instance (and took it down).
    let players = std::fs::read_to_string(dir.join("hollywood/players.log")).unwrap();
    assert!(players.contains("\"protocol\":\"hollywood\""), "{players}");
    for i in 1..=3 {
        let log = std::fs::read_to_string(dir.join(format!("hollywood/relay{i}.log"))).unwrap();
        assert!(
            log.contains("relay: hollywood on 10.203."),
            "relay {i}: {log}"
        );
        assert!(log.contains("taken down"), "relay {i}: {log}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
