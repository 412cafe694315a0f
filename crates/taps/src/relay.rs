//! A live relay between UDP and Hollywood, the engine of
//! `hollywood transmit` (what `srt-live-transmit` is to SRT): each UDP
//! datagram becomes one message whose lifetime is the relay's latency, so
//! a datagram that cannot arrive in time is dropped rather than delaying
//! the ones behind it; at the far end each message becomes one datagram
//! again, forwarded as it arrives.
//!
//! One side is UDP, the other a Hollywood connection, as a caller
//! ([`Preconnection::initiate`], racing) or a listener (one connection at a
//! time; when it ends the next is accepted).

use crate::reorder::{Reorder, ReorderStats};
use crate::{Error, Event, MessageContext, Preconnection};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which way datagrams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Read datagrams at this UDP address, send them as messages.
    UdpToHollywood {
        /// Where to receive datagrams.
        bind: SocketAddr,
    },
    /// Receive messages, send each as a datagram to this address.
    HollywoodToUdp {
        /// Where to send datagrams.
        to: SocketAddr,
    },
}

/// How the Hollywood side connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Connect to the preconnection's remote endpoint.
    Caller,
    /// Accept at the preconnection's local endpoint.
    Listener,
}

/// A relay.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Endpoints, properties, security, candidates.
    pub preconnection: Preconnection,
    /// Caller or listener.
    pub mode: Mode,
    /// Which way.
    pub direction: Direction,
    /// The lifetime of each datagram's message (`--latency`).
    pub latency: Duration,
    /// Receiving: how long a message may wait for a missing earlier one,
    /// to leave in the sender's order (`crate::reorder`; zero: forward
    /// messages as they arrive).
    pub reorder: Duration,
}

/// The reorder window `hollywood transmit` uses unless told: half the
/// latency. A message held the whole window still leaves within its
/// lifetime when it arrived within the other half. Measured in
/// `hollywood lab internet` (80 ms RTT, 2 % loss, 2 Mb/s, debug build,
/// docs/DEPLOY.md): a gap fills about one round trip plus loss detection
/// after the message behind it arrived (~95 ms there), so at a 180 ms
/// latency half (90 ms) gives up a few gaps just before they fill (16 of
/// 2011 datagrams left out of order, all on time) where three quarters
/// put every one back in order; at 100 ms, three quarters held messages
/// past their deadline (84.6 % on time against 94.9 % with no reordering).
/// Lateness costs more than order, so half; `--reorder` sets it.
pub fn default_reorder(latency: Duration) -> Duration {
    latency / 2
}

/// Counters of a relay, shared with whoever prints them.
#[derive(Debug, Default)]
pub struct RelayStats {
    /// Datagrams read from UDP.
    pub udp_in: AtomicU64,
    /// Bytes of those.
    pub udp_in_bytes: AtomicU64,
    /// Datagrams written to UDP.
    pub udp_out: AtomicU64,
    /// Bytes of those.
    pub udp_out_bytes: AtomicU64,
    /// Messages the protocol took (`Sent`).
    pub sent: AtomicU64,
    /// Messages whose latency ran out before the protocol took them.
    pub expired: AtomicU64,
    /// Messages the protocol gave up on after taking them.
    pub abandoned: AtomicU64,
    /// Messages that could not be sent.
    pub send_errors: AtomicU64,
    /// Messages received.
    pub received: AtomicU64,
    /// Connections established.
    pub connections: AtomicU64,
    /// The protocol of the current (or last) connection.
    pub protocol: Mutex<Option<crate::Protocol>>,
    /// The receiving side's reorder buffer, this connection.
    pub reorder: Mutex<ReorderStats>,
    /// Reconnections in consistent mode after a reset (at most one).
    pub reconnects: AtomicU64,
    /// Why the relay reconnected, if it did.
    pub reconnect_reason: Mutex<Option<String>>,
}

/// A copy of [`RelayStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelaySnapshot {
    /// See [`RelayStats`].
    pub udp_in: u64,
    /// See [`RelayStats`].
    pub udp_in_bytes: u64,
    /// See [`RelayStats`].
    pub udp_out: u64,
    /// See [`RelayStats`].
    pub udp_out_bytes: u64,
    /// See [`RelayStats`].
    pub sent: u64,
    /// See [`RelayStats`].
    pub expired: u64,
    /// See [`RelayStats`].
    pub abandoned: u64,
    /// See [`RelayStats`].
    pub send_errors: u64,
    /// See [`RelayStats`].
    pub received: u64,
    /// See [`RelayStats`].
    pub connections: u64,
    /// See [`RelayStats`].
    pub protocol: Option<crate::Protocol>,
    /// See [`RelayStats`].
    pub reorder: ReorderStats,
    /// See [`RelayStats`].
    pub reconnects: u64,
}

impl RelayStats {
    /// The counters now.
    pub fn snapshot(&self) -> RelaySnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RelaySnapshot {
            udp_in: g(&self.udp_in),
            udp_in_bytes: g(&self.udp_in_bytes),
            udp_out: g(&self.udp_out),
            udp_out_bytes: g(&self.udp_out_bytes),
            sent: g(&self.sent),
            expired: g(&self.expired),
            abandoned: g(&self.abandoned),
            send_errors: g(&self.send_errors),
            received: g(&self.received),
            connections: g(&self.connections),
            protocol: *self.protocol.lock().unwrap_or_else(|e| e.into_inner()),
            reorder: *self.reorder.lock().unwrap_or_else(|e| e.into_inner()),
            reconnects: g(&self.reconnects),
        }
    }

    fn set_reorder(&self, r: ReorderStats) {
        *self.reorder.lock().unwrap_or_else(|e| e.into_inner()) = r;
    }

    fn count(&self, e: &Event) {
        let c = match e {
            Event::Sent { .. } => &self.sent,
            Event::Expired { .. } => &self.expired,
            Event::Abandoned { .. } => &self.abandoned,
            Event::SendError { .. } => &self.send_errors,
            _ => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Run until `stop` completes (then close gracefully) or, as a caller,
/// until the connection ends.
pub async fn run(
    mut cfg: RelayConfig,
    stats: Arc<RelayStats>,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    tokio::pin!(stop);
    let mut listener = match cfg.mode {
        Mode::Listener => Some(cfg.preconnection.listen().await?),
        Mode::Caller => None,
    };
    let udp = match cfg.direction {
        Direction::UdpToHollywood { bind } => {
            crate::sockets::udp(cfg.preconnection.namespace(), bind, None)
                .map_err(Error::Endpoint)?
        }
        Direction::HollywoodToUdp { to } => {
            let any = if to.is_ipv4() {
                SocketAddr::from(([0, 0, 0, 0], 0))
            } else {
                SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
            };
            crate::sockets::udp(cfg.preconnection.namespace(), any, None)
                .map_err(Error::Endpoint)?
        }
    };
    let mut buf = vec![0u8; 65_536];
    // Reorder counters of the connections that ended.
    let mut reorder_before = ReorderStats::default();
    loop {
        let conn = match &mut listener {
            Some(l) => tokio::select! {
                c = l.accept() => c.ok_or(Error::Closed)?,
                () = &mut stop => return Ok(()),
            },
            None => tokio::select! {
                c = cfg.preconnection.initiate() => c?,
                () = &mut stop => return Ok(()),
            },
        };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        *stats.protocol.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn.protocol());
        let mut conn = conn;
        // Messages of this connection replaced by inconsistent
        // retransmissions (`Abandoned` with reason `Replaced`).
        let mut replaced = 0u64;
        let ended = match cfg.direction {
            Direction::UdpToHollywood { .. } => {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    let got = tokio::select! {
                        r = udp.recv_from(&mut buf) => match r {
                            Ok((n, _)) => Some(n),
                            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => None,
                            Err(e) => return Err(Error::Endpoint(format!("UDP receive: {e}"))),
                        },
                        _ = tick.tick() => None,
                        () = &mut stop => {
                            let _ = conn.close().await;
                            let _ = drain(&mut conn, &stats, &mut replaced);
                            return Ok(());
                        }
                    };
                    if let Some(n) = got {
                        stats.udp_in.fetch_add(1, Ordering::Relaxed);
                        stats.udp_in_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        if n == 0 {
                            continue;
                        }
                        let ctx = MessageContext::lifetime(cfg.latency).ordered(false);
                        if let Err(e) = conn.send(buf[..n].to_vec(), ctx).await {
                            break e;
                        }
                    }
                    if let Err(e) = drain(&mut conn, &stats, &mut replaced) {
                        break e;
                    }
                }
            }
            Direction::HollywoodToUdp { to } => {
                // Back in the sender's order, each message held at most
                // the reorder window (crate::reorder).
                let mut order = Reorder::new(cfg.reorder);
                let mut out = Vec::new();
                let ended = loop {
                    let wake = order.next_timeout();
                    let m = tokio::select! {
                        m = conn.receive() => Some(m),
                        () = sleep_until(wake) => None,
                        () = &mut stop => {
                            order.flush(&mut out);
                            forward(&udp, to, &mut out, &stats).await;
                            stats.set_reorder(reorder_before + order.stats());
                            let _ = conn.close().await;
                            return Ok(());
                        }
                    };
                    match m {
                        Some(Ok(Some(m))) => {
                            stats.received.fetch_add(1, Ordering::Relaxed);
                            order.push(m.wire_id, m.data, tokio::time::Instant::now(), &mut out);
                        }
                        Some(Ok(None)) => break Error::Closed,
                        Some(Err(e)) => break e,
                        None => {}
                    }
                    order.poll(tokio::time::Instant::now(), &mut out);
                    forward(&udp, to, &mut out, &stats).await;
                    stats.set_reorder(reorder_before + order.stats());
                };
                order.flush(&mut out);
                forward(&udp, to, &mut out, &stats).await;
                reorder_before = reorder_before + order.stats();
                stats.set_reorder(reorder_before);
                ended
            }
        };
        if listener.is_none() {
            // Thesis §4.5: a middlebox that compares retransmissions with
            // the original may reset a connection that carried inconsistent
            // ones. Once, reconnect with consistent retransmissions only
            // (out-of-order delivery and expiry stay); a second failure is
            // the caller's error.
            // Events the failure left unread.
            let _ = drain(&mut conn, &stats, &mut replaced);
            let rewrote = replaced;
            if !matches!(ended, Error::Closed)
                && conn.protocol() == crate::Protocol::TcpHollywood
                && rewrote > 0
                && !cfg.preconnection.consistent_retransmissions()
            {
                cfg.preconnection = cfg.preconnection.clone().with_consistent_retransmissions();
                stats.reconnects.fetch_add(1, Ordering::Relaxed);
                *stats
                    .reconnect_reason
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(format!(
                    "{ended} after {rewrote} messages were replaced by inconsistent retransmissions: reconnected with consistent retransmissions (thesis §4.5)"
                ));
                continue;
            }
            return match ended {
                Error::Closed => Ok(()),
                e => Err(e),
            };
        }
    }
}

/// Sleep until `t`, or forever when there is none.
async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Each datagram out to `to`; a full socket buffer drops it, as UDP does.
async fn forward(
    udp: &tokio::net::UdpSocket,
    to: SocketAddr,
    out: &mut Vec<Vec<u8>>,
    stats: &RelayStats,
) {
    for d in out.drain(..) {
        if udp.send_to(&d, to).await.is_ok() {
            stats.udp_out.fetch_add(1, Ordering::Relaxed);
            stats
                .udp_out_bytes
                .fetch_add(d.len() as u64, Ordering::Relaxed);
        }
    }
}

/// Count the send events waiting; the connection's failure once it has
/// failed.
fn drain(
    conn: &mut crate::Connection,
    stats: &RelayStats,
    replaced: &mut u64,
) -> Result<(), Error> {
    while let Some(e) = conn.try_event() {
        stats.count(&e);
        // Only `Replaced` is an inconsistent retransmission: `NotSent` never
        // reached the wire, and `ExpiredBeforeSend`'s slot first went out
        // with the other message (hollywood_tcp::ExpiryReason).
        if let Event::Abandoned { reason, .. } = &e {
            if reason.starts_with("Replaced") {
                *replaced += 1;
            }
        }
        // Datagrams are never too large for a message, so a send error
        // means the connection failed.
        match e {
            Event::ConnectionError(why) => return Err(Error::Connection(why)),
            Event::SendError { .. } => {
                return Err(Error::Connection(format!("send failed: {e:?}")))
            }
            _ => {}
        }
    }
    Ok(())
}
