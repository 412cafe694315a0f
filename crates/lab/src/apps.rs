//! The simulator's applications on real packets: what `lab messages`
//! ([`crate::messages`]) and `lab dash` ([`crate::dash`]) share. Each runs
//! two [`AppHost`]s — a sans-IO transport with the very application the
//! simulator runs — in a two-host lab, one per end, on the OS clock with
//! one epoch, so one host's send times and the other's arrival times
//! compare directly.

use crate::topology::{Host, Lab};
use hollywood_io::apphost::Port;
use hollywood_io::{AppHost, NetNs};
use hollywood_tcp::Instant;
use hollywood_transport::TransportApp;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Errors (setup failures; a transport's own failure is in the run).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The seed the simulator gives the transports of a run seeded `seed`
/// (its first derived seed), so that the lab's transports start as the
/// simulator's do.
pub fn transport_seed(seed: u64) -> u64 {
    hollywood_sim::SimBuilder::new()
        .seed(seed)
        .build()
        .derive_seed(1)
}

/// A UDP socket bound to `addr` inside `host`'s namespace (it keeps
/// belonging to it).
pub fn bind_udp(lab: &Lab, host: Host, addr: SocketAddr) -> Result<UdpSocket, Error> {
    let ns = NetNs::open(lab.ns(host).name().ok_or("named namespace")?)?;
    Ok(ns.run(move || UdpSocket::bind(addr))??)
}

/// Run `main` on this thread until `stop` says so or engine time
/// `limit`, with `other` on a thread of its own until then. `other` may
/// end the run early: `give_up` is checked after each of its wake-ups.
/// Returns whether `stop` ended the run, and `other` back.
pub fn run_beside<P, A, Q, B>(
    main: &mut AppHost<P, A>,
    mut other: AppHost<Q, B>,
    limit: Instant,
    mut stop: impl FnMut(&A, Instant) -> bool,
    give_up: impl Fn(&B) -> bool + Send + 'static,
) -> Result<(bool, AppHost<Q, B>), Error>
where
    P: Port,
    A: TransportApp,
    Q: Port + Send + 'static,
    B: TransportApp + Send + 'static,
{
    let main_done = Arc::new(AtomicBool::new(false));
    let gave_up = Arc::new(AtomicBool::new(false));
    let thread = {
        let (main_done, gave_up) = (main_done.clone(), gave_up.clone());
        std::thread::Builder::new().name("lab-app".into()).spawn(
            move || -> std::io::Result<AppHost<Q, B>> {
                other.run_until(limit, |app, _| {
                    if give_up(app) {
                        gave_up.store(true, Ordering::Release);
                    }
                    main_done.load(Ordering::Acquire) || gave_up.load(Ordering::Relaxed)
                })?;
                Ok(other)
            },
        )?
    };
    let result = main.run_until(limit, |app, now| {
        stop(app, now) || gave_up.load(Ordering::Acquire)
    });
    main_done.store(true, Ordering::Release);
    let other = thread.join().map_err(|_| "application thread panicked")??;
    let stopped = result? && !gave_up.load(Ordering::Acquire);
    Ok((stopped, other))
}
