//! Host mode's state on disk: one JSON file per instance in the run
//! directory (`/run/hollywood`, a tmpfs that is empty after a reboot like
//! everything it describes; `HOLLYWOOD_RUN_DIR` overrides it), written
//! before the first object is created and updated as setup goes on, so
//! `down` and `clear` know what to remove even after a crash; and the
//! lock (`flock` on `<dir>/host.lock`) that every `up`, `down` and `clear`
//! holds, so two of them cannot pick the same instance index.
//!
//! An instance belongs to the network namespace it was made in (its
//! `netns`, e.g. `net:[4026531840]`): `status`, `down` and `clear` see
//! only the instances of their own namespace.

use super::firewall::Hole;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Default run directory.
pub const RUN_DIR: &str = "/run/hollywood";

/// Layout version of the state files.
pub const VERSION: u32 = 1;

/// File of the shared sysctl reference counts (see `super::sysctl`).
pub const SYSCTL_FILE: &str = "sysctl.json";

/// Names that would collide with host mode's other files.
const RESERVED: &[&str] = &["sysctl", "host"];

/// One instance as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Layout version ([`VERSION`]).
    pub version: u32,
    /// Instance name.
    pub name: String,
    /// The network namespace it lives in (`readlink /proc/self/ns/net`).
    pub netns: String,
    /// `"standing"` (`hollywood host up`: persistent TUN device, no owner
    /// process).
    pub form: String,
    /// `"setting-up"` until everything is in place, then `"up"`.
    pub phase: String,
    /// Instance index (the `i` of `10.203.i.0/30` and `hwh<i>`).
    pub index: u8,
    /// Its TUN device.
    pub tun: String,
    /// Whether the TUN device is persistent (outlives its creator).
    pub persistent: bool,
    /// Egress interface (of the IPv4 default route), or several separated
    /// by commas (`host up --egress A,B`).
    pub egress: String,
    /// MTU of the TUN device (the egress interface's; the smallest of
    /// several).
    pub mtu: u32,
    /// Kernel side of the TUN device, `a.b.c.d/30`.
    pub kernel_v4: String,
    /// The engine's address.
    pub engine_v4: String,
    /// Kernel side of the TUN device, `fd…:i::1/64`, when IPv6 is set up.
    #[serde(default)]
    pub kernel_v6: Option<String>,
    /// The engine's IPv6 address, when IPv6 is set up.
    #[serde(default)]
    pub engine_v6: Option<String>,
    /// TCP ports DNATed to the engine.
    pub listen: Vec<u16>,
    /// Masquerade source ports, `"lo-hi"`, or null for any.
    pub masq_ports: Option<String>,
    /// The nftables table, `inet hollywood-<name>`.
    pub nft_table: String,
    /// iptables rules added for a FORWARD policy of DROP.
    pub iptables: Vec<Hole>,
    /// Sysctls this instance holds, in the order they were set (see
    /// `super::sysctl`; released in reverse).
    pub sysctls: Vec<String>,
    /// The user (uid) that owns the TUN device and may attach to it
    /// without CAP_NET_ADMIN (`host up --user`), if any.
    #[serde(default)]
    pub owner: Option<u32>,
}

/// The run directory (`HOLLYWOOD_RUN_DIR` or [`RUN_DIR`]).
pub fn run_dir() -> PathBuf {
    std::env::var_os("HOLLYWOOD_RUN_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(RUN_DIR), PathBuf::from)
}

/// Check an instance name: 1..=32 of `[a-z0-9_-]`, starting with a letter
/// or digit, not a reserved file name.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && !RESERVED.contains(&name);
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName {
            name: name.into(),
            reason: "instance names are 1..=32 of a-z, 0-9, '-', '_', start with a letter or digit, and are not \"sysctl\" or \"host\"",
        })
    }
}

/// The current thread's network namespace, as `net:[inode]`.
pub fn current_netns() -> Result<String> {
    std::fs::read_link("/proc/thread-self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| Error::io("read /proc/thread-self/ns/net", e))
}

/// Write `text` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| Error::io(format!("rename {} to {}", tmp.display(), path.display()), e))
}

/// The run directory, opened and locked: every host-mode change happens
/// while a value of this type lives.
#[derive(Debug)]
pub struct Locked {
    dir: PathBuf,
    _lock: File,
}

impl Locked {
    /// Create the run directory if needed and take its lock (waiting).
    pub fn acquire() -> Result<Locked> {
        Self::acquire_at(run_dir())
    }

    /// [`Locked::acquire`] in `dir`.
    pub fn acquire_at(dir: PathBuf) -> Result<Locked> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let path = dir.join("host.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("open {}", path.display()), e))?;
        crate::sys::flock(&lock, true)
            .map_err(|e| Error::io(format!("lock {}", path.display()), e))?;
        Ok(Locked { dir, _lock: lock })
    }

    /// A shared lock for reading the instances (attaching to one), which
    /// needs no write access: an unprivileged user of a standing instance
    /// (`host up --user`) can take it. `None` when host mode never ran
    /// here (no lock file: no instance).
    pub fn read_only() -> Result<Option<Locked>> {
        let dir = run_dir();
        let path = dir.join("host.lock");
        let lock = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("open {}", path.display()), e)),
        };
        crate::sys::flock(&lock, false)
            .map_err(|e| Error::io(format!("lock {}", path.display()), e))?;
        Ok(Some(Locked { dir, _lock: lock }))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state file of instance `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// The shared sysctl file.
    pub fn sysctl_path(&self) -> PathBuf {
        self.dir.join(SYSCTL_FILE)
    }

    /// Store an instance's state.
    pub fn save(&self, s: &State) -> Result<()> {
        let text = serde_json::to_string_pretty(s).expect("a state serialises");
        write_atomic(&self.path(&s.name), &text)
    }

    /// Remove an instance's state file (no error if absent).
    pub fn remove(&self, name: &str) -> Result<()> {
        let p = self.path(name);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("remove {}", p.display()), e))
            }
            _ => Ok(()),
        }
    }

    /// Every instance of every namespace (files that do not parse as a
    /// state are skipped).
    pub fn all(&self) -> Result<Vec<State>> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| Error::io(format!("list {}", self.dir.display()), e))?;
        for entry in entries.flatten() {
            let p = entry.path();
            let is_state = p.extension().is_some_and(|e| e == "json")
                && p.file_name().is_some_and(|f| f != SYSCTL_FILE);
            if !is_state {
                continue;
            }
            if let Some(s) = std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str::<State>(&t).ok())
            {
                out.push(s);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The instances of namespace `netns`.
    pub fn of_netns(&self, netns: &str) -> Result<Vec<State>> {
        Ok(self
            .all()?
            .into_iter()
            .filter(|s| s.netns == netns)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(name: &str, netns: &str) -> State {
        State {
            version: VERSION,
            name: name.into(),
            netns: netns.into(),
            form: "standing".into(),
            phase: "up".into(),
            index: 0,
            tun: "hwh0".into(),
            persistent: true,
            egress: "eth0".into(),
            mtu: 1500,
            kernel_v4: "10.203.0.1/30".into(),
            engine_v4: "10.203.0.2".into(),
            kernel_v6: None,
            engine_v6: None,
            listen: vec![9000],
            masq_ports: Some("61001-65535".into()),
            nft_table: "inet hollywood-a".into(),
            iptables: vec![],
            sysctls: vec!["net.ipv4.ip_forward".into()],
            owner: None,
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("h0").is_ok() && check_name("web-1_a").is_ok());
        for bad in ["", "Web", "-x", "a/b", "sysctl", "host", &"x".repeat(33)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn states_round_trip_and_are_listed_per_namespace() {
        let dir = std::env::temp_dir().join(format!("hw-state-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let l = Locked::acquire_at(dir.clone()).unwrap();
        l.save(&state("a", "net:[1]")).unwrap();
        l.save(&state("b", "net:[2]")).unwrap();
        std::fs::write(l.sysctl_path(), "{}").unwrap();
        std::fs::write(dir.join("junk.json"), "not a state").unwrap();
        assert_eq!(l.all().unwrap().len(), 2);
        assert_eq!(l.of_netns("net:[1]").unwrap(), vec![state("a", "net:[1]")]);
        l.remove("a").unwrap();
        l.remove("a").unwrap();
        assert_eq!(l.of_netns("net:[1]").unwrap(), vec![]);
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_namespace_is_named_like_the_kernel_names_it() {
        let ns = current_netns().unwrap();
        assert!(ns.starts_with("net:[") && ns.ends_with(']'), "{ns}");
    }
}
