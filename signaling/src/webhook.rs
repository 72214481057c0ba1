//! Webhooks signed the Standard Webhooks way, as OpenAI signs its own (and as the official
//! SDKs' `webhooks.unwrap()` verifies them): headers `webhook-id`, `webhook-timestamp` (Unix
//! seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
//! the key being the base64 after `whsec_` of the secret (or the secret's own bytes when it
//! has no such prefix). Also the body of the SIP connector's `realtime.call.incoming` event.
//! Sans-IO: strings in, strings out; sending is the server's.

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Timestamps further than this from now are refused by [`WebhookSecret::verify`] (as the
/// SDKs refuse them), in seconds.
pub const TOLERANCE_SECS: u64 = 300;

/// Why a webhook secret is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    /// `whsec_` followed by something that is not base64.
    #[error("the webhook secret after whsec_ is not base64")]
    NotBase64,
    /// An empty key.
    #[error("the webhook secret is empty")]
    Empty,
}

/// A signing key. See the module docs.
#[derive(Clone)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(redacted)")
    }
}

impl WebhookSecret {
    /// The key of `secret` (`whsec_<base64>`, or raw).
    pub fn parse(secret: &str) -> Result<Self, WebhookError> {
        let key = match secret.strip_prefix("whsec_") {
            Some(b64) => B64.decode(b64).map_err(|_| WebhookError::NotBase64)?,
            None => secret.as_bytes().to_vec(),
        };
        if key.is_empty() {
            return Err(WebhookError::Empty);
        }
        Ok(Self { key })
    }

    fn mac(&self, id: &str, timestamp: u64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The `webhook-signature` value for a delivery.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        let tag = self.mac(id, timestamp, body).finalize().into_bytes();
        format!("v1,{}", B64.encode(tag))
    }

    /// The three headers of a delivery.
    pub fn headers(&self, id: &str, timestamp: u64, body: &[u8]) -> [(&'static str, String); 3] {
        [
            ("webhook-id", id.to_string()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", self.sign(id, timestamp, body)),
        ]
    }

    /// Whether `signature` (space-separated `v1,…` values; other versions ignored) signs the
    /// delivery, and `timestamp` is within [`TOLERANCE_SECS`] of `now`. Compared in constant
    /// time.
    pub fn verify(&self, id: &str, timestamp: u64, body: &[u8], signature: &str, now: u64) -> bool {
        if timestamp.abs_diff(now) > TOLERANCE_SECS {
            return false;
        }
        signature
            .split(' ')
            .filter_map(|v| v.strip_prefix("v1,"))
            .filter_map(|b64| B64.decode(b64).ok())
            .any(|tag| self.mac(id, timestamp, body).verify_slice(&tag).is_ok())
    }
}

/// The body of a `realtime.call.incoming` event: a SIP call `call_id` waits for `/accept` or
/// `/reject`; `sip_headers` are the INVITE's (at least From, To and Call-ID).
pub fn call_incoming_event(
    event_id: &str,
    created_at: u64,
    call_id: &str,
    sip_headers: &[(String, String)],
) -> String {
    let headers: Vec<_> = sip_headers
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "id": event_id,
        "type": "realtime.call.incoming",
        "created_at": created_at,
        "object": "event",
        "data": {"call_id": call_id, "sip_headers": headers},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn the_specifications_example_signs_as_published() {
        let s = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn verify_takes_any_listed_v1_signature_within_the_tolerance() {
        let s = WebhookSecret::parse("whsec_c2VjcmV0LWtleS1ieXRlcw==").unwrap();
        let sig = s.sign("evt_1", 1_000_000, b"{}");
        let listed = format!("v2,abc v1,AAAA {sig}");
        assert!(s.verify("evt_1", 1_000_000, b"{}", &listed, 1_000_100));
        assert!(
            !s.verify("evt_1", 1_000_000, b"{ }", &sig, 1_000_000),
            "body changed"
        );
        assert!(
            !s.verify("evt_2", 1_000_000, b"{}", &sig, 1_000_000),
            "id changed"
        );
        assert!(
            !s.verify("evt_1", 1_000_000, b"{}", &sig, 1_000_301),
            "too old"
        );
        assert!(
            !s.verify("evt_1", 1_000_000, b"{}", &sig, 999_699),
            "from the future"
        );
        let other = WebhookSecret::parse("whsec_b3RoZXI=").unwrap();
        assert!(!other.verify("evt_1", 1_000_000, b"{}", &sig, 1_000_000));
    }

    #[test]
    fn secrets_parse_with_or_without_the_prefix() {
        assert_eq!(
            WebhookSecret::parse("whsec_not base64!").unwrap_err(),
            WebhookError::NotBase64
        );
        assert_eq!(WebhookSecret::parse("").unwrap_err(), WebhookError::Empty);
        let raw = WebhookSecret::parse("plain-secret").unwrap();
        assert_eq!(raw.key, b"plain-secret");
        assert_eq!(format!("{raw:?}"), "WebhookSecret(redacted)");
    }

    #[test]
    fn the_incoming_call_event_has_openais_shape() {
        let body = call_incoming_event(
            "evt_1",
            1_700_000_000,
            "rtc_abc",
            &[("From".into(), "<sip:+15551234@trunk>".into())],
        );
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v,
            json!({"id": "evt_1", "type": "realtime.call.incoming", "created_at": 1_700_000_000u64,
                   "object": "event", "data": {"call_id": "rtc_abc",
                   "sip_headers": [{"name": "From", "value": "<sip:+15551234@trunk>"}]}})
        );
    }
}
