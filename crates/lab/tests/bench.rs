//! `hollywood_lab::bench` end to end (root only): a short run of both
//! benchmarks with TUN offloads off and on, each with the host writing
//! frames itself and from its writer thread, with offloads each with
//! received super-packets split and whole. Checks that the report is
//! complete and well-formed, that every transfer moved bytes (each byte is
//! verified against the sender's pattern by the benchmark itself, and the
//! byte counts of both ends must agree, or the run fails) and that the
//! namespaces are gone afterwards. No timing assertions: the numbers
//! depend on the machine.

use hollywood_lab::bench::{self, BenchOptions, OffloadModes, Switch, Which};
use std::sync::{Mutex, MutexGuard};

/// The tests check that no namespace of this process is left, so they
/// run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn namespaces_of_this_process() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("run ip netns list");
    let prefix = format!("hwb-{}-", std::process::id());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn bench_runs_briefly_and_reports_everything() {
    let _serial = serial();
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(
            "bench_runs_briefly_and_reports_everything needs root (network namespaces + TUN)",
        );
        return;
    }
    if std::process::Command::new("iperf3")
        .arg("--version")
        .output()
        .is_err()
    {
        hollywood_test_support::skip(
            "bench_runs_briefly_and_reports_everything needs iperf3 (apt-get install iperf3)",
        );
        return;
    }
    let opts = BenchOptions {
        which: Which::All,
        seconds: 1,
        round_trips: 500,
        offload: OffloadModes::Both,
        tx_thread: Switch::Both,
        rx_whole: Switch::Both,
        queues: 1,
        streams: 1,
    };
    let result = bench::run(&opts);
    assert!(
        namespaces_of_this_process().is_empty(),
        "namespaces left behind: {:?}",
        namespaces_of_this_process()
    );
    let report = result.expect("benchmark run");
    eprint!("{}", report.to_text());

    // The JSON form has every number, finite.
    let json = serde_json::to_value(&report).expect("serialize");
    let t = &json["throughput"];
    assert!(t["kernel"]["gbps"].as_f64().unwrap() > 0.0);
    assert!(t["kernel"]["bytes"].as_u64().unwrap() > 0);
    assert!(t["kernel_reverse"]["gbps"].as_f64().unwrap() > 0.0);
    assert!(t["kernel_reverse"]["bytes"].as_u64().unwrap() > 0);
    for dir in ["engine_to_kernel", "kernel_to_engine"] {
        let runs = t[dir].as_array().unwrap();
        let modes: Vec<bool> = runs
            .iter()
            .map(|r| r["offload"].as_bool().unwrap())
            .collect();
        assert_eq!(modes, vec![false, false, true, true, true, true], "{dir}");
        let flag =
            |k: &str| -> Vec<bool> { runs.iter().map(|r| r[k].as_bool().unwrap()).collect() };
        assert_eq!(
            flag("tx_thread"),
            vec![false, true, false, false, true, true],
            "{dir}"
        );
        // Whole super-packets only mean something with offloads.
        assert_eq!(
            flag("rx_whole"),
            vec![false, false, false, true, false, true],
            "{dir}"
        );
        for r in runs {
            let whole = r["frames_whole"].as_u64().unwrap();
            if !r["rx_whole"].as_bool().unwrap() {
                assert_eq!(whole, 0, "{dir}: {r}");
            } else if dir == "kernel_to_engine" {
                // The kernel sends super-packets: the engine takes them
                // whole.
                assert!(whole > 0, "{dir}: {r}");
            }
        }
        for r in runs {
            assert!(r["bytes"].as_u64().unwrap() > 100_000, "{dir}: {r}");
            let gbps = r["gbps"].as_f64().unwrap();
            let ratio = r["ratio_vs_kernel"].as_f64().unwrap();
            let base = if dir == "engine_to_kernel" {
                "kernel"
            } else {
                "kernel_reverse"
            };
            let kernel = t[base]["gbps"].as_f64().unwrap();
            assert!(gbps > 0.0 && gbps.is_finite(), "{dir}: {r}");
            assert!(
                (ratio - gbps / kernel).abs() < 1e-9,
                "{dir}: ratio is engine/kernel"
            );
            assert_eq!(r["offload_errors"].as_u64(), Some(0), "{dir}: {r}");
        }
        // With offloads the engine's segments travel in fewer TUN writes
        // (sender) or arrive in fewer TUN reads (receiver).
        for on in &runs[2..] {
            if dir == "engine_to_kernel" {
                assert!(on["segments_merged"].as_u64().unwrap() > 0, "{on}");
                assert!(
                    on["frames_out"].as_u64() < on["packets_out"].as_u64(),
                    "{on}"
                );
            } else {
                assert!(on["frames_in"].as_u64() < on["packets_in"].as_u64(), "{on}");
            }
        }
        for off in &runs[..2] {
            assert_eq!(
                off["frames_out"], off["packets_out"],
                "no merging without offloads"
            );
            assert_eq!(off["segments_merged"].as_u64(), Some(0));
        }
    }
    let e = &json["echo"];
    assert_eq!(e["message_bytes"].as_u64(), Some(160));
    let check_latency = |l: &serde_json::Value| {
        assert_eq!(l["round_trips"].as_u64(), Some(500), "{l}");
        let (min, p50, p99, max) = (
            l["min_us"].as_f64().unwrap(),
            l["p50_us"].as_f64().unwrap(),
            l["p99_us"].as_f64().unwrap(),
            l["max_us"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= p50 && p50 <= p99 && p99 <= max, "{l}");
    };
    check_latency(&e["kernel"]);
    let engine = e["engine"].as_array().unwrap();
    assert_eq!(engine.len(), 6);
    for r in engine {
        check_latency(&r["latency"]);
        let ratio = r["ratio_p50"].as_f64().unwrap();
        let expect =
            r["latency"]["p50_us"].as_f64().unwrap() / e["kernel"]["p50_us"].as_f64().unwrap();
        assert!((ratio - expect).abs() < 1e-9);
    }
}

#[test]
fn bench_throughput_over_two_queues_reports_one_and_two_queue_runs() {
    let test = "bench_throughput_over_two_queues_reports_one_and_two_queue_runs";
    let _serial = serial();
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(&format!("{test} needs root (network namespaces + TUN)"));
        return;
    }
    if std::process::Command::new("iperf3")
        .arg("--version")
        .output()
        .is_err()
    {
        hollywood_test_support::skip(&format!("{test} needs iperf3 (apt-get install iperf3)"));
        return;
    }
    let opts = BenchOptions {
        which: Which::Throughput,
        seconds: 1,
        round_trips: 1,
        offload: OffloadModes::On,
        tx_thread: Switch::Default,
        rx_whole: Switch::Default,
        queues: 2,
        streams: 4,
    };
    let result = bench::run(&opts);
    assert!(namespaces_of_this_process().is_empty());
    let report = result.expect("benchmark run");
    eprint!("{}", report.to_text());
    let json = serde_json::to_value(&report).expect("serialize");
    let runs = json["throughput"]["sharded"].as_array().unwrap();
    let shape: Vec<(u64, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["queues"].as_u64().unwrap(),
                r["direction"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (1, "engine_to_kernel"),
            (1, "kernel_to_engine"),
            (2, "engine_to_kernel"),
            (2, "kernel_to_engine"),
        ]
    );
    for r in runs {
        assert_eq!(r["streams"].as_u64(), Some(4), "{r}");
        assert!(r["bytes"].as_u64().unwrap() > 100_000, "{r}");
        assert!(r["gbps"].as_f64().unwrap() > 0.0, "{r}");
        let workers = r["workers"].as_array().unwrap();
        assert_eq!(workers.len() as u64, r["queues"].as_u64().unwrap(), "{r}");
        let conns: u64 = workers
            .iter()
            .map(|w| w["connections"].as_u64().unwrap())
            .sum();
        assert_eq!(conns, 4, "every flow owned by one worker: {r}");
        for w in workers {
            assert_eq!(w["forward_drops"].as_u64(), Some(0), "{r}");
        }
    }
}
