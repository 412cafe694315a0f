//! The API applications program against: Transport Services (RFC 9622)
//! over three protocols, raced as RFC 9623 §4 describes.
//!
//! An application says what it needs — messages, lifetimes, order or not,
//! sub-streams, dependencies (thesis ch. 7, Table 7.2) — in a
//! [`Preconnection`], and [`Preconnection::initiate`] picks a protocol
//! that works on the path:
//!
//! - [`Protocol::Quic`]: QUIC over UDP (quinn-proto), a stream per
//!   message with QUICsilver's deadlines, or one stream when order is
//!   required;
//! - [`Protocol::TcpHollywood`]: TCP Hollywood on our engine (thesis
//!   ch. 4), for a process that has a TUN device ([`Engine`]);
//! - [`Protocol::KernelTcp`]: the Hollywood message layer over the
//!   kernel's TCP (thesis §4.4), which works wherever TCP does.
//!
//! They are started 250 ms apart in that order (or at once when the one
//! before fails); the first to complete its handshake wins and the others
//! are aborted. A [`Listener`] accepts all three at once.
//!
//! ```
//! use hollywood_taps::{
//!     Event, LocalEndpoint, MessageContext, Preconnection, RemoteEndpoint, SecurityParameters,
//!     TransportProperties,
//! };
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hollywood_taps::Error> {
//! // A server on loopback: it listens on QUIC and kernel TCP at once.
//! let mut listener = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
//!     .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
//!     .listen()
//!     .await?;
//! let at = listener.local_addrs()[0].1;
//! tokio::spawn(async move {
//!     let mut c = listener.accept().await.unwrap();
//!     while let Ok(Some(m)) = c.receive().await {
//!         println!("server: {} bytes on sub-stream {}", m.data.len(), m.substream);
//!     }
//!     c.close().await.unwrap();
//! });
//!
//! // The caller: racing picks a protocol that works on the path.
//! let mut conn = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
//!     .with_remote(RemoteEndpoint::from_addr(at))
//!     .initiate()
//!     .await?;
//! println!("connected over {}", conn.protocol());
//! // A 20 ms voice frame, useless 150 ms from now (ITU-T G.114).
//! let frame = vec![0u8; 160];
//! conn.send(frame, MessageContext::lifetime(Duration::from_millis(150))).await?;
//! conn.close().await?;
//! while let Some(event) = conn.next_event().await {
//!     match event {
//!         Event::Sent { msg, .. } => println!("message {} handed to {}", msg.0, conn.protocol()),
//!         Event::Expired { msg } => println!("message {} was too late to send", msg.0),
//!         Event::Closed => break,
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! More: `cargo run -p hollywood-taps --example voice` (a call with
//! on-time counts) and `--example video_relay` (what `hollywood transmit`
//! does).
#![deny(unsafe_code)]
#![warn(missing_docs)]
// An adapter layer: real time and tasks are its job.
#![allow(clippy::disallowed_methods)]

mod backend;
pub mod connection;
pub mod preconnection;
pub mod properties;
pub mod pubsub;
pub mod quic;
pub mod relay;
pub mod reorder;
mod sockets;
pub mod uri;

pub use connection::{
    Connection, ConnectionStats, Event, EventSignal, Message, MessageRef, RecvHalf, SendHalf,
};
pub use hollywood_tcp::CcAlgorithm;
pub use hollywood_transport::secure::{Identity, SERVER_NAME};
pub use preconnection::{Engine, Listener, LocalEndpoint, Preconnection, RemoteEndpoint};
pub use properties::{
    MessageContext, Preference, Protocol, SecurityParameters, TransportProperties,
};

/// What can go wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The properties leave no protocol to try.
    #[error("{0}")]
    NoCandidate(String),
    /// A bad or unresolvable endpoint.
    #[error("endpoint: {0}")]
    Endpoint(String),
    /// No candidate could be established; each one's reason.
    #[error("no connection could be established: {0}")]
    Establishment(String),
    /// Security parameters that cannot be used.
    #[error("security: {0}")]
    Security(String),
    /// A message the connection cannot send as asked.
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// The connection failed.
    #[error("connection: {0}")]
    Connection(String),
    /// The connection is closed.
    #[error("the connection is closed")]
    Closed,
}
