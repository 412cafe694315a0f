//! The [TCP-video] video on demand: the whole video is handed to the transport
//! when the connection opens (a stored file, "all frames at start"), and
//! frame *k* is due at the receiver `I + k / fps` after that, *I* being the
//! **initiation latency** (the wait before playback starts). The measures
//! are [TCP-video]'s: the share of frames that miss their deadline (or never
//! arrive) at a given *I*, and the smallest *I* with no violation.
//!
//! Frames are split into messages of at most `packet_size` bytes (seed
//! 003: 1500-byte packets), every message of frame *k* carrying the
//! lifetime `I + k / fps` from the start, so a sender that knows deadlines
//! (TCP Hollywood, [TCP-video] §7.2's deadline TCP: `tcp-deadline`) drops a
//! frame that can no longer arrive in time and moves on; standard TCP
//! sends everything.
//!
//! Frame sizes ([`VodSource`]): constant (CBR) or a documented VBR model
//! of scenes (below), or given as a list (a trace).

use crate::rng::SplitMix;
use crate::scenario::{MessagesRun, MessagesScenario};
use crate::stream::{Planned, Schedule};
use hollywood_sim::Instant;
use std::time::Duration;

/// Frame sizes of a synthetic video.
///
/// - **CBR**: every frame `mean_rate / fps` bytes.
/// - **VBR** (`scene_spread > 0`): the video is a run of scenes whose
///   lengths are exponential with mean `scene_mean` (at least one frame);
///   a scene's frames are `m` times the mean size, `m` log-normal with
///   σ = `scene_spread` (a scene's complexity); an I-frame every `gop`
///   frames is `iframe_ratio` times its scene's P-frame. The sizes are
///   then scaled so the whole video has exactly the mean rate. The draw
///   comes from `trace_seed`, not from a run's seed: every run sends the
///   same video, as [TCP-video] sent one trace file (`vbr.trace1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VodSource {
    /// Frames per second ([TCP-video]: 30).
    pub fps: f64,
    /// Frames.
    pub frames: u32,
    /// Mean bit rate of the video.
    pub mean_rate_bps: u64,
    /// σ of the log-normal scene multiplier; 0 = CBR.
    pub scene_spread: f64,
    /// Mean scene length.
    pub scene_mean: Duration,
    /// Frames from one I-frame to the next (VBR).
    pub gop: u32,
    /// I-frame size over P-frame size within a scene (VBR).
    pub iframe_ratio: f64,
    /// Which VBR video.
    pub trace_seed: u64,
}

impl VodSource {
    /// Check the numbers.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.fps.is_finite() && self.fps > 0.0 && self.fps <= 1000.0) {
            return Err(format!("fps must be in (0, 1000], not {}", self.fps));
        }
        if self.frames == 0 || self.frames > 1_000_000 {
            return Err(format!(
                "frames must be in 1..=1000000, not {}",
                self.frames
            ));
        }
        if self.mean_rate_bps == 0 {
            return Err("the video needs a positive mean rate".into());
        }
        if !(self.scene_spread.is_finite() && (0.0..=3.0).contains(&self.scene_spread)) {
            return Err(format!(
                "scene spread must be in [0, 3], not {}",
                self.scene_spread
            ));
        }
        if self.scene_spread > 0.0 {
            if self.scene_mean.is_zero() {
                return Err("VBR needs a positive mean scene length".into());
            }
            if self.gop == 0 {
                return Err("gop must be at least 1".into());
            }
            if !(self.iframe_ratio.is_finite() && self.iframe_ratio >= 1.0) {
                return Err(format!(
                    "the I-frame ratio must be at least 1, not {}",
                    self.iframe_ratio
                ));
            }
        }
        Ok(())
    }

    /// Every frame's size in bytes (at least 1).
    pub fn frame_bytes(&self) -> Vec<usize> {
        let n = self.frames as usize;
        let mean = self.mean_rate_bps as f64 / 8.0 / self.fps;
        if self.scene_spread <= 0.0 {
            return vec![(mean.round() as usize).max(1); n];
        }
        let mut rng = SplitMix(self.trace_seed ^ 0x5ce7_e5ee_d000_0003);
        let scene_frames = self.scene_mean.as_secs_f64() * self.fps;
        let mut weights = Vec::with_capacity(n);
        while weights.len() < n {
            let len = (-(1.0 - rng.unit()).ln() * scene_frames).round().max(1.0) as usize;
            // Box-Muller: a standard normal from two uniforms.
            let z = (-2.0 * (1.0 - rng.unit()).ln()).sqrt()
                * (2.0 * std::f64::consts::PI * rng.unit()).cos();
            let m = (self.scene_spread * z).exp();
            for _ in 0..len.min(n - weights.len()) {
                let f = weights.len();
                let intra = f % self.gop as usize == 0;
                weights.push(m * if intra { self.iframe_ratio } else { 1.0 });
            }
        }
        let total: f64 = weights.iter().sum();
        let scale = mean * n as f64 / total;
        weights
            .into_iter()
            .map(|w| ((w * scale).round() as usize).max(1))
            .collect()
    }
}

/// One video-on-demand transfer: the frames, the path and transport (a
/// [`MessagesScenario`] whose count, size, lifetimes and timetable the
/// video sets), and the initiation latency the sender's deadlines use.
#[derive(Debug, Clone)]
pub struct VodScenario {
    /// Every frame's size in bytes.
    pub frame_bytes: Vec<usize>,
    /// Frames per second.
    pub fps: f64,
    /// Payload bytes per message (packet).
    pub packet_size: usize,
    /// The initiation latency: frame *k* is due `I + k / fps` after the
    /// start. Only senders that know deadlines use it.
    pub initiation: Duration,
    /// Path, transport, cross traffic, seed.
    pub path: MessagesScenario,
}

/// When each frame of a transfer arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct VodArrivals {
    /// Frames per second.
    pub fps: f64,
    /// Per frame: when its last message arrived, from the start (the first
    /// message handed to the transport); `None`: never (whole).
    pub complete: Vec<Option<Duration>>,
    /// Per frame: bytes.
    pub frame_bytes: Vec<usize>,
}

/// What a transfer measured.
#[derive(Debug)]
pub struct VodRun {
    /// The initiation latency the sender used.
    pub initiation: Duration,
    /// Frame arrivals.
    pub arrivals: VodArrivals,
    /// The message-level run.
    pub messages: MessagesRun,
}

impl VodScenario {
    /// The sender's timetable (every message at the start, frame *k*'s
    /// packets with the lifetime `I + k / fps`: full packets, then the
    /// rest of the frame, no padding) and each frame's first message.
    pub fn timetable(&self) -> (Schedule, Vec<usize>) {
        let dt = Duration::from_secs_f64(1.0 / self.fps);
        let mut plan = Vec::new();
        let mut firsts = Vec::with_capacity(self.frame_bytes.len());
        for (k, &b) in self.frame_bytes.iter().enumerate() {
            firsts.push(plan.len());
            let due = self.initiation + dt * k as u32;
            let n = b.div_ceil(self.packet_size).max(1);
            for i in 0..n {
                // Full packets, then the rest of the frame (no padding:
                // the stream's rate is the video's).
                let len = (b - i * self.packet_size).clamp(1, self.packet_size);
                plan.push(Planned {
                    at: Duration::ZERO,
                    frame: k as u64,
                    group: None,
                    depends_on: None,
                    lifetime: Some(due),
                    media: crate::video::media_packet(false, i, n),
                    size: Some(u32::try_from(len).unwrap_or(u32::MAX)),
                });
            }
        }
        (plan.into(), firsts)
    }

    /// Hand the whole video over at the start and record when each frame
    /// arrived.
    pub fn run(&self) -> Result<VodRun, String> {
        if self.frame_bytes.is_empty() {
            return Err("the video has no frame".into());
        }
        if !(self.fps.is_finite() && self.fps > 0.0) {
            return Err(format!("fps must be positive, not {}", self.fps));
        }
        if self.packet_size == 0 {
            return Err("packet size must be at least 1 byte".into());
        }
        let dt = Duration::from_secs_f64(1.0 / self.fps);
        let (schedule, firsts) = self.timetable();
        let plan = &schedule;
        if plan.len() > (u32::MAX / 2) as usize {
            return Err(format!("{} packets are too many for one run", plan.len()));
        }
        let count = plan.len() as u32;
        let sc = MessagesScenario {
            count,
            size: self.packet_size,
            interval: dt,
            lifetime: Some(self.initiation),
            schedule: Some(schedule.clone()),
            group: 0,
            ..self.path.clone()
        };
        let messages = sc.run()?;
        let start = messages.generated.first().copied().flatten();
        let complete = (0..self.frame_bytes.len())
            .map(|k| {
                let end = firsts.get(k + 1).copied().unwrap_or(count as usize);
                let ids = firsts[k]..end;
                let mut last: Option<Instant> = None;
                for a in &messages.arrival[ids] {
                    let a = (*a)?;
                    last = Some(last.map_or(a, |l| l.max(a)));
                }
                Some(last?.saturating_duration_since(start?))
            })
            .collect();
        Ok(VodRun {
            initiation: self.initiation,
            arrivals: VodArrivals {
                fps: self.fps,
                complete,
                frame_bytes: self.frame_bytes.clone(),
            },
            messages,
        })
    }
}

impl VodArrivals {
    /// Frame *k*'s deadline from the start at initiation latency `i`.
    fn due(&self, i: Duration, k: usize) -> Duration {
        i + Duration::from_secs_f64(k as f64 / self.fps)
    }

    /// Frames that miss their deadline at initiation latency `i` (late or
    /// never whole), as a percentage of all frames. For a sender that
    /// ignores deadlines the arrivals do not depend on `i`, so one run
    /// gives the whole curve; for one that uses them, only the initiation
    /// latency it ran with describes what happened.
    pub fn violations_pct(&self, i: Duration) -> f64 {
        let late = self
            .complete
            .iter()
            .enumerate()
            .filter(|(k, c)| c.is_none_or(|c| c > self.due(i, *k)))
            .count();
        100.0 * late as f64 / self.complete.len().max(1) as f64
    }

    /// The smallest initiation latency at which no frame misses its
    /// deadline, for these arrivals: `max_k(complete_k - k / fps)`, at
    /// least 0. `None`: some frame never arrived whole.
    pub fn zero_violation_initiation(&self) -> Option<Duration> {
        let mut worst = Duration::ZERO;
        for (k, c) in self.complete.iter().enumerate() {
            let c = (*c)?;
            worst = worst.max(c.saturating_sub(Duration::from_secs_f64(k as f64 / self.fps)));
        }
        Some(worst)
    }

    /// The [TCP-video] estimate of the same (§6): the time to send the file at
    /// the measured throughput minus the playback time, `T - D` (may be
    /// negative: the network is faster than the video). `None` before any
    /// frame arrived.
    pub fn formula_initiation_s(&self) -> Option<f64> {
        let total: usize = self.frame_bytes.iter().sum();
        let t = total as f64 * 8.0 / self.goodput_bps()?;
        Some(t - self.complete.len() as f64 / self.fps)
    }

    /// Bytes of the video that arrived over the transfer's duration (to
    /// the last frame's arrival), in bit/s.
    pub fn goodput_bps(&self) -> Option<f64> {
        let last = self.complete.iter().flatten().max()?;
        let received: usize = self
            .complete
            .iter()
            .zip(&self.frame_bytes)
            .filter(|(c, _)| c.is_some())
            .map(|(_, b)| *b)
            .sum();
        Some(received as f64 * 8.0 / last.as_secs_f64().max(1e-9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vbr() -> VodSource {
        VodSource {
            fps: 30.0,
            frames: 3000,
            mean_rate_bps: 4_000_000,
            scene_spread: 0.6,
            scene_mean: Duration::from_secs(3),
            gop: 15,
            iframe_ratio: 4.0,
            trace_seed: 1,
        }
    }

    #[test]
    fn cbr_frames_are_all_the_mean_size() {
        let s = VodSource {
            scene_spread: 0.0,
            ..vbr()
        };
        let b = s.frame_bytes();
        assert_eq!(b.len(), 3000);
        assert!(b.iter().all(|&x| x == 16_667), "{:?}", &b[..3]);
    }

    #[test]
    fn vbr_frames_keep_the_mean_rate_and_vary_by_scene() {
        let s = vbr();
        let b = s.frame_bytes();
        assert_eq!(b, s.frame_bytes(), "the same video every time");
        let total: usize = b.iter().sum();
        let rate = total as f64 * 8.0 / 100.0;
        assert!((rate / 4e6 - 1.0).abs() < 0.001, "{rate}");
        // Scenes: one-second windows of P-frames differ several-fold.
        let sec: Vec<f64> = b
            .chunks(30)
            .map(|c| c.iter().sum::<usize>() as f64)
            .collect();
        let (lo, hi) = sec
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        assert!(hi / lo > 3.0, "{lo} {hi}");
        // I-frames are iframe_ratio times their neighbours.
        let near = b[1..15].iter().copied().max().unwrap_or(1);
        assert!(b[0] > near, "{} vs {near}", b[0]);
        assert_ne!(b, VodSource { trace_seed: 2, ..s }.frame_bytes());
    }

    fn run_with(complete: Vec<Option<u64>>) -> VodArrivals {
        VodArrivals {
            fps: 10.0,
            complete: complete
                .into_iter()
                .map(|c| c.map(Duration::from_millis))
                .collect(),
            frame_bytes: vec![1000; 4],
        }
    }

    #[test]
    fn the_timetable_carries_every_frame_unpadded_with_its_deadline() {
        let sc = VodScenario {
            frame_bytes: vec![2800, 1, 3000, 1400],
            fps: 10.0,
            packet_size: 1400,
            initiation: Duration::from_secs(2),
            path: MessagesScenario::default(),
        };
        let (plan, firsts) = sc.timetable();
        assert_eq!(firsts, vec![0, 2, 3, 6]);
        let sizes: Vec<u32> = plan.iter().map(|p| p.size.expect("sized")).collect();
        assert_eq!(sizes, vec![1400, 1400, 1, 1400, 1400, 200, 1400]);
        let total: u32 = sizes.iter().sum();
        assert_eq!(total as usize, sc.frame_bytes.iter().sum::<usize>());
        // Every packet at the start; frame k due at I + k/fps.
        assert!(plan.iter().all(|p| p.at.is_zero()));
        assert_eq!(plan[3].lifetime, Some(Duration::from_millis(2200)));
        assert_eq!(plan[6].lifetime, Some(Duration::from_millis(2300)));
        let m = plan[5].media.expect("a media packet");
        assert_eq!((m.index, m.count), (2, 3));
    }

    #[test]
    fn violations_and_the_initiation_latency_for_none() {
        // Frames due at I + 0, 100, 200, 300 ms.
        let r = run_with(vec![Some(50), Some(400), Some(250), Some(350)]);
        assert_eq!(r.violations_pct(Duration::ZERO), 100.0);
        assert_eq!(r.violations_pct(Duration::from_millis(100)), 25.0);
        // Frame 1 needs 300 ms.
        assert_eq!(
            r.zero_violation_initiation(),
            Some(Duration::from_millis(300))
        );
        assert_eq!(r.violations_pct(Duration::from_millis(300)), 0.0);
        assert_eq!(r.violations_pct(Duration::from_millis(299)), 25.0);
        let lost = run_with(vec![Some(50), None, Some(250), Some(350)]);
        assert_eq!(lost.zero_violation_initiation(), None);
        assert_eq!(lost.violations_pct(Duration::from_secs(100)), 25.0);
        // 3000 bytes in 0.35 s; 4000 bytes take 0.467 s, playback 0.4 s.
        let f = lost.formula_initiation_s().expect("arrived");
        assert!((f - (4000.0 / (3000.0 / 0.35) - 0.4)).abs() < 1e-9, "{f}");
    }
}
