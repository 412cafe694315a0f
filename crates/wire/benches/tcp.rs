//! Parse (with checksum verification) and emit of a full-sized IPv4 data
//! segment: 1460 bytes of payload, timestamps and 3 SACK blocks.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hollywood_wire::{
    build_tcp_ip, parse_tcp_ip, SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn segment() -> TcpRepr {
    let mut options = TcpOptions {
        timestamp: Some(Timestamp {
            tsval: 0x1234_5678,
            tsecr: 0x9abc_def0,
        }),
        ..TcpOptions::default()
    };
    let blocks: Vec<SackBlock> = (0..3u32)
        .map(|i| SackBlock {
            left: SeqNumber(1_000_000 + i * 10_000),
            right: SeqNumber(1_005_000 + i * 10_000),
        })
        .collect();
    options.set_sacks(&blocks);
    TcpRepr {
        src_port: 40_000,
        dst_port: 443,
        seq: SeqNumber(0x0102_0304),
        ack: SeqNumber(0x0a0b_0c0d),
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 501,
        urgent: 0,
        options,
    }
}

fn bench(c: &mut Criterion) {
    let src = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40_000);
    let dst = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 443);
    let repr = segment();
    let payload: Vec<u8> = (0..1460u32).map(|i| (i * 7) as u8).collect();
    let packet = build_tcp_ip(src, dst, &repr, &payload);
    assert_eq!(parse_tcp_ip(&packet).unwrap().tcp, repr);

    let mut g = c.benchmark_group("tcp_v4_1460_ts_3sack");
    g.throughput(Throughput::Bytes(packet.len() as u64));
    g.bench_function("parse_verify", |b| {
        b.iter(|| parse_tcp_ip(black_box(&packet)).unwrap().tcp)
    });
    g.bench_function("build", |b| {
        b.iter(|| build_tcp_ip(black_box(src), black_box(dst), black_box(&repr), &payload))
    });
    let mut buf = vec![0u8; repr.header_len() + payload.len()];
    g.bench_function("tcp_emit_only", |b| {
        b.iter(|| black_box(&repr).emit(&mut buf, src.ip(), dst.ip(), black_box(&payload)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
