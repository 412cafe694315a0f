//! A connection (RFC 9622 §8-§10): `send` with a message context,
//! `receive`, and the events of each message and of the connection.
//!
//! Two tasks serve a connection: one hands queued messages to the
//! protocol, one takes received messages from it. Both are bounded:
//! [`SEND_QUEUE_BYTES`] of messages wait in front of the protocol (then
//! `send` waits), [`RECEIVE_QUEUE_BYTES`] of received messages wait for
//! the application (then the protocol stops reading and its flow control
//! closes), and at most [`EVENT_LIMIT`] unread send events are kept.
//!
//! [`Connection::split`] parts a connection into a [`SendHalf`] and a
//! [`RecvHalf`], so that one task (or thread) waits in `receive` while
//! another sends.

use crate::backend::{RecvHalf as ProtocolRecv, SendHalf as ProtocolSend, SendOut};
use crate::properties::{MessageContext, Protocol, TransportProperties};
use crate::{Error, Preference};
use hollywood_io::message::StreamError;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Bytes of messages queued in front of the protocol before `send` waits.
/// A message larger than this waits for an empty queue.
pub const SEND_QUEUE_BYTES: usize = 1 << 20;
/// Bytes of received messages waiting for the application before the
/// connection stops taking more from the protocol.
pub const RECEIVE_QUEUE_BYTES: usize = 4 << 20;
/// Unread send events (Sent, Expired, SendError, Abandoned) kept; beyond
/// it the oldest is dropped and counted in [`ConnectionStats::events_dropped`].
pub const EVENT_LIMIT: usize = 65_536;
/// Messages whose protocol id a later `depends_on` can still name.
pub const DEPENDENCY_WINDOW: usize = 65_536;

/// A message handed to [`Connection::send`], named in its events and in
/// [`MessageContext::depends_on`]. Numbered 0, 1, 2, … per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageRef(pub u64);

/// A received message (RFC 9622 §9.3.2.1 `Received`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The payload, whole.
    pub data: Vec<u8>,
    /// The sub-stream it was sent on.
    pub substream: u16,
    /// The sender's protocol id (its `Sent` event's `wire_id`).
    pub wire_id: u32,
    /// When its last byte reached this host's protocol.
    pub arrival: Instant,
}

/// What happens on a connection (RFC 9622 §8.3, §9.2.2, §9.3.2, §10).
///
/// `Ready` and `EstablishmentError` are the outcome of
/// [`Preconnection::initiate`](crate::Preconnection::initiate) (Ok or
/// Err) and `ConnectionReceived` that of
/// [`Listener::accept`](crate::Listener::accept), as futures do in Rust.
/// `ReceivedPartial` never happens: every candidate delivers whole
/// messages (at most 1 MiB each).
///
/// Every message `send` accepted gets exactly one of `Sent`, `Expired` or
/// `SendError`. `Sent` means the protocol took it (RFC 9622 §9.2.2.1);
/// after that, a message with a lifetime may still be given up by the
/// protocol (`Abandoned`, a Hollywood extension: replaced by an
/// inconsistent retransmission, thesis §4.2, or its QUIC stream reset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A message arrived.
    Received(Message),
    /// The protocol took the message.
    Sent {
        /// The message.
        msg: MessageRef,
        /// The protocol's id for it (the receiver's [`Message::wire_id`]).
        wire_id: u32,
    },
    /// Its lifetime ended before the protocol took it (or the message it
    /// depends on expired first, which makes it useless, thesis §4.2).
    Expired {
        /// The message.
        msg: MessageRef,
    },
    /// It could not be sent.
    SendError {
        /// The message.
        msg: MessageRef,
        /// Why.
        error: String,
    },
    /// Hollywood extension: after `Sent`, the protocol gave up on the
    /// message at its lifetime.
    Abandoned {
        /// The message.
        msg: MessageRef,
        /// What the protocol did (e.g. `Replaced { by: Some(7) }`).
        reason: String,
    },
    /// The peer closed: everything it sent has been delivered.
    Closed,
    /// The connection failed.
    ConnectionError(String),
}

/// Counters of a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Messages `send` accepted.
    pub queued: u64,
    /// `Sent` events.
    pub sent: u64,
    /// `Expired` events.
    pub expired: u64,
    /// `SendError` events.
    pub send_errors: u64,
    /// `Abandoned` events.
    pub abandoned: u64,
    /// Messages received.
    pub received: u64,
    /// Send events dropped unread ([`EVENT_LIMIT`]).
    pub events_dropped: u64,
}

/// Counters of several connections summed (e.g. one that ended and the
/// next one).
impl std::ops::AddAssign for ConnectionStats {
    fn add_assign(&mut self, o: ConnectionStats) {
        self.queued += o.queued;
        self.sent += o.sent;
        self.expired += o.expired;
        self.send_errors += o.send_errors;
        self.abandoned += o.abandoned;
        self.received += o.received;
        self.events_dropped += o.events_dropped;
    }
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    sent: AtomicU64,
    expired: AtomicU64,
    send_errors: AtomicU64,
    abandoned: AtomicU64,
    received: AtomicU64,
    events_dropped: AtomicU64,
}

/// Waits until a connection has a send event waiting
/// ([`SendHalf::event_signal`]).
#[derive(Clone)]
pub struct EventSignal(Arc<Events>);

impl EventSignal {
    /// Returns once a send event is waiting (cancel-safe; takes nothing).
    pub async fn waiting(&self) {
        self.0.waiting().await;
    }
}

impl std::fmt::Debug for EventSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventSignal")
    }
}

#[derive(Default)]
struct Events {
    queue: Mutex<VecDeque<Event>>,
    notify: Notify,
    counters: Counters,
}

impl Events {
    fn push(&self, e: Event) {
        let c = &self.counters;
        // Received messages are counted where they are taken from the
        // protocol; Closed and ConnectionError are not counted.
        let counter = match &e {
            Event::Sent { .. } => Some(&c.sent),
            Event::Expired { .. } => Some(&c.expired),
            Event::SendError { .. } => Some(&c.send_errors),
            Event::Abandoned { .. } => Some(&c.abandoned),
            Event::Received(_) | Event::Closed | Event::ConnectionError(_) => None,
        };
        if let Some(counter) = counter {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= EVENT_LIMIT {
            q.pop_front();
            c.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
        q.push_back(e);
        drop(q);
        self.notify.notify_one();
    }

    fn pop(&self) -> Option<Event> {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }

    /// Returns once an event is waiting (without taking it).
    async fn waiting(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self
                .queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
            {
                // Pass the permit on: another waiter (`next_event`) may
                // have been woken for this event.
                self.notify.notify_one();
                return;
            }
            notified.await;
        }
    }
}

enum Queued {
    Message {
        msg: MessageRef,
        out: SendOut,
        lifetime: Option<Duration>,
        wire_lifetime: bool,
        depends_on: Option<MessageRef>,
        queued_at: Instant,
        final_message: bool,
        _permit: OwnedSemaphorePermit,
    },
    Close(oneshot::Sender<Result<(), StreamError>>),
    /// [`SendHalf::raise_receive_credit`].
    RaiseCredit,
}

enum RxItem {
    Message(Message, #[allow(dead_code)] OwnedSemaphorePermit),
    End(Result<(), String>),
}

/// How a connection treats messages, fixed when it is established.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Semantics {
    /// `msgOrdered` when a message does not say.
    pub ordered_default: bool,
    /// The protocol can give up on a message on the wire.
    pub per_msg_reliability: bool,
    /// The protocol can order messages per message (not QUICsilver).
    pub can_order: bool,
}

impl Semantics {
    pub(crate) fn new(p: Protocol, props: &TransportProperties) -> Semantics {
        let order_required = props.preserve_order == Preference::Require;
        Semantics {
            ordered_default: order_required,
            per_msg_reliability: p != Protocol::KernelTcp
                && props.per_msg_reliability != Preference::Prohibit,
            // QUIC runs one ordered stream when order is required and a
            // stream per message otherwise (crate::quic::config).
            can_order: p != Protocol::Quic || order_required,
        }
    }
}

/// An established connection.
pub struct Connection {
    tx: SendHalf,
    rx: RecvHalf,
    tasks: [JoinHandle<()>; 2],
}

/// The sending half of a [`Connection`] ([`Connection::split`]): `send`,
/// `close` and the send events.
pub struct SendHalf {
    protocol: Protocol,
    peer: SocketAddr,
    sem: Semantics,
    queue: mpsc::Sender<Queued>,
    queue_bytes: Arc<Semaphore>,
    events: Arc<Events>,
    next: u64,
    final_sent: bool,
}

/// The receiving half of a [`Connection`] ([`Connection::split`]).
pub struct RecvHalf {
    protocol: Protocol,
    peer: SocketAddr,
    rx: mpsc::Receiver<RxItem>,
    rx_ended: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("protocol", &self.tx.protocol)
            .field("peer", &self.tx.peer)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SendHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendHalf")
            .field("protocol", &self.protocol)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for RecvHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvHalf")
            .field("protocol", &self.protocol)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn spawn<S: ProtocolSend, R: ProtocolRecv>(
        protocol: Protocol,
        peer: SocketAddr,
        sem: Semantics,
        tx: S,
        rx: R,
    ) -> Connection {
        let events = Arc::new(Events::default());
        let (q_tx, q_rx) = mpsc::channel(1024);
        let (r_tx, r_rx) = mpsc::channel(1024);
        let rx_bytes = Arc::new(Semaphore::new(RECEIVE_QUEUE_BYTES));
        let sender = tokio::spawn(send_task(tx, q_rx, events.clone()));
        let receiver = tokio::spawn(recv_task(rx, r_tx, rx_bytes, events.clone()));
        Connection {
            tx: SendHalf {
                protocol,
                peer,
                sem,
                queue: q_tx,
                queue_bytes: Arc::new(Semaphore::new(SEND_QUEUE_BYTES)),
                events,
                next: 0,
                final_sent: false,
            },
            rx: RecvHalf {
                protocol,
                peer,
                rx: r_rx,
                rx_ended: false,
            },
            tasks: [sender, receiver],
        }
    }

    /// Part the connection into its sending and receiving halves, to be
    /// used by different tasks or threads at once (e.g. one waiting in
    /// [`RecvHalf::receive`] while another calls [`SendHalf::send`]).
    /// The connection lives while either half does: dropping the
    /// [`SendHalf`] closes the sending direction after what is queued,
    /// as dropping a `Connection` does. [`Connection::next_event`] and
    /// [`Connection::abort`] have no counterpart on the halves.
    pub fn split(self) -> (SendHalf, RecvHalf) {
        (self.tx, self.rx)
    }

    /// The protocol that won the race (or accepted the connection).
    pub fn protocol(&self) -> Protocol {
        self.tx.protocol
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.tx.peer
    }

    /// Send a message: [`SendHalf::send`].
    pub async fn send(
        &mut self,
        data: impl Into<Vec<u8>>,
        ctx: MessageContext,
    ) -> Result<MessageRef, Error> {
        self.tx.send(data, ctx).await
    }

    /// The next received message (RFC 9622 §9.3): [`RecvHalf::receive`].
    /// Send events stay for [`Connection::next_event`].
    pub async fn receive(&mut self) -> Result<Option<Message>, Error> {
        self.rx.receive().await
    }

    /// The next event of any kind, received messages included; `None` once
    /// the connection has ended and every event was taken.
    pub async fn next_event(&mut self) -> Option<Event> {
        loop {
            let notified = self.tx.events.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(e) = self.tx.events.pop() {
                return Some(e);
            }
            if self.rx.rx_ended && self.tasks[0].is_finished() {
                return None;
            }
            tokio::select! {
                () = &mut notified => {}
                item = self.rx.rx.recv(), if !self.rx.rx_ended => match item {
                    Some(RxItem::Message(m, _permit)) => return Some(Event::Received(m)),
                    Some(RxItem::End(Ok(()))) | None => {
                        self.rx.rx_ended = true;
                        return Some(Event::Closed);
                    }
                    Some(RxItem::End(Err(e))) => {
                        self.rx.rx_ended = true;
                        return Some(Event::ConnectionError(e));
                    }
                },
                // The send task ending leaves no notification behind.
                () = tokio::time::sleep(Duration::from_millis(100)), if self.rx.rx_ended => {}
            }
        }
    }

    /// A send event already waiting, without waiting.
    pub fn try_event(&mut self) -> Option<Event> {
        self.tx.try_event()
    }

    /// Waits until a send event is waiting: [`SendHalf::event_signal`].
    pub fn event_signal(&self) -> EventSignal {
        self.tx.event_signal()
    }

    /// Close the sending direction: [`SendHalf::close`].
    pub async fn close(&mut self) -> Result<(), Error> {
        self.tx.close().await
    }

    /// Let the peer send at full rate: [`SendHalf::raise_receive_credit`].
    pub async fn raise_receive_credit(&mut self) -> Result<(), Error> {
        self.tx.raise_receive_credit().await
    }

    /// Tear the connection down now (RFC 9622 §10 `Abort`): queued
    /// messages are discarded and the protocol state dropped.
    pub fn abort(self) {
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Counters.
    pub fn stats(&self) -> ConnectionStats {
        self.tx.stats()
    }
}

impl SendHalf {
    /// The protocol of the connection.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Send a message (RFC 9622 §9.2). Waits only while
    /// [`SEND_QUEUE_BYTES`] are queued; the outcome arrives as exactly one
    /// of [`Event::Sent`], [`Event::Expired`] or [`Event::SendError`].
    /// A context the connection cannot honour is refused here, with no
    /// event: an empty message, `msgReliable = false` without a lifetime or
    /// on a connection without per-message reliability, `msgOrdered` on a
    /// QUIC connection opened without `preserveOrder = Require` (its
    /// streams per message do not order), a dependency on a message not
    /// sent yet, or anything after a `final` message.
    pub async fn send(
        &mut self,
        data: impl Into<Vec<u8>>,
        ctx: MessageContext,
    ) -> Result<MessageRef, Error> {
        // A lifetime counts from this call, not from when the queue had
        // room for the message (below): waiting for room spends it too.
        let called = Instant::now();
        let payload = data.into();
        if payload.is_empty() {
            return Err(Error::InvalidMessage("an empty message".into()));
        }
        if payload.len() > hollywood_transport::MAX_MESSAGE {
            return Err(Error::InvalidMessage(format!(
                "{} bytes is more than the largest message, {} bytes",
                payload.len(),
                hollywood_transport::MAX_MESSAGE
            )));
        }
        if ctx.substream == crate::quic::END_SUBSTREAM {
            return Err(Error::InvalidMessage(format!(
                "sub-stream {:#x} is reserved (end marker, secure handshake)",
                crate::quic::END_SUBSTREAM
            )));
        }
        if self.final_sent {
            return Err(Error::InvalidMessage(
                "the final message was already sent".into(),
            ));
        }
        let ordered = ctx.ordered.unwrap_or(self.sem.ordered_default);
        if ordered && !self.sem.can_order {
            return Err(Error::InvalidMessage(
                "msgOrdered on a QUIC connection opened without preserveOrder = Require \
                 (a stream per message does not order)"
                    .into(),
            ));
        }
        let reliable = match ctx.reliable {
            Some(false) if ctx.lifetime.is_none() => {
                return Err(Error::InvalidMessage(
                    "msgReliable = false needs a msgLifetime (the protocol gives a message up at its deadline, thesis §4.2)".into(),
                ))
            }
            Some(false) if !self.sem.per_msg_reliability => {
                return Err(Error::InvalidMessage(format!(
                    "msgReliable = false on a {} connection without per-message reliability",
                    self.protocol
                )))
            }
            Some(r) => r,
            None => !self.sem.per_msg_reliability || ctx.lifetime.is_none(),
        };
        if let Some(d) = ctx.depends_on {
            if d.0 >= self.next {
                return Err(Error::InvalidMessage(format!(
                    "depends on message {} which is not sent yet",
                    d.0
                )));
            }
        }
        let want = payload.len().min(SEND_QUEUE_BYTES) as u32;
        let permit = self
            .queue_bytes
            .clone()
            .acquire_many_owned(want)
            .await
            .map_err(|_| Error::Closed)?;
        let msg = MessageRef(self.next);
        let priority = ctx.priority.unwrap_or(100);
        let item = Queued::Message {
            msg,
            out: SendOut {
                payload,
                substream: ctx.substream,
                ordered,
                lifetime: None,
                depends_on: None,
                priority: (100 - i64::from(priority)).clamp(-128, 127) as i8,
            },
            lifetime: ctx.lifetime,
            // A kernel sender applies a lifetime only until the message's
            // first byte is written (thesis §4.4), which is what a reliable
            // message's lifetime means anywhere.
            wire_lifetime: !reliable || self.protocol == Protocol::KernelTcp,
            depends_on: ctx.depends_on,
            queued_at: called,
            final_message: ctx.final_message,
            _permit: permit,
        };
        self.queue.send(item).await.map_err(|_| Error::Closed)?;
        self.next += 1;
        self.final_sent = ctx.final_message;
        self.events.counters.queued.fetch_add(1, Ordering::Relaxed);
        Ok(msg)
    }

    /// A send event already waiting (Sent, Expired, SendError,
    /// Abandoned), without waiting.
    pub fn try_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// A handle that waits until a send event is waiting for
    /// [`SendHalf::try_event`]: a sender that keeps a window of messages
    /// in flight waits on it instead of polling, while it also receives.
    pub fn event_signal(&self) -> EventSignal {
        EventSignal(self.events.clone())
    }

    /// Let the peer have as many messages in flight toward this end as
    /// the protocol allows, where the listener started it with fewer
    /// ([`Preconnection::with_listen_receive_credit`](crate::Preconnection::with_listen_receive_credit)):
    /// a relay raises it for a caller that publishes. It takes effect
    /// after the messages queued before it; nothing on protocols other
    /// than QUIC.
    pub async fn raise_receive_credit(&mut self) -> Result<(), Error> {
        self.queue
            .send(Queued::RaiseCredit)
            .await
            .map_err(|_| Error::Closed)
    }

    /// Close the sending direction once every queued message is handed to
    /// the protocol and delivered or given up (RFC 9622 §10 `Close`); the
    /// peer's messages can still be received until [`Event::Closed`]
    /// (or [`RecvHalf::receive`] returns `Ok(None)`).
    pub async fn close(&mut self) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.queue
            .send(Queued::Close(tx))
            .await
            .map_err(|_| Error::Closed)?;
        self.final_sent = true;
        match rx.await {
            Ok(Ok(())) | Ok(Err(StreamError::Closed)) => Ok(()),
            Ok(Err(e)) => Err(Error::Connection(e.to_string())),
            Err(_) => Err(Error::Closed),
        }
    }

    /// Counters.
    pub fn stats(&self) -> ConnectionStats {
        let c = &self.events.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ConnectionStats {
            queued: g(&c.queued),
            sent: g(&c.sent),
            expired: g(&c.expired),
            send_errors: g(&c.send_errors),
            abandoned: g(&c.abandoned),
            received: g(&c.received),
            events_dropped: g(&c.events_dropped),
        }
    }
}

impl RecvHalf {
    /// The protocol of the connection.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The next received message (RFC 9622 §9.3); `Ok(None)` once the peer
    /// closed and everything it sent was delivered.
    pub async fn receive(&mut self) -> Result<Option<Message>, Error> {
        if self.rx_ended {
            return Ok(None);
        }
        match self.rx.recv().await {
            Some(RxItem::Message(m, _permit)) => Ok(Some(m)),
            Some(RxItem::End(Ok(()))) | None => {
                self.rx_ended = true;
                Ok(None)
            }
            Some(RxItem::End(Err(e))) => {
                self.rx_ended = true;
                Err(Error::Connection(e))
            }
        }
    }
}

/// Which protocol id each recent message got (`None`: it never reached the
/// protocol), for dependencies and `Abandoned` reports, for the newest
/// [`DEPENDENCY_WINDOW`] references. Kept as runs of consecutive
/// references with consecutive protocol ids (or none): a stream that sends
/// in order holds one run, not an entry per message, so a long-lived
/// connection's map stays a few bytes and each send costs O(1). Messages
/// expired in the queue while an earlier one was being handed over are
/// entered out of order, as runs of their own.
#[derive(Default)]
struct IdMap {
    /// Sorted by `msg`, not overlapping.
    runs: VecDeque<IdRun>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IdRun {
    /// The first reference of the run.
    msg: u64,
    /// Its protocol id (the next ones follow), or none for the whole run.
    wire: Option<u32>,
    len: u32,
}

impl IdRun {
    fn end(&self) -> u64 {
        self.msg + u64::from(self.len)
    }

    fn get(&self, msg: u64) -> Option<Option<u32>> {
        (self.msg..self.end())
            .contains(&msg)
            .then(|| self.wire.map(|w| w.wrapping_add((msg - self.msg) as u32)))
    }
}

impl IdMap {
    fn push(&mut self, msg: MessageRef, wire: Option<u32>) {
        let m = msg.0;
        match self.runs.back_mut() {
            Some(last) if m == last.end() => {
                let follows = match (last.wire, wire) {
                    (Some(a), Some(b)) => a.wrapping_add(last.len) == b,
                    (None, None) => true,
                    _ => false,
                };
                if follows && last.len < u32::MAX {
                    last.len += 1;
                } else {
                    self.runs.push_back(IdRun {
                        msg: m,
                        wire,
                        len: 1,
                    });
                }
            }
            Some(last) if m < last.end() => {
                // Out of order: its own run where it belongs (a reference
                // already entered keeps its first entry).
                let i = self.runs.partition_point(|r| r.end() <= m);
                if self.runs.get(i).is_some_and(|r| r.msg <= m) {
                    return;
                }
                self.runs.insert(
                    i,
                    IdRun {
                        msg: m,
                        wire,
                        len: 1,
                    },
                );
            }
            _ => self.runs.push_back(IdRun {
                msg: m,
                wire,
                len: 1,
            }),
        }
        // Forget what fell out of the window.
        let newest = self.runs.back().map_or(m, |r| r.end() - 1);
        let oldest = (newest + 1).saturating_sub(DEPENDENCY_WINDOW as u64);
        while let Some(first) = self.runs.front_mut() {
            if first.end() <= oldest {
                self.runs.pop_front();
            } else {
                if first.msg < oldest {
                    let cut = oldest - first.msg;
                    first.msg = oldest;
                    first.wire = first.wire.map(|w| w.wrapping_add(cut as u32));
                    first.len -= cut as u32;
                }
                break;
            }
        }
    }

    /// `Some(wire id or None)` when `msg` is in the window.
    fn get(&self, msg: MessageRef) -> Option<Option<u32>> {
        let i = self.runs.partition_point(|r| r.end() <= msg.0);
        self.runs.get(i).and_then(|r| r.get(msg.0))
    }

    fn by_wire(&self, wire: u32) -> Option<MessageRef> {
        // Search back from the newest, where reports usually point.
        self.runs.iter().rev().find_map(|r| {
            let off = wire.wrapping_sub(r.wire?);
            (off < r.len).then(|| MessageRef(r.msg + u64::from(off)))
        })
    }

    /// References entered (for tests).
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.runs.iter().map(|r| u64::from(r.len)).sum()
    }
}

fn fatal(e: &StreamError) -> bool {
    !matches!(
        e,
        StreamError::TooLarge(_) | StreamError::Meta(_) | StreamError::WrongMode(_)
    )
}

/// The deadline of a queued message, if it has a lifetime.
fn deadline(q: &Queued) -> Option<Instant> {
    match q {
        Queued::Message {
            lifetime: Some(l),
            queued_at,
            ..
        } => Some(*queued_at + *l),
        _ => None,
    }
}

/// Drop the messages of `pending` whose lifetime is over (RFC 9622
/// `Expired`), releasing their room in the queue.
fn prune(pending: &mut VecDeque<Queued>, ids: &mut IdMap, events: &Events) {
    let now = Instant::now();
    pending.retain(|q| {
        if deadline(q).is_some_and(|d| d <= now) {
            if let Queued::Message { msg, .. } = q {
                ids.push(*msg, None);
                events.push(Event::Expired { msg: *msg });
            }
            return false;
        }
        true
    });
}

/// The waiting item to hand to the protocol next: the message of the
/// highest priority (`msgPriority`, RFC 9622 §9.1.3.2: the lowest number),
/// then the oldest — or what must go before it: the message it depends on,
/// if that still waits (its protocol id is only known once it is handed
/// over), and on an ordered sub-stream the oldest waiting ordered message
/// of that sub-stream. Nothing passes a `Close` or the final message
/// (`final` closes the connection after it), and an item that is not a
/// message at the front goes first. With one priority: the front (FIFO).
///
/// This is the application-side queue that keeps the choice where the
/// protocol cannot reorder bytes it holds: a kernel TCP socket keeps at
/// most [`KERNEL_NOTSENT_LOWAT`](crate::preconnection::KERNEL_NOTSENT_LOWAT)
/// unsent bytes (`TCP_NOTSENT_LOWAT`), so while the path is congested
/// messages wait here, where the most urgent is taken first. Cost: a scan
/// of the waiting items, which [`SEND_QUEUE_BYTES`] bounds.
fn next_pending(pending: &VecDeque<Queued>) -> usize {
    let prio = |q: &Queued| match q {
        Queued::Message { out, .. } => Some(out.priority),
        _ => None,
    };
    // The items that may be reordered: up to the first Close or final
    // message (which itself is a candidate only as the front).
    let window = pending
        .iter()
        .position(|q| match q {
            Queued::Close(_) => true,
            Queued::Message { final_message, .. } => *final_message,
            Queued::RaiseCredit => false,
        })
        .unwrap_or(pending.len());
    let Some(top) = pending.iter().take(window).filter_map(prio).max() else {
        return 0;
    };
    if pending.front().and_then(prio).is_none_or(|p| p == top) {
        return 0;
    }
    let Some(mut i) = pending
        .iter()
        .take(window)
        .position(|q| prio(q) == Some(top))
    else {
        return 0;
    };
    loop {
        let Queued::Message {
            out, depends_on, ..
        } = &pending[i]
        else {
            return i;
        };
        let before = |pred: &dyn Fn(&Queued) -> bool| pending.range(..i).position(pred);
        let target = depends_on
            .and_then(|d| before(&|q| matches!(q, Queued::Message { msg, .. } if *msg == d)));
        let chain = out
            .ordered
            .then(|| {
                before(&|q| {
                    matches!(q, Queued::Message { out: o, .. } if o.ordered && o.substream == out.substream)
                })
            })
            .flatten();
        match target.or(chain) {
            Some(j) => i = j,
            None => return i,
        }
    }
}

/// Hands queued messages to the protocol, the most urgent first (see
/// [`next_pending`]; in order while all have one priority). While the protocol
/// holds one back (a full path, a peer that does not read), the ones
/// behind it keep expiring at their deadlines, so a sender of live media
/// never blocks on messages that are already too late.
async fn send_task<S: ProtocolSend>(mut s: S, mut q: mpsc::Receiver<Queued>, events: Arc<Events>) {
    let mut ids = IdMap::default();
    let mut failed: Option<String> = None;
    let mut pending: VecDeque<Queued> = VecDeque::new();
    let mut q_open = true;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Everything waiting is a candidate, not only what arrived while
        // the protocol held the last message back.
        while q_open {
            match q.try_recv() {
                Ok(item) => pending.push_back(item),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => q_open = false,
            }
        }
        let next = next_pending(&pending);
        let item = match pending.remove(next) {
            Some(item) => item,
            None if !q_open => break,
            None => {
                let item = tokio::select! {
                    item = q.recv() => item,
                    _ = tick.tick() => {
                        report_abandoned(&mut s, &ids, &events);
                        continue;
                    }
                };
                match item {
                    Some(item) => item,
                    None => break,
                }
            }
        };
        match item {
            Queued::RaiseCredit => s.raise_receive_credit().await,
            Queued::Close(reply) => {
                let r = match &failed {
                    Some(f) => Err(StreamError::StackFailed(f.clone())),
                    None => s.close().await,
                };
                report_abandoned(&mut s, &ids, &events);
                let _ = reply.send(r);
                // Nothing can be sent after Close; the task ends, which
                // lets `next_event` end once the peer has closed too.
                return;
            }
            Queued::Message {
                msg,
                mut out,
                lifetime,
                wire_lifetime,
                depends_on,
                queued_at,
                final_message,
                _permit,
            } => {
                drop(_permit);
                if let Some(f) = &failed {
                    ids.push(msg, None);
                    events.push(Event::SendError {
                        msg,
                        error: f.clone(),
                    });
                    continue;
                }
                let left = lifetime.map(|l| l.saturating_sub(queued_at.elapsed()));
                if left.is_some_and(|l| l.is_zero()) {
                    ids.push(msg, None);
                    events.push(Event::Expired { msg });
                    continue;
                }
                if let Some(d) = depends_on {
                    match ids.get(d) {
                        Some(Some(w)) => out.depends_on = Some(w),
                        Some(None) => {
                            ids.push(msg, None);
                            events.push(Event::Expired { msg });
                            continue;
                        }
                        None => {
                            ids.push(msg, None);
                            events.push(Event::SendError {
                                msg,
                                error: format!(
                                    "depends on message {} beyond the last {DEPENDENCY_WINDOW}",
                                    d.0
                                ),
                            });
                            continue;
                        }
                    }
                }
                out.lifetime = if wire_lifetime { left } else { None };
                let r = {
                    let send = s.send(out);
                    tokio::pin!(send);
                    let mut wait = tokio::time::interval(Duration::from_millis(10));
                    loop {
                        tokio::select! {
                            r = &mut send => break r,
                            _ = wait.tick() => {
                                while q_open {
                                    match q.try_recv() {
                                        Ok(item) => pending.push_back(item),
                                        Err(mpsc::error::TryRecvError::Empty) => break,
                                        Err(mpsc::error::TryRecvError::Disconnected) => q_open = false,
                                    }
                                }
                                prune(&mut pending, &mut ids, &events);
                            }
                        }
                    }
                };
                match r {
                    Ok(wire_id) => {
                        ids.push(msg, Some(wire_id));
                        events.push(Event::Sent { msg, wire_id });
                    }
                    Err(e) => {
                        ids.push(msg, None);
                        if fatal(&e) {
                            failed = Some(e.to_string());
                        }
                        events.push(Event::SendError {
                            msg,
                            error: e.to_string(),
                        });
                    }
                }
                if final_message && failed.is_none() {
                    if let Err(e) = s.close().await {
                        failed = Some(e.to_string());
                    }
                }
                report_abandoned(&mut s, &ids, &events);
            }
        }
    }
    // The application dropped the connection: close after what is queued.
    if failed.is_none() {
        let _ = s.close().await;
    }
}

fn report_abandoned<S: ProtocolSend>(s: &mut S, ids: &IdMap, events: &Events) {
    for a in s.take_abandoned() {
        if let Some(msg) = ids.by_wire(a.wire_id) {
            events.push(Event::Abandoned {
                msg,
                reason: a.reason,
            });
        }
    }
}

async fn recv_task<R: ProtocolRecv>(
    mut r: R,
    out: mpsc::Sender<RxItem>,
    bytes: Arc<Semaphore>,
    events: Arc<Events>,
) {
    loop {
        let end = match r.recv().await {
            Ok(Some(m)) => {
                let want = m.payload.len().clamp(1, RECEIVE_QUEUE_BYTES) as u32;
                let Ok(permit) = bytes.clone().acquire_many_owned(want).await else {
                    return;
                };
                events.counters.received.fetch_add(1, Ordering::Relaxed);
                let msg = Message {
                    data: m.payload,
                    substream: m.substream,
                    wire_id: m.id,
                    arrival: m.arrival,
                };
                if out.send(RxItem::Message(msg, permit)).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        let _ = out.send(RxItem::End(end)).await;
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiting message: reference `msg`, transport priority `priority`
    /// (higher first), on ordered sub-stream 1 if `ordered`.
    fn waiting(msg: u64, priority: i8, ordered: bool, depends_on: Option<u64>) -> Queued {
        let sem = Arc::new(Semaphore::new(1));
        Queued::Message {
            msg: MessageRef(msg),
            out: SendOut {
                payload: Vec::new(),
                substream: u16::from(ordered),
                ordered,
                lifetime: None,
                depends_on: None,
                priority,
            },
            lifetime: None,
            wire_lifetime: true,
            depends_on: depends_on.map(MessageRef),
            queued_at: Instant::now(),
            final_message: false,
            _permit: sem.try_acquire_owned().expect("one permit"),
        }
    }

    /// The references in the order `next_pending` hands them over.
    fn handover(mut pending: VecDeque<Queued>) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(q) = pending.remove(next_pending(&pending)) {
            match q {
                Queued::Message { msg, .. } => out.push(msg.0),
                _ => out.push(u64::MAX),
            }
        }
        out
    }

    #[test]
    fn waiting_messages_go_by_priority_then_age() {
        // One priority: in order.
        let q = (0..5).map(|i| waiting(i, 0, false, None)).collect();
        assert_eq!(handover(q), [0, 1, 2, 3, 4]);
        // Keyframes (99) before the rest (96), oldest first in each.
        let q = [96, 99, 96, 96, 99]
            .iter()
            .enumerate()
            .map(|(i, &p)| waiting(i as u64, p, false, None))
            .collect();
        assert_eq!(handover(q), [1, 4, 0, 2, 3]);
    }

    #[test]
    fn waiting_messages_keep_chains_dependencies_and_close() {
        // An urgent ordered message waits for the ordered ones before it;
        // an urgent dependent brings its target first.
        let q = VecDeque::from([
            waiting(0, 0, true, None),
            waiting(1, 5, false, None),
            waiting(2, 9, true, None),
            waiting(3, 1, false, None),
            waiting(4, 7, false, Some(3)),
        ]);
        assert_eq!(handover(q), [0, 2, 3, 4, 1]);
        // Nothing passes a Close.
        let (tx, _rx) = oneshot::channel();
        let q = VecDeque::from([
            waiting(0, 0, false, None),
            Queued::Close(tx),
            waiting(1, 9, false, None),
        ]);
        assert_eq!(handover(q), [0, u64::MAX, 1]);
    }

    #[test]
    fn id_map_finds_dependencies_and_reports_in_its_window() {
        let mut m = IdMap::default();
        m.push(MessageRef(0), Some(10));
        m.push(MessageRef(1), None);
        m.push(MessageRef(2), Some(11));
        assert_eq!(m.get(MessageRef(0)), Some(Some(10)));
        assert_eq!(m.get(MessageRef(1)), Some(None));
        assert_eq!(m.get(MessageRef(3)), None);
        assert_eq!(m.by_wire(11), Some(MessageRef(2)));
        assert_eq!(m.by_wire(12), None);
        for i in 3..(DEPENDENCY_WINDOW as u64 + 5) {
            m.push(MessageRef(i), Some(i as u32 + 9));
        }
        assert_eq!(m.get(MessageRef(0)), None);
        assert_eq!(m.len(), DEPENDENCY_WINDOW as u64);
        assert!(m.runs.len() <= 2, "consecutive sends share a run");
        // Out of order entries (a message expired in the queue while an
        // earlier one was being handed over).
        let mut m = IdMap::default();
        m.push(MessageRef(5), None);
        m.push(MessageRef(4), Some(1));
        assert_eq!(m.get(MessageRef(5)), Some(None));
        assert_eq!(m.by_wire(1), Some(MessageRef(4)));
    }

    proptest::proptest! {
        /// The runs answer as a map of every entry in the window does
        /// (the previous representation), for in-order sends with gaps,
        /// expiries, out-of-order entries and a window that slides.
        #[test]
        fn id_map_matches_a_plain_map(
            ops in proptest::collection::vec((0u8..8, 0u8..3, proptest::bool::ANY), 1..400),
            window_slide in 0u64..3,
        ) {
            let mut m = IdMap::default();
            let mut model = std::collections::BTreeMap::<u64, Option<u32>>::new();
            let mut next = window_slide * (DEPENDENCY_WINDOW as u64 - 150);
            let mut wire = 7u32;
            for (step, back, sent) in ops {
                // Mostly the next reference; sometimes a skip, sometimes
                // one a little behind (expired while another was sent).
                let msg = match step {
                    0 => next.saturating_sub(u64::from(back) + 1),
                    // A jump (up to 40 000 on): the window slides.
                    1 => { next += u64::from(back) * 20_000 + 1; next }
                    _ => next,
                };
                next = next.max(msg + 1);
                let w = sent.then(|| { wire = wire.wrapping_add(1 + u32::from(step == 7)); wire });
                m.push(MessageRef(msg), w);
                model.entry(msg).or_insert(w);
                let newest = *model.keys().next_back().unwrap();
                model.retain(|&k, _| newest - k < DEPENDENCY_WINDOW as u64);
                proptest::prop_assert_eq!(m.len(), model.len() as u64);
            }
            let lo = model.keys().next().copied().unwrap_or(0).saturating_sub(3);
            for k in (lo..next + 3).filter(|k| model.contains_key(k) || k % 97 == 0 || *k < lo + 10) {
                proptest::prop_assert_eq!(m.get(MessageRef(k)), model.get(&k).copied());
            }
            for (&k, w) in &model {
                if let Some(w) = *w {
                    proptest::prop_assert_eq!(m.by_wire(w), Some(MessageRef(k)));
                }
            }
        }
    }
}
