//! `hollywoodsink`: each buffer one message, sent with a lifetime, a
//! priority and a dependency ([`crate::mapping`]), over whatever racing
//! picks (QUIC, TCP Hollywood on the engine, the message layer on kernel
//! TCP), or published to a relay.
//!
//! The connection runs on a tokio runtime the element owns, started in
//! `start` (READY → PAUSED); `render` hands buffers to it through a
//! channel. Before the connection is up (a listener waiting for its
//! caller) buffers wait there until their lifetime ends. A listener
//! accepts the next caller when one leaves. At EOS the sink closes the
//! connection after what is queued and waits (at most the latency plus
//! 5 s) for the peer's close.
//!
//! On a direct connection each message starts with the sender-time header
//! of [`crate::playout`] (`timestamps=false`: the bare buffer, for a
//! receiver other than `hollywoodsrc`); to a relay the media header's
//! `origin_us` carries that time.

use crate::common::{self, Settings, Target};
use crate::mapping::{BufferFlags, Mapper, Plan};
use crate::playout;
use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::subclass::prelude::*;
use hollywood_taps::pubsub::{Request, Role, Session};
use hollywood_taps::relay::Mode;
use hollywood_taps::{
    Connection, ConnectionStats, Error, Event, MessageContext, MessageRef, Protocol,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

glib::wrapper! {
    /// The `hollywoodsink` element.
    pub struct HollywoodSink(ObjectSubclass<imp::HollywoodSink>)
        @extends gst_base::BaseSink, gst::Element, gst::Object,
        @implements gst::URIHandler;
}

/// Register `hollywoodsink` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "hollywoodsink",
        gst::Rank::NONE,
        HollywoodSink::static_type(),
    )
}

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "hollywoodsink",
        gst::DebugColorFlags::empty(),
        Some("Hollywood sink"),
    )
});

/// Buffers between `render` and the connection task.
const CHANNEL: usize = 1024;

/// Counters shared by the element and its task.
#[derive(Debug, Default)]
struct Stats {
    buffers: AtomicU64,
    bytes: AtomicU64,
    key_messages: AtomicU64,
    groups: AtomicU64,
    group_ms: AtomicU64,
    /// Buffers whose lifetime ended before a connection was up.
    expired_unconnected: AtomicU64,
    connections: AtomicU64,
    protocol: Mutex<Option<Protocol>>,
    /// The connections' counters: those that ended, plus the current one.
    ended: Mutex<ConnectionStats>,
    current: Mutex<ConnectionStats>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Stats {
    fn structure(&self) -> gst::Structure {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut t = *lock(&self.ended);
        t += *lock(&self.current);
        gst::Structure::builder("application/x-hollywood-sink-stats")
            .field(
                "protocol",
                lock(&self.protocol).map_or("none", |p| p.name()),
            )
            .field("connections", g(&self.connections))
            .field("buffers", g(&self.buffers))
            .field("bytes", g(&self.bytes))
            .field("keyframe-messages", g(&self.key_messages))
            .field("groups", g(&self.groups))
            .field("group-duration-ms", g(&self.group_ms))
            .field("messages-queued", t.queued)
            .field("messages-sent", t.sent)
            .field("messages-expired", t.expired + g(&self.expired_unconnected))
            .field("messages-abandoned", t.abandoned)
            .field("send-errors", t.send_errors)
            .build()
    }

    fn connection_ended(&self) {
        let c = std::mem::take(&mut *lock(&self.current));
        *lock(&self.ended) += c;
    }
}

enum Cmd {
    Buffer {
        data: Vec<u8>,
        flags: BufferFlags,
        /// This process's clock when `render` took the buffer
        /// ([`hollywood_taps::pubsub::now_us`]): when it was sent, as SRT's
        /// source time. (The buffer's own time would also absorb the
        /// encoder's delay, but a sender whose encoder falls behind real
        /// time drifts away from the receiver's clock mapping: measured,
        /// docs/GSTREAMER.md.)
        sent_us: i64,
    },
    /// Close after what is queued; answer when done.
    Eos(std::sync::mpsc::SyncSender<()>),
}

/// A connection, direct or to a relay.
enum Out {
    Direct(Connection),
    Relay(Session),
}

impl Out {
    fn protocol(&self) -> Protocol {
        match self {
            Out::Direct(c) => c.protocol(),
            Out::Relay(s) => s.protocol(),
        }
    }

    fn stats(&self) -> ConnectionStats {
        match self {
            Out::Direct(c) => c.stats(),
            Out::Relay(s) => s.connection_stats(),
        }
    }

    /// Send one message; the reference of a direct one. `sent_us`: the
    /// sender time a direct message carries in its header (`None`: none).
    async fn send(
        &mut self,
        data: Vec<u8>,
        plan: &Plan,
        lifetime: Duration,
        depends_on: Option<MessageRef>,
        sent_us: Option<i64>,
    ) -> Result<Option<MessageRef>, Error> {
        match self {
            Out::Direct(c) => {
                let data = match sent_us {
                    Some(t) => playout::encode(t, &data),
                    None => data,
                };
                // RFC 9622: lower is more urgent, default 100; keyframe
                // data first, then audio, other video, the rest.
                let mut ctx = MessageContext::lifetime(lifetime)
                    .ordered(false)
                    .priority(1 + u32::from(plan.priority));
                if let Some(d) = depends_on {
                    ctx = ctx.depends_on(d);
                }
                c.send(data, ctx).await.map(Some)
            }
            Out::Relay(s) => s
                .publish(&data, plan.flags(), plan.priority, lifetime)
                .await
                .map(|()| None),
        }
    }

    /// Read send events; an error when the connection failed.
    fn drain(&mut self) -> Result<(), Error> {
        if let Out::Direct(c) = self {
            while let Some(e) = c.try_event() {
                if let Event::ConnectionError(why) = e {
                    return Err(Error::Connection(why));
                }
            }
        }
        Ok(())
    }

    /// Close after what is queued, waiting at most `wait` for the peer.
    async fn close(self, wait: Duration) {
        match self {
            Out::Direct(mut c) => {
                let _ = c.close().await;
                let _ = tokio::time::timeout(wait, async {
                    while let Some(e) = c.next_event().await {
                        if matches!(e, Event::Closed | Event::ConnectionError(_)) {
                            break;
                        }
                    }
                })
                .await;
            }
            Out::Relay(s) => {
                let _ = tokio::time::timeout(wait, s.close()).await;
            }
        }
    }
}

/// A planned buffer waiting for a connection.
struct Waiting {
    at: Instant,
    data: Vec<u8>,
    plan: Plan,
    sent_us: i64,
}

struct Task {
    target: Target,
    latency: Duration,
    group: Option<Duration>,
    /// Direct messages carry the sender-time header.
    timestamps: bool,
    rx: mpsc::Receiver<Cmd>,
    stats: Arc<Stats>,
    error: Arc<Mutex<Option<String>>>,
}

impl Task {
    async fn run(mut self) {
        if let Err(e) = self.serve().await {
            *lock(&self.error) = Some(e);
        }
    }

    async fn connect(
        target: &Target,
        listener: &mut Option<hollywood_taps::Listener>,
        latency: Duration,
    ) -> Result<Out, Error> {
        if let Some(l) = listener {
            return l.accept().await.map(Out::Direct).ok_or(Error::Closed);
        }
        match &target.uri.stream {
            Some((Role::Play, _)) => Err(Error::Endpoint(
                "hollywoodsink publishes: a relay's stream is mode=publish".into(),
            )),
            Some((Role::Publish, id)) => {
                let req = Request {
                    role: Role::Publish,
                    stream: id.clone(),
                    latency,
                };
                Session::connect(&target.preconnection, &req)
                    .await
                    .map(Out::Relay)
            }
            None => target.preconnection.initiate().await.map(Out::Direct),
        }
    }

    async fn serve(&mut self) -> Result<(), String> {
        let t0 = Instant::now();
        let mut mapper = Mapper::new(self.latency, self.group);
        let mut listener = match self.target.mode {
            Mode::Listener => Some(
                self.target
                    .preconnection
                    .listen()
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            Mode::Caller => None,
        };
        let mut waiting: VecDeque<Waiting> = VecDeque::new();
        loop {
            // Connect (or accept) while buffers keep arriving.
            let out = {
                let connect = Self::connect(&self.target, &mut listener, self.latency);
                tokio::pin!(connect);
                loop {
                    tokio::select! {
                        c = &mut connect => break c,
                        cmd = self.rx.recv() => match cmd {
                            Some(Cmd::Buffer { data, flags, sent_us }) => {
                                let now = Instant::now();
                                let plan = self.plan(&mut mapper, &data, flags, now - t0);
                                waiting.push_back(Waiting { at: now, data, plan, sent_us });
                                self.expire_waiting(&mut waiting, now);
                            }
                            Some(Cmd::Eos(done)) => {
                                let _ = done.send(());
                                return Ok(());
                            }
                            None => return Ok(()),
                        },
                    }
                }
            };
            let mut out = out.map_err(|e| e.to_string())?;
            self.stats.connections.fetch_add(1, Ordering::Relaxed);
            *lock(&self.stats.protocol) = Some(out.protocol());
            gst::info!(CAT, "connected over {}", out.protocol());
            let ended = self.stream(&mut out, &mut mapper, &mut waiting, t0).await;
            self.stats.connection_ended();
            match ended {
                Ok(Some(done)) => {
                    out.close(self.latency + Duration::from_secs(5)).await;
                    let _ = done.send(());
                    return Ok(());
                }
                Ok(None) => return Ok(()),
                Err(e) if listener.is_some() => {
                    gst::warning!(CAT, "connection ended ({e}); accepting the next caller");
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn plan(&self, mapper: &mut Mapper, data: &[u8], flags: BufferFlags, t: Duration) -> Plan {
        let plan = mapper.plan(data, flags, t);
        let s = &self.stats;
        s.buffers.fetch_add(1, Ordering::Relaxed);
        s.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        if plan.key {
            s.key_messages.fetch_add(1, Ordering::Relaxed);
        }
        if plan.group_start {
            s.groups.fetch_add(1, Ordering::Relaxed);
        }
        s.group_ms
            .store(mapper.group().as_millis() as u64, Ordering::Relaxed);
        plan
    }

    fn expire_waiting(&self, waiting: &mut VecDeque<Waiting>, now: Instant) {
        waiting.retain(|w| {
            let alive = w.at + w.plan.lifetime > now;
            if !alive {
                self.stats
                    .expired_unconnected
                    .fetch_add(1, Ordering::Relaxed);
            }
            alive
        });
    }

    /// Send on `out` until EOS (`Some`), the element stops (`None`) or the
    /// connection fails.
    async fn stream(
        &mut self,
        out: &mut Out,
        mapper: &mut Mapper,
        waiting: &mut VecDeque<Waiting>,
        t0: Instant,
    ) -> Result<Option<std::sync::mpsc::SyncSender<()>>, Error> {
        // The last keyframe message of the current group, on this
        // connection.
        let mut last_key: Option<MessageRef> = None;
        let now = Instant::now();
        self.expire_waiting(waiting, now);
        let ts = |t: i64| self.timestamps.then_some(t);
        while let Some(w) = waiting.pop_front() {
            let left = (w.at + w.plan.lifetime).saturating_duration_since(now);
            send(out, w.data, &w.plan, left, &mut last_key, ts(w.sent_us)).await?;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                cmd = self.rx.recv() => match cmd {
                    Some(Cmd::Buffer { data, flags, sent_us }) => {
                        let plan = self.plan(mapper, &data, flags, Instant::now() - t0);
                        send(out, data, &plan, plan.lifetime, &mut last_key, ts(sent_us)).await?;
                    }
                    Some(Cmd::Eos(done)) => return Ok(Some(done)),
                    None => return Ok(None),
                },
                _ = tick.tick() => {}
            }
            out.drain()?;
            *lock(&self.stats.current) = out.stats();
        }
    }
}

async fn send(
    out: &mut Out,
    data: Vec<u8>,
    plan: &Plan,
    lifetime: Duration,
    last_key: &mut Option<MessageRef>,
    sent_us: Option<i64>,
) -> Result<(), Error> {
    if plan.group_start {
        *last_key = None;
    }
    let on = if plan.depends_on_key { *last_key } else { None };
    let r = out.send(data, plan, lifetime, on, sent_us).await?;
    if plan.key {
        if let Some(r) = r {
            *last_key = Some(r);
        }
    }
    Ok(())
}

struct Running {
    rt: tokio::runtime::Runtime,
    tx: mpsc::Sender<Cmd>,
    stats: Arc<Stats>,
    error: Arc<Mutex<Option<String>>>,
    latency: Duration,
}

mod imp {
    use super::*;

    /// See the module documentation.
    #[derive(Default)]
    pub struct HollywoodSink {
        settings: Mutex<Settings>,
        /// `group-lifetime` in ms (0: measured).
        group_ms: Mutex<u32>,
        /// `timestamps`: the sender-time header on direct messages.
        timestamps: Mutex<Option<bool>>,
        running: Mutex<Option<Running>>,
        /// The counters of the last run, after `stop`.
        last_stats: Mutex<Option<Arc<Stats>>>,
    }

    #[glib::object_subclass]
    impl ObjectSubclass for HollywoodSink {
        const NAME: &'static str = "GstHollywoodSink";
        type Type = super::HollywoodSink;
        type ParentType = gst_base::BaseSink;
        type Interfaces = (gst::URIHandler,);
    }

    impl ObjectImpl for HollywoodSink {
        fn properties() -> &'static [glib::ParamSpec] {
            static PROPS: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
                let mut p = common::properties();
                p.push(
                    glib::ParamSpecUInt::builder("group-lifetime")
                        .nick("Group lifetime")
                        .blurb(
                            "Milliseconds a keyframe stays useful beyond the latency \
                             (0: the measured time between keyframes)",
                        )
                        .maximum(600_000)
                        .default_value(0)
                        .mutable_ready()
                        .build(),
                );
                p.push(
                    glib::ParamSpecBoolean::builder("timestamps")
                        .nick("Timestamps")
                        .blurb(
                            "Start each message of a direct connection with the 12-byte \
                             sender-time header hollywoodsrc plays out by (false: the bare \
                             buffer, for receivers other than hollywoodsrc)",
                        )
                        .default_value(true)
                        .mutable_ready()
                        .build(),
                );
                p
            });
            PROPS.as_ref()
        }

        fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
            if pspec.name() == "group-lifetime" {
                *lock(&self.group_ms) = value.get().expect("type checked upstream");
                return;
            }
            if pspec.name() == "timestamps" {
                *lock(&self.timestamps) = Some(value.get().expect("type checked upstream"));
                return;
            }
            if let Err(e) = lock(&self.settings).set(pspec.name(), value) {
                gst::error!(CAT, imp = self, "{}: {e}", pspec.name());
            }
        }

        fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
            match pspec.name() {
                "group-lifetime" => lock(&self.group_ms).to_value(),
                "timestamps" => lock(&self.timestamps).unwrap_or(true).to_value(),
                "stats" => {
                    let s = lock(&self.running)
                        .as_ref()
                        .map(|r| r.stats.clone())
                        .or_else(|| lock(&self.last_stats).clone())
                        .unwrap_or_default();
                    s.structure().to_value()
                }
                name => lock(&self.settings)
                    .get(name)
                    .expect("every property is handled"),
            }
        }
    }

    impl GstObjectImpl for HollywoodSink {}

    impl ElementImpl for HollywoodSink {
        fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
            static M: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
                gst::subclass::ElementMetadata::new(
                    "Hollywood sink",
                    "Sink/Network",
                    "Send each buffer as a message with a lifetime over Hollywood \
                     (QUIC, TCP Hollywood or the message layer on kernel TCP)",
                    "Hollywood project",
                )
            });
            Some(&*M)
        }

        fn pad_templates() -> &'static [gst::PadTemplate] {
            static T: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
                vec![gst::PadTemplate::new(
                    "sink",
                    gst::PadDirection::Sink,
                    gst::PadPresence::Always,
                    &gst::Caps::new_any(),
                )
                .expect("pad template")]
            });
            T.as_ref()
        }
    }

    impl BaseSinkImpl for HollywoodSink {
        fn start(&self) -> Result<(), gst::ErrorMessage> {
            let settings = lock(&self.settings).clone();
            let target = settings
                .target()
                .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ("{}", e)))?;
            let rt = common::runtime("hollywoodsink")
                .map_err(|e| gst::error_msg!(gst::ResourceError::Failed, ("{}", e)))?;
            let (tx, rx) = mpsc::channel(CHANNEL);
            let stats = Arc::new(Stats::default());
            let error = Arc::new(Mutex::new(None));
            let group = match *lock(&self.group_ms) {
                0 => None,
                ms => Some(Duration::from_millis(u64::from(ms))),
            };
            let task = Task {
                target,
                latency: settings.latency,
                group,
                timestamps: lock(&self.timestamps).unwrap_or(true),
                rx,
                stats: stats.clone(),
                error: error.clone(),
            };
            rt.spawn(task.run());
            *lock(&self.running) = Some(Running {
                rt,
                tx,
                stats,
                error,
                latency: settings.latency,
            });
            Ok(())
        }

        fn stop(&self) -> Result<(), gst::ErrorMessage> {
            if let Some(r) = lock(&self.running).take() {
                *lock(&self.last_stats) = Some(r.stats.clone());
                drop(r.tx);
                r.rt.shutdown_timeout(Duration::from_secs(1));
            }
            Ok(())
        }

        fn render(&self, buffer: &gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
            let (tx, error) = match lock(&self.running).as_ref() {
                Some(r) => (r.tx.clone(), r.error.clone()),
                None => return Err(gst::FlowError::Flushing),
            };
            let map = buffer.map_readable().map_err(|_| gst::FlowError::Error)?;
            if map.is_empty() {
                // Nothing to send (a message is never empty).
                return Ok(gst::FlowSuccess::Ok);
            }
            let flags = BufferFlags {
                delta: buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
                header: buffer.flags().contains(gst::BufferFlags::HEADER),
            };
            let cmd = Cmd::Buffer {
                data: map.as_slice().to_vec(),
                flags,
                sent_us: hollywood_taps::pubsub::now_us(),
            };
            if tx.blocking_send(cmd).is_err() {
                let why = lock(&error)
                    .clone()
                    .unwrap_or_else(|| "the connection ended".into());
                gst::element_imp_error!(self, gst::ResourceError::Write, ("{}", why));
                return Err(gst::FlowError::Error);
            }
            Ok(gst::FlowSuccess::Ok)
        }

        fn event(&self, event: gst::Event) -> bool {
            if let gst::EventView::Eos(_) = event.view() {
                let r = lock(&self.running)
                    .as_ref()
                    .map(|r| (r.tx.clone(), r.latency, r.stats.clone()));
                if let Some((tx, latency, stats)) = r {
                    let (done, wait) = std::sync::mpsc::sync_channel(1);
                    if tx.blocking_send(Cmd::Eos(done)).is_ok() {
                        let _ = wait.recv_timeout(latency + Duration::from_secs(6));
                    }
                    // The final counters on the bus, as the source posts its own.
                    let obj = self.obj();
                    let _ = obj.post_message(
                        gst::message::Element::builder(stats.structure())
                            .src(&*obj)
                            .build(),
                    );
                }
            }
            self.parent_event(event)
        }
    }

    impl URIHandlerImpl for HollywoodSink {
        const URI_TYPE: gst::URIType = gst::URIType::Sink;

        fn protocols() -> &'static [&'static str] {
            &["hollywood"]
        }

        fn uri(&self) -> Option<String> {
            Some(lock(&self.settings).uri.clone())
        }

        fn set_uri(&self, uri: &str) -> Result<(), glib::Error> {
            lock(&self.settings)
                .set("uri", &uri.to_value())
                .map(|_| ())
                .map_err(|e| glib::Error::new(gst::URIError::BadUri, &e))
        }
    }
}
