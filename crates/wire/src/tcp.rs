//! TCP header and options (RFC 9293 §3.1, RFC 7323, RFC 2018, RFC 2883).
//!
//! CONTRACT (used by the engine): `TcpRepr` is the structured header; the
//! payload always travels separately as `&[u8]`.
//!
//! Two levels, as elsewhere in this crate: [`TcpPacket`] is a zero-copy view
//! whose accessors never panic after [`TcpPacket::new_checked`] (or
//! [`TcpPacket::check_len`]) succeeded; [`TcpRepr`] is the structured header
//! with `parse` / `header_len` / `emit`.
//!
//! Option layout on emit follows Linux (`tcp_options_write`), so captures
//! look familiar and every option is 4-byte aligned:
//!
//! ```text
//! MSS                      02 04 mm mm
//! SACK-permitted + TS      04 02 08 0a <tsval> <tsecr>
//! TS alone                 01 01 08 0a <tsval> <tsecr>
//! SACK-permitted alone     01 01 04 02
//! window scale             01 03 03 ss
//! SACK blocks              01 01 05 <2+8n> <left right>*n
//! next expected (exp.)     fd 08 48 77 <seq>
//! ```
//!
//! The last line is an *experimental* option (RFC 6994 shared experimental
//! kind 253 with the 16-bit ExID [`NEXT_EXPECTED_EXID`] = `0x4877`, "Hw",
//! unregistered): the sender of [TCP-video] §7.2's deadline TCP tells the
//! receiver the next sequence number it should expect after skipping expired
//! data. It exists for the deployability experiments of the middlebox lab;
//! standard receivers ignore it (RFC 9293 §3.1, MUST-6).
//!
//! The header may hold at most 40 bytes of options (RFC 9293 §3.1, data
//! offset ≤ 15); when the options above do not fit, SACK blocks are dropped
//! from the end until they do (RFC 2018 §3 lets a sender report fewer blocks).

use crate::{checksum, Error, Result, SeqNumber};
use std::net::IpAddr;

/// Byte ranges of the TCP header fields (RFC 9293 §3.1, Figure 1).
pub mod field {
    /// A byte range of a fixed-position field.
    pub type Field = core::ops::Range<usize>;

    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Sequence number.
    pub const SEQ_NUM: Field = 4..8;
    /// Acknowledgment number.
    pub const ACK_NUM: Field = 8..12;
    /// Data offset (high nibble) and reserved bits (low nibble).
    pub const DATA_OFF: usize = 12;
    /// Control bits CWR..FIN.
    pub const FLAGS: usize = 13;
    /// Window.
    pub const WIN_SIZE: Field = 14..16;
    /// Checksum.
    pub const CHECKSUM: Field = 16..18;
    /// Urgent pointer.
    pub const URGENT: Field = 18..20;
    /// Length of the fixed header (data offset 5).
    pub const HEADER_LEN: usize = 20;
    /// Longest header the 4-bit data offset can describe (15 words).
    pub const MAX_HEADER_LEN: usize = 60;

    /// Options, given the header length.
    pub const fn options(header_len: usize) -> Field {
        HEADER_LEN..header_len
    }
    /// Payload, given the header length.
    pub const fn payload(header_len: usize) -> core::ops::RangeFrom<usize> {
        header_len..
    }
}

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod kind {
    /// End of option list (RFC 9293 §3.2).
    pub const EOL: u8 = 0;
    /// No-operation (RFC 9293 §3.2).
    pub const NOP: u8 = 1;
    /// Maximum segment size (RFC 9293 §3.7.1).
    pub const MSS: u8 = 2;
    /// Window scale (RFC 7323 §2).
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted (RFC 2018 §2).
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK (RFC 2018 §3).
    pub const SACK: u8 = 5;
    /// Timestamps (RFC 7323 §3).
    pub const TIMESTAMPS: u8 = 8;
    /// Shared experimental option with a 16-bit ExID (RFC 6994 §3).
    pub const EXPERIMENTAL_253: u8 = 253;
}

/// ExID of our experimental "next expected sequence" option (RFC 6994,
/// kind 253): ASCII "Hw". Not registered with IANA; for lab experiments only
/// ([TCP-video] §7.2's sequence-gap design).
pub const NEXT_EXPECTED_EXID: u16 = 0x4877;
/// Length of the "next expected sequence" option: kind, length, ExID, seq.
pub const NEXT_EXPECTED_LEN: usize = 8;

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
    /// Experimental "next expected sequence" (kind 253, ExID
    /// [`NEXT_EXPECTED_EXID`]; [TCP-video] §7.2): the receiver may advance
    /// RCV.NXT to this value because the sender skipped expired data.
    pub next_expected: Option<SeqNumber>,
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sacks(&self) -> &[SackBlock] {
        &self.sack_blocks[..self.sack_len as usize]
    }
    /// How many SACK blocks `emit` can write next to the other options set
    /// here: 4 alone, 3 with timestamps, 2 on a SYN carrying everything.
    /// RFC 9293 §3.1 limits the header to 60 bytes; RFC 2018 §3 allows
    /// reporting fewer blocks (the first `n` of [`TcpOptions::sacks`] are
    /// sent, so put the most recent block first).
    pub fn sack_capacity(&self) -> usize {
        let avail = field::MAX_HEADER_LEN - field::HEADER_LEN - fixed_options_len(self);
        (avail.saturating_sub(4) / 8).min(4)
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

packet_view! {
    /// A zero-copy view over a TCP header + payload.
    ///
    /// After [`TcpPacket::new_checked`] succeeds, no accessor panics.
    TcpPacket
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Check that the fixed header and the data offset fit the buffer:
    /// `Truncated` if the buffer is shorter than 20 bytes or than the data
    /// offset says, `Malformed` if the data offset is below 5 (RFC 9293 §3.1).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = self.header_len() as usize;
        if hlen < field::HEADER_LEN {
            Err(Error::Malformed)
        } else if hlen > len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn u16_at(&self, r: field::Field) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }
    #[inline]
    fn u32_at(&self, r: field::Field) -> u32 {
        let b = &self.buffer.as_ref()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }
    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(self.u32_at(field::SEQ_NUM))
    }
    /// Acknowledgment number field (whether or not ACK is set).
    #[inline]
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(self.u32_at(field::ACK_NUM))
    }
    /// Data offset in 32-bit words (the raw 4-bit field).
    #[inline]
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::DATA_OFF] >> 4
    }
    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        self.data_offset() * 4
    }
    /// The control bits CWR..FIN (byte 13). The reserved bits of byte 12
    /// are not included.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }
    /// Raw (unscaled) window field.
    #[inline]
    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WIN_SIZE)
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }
    /// Urgent pointer field.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }
    /// Option bytes (between the fixed header and the data offset).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::options(self.header_len() as usize)]
    }
    /// Payload bytes (everything after the header).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::payload(self.header_len() as usize)]
    }
    /// Segment length in bytes: header and payload.
    #[inline]
    pub fn total_len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// Whether the checksum verifies against the pseudo-header from
    /// `src`/`dst` (RFC 9293 §3.1). Addresses of different families never
    /// verify.
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        let seg = self.buffer.as_ref();
        let Ok(len) = u32::try_from(seg.len()) else {
            return false;
        };
        match checksum::pseudo_header(src, dst, crate::IPPROTO_TCP, len) {
            Some(ph) => checksum::combine(ph, checksum::data(seg)) == 0xffff,
            None => false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    #[inline]
    fn set_u16_at(&mut self, r: field::Field, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn set_u32_at(&mut self, r: field::Field, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16_at(field::SRC_PORT, v)
    }
    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16_at(field::DST_PORT, v)
    }
    /// Set the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, v: SeqNumber) {
        self.set_u32_at(field::SEQ_NUM, v.0)
    }
    /// Set the acknowledgment number field.
    #[inline]
    pub fn set_ack_number(&mut self, v: SeqNumber) {
        self.set_u32_at(field::ACK_NUM, v.0)
    }
    /// Set the header length in bytes (a multiple of 4 in 20..=60) and
    /// clear the reserved bits.
    ///
    /// # Panics
    /// If `len` is not a multiple of 4 or outside 20..=60 (caller bug).
    #[inline]
    pub fn set_header_len(&mut self, len: u8) {
        assert!(
            len % 4 == 0 && (20..=60).contains(&len),
            "bad TCP header length {len}"
        );
        self.buffer.as_mut()[field::DATA_OFF] = (len / 4) << 4;
    }
    /// Set the control bits CWR..FIN.
    #[inline]
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = flags.0;
    }
    /// Set the raw window field.
    #[inline]
    pub fn set_window_len(&mut self, v: u16) {
        self.set_u16_at(field::WIN_SIZE, v)
    }
    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v)
    }
    /// Set the urgent pointer field.
    #[inline]
    pub fn set_urgent_at(&mut self, v: u16) {
        self.set_u16_at(field::URGENT, v)
    }
    /// Mutable option bytes (the data offset must already be set).
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let r = field::options(self.header_len() as usize);
        &mut self.buffer.as_mut()[r]
    }
    /// Mutable payload bytes (the data offset must already be set).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let r = field::payload(self.header_len() as usize);
        &mut self.buffer.as_mut()[r]
    }
    /// Compute and store the checksum over the whole buffer with the
    /// pseudo-header from `src`/`dst` (RFC 9293 §3.1).
    ///
    /// # Panics
    /// If `src` and `dst` are of different families (caller bug).
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) {
        self.set_checksum(0);
        let seg = self.buffer.as_ref();
        // Segments longer than 4 GiB cannot be carried by IP at all.
        let len = seg.len() as u32;
        let ph = checksum::pseudo_header(src, dst, crate::IPPROTO_TCP, len)
            .expect("TCP checksum needs source and destination of the same family");
        let sum = checksum::combine(ph, checksum::data(seg));
        self.set_checksum(checksum::finish(sum));
    }
}

impl TcpRepr {
    /// Parse a TCP segment (`packet` = TCP header + payload, as carried in IP).
    /// With `verify_checksum`, the checksum is checked against the
    /// pseudo-header built from `src`/`dst` (same family required).
    pub fn parse(
        packet: &[u8],
        src: IpAddr,
        dst: IpAddr,
        verify_checksum: bool,
    ) -> Result<(TcpRepr, &[u8])> {
        tcp_parse(packet, src, dst, verify_checksum)
    }

    /// Header length in bytes including options, padded to 4 bytes.
    pub fn header_len(&self) -> usize {
        tcp_header_len(self)
    }

    /// Write header + payload into `buf` (`buf.len() >= header_len() + payload.len()`),
    /// computing the checksum over the pseudo-header from `src`/`dst`.
    /// Returns the number of bytes written. SACK blocks that do not fit the
    /// 60-byte header are left out (see the module doc).
    ///
    /// # Panics
    /// If `buf` is too short or `src`/`dst` differ in family (caller bugs).
    pub fn emit(&self, buf: &mut [u8], src: IpAddr, dst: IpAddr, payload: &[u8]) -> usize {
        tcp_emit(self, buf, src, dst, payload)
    }

    /// Sequence-space length of a segment with this header and `payload_len`
    /// bytes of data: SYN and FIN count one each.
    pub fn segment_len(&self, payload_len: usize) -> usize {
        payload_len + self.flags.syn() as usize + self.flags.fin() as usize
    }
}

/// Number of SACK blocks `emit` writes: as many of `opts.sacks()` as fit.
fn emitted_sacks(opts: &TcpOptions) -> usize {
    (opts.sack_len as usize).min(opts.sack_capacity())
}

/// Bytes of every emitted option except the SACK blocks (always ≤ 20).
fn fixed_options_len(opts: &TcpOptions) -> usize {
    let mut n = 0;
    if opts.mss.is_some() {
        n += 4;
    }
    if opts.timestamp.is_some() {
        n += 12; // SACK-permitted rides in the timestamp option's padding.
    } else if opts.sack_permitted {
        n += 4;
    }
    if opts.window_scale.is_some() {
        n += 4;
    }
    if opts.next_expected.is_some() {
        n += NEXT_EXPECTED_LEN;
    }
    n
}

fn tcp_header_len(repr: &TcpRepr) -> usize {
    let sacks = emitted_sacks(&repr.options);
    let sack_bytes = if sacks > 0 { 4 + 8 * sacks } else { 0 };
    field::HEADER_LEN + fixed_options_len(&repr.options) + sack_bytes
}

/// Parse the option bytes (RFC 9293 §3.2; RFC 7323; RFC 2018).
fn parse_options(mut opts: &[u8]) -> Result<TcpOptions> {
    let mut out = TcpOptions::default();
    while let Some(&k) = opts.first() {
        match k {
            kind::EOL => break,
            kind::NOP => {
                opts = &opts[1..];
                continue;
            }
            _ => {}
        }
        // Every other option is kind, length, data (RFC 9293 §3.1, MUST-68);
        // a length below 2 or past the header is illegal (MUST-7), as is a
        // known option with the wrong length.
        let len = *opts.get(1).ok_or(Error::Malformed)? as usize;
        if len < 2 || len > opts.len() {
            return Err(Error::Malformed);
        }
        let body = &opts[2..len];
        match k {
            kind::MSS => {
                let b: [u8; 2] = body.try_into().map_err(|_| Error::Malformed)?;
                out.mss = Some(u16::from_be_bytes(b));
            }
            kind::WINDOW_SCALE => {
                let [shift]: [u8; 1] = body.try_into().map_err(|_| Error::Malformed)?;
                out.window_scale = Some(shift);
            }
            kind::SACK_PERMITTED => {
                if !body.is_empty() {
                    return Err(Error::Malformed);
                }
                out.sack_permitted = true;
            }
            kind::SACK => {
                if body.is_empty() || body.len() % 8 != 0 || body.len() > 32 {
                    return Err(Error::Malformed);
                }
                let mut blocks = [SackBlock::default(); 4];
                for (b, raw) in blocks.iter_mut().zip(body.chunks_exact(8)) {
                    b.left = SeqNumber(u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]));
                    b.right = SeqNumber(u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]));
                }
                out.sack_blocks = blocks;
                out.sack_len = (body.len() / 8) as u8;
            }
            kind::TIMESTAMPS => {
                if body.len() != 8 {
                    return Err(Error::Malformed);
                }
                out.timestamp = Some(Timestamp {
                    tsval: u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                    tsecr: u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
                });
            }
            // RFC 6994 §3: the first two bytes are the ExID; other
            // experiments sharing the kind are ignored like unknown options.
            kind::EXPERIMENTAL_253
                if body.len() == NEXT_EXPECTED_LEN - 2
                    && u16::from_be_bytes([body[0], body[1]]) == NEXT_EXPECTED_EXID =>
            {
                out.next_expected = Some(SeqNumber(u32::from_be_bytes([
                    body[2], body[3], body[4], body[5],
                ])));
            }
            // Unknown options with a sane length are skipped: "MUST ignore
            // without error any TCP option it does not implement" (RFC 9293
            // §3.1, MUST-6).
            _ => {}
        }
        opts = &opts[len..];
    }
    Ok(out)
}

fn tcp_parse(
    packet: &[u8],
    src: IpAddr,
    dst: IpAddr,
    verify_checksum: bool,
) -> Result<(TcpRepr, &[u8])> {
    let p = TcpPacket::new_checked(packet)?;
    if verify_checksum {
        if src.is_ipv4() != dst.is_ipv4() {
            return Err(Error::Unsupported);
        }
        if !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
    }
    let flags = p.flags();
    let options = parse_options(p.options())?;
    let repr = TcpRepr {
        src_port: p.src_port(),
        dst_port: p.dst_port(),
        seq: p.seq_number(),
        // The field is meaningful only with ACK set (RFC 9293 §3.1); keep
        // it zero otherwise so parse and emit agree.
        ack: if flags.ack() {
            p.ack_number()
        } else {
            SeqNumber(0)
        },
        flags,
        window: p.window_len(),
        urgent: p.urgent_at(),
        options,
    };
    Ok((repr, &packet[field::payload(p.header_len() as usize)]))
}

/// Write the options in Linux's order (see the module doc) into `out`,
/// which is exactly `tcp_header_len(repr) - 20` bytes long.
fn emit_options(opts: &TcpOptions, out: &mut [u8]) {
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    if let Some(mss) = opts.mss {
        let m = mss.to_be_bytes();
        put(&[kind::MSS, 4, m[0], m[1]]);
    }
    if let Some(ts) = opts.timestamp {
        if opts.sack_permitted {
            put(&[kind::SACK_PERMITTED, 2]);
        } else {
            put(&[kind::NOP, kind::NOP]);
        }
        put(&[kind::TIMESTAMPS, 10]);
        put(&ts.tsval.to_be_bytes());
        put(&ts.tsecr.to_be_bytes());
    } else if opts.sack_permitted {
        put(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]);
    }
    if let Some(ws) = opts.window_scale {
        put(&[kind::NOP, kind::WINDOW_SCALE, 3, ws]);
    }
    if let Some(nx) = opts.next_expected {
        let id = NEXT_EXPECTED_EXID.to_be_bytes();
        put(&[
            kind::EXPERIMENTAL_253,
            NEXT_EXPECTED_LEN as u8,
            id[0],
            id[1],
        ]);
        put(&nx.0.to_be_bytes());
    }
    let n = emitted_sacks(opts);
    if n > 0 {
        put(&[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * n) as u8]);
        for b in &opts.sack_blocks[..n] {
            put(&b.left.0.to_be_bytes());
            put(&b.right.0.to_be_bytes());
        }
    }
    debug_assert_eq!(at, out.len());
}

fn tcp_emit(repr: &TcpRepr, buf: &mut [u8], src: IpAddr, dst: IpAddr, payload: &[u8]) -> usize {
    let hlen = tcp_header_len(repr);
    let total = hlen + payload.len();
    assert!(
        buf.len() >= total,
        "TCP emit buffer too short: {} < {}",
        buf.len(),
        total
    );
    buf[hlen..total].copy_from_slice(payload);
    emit_header_over(repr, &mut buf[..total], src, dst);
    total
}

/// Writes the header of `repr` and the checksum into `segment`, whose
/// payload (everything after the header) is already in place and whose
/// header bytes are zero. For building a packet without a second copy
/// of the payload ([`crate::build_tcp_ip`]).
pub(crate) fn emit_header_over(repr: &TcpRepr, segment: &mut [u8], src: IpAddr, dst: IpAddr) {
    let hlen = tcp_header_len(repr);
    assert!(
        segment.len() >= hlen,
        "TCP segment shorter than its header: {} < {}",
        segment.len(),
        hlen
    );
    let mut p = TcpPacket::new_unchecked(segment);
    p.set_src_port(repr.src_port);
    p.set_dst_port(repr.dst_port);
    p.set_seq_number(repr.seq);
    p.set_ack_number(if repr.flags.ack() {
        repr.ack
    } else {
        SeqNumber(0)
    });
    p.set_header_len(hlen as u8);
    p.set_flags(repr.flags);
    p.set_window_len(repr.window);
    p.set_urgent_at(repr.urgent);
    emit_options(&repr.options, p.options_mut());
    p.fill_checksum(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    /// A SYN captured from Linux 6.x over loopback (127.0.0.1:39918 →
    /// 127.0.0.1:47383). Loopback leaves the checksum to "hardware", so the
    /// capture held a partial sum; the checksum here was recomputed with an
    /// independent script.
    const LINUX_SYN: [u8; 40] = [
        0x9b, 0xee, 0xb9, 0x17, // ports
        0x37, 0x16, 0x8c, 0xdb, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0x02, 0xff, 0xd7, // doff 10, SYN, window 65495
        0xa3, 0x1d, 0x00, 0x00, // checksum, urgent
        0x02, 0x04, 0xff, 0xd7, // MSS 65495
        0x04, 0x02, 0x08, 0x0a, // SACK-permitted, TS
        0xef, 0xc8, 0xa4, 0x20, // TSval
        0x00, 0x00, 0x00, 0x00, // TSecr
        0x01, 0x03, 0x03, 0x0a, // NOP, WS 10
    ];

    /// The first data segment of the same connection ("hello hollywood").
    const LINUX_DATA: [u8; 47] = [
        0x9b, 0xee, 0xb9, 0x17, 0x37, 0x16, 0x8c, 0xdc, 0x4a, 0x1d, 0x5d,
        0x80, // ports seq ack
        0x80, 0x18, 0x00, 0x40, 0x92, 0x2b, 0x00, 0x00, // doff 8, PSH|ACK, win 64
        0x01, 0x01, 0x08, 0x0a, 0xef, 0xc8, 0xa4, 0x20, 0xb5, 0xa4, 0x76, 0x5e, // NOP NOP TS
        b'h', b'e', b'l', b'l', b'o', b' ', b'h', b'o', b'l', b'l', b'y', b'w', b'o', b'o', b'd',
    ];

    fn parse(b: &[u8]) -> Result<(TcpRepr, &[u8])> {
        TcpRepr::parse(b, LO, LO, true)
    }

    fn emit_vec(repr: &TcpRepr, src: IpAddr, dst: IpAddr, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0xeeu8; repr.header_len() + payload.len() + 3];
        let n = repr.emit(&mut buf, src, dst, payload);
        assert_eq!(n, repr.header_len() + payload.len());
        assert!(
            buf[n..].iter().all(|&b| b == 0xee),
            "emit wrote past its length"
        );
        buf.truncate(n);
        buf
    }

    /// Options with only `sacks` set, via the public setter.
    fn with_sacks(mut o: TcpOptions, n: u32) -> TcpOptions {
        let blocks: Vec<SackBlock> = (0..n)
            .map(|i| SackBlock {
                left: SeqNumber(100 * i + 1),
                right: SeqNumber(100 * i + 50),
            })
            .collect();
        o.set_sacks(&blocks);
        o
    }

    fn syn_repr() -> TcpRepr {
        TcpRepr {
            src_port: 39918,
            dst_port: 47383,
            seq: SeqNumber(0x3716_8cdb),
            ack: SeqNumber(0),
            flags: TcpFlags::SYN,
            window: 65495,
            urgent: 0,
            options: TcpOptions {
                mss: Some(65495),
                window_scale: Some(10),
                sack_permitted: true,
                timestamp: Some(Timestamp {
                    tsval: 0xefc8_a420,
                    tsecr: 0,
                }),
                ..TcpOptions::default()
            },
        }
    }

    // ------------------------------------------------------- real bytes ----

    #[test]
    fn parse_linux_syn() {
        let (repr, payload) = parse(&LINUX_SYN).unwrap();
        assert_eq!(repr, syn_repr());
        assert!(payload.is_empty());
        let p = TcpPacket::new_checked(&LINUX_SYN[..]).unwrap();
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.data_offset(), 10);
        assert_eq!(p.checksum(), 0xa31d);
        assert_eq!(p.options().len(), 20);
        assert!(p.verify_checksum(LO, LO));
    }

    #[test]
    fn emit_linux_syn_byte_for_byte() {
        let r = syn_repr();
        assert_eq!(r.header_len(), 40);
        assert_eq!(emit_vec(&r, LO, LO, &[]), LINUX_SYN);
    }

    #[test]
    fn linux_data_segment_round_trip() {
        let (repr, payload) = parse(&LINUX_DATA).unwrap();
        assert_eq!(payload, b"hello hollywood");
        assert_eq!(repr.flags, TcpFlags::PSH | TcpFlags::ACK);
        assert_eq!(repr.ack, SeqNumber(0x4a1d_5d80));
        assert_eq!(repr.window, 64);
        assert_eq!(
            repr.options.timestamp,
            Some(Timestamp {
                tsval: 0xefc8_a420,
                tsecr: 0xb5a4_765e
            })
        );
        assert_eq!(repr.options.mss, None);
        assert_eq!(repr.header_len(), 32);
        assert_eq!(emit_vec(&repr, LO, LO, payload), LINUX_DATA);
    }

    #[test]
    fn option_layouts() {
        let base = TcpRepr {
            flags: TcpFlags::SYN,
            ..TcpRepr::default()
        };
        let opts = |o: TcpOptions| {
            let r = TcpRepr { options: o, ..base };
            let b = emit_vec(&r, LO, LO, &[]);
            b[20..].to_vec()
        };
        let ts = Some(Timestamp { tsval: 1, tsecr: 2 });
        // Timestamps without SACK-permitted: NOP-padded.
        assert_eq!(
            opts(TcpOptions {
                timestamp: ts,
                ..Default::default()
            }),
            [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]
        );
        // SACK-permitted without timestamps.
        assert_eq!(
            opts(TcpOptions {
                sack_permitted: true,
                ..Default::default()
            }),
            [1, 1, 4, 2]
        );
        // Data segment with timestamps and one SACK block.
        assert_eq!(
            opts(with_sacks(
                TcpOptions {
                    timestamp: ts,
                    ..Default::default()
                },
                1
            )),
            [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 50]
        );
        assert_eq!(opts(TcpOptions::default()), [0u8; 0]);
    }

    #[test]
    fn sack_blocks_dropped_to_fit_60_bytes() {
        let all = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: Some(Timestamp::default()),
            ..Default::default()
        };
        let ts_only = TcpOptions {
            timestamp: Some(Timestamp::default()),
            ..Default::default()
        };
        // (options, blocks asked, blocks that fit)
        for (o, n, fit) in [
            (all, 4, 2),
            (ts_only, 4, 3),
            (ts_only, 3, 3),
            (TcpOptions::default(), 4, 4),
        ] {
            let r = TcpRepr {
                flags: TcpFlags::ACK,
                options: with_sacks(o, n),
                ..TcpRepr::default()
            };
            let b = emit_vec(&r, LO, LO, b"xy");
            assert!(b.len() - 2 <= 60);
            assert_eq!(r.header_len(), b.len() - 2);
            let (back, payload) = parse(&b).unwrap();
            assert_eq!(payload, b"xy");
            assert_eq!(back.options.sacks(), &r.options.sacks()[..fit]);
            assert_eq!(r.options.sack_capacity().min(n as usize), fit);
        }
    }

    // ------------------------------------------------------ bad input ----

    #[test]
    fn truncated_at_every_length() {
        for n in 0..LINUX_SYN.len() {
            for verify in [false, true] {
                assert_eq!(
                    TcpRepr::parse(&LINUX_SYN[..n], LO, LO, verify),
                    Err(Error::Truncated),
                    "len {n}"
                );
            }
            assert_eq!(
                TcpPacket::new_checked(&LINUX_SYN[..n]).err(),
                Some(Error::Truncated)
            );
        }
        // TCP has no length field: a cut payload shows up as a bad checksum.
        let short = &LINUX_DATA[..LINUX_DATA.len() - 1];
        assert_eq!(parse(short), Err(Error::Checksum));
        assert_eq!(
            TcpRepr::parse(short, LO, LO, false).unwrap().1,
            b"hello hollywoo"
        );
    }

    #[test]
    fn impossible_data_offset() {
        for doff in 0..5u8 {
            let mut b = LINUX_SYN;
            b[12] = doff << 4;
            assert_eq!(TcpRepr::parse(&b, LO, LO, false), Err(Error::Malformed));
        }
        // Data offset 15 (60 bytes) in a 40-byte segment.
        let mut b = LINUX_SYN;
        b[12] = 0xf0;
        assert_eq!(TcpRepr::parse(&b, LO, LO, false), Err(Error::Truncated));
    }

    /// A 20-byte header followed by `opts` (padded to 4 bytes with EOL).
    fn with_options(opts: &[u8]) -> Vec<u8> {
        let mut b = LINUX_SYN[..20].to_vec();
        b.extend_from_slice(opts);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b[12] = ((b.len() / 4) as u8) << 4;
        b
    }

    #[test]
    fn bad_option_lengths() {
        let bad: &[&[u8]] = &[
            &[2, 0, 0, 0],                          // length 0
            &[30, 1, 0, 0],                         // length 1
            &[1, 1, 1, 2],                          // MSS kind without length byte
            &[30, 9, 0, 0, 0, 0, 0, 0],             // runs past the header
            &[2, 3, 5, 0],                          // MSS of length 3
            &[3, 4, 7, 0],                          // WS of length 4
            &[4, 3, 0, 0],                          // SACK-permitted of length 3
            &[5, 2, 0, 0],                          // SACK with no blocks
            &[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // SACK not 2+8n
            &[8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],  // TS of length 9
        ];
        for opts in bad {
            let b = with_options(opts);
            assert_eq!(
                TcpRepr::parse(&b, LO, LO, false),
                Err(Error::Malformed),
                "{opts:?}"
            );
        }
        // Five SACK blocks (length 42) cannot fit: 40 option bytes at most.
        let mut five = vec![5, 42];
        five.extend_from_slice(&[0; 38]);
        five.truncate(40);
        assert_eq!(
            TcpRepr::parse(&with_options(&five), LO, LO, false),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn unknown_options_skipped_and_eol_ends() {
        // MPTCP-like unknown kind 30 of length 4, then MSS, then EOL and junk.
        let b = with_options(&[30, 4, 0xab, 0xcd, 2, 4, 0x05, 0xb4, 0, 0xff, 0xff, 0xff]);
        let (r, _) = TcpRepr::parse(&b, LO, LO, false).unwrap();
        assert_eq!(r.options.mss, Some(1460));
        assert_eq!(
            r.options,
            TcpOptions {
                mss: Some(1460),
                ..Default::default()
            }
        );
        // Four SACK blocks, the most that fit.
        let mut four = vec![1, 1, 5, 34];
        for i in 0..8u32 {
            four.extend_from_slice(&(i * 10).to_be_bytes());
        }
        let (r, _) = TcpRepr::parse(&with_options(&four), LO, LO, false).unwrap();
        assert_eq!(r.options.sack_len, 4);
        assert_eq!(
            r.options.sacks()[3],
            SackBlock {
                left: SeqNumber(60),
                right: SeqNumber(70)
            }
        );
    }

    #[test]
    fn checksum_mismatch() {
        let mut b = LINUX_DATA;
        b[40] ^= 0x20;
        assert_eq!(parse(&b), Err(Error::Checksum));
        assert!(TcpRepr::parse(&b, LO, LO, false).is_ok());
        // Right bytes, wrong pseudo-header.
        let other = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(
            TcpRepr::parse(&LINUX_DATA, other, LO, true),
            Err(Error::Checksum)
        );
        // Mixed families cannot be checked.
        assert_eq!(
            TcpRepr::parse(&LINUX_DATA, LO, IpAddr::V6(Ipv6Addr::LOCALHOST), true),
            Err(Error::Unsupported)
        );
    }

    #[test]
    fn ack_field_ignored_without_ack_flag() {
        let mut b = LINUX_SYN;
        b[8..12].copy_from_slice(&[1, 2, 3, 4]);
        let (r, _) = TcpRepr::parse(&b, LO, LO, false).unwrap();
        assert_eq!(r.ack, SeqNumber(0));
        let r = TcpRepr {
            ack: SeqNumber(99),
            ..syn_repr()
        };
        assert_eq!(&emit_vec(&r, LO, LO, &[])[8..12], &[0, 0, 0, 0]);
    }

    #[test]
    fn packet_setters_and_accessors() {
        let mut buf = [0u8; 28];
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_seq_number(SeqNumber(3));
        p.set_ack_number(SeqNumber(4));
        p.set_header_len(24);
        p.set_flags(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
        p.set_window_len(5);
        p.set_urgent_at(6);
        p.options_mut().copy_from_slice(&[2, 4, 0, 7]);
        p.payload_mut().copy_from_slice(b"data");
        p.fill_checksum(LO, LO);
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (1, 2));
        assert_eq!(
            (p.seq_number(), p.ack_number()),
            (SeqNumber(3), SeqNumber(4))
        );
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.flags(), TcpFlags(0xc2));
        assert_eq!((p.window_len(), p.urgent_at()), (5, 6));
        assert_eq!(p.options(), &[2, 4, 0, 7]);
        assert_eq!(p.payload(), b"data");
        assert_eq!(p.total_len(), 28);
        assert!(p.verify_checksum(LO, LO));
        let (r, _) = parse(&buf).unwrap();
        assert_eq!(r.options.mss, Some(7));
        assert_eq!(r.segment_len(4), 5);
    }

    #[test]
    fn next_expected_option_round_trip_and_foreign_exids() {
        let repr = TcpRepr {
            flags: TcpFlags::ACK,
            options: TcpOptions {
                timestamp: Some(Timestamp { tsval: 1, tsecr: 2 }),
                next_expected: Some(SeqNumber(0xdead_beef)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let b = emit_vec(&repr, LO, LO, b"x");
        assert_eq!(repr.header_len(), 20 + 12 + 8);
        assert_eq!(
            &b[32..40],
            &[253, 8, 0x48, 0x77, 0xde, 0xad, 0xbe, 0xef],
            "kind 253, length 8, ExID 0x4877, seq (RFC 6994 layout)"
        );
        let (r, payload) = parse(&b).unwrap();
        assert_eq!(r, repr);
        assert_eq!(payload, b"x");
        // Another experiment's ExID on kind 253 is ignored, as is a
        // wrong-length option with our ExID.
        for opt in [
            [253u8, 8, 0x12, 0x34, 0, 0, 0, 9],
            [253u8, 6, 0x48, 0x77, 0, 0, 1, 1], // length 6, then NOP NOP
        ] {
            let mut raw = vec![0u8; 20];
            raw[12] = 7 << 4; // data offset 7 words
            raw[13] = TcpFlags::ACK.0;
            raw.extend_from_slice(&opt);
            let (r, _) = TcpRepr::parse(&raw, LO, LO, false).unwrap();
            assert_eq!(r.options.next_expected, None, "{opt:?}");
        }
    }

    // ------------------------------------------------------- proptest ----

    fn arb_repr() -> impl Strategy<Value = TcpRepr> {
        let opts = (
            proptest::option::of(any::<u16>()),
            proptest::option::of(any::<u8>()),
            any::<bool>(),
            proptest::option::of(any::<(u32, u32)>()),
            proptest::collection::vec(any::<(u32, u32)>(), 0..=4),
            proptest::option::of(any::<u32>()),
        )
            .prop_map(|(mss, ws, sp, ts, sacks, nx)| {
                let mut o = TcpOptions {
                    mss,
                    window_scale: ws,
                    sack_permitted: sp,
                    timestamp: ts.map(|(tsval, tsecr)| Timestamp { tsval, tsecr }),
                    next_expected: nx.map(SeqNumber),
                    ..TcpOptions::default()
                };
                let blocks: Vec<SackBlock> = sacks
                    .into_iter()
                    .map(|(l, r)| SackBlock {
                        left: SeqNumber(l),
                        right: SeqNumber(r),
                    })
                    .collect();
                o.set_sacks(&blocks);
                o
            });
        (any::<(u16, u16, u32, u32, u8, u16, u16)>(), opts).prop_map(
            |((sp, dp, seq, ack, flags, window, urgent), options)| {
                let flags = TcpFlags(flags);
                TcpRepr {
                    src_port: sp,
                    dst_port: dp,
                    seq: SeqNumber(seq),
                    ack: SeqNumber(if flags.ack() { ack } else { 0 }),
                    flags,
                    window,
                    urgent,
                    options,
                }
            },
        )
    }

    /// What a parse of `r`'s emitted bytes must give: `r` with the SACK
    /// blocks that did not fit removed.
    fn expected_after_emit(r: &TcpRepr) -> TcpRepr {
        let mut e = *r;
        let n = emitted_sacks(&r.options);
        let kept: Vec<SackBlock> = r.options.sacks()[..n].to_vec();
        e.options.sack_blocks = [SackBlock::default(); 4];
        e.options.set_sacks(&kept);
        e
    }

    fn arb_addrs() -> impl Strategy<Value = (IpAddr, IpAddr)> {
        prop_oneof![
            any::<(u32, u32)>()
                .prop_map(|(a, b)| (IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V4(Ipv4Addr::from(b)))),
            any::<(u128, u128)>()
                .prop_map(|(a, b)| (IpAddr::V6(Ipv6Addr::from(a)), IpAddr::V6(Ipv6Addr::from(b)))),
        ]
    }

    proptest! {
        #[test]
        fn emit_parse_round_trip(
            r in arb_repr(),
            (src, dst) in arb_addrs(),
            payload in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let bytes = emit_vec(&r, src, dst, &payload);
            prop_assert!(r.header_len() <= field::MAX_HEADER_LEN);
            prop_assert_eq!(bytes.len(), r.header_len() + payload.len());
            let (back, data) = TcpRepr::parse(&bytes, src, dst, true).unwrap();
            prop_assert_eq!(back, expected_after_emit(&r));
            prop_assert_eq!(data, &payload[..]);
            // Emitting what we parsed gives the same bytes again.
            prop_assert_eq!(emit_vec(&back, src, dst, data), bytes);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = TcpRepr::parse(&bytes, LO, LO, true);
            if let Ok((r, payload)) = TcpRepr::parse(&bytes, LO, LO, false) {
                // Whatever parsed re-emits and re-parses to itself.
                let again = emit_vec(&r, LO, LO, payload);
                let (r2, p2) = TcpRepr::parse(&again, LO, LO, true).unwrap();
                prop_assert_eq!(r2, expected_after_emit(&r));
                prop_assert_eq!(p2, payload);
            }
        }
    }
}
