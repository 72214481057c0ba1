//! `--sip-webhook-url https://…`: the `realtime.call.incoming` webhook reaches an app that
//! speaks TLS (the test's webhook app behind a TLS front whose certificate a test CA signed),
//! trusting the CA that `SSL_CERT_FILE` names, signed as without TLS. A server that does not
//! trust the CA gives the webhook up (each attempt counted in
//! `duet_upstream_tls_failures_total{upstream="webhook"}`) and the caller gets a final
//! failure instead of ringing forever.

use crate::common;
use common::process::ServerProcess;
use common::sip::{free_port, webhook_app, SECRET};
use common::tls::{plain_addr, tls_front, trusting_only, two_cas};
use common::*;
use duet_client::sip::Caller;
use std::net::SocketAddr;
use std::time::Duration;

/// A SIP server posting its webhook to `url`, trusting only the CA in `ca`; its SIP address.
fn sip_server(url: &str, ca: &std::path::Path) -> (ServerProcess, SocketAddr) {
    let sip: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let listen = sip.to_string();
    let flags = [
        "--sip-listen",
        listen.as_str(),
        "--sip-webhook-url",
        url,
        "--sip-webhook-secret",
        SECRET,
    ];
    let env = trusting_only(ca);
    let env = env.each_ref().map(|(k, v)| (*k, v.as_str()));
    (ServerProcess::spawn_env(&flags, &env), sip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_reaches_an_https_app_and_an_untrusted_one_fails_the_call() {
    let (dir, other) = two_cas("webhook-tls");
    let mut app = webhook_app().await;
    let url = format!(
        "https://{}/hook",
        tls_front(&dir, plain_addr(&app.url)).await
    );

    // Trusted: the app gets the call, its signature checked by webhook_app.
    let (_server, sip) = sip_server(&url, &dir.join("ca.pem"));
    let _caller = Caller::invite(sip, "alice").await.expect("invite sent");
    let call = app.next().await;
    assert!(call.call_id.starts_with("rtc_"), "{call:?}");
    assert_eq!(call.event["type"], "realtime.call.incoming");

    // Untrusted: another CA. The webhook is given up and the caller gets a final failure.
    let (server, sip) = sip_server(&url, &other.join("ca.pem"));
    let mut caller = Caller::invite(sip, "bob").await.expect("invite sent");
    let status = caller
        .answer(Duration::from_secs(15), |_| {})
        .await
        .expect("a final answer")
        .status;
    assert!(status >= 400, "the call fails: {status}");
    let (_, metrics) = get(server.addr, "/metrics", &[]).await;
    let tls = metrics
        .lines()
        .find(|l| l.starts_with("duet_upstream_tls_failures_total{upstream=\"webhook\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(tls >= 1, "TLS failures counted: {metrics}");
    println!("untrusted webhook: the caller got {status}; {tls} TLS failures counted");
    let _ = std::fs::remove_dir_all(&dir);
}
