//! The two-namespace lab shared by the root-only integration tests.
//!
//! ```text
//!  namespace A (hwt-PID-TAGa)                        namespace B (hwt-PID-TAGb)
//!  engine 10.77.1.2 / fd77:1::2
//!     │ (TunDevice fd, our process)
//!  hwtun0 10.77.1.1/24 fd77:1::1/64
//!     │ kernel of A forwards (ip_forward=1)
//!  hwt-a 10.77.2.1/24 fd77:2::1/64  ◄── veth ──►  hwt-b 10.77.2.2/24 fd77:2::2/64
//!                                                   Linux TCP/UDP sockets
//! ```
#![allow(dead_code)]

use hollywood_io::{NetNs, TunConfig, TunDevice, VethPair};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, Ordering};

/// The engine's IPv4 address (behind the TUN device).
pub const ENGINE_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 2);
/// Kernel A's address on the TUN device.
pub const TUN_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);
/// Kernel A's address on the veth.
pub const A_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 1);
/// Namespace B's address.
pub const B_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 2);
/// The engine's IPv6 address.
pub const ENGINE_V6: Ipv6Addr = Ipv6Addr::new(0xfd77, 1, 0, 0, 0, 0, 0, 2);
/// Kernel A's IPv6 address on the TUN device.
pub const TUN_V6: Ipv6Addr = Ipv6Addr::new(0xfd77, 1, 0, 0, 0, 0, 0, 1);
/// Kernel A's IPv6 address on the veth.
pub const A_V6: Ipv6Addr = Ipv6Addr::new(0xfd77, 2, 0, 0, 0, 0, 0, 1);
/// Namespace B's IPv6 address.
pub const B_V6: Ipv6Addr = Ipv6Addr::new(0xfd77, 2, 0, 0, 0, 0, 0, 2);

/// Root check with the agreed skip line. Returns `true` when the test
/// should run.
pub fn root_or_skip(test: &str) -> bool {
    if hollywood_io::is_root() {
        true
    } else {
        hollywood_test_support::skip(&format!("{test} needs root (network namespaces + TUN)"));
        false
    }
}

/// A current-thread runtime for a root-only test, or `None` (after the
/// agreed skip line of [`root_or_skip`]) when the test should not run.
pub fn root_runtime_or_skip(test: &str) -> Option<tokio::runtime::Runtime> {
    root_or_skip(test).then(current_thread_runtime)
}

/// A current-thread runtime with I/O and time enabled.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Run `f` on a two-worker runtime; fail when it takes longer than
/// `timeout`.
pub fn run_with_timeout<F: std::future::Future<Output = ()>>(f: F, timeout: std::time::Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        tokio::time::timeout(timeout, f)
            .await
            .expect("case timed out");
    });
}

/// Namespaces A and B and the veth between them. Field order is drop
/// order: the veth goes first, then the namespaces (each deleted by its own
/// Drop guard, also on panic). Declare the TUN device (or the host owning
/// it) after the `Lab` so that it is dropped first.
pub struct Lab {
    /// The veth pair A<->B.
    pub veth: VethPair,
    /// Namespace B: ordinary Linux sockets.
    pub b: NetNs,
    /// Namespace A: the router between the TUN device and the veth.
    pub a: NetNs,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Lab {
    /// Build the topology and the TUN device in A. Must run inside a tokio
    /// runtime (for the TUN fd). The TUN device has offloads
    /// ([`TunConfig::offload`]) when `HWT_TUN_OFFLOAD` is set, so every
    /// test can be run both ways.
    pub fn new() -> hollywood_io::Result<(Lab, TunDevice)> {
        Lab::with_offload(std::env::var_os("HWT_TUN_OFFLOAD").is_some())
    }

    /// [`Lab::new`] with TUN offloads on or off.
    pub fn with_offload(offload: bool) -> hollywood_io::Result<(Lab, TunDevice)> {
        let removed = NetNs::remove_stale("hwt")?;
        if !removed.is_empty() {
            eprintln!("removed stale namespaces from killed runs: {removed:?}");
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let a = NetNs::create(&format!("hwt-{pid}-{n}a"))?;
        let b = NetNs::create(&format!("hwt-{pid}-{n}b"))?;
        // No duplicate address detection on the new interfaces: until their
        // link-local addresses leave "tentative" (1-2 s), neighbour discovery
        // over the veth stalls and the first IPv6 packets wait.
        for ns in [&a, &b] {
            ns.set_sysctl("net.ipv6.conf.default.accept_dad", "0")?;
            ns.set_sysctl("net.ipv6.conf.all.accept_dad", "0")?;
        }
        let veth = VethPair::create(&a, "hwt-a", &b, "hwt-b")?;
        a.add_addr("hwt-a", A_V4.into(), 24)?;
        a.add_addr("hwt-a", A_V6.into(), 64)?;
        b.add_addr("hwt-b", B_V4.into(), 24)?;
        b.add_addr("hwt-b", B_V6.into(), 64)?;
        b.add_route("default", Some(A_V4.into()), None)?;
        b.add_route("default", Some(A_V6.into()), None)?;
        a.set_sysctl("net.ipv4.ip_forward", "1")?;
        a.set_sysctl("net.ipv6.conf.all.forwarding", "1")?;
        let tun = TunDevice::create(
            &a,
            &TunConfig {
                name: "hwtun0".into(),
                mtu: 1500,
                addrs: vec![(IpAddr::V4(TUN_V4), 24), (IpAddr::V6(TUN_V6), 64)],
                offload,
            },
        )?;
        Ok((Lab { veth, b, a }, tun))
    }
}
