//! A session outlives its secret, on resume too: a durable session opened with a
//! 10-second client secret is resumed after the secret expired with that secret and the
//! session's resume token (the token proves the session), while the expired secret opens
//! nothing new.

use crate::common;
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use duet_client::http::request;
use serde_json::{json, Value};

const KEY: &str = "server-key";

async fn short_secret(addr: SocketAddr) -> String {
    let body = json!({"expires_after": {"anchor": "created_at", "seconds": 10}}).to_string();
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer server-key"),
    ];
    let r = request(addr, "POST", "/v1/realtime/client_secrets", &headers, &body)
        .await
        .expect("mint");
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).expect("json");
    v["value"].as_str().expect("value").to_string()
}

fn resume(created: &Value, token: &str) -> Value {
    json!({"type": "session.resume", "session_id": created["session"]["id"],
        "resume_token": token, "last_received_server_event_seq": 0})
}

#[tokio::test]
async fn an_expired_secret_resumes_its_session_with_the_token_and_opens_nothing_else() {
    let addr = server(&["--api-key", KEY, "--disconnect-grace-secs", "60"]).await;
    let ek = short_secret(addr).await;
    let bearer = format!("Bearer {ek}");
    let auth = [("Authorization", bearer.as_str())];
    let ws = Client::connect_url(&format!("ws://{addr}/v1/realtime?duplex=1"), &auth)
        .await
        .expect("durable session");
    let created = ws.log[0].clone();
    let token = created["resume_token"].as_str().expect("token").to_string();
    drop(ws);
    tokio::time::sleep(Duration::from_secs(11)).await;

    // Expired: no new session, no call, no sideband.
    let e = refused(Client::connect_url(&format!("ws://{addr}/v1/realtime"), &auth).await);
    assert_eq!(handshake_status(&e), 401);
    let offer = include_str!("fixtures/chrome_offer.sdp");
    let r = duet_client::http::post_call(addr, "?duplex=1", "application/sdp", offer, Some(&ek))
        .await
        .expect_err("an expired secret opens no call")
        .to_string();
    assert!(r.contains("401"), "{r}");

    // A wrong token proves nothing.
    let url = format!("ws://{addr}/v1/realtime?duplex=1&resume=1");
    let mut wrong = Client::open(&url, &auth).await.expect("resume socket");
    wrong.send(resume(&created, "bm90LXRoZS10b2tlbg")).await;
    let e = wrong.next().await;
    assert_eq!(e["error"]["code"], "invalid_resume_token", "{e}");

    // The token does: the session resumes with its conversation.
    let mut ws = Client::open(&url, &auth).await.expect("resume socket");
    ws.send(resume(&created, &token)).await;
    let resumed = ws.next().await;
    assert_eq!(resumed["type"], "session.resumed", "{resumed}");
    assert_eq!(resumed["session"]["id"], created["session"]["id"]);
}
