//! Network namespaces, veth pairs and interface configuration.
//!
//! Interfaces, addresses and routes are configured by running the `ip`
//! command (iproute2) rather than speaking rtnetlink ourselves: it is one
//! line per step, the exact command appears in every error message, and it
//! is what an operator would type to reproduce a setup by hand.
//!
//! Code that must *live* in a namespace (opening a TUN device, creating
//! kernel sockets, writing per-namespace sysctls) runs on a dedicated thread
//! that first did `setns(CLONE_NEWNET)`: see [`NetNs::spawn`]. Objects
//! created there stay in that namespace and may be used from any thread.
//!
//! All of this needs root (`CAP_NET_ADMIN` and `CAP_SYS_ADMIN`); see
//! [`is_root`].

use crate::error::{Error, Result};
use crate::sys;
use std::fs::File;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;
use std::thread::JoinHandle;

/// Directory where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/var/run/netns";

/// Whether the process runs as root (effective uid 0), as namespace and TUN
/// operations require.
pub fn is_root() -> bool {
    sys::is_root()
}

/// Run `program args...`, returning its stdout; a non-zero exit becomes
/// [`Error::Command`] carrying the command line and stderr.
pub fn run_command(program: &str, args: &[&str]) -> Result<String> {
    let command = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::io(format!("run `{command}`"), e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Command {
            command,
            status: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Check a name for use as a namespace name (it becomes a file name).
fn check_ns_name(name: &str) -> Result<()> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if name.is_empty() || name.len() > 64 {
        return Err(Error::InvalidName {
            name: name.into(),
            reason: "namespace names must be 1..=64 bytes",
        });
    }
    if !ok_chars || name.starts_with('.') {
        return Err(Error::InvalidName {
            name: name.into(),
            reason: "namespace names may contain only ASCII letters, digits, '-', '_', '.' and must not start with '.'",
        });
    }
    Ok(())
}

/// An RPS CPU mask with the first `cpus` CPUs set, as sysfs writes it:
/// hexadecimal 32-bit groups, most significant first, separated by commas.
fn cpu_mask(cpus: usize) -> String {
    let cpus = cpus.max(1);
    let groups = cpus.div_ceil(32);
    (0..groups)
        .rev()
        .map(|g| {
            let n = (cpus - g * 32).min(32);
            let bits: u32 = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
            format!("{bits:x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Check a name for use as a network interface name.
pub(crate) fn check_if_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > sys::MAX_IFNAME_LEN {
        return Err(Error::InvalidName {
            name: name.into(),
            reason: "interface names must be 1..=15 bytes",
        });
    }
    if name
        .bytes()
        .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
    {
        return Err(Error::InvalidName {
            name: name.into(),
            reason: "interface names must not contain NUL, '/' or spaces",
        });
    }
    Ok(())
}

/// A network namespace: either one named by `ip netns` (in
/// [`NETNS_DIR`]) or the namespace the process started in ([`NetNs::current`]).
///
/// A namespace made with [`NetNs::create`] is deleted when the value is
/// dropped — also while unwinding from a panic — which removes every
/// interface inside it (TUN devices, veth ends and their peers).
#[derive(Debug)]
pub struct NetNs {
    /// `None` = the process's own namespace.
    name: Option<String>,
    /// Delete on drop.
    owned: bool,
}

impl NetNs {
    /// Create a new named namespace (`ip netns add NAME`) and bring its
    /// loopback up. Dropping the value deletes it.
    pub fn create(name: &str) -> Result<NetNs> {
        check_ns_name(name)?;
        run_command("ip", &["netns", "add", name])?;
        let ns = NetNs {
            name: Some(name.to_owned()),
            owned: true,
        };
        ns.link_up("lo")?;
        Ok(ns)
    }

    /// Refer to an existing named namespace without taking ownership: it is
    /// not deleted on drop.
    pub fn open(name: &str) -> Result<NetNs> {
        check_ns_name(name)?;
        let path = PathBuf::from(NETNS_DIR).join(name);
        if !path.exists() {
            return Err(Error::io(
                format!("open network namespace {name:?}"),
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{} does not exist", path.display()),
                ),
            ));
        }
        Ok(NetNs {
            name: Some(name.to_owned()),
            owned: false,
        })
    }

    /// The namespace the process runs in (never deleted). Commands run
    /// without `-n`, and [`NetNs::spawn`] does not switch namespaces.
    pub fn current() -> NetNs {
        NetNs {
            name: None,
            owned: false,
        }
    }

    /// The namespace's name; `None` for [`NetNs::current`].
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Run `ip [-n NAME] args...` and return its stdout.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        match &self.name {
            Some(n) => {
                let mut full = vec!["-n", n.as_str()];
                full.extend_from_slice(args);
                run_command("ip", &full)
            }
            None => run_command("ip", args),
        }
    }

    /// Run an arbitrary program inside the namespace
    /// (`ip netns exec NAME args...`) and return its stdout.
    /// `args[0]` is the program.
    pub fn exec(&self, args: &[&str]) -> Result<String> {
        let Some((program, rest)) = args.split_first() else {
            return Err(Error::InvalidName {
                name: String::new(),
                reason: "exec needs a program name",
            });
        };
        match &self.name {
            Some(n) => {
                let mut full = vec!["netns", "exec", n.as_str()];
                full.extend_from_slice(args);
                run_command("ip", &full)
            }
            None => run_command(program, rest),
        }
    }

    /// Run `f` on a new thread named `thread_name` that has entered this
    /// namespace. Sockets and devices `f` creates belong to the namespace.
    pub fn spawn<F, T>(&self, thread_name: &str, f: F) -> Result<NsThread<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let ns_file = match &self.name {
            Some(n) => {
                let path = PathBuf::from(NETNS_DIR).join(n);
                let file = File::open(&path).map_err(|e| {
                    Error::io(format!("open namespace handle {}", path.display()), e)
                })?;
                Some((n.clone(), file))
            }
            None => None,
        };
        let handle = std::thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || {
                if let Some((name, file)) = ns_file {
                    sys::enter_netns(&file).map_err(|e| {
                        Error::io(format!("setns into network namespace {name:?}"), e)
                    })?;
                }
                Ok(f())
            })
            .map_err(|e| Error::io(format!("spawn thread {thread_name:?}"), e))?;
        Ok(NsThread {
            handle,
            name: thread_name.to_owned(),
        })
    }

    /// Run `f` inside the namespace and wait for its result
    /// ([`NetNs::spawn`] + [`NsThread::join`]).
    pub fn run<F, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn("hwt-netns-run", f)?.join()
    }

    /// Set a per-namespace sysctl such as `net.ipv4.ip_forward` by writing
    /// `/proc/sys/...` from a thread inside the namespace.
    pub fn set_sysctl(&self, key: &str, value: &str) -> Result<()> {
        if key.contains("..") || key.starts_with('.') {
            return Err(Error::InvalidName {
                name: key.into(),
                reason: "not a sysctl key",
            });
        }
        let path = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
        let value = value.to_owned();
        let p = path.clone();
        self.run(move || std::fs::write(&p, value.as_bytes()))?
            .map_err(|e| Error::io(format!("write sysctl {}", path.display()), e))
    }

    /// Bring interface `dev` up.
    pub fn link_up(&self, dev: &str) -> Result<()> {
        self.ip(&["link", "set", "dev", dev, "up"]).map(drop)
    }

    /// Set the MTU of interface `dev`.
    pub fn set_mtu(&self, dev: &str, mtu: u32) -> Result<()> {
        self.ip(&["link", "set", "dev", dev, "mtu", &mtu.to_string()])
            .map(drop)
    }

    /// Steer the packets interface `dev` receives by flow (Receive Packet
    /// Steering over every CPU, `queues/rx-*/rps_cpus` of every queue),
    /// so that one flow's packets are processed on one CPU, in the order
    /// they were handed to the interface. Without it a veth or TUN device
    /// queues each packet on the backlog of the CPU that sent it: a
    /// sender that runs on two CPUs
    /// in turn (a TCP socket sending from a system call, then from ACK
    /// processing) can have its packets reordered on the way to the peer.
    /// Measured in the lab under load: up to 144 of 1382 segments of one
    /// Linux TCP transfer arrived out of order; none with steering.
    pub fn steer_by_flow(&self, dev: &str) -> Result<()> {
        check_if_name(dev)?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let mask = cpu_mask(cpus);
        // Every receive queue of a multi-queue device.
        let paths = format!("/sys/class/net/{dev}/queues/rx-*/rps_cpus");
        match &self.name {
            // `ip netns exec` mounts the namespace's own /sys.
            Some(_) => self
                .exec(&[
                    "sh",
                    "-c",
                    &format!("for f in {paths}; do echo {mask} > $f || exit 1; done"),
                ])
                .map(drop),
            None => {
                let dir = format!("/sys/class/net/{dev}/queues");
                let entries =
                    std::fs::read_dir(&dir).map_err(|e| Error::io(format!("list {dir}"), e))?;
                for entry in entries {
                    let entry = entry.map_err(|e| Error::io(format!("list {dir}"), e))?;
                    if entry.file_name().to_string_lossy().starts_with("rx-") {
                        let path = entry.path().join("rps_cpus");
                        std::fs::write(&path, &mask)
                            .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Add `addr/prefix` to interface `dev`. IPv6 addresses are added with
    /// `nodad` so they are usable immediately (no duplicate address
    /// detection delay).
    pub fn add_addr(&self, dev: &str, addr: IpAddr, prefix: u8) -> Result<()> {
        let cidr = format!("{addr}/{prefix}");
        match addr {
            IpAddr::V4(_) => self.ip(&["addr", "add", &cidr, "dev", dev]).map(drop),
            IpAddr::V6(_) => self
                .ip(&["-6", "addr", "add", &cidr, "dev", dev, "nodad"])
                .map(drop),
        }
    }

    /// Add a route to `dest` (`"default"` or `"a.b.c.d/len"`, v4 or v6)
    /// via gateway `via` and/or out of interface `dev`.
    pub fn add_route(&self, dest: &str, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
        let v6 = dest.contains(':') || matches!(via, Some(IpAddr::V6(_)));
        let via_s = via.map(|a| a.to_string());
        let mut args = vec![if v6 { "-6" } else { "-4" }, "route", "add", dest];
        if let Some(v) = &via_s {
            args.extend_from_slice(&["via", v]);
        }
        if let Some(d) = dev {
            args.extend_from_slice(&["dev", d]);
        }
        self.ip(&args).map(drop)
    }

    /// Delete every namespace whose name is `PREFIX-PID-...` where `PID` is
    /// not a running process: leftovers of a killed earlier run (a
    /// `SIGKILL` skips `Drop`). Returns the names deleted.
    pub fn remove_stale(prefix: &str) -> Result<Vec<String>> {
        let list = run_command("ip", &["netns", "list"])?;
        let mut removed = Vec::new();
        for line in list.lines() {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if !PathBuf::from(format!("/proc/{pid}")).exists()
                && run_command("ip", &["netns", "del", name]).is_ok()
            {
                removed.push(name.to_owned());
            }
        }
        Ok(removed)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let (true, Some(name)) = (self.owned, &self.name) {
            if let Err(e) = run_command("ip", &["netns", "del", name]) {
                eprintln!("hollywood-io: could not delete network namespace {name:?}: {e}");
            }
        }
    }
}

/// A thread started by [`NetNs::spawn`].
#[derive(Debug)]
pub struct NsThread<T> {
    handle: JoinHandle<Result<T>>,
    name: String,
}

impl<T> NsThread<T> {
    /// Wait for the thread. A failed `setns` is returned as
    /// [`Error::Io`], a panic as [`Error::ThreadPanicked`].
    pub fn join(self) -> Result<T> {
        match self.handle.join() {
            Ok(r) => r,
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".to_owned());
                Err(Error::ThreadPanicked {
                    thread: self.name,
                    message,
                })
            }
        }
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// A veth pair: two interfaces joined back to back, one end in each of two
/// namespaces. Both ends are up on return. Dropping the value deletes the
/// pair (deleting its namespace does too).
#[derive(Debug)]
pub struct VethPair {
    ns_a: Option<String>,
    a: String,
    b: String,
}

impl VethPair {
    /// Create interface `a` in namespace `ns_a` paired with `b` in `ns_b`.
    pub fn create(ns_a: &NetNs, a: &str, ns_b: &NetNs, b: &str) -> Result<VethPair> {
        check_if_name(a)?;
        check_if_name(b)?;
        let target = match ns_b.name() {
            Some(n) => n.to_owned(),
            None => std::process::id().to_string(),
        };
        ns_a.ip(&[
            "link", "add", a, "type", "veth", "peer", "name", b, "netns", &target,
        ])?;
        let pair = VethPair {
            ns_a: ns_a.name().map(str::to_owned),
            a: a.to_owned(),
            b: b.to_owned(),
        };
        ns_a.link_up(a)?;
        ns_b.link_up(b)?;
        Ok(pair)
    }

    /// Name of the end in the first namespace.
    pub fn a(&self) -> &str {
        &self.a
    }

    /// Name of the end in the second namespace.
    pub fn b(&self) -> &str {
        &self.b
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting one end deletes both. If the namespace is already gone,
        // so is the pair: nothing to report.
        let mut args = Vec::new();
        if let Some(n) = &self.ns_a {
            if !PathBuf::from(NETNS_DIR).join(n).exists() {
                return;
            }
            args.extend_from_slice(&["-n", n.as_str()]);
        }
        args.extend_from_slice(&["link", "del", self.a.as_str()]);
        let _ = run_command("ip", &args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_checked() {
        assert!(check_ns_name("hwt-123-a").is_ok());
        assert!(check_ns_name("").is_err());
        assert!(check_ns_name("../etc").is_err());
        assert!(check_ns_name("a b").is_err());
        assert!(check_ns_name(&"x".repeat(65)).is_err());
    }

    #[test]
    fn cpu_masks_are_written_as_sysfs_reads_them() {
        assert_eq!(cpu_mask(0), "1");
        assert_eq!(cpu_mask(2), "3");
        assert_eq!(cpu_mask(31), "7fffffff");
        assert_eq!(cpu_mask(32), "ffffffff");
        assert_eq!(cpu_mask(33), "1,ffffffff");
        assert_eq!(cpu_mask(72), "ff,ffffffff,ffffffff");
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(check_if_name("hwtun0").is_ok());
        assert!(check_if_name("hwtun%d").is_ok());
        assert!(check_if_name("sixteen-chars-xx").is_err());
        assert!(check_if_name("a/b").is_err());
        assert!(check_if_name("").is_err());
    }

    #[test]
    fn failing_command_reports_command_line_and_stderr() {
        let err = run_command("sh", &["-c", "echo boom >&2; exit 3"]).unwrap_err();
        match &err {
            Error::Command {
                command,
                status,
                stderr,
            } => {
                assert_eq!(command, "sh -c echo boom >&2; exit 3");
                assert_eq!(*status, Some(3));
                assert_eq!(stderr, "boom");
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("exit code 3"));
    }

    #[test]
    fn current_namespace_threads_run_and_report_panics() {
        let ns = NetNs::current();
        assert_eq!(ns.run(|| 6 * 7).unwrap(), 42);
        let err = ns
            .spawn("hwt-panics", || -> () { panic!("on purpose") })
            .unwrap()
            .join()
            .unwrap_err();
        assert!(
            matches!(&err, Error::ThreadPanicked { thread, message } if thread == "hwt-panics" && message == "on purpose")
        );
    }
}
