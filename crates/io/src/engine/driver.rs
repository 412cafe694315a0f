//! The task that runs the sans-IO engine: [`TunHost::drive`] with a step
//! that moves data between the engine and the streams' queues.

use super::shared::{ConnState, Failure, Mode, Shared, TxItem, RX_MESSAGE_OVERHEAD};
use super::stack::{Command, Reply, ShutdownReport, StackOptions, StackStats};
use crate::message::{ReceivedMessage, StreamError};
use crate::tun::host::{Step, TunHost};
use hollywood_msg::Deframer;
use hollywood_tcp::{
    Config, ConnHandle, Connection, Endpoint, EndpointEvent, Event, Instant, MessageMeta,
    SendMessageError, State,
};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Bytes a message reader takes from the engine's receive buffer
/// before it pulls the messages they completed.
const READ_CHUNK: usize = 64 << 10;

/// Task-side state of one connection.
#[derive(Debug)]
struct Entry {
    shared: Arc<Shared>,
    /// Made when the receiver reads messages (a byte stream has none);
    /// boxed, so the map's spare slots cost a pointer, not a deframer.
    deframer: Option<Box<Deframer>>,
    peer_fin: bool,
    close_sent: bool,
    aborted: bool,
    /// The engine reported `Closed`.
    closed: bool,
    /// The deframer's timer, as filed in `Driver::timers`.
    timer: Option<Instant>,
}

struct Pending {
    reply: Reply<Arc<Shared>>,
    deadline: Instant,
}

struct Driver {
    cmds: mpsc::UnboundedReceiver<Command>,
    options: StackOptions,
    /// Default connection configuration (MSS clamped to the TUN MTU).
    config: Config,
    mtu: u32,
    /// tokio time of engine time zero.
    epoch: tokio::time::Instant,
    conns: HashMap<ConnHandle, Entry>,
    pending: HashMap<ConnHandle, Pending>,
    listeners: HashMap<SocketAddr, mpsc::Sender<Arc<Shared>>>,
    stats: StackStats,
    /// Every handle is gone: finish once the connections are done.
    detached: bool,
    shutdown: Option<oneshot::Sender<ShutdownReport>>,
    events: Vec<EndpointEvent>,
    /// Connections the handles poked (`Control::poke`).
    poked: Arc<Mutex<Vec<ConnHandle>>>,
    /// Deframer timers, `(deadline, handle)`.
    timers: BTreeSet<(Instant, ConnHandle)>,
    /// Service every connection on the next step (a listener went away:
    /// streams waiting in its queue were dropped unseen).
    sweep: bool,
    /// The connections to service this step.
    todo: Vec<ConnHandle>,
    /// When connections were last checked for being orphaned.
    orphan_scan: Instant,
}

/// How often every connection is checked for a state nobody else holds
/// any more (a stream dropped where no handle code runs: a connect
/// future cancelled after its reply, a queue freed with its contents).
/// A count per connection, no lock: 10 000 connections cost microseconds.
const ORPHAN_SCAN: Duration = Duration::from_secs(1);

/// `config` with the MSS lowered so a full segment fits an `mtu`-byte IP
/// packet (the IPv4 value, MTU − 40; RFC 9293 §3.7.1), as `TunHost` does
/// for its own configuration.
fn clamp_mss(mut config: Config, mtu: u32) -> Config {
    let limit = u16::try_from(mtu.saturating_sub(40)).unwrap_or(u16::MAX);
    config.mss = config.mss.min(limit);
    crate::tun::host::host_memory_defaults(config)
}

pub(super) async fn run(
    mut host: TunHost,
    cmds: mpsc::UnboundedReceiver<Command>,
    options: StackOptions,
    failure: Arc<Mutex<Option<Arc<str>>>>,
    poked: Arc<Mutex<Vec<ConnHandle>>>,
) {
    let mtu = host.tun().mtu();
    host.endpoint_mut().track_touched(true);
    let config = host.config_for(std::net::Ipv4Addr::UNSPECIFIED.into());
    let mut driver = Driver {
        cmds,
        options,
        config,
        mtu,
        epoch: host.to_tokio_time(Instant::ZERO),
        conns: HashMap::new(),
        pending: HashMap::new(),
        listeners: HashMap::new(),
        stats: StackStats::default(),
        detached: false,
        shutdown: None,
        events: Vec::new(),
        poked,
        timers: BTreeSet::new(),
        sweep: false,
        todo: Vec::new(),
        orphan_scan: Instant::ZERO,
    };
    let result = host.drive(|step| driver.step(step)).await;
    let why = match result {
        Ok(()) => Failure::StackClosed,
        Err(e) => {
            let msg: Arc<str> = e.to_string().into();
            *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg.clone());
            Failure::StackFailed(msg)
        }
    };
    for (_, e) in driver.conns.drain() {
        let mut st = e.shared.lock();
        if st.failure.is_none() && !st.closed {
            st.failure = Some(why.clone());
        }
        st.closed = true;
        st.wake_all();
    }
    // Pending connects and listeners see their channels close.
    driver.pending.clear();
    driver.listeners.clear();
    if let Some(reply) = driver.shutdown.take() {
        let _ = reply.send(ShutdownReport {
            host: host.stats(),
            endpoint: host.endpoint().stats(),
            stack: driver.stats,
        });
    }
}

impl Driver {
    fn step(&mut self, step: &mut Step<'_>) -> ControlFlow<()> {
        let now = step.now();
        self.events.clear();
        self.events.extend_from_slice(step.events());
        let ep = step.endpoint();
        loop {
            match self.cmds.try_recv() {
                Ok(c) => self.command(c, ep, now),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    // Every handle is gone: look at every connection once.
                    self.sweep |= !self.detached;
                    self.detached = true;
                    break;
                }
            }
        }
        let events = std::mem::take(&mut self.events);
        for &e in &events {
            self.event(e, ep);
        }
        self.events = events;
        self.expire_connects(ep, now);
        // Service only what may have changed: connections the engine
        // touched (input, timers, events), those a handle poked, pending
        // connects and due deframer timers. An idle connection costs
        // nothing per step, so a host with thousands of them moves
        // packets at the cost of the busy ones.
        let mut todo = std::mem::take(&mut self.todo);
        todo.clear();
        ep.take_touched(&mut todo);
        todo.append(&mut self.poked.lock().unwrap_or_else(|p| p.into_inner()));
        for e in &self.events {
            match *e {
                EndpointEvent::Accepted { handle, .. } | EndpointEvent::Conn { handle, .. } => {
                    todo.push(handle);
                }
            }
        }
        todo.extend(self.pending.keys().copied());
        while let Some(&(t, h)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            if let Some(e) = self.conns.get_mut(&h) {
                e.timer = None;
            }
            todo.push(h);
        }
        if std::mem::take(&mut self.sweep) {
            todo.extend(self.conns.keys().copied());
        }
        if now.saturating_duration_since(self.orphan_scan) >= ORPHAN_SCAN {
            self.orphan_scan = now;
            todo.extend(
                self.conns
                    .iter()
                    .filter(|(h, e)| {
                        Arc::strong_count(&e.shared) == 1 && !self.pending.contains_key(h)
                    })
                    .map(|(&h, _)| h),
            );
        }
        todo.sort_unstable();
        todo.dedup();
        self.stats.steps += 1;
        self.stats.serviced += todo.len() as u64;
        for &h in &todo {
            let timer = self.service(h, ep, now);
            self.file_timer(h, timer);
        }
        self.todo = todo;
        let mut wake_at: Option<Instant> = self.timers.first().map(|&(t, _)| t);
        if !self.conns.is_empty() {
            let t = self.orphan_scan + ORPHAN_SCAN;
            wake_at = Some(wake_at.map_or(t, |w| w.min(t)));
        }
        if let Some(t) = self.pending.values().map(|p| p.deadline).min() {
            wake_at = Some(wake_at.map_or(t, |w| w.min(t)));
        }
        if let Some(t) = wake_at {
            step.wake_after(t.saturating_duration_since(now));
        }
        if let Some(reply) = self.shutdown.take() {
            let ep = step.endpoint();
            for &h in self.conns.keys() {
                if let Some(c) = ep.connection_mut(h) {
                    c.abort();
                }
            }
            self.shutdown = Some(reply);
            return ControlFlow::Break(());
        }
        if self.detached && self.pending.is_empty() && self.conns.values().all(Entry::finished) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn connection_config(&self, config: Option<Config>) -> Config {
        match config {
            Some(c) => clamp_mss(c, self.mtu),
            None => self.config.clone(),
        }
    }

    /// File connection `h`'s deframer timer (it is gone: nothing).
    fn file_timer(&mut self, h: ConnHandle, timer: Option<Instant>) {
        let Some(e) = self.conns.get_mut(&h) else {
            return;
        };
        if e.timer != timer {
            if let Some(old) = e.timer {
                self.timers.remove(&(old, h));
            }
            if let Some(t) = timer {
                self.timers.insert((t, h));
            }
            e.timer = timer;
        }
    }

    /// Forget connection `h` (and its timer).
    fn forget(&mut self, h: ConnHandle) -> Option<Entry> {
        let e = self.conns.remove(&h)?;
        if let Some(t) = e.timer {
            self.timers.remove(&(t, h));
        }
        Some(e)
    }

    fn new_shared(&self, h: ConnHandle, conn: &Connection) -> Arc<Shared> {
        Arc::new(Shared {
            handle: h,
            local: conn.local(),
            remote: conn.remote(),
            ooo: conn.config().hollywood.out_of_order_delivery,
            send_queue: self.options.send_queue,
            recv_queue: self.options.recv_queue,
            send_buffer: conn.config().send_buffer,
            connect_timeout: self.options.connect_timeout,
            state: Mutex::new(ConnState::new()),
        })
    }

    fn insert(&mut self, h: ConnHandle, shared: Arc<Shared>) {
        self.conns.insert(
            h,
            Entry {
                shared,
                deframer: None,
                peer_fin: false,
                close_sent: false,
                aborted: false,
                closed: false,
                timer: None,
            },
        );
    }

    fn command(&mut self, c: Command, ep: &mut Endpoint, now: Instant) {
        match c {
            Command::Listen {
                local,
                config,
                reply,
            } => {
                let config = self.connection_config(config);
                let r = ep.listen_with(local, config).map(|()| {
                    let (tx, rx) = mpsc::channel(self.options.backlog.max(1));
                    self.listeners.insert(local, tx);
                    rx
                });
                let _ = reply.send(r.map_err(StreamError::Engine));
            }
            Command::Unlisten(local) => {
                if self.listeners.remove(&local).is_some() {
                    // Fails only if not listening, which cannot be here.
                    let _ = ep.unlisten(local);
                    // Accepted streams still in its queue are dropped:
                    // their connections are orphans now.
                    self.sweep = true;
                }
            }
            Command::Connect {
                local,
                remote,
                config,
                reply,
            } => {
                let config = self.connection_config(config);
                match ep.connect_with(now, local, remote, config) {
                    Ok(h) => {
                        let Some(conn) = ep.connection(h) else {
                            let _ = reply.send(Err(StreamError::Closed));
                            return;
                        };
                        let shared = self.new_shared(h, conn);
                        self.insert(h, shared);
                        self.pending.insert(
                            h,
                            Pending {
                                reply,
                                deadline: now + self.options.connect_timeout,
                            },
                        );
                    }
                    Err(e) => {
                        self.stats.connect_failed += 1;
                        let _ = reply.send(Err(StreamError::Engine(e)));
                    }
                }
            }
            Command::Stats(reply) => {
                let _ = reply.send((ep.stats(), self.stats));
            }
            Command::Shutdown(reply) => self.shutdown = Some(reply),
        }
    }

    /// A connect attempt ended before ESTABLISHED.
    fn connect_failed(&mut self, h: ConnHandle, ep: &mut Endpoint, err: StreamError) {
        if let Some(p) = self.pending.remove(&h) {
            self.stats.connect_failed += 1;
            let _ = p.reply.send(Err(err));
        }
        if let Some(c) = ep.connection_mut(h) {
            c.abort();
        }
        if let Some(e) = self.forget(h) {
            e.shared.lock().closed = true;
        }
    }

    fn expire_connects(&mut self, ep: &mut Endpoint, now: Instant) {
        let expired: Vec<ConnHandle> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now || p.reply.is_closed())
            .map(|(&h, _)| h)
            .collect();
        for h in expired {
            let err = StreamError::ConnectTimeout(self.options.connect_timeout);
            self.connect_failed(h, ep, err);
        }
    }

    fn event(&mut self, e: EndpointEvent, ep: &mut Endpoint) {
        match e {
            EndpointEvent::Accepted { handle, .. } => {
                let Some(conn) = ep.connection(handle) else {
                    return;
                };
                let local = conn.local();
                let shared = self.new_shared(handle, conn);
                let listener = self.listeners.get(&local).or_else(|| {
                    let any = SocketAddr::new(
                        match local {
                            SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
                            SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
                        },
                        local.port(),
                    );
                    self.listeners.get(&any)
                });
                match listener.map(|l| l.try_send(shared.clone())) {
                    Some(Ok(())) => {
                        self.stats.accepted += 1;
                        self.insert(handle, shared);
                    }
                    _ => {
                        self.stats.accept_overflow += 1;
                        if let Some(c) = ep.connection_mut(handle) {
                            c.abort();
                        }
                    }
                }
            }
            EndpointEvent::Conn { handle, event } => {
                if self.pending.contains_key(&handle) {
                    match event {
                        Event::Connected => {
                            let p = self.pending.remove(&handle).expect("checked above");
                            let shared = self.conns.get(&handle).map(|e| e.shared.clone());
                            let sent = shared.is_some_and(|s| p.reply.send(Ok(s)).is_ok());
                            if sent {
                                self.stats.connected += 1;
                            } else {
                                // The connect future was dropped: abort.
                                self.connect_failed(handle, ep, StreamError::Closed);
                            }
                        }
                        Event::Reset => {
                            self.connect_failed(handle, ep, StreamError::ConnectionRefused)
                        }
                        Event::TimedOut => self.connect_failed(handle, ep, StreamError::TimedOut),
                        Event::Closed => self.connect_failed(handle, ep, StreamError::Closed),
                        _ => {}
                    }
                    return;
                }
                let Some(entry) = self.conns.get_mut(&handle) else {
                    return;
                };
                match event {
                    Event::PeerClosed => entry.peer_fin = true,
                    Event::Reset => entry.fail(Failure::Reset),
                    Event::TimedOut => entry.fail(Failure::TimedOut),
                    Event::Closed => entry.closed = true,
                    Event::Expired(x) => {
                        let mut st = entry.shared.lock();
                        let ConnState { expired, stats, .. } = &mut *st;
                        expired.push(x, stats.messages());
                    }
                    // Visible in `StreamStats::hollywood.rewriting_stopped`.
                    Event::RewritingStopped | Event::MessageSent { .. } => {}
                    Event::Connected | Event::Readable | Event::Writable => {}
                }
            }
        }
    }

    /// Move data between connection `h` and its stream; returns when the
    /// deframer wants a timer.
    fn service(&mut self, h: ConnHandle, ep: &mut Endpoint, now: Instant) -> Option<Instant> {
        let epoch = self.epoch;
        let deframer_config = self.options.deframer;
        let entry = self.conns.get_mut(&h)?;
        let Some(conn) = ep.connection_mut(h) else {
            // Gone from the engine (e.g. closed and removed).
            let mut st = entry.shared.lock();
            st.closed = true;
            if st.failure.is_none() && !entry.aborted {
                if entry.peer_fin {
                    st.eof = true;
                }
                // LAST-ACK → CLOSED: the peer acknowledged our FIN.
                if entry.close_sent {
                    st.fin_acked = true;
                }
            }
            st.wake_all();
            drop(st);
            self.forget(h);
            return None;
        };
        // Only the task holds the state (never handed out, or the handles
        // and the listener queue holding it are gone): nobody will use the
        // stream, so close it like a dropped one. A pending connect's state
        // is held only by the task until it is ESTABLISHED.
        let orphan = Arc::strong_count(&entry.shared) == 1 && !self.pending.contains_key(&h);
        let shared = entry.shared.clone();
        let mut guard = shared.lock();
        let st = &mut *guard;
        if orphan && (st.sender_alive || st.receiver_alive) {
            st.sender_alive = false;
            st.receiver_alive = false;
        }
        let mut wake_tx = false;
        let mut wake_rx = false;
        if st.abort_requested && !entry.aborted {
            conn.abort();
            entry.aborted = true;
            st.tx.clear();
            st.tx_bytes = 0;
        }
        // The application let go of the stream while data it never read
        // was waiting (or arrives afterwards): RST, as Linux's tcp_close
        // does, to tell the peer that data was lost (RFC 1122 §4.2.2.13);
        // a FIN would claim an orderly end.
        if !st.sender_alive
            && !st.receiver_alive
            && !entry.aborted
            && conn.state() != State::Closed
            && (st.unread_dropped || conn.recv_ready() > 0 || conn.segments_ready() > 0)
        {
            conn.abort();
            entry.aborted = true;
            st.tx.clear();
            st.tx_bytes = 0;
            self.stats.reset_unread += 1;
        }
        // Send side: queue → engine.
        while let Some(item) = st.tx.front_mut() {
            let before = item.remaining();
            let result = match item {
                TxItem::Bytes { buf, off } => match conn.send(&buf[*off..]) {
                    Ok(n) => {
                        *off += n;
                        Ok(n)
                    }
                    Err(hollywood_tcp::Error::WouldBlock) => Ok(0),
                    Err(e) => Err(e),
                },
                TxItem::Message {
                    frame,
                    id,
                    lifetime,
                    depends_on,
                    replaceable,
                    substream,
                    priority,
                    queued,
                } => {
                    // The lifetime runs from `send_message`; time spent in
                    // this queue is used up (thesis §7.2: "the time that
                    // the message has spent in the sending buffer").
                    let waited = (epoch + now.since_epoch()).saturating_duration_since(*queued);
                    let meta = MessageMeta {
                        id: *id,
                        lifetime: lifetime.map(|l| l.saturating_sub(waited)),
                        depends_on: *depends_on,
                        replaceable: *replaceable,
                        substream: *substream,
                        priority: *priority,
                    };
                    match conn.send_message(now, frame, meta) {
                        Ok(()) => Ok(frame.len()),
                        Err(SendMessageError::WouldBlock) => Ok(0),
                        Err(SendMessageError::State(e)) => Err(e),
                        // Checked by `MessageFramer` before the id was
                        // assigned; the engine's rules are the same.
                        Err(SendMessageError::Meta(_)) => Err(hollywood_tcp::Error::InvalidState),
                        // The framer's limit is below any send buffer the
                        // stack configures; a smaller one cannot take it.
                        Err(SendMessageError::TooLarge { .. }) => {
                            Err(hollywood_tcp::Error::InvalidState)
                        }
                    }
                }
            };
            match result {
                Ok(0) => break,
                Ok(n) => {
                    st.tx_bytes -= n;
                    wake_tx = true;
                    if n == before {
                        st.tx.pop_front();
                    } else {
                        break;
                    }
                }
                Err(e) => {
                    let f = match e {
                        hollywood_tcp::Error::Reset => Failure::Reset,
                        hollywood_tcp::Error::TimedOut => Failure::TimedOut,
                        _ => {
                            Failure::StackFailed(format!("engine refused queued data: {e}").into())
                        }
                    };
                    if st.failure.is_none() && !entry.aborted && !entry.close_sent {
                        st.failure = Some(f);
                    }
                    st.tx.clear();
                    st.tx_bytes = 0;
                    wake_tx = true;
                    break;
                }
            }
        }
        // Receive side: engine → queues.
        let mode = if st.receiver_alive {
            st.rx_mode
        } else {
            Mode::Unset
        };
        let limit = if entry.peer_fin {
            usize::MAX
        } else {
            shared.recv_queue
        };
        let now_ns = now.as_nanos();
        match mode {
            Mode::Unset if !st.receiver_alive => {
                // Nobody reads any more: discard.
                if shared.ooo {
                    while conn.recv_segment().is_some() {}
                } else {
                    while matches!(conn.recv_with(usize::MAX, |_| {}), Ok(n) if n > 0) {}
                }
            }
            Mode::Unset => {}
            Mode::Bytes => loop {
                let room = limit.saturating_sub(st.rx_bytes.len());
                if room == 0 {
                    st.rx_stalled = true;
                    break;
                }
                // Straight from the engine's receive buffer to the queue.
                let rx = &mut st.rx_bytes;
                match conn.recv_with(room, |piece| rx.extend(piece)) {
                    Ok(0) => {
                        st.eof = true;
                        wake_rx = true;
                        break;
                    }
                    Ok(_) => wake_rx = true,
                    Err(_) => break,
                }
            },
            Mode::Messages => {
                let d = entry
                    .deframer
                    .get_or_insert_with(|| Box::new(Deframer::new(deframer_config)));
                if shared.ooo {
                    // Thesis §4.3: every segment as it arrives, with its
                    // sequence number; the deframer finds whole frames in
                    // it at once and reassembles the rest.
                    loop {
                        if st.rx_msg_bytes >= limit {
                            st.rx_stalled = true;
                            break;
                        }
                        let Some(s) = conn.recv_segment() else { break };
                        d.push_segment(s.seq.0, &s.payload, s.arrival.as_nanos());
                        wake_rx |= pull_messages(d, st, epoch);
                    }
                    // Only once every segment that arrived has been
                    // pushed: while the queue is full, segments below
                    // RCV.NXT still wait in the engine, and bytes below
                    // the floor would be ignored when they come.
                    if conn.segments_ready() == 0 {
                        d.advance_floor(conn.rcv_nxt().0);
                    }
                    if entry.peer_fin && conn.segments_ready() == 0 && !st.eof {
                        st.eof = true;
                        wake_rx = true;
                    }
                } else {
                    loop {
                        if st.rx_msg_bytes >= limit {
                            st.rx_stalled = true;
                            break;
                        }
                        // Straight from the engine's receive buffer to the
                        // deframer, `READ_CHUNK` at a time.
                        match conn.recv_with(READ_CHUNK, |piece| d.push_stream(piece, now_ns)) {
                            Ok(0) => {
                                st.eof = true;
                                wake_rx = true;
                                break;
                            }
                            Ok(_) => wake_rx |= pull_messages(d, st, epoch),
                            Err(_) => break,
                        }
                    }
                }
                d.handle_timeout(now_ns);
                wake_rx |= pull_messages(d, st, epoch);
                st.stats.messages().deframer = d.stats();
            }
        }
        // Close: FIN after the queue drained, whether or not the peer's data
        // was read (a half-close: the peer may not wait for us to read).
        // Data the receiver has not started reading stays in the engine,
        // which keeps a closed connection while it holds unread data, and
        // this stream with it (`rx_pending`), until it is read.
        let want_close = st.close_requested || !st.sender_alive;
        if want_close && st.tx.is_empty() && !entry.close_sent && !entry.aborted {
            conn.close();
            entry.close_sent = true;
            st.fin_sent = true;
        }
        let state = conn.state();
        if entry.close_sent
            && !st.fin_acked
            && (matches!(state, State::FinWait2 | State::TimeWait)
                || (state == State::Closed && st.failure.is_none()))
        {
            st.fin_acked = true;
            wake_tx = true;
        }
        st.stats.connection = conn.stats().clone();
        st.stats.hollywood = *conn.hollywood_stats();
        st.stats.ooo = *conn.ooo_stats();
        st.stats.srtt = conn.srtt().or(st.stats.srtt);
        st.stats.rto = Some(conn.rto());
        st.stats.state = Some(state);
        st.rx_pending = st.receiver_alive
            && st.failure.is_none()
            && (conn.recv_ready() > 0 || conn.segments_ready() > 0);
        if entry.closed || state == State::Closed {
            st.closed = true;
            if entry.peer_fin && st.failure.is_none() && !st.rx_pending {
                st.eof = true;
            }
            wake_tx = true;
            wake_rx = true;
        }
        if let Some(d) = entry
            .deframer
            .as_mut()
            .filter(|_| st.eof && mode == Mode::Messages)
        {
            // End of stream: ordered messages still waiting for a
            // predecessor that can no longer arrive are released, not lost.
            d.finish();
            wake_rx |= pull_messages(d, st, epoch);
        }
        if wake_tx {
            if let Some(w) = st.tx_waker.take() {
                w.wake();
            }
        }
        if wake_rx {
            if let Some(w) = st.rx_waker.take() {
                w.wake();
            }
        }
        let timer = entry
            .deframer
            .as_ref()
            .and_then(|d| d.poll_timeout())
            .map(Instant::from_nanos);
        st.release_drained_queues();
        let remove = entry.closed && !st.rx_pending;
        drop(guard);
        if remove {
            self.forget(h);
            return None;
        }
        timer
    }
}

/// Move deframed messages into the stream's queue; whether any moved.
fn pull_messages(d: &mut Deframer, st: &mut ConnState, epoch: tokio::time::Instant) -> bool {
    let mut any = false;
    while let Some(m) = d.poll_message() {
        st.rx_msg_bytes += m.payload.len() + RX_MESSAGE_OVERHEAD;
        st.rx_msgs.push_back(ReceivedMessage {
            id: m.id,
            substream: m.substream,
            substream_seq: m.substream_seq,
            payload: m.payload,
            ordered: m.ordered,
            arrival: epoch + Duration::from_nanos(m.arrival_ns),
        });
        any = true;
    }
    any
}

impl Entry {
    fn fail(&mut self, f: Failure) {
        let mut st = self.shared.lock();
        if st.failure.is_none() {
            st.failure = Some(f);
        }
        st.wake_all();
    }

    /// Nothing more to do for a detached stack: our FIN was acknowledged,
    /// or the connection is gone or aborted.
    fn finished(&self) -> bool {
        let st = self.shared.lock();
        self.closed || self.aborted || st.fin_acked || st.failure.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MessageFramer, SendMessage};

    #[test]
    fn mss_clamp_matches_host() {
        let c = Config::default();
        assert_eq!(clamp_mss(c.clone(), 1500).mss, 1460);
        assert_eq!(clamp_mss(c.clone(), 1280).mss, 1240);
        assert_eq!(clamp_mss(c, 65_535).mss, 1460, "never raised");
    }

    #[test]
    fn empty_messages_count_against_the_receive_limit() {
        // Review B3: a peer sending empty messages must fill the queue's
        // byte budget like any other, or the stack drains the engine into
        // an unbounded queue while the application does not read.
        let mut f = MessageFramer::default();
        let mut wire = Vec::new();
        for _ in 0..1000 {
            f.frame(&SendMessage::new(Vec::new()), None, &mut wire)
                .unwrap();
        }
        let mut d = Deframer::default();
        d.push_stream(&wire, 0);
        let mut st = ConnState::new();
        assert!(pull_messages(&mut d, &mut st, tokio::time::Instant::now()));
        assert_eq!(st.rx_msgs.len(), 1000);
        assert_eq!(st.rx_msg_bytes, 1000 * RX_MESSAGE_OVERHEAD);
    }

    #[test]
    fn deframed_messages_keep_arrival_times() {
        let mut f = MessageFramer::default();
        let mut wire = Vec::new();
        for i in 0..3u8 {
            f.frame(
                &SendMessage::new(vec![i + 1; 10]).substream(u16::from(i)),
                None,
                &mut wire,
            )
            .unwrap();
        }
        let mut d = Deframer::default();
        d.push_stream(&wire, 5_000_000);
        let mut st = ConnState::new();
        let epoch = tokio::time::Instant::now();
        assert!(pull_messages(&mut d, &mut st, epoch));
        assert!(!pull_messages(&mut d, &mut st, epoch));
        assert_eq!(st.rx_msgs.len(), 3);
        assert_eq!(st.rx_msg_bytes, 30 + 3 * RX_MESSAGE_OVERHEAD);
        let m = &st.rx_msgs[2];
        assert_eq!((m.id, m.substream, m.payload[0]), (2, 2, 3));
        assert_eq!(m.arrival - epoch, Duration::from_millis(5));
    }
}
