//! BOLA (Spiteri, Urgaonkar, Sitaraman, "BOLA: Near-optimal bitrate
//! adaptation for online videos", arXiv 1601.06748) as dash.js ran it
//! when [DASHing-2018] was written (its `BolaRule`, BOLA-O variant); [DASHing-2018]
//! §3 keeps dash.js's quality estimation unchanged. Written from the
//! published algorithm and dash.js's documented behaviour:
//!
//! - Utilities `v_m = ln(S_m)` of the encoding rates; the control
//!   parameters `V` and `γp` put the switch to the lowest rate at a buffer
//!   of [`MINIMUM_BUFFER_S`] and to the highest at [`BUFFER_TARGET_S`]:
//!   `γp = 1 − v_0 + (v_M − v_0) / (target/minimum − 1)`,
//!   `V = minimum / (v_0 + γp − 1)`.
//! - Choice: the `m` maximising `(V (v_m + γp) − Q) / S_m`, `Q` the
//!   buffer level plus a *placeholder* buffer.
//! - Start-up: until the buffer exceeds `chunk / REBUFFER_SAFETY`, the
//!   throughput rule (harmonic mean of the last three downloads × 0.9);
//!   on leaving it the placeholder is set so BOLA keeps that rate.
//! - Placeholder: grows by the time the client sat idle (since the later
//!   of the last decision and the last download's end), is reset by a
//!   rebuffer, and is spent first when BOLA asks for a delay.
//! - BOLA-O: an increase above what the throughput sustains is capped at
//!   that rate (never below the last quality).
//! - Rebuffer safety: while the rate exceeds
//!   `REBUFFER_SAFETY · throughput · buffer / chunk`, step down.
//! - Delay: if the effective buffer exceeds `V (v_m + γp)` for the chosen
//!   `m` (below the top rate), wait the excess (placeholder first).

use super::{harmonic_throughput, quality_for_throughput, Abr, Context, Decision};

/// Below this buffer (s) BOLA never delays a request.
pub const MINIMUM_BUFFER_S: f64 = 10.0;
/// The buffer (s) at which BOLA picks the top rate.
pub const BUFFER_TARGET_S: f64 = 30.0;
/// Share of the throughput-times-buffer budget a chunk may use.
pub const REBUFFER_SAFETY: f64 = 0.5;
/// Share of the throughput used in start-up.
pub const BANDWIDTH_SAFETY: f64 = 0.9;
/// Downloads averaged for throughput (dash.js, video on demand).
pub const THROUGHPUT_SAMPLES: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// One representation only: always it.
    OneRate,
    Startup,
    Steady,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Bola {
    bitrates: Vec<u64>,
    utilities: Vec<f64>,
    v: f64,
    gp: f64,
    state: State,
    placeholder_s: f64,
    last_quality: usize,
    last_call_s: Option<f64>,
}

impl Bola {
    /// BOLA for a ladder (encoding rates, lowest first).
    pub fn new(bitrates: &[u64]) -> Bola {
        let utilities: Vec<f64> = bitrates.iter().map(|&b| (b.max(1) as f64).ln()).collect();
        let (v0, vm) = (utilities[0], utilities[utilities.len() - 1]);
        let state = if bitrates.len() < 2 || vm <= v0 {
            State::OneRate
        } else {
            State::Startup
        };
        let gp = 1.0 - v0 + (vm - v0) / (BUFFER_TARGET_S / MINIMUM_BUFFER_S - 1.0);
        let v = MINIMUM_BUFFER_S / (v0 + gp - 1.0);
        Bola {
            bitrates: bitrates.to_vec(),
            utilities,
            v,
            gp,
            state,
            placeholder_s: 0.0,
            last_quality: 0,
            last_call_s: None,
        }
    }

    /// The BOLA objective's maximiser at effective buffer `level`.
    fn quality_at(&self, level: f64) -> usize {
        let mut best = (f64::NEG_INFINITY, 0);
        for (m, (&u, &b)) in self.utilities.iter().zip(&self.bitrates).enumerate() {
            let score = (self.v * (u + self.gp) - level) / b as f64;
            if score >= best.0 {
                best = (score, m);
            }
        }
        best.1
    }

    /// The smallest effective buffer at which `q` beats every lower rate.
    fn buffer_for(&self, q: usize) -> f64 {
        let (bq, uq) = (self.bitrates[q] as f64, self.utilities[q]);
        (0..q)
            .map(|i| {
                let (bi, ui) = (self.bitrates[i] as f64, self.utilities[i]);
                self.v * (self.gp + (bq * ui - bi * uq) / (bq - bi))
            })
            .fold(0.0, f64::max)
    }

    /// The placeholder buffer (s), for tests and traces.
    pub fn placeholder_s(&self) -> f64 {
        self.placeholder_s
    }
}

impl Abr for Bola {
    fn name(&self) -> &'static str {
        "bola"
    }

    fn on_rebuffer(&mut self) {
        if self.state == State::Steady {
            self.placeholder_s = 0.0;
        }
    }

    fn choose(&mut self, ctx: &Context<'_>) -> Decision {
        if self.state == State::OneRate {
            return Decision {
                quality: 0,
                delay_s: 0.0,
            };
        }
        let buffer = ctx.buffer_s.max(0.0);
        let throughput = harmonic_throughput(ctx.samples, THROUGHPUT_SAMPLES);
        if buffer <= 0.1 {
            self.placeholder_s = 0.0;
        }
        // Idle time since the later of the last decision and the last
        // download's end goes into the placeholder.
        if let Some(last) = self.last_call_s {
            let since = ctx.last_download_end_s.map_or(last, |e| e.max(last));
            self.placeholder_s += (ctx.now_s - since).max(0.0);
        }
        self.last_call_s = Some(ctx.now_s);
        let effective = buffer + self.placeholder_s;
        let mut quality = self.quality_at(effective);

        if self.state == State::Startup {
            let q = throughput.map_or(0, |t| {
                quality_for_throughput(&self.bitrates, t * BANDWIDTH_SAFETY)
            });
            if buffer > ctx.chunk_s / REBUFFER_SAFETY {
                self.state = State::Steady;
                let want = self.buffer_for(q);
                if want > buffer {
                    self.placeholder_s = want - buffer;
                }
            }
            self.last_quality = q;
            return Decision {
                quality: q,
                delay_s: 0.0,
            };
        }

        // BOLA-O: do not climb above what the throughput sustains.
        if quality > self.last_quality {
            if let Some(t) = throughput {
                let sustainable = quality_for_throughput(&self.bitrates, t);
                if quality > sustainable {
                    quality = sustainable.max(self.last_quality);
                }
            }
        }
        // Rebuffer safety.
        if let Some(t) = throughput {
            let safe = REBUFFER_SAFETY * t * buffer / ctx.chunk_s;
            while quality > 0 && self.bitrates[quality] as f64 > safe {
                quality -= 1;
            }
        }
        // Do not fill the buffer with low-rate chunks.
        let mut delay = effective - self.v * (self.utilities[quality] + self.gp);
        if delay > 0.0 {
            if delay > self.placeholder_s {
                delay -= self.placeholder_s;
                self.placeholder_s = 0.0;
            } else {
                self.placeholder_s -= delay;
                delay = 0.0;
            }
        }
        if quality == self.bitrates.len() - 1 {
            delay = 0.0;
        }
        self.last_quality = quality;
        Decision {
            quality,
            delay_s: delay.max(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Sample, SEED_LADDER_BPS};
    use super::*;

    fn ctx<'a>(now: f64, buffer: f64, samples: &'a [Sample]) -> Context<'a> {
        Context {
            now_s: now,
            buffer_s: buffer,
            last_download_end_s: Some(now),
            bitrates: &SEED_LADDER_BPS,
            chunk_s: 1.0,
            samples,
        }
    }

    #[test]
    fn a_fuller_buffer_never_picks_a_lower_rate() {
        let b = Bola::new(&SEED_LADDER_BPS);
        assert_eq!(b.quality_at(0.0), 0);
        assert_eq!(b.quality_at(MINIMUM_BUFFER_S), 0);
        assert_eq!(b.quality_at(BUFFER_TARGET_S), 7);
        let picks: Vec<usize> = (0..50).map(|i| b.quality_at(f64::from(i) * 0.75)).collect();
        assert!(picks.windows(2).all(|w| w[1] >= w[0]), "{picks:?}");
        assert!(picks.iter().any(|&q| q > 0 && q < 7), "{picks:?}");
    }

    #[test]
    fn start_up_follows_throughput_then_steady_state_holds_the_rate() {
        let mut b = Bola::new(&SEED_LADDER_BPS);
        assert_eq!(b.choose(&ctx(0.0, 0.0, &[])).quality, 0);
        let s = [Sample {
            bits: 4.0e6,
            seconds: 1.0,
        }; 3];
        // 4 Mb/s * 0.9 = 3.6 Mb/s: rep 5 (3.5 Mb/s).
        assert_eq!(b.choose(&ctx(1.0, 1.0, &s)).quality, 4);
        assert_eq!(b.state, State::Startup);
        let d = b.choose(&ctx(2.0, 2.5, &s));
        assert_eq!(d.quality, 4);
        assert_eq!(b.state, State::Steady);
        // The placeholder keeps rep 5 on the next call.
        let d = b.choose(&ctx(3.0, 2.5, &s));
        assert_eq!(d.quality, 4, "placeholder {}", b.placeholder_s());
    }

    #[test]
    fn bola_o_and_the_rebuffer_safety_cap_the_rate() {
        let mut b = Bola::new(&SEED_LADDER_BPS);
        b.state = State::Steady;
        // A full buffer but 2 Mb/s of throughput: BOLA-O caps at 1.8 Mb/s.
        let s = [Sample {
            bits: 2.0e6,
            seconds: 1.0,
        }; 3];
        let d = b.choose(&ctx(0.0, 25.0, &s));
        assert_eq!(d.quality, 1, "{d:?}");
        // 1.5 s of buffer at 6 Mb/s: 0.5 * 6 * 1.5 = 4.5 Mb/s is safe, so
        // rep 6 (4 Mb/s) even though the placeholder asks for the top.
        let mut b = Bola::new(&SEED_LADDER_BPS);
        b.state = State::Steady;
        b.last_quality = 7;
        b.placeholder_s = 30.0;
        let fast = [Sample {
            bits: 6.0e6,
            seconds: 1.0,
        }; 3];
        assert_eq!(b.choose(&ctx(0.0, 1.5, &fast)).quality, 5);
    }

    #[test]
    fn a_low_rate_with_a_full_buffer_asks_for_a_delay_paid_from_the_placeholder() {
        let mut b = Bola::new(&SEED_LADDER_BPS);
        b.state = State::Steady;
        let s = [Sample {
            bits: 1.5e6,
            seconds: 1.0,
        }; 3];
        let d = b.choose(&ctx(0.0, 25.0, &s));
        assert_eq!(d.quality, 0);
        assert!(d.delay_s > 0.5, "{d:?}");
        // Waiting it out moves the wait into the placeholder: no second
        // delay, same choice.
        let mut later = ctx(d.delay_s, 25.0 - d.delay_s, &s);
        later.last_download_end_s = Some(0.0);
        let again = b.choose(&later);
        assert_eq!(again.quality, 0);
        assert!(again.delay_s < 1e-9, "{again:?}");
    }
}
