//! Wire formats for Hollywood.
//!
//! Two levels for every format (after smoltcp): a zero-copy view over a byte
//! buffer (`Ipv4Packet`, `Ipv6Packet`, `TcpPacket`) whose accessors never panic
//! once `new_checked` succeeded, and a structured representation (`Ipv4Repr`,
//! `Ipv6Repr`, `TcpRepr`) with `parse` / `buffer_len` / `emit`.
//!
//! **Contract:** malformed input yields a typed [`Error`], never a panic.
//! Emitting (`emit`, [`build_tcp_ip`]) panics only on caller bugs, which each
//! function documents under "Panics".
//!
//! Modules: [`tcp`] (header, options), [`udp`] (header), [`ip`] (IPv4, IPv6, whole packets),
//! [`checksum`] (RFC 1071 and pseudo-headers), [`pcap`] (capture files over
//! any `std::io::Write` / `Read`). Nothing here reads a clock, opens a socket
//! or draws randomness.
#![deny(unsafe_code)]
#![warn(missing_docs)]

/// A zero-copy view over a byte buffer `T`: the struct, `new_unchecked`,
/// `new_checked` (which runs the type's own `check_len`) and `into_inner`.
/// Each format then adds `check_len` and its field accessors.
macro_rules! packet_view {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wrap without checking (accessors may panic on short buffers).
            pub fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }
            #[doc = concat!("Wrap and check lengths (see [`", stringify!($name), "::check_len`]).")]
            pub fn new_checked(buffer: T) -> Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }
            /// Give back the buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

pub mod checksum;
pub mod ip;
pub mod pcap;
mod seq;
pub mod tcp;
pub mod udp;

pub use ip::{IpRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, IPPROTO_TCP, IPPROTO_UDP};
pub use seq::SeqNumber;
pub use tcp::{SackBlock, TcpFlags, TcpOptions, TcpPacket, TcpRepr, Timestamp};
pub use udp::{build_udp_ip, parse_udp_ip, ParsedDatagram, UdpRepr};

/// Why a buffer could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header or a length field says.
    Truncated,
    /// A field holds a value the format does not allow (bad data offset,
    /// bad option length, bad IHL, ...).
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// A version or protocol we do not handle (e.g. IP version 5, not TCP).
    Unsupported,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "checksum mismatch",
            Error::Unsupported => "unsupported version or protocol",
        })
    }
}
impl std::error::Error for Error {}

/// Result alias for wire parsing.
pub type Result<T> = core::result::Result<T, Error>;

/// A TCP segment parsed out of a whole IP packet (convenience for hosts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSegment<'a> {
    /// Source address and port.
    pub src: std::net::SocketAddr,
    /// Destination address and port.
    pub dst: std::net::SocketAddr,
    /// The TCP header.
    pub tcp: TcpRepr,
    /// The TCP payload.
    pub payload: &'a [u8],
}

/// Parse an IPv4 or IPv6 packet carrying TCP, verifying the IP header
/// checksum (v4) and the TCP checksum (with pseudo-header).
/// IPv6 extension headers are not followed (→ `Unsupported`); IPv4 fragments
/// are `Unsupported`.
pub fn parse_tcp_ip(packet: &[u8]) -> Result<ParsedSegment<'_>> {
    ip::parse_tcp_ip_with(packet, true)
}

/// [`parse_tcp_ip`] without the TCP checksum check (the IPv4 header
/// checksum is still verified): for a packet whose integrity the caller
/// vouches for, e.g. one a TUN device marked as built by the local kernel
/// or already verified.
pub fn parse_tcp_ip_unverified(packet: &[u8]) -> Result<ParsedSegment<'_>> {
    ip::parse_tcp_ip_with(packet, false)
}

/// Build a complete IPv4 or IPv6 packet (chosen by the address family of
/// `src`; `src` and `dst` must be the same family) carrying `tcp` + `payload`,
/// with all checksums filled in. TTL / hop limit 64; IPv4 with DF set and
/// ID 0 (RFC 6864 §4.1 allows any ID on atomic datagrams). The TCP ports
/// written are those of `src` and `dst` (the ports in `tcp` are ignored).
/// One allocation of exactly the packet's length.
///
/// # Panics
/// If `src` and `dst` are of different address families, or the segment
/// does not fit the 16-bit IP length field (payload > ~65 KB) — both caller
/// bugs.
pub fn build_tcp_ip(
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    tcp: &TcpRepr,
    payload: &[u8],
) -> Vec<u8> {
    ip::build_tcp_ip(src, dst, tcp, payload)
}

/// [`build_tcp_ip`] into `buf` (cleared first, its allocation reused: a
/// driver that hands received packets back to the sender side saves an
/// allocation per packet). The bytes are the same.
///
/// # Panics
/// As [`build_tcp_ip`].
pub fn build_tcp_ip_into(
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    tcp: &TcpRepr,
    payload: &[u8],
    buf: &mut Vec<u8>,
) {
    ip::build_tcp_ip_into(src, dst, tcp, payload, buf);
}
