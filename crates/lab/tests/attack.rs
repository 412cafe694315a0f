//! The attack lab (issue 15 item 2, root only): every attack against our
//! engine and against Linux. The engine must survive every one with its
//! data intact, never do worse than Linux, and show the defence the
//! attack calls for (challenge ACKs, SYN cookies, bounded memory).
// A test of an adapter: real threads and clocks.
#![allow(clippy::disallowed_methods)]

use hollywood_lab::attack::{self, AttackSpec, Kind};
use std::time::Duration;

#[test]
fn the_engine_survives_every_attack_and_is_never_worse_than_linux() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip(
            "the attack lab needs root (network namespaces, TUN devices, raw sockets)",
        );
        return;
    }
    attack::remove_stale_labs();
    let mut spec = AttackSpec::new(&format!("{}-{}", attack::LAB_PREFIX, std::process::id()));
    spec.messages = 400;
    spec.attack_at = Duration::from_millis(500);
    let rows = attack::run_all(&Kind::ALL, &spec, |r| {
        eprintln!(
            "{:<14} engine: {} | linux: {}",
            r.kind.name(),
            r.engine_outcome,
            r.linux_outcome
        );
    })
    .expect("attack lab");
    eprintln!("{}", attack::table(&rows));
    for r in &rows {
        let name = r.kind.name();
        assert!(!r.engine_worse_than_linux, "{name}: {r:?}");
        let e = &r.engine;
        assert_eq!(e.verdict, "survived", "{name}: {e:?}");
        assert_eq!(e.echoed_intact, u64::from(spec.messages), "{name}: {e:?}");
        assert!(
            e.injected > 0 || r.kind == Kind::ZeroWindow,
            "{name}: no attack sent"
        );
        match r.kind {
            Kind::RstInWindow | Kind::SynInWindow | Kind::DataInject | Kind::AckInjection => {
                assert!(e.challenge_acks > 0, "{name}: no challenge ACK: {e:?}");
            }
            Kind::SynFlood => assert!(e.syn_cookies_sent > 0, "{name}: no SYN cookie: {e:?}"),
            Kind::ZeroWindow => {
                assert!(e.attacker_bytes > 0, "{name}: the squatters sent nothing");
                assert!(
                    e.memory_late_growth_kib.is_some(),
                    "{name}: memory not sampled"
                );
            }
            _ => {}
        }
    }
}
