//! `--cluster-redis rediss://:password@host:port`: a node joins a Redis that speaks TLS
//! only and wants a password (the server's certificate checked against a CA the test makes,
//! named by `SSL_CERT_FILE`), and keeps client secrets there; a wrong password leaves the
//! node serving alone, saying Redis is down, and minting refused with a clear 503.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{get_json, AUTH, KEY};
use common::process::ServerProcess;
use common::tls::certificates;

async fn redis_state(addr: std::net::SocketAddr, want: &str) {
    let start = Instant::now();
    loop {
        let (_, v) = get_json(addr, "/v1/pool?scope=cluster").await;
        if v["redis"] == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "redis never {want}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_uses_a_tls_redis_with_a_password() {
    let dir = std::env::temp_dir().join(format!("duet-redis-tls-{}", common::unique()));
    std::fs::create_dir_all(&dir).expect("dir");
    certificates(&dir);
    let port = common::cluster::free_tcp_port();
    let mut redis = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(["--tls-cert-file", "srv.pem", "--tls-key-file", "srv.key"])
        .args(["--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no"])
        .args([
            "--requirepass",
            "s3cret",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server with TLS");
    let ca = dir.join("ca.pem");
    let env = [("SSL_CERT_FILE", ca.to_str().expect("path"))];
    let url = format!("rediss://:s3cret@127.0.0.1:{port}");
    let good = ServerProcess::spawn_env(
        &["--cluster-redis", &url, "--node-id", "t", "--api-key", KEY],
        &env,
    );
    redis_state(good.addr, "up").await;
    let r = duet_client::http::request(
        good.addr,
        "POST",
        "/v1/realtime/client_secrets",
        &[AUTH],
        "",
    )
    .await
    .expect("mint");
    assert_eq!(r.status, 200, "a secret kept in the TLS Redis: {}", r.body);

    let wrong = format!("rediss://:wrong@127.0.0.1:{port}");
    let bad = ServerProcess::spawn_env(
        &[
            "--cluster-redis",
            &wrong,
            "--node-id",
            "u",
            "--api-key",
            KEY,
        ],
        &env,
    );
    redis_state(bad.addr, "down").await;
    let r =
        duet_client::http::request(bad.addr, "POST", "/v1/realtime/client_secrets", &[AUTH], "")
            .await
            .expect("mint");
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("cluster_store_unavailable"), "{}", r.body);
    let _ = redis.kill();
    let _ = redis.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
