//! The live-video receiver's playout model (issue 12, step 1): given when
//! each frame was generated and when its last packet reached the
//! application, decide which frames play, which stall playback, which are
//! skipped, and which are *useful* (decodable), with the seeds' definitions:
//!
//! * **Playback clock** ([QUICsilver-2019] §3.2): frame 0 is due
//!   `one_way + buffer_frames · frame_interval` after it was generated, and
//!   frame *f* one frame interval after frame *f − 1*.
//! * **Stall** ([QUICsilver-2019], "no buffered video to play while head-of-line
//!   blocking holds data"): with [`OnMissing::Stall`] (a reliable, ordered
//!   transport — TCP, QUIC on one stream — will deliver the frame, so the
//!   player waits), a frame that is incomplete when the player is ready for
//!   it pauses playback until it is complete; the wait is added to the
//!   **playback discrepancy** (intended minus actual playback time,
//!   cumulative: the sum of the pauses). After the pause the player either
//!   catches up ([`Resume::CatchUp`]: the held-back frames play at once and
//!   the schedule is the original one, so each head-of-line event that
//!   outlasts the buffer is its own stall — the [QUICsilver-2019] Tables 1–2, where the
//!   discrepancy is the stall count times about one RTT) or shifts every
//!   later frame by the pause ([`Resume::Shift`]: the backlog then absorbs
//!   later losses).
//! * **Skip**: with [`OnMissing::Skip`] (TCP Hollywood, QUICsilver, UDP,
//!   QUIC per packet: what is late will not be waited for), an incomplete
//!   frame is concealed at its due time and playback goes on; a frame the
//!   transport never delivers is skipped in either mode.
//! * **Useful frame** ([QUICsilver-2019] §5, [RTP-QUIC]): played, and its reference
//!   chain complete by its own play time. A frame is complete when its last
//!   packet arrived, or, with redundancy r (`VideoScenario::redundancy`,
//!   The [RTP-QUIC] decoder), when all but ⌊r·n⌋ of its n packets had. A frame is decodable at
//!   `max(complete, decodable(reference))`; an intra (I) frame has no
//!   reference, so a *late* I-frame — too late for its own slot — still
//!   serves the P-frames played after it arrived. The reference is the GOP's
//!   I-frame ([`Reference::Gop`], [QUICsilver-2019]) or the previous frame
//!   ([`Reference::Previous`], [TCP-video] and [RTP-QUIC]).
//!
//! The model is a pure function of the timings, so every transport is judged
//! by the same player.

use crate::stream::{MediaPacket, Planned, Schedule};
use crate::{MessagesRun, MessagesScenario};
use hollywood_tcp::Instant;
use std::time::Duration;

/// What a frame needs to be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// A P-frame references the latest I-frame (its GOP's).
    Gop,
    /// A P-frame references the frame before it.
    Previous,
}

/// What the player does when the frame due is incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMissing {
    /// Pause playback until the frame is complete (a reliable transport).
    Stall,
    /// Conceal the frame and play on.
    Skip,
}

/// Where a stalling player resumes after a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Play the frames held back by the pause at once and return to the
    /// original schedule (a live player at the live edge; [QUICsilver-2019], whose
    /// discrepancy is the stall count times the per-stall delay, Table 2):
    /// every head-of-line event that outlasts the buffer is a stall of its
    /// own.
    CatchUp,
    /// Shift every later frame by the pause: the backlog stays buffered and
    /// absorbs later losses (a player that never drops behind-live data).
    Shift,
}

/// One frame as the receiving application saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTiming {
    /// When the sender generated it.
    pub generated: Instant,
    /// When its last packet reached the application; `None` = never whole.
    pub complete: Option<Instant>,
    /// An intra (I) frame: decodable on its own.
    pub intra: bool,
}

/// The player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Player {
    /// Time between frames (1/fps).
    pub frame_interval: Duration,
    /// Frames buffered before playback starts.
    pub buffer_frames: u32,
    /// The path's one-way delay, which the playback clock allows for.
    pub one_way: Duration,
    /// Stall or skip.
    pub on_missing: OnMissing,
    /// What a P-frame references.
    pub reference: Reference,
    /// Where a stalling player resumes.
    pub resume: Resume,
}

/// What happened to one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameFate {
    /// When it was due (the playback clock; with [`Resume::Shift`] the
    /// discrepancy so far included).
    pub due: Instant,
    /// When it played; `None` = skipped (concealed).
    pub played: Option<Instant>,
    /// Played and decodable by then.
    pub useful: bool,
}

/// The totals over a stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PlayoutReport {
    /// Frames sent.
    pub frames: u64,
    /// Frames played (on time, or after a stall).
    pub played: u64,
    /// Frames played after their original playout time (thesis §6.1.2's
    /// delayed frames).
    pub delayed: u64,
    /// Frames skipped (concealed): incomplete when due, or never complete.
    pub skipped: u64,
    /// Played and decodable.
    pub useful: u64,
    /// Playback pauses.
    pub stalls: u64,
    /// Cumulative playback discrepancy: the sum of the pauses.
    pub discrepancy: Duration,
    /// The longest pause.
    pub longest_stall: Duration,
}

impl PlayoutReport {
    /// Useful frames as a percentage of frames sent (100 for no frames).
    pub fn useful_pct(&self) -> f64 {
        if self.frames == 0 {
            100.0
        } else {
            100.0 * self.useful as f64 / self.frames as f64
        }
    }
}

impl Player {
    /// Play `frames` (in generation order; frame 0 starts the clock).
    pub fn play(&self, frames: &[FrameTiming]) -> (Vec<FrameFate>, PlayoutReport) {
        let mut fates = Vec::with_capacity(frames.len());
        let mut report = PlayoutReport {
            frames: frames.len() as u64,
            ..PlayoutReport::default()
        };
        let Some(first) = frames.first() else {
            return (fates, report);
        };
        let start = first.generated + self.one_way + self.frame_interval * self.buffer_frames;
        // When each frame could first be decoded (None: never).
        let mut decodable: Vec<Option<Instant>> = Vec::with_capacity(frames.len());
        let mut discrepancy = Duration::ZERO;
        let mut last_played: Option<Instant> = None;
        let refs = references(frames, self.reference);
        for (f, fr) in frames.iter().enumerate() {
            // A P-frame before any I-frame has nothing to decode from.
            let dec = match (fr.complete, fr.intra, refs[f]) {
                (None, ..) => None,
                (Some(c), true, _) => Some(c),
                (Some(c), false, Some(r)) => decodable[r].map(|d: Instant| d.max(c)),
                (Some(_), false, None) => None,
            };
            decodable.push(dec);
            let scheduled = start + self.frame_interval * f as u32;
            let due = match self.resume {
                Resume::Shift => scheduled + discrepancy,
                Resume::CatchUp => scheduled,
            };
            // The player is ready for this frame at its due time, or when the
            // previous frame played if it is still catching up.
            let ready = last_played.map_or(due, |p: Instant| p.max(due));
            let played = match fr.complete {
                Some(c) if c <= ready => Some(ready),
                Some(c) if self.on_missing == OnMissing::Stall => {
                    let pause = c - ready;
                    discrepancy += pause;
                    report.stalls += 1;
                    report.longest_stall = report.longest_stall.max(pause);
                    Some(c)
                }
                _ => None,
            };
            if let Some(p) = played {
                last_played = Some(p);
                report.delayed += u64::from(p > scheduled);
            }
            let useful = matches!((played, dec), (Some(p), Some(d)) if d <= p);
            match played {
                Some(_) => report.played += 1,
                None => report.skipped += 1,
            }
            report.useful += u64::from(useful);
            fates.push(FrameFate {
                due,
                played,
                useful,
            });
        }
        report.discrepancy = discrepancy;
        (fates, report)
    }
}

/// Which frames a decoder could decode at all, whenever they arrived: whole,
/// with the frame they reference decodable (an intra frame needs nothing; a
/// P-frame before any I-frame has nothing to decode from). Frames played
/// in time are a subset ([`FrameFate::useful`]).
pub fn decodable_ever(frames: &[FrameTiming], reference: Reference) -> Vec<bool> {
    let refs = references(frames, reference);
    let mut out: Vec<bool> = Vec::with_capacity(frames.len());
    for (fr, r) in frames.iter().zip(&refs) {
        let chain = fr.intra || r.is_some_and(|r| out[r]);
        out.push(fr.complete.is_some() && chain);
    }
    out
}

/// Each frame's reference: none for an intra frame or for a P-frame before
/// any I-frame (which has nothing to decode from).
fn references(frames: &[FrameTiming], reference: Reference) -> Vec<Option<usize>> {
    let mut last_intra = None;
    frames
        .iter()
        .enumerate()
        .map(|(f, fr)| {
            if fr.intra {
                last_intra = Some(f);
                return None;
            }
            match reference {
                Reference::Gop => last_intra,
                Reference::Previous => f.checked_sub(1),
            }
        })
        .collect()
}

/// The RTP-like header every media packet's payload starts with (RFC 3550
/// §5.1's fixed header, then a 4-byte extension), 16 bytes, network byte
/// order:
///
/// ```text
///  0: V=2, P=0, X=1, CC=0 (0x90)    1: M (last packet of the frame) | PT
///  2: sequence number (16 bits)      4: timestamp (90 kHz, 32 bits)
///  8: frame number (32 bits; RTP's SSRC position)
/// 12: packets in the frame (16)     14: this packet's index (16)
/// ```
///
/// PT is 96 for a P-frame, 97 for an I-frame (dynamic payload types). The
/// receiver checks every byte of every packet, header included
/// (`messages::payload_of`), so a delivered packet's frame, type and
/// place are what the timetable says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpLike {
    /// Last packet of its frame (RTP's marker bit).
    pub marker: bool,
    /// An I-frame.
    pub intra: bool,
    /// Sequence number (the message id, modulo 2^16).
    pub seq: u16,
    /// Send time in 90 kHz units (modulo 2^32).
    pub timestamp: u32,
    /// Frame number.
    pub frame: u32,
    /// Packets in the frame.
    pub count: u16,
    /// This packet's index in the frame.
    pub index: u16,
}

impl RtpLike {
    /// Header length.
    pub const LEN: usize = 16;
    /// Payload type of a P-frame packet.
    pub const PT_P: u8 = 96;
    /// Payload type of an I-frame packet.
    pub const PT_I: u8 = 97;

    /// The header of message `id` planned as `pl`.
    pub fn for_packet(id: u32, pl: &Planned, m: MediaPacket) -> RtpLike {
        RtpLike {
            marker: u32::from(m.index) + 1 == u32::from(m.count),
            intra: m.intra,
            seq: id as u16,
            timestamp: (pl.at.as_nanos() * 9 / 100_000) as u32,
            frame: pl.frame as u32,
            count: m.count,
            index: m.index,
        }
    }

    /// The 16 bytes.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0] = 0x90;
        b[1] = (u8::from(self.marker) << 7) | if self.intra { Self::PT_I } else { Self::PT_P };
        b[2..4].copy_from_slice(&self.seq.to_be_bytes());
        b[4..8].copy_from_slice(&self.timestamp.to_be_bytes());
        b[8..12].copy_from_slice(&self.frame.to_be_bytes());
        b[12..14].copy_from_slice(&self.count.to_be_bytes());
        b[14..16].copy_from_slice(&self.index.to_be_bytes());
        b
    }

    /// Parse the first 16 bytes of `p`; `None` if too short, not version
    /// 2 with the extension bit, an unknown payload type, or an index
    /// outside the frame.
    pub fn parse(p: &[u8]) -> Option<RtpLike> {
        let b: &[u8; 16] = p.get(..Self::LEN)?.try_into().ok()?;
        if b[0] != 0x90 {
            return None;
        }
        let intra = match b[1] & 0x7f {
            Self::PT_P => false,
            Self::PT_I => true,
            _ => return None,
        };
        let h = RtpLike {
            marker: b[1] & 0x80 != 0,
            intra,
            seq: u16::from_be_bytes([b[2], b[3]]),
            timestamp: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            frame: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            count: u16::from_be_bytes([b[12], b[13]]),
            index: u16::from_be_bytes([b[14], b[15]]),
        };
        (h.index < h.count && h.marker == (u32::from(h.index) + 1 == u32::from(h.count)))
            .then_some(h)
    }
}

/// Packet `index` of `count` in a frame, as the timetable records it;
/// `None` (no header) for a frame of more than 65 535 packets.
pub fn media_packet(intra: bool, index: usize, count: usize) -> Option<MediaPacket> {
    Some(MediaPacket {
        intra,
        index: u16::try_from(index).ok()?,
        count: u16::try_from(count).ok()?,
    })
}

/// A synthetic constant-bit-rate video source (the [QUICsilver-2019] model): `fps`
/// frames a second, an I-frame every `gop` frames as `iframe_packets`
/// packets sent back to back, every other frame as `pframe_packets`
/// packets, every packet `packet_size` bytes of payload (one message each).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VideoSource {
    /// Frames per second.
    pub fps: f64,
    /// Frames from one I-frame to the next (1 = every frame is an I-frame).
    pub gop: u32,
    /// Packets of an I-frame.
    pub iframe_packets: u32,
    /// Packets of a P-frame (the fewest, with VBR).
    pub pframe_packets: u32,
    /// VBR: a P-frame has between `pframe_packets` and this many packets,
    /// uniformly, drawn from the frame's index (every run sends the same
    /// stream; the [RTP-QUIC] P-frames are 9–11 NAL units). At most
    /// `pframe_packets` (e.g. 0): CBR.
    pub pframe_packets_max: u32,
    /// Payload bytes per packet.
    pub packet_size: usize,
    /// Frames to send.
    pub frames: u32,
    /// What a P-frame references.
    pub reference: Reference,
}

impl Default for VideoSource {
    /// [QUICsilver-2019]: 60 fps, an I-frame every 10 frames as 4 packets of 1232 B,
    /// P-frames of one packet, 300 s.
    fn default() -> Self {
        VideoSource {
            fps: 60.0,
            gop: 10,
            iframe_packets: 4,
            pframe_packets: 1,
            pframe_packets_max: 0,
            packet_size: 1232,
            frames: 18_000,
            reference: Reference::Gop,
        }
    }
}

/// One frame of a recorded stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceFrame {
    /// Its encoded size.
    pub bytes: usize,
    /// An I-frame (decodable on its own).
    pub intra: bool,
}

/// The packets (message ids) of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePackets {
    /// Its first message id.
    pub first: u32,
    /// How many packets.
    pub count: u32,
    /// An I-frame.
    pub intra: bool,
}

impl VideoSource {
    /// Time between frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.fps)
    }

    /// Check the numbers.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.fps.is_finite() && self.fps > 0.0 && self.fps <= 1000.0) {
            return Err(format!("fps must be in (0, 1000], not {}", self.fps));
        }
        if self.gop == 0 {
            return Err("gop must be at least 1 (1 = every frame an I-frame)".into());
        }
        if self.iframe_packets == 0 || self.pframe_packets == 0 {
            return Err("a frame needs at least one packet".into());
        }
        if self.frames == 0 {
            return Err("at least one frame".into());
        }
        let packets = self.packets();
        if packets > u64::from(u32::MAX / 2) {
            return Err(format!("{packets} packets are too many for one run"));
        }
        Ok(())
    }

    /// Packets in the whole stream.
    pub fn packets(&self) -> u64 {
        (0..self.frames)
            .map(|f| u64::from(self.frame_packets(f).1))
            .sum()
    }

    /// Frame `f`: `(intra, packets)`.
    pub fn frame_packets(&self, f: u32) -> (bool, u32) {
        if f.is_multiple_of(self.gop) {
            return (true, self.iframe_packets);
        }
        let lo = self.pframe_packets;
        let hi = self.pframe_packets_max.max(lo);
        if hi == lo {
            return (false, lo);
        }
        // splitmix64 of the index: uniform over lo..=hi, the same every run.
        let mut z = u64::from(f).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (false, lo + (z % u64::from(hi - lo + 1)) as u32)
    }

    /// The sender's timetable (one message per packet, a frame's packets
    /// at the frame's instant; a P-frame's packets depend on the first
    /// packet of their reference frame, every packet of a GOP is in its
    /// group) and each frame's packets.
    ///
    /// A packet's lifetime is `base_lifetime` (its frame's playback
    /// deadline), extended for a frame that later frames of its GOP
    /// reference until the last of them is due (thesis §4.2: a message with
    /// live dependents is not expired; [QUICsilver-2019] keeps such I-frame
    /// fragments for retransmission).
    pub fn timetable(&self, base_lifetime: Duration) -> (Schedule, Vec<FramePackets>) {
        let spec: Vec<(bool, u32)> = (0..self.frames).map(|f| self.frame_packets(f)).collect();
        self.plan(&spec, base_lifetime)
    }

    /// The timetable of a recorded stream (`trace`: each frame's encoded
    /// size and type, e.g. from `ffprobe` of a real encode) at this
    /// source's rate and packet size: a frame of `b` bytes is `⌈b /
    /// packet_size⌉` packets (at least one); a GOP runs from an I-frame to
    /// the next. `frames`, `gop` and the packet counts of `self` are not
    /// used.
    pub fn timetable_for(
        &self,
        trace: &[TraceFrame],
        base_lifetime: Duration,
    ) -> (Schedule, Vec<FramePackets>) {
        let size = self.packet_size.max(1);
        let spec: Vec<(bool, u32)> = trace
            .iter()
            .map(|t| {
                let n = t.bytes.div_ceil(size).max(1);
                (t.intra, u32::try_from(n).unwrap_or(u32::MAX))
            })
            .collect();
        self.plan(&spec, base_lifetime)
    }

    /// The timetable for frames given as `(intra, packets)`.
    fn plan(&self, spec: &[(bool, u32)], base_lifetime: Duration) -> (Schedule, Vec<FramePackets>) {
        let dt = self.frame_interval();
        let n = spec.len();
        // The I-frame starting each frame's GOP, and the GOP's last frame.
        let mut gop_start = vec![None; n];
        let mut last = None;
        for (f, (intra, _)) in spec.iter().enumerate() {
            if *intra {
                last = Some(f);
            }
            gop_start[f] = last;
        }
        let mut gop_end = vec![n.saturating_sub(1); n];
        let mut next_end = n.saturating_sub(1);
        for f in (0..n).rev() {
            gop_end[f] = next_end;
            if spec[f].0 && f > 0 {
                next_end = f - 1;
            }
        }
        let total: usize = spec.iter().map(|(_, c)| *c as usize).sum();
        let mut plan = Vec::with_capacity(total);
        let mut frames: Vec<FramePackets> = Vec::with_capacity(n);
        let mut gop_index = 0u64;
        for (f, &(intra, count)) in spec.iter().enumerate() {
            if intra && f > 0 {
                gop_index += 1;
            }
            let reference = if intra {
                None
            } else {
                match self.reference {
                    Reference::Gop => gop_start[f],
                    Reference::Previous => f.checked_sub(1),
                }
            };
            let depends_on = reference.map(|r| frames[r].first);
            let first = plan.len() as u32;
            // Frames of this GOP after this one that need it, directly or
            // through the chain: it stays useful until the last is due.
            let needed_by = match (intra, self.reference) {
                (true, _) | (false, Reference::Previous) => gop_end[f] - f,
                (false, Reference::Gop) => 0,
            } as u32;
            let lifetime = (needed_by > 0).then(|| base_lifetime + dt * needed_by);
            for i in 0..count {
                plan.push(Planned {
                    at: dt * f as u32,
                    frame: f as u64,
                    group: Some(gop_index),
                    depends_on,
                    lifetime,
                    media: media_packet(intra, i as usize, count as usize),
                    size: None,
                });
            }
            frames.push(FramePackets {
                first,
                count,
                intra,
            });
        }
        (plan.into(), frames)
    }
}

/// A video call: the source, the path and transport (a
/// [`MessagesScenario`] whose count, size, interval, lifetime and timetable
/// the video sets), and the player.
#[derive(Debug, Clone)]
pub struct VideoScenario {
    /// The frames.
    pub source: VideoSource,
    /// Path, transport, seed (its `rtt / 2` is the one-way delay).
    pub path: MessagesScenario,
    /// Frames buffered before playback.
    pub buffer_frames: u32,
    /// Stall or skip; `None` = what the transport allows
    /// ([`VideoScenario::player_for`]).
    pub on_missing: Option<OnMissing>,
    /// Where a stalling player resumes.
    pub resume: Resume,
    /// A recorded stream's frames (sizes and types) in place of the
    /// source's synthetic ones; the source gives the rate and packet size.
    pub trace: Option<Vec<TraceFrame>>,
    /// The fraction of a frame's packets it may miss and still decode
    /// (the [RTP-QUIC] decoder: H.264 access units carry redundant NAL units, so
    /// its UDP stream stays 97–99 % useful at 10 % loss). 0: every packet.
    pub redundancy: f64,
}

/// What a video call measured.
#[derive(Debug)]
pub struct VideoRun {
    /// The message-level run (every packet: generation, arrival, oracle).
    pub messages: MessagesRun,
    /// Per frame: generation, completion, type.
    pub frames: Vec<FrameTiming>,
    /// What the player did with each.
    pub fates: Vec<FrameFate>,
    /// Totals.
    pub report: PlayoutReport,
    /// The player's policy.
    pub on_missing: OnMissing,
    /// Each packet's lifetime (its frame's playback deadline).
    pub lifetime: Duration,
}

impl VideoScenario {
    /// The player a transport allows: an application reading one ordered,
    /// reliable byte or message stream (tcp, hollywood-ir, whose receiver is
    /// standard TCP, and quic-ss) cannot read past missing data, so it
    /// stalls; with unordered delivery, several streams or datagrams it can
    /// conceal a missing frame and play on.
    pub fn player_for(transport: &str) -> OnMissing {
        match transport {
            "tcp" | "hollywood-ir" | "quic-ss" => OnMissing::Stall,
            _ => OnMissing::Skip,
        }
    }

    /// Frame *f*'s playback deadline from its generation: the one-way delay
    /// plus the buffer ([QUICsilver-2019]: path latency + 4 frames).
    pub fn lifetime(&self) -> Duration {
        self.path.rtt / 2 + self.source.frame_interval() * self.buffer_frames
    }

    /// Send the video in the simulator and play what arrives.
    pub fn run(&self) -> Result<VideoRun, String> {
        self.run_with(MessagesScenario::run)
    }

    /// Send the video with `send` (the simulator's [`MessagesScenario::run`],
    /// or the same scenario on real packets: `hollywood_lab::messages::run`)
    /// and play what arrives.
    pub fn run_with(
        &self,
        send: impl FnOnce(&MessagesScenario) -> Result<MessagesRun, String>,
    ) -> Result<VideoRun, String> {
        self.source.validate()?;
        if !(0.0..1.0).contains(&self.redundancy) {
            return Err(format!(
                "redundancy must be in [0, 1), not {}",
                self.redundancy
            ));
        }
        if self.source.packet_size == 0 {
            return Err("packet size must be at least 1 byte".into());
        }
        let lifetime = self.lifetime();
        let (schedule, frame_packets) = match &self.trace {
            Some(t) if t.is_empty() => return Err("the trace has no frame".into()),
            Some(t) => self.source.timetable_for(t, lifetime),
            None => self.source.timetable(lifetime),
        };
        if schedule.len() > (u32::MAX / 2) as usize {
            return Err(format!(
                "{} packets are too many for one run",
                schedule.len()
            ));
        }
        let sc = MessagesScenario {
            count: schedule.len() as u32,
            size: self.source.packet_size,
            interval: self.source.frame_interval(),
            lifetime: Some(lifetime),
            schedule: Some(schedule),
            group: 0,
            ..self.path.clone()
        };
        let on_missing = self
            .on_missing
            .unwrap_or_else(|| Self::player_for(sc.transport.name()));
        let messages = send(&sc)?;
        let frames: Vec<FrameTiming> = frame_packets
            .iter()
            .map(|fp| {
                let ids = fp.first as usize..(fp.first + fp.count) as usize;
                let generated = messages.generated[ids.start].unwrap_or(Instant::ZERO);
                let complete = complete_at(&messages.arrival[ids], self.redundancy);
                FrameTiming {
                    generated,
                    complete,
                    intra: fp.intra,
                }
            })
            .collect();
        // Frames the sender never generated (the connection failed) are not
        // part of the stream.
        let sent = frame_packets
            .iter()
            .take_while(|fp| messages.generated[fp.first as usize].is_some())
            .count();
        let player = Player {
            frame_interval: self.source.frame_interval(),
            buffer_frames: self.buffer_frames,
            one_way: self.path.rtt / 2,
            on_missing,
            reference: self.source.reference,
            resume: self.resume,
        };
        let (fates, report) = player.play(&frames[..sent]);
        Ok(VideoRun {
            messages,
            frames,
            fates,
            report,
            on_missing,
            lifetime,
        })
    }
}

/// When a frame whose packets arrived at `arrival` became decodable: its
/// last packet's arrival, or with `redundancy` r, the arrival of the
/// packet that completed all but ⌊r·n⌋ of its n packets; `None` if too
/// many never arrived.
fn complete_at(arrival: &[Option<Instant>], redundancy: f64) -> Option<Instant> {
    let spare = (redundancy * arrival.len() as f64).floor() as usize;
    let need = arrival.len().saturating_sub(spare).max(1);
    let mut got: Vec<Instant> = arrival.iter().flatten().copied().collect();
    if got.len() < need {
        return None;
    }
    got.sort_unstable();
    Some(got[need - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_redundant_frame_decodes_without_its_latest_packets() {
        let a = |v: &[Option<u64>]| v.iter().map(|x| x.map(at)).collect::<Vec<_>>();
        let ten = a(&[
            Some(1),
            Some(9),
            None,
            Some(3),
            Some(4),
            Some(5),
            Some(6),
            Some(7),
            Some(8),
            Some(2),
        ]);
        assert_eq!(complete_at(&ten, 0.0), None);
        // 30 %: three of ten may be missing (or late).
        assert_eq!(complete_at(&ten, 0.3), Some(at(7)));
        assert_eq!(complete_at(&ten, 0.1), Some(at(9)));
        let all = a(&[Some(5), Some(2)]);
        assert_eq!(complete_at(&all, 0.0), Some(at(5)));
        // Never fewer than one packet.
        assert_eq!(complete_at(&a(&[None]), 0.9), None);
    }

    #[test]
    fn vbr_frames_draw_their_sizes_from_the_index() {
        let src = VideoSource {
            gop: 250,
            iframe_packets: 30,
            pframe_packets: 9,
            pframe_packets_max: 11,
            frames: 2000,
            ..VideoSource::default()
        };
        let sizes: Vec<u32> = (0..2000).map(|f| src.frame_packets(f).1).collect();
        assert_eq!(sizes[0], 30);
        assert!(sizes
            .iter()
            .enumerate()
            .all(|(f, &n)| f % 250 == 0 || (9..=11).contains(&n)));
        for n in 9..=11 {
            let k = sizes.iter().filter(|&&x| x == n).count();
            assert!((550..=780).contains(&k), "{n}: {k}");
        }
        assert_eq!(
            src.packets(),
            sizes.iter().map(|&n| u64::from(n)).sum::<u64>()
        );
        let (plan, frames) = src.timetable(Duration::from_millis(200));
        assert_eq!(plan.len() as u64, src.packets());
        assert_eq!(frames[1].count, sizes[1]);
    }

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// `n` frames every 10 ms, an I-frame every `gop`, each complete
    /// `one_way` after generation unless `late` says otherwise.
    fn stream(n: usize, gop: usize, late: &[(usize, Option<u64>)]) -> Vec<FrameTiming> {
        (0..n)
            .map(|f| {
                let generated = at(10 * f as u64);
                let complete = late
                    .iter()
                    .find(|(i, _)| *i == f)
                    .map_or(Some(generated + 50 * MS), |(_, c)| c.map(at));
                FrameTiming {
                    generated,
                    complete,
                    intra: f % gop == 0,
                }
            })
            .collect()
    }

    fn player(on_missing: OnMissing, reference: Reference) -> Player {
        Player {
            frame_interval: 10 * MS,
            buffer_frames: 2,
            one_way: 50 * MS,
            on_missing,
            reference,
            resume: Resume::Shift,
        }
    }

    #[test]
    fn a_clean_stream_plays_every_frame_usefully() {
        for m in [OnMissing::Stall, OnMissing::Skip] {
            let (fates, r) = player(m, Reference::Gop).play(&stream(30, 10, &[]));
            assert_eq!((r.played, r.useful, r.skipped, r.stalls), (30, 30, 0, 0));
            assert_eq!(r.useful_pct(), 100.0);
            // Frame 0 generated at 0, due at one-way + 2 frames.
            assert_eq!(fates[0].due, at(70));
            assert_eq!(fates[29].due, at(70 + 290));
        }
    }

    #[test]
    fn a_reliable_player_stalls_and_the_discrepancy_shifts_later_frames() {
        // Frame 5 (due at 120) completes at 220, and frames 6-8 arrive with it
        // (head-of-line blocking).
        let late: Vec<(usize, Option<u64>)> = (5..9).map(|f| (f, Some(220))).collect();
        let (fates, r) = player(OnMissing::Stall, Reference::Gop).play(&stream(20, 10, &late));
        assert_eq!(r.stalls, 1);
        assert_eq!(r.discrepancy, 100 * MS);
        assert_eq!(r.longest_stall, 100 * MS);
        assert_eq!((r.played, r.useful, r.skipped), (20, 20, 0));
        assert_eq!(fates[5].played, Some(at(220)));
        assert_eq!(fates[6].due, at(230), "shifted by the pause");
        assert_eq!(fates[19].played, Some(at(70 + 190 + 100)));
        assert_eq!(r.delayed, 15, "frames 5-19 play late");
    }

    #[test]
    fn a_catching_up_player_pays_for_every_head_of_line_event() {
        // Frames 5-8 arrive together at 220 (frame 5 due at 120), frames
        // 12-13 together at 290 (frame 12 due at 190).
        let late: Vec<(usize, Option<u64>)> = (5..9)
            .map(|f| (f, Some(220)))
            .chain((12..14).map(|f| (f, Some(290))))
            .collect();
        let p = Player {
            resume: Resume::CatchUp,
            ..player(OnMissing::Stall, Reference::Gop)
        };
        let (fates, r) = p.play(&stream(30, 10, &late));
        assert_eq!(r.stalls, 2);
        // Frames 6-11 (due 130-180; 9-11 complete on time) play at once
        // with frame 5 at 220; the player is then ready for frame 12 (due
        // 190) and waits 70 ms more.
        assert_eq!(r.discrepancy, 170 * MS);
        let played: Vec<Option<Instant>> = fates.iter().map(|f| f.played).collect();
        assert_eq!(played[5..12], [Some(at(220)); 7]);
        assert_eq!(played[12..23], [Some(at(290)); 11]);
        assert_eq!(fates[23].played, Some(at(300)), "on schedule again");
        assert_eq!(fates[29].played, Some(at(360)));
        assert_eq!(r.delayed, 7 + 10);
        // Shifting instead, the first pause's backlog absorbs the second.
        let (_, r) = player(OnMissing::Stall, Reference::Gop).play(&stream(30, 10, &late));
        assert_eq!(r.stalls, 1);
        assert_eq!(r.discrepancy, 100 * MS);
    }

    #[test]
    fn a_partially_reliable_player_skips_a_lost_p_frame_only() {
        let (fates, r) =
            player(OnMissing::Skip, Reference::Gop).play(&stream(20, 10, &[(4, None)]));
        assert_eq!((r.played, r.skipped, r.useful, r.stalls), (19, 1, 19, 0));
        assert_eq!(r.discrepancy, Duration::ZERO);
        assert!(!fates[4].useful && fates[5].useful);
    }

    #[test]
    fn a_lost_i_frame_costs_its_whole_gop() {
        let (_, r) = player(OnMissing::Skip, Reference::Gop).play(&stream(30, 10, &[(10, None)]));
        assert_eq!(r.useful, 20);
        assert_eq!(r.played, 29, "the P-frames play, concealed");
        // A never-delivered frame is skipped by a stalling player too.
        let (_, r) = player(OnMissing::Stall, Reference::Gop).play(&stream(30, 10, &[(10, None)]));
        assert_eq!((r.useful, r.skipped, r.stalls), (20, 1, 0));
    }

    #[test]
    fn a_late_i_frame_still_serves_the_p_frames_after_it() {
        // I-frame 10 is due at 170 but completes at 195: it is skipped, and
        // P-frames 11 and 12 (due 180, 190) cannot use it; 13-19 (due 200
        // and later) can.
        let (fates, r) =
            player(OnMissing::Skip, Reference::Gop).play(&stream(20, 10, &[(10, Some(195))]));
        let useful: Vec<bool> = fates[10..].iter().map(|f| f.useful).collect();
        assert_eq!(
            useful,
            [false, false, false, true, true, true, true, true, true, true]
        );
        assert_eq!(r.useful, 17);
        assert_eq!(r.skipped, 1);
    }

    #[test]
    fn with_previous_frame_references_a_loss_breaks_the_chain_to_the_next_i_frame() {
        let (fates, r) =
            player(OnMissing::Skip, Reference::Previous).play(&stream(20, 10, &[(3, None)]));
        assert_eq!(r.useful, 13);
        assert!(fates[2].useful && !fates[3].useful && !fates[9].useful && fates[10].useful);
    }

    #[test]
    fn no_frames_no_playout() {
        let (fates, r) = player(OnMissing::Stall, Reference::Gop).play(&[]);
        assert!(fates.is_empty());
        assert_eq!(r.useful_pct(), 100.0);
    }

    #[test]
    fn the_rtp_like_header_round_trips_and_rejects_what_it_cannot_be() {
        let h = RtpLike {
            marker: true,
            intra: true,
            seq: 0xBEEF,
            timestamp: 1_500,
            frame: 70_000,
            count: 4,
            index: 3,
        };
        let b = h.encode();
        assert_eq!(b[0], 0x90);
        assert_eq!(b[1], 0x80 | 97);
        assert_eq!(RtpLike::parse(&b), Some(h));
        assert_eq!(RtpLike::parse(&b[..15]), None, "short");
        let mut v = b;
        v[0] = 0x80;
        assert_eq!(RtpLike::parse(&v), None, "no extension bit");
        let mut t = b;
        t[1] = 0x80 | 33;
        assert_eq!(RtpLike::parse(&t), None, "payload type");
        let mut m = b;
        m[1] = 97;
        assert_eq!(RtpLike::parse(&m), None, "last packet without the marker");
        let mut i = b;
        i[15] = 4;
        assert_eq!(RtpLike::parse(&i), None, "index outside the frame");
    }

    #[test]
    fn every_video_packet_carries_its_frame_in_an_rtp_like_header() {
        let src = VideoSource {
            frames: 25,
            ..VideoSource::default()
        };
        let (plan, frames) = src.timetable(Duration::from_millis(100));
        for (f, fp) in frames.iter().enumerate() {
            for i in 0..fp.count {
                let id = fp.first + i;
                let p = crate::stream::payload_of(7, id, 1232, plan.get(id as usize));
                let h = RtpLike::parse(&p).expect("a header");
                assert_eq!(h.frame as usize, f);
                assert_eq!((h.index, h.count), (i as u16, fp.count as u16));
                assert_eq!(h.intra, fp.intra);
                assert_eq!(h.marker, i + 1 == fp.count);
                assert_eq!(h.seq, id as u16);
                // 60 fps: 1500 ticks of 90 kHz per frame.
                assert_eq!(h.timestamp, 1500 * f as u32);
                // The rest is the message's own pattern.
                assert_eq!(p[16..], crate::stream::payload_for(7, id, 1232)[16..]);
            }
        }
    }

    #[test]
    fn the_timetable_sends_seed_002s_frames() {
        let src = VideoSource::default();
        assert_eq!(src.packets(), 1800 * 4 + 16_200, "300 s at 60 fps");
        assert!(src.validate().is_ok());
        let small = VideoSource { frames: 12, ..src };
        let (plan, frames) = small.timetable(MS);
        assert_eq!(plan.len() as u64, small.packets());
        assert_eq!(plan.len(), 4 + 9 + 4 + 1);
        // I-frame 0: four packets at 0, no dependency; P-frame 1 one packet
        // one frame later, depending on the I-frame's first packet.
        assert!(plan[..4]
            .iter()
            .all(|p| p.at == Duration::ZERO && p.depends_on.is_none()));
        assert_eq!(plan[4].frame, 1);
        assert_eq!(plan[4].depends_on, Some(0));
        assert_eq!(plan[4].at, small.frame_interval());
        // Frame 10 starts the second GOP.
        assert_eq!(
            frames[10],
            FramePackets {
                first: 13,
                count: 4,
                intra: true
            }
        );
        assert_eq!(plan[17].depends_on, Some(13));
        assert_eq!(plan[17].group, Some(1));
        // The I-frames live until their last P-frame is due; P-frames do not
        // outlive their own deadline.
        assert_eq!(plan[0].lifetime, Some(MS + small.frame_interval() * 9));
        assert_eq!(
            plan[13].lifetime,
            Some(MS + small.frame_interval()),
            "GOP cut at frame 11"
        );
        assert_eq!(plan[4].lifetime, None);
        let prev = VideoSource {
            reference: Reference::Previous,
            ..small
        };
        let (plan, _) = prev.timetable(MS);
        assert_eq!(plan[5].depends_on, Some(4), "frame 2 depends on frame 1");
        assert_eq!(
            plan[5].lifetime,
            Some(MS + prev.frame_interval() * 7),
            "frames 3-9 need it"
        );
        for bad in [
            VideoSource { gop: 0, ..src },
            VideoSource { fps: 0.0, ..src },
            VideoSource { frames: 0, ..src },
            VideoSource {
                iframe_packets: 0,
                ..src
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        assert_eq!(VideoScenario::player_for("quic-ss"), OnMissing::Stall);
        assert_eq!(VideoScenario::player_for("quicsilver"), OnMissing::Skip);
    }

    #[test]
    fn a_recorded_stream_is_packetised_by_size_and_grouped_by_its_i_frames() {
        let src = VideoSource {
            reference: Reference::Previous,
            ..VideoSource::default()
        };
        let t = |bytes, intra| TraceFrame { bytes, intra };
        let trace = [
            t(3000, true),
            t(100, false),
            t(2500, false),
            t(10, true),
            t(0, false),
        ];
        let (plan, frames) = src.timetable_for(&trace, MS);
        let counts: Vec<u32> = frames.iter().map(|f| f.count).collect();
        assert_eq!(counts, [3, 1, 3, 1, 1], "⌈bytes / 1232⌉, at least one");
        assert_eq!(plan.len(), 9);
        let groups: Vec<Option<u64>> = plan.iter().map(|p| p.group).collect();
        assert_eq!(
            groups,
            [Some(0); 7]
                .into_iter()
                .chain([Some(1); 2])
                .collect::<Vec<_>>()
        );
        // Frame 2 depends on frame 1 (packet 3), frame 4 on frame 3 (packet 7).
        assert_eq!(plan[4].depends_on, Some(3));
        assert_eq!(plan[8].depends_on, Some(7));
        let dt = src.frame_interval();
        assert_eq!(plan[0].lifetime, Some(MS + dt * 2), "frames 1-2 need it");
        assert_eq!(plan[3].lifetime, Some(MS + dt));
        assert_eq!(plan[4].lifetime, None, "the GOP's last frame");
        assert_eq!(plan[7].lifetime, Some(MS + dt));
        assert_eq!(plan[8].at, dt * 4);
    }

    #[test]
    fn decodable_ever_follows_the_reference_chain_whenever_frames_arrive() {
        let late = [(3, None), (5, Some(999))];
        let frames = stream(12, 10, &late);
        let prev = decodable_ever(&frames, Reference::Previous);
        let expect: Vec<bool> = (0..12).map(|f| !(3..10).contains(&f)).collect();
        assert_eq!(prev, expect, "frame 3 never arrives: 4-9 cannot be decoded");
        let gop = decodable_ever(&frames, Reference::Gop);
        assert!(
            gop[5] && !gop[3] && gop[9],
            "a late frame is still decodable"
        );
        // Useful frames are decodable ones.
        let (fates, _) = player(OnMissing::Skip, Reference::Gop).play(&frames);
        assert!(fates.iter().zip(&gop).all(|(f, d)| !f.useful || *d));
    }

    proptest! {
        /// Whatever arrives when: useful ≤ played, played + skipped =
        /// frames; a skipping player never pauses; a stalling player with
        /// every frame delivered plays every frame usefully, and its
        /// discrepancy is the sum of its pauses.
        #[test]
        fn playout_invariants(
            delays in proptest::collection::vec(proptest::option::weighted(0.9, 0u64..400), 1..80),
            gop in 1usize..12,
            buffer in 0u32..5,
            previous in any::<bool>(),
        ) {
            let frames: Vec<FrameTiming> = delays.iter().enumerate().map(|(f, d)| {
                let generated = at(10 * f as u64);
                FrameTiming { generated, complete: d.map(|d| generated + Duration::from_millis(d)), intra: f % gop == 0 }
            }).collect();
            let reference = if previous { Reference::Previous } else { Reference::Gop };
            // Catching up never costs less pause than shifting: the shifted
            // discrepancy is the worst lateness, which a catching-up player
            // can only have paid for in pauses.
            let pause = |resume| Player { buffer_frames: buffer, resume, ..player(OnMissing::Stall, reference) }.play(&frames).1.discrepancy;
            prop_assert!(pause(Resume::Shift) <= pause(Resume::CatchUp));
            for (m, resume) in [
                (OnMissing::Stall, Resume::Shift),
                (OnMissing::Stall, Resume::CatchUp),
                (OnMissing::Skip, Resume::CatchUp),
            ] {
                let p = Player { buffer_frames: buffer, resume, ..player(m, reference) };
                let (fates, r) = p.play(&frames);
                prop_assert_eq!(r.played + r.skipped, r.frames);
                prop_assert!(r.useful <= r.played);
                prop_assert!(r.delayed <= r.played);
                if resume == Resume::CatchUp {
                    // Never behind the original schedule by more than the
                    // latest completion.
                    for (f, fate) in fates.iter().enumerate() {
                        if let Some(p) = fate.played {
                            let latest = frames[..=f].iter().filter_map(|x| x.complete).max().unwrap();
                            prop_assert!(p <= fate.due.max(latest));
                        }
                    }
                }
                prop_assert_eq!(fates.iter().filter(|f| f.useful).count() as u64, r.useful);
                for w in fates.windows(2) {
                    prop_assert!(w[1].due > w[0].due, "the clock only moves forward");
                }
                match m {
                    OnMissing::Skip => {
                        prop_assert_eq!(r.stalls, 0);
                        prop_assert_eq!(r.discrepancy, Duration::ZERO);
                    }
                    OnMissing::Stall => {
                        let delivered = frames.iter().filter(|f| f.complete.is_some()).count() as u64;
                        prop_assert_eq!(r.played, delivered);
                        if delivered == r.frames {
                            prop_assert_eq!(r.useful, r.frames);
                        }
                        let mut ready_since = None::<Instant>;
                        let mut pauses = Duration::ZERO;
                        for f in &fates {
                            if let Some(p) = f.played {
                                let ready = ready_since.map_or(f.due, |r| r.max(f.due));
                                prop_assert!(p >= ready);
                                pauses += p - ready;
                                ready_since = Some(p);
                            }
                        }
                        prop_assert_eq!(pauses, r.discrepancy);
                        prop_assert!(r.longest_stall <= r.discrepancy);
                    }
                }
            }
        }
    }
}
