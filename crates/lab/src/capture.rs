//! tshark captures on the lab's interfaces and their wire audit.
//!
//! [`Capture`] runs `tshark -i IF -w FILE -F pcap -f FILTER` (inside a
//! network namespace with `ip netns exec`), returns only once tshark
//! reports that it is capturing and the file header is on disk, and stops
//! it with SIGINT, waiting until the file is complete. Dropping a running
//! capture stops it too, so a failing test never leaves tshark behind.
//!
//! [`audit_pcap`] reads the file with our own reader
//! ([`hollywood_wire::pcap::Reader`], link types Ethernet, Linux cooked and
//! raw IP) into the wire audit the simulator uses too
//! ([`hollywood_media::scenario::audit`], re-exported here) and reports, per flow and
//! direction, what a middlebox at that point saw (thesis §4.5 wire image, §5.3 method): data segments,
//! retransmissions, **inconsistent retransmissions** (resent bytes that
//! differ from the bytes first seen at those sequence numbers), length
//! mismatches (a retransmission that does not repeat the start and length
//! of a segment seen before), **sequence holes** (data starting beyond the
//! highest byte seen so far in that direction), RSTs and the experimental
//! "next expected sequence" option ([TCP-video] §7.2). TCP checksums are *not*
//! verified: a capture on a veth sees locally sent packets with checksums
//! left to offload. [`tshark_count`] cross-checks with tshark's own
//! analysis (e.g. `tcp.analysis.retransmission`).

pub use hollywood_media::scenario::audit::{
    audit_reader, Auditor, CaptureReport, FlowAudit, MAX_LISTED_RANGES, MAX_TRACKED_BYTES,
};
pub(crate) use hollywood_media::scenario::audit::{parse_lenient, FlowState};
use hollywood_wire::pcap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long [`Capture::start`] waits for tshark to be capturing.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long [`Capture::stop`] waits for tshark to finish after SIGINT.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Before SIGINT, the file must not have grown for this long: libpcap's
/// TPACKET_V3 ring hands packets to dumpcap block by block (a block is
/// retired when full or after its timeout), and packets in a block not yet
/// retired when tshark stops are lost. Measured: stopping right after the
/// traffic lost the last ~10 % of a 600 kB transfer.
pub const SETTLE: Duration = Duration::from_millis(1300);
/// Kernel capture buffer (tshark `-B`, MiB). tshark's default of 2 MiB
/// holds less than a 2 MB burst at veth speed: when dumpcap is not
/// scheduled in time the ring fills and the *tail* of the burst (and the
/// FIN) is dropped, which once made a loaded test run see a transfer end
/// 27 kB early. [`Capture::stop`] fails when tshark reports any drop.
pub const CAPTURE_BUFFER_MIB: &str = "64";
/// Longest wait for the file to settle.
pub const SETTLE_MAX: Duration = Duration::from_secs(6);

/// Why a capture or an audit failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Starting, signalling or waiting for a process failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// tshark did not start capturing (its stderr is included).
    #[error("tshark did not start capturing on {iface}: {stderr}")]
    NotCapturing {
        /// The interface.
        iface: String,
        /// What tshark printed.
        stderr: String,
    },
    /// The pcap file could not be read.
    #[error("reading {path}: {source}")]
    Pcap {
        /// The file.
        path: PathBuf,
        /// The reader's error.
        source: pcap::ReadError,
    },
    /// A tool exited with an error.
    #[error("{0}")]
    Tool(String),
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A running tshark capture. Stop it with [`Capture::stop`]; dropping it
/// stops it as well (errors ignored).
#[derive(Debug)]
pub struct Capture {
    child: Option<Child>,
    path: PathBuf,
    iface: String,
    stderr: mpsc::Receiver<String>,
    log: String,
}

impl Capture {
    /// Start `tshark -i iface -w path -F pcap -f filter -q` (in namespace
    /// `ns` when given) and wait until it is capturing: tshark printed
    /// "Capturing on" and the pcap file header is written. The file is
    /// classic pcap (readable by [`audit_pcap`]).
    pub fn start(ns: Option<&str>, iface: &str, path: &Path, filter: &str) -> Result<Capture> {
        let _ = std::fs::remove_file(path);
        let path_s = path.to_string_lossy().into_owned();
        let mut args: Vec<&str> = Vec::new();
        if let Some(ns) = ns {
            args.extend(["ip", "netns", "exec", ns]);
        }
        args.extend([
            "tshark",
            "-n",
            "-i",
            iface,
            "-w",
            &path_s,
            "-F",
            "pcap",
            "-f",
            filter,
            "-q",
            "-B",
            CAPTURE_BUFFER_MIB,
        ]);
        let mut child = Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_err(format!("spawn {}", args.join(" "))))?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("tshark-stderr".into())
            .spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(io_err("spawn the tshark stderr reader"))?;
        let mut cap = Capture {
            child: Some(child),
            path: path.to_path_buf(),
            iface: iface.to_string(),
            stderr: rx,
            log: String::new(),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let mut announced = false;
        loop {
            cap.drain_stderr();
            announced |= cap.log.contains("Capturing on");
            let header = std::fs::metadata(&cap.path).is_ok_and(|m| m.len() >= 24);
            if announced && header {
                return Ok(cap);
            }
            let exited = cap
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
                .is_some();
            if exited || Instant::now() >= deadline {
                cap.kill();
                std::thread::sleep(Duration::from_millis(50));
                cap.drain_stderr();
                return Err(Error::NotCapturing {
                    iface: cap.iface.clone(),
                    stderr: cap.log.trim().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn drain_stderr(&mut self) {
        while let Ok(l) = self.stderr.try_recv() {
            self.log.push_str(&l);
            self.log.push('\n');
        }
    }

    /// Process id of the running tshark (`None` once stopped).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The capture file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What tshark printed on stderr so far.
    pub fn log(&mut self) -> &str {
        self.drain_stderr();
        &self.log
    }

    /// Wait until the file has not grown for [`SETTLE`] (at most
    /// [`SETTLE_MAX`]), stop with SIGINT and wait (at most
    /// [`STOP_TIMEOUT`]) until tshark has exited, so the file is complete;
    /// returns its path.
    pub fn stop(self) -> Result<PathBuf> {
        self.stop_with_log().map(|(p, _)| p)
    }

    /// Stop several captures after one common settling wait (see
    /// [`Capture::stop`]); returns (path, tshark's stderr) of each.
    pub fn stop_all(caps: Vec<Capture>) -> Result<Vec<(PathBuf, String)>> {
        let paths: Vec<&Path> = caps.iter().map(|c| c.path.as_path()).collect();
        settle(&paths);
        caps.into_iter().map(Capture::stop_now).collect()
    }

    /// [`Capture::stop`], also returning what tshark printed (its final
    /// "N packets captured" / "dropped" lines).
    pub fn stop_with_log(self) -> Result<(PathBuf, String)> {
        settle(&[self.path.as_path()]);
        self.stop_now()
    }

    fn stop_now(mut self) -> Result<(PathBuf, String)> {
        let Some(mut child) = self.child.take() else {
            return Ok((self.path.clone(), self.log.clone()));
        };
        // `ip netns exec` execs tshark, so the child's pid is tshark's.
        let pid = child.id().to_string();
        let _ = Command::new("kill")
            .args(["-INT", &pid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => {
                    std::thread::sleep(Duration::from_millis(20));
                    self.drain_stderr();
                    let dropped = reported_drops(&self.log);
                    if dropped > 0 {
                        return Err(Error::Tool(format!(
                            "the capture on {} dropped {dropped} packets (kernel buffer full): \
                             its audit would be incomplete: {}",
                            self.iface,
                            self.log.trim()
                        )));
                    }
                    break;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    self.drain_stderr();
                    return Err(Error::Tool(format!(
                        "tshark on {} did not stop within {STOP_TIMEOUT:?}: {}",
                        self.iface, self.log
                    )));
                }
            }
        }
        Ok((self.path.clone(), self.log.clone()))
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().to_string();
            let _ = Command::new("kill")
                .args(["-INT", &pid])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Packets tshark reported as dropped when it stopped: its
/// "N packets dropped from IFACE" lines (no line when nothing was dropped).
fn reported_drops(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("dropped"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Wait until none of `paths` has grown for [`SETTLE`] (at most
/// [`SETTLE_MAX`]).
fn settle(paths: &[&Path]) {
    let size = || -> Vec<u64> {
        paths
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .collect()
    };
    let start = Instant::now();
    let mut last = size();
    let mut since = Instant::now();
    while start.elapsed() < SETTLE_MAX {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= SETTLE {
            return;
        }
    }
}

/// Number of packets in `path` matching the tshark display filter
/// `filter` (e.g. `tcp.analysis.retransmission`), by `tshark -r`.
pub fn tshark_count(path: &Path, filter: &str) -> Result<u64> {
    let out = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(path)
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .stdin(Stdio::null())
        .output()
        .map_err(io_err("run tshark -r"))?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "tshark -r {} -Y {filter}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64)
}

/// Audit a pcap file (classic format; Ethernet, Linux cooked or raw IP).
pub fn audit_pcap(path: &Path) -> Result<CaptureReport> {
    let perr = |source| Error::Pcap {
        path: path.to_path_buf(),
        source,
    };
    let f = File::open(path).map_err(io_err(format!("open {}", path.display())))?;
    audit_reader(BufReader::new(f)).map_err(perr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_reported_by_tshark_are_counted() {
        assert_eq!(
            reported_drops("Capturing on 'veth-e'\n1365 packets captured\n"),
            0
        );
        assert_eq!(
            reported_drops(
                "Capturing on 'veth-e'\n1340 packets captured\n25 packets dropped from veth-e\n"
            ),
            25
        );
    }
    use hollywood_sim::{BulkReceiver, BulkSender, LinkConfig, Pattern, SharedBuffer, SimBuilder};
    use hollywood_sim::{LossModel, TcpHost};
    use hollywood_tcp::{Config, ConnectionStats, HollywoodConfig};
    use hollywood_wire::pcap::Reader;
    use hollywood_wire::{build_tcp_ip, SeqNumber, TcpFlags, TcpRepr};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    const TX: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const RX: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    /// A 300 kB transfer over a lossy simulated link; returns the pcap
    /// (raw IP, every transmission as it entered a link) and the sender's
    /// counters.
    fn simulated(always_ir: bool, seed: u64) -> (Vec<u8>, ConnectionStats) {
        let mut sim = SimBuilder::new().seed(seed).build();
        let tx_cfg = Config {
            hollywood: HollywoodConfig {
                always_inconsistent: always_ir,
                ..HollywoodConfig::default()
            },
            ..Config::default()
        };
        let pattern = Pattern::new(seed);
        let dst = SocketAddr::new(RX, 5001);
        let bytes = 300_000;
        let (s1, s2) = (sim.derive_seed(1), sim.derive_seed(2));
        let tx = sim.add_node(TcpHost::new(
            TX,
            tx_cfg,
            s1,
            BulkSender::new(SocketAddr::new(TX, 0), dst, bytes, pattern),
        ));
        let rx = sim.add_node(TcpHost::new(
            RX,
            Config::default(),
            s2,
            BulkReceiver::new(dst, pattern, Some(bytes)),
        ));
        let fwd = LinkConfig::new(10_000_000, Duration::from_millis(10))
            .with_loss(LossModel::Bernoulli(0.03));
        let rev = LinkConfig::new(10_000_000, Duration::from_millis(10));
        sim.connect(tx, 0, rx, 0, fwd, rev).unwrap();
        let buf = SharedBuffer::new();
        sim.capture_pcap(buf.clone()).unwrap();
        sim.run_for(Duration::from_secs(60)).unwrap();
        sim.finish_captures().unwrap();
        let host = sim.node_mut::<TcpHost<BulkSender>>(tx).unwrap();
        let h = host.app().handle().expect("connected");
        let stats = host
            .endpoint()
            .connection(h)
            .map(|c| c.stats().clone())
            .unwrap_or_default();
        let _ = rx;
        (buf.contents(), stats)
    }

    fn sender_flow(r: &CaptureReport) -> &FlowAudit {
        r.flows
            .iter()
            .find(|f| f.src.map(|s| s.ip()) == Some(TX))
            .expect("sender flow")
    }

    #[test]
    fn counts_the_inconsistent_retransmissions_the_engine_sent() {
        let (pcap, stats) = simulated(true, 21);
        let r = audit_reader(&pcap[..]).unwrap();
        let f = sender_flow(&r);
        assert!(stats.retransmitted_segments > 3, "{stats:?}");
        assert_eq!(f.retransmissions, stats.retransmitted_segments);
        assert_eq!(f.inconsistent_retransmissions, stats.always_ir_segments);
        assert_eq!(f.inconsistent_retransmissions, f.retransmissions);
        // Every byte of a complemented retransmission differs.
        assert_eq!(f.inconsistent_bytes, f.retransmitted_bytes);
        assert_eq!(f.inconsistent_ranges.len() as u64, f.retransmissions);
        assert_eq!((f.seq_holes, f.length_mismatches, f.rsts), (0, 0, 0));
        assert_eq!(f.stream_bytes, 300_000);
        assert_eq!(r.not_tcp, 0);
    }

    #[test]
    fn standard_sender_retransmits_consistently() {
        let (pcap, stats) = simulated(false, 22);
        let r = audit_reader(&pcap[..]).unwrap();
        let f = sender_flow(&r);
        assert!(f.retransmissions > 3);
        assert_eq!(f.retransmissions, stats.retransmitted_segments);
        assert_eq!(f.inconsistent_retransmissions, 0);
        assert_eq!(f.seq_holes, 0);
    }

    /// The same records behind a 14-byte Ethernet header (what tshark
    /// writes on a veth) give the same audit.
    #[test]
    fn ethernet_captures_audit_the_same() {
        let (pcap, _) = simulated(true, 23);
        let mut rd = Reader::new(&pcap[..]).unwrap();
        let mut eth = Vec::new();
        eth.extend_from_slice(&pcap::MAGIC_MICROS.to_le_bytes());
        eth.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        eth.extend_from_slice(&262_144u32.to_le_bytes());
        eth.extend_from_slice(&pcap::LINKTYPE_ETHERNET.to_le_bytes());
        let mut n = 0;
        while let Some((t, p)) = rd.next_packet().unwrap() {
            let us = t / 1000;
            eth.extend_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
            eth.extend_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
            let len = (p.len() + 14) as u32;
            eth.extend_from_slice(&len.to_le_bytes());
            eth.extend_from_slice(&len.to_le_bytes());
            eth.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00]);
            eth.extend_from_slice(&p);
            n += 1;
        }
        // And one ARP frame, which is not TCP.
        eth.extend_from_slice(&[0u8; 8]);
        eth.extend_from_slice(&42u32.to_le_bytes());
        eth.extend_from_slice(&42u32.to_le_bytes());
        let mut arp = vec![0xffu8; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.resize(42, 0);
        eth.extend_from_slice(&arp);
        let raw = audit_reader(&pcap[..]).unwrap();
        let e = audit_reader(&eth[..]).unwrap();
        assert_eq!(e.packets, n + 1);
        assert_eq!(e.not_tcp, 1);
        assert_eq!(e.flows, raw.flows);
    }

    fn seg(seq: u32, payload: &[u8], flags: TcpFlags, bad_checksum: bool) -> Vec<u8> {
        let tcp = TcpRepr {
            seq: SeqNumber(seq),
            flags,
            ..Default::default()
        };
        let mut p = build_tcp_ip(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            &tcp,
            payload,
        );
        if bad_checksum {
            // What a capture sees for a locally sent packet with checksum
            // offload: a partial sum.
            p[20 + 16] ^= 0x5a;
        }
        p
    }

    #[test]
    fn holes_mismatches_inconsistency_rsts_and_options() {
        let mut a = Auditor::new();
        let raw = pcap::LINKTYPE_RAW;
        a.observe_frame(raw, &seg(99, &[], TcpFlags::SYN, false));
        a.observe_frame(raw, &seg(100, &[1; 10], TcpFlags::ACK, true));
        a.observe_frame(raw, &seg(110, &[2; 10], TcpFlags::ACK, false));
        a.observe_frame(raw, &seg(130, &[3; 10], TcpFlags::ACK, false)); // hole 120..130
        a.observe_frame(raw, &seg(100, &[1; 10], TcpFlags::ACK, false)); // consistent
        a.observe_frame(raw, &seg(110, &[9; 10], TcpFlags::ACK, false)); // inconsistent
        a.observe_frame(raw, &seg(100, &[1; 5], TcpFlags::ACK, false)); // shorter
        a.observe_frame(raw, &seg(120, &[4; 10], TcpFlags::ACK, false)); // fills the hole
        let mut with_opt = TcpRepr {
            seq: SeqNumber(140),
            flags: TcpFlags::ACK,
            ..Default::default()
        };
        with_opt.options.next_expected = Some(SeqNumber(150));
        a.observe_frame(
            raw,
            &build_tcp_ip(
                "10.0.0.1:1".parse().unwrap(),
                "10.0.0.2:2".parse().unwrap(),
                &with_opt,
                &[],
            ),
        );
        a.observe_frame(raw, &seg(140, &[], TcpFlags::RST, false));
        a.observe_frame(raw, &[0x45, 0, 0]); // junk
        let r = a.report();
        assert_eq!(r.packets, 11);
        assert_eq!(r.not_tcp, 1);
        let f = &r.flows[0];
        assert_eq!(f.seq_holes, 1);
        assert_eq!(f.data_segments, 7);
        assert_eq!(f.retransmissions, 4);
        assert_eq!(f.inconsistent_retransmissions, 1);
        assert_eq!(f.inconsistent_bytes, 10);
        assert_eq!(f.inconsistent_ranges, vec![(10, 20)]);
        // The shorter one and the hole filler repeat no earlier segment.
        assert_eq!(f.length_mismatches, 2);
        assert_eq!((f.rsts, f.syns, f.next_expected_options), (1, 1, 1));
        assert_eq!(f.stream_bytes, 40);
    }
}
