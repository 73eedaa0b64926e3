//! TLS on the client port and the Raft address (rustls, `ring` crypto),
//! off by default.
//!
//! `--tls-cert-file` (a PEM chain) and `--tls-key-file` (its PEM private
//! key) turn it on for both doors: plain HTTP is then refused (the
//! handshake fails). Between nodes, peers are reached over `https://` and
//! their certificates must chain to `--tls-ca-file` (a PEM bundle, required
//! with TLS on a node with a Raft address) and name the address dialled
//! (an IP SAN for `IP:PORT` peers). SIGHUP reads the certificate and key
//! again: connections made afterwards use the new pair; a pair that does
//! not load keeps the one in force and says why in the log.
//!
//! A handshake runs on its own task, bounded by [`HANDSHAKE_TIMEOUT`], so a
//! client that stalls it holds up no one else's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a TLS handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("cert", &self.cert).finish_non_exhaustive()
    }
}

/// The node's certificate and key, reloadable.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<Current>,
    acceptor: TlsAcceptor,
}

#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().clone())
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--tls-cert-file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("--tls-cert-file {}: no certificate", cert.display()));
    }
    let der = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key-file {}: {e}", key.display()))?;
    let signing =
        provider().key_provider.load_private_key(der).map_err(|e| format!("--tls-key-file {}: {e}", key.display()))?;
    let pair = CertifiedKey::new(chain, signing);
    pair.keys_match().map_err(|e| format!("the TLS key does not match the certificate: {e}"))?;
    Ok(Arc::new(pair))
}

impl Tls {
    pub fn open(cert: &Path, key: &Path) -> Result<Tls, String> {
        let current = Arc::new(Current(RwLock::new(load(cert, key)?)));
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        let mut config = config;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// Reads the certificate and key again (SIGHUP).
    pub fn reload(&self) -> Result<(), String> {
        let pair = load(&self.cert, &self.key)?;
        *self.current.0.write() = pair;
        Ok(())
    }

    /// `tcp` with every connection passed through the handshake.
    pub fn listener(&self, tcp: TcpListener) -> TlsListener {
        let local = tcp.local_addr().ok();
        let (tx, rx) = mpsc::channel(64);
        let acceptor = self.acceptor.clone();
        tokio::spawn(async move {
            loop {
                let (stream, addr) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let (acceptor, ready) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = ready.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {addr}: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {addr} timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        TlsListener { rx, local }
    }
}

/// A listener whose connections have completed their TLS handshake.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: Option<SocketAddr>,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.local.ok_or_else(|| std::io::Error::other("no local address"))
    }
}
