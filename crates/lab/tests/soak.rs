//! A short soak on real packets (root only): 20 s of the issue-15 soak's
//! workload (engine at both ends, 5 % loss each way, 40 ms RTT). Every
//! message delivered or reported expired, none corrupt or duplicated,
//! every reliable one delivered, no stall longer than 2 RTO. Memory
//! growth is judged by the 10-minute command (`hollywood soak`,
//! docs/SOAK.md), not here: 20 s cannot tell a leak from a warm-up.
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::soak::{self, SoakSpec};
use std::time::Duration;

#[test]
fn a_short_soak_accounts_for_every_message_without_stalls() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("the soak needs root (network namespaces, TUN devices)");
        return;
    }
    let _ = hollywood_io::NetNs::remove_stale(soak::LAB_PREFIX);
    let mut spec = SoakSpec::new(&format!("{}-{}", soak::LAB_PREFIX, std::process::id()));
    spec.duration = Duration::from_secs(20);
    spec.warmup = Duration::from_secs(5);
    let r = soak::run(&spec, |_| {}).expect("soak");
    eprintln!(
        "sent {} delivered {} expired-only {} unaccounted {} stall {:.0}/{:.0} ms rss {:+.1} %",
        r.sent,
        r.delivered,
        r.expired_only,
        r.unaccounted,
        r.longest_stall_ms,
        r.stall_bound_ms,
        r.rss_growth_pct
    );
    assert_eq!(r.error, None);
    assert_eq!(r.sent, 4000);
    assert_eq!(r.unaccounted, 0, "{:?}", r.violations);
    assert_eq!((r.corrupt, r.duplicates), (0, 0));
    assert_eq!(r.reliable_delivered, u64::from(r.reliable_sent));
    assert!(
        r.network_dropped.0 > 0 && r.network_dropped.1 > 0,
        "no loss applied"
    );
    assert!(r.stall_bound_ms > 0.0, "no RTO sampled");
    assert!(
        r.longest_stall_ms <= r.stall_bound_ms,
        "stall {} ms > 2 RTO {} ms",
        r.longest_stall_ms,
        r.stall_bound_ms
    );
    assert!(r.samples.len() >= 19, "{} samples", r.samples.len());
}
