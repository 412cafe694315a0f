//! The C library on the engine (root only): a client namespace whose
//! default route is a veth to a peer namespace, a standing host-mode
//! instance in the client namespace (what `hollywood host up` makes), and
//! a TLS listener written with the Rust API in the peer namespace.
//! `examples/c/duplex.c`, run in the client namespace, asks for TCP
//! Hollywood alone: the library attaches to the instance by default (no
//! engine is given), and one thread sends while another waits in receive
//! for the echoes — with the handles and with the porting layer's
//! options (TLS, congestion control, keep-alive, default lifetime).
//!
//! Namespaces are `hwc-PID…`; the run directory (state, lock, saved
//! sysctls) is a temporary one (`HOLLYWOOD_RUN_DIR`, set for this test
//! binary alone), so nothing touches the machine's `/run/hollywood`.

mod common;

use hollywood_io::hostmode::{self, UpOptions};
use hollywood_io::{NetNs, VethPair};
use hollywood_taps::{
    Identity, LocalEndpoint, Preconnection, Protocol, SecurityParameters, TransportProperties,
};
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Duration;

#[test]
fn a_c_program_with_two_threads_runs_tcp_hollywood_on_the_host_engine_with_tls() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, a TUN device, nftables)");
        return;
    }
    for (tool, arg) in [
        ("nft", "--version"),
        ("cc", "--version"),
        ("openssl", "version"),
    ] {
        if !hollywood_test_support::have_tool(tool, arg) {
            hollywood_test_support::skip(&format!("needs {tool}"));
            return;
        }
    }
    let exe = common::build_c("duplex").unwrap();
    let pid = std::process::id();
    let run_dir = std::env::temp_dir().join(format!("hwc-run-{pid}"));
    let _ = std::fs::remove_dir_all(&run_dir);
    // This binary's only test: no other thread reads the environment.
    std::env::set_var("HOLLYWOOD_RUN_DIR", &run_dir);
    let _ = NetNs::remove_stale("hwc");
    let ns = NetNs::create(&format!("hwc-{pid}")).expect("namespace");
    let peer = NetNs::create(&format!("hwc-{pid}-gw")).expect("peer namespace");
    let _veth = VethPair::create(&ns, "hwc-eg", &peer, "hwc-gw").expect("veth");
    let gw = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    ns.add_addr("hwc-eg", IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)), 24)
        .unwrap();
    peer.add_addr("hwc-gw", gw, 24).unwrap();
    ns.add_route("default", Some(gw), Some("hwc-eg")).unwrap();
    let dir = run_dir.join("tls");
    let (cert, key) = common::cert_files(&dir);
    let id = Identity::from_files(&cert, &key, "hollywood.invalid").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The peer's listener: TCP Hollywood callers reach its kernel TCP
    // (the message layer, thesis §4.4).
    let addr = common::echo_listener(
        &rt,
        Preconnection::new(TransportProperties::media(), SecurityParameters::pinned(id))
            .with_namespace(peer.name().unwrap())
            .with_local(LocalEndpoint::from_addr(std::net::SocketAddr::new(gw, 0)))
            .with_protocols(&[Protocol::KernelTcp]),
    );
    let duplex = |api: &str, n: &str| {
        common::run_within(
            Command::new("ip")
                .args(["netns", "exec", ns.name().unwrap()])
                .arg(&exe)
                .arg(addr.to_string())
                .arg(&cert)
                .arg(&key)
                .args(["hollywood", api, n])
                .env("HOLLYWOOD_RUN_DIR", &run_dir),
            Duration::from_secs(90),
        )
    };
    // No instance up yet: TCP Hollywood alone fails, naming what is
    // missing, instead of running over something else.
    let out = duplex("handles", "10");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("no instance: {stderr}");
    assert!(!out.status.success(), "ran without an engine: {stderr}");
    assert!(stderr.contains("hollywood host up"), "{stderr}");
    let st = ns
        .run(|| {
            hostmode::up(&UpOptions {
                name: Some("capi".into()),
                ..UpOptions::default()
            })
        })
        .unwrap()
        .expect("host mode up in the client namespace");
    let results: Vec<_> = ["handles", "porting"]
        .into_iter()
        .map(|api| (api, duplex(api, "500")))
        .collect();
    let down = ns.run(move || hostmode::down(&st.name)).unwrap();
    drop(rt);
    let _ = std::fs::remove_dir_all(&run_dir);
    for (api, out) in results {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("{api}: {stdout}{stderr}");
        assert!(out.status.success(), "{api}: {stdout}{stderr}");
        // Protocol 2: HW_TCP_HOLLYWOOD.
        assert!(
            stdout.contains(&common::duplex_line(2, 500)),
            "{api}: {stdout}"
        );
    }
    down.expect("host mode down");
}
