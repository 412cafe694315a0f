//! Applications that run over Hollywood transports in the simulator.
//!
//! - [`messages`]: a timed message stream (sender + receiver) over any of the
//!   four TCP Hollywood deployments ([`Transport`], thesis §4.4), with the
//!   intermediary layer (`hollywood-msg`) on both sides and per-message
//!   records.
//! - [`scenario`]: the sender/receiver over a bottleneck with loss and an
//!   optional middlebox, with everything recorded per message.
//! - [`audit`]: what the sender put on the wire — sequence holes,
//!   retransmissions whose length differs from the original, inconsistent
//!   retransmissions — read from the simulator's packet trace, independent of
//!   the engine's own counters.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod messages;
pub mod scenario;

pub use audit::{WireAudit, WireAuditReport};
pub use messages::{
    payload_for, MessageReceiver, MessageSender, ReceiverRecord, SenderConfig, SenderRecord,
    Transport,
};
pub use scenario::{MessagesRun, MessagesScenario};
