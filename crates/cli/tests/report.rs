//! `hollywood repro all` and `hollywood report`: every built-in plan runs
//! into its own directory, and one self-contained page shows them all. The
//! page is loaded in headless Chromium when it is installed (the test
//! script installs it as root): every figure it names must be shown.

mod common;

use common::{hollywood, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hollywood-report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// One `repro all --seeds 1 --duration 10s` for both tests (it is the
/// slow part; every plan's runs cut to 10 simulated seconds where the plan
/// sets a length, so the claims are not the seeds' and are not checked
/// here): its directory and JSON. Tests only read it; what they change,
/// they change in a copy.
fn shared_run() -> &'static (PathBuf, serde_json::Value) {
    static RUN: std::sync::OnceLock<(PathBuf, serde_json::Value)> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let dir = temp_dir("all");
        let v = json(&[
            "repro",
            "all",
            "--out",
            dir.to_str().unwrap(),
            "--seeds",
            "1",
            "--duration",
            "10s",
            "--json",
        ]);
        (dir, v)
    })
}

/// The two tests each call this once when done with [`shared_run`]; the
/// second removes its directory.
fn release_shared_run() {
    static LEFT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(2);
    if LEFT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
        let _ = std::fs::remove_dir_all(&shared_run().0);
    }
}

/// A copy of `from` (files and one level of subdirectories, as `repro
/// all` writes) at `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn ok(args: &[&str]) -> String {
    let out = hollywood(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every `src="…"` of an `<img>` in `html`.
fn image_sources(html: &str) -> Vec<String> {
    html.split("<img ")
        .skip(1)
        .filter_map(|tag| {
            let start = tag.find("src=\"")? + 5;
            let len = tag[start..].find('"')?;
            Some(tag[start..start + len].to_string())
        })
        .collect()
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The `data-*` attributes of `<body …>` in a DOM dump.
fn body_attr(dom: &str, name: &str) -> Option<u64> {
    let body = &dom[dom.find("<body")?..];
    let body = &body[..body.find('>')?];
    let key = format!("{name}=\"");
    let at = body.find(&key)? + key.len();
    body[at..].split('"').next()?.parse().ok()
}

fn headless(browser: &str, index: &Path, extra: &[&str]) -> std::process::Output {
    let url = format!("file://{}", index.display());
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
        ])
        .args(extra)
        .arg(&url)
        .output()
        .expect("run the browser")
}

#[test]
fn repro_all_writes_one_page_that_shows_every_figure() {
    let (shared, v) = shared_run();
    // `report` is checked below by removing files: in a copy.
    let dir = temp_dir("all-copy");
    copy_tree(shared, &dir);
    let d = dir.to_str().unwrap();
    assert_eq!(v["schema"]["name"], "hollywood.repro.all");
    assert_eq!(v["params"]["seeds"], "1");
    assert_eq!(v["params"]["duration"], "10s");
    let repros = v["reproductions"].as_array().unwrap();
    let names: Vec<&str> = repros.iter().map(|r| r["plan"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "ch5",
            "ch5-dupack",
            "quicsilver",
            "rtp-quic",
            "dash2018",
            "ch6",
            "tcp-video",
            "fec-arq"
        ]
    );
    for r in repros {
        assert!(r["claims"].as_u64().unwrap() > 0, "{r}");
        let sub = dir.join(r["plan"].as_str().unwrap());
        for f in [
            "summary.json",
            "summary.md",
            "README.md",
            "runs.csv",
            "report.json",
        ] {
            assert!(sub.join(f).is_file(), "{}/{f}", sub.display());
        }
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(sub.join("summary.json")).unwrap()).unwrap();
        let adapter = match r["plan"].as_str().unwrap() {
            "quicsilver" | "rtp-quic" => "video",
            "tcp-video" => "vod",
            "dash2018" => "dash",
            "ch6" => "ch6",
            "fec-arq" => "fec",
            _ => "voip",
        };
        assert_eq!(s["schema"]["name"], format!("hollywood.repro.{adapter}"));
        assert_eq!(s["params"]["seeds"], 1);
        // The VoIP plans set no length (their calls are the adapter's).
        let length = if adapter == "voip" { None } else { Some("10s") };
        assert_eq!(s["params"]["duration"].as_str(), length, "{r}");
    }

    let index = dir.join("index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    let figures = image_sources(&html);
    // ch5 and ch5-dupack: 2 scenarios × 5 transports × (full + zoom);
    // quicsilver: one latency plot per scenario (5); rtp-quic: one
    // head-of-line scatter, total head-of-line and sending delay (3);
    // quicsilver: also one stack-latency plot per scenario (5);
    // tcp-video: violation curves and latency for none per scenario (4);
    // dash2018: the RTT, loss, BBR and profile panels and the profile-g
    // trace (5; the single-point §5.5 scenarios have no plot); ch6: the
    // four analytical bounds and two per scenario (7 scenarios); fec-arq:
    // on time against RTT per scenario (2) and loss model (2), PNG and SVG.
    assert_eq!(
        figures.len(),
        2 * 2 * 5 * 2 + 5 + 5 + 3 + 4 + 5 + 4 + 2 * 7 + 2 * 2 * 2,
        "{figures:?}"
    );
    for f in &figures {
        assert!(
            dir.join(f).is_file(),
            "the page names {f}, which is missing"
        );
    }
    // Self-contained: nothing is fetched from the network.
    for needle in ["http://", "https://", "<link", "<iframe"] {
        assert!(!html.contains(needle), "index.html contains {needle}");
    }
    assert!(html.contains("Fig. 5.16") && html.contains("holds"));

    // `report` rebuilds the same page from the results on disk.
    std::fs::remove_file(&index).unwrap();
    assert!(ok(&["report", d]).contains("index.html"));
    assert_eq!(std::fs::read_to_string(&index).unwrap(), html);

    // A missing figure is an error, not a page with a hole.
    std::fs::remove_file(dir.join(&figures[0])).unwrap();
    let out = hollywood(&["report", d]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
    let _ = std::fs::remove_dir_all(&dir);
    release_shared_run();
}

#[test]
fn the_page_opens_in_chromium_with_every_figure_shown() {
    let Some(browser) = chromium() else {
        hollywood_test_support::skip(
            "report::the_page_opens_in_chromium_with_every_figure_shown: no chromium \
             (apt-get install chromium; scripts/test.sh does it as root)",
        );
        release_shared_run();
        return;
    };
    let dir = temp_dir("chromium");
    copy_tree(&shared_run().0, &dir);
    let index = dir.join("index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    let expected = image_sources(&html).len() as u64;
    assert!(expected > 0);

    // The page counts its images once loaded and writes the counts on <body>.
    let out = headless(browser, &index, &["--dump-dom"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        body_attr(&dom, "data-figures"),
        Some(expected),
        "{}",
        &dom[..dom.len().min(400)]
    );
    assert_eq!(body_attr(&dom, "data-figures-loaded"), Some(expected));
    assert_eq!(body_attr(&dom, "data-figures-broken"), Some(0));

    // The count can fail: a page whose first figure is gone reports it.
    let first = &image_sources(&html)[0];
    let broken = dir.join("broken.html");
    std::fs::write(
        &broken,
        html.replacen(&format!("src=\"{first}\""), "src=\"gone.png\"", 1),
    )
    .unwrap();
    let out = headless(browser, &broken, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_eq!(body_attr(&dom, "data-figures-broken"), Some(1));

    // And a screenshot of the page, kept beside it.
    let shot = dir.join("index.png");
    let arg = format!("--screenshot={}", shot.display());
    let out = headless(browser, &index, &[&arg, "--window-size=1200,1600"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    release_shared_run();
}
