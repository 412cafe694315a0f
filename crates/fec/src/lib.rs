//! Forward error correction on the message layer (issue 34; thesis §8.3.3
//! names multipath and FEC as future work for the deadline-aware model).
//!
//! Retransmission cannot help a message whose lifetime is shorter than a
//! round trip plus a one-way delay: the repair arrives after the deadline.
//! This crate lets a sender compute Reed-Solomon repair symbols over a
//! block of consecutive messages and send them as messages of their own
//! (on the reserved sub-stream [`FEC_SUBSTREAM`], each with the block's
//! lifetime), so a receiver rebuilds a missing message from any `k` of the
//! block's `k + m` symbols, before its deadline, without a round trip.
//!
//! **Crate promise:** sans-IO and deterministic. No sockets, no clock, no
//! threads, no randomness: time is a `now_ns: u64` argument. Peer input
//! never panics: malformed FEC messages are counted and dropped. It knows
//! nothing of transports: `hollywood-transport`'s `FecTransport` puts it
//! under any message transport (TCP Hollywood, QUIC, UDP).
//!
//! Pieces (framing byte for byte in `docs/PROTOCOL.md`, design in
//! `docs/FEC.md`):
//! - [`wire`]: the message ids the layer uses, the REPAIR and REPORT
//!   messages (parse / emit);
//! - [`codec`]: source symbols and the erasure code (`reed-solomon-simd`,
//!   systematic Reed-Solomon over GF(2^16): any `k` of `k + m` rebuild);
//! - [`policy`]: which messages need FEC (lifetime vs round trip), how many
//!   repair symbols a block gets (measured loss rate and burst length, a
//!   Gilbert model, bounded by the configured overhead);
//! - [`Encoder`] (sender: blocks, repair messages) and [`Decoder`]
//!   (receiver: rebuilds, de-duplication, loss measurement for REPORTs).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
mod decoder;
mod encoder;
pub mod policy;
pub mod wire;

pub use decoder::{Decoder, DecoderStats, Rebuilt};
pub use encoder::{Encoder, EncoderStats, RepairOut};
pub use policy::{FecConfig, LossEstimate, LossMeter};
pub use wire::{app_id, wire_id, Repair, Report, WireError, FEC_SUBSTREAM};
