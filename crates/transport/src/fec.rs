//! FEC on the message layer over any [`MessageTransport`] (issue 34;
//! `hollywood-fec` has the code and the policy, docs/FEC.md the design).
//!
//! [`FecTransport`] wraps a transport (TCP Hollywood, QUIC, UDP) and keeps
//! its interface: the application sends and receives its messages as
//! before. Underneath:
//!
//! - **Ids.** The application's message `a` goes on the wire as message
//!   `a << 4`, unchanged otherwise; the layer's own messages (REPAIR,
//!   REPORT, sub-stream [`FEC_SUBSTREAM`]) take the ids between
//!   (`hollywood_fec::wire`). Events come back with the application's ids.
//! - **Sending.** A message whose retransmission could not arrive before
//!   its deadline ([`hollywood_fec::policy::needs_fec`]; not if
//!   [`OutMessage::fec`] is false) joins the open block; when the block's
//!   first repair is due (the first deadline minus the one-way delay and a
//!   slack), the encoder closes it and its repair messages are sent, each
//!   with the block's last deadline as its lifetime.
//! - **Receiving.** Every application message is delivered once: as it
//!   arrives, or rebuilt from its block when enough symbols arrived; a
//!   late original of a rebuilt message is dropped. The receiver REPORTs
//!   the loss it measured (and echoes the latest REPAIR's clock, a round
//!   trip for transports that measure none) every
//!   [`FecConfig::report_interval`].
//!
//! The application's ids must stay at most 2^28 - 1 and increase (the
//! transports' rule, thesis §4.2). Where the layer runs out of ids of its
//! own between two application messages (15), a REPORT takes the next
//! application id: [`FecTransport::min_app_id`] is the lowest the
//! application may use next.

use crate::record;
use crate::{
    InMessage, Instant, MessageTransport, OutMessage, SendError, TransportEvent, TransportStats,
};
use hollywood_fec::wire::{self, FecMessage, NO_ECHO};
use hollywood_fec::{
    policy::needs_fec, Decoder, DecoderStats, Encoder, EncoderStats, FecConfig, LossEstimate,
    LossMeter, RepairOut, FEC_SUBSTREAM,
};
use std::collections::VecDeque;
use std::time::Duration;

/// The layer's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FecStats {
    /// The sender side.
    pub encoder: EncoderStats,
    /// The receiver side.
    pub decoder: DecoderStats,
    /// REPAIR messages the transport took.
    pub repairs_sent: u64,
    /// REPAIR messages the transport refused (full, or no id left).
    pub repairs_dropped: u64,
    /// REPAIR messages the transport reported expired.
    pub repairs_expired: u64,
    /// REPORTs sent.
    pub reports_sent: u64,
    /// REPORTs received.
    pub reports_received: u64,
    /// Messages of the layer that did not parse, or ids that break its
    /// numbering (dropped).
    pub malformed: u64,
    /// The loss the sender last based its redundancy on.
    pub loss: Option<LossEstimate>,
    /// The round trip echoed by REPORTs (smoothed).
    pub echo_rtt: Option<Duration>,
}

/// Wire bytes a message of a transport of `kind` costs beyond its payload
/// and record header when it fills a packet of its own, for
/// [`FecConfig::message_overhead`] (the FEC bound charges them on sources
/// and repairs alike): IPv4 and UDP (28 B); for QUIC also a short header
/// with an 8-byte connection id and a 2-byte packet number, a STREAM frame
/// header and the AEAD tag (1 + 8 + 2 + 9 + 16 B); for TCP the IPv4 and
/// TCP headers with timestamps (52 B).
pub fn packet_overhead(kind: crate::TransportKind) -> usize {
    match kind {
        crate::TransportKind::Udp => 28,
        crate::TransportKind::Quic(_) => 28 + 1 + 8 + 2 + 9 + 16,
        crate::TransportKind::Tcp(_) => 52,
    }
}

/// A transport with FEC on the message layer (module docs).
pub struct FecTransport {
    inner: Box<dyn MessageTransport>,
    cfg: FecConfig,
    enc: Encoder,
    dec: Decoder,
    meter: LossMeter,
    events: VecDeque<TransportEvent>,
    /// The last wire id used (an application message's or the layer's).
    last_wire: Option<u32>,
    next_report: Option<Instant>,
    echo_rtt: Option<Duration>,
    stats: FecStats,
}

impl std::fmt::Debug for FecTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FecTransport")
            .field("inner", &self.inner.name())
            .field("cfg", &self.cfg)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn ns(t: Instant) -> u64 {
    t.as_nanos()
}

fn us(t: Instant) -> u32 {
    (t.as_nanos() / 1000) as u32
}

impl FecTransport {
    /// `inner` with FEC (`cfg` checked with [`FecConfig::validate`]).
    pub fn new(inner: Box<dyn MessageTransport>, cfg: FecConfig) -> Result<FecTransport, String> {
        cfg.validate()?;
        Ok(FecTransport {
            inner,
            enc: Encoder::new(cfg.clone()),
            cfg,
            dec: Decoder::new(),
            meter: LossMeter::default(),
            events: VecDeque::new(),
            last_wire: None,
            next_report: None,
            echo_rtt: None,
            stats: FecStats::default(),
        })
    }

    /// The transport underneath.
    pub fn inner(&self) -> &dyn MessageTransport {
        &*self.inner
    }

    /// The layer's counters.
    pub fn fec_stats(&self) -> FecStats {
        let mut s = self.stats;
        s.encoder = self.enc.stats();
        s.decoder = self.dec.stats();
        s.loss = self.meter.estimate();
        s.echo_rtt = self.echo_rtt;
        s
    }

    /// The lowest application id the application may send next.
    pub fn min_app_id(&self) -> u32 {
        self.last_wire.map_or(0, |w| (w >> wire::ID_SHIFT) + 1)
    }

    /// The round trip the policy works with: echoed by REPORTs, else the
    /// transport's smoothed or lowest, else the configured hint.
    fn rtt(&self) -> Option<Duration> {
        self.echo_rtt
            .or_else(|| self.inner.stats().srtt)
            .or_else(|| self.inner.min_rtt())
            .or(self.cfg.rtt_hint)
    }

    /// The next id of the layer's own (`burn`: take the next application
    /// id if the fifteen after the last are used).
    fn own_id(&mut self, burn: bool) -> Option<u32> {
        let mut next = self.last_wire.map_or(1, |l| l.wrapping_add(1));
        if wire::app_id(next).is_some() {
            if !burn {
                return None;
            }
            next = next.checked_add(1)?;
        }
        Some(next)
    }

    fn send_repairs(&mut self, now: Instant, repairs: Vec<RepairOut>) {
        for r in repairs {
            let Some(id) = self.own_id(false) else {
                self.stats.repairs_dropped += 1;
                continue;
            };
            let mut m = OutMessage::new(id, r.payload);
            m.substream = FEC_SUBSTREAM;
            m.lifetime = r.lifetime;
            m.fec = false;
            match self.inner.send(now, m) {
                Ok(()) => {
                    self.last_wire = Some(id);
                    self.stats.repairs_sent += 1;
                }
                Err(_) => self.stats.repairs_dropped += 1,
            }
        }
    }

    fn close_block(&mut self, now: Instant) {
        let out = self.enc.flush(ns(now), self.meter.estimate(), us(now));
        self.send_repairs(now, out);
    }

    fn send_report(&mut self, now: Instant) {
        let Some(id) = self.own_id(true) else { return };
        let mut payload = Vec::with_capacity(wire::REPORT_LEN);
        self.dec.report(ns(now)).emit(&mut payload);
        let mut m = OutMessage::new(id, payload);
        m.substream = FEC_SUBSTREAM;
        m.lifetime = Some(self.cfg.report_interval * 2);
        m.fec = false;
        if self.inner.send(now, m).is_ok() {
            self.last_wire = Some(id);
            self.stats.reports_sent += 1;
        }
    }

    /// Turn one event of the transport underneath into the application's.
    fn translate(&mut self, ev: TransportEvent) {
        match ev {
            TransportEvent::Message(m) if m.substream == FEC_SUBSTREAM => self.on_fec(m),
            TransportEvent::Message(m) => {
                let Some(app) = wire::app_id(m.id) else {
                    self.stats.malformed += 1;
                    return;
                };
                if self.next_report.is_none() {
                    self.next_report = Some(m.arrival + self.cfg.report_interval);
                }
                let (deliver, rebuilt) = self.dec.on_source(app, m.substream, &m.payload);
                let at = m.arrival;
                if deliver {
                    self.events
                        .push_back(TransportEvent::Message(InMessage { id: app, ..m }));
                }
                self.push_rebuilt(at, rebuilt);
            }
            TransportEvent::Expired {
                id,
                substream,
                reason,
            } => {
                if substream == FEC_SUBSTREAM {
                    self.stats.repairs_expired += 1;
                } else if let Some(app) = wire::app_id(id) {
                    self.events.push_back(TransportEvent::Expired {
                        id: app,
                        substream,
                        reason,
                    });
                }
            }
            TransportEvent::Acked { id } => {
                if let Some(app) = wire::app_id(id) {
                    self.events.push_back(TransportEvent::Acked { id: app });
                }
            }
            TransportEvent::PeerClosed | TransportEvent::Closed | TransportEvent::Failed(_) => {
                self.next_report = None;
                self.events.push_back(ev);
            }
            other => self.events.push_back(other),
        }
    }

    fn push_rebuilt(&mut self, at: Instant, rebuilt: Vec<hollywood_fec::Rebuilt>) {
        for r in rebuilt {
            self.events.push_back(TransportEvent::Message(InMessage {
                id: r.id,
                substream: r.substream,
                payload: r.payload,
                arrival: at,
                received: at,
            }));
        }
    }

    fn on_fec(&mut self, m: InMessage) {
        match wire::parse(&m.payload) {
            Ok(FecMessage::Repair(r)) => {
                let rebuilt = self.dec.on_repair(ns(m.arrival), &r);
                self.push_rebuilt(m.arrival, rebuilt);
            }
            Ok(FecMessage::Report(r)) => {
                self.stats.reports_received += 1;
                self.meter.on_report(r);
                self.enc.on_report();
                if r.hold_us != NO_ECHO {
                    let rtt_us = us(m.arrival)
                        .wrapping_sub(r.echo_us)
                        .wrapping_sub(r.hold_us);
                    // Below a minute: a sample; anything else is a clock
                    // that wrapped or a bogus report.
                    if rtt_us < 60_000_000 {
                        let s = Duration::from_micros(u64::from(rtt_us));
                        self.echo_rtt = Some(match self.echo_rtt {
                            Some(e) => (e * 7 + s) / 8,
                            None => s,
                        });
                    }
                }
            }
            Err(_) => self.stats.malformed += 1,
        }
    }

    fn drain_inner(&mut self) {
        while let Some(ev) = self.inner.poll_event() {
            self.translate(ev);
        }
    }

    fn timers(&mut self, now: Instant) {
        if self.enc.poll_timeout().is_some_and(|t| t <= ns(now)) {
            let out = self
                .enc
                .handle_timeout(ns(now), self.meter.estimate(), us(now));
            self.send_repairs(now, out);
        }
        if self.next_report.is_some_and(|t| t <= now) {
            self.next_report = Some(now + self.cfg.report_interval);
            if self.dec.has_arrivals() {
                self.send_report(now);
            }
        }
    }
}

impl MessageTransport for FecTransport {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn start(&mut self, now: Instant) {
        self.inner.start(now);
        self.drain_inner();
    }

    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.inner.handle_packet(now, packet);
        self.drain_inner();
        self.timers(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
        self.drain_inner();
        self.timers(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.inner.poll_transmit(now)
    }

    fn recycle(&mut self, packet: Vec<u8>) {
        self.inner.recycle(packet);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.inner.poll_timeout(),
            self.enc.poll_timeout().map(Instant::from_nanos),
            self.next_report,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn send(&mut self, now: Instant, msg: OutMessage) -> Result<(), SendError> {
        self.send_ref(now, &msg)
    }

    fn send_ref(&mut self, now: Instant, msg: &OutMessage) -> Result<(), SendError> {
        if msg.substream == FEC_SUBSTREAM {
            return Err(SendError::Invalid(format!(
                "sub-stream {FEC_SUBSTREAM} carries the FEC layer's messages"
            )));
        }
        let Some(wire_id) = wire::wire_id(msg.id) else {
            return Err(SendError::Invalid(format!(
                "message id {} above the FEC layer's largest ({})",
                msg.id,
                wire::MAX_APP_ID
            )));
        };
        if self.last_wire.is_some_and(|l| wire_id <= l) {
            return Err(SendError::Invalid(format!(
                "message id {} below the lowest the FEC layer allows next ({})",
                msg.id,
                self.min_app_id()
            )));
        }
        let depends_on = match msg.depends_on.map(wire::wire_id) {
            Some(None) => {
                return Err(SendError::Invalid(
                    "dependency above the FEC layer's largest id".into(),
                ))
            }
            Some(Some(d)) => Some(d),
            None => None,
        };
        let rtt = self.rtt();
        let protect = msg.fec && needs_fec(msg.lifetime, rtt, self.cfg.retransmits);
        if protect && self.enc.must_close_before(msg.id) {
            self.close_block(now);
        }
        let mapped = OutMessage {
            id: wire_id,
            depends_on,
            ..msg.clone()
        };
        self.inner.send_ref(now, &mapped)?;
        self.last_wire = Some(wire_id);
        if protect {
            let deadline = msg.lifetime.map(|l| ns(now + l));
            let one_way = rtt.map_or(Duration::ZERO, |r| r / 2);
            // The bound counts record headers: the source's as framed,
            // and a repair's (a later id on sub-stream FEC_SUBSTREAM, a
            // payload the size of the block's largest source or more).
            // The source is charged with the header the application's
            // own id would get: the bytes the id shift adds (a record
            // header grows by 2 B once ids pass 1023) are the layer's
            // cost and are spent from the credit, so the bound holds on
            // the wire against the stream without the layer.
            let len = msg.payload.len();
            let header = record::encoded_len(msg.id, msg.substream, msg.depends_on, len) - len;
            let shifted = record::encoded_len(wire_id, msg.substream, depends_on, len) - len;
            let repair_len = len + wire::REPAIR_FIXED + wire::MAX_K;
            let repair_header =
                record::encoded_len(wire_id + 1, FEC_SUBSTREAM, None, repair_len) - repair_len;
            self.enc.set_repair_header(repair_header);
            self.enc.push_framed(
                ns(now),
                msg.id,
                msg.substream,
                &msg.payload,
                header,
                deadline,
                one_way,
            );
            self.enc.charge(shifted.saturating_sub(header));
        }
        self.drain_inner();
        Ok(())
    }

    fn min_rtt(&self) -> Option<Duration> {
        self.inner.min_rtt()
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        if self.events.is_empty() {
            self.drain_inner();
        }
        self.events.pop_front()
    }

    fn close(&mut self, now: Instant) {
        self.close_block(now);
        self.inner.close(now);
        self.drain_inner();
    }

    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }

    fn raise_receive_credit(&mut self) -> bool {
        self.inner.raise_receive_credit()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::UdpTransport;
    use std::net::SocketAddr;

    const MS: Duration = Duration::from_millis(1);

    fn pair(cfg: FecConfig) -> (FecTransport, FecTransport) {
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let tx = FecTransport::new(Box::new(UdpTransport::new(a, Some(b))), cfg.clone()).unwrap();
        let rx =
            FecTransport::new(Box::new(UdpTransport::new(b, None).reply_to_peer()), cfg).unwrap();
        (tx, rx)
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + MS * ms as u32
    }

    /// Over UDP with a scripted loss: the lost message is rebuilt from the
    /// block's repair, delivered once with the application's id, and the
    /// receiver's REPORT reaches the sender with the loss it saw.
    #[test]
    fn a_lost_message_is_rebuilt_over_udp() {
        let cfg = FecConfig {
            max_overhead: 0.5,
            retransmits: false,
            ..FecConfig::default()
        };
        let (mut tx, mut rx) = pair(cfg);
        tx.start(at(0));
        rx.start(at(0));
        while tx.poll_event().is_some() {}
        while rx.poll_event().is_some() {}
        let mut got = Vec::new();
        for i in 0..4u32 {
            let mut m = OutMessage::new(i, vec![i as u8; 300]);
            m.lifetime = Some(200 * MS);
            tx.send(at(u64::from(i) * 5), m).unwrap();
            let p = tx.poll_transmit(at(0)).unwrap();
            if i != 2 {
                rx.handle_packet(at(u64::from(i) * 5 + 50), &p);
            }
        }
        // No RTT known: the block closes at the first deadline minus the slack.
        assert_eq!(tx.poll_timeout(), Some(at(190)));
        tx.handle_timeout(at(190));
        let mut repairs = 0;
        while let Some(p) = tx.poll_transmit(at(190)) {
            rx.handle_packet(at(195), &p);
            repairs += 1;
        }
        assert!(repairs >= 1);
        while let Some(ev) = rx.poll_event() {
            if let TransportEvent::Message(m) = ev {
                got.push((m.id, m.payload[0], m.arrival));
            }
        }
        assert_eq!(
            got,
            vec![
                (0, 0, at(50)),
                (1, 1, at(55)),
                (3, 3, at(65)),
                (2, 2, at(195))
            ]
        );
        assert_eq!(rx.fec_stats().decoder.rebuilt, 1);
        // The receiver reports back (UDP: to the peer it heard from).
        let due = rx.poll_timeout().unwrap();
        rx.handle_timeout(due);
        let p = rx.poll_transmit(due).expect("a report");
        tx.handle_packet(due + 50 * MS, &p);
        assert_eq!(tx.fec_stats().reports_received, 1);
        assert!(tx.fec_stats().echo_rtt.is_some());
    }

    #[test]
    fn ids_are_checked_and_mapped() {
        let (mut tx, _) = pair(FecConfig::default());
        tx.start(at(0));
        let mut m = OutMessage::new(5, vec![1]);
        tx.send(at(0), m.clone()).unwrap();
        assert_eq!(tx.min_app_id(), 6);
        assert!(matches!(
            tx.send(at(0), m.clone()),
            Err(SendError::Invalid(_))
        ));
        m.id = 6;
        m.substream = FEC_SUBSTREAM;
        assert!(matches!(
            tx.send(at(0), m.clone()),
            Err(SendError::Invalid(_))
        ));
        m.substream = 0;
        m.id = wire::MAX_APP_ID + 1;
        assert!(matches!(tx.send(at(0), m), Err(SendError::Invalid(_))));
        // The datagram carries wire id 5 << 4.
        let p = tx.poll_transmit(at(0)).unwrap();
        let d = hollywood_wire::parse_udp_ip(&p).unwrap();
        assert_eq!(crate::record::parse_datagram(d.payload).unwrap().0.id, 80);
    }

    /// Reliable messages over a retransmitting transport get no FEC: the
    /// layer adds nothing to the wire.
    #[test]
    fn opted_out_and_reliable_messages_get_no_repair() {
        let (mut tx, _) = pair(FecConfig::default());
        tx.start(at(0));
        tx.send(at(0), OutMessage::new(0, vec![1; 100])).unwrap();
        let mut m = OutMessage::new(1, vec![1; 100]);
        m.lifetime = Some(10 * MS);
        m.fec = false;
        tx.send(at(0), m).unwrap();
        assert_eq!(tx.poll_timeout(), None);
        assert_eq!(tx.fec_stats().encoder.protected, 0);
    }

    /// With ids past 1023 the layer's shifted id costs 2 bytes more of
    /// record header than the application's id: charged to the bound, the
    /// stream's bytes on the wire (sources and repairs, packet headers
    /// included) stay within 25 % of the same messages sent without the
    /// layer.
    #[test]
    fn the_id_shift_is_charged_so_the_wire_stays_within_the_bound() {
        let cfg = FecConfig {
            max_overhead: 0.25,
            retransmits: false,
            message_overhead: packet_overhead(crate::TransportKind::Udp),
            ..FecConfig::default()
        };
        let (mut tx, mut rx) = pair(cfg);
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let mut plain = UdpTransport::new(a, Some(b));
        tx.start(at(0));
        rx.start(at(0));
        plain.start(at(0));
        let (mut fec_wire, mut plain_wire, mut sent) = (0usize, 0usize, 0u32);
        for i in 0..4000u32 {
            let now = at(u64::from(i) * 5);
            let mut m = OutMessage::new(2000 + i, vec![7; 1316]);
            m.lifetime = Some(200 * MS);
            tx.send(now, m.clone()).unwrap();
            plain.send(now, m).unwrap();
            tx.handle_timeout(now);
            while let Some(p) = tx.poll_transmit(now) {
                fec_wire += p.len() + 28;
                sent += 1;
                // 10 % loss (every 10th packet): REPORTs ask for more
                // repair than the bound allows.
                if sent % 10 != 0 {
                    rx.handle_packet(now, &p);
                }
            }
            while let Some(p) = plain.poll_transmit(now) {
                plain_wire += p.len() + 28;
            }
            if rx.poll_timeout().is_some_and(|t| t <= now) {
                rx.handle_timeout(now);
            }
            while let Some(p) = rx.poll_transmit(now) {
                tx.handle_packet(now, &p);
            }
            while rx.poll_event().is_some() {}
            while tx.poll_event().is_some() {}
        }
        let end = at(4000 * 5 + 300);
        tx.handle_timeout(end);
        while let Some(p) = tx.poll_transmit(end) {
            fec_wire += p.len() + 28;
        }
        let repairs = tx.fec_stats().encoder.repairs;
        assert!(repairs > 100, "{repairs} repairs");
        let over = fec_wire as f64 / plain_wire as f64 - 1.0;
        assert!(over <= 0.25, "wire overhead {:.4}", over);
        assert!(over > 0.20, "wire overhead {:.4}", over);
    }
}
