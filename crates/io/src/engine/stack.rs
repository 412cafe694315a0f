//! [`Stack`], the handle to the task, its options and counters, and the
//! commands it sends the task.

use super::driver::run;
use super::listener::Listener;
use super::shared::Shared;
use super::stream::Stream;
use crate::error::Result;
use crate::message::StreamError;
use crate::netns::NetNs;
use crate::tun::device::{TunConfig, TunDevice};
use crate::tun::host::{HostStats, HostWaker, TunHost};
use hollywood_msg::{DeframerConfig, FramerConfig};
use hollywood_tcp::{Config, ConnHandle, EndpointStats};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Settings of the stack's application side (the engine's own settings are
/// the `hollywood_tcp::Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackOptions {
    /// A `connect` that has not reached ESTABLISHED after this long is
    /// aborted with [`StreamError::ConnectTimeout`]. Default 10 s.
    pub connect_timeout: Duration,
    /// Bytes a stream may queue in front of the engine's send buffer before
    /// `send_message`/`write_all` wait. One message larger than this is
    /// still accepted when the queue is empty. Default 64 KiB.
    pub send_queue: usize,
    /// Bytes (byte mode) or payload bytes (message mode) received and not
    /// yet read by the application before the stack stops pulling from the
    /// engine. Default 1 MiB.
    pub recv_queue: usize,
    /// Accepted connections waiting for [`Listener::accept`]; beyond it new
    /// connections are reset (counted in [`StackStats::accept_overflow`]).
    /// Default 128.
    pub backlog: usize,
    /// The message framer (first id, largest payload).
    pub framer: FramerConfig,
    /// The message deframer (bounds, ordered sub-stream waiting).
    pub deframer: DeframerConfig,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            connect_timeout: Duration::from_secs(10),
            send_queue: 64 << 10,
            recv_queue: 1 << 20,
            backlog: 128,
            framer: FramerConfig::default(),
            deframer: DeframerConfig::default(),
        }
    }
}

/// Counters of the stack's application side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Connections accepted and handed to a [`Listener`].
    pub accepted: u64,
    /// Connections reset because the listener's backlog was full or the
    /// listener was gone.
    pub accept_overflow: u64,
    /// Connections opened by `connect` that reached ESTABLISHED.
    pub connected: u64,
    /// `connect` attempts that failed (refused, timed out, cancelled).
    pub connect_failed: u64,
    /// Connections reset because the application dropped the stream with
    /// received data it never read (RFC 1122 §4.2.2.13, as Linux does).
    pub reset_unread: u64,
    /// Steps of the task (each packet batch, timer or handle wake-up).
    pub steps: u64,
    /// Connections serviced, summed over the steps: only those the engine
    /// touched, a handle poked or a timer named, so `serviced / steps`
    /// stays near the busy connections' number however many sit idle.
    pub serviced: u64,
}

/// What [`Stack::shutdown`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The host's packet counters.
    pub host: HostStats,
    /// The engine's counters.
    pub endpoint: EndpointStats,
    /// The application side's counters.
    pub stack: StackStats,
}

pub(super) type Reply<T> = oneshot::Sender<std::result::Result<T, StreamError>>;

pub(super) enum Command {
    Listen {
        local: SocketAddr,
        config: Option<Config>,
        reply: Reply<mpsc::Receiver<Arc<Shared>>>,
    },
    Unlisten(SocketAddr),
    Connect {
        local: SocketAddr,
        remote: SocketAddr,
        config: Option<Config>,
        reply: Reply<Arc<Shared>>,
    },
    Stats(oneshot::Sender<(EndpointStats, StackStats)>),
    Shutdown(oneshot::Sender<ShutdownReport>),
}

#[derive(Debug)]
pub(super) struct Control {
    /// `None` only while dropping.
    pub(super) cmds: Option<mpsc::UnboundedSender<Command>>,
    pub(super) waker: HostWaker,
    /// Connections a handle changed (queued data, read, closed, dropped):
    /// the task services these, and those the engine touched, rather than
    /// every connection on every step.
    pub(super) poked: Arc<Mutex<Vec<ConnHandle>>>,
    /// Set when the task ended with an error.
    pub(super) failure: Arc<Mutex<Option<Arc<str>>>>,
}

impl Control {
    pub(super) fn send(&self, c: Command) -> std::result::Result<(), StreamError> {
        let cmds = self.cmds.as_ref().ok_or(StreamError::StackClosed)?;
        cmds.send(c).map_err(|_| self.stopped())?;
        self.waker.wake();
        Ok(())
    }

    /// Connection `h` needs the task's attention: wake it.
    pub(super) fn poke(&self, h: ConnHandle) {
        self.poked.lock().unwrap_or_else(|p| p.into_inner()).push(h);
        self.waker.wake();
    }

    pub(super) fn stopped(&self) -> StreamError {
        match &*self.failure.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => StreamError::StackFailed(e.to_string()),
            None => StreamError::StackClosed,
        }
    }
}

impl Drop for Control {
    /// The last handle is gone: close the command channel, then wake the
    /// task so it notices (and ends once its connections are done).
    fn drop(&mut self) {
        drop(self.cmds.take());
        self.waker.wake();
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Listen { .. } => "Listen",
            Command::Unlisten(_) => "Unlisten",
            Command::Connect { .. } => "Connect",
            Command::Stats(_) => "Stats",
            Command::Shutdown(_) => "Shutdown",
        })
    }
}

/// Handle to an engine stack running in a tokio task (cheap to clone).
///
/// The task runs until [`Stack::shutdown`], or until every `Stack`,
/// [`Listener`] and [`Stream`] handle is dropped and every connection's
/// FIN has been acknowledged (so data written before dropping a stream is
/// delivered).
#[derive(Debug, Clone)]
pub struct Stack {
    ctl: Arc<Control>,
    options: StackOptions,
    config: Arc<Config>,
}

impl Stack {
    /// A stack on `tun` with engine configuration `config` (seeded from OS
    /// entropy) and default [`StackOptions`]. Must be called within a tokio
    /// runtime (the one the TUN device was created in).
    pub fn spawn(tun: TunDevice, config: Config) -> Result<Stack> {
        Ok(Stack::spawn_with(
            TunHost::new(tun, config)?,
            StackOptions::default(),
        ))
    }

    /// A stack on a prepared host (e.g. with [`TunHost::set_loss`] or
    /// [`TunHost::capture_to`] applied) with the given options.
    pub fn spawn_with(host: TunHost, options: StackOptions) -> Stack {
        let (tx, rx) = mpsc::unbounded_channel();
        let config = Arc::new(host.config_for(std::net::IpAddr::from([0, 0, 0, 0])));
        let failure = Arc::new(Mutex::new(None));
        let poked = Arc::new(Mutex::new(Vec::new()));
        let ctl = Arc::new(Control {
            cmds: Some(tx),
            waker: host.waker(),
            poked: poked.clone(),
            failure: failure.clone(),
        });
        tokio::spawn(run(host, rx, options, failure, poked));
        Stack {
            ctl,
            options,
            config,
        }
    }

    /// Create a TUN device in `ns` with `tun` and run a stack on it: the
    /// usual way to put an engine host into a lab namespace. The engine's
    /// addresses are the other addresses of `tun.addrs`' prefixes.
    pub fn spawn_in(
        ns: &NetNs,
        tun: &TunConfig,
        config: Config,
        options: StackOptions,
    ) -> Result<Stack> {
        let dev = TunDevice::create(ns, tun)?;
        Ok(Stack::spawn_with(TunHost::new(dev, config)?, options))
    }

    /// The options the stack runs with.
    pub fn options(&self) -> &StackOptions {
        &self.options
    }

    /// The configuration connections get when `connect` or `listen` is
    /// given none: the engine's, with the MSS clamped to the TUN MTU. A
    /// start for a connection's own (e.g. another congestion controller).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Listen on `local` (the engine's address) with `config`, or the
    /// stack's configuration when `None`.
    pub async fn listen(
        &self,
        local: SocketAddr,
        config: Option<Config>,
    ) -> std::result::Result<Listener, StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Listen {
            local,
            config,
            reply,
        })?;
        let accepted = rx.await.map_err(|_| self.ctl.stopped())??;
        Ok(Listener {
            local,
            accepted,
            ctl: self.ctl.clone(),
            options: self.options,
        })
    }

    /// Open a connection from `local` (the engine's address; port 0 picks
    /// an ephemeral port) to `remote` with `config`, or the stack's
    /// configuration when `None`. Completes when the connection is
    /// ESTABLISHED; fails with [`StreamError::ConnectionRefused`] on a RST,
    /// [`StreamError::ConnectTimeout`] after
    /// [`StackOptions::connect_timeout`]. Dropping the future aborts the
    /// attempt.
    pub async fn connect(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        config: Option<Config>,
    ) -> std::result::Result<Stream, StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Connect {
            local,
            remote,
            config,
            reply,
        })?;
        let shared = rx.await.map_err(|_| self.ctl.stopped())??;
        Ok(Stream::new(shared, self.ctl.clone(), self.options))
    }

    /// The engine's and the application side's counters now.
    pub async fn stats(&self) -> std::result::Result<(EndpointStats, StackStats), StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Stats(reply))?;
        rx.await.map_err(|_| self.ctl.stopped())
    }

    /// Stop the task: every open connection is aborted (RST) and its
    /// streams fail with [`StreamError::StackClosed`]; returns the final
    /// counters. Close streams first ([`Stream::close`]) to end them
    /// cleanly.
    pub async fn shutdown(&self) -> std::result::Result<ShutdownReport, StreamError> {
        let (reply, rx) = oneshot::channel();
        self.ctl.send(Command::Shutdown(reply))?;
        rx.await.map_err(|_| self.ctl.stopped())
    }
}
