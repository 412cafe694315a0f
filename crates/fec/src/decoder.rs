//! The receiver side: rebuild missing messages, deliver each message once,
//! measure loss for the REPORTs.

use crate::codec;
use crate::wire::{Repair, Report, NO_ECHO};
use std::collections::{BTreeMap, BTreeSet};

/// A message rebuilt from its block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// Application id.
    pub id: u32,
    /// Sub-stream.
    pub substream: u16,
    /// Payload.
    pub payload: Vec<u8>,
}

/// What the decoder did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// REPAIR messages taken.
    pub repairs: u64,
    /// Messages rebuilt and delivered.
    pub rebuilt: u64,
    /// Blocks decoded (at least one message rebuilt).
    pub blocks_decoded: u64,
    /// Messages that arrived after they had been rebuilt (dropped).
    pub late_originals: u64,
    /// REPAIRs refused: inconsistent with their block, too old, or a
    /// block that decodes to something that is not a message.
    pub refused: u64,
}

#[derive(Debug, Clone)]
struct Block {
    sources: Vec<u32>,
    m: u8,
    size: usize,
    repairs: Vec<(usize, Vec<u8>)>,
    done: bool,
}

/// Source payloads kept for rebuilding: ids this far behind the highest.
const KEEP_PAYLOADS: u32 = 2048;
/// Delivered ids remembered (for late originals): this far behind.
const KEEP_IDS: u32 = 1 << 16;
/// A message is judged (arrived or lost) once this many later ids arrived.
pub const JUDGE_AFTER: u32 = 16;
/// Bytes of repair symbols kept at most (peer input bounds memory).
const MAX_REPAIR_BYTES: usize = 16 << 20;

/// The receiver side of the FEC layer (sans-IO; times in ns).
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    payloads: BTreeMap<u32, (u16, Vec<u8>)>,
    delivered: BTreeSet<u32>,
    arrived: BTreeSet<u32>,
    blocks: BTreeMap<u32, Block>,
    member: BTreeMap<u32, u32>,
    repair_bytes: usize,
    highest: Option<u32>,
    pruned_at: u32,
    next_judge: Option<u32>,
    last_lost: bool,
    judged: u32,
    lost: u32,
    bursts: u32,
    echo: Option<(u32, u64)>,
    stats: DecoderStats,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Counters.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Any message arrived (a REPORT has something to say).
    pub fn has_arrivals(&self) -> bool {
        self.highest.is_some()
    }

    /// An application message arrived from the transport. Returns whether
    /// to deliver it (false: it was rebuilt before) and any messages its
    /// arrival lets a block rebuild.
    pub fn on_source(&mut self, id: u32, substream: u16, payload: &[u8]) -> (bool, Vec<Rebuilt>) {
        self.arrived.insert(id);
        if self.highest.is_none_or(|h| id > h) {
            self.highest = Some(id);
        }
        self.next_judge.get_or_insert(id);
        self.judge();
        if !self.delivered.insert(id) {
            self.stats.late_originals += 1;
            return (false, Vec::new());
        }
        self.payloads.insert(id, (substream, payload.to_vec()));
        let rebuilt = match self.member.get(&id) {
            Some(&first) => self.try_decode(first),
            None => Vec::new(),
        };
        self.prune();
        (true, rebuilt)
    }

    /// A REPAIR arrived at `now_ns`: the messages it lets its block rebuild.
    pub fn on_repair(&mut self, now_ns: u64, r: &Repair<'_>) -> Vec<Rebuilt> {
        self.stats.repairs += 1;
        self.echo = Some((r.sent_us, now_ns));
        let first = r.sources[0];
        let old = self
            .highest
            .is_some_and(|h| first < h.saturating_sub(KEEP_PAYLOADS));
        if old {
            self.stats.refused += 1;
            return Vec::new();
        }
        let block = self.blocks.entry(first).or_insert_with(|| Block {
            sources: r.sources.clone(),
            m: r.m,
            size: r.symbol.len(),
            repairs: Vec::new(),
            done: false,
        });
        if block.sources != r.sources || block.m != r.m || block.size != r.symbol.len() {
            self.stats.refused += 1;
            return Vec::new();
        }
        if block.done || block.repairs.iter().any(|x| x.0 == r.index as usize) {
            return Vec::new();
        }
        block.repairs.push((r.index as usize, r.symbol.to_vec()));
        self.repair_bytes += r.symbol.len();
        for &s in &r.sources {
            self.member.insert(s, first);
        }
        let out = self.try_decode(first);
        while self.repair_bytes > MAX_REPAIR_BYTES {
            let Some((_, b)) = self.blocks.pop_first() else {
                break;
            };
            self.drop_block(&b);
        }
        out
    }

    /// The REPORT to send now.
    pub fn report(&self, now_ns: u64) -> Report {
        let (echo_us, hold_us) = match self.echo {
            Some((s, at)) => (
                s,
                u32::try_from(now_ns.saturating_sub(at) / 1000).unwrap_or(NO_ECHO - 1),
            ),
            None => (0, NO_ECHO),
        };
        Report {
            judged: self.judged,
            lost: self.lost,
            bursts: self.bursts,
            echo_us,
            hold_us,
        }
    }

    fn drop_block(&mut self, b: &Block) {
        self.repair_bytes -= b.repairs.iter().map(|r| r.1.len()).sum::<usize>();
        for s in &b.sources {
            if self.member.get(s) == Some(&b.sources[0]) {
                self.member.remove(s);
            }
        }
    }

    /// Judge every id `JUDGE_AFTER` behind the highest: arrived, or lost.
    fn judge(&mut self) {
        let (Some(h), Some(mut j)) = (self.highest, self.next_judge) else {
            return;
        };
        while j.saturating_add(JUDGE_AFTER) <= h {
            let lost = !self.arrived.contains(&j);
            self.judged = self.judged.wrapping_add(1);
            if lost {
                self.lost = self.lost.wrapping_add(1);
                if !self.last_lost {
                    self.bursts = self.bursts.wrapping_add(1);
                }
            }
            self.last_lost = lost;
            j += 1;
        }
        self.next_judge = Some(j);
    }

    fn try_decode(&mut self, first: u32) -> Vec<Rebuilt> {
        let Some(b) = self.blocks.get(&first) else {
            return Vec::new();
        };
        if b.done || b.repairs.is_empty() {
            return Vec::new();
        }
        let k = b.sources.len();
        let have: Vec<usize> = (0..k)
            .filter(|&i| self.payloads.contains_key(&b.sources[i]))
            .collect();
        if have.len() == k {
            self.finish(first);
            return Vec::new();
        }
        if have.len() + b.repairs.len() < k {
            return Vec::new();
        }
        let mut symbols = Vec::with_capacity(have.len());
        for &i in &have {
            let (sub, p) = &self.payloads[&b.sources[i]];
            if p.len() + codec::SYMBOL_PREFIX > b.size {
                // The block's symbols are smaller than a message in it: not
                // a block this sender made.
                self.stats.refused += 1;
                self.finish(first);
                return Vec::new();
            }
            symbols.push((i, codec::source_symbol(*sub, p, b.size)));
        }
        let srcs: Vec<(usize, &[u8])> = symbols.iter().map(|(i, s)| (*i, &s[..])).collect();
        let reps: Vec<(usize, &[u8])> = b.repairs.iter().map(|(i, s)| (*i, &s[..])).collect();
        let decoded = codec::decode(k, b.m as usize, &srcs, &reps);
        let ids = b.sources.clone();
        self.finish(first);
        let Ok(decoded) = decoded else {
            self.stats.refused += 1;
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, sym) in decoded {
            let Some(&id) = ids.get(i) else { continue };
            let Ok((substream, payload)) = codec::parse_source(&sym) else {
                self.stats.refused += 1;
                continue;
            };
            if self.delivered.insert(id) {
                self.payloads.insert(id, (substream, payload.to_vec()));
                out.push(Rebuilt {
                    id,
                    substream,
                    payload: payload.to_vec(),
                });
            }
        }
        if !out.is_empty() {
            self.stats.blocks_decoded += 1;
            self.stats.rebuilt += out.len() as u64;
        }
        out
    }

    fn finish(&mut self, first: u32) {
        if let Some(b) = self.blocks.get_mut(&first) {
            b.done = true;
            let bytes: usize = b.repairs.iter().map(|r| r.1.len()).sum();
            b.repairs = Vec::new();
            self.repair_bytes -= bytes;
        }
    }

    /// Forget what is too far behind the highest id.
    fn prune(&mut self) {
        let Some(h) = self.highest else { return };
        if h.wrapping_sub(self.pruned_at) < 64 {
            return;
        }
        self.pruned_at = h;
        let keep_from = h.saturating_sub(KEEP_PAYLOADS);
        self.payloads = self.payloads.split_off(&keep_from);
        let old: Vec<u32> = self.blocks.range(..keep_from).map(|(f, _)| *f).collect();
        for f in old {
            if let Some(b) = self.blocks.remove(&f) {
                self.drop_block(&b);
            }
        }
        self.member = self.member.split_off(&keep_from);
        let ids_from = h.saturating_sub(KEEP_IDS);
        self.delivered = self.delivered.split_off(&ids_from);
        let judged_from = self.next_judge.unwrap_or(0).min(ids_from);
        self.arrived = self.arrived.split_off(&judged_from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FecConfig;
    use crate::{wire, Encoder};
    use std::time::Duration;

    fn block(k: u32, m_overhead: f64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut e = Encoder::new(FecConfig {
            max_overhead: m_overhead,
            ..FecConfig::default()
        });
        let payloads: Vec<Vec<u8>> = (0..k).map(|i| vec![i as u8; 50 + i as usize]).collect();
        for (i, p) in payloads.iter().enumerate() {
            e.push(0, 100 + i as u32, 3, p, None, Duration::ZERO);
        }
        let reps = e
            .flush(0, None, 42)
            .into_iter()
            .map(|r| r.payload)
            .collect();
        (payloads, reps)
    }

    #[test]
    fn rebuilds_a_lost_message_when_the_repair_arrives() {
        let (p, reps) = block(4, 0.5);
        assert!(!reps.is_empty());
        let mut d = Decoder::new();
        for i in [0u32, 1, 3] {
            assert_eq!(d.on_source(100 + i, 3, &p[i as usize]), (true, vec![]));
        }
        let r = wire::Repair::parse(&reps[0]).unwrap();
        let got = d.on_repair(5, &r);
        assert_eq!(
            got,
            vec![Rebuilt {
                id: 102,
                substream: 3,
                payload: p[2].clone()
            }]
        );
        // The original arriving late is not delivered twice.
        assert_eq!(d.on_source(102, 3, &p[2]), (false, vec![]));
        assert_eq!(d.stats().late_originals, 1);
        // The echo: the REPAIR's clock and how long ago it came.
        let rep = d.report(2_005);
        assert_eq!((rep.echo_us, rep.hold_us), (42, 2));
    }

    #[test]
    fn rebuilds_when_the_last_source_comes_after_the_repairs() {
        let (p, reps) = block(6, 1.0);
        assert!(reps.len() >= 2);
        let mut d = Decoder::new();
        for r in &reps[..2] {
            assert!(d.on_repair(0, &wire::Repair::parse(r).unwrap()).is_empty());
        }
        // Sources 0, 2, 4, 5 arrive; with two repairs that is 6 of 6+m.
        for i in [0u32, 2, 4] {
            assert_eq!(d.on_source(100 + i, 3, &p[i as usize]).1, vec![]);
        }
        let (deliver, got) = d.on_source(105, 3, &p[5]);
        assert!(deliver);
        assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), vec![101, 103]);
        assert_eq!(got[1].payload, p[3]);
    }

    #[test]
    fn judges_loss_and_bursts() {
        let mut d = Decoder::new();
        // Ids 0..100 with 10, 11, 12 and 50 missing.
        for id in (0..100u32).filter(|i| ![10, 11, 12, 50].contains(i)) {
            d.on_source(id, 0, &[1]);
        }
        let r = d.report(0);
        assert_eq!((r.judged, r.lost, r.bursts), (100 - JUDGE_AFTER, 4, 2));
        assert_eq!(r.hold_us, NO_ECHO);
    }

    #[test]
    fn inconsistent_repairs_are_refused() {
        let (_, reps) = block(4, 0.5);
        let mut d = Decoder::new();
        let r = wire::Repair::parse(&reps[0]).unwrap();
        d.on_repair(0, &r);
        let mut other = r.clone();
        other.sources[3] += 1;
        d.on_repair(0, &other);
        assert_eq!(d.stats().refused, 1);
    }
}
