//! The analysis of thesis chapter 6 ("Lowering Latency in MPEG-DASH"),
//! equations 6.1–6.19: how large a playout buffer (or chunk) must be for
//! smooth playback over one bottleneck, for the three architectures the
//! chapter compares — request-response over TCP (§6.1), progressive
//! server push over TCP (§6.2) and progressive over TCP Hollywood (§6.3).
//!
//! Assumptions (thesis §6.1.2-§6.1.3, REFERENCES.md thesis ch. 6, setup):
//! a constant bit rate (every chunk `R_encoding × T_chunk`, eq. 6.6, and
//! every frame of a chunk the same size, eq. 6.17), one request per chunk
//! costing one RTT, segments sent back to back, at most one loss per chunk
//! repaired by fast retransmit after three duplicate ACKs (eq. 6.11). The
//! MTU is not stated; 1500 bytes is assumed. Where `R_encoding ≥
//! R_bottleneck` no buffer gives smooth playback (the bounds are `None`).
//!
//! Every function takes and returns seconds (f64) and bit/s; the CLI
//! (`hollywood analyze ch6`) prints milliseconds and frames.

/// One stream over one bottleneck.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DashPath {
    /// Round-trip time T_rtt (s).
    pub rtt: f64,
    /// Encoding rate R_encoding (bit/s).
    pub r_encoding: f64,
    /// Bottleneck rate R_bottleneck (bit/s).
    pub r_bottleneck: f64,
    /// Frames per second (thesis: 60).
    pub fps: f64,
    /// Segment size on the wire for T_mtu (bytes; 1500 assumed).
    pub mtu_bytes: f64,
}

/// Why the numbers cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundsError(pub String);

impl std::fmt::Display for BoundsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BoundsError {}

/// Eq. 6.1: requests in a session of `t_session` with chunks of `t_chunk`
/// (one per chunk, plus the manifest).
pub fn n_requests(t_session: f64, t_chunk: f64) -> f64 {
    (t_session / t_chunk).ceil() + 1.0
}

/// Eq. 6.18: the cumulative drift from the live point after stalls of
/// these durations (equal to the total delayed-frame duration).
pub fn offset(stalls: &[f64]) -> f64 {
    stalls.iter().sum()
}

impl DashPath {
    /// Check the numbers (positive, finite).
    pub fn new(
        rtt: f64,
        r_encoding: f64,
        r_bottleneck: f64,
        fps: f64,
        mtu_bytes: f64,
    ) -> Result<DashPath, BoundsError> {
        let ok =
            |v: f64, min_exclusive: bool| v.is_finite() && (v > 0.0 || !min_exclusive && v == 0.0);
        if !ok(rtt, false) {
            return Err(BoundsError(format!("the RTT must be ≥ 0, not {rtt}")));
        }
        for (what, v) in [
            ("encoding rate", r_encoding),
            ("bottleneck rate", r_bottleneck),
            ("frame rate", fps),
            ("MTU", mtu_bytes),
        ] {
            if !ok(v, true) {
                return Err(BoundsError(format!("the {what} must be positive, not {v}")));
            }
        }
        Ok(DashPath {
            rtt,
            r_encoding,
            r_bottleneck,
            fps,
            mtu_bytes,
        })
    }

    /// R_encoding / R_bottleneck.
    pub fn load(&self) -> f64 {
        self.r_encoding / self.r_bottleneck
    }

    /// Eq. 6.6: S_chunk = R_encoding × T_chunk (bits).
    pub fn chunk_bits(&self, t_chunk: f64) -> f64 {
        self.r_encoding * t_chunk
    }

    /// Eqs. 6.5/6.7: T_download = S_chunk / R_bottleneck = T_chunk × load.
    pub fn download(&self, t_chunk: f64) -> f64 {
        self.chunk_bits(t_chunk) / self.r_bottleneck
    }

    /// Eq. 6.8: T_fetch = T_rtt + T_download (request = one RTT), lossless.
    pub fn fetch_lossless(&self, t_chunk: f64) -> f64 {
        self.rtt + self.download(t_chunk)
    }

    /// Eq. 6.11: T_rexmit = T_rtt + 3 × T_mtu (three duplicate ACKs, then
    /// the retransmission).
    pub fn rexmit(&self) -> f64 {
        self.rtt + 3.0 * self.mtu_bytes * 8.0 / self.r_bottleneck
    }

    /// Eq. 6.12: T_fetch with one loss event in the chunk.
    pub fn fetch_lossy(&self, t_chunk: f64) -> f64 {
        self.fetch_lossless(t_chunk) + self.rexmit()
    }

    /// Eq. 6.4: no stall when T_chunk ≥ T_fetch.
    pub fn smooth(&self, t_chunk: f64, lossy: bool) -> bool {
        let fetch = if lossy {
            self.fetch_lossy(t_chunk)
        } else {
            self.fetch_lossless(t_chunk)
        };
        t_chunk >= fetch
    }

    /// 1 − load, or `None` when the bottleneck cannot carry the encoding.
    fn headroom(&self) -> Option<f64> {
        let h = 1.0 - self.load();
        (h > 0.0).then_some(h)
    }

    /// Eqs. 6.9/6.10: the smallest chunk (= buffer, eq. 6.2) for smooth
    /// request-response playback without loss: T_rtt / (1 − load).
    pub fn min_buffer_request_response(&self) -> Option<f64> {
        Some(self.rtt / self.headroom()?)
    }

    /// Eqs. 6.13/6.14: the same with one loss per chunk:
    /// (T_rtt + T_rexmit) / (1 − load).
    pub fn min_buffer_request_response_lossy(&self) -> Option<f64> {
        Some((self.rtt + self.rexmit()) / self.headroom()?)
    }

    /// Eq. 6.17: S_iframe ≈ R_encoding × T_chunk / F_chunk = R_encoding /
    /// fps (bits): every frame treated as equal (worst case for the
    /// P-frames).
    pub fn iframe_bits(&self) -> f64 {
        self.r_encoding / self.fps
    }

    /// Eq. 6.15: progressive download of a chunk of `f_chunk` frames sent
    /// in fragments of `n` frames (the I-frame first):
    /// S_iframe/R_bn + Σ_{N_fragments} S_pframe × n / R_bn, with
    /// N_fragments = (F_chunk − 1) / n and S_pframe = S_iframe (eq. 6.17).
    pub fn download_progressive(&self, f_chunk: u32, n: u32) -> Result<f64, BoundsError> {
        if f_chunk == 0 || n == 0 {
            return Err(BoundsError(
                "a chunk and a fragment need at least one frame".into(),
            ));
        }
        let fragments = f64::from(f_chunk - 1) / f64::from(n);
        let frame = self.iframe_bits() / self.r_bottleneck;
        Ok(frame + fragments * frame * f64::from(n))
    }

    /// Eq. 6.16: progressive over TCP: T_rtt + S_iframe/R_bn + T_rexmit.
    /// `None` where the encoding outruns the bottleneck (playback falls
    /// behind whatever the buffer).
    pub fn min_buffer_progressive(&self) -> Option<f64> {
        self.headroom()?;
        Some(self.rtt + self.iframe_bits() / self.r_bottleneck + self.rexmit())
    }

    /// Eq. 6.19: progressive over TCP Hollywood: T_rtt + S_iframe/R_bn (no
    /// retransmission wait: a lost frame is skipped). Below it every frame
    /// is skipped, so here it bounds any playback at all. `None` where the
    /// encoding outruns the bottleneck (continuous skipping, Fig. 6.15d).
    pub fn min_buffer_hollywood(&self) -> Option<f64> {
        self.headroom()?;
        Some(self.rtt + self.iframe_bits() / self.r_bottleneck)
    }

    /// Every bound, for a table row.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            load: self.load(),
            frame_kb: self.iframe_bits() / 8.0 / 1000.0,
            rexmit: self.rexmit(),
            request_response: self.min_buffer_request_response(),
            request_response_lossy: self.min_buffer_request_response_lossy(),
            progressive: self.min_buffer_progressive(),
            hollywood: self.min_buffer_hollywood(),
        }
    }
}

/// The minimum buffers of one path (seconds; `None` = infeasible).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Bounds {
    /// R_encoding / R_bottleneck.
    pub load: f64,
    /// Frame size (kB, eq. 6.17).
    pub frame_kb: f64,
    /// T_rexmit (eq. 6.11).
    pub rexmit: f64,
    /// Eq. 6.10 (request-response, lossless).
    pub request_response: Option<f64>,
    /// Eq. 6.14 (request-response, one loss per chunk).
    pub request_response_lossy: Option<f64>,
    /// Eq. 6.16 (progressive over TCP, lossy).
    pub progressive: Option<f64>,
    /// Eq. 6.19 (progressive over TCP Hollywood, lossy).
    pub hollywood: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(rtt_ms: f64, enc_mbps: f64) -> DashPath {
        DashPath::new(rtt_ms / 1e3, enc_mbps * 1e6, 30e6, 60.0, 1500.0).expect("valid")
    }

    fn ms(v: Option<f64>) -> f64 {
        v.expect("feasible") * 1e3
    }

    /// The derived table of REFERENCES.md thesis ch. 6, derived bounds (30 Mb/s, 60 fps, 1500-byte
    /// MTU), to its printed precision.
    #[test]
    fn the_bounds_match_the_reading_aids_derived_table() {
        let rows = [
            // rtt, enc, 6.10, 6.14, 6.16, 6.19 (ms)
            (25.0, 7.5, 33.3, 68.3, 55.4, 29.2),
            (25.0, 12.0, 41.7, 85.3, 57.9, 31.7),
            (25.0, 24.0, 125.0, 256.0, 64.5, 38.3),
            (100.0, 7.5, 133.3, 268.0, 205.0, 104.0),
            (100.0, 12.0, 166.7, 335.0, 208.0, 107.0),
            (100.0, 24.0, 500.0, 1006.0, 215.0, 113.0),
        ];
        for (rtt, enc, rr, rrl, prog, hw) in rows {
            let b = path(rtt, enc).bounds();
            let near = |got: f64, want: f64| (got - want).abs() <= 0.006 * want + 0.06;
            assert!(near(ms(b.request_response), rr), "{rtt} {enc}: 6.10 {b:?}");
            assert!(
                near(ms(b.request_response_lossy), rrl),
                "{rtt} {enc}: 6.14 {b:?}"
            );
            assert!(near(ms(b.progressive), prog), "{rtt} {enc}: 6.16 {b:?}");
            assert!(near(ms(b.hollywood), hw), "{rtt} {enc}: 6.19 {b:?}");
        }
        // 53 Mb/s over 30 Mb/s: nothing plays smoothly (Figs 6.4d-6.15d).
        let b = path(25.0, 53.0).bounds();
        assert_eq!(
            (
                b.request_response,
                b.request_response_lossy,
                b.progressive,
                b.hollywood
            ),
            (None, None, None, None)
        );
        assert!((b.frame_kb - 110.4).abs() < 0.1);
    }

    #[test]
    fn the_no_stall_condition_agrees_with_the_bounds() {
        let p = path(100.0, 12.0);
        let rr = p.min_buffer_request_response().expect("feasible");
        assert!(p.smooth(rr * 1.001, false) && !p.smooth(rr * 0.999, false));
        let rrl = p.min_buffer_request_response_lossy().expect("feasible");
        assert!(p.smooth(rrl * 1.001, true) && !p.smooth(rrl * 0.999, true));
        // Loss makes every bound larger; Hollywood's is the smallest.
        let b = p.bounds();
        assert!(ms(b.request_response_lossy) > ms(b.request_response));
        assert!(ms(b.hollywood) < ms(b.progressive));
        assert!((ms(b.progressive) - ms(b.hollywood) - b.rexmit * 1e3).abs() < 1e-9);
    }

    #[test]
    fn requests_downloads_and_offsets() {
        // REFERENCES.md thesis ch. 6, derived bounds: 180 s at 3 frames (50 ms): 3601 requests; at
        // 30 frames (500 ms): 361.
        assert_eq!(n_requests(180.0, 0.05), 3601.0);
        assert_eq!(n_requests(180.0, 0.5), 361.0);
        let p = path(25.0, 12.0);
        // A 1 s chunk of 60 equal frames takes the chunk's bits at the
        // bottleneck rate, however it is fragmented (eq. 6.15 = eq. 6.7).
        for n in [1, 3, 59] {
            let d = p.download_progressive(60, n).expect("valid");
            assert!((d - p.download(1.0)).abs() < 1e-12, "{n}: {d}");
        }
        assert!(p.download_progressive(0, 1).is_err());
        assert_eq!(offset(&[0.1, 0.25]), 0.35);
        assert!(DashPath::new(0.1, 0.0, 30e6, 60.0, 1500.0).is_err());
        assert!(DashPath::new(-0.1, 1e6, 30e6, 60.0, 1500.0).is_err());
        assert!(DashPath::new(f64::NAN, 1e6, 30e6, 60.0, 1500.0).is_err());
    }
}
