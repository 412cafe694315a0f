//! Sender side of the intermediary layer (thesis §4.2): assigns message ids
//! and per-sub-stream sequence numbers, tracks ordered sub-stream chains,
//! and frames messages.

use std::collections::BTreeMap;

use crate::frame::{encode_frame, FrameHeader, DEFAULT_MAX_PAYLOAD};

/// [`Framer`] settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramerConfig {
    /// Id of the first message. Default 0. A caller that wants ids not to
    /// be predictable picks it from its own seeded generator.
    pub initial_id: u32,
    /// Largest accepted payload. Default [`DEFAULT_MAX_PAYLOAD`] (1 MiB);
    /// the receiver's `DeframerConfig::max_payload` must be at least this.
    pub max_payload: usize,
    /// Write each message's sequence number on its sub-stream into the
    /// header (`SEQ` flag, 4 bytes more per frame), so that the receiver
    /// can count losses per sub-stream (`Deframer::substream_stats`).
    /// Default true. A receiver of an older version that does not know
    /// the flag refuses such frames (`bad_version`): set false for it.
    pub substream_seq: bool,
}

impl Default for FramerConfig {
    fn default() -> Self {
        FramerConfig {
            initial_id: 0,
            max_payload: DEFAULT_MAX_PAYLOAD,
            substream_seq: true,
        }
    }
}

/// Why a message could not be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The payload exceeds [`FramerConfig::max_payload`].
    TooLarge {
        /// Payload length.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
}

impl core::fmt::Display for SendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendError::TooLarge { len, max } => {
                write!(f, "payload of {len} bytes exceeds maximum {max}")
            }
        }
    }
}

impl std::error::Error for SendError {}

/// Sender side: turns messages into frames.
///
/// Ids come from one counter shared by all sub-streams (thesis §4.2: the
/// API "returns the identifier of the message that was queued"), wrapping
/// at 2^32. Sequence numbers come from one counter per sub-stream (0 for
/// its first message), wrapping at 2^32; a message framed but never sent
/// (expired in the sender's queue) leaves a gap the receiver counts as
/// missing. For an ordered sub-stream the framer remembers the last id it
/// used there and writes it into the next message's header (thesis §8.3.2).
#[derive(Debug, Clone)]
pub struct Framer {
    next_id: u32,
    max_payload: usize,
    substream_seq: bool,
    /// Per sub-stream used so far (at most 65 536 entries).
    subs: BTreeMap<u16, SubState>,
}

/// Sender state of one sub-stream.
#[derive(Debug, Clone, Copy, Default)]
struct SubState {
    /// Sequence number of the next message.
    next_seq: u32,
    /// Last id sent on the sub-stream as an ordered message.
    ordered_last: Option<u32>,
    /// `ordered_last` before the last frame, for [`Framer::retract`].
    undo: Option<Option<u32>>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new(FramerConfig::default())
    }
}

impl Framer {
    /// A framer with the given settings.
    #[must_use]
    pub fn new(config: FramerConfig) -> Self {
        Framer {
            next_id: config.initial_id,
            max_payload: config.max_payload,
            substream_seq: config.substream_seq,
            subs: BTreeMap::new(),
        }
    }

    /// The id the next message will get.
    #[must_use]
    pub fn next_id(&self) -> u32 {
        self.next_id
    }

    /// The sequence number the next message on `substream` will get.
    #[must_use]
    pub fn next_substream_seq(&self, substream: u16) -> u32 {
        self.subs.get(&substream).map_or(0, |s| s.next_seq)
    }

    /// The largest accepted payload.
    #[must_use]
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Frames `payload` for `substream` and appends the frame to `out`;
    /// returns the message id. `ordered` puts the message on the
    /// sub-stream's ordered chain: the receiver releases it only after the
    /// previous ordered message of that sub-stream.
    pub fn frame(
        &mut self,
        substream: u16,
        ordered: bool,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u32, SendError> {
        let id = self.next_id;
        self.frame_id(id, substream, ordered, payload, out)?;
        Ok(id)
    }

    /// Like [`Framer::frame`], with the caller's message id `id` (a layer
    /// above assigns ids; TCP Hollywood needs them increasing in the order
    /// messages are queued, thesis §4.2). The next [`Framer::frame`] uses
    /// `id + 1`.
    pub fn frame_id(
        &mut self,
        id: u32,
        substream: u16,
        ordered: bool,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SendError> {
        if payload.len() > self.max_payload {
            return Err(SendError::TooLarge {
                len: payload.len(),
                max: self.max_payload,
            });
        }
        let sub = self.subs.entry(substream).or_default();
        sub.undo = Some(sub.ordered_last);
        let ordered_prev = if ordered {
            // The first ordered message of a sub-stream points at itself.
            Some(sub.ordered_last.replace(id).unwrap_or(id))
        } else {
            None
        };
        let substream_seq = self.substream_seq.then_some(sub.next_seq);
        sub.next_seq = sub.next_seq.wrapping_add(1);
        encode_frame(
            &FrameHeader {
                substream,
                id,
                substream_seq,
                ordered_prev,
            },
            payload,
            out,
        );
        self.next_id = id.wrapping_add(1);
        Ok(())
    }

    /// Take back the last frame made for `substream`, `id`, which the
    /// transport refused (no room): its sequence number and its place in
    /// the ordered chain are given back, so the retry (framed again) leaves
    /// no gap the receiver would count as a loss. Only the last frame of a
    /// sub-stream can be retracted; returns false otherwise.
    pub fn retract(&mut self, substream: u16, id: u32) -> bool {
        let Some(sub) = self.subs.get_mut(&substream) else {
            return false;
        };
        let Some(prev) = sub.undo.take() else {
            return false;
        };
        sub.next_seq = sub.next_seq.wrapping_sub(1);
        sub.ordered_last = prev;
        if self.next_id == id.wrapping_add(1) {
            self.next_id = id;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::decode_frame;

    fn headers(out: &[u8]) -> Vec<FrameHeader> {
        out.split(|&b| b == 0)
            .filter(|c| !c.is_empty())
            .map(|c| decode_frame(c, DEFAULT_MAX_PAYLOAD).unwrap().header)
            .collect()
    }

    #[test]
    fn ids_and_chains() {
        let mut f = Framer::new(FramerConfig {
            initial_id: u32::MAX - 1,
            max_payload: 8,
            ..FramerConfig::default()
        });
        let mut out = Vec::new();
        assert_eq!(f.frame(5, true, b"a", &mut out), Ok(u32::MAX - 1));
        assert_eq!(f.frame(6, false, b"b", &mut out), Ok(u32::MAX));
        assert_eq!(f.frame(5, true, b"c", &mut out), Ok(0));
        assert_eq!(f.frame(7, true, b"d", &mut out), Ok(1));
        assert_eq!(f.frame(5, true, b"e", &mut out), Ok(2));
        assert_eq!(f.next_id(), 3);
        let h = headers(&out);
        assert_eq!(h[0].ordered_prev, Some(u32::MAX - 1));
        assert_eq!(h[1].ordered_prev, None);
        assert_eq!(h[2].ordered_prev, Some(u32::MAX - 1));
        assert_eq!(h[3].ordered_prev, Some(1));
        assert_eq!(h[4].ordered_prev, Some(0));
        let seqs: Vec<Option<u32>> = h.iter().map(|h| h.substream_seq).collect();
        assert_eq!(seqs, [Some(0), Some(0), Some(1), Some(0), Some(2)]);
        assert_eq!(f.next_substream_seq(5), 3);
        assert_eq!(f.next_substream_seq(8), 0);
        assert_eq!(
            f.frame(5, true, &[1; 9], &mut out),
            Err(SendError::TooLarge { len: 9, max: 8 })
        );
        assert_eq!(f.next_id(), 3, "a refused message consumes no id");
        assert_eq!(f.next_substream_seq(5), 3, "nor a sequence number");
    }

    #[test]
    fn caller_ids_and_retract() {
        let mut f = Framer::default();
        let mut out = Vec::new();
        f.frame_id(10, 3, true, b"a", &mut out).unwrap();
        f.frame_id(11, 3, true, b"b", &mut out).unwrap();
        assert!(f.retract(3, 11));
        assert!(!f.retract(3, 11), "only the last frame");
        assert_eq!(f.next_substream_seq(3), 1);
        out.clear();
        f.frame_id(12, 3, true, b"b", &mut out).unwrap();
        let h = headers(&out);
        assert_eq!(h[0].substream_seq, Some(1), "no gap after a retraction");
        assert_eq!(
            h[0].ordered_prev,
            Some(10),
            "the chain skips the retracted id"
        );
        assert_eq!(f.next_id(), 13);
        assert!(!f.retract(9, 0));
    }

    #[test]
    fn without_seq_field() {
        let mut f = Framer::new(FramerConfig {
            substream_seq: false,
            ..FramerConfig::default()
        });
        let mut out = Vec::new();
        f.frame(1, false, b"hi", &mut out).unwrap();
        f.frame(1, true, b"hi", &mut out).unwrap();
        let h = headers(&out);
        assert_eq!(h[0], FrameHeader::unordered(1, 0));
        assert_eq!((h[1].substream_seq, h[1].ordered_prev), (None, Some(1)));
        assert_eq!(h[1].len(), crate::frame::ORDERED_HEADER_LEN);
    }
}
