//! Partial deployments on real packets (thesis §4.4, issue 5 item 5): a
//! timed message workload from host a to host b of a two-host lab, with
//! either end our engine (over its TUN, [`hollywood_io::engine`]) or a
//! Linux kernel socket ([`hollywood_io::kernel`]), and a tshark capture
//! on the path audited for the wire image (thesis §4.5).
//!
//! ```text
//!  a: sender ──► veth-e ══► e: [capture on veth-a] → emulator (delay rtt/2, loss) → veth-b ══► b: receiver
//!  b: receiver ─► … ══► e: emulator (delay rtt/2, no loss) ══► a
//! ```
//!
//! - **Sender** in a: the engine at 10.88.11.2 with
//!   `Config::hollywood(true, true)` (inconsistent retransmissions,
//!   consistent segmentation, Nagle off), or a kernel socket at 10.88.1.2
//!   (`TCP_NODELAY`). It sends message `i` ([`crate::workload::payload`])
//!   at `start + i · interval`, each with the same lifetime, unordered
//!   (replaceable, thesis §4.2), then closes.
//! - **Receiver** in b: the engine at 10.88.12.2 with out-of-order
//!   delivery on, or a kernel socket at 10.88.2.2. It records every
//!   delivered message in a [`Tally`] (intact, duplicate, out of order)
//!   with its arrival time.
//! - **Loss and delay**: the emulator in e applies `rtt/2` each way and
//!   Bernoulli loss on the data direction a→b only (the ACK path is
//!   lossless, so every retransmission answers a data loss).
//! - **Wire**: tshark captures on e's veth toward a, the sender's side of
//!   the emulator, before the loss: every transmission of the sender is
//!   seen once. [`crate::capture::audit_pcap`] counts retransmissions,
//!   inconsistent retransmissions (bytes that differ from the first bytes
//!   seen at that sequence number), sequence holes and RSTs; these
//!   `*_on_wire` figures never come from engine counters.
//!
//! [`run_pair`] is the shared runner (also used by [`crate::calibrate`]);
//! [`run`] is the interop experiment on top of it.

use crate::capture::{self, Capture, FlowAudit};
use crate::netem::NetemStats;
use crate::topology::{Host, Lab, LabError, LabSpec};
use crate::workload::{self, Tally};
use hollywood_io::engine::{Stack, Stream, StreamStats};
use hollywood_io::kernel::KernelStream;
use hollywood_io::message::{MessageStats, MessageStream, ReceivedMessage, SendMessage};
use hollywood_io::StreamError;
use hollywood_media::Percentiles;
use hollywood_sim::{LinkConfig, LossModel};
use hollywood_tcp::{CcAlgorithm, Config, ExpiryReason};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors of an experiment (setup failures; a connection that fails while
/// running is reported in the result, not as an error).
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

/// Prefix of every lab (namespace) name these experiments create; labs of
/// killed runs (`hwi-PID-…` with a dead PID) are removed at the next start.
pub const LAB_PREFIX: &str = "hwi";

/// Which stack an end runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// Our engine over a TUN device in the host's namespace.
    Engine,
    /// A Linux kernel TCP socket (TCP_NODELAY) in the host's namespace.
    Kernel,
}

impl End {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            End::Engine => "engine",
            End::Kernel => "kernel",
        }
    }

    /// Parse `engine` or `kernel`.
    pub fn parse(s: &str) -> Option<End> {
        match s {
            "engine" => Some(End::Engine),
            "kernel" => Some(End::Kernel),
            _ => None,
        }
    }
}

/// One run of the shared runner.
#[derive(Debug, Clone)]
pub struct PairSpec {
    /// Lab name (namespaces `<name>-a`, `-e`, `-b`).
    pub lab: String,
    /// Sender in a.
    pub sender: End,
    /// Receiver in b.
    pub receiver: End,
    /// Engine configuration of an engine sender.
    pub sender_config: Config,
    /// Engine configuration of an engine receiver.
    pub receiver_config: Config,
    /// Emulated path a→b (data).
    pub a_to_b: LinkConfig,
    /// Emulated path b→a (ACKs).
    pub b_to_a: LinkConfig,
    /// Emulator seed.
    pub seed: u64,
    /// Messages.
    pub messages: u32,
    /// Payload bytes per message (≥ 4).
    pub size: usize,
    /// Interval between messages.
    pub interval: Duration,
    /// Lifetime of every message (`None`: no lifetime).
    pub lifetime: Option<Duration>,
    /// A timetable (video frames, `hollywood_media::video`) instead of
    /// `interval`: message i is sent at its `at`, with its own lifetime
    /// (or `lifetime`) and dependency; `messages` must be its length.
    pub schedule: Option<hollywood_media::stream::Schedule>,
    /// Receiver's port.
    pub port: u16,
    /// Keep the capture at this path (otherwise a temporary file).
    pub pcap: Option<PathBuf>,
    /// How long after the last message the receiver waits for the end of
    /// the stream before giving up.
    pub drain: Duration,
    /// Congestion control of the kernel sockets (`TCP_CONGESTION`, e.g.
    /// `cubic`; root may choose any available algorithm); `None` = the
    /// system default (`net.ipv4.tcp_congestion_control`, which new
    /// namespaces inherit: BBR on the lab machine).
    pub kernel_cc: Option<String>,
    /// Secure mode at both ends (docs/SECURITY.md): a TLS 1.3 handshake
    /// after the connect (not counted in the schedule), then every message
    /// sealed. The wire audit then identifies messages by their frame id.
    pub secure: bool,
    /// Secure mode: the server's certificate and key (the client trusts
    /// it); `None`: a fresh self-signed one.
    pub identity: Option<hollywood_transport::secure::Identity>,
}

impl PairSpec {
    /// When workload message `i` is due, from the start.
    pub fn send_offset(&self, i: u32) -> Duration {
        match &self.schedule {
            Some(s) => s.get(i as usize).map_or(Duration::ZERO, |p| p.at),
            None => self.interval * i,
        }
    }

    /// Workload message `i`'s lifetime.
    pub fn lifetime_of(&self, i: u32) -> Option<Duration> {
        self.schedule
            .as_ref()
            .and_then(|s| s.get(i as usize)?.lifetime)
            .or(self.lifetime)
    }
}

/// What the sending side reported.
#[derive(Debug, Clone, Default)]
pub struct SenderSide {
    /// Message layer counters.
    pub messages: MessageStats,
    /// Engine: slots rewritten with another message on retransmission
    /// (`HollywoodStats::ir_sent`); `None` for a kernel sender.
    pub ir_sent: Option<u64>,
    /// Engine: slots rewritten at their first transmission.
    pub replaced_at_first_tx: Option<u64>,
    /// Engine: retransmitted segments (`ConnectionStats`).
    pub retransmitted_segments: Option<u64>,
    /// Engine: smoothed RTT at the end (ms).
    pub srtt_ms: Option<f64>,
    /// Workload ids the sender reported expired (replaced by an
    /// inconsistent retransmission or expired before their first send).
    pub expired_ids: Vec<u32>,
    /// Workload ids of the messages that travelled in another message's
    /// slot (`ExpiryReason::*::by`), each once.
    pub replacement_ids: Vec<u32>,
    /// Of the expired ones, replaced by an inconsistent retransmission.
    pub replaced: u64,
    /// Of those, expired before their first transmission.
    pub expired_before_send: u64,
}

/// What the receiving side reported.
#[derive(Debug, Clone, Default)]
pub struct ReceiverSide {
    /// Message layer counters.
    pub messages: MessageStats,
    /// Engine with out-of-order delivery: segments handed up ahead of a
    /// hole (`OooStats::out_of_order`); `None` for a kernel receiver.
    pub ooo_segments: Option<u64>,
    /// Secure mode: the receiver's opening counters.
    pub secure: Option<hollywood_transport::secure::SecureStats>,
}

/// Everything one run produced.
#[derive(Debug, Clone)]
pub struct PairRun {
    /// The parameters.
    pub spec: PairSpec,
    /// Per workload id: when `send_message` was called (since the run's
    /// epoch); `None` if it was never sent.
    pub sent_at: Vec<Option<Duration>>,
    /// Per workload id: when the receiving application got it (since the
    /// same epoch).
    pub arrival: Vec<Option<Duration>>,
    /// Workload ids in the order the receiving application got them
    /// (intact, new ones only).
    pub delivery_order: Vec<u32>,
    /// The receiver's tally.
    pub tally: Tally,
    /// Sender counters.
    pub sender: SenderSide,
    /// Receiver counters.
    pub receiver: ReceiverSide,
    /// Wire audit of the data direction (sender → receiver) at the
    /// capture point.
    pub wire: FlowAudit,
    /// Wire audit of the ACK direction.
    pub wire_reverse: FlowAudit,
    /// RSTs seen on the wire in either direction.
    pub resets_on_wire: u64,
    /// tshark's own count of retransmitted data segments in the data
    /// direction (`tcp.analysis.retransmission || tcp.analysis.out_of_order`
    /// with payload), a cross-check of the audit; `None` if tshark failed.
    pub tshark_retransmissions: Option<u64>,
    /// Emulator counters.
    pub netem: NetemStats,
    /// From the first message to the end of the stream at the receiver.
    pub duration: Duration,
    /// Workload ids of the messages carried by inconsistent
    /// retransmissions in the capture (decoded from the retransmitted
    /// bytes), each once. Includes re-replacements of a slot whose first
    /// replacement was delivered elsewhere, which the engine performs
    /// without an Expired report (nothing expired).
    pub ir_carried_ids: Vec<u32>,
    /// Workload ids whose frame appeared on the wire at a stream position
    /// out of id order (`WireMessages::moved`): carried in another
    /// message's slot, or overtaken by such a message.
    pub moved_ids: HashSet<u32>,
    /// Per workload id: the emulator's random loss dropped a packet that
    /// carried the first transmission of the message (from the capture
    /// and the emulator's drop log): what the on-time oracle loses.
    pub network_dropped: Vec<bool>,
    /// The first failure (connection error, timeout), if any.
    pub error: Option<String>,
    /// The capture file, if kept.
    pub pcap: Option<PathBuf>,
    /// The congestion control of the kernel sockets, read back from a
    /// kernel end's socket (the namespace's default when both ends are
    /// engines).
    pub kernel_cc: String,
}

/// Either kind of stream.
pub(crate) enum Sock {
    Engine(Stream),
    Kernel(Box<KernelStream>),
}

impl Sock {
    pub(crate) async fn send_message(
        &mut self,
        m: SendMessage,
    ) -> std::result::Result<u32, StreamError> {
        match self {
            Sock::Engine(s) => s.send_message(m).await,
            Sock::Kernel(s) => s.send_message(m).await,
        }
    }

    pub(crate) async fn recv_message(
        &mut self,
    ) -> std::result::Result<Option<ReceivedMessage>, StreamError> {
        match self {
            Sock::Engine(s) => s.recv_message().await,
            Sock::Kernel(s) => s.recv_message().await,
        }
    }

    pub(crate) async fn close(&mut self) -> std::result::Result<(), StreamError> {
        match self {
            Sock::Engine(s) => s.close().await,
            Sock::Kernel(s) => MessageStream::close(s.as_mut()).await,
        }
    }

    fn take_expired(&mut self) -> Vec<hollywood_tcp::ExpiredMessage> {
        match self {
            Sock::Engine(s) => s.take_expired(),
            Sock::Kernel(s) => MessageStream::take_expired(s.as_mut()),
        }
    }

    pub(crate) fn message_stats(&self) -> MessageStats {
        match self {
            Sock::Engine(s) => s.stats().messages,
            Sock::Kernel(s) => s.message_stats(),
        }
    }

    /// Secure mode, `client` or server end: the handshake, then sealed
    /// messages.
    pub(crate) async fn secure(
        self,
        client: bool,
        id: &hollywood_transport::secure::Identity,
    ) -> std::result::Result<Sock, StreamError> {
        Ok(match (self, client) {
            (Sock::Engine(s), true) => Sock::Engine(s.secure_client(id).await?),
            (Sock::Engine(s), false) => Sock::Engine(s.secure_server(id).await?),
            (Sock::Kernel(s), true) => Sock::Kernel(Box::new(s.secure_client(id).await?)),
            (Sock::Kernel(s), false) => Sock::Kernel(Box::new(s.secure_server(id).await?)),
        })
    }

    /// Secure mode: the receiving direction's counters.
    pub(crate) fn secure_stats(&self) -> Option<hollywood_transport::secure::SecureStats> {
        match self {
            Sock::Engine(s) => s.secure_stats(),
            Sock::Kernel(s) => s.secure_stats(),
        }
    }

    pub(crate) fn engine_stats(&self) -> Option<StreamStats> {
        match self {
            Sock::Engine(s) => Some(s.stats()),
            Sock::Kernel(_) => None,
        }
    }
}

/// A directory removed on drop unless it was given by the caller.
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl WorkDir {
    fn temp(tag: &str) -> Result<WorkDir> {
        let path = std::env::temp_dir().join(format!("{tag}-pcap"));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(WorkDir { path, remove: true })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

struct SenderOut {
    sent_at: Vec<Option<Duration>>,
    side: SenderSide,
    error: Option<String>,
}

struct ReceiverOut {
    tally: Tally,
    order: Vec<u32>,
    arrival: Vec<Option<Duration>>,
    side: ReceiverSide,
    end: Option<Duration>,
    error: Option<String>,
}

/// Remove labs of killed earlier runs (`hwi-PID-…` with a dead PID).
pub fn remove_stale_labs() {
    let _ = hollywood_io::NetNs::remove_stale(LAB_PREFIX);
}

/// Run one sender/receiver pair over a fresh lab and audit the wire.
/// Everything the run creates (lab, TUNs, tshark, temporary files) is
/// removed before it returns, also on error.
pub fn run_pair(spec: &PairSpec) -> Result<PairRun> {
    if !hollywood_io::is_root() {
        return Err(Box::new(LabError::NotRoot));
    }
    if spec.size < workload::MIN_PAYLOAD {
        return Err(format!("messages must be at least {} bytes", workload::MIN_PAYLOAD).into());
    }
    match &spec.schedule {
        Some(s) if s.len() != spec.messages as usize => {
            return Err(format!(
                "the timetable has {} messages but messages is {}",
                s.len(),
                spec.messages
            )
            .into());
        }
        Some(_) if spec.messages == 0 => return Err("need at least one message".into()),
        Some(_) => {}
        None if spec.messages == 0 || spec.interval.is_zero() => {
            return Err("need at least one message and a positive interval".into());
        }
        None => {}
    }
    let lab = Lab::up(LabSpec {
        name: spec.lab.clone(),
        three_hosts: false,
        a_to_b: spec.a_to_b.clone(),
        b_to_a: spec.b_to_a.clone(),
        seed: spec.seed,
        hook: None,
    })?;
    let system_cc = lab
        .ns(Host::A)
        .exec(&["sysctl", "-n", "net.ipv4.tcp_congestion_control"])?
        .trim()
        .to_string();
    let dir = match &spec.pcap {
        Some(p) => {
            if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(d)?;
            }
            WorkDir {
                path: p.parent().map(Path::to_path_buf).unwrap_or_default(),
                remove: false,
            }
        }
        None => WorkDir::temp(&spec.lab)?,
    };
    let pcap_path = spec
        .pcap
        .clone()
        .unwrap_or_else(|| dir.path.join("sender-side.pcap"));
    let e_ns = lab.ns(Host::E).name().unwrap_or_default().to_string();
    let cap = Capture::start(
        Some(&e_ns),
        &lab.iface(Host::E, Host::A),
        &pcap_path,
        &format!("tcp port {}", spec.port),
    )?;
    let rt = crate::workload::runtime()?;
    let out = rt.block_on(exchange(&lab, spec));
    // Stop the capture while the engines' TUNs still exist (without them,
    // a and b would route late packets for the engine subnets back into
    // the lab), then stop the stacks.
    let stopped = Capture::stop_all(vec![cap]);
    let (sender, receiver, stacks, socket_cc) = out?;
    let kernel_cc = socket_cc.unwrap_or(system_cc);
    rt.block_on(async {
        for s in stacks {
            let _ = tokio::time::timeout(Duration::from_secs(2), s.shutdown()).await;
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    let netem = lab.netem_stats();
    let drop_log = lab
        .netem()
        .map(|n| n.drop_log(crate::netem::Direction::AtoB))
        .unwrap_or_default();
    drop(lab);
    let (pcap_file, _log) = stopped?.into_iter().next().ok_or("no capture")?;
    let audit = capture::audit_pcap(&pcap_file)?;
    let is_data = |f: &FlowAudit| f.dst.map(|d| d.port()) == Some(spec.port);
    let mut wire = FlowAudit::default();
    let mut wire_reverse = FlowAudit::default();
    for f in &audit.flows {
        // One connection per run: exactly one flow each way.
        if is_data(f) {
            wire = f.clone();
        } else if f.src.map(|s| s.port()) == Some(spec.port) {
            wire_reverse = f.clone();
        }
    }
    let tshark_retransmissions = capture::tshark_count(
        &pcap_file,
        &format!(
            "tcp.dstport == {} && tcp.len > 0 && (tcp.analysis.retransmission || tcp.analysis.out_of_order)",
            spec.port
        ),
    )
    .ok();
    let resets_on_wire = audit.totals().rsts;
    let ir_carried_ids = ir_carried_ids(&pcap_file, spec.port, spec.size, spec.secure)?;
    let wire_msgs = crate::wiremsg::WireMessages::read(
        &pcap_file,
        spec.port,
        spec.size,
        spec.messages,
        spec.secure,
    )?;
    let network_dropped = wire_msgs.network_dropped(&drop_log);
    let moved_ids = wire_msgs.moved();
    let error = sender.error.clone().or(receiver.error.clone());
    let duration = receiver.end.unwrap_or_default();
    Ok(PairRun {
        spec: spec.clone(),
        sent_at: sender.sent_at,
        arrival: receiver.arrival,
        delivery_order: receiver.order,
        tally: receiver.tally,
        sender: sender.side,
        receiver: receiver.side,
        wire,
        wire_reverse,
        resets_on_wire,
        tshark_retransmissions,
        netem,
        duration,
        ir_carried_ids,
        moved_ids,
        network_dropped,
        error,
        pcap: spec.pcap.clone(),
        kernel_cc,
    })
}

/// Workload ids of the messages inside the inconsistent retransmissions of
/// the data direction (towards `port`) of a capture: each such segment is
/// deframed on its own (a slot starts and ends at frame boundaries,
/// thesis §4.2 consistent segmentation; the rest is zero padding).
fn ir_carried_ids(pcap_file: &Path, port: u16, size: usize, sealed: bool) -> Result<Vec<u32>> {
    let f = std::fs::File::open(pcap_file)?;
    let mut rd = hollywood_wire::pcap::Reader::new(std::io::BufReader::new(f))?;
    let lt = rd.linktype();
    let mut flows: HashMap<(SocketAddr, SocketAddr), capture::FlowState> = HashMap::new();
    let mut ids = HashSet::new();
    while let Some((_, frame)) = rd.next_packet()? {
        let Some((src, dst, tcp, payload)) =
            hollywood_wire::pcap::ip_packet(lt, &frame).and_then(capture::parse_lenient)
        else {
            continue;
        };
        if dst.port() != port {
            continue;
        }
        let class = flows
            .entry((src, dst))
            .or_default()
            .on_segment(&tcp, payload);
        if !(class.retransmission && class.differing > 0) {
            continue;
        }
        let mut d = hollywood_msg::Deframer::new(hollywood_msg::DeframerConfig::default());
        d.push_segment(tcp.seq.0, payload, 0);
        while let Some(m) = d.poll_message() {
            if let Some(id) = workload::wire_id(m.id, &m.payload, size, sealed) {
                ids.insert(id);
            }
        }
    }
    let mut v: Vec<u32> = ids.into_iter().collect();
    v.sort_unstable();
    Ok(v)
}

/// Set up both ends, run the workload, close. Returns the stacks (kept
/// alive until the capture has stopped).
async fn exchange(
    lab: &Lab,
    spec: &PairSpec,
) -> Result<(SenderOut, ReceiverOut, Vec<Stack>, Option<String>)> {
    let mut stacks = Vec::new();
    let dst = SocketAddr::new(
        match spec.receiver {
            End::Engine => lab.engine_addr(Host::B, false),
            End::Kernel => lab.addr(Host::B, false),
        },
        spec.port,
    );
    enum Listening {
        Engine(hollywood_io::engine::Listener),
        Kernel(tokio::net::TcpListener),
    }
    let cc = spec.kernel_cc.clone();
    let listening = match spec.receiver {
        End::Engine => {
            let stack = Stack::spawn(lab.engine_tun(Host::B)?, spec.receiver_config.clone())?;
            let l = stack.listen(dst, None).await?;
            stacks.push(stack);
            Listening::Engine(l)
        }
        End::Kernel => {
            let cc = cc.clone();
            let l = lab
                .ns(Host::B)
                .run(move || kernel_listener(dst, cc.as_deref()))??;
            Listening::Kernel(tokio::net::TcpListener::from_std(l)?)
        }
    };
    let accept = async move {
        match listening {
            Listening::Engine(mut l) => {
                let (s, _) = l.accept().await?;
                Ok::<_, StreamError>((Sock::Engine(s), Some(l), None))
            }
            Listening::Kernel(l) => {
                let (s, _) = l.accept().await?;
                let cc = socket_cc(&s);
                Ok((Sock::Kernel(Box::new(KernelStream::from_tcp(s)?)), None, cc))
            }
        }
    };
    let accept = tokio::spawn(tokio::time::timeout(Duration::from_secs(15), accept));
    let mut sender_cc = None;
    let mut tx = match spec.sender {
        End::Engine => {
            let stack = Stack::spawn(lab.engine_tun(Host::A)?, spec.sender_config.clone())?;
            let local = SocketAddr::new(lab.engine_addr(Host::A, false), 0);
            let s = stack.connect(local, dst, None).await?;
            stacks.push(stack);
            Sock::Engine(s)
        }
        End::Kernel => {
            let socket = lab.ns(Host::A).run(tokio::net::TcpSocket::new_v4)??;
            if let Some(cc) = &cc {
                socket2::SockRef::from(&socket)
                    .set_tcp_congestion(cc.as_bytes())
                    .map_err(|e| format!("TCP_CONGESTION {cc:?}: {e}"))?;
            }
            let s = tokio::time::timeout(Duration::from_secs(10), socket.connect(dst))
                .await
                .map_err(|_| "the kernel sender could not connect within 10 s")??;
            sender_cc = socket_cc(&s);
            Sock::Kernel(Box::new(KernelStream::from_tcp(s)?))
        }
    };
    let (mut rx, _listener, receiver_cc) = accept
        .await?
        .map_err(|_| "the receiver accepted no connection within 15 s")??;
    if spec.secure {
        let id = match &spec.identity {
            Some(id) => id.clone(),
            None => hollywood_transport::secure::Identity::generate()
                .map_err(|e| format!("secure mode: {e}"))?,
        };
        let (t, r) = tokio::join!(tx.secure(true, &id), rx.secure(false, &id));
        tx = t.map_err(|e| format!("sender: {e}"))?;
        rx = r.map_err(|e| format!("receiver: {e}"))?;
    }
    let epoch = tokio::time::Instant::now();
    let n = spec.messages;
    let end_of_sending = spec.send_offset(n.saturating_sub(1)) + spec.interval;
    let deadline = epoch + end_of_sending + spec.drain;
    let size = spec.size;
    let drain = spec.drain;
    let receiver = tokio::spawn(async move {
        let mut out = ReceiverOut {
            tally: Tally::new(n, size),
            order: Vec::new(),
            arrival: vec![None; n as usize],
            side: ReceiverSide::default(),
            end: None,
            error: None,
        };
        loop {
            match tokio::time::timeout_at(deadline, rx.recv_message()).await {
                Ok(Ok(Some(m))) => {
                    if let Some(id) = out.tally.record(&m.payload) {
                        out.order.push(id);
                        out.arrival[id as usize] = Some(m.arrival.saturating_duration_since(epoch));
                    }
                }
                Ok(Ok(None)) => {
                    out.end = Some(epoch.elapsed());
                    break;
                }
                Ok(Err(e)) => {
                    out.error = Some(format!("receiver: {e}"));
                    out.end = Some(epoch.elapsed());
                    break;
                }
                Err(_) => {
                    out.error = Some(format!(
                        "receiver: no end of stream {drain:?} after the last message"
                    ));
                    out.end = Some(epoch.elapsed());
                    break;
                }
            }
        }
        out.side.messages = rx.message_stats();
        out.side.ooo_segments = rx.engine_stats().map(|s| s.ooo.out_of_order);
        out.side.secure = rx.secure_stats();
        // Close our direction too (the sender reads nothing; a kernel
        // sender's socket is then closed cleanly rather than reset).
        let _ = tokio::time::timeout(Duration::from_secs(3), rx.close()).await;
        out
    });
    let sender = async {
        let mut out = SenderOut {
            sent_at: vec![None; n as usize],
            side: SenderSide::default(),
            error: None,
        };
        let mut ids: HashMap<u32, u32> = HashMap::new();
        // Workload index → the message layer's id (for dependencies).
        let mut layer_id: Vec<Option<u32>> = vec![None; n as usize];
        let mut expired = Vec::new();
        for i in 0..n {
            tokio::time::sleep_until(epoch + spec.send_offset(i)).await;
            let mut m = SendMessage::new(workload::payload(i, size));
            if let Some(l) = spec.lifetime_of(i) {
                m = m.lifetime(l);
            }
            let planned = spec.schedule.as_ref().and_then(|s| s.get(i as usize));
            if let Some(d) = planned.and_then(|p| layer_id.get(p.depends_on? as usize)?.as_ref()) {
                m = m.depends_on(*d);
            }
            let called = epoch.elapsed();
            match tokio::time::timeout_at(deadline, tx.send_message(m)).await {
                Ok(Ok(id)) => {
                    ids.insert(id, i);
                    layer_id[i as usize] = Some(id);
                    out.sent_at[i as usize] = Some(called);
                }
                Ok(Err(e)) => {
                    out.error = Some(format!("sender: message {i}: {e}"));
                    break;
                }
                Err(_) => {
                    out.error = Some(format!("sender: message {i} could not be queued"));
                    break;
                }
            }
            expired.extend(tx.take_expired());
        }
        let close = tokio::time::timeout_at(deadline, tx.close()).await;
        match close {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                out.error.get_or_insert(format!("sender: close: {e}"));
            }
            Err(_) => {
                out.error
                    .get_or_insert("sender: the FIN was not acknowledged in time".into());
            }
        }
        expired.extend(tx.take_expired());
        let mut seen = HashSet::new();
        let mut replacements = HashSet::new();
        for e in &expired {
            let by = match e.reason {
                ExpiryReason::Replaced { by } | ExpiryReason::ExpiredBeforeSend { by } => by,
                ExpiryReason::NotSent | ExpiryReason::Displaced | ExpiryReason::Skipped => None,
            };
            if let Some(&r) = by.and_then(|b| ids.get(&b)) {
                replacements.insert(r);
            }
            let Some(&i) = ids.get(&e.id) else { continue };
            if !seen.insert(i) {
                continue;
            }
            out.side.expired_ids.push(i);
            match e.reason {
                ExpiryReason::Replaced { .. } | ExpiryReason::Displaced | ExpiryReason::Skipped => {
                    out.side.replaced += 1
                }
                ExpiryReason::ExpiredBeforeSend { .. } | ExpiryReason::NotSent => {
                    out.side.expired_before_send += 1
                }
            }
        }
        out.side.expired_ids.sort_unstable();
        out.side.replacement_ids = replacements.into_iter().collect();
        out.side.replacement_ids.sort_unstable();
        out.side.messages = tx.message_stats();
        if let Some(s) = tx.engine_stats() {
            out.side.ir_sent = Some(s.hollywood.ir_sent);
            out.side.replaced_at_first_tx = Some(s.hollywood.replaced_at_first_tx);
            out.side.retransmitted_segments = Some(s.connection.retransmitted_segments);
            out.side.srtt_ms = s.srtt.map(workload::ms);
        }
        (out, tx)
    };
    let (sender, tx) = sender.await;
    let receiver = receiver.await?;
    drop(tx);
    Ok((sender, receiver, stacks, sender_cc.or(receiver_cc)))
}

/// A listening kernel socket on `addr` with congestion control `cc`
/// (inherited by accepted connections). Call inside the namespace.
pub(crate) fn kernel_listener(
    addr: SocketAddr,
    cc: Option<&str>,
) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if let Some(cc) = cc {
        s.set_tcp_congestion(cc.as_bytes())?;
    }
    s.bind(&addr.into())?;
    s.listen(16)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// The congestion control algorithm of a kernel socket.
pub(crate) fn socket_cc(s: &tokio::net::TcpStream) -> Option<String> {
    let name = socket2::SockRef::from(s).tcp_congestion().ok()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

impl PairRun {
    /// Transport delays (ms) of the delivered messages, by message id.
    pub fn delays_ms(&self) -> Vec<f64> {
        self.sent_at
            .iter()
            .zip(&self.arrival)
            .filter_map(|(s, a)| Some(workload::ms(a.as_ref()?.saturating_sub(*s.as_ref()?))))
            .collect()
    }

    /// Messages delivered after a message with a higher id (as
    /// `Tally::out_of_order`), and how many of those are explained by the
    /// wire: the delivered message or the higher-id message delivered
    /// before it sat at a stream position out of id order (carried in
    /// another message's slot by an inconsistent retransmission, at its
    /// first transmission or a retransmission; see
    /// [`crate::wiremsg::WireMessages::moved`]). A receiver that reads the
    /// byte stream in order (Linux) can only deliver out of id order that
    /// way.
    pub fn out_of_order(&self) -> (u64, u64) {
        let repl: HashSet<u32> = self
            .sender
            .replacement_ids
            .iter()
            .chain(&self.ir_carried_ids)
            .chain(&self.moved_ids)
            .copied()
            .collect();
        let (mut ooo, mut via) = (0, 0);
        let mut highest: Option<u32> = None;
        for &id in &self.delivery_order {
            match highest {
                Some(h) if id < h => {
                    ooo += 1;
                    via += u64::from(repl.contains(&id) || repl.contains(&h));
                }
                _ => highest = Some(id),
            }
        }
        (ooo, via)
    }

    /// On-time delivery against each message's deadline (the
    /// `send_message` call plus its lifetime), with the oracle: a message
    /// counts for it unless the emulator's random loss dropped its first
    /// transmission, if half the RTT plus its serialization fits in the
    /// lifetime (`hollywood_media::scenario::ontime`).
    pub fn on_time(&self) -> hollywood_media::OnTime {
        let mut o = hollywood_media::OnTime::default();
        let one_way = self.spec.a_to_b.delay;
        // Frame (payload + 15 B header and CRC + COBS + markers, bounded)
        // and IPv4/TCP headers with timestamps.
        let wire = self.spec.size + self.spec.size / 254 + 20 + 52;
        for (i, sent) in self.sent_at.iter().enumerate() {
            let Some(s) = sent else { continue };
            let t = |d: Duration| hollywood_tcp::Instant::from_nanos(d.as_nanos() as u64);
            let lifetime = self.spec.lifetime_of(i as u32);
            let oracle = !self.network_dropped.get(i).copied().unwrap_or(false)
                && hollywood_media::oracle_in_time(
                    one_way,
                    self.spec.a_to_b.rate_bps,
                    wire,
                    lifetime,
                );
            o.add(
                hollywood_media::Timeliness::of(t(*s), self.arrival[i].map(t), lifetime),
                oracle,
            );
        }
        o
    }

    /// Workload ids never delivered.
    pub fn undelivered(&self) -> Vec<u32> {
        (0..self.spec.messages)
            .filter(|&i| self.arrival[i as usize].is_none())
            .collect()
    }
}

// ------------------------------------------------------------- interop --

/// The interop experiment's parameters.
#[derive(Debug, Clone)]
pub struct InteropSpec {
    /// Sender in a.
    pub sender: End,
    /// Receiver in b.
    pub receiver: End,
    /// Round-trip propagation delay (half each way).
    pub rtt: Duration,
    /// Bernoulli loss on a→b (the data direction).
    pub loss: f64,
    /// Messages.
    pub messages: u32,
    /// Payload bytes.
    pub size: usize,
    /// Interval between messages.
    pub interval: Duration,
    /// Message lifetime.
    pub lifetime: Duration,
    /// Link rate each way (bit/s, 0 = unlimited).
    pub rate_bps: u64,
    /// Emulator seed.
    pub seed: u64,
    /// Keep the capture in this directory
    /// (`interop-<sender>-<receiver>.pcap`).
    pub pcap_dir: Option<PathBuf>,
    /// Lab name.
    pub lab: String,
    /// Congestion control of the kernel ends (`None`: system default).
    pub kernel_cc: Option<String>,
    /// Secure mode at both ends (docs/SECURITY.md).
    pub secure: bool,
    /// Secure mode: the certificate to use (`None`: self-signed).
    pub identity: Option<hollywood_transport::secure::Identity>,
    /// Congestion control of the engine ends.
    pub engine_cc: CcAlgorithm,
}

impl InteropSpec {
    /// Defaults of `hollywood interop`: 40 ms RTT, 5 % loss, 2000 messages
    /// of 160 B every 5 ms with a 60 ms lifetime, unlimited rate, seed 1.
    pub fn new(sender: End, receiver: End, lab: &str) -> InteropSpec {
        InteropSpec {
            sender,
            receiver,
            rtt: Duration::from_millis(40),
            loss: 0.05,
            messages: 2000,
            size: 160,
            interval: Duration::from_millis(5),
            lifetime: Duration::from_millis(60),
            rate_bps: 0,
            seed: 1,
            pcap_dir: None,
            lab: lab.to_string(),
            kernel_cc: None,
            secure: false,
            identity: None,
            engine_cc: CcAlgorithm::default(),
        }
    }

    /// The runner's parameters.
    pub fn pair_spec(&self) -> PairSpec {
        let one_way = self.rtt / 2;
        let a_to_b = LinkConfig::new(self.rate_bps, one_way).with_loss(if self.loss > 0.0 {
            LossModel::Bernoulli(self.loss)
        } else {
            LossModel::None
        });
        PairSpec {
            lab: self.lab.clone(),
            sender: self.sender,
            receiver: self.receiver,
            sender_config: Config {
                cc: self.engine_cc,
                ..Config::hollywood(true, true)
            },
            receiver_config: Config {
                cc: self.engine_cc,
                ..Config::hollywood(true, true)
            },
            a_to_b,
            b_to_a: LinkConfig::new(self.rate_bps, one_way),
            seed: self.seed,
            messages: self.messages,
            size: self.size,
            interval: self.interval,
            lifetime: Some(self.lifetime),
            port: 5400,
            pcap: self.pcap_dir.as_ref().map(|d| {
                d.join(format!(
                    "interop-{}-{}.pcap",
                    self.sender.name(),
                    self.receiver.name()
                ))
            }),
            drain: Duration::from_secs(10),
            kernel_cc: self.kernel_cc.clone(),
            secure: self.secure,
            identity: self.identity.clone(),
            schedule: None,
        }
    }
}

/// One interop run's figures (see docs/LAB.md "Interop matrix").
#[derive(Debug, Clone, Serialize)]
pub struct InteropReport {
    /// Sender.
    pub sender: End,
    /// Receiver.
    pub receiver: End,
    /// Congestion control of kernel sockets (whether or not an end is a
    /// kernel socket, what the namespaces were set to).
    pub kernel_cc: String,
    /// Congestion control of engine ends.
    pub engine_cc: &'static str,
    /// The congestion control of the sender: the engine's or the kernel's.
    pub sender_cc: String,
    /// Messages sent.
    pub messages: u32,
    /// Delivered no later than `send_message` + lifetime: the headline
    /// figure.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Never delivered.
    pub never_arrived: u64,
    /// What a transport that loses only the packets the network (the
    /// emulator's random loss) dropped and adds no delay beyond the path's
    /// would deliver on time (`hollywood_media::scenario::ontime`).
    pub oracle_on_time: u64,
    /// `on_time / oracle_on_time`.
    pub on_time_of_oracle: f64,
    /// Intact messages delivered (each once).
    pub delivered: u64,
    /// Delivered messages whose content was wrong (must be 0).
    pub corrupt_delivered: u64,
    /// Messages delivered a second time (must be 0).
    pub duplicates_delivered: u64,
    /// Messages delivered after a message with a higher id.
    pub ooo_delivered: u64,
    /// Of those, explained by an inconsistent retransmission (the message
    /// itself or the higher one that overtook it travelled in another
    /// message's slot). A kernel receiver reads the stream in order, so
    /// there every out-of-order delivery must be of this kind.
    pub ooo_via_replacement: u64,
    /// Engine receiver: segments handed up ahead of a hole.
    pub ooo_segments: Option<u64>,
    /// Messages never delivered.
    pub not_delivered: u64,
    /// Messages the sender reported expired (replaced + expired before
    /// sending): lost to inconsistent retransmissions by design.
    pub lost_to_ir: u64,
    /// Sender: replaced by an inconsistent retransmission.
    pub replaced_at_sender: u64,
    /// Sender: expired before their first transmission.
    pub expired_before_send_at_sender: u64,
    /// Reported expired but delivered anyway (the original or the message
    /// as a replacement reached the receiver).
    pub expired_but_delivered: u64,
    /// Neither delivered nor reported expired (must be 0).
    pub unaccounted: u64,
    /// Engine sender: slots rewritten on retransmission
    /// (`HollywoodStats::ir_sent`); `None` for a kernel sender.
    pub ir_sent: Option<u64>,
    /// Engine sender: slots rewritten at their first transmission.
    pub replaced_at_first_tx: Option<u64>,
    /// Receiver's message layer: frames dropped as already delivered (a
    /// message that travelled both as a replacement and in its own slot).
    pub deframer_duplicates_dropped: u64,
    /// Receiver's message layer: candidates rejected by the CRC32C.
    pub deframer_crc_rejected: u64,
    /// Retransmissions whose bytes differ from the first transmission, in
    /// the capture.
    pub ir_seen_on_wire: u64,
    /// Bytes that differed.
    pub ir_bytes_on_wire: u64,
    /// Distinct messages found inside those inconsistent retransmissions.
    pub ir_messages_on_wire: u64,
    /// Retransmitted data segments in the capture.
    pub retransmissions_on_wire: u64,
    /// tshark's count of the same (cross-check).
    pub tshark_retransmissions: Option<u64>,
    /// Engine sender: retransmitted segments by its own counter.
    pub engine_retransmissions: Option<u64>,
    /// Retransmissions that do not repeat an earlier segment's start and
    /// length (Linux collapses small segments when it retransmits).
    pub length_mismatches_on_wire: u64,
    /// Data starting beyond the highest byte seen (must be 0).
    pub seq_holes_on_wire: u64,
    /// RSTs in either direction (must be 0).
    pub resets_on_wire: u64,
    /// Data packets the emulator dropped (a→b).
    pub dropped_by_emulator: u64,
    /// Data-direction packets the emulator saw.
    pub packets_a_to_b: u64,
    /// Delay (send call → delivery) of delivered messages, ms.
    pub delay_p50_ms: f64,
    /// 99th percentile.
    pub delay_p99_ms: f64,
    /// Maximum.
    pub delay_max_ms: f64,
    /// First message to end of stream at the receiver, s.
    pub duration_s: f64,
    /// A failure, if any.
    pub error: Option<String>,
    /// The capture file, if kept.
    pub pcap: Option<PathBuf>,
    /// Secure mode at both ends.
    pub secure: bool,
    /// Secure mode: messages the receiver refused to open (tag, replay,
    /// too old); there is no attacker on this path, so any is a fault.
    pub auth_failed: Option<u64>,
}

impl InteropReport {
    /// Summarise a run.
    pub fn of(run: &PairRun) -> InteropReport {
        let delays = Percentiles::of(run.delays_ms());
        let expired: HashSet<u32> = run.sender.expired_ids.iter().copied().collect();
        let undelivered = run.undelivered();
        let (ooo, ooo_via_replacement) = run.out_of_order();
        debug_assert_eq!(ooo, run.tally.out_of_order);
        let unaccounted = undelivered.iter().filter(|i| !expired.contains(i)).count() as u64;
        let expired_but_delivered = expired
            .iter()
            .filter(|&&i| run.arrival.get(i as usize).is_some_and(Option::is_some))
            .count() as u64;
        let engine_cc = run.spec.sender_config.cc.name();
        let on_time = run.on_time();
        InteropReport {
            sender: run.spec.sender,
            receiver: run.spec.receiver,
            kernel_cc: run.kernel_cc.clone(),
            engine_cc,
            sender_cc: match run.spec.sender {
                End::Engine => engine_cc.to_string(),
                End::Kernel => run.kernel_cc.clone(),
            },
            messages: run.spec.messages,
            on_time: on_time.on_time,
            late: on_time.late,
            never_arrived: on_time.never_arrived,
            oracle_on_time: on_time.oracle_on_time,
            on_time_of_oracle: on_time.of_oracle(),
            delivered: run.tally.delivered,
            corrupt_delivered: run.tally.corrupt,
            duplicates_delivered: run.tally.duplicates,
            ooo_delivered: run.tally.out_of_order,
            ooo_via_replacement,
            ooo_segments: run.receiver.ooo_segments,
            not_delivered: undelivered.len() as u64,
            lost_to_ir: expired.len() as u64,
            replaced_at_sender: run.sender.replaced,
            expired_before_send_at_sender: run.sender.expired_before_send,
            expired_but_delivered,
            unaccounted,
            ir_sent: run.sender.ir_sent,
            replaced_at_first_tx: run.sender.replaced_at_first_tx,
            deframer_duplicates_dropped: run.receiver.messages.deframer.duplicates_dropped,
            deframer_crc_rejected: run.receiver.messages.deframer.crc_rejected,
            ir_seen_on_wire: run.wire.inconsistent_retransmissions,
            ir_bytes_on_wire: run.wire.inconsistent_bytes,
            ir_messages_on_wire: run.ir_carried_ids.len() as u64,
            retransmissions_on_wire: run.wire.retransmissions,
            tshark_retransmissions: run.tshark_retransmissions,
            engine_retransmissions: run.sender.retransmitted_segments,
            length_mismatches_on_wire: run.wire.length_mismatches,
            seq_holes_on_wire: run.wire.seq_holes + run.wire_reverse.seq_holes,
            resets_on_wire: run.resets_on_wire,
            dropped_by_emulator: run.netem.a_to_b.dropped_loss,
            packets_a_to_b: run.netem.a_to_b.packets_in,
            delay_p50_ms: delays.p50,
            delay_p99_ms: delays.p99,
            delay_max_ms: delays.max,
            duration_s: run.duration.as_secs_f64(),
            error: run.error.clone(),
            pcap: run.pcap.clone(),
            secure: run.spec.secure,
            auth_failed: run
                .receiver
                .secure
                .map(|s| s.auth_failed + s.replayed + s.too_old),
        }
    }

    /// Whether the run upheld the invariants every combination must keep:
    /// no corrupt or duplicate delivery, no sequence hole, no RST, no
    /// failure, and every message delivered or reported expired. Returns
    /// the violations.
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                v.push(what);
            }
        };
        check(
            self.corrupt_delivered == 0,
            format!("{} corrupt deliveries", self.corrupt_delivered),
        );
        check(
            self.duplicates_delivered == 0,
            format!("{} duplicate deliveries", self.duplicates_delivered),
        );
        check(
            self.seq_holes_on_wire == 0,
            format!("{} sequence holes", self.seq_holes_on_wire),
        );
        check(
            self.resets_on_wire == 0,
            format!("{} RSTs", self.resets_on_wire),
        );
        check(
            self.unaccounted == 0,
            format!(
                "{} messages neither delivered nor reported expired",
                self.unaccounted
            ),
        );
        if self.receiver == End::Kernel {
            check(
                self.ooo_delivered == self.ooo_via_replacement,
                format!(
                    "kernel receiver delivered {} messages out of order, only {} via a replacement",
                    self.ooo_delivered, self.ooo_via_replacement
                ),
            );
        }
        if let Some(e) = &self.error {
            check(false, e.clone());
        }
        if let Some(n) = self.auth_failed {
            check(n == 0, format!("{n} messages failed to open (secure mode)"));
        }
        v
    }

    /// Human-readable summary of one run.
    pub fn to_text(&self) -> String {
        let opt = |o: Option<u64>| o.map_or("-".to_string(), |v| v.to_string());
        let mut s = String::new();
        s += &format!(
            "interop {} → {}{}: {} messages (sender congestion control: {}; engine {}, kernel {})\n",
            self.sender.name(),
            self.receiver.name(),
            if self.secure { " (secure mode)" } else { "" },
            self.messages,
            self.sender_cc,
            self.engine_cc,
            self.kernel_cc
        );
        s += &format!(
            "  on time: {} of {} (oracle {}, {:.1} %); late {}, never arrived {}\n",
            self.on_time,
            self.messages,
            self.oracle_on_time,
            100.0 * self.on_time_of_oracle,
            self.late,
            self.never_arrived
        );
        s += &format!("  delivered              {}\n", self.delivered);
        s += &format!("  corrupt_delivered      {}\n", self.corrupt_delivered);
        s += &format!("  duplicates_delivered   {}\n", self.duplicates_delivered);
        s += &format!(
            "  ooo_delivered          {} ({} via a replacement; engine receiver segments ahead of a hole: {})\n",
            self.ooo_delivered,
            self.ooo_via_replacement,
            opt(self.ooo_segments)
        );
        s += &format!(
            "  not_delivered          {} (lost_to_ir {}: replaced {}, expired before send {}; expired but delivered {}; unaccounted {})\n",
            self.not_delivered,
            self.lost_to_ir,
            self.replaced_at_sender,
            self.expired_before_send_at_sender,
            self.expired_but_delivered,
            self.unaccounted
        );
        s += &format!(
            "  ir_sent                {} (replaced at first transmission: {})\n",
            opt(self.ir_sent),
            opt(self.replaced_at_first_tx)
        );
        s += &format!(
            "  ir_seen_on_wire        {} ({} bytes differ; {} distinct messages inside)\n",
            self.ir_seen_on_wire, self.ir_bytes_on_wire, self.ir_messages_on_wire
        );
        s += &format!(
            "  retransmissions_on_wire {} (tshark {}, engine counter {}, length mismatches {})\n",
            self.retransmissions_on_wire,
            opt(self.tshark_retransmissions),
            opt(self.engine_retransmissions),
            self.length_mismatches_on_wire
        );
        s += &format!(
            "  receiver msg layer     {} duplicate frames dropped, {} CRC rejections\n",
            self.deframer_duplicates_dropped, self.deframer_crc_rejected
        );
        s += &format!("  seq_holes_on_wire      {}\n", self.seq_holes_on_wire);
        s += &format!("  resets_on_wire         {}\n", self.resets_on_wire);
        s += &format!(
            "  emulator               {} of {} data-direction packets dropped\n",
            self.dropped_by_emulator, self.packets_a_to_b
        );
        s += &format!(
            "  delay                  p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n",
            self.delay_p50_ms, self.delay_p99_ms, self.delay_max_ms
        );
        s += &format!("  duration               {:.2} s\n", self.duration_s);
        if let Some(e) = &self.error {
            s += &format!("  error                  {e}\n");
        }
        if let Some(p) = &self.pcap {
            s += &format!("  capture                {}\n", p.display());
        }
        s
    }
}

/// Run one combination.
pub fn run(spec: &InteropSpec) -> Result<InteropReport> {
    if !(0.0..1.0).contains(&spec.loss) {
        return Err(format!("loss {} is not in [0, 1)", spec.loss).into());
    }
    remove_stale_labs();
    let run = run_pair(&spec.pair_spec())?;
    Ok(InteropReport::of(&run))
}

/// The four combinations in table order: engine→engine, engine→kernel,
/// kernel→engine, kernel→kernel.
pub const MATRIX: [(End, End); 4] = [
    (End::Engine, End::Engine),
    (End::Engine, End::Kernel),
    (End::Kernel, End::Engine),
    (End::Kernel, End::Kernel),
];

/// A table of reports (one row per combination).
pub fn table(reports: &[InteropReport]) -> String {
    let opt = |o: Option<u64>| o.map_or("-".to_string(), |v| v.to_string());
    let mut s = String::from(
        "sender → receiver | sender cc | on time (oracle) | late | never | expired but delivered | corrupt | dup | ooo_delivered (explained) | unaccounted | ir_sent | ir_seen_on_wire | rtx_on_wire | seq_holes | resets | p50 ms | p99 ms | s\n",
    );
    for r in reports {
        s += &format!(
            "{} → {} | {} | {}/{} ({}) | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1}\n",
            r.sender.name(),
            r.receiver.name(),
            r.sender_cc,
            r.on_time,
            r.messages,
            r.oracle_on_time,
            r.late,
            r.never_arrived,
            r.expired_but_delivered,
            r.corrupt_delivered,
            r.duplicates_delivered,
            r.ooo_delivered,
            r.ooo_via_replacement,
            r.unaccounted,
            opt(r.ir_sent),
            r.ir_seen_on_wire,
            r.retransmissions_on_wire,
            r.seq_holes_on_wire,
            r.resets_on_wire,
            r.delay_p50_ms,
            r.delay_p99_ms,
            r.duration_s
        );
    }
    s
}
