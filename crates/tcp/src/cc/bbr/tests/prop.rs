//! Property test: random sequences of hook calls keep the invariants.

use super::*;
use crate::cc::RateSample;
use hollywood_wire::SeqNumber;
use proptest::prelude::*;

/// One step of the property test.
#[derive(Debug, Clone)]
enum Op {
    /// `on_send`, with this many bytes in flight before it.
    Send {
        len: u16,
        inflight: u32,
        app_limited: bool,
    },
    /// `on_delivery` for an ACK of `acked` bytes that marked `lost`
    /// bytes lost, with `inflight_pct` % of cwnd left in flight.
    Ack {
        acked: u32,
        lost: u32,
        inflight_pct: u16,
        sample: Option<Rs>,
        in_recovery: bool,
        srtt_us: Option<u32>,
    },
    /// `on_segment_lost`.
    Lost {
        len: u16,
        tx_in_flight: u32,
        lost_since: u32,
        app_limited: bool,
    },
    Rto,
    RecoveryStart,
    RecoveryEnd,
    Spurious,
    /// Time passes.
    Idle {
        ms: u32,
    },
    RttSample {
        us: u32,
    },
    SetMss {
        mss: u16,
    },
}

/// A random rate sample (`prior_delivered` is `back` bytes before
/// C.delivered).
#[derive(Debug, Clone)]
struct Rs {
    delivered: u32,
    interval_us: u64,
    back: u32,
    app_limited: bool,
    tx_in_flight: u32,
    lost: u32,
    rtt_us: Option<u32>,
}

fn op() -> impl Strategy<Value = Op> {
    let sample = proptest::option::weighted(
        0.9,
        (
            any::<u32>(),
            prop_oneof![0..2_000_000u64, 0..20_000_000u64, Just(0u64), any::<u64>()],
            any::<u32>(),
            any::<bool>(),
            any::<u32>(),
            0..50_000u32,
            proptest::option::of(0..2_000_000u32),
        )
            .prop_map(
                |(delivered, interval_us, back, app_limited, tx_in_flight, lost, rtt_us)| Rs {
                    delivered,
                    interval_us,
                    back,
                    app_limited,
                    tx_in_flight,
                    lost,
                    rtt_us,
                },
            ),
    );
    prop_oneof![
        10 => (1..=9000u16, any::<u32>(), proptest::bool::weighted(0.2))
            .prop_map(|(len, inflight, app_limited)| Op::Send { len, inflight, app_limited }),
        12 => (
            prop_oneof![0..20_000u32, any::<u32>()],
            prop_oneof![4 => Just(0u32), 1 => 0..10_000u32],
            0..=300u16,
            sample,
            proptest::bool::weighted(0.2),
            proptest::option::of(0..2_000_000u32),
        )
            .prop_map(|(acked, lost, inflight_pct, sample, in_recovery, srtt_us)| Op::Ack {
                acked,
                lost,
                inflight_pct,
                sample,
                in_recovery,
                srtt_us,
            }),
        3 => (1..=9000u16, any::<u32>(), any::<u32>(), any::<bool>()).prop_map(
            |(len, tx_in_flight, lost_since, app_limited)| Op::Lost {
                len,
                tx_in_flight,
                lost_since,
                app_limited,
            }
        ),
        1 => Just(Op::Rto),
        1 => Just(Op::RecoveryStart),
        1 => Just(Op::RecoveryEnd),
        1 => Just(Op::Spurious),
        3 => prop_oneof![0..50u32, 0..20_000u32, Just(u32::MAX)].prop_map(|ms| Op::Idle { ms }),
        1 => (0..5_000_000u32).prop_map(|us| Op::RttSample { us }),
        1 => (0..=9000u16).prop_map(|mss| Op::SetMss { mss }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Any sequence of hook calls: no panic, and the invariants hold
    /// after every step.
    #[test]
    fn random_operations_keep_the_invariants(
        base in prop_oneof![Just(0u64), 0..u64::MAX / 4, Just(u64::MAX - 1_000_000)],
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let mut cc = Bbr::new(SMSS as usize, IW);
        let mut now = T0;
        let (mut delivered, mut lost) = (base, base / 2);
        let mut rto_window = false;
        let mut checked = 0;
        for op in ops {
            match op {
                Op::Send { len, inflight, app_limited } => {
                    cc.on_send(now, u64::from(inflight), usize::from(len), app_limited);
                }
                Op::Ack { acked, lost: l, inflight_pct, sample, in_recovery, srtt_us } => {
                    now += Duration::from_micros(u64::from(acked % 5000));
                    delivered = delivered.saturating_add(u64::from(acked));
                    lost = lost.saturating_add(u64::from(l));
                    let inflight = (cc.cwnd / 100).saturating_mul(u64::from(inflight_pct));
                    let rate = sample.map(|r| RateSample {
                        delivered: u64::from(r.delivered),
                        interval: Duration::from_micros(r.interval_us),
                        prior_delivered: delivered.saturating_sub(u64::from(r.back)),
                        is_app_limited: r.app_limited,
                        tx_in_flight: u64::from(r.tx_in_flight),
                        lost: u64::from(r.lost),
                        newly_acked: u64::from(acked),
                        newly_lost: u64::from(l),
                        rtt: r.rtt_us.map(|us| Duration::from_micros(u64::from(us))),
                    });
                    let srtt = srtt_us.map(|us| Duration::from_micros(u64::from(us)));
                    cc.on_delivery(&DeliveryEvent {
                        now,
                        delivered,
                        lost,
                        inflight,
                        rate,
                        min_rtt: srtt,
                        srtt,
                        in_recovery,
                    });
                    rto_window = false;
                }
                Op::Lost { len, tx_in_flight, lost_since, app_limited } => {
                    cc.on_segment_lost(&LostSegment {
                        now,
                        len: u64::from(len),
                        tx_in_flight: u64::from(tx_in_flight),
                        lost_at_send: lost.saturating_sub(u64::from(lost_since)),
                        delivered_at_send: delivered,
                        is_app_limited: app_limited,
                    });
                }
                Op::Rto => {
                    cc.on_rto(now, cc.cwnd());
                    rto_window = true;
                }
                Op::RecoveryStart => cc.on_congestion_event(now, cc.cwnd()),
                Op::RecoveryEnd => cc.on_recovery_end(now, cc.cwnd() / 2),
                Op::Spurious => cc.on_spurious_congestion(now),
                Op::Idle { ms } => now += Duration::from_millis(u64::from(ms)),
                Op::RttSample { us } => cc.on_rtt_sample(
                    now,
                    Duration::from_micros(u64::from(us)),
                    SeqNumber(0),
                    SeqNumber(0),
                ),
                Op::SetMss { mss } => cc.set_mss(usize::from(mss)),
            }
            check_invariants(&cc, rto_window);
            checked = check_transitions(&cc, checked);
        }
    }
}
