//! A Linux TUN device read and written with tokio.

use crate::error::{Error, Result};
use crate::netns::{check_if_name, NetNs};
use crate::sys;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::IpAddr;
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
}

impl Default for TunConfig {
    fn default() -> Self {
        TunConfig {
            name: "hwtun%d".to_owned(),
            mtu: 1500,
            addrs: Vec::new(),
        }
    }
}

/// A TUN interface opened with `IFF_TUN | IFF_NO_PI`: every
/// [`recv`](TunDevice::recv) yields one whole IPv4 or IPv6 packet that the
/// kernel routed into the interface, and every [`send`](TunDevice::send)
/// hands one whole packet to the kernel as if it had arrived on the
/// interface.
///
/// The interface exists as long as this value (it is not persistent) and
/// lives in the namespace it was created in.
#[derive(Debug)]
pub struct TunDevice {
    fd: AsyncFd<File>,
    name: String,
    mtu: u32,
}

impl TunDevice {
    /// Create the interface inside `ns`, set its MTU and addresses and bring
    /// it up. Must be called within a tokio runtime (the descriptor is
    /// registered with the runtime's reactor).
    pub fn create(ns: &NetNs, config: &TunConfig) -> Result<TunDevice> {
        check_if_name(&config.name)?;
        let requested = config.name.clone();
        let (fd, name) = ns.run(move || sys::open_tun(&requested))?.map_err(|e| {
            Error::io(
                format!(
                    "create TUN device {:?} (needs root and /dev/net/tun)",
                    config.name
                ),
                e,
            )
        })?;
        let fd = sys::register_async(File::from(fd))
            .map_err(|e| Error::io(format!("register TUN device {name} with tokio"), e))?;
        let dev = TunDevice {
            fd,
            name,
            mtu: config.mtu,
        };
        ns.set_mtu(&dev.name, config.mtu)?;
        for &(addr, prefix) in &config.addrs {
            ns.add_addr(&dev.name, addr, prefix)?;
        }
        ns.link_up(&dev.name)?;
        Ok(dev)
    }

    /// The interface name the kernel assigned.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configured MTU: no packet longer than this should be sent.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Wait for and read one packet into `buf`, returning its length. A
    /// packet longer than `buf` is truncated, so pass at least
    /// [`mtu`](TunDevice::mtu) bytes.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| {
                let mut file: &File = fd.get_ref();
                file.read(buf)
            }) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Read one packet if one is queued; `Err(WouldBlock)` otherwise.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut file: &File = self.fd.get_ref();
        file.read(buf)
    }

    /// Write one whole IP packet, waiting if the device is not writable.
    pub async fn send(&self, packet: &[u8]) -> io::Result<()> {
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| {
                let mut file: &File = fd.get_ref();
                file.write(packet)
            }) {
                Ok(Ok(n)) if n == packet.len() => return Ok(()),
                Ok(Ok(n)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("TUN device took {n} of {} bytes of a packet", packet.len()),
                    ))
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}
