//! Message protection for TCP Hollywood (issue 15): a TLS 1.3 handshake
//! at connection start, keys from its exporter, every message sealed.
//!
//! A TCP Hollywood message can be rewritten on the path without the TCP
//! checksum or the message CRC32C noticing (an attacker recomputes both),
//! and inconsistent retransmissions (thesis §4.2) rule out protecting the
//! byte stream as TLS over TCP does: a slot's bytes change between
//! transmissions and the receiver takes messages out of order. So each
//! message is protected on its own, as QUIC protects each packet
//! (RFC 9001 §5.3) and SRT each packet:
//!
//! - **Handshake.** A TLS 1.3 handshake (rustls; no home-made crypto)
//!   runs in messages of its own on sub-stream [`HANDSHAKE_SUBSTREAM`],
//!   ordered and reliable, with ids counting up from
//!   [`HANDSHAKE_FIRST_ID`] (just below the wrap, so the application's
//!   ids from 0 still increase in serial order after them, as the engine
//!   requires, thesis §4.2). The server presents a certificate (generated
//!   self-signed, or from files); the client trusts exactly the roots it
//!   is given. The connection is ready only when the handshake completes.
//! - **Keys.** 88 bytes from the TLS exporter (RFC 8446 §7.5, label
//!   [`EXPORTER_LABEL`], no context): an AES-256-GCM key and a 12-byte IV
//!   per direction.
//! - **Sealing.** The payload of message `id` on sub-stream `s` becomes
//!   `AES-256-GCM(key, nonce = IV xor id, aad = id || s, payload)`: the
//!   payload plus a 16-byte tag ([`TAG_LEN`]). The nonce is unique because
//!   an id is used once per direction; a message resent unchanged, or
//!   placed again by an inconsistent retransmission, is the same sealed
//!   bytes. A replacement is a complete sealed message of its own.
//! - **Opening.** A frame whose tag does not verify — changed bytes, a
//!   header spliced onto another message's body, a frame from another
//!   connection — is dropped and counted (`auth_failed`), never delivered.
//!   A replay window of [`REPLAY_WINDOW`] ids (as IPsec's, RFC 4303 §3.4.3)
//!   drops an id seen before (`replayed`) or too far behind the newest
//!   (`too_old`).
//!
//! The frame header (sub-stream, id, sub-stream sequence number) stays in
//! clear, as QUIC's packet number is protected only against reading, not
//! here: what the header says is bound by the AAD.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::sync::Arc;

/// The sub-stream that carries the handshake.
pub const HANDSHAKE_SUBSTREAM: u16 = 0xFFFF;
/// Id of the first handshake message; at most 16 follow in each direction.
pub const HANDSHAKE_FIRST_ID: u32 = 0xFFFF_FFF0;
/// Most handshake messages per direction.
pub const MAX_HANDSHAKE_MESSAGES: u32 = 16;
/// Bytes a sealed message adds to its payload.
pub const TAG_LEN: usize = 16;
/// The TLS exporter label (RFC 8446 §7.5).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-hollywood-message-protection";
/// Ids behind the newest one that can still be accepted once.
pub const REPLAY_WINDOW: u32 = 1 << 16;
/// The name the self-signed certificate is issued to.
pub const SERVER_NAME: &str = "hollywood.invalid";

/// A server's certificate and key, which the client also trusts (the
/// certificate is pinned as the only trust anchor), and the name the
/// client checks it against.
#[derive(Debug, Clone)]
pub struct Identity {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
    name: String,
}

impl Identity {
    /// A fresh self-signed Ed25519 certificate for [`SERVER_NAME`].
    pub fn generate() -> Result<Identity, String> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .map_err(|e| format!("key generation: {e}"))?;
        let cert = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()])
            .and_then(|p| p.self_signed(&key))
            .map_err(|e| format!("certificate: {e}"))?;
        Ok(Identity {
            cert: cert.der().clone(),
            key: key.serialize_der(),
            name: SERVER_NAME.to_string(),
        })
    }

    /// From a DER certificate and a PKCS#8 DER key issued to
    /// [`SERVER_NAME`].
    pub fn from_der(cert: Vec<u8>, pkcs8_key: Vec<u8>) -> Identity {
        Identity {
            cert: CertificateDer::from(cert),
            key: pkcs8_key,
            name: SERVER_NAME.to_string(),
        }
    }

    /// From files: a certificate and its PKCS#8 private key, each PEM
    /// (`-----BEGIN …`) or DER, the certificate valid for `name` (a DNS
    /// name or an IP address in its subject alternative names). Fails
    /// with a clear message when a file cannot be read or parsed, or the
    /// key does not belong to the certificate.
    pub fn from_files(
        cert: &std::path::Path,
        key: &std::path::Path,
        name: &str,
    ) -> Result<Identity, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::PrivatePkcs8KeyDer;
        let read =
            |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
        let (c, k) = (read(cert)?, read(key)?);
        let is_pem = |b: &[u8]| b.trim_ascii_start().starts_with(b"-----BEGIN");
        let cert_der = if is_pem(&c) {
            CertificateDer::from_pem_slice(&c)
                .map_err(|e| format!("{}: not a PEM certificate: {e}", cert.display()))?
        } else {
            CertificateDer::from(c)
        };
        let key_der = if is_pem(&k) {
            PrivatePkcs8KeyDer::from_pem_slice(&k)
                .map_err(|e| format!("{}: not a PEM PKCS#8 private key: {e}", key.display()))?
                .secret_pkcs8_der()
                .to_vec()
        } else {
            k
        };
        ServerName::try_from(name.to_string()).map_err(|e| format!("server name {name:?}: {e}"))?;
        let id = Identity {
            cert: cert_der,
            key: key_der,
            name: name.to_string(),
        };
        // rustls checks that the key parses and matches the certificate;
        // a handshake in memory checks the rest as a client will (the
        // name, an end-entity certificate), before any connection.
        let files = format!("{} and {}", cert.display(), key.display());
        let mut s = SecureSession::server(&id).map_err(|e| format!("{files}: {e}"))?;
        let mut c = SecureSession::client(&id).map_err(|e| format!("{files}: {e}"))?;
        handshake_in_memory(&mut c, &mut s).map_err(|e| {
            let hint = if e.contains("CaUsedAsEndEntity") {
                " (a CA certificate; make an end-entity one, e.g. `openssl req -x509 ... \
                 -addext basicConstraints=critical,CA:FALSE`)"
            } else {
                ""
            };
            format!("{files}: a client would refuse it: {e}{hint}")
        })?;
        Ok(id)
    }

    /// A caller's side only: trust the certificate in `cert` (PEM or DER)
    /// for `name`, and nothing else (it is pinned), without its key. A
    /// listener cannot serve with it ([`Identity::can_serve`]). Fails with
    /// a clear message when the file cannot be read or is not a
    /// certificate, or `name` is not a valid server name.
    pub fn trusting_file(cert: &std::path::Path, name: &str) -> Result<Identity, String> {
        use rustls::pki_types::pem::PemObject;
        let c = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
        let cert_der = if c.trim_ascii_start().starts_with(b"-----BEGIN") {
            CertificateDer::from_pem_slice(&c)
                .map_err(|e| format!("{}: not a PEM certificate: {e}", cert.display()))?
        } else {
            CertificateDer::from(c)
        };
        ServerName::try_from(name.to_string()).map_err(|e| format!("server name {name:?}: {e}"))?;
        rustls::RootCertStore::empty()
            .add(cert_der.clone())
            .map_err(|e| format!("{}: not a usable certificate: {e}", cert.display()))?;
        Ok(Identity {
            cert: cert_der,
            key: Vec::new(),
            name: name.to_string(),
        })
    }

    /// Whether it has a key, so a listener can present it (not one from
    /// [`Identity::trusting_file`]).
    #[must_use]
    pub fn can_serve(&self) -> bool {
        !self.key.is_empty()
    }

    /// The name the client checks the certificate against.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The certificate (DER).
    #[must_use]
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The PKCS#8 private key (DER).
    #[must_use]
    pub(crate) fn key_der(&self) -> &[u8] {
        &self.key
    }
}

/// Counters of a secure session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecureStats {
    /// Handshake messages sent.
    pub handshake_sent: u64,
    /// Handshake messages received.
    pub handshake_received: u64,
    /// Messages sealed.
    pub sealed: u64,
    /// Messages opened and delivered.
    pub opened: u64,
    /// Messages whose tag did not verify (changed, spliced, foreign).
    pub auth_failed: u64,
    /// Messages whose id was accepted before (a replay).
    pub replayed: u64,
    /// Messages too far behind the newest id to be checked for replay.
    pub too_old: u64,
    /// Messages that arrived before the keys and waited for them.
    pub early: u64,
    /// Early messages dropped because too many waited.
    pub early_dropped: u64,
}

/// Why a message was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// The tag did not verify.
    Auth,
    /// The id was accepted before.
    Replayed,
    /// The id is too far behind the newest.
    TooOld,
    /// The keys are not there yet.
    NotReady,
}

struct Direction {
    key: ring::aead::LessSafeKey,
    iv: [u8; 12],
}

impl Direction {
    fn new(bytes: &[u8]) -> Direction {
        let key = ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &bytes[..32])
            .expect("a 32-byte AES-256 key");
        let mut iv = [0u8; 12];
        iv.copy_from_slice(&bytes[32..44]);
        Direction {
            key: ring::aead::LessSafeKey::new(key),
            iv,
        }
    }

    fn nonce(&self, id: u32) -> ring::aead::Nonce {
        let mut n = self.iv;
        for (b, x) in n[8..].iter_mut().zip(id.to_be_bytes()) {
            *b ^= x;
        }
        ring::aead::Nonce::assume_unique_for_key(n)
    }
}

fn aad(id: u32, substream: u16) -> [u8; 6] {
    let mut a = [0u8; 6];
    a[..4].copy_from_slice(&id.to_be_bytes());
    a[4..].copy_from_slice(&substream.to_be_bytes());
    a
}

/// Ids accepted recently: a sliding bitmap behind the newest.
struct ReplayWindow {
    newest: Option<u32>,
    bits: Vec<u64>,
}

impl ReplayWindow {
    fn new() -> ReplayWindow {
        ReplayWindow {
            newest: None,
            bits: vec![0; (REPLAY_WINDOW / 64) as usize],
        }
    }

    fn bit(&mut self, id: u32) -> (&mut u64, u64) {
        let k = id % REPLAY_WINDOW;
        (&mut self.bits[(k / 64) as usize], 1 << (k % 64))
    }

    /// Accept `id` once (call after its tag verified).
    fn check(&mut self, id: u32) -> Result<(), Rejected> {
        let Some(newest) = self.newest else {
            self.newest = Some(id);
            let (w, m) = self.bit(id);
            *w |= m;
            return Ok(());
        };
        let ahead = id.wrapping_sub(newest) as i32;
        if ahead > 0 {
            if ahead as u32 >= REPLAY_WINDOW {
                self.bits.iter_mut().for_each(|w| *w = 0);
            } else {
                for k in 1..=ahead as u32 {
                    let (w, m) = self.bit(newest.wrapping_add(k));
                    *w &= !m;
                }
            }
            self.newest = Some(id);
        } else if ahead.unsigned_abs() >= REPLAY_WINDOW {
            return Err(Rejected::TooOld);
        }
        let (w, m) = self.bit(id);
        if *w & m != 0 {
            return Err(Rejected::Replayed);
        }
        *w |= m;
        Ok(())
    }
}

/// The sending direction's key: seals messages.
pub struct Sealer {
    dir: Direction,
    sealed: u64,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("sealed", &self.sealed)
            .finish()
    }
}

impl Sealer {
    /// Seal `payload` as message `id` on `substream`.
    pub fn seal(&mut self, id: u32, substream: u16, payload: &[u8]) -> Vec<u8> {
        let mut buf = Vec::with_capacity(payload.len() + TAG_LEN);
        buf.extend_from_slice(payload);
        self.dir
            .key
            .seal_in_place_append_tag(
                self.dir.nonce(id),
                ring::aead::Aad::from(aad(id, substream)),
                &mut buf,
            )
            .expect("AES-GCM seals any payload under 64 GiB");
        self.sealed += 1;
        buf
    }

    /// Messages sealed.
    pub fn sealed(&self) -> u64 {
        self.sealed
    }
}

/// The receiving direction's key and replay window: opens messages.
pub struct Opener {
    dir: Direction,
    replay: ReplayWindow,
    stats: SecureStats,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("stats", &self.stats)
            .finish()
    }
}

impl Opener {
    /// An application message's payload opened, for a receiver after the
    /// handshake: `None` for a stray handshake message (sub-stream
    /// [`HANDSHAKE_SUBSTREAM`]) or a message that does not open (changed,
    /// spliced, replayed, foreign: counted in [`Opener::stats`]).
    pub fn open_application(&mut self, id: u32, substream: u16, sealed: &[u8]) -> Option<Vec<u8>> {
        if substream == HANDSHAKE_SUBSTREAM {
            return None;
        }
        self.open(id, substream, sealed).ok()
    }

    /// Open message `id` on `substream`: its payload, or why not (counted).
    pub fn open(&mut self, id: u32, substream: u16, sealed: &[u8]) -> Result<Vec<u8>, Rejected> {
        let mut buf = sealed.to_vec();
        let n = match self.dir.key.open_in_place(
            self.dir.nonce(id),
            ring::aead::Aad::from(aad(id, substream)),
            &mut buf,
        ) {
            Ok(p) => p.len(),
            Err(_) => {
                self.stats.auth_failed += 1;
                return Err(Rejected::Auth);
            }
        };
        if let Err(r) = self.replay.check(id) {
            match r {
                Rejected::Replayed => self.stats.replayed += 1,
                _ => self.stats.too_old += 1,
            }
            return Err(r);
        }
        buf.truncate(n);
        self.stats.opened += 1;
        Ok(buf)
    }

    /// Counters of the receiving direction (`opened`, `auth_failed`,
    /// `replayed`, `too_old`).
    pub fn stats(&self) -> SecureStats {
        self.stats
    }
}

/// One end's TLS handshake and message keys (sans-IO: handshake bytes in
/// and out as message payloads).
pub struct SecureSession {
    tls: rustls::Connection,
    client: bool,
    seal: Option<Sealer>,
    open: Option<Opener>,
    next_handshake_id: u32,
    stats: SecureStats,
    failed: Option<String>,
}

impl std::fmt::Debug for SecureSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureSession")
            .field("client", &self.client)
            .field("ready", &self.is_ready())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl SecureSession {
    /// The client end, trusting `server`'s certificate only.
    pub fn client(server: &Identity) -> Result<SecureSession, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(server.cert.clone())
            .map_err(|e| format!("trust anchor: {e}"))?;
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("client TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from(server.name.clone()).map_err(|e| e.to_string())?;
        let c = rustls::ClientConnection::new(Arc::new(config), name)
            .map_err(|e| format!("client TLS: {e}"))?;
        Ok(SecureSession::new(rustls::Connection::Client(c), true))
    }

    /// The server end, presenting `identity`.
    pub fn server(identity: &Identity) -> Result<SecureSession, String> {
        let key = PrivateKeyDer::Pkcs8(identity.key.clone().into());
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("server TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(vec![identity.cert.clone()], key)
            .map_err(|e| format!("server TLS: {e}"))?;
        // No session resumption, so no tickets: rustls would send two
        // after the handshake, messages a sending-only client never reads
        // (a kernel socket closed with unread data sends RST, not FIN).
        let mut config = config;
        config.send_tls13_tickets = 0;
        let c = rustls::ServerConnection::new(Arc::new(config))
            .map_err(|e| format!("server TLS: {e}"))?;
        Ok(SecureSession::new(rustls::Connection::Server(c), false))
    }

    fn new(tls: rustls::Connection, client: bool) -> SecureSession {
        SecureSession {
            tls,
            client,
            seal: None,
            open: None,
            next_handshake_id: HANDSHAKE_FIRST_ID,
            stats: SecureStats::default(),
            failed: None,
        }
    }

    /// Keys are in place: messages can be sealed and opened.
    pub fn is_ready(&self) -> bool {
        self.seal.is_some()
    }

    /// Why the handshake failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Counters.
    pub fn stats(&self) -> SecureStats {
        let mut s = self.stats;
        if let Some(o) = &self.open {
            let o = o.stats;
            s.opened = o.opened;
            s.auth_failed = o.auth_failed;
            s.replayed = o.replayed;
            s.too_old = o.too_old;
        }
        s.sealed = self.seal.as_ref().map_or(0, |x| x.sealed);
        s
    }

    /// Once ready: the two directions, for a connection whose halves are
    /// driven apart (a sending and a receiving task).
    pub fn into_halves(self) -> Option<(Sealer, Opener)> {
        Some((self.seal?, self.open?))
    }

    /// The next handshake message to send: its id and payload (all the
    /// TLS records of one flight).
    pub fn poll_handshake(&mut self) -> Option<(u32, Vec<u8>)> {
        if !self.tls.wants_write() || self.failed.is_some() {
            return None;
        }
        let mut out = Vec::new();
        while self.tls.wants_write() {
            if self.tls.write_tls(&mut out).is_err() {
                break;
            }
        }
        if out.is_empty() {
            return None;
        }
        if self.next_handshake_id.wrapping_sub(HANDSHAKE_FIRST_ID) >= MAX_HANDSHAKE_MESSAGES {
            self.failed = Some("handshake needs too many messages".into());
            return None;
        }
        let id = self.next_handshake_id;
        self.next_handshake_id = id.wrapping_add(1);
        self.stats.handshake_sent += 1;
        Some((id, out))
    }

    /// A handshake message from the peer (in order: its sub-stream is
    /// ordered). Derives the keys when the handshake completes.
    pub fn handle_handshake(&mut self, payload: &[u8]) -> Result<(), String> {
        if let Some(f) = &self.failed {
            return Err(f.clone());
        }
        self.stats.handshake_received += 1;
        let mut rd = payload;
        while !rd.is_empty() {
            match self.tls.read_tls(&mut rd) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(self.fail(format!("TLS: {e}"))),
            }
            if let Err(e) = self.tls.process_new_packets() {
                // Let the alert go out before giving up.
                return Err(self.fail(format!("TLS: {e}")));
            }
        }
        if !self.tls.is_handshaking() && self.seal.is_none() {
            let mut km = [0u8; 88];
            self.tls
                .export_keying_material(&mut km[..], EXPORTER_LABEL, None)
                .map_err(|e| self.fail(format!("TLS exporter: {e}")))?;
            let (c, s) = (Direction::new(&km[..44]), Direction::new(&km[44..]));
            let (mine, theirs) = if self.client { (c, s) } else { (s, c) };
            self.seal = Some(Sealer {
                dir: mine,
                sealed: 0,
            });
            self.open = Some(Opener {
                dir: theirs,
                replay: ReplayWindow::new(),
                stats: SecureStats::default(),
            });
        }
        Ok(())
    }

    fn fail(&mut self, why: String) -> String {
        self.failed = Some(why.clone());
        why
    }

    /// Seal `payload` as message `id` on `substream`. `None` before the
    /// keys are there.
    pub fn seal(&mut self, id: u32, substream: u16, payload: &[u8]) -> Option<Vec<u8>> {
        Some(self.seal.as_mut()?.seal(id, substream, payload))
    }

    /// Open message `id` on `substream`: its payload, or why not (counted).
    pub fn open(&mut self, id: u32, substream: u16, sealed: &[u8]) -> Result<Vec<u8>, Rejected> {
        match self.open.as_mut() {
            Some(o) => o.open(id, substream, sealed),
            None => Err(Rejected::NotReady),
        }
    }

    /// Count a message that waited for the keys (`dropped`: there was no
    /// room for it to wait).
    pub fn note_early(&mut self, dropped: bool) {
        if dropped {
            self.stats.early_dropped += 1;
        } else {
            self.stats.early += 1;
        }
    }
}

/// Run a handshake between two sessions in one process (tests, benches,
/// fuzzing): each side's messages go straight to the other until neither
/// has anything left to say. Returns the first error either side raised.
pub fn handshake_in_memory(c: &mut SecureSession, s: &mut SecureSession) -> Result<(), String> {
    let mut first_err = None;
    for _ in 0..MAX_HANDSHAKE_MESSAGES {
        let mut moved = false;
        while let Some((_, m)) = c.poll_handshake() {
            moved = true;
            if let Err(e) = s.handle_handshake(&m) {
                first_err.get_or_insert(e);
            }
        }
        while let Some((_, m)) = s.poll_handshake() {
            moved = true;
            if let Err(e) = c.handle_handshake(&m) {
                first_err.get_or_insert(e);
            }
        }
        if !moved {
            break;
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the handshake between a client and a server in memory.
    fn pair() -> (SecureSession, SecureSession) {
        let id = Identity::generate().unwrap();
        let mut c = SecureSession::client(&id).unwrap();
        let mut s = SecureSession::server(&id).unwrap();
        handshake_in_memory(&mut c, &mut s).unwrap();
        assert!(c.is_ready() && s.is_ready());
        (c, s)
    }

    #[test]
    fn an_identity_from_pem_or_der_files_is_checked_and_used() {
        let dir = std::env::temp_dir().join(format!("hw-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["media.example".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let f = |n: &str, b: &[u8]| {
            let p = dir.join(n);
            std::fs::write(&p, b).unwrap();
            p
        };
        let cert_pem = f("cert.pem", cert.pem().as_bytes());
        let key_pem = f("key.pem", key.serialize_pem().as_bytes());
        let cert_der = f("cert.der", cert.der());
        let key_der = f("key.der", &key.serialize_der());
        let other_pem = f("other.pem", other.serialize_pem().as_bytes());
        for (c, k) in [
            (&cert_pem, &key_pem),
            (&cert_der, &key_der),
            (&cert_pem, &key_der),
        ] {
            let id = Identity::from_files(c, k, "media.example").unwrap();
            let mut cl = SecureSession::client(&id).unwrap();
            let mut sv = SecureSession::server(&id).unwrap();
            handshake_in_memory(&mut cl, &mut sv).unwrap();
            assert!(cl.is_ready() && sv.is_ready());
        }
        // The wrong name: a client would refuse the certificate, so the
        // files are refused up front.
        let e = Identity::from_files(&cert_pem, &key_pem, "elsewhere.example").unwrap_err();
        assert!(e.contains("not valid for name"), "{e}");
        // A CA certificate (what `openssl req -x509` makes by default).
        let mut ca = rcgen::CertificateParams::new(vec!["media.example".to_string()]).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = f("ca.pem", ca.self_signed(&key).unwrap().pem().as_bytes());
        let e = Identity::from_files(&ca_pem, &key_pem, "media.example").unwrap_err();
        assert!(e.contains("CA:FALSE"), "{e}");
        // A key of another certificate, a missing file, a bad name.
        let e = Identity::from_files(&cert_pem, &other_pem, "media.example").unwrap_err();
        assert!(e.contains("other.pem"), "{e}");
        let e = Identity::from_files(&dir.join("none.pem"), &key_pem, "media.example").unwrap_err();
        assert!(e.contains("none.pem"), "{e}");
        assert!(Identity::from_files(&cert_pem, &key_pem, "not a name!").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn handshake_then_messages_both_ways() {
        let (mut c, mut s) = pair();
        assert!(c.stats().handshake_sent <= 3, "{:?}", c.stats());
        let sealed = c.seal(7, 2, b"a voice frame").unwrap();
        assert_eq!(sealed.len(), 13 + TAG_LEN);
        assert_eq!(s.open(7, 2, &sealed).unwrap(), b"a voice frame");
        let back = s.seal(7, 2, b"the other way").unwrap();
        assert_ne!(back, sealed, "a key per direction");
        assert_eq!(c.open(7, 2, &back).unwrap(), b"the other way");
        // Empty payloads are sealed too.
        let e = c.seal(8, 0, b"").unwrap();
        assert_eq!(s.open(8, 0, &e).unwrap(), b"");
    }

    #[test]
    fn tampered_spliced_replayed_and_foreign_messages_are_rejected() {
        let (mut c, mut s) = pair();
        let m = c.seal(1, 0, b"payload one").unwrap();
        // Any changed byte.
        for k in 0..m.len() {
            let mut x = m.clone();
            x[k] ^= 0x40;
            assert_eq!(s.open(1, 0, &x), Err(Rejected::Auth), "byte {k}");
        }
        // The body under another header (id or sub-stream).
        assert_eq!(s.open(2, 0, &m), Err(Rejected::Auth));
        assert_eq!(s.open(1, 1, &m), Err(Rejected::Auth));
        assert_eq!(s.stats().auth_failed as usize, m.len() + 2);
        // Once, then a replay.
        assert_eq!(s.open(1, 0, &m).unwrap(), b"payload one");
        assert_eq!(s.open(1, 0, &m), Err(Rejected::Replayed));
        // Sealed on another connection (other keys).
        let (mut c2, _) = pair();
        let f = c2.seal(3, 0, b"foreign").unwrap();
        assert_eq!(s.open(3, 0, &f), Err(Rejected::Auth));
        // Too far behind the newest.
        let far = c.seal(1 + REPLAY_WINDOW + 5, 0, b"far ahead").unwrap();
        s.open(1 + REPLAY_WINDOW + 5, 0, &far).unwrap();
        let old = c.seal(4, 0, b"late").unwrap();
        assert_eq!(s.open(4, 0, &old), Err(Rejected::TooOld));
        // An own message reflected back does not open either.
        let own = s.seal(9, 0, b"mine").unwrap();
        assert_eq!(s.open(9, 0, &own), Err(Rejected::Auth));
    }

    #[test]
    fn out_of_order_ids_within_the_window_are_accepted_once() {
        let (mut c, mut s) = pair();
        let ids = [10u32, 5, 30, 6, 29, 10, 5, 31];
        let mut got = Vec::new();
        for id in ids {
            let m = c.seal(id, 0, &id.to_be_bytes()).unwrap();
            got.push(s.open(id, 0, &m).is_ok());
        }
        assert_eq!(got, [true, true, true, true, true, false, false, true]);
        // Ids wrap: from just below 2^32 to 3.
        let (mut c, mut s) = pair();
        for id in [u32::MAX - 1, u32::MAX, 0, 3] {
            let m = c.seal(id, 0, b"x").unwrap();
            assert!(s.open(id, 0, &m).is_ok(), "{id}");
        }
    }

    #[test]
    fn a_client_that_trusts_another_certificate_fails_the_handshake() {
        let real = Identity::generate().unwrap();
        let other = Identity::generate().unwrap();
        let mut c = SecureSession::client(&other).unwrap();
        let mut s = SecureSession::server(&real).unwrap();
        let err = handshake_in_memory(&mut c, &mut s).err();
        assert!(
            err.is_some_and(|e| e.contains("certificate")),
            "{:?}",
            c.failure()
        );
        assert!(!c.is_ready());
        assert!(c.seal(1, 0, b"x").is_none());
    }
}
