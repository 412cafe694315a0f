//! `hollywood transmit` to and from a relay: UDP datagrams published as a
//! stream, or a stream played out as UDP datagrams.
//!
//! Publishing, each datagram is one message whose end-to-end deadline is
//! `latency` from when it was read, marked by [`super::ts`] (priorities,
//! group starts). Playing, messages are put back in the publisher's order
//! (by sequence number, [`crate::reorder`], within the reorder window) and
//! written as datagrams; one past its deadline is dropped, never written.

use super::client::{Request, Session};
use super::ts::TsClassifier;
use super::wire::Role;
use crate::relay::RelayStats;
use crate::reorder::Reorder;
use crate::{Error, Preconnection};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Publish the datagrams arriving at `bind` until `stop`, then end the
/// stream. Counters in `stats`: `udp_in`, `sent` (published), `expired`
/// and `abandoned` (the connection's), `connections`, `protocol`.
pub async fn publish(
    pre: &Preconnection,
    req: &Request,
    bind: SocketAddr,
    latency: Duration,
    stats: Arc<RelayStats>,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    debug_assert_eq!(req.role, Role::Publish);
    let udp = crate::sockets::udp(pre.namespace(), bind, None).map_err(Error::Endpoint)?;
    let mut s = Session::connect(pre, req).await?;
    stats.connections.fetch_add(1, Ordering::Relaxed);
    *stats.protocol.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.protocol());
    let mut ts = TsClassifier::new();
    let mut buf = vec![0u8; 65_536];
    tokio::pin!(stop);
    let r = loop {
        let n = tokio::select! {
            r = udp.recv_from(&mut buf) => match r {
                Ok((n, _)) => n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(e) => break Err(Error::Endpoint(format!("UDP receive: {e}"))),
            },
            () = &mut stop => break Ok(()),
        };
        stats.udp_in.fetch_add(1, Ordering::Relaxed);
        stats.udp_in_bytes.fetch_add(n as u64, Ordering::Relaxed);
        if n == 0 {
            continue;
        }
        let (flags, prio) = ts.classify(&buf[..n]);
        if let Err(e) = s.publish(&buf[..n], flags, prio, latency).await {
            break Err(e);
        }
        stats.sent.store(s.stats().published, Ordering::Relaxed);
        let c = s.connection_stats();
        stats.expired.store(c.expired, Ordering::Relaxed);
        stats.abandoned.store(c.abandoned, Ordering::Relaxed);
    };
    if r.is_ok() {
        s.close().await?;
    }
    r
}

/// Play the stream to `to` until it ends or `stop`. Counters: `received`,
/// `expired` (late: past the deadline on arrival, dropped), `udp_out`,
/// `reorder`.
pub async fn play(
    pre: &Preconnection,
    req: &Request,
    to: SocketAddr,
    reorder: Duration,
    stats: Arc<RelayStats>,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    debug_assert_eq!(req.role, Role::Play);
    let any = if to.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
    };
    let udp = crate::sockets::udp(pre.namespace(), any, None).map_err(Error::Endpoint)?;
    let mut s = Session::connect(pre, req).await?;
    stats.connections.fetch_add(1, Ordering::Relaxed);
    *stats.protocol.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.protocol());
    let mut order = Reorder::new(reorder);
    let mut out = Vec::new();
    // Messages whose deadline passed while held for order.
    let mut held_late = 0u64;
    tokio::pin!(stop);
    let r = loop {
        let wake = order.next_timeout();
        let m = tokio::select! {
            m = s.receive() => Some(m),
            () = async { match wake { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => None,
            () = &mut stop => break Ok(()),
        };
        match m {
            Some(Ok(Some(m))) => {
                // The sequence number, wrapped as the reorder buffer's ids
                // are; the deadline rides in front of the payload, checked
                // again when the datagram leaves.
                let mut d = Vec::with_capacity(8 + m.payload.len());
                d.extend_from_slice(&m.header.deadline_us.to_be_bytes());
                d.extend_from_slice(&m.payload);
                order.push(
                    m.header.seq as u32,
                    d,
                    tokio::time::Instant::now(),
                    &mut out,
                );
            }
            Some(Ok(None)) => break Ok(()),
            Some(Err(e)) => break Err(e),
            None => {}
        }
        let st = s.stats();
        stats.received.store(st.received, Ordering::Relaxed);
        stats.expired.store(st.late + held_late, Ordering::Relaxed);
        order.poll(tokio::time::Instant::now(), &mut out);
        held_late += forward(&udp, to, &mut out, &stats).await;
        *stats.reorder.lock().unwrap_or_else(|e| e.into_inner()) = order.stats();
    };
    order.flush(&mut out);
    held_late += forward(&udp, to, &mut out, &stats).await;
    stats
        .expired
        .store(s.stats().late + held_late, Ordering::Relaxed);
    *stats.reorder.lock().unwrap_or_else(|e| e.into_inner()) = order.stats();
    r
}

/// Each datagram (deadline first) out to `to`; the number past their
/// deadline, dropped.
async fn forward(
    udp: &tokio::net::UdpSocket,
    to: SocketAddr,
    out: &mut Vec<Vec<u8>>,
    stats: &RelayStats,
) -> u64 {
    let mut late = 0;
    for d in out.drain(..) {
        let (deadline, d) = d.split_at(8);
        if i64::from_be_bytes(deadline.try_into().unwrap_or([0; 8])) <= super::now_us() {
            late += 1;
            continue;
        }
        if udp.send_to(d, to).await.is_ok() {
            stats.udp_out.fetch_add(1, Ordering::Relaxed);
            stats
                .udp_out_bytes
                .fetch_add(d.len() as u64, Ordering::Relaxed);
        }
    }
    late
}
