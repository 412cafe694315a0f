//! `hollywood lab up|exec|status|down` end to end (root only): the lab and
//! its background emulator appear, `up` twice replaces them, `down` leaves
//! no namespace, process or run directory, and a failing `up` leaves
//! nothing behind. Lab names are `hwn-PID-TAG`.

mod common;

use common::hollywood;
use std::path::PathBuf;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn setup(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(&format!(
            "{test} needs root (network namespaces + TUN devices)"
        ));
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _ = hollywood_io::NetNs::remove_stale("hwn");
    Some(guard)
}

/// Runs `hollywood lab down --name NAME` on drop, so a failing test does
/// not leave a lab and an emulator process behind.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = hollywood(&["lab", "down", "--name", &self.0]);
    }
}

fn namespaces_of(name: &str) -> Vec<String> {
    let list = hollywood_io::netns::run_command("ip", &["netns", "list"]).unwrap();
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{name}-")))
        .map(str::to_owned)
        .collect()
}

/// Pids of processes whose command line mentions `netem run --lab NAME`.
fn emulators_of(name: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'));
        if cmd.contains("netem run") && cmd.contains(&format!("--lab {name} ")) && !zombie {
            pids.push(pid);
        }
    }
    pids
}

fn ok(args: &[&str]) -> String {
    let out = hollywood(args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn up_twice_then_down_leaves_nothing() {
    let Some(_g) = setup("up_twice_then_down_leaves_nothing") else {
        return;
    };
    let name = format!("hwn-{}-cli", std::process::id());
    let _down = Down(name.clone());
    ok(&[
        "lab", "up", "--name", &name, "--rate", "20mbit", "--rtt", "10ms",
    ]);
    let first = emulators_of(&name);
    assert_eq!(first.len(), 1, "one emulator after the first up");
    // Again, as a three-host lab: replaces the first one.
    ok(&[
        "lab", "up", "--name", &name, "--hosts", "3", "--rtt", "20ms", "--seed", "5",
    ]);
    let second = emulators_of(&name);
    assert_eq!(second.len(), 1, "exactly one emulator after the second up");
    assert_ne!(first, second);
    assert_eq!(namespaces_of(&name).len(), 4);

    // exec returns the command's status; the emulated RTT is there.
    let out = ok(&[
        "lab",
        "exec",
        "a",
        "--name",
        &name,
        "--",
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "10.88.2.2",
    ]);
    // min/avg/max: the emulator adds exactly the configured delay, so the
    // fastest ping shows it; a loaded machine (the rest of the suite) only
    // adds scheduling delay on top, which the average may show (21.4 ms
    // once under load).
    let rtt = |k: usize| -> f64 {
        out.lines()
            .find(|l| l.contains("min/avg/max"))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.trim().split('/').nth(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no ping summary in {out}"))
    };
    let (min, avg) = (rtt(0), rtt(1));
    assert!(
        (20.0..21.0).contains(&min),
        "min RTT {min} ms for 20 ms configured"
    );
    assert!(avg < 25.0, "average RTT {avg} ms for 20 ms configured");
    let status = hollywood(&[
        "lab", "exec", "b", "--name", &name, "--", "sh", "-c", "exit 7",
    ]);
    assert_eq!(status.status.code(), Some(7));
    let st = ok(&["lab", "status", "--name", &name, "--json"]);
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["up"], true);
    assert_eq!(st["emulator_pid"].as_u64(), Some(u64::from(second[0])));

    let out = ok(&["lab", "down", "--name", &name]);
    assert!(out.contains("is down"), "{out}");
    assert!(
        namespaces_of(&name).is_empty(),
        "{:?}",
        namespaces_of(&name)
    );
    assert!(emulators_of(&name).is_empty(), "{:?}", emulators_of(&name));
    assert!(!PathBuf::from("/run/hollywood").join(&name).exists());
    // down again: nothing to do, no error.
    let out = ok(&["lab", "down", "--name", &name]);
    assert!(out.contains("not up"), "{out}");
}

/// Removes a file on drop.
struct RemoveFile(PathBuf);

impl Drop for RemoveFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn failing_up_leaves_nothing_behind() {
    let Some(_g) = setup("failing_up_leaves_nothing_behind") else {
        return;
    };
    let name = format!("hwn-{}-fail", std::process::id());
    let _down = Down(name.clone());
    // A plain file where `up` wants its run directory: it fails after the
    // namespaces exist and must remove them again.
    std::fs::create_dir_all("/run/hollywood").unwrap();
    let blocker = PathBuf::from("/run/hollywood").join(&name);
    std::fs::write(&blocker, b"not a directory").unwrap();
    let _rm = RemoveFile(blocker);
    let out = hollywood(&["lab", "up", "--name", &name, "--rtt", "10ms"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hollywood: error: cannot create"), "{err}");
    assert!(
        namespaces_of(&name).is_empty(),
        "{:?}",
        namespaces_of(&name)
    );
    assert!(emulators_of(&name).is_empty());
}

#[test]
fn bad_arguments_fail_before_touching_anything() {
    // No root needed: parameters and files are checked first.
    for (args, needle) in [
        (vec!["lab", "up", "--rtt", "40"], "needs a unit"),
        (
            vec!["lab", "up", "--a2b", "speed=1mbit"],
            "unknown link parameter 'speed'",
        ),
        (
            vec!["lab", "up", "--trace-a2b", "/nonexistent/t"],
            "/nonexistent/t",
        ),
        (vec!["lab", "up", "--name", "bad name"], "bad lab name"),
        (vec!["lab", "up", "--hosts", "4"], "4"),
        (
            vec!["netem", "run", "--a2b", "loss=2"],
            "between 0% and 100%",
        ),
    ] {
        let out = hollywood(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `hollywood lab messages` prints the keys of `sim messages` for QUIC and
/// for a TCP deployment, runs several transports in one table, and leaves
/// no lab behind.
#[test]
fn lab_messages_prints_the_sim_keys() {
    let Some(_g) = setup("lab_messages_prints_the_sim_keys") else {
        return;
    };
    let name = format!("hwn-{}-m", std::process::id());
    let common = [
        "--rate",
        "8mbit",
        "--rtt",
        "60ms",
        "--loss",
        "1%",
        "--size",
        "1000",
        "--interval",
        "10ms",
        "--lifetime",
        "150ms",
        "--messages",
        "200",
        "--json",
    ];
    let run = |sub: &[&str], transport: &str| -> serde_json::Value {
        let mut args: Vec<&str> = sub.to_vec();
        args.extend(["--transport", transport]);
        args.extend(common);
        serde_json::from_str(&ok(&args)).expect("JSON")
    };
    let keys = |v: &serde_json::Value| {
        v.as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "schema" && *k != "params")
            .cloned()
            .collect::<Vec<_>>()
    };
    let sim = run(&["sim", "messages"], "quic-pps");
    let lab = run(&["lab", "messages", "--name", &name], "quic-pps,hollywood");
    assert_eq!(lab["schema"]["name"], "hollywood.lab.messages");
    assert_eq!(sim["schema"]["name"], "hollywood.sim.messages");
    let rows = lab["results"].as_array().expect("one row per transport");
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(keys(r), keys(&sim), "{r}");
        assert_eq!(r["error"], serde_json::Value::Null, "{r}");
        assert_eq!(r["sent"], 200, "{r}");
        assert_eq!(r["corrupt_delivered"], 0, "{r}");
    }
    assert_eq!(rows[0]["transport"], "quic-pps");
    assert_eq!(rows[1]["transport"], "hollywood");
    assert!(namespaces_of(&name).is_empty(), "labs deleted");
}
