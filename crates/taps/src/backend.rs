//! The three candidates behind one pair of traits: a sending half and a
//! receiving half, each driven by a task of the [`Connection`]
//! (crate::Connection).

use hollywood_io::engine::{StreamReceiver, StreamSender};
use hollywood_io::kernel::{KernelReceiver, KernelSender};
use hollywood_io::message::{ReceivedMessage, SendMessage, StreamError};
use std::future::Future;
use std::time::Duration;

/// Reports of messages a protocol gave up on after it took them, kept for
/// the connection's task at most.
pub(crate) const ABANDONED_LIMIT: usize = 4096;

/// A message for a protocol: what every candidate understands.
#[derive(Debug, Clone)]
pub(crate) struct SendOut {
    pub payload: Vec<u8>,
    pub substream: u16,
    pub ordered: bool,
    /// What is left of the lifetime (None: reliable).
    pub lifetime: Option<Duration>,
    /// The protocol's id of the dependency.
    pub depends_on: Option<u32>,
    /// Transport priority, higher first (QUIC streams, the TCP Hollywood
    /// engine's message queue, the kernel sender's queue).
    pub priority: i8,
}

impl SendOut {
    fn message(self) -> SendMessage {
        SendMessage {
            payload: self.payload,
            substream: self.substream,
            ordered: self.ordered,
            lifetime: self.lifetime,
            depends_on: self.depends_on,
            priority: self.priority,
        }
    }
}

/// A message the protocol took and later gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Abandoned {
    pub wire_id: u32,
    pub reason: String,
}

/// A connection's sending direction.
pub(crate) trait SendHalf: Send + 'static {
    /// Hand `m` to the protocol (waits while its queue is full); the
    /// protocol's id of the message.
    fn send(&mut self, m: SendOut) -> impl Future<Output = Result<u32, StreamError>> + Send;
    /// Close the sending direction after everything handed over.
    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send;
    /// Messages the protocol gave up on since the last call.
    fn take_abandoned(&mut self) -> Vec<Abandoned>;
    /// Let the peer have as many messages in flight toward us as the
    /// protocol allows, where the listener started it lower
    /// ([`Preconnection::with_listen_receive_credit`](crate::Preconnection::with_listen_receive_credit));
    /// QUIC only.
    fn raise_receive_credit(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// A connection's receiving direction.
pub(crate) trait RecvHalf: Send + 'static {
    /// The next message; `None` once the peer closed.
    fn recv(&mut self)
        -> impl Future<Output = Result<Option<ReceivedMessage>, StreamError>> + Send;
}

fn abandoned(e: Vec<hollywood_tcp::ExpiredMessage>) -> Vec<Abandoned> {
    e.into_iter()
        .map(|e| Abandoned {
            wire_id: e.id,
            reason: format!("{:?}", e.reason),
        })
        .collect()
}

impl SendHalf for StreamSender {
    fn send(&mut self, m: SendOut) -> impl Future<Output = Result<u32, StreamError>> + Send {
        self.send_message(m.message())
    }
    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send {
        StreamSender::close(self)
    }
    fn take_abandoned(&mut self) -> Vec<Abandoned> {
        abandoned(self.take_expired())
    }
}

impl RecvHalf for StreamReceiver {
    fn recv(
        &mut self,
    ) -> impl Future<Output = Result<Option<ReceivedMessage>, StreamError>> + Send {
        self.recv_message()
    }
}

impl SendHalf for KernelSender {
    fn send(&mut self, m: SendOut) -> impl Future<Output = Result<u32, StreamError>> + Send {
        self.send_message(m.message())
    }
    fn close(&mut self) -> impl Future<Output = Result<(), StreamError>> + Send {
        KernelSender::close(self)
    }
    fn take_abandoned(&mut self) -> Vec<Abandoned> {
        abandoned(self.take_expired())
    }
}

impl RecvHalf for KernelReceiver {
    fn recv(
        &mut self,
    ) -> impl Future<Output = Result<Option<ReceivedMessage>, StreamError>> + Send {
        self.recv_message()
    }
}
