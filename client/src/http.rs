//! A minimal HTTP/1.1 client for Duet's endpoints: one request per connection
//! (`Connection: close`), the whole response read to its end. [`request`] is async (tokio);
//! [`request_blocking`] is its twin for plain threads (the load generator dials from one).
//! [`post_offer`] and [`hangup`] are the calls endpoints on top of them.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long [`request_blocking`] waits to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`request_blocking`] waits for each read of the response.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The path that takes SDP offers.
const CALLS: &str = "/v1/realtime/calls";

/// A response, read until the server closed the connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// The status code (0 when the status line did not parse, e.g. nothing came back).
    pub status: u16,
    /// The status line and header lines, as received, without the blank line that ends them
    /// (everything received, when it never ended).
    pub head: String,
    /// What followed the head (not de-chunked: Duet answers with `Content-Length`).
    pub body: String,
}

impl Response {
    /// Parses everything a server sent (invalid UTF-8 is replaced).
    pub fn parse(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Self {
            status,
            head: head.to_string(),
            body: body.to_string(),
        }
    }

    /// The value of the first header called `name` (case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        })
    }

    /// The response as it was received: head, blank line, body (empty when nothing was).
    pub fn text(&self) -> String {
        if self.head.is_empty() && self.body.is_empty() {
            return String::new();
        }
        format!("{}\r\n\r\n{}", self.head, self.body)
    }
}

/// The request's bytes: `Host` and `Connection: close`, then `headers` as given, then a
/// `Content-Length` of `body` unless `headers` has one (none for a GET or HEAD without a
/// body), then `body`.
fn encode(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let declared = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
    let bodiless_get = body.is_empty() && matches!(method, "GET" | "HEAD");
    if !declared && !bodiless_get {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    req
}

/// [`request`] with a binary body (a multipart upload with a WAV in it).
pub async fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> anyhow::Result<Response> {
    let length = body.len().to_string();
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    all.push(("Content-Length", &length));
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(encode(addr, method, path, &all, "").as_bytes())
        .await?;
    s.write_all(body).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    Ok(Response::parse(&buf))
}

/// Sends one request to `addr` and reads the response to its end (see [`Response`]).
///
/// `headers` are sent as given after `Host` and `Connection: close`; a `Content-Length` of
/// `body` is added unless `headers` has one (so a test can declare a length it never sends)
/// or the request is a GET or HEAD without a body.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<Response> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(encode(addr, method, path, headers, body).as_bytes())
        .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    Ok(Response::parse(&buf))
}

/// [`request`] on the calling thread, giving up after 5 s to connect or 10 s of silence.
pub fn request_blocking(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<Response> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.write_all(encode(addr, method, path, headers, body).as_bytes())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    Ok(Response::parse(&buf))
}

/// The `Authorization` value for an API key.
fn bearer(key: Option<&str>) -> Option<String> {
    key.map(|k| format!("Bearer {k}"))
}

/// The `Authorization` header, when there is a value for it.
fn auth_header(auth: &Option<String>) -> Vec<(&str, &str)> {
    auth.as_deref()
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect()
}

/// The headers of an SDP offer, with `Authorization` when there is a value for it.
fn offer_headers(auth: &Option<String>) -> Vec<(&str, &str)> {
    let mut h = vec![("Content-Type", "application/sdp")];
    h.extend(auth_header(auth));
    h
}

/// The call id (the last segment of `Location`) and the answer of a `201 Created`.
fn offer_result(r: Response) -> anyhow::Result<(String, String)> {
    if r.status != 201 {
        bail!("POST {CALLS}: {} {}", r.status, r.body);
    }
    let location = r
        .header("location")
        .ok_or_else(|| anyhow!("201 without Location"))?;
    let id = location.rsplit('/').next().unwrap_or_default().to_string();
    Ok((id, r.body))
}

/// POSTs an SDP offer to `/v1/realtime/calls` (with `key` as a bearer token when given);
/// returns the call id (`rtc_…`, from `Location`) and the answer. Anything but `201` is an
/// error that carries the status and the body.
pub async fn post_offer(
    base: SocketAddr,
    sdp: &str,
    key: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let auth = bearer(key);
    offer_result(request(base, "POST", CALLS, &offer_headers(&auth), sdp).await?)
}

/// A `multipart/form-data` body of named text parts (name, content type, text); returns
/// the `Content-Type` header value and the body.
pub fn multipart(parts: &[(&str, &str, &str)]) -> (String, String) {
    const BOUNDARY: &str = "duet-part-boundary-7f3a";
    let mut body = String::new();
    for (name, ctype, text) in parts {
        body.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\nContent-Type: {ctype}\r\n\r\n{text}\r\n"
        ));
    }
    body.push_str(&format!("--{BOUNDARY}--\r\n"));
    (format!("multipart/form-data; boundary={BOUNDARY}"), body)
}

/// POSTs an offer to `/v1/realtime/calls{query}` with the given content type (an SDP, or a
/// [`multipart`] body); returns the call id and the answer, as [`post_offer`].
pub async fn post_call(
    base: SocketAddr,
    query: &str,
    content_type: &str,
    body: &str,
    key: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let auth = bearer(key);
    let mut headers = vec![("Content-Type", content_type)];
    headers.extend(auth_header(&auth));
    let path = format!("{CALLS}{query}");
    offer_result(request(base, "POST", &path, &headers, body).await?)
}

/// `PATCH /v1/realtime/calls/{call_id}` with a new SDP offer (an ICE restart); the
/// answer of a `200`, anything else an error with the status and body.
pub async fn patch_offer(
    base: SocketAddr,
    call_id: &str,
    sdp: &str,
    key: Option<&str>,
) -> anyhow::Result<String> {
    let auth = bearer(key);
    let path = format!("{CALLS}/{call_id}");
    let r = request(base, "PATCH", &path, &offer_headers(&auth), sdp).await?;
    if r.status != 200 {
        bail!("PATCH {path}: {} {}", r.status, r.body);
    }
    Ok(r.body)
}

/// [`post_call`] to `/v1/realtime/calls` on the calling thread, without a key.
pub fn post_call_blocking(
    base: SocketAddr,
    content_type: &str,
    body: &str,
) -> anyhow::Result<(String, String)> {
    let headers = [("Content-Type", content_type)];
    offer_result(request_blocking(base, "POST", CALLS, &headers, body)?)
}

/// [`post_offer`] on the calling thread.
pub fn post_offer_blocking(
    base: SocketAddr,
    sdp: &str,
    key: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let auth = bearer(key);
    offer_result(request_blocking(
        base,
        "POST",
        CALLS,
        &offer_headers(&auth),
        sdp,
    )?)
}

/// `POST /v1/realtime/calls/{call_id}/hangup` (with `key` as a bearer token when given);
/// returns the HTTP status.
pub async fn hangup(base: SocketAddr, call_id: &str, key: Option<&str>) -> anyhow::Result<u16> {
    let auth = bearer(key);
    let path = format!("{CALLS}/{call_id}/hangup");
    Ok(request(base, "POST", &path, &auth_header(&auth), "")
        .await?
        .status)
}

/// [`hangup`] on the calling thread.
pub fn hangup_blocking(base: SocketAddr, call_id: &str, key: Option<&str>) -> anyhow::Result<u16> {
    let auth = bearer(key);
    let path = format!("{CALLS}/{call_id}/hangup");
    Ok(request_blocking(base, "POST", &path, &auth_header(&auth), "")?.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:8080".parse().unwrap()
    }

    #[test]
    fn encodes_headers_and_content_length() {
        assert_eq!(
            encode(addr(), "GET", "/ready", &[("Origin", "x")], ""),
            "GET /ready HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\nOrigin: x\r\n\r\n"
        );
        assert_eq!(
            encode(addr(), "POST", "/h", &[], ""),
            "POST /h HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\
             Content-Length: 0\r\n\r\n"
        );
        assert_eq!(
            encode(
                addr(),
                "POST",
                "/c",
                &[("Content-Type", "application/sdp")],
                "v=0"
            ),
            "POST /c HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\
             Content-Type: application/sdp\r\nContent-Length: 3\r\n\r\nv=0"
        );
        let declared = encode(addr(), "POST", "/c", &[("Content-Length", "99")], "");
        assert!(
            declared.ends_with("Content-Length: 99\r\n\r\n"),
            "{declared}"
        );
        assert_eq!(declared.matches("Content-Length").count(), 1);
    }

    #[test]
    fn parses_status_head_body_and_headers() {
        let r = Response::parse(
            b"HTTP/1.1 201 Created\r\nlocation: /v1/realtime/calls/rtc_1\r\n\r\nv=0\r\n",
        );
        assert_eq!(r.status, 201);
        assert_eq!(r.header("Location"), Some("/v1/realtime/calls/rtc_1"));
        assert_eq!(r.header("retry-after"), None);
        assert_eq!(r.body, "v=0\r\n");
        assert_eq!(
            r.text(),
            "HTTP/1.1 201 Created\r\nlocation: /v1/realtime/calls/rtc_1\r\n\r\nv=0\r\n"
        );
        assert_eq!(
            offer_result(r).unwrap(),
            ("rtc_1".to_string(), "v=0\r\n".to_string())
        );
        let empty = Response::parse(b"");
        assert_eq!((empty.status, empty.text()), (0, String::new()));
        let refused = Response::parse(b"HTTP/1.1 503 Service Unavailable\r\n\r\n{}");
        let err = offer_result(refused).unwrap_err().to_string();
        assert_eq!(err, "POST /v1/realtime/calls: 503 {}");
    }

    #[test]
    fn blocking_request_round_trips() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\nv=0") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "request ended early");
                req.extend_from_slice(&buf[..n]);
            }
            s.write_all(
                b"HTTP/1.1 201 Created\r\nLocation: /v1/realtime/calls/rtc_9\r\n\r\nanswer",
            )
            .unwrap();
            String::from_utf8(req).unwrap()
        });
        let (id, answer) = post_offer_blocking(addr, "v=0", Some("k")).unwrap();
        assert_eq!((id.as_str(), answer.as_str()), ("rtc_9", "answer"));
        let req = server.join().unwrap();
        assert!(
            req.starts_with("POST /v1/realtime/calls HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(req.contains("\r\nAuthorization: Bearer k\r\n"), "{req}");
        assert!(req.contains("\r\nContent-Length: 3\r\n"), "{req}");
    }
}
