//! `hollywoodsrc`: a live source that pushes each message as one buffer
//! and reports its `latency` so the sinks downstream play out with that
//! budget.
//!
//! Where it orders the stream (below: not for RTP, whose jitter buffer
//! plays out by the RTP timestamps), it plays out at a constant delay, as
//! SRT's TSBPD: each buffer leaves at its
//! sender time on this host's clock (the sender's clock plus the path's
//! base delay, [`crate::playout`]: the direct sender's header or a
//! relay's `origin_us`) plus the latency, stamped with that time. So the
//! downstream sees the stream at a constant delay whatever the repairs, as
//! `srtsrc` hands it on, and a buffer that arrived within the latency is
//! on time; one that arrived later leaves at once, stamped with its
//! playout time (late downstream, counted as `playout-late`). A message
//! without a sender time (a sender with `timestamps=false`), and every
//! buffer where the downstream reorders, leaves as it arrives, stamped
//! then (`do-timestamp`).
//!
//! Order: TCP Hollywood and QUIC deliver messages as they arrive, so a
//! repaired loss lets later messages overtake. Where the caps say the
//! downstream reorders itself (`application/x-rtp`: a jitter buffer),
//! buffers leave as they arrive; otherwise (MPEG-TS: a demuxer reads a
//! packet behind a later one as a discontinuity and drops the PES) a
//! buffer waits for a missing earlier one at most until the latency after
//! its own sender time (after its arrival without one; `hollywood_taps::
//! reorder`): then it is due downstream. The whole latency, not `hollywood
//! transmit`'s half: the source reports the latency to the pipeline, so
//! the sinks downstream already wait that long, and a gap's message, sent
//! before the one waiting, either arrives within its lifetime (the
//! latency) or never. Measured at 100 ms RTT / 2 % loss with 400 ms
//! (docs/GSTREAMER.md): half gave up 5 gaps whose messages all arrived
//! later, 9 TS discontinuities and 37 of 900 frames lost. The
//! `reorder` property overrides both.
//!
//! Every second, and at the end, an element message `hollywood-stats` on
//! the bus counts what arrived, what never did (`lost`: lost on the path
//! and not repaired in time, or expired at the sender), what arrived
//! behind a gap already given up (`late`) and, from a relay, what arrived
//! past its end-to-end deadline (`expired`), and which buffers left after
//! their playout time, the sender time plus the latency (`playout-late`:
//! late downstream), with the longest wait past the sender time
//! (`delay-max-ms`). The stream ends (EOS) when the connection does.

use crate::common::{self, Settings, Target};
use crate::playout::{self, Clock};
use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::base_src::CreateSuccess;
use gst_base::subclass::prelude::*;
use hollywood_taps::pubsub::{instant_of, now_us, Request, Role, Session};
use hollywood_taps::relay::Mode;
use hollywood_taps::reorder::Reorder;
use hollywood_taps::{Connection, Error, Protocol};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

glib::wrapper! {
    /// The `hollywoodsrc` element.
    pub struct HollywoodSrc(ObjectSubclass<imp::HollywoodSrc>)
        @extends gst_base::PushSrc, gst_base::BaseSrc, gst::Element, gst::Object,
        @implements gst::URIHandler;
}

/// Register `hollywoodsrc` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "hollywoodsrc",
        gst::Rank::NONE,
        HollywoodSrc::static_type(),
    )
}

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "hollywoodsrc",
        gst::DebugColorFlags::empty(),
        Some("Hollywood source"),
    )
});

/// Messages between the connection task and the streaming thread.
const CHANNEL: usize = 16_384;
/// How often the counters go to the bus.
const POST_EVERY: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which ids arrived: the missing ones are lost (or expired unsent).
#[derive(Debug, Default, Clone, Copy)]
pub struct Span {
    first: Option<i64>,
    highest: i64,
    received: u64,
}

impl Span {
    /// Message `id` (consecutive per connection, wrapping at 2^32) arrived.
    pub fn saw(&mut self, id: u32) {
        let ext = match self.first {
            None => {
                self.first = Some(i64::from(id));
                self.highest = i64::from(id);
                i64::from(id)
            }
            Some(_) => self.highest + i64::from(id.wrapping_sub(self.highest as u32) as i32),
        };
        self.first = self.first.map(|f| f.min(ext));
        self.highest = self.highest.max(ext);
        self.received += 1;
    }

    /// Ids between the first and the highest that did not arrive.
    pub fn missing(&self) -> u64 {
        match self.first {
            None => 0,
            Some(f) => ((self.highest - f + 1) as u64).saturating_sub(self.received),
        }
    }
}

#[derive(Debug, Default)]
struct Stats {
    connections: AtomicU64,
    protocol: Mutex<Option<Protocol>>,
    received: AtomicU64,
    bytes: AtomicU64,
    /// Missing ids.
    lost: AtomicU64,
    late: AtomicU64,
    held: AtomicU64,
    gaps_skipped: AtomicU64,
    /// From a relay: past the deadline on arrival.
    expired: AtomicU64,
    /// Dropped because the streaming thread fell behind.
    overflow: AtomicU64,
    /// Left after the sender time plus the latency.
    playout_late: AtomicU64,
    /// The longest time from the sender time (on this clock) to leaving,
    /// in ms.
    delay_max_ms: AtomicU64,
}

impl Stats {
    fn structure(&self, name: &str) -> gst::Structure {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        gst::Structure::builder(name)
            .field(
                "protocol",
                lock(&self.protocol).map_or("none", |p| p.name()),
            )
            .field("connections", g(&self.connections))
            .field("received", g(&self.received))
            .field("bytes", g(&self.bytes))
            .field("lost", g(&self.lost))
            .field("expired", g(&self.expired))
            .field("late", g(&self.late))
            .field("reordered", g(&self.held))
            .field("gaps-skipped", g(&self.gaps_skipped))
            .field("overflow", g(&self.overflow))
            .field("playout-late", g(&self.playout_late))
            .field("delay-max-ms", g(&self.delay_max_ms))
            .build()
    }
}

/// The stamp of a message without a sender time.
const NO_STAMP: i64 = i64::MIN;

enum Item {
    /// A buffer and its stamp: the sender's time on this host's clock
    /// ([`now_us`]), `None` without one.
    Data(Vec<u8>, Option<i64>),
    End,
    Error(String),
}

enum In {
    Direct(Connection),
    Relay(Session),
}

struct Task {
    target: Target,
    latency: Duration,
    /// The reorder window in ns (-1: not decided yet, the default).
    window: Arc<AtomicI64>,
    tx: SyncSender<Item>,
    stats: Arc<Stats>,
}

impl Task {
    async fn run(self, stop: tokio::sync::oneshot::Receiver<()>) {
        let r = tokio::select! {
            r = self.serve() => r,
            _ = stop => Ok(()),
        };
        let _ = self.tx.send(match r {
            Ok(()) => Item::End,
            Err(e) => Item::Error(e),
        });
    }

    async fn serve(&self) -> Result<(), String> {
        let pre = &self.target.preconnection;
        // A listener lives as long as the connection it accepted (its
        // QUIC socket carries it).
        let mut listener = None;
        let input = match (&self.target.uri.stream, self.target.mode) {
            (Some((Role::Publish, _)), _) => {
                return Err("hollywoodsrc plays: a relay's stream is mode=play".into())
            }
            (Some((Role::Play, id)), _) => {
                let req = Request {
                    role: Role::Play,
                    stream: id.clone(),
                    latency: self.latency,
                };
                In::Relay(
                    Session::connect(pre, &req)
                        .await
                        .map_err(|e| e.to_string())?,
                )
            }
            (None, Mode::Listener) => {
                let l = listener.insert(pre.listen().await.map_err(|e| e.to_string())?);
                In::Direct(l.accept().await.ok_or("the listener closed")?)
            }
            (None, Mode::Caller) => In::Direct(pre.initiate().await.map_err(|e| e.to_string())?),
        };
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        let protocol = match &input {
            In::Direct(c) => c.protocol(),
            In::Relay(s) => s.protocol(),
        };
        *lock(&self.stats.protocol) = Some(protocol);
        gst::info!(CAT, "connected over {protocol}");
        let window = match self.window.load(Ordering::Relaxed) {
            ns if ns < 0 => self.latency,
            ns => Duration::from_nanos(ns as u64),
        };
        let r = self.receive(input, window).await.map_err(|e| e.to_string());
        drop(listener);
        r
    }

    async fn receive(&self, mut input: In, window: Duration) -> Result<(), Error> {
        let mut order = Reorder::new(window);
        let mut out = Vec::new();
        let mut span = Span::default();
        let mut clock = Clock::default();
        let ended = loop {
            let wake = order.next_timeout();
            let got = tokio::select! {
                m = next(&mut input) => Some(m),
                () = sleep_until(wake) => None,
            };
            let now = tokio::time::Instant::now();
            match got {
                Some(Ok(Some(m))) => {
                    span.saw(m.id);
                    // The stamp travels in front of the buffer through the
                    // reorder buffer; a held buffer is due at its stamp
                    // plus the window.
                    let stamp = m.sent_us.filter(|_| !window.is_zero()).and_then(|t| {
                        clock.saw(t, m.arrival_us);
                        clock.local(t)
                    });
                    let at = stamp.map_or(now, instant_of);
                    let mut data = Vec::with_capacity(8 + m.data.len());
                    data.extend_from_slice(&stamp.unwrap_or(NO_STAMP).to_be_bytes());
                    data.extend_from_slice(&m.data[m.start..]);
                    order.push(m.id, data, at, &mut out);
                }
                Some(Ok(None)) => break Ok(()),
                Some(Err(e)) => break Err(e),
                None => {}
            }
            order.poll(now, &mut out);
            self.forward(&mut out, &span, &order, &input);
        };
        order.flush(&mut out);
        self.forward(&mut out, &span, &order, &input);
        if let In::Direct(mut c) = input {
            // The sender waits for this end's close.
            let _ = c.close().await;
        }
        ended
    }

    fn forward(&self, out: &mut Vec<Vec<u8>>, span: &Span, order: &Reorder, input: &In) {
        let s = &self.stats;
        let now = now_us();
        for mut d in out.drain(..) {
            let mut t = [0; 8];
            t.copy_from_slice(&d[..8]);
            d.drain(..8);
            let stamp = Some(i64::from_be_bytes(t)).filter(|&t| t != NO_STAMP);
            if let Some(t) = stamp {
                let waited = now.saturating_sub(t).max(0) as u64;
                if waited > self.latency.as_micros() as u64 {
                    s.playout_late.fetch_add(1, Ordering::Relaxed);
                }
                s.delay_max_ms.fetch_max(waited / 1000, Ordering::Relaxed);
            }
            s.received.fetch_add(1, Ordering::Relaxed);
            s.bytes.fetch_add(d.len() as u64, Ordering::Relaxed);
            match self.tx.try_send(Item::Data(d, stamp)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    s.overflow.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        s.lost.store(span.missing(), Ordering::Relaxed);
        let r = order.stats();
        s.late.store(r.behind, Ordering::Relaxed);
        s.held.store(r.held, Ordering::Relaxed);
        s.gaps_skipped.store(r.gaps_skipped, Ordering::Relaxed);
        if let In::Relay(session) = input {
            s.expired.store(session.stats().late, Ordering::Relaxed);
        }
    }
}

/// A message as it arrived.
struct Arrived {
    /// Consecutive per sender.
    id: u32,
    data: Vec<u8>,
    /// Where the buffer starts in `data` (after the sender-time header).
    start: usize,
    /// The sender's clock when it sent the buffer, if it says.
    sent_us: Option<i64>,
    /// This host's clock ([`now_us`]) at the arrival.
    arrival_us: i64,
}

/// The next message, `None` at the end.
async fn next(input: &mut In) -> Result<Option<Arrived>, Error> {
    Ok(match input {
        In::Direct(c) => c.receive().await?.map(|m| {
            let ago = tokio::time::Instant::now().saturating_duration_since(m.arrival);
            let (sent_us, start) = match playout::decode(&m.data) {
                Some((t, start)) => (Some(t), start),
                None => (None, 0),
            };
            Arrived {
                id: m.wire_id,
                data: m.data,
                start,
                sent_us,
                arrival_us: now_us() - ago.as_micros() as i64,
            }
        }),
        In::Relay(s) => s.receive().await?.map(|m| Arrived {
            id: m.header.seq as u32,
            data: m.payload,
            start: 0,
            sent_us: Some(m.header.origin_us),
            arrival_us: now_us(),
        }),
    })
}

async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

struct Running {
    rt: tokio::runtime::Runtime,
    rx: Arc<Mutex<Receiver<Item>>>,
    stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

mod imp {
    use super::*;

    /// See the module documentation.
    #[derive(Default)]
    pub struct HollywoodSrc {
        settings: Mutex<Settings>,
        /// `reorder` in ms (-1: from the caps).
        reorder_ms: Mutex<i32>,
        caps: Mutex<Option<gst::Caps>>,
        running: Mutex<Option<Running>>,
        window: Arc<AtomicI64>,
        flushing: AtomicBool,
        last_post: Mutex<Option<std::time::Instant>>,
        last_stats: Mutex<Option<Arc<Stats>>>,
    }

    #[glib::object_subclass]
    impl ObjectSubclass for HollywoodSrc {
        const NAME: &'static str = "GstHollywoodSrc";
        type Type = super::HollywoodSrc;
        type ParentType = gst_base::PushSrc;
        type Interfaces = (gst::URIHandler,);

        fn new() -> Self {
            HollywoodSrc {
                reorder_ms: Mutex::new(-1),
                window: Arc::new(AtomicI64::new(-1)),
                ..Default::default()
            }
        }
    }

    impl HollywoodSrc {
        fn stats(&self) -> Arc<Stats> {
            lock(&self.running)
                .as_ref()
                .map(|r| r.stats.clone())
                .or_else(|| lock(&self.last_stats).clone())
                .unwrap_or_default()
        }

        fn post_stats(&self) {
            *lock(&self.last_post) = Some(std::time::Instant::now());
            let s = self.stats().structure("hollywood-stats");
            let _ = self
                .obj()
                .post_message(gst::message::Element::builder(s).src(&*self.obj()).build());
        }

        /// `t` on [`now_us`]'s clock as the pipeline's running time (when
        /// the element has a clock and `t` is after the pipeline started).
        fn running_time_of(&self, t: i64) -> Option<gst::ClockTime> {
            let obj = self.obj();
            let now = obj.clock()?.time()?.checked_sub(obj.base_time()?)?;
            let ago = gst::ClockTime::from_useconds(now_us().saturating_sub(t).max(0) as u64);
            now.checked_sub(ago)
        }

        /// Wait until `t` on [`now_us`]'s clock (now if it passed);
        /// `Flushing` when the element is told to stop waiting.
        fn wait_until(&self, t: i64) -> Result<(), gst::FlowError> {
            loop {
                if self.flushing.load(Ordering::SeqCst) {
                    return Err(gst::FlowError::Flushing);
                }
                let left = t.saturating_sub(now_us());
                if left <= 0 {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_micros(left.min(20_000) as u64));
            }
        }

        /// The reorder window for `caps`: none where the downstream
        /// reorders (RTP), the latency otherwise; or the property.
        fn decide_window(&self, caps: Option<&gst::Caps>) {
            let ms = *lock(&self.reorder_ms);
            let latency = lock(&self.settings).latency;
            let w = if ms >= 0 {
                Duration::from_millis(ms as u64)
            } else if caps
                .and_then(|c| c.structure(0))
                .is_some_and(|s| s.name() == "application/x-rtp")
            {
                Duration::ZERO
            } else {
                latency
            };
            self.window.store(w.as_nanos() as i64, Ordering::Relaxed);
        }
    }

    impl ObjectImpl for HollywoodSrc {
        fn properties() -> &'static [glib::ParamSpec] {
            static PROPS: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
                let mut p = common::properties();
                p.push(
                    glib::ParamSpecInt::builder("reorder")
                        .nick("Reorder window")
                        .blurb(
                            "Milliseconds past its sender time (its arrival without one) a \
                             buffer may wait for a missing earlier one (-1: none for \
                             application/x-rtp caps, the latency otherwise; 0: push as \
                             messages arrive)",
                        )
                        .minimum(-1)
                        .maximum(600_000)
                        .default_value(-1)
                        .mutable_ready()
                        .build(),
                );
                p.push(
                    glib::ParamSpecBoxed::builder::<gst::Caps>("caps")
                        .nick("Caps")
                        .blurb("The caps of the buffers (e.g. video/mpegts, application/x-rtp,…)")
                        .mutable_ready()
                        .build(),
                );
                p
            });
            PROPS.as_ref()
        }

        fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
            match pspec.name() {
                "reorder" => *lock(&self.reorder_ms) = value.get().expect("type checked upstream"),
                "caps" => {
                    *lock(&self.caps) = value.get().expect("type checked upstream");
                    self.obj().src_pad().mark_reconfigure();
                }
                name => {
                    if let Err(e) = lock(&self.settings).set(name, value) {
                        gst::error!(CAT, imp = self, "{name}: {e}");
                    }
                }
            }
        }

        fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
            match pspec.name() {
                "reorder" => lock(&self.reorder_ms).to_value(),
                "caps" => lock(&self.caps).to_value(),
                "stats" => self.stats().structure("hollywood-stats").to_value(),
                name => lock(&self.settings)
                    .get(name)
                    .expect("every property is handled"),
            }
        }

        fn constructed(&self) {
            self.parent_constructed();
            let obj = self.obj();
            obj.set_live(true);
            obj.set_format(gst::Format::Time);
            obj.set_do_timestamp(true);
        }
    }

    impl GstObjectImpl for HollywoodSrc {}

    impl ElementImpl for HollywoodSrc {
        fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
            static M: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
                gst::subclass::ElementMetadata::new(
                    "Hollywood source",
                    "Source/Network",
                    "Receive messages over Hollywood (QUIC, TCP Hollywood or the message \
                     layer on kernel TCP), each as one buffer, as they arrive",
                    "Hollywood project",
                )
            });
            Some(&*M)
        }

        fn pad_templates() -> &'static [gst::PadTemplate] {
            static T: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
                vec![gst::PadTemplate::new(
                    "src",
                    gst::PadDirection::Src,
                    gst::PadPresence::Always,
                    &gst::Caps::new_any(),
                )
                .expect("pad template")]
            });
            T.as_ref()
        }
    }

    impl BaseSrcImpl for HollywoodSrc {
        fn start(&self) -> Result<(), gst::ErrorMessage> {
            let settings = lock(&self.settings).clone();
            let target = settings
                .target()
                .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ("{}", e)))?;
            let rt = common::runtime("hollywoodsrc")
                .map_err(|e| gst::error_msg!(gst::ResourceError::Failed, ("{}", e)))?;
            let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL);
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
            let stats = Arc::new(Stats::default());
            self.decide_window(lock(&self.caps).as_ref());
            let task = Task {
                target,
                latency: settings.latency,
                window: self.window.clone(),
                tx,
                stats: stats.clone(),
            };
            rt.spawn(task.run(stop_rx));
            self.flushing.store(false, Ordering::SeqCst);
            *lock(&self.running) = Some(Running {
                rt,
                rx: Arc::new(Mutex::new(rx)),
                stats,
                stop: Some(stop_tx),
            });
            Ok(())
        }

        fn stop(&self) -> Result<(), gst::ErrorMessage> {
            if let Some(mut r) = lock(&self.running).take() {
                *lock(&self.last_stats) = Some(r.stats.clone());
                if let Some(s) = r.stop.take() {
                    let _ = s.send(());
                }
                r.rt.shutdown_timeout(Duration::from_secs(1));
            }
            Ok(())
        }

        fn is_seekable(&self) -> bool {
            false
        }

        fn caps(&self, filter: Option<&gst::Caps>) -> Option<gst::Caps> {
            let caps = lock(&self.caps).clone().unwrap_or_else(gst::Caps::new_any);
            Some(match filter {
                Some(f) => f.intersect_with_mode(&caps, gst::CapsIntersectMode::First),
                None => caps,
            })
        }

        fn set_caps(&self, caps: &gst::Caps) -> Result<(), gst::LoggableError> {
            self.decide_window(Some(caps));
            Ok(())
        }

        fn query(&self, query: &mut gst::QueryRef) -> bool {
            if let gst::QueryViewMut::Latency(q) = query.view_mut() {
                let l = lock(&self.settings).latency;
                q.set(
                    true,
                    gst::ClockTime::from_nseconds(l.as_nanos() as u64),
                    gst::ClockTime::NONE,
                );
                return true;
            }
            BaseSrcImplExt::parent_query(self, query)
        }

        fn unlock(&self) -> Result<(), gst::ErrorMessage> {
            self.flushing.store(true, Ordering::SeqCst);
            Ok(())
        }

        fn unlock_stop(&self) -> Result<(), gst::ErrorMessage> {
            self.flushing.store(false, Ordering::SeqCst);
            Ok(())
        }
    }

    impl PushSrcImpl for HollywoodSrc {
        fn create(
            &self,
            _buffer: Option<&mut gst::BufferRef>,
        ) -> Result<CreateSuccess, gst::FlowError> {
            let rx = match lock(&self.running).as_ref() {
                Some(r) => r.rx.clone(),
                None => return Err(gst::FlowError::Flushing),
            };
            loop {
                if self.flushing.load(Ordering::SeqCst) {
                    return Err(gst::FlowError::Flushing);
                }
                let due = lock(&self.last_post).is_none_or(|t| t.elapsed() >= POST_EVERY);
                if due {
                    self.post_stats();
                }
                let item = lock(&rx).recv_timeout(Duration::from_millis(50));
                match item {
                    Ok(Item::Data(d, stamp)) => {
                        let mut b = gst::Buffer::from_mut_slice(d);
                        if let Some(t) = stamp {
                            // Playout at a constant delay: the sender time
                            // plus the latency.
                            let latency = lock(&self.settings).latency.as_micros() as i64;
                            let due = t.saturating_add(latency);
                            self.wait_until(due)?;
                            if let Some(pts) = self.running_time_of(due) {
                                let b = b.get_mut().expect("a new buffer");
                                b.set_pts(pts);
                                b.set_dts(pts);
                            }
                        }
                        return Ok(CreateSuccess::NewBuffer(b));
                    }
                    Ok(Item::End) | Err(RecvTimeoutError::Disconnected) => {
                        self.post_stats();
                        return Err(gst::FlowError::Eos);
                    }
                    Ok(Item::Error(e)) => {
                        self.post_stats();
                        gst::element_imp_error!(self, gst::ResourceError::Read, ("{}", e));
                        return Err(gst::FlowError::Error);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        }
    }

    impl URIHandlerImpl for HollywoodSrc {
        const URI_TYPE: gst::URIType = gst::URIType::Src;

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

#[cfg(test)]
mod tests {
    use super::Span;

    #[test]
    fn missing_ids_count_as_lost_across_the_wrap() {
        let mut s = Span::default();
        assert_eq!(s.missing(), 0);
        for id in [u32::MAX - 2, u32::MAX, 1, 0, 3] {
            s.saw(id);
        }
        // MAX-2 ..= 3 is 6 ids; MAX-1 and 2 did not arrive.
        assert_eq!(s.missing(), 2);
        s.saw(2);
        assert_eq!(s.missing(), 1);
    }
}
