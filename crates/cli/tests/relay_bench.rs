//! `hollywood bench relay` (issue 32), small and quick (root only): five
//! players through the emulated 60 ms, 1 % loss path, SRT beside them,
//! and a lossy player beside four clean ones. Checked: every row has
//! figures (on-time shares near 1 on this light load, CPU per delivered
//! Gb, RSS per connection), the SRT row delivers, the lossy player's
//! iptables rule dropped packets and its share is below the clean ones'.
//! The figures themselves are the documented command (docs/RELAY-BENCH.md),
//! not a test: load figures on a shared 2-core machine are noise.

use serde_json::Value;
use std::process::Command;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn bench_relay_measures_subscribers_srt_and_a_lossy_player() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, TUN, iptables)");
        return;
    }
    if Command::new("srt-live-transmit")
        .arg("-version")
        .output()
        .is_err()
    {
        hollywood_test_support::skip("srt-live-transmit is not installed (srt-tools)");
        return;
    }
    let out = std::env::temp_dir().join(format!("relay-bench-test-{}", std::process::id()));
    let csv = out.join("rows.csv");
    std::fs::create_dir_all(&out).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hollywood"))
        .args([
            "bench",
            "relay",
            "--subscribers",
            "5",
            "--steady",
            "3s",
            "--srt-max",
            "5",
            "--no-loopback",
            "--lossy-clean",
            "4",
            "--lossy-loss",
            "30%",
            "--json",
            "--out",
        ])
        .arg(&out)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let row = |sys: &str| {
        rows.iter()
            .find(|r| r["system"] == sys && r["subscribers"] == 5)
            .unwrap_or_else(|| panic!("no {sys} row: {v}"))
    };
    let h = row("hollywood");
    assert!(h["error"].is_null(), "{h}");
    assert!(f(&h["on_time"]["min"]) > 0.9, "{h}");
    assert_eq!(h["on_time"]["count"], 5, "{h}");
    assert!(f(&h["cpu_s_per_gbit"]) > 0.0, "{h}");
    assert!(f(&h["delivered_gbit"]) > 0.0, "{h}");
    assert!(f(&h["rss_per_conn_kb"]) >= 0.0, "{h}");
    assert!(f(&h["emulator_cpu_share"]) > 0.0, "{h}");
    let s = row("srt");
    assert!(f(&s["on_time"]["p50"]) > 0.9, "{s}");
    assert!(f(&s["cpu_s_per_gbit"]) > 0.0, "{s}");
    let l = &v["lossy"];
    assert!(l["lossy_dropped_packets"].as_u64().unwrap_or(0) > 0, "{l}");
    assert!(f(&l["lossy_share"]) < f(&l["with"]["mean"]), "{l}");
    assert_eq!(l["with"]["count"], 4, "{l}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("system,subscribers,"), "{text}");
    assert_eq!(text.lines().count(), 1 + rows.len(), "{text}");
    let _ = std::fs::remove_dir_all(&out);
}
