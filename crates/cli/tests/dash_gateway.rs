//! A real player plays a Hollywood-delivered DASH stream (issue 33, "A
//! real player"): a real MPEG-TS ladder (`tools dash-ladder`, ffmpeg) is
//! served over Hollywood (QUIC on UDP sockets, `dash-server`), fetched by
//! the [DASHing-2018] client (BOLA, Rx_T) in `dash-gateway`, and played
//! from the gateway's ordinary HTTP by an unmodified ffmpeg, GStreamer's
//! `dashdemux`, and dash.js in headless Chromium.

// A test of adapters: real processes, sockets and clocks.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use hollywood_test_support::{have_tool, skip};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

/// Seconds of video in the test ladder (1 s chunks, 30 fps).
const SECONDS: usize = 6;

/// A process we started, killed (by its own handle) when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` and read the first line it prints (the address it
/// serves on).
fn first_line(mut cmd: Command) -> (Running, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(!line.is_empty(), "{cmd:?} printed nothing");
    (Running(child), line.trim().to_string())
}

/// Start `hollywood args` and read its first line.
fn start(args: &[&str]) -> (Running, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hollywood"));
    cmd.args(args);
    first_line(cmd)
}

/// The test ladder: three rungs of 320x180, shared by the tests of this
/// binary (made once).
fn ladder() -> &'static Path {
    static LADDER: OnceLock<PathBuf> = OnceLock::new();
    LADDER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("hollywood-gw-ladder-{}", std::process::id()));
        dash_ladder(&dir, SECONDS, 3);
        dir
    })
}

/// A server on a free UDP port and a gateway in front of it (HTTP on a
/// free port, `www` served beside the stream): the gateway's base URL.
fn server_and_gateway(www: Option<&Path>) -> (Running, Running, String) {
    let (server, udp) = start(&[
        "dash-server",
        "--video",
        ladder().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--sessions",
        "1",
    ]);
    let addr = udp
        .strip_prefix("udp://")
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("dash-server printed {udp:?}"))
        .to_string();
    let mut args = vec!["dash-gateway", "--server", &addr, "--listen", "127.0.0.1:0"];
    let www = www.map(|w| w.to_str().unwrap().to_string());
    if let Some(w) = &www {
        args.extend(["--www", w]);
    }
    let (gateway, url) = start(&args);
    let base = url
        .strip_suffix("/manifest.mpd")
        .unwrap_or_else(|| panic!("dash-gateway printed {url:?}"))
        .to_string();
    (server, gateway, base)
}

/// GET `path` from `base` (`http://127.0.0.1:P`): status and body.
fn get(base: &str, path: &str) -> (u16, Vec<u8>) {
    let host = base.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = String::from_utf8_lossy(&all[9..12]).parse().unwrap();
    (status, all[split + 4..].to_vec())
}

/// Frames an ffmpeg run decoded (`-progress` lines on stdout).
fn frames(progress: &[u8]) -> u64 {
    String::from_utf8_lossy(progress)
        .lines()
        .filter_map(|l| l.strip_prefix("frame="))
        .filter_map(|n| n.trim().parse().ok())
        .next_back()
        .unwrap_or(0)
}

/// The gateway's report once its client has stopped (its playout model
/// runs in real time: the video's length after start-up).
fn final_report(base: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let (status, body) = get(base, "/report.json");
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
        if v["done"] == true || t0.elapsed().as_secs() > 60 {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn ffmpeg_and_dashdemux_play_a_hollywood_delivered_dash_stream() {
    if !(have_tool("ffmpeg", "-version") && have_tool("ffprobe", "-version")) {
        skip("needs ffmpeg and ffprobe (apt-get install ffmpeg; scripts/test.sh does it as root)");
        return;
    }
    let (_server, _gateway, base) = server_and_gateway(None);
    let mpd = format!("{base}/manifest.mpd");
    let t0 = Instant::now();
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-loglevel", "error", "-i", &mpd])
        .args(["-map", "0:v:0", "-f", "null", "-", "-progress", "pipe:1"])
        .output()
        .expect("run ffmpeg");
    let played = t0.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoded = frames(&out.stdout);
    eprintln!("ffmpeg decoded {decoded} frames of {mpd} in {played:.1?}");
    let expected = (SECONDS * 30) as u64;
    assert!(decoded >= expected * 95 / 100, "{decoded} of {expected}");
    let v = final_report(&base);
    assert_eq!(v["done"], true, "{v}");
    assert!(v["error"].is_null(), "{v}");
    let r = &v["report"];
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(u(r, "messages_discarded"), 0, "{r}");
    // Over loopback every byte arrives: each chunk the player got is the
    // ladder's file of the rung BOLA chose for it.
    let rungs = v["rungs"].as_array().unwrap();
    assert_eq!(rungs.len(), SECONDS);
    for (n, rung) in rungs.iter().enumerate() {
        let file = ladder()
            .join(rung.as_str().unwrap())
            .join(format!("{n}.ts"));
        let (status, body) = get(&base, &format!("/{n}.ts"));
        assert_eq!(status, 200);
        assert!(body == std::fs::read(&file).unwrap(), "chunk {n}");
    }
    assert_eq!(get(&base, &format!("/{SECONDS}.ts")).0, 404);
    assert_eq!(get(&base, "/../etc/passwd").0, 404);
    // GStreamer's dashdemux, unmodified, from the same gateway.
    if have_tool("gst-launch-1.0", "--version")
        && have_tool("gst-inspect-1.0", "dashdemux")
        && have_tool("gst-inspect-1.0", "avdec_h264")
    {
        let out = Command::new("gst-launch-1.0")
            .args(["-v", "souphttpsrc", &format!("location={mpd}")])
            .args([
                "!",
                "dashdemux",
                "!",
                "tsdemux",
                "!",
                "h264parse",
                "!",
                "avdec_h264",
            ])
            .args(["!", "fakesink", "silent=false", "sync=false"])
            .output()
            .expect("run gst-launch-1.0");
        let log = String::from_utf8_lossy(&out.stdout);
        let decoded = log
            .lines()
            .filter(|l| l.contains("fakesink0: last-message = chain"))
            .count() as u64;
        eprintln!("GStreamer dashdemux decoded {decoded} frames");
        assert!(
            out.status.success() && log.contains("Got EOS"),
            "{log}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(decoded >= expected * 95 / 100, "{decoded} of {expected}");
    } else {
        skip("the dashdemux part needs gst-launch-1.0 with dashdemux (gstreamer1.0-plugins-bad) and avdec_h264 (gstreamer1.0-libav)");
    }
}

/// dash.js: `HOLLYWOOD_DASHJS` (a `dash.all.min.js`), or the `dashjs`
/// package from the npm registry.
fn dashjs(dir: &Path) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("HOLLYWOOD_DASHJS") {
        return Ok(PathBuf::from(p));
    }
    let out = Command::new("npm")
        .args(["pack", "--silent", "dashjs@5"])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("npm: {e}"))?;
    let tgz = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || tgz.is_empty() {
        return Err(format!(
            "npm pack dashjs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let member = "package/dist/modern/umd/dash.all.min.js";
    let ok = Command::new("tar")
        .args(["xzf", &tgz, member])
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err(format!("{tgz} has no {member}"));
    }
    Ok(dir.join(member))
}

#[test]
fn dash_js_in_headless_chromium_plays_the_stream() {
    for (tool, arg) in [("node", "--version"), ("chromium", "--version")] {
        if !have_tool(tool, arg) {
            skip(&format!(
                "needs {tool} (apt-get install nodejs chromium; scripts/test.sh does it as root)"
            ));
            return;
        }
    }
    if !have_tool("ffmpeg", "-version") {
        skip("needs ffmpeg (the ladder)");
        return;
    }
    let www = std::env::temp_dir().join(format!("hollywood-gw-www-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&www);
    std::fs::create_dir_all(&www).unwrap();
    let js = match dashjs(&www) {
        Ok(js) => js,
        Err(e) => {
            skip(&format!(
                "dash.js from the npm registry: {e} (or set HOLLYWOOD_DASHJS to a dash.all.min.js)"
            ));
            return;
        }
    };
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
    std::fs::copy(&js, www.join("dash.all.min.js")).unwrap();
    std::fs::copy(
        scripts.join("dashjs-player.html"),
        www.join("dashjs-player.html"),
    )
    .unwrap();
    let (_server, _gateway, base) = server_and_gateway(Some(&www));
    let page = format!("{base}/dashjs-player.html?mpd={base}/manifest.mpd");
    let png = www.join("dashjs.png");
    let t0 = Instant::now();
    let out = Command::new("node")
        .arg(scripts.join("dashjs-screenshot.js"))
        .args([&page, png.to_str().unwrap(), "40"])
        .output()
        .expect("run node");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    eprintln!("dash.js: {v} after {:.1?}", t0.elapsed());
    assert!(out.status.success(), "{v}");
    assert!(
        f(&v, "currentTime") > 1.0 && u(&v, "videoWidth") == 320,
        "{v}"
    );
    // The screenshot shows the picture, not a blank or black page: the
    // grey levels of its pixels spread (testsrc2's colour bars).
    let gray = Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-loglevel",
            "error",
            "-i",
            png.to_str().unwrap(),
        ])
        .args(["-f", "rawvideo", "-pix_fmt", "gray", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(gray.status.success() && !gray.stdout.is_empty());
    let px = &gray.stdout;
    let mean = px.iter().map(|&p| f64::from(p)).sum::<f64>() / px.len() as f64;
    let sd = (px
        .iter()
        .map(|&p| (f64::from(p) - mean).powi(2))
        .sum::<f64>()
        / px.len() as f64)
        .sqrt();
    eprintln!(
        "screenshot {}: mean grey {mean:.0}, spread {sd:.0}",
        png.display()
    );
    assert!(mean > 20.0 && sd > 20.0, "blank screenshot: {mean} ± {sd}");
}

/// A lab (two namespaces and the link emulator), taken down when dropped.
struct Lab(&'static str);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = hollywood(&["lab", "down", "--name", self.0]);
    }
}

/// Start `hollywood args` in network namespace `ns` (`ip netns exec`
/// execs it: the child is the process itself) and read its first line.
fn start_in(ns: &str, args: &[&str]) -> (Running, String) {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_hollywood")])
        .args(args);
    first_line(cmd)
}

#[test]
fn ffmpeg_plays_the_stream_across_a_lossy_lab_path() {
    if !hollywood_io::is_root() {
        skip("needs root (a lab: network namespaces and the link emulator)");
        return;
    }
    if !have_tool("ffmpeg", "-version") {
        skip("needs ffmpeg (apt-get install ffmpeg; scripts/test.sh does it as root)");
        return;
    }
    let ladder = ladder().to_str().unwrap();
    let out = hollywood(&[
        "lab", "up", "--name", "hwgw", "--rate", "5mbit", "--rtt", "100ms", "--loss", "1%",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _lab = Lab("hwgw");
    // Host a is 10.88.1.2, host b 10.88.2.2 (`lab up` prints them).
    let (_server, _) = start_in(
        "hwgw-a",
        &[
            "dash-server",
            "--video",
            ladder,
            "--listen",
            "10.88.1.2:4433",
        ],
    );
    let (_gateway, mpd) = start_in(
        "hwgw-b",
        &[
            "dash-gateway",
            "--server",
            "10.88.1.2:4433",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let t0 = Instant::now();
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            "hwgw-b",
            "ffmpeg",
            "-nostdin",
            "-loglevel",
            "error",
        ])
        .args([
            "-i",
            &mpd,
            "-map",
            "0:v:0",
            "-f",
            "null",
            "-",
            "-progress",
            "pipe:1",
        ])
        .output()
        .expect("run ffmpeg");
    let decoded = frames(&out.stdout);
    eprintln!(
        "across the lab (5 Mb/s, 100 ms, 1 % loss): ffmpeg decoded {decoded} frames in {:.1?}",
        t0.elapsed()
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = (SECONDS * 30) as u64;
    assert!(decoded >= expected * 95 / 100, "{decoded} of {expected}");
}
