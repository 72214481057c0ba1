//! What `https://` costs Duet's HTTP client (`duet::http_client`, the one the LLM, the
//! speech upstreams and the webhook use) against plain `http://`, on loopback: a small
//! keep-alive HTTP server, and a TLS front before it (a test CA made with `openssl`, trusted
//! through `SSL_CERT_FILE`). Prints the first request's time (TCP connect, and for https the
//! handshake) and pooled requests' p50 / p99 for each. The TLS front relays to the same
//! backend over one more loopback connection, so the https figures include that hop.
//!
//! ```sh
//! cargo run --release --example tls_bench -- [REQUESTS]   # default 2000; needs openssl
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use duet::http_client::{HttpClient, Pool};
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A keep-alive server answering every request `200 {"ok":true}`.
async fn backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut have = 0;
                loop {
                    let Ok(n) = s.read(&mut buf[have..]).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    have += n;
                    while let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.copy_within(end + 4..have, 0);
                        have -= end + 4;
                        // One write, on a socket without Nagle: a head and a body written
                        // apart would wait out the client's delayed ACK (40 ms).
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}";
                        if s.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// The first request's time and the pooled requests' times, in milliseconds.
async fn measure(url: &str, n: usize) -> (f64, Vec<f64>) {
    let client = HttpClient::new(Pool {
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(60),
        max_idle_per_host: 4,
        upstream: "bench",
    });
    let mut times = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        let req = hyper::Request::get(url)
            .body(Full::new(Bytes::new()))
            .expect("request");
        let t = Instant::now();
        let resp = client.request(req).await.expect("answered");
        let _ = resp.into_body().collect().await.expect("body");
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let first = times.remove(0);
    times.sort_by(f64::total_cmp);
    (first, times)
}

fn q(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let dir = std::env::temp_dir().join(format!("duet-tls-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    duet_client::tls::certificates(&dir);
    // Before the first client: it loads the roots once, at its first use.
    std::env::set_var("SSL_CERT_FILE", dir.join("ca.pem"));
    let plain = backend().await;
    let front = duet_client::tls::tls_front(&dir, plain).await;
    println!("{n} pooled GETs on loopback through duet::http_client (2 runtime threads)");
    println!(
        "{:<8} {:>14} {:>10} {:>10}",
        "scheme", "first (ms)", "p50 (ms)", "p99 (ms)"
    );
    for (scheme, addr) in [("http", plain), ("https", front)] {
        let (first, times) = measure(&format!("{scheme}://{addr}/x"), n).await;
        println!(
            "{scheme:<8} {first:>14.3} {:>10.3} {:>10.3}",
            q(&times, 0.5),
            q(&times, 0.99)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
