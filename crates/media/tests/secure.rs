//! Secure mode against an on-path forger (issue 15): a box that rewrites
//! a message's payload and recomputes both the message CRC32C and the TCP
//! checksum gets its forgeries delivered in plain mode and none in secure
//! mode, for every TCP deployment; everything else still arrives.

use hollywood_media::scenario::Impairments;
use hollywood_media::{MessagesScenario, Transport};
use hollywood_sim::LossModel;
use std::time::Duration;

fn run(t: Transport, secure: bool) -> hollywood_media::MessagesRun {
    MessagesScenario {
        transport: t.into(),
        count: 600,
        size: 300,
        interval: Duration::from_millis(10),
        lifetime: Some(Duration::from_millis(150)),
        loss: LossModel::Bernoulli(0.01),
        secure,
        impair: Impairments {
            forge: 0.05,
            ..Impairments::default()
        },
        seed: 7,
        ..MessagesScenario::default()
    }
    .run()
    .expect("run")
}

#[test]
fn forgeries_are_delivered_in_plain_mode_and_rejected_in_secure_mode() {
    for t in Transport::ALL {
        let plain = run(t, false);
        assert!(plain.forged > 10, "{t:?}: the box forged {}", plain.forged);
        assert!(
            plain.corrupt_delivered > 0,
            "{t:?}: plain mode accepts forgeries"
        );
        let secure = run(t, true);
        assert!(secure.forged > 10, "{t:?}");
        assert_eq!(secure.corrupt_delivered, 0, "{t:?}: no forgery accepted");
        let s = secure.secure.expect("secure stats");
        assert!(s.auth_failed > 0, "{t:?}: {s:?}");
        // A forgery is caught once when it arrives (the loss behind the
        // box may take it first).
        assert!(s.auth_failed <= secure.forged, "{t:?}: {s:?}");
        assert_eq!(secure.duplicates_delivered, 0);
        // What was not forged arrives as in plain mode: the forgeries are
        // the only messages secure mode gives up.
        let delivered = |r: &hollywood_media::MessagesRun| {
            r.arrival.iter().filter(|a| a.is_some()).count() as u64
        };
        assert!(
            delivered(&secure) + secure.forged >= delivered(&plain),
            "{t:?}: secure {} + forged {} < plain {}",
            delivered(&secure),
            secure.forged,
            delivered(&plain)
        );
    }
}
