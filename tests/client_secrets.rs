//! Ephemeral client secrets: minting (server key only, OpenAI's shapes and ranges), what a
//! secret opens (WebSocket by Bearer or subprotocol, calls), refusals before anything is
//! allocated, expiry, and scoping (another secret's call is not found).

use crate::common;
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use duet_client::http::{request, Response};
use serde_json::{json, Value};

const KEY: &str = "server-key";

async fn mint(addr: SocketAddr, auth: Option<&str>, body: Value) -> Response {
    let bearer = auth.map(|k| format!("Bearer {k}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(b) = &bearer {
        headers.push(("Authorization", b.as_str()));
    }
    request(
        addr,
        "POST",
        "/v1/realtime/client_secrets",
        &headers,
        &body.to_string(),
    )
    .await
    .expect("request")
}

async fn secret(addr: SocketAddr, body: Value) -> String {
    let r = mint(addr, Some(KEY), body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).expect("json");
    v["value"].as_str().expect("value").to_string()
}

async fn post_call(addr: SocketAddr, key: &str) -> Response {
    let offer = include_str!("fixtures/chrome_offer.sdp");
    let bearer = format!("Bearer {key}");
    let headers = [
        ("Content-Type", "application/sdp"),
        ("Authorization", bearer.as_str()),
    ];
    request(addr, "POST", "/v1/realtime/calls", &headers, offer)
        .await
        .expect("request")
}

fn error_of(r: &Response) -> Value {
    serde_json::from_str::<Value>(&r.body).expect("json error")["error"].clone()
}

#[tokio::test]
async fn minting_follows_openai_shapes_and_needs_the_server_key() {
    let addr = server(&["--api-key", KEY]).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let r = mint(
        addr,
        Some(KEY),
        json!({"session": {"type": "realtime", "instructions": "be brief"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).expect("json");
    let value = v["value"].as_str().expect("value");
    assert!(value.starts_with("ek_") && value.len() >= 3 + 22, "{value}");
    let expires = v["expires_at"].as_u64().expect("expires_at");
    assert!(
        (now + 598..=now + 602).contains(&expires),
        "default 600 s: {expires} vs {now}"
    );
    assert_eq!(v["session"]["object"], "realtime.session");
    assert_eq!(v["session"]["instructions"], "be brief");
    assert!(v["session"]["id"]
        .as_str()
        .is_some_and(|i| i.starts_with("sess_")));

    let r = mint(addr, None, json!({})).await;
    assert_eq!(r.status, 401, "no key");
    let r = mint(addr, Some(value), json!({})).await;
    assert_eq!(r.status, 401, "a secret cannot mint");
    for (body, param) in [
        (
            json!({"expires_after": {"anchor": "created_at", "seconds": 9}}),
            "expires_after.seconds",
        ),
        (
            json!({"expires_after": {"anchor": "created_at", "seconds": 7201}}),
            "expires_after.seconds",
        ),
        (
            json!({"expires_after": {"anchor": "now", "seconds": 60}}),
            "expires_after.anchor",
        ),
        (json!({"nope": 1}), ""),
        (json!({"session": {"type": "translation"}}), "session.type"),
        (
            json!({"session": {"type": "realtime", "instructions": 5}}),
            "session.instructions",
        ),
    ] {
        let r = mint(addr, Some(KEY), body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = error_of(&r);
        assert_eq!(e["type"], "invalid_request_error", "{body}");
        if !param.is_empty() {
            assert_eq!(e["param"], param, "{body}: {e}");
        }
    }
    // A secret is no key for the other routes.
    let bearer = format!("Bearer {value}");
    let r = request(
        addr,
        "GET",
        "/metrics",
        &[("Authorization", bearer.as_str())],
        "",
    )
    .await
    .expect("metrics");
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn a_secret_opens_sessions_with_its_configuration_and_they_outlive_nothing_else() {
    let addr = server(&["--api-key", KEY]).await;
    let ek = secret(
        addr,
        json!({"session": {"type": "realtime", "instructions": "from the secret"}}),
    )
    .await;
    let url = format!("ws://{addr}/v1/realtime?model=echo");
    let bearer = format!("Bearer {ek}");
    let c = Client::connect_url(&url, &[("Authorization", bearer.as_str())])
        .await
        .expect("a session with the secret");
    assert_eq!(c.log[0]["session"]["instructions"], "from the secret");
    // Several sessions from one secret; the subprotocol works too.
    let proto = format!("realtime, openai-insecure-api-key.{ek}");
    let c2 = Client::connect_url(&url, &[("Sec-WebSocket-Protocol", proto.as_str())])
        .await
        .expect("a second session, subprotocol key");
    assert_eq!(c2.log[0]["session"]["instructions"], "from the secret");
    let r = post_call(addr, &ek).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn bad_secrets_are_refused_before_anything_is_allocated() {
    let addr = server(&["--api-key", KEY]).await;
    for key in ["ek_unknown", "ek_", "not-a-key"] {
        let r = post_call(addr, key).await;
        assert_eq!(r.status, 401, "{key}");
        let url = format!("ws://{addr}/v1/realtime?model=echo");
        let bearer = format!("Bearer {key}");
        let e = refused(Client::connect_url(&url, &[("Authorization", bearer.as_str())]).await);
        assert_eq!(handshake_status(&e), 401, "{key}");
    }
    // Calls (the media engines) and model slots: nothing was allocated.
    let with_key = format!("Bearer {KEY}");
    let r = request(
        addr,
        "GET",
        "/ready",
        &[("Authorization", with_key.as_str())],
        "",
    )
    .await
    .expect("ready");
    assert_eq!(r.status, 200, "{}", r.body);
    let ready: Value = serde_json::from_str(&r.body).expect("ready json");
    assert_eq!(
        (ready["calls"].as_u64(), ready["sessions"].as_u64()),
        (Some(0), Some(0)),
        "{ready}"
    );
}

#[tokio::test]
async fn a_secret_expires() {
    let addr = server(&["--api-key", KEY]).await;
    let ek = secret(
        addr,
        json!({"expires_after": {"anchor": "created_at", "seconds": 10}}),
    )
    .await;
    let url = format!("ws://{addr}/v1/realtime?model=echo");
    let bearer = format!("Bearer {ek}");
    let c = Client::connect_url(&url, &[("Authorization", bearer.as_str())])
        .await
        .expect("valid now");
    tokio::time::sleep(Duration::from_secs(11)).await;
    let e = refused(Client::connect_url(&url, &[("Authorization", bearer.as_str())]).await);
    assert_eq!(handshake_status(&e), 401, "expired after 10 s");
    // The session it opened outlives it.
    let mut c = c;
    c.send(json!({"type":"input_audio_buffer.clear"})).await;
    c.until("input_audio_buffer.cleared").await;
}

/// The call id of a `201` answer (the last segment of `Location`).
fn call_id_of(r: &Response) -> String {
    let location = r.header("location").expect("location");
    location.rsplit('/').next().expect("id").to_string()
}

/// `POST /v1/realtime/calls/{id}/hangup` with `key`; the status.
async fn hangup_with(addr: SocketAddr, id: &str, key: &str) -> u16 {
    let path = format!("/v1/realtime/calls/{id}/hangup");
    let bearer = format!("Bearer {key}");
    request(
        addr,
        "POST",
        &path,
        &[("Authorization", bearer.as_str())],
        "",
    )
    .await
    .expect("hangup")
    .status
}

#[tokio::test]
async fn another_secret_does_not_find_a_call() {
    let addr = server(&["--api-key", KEY]).await;
    let a = secret(addr, json!({})).await;
    let b = secret(addr, json!({})).await;
    let r = post_call(addr, &a).await;
    assert_eq!(r.status, 201);
    let id = call_id_of(&r);
    assert_eq!(
        hangup_with(addr, &id, &b).await,
        404,
        "another secret: not found"
    );
    let sideband = format!("ws://{addr}/v1/realtime?call_id={id}");
    let with_b = format!("Bearer {b}");
    let e = refused(Client::connect_url(&sideband, &[("Authorization", with_b.as_str())]).await);
    assert_eq!(handshake_status(&e), 404);
    assert_eq!(hangup_with(addr, &id, &a).await, 200, "its own secret");
    let id = call_id_of(&post_call(addr, &b).await);
    assert_eq!(
        hangup_with(addr, &id, KEY).await,
        200,
        "the server key reaches every call"
    );
}

#[tokio::test]
async fn another_secret_cannot_resume_a_session() {
    let addr = server(&["--api-key", KEY]).await;
    let a = secret(addr, json!({})).await;
    let b = secret(addr, json!({})).await;
    let with_a = format!("Bearer {a}");
    let url = format!("ws://{addr}/v1/realtime?model=echo&duplex=1");
    let mut c = Client::open(&url, &[("Authorization", with_a.as_str())])
        .await
        .expect("durable session");
    let created = c.next().await;
    let resume = json!({"type":"session.resume","session_id": created["session"]["id"],
        "resume_token": created["resume_token"], "last_received_server_event_seq": 0});
    let url = format!("ws://{addr}/v1/realtime?duplex=1&resume=1");
    let with_b = format!("Bearer {b}");
    let mut other = Client::open(&url, &[("Authorization", with_b.as_str())])
        .await
        .expect("resume socket");
    other.send(resume.clone()).await;
    assert_eq!(
        other.next().await["error"]["code"],
        "session_resume_expired"
    );
    let mut own = Client::open(&url, &[("Authorization", with_a.as_str())])
        .await
        .expect("resume socket");
    own.send(resume).await;
    assert_eq!(own.next().await["type"], "session.resumed");
}

#[tokio::test]
async fn the_demo_mint_endpoint_exists_only_when_asked_for() {
    let addr = server(&["--api-key", KEY]).await;
    let r = request(addr, "POST", "/demo/client_secret", &[], "")
        .await
        .expect("post");
    assert_eq!(r.status, 404, "off by default");
    let addr = server(&["--api-key", KEY, "--demo-mint-secrets"]).await;
    let r = request(addr, "POST", "/demo/client_secret", &[], "")
        .await
        .expect("post");
    assert_eq!(r.status, 200, "{}", r.body);
    let ek = serde_json::from_str::<Value>(&r.body).expect("json")["value"]
        .as_str()
        .expect("ek")
        .to_string();
    assert_eq!(
        post_call(addr, &ek).await.status,
        201,
        "the minted secret opens calls"
    );
    let bearer = format!("Bearer {ek}");
    let r = request(
        addr,
        "GET",
        "/ready",
        &[("Authorization", bearer.as_str())],
        "",
    )
    .await
    .expect("ready");
    assert_eq!(
        r.status, 200,
        "a secret may read /ready, as a browser app does"
    );
}

#[tokio::test]
async fn a_transcription_secret_opens_a_transcription_session() {
    let addr = server(&["--api-key", KEY]).await;
    let r = mint(
        addr,
        Some(KEY),
        json!({"session": {"type": "transcription",
            "audio": {"input": {"transcription": {"model": "whisper-1"}}}}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).expect("json");
    assert_eq!(v["session"]["type"], "transcription", "{v}");
    let ek = v["value"].as_str().expect("value");
    let bearer = format!("Bearer {ek}");
    let url = format!("ws://{addr}/v1/realtime");
    let c = Client::connect_url(&url, &[("Authorization", bearer.as_str())])
        .await
        .expect("a session with the secret");
    let s = &c.log[0]["session"];
    assert_eq!(s["type"], "transcription", "{s}");
    assert_eq!(s["audio"]["input"]["transcription"]["model"], "whisper-1");
}

#[tokio::test]
async fn anonymous_demo_mints_cannot_starve_the_server_keys_mints() {
    let addr = server(&[
        "--api-key",
        KEY,
        "--demo-mint-secrets",
        "--max-client-secrets",
        "50",
    ])
    .await;
    let (mut minted, mut refused) = (0, 0);
    for _ in 0..60 {
        let r = request(addr, "POST", "/demo/client_secret", &[], "")
            .await
            .expect("request");
        match r.status {
            200 => minted += 1,
            429 => {
                assert_eq!(error_of(&r)["code"], "too_many_demo_secrets_from_ip");
                assert!(r.header("retry-after").is_some());
                refused += 1;
            }
            s => panic!("demo mint answered {s}: {}", r.body),
        }
    }
    assert_eq!(
        (minted, refused),
        (10, 50),
        "one address gets its share (--max-demo-secrets-per-ip 10)"
    );
    let r = mint(addr, Some(KEY), json!({})).await;
    assert_eq!(r.status, 200, "the server key's own mint: {}", r.body);
}
