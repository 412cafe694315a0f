//! The DASH client of [DASHing-2018] (REFERENCES.md [DASHing-2018], algorithms: Algorithms 1 and 2 as
//! corrected there): fetch the manifest, then chunk after chunk, each
//! rate chosen by an [`Abr`], into a playout buffer of at most `B`
//! seconds.
//!
//! - **Algorithm 1 (TCP)**, `rx_threshold = 1`: a chunk counts once all
//!   its bytes are in; only then is the next one requested (one request
//!   at a time, a round trip idle per chunk).
//! - **Algorithm 2 (Hollywood)**, `rx_threshold = Rx_T < 1`: a chunk
//!   counts once `Rx_T` of its bytes are in, and the next request goes at
//!   that moment, while the rest of the chunk is still arriving
//!   (pipelining). If messages were discarded since the last request and
//!   the buffer holds more than one chunk, the buffer level given to the
//!   ABR is one chunk lower (the loss penalty). Throughput samples come
//!   from the partial (`Rx_T`) download.
//! - Both: when the buffer exceeds `B`, wait the excess before choosing
//!   (the corrected `Δt = b_now − B`).
//!
//! **Playback.** Start-up ends when [`ClientConfig::startup_chunks`]
//! chunks (2 s in [DASHing-2018]) have been downloaded, manifest fetch and
//! handshake included. Playback then drains the buffer in real time; a
//! stall begins when it is empty and ends when one more chunk has been
//! downloaded ([DASHing-2018] §4). A chunk plays whether or not all its bytes
//! are in; a message that arrives after it was needed is *discarded*
//! (late), counted, and its bytes are missing from the chunk. When a
//! message is needed is the [`Lateness`] rule: by default when the
//! playhead reaches its first byte (the [DASHing-2018] playout buffer works on
//! messages, "reorders by sequence number and offset" and discards late
//! ones; the playhead maps linearly to bytes within a chunk), or, for a
//! player that takes whole segments, when its chunk starts playing. Over
//! standard TCP a chunk is only in the buffer when it is complete, so
//! nothing is ever late.

use super::abr::{Abr, AbrKind, Context, Sample};
use super::content::{Content, Manifest};
use super::http::{self, ResponseHead, CONTROL, DATA};
use hollywood_tcp::Instant;
use hollywood_transport::{MessageTransport, OutMessage, TransportApp, TransportEvent};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Most body messages held before their response head arrives.
pub const MAX_PENDING: usize = 8192;
/// Most body bytes held before their response head arrives.
pub const MAX_PENDING_BYTES: usize = 16 << 20;
/// Largest manifest accepted (bytes).
pub const MAX_MANIFEST: u64 = 1 << 20;
/// How far a data message's sequence number may run ahead of the
/// messages received so far (bounds the duplicate filter's memory).
pub const MAX_SEQ_AHEAD: u32 = 1 << 20;

/// When a message is needed (and past which it is discarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lateness {
    /// When the playhead reaches the message's first byte (a message-level
    /// playout buffer, [DASHing-2018]'s).
    Position,
    /// When the message's chunk starts playing (a player that decodes
    /// whole segments).
    ChunkStart,
}

impl Lateness {
    /// Parse `position` or `chunk-start`.
    pub fn parse(s: &str) -> Result<Lateness, String> {
        match s {
            "position" => Ok(Lateness::Position),
            "chunk-start" => Ok(Lateness::ChunkStart),
            _ => Err(format!(
                "unknown lateness rule {s:?}: use position or chunk-start"
            )),
        }
    }
}

/// The client's rules.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClientConfig {
    /// Largest buffer `B` (s): above it the client waits.
    pub buffer_s: f64,
    /// Share of a chunk that makes it count and triggers the next request
    /// (`Rx_T`); 1 = the whole chunk, no pipelining (Algorithm 1).
    pub rx_threshold: f64,
    /// Algorithm 2's loss penalty.
    pub loss_penalty: bool,
    /// Chunks downloaded before playback starts.
    pub startup_chunks: usize,
    /// Rate adaptation.
    pub abr: AbrKind,
    /// When a message is late.
    pub lateness: Lateness,
    /// Check every body byte against the synthetic pattern
    /// (`content::pattern_byte`); off for real video.
    pub verify_pattern: bool,
    /// Keep the bytes of every chunk as played (late and lost messages
    /// missing, zeros in their place), for decoding: real video.
    pub keep_bytes: bool,
}

impl ClientConfig {
    /// The [DASHing-2018] client over standard TCP (Algorithm 1).
    pub fn algorithm1() -> ClientConfig {
        ClientConfig {
            buffer_s: 16.0,
            rx_threshold: 1.0,
            loss_penalty: false,
            startup_chunks: 2,
            abr: AbrKind::Bola,
            lateness: Lateness::Position,
            verify_pattern: true,
            keep_bytes: false,
        }
    }

    /// The [DASHing-2018] client over TCP Hollywood (Algorithm 2, `Rx_T` = 0.9).
    pub fn algorithm2() -> ClientConfig {
        ClientConfig {
            rx_threshold: 0.9,
            loss_penalty: true,
            ..ClientConfig::algorithm1()
        }
    }

    /// Refuse settings that make no sense.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.buffer_s.is_finite() && self.buffer_s >= 1.0 && self.buffer_s <= 3600.0) {
            return Err(format!("buffer {} s: use 1 to 3600", self.buffer_s));
        }
        if !(self.rx_threshold > 0.0 && self.rx_threshold <= 1.0) {
            return Err(format!(
                "receive threshold {}: use (0, 1]",
                self.rx_threshold
            ));
        }
        if self.startup_chunks == 0 {
            return Err("start-up needs at least one chunk".into());
        }
        Ok(())
    }
}

/// What happened to one chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkRecord {
    /// Chunk number.
    pub n: usize,
    /// Representation index.
    pub quality: usize,
    /// Its encoding rate (bit/s).
    pub bitrate_bps: u64,
    /// When it was requested (s since the session began).
    pub requested_s: f64,
    /// When it counted as downloaded (threshold reached).
    pub downloaded_s: Option<f64>,
    /// When its last byte arrived.
    pub complete_s: Option<f64>,
    /// Body length.
    pub size: u64,
    /// Body bytes received in time.
    pub received: u64,
    /// Messages received in time.
    pub messages: u32,
    /// Messages that arrived after the playhead passed them.
    pub late_messages: u32,
    #[serde(skip)]
    path: String,
    #[serde(skip)]
    start: Option<u64>,
    #[serde(skip)]
    data: Vec<u8>,
}

impl ChunkRecord {
    /// The chunk's bytes as played, when the client keeps them
    /// ([`ClientConfig::keep_bytes`]); messages that never arrived in
    /// time are zeros.
    pub fn data(&self) -> &[u8] {
        &self.data
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Manifest,
    Chunk(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Play {
    Startup,
    Playing { since: f64, at: f64 },
    Stalled { since: f64, at: f64 },
    Ended { at: f64 },
}

/// See the module docs.
#[derive(Debug)]
pub struct DashClient {
    cfg: ClientConfig,
    manifest_path: String,
    base: String,
    t0: Option<Instant>,
    manifest: Option<Manifest>,
    abr: Option<Box<dyn Abr>>,
    mpd: Vec<u8>,
    mpd_received: u64,
    /// Body ranges by stream offset: start -> (end, target).
    ranges: BTreeMap<u64, (u64, Target)>,
    pending: Vec<(u32, u64, Vec<u8>)>,
    seen: Vec<u64>,
    data_messages: u32,
    chunks: Vec<ChunkRecord>,
    outstanding: Option<usize>,
    wait_until: Option<f64>,
    losses_since: u32,
    samples: Vec<Sample>,
    last_download_end: Option<f64>,
    downloaded: usize,
    play: Play,
    ended: Option<f64>,
    startup_s: Option<f64>,
    stalls: Vec<(f64, f64)>,
    discarded: u64,
    corrupt: u64,
    duplicates: u64,
    outbox: VecDeque<OutMessage>,
    held: Option<OutMessage>,
    next_id: u32,
    error: Option<String>,
}

/// What a client measured ([DASHing-2018] §4's metrics).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientReport {
    /// From the session's start to the start of playback (s).
    pub startup_s: Option<f64>,
    /// Total time with an empty buffer after start-up (s).
    pub total_stall_s: f64,
    /// Stall events.
    pub stalls: usize,
    /// Mean encoding rate of the downloaded chunks (kb/s).
    pub avg_bitrate_kbps: f64,
    /// Chunks at a lower rate than the one before, % of chunks.
    pub down_switch_pct: f64,
    /// Messages discarded as late.
    pub messages_discarded: u64,
    /// Body bytes of downloaded chunks that never arrived in time.
    pub bytes_missing: u64,
    /// Messages whose bytes were wrong (must be 0).
    pub corrupt_messages: u64,
    /// Messages delivered twice (ignored).
    pub duplicate_messages: u64,
    /// When playback ended (s), if it did.
    pub ended_s: Option<f64>,
    /// Every chunk.
    pub chunks: Vec<ChunkRecord>,
    /// Stall intervals (start, end), s.
    pub stall_intervals: Vec<(f64, f64)>,
    /// Why the client stopped early, if it did.
    pub error: Option<String>,
}

impl DashClient {
    /// A client that plays the manifest at `manifest_path` (its directory
    /// is the base of the chunk URLs).
    pub fn new(cfg: ClientConfig, manifest_path: &str) -> DashClient {
        let base = match manifest_path.rfind('/') {
            Some(i) => manifest_path[..=i].to_string(),
            None => "/".into(),
        };
        DashClient {
            cfg,
            manifest_path: manifest_path.into(),
            base,
            t0: None,
            manifest: None,
            abr: None,
            mpd: Vec::new(),
            mpd_received: 0,
            ranges: BTreeMap::new(),
            pending: Vec::new(),
            seen: Vec::new(),
            data_messages: 0,
            chunks: Vec::new(),
            outstanding: None,
            wait_until: None,
            losses_since: 0,
            samples: Vec::new(),
            last_download_end: None,
            downloaded: 0,
            play: Play::Startup,
            ended: None,
            startup_s: None,
            stalls: Vec::new(),
            discarded: 0,
            corrupt: 0,
            duplicates: 0,
            outbox: VecDeque::new(),
            held: None,
            next_id: 0,
            error: None,
        }
    }

    /// Playback ended, or the client gave up.
    pub fn finished(&self) -> bool {
        matches!(self.play, Play::Ended { .. }) || self.error.is_some()
    }

    /// Why the client stopped early.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The manifest, once it is in.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// Every chunk requested so far, in order (chunk `n` at index `n`).
    pub fn chunks(&self) -> &[ChunkRecord] {
        &self.chunks
    }

    /// Whether chunk `n`'s bytes are final at `now`: all of them are in,
    /// or it counted as downloaded and the playhead has passed the point
    /// after which its missing messages are discarded as late (the
    /// [`Lateness`] rule), or playback ended. What a gateway hands on to a
    /// player (`hollywood dash-gateway`).
    pub fn chunk_settled(&self, n: usize, now: Instant) -> bool {
        let Some(c) = self.chunks.get(n) else {
            return false;
        };
        if c.complete_s.is_some() || matches!(self.play, Play::Ended { .. }) {
            return true;
        }
        if c.downloaded_s.is_none() {
            return false;
        }
        let chunk_s = self.chunk_s();
        let last_needed = match self.cfg.lateness {
            Lateness::Position => (n + 1) as f64 * chunk_s,
            Lateness::ChunkStart => n as f64 * chunk_s,
        };
        self.playhead(self.secs(now)) > last_needed + 1e-9
    }

    fn secs(&self, now: Instant) -> f64 {
        (now - self.t0.unwrap_or(now)).as_secs_f64()
    }

    fn chunk_s(&self) -> f64 {
        self.manifest
            .as_ref()
            .map_or(1.0, |m| m.chunk.as_secs_f64())
    }

    fn total(&self) -> usize {
        self.manifest.as_ref().map_or(0, |m| m.chunks)
    }

    /// Where the playhead is (s of video).
    fn playhead(&self, now: f64) -> f64 {
        let avail = self.downloaded as f64 * self.chunk_s();
        match self.play {
            Play::Startup => 0.0,
            Play::Playing { since, at } => (at + now - since).min(avail),
            Play::Stalled { at, .. } | Play::Ended { at } => at,
        }
    }

    fn buffer_level(&self, now: f64) -> f64 {
        (self.downloaded as f64 * self.chunk_s() - self.playhead(now)).max(0.0)
    }

    /// Move playback to `now`: the buffer may have run dry or the video
    /// ended in between.
    fn advance(&mut self, now: f64) {
        if let Play::Playing { since, at } = self.play {
            let avail = self.downloaded as f64 * self.chunk_s();
            if at + (now - since) + 1e-9 >= avail {
                let when = (since + (avail - at)).min(now);
                if self.downloaded >= self.total() {
                    self.play = Play::Ended { at: avail };
                    self.wait_until = None;
                    self.ended = Some(when);
                } else {
                    self.play = Play::Stalled {
                        since: when,
                        at: avail,
                    };
                    if let Some(a) = &mut self.abr {
                        a.on_rebuffer();
                    }
                }
            }
        }
    }

    /// A chunk (or the start-up set) has been downloaded.
    fn on_downloaded(&mut self, now: f64) {
        self.advance(now);
        self.downloaded += 1;
        let t = self.chunk_s();
        match self.play {
            Play::Startup => {
                if self.downloaded >= self.cfg.startup_chunks.min(self.total()) {
                    self.startup_s = Some(now);
                    self.play = Play::Playing {
                        since: now,
                        at: 0.0,
                    };
                }
            }
            Play::Stalled { since, at } => {
                if self.downloaded as f64 * t + 1e-9 >= at + t {
                    self.stalls.push((since, now));
                    self.play = Play::Playing { since: now, at };
                }
            }
            Play::Playing { .. } | Play::Ended { .. } => {}
        }
        // The last chunk can make the video end at once (a 1-chunk video).
        self.advance(now);
    }

    fn send(&mut self, now: Instant, t: &mut dyn MessageTransport, payload: Vec<u8>) {
        let mut m = OutMessage::new(self.next_id, payload);
        self.next_id = self.next_id.wrapping_add(1);
        m.substream = CONTROL;
        self.outbox.push_back(m);
        self.flush(now, t);
    }

    fn flush(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        let mut held = self.held.take();
        let outbox = &mut self.outbox;
        let r = super::pump(now, t, &mut held, || outbox.pop_front());
        self.held = held;
        if let Err(e) = r {
            self.error = Some(format!("send: {e}"));
        }
    }

    /// Algorithms 1 and 2's loop body: wait while the buffer is over `B`,
    /// choose a rate, request the next chunk.
    fn decide(&mut self, now_i: Instant, t: &mut dyn MessageTransport) {
        let now = self.secs(now_i);
        self.advance(now);
        if self.error.is_some() || self.outstanding.is_some() || self.chunks.len() >= self.total() {
            return;
        }
        let Some(manifest) = self.manifest.as_ref() else {
            return;
        };
        if let Some(w) = self.wait_until {
            if now + 1e-9 < w {
                return;
            }
            self.wait_until = None;
        }
        let b = self.buffer_level(now);
        if b > self.cfg.buffer_s + 1e-3 {
            self.wait_until = Some(now + (b - self.cfg.buffer_s));
            return;
        }
        let chunk_s = manifest.chunk.as_secs_f64();
        let mut level = b;
        if self.cfg.loss_penalty && self.losses_since > 0 && level > chunk_s {
            level -= chunk_s;
        }
        let abr = self.abr.as_mut().expect("built with the manifest");
        let d = abr.choose(&Context {
            now_s: now,
            buffer_s: level,
            last_download_end_s: self.last_download_end,
            bitrates: &manifest.bandwidths,
            chunk_s,
            samples: &self.samples,
        });
        if d.delay_s > 1e-3 {
            self.wait_until = Some(now + d.delay_s);
            return;
        }
        let n = self.chunks.len();
        let q = d.quality.min(manifest.bandwidths.len() - 1);
        let path = manifest.chunk_path(&self.base, n, q);
        self.chunks.push(ChunkRecord {
            n,
            quality: q,
            bitrate_bps: manifest.bandwidths[q],
            requested_s: now,
            downloaded_s: None,
            complete_s: None,
            size: 0,
            received: 0,
            messages: 0,
            late_messages: 0,
            path: path.clone(),
            start: None,
            data: Vec::new(),
        });
        self.outstanding = Some(n);
        self.losses_since = 0;
        self.send(now_i, t, http::request(&path));
    }

    fn on_head(&mut self, now: Instant, t: &mut dyn MessageTransport, head: ResponseHead) {
        if head.status != 200 {
            self.error = Some(format!("{} answered {}", head.location, head.status));
            return;
        }
        let target = if head.location == self.manifest_path {
            if self.ranges.values().any(|r| r.1 == Target::Manifest) {
                self.error = Some("a second response for the manifest".into());
                return;
            }
            if head.length > MAX_MANIFEST {
                self.error = Some(format!(
                    "a manifest of {} bytes (limit {MAX_MANIFEST})",
                    head.length
                ));
                return;
            }
            self.mpd = vec![0; head.length as usize];
            Target::Manifest
        } else {
            match self
                .chunks
                .iter()
                .rposition(|c| c.start.is_none() && c.path == head.location)
            {
                Some(n) => {
                    if self.cfg.keep_bytes {
                        if head.length > super::content::MAX_CHUNK_FILE {
                            self.error = Some(format!("a chunk of {} bytes", head.length));
                            return;
                        }
                        self.chunks[n].data = vec![0; head.length as usize];
                    }
                    self.chunks[n].size = head.length;
                    self.chunks[n].start = Some(head.offset);
                    Target::Chunk(n)
                }
                None => {
                    self.error = Some(format!(
                        "a response for {} was not asked for",
                        head.location
                    ));
                    return;
                }
            }
        };
        let Some(end) = head.offset.checked_add(head.length) else {
            self.error = Some(format!(
                "response body at {} of {} bytes",
                head.offset, head.length
            ));
            return;
        };
        if self
            .ranges
            .range(..end)
            .next_back()
            .is_some_and(|(_, r)| r.0 > head.offset)
        {
            self.error = Some(format!(
                "response body {}..{end} overlaps another",
                head.offset
            ));
            return;
        }
        self.ranges.insert(head.offset, (end, target));
        if head.length == 0 {
            self.body_done(now, t, target);
        }
        // Bodies that came before their head.
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(_, e, b)| *e - b.len() as u64 >= head.offset && *e <= end);
        self.pending = rest;
        for (seq, e, b) in mine {
            self.on_data(now, t, seq, e, &b);
        }
    }

    fn on_data(
        &mut self,
        now_i: Instant,
        t: &mut dyn MessageTransport,
        seq: u32,
        end: u64,
        body: &[u8],
    ) {
        let start = end - body.len() as u64;
        let Some((&r_start, &(r_end, target))) = self.ranges.range(..=start).next_back() else {
            return self.hold(seq, end, body);
        };
        if end > r_end {
            return self.hold(seq, end, body);
        }
        if seq > self.data_messages.saturating_add(MAX_SEQ_AHEAD) {
            self.error = Some(format!("data message {seq} is implausibly far ahead"));
            return;
        }
        let word = seq as usize / 64;
        if self.seen.len() <= word {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << (seq % 64)) != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[word] |= 1 << (seq % 64);
        self.data_messages += 1;
        let within = start - r_start;
        match target {
            Target::Manifest => {
                self.mpd[within as usize..within as usize + body.len()].copy_from_slice(body);
                self.mpd_received += body.len() as u64;
                if self.mpd_received == self.mpd.len() as u64 {
                    self.body_done(now_i, t, Target::Manifest);
                }
            }
            Target::Chunk(n) => {
                let now = self.secs(now_i);
                self.advance(now);
                let q = self.chunks[n].quality;
                if self.cfg.verify_pattern && !Content::check(n, q, within, body) {
                    self.corrupt += 1;
                    return;
                }
                let size = self.chunks[n].size.max(1);
                let needed_at = match self.cfg.lateness {
                    Lateness::Position => (n as f64 + within as f64 / size as f64) * self.chunk_s(),
                    Lateness::ChunkStart => n as f64 * self.chunk_s(),
                };
                if self.playhead(now) > needed_at + 1e-9 {
                    self.chunks[n].late_messages += 1;
                    self.discarded += 1;
                    self.losses_since += 1;
                    return;
                }
                let c = &mut self.chunks[n];
                if c.received + body.len() as u64 > c.size {
                    self.error = Some(format!(
                        "more bytes for chunk {n} than its {} bytes",
                        c.size
                    ));
                    return;
                }
                if !c.data.is_empty() {
                    c.data[within as usize..within as usize + body.len()].copy_from_slice(body);
                }
                c.received += body.len() as u64;
                c.messages += 1;
                if c.received == c.size {
                    c.complete_s = Some(now);
                }
                if c.downloaded_s.is_none()
                    && c.received as f64 + 1e-9 >= self.cfg.rx_threshold * c.size as f64
                {
                    self.body_done(now_i, t, target);
                }
            }
        }
    }

    fn hold(&mut self, seq: u32, end: u64, body: &[u8]) {
        let held: usize = self.pending.iter().map(|p| p.2.len()).sum::<usize>() + body.len();
        if self.pending.len() >= MAX_PENDING || held > MAX_PENDING_BYTES {
            self.error = Some(format!(
                "{MAX_PENDING} body messages without a response head"
            ));
            return;
        }
        self.pending.push((seq, end, body.to_vec()));
    }

    /// The manifest is in, or a chunk reached its threshold.
    fn body_done(&mut self, now_i: Instant, t: &mut dyn MessageTransport, target: Target) {
        let now = self.secs(now_i);
        match target {
            Target::Manifest => {
                let xml = String::from_utf8_lossy(&self.mpd).into_owned();
                match Manifest::parse(&xml) {
                    Ok(m) => {
                        self.abr = Some(self.cfg.abr.build(&m.bandwidths));
                        self.manifest = Some(m);
                        if self.total() == 0 {
                            self.play = Play::Ended { at: 0.0 };
                            self.ended = Some(now);
                        }
                    }
                    Err(e) => self.error = Some(e),
                }
            }
            Target::Chunk(n) => {
                let c = &mut self.chunks[n];
                c.downloaded_s = Some(now);
                self.samples.push(Sample {
                    bits: c.received as f64 * 8.0,
                    seconds: (now - c.requested_s).max(1e-6),
                });
                self.last_download_end = Some(now);
                if self.outstanding == Some(n) {
                    self.outstanding = None;
                }
                self.on_downloaded(now);
            }
        }
        self.decide(now_i, t);
    }

    /// What the client measured; a stall still running counts up to `now`.
    pub fn report(&self, now: Instant) -> ClientReport {
        let now = self.secs(now);
        let mut stalls = self.stalls.clone();
        if let Play::Stalled { since, .. } = self.play {
            stalls.push((since, now));
        }
        let done: Vec<&ChunkRecord> = self
            .chunks
            .iter()
            .filter(|c| c.downloaded_s.is_some())
            .collect();
        let avg = if done.is_empty() {
            0.0
        } else {
            done.iter().map(|c| c.bitrate_bps as f64).sum::<f64>() / done.len() as f64 / 1000.0
        };
        let downs = done
            .windows(2)
            .filter(|w| w[1].quality < w[0].quality)
            .count();
        ClientReport {
            startup_s: self.startup_s,
            total_stall_s: stalls.iter().map(|s| s.1 - s.0).sum::<f64>() + 0.0,
            stalls: stalls.len(),
            avg_bitrate_kbps: avg,
            down_switch_pct: if done.is_empty() {
                0.0
            } else {
                100.0 * downs as f64 / done.len() as f64
            },
            messages_discarded: self.discarded,
            bytes_missing: done.iter().map(|c| c.size.saturating_sub(c.received)).sum(),
            corrupt_messages: self.corrupt,
            duplicate_messages: self.duplicates,
            ended_s: self.ended,
            chunks: self.chunks.clone(),
            stall_intervals: stalls,
            error: self.error.clone(),
        }
    }

    fn next_wake(&self) -> Option<f64> {
        let play = match self.play {
            Play::Playing { since, at } => {
                Some(since + (self.downloaded as f64 * self.chunk_s() - at))
            }
            _ => None,
        };
        match (play, self.wait_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl TransportApp for DashClient {
    fn on_start(&mut self, now: Instant, _t: &mut dyn MessageTransport) {
        self.t0 = Some(now);
    }

    fn on_event(&mut self, now: Instant, t: &mut dyn MessageTransport, ev: TransportEvent) {
        if self.finished() {
            return;
        }
        match ev {
            TransportEvent::Connected => {
                let path = self.manifest_path.clone();
                self.send(now, t, http::request(&path));
            }
            TransportEvent::Message(m) if m.substream == CONTROL => {
                match ResponseHead::parse(&m.payload) {
                    Ok(h) => self.on_head(now, t, h),
                    Err(e) => self.error = Some(e),
                }
            }
            TransportEvent::Message(m) if m.substream == DATA => match http::parse_data(&m.payload)
            {
                Ok((seq, end, body)) => self.on_data(now, t, seq, end, body),
                Err(e) => self.error = Some(e),
            },
            TransportEvent::Message(m) => {
                self.error = Some(format!("a message on unknown sub-stream {}", m.substream));
            }
            TransportEvent::Writable => self.flush(now, t),
            TransportEvent::PeerClosed | TransportEvent::Closed => {
                self.error = Some("the server closed the connection".into());
            }
            TransportEvent::Failed(e) => self.error = Some(format!("connection failed: {e}")),
            TransportEvent::Expired { id, .. } => {
                self.error = Some(format!("request {id} expired (requests are reliable)"));
            }
            TransportEvent::Acked { .. } => {}
        }
    }

    fn on_timeout(&mut self, now: Instant, t: &mut dyn MessageTransport) {
        if self.finished() {
            return;
        }
        self.decide(now, t);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.finished() {
            return None;
        }
        let t0 = self.t0?;
        self.next_wake()
            .map(|s| t0 + Duration::from_secs_f64(s.max(0.0)) + Duration::from_nanos(2))
    }
}

#[cfg(test)]
mod hostile {
    //! The client against a server that breaks the rules: each guard
    //! ends the session with an error instead of a panic or unbounded
    //! memory.
    use super::*;
    use crate::dash::content::Content;
    use crate::dash::tests::{msg, Sink};

    fn head(location: &str, offset: u64, length: u64) -> TransportEvent {
        let h = ResponseHead {
            status: 200,
            location: location.into(),
            length,
            offset,
            content_type: String::new(),
        };
        msg(CONTROL, h.encode())
    }

    /// A client that has the manifest (of `content`) and has asked for
    /// chunk 0.
    fn started(content: &Content) -> (DashClient, Sink) {
        let mut c = DashClient::new(ClientConfig::algorithm2(), &content.manifest_path());
        let mut t = Sink::default();
        let now = Instant::ZERO;
        c.on_start(now, &mut t);
        c.on_event(now, &mut t, TransportEvent::Connected);
        let mpd = content.mpd().into_bytes();
        c.on_event(
            now,
            &mut t,
            head(&content.manifest_path(), 0, mpd.len() as u64),
        );
        let mut off = 0;
        for (i, part) in mpd.chunks(1000).enumerate() {
            off += part.len() as u64;
            c.on_event(
                now,
                &mut t,
                msg(DATA, http::data_message(i as u32, off, part)),
            );
        }
        assert_eq!(c.error(), None);
        assert_eq!(t.0.len(), 2, "the manifest and chunk 0 requested");
        (c, t)
    }

    fn content() -> Content {
        Content::dashing(5, Duration::from_secs(1), 0.0, 1).unwrap()
    }

    #[test]
    fn a_well_behaved_server_is_followed() {
        let content = content();
        let (mut c, mut t) = started(&content);
        let start = 100_000;
        let size = u64::from(content.size(0, 0).unwrap());
        c.on_event(
            Instant::ZERO,
            &mut t,
            head(&content.chunk_path(0, 0), start, size),
        );
        let mut body = vec![0; 1388];
        content.fill(0, 0, 0, &mut body);
        c.on_event(
            Instant::ZERO,
            &mut t,
            msg(DATA, http::data_message(50, start + 1388, &body)),
        );
        assert_eq!(c.error(), None);
        assert_eq!(c.chunks[0].received, 1388);
    }

    #[test]
    fn a_chunk_settles_when_whole_or_once_its_messages_would_be_late() {
        let content = content();
        let (mut c, mut t) = started(&content);
        let start = 100_000;
        let size = u64::from(content.size(0, 0).unwrap());
        let now = Instant::ZERO;
        c.on_event(now, &mut t, head(&content.chunk_path(0, 0), start, size));
        let mut body = vec![0; size as usize];
        content.fill(0, 0, 0, &mut body);
        let parts: Vec<&[u8]> = body.chunks(1388).collect();
        let mut off = start;
        for (i, part) in parts.iter().enumerate() {
            off += part.len() as u64;
            if i == 0 {
                // The first message is lost.
                continue;
            }
            c.on_event(
                now,
                &mut t,
                msg(DATA, http::data_message(50 + i as u32, off, part)),
            );
        }
        assert!(c.chunks()[0].downloaded_s.is_some(), "over Rx_T");
        assert!(!c.chunk_settled(0, now), "its first message may still come");
        assert!(!c.chunk_settled(1, now), "requested (pipelined), not in");
        // Chunk 1 at the rung BOLA chose, whole: start-up ends (two
        // chunks), playback starts.
        let q1 = c.chunks()[1].quality;
        let start1 = start + size;
        let size1 = u64::from(content.size(1, q1).unwrap());
        c.on_event(now, &mut t, head(&content.chunk_path(1, q1), start1, size1));
        let mut body = vec![0; size1 as usize];
        content.fill(1, q1, 0, &mut body);
        let mut off = start1;
        for (i, part) in body.chunks(1388).enumerate() {
            off += part.len() as u64;
            c.on_event(
                now,
                &mut t,
                msg(DATA, http::data_message(500 + i as u32, off, part)),
            );
        }
        assert!(c.chunk_settled(1, now), "whole");
        assert!(!c.chunk_settled(0, now), "the playhead is at its start");
        // Once the playhead is past the chunk, nothing more is taken.
        let later = now + Duration::from_secs(30);
        c.on_timeout(later, &mut t);
        assert!(c.chunk_settled(0, later));
        assert!(c.manifest().is_some_and(|m| m.chunks == 5));
    }

    #[test]
    fn a_second_manifest_response_is_refused() {
        let content = content();
        let (mut c, mut t) = started(&content);
        c.on_event(
            Instant::ZERO,
            &mut t,
            head(&content.manifest_path(), 50_000, 10),
        );
        assert!(
            c.error().unwrap().contains("second response"),
            "{:?}",
            c.error()
        );
    }

    #[test]
    fn a_body_past_the_end_of_the_stream_offsets_is_refused() {
        let content = content();
        let (mut c, mut t) = started(&content);
        c.on_event(
            Instant::ZERO,
            &mut t,
            head(&content.chunk_path(0, 0), u64::MAX - 5, 100),
        );
        assert!(c.error().is_some());
    }

    #[test]
    fn more_bytes_than_the_chunk_holds_are_refused() {
        let content = content();
        let (mut c, mut t) = started(&content);
        c.on_event(
            Instant::ZERO,
            &mut t,
            head(&content.chunk_path(0, 0), 100_000, 1388),
        );
        let mut body = vec![0; 1388];
        content.fill(0, 0, 0, &mut body);
        // The same bytes under two sequence numbers.
        c.on_event(
            Instant::ZERO,
            &mut t,
            msg(DATA, http::data_message(60, 101_388, &body)),
        );
        c.on_event(
            Instant::ZERO,
            &mut t,
            msg(DATA, http::data_message(61, 101_388, &body)),
        );
        assert!(c.error().unwrap().contains("more bytes"), "{:?}", c.error());
    }

    #[test]
    fn bodies_without_a_head_are_held_only_so_far() {
        let content = content();
        let (mut c, mut t) = started(&content);
        let big = vec![7u8; 1 << 20];
        let mut k = 0;
        while c.error().is_none() && k < 100 {
            k += 1;
            let end = 10_000_000 * k as u64;
            c.on_event(
                Instant::ZERO,
                &mut t,
                msg(DATA, http::data_message(1000 + k, end, &big)),
            );
        }
        assert!(
            c.error().unwrap().contains("without a response head"),
            "{:?}",
            c.error()
        );
        assert!(k <= 17, "{k} MiB held");
    }

    #[test]
    fn an_implausible_sequence_number_is_refused() {
        let content = content();
        let (mut c, mut t) = started(&content);
        c.on_event(
            Instant::ZERO,
            &mut t,
            head(&content.chunk_path(0, 0), 100_000, 1388),
        );
        let mut body = vec![0; 1388];
        content.fill(0, 0, 0, &mut body);
        c.on_event(
            Instant::ZERO,
            &mut t,
            msg(DATA, http::data_message(u32::MAX - 1, 101_388, &body)),
        );
        assert!(
            c.error().unwrap().contains("implausibly"),
            "{:?}",
            c.error()
        );
    }
}
