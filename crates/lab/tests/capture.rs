//! tshark captures in a namespace lab (root only): the capture is running
//! when `Capture::start` returns, complete when `stop` returns, and gone
//! (no tshark left) when a running capture is dropped.

// A test of an adapter crate: threads are fine here.
#![allow(clippy::disallowed_methods)]

use hollywood_io::NetNs;
use hollywood_lab::capture::{audit_pcap, tshark_count, Capture};
use hollywood_lab::topology::{Host, Lab, LabSpec};
use hollywood_sim::LinkConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One lab test at a time, as the other lab test files do (tshark and the
/// emulator share 2 cores).
static SERIAL: Mutex<()> = Mutex::new(());

/// A temporary directory, removed when dropped (also when the test fails).
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("hwm-{tag}-"))
        .tempdir()
        .expect("a temporary directory")
}

fn root(test: &str) -> Option<MutexGuard<'static, ()>> {
    if hollywood_io::is_root() {
        let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let _ = NetNs::remove_stale("hwm");
        Some(guard)
    } else {
        hollywood_test_support::skip(&format!(
            "{test} needs root (network namespaces, tshark capture)"
        ));
        None
    }
}

fn lab(tag: &str) -> Lab {
    let link = LinkConfig::new(0, Duration::from_millis(2));
    Lab::up(LabSpec {
        name: format!("hwm-{}-{tag}", std::process::id()),
        three_hosts: false,
        a_to_b: link.clone(),
        b_to_a: link,
        seed: 3,
        hook: None,
    })
    .expect("lab up")
}

/// Kernel TCP from b (server, sends `n` bytes) to a (client).
fn transfer(lab: &Lab, n: usize) -> (SocketAddr, usize) {
    let server = SocketAddr::new(lab.addr(Host::B, false), 5555);
    let listener = lab
        .ns(Host::B)
        .run(move || TcpListener::bind(server))
        .unwrap()
        .expect("bind in b");
    let srv = std::thread::spawn(move || {
        // Accept, and write, within 10 s.
        let mut s = hollywood_test_support::accept_within(&listener, Duration::from_secs(10));
        s.write_all(&vec![0xa5u8; n]).expect("write");
    });
    let got = lab
        .ns(Host::A)
        .run(move || {
            let mut c =
                TcpStream::connect_timeout(&server, Duration::from_secs(3)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut v = Vec::new();
            c.read_to_end(&mut v).expect("read");
            v.len()
        })
        .unwrap();
    srv.join().unwrap();
    (server, got)
}

#[test]
fn capture_is_complete_and_audited() {
    let Some(_g) = root("capture_is_complete_and_audited") else {
        return;
    };
    let lab = lab("cap");
    let dir = temp_dir("cap");
    let path = dir.path().join("a.pcap");
    let ns = lab.ns(Host::A).name().unwrap().to_string();
    let cap = Capture::start(
        Some(&ns),
        &lab.iface(Host::A, Host::E),
        &path,
        "tcp port 5555",
    )
    .expect("tshark starts");
    let n = 2_000_000;
    let (server, got) = transfer(&lab, n);
    assert_eq!(got, n);
    // Stop right after the transfer: the settling wait must still get the
    // last segments and the FIN into the file.
    let path = cap.stop().expect("tshark stops");
    let r = audit_pcap(&path).expect("audit");
    let f = r
        .flows
        .iter()
        .find(|f| f.src == Some(server))
        .expect("server flow");
    assert_eq!(f.stream_bytes, n as u64, "{f:?}");
    assert_eq!(f.fins, 1);
    assert_eq!(
        (f.seq_holes, f.inconsistent_retransmissions, f.rsts),
        (0, 0, 0),
        "{f:?}"
    );
    // tshark reads the same file.
    let syns = tshark_count(&path, "tcp.flags.syn == 1").expect("tshark -r");
    assert_eq!(syns, 2, "SYN and SYN-ACK");
}

#[test]
fn dropping_a_running_capture_stops_tshark() {
    let Some(_g) = root("dropping_a_running_capture_stops_tshark") else {
        return;
    };
    let lab = lab("drop");
    let dir = temp_dir("capdrop");
    let path = dir.path().join("x.pcap");
    let ns = lab.ns(Host::A).name().unwrap().to_string();
    let pid;
    {
        let cap = Capture::start(Some(&ns), &lab.iface(Host::A, Host::E), &path, "tcp")
            .expect("tshark starts");
        pid = cap.pid().expect("running");
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
    // Drop waited for it (a zombie would still have a /proc entry).
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "tshark {pid} still running"
    );
    // A capture on a missing interface fails with tshark's message.
    let e = Capture::start(Some(&ns), "no-such-if", &dir.path().join("y.pcap"), "tcp").unwrap_err();
    assert!(e.to_string().contains("no-such-if"), "{e}");
}
