//! TUN plumbing without the TCP engine (root only): the kernel in namespace
//! B sends a UDP datagram to the engine's address; it must come out of the
//! TUN device in A as a raw IP packet forwarded by A (TTL / hop limit one
//! less), and a reply crafted here and written into the TUN device must
//! reach B's socket.

mod common;

use common::*;
use hollywood_io::TunDevice;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use hollywood_wire::{checksum, IpRepr, IPPROTO_UDP};

/// UDP checksum over the pseudo-header (v4 or v6) and `udp` (checksum
/// field zero), with hollywood-wire's RFC 1071 helpers.
fn udp_checksum(src: IpAddr, dst: IpAddr, udp: &[u8]) -> u16 {
    let pseudo =
        checksum::pseudo_header(src, dst, IPPROTO_UDP, udp.len() as u32).expect("same family");
    match checksum::finish(checksum::combine(pseudo, checksum::data(udp))) {
        0 => 0xffff, // RFC 768: a computed zero is sent as all ones
        c => c,
    }
}

/// A parsed IP/UDP datagram.
#[derive(Debug)]
struct Udp {
    src: SocketAddr,
    dst: SocketAddr,
    ttl: u8,
    payload: Vec<u8>,
}

/// Parse an IPv4 or IPv6 packet carrying UDP with hollywood-wire (which
/// verifies the IPv4 header checksum); `None` for anything else (IPv6 router
/// solicitations, MLD reports...). Verifies the UDP checksum.
fn parse_udp(pkt: &[u8]) -> Option<Udp> {
    let (ip, l4) =
        IpRepr::parse(pkt).expect("the kernel writes well-formed IP into the TUN device");
    if ip.protocol() != IPPROTO_UDP {
        return None;
    }
    let ttl = match ip {
        IpRepr::V4(r) => r.ttl,
        IpRepr::V6(r) => r.hop_limit,
    };
    assert_eq!(
        ip.buffer_len() + l4.len(),
        pkt.len(),
        "IP length fields must match the TUN read"
    );
    let len = usize::from(u16::from_be_bytes([l4[4], l4[5]]));
    assert_eq!(len, l4.len(), "UDP length must match");
    let mut zeroed = l4.to_vec();
    zeroed[6..8].fill(0);
    assert_eq!(
        udp_checksum(ip.src_addr(), ip.dst_addr(), &zeroed),
        u16::from_be_bytes([l4[6], l4[7]]),
        "UDP checksum must verify"
    );
    Some(Udp {
        src: SocketAddr::new(ip.src_addr(), u16::from_be_bytes([l4[0], l4[1]])),
        dst: SocketAddr::new(ip.dst_addr(), u16::from_be_bytes([l4[2], l4[3]])),
        ttl,
        payload: l4[8..].to_vec(),
    })
}

/// Build a complete IP/UDP packet (IP header by hollywood-wire).
fn build_udp(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut udp = Vec::with_capacity(8 + payload.len());
    udp.extend_from_slice(&src.port().to_be_bytes());
    udp.extend_from_slice(&dst.port().to_be_bytes());
    udp.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let c = udp_checksum(src.ip(), dst.ip(), &udp);
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    let ip = IpRepr::new(src.ip(), dst.ip(), IPPROTO_UDP, udp.len()).expect("same family");
    let mut pkt = vec![0u8; ip.buffer_len()];
    ip.emit(&mut pkt);
    pkt.extend_from_slice(&udp);
    pkt
}

/// One round trip B → TUN → B for the given addresses.
async fn round_trip(lab: &Lab, tun: &TunDevice, b_addr: IpAddr, engine: SocketAddr) {
    let kernel = lab
        .b
        .spawn(
            "kernel-b-udp",
            move || -> std::io::Result<(Vec<u8>, SocketAddr, SocketAddr)> {
                let sock = UdpSocket::bind(SocketAddr::new(b_addr, 0))?;
                sock.set_read_timeout(Some(Duration::from_secs(5)))?;
                let local = sock.local_addr()?;
                sock.send_to(b"ping hollywood", engine)?;
                let mut buf = [0u8; 2048];
                let (n, from) = sock.recv_from(&mut buf)?;
                Ok((buf[..n].to_vec(), from, local))
            },
        )
        .expect("spawn kernel thread in B");

    let mut buf = vec![0u8; 2048];
    let (datagram, seen) = tokio::time::timeout(Duration::from_secs(5), async {
        let mut seen = 0;
        loop {
            let n = tun.recv(&mut buf).await.expect("read TUN");
            seen += 1;
            if let Some(d) = parse_udp(&buf[..n]) {
                return (d, seen);
            }
        }
    })
    .await
    .expect("no UDP datagram came out of the TUN device within 5 s");
    assert_eq!(
        datagram.dst, engine,
        "destination is the engine address behind the TUN"
    );
    assert_eq!(
        datagram.src.ip(),
        b_addr,
        "source is B's socket (not NATed)"
    );
    assert_eq!(datagram.ttl, 63, "forwarded once by namespace A's kernel");
    assert_eq!(datagram.payload, b"ping hollywood");
    eprintln!(
        "read {seen} packet(s) from {}; UDP {} -> {}",
        tun.name(),
        datagram.src,
        datagram.dst
    );

    tun.send(&build_udp(engine, datagram.src, b"pong hollywood"))
        .await
        .expect("write reply into TUN");

    let (reply, from, local) = tokio::task::spawn_blocking(move || kernel.join())
        .await
        .expect("join task")
        .expect("kernel thread")
        .expect("B's UDP socket did not get the crafted reply");
    assert_eq!(local, datagram.src);
    assert_eq!(from, engine);
    assert_eq!(reply, b"pong hollywood");
}

#[test]
fn tun_plumbing() {
    let Some(rt) = root_runtime_or_skip("tun_plumbing") else {
        return;
    };
    rt.block_on(async {
        let (lab, tun) = Lab::new().expect("build the two-namespace lab");
        for (b, engine) in [
            (IpAddr::from(B_V4), IpAddr::from(ENGINE_V4)),
            (B_V6.into(), ENGINE_V6.into()),
        ] {
            round_trip(&lab, &tun, b, SocketAddr::new(engine, 9999)).await;
        }
        let names = lab.a.name().unwrap().to_owned();
        drop(tun);
        drop(lab);
        assert!(
            !std::path::Path::new(hollywood_io::netns::NETNS_DIR)
                .join(&names)
                .exists(),
            "namespace {names} must be deleted on drop"
        );
    });
}

#[test]
fn lab_is_deleted_when_a_test_panics() {
    let Some(rt) = root_runtime_or_skip("tun_plumbing") else {
        return;
    };
    let names = std::sync::Mutex::new(Vec::new());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let (lab, _tun) = Lab::new().expect("build the two-namespace lab");
            names.lock().unwrap().extend([
                lab.a.name().unwrap().to_owned(),
                lab.b.name().unwrap().to_owned(),
            ]);
            panic!("simulated test failure");
        })
    }));
    assert!(result.is_err(), "the closure panicked");
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 2);
    for name in names {
        assert!(
            !std::path::Path::new(hollywood_io::netns::NETNS_DIR)
                .join(&name)
                .exists(),
            "namespace {name} must be deleted while unwinding"
        );
    }
}
