//! The video a DASH server offers: representations (the ladder), chunk
//! sizes, the bytes of each chunk, and the MPD manifest that describes them.
//!
//! **Synthetic content** (the default, `--video synthetic`): [DASHing-2018]'s
//! ladder (Table 1 of "DASHing Towards Hollywood", REFERENCES.md [DASHing-2018], setup): eight
//! 1920x1080 representations encoded at 1200–5600 kb/s whose MPEG-TS
//! chunks run at 1301–6030 kb/s (the container adds 7–8 %), 1 s chunks.
//! Chunk sizes model a scene-complexity factor shared by every
//! representation (an encoder at a target rate spends more on complex
//! scenes, the same scenes at every rate): chunk `n` of representation
//! `q` has `chunk_rate[q] / 8 * T * c_n` bytes, with `c_n` log-normal of
//! mean 1 and spread [`Content::DEFAULT_SPREAD`], clamped to [0.5, 2],
//! from the content seed. The byte at offset `i` of a synthetic chunk is
//! [`pattern_byte`], so a client can check every byte it gets.
//!
//! The manifest is a static MPD (ISO/IEC 23009-1) written and parsed with
//! the `dash-mpd-core` crate: one period, one video adaptation set of
//! `video/mp2t`, a `SegmentTemplate` with `$RepresentationID$/$Number$.ts`
//! and the chunk duration, one `Representation` per rung with its
//! encoding rate as `@bandwidth` (what BOLA reads, as in dash.js).

use crate::rng::SplitMix;
use std::time::Duration;

/// One rung of the ladder.
#[derive(Debug, Clone, PartialEq)]
pub struct Representation {
    /// Its id in the MPD and in chunk URLs.
    pub id: String,
    /// Encoding rate, the MPD's `@bandwidth` (bit/s).
    pub bandwidth_bps: u64,
    /// Mean rate of its chunks as sent (container included), bit/s.
    pub chunk_bps: u64,
    /// Picture size.
    pub width: u32,
    /// Picture size.
    pub height: u32,
}

/// The [DASHing-2018] Table 1: (encoding kb/s, chunk kb/s) of the eight
/// representations of Big Buck Bunny at 1920x1080.
pub const DASHING_LADDER: [(u64, u64); 8] = [
    (1200, 1301),
    (1800, 1941),
    (2400, 2584),
    (3000, 3228),
    (3500, 3766),
    (4000, 4304),
    (5000, 5328),
    (5600, 6030),
];

/// Where the chunk bytes come from.
#[derive(Debug, Clone, PartialEq)]
enum Bytes {
    /// [`pattern_byte`].
    Synthetic,
    /// Files `DIR/<representation id>/<n>.ts` (see [`Content::from_dir`]).
    Files(std::path::PathBuf),
}

/// Largest chunk file accepted from a video directory (bytes).
pub const MAX_CHUNK_FILE: u64 = 64 << 20;

/// A video as a DASH server holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    /// Name, the first path segment of every URL (`/NAME/...`).
    pub name: String,
    /// The ladder, lowest rate first.
    pub reps: Vec<Representation>,
    /// Chunk (segment) duration.
    pub chunk: Duration,
    /// `sizes[n][q]`: bytes of chunk `n` of representation `q`.
    sizes: Vec<Vec<u32>>,
    bytes: Bytes,
}

/// The byte at `offset` of chunk `n` of representation `q` of synthetic
/// content: cheap to produce and to check, and different per chunk and
/// rung so a misplaced message shows.
pub fn pattern_byte(n: usize, q: usize, offset: u64) -> u8 {
    (offset as u8)
        .wrapping_mul(31)
        .wrapping_add((n as u8).wrapping_mul(7))
        .wrapping_add(q as u8)
}

/// `pattern_byte(0, 0, j)` for two periods of the pattern (it repeats
/// every 256 bytes of offset).
const PERIOD: [u8; 512] = {
    let mut t = [0u8; 512];
    let mut j = 0;
    while j < 512 {
        t[j] = (j as u8).wrapping_mul(31);
        j += 1;
    }
    t
};

/// Call `f(position, pattern slice)` over `len` bytes from `offset` in
/// blocks of at most 256 (the slice of [`PERIOD`] the block holds before
/// the chunk's own constant is added).
fn for_blocks(offset: u64, len: usize, mut f: impl FnMut(usize, &[u8])) {
    let mut at = 0;
    while at < len {
        let start = ((offset + at as u64) % 256) as usize;
        let k = (len - at).min(256);
        f(at, &PERIOD[start..start + k]);
        at += k;
    }
}

impl Content {
    /// Default spread (σ of the log) of the per-chunk complexity factor.
    pub const DEFAULT_SPREAD: f64 = 0.1;

    /// The [DASHing-2018] ladder ([`DASHING_LADDER`]), `chunks` chunks of `chunk`,
    /// complexity spread `spread`, sizes from `seed`.
    pub fn dashing(
        chunks: usize,
        chunk: Duration,
        spread: f64,
        seed: u64,
    ) -> Result<Content, String> {
        let reps = DASHING_LADDER
            .iter()
            .enumerate()
            .map(|(i, &(enc, ch))| Representation {
                id: format!("rep{}", i + 1),
                bandwidth_bps: enc * 1000,
                chunk_bps: ch * 1000,
                width: 1920,
                height: 1080,
            })
            .collect();
        Content::synthetic("bbb", reps, chunks, chunk, spread, seed)
    }

    /// Synthetic content over any ladder (see the module docs).
    pub fn synthetic(
        name: &str,
        reps: Vec<Representation>,
        chunks: usize,
        chunk: Duration,
        spread: f64,
        seed: u64,
    ) -> Result<Content, String> {
        if reps.is_empty() {
            return Err("the ladder needs at least one representation".into());
        }
        if reps
            .windows(2)
            .any(|w| w[1].bandwidth_bps <= w[0].bandwidth_bps)
        {
            return Err("representations must be listed by increasing bandwidth".into());
        }
        if reps
            .iter()
            .any(|r| r.bandwidth_bps == 0 || r.chunk_bps == 0)
        {
            return Err("a representation needs a rate above 0".into());
        }
        if chunks == 0 || chunks > 100_000 {
            return Err(format!("{chunks} chunks: use 1 to 100000"));
        }
        if chunk < Duration::from_millis(100) || chunk > Duration::from_secs(60) {
            return Err(format!("chunk duration {chunk:?}: use 100 ms to 60 s"));
        }
        if !chunk.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(format!(
                "chunk duration {chunk:?}: use whole milliseconds (the MPD's timescale)"
            ));
        }
        if !(0.0..=1.0).contains(&spread) {
            return Err(format!("complexity spread {spread}: use 0 to 1"));
        }
        let mut rng = SplitMix(seed ^ 0xda5c_0de5);
        let secs = chunk.as_secs_f64();
        let sizes = (0..chunks)
            .map(|_| {
                let c = (spread * rng.normal() - spread * spread / 2.0)
                    .exp()
                    .clamp(0.5, 2.0);
                reps.iter()
                    .map(|r| ((r.chunk_bps as f64 / 8.0 * secs * c).round() as u32).max(1))
                    .collect()
            })
            .collect();
        Ok(Content {
            name: name.into(),
            reps,
            chunk,
            sizes,
            bytes: Bytes::Synthetic,
        })
    }

    /// A real video: `dir/manifest.mpd` (a static MPD of the shape
    /// [`Content::mpd`] writes: one period, one video adaptation set, a
    /// number-based `SegmentTemplate` `$RepresentationID$/$Number$.ts`
    /// starting at 0) and its chunk files `dir/<id>/<n>.ts`, as `hollywood
    /// dash-ladder` writes them. Every chunk file must exist; sizes come
    /// from the files, the chunk rate of a representation is their mean.
    pub fn from_dir(dir: &std::path::Path) -> Result<Content, String> {
        let mpd_path = dir.join("manifest.mpd");
        let xml = std::fs::read_to_string(&mpd_path)
            .map_err(|e| format!("{}: {e}", mpd_path.display()))?;
        let m = Manifest::parse(&xml)?;
        if m.start_number != 0 || m.media != "$RepresentationID$/$Number$.ts" {
            return Err(format!(
                "{}: the SegmentTemplate must be $RepresentationID$/$Number$.ts from 0",
                mpd_path.display()
            ));
        }
        let mut sizes = vec![Vec::with_capacity(m.ids.len()); m.chunks];
        let mut reps = Vec::new();
        for (q, id) in m.ids.iter().enumerate() {
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(format!(
                    "representation id {id:?}: use letters, digits, - and _"
                ));
            }
            let mut total = 0u64;
            for (n, row) in sizes.iter_mut().enumerate() {
                let f = dir.join(id).join(format!("{n}.ts"));
                let len = std::fs::metadata(&f)
                    .map_err(|e| format!("{}: {e}", f.display()))?
                    .len();
                if len == 0 || len > MAX_CHUNK_FILE {
                    return Err(format!(
                        "{}: {len} bytes (use 1 to {MAX_CHUNK_FILE})",
                        f.display()
                    ));
                }
                total += len;
                row.push(len as u32);
            }
            reps.push(Representation {
                id: id.clone(),
                bandwidth_bps: m.bandwidths[q],
                chunk_bps: (total as f64 * 8.0 / (m.chunks as f64 * m.chunk.as_secs_f64())) as u64,
                width: 0,
                height: 0,
            });
        }
        Ok(Content {
            name: "video".into(),
            reps,
            chunk: m.chunk,
            sizes,
            bytes: Bytes::Files(dir.to_path_buf()),
        })
    }

    /// Whether the bytes follow [`pattern_byte`] (a client can check them).
    pub fn is_synthetic(&self) -> bool {
        self.bytes == Bytes::Synthetic
    }

    /// The whole of chunk `n` of `q`, read from its file (real video), or
    /// `None` for synthetic content.
    pub fn chunk_file(&self, n: usize, q: usize) -> Option<Result<Vec<u8>, String>> {
        match &self.bytes {
            Bytes::Synthetic => None,
            Bytes::Files(dir) => {
                let f = dir.join(&self.reps.get(q)?.id).join(format!("{n}.ts"));
                Some(std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display())))
            }
        }
    }

    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.sizes.len()
    }

    /// Bytes of chunk `n` of representation `q`.
    pub fn size(&self, n: usize, q: usize) -> Option<u32> {
        self.sizes.get(n)?.get(q).copied()
    }

    /// The playing time.
    pub fn duration(&self) -> Duration {
        self.chunk * self.chunks() as u32
    }

    /// URL path of the manifest.
    pub fn manifest_path(&self) -> String {
        format!("/{}/manifest.mpd", self.name)
    }

    /// URL path of chunk `n` of representation `q`.
    pub fn chunk_path(&self, n: usize, q: usize) -> String {
        format!("/{}/{}/{}.ts", self.name, self.reps[q].id, n)
    }

    /// Which chunk a path names.
    pub fn parse_chunk_path(&self, path: &str) -> Option<(usize, usize)> {
        let rest = path.strip_prefix('/')?.strip_prefix(self.name.as_str())?;
        let rest = rest.strip_prefix('/')?;
        let (rep, file) = rest.split_once('/')?;
        let q = self.reps.iter().position(|r| r.id == rep)?;
        let n: usize = file.strip_suffix(".ts")?.parse().ok()?;
        (n < self.chunks()).then_some((n, q))
    }

    /// Fill `out` with the bytes of chunk `n` of `q` from `offset` on.
    pub fn fill(&self, n: usize, q: usize, offset: u64, out: &mut [u8]) {
        match &self.bytes {
            Bytes::Files(_) => {
                // Served from `chunk_file`; a caller that fills a real
                // chunk gets its bytes from the file.
                match self.chunk_file(n, q) {
                    Some(Ok(b)) if offset as usize + out.len() <= b.len() => {
                        out.copy_from_slice(&b[offset as usize..offset as usize + out.len()]);
                    }
                    _ => out.fill(0),
                }
            }
            Bytes::Synthetic => {
                let base = pattern_byte(n, q, 0);
                for_blocks(offset, out.len(), |at, period| {
                    out[at..at + period.len()].copy_from_slice(period);
                });
                for b in out.iter_mut() {
                    *b = b.wrapping_add(base);
                }
            }
        }
    }

    /// Whether `data` is what chunk `n` of `q` holds at `offset`.
    pub fn check(n: usize, q: usize, offset: u64, data: &[u8]) -> bool {
        let base = pattern_byte(n, q, 0);
        let mut diff = 0u8;
        for_blocks(offset, data.len(), |at, period| {
            diff |= data[at..at + period.len()]
                .iter()
                .zip(period)
                .fold(0, |acc, (d, p)| acc | (d.wrapping_sub(base) ^ p));
        });
        diff == 0
    }

    /// The MPD manifest (XML).
    pub fn mpd(&self) -> String {
        mpd(
            &self.reps,
            self.chunk,
            self.chunks(),
            "$RepresentationID$/$Number$.ts",
            None,
            None,
        )
    }
}

/// A static MPD (XML) of the shape [`Content::mpd`] writes: one period,
/// one `video/mp2t` adaptation set with the representations `reps`, a
/// number-based `SegmentTemplate` from 0 with the `media` template and
/// `chunks` chunks of `chunk`; `codecs` (RFC 6381, e.g. `avc1.64001f`)
/// on every representation when given (a browser's Media Source needs it;
/// `hollywood dash-gateway` writes it), and an `initialization` segment
/// when given (dash.js needs one; for MPEG-TS it holds the program
/// tables).
pub fn mpd(
    reps: &[Representation],
    chunk: Duration,
    chunks: usize,
    media: &str,
    initialization: Option<&str>,
    codecs: Option<&str>,
) -> String {
    use dash_mpd_core as m;
    let chunk_ms = chunk.as_millis() as f64;
    let template = m::SegmentTemplate {
        media: Some(media.into()),
        initialization: initialization.map(str::to_string),
        startNumber: Some(0),
        duration: Some(chunk_ms),
        timescale: Some(1000),
        ..Default::default()
    };
    let reps = reps
        .iter()
        .map(|r| m::Representation {
            id: Some(r.id.clone()),
            bandwidth: Some(r.bandwidth_bps),
            width: (r.width > 0).then_some(u64::from(r.width)),
            height: (r.height > 0).then_some(u64::from(r.height)),
            codecs: codecs.map(str::to_string),
            ..Default::default()
        })
        .collect();
    let set = m::AdaptationSet {
        contentType: Some("video".into()),
        mimeType: Some("video/mp2t".into()),
        segmentAlignment: Some(true),
        startWithSAP: Some(1),
        SegmentTemplate: Some(template),
        representations: reps,
        ..Default::default()
    };
    let period = m::Period {
        id: Some("0".into()),
        adaptations: vec![set],
        ..Default::default()
    };
    let mpd = m::MPD {
        xmlns: Some("urn:mpeg:dash:schema:mpd:2011".into()),
        profiles: Some("urn:mpeg:dash:profile:isoff-live:2011".into()),
        mpdtype: Some("static".into()),
        mediaPresentationDuration: Some(chunk * chunks as u32),
        minBufferTime: Some(chunk * 2),
        periods: vec![period],
        ..Default::default()
    };
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{mpd}")
}

/// What a client learns from the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Encoding rates (`@bandwidth`), lowest first, bit/s.
    pub bandwidths: Vec<u64>,
    /// Representation ids, in the same order.
    pub ids: Vec<String>,
    /// Chunk duration.
    pub chunk: Duration,
    /// Number of chunks.
    pub chunks: usize,
    /// First chunk number.
    pub start_number: u64,
    /// The `media` template.
    pub media: String,
}

impl Manifest {
    /// Parse an MPD of the shape [`Content::mpd`] writes (one period, one
    /// video adaptation set with a number-based `SegmentTemplate`).
    pub fn parse(xml: &str) -> Result<Manifest, String> {
        let mpd = dash_mpd_core::parse(xml).map_err(|e| format!("bad MPD: {e}"))?;
        let total = mpd
            .mediaPresentationDuration
            .ok_or("the MPD has no mediaPresentationDuration")?;
        let period = match mpd.periods.as_slice() {
            [p] => p,
            ps => {
                return Err(format!(
                    "the MPD has {} periods; one is supported",
                    ps.len()
                ))
            }
        };
        let set = period
            .adaptations
            .iter()
            .find(|a| {
                a.contentType.as_deref() == Some("video")
                    || a.mimeType
                        .as_deref()
                        .is_some_and(|m| m.starts_with("video/"))
            })
            .ok_or("the MPD has no video adaptation set")?;
        let t = set
            .SegmentTemplate
            .as_ref()
            .ok_or("the video adaptation set has no SegmentTemplate")?;
        let media = t.media.clone().ok_or("the SegmentTemplate has no @media")?;
        let scale = t.timescale.unwrap_or(1).max(1) as f64;
        let seg = t.duration.ok_or("the SegmentTemplate has no @duration")? / scale;
        if !(seg.is_finite() && (0.001..=3600.0).contains(&seg)) {
            return Err(format!("segment duration {seg} s: use 1 ms to 1 h"));
        }
        let start_number = t.startNumber.unwrap_or(1);
        if start_number > 1 << 40 {
            return Err(format!("startNumber {start_number} is implausibly large"));
        }
        let mut reps: Vec<(u64, String)> = set
            .representations
            .iter()
            .map(|r| {
                Ok((
                    r.bandwidth.ok_or("a Representation has no @bandwidth")?,
                    r.id.clone().ok_or("a Representation has no @id")?,
                ))
            })
            .collect::<Result<_, String>>()?;
        if reps.is_empty() {
            return Err("the video adaptation set has no Representation".into());
        }
        reps.sort();
        let chunks = (total.as_secs_f64() / seg - 1e-9).ceil();
        if !(0.0..=1e6).contains(&chunks) {
            return Err(format!("{chunks} chunks: at most a million"));
        }
        let chunks = chunks as usize;
        Ok(Manifest {
            bandwidths: reps.iter().map(|r| r.0).collect(),
            ids: reps.into_iter().map(|r| r.1).collect(),
            chunk: Duration::from_secs_f64(seg),
            chunks,
            start_number,
            media,
        })
    }

    /// URL path of chunk `n` (0-based) of representation `q`, relative
    /// to the manifest's directory `base` (ending in `/`).
    pub fn chunk_path(&self, base: &str, n: usize, q: usize) -> String {
        let url = self
            .media
            .replace("$RepresentationID$", &self.ids[q])
            .replace("$Number$", &(self.start_number + n as u64).to_string());
        format!("{base}{url}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed001_ladder_keeps_its_chunk_rates_on_average() {
        let c = Content::dashing(600, Duration::from_secs(1), 0.1, 7).unwrap();
        assert_eq!(c.reps.len(), 8);
        for (q, r) in c.reps.iter().enumerate() {
            let mean: f64 = (0..c.chunks())
                .map(|n| f64::from(c.size(n, q).unwrap()))
                .sum::<f64>()
                / 600.0;
            let want = r.chunk_bps as f64 / 8.0;
            assert!(
                (mean / want - 1.0).abs() < 0.02,
                "rep {q}: {mean} vs {want}"
            );
        }
        // The same scenes are complex at every rate.
        let ratio = |n| f64::from(c.size(n, 7).unwrap()) / f64::from(c.size(n, 0).unwrap());
        assert!((ratio(3) - ratio(400)).abs() < 0.01);
        assert_ne!(c.size(3, 0), c.size(400, 0));
    }

    #[test]
    fn the_manifest_round_trips_through_the_mpd_crate() {
        let c = Content::dashing(597, Duration::from_secs(1), 0.1, 1).unwrap();
        let xml = c.mpd();
        assert!(xml.contains("urn:mpeg:dash:schema:mpd:2011"), "{xml}");
        let m = Manifest::parse(&xml).unwrap();
        assert_eq!(m.chunks, 597);
        assert_eq!(m.chunk, Duration::from_secs(1));
        assert_eq!(m.bandwidths[0], 1_200_000);
        assert_eq!(m.bandwidths[7], 5_600_000);
        let path = m.chunk_path("/bbb/", 42, 2);
        assert_eq!(path, c.chunk_path(42, 2));
        assert_eq!(c.parse_chunk_path(&path), Some((42, 2)));
        assert_eq!(c.parse_chunk_path("/bbb/rep3/597.ts"), None);
        assert_eq!(c.parse_chunk_path("/bbb/rep9/1.ts"), None);
        assert!(Manifest::parse("<MPD/>").is_err());
        let huge = xml.replace("duration=\"1000\"", "duration=\"1e30\"");
        assert_ne!(huge, xml);
        assert!(Manifest::parse(&huge).is_err());
        let far = xml.replace("startNumber=\"0\"", "startNumber=\"18446744073709551615\"");
        assert_ne!(far, xml);
        assert!(Manifest::parse(&far).is_err());
        assert!(Manifest::parse("not xml").is_err());
    }

    #[test]
    fn bad_ladders_are_refused() {
        let r = |b| Representation {
            id: "x".into(),
            bandwidth_bps: b,
            chunk_bps: b,
            width: 1,
            height: 1,
        };
        let one = Duration::from_secs(1);
        assert!(Content::synthetic("v", vec![], 10, one, 0.1, 1).is_err());
        assert!(Content::synthetic("v", vec![r(2), r(1)], 10, one, 0.1, 1).is_err());
        assert!(Content::synthetic("v", vec![r(1)], 0, one, 0.1, 1).is_err());
        assert!(Content::synthetic("v", vec![r(1)], 10, one, 2.0, 1).is_err());
        assert!(Content::synthetic("v", vec![r(1)], 10, one, 0.0, 1).is_ok());
        let odd = Duration::from_micros(1_000_500);
        assert!(Content::synthetic("v", vec![r(1)], 10, odd, 0.0, 1).is_err());
    }

    #[test]
    fn chunk_bytes_are_checkable() {
        let c = Content::dashing(3, Duration::from_secs(1), 0.0, 1).unwrap();
        let mut b = vec![0; 100];
        c.fill(2, 5, 1000, &mut b);
        assert!(Content::check(2, 5, 1000, &b));
        assert!(!Content::check(2, 4, 1000, &b));
        assert!(!Content::check(2, 5, 1001, &b));
        // Blocks agree with the byte-by-byte definition across periods.
        let mut long = vec![0; 1000];
        c.fill(1, 3, 250, &mut long);
        for (i, &x) in long.iter().enumerate() {
            assert_eq!(x, pattern_byte(1, 3, 250 + i as u64), "byte {i}");
        }
        long[999] ^= 1;
        assert!(!Content::check(1, 3, 250, &long));
    }
}
