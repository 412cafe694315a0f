//! A FORWARD policy of DROP set by someone else (iptables, ufw, Docker),
//! or an unconditional drop or reject at the end of a forward chain
//! (firewalld), drops the engine's forwarded packets whatever our table
//! accepts. Host
//! mode finds it before touching anything and then either punches two
//! ACCEPT rules for its TUN device into the iptables FORWARD chain,
//! tagged with the comment `hollywood:<name>` and removed on `down` (and
//! by `clear`, found by their tag), or — for a drop in a native nftables
//! table (firewalld, hand-written), which host mode never edits — fails
//! with a message naming the chain.

use super::nft::ForwardDrop;
use crate::error::{Error, Result};
use crate::netns::run_command;
use serde::{Deserialize, Serialize};

/// Prefix of the comment that tags host mode's iptables rules.
pub const TAG_PREFIX: &str = "hollywood:";

/// One iptables rule host mode added: `bin -w -I <rule>` to add,
/// `bin -w -D <rule>` to remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hole {
    /// `iptables-nft`, `iptables` or `iptables-legacy`.
    pub bin: String,
    /// Chain and match, e.g. `FORWARD -i hwh0 -m comment --comment hollywood:h0 -j ACCEPT`.
    pub rule: Vec<String>,
}

impl Hole {
    fn args(&self, op: &str) -> Vec<String> {
        let mut a = vec!["-w".to_owned(), op.to_owned()];
        a.extend(self.rule.iter().cloned());
        a
    }

    /// Insert the rule at the head of its chain.
    pub fn add(&self) -> Result<()> {
        let mut a = self.args("-I");
        a.insert(3, "1".to_owned()); // -I FORWARD 1 …
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_command(&self.bin, &a).map(drop)
    }

    /// Delete the rule (exactly this one); `Ok(false)` if it was not there.
    pub fn remove(&self) -> Result<bool> {
        let check = self.args("-C");
        let check: Vec<&str> = check.iter().map(String::as_str).collect();
        if run_command(&self.bin, &check).is_err() {
            return Ok(false);
        }
        let a = self.args("-D");
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_command(&self.bin, &a).map(|_| true)
    }
}

/// The two FORWARD rules for `tun` (in and out), tagged for `name`.
pub fn holes(bin: &str, tun: &str, name: &str) -> Vec<Hole> {
    ["-i", "-o"]
        .iter()
        .map(|dir| Hole {
            bin: bin.to_owned(),
            rule: [
                "FORWARD",
                dir,
                tun,
                "-m",
                "comment",
                "--comment",
                &format!("{TAG_PREFIX}{name}"),
                "-j",
                "ACCEPT",
            ]
            .map(str::to_owned)
            .to_vec(),
        })
        .collect()
}

/// The iptables binary that manages nftables-backed tables here:
/// `iptables-nft` if installed, else `iptables`.
pub fn nft_backed_iptables() -> &'static str {
    if run_command("iptables-nft", &["-V"]).is_ok() {
        "iptables-nft"
    } else {
        "iptables"
    }
}

/// Whether iptables-legacy's `filter` table is loaded in this namespace
/// (legacy rules are invisible to `nft list`).
pub fn legacy_filter_loaded() -> bool {
    std::fs::read_to_string("/proc/net/ip_tables_names")
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "filter"))
}

/// Whether `iptables-legacy -S FORWARD` output sets policy DROP.
pub fn parse_policy_drop(rules: &str) -> bool {
    rules.lines().any(|l| l.trim() == "-P FORWARD DROP")
}

/// The rules of `iptables -S CHAIN` output tagged by host mode, as
/// [`Hole`]s of `bin` (the `-A` dropped), with the name they belong to.
pub fn parse_tagged(bin: &str, rules: &str) -> Vec<(String, Hole)> {
    rules
        .lines()
        .filter_map(|l| {
            let words: Vec<String> = l
                .split_whitespace()
                .map(|w| w.trim_matches('"').to_owned())
                .collect();
            let (first, rule) = words.split_first()?;
            let i = rule.iter().position(|w| w == "--comment")?;
            let name = rule.get(i + 1)?.strip_prefix(TAG_PREFIX)?.to_owned();
            (first == "-A").then(|| {
                (
                    name,
                    Hole {
                        bin: bin.to_owned(),
                        rule: rule.to_vec(),
                    },
                )
            })
        })
        .collect()
}

/// What to do about the forwarding policy: the holes to punch (none when
/// nothing drops), or the error that names a drop we do not edit.
pub fn plan(
    nft_drops: &[ForwardDrop],
    legacy_drop: bool,
    iptables_nft: &str,
    tun: &str,
    name: &str,
) -> std::result::Result<Vec<Hole>, String> {
    let mut out = Vec::new();
    for d in nft_drops {
        let iptables = d.family == "ip" && d.table == "filter" && d.chain == "FORWARD";
        if !iptables {
            return Err(format!(
                "forwarding for {tun} is blocked by chain {:?} ({}) in nftables table {} {}; \
                 an accept in our table cannot override another table's drop, and host mode does not edit \
                 native nftables tables: allow {tun} there (e.g. firewall-cmd --zone=trusted --add-interface={tun}) and retry",
                d.chain, d.how, d.family, d.table
            ));
        }
        out.extend(holes(iptables_nft, tun, name));
    }
    if legacy_drop {
        out.extend(holes("iptables-legacy", tun, name));
    }
    Ok(out)
}

/// [`plan`] for this namespace as it is now.
pub fn probe(tun: &str, name: &str) -> Result<Vec<Hole>> {
    let drops = super::nft::forward_drops()?;
    let legacy = legacy_filter_loaded()
        && run_command("iptables-legacy", &["-w", "-S", "FORWARD"])
            .is_ok_and(|r| parse_policy_drop(&r));
    plan(&drops, legacy, nft_backed_iptables(), tun, name).map_err(Error::HostMode)
}

/// Every tagged rule in the FORWARD chains of both backends (that exist
/// here), with the instance name it belongs to.
pub fn tagged_rules() -> Vec<(String, Hole)> {
    let mut out = Vec::new();
    let ip_filter =
        super::nft::list_tables().is_ok_and(|t| t.iter().any(|(f, n)| f == "ip" && n == "filter"));
    if ip_filter {
        let bin = nft_backed_iptables();
        if let Ok(r) = run_command(bin, &["-w", "-S", "FORWARD"]) {
            out.extend(parse_tagged(bin, &r));
        }
    }
    if legacy_filter_loaded() {
        if let Ok(r) = run_command("iptables-legacy", &["-w", "-S", "FORWARD"]) {
            out.extend(parse_tagged("iptables-legacy", &r));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop_in(family: &str, table: &str, chain: &str) -> ForwardDrop {
        ForwardDrop {
            family: family.into(),
            table: table.into(),
            chain: chain.into(),
            how: "policy drop".into(),
        }
    }

    #[test]
    fn an_iptables_drop_gets_two_tagged_holes() {
        let h = plan(
            &[drop_in("ip", "filter", "FORWARD")],
            false,
            "iptables-nft",
            "hwh0",
            "web",
        )
        .unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(
            h[0].rule.join(" "),
            "FORWARD -i hwh0 -m comment --comment hollywood:web -j ACCEPT"
        );
        assert_eq!(h[1].rule[1], "-o");
        assert_eq!(h[0].bin, "iptables-nft");
        let legacy = plan(&[], true, "iptables-nft", "hwh0", "web").unwrap();
        assert!(legacy.iter().all(|h| h.bin == "iptables-legacy"));
        assert!(plan(&[], false, "iptables", "hwh0", "web")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_native_nft_drop_is_named_in_the_error() {
        let e = plan(
            &[drop_in("inet", "firewalld", "filter_FORWARD")],
            false,
            "iptables",
            "hwh1",
            "x",
        )
        .unwrap_err();
        assert!(
            e.contains("\"filter_FORWARD\"") && e.contains("inet firewalld") && e.contains("hwh1")
        );
    }

    #[test]
    fn tagged_rules_are_found_in_iptables_listings() {
        let listing = "-P FORWARD DROP\n-A FORWARD -i docker0 -j ACCEPT\n\
                       -A FORWARD -o hwh0 -m comment --comment hollywood:web -j ACCEPT\n\
                       -A FORWARD -i hwh0 -m comment --comment \"hollywood:web\" -j ACCEPT\n";
        assert!(parse_policy_drop(listing));
        assert!(!parse_policy_drop("-P FORWARD ACCEPT\n"));
        let t = parse_tagged("iptables", listing);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].0, "web");
        assert_eq!(t[1].1, holes("iptables", "hwh0", "web")[0]);
    }
}
