//! Memory that grows with need (issue 32 item 3): buffers released when
//! drained, receive-window and send-buffer autotuning, and the endpoint's
//! memory limit.

use crate::endpoint::EPHEMERAL_FIRST;
use crate::pair::{PacketInfo, Pair, Verdict};
use crate::{Config, Instant};
use std::time::Duration;

fn autotuned() -> Config {
    Config {
        autotune: Some(true),
        ..Config::default()
    }
}

#[test]
fn an_idle_connection_holds_no_buffers_after_a_transfer() {
    let mut p = Pair::default_pair(41);
    let (ha, hb) = p.connect();
    let idle = p.cb(hb).memory();
    let data = Pair::data(2_000_000, 3);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(60)), data);
    p.run_for(Duration::from_secs(1));
    // Both ends drained: rings and send storage given back.
    assert!(
        p.cb(hb).memory() <= idle + 1024,
        "{} vs {idle}",
        p.cb(hb).memory()
    );
    assert!(p.ca(ha).memory() <= idle + 1024, "{}", p.ca(ha).memory());
    // A byte stream never made a message table.
    let table = std::mem::size_of::<crate::hollywood::MessageTable>();
    assert!(
        p.ca(ha).memory() < std::mem::size_of::<crate::Connection>() + table,
        "{}",
        p.ca(ha).memory()
    );
    // Without autotuning the window is the configured buffer, as before.
    assert_eq!(p.cb(hb).receive_space(), Config::default().recv_buffer);
    assert_eq!(p.ca(ha).send_space(), Config::default().send_buffer);
}

#[test]
fn autotuning_starts_small_and_grows_with_the_transfer() {
    let mut p = Pair::new(autotuned(), autotuned(), 42);
    // 100 Mbit/s, 10 ms each way: a BDP of 250 kB.
    p.ab.rate_bps = Some(100_000_000);
    p.ba.rate_bps = Some(100_000_000);
    p.ab.queue_limit = 1 << 20;
    let (ha, hb) = p.connect();
    assert_eq!(p.cb(hb).receive_space(), 64 << 10);
    assert!(p.ca(ha).send_space() < 64 << 10);
    let data = Pair::data(20_000_000, 4);
    let t0 = p.now;
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(60)), data);
    let took = p.now.saturating_duration_since(t0);
    let rcv = p.cb(hb).receive_space();
    let snd = p.ca(ha).send_space();
    // The window grew past the BDP (but not necessarily to the maximum),
    // and the transfer ran near the link rate: 20 MB at 100 Mbit/s is 1.6 s.
    assert!(rcv > 250_000, "receive space {rcv}");
    assert!(snd > 250_000, "send space {snd}");
    assert!(p.cb(hb).stats().rcv_space_grown > 0);
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn a_message_larger_than_the_autotuned_send_buffer_still_goes() {
    let server = Config {
        autotune: Some(true),
        ..Config::hollywood(false, false)
    };
    let mut p = Pair::new(Config::default(), server, 43);
    let (ha, hb) = p.connect();
    let _ = ha;
    let big = vec![7u8; 200_000];
    assert!(p.cb(hb).send_space() < big.len());
    let now = p.now;
    assert!(p.cb(hb).poll_send_room(big.len()));
    p.cb(hb)
        .send_message(now, &big, Default::default())
        .expect("alone, it fits");
}

fn spoofed_flood(p: &mut Pair, n: u32) {
    p.ba.verdict = Some(Box::new(|i: &PacketInfo| {
        Verdict::drop_if(i.tcp.dst_port < EPHEMERAL_FIRST)
    }));
    for i in 0..n {
        let pkt = super::endpoint::spoofed_syn(i, p.b_addr);
        p.b.handle_packet(p.now, &pkt);
        p.flush();
    }
}

#[test]
fn the_memory_limit_refuses_new_connections_with_rst_and_keeps_old_ones_working() {
    let one = std::mem::size_of::<crate::Connection>() + crate::endpoint::ENTRY_OVERHEAD;
    let server = Config {
        memory_limit: Some(40 * one),
        ..autotuned()
    };
    let mut p = Pair::new(Config::default(), server, 44);
    let (ha, hb) = p.connect();
    spoofed_flood(&mut p, 100);
    let st = p.b.stats();
    assert!(st.memory_limit_refused > 0, "{st:?}");
    assert!(p.b.connection_count() < 41, "{}", p.b.connection_count());
    assert!(
        p.b.memory_used() <= 40 * (one + 256),
        "{}",
        p.b.memory_used()
    );
    assert!(p.b.memory_pressure());
    assert!(st.memory_pressure_entered >= 1);
    // The refusals were RSTs (to the spoofed sources, dropped by the link).
    assert!(st.resets_sent >= st.memory_limit_refused);
    // The established connection still works, at a reduced window.
    assert!(p.cb(hb).receive_space() <= 4 * 1460);
    let data = Pair::data(300_000, 5);
    assert_eq!(p.transfer(ha, hb, &data, Duration::from_secs(60)), data);
    assert_eq!(
        p.transfer_back(hb, ha, &data, Duration::from_secs(60)),
        data
    );
    // The half-open connections give up; pressure ends and a client connects.
    p.run_for(Duration::from_secs(200));
    let pkt = super::endpoint::spoofed_syn(1000, p.b_addr);
    p.b.handle_packet(p.now, &pkt);
    assert!(!p.b.memory_pressure());
    let (hc, hd) = p.connect();
    assert_eq!(p.transfer(hc, hd, &data, Duration::from_secs(60)), data);
    let _ = Instant::ZERO;
}
