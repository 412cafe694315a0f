//! Helpers of the C library's tests: build a C program from `examples/c`
//! against `libhollywood.a`, make a certificate, run an echo listener
//! written with the Rust API, run a program with a time limit.
#![allow(dead_code)]

use hollywood_taps::{MessageContext, Preconnection};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// target/<profile>, where cargo put libhollywood.a.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Build `examples/c/<name>.c` into `CARGO_TARGET_TMPDIR/hollywood-<name>-c`.
pub fn build_c(name: &str) -> Result<PathBuf, String> {
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
    let src = crate_dir().join(format!("../../examples/c/{name}.c"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hollywood-{name}-c"));
    let st = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .map_err(|e| format!("cc: {e}"))?;
    if st.success() {
        Ok(out)
    } else {
        Err(format!("cc failed on {}", src.display()))
    }
}

/// A self-signed end-entity certificate for `hollywood.invalid` (the C
/// library's default server name) and its PKCS#8 key, PEM, made by
/// `openssl` in `dir`.
pub fn cert_files(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ed25519", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=hollywood.invalid"])
        .args(["-addext", "subjectAltName=DNS:hollywood.invalid"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// Listen with `pre` (on `rt`) and echo every message on its sub-stream,
/// closing each connection after the peer's last message. Where it
/// listens (the first address).
pub fn echo_listener(rt: &tokio::runtime::Runtime, pre: Preconnection) -> SocketAddr {
    rt.block_on(async {
        let mut l = pre.listen().await.unwrap();
        let addr = l.local_addrs()[0].1;
        tokio::spawn(async move {
            while let Some(mut c) = l.accept().await {
                tokio::spawn(async move {
                    while let Ok(Some(m)) = c.receive().await {
                        let ctx = MessageContext::default()
                            .substream(m.substream)
                            .ordered(false);
                        if c.send(m.data, ctx).await.is_err() {
                            return;
                        }
                    }
                    let _ = c.close().await;
                });
            }
        });
        addr
    })
}

/// What `duplex.c` prints for `n` messages on protocol `bit`, all echoed.
pub fn duplex_line(bit: u32, n: usize) -> String {
    let bytes: usize = (0..n).map(|i| 100 + i % 50).sum();
    format!("protocol {bit}: {n} sent ({bytes} bytes), {n} echoed ({bytes} bytes)")
}

/// Run `cmd`, killing it after `limit`: its output, or a failure naming
/// the limit (a program that hangs, e.g. a send waiting behind a
/// receive, fails the test instead of hanging it).
pub fn run_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the program starts");
    let step = Duration::from_millis(50);
    let mut waited = Duration::ZERO;
    while child.try_wait().expect("try_wait").is_none() {
        if waited >= limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "still running after {limit:?} (killed); stdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(step);
        waited += step;
    }
    child.wait_with_output().expect("output")
}
