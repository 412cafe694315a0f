//! HTTP/1.1 on a message transport, as [DASHing-2018] carries it (REFERENCES.md
//! DASHing, setup): a persistent connection; each request is one message on the
//! control sub-stream, each response head one message on the control
//! sub-stream, and each response body goes as fixed-size messages on the
//! data sub-stream, each carrying a sequence number and its stream offset.
//!
//! Heads are parsed with `httparse`. A response head names what it
//! answers (`Content-Location`, RFC 9110 §8.7) and where its body sits in
//! the data stream (`X-Stream-Offset`, ours): with unordered delivery a
//! body message may arrive before its head, and a head before the bodies
//! of earlier responses, so the client places bytes by offset, not by
//! arrival order.
//!
//! A data message is [`DATA_HEADER`] bytes of header — sequence number
//! (u32, big endian, counting data messages from 0) and the stream offset
//! just past its last byte (u64, big endian) — then body bytes. A message
//! never spans two bodies.

/// Sub-stream of requests and response heads (thesis §4.3).
pub const CONTROL: u16 = 1;
/// Sub-stream of response bodies.
pub const DATA: u16 = 0;
/// The [DASHing-2018] fixed message size (bytes, header included).
pub const MESSAGE_SIZE: usize = 1400;
/// Data message header: sequence number and end offset.
pub const DATA_HEADER: usize = 12;
/// Largest request or response head we accept.
pub const MAX_HEAD: usize = 8 * 1024;

/// A GET request for `path`.
pub fn request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: hollywood\r\nConnection: keep-alive\r\n\r\n").into_bytes()
}

/// The header (ours) in which a client tells the server how long after
/// sending the request the response starts to play, in milliseconds, so
/// that a TCP Hollywood server can give each message the lifetime of its
/// playout deadline (thesis §4.2).
pub const PLAYOUT_IN: &str = "X-Playout-In";

/// A GET request for `path`, with [`PLAYOUT_IN`] when `playout_in` is
/// known.
pub fn request_playing_in(path: &str, playout_in: Option<std::time::Duration>) -> Vec<u8> {
    match playout_in {
        None => request(path),
        Some(d) => format!(
            "GET {path} HTTP/1.1\r\nHost: hollywood\r\nConnection: keep-alive\r\n{PLAYOUT_IN}: {}\r\n\r\n",
            d.as_millis()
        )
        .into_bytes(),
    }
}

/// The path a complete GET request asks for.
pub fn parse_request(buf: &[u8]) -> Result<String, String> {
    parse_request_head(buf).map(|(path, _)| path)
}

/// The path a complete GET request asks for and its [`PLAYOUT_IN`], if
/// any (a malformed value is an error).
pub fn parse_request_head(buf: &[u8]) -> Result<(String, Option<std::time::Duration>), String> {
    if buf.len() > MAX_HEAD {
        return Err(format!("request of {} bytes (limit {MAX_HEAD})", buf.len()));
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n == buf.len() => {}
        Ok(httparse::Status::Complete(n)) => {
            return Err(format!("{} bytes after the request head", buf.len() - n))
        }
        Ok(httparse::Status::Partial) => return Err("incomplete request head".into()),
        Err(e) => return Err(format!("bad request: {e}")),
    }
    if req.version != Some(1) {
        return Err("only HTTP/1.1 is spoken here".into());
    }
    if req.method != Some("GET") {
        return Err(format!(
            "method {:?} not supported",
            req.method.unwrap_or("")
        ));
    }
    let mut playout_in = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case(PLAYOUT_IN) {
            let ms = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&ms| ms <= 86_400_000)
                .ok_or_else(|| format!("bad {PLAYOUT_IN} header"))?;
            playout_in = Some(std::time::Duration::from_millis(ms));
        }
    }
    Ok((req.path.unwrap_or("").to_string(), playout_in))
}

/// A response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code.
    pub status: u16,
    /// What it answers.
    pub location: String,
    /// Body length.
    pub length: u64,
    /// Stream offset of the body's first byte.
    pub offset: u64,
    /// `Content-Type`.
    pub content_type: String,
}

impl ResponseHead {
    /// The head's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            _ => "Error",
        };
        format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nContent-Location: {}\r\nX-Stream-Offset: {}\r\n\r\n",
            self.status, self.content_type, self.length, self.location, self.offset
        )
        .into_bytes()
    }

    /// Parse a complete head.
    pub fn parse(buf: &[u8]) -> Result<ResponseHead, String> {
        if buf.len() > MAX_HEAD {
            return Err(format!(
                "response head of {} bytes (limit {MAX_HEAD})",
                buf.len()
            ));
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(n)) if n == buf.len() => {}
            Ok(httparse::Status::Complete(_)) => return Err("bytes after the response head".into()),
            Ok(httparse::Status::Partial) => return Err("incomplete response head".into()),
            Err(e) => return Err(format!("bad response: {e}")),
        }
        let field = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .map(str::trim)
        };
        let number = |name: &str| -> Result<u64, String> {
            field(name)
                .ok_or(format!("no {name}"))?
                .parse()
                .map_err(|_| format!("bad {name}"))
        };
        Ok(ResponseHead {
            status: resp.code.ok_or("no status")?,
            location: field("Content-Location")
                .ok_or("no Content-Location")?
                .to_string(),
            length: number("Content-Length")?,
            offset: number("X-Stream-Offset")?,
            content_type: field("Content-Type").unwrap_or("").to_string(),
        })
    }
}

/// A data message: `seq`, the stream offset past its last byte, `body`.
pub fn data_message(seq: u32, end: u64, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(DATA_HEADER + body.len());
    m.extend_from_slice(&data_header(seq, end));
    m.extend_from_slice(body);
    m
}

/// The [`DATA_HEADER`] bytes that open a data message (see
/// [`data_message`]), for a sender that writes the body in place.
#[must_use]
pub fn data_header(seq: u32, end: u64) -> [u8; DATA_HEADER] {
    let mut h = [0u8; DATA_HEADER];
    h[..4].copy_from_slice(&seq.to_be_bytes());
    h[4..].copy_from_slice(&end.to_be_bytes());
    h
}

/// `(seq, end offset, body)` of a data message.
pub fn parse_data(m: &[u8]) -> Result<(u32, u64, &[u8]), String> {
    if m.len() <= DATA_HEADER {
        return Err(format!("data message of {} bytes", m.len()));
    }
    let seq = u32::from_be_bytes(m[..4].try_into().expect("4 bytes"));
    let end = u64::from_be_bytes(m[4..12].try_into().expect("8 bytes"));
    let body = &m[DATA_HEADER..];
    if end < body.len() as u64 {
        return Err(format!(
            "data message ends at {end} but carries {} bytes",
            body.len()
        ));
    }
    Ok((seq, end, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_heads_round_trip() {
        assert_eq!(
            parse_request(&request("/bbb/rep1/3.ts")).unwrap(),
            "/bbb/rep1/3.ts"
        );
        assert!(parse_request(b"POST / HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_request(b"GET / HTTP/1.0\r\n\r\n").is_err());
        assert!(parse_request(b"GET / HTTP/1.1\r\nHost: x\r\n").is_err());
        assert!(parse_request(b"\x00\x01garbage").is_err());
        let ms = std::time::Duration::from_millis;
        assert_eq!(
            parse_request_head(&request_playing_in("/chunk/3", Some(ms(1000)))).unwrap(),
            ("/chunk/3".to_string(), Some(ms(1000)))
        );
        assert_eq!(
            parse_request_head(&request_playing_in("/chunk/3", None)).unwrap(),
            ("/chunk/3".to_string(), None)
        );
        for bad in ["-5", "soon", "99999999999"] {
            let r = format!("GET / HTTP/1.1\r\nX-Playout-In: {bad}\r\n\r\n");
            assert!(parse_request_head(r.as_bytes()).is_err(), "{bad}");
        }
        let h = ResponseHead {
            status: 200,
            location: "/bbb/rep2/0.ts".into(),
            length: 123_456,
            offset: 99,
            content_type: "video/mp2t".into(),
        };
        assert_eq!(ResponseHead::parse(&h.encode()).unwrap(), h);
        assert!(ResponseHead::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n").is_err());
    }

    #[test]
    fn data_messages_round_trip_and_bad_ones_are_refused() {
        let m = data_message(7, 5000, &[1, 2, 3]);
        assert_eq!(m.len(), DATA_HEADER + 3);
        assert_eq!(parse_data(&m).unwrap(), (7, 5000, &[1u8, 2, 3][..]));
        assert!(parse_data(&m[..DATA_HEADER]).is_err());
        assert!(parse_data(&data_message(1, 2, &[0; 3])).is_err());
    }
}
