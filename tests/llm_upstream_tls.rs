//! `--llm-url https://…`: the cascade and `/v1/chat/completions` reach an LLM that speaks
//! TLS (a scripted upstream, in OpenAI's chat-completions shapes, behind a TLS front whose
//! certificate a test CA signed), trusting the CA that `SSL_CERT_FILE` names; a server that
//! does not trust it fails each response with `llm_unavailable` naming the TLS problem,
//! counts it, and the session goes on.

use crate::common;
use common::process::ServerProcess;
use common::tls::{plain_addr, tls_front, trusting_only, two_cas};
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;

/// A cascade server (text answers) on `url`, trusting the CA in `ca` only.
fn cascade(url: &str, ca: &std::path::Path) -> ServerProcess {
    let flags = [
        "--model",
        "cascade",
        "--llm-url",
        url,
        "--llm-model",
        "smol",
    ];
    let env = trusting_only(ca);
    let env = env.each_ref().map(|(k, v)| (*k, v.as_str()));
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
    let (dir, other) = two_cas("llm-tls");
    let llm = ScriptedLlm::start(vec![Reply::text(&["Hello", " over TLS."])]).await;
    let front = tls_front(&dir, plain_addr(&llm.url)).await;
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
