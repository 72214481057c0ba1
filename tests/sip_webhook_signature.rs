//! The SIP connector's `realtime.call.incoming` webhook, as Duet signs it
//! (`duet_signaling::webhook`), is accepted by the official `openai` Python SDK's
//! `client.webhooks.unwrap()`, which parses it as its `RealtimeCallIncomingWebhookEvent`;
//! a tampered body or another secret is refused.

use crate::common;

use base64::Engine;
use common::external;
use duet_signaling::webhook::{call_incoming_event, WebhookSecret};

const UNWRAP: &str = r#"
import json, sys
from openai import OpenAI
secret, body, wid, ts, sig = sys.argv[1:]
client = OpenAI(api_key="unused", webhook_secret=secret)
headers = {"webhook-id": wid, "webhook-timestamp": ts, "webhook-signature": sig}
event = client.webhooks.unwrap(body, headers)
print(type(event).__name__, event.type, event.data.call_id,
      ",".join(f"{h.name}={h.value}" for h in event.data.sip_headers))
"#;

async fn unwrap(secret: &str, body: &str, id: &str, ts: u64, sig: &str) -> (bool, String) {
    let python = external::python();
    let mut cmd = python.command();
    cmd.arg("-c")
        .arg(UNWRAP)
        .args([secret, body, id, &ts.to_string(), sig]);
    let out = cmd.output().await.expect("python runs");
    let text = String::from_utf8_lossy(if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    })
    .trim()
    .to_string();
    (out.status.success(), text)
}

#[tokio::test]
async fn the_official_sdk_unwraps_a_signed_incoming_call() {
    let python = external::python();
    external::require_python_modules(
        &python,
        &["openai.types.webhooks:RealtimeCallIncomingWebhookEvent"],
        external::PYTHON_HOW_TO_INSTALL,
    )
    .await;
    let key: [u8; 24] = rand::random();
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    );
    let signer = WebhookSecret::parse(&secret).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = [
        (
            "From".to_string(),
            "<sip:+15551234567@trunk.example>;tag=a1".to_string(),
        ),
        ("To".to_string(), "<sip:duet@127.0.0.1>".to_string()),
        ("Call-ID".to_string(), "c0ffee@trunk.example".to_string()),
    ];
    let body = call_incoming_event("evt_duet1", now, "rtc_test1", &headers);
    let sig = signer.sign("evt_duet1", now, body.as_bytes());

    let (ok, out) = unwrap(&secret, &body, "evt_duet1", now, &sig).await;
    assert!(ok, "{out}");
    assert_eq!(
        out,
        "RealtimeCallIncomingWebhookEvent realtime.call.incoming rtc_test1 \
         From=<sip:+15551234567@trunk.example>;tag=a1,To=<sip:duet@127.0.0.1>,Call-ID=c0ffee@trunk.example"
    );

    let tampered = body.replace("rtc_test1", "rtc_test2");
    let (ok, out) = unwrap(&secret, &tampered, "evt_duet1", now, &sig).await;
    assert!(!ok && out.contains("InvalidWebhookSignatureError"), "{out}");
    let other = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([7u8; 24])
    );
    let (ok, out) = unwrap(&other, &body, "evt_duet1", now, &sig).await;
    assert!(!ok && out.contains("InvalidWebhookSignatureError"), "{out}");
}
