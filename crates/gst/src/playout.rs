//! Playout from the sender's clock, as SRT's TSBPD: the sink writes its
//! clock when it took the buffer into the message, the source maps that
//! clock onto its own (the sender time plus the path's base delay) and
//! lets each buffer leave `latency` after that, stamped with that time,
//! however long it waited behind a repair. The downstream sees the stream
//! at a constant delay: a buffer is on time when it arrived within the
//! latency of the fastest ones.
//!
//! The header (direct connections; a relay's media header carries the
//! publisher's clock as `origin_us`), 12 bytes before the buffer:
//!
//! ```text
//! 0..4   magic "HWts" (0x48 0x57 0x74 0x73)
//! 4..12  the sender time, µs, unsigned 64-bit big-endian: the sender's
//!        monotonic clock when the sink's `render` took the buffer. Any
//!        epoch: the receiver uses differences only
//! 12..   the buffer, unchanged
//! ```
//!
//! The mapping ([`Clock`]): the offset between the clocks is the least
//! `arrival - sent` seen (the base delay; no message arrives faster), over
//! two windows of [`WINDOW`], so that it follows a drift between the two
//! clocks (100 ppm is 1 ms in 10 s) and a lasting change of the path's
//! delay, upwards within two windows, downwards at once.

use std::time::Duration;

/// The header's magic.
pub const MAGIC: [u8; 4] = *b"HWts";
/// The header's length.
pub const HEADER: usize = 12;
/// How long one minimum of the clocks' offset is kept (two are).
pub const WINDOW: Duration = Duration::from_secs(10);

/// `buffer` with the header for sender time `sent_us` in front.
pub fn encode(sent_us: i64, buffer: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + buffer.len());
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&(sent_us.max(0) as u64).to_be_bytes());
    b.extend_from_slice(buffer);
    b
}

/// The sender time of a message with the header, and where its buffer
/// starts; `None` for a message without it.
pub fn decode(message: &[u8]) -> Option<(i64, usize)> {
    if message.len() < HEADER || message[..4] != MAGIC {
        return None;
    }
    let mut t = [0; 8];
    t.copy_from_slice(&message[4..HEADER]);
    Some((u64::from_be_bytes(t).min(i64::MAX as u64) as i64, HEADER))
}

/// The sender's clock on this one (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// The least `arrival - sent` of the current window, and the window's
    /// start (local µs).
    current: Option<(i64, i64)>,
    /// The least of the window before.
    previous: Option<i64>,
}

impl Clock {
    /// A message sent at `sent_us` (the sender's clock) arrived at
    /// `arrival_us` (this one's).
    pub fn saw(&mut self, sent_us: i64, arrival_us: i64) {
        let d = arrival_us.saturating_sub(sent_us);
        let window = WINDOW.as_micros() as i64;
        match &mut self.current {
            Some((least, start)) if arrival_us - *start < window => *least = (*least).min(d),
            Some((least, _)) => {
                self.previous = Some(*least);
                self.current = Some((d, arrival_us));
            }
            None => self.current = Some((d, arrival_us)),
        }
    }

    /// The offset: sender time + offset = this clock's time of the fastest
    /// arrival. `None` before the first message.
    pub fn offset(&self) -> Option<i64> {
        let c = self.current.map(|(l, _)| l);
        match (c, self.previous) {
            (Some(c), Some(p)) => Some(c.min(p)),
            (c, p) => c.or(p),
        }
    }

    /// Sender time `sent_us` on this clock.
    pub fn local(&self, sent_us: i64) -> Option<i64> {
        self.offset().map(|o| sent_us.saturating_add(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_round_trips_and_is_recognised() {
        let m = encode(1_234_567, b"\x47abc");
        assert_eq!(m.len(), HEADER + 4);
        assert_eq!(&m[..4], b"HWts");
        assert_eq!(decode(&m), Some((1_234_567, HEADER)));
        assert_eq!(&m[HEADER..], b"\x47abc");
        // A bare TS packet or RTP packet is not a header.
        assert_eq!(decode(&[0x47; 188]), None);
        assert_eq!(decode(&[0x80; 12]), None);
        assert_eq!(decode(b"HWts"), None);
    }

    #[test]
    fn the_offset_is_the_base_delay_and_follows_drift() {
        let mut c = Clock::default();
        assert_eq!(c.local(5), None);
        // Sender clock 1 s behind, 50 ms base delay, a repair adds 200 ms.
        c.saw(0, 1_050_000);
        c.saw(10_000, 1_260_000);
        c.saw(20_000, 1_070_000);
        assert_eq!(c.offset(), Some(1_050_000));
        // The repaired one is stamped as if it came on the fastest path.
        assert_eq!(c.local(10_000), Some(1_060_000));
        // The base delay grows by 1 ms (drift): after two windows the
        // offset has followed, not before.
        let w = WINDOW.as_micros() as i64;
        for i in 1..=25 {
            let sent = i * w / 10;
            c.saw(sent, sent + 1_051_000);
        }
        assert_eq!(c.offset(), Some(1_051_000));
        // A shorter delay is taken at once.
        c.saw(3 * w, 3 * w + 1_040_000);
        assert_eq!(c.offset(), Some(1_040_000));
    }
}
