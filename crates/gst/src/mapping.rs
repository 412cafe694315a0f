//! What a buffer becomes on the wire: the sink's mapping from GStreamer
//! buffer flags (or, for MPEG-TS, the stream itself) to a message's
//! priority, lifetime and dependency.
//!
//! - A **keyframe** (a buffer without `DELTA_UNIT`, or MPEG-TS packets of
//!   a random-access video PES and the tables) starts a group. Its
//!   messages get the highest priority and the group's lifetime: the
//!   latency plus the group's duration (measured between group starts),
//!   so a lost I-frame is repaired as long as any frame of its group can
//!   still use it.
//! - A **delta unit** gets the latency as its lifetime and depends on the
//!   last keyframe message of its group: if that one expires unsent, the
//!   delta is useless and expires too (thesis §4.2); a stale P-frame
//!   expires instead of delaying the next one.
//!
//! `mpegtsmux` marks only the buffer where a keyframe starts as a
//! non-delta unit (the rest of the I-frame's packets are flagged delta),
//! and a buffer may carry audio and video at once, so MPEG-TS (plain or
//! RTP-wrapped, RFC 2250) is classified by its packets
//! (`hollywood_taps::pubsub::ts`); the flags are used for everything else
//! (RTP payloads of a codec, elementary streams).

use hollywood_taps::pubsub::ts::TsClassifier;
use hollywood_taps::pubsub::wire::{FLAG_GROUP_START, FLAG_KEY};
use std::time::Duration;

/// A group's duration assumed before two group starts were seen.
pub const DEFAULT_GROUP: Duration = Duration::from_secs(1);
/// The longest group duration used for a keyframe's lifetime.
pub const MAX_GROUP: Duration = Duration::from_secs(10);

/// How one buffer is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Keyframe data (or tables, codec headers): repaired for the group.
    pub key: bool,
    /// The first message of a group.
    pub group_start: bool,
    /// 0 (keyframe data) … 3 (anything else): lower is more urgent.
    pub priority: u8,
    /// How long the message is useful.
    pub lifetime: Duration,
    /// Depends on the last keyframe message of its group.
    pub depends_on_key: bool,
}

impl Plan {
    /// `hollywood_taps::pubsub` header flags.
    pub fn flags(&self) -> u8 {
        let mut f = 0;
        if self.group_start {
            f |= FLAG_GROUP_START;
        }
        if self.key {
            f |= FLAG_KEY;
        }
        f
    }
}

/// What the element knows of a buffer besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferFlags {
    /// `GST_BUFFER_FLAG_DELTA_UNIT`.
    pub delta: bool,
    /// `GST_BUFFER_FLAG_HEADER` (codec headers: needed by every frame).
    pub header: bool,
}

/// The sink's state across buffers.
#[derive(Debug)]
pub struct Mapper {
    ts: TsClassifier,
    latency: Duration,
    /// Fixed group lifetime (`group-lifetime`), or measured.
    fixed_group: Option<Duration>,
    group: Duration,
    last_group_start: Option<Duration>,
    /// A keyframe message sent in the current group.
    have_key: bool,
}

impl Mapper {
    /// Messages useful for `latency`; keyframes for the group's duration
    /// on top (`fixed_group`, or measured when `None`).
    pub fn new(latency: Duration, fixed_group: Option<Duration>) -> Mapper {
        Mapper {
            ts: TsClassifier::new(),
            latency,
            fixed_group,
            group: fixed_group.unwrap_or(DEFAULT_GROUP),
            last_group_start: None,
            have_key: false,
        }
    }

    /// The group duration in use.
    pub fn group(&self) -> Duration {
        self.group
    }

    /// The plan for `data` with `flags`, arriving at `now` (any clock
    /// that does not go back).
    pub fn plan(&mut self, data: &[u8], flags: BufferFlags, now: Duration) -> Plan {
        let (f, priority) = self.ts.classify(data);
        let is_ts = !(f == FLAG_GROUP_START && priority == 3);
        let (key, group_start, priority) = if is_ts {
            (f & FLAG_KEY != 0, f & FLAG_GROUP_START != 0, priority)
        } else if flags.header {
            (true, false, 0)
        } else if flags.delta {
            (false, false, 2)
        } else {
            (true, true, 0)
        };
        if group_start {
            if let Some(last) = self.last_group_start {
                if self.fixed_group.is_none() && now > last {
                    self.group = (now - last).min(MAX_GROUP);
                }
            }
            self.last_group_start = Some(now);
            self.have_key = false;
        }
        let plan = Plan {
            key,
            group_start,
            priority,
            lifetime: if key {
                self.latency + self.group
            } else {
                self.latency
            },
            depends_on_key: !key && self.have_key,
        };
        if key {
            self.have_key = true;
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELTA: BufferFlags = BufferFlags {
        delta: true,
        header: false,
    };
    const KEY: BufferFlags = BufferFlags {
        delta: false,
        header: false,
    };
    const MS: Duration = Duration::from_millis(1);

    use hollywood_test_support::ts_packet as pkt;

    #[test]
    fn flags_make_groups_keyframes_outlive_deltas() {
        let mut m = Mapper::new(200 * MS, None);
        let k = m.plan(b"key", KEY, Duration::ZERO);
        assert!(k.key && k.group_start && !k.depends_on_key);
        assert_eq!(k.priority, 0);
        assert_eq!(k.lifetime, 200 * MS + DEFAULT_GROUP);
        let d = m.plan(b"delta", DELTA, 33 * MS);
        assert!(!d.key && !d.group_start && d.depends_on_key);
        assert_eq!(d.priority, 2);
        assert_eq!(d.lifetime, 200 * MS);
        // The next group starts 2 s later: the group's duration is measured.
        let k2 = m.plan(b"key", KEY, 2000 * MS);
        assert_eq!(k2.lifetime, 2200 * MS);
        assert_eq!(m.group(), 2000 * MS);
        // Codec headers are keyframe data but start no group.
        let h = m.plan(
            b"sps",
            BufferFlags {
                delta: true,
                header: true,
            },
            2001 * MS,
        );
        assert!(h.key && !h.group_start);
        // A fixed group lifetime is not measured.
        let mut f = Mapper::new(100 * MS, Some(500 * MS));
        f.plan(b"k", KEY, Duration::ZERO);
        assert_eq!(f.plan(b"k", KEY, 4000 * MS).lifetime, 600 * MS);
    }

    #[test]
    fn a_delta_before_any_keyframe_depends_on_nothing() {
        let mut m = Mapper::new(100 * MS, None);
        assert!(!m.plan(b"d", DELTA, Duration::ZERO).depends_on_key);
    }

    #[test]
    fn mpeg_ts_is_classified_by_its_packets_not_the_flags() {
        let mut m = Mapper::new(100 * MS, None);
        // mpegtsmux flags the rest of an I-frame as delta: still key data.
        let start = [pkt(256, Some(0xe0), true), pkt(256, None, false)].concat();
        let p = m.plan(&start, KEY, Duration::ZERO);
        assert!(p.key && p.group_start);
        let cont = m.plan(&pkt(256, None, false), DELTA, MS);
        assert!(cont.key && !cont.group_start && !cont.depends_on_key);
        assert_eq!(cont.lifetime, 100 * MS + DEFAULT_GROUP);
        // A P-frame's PES: delta, depends on the keyframe.
        let p = m.plan(&pkt(256, Some(0xe0), false), KEY, 2 * MS);
        assert!(!p.key && p.depends_on_key);
        assert_eq!(p.priority, 2);
        assert_eq!(p.flags(), 0);
        // Audio: not key, more urgent than video deltas.
        let a = m.plan(&pkt(257, Some(0xc0), false), DELTA, 3 * MS);
        assert_eq!(a.priority, 1);
        assert_eq!(
            m.plan(&start, DELTA, 4 * MS).flags(),
            FLAG_GROUP_START | FLAG_KEY
        );
    }
}
