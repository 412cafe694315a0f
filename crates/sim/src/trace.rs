//! Observing the simulation: per-packet trace events and pcap capture.

use crate::link::{DropReason, LinkId};
use hollywood_tcp::Instant;
use std::cell::RefCell;
use std::io;
use std::rc::Rc;

/// What happened to a packet on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    /// The sending node offered the packet to the link (link ingress). Every
    /// packet gets exactly one `Sent`; link-made duplicates get
    /// [`TraceKind::Duplicated`] instead.
    Sent,
    /// The link made an extra copy (`copy = 1`) of the packet.
    Duplicated,
    /// The packet (or copy) reached the receiving node.
    Delivered,
    /// The link dropped the packet (or copy). Emitted at the time of the
    /// decision (the offer time).
    Dropped(DropReason),
}

/// One trace record. `packet` borrows the packet bytes for the duration of
/// the callback.
#[derive(Debug, Clone, Copy)]
pub struct TraceEvent<'a> {
    /// Virtual time of the event.
    pub time: Instant,
    /// The link.
    pub link: LinkId,
    /// Index of the packet on the link (0-based count of offered packets).
    pub index: u64,
    /// 0 for the original, 1 for a link-made duplicate.
    pub copy: u8,
    /// What happened.
    pub kind: TraceKind,
    /// The whole IP packet.
    pub packet: &'a [u8],
}

/// A trace callback.
pub type TraceHook = Box<dyn FnMut(&TraceEvent<'_>)>;

/// Where a pcap capture records packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapturePoint {
    /// Every packet at link ingress (each [`TraceKind::Sent`] event), at the
    /// time it was offered — including packets the link later drops, like
    /// tcpdump on the sender's interface. The default.
    #[default]
    Ingress,
    /// Every packet delivered by a link (each [`TraceKind::Delivered`]
    /// event), at its arrival time — like tcpdump on the receiver.
    Delivery,
}

/// Which packets a pcap capture records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureFilter {
    /// Where to record.
    pub point: CapturePoint,
    /// Only these links; `None` = all links.
    pub links: Option<Vec<crate::LinkId>>,
}

impl CaptureFilter {
    pub(crate) fn matches(&self, ev: &TraceEvent<'_>) -> bool {
        let kind_ok = matches!(
            (self.point, ev.kind),
            (CapturePoint::Ingress, TraceKind::Sent)
                | (CapturePoint::Delivery, TraceKind::Delivered)
        );
        kind_ok && self.links.as_ref().is_none_or(|l| l.contains(&ev.link))
    }
}

/// An in-memory, cloneable byte sink: give one clone to
/// [`Simulator::capture_pcap`](crate::Simulator::capture_pcap) and read the
/// bytes through another.
#[derive(Debug, Clone, Default)]
pub struct SharedBuffer(Rc<RefCell<Vec<u8>>>);

impl SharedBuffer {
    /// An empty buffer.
    #[must_use]
    pub fn new() -> SharedBuffer {
        SharedBuffer::default()
    }
    /// A copy of everything written so far.
    #[must_use]
    pub fn contents(&self) -> Vec<u8> {
        self.0.borrow().clone()
    }
    /// Bytes written so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }
    /// Nothing written yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }
}

impl io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
