//! The default engine on a standing host-mode instance (root only): a
//! client namespace whose default route is a veth to a peer namespace,
//! an instance in the client namespace (what `hollywood host up` makes),
//! an echo listener in the peer. A `Preconnection` with no engine given
//! runs TCP Hollywood on the instance's engine; a second runtime after
//! the first has ended attaches again (the first one's device was let
//! go); `without_host_engine` leaves the candidate out.
//!
//! Namespaces are `hwe-PID…`; the run directory is a temporary one
//! (`HOLLYWOOD_RUN_DIR`, set for this test binary alone).

use hollywood_io::hostmode::{self, UpOptions};
use hollywood_io::{NetNs, VethPair};
use hollywood_taps::{
    CcAlgorithm, Error, LocalEndpoint, MessageContext, Preconnection, Protocol, RemoteEndpoint,
    SecurityParameters, TransportProperties,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

#[test]
fn preconnections_without_an_engine_use_the_host_instance_in_every_runtime() {
    if !hollywood_io::is_root() {
        hollywood_test_support::skip("needs root (network namespaces, a TUN device, nftables)");
        return;
    }
    if !hollywood_test_support::have_tool("nft", "--version") {
        hollywood_test_support::skip("needs the nft tool (package nftables)");
        return;
    }
    let pid = std::process::id();
    let run_dir = std::env::temp_dir().join(format!("hwe-run-{pid}"));
    let _ = std::fs::remove_dir_all(&run_dir);
    // This binary's only test: no other thread reads the environment.
    std::env::set_var("HOLLYWOOD_RUN_DIR", &run_dir);
    let _ = NetNs::remove_stale("hwe");
    let ns = NetNs::create(&format!("hwe-{pid}")).expect("namespace");
    let peer = NetNs::create(&format!("hwe-{pid}-gw")).expect("peer namespace");
    let _veth = VethPair::create(&ns, "hwe-eg", &peer, "hwe-gw").expect("veth");
    let gw = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    ns.add_addr("hwe-eg", IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)), 24)
        .unwrap();
    peer.add_addr("hwe-gw", gw, 24).unwrap();
    ns.add_route("default", Some(gw), Some("hwe-eg")).unwrap();

    // The peer's echo listener (kernel TCP serves TCP Hollywood callers).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = rt.block_on(async {
        let mut l = Preconnection::new(TransportProperties::media(), SecurityParameters::Disabled)
            .with_namespace(peer.name().unwrap())
            .with_local(LocalEndpoint::from_addr(SocketAddr::new(gw, 0)))
            .with_protocols(&[Protocol::KernelTcp])
            .listen()
            .await
            .unwrap();
        let addr = l.local_addrs()[0].1;
        tokio::spawn(async move {
            while let Some(mut c) = l.accept().await {
                tokio::spawn(async move {
                    while let Ok(Some(m)) = c.receive().await {
                        let ctx = MessageContext::default()
                            .substream(m.substream)
                            .ordered(false);
                        let _ = c.send(m.data, ctx).await;
                    }
                    let _ = c.close().await;
                });
            }
        });
        addr
    });

    let st = ns
        .run(|| {
            hostmode::up(&UpOptions {
                name: Some("taps".into()),
                ..UpOptions::default()
            })
        })
        .unwrap()
        .expect("host mode up in the client namespace");
    let engine_addr: IpAddr = st.engine_v4.parse().unwrap();

    // Two runtimes one after the other in the client namespace, as an
    // application with a runtime per session, or tests, have.
    let rounds = ns
        .run(move || {
            (0..2)
                .map(|round| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(async {
                        let pre = Preconnection::new(
                            TransportProperties::media(),
                            SecurityParameters::Disabled,
                        )
                        .with_remote(RemoteEndpoint::from_addr(addr))
                        .with_protocols(&[Protocol::TcpHollywood]);
                        let mut c = pre
                            .clone()
                            .with_congestion_control(CcAlgorithm::Cubic)
                            .with_keep_alive(Duration::from_secs(30))
                            .initiate()
                            .await
                            .map_err(|e| format!("round {round}: {e}"))?;
                        let protocol = c.protocol();
                        c.send(
                            format!("round {round}").into_bytes(),
                            MessageContext::default(),
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        let echo = tokio::time::timeout(Duration::from_secs(10), c.receive())
                            .await
                            .map_err(|_| format!("round {round}: no echo in 10 s"))?
                            .map_err(|e| e.to_string())?
                            .map(|m| String::from_utf8_lossy(&m.data).into_owned());
                        // The process holds the instance: the engine is
                        // the one the preconnection used.
                        let shared = hollywood_taps::Engine::host()
                            .await
                            .map_err(|e| e.to_string())?
                            .addr;
                        let off = pre.without_host_engine().initiate().await;
                        c.close().await.map_err(|e| e.to_string())?;
                        Ok::<_, String>((protocol, echo, shared, off))
                    })
                })
                .collect::<Vec<_>>()
        })
        .unwrap();
    let down = ns.run(move || hostmode::down(&st.name)).unwrap();
    drop(rt);
    let _ = std::fs::remove_dir_all(&run_dir);
    for (round, r) in rounds.into_iter().enumerate() {
        let (protocol, echo, shared, off) = r.unwrap();
        assert_eq!(protocol, Protocol::TcpHollywood, "round {round}");
        assert_eq!(echo, Some(format!("round {round}")));
        assert_eq!(shared, engine_addr, "round {round}");
        match off {
            Err(Error::NoCandidate(why)) => {
                assert!(why.contains("without_host_engine"), "{why}")
            }
            other => panic!("round {round}: without_host_engine gave {other:?}"),
        }
    }
    down.expect("host mode down");
}
