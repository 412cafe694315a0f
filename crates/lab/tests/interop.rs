//! Partial deployments on real packets (thesis §4.4): every sender/receiver
//! combination of our engine and Linux over a lossy emulated path, with
//! the wire audited from a tshark capture (root only).
//!
//! Each test builds its own lab `hwi-PID-TAG` (torn down by `Lab`'s Drop,
//! also when the test fails; labs of killed runs are removed first) and
//! runs 400 messages of 160 B every 5 ms with a 60 ms lifetime over
//! 40 ms RTT and 5 % loss on the data direction. The tests run one at a
//! time (a lock): 2 cores, and tshark.
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::interop::{self, End, InteropReport, InteropSpec};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn go(test: &str, sender: End, receiver: End) -> Option<InteropReport> {
    go_with(test, sender, receiver, false)
}

fn go_with(test: &str, sender: End, receiver: End, secure: bool) -> Option<InteropReport> {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(&format!(
            "{test} needs root (network namespaces, TUN devices, tshark)"
        ));
        return None;
    }
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = format!(
        "{}-{}-{}{}",
        interop::LAB_PREFIX,
        std::process::id(),
        &sender.name()[..1],
        &receiver.name()[..1]
    ) + if secure { "s" } else { "" };
    let mut spec = InteropSpec::new(sender, receiver, &lab);
    spec.messages = 400;
    spec.seed = 5;
    spec.secure = secure;
    let r = interop::run(&spec).unwrap_or_else(|e| panic!("{test}: {e}"));
    eprintln!("{}", r.to_text());
    // Always: intact, exactly once, no hole, no RST, every message
    // delivered or reported expired by the sender.
    assert!(r.violations().is_empty(), "{test}: {:?}", r.violations());
    // The path really was lossy and the sender really recovered.
    assert!(r.dropped_by_emulator >= 5, "{test}: too few drops: {r:?}");
    assert!(
        r.retransmissions_on_wire >= r.dropped_by_emulator / 2,
        "{test}: {r:?}"
    );
    assert_eq!(
        r.delivered + r.lost_to_ir - r.expired_but_delivered,
        u64::from(r.messages),
        "{test}: delivered + lost to IR must account for every message"
    );
    // Nothing was left to chance in the lab: all gone.
    assert!(
        !hollywood_lab::topology::Lab::exists(&lab),
        "{test}: lab {lab} left behind"
    );
    Some(r)
}

#[test]
fn engine_to_engine_uses_ir_and_delivers_out_of_order() {
    let Some(r) = go("engine_to_engine", End::Engine, End::Engine) else {
        return;
    };
    let ir_sent = r.ir_sent.expect("engine sender");
    assert!(ir_sent > 0, "{r:?}");
    assert!(r.ir_seen_on_wire > 0, "{r:?}");
    assert!(r.ir_seen_on_wire >= ir_sent, "{r:?}");
    // A rewritten slot carries a live message that was waiting, else zero
    // padding: never an expired message. Here messages leave as they are
    // generated, so nothing waits and the slots are padded.
    assert!(r.ir_messages_on_wire <= ir_sent, "{r:?}");
    assert_eq!(r.expired_but_delivered, 0, "{r:?}");
    // Nothing is lost beyond what the network dropped: on time as often as
    // the oracle (a 60 ms lifetime cannot cover a repair on a 40 ms RTT).
    assert!(r.on_time * 100 >= r.oracle_on_time * 98, "{r:?}");
    // Out-of-order delivery: segments behind a hole were handed up. A
    // message *delivered* after a higher id needs its own loss to be
    // repaired consistently; with IR most lost messages are replaced
    // instead, so `ooo_delivered` may be small or zero here.
    assert!(r.ooo_segments.expect("engine receiver") > 0, "{r:?}");
    assert!(r.lost_to_ir > 0, "{r:?}");
}

#[test]
fn secure_mode_engine_to_kernel_keeps_every_invariant() {
    // Sealed messages (docs/SECURITY.md) from our engine to the kernel
    // fallback's implementation: the same invariants, every message opened,
    // and inconsistent retransmissions still carry whole sealed messages.
    let Some(r) = go_with("secure_engine_to_kernel", End::Engine, End::Kernel, true) else {
        return;
    };
    assert!(r.secure);
    assert_eq!(r.auth_failed, Some(0), "{r:?}");
    let ir_sent = r.ir_sent.expect("engine sender");
    assert!(ir_sent > 0, "{r:?}");
    assert!(r.ir_seen_on_wire >= ir_sent, "{r:?}");
    assert_eq!(r.ooo_delivered, r.ooo_via_replacement, "{r:?}");
}

#[test]
fn engine_to_kernel_uses_ir_in_order() {
    let Some(r) = go("engine_to_kernel", End::Engine, End::Kernel) else {
        return;
    };
    let ir_sent = r.ir_sent.expect("engine sender");
    assert!(ir_sent > 0, "{r:?}");
    assert!(r.ir_seen_on_wire >= ir_sent, "{r:?}");
    assert!(r.ir_messages_on_wire <= ir_sent, "{r:?}");
    assert_eq!(r.expired_but_delivered, 0, "{r:?}");
    // Linux delivers the byte stream in order; messages can still reach
    // the application out of id order, but only because a replacement
    // (a later message) travelled in a lost message's slot, ahead of the
    // messages between them (checked in `violations`).
    assert_eq!(r.ooo_delivered, r.ooo_via_replacement, "{r:?}");
    assert_eq!(r.ooo_segments, None);
}

#[test]
fn kernel_to_engine_is_consistent_and_out_of_order() {
    let Some(r) = go("kernel_to_engine", End::Kernel, End::Engine) else {
        return;
    };
    assert_eq!(r.ir_sent, None);
    assert_eq!(r.ir_seen_on_wire, 0, "Linux never rewrites: {r:?}");
    // Linux retransmits every lost message, which the engine hands up
    // after the later messages that overtook it.
    assert!(r.ooo_delivered > 0, "{r:?}");
    assert!(r.ooo_segments.expect("engine receiver") > 0, "{r:?}");
    assert_eq!(r.lost_to_ir, r.expired_before_send_at_sender);
}

#[test]
fn kernel_to_kernel_is_plain_tcp() {
    let Some(r) = go("kernel_to_kernel", End::Kernel, End::Kernel) else {
        return;
    };
    assert_eq!(r.ir_seen_on_wire, 0, "{r:?}");
    assert_eq!(r.ooo_delivered, 0, "in-order stream, no replacements");
    assert_eq!(r.lost_to_ir, r.expired_before_send_at_sender);
}
