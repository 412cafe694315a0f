//! The nftables ruleset of one instance, as text for `nft -f`, and the
//! few reads host mode makes of the ruleset (`nft -j`).
//!
//! One table per instance, `inet hollywood-<name>`, written by
//! [`Ruleset::text`] (a pure function, so the exact rules are unit-tested
//! and checked with `nft -c -f`) and installed in one transaction: the
//! batch first adds and deletes the table, so a leftover of the same
//! name is replaced atomically (`destroy table` would need nft ≥ 1.0.8).
//! Removing the instance is `nft delete table inet hollywood-<name>`.

use crate::error::{Error, Result};
use crate::netns::run_command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};

/// Prefix of every host-mode table name.
pub const TABLE_PREFIX: &str = "hollywood-";

/// The table of instance `name` (without its family, `inet`).
pub fn table_name(name: &str) -> String {
    format!("{TABLE_PREFIX}{name}")
}

/// What the rules of one instance need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// Instance name (the table is `inet hollywood-<name>`).
    pub name: String,
    /// The instance's TUN device.
    pub tun: String,
    /// The egress interfaces: the default route's, or several for a
    /// multi-homed host (a relay that calls upstream by one interface and
    /// serves downstream by another). Never empty.
    pub egress: Vec<String>,
    /// The engine's IPv4 address behind the TUN device.
    pub engine_v4: Ipv4Addr,
    /// The engine's IPv6 address, when IPv6 is set up (else IPv6 from the
    /// TUN is dropped).
    pub engine_v6: Option<Ipv6Addr>,
    /// TCP ports DNATed to the engine (server side); may be empty.
    pub listen: Vec<u16>,
    /// Source ports masquerade maps the engine's connections to (outside
    /// the kernel's `ip_local_port_range`, so a reply whose NAT entry is
    /// gone can be told from the kernel's own traffic); `None` = any.
    pub masq_ports: Option<(u16, u16)>,
    /// The table's comment (who made it).
    pub comment: String,
}

impl Ruleset {
    /// The whole `nft -f` batch: replace the table with this instance's.
    ///
    /// - `postrouting`: masquerade the engine's TCP out of the egress
    ///   interfaces (the client side, always present);
    /// - `prerouting`/`output` (with `listen` ports): DNAT of connections
    ///   to a local address's listening port to the engine (`output`: from
    ///   this host itself to its own non-loopback addresses);
    /// - `forward`: drop conntrack-INVALID packets to and from the TUN
    ///   (they are not NATed and would leave with the private source),
    ///   anything from the TUN that is not from the engine's address, or
    ///   or IPv6 when it is not set up, or not leaving by an egress;
    ///   accept the rest from the TUN, and toward it only replies and
    ///   DNATed connections;
    /// - `input`: a packet for a listening port that was not DNATed, or a
    ///   reply in the masquerade range whose NAT entry is gone, must not
    ///   reach the kernel's TCP, which would answer it with RST.
    pub fn text(&self) -> String {
        let t = table_name(&self.name);
        let tun = &self.tun;
        let eg = self.egress_match();
        let eng = self.engine_v4;
        let server = !self.listen.is_empty();
        let mut s = String::new();
        let mut line = |l: &str| {
            s.push_str(l);
            s.push('\n');
        };
        line(&format!("add table inet {t}"));
        line(&format!("delete table inet {t}"));
        line(&format!("table inet {t} {{"));
        line(&format!("  comment \"{}\"", self.comment.replace('"', "'")));
        if server {
            let ports: Vec<String> = self.listen.iter().map(u16::to_string).collect();
            line("  set ports {");
            line("    type inet_service");
            line(&format!("    elements = {{ {} }}", ports.join(", ")));
            line("  }");
            line("  chain prerouting {");
            line("    type nat hook prerouting priority dstnat; policy accept;");
            line(&format!(
                "    iifname != \"{tun}\" fib daddr type local tcp dport @ports counter dnat ip to {eng}"
            ));
            if let Some(e6) = self.engine_v6 {
                line(&format!(
                    "    iifname != \"{tun}\" fib daddr type local tcp dport @ports counter dnat ip6 to {e6}"
                ));
            }
            line("  }");
            line("  chain output {");
            // `priority dstnat` is refused for the output hook by nft 1.0.6:
            // its value, -100, is accepted.
            line("    type nat hook output priority -100; policy accept;");
            line(&format!(
                "    fib daddr type local ip daddr != 127.0.0.0/8 tcp dport @ports counter dnat ip to {eng}"
            ));
            if let Some(e6) = self.engine_v6 {
                line(&format!(
                    "    fib daddr type local ip6 daddr != ::1 tcp dport @ports counter dnat ip6 to {e6}"
                ));
            }
            line("  }");
        }
        let masq = match self.masq_ports {
            Some((lo, hi)) => format!("masquerade to :{lo}-{hi}"),
            None => "masquerade".to_owned(),
        };
        line("  chain postrouting {");
        line("    type nat hook postrouting priority srcnat; policy accept;");
        line(&format!(
            "    iifname \"{tun}\" oifname {eg} ip saddr {eng} meta l4proto tcp counter {masq}"
        ));
        if let Some(e6) = self.engine_v6 {
            line(&format!(
                "    iifname \"{tun}\" oifname {eg} ip6 saddr {e6} meta l4proto tcp counter {masq}"
            ));
        }
        line("  }");
        line("  chain forward {");
        line("    type filter hook forward priority filter; policy accept;");
        line(&format!(
            "    iifname \"{tun}\" ct state invalid counter drop"
        ));
        line(&format!(
            "    oifname \"{tun}\" ct state invalid counter drop"
        ));
        match self.engine_v6 {
            Some(e6) => line(&format!(
                "    iifname \"{tun}\" ip6 saddr != {e6} counter drop"
            )),
            None => line(&format!(
                "    iifname \"{tun}\" meta nfproto != ipv4 counter drop"
            )),
        }
        line(&format!(
            "    iifname \"{tun}\" ip saddr != {eng} counter drop"
        ));
        line(&format!(
            "    iifname \"{tun}\" oifname != {eg} counter drop"
        ));
        line(&format!("    iifname \"{tun}\" counter accept"));
        line(&format!(
            "    oifname \"{tun}\" ct state established,related counter accept"
        ));
        line(&format!(
            "    oifname \"{tun}\" ct status dnat counter accept"
        ));
        line(&format!("    oifname \"{tun}\" counter drop"));
        line("  }");
        line("  chain input {");
        line("    type filter hook input priority filter; policy accept;");
        if server {
            line("    iifname != \"lo\" tcp dport @ports counter drop");
        }
        if let Some((lo, hi)) = self.masq_ports {
            line(&format!(
                "    iifname {eg} tcp dport {lo}-{hi} ct state invalid counter drop"
            ));
            line(&format!(
                "    iifname {eg} tcp dport {lo}-{hi} ct state new tcp flags & (syn | ack) != syn counter drop"
            ));
        }
        line("  }");
        line("}");
        s
    }

    /// The egress interfaces as the right side of an `iifname`/`oifname`
    /// match: one quoted name, or an anonymous set of several
    /// (`{ "a", "b" }`; `!=` negates set membership).
    fn egress_match(&self) -> String {
        match self.egress.as_slice() {
            [one] => format!("\"{one}\""),
            many => {
                let q: Vec<String> = many.iter().map(|e| format!("\"{e}\"")).collect();
                format!("{{ {} }}", q.join(", "))
            }
        }
    }
}

/// The masquerade source-port range: from above the kernel's
/// `ip_local_port_range` (its text, `"32768\t60999"`) to 65535, if that
/// leaves at least 1024 ports; `None` (any port) otherwise.
pub fn masq_ports(local_port_range: &str) -> Option<(u16, u16)> {
    let hi: u16 = local_port_range.split_whitespace().nth(1)?.parse().ok()?;
    let lo = hi.checked_add(2)?; // a gap of one port, as 60999 → 61001
    (u32::from(u16::MAX) - u32::from(lo) + 1 >= 1024).then_some((lo, u16::MAX))
}

/// Run `nft` with `args` and `input` on stdin.
fn nft_stdin(args: &[&str], input: &str) -> Result<()> {
    let command = format!("nft {}", args.join(" "));
    let mut child = Command::new("nft")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("run `{command}`"), e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| Error::io(format!("write the ruleset to `{command}`"), e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(format!("wait for `{command}`"), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command,
            status: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Install a batch atomically (`nft -f -`).
pub fn apply(batch: &str) -> Result<()> {
    nft_stdin(&["-f", "-"], batch)
}

/// Check a batch without installing it (`nft -c -f -`).
pub fn check(batch: &str) -> Result<()> {
    nft_stdin(&["-c", "-f", "-"], batch)
}

/// Whether the `nft` tool runs here.
pub fn available() -> bool {
    Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `delete table inet hollywood-<name>`; `Ok(false)` if it did not exist.
pub fn delete_table(name: &str) -> Result<bool> {
    let t = table_name(name);
    if !list_tables()?.iter().any(|(f, n)| f == "inet" && *n == t) {
        return Ok(false);
    }
    run_command("nft", &["delete", "table", "inet", &t])?;
    Ok(true)
}

/// The `nftables` array of an `nft -j` listing.
fn items(json: &str, what: &str) -> Result<Vec<Value>> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Error::HostMode(format!("cannot parse the JSON of `{what}`: {e}")))?;
    Ok(v["nftables"].as_array().cloned().unwrap_or_default())
}

/// `(family, name)` of every table in `nft -j list tables` output.
pub fn parse_tables(json: &str) -> Result<Vec<(String, String)>> {
    Ok(items(json, "nft -j list tables")?
        .iter()
        .filter_map(|i| {
            let t = &i["table"];
            Some((
                t["family"].as_str()?.to_owned(),
                t["name"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

/// Every table of the namespace, `(family, name)`.
pub fn list_tables() -> Result<Vec<(String, String)>> {
    parse_tables(&run_command("nft", &["-j", "list", "tables"])?)
}

/// A base chain hooked at `forward` in a table that is not host mode's
/// that drops what it does not accept — by its policy or by an
/// unconditional drop or reject as its last rule (firewalld's
/// `filter_FORWARD`, an iptables `-A FORWARD -j DROP`): it drops what our
/// table accepts (an accept ends only its own base chain; a drop anywhere
/// is final).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardDrop {
    /// Table family (`ip`, `ip6`, `inet`).
    pub family: String,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// How it drops: `"policy drop"` or `"drop at the end"`/`"reject at the end"`.
    pub how: String,
}

/// Whether a rule's expressions are an unconditional drop or reject
/// (nothing but counters and logs before it); which one.
fn unconditional_drop(expr: &Value) -> Option<&'static str> {
    let e = expr.as_array()?;
    let (last, before) = e.split_last()?;
    let only_side_effects = before
        .iter()
        .all(|x| x.get("counter").is_some() || x.get("log").is_some());
    if !only_side_effects {
        return None;
    }
    if last.get("drop").is_some() {
        Some("drop at the end")
    } else if last.get("reject").is_some() {
        Some("reject at the end")
    } else {
        None
    }
}

/// The forward-dropping chains in `nft -j list ruleset` output that can
/// drop IPv4 (families `ip` and `inet`).
pub fn parse_forward_drops(json: &str) -> Result<Vec<ForwardDrop>> {
    let items = items(json, "nft -j list ruleset")?;
    let mut out = Vec::new();
    for i in &items {
        let c = &i["chain"];
        let (Some(family), Some(table), Some(chain)) = (
            c["family"].as_str(),
            c["table"].as_str(),
            c["name"].as_str(),
        ) else {
            continue;
        };
        if c["hook"] != "forward"
            || !matches!(family, "ip" | "inet")
            || table.starts_with(TABLE_PREFIX)
        {
            continue;
        }
        let how = if c["policy"] == "drop" {
            Some("policy drop")
        } else {
            items
                .iter()
                .map(|i| &i["rule"])
                .rfind(|r| r["family"] == family && r["table"] == table && r["chain"] == chain)
                .and_then(|r| unconditional_drop(&r["expr"]))
        };
        if let Some(how) = how {
            out.push(ForwardDrop {
                family: family.to_owned(),
                table: table.to_owned(),
                chain: chain.to_owned(),
                how: how.to_owned(),
            });
        }
    }
    Ok(out)
}

/// The forward-dropping chains of the namespace (nftables and
/// iptables-nft; iptables-legacy is not visible here).
pub fn forward_drops() -> Result<Vec<ForwardDrop>> {
    parse_forward_drops(&run_command("nft", &["-j", "list", "ruleset"])?)
}

/// Packets counted per chain in `nft -j list table …` output (the sum of
/// the chain's counters).
pub fn parse_counters(json: &str) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for i in items(json, "nft -j list table")? {
        let r = &i["rule"];
        let Some(chain) = r["chain"].as_str() else {
            continue;
        };
        let n: u64 = r["expr"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["counter"]["packets"].as_u64())
            .sum();
        *out.entry(chain.to_owned()).or_insert(0) += n;
    }
    Ok(out)
}

/// Packets counted per chain of instance `name`'s table; `None` when the
/// table does not exist.
pub fn counters(name: &str) -> Result<Option<BTreeMap<String, u64>>> {
    let t = table_name(name);
    if !list_tables()?.iter().any(|(f, n)| f == "inet" && *n == t) {
        return Ok(None);
    }
    parse_counters(&run_command("nft", &["-j", "list", "table", "inet", &t])?).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Ruleset {
        Ruleset {
            name: "h0".into(),
            tun: "hwh0".into(),
            egress: vec!["eth0".into()],
            engine_v4: Ipv4Addr::new(10, 203, 0, 2),
            engine_v6: None,
            listen: vec![],
            masq_ports: Some((61001, 65535)),
            comment: "hollywood host h0".into(),
        }
    }

    fn server() -> Ruleset {
        Ruleset {
            listen: vec![9000, 9443],
            ..client()
        }
    }

    /// Skip (with a printed reason) unless `nft -c` can run here: it needs
    /// the tool and CAP_NET_ADMIN (it asks the kernel).
    fn nft_checkable() -> bool {
        if !available() {
            hollywood_test_support::skip("the nft tool (package nftables) is not installed");
            return false;
        }
        if !crate::is_root() {
            hollywood_test_support::skip("`nft -c` needs root (CAP_NET_ADMIN)");
            return false;
        }
        true
    }

    #[test]
    fn the_client_ruleset_masquerades_and_has_no_dnat() {
        let t = client().text();
        assert!(t.starts_with(
            "add table inet hollywood-h0\ndelete table inet hollywood-h0\ntable inet hollywood-h0 {\n"
        ));
        assert!(t.contains(
            "iifname \"hwh0\" oifname \"eth0\" ip saddr 10.203.0.2 meta l4proto tcp counter masquerade to :61001-65535"
        ));
        assert!(!t.contains("dnat ip to") && !t.contains("@ports"));
        assert!(t.contains("oifname \"hwh0\" counter drop"));
        assert!(t.contains("tcp dport 61001-65535 ct state invalid counter drop"));
    }

    #[test]
    fn the_server_ruleset_dnats_its_ports_to_the_engine() {
        let t = server().text();
        assert!(t.contains("elements = { 9000, 9443 }"));
        assert!(t.contains(
            "iifname != \"hwh0\" fib daddr type local tcp dport @ports counter dnat ip to 10.203.0.2"
        ));
        assert!(t.contains("type nat hook output priority -100"));
        assert!(t.contains("iifname != \"lo\" tcp dport @ports counter drop"));
        let plain = Ruleset {
            masq_ports: None,
            ..server()
        };
        assert!(plain.text().contains("counter masquerade\n"));
        assert!(!plain.text().contains("61001"));
    }

    #[test]
    fn nft_accepts_both_rulesets() {
        if !nft_checkable() {
            return;
        }
        let v6 = |r: Ruleset| Ruleset {
            engine_v6: Some("fd12:3456:789a:0::2".parse().unwrap()),
            ..r
        };
        for r in [
            client(),
            server(),
            v6(client()),
            v6(server()),
            multi_homed(),
            v6(multi_homed()),
        ] {
            check(&r.text()).unwrap_or_else(|e| panic!("{e}\n{}", r.text()));
        }
        // The check is real: a broken rule is refused.
        let broken = client().text().replace("masquerade to", "masquerade too");
        assert!(check(&broken).is_err());
    }

    #[test]
    fn with_ipv6_the_engine_gets_dnat_masquerade_and_anti_spoofing_in_both_families() {
        let r = Ruleset {
            engine_v6: Some("fd12:3456:789a::2".parse().unwrap()),
            ..server()
        };
        let t = r.text();
        assert!(t.contains("dnat ip6 to fd12:3456:789a::2"), "{t}");
        assert!(t.contains("ip6 daddr != ::1 tcp dport @ports counter dnat ip6 to"));
        assert!(t.contains("ip6 saddr fd12:3456:789a::2 meta l4proto tcp counter masquerade"));
        assert!(t.contains("iifname \"hwh0\" ip6 saddr != fd12:3456:789a::2 counter drop"));
        assert!(!t.contains("nfproto"));
        assert!(server()
            .text()
            .contains("meta nfproto != ipv4 counter drop"));
    }

    fn multi_homed() -> Ruleset {
        Ruleset {
            egress: vec!["to-prev".into(), "to-next".into()],
            ..server()
        }
    }

    #[test]
    fn several_egress_interfaces_are_one_set_in_every_rule() {
        let t = multi_homed().text();
        let set = "{ \"to-prev\", \"to-next\" }";
        assert!(t.contains(&format!(
            "iifname \"hwh0\" oifname {set} ip saddr 10.203.0.2 meta l4proto tcp counter masquerade to :61001-65535"
        )), "{t}");
        assert!(
            t.contains(&format!("iifname \"hwh0\" oifname != {set} counter drop")),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "iifname {set} tcp dport 61001-65535 ct state invalid counter drop"
            )),
            "{t}"
        );
        assert!(t.contains(&format!(
            "iifname {set} tcp dport 61001-65535 ct state new tcp flags & (syn | ack) != syn counter drop"
        )), "{t}");
        // No rule names one interface alone, and DNAT does not depend on
        // the interface a caller comes in by.
        assert!(!t.contains("oifname \"to-"), "{t}");
        assert!(!t.contains("iifname \"to-"), "{t}");
        assert!(t.contains("iifname != \"hwh0\" fib daddr type local tcp dport @ports counter dnat ip to 10.203.0.2"));
        let v6 = Ruleset {
            engine_v6: Some("fd12:3456:789a::2".parse().unwrap()),
            ..multi_homed()
        }
        .text();
        assert!(v6.contains(&format!(
            "iifname \"hwh0\" oifname {set} ip6 saddr fd12:3456:789a::2 meta l4proto tcp counter masquerade"
        )), "{v6}");
    }

    #[test]
    fn one_egress_interface_keeps_the_plain_match() {
        let t = server().text();
        assert!(t.contains("iifname \"hwh0\" oifname != \"eth0\" counter drop"));
        assert!(!t.contains('{') || !t.contains("oifname {"));
        // Three interfaces: one set of three.
        let r = Ruleset {
            egress: vec!["a".into(), "b".into(), "c".into()],
            ..client()
        };
        assert!(r
            .text()
            .contains("oifname != { \"a\", \"b\", \"c\" } counter drop"));
    }

    #[test]
    fn masquerade_ports_start_above_the_local_port_range() {
        assert_eq!(masq_ports("32768\t60999\n"), Some((61001, 65535)));
        assert_eq!(masq_ports("1024 65000"), None);
        assert_eq!(masq_ports("1024 65535"), None);
        assert_eq!(masq_ports("garbage"), None);
    }

    #[test]
    fn listings_are_parsed() {
        let tables = r#"{"nftables":[{"metainfo":{"version":"1.0.6","json_schema_version":1}},
            {"table":{"family":"inet","name":"hollywood-h0","handle":3}},{"table":{"family":"ip","name":"filter","handle":4}}]}"#;
        assert_eq!(
            parse_tables(tables).unwrap(),
            vec![
                ("inet".into(), "hollywood-h0".into()),
                ("ip".into(), "filter".into())
            ]
        );
        let chains = r#"{"nftables":[{"metainfo":{}},
            {"chain":{"family":"ip","table":"filter","name":"FORWARD","handle":2,"type":"filter","hook":"forward","prio":0,"policy":"drop"}},
            {"chain":{"family":"inet","table":"hollywood-h0","name":"forward","handle":9,"type":"filter","hook":"forward","prio":0,"policy":"drop"}},
            {"chain":{"family":"ip6","table":"filter","name":"FORWARD","handle":2,"type":"filter","hook":"forward","prio":0,"policy":"drop"}},
            {"chain":{"family":"inet","table":"fw","name":"f","handle":1,"type":"filter","hook":"forward","prio":0,"policy":"accept"}},
            {"chain":{"family":"ip","table":"filter","name":"DOCKER-USER","handle":5}},
            {"chain":{"family":"inet","table":"firewalld","name":"filter_FORWARD","hook":"forward","prio":10,"policy":"accept"}},
            {"rule":{"family":"inet","table":"firewalld","chain":"filter_FORWARD","expr":[{"match":{}},{"accept":null}]}},
            {"rule":{"family":"inet","table":"firewalld","chain":"filter_FORWARD","expr":[{"reject":{"type":"icmpx","expr":"admin-prohibited"}}]}},
            {"chain":{"family":"ip","table":"legacyish","name":"FWD","hook":"forward","prio":0,"policy":"accept"}},
            {"rule":{"family":"ip","table":"legacyish","chain":"FWD","expr":[{"counter":{"packets":0,"bytes":0}},{"drop":null}]}},
            {"chain":{"family":"ip","table":"open","name":"f","hook":"forward","prio":0,"policy":"accept"}},
            {"rule":{"family":"ip","table":"open","chain":"f","expr":[{"match":{"op":"==","left":{"meta":{"key":"iifname"}},"right":"x"}},{"drop":null}]}}]}"#;
        let d = |family: &str, table: &str, chain: &str, how: &str| ForwardDrop {
            family: family.into(),
            table: table.into(),
            chain: chain.into(),
            how: how.into(),
        };
        assert_eq!(
            parse_forward_drops(chains).unwrap(),
            vec![
                d("ip", "filter", "FORWARD", "policy drop"),
                d("inet", "firewalld", "filter_FORWARD", "reject at the end"),
                d("ip", "legacyish", "FWD", "drop at the end"),
            ]
        );
        let table = r#"{"nftables":[{"metainfo":{}},{"table":{"family":"inet","name":"hollywood-h0"}},
            {"chain":{"family":"inet","table":"hollywood-h0","name":"forward"}},
            {"rule":{"family":"inet","table":"hollywood-h0","chain":"forward","expr":[{"counter":{"packets":3,"bytes":180}},{"drop":null}]}},
            {"rule":{"family":"inet","table":"hollywood-h0","chain":"forward","expr":[{"counter":{"packets":4,"bytes":240}},{"accept":null}]}},
            {"rule":{"family":"inet","table":"hollywood-h0","chain":"input","expr":[{"drop":null}]}}]}"#;
        let c = parse_counters(table).unwrap();
        assert_eq!(c.get("forward"), Some(&7));
        assert_eq!(c.get("input"), Some(&0));
    }
}
