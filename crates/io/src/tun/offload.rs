//! TUN offloads: the `virtio_net_hdr` that precedes every packet on a TUN
//! device opened with `IFF_VNET_HDR`, and the pure packet surgery around it.
//!
//! With `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)` the kernel and
//! the user-space side of a TUN device may exchange
//!
//! - **partial checksums** (`VIRTIO_NET_HDR_F_NEEDS_CSUM`): the transport
//!   checksum field holds only the pseudo-header sum; whoever finally needs
//!   the checksum sums from `csum_start` to the end and stores the
//!   complement at `csum_start + csum_offset`;
//! - **GSO super-packets** (`gso_type` TCPV4/TCPV6): one IP packet of up to
//!   64 KB whose TCP payload stands for several segments of `gso_size`
//!   bytes each, cut by the receiver exactly as Linux's `tcp_gso_segment`
//!   would: the headers are replicated, the sequence number advances by
//!   `gso_size` per segment, FIN and PSH stay only on the last segment, CWR
//!   only on the first, IPv4 IDs count up from the first one.
//!
//! This module is sans-IO: [`Coalescer`] merges consecutive engine segments
//! of one flow into one super-packet for transmission, [`split_tcp_gso`]
//! cuts a received super-packet into ordinary segments,
//! [`complete_checksum`] finishes a partial checksum and [`rx_packet`]
//! applies whichever of these a received header asks for. The engine never
//! sees any of it: it sends and receives ordinary MSS-sized segments with
//! valid checksums.
//!
//! Reference: `include/linux/virtio_net.h`, `include/uapi/linux/virtio_net.h`,
//! `net/ipv4/tcp_offload.c` (what the kernel does with what we hand it).

use hollywood_wire::checksum;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Bytes of the `struct virtio_net_hdr` prepended to every packet read from
/// or written to an `IFF_VNET_HDR` TUN device (the default
/// `TUNSETVNETHDRSZ`).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start +
/// csum_offset` is partial (pseudo-header only).
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was already verified.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP` (UFO; never enabled by this crate).
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (USO; never enabled by this crate).
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN` flag bit of `gso_type`.
pub const GSO_ECN: u8 = 0x80;

/// Largest IP packet (IPv4 total length / IPv6 header + payload length)
/// a super-packet may grow to. IPv4's 16-bit total length caps it; we use
/// the same bound for IPv6 (no jumbograms / BIG TCP).
pub const MAX_SUPER_PACKET: usize = 65_535;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_URG: u8 = 0x20;
const TCP_CWR: u8 = 0x80;
const IPPROTO_TCP: u8 = 6;

/// `struct virtio_net_hdr` (legacy layout, little-endian fields as used by
/// TUN on little-endian hosts and by `TUNSETVNETLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM` / `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_NONE`, `GSO_TCPV4`, `GSO_TCPV6`, ... possibly `| GSO_ECN`.
    pub gso_type: u8,
    /// Length of the headers (IP + TCP) of a GSO packet.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO packet (the MSS).
    pub gso_size: u16,
    /// Offset at which checksumming starts (the transport header).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start` (16 for TCP, 6 for UDP).
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Parse the first [`VNET_HDR_LEN`] bytes of `b`.
    pub fn decode(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..VNET_HDR_LEN)?;
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }

    /// The wire form.
    pub fn encode(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The GSO type without the ECN bit.
    pub fn gso_kind(&self) -> u8 {
        self.gso_type & !GSO_ECN
    }

    /// The kernel vouches for the packet's integrity: it was built by the
    /// local stack (a partial checksum, or a GSO super-packet, whose
    /// checksums are never computed before it reaches us) or its checksum
    /// was verified (`F_DATA_VALID`). Such a packet need not be verified
    /// again, as Linux does not verify a `CHECKSUM_PARTIAL` or
    /// `CHECKSUM_UNNECESSARY` skb.
    pub fn vouches(&self) -> bool {
        self.gso_kind() != GSO_NONE || self.flags & (F_NEEDS_CSUM | F_DATA_VALID) != 0
    }
}

/// Why a packet could not be given offload treatment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// Shorter than its headers claim, or length fields disagree with the
    /// buffer.
    Malformed,
    /// `csum_start` / `csum_offset` point outside the packet.
    BadChecksumOffsets,
    /// A GSO type this crate does not enable (UDP fragmentation / USO).
    UnsupportedGso(u8),
    /// A TCP GSO packet that is not plain IPv4/IPv6 + TCP (IPv4 options
    /// are fine; IPv6 extension headers, fragments and a `gso_size` of 0
    /// are not), or whose IP version contradicts the GSO type.
    UnsupportedPacket,
}

impl std::fmt::Display for OffloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffloadError::Malformed => write!(f, "malformed packet"),
            OffloadError::BadChecksumOffsets => write!(f, "checksum offsets outside the packet"),
            OffloadError::UnsupportedGso(t) => write!(f, "unsupported GSO type {t}"),
            OffloadError::UnsupportedPacket => write!(f, "GSO packet that is not plain IP + TCP"),
        }
    }
}

impl std::error::Error for OffloadError {}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Where the headers of a plain IPv4/IPv6 + TCP packet end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TcpLayout {
    v6: bool,
    /// IP header length.
    ip: usize,
    /// TCP header length (with options).
    tcp: usize,
}

impl TcpLayout {
    fn headers(&self) -> usize {
        self.ip + self.tcp
    }
}

/// The layout of `pkt` if it is an unfragmented IPv4 (any IHL) or IPv6
/// (no extension headers) packet carrying TCP whose IP length field
/// matches `pkt.len()` exactly.
fn tcp_layout(pkt: &[u8]) -> Option<TcpLayout> {
    let first = *pkt.first()?;
    let (v6, ip) = match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20
                || pkt.len() < ihl
                || pkt[9] != IPPROTO_TCP
                || usize::from(be16(pkt, 2)) != pkt.len()
                // MF set or a fragment offset: a fragment, not a segment.
                || be16(pkt, 6) & 0x3fff != 0
            {
                return None;
            }
            (false, ihl)
        }
        6 => {
            if pkt.len() < 40
                || pkt[6] != IPPROTO_TCP
                || 40 + usize::from(be16(pkt, 4)) != pkt.len()
            {
                return None;
            }
            (true, 40)
        }
        _ => return None,
    };
    let doff = usize::from(*pkt.get(ip + 12)? >> 4) * 4;
    if doff < 20 || pkt.len() < ip + doff {
        return None;
    }
    Some(TcpLayout { v6, ip, tcp: doff })
}

fn addrs(pkt: &[u8], v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        let a: [u8; 16] = pkt[8..24].try_into().expect("16 bytes");
        let b: [u8; 16] = pkt[24..40].try_into().expect("16 bytes");
        (Ipv6Addr::from(a).into(), Ipv6Addr::from(b).into())
    } else {
        let a: [u8; 4] = pkt[12..16].try_into().expect("4 bytes");
        let b: [u8; 4] = pkt[16..20].try_into().expect("4 bytes");
        (Ipv4Addr::from(a).into(), Ipv4Addr::from(b).into())
    }
}

/// Folded (not complemented) TCP pseudo-header sum for `pkt` with a TCP
/// length of `tcp_len`.
fn pseudo_sum(pkt: &[u8], v6: bool, tcp_len: usize) -> u16 {
    let (src, dst) = addrs(pkt, v6);
    checksum::pseudo_header(src, dst, IPPROTO_TCP, tcp_len as u32)
        .expect("addresses of one packet are one family")
}

/// Recompute the IPv4 header checksum of `pkt` (header length `ihl`).
fn fill_ipv4_checksum(pkt: &mut [u8], ihl: usize) {
    pkt[10..12].fill(0);
    let c = checksum::checksum(&pkt[..ihl]);
    pkt[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Finish a partial checksum (`F_NEEDS_CSUM`): sum `pkt[csum_start..]`
/// (whose checksum field holds the pseudo-header sum) and store the
/// complement at `csum_start + csum_offset`, as the kernel's
/// `skb_checksum_help` does (a zero result is written as `0xffff`, which
/// UDP requires and TCP treats the same).
pub fn complete_checksum(
    pkt: &mut [u8],
    csum_start: usize,
    csum_offset: usize,
) -> Result<(), OffloadError> {
    let field = csum_start
        .checked_add(csum_offset)
        .ok_or(OffloadError::BadChecksumOffsets)?;
    if field.saturating_add(2) > pkt.len() {
        return Err(OffloadError::BadChecksumOffsets);
    }
    let c = match checksum::finish(checksum::data(&pkt[csum_start..])) {
        0 => 0xffff,
        c => c,
    };
    pkt[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Cut the TCP super-packet `pkt` into segments of at most `gso_size`
/// payload bytes, exactly as Linux's `tcp_gso_segment` would, each with
/// complete IPv4 header and TCP checksums (the super-packet's own TCP
/// checksum is ignored: it is usually partial). Each segment is built in
/// `scratch` and passed to `emit`. Returns the number of segments.
///
/// A super-packet with no more payload than `gso_size` yields one segment
/// equal to the input with its checksums completed.
pub fn split_tcp_gso(
    pkt: &[u8],
    gso_size: usize,
    scratch: &mut Vec<u8>,
    emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    split_tcp_gso_with(pkt, gso_size, scratch, true, emit)
}

/// [`split_tcp_gso`], leaving the segments' TCP checksum fields zero
/// unless `tcp_checksums` (the IPv4 header checksum is always filled):
/// for a receiver that trusts the kernel's packets
/// ([`VnetHdr::vouches`]) and would only recompute them.
pub fn split_tcp_gso_with(
    pkt: &[u8],
    gso_size: usize,
    scratch: &mut Vec<u8>,
    tcp_checksums: bool,
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let cut = Cut::of(pkt, gso_size, tcp_checksums)?;
    for i in 0..cut.n {
        let (from, to) = cut.chunk(i, pkt.len());
        scratch.clear();
        scratch.extend_from_slice(&pkt[..cut.hl]);
        scratch.extend_from_slice(&pkt[from..to]);
        cut.fix(scratch, i);
        emit(scratch);
    }
    Ok(cut.n)
}

/// [`split_tcp_gso_with`] without copying the payload: segment `i`'s
/// header is written just before its payload, over the last bytes of
/// segment `i - 1`'s payload, which `emit` has consumed by then. `pkt`
/// is overwritten. Needs `gso_size` at least the headers' length (else it
/// falls back to the copying split, using `scratch`).
pub fn split_tcp_gso_in_place(
    pkt: &mut [u8],
    gso_size: usize,
    scratch: &mut Vec<u8>,
    tcp_checksums: bool,
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let cut = Cut::of(pkt, gso_size, tcp_checksums)?;
    if gso_size < cut.hl {
        return split_tcp_gso_with(pkt, gso_size, scratch, tcp_checksums, emit);
    }
    scratch.clear();
    scratch.extend_from_slice(&pkt[..cut.hl]);
    let len = pkt.len();
    for i in 0..cut.n {
        let (from, to) = cut.chunk(i, len);
        let start = from - cut.hl;
        // Segment 0's header is the super-packet's own.
        if i > 0 {
            pkt[start..from].copy_from_slice(scratch);
        }
        let seg = &mut pkt[start..to];
        cut.fix(seg, i);
        emit(seg);
    }
    Ok(cut.n)
}

/// How a TCP super-packet is cut (`tcp_gso_segment`'s rules).
struct Cut {
    l: TcpLayout,
    hl: usize,
    gso: usize,
    n: usize,
    seq0: u32,
    id0: u16,
    flags0: u8,
    tcp_checksums: bool,
}

impl Cut {
    fn of(pkt: &[u8], gso: usize, tcp_checksums: bool) -> Result<Cut, OffloadError> {
        let l = tcp_layout(pkt).ok_or(OffloadError::UnsupportedPacket)?;
        if gso == 0 {
            return Err(OffloadError::UnsupportedPacket);
        }
        let hl = l.headers();
        Ok(Cut {
            l,
            hl,
            gso,
            n: (pkt.len() - hl).div_ceil(gso).max(1),
            seq0: be32(pkt, l.ip + 4),
            id0: be16(pkt, 4),
            flags0: pkt[l.ip + 13],
            tcp_checksums,
        })
    }

    /// Segment `i`'s payload as a range of a `len`-byte super-packet.
    fn chunk(&self, i: usize, len: usize) -> (usize, usize) {
        let from = (self.hl + i * self.gso).min(len);
        (from, (from + self.gso).min(len))
    }

    /// Make `seg` (the super-packet's headers + segment `i`'s payload)
    /// segment `i`: lengths, IPv4 ID and header checksum, sequence
    /// number, flags, TCP checksum.
    fn fix(&self, seg: &mut [u8], i: usize) {
        let l = self.l;
        let tcp_len = seg.len() - l.ip;
        if l.v6 {
            seg[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        } else {
            let total = seg.len() as u16;
            seg[2..4].copy_from_slice(&total.to_be_bytes());
            seg[4..6].copy_from_slice(&self.id0.wrapping_add(i as u16).to_be_bytes());
            fill_ipv4_checksum(seg, l.ip);
        }
        let t = l.ip;
        let seq = self.seq0.wrapping_add((i * self.gso) as u32);
        seg[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = self.flags0;
        if i + 1 < self.n {
            flags &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            flags &= !TCP_CWR;
        }
        seg[t + 13] = flags;
        seg[t + 16..t + 18].fill(0);
        if self.tcp_checksums {
            let sum = checksum::combine(pseudo_sum(seg, l.v6, tcp_len), checksum::data(&seg[t..]));
            seg[t + 16..t + 18].copy_from_slice(&checksum::finish(sum).to_be_bytes());
        }
    }
}

/// Turn one packet read from an offloading TUN device (header `hdr`,
/// packet `pkt` after the header) into ordinary packets for `emit`:
/// partial checksums are completed, TCP super-packets split. Returns the
/// number of packets emitted. On error nothing is emitted: the caller
/// drops (and counts) the packet rather than pass on something corrupt.
pub fn rx_packet(
    hdr: &VnetHdr,
    pkt: &mut [u8],
    scratch: &mut Vec<u8>,
    emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    rx_packet_with(hdr, pkt, scratch, true, emit)
}

/// [`rx_packet`]; without `checksums`, partial checksums stay partial and
/// split segments carry no TCP checksum (see [`split_tcp_gso_with`]): for
/// a receiver that skips verifying packets the kernel vouches for
/// ([`VnetHdr::vouches`]) and records none of them.
pub fn rx_packet_with(
    hdr: &VnetHdr,
    pkt: &mut [u8],
    scratch: &mut Vec<u8>,
    checksums: bool,
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    match hdr.gso_kind() {
        GSO_NONE => {
            if checksums && hdr.flags & F_NEEDS_CSUM != 0 {
                complete_checksum(
                    pkt,
                    usize::from(hdr.csum_start),
                    usize::from(hdr.csum_offset),
                )?;
            }
            emit(pkt);
            Ok(1)
        }
        k @ (GSO_TCPV4 | GSO_TCPV6) => {
            let version = pkt.first().map(|b| b >> 4);
            if version != Some(if k == GSO_TCPV4 { 4 } else { 6 }) {
                return Err(OffloadError::UnsupportedPacket);
            }
            split_tcp_gso_in_place(pkt, usize::from(hdr.gso_size), scratch, checksums, emit)
        }
        k => Err(OffloadError::UnsupportedGso(k)),
    }
}

/// A TCP super-packet read from an offloading TUN device that the engine
/// may take whole, as one segment (what Linux's GRO hands its TCP: one skb
/// for many segments, `tcp_gro_receive`): `Some(n)`, the number of
/// segments it stands for, when `hdr` is a TCP GSO header of `pkt`'s IP
/// version (the kernel vouches for the packet, [`VnetHdr::vouches`]) and
/// `pkt` is a well-formed unfragmented TCP packet whose IP length field
/// covers it exactly; `None` for anything else, to be split with
/// [`rx_packet_with`].
///
/// The kernel only builds such a packet from consecutive segments with the
/// same headers (or takes it from a local TCP socket), so the engine sees
/// the same bytes, sequence numbers and flags as from the split: PSH and
/// FIN belong to the last segment, CWR to the first, and one segment
/// carries them the same way. ACK policy is byte-counted (an ACK at least
/// every second full-sized segment's worth, RFC 5681 §4.2), so one large
/// segment is acknowledged as promptly as its parts.
pub fn whole_tcp_gso(hdr: &VnetHdr, pkt: &[u8]) -> Option<usize> {
    let version = match hdr.gso_kind() {
        GSO_TCPV4 => 4,
        GSO_TCPV6 => 6,
        _ => return None,
    };
    if pkt.first().map(|b| b >> 4) != Some(version) || hdr.gso_size == 0 {
        return None;
    }
    let l = tcp_layout(pkt)?;
    let gso = usize::from(hdr.gso_size);
    Some((pkt.len() - l.headers()).div_ceil(gso).max(1))
}

/// The open batch of a [`Coalescer`].
#[derive(Debug, Clone, Copy)]
struct Batch {
    /// Layout of the first segment; `None` for a packet that is passed
    /// through as is (not TCP data we may merge).
    layout: Option<TcpLayout>,
    /// Payload bytes of the first segment = the GSO segment size.
    gso_size: usize,
    segments: usize,
    /// Sequence number the next segment must start at.
    next_seq: u32,
    /// No more segments may be appended (the last one was short or had
    /// PSH/FIN, or the packet is full).
    closed: bool,
}

/// What [`Coalescer::push`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// The packet is part of the batch now.
    Added,
    /// The packet does not fit the open batch: take the batch with
    /// [`Coalescer::frame`] / [`Coalescer::clear`] and push it again.
    Full,
}

/// Merges consecutive TCP segments of one flow into one GSO super-packet
/// that the kernel will cut back into exactly those segments (up to the
/// IPv4 ID, see below).
///
/// A segment joins the batch when it continues it exactly: same IP header
/// (addresses, TOS/traffic class, flow label, TTL/hop limit, DF), same TCP
/// ports, ACK number, window, urgent pointer and options bytes, sequence
/// number right after the previous segment, the same flags (apart from
/// PSH/FIN, allowed on the last segment, and CWR, allowed on the first),
/// and every segment but the last carries exactly the first one's payload
/// length. SYN, RST and URG segments, pure ACKs, IPv4 without DF or with
/// options, IPv6 with extension headers and anything that is not TCP pass
/// through alone and unchanged.
///
/// IPv4 IDs: the kernel numbers the segments it cuts from the first
/// segment's ID upward, whatever the original IDs were. Only DF packets
/// are merged, for which the ID has no meaning (RFC 6864 §4.1: atomic
/// datagrams); the engine sends ID 0.
#[derive(Debug, Clone)]
pub struct Coalescer {
    /// `VNET_HDR_LEN` bytes of header space, then the packet.
    buf: Vec<u8>,
    batch: Option<Batch>,
    max_packet: usize,
    /// Segments merged into multi-segment super-packets so far.
    merged_segments: u64,
    /// `frame` finalised the open batch (header written, lengths fixed).
    framed: bool,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer::new(MAX_SUPER_PACKET)
    }
}

impl Coalescer {
    /// A coalescer whose super-packets stay within `max_packet` bytes of
    /// IP packet (at most [`MAX_SUPER_PACKET`]).
    pub fn new(max_packet: usize) -> Coalescer {
        Coalescer {
            buf: Vec::with_capacity(VNET_HDR_LEN + MAX_SUPER_PACKET),
            batch: None,
            max_packet: max_packet.min(MAX_SUPER_PACKET),
            merged_segments: 0,
            framed: false,
        }
    }

    /// No batch is open.
    pub fn is_empty(&self) -> bool {
        self.batch.is_none()
    }

    /// Segments in the open batch (0 if none).
    pub fn segments(&self) -> usize {
        self.batch.map_or(0, |b| b.segments)
    }

    /// Segments that went out as part of a multi-segment super-packet
    /// (counted by [`Coalescer::frame`]).
    pub fn merged_segments(&self) -> u64 {
        self.merged_segments
    }

    /// Add `pkt` (a whole IP packet as the engine produced it) to the
    /// batch, or report [`Push::Full`] if it cannot join the open batch.
    /// An empty coalescer accepts every packet.
    pub fn push(&mut self, pkt: &[u8]) -> Push {
        let Some(batch) = self.batch else {
            self.start(pkt);
            return Push::Added;
        };
        let Some(l) = batch.layout else {
            return Push::Full;
        };
        if batch.closed || self.framed || !self.continues(&batch, l, pkt) {
            return Push::Full;
        }
        let payload = &pkt[l.headers()..];
        self.buf.extend_from_slice(payload);
        let flags = pkt[l.ip + 13];
        let b = self.batch.as_mut().expect("open batch");
        b.segments += 1;
        b.next_seq = b.next_seq.wrapping_add(payload.len() as u32);
        b.closed = payload.len() < b.gso_size
            || flags & (TCP_PSH | TCP_FIN) != 0
            || self.buf.len() - VNET_HDR_LEN + b.gso_size > self.max_packet;
        if flags & (TCP_PSH | TCP_FIN) != 0 {
            // Carry PSH/FIN to the super-packet header: the kernel keeps
            // them on the last segment only.
            let t = VNET_HDR_LEN + l.ip + 13;
            self.buf[t] |= flags & (TCP_PSH | TCP_FIN);
        }
        Push::Added
    }

    fn start(&mut self, pkt: &[u8]) {
        self.buf.clear();
        self.buf.resize(VNET_HDR_LEN, 0);
        self.buf.extend_from_slice(pkt);
        let layout = tcp_layout(pkt).filter(|l| {
            let flags = pkt[l.ip + 13];
            let v4_ok = l.v6 || (l.ip == 20 && be16(pkt, 6) == 0x4000);
            v4_ok
                && pkt.len() > l.headers()
                && flags & (TCP_SYN | TCP_RST | TCP_URG) == 0
                && be16(pkt, l.ip + 18) == 0
        });
        let batch = match layout {
            Some(l) => {
                let gso_size = pkt.len() - l.headers();
                let flags = pkt[l.ip + 13];
                Batch {
                    layout: Some(l),
                    gso_size,
                    segments: 1,
                    next_seq: be32(pkt, l.ip + 4).wrapping_add(gso_size as u32),
                    closed: flags & (TCP_PSH | TCP_FIN) != 0
                        || pkt.len() + gso_size > self.max_packet,
                }
            }
            None => Batch {
                layout: None,
                gso_size: 0,
                segments: 1,
                next_seq: 0,
                closed: true,
            },
        };
        self.batch = Some(batch);
    }

    /// Whether `pkt` continues the open batch (first segment at `buf`).
    fn continues(&self, b: &Batch, l: TcpLayout, pkt: &[u8]) -> bool {
        let first = &self.buf[VNET_HDR_LEN..VNET_HDR_LEN + l.headers()];
        let Some(pl) = tcp_layout(pkt) else {
            return false;
        };
        if pl != l {
            return false;
        }
        let payload = pkt.len() - l.headers();
        if payload == 0 || payload > b.gso_size {
            return false;
        }
        let ip_same = if l.v6 {
            // Version, traffic class, flow label; next header; hop limit;
            // addresses (the payload length differs).
            first[..4] == pkt[..4] && first[6..40] == pkt[6..40]
        } else {
            // TOS; flags/fragment (DF, checked at start); TTL, protocol;
            // addresses. Not: total length, ID, header checksum.
            first[1] == pkt[1] && first[6..10] == pkt[6..10] && first[12..20] == pkt[12..20]
        };
        if !ip_same {
            return false;
        }
        let (ft, pt) = (&first[l.ip..], &pkt[l.ip..l.headers()]);
        let first_flags = ft[13] & !(TCP_PSH | TCP_FIN | TCP_CWR);
        let flags = pt[13] & !(TCP_PSH | TCP_FIN);
        ft[..4] == pt[..4] // ports
            && be32(pt, 4) == b.next_seq
            && ft[8..13] == pt[8..13] // ACK, data offset
            && flags == first_flags
            && ft[14..16] == pt[14..16] // window
            && ft[18..] == pt[18..] // urgent pointer (zero), options
    }

    /// The open batch as a frame for an `IFF_VNET_HDR` TUN device
    /// (`virtio_net_hdr` + IP packet), or `None` if no batch is open.
    /// A single packet goes out unchanged with an all-zero header; several
    /// segments as one super-packet with `NEEDS_CSUM` and TCP GSO. Call
    /// [`Coalescer::clear`] once the frame is written.
    pub fn frame(&mut self) -> Option<&[u8]> {
        let b = self.batch?;
        if self.framed {
            return Some(&self.buf);
        }
        self.framed = true;
        let hdr = match (b.layout, b.segments) {
            (Some(l), n) if n > 1 => {
                let pkt = &mut self.buf[VNET_HDR_LEN..];
                let tcp_len = pkt.len() - l.ip;
                if l.v6 {
                    pkt[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
                } else {
                    let total = pkt.len() as u16;
                    pkt[2..4].copy_from_slice(&total.to_be_bytes());
                    fill_ipv4_checksum(pkt, l.ip);
                }
                // NEEDS_CSUM: the field holds the pseudo-header sum.
                let sum = pseudo_sum(pkt, l.v6, tcp_len);
                pkt[l.ip + 16..l.ip + 18].copy_from_slice(&sum.to_be_bytes());
                self.merged_segments += n as u64;
                VnetHdr {
                    flags: F_NEEDS_CSUM,
                    gso_type: if l.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
                    hdr_len: l.headers() as u16,
                    gso_size: b.gso_size as u16,
                    csum_start: l.ip as u16,
                    csum_offset: 16,
                }
            }
            _ => VnetHdr::default(),
        };
        self.buf[..VNET_HDR_LEN].copy_from_slice(&hdr.encode());
        Some(&self.buf)
    }

    /// [`Coalescer::frame`] as an owned buffer: the open batch's frame is
    /// returned and `spare` (cleared) becomes the buffer of the next batch,
    /// so the frame can be handed to another thread without a copy.
    pub fn take_frame(&mut self, mut spare: Vec<u8>) -> Option<Vec<u8>> {
        self.frame()?;
        spare.clear();
        spare.reserve(VNET_HDR_LEN + MAX_SUPER_PACKET);
        let frame = std::mem::replace(&mut self.buf, spare);
        self.batch = None;
        self.framed = false;
        Some(frame)
    }

    /// Drop the open batch (after its frame was written).
    pub fn clear(&mut self) {
        self.batch = None;
        self.framed = false;
        self.buf.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamp};
    use proptest::prelude::*;
    use std::net::SocketAddr;

    fn sock(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), port)
    }

    /// An engine-built segment (`hollywood_wire::build_tcp_ip`: DF, ID 0).
    fn seg(v6: bool, seq: u32, flags: TcpFlags, payload: &[u8], ts: Option<u32>) -> Vec<u8> {
        let (src, dst) = if v6 {
            (sock("fd00::2", 40000), sock("fd00:1::2", 5201))
        } else {
            (sock("10.0.0.2", 40000), sock("10.0.1.2", 5201))
        };
        let options = TcpOptions {
            timestamp: ts.map(|v| Timestamp { tsval: v, tsecr: 7 }),
            ..TcpOptions::default()
        };
        let repr = TcpRepr {
            src_port: 0,
            dst_port: 0,
            seq: SeqNumber(seq),
            ack: SeqNumber(99),
            flags,
            window: 512,
            urgent: 0,
            options,
        };
        hollywood_wire::build_tcp_ip(src, dst, &repr, payload)
    }

    fn set_id(p: &mut [u8], id: u16) {
        p[4..6].copy_from_slice(&id.to_be_bytes());
        fill_ipv4_checksum(p, 20);
    }

    /// Push all of `segs`, collecting frames (header, packet).
    fn coalesce(segs: &[Vec<u8>]) -> Vec<(VnetHdr, Vec<u8>)> {
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        for s in segs {
            if c.push(s) == Push::Full {
                let f = c.frame().unwrap();
                out.push((VnetHdr::decode(f).unwrap(), f[VNET_HDR_LEN..].to_vec()));
                c.clear();
                assert_eq!(c.push(s), Push::Added, "an empty coalescer takes anything");
            }
        }
        if let Some(f) = c.frame() {
            out.push((VnetHdr::decode(f).unwrap(), f[VNET_HDR_LEN..].to_vec()));
        }
        out
    }

    /// What the kernel would put on the wire for each frame.
    fn split_all(frames: &[(VnetHdr, Vec<u8>)]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        for (h, p) in frames {
            let mut p = p.clone();
            rx_packet(h, &mut p, &mut scratch, |s| out.push(s.to_vec())).unwrap();
        }
        out
    }

    fn verifies(p: &[u8]) -> bool {
        hollywood_wire::parse_tcp_ip(p).is_ok()
    }

    #[test]
    fn header_round_trips_little_endian() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let b = h.encode();
        assert_eq!(b, [1, 0x81, 52, 0, 0xa8, 0x05, 20, 0, 16, 0]);
        assert_eq!(VnetHdr::decode(&b), Some(h));
        assert_eq!(h.gso_kind(), GSO_TCPV4);
        assert_eq!(VnetHdr::decode(&b[..9]), None);
    }

    #[test]
    fn three_full_segments_and_a_short_psh_one_become_one_super_packet() {
        for v6 in [false, true] {
            let a = vec![1u8; 1000];
            let short = vec![2u8; 300];
            let segs = vec![
                seg(v6, 1000, TcpFlags::ACK, &a, Some(5)),
                seg(v6, 2000, TcpFlags::ACK, &a, Some(5)),
                seg(v6, 3000, TcpFlags::ACK, &a, Some(5)),
                seg(v6, 4000, TcpFlags::ACK | TcpFlags::PSH, &short, Some(5)),
            ];
            let frames = coalesce(&segs);
            assert_eq!(frames.len(), 1, "v6={v6}");
            let (h, p) = &frames[0];
            assert_eq!(h.flags, F_NEEDS_CSUM);
            assert_eq!(h.gso_type, if v6 { GSO_TCPV6 } else { GSO_TCPV4 });
            assert_eq!(h.gso_size, 1000);
            let ip = if v6 { 40 } else { 20 };
            assert_eq!(usize::from(h.csum_start), ip);
            assert_eq!(h.csum_offset, 16);
            assert_eq!(
                usize::from(h.hdr_len),
                ip + 32,
                "TCP header with timestamps"
            );
            assert_eq!(p.len(), ip + 32 + 3300);
            // Completing the partial checksum yields a valid packet.
            let mut whole = p.clone();
            complete_checksum(&mut whole, ip, 16).unwrap();
            assert!(verifies(&whole));
            let mut expect = segs.clone();
            if !v6 {
                for (i, s) in expect.iter_mut().enumerate() {
                    set_id(s, i as u16);
                }
            }
            assert_eq!(split_all(&frames), expect, "v6={v6}");
        }
    }

    #[test]
    fn a_split_without_tcp_checksums_differs_only_in_the_checksum_field() {
        for v6 in [false, true] {
            let a = vec![7u8; 1000];
            let segs: Vec<Vec<u8>> = (0..5)
                .map(|i| seg(v6, 1000 * (i + 1), TcpFlags::ACK, &a, Some(5)))
                .collect();
            let frames = coalesce(&segs);
            assert_eq!(frames.len(), 1);
            let (h, p) = &frames[0];
            assert!(h.vouches(), "a super-packet is the kernel's own");
            let (mut with, mut without) = (Vec::new(), Vec::new());
            let mut scratch = Vec::new();
            rx_packet(h, &mut p.clone(), &mut scratch, |s| with.push(s.to_vec())).unwrap();
            rx_packet_with(h, &mut p.clone(), &mut scratch, false, |s| {
                without.push(s.to_vec())
            })
            .unwrap();
            assert_eq!(with.len(), 5);
            let ip = if v6 { 40 } else { 20 };
            for (w, o) in with.iter().zip(&without) {
                assert!(verifies(w));
                assert_eq!(o[ip + 16..ip + 18], [0, 0]);
                let mut o = o.clone();
                o[ip + 16..ip + 18].copy_from_slice(&w[ip + 16..ip + 18]);
                assert_eq!(&o, w, "v6={v6}");
            }
        }
        // An ordinary frame (no flags) is not vouched for.
        assert!(!VnetHdr::default().vouches());
        let valid = VnetHdr {
            flags: F_DATA_VALID,
            ..VnetHdr::default()
        };
        assert!(valid.vouches());
    }

    #[test]
    fn what_may_not_merge_passes_through_alone_and_unchanged() {
        let d = vec![3u8; 500];
        let segs = vec![
            seg(false, 1, TcpFlags::SYN, &[], None),      // SYN
            seg(false, 100, TcpFlags::ACK, &[], Some(1)), // pure ACK
            seg(false, 100, TcpFlags::ACK, &d, Some(1)),  // data
            seg(false, 600, TcpFlags::ACK, &d, Some(2)),  // other TSval
            seg(false, 1100, TcpFlags::ACK, &d, Some(2)), // merges
            seg(false, 1700, TcpFlags::ACK, &d, Some(2)), // gap
            seg(false, 2200, TcpFlags::ACK | TcpFlags::FIN, &d, Some(2)), // merges, last
            seg(false, 2701, TcpFlags::ACK, &d, Some(2)), // after FIN
            seg(true, 2701, TcpFlags::ACK, &d, Some(2)),  // other family
            seg(false, 3201, TcpFlags::ACK | TcpFlags::RST, &[], None), // RST
        ];
        let frames = coalesce(&segs);
        let sizes: Vec<u16> = frames.iter().map(|(h, _)| h.gso_size).collect();
        assert_eq!(sizes, vec![0, 0, 0, 500, 500, 0, 0, 0]);
        for (h, p) in &frames {
            if h.gso_size == 0 {
                assert_eq!(*h, VnetHdr::default());
                assert!(segs.contains(p), "single packets pass unchanged");
            }
        }
        let mut expect = segs.clone();
        set_id(&mut expect[4], 1);
        set_id(&mut expect[6], 1);
        assert_eq!(split_all(&frames), expect);
    }

    #[test]
    fn non_tcp_and_garbage_pass_through() {
        let udp_ish = {
            let mut p = seg(false, 1, TcpFlags::ACK, &[1, 2, 3], None);
            p[9] = 17;
            p
        };
        let frames = coalesce(&[vec![0xff; 3], udp_ish.clone(), vec![], udp_ish.clone()]);
        assert_eq!(frames.len(), 4);
        assert!(frames.iter().all(|(h, _)| *h == VnetHdr::default()));
        assert_eq!(frames[1].1, udp_ish);
    }

    #[test]
    fn super_packets_stay_under_64k() {
        let d = vec![9u8; 1448];
        let segs: Vec<_> = (0..100u32)
            .map(|i| seg(false, i * 1448, TcpFlags::ACK, &d, Some(1)))
            .collect();
        let frames = coalesce(&segs);
        assert!(frames.iter().all(|(_, p)| p.len() <= MAX_SUPER_PACKET));
        assert_eq!(frames[0].0.gso_size, 1448);
        assert_eq!(frames.len(), 3, "45 + 45 + 10 segments");
        assert_eq!(split_all(&frames).len(), 100);
    }

    #[test]
    fn partial_checksum_is_completed_for_udp_too() {
        // A UDP datagram as the kernel hands it over with NEEDS_CSUM.
        let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
        let mut p = vec![0x45, 0, 0, 31, 0, 0, 0x40, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        fill_ipv4_checksum(&mut p, 20);
        p.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 11, 0, 0, b'a', b'b', b'c']);
        let pseudo = checksum::pseudo_header_v4(src, dst, 17, 11);
        p[26..28].copy_from_slice(&pseudo.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 6,
            ..VnetHdr::default()
        };
        let mut got = Vec::new();
        rx_packet(&h, &mut p, &mut Vec::new(), |s| got.push(s.to_vec())).unwrap();
        let full = checksum::combine(pseudo, checksum::data(&got[0][20..]));
        assert_eq!(full, 0xffff, "the completed UDP checksum verifies");
        assert_eq!(
            complete_checksum(&mut p, 20, 100),
            Err(OffloadError::BadChecksumOffsets)
        );
    }

    #[test]
    fn bad_gso_packets_are_refused_not_mangled() {
        let d = vec![1u8; 100];
        let p4 = seg(false, 0, TcpFlags::ACK, &d, None);
        let mut scratch = Vec::new();
        let mut n = 0;
        let mut h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6,
            gso_size: 10,
            csum_start: 20,
            csum_offset: 16,
            hdr_len: 40,
        };
        let mut run = |h: &VnetHdr, p: &[u8]| {
            let mut p = p.to_vec();
            rx_packet(h, &mut p, &mut scratch, |_| n += 1)
        };
        assert_eq!(
            run(&h, &p4),
            Err(OffloadError::UnsupportedPacket),
            "v4 as TCPV6"
        );
        h.gso_type = GSO_UDP_L4;
        assert_eq!(run(&h, &p4), Err(OffloadError::UnsupportedGso(GSO_UDP_L4)));
        h.gso_type = GSO_TCPV4;
        h.gso_size = 0;
        assert_eq!(run(&h, &p4), Err(OffloadError::UnsupportedPacket));
        h.gso_size = 10;
        assert_eq!(
            run(&h, &p4[..p4.len() - 1]),
            Err(OffloadError::UnsupportedPacket)
        );
        assert_eq!(run(&h, &p4), Ok(10));
        assert_eq!(n, 10);
    }

    #[test]
    fn a_whole_super_packet_stands_for_the_segments_it_splits_into() {
        for v6 in [false, true] {
            let a = vec![3u8; 1000];
            let segs = vec![
                seg(v6, 1000, TcpFlags::ACK, &a, Some(5)),
                seg(v6, 2000, TcpFlags::ACK, &a, Some(5)),
                seg(v6, 3000, TcpFlags::ACK | TcpFlags::PSH, &a[..10], Some(5)),
            ];
            let frames = coalesce(&segs);
            let (h, p) = &frames[0];
            assert_eq!(whole_tcp_gso(h, p), Some(3), "v6={v6}");
            assert_eq!(split_all(&frames).len(), 3);
            // The engine reads it as one segment: the first one's sequence
            // number, the last one's PSH, every byte.
            let s = hollywood_wire::parse_tcp_ip_unverified(p).unwrap();
            assert_eq!(s.tcp.seq, SeqNumber(1000));
            assert_eq!(s.tcp.flags, TcpFlags::ACK | TcpFlags::PSH);
            assert_eq!(s.payload.len(), 2010);
            // Not whole: no GSO, the other IP version, no segment size, a
            // length field that does not cover the packet.
            let none = VnetHdr {
                gso_type: GSO_NONE,
                ..*h
            };
            assert_eq!(whole_tcp_gso(&none, p), None);
            let other = VnetHdr {
                gso_type: if v6 { GSO_TCPV4 } else { GSO_TCPV6 },
                ..*h
            };
            assert_eq!(whole_tcp_gso(&other, p), None);
            let zero = VnetHdr { gso_size: 0, ..*h };
            assert_eq!(whole_tcp_gso(&zero, p), None);
            assert_eq!(whole_tcp_gso(h, &p[..p.len() - 1]), None);
            let udp = VnetHdr {
                gso_type: GSO_UDP_L4,
                ..*h
            };
            assert_eq!(whole_tcp_gso(&udp, p), None);
        }
    }

    #[test]
    fn gro_packet_with_cwr_and_fin_splits_like_the_kernel() {
        let d: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let mut big = seg(
            false,
            7,
            TcpFlags::ACK | TcpFlags::CWR | TcpFlags::PSH | TcpFlags::FIN,
            &d,
            Some(3),
        );
        set_id(&mut big, 40);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            gso_size: 1000,
            csum_start: 20,
            csum_offset: 16,
            hdr_len: 52,
        };
        let mut got = Vec::new();
        rx_packet(&h, &mut big, &mut Vec::new(), |s| got.push(s.to_vec())).unwrap();
        assert_eq!(got.len(), 3);
        let flags: Vec<u8> = got.iter().map(|p| p[33]).collect();
        assert_eq!(flags, vec![0x90, 0x10, 0x19], "CWR first, PSH+FIN last");
        for (i, p) in got.iter().enumerate() {
            let s = hollywood_wire::parse_tcp_ip(p).expect("valid checksums");
            assert_eq!(s.tcp.seq, SeqNumber(7 + 1000 * i as u32));
            assert_eq!(s.payload, &d[1000 * i..(1000 * (i + 1)).min(2500)]);
            assert_eq!(be16(p, 4), 40 + i as u16);
        }
    }

    proptest! {
        /// The kernel's segmentation of our super-packets gives back the
        /// engine's segments (for IPv4 with the IDs the kernel assigns).
        #[test]
        fn split_of_coalesce_is_identity(
            v6 in any::<bool>(),
            mss in 1usize..1500,
            // (payload length as a fraction of the MSS, flags, timestamp step)
            plan in proptest::collection::vec((0usize..=4, 0u8..8, 0u8..4), 1..60),
            seed in any::<u8>(),
        ) {
            let mut segs = Vec::new();
            let mut seq = 1_000_000u32;
            let mut ts = 1u32;
            for (i, &(len_kind, f, ts_step)) in plan.iter().enumerate() {
                let len = match len_kind { 0 => 0, 1 => 1 + mss / 3, _ => mss };
                let mut flags = TcpFlags::ACK;
                if f == 1 { flags |= TcpFlags::PSH; }
                if f == 2 { flags |= TcpFlags::CWR; }
                if f == 3 { flags |= TcpFlags::FIN; }
                if ts_step == 0 { ts += 1; }
                let payload: Vec<u8> = (0..len).map(|k| (k as u8) ^ seed ^ (i as u8)).collect();
                let mut p = seg(v6, seq, flags, &payload, Some(ts));
                if f == 4 {
                    // A gap: the next segment does not continue this one.
                    seq = seq.wrapping_add(17);
                }
                seq = seq.wrapping_add(len as u32 + u32::from(flags.fin()));
                if !v6 { set_id(&mut p, 0); }
                segs.push(p);
            }
            let frames = coalesce(&segs);
            prop_assert!(frames.len() <= segs.len());
            // The kernel numbers IPv4 IDs per super-packet from the first.
            let mut expect = segs.clone();
            if !v6 {
                let mut k = 0;
                for (h, p) in &frames {
                    let n = if h.gso_size == 0 { 1 } else {
                        (p.len() - usize::from(h.hdr_len)).div_ceil(usize::from(h.gso_size))
                    };
                    for j in 0..n { set_id(&mut expect[k + j], j as u16); }
                    k += n;
                }
            }
            let split = split_all(&frames);
            prop_assert_eq!(split.len(), segs.len());
            for (a, b) in split.iter().zip(&expect) {
                prop_assert!(verifies(a));
                prop_assert_eq!(a, b);
            }
        }
    }
}
