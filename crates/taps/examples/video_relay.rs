//! A live video relay with the Rust API: what `hollywood transmit` does,
//! in a program of its own. Datagrams (MPEG-TS or RTP, e.g. from
//! `ffmpeg -re -i in.mp4 -f mpegts udp://127.0.0.1:5000`) arriving at UDP
//! port 5000 are sent to a relay that hands them out at UDP
//! 127.0.0.1:5001 (`ffplay udp://127.0.0.1:5001`), each dropped if it
//! cannot arrive within 200 ms. Both relays run here, over loopback;
//! Ctrl-C stops them and prints their counters.
//!
//! ```text
//! cargo run -p hollywood-taps --example video_relay
//! ```

use hollywood_taps::relay::{self, Direction, Mode, RelayConfig, RelayStats};
use hollywood_taps::{
    LocalEndpoint, Preconnection, RemoteEndpoint, SecurityParameters, TransportProperties,
};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = "127.0.0.1:9000".parse()?;
    let latency = Duration::from_millis(200);
    let receiver = RelayConfig {
        preconnection: Preconnection::new(
            TransportProperties::media(),
            SecurityParameters::Disabled,
        )
        .with_local(LocalEndpoint::from_addr(server)),
        mode: Mode::Listener,
        direction: Direction::HollywoodToUdp {
            to: "127.0.0.1:5001".parse()?,
        },
        latency,
        reorder: relay::default_reorder(latency),
    };
    let sender = RelayConfig {
        preconnection: Preconnection::new(
            TransportProperties::media(),
            SecurityParameters::Disabled,
        )
        .with_remote(RemoteEndpoint::from_addr(server)),
        mode: Mode::Caller,
        direction: Direction::UdpToHollywood {
            bind: "127.0.0.1:5000".parse()?,
        },
        latency,
        reorder: relay::default_reorder(latency),
    };
    let (rx_stats, tx_stats) = (
        Arc::new(RelayStats::default()),
        Arc::new(RelayStats::default()),
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let rx = tokio::spawn(relay::run(
        receiver,
        rx_stats.clone(),
        wait(stop_rx.clone()),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let tx = tokio::spawn(relay::run(sender, tx_stats.clone(), wait(stop_rx)));
    println!("relaying udp://127.0.0.1:5000 -> udp://127.0.0.1:5001; Ctrl-C to stop");
    tokio::signal::ctrl_c().await?;
    stop_tx.send(true)?;
    tx.await??;
    rx.await??;
    println!("sender:   {:?}", tx_stats.snapshot());
    println!("receiver: {:?}", rx_stats.snapshot());
    Ok(())
}
