//! Fuzz the FEC layer's decoder (hollywood-fec).
//!
//! Mode 0 (first byte even): the input as a program of records `(kind,
//! length, bytes)`: kind 0 a source message (id from the bytes), kind 1 an
//! FEC payload parsed as REPAIR/REPORT and given to the decoder. Must never
//! panic; every message is delivered at most once.
//!
//! Mode 1 (first byte odd): real blocks from an `Encoder` over fuzz-chosen
//! payloads; the fuzzer chooses which sources and repairs arrive, in which
//! order. With nothing corrupted, every delivered message (arrived or
//! rebuilt) must be byte-identical to the one sent, each at most once, and
//! a block with at least k of its k + m symbols must rebuild all of it.
#![no_main]

use std::collections::BTreeSet;
use std::time::Duration;

use hollywood_fec::{wire, Decoder, Encoder, FecConfig};
use libfuzzer_sys::fuzz_target;

fn raw(data: &[u8]) {
    let mut d = Decoder::new();
    let mut delivered = BTreeSet::new();
    let mut i = 0;
    let mut now = 0u64;
    while i + 2 <= data.len() {
        let (kind, len) = (data[i], data[i + 1] as usize * 4);
        i += 2;
        let body = &data[i..(i + len).min(data.len())];
        i += body.len();
        now += 1_000_000;
        if kind & 1 == 0 {
            let id = body.first().map_or(0, |&b| u32::from(b)) | (u32::from(kind) << 8);
            let (deliver, rebuilt) = d.on_source(id, 0, body);
            if deliver {
                assert!(delivered.insert(id));
            }
            for r in rebuilt {
                assert!(delivered.insert(r.id), "rebuilt {} twice", r.id);
            }
        } else if let Ok(wire::FecMessage::Repair(r)) = wire::parse(body) {
            for r in d.on_repair(now, &r) {
                assert!(delivered.insert(r.id), "rebuilt {} twice", r.id);
            }
        }
        let _ = d.report(now);
    }
}

fn blocks(data: &[u8]) {
    let k = 1 + data.get(1).map_or(0, |b| b % 16) as usize;
    let overhead = 0.25 + f64::from(data.get(2).copied().unwrap_or(0) % 8) * 0.25;
    let mut e = Encoder::new(FecConfig {
        max_overhead: overhead,
        ..FecConfig::default()
    });
    let rest = data.get(3..).unwrap_or(&[]);
    let payloads: Vec<Vec<u8>> = (0..k)
        .map(|i| {
            let n = rest.get(i).map_or(1, |&b| 1 + b as usize);
            (0..n).map(|j| (i * 31 + j) as u8).collect()
        })
        .collect();
    for (i, p) in payloads.iter().enumerate() {
        e.push(0, i as u32, i as u16, p, None, Duration::ZERO);
    }
    let repairs = e.flush(0, None, 0);
    let m = repairs.len();
    // Which of the k + m symbols arrive, in an order the fuzzer picks.
    let mask = rest.get(k..).unwrap_or(&[]);
    let arrives = |s: usize| mask.get(s).is_none_or(|b| b & 3 != 0);
    let mut order: Vec<usize> = (0..k + m).collect();
    if let Some(&r) = mask.last() {
        order.rotate_left(r as usize % (k + m));
    }
    let mut d = Decoder::new();
    let mut delivered = BTreeSet::new();
    for s in order.into_iter().filter(|&s| arrives(s)) {
        let got = if s < k {
            let (deliver, rebuilt) = d.on_source(s as u32, s as u16, &payloads[s]);
            if deliver {
                assert!(delivered.insert(s as u32));
            }
            rebuilt
        } else {
            let r = wire::Repair::parse(&repairs[s - k].payload).expect("our own repair parses");
            d.on_repair(0, &r)
        };
        for r in got {
            assert_eq!(r.payload, payloads[r.id as usize], "rebuilt {} wrong", r.id);
            assert_eq!(r.substream as u32, r.id);
            assert!(delivered.insert(r.id), "{} twice", r.id);
        }
    }
    let arrived = (0..k + m).filter(|&s| arrives(s)).count();
    if arrived >= k && m > 0 {
        assert_eq!(delivered.len(), k, "k of n arrived but the block was not rebuilt");
    }
}

fuzz_target!(|data: &[u8]| {
    match data.first() {
        Some(b) if b & 1 == 1 => blocks(data),
        _ => raw(data),
    }
});
