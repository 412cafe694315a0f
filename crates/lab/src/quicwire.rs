//! QUIC STREAM frames read back from a capture, decrypted by tshark with
//! the connection's TLS secrets (an SSLKEYLOGFILE, e.g. from
//! `hollywood sim messages --pcap P --keylog K`), and what they say about
//! retransmissions: the wire's own account, independent of the sender's
//! counters (issue 10: "count from the pcap, not from counters").
//!
//! A STREAM frame is a retransmission when it carries stream bytes the
//! same sender already put on the wire (QUIC retransmits data in new
//! packets with new packet numbers; only the stream offsets repeat). With
//! a stream per message (`quic-pps`, `quicsilver`) the record at offset 0
//! names the message (`hollywood_transport::record`), so each
//! retransmission is attributed to its message.

use hollywood_transport::record;
use serde_json::Value;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Errors (tshark missing or failing, unexpected output).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// One STREAM frame on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFrame {
    /// Capture frame number.
    pub frame: u64,
    /// Capture timestamp (for the simulator's pcap: virtual time).
    pub time: Duration,
    /// Sender's address.
    pub src: IpAddr,
    /// Stream id.
    pub stream_id: u64,
    /// Offset of the first byte.
    pub offset: u64,
    /// Bytes of stream data.
    pub len: u64,
    /// The first bytes of the data (up to 32).
    pub head: Vec<u8>,
}

/// Every STREAM frame of a capture, in capture order, decrypted with the
/// secrets in `keylog`. Needs tshark (Wireshark ≥ 3.4 decrypts QUIC).
pub fn stream_frames(pcap: &Path, keylog: &Path) -> Result<Vec<StreamFrame>, Error> {
    let out = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(pcap)
        .arg("-o")
        .arg(format!("tls.keylog_file:{}", keylog.display()))
        .args(["-Y", "quic", "-T", "json", "--no-duplicate-keys"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run tshark: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tshark -r {}: {}",
            pcap.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let packets: Value = serde_json::from_slice(&out.stdout)?;
    let mut frames = Vec::new();
    for p in packets.as_array().ok_or("tshark: no packet list")? {
        let layers = &p["_source"]["layers"];
        let number = str_u64(&layers["frame"]["frame.number"]).ok_or("frame number")?;
        let time = layers["frame"]["frame.time_epoch"]
            .as_str()
            .and_then(|t| t.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
            .ok_or("frame time")?;
        let src = layers["ip"]["ip.src"]
            .as_str()
            .or_else(|| layers["ipv6"]["ipv6.src"].as_str())
            .and_then(|s| s.parse().ok())
            .ok_or("source address")?;
        // One QUIC packet, or several coalesced in one datagram.
        for quic in one_or_many(&layers["quic"]) {
            for f in one_or_many(&quic["quic.frame"]) {
                let Some(stream_id) = str_u64(&f["quic.stream.stream_id"]) else {
                    continue; // not a STREAM frame
                };
                let data = f["quic.stream_data"]
                    .as_str()
                    .map(hex_bytes)
                    .unwrap_or_default();
                let len = str_u64(&f["quic.stream.length"]).unwrap_or(data.len() as u64);
                frames.push(StreamFrame {
                    frame: number,
                    time,
                    src,
                    stream_id,
                    offset: str_u64(&f["quic.stream.offset"]).unwrap_or(0),
                    len,
                    head: data.into_iter().take(32).collect(),
                });
            }
        }
    }
    Ok(frames)
}

fn one_or_many(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        v => vec![v],
    }
}

fn str_u64(v: &Value) -> Option<u64> {
    v.as_str()?.parse().ok()
}

/// `01:ab:…` to bytes (tshark's byte fields).
fn hex_bytes(s: &str) -> Vec<u8> {
    s.split(':')
        .filter_map(|b| u8::from_str_radix(b, 16).ok())
        .collect()
}

/// A STREAM frame that repeated bytes its sender had sent before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retransmission {
    /// The frame.
    pub frame: StreamFrame,
    /// The message whose stream it belongs to (from the record at offset
    /// 0 of that stream), if known.
    pub message: Option<u32>,
}

/// The retransmissions among `frames` from sender `src`, and the message
/// each stream carries (the record at its offset 0).
pub fn retransmissions(
    frames: &[StreamFrame],
    src: IpAddr,
) -> (Vec<Retransmission>, HashMap<u64, u32>) {
    let mut sent: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    let mut message_of: HashMap<u64, u32> = HashMap::new();
    let mut pending: Vec<StreamFrame> = Vec::new();
    for f in frames.iter().filter(|f| f.src == src) {
        if f.offset == 0 && !message_of.contains_key(&f.stream_id) {
            if let Ok(Some((h, _))) = record::parse_header(&f.head) {
                message_of.insert(f.stream_id, h.id);
            }
        }
        let (a, b) = (f.offset, f.offset + f.len);
        let ranges = sent.entry(f.stream_id).or_default();
        if b > a && ranges.iter().any(|&(s, e)| s < b && a < e) {
            pending.push(f.clone());
        }
        ranges.push((a, b));
    }
    let out = pending
        .into_iter()
        .map(|frame| Retransmission {
            message: message_of.get(&frame.stream_id).copied(),
            frame,
        })
        .collect();
    (out, message_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: u64, stream_id: u64, offset: u64, len: u64, head: Vec<u8>) -> StreamFrame {
        StreamFrame {
            frame: n,
            time: Duration::from_millis(n),
            src: "10.0.0.1".parse().unwrap(),
            stream_id,
            offset,
            len,
            head,
        }
    }

    #[test]
    fn repeated_offsets_are_retransmissions_of_the_stream_message() {
        let mut rec = Vec::new();
        record::encode(&mut rec, 77, 0, None, &[9; 10]);
        let frames = vec![
            frame(1, 2, 0, 8, rec.clone()),
            frame(2, 2, 8, 8, vec![]),
            frame(3, 6, 0, 8, vec![]),
            // Stream 2's second half again, then part of its first.
            frame(4, 2, 8, 8, vec![]),
            frame(5, 2, 4, 2, vec![]),
        ];
        let (r, streams) = retransmissions(&frames, "10.0.0.1".parse().unwrap());
        assert_eq!(streams.get(&2), Some(&77));
        assert_eq!(
            r.iter().map(|x| x.frame.frame).collect::<Vec<_>>(),
            vec![4, 5]
        );
        assert!(r.iter().all(|x| x.message == Some(77)));
        // Another sender's frames are not ours.
        let (r, _) = retransmissions(&frames, "10.0.0.2".parse().unwrap());
        assert!(r.is_empty());
    }

    #[test]
    fn hex_fields() {
        assert_eq!(hex_bytes("01:ab:ff"), vec![1, 0xab, 0xff]);
        assert!(hex_bytes("").is_empty());
    }
}
