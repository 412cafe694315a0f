//! Host mode: the engine on a Linux host's own network, the way user-space
//! TCP stacks that must look like TCP on the wire are deployed (the
//! phantun/fake-tcp model, docs/HOST-MODE-DESIGN.md): a TUN device with a
//! private point-to-point /30 (`10.203.i.1` kernel, `10.203.i.2` engine),
//! the kernel forwarding for it and NATting it — masquerade out of the
//! default route's interface, or of a set of interfaces on a
//! multi-homed host ([`EgressChoice`]) (client), DNAT of listening ports to the
//! engine (server) — so the kernel's own TCP never owns, and never
//! resets, the engine's connections.
//!
//! This module is the setup and teardown layer of the *standing* form
//! (`hollywood host up|down|status|clear`): [`up`] creates a persistent
//! TUN device `hwh<i>`, sets `net.ipv4.ip_forward` (reference-counted,
//! [`sysctl`]), installs the instance's nftables table in one transaction
//! ([`nft`]), punches tagged iptables holes when a FORWARD policy of DROP
//! is found ([`firewall`]), and records each step in a state file
//! ([`state`]) first, so [`down`] and [`clear`] remove exactly what was
//! made — [`clear`] also what a crash left without a state file (every
//! `hollywood-*` table, `hwh<i>` TUN device and `hollywood:` iptables
//! rule of the namespace).
//!
//! IPv6 too when the IPv6 default route leaves by the same interface and
//! that has a global address (a ULA /64 per instance); otherwise the
//! rules drop the engine's IPv6 at the TUN.
//! The module is an I/O adapter: it runs `ip`, `nft` and `iptables` and
//! writes `/proc/sys` and the run directory, in the calling thread's
//! network namespace.

pub mod alloc;
pub mod firewall;
pub mod iproute;
pub mod nft;
pub mod state;
pub mod sysctl;

use crate::error::{Error, Result};
use crate::netns::{run_command, NetNs};
use crate::sys;
use serde::Serialize;
use state::{Locked, State};
use std::collections::BTreeMap;

/// The one sysctl host mode changes (IPv4 forwarding, namespace-wide).
pub const IP_FORWARD: &str = "net.ipv4.ip_forward";

/// `CAP_NET_ADMIN`'s bit in the capability sets.
const CAP_NET_ADMIN: u32 = 12;

/// Whether `/proc/self/status` text shows CAP_NET_ADMIN effective.
pub fn cap_net_admin_in(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

/// Fail with one line naming what is missing unless this process may
/// configure the network (CAP_NET_ADMIN effective) and the `nft` tool is
/// installed.
pub fn check_privileges() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Error::io("read /proc/self/status", e))?;
    if !cap_net_admin_in(&status) {
        return Err(Error::HostMode(
            "needs CAP_NET_ADMIN, which this process does not have: run as root (sudo hollywood host …)".into(),
        ));
    }
    if !nft::available() {
        return Err(Error::HostMode(
            "the nft tool (package nftables) is required to install the NAT rules: apt-get install nftables".into(),
        ));
    }
    Ok(())
}

/// What `up` makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpOptions {
    /// Instance name; default `h<i>` with `i` the instance index.
    pub name: Option<String>,
    /// TCP ports to DNAT to the engine (server side).
    pub listen: Vec<u16>,
    /// Made by the process that uses it, which takes it down when it
    /// exits (`transmit --host` with no instance up); recorded in the
    /// state file as form `in-process` so `host status` tells the two
    /// apart. `host clear` removes it after a SIGKILL.
    pub in_process: bool,
    /// Give the TUN device to this user (uid, `TUNSETOWNER`), who may then
    /// attach to it without CAP_NET_ADMIN (`host up --user`); default:
    /// this process's user, so only it and CAP_NET_ADMIN may attach.
    pub owner: Option<u32>,
    /// The interfaces the engine's connections may leave by (masquerade,
    /// forwarding); default: the IPv4 default route's.
    pub egress: EgressChoice,
}

/// Which interfaces an instance's connections may leave by: those its
/// masquerade and forward rules match (`oifname`), the replies its input
/// guard watches (`iifname`), and whose IPv6 sysctls it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EgressChoice {
    /// The IPv4 default route's interface (a host with one way out).
    #[default]
    DefaultRoute,
    /// These interfaces (`host up --egress A,B`): a multi-homed host, as
    /// a relay in a chain that calls upstream by one interface and serves
    /// downstream by another.
    Interfaces(Vec<String>),
    /// Every interface an IPv4 route of the main table leaves by
    /// (`--egress routed`), read when the instance comes up.
    Routed,
}

impl EgressChoice {
    /// `routed`, or interface names separated by commas.
    pub fn parse(s: &str) -> std::result::Result<EgressChoice, String> {
        if s == "routed" {
            return Ok(EgressChoice::Routed);
        }
        let mut devs: Vec<String> = Vec::new();
        for d in s.split(',').map(str::trim) {
            // Linux's IFNAMSIZ (16 with the NUL); the name goes into the
            // ruleset between quotes.
            let ok = !d.is_empty()
                && d.len() <= 15
                && d.chars()
                    .all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\'' | ',' | '/' | '\\'));
            if !ok {
                return Err(format!(
                    "--egress {s}: {d:?} is not an interface name (`routed`, or names separated by commas)"
                ));
            }
            if !devs.iter().any(|x| x == d) {
                devs.push(d.to_owned());
            }
        }
        Ok(EgressChoice::Interfaces(devs))
    }

    /// The interfaces and the smallest of their MTUs (the TUN device's:
    /// a segment the engine sends must fit whichever way it leaves).
    fn resolve(&self) -> Result<(Vec<String>, u32)> {
        let devs = match self {
            EgressChoice::DefaultRoute => {
                let e = iproute::egress()?;
                return Ok((vec![e.dev], e.mtu));
            }
            EgressChoice::Interfaces(d) if d.is_empty() => {
                return Err(Error::HostMode("--egress: no interface given".into()))
            }
            EgressChoice::Interfaces(d) => d.clone(),
            EgressChoice::Routed => iproute::routed_devs()?,
        };
        let mut mtu = u32::MAX;
        for d in &devs {
            mtu = mtu.min(iproute::link_mtu(d)?);
        }
        Ok((devs, mtu))
    }
}

/// Bring up a standing instance: persistent TUN device, forwarding,
/// nftables table, iptables holes if needed. On failure everything made so
/// far is removed again.
pub fn up(opts: &UpOptions) -> Result<State> {
    check_privileges()?;
    let l = Locked::acquire()?;
    let netns = state::current_netns()?;
    let all = l.all()?;
    if let Some(n) = &opts.name {
        state::check_name(n)?;
        if let Some(s) = all.iter().find(|s| s.name == *n) {
            return Err(Error::HostMode(format!(
                "instance {n:?} is already up (TUN {}, namespace {}); `hollywood host down --name {n}` first",
                s.tun, s.netns
            )));
        }
    }
    let mine: Vec<&State> = all.iter().filter(|s| s.netns == netns).collect();
    for p in &opts.listen {
        if let Some(s) = mine.iter().find(|s| s.listen.contains(p)) {
            return Err(Error::HostMode(format!(
                "TCP port {p} is already forwarded to instance {:?} ({}); choose another port or `hollywood host down --name {}`",
                s.name, s.engine_v4, s.name
            )));
        }
    }
    let (egress, mtu) = opts.egress.resolve()?;
    let mut used: Vec<u8> = mine.iter().map(|s| s.index).collect();
    for (link, _) in iproute::links()? {
        if alloc::is_tun_name(&link) {
            used.extend(link[3..].parse::<u8>().ok());
        }
    }
    let taken = iproute::taken_prefixes()?;
    let index = alloc::allocate(&used, &taken).ok_or_else(|| {
        Error::HostMode(
            "no free instance network in 10.203.0.0/16: every 10.203.i.0/30 is in use or overlaps an address or route of this host".into(),
        )
    })?;
    let name = opts.name.clone().unwrap_or_else(|| format!("h{index}"));
    if opts.name.is_none() && all.iter().any(|s| s.name == name) {
        return Err(Error::HostMode(format!(
            "the default name {name:?} is taken (by an instance of another namespace): give one with --name"
        )));
    }
    let tun = alloc::tun_name(index);
    // A forwarding drop we do not handle fails here, before anything is made.
    let holes = firewall::probe(&tun, &name)?;
    let masq = nft::masq_ports(&sysctl::read("net.ipv4.ip_local_port_range")?);
    // IPv6 when the IPv6 default route leaves by an egress interface and
    // that has a global address.
    let v6 = iproute::egress_v6()?
        .is_some_and(|d| egress.contains(&d))
        .then(alloc::host_global_id);
    let mut sysctls = vec![IP_FORWARD.to_owned()];
    if v6.is_some() {
        let force = sysctl::proc_path("net.ipv6.conf.all.force_forwarding").exists();
        let mut ra = Vec::new();
        for d in &egress {
            ra.push(sysctl::read(&sysctl::conf_key("ipv6", d, "accept_ra"))?);
        }
        let plan: Vec<(&str, &str)> = egress
            .iter()
            .map(String::as_str)
            .zip(ra.iter().map(String::as_str))
            .collect();
        sysctls.extend(sysctl::v6_plan_for(force, &plan));
    }
    let mut st = State {
        version: state::VERSION,
        name: name.clone(),
        netns,
        form: if opts.in_process {
            "in-process"
        } else {
            "standing"
        }
        .into(),
        phase: "setting-up".into(),
        index,
        tun: tun.clone(),
        persistent: true,
        egress: egress.join(","),
        mtu,
        kernel_v4: format!("{}/{}", alloc::kernel_v4(index), alloc::PREFIX_V4),
        engine_v4: alloc::engine_v4(index).to_string(),
        kernel_v6: v6.map(|g| format!("{}/{}", alloc::kernel_v6(g, index), alloc::PREFIX_V6)),
        engine_v6: v6.map(|g| alloc::engine_v6(g, index).to_string()),
        listen: opts.listen.clone(),
        masq_ports: masq.map(|(lo, hi)| format!("{lo}-{hi}")),
        nft_table: format!("inet {}", nft::table_name(&name)),
        iptables: holes,
        sysctls,
        // Always an owner: the kernel lets anyone who can open
        // /dev/net/tun (mode 0666 on Debian) attach to a persistent TUN
        // device with neither owner nor group, and read and write the
        // engine's connections. Without --user it is the creator (root),
        // so attaching takes CAP_NET_ADMIN.
        owner: Some(opts.owner.unwrap_or_else(sys::euid)),
    };
    let rules = nft::Ruleset {
        name: name.clone(),
        tun: tun.clone(),
        egress,
        engine_v4: alloc::engine_v4(index),
        engine_v6: v6.map(|g| alloc::engine_v6(g, index)),
        listen: opts.listen.clone(),
        masq_ports: masq,
        comment: format!("hollywood host {name} tun={tun}"),
    };
    l.save(&st)?;
    if let Err(e) = setup(&l, &st, &rules) {
        return Err(match teardown(&l, &st) {
            Ok(_) => e,
            Err(e2) => Error::HostMode(format!("{e}; and undoing it failed: {e2}")),
        });
    }
    st.phase = "up".into();
    l.save(&st)?;
    Ok(st)
}

fn setup(l: &Locked, st: &State, rules: &nft::Ruleset) -> Result<()> {
    create_persistent_tun(&st.tun, st.owner)?;
    let ns = NetNs::current();
    ns.set_mtu(&st.tun, st.mtu)?;
    ns.ip(&["addr", "add", &st.kernel_v4, "dev", &st.tun])?;
    if let Some(k6) = &st.kernel_v6 {
        ns.ip(&["-6", "addr", "add", k6, "dev", &st.tun, "nodad"])?;
        // Forwarding from the TUN device: its own switch, gone with it.
        let own = sysctl::conf_key("ipv6", &st.tun, "force_forwarding");
        if sysctl::proc_path(&own).exists() {
            sysctl::write(&own, "1")?;
        }
    }
    ns.link_up(&st.tun)?;
    let mut table = sysctl::load(&l.sysctl_path())?;
    for key in &st.sysctls {
        let current = sysctl::read(key)?;
        let write = sysctl::acquire(
            &mut table,
            &sysctl::slot(&st.netns, key),
            &current,
            sysctl::wanted(key),
            &st.name,
        );
        sysctl::store(&l.sysctl_path(), &table)?;
        if let Some(v) = write {
            sysctl::write(key, &v)?;
        }
    }
    nft::apply(&rules.text())?;
    for h in &st.iptables {
        h.add()?;
    }
    Ok(())
}

/// Create TUN device `name` (`IFF_TUN | IFF_NO_PI`) and make it persistent:
/// it stays after this process exits, unconfigured until `ip` sets it up,
/// for an application to attach to ([`crate::TunDevice::attach`]).
pub fn create_persistent_tun(name: &str, owner: Option<u32>) -> Result<()> {
    let (fd, _) = sys::open_tun(name, false)
        .map_err(|e| Error::io(format!("create TUN device {name}"), e))?;
    if let Some(uid) = owner {
        sys::set_tun_owner(&fd, uid).map_err(|e| {
            Error::io(
                format!("give TUN device {name} to uid {uid} (TUNSETOWNER)"),
                e,
            )
        })?;
    }
    sys::set_tun_persist(&fd, true).map_err(|e| {
        Error::io(
            format!("make TUN device {name} persistent (TUNSETPERSIST)"),
            e,
        )
    })
}

fn link_exists(name: &str) -> bool {
    run_command("ip", &["link", "show", "dev", name]).is_ok()
}

/// Remove what `st` records, in reverse order of setup; each step
/// tolerates "already gone". The state file goes last, and only if every
/// step worked (so `clear` can try again). Returns notes for the user.
fn teardown(l: &Locked, st: &State) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    for h in &st.iptables {
        match h.remove() {
            Ok(true) => notes.push(format!("removed {} rule {}", h.bin, h.rule.join(" "))),
            Ok(false) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    match nft::delete_table(&st.name) {
        Ok(true) => notes.push(format!("removed nftables table {}", st.nft_table)),
        Ok(false) => {}
        Err(e) => errors.push(e.to_string()),
    }
    match release_sysctls(l, &st.netns, &st.sysctls, &st.name) {
        Ok(n) => notes.extend(n),
        Err(e) => errors.push(e.to_string()),
    }
    if link_exists(&st.tun) {
        match run_command("ip", &["link", "del", "dev", &st.tun]) {
            Ok(_) => notes.push(format!("removed TUN device {}", st.tun)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        l.remove(&st.name)?;
        Ok(notes)
    } else {
        Err(Error::HostMode(format!(
            "could not remove all of instance {:?} (its state file stays for `hollywood host clear`): {}",
            st.name,
            errors.join("; ")
        )))
    }
}

fn release_sysctls(l: &Locked, netns: &str, keys: &[String], holder: &str) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut table = sysctl::load(&l.sysctl_path())?;
    for key in keys.iter().rev() {
        let current = sysctl::read(key)?;
        match sysctl::release(&mut table, &sysctl::slot(netns, key), &current, holder) {
            sysctl::Release::Keep => {}
            sysctl::Release::Restore(v) => {
                sysctl::write(key, &v)?;
                notes.push(format!("restored {key} = {v}"));
            }
            sysctl::Release::Changed { current, original } => notes.push(format!(
                "left {key} = {current}: it was changed by someone else after host mode set it (it was {original} before)"
            )),
        }
    }
    sysctl::store(&l.sysctl_path(), &table)?;
    Ok(notes)
}

/// The engine's side of a standing instance of this namespace: its state
/// and its TUN device, attached (`TUNSETIFF` on the persistent `hwh<i>`).
/// `name`: that instance; `None`: the first (by name) whose device no
/// other process holds (the kernel refuses a second attach). No offloads:
/// the kernel forwards and NATs every packet of the device. Must be
/// called within a tokio runtime.
pub fn attach(name: Option<&str>) -> Result<(State, crate::TunDevice)> {
    if let Some(n) = name {
        state::check_name(n)?;
    }
    let instances = match Locked::read_only()? {
        Some(l) => l.of_netns(&state::current_netns()?)?,
        None => Vec::new(),
    };
    let chosen: Vec<State> = instances
        .into_iter()
        .filter(|s| name.is_none_or(|n| s.name == n))
        .collect();
    if chosen.is_empty() {
        return Err(Error::HostMode(match name {
            Some(n) => format!(
                "no instance named {n:?} is up in this network namespace (`hollywood host status` lists them)"
            ),
            None => "no instance is up in this network namespace: `sudo hollywood host up` makes one (docs/DEPLOY.md)".into(),
        }));
    }
    let mut why = Vec::new();
    for st in chosen {
        // Checksum and segmentation offloads on (IFF_VNET_HDR, TSO). The
        // kernel keeps them on the device (TUNSETIFF sets the device's
        // flags), so an attach without offloads clears them again.
        match crate::TunDevice::attach(&st.tun, true) {
            Ok(tun) => return Ok((st, tun)),
            Err(e) => {
                // Without CAP_NET_ADMIN only the device's owner may attach.
                let tun_dev = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/net/tun");
                let hint = if tun_dev
                    .as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
                {
                    " (/dev/net/tun is not open to this user: Debian's udev makes it mode 0666, this system has it closed; `chmod 0666 /dev/net/tun` or a udev rule opens it — the device's owner check still applies)".into()
                } else if check_privileges().is_err() {
                    match st.owner {
                        Some(uid) if uid != sys::euid() => format!(
                            " (the device belongs to uid {uid}; without CAP_NET_ADMIN only its owner may attach: `sudo hollywood host up --user USER` gives it to another)"
                        ),
                        _ => String::new(),
                    }
                } else {
                    String::new()
                };
                why.push(format!("{}: {e}{hint}", st.name));
            }
        }
    }
    Err(Error::HostMode(format!(
        "no instance could be attached: {}",
        why.join("; ")
    )))
}

/// Whether an instance is up in this network namespace (any form). A
/// state whose TUN device is not here does not count: it was left by an
/// instance whose namespace is gone (namespace ids are inode numbers, and
/// a new namespace may get the number of a deleted one) or whose process
/// was killed; `hollywood host clear` removes it.
pub fn any_up() -> Result<bool> {
    match Locked::read_only()? {
        Some(l) => Ok(l
            .of_netns(&state::current_netns()?)?
            .iter()
            .any(|st| link_exists(&st.tun))),
        None => Ok(false),
    }
}

/// Take instance `name` of this namespace down. Returns what was done.
pub fn down(name: &str) -> Result<Vec<String>> {
    state::check_name(name)?;
    check_privileges()?;
    let l = Locked::acquire()?;
    let netns = state::current_netns()?;
    let Some(st) = l.of_netns(&netns)?.into_iter().find(|s| s.name == name) else {
        return Err(Error::HostMode(format!(
            "no instance named {name:?} is up in this network namespace (`hollywood host status` lists them)"
        )));
    };
    teardown(&l, &st)
}

/// Remove every host-mode object of this namespace: the instances with
/// state files, then what no state file names any more — `hollywood-*`
/// tables, `hwh<i>` TUN devices, iptables rules tagged `hollywood:`, and
/// saved sysctls (restored if still as host mode set them). Returns what
/// was removed (empty when nothing was left).
pub fn clear() -> Result<Vec<String>> {
    check_privileges()?;
    let l = Locked::acquire()?;
    let netns = state::current_netns()?;
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for st in l.of_netns(&netns)? {
        match teardown(&l, &st) {
            Ok(n) => {
                done.push(format!("instance {}", st.name));
                done.extend(n);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    for (family, table) in nft::list_tables()? {
        if family == "inet" && table.starts_with(nft::TABLE_PREFIX) {
            match run_command("nft", &["delete", "table", "inet", &table]) {
                Ok(_) => done.push(format!("removed nftables table inet {table}")),
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    for (link, kind) in iproute::links()? {
        if alloc::is_tun_name(&link) && kind.as_deref() == Some("tun") {
            match run_command("ip", &["link", "del", "dev", &link]) {
                Ok(_) => done.push(format!("removed TUN device {link}")),
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    for (_, h) in firewall::tagged_rules() {
        match h.remove() {
            Ok(true) => done.push(format!("removed {} rule {}", h.bin, h.rule.join(" "))),
            Ok(false) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    let mut table = sysctl::load(&l.sysctl_path())?;
    let prefix = format!("{netns} ");
    let slots: Vec<String> = table
        .keys()
        .filter(|k| k.starts_with(&prefix))
        .cloned()
        .collect();
    for slot in slots {
        let key = &slot[prefix.len()..];
        let saved = table.remove(&slot).expect("listed");
        let current = sysctl::read(key)?;
        if current == saved.wrote {
            sysctl::write(key, &saved.original)?;
            done.push(format!("restored {key} = {}", saved.original));
        } else {
            done.push(format!(
                "left {key} = {current}: changed by someone else after host mode set it (it was {} before)",
                saved.original
            ));
        }
    }
    sysctl::store(&l.sysctl_path(), &table)?;
    if errors.is_empty() {
        Ok(done)
    } else {
        Err(Error::HostMode(format!(
            "clear removed {} item(s) but failed on: {}",
            done.len(),
            errors.join("; ")
        )))
    }
}

/// One instance as `status` sees it.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceStatus {
    /// What its state file records.
    #[serde(flatten)]
    pub state: State,
    /// Whether its nftables table is installed.
    pub table_present: bool,
    /// Whether its TUN device exists.
    pub tun_present: bool,
    /// How many of its recorded iptables holes are in place.
    pub holes_present: usize,
    /// Packets counted per chain of its table (DNAT hits in
    /// `prerouting`, masquerade hits in `postrouting`, drops and accepts
    /// in `forward`, kernel-RST guards in `input`).
    pub counters: BTreeMap<String, u64>,
}

/// Host mode in this namespace.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The namespace (`net:[inode]`).
    pub netns: String,
    /// `net.ipv4.ip_forward` now.
    pub ip_forward: String,
    /// Instances with a state file.
    pub instances: Vec<InstanceStatus>,
    /// Host-mode objects no state file names (`hollywood host clear`
    /// removes them).
    pub orphans: Vec<String>,
}

/// The instances of this namespace, checked against the system.
pub fn status() -> Result<Status> {
    check_privileges()?;
    let l = Locked::acquire()?;
    let netns = state::current_netns()?;
    let links = iproute::links()?;
    let tagged = firewall::tagged_rules();
    let tables = nft::list_tables()?;
    let mut instances = Vec::new();
    for st in l.of_netns(&netns)? {
        let counters = nft::counters(&st.name)?;
        instances.push(InstanceStatus {
            table_present: counters.is_some(),
            tun_present: links.iter().any(|(n, _)| *n == st.tun),
            holes_present: st
                .iptables
                .iter()
                .filter(|h| tagged.iter().any(|(_, t)| t == *h))
                .count(),
            counters: counters.unwrap_or_default(),
            state: st,
        });
    }
    let named = |f: &dyn Fn(&State) -> bool| instances.iter().any(|i| f(&i.state));
    let mut orphans = Vec::new();
    for (family, t) in &tables {
        if family == "inet"
            && t.starts_with(nft::TABLE_PREFIX)
            && !named(&|s| s.nft_table == format!("inet {t}"))
        {
            orphans.push(format!("nftables table inet {t}"));
        }
    }
    for (link, kind) in &links {
        if alloc::is_tun_name(link) && kind.as_deref() == Some("tun") && !named(&|s| s.tun == *link)
        {
            orphans.push(format!("TUN device {link}"));
        }
    }
    for (name, h) in &tagged {
        if !named(&|s| s.name == *name) {
            orphans.push(format!("{} rule {}", h.bin, h.rule.join(" ")));
        }
    }
    Ok(Status {
        netns,
        ip_forward: sysctl::read(IP_FORWARD)?,
        instances,
        orphans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_choices_parse() {
        assert_eq!(EgressChoice::parse("routed"), Ok(EgressChoice::Routed));
        assert_eq!(
            EgressChoice::parse("to-prev,to-next,to-prev"),
            Ok(EgressChoice::Interfaces(vec![
                "to-prev".into(),
                "to-next".into()
            ]))
        );
        assert_eq!(
            EgressChoice::parse("eth0"),
            Ok(EgressChoice::Interfaces(vec!["eth0".into()]))
        );
        for bad in ["", "a,,b", "a\"b", "sixteen-chars-xx", "a b"] {
            assert!(EgressChoice::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cap_net_admin_is_read_from_the_effective_set() {
        let root = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n";
        assert!(cap_net_admin_in(root));
        let user = "CapPrm:\t0000000000001000\nCapEff:\t0000000000000000\n";
        assert!(!cap_net_admin_in(user));
        assert!(cap_net_admin_in("CapEff:\t0000000000001000\n"));
        assert!(!cap_net_admin_in("no caps here"));
    }
}
