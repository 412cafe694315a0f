//! The relay protocol's messages, byte for byte (docs/PROTOCOL.md,
//! "Relay protocol").
//!
//! Each is one Hollywood message; its first byte says which. Control
//! messages (hello, accept, refuse, ping, pong, end) travel on sub-stream
//! [`CONTROL_SUBSTREAM`], ordered and reliable; media on
//! [`MEDIA_SUBSTREAM`], unordered, each with its lifetime. Integers are
//! big-endian. Times are microseconds on **the relay's clock** in both
//! directions: a caller converts (it bounds the offset from the hello
//! and its pings and converts a deadline to the earliest time it can be,
//! [`super::clock`]), so a relay never does, and a chain of relays carries
//! one end-to-end deadline, each hop converting once and never moving it
//! later.

/// The protocol version a hello carries.
pub const VERSION: u8 = 1;
/// Sub-stream of control messages.
pub const CONTROL_SUBSTREAM: u16 = 0;
/// Sub-stream of media messages.
pub const MEDIA_SUBSTREAM: u16 = 1;
/// The longest stream id (as SRT's `SRTO_STREAMID`).
pub const MAX_STREAM_ID: usize = 512;
/// The longest refusal reason.
pub const MAX_REASON: usize = 1024;
/// Bytes of a media message's header.
pub const MEDIA_HEADER: usize = 1 + 1 + 1 + 8 + 8 + 8;

/// A media message starts a group: a subscriber can begin decoding here
/// (a keyframe; in MPEG-TS, a random access point).
pub const FLAG_GROUP_START: u8 = 0x01;
/// A media message carries data the rest of its group needs (keyframe data).
pub const FLAG_KEY: u8 = 0x02;

const T_HELLO: u8 = 0x01;
const T_ACCEPT: u8 = 0x02;
const T_REFUSE: u8 = 0x03;
const T_PING: u8 = 0x04;
const T_PONG: u8 = 0x05;
const T_END: u8 = 0x06;
const T_MEDIA: u8 = 0x10;

/// What a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Send a stream to the relay.
    Publish,
    /// Receive a stream from the relay.
    Play,
}

/// A media message's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaHeader {
    /// [`FLAG_GROUP_START`], [`FLAG_KEY`].
    pub flags: u8,
    /// Lower is more urgent (0: keyframe data, 1: audio, 2: other video,
    /// 3: anything else; `super::ts::classify`).
    pub priority: u8,
    /// The publisher's sequence number, consecutive from 0 (the relay
    /// keeps it, so a player can put messages back in order).
    pub seq: u64,
    /// When the publisher sent it, relay clock (µs).
    pub origin_us: i64,
    /// When it stops being useful, relay clock (µs): the end-to-end
    /// deadline every hop spends from.
    pub deadline_us: i64,
}

/// One relay-protocol message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Caller → relay, first: who and what.
    Hello {
        /// The protocol version.
        version: u8,
        /// Publish or play.
        role: Role,
        /// The caller's latency: a player's own deadline after a
        /// message's origin (0: only the end-to-end deadline).
        latency_us: u32,
        /// The caller's clock when it sent this (µs).
        t1_us: i64,
        /// The stream id (`super::access`).
        stream_id: String,
    },
    /// Relay → caller: accepted.
    Accept {
        /// The hello's `t1_us`, echoed.
        t1_us: i64,
        /// The relay's clock when it received the hello.
        t2_us: i64,
    },
    /// Relay → caller: refused, then the relay closes.
    Refuse {
        /// HTTP-style code (`super::access::Refusal`).
        code: u16,
        /// Why, for the caller to print.
        reason: String,
    },
    /// Caller → relay: a clock sample, please.
    Ping {
        /// The caller's clock when sent.
        t1_us: i64,
    },
    /// Relay → caller.
    Pong {
        /// The ping's `t1_us`.
        t1_us: i64,
        /// The relay's clock when the ping arrived.
        t2_us: i64,
    },
    /// The stream ended (publisher → relay, relay → players).
    End,
    /// A piece of the stream.
    Media {
        /// Its metadata.
        header: MediaHeader,
        /// The publisher's bytes.
        payload: Vec<u8>,
    },
}

/// Why bytes are not a relay message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("relay protocol: {0}")]
pub struct DecodeError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, DecodeError> {
    Err(DecodeError(s.into()))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return err(format!(
                "truncated: {} bytes left, {n} needed",
                self.0.len()
            ));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().unwrap_or([0; 2]),
        ))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().unwrap_or([0; 4]),
        ))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().unwrap_or([0; 8]),
        ))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.u64()? as i64)
    }
    fn string(&mut self, max: usize, what: &str) -> Result<String, DecodeError> {
        let n = usize::from(self.u16()?);
        if n > max {
            return err(format!("{what} of {n} bytes (at most {max})"));
        }
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| DecodeError(format!("{what} is not UTF-8")))
    }
    fn end(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            err(format!("{} bytes after the message", self.0.len()))
        }
    }
}

fn put_string(out: &mut Vec<u8>, s: &str, max: usize) {
    // Longer strings are cut at a character boundary, never sent whole.
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..n]);
}

impl Msg {
    /// The bytes of the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        match self {
            Msg::Hello {
                version,
                role,
                latency_us,
                t1_us,
                stream_id,
            } => {
                o.push(T_HELLO);
                o.push(*version);
                o.push(match role {
                    Role::Publish => 1,
                    Role::Play => 2,
                });
                o.extend_from_slice(&latency_us.to_be_bytes());
                o.extend_from_slice(&t1_us.to_be_bytes());
                put_string(&mut o, stream_id, MAX_STREAM_ID);
            }
            Msg::Accept { t1_us, t2_us } => {
                o.push(T_ACCEPT);
                o.extend_from_slice(&t1_us.to_be_bytes());
                o.extend_from_slice(&t2_us.to_be_bytes());
            }
            Msg::Refuse { code, reason } => {
                o.push(T_REFUSE);
                o.extend_from_slice(&code.to_be_bytes());
                put_string(&mut o, reason, MAX_REASON);
            }
            Msg::Ping { t1_us } => {
                o.push(T_PING);
                o.extend_from_slice(&t1_us.to_be_bytes());
            }
            Msg::Pong { t1_us, t2_us } => {
                o.push(T_PONG);
                o.extend_from_slice(&t1_us.to_be_bytes());
                o.extend_from_slice(&t2_us.to_be_bytes());
            }
            Msg::End => o.push(T_END),
            Msg::Media { header, payload } => {
                o.reserve(MEDIA_HEADER + payload.len());
                encode_media_header(header, &mut o);
                o.extend_from_slice(payload);
            }
        }
        o
    }

    /// Parse one message.
    pub fn decode(b: &[u8]) -> Result<Msg, DecodeError> {
        let mut r = Reader(b);
        let m = match r.u8()? {
            T_HELLO => {
                let version = r.u8()?;
                let role = match r.u8()? {
                    1 => Role::Publish,
                    2 => Role::Play,
                    x => return err(format!("hello with role {x}")),
                };
                let latency_us = r.u32()?;
                let t1_us = r.i64()?;
                let stream_id = r.string(MAX_STREAM_ID, "stream id")?;
                Msg::Hello {
                    version,
                    role,
                    latency_us,
                    t1_us,
                    stream_id,
                }
            }
            T_ACCEPT => Msg::Accept {
                t1_us: r.i64()?,
                t2_us: r.i64()?,
            },
            T_REFUSE => Msg::Refuse {
                code: r.u16()?,
                reason: r.string(MAX_REASON, "reason")?,
            },
            T_PING => Msg::Ping { t1_us: r.i64()? },
            T_PONG => Msg::Pong {
                t1_us: r.i64()?,
                t2_us: r.i64()?,
            },
            T_END => Msg::End,
            T_MEDIA => {
                let header = MediaHeader {
                    flags: r.u8()?,
                    priority: r.u8()?,
                    seq: r.u64()?,
                    origin_us: r.i64()?,
                    deadline_us: r.i64()?,
                };
                let payload = r.0.to_vec();
                if payload.is_empty() {
                    return err("media message with no payload");
                }
                return Ok(Msg::Media { header, payload });
            }
            t => return err(format!("unknown message type {t:#04x}")),
        };
        r.end()?;
        Ok(m)
    }
}

/// Append a media header to `out` (the payload follows it): one copy of
/// the payload per subscriber is then `out.extend_from_slice(payload)`.
pub fn encode_media_header(h: &MediaHeader, out: &mut Vec<u8>) {
    out.push(T_MEDIA);
    out.push(h.flags);
    out.push(h.priority);
    out.extend_from_slice(&h.seq.to_be_bytes());
    out.extend_from_slice(&h.origin_us.to_be_bytes());
    out.extend_from_slice(&h.deadline_us.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all() -> Vec<Msg> {
        vec![
            Msg::Hello {
                version: VERSION,
                role: Role::Play,
                latency_us: 200_000,
                t1_us: -5,
                stream_id: "#!::r=live/cam1,m=request".into(),
            },
            Msg::Accept { t1_us: 1, t2_us: 2 },
            Msg::Refuse {
                code: 401,
                reason: "token".into(),
            },
            Msg::Ping { t1_us: 9 },
            Msg::Pong {
                t1_us: 9,
                t2_us: 11,
            },
            Msg::End,
            Msg::Media {
                header: MediaHeader {
                    flags: FLAG_GROUP_START | FLAG_KEY,
                    priority: 0,
                    seq: 7,
                    origin_us: 100,
                    deadline_us: 200_100,
                },
                payload: vec![0x47; 1316],
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in all() {
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn media_header_is_its_stated_size() {
        let m = Msg::Media {
            header: MediaHeader {
                flags: 0,
                priority: 2,
                seq: 1,
                origin_us: 0,
                deadline_us: 0,
            },
            payload: vec![1],
        };
        assert_eq!(m.encode().len(), MEDIA_HEADER + 1);
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        assert!(Msg::decode(&[]).is_err());
        assert!(Msg::decode(&[0x7f]).unwrap_err().0.contains("unknown"));
        let mut b = Msg::Ping { t1_us: 1 }.encode();
        b.push(0);
        assert!(Msg::decode(&b).unwrap_err().0.contains("after"));
        let mut h = Msg::Media {
            header: MediaHeader {
                flags: 0,
                priority: 0,
                seq: 0,
                origin_us: 0,
                deadline_us: 0,
            },
            payload: vec![1],
        }
        .encode();
        h.pop();
        assert!(Msg::decode(&h).unwrap_err().0.contains("no payload"));
    }

    #[test]
    fn a_long_stream_id_is_cut_at_a_character() {
        let id = "é".repeat(400); // 800 bytes
        let b = Msg::Hello {
            version: 1,
            role: Role::Publish,
            latency_us: 0,
            t1_us: 0,
            stream_id: id,
        }
        .encode();
        match Msg::decode(&b).unwrap() {
            Msg::Hello { stream_id, .. } => assert_eq!(stream_id.len(), 512),
            m => panic!("{m:?}"),
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Msg::decode(&b);
        }

        #[test]
        fn media_round_trips(flags: u8, priority: u8, seq: u64, o: i64, d: i64,
                             payload in proptest::collection::vec(any::<u8>(), 1..200)) {
            let m = Msg::Media { header: MediaHeader { flags, priority, seq, origin_us: o, deadline_us: d }, payload };
            prop_assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }
}
