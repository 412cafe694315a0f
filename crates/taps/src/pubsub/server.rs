//! The relay: one listener (every candidate of its preconnection on one
//! port number), many callers, streams by name, fan-out with a queue and
//! a deadline per subscriber (`super::fanout`).
//!
//! Locking: the registry of streams is locked when a caller joins or
//! leaves; a published message locks its stream's state and each
//! subscriber's queue briefly, never a lock of the whole relay. Every
//! connection is a task, so a multi-threaded runtime spreads them over
//! its workers.

use super::access::{Policy, Refusal, StreamId};
use super::client::{self, control, media, Request, Session};
use super::fanout::{GroupCache, Item, SubQueue, SubStats};
use super::now_us;
use super::wire::{self, Msg, Role};
use crate::{Connection, ConnectionStats, Error, Preconnection, Protocol};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Messages a subscriber's connection may hold that it has not yet taken
/// (no `Sent` or `Expired` event): beyond, messages wait in the relay's
/// queue, where priorities and per-subscriber deadlines apply.
pub const SUBSCRIBER_WINDOW: u64 = 32;
/// How long a caller has to say hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What a relay serves, and to whom.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The listening endpoint, properties, security, candidates.
    pub preconnection: Preconnection,
    /// Who may publish and play.
    pub policy: Policy,
    /// Connections at most (callers beyond are refused with 503).
    pub max_connections: usize,
    /// Subscribe here, onward, to streams not published on this relay (a
    /// chain of relays): a preconnection with its remote endpoint.
    pub upstream: Option<Upstream>,
}

/// The relay a relay subscribes to.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its endpoint, security, candidates.
    pub preconnection: Preconnection,
    /// The play token it wants, if any.
    pub token: Option<String>,
}

/// A subscriber's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SubscriberReport {
    /// Its number on this relay.
    pub id: u64,
    /// Its address.
    pub peer: String,
    /// The protocol it came over.
    pub protocol: &'static str,
    /// Its own latency (ms; 0: the end-to-end deadline only).
    pub latency_ms: f64,
    /// Its queue's counters.
    pub queue: SubStats,
    /// Messages its connection gave up after taking them.
    pub abandoned: u64,
    /// Messages its connection let expire before taking them.
    pub transport_expired: u64,
}

/// A stream's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamReport {
    /// Its name (the stream id's resource).
    pub name: String,
    /// Someone publishes it now (a caller or the upstream relay).
    pub publishing: bool,
    /// Messages published.
    pub published: u64,
    /// Bytes of those.
    pub published_bytes: u64,
    /// Published already past their deadline (late from upstream).
    pub published_late: u64,
    /// Subscribers now.
    pub subscribers: Vec<SubscriberReport>,
    /// The counters of subscribers that left, summed.
    pub departed: SubStats,
    /// Subscribers that left.
    pub departed_count: u64,
}

/// The relay's figures (`hollywood relay -s`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RelayReport {
    /// Connections accepted by the transport.
    pub connections: u64,
    /// Connections open now.
    pub active: u64,
    /// Callers refused, by code.
    pub refused: BTreeMap<u16, u64>,
    /// Streams.
    pub streams: Vec<StreamReport>,
    /// Streams that ended (nobody publishing or playing them any more),
    /// their last figures; the newest [`ENDED_KEPT`].
    pub ended: Vec<StreamReport>,
}

/// Ended streams whose figures a relay keeps.
pub const ENDED_KEPT: usize = 64;

struct Sub {
    id: u64,
    peer: SocketAddr,
    protocol: Protocol,
    latency_us: Option<i64>,
    queue: Mutex<SubQueue>,
    notify: Notify,
    conn_stats: Mutex<ConnectionStats>,
}

#[derive(Default)]
struct StreamState {
    publisher: bool,
    /// The publisher said `End`: subscribers finish.
    ended: bool,
    upstream: bool,
    subs: Vec<Arc<Sub>>,
    cache: GroupCache,
    published: u64,
    published_bytes: u64,
    published_late: u64,
    departed: SubStats,
    departed_count: u64,
}

struct Stream {
    name: String,
    state: Mutex<StreamState>,
}

/// A running relay's shared state; [`Relay::report`] for statistics.
pub struct Relay {
    cfg: ServerConfig,
    streams: Mutex<BTreeMap<String, Arc<Stream>>>,
    connections: AtomicU64,
    active: AtomicU64,
    refused: Mutex<BTreeMap<u16, u64>>,
    next_sub: AtomicU64,
    ended: Mutex<std::collections::VecDeque<StreamReport>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn add(a: &mut SubStats, b: SubStats) {
    a.queued += b.queued;
    a.forwarded += b.forwarded;
    a.expired += b.expired;
    a.arrived_late += b.arrived_late;
    a.overflow += b.overflow;
    a.before_group += b.before_group;
}

impl Relay {
    /// A relay with this configuration (not listening yet: [`serve`]).
    pub fn new(cfg: ServerConfig) -> Arc<Relay> {
        Arc::new(Relay {
            cfg,
            streams: Mutex::new(BTreeMap::new()),
            connections: AtomicU64::new(0),
            active: AtomicU64::new(0),
            refused: Mutex::new(BTreeMap::new()),
            next_sub: AtomicU64::new(0),
            ended: Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// The figures now.
    pub fn report(&self) -> RelayReport {
        let streams: Vec<Arc<Stream>> = lock(&self.streams).values().cloned().collect();
        RelayReport {
            connections: self.connections.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            refused: lock(&self.refused).clone(),
            streams: streams.iter().map(|s| s.report()).collect(),
            ended: lock(&self.ended).iter().cloned().collect(),
        }
    }

    fn stream(&self, name: &str) -> Arc<Stream> {
        lock(&self.streams)
            .entry(name.to_string())
            .or_insert_with(|| {
                Arc::new(Stream {
                    name: name.to_string(),
                    state: Mutex::new(StreamState::default()),
                })
            })
            .clone()
    }

    fn existing(&self, name: &str) -> Option<Arc<Stream>> {
        lock(&self.streams).get(name).cloned()
    }

    /// Forget a stream nobody publishes or plays (its figures kept).
    fn tidy(&self, s: &Arc<Stream>) {
        let mut all = lock(&self.streams);
        let st = lock(&s.state);
        if !st.publisher && !st.upstream && st.subs.is_empty() {
            drop(st);
            if all.get(&s.name).is_some_and(|x| Arc::ptr_eq(x, s)) {
                all.remove(&s.name);
                let mut ended = lock(&self.ended);
                if ended.len() == ENDED_KEPT {
                    ended.pop_front();
                }
                ended.push_back(s.report());
            }
        }
    }

    fn refuse_count(&self, code: u16) {
        *lock(&self.refused).entry(code).or_default() += 1;
    }
}

impl Stream {
    fn report(&self) -> StreamReport {
        let st = lock(&self.state);
        StreamReport {
            name: self.name.clone(),
            publishing: st.publisher,
            published: st.published,
            published_bytes: st.published_bytes,
            published_late: st.published_late,
            subscribers: st.subs.iter().map(|s| s.report()).collect(),
            departed: st.departed,
            departed_count: st.departed_count,
        }
    }
}

impl Sub {
    fn report(&self) -> SubscriberReport {
        let c = *lock(&self.conn_stats);
        SubscriberReport {
            id: self.id,
            peer: self.peer.to_string(),
            protocol: self.protocol.name(),
            latency_ms: self.latency_us.unwrap_or(0) as f64 / 1000.0,
            queue: lock(&self.queue).stats(),
            abandoned: c.abandoned,
            transport_expired: c.expired,
        }
    }
}

/// Publish one message to a stream: into the group cache and every
/// subscriber's queue.
fn publish(stream: &Stream, it: Item) {
    let now = now_us();
    let it = Arc::new(it);
    let mut st = lock(&stream.state);
    st.published += 1;
    st.published_bytes += it.payload.len() as u64;
    if it.header.deadline_us <= now {
        // Never forwarded past its deadline.
        st.published_late += 1;
        return;
    }
    st.cache.push(&it);
    for s in &st.subs {
        lock(&s.queue).push(it.clone(), now);
        s.notify.notify_one();
    }
}

/// Serve until `stop` completes, then end every stream.
pub async fn serve(relay: Arc<Relay>, stop: impl Future<Output = ()>) -> Result<(), Error> {
    let mut listener = relay.cfg.preconnection.listen().await?;
    serve_on(relay, &mut listener, stop).await
}

/// Serve on a listener already made (its addresses known to the caller).
pub async fn serve_on(
    relay: Arc<Relay>,
    listener: &mut crate::Listener,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    tokio::pin!(stop);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            c = listener.accept() => {
                let Some(conn) = c else { return Err(Error::Closed) };
                relay.connections.fetch_add(1, Ordering::Relaxed);
                let r = relay.clone();
                tasks.spawn(async move {
                    r.active.fetch_add(1, Ordering::Relaxed);
                    handle(&r, conn).await;
                    r.active.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            () = &mut stop => break,
        }
    }
    // Shutdown: every stream ends; subscribers send `End` and close.
    let streams: Vec<Arc<Stream>> = lock(&relay.streams).values().cloned().collect();
    for s in streams {
        let mut st = lock(&s.state);
        st.ended = true;
        for sub in &st.subs {
            sub.notify.notify_one();
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    Ok(())
}

async fn refuse(relay: &Relay, conn: &mut Connection, r: Refusal) {
    relay.refuse_count(r.code);
    let _ = conn
        .send(
            Msg::Refuse {
                code: r.code,
                reason: r.reason,
            }
            .encode(),
            control(),
        )
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(1), conn.close()).await;
}

/// Answer a hello with ACCEPT; false when the connection failed.
async fn accept(conn: &mut Connection, t1_us: i64, t2_us: i64) -> bool {
    conn.send(Msg::Accept { t1_us, t2_us }.encode(), control())
        .await
        .is_ok()
}

async fn handle(relay: &Arc<Relay>, mut conn: Connection) {
    if relay.active.load(Ordering::Relaxed) > relay.cfg.max_connections as u64 {
        let n = relay.cfg.max_connections;
        refuse(
            relay,
            &mut conn,
            Refusal::new(503, format!("the relay is full ({n} connections)")),
        )
        .await;
        return;
    }
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, conn.receive()).await {
        Ok(Ok(Some(m))) => Msg::decode(&m.data),
        Ok(_) => return,
        Err(_) => {
            refuse(relay, &mut conn, Refusal::new(408, "no hello within 5 s")).await;
            return;
        }
    };
    let t2 = now_us();
    let (role, latency_us, t1, id) = match hello {
        Ok(Msg::Hello {
            version,
            role,
            latency_us,
            t1_us,
            stream_id,
        }) => {
            if version != wire::VERSION {
                let why = format!(
                    "relay protocol version {version}; this relay speaks {}",
                    wire::VERSION
                );
                refuse(relay, &mut conn, Refusal::new(505, why)).await;
                return;
            }
            match StreamId::parse(&stream_id)
                .and_then(|id| relay.cfg.policy.admit(role, &id).map(|()| id))
            {
                Ok(id) => (role, latency_us, t1_us, id),
                Err(r) => return refuse(relay, &mut conn, r).await,
            }
        }
        Ok(m) => {
            let why = format!("the first message must be a hello, not {m:?}");
            return refuse(relay, &mut conn, Refusal::new(400, why)).await;
        }
        Err(e) => return refuse(relay, &mut conn, Refusal::new(400, e.to_string())).await,
    };
    match role {
        Role::Publish => {
            let stream = relay.stream(&id.resource);
            let taken = {
                let mut st = lock(&stream.state);
                let taken = st.publisher;
                if !taken {
                    st.publisher = true;
                    st.ended = false;
                }
                taken
            };
            if taken {
                let why = format!("{} already has a publisher", id.resource);
                refuse(relay, &mut conn, Refusal::new(409, why)).await;
                relay.tidy(&stream);
                return;
            }
            // A listener may start callers with little receive credit
            // (players send next to nothing); a publisher needs it all.
            let _ = conn.raise_receive_credit().await;
            let accepted = accept(&mut conn, t1, t2).await;
            let said_end = accepted && run_publisher(&mut conn, &stream).await;
            // The publisher waits for this close before it exits.
            let _ = tokio::time::timeout(Duration::from_secs(1), conn.close()).await;
            let mut st = lock(&stream.state);
            st.publisher = false;
            if said_end {
                st.ended = true;
                for s in &st.subs {
                    s.notify.notify_one();
                }
            }
            drop(st);
            relay.tidy(&stream);
        }
        Role::Play => {
            let stream = match relay.existing(&id.resource) {
                Some(s) => s,
                None if relay.cfg.upstream.is_some() => relay.stream(&id.resource),
                None => {
                    let why = format!("no stream {} is published here", id.resource);
                    return refuse(relay, &mut conn, Refusal::new(404, why)).await;
                }
            };
            let sub = Arc::new(Sub {
                id: relay.next_sub.fetch_add(1, Ordering::Relaxed),
                peer: conn.remote_addr(),
                protocol: conn.protocol(),
                latency_us: (latency_us > 0).then_some(i64::from(latency_us)),
                queue: Mutex::new(SubQueue::new(
                    (latency_us > 0).then_some(i64::from(latency_us)),
                )),
                notify: Notify::new(),
                conn_stats: Mutex::new(ConnectionStats::default()),
            });
            let start_upstream = {
                let mut st = lock(&stream.state);
                // Join at the newest group start held.
                let now = now_us();
                let mut q = lock(&sub.queue);
                for it in st.cache.group() {
                    q.push(it.clone(), now);
                }
                drop(q);
                st.subs.push(sub.clone());
                let start = !st.publisher && !st.upstream && relay.cfg.upstream.is_some();
                if start {
                    st.upstream = true;
                }
                start
            };
            if start_upstream {
                tokio::spawn(run_upstream(
                    relay.clone(),
                    stream.clone(),
                    id.resource.clone(),
                ));
            }
            if accept(&mut conn, t1, t2).await {
                run_subscriber(&mut conn, &stream, &sub).await;
            }
            let mut st = lock(&stream.state);
            st.subs.retain(|s| !Arc::ptr_eq(s, &sub));
            let mut q = lock(&sub.queue);
            q.close();
            let stats = q.stats();
            drop(q);
            add(&mut st.departed, stats);
            st.departed_count += 1;
            drop(st);
            relay.tidy(&stream);
        }
    }
}

/// A publisher's messages into the stream until it ends; true when it
/// said `End`.
async fn run_publisher(conn: &mut Connection, stream: &Stream) -> bool {
    let mut said_end = false;
    loop {
        // After `End`, what is still on its way (media overtaken by it)
        // until the publisher's close, or a second of quiet: a QUIC
        // publisher's close may never reach us if its process exits first.
        let m = if said_end {
            match tokio::time::timeout(Duration::from_secs(1), conn.receive()).await {
                Ok(Ok(Some(m))) => m,
                _ => return true,
            }
        } else {
            match conn.receive().await {
                Ok(Some(m)) => m,
                _ => return false,
            }
        };
        match Msg::decode(&m.data) {
            Ok(Msg::Media { header, payload }) => publish(stream, Item { header, payload }),
            Ok(Msg::Ping { t1_us }) => {
                let pong = Msg::Pong {
                    t1_us,
                    t2_us: now_us(),
                };
                if conn.send(pong.encode(), control()).await.is_err() {
                    return false;
                }
            }
            Ok(Msg::End) => said_end = true,
            // A protocol error ends the publisher; the stream's
            // subscribers stay for the next one.
            _ => return false,
        }
    }
}

/// Feed one subscriber from its queue until it leaves or the stream ends.
async fn run_subscriber(conn: &mut Connection, stream: &Stream, sub: &Sub) {
    let mut outstanding = 0u64;
    let mut buf = Vec::new();
    let signal = conn.event_signal();
    loop {
        while let Some(e) = conn.try_event() {
            match e {
                crate::Event::Sent { .. }
                | crate::Event::Expired { .. }
                | crate::Event::SendError { .. } => outstanding = outstanding.saturating_sub(1),
                crate::Event::ConnectionError(_) => return,
                _ => {}
            }
        }
        *lock(&sub.conn_stats) = conn.stats();
        while outstanding < SUBSCRIBER_WINDOW {
            let now = now_us();
            let Some((it, deadline)) = lock(&sub.queue).pop(now) else {
                break;
            };
            let mut h = it.header;
            h.deadline_us = deadline;
            buf.clear();
            wire::encode_media_header(&h, &mut buf);
            buf.extend_from_slice(&it.payload);
            let life = Duration::from_micros((deadline - now) as u64);
            if conn
                .send(std::mem::take(&mut buf), media(life, h.priority))
                .await
                .is_err()
            {
                return;
            }
            outstanding += 1;
        }
        let (ended, next) = {
            let ended = lock(&stream.state).ended;
            let q = lock(&sub.queue);
            (ended && q.is_empty(), q.next_deadline())
        };
        if ended {
            let _ = conn.send(Msg::End.encode(), control()).await;
            let _ = tokio::time::timeout(Duration::from_secs(2), conn.close()).await;
            return;
        }
        // Window full: wait for the connection to report a message done
        // (and expire what waits here meanwhile); otherwise sleep until a
        // message arrives or one expires.
        let full = outstanding >= SUBSCRIBER_WINDOW;
        let poll = next.map_or(Duration::from_secs(1), |d| {
            Duration::from_micros((d - now_us()).clamp(0, 1_000_000) as u64)
        });
        tokio::select! {
            () = signal.waiting(), if full => {}
            () = sub.notify.notified(), if !full => {}
            () = tokio::time::sleep(poll) => lock(&sub.queue).expire(now_us()),
            m = conn.receive() => match m.map(|m| m.map(|m| Msg::decode(&m.data))) {
                Ok(Some(Ok(Msg::Ping { t1_us }))) => {
                    let pong = Msg::Pong { t1_us, t2_us: now_us() };
                    if conn.send(pong.encode(), control()).await.is_err() {
                        return;
                    }
                }
                // `End`, a close, an error or a protocol error: it leaves.
                _ => return,
            },
        }
    }
}

/// A stream not published here, played from the upstream relay while it
/// has subscribers (retried each second when the upstream fails).
async fn run_upstream(relay: Arc<Relay>, stream: Arc<Stream>, name: String) {
    let Some(up) = relay.cfg.upstream.clone() else {
        return;
    };
    let req = Request {
        role: Role::Play,
        stream: StreamId {
            resource: name,
            token: up.token.clone(),
            ..StreamId::default()
        },
        // The end-to-end deadline only: each subscriber here applies its own.
        latency: Duration::ZERO,
    };
    loop {
        if lock(&stream.state).subs.is_empty() {
            break;
        }
        if let Ok(mut s) = Session::connect(&up.preconnection, &req).await {
            lock(&stream.state).publisher = true;
            loop {
                // Leave when the last subscriber has.
                let r = tokio::select! {
                    r = s.receive() => r,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {
                        if lock(&stream.state).subs.is_empty() { break }
                        continue;
                    }
                };
                match r {
                    Ok(Some(m)) => publish(
                        &stream,
                        Item {
                            header: m.header,
                            payload: m.payload,
                        },
                    ),
                    Ok(None) => {
                        let mut st = lock(&stream.state);
                        st.ended = true;
                        for s in &st.subs {
                            s.notify.notify_one();
                        }
                        break;
                    }
                    Err(_) => break,
                }
            }
            lock(&stream.state).publisher = false;
            let _ = s.close().await;
        }
        if lock(&stream.state).ended {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    lock(&stream.state).upstream = false;
    relay.tidy(&stream);
}

/// A refusal from the relay as [`client::refused`] makes it.
pub use client::refused;
