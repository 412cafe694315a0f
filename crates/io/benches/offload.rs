//! The user-space cost of TUN offloads per 64 KB super-packet: merging 45
//! engine segments of 1448 bytes (IPv4, timestamps) into one with
//! `offload::Coalescer`, and splitting one back with `offload::rx_packet`
//! (which rebuilds every segment and computes its checksums). Compare with
//! the kernel work a plain TUN spends per packet (docs/LAB.md, Benchmarks).

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hollywood_io::tun::offload::{self, Coalescer, Push, VnetHdr, VNET_HDR_LEN};
use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp};
use std::net::SocketAddr;

const SEGMENTS: usize = 45;
const MSS: usize = 1448;

fn segments() -> Vec<Vec<u8>> {
    let src: SocketAddr = "10.0.0.2:40000".parse().unwrap();
    let dst: SocketAddr = "10.0.1.2:5201".parse().unwrap();
    let payload: Vec<u8> = (0..MSS).map(|i| i as u8).collect();
    (0..SEGMENTS)
        .map(|i| {
            let repr = TcpRepr {
                src_port: 0,
                dst_port: 0,
                seq: SeqNumber(1 + (i * MSS) as u32),
                ack: SeqNumber(77),
                flags: TcpFlags::ACK,
                window: 1000,
                urgent: 0,
                options: TcpOptions {
                    timestamp: Some(Timestamp { tsval: 5, tsecr: 6 }),
                    ..TcpOptions::default()
                },
            };
            hollywood_wire::build_tcp_ip(src, dst, &repr, &payload)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let segs = segments();
    let mut g = c.benchmark_group("offload");
    g.throughput(Throughput::Bytes((SEGMENTS * MSS) as u64));
    let mut co = Coalescer::default();
    g.bench_function("coalesce_45x1448", |b| {
        b.iter(|| {
            for s in &segs {
                let pushed = co.push(black_box(s));
                assert_eq!(pushed, Push::Added);
            }
            let n = co.frame().map(<[u8]>::len);
            co.clear();
            n
        })
    });
    for s in &segs {
        co.push(s);
    }
    let frame = co.frame().unwrap().to_vec();
    let hdr = VnetHdr::decode(&frame).unwrap();
    let pkt = frame[VNET_HDR_LEN..].to_vec();
    let mut scratch = Vec::new();
    // The split works in place (it overwrites the super-packet): each
    // iteration gets a fresh copy, made outside the timed part.
    g.bench_function("split_45x1448", |b| {
        b.iter_batched_ref(
            || pkt.clone(),
            |p| {
                let mut bytes = 0;
                offload::rx_packet(&hdr, black_box(p), &mut scratch, |s| bytes += s.len()).unwrap();
                bytes
            },
            BatchSize::SmallInput,
        )
    });
    // The same cut with each segment copied out into a scratch buffer (the
    // split before it worked in place), for comparison in one run.
    let l = usize::from(hdr.gso_size);
    g.bench_function("split_copying_45x1448", |b| {
        b.iter(|| {
            let mut bytes = 0;
            offload::split_tcp_gso_with(black_box(&pkt), l, &mut scratch, true, |s| {
                bytes += s.len()
            })
            .unwrap();
            bytes
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
