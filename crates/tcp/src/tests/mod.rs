//! Behaviour tests over the [`Pair`](crate::pair::Pair) harness, grouped by
//! topic. Connection-level unit tests (by state) live in `conn/tests.rs`.

mod close;
mod deploy;
mod endpoint;
mod flow;
mod handshake;
mod hollywood;
mod memory;
mod prop;
mod rack;
mod recovery;
mod rfc5961;
mod timers;
mod transfer;

use crate::conn::Event;
use crate::endpoint::{ConnHandle, EndpointEvent};
use crate::time::Instant;
use hollywood_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

/// Time of the first `event` for `h` in an event log.
pub(crate) fn event_time(
    log: &[(Instant, EndpointEvent)],
    h: ConnHandle,
    event: Event,
) -> Option<Instant> {
    log.iter().find_map(|(t, e)| match e {
        EndpointEvent::Conn { handle, event: ev } if *handle == h && *ev == event => Some(*t),
        _ => None,
    })
}

/// Whether `h` reported `event`.
pub(crate) fn has_event(log: &[(Instant, EndpointEvent)], h: ConnHandle, event: Event) -> bool {
    event_time(log, h, event).is_some()
}

/// A hand-made segment without options: the ACK flag (and field) is set
/// when `ack` is given.
pub(crate) fn segment(
    (src_port, dst_port): (u16, u16),
    seq: SeqNumber,
    ack: Option<SeqNumber>,
    flags: TcpFlags,
    window: u16,
) -> TcpRepr {
    TcpRepr {
        src_port,
        dst_port,
        seq,
        ack: ack.unwrap_or(SeqNumber(0)),
        flags: if ack.is_some() {
            flags | TcpFlags::ACK
        } else {
            flags
        },
        window,
        urgent: 0,
        options: TcpOptions::default(),
    }
}
