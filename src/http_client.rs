//! The HTTP client of everything Duet calls: the LLM upstream, the SIP webhook and the
//! forwards between cluster nodes are built here, one way: pooled keep-alive HTTP/1.1
//! connections with `TCP_NODELAY`, `http://` and `https://` alike. TLS is rustls (the
//! aws-lc-rs provider DTLS and `rediss://` use already), checked against the system's roots,
//! or the PEM bundle that `SSL_CERT_FILE` names (and `SSL_CERT_DIR`), as `rediss://` is.
//!
//! Each caller keeps its own pool, because its connect timeout is its own (a cluster node
//! must answer within 2 s; an LLM within `--llm-timeout-secs`); the TLS settings and the
//! roots are loaded once per process.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::TokioExecutor;

/// A pooled client for `http://` and `https://` URLs, with request bodies in one piece
/// (cloned cheaply: the clones share the pool).
#[derive(Clone)]
pub struct HttpClient {
    client: Arc<Client<HttpsConnector<HttpConnector>, Full<Bytes>>>,
    upstream: &'static str,
}

/// How one caller's pool behaves.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    /// The longest a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long an idle connection is kept.
    pub idle_timeout: Duration,
    /// The most idle connections kept per host.
    pub max_idle_per_host: usize,
    /// What is called, as `duet_upstream_tls_failures_total` labels it (`llm`, `webhook`, …).
    pub upstream: &'static str,
}

impl HttpClient {
    /// A client with its own pool.
    pub fn new(pool: Pool) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(pool.connect_timeout));
        http.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls_config()).clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(pool.idle_timeout)
            .pool_max_idle_per_host(pool.max_idle_per_host)
            .build(https);
        Self {
            client: Arc::new(client),
            upstream: pool.upstream,
        }
    }

    /// Sends `req` (the caller bounds how long it waits).
    pub fn request(&self, req: hyper::Request<Full<Bytes>>) -> ResponseFuture {
        self.client.request(req)
    }

    /// Sends `req`; a failure comes back as a sentence ([`describe`]), a TLS one counted.
    pub async fn send(
        &self,
        req: hyper::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.client.request(req).await.map_err(|e| {
            if is_tls(&e) {
                crate::metrics::METRICS.upstream_tls_failure(self.upstream);
            }
            describe(&e)
        })
    }
}

/// Whether `url` is one this client can reach: `http://` or `https://` with a host.
pub fn check_url(uri: &hyper::Uri) -> Result<(), &'static str> {
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        Some("http" | "https") => Err("has no host"),
        _ => Err("must be an http:// or https:// URL"),
    }
}

/// The process's TLS client settings: the aws-lc-rs provider, TLS 1.2 and 1.3, the roots
/// loaded once. Roots that fail to load leave the set empty (every `https://` request then
/// fails, naming the certificate problem); the reason is logged once.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "https: a trusted certificate could not be read");
            }
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                tracing::warn!(
                    ignored,
                    "https: no trusted certificates (install ca-certificates or set SSL_CERT_FILE): every https:// upstream will be refused"
                );
            }
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("aws-lc-rs supports the default TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

/// Why a request got no response, in a sentence: a TLS failure says so and what was wrong
/// with the certificate ("TLS: invalid peer certificate: UnknownIssuer"); anything else is
/// its innermost cause ("Connection refused (os error 111)").
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(tls) = tls_error(e) {
        return format!("TLS: {tls}");
    }
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Whether `e` is a TLS failure (a rustls error anywhere in its chain).
pub fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    tls_error(e).is_some()
}

/// The rustls error in `e`'s chain. An `io::Error` hides the error it wraps from
/// `source()` (it returns that error's own source), and the connector wraps one `io::Error`
/// in another, so each `io::Error` is opened instead.
fn tls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        cur = match err.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_http_or_https_and_a_host() {
        let ok = |u: &str| check_url(&u.parse().unwrap());
        assert_eq!(ok("http://127.0.0.1:8000/v1"), Ok(()));
        assert_eq!(ok("https://api.openai.com/v1"), Ok(()));
        assert!(ok("ftp://host/").is_err());
        assert!(ok("/v1").is_err());
    }

    #[test]
    fn a_tls_failure_inside_an_io_error_is_named() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        assert!(is_tls(&io));
        assert_eq!(
            describe(&io),
            "TLS: invalid peer certificate: UnknownIssuer"
        );
        // As the connector reports it: one io::Error inside another.
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let outer = std::io::Error::other(inner);
        assert!(describe(&outer).starts_with("TLS: invalid peer certificate: Expired"));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!is_tls(&refused));
        assert_eq!(describe(&refused), refused.to_string());
    }
}
