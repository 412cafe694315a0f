//! Applications that run over Hollywood transports in the simulator.
//!
//! - [`stream`]: a timed message stream (sender + receiver) written
//!   against `hollywood_transport::MessageTransport`, with per-message
//!   records: it runs over TCP and the four TCP Hollywood deployments
//!   ([`Transport`], thesis §4.4), the QUIC mappings and QUICsilver, and UDP.
//! - [`transport`]: every transport by name ([`GenericTransport`]) and the
//!   hosts that run the stream over it.
//! - [`scenario`]: the sender/receiver over a bottleneck with loss and an
//!   optional middlebox, with everything recorded per message; beside it
//!   what a run is judged by: the packet→message oracle
//!   ([`scenario::oracle`]), the on-time oracle ([`scenario::ontime`]), the
//!   wire audit ([`scenario::audit`]: what the sender put on the wire —
//!   sequence holes, retransmissions whose length differs from the original,
//!   inconsistent retransmissions — read from the simulator's packet trace,
//!   independent of the engine's own counters) and the thesis's equations
//!   ([`scenario::models`]: chapter 5's model, chapter 6's equations
//!   6.1–6.19, the playout buffer each DASH architecture needs).
//! - [`voip`]: the thesis's simulated VoIP application (§5.1.2): fixed
//!   playout schedule, per-message buffered time, transport delay and
//!   outcome, over the four deployments and plain UDP.
//! - [`video`]: live video over the message stream.
//! - [`vod`]: the [TCP-video] video on demand: the whole video handed over at
//!   the start, frame deadlines from an initiation latency.
//! - [`dash`]: MPEG-DASH: client, server, ABR, HTTP/1.1 and HTTP/2, content,
//!   and thesis chapter 6's progressive streaming ([`dash::progressive`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod dash;
pub mod multipath;
pub mod rng;
pub mod scenario;
pub mod stream;
pub mod transport;
pub mod video;
pub mod vod;
pub mod voip;

pub use hollywood_transport::{QuicKind, TransportKind};
pub use scenario::audit::{WireAudit, WireAuditReport};
pub use scenario::models::ch5::{MediaTiming, Region, Utility};
pub use scenario::ontime::{oracle_in_time, OnTime, Timeliness};
pub use scenario::stats::{percentile, Percentiles};
pub use scenario::{CrossTraffic, MessagesRun, MessagesScenario};
pub use stream::{
    payload_for, MessageReceiver, MessageSender, SenderConfig, SenderRecord, Transport,
};
pub use transport::{GenericStats, GenericTransport};
pub use voip::{Outcome, VoipError, VoipRecord, VoipRun, VoipScenario, VoipSummary};
