//! The cost of message protection (`hollywood_transport::secure`): one
//! message through Framer → Deframer, plain and sealed/opened, at the
//! sizes of a voice frame, a video packet and a large message.
//!
//! `cargo bench -p hollywood-transport --bench secure -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hollywood_msg::{Deframer, Framer};
use hollywood_transport::secure::{handshake_in_memory, Identity, SecureSession};

const SIZES: [usize; 3] = [160, 1200, 64 * 1024];

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

fn sessions() -> (SecureSession, SecureSession) {
    let id = Identity::generate().unwrap();
    let mut c = SecureSession::client(&id).unwrap();
    let mut s = SecureSession::server(&id).unwrap();
    handshake_in_memory(&mut c, &mut s).unwrap();
    (c, s)
}

fn messages(c: &mut Criterion) {
    let mut g = c.benchmark_group("message_through_framing");
    for len in SIZES {
        let payload = data(len);
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("plain", len), &payload, |b, p| {
            let (mut framer, mut deframer) = (Framer::default(), Deframer::default());
            let mut seg = Vec::new();
            let mut seq = 1u32;
            b.iter(|| {
                seg.clear();
                framer.frame(3, false, black_box(p), &mut seg).unwrap();
                deframer.push_segment(seq, &seg, 0);
                seq = seq.wrapping_add(seg.len() as u32);
                black_box(deframer.poll_message().unwrap().payload.len())
            })
        });
        g.bench_with_input(BenchmarkId::new("sealed", len), &payload, |b, p| {
            let (mut tx, mut rx) = sessions();
            let (mut framer, mut deframer) = (Framer::default(), Deframer::default());
            let mut seg = Vec::new();
            let mut seq = 1u32;
            let mut id = 0u32;
            b.iter(|| {
                seg.clear();
                let sealed = tx.seal(id, 3, black_box(p)).unwrap();
                framer.frame_id(id, 3, false, &sealed, &mut seg).unwrap();
                deframer.push_segment(seq, &seg, 0);
                seq = seq.wrapping_add(seg.len() as u32);
                let m = deframer.poll_message().unwrap();
                let opened = rx.open(m.id, m.substream, &m.payload).unwrap();
                id = id.wrapping_add(1);
                black_box(opened.len())
            })
        });
    }
    g.finish();
}

fn handshake(c: &mut Criterion) {
    let id = Identity::generate().unwrap();
    c.bench_function("tls13_handshake_in_memory", |b| {
        b.iter(|| {
            let mut cl = SecureSession::client(&id).unwrap();
            let mut sv = SecureSession::server(&id).unwrap();
            handshake_in_memory(&mut cl, &mut sv).unwrap();
            black_box(cl.is_ready())
        })
    });
}

criterion_group!(benches, messages, handshake);
criterion_main!(benches);
