//! The raw system calls this crate needs, and the only module allowed to use
//! `unsafe`.
//!
//! Why `unsafe` is needed here: creating a TUN interface takes the
//! `TUNSETIFF` ioctl on a `/dev/net/tun` descriptor, moving a thread into a
//! network namespace takes `setns(2)`, asking for the effective user id
//! takes `geteuid(2)`, and tokio's `AsyncFd::register_with_interest` is
//! `unsafe` because it cannot check that the descriptor stays open. The standard library wraps none of these, and `libc`
//! exposes them only as `unsafe extern` functions. Each call below passes
//! either a descriptor owned by a live Rust object or a pointer to a fully
//! initialised local of the exact C layout, so no memory is shared with the
//! kernel beyond the duration of the call.
//!
//! Everything else (reading and writing packets, closing descriptors) goes
//! through safe `std` types (`File`, `OwnedFd`).
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Longest interface name Linux accepts, not counting the terminating NUL
/// (`IFNAMSIZ - 1`).
pub(crate) const MAX_IFNAME_LEN: usize = libc::IFNAMSIZ - 1;

/// `struct ifreq` as used by `TUNSETIFF`: the name followed by the union,
/// of which only `ifru_flags` is read. The padding makes the struct exactly
/// as large as the kernel's (checked below) and keeps every byte initialised.
#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    pad: [u8; IFREQ_PAD],
}
const IFREQ_PAD: usize =
    std::mem::size_of::<libc::ifreq>() - libc::IFNAMSIZ - std::mem::size_of::<libc::c_short>();
const _: () = assert!(std::mem::size_of::<IfReqFlags>() == std::mem::size_of::<libc::ifreq>());

/// Open `/dev/net/tun` non-blocking and attach it to a new (or existing,
/// non-persistent) TUN interface called `name` with `IFF_TUN | IFF_NO_PI`:
/// every `read` returns one whole IP packet, every `write` injects one.
///
/// The interface is created in the network namespace of the **calling
/// thread**. Returns the descriptor and the name the kernel chose (it expands
/// a `%d` template such as `"hwtun%d"`).
///
/// With `vnet_hdr`, the interface is opened with `IFF_VNET_HDR` too: every
/// packet read or written is preceded by a 10-byte `virtio_net_hdr` (see
/// `crate::tun::offload`).
pub(crate) fn open_tun(name: &str, vnet_hdr: bool) -> io::Result<(OwnedFd, String)> {
    if name.is_empty() || name.len() > MAX_IFNAME_LEN || name.bytes().any(|b| b == 0 || b == b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?} (1..={MAX_IFNAME_LEN} bytes, no NUL or '/')"),
        ));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun")?;

    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        pad: [0; IFREQ_PAD],
    };
    for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
    if vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    req.flags = flags as libc::c_short;

    // SAFETY: `file` is an open descriptor for /dev/net/tun; `req` is a live,
    // fully initialised local with the layout and size of `struct ifreq`, and
    // the kernel only reads/writes within it during the call.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::TUNSETIFF as _,
            &mut req as *mut IfReqFlags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = req
        .name
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(libc::IFNAMSIZ);
    let actual: Vec<u8> = req.name[..len].iter().map(|&c| c as u8).collect();
    let actual = String::from_utf8_lossy(&actual).into_owned();
    Ok((OwnedFd::from(file), actual))
}

/// Move the calling thread into the network namespace referred to by
/// `ns_file` (an open `/var/run/netns/NAME` or `/proc/PID/ns/net`).
///
/// Only this thread moves; sockets and TUN devices it creates afterwards
/// belong to that namespace and keep belonging to it wherever they are used.
pub(crate) fn enter_netns(ns_file: &File) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor kept open by `ns_file` for the
    // duration of the call; no pointers are passed.
    let rc = unsafe { libc::setns(ns_file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the process runs with effective user id 0.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no arguments, cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// Register a non-blocking file with the current tokio runtime's reactor for
/// read and write readiness. Fails (instead of panicking) outside a runtime.
pub(crate) fn register_async(file: File) -> io::Result<AsyncFd<File>> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(io::Error::other("not called from within a tokio runtime"));
    }
    // SAFETY: the `File` owns its descriptor and is moved into the `AsyncFd`,
    // which owns it until drop; nothing else can close or replace it, so it
    // stays open and names the same file description for the `AsyncFd`'s
    // whole life, as `register_with_interest` requires.
    let registered =
        unsafe { AsyncFd::register_with_interest(file, Interest::READABLE | Interest::WRITABLE) };
    registered.map_err(io::Error::from)
}

/// Tell the kernel which offloads the reader of a TUN device opened with
/// `IFF_VNET_HDR` accepts (`TUNSETOFFLOAD`, a `TUN_F_*` bit set): with
/// `TUN_F_CSUM` it may hand over packets with partial checksums, with
/// `TUN_F_TSO4`/`TUN_F_TSO6` TCP super-packets. Fails with `EINVAL` if the
/// kernel does not know a bit.
pub(crate) fn set_tun_offload(fd: &impl AsRawFd, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: `fd` is an open TUN descriptor kept alive by the borrow;
    // TUNSETOFFLOAD takes its argument by value (an unsigned long), so no
    // memory is passed to the kernel.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD as _,
            libc::c_ulong::from(flags),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wait until `fd` is readable or `timeout` passed (`ppoll`, nanosecond
/// timeout on the kernel's high-resolution timers: a socket's
/// `SO_RCVTIMEO` rounds up to scheduler ticks, too coarse for pacing).
/// Returns whether it is readable. `EINTR` counts as a timeout.
pub(crate) fn wait_readable(fd: &impl AsRawFd, timeout: std::time::Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pfd` and `ts` are live locals for the call; one descriptor
    // is passed (nfds = 1), kept open by the borrow of `fd`; no signal mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}
