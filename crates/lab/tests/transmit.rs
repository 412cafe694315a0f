//! `hollywood transmit` against `srt-live-transmit` (issue 14's second
//! Done-when, shortened): ffmpeg's MPEG-TS through each relay pair over
//! 100 ms RTT and 2 % loss, SRT's latency derived from the same deadline
//! (`compare::srt_latency_for`), side by side: parity on time, Hollywood's
//! median delay far below SRT's fixed delivery point; then
//! with UDP to the receiver dropped by iptables, where SRT cannot connect
//! and Hollywood falls back to TCP. Root only (namespaces, TUN, iptables,
//! srt-tools, ffmpeg; `scripts/test.sh` installs them).
// A test of an adapter: real threads, clocks and processes.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::compare::{self, CompareSpec, Contender};
use hollywood_lab::ts::TsSource;

#[test]
fn transmit_matches_srt_on_time_with_less_delay_and_delivers_through_blocked_udp() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("transmit vs SRT needs root (namespaces, TUN, iptables)");
        return;
    }
    {
        use hollywood_test_support::{have_tool, skip};
        let tools = [
            ("ffmpeg", "-version"),
            ("ffprobe", "-version"),
            ("srt-live-transmit", "-version"),
        ];
        let missing: Vec<&str> = tools
            .iter()
            .filter(|(t, arg)| !have_tool(t, arg))
            .map(|(t, _)| *t)
            .collect();
        if !missing.is_empty() {
            skip(&format!(
                "transmit vs SRT needs {} (Debian ffmpeg, srt-tools; scripts/test.sh installs them as root)",
                missing.join(", ")
            ));
            return;
        }
    }
    // Removed when dropped, also when an assertion fails.
    let guard = tempfile::Builder::new()
        .prefix("hw-transmit-")
        .tempdir()
        .expect("a temporary directory");
    let dir = guard.path().to_path_buf();
    let mut spec = CompareSpec::live_video(&format!(
        "{}-{}-t",
        hollywood_lab::interop::LAB_PREFIX,
        std::process::id()
    ));
    spec.messages = 800; // 4 s of a 2.1 Mb/s stream
    let rate = (spec.size as f64 * 8.0 / spec.interval.as_secs_f64()) as u64;
    spec.ts = Some(TsSource::encode(&dir, 5, rate, spec.size).expect("ffmpeg encodes"));
    let srt_blocked = Contender::parse("srt+udp-blocked").unwrap();
    let transmit_blocked = Contender::parse("transmit+udp-blocked").unwrap();
    spec.contenders = vec![
        Contender::Srt,
        Contender::Transmit(None),
        srt_blocked,
        transmit_blocked,
    ];
    let rows = compare::run(&spec, |_| {}).expect("the comparison runs");
    print!("{}", compare::table(&rows));
    let (srt, tx, srt_b, tx_b) = (&rows[0], &rows[1], &rows[2], &rows[3]);
    for r in &rows {
        assert_eq!(r.bad_deliveries, 0, "{}", r.transport);
    }
    assert!(tx.error.is_none(), "{:?}", tx.error);
    assert!(
        tx.transport.contains("(quic)"),
        "UDP open: QUIC wins ({})",
        tx.transport
    );
    // ffprobe decodes what arrived.
    assert!(
        tx.ts_frames_decoded.unwrap() > 50,
        "{:?}",
        tx.ts_frames_decoded
    );
    assert!(
        srt.ts_frames_decoded.unwrap() > 50,
        "{:?}",
        srt.ts_frames_decoded
    );
    // SRT runs at the latency derived from the deadline
    // (`compare::srt_latency_for`), so on-time share is parity, not a win:
    // `transmit` within 1 percentage point (8 chunks) of SRT. Spread
    // measured 2026-11-29: five runs of this test gave SRT 800/800 and
    // transmit 800/800 every time; the 3000-chunk release campaign
    // (scripts/compare-campaign.sh, CAMPAIGN=ts) gave SRT 99.90–100 % and
    // transmit 99.97–100 % over three seeds, so the two differ by at most
    // 0.1 point — the tolerance is ten times that.
    assert!(
        tx.on_time_fraction >= srt.on_time_fraction - 0.01,
        "transmit {} on time, SRT {} (tolerance 1 point)",
        tx.on_time,
        srt.on_time
    );
    // What Hollywood adds: delay. SRT delivers at its fixed point (about
    // one-way + latency); `transmit` hands chunks out as they arrive.
    let srt_point_ms = (spec.rtt / 2 + spec.srt_latency()).as_secs_f64() * 1e3;
    assert!(
        tx.delay_p50_ms + 50.0 <= srt_point_ms,
        "transmit p50 {} ms, SRT's delivery point {srt_point_ms} ms",
        tx.delay_p50_ms
    );
    // UDP blocked: SRT delivers nothing, Hollywood still delivers.
    assert_eq!(srt_b.on_time + srt_b.late, 0);
    assert!(tx_b.transport.contains("(hollywood)"), "{}", tx_b.transport);
    // Measured: 799/800 in each of five runs; 99.40–100 % over the
    // campaign's three 3000-chunk runs.
    assert!(
        tx_b.on_time as f64 >= 0.98 * tx_b.messages as f64,
        "{} of {} on time",
        tx_b.on_time,
        tx_b.messages
    );
    assert!(tx_b.ts_frames_decoded.unwrap() > 50);
}
