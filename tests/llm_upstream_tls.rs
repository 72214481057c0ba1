//! `--llm-url https://…`: the cascade and `/v1/chat/completions` reach an LLM that speaks
//! TLS (a scripted upstream, in OpenAI's chat-completions shapes, behind a TLS front whose
//! certificate a test CA signed), trusting the CA that `SSL_CERT_FILE` names; a server that
//! does not trust it fails each response with `llm_unavailable` naming the TLS problem,
//! counts it, and the session goes on.

use crate::common;
use common::process::ServerProcess;
use common::tls::{certificates, certificates_of, tls_front};
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;

/// A cascade server (text answers) on `url`, trusting the CA in `ca` only (`SSL_CERT_DIR`
/// is an empty directory, so the machine's own roots play no part).
fn cascade(url: &str, ca: &std::path::Path) -> ServerProcess {
    let empty = ca.with_file_name("no-roots");
    std::fs::create_dir_all(&empty).expect("dir");
    let (ca, empty) = (ca.display().to_string(), empty.display().to_string());
    let flags = [
        "--model",
        "cascade",
        "--llm-url",
        url,
        "--llm-model",
        "smol",
    ];
    let env = [
        ("SSL_CERT_FILE", ca.as_str()),
        ("SSL_CERT_DIR", empty.as_str()),
    ];
    ServerProcess::spawn_env(&flags, &env)
}

async fn text_session(addr: std::net::SocketAddr) -> Client {
    let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects");
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "output_modalities":["text"]}}))
        .await;
    c.until("session.updated").await;
    c.send(
        json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":"hello"}]}}),
    )
    .await;
    c.until("conversation.item.done").await;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_llm_answers_and_an_untrusted_one_fails_clearly() {
    let dir = std::env::temp_dir().join(format!("duet-llm-tls-{}", common::unique()));
    std::fs::create_dir_all(&dir).expect("dir");
    certificates(&dir);
    let other = dir.join("other");
    std::fs::create_dir_all(&other).expect("dir");
    certificates_of(&other, "another-ca");
    let llm = ScriptedLlm::start(vec![Reply::text(&["Hello", " over TLS."])]).await;
    let plain: std::net::SocketAddr = llm
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .expect("the scripted LLM's address");
    let front = tls_front(&dir, plain).await;
    let url = format!("https://{front}/v1");

    // Trusted: the CA that signed the front's certificate.
    let server = cascade(&url, &dir.join("ca.pem"));
    let mut c = text_session(server.addr).await;
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    let text = done["response"]["output"][0]["content"][0]["text"].as_str();
    assert_eq!(text, Some("Hello over TLS."), "{done}");
    // /v1/chat/completions goes the same way.
    llm.push([Reply::text(&["Proxied."])]);
    let body = json!({"model":"x","messages":[{"role":"user","content":"hi"}]}).to_string();
    let r = duet_client::http::request(server.addr, "POST", "/v1/chat/completions", &[], &body)
        .await
        .expect("answered");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("Proxied."), "{}", r.body);
    // Both on one pooled TLS connection (the front opens one backend connection for each).
    assert_eq!(*llm.connections.lock().unwrap(), 1);

    // Untrusted: another CA.
    let server = cascade(&url, &other.join("ca.pem"));
    let mut c = text_session(server.addr).await;
    for _ in 0..2 {
        c.send(json!({"type":"response.create"})).await;
        let done = c.until("response.done").await;
        assert_eq!(done["response"]["status"], "failed", "{done}");
        let error = &done["response"]["status_details"]["error"];
        assert_eq!(error["code"], "llm_unavailable", "{done}");
        let err = c.until("error").await;
        assert_eq!(err["error"]["code"], "llm_unavailable", "{err}");
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("TLS") && message.contains("certificate"),
            "{message}"
        );
        println!("untrusted upstream: {message}");
    }
    let (status, metrics) = get(server.addr, "/metrics", &[]).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("duet_upstream_tls_failures_total{upstream=\"llm\"} 2"),
        "{metrics}"
    );
}
