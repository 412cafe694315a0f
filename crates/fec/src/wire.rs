//! What the FEC layer puts on the wire (docs/PROTOCOL.md, "FEC"): the
//! message ids it uses and the payloads of its two messages, REPAIR and
//! REPORT, both on sub-stream [`FEC_SUBSTREAM`].
//!
//! **Ids.** The transports need message ids unique per connection and
//! increasing in the order messages are queued (thesis §4.2). The layer
//! sends the application's message `a` with id `a << 4` ([`wire_id`]) and
//! its own messages in the fifteen ids after it (`a << 4 | 1` to
//! `a << 4 | 15`), so a receiver maps ids back without state
//! ([`app_id`]) and the application's messages go on the wire unchanged.
//!
//! All integers are big-endian. Parsing never panics; every length is
//! checked first.

/// The sub-stream of the layer's own messages (0xFFFF is the secure
/// handshake's and the taps end marker's).
pub const FEC_SUBSTREAM: u16 = 0xFFFE;
/// Low bits of a wire id the layer keeps for its own messages.
pub const ID_SHIFT: u32 = 4;
/// Ids after each application message the layer may use.
pub const EXTRA_SLOTS: u32 = (1 << ID_SHIFT) - 1;
/// Largest application id that maps to a wire id (2^28 - 1).
pub const MAX_APP_ID: u32 = u32::MAX >> ID_SHIFT;

/// The wire id of application message `app` (`app << 4`); `None` above
/// [`MAX_APP_ID`].
pub fn wire_id(app: u32) -> Option<u32> {
    (app <= MAX_APP_ID).then_some(app << ID_SHIFT)
}

/// The application id of a wire id, `None` for an id of the layer's own
/// (low four bits not zero).
pub fn app_id(wire: u32) -> Option<u32> {
    (wire & EXTRA_SLOTS == 0).then_some(wire >> ID_SHIFT)
}

/// First byte of a REPAIR message.
pub const KIND_REPAIR: u8 = 1;
/// First byte of a REPORT message.
pub const KIND_REPORT: u8 = 2;
/// Most source messages in a block.
pub const MAX_K: usize = 64;
/// Most repair symbols for a block (the ids after one application message).
pub const MAX_M: usize = EXTRA_SLOTS as usize;
/// REPAIR header bytes before the source-id deltas.
pub const REPAIR_FIXED: usize = 12;
/// REPORT length.
pub const REPORT_LEN: usize = 21;
/// `hold_us` of a REPORT that echoes no REPAIR.
pub const NO_ECHO: u32 = u32::MAX;

/// Why an FEC message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its header says.
    Truncated,
    /// Empty, or a first byte that is neither REPAIR nor REPORT.
    UnknownKind,
    /// `k` is 0 or above [`MAX_K`], or `m` 0 or above [`MAX_M`].
    BadCount,
    /// The symbol index is not below `m`.
    BadIndex,
    /// A source-id delta of 0 (ids must increase).
    ZeroDelta,
    /// The source ids run past [`MAX_APP_ID`].
    IdOverflow,
    /// The symbol is empty or of odd length (the code works on 16-bit words).
    BadSymbol,
    /// A REPORT of the wrong length.
    BadLength,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            WireError::Truncated => "truncated FEC message",
            WireError::UnknownKind => "unknown FEC message kind",
            WireError::BadCount => "block size out of range",
            WireError::BadIndex => "repair index not below the repair count",
            WireError::ZeroDelta => "source ids must increase",
            WireError::IdOverflow => "source ids past the largest application id",
            WireError::BadSymbol => "repair symbol empty or of odd length",
            WireError::BadLength => "REPORT of the wrong length",
        })
    }
}

impl std::error::Error for WireError {}

/// A REPAIR message: one repair symbol of a block.
///
/// ```text
/// 0      kind = 1
/// 1      k: source messages in the block (1..=64)
/// 2      m: repair symbols of the block (1..=15)
/// 3      index of this symbol (0..m)
/// 4..8   application id of the block's first source message
/// 8..12  sender's clock when sent, microseconds, wrapping (echoed by REPORT)
/// 12..   k-1 bytes: each further source's id minus the previous one (1..=255)
/// then   the symbol (S bytes, S even, S >= 6)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair<'a> {
    /// Source messages in the block.
    pub k: u8,
    /// Repair symbols of the block.
    pub m: u8,
    /// This symbol's index.
    pub index: u8,
    /// Application ids of the block's sources, increasing.
    pub sources: Vec<u32>,
    /// The sender's clock in microseconds (wrapping) when it was sent.
    pub sent_us: u32,
    /// The repair symbol.
    pub symbol: &'a [u8],
}

impl<'a> Repair<'a> {
    /// Parse a REPAIR payload.
    pub fn parse(b: &'a [u8]) -> Result<Repair<'a>, WireError> {
        if b.first() != Some(&KIND_REPAIR) {
            return Err(WireError::UnknownKind);
        }
        if b.len() < REPAIR_FIXED {
            return Err(WireError::Truncated);
        }
        let (k, m, index) = (b[1], b[2], b[3]);
        if k == 0 || k as usize > MAX_K || m == 0 || m as usize > MAX_M {
            return Err(WireError::BadCount);
        }
        if index >= m {
            return Err(WireError::BadIndex);
        }
        let first = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let sent_us = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        let deltas_end = REPAIR_FIXED + k as usize - 1;
        let deltas = b
            .get(REPAIR_FIXED..deltas_end)
            .ok_or(WireError::Truncated)?;
        let mut sources = Vec::with_capacity(k as usize);
        let mut id = first;
        if id > MAX_APP_ID {
            return Err(WireError::IdOverflow);
        }
        sources.push(id);
        for &d in deltas {
            if d == 0 {
                return Err(WireError::ZeroDelta);
            }
            id = id
                .checked_add(u32::from(d))
                .filter(|&i| i <= MAX_APP_ID)
                .ok_or(WireError::IdOverflow)?;
            sources.push(id);
        }
        let symbol = &b[deltas_end..];
        if symbol.is_empty() || !symbol.len().is_multiple_of(2) {
            return Err(WireError::BadSymbol);
        }
        Ok(Repair {
            k,
            m,
            index,
            sources,
            sent_us,
            symbol,
        })
    }

    /// Bytes [`Repair::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        REPAIR_FIXED + self.sources.len().saturating_sub(1) + self.symbol.len()
    }

    /// Append the payload to `out`. The caller keeps the invariants
    /// [`Repair::parse`] checks (sources increasing by 1..=255, `k` equal
    /// to their number).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.reserve(self.buffer_len());
        out.extend([KIND_REPAIR, self.k, self.m, self.index]);
        out.extend(self.sources.first().copied().unwrap_or(0).to_be_bytes());
        out.extend(self.sent_us.to_be_bytes());
        for w in self.sources.windows(2) {
            out.push((w[1] - w[0]) as u8);
        }
        out.extend_from_slice(self.symbol);
    }
}

/// A REPORT message: what the receiver measured, for the sender's
/// redundancy choice and round-trip estimate.
///
/// ```text
/// 0      kind = 2
/// 1..5   source messages judged so far (arrived or lost), cumulative
/// 5..9   of them lost (not arrived when 16 later ids had), cumulative
/// 9..13  loss bursts (runs of consecutive lost ids), cumulative
/// 13..17 sent_us of the latest REPAIR received
/// 17..21 microseconds between its arrival and this REPORT (0xFFFFFFFF: no REPAIR yet)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    /// Source messages judged so far.
    pub judged: u32,
    /// Of them, lost.
    pub lost: u32,
    /// Runs of consecutive lost ids.
    pub bursts: u32,
    /// `sent_us` of the latest REPAIR received.
    pub echo_us: u32,
    /// Time since it arrived, microseconds ([`NO_ECHO`]: none yet).
    pub hold_us: u32,
}

impl Report {
    /// Parse a REPORT payload.
    pub fn parse(b: &[u8]) -> Result<Report, WireError> {
        if b.first() != Some(&KIND_REPORT) {
            return Err(WireError::UnknownKind);
        }
        if b.len() != REPORT_LEN {
            return Err(WireError::BadLength);
        }
        let u = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(Report {
            judged: u(1),
            lost: u(5),
            bursts: u(9),
            echo_us: u(13),
            hold_us: u(17),
        })
    }

    /// Append the payload to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(KIND_REPORT);
        for v in [
            self.judged,
            self.lost,
            self.bursts,
            self.echo_us,
            self.hold_us,
        ] {
            out.extend(v.to_be_bytes());
        }
    }
}

/// Which FEC message a payload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FecMessage<'a> {
    /// A repair symbol.
    Repair(Repair<'a>),
    /// A receiver's report.
    Report(Report),
}

/// Parse a payload received on [`FEC_SUBSTREAM`].
pub fn parse(b: &[u8]) -> Result<FecMessage<'_>, WireError> {
    match b.first() {
        Some(&KIND_REPAIR) => Repair::parse(b).map(FecMessage::Repair),
        Some(&KIND_REPORT) => Report::parse(b).map(FecMessage::Report),
        _ => Err(WireError::UnknownKind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_both_ways() {
        assert_eq!(wire_id(0), Some(0));
        assert_eq!(wire_id(3), Some(48));
        assert_eq!(wire_id(MAX_APP_ID), Some(u32::MAX - 15));
        assert_eq!(wire_id(MAX_APP_ID + 1), None);
        assert_eq!(app_id(48), Some(3));
        assert_eq!(app_id(49), None);
        assert_eq!(app_id(63), None);
    }

    /// The byte-literal example of docs/PROTOCOL.md ("FEC", F1).
    #[test]
    fn repair_bytes() {
        let sym = [0u8, 0, 0, 2, 0, 0, 0x68, 0x69];
        let r = Repair {
            k: 3,
            m: 2,
            index: 1,
            sources: vec![10, 11, 13],
            sent_us: 0x0102_0304,
            symbol: &sym,
        };
        let mut b = Vec::new();
        r.emit(&mut b);
        assert_eq!(
            b,
            [
                0x01, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x02, 0x03, 0x04, 0x01, 0x02,
                0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x68, 0x69
            ]
        );
        assert_eq!(r.buffer_len(), b.len());
        assert_eq!(Repair::parse(&b), Ok(r));
        // Truncated in the header or the deltas, or to an odd symbol:
        // refused, never a panic. (The symbol's length is what is left: a
        // cut at an even length reads as a shorter symbol, which the
        // decoder refuses for not matching its block.)
        for n in (0..=14).chain([15, 17, 19, 21]) {
            assert!(Repair::parse(&b[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn repair_refusals() {
        let ok = [1u8, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb];
        assert!(Repair::parse(&ok).is_ok());
        let mut b = ok;
        b[1] = 0;
        assert_eq!(Repair::parse(&b), Err(WireError::BadCount));
        let mut b = ok;
        b[2] = 16;
        assert_eq!(Repair::parse(&b), Err(WireError::BadCount));
        let mut b = ok;
        b[3] = 1;
        assert_eq!(Repair::parse(&b), Err(WireError::BadIndex));
        assert_eq!(Repair::parse(&ok[..13]), Err(WireError::BadSymbol));
        let two = [1u8, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb];
        assert_eq!(Repair::parse(&two), Err(WireError::ZeroDelta));
        let high = [
            1u8, 2, 1, 0, 0x0f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 0xaa, 0xbb,
        ];
        assert_eq!(Repair::parse(&high), Err(WireError::IdOverflow));
        assert_eq!(parse(&[]), Err(WireError::UnknownKind));
        assert_eq!(parse(&[3]), Err(WireError::UnknownKind));
    }

    #[test]
    fn report_bytes() {
        let r = Report {
            judged: 1000,
            lost: 20,
            bursts: 7,
            echo_us: 5,
            hold_us: NO_ECHO,
        };
        let mut b = Vec::new();
        r.emit(&mut b);
        assert_eq!(
            b,
            [
                0x02, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x07, 0x00,
                0x00, 0x00, 0x05, 0xff, 0xff, 0xff, 0xff
            ]
        );
        assert_eq!(parse(&b), Ok(FecMessage::Report(r)));
        assert_eq!(Report::parse(&b[..20]), Err(WireError::BadLength));
    }
}
