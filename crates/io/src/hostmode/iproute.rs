//! What host mode reads from the kernel's routing and link tables, through
//! `ip -j` (iproute2's JSON output) parsed with serde_json: the egress
//! interface and gateway of the IPv4 default route, an interface's MTU,
//! and every IPv4 address and route prefix (for allocation).
//!
//! Why `ip` and not the `rtnetlink` crate: rtnetlink 0.24 does not resolve
//! from the local registry cache (its `futures` dependency needs
//! `futures-macro`, which is not there), and the crate's other namespace
//! code (`crate::netns`) already configures links with `ip`, so the exact
//! command appears in every error and can be typed by hand.

use crate::error::{Error, Result};
use crate::netns::run_command;
use serde_json::Value;
use std::net::Ipv4Addr;

/// The interface the IPv4 default route leaves by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// Interface name.
    pub dev: String,
    /// Gateway of the default route (none on a point-to-point link).
    pub gateway: Option<Ipv4Addr>,
    /// The interface's MTU.
    pub mtu: u32,
}

fn parse(json: &str, what: &str) -> Result<Vec<Value>> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Error::HostMode(format!("cannot parse the JSON of {what}: {e}")))?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

/// The default route with the lowest metric in `ip -4 -j route show
/// default` output: its interface and gateway.
pub fn parse_default_route(json: &str) -> Result<Option<(String, Option<Ipv4Addr>)>> {
    let routes = parse(json, "ip -4 -j route show default")?;
    let best = routes
        .iter()
        .filter(|r| r["dst"] == "default" && r["dev"].is_string())
        .min_by_key(|r| r["metric"].as_u64().unwrap_or(0));
    Ok(best.map(|r| {
        let dev = r["dev"].as_str().unwrap_or_default().to_owned();
        let gw = r["gateway"].as_str().and_then(|g| g.parse().ok());
        (dev, gw)
    }))
}

/// The `mtu` of the (one) link in `ip -j link show dev X` output.
pub fn parse_link_mtu(json: &str) -> Result<Option<u32>> {
    Ok(parse(json, "ip -j link show")?
        .first()
        .and_then(|l| l["mtu"].as_u64())
        .and_then(|m| u32::try_from(m).ok()))
}

/// Every IPv4 prefix in `ip -4 -j addr show` output (`local/prefixlen`).
pub fn parse_addr_prefixes(json: &str) -> Result<Vec<(Ipv4Addr, u8)>> {
    let mut out = Vec::new();
    for link in parse(json, "ip -4 -j addr show")? {
        for a in link["addr_info"].as_array().into_iter().flatten() {
            let local = a["local"].as_str().and_then(|s| s.parse().ok());
            let len = a["prefixlen"].as_u64().and_then(|l| u8::try_from(l).ok());
            if let (Some(local), Some(len)) = (local, len) {
                out.push((local, len.min(32)));
            }
        }
    }
    Ok(out)
}

/// Every IPv4 destination prefix in `ip -4 -j route show table all`
/// output except default routes (`dst` is `a.b.c.d/len`, or a bare
/// address for a host route).
pub fn parse_route_prefixes(json: &str) -> Result<Vec<(Ipv4Addr, u8)>> {
    let mut out = Vec::new();
    for r in parse(json, "ip -4 -j route show table all")? {
        let Some(dst) = r["dst"].as_str() else {
            continue;
        };
        let (addr, len) = match dst.split_once('/') {
            Some((a, l)) => (a, l.parse::<u8>().ok()),
            None => (dst, Some(32)),
        };
        if let (Ok(addr), Some(len @ 1..=32)) = (addr.parse::<Ipv4Addr>(), len) {
            out.push((addr, len));
        }
    }
    Ok(out)
}

/// The IPv4 default route's interface, gateway and MTU, or an error
/// naming what is missing.
pub fn egress() -> Result<Egress> {
    let routes = run_command("ip", &["-4", "-j", "route", "show", "default"])?;
    let Some((dev, gateway)) = parse_default_route(&routes)? else {
        return Err(Error::HostMode(
            "no IPv4 default route: host mode masquerades out of the default route's interface; add one (ip route add default via GATEWAY)".into(),
        ));
    };
    let mtu = link_mtu(&dev)?;
    Ok(Egress { dev, gateway, mtu })
}

/// An interface's MTU (`ip -j link show dev X`), or an error naming it.
pub fn link_mtu(dev: &str) -> Result<u32> {
    let link = run_command("ip", &["-j", "link", "show", "dev", dev])?;
    parse_link_mtu(&link)?
        .ok_or_else(|| Error::HostMode(format!("`ip -j link show dev {dev}` reports no MTU")))
}

/// The interfaces of the main table's IPv4 routes in `ip -4 -j route show`
/// output, in order of first appearance, without `lo` and host mode's own
/// TUN devices (`hwh<i>`): where the engine's connections may leave on a
/// multi-homed host.
pub fn parse_route_devs(json: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for r in parse(json, "ip -4 -j route show")? {
        let Some(dev) = r["dev"].as_str() else {
            continue;
        };
        if dev != "lo" && !super::alloc::is_tun_name(dev) && !out.iter().any(|d| d == dev) {
            out.push(dev.to_owned());
        }
    }
    Ok(out)
}

/// Every interface an IPv4 route of the main table leaves by (see
/// [`parse_route_devs`]), or an error when there is none.
pub fn routed_devs() -> Result<Vec<String>> {
    let devs = parse_route_devs(&run_command("ip", &["-4", "-j", "route", "show"])?)?;
    if devs.is_empty() {
        return Err(Error::HostMode(
            "no IPv4 route leaves by any interface: nothing to masquerade out of".into(),
        ));
    }
    Ok(devs)
}

/// Whether `ip -6 -j addr show dev X scope global` output lists an address.
pub fn parse_has_global_v6(json: &str) -> Result<bool> {
    Ok(parse(json, "ip -6 -j addr show scope global")?
        .iter()
        .any(|l| l["addr_info"].as_array().is_some_and(|a| !a.is_empty())))
}

/// The interface of the IPv6 default route, if there is one and that
/// interface has a global IPv6 address (else IPv6 is not set up).
pub fn egress_v6() -> Result<Option<String>> {
    let routes = run_command("ip", &["-6", "-j", "route", "show", "default"])?;
    let Some((dev, _)) = parse_default_route(&routes)? else {
        return Ok(None);
    };
    let addrs = run_command(
        "ip",
        &["-6", "-j", "addr", "show", "dev", &dev, "scope", "global"],
    )?;
    Ok(parse_has_global_v6(&addrs)?.then_some(dev))
}

/// Every IPv4 address prefix and route prefix (default routes excluded).
pub fn taken_prefixes() -> Result<Vec<(Ipv4Addr, u8)>> {
    let mut p = parse_addr_prefixes(&run_command("ip", &["-4", "-j", "addr", "show"])?)?;
    p.extend(parse_route_prefixes(&run_command(
        "ip",
        &["-4", "-j", "route", "show", "table", "all"],
    )?)?);
    Ok(p)
}

/// Names of every link and, for each, its `linkinfo.info_kind` (`"tun"`,
/// `"veth"`, …) from `ip -d -j link show`.
pub fn parse_links(json: &str) -> Result<Vec<(String, Option<String>)>> {
    Ok(parse(json, "ip -d -j link show")?
        .iter()
        .filter_map(|l| {
            let name = l["ifname"].as_str()?.to_owned();
            let kind = l["linkinfo"]["info_kind"].as_str().map(str::to_owned);
            Some((name, kind))
        })
        .collect())
}

/// Every link of the namespace with its kind (see [`parse_links`]).
pub fn links() -> Result<Vec<(String, Option<String>)>> {
    parse_links(&run_command("ip", &["-d", "-j", "link", "show"])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_route_with_the_lowest_metric_wins() {
        let json = r#"[{"dst":"default","gateway":"192.168.1.1","dev":"wlan0","protocol":"dhcp","metric":600,"flags":[]},
                       {"dst":"default","gateway":"192.168.2.1","dev":"eth0","protocol":"dhcp","metric":100,"flags":[]}]"#;
        assert_eq!(
            parse_default_route(json).unwrap(),
            Some(("eth0".into(), Some(Ipv4Addr::new(192, 168, 2, 1))))
        );
        // A point-to-point default route has no gateway; no metric = 0.
        let json = r#"[{"dst":"default","dev":"ppp0","scope":"link","flags":[]}]"#;
        assert_eq!(
            parse_default_route(json).unwrap(),
            Some(("ppp0".into(), None))
        );
        assert_eq!(parse_default_route("[]").unwrap(), None);
        assert!(parse_default_route("not json").is_err());
    }

    #[test]
    fn mtu_addresses_and_routes_are_read() {
        let link = r#"[{"ifindex":2,"ifname":"eth0","flags":["UP"],"mtu":1400,"operstate":"UP"}]"#;
        assert_eq!(parse_link_mtu(link).unwrap(), Some(1400));
        let addrs = r#"[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},
                        {"ifindex":2,"ifname":"eth0","addr_info":[{"family":"inet","local":"10.203.0.7","prefixlen":24}]}]"#;
        assert_eq!(
            parse_addr_prefixes(addrs).unwrap(),
            vec![
                (Ipv4Addr::new(127, 0, 0, 1), 8),
                (Ipv4Addr::new(10, 203, 0, 7), 24)
            ]
        );
        let routes = r#"[{"dst":"default","gateway":"10.0.0.1","dev":"eth0"},
                         {"dst":"10.0.0.0/24","dev":"eth0","protocol":"kernel","scope":"link","prefsrc":"10.0.0.2"},
                         {"type":"local","dst":"10.0.0.2","table":"local","dev":"eth0"},
                         {"type":"broadcast","dst":"10.0.0.255","table":"local","dev":"eth0"}]"#;
        assert_eq!(
            parse_route_prefixes(routes).unwrap(),
            vec![
                (Ipv4Addr::new(10, 0, 0, 0), 24),
                (Ipv4Addr::new(10, 0, 0, 2), 32),
                (Ipv4Addr::new(10, 0, 0, 255), 32)
            ]
        );
    }

    #[test]
    fn an_ipv6_default_route_and_global_address_are_found() {
        let json = r#"[{"dst":"default","gateway":"2001:db8:2::1","dev":"eth0","metric":1024,"pref":"medium"}]"#;
        assert_eq!(
            parse_default_route(json).unwrap(),
            Some(("eth0".into(), None))
        );
        let with = r#"[{"ifindex":2,"ifname":"eth0","addr_info":[{"family":"inet6","local":"2001:db8:2::2","prefixlen":64,"scope":"global"}]}]"#;
        assert!(parse_has_global_v6(with).unwrap());
        assert!(!parse_has_global_v6("[]").unwrap());
        assert!(!parse_has_global_v6(r#"[{"ifname":"eth0","addr_info":[]}]"#).unwrap());
    }

    #[test]
    fn route_interfaces_are_listed_once_without_lo_and_our_tuns() {
        let json = r#"[{"dst":"default","gateway":"10.90.2.1","dev":"to-prev","flags":[]},
                       {"dst":"10.90.1.0/24","gateway":"10.90.2.1","dev":"to-prev","flags":[]},
                       {"dst":"10.90.2.0/24","dev":"to-prev","protocol":"kernel","scope":"link","prefsrc":"10.90.2.1"},
                       {"dst":"10.90.3.0/24","dev":"to-next","protocol":"kernel","scope":"link","prefsrc":"10.90.3.2"},
                       {"dst":"10.203.0.0/30","dev":"hwh0","protocol":"kernel","scope":"link"},
                       {"dst":"127.0.0.0/8","dev":"lo"},
                       {"dst":"blackhole","type":"blackhole"}]"#;
        assert_eq!(
            parse_route_devs(json).unwrap(),
            vec!["to-prev".to_owned(), "to-next".to_owned()]
        );
        assert!(parse_route_devs("[]").unwrap().is_empty());
    }

    #[test]
    fn links_are_listed_with_their_kind() {
        let json = r#"[{"ifname":"lo"},{"ifname":"hwh0","linkinfo":{"info_kind":"tun","info_data":{"type":"tun","pi":false,"persist":true}}}]"#;
        assert_eq!(
            parse_links(json).unwrap(),
            vec![("lo".into(), None), ("hwh0".into(), Some("tun".into()))]
        );
    }
}
