//! The HTTP client of requests forwarded between nodes: pooled, plain HTTP (nodes talk on
//! their private `--node-url`), a short connect timeout.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The HTTP client of forwarded requests (plain HTTP between nodes).
#[derive(Clone)]
pub struct ForwardClient(pub(crate) Client<HttpConnector, Full<Bytes>>);

impl ForwardClient {
    /// A pooled client.
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        connector.set_nodelay(true);
        Self(
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(connector),
        )
    }
}

impl Default for ForwardClient {
    fn default() -> Self {
        Self::new()
    }
}
