//! Bearer-token auth, compared in constant time.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

/// Subprotocol prefix browsers use to carry the key on a WebSocket.
pub const INSECURE_KEY_PROTOCOL: &str = "openai-insecure-api-key.";

/// Constant-time comparison (the length may leak, the content does not).
pub fn key_matches(given: &str, expected: &str) -> bool {
    given.as_bytes().ct_eq(expected.as_bytes()).into()
}

/// Whether the request carries `expected` as `Authorization: Bearer <key>` or, for
/// WebSockets, as the `openai-insecure-api-key.<key>` subprotocol.
pub fn authorized(headers: &HeaderMap, expected: &str) -> bool {
    presented(headers).iter().any(|k| key_matches(k, expected))
}

/// Every key the request presents: `Authorization: Bearer` values and the WebSocket
/// subprotocol key.
pub fn presented(headers: &HeaderMap) -> Vec<&str> {
    let mut keys: Vec<&str> = headers
        .get_all(axum::http::header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .collect();
    keys.extend(subprotocol_key(headers));
    keys
}

fn subprotocol_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find_map(|p| p.strip_prefix(INSECURE_KEY_PROTOCOL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_and_subprotocol() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "k1"));
        h.insert("authorization", HeaderValue::from_static("Bearer k1"));
        assert!(authorized(&h, "k1"));
        assert!(!authorized(&h, "k2"));
        let mut h = HeaderMap::new();
        h.insert(
            "sec-websocket-protocol",
            HeaderValue::from_static("realtime, openai-insecure-api-key.k1"),
        );
        assert!(authorized(&h, "k1"));
        assert!(!authorized(&h, "k"));
        assert!(!key_matches("k1x", "k1"));
    }
}
