//! [`ShardedHost`]: the engine spread over the queues of a multi-queue TUN
//! device, one worker thread per queue.
//!
//! Each worker is a [`TunHost`] of its own (its own `Endpoint`, clock,
//! tokio runtime and queue descriptor from
//! [`TunDevice::create_queues`](crate::TunDevice::create_queues)),
//! driven by [`TunHost::drive`] with an application closure made for it,
//! so a worker runs exactly as a single-queue host does. A connection
//! belongs to the worker whose engine holds it: the one that called
//! `connect` (the application spreads its connects over the workers,
//! e.g. round robin with [`Worker::opens`]), or the one that received the
//! SYN (every worker listens where the application listens).
//!
//! **Steering.** The kernel picks the queue of each packet it routes into
//! the device (`tun_select_queue` → `tun_automq_select_queue` in
//! drivers/net/tun.c, when no steering eBPF program is attached): it
//! looks the packet's symmetric flow hash (`__skb_get_hash_symmetric`) up
//! in the device's flow table and uses the queue recorded there, else the
//! hash scaled to the number of queues (`reciprocal_scale`). Entries are
//! recorded by `tun_flow_update` each time user space *writes* a packet of
//! the flow to a queue (`tun_get_user`), expire after `TUN_FLOW_EXPIRE` (3
//! s) without such writes (`tun_flow_cleanup`), and number at most
//! `MAX_TAP_FLOWS` (4096). So once a worker has sent on a flow, the
//! flow's packets come back to it; but the first packets after 3 idle
//! seconds, and every packet of a flow beyond the table's 4096, go by
//! hash and may reach another worker.
//!
//! **Misrouted packets.** A worker that reads a segment whose 4-tuple its
//! own engine does not hold ([`Endpoint::owns`]) looks the owner up in a
//! table shared by the workers (4-tuple → worker; written only when a
//! connection gains or loses its tuple, from the engine's log
//! [`Endpoint::take_tuple_changes`], before any segment of the new
//! connection is written; read under a read lock only on this path) and,
//! if another worker owns it, hands the packet over through that worker's
//! bounded inbox ([`HANDOFF_QUEUE`] packets; when full the packet is
//! dropped and counted in [`HostStats::forward_drops`], a loss TCP
//! recovers from) and wakes it. Only when no worker owns the tuple does
//! the receiving worker's engine handle it: a SYN to a listener is
//! accepted there, anything else answered as without sharding (RST). The
//! normal path takes no lock: a worker's own segments are recognised by
//! its own engine.
//!
//! Workers pick ephemeral ports from disjoint shares of the range
//! ([`Endpoint::set_ephemeral_share`]), so two workers never open the
//! same 4-tuple.

use crate::error::{Error, Result};
use crate::sys;
use crate::tun::device::TunQueue;
use crate::tun::host::{HostStats, Step, TunHost};
use hollywood_tcp::{Config, Endpoint, EndpointStats, TupleChange};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::Notify;

/// Packets a worker's inbox holds (handed over by other workers and not
/// yet given to its engine); more are dropped and counted.
pub const HANDOFF_QUEUE: usize = 1024;

/// A connection's key: the engine's address, the peer's.
type Tuple = (SocketAddr, SocketAddr);

/// What the workers share: who owns which 4-tuple, and their inboxes.
#[derive(Debug)]
struct ShardTable {
    owners: RwLock<HashMap<Tuple, usize>>,
    inboxes: Vec<Inbox>,
}

/// The way into one worker.
#[derive(Debug)]
struct Inbox {
    tx: SyncSender<Handoff>,
    notify: Arc<Notify>,
}

/// A packet handed from one worker to another.
#[derive(Debug)]
pub(crate) enum Handoff {
    /// A packet of a 4-tuple the receiving worker owns: straight to its
    /// engine.
    Owned {
        /// The IP packet.
        packet: Vec<u8>,
        /// The kernel vouched for its checksums.
        vouched: bool,
    },
    /// Test hook ([`ShardedHost::misroute_every`]): a packet read by
    /// another worker, handled as if the receiving worker had read it.
    Misrouted {
        /// The IP packet.
        packet: Vec<u8>,
        /// The kernel vouched for its checksums.
        vouched: bool,
    },
}

/// Outcome of handing a packet over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandedOver {
    /// In the other worker's inbox.
    Sent,
    /// Its inbox is full: dropped.
    Full,
    /// The worker has ended.
    Gone,
}

/// A worker's membership of a [`ShardedHost`], kept by its [`TunHost`].
#[derive(Debug)]
pub(crate) struct Shard {
    index: usize,
    table: Arc<ShardTable>,
    inbox: Receiver<Handoff>,
    /// Scratch for the engine's 4-tuple log.
    changes: Vec<TupleChange>,
    /// Test hook: hand every n-th packet read to the next worker (0: off).
    misroute_every: u64,
    /// Packets read, for `misroute_every`.
    read: u64,
}

impl Shard {
    /// This worker's number.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// Number of workers.
    pub(crate) fn count(&self) -> usize {
        self.table.inboxes.len()
    }

    /// The notifier that wakes this worker's host.
    pub(crate) fn notify(&self) -> Arc<Notify> {
        self.table.inboxes[self.index].notify.clone()
    }

    /// The worker that owns `tuple`, if any (the misrouted path only).
    pub(crate) fn owner(&self, tuple: Tuple) -> Option<usize> {
        self.table
            .owners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&tuple)
            .copied()
    }

    /// Put `h` into worker `to`'s inbox and wake it.
    pub(crate) fn hand_over(&self, to: usize, h: Handoff) -> HandedOver {
        let inbox = &self.table.inboxes[to];
        match inbox.tx.try_send(h) {
            Ok(()) => {
                inbox.notify.notify_one();
                HandedOver::Sent
            }
            Err(TrySendError::Full(_)) => HandedOver::Full,
            Err(TrySendError::Disconnected(_)) => HandedOver::Gone,
        }
    }

    /// The next packet handed over to this worker, if any.
    pub(crate) fn try_take(&self) -> Option<Handoff> {
        // Empty, or (never while this worker runs) disconnected.
        self.inbox.try_recv().ok()
    }

    /// Whether the test hook wants the packet just read handed to the
    /// next worker.
    pub(crate) fn misroute_due(&mut self) -> bool {
        if self.misroute_every == 0 || self.count() < 2 {
            return false;
        }
        self.read += 1;
        self.read.is_multiple_of(self.misroute_every)
    }

    /// Publish the 4-tuples `endpoint` gained or lost since last time.
    /// Takes the table's write lock only when there is something to write.
    pub(crate) fn sync(&mut self, endpoint: &mut Endpoint) {
        endpoint.take_tuple_changes(&mut self.changes);
        if self.changes.is_empty() {
            return;
        }
        let mut owners = self.table.owners.write().unwrap_or_else(|p| p.into_inner());
        for c in self.changes.drain(..) {
            let key = (c.local, c.remote);
            if c.owned {
                owners.insert(key, self.index);
            } else if owners.get(&key) == Some(&self.index) {
                owners.remove(&key);
            }
        }
    }

    /// Forget every 4-tuple this worker owns (it is ending).
    fn leave(&self) {
        self.table
            .owners
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, w| *w != self.index);
    }
}

/// The 4-tuple of a TCP packet as the engine keys it, `(local, remote)` =
/// (destination, source), read from the fixed header fields only: IPv4
/// (not a later fragment) or IPv6 whose next header is TCP. `None` for
/// anything else (the caller parses fully then). Checks nothing else:
/// the engine validates the packet.
pub(crate) fn tcp_tuple(p: &[u8]) -> Option<Tuple> {
    let port =
        |at: usize| -> Option<u16> { Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?])) };
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let frag = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]) & 0x1fff;
            if ihl < 20 || *p.get(9)? != 6 || frag != 0 {
                return None;
            }
            let src: [u8; 4] = p.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = p.get(16..20)?.try_into().ok()?;
            Some((
                SocketAddr::from((dst, port(ihl + 2)?)),
                SocketAddr::from((src, port(ihl)?)),
            ))
        }
        6 => {
            if *p.get(6)? != 6 {
                return None;
            }
            let src: [u8; 16] = p.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = p.get(24..40)?.try_into().ok()?;
            Some((
                SocketAddr::from((dst, port(42)?)),
                SocketAddr::from((src, port(40)?)),
            ))
        }
        _ => None,
    }
}

/// Which worker an application closure of [`ShardedHost::start`] runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    index: usize,
    count: usize,
}

impl Worker {
    /// The worker's number (that of its TUN queue), from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Number of workers.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether the `k`-th connection the application opens belongs to this
    /// worker: connects are spread over the workers round robin.
    pub fn opens(&self, k: usize) -> bool {
        k % self.count == self.index
    }
}

/// What one worker of a [`ShardedHost`] run ended with.
#[derive(Debug, Clone)]
pub struct WorkerReport<R> {
    /// The worker's number.
    pub index: usize,
    /// What its application closure returned.
    pub result: R,
    /// Its host's packet counters.
    pub host: HostStats,
    /// Its engine's counters.
    pub endpoint: EndpointStats,
    /// CPU time the worker's thread spent driving its host (from the end
    /// of its setup to its closure's return; the writer thread, if any,
    /// not included).
    pub cpu: Duration,
}

/// The engine over the N queues of a multi-queue TUN device: N workers,
/// each a [`TunHost`] on its own queue in a thread of its own (see the
/// [module documentation](self) for how packets find their connection).
#[derive(Debug)]
pub struct ShardedHost {
    queues: Vec<TunQueue>,
    config: Config,
    tx_thread: Option<bool>,
    misroute_every: u64,
    timeout: Option<Duration>,
}

/// Setup progress of the workers: how many are ready, and the first
/// failure.
type Ready = Arc<(Mutex<(usize, Option<String>)>, Condvar)>;

/// A [`ShardedHost`] whose workers run ([`ShardedHost::start`]).
#[derive(Debug)]
pub struct ShardedRun<R> {
    threads: Vec<JoinHandle<Result<WorkerReport<R>>>>,
}

impl ShardedHost {
    /// A host for `queues` (at least one, from
    /// [`TunDevice::create_queues`](crate::TunDevice::create_queues)) whose
    /// engines use `config`, each seeded from OS entropy.
    pub fn new(queues: Vec<TunQueue>, config: Config) -> Result<ShardedHost> {
        if queues.is_empty() {
            return Err(Error::io(
                "start a sharded TUN host",
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "no TUN queue"),
            ));
        }
        Ok(ShardedHost {
            queues,
            config,
            tx_thread: None,
            misroute_every: 0,
            timeout: None,
        })
    }

    /// Number of workers (queues).
    pub fn workers(&self) -> usize {
        self.queues.len()
    }

    /// Each worker's writer thread ([`TunHost::set_tx_thread`]); `None`
    /// keeps the host's default.
    pub fn set_tx_thread(&mut self, on: Option<bool>) {
        self.tx_thread = on;
    }

    /// End a worker with an error if its closure has not returned after
    /// `timeout` (none by default).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = Some(timeout);
    }

    /// For tests of the misrouted path: every `n`-th packet a worker reads
    /// is handed to the next worker, which handles it as if it had read it
    /// itself (so it is forwarded back to its owner). 0 turns it off.
    pub fn misroute_every(&mut self, n: u64) {
        self.misroute_every = n;
    }

    /// Start the workers. In each worker's thread `setup` gets the
    /// [`Worker`] and its [`TunHost`] (to listen, connect, set loss...)
    /// and returns the application closure that worker's
    /// [`TunHost::drive`] runs. Returns once every worker has set up (so
    /// every listener is in place), or with the first setup error.
    pub fn start<R, A, F>(self, setup: A) -> Result<ShardedRun<R>>
    where
        A: Fn(Worker, &mut TunHost) -> Result<F> + Send + Sync + 'static,
        F: FnMut(&mut Step<'_>) -> ControlFlow<R>,
        R: Send + 'static,
    {
        let count = self.queues.len();
        let mut receivers = Vec::with_capacity(count);
        let mut inboxes = Vec::with_capacity(count);
        for _ in 0..count {
            let (tx, rx) = mpsc::sync_channel(HANDOFF_QUEUE);
            receivers.push(rx);
            inboxes.push(Inbox {
                tx,
                notify: Arc::new(Notify::new()),
            });
        }
        let table = Arc::new(ShardTable {
            owners: RwLock::new(HashMap::new()),
            inboxes,
        });
        let setup = Arc::new(setup);
        let ready: Ready = Arc::new((Mutex::new((0, None)), Condvar::new()));
        let mut threads = Vec::with_capacity(count);
        for (queue, inbox) in self.queues.into_iter().zip(receivers) {
            let index = queue.index();
            let shard = (count > 1).then(|| Shard {
                index,
                table: table.clone(),
                inbox,
                changes: Vec::new(),
                misroute_every: self.misroute_every,
                read: 0,
            });
            let worker = Worker { index, count };
            let (config, setup, worker_ready) = (self.config.clone(), setup.clone(), ready.clone());
            let (tx_thread, timeout) = (self.tx_thread, self.timeout);
            let name = format!("hw-shard-{index}");
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let run = WorkerRun {
                        worker,
                        queue,
                        shard,
                        config,
                        tx_thread,
                        timeout,
                        ready: worker_ready.clone(),
                    };
                    let r = run.run(&*setup);
                    if let Err(e) = &r {
                        // Unblock whoever waits for the setup.
                        let (m, cv) = &*worker_ready;
                        let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
                        g.1.get_or_insert_with(|| format!("worker {index}: {e}"));
                        cv.notify_all();
                    }
                    r
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    // The workers already started wait for this one: let
                    // them see the failure and end.
                    let (m, cv) = &*ready;
                    m.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .1
                        .get_or_insert_with(|| format!("start thread {name}: {e}"));
                    cv.notify_all();
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(Error::io(format!("start thread {name}"), e));
                }
            }
        }
        let (m, cv) = &*ready;
        let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
        while g.0 < count && g.1.is_none() {
            g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(e) = g.1.clone() {
            drop(g);
            // The others see the failure and end.
            for t in threads {
                let _ = t.join();
            }
            return Err(Error::io(
                "set up a sharded TUN host",
                std::io::Error::other(e),
            ));
        }
        Ok(ShardedRun { threads })
    }
}

impl<R> ShardedRun<R> {
    /// Wait for every worker's closure to return; their reports in worker
    /// order, or the first error.
    pub fn join(self) -> Result<Vec<WorkerReport<R>>> {
        let mut out = Vec::with_capacity(self.threads.len());
        let mut first_err = None;
        for (i, t) in self.threads.into_iter().enumerate() {
            match t.join() {
                Ok(Ok(r)) => out.push(r),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(p) => {
                    let message = p
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    first_err.get_or_insert(Error::ThreadPanicked {
                        thread: format!("hw-shard-{i}"),
                        message,
                    });
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// One worker's thread.
struct WorkerRun {
    worker: Worker,
    queue: TunQueue,
    shard: Option<Shard>,
    config: Config,
    tx_thread: Option<bool>,
    timeout: Option<Duration>,
    ready: Ready,
}

impl WorkerRun {
    fn run<R, A, F>(self, setup: &A) -> Result<WorkerReport<R>>
    where
        A: Fn(Worker, &mut TunHost) -> Result<F>,
        F: FnMut(&mut Step<'_>) -> ControlFlow<R>,
    {
        let index = self.worker.index;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io(format!("start the tokio runtime of worker {index}"), e))?;
        runtime.block_on(async move {
            let mut host = TunHost::new(self.queue.into_device()?, self.config)?;
            if let Some(on) = self.tx_thread {
                host.set_tx_thread(on)?;
            }
            if let Some(shard) = self.shard {
                host.join_shard(shard);
            }
            let app = setup(self.worker, &mut host)?;
            {
                let (m, cv) = &*self.ready;
                let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
                g.0 += 1;
                cv.notify_all();
                while g.0 < self.worker.count && g.1.is_none() {
                    g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                }
                if let Some(e) = &g.1 {
                    return Err(Error::io(
                        format!("worker {index} stops"),
                        std::io::Error::other(e.clone()),
                    ));
                }
            }
            let cpu_at_start = sys::cpu_time(libc::CLOCK_THREAD_CPUTIME_ID);
            let result = match self.timeout {
                None => host.drive(app).await,
                Some(t) => tokio::time::timeout(t, host.drive(app))
                    .await
                    .map_err(|_| {
                        Error::io(
                            format!("drive worker {index}"),
                            std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                format!("not done after {t:?}"),
                            ),
                        )
                    })?,
            };
            host.leave_shard();
            Ok(WorkerReport {
                index,
                result: result?,
                host: host.stats(),
                endpoint: host.endpoint().stats(),
                cpu: sys::cpu_time(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu_at_start),
            })
        })
    }
}

impl TunHost {
    /// Make this host a worker of a [`ShardedHost`]: woken through the
    /// shard's notifier, publishing its engine's 4-tuples, handing
    /// packets of other workers' connections over to them, and choosing
    /// ephemeral ports from its own share of the range.
    pub(crate) fn join_shard(&mut self, shard: Shard) {
        self.set_notify(shard.notify());
        let endpoint = self.endpoint_mut();
        endpoint.track_tuples(true);
        let share = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
        endpoint.set_ephemeral_share(share(shard.index()), share(shard.count()));
        self.set_shard(Some(shard));
    }

    /// Leave the shard: its connections' packets are no longer forwarded
    /// here.
    pub(crate) fn leave_shard(&mut self) {
        if let Some(s) = self.set_shard(None) {
            s.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hollywood_wire::{SeqNumber, TcpFlags, TcpRepr};

    fn packet(src: &str, dst: &str) -> Vec<u8> {
        let tcp = TcpRepr {
            seq: SeqNumber(7),
            flags: TcpFlags::SYN,
            ..TcpRepr::default()
        };
        hollywood_wire::build_tcp_ip(src.parse().unwrap(), dst.parse().unwrap(), &tcp, b"hi")
    }

    #[test]
    fn the_tuple_from_fixed_fields_is_the_parsers() {
        for (src, dst) in [
            ("10.0.0.9:40000", "10.0.0.2:80"),
            ("[fd00::9]:40001", "[fd00::2]:443"),
        ] {
            let p = packet(src, dst);
            let seg = hollywood_wire::parse_tcp_ip(&p).unwrap();
            assert_eq!(tcp_tuple(&p), Some((seg.dst, seg.src)));
            assert_eq!(
                tcp_tuple(&p),
                Some((dst.parse().unwrap(), src.parse().unwrap()))
            );
            // Cut short anywhere: never a panic.
            for n in 0..p.len() {
                let _ = tcp_tuple(&p[..n]);
            }
        }
        let mut udp = packet("10.0.0.9:1", "10.0.0.2:2");
        udp[9] = 17;
        assert_eq!(tcp_tuple(&udp), None);
        let mut later_fragment = packet("10.0.0.9:1", "10.0.0.2:2");
        later_fragment[7] = 1;
        assert_eq!(tcp_tuple(&later_fragment), None);
        assert_eq!(tcp_tuple(&[]), None);
    }
}
