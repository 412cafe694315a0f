//! `hollywood://` URIs, as `srt://` ones are for SRT: what `hollywood
//! transmit` and the GStreamer elements (`hollywoodsink`, `hollywoodsrc`)
//! accept.
//!
//! ```text
//! hollywood://HOST:PORT[?mode=caller|listener&transport=quic|hollywood|kernel]
//! hollywood://HOST:PORT/STREAM?mode=publish|play[&token=T&user=U]   (a relay)
//! ```
//!
//! No host (`hollywood://:9000`) is a listener on every address, as with
//! `srt-live-transmit`; a host is a caller unless `mode=listener`.

use crate::pubsub::{Role, StreamId};
use crate::relay::Mode;
use crate::{LocalEndpoint, Preconnection, Protocol, RemoteEndpoint};
use std::net::IpAddr;

/// A parsed `hollywood://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HollywoodUri {
    /// The host (empty: none given).
    pub host: String,
    /// The port.
    pub port: u16,
    /// `mode=caller|listener`, if given.
    pub mode: Option<Mode>,
    /// `transport=…`: one protocol instead of racing.
    pub transport: Option<Protocol>,
    /// A stream on a relay: publish or play, with its id.
    pub stream: Option<(Role, StreamId)>,
}

impl HollywoodUri {
    /// Parse `s` (it must start with `hollywood://`).
    pub fn parse(s: &str) -> Result<HollywoodUri, String> {
        let rest = s.strip_prefix("hollywood://").ok_or_else(|| {
            format!("{s}: expected hollywood://… (e.g. hollywood://host:9000?mode=listener)")
        })?;
        let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = authority.split_once('/').unwrap_or((authority, ""));
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or_else(|| format!("{s}: no port"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{s}: bad port {port:?}"))?;
        let (mut mode, mut transport, mut role) = (None, None, None);
        let (mut token, mut user) = (None, None);
        for kv in query.split('&').filter(|k| !k.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("{s}: bad option {kv:?}"))?;
            match k {
                "mode" => match v {
                    "caller" => mode = Some(Mode::Caller),
                    "listener" => mode = Some(Mode::Listener),
                    "publish" => role = Some(Role::Publish),
                    "play" => role = Some(Role::Play),
                    _ => {
                        return Err(format!(
                            "{s}: mode is caller, listener, publish or play, not {v:?}"
                        ))
                    }
                },
                "token" => token = Some(v.to_string()),
                "user" => user = Some(v.to_string()),
                "transport" => {
                    transport = Some(Protocol::parse(v).ok_or_else(|| {
                        format!("{s}: transport is quic, hollywood or kernel, not {v:?}")
                    })?)
                }
                _ => {
                    return Err(format!(
                        "{s}: unknown option {k:?} (mode, transport, token, user)"
                    ))
                }
            }
        }
        let stream = match (role, path.is_empty()) {
            (Some(r), false) => Some((
                r,
                StreamId {
                    resource: path.to_string(),
                    user,
                    mode: Some(r),
                    token,
                },
            )),
            (Some(_), true) => {
                return Err(format!(
                    "{s}: publish and play name a stream: hollywood://HOST:PORT/STREAM?mode=…"
                ))
            }
            (None, false) => {
                return Err(format!(
                    "{s}: a stream path needs mode=publish or mode=play (a relay)"
                ))
            }
            (None, true) if token.is_some() || user.is_some() => {
                return Err(format!("{s}: token and user are for a relay's stream"))
            }
            (None, true) => None,
        };
        if stream.is_some() && mode.is_some() {
            return Err(format!(
                "{s}: a relay's stream is always reached as a caller"
            ));
        }
        Ok(HollywoodUri {
            host,
            port,
            mode,
            transport,
            stream,
        })
    }

    /// Caller or listener: as `srt-live-transmit`, no host means listener;
    /// a relay's stream is always reached as a caller.
    pub fn effective_mode(&self) -> Mode {
        self.mode
            .unwrap_or(if self.host.is_empty() && self.stream.is_none() {
                Mode::Listener
            } else {
                Mode::Caller
            })
    }

    /// `pre` with this URI's endpoint (local for a listener, remote for a
    /// caller) and its `transport`, if any.
    pub fn apply(&self, mut pre: Preconnection) -> Result<Preconnection, String> {
        if let Some(t) = self.transport {
            pre = pre.with_protocols(&[t]);
        }
        Ok(match self.effective_mode() {
            Mode::Listener => {
                let ip: IpAddr = if self.host.is_empty() {
                    IpAddr::from([0, 0, 0, 0])
                } else {
                    self.host.parse().map_err(|_| {
                        format!(
                            "a listener needs an IP address to listen on, not {:?}",
                            self.host
                        )
                    })?
                };
                pre.with_local(LocalEndpoint {
                    ip,
                    port: self.port,
                })
            }
            Mode::Caller => {
                if self.host.is_empty() {
                    return Err("a caller needs a host to call".into());
                }
                let r = match self.host.parse::<IpAddr>() {
                    Ok(ip) => RemoteEndpoint::new().with_ip_address(ip),
                    Err(_) => RemoteEndpoint::new().with_host_name(self.host.clone()),
                };
                pre.with_remote(r.with_port(self.port))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_srt_uris() {
        let u =
            HollywoodUri::parse("hollywood://10.0.0.2:9000?mode=listener&transport=quic").unwrap();
        assert_eq!(u.host, "10.0.0.2");
        assert_eq!(u.port, 9000);
        assert_eq!(u.effective_mode(), Mode::Listener);
        assert_eq!(u.transport, Some(Protocol::Quic));
        assert_eq!(
            HollywoodUri::parse("hollywood://:9000")
                .unwrap()
                .effective_mode(),
            Mode::Listener
        );
        assert_eq!(
            HollywoodUri::parse("hollywood://[fd00::1]:9000")
                .unwrap()
                .effective_mode(),
            Mode::Caller
        );
        let p = HollywoodUri::parse("hollywood://relay:9000/live/cam1?mode=play&user=al").unwrap();
        let (role, id) = p.stream.clone().unwrap();
        assert_eq!(role, Role::Play);
        assert_eq!(id.resource, "live/cam1");
        assert_eq!(id.user.as_deref(), Some("al"));
        assert_eq!(p.effective_mode(), Mode::Caller);
        for bad in [
            "srt://x:1",
            "hollywood://x",
            "hollywood://x:1?mode=both",
            "hollywood://x:1?transport=sctp",
            "hollywood://x:1?latency=5",
            "hollywood://x:1/s",
            "hollywood://x:1?mode=play",
            "hollywood://x:1?token=t",
            "hollywood://x:1/s?mode=play&mode=listener",
        ] {
            assert!(HollywoodUri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_listener_needs_an_address_and_a_caller_a_host() {
        let pre = || {
            Preconnection::new(
                crate::TransportProperties::media(),
                crate::SecurityParameters::Disabled,
            )
        };
        let u = HollywoodUri::parse("hollywood://example.org:9000?mode=listener").unwrap();
        assert!(u.apply(pre()).is_err());
        let u = HollywoodUri::parse("hollywood://:9000?mode=caller").unwrap();
        assert!(u.apply(pre()).is_err());
        let u = HollywoodUri::parse("hollywood://127.0.0.1:9000").unwrap();
        assert!(u.apply(pre()).is_ok());
    }
}
