//! QUIC on quinn-proto behind [`MessageTransport`]: the stream mappings of
//! [RTP-QUIC] and QUICsilver's deadline-aware partial reliability ([QUICsilver-2019]).
//!
//! One [`QuicTransport`] is one endpoint with at most one connection: the
//! client connects at [`MessageTransport::start`], the server accepts the
//! first connection and refuses others. Messages travel as [`record`]s on
//! unidirectional streams (or in RFC 9221 datagrams), as the [`Mapping`]
//! says:
//!
//! | mapping | streams | loss of one packet delays |
//! | --- | --- | --- |
//! | `quic-ss` | one for the connection (standard QUIC) | everything behind it |
//! | `quic-gop` | one per group ([`OutMessage::group`]) | the rest of its group |
//! | `quic-fps` | one per frame ([`OutMessage::frame`]) | the rest of its frame |
//! | `quic-pps` | one per message | only itself |
//! | `quic-dgram` | none: a datagram per message, never retransmitted | nothing (it is gone) |
//! | `quicsilver` | one per message, reset when it cannot arrive in time | only itself |
//!
//! Every stream mapping reads streams in order and delivers each record when
//! its last byte arrives. Newer streams are sent first (a priority rising
//! with each message, shifted by [`OutMessage::priority`]), as MoQ does
//! per group.
//!
//! **QUICsilver** ([QUICsilver-2019] §4, with thesis §4.2's liveness rule): a message
//! with a lifetime whose arrival can no longer be on time — `now + SRTT/2 >
//! deadline` — is given up: before it is sent it never opens a stream
//! ([`ExpiryReason::BeforeSend`]); after, its stream is reset (RESET_STREAM:
//! quinn drops its unsent and unacknowledged data, so nothing of it is
//! retransmitted; [`ExpiryReason::Abandoned`]). A message a live message
//! depends on (`depends_on`: an I-frame of later P-frames) is kept until the
//! last of its dependents' deadlines has passed too, and is sent before them
//! (its stream's priority is raised above theirs). The receiver skips a
//! reset stream without waiting for it, and delivers a late but complete
//! dependency (a decoder can still use a late I-frame; QUICsilver's
//! single-stream design could not, [QUICsilver-2019] §6.2). [QUICsilver-2019] removed stale
//! data with falsified ACKs, which also hid the loss from congestion
//! control; a reset does not, so congestion control sees every loss.
//!
//! A reset stream's message may have reached the receiver already (its
//! acknowledgement still in flight): [`ExpiryReason::Abandoned`] means the
//! sender stopped trying, not that the message was lost.

use crate::clock::{Clock, VirtualSystemTime};
use crate::kind::QuicKind;
use crate::record::{self, StreamParser};
use crate::{
    ExpiryReason, InMessage, Instant, MessageTransport, OutMessage, SendError, TransportEvent,
    TransportStats, EVENT_OVERHEAD, MAX_MESSAGE, RX_QUEUE_LIMIT,
};
use bytes::{Bytes, BytesMut};
use quinn_proto::{
    congestion, ClientConfig, Connection, ConnectionError, ConnectionHandle, DatagramEvent, Dir,
    Endpoint, EndpointConfig, Event, ReadError, ServerConfig, StreamEvent, StreamId,
    TransportConfig, VarInt,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How messages map onto QUIC ([RTP-QUIC] §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mapping {
    /// One stream for every message (standard QUIC; QUICsilver's baseline).
    SingleStream,
    /// A stream per group of pictures ([`OutMessage::group`]).
    PerGroup,
    /// A stream per frame ([`OutMessage::frame`]).
    PerFrame,
    /// A stream per message (packet).
    PerMessage,
    /// An RFC 9221 datagram per message.
    Datagram,
}

/// Congestion control of a QUIC connection (quinn-proto's controllers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuicCc {
    /// NewReno.
    NewReno,
    /// CUBIC (quinn's default).
    #[default]
    Cubic,
    /// BBR (quinn's BBRv1).
    Bbr,
}

impl QuicCc {
    /// The controller's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            QuicCc::NewReno => "newreno",
            QuicCc::Cubic => "cubic",
            QuicCc::Bbr => "bbr",
        }
    }
}

/// Configuration of a QUIC transport.
#[derive(Debug, Clone)]
pub struct QuicConfig {
    /// Stream mapping.
    pub mapping: Mapping,
    /// Deadline-aware partial reliability (needs [`Mapping::PerMessage`]).
    pub quicsilver: bool,
    /// Congestion control.
    pub cc: QuicCc,
    /// Concurrent unidirectional streams the peer may open (quinn's
    /// default 100 is short for a stream per message; MoQ uses 1024).
    pub max_streams: u32,
    /// Streams the peer may open at first, until
    /// [`QuicTransport::allow_all_peer_streams`] raises it to
    /// `max_streams`; `None` (the default): `max_streams` from the start.
    /// quinn-proto makes an entry for every stream the peer may open when
    /// the connection starts (~50 bytes each), so a listener whose callers
    /// mostly receive (a relay's players) starts them low and raises it
    /// for those that turn out to send (its publishers).
    pub peer_streams_at_start: Option<u32>,
    /// Messages waiting for a stream or the handshake, at most.
    pub max_backlog: usize,
    /// Send older streams first (HTTP/3's default order, RFC 9218
    /// urgency without `incremental`: a response before the ones pipelined
    /// after it). Off: newer streams first, for live media, where the
    /// newest frame matters most.
    pub oldest_first: bool,
    /// Collect the connection's TLS secrets (client side) in
    /// SSLKEYLOGFILE format, so a capture can be decrypted (Wireshark's
    /// `tls.keylog_file`). Off by default: the secrets are the keys.
    pub key_log: Option<Arc<KeyLogLines>>,
    /// Keep-alive: a PING after this much time without sending
    /// (quinn's `keep_alive_interval`). `None` (the default): none.
    pub keep_alive: Option<std::time::Duration>,
}

/// TLS secrets in the SSLKEYLOGFILE format (`LABEL client_random secret`,
/// hex), collected in memory by rustls's [`rustls::KeyLog`] hook.
#[derive(Default)]
pub struct KeyLogLines {
    lines: std::sync::Mutex<Vec<String>>,
}

impl std::fmt::Debug for KeyLogLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets themselves.
        f.debug_struct("KeyLogLines")
            .field("lines", &self.lines().len())
            .finish()
    }
}

impl KeyLogLines {
    /// The lines logged so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The file Wireshark reads: one line per secret.
    pub fn to_file_contents(&self) -> String {
        let mut s = String::new();
        for l in self.lines() {
            s.push_str(&l);
            s.push('\n');
        }
        s
    }
}

impl rustls::KeyLog for KeyLogLines {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let line = format!("{label} {} {}", hex(client_random), hex(secret));
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line);
    }

    fn will_log(&self, _label: &str) -> bool {
        true
    }
}

impl QuicConfig {
    /// The configuration of a QUIC variant, other fields at their defaults.
    pub fn of(kind: QuicKind) -> QuicConfig {
        QuicConfig {
            mapping: kind.mapping(),
            quicsilver: kind.quicsilver(),
            ..QuicConfig::default()
        }
    }

    /// The variant this configuration runs.
    pub fn kind(&self) -> QuicKind {
        QuicKind::of(self.mapping, self.quicsilver)
    }

    /// The transport name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

impl Default for QuicConfig {
    fn default() -> Self {
        QuicConfig {
            mapping: Mapping::SingleStream,
            quicsilver: false,
            cc: QuicCc::Cubic,
            max_streams: 1024,
            peer_streams_at_start: None,
            max_backlog: 4096,
            oldest_first: false,
            key_log: None,
            keep_alive: None,
        }
    }
}

/// A self-signed certificate for `localhost` (Ed25519: fixed-size
/// signatures, so handshake packet sizes do not vary between runs) and
/// its key, shared by the server (which presents it) and the client
/// (which trusts it).
#[derive(Debug, Clone)]
pub struct QuicIdentity {
    cert: rustls::pki_types::CertificateDer<'static>,
    key: Vec<u8>,
    /// The name the client checks the certificate against.
    name: String,
    /// The client verifies the server's certificate against `cert`
    /// (pinned). Off only for [`QuicIdentity::unverified`].
    verify: bool,
    /// The server's TLS configuration, made once and shared by every
    /// connection served with this identity (and its clones): rustls keeps
    /// a session cache in it (~31 KiB), which per connection was a fifth
    /// of an idle QUIC connection's memory at a relay.
    server_crypto: SharedServerCrypto,
}

/// See [`QuicIdentity::server_crypto`](QuicIdentity).
#[derive(Clone, Default)]
struct SharedServerCrypto(Arc<std::sync::OnceLock<Arc<dyn quinn_proto::crypto::ServerConfig>>>);

impl std::fmt::Debug for SharedServerCrypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "made"
        } else {
            "not yet made"
        })
    }
}

impl QuicIdentity {
    /// Generate a fresh identity.
    pub fn generate() -> Result<QuicIdentity, String> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .map_err(|e| format!("key generation: {e}"))?;
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .and_then(|p| p.self_signed(&key))
            .map_err(|e| format!("certificate: {e}"))?;
        Ok(QuicIdentity {
            cert: cert.der().clone(),
            key: key.serialize_der(),
            name: "localhost".to_string(),
            verify: true,
            server_crypto: SharedServerCrypto::default(),
        })
    }

    /// The certificate, key and name of a TCP secure-mode identity, so
    /// that one pinned certificate serves QUIC and TLS over TCP alike.
    pub fn from_identity(id: &crate::secure::Identity) -> QuicIdentity {
        QuicIdentity {
            cert: id.cert_der().clone(),
            key: id.key_der().to_vec(),
            name: id.name().to_string(),
            verify: true,
            server_crypto: SharedServerCrypto::default(),
        }
    }

    /// A fresh server identity whose clients do not verify it: the
    /// connection is encrypted but not authenticated (an active attacker
    /// on the path can impersonate the server). QUIC cannot run without
    /// TLS; this is what an application that asked for no security gets.
    pub fn unverified() -> Result<QuicIdentity, String> {
        let mut id = QuicIdentity::generate()?;
        id.verify = false;
        Ok(id)
    }

    /// Whether a client checks the server's certificate.
    pub fn verifies(&self) -> bool {
        self.verify
    }

    fn server_config(&self, transport: Arc<TransportConfig>) -> Result<ServerConfig, String> {
        let crypto = match self.server_crypto.0.get() {
            Some(c) => c.clone(),
            None => {
                let key = rustls::pki_types::PrivateKeyDer::Pkcs8(self.key.clone().into());
                let made = ServerConfig::with_single_cert(vec![self.cert.clone()], key)
                    .map_err(|e| format!("server TLS: {e}"))?;
                self.server_crypto.0.get_or_init(|| made.crypto).clone()
            }
        };
        let mut c = ServerConfig::with_crypto(crypto);
        c.transport_config(transport).migration(false);
        Ok(c)
    }

    fn client_config(
        &self,
        transport: Arc<TransportConfig>,
        key_log: Option<Arc<KeyLogLines>>,
    ) -> Result<ClientConfig, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.cert.clone())
            .map_err(|e| format!("trust anchor: {e}"))?;
        // What quinn's `ClientConfig::with_root_certificates` builds (TLS
        // 1.3 only, ring), plus the key-log hook.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("client TLS: {e}"))?;
        let mut tls = if self.verify {
            builder.with_root_certificates(roots).with_no_client_auth()
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        };
        if let Some(k) = key_log {
            tls.key_log = k;
        }
        let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|e| format!("client TLS: {e}"))?;
        let mut c = ClientConfig::new(Arc::new(quic));
        c.transport_config(transport);
        Ok(c)
    }
}

/// The verifier of [`QuicIdentity::unverified`]: any certificate is
/// accepted, but the handshake signature is still checked against it, so
/// the keys are the server's (encryption without authentication).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub use crate::Role;

/// Error code of a stream reset because its message expired.
const EXPIRED: u32 = 1;
/// Out-of-order bytes one receive stream may hold ([`RecvState`]); a
/// stream whose peer leaves a hole open beyond this is stopped as
/// malformed (an ordered reader's quinn would hold at most a stream
/// receive window, 1.25 MB by default).
const PENDING_MAX: usize = 8 << 20;
/// Out-of-order bytes all receive streams of a connection may hold
/// together: unordered reads return quinn's flow-control credit as soon as
/// a chunk is read, so what waits here behind holes is outside quinn's
/// windows. The stream whose chunk crosses it is stopped as malformed. A
/// legitimate peer's holes hold at most what was in flight (its
/// congestion window).
const CONN_PENDING_MAX: usize = 16 << 20;
/// quinn's connection-wide receive window (its default is unlimited, so
/// only `max_streams` × the 1.25 MB stream window bounded what quinn
/// buffers): 64 MiB covers 5 Gb/s at 100 ms.
const CONN_RECEIVE_WINDOW: u32 = 64 << 20;

/// One receive stream. quinn's unordered reads hand over each chunk as it
/// arrives; they are put back in order here, so the records are exactly
/// what an ordered reader gets, at the same time, and each knows when the
/// last of its bytes reached the stack: `InMessage::received` ([RTP-QUIC]
/// §5.1's head-of-line-blocking delay is the difference).
#[derive(Debug, Default)]
struct RecvState {
    parser: StreamParser,
    /// Stream offset of the next byte for the parser.
    next: u64,
    /// Chunks beyond a hole: offset → (bytes, arrival).
    pending: BTreeMap<u64, (Bytes, Instant)>,
    pending_bytes: usize,
    /// The latest arrival among the bytes of the record in progress.
    run: Option<Instant>,
}

impl RecvState {
    /// A chunk at stream offset `off` that arrived `now`; complete records
    /// go to `out`. True when the stream must be stopped (malformed
    /// records, or more out-of-order data than [`PENDING_MAX`]).
    fn take(
        &mut self,
        off: u64,
        mut bytes: Bytes,
        now: Instant,
        out: &mut Vec<(record::Header, Vec<u8>, Instant)>,
    ) -> bool {
        // quinn never hands a byte over twice; trim defensively.
        if off < self.next {
            let skip = (self.next - off).min(bytes.len() as u64) as usize;
            let _ = bytes.split_to(skip);
            if bytes.is_empty() {
                return false;
            }
        }
        let off = off.max(self.next);
        if off > self.next {
            self.pending_bytes += bytes.len();
            self.pending.insert(off, (bytes, now));
            return self.pending_bytes > PENDING_MAX;
        }
        if self.feed(&bytes, now, out) {
            return true;
        }
        while let Some(e) = self.pending.first_entry() {
            if *e.key() > self.next {
                break;
            }
            let (k, (b, t)) = e.remove_entry();
            self.pending_bytes -= b.len();
            let skip = ((self.next - k) as usize).min(b.len());
            if self.feed(&b[skip..], t, out) {
                return true;
            }
        }
        false
    }

    /// The next in-order bytes, which arrived at `t`. True on a malformed
    /// record.
    fn feed(
        &mut self,
        bytes: &[u8],
        t: Instant,
        out: &mut Vec<(record::Header, Vec<u8>, Instant)>,
    ) -> bool {
        if bytes.is_empty() {
            return false;
        }
        self.next += bytes.len() as u64;
        let run = self.run.map_or(t, |r| r.max(t));
        let mut got = Vec::new();
        let bad = self.parser.push(bytes, &mut got).is_err();
        // The first record completed here began before (or in) this piece;
        // the others lie inside it. What the parser still holds is the
        // next record's start, from this piece.
        self.run = match (got.is_empty(), self.parser.buffered() > 0) {
            (true, _) => Some(run),
            (false, true) => Some(t),
            (false, false) => None,
        };
        for (i, (h, p)) in got.into_iter().enumerate() {
            out.push((h, p, if i == 0 { run } else { t }));
        }
        bad
    }
}

/// Error code of a receive stream stopped because of malformed records.
const MALFORMED: u32 = 2;
/// Bytes of messages waiting before the handshake or for a stream, at most.
const MAX_BACKLOG_BYTES: usize = 16 << 20;

/// How long after sending an acknowledgement is overdue: 1.5 SRTT plus
/// the peer's maximum ACK delay (quinn's default 25 ms).
fn ack_overdue(srtt: Duration) -> Duration {
    srtt * 3 / 2 + Duration::from_millis(25)
}

/// A message on the sender's books.
#[derive(Debug, Clone, Copy)]
struct Live {
    substream: u16,
    id: u32,
    /// Absolute deadline, if it has a lifetime.
    deadline: Option<Instant>,
    /// When it was handed to quinn.
    queued: Instant,
    /// Position in sending order.
    order: u64,
}

/// A send stream with bytes still to write or acknowledge.
#[derive(Debug, Default)]
struct SendState {
    /// Bytes not yet accepted by quinn (flow control).
    unwritten: Vec<u8>,
    /// Finish once `unwritten` is empty.
    finish: bool,
    /// The messages on this stream (one except for ss/gop/fps).
    messages: Vec<Live>,
    priority: i32,
}

/// QUIC on quinn-proto as a [`MessageTransport`].
pub struct QuicTransport {
    cfg: QuicConfig,
    role: Role,
    local: SocketAddr,
    remote: Option<SocketAddr>,
    clock: Clock,
    vtime: Arc<VirtualSystemTime>,
    endpoint: Endpoint,
    client_config: Option<ClientConfig>,
    /// The name the client checks the server's certificate against.
    server_name: String,
    conn: Option<(ConnectionHandle, Connection)>,
    now: Instant,
    started: bool,
    connected: bool,
    /// Datagrams the endpoint itself produced (refusals, stateless resets).
    responses: VecDeque<Vec<u8>>,
    events: VecDeque<TransportEvent>,
    /// Bytes of received messages in `events` (payload + EVENT_OVERHEAD).
    rx_queued: usize,
    /// Reading stopped at RX_QUEUE_LIMIT (quinn's flow control then
    /// closes); resumes from `poll_event`.
    rx_held: bool,
    // Sender.
    backlog: VecDeque<(OutMessage, Instant)>,
    backlog_bytes: usize,
    streams: BTreeMap<StreamId, SendState>,
    /// The open stream of ss/gop/fps and its key (group or frame).
    current: Option<(StreamId, Option<u64>)>,
    /// Live message → its stream (QUICsilver bookkeeping).
    by_message: HashMap<(u16, u32), StreamId>,
    /// Latest deadline among the live dependents of a message.
    dependents_until: HashMap<(u16, u32), Option<Instant>>,
    order: u32,
    /// Messages given to quinn so far (sending order).
    sequence: u64,
    /// The newest message (sending order) acknowledged so far.
    newest_acked: Option<u64>,
    close_requested: bool,
    close_sent: bool,
    // Receiver.
    parsers: HashMap<StreamId, RecvState>,
    /// Sum of the parsers' `pending_bytes` (≤ [`CONN_PENDING_MAX`]).
    pending_total: usize,
    /// Records ready for the application, with when their last byte
    /// reached the stack.
    records: Vec<(record::Header, Vec<u8>, Instant)>,
    stats: TransportStats,
    scratch: Vec<u8>,
    /// The datagram send buffer's free space when empty.
    datagram_space: usize,
    closed_reported: bool,
    /// The connection's timer as of the last input or transmit (quinn's
    /// `poll_timeout` needs `&mut`).
    conn_timeout: Option<Instant>,
    done: bool,
}

impl std::fmt::Debug for QuicTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicTransport")
            .field("name", &self.cfg.name())
            .field("role", &self.role)
            .field("local", &self.local)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl QuicTransport {
    /// Bytes of received messages waiting for the application (bounded by
    /// about [`RX_QUEUE_LIMIT`] plus what one read of a stream yields).
    pub fn rx_queued_bytes(&self) -> usize {
        self.rx_queued
    }

    /// A QUIC endpoint at `local`. `seed` makes the run deterministic in
    /// time and sizes (quinn's RNG); TLS and connection ids stay random in
    /// their bytes, never in their lengths.
    pub fn new(
        cfg: QuicConfig,
        role: Role,
        local: SocketAddr,
        identity: &QuicIdentity,
        seed: u64,
    ) -> Result<QuicTransport, String> {
        if cfg.quicsilver && cfg.mapping != Mapping::PerMessage {
            return Err("QUICsilver needs the stream-per-message mapping".into());
        }
        let mut tc = TransportConfig::default();
        let peer_streams = cfg
            .peer_streams_at_start
            .map_or(cfg.max_streams, |n| n.min(cfg.max_streams));
        tc.max_concurrent_uni_streams(VarInt::from_u32(peer_streams.max(1)))
            .max_concurrent_bidi_streams(VarInt::from_u32(0))
            .receive_window(VarInt::from_u32(CONN_RECEIVE_WINDOW))
            .enable_segmentation_offload(false)
            .keep_alive_interval(cfg.keep_alive);
        match cfg.cc {
            QuicCc::NewReno => {
                tc.congestion_controller_factory(Arc::new(congestion::NewRenoConfig::default()))
            }
            QuicCc::Cubic => {
                tc.congestion_controller_factory(Arc::new(congestion::CubicConfig::default()))
            }
            QuicCc::Bbr => {
                tc.congestion_controller_factory(Arc::new(congestion::BbrConfig::default()))
            }
        };
        let tc = Arc::new(tc);
        let vtime = VirtualSystemTime::new();
        let mut ec = EndpointConfig::default();
        let mut rng_seed = [0u8; 32];
        rng_seed[..8].copy_from_slice(&seed.to_le_bytes());
        rng_seed[8..16].copy_from_slice(&(local.port() as u64).to_le_bytes());
        ec.rng_seed(Some(rng_seed));
        let (server, client_config) = match role {
            Role::Server => {
                let mut sc = identity.server_config(tc)?;
                sc.time_source(vtime.clone());
                (Some(Arc::new(sc)), None)
            }
            Role::Client { .. } => (None, Some(identity.client_config(tc, cfg.key_log.clone())?)),
        };
        let remote = match role {
            Role::Client { remote } => Some(remote),
            Role::Server => None,
        };
        Ok(QuicTransport {
            role,
            local,
            remote,
            clock: Clock::new(),
            vtime,
            endpoint: Endpoint::new(Arc::new(ec), server, true, None),
            client_config,
            server_name: identity.name.clone(),
            conn: None,
            now: Instant::ZERO,
            started: false,
            connected: false,
            responses: VecDeque::new(),
            events: VecDeque::new(),
            rx_queued: 0,
            rx_held: false,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            streams: BTreeMap::new(),
            current: None,
            by_message: HashMap::new(),
            dependents_until: HashMap::new(),
            order: 0,
            sequence: 0,
            newest_acked: None,
            close_requested: false,
            close_sent: false,
            parsers: HashMap::new(),
            pending_total: 0,
            records: Vec::new(),
            stats: TransportStats::default(),
            scratch: Vec::new(),
            datagram_space: 0,
            closed_reported: false,
            conn_timeout: None,
            done: false,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &QuicConfig {
        &self.cfg
    }

    /// Let the peer open up to the configuration's `max_streams` streams
    /// at once, where [`QuicConfig::peer_streams_at_start`] allowed fewer
    /// (the peer hears it in a MAX_STREAMS frame with the next packet).
    /// `false` before the connection exists (a client before it
    /// started).
    pub fn allow_all_peer_streams(&mut self) -> bool {
        let n = VarInt::from_u32(self.cfg.max_streams.max(1));
        match self.conn.as_mut() {
            Some((_, c)) => {
                c.set_max_concurrent_streams(Dir::Uni, n);
                true
            }
            None => false,
        }
    }

    /// quinn's connection statistics, once connected.
    pub fn connection_stats(&self) -> Option<quinn_proto::ConnectionStats> {
        self.conn.as_ref().map(|(_, c)| c.stats())
    }

    fn set_now(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.vtime.set(self.now);
    }

    fn std_now(&self) -> std::time::Instant {
        self.clock.to_std(self.now)
    }

    fn srtt(&self) -> Duration {
        self.conn
            .as_ref()
            .map_or(Duration::from_millis(333), |(_, c)| c.rtt())
    }

    fn wrap(&mut self, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
        let p = hollywood_wire::build_udp_ip(self.local, dst, payload);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += p.len() as u64;
        p
    }

    /// Feed endpoint events, read connection events, expire, write.
    fn pump(&mut self) {
        let now = self.std_now();
        loop {
            let mut progress = false;
            if let Some((h, conn)) = self.conn.as_mut() {
                while let Some(ev) = conn.poll_endpoint_events() {
                    progress = true;
                    if let Some(cev) = self.endpoint.handle_event(*h, ev) {
                        conn.handle_event(cev);
                    }
                }
            }
            while let Some(ev) = self.conn.as_mut().and_then(|(_, c)| c.poll()) {
                progress = true;
                self.on_event(ev);
            }
            if !progress {
                break;
            }
        }
        if self.connected {
            self.flush_backlog();
            self.write_pending();
            self.expire();
            self.maybe_close(now);
        }
        self.refresh_timeout();
        if let Some((_, c)) = &self.conn {
            self.stats.packets_lost = c.stats().path.lost_packets;
            self.stats.srtt = Some(c.rtt());
            if c.is_drained() {
                self.conn = None;
                self.done = true;
                self.connected = false;
                if !self.closed_reported {
                    self.closed_reported = true;
                    self.events.push_back(TransportEvent::Closed);
                }
            }
        }
    }

    fn refresh_timeout(&mut self) {
        let clock = self.clock;
        self.conn_timeout = self
            .conn
            .as_mut()
            .and_then(|(_, c)| c.poll_timeout())
            .map(|t| clock.from_std(t));
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::HandshakeDataReady => {}
            Event::Connected => {
                self.connected = true;
                if let Some((_, c)) = self.conn.as_mut() {
                    self.datagram_space = c.datagrams().send_buffer_space();
                }
                self.events.push_back(TransportEvent::Connected);
            }
            Event::ConnectionLost { reason } => {
                self.connected = false;
                match reason {
                    ConnectionError::ApplicationClosed(c)
                        if c.error_code == VarInt::from_u32(0) =>
                    {
                        self.drain_all_streams();
                        self.events.push_back(TransportEvent::PeerClosed);
                        self.events.push_back(TransportEvent::Closed);
                        self.closed_reported = true;
                    }
                    ConnectionError::LocallyClosed => {
                        self.closed_reported = true;
                        self.events.push_back(TransportEvent::Closed)
                    }
                    other => {
                        self.closed_reported = true;
                        self.events
                            .push_back(TransportEvent::Failed(other.to_string()))
                    }
                }
            }
            Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => self.accept_streams(),
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {}
            Event::Stream(StreamEvent::Readable { id }) => self.read_stream(id),
            Event::Stream(StreamEvent::Finished { id }) => {
                if let Some(s) = self.streams.remove(&id) {
                    for m in &s.messages {
                        self.forget(m);
                        self.newest_acked = self.newest_acked.max(Some(m.order));
                        self.events.push_back(TransportEvent::Acked { id: m.id });
                    }
                }
            }
            Event::Stream(StreamEvent::Stopped { id, .. }) => {
                // The peer will not read it: the messages on it are gone.
                if let Some(s) = self.streams.remove(&id) {
                    for m in &s.messages {
                        self.forget(m);
                        self.expired(m, ExpiryReason::Abandoned);
                    }
                }
            }
            Event::Stream(StreamEvent::Writable { .. })
            | Event::Stream(StreamEvent::Available { .. })
            | Event::DatagramsUnblocked => {
                self.events.push_back(TransportEvent::Writable);
            }
            Event::DatagramReceived => self.read_datagrams(),
        }
    }

    fn forget(&mut self, m: &Live) {
        self.by_message.remove(&(m.substream, m.id));
        self.dependents_until.remove(&(m.substream, m.id));
    }

    fn expired(&mut self, m: &Live, reason: ExpiryReason) {
        self.stats.messages_expired += 1;
        self.events.push_back(TransportEvent::Expired {
            id: m.id,
            substream: m.substream,
            reason,
        });
    }

    // ---- receiver ----

    fn accept_streams(&mut self) {
        while let Some(id) = self
            .conn
            .as_mut()
            .and_then(|(_, c)| c.streams().accept(Dir::Uni))
        {
            self.parsers.entry(id).or_default();
            self.read_stream(id);
        }
    }

    fn read_stream(&mut self, id: StreamId) {
        if self.rx_held {
            return;
        }
        let Some((_, conn)) = self.conn.as_mut() else {
            return;
        };
        let now = self.now;
        let mut recv = conn.recv_stream(id);
        // Unordered: each chunk as it arrives, put back in order by
        // `RecvState` (which knows when every byte came).
        let Ok(mut chunks) = recv.read(false) else {
            return; // closed or not ours
        };
        let state = self.parsers.entry(id).or_default();
        let mut bad = false;
        let mut ended = false;
        // The other streams' pending bytes.
        let others = self.pending_total - state.pending_bytes;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    if state.take(chunk.offset, chunk.bytes, now, &mut self.records)
                        || others + state.pending_bytes > CONN_PENDING_MAX
                    {
                        bad = true;
                        break;
                    }
                }
                Ok(None) => {
                    ended = true;
                    if state.pending_bytes > 0 || state.parser.finish().is_err() {
                        bad = true;
                    }
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    // Skipped, never waited for (QUICsilver): whatever of
                    // it had not completed a record is gone.
                    ended = true;
                    self.stats.streams_reset_received += 1;
                    break;
                }
            }
        }
        let mine = state.pending_bytes;
        let _ = chunks.finalize();
        if bad {
            self.stats.malformed += 1;
            let _ = conn.recv_stream(id).stop(VarInt::from_u32(MALFORMED));
            ended = true;
        }
        self.pending_total = others + if ended { 0 } else { mine };
        if ended {
            self.parsers.remove(&id);
        }
        self.deliver_records();
    }

    fn read_datagrams(&mut self) {
        if self.rx_held {
            // quinn keeps at most `datagram_receive_buffer_size` and
            // drops the oldest beyond it.
            return;
        }
        let Some((_, conn)) = self.conn.as_mut() else {
            return;
        };
        while let Some(d) = conn.datagrams().recv() {
            match record::parse_datagram(&d) {
                Ok((h, p)) => self.records.push((h, p.to_vec(), self.now)),
                Err(_) => self.stats.malformed += 1,
            }
        }
        self.deliver_records();
    }

    fn deliver_records(&mut self) {
        for (h, payload, received) in self.records.drain(..) {
            self.rx_queued += payload.len() + EVENT_OVERHEAD;
            self.stats.messages_delivered += 1;
            self.events.push_back(TransportEvent::Message(InMessage {
                id: h.id,
                substream: h.substream,
                payload,
                arrival: self.now,
                received,
            }));
        }
        self.rx_held = self.rx_queued >= RX_QUEUE_LIMIT;
    }

    fn drain_all_streams(&mut self) {
        let ids: Vec<StreamId> = self.parsers.keys().copied().collect();
        for id in ids {
            self.read_stream(id);
        }
    }

    // ---- sender ----

    fn deadline(&self, msg: &OutMessage, queued: Instant) -> Option<Instant> {
        msg.lifetime.map(|l| queued + l)
    }

    /// QUICsilver's liveness test (thesis §4.2): can it still arrive by
    /// `deadline`, given a one-way delay of SRTT/2?
    fn can_arrive(&self, deadline: Instant) -> bool {
        self.now + self.srtt() / 2 <= deadline
    }

    fn flush_backlog(&mut self) {
        while let Some((msg, queued)) = self.backlog.pop_front() {
            self.backlog_bytes -= msg.payload.len();
            match self.transmit_message(msg, queued) {
                Ok(()) => {}
                Err((msg, queued)) => {
                    self.backlog_bytes += msg.payload.len();
                    self.backlog.push_front((msg, queued));
                    return;
                }
            }
        }
    }

    /// Put a message on a stream or in a datagram; gives it back if no
    /// stream can be opened now.
    fn transmit_message(
        &mut self,
        msg: OutMessage,
        queued: Instant,
    ) -> Result<(), (OutMessage, Instant)> {
        let deadline = self.deadline(&msg, queued);
        let live = Live {
            substream: msg.substream,
            id: msg.id,
            deadline,
            queued: self.now,
            order: self.sequence,
        };
        self.sequence += 1;
        if self.cfg.quicsilver {
            if let Some(d) = deadline {
                if !self.can_arrive(d) {
                    self.expired(&live, ExpiryReason::BeforeSend);
                    return Ok(());
                }
            }
        }
        let mut bytes = Vec::with_capacity(msg.payload.len() + 24);
        record::encode(
            &mut bytes,
            msg.id,
            msg.substream,
            msg.depends_on,
            &msg.payload,
        );
        let Some((_, conn)) = self.conn.as_mut() else {
            return Err((msg, queued));
        };
        if self.cfg.mapping == Mapping::Datagram {
            match conn.datagrams().send(Bytes::from(bytes), false) {
                Ok(()) => {}
                Err(quinn_proto::SendDatagramError::Blocked(_)) => {
                    self.expired(&live, ExpiryReason::QueueFull)
                }
                Err(e) => self
                    .events
                    .push_back(TransportEvent::Failed(format!("datagram: {e}"))),
            }
            return Ok(());
        }
        let key = match self.cfg.mapping {
            Mapping::PerGroup => msg.group,
            Mapping::PerFrame => msg.frame,
            _ => None,
        };
        let reuse = match (self.cfg.mapping, self.current) {
            (Mapping::SingleStream, Some((id, _))) => Some(id),
            (Mapping::PerGroup | Mapping::PerFrame, Some((id, k))) if key.is_some() && k == key => {
                Some(id)
            }
            _ => None,
        };
        let id = match reuse {
            Some(id) => id,
            None => {
                let Some(id) = conn.streams().open(Dir::Uni) else {
                    return Err((msg, queued)); // stream credit: wait for Available
                };
                // The previous group's or frame's stream is complete.
                if let Some((old, _)) = self.current.take() {
                    if let Some(s) = self.streams.get_mut(&old) {
                        s.finish = true;
                    }
                }
                self.order = self.order.wrapping_add(1);
                // Newer first (or older first); the application's
                // priority class on top.
                let age = (self.order & 0x7F_FFFF) as i32;
                let rank = if self.cfg.oldest_first {
                    0x7F_FFFF - age
                } else {
                    age
                };
                let priority = match self.cfg.mapping {
                    Mapping::SingleStream => 0,
                    _ => (i32::from(msg.priority) << 23) | rank,
                };
                let _ = conn.send_stream(id).set_priority(priority);
                self.streams.insert(
                    id,
                    SendState {
                        priority,
                        ..SendState::default()
                    },
                );
                if matches!(
                    self.cfg.mapping,
                    Mapping::SingleStream | Mapping::PerGroup | Mapping::PerFrame
                ) {
                    self.current = Some((id, key));
                }
                id
            }
        };
        let s = self.streams.get_mut(&id).expect("stream on the books");
        s.unwritten.extend_from_slice(&bytes);
        s.messages.push(live);
        let own_priority = s.priority;
        if self.cfg.mapping == Mapping::PerMessage {
            s.finish = true;
        }
        if self.cfg.quicsilver {
            self.by_message.insert((msg.substream, msg.id), id);
            if let Some(dep) = msg.depends_on {
                // Keep the dependency while this one lives, and send it first.
                if self.by_message.contains_key(&(msg.substream, dep)) {
                    let until = self
                        .dependents_until
                        .entry((msg.substream, dep))
                        .or_insert(deadline);
                    // None (a reliable dependent) keeps it for good.
                    *until = match (*until, deadline) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                }
                if let Some(&dep_stream) = self.by_message.get(&(msg.substream, dep)) {
                    if let Some(ds) = self.streams.get_mut(&dep_stream) {
                        if ds.priority <= own_priority {
                            ds.priority = own_priority.saturating_add(1);
                            if let Some((_, conn)) = self.conn.as_mut() {
                                let _ = conn.send_stream(dep_stream).set_priority(ds.priority);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn write_pending(&mut self) {
        let Some((_, conn)) = self.conn.as_mut() else {
            return;
        };
        for (&id, s) in self.streams.iter_mut() {
            if !s.unwritten.is_empty() {
                match conn.send_stream(id).write(&s.unwritten) {
                    Ok(n) => {
                        s.unwritten.drain(..n);
                    }
                    Err(quinn_proto::WriteError::Blocked) => continue,
                    Err(_) => {
                        // Stopped or closed: the Stopped event reports it.
                        s.unwritten.clear();
                        s.finish = false;
                        continue;
                    }
                }
            }
            if s.unwritten.is_empty() && s.finish {
                s.finish = false;
                let _ = conn.send_stream(id).finish();
            }
        }
    }

    /// QUICsilver: give up on messages that cannot arrive in time and that
    /// no live message depends on.
    fn expire(&mut self) {
        if !self.cfg.quicsilver {
            return;
        }
        let srtt = self.srtt();
        let horizon = self.now + srtt / 2;
        let mut gone = Vec::new();
        for (&id, s) in &self.streams {
            let Some(m) = s.messages.first() else {
                continue;
            };
            let Some(d) = m.deadline else { continue };
            // Only once it looks lost: a message sent after it was
            // acknowledged first (what quinn's loss detection waits for
            // too), or its acknowledgement is overdue. Before that no
            // retransmission is due and the message may well be arriving:
            // resetting it would report a delivered message as expired.
            // Acknowledgements and loss detection are handled in the same
            // input as this check, so the reset comes before a
            // retransmission is sent.
            let overtaken = self.newest_acked.is_some_and(|n| n > m.order);
            if horizon <= d || !(overtaken || self.now >= m.queued + ack_overdue(srtt)) {
                continue;
            }
            match self.dependents_until.get(&(m.substream, m.id)) {
                Some(None) => continue,                             // a reliable dependent
                Some(Some(until)) if horizon <= *until => continue, // a live dependent
                _ => gone.push(id),
            }
        }
        for id in gone {
            let Some(s) = self.streams.remove(&id) else {
                continue;
            };
            if let Some((_, conn)) = self.conn.as_mut() {
                let _ = conn.send_stream(id).reset(VarInt::from_u32(EXPIRED));
            }
            self.stats.streams_reset += 1;
            for m in &s.messages {
                self.forget(m);
                self.expired(m, ExpiryReason::Abandoned);
            }
        }
    }

    /// When QUICsilver next has to look at its streams.
    fn next_expiry(&self) -> Option<Instant> {
        if !self.cfg.quicsilver || !self.connected {
            return None;
        }
        let srtt = self.srtt();
        let half = srtt / 2;
        self.streams
            .values()
            .filter_map(|s| {
                let m = s.messages.first()?;
                let d = m.deadline?;
                let until = match self.dependents_until.get(&(m.substream, m.id)) {
                    Some(None) => return None,
                    Some(Some(u)) => d.max(*u),
                    None => d,
                };
                // The first instant at which now + half > until, and an
                // acknowledgement is overdue.
                let hopeless = until
                    .checked_sub(half)
                    .map_or(Instant::ZERO, |t| t + Duration::from_nanos(1));
                Some(hopeless.max(m.queued + ack_overdue(srtt)))
            })
            .min()
    }

    fn maybe_close(&mut self, now: std::time::Instant) {
        if !self.close_requested || self.close_sent {
            return;
        }
        if let Some((old, _)) = self.current.take() {
            if let Some(s) = self.streams.get_mut(&old) {
                s.finish = true;
            }
            self.write_pending();
        }
        let space = self.datagram_space;
        let datagrams_queued = self.cfg.mapping == Mapping::Datagram
            && self
                .conn
                .as_mut()
                .is_some_and(|(_, c)| c.datagrams().send_buffer_space() < space);
        if self.backlog.is_empty() && self.streams.is_empty() && !datagrams_queued {
            if let Some((_, c)) = self.conn.as_mut() {
                c.close(now, VarInt::from_u32(0), Bytes::from_static(b"done"));
                self.close_sent = true;
            }
        }
    }
}

impl MessageTransport for QuicTransport {
    fn name(&self) -> &'static str {
        self.cfg.name()
    }

    fn start(&mut self, now: Instant) {
        self.set_now(now);
        if self.started {
            return;
        }
        self.started = true;
        if let (Role::Client { remote }, Some(cc)) = (self.role, self.client_config.take()) {
            match self
                .endpoint
                .connect(self.std_now(), cc, remote, &self.server_name)
            {
                Ok((h, c)) => self.conn = Some((h, c)),
                Err(e) => self
                    .events
                    .push_back(TransportEvent::Failed(format!("connect: {e}"))),
            }
        }
        self.pump();
    }

    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.set_now(now);
        let Ok(d) = hollywood_wire::parse_udp_ip(packet) else {
            self.stats.malformed += 1;
            return;
        };
        if d.dst != self.local {
            return;
        }
        if self.remote.is_some_and(|r| r != d.src) && self.conn.is_some() {
            return; // one connection, one peer
        }
        self.stats.packets_received += 1;
        let std_now = self.std_now();
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let ev = self.endpoint.handle(
            std_now,
            d.src,
            Some(d.dst.ip()),
            None,
            BytesMut::from(d.payload),
            &mut buf,
        );
        match ev {
            Some(DatagramEvent::ConnectionEvent(h, cev)) => {
                if let Some((ch, c)) = self.conn.as_mut() {
                    if *ch == h {
                        c.handle_event(cev);
                    }
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                if self.conn.is_none() && !self.done {
                    match self.endpoint.accept(incoming, std_now, &mut buf, None) {
                        Ok((h, c)) => {
                            self.remote = Some(d.src);
                            self.conn = Some((h, c));
                        }
                        Err(e) => {
                            if let Some(t) = e.response {
                                let p = self.wrap(t.destination, &buf[..t.size]);
                                self.responses.push_back(p);
                            }
                        }
                    }
                } else {
                    let t = self.endpoint.refuse(incoming, &mut buf);
                    let p = self.wrap(t.destination, &buf[..t.size]);
                    self.responses.push_back(p);
                }
            }
            Some(DatagramEvent::Response(t)) => {
                let p = self.wrap(t.destination, &buf[..t.size]);
                self.responses.push_back(p);
            }
            None => {}
        }
        self.scratch = buf;
        self.pump();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.set_now(now);
        let std_now = self.std_now();
        if let Some((_, c)) = self.conn.as_mut() {
            if c.poll_timeout().is_some_and(|t| t <= std_now) {
                c.handle_timeout(std_now);
            }
        }
        self.pump();
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.set_now(now);
        if let Some(p) = self.responses.pop_front() {
            return Some(p);
        }
        let std_now = self.std_now();
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let t = self
            .conn
            .as_mut()
            .and_then(|(_, c)| c.poll_transmit(std_now, 1, &mut buf));
        let out = t.map(|t| self.wrap(t.destination, &buf[..t.size]));
        self.scratch = buf;
        self.refresh_timeout();
        if out.is_none() {
            // Sending may have produced events (e.g. a connection that
            // finished closing).
            self.pump();
        }
        out
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.conn_timeout, self.next_expiry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn send(&mut self, now: Instant, msg: OutMessage) -> Result<(), SendError> {
        self.set_now(now);
        if msg.payload.len() > MAX_MESSAGE {
            return Err(SendError::TooLarge(msg.payload.len()));
        }
        if self.close_requested || self.done {
            return Err(SendError::NotConnected);
        }
        if self.cfg.mapping == Mapping::Datagram {
            let max = self
                .conn
                .as_mut()
                .and_then(|(_, c)| c.datagrams().max_size())
                .unwrap_or(1200 - 60);
            let need =
                record::encoded_len(msg.id, msg.substream, msg.depends_on, msg.payload.len());
            if need > max {
                return Err(SendError::TooLarge(msg.payload.len()));
            }
        }
        if self.backlog.len() >= self.cfg.max_backlog
            || self.backlog_bytes + msg.payload.len() > MAX_BACKLOG_BYTES
        {
            return Err(SendError::WouldBlock);
        }
        self.stats.messages_sent += 1;
        let queued = self.now;
        if self.connected && self.backlog.is_empty() {
            if let Err((msg, queued)) = self.transmit_message(msg, queued) {
                self.backlog_bytes += msg.payload.len();
                self.backlog.push_back((msg, queued));
            }
        } else {
            self.backlog_bytes += msg.payload.len();
            self.backlog.push_back((msg, queued));
        }
        self.pump();
        Ok(())
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        let e = self.events.pop_front()?;
        if let TransportEvent::Message(m) = &e {
            self.rx_queued -= m.payload.len() + EVENT_OVERHEAD;
            if self.rx_held && self.rx_queued < RX_QUEUE_LIMIT / 2 {
                self.rx_held = false;
                self.drain_all_streams();
                self.read_datagrams();
            }
        }
        Some(e)
    }

    fn close(&mut self, now: Instant) {
        self.set_now(now);
        self.close_requested = true;
        self.pump();
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }

    fn raise_receive_credit(&mut self) -> bool {
        self.allow_all_peer_streams()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// Three records back to back, 40 bytes each.
    fn stream() -> Vec<u8> {
        let mut s = Vec::new();
        for id in 0..3 {
            record::encode(&mut s, id, 0, None, &[id as u8; 32]);
        }
        s
    }

    /// Every packet `from` has for `to` now, handed over at once.
    fn flight(from: &mut QuicTransport, to: &mut QuicTransport, now: Instant) -> usize {
        let mut n = 0;
        while let Some(p) = from.poll_transmit(now) {
            to.handle_packet(now, &p);
            n += 1;
        }
        n
    }

    fn received(t: &mut QuicTransport) -> usize {
        std::iter::from_fn(|| t.poll_event())
            .filter(|e| matches!(e, TransportEvent::Message(_)))
            .count()
    }

    /// A listener that starts its callers at two streams lets a
    /// QUICsilver caller (a stream per message) have two messages in
    /// flight, and all of them once it raises the credit.
    #[test]
    fn a_caller_opens_few_streams_until_the_listener_raises_its_credit() {
        let id = QuicIdentity::generate().unwrap();
        let c: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let s: SocketAddr = "10.0.0.2:4433".parse().unwrap();
        let mut cfg = QuicConfig::of(QuicKind::Quicsilver);
        let mut client =
            QuicTransport::new(cfg.clone(), Role::Client { remote: s }, c, &id, 1).unwrap();
        cfg.peer_streams_at_start = Some(2);
        let mut server = QuicTransport::new(cfg, Role::Server, s, &id, 2).unwrap();
        let mut now = at(0);
        client.start(now);
        server.start(now);
        for _ in 0..6 {
            now += Duration::from_millis(1);
            flight(&mut client, &mut server, now);
            flight(&mut server, &mut client, now);
        }
        assert!(std::iter::from_fn(|| client.poll_event())
            .any(|e| matches!(e, TransportEvent::Connected)));
        received(&mut server);
        for i in 0..20 {
            client
                .send(now, OutMessage::new(i, vec![i as u8; 100]))
                .unwrap();
        }
        flight(&mut client, &mut server, now);
        assert_eq!(received(&mut server), 2, "two streams at first");
        // The server's acknowledgements (and the credit of the two
        // finished streams) let the client open two more, no more.
        now += Duration::from_millis(1);
        flight(&mut server, &mut client, now);
        flight(&mut client, &mut server, now);
        assert_eq!(received(&mut server), 2);
        assert!(server.allow_all_peer_streams());
        now += Duration::from_millis(1);
        flight(&mut server, &mut client, now);
        flight(&mut client, &mut server, now);
        assert_eq!(received(&mut server), 16, "the rest at once");
    }

    /// Every server connection of one identity (and its clones) shares
    /// one TLS configuration: its session cache is not made per connection.
    #[test]
    fn servers_of_one_identity_share_their_tls_configuration() {
        let id = QuicIdentity::generate().unwrap();
        let tc = Arc::new(TransportConfig::default());
        let a = id.server_config(tc.clone()).unwrap();
        let b = id.clone().server_config(tc.clone()).unwrap();
        assert!(Arc::ptr_eq(&a.crypto, &b.crypto));
        let other = QuicIdentity::generate().unwrap().server_config(tc).unwrap();
        assert!(!Arc::ptr_eq(&a.crypto, &other.crypto));
    }

    #[test]
    fn records_know_when_their_last_byte_reached_the_stack() {
        let s = stream();
        let n = s.len() / 3;
        let mut st = RecvState::default();
        let mut out = Vec::new();
        let chunk = |a: usize, b: usize| Bytes::copy_from_slice(&s[a..b]);
        // Record 0 whole at 10 ms; record 1's first half lost; its second
        // half and all of record 2 at 12 ms; the retransmission at 50 ms.
        assert!(!st.take(0, chunk(0, n), at(10), &mut out));
        assert!(!st.take(
            (n + n / 2) as u64,
            chunk(n + n / 2, 3 * n),
            at(12),
            &mut out
        ));
        assert_eq!(out.len(), 1);
        assert_eq!(st.pending_bytes, 3 * n - (n + n / 2));
        assert!(!st.take(n as u64, chunk(n, n + n / 2), at(50), &mut out));
        let got: Vec<(u32, Instant)> = out.iter().map(|(h, _, t)| (h.id, *t)).collect();
        // Record 1 was complete at the stack at 50 ms; record 2 at 12 ms
        // (it then waited 38 ms behind record 1).
        assert_eq!(got, vec![(0, at(10)), (1, at(50)), (2, at(12))]);
        assert_eq!((st.pending_bytes, st.run), (0, None));
    }

    #[test]
    fn a_record_split_over_pieces_takes_the_latest() {
        let s = stream();
        let mut st = RecvState::default();
        let mut out = Vec::new();
        // Byte by byte, the record's middle byte latest.
        for (i, b) in s.iter().enumerate() {
            let t = if i == 20 { at(90) } else { at(i as u64) };
            assert!(!st.take(i as u64, Bytes::copy_from_slice(&[*b]), t, &mut out));
        }
        let times: Vec<Instant> = out.iter().map(|r| r.2).collect();
        let n = s.len() as u64 / 3;
        assert_eq!(times, vec![at(90), at(2 * n - 1), at(3 * n - 1)]);
    }

    #[test]
    fn a_hole_held_open_too_long_stops_the_stream() {
        let mut st = RecvState::default();
        let mut out = Vec::new();
        let big = Bytes::from(vec![0u8; PENDING_MAX / 2 + 1]);
        assert!(!st.take(10, big.clone(), at(1), &mut out));
        assert!(st.take(10 + big.len() as u64, big, at(2), &mut out));
    }
}
