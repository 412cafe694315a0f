//! Applications that run over Hollywood transports in the simulator.
//!
//! - [`messages`]: a timed message stream (sender + receiver) written
//!   against `hollywood_transport::MessageTransport`, with per-message
//!   records: it runs over TCP and the four TCP Hollywood deployments
//!   ([`Transport`], thesis §4.4), the QUIC mappings and QUICsilver, and UDP.
//! - [`generic`]: every transport by name ([`GenericTransport`]) and what a
//!   run measured (the oracle's view of the wire, the report).
//! - [`scenario`]: the sender/receiver over a bottleneck with loss and an
//!   optional middlebox, with everything recorded per message.
//! - [`voip`]: the thesis's simulated VoIP application (§5.1.2): fixed
//!   playout schedule, per-message buffered time, transport delay and
//!   outcome, over the four deployments and plain UDP.
//! - [`vod`]: the [TCP-video] video on demand: the whole video handed over at
//!   the start, frame deadlines from an initiation latency.
//! - [`dash_bounds`]: thesis chapter 6's equations 6.1–6.19, the playout
//!   buffer each DASH architecture needs.
//! - [`audit`]: what the sender put on the wire — sequence holes,
//!   retransmissions whose length differs from the original, inconsistent
//!   retransmissions — read from the simulator's packet trace, independent of
//!   the engine's own counters.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod analysis;
pub mod audit;
pub mod dash;
pub mod dash_bounds;
pub mod generic;
pub mod messages;
pub mod ontime;
pub mod rng;
pub mod scenario;
pub mod video;
pub mod vod;
pub mod voip;

pub use analysis::{MediaTiming, Region, Utility};
pub use audit::{WireAudit, WireAuditReport};
pub use generic::{GenericStats, GenericTransport};
pub use hollywood_transport::{QuicKind, TransportKind};
pub use messages::{
    payload_for, MessageReceiver, MessageSender, SenderConfig, SenderRecord, Transport,
};
pub use ontime::{oracle_in_time, OnTime, Timeliness};
pub use scenario::{CrossTraffic, MessagesRun, MessagesScenario};
pub use voip::{
    DelayPercentiles, Outcome, VoipError, VoipRecord, VoipRun, VoipScenario, VoipSummary,
};
