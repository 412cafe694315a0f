//! The TCP Hollywood intermediary layer (thesis §4.2–4.3): messages over any
//! byte stream.
//!
//! **Crate promise:** sans-IO and deterministic. No sockets, no clock, no
//! threads, no randomness; time is a `now_ns: u64` argument. Peer input
//! never panics: malformed bytes are counted and dropped. Independent of the
//! TCP engine: runs over a kernel TCP socket's ordered byte stream
//! ([`Deframer::push_stream`], thesis §4.4) or over out-of-order segment
//! delivery with sequence numbers ([`Deframer::push_segment`], thesis §4.3).
//!
//! Pieces (wire format byte-for-byte in `docs/PROTOCOL.md`):
//! - [`cobs`]: Consistent Overhead Byte Stuffing, the escape code that frees
//!   the zero byte for use as a frame marker (thesis §4.2);
//! - [`frame`]: `00 || COBS(header || payload || CRC32C) || 00`, with
//!   sub-stream, message id and, for ordered sub-streams, the predecessor's
//!   id (thesis §4.2, §8.3.1, §8.3.2);
//! - [`Framer`]: the sender side, assigns ids;
//! - [`Deframer`]: the receiver side: frames found as segments arrive (no
//!   head-of-line blocking), sparse reassembly of split frames, newer bytes
//!   win over older ones, CRC32C rejects spliced frames, exactly-once
//!   delivery (a delivered id is remembered while a copy of its frame can
//!   still arrive, bounded by stream position, never refused for being far
//!   from other ids), ordered sub-streams released in chain order, bounded
//!   memory.
//!
//! Padding: a sender that must fill a retransmission up to the original
//! length (thesis §4.2) writes zero bytes; the receiver skips any number of
//! zeros between frames.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cobs;
mod dedup;
pub mod deframer;
pub mod forge;
pub mod frame;
pub mod framer;
mod ordered;

pub use deframer::{Deframer, DeframerConfig, DeframerStats, Message, SubstreamStats};
pub use frame::{decode_frame, decode_frame_into, encode_frame, Frame, FrameError, FrameHeader};
pub use framer::{Framer, FramerConfig, SendError};
