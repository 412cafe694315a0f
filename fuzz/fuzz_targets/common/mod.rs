//! Setup shared by the engine fuzz targets (`engine_segments`,
//! `hollywood_pair`): the operand reader, the trace switch and the next
//! timer of two connections. Each target includes it with `mod common;`.

use hollywood_tcp::Instant;
use hollywood_wire::TcpRepr;
use std::collections::VecDeque;

/// Segments in flight one way: the header and its payload.
pub type Queue = VecDeque<(TcpRepr, Vec<u8>)>;

/// `FUZZ_TRACE=1` prints every step (for replaying a crash).
pub fn trace() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| std::env::var_os("FUZZ_TRACE").is_some())
}

/// Reads operands; past the end every read is zero.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    // Not every target reads 32-bit operands.
    #[allow(dead_code)]
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// The earlier of two connections' timers (`poll_timeout`), if any.
pub fn next_timer(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    [a, b].into_iter().flatten().min()
}

/// The front segment of `q`: taken off it, or with `copy` a copy left
/// queued (a duplicate on the wire).
pub fn take_front(q: &mut Queue, copy: bool) -> Option<(TcpRepr, Vec<u8>)> {
    if copy {
        q.front().cloned()
    } else {
        q.pop_front()
    }
}

/// Two engines over two in-memory queues, as each target's `World` holds
/// them.
pub trait Queues {
    /// Both queues are empty.
    fn idle(&self) -> bool;
    /// Drain every connection's output into the queues and check it.
    fn settle(&mut self);
    /// Deliver the front segment of one queue (to the client, or the
    /// receiver); with `copy`, deliver a copy and keep it queued.
    fn deliver(&mut self, to_client: bool, copy: bool);
}

/// Deliver until both queues are empty, in zero virtual time: only a
/// bounded exchange can happen there (the buffers bound data; ACKs
/// answering ACKs are rate limited), so more than `limit` rounds is an
/// ACK storm and fails.
pub fn exchange_all(w: &mut impl Queues, limit: usize) {
    let mut exchanged = 0;
    while !w.idle() {
        exchanged += 1;
        assert!(exchanged < limit, "endless exchange in zero time");
        w.deliver(true, false);
        w.deliver(false, false);
        w.settle();
    }
}
