//! Certificates made with `openssl` for loopback tests and benchmarks (a CA and a
//! certificate for 127.0.0.1 signed by it), and a TLS front: a loopback port that speaks TLS with that certificate and relays
//! each connection's bytes to a plain-TCP backend (a scripted upstream then answers on
//! `https://`, as a hosted API does).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

/// Writes `ca.pem`/`ca.key` and `srv.pem`/`srv.key` (for 127.0.0.1 and `duet.test`, signed
/// by the CA) into `dir`.
pub fn certificates(dir: &Path) {
    certificates_of(dir, "duet-test-ca");
}

/// [`certificates`] with a CA named `ca_name` (two CAs of one name look like one CA whose
/// signature is wrong).
pub fn certificates_of(dir: &Path, ca_name: &str) {
    let subject = format!("/CN={ca_name}");
    let run = |args: &[&str]| {
        let ok = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl runs (Debian package openssl)");
        assert!(ok.success(), "openssl {args:?}");
    };
    let ca = [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", &subject,
    ];
    run(&ca);
    let csr = [
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    ];
    run(&csr);
    // duet.test: a name a browser test maps to 127.0.0.1 (a page there is not on the
    // machine's own name, so it needs HTTPS for the microphone).
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1,DNS:duet.test\n",
    )
    .expect("ext");
    let sign = [
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ];
    run(&sign);
}

/// Listens on a loopback port with TLS (`dir`'s `srv.pem` and `srv.key`, from
/// [`certificates`]) and relays every connection to `backend`; returns the port's address.
/// A handshake the client aborts (it does not trust the certificate) just ends that
/// connection.
pub async fn tls_front(dir: &Path, backend: SocketAddr) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(dir.join("srv.pem"))
        .expect("srv.pem")
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(dir.join("srv.key")).expect("srv.key");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("the certificate and key match");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = plain.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}
