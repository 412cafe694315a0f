//! `hollywood analyze` end to end: the binary's JSON for thesis Table 5.1 and
//! eq. (5.4)–(5.7), the plot files, and bad input.

use std::path::PathBuf;
mod common;
use common::*;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hollywood-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn table_5_1_json() {
    let v = json(&["analyze", "table-5.1", "--json"]);
    assert_eq!(v["schema"]["name"], "hollywood.analyze.table-5.1");
    let rows = v["results"].as_array().expect("an array");
    let got: Vec<(String, f64, f64, f64, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["application"].as_str().unwrap().to_string(),
                f(r, "t_max_ms"),
                // Table 5.1 prints one decimal.
                (f(r, "rtt_bound_standard_ms") * 10.0).round() / 10.0,
                (f(r, "rtt_bound_hollywood_ms") * 10.0).round() / 10.0,
                r["utility_standard"].as_str().unwrap().to_string(),
                r["utility_hollywood"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        (
            "Voice telephony",
            150.0,
            33.3,
            220.0,
            "Within a continent",
            "Intercontinental",
        ),
        (
            "On-demand video",
            30000.0,
            13333.3,
            52000.0,
            "Intercontinental",
            "Intercontinental",
        ),
        ("IPTV", 1000.0, 0.0, 1200.0, "None", "Intercontinental"),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|&(a, t, s, h, us, uh)| (a.to_string(), t, s, h, us.to_string(), uh.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn table_5_1_human() {
    let out = hollywood(&["analyze", "table-5.1"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "33.3",
        "220.0",
        "13333.3",
        "52000.0",
        "1200.0",
        "Within a continent",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

#[test]
fn intercontinental_voice_point() {
    // §5.1.2's intercontinental scenario: 70 ms RTT, 30 ms playout.
    let v = json(&[
        "analyze",
        "--tmax",
        "150ms",
        "--framing",
        "20ms",
        "--rtt",
        "70ms",
        "--playout",
        "30ms",
        "--json",
    ]);
    let p = &v["point"];
    assert_eq!(p["region"], "hollywood-useful");
    assert_eq!(f(p, "rexmit_ms"), 130.0); // eq. 5.2
    assert_eq!(p["standard_useful_playout_ms"]["empty"], true); // 150 > 95
    assert_eq!(f(&p["feasible_playout_ms"], "upper_ms"), 95.0);
    assert_eq!(f(p, "one_way_delay_ms"), 85.0); // eq. 5.1
    assert_eq!(f(p, "t_hol_ms"), 100.0); // eq. 5.6
    assert_eq!(p["n_hol"], 5); // eq. 5.7
                               // Intracontinental: 15 ms RTT, 110 ms playout, standard useful, no blocking.
    let v = json(&[
        "analyze",
        "--tmax",
        "150ms",
        "--framing",
        "20ms",
        "--rtt",
        "15ms",
        "--playout",
        "110ms",
        "--json",
    ]);
    assert_eq!(v["point"]["region"], "standard-useful");
    assert_eq!(v["point"]["n_hol"], 0);
    assert_eq!(
        f(&v["point"]["standard_useful_playout_ms"], "lower_ms"),
        95.0
    );
}

#[test]
fn plots_png_and_svg() {
    let dir = temp_dir("analyze-plot");
    let png = dir.join("fig5.2.png");
    let svg = dir.join("fig5.2.svg");
    for (path, rtt) in [(&png, Some("70ms")), (&svg, None)] {
        let mut args = vec!["analyze", "--tmax", "150ms", "--framing", "20ms"];
        if let Some(r) = rtt {
            args.extend(["--rtt", r]);
        }
        args.extend(["--plot", path.to_str().unwrap(), "--json"]);
        let v = json(&args);
        assert_eq!(v["plot"].as_str(), path.to_str());
    }
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.len() > 1000);
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("<polygon"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_1_with_a_message() {
    let dir = temp_dir("analyze-bad");
    let pdf = dir.join("x.pdf");
    let cases: [(Vec<&str>, &str); 6] = [
        (
            vec![
                "analyze",
                "--tmax",
                "150",
                "--framing",
                "20ms",
                "--rtt",
                "70ms",
            ],
            "needs a unit",
        ),
        (
            vec![
                "analyze",
                "--tmax",
                "150ms",
                "--framing",
                "0ms",
                "--rtt",
                "70ms",
            ],
            "framing",
        ),
        (
            vec![
                "analyze",
                "--tmax",
                "150ms",
                "--framing",
                "20ms",
                "--rtt",
                "-5ms",
            ],
            "--rtt",
        ),
        (
            vec![
                "analyze",
                "--tmax",
                "150ms",
                "--framing",
                "20ms",
                "--playout",
                "5ms",
            ],
            "--playout needs --rtt",
        ),
        (
            vec!["analyze", "--framing", "20ms", "--rtt", "70ms"],
            "--tmax",
        ),
        (
            vec![
                "analyze",
                "--tmax",
                "150ms",
                "--framing",
                "20ms",
                "--plot",
                pdf.to_str().unwrap(),
            ],
            ".png or .svg",
        ),
    ];
    for (args, needle) in cases {
        let out = hollywood(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(!pdf.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chapter_6_bounds_json_and_figures() {
    let v = json(&["analyze", "ch6", "--json"]);
    assert_eq!(v["schema"]["name"], "hollywood.analyze.ch6");
    let rows = v["results"].as_array().unwrap();
    // 4 encodings × 2 RTTs.
    assert_eq!(rows.len(), 8);
    let r = &rows[0];
    assert_eq!(
        (r["encoding_mbps"].as_f64(), r["rtt_ms"].as_f64()),
        (Some(7.5), Some(25.0))
    );
    let ms = |k: &str| r[k].as_f64().unwrap() * 1e3;
    assert!((ms("request_response") - 33.33).abs() < 0.01);
    assert!((ms("request_response_lossy") - 68.3).abs() < 0.1);
    assert!((ms("progressive") - 55.4).abs() < 0.1);
    assert!((ms("hollywood") - 29.2).abs() < 0.1);
    // 53 Mb/s over 30 Mb/s: infeasible for every architecture.
    let r53 = &rows[3];
    assert_eq!(r53["encoding_mbps"].as_f64(), Some(53.0));
    for k in [
        "request_response",
        "request_response_lossy",
        "progressive",
        "hollywood",
    ] {
        assert!(r53[k].is_null(), "{k}");
    }
    let dir = temp_dir("analyze-ch6");
    let d = dir.to_str().unwrap();
    let out = hollywood(&["analyze", "ch6", "--plot-dir", d]);
    assert!(out.status.success(), "{out:?}");
    for f in ["fig-6.4", "fig-6.7", "fig-6.11", "fig-6.15"] {
        let p = dir.join(format!("{f}.png"));
        assert!(
            std::fs::metadata(&p).unwrap().len() > 1000,
            "{}",
            p.display()
        );
    }
    let out = hollywood(&["analyze", "ch6", "--encoding", "0mbit"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--encoding"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn chapter_6_per_chunk_equations() {
    // REFERENCES.md thesis ch. 6, derived bounds: 3601 requests at 50 ms chunks, 361 at 500 ms, in
    // the 3-minute session (eq. 6.1).
    for (chunk, requests) in [("50ms", 3601.0), ("500ms", 361.0)] {
        let v = json(&["analyze", "ch6", "--chunk", chunk, "--json"]);
        let c = &v["results"][0]["chunk"];
        assert_eq!(c["n_requests"].as_f64(), Some(requests), "{chunk}");
    }
    let v = json(&[
        "analyze",
        "ch6",
        "--chunk",
        "50ms",
        "--encoding",
        "7.5mbit",
        "--rtt",
        "25ms",
        "--stalls",
        "0.5s,1.5s",
        "--json",
    ]);
    let r = &v["results"][0];
    let c = &r["chunk"];
    let f = |k: &str| c[k].as_f64().unwrap();
    // 7.5 Mb/s × 50 ms = 375 kbit, 12.5 ms at 30 Mb/s (eqs. 6.6, 6.7);
    // fetch 37.5 ms (6.8); T_rexmit 25 + 3 × 0.4 ms (6.11).
    assert!((f("chunk_bits") - 375_000.0).abs() < 1e-6);
    assert!((f("download") * 1e3 - 12.5).abs() < 1e-9);
    assert!((f("fetch_lossless") * 1e3 - 37.5).abs() < 1e-9);
    assert!((f("rexmit") * 1e3 - 26.2).abs() < 1e-9);
    assert!((f("fetch_lossy") * 1e3 - 63.7).abs() < 1e-9);
    // Eq. 6.4: 50 ms is above the lossless bound (33.3 ms) and below the
    // lossy one (68.3 ms).
    assert_eq!(c["smooth_lossless"].as_bool(), Some(true));
    assert_eq!(c["smooth_lossy"].as_bool(), Some(false));
    // Eq. 6.15 with one-frame fragments: the 3 frames of the chunk, each
    // R_enc / fps = 125 kbit, at 30 Mb/s.
    assert!((f("download_progressive") * 1e3 - 12.5).abs() < 1e-9);
    // Eq. 6.18: the drift is the sum of the stalls.
    assert_eq!(r["offset_s"].as_f64(), Some(2.0));
    let out = hollywood(&["analyze", "ch6", "--chunk", "0ms"]);
    assert_eq!(out.status.code(), Some(1));
    let out = hollywood(&["analyze", "ch6", "--chunk", "1s", "--fragment-frames", "0"]);
    assert_eq!(out.status.code(), Some(1));
}
