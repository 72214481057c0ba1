//! TLS in: `--tls-cert` and `--tls-key` make the HTTP port speak HTTPS (the API, `wss://`,
//! the demo page). The certificate is held behind a lock that a SIGHUP swaps: connections
//! accepted afterwards get the new one, and open connections keep theirs, so a renewal drops
//! nothing. A connection that does not start with a TLS handshake (plain HTTP to an HTTPS
//! port) is answered `400` in clear, naming the scheme to use, and closed: nothing is served
//! in clear.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The first byte of a TLS record carrying a handshake (a ClientHello).
pub const HANDSHAKE: u8 = 0x16;

/// The answer to plain HTTP on the HTTPS port (written without reading the request).
pub const PLAIN_HTTP: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 138\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"this port speaks HTTPS: use https:// (or wss://)\",\"type\":\"invalid_request_error\",\"code\":\"tls_required\",\"param\":null}}";

/// The server's certificate and key, reloadable.
#[derive(Clone)]
pub struct TlsConfig {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<RwLock<TlsAcceptor>>,
}

impl TlsConfig {
    /// Reads `cert` (a PEM chain) and `key` (its PEM private key), or says what is wrong.
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let acceptor = acceptor(cert, key)?;
        Ok(Self {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: Arc::new(RwLock::new(acceptor)),
        })
    }

    /// The acceptor of new connections.
    pub fn acceptor(&self) -> TlsAcceptor {
        match self.current.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads both files again; on failure the certificate in use stays.
    pub fn reload(&self) -> anyhow::Result<()> {
        let fresh = acceptor(&self.cert, &self.key)?;
        match self.current.write() {
            Ok(mut a) => *a = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }

    /// Reloads on every SIGHUP, logging what happened, for as long as the process runs.
    pub fn reload_on_sighup(&self) {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let tls = self.clone();
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                tracing::warn!("tls: SIGHUP cannot be caught: the certificate is never reloaded");
                return;
            };
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    match tls.reload() {
                        Ok(()) => {
                            tracing::info!(cert = %tls.cert.display(), "tls: certificate reloaded")
                        }
                        Err(e) => tracing::error!(
                            error = format!("{e:#}"),
                            "tls: reload failed; the certificate in use stays"
                        ),
                    }
                }
            });
        }
    }
}

/// An acceptor for the PEM files `cert` and `key` (HTTP/1.1, TLS 1.2 and 1.3).
fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("tls_cert {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("tls_cert {}: not a PEM certificate chain", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("tls_cert {}: no certificate in it", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("tls_key {}: no PEM private key in it", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("tls_key does not match tls_cert")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_http_answer_is_well_formed() {
        let text = std::str::from_utf8(PLAIN_HTTP).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, body.len());
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let code = crate::error::Code::TlsRequired;
        assert_eq!(v["error"]["code"], code.as_str());
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(head.starts_with(&format!("HTTP/1.1 {} ", code.status().as_u16())));
    }

    #[test]
    fn missing_or_wrong_files_are_named() {
        let dir = std::env::temp_dir().join(format!("duet-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not pem").unwrap();
        let e = TlsConfig::load(&dir.join("absent.pem"), &junk)
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("tls_cert"), "{e:#}");
        let e = TlsConfig::load(&junk, &junk).err().unwrap();
        assert!(format!("{e:#}").contains("tls_cert"), "{e:#}");
    }
}
