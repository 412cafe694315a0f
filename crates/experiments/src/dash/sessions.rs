//! DASH sessions ([DASHing-2018], `hollywood_media::dash`) over several
//! transports and seeds at once, in parallel, with the [DASHing-2018] statistics:
//! per transport the mean, the trimmed mean (highest and lowest run
//! dropped, as the paper reports) and the 20th–80th percentiles of each
//! metric.

use crate::stats::{percentile, trimmed_mean};
use hollywood_media::dash::abr::AbrKind;
use hollywood_media::dash::client::{ClientConfig, Lateness};
use hollywood_media::dash::content::Content;
use hollywood_media::dash::{DashRun, DashScenario, Phase};
use hollywood_media::transport::GenericTransport;
use hollywood_media::{QuicKind, Transport, TransportKind};
use hollywood_tcp::CcAlgorithm;
use rayon::prelude::*;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// A compared transport: the transport and the client that goes with
/// it in [DASHing-2018].
#[derive(Debug, Clone, Serialize)]
pub struct DashTransport {
    /// Name as printed.
    pub name: &'static str,
    /// Deployment.
    #[serde(skip)]
    pub deployment: GenericTransport,
    /// The client's rules.
    pub client: ClientConfig,
}

impl DashTransport {
    /// The names [`DashTransport::parse`] takes.
    pub const NAMES: [&'static str; 5] = ["tcp", "hollywood", "quic-ss", "quic-gop", "quic-pps"];

    /// `tcp` (standard TCP, Algorithm 1), `hollywood` (TCP Hollywood,
    /// Algorithm 2 with Rx_T = 0.9), `quic-ss` (one QUIC stream, in
    /// order: Algorithm 1), `quic-gop` (a stream per response, as HTTP/3)
    /// or `quic-pps` (a stream per message): Algorithm 2, whose client
    /// takes a response's messages in any order
    /// ([`hollywood_media::dash::dash_quic`]).
    pub fn parse(s: &str) -> Result<DashTransport, String> {
        let unknown = || {
            format!(
                "unknown DASH transport {s:?}: use {}",
                Self::NAMES.join(", ")
            )
        };
        let kind = TransportKind::parse(s).map_err(|_| unknown())?;
        let (deployment, client) = match kind {
            TransportKind::Tcp(Transport::Tcp) => (
                GenericTransport::Tcp(Transport::Tcp),
                ClientConfig::algorithm1(),
            ),
            TransportKind::Tcp(Transport::Hollywood) => (
                GenericTransport::Tcp(Transport::Hollywood),
                ClientConfig::algorithm2(),
            ),
            _ => {
                let g = hollywood_media::dash::dash_quic(s).ok_or_else(unknown)?;
                let client = if kind == TransportKind::Quic(QuicKind::SingleStream) {
                    ClientConfig::algorithm1()
                } else {
                    ClientConfig::algorithm2()
                };
                (g, client)
            }
        };
        let name = kind.name();
        Ok(DashTransport {
            name,
            deployment,
            client,
        })
    }
}

/// Everything but the transport and the seed.
#[derive(Debug, Clone)]
pub struct Session {
    /// The video.
    pub content: Arc<Content>,
    /// The path.
    pub phases: Vec<Phase>,
    /// Bottleneck queue (bytes); `None`: one BDP, at least 64 KiB.
    pub queue_bytes: Option<usize>,
    /// Congestion control at both ends.
    pub cc: CcAlgorithm,
    /// Playout buffer B (s).
    pub buffer_s: f64,
    /// Rate adaptation.
    pub abr: AbrKind,
    /// Overrides Algorithm 2's Rx_T.
    pub rx_threshold: Option<f64>,
    /// When a message is late.
    pub lateness: Lateness,
}

impl Session {
    /// The scenario for one transport and seed.
    pub fn scenario(&self, t: &DashTransport, seed: u64) -> DashScenario {
        let mut client = t.client;
        client.buffer_s = self.buffer_s;
        client.abr = self.abr;
        client.lateness = self.lateness;
        // Real video: nothing to check byte by byte; keep what was played
        // for decoding.
        client.verify_pattern = self.content.is_synthetic();
        client.keep_bytes = !self.content.is_synthetic();
        if let (Some(rx), true) = (self.rx_threshold, client.rx_threshold < 1.0) {
            client.rx_threshold = rx;
        }
        DashScenario {
            transport: t.deployment.clone(),
            client,
            content: self.content.clone(),
            phases: self.phases.clone(),
            queue_bytes: self.queue_bytes,
            cc: self.cc,
            seed,
            pcap: None,
        }
    }
}

/// One metric over seeds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Agg {
    /// Mean.
    pub mean: f64,
    /// Mean without the highest and lowest run (the plain mean under
    /// three runs).
    pub trimmed: f64,
    /// 20th percentile.
    pub p20: f64,
    /// 80th percentile.
    pub p80: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Agg {
    /// Of one value per run.
    pub fn of(v: &[f64]) -> Agg {
        if v.is_empty() {
            return Agg::default();
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        Agg {
            mean,
            trimmed: trimmed_mean(&s, 1).unwrap_or(mean),
            p20: percentile(&s, 0.2).unwrap_or(mean),
            p80: percentile(&s, 0.8).unwrap_or(mean),
            min: s[0],
            max: s[s.len() - 1],
        }
    }
}

/// One transport's runs.
#[derive(Debug, Clone, Serialize)]
pub struct TransportSummary {
    /// Transport.
    pub transport: &'static str,
    /// Runs that finished.
    pub runs: usize,
    /// Runs that failed, with why.
    pub errors: Vec<String>,
    /// Start-up delay (s).
    pub startup_s: Agg,
    /// Total stall (s).
    pub total_stall_s: Agg,
    /// Stall events.
    pub stalls: Agg,
    /// Mean chunk rate (kb/s).
    pub avg_bitrate_kbps: Agg,
    /// Downward switches, % of chunks.
    pub down_switch_pct: Agg,
    /// Messages discarded as late.
    pub messages_discarded: Agg,
    /// Runs that discarded at least one message, %.
    pub runs_discarding_pct: f64,
    /// Segments the server retransmitted.
    pub retransmitted_segments: Agg,
}

/// Summarise the runs of one transport (errors listed, not averaged).
pub fn summarise(transport: &'static str, runs: &[Result<DashRun, String>]) -> TransportSummary {
    let ok: Vec<&DashRun> = runs
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .filter(|r| r.client.error.is_none())
        .collect();
    let mut errors: Vec<String> = runs
        .iter()
        .filter_map(|r| r.as_ref().err().cloned())
        .collect();
    errors.extend(
        runs.iter()
            .filter_map(|r| r.as_ref().ok()?.client.error.clone()),
    );
    let m = |f: &dyn Fn(&DashRun) -> f64| Agg::of(&ok.iter().map(|r| f(r)).collect::<Vec<_>>());
    let discarding = ok
        .iter()
        .filter(|r| r.client.messages_discarded > 0)
        .count();
    TransportSummary {
        transport,
        runs: ok.len(),
        errors,
        startup_s: m(&|r| r.client.startup_s.unwrap_or(f64::NAN)),
        total_stall_s: m(&|r| r.client.total_stall_s),
        stalls: m(&|r| r.client.stalls as f64),
        avg_bitrate_kbps: m(&|r| r.client.avg_bitrate_kbps),
        down_switch_pct: m(&|r| r.client.down_switch_pct),
        messages_discarded: m(&|r| r.client.messages_discarded as f64),
        runs_discarding_pct: if ok.is_empty() {
            0.0
        } else {
            100.0 * discarding as f64 / ok.len() as f64
        },
        retransmitted_segments: m(&|r| r.retransmitted_segments as f64),
    }
}

/// Run `session` over every transport × seed, in parallel; results in
/// transport-major order. `tick` is called after each run (progress).
/// With real video only the first seed's runs keep the received bytes.
pub fn run_all(
    session: &Session,
    transports: &[DashTransport],
    seeds: &[u64],
    tick: &(dyn Fn() + Sync),
) -> Vec<Vec<Result<DashRun, String>>> {
    let jobs: Vec<(usize, u64)> = (0..transports.len())
        .flat_map(|t| seeds.iter().map(move |&s| (t, s)))
        .collect();
    let mut out: Vec<(usize, Result<DashRun, String>)> = jobs
        .par_iter()
        .map(|&(t, s)| {
            let mut sc = session.scenario(&transports[t], s);
            sc.client.keep_bytes &= Some(&s) == seeds.first();
            let r = sc.run();
            tick();
            (t, r)
        })
        .collect();
    let mut by: Vec<Vec<Result<DashRun, String>>> = transports.iter().map(|_| Vec::new()).collect();
    for (t, r) in out.drain(..) {
        by[t].push(r);
    }
    by
}

/// The [DASHing-2018] static path: `rate`, `rtt`, `loss` for the whole session.
pub fn static_path(rate_bps: u64, rtt: Duration, loss: f64) -> Vec<Phase> {
    vec![Phase {
        at: Duration::ZERO,
        rate_bps,
        rtt,
        loss,
    }]
}

/// Run every chapter 6 scenario in parallel, results in order. `tick` is
/// called after each run (progress).
pub fn run_ch6(
    scenarios: &[hollywood_media::dash::progressive::Ch6Scenario],
    tick: &(dyn Fn() + Sync),
) -> Vec<Result<hollywood_media::dash::progressive::Ch6Run, String>> {
    scenarios
        .par_iter()
        .map(|s| {
            let r = s.run();
            tick();
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_trim_the_extremes_and_list_failures() {
        let a = Agg::of(&[1.0, 2.0, 3.0, 100.0]);
        assert_eq!(a.trimmed, 2.5);
        assert_eq!(a.mean, 26.5);
        assert_eq!((a.min, a.max), (1.0, 100.0));
        let s = summarise("tcp", &[Err("boom".into())]);
        assert_eq!(s.runs, 0);
        assert_eq!(s.errors, vec!["boom".to_string()]);
        assert!(DashTransport::parse("quic").is_err());
        assert!(DashTransport::parse("quic-dgram").is_err());
        assert_eq!(DashTransport::parse("quic-gop").unwrap().name, "quic-gop");
    }

    #[test]
    fn sessions_run_for_every_transport_and_seed() {
        let session = Session {
            content: Arc::new(Content::dashing(20, Duration::from_secs(1), 0.1, 1).unwrap()),
            phases: static_path(5_000_000, Duration::from_millis(100), 0.01),
            queue_bytes: None,
            cc: CcAlgorithm::Cubic,
            buffer_s: 16.0,
            abr: AbrKind::Bola,
            rx_threshold: None,
            lateness: Lateness::Position,
        };
        let ts = [
            DashTransport::parse("tcp").unwrap(),
            DashTransport::parse("hollywood").unwrap(),
        ];
        let runs = run_all(&session, &ts, &[1, 2, 3], &|| {});
        assert_eq!(runs.len(), 2);
        for (t, r) in ts.iter().zip(&runs) {
            let s = summarise(t.name, r);
            assert_eq!(s.runs, 3, "{:?}", s.errors);
            assert!(s.startup_s.mean > 0.0);
        }
        // Seeds differ, the same seed repeats.
        let again = run_all(&session, &ts[1..], &[1], &|| {});
        let a = &runs[1][0].as_ref().unwrap().client;
        let b = &again[0][0].as_ref().unwrap().client;
        assert_eq!(a, b);
        let other = &runs[1][1].as_ref().unwrap().client;
        assert_ne!(a.chunks, other.chunks);
    }
}
