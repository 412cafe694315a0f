//! Calibration of the engine against Linux on real packets (issue 5 item
//! 6): the thesis's VoIP scenario (§5.1.2) over the emulator, once with
//! Linux TCP at both ends and once with our engine at both ends in
//! standard mode, side by side with the simulator's figure for the same
//! scenario.
//!
//! - **Path** (emulator in e, [`crate::interop::run_pair`]): 8 Mb/s a→b
//!   and 1 Mb/s b→a (ADSL), RTT/2 each way, drop-tail queues of 64 × 1500
//!   bytes (the simulator's `VoipScenario::adsl`), Bernoulli loss on a→b
//!   only. The same emulator seed in both runs, so the loss draws are the
//!   same sequence; which packets they hit differs as soon as the two
//!   senders' packet sequences differ (a retransmission, a probe).
//! - **Call**: one 160-byte message every 20 ms, no lifetime.
//! - **Kernel**: [`hollywood_io::kernel::KernelStream`] over Linux
//!   sockets in a and b (`TCP_NODELAY`), congestion control set per socket
//!   with `TCP_CONGESTION` ([`CalibrateSpec::kernel_cc`], default `cubic`,
//!   the engine's algorithm; the lab machine's system default is BBR).
//! - **Engine**: our engine over TUN at both ends with
//!   `Transport::Tcp`'s configuration (`Config::default()` with Nagle off,
//!   as the simulator's TCP and the kernel's `TCP_NODELAY`; no Hollywood
//!   switch).
//! - **Simulator**: `VoipScenario` with `TransportKind::Tcp(Tcp)` and
//!   the same parameters.
//!
//! Each run's per-message send and delivery times go through the
//! simulator's own playout schedule ([`hollywood_media::voip::schedule`]),
//! so "late" means exactly what it means in the thesis figures.

use crate::interop::{self, End, PairRun, PairSpec};
use crate::workload;
use hollywood_media::voip::{self, VoipRecord, VoipRun, VoipScenario, VoipSummary};
use hollywood_media::Transport;
use hollywood_media::TransportKind;
use hollywood_sim::{LinkConfig, LossModel};
use hollywood_tcp::{CcAlgorithm, Config, Instant};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

pub use crate::interop::{Error, Result};

/// The two VoIP scenarios of thesis §5.1.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// 70 ms RTT, 30 ms playout delay.
    Intercontinental,
    /// 15 ms RTT, 110 ms playout delay.
    Intracontinental,
}

impl Scenario {
    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Intercontinental => "intercontinental",
            Scenario::Intracontinental => "intracontinental",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Scenario> {
        match s {
            "intercontinental" => Some(Scenario::Intercontinental),
            "intracontinental" => Some(Scenario::Intracontinental),
            _ => None,
        }
    }

    /// The simulator's scenario (thesis parameters, standard TCP).
    pub fn voip(self) -> VoipScenario {
        let mut v = match self {
            Scenario::Intercontinental => VoipScenario::intercontinental(),
            Scenario::Intracontinental => VoipScenario::intracontinental(),
        };
        v.transport = TransportKind::Tcp(Transport::Tcp);
        v
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct CalibrateSpec {
    /// Which scenario.
    pub scenario: Scenario,
    /// Messages per call (thesis: 3000, one minute).
    pub messages: u32,
    /// Bernoulli loss on the downlink (thesis: 0.1 %).
    pub loss: f64,
    /// Emulator (and simulator) seed.
    pub seed: u64,
    /// Run the simulator for the third column.
    pub simulate: bool,
    /// Lab name prefix (`<lab>-k`, `<lab>-e`: one lab per run).
    pub lab: String,
    /// Keep the captures here (`calibrate-<scenario>-<kernel|engine>.pcap`).
    pub pcap_dir: Option<std::path::PathBuf>,
    /// Congestion control of the kernel sockets; `None` = the system
    /// default. The default is `cubic`, the engine's algorithm.
    pub kernel_cc: Option<String>,
    /// Congestion control of the engines (default CUBIC).
    pub engine_cc: CcAlgorithm,
}

impl CalibrateSpec {
    /// The thesis's call: 3000 messages, 0.1 % loss, seed 1, with the
    /// simulator column.
    pub fn new(scenario: Scenario, lab: &str) -> CalibrateSpec {
        CalibrateSpec {
            scenario,
            messages: 3000,
            loss: 0.001,
            seed: 1,
            simulate: true,
            lab: lab.to_string(),
            pcap_dir: None,
            kernel_cc: Some("cubic".to_string()),
            engine_cc: CcAlgorithm::Cubic,
        }
    }

    /// The simulator scenario with this spec's call and path.
    pub fn voip(&self) -> VoipScenario {
        let mut v = self.scenario.voip();
        v.count = self.messages;
        v.seed = self.seed;
        v.loss = loss_model(self.loss);
        v
    }

    fn pair_spec(&self, end: End) -> PairSpec {
        let v = self.voip();
        let one_way = v.rtt / 2;
        let base = Config {
            cc: self.engine_cc,
            ..Config::default()
        };
        PairSpec {
            lab: format!("{}-{}", self.lab, &end.name()[..1]),
            sender: end,
            receiver: end,
            sender_config: Transport::Tcp.sender_config(&base),
            receiver_config: Transport::Tcp.receiver_config(&base),
            a_to_b: LinkConfig::new(v.rate_bps, one_way)
                .with_queue_bytes(v.queue_bytes)
                .with_loss(v.loss),
            b_to_a: LinkConfig::new(v.uplink_bps, one_way).with_queue_bytes(v.queue_bytes),
            seed: self.seed,
            messages: self.messages,
            size: v.size,
            interval: v.interval,
            lifetime: None,
            schedule: None,
            port: 5401,
            pcap: self.pcap_dir.as_ref().map(|d| {
                d.join(format!(
                    "calibrate-{}-{}.pcap",
                    self.scenario.name(),
                    end.name()
                ))
            }),
            drain: Duration::from_secs(15),
            kernel_cc: self.kernel_cc.clone(),
            secure: false,
            identity: None,
        }
    }
}

fn loss_model(p: f64) -> LossModel {
    if p > 0.0 {
        LossModel::Bernoulli(p)
    } else {
        LossModel::None
    }
}

/// One column of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    /// `kernel`, `engine` or `simulator`.
    pub transport: String,
    /// Messages in the call.
    pub messages: u64,
    /// Delivered intact.
    pub delivered: u64,
    /// Played on time.
    pub played: u64,
    /// Arrived after their playout instant.
    pub late: u64,
    /// Never arrived.
    pub never_arrived: u64,
    /// Transport delay (send → delivery) of delivered messages, ms.
    pub delay_p50_ms: f64,
    /// 90th percentile.
    pub delay_p90_ms: f64,
    /// 99th percentile.
    pub delay_p99_ms: f64,
    /// Maximum.
    pub delay_max_ms: f64,
    /// Retransmitted data segments on the wire (lab: the capture at the
    /// sender's side of the emulator; simulator: the sender's egress).
    pub retransmissions_on_wire: u64,
    /// Downlink packets the loss model dropped (lab: emulator counter;
    /// simulator: messages whose first transmission was dropped).
    pub dropped: u64,
    /// Corrupt deliveries (must be 0).
    pub corrupt: u64,
    /// Duplicate deliveries (must be 0).
    pub duplicates: u64,
    /// Sequence holes on the wire (must be 0).
    pub seq_holes: u64,
    /// RSTs on the wire (lab only; must be 0).
    pub resets: u64,
    /// The engine's smoothed RTT at the end (engine and simulator).
    pub srtt_ms: Option<f64>,
    /// Wall (lab) or virtual (simulator) time of the call, s.
    pub duration_s: f64,
    /// A failure, if any.
    pub error: Option<String>,
}

/// engine / kernel for one metric.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// Metric name.
    pub metric: &'static str,
    /// Kernel value.
    pub kernel: f64,
    /// Engine value.
    pub engine: f64,
    /// engine / kernel (1 when both are 0; `None` when only the kernel's
    /// is 0).
    pub ratio: Option<f64>,
    /// |ratio − 1| ≤ 0.2.
    pub within_20pct: bool,
}

/// The calibration of one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationReport {
    /// Scenario.
    pub scenario: Scenario,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Playout delay, ms.
    pub playout_ms: f64,
    /// Downlink rate, bit/s.
    pub rate_bps: u64,
    /// Uplink rate, bit/s.
    pub uplink_bps: u64,
    /// Downlink loss probability.
    pub loss: f64,
    /// Messages.
    pub messages: u32,
    /// Seed.
    pub seed: u64,
    /// Congestion control of the Linux sockets (the engine runs CUBIC).
    pub kernel_cc: String,
    /// Linux at both ends.
    pub kernel: Column,
    /// Our engine at both ends (standard TCP).
    pub engine: Column,
    /// The simulator (if run).
    pub simulator: Option<Column>,
    /// engine / kernel per metric.
    pub ratios: Vec<Ratio>,
    /// Every ratio within 20 %.
    pub within_20pct: bool,
    /// Per message records (not serialised; for the CSV).
    #[serde(skip)]
    pub records: Vec<(String, Vec<VoipRecord>)>,
}

/// Turn a lab run into the simulator's VoIP records (same playout rule).
fn lab_voip(run: &PairRun, v: &VoipScenario) -> VoipRun {
    let inst = |d: &Option<Duration>| d.map(|d| Instant::from_nanos(d.as_nanos() as u64));
    let generated: Vec<Option<Instant>> = run.sent_at.iter().map(inst).collect();
    let arrival: Vec<Option<Instant>> = run.arrival.iter().map(inst).collect();
    let n = generated.len();
    let records = voip::schedule(
        &generated,
        &arrival,
        &vec![false; n],
        &vec![false; n],
        v.playout,
        v.interval,
    );
    VoipRun {
        scenario: v.clone(),
        records,
        ir_sent: 0,
        expired_events: 0,
        retransmissions_on_wire: run.wire.retransmissions,
        srtt: run
            .sender
            .srtt_ms
            .map(|ms| Duration::from_secs_f64(ms / 1e3)),
        corrupt_delivered: run.tally.corrupt,
        duplicates_delivered: run.tally.duplicates,
        seq_holes_on_wire: run.wire.seq_holes,
        sim_time: run.duration,
        error: run.error.clone(),
        network_dropped: run.network_dropped.clone(),
    }
}

fn column(name: &str, run: &VoipRun, s: &VoipSummary) -> Column {
    Column {
        transport: name.to_string(),
        messages: s.messages,
        delivered: s.played + s.late,
        played: s.played,
        late: s.late,
        never_arrived: s.never_arrived,
        delay_p50_ms: s.transport_delay_ms.p50,
        delay_p90_ms: s.transport_delay_ms.p90,
        delay_p99_ms: s.transport_delay_ms.p99,
        delay_max_ms: s.transport_delay_ms.max,
        retransmissions_on_wire: run.retransmissions_on_wire,
        dropped: s.first_tx_dropped,
        corrupt: run.corrupt_delivered,
        duplicates: run.duplicates_delivered,
        seq_holes: run.seq_holes_on_wire,
        resets: 0,
        srtt_ms: run.srtt.map(workload::ms),
        duration_s: run.sim_time.as_secs_f64(),
        error: run.error.clone(),
    }
}

fn lab_column(name: &str, run: &PairRun, v: &VoipScenario) -> (Column, Vec<VoipRecord>) {
    let vr = lab_voip(run, v);
    let mut c = column(name, &vr, &vr.summary());
    c.dropped = run.netem.a_to_b.dropped_loss;
    c.resets = run.resets_on_wire;
    c.corrupt = run.tally.corrupt;
    (c, vr.records)
}

fn ratio(metric: &'static str, kernel: f64, engine: f64) -> Ratio {
    let ratio = if kernel == 0.0 {
        (engine == 0.0).then_some(1.0)
    } else {
        Some(engine / kernel)
    };
    Ratio {
        metric,
        kernel,
        engine,
        ratio,
        within_20pct: ratio.is_some_and(|r| (r - 1.0).abs() <= 0.2),
    }
}

/// Run the calibration of one scenario: kernel, engine, simulator.
pub fn run(spec: &CalibrateSpec) -> Result<CalibrationReport> {
    if !(0.0..1.0).contains(&spec.loss) {
        return Err(format!("loss {} is not in [0, 1)", spec.loss).into());
    }
    if spec.messages == 0 {
        return Err("at least one message is needed".into());
    }
    interop::remove_stale_labs();
    let v = spec.voip();
    let k = interop::run_pair(&spec.pair_spec(End::Kernel))?;
    let e = interop::run_pair(&spec.pair_spec(End::Engine))?;
    let (kernel, krec) = lab_column("kernel", &k, &v);
    let (engine, erec) = lab_column("engine", &e, &v);
    let mut records = vec![("kernel".to_string(), krec), ("engine".to_string(), erec)];
    let simulator = if spec.simulate {
        let run = v.run().map_err(|e| e.to_string())?;
        let c = column("simulator", &run, &run.summary());
        records.push(("simulator".to_string(), run.records));
        Some(c)
    } else {
        None
    };
    let ratios = vec![
        ratio("delay_p50_ms", kernel.delay_p50_ms, engine.delay_p50_ms),
        ratio("delay_p99_ms", kernel.delay_p99_ms, engine.delay_p99_ms),
        ratio("late", kernel.late as f64, engine.late as f64),
        ratio(
            "never_arrived",
            kernel.never_arrived as f64,
            engine.never_arrived as f64,
        ),
        ratio(
            "retransmissions_on_wire",
            kernel.retransmissions_on_wire as f64,
            engine.retransmissions_on_wire as f64,
        ),
    ];
    let within_20pct = ratios.iter().all(|r| r.within_20pct);
    Ok(CalibrationReport {
        scenario: spec.scenario,
        rtt_ms: workload::ms(v.rtt),
        playout_ms: workload::ms(v.playout),
        rate_bps: v.rate_bps,
        uplink_bps: v.uplink_bps,
        loss: spec.loss,
        messages: spec.messages,
        seed: spec.seed,
        kernel_cc: k.kernel_cc.clone(),
        kernel,
        engine,
        simulator,
        ratios,
        within_20pct,
        records,
    })
}

impl CalibrationReport {
    /// Side-by-side table.
    pub fn to_text(&self) -> String {
        let mut cols = vec![&self.kernel, &self.engine];
        if let Some(s) = &self.simulator {
            cols.push(s);
        }
        let ratio_of = |m: &str| {
            self.ratios
                .iter()
                .find(|r| r.metric == m)
                .map_or(String::new(), |r| {
                    r.ratio.map_or("n/a (kernel 0)".to_string(), |x| {
                        format!("{x:.2}{}", if r.within_20pct { "" } else { " (!)" })
                    })
                })
        };
        let mut s = format!(
            "calibration {}: RTT {} ms, playout {} ms, {} / {} Mb/s, loss {}%, {} messages of 160 B every 20 ms, seed {}, Linux congestion control {}\n",
            self.scenario.name(),
            self.rtt_ms,
            self.playout_ms,
            self.rate_bps as f64 / 1e6,
            self.uplink_bps as f64 / 1e6,
            self.loss * 100.0,
            self.messages,
            self.seed,
            self.kernel_cc
        );
        s += &format!("{:<26}", "metric");
        for c in &cols {
            s += &format!("{:>12}", c.transport);
        }
        s += "  engine/kernel\n";
        type Get = fn(&Column) -> String;
        let rows: [(&str, &str, Get); 12] = [
            ("delay p50 (ms)", "delay_p50_ms", |c| {
                format!("{:.2}", c.delay_p50_ms)
            }),
            ("delay p90 (ms)", "", |c| format!("{:.2}", c.delay_p90_ms)),
            ("delay p99 (ms)", "delay_p99_ms", |c| {
                format!("{:.2}", c.delay_p99_ms)
            }),
            ("delay max (ms)", "", |c| format!("{:.2}", c.delay_max_ms)),
            ("played", "", |c| c.played.to_string()),
            ("late", "late", |c| c.late.to_string()),
            ("never arrived", "never_arrived", |c| {
                c.never_arrived.to_string()
            }),
            ("retransmissions on wire", "retransmissions_on_wire", |c| {
                c.retransmissions_on_wire.to_string()
            }),
            ("downlink drops", "", |c| c.dropped.to_string()),
            ("corrupt/dup/holes/RST", "", |c| {
                format!(
                    "{}/{}/{}/{}",
                    c.corrupt, c.duplicates, c.seq_holes, c.resets
                )
            }),
            ("srtt at end (ms)", "", |c| {
                c.srtt_ms.map_or("-".to_string(), |v| format!("{v:.1}"))
            }),
            ("duration (s)", "", |c| format!("{:.1}", c.duration_s)),
        ];
        for (label, metric, get) in rows {
            s += &format!("{label:<26}");
            for c in &cols {
                s += &format!("{:>12}", get(c));
            }
            if !metric.is_empty() {
                s += &format!("  {}", ratio_of(metric));
            }
            s += "\n";
        }
        for c in &cols {
            if let Some(e) = &c.error {
                s += &format!("{}: error: {e}\n", c.transport);
            }
        }
        s += &format!(
            "goal (every engine/kernel ratio within 20 %): {}\n",
            if self.within_20pct { "met" } else { "not met" }
        );
        s
    }

    /// Append per-message rows (`scenario,transport,id,send_ms,arrival_ms,
    /// playout_ms,delay_ms,outcome`) to a CSV writer; `header` writes the
    /// header line first.
    pub fn write_csv(&self, w: &mut dyn std::io::Write, header: bool) -> std::io::Result<()> {
        if header {
            writeln!(
                w,
                "scenario,transport,id,send_ms,arrival_ms,playout_ms,delay_ms,outcome"
            )?;
        }
        let ms = |i: Option<Instant>| {
            i.map_or(String::new(), |i| {
                format!("{:.3}", i.as_nanos() as f64 / 1e6)
            })
        };
        for (t, recs) in &self.records {
            for r in recs {
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},{}",
                    self.scenario.name(),
                    t,
                    r.id,
                    ms(r.send),
                    ms(r.arrival),
                    ms(r.playout),
                    r.transport_delay_ms()
                        .map_or(String::new(), |d| format!("{d:.3}")),
                    r.outcome().name()
                )?;
            }
        }
        Ok(())
    }

    /// Write the CSV of several reports to `path`.
    pub fn write_csv_file(reports: &[CalibrationReport], path: &Path) -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        for (i, r) in reports.iter().enumerate() {
            r.write_csv(&mut f, i == 0)?;
        }
        std::io::Write::flush(&mut f)
    }
}

// ---------------------------------------------------------------- bulk --

/// A bulk transfer a → b over the emulated path, Linux TCP at both ends and
/// our engine at both ends with the same congestion control, side by side
/// (issue 9: "calibrate against Linux BBR in the lab: bulk throughput ...
/// within 20 %").
#[derive(Debug, Clone)]
pub struct BulkSpec {
    /// Rate each way (bit/s).
    pub rate_bps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Bernoulli loss on a→b.
    pub loss: f64,
    /// Bytes to transfer.
    pub bytes: u64,
    /// Drop-tail queue each way (bytes); `None`: one bandwidth-delay
    /// product, at least 100 packets.
    pub queue_bytes: Option<usize>,
    /// Emulator seed.
    pub seed: u64,
    /// Congestion control at both ends (`bbr`, `cubic`, `newreno`).
    pub cc: CcAlgorithm,
    /// Lab name prefix.
    pub lab: String,
}

impl BulkSpec {
    /// 50 Mb/s, 40 ms RTT, no loss, 50 MB, BBR.
    pub fn new(lab: &str) -> BulkSpec {
        BulkSpec {
            rate_bps: 50_000_000,
            rtt: Duration::from_millis(40),
            loss: 0.0,
            bytes: 50_000_000,
            queue_bytes: None,
            seed: 1,
            cc: CcAlgorithm::Bbr,
            lab: lab.to_string(),
        }
    }

    fn link(&self, lossy: bool) -> LinkConfig {
        let bdp = (self.rate_bps as u128 * self.rtt.as_nanos() / 8 / 1_000_000_000) as usize;
        let q = self
            .queue_bytes
            .unwrap_or(bdp.max(hollywood_sim::DEFAULT_QUEUE_BYTES));
        let l = LinkConfig::new(self.rate_bps, self.rtt / 2).with_queue_bytes(q);
        if lossy {
            l.with_loss(loss_model(self.loss))
        } else {
            l
        }
    }
}

/// One bulk run.
#[derive(Debug, Clone, Serialize)]
pub struct BulkRun {
    /// `kernel` or `engine`.
    pub transport: String,
    /// Congestion control in use.
    pub cc: String,
    /// Bytes the receiver got.
    pub bytes: u64,
    /// Connect to last byte at the receiver, s.
    pub seconds: f64,
    /// Goodput, Mb/s.
    pub goodput_mbps: f64,
    /// Goodput over the link rate.
    pub link_utilisation: f64,
    /// Data-direction packets the emulator dropped (loss model + queue).
    pub dropped: u64,
    /// A failure, if any.
    pub error: Option<String>,
}

/// The bulk calibration.
#[derive(Debug, Clone, Serialize)]
pub struct BulkReport {
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Loss on a→b.
    pub loss: f64,
    /// Linux at both ends.
    pub kernel: BulkRun,
    /// Our engine at both ends.
    pub engine: BulkRun,
    /// engine goodput / kernel goodput.
    pub ratio: Ratio,
}

impl BulkReport {
    /// Side-by-side text.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "bulk a→b over {} Mb/s, RTT {:.0} ms, loss {}%:\n",
            self.rate_bps as f64 / 1e6,
            self.rtt_ms,
            self.loss * 100.0
        );
        for r in [&self.kernel, &self.engine] {
            s += &format!(
                "  {:<6} {:<6} {:>7.2} Mb/s ({:.1}% of the link), {:.2} MB in {:.2} s, {} dropped{}\n",
                r.transport,
                r.cc,
                r.goodput_mbps,
                100.0 * r.link_utilisation,
                r.bytes as f64 / 1e6,
                r.seconds,
                r.dropped,
                r.error.as_ref().map(|e| format!(" (error: {e})")).unwrap_or_default()
            );
        }
        s += &format!(
            "  engine / kernel goodput: {}{}\n",
            self.ratio.ratio.map_or("n/a".into(), |r| format!("{r:.2}")),
            if self.ratio.within_20pct {
                " (within 20 %)"
            } else {
                " (outside 20 %)"
            }
        );
        s
    }
}

/// Run the bulk calibration: Linux, then the engine.
pub fn bulk(spec: &BulkSpec) -> Result<BulkReport> {
    if !hollywood_io::is_root() {
        return Err(Box::new(crate::topology::LabError::NotRoot));
    }
    if !(0.0..1.0).contains(&spec.loss) || spec.bytes == 0 || spec.rate_bps == 0 {
        return Err("need a rate, some bytes and a loss in [0, 1)".into());
    }
    interop::remove_stale_labs();
    let kernel = bulk_run(spec, End::Kernel)?;
    let engine = bulk_run(spec, End::Engine)?;
    let ratio = ratio("goodput_mbps", kernel.goodput_mbps, engine.goodput_mbps);
    Ok(BulkReport {
        rate_bps: spec.rate_bps,
        rtt_ms: workload::ms(spec.rtt),
        loss: spec.loss,
        kernel,
        engine,
        ratio,
    })
}

fn bulk_run(spec: &BulkSpec, end: End) -> Result<BulkRun> {
    use crate::topology::{Host, Lab, LabSpec};
    use hollywood_io::engine::Stack;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let lab = Lab::up(LabSpec {
        name: format!("{}-b{}", spec.lab, &end.name()[..1]),
        three_hosts: false,
        a_to_b: spec.link(true),
        b_to_a: spec.link(false),
        seed: spec.seed,
        hook: None,
    })?;
    let rt = crate::workload::runtime()?;
    let total = spec.bytes;
    let cc_name = spec.cc.name().to_string();
    let config = Config {
        cc: spec.cc,
        ..Config::default()
    };
    let port = 5402;
    let out: Result<(u64, Duration)> = rt.block_on(async {
        let chunk = vec![0x5a_u8; 64 * 1024];
        match end {
            End::Kernel => {
                let dst = SocketAddr::new(lab.addr(Host::B, false), port);
                let cc = cc_name.clone();
                let l = lab
                    .ns(Host::B)
                    .run(move || interop::kernel_listener(dst, Some(&cc)))??;
                let l = tokio::net::TcpListener::from_std(l)?;
                let rx = tokio::spawn(async move {
                    let (mut s, _) = l.accept().await?;
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut got = 0u64;
                    loop {
                        let n = s.read(&mut buf).await?;
                        if n == 0 {
                            break;
                        }
                        got += n as u64;
                    }
                    Ok::<_, std::io::Error>((got, std::time::Instant::now()))
                });
                let socket = lab.ns(Host::A).run(tokio::net::TcpSocket::new_v4)??;
                socket2::SockRef::from(&socket).set_tcp_congestion(cc_name.as_bytes())?;
                let start = std::time::Instant::now();
                let mut s = socket.connect(dst).await?;
                let mut left = total;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    s.write_all(&chunk[..n]).await?;
                    left -= n as u64;
                }
                s.shutdown().await?;
                let (got, end_at) = rx.await??;
                Ok((got, end_at.saturating_duration_since(start)))
            }
            End::Engine => {
                let dst = SocketAddr::new(lab.engine_addr(Host::B, false), port);
                let rx_stack = Stack::spawn(lab.engine_tun(Host::B)?, config.clone())?;
                let mut l = rx_stack.listen(dst, None).await?;
                let rx = tokio::spawn(async move {
                    let (mut s, _) = l.accept().await?;
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut got = 0u64;
                    loop {
                        let n = s.read(&mut buf).await?;
                        if n == 0 {
                            break;
                        }
                        got += n as u64;
                    }
                    let _ = s.close().await;
                    Ok::<_, hollywood_io::StreamError>((got, std::time::Instant::now()))
                });
                let tx_stack = Stack::spawn(lab.engine_tun(Host::A)?, config.clone())?;
                let local = SocketAddr::new(lab.engine_addr(Host::A, false), 0);
                let start = std::time::Instant::now();
                let mut s = tx_stack.connect(local, dst, None).await?;
                let mut left = total;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    s.write_all(&chunk[..n]).await?;
                    left -= n as u64;
                }
                s.close().await?;
                let (got, end_at) =
                    tokio::time::timeout(Duration::from_secs(600), rx)
                        .await
                        .map_err(|_| "the engine receiver did not finish in 600 s")???;
                for st in [tx_stack, rx_stack] {
                    let _ = tokio::time::timeout(Duration::from_secs(2), st.shutdown()).await;
                }
                Ok((got, end_at.saturating_duration_since(start)))
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    let dropped = lab.netem_stats().a_to_b.dropped();
    drop(lab);
    let (bytes, took, error) = match out {
        Ok((b, t)) => (b, t, None),
        Err(e) => (0, Duration::ZERO, Some(e.to_string())),
    };
    let secs = took.as_secs_f64();
    let mbps = if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    };
    Ok(BulkRun {
        transport: end.name().to_string(),
        cc: spec.cc.name().to_string(),
        bytes,
        seconds: secs,
        goodput_mbps: mbps,
        link_utilisation: mbps * 1e6 / spec.rate_bps as f64,
        dropped,
        error: error
            .or_else(|| (bytes != total).then(|| format!("received {bytes} of {total} bytes"))),
    })
}
