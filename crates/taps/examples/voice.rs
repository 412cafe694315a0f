//! A voice call over the Transport Services API, on loopback (no
//! privileges): a listener echoes every frame; the caller sends 20 ms
//! frames (160 B, G.711) for two seconds, each useful for 150 ms (ITU-T
//! G.114's mouth-to-ear budget), and reports how many came back in time.
//!
//! ```text
//! cargo run -p hollywood-taps --example voice            # racing: QUIC wins
//! cargo run -p hollywood-taps --example voice -- kernel  # kernel TCP only
//! ```

use hollywood_taps::{
    Event, LocalEndpoint, MessageContext, Preconnection, Protocol, RemoteEndpoint,
    SecurityParameters, TransportProperties,
};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

const FRAME: Duration = Duration::from_millis(20);
const LIFETIME: Duration = Duration::from_millis(150);
const FRAMES: u32 = 100;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let only: Vec<Protocol> = std::env::args()
        .skip(1)
        .map(|a| Protocol::parse(&a).ok_or(format!("unknown protocol {a}")))
        .collect::<Result<_, _>>()?;
    let protocols = if only.is_empty() {
        Protocol::ALL.to_vec()
    } else {
        only
    };
    let props = TransportProperties::media();

    // The far end: echo every frame back, with the same lifetime.
    let mut listener = Preconnection::new(props.clone(), SecurityParameters::Disabled)
        .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse()?))
        .with_protocols(&protocols)
        .listen()
        .await?;
    let at = listener.local_addrs()[0].1;
    tokio::spawn(async move {
        while let Some(mut c) = listener.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(m)) = c.receive().await {
                    let _ = c.send(m.data, MessageContext::lifetime(LIFETIME)).await;
                }
                let _ = c.close().await;
            });
        }
    });

    // The caller.
    let mut call = Preconnection::new(props, SecurityParameters::Disabled)
        .with_remote(RemoteEndpoint::from_addr(at))
        .with_protocols(&protocols)
        .initiate()
        .await?;
    println!("connected over {}", call.protocol());
    let mut sent_at = HashMap::new();
    let mut tick = tokio::time::interval(FRAME);
    let mut seq = 0u32;
    let (mut on_time, mut late, mut expired) = (0, 0, 0);
    let mut closed = false;
    loop {
        tokio::select! {
            _ = tick.tick(), if seq < FRAMES => {
                let mut frame = vec![0u8; 160];
                frame[..4].copy_from_slice(&seq.to_be_bytes());
                sent_at.insert(seq, Instant::now());
                call.send(frame, MessageContext::lifetime(LIFETIME)).await?;
                seq += 1;
                if seq == FRAMES {
                    call.close().await?;
                    closed = true;
                }
            }
            e = call.next_event(), if closed || seq > 0 => match e {
                Some(Event::Received(m)) => {
                    let n = u32::from_be_bytes(m.data[..4].try_into()?);
                    if sent_at[&n].elapsed() <= LIFETIME { on_time += 1 } else { late += 1 }
                }
                Some(Event::Expired { .. }) | Some(Event::Abandoned { .. }) => expired += 1,
                Some(Event::ConnectionError(e)) => return Err(e.into()),
                Some(_) => {}
                None => break,
            },
        }
    }
    println!(
        "{FRAMES} frames: {on_time} back within {LIFETIME:?}, {late} late, {expired} given up ({})",
        call.protocol()
    );
    Ok(())
}
