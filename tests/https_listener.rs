//! `--tls-cert`/`--tls-key`: the HTTP port speaks HTTPS. The API answers over TLS, a
//! `wss://` session opens on it, plain HTTP to the port is answered `400 tls_required` in
//! clear and served nothing, a client that does not trust the certificate cannot talk to
//! it, and SIGHUP swaps in a renewed certificate (signed by another CA) for the next
//! connections while a session opened before it goes on.

use crate::common;
use common::process::ServerProcess;
use common::tls::{certificates, certificates_of};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// A TLS connection to `addr` that trusts only the CA in `ca`.
async fn tls_connect(addr: SocketAddr, ca: &Path) -> std::io::Result<Tls> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).expect("ca") {
        roots.add(cert.expect("pem")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    connector.connect(name, tcp).await
}

/// `GET path` over TLS, trusting `ca`; the whole response as text.
async fn https_get(addr: SocketAddr, ca: &Path, path: &str) -> std::io::Result<String> {
    let mut tls = tls_connect(addr, ca).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await?;
    let mut out = String::new();
    tls.read_to_string(&mut out).await?;
    Ok(out)
}

async fn next_event(ws: &mut tokio_tungstenite::WebSocketStream<Tls>) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("an event in time")
            .expect("open")
            .expect("frame");
        if let Message::Text(text) = msg {
            return serde_json::from_str(text.as_str()).expect("JSON");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_port_speaks_https_and_a_renewed_certificate_needs_no_restart() {
    let dir = std::env::temp_dir().join(format!("duet-https-{}", common::unique()));
    let renewed = dir.join("renewed");
    std::fs::create_dir_all(&renewed).expect("dir");
    certificates(&dir);
    certificates_of(&renewed, "renewed-ca");
    let (cert, key) = (dir.join("served.pem"), dir.join("served.key"));
    std::fs::copy(dir.join("srv.pem"), &cert).expect("copy");
    std::fs::copy(dir.join("srv.key"), &key).expect("copy");
    let (cert_s, key_s) = (cert.display().to_string(), key.display().to_string());
    let server = ServerProcess::spawn(&["--tls-cert", &cert_s, "--tls-key", &key_s]);
    let addr = server.addr;
    let (ca, new_ca) = (dir.join("ca.pem"), renewed.join("ca.pem"));

    // The API over TLS.
    let health = https_get(addr, &ca, "/health").await.expect("https");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let models = https_get(addr, &ca, "/v1/models").await.expect("https");
    assert!(
        models.starts_with("HTTP/1.1 200") && models.contains("echo"),
        "{models}"
    );

    // A wss:// session.
    let tls = tls_connect(addr, &ca).await.expect("tls");
    let url = format!("wss://{addr}/v1/realtime");
    let (mut ws, _) = tokio_tungstenite::client_async(url, tls)
        .await
        .expect("wss");
    assert_eq!(next_event(&mut ws).await["type"], "session.created");

    // Plain HTTP is answered in clear with 400 and nothing else.
    let mut plain = TcpStream::connect(addr).await.expect("tcp");
    let request = format!("GET /v1/models HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    plain.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    let read = plain.read_to_string(&mut answer);
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("closed")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("tls_required") && !answer.contains("echo"),
        "{answer}"
    );

    // A client that does not trust the certificate gets no connection.
    assert!(tls_connect(addr, &new_ca).await.is_err());

    // Renewal: new files, SIGHUP; new connections get the new certificate.
    std::fs::copy(renewed.join("srv.pem"), &cert).expect("copy");
    std::fs::copy(renewed.join("srv.key"), &key).expect("copy");
    server.signal(libc::SIGHUP);
    let start = Instant::now();
    while tls_connect(addr, &new_ca).await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(5), "not reloaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "renewed certificate served {} ms after SIGHUP",
        start.elapsed().as_millis()
    );
    assert!(
        tls_connect(addr, &ca).await.is_err(),
        "the old certificate is gone"
    );
    let health = https_get(addr, &new_ca, "/health").await.expect("https");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    // The session opened before goes on.
    let update =
        json!({"type":"session.update","session":{"type":"realtime","instructions":"Hi."}});
    ws.send(Message::text(update.to_string()))
        .await
        .expect("send");
    loop {
        let ev = next_event(&mut ws).await;
        assert_ne!(ev["type"], "error", "{ev}");
        if ev["type"] == "session.updated" {
            break;
        }
    }
}
