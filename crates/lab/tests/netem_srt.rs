//! The emulator carries SRT (root only; needs `srt-live-transmit` from
//! Debian's srt-tools, which `scripts/test.sh` installs as root).
//!
//! A live SRT stream crosses a lab whose a→b direction drops 3 % of
//! packets: SRT's own ARQ must repair every loss within its latency
//! window, so the receiver gets every datagram intact, while the emulator
//! counts the drops it made. Lab `hwr-PID` (namespaces `hwr-PID-a/e/b`),
//! removed by `Lab`'s Drop also when the test fails.
// A test of an adapter: real threads, clocks and processes.
#![allow(clippy::disallowed_methods)]

use hollywood_io::NetNs;
use hollywood_lab::topology::{Host, Lab, LabSpec};
use hollywood_lab::workload::{check_payload, payload};
use hollywood_sim::{LinkConfig, LossModel};
use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Live-mode SRT payload size (7 MPEG-TS packets), the tool's usual chunk.
const CHUNK: usize = 1316;
const DATAGRAMS: u32 = 400;

/// Kills and reaps a child process when dropped (also on panic).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn srt_live_transmit(ns: &NetNs, args: &[&str]) -> Reaped {
    let ns = ns.name().expect("lab namespaces are named");
    let child = Command::new("ip")
        .args(["netns", "exec", ns, "srt-live-transmit", "-q"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn srt-live-transmit");
    Reaped(child)
}

#[test]
fn carries_srt_and_srt_repairs_the_emulated_loss() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("carries_srt needs root (network namespaces + TUN devices)");
        return;
    }
    if Command::new("srt-live-transmit")
        .arg("-version")
        .output()
        .is_err()
    {
        hollywood_test_support::skip("carries_srt needs srt-live-transmit (Debian srt-tools; scripts/test.sh installs it as root)");
        return;
    }
    let _ = NetNs::remove_stale("hwr");
    let one_way = Duration::from_millis(10);
    let lab = Lab::up(LabSpec {
        name: format!("hwr-{}", std::process::id()),
        three_hosts: false,
        a_to_b: LinkConfig::new(50_000_000, one_way).with_loss(LossModel::Bernoulli(0.03)),
        b_to_a: LinkConfig::new(50_000_000, one_way),
        seed: 3,
        hook: None,
    })
    .expect("lab up");
    let b = lab.addr(Host::B, false);
    // b: SRT listener → UDP on localhost:5001, read here. a: UDP on
    // localhost:5000 → SRT caller. 400 ms of SRT latency is 20 RTTs: room
    // for several retransmissions.
    let ns_b = NetNs::open(lab.ns(Host::B).name().unwrap()).unwrap();
    let rx_sock = ns_b
        .run(|| UdpSocket::bind("127.0.0.1:5001"))
        .expect("thread in b")
        .expect("bind 127.0.0.1:5001 in b");
    rx_sock
        .set_read_timeout(Some(Duration::from_millis(2500)))
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 2048];
        while let Ok(n) = rx_sock.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
        got
    });
    let _rx = srt_live_transmit(
        lab.ns(Host::B),
        &[
            "srt://:9000?mode=listener&latency=400",
            "udp://127.0.0.1:5001",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let _tx = srt_live_transmit(
        lab.ns(Host::A),
        &[
            "udp://127.0.0.1:5000",
            &format!("srt://{b}:9000?mode=caller&latency=400"),
        ],
    );
    std::thread::sleep(Duration::from_millis(700));

    // 400 self-checking datagrams at 2 ms spacing (~2.6 Mb/s), into the
    // sender's UDP input inside namespace a.
    let ns_a = NetNs::open(lab.ns(Host::A).name().unwrap()).unwrap();
    ns_a.run(|| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        for id in 0..DATAGRAMS {
            s.send_to(&payload(id, CHUNK), to).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    })
    .expect("sender thread");
    // The reader stops 2.5 s after the last datagram: the latency window
    // plus a margin for the last retransmissions.
    let datagrams = reader.join().expect("reader thread");
    drop(_tx);
    drop(_rx);

    let stats = lab.netem_stats();
    let mut ids = HashSet::new();
    let mut corrupt = 0;
    for d in &datagrams {
        match check_payload(d, CHUNK) {
            Some(id) => {
                ids.insert(id);
            }
            None => corrupt += 1,
        }
    }
    eprintln!(
        "SRT: {} of {DATAGRAMS} datagrams delivered ({} received), {corrupt} corrupt; emulator a→b: {} in, {} lost",
        ids.len(),
        datagrams.len(),
        stats.a_to_b.packets_in,
        stats.a_to_b.dropped_loss
    );
    assert!(
        stats.a_to_b.dropped_loss >= 3,
        "the emulator dropped too few packets to test SRT's repair: {stats:?}"
    );
    assert_eq!(corrupt, 0, "corrupt chunks in the SRT output");
    assert_eq!(
        ids.len(),
        DATAGRAMS as usize,
        "SRT should repair every loss within 400 ms of latency"
    );
}
