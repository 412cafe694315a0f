//! `hollywood voip`, `hollywood repro ch5` and `hollywood demo` end to end:
//! JSON fields and their consistency, CSV and plot files, bad flags, and the
//! reproduction's output directory.

use serde_json::Value;
use std::path::PathBuf;
mod common;
use common::*;

fn collateral(v: &Value) -> u64 {
    u(v, "collateral_lost")
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hollywood-voip-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn is_png(p: &std::path::Path) -> bool {
    std::fs::read(p).is_ok_and(|b| b.len() > 1000 && b.starts_with(b"\x89PNG\r\n\x1a\n"))
}

#[test]
fn voip_json_fields_are_present_and_consistent() {
    for transport in ["tcp", "hollywood", "hollywood-ir", "hollywood-ooo", "udp"] {
        let v = json(&[
            "voip",
            "--rate",
            "8mbit",
            "--uplink",
            "1mbit",
            "--rtt",
            "70ms",
            "--playout",
            "30ms",
            "--loss",
            "1%",
            "--messages",
            "600",
            "--transport",
            transport,
            "--seed",
            "7",
            "--json",
        ]);
        assert_eq!(v["transport"], transport);
        let n = u(&v, "messages");
        assert_eq!(n, 600);
        let (late, never, lost, played) = (
            u(&v, "late"),
            u(&v, "never_arrived"),
            u(&v, "app_lost"),
            u(&v, "played"),
        );
        assert_eq!(lost, late + never, "{v}");
        assert_eq!(played + lost, n, "{v}");
        let dropped = u(&v, "first_tx_dropped");
        assert!(dropped > 0, "1% loss over 600 messages drops some: {v}");
        let _ = u(&v, "ir_sent");
        let d = &v["transport_delay_ms"];
        let (p50, p90, p99, max) = (f(d, "p50"), f(d, "p90"), f(d, "p99"), f(d, "max"));
        // At least the one-way propagation delay, and ordered.
        assert!(p50 >= 35.0 && p50 <= p90 && p90 <= p99 && p99 <= max, "{v}");
        assert_eq!(f(&v, "lifetime_ms"), 65.0);
        assert_eq!(
            u(&v, "corrupt_delivered") + u(&v, "duplicates_delivered"),
            0
        );
        match transport {
            // Never retransmits: loses exactly what was dropped.
            "udp" => assert_eq!((never, late), (dropped, 0), "{v}"),
            // Retransmits everything, late.
            "tcp" => assert!(never == 0 && late > dropped, "{v}"),
            // Loses only what was dropped (a drop in the call's last
            // messages has no newer message to replace it with, so it may
            // be retransmitted and arrive late instead of never).
            "hollywood" => assert!(lost <= dropped && collateral(&v) == 0, "{v}"),
            _ => {}
        }
    }
}

#[test]
fn voip_writes_csv_and_plot() {
    let dir = temp_dir("files");
    let csv = dir.join("calls.csv");
    let png = dir.join("call.png");
    let v = json(&[
        "voip",
        "--messages",
        "300",
        "--loss-model",
        "gilbert:1%,50%",
        "--transport",
        "tcp",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("id,send_ms,arrival_ms,playout_ms,buffered_ms,transport_delay_ms,outcome,first_tx_dropped,expired")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 300);
    let late = rows.iter().filter(|r| r[6] == "late").count() as u64;
    assert_eq!(late, u(&v, "late"));
    for r in &rows {
        assert_eq!(r.len(), 9);
        if r[6] == "played" {
            let buffered: f64 = r[4].parse().unwrap();
            assert!(buffered >= 0.0);
        }
        if r[6] == "late" {
            assert!(r[4].parse::<f64>().unwrap() < 0.0);
        }
    }
    assert!(is_png(&png));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_flags_exit_1_with_a_message() {
    for args in [
        &["voip", "--rate", "fast"][..],
        &["voip", "--playout", "30"],
        &["voip", "--loss", "150%"],
        &["voip", "--loss-model", "gilbert:1%"],
        &["voip", "--transport", "sctp"],
        &["voip", "--messages", "0"],
        &["voip", "--size", "2000"],
        &["voip", "--no-such-flag"],
        &["voip", "--plot", "/tmp/x.gif", "--messages", "10"],
        &[
            "repro",
            "ch5",
            "--seeds",
            "0",
            "--out",
            "/tmp/hollywood-never",
        ],
        &["repro", "ch5", "--scenario", "/nonexistent/plan.toml"],
        &["repro", "ch7"],
    ] {
        let out = hollywood(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error"), "{args:?}: {err}");
        assert!(out.stdout.is_empty() || args[0] == "voip", "{args:?}");
    }
    // --help is not an error.
    assert_eq!(hollywood(&["voip", "--help"]).status.code(), Some(0));
}

#[test]
fn repro_ch5_writes_summary_readme_and_plots() {
    let dir = temp_dir("repro");
    let out = hollywood(&[
        "repro",
        "ch5",
        "--seeds",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["summary.json", "summary.md", "README.md"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let s: Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["seeds"], serde_json::json!([1, 2]));
    let scenarios = s["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2);
    for sc in scenarios {
        let ts = sc["transports"].as_array().unwrap();
        let names: Vec<&str> = ts
            .iter()
            .map(|t| t["transport"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["tcp", "hollywood-ir", "hollywood", "hollywood-ooo", "udp"]
        );
        for t in ts {
            for k in ["app_lost", "late", "first_tx_dropped", "amplification"] {
                let _ = f(&t[k], "mean");
                let _ = f(&t[k], "sd");
            }
            assert_eq!(t["per_seed"].as_array().unwrap().len(), 2);
            for file in t["files"].as_array().unwrap() {
                let p = dir.join(file.as_str().unwrap());
                if file.as_str().unwrap().ends_with(".png") {
                    assert!(is_png(&p), "{}", p.display());
                } else {
                    assert!(p.is_file());
                }
            }
        }
    }
    let inter = &scenarios[1];
    assert_eq!(inter["name"], "intercontinental");
    let tcp = &inter["transports"][0];
    let hw = &inter["transports"][2];
    // Seeds 1 and 2 both drop messages: TCP amplifies, Hollywood does not.
    assert!(f(&tcp["amplification"], "min") > 1.0, "{tcp}");
    assert!(f(&hw["amplification"], "max") <= 1.0, "{hw}");
    let pngs = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "png")
        })
        .count();
    assert_eq!(pngs, 2 * 5 * 2, "full + zoom per scenario × transport");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for needle in [
        "Fig. 5.4",
        "Fig. 5.16",
        "differs",
        "intercontinental-tcp-zoom.png",
    ] {
        assert!(readme.contains(needle), "README lacks {needle}");
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| hollywood |") && md.contains("±"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repro_reads_a_plan_file() {
    let dir = temp_dir("plan");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        r#"
name = "mini"
seeds = 1
messages = 200
size = 160
interval = "20ms"
rate = "8mbit"
uplink = "1mbit"
loss = "2%"
transports = ["tcp", "udp"]
zoom = 10

[[scenario]]
name = "far"
rtt = "100ms"
playout = "20ms"
figures.tcp = { full = "5.7" }
"#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let v = json(&[
        "repro",
        "ch5",
        "--scenario",
        plan.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["experiment"], "mini");
    assert_eq!(v["runs"], 2);
    assert_eq!(v["scenarios"][0]["rtt_ms"], 100.0);
    assert!(out_dir.join("far-tcp.png").is_file());
    assert!(out_dir.join("far-udp.csv").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_prints_a_table_and_writes_plots() {
    let dir = temp_dir("demo");
    let out = hollywood(&["demo", "--messages", "1000", "--out", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "on time (oracle)",
        "worst delay",
        "hollywood",
        "faster than real time",
    ] {
        assert!(text.contains(needle), "demo output lacks {needle}:\n{text}");
    }
    assert!(is_png(&dir.join("tcp.png")));
    assert!(is_png(&dir.join("hollywood.png")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repro_plan_runs_the_adapter_a_plan_names() {
    let dir = temp_dir("plan-adapter");
    let plan = dir.join("plan.toml");
    let text = r#"
name = "tiny"
adapter = "voip"
seeds = 2
messages = 100
size = 160
interval = "20ms"
rate = "8mbit"
uplink = "1mbit"
loss = "1%"
transports = ["hollywood", "udp"]

[[scenario]]
name = "far"
rtt = "70ms"
playout = "30ms"

[[scenario.expect]]
transport = "udp"
metric = "ir_sent"
every_seed_at_most = 0
claim = "UDP never retransmits"
"#;
    std::fs::write(&plan, text).unwrap();
    let out = dir.join("out");
    let v = json(&[
        "repro",
        "plan",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["schema"]["name"], "hollywood.repro.voip");
    assert_eq!(v["params"]["adapter"], "voip");
    assert_eq!(v["runs"], 4);
    assert_eq!(v["claims"][0]["holds"], true);
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4);
    assert!(
        csv.starts_with("scenario,transport,seed,app_lost,"),
        "{csv}"
    );

    // A plan must name an adapter this binary has.
    for (from, to, needle) in [
        ("adapter = \"voip\"\n", "", "names no adapter"),
        (
            "adapter = \"voip\"",
            "adapter = \"teleport\"",
            "unknown adapter 'teleport'",
        ),
        (
            "metric = \"ir_sent\"",
            "metric = \"stalls\"",
            "unknown metric 'stalls'",
        ),
    ] {
        std::fs::write(&plan, text.replace(from, to)).unwrap();
        let o = hollywood(&[
            "repro",
            "plan",
            plan.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{to}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{to}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
