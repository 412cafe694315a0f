//! TCP header and options (RFC 9293 §3.1, RFC 7323, RFC 2018, RFC 2883).
//!
//! CONTRACT (used by the engine): `TcpRepr` is the structured header; the
//! payload always travels separately as `&[u8]`.

use crate::{Result, SeqNumber};
use std::net::IpAddr;

/// TCP control flags as they appear in byte 13 of the header.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// FIN: no more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// SYN: synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// RST: reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// PSH: push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// ACK: acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// URG: urgent pointer field significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECE: ECN-Echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// CWR: congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);
    /// No flags.
    pub const NONE: TcpFlags = TcpFlags(0);

    /// All of `other`'s bits are set in `self`.
    #[inline]
    pub fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// SYN set.
    #[inline]
    pub fn syn(self) -> bool {
        self.contains(Self::SYN)
    }
    /// FIN set.
    #[inline]
    pub fn fin(self) -> bool {
        self.contains(Self::FIN)
    }
    /// RST set.
    #[inline]
    pub fn rst(self) -> bool {
        self.contains(Self::RST)
    }
    /// ACK set.
    #[inline]
    pub fn ack(self) -> bool {
        self.contains(Self::ACK)
    }
    /// PSH set.
    #[inline]
    pub fn psh(self) -> bool {
        self.contains(Self::PSH)
    }
}
impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}
impl core::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0
    }
}
impl core::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// One SACK block (RFC 2018): bytes `[left, right)` were received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: SeqNumber,
    /// Sequence number just past the block.
    pub right: SeqNumber,
}

/// RFC 7323 timestamps option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Timestamp {
    /// TSval: sender's clock.
    pub tsval: u32,
    /// TSecr: echoed peer TSval.
    pub tsecr: u32,
}

/// The TCP options we understand. Unknown options are skipped on parse and
/// never emitted. At most 4 SACK blocks fit (3 alongside timestamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2), SYN only.
    pub mss: Option<u16>,
    /// Window scale shift (kind 3), SYN only. Values > 14 are kept as parsed;
    /// the engine clamps them (RFC 7323 §2.3).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4), SYN only.
    pub sack_permitted: bool,
    /// SACK blocks (kind 5); the first `sack_len` entries are valid.
    pub sack_blocks: [SackBlock; 4],
    /// Number of valid entries in `sack_blocks` (0..=4).
    pub sack_len: u8,
    /// Timestamps (kind 8).
    pub timestamp: Option<Timestamp>,
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sacks(&self) -> &[SackBlock] {
        &self.sack_blocks[..self.sack_len as usize]
    }
    /// Replace the SACK blocks (extra blocks beyond 4 are ignored).
    pub fn set_sacks(&mut self, blocks: &[SackBlock]) {
        let n = blocks.len().min(4);
        self.sack_blocks[..n].copy_from_slice(&blocks[..n]);
        self.sack_len = n as u8;
    }
}

/// A structured TCP header (payload excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (meaningful only if `flags.ack()`; emitted as 0 otherwise).
    pub ack: SeqNumber,
    /// Control flags.
    pub flags: TcpFlags,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// Urgent pointer (parsed and emitted; the engine ignores urgent data).
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
}

/// A zero-copy view over a TCP header + payload.
///
/// After [`TcpPacket::new_checked`] succeeds, no accessor panics.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap without checking (accessors may panic on short buffers).
    pub fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }
    /// Wrap and check that the header and data offset fit the buffer.
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

impl TcpRepr {
    /// Parse a TCP segment (`packet` = TCP header + payload, as carried in IP).
    /// With `verify_checksum`, the checksum is checked against the
    /// pseudo-header built from `src`/`dst` (same family required).
    pub fn parse<'a>(
        packet: &'a [u8],
        src: IpAddr,
        dst: IpAddr,
        verify_checksum: bool,
    ) -> Result<(TcpRepr, &'a [u8])> {
        tcp_parse(packet, src, dst, verify_checksum)
    }

    /// Header length in bytes including options, padded to 4 bytes.
    pub fn header_len(&self) -> usize {
        tcp_header_len(self)
    }

    /// Write header + payload into `buf` (`buf.len() >= header_len() + payload.len()`),
    /// computing the checksum over the pseudo-header from `src`/`dst`.
    /// Returns the number of bytes written.
    pub fn emit(&self, buf: &mut [u8], src: IpAddr, dst: IpAddr, payload: &[u8]) -> usize {
        tcp_emit(self, buf, src, dst, payload)
    }

    /// Sequence-space length of a segment with this header and `payload_len`
    /// bytes of data: SYN and FIN count one each.
    pub fn segment_len(&self, payload_len: usize) -> usize {
        payload_len + self.flags.syn() as usize + self.flags.fin() as usize
    }
}
