//! A lab that looks like the internet, run the way a user runs the tools
//! (issue 31): a client host behind a NAT router, a lossy long path, a
//! server host with a "public" address, and in each host namespace the
//! real commands as a user types them — `ffmpeg -re … -f mpegts udp://`,
//! `hollywood transmit … [--host]`, `srt-live-transmit`, an `ffmpeg`
//! recorder — not library hooks.
//!
//! ```text
//! server a 10.88.1.2 ─ e (emulator) ─ r (NAT router) ─ client b 10.88.2.2
//!   "public"            RTT, loss on     masquerade out of veth-e,
//!                       b→a (the data)   strict conntrack, nothing new
//!                                        in from outside, UDP dropped
//!                                        when the row says so
//! ```
//!
//! Per transport, on a fresh lab with the same path and emulator seed:
//!
//! - `engine`: `hollywood transmit udp://127.0.0.1:5000
//!   hollywood://10.88.1.2:9000 --host` in b (racing; the engine through
//!   the host's NAT and then the router's) and `hollywood transmit
//!   'hollywood://10.88.1.2:9000?mode=listener' udp://127.0.0.1:6000
//!   --host` in a (the listener's TCP port DNATed to its engine), UDP
//!   blocked at the router: TCP Hollywood at both ends (thesis ch. 4);
//! - `fallback-<cc>`: the same commands without `--host`, UDP blocked:
//!   the message layer on kernel TCP, what a user without host mode gets
//!   (both hosts' `net.ipv4.tcp_congestion_control` set to `<cc>`);
//! - `fallback-<cc>-to-engine`: that kernel-TCP caller against the engine
//!   listener (`--host` in a only): a standard Linux TCP client reaching
//!   the engine through the DNAT (thesis §4.4: the engine talks to
//!   unmodified peers; receiver-side deployment);
//! - `srt`: `srt-live-transmit` at both ends, UDP open, latency by the
//!   rule of [`crate::compare::srt_latency_for`] (inside the deadline with
//!   a jitter margin);
//! - `quic`: the caller without `--host` against the engine listener, UDP
//!   open: racing's QUIC, which the listener serves on the same port
//!   number as the engine's TCP.
//!
//! The stream is ffmpeg's, encoded live (`testsrc2`, H.264, constant TS
//! mux rate, 1316-byte datagrams). What the measurement needs is taken
//! from the outside, passively: a capture on b's loopback of the
//! datagrams ffmpeg hands to the sender (send times), one on a's loopback
//! of those the receiver hands to the recorder (arrival times; a datagram
//! is identified by its bytes), one at the router's outside interface
//! (the wire image: inconsistent retransmissions, sequence holes, RSTs),
//! and the recorder's file, decoded with ffprobe. A chunk is on time when
//! it reached a's loopback within the deadline of reaching b's.

use crate::capture::{audit_pcap, Capture};
use crate::compare::srt_latency_for;
use crate::topology::{Host, Lab, LabSpec};
use hollywood_media::Percentiles;
use hollywood_sim::{LinkConfig, LossModel};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Errors of a run (setup failures).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The TCP port every transport listens on, in a.
pub const PORT: u16 = 9000;
/// Where ffmpeg sends in b.
const SRC_PORT: u16 = 5000;
/// Where the receiver hands datagrams to the recorder in a.
const DST_PORT: u16 = 6000;

/// A row of the comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// `transmit --host` at both ends, UDP blocked.
    Engine,
    /// `transmit` without host mode at both ends, kernel TCP with this
    /// congestion control, UDP blocked.
    Fallback(String),
    /// The kernel-TCP caller (this congestion control) against the engine
    /// listener, UDP blocked.
    FallbackToEngine(String),
    /// `srt-live-transmit` at both ends, UDP open.
    Srt,
    /// `transmit` without host mode calling the engine listener
    /// (`--host`), UDP open: racing picks QUIC, served on the same port
    /// number as the engine's TCP.
    Quic,
}

impl Transport {
    /// The default line-up, in table order.
    pub fn all() -> Vec<Transport> {
        vec![
            Transport::Engine,
            Transport::Fallback("bbr".into()),
            Transport::Fallback("cubic".into()),
            Transport::Srt,
            Transport::FallbackToEngine("cubic".into()),
            Transport::Quic,
        ]
    }

    /// Command-line name.
    pub fn name(&self) -> String {
        match self {
            Transport::Engine => "engine".into(),
            Transport::Fallback(cc) => format!("fallback-{cc}"),
            Transport::FallbackToEngine(cc) => format!("fallback-{cc}-to-engine"),
            Transport::Srt => "srt".into(),
            Transport::Quic => "quic".into(),
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Result<Transport, String> {
        let cc_ok =
            |cc: &str| !cc.is_empty() && cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match s {
            "engine" => return Ok(Transport::Engine),
            "srt" => return Ok(Transport::Srt),
            "quic" => return Ok(Transport::Quic),
            _ => {}
        }
        if let Some(rest) = s.strip_prefix("fallback-") {
            if let Some(cc) = rest.strip_suffix("-to-engine") {
                if cc_ok(cc) {
                    return Ok(Transport::FallbackToEngine(cc.into()));
                }
            } else if cc_ok(rest) {
                return Ok(Transport::Fallback(rest.into()));
            }
        }
        Err(format!(
            "unknown transport '{s}': use engine, fallback-<cc> (e.g. fallback-cubic), fallback-<cc>-to-engine, srt or quic"
        ))
    }

    fn udp_blocked(&self) -> bool {
        !matches!(self, Transport::Srt | Transport::Quic)
    }

    fn kernel_cc(&self) -> Option<&str> {
        match self {
            Transport::Fallback(cc) | Transport::FallbackToEngine(cc) => Some(cc),
            _ => None,
        }
    }
}

/// The path and the stream.
#[derive(Debug, Clone)]
pub struct InternetSpec {
    /// Bottleneck rate each way (bit/s; 0 = unlimited).
    pub rate_bps: u64,
    /// Round-trip propagation delay (half each way).
    pub rtt: Duration,
    /// Bernoulli loss on the data direction (client b → server a).
    pub loss: f64,
    /// Seconds of video.
    pub seconds: u32,
    /// The TS mux rate (bit/s; the video gets 80 % of it).
    pub stream_bps: u64,
    /// A chunk is on time if delivered within this of being handed over;
    /// also `transmit --latency` (each chunk's lifetime).
    pub deadline: Duration,
    /// SRT's latency; `None`: [`srt_latency_for`].
    pub srt_latency: Option<Duration>,
    /// The receiving `transmit`'s `--reorder`; `None`: its default.
    pub reorder: Option<Duration>,
    /// Emulator seed.
    pub seed: u64,
    /// Lab name prefix (one lab per row: `<prefix>-<index>`).
    pub lab: String,
    /// Rows, in order.
    pub transports: Vec<Transport>,
    /// The `hollywood` executable the hosts run.
    pub bin: PathBuf,
    /// Where recordings, captures and logs go (one folder per row).
    pub out_dir: PathBuf,
}

impl InternetSpec {
    /// Issue 31's path: 10 Mb/s, 80 ms RTT, 2 % loss, 30 s of 2 Mb/s
    /// video, deadline 180 ms.
    pub fn issue31(lab: &str, bin: PathBuf, out_dir: PathBuf) -> InternetSpec {
        InternetSpec {
            rate_bps: 10_000_000,
            rtt: Duration::from_millis(80),
            loss: 0.02,
            seconds: 30,
            stream_bps: 2_000_000,
            deadline: Duration::from_millis(180),
            srt_latency: None,
            reorder: None,
            seed: 1,
            lab: lab.into(),
            transports: Transport::all(),
            bin,
            out_dir,
        }
    }

    /// SRT's latency in this run.
    pub fn srt_latency(&self) -> Duration {
        self.srt_latency
            .unwrap_or_else(|| srt_latency_for(self.deadline, self.rtt))
    }
}

/// What the router's capture saw of the client's data direction.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Wire {
    /// Data segments.
    pub data_segments: u64,
    /// Retransmissions.
    pub retransmissions: u64,
    /// Retransmissions whose bytes differ from the first (thesis §4.5).
    pub inconsistent_retransmissions: u64,
    /// Data beyond the highest byte seen so far.
    pub seq_holes: u64,
    /// Segments with RST, both directions.
    pub rsts: u64,
    /// Source ports seen from the client (after both NATs).
    pub client_ports: Vec<u16>,
}

/// One row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// [`Transport::name`].
    pub transport: String,
    /// The protocol the caller reported (racing's choice), if it said.
    pub protocol: Option<String>,
    /// Datagrams ffmpeg handed to the sender, counted (unique bytes).
    pub chunks: u64,
    /// Datagrams left out as ambiguous ([`Measured::ambiguous`]).
    pub ambiguous: u64,
    /// Delivered within the deadline.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Never delivered.
    pub never: u64,
    /// `on_time / chunks`.
    pub on_time_fraction: f64,
    /// Delivered behind a chunk sent after them.
    pub out_of_order: u64,
    /// Deliveries that matched no sent chunk, or one already delivered.
    pub bad_deliveries: u64,
    /// Messages the receiving transport handed over ahead of a missing
    /// one (the receiving `transmit`'s reorder buffer held them, or
    /// passed them on behind a gap given up): out-of-order delivery by
    /// the protocol, before the relay put the datagrams back in order.
    pub arrived_out_of_order: Option<u64>,
    /// Delay of what arrived (ms; chunks that never arrived are not in
    /// it: read it beside `never`).
    pub delay_p50_ms: f64,
    /// 99th percentile (ms).
    pub delay_p99_ms: f64,
    /// Maximum (ms).
    pub delay_max_ms: f64,
    /// Packets the emulator dropped (both directions).
    pub dropped_by_emulator: u64,
    /// Video frames ffprobe decodes from what was sent.
    pub frames_sent: u64,
    /// Video frames ffprobe decodes from the recorder's file.
    pub frames_recorded: u64,
    /// The recorder's file.
    pub recording: String,
    /// TCP rows: the router's view of the client's data.
    pub wire: Option<Wire>,
    /// SRT's latency (srt row).
    pub srt_latency_ms: Option<u64>,
    /// After the commands exited: no TUN device, no `hollywood` nft
    /// table and forwarding as before in either host.
    pub hosts_clean: bool,
    /// What went wrong, if the row is incomplete.
    pub error: Option<String>,
}

/// Run every row.
pub fn run(spec: &InternetSpec, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    if !hollywood_io::is_root() {
        return Err(Box::new(crate::topology::LabError::NotRoot));
    }
    if !(0.0..1.0).contains(&spec.loss) {
        return Err(format!("loss {} is not in [0, 1)", spec.loss).into());
    }
    if spec.seconds == 0 || spec.stream_bps < 100_000 {
        return Err("need at least one second of video at 100 kb/s or more".into());
    }
    for (tool, why) in [
        ("ffmpeg", "-version"),
        ("ffprobe", "-version"),
        ("tshark", "--version"),
    ] {
        tool_present(tool, why)?;
    }
    if spec.transports.contains(&Transport::Srt) {
        tool_present("srt-live-transmit", "-version")?;
    }
    crate::interop::remove_stale_labs();
    AllowedCc::restore_left_over();
    std::fs::create_dir_all(&spec.out_dir)?;
    let mut rows = Vec::new();
    for (k, t) in spec.transports.iter().enumerate() {
        progress(&t.name());
        rows.push(run_row(spec, &format!("{}-{k}", spec.lab), t)?);
    }
    Ok(rows)
}

fn tool_present(tool: &str, arg: &str) -> Result<(), Error> {
    match Command::new(tool).arg(arg).output() {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "{tool}: {e} (Debian ffmpeg, tshark, srt-tools; scripts/test.sh installs them as root)"
        )
        .into()),
    }
}

/// A process in a namespace, killed and reaped when dropped.
pub(crate) struct Proc {
    child: Child,
    what: String,
}

impl Proc {
    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn spawn(
        ns: &str,
        env: &[(&str, &Path)],
        argv: &[&str],
        log: &Path,
    ) -> Result<Proc, Error> {
        let out = std::fs::File::create(log)?;
        let err = out.try_clone()?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(argv);
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", argv[0]))?;
        Ok(Proc {
            child,
            what: argv.join(" "),
        })
    }

    /// SIGTERM (as a service manager or a user's kill does), then wait up
    /// to `grace`; SIGKILL after that. Returns the exit description.
    pub(crate) fn terminate(mut self, grace: Duration) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.wait_for(grace)
    }

    /// Wait up to `grace` for it to exit by itself, then SIGKILL.
    pub(crate) fn wait_for(&mut self, grace: Duration) -> String {
        let step = Duration::from_millis(50);
        for _ in 0..(grace.as_millis() / step.as_millis()).max(1) {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s.to_string();
            }
            std::thread::sleep(step);
        }
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(s) => format!("{s} (killed after {} ms: {})", grace.as_millis(), self.what),
            Err(e) => e.to_string(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn exec(lab: &Lab, h: Host, argv: &[&str]) -> Result<(), Error> {
    lab.ns(h).exec(argv)?;
    Ok(())
}

/// The home router: masquerade out of its outside interface, strict
/// conntrack (invalid packets dropped, no pick-up of mid-stream
/// connections), nothing new in from outside, and UDP dropped when asked.
pub fn router(lab: &Lab, block_udp: bool) -> Result<(), Error> {
    let out = lab.iface(Host::R, Host::E);
    let ipt = |rule: &str| {
        let mut v = vec!["iptables"];
        v.extend(rule.split_whitespace());
        exec(lab, Host::R, &v)
    };
    ipt(&format!("-t nat -A POSTROUTING -o {out} -j MASQUERADE"))?;
    ipt("-A FORWARD -m conntrack --ctstate INVALID -j DROP")?;
    ipt(&format!(
        "-A FORWARD -i {out} -m conntrack --ctstate NEW -j DROP"
    ))?;
    if block_udp {
        ipt("-A FORWARD -p udp -j DROP")?;
    }
    // After the first conntrack rule the module is there; strict TCP
    // tracking as on hardened routers (the default picks up mid-stream).
    exec(
        lab,
        Host::R,
        &["sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0"],
    )?;
    Ok(())
}

/// Poll `f` every 50 ms until it holds or `limit` passes.
pub(crate) fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let step = Duration::from_millis(50);
    for _ in 0..(limit.as_millis() / step.as_millis()).max(1) {
        if f() {
            return true;
        }
        std::thread::sleep(step);
    }
    f()
}

/// A namespace may make only an *allowed* congestion control its default
/// (`net.ipv4.tcp_allowed_congestion_control`, one list for the whole
/// machine; Debian allows its own default and reno). This adds `cc` to the
/// list for the run and puts the list back when dropped.
struct AllowedCc {
    before: Option<String>,
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Where [`AllowedCc`] keeps the machine's own list while it is changed:
/// a run killed before it put the list back leaves this file, and the
/// next run puts the list back from it first.
fn allowed_cc_saved() -> std::path::PathBuf {
    std::env::temp_dir().join("hollywood-lab-allowed-cc.orig")
}

impl AllowedCc {
    /// Put back the list a killed run left changed.
    fn restore_left_over() {
        if let Ok(orig) = std::fs::read_to_string(allowed_cc_saved()) {
            if std::fs::write(ALLOWED_CC, orig.trim()).is_ok() {
                let _ = std::fs::remove_file(allowed_cc_saved());
            }
        }
    }

    fn ensure(cc: &str) -> Result<AllowedCc, Error> {
        let before = std::fs::read_to_string(ALLOWED_CC)?.trim().to_string();
        if before.split_whitespace().any(|c| c == cc) {
            return Ok(AllowedCc { before: None });
        }
        // Loads the module if it is one (cubic is built in on Debian).
        let _ = Command::new("modprobe").arg(format!("tcp_{cc}")).output();
        std::fs::write(allowed_cc_saved(), &before)?;
        std::fs::write(ALLOWED_CC, format!("{before} {cc}")).map_err(|e| {
            format!("allowing congestion control {cc}: {e} (is tcp_{cc} available?)")
        })?;
        Ok(AllowedCc {
            before: Some(before),
        })
    }
}

impl Drop for AllowedCc {
    fn drop(&mut self) {
        if let Some(b) = &self.before {
            if std::fs::write(ALLOWED_CC, b).is_ok() {
                let _ = std::fs::remove_file(allowed_cc_saved());
            }
        }
    }
}

fn host_state(lab: &Lab, h: Host) -> Result<(String, String), Error> {
    let ns = lab.ns(h).name().ok_or("named namespace")?.to_string();
    let run = |argv: &[&str]| -> Result<String, Error> {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(argv)
            .output()?;
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let tuns = run(&["ip", "-o", "link", "show", "type", "tun"])?;
    let tables = run(&["nft", "list", "tables"])?;
    let fwd = run(&["sysctl", "-n", "net.ipv4.ip_forward"])?;
    Ok((format!("{tuns}{tables}"), fwd.trim().to_string()))
}

fn run_row(spec: &InternetSpec, lab_name: &str, t: &Transport) -> Result<Row, Error> {
    let one_way = spec.rtt / 2;
    let lab = Lab::up(LabSpec {
        name: lab_name.into(),
        three_hosts: true,
        a_to_b: LinkConfig::new(spec.rate_bps, one_way),
        b_to_a: if spec.loss > 0.0 {
            LinkConfig::new(spec.rate_bps, one_way).with_loss(LossModel::Bernoulli(spec.loss))
        } else {
            LinkConfig::new(spec.rate_bps, one_way)
        },
        seed: spec.seed,
        hook: None,
    })?;
    router(&lab, t.udp_blocked())?;
    let _allowed = match t.kernel_cc() {
        Some(cc) => Some(AllowedCc::ensure(cc)?),
        None => None,
    };
    if let Some(cc) = t.kernel_cc() {
        let key = format!("net.ipv4.tcp_congestion_control={cc}");
        for h in [Host::A, Host::B] {
            exec(&lab, h, &["sysctl", "-qw", &key])
                .map_err(|e| format!("{key}: {e} (is tcp_{cc} available?)"))?;
        }
    }
    let dir = spec.out_dir.join(t.name());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let ns = |h: Host| lab.ns(h).name().unwrap_or_default().to_string();
    let (ns_a, ns_b, ns_r) = (ns(Host::A), ns(Host::B), ns(Host::R));
    // Each host its own host-mode state, as separate machines have.
    let (run_a, run_b) = (dir.join("run-a"), dir.join("run-b"));
    std::fs::create_dir_all(&run_a)?;
    std::fs::create_dir_all(&run_b)?;
    let before = (host_state(&lab, Host::A)?, host_state(&lab, Host::B)?);

    let send_pcap = dir.join("sent.pcap");
    let recv_pcap = dir.join("received.pcap");
    let wire_pcap = dir.join("router.pcap");
    let caps = vec![
        Capture::start(
            Some(&ns_b),
            "lo",
            &send_pcap,
            &format!("udp dst port {SRC_PORT}"),
        )?,
        Capture::start(
            Some(&ns_a),
            "lo",
            &recv_pcap,
            &format!("udp dst port {DST_PORT}"),
        )?,
        Capture::start(
            Some(&ns_r),
            &lab.iface(Host::R, Host::E),
            &wire_pcap,
            &format!("port {PORT}"),
        )?,
    ];

    let server = lab.addr(Host::A, false);
    let bin = spec.bin.to_string_lossy().into_owned();
    let deadline = format!("{}ms", spec.deadline.as_millis());
    let srt_lat = spec.srt_latency().as_millis().to_string();
    let reorder = spec.reorder.map(|r| format!("{}ms", r.as_millis()));
    let recording = dir.join("recording.ts");
    let rec_url =
        format!("udp://127.0.0.1:{DST_PORT}?timeout=5000000&fifo_size=100000&overrun_nonfatal=1");
    let rec_path = recording.to_string_lossy().into_owned();
    let recorder = Proc::spawn(
        &ns_a,
        &[],
        &[
            "ffmpeg", "-v", "error", "-y", "-i", &rec_url, "-c", "copy", "-f", "mpegts", &rec_path,
        ],
        &dir.join("recorder.log"),
    )?;
    let listen_url = format!("hollywood://{server}:{PORT}?mode=listener");
    let call_url = format!("hollywood://{server}:{PORT}");
    let to_rec = format!("udp://127.0.0.1:{DST_PORT}");
    let from_src = format!("udp://127.0.0.1:{SRC_PORT}");
    let srt_listen = format!("srt://:{PORT}?mode=listener&latency={srt_lat}");
    let srt_call = format!("srt://{server}:{PORT}?mode=caller&latency={srt_lat}");
    let (server_argv, client_argv): (Vec<&str>, Vec<&str>) = match t {
        Transport::Srt => (
            vec!["srt-live-transmit", "-q", &srt_listen, &to_rec],
            vec!["srt-live-transmit", "-q", &from_src, &srt_call],
        ),
        _ => {
            let engine_server = matches!(
                t,
                Transport::Engine | Transport::FallbackToEngine(_) | Transport::Quic
            );
            let engine_client = matches!(t, Transport::Engine);
            let mut s = vec![bin.as_str(), "transmit", &listen_url, &to_rec];
            s.extend(["--latency", &deadline, "--json"]);
            if let Some(r) = &reorder {
                s.extend(["--reorder", r]);
            }
            if engine_server {
                s.push("--host");
            }
            let mut c = vec![bin.as_str(), "transmit", &from_src, &call_url];
            c.extend(["--latency", &deadline, "--json", "-s", "200"]);
            if engine_client {
                c.push("--host");
            }
            (s, c)
        }
    };
    let env_a = [("HOLLYWOOD_RUN_DIR", run_a.as_path())];
    let env_b = [("HOLLYWOOD_RUN_DIR", run_b.as_path())];
    let server_p = Proc::spawn(&ns_a, &env_a, &server_argv, &dir.join("server.log"))?;
    // The server listens (every server here has a kernel socket on the
    // port: SRT's UDP one, transmit's racing TCP listener).
    let proto = if matches!(t, Transport::Srt) {
        "-Hlun"
    } else {
        "-Hltn"
    };
    let listening = wait_until(Duration::from_secs(15), || {
        lab.ns(Host::A)
            .exec(&["ss", proto, &format!("sport = :{PORT}")])
            .is_ok_and(|o| !o.trim().is_empty())
    });
    if !listening {
        return Err(format!("{}: the server never listened on {PORT}", t.name()).into());
    }
    let client_p = Proc::spawn(&ns_b, &env_b, &client_argv, &dir.join("client.log"))?;
    // The client is connected: transmit's statistics (-s) say so once a
    // connection is up; srt-live-transmit is quiet, so a fixed wait.
    let client_log = dir.join("client.log");
    if matches!(t, Transport::Srt) {
        std::thread::sleep(Duration::from_millis(2500));
    } else if !wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&client_log).is_ok_and(|l| {
            l.lines().any(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .is_ok_and(|v| v["connections"].as_u64() >= Some(1))
            })
        })
    }) {
        return Err(format!(
            "{}: the client never connected (see {})",
            t.name(),
            client_log.display()
        )
        .into());
    }
    let video = spec.stream_bps * 8 / 10;
    let src = format!("testsrc2=size=640x360:rate=25:duration={}", spec.seconds);
    let out_url = format!("udp://127.0.0.1:{SRC_PORT}?pkt_size=1316");
    let (v, half) = (video.to_string(), (video / 2).to_string());
    let mux = spec.stream_bps.to_string();
    let mut ffmpeg = Proc::spawn(
        &ns_b,
        &[],
        &[
            "ffmpeg",
            "-v",
            "error",
            "-re",
            "-f",
            "lavfi",
            "-i",
            &src,
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-tune",
            "zerolatency",
            "-g",
            "25",
            "-b:v",
            &v,
            "-maxrate",
            &v,
            "-bufsize",
            &half,
            "-muxrate",
            &mux,
            "-f",
            "mpegts",
            &out_url,
        ],
        &dir.join("ffmpeg.log"),
    )?;
    let ff = ffmpeg.wait_for(Duration::from_secs(u64::from(spec.seconds) + 30));
    // What is in flight arrives or expires.
    std::thread::sleep(spec.deadline + spec.srt_latency() + Duration::from_secs(1));
    let client_exit = client_p.terminate(Duration::from_secs(10));
    let server_exit = server_p.terminate(Duration::from_secs(10));
    let mut recorder = recorder;
    let rec_exit = recorder.wait_for(Duration::from_secs(15));
    drop(recorder);
    let stopped = Capture::stop_all(caps)?;
    let after = (host_state(&lab, Host::A)?, host_state(&lab, Host::B)?);
    let dropped_by_emulator = {
        let s = lab.netem_stats();
        s.a_to_b.dropped() + s.b_to_a.dropped()
    };
    drop(lab);
    let _ = stopped;

    let client_log = std::fs::read_to_string(dir.join("client.log")).unwrap_or_default();
    let protocol = reported_protocol(&client_log);
    let server_log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let arrived_out_of_order = last_json(&server_log).map(|v| {
        let g = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        g("reorder_held") + g("reorder_behind")
    });
    let sent = udp_payloads(&send_pcap, SRC_PORT)?;
    let got = udp_payloads(&recv_pcap, DST_PORT)?;
    let m = measure(&sent, &got, spec.deadline);
    let sent_file = dir.join("sent.ts");
    let concat: Vec<u8> = sent.iter().flat_map(|(_, d)| d.iter().copied()).collect();
    std::fs::write(&sent_file, concat)?;
    let frames_sent = if sent.is_empty() {
        0
    } else {
        crate::ts::video_frames(&sent_file)?
    };
    let frames_recorded = if std::fs::metadata(&recording).map_or(0, |m| m.len()) > 0 {
        crate::ts::video_frames(&recording).unwrap_or(0)
    } else {
        0
    };
    let wire = if matches!(t, Transport::Srt | Transport::Quic) {
        None
    } else {
        Some(wire_of(&wire_pcap)?)
    };
    let mut problems = Vec::new();
    if !ff.contains("exit status: 0") {
        problems.push(format!("ffmpeg source: {ff}"));
    }
    for (who, e) in [("client", &client_exit), ("server", &server_exit)] {
        if !e.contains("exit status: 0") && !e.contains("signal: 15") {
            problems.push(format!("{who}: {e}"));
        }
    }
    if rec_exit.contains("killed") {
        problems.push(format!("recorder: {rec_exit}"));
    }
    let left_state: Vec<String> = [&run_a, &run_b]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".json"))
        .collect();
    if !left_state.is_empty() {
        problems.push(format!("host-mode state left: {left_state:?}"));
    }
    let hosts_clean = after == before && left_state.is_empty();
    if !hosts_clean {
        problems.push(format!("hosts not as before: {before:?} → {after:?}"));
    }
    Ok(Row {
        transport: t.name(),
        protocol,
        chunks: m.chunks,
        ambiguous: m.ambiguous,
        on_time: m.on_time,
        late: m.late,
        never: m.never,
        on_time_fraction: m.on_time as f64 / m.chunks.max(1) as f64,
        out_of_order: m.out_of_order,
        bad_deliveries: m.bad,
        arrived_out_of_order,
        delay_p50_ms: m.delays.p50,
        delay_p99_ms: m.delays.p99,
        delay_max_ms: m.delays.max,
        dropped_by_emulator,
        frames_sent,
        frames_recorded,
        recording: recording.display().to_string(),
        wire,
        srt_latency_ms: matches!(t, Transport::Srt).then(|| spec.srt_latency().as_millis() as u64),
        hosts_clean,
        error: (!problems.is_empty()).then(|| problems.join("; ")),
    })
}

/// The last JSON object a `transmit --json` log has (its final statistics).
fn last_json(log: &str) -> Option<serde_json::Value> {
    log.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter(serde_json::Value::is_object)
}

/// Racing's choice, from the caller's final statistics.
fn reported_protocol(log: &str) -> Option<String> {
    Some(last_json(log)?.get("protocol")?.as_str()?.to_string())
}

/// (capture time in ns, UDP payload) of the datagrams to `port`, in order.
pub fn udp_payloads(pcap: &Path, port: u16) -> Result<Vec<(u64, Vec<u8>)>, Error> {
    let f = std::fs::File::open(pcap)?;
    let mut rd =
        hollywood_wire::pcap::Reader::new(std::io::BufReader::new(f)).map_err(|e| e.to_string())?;
    let lt = rd.linktype();
    let mut out = Vec::new();
    while let Some((t, frame)) = rd.next_packet().map_err(|e| e.to_string())? {
        let Some(ip) = hollywood_wire::pcap::ip_packet(lt, &frame) else {
            continue;
        };
        match crate::compare::udp_lenient(ip) {
            Some((dst, d)) if dst == port => out.push((t, d.to_vec())),
            _ => {}
        }
    }
    Ok(out)
}

/// On-time accounting of `got` against `sent` (each a capture's times).
#[derive(Debug, Default, PartialEq)]
pub struct Measured {
    /// Chunks counted: those whose bytes occur once in what was sent.
    pub chunks: u64,
    /// Chunks left out because other chunks have the same bytes (TS null
    /// padding at a constant mux rate): which one arrived is ambiguous,
    /// and matching them by order would charge a dropped one's send time
    /// to the next one.
    pub ambiguous: u64,
    /// Delivered within the deadline.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Never delivered.
    pub never: u64,
    /// Delivered behind a chunk sent after them.
    pub out_of_order: u64,
    /// Deliveries of bytes never sent, or of a chunk already delivered.
    pub bad: u64,
    /// Delays of what arrived (ms).
    pub delays: Percentiles,
}

/// Match deliveries to sent chunks by their bytes and count. Chunks whose
/// bytes occur more than once in `sent` are left out (see
/// [`Measured::ambiguous`]), and so are their deliveries.
pub fn measure(sent: &[(u64, Vec<u8>)], got: &[(u64, Vec<u8>)], deadline: Duration) -> Measured {
    let mut ids: HashMap<&[u8], Option<usize>> = HashMap::new();
    for (i, (_, d)) in sent.iter().enumerate() {
        ids.entry(d.as_slice())
            .and_modify(|e| *e = None)
            .or_insert(Some(i));
    }
    let mut arrival: Vec<Option<u64>> = vec![None; sent.len()];
    let mut m = Measured::default();
    let mut highest: Option<usize> = None;
    for (t, d) in got {
        let i = match ids.get(d.as_slice()) {
            Some(Some(i)) => *i,
            Some(None) => continue,
            None => {
                m.bad += 1;
                continue;
            }
        };
        if arrival[i].is_some() {
            m.bad += 1;
            continue;
        }
        arrival[i] = Some(*t);
        if highest.is_some_and(|h| i < h) {
            m.out_of_order += 1;
        }
        highest = Some(highest.map_or(i, |h| h.max(i)));
    }
    let limit = deadline.as_nanos() as u64;
    let mut delays = Vec::new();
    for (i, (s, d)) in sent.iter().enumerate() {
        if ids.get(d.as_slice()) != Some(&Some(i)) {
            m.ambiguous += 1;
            continue;
        }
        m.chunks += 1;
        match arrival[i] {
            Some(a) => {
                let d = a.saturating_sub(*s);
                delays.push(d as f64 / 1e6);
                if d <= limit {
                    m.on_time += 1;
                } else {
                    m.late += 1;
                }
            }
            None => m.never += 1,
        }
    }
    m.delays = Percentiles::of(delays);
    m
}

fn wire_of(pcap: &Path) -> Result<Wire, Error> {
    let r = audit_pcap(pcap)?;
    let mut w = Wire::default();
    for f in &r.flows {
        w.rsts += f.rsts;
        if f.dst.map(|d| d.port()) != Some(PORT) {
            continue;
        }
        w.data_segments += f.data_segments;
        w.retransmissions += f.retransmissions;
        w.inconsistent_retransmissions += f.inconsistent_retransmissions;
        w.seq_holes += f.seq_holes;
        if let Some(s) = f.src {
            if !w.client_ports.contains(&s.port()) {
                w.client_ports.push(s.port());
            }
        }
    }
    Ok(w)
}

/// The comparison as a text table.
pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<24} {:>9} {:>6} {:>8} {:>5} {:>5} {:>5} {:>5} {:>7} {:>7} {:>7} {:>9} {:>5} {:>6} {:>5}\n",
        "transport",
        "protocol",
        "chunks",
        "on time",
        "late",
        "never",
        "rx-oo",
        "ooo",
        "p50 ms",
        "p99 ms",
        "max ms",
        "frames",
        "retx",
        "incons",
        "holes"
    );
    for r in rows {
        let (retx, inc, holes) = match &r.wire {
            Some(w) => (
                w.retransmissions.to_string(),
                w.inconsistent_retransmissions.to_string(),
                w.seq_holes.to_string(),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        s += &format!(
            "{:<24} {:>9} {:>6} {:>7.2}% {:>5} {:>5} {:>5} {:>5} {:>7.1} {:>7.1} {:>7.1} {:>4}/{:<4} {:>5} {:>6} {:>5}\n",
            r.transport,
            r.protocol.as_deref().unwrap_or("-"),
            r.chunks,
            r.on_time_fraction * 100.0,
            r.late,
            r.never,
            r.arrived_out_of_order.map_or("-".to_string(), |n| n.to_string()),
            r.out_of_order,
            r.delay_p50_ms,
            r.delay_p99_ms,
            r.delay_max_ms,
            r.frames_recorded,
            r.frames_sent,
            retx,
            inc,
            holes
        );
        if let Some(e) = &r.error {
            s += &format!("  {}: {e}\n", r.transport);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_ones_are_refused() {
        for t in Transport::all() {
            assert_eq!(Transport::parse(&t.name()), Ok(t));
        }
        assert!(Transport::parse("fallback-").is_err());
        assert!(Transport::parse("fallback--to-engine").is_err());
        assert!(Transport::parse("tcp").is_err());
    }

    #[test]
    fn measure_matches_by_bytes_leaves_out_repeated_chunks_and_counts_order_and_lateness() {
        let ms = 1_000_000;
        let sent = vec![
            (0, vec![1]),
            (10 * ms, vec![2]),
            (20 * ms, vec![0]),
            (30 * ms, vec![0]),
            (40 * ms, vec![9]),
            (50 * ms, vec![5]),
        ];
        let got = vec![
            (50 * ms, vec![2]),
            (60 * ms, vec![1]),  // behind 2: out of order, 60 ms
            (70 * ms, vec![0]),  // ambiguous: not counted
            (300 * ms, vec![5]), // late
            (310 * ms, vec![5]), // twice
            (320 * ms, vec![7]), // never sent
        ];
        let m = measure(&sent, &got, Duration::from_millis(100));
        assert_eq!((m.chunks, m.ambiguous), (4, 2));
        assert_eq!((m.on_time, m.late, m.never), (2, 1, 1));
        assert_eq!(m.out_of_order, 1);
        assert_eq!(m.bad, 2);
        assert_eq!(m.delays.max, 250.0);
    }

    #[test]
    fn the_protocol_is_read_from_the_callers_log() {
        assert_eq!(
            reported_protocol("engine: attached\n{\"protocol\":\"hollywood\",\"sent\":3}\n"),
            Some("hollywood".into())
        );
        assert_eq!(reported_protocol("nothing"), None);
    }
}
