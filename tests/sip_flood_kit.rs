//! What the SIP flood tests share: a `duet serve` child answering SIP on a free port,
//! bodiless INVITEs (a late offer: each one rings), an OPTIONS ping from a given source,
//! the child's open file descriptors, the `/health` and WebSocket probes, and an app that
//! counts its webhooks.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::process::ServerProcess;
use crate::common::sip::SECRET;
use crate::common::Client;

/// A port free on loopback for both UDP and TCP.
fn free_sip_port() -> u16 {
    for _ in 0..50 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for UDP and TCP");
}

/// `duet serve` answering SIP on loopback, announcing calls to `webhook`, with `extra`
/// flags; returns it and its SIP address.
pub fn sip_process(webhook: &str, extra: &[&str]) -> (ServerProcess, SocketAddr) {
    let sip = SocketAddr::from(([127, 0, 0, 1], free_sip_port()));
    let listen = sip.to_string();
    let mut flags = vec![
        "--sip-listen",
        &listen,
        "--sip-webhook-url",
        webhook,
        "--sip-webhook-secret",
        SECRET,
    ];
    flags.extend_from_slice(extra);
    let server = ServerProcess::spawn(&flags);
    (server, sip)
}

/// A small new INVITE (no body: a late offer), number `n` of a run tagged `tag`.
pub fn invite(to: SocketAddr, from: SocketAddr, tag: &str, n: usize) -> String {
    format!(
        "INVITE sip:duet@{to} SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-{tag}-{n}\r\n\
         From: <sip:caller@{from}>;tag=f{n}\r\nTo: <sip:duet@{to}>\r\nCall-ID: {tag}-{n}@test\r\n\
         CSeq: 1 INVITE\r\nContact: <sip:caller@{from}>\r\nMax-Forwards: 70\r\n\
         Content-Length: 0\r\n\r\n"
    )
}

/// Sends `count` INVITEs from a socket on `from_ip` to `to`, at most `per_second` a second,
/// stopping after `limit`; returns how many left. Blocking (run it on its own thread).
pub fn send_invites(
    from_ip: IpAddr,
    to: SocketAddr,
    (count, per_second, limit): (usize, usize, Duration),
) -> usize {
    let sock = std::net::UdpSocket::bind((from_ip, 0)).unwrap();
    let from = sock.local_addr().unwrap();
    // Call-IDs and branches of their own, whatever other runs sent.
    let tag = format!("flood-{}-{}", from.ip(), from.port());
    let start = Instant::now();
    let mut sent = 0;
    while sent < count && start.elapsed() < limit {
        let due = Duration::from_secs_f64(sent as f64 / per_second as f64);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        if sock
            .send_to(invite(to, from, &tag, sent).as_bytes(), to)
            .is_ok()
        {
            sent += 1;
        }
    }
    sent
}

/// An OPTIONS from a socket on `from_ip`: the first line of the answer, or `None` after
/// `wait`.
pub async fn options_from(from_ip: IpAddr, to: SocketAddr, wait: Duration) -> Option<String> {
    let sock = tokio::net::UdpSocket::bind((from_ip, 0)).await.unwrap();
    let from = sock.local_addr().unwrap();
    let ping = format!(
        "OPTIONS sip:duet@{to} SIP/2.0\r\nVia: SIP/2.0/UDP {from};branch=z9hG4bK-opt\r\n\
         From: <sip:ping@{from}>;tag=p1\r\nTo: <sip:duet@{to}>\r\nCall-ID: opt-{from}@test\r\n\
         CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    );
    sock.send_to(ping.as_bytes(), to).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(wait, sock.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines().next().map(str::to_string)
}

/// Open file descriptors of process `pid`.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// How long `/health` took to answer `200` (`None`: no answer within 2 s).
pub async fn health_ms(addr: SocketAddr) -> Option<u128> {
    let start = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(2),
        duet_client::http::request(addr, "GET", "/health", &[], ""),
    )
    .await
    .ok()?
    .ok()?;
    (r.status == 200).then(|| start.elapsed().as_millis())
}

/// How long a `session.update` took to come back as `session.updated` (`None`: not within
/// 2 s).
pub async fn round_trip_ms(ws: &mut Client) -> Option<u128> {
    let start = Instant::now();
    ws.send(json!({"type": "session.update", "session": {"type": "realtime"}}))
        .await;
    tokio::time::timeout(Duration::from_secs(2), ws.until("session.updated"))
        .await
        .ok()?;
    Some(start.elapsed().as_millis())
}

/// An app that answers every webhook `200` and decides nothing; counts them.
pub async fn counting_app() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async { axum::http::StatusCode::OK }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}
