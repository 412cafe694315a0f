//! The C library from C: the header is what cbindgen generates now, and
//! `examples/c/voice.c`, built with the system C compiler against
//! `libhollywood.a`, exchanges messages with lifetimes with a listener
//! written with the Rust API (the `voice` example's echo), over QUIC and
//! over kernel TCP, and through the porting layer; `examples/c/duplex.c`
//! sends in one thread while another waits in receive, with TLS from
//! certificate files, on QUIC and kernel TCP, with handles and with the
//! porting layer's options (tests/c_engine.rs runs it on the engine).

mod common;

use common::crate_dir;
use hollywood_taps::{
    Identity, LocalEndpoint, MessageContext, Preconnection, Protocol, SecurityParameters,
    TransportProperties,
};
use std::process::Command;
use std::time::Duration;

fn generated_header() -> String {
    let config = cbindgen::Config::from_file(crate_dir().join("cbindgen.toml")).unwrap();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir())
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn the_checked_in_header_is_what_cbindgen_generates() {
    let path = crate_dir().join("include/hollywood.h");
    let want = generated_header();
    if std::env::var_os("HOLLYWOOD_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "include/hollywood.h is stale: HOLLYWOOD_BLESS=1 cargo test -p hollywood-taps-c --test c_example"
    );
}

#[test]
fn the_c_example_talks_to_the_rust_example() {
    if !hollywood_test_support::have_tool("cc", "--version") {
        hollywood_test_support::skip(
            "c_example::the_c_example_talks_to_the_rust_example needs a C compiler (cc)",
        );
        return;
    }
    let exe = common::build_c("voice").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (protocol, mode) in [
        (Protocol::Quic, "quic"),
        (Protocol::KernelTcp, "kernel"),
        (Protocol::Quic, "porting"),
    ] {
        // The Rust side: echo every message on its sub-stream.
        let addr = rt.block_on(async {
            let mut l =
                Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
                    .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
                    .with_protocols(&[protocol])
                    .listen()
                    .await
                    .unwrap();
            let addr = l.local_addrs()[0].1;
            tokio::spawn(async move {
                while let Some(mut c) = l.accept().await {
                    tokio::spawn(async move {
                        while let Ok(Some(m)) = c.receive().await {
                            let ctx = MessageContext::lifetime(Duration::from_millis(500))
                                .substream(m.substream)
                                .ordered(false);
                            let _ = c.send(m.data, ctx).await;
                        }
                        let _ = c.close().await;
                    });
                }
            });
            addr
        });
        let out = Command::new(&exe)
            .arg(addr.to_string())
            .arg(mode)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("{mode}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{mode}: {stdout}");
        assert!(stdout.contains("50 sent, 50 echoed"), "{mode}: {stdout}");
    }
}

#[test]
fn a_c_program_sends_in_one_thread_while_another_receives_with_tls() {
    for (tool, arg) in [("cc", "--version"), ("openssl", "version")] {
        if !hollywood_test_support::have_tool(tool, arg) {
            hollywood_test_support::skip(&format!(
                "c_example::a_c_program_sends_in_one_thread_while_another_receives_with_tls needs {tool}"
            ));
            return;
        }
    }
    let exe = common::build_c("duplex").unwrap();
    let dir = std::env::temp_dir().join(format!("hollywood-duplex-{}", std::process::id()));
    let (cert, key) = common::cert_files(&dir);
    let id = Identity::from_files(&cert, &key, "hollywood.invalid").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (protocol, name, bit) in [
        (Protocol::KernelTcp, "kernel", 4),
        (Protocol::Quic, "quic", 1),
    ] {
        let addr = common::echo_listener(
            &rt,
            Preconnection::new(
                TransportProperties::media(),
                SecurityParameters::pinned(id.clone()),
            )
            .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
            .with_protocols(&[protocol]),
        );
        for api in ["handles", "porting"] {
            let out = common::run_within(
                Command::new(&exe)
                    .arg(addr.to_string())
                    .arg(&cert)
                    .arg(&key)
                    .args([name, api, "300"]),
                Duration::from_secs(60),
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            println!("{name} {api}: {stdout}{stderr}");
            assert!(out.status.success(), "{name} {api}: {stdout}{stderr}");
            assert!(
                stdout.contains(&common::duplex_line(bit, 300)),
                "{name} {api}: {stdout}"
            );
        }
    }
    // A caller with the certificate alone (no key) connects too.
    let addr = common::echo_listener(
        &rt,
        Preconnection::new(
            TransportProperties::media(),
            SecurityParameters::pinned(id.clone()),
        )
        .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
        .with_protocols(&[Protocol::KernelTcp, Protocol::Quic]),
    );
    for name in ["kernel", "quic"] {
        let out = common::run_within(
            Command::new(&exe)
                .arg(addr.to_string())
                .arg(&cert)
                .args(["-", name, "handles", "50"]),
            Duration::from_secs(60),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{name}, certificate alone: {stdout}{stderr}"
        );
        let bit = if name == "kernel" { 4 } else { 1 };
        assert!(stdout.contains(&common::duplex_line(bit, 50)), "{stdout}");
    }
    // A caller that pins another certificate is refused.
    let (other_cert, other_key) = common::cert_files(&dir.join("other"));
    let addr = common::echo_listener(
        &rt,
        Preconnection::new(TransportProperties::media(), SecurityParameters::pinned(id))
            .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
            .with_protocols(&[Protocol::KernelTcp]),
    );
    let out = common::run_within(
        Command::new(&exe)
            .arg(addr.to_string())
            .arg(&other_cert)
            .arg(&other_key)
            .args(["kernel", "handles", "10"]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "an untrusted certificate was accepted"
    );
    assert!(stderr.contains("connect:"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
