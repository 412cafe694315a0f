//! Property: every message `send` accepts gets exactly one of `Sent`,
//! `Expired` or `SendError`, and `Abandoned` only after `Sent` — whatever
//! the mix of sizes, lifetimes, sub-streams and dependencies (valid or not:
//! the engine's dependency rules, thesis §4.2, turn bad ones into
//! `SendError`), over QUIC and kernel TCP on loopback.

use hollywood_taps::{
    Event, LocalEndpoint, MessageContext, MessageRef, Preconnection, Protocol, RemoteEndpoint,
    SecurityParameters, TransportProperties,
};
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone)]
struct Msg {
    len: usize,
    lifetime_ms: Option<u64>,
    substream: u16,
    /// Depend on the message this many before (0: none).
    back: usize,
}

fn msg() -> impl Strategy<Value = Msg> {
    (
        1usize..4000,
        prop::option::of(1u64..300),
        0u16..3,
        0usize..4,
    )
        .prop_map(|(len, lifetime_ms, substream, back)| Msg {
            len,
            lifetime_ms,
            substream,
            back,
        })
}

async fn run(protocol: Protocol, msgs: Vec<Msg>) -> Result<(), TestCaseError> {
    let mut l = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_local(LocalEndpoint::from_addr("127.0.0.1:0".parse().unwrap()))
        .with_protocols(&[protocol])
        .listen()
        .await
        .unwrap();
    let at = l.local_addrs()[0].1;
    tokio::spawn(async move {
        while let Some(mut c) = l.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(_)) = c.receive().await {}
                let _ = c.close().await;
            });
        }
    });
    let mut c = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
        .with_remote(RemoteEndpoint::from_addr(at))
        .with_protocols(&[protocol])
        .initiate()
        .await
        .unwrap();
    let mut refs: Vec<MessageRef> = Vec::new();
    for m in &msgs {
        let mut ctx = MessageContext::default()
            .substream(m.substream)
            .ordered(false);
        ctx.lifetime = m.lifetime_ms.map(Duration::from_millis);
        if m.back > 0 && m.back <= refs.len() {
            ctx = ctx.depends_on(refs[refs.len() - m.back]);
        }
        refs.push(c.send(vec![7u8; m.len], ctx).await.unwrap());
    }
    c.close().await.unwrap();
    let mut outcome: HashMap<MessageRef, &str> = HashMap::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), c.next_event())
            .await
            .expect("the connection ends within 10 s");
        match e {
            Some(Event::Sent { msg, .. }) => {
                prop_assert!(outcome.insert(msg, "sent").is_none(), "{msg:?} twice")
            }
            Some(Event::Expired { msg }) => {
                prop_assert!(outcome.insert(msg, "expired").is_none(), "{msg:?} twice")
            }
            Some(Event::SendError { msg, .. }) => {
                prop_assert!(outcome.insert(msg, "error").is_none(), "{msg:?} twice")
            }
            Some(Event::Abandoned { msg, .. }) => {
                prop_assert_eq!(outcome.get(&msg).copied(), Some("sent"))
            }
            Some(Event::ConnectionError(e)) => prop_assert!(false, "{e}"),
            Some(_) => {}
            None => break,
        }
    }
    for r in &refs {
        prop_assert!(outcome.contains_key(r), "{r:?} has no outcome");
    }
    prop_assert_eq!(outcome.len(), refs.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn every_message_has_exactly_one_outcome(
        quic in any::<bool>(),
        msgs in prop::collection::vec(msg(), 1..120),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let p = if quic { Protocol::Quic } else { Protocol::KernelTcp };
        rt.block_on(run(p, msgs))?;
    }
}
