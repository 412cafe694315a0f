//! hollywoodsink → a lossy emulated path → hollywoodsrc, with real
//! GStreamer pipelines (root only: namespaces and the lab's emulator;
//! needs gst-launch-1.0 with x264enc, mpegtsmux, tsdemux, h264parse,
//! avdec_h264, which `scripts/test.sh` installs as root).
//!
//! a: `videotestsrc ! x264enc ! mpegtsmux ! hollywoodsink` (caller),
//! b: `hollywoodsrc ! queue ! tsdemux ! h264parse ! avdec_h264 ! fakesink
//! sync=true` (listener). A frame counts when the sink renders it: on
//! time for the pipeline's latency (the source reports its `latency`,
//! tsdemux 100 ms, the decoder a frame; `max-lateness` 20 ms, as video
//! sinks). The same run with UDP to b
//! dropped by iptables: QUIC cannot connect, racing falls back to TCP.
//!
//! `compare_with_srt` (ignored; `scripts/gst-compare.sh`) runs the issue's
//! comparison: 30 s of 720p30 at 100 ms RTT / 2 % loss, hollywoodsink/src
//! against srtsink/srtsrc at equal latency, and both with UDP blocked.
// A test of an adapter: real processes and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::topology::{Host, Lab, LabSpec};
use hollywood_sim::{LinkConfig, LossModel};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills and reaps a child process when dropped (also on panic).
struct Reaped(Child);

impl Reaped {
    /// SIGINT (gst-launch -e: EOS, then exit), then wait at most `grace`.
    fn interrupt(&mut self, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .stderr(Stdio::null())
            .status();
        self.wait_until(Instant::now() + grace);
    }

    /// Wait for the exit until `deadline`; true when it exited.
    fn wait_until(&mut self, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The plugin this test was built with, copied alone into a fresh
/// directory for GST_PLUGIN_PATH (the build directory holds other shared
/// objects the plugin scanner would try), with its own registry file.
fn plugin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let deps = exe.parent().expect("deps directory");
    let so = [deps.to_path_buf(), deps.join("..")]
        .iter()
        .map(|d| d.join("libgsthollywood.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libgsthollywood.so not found next to {}", exe.display()));
    let dir = std::env::temp_dir().join(format!("hollywood-gst-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("plugin dir");
    std::fs::copy(&so, dir.join("libgsthollywood.so")).expect("copy the plugin");
    dir
}

fn missing_elements(srt: bool) -> Vec<&'static str> {
    let srt: &[&str] = if srt { &["srtsink", "srtsrc"] } else { &[] };
    [
        "videotestsrc",
        "x264enc",
        "mpegtsmux",
        "tsdemux",
        "h264parse",
        "avdec_h264",
        "fakesink",
    ]
    .iter()
    .chain(srt)
    .copied()
    .filter(|e| {
        !Command::new("gst-inspect-1.0")
            .arg("--exists")
            .arg(e)
            .status()
            .is_ok_and(|s| s.success())
    })
    .collect()
}

/// Why this test cannot run here, if it cannot (`srt`: it needs
/// srtsink/srtsrc too).
fn cannot_run(srt: bool) -> Option<String> {
    if !hollywood_io::is_root() {
        return Some("needs root (network namespaces + the lab's TUN emulator)".into());
    }
    if !hollywood_test_support::have_tool("gst-launch-1.0", "--version") {
        return Some(
            "needs gst-launch-1.0 (Debian gstreamer1.0-tools; scripts/test.sh installs it as root)"
                .into(),
        );
    }
    let missing = missing_elements(srt);
    if !missing.is_empty() {
        return Some(format!(
            "needs the GStreamer elements {missing:?} (gstreamer1.0-plugins-{{base,good,bad,ugly}}, gstreamer1.0-libav)"
        ));
    }
    None
}

/// gst-launch-1.0 in namespace `ns`, stdout (`-v -m`: every rendered
/// frame's last-message and the bus messages) to `out`.
fn launch(ns: &str, plugins: &Path, pipeline: &str, out: &Path) -> Reaped {
    let f = std::fs::File::create(out).expect("output file");
    let err = std::fs::File::create(out.with_extension("err")).expect("error file");
    // One word per argument, as a shell would split it (gst-launch escapes
    // the spaces inside an argument).
    let child = Command::new("ip")
        .args(["netns", "exec", ns, "gst-launch-1.0", "-e", "-v", "-m"])
        .args(pipeline.split_whitespace())
        .env("GST_PLUGIN_PATH", plugins)
        .env("GST_REGISTRY", plugins.join("registry.bin"))
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(err)
        .spawn()
        .expect("spawn gst-launch-1.0");
    Reaped(child)
}

/// Which transport a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Hollywood,
    Srt,
}

#[derive(Debug, Clone, Copy)]
struct Video {
    seconds: u32,
    width: u32,
    height: u32,
    fps: u32,
    kbps: u32,
}

impl Video {
    fn frames(&self) -> u32 {
        self.seconds * self.fps
    }
}

/// What the receiver saw.
#[derive(Debug)]
struct Outcome {
    /// Frames the sink rendered on time.
    on_time: usize,
    /// Frames the sink dropped as late (its QoS messages).
    late: usize,
    /// tsdemux's continuity warnings (TS packets missing or out of order).
    discontinuities: usize,
    /// hollywoodsrc's last `hollywood-stats` bus message.
    stats: Option<String>,
    /// hollywoodsink's counters at EOS.
    sink_stats: Option<String>,
}

/// The fields of the last bus message naming `what`, from `text`.
fn last_message(text: &str, what: &str) -> Option<String> {
    text.lines()
        .rfind(|l| l.contains(what))
        .and_then(|l| l.split_once("(element): "))
        .map(|(_, s)| s.trim().to_string())
}

fn run(lab: &Lab, kind: Kind, video: Video, latency_ms: u32, plugins: &Path) -> Outcome {
    let b = lab.addr(Host::B, false);
    let (sink, src) = match kind {
        Kind::Hollywood => (
            format!("hollywoodsink uri=\"hollywood://{b}:9000\" latency={latency_ms}"),
            format!(
                "hollywoodsrc uri=\"hollywood://{b}:9000?mode=listener\" latency={latency_ms} \
                 caps=video/mpegts reorder={} {}",
                std::env::var("GST_COMPARE_REORDER_MS").unwrap_or_else(|_| "-1".into()),
                std::env::var("GST_COMPARE_SRC_PROPS").unwrap_or_default(),
            ),
        ),
        Kind::Srt => (
            format!("srtsink uri=\"srt://{b}:9000?mode=caller\" latency={latency_ms}"),
            // srtsrc 1.22 has no caps property: a capsfilter says it.
            format!("srtsrc uri=\"srt://:9000?mode=listener\" latency={latency_ms} ! video/mpegts"),
        ),
    };
    let v = video;
    let tx_pipeline = format!(
        "videotestsrc is-live=true num-buffers={n} pattern=snow \
         ! video/x-raw,width={w},height={h},framerate={fps}/1 \
         ! x264enc tune=zerolatency speed-preset=ultrafast bitrate={kbps} key-int-max={fps} \
         ! mpegtsmux alignment=7 ! {sink}",
        n = v.frames(),
        w = v.width,
        h = v.height,
        fps = v.fps,
        kbps = v.kbps,
    );
    // The queue frees the source's thread from the sink's clock waits (a
    // live source stamps buffers when it creates them); tsdemux's own
    // 700 ms of live latency is cut to 100 ms so that the transport's
    // latency is what decides which frames are on time.
    let rx_pipeline = format!(
        "{src} ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=0 \
         ! tsdemux latency=100 ! h264parse ! avdec_h264 \
         ! fakesink sync=true max-lateness=20000000 qos=true silent=false"
    );
    let tag = format!("{}-{:?}", lab.name(), kind).to_lowercase();
    let rx_out = std::env::temp_dir().join(format!("{tag}-rx.txt"));
    let tx_out = std::env::temp_dir().join(format!("{tag}-tx.txt"));
    let ns = |h| {
        lab.ns(h)
            .name()
            .expect("lab namespaces are named")
            .to_string()
    };
    let mut rx = launch(&ns(Host::B), plugins, &rx_pipeline, &rx_out);
    std::thread::sleep(Duration::from_millis(1500));
    let mut tx = launch(&ns(Host::A), plugins, &tx_pipeline, &tx_out);
    // The video's duration, then the latency and a margin for the close.
    let end = Instant::now() + Duration::from_secs(u64::from(v.seconds) + 8);
    tx.wait_until(end);
    tx.interrupt(Duration::from_secs(2));
    if !rx.wait_until(Instant::now() + Duration::from_secs(4)) {
        // SRT's source does not end with its caller: stop it.
        rx.interrupt(Duration::from_secs(3));
    }
    let text = std::fs::read_to_string(&rx_out).unwrap_or_default();
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    let tx_text = std::fs::read_to_string(&tx_out).unwrap_or_default();
    Outcome {
        on_time: count("last-message = chain"),
        late: count("\"fakesink0\" (qos)"),
        discontinuities: count("WARNING: from element /GstPipeline:pipeline0/GstTSDemux"),
        stats: last_message(&text, "hollywood-stats"),
        sink_stats: last_message(&tx_text, "hollywood-sink-stats"),
    }
}

/// Drop UDP to port 9000 in b (SRT and QUIC cannot connect).
fn block_udp(lab: &Lab) {
    lab.ns(Host::B)
        .exec(&[
            "iptables", "-A", "INPUT", "-p", "udp", "--dport", "9000", "-j", "DROP",
        ])
        .expect("iptables in b");
}

fn lab(name: &str, rtt: Duration, loss: f64, rate: u64) -> Lab {
    let one_way = rtt / 2;
    let _ = hollywood_io::NetNs::remove_stale(name);
    Lab::up(LabSpec {
        name: format!("{name}-{}", std::process::id()),
        three_hosts: false,
        a_to_b: LinkConfig::new(rate, one_way).with_loss(LossModel::Bernoulli(loss)),
        b_to_a: LinkConfig::new(rate, one_way).with_loss(LossModel::Bernoulli(loss)),
        seed: 7,
        hook: None,
    })
    .expect("lab up")
}

#[test]
fn mpeg_ts_video_crosses_a_lossy_path_and_a_udp_block() {
    if let Some(why) = cannot_run(false) {
        hollywood_test_support::skip(&format!("gst pipeline test {why}"));
        return;
    }
    let plugins = plugin_dir();
    // 5 s of 320x240 at 30 fps over 40 ms RTT and 2 % loss each way,
    // 300 ms of latency (7 RTTs: room for a few repairs).
    let video = Video {
        seconds: 5,
        width: 320,
        height: 240,
        fps: 30,
        kbps: 500,
    };
    let lab = lab("hgst", Duration::from_millis(40), 0.02, 20_000_000);
    let lossy = run(&lab, Kind::Hollywood, video, 300, &plugins);
    eprintln!("lossy path: {lossy:?}");
    block_udp(&lab);
    let blocked = run(&lab, Kind::Hollywood, video, 300, &plugins);
    eprintln!("UDP blocked: {blocked:?}");
    drop(lab);
    let _ = std::fs::remove_dir_all(&plugins);
    // Bound: 80 % of the frames on time. Lost P-frames past the latency
    // are gone and a broken reference costs the frames behind it until
    // the next keyframe (1 s); a keyframe is repaired for its group.
    let bound = video.frames() as usize * 8 / 10;
    assert!(
        lossy.on_time >= bound,
        "lossy path: {} of {} frames on time, expected ≥ {bound}: {lossy:?}",
        lossy.on_time,
        video.frames()
    );
    let stats = lossy.stats.as_deref().unwrap_or_default();
    assert!(
        stats.contains("received=(guint64)"),
        "hollywoodsrc posts its counters on the bus: {stats:?}"
    );
    assert!(
        blocked.on_time >= bound,
        "UDP blocked: {} of {} frames on time, expected ≥ {bound} over TCP: {blocked:?}",
        blocked.on_time,
        video.frames()
    );
    let proto = blocked.stats.as_deref().unwrap_or_default();
    assert!(
        !proto.contains("protocol=(string)quic"),
        "with UDP blocked the connection is not QUIC: {proto}"
    );
}

/// The comparison (`scripts/gst-compare.sh`): `GST_COMPARE_SECONDS`
/// (30), `GST_COMPARE_LATENCY_MS` (400), `GST_COMPARE_REORDER_MS`
/// (hollywoodsrc's `reorder`, -1: its default), `GST_COMPARE_SRC_PROPS`
/// (more hollywoodsrc properties), 720p30 at 2.5 Mb/s over 100 ms RTT
/// and 2 % loss each way; prints one line per run.
#[test]
#[ignore = "a minute and a half of real time: scripts/gst-compare.sh"]
fn compare_with_srt() {
    if let Some(why) = cannot_run(true) {
        hollywood_test_support::skip(&format!("gst comparison {why}"));
        return;
    }
    let env = |k: &str, d: u32| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let seconds = env("GST_COMPARE_SECONDS", 30);
    let latency = env("GST_COMPARE_LATENCY_MS", 400);
    let plugins = plugin_dir();
    let video = Video {
        seconds,
        width: 1280,
        height: 720,
        fps: 30,
        kbps: 2500,
    };
    let frames = video.frames();
    let mut lines = Vec::new();
    for blocked in [false, true] {
        for kind in [Kind::Hollywood, Kind::Srt] {
            let name = if blocked { "hgcmpb" } else { "hgcmp" };
            let lab = lab(name, Duration::from_millis(100), 0.02, 20_000_000);
            if blocked {
                block_udp(&lab);
            }
            let o = run(&lab, kind, video, latency, &plugins);
            let line = format!(
                "{kind:?}{}: {} of {frames} frames on time ({:.1} %), {} dropped late, \
                 {} TS discontinuities, latency {latency} ms; src {}; sink {}",
                if blocked { " (UDP blocked)" } else { "" },
                o.on_time,
                100.0 * o.on_time as f64 / f64::from(frames),
                o.late,
                o.discontinuities,
                o.stats.as_deref().unwrap_or("-"),
                o.sink_stats.as_deref().unwrap_or("-"),
            );
            eprintln!("{line}");
            lines.push(line);
        }
    }
    let _ = std::fs::remove_dir_all(&plugins);
    println!("{}", lines.join("\n"));
}
