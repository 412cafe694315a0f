//! The live-video receiver's playout model (issue 12, step 1): given when
//! each frame was generated and when its last packet reached the
//! application, decide which frames play, which stall playback, which are
//! skipped, and which are *useful* (decodable), with the seeds' definitions:
//!
//! * **Playback clock** (seed 002 §3.2): frame 0 is due
//!   `one_way + buffer_frames · frame_interval` after it was generated, and
//!   frame *f* one frame interval after frame *f − 1*, plus the playback
//!   discrepancy accumulated so far.
//! * **Stall** (seed 002, "no buffered video to play while head-of-line
//!   blocking holds data"): with [`OnMissing::Stall`] (a reliable, ordered
//!   transport — TCP, QUIC on one stream — will deliver the frame, so the
//!   player waits), a frame that is incomplete when due pauses playback until
//!   it is complete; the wait is added to the **playback discrepancy**
//!   (intended minus actual playback time, cumulative) and shifts every later
//!   frame.
//! * **Skip**: with [`OnMissing::Skip`] (TCP Hollywood, QUICsilver, UDP,
//!   QUIC per packet: what is late will not be waited for), an incomplete
//!   frame is concealed at its due time and playback goes on; a frame the
//!   transport never delivers is skipped in either mode.
//! * **Useful frame** (seed 002 §5, seed 004): played, and its reference
//!   chain complete by its own play time. A frame is decodable at
//!   `max(complete, decodable(reference))`; an intra (I) frame has no
//!   reference, so a *late* I-frame — too late for its own slot — still
//!   serves the P-frames played after it arrived. The reference is the GOP's
//!   I-frame ([`Reference::Gop`], seed 002) or the previous frame
//!   ([`Reference::Previous`], seeds 003 and 004).
//!
//! The model is a pure function of the timings, so every transport is judged
//! by the same player.

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
}

/// What happened to one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameFate {
    /// When it was due (the playback clock, discrepancy included).
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
        let mut last_intra: Option<usize> = None;
        let mut discrepancy = Duration::ZERO;
        for (f, fr) in frames.iter().enumerate() {
            let reference = if fr.intra {
                None
            } else {
                match self.reference {
                    Reference::Gop => last_intra,
                    Reference::Previous => f.checked_sub(1),
                }
            };
            let dec = match (fr.complete, reference) {
                (None, _) => None,
                (Some(c), None) => Some(c),
                (Some(c), Some(r)) => decodable[r].map(|d| d.max(c)),
            };
            // A P-frame before any I-frame has nothing to decode from.
            let dec = if !fr.intra && reference.is_none() {
                None
            } else {
                dec
            };
            decodable.push(dec);
            if fr.intra {
                last_intra = Some(f);
            }
            let due = start + self.frame_interval * f as u32 + discrepancy;
            let played = match fr.complete {
                Some(c) if c <= due => Some(due),
                Some(c) if self.on_missing == OnMissing::Stall => {
                    let pause = c - due;
                    discrepancy += pause;
                    report.stalls += 1;
                    report.longest_stall = report.longest_stall.max(pause);
                    Some(c)
                }
                _ => None,
            };
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            for m in [OnMissing::Stall, OnMissing::Skip] {
                let p = Player { buffer_frames: buffer, ..player(m, reference) };
                let (fates, r) = p.play(&frames);
                prop_assert_eq!(r.played + r.skipped, r.frames);
                prop_assert!(r.useful <= r.played);
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
                        let pauses: Duration = fates.iter()
                            .filter_map(|f| Some(f.played? - f.due))
                            .sum();
                        prop_assert_eq!(pauses, r.discrepancy);
                        prop_assert!(r.longest_stall <= r.discrepancy);
                    }
                }
            }
        }
    }
}
