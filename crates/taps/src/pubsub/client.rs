//! A caller of a relay: publish a stream or play one
//! ([`Session::connect`]). `hollywood transmit` uses it for
//! `hollywood://relay:port/streamid?mode=publish|play`, and a relay uses it
//! to subscribe upstream (a chain of relays).

use super::access::StreamId;
use super::clock::ClockOffset;
use super::now_us;
use super::wire::{self, MediaHeader, Msg, Role};
use crate::{Connection, Error, MessageContext, Preconnection, RecvHalf, SendHalf};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a caller refreshes its estimate of the relay's clock.
pub const PING_INTERVAL: Duration = Duration::from_secs(1);
/// Media messages a player keeps that arrive before the relay's ACCEPT.
pub const PENDING_LIMIT: usize = 4096;
/// How long a publisher's close waits for the relay's.
pub const CLOSE_WAIT: Duration = Duration::from_secs(3);
/// How long a caller waits for the relay's answer to its hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What to ask a relay for.
#[derive(Debug, Clone)]
pub struct Request {
    /// Publish or play.
    pub role: Role,
    /// The stream, with user and token ([`StreamId`]).
    pub stream: StreamId,
    /// A player's own deadline after each message's origin (zero: the
    /// publisher's end-to-end deadline only).
    pub latency: Duration,
}

/// A media message received from a relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Its metadata, times on this process's clock ([`super::now_us`]).
    pub header: MediaHeader,
    /// The publisher's bytes.
    pub payload: Vec<u8>,
}

/// Counters of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionStats {
    /// Media messages sent (publisher).
    pub published: u64,
    /// Media messages received (player).
    pub received: u64,
    /// Received past their deadline and dropped (never delivered).
    pub late: u64,
    /// The round trip of the clock sample in use (µs).
    pub clock_rtt_us: i64,
    /// The width of the bounds on the relay's clock that deadlines are
    /// converted with (µs): how much earlier than the truth a conversion
    /// may put one ([`ClockOffset::uncertainty`]).
    pub clock_uncertainty_us: i64,
}

/// A connection to a relay, accepted.
#[derive(Debug)]
pub struct Session {
    tx: SendHalf,
    /// A player's receiving half (a publisher's is read by a task).
    rx: Option<RecvHalf>,
    clock: Arc<Mutex<ClockOffset>>,
    /// A publisher: the relay ended the session (its reason).
    ended: Arc<Mutex<Option<String>>>,
    next_seq: u64,
    last_ping: i64,
    /// Media that overtook the relay's ACCEPT, raw.
    pending: VecDeque<Vec<u8>>,
    /// The relay said END: reading on until its close (or a second of quiet).
    end_seen: bool,
    stats: SessionStats,
    protocol: crate::Protocol,
}

/// The relay refused: code and reason (`super::access::Refusal`).
pub fn refused(code: u16, reason: &str) -> Error {
    Error::Establishment(format!("the relay refused ({code}): {reason}"))
}

impl Session {
    /// Connect, say hello, wait for the answer.
    pub async fn connect(pre: &Preconnection, req: &Request) -> Result<Session, Error> {
        let conn = pre.initiate().await?;
        Session::over(conn, req).await
    }

    /// Say hello on an established connection.
    pub async fn over(mut conn: Connection, req: &Request) -> Result<Session, Error> {
        let protocol = conn.protocol();
        let mut id = req.stream.clone();
        id.mode = Some(req.role);
        let t1 = now_us();
        let hello = Msg::Hello {
            version: wire::VERSION,
            role: req.role,
            latency_us: u32::try_from(req.latency.as_micros()).unwrap_or(u32::MAX),
            t1_us: t1,
            stream_id: id.to_srt(),
        };
        conn.send(hello.encode(), control()).await?;
        // The answer. Control messages are unordered (QUIC's stream per
        // message), so with loss the first media can overtake it: kept
        // for `receive`, at most PENDING_LIMIT of them.
        let mut pending = VecDeque::new();
        let give_up = tokio::time::Instant::now() + HELLO_TIMEOUT;
        let mut clock = ClockOffset::new();
        loop {
            let answer = tokio::time::timeout_at(give_up, conn.receive())
                .await
                .map_err(|_| Error::Establishment("the relay did not answer the hello".into()))??
                .ok_or_else(|| Error::Establishment("the relay closed without answering".into()))?;
            let t4 = now_us();
            match Msg::decode(&answer.data).map_err(|e| Error::Establishment(e.to_string()))? {
                Msg::Accept { t1_us, t2_us } if t1_us == t1 => {
                    clock.sample(t1, t2_us, t4);
                    break;
                }
                Msg::Refuse { code, reason } => return Err(refused(code, &reason)),
                Msg::Media { .. } if req.role == Role::Play && pending.len() < PENDING_LIMIT => {
                    pending.push_back(answer.data)
                }
                m => {
                    return Err(Error::Establishment(format!(
                        "the relay answered the hello with {m:?}"
                    )))
                }
            }
        }
        let t4 = now_us();
        let (tx, rx) = conn.split();
        let clock = Arc::new(Mutex::new(clock));
        let ended = Arc::new(Mutex::new(None));
        let rx = match req.role {
            Role::Play => Some(rx),
            Role::Publish => {
                tokio::spawn(read_control(rx, clock.clone(), ended.clone()));
                None
            }
        };
        Ok(Session {
            tx,
            rx,
            clock,
            ended,
            next_seq: 0,
            last_ping: t4,
            pending,
            end_seen: false,
            stats: SessionStats::default(),
            protocol,
        })
    }

    /// The protocol of the connection.
    pub fn protocol(&self) -> crate::Protocol {
        self.protocol
    }

    /// Counters.
    pub fn stats(&self) -> SessionStats {
        let mut s = self.stats;
        let c = lock(&self.clock);
        s.clock_rtt_us = c.rtt().unwrap_or(0);
        s.clock_uncertainty_us = c.uncertainty(now_us()).unwrap_or(0);
        s
    }

    /// The sending half's counters (sent, expired, abandoned, …).
    pub fn connection_stats(&self) -> crate::ConnectionStats {
        self.tx.stats()
    }

    async fn ping_if_due(&mut self) -> Result<(), Error> {
        let now = now_us();
        if now - self.last_ping >= PING_INTERVAL.as_micros() as i64 {
            self.last_ping = now;
            self.tx
                .send(Msg::Ping { t1_us: now }.encode(), control())
                .await?;
        }
        Ok(())
    }

    /// Publish one message useful for `lifetime` from now (the end-to-end
    /// deadline every relay and player spends from), with `flags`
    /// (`wire::FLAG_GROUP_START`, `wire::FLAG_KEY`) and `priority`
    /// (lower first).
    pub async fn publish(
        &mut self,
        payload: &[u8],
        flags: u8,
        priority: u8,
        lifetime: Duration,
    ) -> Result<(), Error> {
        self.publish_from(payload, flags, priority, now_us(), lifetime)
            .await
    }

    /// Publish one message read at `origin_local_us` (this process's clock,
    /// [`super::now_us`]; at or before now) and useful for `lifetime` from
    /// then: its deadline counts from that instant, not from this call.
    pub async fn publish_from(
        &mut self,
        payload: &[u8],
        flags: u8,
        priority: u8,
        origin_local_us: i64,
        lifetime: Duration,
    ) -> Result<(), Error> {
        let lifetime_us = i64::try_from(lifetime.as_micros()).unwrap_or(i64::MAX / 4);
        let (origin, deadline) = stamp(&lock(&self.clock), origin_local_us, lifetime_us, now_us());
        self.publish_at(payload, flags, priority, origin, deadline)
            .await
    }

    /// Publish with origin and deadline given on the relay's clock (a
    /// relay forwarding what it got upstream).
    pub async fn publish_at(
        &mut self,
        payload: &[u8],
        flags: u8,
        priority: u8,
        origin_us: i64,
        deadline_us: i64,
    ) -> Result<(), Error> {
        if let Some(why) = lock(&self.ended).clone() {
            return Err(Error::Connection(why));
        }
        self.ping_if_due().await?;
        // The lifetime left as the connection counts it: from the latest
        // the relay's clock can read now.
        let remaining = deadline_us - lock(&self.clock).latest_relay_now(now_us());
        if remaining <= 0 {
            return Ok(());
        }
        let header = MediaHeader {
            flags,
            priority,
            seq: self.next_seq,
            origin_us,
            deadline_us,
        };
        self.next_seq += 1;
        let mut b = Vec::with_capacity(wire::MEDIA_HEADER + payload.len());
        wire::encode_media_header(&header, &mut b);
        b.extend_from_slice(payload);
        self.tx
            .send(b, media(Duration::from_micros(remaining as u64), priority))
            .await?;
        self.stats.published += 1;
        Ok(())
    }

    /// This process's clock (µs) on the relay's.
    pub fn to_relay(&self, local_us: i64) -> i64 {
        lock(&self.clock).to_relay(local_us)
    }

    /// A player's next media message still within its deadline; `None`
    /// when the stream ended. Messages past their deadline are dropped
    /// here and counted (`late`): nothing is delivered after it.
    pub async fn receive(&mut self) -> Result<Option<Received>, Error> {
        let Some(mut rx) = self.rx.take() else {
            return Err(Error::InvalidMessage("a publisher does not receive".into()));
        };
        let r = loop {
            let data = if let Some(d) = self.pending.pop_front() {
                d
            } else {
                // After END, what is still on its way, until the close or
                // a second of quiet.
                let quiet = if self.end_seen {
                    Duration::from_secs(1)
                } else {
                    PING_INTERVAL
                };
                let m = tokio::select! {
                    m = rx.receive() => m,
                    () = tokio::time::sleep(quiet) => {
                        if self.end_seen { break Ok(None) }
                        if let Err(e) = self.ping_if_due().await { break Err(e) }
                        continue;
                    }
                };
                match m {
                    Ok(Some(m)) => m.data,
                    Ok(None) => break Ok(None),
                    Err(e) => break Err(e),
                }
            };
            if let Err(e) = self.ping_if_due().await {
                break Err(e);
            }
            match Msg::decode(&data) {
                Ok(Msg::Media { header, payload }) => {
                    self.stats.received += 1;
                    let arrived = arrive(&lock(&self.clock), header, now_us());
                    let Some(header) = arrived else {
                        self.stats.late += 1;
                        continue;
                    };
                    break Ok(Some(Received { header, payload }));
                }
                Ok(Msg::Pong { t1_us, t2_us }) => lock(&self.clock).sample(t1_us, t2_us, now_us()),
                // Media sent before it may still arrive: read to the close.
                Ok(Msg::End) => self.end_seen = true,
                Ok(m) => {
                    break Err(Error::Connection(format!(
                        "relay protocol: unexpected {m:?}"
                    )))
                }
                Err(e) => break Err(Error::Connection(e.to_string())),
            }
        };
        self.rx = Some(rx);
        r
    }

    /// End the stream (a publisher says so first) and close. A publisher
    /// then waits (at most [`CLOSE_WAIT`]) for the relay to close too, so
    /// that everything it sent is through before its process may exit.
    pub async fn close(mut self) -> Result<(), Error> {
        if self.rx.is_some() {
            return self.tx.close().await;
        }
        let _ = self.tx.send(Msg::End.encode(), control()).await;
        let r = self.tx.close().await;
        let t = tokio::time::Instant::now();
        while lock(&self.ended).is_none() && t.elapsed() < CLOSE_WAIT {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        r
    }
}

/// A publisher's stamp for a message read at `origin_local_us` and useful
/// for `lifetime_us` after it: its origin and deadline on the relay's
/// clock, computed at `now_local_us` — the earliest relay times they can
/// be ([`ClockOffset::deadline_to_relay`]), so the deadline is never later
/// than the truth, whatever the clock samples' asymmetry.
pub fn stamp(
    clock: &ClockOffset,
    origin_local_us: i64,
    lifetime_us: i64,
    now_local_us: i64,
) -> (i64, i64) {
    let origin = clock.deadline_to_relay(origin_local_us, now_local_us);
    (origin, origin.saturating_add(lifetime_us))
}

/// A media header received from the relay at `now_local_us`, its times
/// converted to this process's clock as the earliest they can be
/// ([`ClockOffset::deadline_to_local`]: never later than the truth,
/// however long the message was in flight or the clock samples' two
/// ways took); `None` when it is past its deadline (never delivered).
pub fn arrive(clock: &ClockOffset, mut h: MediaHeader, now_local_us: i64) -> Option<MediaHeader> {
    h.origin_us = clock.deadline_to_local(h.origin_us, now_local_us);
    h.deadline_us = clock.deadline_to_local(h.deadline_us, now_local_us);
    (h.deadline_us > now_local_us).then_some(h)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A control message's context: reliable on the control sub-stream.
/// Unordered (QUIC's stream per message does not order): the hello is
/// answered before anything else is sent, pings and pongs carry their
/// own times, and `End` is followed by a close that completes only once
/// everything before it was delivered, so the far end reads to the close.
pub(crate) fn control() -> MessageContext {
    MessageContext::default()
        .substream(wire::CONTROL_SUBSTREAM)
        .ordered(false)
        .priority(0)
}

/// A media message's context: unordered on the media sub-stream, given
/// up at its lifetime.
pub(crate) fn media(lifetime: Duration, priority: u8) -> MessageContext {
    MessageContext::lifetime(lifetime)
        .substream(wire::MEDIA_SUBSTREAM)
        .ordered(false)
        .priority(1 + u32::from(priority))
}

/// A publisher's receiving half: clock samples, and the relay's end.
async fn read_control(
    mut rx: RecvHalf,
    clock: Arc<Mutex<ClockOffset>>,
    ended: Arc<Mutex<Option<String>>>,
) {
    let why = loop {
        match rx.receive().await {
            Ok(Some(m)) => match Msg::decode(&m.data) {
                Ok(Msg::Pong { t1_us, t2_us }) => lock(&clock).sample(t1_us, t2_us, now_us()),
                Ok(Msg::Refuse { code, reason }) => {
                    break format!("the relay refused ({code}): {reason}")
                }
                Ok(Msg::End) => break "the relay ended the stream".into(),
                Ok(m) => break format!("relay protocol: unexpected {m:?}"),
                Err(e) => break e.to_string(),
            },
            Ok(None) => break "the relay closed the connection".into(),
            Err(e) => break e.to_string(),
        }
    };
    *lock(&ended) = Some(why);
}
