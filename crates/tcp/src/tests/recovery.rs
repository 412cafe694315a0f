//! Loss recovery: RTO backoff and connection failure (RFC 6298), fast
//! retransmit (RFC 5681), NewReno (RFC 6582) vs SACK (RFC 6675), limited
//! transmit (RFC 3042), D-SACK spurious-retransmission detection (RFC 3708).

use super::{event_time, has_event};
use crate::pair::{Dir, Pair, Verdict};
use crate::{Config, ConnectionStats, Event};
use std::time::Duration;

#[test]
fn rto_backs_off_exponentially_from_min_rto_and_caps() {
    // RACK off: no loss probe ahead of the first RTO (tests::rack).
    let cfg = Config {
        max_rto: Duration::from_secs(3),
        rack: false,
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 41);
    let (ha, _hb) = p.connect();
    // From now on the path to b is dead.
    p.ab.loss = 1.0;
    let mark = p.trace.len();
    p.ca(ha).send(&[1u8; 1000]).unwrap();
    p.run_for(Duration::from_secs(12));
    let times: Vec<_> = p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.len > 0)
        .map(|t| t.time)
        .collect();
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    // RTT 20 ms → RTO clamped to min_rto 200 ms, doubling up to max_rto.
    assert_eq!(gaps[..6], [200, 400, 800, 1600, 3000, 3000]);
    let s = p.ca(ha).stats().clone();
    assert_eq!(s.rto_events as usize, gaps.len());
    // Every retransmission covers the original range (and was lost).
    assert!(p.trace[mark..]
        .iter()
        .filter(|t| t.dir == Dir::AtoB && t.len > 0)
        .all(|t| t.len == 1000 && t.dropped));
}

#[test]
fn connection_times_out_after_max_retransmissions() {
    let cfg = Config {
        max_retransmissions: 4,
        rack: false,
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, 42);
    let (ha, _hb) = p.connect();
    p.ab.loss = 1.0;
    let t0 = p.now;
    p.ca(ha).send(b"into the void").unwrap();
    p.run_for(Duration::from_secs(30));
    let t = event_time(&p.a_events, ha, Event::TimedOut).expect("timed out");
    // 200 + 400 + 800 + 1600 ms of retransmissions, then 3200 ms more.
    assert_eq!((t - t0).as_millis(), 200 + 400 + 800 + 1600 + 3200);
    assert!(has_event(&p.a_events, ha, Event::Closed));
    assert_eq!(p.a.connection_count(), 0);
}

/// Drop the a→b data packets whose index (first transmissions counted on
/// the link) is in `drop`; with `lose_retx`, also the first retransmission
/// of the first dropped segment. RACK-TLP as `rack` says.
pub(super) fn run_with_drops(
    sack: bool,
    rack: bool,
    drop: &'static [u64],
    lose_retx: bool,
    size: usize,
    seed: u64,
) -> ConnectionStats {
    let cfg = Config {
        sack,
        rack,
        ..Config::default()
    };
    let mut p = Pair::new(cfg.clone(), cfg, seed);
    p.ab.rate_bps = Some(20_000_000);
    let (ha, hb) = p.connect();
    let mut n = 0u64;
    let mut first_victim = None;
    let mut retx_dropped = false;
    p.ab.verdict = Some(Box::new(move |i| {
        if i.len == 0 {
            return Verdict::Pass;
        }
        if Some(i.tcp.seq) == first_victim {
            if lose_retx && !retx_dropped {
                retx_dropped = true;
                return Verdict::Drop;
            }
            return Verdict::Pass;
        }
        let k = n;
        n += 1;
        if drop.contains(&k) {
            first_victim.get_or_insert(i.tcp.seq);
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    }));
    let data = Pair::data(size, seed);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(120)), data);
    p.check_segmentation(Dir::AtoB);
    p.ca(ha).stats().clone()
}

#[test]
fn single_loss_is_repaired_by_fast_retransmit() {
    for (sack, rack) in [(true, true), (true, false), (false, true)] {
        let s = run_with_drops(sack, rack, &[20], false, 200_000, 43);
        assert_eq!(
            (s.fast_retransmits, s.rto_events, s.retransmitted_segments),
            (1, 0, 1),
            "sack={sack} rack={rack}"
        );
        assert_eq!(s.sack_recoveries, sack as u64);
        assert_eq!(s.newreno_recoveries, !sack as u64);
    }
}

#[test]
fn sack_retransmits_less_than_newreno_with_several_losses_per_window() {
    // Several losses in one window, and the retransmission of the first
    // one is lost too, so without RACK both variants end in an RTO:
    // NewReno then has no choice but to resend everything outstanding
    // (go-back-N), SACK only the holes (RFC 6675 §5.1). (tests::rack: with
    // RACK-TLP the lost retransmission is found without the RTO.)
    const DROPS: &[u64] = &[40, 43, 46, 49, 52, 55];
    let sack = run_with_drops(true, false, DROPS, true, 600_000, 44);
    let reno = run_with_drops(false, false, DROPS, true, 600_000, 44);
    assert!(sack.sack_recoveries > 0 && reno.newreno_recoveries > 0);
    assert!(sack.rto_events > 0 && reno.rto_events > 0);
    assert!(
        2 * sack.data_bytes_retransmitted < reno.data_bytes_retransmitted,
        "SACK {} vs NewReno {} bytes retransmitted",
        sack.data_bytes_retransmitted,
        reno.data_bytes_retransmitted
    );
    // SACK resends each hole once, plus the lost retransmission.
    assert_eq!(
        sack.retransmitted_segments,
        DROPS.len() as u64 + 1,
        "{sack:?}"
    );
}

#[test]
fn limited_transmit_avoids_a_timeout() {
    // Initial window of 3 segments and the first one lost: only two
    // duplicate ACKs can come back unless new segments are sent on them.
    for (lt, want_rto) in [(true, 0), (false, 1)] {
        let cfg = Config {
            limited_transmit: lt,
            initial_cwnd_segments: 3,
            sack: false,
            ..Config::default()
        };
        let mut p = Pair::new(cfg.clone(), cfg, 45);
        p.ab.rate_bps = Some(10_000_000);
        let (ha, hb) = p.connect();
        // One byte first, so that the window in later ACKs equals the last
        // one seen (RFC 5681 §2 (e): a window change is not a duplicate).
        assert_eq!(p.transfer(ha, hb, b"w", Duration::from_secs(1)), b"w");
        p.run_for(Duration::from_millis(100));
        let mut first = true;
        p.ab.verdict = Some(Box::new(move |i| {
            if i.len > 0 && first {
                first = false;
                Verdict::Drop
            } else {
                Verdict::Pass
            }
        }));
        let data = Pair::data(10 * 1448, 5);
        assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(10)), data);
        let s = p.ca(ha).stats().clone();
        assert_eq!(s.rto_events, want_rto, "limited transmit {lt}: {s:?}");
        assert_eq!(s.fast_retransmits, 1 - want_rto);
    }
}

#[test]
fn dsack_reports_spurious_retransmission_and_undoes() {
    let mut p = Pair::default_pair(46);
    p.ab.rate_bps = Some(10_000_000);
    let (ha, hb) = p.connect();
    let mut n = 0u64;
    p.ab.verdict = Some(Box::new(move |i| {
        if i.len == 0 {
            return Verdict::Pass;
        }
        n += 1;
        // Hold one segment back long enough for three duplicate ACKs.
        if n == 30 {
            Verdict::Delay(Duration::from_millis(15))
        } else {
            Verdict::Pass
        }
    }));
    let data = Pair::data(300_000, 6);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(10)), data);
    let s = p.ca(ha).stats().clone();
    assert_eq!(s.fast_retransmits, 1, "{s:?}");
    assert_eq!(s.retransmitted_segments, 1);
    assert_eq!(s.spurious_retransmissions, 1);
    assert_eq!(s.spurious_recoveries, 1);
    assert_eq!(p.cb(hb).stats().dsack_blocks_sent, 1);
}

/// Regression (found with RACK on the 1%-loss bulk runs): the first new
/// segment sent after a fast retransmit starts exactly at the recovery
/// point. If it is lost too, the ACK that ends recovery stops at
/// `recover`, and the next loss recovery must start there (RFC 6582 §3.2
/// step 2: the cumulative ACK "covers more than" the highest sequence
/// number transmitted before), not wait for the RTO.
#[test]
fn loss_right_at_the_recovery_point_starts_a_new_recovery() {
    for (sack, rack) in [(true, true), (true, false), (false, false)] {
        let cfg = Config {
            sack,
            rack,
            ..Config::default()
        };
        let mut p = Pair::new(cfg.clone(), cfg, 47);
        p.ab.rate_bps = Some(20_000_000);
        let (ha, hb) = p.connect();
        let mut n = 0u64;
        let mut high = None;
        let mut recovery_point = None;
        let mut second_dropped = false;
        p.ab.verdict = Some(Box::new(move |i| {
            if i.len == 0 {
                return Verdict::Pass;
            }
            let end = i.tcp.seq + i.len;
            if high.is_some_and(|h| i.tcp.seq < h) {
                // The fast retransmit: new data continues from here.
                recovery_point.get_or_insert(high.unwrap());
                return Verdict::Pass;
            }
            high = Some(end);
            n += 1;
            if n == 30 || (!second_dropped && Some(i.tcp.seq) == recovery_point) {
                second_dropped |= n != 30;
                return Verdict::Drop;
            }
            Verdict::Pass
        }));
        let data = Pair::data(400_000, 8);
        assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(30)), data);
        p.check_segmentation(Dir::AtoB);
        let s = p.ca(ha).stats().clone();
        assert_eq!(s.rto_events, 0, "sack={sack} rack={rack}: {s:?}");
        assert_eq!(s.fast_retransmits, 2, "sack={sack} rack={rack}: {s:?}");
        assert_eq!(s.retransmitted_segments, 2);
    }
}
