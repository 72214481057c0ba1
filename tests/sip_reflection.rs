//! A single INVITE from a source that never ACKs (possibly spoofed) is not a reflection
//! amplifier: it gets `100`, one `180` and its final `480` (resent for 2 s while no ACK
//! comes), at most 6 datagrams, where it got one `180` a second and ten resent `480`s over
//! 32 s before.

use std::time::{Duration, Instant};

use crate::common::sip::{sip_addr, sip_server, webhook_app};
use crate::sip_flood_kit::invite;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unacknowledged_invite_gets_a_few_datagrams() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &["--sip-decision-secs", "3"]).await;
    let sip = sip_addr(&server);
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let from = sock.local_addr().unwrap();
    let request = invite(sip, from, "reflect", 1);
    sock.send_to(request.as_bytes(), sip).await.unwrap();
    let _announced = app.next().await;
    let until = Instant::now() + Duration::from_secs(12);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 8192];
    while let Ok(Ok((n, _))) = tokio::time::timeout_at(until.into(), sock.recv_from(&mut buf)).await
    {
        let first = String::from_utf8_lossy(&buf[..n]);
        got.push((n, first.lines().next().unwrap_or("").to_string()));
    }
    let bytes: usize = got.iter().map(|(n, _)| n).sum();
    eprintln!(
        "a {}-byte INVITE got {} datagrams, {bytes} bytes: {:?}",
        request.len(),
        got.len(),
        got.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>()
    );
    assert!(
        got.iter().any(|(_, l)| l.starts_with("SIP/2.0 480")),
        "the decision timed out: {got:?}"
    );
    assert!(got.len() <= 6, "{} datagrams for one INVITE", got.len());
}
