//! An async socket-like API over the engine on a TUN device: [`Stack`],
//! [`Listener`], [`Stream`].
//!
//! [`Stack::spawn`] moves a [`TunHost`](crate::TunHost) into a tokio task
//! that runs [`TunHost::drive`](crate::TunHost::drive) until
//! [`Stack::shutdown`] (or until every handle is gone); the [`Stack`]
//! handle (cheap to clone) sends it commands over a channel and wakes it
//! with a [`HostWaker`](crate::HostWaker). Each
//! connection's application side ([`Stream`], or its halves
//! [`StreamSender`] / [`StreamReceiver`]) shares a small mutex-protected
//! state with the task: a bounded send queue in front of the engine and
//! bounded receive queues behind it. The task moves data between those
//! queues and the engine on every step, so the engine (sans-IO) still only
//! sees the host's clock and never an application thread.
//!
//! A stream direction is used in one of two modes, fixed by its first use:
//!
//! - **byte stream**: [`Stream::write_all`] / [`Stream::read`] or the
//!   `tokio::io::{AsyncRead, AsyncWrite}` impls, exactly TCP;
//! - **messages** (thesis §7.2): [`Stream::send_message`] /
//!   [`Stream::recv_message`] through the intermediary layer
//!   (`hollywood_msg`, `docs/PROTOCOL.md`). The sender frames each message
//!   and queues it with `Connection::send_message` and its metadata
//!   (lifetime, dependency, `replaceable = !ordered`, thesis §4.2), so with
//!   `Config.hollywood.inconsistent_retransmissions` the engine may replace
//!   expired messages on retransmission ([`StreamSender::take_expired`]
//!   reports them). The receiver deframes the in-order stream, or, with
//!   `Config.hollywood.out_of_order_delivery`, every segment as it arrives
//!   (`Connection::recv_segment`, thesis §4.3: no head-of-line blocking).
//!   Either end may be a kernel socket instead ([`crate::kernel`], thesis
//!   §4.4).
//!
//! Backpressure: `send_message` and `write_all` wait while the stream's
//! send queue ([`StackOptions::send_queue`]) is full; the queue drains
//! into the engine's send buffer as it frees space (`Event::Writable`).
//! Receiving stops pulling from the engine while the receive queue
//! ([`StackOptions::recv_queue`]) is full, so the engine's advertised window
//! shrinks as in any TCP (once the peer's FIN has arrived the rest is
//! pulled regardless, bounded by the engine's receive buffer, so that no
//! data is dropped with the connection).
//!
//! Errors are typed ([`StreamError`](crate::StreamError)): a refused
//! connect is `ConnectionRefused`, a connect that does not complete within
//! [`StackOptions::connect_timeout`] is `ConnectTimeout`, a reset is
//! `Reset`, exhausted retransmissions `TimedOut`; data already received is
//! still returned before the error. Nothing waits for ever on a dead
//! connection or a stopped stack.
//!
//! ```no_run
//! # async fn demo(tun: hollywood_io::TunDevice) -> Result<(), Box<dyn std::error::Error>> {
//! use hollywood_io::message::{MessageStream, SendMessage};
//! use hollywood_io::engine::Stack;
//! use std::time::Duration;
//!
//! let config = hollywood_tcp::Config::hollywood(true, true);
//! let stack = Stack::spawn(tun, config)?;
//! let local = "10.77.1.2:0".parse()?;
//! let mut stream = stack.connect(local, "10.77.2.2:5000".parse()?, None).await?;
//! let id = stream
//!     .send_message(SendMessage::new(&b"hello"[..]).lifetime(Duration::from_millis(150)))
//!     .await?;
//! while let Some(m) = stream.recv_message().await? {
//!     println!("message {} on sub-stream {}: {} bytes", m.id, m.substream, m.payload.len());
//! }
//! stream.close().await?;
//! let report = stack.shutdown().await?;
//! println!("sent message {id}; host: {:?}", report.host);
//! # Ok(()) }
//! ```

mod driver;
mod listener;
mod recv_half;
mod send_half;
mod shared;
mod stack;
mod stream;

pub use listener::Listener;
pub use recv_half::StreamReceiver;
pub use send_half::StreamSender;
pub use stack::{ShutdownReport, Stack, StackOptions, StackStats};
pub use stream::{Stream, StreamStats};
