//! The built-in `fec-arq` plan, shortened: two round trips (one where a
//! retransmission makes the 200 ms deadline, one where it cannot), 2 %
//! loss, both loss models, every arm, one seed and 4 s streams. The
//! pipeline must write its files, and the numbers must be sane: shares
//! within 0-100 %, UDP at its oracle, FEC within its budget and adding to
//! UDP where ARQ is too late, ARQ repairing where it is in time.

use hollywood_experiments::builtin;
use hollywood_experiments::plan::Plan;
use hollywood_experiments::run::Options;

fn shortened() -> Plan {
    let text = builtin::find("fec-arq").expect("the plan is built in").text;
    let full_rtts = r#"rtt = ["50ms", "100ms", "200ms", "300ms", "350ms"]"#;
    let full_losses = r#"loss = ["0.5%", "1%", "2%", "5%"]"#;
    assert!(text.contains(full_rtts) && text.contains(full_losses));
    let text = text
        .replace(full_rtts, r#"rtt = ["50ms", "300ms"]"#)
        .replace(full_losses, r#"loss = ["2%"]"#)
        .replace(r#"duration = "60s""#, r#"duration = "4s""#);
    Plan::parse(&text, Some(1)).unwrap()
}

#[test]
fn the_shortened_plan_writes_its_files_and_sane_numbers() {
    let plan = shortened();
    let out = std::env::temp_dir().join(format!("hollywood-fec-arq-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let opts = Options {
        out: out.clone(),
        jobs: None,
        command: "test".into(),
        progress: false,
    };
    let done = builtin::run(&plan, None, &opts).unwrap();
    // bbr: 2 models × 2 RTTs × 6 arms; cubic: 2 × 2 × 4.
    assert_eq!(done.runs, 24 + 16);
    assert!(done.claims.checked() >= 10, "{:?}", done.claims);

    for f in [
        "summary.json",
        "summary.md",
        "README.md",
        "runs.csv",
        "report.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    for s in ["bbr", "cubic"] {
        for m in ["bernoulli", "gilbert"] {
            for ext in ["png", "svg"] {
                let f = out.join(format!("on-time-{s}-{m}.{ext}"));
                assert!(std::fs::metadata(&f).unwrap().len() > 1000, "{f:?}");
            }
        }
    }

    // runs.csv: one row per run, every metric.
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..6],
        ["scenario", "model", "loss", "rtt", "arm", "seed"]
    );
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 40);
    let num = |r: &Vec<String>, c: &str| r[col(c)].parse::<f64>().ok();
    for r in &rows {
        let on_time = num(r, "on_time_pct").unwrap();
        assert!((0.0..=100.0).contains(&on_time), "{r:?}");
        let oracle = num(r, "oracle_pct").unwrap();
        assert!(oracle > 90.0, "the network delivers most in time: {r:?}");
        // FEC protects where retransmission is too late, and always over UDP.
        let arm = &r[col("arm")];
        let protects = arm == "udp+fec" || arm.ends_with("+fec") && r[col("rtt")] == "300ms";
        assert_eq!(num(r, "fec_overhead_pct").is_some(), protects, "{r:?}");
        if let Some(o) = num(r, "fec_overhead_pct") {
            assert!(o > 0.0 && o <= 25.0 + 1e-9, "{r:?}");
        }
    }
    let find = |scenario: &str, model: &str, rtt: &str, arm: &str| {
        rows.iter()
            .find(|r| {
                r[0] == scenario
                    && r[col("model")] == model
                    && r[col("rtt")] == rtt
                    && r[col("arm")] == arm
            })
            .unwrap_or_else(|| panic!("{scenario} {model} {rtt} {arm}"))
    };
    for model in ["bernoulli", "gilbert"] {
        for rtt in ["50ms", "300ms"] {
            // UDP delivers what the network delivers, no more.
            let udp = find("bbr", model, rtt, "udp");
            assert_eq!(num(udp, "on_time_pct"), num(udp, "oracle_pct"), "{udp:?}");
            assert_eq!(num(udp, "retransmissions"), Some(0.0));
        }
        // Where ARQ is in time it repairs; FEC under UDP always adds.
        let udp = num(find("bbr", model, "50ms", "udp"), "on_time_pct").unwrap();
        for arm in ["quicsilver", "hollywood"] {
            let r = find("bbr", model, "50ms", arm);
            assert!(num(r, "on_time_pct").unwrap() > udp, "{r:?}");
            assert!(num(r, "retransmissions").unwrap() > 0.0, "{r:?}");
            // The FEC layer protects nothing where retransmission is in time.
            let both = find("bbr", model, "50ms", &format!("{arm}+fec"));
            assert_eq!(num(both, "protected_pct"), Some(0.0), "{both:?}");
        }
        let udp = num(find("bbr", model, "300ms", "udp"), "on_time_pct").unwrap();
        let fec = find("bbr", model, "300ms", "udp+fec");
        assert!(num(fec, "on_time_pct").unwrap() > udp, "{fec:?}");
        assert!(num(fec, "rebuilt").unwrap() > 0.0, "{fec:?}");
    }

    // summary.json: stamped, one grid point per model × RTT per scenario.
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["schema"]["name"], "hollywood.repro.fec");
    assert_eq!(v["params"]["duration"], "4s");
    let scenarios = v["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2);
    assert_eq!(scenarios[0]["points"].as_array().unwrap().len(), 4);
    assert_eq!(scenarios[0]["arms"].as_array().unwrap().len(), 6);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("| model | loss | RTT ms | ARQ in time | oracle |"),
        "{md}"
    );
    assert!(md.contains("Gain over UDP"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}
