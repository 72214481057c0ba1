//! Posting `realtime.call.incoming` to the app: one JSON body, signed the Standard Webhooks
//! way (`webhook-id`, `webhook-timestamp`, `webhook-signature`), retried with backoff while
//! the app answers 5xx, 429 or nothing, until it answers 2xx or 4xx, the call is decided or
//! cancelled (the caller dropped the [`Delivery`] future), or the attempts run out. Every
//! attempt is re-signed with its own timestamp; the id stays, so the app can deduplicate.
//! At most [`IN_FLIGHT`] attempts are out at once (so at most that many connections to an
//! app that never answers); at most [`QUEUED`] deliveries wait or run, and one more is
//! [`Delivery::Busy`] at once (its call refused).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use duet_signaling::webhook::{call_incoming_event, WebhookSecret};
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use tokio::sync::Semaphore;

use crate::http_client::{self, HttpClient, Pool};
use crate::metrics::METRICS;

/// How long one attempt waits for the app's answer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts in all (the first and its retries).
const ATTEMPTS: u32 = 5;
/// The first retry's wait; each later one doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Most of the app's answer body read (and dropped).
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Attempts out at once (each holds one connection to the app).
const IN_FLIGHT: usize = 32;
/// Deliveries waiting or running at once.
const QUEUED: usize = 4 * IN_FLIGHT;
/// What the app's `User-Agent` log shows.
const USER_AGENT: &str = concat!("duet/", env!("CARGO_PKG_VERSION"), " (webhooks)");

/// The app's webhook endpoint.
#[derive(Clone)]
pub struct Webhook {
    url: Uri,
    secret: WebhookSecret,
    client: HttpClient,
    /// Attempts out ([`IN_FLIGHT`] permits).
    in_flight: Arc<Semaphore>,
    /// Deliveries waiting or running ([`QUEUED`] permits).
    queued: Arc<Semaphore>,
}

/// How a delivery ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The app answered 2xx.
    Delivered,
    /// The app refused it (4xx other than 429): not retried.
    Refused(u16),
    /// Every attempt failed (5xx, 429, timeouts, connection errors).
    Failed(String),
    /// Not tried: [`QUEUED`] deliveries were waiting or running already.
    Busy,
}

impl Webhook {
    /// The endpoint at `url` (`http://` or `https://`).
    pub fn new(url: &str, secret: WebhookSecret) -> anyhow::Result<Self> {
        let uri: Uri = url
            .parse()
            .map_err(|e| anyhow::anyhow!("--sip-webhook-url {url:?}: {e}"))?;
        http_client::check_url(&uri)
            .map_err(|why| anyhow::anyhow!("--sip-webhook-url {url:?} {why}"))?;
        let client = HttpClient::new(Pool {
            connect_timeout: ATTEMPT_TIMEOUT,
            idle_timeout: Duration::from_secs(30),
            max_idle_per_host: IN_FLIGHT,
            upstream: "webhook",
        });
        Ok(Self {
            url: uri,
            secret,
            client,
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            queued: Arc::new(Semaphore::new(QUEUED)),
        })
    }

    /// Delivers `realtime.call.incoming` for `call_id` with the INVITE's headers.
    pub async fn call_incoming(&self, call_id: &str, sip_headers: &[(String, String)]) -> Delivery {
        let Ok(_queued) = self.queued.try_acquire() else {
            METRICS.sip_webhook_failure("busy");
            return Delivery::Busy;
        };
        let id = crate::protocol::ids::new_id("evt");
        let body = Bytes::from(call_incoming_event(&id, unix_now(), call_id, sip_headers));
        let mut backoff = FIRST_BACKOFF;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let Ok(slot) = self.in_flight.acquire().await else {
                return Delivery::Busy;
            };
            let answer = self.attempt(&id, body.clone()).await;
            drop(slot);
            match answer {
                Ok(status) if (200..300).contains(&status) => return Delivery::Delivered,
                Ok(status) if (400..500).contains(&status) && status != 429 => {
                    METRICS.sip_webhook_failure("refused");
                    return Delivery::Refused(status);
                }
                Ok(status) => last = format!("HTTP {status}"),
                Err(e) => last = e,
            }
            METRICS.sip_webhook_failure("retry");
            tracing::warn!(call = %call_id, attempt, error = %last, "sip webhook attempt failed");
            if attempt < ATTEMPTS {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
        METRICS.sip_webhook_failure("gave_up");
        Delivery::Failed(last)
    }

    async fn attempt(&self, id: &str, body: Bytes) -> Result<u16, String> {
        let mut req = hyper::Request::post(self.url.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::USER_AGENT, USER_AGENT);
        for (name, value) in self.secret.headers(id, unix_now(), &body) {
            req = req.header(name, value);
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let sent = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            let resp = self.client.send(req).await?;
            let status = resp.status().as_u16();
            // Read (and drop) the answer so the connection can be reused; bounded by the
            // attempt's timeout.
            let _ = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await;
            Ok::<u16, String>(status)
        });
        sent.await.map_err(|_| "timed out".to_string())?
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
