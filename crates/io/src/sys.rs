//! The raw system calls this crate and the lab need, and the only module
//! of the workspace's Rust crates (besides the C library, `hollywood-taps-c`,
//! whose `extern "C"` functions take C pointers) allowed to use `unsafe`.
//!
//! Why `unsafe` is needed here: creating a TUN interface takes the
//! `TUNSETIFF` ioctl on a `/dev/net/tun` descriptor, moving a thread into a
//! network namespace takes `setns(2)`, asking for the effective user id
//! takes `geteuid(2)`, making a TUN device persistent takes
//! `TUNSETPERSIST`, the host-mode state lock takes `flock(2)`, a
//! thread's CPU time for measurements takes `clock_gettime(2)`, and
//! tokio's `AsyncFd::register_with_interest` is `unsafe` because it
//! cannot check that the descriptor stays open. The
//! lab's link emulator (`hollywood_lab::netem`) waits with `ppoll(2)`
//! (nanosecond timeouts), sets its timer slack (`prctl`), real-time
//! priority (`sched_setscheduler`) and CPU affinity; the soak harness reads
//! the allocator's statistics (`mallinfo2`). The standard library wraps
//! none of these, and `libc` exposes them only as `unsafe extern`
//! functions. Each call below passes either a descriptor owned by a live
//! Rust object or a pointer to a fully initialised local of the exact C
//! layout, so no memory is shared with the kernel beyond the duration of
//! the call. Keeping them in one module keeps every other module (and
//! every other crate) under `#![deny(unsafe_code)]`.
//!
//! Everything else (reading and writing packets, closing descriptors) goes
//! through safe `std` types (`File`, `OwnedFd`).
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;
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
    open_tun_with(name, vnet_hdr, false)
}

/// [`open_tun`], and with `multi_queue` with `IFF_MULTI_QUEUE` too: each
/// call with the same name (and the same flags) attaches one more queue
/// to the interface, with a descriptor of its own.
pub(crate) fn open_tun_with(
    name: &str,
    vnet_hdr: bool,
    multi_queue: bool,
) -> io::Result<(OwnedFd, String)> {
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
    if multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
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
    euid() == 0
}

/// Raise this process's open-file limit (`RLIMIT_NOFILE`) to `want`
/// (root may raise the hard limit too), or else to the hard limit;
/// returns the limit now in force (experiments holding thousands of
/// sockets).
pub fn raise_nofile_limit(want: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass a valid pointer to.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    let want: libc::rlim_t = want;
    if r.rlim_cur >= want {
        return r.rlim_cur;
    }
    for (cur, max) in [(want, r.rlim_max.max(want)), (r.rlim_max, r.rlim_max)] {
        let new = libc::rlimit {
            rlim_cur: cur,
            rlim_max: max,
        };
        // SAFETY: setrlimit reads the struct we pass a valid pointer to.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            return cur;
        }
    }
    r.rlim_cur
}

/// Give the allocator's free heap pages back to the system (glibc
/// `malloc_trim`), so that the resident set size measures what is in use
/// (memory experiments sample it).
pub fn trim_heap() {
    // SAFETY: malloc_trim takes a size and touches only the allocator's
    // own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no arguments, cannot fail and touches no memory.
    unsafe { libc::geteuid() }
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

/// Make the TUN device behind `fd` persistent (`TUNSETPERSIST` 1): it
/// outlives the descriptor and stays until deleted (`ip link del`), so a
/// standing host-mode instance (`crate::hostmode`) can create it and an
/// application attach to it later by name.
pub(crate) fn set_tun_persist(fd: &impl AsRawFd, persist: bool) -> io::Result<()> {
    // SAFETY: `fd` is an open TUN descriptor kept alive by the borrow;
    // TUNSETPERSIST takes its argument by value (0 or 1), no memory is
    // passed to the kernel.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETPERSIST as _,
            libc::c_ulong::from(persist),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Give the TUN device behind `fd` an owner (`TUNSETOWNER`): that user
/// may then attach to the persistent device (`TUNSETIFF`) without
/// CAP_NET_ADMIN, so an unprivileged service can use a standing host-mode
/// instance.
pub(crate) fn set_tun_owner(fd: &impl AsRawFd, uid: u32) -> io::Result<()> {
    // SAFETY: `fd` is an open TUN descriptor kept alive by the borrow;
    // TUNSETOWNER takes the uid by value, no memory is passed.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOWNER as _,
            libc::c_ulong::from(uid),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Take a `flock(2)` on `file`, waiting for it: exclusive, or shared
/// (`exclusive` false; a file open for reading is enough). The lock is
/// released when the file (its open file description) is closed.
pub(crate) fn flock(file: &File, exclusive: bool) -> io::Result<()> {
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    loop {
        // SAFETY: plain syscall on a descriptor kept open by the borrow of
        // `file`; no pointers are passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Wait until `fd` is readable or `timeout` passed (`ppoll`, nanosecond
/// timeout on the kernel's high-resolution timers: a socket's
/// `SO_RCVTIMEO` rounds up to scheduler ticks, too coarse for pacing).
/// Returns whether it is readable. `EINTR` counts as a timeout.
pub(crate) fn wait_readable(fd: &impl AsRawFd, timeout: Duration) -> io::Result<bool> {
    let mut fds = [pollfd(fd.as_raw_fd())];
    poll(&mut fds, Some(timeout))?;
    Ok(readable(&fds[0]))
}

/// A `pollfd` waiting for `fd` to become readable.
pub fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Whether `poll` found `p` readable (or in error or hung up, which a read
/// reports).
pub fn readable(p: &libc::pollfd) -> bool {
    p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0
}

/// Wait until a descriptor is readable or `timeout` passes (`None` =
/// forever): `ppoll(2)`, whose nanosecond timeout runs on the kernel's
/// high-resolution timers. An interrupted wait counts as a timeout (every
/// `revents` is cleared).
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<()> {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live mutable slice of initialised pollfds whose
    // length we pass; `ts_ptr` is null or points to a live local; a null
    // signal mask leaves the mask unchanged.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        for f in fds.iter_mut() {
            f.revents = 0;
        }
    }
    Ok(())
}

/// Give the calling thread real-time priority `prio` (SCHED_FIFO), so
/// that busy iperf3 processes on a small machine cannot delay its
/// wake-ups by whole scheduler ticks. The thread sleeps in `ppoll` and
/// the kernel's RT throttling still reserves 5% of each CPU for others.
pub fn set_realtime(prio: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a live, initialised local; pid 0 = this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Restrict the calling thread to the CPU it runs on now.
pub fn pin_to_current_cpu() -> io::Result<()> {
    // SAFETY: no arguments; returns the CPU number or -1.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `cpu_set_t` is plain data, all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is a valid CPU number (from sched_getcpu), below
    // CPU_SETSIZE; `set` is a live local.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: `set` is a live, initialised cpu_set_t of the size given;
    // pid 0 = this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Set the calling thread's timer slack (how late the kernel may fire
/// its timers to batch wake-ups).
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument, no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Heap in use, KiB (glibc's `mallinfo2`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn heap_kib() -> i64 {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks / 1024) as i64
}

/// Heap in use, KiB: unknown (0) without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn heap_kib() -> i64 {
    0
}

/// Restore the default action of SIGPIPE (terminate quietly), as a Unix
/// command-line tool has it: Rust ignores SIGPIPE, so `hollywood … | head`
/// would otherwise panic on the first write after `head` exits. Call it
/// first in a binary's `main`, before any thread starts; never in a
/// library (it changes the process's disposition).
pub fn default_sigpipe() {
    // SAFETY: signal() with SIG_DFL installs no handler code; it only
    // resets the disposition of one signal.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A new epoll instance (close-on-exec), readable whenever one of the
/// descriptors added with [`epoll_add_readable`] is: one descriptor to
/// wait on for several sockets.
pub(crate) fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; the returned descriptor is checked and then
    // owned by exactly one `OwnedFd`.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watch `fd` for readability (level-triggered) on the epoll instance
/// `epoll`, with `token` as its event data.
pub(crate) fn epoll_add_readable(epoll: &impl AsRawFd, fd: RawFd, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `ev` is a live local the kernel only reads; both
    // descriptors are open (the caller owns them).
    let rc = unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPU time consumed so far by the calling thread
/// (`libc::CLOCK_THREAD_CPUTIME_ID`) or the whole process
/// (`libc::CLOCK_PROCESS_CPUTIME_ID`), user and system; zero if the clock
/// cannot be read. For measurements of where the time goes.
pub fn cpu_time(clock: libc::clockid_t) -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the duration of the
    // call; the kernel writes only within it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}
