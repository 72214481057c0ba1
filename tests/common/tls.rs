//! Test certificates and the TLS front of scripted upstreams (`duet_client::tls`), and what
//! the upstream TLS tests share: a trusted CA and another, and a server environment that
//! trusts one CA only.

pub use duet_client::tls::{certificates, certificates_of, tls_front};

use std::path::{Path, PathBuf};

/// A fresh directory named after `tag` with `ca.pem` and `srv.pem`/`srv.key` (for 127.0.0.1
/// and `duet.test`), and below it `other/` with the same made by another CA (whose
/// certificates the first CA's clients do not trust). Returns both.
pub fn two_cas(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("duet-{tag}-{}", super::unique()));
    std::fs::create_dir_all(&dir).expect("dir");
    certificates(&dir);
    let other = dir.join("other");
    std::fs::create_dir_all(&other).expect("dir");
    certificates_of(&other, "another-ca");
    (dir, other)
}

/// A fresh directory named after `tag` with the test CA's `ca.pem` and a server
/// certificate for it; returns the directory and the `--tls-cert`/`--tls-key` paths.
pub fn server_certificate(tag: &str) -> (PathBuf, String, String) {
    let dir = std::env::temp_dir().join(format!("duet-{tag}-{}", super::unique()));
    std::fs::create_dir_all(&dir).expect("dir");
    certificates(&dir);
    let path = |f: &str| dir.join(f).display().to_string();
    let (cert, key) = (path("srv.pem"), path("srv.key"));
    (dir, cert, key)
}

/// The environment of a server process that trusts the CA in `ca` and nothing else
/// (`SSL_CERT_DIR` an empty directory, so the machine's own roots play no part).
pub fn trusting_only(ca: &Path) -> [(&'static str, String); 2] {
    let empty = ca.with_file_name("no-roots");
    std::fs::create_dir_all(&empty).expect("dir");
    [
        ("SSL_CERT_FILE", ca.display().to_string()),
        ("SSL_CERT_DIR", empty.display().to_string()),
    ]
}

/// The plain `host:port` of a `http://host:port/…` URL.
pub fn plain_addr(url: &str) -> std::net::SocketAddr {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {url}"))
}
