//! Auth: with --api-key every API route needs the key (not /health or the demo page's files) (Bearer header or the
//! browser subprotocol); without it everything is open.

use crate::common;
use common::*;

#[tokio::test]
async fn api_key_guards_every_route_but_health_and_ready() {
    let addr = server(&["--api-key", "sekret"]).await;
    assert_eq!(get(addr, "/health", &[]).await.0, 200);
    let (status, body) = get(addr, "/v1/models", &[]).await;
    assert_eq!(status, 401);
    assert!(body.contains("invalid_api_key"), "{body}");
    assert_eq!(
        get(addr, "/v1/models", &[("Authorization", "Bearer wrong")])
            .await
            .0,
        401
    );
    assert_eq!(
        get(addr, "/v1/models", &[("Authorization", "Bearer sekret")])
            .await
            .0,
        200
    );
    // Readiness needs no key (orchestrators' probes send none), but shows no counts without it.
    let (status, text) = get(addr, "/ready", &[]).await;
    assert_eq!(status, 200);
    assert!(text.ends_with("\r\n\r\n{\"status\":\"ready\"}"), "{text}");
    let (_, body) = get(addr, "/ready", &[("Authorization", "Bearer sekret")]).await;
    assert!(body.contains("\"sessions\""), "{body}");
    // The demo page's static files hold no secrets and load without the key (the page asks for it).
    assert_eq!(get(addr, "/", &[]).await.0, 200);
    assert_eq!(get(addr, "/app.js", &[]).await.0, 200);

    let refused = Client::connect_with(addr, &[]).await;
    assert!(refused.is_err(), "websocket without a key must be refused");
    let _ok = Client::connect_with(addr, &[("Authorization", "Bearer sekret")])
        .await
        .expect("bearer accepted");
    let _browser = Client::connect_with(
        addr,
        &[(
            "Sec-WebSocket-Protocol",
            "realtime, openai-insecure-api-key.sekret",
        )],
    )
    .await
    .expect("subprotocol key accepted");
}

#[tokio::test]
async fn without_api_key_everything_is_open() {
    let addr = server(&[]).await;
    assert_eq!(get(addr, "/v1/models", &[]).await.0, 200);
    let _c = Client::connect(addr).await;
}
