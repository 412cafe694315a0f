//! TUN offloads against the real kernel (root only): what the kernel hands
//! an `IFF_VNET_HDR` device, and what it refuses.
//!
//! - a UDP datagram from B arrives as a frame whose header is decoded and
//!   whose (possibly partial) checksum `offload::rx_packet` completes into
//!   a packet that verifies; the plain `TunDevice::recv` API returns the
//!   same, verified packet;
//! - a GSO frame whose checksum offsets point outside the packet is
//!   refused with `EINVAL`, the error on which `TunHost` falls back to
//!   writing the segments of a super-packet one by one (its coalescer never
//!   produces such a frame).
//!
//! Bulk TCP with offloads (super-packets both ways, byte-exact) is covered
//! by `HWT_TUN_OFFLOAD=1 cargo test -p hollywood-io --test interop_linux`
//! and by hollywood-lab's `tests/bench.rs`.

mod common;

use common::*;
use hollywood_io::tun::offload::{self, VnetHdr, F_NEEDS_CSUM, GSO_TCPV4, VNET_HDR_LEN};
use hollywood_wire::{checksum, IpRepr, IPPROTO_UDP};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// Whether `pkt` is IPv4/UDP to `port` with a checksum that verifies.
fn udp_to_port_verifies(pkt: &[u8], port: u16) -> Option<bool> {
    let (ip, l4) = IpRepr::parse(pkt).ok()?;
    if ip.protocol() != IPPROTO_UDP || u16::from_be_bytes([l4[2], l4[3]]) != port {
        return None;
    }
    let pseudo =
        checksum::pseudo_header(ip.src_addr(), ip.dst_addr(), IPPROTO_UDP, l4.len() as u32)?;
    Some(checksum::combine(pseudo, checksum::data(l4)) == 0xffff)
}

/// B sends one UDP datagram to the engine's address, port `port`.
fn send_from_b(lab: &Lab, port: u16) {
    lab.b
        .run(move || -> std::io::Result<()> {
            let s = UdpSocket::bind((B_V4, 0))?;
            s.send_to(&[0x5a; 300], SocketAddr::new(ENGINE_V4.into(), port))?;
            Ok(())
        })
        .expect("thread in B")
        .expect("send UDP from B");
}

#[test]
fn kernel_frames_and_refusals() {
    let Some(rt) = root_runtime_or_skip("offload_linux") else {
        return;
    };
    rt.block_on(async {
        let (lab, tun) = Lab::with_offload(true).expect("lab with an offloading TUN");
        assert!(tun.offload());

        // Raw frame: header + packet, checksum completed by rx_packet.
        send_from_b(&lab, 7001);
        let mut frame = vec![0u8; hollywood_io::tun::device::MAX_FRAME];
        let verified = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let n = tun.recv_frame(&mut frame).await.expect("read frame");
                let hdr = VnetHdr::decode(&frame[..n]).expect("a virtio_net_hdr");
                let mut out = Vec::new();
                offload::rx_packet(&hdr, &mut frame[VNET_HDR_LEN..n], &mut Vec::new(), |p| {
                    out.push(p.to_vec())
                })
                .expect("the kernel's frames can be handled");
                if let Some(ok) = out.first().and_then(|p| udp_to_port_verifies(p, 7001)) {
                    eprintln!(
                        "UDP frame header {hdr:?} (partial checksum: {})",
                        hdr.flags & F_NEEDS_CSUM != 0
                    );
                    return ok;
                }
            }
        })
        .await
        .expect("the datagram came out of the TUN device");
        assert!(verified, "completed UDP checksum must verify");

        // Plain API on the same device.
        send_from_b(&lab, 7002);
        let mut buf = vec![0u8; 2048];
        let verified = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let n = tun.recv(&mut buf).await.expect("read packet");
                if let Some(ok) = udp_to_port_verifies(&buf[..n], 7002) {
                    return ok;
                }
            }
        })
        .await
        .expect("the datagram came out of the TUN device");
        assert!(verified, "TunDevice::recv returns verified packets");
        assert_eq!(tun.offload_errors(), 0);

        // A GSO frame with its checksum start beyond the packet is refused
        // with EINVAL.
        let seg = hollywood_wire::build_tcp_ip(
            SocketAddr::new(ENGINE_V4.into(), 5000),
            SocketAddr::new(B_V4.into(), 5001),
            &hollywood_wire::TcpRepr {
                src_port: 0,
                dst_port: 0,
                seq: hollywood_wire::SeqNumber(1),
                ack: hollywood_wire::SeqNumber(1),
                flags: hollywood_wire::TcpFlags::ACK,
                window: 100,
                urgent: 0,
                options: Default::default(),
            },
            &[1u8; 100],
        );
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 40,
            gso_size: 40,
            csum_start: 2000,
            csum_offset: 16,
        };
        let mut bad = hdr.encode().to_vec();
        bad.extend_from_slice(&seg);
        let err = tun
            .send_frame(&bad)
            .await
            .expect_err("a GSO frame with bad checksum offsets is refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        drop(tun);
        drop(lab);
    });
}
