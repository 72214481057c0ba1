//! Plain HTTP endpoints: health, readiness, models, the page, JSON 404s.

use crate::common;
use common::*;

#[tokio::test]
async fn endpoints_answer() {
    let addr = server(&[]).await;
    let (s, body) = get(addr, "/health", &[]).await;
    assert_eq!(s, 200);
    assert!(body.contains(r#"{"status":"ok"}"#));
    let (s, body) = get(addr, "/ready", &[]).await;
    assert_eq!(s, 200);
    assert!(body.contains(r#""model":"echo""#));
    let (s, body) = get(addr, "/v1/models", &[]).await;
    assert_eq!(s, 200);
    assert!(
        body.contains(r#""object":"list""#) && body.contains(r#""id":"echo""#),
        "{body}"
    );
    let (s, body) = get(addr, "/", &[]).await;
    assert_eq!(s, 200);
    assert!(body.to_lowercase().contains("text/html") && body.contains("<title>Duet"));
    let (s, body) = get(addr, "/nope", &[]).await;
    assert_eq!(s, 404);
    assert!(body.contains(r#""code":"not_found""#), "{body}");
    let err =
        tokio_tungstenite::connect_async(format!("ws://{addr}/v1/realtime?call_id=rtc_missing"))
            .await
            .unwrap_err();
    match err {
        tokio_tungstenite::tungstenite::Error::Http(resp) => assert_eq!(resp.status(), 404),
        other => panic!("expected HTTP 404, got {other}"),
    }
}
