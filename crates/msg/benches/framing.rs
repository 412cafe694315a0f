//! Framing throughput: COBS (ours vs the `cobs` crate), CRC32C, and
//! end-to-end messages per second through Framer → Deframer.
//!
//! `cargo bench -p hollywood-msg -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hollywood_msg::cobs::{decode_into, encode_into, max_encoded_len};
use hollywood_msg::{Deframer, Framer};

const SIZES: [usize; 3] = [160, 1400, 64 * 1024];

/// Deterministic pseudo-random bytes (xorshift64*): zeros about one byte in
/// 256, like compressed media.
fn data(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn cobs_encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("cobs_encode");
    for len in SIZES {
        let src = data(len);
        let mut dst = vec![0u8; max_encoded_len(len)];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("ours", len), &src, |b, s| {
            b.iter(|| encode_into(black_box(s), &mut dst).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("cobs_crate", len), &src, |b, s| {
            b.iter(|| cobs::encode(black_box(s), &mut dst))
        });
    }
    g.finish();
}

fn cobs_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("cobs_decode");
    for len in SIZES {
        let enc = hollywood_msg::cobs::encode(&data(len));
        let mut dst = vec![0u8; enc.len()];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("ours", len), &enc, |b, s| {
            b.iter(|| decode_into(black_box(s), &mut dst).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("cobs_crate", len), &enc, |b, s| {
            b.iter(|| cobs::decode(black_box(s), &mut dst).unwrap())
        });
    }
    g.finish();
}

fn crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    for len in SIZES {
        let src = data(len);
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::from_parameter(len), &src, |b, s| {
            b.iter(|| crc32c::crc32c(black_box(s)))
        });
    }
    g.finish();
}

fn end_to_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("framer_to_deframer");
    g.throughput(Throughput::Elements(1));
    let payload = data(160);
    g.bench_function("160B_one_frame_per_segment", |b| {
        let mut framer = Framer::default();
        let mut deframer = Deframer::default();
        let mut seg = Vec::with_capacity(256);
        let mut seq = 1u32;
        b.iter(|| {
            seg.clear();
            framer
                .frame(3, false, black_box(&payload), &mut seg)
                .unwrap();
            deframer.push_segment(seq, &seg, 0);
            seq = seq.wrapping_add(seg.len() as u32);
            let m = deframer.poll_message().unwrap();
            black_box(m.payload.len())
        })
    });
    g.finish();
}

criterion_group!(benches, cobs_encode, cobs_decode, crc, end_to_end);
criterion_main!(benches);
