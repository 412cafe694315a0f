//! Sysctls host mode changes (`net.ipv4.ip_forward`), saved and restored
//! with reference counts shared by every instance of the namespace, in
//! `<run dir>/sysctl.json` (changed only under the state lock):
//!
//! ```json
//! {"net:[4026531840] net.ipv4.ip_forward": {"original": "0", "wrote": "1", "holders": ["h0", "web"]}}
//! ```
//!
//! The first holder records the original value; the last one to release
//! restores it — but only if the value is still the one host mode wrote
//! (someone else, e.g. Docker, may have come to rely on it since). With a
//! private save per instance the first to leave would switch forwarding
//! off under the others.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One saved sysctl.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// The value before the first holder changed it.
    pub original: String,
    /// The value host mode wrote.
    pub wrote: String,
    /// Instances that need it.
    pub holders: Vec<String>,
}

/// Every saved sysctl, by `"<netns> <key>"`.
pub type Table = BTreeMap<String, Saved>;

/// The table's key for `key` in namespace `netns`.
pub fn slot(netns: &str, key: &str) -> String {
    format!("{netns} {key}")
}

/// Register `holder` for `slot`, whose value is now `current`, wanting
/// `want`: returns the value to write, if any.
pub fn acquire(
    table: &mut Table,
    slot: &str,
    current: &str,
    want: &str,
    holder: &str,
) -> Option<String> {
    let e = table.entry(slot.to_owned()).or_insert_with(|| Saved {
        original: current.to_owned(),
        wrote: want.to_owned(),
        holders: Vec::new(),
    });
    if !e.holders.iter().any(|h| h == holder) {
        e.holders.push(holder.to_owned());
    }
    (current != want).then(|| want.to_owned())
}

/// What releasing a holder means for the sysctl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Other holders remain (or the slot was unknown): leave it.
    Keep,
    /// Last holder: write this original value back.
    Restore(String),
    /// Last holder, but the value is no longer ours: leave it (and say so).
    Changed {
        /// The value found.
        current: String,
        /// The value before host mode.
        original: String,
    },
}

/// Remove `holder` from `slot`, whose value is now `current`.
pub fn release(table: &mut Table, slot: &str, current: &str, holder: &str) -> Release {
    let Some(e) = table.get_mut(slot) else {
        return Release::Keep;
    };
    e.holders.retain(|h| h != holder);
    if !e.holders.is_empty() {
        return Release::Keep;
    }
    let e = table.remove(slot).expect("present");
    if current == e.wrote {
        Release::Restore(e.original)
    } else {
        Release::Changed {
            current: current.to_owned(),
            original: e.original,
        }
    }
}

/// `/proc/sys/...` of a dotted key; as in sysctl(8), a `/` in the key
/// stands for a `.` in a name (`net.ipv6.conf.eth0/100.forwarding` is
/// interface `eth0.100`).
pub fn proc_path(key: &str) -> PathBuf {
    let rel: String = key
        .chars()
        .map(|c| match c {
            '.' => '/',
            '/' => '.',
            c => c,
        })
        .collect();
    Path::new("/proc/sys").join(rel)
}

/// A sysctl key of interface `dev` (`net.<family>.conf.<dev>.<name>`).
pub fn conf_key(family: &str, dev: &str, name: &str) -> String {
    format!("net.{family}.conf.{}.{name}", dev.replace('.', "/"))
}

/// The value host mode wants for a key it holds: `accept_ra` = 2 (accept
/// router advertisements while forwarding), everything else 1 (on).
pub fn wanted(key: &str) -> &'static str {
    if key.ends_with(".accept_ra") {
        "2"
    } else {
        "1"
    }
}

/// The IPv6 sysctls to hold (in the order to set them; release in
/// reverse) for egress interface `egress`: with `force_forwarding`
/// (Linux ≥ 6.17) the egress's own, so RA handling is untouched;
/// otherwise `accept_ra` = 2 on the egress first when it accepts RAs
/// (`egress_accept_ra` = "1"), then the global `conf.all.forwarding`.
pub fn v6_plan(force_forwarding: bool, egress: &str, egress_accept_ra: &str) -> Vec<String> {
    v6_plan_for(force_forwarding, &[(egress, egress_accept_ra)])
}

/// [`v6_plan`] for several egress interfaces, `(name, its accept_ra)`:
/// each interface's own keys, and the global `conf.all.forwarding` once,
/// last (after every `accept_ra` = 2, so no interface stops taking RAs).
pub fn v6_plan_for(force_forwarding: bool, egress: &[(&str, &str)]) -> Vec<String> {
    if force_forwarding {
        return egress
            .iter()
            .map(|(dev, _)| conf_key("ipv6", dev, "force_forwarding"))
            .collect();
    }
    let mut keys: Vec<String> = egress
        .iter()
        .filter(|(_, ra)| *ra == "1")
        .map(|(dev, _)| conf_key("ipv6", dev, "accept_ra"))
        .collect();
    keys.push("net.ipv6.conf.all.forwarding".to_owned());
    keys
}

/// Read a sysctl of the calling thread's namespace (trimmed).
pub fn read(key: &str) -> Result<String> {
    let p = proc_path(key);
    std::fs::read_to_string(&p)
        .map(|s| s.trim().to_owned())
        .map_err(|e| Error::io(format!("read {}", p.display()), e))
}

/// Write a sysctl of the calling thread's namespace.
pub fn write(key: &str, value: &str) -> Result<()> {
    let p = proc_path(key);
    std::fs::write(&p, value).map_err(|e| Error::io(format!("write {}", p.display()), e))
}

/// Load the table from `path` (empty if absent).
pub fn load(path: &Path) -> Result<Table> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t)
            .map_err(|e| Error::HostMode(format!("{} is not valid: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Table::new()),
        Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
    }
}

/// Store the table at `path` (removed when empty).
pub fn store(path: &Path, table: &Table) -> Result<()> {
    if table.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("remove {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    let text = serde_json::to_string_pretty(table).expect("a table serialises");
    super::state::write_atomic(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_holder_restores_the_original_value() {
        let mut t = Table::new();
        let s = slot("net:[1]", "net.ipv4.ip_forward");
        assert_eq!(acquire(&mut t, &s, "0", "1", "a"), Some("1".into()));
        // The second holder finds it on already.
        assert_eq!(acquire(&mut t, &s, "1", "1", "b"), None);
        assert_eq!(t[&s].original, "0");
        assert_eq!(t[&s].holders, vec!["a", "b"]);
        assert_eq!(release(&mut t, &s, "1", "a"), Release::Keep);
        assert_eq!(release(&mut t, &s, "1", "b"), Release::Restore("0".into()));
        assert!(t.is_empty());
        assert_eq!(release(&mut t, &s, "1", "b"), Release::Keep);
    }

    #[test]
    fn a_value_someone_else_changed_is_left_alone() {
        let mut t = Table::new();
        let s = slot("net:[1]", "net.ipv4.ip_forward");
        acquire(&mut t, &s, "0", "1", "a");
        assert_eq!(
            release(&mut t, &s, "0", "a"),
            Release::Changed {
                current: "0".into(),
                original: "0".into()
            }
        );
        // Already on before host mode: restoring writes the same value.
        acquire(&mut t, &s, "1", "1", "a");
        assert_eq!(release(&mut t, &s, "1", "a"), Release::Restore("1".into()));
    }

    #[test]
    fn namespaces_have_separate_slots() {
        let mut t = Table::new();
        acquire(&mut t, &slot("net:[1]", "k"), "0", "1", "a");
        acquire(&mut t, &slot("net:[2]", "k"), "1", "1", "a");
        assert_eq!(t.len(), 2);
        assert_eq!(
            proc_path("net.ipv4.ip_forward"),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        assert_eq!(
            proc_path(&conf_key("ipv6", "eth0.100", "forwarding")),
            PathBuf::from("/proc/sys/net/ipv6/conf/eth0.100/forwarding")
        );
    }

    #[test]
    fn ipv6_forwarding_keeps_router_advertisements() {
        assert_eq!(
            v6_plan(true, "eth0", "1"),
            vec!["net.ipv6.conf.eth0.force_forwarding"]
        );
        assert_eq!(
            v6_plan(false, "eth0", "1"),
            vec![
                "net.ipv6.conf.eth0.accept_ra",
                "net.ipv6.conf.all.forwarding"
            ]
        );
        assert_eq!(
            v6_plan(false, "eth0", "0"),
            vec!["net.ipv6.conf.all.forwarding"]
        );
        assert_eq!(wanted("net.ipv6.conf.eth0.accept_ra"), "2");
        assert_eq!(wanted("net.ipv6.conf.all.forwarding"), "1");
    }

    #[test]
    fn several_egress_interfaces_each_keep_router_advertisements() {
        let two = [("eth0", "1"), ("wlan0", "1")];
        assert_eq!(
            v6_plan_for(true, &two),
            vec![
                "net.ipv6.conf.eth0.force_forwarding",
                "net.ipv6.conf.wlan0.force_forwarding"
            ]
        );
        assert_eq!(
            v6_plan_for(false, &two),
            vec![
                "net.ipv6.conf.eth0.accept_ra",
                "net.ipv6.conf.wlan0.accept_ra",
                "net.ipv6.conf.all.forwarding"
            ]
        );
        assert_eq!(
            v6_plan_for(false, &[("eth0", "0"), ("wlan0", "1")]),
            vec![
                "net.ipv6.conf.wlan0.accept_ra",
                "net.ipv6.conf.all.forwarding"
            ]
        );
    }
}
