//! Offers that must be refused fast, with JSON errors and nothing allocated; CORS; limits.

use crate::common;
use common::*;
use duet_client::http::request;

const OFFER: &str = include_str!("fixtures/chrome_offer.sdp");

async fn post(addr: std::net::SocketAddr, ctype: &str, body: &str) -> (u16, String, String) {
    let r = request(
        addr,
        "POST",
        "/v1/realtime/calls",
        &[("Content-Type", ctype)],
        body,
    )
    .await
    .unwrap();
    (r.status, r.head, r.body)
}

#[tokio::test]
async fn bad_offer_matrix() {
    let addr = server(&[]).await;
    let no_fp: String = OFFER
        .lines()
        .filter(|l| !l.starts_with("a=fingerprint"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("not sdp", "hello".into(), 400, "invalid_sdp"),
        ("empty", String::new(), 400, "invalid_sdp"),
        (
            "too large",
            format!("{OFFER}{}", "a=x:y\r\n".repeat(3000)),
            413,
            "sdp_too_large",
        ),
        (
            "video only",
            OFFER.replace("m=audio", "m=video"),
            400,
            "sdp_no_audio",
        ),
        (
            "g722 only",
            OFFER.replace("111 0 8", "9"),
            400,
            "sdp_no_supported_codec",
        ),
        (
            "no ice",
            OFFER.replace("a=ice-ufrag:", "a=x-ufrag:"),
            400,
            "sdp_missing_ice_credentials",
        ),
        ("no fingerprint", no_fp, 400, "sdp_missing_fingerprint"),
    ];
    for (name, body, status, code) in cases {
        let (s, head, b) = post(addr, "application/sdp", &body).await;
        assert_eq!(s, status, "{name}: {b}");
        assert!(
            head.to_lowercase()
                .contains("content-type: application/json"),
            "{name}: {head}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&b).unwrap_or_else(|_| panic!("{name}: JSON body, got {b}"));
        assert_eq!(v["error"]["code"], code, "{name}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    let (s, _, b) = post(addr, "text/plain", OFFER).await;
    assert_eq!(s, 415, "{b}");
    // Nothing was allocated: a good offer still gets a call.
    let (s, head, answer) = post(addr, "application/sdp", OFFER).await;
    assert_eq!(s, 201, "{answer}");
    assert!(head
        .to_lowercase()
        .contains("content-type: application/sdp"));
    assert!(head.contains("location: /v1/realtime/calls/rtc_"), "{head}");
    assert!(
        answer.contains("a=ice-lite") && answer.contains("opus/48000/2"),
        "{answer}"
    );
}

#[tokio::test]
async fn oversized_bodies_answer_413_from_content_length() {
    let addr = server(&[]).await;
    // Only the head is sent: the declared length alone gets the answer, nothing is read.
    for (ctype, len, code) in [
        ("application/sdp", "16385", "sdp_too_large"),
        (
            "multipart/form-data; boundary=b",
            "65537",
            "request_too_large",
        ),
    ] {
        let (s, head) = send(
            addr,
            "POST",
            "/v1/realtime/calls",
            &[("Content-Type", ctype), ("Content-Length", len)],
            "",
        )
        .await;
        assert_eq!(s, 413, "{ctype}: {head}");
        assert!(head.contains(code), "{ctype}: {head}");
    }
}

#[tokio::test]
async fn g711_only_offer_gets_g711_answer() {
    let addr = server(&[]).await;
    let pcmu = OFFER
        .replace("111 0 8", "0 8")
        .replace("a=rtpmap:111 opus/48000/2\r\n", "")
        .replace("a=fmtp:111 minptime=10;useinbandfec=1\r\n", "");
    let (s, _, answer) = post(addr, "application/sdp", &pcmu).await;
    assert_eq!(s, 201, "{answer}");
    assert!(
        answer.contains("PCMU/8000") && !answer.contains("opus"),
        "{answer}"
    );
}

#[tokio::test]
async fn multipart_offer_seeds_the_session() {
    let addr = server(&[]).await;
    let boundary = "duet-test-boundary";
    let session = r#"{"type":"realtime","model":"gpt-realtime","instructions":"from multipart"}"#;
    let body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"sdp\"\r\n\r\n{OFFER}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"session\"\r\n\r\n{session}\r\n--{boundary}--\r\n");
    let (s, _, answer) = post(
        addr,
        &format!("multipart/form-data; boundary={boundary}"),
        &body,
    )
    .await;
    assert_eq!(s, 201, "{answer}");
    let bad = body.replace("from multipart\"", "x\",\"voice\":\"alloy\"");
    let (s, _, b) = post(
        addr,
        &format!("multipart/form-data; boundary={boundary}"),
        &bad,
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert!(
        b.contains("session.voice") || b.contains("unknown field"),
        "{b}"
    );
}

#[tokio::test]
async fn over_max_calls_is_503_with_retry_after() {
    let addr = server(&["--max-calls", "1"]).await;
    assert_eq!(post(addr, "application/sdp", OFFER).await.0, 201);
    let (s, head, b) = post(addr, "application/sdp", OFFER).await;
    assert_eq!(s, 503, "{b}");
    assert!(head.to_lowercase().contains("retry-after: 5"), "{head}");
}

#[tokio::test]
async fn cors_preflight_and_exposed_location() {
    let addr = server(&["--api-key", "k"]).await;
    let (s, head) = send(
        addr,
        "OPTIONS",
        "/v1/realtime/calls",
        &[
            ("Origin", "http://example.test"),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization,content-type,x-openai-agents-sdk",
            ),
        ],
        "",
    )
    .await;
    assert!(s == 200 || s == 204, "{head}");
    let h = head.to_lowercase();
    assert!(h.contains("access-control-allow-origin: *"), "{head}");
    assert!(
        h.contains("authorization") && h.contains("x-openai-agents-sdk"),
        "{head}"
    );
    let (s, head) = send(
        addr,
        "POST",
        "/v1/realtime/calls",
        &[
            ("Origin", "http://example.test"),
            ("Authorization", "Bearer k"),
            ("Content-Type", "application/sdp"),
        ],
        OFFER,
    )
    .await;
    assert_eq!(s, 201, "{head}");
    assert!(
        head.to_lowercase()
            .contains("access-control-expose-headers: location"),
        "{head}"
    );
    assert_eq!(post(addr, "application/sdp", OFFER).await.0, 401);
    let r = request(
        addr,
        "POST",
        "/v1/realtime/calls/rtc_00000000000000000000000000000000/hangup",
        &[("Authorization", "Bearer k")],
        "",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404);
}

/// Any request; returns the status and the whole response text.
async fn send(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let r = request(addr, method, path, headers, body).await.unwrap();
    (r.status, r.text())
}
