//! `hollywood host up|status|down|clear` end to end (root only), run as a
//! user types them, in a fresh network namespace whose default route is a
//! veth (MTU 1400) to a second namespace: what `up` makes (persistent TUN
//! `hwh<i>` with the egress MTU, the nftables table, ip_forward = 1, the
//! state file) and that `down` and `clear` leave nothing and restore
//! ip_forward; a FORWARD policy of DROP (iptables) gets tagged holes that
//! go with the instance; a native nftables drop and a missing
//! CAP_NET_ADMIN fail with one line and create nothing.
//!
//! Namespaces are `hwhm-PID-…`; the run directory (state, lock, saved
//! sysctls) is a temporary one (`HOLLYWOOD_RUN_DIR`), so nothing touches
//! the machine's `/run/hollywood` or its own namespace.

mod common;

use hollywood_io::{NetNs, VethPair};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// A namespace with a veth default route (MTU 1400) to a peer namespace,
/// and a private run directory.
struct Net {
    ns: NetNs,
    run_dir: PathBuf,
    _veth: VethPair,
    peer: NetNs,
    /// Held until everything above is gone (fields drop after `drop`, in
    /// order): the next test starts on a clean machine.
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = self.hollywood(&["host", "clear"]);
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

fn net(tag: &str) -> Option<(Net, ())> {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, TUN devices, nftables)");
        return None;
    }
    if !hollywood_test_support::have_tool("nft", "--version") {
        hollywood_test_support::skip("needs the nft tool (package nftables)");
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _ = NetNs::remove_stale("hwhm");
    let pid = std::process::id();
    let ns = NetNs::create(&format!("hwhm-{pid}-{tag}")).expect("namespace");
    let peer = NetNs::create(&format!("hwhm-{pid}-{tag}-gw")).expect("peer namespace");
    let veth = VethPair::create(&ns, "hwhm-eg", &peer, "hwhm-gw").expect("veth");
    ns.set_mtu("hwhm-eg", 1400).unwrap();
    peer.set_mtu("hwhm-gw", 1400).unwrap();
    let gw = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    ns.add_addr("hwhm-eg", IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)), 24)
        .unwrap();
    peer.add_addr("hwhm-gw", gw, 24).unwrap();
    ns.add_route("default", Some(gw), Some("hwhm-eg")).unwrap();
    let run_dir = std::env::temp_dir().join(format!("hwhm-run-{pid}-{tag}"));
    let _ = std::fs::remove_dir_all(&run_dir);
    Some((
        Net {
            ns,
            run_dir,
            _veth: veth,
            peer,
            _serial: guard,
        },
        (),
    ))
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

impl Net {
    fn name(&self) -> &str {
        self.ns.name().expect("a named namespace")
    }

    /// Run `prefix… hollywood args…` inside the namespace.
    fn run_with(&self, prefix: &[&str], args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", self.name()])
            .args(prefix)
            .arg(env!("CARGO_BIN_EXE_hollywood"))
            .args(args)
            .env("HOLLYWOOD_RUN_DIR", &self.run_dir)
            .output()
            .expect("run hollywood")
    }

    fn hollywood(&self, args: &[&str]) -> Output {
        self.run_with(&[], args)
    }

    /// `hollywood args…`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.hollywood(args);
        assert!(o.status.success(), "hollywood {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `hollywood args…`, which must fail with one line on stderr; that line.
    fn fails(&self, args: &[&str]) -> String {
        let o = self.hollywood(args);
        assert!(
            !o.status.success(),
            "hollywood {args:?} succeeded: {}",
            text(&o)
        );
        let err = String::from_utf8_lossy(&o.stderr).trim().to_owned();
        assert_eq!(err.lines().count(), 1, "one line expected: {err}");
        err
    }

    /// A command's stdout in the namespace (it must succeed).
    fn exec(&self, args: &[&str]) -> String {
        self.ns
            .exec(args)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn ip_forward(&self) -> String {
        self.exec(&["cat", "/proc/sys/net/ipv4/ip_forward"])
            .trim()
            .to_owned()
    }

    fn tables(&self) -> Vec<String> {
        let v: Value = serde_json::from_str(&self.exec(&["nft", "-j", "list", "tables"])).unwrap();
        v["nftables"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["table"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    fn links(&self) -> Vec<String> {
        let v: Value = serde_json::from_str(&self.exec(&["ip", "-j", "link", "show"])).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["ifname"].as_str().map(str::to_owned))
            .collect()
    }

    /// Nothing host mode makes is left, and ip_forward is `forward`.
    fn assert_clean(&self, forward: &str) {
        let tables = self.tables();
        assert!(
            !tables.iter().any(|t| t.starts_with("hollywood-")),
            "tables left: {tables:?}"
        );
        let links = self.links();
        let tun = |l: &String| {
            l.strip_prefix("hwh")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        assert!(!links.iter().any(tun), "links left: {links:?}");
        assert_eq!(self.ip_forward(), forward, "ip_forward not restored");
        let files: Vec<String> = std::fs::read_dir(&self.run_dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|f| f.ends_with(".json"))
                    .collect()
            })
            .unwrap_or_default();
        assert!(files.is_empty(), "state files left: {files:?}");
    }

    /// A TCP connect from the peer namespace to `to`, in a thread (4 s
    /// timeout): `Ok` if accepted, else why not.
    fn connect_from_peer(
        &self,
        to: &'static str,
    ) -> hollywood_io::NsThread<Result<(), std::io::ErrorKind>> {
        self.peer
            .spawn("hwhm-connect", move || {
                let to = to.parse().unwrap();
                std::net::TcpStream::connect_timeout(&to, Duration::from_secs(4))
                    .map(drop)
                    .map_err(|e| e.kind())
            })
            .unwrap()
    }

    fn state_file(&self, name: &str) -> PathBuf {
        self.run_dir.join(format!("{name}.json"))
    }
}

fn exists(p: &Path) -> bool {
    p.exists()
}

#[test]
fn host_up_status_down_leave_nothing_behind() {
    let Some((net, _guard)) = net("ud") else {
        return;
    };
    let before = net.ip_forward();
    assert_eq!(before, "0", "a fresh namespace does not forward");

    let out = net.ok(&["host", "up", "--name", "web", "--listen", "9000"]);
    assert!(out.contains("TUN hwh0 (MTU 1400)"), "{out}");
    assert!(out.contains("engine 10.203.0.2"), "{out}");

    // The TUN device: persistent, the egress MTU, the kernel's /30.
    let link: Value =
        serde_json::from_str(&net.exec(&["ip", "-d", "-j", "addr", "show", "dev", "hwh0"]))
            .unwrap();
    let link = &link[0];
    assert_eq!(link["linkinfo"]["info_kind"], "tun", "{link}");
    assert_eq!(link["linkinfo"]["info_data"]["persist"], true, "{link}");
    assert_eq!(link["mtu"], 1400);
    assert!(
        link["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["local"] == "10.203.0.1" && a["prefixlen"] == 30),
        "{link}"
    );
    // The table: DNAT of 9000 to the engine, masquerade out of the veth.
    let table = net.exec(&["nft", "list", "table", "inet", "hollywood-web"]);
    assert!(table.contains("dnat ip to 10.203.0.2"), "{table}");
    assert!(table.contains("9000"), "{table}");
    assert!(table.contains("oifname \"hwhm-eg\""), "{table}");
    assert!(table.contains("masquerade"), "{table}");
    assert_eq!(net.ip_forward(), "1");
    assert!(exists(&net.state_file("web")));

    // An application attaches to the standing device by name.
    let attach = net
        .ns
        .run(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let dev = hollywood_io::TunDevice::attach("hwh0", true).map(|d| d.mtu());
                let missing = hollywood_io::TunDevice::attach("hwh9", false).is_err();
                (dev.map_err(|e| e.to_string()), missing)
            })
        })
        .unwrap();
    assert_eq!(attach, (Ok(1400), true));
    assert!(
        net.links().contains(&"hwh0".to_owned()),
        "attach must not remove the device"
    );

    // A connection from the peer to the listening port reaches the engine's
    // device DNATed to 10.203.0.2:9000, and the kernel does not answer it
    // (no engine runs here: the connect times out instead of being refused).
    let syn = net.connect_from_peer("192.0.2.2:9000");
    let packet = net
        .ns
        .run(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let dev = hollywood_io::TunDevice::attach("hwh0", false).unwrap();
                // The kernel also sends IPv6 link-local packets (router
                // solicitations, MLD) into the device: skip them.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
                loop {
                    let mut buf = vec![0u8; 2048];
                    let n = tokio::time::timeout_at(deadline, dev.recv(&mut buf))
                        .await
                        .expect("an IPv4 packet on hwh0 within 4 s")
                        .unwrap();
                    if n >= 20 && buf[0] >> 4 == 4 {
                        buf.truncate(n);
                        break buf;
                    }
                }
            })
        })
        .unwrap();
    assert_eq!(packet[0] >> 4, 4, "IPv4");
    assert_eq!(packet[9], 6, "TCP");
    assert_eq!(packet[12..16], [192, 0, 2, 1], "source kept");
    assert_eq!(packet[16..20], [10, 203, 0, 2], "DNATed to the engine");
    let tcp = usize::from(packet[0] & 0x0f) * 4;
    assert_eq!(u16::from_be_bytes([packet[tcp + 2], packet[tcp + 3]]), 9000);
    assert_eq!(packet[tcp + 13] & 0x12, 0x02, "a SYN");
    assert_eq!(
        syn.join().unwrap(),
        Err(std::io::ErrorKind::TimedOut),
        "the kernel must not refuse (RST) the engine's port"
    );

    // The way out: a SYN the engine sends from 10.203.0.2 leaves
    // masqueraded to the egress address, from a port above the kernel's
    // ip_local_port_range (seen by the peer), and the peer's SYN-ACK comes
    // back into the device addressed to the engine (the peer has no route
    // to 10.203/16: it answered the egress address).
    let listener = net
        .peer
        .run(|| std::net::TcpListener::bind("192.0.2.1:7100"))
        .unwrap()
        .unwrap();
    let reply = net
        .ns
        .run(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let dev = hollywood_io::TunDevice::attach("hwh0", false).unwrap();
                let syn = hollywood_wire::TcpRepr {
                    seq: hollywood_wire::SeqNumber(1000),
                    flags: hollywood_wire::TcpFlags::SYN,
                    window: 64240,
                    ..Default::default()
                };
                let packet = hollywood_wire::build_tcp_ip(
                    "10.203.0.2:40000".parse().unwrap(),
                    "192.0.2.1:7100".parse().unwrap(),
                    &syn,
                    &[],
                );
                dev.send(&packet).await.unwrap();
                let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
                loop {
                    let mut buf = vec![0u8; 2048];
                    let n = tokio::time::timeout_at(deadline, dev.recv(&mut buf))
                        .await
                        .expect("the peer's answer on hwh0 within 4 s")
                        .unwrap();
                    if n >= 40 && buf[0] >> 4 == 4 && buf[9] == 6 {
                        buf.truncate(n);
                        break buf;
                    }
                }
            })
        })
        .unwrap();
    assert_eq!(reply[12..16], [192, 0, 2, 1], "from the peer");
    assert_eq!(reply[16..20], [10, 203, 0, 2], "de-NATed to the engine");
    let tcp = usize::from(reply[0] & 0x0f) * 4;
    assert_eq!(u16::from_be_bytes([reply[tcp + 2], reply[tcp + 3]]), 40000);
    assert_eq!(reply[tcp + 13] & 0x12, 0x12, "a SYN-ACK");
    let seen = net.peer.exec(&["ss", "-Htn", "state", "syn-recv"]).unwrap();
    let port: u16 = seen
        .split_whitespace()
        .find_map(|w| w.strip_prefix("192.0.2.2:"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the peer saw no SYN from 192.0.2.2: {seen:?}"));
    assert!(port >= 61001, "masqueraded source port {port}");
    drop(listener);

    // The same name twice is refused; so is the same port.
    let err = net.fails(&["host", "up", "--name", "web"]);
    assert!(err.contains("\"web\" is already up"), "{err}");
    let err = net.fails(&["host", "up", "--name", "other", "--listen", "9000"]);
    assert!(err.contains("port 9000 is already forwarded"), "{err}");

    let v: Value = serde_json::from_str(&net.ok(&["host", "status", "--json"])).unwrap();
    assert_eq!(v["schema"]["name"], "hollywood.host.status", "{v}");
    assert_eq!(v["ip_forward"], "1");
    let inst = &v["instances"][0];
    assert_eq!(inst["name"], "web", "{v}");
    assert_eq!(inst["phase"], "up");
    assert_eq!(inst["tun"], "hwh0");
    assert_eq!(inst["listen"], serde_json::json!([9000]));
    assert_eq!(inst["table_present"], true);
    assert_eq!(inst["tun_present"], true);
    assert!(inst["counters"]["forward"].is_u64(), "{inst}");
    assert_eq!(v["orphans"], serde_json::json!([]));

    // `down` without --name takes the only instance.
    let out = net.ok(&["host", "down"]);
    assert!(out.contains("restored net.ipv4.ip_forward = 0"), "{out}");
    net.assert_clean(&before);
    let err = net.fails(&["host", "down", "--name", "web"]);
    assert!(err.contains("no instance named \"web\""), "{err}");
    assert!(net.ok(&["host", "clear"]).contains("nothing to clear"));
}

/// A multi-homed host (issue 32: a relay calls upstream by one interface
/// and serves downstream by another): `--egress A,B` and `--egress routed`
/// put both interfaces in one set in every rule, the TUN takes the
/// smaller MTU, `status` lists them, `down` leaves nothing; an unknown
/// interface fails before anything is made.
#[test]
fn host_up_with_several_egress_interfaces_matches_them_all() {
    let Some((net, _guard)) = net("me") else {
        return;
    };
    let before = net.ip_forward();
    let lan = NetNs::create(&format!("hwhm-{}-me-lan", std::process::id())).expect("namespace");
    let _veth = VethPair::create(&net.ns, "hwhm-e2", &lan, "hwhm-l2").expect("veth");
    net.ns.set_mtu("hwhm-e2", 1300).unwrap();
    net.ns
        .add_addr("hwhm-e2", IpAddr::V4(Ipv4Addr::new(198, 51, 100, 2)), 24)
        .unwrap();

    let out = net.ok(&["host", "up", "--name", "mh", "--egress", "hwhm-eg,hwhm-e2"]);
    assert!(out.contains("(MTU 1300)"), "{out}");
    assert!(out.contains("masquerade out of hwhm-eg,hwhm-e2"), "{out}");
    let table = net.exec(&["nft", "list", "table", "inet", "hollywood-mh"]);
    // nft lists a set's elements in its own order.
    let both = |l: &&str| l.contains("\"hwhm-eg\"") && l.contains("\"hwhm-e2\"");
    let rule = |what: &str| table.lines().filter(both).any(|l| l.contains(what));
    assert!(rule("ip saddr 10.203.0.2 meta l4proto tcp"), "{table}");
    assert!(rule("oifname != {"), "{table}");
    assert!(rule("tcp dport 61001-65535 ct state invalid"), "{table}");
    assert!(
        !table
            .lines()
            .any(|l| l.contains("name \"hwhm-") && !both(&l)),
        "{table}"
    );
    let v: Value = serde_json::from_str(&net.ok(&["host", "status", "--json"])).unwrap();
    assert_eq!(v["instances"][0]["egress"], "hwhm-eg,hwhm-e2", "{v}");
    net.ok(&["host", "down", "--name", "mh"]);
    net.assert_clean(&before);

    // `routed`: every interface a route leaves by (the default route's
    // veth and the second one's connected /24), in the routes' order.
    let out = net.ok(&["host", "up", "--egress", "routed"]);
    assert!(out.contains("masquerade out of hwhm-eg,hwhm-e2"), "{out}");
    net.ok(&["host", "down"]);
    net.assert_clean(&before);

    // An interface that is not there: nothing is made.
    let o = net.hollywood(&["host", "up", "--egress", "hwhm-eg,hwhm-none"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("hwhm-none"),
        "{}",
        text(&o)
    );
    net.assert_clean(&before);
    // Nor with a name that is not an interface's.
    let o = net.hollywood(&["host", "up", "--egress", "a\"b"]);
    assert!(!o.status.success(), "{}", text(&o));
    net.assert_clean(&before);
}

#[test]
fn host_clear_removes_instances_and_what_lost_its_state_file() {
    let Some((net, _guard)) = net("cl") else {
        return;
    };
    let before = net.ip_forward();

    // An instance with its state file (default name h0).
    assert!(net.ok(&["host", "up"]).contains("host h0:"));
    let out = net.ok(&["host", "clear"]);
    assert!(
        out.contains("instance h0") && out.contains("removed TUN device hwh0"),
        "{out}"
    );
    net.assert_clean(&before);

    // Two instances; one loses its state file (a crash between runs):
    // `status` names its objects as orphans, `clear` still removes them
    // and restores ip_forward from the shared sysctl record.
    net.ok(&["host", "up", "--name", "keep"]);
    net.ok(&["host", "up", "--name", "lost", "--listen", "7000,7001"]);
    assert!(
        net.links().contains(&"hwh1".to_owned()),
        "second instance gets index 1"
    );
    std::fs::remove_file(net.state_file("lost")).unwrap();
    let v: Value = serde_json::from_str(&net.ok(&["host", "status", "--json"])).unwrap();
    let orphans = v["orphans"].to_string();
    assert!(
        orphans.contains("inet hollywood-lost") && orphans.contains("TUN device hwh1"),
        "{v}"
    );
    assert_eq!(v["instances"].as_array().unwrap().len(), 1);
    let out = net.ok(&["host", "clear"]);
    assert!(
        out.contains("removed nftables table inet hollywood-lost"),
        "{out}"
    );
    assert!(out.contains("restored net.ipv4.ip_forward = 0"), "{out}");
    net.assert_clean(&before);
    assert!(net.ok(&["host", "clear"]).contains("nothing to clear"));
}

#[test]
fn host_up_handles_an_iptables_forward_drop_and_refuses_a_native_one() {
    let Some((net, _guard)) = net("fw") else {
        return;
    };
    let before = net.ip_forward();

    // iptables (nftables backend) FORWARD policy DROP: two tagged holes,
    // gone with the instance.
    net.exec(&["iptables", "-w", "-P", "FORWARD", "DROP"]);
    let out = net.ok(&["host", "up", "--name", "fw"]);
    assert!(out.contains("forwarding is dropped by iptables"), "{out}");
    let rules = net.exec(&["iptables", "-w", "-S", "FORWARD"]);
    assert_eq!(rules.matches("hollywood:fw").count(), 2, "{rules}");
    net.ok(&["host", "down", "--name", "fw"]);
    let rules = net.exec(&["iptables", "-w", "-S", "FORWARD"]);
    assert!(!rules.contains("hollywood:"), "{rules}");
    assert!(
        rules.contains("-P FORWARD DROP"),
        "the policy is not ours to change"
    );
    net.assert_clean(&before);

    // The same with a policy of ACCEPT and an unconditional DROP at the end.
    net.exec(&["iptables", "-w", "-P", "FORWARD", "ACCEPT"]);
    net.exec(&["iptables", "-w", "-A", "FORWARD", "-j", "DROP"]);
    let out = net.ok(&["host", "up", "--name", "fw2"]);
    assert!(out.contains("forwarding is dropped by iptables"), "{out}");
    net.ok(&["host", "down", "--name", "fw2"]);
    let rules = net.exec(&["iptables", "-w", "-S", "FORWARD"]);
    assert!(
        !rules.contains("hollywood:") && rules.contains("-A FORWARD -j DROP"),
        "{rules}"
    );
    net.assert_clean(&before);

    // A drop in a native nftables table: refused before anything is made.
    net.exec(&["nft", "add", "table", "inet", "myfw"]);
    net.exec(&[
        "nft",
        "add chain inet myfw blockall { type filter hook forward priority 0; policy drop; }",
    ]);
    let err = net.fails(&["host", "up", "--name", "nat"]);
    assert!(
        err.contains("inet myfw") && err.contains("\"blockall\""),
        "{err}"
    );
    net.assert_clean(&before);
    assert!(!exists(&net.state_file("nat")));
}

#[test]
fn host_up_without_cap_net_admin_says_what_is_missing() {
    let Some((net, _guard)) = net("cap") else {
        return;
    };
    if !hollywood_test_support::have_tool("setpriv", "--version") {
        hollywood_test_support::skip("needs setpriv (util-linux) to drop CAP_NET_ADMIN");
        return;
    }
    let o = net.run_with(
        &[
            "setpriv",
            "--bounding-set",
            "-net_admin",
            "--inh-caps",
            "-net_admin",
        ],
        &["host", "up", "--listen", "9000"],
    );
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).trim().to_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs CAP_NET_ADMIN"), "{err}");
    net.assert_clean(&net.ip_forward());
}

/// Attach to `hwh0` in `net`'s namespace, write `send` into it if given,
/// and return the first TCP packet of IP version `version` read back
/// within 4 s (the kernel's own link-local chatter is skipped).
fn tcp_from_tun(net: &Net, send: Option<Vec<u8>>, version: u8) -> Vec<u8> {
    net.ns
        .run(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let dev = hollywood_io::TunDevice::attach("hwh0", false).unwrap();
                if let Some(p) = send {
                    dev.send(&p).await.unwrap();
                }
                let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
                loop {
                    let mut buf = vec![0u8; 2048];
                    let n = tokio::time::timeout_at(deadline, dev.recv(&mut buf))
                        .await
                        .expect("a TCP packet on hwh0 within 4 s")
                        .unwrap();
                    let tcp = match buf[0] >> 4 {
                        4 => n >= 40 && buf[9] == 6,
                        6 => n >= 60 && buf[6] == 6,
                        _ => false,
                    };
                    if tcp && buf[0] >> 4 == version {
                        buf.truncate(n);
                        break buf;
                    }
                }
            })
        })
        .unwrap()
}

#[test]
fn host_up_with_ipv6_dnats_masquerades_and_restores_forwarding() {
    let Some((net, _guard)) = net("v6") else {
        return;
    };
    let ip6 = |s: &str| IpAddr::V6(s.parse().unwrap());
    net.ns
        .add_addr("hwhm-eg", ip6("2001:db8:2::2"), 64)
        .unwrap();
    net.peer
        .add_addr("hwhm-gw", ip6("2001:db8:2::1"), 64)
        .unwrap();
    net.ns
        .add_route("default", Some(ip6("2001:db8:2::1")), Some("hwhm-eg"))
        .unwrap();
    let sysctl = |k: &str| {
        net.exec(&["cat", &format!("/proc/sys/net/ipv6/conf/{k}")])
            .trim()
            .to_owned()
    };
    let force = Path::new("/proc/sys/net/ipv6/conf/all/force_forwarding").exists();
    let keys: &[&str] = if force {
        &["hwhm-eg/force_forwarding"]
    } else {
        &["all/forwarding", "hwhm-eg/accept_ra"]
    };
    let before: Vec<String> = keys.iter().map(|k| sysctl(k)).collect();

    let out = net.ok(&["host", "up", "--name", "six", "--listen", "9000"]);
    assert!(out.contains(", IPv6 kernel fd"), "{out}");
    let v: Value = serde_json::from_str(&net.ok(&["host", "status", "--json"])).unwrap();
    let engine6: std::net::Ipv6Addr = v["instances"][0]["engine_v6"]
        .as_str()
        .expect("engine_v6 in the state")
        .parse()
        .unwrap();
    assert_eq!(engine6.segments()[0] >> 8, 0xfd, "a ULA");
    let table = net.exec(&["nft", "list", "table", "inet", "hollywood-six"]);
    assert!(table.contains(&format!("dnat ip6 to {engine6}")), "{table}");
    if force {
        assert_eq!(sysctl("hwhm-eg/force_forwarding"), "1");
        assert_eq!(sysctl("hwh0/force_forwarding"), "1");
        assert_eq!(sysctl("all/forwarding"), "0", "global forwarding untouched");
    } else {
        assert_eq!(sysctl("all/forwarding"), "1");
        assert_ne!(
            sysctl("hwhm-eg/accept_ra"),
            "1",
            "a router must keep accepting RAs"
        );
    }

    // In: a connection to [2001:db8:2::2]:9000 arrives DNATed to the engine.
    let syn = net.connect_from_peer("[2001:db8:2::2]:9000");
    let p = tcp_from_tun(&net, None, 6);
    assert_eq!(p[8..24], ip6_octets("2001:db8:2::1"), "source kept");
    assert_eq!(p[24..40], engine6.octets(), "DNATed to the engine");
    assert_eq!(u16::from_be_bytes([p[42], p[43]]), 9000);
    assert_eq!(syn.join().unwrap(), Err(std::io::ErrorKind::TimedOut));

    // Out: the engine's SYN leaves masqueraded; the SYN-ACK comes back.
    let listener = net
        .peer
        .run(|| std::net::TcpListener::bind("[2001:db8:2::1]:7100"))
        .unwrap()
        .unwrap();
    let syn = hollywood_wire::TcpRepr {
        seq: hollywood_wire::SeqNumber(1000),
        flags: hollywood_wire::TcpFlags::SYN,
        window: 64240,
        ..Default::default()
    };
    let packet = hollywood_wire::build_tcp_ip(
        std::net::SocketAddr::new(IpAddr::V6(engine6), 40000),
        "[2001:db8:2::1]:7100".parse().unwrap(),
        &syn,
        &[],
    );
    let r = tcp_from_tun(&net, Some(packet), 6);
    assert_eq!(r[8..24], ip6_octets("2001:db8:2::1"));
    assert_eq!(r[24..40], engine6.octets(), "de-NATed to the engine");
    assert_eq!(u16::from_be_bytes([r[42], r[43]]), 40000);
    assert_eq!(r[40 + 13] & 0x12, 0x12, "a SYN-ACK");
    let seen = net.peer.exec(&["ss", "-Htn", "state", "syn-recv"]).unwrap();
    assert!(seen.contains("[2001:db8:2::2]:"), "masqueraded: {seen:?}");
    drop(listener);

    net.ok(&["host", "down"]);
    let after: Vec<String> = keys.iter().map(|k| sysctl(k)).collect();
    assert_eq!(after, before, "IPv6 sysctls restored ({keys:?})");
    net.assert_clean("0");
}

fn ip6_octets(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// `ip netns exec NS hollywood args…` left running (stdout and stderr
/// piped), with the test's run directory.
fn spawn_in(ns: &str, run_dir: &Path, args: &[&str]) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(env!("CARGO_BIN_EXE_hollywood"))
        .args(args)
        .env("HOLLYWOOD_RUN_DIR", run_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn hollywood")
}

/// A UDP socket on 127.0.0.1 in `ns`, reads time out after 200 ms.
fn udp_in(ns: &NetNs) -> std::net::UdpSocket {
    let s = ns
        .run(|| std::net::UdpSocket::bind("127.0.0.1:0"))
        .unwrap()
        .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s
}

/// Send `probe` from `src` to a relay's UDP input at 127.0.0.1:`port`
/// until it comes out at `out` (100 tries, each waiting out `out`'s read
/// timeout): whether it did.
fn relayed(src: &std::net::UdpSocket, port: u16, out: &std::net::UdpSocket, probe: &[u8]) -> bool {
    let mut buf = [0u8; 2048];
    for _ in 0..100 {
        src.send_to(probe, ("127.0.0.1", port)).unwrap();
        if let Ok(n) = out.recv(&mut buf) {
            if &buf[..n] == probe {
                return true;
            }
        }
    }
    false
}

/// SIGTERM, then the process's exit status and stderr.
fn terminate(mut c: std::process::Child) -> (std::process::ExitStatus, String) {
    let _ = Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status();
    let status = c.wait().expect("wait");
    let mut err = String::new();
    if let Some(mut e) = c.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    (status, err)
}

#[test]
fn transmit_with_host_relays_over_the_engine_through_the_nat() {
    // What a user types: `hollywood host up`, then `hollywood transmit
    // udp://… 'hollywood://SERVER:PORT?transport=hollywood' --host`. The
    // engine on hwh0 dials the peer; its connection leaves masqueraded
    // from the host's address, and the peer's `transmit` listener (the
    // message layer on kernel TCP, thesis §4.4) turns the messages back
    // into datagrams.
    let Some((net, _g)) = net("xmit") else { return };
    let before = net.ip_forward();
    net.ok(&["host", "up"]);
    let out = udp_in(&net.peer);
    let out_port = out.local_addr().unwrap().port();
    let peer_name = net.peer.name().unwrap().to_owned();
    let listener = spawn_in(
        &peer_name,
        &net.run_dir,
        &[
            "transmit",
            "hollywood://192.0.2.1:9100?mode=listener&transport=kernel",
            &format!("udp://127.0.0.1:{out_port}"),
        ],
    );
    let src = udp_in(&net.ns);
    let in_port = {
        let p = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        p.local_addr().unwrap().port()
    };
    let caller = spawn_in(
        net.name(),
        &net.run_dir,
        &[
            "transmit",
            &format!("udp://127.0.0.1:{in_port}"),
            "hollywood://192.0.2.1:9100?transport=hollywood",
            "--host",
        ],
    );
    // Until the relay is through: probes until one arrives (20 s at most).
    let mut buf = [0u8; 2048];
    if !relayed(&src, in_port, &out, b"probe") {
        let peer_ss = net.peer.exec(&["ss", "-Htan"]).unwrap_or_default();
        let host_ss = net.ns.exec(&["ss", "-Htuan"]).unwrap_or_default();
        let table = net.ns.exec(&["nft", "list", "ruleset"]).unwrap_or_default();
        let (s, e) = terminate(caller);
        let (_, le) = terminate(listener);
        panic!("nothing came through: caller {s:?}: {e}\nlistener: {le}\npeer sockets:\n{peer_ss}\nhost sockets:\n{host_ss}\nruleset:\n{table}");
    }
    // The connection the peer sees is from the host's address, from a
    // masquerade port: the engine's, not the kernel's.
    let ss = net
        .peer
        .exec(&["ss", "-Htn", "state", "established"])
        .unwrap();
    let remote_port = ss
        .lines()
        .find_map(|l| {
            let peer = l.split_whitespace().nth(3)?;
            peer.strip_prefix("192.0.2.2:")?.parse::<u16>().ok()
        })
        .unwrap_or_else(|| panic!("no connection from 192.0.2.2: {ss}"));
    assert!(remote_port >= 61001, "not a masquerade port: {ss}");
    // 300 numbered datagrams, 2 ms apart, all arrive intact (no loss on
    // this path; each one's lifetime is transmit's default 120 ms). Read
    // as they come: 300 of them overflow a socket's receive buffer.
    while out.recv(&mut buf).is_ok() {}
    let reader = net.peer.spawn("udp-out", move || {
        let mut buf = [0u8; 2048];
        let mut got = std::collections::BTreeSet::new();
        while let Ok(n) = out.recv(&mut buf) {
            if n == 188 * 7 {
                let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
                let intact = buf[4..n]
                    .iter()
                    .enumerate()
                    .all(|(k, &b)| b == (k as u32 ^ i) as u8);
                assert!(intact, "datagram {i} corrupted");
                got.insert(i);
            }
        }
        got
    });
    for i in 0u32..300 {
        let mut d = vec![0u8; 188 * 7];
        d[..4].copy_from_slice(&i.to_be_bytes());
        d[4..]
            .iter_mut()
            .enumerate()
            .for_each(|(k, b)| *b = (k as u32 ^ i) as u8);
        src.send_to(&d, ("127.0.0.1", in_port)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = reader.expect("reader thread").join().expect("reader");
    assert_eq!(got.len(), 300, "arrived: {}", got.len());
    let (status, err) = terminate(caller);
    assert!(status.success(), "caller after SIGTERM: {status:?}: {err}");
    assert!(err.contains("engine: attached at 10.203.0.2"), "{err}");
    let _ = terminate(listener);
    net.ok(&["host", "down"]);
    net.assert_clean(&before);
}

#[test]
fn transmit_with_host_and_no_instance_makes_its_own_and_leaves_nothing() {
    // The in-process form: `transmit --host` on a host where nobody ran
    // `host up` makes an instance for itself. SIGTERM takes it down with
    // the process; after a SIGKILL, `hollywood host clear` does.
    let Some((net, _g)) = net("inproc") else {
        return;
    };
    let before = net.ip_forward();
    let peer_name = net.peer.name().unwrap().to_owned();
    let listener = spawn_in(
        &peer_name,
        &net.run_dir,
        &[
            "transmit",
            "hollywood://192.0.2.1:9100?mode=listener&transport=kernel",
            "udp://127.0.0.1:9",
        ],
    );
    let in_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for signal in ["TERM", "KILL"] {
        let caller = spawn_in(
            net.name(),
            &net.run_dir,
            &[
                "transmit",
                &format!("udp://127.0.0.1:{in_port}"),
                "hollywood://192.0.2.1:9100?transport=hollywood",
                "--host",
            ],
        );
        // Up, as `host status` sees it (20 s at most).
        let mut up = false;
        for _ in 0..200 {
            let v: Value = serde_json::from_str(&net.ok(&["host", "status", "--json"])).unwrap();
            let i = &v["instances"][0];
            if i["form"] == "in-process" && i["tun_present"] == true && i["table_present"] == true {
                up = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if signal == "TERM" {
            let (status, err) = terminate(caller);
            assert!(up, "no in-process instance came up: {err}");
            assert!(status.success(), "{status:?}: {err}");
            assert!(err.contains("taken down"), "{err}");
        } else {
            let mut c = caller;
            c.kill().unwrap();
            c.wait().unwrap();
            assert!(up, "no in-process instance came up");
            // Left behind, as a SIGKILL leaves it, until `host clear`.
            assert!(net.tables().iter().any(|t| t.starts_with("hollywood-")));
            net.ok(&["host", "clear"]);
        }
        net.assert_clean(&before);
    }
    let _ = terminate(listener);
}

#[test]
fn an_unprivileged_user_attaches_to_an_instance_given_to_it() {
    // `sudo hollywood host up --user nobody`, then `hollywood transmit …
    // --host` as nobody (no capabilities): it attaches to the TUN device
    // it owns and relays over the engine. Without `--user` the same
    // command fails with one line that names `--user`.
    let Some((net, _g)) = net("user") else { return };
    if !hollywood_test_support::have_tool("setpriv", "--version") {
        hollywood_test_support::skip("needs setpriv (package util-linux)");
        return;
    }
    const NOBODY: &str = "65534";
    // A copy of the binary that nobody may run (the build directory may
    // be private to root).
    let bin_dir = std::env::temp_dir().join(format!("hwhm-bin-{}", std::process::id()));
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("hollywood");
    std::fs::copy(env!("CARGO_BIN_EXE_hollywood"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [&bin_dir, &bin] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let as_nobody = |args: &[&str]| {
        let mut v = vec![
            "setpriv",
            "--reuid",
            NOBODY,
            "--regid",
            NOBODY,
            "--clear-groups",
            "--inh-caps=-all",
            bin.to_str().unwrap(),
        ];
        v.extend_from_slice(args);
        Command::new("ip")
            .args(["netns", "exec", net.name()])
            .args(&v)
            .env("HOLLYWOOD_RUN_DIR", &net.run_dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn as nobody")
    };
    let caller_args = [
        "transmit",
        "udp://127.0.0.1:5300",
        "hollywood://192.0.2.1:9300?transport=hollywood",
        "--host",
    ];
    // Debian's udev opens /dev/net/tun to everyone (mode 0666; the
    // kernel then checks the device's owner); a container may not.
    let tun_dev = std::path::Path::new("/dev/net/tun");
    let mode = std::fs::metadata(tun_dev).unwrap().permissions().mode() & 0o777;
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ =
                std::fs::set_permissions("/dev/net/tun", std::fs::Permissions::from_mode(self.0));
        }
    }
    let _restore = Restore(mode);
    if mode != 0o666 {
        eprintln!("note: /dev/net/tun is mode {mode:o} here; 0666 (as Debian's udev sets it) for this test");
        std::fs::set_permissions(tun_dev, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    // Not given to anyone: refused, with the way out named.
    net.ok(&["host", "up"]);
    let o = as_nobody(&caller_args).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "attached without owning it: {err}");
    assert!(err.contains("--user"), "{err}");
    net.ok(&["host", "down"]);

    let up = net.ok(&["host", "up", "--user", "nobody"]);
    assert!(up.contains("belongs to uid 65534"), "{up}");
    let out = udp_in(&net.peer);
    let out_port = out.local_addr().unwrap().port();
    let listener = spawn_in(
        net.peer.name().unwrap(),
        &net.run_dir,
        &[
            "transmit",
            "hollywood://192.0.2.1:9300?mode=listener&transport=kernel",
            &format!("udp://127.0.0.1:{out_port}"),
        ],
    );
    let caller = as_nobody(&caller_args);
    let src = udp_in(&net.ns);
    let through = relayed(&src, 5300, &out, b"as nobody");
    let (status, err) = terminate(caller);
    let _ = terminate(listener);
    assert!(through, "nothing came through: {status:?}: {err}");
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("engine: attached at 10.203.0.2"), "{err}");
    let before = net.ip_forward();
    net.ok(&["host", "down"]);
    let _ = std::fs::remove_dir_all(&bin_dir);
    let _ = before;
}

#[test]
fn transmit_uses_a_standing_instance_with_no_flag() {
    // Issue 31: with `hollywood host up` done, `hollywood transmit` runs
    // TCP Hollywood on the engine without --host (the library's default,
    // `Engine::host`).
    let Some((net, _g)) = net("dflt") else { return };
    net.ok(&["host", "up"]);
    let out = udp_in(&net.peer);
    let out_port = out.local_addr().unwrap().port();
    let listener = spawn_in(
        net.peer.name().unwrap(),
        &net.run_dir,
        &[
            "transmit",
            "hollywood://192.0.2.1:9500?mode=listener&transport=kernel",
            &format!("udp://127.0.0.1:{out_port}"),
        ],
    );
    let caller = spawn_in(
        net.name(),
        &net.run_dir,
        &[
            "transmit",
            "udp://127.0.0.1:5500",
            "hollywood://192.0.2.1:9500?transport=hollywood",
            "--json",
        ],
    );
    let src = udp_in(&net.ns);
    let through = relayed(&src, 5500, &out, b"no flag");
    let _ = Command::new("kill")
        .args(["-TERM", &caller.id().to_string()])
        .status();
    let o = caller.wait_with_output().unwrap();
    let _ = terminate(listener);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(through, "nothing came through: {stdout} {stderr}");
    assert!(o.status.success(), "{:?}: {stderr}", o.status);
    let last: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no statistics: {stdout} {stderr}"));
    assert_eq!(last["protocol"], "hollywood", "{last}");
    net.ok(&["host", "down"]);
}
