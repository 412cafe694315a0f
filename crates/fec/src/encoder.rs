//! The sender side: blocks of protected messages and their repair messages.

use crate::codec;
use crate::policy::{choose_repairs, FecConfig, LossEstimate};
use crate::wire::{Repair, MAX_M, REPAIR_FIXED};
use std::time::Duration;

/// A repair message to send on [`crate::FEC_SUBSTREAM`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairOut {
    /// Index of the symbol in its block (0..m): the caller gives it the
    /// id after the last application message plus one more per message.
    pub index: u8,
    /// The REPAIR payload.
    pub payload: Vec<u8>,
    /// Until the block's last deadline (`None`: no source had one).
    pub lifetime: Option<Duration>,
}

/// What the encoder did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    /// Messages protected (put in a block).
    pub protected: u64,
    /// Their payload bytes.
    pub protected_bytes: u64,
    /// Blocks closed.
    pub blocks: u64,
    /// Blocks closed without repair (the policy chose 0, or no credit).
    pub blocks_unprotected: u64,
    /// Repair messages made.
    pub repairs: u64,
    /// Their payload bytes.
    pub repair_bytes: u64,
}

#[derive(Debug, Clone)]
struct Source {
    id: u32,
    substream: u16,
    payload: Vec<u8>,
    deadline_ns: Option<u64>,
}

/// The sender side of the FEC layer (sans-IO; times in ns since the
/// caller's epoch).
///
/// Call [`Encoder::push`] for each protected message after the transport
/// took it, [`Encoder::handle_timeout`] when [`Encoder::poll_timeout`] is
/// due, and [`Encoder::flush`] at close; each may return repair messages
/// to send at once, in order.
#[derive(Debug, Clone)]
pub struct Encoder {
    cfg: FecConfig,
    block: Vec<Source>,
    close_at: Option<u64>,
    /// Repair bytes the overhead bound still allows.
    credit: f64,
    /// Record header of a repair message (set by the caller, who frames
    /// it: [`Encoder::set_repair_header`]).
    repair_header: usize,
    /// No repair yet ([`FecConfig::repair_before_report`] off, no REPORT
    /// heard: [`Encoder::on_report`]).
    hold: bool,
    stats: EncoderStats,
}

impl Encoder {
    /// An encoder with these settings ([`FecConfig::validate`]d by the caller).
    pub fn new(cfg: FecConfig) -> Encoder {
        Encoder {
            hold: !cfg.repair_before_report,
            cfg,
            block: Vec::new(),
            close_at: None,
            credit: 0.0,
            repair_header: 0,
            stats: EncoderStats::default(),
        }
    }

    /// The receiver's REPORT arrived: blocks may be repaired from now on
    /// (see [`FecConfig::repair_before_report`]).
    pub fn on_report(&mut self) {
        self.hold = false;
    }

    /// The settings.
    pub fn config(&self) -> &FecConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    /// When the open block must close (its repair is due).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.close_at
    }

    /// Would message `id` close the open block before joining it (ids
    /// more than 255 apart, or the block full)? The caller then calls
    /// [`Encoder::flush`] first, so the repair goes before the message.
    pub fn must_close_before(&self, id: u32) -> bool {
        self.block.last().is_some_and(|l| {
            id <= l.id || id - l.id > 255 || self.block.len() >= self.cfg.max_block
        })
    }

    /// The record header a repair message gets from the caller's framing
    /// (bytes beyond its payload), charged with each repair's payload to
    /// the overhead bound. 0 until set.
    pub fn set_repair_header(&mut self, bytes: usize) {
        self.repair_header = bytes;
    }

    /// Spend `bytes` of the overhead credit on something other than a
    /// repair: what the layer adds to a protected message's own framing
    /// (its shifted id needs a longer record header than the
    /// application's id would), so the bound holds on the wire against
    /// the same messages sent without the layer.
    pub fn charge(&mut self, bytes: usize) {
        self.credit -= bytes as f64;
    }

    /// [`Encoder::push_framed`] without a record header.
    pub fn push(
        &mut self,
        now_ns: u64,
        id: u32,
        substream: u16,
        payload: &[u8],
        deadline_ns: Option<u64>,
        one_way: Duration,
    ) -> bool {
        self.push_framed(now_ns, id, substream, payload, 0, deadline_ns, one_way)
    }

    /// Add a message the transport took to the open block. `header`: the
    /// bytes its framing adds to the payload (its record header), credited
    /// to the overhead bound with the payload. `deadline_ns`:
    /// its deadline (`None`: reliable); `one_way`: the current one-way
    /// delay estimate. A message whose repair could not arrive before its
    /// deadline is left out (returns false). Call
    /// [`Encoder::must_close_before`] (and flush) first.
    #[allow(clippy::too_many_arguments)]
    pub fn push_framed(
        &mut self,
        now_ns: u64,
        id: u32,
        substream: u16,
        payload: &[u8],
        header: usize,
        deadline_ns: Option<u64>,
        one_way: Duration,
    ) -> bool {
        let close = match deadline_ns {
            Some(d) => {
                let by = d.saturating_sub(dur_ns(one_way) + dur_ns(self.cfg.slack));
                if by <= now_ns {
                    return false;
                }
                by
            }
            None => now_ns + dur_ns(self.cfg.idle_close),
        };
        debug_assert!(!self.must_close_before(id));
        self.close_at = Some(self.close_at.map_or(close, |c| c.min(close)));
        self.block.push(Source {
            id,
            substream,
            payload: payload.to_vec(),
            deadline_ns,
        });
        self.stats.protected += 1;
        self.stats.protected_bytes += payload.len() as u64;
        let wire = payload.len() + header + self.cfg.message_overhead;
        self.credit += self.cfg.max_overhead * wire as f64;
        true
    }

    /// Close the block if its time has come.
    pub fn handle_timeout(
        &mut self,
        now_ns: u64,
        est: Option<LossEstimate>,
        now_us: u32,
    ) -> Vec<RepairOut> {
        if self.close_at.is_some_and(|c| c <= now_ns) {
            self.flush(now_ns, est, now_us)
        } else {
            Vec::new()
        }
    }

    /// Close the open block now: its repair messages (possibly none).
    /// `now_us`: the sender clock stamped into them for the RTT echo.
    pub fn flush(&mut self, now_ns: u64, est: Option<LossEstimate>, now_us: u32) -> Vec<RepairOut> {
        self.close_at = None;
        let block = std::mem::take(&mut self.block);
        if block.is_empty() {
            return Vec::new();
        }
        self.stats.blocks += 1;
        let k = block.len();
        let size = codec::symbol_size(block.iter().map(|s| s.payload.len()));
        // A repair on the wire: its payload, its record header and the
        // packet headers every message pays.
        let cost =
            (REPAIR_FIXED + k - 1 + size + self.repair_header + self.cfg.message_overhead) as f64;
        let affordable = ((self.credit / cost).floor() as usize).min(MAX_M);
        let m = if self.hold {
            0
        } else {
            choose_repairs(k, est, self.cfg.residual, affordable)
        };
        // The budget is a bound over time, not a savings account: keep
        // at most a few blocks' worth.
        let cap = cost * MAX_M as f64;
        if m == 0 {
            self.credit = self.credit.min(cap);
            self.stats.blocks_unprotected += 1;
            return Vec::new();
        }
        self.credit = (self.credit - cost * m as f64).min(cap);
        let symbols: Vec<Vec<u8>> = block
            .iter()
            .map(|s| codec::source_symbol(s.substream, &s.payload, size))
            .collect();
        let Ok(repairs) = codec::encode(&symbols, m) else {
            // Cannot happen for symbols built above (even, equal sizes).
            self.stats.blocks_unprotected += 1;
            return Vec::new();
        };
        let lifetime = block
            .iter()
            .map(|s| s.deadline_ns)
            .collect::<Option<Vec<u64>>>()
            .and_then(|d| d.into_iter().max())
            .map(|d| Duration::from_nanos(d.saturating_sub(now_ns)));
        let sources: Vec<u32> = block.iter().map(|s| s.id).collect();
        let mut out = Vec::with_capacity(m);
        for (i, sym) in repairs.iter().enumerate() {
            let r = Repair {
                k: k as u8,
                m: m as u8,
                index: i as u8,
                sources: sources.clone(),
                sent_us: now_us,
                symbol: sym,
            };
            let mut payload = Vec::with_capacity(r.buffer_len());
            r.emit(&mut payload);
            self.stats.repairs += 1;
            self.stats.repair_bytes += payload.len() as u64;
            out.push(RepairOut {
                index: i as u8,
                payload,
                lifetime,
            });
        }
        out
    }
}

fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn cfg() -> FecConfig {
        FecConfig {
            max_overhead: 0.25,
            slack: Duration::from_millis(10),
            ..FecConfig::default()
        }
    }

    #[test]
    fn block_closes_when_the_first_repair_is_due() {
        let mut e = Encoder::new(cfg());
        let ow = Duration::from_millis(150);
        // Deadline 200 ms after generation: repair must leave by 40 ms.
        assert!(e.push(0, 0, 0, &[1; 100], Some(200 * MS), ow));
        assert_eq!(e.poll_timeout(), Some(40 * MS));
        for i in 1..8u32 {
            assert!(e.push(
                u64::from(i) * 5 * MS,
                i,
                0,
                &[i as u8; 100],
                Some((200 + 5 * u64::from(i)) * MS),
                ow
            ));
        }
        assert!(e.handle_timeout(39 * MS, None, 0).is_empty());
        // 8 × 100 B × 25 % = 200 B of credit: one repair of 12 + 7 + 106 B.
        let out = e.handle_timeout(40 * MS, None, 7);
        assert_eq!(out.len(), 1);
        let r = Repair::parse(&out[0].payload).unwrap();
        assert_eq!((r.k, r.m, r.index, r.sent_us), (8, 1, 0, 7));
        assert_eq!(r.sources, (0..8).collect::<Vec<_>>());
        // Until the last source's deadline (235 ms).
        assert_eq!(out[0].lifetime, Some(Duration::from_millis(195)));
        assert_eq!(e.poll_timeout(), None);
        let s = e.stats();
        assert_eq!((s.protected, s.blocks, s.repairs), (8, 1, 1));
        assert!(s.repair_bytes as f64 <= 0.25 * s.protected_bytes as f64);
    }

    #[test]
    fn without_repair_before_report_blocks_wait_for_the_first_report() {
        let mut e = Encoder::new(FecConfig {
            repair_before_report: false,
            ..cfg()
        });
        let ow = Duration::from_millis(150);
        let block = |e: &mut Encoder, at: u64| {
            for i in 0..8u32 {
                let t = at + u64::from(i) * 5 * MS;
                assert!(e.push(t, i, 0, &[1; 100], Some(t + 200 * MS), ow));
            }
            e.flush(at + 40 * MS, None, 0)
        };
        assert!(block(&mut e, 0).is_empty(), "no REPORT yet: no repair");
        assert_eq!(e.stats().blocks_unprotected, 1);
        e.on_report();
        // Then as the credit allows (the first block's included: capped).
        assert!(!block(&mut e, 100 * MS).is_empty());
    }

    #[test]
    fn too_late_for_repair_is_left_out() {
        let mut e = Encoder::new(cfg());
        assert!(!e.push(
            0,
            0,
            0,
            &[1; 10],
            Some(100 * MS),
            Duration::from_millis(150)
        ));
        assert_eq!(e.poll_timeout(), None);
        assert_eq!(e.stats().protected, 0);
    }

    #[test]
    fn ids_far_apart_or_a_full_block_close_it_first() {
        let mut e = Encoder::new(FecConfig {
            max_block: 2,
            ..cfg()
        });
        let ow = Duration::ZERO;
        assert!(!e.must_close_before(0));
        e.push(0, 0, 0, &[1], None, ow);
        assert!(e.must_close_before(256));
        assert!(e.must_close_before(0));
        assert!(!e.must_close_before(255));
        e.push(0, 1, 0, &[1], None, ow);
        assert!(e.must_close_before(2));
        // A loss estimate of 0: no repair, the block goes unprotected.
        let none = e.flush(0, Some(LossEstimate { p: 0.0, burst: 1.0 }), 0);
        assert!(none.is_empty());
        assert_eq!(e.stats().blocks_unprotected, 1);
    }

    #[test]
    fn overhead_stays_bounded() {
        let mut e = Encoder::new(cfg());
        let ow = Duration::from_millis(50);
        let est = Some(LossEstimate { p: 0.2, burst: 3.0 });
        let mut id = 0;
        for b in 0..100u64 {
            for i in 0..6u64 {
                let t = (b * 30 + i * 5) * MS;
                e.push(t, id, 0, &vec![0; 1316], Some(t + 100 * MS), ow);
                id += 1;
            }
            let _ = e.flush((b * 30 + 30) * MS, est, 0);
        }
        let s = e.stats();
        assert!(s.repair_bytes as f64 <= 0.25 * s.protected_bytes as f64);
        assert!(s.repairs > 0);
    }

    #[test]
    fn headers_are_charged_so_wire_overhead_stays_bounded() {
        // UDP-like: 28 B of packet headers per message, a 5-byte record
        // header on a source and 9 on a repair.
        let (packet, src_hdr, rep_hdr) = (28usize, 5usize, 9usize);
        let mut e = Encoder::new(FecConfig {
            message_overhead: packet,
            ..cfg()
        });
        e.set_repair_header(rep_hdr);
        let ow = Duration::from_millis(50);
        let est = Some(LossEstimate { p: 0.2, burst: 3.0 });
        let mut id = 0;
        for b in 0..100u64 {
            for i in 0..8u64 {
                let t = (b * 40 + i * 5) * MS;
                let len = 200 + 100 * (i as usize % 3);
                e.push_framed(t, id, 0, &vec![0; len], src_hdr, Some(t + 100 * MS), ow);
                id += 1;
            }
            let _ = e.flush((b * 40 + 40) * MS, est, 0);
        }
        let s = e.stats();
        assert!(s.repairs > 0);
        let src_wire = s.protected_bytes + s.protected * (src_hdr + packet) as u64;
        let rep_wire = s.repair_bytes + s.repairs * (rep_hdr + packet) as u64;
        assert!(
            rep_wire as f64 <= 0.25 * src_wire as f64,
            "repair {rep_wire} B on the wire for {src_wire} B of sources"
        );
    }
}
