//! `GET /v1/usage` and `GET /v1/pool` (server key only) against a scripted workload: one
//! WebSocket session on the server key with a spoken turn, one on a client secret with a
//! text turn and an error; the usage figures match what the clients saw exactly (audio to
//! ±20 ms), and the pool lists both live sessions with their credentials and model slots.

use crate::common;
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use duet_client::http::request;
use serde_json::{json, Value};

const KEY: &str = "server-key";

async fn get_json(addr: SocketAddr, path: &str, key: &str) -> (u16, Value) {
    let bearer = format!("Bearer {key}");
    let r = request(addr, "GET", path, &[("Authorization", bearer.as_str())], "")
        .await
        .expect("GET");
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}

fn audio_secs(events: &[Value]) -> f64 {
    let bytes: usize = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .map(|e| b64_len(e["delta"].as_str().expect("delta")))
        .sum();
    bytes as f64 / 2.0 / 24_000.0
}

#[tokio::test]
async fn usage_and_pool_match_a_scripted_workload() {
    let addr = server(&["--api-key", KEY]).await;
    let bearer = format!("Bearer {KEY}");
    let r = request(
        addr,
        "POST",
        "/v1/realtime/client_secrets",
        &[
            ("Authorization", bearer.as_str()),
            ("Content-Type", "application/json"),
        ],
        "{}",
    )
    .await
    .expect("mint");
    let ek = serde_json::from_str::<Value>(&r.body).expect("json")["value"]
        .as_str()
        .expect("ek")
        .to_string();
    let url = format!("ws://{addr}/v1/realtime?model=echo");

    // The server key: a spoken turn of exactly 1.5 s of audio in.
    let mut a = Client::connect_url(&url, &[("Authorization", bearer.as_str())])
        .await
        .expect("session a");
    a.manual_turns().await;
    let mut audio = silence(0.25);
    audio.extend(voiced(1.0));
    audio.extend(silence(0.25));
    a.append(&audio).await;
    a.send(json!({"type":"input_audio_buffer.commit"})).await;
    a.until("conversation.item.done").await;
    a.send(json!({"type":"response.create"})).await;
    let a_events = a.collect_until("response.done").await;

    // A client secret: a text turn and one error.
    let with_ek = format!("Bearer {ek}");
    let mut b = Client::connect_url(&url, &[("Authorization", with_ek.as_str())])
        .await
        .expect("session b");
    b.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello there"}]}})).await;
    b.send(json!({"type":"response.create"})).await;
    let b_events = b.collect_until("response.done").await;
    b.send(json!({"type":"no.such.event"})).await;
    b.until("error").await;

    let (status, u) = get_json(addr, "/v1/usage", KEY).await;
    assert_eq!(status, 200, "{u}");
    let server = &u["credentials"]["server"];
    assert_eq!(server["sessions"], 1, "{u}");
    assert_eq!(server["responses"]["completed"], 1, "{u}");
    let audio_in = server["audio_in_seconds"].as_f64().expect("audio in");
    assert!((audio_in - 1.5).abs() <= 0.02, "audio in {audio_in}");
    let out = server["audio_out_seconds"].as_f64().expect("audio out");
    let heard = audio_secs(&a_events);
    assert!(
        (out - heard).abs() <= 0.02,
        "audio out {out} vs {heard} sent"
    );
    let creds = u["credentials"].as_object().expect("credentials");
    let (cred_id, secret) = creds
        .iter()
        .find(|(k, _)| k.starts_with("cred_"))
        .expect("the secret's credential");
    assert!(
        !ek.contains(&cred_id[5..]),
        "the id does not reveal the secret"
    );
    assert_eq!(secret["sessions"], 1);
    assert_eq!(secret["responses"]["completed"], 1);
    assert_eq!(secret["errors"]["unknown_event_type"], 1);
    assert_eq!(secret["audio_in_seconds"], 0.0);
    let out_b = secret["audio_out_seconds"].as_f64().expect("audio out");
    assert!((out_b - audio_secs(&b_events)).abs() <= 0.02, "{out_b}");
    assert_eq!(u["total"]["sessions"], 2);
    assert_eq!(u["total"]["responses"]["completed"], 2);

    let (status, p) = get_json(addr, "/v1/pool", KEY).await;
    assert_eq!(status, 200, "{p}");
    let sessions = p["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 2, "{p}");
    let ids: Vec<&Value> = sessions.iter().map(|s| &s["id"]).collect();
    assert!(ids.contains(&&a.log[0]["session"]["id"]) && ids.contains(&&b.log[0]["session"]["id"]));
    assert_eq!(sessions[0]["credential"], "server");
    assert_eq!(sessions[1]["credential"], cred_id.as_str());
    assert!(sessions
        .iter()
        .all(|s| s["transport"] == "websocket" && s["state"] == "open"));
    assert_ne!(sessions[0]["model_slot"], sessions[1]["model_slot"]);
    let slots = &p["model"]["slots"];
    assert_eq!(slots["active"], 2, "{p}");
    assert_eq!(
        slots["free"].as_u64().expect("free") + 2,
        slots["total"].as_u64().expect("total")
    );
    assert!(!p["engines"].as_array().expect("engines").is_empty());
    assert!(p["engines"][0]["udp_port"]
        .as_u64()
        .is_some_and(|port| port > 0));

    // Only the server key sees them.
    assert_eq!(get_json(addr, "/v1/usage", &ek).await.0, 401);
    assert_eq!(get_json(addr, "/v1/pool", &ek).await.0, 401);
    drop((a, b));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, p) = get_json(addr, "/v1/pool", KEY).await;
    assert_eq!(p["sessions"].as_array().map(Vec::len), Some(0), "{p}");
}

#[tokio::test]
async fn usage_counts_calls_and_their_sessions() {
    let addr = server(&["--api-key", KEY]).await;
    let offer = include_str!("fixtures/chrome_offer.sdp");
    for _ in 0..2 {
        duet_client::http::post_offer(addr, offer, Some(KEY))
            .await
            .expect("call answered");
    }
    let bearer = format!("Bearer {KEY}");
    let url = format!("ws://{addr}/v1/realtime");
    let _ws = Client::connect_url(&url, &[("Authorization", bearer.as_str())])
        .await
        .expect("session");
    let (status, u) = get_json(addr, "/v1/usage", KEY).await;
    assert_eq!(status, 200, "{u}");
    assert_eq!(
        (
            u["total"]["sessions"].as_u64(),
            u["total"]["calls"].as_u64()
        ),
        (Some(3), Some(2)),
        "two calls (each with its session) and a WebSocket session: {u}"
    );
    assert_eq!(u["credentials"]["server"]["calls"], 2, "{u}");
}
