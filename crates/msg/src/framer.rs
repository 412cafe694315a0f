//! Sender side of the intermediary layer (thesis §4.2): assigns message ids,
//! tracks ordered sub-stream chains, and frames messages.

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
}

impl Default for FramerConfig {
    fn default() -> Self {
        FramerConfig {
            initial_id: 0,
            max_payload: DEFAULT_MAX_PAYLOAD,
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
/// at 2^32. For an ordered sub-stream the framer remembers the last id it
/// used there and writes it into the next message's header (thesis §8.3.2).
#[derive(Debug, Clone)]
pub struct Framer {
    next_id: u32,
    max_payload: usize,
    /// Last id sent on each ordered sub-stream.
    ordered_last: BTreeMap<u16, u32>,
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
            ordered_last: BTreeMap::new(),
        }
    }

    /// The id the next message will get.
    #[must_use]
    pub fn next_id(&self) -> u32 {
        self.next_id
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
        if payload.len() > self.max_payload {
            return Err(SendError::TooLarge {
                len: payload.len(),
                max: self.max_payload,
            });
        }
        let id = self.next_id;
        let ordered_prev = if ordered {
            // The first ordered message of a sub-stream points at itself.
            Some(self.ordered_last.insert(substream, id).unwrap_or(id))
        } else {
            None
        };
        encode_frame(
            &FrameHeader {
                substream,
                id,
                ordered_prev,
            },
            payload,
            out,
        );
        self.next_id = id.wrapping_add(1);
        Ok(id)
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
        assert_eq!(
            f.frame(5, true, &[1; 9], &mut out),
            Err(SendError::TooLarge { len: 9, max: 8 })
        );
        assert_eq!(f.next_id(), 3, "a refused message consumes no id");
    }
}
