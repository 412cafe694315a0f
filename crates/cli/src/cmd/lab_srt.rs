//! `hollywood lab messages --srt FILTER`: SRT beside the Hollywood runs of
//! `lab messages`, on the same path, in the same command (issue 34: "SRT
//! with its FEC filter at the same overhead side by side in one run").
//!
//! Each `--srt` value is one SRT run: `srt-live-transmit` at both ends
//! ([`hollywood_lab::compare`]'s `srt` contender) fed the same stream
//! (the messages' size and interval, self-checking chunks), over a fresh
//! lab with the same link (rate, RTT, loss model on a→b). The value is
//! SRT's packet filter (`fec,cols:4,rows:1,arq:never`) or `none` (SRT's
//! ARQ alone). On time is measured at the receiver: a chunk counts when
//! srt-live-transmit hands it to the receiving UDP socket within the
//! deadline of the moment it was given to the sending one.

use clap::Args;
use hollywood_lab::compare::{self, CompareSpec, Contender, Row};
use hollywood_sim::LossModel;
use std::time::Duration;

/// SRT runs beside `lab messages`.
#[derive(Args, Debug, Default)]
pub struct SrtArgs {
    /// Also run SRT with this packet filter (repeatable): e.g.
    /// `fec,cols:4,rows:1,arq:never` (one XOR row packet per 4 media
    /// packets: 25 %), or `none` (no filter: SRT's retransmission).
    #[arg(long = "srt", value_name = "FILTER")]
    pub filters: Vec<String>,
    /// SRT's latency; default: the comparison's rule, deadline − RTT/2 −
    /// 15 ms, the largest latency whose delivery point falls within the
    /// deadline (`hollywood lab compare`, docs/LAB.md).
    #[arg(long, value_parser = crate::units::parse_duration)]
    pub srt_latency: Option<Duration>,
}

/// The stream and the path of the `lab messages` run.
pub struct Stream {
    pub rate_bps: u64,
    pub rtt: Duration,
    pub loss: LossModel,
    pub messages: u32,
    pub size: usize,
    pub interval: Duration,
    pub deadline: Duration,
    pub seed: u64,
}

/// The compare spec of one SRT run with `filter` (`None`: no filter).
pub fn spec(
    s: &Stream,
    filter: Option<String>,
    latency: Option<Duration>,
    lab: &str,
) -> CompareSpec {
    let (loss, loss_model) = match s.loss {
        LossModel::Bernoulli(p) => (p, None),
        m => (0.0, Some(m)),
    };
    CompareSpec {
        rate_bps: s.rate_bps,
        rtt: s.rtt,
        loss,
        loss_model,
        messages: s.messages,
        size: s.size,
        interval: s.interval,
        deadline: s.deadline,
        srt_latency: latency,
        seed: s.seed,
        contenders: vec![Contender::Srt],
        srt_filter: filter,
        ..CompareSpec::live_video(lab)
    }
}

/// Run SRT once per `--srt` value, each in a lab `<lab>-srt<i>-0`.
pub fn run(a: &SrtArgs, s: &Stream, lab: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, f) in a.filters.iter().enumerate() {
        let filter = (f != "none").then(|| f.clone());
        let spec = spec(s, filter, a.srt_latency, &format!("{lab}-srt{i}"));
        let r = compare::run(&spec, |p| eprintln!("{p} [{f}]"))
            .map_err(|e| format!("srt [{f}]: {e}"))?;
        rows.extend(r);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(loss: LossModel) -> Stream {
        Stream {
            rate_bps: 8_000_000,
            rtt: Duration::from_millis(300),
            loss,
            messages: 100,
            size: 1316,
            interval: Duration::from_millis(5),
            deadline: Duration::from_millis(200),
            seed: 3,
        }
    }

    #[test]
    fn the_srt_run_gets_the_stream_path_and_filter() {
        let s = spec(
            &stream(LossModel::Bernoulli(0.02)),
            Some("fec,cols:4,rows:1,arq:never".into()),
            None,
            "x",
        );
        assert_eq!(s.loss, 0.02);
        assert!(s.loss_model.is_none());
        assert_eq!(s.contenders, vec![Contender::Srt]);
        assert_eq!(s.srt_filter.as_deref(), Some("fec,cols:4,rows:1,arq:never"));
        // 200 − 150 − 15 ms: SRT delivers within the deadline.
        assert_eq!(s.srt_latency(), Duration::from_millis(35));
        let g = LossModel::GilbertElliott(hollywood_sim::GilbertElliott::gilbert(0.0068, 0.3333));
        let s = spec(&stream(g), None, Some(Duration::from_millis(200)), "x");
        assert_eq!(s.loss_model, Some(g));
        assert_eq!(s.srt_latency(), Duration::from_millis(200));
    }
}
