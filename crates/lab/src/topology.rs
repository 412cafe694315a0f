//! Two- and three-host labs in network namespaces, with the link emulator
//! ([`crate::netem`]) in the middle.
//!
//! ```text
//! two hosts:   a 10.88.1.2 ─ 10.88.1.1 e 10.88.2.1 ─ 10.88.2.2 b
//! three hosts: a 10.88.1.2 ─ 10.88.1.1 e 10.88.3.1 ─ 10.88.3.2 r 10.88.2.1 ─ 10.88.2.2 b
//! ```
//!
//! IPv6 uses `fd88:N::x/64` with the same `N` and `x`. Namespaces are
//! `<name>-a`, `<name>-e`, `<name>-r`, `<name>-b`; the veth in host `X`
//! toward neighbour `Y` is called `veth-y` (so `veth-e` in a, `veth-a` and
//! `veth-b` in e). a and b route everything through their neighbour; e and
//! r route the engine subnets `10.88.11.0/24` / `fd88:11::/64` (behind a)
//! and `10.88.12.0/24` / `fd88:12::/64` (behind b), which
//! [`Lab::engine_tun`] attaches. Every namespace forwards (v4 and v6), has
//! `rp_filter` off and duplicate address detection off.
//!
//! [`Lab::up`] first removes any lab of the same name (so it is
//! idempotent), and a [`Lab`] deletes its namespaces — and with them every
//! veth and TUN inside — when dropped, also when [`Lab::up`] fails midway.
//! The emulator runs in-process on its own thread.

use crate::netem::{Netem, NetemConfig, NetemStats, PacketHook};
use hollywood_io::{NetNs, TunConfig, TunDevice, VethPair};
use hollywood_sim::LinkConfig;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// What can go wrong building or running a lab.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// Namespaces, veths and TUN devices need root.
    #[error(
        "hollywood lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces and TUN devices; run it as root (e.g. with sudo)"
    )]
    NotRoot,
    /// A namespace, interface or command failed.
    #[error(transparent)]
    Tun(#[from] hollywood_io::Error),
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being attempted.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A bad parameter.
    #[error("{0}")]
    Config(String),
}

impl LabError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> LabError {
        LabError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for the lab.
pub type Result<T> = std::result::Result<T, LabError>;

/// A host (namespace) of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Host {
    /// The left end host.
    A,
    /// The emulator.
    E,
    /// The router (three-host lab only).
    R,
    /// The right end host.
    B,
}

impl Host {
    /// Lower-case letter used in namespace and interface names.
    #[must_use]
    pub fn letter(self) -> char {
        match self {
            Host::A => 'a',
            Host::E => 'e',
            Host::R => 'r',
            Host::B => 'b',
        }
    }

    /// Parse `a`, `e`, `r` or `b`.
    pub fn parse(s: &str) -> Result<Host> {
        match s.to_ascii_lowercase().as_str() {
            "a" => Ok(Host::A),
            "e" => Ok(Host::E),
            "r" => Ok(Host::R),
            "b" => Ok(Host::B),
            _ => Err(LabError::Config(format!(
                "unknown host '{s}': use a, e, r (three-host lab) or b"
            ))),
        }
    }
}

/// What [`Lab::up`] builds.
pub struct LabSpec {
    /// Namespace prefix, e.g. `"hw"` → `hw-a`, `hw-e`, `hw-b`.
    pub name: String,
    /// Put a router namespace r between e and b.
    pub three_hosts: bool,
    /// Emulated path a→b (rate 0 = unlimited).
    pub a_to_b: LinkConfig,
    /// Emulated path b→a.
    pub b_to_a: LinkConfig,
    /// Seed of the emulator's randomness.
    pub seed: u64,
    /// Runs in the emulator before the link model.
    pub hook: Option<Box<dyn PacketHook>>,
}

impl std::fmt::Debug for LabSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabSpec")
            .field("name", &self.name)
            .field("three_hosts", &self.three_hosts)
            .field("a_to_b", &self.a_to_b)
            .field("b_to_a", &self.b_to_a)
            .field("seed", &self.seed)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

/// Longest lab name (namespace names are `<name>-x`, at most 64 bytes).
pub const MAX_NAME_LEN: usize = 48;

/// Check a lab name: 1..=48 ASCII letters, digits, `-`, `_`, `.`, not
/// starting with `.` or `-`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(LabError::Config(format!(
            "bad lab name {name:?}: use 1..={MAX_NAME_LEN} ASCII letters, digits, '-', '_' or '.', not starting with '.' or '-'"
        )))
    }
}

/// Namespace name of `host` in lab `name`.
#[must_use]
pub fn ns_name(name: &str, host: Host) -> String {
    format!("{name}-{}", host.letter())
}

fn ns_exists(name: &str) -> bool {
    std::path::Path::new(hollywood_io::netns::NETNS_DIR)
        .join(name)
        .exists()
}

/// Subnet number of the link between two neighbours (10.88.N.0/24).
fn link_net(three_hosts: bool, x: Host, y: Host) -> Option<u8> {
    use Host::*;
    match (x, y) {
        (A, E) | (E, A) => Some(1),
        (E, B) | (B, E) if !three_hosts => Some(2),
        (E, R) | (R, E) if three_hosts => Some(3),
        (R, B) | (B, R) if three_hosts => Some(2),
        _ => None,
    }
}

fn v4(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 88, net, host))
}

fn v6(net: u8, host: u16) -> IpAddr {
    // fd88:N::x — N written in hex digits that read like the decimal N.
    let n = u16::from_str_radix(&net.to_string(), 16).unwrap_or(0);
    IpAddr::V6(Ipv6Addr::new(0xfd88, n, 0, 0, 0, 0, 0, host))
}

fn addr_on(net: u8, host: u8, v6_: bool) -> IpAddr {
    if v6_ {
        v6(net, u16::from(host))
    } else {
        v4(net, host)
    }
}

/// A running lab. Dropping it stops the emulator and deletes every
/// namespace it created (and so every interface in them).
pub struct Lab {
    name: String,
    three_hosts: bool,
    // Field order is drop order: emulator, veths, namespaces.
    netem: Option<Netem>,
    veths: Vec<VethPair>,
    namespaces: Vec<(Host, NetNs)>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("name", &self.name)
            .field("three_hosts", &self.three_hosts)
            .field("emulator", &self.netem.is_some())
            .finish_non_exhaustive()
    }
}

impl Lab {
    /// Build the lab of `spec` with the emulator running in this process.
    /// Removes a lab of the same name first; on error, removes whatever it
    /// created.
    pub fn up(spec: LabSpec) -> Result<Lab> {
        let config = NetemConfig::new(spec.a_to_b, spec.b_to_a, spec.seed);
        Lab::up_with(&spec.name, spec.three_hosts, config, spec.hook)
    }

    /// [`Lab::up`] with a full emulator configuration (traces, schedules).
    pub fn up_with(
        name: &str,
        three_hosts: bool,
        config: NetemConfig,
        hook: Option<Box<dyn PacketHook>>,
    ) -> Result<Lab> {
        let mut lab = Lab::create(name, three_hosts)?;
        let ns_e = lab.ns(Host::E);
        let (iif_a, iif_b) = lab.emulator_ifaces();
        let netem = Netem::start(ns_e, &iif_a, &iif_b, config, hook)?;
        lab.netem = Some(netem);
        Ok(lab)
    }

    /// Build the namespaces, veths, addresses and routes without an
    /// emulator (e forwards a↔b directly until one is started, e.g. by
    /// `hollywood netem run --lab NAME`). Removes a lab of the same name
    /// first; on error, removes whatever it created.
    pub fn create(name: &str, three_hosts: bool) -> Result<Lab> {
        if !hollywood_io::is_root() {
            return Err(LabError::NotRoot);
        }
        check_name(name)?;
        Lab::down(name)?;
        let mut lab = Lab {
            name: name.to_owned(),
            three_hosts,
            netem: None,
            veths: Vec::new(),
            namespaces: Vec::new(),
        };
        for host in lab.hosts() {
            let ns = NetNs::create(&ns_name(name, host))?;
            lab.namespaces.push((host, ns));
            let ns = lab.ns(host);
            for (key, value) in [
                ("net.ipv4.ip_forward", "1"),
                ("net.ipv6.conf.all.forwarding", "1"),
                ("net.ipv4.conf.all.rp_filter", "0"),
                ("net.ipv4.conf.default.rp_filter", "0"),
                ("net.ipv6.conf.all.accept_dad", "0"),
                ("net.ipv6.conf.default.accept_dad", "0"),
            ] {
                ns.set_sysctl(key, value)?;
            }
        }
        let chain = lab.chain();
        for pair in chain.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            let veth = VethPair::create(lab.ns(x), &lab.iface(x, y), lab.ns(y), &lab.iface(y, x))?;
            lab.veths.push(veth);
            // One segment per packet, as on a wire: a veth would otherwise
            // carry the end hosts' GSO/TSO super-packets (up to 64 KB), which
            // captures see as one packet while the emulator, behind the
            // forwarding path, gets them cut into MSS-sized segments. And
            // each flow's packets on one CPU, in order
            // (`NetNs::steer_by_flow`).
            for (h, other) in [(x, y), (y, x)] {
                lab.ns(h).steer_by_flow(&lab.iface(h, other))?;
                if matches!(h, Host::A | Host::B) {
                    lab.ns(h).ip(&[
                        "link",
                        "set",
                        "dev",
                        &lab.iface(h, other),
                        "gso_max_segs",
                        "1",
                    ])?;
                }
            }
            let net = link_net(three_hosts, x, y)
                .ok_or_else(|| LabError::Config(format!("no link between {x:?} and {y:?}")))?;
            // The host nearer a gets .1 except a itself (.2); b gets .2.
            let (hx, hy) = if x == Host::A { (2, 1) } else { (1, 2) };
            for v6_ in [false, true] {
                let prefix = if v6_ { 64 } else { 24 };
                lab.ns(x)
                    .add_addr(&lab.iface(x, y), addr_on(net, hx, v6_), prefix)?;
                lab.ns(y)
                    .add_addr(&lab.iface(y, x), addr_on(net, hy, v6_), prefix)?;
            }
        }
        lab.add_routes()?;
        Ok(lab)
    }

    /// Hosts of this lab from a to b.
    fn chain(&self) -> Vec<Host> {
        if self.three_hosts {
            vec![Host::A, Host::E, Host::R, Host::B]
        } else {
            vec![Host::A, Host::E, Host::B]
        }
    }

    fn hosts(&self) -> Vec<Host> {
        self.chain()
    }

    fn add_routes(&self) -> Result<()> {
        let chain = self.chain();
        let last = chain.len() - 1;
        for v6_ in [false, true] {
            // End hosts: default route via their neighbour.
            for (host, nb) in [(chain[0], chain[1]), (chain[last], chain[last - 1])] {
                let gw = self.gateway(host, nb, v6_)?;
                self.ns(host).add_route("default", Some(gw), None)?;
            }
            // Middle hosts: the engine subnets and the link subnets beyond
            // their neighbours, each via the neighbour on that side.
            for i in 1..last {
                let host = chain[i];
                let mut a_nets: Vec<u8> = vec![engine_net(Host::A)];
                let mut b_nets: Vec<u8> = vec![engine_net(Host::B)];
                for (j, pair) in chain.windows(2).enumerate() {
                    let net = self.net(pair[0], pair[1]);
                    if j + 1 < i {
                        a_nets.push(net);
                    } else if j > i {
                        b_nets.push(net);
                    }
                }
                for (nets, nb) in [(a_nets, chain[i - 1]), (b_nets, chain[i + 1])] {
                    let gw = self.gateway(host, nb, v6_)?;
                    for net in nets {
                        let dest = if v6_ {
                            format!("{}/64", v6(net, 0))
                        } else {
                            format!("{}/24", v4(net, 0))
                        };
                        self.ns(host).add_route(&dest, Some(gw), None)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn gateway(&self, host: Host, nb: Host, v6_: bool) -> Result<IpAddr> {
        self.neighbour_addr(host, nb, v6_)
            .ok_or_else(|| LabError::Config(format!("{nb:?} is not a neighbour of {host:?}")))
    }

    fn net(&self, x: Host, y: Host) -> u8 {
        link_net(self.three_hosts, x, y).unwrap_or(0)
    }

    /// Address of neighbour `nb` on the link it shares with `host`.
    fn neighbour_addr(&self, host: Host, nb: Host, v6_: bool) -> Option<IpAddr> {
        let net = link_net(self.three_hosts, host, nb)?;
        let chain = self.chain();
        let pos = |h| chain.iter().position(|&c| c == h);
        let (ph, pn) = (pos(host)?, pos(nb)?);
        // On each link the end nearer a holds .1, except a itself (.2).
        let nb_is_left = pn < ph;
        let x = if nb == Host::A {
            2
        } else if nb_is_left || host == Host::A {
            1
        } else {
            2
        };
        Some(addr_on(net, x, v6_))
    }

    /// Open an existing lab (e.g. one made by `hollywood lab up`) without
    /// taking ownership: dropping the value deletes nothing.
    pub fn open(name: &str) -> Result<Lab> {
        check_name(name)?;
        let three_hosts = ns_exists(&ns_name(name, Host::R));
        let mut lab = Lab {
            name: name.to_owned(),
            three_hosts,
            netem: None,
            veths: Vec::new(),
            namespaces: Vec::new(),
        };
        for host in lab.hosts() {
            let ns = NetNs::open(&ns_name(name, host)).map_err(|_| {
                LabError::Config(format!(
                    "lab {name:?} does not exist (no namespace {}); create it with `hollywood lab up --name {name}`",
                    ns_name(name, host)
                ))
            })?;
            lab.namespaces.push((host, ns));
        }
        Ok(lab)
    }

    /// Whether any namespace of lab `name` exists.
    #[must_use]
    pub fn exists(name: &str) -> bool {
        [Host::A, Host::E, Host::R, Host::B]
            .iter()
            .any(|&h| ns_exists(&ns_name(name, h)))
    }

    /// Delete every namespace of lab `name` (no error if there is none).
    /// Returns whether anything was deleted. Does not stop an emulator
    /// process (see `hollywood lab down`); its TUN devices vanish with the
    /// namespace.
    pub fn down(name: &str) -> Result<bool> {
        check_name(name)?;
        let mut any = false;
        for host in [Host::A, Host::E, Host::R, Host::B] {
            let ns = ns_name(name, host);
            if ns_exists(&ns) {
                hollywood_io::netns::run_command("ip", &["netns", "del", &ns])?;
                any = true;
            }
        }
        Ok(any)
    }

    /// Keep the namespaces after this value is dropped (for `hollywood lab
    /// up`, whose lab outlives the command). Stops an in-process emulator.
    pub fn persist(mut self) {
        self.netem = None;
        for veth in self.veths.drain(..) {
            std::mem::forget(veth);
        }
        for (_, ns) in self.namespaces.drain(..) {
            std::mem::forget(ns);
        }
    }

    /// The lab's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the lab has the router namespace r.
    #[must_use]
    pub fn three_hosts(&self) -> bool {
        self.three_hosts
    }

    /// The namespace of `host`.
    ///
    /// # Panics
    /// If `host` is [`Host::R`] in a two-host lab.
    #[must_use]
    pub fn ns(&self, host: Host) -> &NetNs {
        match self.namespaces.iter().find(|(h, _)| *h == host) {
            Some((_, ns)) => ns,
            None => panic!(
                "lab {:?} has no host {host:?} (R exists only in a three-host lab)",
                self.name
            ),
        }
    }

    /// The host's veth address: a and b their only one, e the one toward a,
    /// r the one toward b.
    #[must_use]
    pub fn addr(&self, host: Host, v6_: bool) -> IpAddr {
        let chain = self.chain();
        let toward = match host {
            Host::A => Host::E,
            Host::E => Host::A,
            Host::R => Host::B,
            Host::B => chain[chain.len() - 2],
        };
        self.neighbour_addr(toward, host, v6_)
            .unwrap_or_else(|| panic!("lab {:?} has no host {host:?}", self.name))
    }

    /// The engine's address behind a (10.88.11.2 / fd88:11::2) or b
    /// (10.88.12.2 / fd88:12::2), reached through [`Lab::engine_tun`].
    ///
    /// # Panics
    /// For e and r, which have no engine subnet.
    #[must_use]
    pub fn engine_addr(&self, host: Host, v6_: bool) -> IpAddr {
        addr_on(engine_net(host), 2, v6_)
    }

    /// Create the TUN device in a or b whose kernel side holds
    /// 10.88.1x.1/24 and fd88:1x::1/64, so the engine address
    /// ([`Lab::engine_addr`]) is reached through it. Call inside a tokio
    /// runtime. The device is deleted when dropped (or with the lab).
    pub fn engine_tun(&self, host: Host) -> Result<TunDevice> {
        if !matches!(host, Host::A | Host::B) {
            return Err(LabError::Config(format!(
                "engine TUNs live in host a or b, not {host:?}"
            )));
        }
        let net = engine_net(host);
        let config = TunConfig {
            name: "hweng%d".to_owned(),
            mtu: 1500,
            addrs: vec![(addr_on(net, 1, false), 24), (addr_on(net, 1, true), 64)],
            ..TunConfig::default()
        };
        let ns = self.ns(host);
        let tun = TunDevice::create(ns, &config)?;
        ns.set_sysctl(&format!("net.ipv4.conf.{}.rp_filter", tun.name()), "0")?;
        Ok(tun)
    }

    /// Name of the veth in `host` on the path toward `toward` (e.g. for
    /// tshark): `iface(A, B)` is a's only veth, `veth-e`.
    #[must_use]
    pub fn iface(&self, host: Host, toward: Host) -> String {
        let chain = self.chain();
        let pos = |h| chain.iter().position(|&c| c == h);
        let (Some(ph), Some(pt)) = (pos(host), pos(toward)) else {
            return format!("veth-{}", toward.letter());
        };
        let nb = match pt.cmp(&ph) {
            std::cmp::Ordering::Greater => chain[ph + 1],
            std::cmp::Ordering::Less => chain[ph - 1],
            std::cmp::Ordering::Equal => toward,
        };
        format!("veth-{}", nb.letter())
    }

    /// The emulator's ingress interfaces: (from a, from b).
    #[must_use]
    pub fn emulator_ifaces(&self) -> (String, String) {
        (self.iface(Host::E, Host::A), self.iface(Host::E, Host::B))
    }

    /// Counters of the in-process emulator (zero without one).
    #[must_use]
    pub fn netem_stats(&self) -> NetemStats {
        self.netem.as_ref().map(Netem::stats).unwrap_or_default()
    }

    /// The in-process emulator, if any.
    #[must_use]
    pub fn netem(&self) -> Option<&Netem> {
        self.netem.as_ref()
    }
}

/// Measurement helpers: `ping` and `iperf3` run inside the lab's
/// namespaces (Debian packages `iputils-ping` and `iperf3`).
impl Lab {
    /// Round-trip times in ms of `count` pings from `from` to `dst`, sent
    /// every `interval` (below 200 ms needs root, which the lab has).
    pub fn ping(
        &self,
        from: Host,
        dst: IpAddr,
        count: u32,
        interval: Duration,
    ) -> Result<Vec<f64>> {
        let out = self.ns(from).exec(&[
            "ping",
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            &format!("{:.3}", interval.as_secs_f64()),
            "-W",
            "2",
            &dst.to_string(),
        ])?;
        Ok(out
            .lines()
            .filter_map(|l| l.split("time=").nth(1))
            .filter_map(|t| t.split_whitespace().next()?.parse().ok())
            .collect())
    }

    /// Run an `iperf3` server (one test, `-1`, JSON) in `server` and the
    /// client `iperf3 -c <server's address> -p port -J <args>` in `client`;
    /// returns the client's JSON report (with `--get-server-output` among
    /// `args` it holds the server's report as `server_output_json`). The
    /// server is killed on return.
    pub fn iperf3(
        &self,
        client: Host,
        server: Host,
        port: u16,
        args: &[&str],
    ) -> Result<serde_json::Value> {
        let ns = self
            .ns(server)
            .name()
            .ok_or_else(|| LabError::Config("iperf3 needs a named namespace".into()))?
            .to_owned();
        let port_s = port.to_string();
        let child = std::process::Command::new("ip")
            .args([
                "netns", "exec", &ns, "iperf3", "-s", "-1", "-J", "-p", &port_s,
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| LabError::io("start iperf3 -s (is iperf3 installed?)", e))?;
        let _server = KillOnDrop(child);
        let dst = self.addr(server, false).to_string();
        let mut full = vec!["iperf3", "-c", dst.as_str(), "-p", &port_s, "-J"];
        full.extend_from_slice(args);
        // The server needs a moment to listen: retry a refused connection.
        let mut last = String::new();
        for _ in 0..20 {
            match self.ns(client).exec(&full) {
                Ok(out) => {
                    return serde_json::from_str(&out).map_err(|e| {
                        LabError::Config(format!("iperf3 printed no JSON report: {e}"))
                    })
                }
                Err(hollywood_io::Error::Command { stderr, .. })
                    if stderr.contains("refused") || stderr.is_empty() =>
                {
                    last = stderr;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(LabError::Config(format!(
            "iperf3 client could not reach the server at {dst}:{port}: {last}"
        )))
    }
}

/// Receiver-side rate in bit/s of an iperf3 run from the server's
/// one-second intervals, leaving out the first `skip` (the path filling
/// up; for TCP also the slow-start overshoot, whose loss recovery releases
/// data held in the receiver's out-of-order queue in a burst that makes an
/// interval exceed the link rate) and any partial last one (the queue
/// draining after the sender stopped): the steady-state rate. Needs
/// `--get-server-output`.
pub fn iperf3_steady_rate(report: &serde_json::Value, skip: usize) -> Result<f64> {
    let intervals = report["server_output_json"]["intervals"]
        .as_array()
        .ok_or_else(|| {
            LabError::Config(
                "iperf3 report has no server intervals (use --get-server-output)".into(),
            )
        })?;
    let (mut bytes, mut secs) = (0.0, 0.0);
    for i in intervals.iter().skip(skip) {
        let (b, s) = (i["sum"]["bytes"].as_f64(), i["sum"]["seconds"].as_f64());
        if let (Some(b), Some(s)) = (b, s) {
            if s >= 0.9 {
                bytes += b;
                secs += s;
            }
        }
    }
    if secs == 0.0 {
        return Err(LabError::Config(format!(
            "iperf3 ran too briefly for a steady-state interval after skipping {skip} s"
        )));
    }
    Ok(bytes * 8.0 / secs)
}

/// A child process killed and reaped when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn engine_net(host: Host) -> u8 {
    match host {
        Host::A => 11,
        Host::B => 12,
        other => panic!("only hosts a and b have an engine subnet, not {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(three_hosts: bool) -> Lab {
        Lab {
            name: "t".into(),
            three_hosts,
            netem: None,
            veths: Vec::new(),
            namespaces: Vec::new(),
        }
    }

    #[test]
    fn addresses_follow_the_documented_plan() {
        let two = fake(false);
        assert_eq!(two.addr(Host::A, false).to_string(), "10.88.1.2");
        assert_eq!(two.addr(Host::E, false).to_string(), "10.88.1.1");
        assert_eq!(two.addr(Host::B, false).to_string(), "10.88.2.2");
        assert_eq!(two.addr(Host::B, true).to_string(), "fd88:2::2");
        assert_eq!(
            two.neighbour_addr(Host::B, Host::E, false)
                .unwrap()
                .to_string(),
            "10.88.2.1"
        );
        assert_eq!(two.engine_addr(Host::A, false).to_string(), "10.88.11.2");
        assert_eq!(two.engine_addr(Host::B, true).to_string(), "fd88:12::2");
        let three = fake(true);
        assert_eq!(three.addr(Host::R, false).to_string(), "10.88.2.1");
        assert_eq!(
            three
                .neighbour_addr(Host::E, Host::R, false)
                .unwrap()
                .to_string(),
            "10.88.3.2"
        );
        assert_eq!(
            three
                .neighbour_addr(Host::R, Host::E, true)
                .unwrap()
                .to_string(),
            "fd88:3::1"
        );
        assert_eq!(
            three
                .neighbour_addr(Host::B, Host::R, false)
                .unwrap()
                .to_string(),
            "10.88.2.1"
        );
    }

    #[test]
    fn interface_names() {
        let two = fake(false);
        assert_eq!(two.iface(Host::A, Host::B), "veth-e");
        assert_eq!(two.iface(Host::E, Host::B), "veth-b");
        assert_eq!(two.emulator_ifaces(), ("veth-a".into(), "veth-b".into()));
        let three = fake(true);
        assert_eq!(three.iface(Host::E, Host::B), "veth-r");
        assert_eq!(three.iface(Host::B, Host::A), "veth-r");
        assert_eq!(three.iface(Host::R, Host::A), "veth-e");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("hw").is_ok());
        assert!(check_name("hwn-123-1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("-x").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name(&"x".repeat(49)).is_err());
        assert!(Host::parse("R").is_ok());
        assert!(Host::parse("z").is_err());
    }
}
