//! Who may publish or play what: stream ids and refusals.
//!
//! A stream id is SRT's access-control syntax (SRT
//! docs/features/access-control.md): `#!::` then comma-separated
//! `key=value` pairs, of which the relay reads `r` (the resource: which
//! stream), `u` (user), `m` (mode: `publish` or `request`, SRT's word for
//! play) and `s` (SRT's "session id … for verification": here the
//! publish or play token). Anything not starting with `#!::` is the
//! resource itself. Refusals carry HTTP-style codes as SRT's rejection
//! codes do (SRT adds 1000; we send the HTTP number).

use super::wire::Role;

/// A parsed stream id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamId {
    /// `r`: the stream.
    pub resource: String,
    /// `u`: who.
    pub user: Option<String>,
    /// `m`: what they say they want.
    pub mode: Option<Role>,
    /// `s`: the token.
    pub token: Option<String>,
}

/// Why a caller was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP-style: 400 bad request, 401 unauthorized, 403 forbidden,
    /// 404 no such stream, 409 the stream already has a publisher,
    /// 503 the relay is full, 505 protocol version.
    pub code: u16,
    /// For the caller to print.
    pub reason: String,
}

impl Refusal {
    /// A refusal.
    pub fn new(code: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            code,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused ({}): {}", self.code, self.reason)
    }
}

impl StreamId {
    /// Parse a stream id (either form).
    pub fn parse(s: &str) -> Result<StreamId, Refusal> {
        let bad = |why: String| Refusal::new(400, why);
        let Some(body) = s.strip_prefix("#!::") else {
            if s.is_empty() {
                return Err(bad("an empty stream id".into()));
            }
            return Ok(StreamId {
                resource: s.to_string(),
                ..StreamId::default()
            });
        };
        let mut id = StreamId::default();
        for kv in body.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("stream id item {kv:?} is not key=value")))?;
            match k {
                "r" => id.resource = v.to_string(),
                "u" => id.user = Some(v.to_string()),
                "s" => id.token = Some(v.to_string()),
                "m" => {
                    id.mode = Some(match v {
                        "publish" => Role::Publish,
                        "request" | "play" => Role::Play,
                        _ => return Err(bad(format!("stream id mode {v:?} (publish or request)"))),
                    })
                }
                // SRT's other standard keys (h host, t type) and custom
                // ones are allowed and ignored.
                _ => {}
            }
        }
        if id.resource.is_empty() {
            return Err(bad("the stream id names no resource (r=…)".into()));
        }
        Ok(id)
    }

    /// The id in SRT's syntax.
    pub fn to_srt(&self) -> String {
        let mut s = format!("#!::r={}", self.resource);
        if let Some(u) = &self.user {
            s += &format!(",u={u}");
        }
        if let Some(m) = self.mode {
            s += match m {
                Role::Publish => ",m=publish",
                Role::Play => ",m=request",
            };
        }
        if let Some(t) = &self.token {
            s += &format!(",s={t}");
        }
        s
    }
}

/// What a relay lets callers do.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Tokens that may publish. Publishing needs one of them, or
    /// `open_publish`. (A pinned certificate authenticates the relay to
    /// its callers, not callers to the relay: our TLS has no client
    /// certificates. With TLS the token travels sealed; without, in the
    /// clear, and `hollywood relay` says so.)
    pub publish_tokens: Vec<String>,
    /// Anyone may publish (a lab, a closed network).
    pub open_publish: bool,
    /// Tokens that may play. Empty: anyone may.
    pub play_tokens: Vec<String>,
}

impl Policy {
    /// Admit a hello or say why not.
    pub fn admit(&self, role: Role, id: &StreamId) -> Result<(), Refusal> {
        if id.mode.is_some_and(|m| m != role) {
            return Err(Refusal::new(
                400,
                "the stream id's mode (m=) contradicts the hello's",
            ));
        }
        if id.resource.len() > 256 || id.resource.chars().any(char::is_control) {
            return Err(Refusal::new(
                400,
                "a resource name of at most 256 printable characters",
            ));
        }
        let has = |list: &[String]| {
            id.token
                .as_ref()
                .is_some_and(|t| list.iter().any(|x| ct_eq(x, t)))
        };
        match role {
            Role::Publish => {
                if self.open_publish || has(&self.publish_tokens) {
                    return Ok(());
                }
                Err(Refusal::new(
                    401,
                    if id.token.is_some() {
                        "wrong publish token"
                    } else if self.publish_tokens.is_empty() {
                        "this relay takes no publishers (no publish token set)"
                    } else {
                        "publishing needs a token (s=… in the stream id, ?token= in a URL)"
                    },
                ))
            }
            Role::Play => {
                if self.play_tokens.is_empty() || has(&self.play_tokens) {
                    Ok(())
                } else {
                    Err(Refusal::new(
                        401,
                        if id.token.is_some() {
                            "wrong play token"
                        } else {
                            "playing needs a token"
                        },
                    ))
                }
            }
        }
    }
}

/// Compare tokens in time independent of where they differ.
fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srt_syntax_and_plain_names_parse() {
        let id = StreamId::parse("#!::r=live/cam1,u=alice,m=publish,s=k3y,h=x").unwrap();
        assert_eq!(id.resource, "live/cam1");
        assert_eq!(id.user.as_deref(), Some("alice"));
        assert_eq!(id.mode, Some(Role::Publish));
        assert_eq!(id.token.as_deref(), Some("k3y"));
        assert_eq!(StreamId::parse(&id.to_srt()).unwrap(), StreamId { ..id });
        assert_eq!(StreamId::parse("cam2").unwrap().resource, "cam2");
        assert_eq!(StreamId::parse("").unwrap_err().code, 400);
        assert_eq!(StreamId::parse("#!::u=bob").unwrap_err().code, 400);
        assert_eq!(StreamId::parse("#!::r=a,zz").unwrap_err().code, 400);
        assert_eq!(StreamId::parse("#!::r=a,m=steal").unwrap_err().code, 400);
    }

    #[test]
    fn publishing_needs_a_token() {
        let p = Policy {
            publish_tokens: vec!["k3y".into()],
            ..Policy::default()
        };
        let mut id = StreamId::parse("cam").unwrap();
        assert_eq!(p.admit(Role::Publish, &id).unwrap_err().code, 401);
        assert!(p.admit(Role::Play, &id).is_ok());
        id.token = Some("nope".into());
        assert!(p
            .admit(Role::Publish, &id)
            .unwrap_err()
            .reason
            .contains("wrong"));
        id.token = Some("k3y".into());
        assert!(p.admit(Role::Publish, &id).is_ok());
        id.mode = Some(Role::Play);
        assert_eq!(p.admit(Role::Publish, &id).unwrap_err().code, 400);

        let closed = Policy::default();
        let id = StreamId::parse("cam").unwrap();
        assert!(closed
            .admit(Role::Publish, &id)
            .unwrap_err()
            .reason
            .contains("no publishers"));
        let open = Policy {
            open_publish: true,
            play_tokens: vec!["v".into()],
            ..Policy::default()
        };
        assert!(open.admit(Role::Publish, &id).is_ok());
        assert_eq!(open.admit(Role::Play, &id).unwrap_err().code, 401);
    }
}
