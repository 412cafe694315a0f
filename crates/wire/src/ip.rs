//! IPv4 (RFC 791) and IPv6 (RFC 8200) headers, and whole TCP/IP packets.
//!
//! As for TCP: [`Ipv4Packet`] / [`Ipv6Packet`] are zero-copy views whose
//! accessors never panic after `new_checked`; [`Ipv4Repr`] / [`Ipv6Repr`]
//! are the structured headers with `parse` / `buffer_len` / `emit`, where
//! `buffer_len` is the header length `emit` writes (the payload is the
//! caller's).
//!
//! Scope: no IPv4 reassembly (fragments are `Unsupported`), IPv4 options are
//! skipped on parse and never emitted, IPv6 extension headers are not
//! followed (the fixed header's next-header value is reported as is).

use crate::{checksum, Error, ParsedSegment, Result, TcpRepr};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// IANA protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IANA protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// Default TTL / hop limit for packets we originate (RFC 1700 / IANA
/// recommended value, also Linux's default).
pub const DEFAULT_HOP_LIMIT: u8 = 64;

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

// ---------------------------------------------------------------- IPv4 ----

/// Byte ranges of the IPv4 header fields (RFC 791 §3.1).
pub mod field_v4 {
    /// A byte range of a fixed-position field.
    pub type Field = core::ops::Range<usize>;
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (high 6 bits) and ECN (low 2 bits) (RFC 2474, RFC 3168).
    pub const DSCP_ECN: usize = 1;
    /// Total length.
    pub const LENGTH: Field = 2..4;
    /// Identification.
    pub const IDENT: Field = 4..6;
    /// Flags (3 bits) and fragment offset (13 bits).
    pub const FLG_OFF: Field = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Field = 10..12;
    /// Source address.
    pub const SRC_ADDR: Field = 12..16;
    /// Destination address.
    pub const DST_ADDR: Field = 16..20;
    /// Length of the header without options.
    pub const HEADER_LEN: usize = 20;
}

packet_view! {
    /// A zero-copy view over an IPv4 packet.
    ///
    /// After [`Ipv4Packet::new_checked`] succeeds, no accessor panics.
    Ipv4Packet
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Check that the header and the total length fit the buffer:
    /// `Truncated` if the buffer is shorter than 20 bytes, than IHL says or
    /// than the total length says; `Malformed` if IHL < 5 or the total length
    /// is shorter than the header (RFC 791 §3.1). Bytes beyond the total
    /// length (e.g. Ethernet padding) are allowed and ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field_v4::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = self.header_len() as usize;
        let total = self.total_len() as usize;
        if hlen < field_v4::HEADER_LEN || total < hlen {
            Err(Error::Malformed)
        } else if hlen > len || total > len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// IP version field (4 for IPv4).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field_v4::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field_v4::VER_IHL] & 0x0f) * 4
    }
    /// Differentiated services code point (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field_v4::DSCP_ECN] >> 2
    }
    /// ECN codepoint (RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field_v4::DSCP_ECN] & 0x03
    }
    /// Total length (header + payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field_v4::LENGTH.start)
    }
    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field_v4::IDENT.start)
    }
    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field_v4::FLG_OFF.start) & 0x4000 != 0
    }
    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field_v4::FLG_OFF.start) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field_v4::FLG_OFF.start) & 0x1fff) << 3
    }
    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field_v4::TTL]
    }
    /// Protocol number of the payload.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field_v4::PROTOCOL]
    }
    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field_v4::CHECKSUM.start)
    }
    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field_v4::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field_v4::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// Option bytes (between the fixed header and IHL).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field_v4::HEADER_LEN..self.header_len() as usize]
    }
    /// Payload: from the end of the header to the total length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len() as usize..self.total_len() as usize]
    }
    /// Whether the header checksum verifies (RFC 791 §3.1, RFC 1071).
    pub fn verify_checksum(&self) -> bool {
        checksum::data(&self.buffer.as_ref()[..self.header_len() as usize]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    #[inline]
    fn set_u16(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    /// Set version and header length in bytes (a multiple of 4 in 20..=60).
    ///
    /// # Panics
    /// If `header_len` is not a multiple of 4 or outside 20..=60.
    pub fn set_version_and_header_len(&mut self, version: u8, header_len: u8) {
        assert!(header_len % 4 == 0 && (20..=60).contains(&header_len));
        self.buffer.as_mut()[field_v4::VER_IHL] = (version << 4) | (header_len / 4);
    }
    /// Set DSCP (6 bits) and ECN (2 bits).
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field_v4::DSCP_ECN] = (dscp << 2) | (ecn & 0x03);
    }
    /// Set the total length.
    pub fn set_total_len(&mut self, v: u16) {
        self.set_u16(field_v4::LENGTH.start, v)
    }
    /// Set the identification.
    pub fn set_ident(&mut self, v: u16) {
        self.set_u16(field_v4::IDENT.start, v)
    }
    /// Set the flags and fragment offset (`offset` in bytes, a multiple of 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = ((dont_frag as u16) << 14) | ((more_frags as u16) << 13) | ((offset >> 3) & 0x1fff);
        self.set_u16(field_v4::FLG_OFF.start, v)
    }
    /// Set the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field_v4::TTL] = v;
    }
    /// Set the protocol number.
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field_v4::PROTOCOL] = v;
    }
    /// Set the header checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field_v4::CHECKSUM.start, v)
    }
    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field_v4::SRC_ADDR].copy_from_slice(&a.octets());
    }
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field_v4::DST_ADDR].copy_from_slice(&a.octets());
    }
    /// Compute and store the header checksum (IHL must be set).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hlen = self.header_len() as usize;
        let c = checksum::checksum(&self.buffer.as_ref()[..hlen]);
        self.set_checksum(c);
    }
    /// Mutable payload (IHL and total length must be set).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len() as usize, self.total_len() as usize);
        &mut self.buffer.as_mut()[h..t]
    }
}

/// A structured IPv4 header (RFC 791). Options are skipped on parse and
/// never emitted; fragments cannot be represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number of the payload.
    pub protocol: u8,
    /// Payload length in bytes (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (RFC 2474), 6 bits.
    pub dscp: u8,
    /// ECN codepoint (RFC 3168), 2 bits.
    pub ecn: u8,
    /// Identification (RFC 6864: any value when DF is set and we never
    /// fragment).
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// A header for a packet we originate: TTL 64, DF set, ID 0, DSCP/ECN 0.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src,
            dst,
            protocol,
            payload_len,
            ttl: DEFAULT_HOP_LIMIT,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
        }
    }

    /// Parse a checked packet view: version must be 4 (`Unsupported`),
    /// fragments are `Unsupported`, the header checksum must verify
    /// (`Checksum`).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Unsupported);
        }
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        // RFC 791 §3.2: a packet is a fragment if MF is set or the offset is
        // non-zero. We do not reassemble.
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(Error::Unsupported);
        }
        Ok(Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() as usize - packet.header_len() as usize,
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Header length `emit` writes (always 20: no options).
    pub fn buffer_len(&self) -> usize {
        field_v4::HEADER_LEN
    }

    /// Write the 20-byte header (with checksum) into `buf[..20]`; the
    /// payload, `payload_len` bytes after it, is the caller's.
    ///
    /// # Panics
    /// If `buf` is shorter than 20 bytes or `payload_len + 20 > 65535`.
    pub fn emit(&self, buf: &mut [u8]) {
        let total = u16::try_from(self.payload_len + field_v4::HEADER_LEN)
            .expect("IPv4 total length exceeds 65535");
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..field_v4::HEADER_LEN]);
        p.set_version_and_header_len(4, field_v4::HEADER_LEN as u8);
        p.set_dscp_ecn(self.dscp, self.ecn);
        p.set_total_len(total);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, false, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
    }
}

// ---------------------------------------------------------------- IPv6 ----

/// Byte ranges of the IPv6 fixed header fields (RFC 8200 §3).
pub mod field_v6 {
    /// A byte range of a fixed-position field.
    pub type Field = core::ops::Range<usize>;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: Field = 0..4;
    /// Payload length.
    pub const LENGTH: Field = 4..6;
    /// Next header.
    pub const NXT_HDR: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC_ADDR: Field = 8..24;
    /// Destination address.
    pub const DST_ADDR: Field = 24..40;
    /// Length of the fixed header.
    pub const HEADER_LEN: usize = 40;
}

packet_view! {
    /// A zero-copy view over an IPv6 packet (fixed header + payload).
    ///
    /// After [`Ipv6Packet::new_checked`] succeeds, no accessor panics.
    Ipv6Packet
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// `Truncated` if the buffer is shorter than the 40-byte fixed header
    /// plus the payload length (RFC 8200 §3). Trailing bytes are ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field_v6::HEADER_LEN || field_v6::HEADER_LEN + self.payload_len() as usize > len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field_v6::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// IP version field (6 for IPv6).
    #[inline]
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    /// Traffic class (DSCP and ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }
    /// Payload length (everything after the fixed header).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field_v6::LENGTH.start)
    }
    /// Next header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field_v6::NXT_HDR]
    }
    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field_v6::HOP_LIMIT]
    }
    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field_v6::SRC_ADDR]);
        Ipv6Addr::from(a)
    }
    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field_v6::DST_ADDR]);
        Ipv6Addr::from(a)
    }
    /// Payload (payload-length bytes after the fixed header).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let end = field_v6::HEADER_LEN + self.payload_len() as usize;
        &self.buffer.as_ref()[field_v6::HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set version (6), traffic class and flow label (low 20 bits used).
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field_v6::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
    }
    /// Set the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field_v6::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field_v6::NXT_HDR] = v;
    }
    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field_v6::HOP_LIMIT] = v;
    }
    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field_v6::SRC_ADDR].copy_from_slice(&a.octets());
    }
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field_v6::DST_ADDR].copy_from_slice(&a.octets());
    }
    /// Mutable payload (payload length must be set).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = field_v6::HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[field_v6::HEADER_LEN..end]
    }
}

/// A structured IPv6 fixed header (RFC 8200 §3). Extension headers are not
/// parsed: `next_header` is whatever the fixed header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next header (protocol number if there are no extension headers).
    pub next_header: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// A header for a packet we originate: hop limit 64, traffic class and
    /// flow label 0.
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, payload_len: usize) -> Ipv6Repr {
        Ipv6Repr {
            src,
            dst,
            next_header,
            payload_len,
            hop_limit: DEFAULT_HOP_LIMIT,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    /// Parse a packet view: version must be 6 (`Unsupported`).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Unsupported);
        }
        Ok(Ipv6Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len() as usize,
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Header length `emit` writes (always 40).
    pub fn buffer_len(&self) -> usize {
        field_v6::HEADER_LEN
    }

    /// Write the 40-byte fixed header into `buf[..40]`.
    ///
    /// # Panics
    /// If `buf` is shorter than 40 bytes or `payload_len > 65535`
    /// (jumbograms are not supported).
    pub fn emit(&self, buf: &mut [u8]) {
        let len = u16::try_from(self.payload_len).expect("IPv6 payload length exceeds 65535");
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..field_v6::HEADER_LEN]);
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
    }
}

// ---------------------------------------------------------------- both ----

/// An IPv4 or IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4.
    V4(Ipv4Repr),
    /// IPv6.
    V6(Ipv6Repr),
}

impl IpRepr {
    /// Parse an IPv4 or IPv6 packet, dispatching on the version nibble.
    /// Returns the header and the payload (trailing bytes beyond the length
    /// fields are dropped).
    pub fn parse(packet: &[u8]) -> Result<(IpRepr, &[u8])> {
        match packet.first().map(|b| b >> 4) {
            None => Err(Error::Truncated),
            Some(4) => {
                let p = Ipv4Packet::new_checked(packet)?;
                let r = Ipv4Repr::parse(&p)?;
                let start = p.header_len() as usize;
                Ok((IpRepr::V4(r), &packet[start..start + r.payload_len]))
            }
            Some(6) => {
                let p = Ipv6Packet::new_checked(packet)?;
                let r = Ipv6Repr::parse(&p)?;
                let start = field_v6::HEADER_LEN;
                Ok((IpRepr::V6(r), &packet[start..start + r.payload_len]))
            }
            Some(_) => Err(Error::Unsupported),
        }
    }
    /// A header for a packet we originate (see [`Ipv4Repr::new`],
    /// [`Ipv6Repr::new`]), or `None` if `src`/`dst` differ in family.
    pub fn new(src: IpAddr, dst: IpAddr, protocol: u8, payload_len: usize) -> Option<IpRepr> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                Some(IpRepr::V4(Ipv4Repr::new(s, d, protocol, payload_len)))
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                Some(IpRepr::V6(Ipv6Repr::new(s, d, protocol, payload_len)))
            }
            _ => None,
        }
    }
    /// Source address.
    pub fn src_addr(&self) -> IpAddr {
        match self {
            IpRepr::V4(r) => r.src.into(),
            IpRepr::V6(r) => r.src.into(),
        }
    }
    /// Destination address.
    pub fn dst_addr(&self) -> IpAddr {
        match self {
            IpRepr::V4(r) => r.dst.into(),
            IpRepr::V6(r) => r.dst.into(),
        }
    }
    /// Protocol (v4) or next header (v6).
    pub fn protocol(&self) -> u8 {
        match self {
            IpRepr::V4(r) => r.protocol,
            IpRepr::V6(r) => r.next_header,
        }
    }
    /// Payload length.
    pub fn payload_len(&self) -> usize {
        match self {
            IpRepr::V4(r) => r.payload_len,
            IpRepr::V6(r) => r.payload_len,
        }
    }
    /// Header length `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            IpRepr::V4(r) => r.buffer_len(),
            IpRepr::V6(r) => r.buffer_len(),
        }
    }
    /// Write the header into `buf[..buffer_len()]` (panics as the
    /// per-family `emit` does).
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            IpRepr::V4(r) => r.emit(buf),
            IpRepr::V6(r) => r.emit(buf),
        }
    }
}

/// See [`crate::parse_tcp_ip`] and [`crate::parse_tcp_ip_unverified`].
pub fn parse_tcp_ip_with(packet: &[u8], verify_checksum: bool) -> Result<ParsedSegment<'_>> {
    let (ip, payload) = IpRepr::parse(packet)?;
    // RFC 8200 §4: extension headers sit between the fixed header and TCP;
    // we do not follow them, so anything but TCP here is unsupported.
    if ip.protocol() != IPPROTO_TCP {
        return Err(Error::Unsupported);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let (tcp, data) = TcpRepr::parse(payload, src, dst, verify_checksum)?;
    Ok(ParsedSegment {
        src: SocketAddr::new(src, tcp.src_port),
        dst: SocketAddr::new(dst, tcp.dst_port),
        tcp,
        payload: data,
    })
}

/// See [`crate::build_tcp_ip`]. Ports in `tcp` are overwritten by those of
/// `src` / `dst`.
///
/// # Panics
/// If `src` and `dst` differ in address family, or the packet would exceed
/// the 16-bit IP length fields.
pub fn build_tcp_ip(src: SocketAddr, dst: SocketAddr, tcp: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    build_tcp_ip_into(src, dst, tcp, payload, &mut buf);
    buf
}

/// [`build_tcp_ip`] into `buf`, cleared first (its allocation reused).
pub fn build_tcp_ip_into(
    src: SocketAddr,
    dst: SocketAddr,
    tcp: &TcpRepr,
    payload: &[u8],
    buf: &mut Vec<u8>,
) {
    let tcp = TcpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        ..*tcp
    };
    let seg_len = tcp.header_len() + payload.len();
    let ip = IpRepr::new(src.ip(), dst.ip(), IPPROTO_TCP, seg_len)
        .expect("build_tcp_ip: source and destination must be the same address family");
    let hlen = ip.buffer_len();
    // Zeroed headers, then the payload once (no zeroing it first).
    buf.clear();
    buf.reserve_exact(hlen + seg_len);
    buf.resize(hlen + tcp.header_len(), 0);
    buf.extend_from_slice(payload);
    ip.emit(buf);
    crate::tcp::emit_header_over(&tcp, &mut buf[hlen..], src.ip(), dst.ip());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_tcp_ip, SackBlock, SeqNumber, TcpFlags, TcpOptions, Timestamp};
    use proptest::prelude::*;

    /// A SYN-ACK captured from Linux 6.x over IPv4 loopback
    /// (127.0.0.1:47383 → 127.0.0.1:39918), IP ID 0, DF, TTL 64. The TCP
    /// checksum was recomputed (loopback offloads it); the IP header is as
    /// captured.
    const LINUX_SYNACK_V4: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0x3c, 0xba, 0x7f, 0x00, 0x00,
        0x01, 0x7f, 0x00, 0x00, 0x01, // IPv4
        0xb9, 0x17, 0x9b, 0xee, 0x4a, 0x1d, 0x5d, 0x7f, 0x37, 0x16, 0x8c, 0xdc, 0xa0, 0x12, 0xff,
        0xcb, 0xcf, 0x78, 0x00, 0x00, // TCP
        0x02, 0x04, 0xff, 0xd7, 0x04, 0x02, 0x08, 0x0a, 0xb5, 0xa4, 0x76, 0x5e, 0xef, 0xc8, 0xa4,
        0x20, 0x01, 0x03, 0x03, 0x0a, // options
    ];

    /// A data segment ("v6 data") captured over IPv6 loopback
    /// ([::1]:57002 → [::1]:42269), flow label 0xe236c; TCP checksum
    /// recomputed.
    const LINUX_DATA_V6: [u8; 79] = [
        0x60, 0x0e, 0x23, 0x6c, 0x00, 0x27, 0x06, 0x40, // ver/tc/flow, len 39, TCP, hop 64
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // ::1
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // ::1
        0xde, 0xaa, 0xa5, 0x1d, 0xc0, 0xae, 0x75, 0xd6, 0x3f, 0xba, 0xb5, 0xae, 0x80, 0x18, 0x00,
        0x40, 0x74, 0xc3, 0x00, 0x00, // TCP
        0x01, 0x01, 0x08, 0x0a, 0x22, 0x20, 0xc3, 0x52, 0x53, 0xd2, 0xbf, 0x9e, // NOP NOP TS
        b'v', b'6', b' ', b'd', b'a', b't', b'a',
    ];

    fn sock(ip: impl Into<IpAddr>, port: u16) -> SocketAddr {
        SocketAddr::new(ip.into(), port)
    }

    /// Recompute the IPv4 header checksum after editing a header.
    fn refill_v4(b: &mut [u8]) {
        Ipv4Packet::new_unchecked(b).fill_checksum();
    }

    #[test]
    fn parse_linux_synack_v4() {
        let seg = parse_tcp_ip(&LINUX_SYNACK_V4).unwrap();
        assert_eq!(seg.src, sock(Ipv4Addr::LOCALHOST, 47383));
        assert_eq!(seg.dst, sock(Ipv4Addr::LOCALHOST, 39918));
        assert_eq!(seg.tcp.flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(seg.tcp.ack, SeqNumber(0x3716_8cdc));
        assert_eq!(seg.tcp.options.mss, Some(65495));
        assert_eq!(seg.tcp.options.window_scale, Some(10));
        assert!(seg.tcp.options.sack_permitted);
        assert!(seg.payload.is_empty());

        let p = Ipv4Packet::new_checked(&LINUX_SYNACK_V4[..]).unwrap();
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Ipv4Repr::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 6, 40)
        );
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!((p.checksum(), p.frag_offset()), (0x3cba, 0));
    }

    #[test]
    fn build_matches_linux_synack_v4() {
        let seg = parse_tcp_ip(&LINUX_SYNACK_V4).unwrap();
        let built = build_tcp_ip(seg.src, seg.dst, &seg.tcp, seg.payload);
        assert_eq!(built, LINUX_SYNACK_V4);
    }

    #[test]
    fn parse_and_rebuild_linux_data_v6() {
        let seg = parse_tcp_ip(&LINUX_DATA_V6).unwrap();
        assert_eq!(seg.src, sock(Ipv6Addr::LOCALHOST, 57002));
        assert_eq!(seg.dst, sock(Ipv6Addr::LOCALHOST, 42269));
        assert_eq!(seg.payload, b"v6 data");
        assert_eq!(
            seg.tcp.options.timestamp,
            Some(Timestamp {
                tsval: 0x2220_c352,
                tsecr: 0x53d2_bf9e
            })
        );
        let p = Ipv6Packet::new_checked(&LINUX_DATA_V6[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(
            (r.flow_label, r.traffic_class, r.hop_limit),
            (0xe236c, 0, 64)
        );
        assert_eq!((r.payload_len, r.next_header), (39, IPPROTO_TCP));
        // Our packets carry flow label 0; everything else is identical.
        let built = build_tcp_ip(seg.src, seg.dst, &seg.tcp, seg.payload);
        assert_eq!(built[..1], [0x60]);
        assert_eq!(built[1..4], [0, 0, 0]);
        assert_eq!(built[4..], LINUX_DATA_V6[4..]);
        // Emitting the parsed repr reproduces the header exactly.
        let mut h = [0u8; 40];
        r.emit(&mut h);
        assert_eq!(h, LINUX_DATA_V6[..40]);
    }

    #[test]
    fn trailing_bytes_ignored() {
        // Ethernet pads short frames to 60 bytes of payload.
        let mut v4 = LINUX_SYNACK_V4.to_vec();
        v4.extend_from_slice(&[0; 6]);
        assert_eq!(
            parse_tcp_ip(&v4).unwrap(),
            parse_tcp_ip(&LINUX_SYNACK_V4).unwrap()
        );
        let mut v6 = LINUX_DATA_V6.to_vec();
        v6.push(0xff);
        assert_eq!(parse_tcp_ip(&v6).unwrap().payload, b"v6 data");
    }

    #[test]
    fn truncated_at_every_length() {
        for pkt in [&LINUX_SYNACK_V4[..], &LINUX_DATA_V6[..]] {
            for n in 0..pkt.len() {
                assert_eq!(parse_tcp_ip(&pkt[..n]), Err(Error::Truncated), "len {n}");
            }
        }
    }

    #[test]
    fn ipv4_bad_headers() {
        type Edit = fn(&mut [u8]);
        let cases: [(Edit, Error); 8] = [
            (|b| b[0] = 0x55, Error::Unsupported), // version 5
            (|b| b[0] = 0x44, Error::Malformed),   // IHL 4
            (|b| b[3] = 19, Error::Malformed),     // total < header
            (|b| b[3] = 61, Error::Truncated),     // total > buffer
            (|b| b[9] = IPPROTO_UDP, Error::Unsupported),
            (|b| b[6] = 0x20, Error::Unsupported), // MF
            (|b| b[7] = 0x01, Error::Unsupported), // offset 8
            // IHL 15: the 60-byte IP header swallows the TCP segment.
            (|b| b[0] = 0x4f, Error::Truncated),
        ];
        for (i, (edit, want)) in cases.iter().enumerate() {
            let mut b = LINUX_SYNACK_V4;
            edit(&mut b);
            refill_v4(&mut b[..]);
            assert_eq!(parse_tcp_ip(&b), Err(*want), "case {i}");
        }
        // Bad header checksum.
        let mut b = LINUX_SYNACK_V4;
        b[8] = 63;
        assert_eq!(parse_tcp_ip(&b), Err(Error::Checksum));
        // Bad TCP checksum.
        let mut b = LINUX_SYNACK_V4;
        b[30] ^= 1;
        assert_eq!(parse_tcp_ip(&b), Err(Error::Checksum));
        assert_eq!(parse_tcp_ip(&[0x70]), Err(Error::Unsupported));
    }

    #[test]
    fn ipv4_options_skipped() {
        // Insert a 4-byte option word (NOP NOP NOP EOL) after the header.
        let mut b = LINUX_SYNACK_V4[..20].to_vec();
        b.extend_from_slice(&[1, 1, 1, 0]);
        b.extend_from_slice(&LINUX_SYNACK_V4[20..]);
        b[0] = 0x46;
        b[3] = 64;
        refill_v4(&mut b);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(
            parse_tcp_ip(&b).unwrap(),
            parse_tcp_ip(&LINUX_SYNACK_V4).unwrap()
        );
    }

    #[test]
    fn ipv6_extension_headers_unsupported() {
        let mut b = LINUX_DATA_V6;
        b[6] = 0; // hop-by-hop options
        assert_eq!(parse_tcp_ip(&b), Err(Error::Unsupported));
        let mut b = LINUX_DATA_V6;
        b[0] = 0x70;
        assert_eq!(parse_tcp_ip(&b), Err(Error::Unsupported));
        let mut b = LINUX_DATA_V6;
        b[5] = 40; // payload length past the buffer
        assert_eq!(parse_tcp_ip(&b), Err(Error::Truncated));
        let (ip, payload) = IpRepr::parse(&LINUX_DATA_V6).unwrap();
        assert_eq!(
            (ip.protocol(), ip.payload_len(), payload.len()),
            (6, 39, 39)
        );
    }

    #[test]
    fn ipv4_packet_setters() {
        let mut b = [0u8; 24];
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_version_and_header_len(4, 20);
        p.set_dscp_ecn(46, 2);
        p.set_total_len(24);
        p.set_ident(0x1234);
        p.set_frag(false, true, 1480);
        p.set_ttl(3);
        p.set_protocol(IPPROTO_UDP);
        p.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        p.payload_mut().copy_from_slice(b"abcd");
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.version(), p.header_len(), p.dscp(), p.ecn()),
            (4, 20, 46, 2)
        );
        assert_eq!(
            (p.ident(), p.dont_frag(), p.more_frags(), p.frag_offset()),
            (0x1234, false, true, 1480)
        );
        assert_eq!((p.ttl(), p.protocol(), p.payload()), (3, 17, &b"abcd"[..]));
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::Unsupported)); // a fragment
    }

    #[test]
    #[should_panic(expected = "same address family")]
    fn build_mixed_families_panics() {
        let _ = build_tcp_ip(
            sock(Ipv4Addr::LOCALHOST, 1),
            sock(Ipv6Addr::LOCALHOST, 2),
            &TcpRepr::default(),
            &[],
        );
    }

    fn arb_sockets() -> impl Strategy<Value = (SocketAddr, SocketAddr)> {
        prop_oneof![
            any::<(u32, u16, u32, u16)>()
                .prop_map(|(a, p, b, q)| (sock(Ipv4Addr::from(a), p), sock(Ipv4Addr::from(b), q))),
            any::<(u128, u16, u128, u16)>()
                .prop_map(|(a, p, b, q)| (sock(Ipv6Addr::from(a), p), sock(Ipv6Addr::from(b), q))),
        ]
    }

    proptest! {
        #[test]
        fn build_parse_round_trip(
            (src, dst) in arb_sockets(),
            seq in any::<u32>(),
            ack in any::<u32>(),
            flags in any::<u8>(),
            window in any::<u16>(),
            ts in proptest::option::of(any::<(u32, u32)>()),
            sacks in proptest::collection::vec(any::<(u32, u32)>(), 0..=3),
            payload in proptest::collection::vec(any::<u8>(), 0..1500),
        ) {
            let flags = TcpFlags(flags);
            let mut options = TcpOptions {
                timestamp: ts.map(|(tsval, tsecr)| Timestamp { tsval, tsecr }),
                ..TcpOptions::default()
            };
            let blocks: Vec<SackBlock> = sacks.iter()
                .map(|&(l, r)| SackBlock { left: SeqNumber(l), right: SeqNumber(r) })
                .collect();
            options.set_sacks(&blocks);
            let tcp = TcpRepr {
                src_port: src.port(),
                dst_port: dst.port(),
                seq: SeqNumber(seq),
                ack: SeqNumber(if flags.ack() { ack } else { 0 }),
                flags,
                window,
                urgent: 0,
                options,
            };
            let pkt = build_tcp_ip(src, dst, &tcp, &payload);
            let hlen = if src.is_ipv4() { 20 } else { 40 };
            prop_assert_eq!(pkt.len(), hlen + tcp.header_len() + payload.len());
            let seg = parse_tcp_ip(&pkt).unwrap();
            prop_assert_eq!(seg.src, src);
            prop_assert_eq!(seg.dst, dst);
            prop_assert_eq!(seg.tcp, tcp);
            prop_assert_eq!(seg.payload, &payload[..]);
            // Built into a used buffer (longer, shorter, stale bytes): the
            // same packet.
            for mut used in [vec![0xa5u8; 3000], vec![0x5au8; 7], Vec::new()] {
                build_tcp_ip_into(src, dst, &tcp, &payload, &mut used);
                prop_assert_eq!(&used, &pkt);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = parse_tcp_ip(&bytes);
        }

        #[test]
        fn arbitrary_headers_never_panic(
            v6 in any::<bool>(),
            tail in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            // Start with a plausible first byte so the parser gets past the
            // version check most of the time.
            let mut b = vec![if v6 { 0x60 } else { 0x45 }];
            b.extend_from_slice(&tail);
            let _ = parse_tcp_ip(&b);
            let _ = IpRepr::parse(&b);
        }
    }
}
