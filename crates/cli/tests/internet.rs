//! The internet-like lab (issue 31), run as a user runs it (root only):
//! `hollywood lab internet` puts a client host behind a NAT router with
//! strict conntrack, an emulated 80 ms, 2 % loss path and a server host
//! with a public address, and runs ffmpeg, `hollywood transmit` (with
//! `--host`) and an ffmpeg recorder in them as commands. Checked here:
//!
//! - the engine row: racing picks TCP Hollywood on the engine with UDP
//!   blocked, the router's capture shows inconsistent retransmissions and
//!   no sequence hole, the receiving protocol delivered out of order,
//!   ffprobe decodes the recording, and neither host keeps a TUN device,
//!   a `hollywood` nftables table or changed forwarding;
//! - a standard Linux TCP caller (the kernel fallback) and `nc` reach the
//!   engine listener through host mode's DNAT, every byte intact.
//!
//! The side-by-side figures (engine, kernel fallback with CUBIC and BBR,
//! SRT) are the documented command in docs/DEPLOY.md, not a test: a
//! timing comparison on a loaded 2-core CI machine would be noise.

use hollywood_lab::internet;
use hollywood_lab::topology::{Host, Lab, LabSpec};
use hollywood_sim::LinkConfig;
use serde_json::Value;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn ready() -> Option<std::sync::MutexGuard<'static, ()>> {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, TUN devices, nftables)");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|p| p.into_inner()))
}

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hw-internet-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `hollywood lab internet ARGS --json` → its rows.
fn lab_internet(args: &[&str], out: &Path) -> Vec<Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_hollywood"))
        .args(["lab", "internet", "--json", "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("run hollywood");
    assert!(
        o.status.success(),
        "hollywood lab internet failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    v["results"].as_array().expect("rows in results").clone()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn the_engine_row_shows_the_tcp_hollywood_wire_image_through_two_nats() {
    let Some(_g) = ready() else { return };
    let out = out_dir("engine");
    // A deadline shorter than a repair (one RTT plus loss detection) so
    // that lost messages expire and get inconsistent retransmissions.
    let rows = lab_internet(
        &[
            "--seconds",
            "6",
            "--deadline",
            "100ms",
            "--transports",
            "engine",
        ],
        &out,
    );
    let r = &rows[0];
    assert!(r["error"].is_null(), "{r:#}");
    assert_eq!(r["protocol"], "hollywood", "racing with UDP blocked: {r:#}");
    assert!(u(r, "chunks") > 500, "{r:#}");
    assert_eq!(u(r, "bad_deliveries"), 0, "{r:#}");
    let w = &r["wire"];
    assert!(u(w, "retransmissions") > 0, "2 % loss: {r:#}");
    assert!(u(w, "inconsistent_retransmissions") > 0, "{r:#}");
    assert_eq!(u(w, "seq_holes"), 0, "{r:#}");
    assert_eq!(u(w, "rsts"), 0, "strict conntrack reset nothing: {r:#}");
    assert!(u(r, "arrived_out_of_order") > 0, "{r:#}");
    let (sent, rec) = (u(r, "frames_sent"), u(r, "frames_recorded"));
    assert!(sent >= 140 && rec * 10 >= sent * 9, "ffprobe: {r:#}");
    assert_eq!(r["hosts_clean"], true, "{r:#}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_standard_linux_tcp_caller_reaches_the_engine_listener_intact() {
    let Some(_g) = ready() else { return };
    let out = out_dir("kernel");
    let rows = lab_internet(
        &[
            "--seconds",
            "4",
            "--loss",
            "0",
            "--transports",
            "fallback-cubic-to-engine",
        ],
        &out,
    );
    let r = &rows[0];
    assert!(r["error"].is_null(), "{r:#}");
    assert_eq!(r["protocol"], "kernel", "{r:#}");
    assert!(u(r, "chunks") > 300, "{r:#}");
    assert_eq!(u(r, "never"), 0, "{r:#}");
    assert_eq!(u(r, "bad_deliveries"), 0, "{r:#}");
    // The recorder may lose the last, partial frame when it stops.
    assert!(u(r, "frames_recorded") + 1 >= u(r, "frames_sent"), "{r:#}");
    assert_eq!(r["hosts_clean"], true, "{r:#}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn nc_reaches_the_engine_listener_through_the_dnat_every_byte_intact() {
    let Some(_g) = ready() else { return };
    if !hollywood_test_support::have_tool("nc", "-h") {
        hollywood_test_support::skip(
            "needs nc (package netcat-openbsd; scripts/test.sh installs it)",
        );
        return;
    }
    hollywood_lab::interop::remove_stale_labs();
    let name = format!(
        "{}-{}-nc",
        hollywood_lab::interop::LAB_PREFIX,
        std::process::id()
    );
    let link = LinkConfig::new(10_000_000, Duration::from_millis(20));
    let lab = Lab::up(LabSpec {
        name,
        three_hosts: true,
        a_to_b: link.clone(),
        b_to_a: link,
        seed: 1,
        hook: None,
    })
    .expect("lab");
    internet::router(&lab, true).expect("router");
    let (ns_a, ns_b) = (
        lab.ns(Host::A).name().unwrap().to_string(),
        lab.ns(Host::B).name().unwrap().to_string(),
    );
    let out = out_dir("nc");
    std::fs::create_dir_all(&out).unwrap();
    // Messages as TCP Hollywood frames (docs/PROTOCOL.md), which is what a
    // plain TCP peer sends to talk to a Hollywood listener.
    let payloads: Vec<Vec<u8>> = (0..300u32)
        .map(|i| {
            let len = 1 + (i as usize * 37) % 1400;
            (0..len).map(|k| (i as usize * 131 + k * 7) as u8).collect()
        })
        .collect();
    let mut stream = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        hollywood_msg::encode_frame(
            &hollywood_msg::FrameHeader::unordered(0, i as u32),
            p,
            &mut stream,
        );
    }
    let frames = out.join("frames.bin");
    std::fs::write(&frames, &stream).unwrap();
    let server = lab.addr(Host::A, false);
    let rx = hollywood_io::NetNs::open(&ns_a)
        .unwrap()
        .run(|| UdpSocket::bind("127.0.0.1:6000"))
        .unwrap()
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let run_a = out.join("run-a");
    let listener = Command::new("ip")
        .args(["netns", "exec", &ns_a])
        .arg(env!("CARGO_BIN_EXE_hollywood"))
        .args([
            "transmit",
            &format!("hollywood://{server}:9000?mode=listener"),
        ])
        .args(["udp://127.0.0.1:6000", "--host", "--json"])
        .env("HOLLYWOOD_RUN_DIR", &run_a)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("listener");
    std::thread::sleep(Duration::from_millis(1500));
    // nc runs while this thread reads (the relay sends each message as
    // it arrives; a datagram finding the socket buffer full is dropped).
    let mut nc = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns_b,
            "nc",
            "-N",
            &server.to_string(),
            "9000",
        ])
        .stdin(std::fs::File::open(&frames).unwrap())
        .spawn()
        .expect("nc");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 2048];
    while got.len() < payloads.len() {
        match rx.recv(&mut buf) {
            Ok(n) => got.push(buf[..n].to_vec()),
            Err(e) => panic!("after {} datagrams: {e}", got.len()),
        }
    }
    assert!(nc.wait().unwrap().success(), "nc failed");
    let _ = Command::new("kill")
        .args(["-TERM", &listener.id().to_string()])
        .status();
    let o = listener.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&o.stdout);
    let last: Value = log
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no statistics: {log} {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    assert_eq!(last["protocol"], "hollywood", "the engine took it: {last}");
    assert_eq!(got, payloads, "every byte, in order");
    let tuns = lab
        .ns(Host::A)
        .exec(&["ip", "-o", "link", "show", "type", "tun"]);
    assert_eq!(tuns.unwrap_or_default().trim(), "", "host mode left a TUN");
    let _ = std::fs::remove_dir_all(&out);
}
