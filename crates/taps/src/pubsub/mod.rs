//! A live relay: publish a stream by name to a relay, play it from there,
//! many callers on one port, each player with its own deadline, relays
//! chained with one end-to-end deadline (`hollywood relay`,
//! docs/RELAY.md).
//!
//! - [`wire`]: the relay protocol's messages, on Hollywood messages;
//! - [`access`]: stream ids (SRT's syntax) and who may do what;
//! - [`clock`]: a caller's estimate of the relay's clock;
//! - [`fanout`]: per-subscriber queues and the group cache (sans-IO);
//! - [`ts`]: MPEG-TS priorities and group starts for publishers;
//! - [`client`]: publish or play ([`Session`]);
//! - [`server`]: the relay ([`Relay`], [`serve`]).

pub mod access;
pub mod client;
pub mod clock;
pub mod fanout;
pub mod server;
pub mod ts;
pub mod udp;
pub mod wire;

#[cfg(test)]
mod chain_tests;

pub use access::{Policy, Refusal, StreamId};
pub use client::{Received, Request, Session, SessionStats};
pub use server::{serve, serve_on, Relay, RelayReport, ServerConfig, Upstream};
pub use wire::Role;

use std::sync::OnceLock;

/// This process's clock for the relay protocol: microseconds since its
/// first use (monotonic). Times on the wire are on a relay's clock; a
/// caller converts with its offset estimate.
pub fn now_us() -> i64 {
    static EPOCH: OnceLock<tokio::time::Instant> = OnceLock::new();
    let e = *EPOCH.get_or_init(tokio::time::Instant::now);
    // One hour in: a clock far from zero, so that an offset error shows.
    tokio::time::Instant::now().duration_since(e).as_micros() as i64 + 3_600_000_000
}

/// A time on this process's clock as a tokio instant.
pub fn instant_of(us: i64) -> tokio::time::Instant {
    let now = now_us();
    let n = tokio::time::Instant::now();
    if us >= now {
        n + std::time::Duration::from_micros((us - now) as u64)
    } else {
        n.checked_sub(std::time::Duration::from_micros((now - us) as u64))
            .unwrap_or(n)
    }
}
