//! [`Listener`]: a listening address of a [`Stack`](super::Stack).

use super::shared::Shared;
use super::stack::{Command, Control, StackOptions};
use super::stream::Stream;
use crate::message::StreamError;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A listening address of a [`Stack`](super::Stack). Dropping it stops listening.
#[derive(Debug)]
pub struct Listener {
    pub(super) local: SocketAddr,
    pub(super) accepted: mpsc::Receiver<Arc<Shared>>,
    pub(super) ctl: Arc<Control>,
    pub(super) options: StackOptions,
}

impl Listener {
    /// The next accepted (ESTABLISHED) connection and its peer address.
    pub async fn accept(&mut self) -> std::result::Result<(Stream, SocketAddr), StreamError> {
        match self.accepted.recv().await {
            Some(shared) => {
                let peer = shared.remote;
                Ok((Stream::new(shared, self.ctl.clone(), self.options), peer))
            }
            None => Err(self.ctl.stopped()),
        }
    }

    /// The listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Connections waiting in the queue are let go first, so the task
        // finds them orphaned when it handles the command (and closes
        // them); nothing more can be queued once the queue is closed.
        self.accepted.close();
        while self.accepted.try_recv().is_ok() {}
        // The task may be gone already; nothing to undo then.
        let _ = self.ctl.send(Command::Unlisten(self.local));
    }
}
