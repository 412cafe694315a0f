//! The `fec` transport property on loopback, no privileges: required, it
//! leaves QUIC as the only candidate, and two ends that both ask for it
//! exchange messages through the FEC layer (its shifted message ids and
//! REPORTs on both sides) with every message delivered once and every
//! send given exactly one outcome.

use hollywood_taps::{
    Event, LocalEndpoint, MessageContext, Preconnection, Preference, Protocol, RemoteEndpoint,
    SecurityParameters, TransportProperties,
};
use std::time::Duration;

fn fec_props() -> TransportProperties {
    let mut p = TransportProperties::media();
    p.fec = Preference::Require;
    p.fec_overhead_percent = 25;
    p
}

#[tokio::test]
async fn fec_required_runs_over_quic_and_delivers_every_message_once() {
    let mut l = Preconnection::new(fec_props(), SecurityParameters::Disabled)
        .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
        .listen()
        .await
        .unwrap();
    let addrs = l.local_addrs();
    assert!(
        addrs.iter().all(|(p, _)| *p == Protocol::Quic),
        "FEC required: a QUIC listener only, not {addrs:?}"
    );
    let addr = addrs[0].1;
    // Echo every message back.
    tokio::spawn(async move {
        while let Some(mut c) = l.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(m)) = c.receive().await {
                    let ctx = MessageContext::default().ordered(false);
                    if c.send(m.data, ctx).await.is_err() {
                        return;
                    }
                }
                let _ = c.close().await;
            });
        }
    });
    let mut c = Preconnection::new(fec_props(), SecurityParameters::Disabled)
        .with_remote(RemoteEndpoint::from_addr(addr))
        .with_establishment_timeout(Duration::from_secs(5))
        .initiate()
        .await
        .unwrap();
    assert_eq!(c.protocol(), Protocol::Quic);
    let n = 300;
    let mut refs = Vec::new();
    for i in 0..n {
        // Half with a lifetime (the layer may protect them), half without.
        let ctx = if i % 2 == 0 {
            MessageContext::lifetime(Duration::from_secs(2))
        } else {
            MessageContext::default()
        }
        .ordered(false);
        refs.push(c.send(format!("m{i}").into_bytes(), ctx).await.unwrap());
    }
    c.close().await.unwrap();
    let mut got = Vec::new();
    let mut outcomes = std::collections::HashMap::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(10), c.next_event())
        .await
        .expect("events within 10 s")
    {
        match e {
            Event::Received(m) => got.push(String::from_utf8(m.data).unwrap()),
            Event::Sent { msg, .. } | Event::Expired { msg } | Event::SendError { msg, .. } => {
                *outcomes.entry(msg).or_insert(0) += 1;
            }
            _ => {}
        }
    }
    got.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    want.sort();
    assert_eq!(got, want, "every message echoed once");
    for r in refs {
        assert_eq!(outcomes.get(&r), Some(&1), "{r:?} has exactly one outcome");
    }
}
