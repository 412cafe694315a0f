//! A thread that writes frames to a TUN device for [`TunHost`]
//! (`TunHost::set_tx_thread`).
//!
//! Writing a packet to a TUN device is not cheap for the writer: the
//! kernel copies the frame into a freshly allocated socket buffer in the
//! `write(2)` itself (`tun_get_user`), and with offloads a 64 KB
//! super-packet is one such copy. In `hollywood lab bench throughput`
//! (engine → kernel, offloads) that system call was 45 % of the engine
//! thread, the copy alone 31 % (docs/LAB.md, "Where the time goes"), so
//! the engine thread, not the path, limited the rate. With this thread the
//! engine thread hands a frame over and goes on producing the next one
//! while the kernel copies the last, on another core.
//!
//! Order is kept: frames are written in the order they were handed over,
//! and the host writes a frame itself only when nothing is queued here
//! (so a small packet never overtakes an earlier one). A small packet
//! (an ACK, a 160-byte echo) with nothing queued is written by the host
//! itself: a hand-over costs a thread wake-up, which a latency-bound
//! exchange would pay on every packet.
//!
//! Memory is bounded: at most [`QUEUE`] frames wait (about 2 MB of
//! super-packets); a host that runs ahead blocks on the hand-over as it
//! would have on its own `write(2)`. Written buffers come back to the host
//! for reuse. A write error stops the thread and is returned by the host's
//! next write; a super-packet the kernel refuses (`EINVAL`) is written as
//! its segments, as the host does itself.

use crate::tun::offload::{self, VnetHdr, VNET_HDR_LEN};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Frames that may wait for the thread.
pub(crate) const QUEUE: usize = 32;

/// Frames up to this size are written by the host itself when nothing is
/// queued (one MTU-sized packet and its header).
pub(crate) const INLINE_MAX: usize = 2048;

#[derive(Debug, Default)]
struct Shared {
    /// Frames handed over and not yet written.
    queued: AtomicUsize,
    /// Super-packets refused by the kernel and written as segments.
    fallbacks: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<io::Error>>,
}

/// The writing thread and its queue. Dropping it lets the thread write
/// what is queued and waits for it to end (it holds a duplicate of the
/// device's descriptor, and the device lives as long as any descriptor).
#[derive(Debug)]
pub(crate) struct TxThread {
    tx: Option<SyncSender<Vec<u8>>>,
    back: Receiver<Vec<u8>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl TxThread {
    /// Start a thread writing to `file` (a duplicate of the device's
    /// non-blocking descriptor) frames of a device with `offload` on or off.
    pub(crate) fn spawn(file: File, offload: bool, name: &str) -> io::Result<TxThread> {
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUE);
        let (back_tx, back) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-tx"))
            .spawn(move || {
                let mut scratch = Vec::new();
                while let Ok(frame) = rx.recv() {
                    let r = write_frame(&file, &frame, offload, &mut scratch, &s.fallbacks);
                    s.queued.fetch_sub(1, Ordering::AcqRel);
                    if let Err(e) = r {
                        *s.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        s.failed.store(true, Ordering::Release);
                        // Nothing more is written; frames still queued are
                        // dropped with the channel (the host fails on its
                        // next write).
                        return;
                    }
                    let _ = back_tx.send(frame);
                }
            })?;
        Ok(TxThread {
            tx: Some(tx),
            back,
            shared,
            thread: Some(thread),
        })
    }

    /// Frames handed over and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Acquire)
    }

    /// Super-packets the kernel refused, written as their segments.
    pub(crate) fn fallbacks(&self) -> u64 {
        self.shared.fallbacks.load(Ordering::Relaxed)
    }

    /// The error that stopped the thread, once (later calls report that
    /// it stopped).
    pub(crate) fn check(&self) -> io::Result<()> {
        if !self.shared.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let e = self
            .shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        Err(e.unwrap_or_else(|| io::Error::other("the TUN writer thread stopped on an error")))
    }

    /// Queue `frame` for writing; blocks while [`QUEUE`] frames wait.
    pub(crate) fn send(&self, frame: Vec<u8>) -> io::Result<()> {
        self.check()?;
        let tx = self.tx.as_ref().expect("sender lives until drop");
        self.shared.queued.fetch_add(1, Ordering::AcqRel);
        if tx.send(frame).is_err() {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            self.check()?;
            return Err(io::Error::other("the TUN writer thread ended"));
        }
        Ok(())
    }

    /// A written buffer back for reuse, if one is waiting.
    pub(crate) fn reuse(&self) -> Option<Vec<u8>> {
        self.back.try_recv().ok()
    }
}

impl Drop for TxThread {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Write one frame, waiting while the device is not writable. A refused
/// super-packet is written as its segments (each with an empty header).
fn write_frame(
    file: &File,
    frame: &[u8],
    offload: bool,
    scratch: &mut Vec<u8>,
    fallbacks: &AtomicU64,
) -> io::Result<()> {
    match write_once(file, frame) {
        Err(e)
            if e.kind() == io::ErrorKind::InvalidInput && offload && frame.get(1) != Some(&0) =>
        {
            fallbacks.fetch_add(1, Ordering::Relaxed);
            for seg in split_refused(frame, scratch)? {
                write_once(file, &seg)?;
            }
            Ok(())
        }
        r => r,
    }
}

/// The segments of a super-packet frame the kernel refused, each as a
/// frame with an all-zero header and full checksums.
pub(crate) fn split_refused(frame: &[u8], scratch: &mut Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
    let hdr = VnetHdr::decode(frame)
        .ok_or_else(|| io::Error::other("a refused frame without its virtio_net_hdr"))?;
    let mut pkt = frame[VNET_HDR_LEN..].to_vec();
    let mut segments = Vec::new();
    offload::rx_packet(&hdr, &mut pkt, scratch, |seg| {
        let mut f = vec![0u8; VNET_HDR_LEN];
        f.extend_from_slice(seg);
        segments.push(f);
    })
    .map_err(io::Error::other)?;
    Ok(segments)
}

/// One `write(2)` of the whole frame, retried on `EINTR` and, after
/// waiting for `POLLOUT`, on `EAGAIN`.
fn write_once(mut file: &File, frame: &[u8]) -> io::Result<()> {
    loop {
        match file.write(frame) {
            Ok(n) if n == frame.len() => return Ok(()),
            Ok(n) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("TUN device took {n} of {} bytes of a packet", frame.len()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut fds = [libc::pollfd {
                    fd: file.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                crate::sys::poll(&mut fds, Some(Duration::from_millis(100)))?;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixDatagram;

    /// A datagram socket pair stands in for the device: one write, one
    /// datagram, so frame boundaries and order can be checked.
    fn pair() -> (File, UnixDatagram) {
        let (a, b) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (File::from(OwnedFd::from(a)), b)
    }

    #[test]
    fn frames_are_written_whole_in_order_and_their_buffers_come_back() {
        let (file, peer) = pair();
        let t = TxThread::spawn(file, false, "test").unwrap();
        let frames: Vec<Vec<u8>> = (0..200u32)
            .map(|i| {
                let len = 1 + (i as usize * 331) % 9000;
                (0..len).map(|j| (i as usize + j) as u8).collect()
            })
            .collect();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65_536];
            for _ in 0..200 {
                let n = peer.recv(&mut buf).unwrap();
                got.push(buf[..n].to_vec());
            }
            got
        });
        for f in &frames {
            t.send(f.clone()).unwrap();
        }
        assert_eq!(reader.join().unwrap(), frames);
        // Every buffer is handed back once written.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut back = 0;
        while back < frames.len() && std::time::Instant::now() < deadline {
            match t.reuse() {
                Some(_) => back += 1,
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        assert_eq!(back, frames.len());
        assert_eq!(t.queued(), 0);
        t.check().unwrap();
    }

    #[test]
    fn a_write_error_stops_the_thread_and_is_reported() {
        let (file, peer) = pair();
        drop(peer);
        let t = TxThread::spawn(file, false, "test").unwrap();
        t.send(vec![1, 2, 3]).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !t.shared.failed.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let e = t.check().unwrap_err();
        assert_ne!(e.kind(), io::ErrorKind::Other, "the write's own error: {e}");
        assert!(
            t.send(vec![5]).is_err(),
            "no write is accepted after a failure"
        );
    }
}
