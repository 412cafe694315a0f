//! `hollywood host up|down|status|clear`: the standing form of host mode
//! (`hollywood_io::hostmode`): a persistent TUN device `hwh<i>` for the
//! engine at `10.203.i.2`, IPv4 forwarding, masquerade out of the default
//! route's interface (or `--egress` interfaces) and DNAT of `--listen` ports to the engine, set up
//! and torn down as one thing. Needs CAP_NET_ADMIN and the `nft` tool.

use clap::{Args, Subcommand};
use hollywood_io::hostmode::{self, UpOptions};

/// `hollywood host …`
#[derive(Subcommand, Debug)]
pub enum HostCommand {
    /// Create an instance: persistent TUN device, forwarding, NAT rules (one nftables table).
    Up(UpArgs),
    /// Remove an instance and restore what it changed.
    Down(DownArgs),
    /// List this network namespace's instances, checked against the system.
    Status(StatusArgs),
    /// Remove every host-mode object of this namespace, with or without state files (after a crash).
    Clear,
}

/// Arguments of `hollywood host up`.
#[derive(Args, Debug)]
pub struct UpArgs {
    /// Instance name (default h<i>, i = the instance index).
    #[arg(long)]
    pub name: Option<String>,
    /// TCP ports to forward (DNAT) to the engine, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub listen: Vec<u16>,
    /// Give the TUN device to this user (name or uid): that user's
    /// processes (`transmit --host`, a service) attach without root.
    #[arg(long, value_parser = parse_user)]
    pub user: Option<u32>,
    /// The interfaces the engine's connections may leave by,
    /// comma-separated, or `routed` (every interface an IPv4 route leaves
    /// by): a multi-homed host, e.g. a relay that calls upstream by one
    /// interface and serves downstream by another. Default: the IPv4
    /// default route's interface.
    #[arg(long, value_parser = hostmode::EgressChoice::parse, value_name = "IFACES|routed")]
    pub egress: Option<hostmode::EgressChoice>,
}

/// A user name or uid → uid (names through `id -u`, so NSS users work).
fn parse_user(s: &str) -> Result<u32, String> {
    let uid = parse_uid(s)?;
    // (uid_t)-1 means "no owner" to TUNSETOWNER: the device open to all.
    if uid == u32::MAX {
        return Err(format!(
            "{s}: uid 4294967295 (-1) would leave the device without an owner"
        ));
    }
    Ok(uid)
}

fn parse_uid(s: &str) -> Result<u32, String> {
    if let Ok(uid) = s.parse::<u32>() {
        return Ok(uid);
    }
    let o = std::process::Command::new("id")
        .args(["-u", "--", s])
        .output()
        .map_err(|e| format!("id -u {s}: {e}"))?;
    if !o.status.success() {
        return Err(format!("no such user: {s}"));
    }
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("id -u {s}: not a uid"))
}

/// Arguments of `hollywood host down`.
#[derive(Args, Debug)]
pub struct DownArgs {
    /// Instance name; may be left out when exactly one instance is up.
    #[arg(long)]
    pub name: Option<String>,
}

/// Arguments of `hollywood host status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn err(e: hollywood_io::Error) -> String {
    e.to_string()
}

/// Run a `host` command.
pub fn run(c: HostCommand) -> Result<(), String> {
    match c {
        HostCommand::Up(a) => {
            let a_user = a.user;
            let st = hostmode::up(&UpOptions {
                name: a.name,
                listen: a.listen,
                in_process: false,
                owner: a.user,
                egress: a.egress.unwrap_or_default(),
            })
            .map_err(err)?;
            let listen = if st.listen.is_empty() {
                "no listening ports".to_owned()
            } else {
                let p: Vec<String> = st.listen.iter().map(u16::to_string).collect();
                format!("TCP {} forwarded to the engine", p.join(","))
            };
            let v6 = match (&st.kernel_v6, &st.engine_v6) {
                (Some(k), Some(e)) => format!(", IPv6 kernel {k}, engine {e}"),
                _ => ", no IPv6 (no IPv6 default route with a global address on the egress)"
                    .to_owned(),
            };
            println!(
                "host {}: TUN {} (MTU {}), kernel {}, engine {}{v6}; masquerade out of {} (ports {}); {listen}",
                st.name,
                st.tun,
                st.mtu,
                st.kernel_v4,
                st.engine_v4,
                st.egress,
                st.masq_ports.as_deref().unwrap_or("any"),
            );
            if let (Some(uid), Some(_)) = (st.owner, a_user) {
                println!(
                    "  TUN {} belongs to uid {uid}: its processes attach without root",
                    st.tun
                );
            }
            for h in &st.iptables {
                println!(
                    "  forwarding is dropped by iptables: added {} -I {}",
                    h.bin,
                    h.rule.join(" ")
                );
            }
            Ok(())
        }
        HostCommand::Down(a) => {
            let name = match a.name {
                Some(n) => n,
                None => only_instance()?,
            };
            for line in hostmode::down(&name).map_err(err)? {
                println!("{line}");
            }
            println!("host {name}: down");
            Ok(())
        }
        HostCommand::Status(a) => {
            let s = hostmode::status().map_err(err)?;
            if a.json {
                println!("{}", crate::output::json(&s)?);
                return Ok(());
            }
            println!(
                "network namespace {}, net.ipv4.ip_forward = {}",
                s.netns, s.ip_forward
            );
            if s.instances.is_empty() {
                println!("no host-mode instance");
            }
            for i in &s.instances {
                let st = &i.state;
                let ok = |b: bool| if b { "present" } else { "MISSING" };
                println!(
                    "{}: {} TUN {} {}, table {} {}, engine {}, egress {}, listen {:?}, holes {}/{}, counters {:?}",
                    st.name,
                    st.phase,
                    st.tun,
                    ok(i.tun_present),
                    st.nft_table,
                    ok(i.table_present),
                    st.engine_v4,
                    st.egress,
                    st.listen,
                    i.holes_present,
                    st.iptables.len(),
                    i.counters,
                );
            }
            for o in &s.orphans {
                println!("orphan (hollywood host clear removes it): {o}");
            }
            Ok(())
        }
        HostCommand::Clear => {
            let done = hostmode::clear().map_err(err)?;
            if done.is_empty() {
                println!("nothing to clear");
            }
            for line in done {
                println!("{line}");
            }
            Ok(())
        }
    }
}

/// The name of the one instance of this namespace, for `down` without
/// `--name`.
fn only_instance() -> Result<String, String> {
    let s = hostmode::status().map_err(err)?;
    match s.instances.as_slice() {
        [one] => Ok(one.state.name.clone()),
        [] => Err("host mode: no instance is up in this network namespace".into()),
        many => {
            let names: Vec<&str> = many.iter().map(|i| i.state.name.as_str()).collect();
            Err(format!(
                "host mode: several instances are up ({}): give one with --name",
                names.join(", ")
            ))
        }
    }
}
