//! The demo page on a public name over Duet's own TLS (`--tls-cert`/`--tls-key`): Chromium
//! opens `https://duet.test:PORT/` (the name mapped to 127.0.0.1 by its host resolver, the
//! server's certificate, which a test CA signed for that name, trusted by its key's SPKI
//! hash), so the page is a secure context on a name that is not the machine's own and may
//! open the microphone; then the echo scenario runs: a WebRTC call whose offer goes over
//! HTTPS, and the WebSocket fallback over `wss://`.

use crate::common;
use common::tls::server_certificate;
use std::process::Command;

/// The base64 SHA-256 of the certificate's public key (what Chromium's
/// `--ignore-certificate-errors-spki-list` names).
fn spki_sha256(cert: &std::path::Path) -> String {
    let script = format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64",
        cert.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_over_https_on_a_public_name() {
    let (dir, cert, key) = server_certificate("demo-https");
    let spki = spki_sha256(std::path::Path::new(&cert));
    let addr = common::server(&["--tls-cert", &cert, "--tls-key", &key]).await;
    let resolve = "--host-resolver-rules=MAP duet.test 127.0.0.1".to_string();
    let trust = format!("--ignore-certificate-errors-spki-list={spki}");
    common::browser::run_demo_at(
        &format!("https://duet.test:{}/", addr.port()),
        &[
            "--chromium-arg",
            &resolve,
            "--chromium-arg",
            &trust,
            "--expect-secure",
        ],
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
