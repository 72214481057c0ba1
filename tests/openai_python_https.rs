//! Duet's own TLS (`--tls-cert`/`--tls-key`, a certificate a test CA signed) used by the
//! official OpenAI Python SDK: `tests/python/openai_realtime.py` (session.update, errors, an
//! audio turn, a cancelled response) over `https://` and its realtime `wss://` socket, the
//! SDK trusting the CA through `SSL_CERT_FILE`.

use crate::common;
use common::external;
use common::process::ServerProcess;
use common::tls::server_certificate;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_talks_to_duet_over_https_and_wss() {
    let (dir, cert, key) = server_certificate("sdk-https");
    let server = ServerProcess::spawn(&["--tls-cert", &cert, "--tls-key", &key]);
    let ca = dir.join("ca.pem").display().to_string();
    let url = format!("https://{}/v1", server.addr);
    let out = external::run_openai_python_at(
        "openai_realtime.py",
        &url,
        &[("SSL_CERT_FILE", ca.as_str()), ("SSL_CERT_DIR", "")],
    )
    .await;
    println!("{out}");
}
