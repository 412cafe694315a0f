//! Memory that grows with need (issue 32 item 3): receive-window and
//! send-buffer autotuning, memory pressure, and what a connection holds.
//!
//! The storage behind the buffers always follows what is held
//! (`RecvBuffer` grows its ring and releases it when drained, `SendBuffer`
//! gives back acknowledged storage). This module decides how much a
//! connection may *offer* and *accept*:
//!
//! - **Receive window** (`Config::autotune`): Linux's dynamic right-sizing,
//!   `tcp_rcv_space_adjust` (net/ipv4/tcp_input.c). Once per receiver RTT
//!   it compares the bytes the application took in that RTT (`copied`)
//!   with the last measurement (`rcvq_space.space`); when it grew, the
//!   window clamp becomes `2·copied + 16·MSS` (twice a round's data, for
//!   losses, plus a cushion) plus twice that times the relative growth
//!   (a sender in slow start doubles each round, and the window sent now
//!   is for the next round). The clamp only grows (as `sk_rcvbuf` does),
//!   up to `Config::recv_buffer`. It starts at 64 KiB (Linux's
//!   `tcp_rmem[1]` = 128 KiB of buffer is about a 64 KiB window) and the
//!   first measurement at ten segments (`tcp_init_buffer_space`). Linux
//!   measures the receiver's RTT from timestamps (`tcp_rcv_rtt_measure_ts`);
//!   we use the connection's smoothed RTT, which a pure receiver has from
//!   its handshake.
//! - **Send buffer** (`Config::autotune`): Linux's `tcp_sndbuf_expand`:
//!   room for twice `max(initial window, cwnd)` segments, grown as the
//!   congestion window grows (never shrunk but under pressure), up to
//!   `Config::send_buffer`. Linux counts `2 · segments · truesize`; we
//!   count payload bytes, so the same number of segments.
//! - **Pressure** (set by the endpoint, `Config::memory_limit`): like
//!   Linux under `tcp_mem[1]` (`tcp_under_memory_pressure`), nothing
//!   grows, and new offers are held to four segments: the receive window
//!   clamp (`tcp_clamp_window` sets `rcv_ssthresh` to `4·advmss`) and the
//!   send buffer (`tcp_moderate_sndbuf`). Bytes already held stay; the
//!   connection keeps working at the reduced size.
//!
//! Without autotuning and without pressure the window and the send buffer
//! are `Config::recv_buffer` and `Config::send_buffer` exactly, as before.

use super::*;

/// First receive-window clamp with autotuning (bytes).
const INITIAL_RCV_SPACE: usize = 64 << 10;
/// Segments a connection under memory pressure may newly offer or queue.
const PRESSURE_SEGMENTS: usize = 4;

/// Autotuning state of one connection.
#[derive(Debug, Clone)]
pub(super) struct Space {
    /// `Config::autotune` resolved (`None` = off in this crate).
    autotune: bool,
    /// Receive-window clamp (bytes), at most `Config::recv_buffer`.
    rcv: usize,
    /// Bytes the application took in the last measured RTT
    /// (`rcvq_space.space`).
    rcvq_space: usize,
    /// Bytes consumed when the measurement began (`rcvq_space.seq`).
    rcvq_off: u64,
    /// When the measurement began (`rcvq_space.time`).
    rcvq_time: Option<Instant>,
    /// Send-buffer limit (bytes), at most `Config::send_buffer`.
    snd: usize,
    /// The endpoint is under memory pressure.
    pressure: bool,
}

impl Space {
    pub(super) fn new(config: &Config, mss: usize) -> Space {
        let autotune = config.autotune.unwrap_or(false);
        let rcv_max = config.recv_buffer.max(1);
        let rcv = if autotune {
            INITIAL_RCV_SPACE.min(rcv_max)
        } else {
            rcv_max
        };
        let snd = if autotune {
            (2 * config.initial_cwnd_segments.max(1) * mss).min(config.send_buffer)
        } else {
            config.send_buffer
        };
        Space {
            autotune,
            rcv,
            rcvq_space: rcv.min(10 * mss),
            rcvq_off: 0,
            rcvq_time: None,
            snd,
            pressure: false,
        }
    }
}

impl Connection {
    /// Largest receive window to offer now (bytes).
    pub(super) fn rcv_space(&self) -> usize {
        if self.space.pressure {
            let floor = PRESSURE_SEGMENTS * self.local_mss() as usize;
            self.space.rcv.min(floor)
        } else {
            self.space.rcv
        }
    }

    /// Most bytes the send buffer and the message queue may hold now.
    pub(super) fn send_limit(&self) -> usize {
        if self.space.pressure {
            let floor = PRESSURE_SEGMENTS * self.neg.smss.max(1);
            self.space.snd.min(floor)
        } else {
            self.space.snd
        }
    }

    /// Free room for one message frame: the free send space, or, when
    /// nothing is queued at all, the configured maximum (a message larger
    /// than the autotuned limit still goes, alone, as the I/O layer's send
    /// queue takes one oversized message when empty).
    pub(super) fn frame_room(&self) -> usize {
        if self.snd_buf.len() == 0 && self.messages.queued_bytes() == 0 {
            self.snd_buf.capacity()
        } else {
            self.send_free()
        }
    }

    /// Dynamic right-sizing of the receive window (module docs;
    /// Linux `tcp_rcv_space_adjust`). Called as in-order data arrives.
    pub(super) fn rcv_space_adjust(&mut self, now: Instant) {
        if !self.space.autotune {
            return;
        }
        let consumed = self.rcv_buf.read_off();
        let Some(start) = self.space.rcvq_time else {
            self.space.rcvq_time = Some(now);
            self.space.rcvq_off = consumed;
            return;
        };
        // Once per RTT, and only with an RTT.
        let Some(srtt) = self.rtt.srtt() else {
            return;
        };
        if now.saturating_duration_since(start) < srtt {
            return;
        }
        let copied = (consumed - self.space.rcvq_off) as usize;
        if copied > self.space.rcvq_space {
            if !self.space.pressure {
                let mss = self.local_mss() as usize;
                let base = self.space.rcvq_space.max(1);
                let mut rcvwin = 2 * copied + 16 * mss;
                let grow = rcvwin.saturating_mul(copied - base.min(copied)) / base;
                rcvwin = rcvwin.saturating_add(2 * grow);
                let cap = rcvwin.min(self.config.recv_buffer.max(1));
                if cap > self.space.rcv {
                    self.space.rcv = cap;
                    self.stats.rcv_space_grown += 1;
                }
            }
            self.space.rcvq_space = copied;
        }
        self.space.rcvq_off = consumed;
        self.space.rcvq_time = Some(now);
    }

    /// Grow the send buffer with the congestion window (Linux
    /// `tcp_sndbuf_expand`, checked on each ACK as `tcp_new_space` does),
    /// or with the live-stream window's floor when that is larger
    /// (`crate::live`; checked as the floor is recomputed): a buffer of
    /// twice the initial window would otherwise hold a live stream to it
    /// in the first round trips, whatever the floor allows.
    pub(super) fn sndbuf_expand(&mut self) {
        if !self.space.autotune || self.space.pressure {
            return;
        }
        let mss = self.neg.smss.max(1);
        let window = self.cc.cwnd().max(self.live.floor());
        let segs = (window / mss).max(self.config.initial_cwnd_segments);
        let want = (2 * segs * mss).min(self.config.send_buffer);
        if want > self.space.snd {
            self.space.snd = want;
        }
    }

    /// Whether the endpoint is under memory pressure (module docs).
    pub fn set_memory_pressure(&mut self, on: bool) {
        self.space.pressure = on;
    }

    /// Share the endpoint's pool of emptied send storages.
    pub(crate) fn set_storage_pool(&mut self, pool: crate::send_buf::StoragePool) {
        self.snd_buf.set_pool(pool);
    }

    /// Bytes this connection holds: its own structure, the receive ring,
    /// the send buffer, the Hollywood message queue and out-of-order
    /// copies, and an estimate for the retransmission queue. What
    /// `Config::memory_limit` counts.
    pub fn memory(&self) -> usize {
        std::mem::size_of::<Connection>()
            + self.rcv_buf.allocated()
            + self.snd_buf.allocated()
            + self.messages.queued_bytes()
            + if self.messages.is_made() {
                std::mem::size_of::<crate::hollywood::MessageTable>()
            } else {
                0
            }
            + self.ooo_bytes
            + self.rtxq.len() * 64
    }

    /// The receive-window clamp now (bytes): `Config::recv_buffer` without
    /// autotuning and pressure.
    pub fn receive_space(&self) -> usize {
        self.rcv_space()
    }

    /// The send-buffer limit now (bytes): `Config::send_buffer` without
    /// autotuning and pressure.
    pub fn send_space(&self) -> usize {
        self.send_limit()
    }
}
