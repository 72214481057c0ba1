//! Auth footguns are closed: an empty API key is a startup error, a non-loopback address
//! without a key needs `--insecure-no-auth`, and `--cors-origins` restricts both CORS and
//! WebSocket/POST origins.

use crate::common;

use clap::Parser;
use common::{handshake_status, Client};

async fn start_error(argv: &[&str]) -> String {
    let mut all = vec!["serve", "--port", "0"];
    all.extend_from_slice(argv);
    let args = duet::config::ServeArgs::parse_from(all);
    match duet::server::start(&args).await {
        Ok(_) => panic!("{argv:?} started"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn risky_auth_configurations_refuse_to_start() {
    let e = start_error(&["--api-key", ""]).await;
    assert!(e.contains("empty"), "{e}");
    let e = start_error(&["--host", "0.0.0.0"]).await;
    assert!(e.contains("--insecure-no-auth"), "{e}");
    // Explicitly insecure starts (and logs a warning); with a key it starts too.
    for argv in [
        vec![
            "serve",
            "--port",
            "0",
            "--host",
            "0.0.0.0",
            "--insecure-no-auth",
        ],
        vec![
            "serve",
            "--port",
            "0",
            "--host",
            "0.0.0.0",
            "--api-key",
            "k",
        ],
    ] {
        let args = duet::config::ServeArgs::parse_from(argv.clone());
        assert!(duet::server::start(&args).await.is_ok(), "{argv:?}");
    }
}

async fn cors_get(addr: std::net::SocketAddr, origin: &str) -> (u16, String) {
    common::get(addr, "/v1/models", &[("Origin", origin)]).await
}

#[tokio::test]
async fn cors_origins_restrict_browsers() {
    let addr = common::server(&["--cors-origins", "https://app.example,https://b.example"]).await;
    let (_, allowed) = cors_get(addr, "https://app.example").await;
    assert!(
        allowed
            .to_lowercase()
            .contains("access-control-allow-origin: https://app.example"),
        "{allowed}"
    );
    let (_, denied) = cors_get(addr, "https://evil.example").await;
    assert!(
        !denied
            .to_lowercase()
            .contains("access-control-allow-origin"),
        "{denied}"
    );
    // WebSocket upgrades: another origin is refused, allowed and origin-less ones connect.
    let evil =
        common::refused(Client::connect_with(addr, &[("Origin", "https://evil.example")]).await);
    assert_eq!(handshake_status(&evil), 403);
    Client::connect_with(addr, &[("Origin", "https://b.example")])
        .await
        .expect("allowed origin");
    Client::connect(addr).await;
    // A form POST needs no preflight: it is refused by origin as well.
    let (s, text) = common::get(addr, "/v1/models", &[("Origin", "https://evil.example")]).await;
    assert_eq!(s, 403, "{text}");
    assert!(text.contains("origin_not_allowed"), "{text}");
}
