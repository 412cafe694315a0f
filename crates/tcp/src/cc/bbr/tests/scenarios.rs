//! BBR's behaviour measured in the packet-level model ([`super::model`]).

use super::model::{App, Obs, Path, Sim};
use super::*;

/// 10 Mb/s, 40 ms, a 2-BDP buffer: Startup finds the bottleneck rate
/// and leaves within a few rounds of the plateau; Drain empties the
/// queue it built.
#[test]
fn startup_finds_bandwidth_then_drain_empties_the_queue() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40));
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(3.0));
    let r = path.rate as f64;
    let drain = sim.entries(BbrState::Drain)[0];
    let down = sim.entries(BbrState::ProbeBwDown)[0];
    // The round in which the bandwidth estimate reached its plateau.
    let plateau = sim
        .obs
        .iter()
        .find(|o| o.max_bw as f64 >= 0.9 * r)
        .expect("max_bw reaches the link rate");
    eprintln!(
        "startup: plateau at round {} ({:?}), exit at round {} ({:?}), max_bw {:.3} of R; \
         drain: {:?} -> {:?}, backlog {} -> {} bytes (BDP {})",
        plateau.round,
        plateau.t,
        drain.round,
        drain.t,
        drain.max_bw as f64 / r,
        drain.t,
        down.t,
        drain.backlog,
        down.backlog,
        path.bdp(),
    );
    //= §4.3.1.2: three rounds without 25 % growth, plus the round in
    //= which the estimate stops growing.
    assert!(drain.round - plateau.round <= 4);
    assert!((drain.max_bw as f64 / r - 1.0).abs() <= 0.10);
    //= §4.3.2: Drain ends when inflight <= BBRInflight(1.0), within a
    //= few round trips, with the queue (nearly) empty.
    assert!(down.t - drain.t <= 3 * path.min_rtt());
    assert!(down.backlog <= path.bdp() / 4, "backlog {}", down.backlog);
    // And it stays small: inflight <= BDP + quantization slack a few
    // rounds later.
    let later = sim
        .obs
        .iter()
        .find(|o| o.t >= down.t + 2 * path.rtt)
        .expect("later ACKs");
    assert!(later.inflight <= path.bdp() + 8 * SMSS, "{later:?}");
}

/// Greedy, no random loss: at least 90 % of the link in steady state,
/// with little queueing delay while cruising.
#[test]
fn steady_state_goodput_and_queueing_delay() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40));
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(10.0));
    let goodput = sim.goodput_over(secs(30.0)) / path.rate as f64;
    let cruise: Vec<Duration> = sim
        .obs
        .iter()
        .filter(|o| o.t >= secs(10.0) && o.state == BbrState::ProbeBwCruise)
        .filter_map(|o| o.rtt)
        .collect();
    let avg_rtt = cruise.iter().sum::<Duration>() / cruise.len() as u32;
    let ratio = avg_rtt.as_secs_f64() / path.min_rtt().as_secs_f64();
    let max_queue = sim
        .obs
        .iter()
        .filter(|o| o.t >= secs(10.0) && o.state == BbrState::ProbeBwCruise)
        .map(|o| o.backlog)
        .max()
        .unwrap_or(0);
    let avg_all: f64 = sim
        .obs
        .iter()
        .filter(|o| o.t >= secs(10.0))
        .filter_map(|o| o.rtt)
        .map(|r| r.as_secs_f64())
        .sum::<f64>()
        / sim
            .obs
            .iter()
            .filter(|o| o.t >= secs(10.0) && o.rtt.is_some())
            .count() as f64;
    eprintln!(
        "steady state, no loss: goodput {:.3} of R, avg RTT in CRUISE {:.3} x min RTT \
         (bottleneck queue at most {} bytes), overall {:.3} x",
        goodput,
        ratio,
        max_queue,
        avg_all / path.min_rtt().as_secs_f64()
    );
    assert!(goodput >= 0.90, "goodput {goodput}");
    assert!(ratio <= 1.25, "avg RTT in CRUISE {ratio} x min RTT");
    assert!(max_queue <= path.bdp() / 4, "queue {max_queue} in CRUISE");
}

/// Random loss below BBRLossThresh (2 %): at least 90 % of the link at
/// 1 % and at 0.5 % loss (the figures are printed; docs/HOLLYWOOD.md
/// quotes them). BBRv3 as drafted falls short here, for two reasons
/// (`lower_bounds_threshold_deviation_matters_at_low_random_loss` prints
/// the drafted figure at 0.5 % beside ours):
/// - on a 50-packet BDP, 1 % random loss exceeds 2 % over some one-RTT
///   windows, so `IsInflightTooHigh` fires during REFILL/UP and
///   `BBRHandleInflightTooHigh` cuts `inflight_longterm` (§4.5.10.2),
///   which caps cwnd at 85 % of it in CRUISE;
/// - every round with a loss outside probing sets `bw_shortterm =
///   max(bw_latest, 0.7 * bw_shortterm)` (§4.5.10.3) where `bw_latest` is
///   the delivered rate, itself 1 % below the pacing rate
///   (`BBRPacingMarginPercent`) and short of the lost packets: the rate
///   decays by 1-2 % per lossy round until the next REFILL resets it,
///   about 50 rounds later.
///
/// Our two deviations (short-term bounds react only to rounds losing more
/// than 2 %; no loss response without a queue) remove both.
#[test]
fn steady_state_goodput_with_random_loss() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.01);
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(10.0));
    let one = sim.goodput_over(secs(30.0)) / path.rate as f64;
    let path = path.with_loss(0.005);
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(10.0));
    let half = sim.goodput_over(secs(30.0)) / path.rate as f64;
    eprintln!("steady state: goodput {one:.3} of R at 1 % loss, {half:.3} at 0.5 %");
    assert!(one >= 0.90, "goodput {one} at 1 % loss");
    assert!(half >= 0.90, "goodput {half} at 0.5 % loss");
}

/// Random loss well above BBRLossThresh on a path that never queues
/// (5 %, the lossy wireless paths of [RTP-QUIC]'s experiments): as drafted
/// every probe cuts `inflight_longterm` and every round `bw_shortterm`,
/// and the rate decays; with the queue gate (default) the losses are
/// taken as what they are, not congestion.
#[test]
fn queue_gate_keeps_the_rate_at_five_percent_random_loss() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.05);
    let run = |cc: Bbr| {
        let mut sim = Sim::new(path, App::Greedy);
        sim.cc = cc;
        sim.run_until(secs(10.0));
        sim.goodput_over(secs(30.0)) / path.rate as f64
    };
    let gated = run(Bbr::new(SMSS as usize, IW));
    let draft = run(Bbr::new(SMSS as usize, IW)
        .with_lower_bounds_loss_thresh(0.0)
        .with_queue_gate(false));
    eprintln!(
        "5 % random loss: goodput {draft:.3} of R as drafted, {gated:.3} with the queue gate"
    );
    assert!(gated >= 0.85, "gated {gated}");
    assert!(draft < gated / 2.0, "draft {draft}");
}

/// The draft's own reaction (any loss in a round shrinks the short-term
/// bounds) against the default (only rounds above 2 % loss): the
/// deviation is what keeps BBR near the link rate at 0.5 % random loss.
#[test]
fn lower_bounds_threshold_deviation_matters_at_low_random_loss() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.005);
    let mut strict = Sim::new(path, App::Greedy);
    strict.cc = Bbr::new(SMSS as usize, IW)
        .with_lower_bounds_loss_thresh(0.0)
        .with_queue_gate(false);
    strict.run_until(secs(10.0));
    let strict = strict.goodput_over(secs(30.0)) / path.rate as f64;
    let mut ours = Sim::new(path, App::Greedy);
    ours.run_until(secs(10.0));
    let ours = ours.goodput_over(secs(30.0)) / path.rate as f64;
    eprintln!("0.5 % loss: goodput {strict:.3} of R as drafted, {ours:.3} with the threshold");
    assert!(ours > strict + 0.02, "{ours} vs {strict}");
}

/// Without a lower RTT sample, ProbeRTT comes every ProbeRTTInterval
/// (5 s, plus the time ProbeRTT itself takes) and cuts cwnd to about
/// half the BDP.
#[test]
fn probe_rtt_every_five_seconds() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40));
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(21.0));
    let entries: Vec<Duration> = sim
        .entries(BbrState::ProbeRtt)
        .iter()
        .map(|c| c.t)
        .collect();
    eprintln!("ProbeRTT entries: {entries:?}");
    assert!(entries.len() >= 3, "{entries:?}");
    for w in entries.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= secs(5.0) && gap <= secs(5.6), "gap {gap:?}");
    }
    // cwnd in ProbeRTT: max(BDP/2, 4*SMSS) (§4.6.4.5), well below the
    // cwnd before it.
    for &t in &entries {
        let before = sim.obs.iter().rev().find(|o| o.t < t).expect("ACKs before");
        let min_in = sim
            .obs
            .iter()
            .filter(|o| o.t >= t && o.state == BbrState::ProbeRtt)
            .map(|o| o.cwnd)
            .min()
            .expect("ACKs in ProbeRTT");
        assert!(
            min_in <= path.bdp() / 2 + 2 * SMSS,
            "cwnd {min_in} in ProbeRTT"
        );
        assert!(min_in < before.cwnd / 2, "{min_in} vs {}", before.cwnd);
    }
}

/// An application sending at 20 % of the link: max_bw never drops
/// below its own rate (app-limited samples cannot lower it, §4.5.4) and
/// cwnd stays bounded by the model. Measured: the sender stays in
/// Startup (every sample is app-limited, so no plateau is ever seen);
/// each ProbeRTT holds back the application for about 200 ms and the
/// backlog then leaves at the Startup pacing rate, which measures more
/// of the link (max_bw rises to about 0.57 R) and lets cwnd follow
/// (`2 * max_bw * min_rtt` plus aggregation, 1.4 BDP of the path), where
/// it stays.
#[test]
fn app_limited_sender_keeps_its_rate_and_a_bounded_cwnd() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40));
    let app = path.rate / 5;
    let mut sim = Sim::new(path, App::Rate(app));
    sim.run_until(secs(30.0));
    let after: Vec<&Obs> = sim.obs.iter().filter(|o| o.t >= secs(2.0)).collect();
    let min_bw = after.iter().map(|o| o.max_bw).min().expect("ACKs");
    let max_cwnd = |from: f64, to: f64| {
        after
            .iter()
            .filter(|o| o.t >= secs(from) && o.t < secs(to))
            .map(|o| o.cwnd)
            .max()
            .expect("ACKs")
    };
    let (first, second) = (max_cwnd(2.0, 16.0), max_cwnd(16.0, 30.0));
    eprintln!(
        "app-limited 20 %: min max_bw {:.3} of the app rate, final max_bw {:.3} R, \
         max cwnd {first} then {second} (path BDP {}), states {:?}",
        min_bw as f64 / app as f64,
        sim.cc.max_bw() as f64 / path.rate as f64,
        path.bdp(),
        sim.changes.iter().map(|c| c.to).collect::<Vec<_>>()
    );
    assert!(min_bw as f64 >= 0.95 * app as f64, "max_bw {min_bw}");
    assert!(first <= 2 * path.bdp(), "cwnd {first}");
    assert!(second <= first, "cwnd still growing: {first} then {second}");
}

/// Pacing of a 2 Mb/s live-video-like sender on a 10 Mb/s, 100 ms path
/// with 2 % random loss, from the start and after a greedy start (a
/// player filling its buffer): how often is the pacing rate below the
/// sending rate, i.e. does BBR build a queue in the sender?
fn live_video(app: App) -> (f64, f64, f64, Duration) {
    live_video_with(app, Bbr::new(SMSS as usize, IW))
}

fn live_video_with(app: App, cc: Bbr) -> (f64, f64, f64, Duration) {
    let path = Path::new(mbps(10.0), Duration::from_millis(100)).with_loss(0.02);
    let rate = mbps(2.0);
    let mut sim = Sim::new(path, app);
    sim.cc = cc;
    sim.run_until(secs(60.0));
    let from = match app {
        App::GreedyThenRate(t, _) => t + secs(2.0),
        _ => secs(2.0),
    };
    let obs: Vec<&Obs> = sim.obs.iter().filter(|o| o.t >= from).collect();
    let below = obs.iter().filter(|o| o.pacing < rate).count() as f64 / obs.len() as f64;
    let min_pacing = obs.iter().map(|o| o.pacing).min().unwrap_or(0) as f64 / rate as f64;
    let mean_pacing =
        obs.iter().map(|o| o.pacing as f64).sum::<f64>() / obs.len() as f64 / rate as f64;
    let max_backlog = obs.iter().map(|o| o.app_backlog).max().unwrap_or(0);
    let delay = Duration::from_nanos(max_backlog * 1_000_000_000 / rate);
    eprintln!(
        "live video {app:?}: pacing < send rate on {:.1} % of ACKs, min {:.2} x, mean {:.2} x \
         the send rate, max sender queue {} bytes ({:?}); states {:?}",
        100.0 * below,
        min_pacing,
        mean_pacing,
        max_backlog,
        delay,
        sim.changes
            .iter()
            .map(|c| c.to.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    (below, min_pacing, mean_pacing, delay)
}

/// From the start, the 2 Mb/s sender is application-limited on every
/// sample, so BBR never sees a full pipe and stays in Startup (as Linux
/// BBR does), pacing at 2.77 x its estimate: the pacing rate is always
/// above the sending rate (measured: at least 4.8 x). Its RTT samples
/// stay at the minimum, so it never enters ProbeRTT (the draft would,
/// every 5 s, capping cwnd at half the BDP estimate for 200 ms and a
/// round: measured before that deviation, up to 26 kB, 104 ms, queued
/// in the sender): nothing ever waits in the sender.
#[test]
fn live_video_at_two_percent_loss_paces_above_its_rate() {
    let (below, min_pacing, _, delay) = live_video(App::Rate(mbps(2.0)));
    assert_eq!(below, 0.0);
    assert!(min_pacing >= 1.0);
    assert_eq!(delay, Duration::ZERO);
    let mut sim = Sim::new(
        Path::new(mbps(10.0), Duration::from_millis(100)).with_loss(0.02),
        App::Rate(mbps(2.0)),
    );
    sim.run_until(secs(30.0));
    assert!(sim.entries(BbrState::ProbeRtt).is_empty());
}

/// A greedy flow builds its own queue, so the samples rise above the
/// minimum and ProbeRTT still comes every ~5 s.
#[test]
fn a_greedy_flow_still_probes_rtt() {
    let mut sim = Sim::new(
        Path::new(mbps(10.0), Duration::from_millis(40)).with_loss(0.01),
        App::Greedy,
    );
    sim.run_until(secs(30.0));
    let n = sim.entries(BbrState::ProbeRtt).len();
    assert!((5..=6).contains(&n), "{n} ProbeRTT entries in 30 s");
}

/// The same sender after 3 s of greedy sending (a player filling its
/// buffer), so BBR is in ProbeBW: here BBRv3 as specified does not keep
/// up. Measured over 5-60 s without the queue gate: the pacing rate is
/// below the 2 Mb/s sending rate on 41 % of ACKs (down to 0.38 x) and
/// the sender queue grows without bound (2.1 MB, 8.6 s, at 60 s).
/// Both loss responses cause it: 2 % random loss crosses
/// `BBRLossThresh` over many one-RTT windows, so `inflight_longterm` is
/// cut in every probe and caps cwnd; and each lossy round in CRUISE/DOWN
/// cuts `bw_shortterm` to the delivered rate, which is below the
/// sending rate by the loss and the pacing margin. The path never
/// queues (every RTT sample at the minimum), so with the queue gate
/// (default) neither response fires: the pacing rate never falls below
/// the sending rate and nothing waits in the sender.
#[test]
fn live_video_after_greedy_start_at_two_percent_loss() {
    let app = App::GreedyThenRate(secs(3.0), mbps(2.0));
    let (below, min_pacing, _, delay) = live_video(app);
    assert_eq!(below, 0.0);
    assert!(min_pacing >= 1.0);
    assert_eq!(delay, Duration::ZERO);
    let draft = Bbr::new(SMSS as usize, IW)
        .with_lower_bounds_loss_thresh(0.0)
        .with_queue_gate(false);
    let (below, _, _, delay) = live_video_with(app, draft);
    assert!(below > 0.3, "as drafted: pacing below the rate on {below}");
    assert!(
        delay > secs(1.0),
        "as drafted: {delay:?} queued in the sender"
    );
}

/// A shallow buffer (a quarter of the BDP): Startup overflows it and
/// leaves on loss (§4.3.1.3: recovery for a round, > 2 % lost, 6 lossy
/// ACKs), setting `inflight_longterm`; then BBR keeps the link busy
/// with few losses.
#[test]
fn shallow_buffer() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40)).with_queue(12_500);
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(5.0));
    let drain = *sim.entries(BbrState::Drain)[0];
    let (sent0, lost0) = (sim.pkts.len(), sim.lost);
    let goodput = sim.goodput_over(secs(20.0)) / path.rate as f64;
    let loss = (sim.lost - lost0) as f64 / ((sim.pkts.len() - sent0) as u64 * SMSS) as f64;
    eprintln!(
        "shallow buffer: Startup exit at round {} ({:?}), inflight_longterm {:?}, \
         goodput {goodput:.3} of R, loss rate {:.2} % in steady state",
        drain.round,
        drain.t,
        sim.cc.inflight_longterm(),
        100.0 * loss
    );
    assert!(drain.t <= secs(1.0));
    assert!(drain.inflight_longterm.is_some(), "not a loss exit");
    assert!(goodput >= 0.85, "goodput {goodput}");
    assert!(loss <= 0.02, "loss {loss}");
}

/// A fixed scenario's state sequence, as a literal (a snapshot of what
/// the controller did; after s2n-quic's event snapshots).
#[test]
fn transition_trace() {
    let path = Path::new(mbps(10.0), Duration::from_millis(40));
    let mut sim = Sim::new(path, App::Greedy);
    sim.run_until(secs(7.0));
    let trace: Vec<(u128, BbrState)> = sim
        .changes
        .iter()
        .map(|c| (c.t.as_millis(), c.to))
        .collect();
    use BbrState::*;
    assert_eq!(
        trace,
        [
            (472, Drain),
            (541, ProbeBwDown),
            (541, ProbeBwCruise),
            (2644, ProbeBwRefill),
            (2685, ProbeBwUp),
            (2841, ProbeBwDown),
            (3173, ProbeBwCruise),
            (5040, ProbeRtt),
            (5265, ProbeBwDown),
            (5265, ProbeBwCruise),
        ]
    );
}
