//! `hollywood dash` end to end: the JSON fields the [DASHing-2018] metrics need,
//! their consistency, the per-chunk CSV, and bad flags refused.

use serde_json::Value;
mod common;
use common::*;

#[test]
fn dash_reports_both_transports_per_seed_and_in_aggregate() {
    let dir = std::env::temp_dir().join(format!("hollywood-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("chunks.csv");
    let v = json(&[
        "dash",
        "--duration",
        "40s",
        "--rtt",
        "200ms",
        "--loss",
        "1%",
        "--seeds",
        "2",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(u(&v, "chunks"), 40);
    let ts = v["transports"].as_array().unwrap();
    assert_eq!(ts.len(), 2);
    for t in ts {
        assert_eq!(u(t, "runs"), 2, "{t}");
        for key in [
            "startup_s",
            "total_stall_s",
            "avg_bitrate_kbps",
            "down_switch_pct",
            "messages_discarded",
        ] {
            let m = f(&t[key], "mean");
            assert!(m.is_finite() && m >= 0.0, "{key}: {m}");
        }
        assert!(f(&t["startup_s"], "mean") > 0.0);
    }
    let runs: Vec<&Value> = v["runs"].as_array().unwrap().iter().collect();
    assert_eq!(runs.len(), 4);
    for r in &runs {
        assert!(r["error"].is_null(), "{r}");
        let kbps = f(r, "avg_bitrate_kbps");
        assert!((1200.0..=5600.0).contains(&kbps), "{kbps}");
    }
    // Standard TCP never discards: a chunk plays only once complete.
    assert!(runs
        .iter()
        .filter(|r| r["transport"] == "tcp")
        .all(|r| u(r, "messages_discarded") == 0));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("transport,seed,chunk,quality"));
    assert_eq!(text.lines().count(), 1 + 4 * 40);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dash_runs_over_the_quic_mappings() {
    let v = json(&[
        "dash",
        "--transport",
        "quic-ss,quic-gop,quic-pps",
        "--duration",
        "20s",
        "--loss",
        "0.5%",
        "--json",
    ]);
    let ts = v["transports"].as_array().unwrap();
    let names: Vec<&str> = ts
        .iter()
        .map(|t| t["transport"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["quic-ss", "quic-gop", "quic-pps"], "{v}");
    for r in v["runs"].as_array().unwrap() {
        assert!(r["error"].is_null(), "{r}");
        assert!(f(r, "avg_bitrate_kbps") >= 1200.0, "{r}");
        // Every message is reliable: nothing goes missing.
        assert_eq!(u(r, "messages_discarded"), 0, "{r}");
    }
    let out = hollywood(&["dash", "--transport", "quic-dgram"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("quic-pps"));
}

#[test]
fn dash_refuses_what_it_does_not_build() {
    for (args, want) in [
        (vec!["dash", "--arch", "push"], "dash-ch6"),
        (
            vec!["dash", "--transport", "quic"],
            "unknown DASH transport",
        ),
        (vec!["dash", "--seeds", "0"], "--seeds"),
        (vec!["dash", "--video", "/nonexistent"], "manifest.mpd"),
        (vec!["dash", "--late", "never"], "lateness"),
        (vec!["dash", "--loss", "70%"], "loss"),
    ] {
        let out = hollywood(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Whether ffmpeg and ffprobe run here; [`skip`](hollywood_test_support::skip)
/// with `test`'s name if not.
fn ffmpeg_or_skip(test: &str) -> bool {
    use hollywood_test_support::{have_tool, skip};
    let ok = have_tool("ffmpeg", "-version") && have_tool("ffprobe", "-version");
    if !ok {
        skip(&format!(
            "dash::{test} needs ffmpeg and ffprobe (apt-get install ffmpeg; scripts/test.sh does it as root)"
        ));
    }
    ok
}

#[test]
fn a_real_video_ladder_plays_and_is_scored_per_transport() {
    if !ffmpeg_or_skip("a_real_video_ladder_plays_and_is_scored_per_transport") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hollywood-ladder-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    dash_ladder(&dir, 6, 3);
    assert!(dir.join("manifest.mpd").is_file() && dir.join("rep3").join("5.ts").is_file());
    let recv = dir.join("received");
    let v = json(&[
        "dash",
        "--video",
        d,
        "--received",
        recv.to_str().unwrap(),
        "--rtt",
        "100ms",
        "--loss",
        "1%",
        "--json",
    ]);
    assert_eq!(u(&v, "chunks"), 6);
    let scores = v["video_scores"].as_array().unwrap();
    assert_eq!(scores.len(), 2);
    for s in scores {
        let psnr = f(s, "psnr_db");
        let ssim = f(s, "ssim");
        assert!(psnr > 25.0 && ssim > 0.8 && ssim <= 1.0, "{s}");
        assert!(std::path::Path::new(s["file"].as_str().unwrap()).is_file());
    }
    quality_lookup_matches_decoding_and_damage_stays_in_its_chunk(&dir);
    // [DASHing-2018] with real video: every run scored, Table 1, Figs 11, 12, 15.
    let repro = dir.join("repro");
    let v = json(&[
        "repro",
        "dash2018",
        "--video",
        d,
        "--seeds",
        "1",
        "--out",
        repro.to_str().unwrap(),
        "--json",
    ]);
    let ladder = v["ladder"].as_array().expect("summary.json has the ladder");
    assert_eq!(ladder.len(), 3);
    for r in ladder {
        assert!(f(r, "psnr_db") > 25.0 && f(r, "ssim") > 0.8, "{r}");
    }
    for fig in [
        "rtt-quality.png",
        "loss-quality.png",
        "profiles-quality.png",
    ] {
        assert!(repro.join(fig).is_file(), "{fig}");
    }
    let claims = v["claims"].as_array().unwrap();
    for c in ["Fig 12", "Fig 15"] {
        assert!(
            claims
                .iter()
                .any(|x| x["stated"].as_str().unwrap_or("").contains(c)),
            "no {c} claim"
        );
    }
    let rtt = &v["scenarios"].as_array().unwrap()[0]["configs"][0];
    assert!(f(&rtt["quality"]["tcp"]["psnr_db"], "mean") > 25.0, "{rtt}");
    let readme = std::fs::read_to_string(repro.join("README.md")).unwrap();
    assert!(readme.contains("Picture quality") && readme.contains("Fig 11"));
    // Without a manifest, --video is refused with what to do.
    let out = hollywood(&["repro", "dash2018", "--video", "/nonexistent"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("dash-ladder"));
    // A ladder whose chunk is gone is refused with the file named.
    std::fs::remove_file(dir.join("rep2").join("3.ts")).unwrap();
    let out = hollywood(&["dash", "--video", d]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("3.ts"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The two ways a run is scored agree: a stream of intact chunks decoded
/// and compared frame by frame gives the values looked up from each
/// representation's scores; a damaged I-frame lowers only its own chunk's
/// frames, and the frame count stays that of the chunks played.
fn quality_lookup_matches_decoding_and_damage_stays_in_its_chunk(dir: &std::path::Path) {
    use hollywood_experiments::dash::quality::{score_frames, LadderQuality};
    use hollywood_media::dash::content::Content;
    let c = Content::from_dir(dir).unwrap();
    let lq = LadderQuality::load_or_compute(dir, &c).unwrap();
    let fpc = lq.frames_per_chunk;
    assert_eq!(fpc, 30);
    assert!(lq.reps.iter().all(|r| r.len() == 6 * fpc));
    // Chunk n at representation plan[n], as a switching client plays them.
    let plan = [0usize, 2, 1, 0, 2, 1];
    let chunk =
        |n: usize| std::fs::read(dir.join(&c.reps[plan[n]].id).join(format!("{n}.ts"))).unwrap();
    let mut ts = Vec::new();
    for n in 0..6 {
        ts.extend(chunk(n));
    }
    let path = dir.join("switching.ts");
    std::fs::write(&path, &ts).unwrap();
    let decoded = score_frames(dir, &path, lq.start, lq.fps, 6 * fpc).unwrap();
    assert_eq!(decoded.len(), 6 * fpc);
    for (i, (p, s)) in decoded.psnr.iter().zip(&decoded.ssim).enumerate() {
        let rep = &lq.reps[plan[i / fpc]];
        assert!(
            (p - rep.psnr[i]).abs() < 0.01,
            "frame {i}: {p} vs {}",
            rep.psnr[i]
        );
        assert!(
            (s - rep.ssim[i]).abs() < 1e-4,
            "frame {i}: {s} vs {}",
            rep.ssim[i]
        );
    }
    // Zero chunk 2's first 4 KB (its I-frame and tables), as lost messages.
    let mut damaged = Vec::new();
    for n in 0..6 {
        let mut b = chunk(n);
        if n == 2 {
            b[..4096].fill(0);
        }
        damaged.extend(b);
    }
    std::fs::write(&path, &damaged).unwrap();
    let d = score_frames(dir, &path, lq.start, lq.fps, 6 * fpc).unwrap();
    assert_eq!(d.len(), 6 * fpc);
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
    for n in [0, 1, 3, 4, 5] {
        let r = n * fpc..(n + 1) * fpc;
        assert!(
            (mean(&d.psnr[r.clone()]) - mean(&decoded.psnr[r])).abs() < 0.01,
            "chunk {n}"
        );
    }
    let r = 2 * fpc..3 * fpc;
    assert!(
        mean(&d.psnr[r.clone()]) < mean(&decoded.psnr[r.clone()]) - 1.0,
        "damaged chunk: {} vs {}",
        mean(&d.psnr[r.clone()]),
        mean(&decoded.psnr[r])
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn dash_ch6_reports_stalls_delays_and_skips_per_architecture() {
    let v = json(&[
        "dash-ch6",
        "--duration",
        "10s",
        "--encoding",
        "7.5mbit,53mbit",
        "--rtt",
        "25ms",
        "--cc",
        "bbr",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 2);
    for r in rows {
        assert_eq!(u(r, "runs"), 1, "{r}");
        let stall = f(&r["total_stall_s"], "mean");
        let skip = f(&r["skip_s"], "mean");
        let arch = r["arch"].as_str().unwrap();
        let over = f(r, "encoding_bps") > 30e6;
        if arch == "hollywood" {
            // Hollywood never stalls: what cannot come in time is skipped.
            assert_eq!(stall, 0.0);
            assert_eq!(skip > 1.0, over, "{r}");
        } else {
            assert_eq!(skip, 0.0);
            assert_eq!(stall > 1.0, over, "{r}");
        }
    }
    let out = hollywood(&["dash-ch6", "--arch", "quic"]);
    assert!(!out.status.success());
}

/// `tshark` with our dissector on `pcap`, printing `fields`.
fn tshark_fields(pcap: &std::path::Path, filter: &str, fields: &[&str]) -> String {
    tshark_fields_with(pcap, &["-d", "tcp.port==80,hollywood"], filter, fields)
}

/// [`tshark_fields`] with `how` instead of `-d tcp.port==80,hollywood`.
fn tshark_fields_with(
    pcap: &std::path::Path,
    how: &[&str],
    filter: &str,
    fields: &[&str],
) -> String {
    let lua = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/wireshark/hollywood.lua"
    );
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-X", &format!("lua_script:{lua}")])
        .args(how)
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]);
    if !filter.is_empty() {
        cmd.args(["-Y", filter]);
    }
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("Lua: Error"), "the dissector failed: {err}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn wireshark_dissects_the_http2_inside_hollywood_messages_and_sees_a_changed_byte() {
    if !hollywood_test_support::have_tool("tshark", "--version") {
        hollywood_test_support::skip("dash::wireshark_dissects_the_http2_inside_hollywood_messages_and_sees_a_changed_byte needs tshark (apt-get install tshark; scripts/test.sh does it as root)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("hollywood-h2pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("hollywood.pcap");
    let out = hollywood(&[
        "dash-ch6",
        "--arch",
        "hollywood",
        "--encoding",
        "12mbit",
        "--rtt",
        "25ms",
        "--loss",
        "0",
        "--duration",
        "3s",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every message's CRC holds; each of the 180 frames is pushed once, a
    // PUSH_PROMISE per frame with its path, then HEADERS and DATA.
    let crc: Vec<String> = tshark_fields(&pcap, "hollywood.crc_ok", &["hollywood.crc_ok"])
        .lines()
        .flat_map(|l| l.split('|').map(str::to_string).collect::<Vec<_>>())
        .filter(|c| !c.is_empty())
        .collect();
    assert!(crc.len() > 180, "{} messages", crc.len());
    assert!(crc.iter().all(|c| c == "1" || c == "True"), "{crc:?}");
    let promised = tshark_fields(&pcap, "http2.type == 5", &["http2.header.value"]);
    let mut paths: Vec<&str> = promised
        .lines()
        .flat_map(|l| l.split('|'))
        .filter(|v| v.starts_with("/chunk/"))
        .collect();
    assert_eq!(paths.len(), 180, "{paths:?}");
    paths.sort_unstable();
    paths.dedup();
    assert_eq!(paths.len(), 180, "a frame pushed twice: {paths:?}");
    assert!(paths.contains(&"/chunk/2/frame/59"));
    let requests = tshark_fields(
        &pcap,
        "http2.type == 1 && http2.header.value == \"GET\"",
        &["http2.header.value"],
    );
    assert!(requests.contains("/chunk/0"), "{requests}");
    // Without Decode As, the heuristic finds the stream by its first frame.
    let heuristic = tshark_fields_with(
        &pcap,
        &["-o", "tcp.try_heuristic_first:TRUE"],
        "http2.type == 5",
        &["frame.number"],
    );
    assert_eq!(heuristic.lines().count(), promised.lines().count());
    // One changed byte (a frame's path inside its PUSH_PROMISE): that
    // message's CRC32C fails, and the dissector says so.
    let mut bytes = std::fs::read(&pcap).unwrap();
    let at = bytes
        .windows(16)
        .position(|w| w == b"/chunk/1/frame/3")
        .expect("the path is in the capture");
    bytes[at + 15] = b'4';
    let bad = dir.join("changed.pcap");
    std::fs::write(&bad, &bytes).unwrap();
    let crc = tshark_fields(&bad, "hollywood.crc_ok == 0", &["frame.number"]);
    assert_eq!(crc.lines().count(), 1, "{crc}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn chapter_6_plays_real_frame_sizes_from_an_ffmpeg_encode() {
    if !ffmpeg_or_skip("chapter_6_plays_real_frame_sizes_from_an_ffmpeg_encode") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hollywood-ch6video-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let out = hollywood(&[
        "dash-ch6-video",
        "--out",
        d,
        "--duration",
        "2s",
        "--encoding",
        "2mbit,4mbit",
        "--size",
        "320x180",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ch6.json")).unwrap()).unwrap();
    assert_eq!(v["gop"], 60);
    let mpd = std::fs::read_to_string(dir.join("manifest.mpd")).unwrap();
    assert!(mpd.contains("bandwidth=\"4000000\""), "{mpd}");
    let frames = v["encodings"][1]["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 120);
    // An I-frame opens each GOP and is larger than the P-frames after it.
    let size = |i: usize| frames[i].as_u64().unwrap();
    assert!(size(60) > size(61) && size(0) > size(1), "{frames:?}");
    let r = json(&[
        "dash-ch6",
        "--video",
        d,
        "--encoding",
        "2mbit,4mbit",
        "--chunk-frames",
        "60",
        "--rtt",
        "25ms",
        "--loss",
        "0",
        "--json",
    ]);
    assert_eq!(r["duration_s"], 2.0);
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for row in rows {
        assert_eq!(u(row, "runs"), 1, "{row}");
        assert!(row["errors"].as_array().unwrap().is_empty(), "{row}");
        assert_eq!(f(&row["total_stall_s"], "mean"), 0.0, "{row}");
    }
    // Chunks must start with an I-frame: a GOP of 60 does not make
    // 30-frame chunks, and an encoding that is not there is named.
    for (args, want) in [
        (
            vec![
                "--chunk-frames",
                "30",
                "--arch",
                "request-response",
                "--encoding",
                "2mbit",
            ],
            "--gop 30",
        ),
        (
            vec!["--chunk-frames", "60", "--encoding", "3mbit"],
            "no encoding at 3000000",
        ),
    ] {
        let mut all = vec!["dash-ch6", "--video", d];
        all.extend(args);
        let out = hollywood(&all);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
