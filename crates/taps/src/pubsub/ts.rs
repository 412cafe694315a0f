//! What a datagram of MPEG-TS (ISO/IEC 13818-1) carries, for a
//! publisher's priorities and group starts: `hollywood transmit` marks
//! each datagram it publishes with [`TsClassifier::classify`].
//!
//! A video PES whose first TS packet has the adaptation field's
//! random_access_indicator set (ffmpeg's muxer sets it on keyframes)
//! starts a group; its packets are keyframe data, as are the tables
//! (PAT, PMT: a decoder needs them). Priorities: keyframe data and tables
//! 0, audio 1, other video 2, anything else 3. A datagram gets its most
//! urgent packet's. RTP-wrapped TS (a 12-byte RTP header, RFC 2250) is
//! read too; a datagram that is not TS starts a group of its own at
//! priority 3 (nothing to wait for).

use super::wire::{FLAG_GROUP_START, FLAG_KEY};
use std::collections::HashMap;

const PACKET: usize = 188;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Video { key: bool },
    Audio,
    Other,
}

/// Per-PID state across datagrams.
#[derive(Debug, Default)]
pub struct TsClassifier {
    pids: HashMap<u16, Kind>,
}

impl TsClassifier {
    /// Nothing seen yet.
    pub fn new() -> TsClassifier {
        TsClassifier::default()
    }

    /// `(flags, priority)` of one datagram.
    pub fn classify(&mut self, d: &[u8]) -> (u8, u8) {
        let ts = if d.len() % PACKET == 12 && d.first().is_some_and(|b| b >> 6 == 2) {
            &d[12..]
        } else {
            d
        };
        if ts.is_empty() || ts.len() % PACKET != 0 || ts.chunks(PACKET).any(|p| p[0] != 0x47) {
            return (FLAG_GROUP_START, 3);
        }
        let (mut flags, mut prio) = (0u8, 3u8);
        for p in ts.chunks(PACKET) {
            let pid = (u16::from(p[1] & 0x1f) << 8) | u16::from(p[2]);
            let pusi = p[1] & 0x40 != 0;
            let afc = (p[3] >> 4) & 3;
            let mut off = 4;
            let mut rai = false;
            if afc & 2 != 0 {
                let alen = usize::from(p[4]);
                if alen > 0 && 5 < PACKET {
                    rai = p[5] & 0x40 != 0;
                }
                off = 5 + alen;
            }
            if pid == 0x1fff {
                continue; // null packets
            }
            let payload = if afc & 1 != 0 && off < PACKET {
                &p[off..]
            } else {
                &[][..]
            };
            if pusi && !payload.is_empty() {
                let kind = if payload.len() >= 4 && payload[..3] == [0, 0, 1] {
                    match payload[3] {
                        0xe0..=0xef => Kind::Video { key: rai },
                        0xc0..=0xdf | 0xbd => Kind::Audio,
                        _ => Kind::Other,
                    }
                } else {
                    // A section (PAT, PMT, …): a table.
                    Kind::Video { key: true }
                };
                if kind == (Kind::Video { key: true }) && rai {
                    flags |= FLAG_GROUP_START;
                }
                self.pids.insert(pid, kind);
                if self.pids.len() > 64 {
                    self.pids.clear();
                    self.pids.insert(pid, kind);
                }
            }
            let p = match self.pids.get(&pid).copied().unwrap_or(if pid == 0 {
                Kind::Video { key: true }
            } else {
                Kind::Other
            }) {
                Kind::Video { key: true } => 0,
                Kind::Audio => 1,
                Kind::Video { key: false } => 2,
                Kind::Other => 3,
            };
            prio = prio.min(p);
        }
        if prio == 0 {
            flags |= FLAG_KEY;
        }
        (flags, prio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use hollywood_test_support::ts_packet as pkt;

    #[test]
    fn keyframes_start_groups_and_come_first() {
        let mut c = TsClassifier::new();
        // A PAT: pointer field, table id 0.
        let mut pat = vec![0x47, 0x40, 0x00, 0x10, 0x00, 0x00, 0xb0, 0x0d];
        pat.resize(188, 0xff);
        assert_eq!(c.classify(&pat), (FLAG_KEY, 0));
        let key = [pkt(256, Some(0xe0), true), pkt(257, Some(0xc0), false)].concat();
        assert_eq!(c.classify(&key), (FLAG_GROUP_START | FLAG_KEY, 0));
        // The keyframe continues in the next datagram: still keyframe data.
        assert_eq!(c.classify(&pkt(256, None, false)), (FLAG_KEY, 0));
        assert_eq!(c.classify(&pkt(257, None, false)), (0, 1));
        let delta = pkt(256, Some(0xe0), false);
        assert_eq!(c.classify(&delta), (0, 2));
        assert_eq!(c.classify(&pkt(256, None, false)), (0, 2));
        assert_eq!(c.classify(&pkt(300, None, false)), (0, 3));
        let mut rtp = vec![0x80, 33, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        rtp.extend(pkt(256, Some(0xe0), true));
        assert_eq!(c.classify(&rtp), (FLAG_GROUP_START | FLAG_KEY, 0));
    }

    #[test]
    fn not_ts_starts_its_own_group() {
        let mut c = TsClassifier::new();
        assert_eq!(c.classify(b"hello"), (FLAG_GROUP_START, 3));
        assert_eq!(c.classify(&[]), (FLAG_GROUP_START, 3));
        let mut p = pkt(256, None, false);
        p[0] = 0;
        assert_eq!(c.classify(&p), (FLAG_GROUP_START, 3));
    }
}
