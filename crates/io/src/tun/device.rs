//! A Linux TUN device read and written with tokio.

use crate::error::{Error, Result};
use crate::netns::{check_if_name, NetNs};
use crate::sys;
use crate::tun::offload::{self, OffloadError, VnetHdr, VNET_HDR_LEN};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::io::unix::AsyncFd;

/// How to create and configure a TUN interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunConfig {
    /// Interface name (at most 15 bytes); a `%d` template such as
    /// `"hwtun%d"` lets the kernel pick the number.
    pub name: String,
    /// Interface MTU: the largest IP packet either side may send.
    pub mtu: u32,
    /// Addresses of the *kernel's* side of the interface, with prefix
    /// length. Each adds a connected route out of the TUN device, so every
    /// other address in the prefix (e.g. the engine's) is reached through it.
    pub addrs: Vec<(IpAddr, u8)>,
    /// Open the device with `IFF_VNET_HDR` and enable the checksum and TCP
    /// segmentation offloads (`TUNSETOFFLOAD` with `TUN_F_CSUM |
    /// TUN_F_TSO4 | TUN_F_TSO6`; see [`crate::tun::offload`]). The kernel may
    /// then hand over TCP super-packets of up to 64 KB and packets with
    /// partial checksums, and accepts super-packets that it segments
    /// itself: [`TunHost`](crate::TunHost) merges the engine's segments
    /// into them, which cuts system calls per byte by up to 45×.
    ///
    /// [`TunDevice::recv`] and [`TunDevice::send`] hide the offloads (they
    /// still carry ordinary, checksummed IP packets), but anyone reading
    /// the raw descriptor sees the 10-byte `virtio_net_hdr` before every
    /// packet, so this is off by default. Creation fails if the kernel
    /// refuses the offloads.
    pub offload: bool,
}

impl Default for TunConfig {
    fn default() -> Self {
        TunConfig {
            name: "hwtun%d".to_owned(),
            mtu: 1500,
            addrs: Vec::new(),
            offload: false,
        }
    }
}

/// The `TUN_F_*` offloads enabled by [`TunConfig::offload`].
const OFFLOADS: libc::c_uint = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;

/// Largest frame (header + packet) read from an offloading device.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 65_535;

/// Receive state of an offloading device used through the plain
/// [`TunDevice::recv`] API: a frame buffer and the segments of a split
/// super-packet not returned yet.
#[derive(Debug, Default)]
struct PlainRx {
    frame: Vec<u8>,
    scratch: Vec<u8>,
    pending: VecDeque<Vec<u8>>,
}

/// A TUN interface opened with `IFF_TUN | IFF_NO_PI`: every
/// [`recv`](TunDevice::recv) yields one whole IPv4 or IPv6 packet that the
/// kernel routed into the interface, and every [`send`](TunDevice::send)
/// hands one whole packet to the kernel as if it had arrived on the
/// interface.
///
/// With [`TunConfig::offload`] the descriptor also carries a
/// `virtio_net_hdr` per packet; [`recv_frame`](TunDevice::recv_frame) and
/// [`send_frame`](TunDevice::send_frame) expose those frames (super-packets
/// and partial checksums included), while `recv`/`send` keep working with
/// ordinary packets.
///
/// The interface exists as long as this value (it is not persistent) and
/// lives in the namespace it was created in.
#[derive(Debug)]
pub struct TunDevice {
    fd: AsyncFd<File>,
    name: String,
    mtu: u32,
    offload: bool,
    plain_rx: Mutex<PlainRx>,
    offload_errors: AtomicU64,
}

impl TunDevice {
    /// Create the interface inside `ns`, set its MTU and addresses and bring
    /// it up. Must be called within a tokio runtime (the descriptor is
    /// registered with the runtime's reactor).
    pub fn create(ns: &NetNs, config: &TunConfig) -> Result<TunDevice> {
        check_if_name(&config.name)?;
        let requested = config.name.clone();
        let offload = config.offload;
        let (fd, name) = ns
            .run(move || sys::open_tun(&requested, offload))?
            .map_err(|e| {
                Error::io(
                    format!(
                        "create TUN device {:?} (needs root and /dev/net/tun)",
                        config.name
                    ),
                    e,
                )
            })?;
        let dev = TunDevice::from_fd(fd, name, config.mtu, offload)?;
        ns.set_mtu(&dev.name, config.mtu)?;
        for &(addr, prefix) in &config.addrs {
            ns.add_addr(&dev.name, addr, prefix)?;
        }
        ns.link_up(&dev.name)?;
        // The writer may be a task that moves between threads.
        ns.steer_by_flow(&dev.name)?;
        Ok(dev)
    }

    /// Attach to an existing TUN device `name` of the calling thread's
    /// namespace without configuring it: the persistent device of a
    /// standing host-mode instance ([`crate::hostmode`]), whose MTU and
    /// addresses `hollywood host up` set. `offload` as in
    /// [`TunConfig::offload`] (chosen by whoever attaches). Fails if there
    /// is no such device (instead of creating an unconfigured one) or it is
    /// already attached. Must be called within a tokio runtime.
    pub fn attach(name: &str, offload: bool) -> Result<TunDevice> {
        check_if_name(name)?;
        let ns = NetNs::current();
        let link = ns.ip(&["-j", "link", "show", "dev", name])?;
        let mtu = crate::hostmode::iproute::parse_link_mtu(&link)?.ok_or_else(|| {
            Error::HostMode(format!("`ip -j link show dev {name}` reports no MTU"))
        })?;
        let (fd, name) = sys::open_tun(name, offload)
            .map_err(|e| Error::io(format!("attach to TUN device {name:?}"), e))?;
        TunDevice::from_fd(fd, name, mtu, offload)
    }

    /// Create the interface inside `ns` with `IFF_MULTI_QUEUE` and
    /// `queues` queues (1..=256), each a descriptor of its own opened with
    /// the same flags (`IFF_VNET_HDR` too with [`TunConfig::offload`]) and
    /// given the same offloads (`TUNSETOFFLOAD`), then configure it as
    /// [`TunDevice::create`] does (MTU, addresses, up, flow steering on
    /// every receive queue).
    ///
    /// The kernel picks the queue of each packet it routes into the
    /// interface (`tun_select_queue` in drivers/net/tun.c): the queue
    /// that last *wrote* a packet of the same flow, if that was less than
    /// about 3 s ago, else the flow's hash scaled to the number of queues
    /// (see [`crate::tun::shard`]). The queues are not registered with any
    /// runtime yet ([`TunQueue::into_device`]), so each can move to the
    /// thread that drives it.
    pub fn create_queues(ns: &NetNs, config: &TunConfig, queues: usize) -> Result<Vec<TunQueue>> {
        check_if_name(&config.name)?;
        if !(1..=MAX_QUEUES).contains(&queues) {
            return Err(Error::io(
                format!("create TUN device {:?}", config.name),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a TUN device has 1 to {MAX_QUEUES} queues, not {queues}"),
                ),
            ));
        }
        let requested = config.name.clone();
        let offload = config.offload;
        let fds = ns
            .run(move || -> io::Result<Vec<(OwnedFd, String)>> {
                let first = sys::open_tun_with(&requested, offload, true)?;
                let name = first.1.clone();
                let mut fds = vec![first];
                for _ in 1..queues {
                    fds.push(sys::open_tun_with(&name, offload, true)?);
                }
                Ok(fds)
            })?
            .map_err(|e| {
                Error::io(
                    format!(
                        "create TUN device {:?} with {queues} queues (needs root and /dev/net/tun)",
                        config.name
                    ),
                    e,
                )
            })?;
        let name = fds[0].1.clone();
        let mut out = Vec::with_capacity(queues);
        for (index, (fd, _)) in fds.into_iter().enumerate() {
            set_offloads(&fd, &name, offload)?;
            out.push(TunQueue {
                fd,
                name: name.clone(),
                mtu: config.mtu,
                offload,
                index,
            });
        }
        ns.set_mtu(&name, config.mtu)?;
        for &(addr, prefix) in &config.addrs {
            ns.add_addr(&name, addr, prefix)?;
        }
        ns.link_up(&name)?;
        ns.steer_by_flow(&name)?;
        Ok(out)
    }

    /// An opened device's descriptor, offloads enabled if asked, registered
    /// with the runtime's reactor (both `create` and `attach`).
    fn from_fd(fd: OwnedFd, name: String, mtu: u32, offload: bool) -> Result<TunDevice> {
        set_offloads(&fd, &name, offload)?;
        TunDevice::register(fd, name, mtu, offload)
    }

    /// Register a configured descriptor with the runtime's reactor.
    fn register(fd: OwnedFd, name: String, mtu: u32, offload: bool) -> Result<TunDevice> {
        let fd = sys::register_async(File::from(fd))
            .map_err(|e| Error::io(format!("register TUN device {name} with tokio"), e))?;
        Ok(TunDevice {
            fd,
            name,
            mtu,
            offload,
            plain_rx: Mutex::new(PlainRx::default()),
            offload_errors: AtomicU64::new(0),
        })
    }

    /// A second descriptor of the device (`dup(2)`; same open file, so
    /// non-blocking too), for a thread that writes without tokio. The
    /// device lives as long as any of its descriptors.
    pub(crate) fn try_clone_file(&self) -> io::Result<File> {
        self.fd.get_ref().try_clone()
    }

    /// The interface name the kernel assigned.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configured MTU: no packet longer than this should be sent.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Whether the device was opened with offloads ([`TunConfig::offload`]):
    /// the descriptor carries `virtio_net_hdr` frames.
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// Received frames that [`TunDevice::recv`] dropped because their
    /// offload request could not be carried out (an unsupported GSO type,
    /// checksum offsets outside the packet...). Always 0 without offloads.
    pub fn offload_errors(&self) -> u64 {
        self.offload_errors.load(Ordering::Relaxed)
    }

    /// Wait until the descriptor is readable and run one non-blocking read.
    async fn read_with(
        &self,
        mut read: impl FnMut(&File) -> io::Result<usize>,
    ) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| read(fd.get_ref())) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Wait for and read one packet into `buf`, returning its length. A
    /// packet longer than `buf` is truncated, so pass at least
    /// [`mtu`](TunDevice::mtu) bytes.
    ///
    /// On an offloading device the packet is always an ordinary one:
    /// super-packets are split into MSS-sized segments (returned by this
    /// and the following calls) and partial checksums completed.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.offload {
            return self.read_with(|mut file: &File| file.read(buf)).await;
        }
        loop {
            if let Some(n) = self.pop_pending(buf) {
                return Ok(n);
            }
            // `usize::MAX` stands for "the frame was dropped": read again.
            const DROPPED: usize = usize::MAX;
            let got = self
                .read_with(|file| self.read_plain(file, buf).map(|n| n.unwrap_or(DROPPED)))
                .await?;
            if got != DROPPED {
                return Ok(got);
            }
        }
    }

    /// Read one packet if one is queued; `Err(WouldBlock)` otherwise.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut file: &File = self.fd.get_ref();
        if !self.offload {
            return file.read(buf);
        }
        loop {
            if let Some(n) = self.pop_pending(buf) {
                return Ok(n);
            }
            if let Some(n) = self.read_plain(file, buf)? {
                return Ok(n);
            }
        }
    }

    fn pop_pending(&self, buf: &mut [u8]) -> Option<usize> {
        let mut rx = self.plain_rx.lock().unwrap_or_else(|p| p.into_inner());
        let p = rx.pending.pop_front()?;
        let n = p.len().min(buf.len());
        buf[..n].copy_from_slice(&p[..n]);
        Some(n)
    }

    /// One read of an offloading device for the plain API: the first
    /// packet it yields is copied to `buf`, the rest queued. `Ok(None)`
    /// when the frame produced nothing (it was dropped and counted).
    fn read_plain(&self, mut file: &File, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let mut guard = self.plain_rx.lock().unwrap_or_else(|p| p.into_inner());
        let rx = &mut *guard;
        rx.frame.resize(MAX_FRAME, 0);
        let n = file.read(&mut rx.frame)?;
        let mut first = None;
        let pending = &mut rx.pending;
        let result = split_frame(&mut rx.frame[..n], &mut rx.scratch, |p| {
            if first.is_none() {
                let k = p.len().min(buf.len());
                buf[..k].copy_from_slice(&p[..k]);
                first = Some(k);
            } else {
                pending.push_back(p.to_vec());
            }
        });
        if result.is_err() {
            self.offload_errors.fetch_add(1, Ordering::Relaxed);
        }
        Ok(first)
    }

    /// Write one whole IP packet, waiting if the device is not writable.
    /// On an offloading device it goes out with an all-zero
    /// `virtio_net_hdr` (no offload requested), so it must carry valid
    /// checksums as usual.
    pub async fn send(&self, packet: &[u8]) -> io::Result<()> {
        if !self.offload {
            return self.write_with(packet.len(), |mut f| f.write(packet)).await;
        }
        let hdr = [0u8; VNET_HDR_LEN];
        let iov = [IoSlice::new(&hdr), IoSlice::new(packet)];
        self.write_with(VNET_HDR_LEN + packet.len(), |mut f| f.write_vectored(&iov))
            .await
    }

    /// Write one whole IP packet without waiting: `Err(WouldBlock)` (or
    /// `ENOBUFS`) if the device cannot take it now. For callers that drive
    /// the device from their own thread ([`crate::apphost`]).
    pub fn try_send(&self, packet: &[u8]) -> io::Result<()> {
        let mut file: &File = self.fd.get_ref();
        let n = if self.offload {
            let hdr = [0u8; VNET_HDR_LEN];
            let iov = [IoSlice::new(&hdr), IoSlice::new(packet)];
            file.write_vectored(&iov)?.saturating_sub(VNET_HDR_LEN)
        } else {
            file.write(packet)?
        };
        if n == packet.len() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("TUN device took {n} of {} bytes of a packet", packet.len()),
            ))
        }
    }

    /// Wait for and read one raw frame of an offloading device into
    /// `frame`: a `virtio_net_hdr` ([`crate::tun::offload::VnetHdr`]) and the
    /// packet, possibly a super-packet or with a partial checksum (see
    /// [`crate::tun::offload::rx_packet`]). Pass [`MAX_FRAME`] bytes. Without
    /// offloads this reads a bare packet, like [`TunDevice::recv`].
    pub async fn recv_frame(&self, frame: &mut [u8]) -> io::Result<usize> {
        self.read_with(|mut file: &File| file.read(frame)).await
    }

    /// [`TunDevice::recv_frame`] if a frame is queued; `Err(WouldBlock)`
    /// otherwise.
    pub fn try_recv_frame(&self, frame: &mut [u8]) -> io::Result<usize> {
        let mut file: &File = self.fd.get_ref();
        file.read(frame)
    }

    /// Write one raw frame (`virtio_net_hdr` + packet) to an offloading
    /// device, e.g. a super-packet from [`crate::tun::offload::Coalescer`].
    /// Without offloads `frame` must be a bare packet.
    pub async fn send_frame(&self, frame: &[u8]) -> io::Result<()> {
        self.write_with(frame.len(), |mut f| f.write(frame)).await
    }

    async fn write_with(
        &self,
        len: usize,
        mut write: impl FnMut(&File) -> io::Result<usize>,
    ) -> io::Result<()> {
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| write(fd.get_ref())) {
                Ok(Ok(n)) if n == len => return Ok(()),
                Ok(Ok(n)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("TUN device took {n} of {len} bytes of a packet"),
                    ))
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Most queues of a multi-queue TUN device (`MAX_TAP_QUEUES` of
/// include/linux/if_tap.h, which drivers/net/tun.c enforces).
pub const MAX_QUEUES: usize = 256;

/// Enable the offloads of [`TunConfig::offload`] on a TUN descriptor, or
/// none without: a persistent device keeps the offloads of whoever
/// attached before, and every queue of a multi-queue device must agree.
fn set_offloads(fd: &OwnedFd, name: &str, offload: bool) -> Result<()> {
    let offloads = if offload { OFFLOADS } else { 0 };
    sys::set_tun_offload(fd, offloads).map_err(|e| {
        Error::io(
            format!("set checksum/TSO offloads {offloads:#x} on TUN device {name} (TUNSETOFFLOAD)"),
            e,
        )
    })
}

/// One queue of a multi-queue TUN device ([`TunDevice::create_queues`]):
/// its own descriptor, configured but not yet registered with a tokio
/// runtime, so that it can move to the thread that will drive it. The
/// interface exists as long as any of its queues (or devices made of
/// them).
#[derive(Debug)]
pub struct TunQueue {
    fd: OwnedFd,
    name: String,
    mtu: u32,
    offload: bool,
    index: usize,
}

impl TunQueue {
    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue's number, 0 for the first.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The queue as a [`TunDevice`] registered with the current tokio
    /// runtime (call it inside the runtime that will drive it). Reads see
    /// the packets the kernel steers to this queue; writes go out through
    /// it (and steer the flow's replies to it).
    pub fn into_device(self) -> Result<TunDevice> {
        TunDevice::register(self.fd, self.name, self.mtu, self.offload)
    }
}

/// Apply the offload requests of the frame `frame` (header + packet) and
/// pass the resulting ordinary packets to `emit`. A frame too short for
/// its header is an error too.
pub(crate) fn split_frame(
    frame: &mut [u8],
    scratch: &mut Vec<u8>,
    emit: impl FnMut(&[u8]),
) -> std::result::Result<usize, OffloadError> {
    let hdr = VnetHdr::decode(frame).ok_or(OffloadError::Malformed)?;
    offload::rx_packet(&hdr, &mut frame[VNET_HDR_LEN..], scratch, emit)
}

/// [`split_frame`] for a receiver that trusts what the kernel vouches for:
/// `emit` gets each packet and whether the kernel vouches for it
/// ([`VnetHdr::vouches`]); those packets' checksums are computed only if
/// `checksums` (e.g. for a capture).
pub(crate) fn split_frame_vouched(
    frame: &mut [u8],
    scratch: &mut Vec<u8>,
    checksums: bool,
    mut emit: impl FnMut(&[u8], bool),
) -> std::result::Result<usize, OffloadError> {
    let hdr = VnetHdr::decode(frame).ok_or(OffloadError::Malformed)?;
    let vouched = hdr.vouches();
    offload::rx_packet_with(
        &hdr,
        &mut frame[VNET_HDR_LEN..],
        scratch,
        checksums || !vouched,
        |p| emit(p, vouched),
    )
}

/// The device's descriptor, for callers that drive it without tokio (the
/// lab's link emulator polls it from a dedicated thread with ns-resolution
/// timeouts). It is non-blocking; reads and writes through it see the same
/// packet queue as [`TunDevice::recv`] and [`TunDevice::send`].
impl std::os::fd::AsFd for TunDevice {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self.fd.get_ref())
    }
}

impl std::os::fd::AsRawFd for TunDevice {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(self.fd.get_ref())
    }
}
