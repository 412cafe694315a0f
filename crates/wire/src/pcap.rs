//! Classic libpcap capture files (the `pcap` format described in
//! draft-ietf-opsawg-pcap), nanosecond resolution, link type RAW.
//!
//! [`Writer`] writes what Wireshark/tcpdump read: a 24-byte file header with
//! magic `0xa1b23c4d` (nanosecond timestamps), version 2.4, snaplen 65535 and
//! `LINKTYPE_RAW` (101: each record is a bare IPv4 or IPv6 packet), then one
//! 16-byte record header plus the packet bytes per packet. Multi-byte fields
//! are little-endian; readers detect byte order from the magic.
//!
//! [`Reader`] reads such files back (either byte order, micro- or nanosecond
//! magic) for tests and tools; [`ip_packet`] strips the link header of
//! captures made by tshark/tcpdump (Ethernet on a veth, Linux cooked).

use std::fmt;
use std::io::{self, Read, Write};

/// Magic number of a nanosecond-resolution pcap file.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Magic number of a microsecond-resolution pcap file.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Link type for raw IPv4/IPv6 packets (tcpdump.org link-layer header types).
pub const LINKTYPE_RAW: u32 = 101;
/// Link type for Ethernet II frames (what tshark/tcpdump write on a veth).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type for Linux "cooked" captures, v1 (`tshark -i any`).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// Link type for Linux "cooked" captures, v2.
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// Link type for bare IPv4 packets.
pub const LINKTYPE_IPV4: u32 = 228;
/// Link type for bare IPv6 packets.
pub const LINKTYPE_IPV6: u32 = 229;

/// The IP packet inside one captured frame of link type `linktype`:
/// the frame itself for raw IP, the payload after the link header for
/// Ethernet (with at most two 802.1Q/802.1ad tags) and Linux cooked
/// captures (v1 and v2). `None` for other link types, non-IP frames and
/// frames too short for their link header.
pub fn ip_packet(linktype: u32, frame: &[u8]) -> Option<&[u8]> {
    const ETH_IPV4: u16 = 0x0800;
    const ETH_IPV6: u16 = 0x86dd;
    let be16 = |b: &[u8], at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
    };
    fn ip(proto: u16, rest: &[u8]) -> Option<&[u8]> {
        matches!(proto, ETH_IPV4 | ETH_IPV6).then_some(rest)
    }
    match linktype {
        LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => Some(frame),
        LINKTYPE_ETHERNET => {
            let mut at = 12;
            let mut proto = be16(frame, at)?;
            // Up to two VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8).
            for _ in 0..2 {
                if proto == 0x8100 || proto == 0x88a8 {
                    at += 4;
                    proto = be16(frame, at)?;
                }
            }
            ip(proto, frame.get(at + 2..)?)
        }
        LINKTYPE_LINUX_SLL => ip(be16(frame, 14)?, frame.get(16..)?),
        LINKTYPE_LINUX_SLL2 => ip(be16(frame, 0)?, frame.get(20..)?),
        _ => None,
    }
}
/// Snapshot length we write: packets longer than this are truncated in the
/// file (the record keeps the original length).
pub const SNAPLEN: u32 = 65535;
/// Largest record the reader accepts regardless of the file's snaplen, so a
/// corrupt length cannot make it allocate gigabytes.
pub const MAX_RECORD_LEN: u32 = 256 * 1024;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Writes a pcap file.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
}

impl<W: Write> Writer<W> {
    /// Start a file: writes the file header to `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes()); // version major
        h[6..8].copy_from_slice(&4u16.to_le_bytes()); // version minor
                                                      // Bytes 8..12 (thiszone) and 12..16 (sigfigs) stay zero.
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&h)?;
        Ok(Writer { out })
    }

    /// Append one packet (a whole IPv4/IPv6 packet) seen at `time_ns`
    /// nanoseconds since the capture's epoch. Packets longer than
    /// [`SNAPLEN`] are cut. Fails with `InvalidInput` if the time does not
    /// fit the format's 32-bit seconds field.
    pub fn write_packet(&mut self, time_ns: u64, packet: &[u8]) -> io::Result<()> {
        let secs = u32::try_from(time_ns / NANOS_PER_SEC).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "pcap timestamp beyond 2^32 seconds",
            )
        })?;
        let nanos = (time_ns % NANOS_PER_SEC) as u32;
        let orig = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        let incl = orig.min(SNAPLEN);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&nanos.to_le_bytes());
        h[8..12].copy_from_slice(&incl.to_le_bytes());
        h[12..16].copy_from_slice(&orig.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&packet[..incl as usize])
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and give back the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Why a pcap file could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The underlying reader failed.
    Io(io::Error),
    /// The file does not start with a pcap magic number.
    BadMagic(u32),
    /// A file format version other than 2.x.
    UnsupportedVersion {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// The file ends inside a header or a record.
    Truncated,
    /// A record claims more bytes than the snaplen or [`MAX_RECORD_LEN`],
    /// or a sub-second field is out of range.
    BadRecord,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "pcap read error: {e}"),
            ReadError::BadMagic(m) => write!(f, "not a pcap file (magic {m:#010x})"),
            ReadError::UnsupportedVersion { major, minor } => {
                write!(f, "unsupported pcap version {major}.{minor}")
            }
            ReadError::Truncated => f.write_str("pcap file truncated"),
            ReadError::BadRecord => f.write_str("corrupt pcap record header"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads a pcap file record by record.
#[derive(Debug)]
pub struct Reader<R: Read> {
    input: R,
    big_endian: bool,
    nanos: bool,
    snaplen: u32,
    linktype: u32,
}

/// Fill `buf` completely; `Ok(false)` if the input was at EOF before the
/// first byte, `Truncated` if it ended part-way.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<bool, ReadError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(ReadError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(true)
}

impl<R: Read> Reader<R> {
    /// Read and check the file header.
    pub fn new(mut input: R) -> Result<Self, ReadError> {
        let mut h = [0u8; 24];
        if !read_full(&mut input, &mut h)? {
            return Err(ReadError::Truncated);
        }
        let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (big_endian, nanos) = match le {
            MAGIC_NANOS => (false, true),
            MAGIC_MICROS => (false, false),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false),
            m => return Err(ReadError::BadMagic(m)),
        };
        let mut rd = Reader {
            input,
            big_endian,
            nanos,
            snaplen: 0,
            linktype: 0,
        };
        let major = rd.u16(&h[4..6]);
        let minor = rd.u16(&h[6..8]);
        if major != 2 {
            return Err(ReadError::UnsupportedVersion { major, minor });
        }
        rd.snaplen = rd.u32(&h[16..20]);
        // The top bits of the link-type word carry FCS information.
        rd.linktype = rd.u32(&h[20..24]) & 0x0fff_ffff;
        Ok(rd)
    }

    fn u16(&self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        if self.big_endian {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }
    fn u32(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    /// The file's link type (101 = raw IP for files we write).
    pub fn linktype(&self) -> u32 {
        self.linktype
    }
    /// The file's snapshot length.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Next record as (timestamp in ns, captured bytes), or `None` at a
    /// clean end of file.
    pub fn next_packet(&mut self) -> Result<Option<(u64, Vec<u8>)>, ReadError> {
        let mut h = [0u8; 16];
        if !read_full(&mut self.input, &mut h)? {
            return Ok(None);
        }
        let secs = self.u32(&h[0..4]) as u64;
        let frac = self.u32(&h[4..8]) as u64;
        let incl = self.u32(&h[8..12]);
        let (frac_limit, scale) = if self.nanos {
            (NANOS_PER_SEC, 1)
        } else {
            (1_000_000, 1000)
        };
        // Writers may set snaplen 0 to mean "unlimited"; MAX_RECORD_LEN
        // still bounds the allocation.
        let limit = if self.snaplen == 0 {
            MAX_RECORD_LEN
        } else {
            self.snaplen.min(MAX_RECORD_LEN)
        };
        if frac >= frac_limit || incl > limit {
            return Err(ReadError::BadRecord);
        }
        let mut data = vec![0u8; incl as usize];
        if !read_full(&mut self.input, &mut data)? && incl > 0 {
            return Err(ReadError::Truncated);
        }
        Ok(Some((secs * NANOS_PER_SEC + frac * scale, data)))
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<(u64, Vec<u8>), ReadError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_packet().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes() {
        let w = Writer::new(Vec::new()).unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(
            bytes,
            [
                0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101,
                0, 0, 0
            ]
        );
    }

    #[test]
    fn round_trip() {
        let mut w = Writer::new(Vec::new()).unwrap();
        let pkts: Vec<(u64, Vec<u8>)> = vec![
            (0, vec![0x45, 1, 2, 3]),
            (1_500_000_123, vec![]),
            (7 * NANOS_PER_SEC + 999_999_999, (0..=255u8).collect()),
        ];
        for (t, p) in &pkts {
            w.write_packet(*t, p).unwrap();
        }
        let bytes = w.into_inner().unwrap();
        let r = Reader::new(&bytes[..]).unwrap();
        assert_eq!(r.linktype(), LINKTYPE_RAW);
        assert_eq!(r.snaplen(), SNAPLEN);
        let got: Vec<_> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(got, pkts);
    }

    #[test]
    fn long_packets_are_cut_to_snaplen() {
        let mut w = Writer::new(Vec::new()).unwrap();
        w.write_packet(5, &vec![7u8; 70_000]).unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(bytes.len(), 24 + 16 + SNAPLEN as usize);
        assert_eq!(&bytes[24 + 12..24 + 16], &70_000u32.to_le_bytes());
        let (t, p) = Reader::new(&bytes[..])
            .unwrap()
            .next_packet()
            .unwrap()
            .unwrap();
        assert_eq!((t, p.len()), (5, SNAPLEN as usize));
    }

    #[test]
    fn time_overflow_is_an_error() {
        let mut w = Writer::new(Vec::new()).unwrap();
        let e = w.write_packet(u64::MAX, &[1]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn reads_big_endian_microsecond_files() {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC_MICROS.to_be_bytes());
        f.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&1500u32.to_be_bytes());
        f.extend_from_slice(&LINKTYPE_RAW.to_be_bytes());
        f.extend_from_slice(&3u32.to_be_bytes());
        f.extend_from_slice(&250_000u32.to_be_bytes());
        f.extend_from_slice(&2u32.to_be_bytes());
        f.extend_from_slice(&2u32.to_be_bytes());
        f.extend_from_slice(&[0xaa, 0xbb]);
        let mut r = Reader::new(&f[..]).unwrap();
        assert_eq!(
            r.next_packet().unwrap(),
            Some((3_250_000_000, vec![0xaa, 0xbb]))
        );
        assert!(r.next_packet().unwrap().is_none());
    }

    #[test]
    fn link_headers_are_stripped() {
        let ip4 = [0x45u8, 0, 0, 20];
        assert_eq!(ip_packet(LINKTYPE_RAW, &ip4), Some(&ip4[..]));
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x08, 0x00]);
        eth.extend_from_slice(&ip4);
        assert_eq!(ip_packet(LINKTYPE_ETHERNET, &eth), Some(&ip4[..]));
        let mut vlan = vec![0u8; 12];
        vlan.extend_from_slice(&[0x81, 0x00, 0, 5, 0x86, 0xdd]);
        vlan.extend_from_slice(&[0x60, 0, 0, 0]);
        assert_eq!(
            ip_packet(LINKTYPE_ETHERNET, &vlan),
            Some(&[0x60, 0, 0, 0][..])
        );
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06, 1, 2]);
        assert_eq!(ip_packet(LINKTYPE_ETHERNET, &arp), None, "not IP");
        assert_eq!(ip_packet(LINKTYPE_ETHERNET, &eth[..10]), None, "short");
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x08, 0x00]);
        sll.extend_from_slice(&ip4);
        assert_eq!(ip_packet(LINKTYPE_LINUX_SLL, &sll), Some(&ip4[..]));
        let mut sll2 = vec![0x86, 0xdd];
        sll2.extend_from_slice(&[0u8; 18]);
        sll2.extend_from_slice(&ip4);
        assert_eq!(ip_packet(LINKTYPE_LINUX_SLL2, &sll2), Some(&ip4[..]));
        assert_eq!(ip_packet(147, &ip4), None, "unknown link type");
    }

    #[test]
    fn bad_files() {
        assert!(matches!(
            Reader::new(&[1u8, 2, 3, 4][..]),
            Err(ReadError::Truncated)
        ));
        assert!(matches!(
            Reader::new(&[0u8; 24][..]),
            Err(ReadError::BadMagic(0))
        ));
        let mut good = Writer::new(Vec::new()).unwrap();
        good.write_packet(1, &[1, 2, 3, 4]).unwrap();
        let good = good.into_inner().unwrap();

        let mut v3 = good.clone();
        v3[4] = 3;
        assert!(matches!(
            Reader::new(&v3[..]),
            Err(ReadError::UnsupportedVersion { major: 3, minor: 4 })
        ));
        // Every cut inside the record is Truncated, never a panic.
        for cut in 25..good.len() {
            let mut r = Reader::new(&good[..cut]).unwrap();
            assert!(
                matches!(r.next_packet(), Err(ReadError::Truncated)),
                "cut {cut}"
            );
        }
        // A record longer than the snaplen.
        let mut huge = good.clone();
        huge[24 + 8..24 + 12].copy_from_slice(&100_000u32.to_le_bytes());
        let mut r = Reader::new(&huge[..]).unwrap();
        assert!(matches!(r.next_packet(), Err(ReadError::BadRecord)));
        // Nanoseconds out of range.
        let mut ns = good;
        ns[24 + 4..24 + 8].copy_from_slice(&NANOS_PER_SEC.to_le_bytes()[..4]);
        let mut r = Reader::new(&ns[..]).unwrap();
        assert!(matches!(r.next_packet(), Err(ReadError::BadRecord)));
    }
}
