//! `hollywood lab dash`: the [DASHing-2018] sessions of `sim dash` on real
//! packets (issue 33, "DASH on real packets").
//!
//! The scenario is the simulator's [`DashScenario`]; the applications are
//! its [`DashServer`] and [`DashClient`] (HTTP/1.1 on Hollywood messages,
//! pipelining with Rx_T, BOLA), and the transports are the ones the
//! simulator builds ([`hollywood_media::dash::endpoints`], with the
//! simulator's seeds). The path is a two-host lab whose user-space
//! emulator runs the simulator's link model with the same parameters
//! ([`DashScenario::link`]: rate and queue each way, half the RTT each
//! way, the loss server to client). The server is host a, the client host
//! b. The result is the simulator's [`DashRun`], so the CLI prints the
//! same JSON.
//!
//! - The TCP deployments (tcp, hollywood) run their sans-IO transport —
//!   our engine and message layer — on a TUN device at each end
//!   ([`Lab::engine_tun`]): the engine's segments are the packets on the
//!   wire.
//! - QUIC runs on real UDP sockets ([`hollywood_io::udp`]).
//!
//! Each end has its own thread and the OS clock; both share one epoch.
//! What differs from the simulator: time is real (scheduling delays on a
//! loaded machine, the kernel's forwarding between the TUN devices, the
//! veths and the emulator), and the emulator's loss draws follow its own
//! seeded stream over the packets as they come, so the same seed does not
//! lose the same packets. A path that changes over time (several phases)
//! runs in the simulator only.

use crate::apps::{self, Error};
use crate::topology::{Host, Lab, LabError, LabSpec};
use hollywood_io::apphost::Port;
use hollywood_io::{AppHost, TunDevice, UdpHost};
use hollywood_media::dash::client::DashClient;
use hollywood_media::dash::server::DashServer;
use hollywood_media::dash::{endpoints, retransmitted, DashRun, DashScenario};
use hollywood_media::dash::{CLIENT_PORT, SERVER_PORT};
use hollywood_media::GenericTransport;
use hollywood_tcp::Instant;
use std::net::SocketAddr;

/// Run `sc` in a fresh two-host lab named `lab_name` (deleted
/// afterwards): until playback ends, the server fails or the
/// simulator's time limit ([`DashScenario::time_limit`]) passes.
pub fn run(sc: &DashScenario, lab_name: &str) -> Result<DashRun, Error> {
    sc.validate()?;
    if !hollywood_io::is_root() {
        return Err(Box::new(LabError::NotRoot));
    }
    let [phase] = sc.phases[..] else {
        return Err("a path that changes over time runs in the simulator only".into());
    };
    if sc.pcap.is_some() {
        return Err(
            "--pcap is the simulator's capture; on real packets capture in the lab with tshark"
                .into(),
        );
    }
    crate::interop::remove_stale_labs();
    let (down, up) = DashScenario::link(&phase, sc.queue());
    let lab = Lab::up(LabSpec {
        name: lab_name.to_string(),
        three_hosts: false,
        a_to_b: down,
        b_to_a: up,
        seed: sc.seed,
        hook: None,
    })?;
    let tcp = matches!(sc.transport, GenericTransport::Tcp(_));
    let (server_ip, client_ip) = if tcp {
        (
            lab.engine_addr(Host::A, false),
            lab.engine_addr(Host::B, false),
        )
    } else {
        (lab.addr(Host::A, false), lab.addr(Host::B, false))
    };
    let server_addr = SocketAddr::new(server_ip, SERVER_PORT);
    let client_addr = SocketAddr::new(client_ip, CLIENT_PORT);
    let (server_t, client_t) = endpoints(
        &sc.transport,
        sc.cc,
        server_addr,
        client_addr,
        apps::transport_seed(sc.seed),
    )?;
    let (server_app, client_app) = sc.apps();
    let epoch = std::time::Instant::now();
    let run = if tcp {
        // The TUN devices register with a runtime's reactor when created;
        // the hosts read and write them from their own threads.
        let rt = crate::workload::runtime()?;
        let _enter = rt.enter();
        let server = AppHost::with_port(lab.engine_tun(Host::A)?, server_t, server_app, epoch);
        let client = AppHost::with_port(lab.engine_tun(Host::B)?, client_t, client_app, epoch);
        session::<TunDevice, TunDevice>(sc, client, server)
    } else {
        let server_sock = apps::bind_udp(&lab, Host::A, server_addr)?;
        let client_sock = apps::bind_udp(&lab, Host::B, client_addr)?;
        let server = UdpHost::new(server_sock, server_t, server_app, epoch)?;
        let client = UdpHost::new(client_sock, client_t, client_app, epoch)?;
        session(sc, client, server)
    };
    drop(lab);
    run
}

/// The session itself: the client on this thread, the server beside it.
fn session<P, Q>(
    sc: &DashScenario,
    mut client: AppHost<P, DashClient>,
    server: AppHost<Q, DashServer>,
) -> Result<DashRun, Error>
where
    P: Port,
    Q: Port + Send + 'static,
{
    let limit = Instant::ZERO + sc.time_limit();
    let (_, server) = apps::run_beside(
        &mut client,
        server,
        limit,
        |c: &DashClient, _| c.finished(),
        |s: &DashServer| s.error().is_some(),
    )?;
    if let Some(e) = server.app().error() {
        return Err(format!("server: {e}").into());
    }
    let now = client.now();
    Ok(DashRun::new(
        sc.transport.name(),
        client.app().report(now),
        server.app().stats(),
        server.transport().stats(),
        retransmitted(server.transport()),
        now,
    ))
}
