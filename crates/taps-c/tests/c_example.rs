//! The C library from C: the header is what cbindgen generates now, and
//! `examples/c/voice.c`, built with the system C compiler against
//! `libhollywood.a`, exchanges messages with lifetimes with a listener
//! written with the Rust API (the `voice` example's echo), over QUIC and
//! over kernel TCP, and through the porting layer.

use hollywood_taps::{
    LocalEndpoint, MessageContext, Preconnection, Protocol, SecurityParameters, TransportProperties,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

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

/// target/<profile>, where cargo put libhollywood.a.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn build_example(out: &Path) -> Result<(), String> {
    // cargo builds only the rlib for tests: build the static library too,
    // with the test profile and the feature set of a workspace test run
    // (`--workspace --tests`), so that everything but this crate's link is
    // what `cargo test --workspace` already compiled. With `-p` alone the
    // features of shared dependencies (syn, serde, tokio, …) resolve
    // differently and 17 crates were rebuilt in another configuration. The
    // build lock is free while tests run.
    let mut cargo = Command::new(env!("CARGO"));
    // Cargo gives a test process the variables of its package
    // (CARGO_MANIFEST_DIR, CARGO_PKG_*, …); a build script that watches one
    // (ring's watches CARGO_MANIFEST_DIR) would see it changed and rebuild
    // ring, rustls, quinn and every crate above them (250 s of a CI run).
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
        ]
        .iter()
        .any(|p| k.starts_with(p))
        {
            cargo.env_remove(k);
        }
    }
    let st = cargo
        .args([
            "build",
            "--quiet",
            "--profile",
            "test",
            "--workspace",
            "--lib",
            "--tests",
        ])
        .current_dir(crate_dir())
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !st.success() {
        return Err("cargo build --profile test --workspace --lib --tests failed".into());
    }
    let lib = lib_dir().join("libhollywood.a");
    if !lib.exists() {
        return Err(format!("{} is missing", lib.display()));
    }
    let src = crate_dir().join("../../examples/c/voice.c");
    let st = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(out)
        .status()
        .map_err(|e| format!("cc: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("cc failed on {}", src.display()))
    }
}

#[test]
fn the_c_example_talks_to_the_rust_example() {
    if !hollywood_test_support::have_tool("cc", "--version") {
        hollywood_test_support::skip(
            "c_example::the_c_example_talks_to_the_rust_example needs a C compiler (cc)",
        );
        return;
    }
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hollywood-voice-c");
    build_example(&exe).unwrap();
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
