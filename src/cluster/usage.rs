//! Usage across a cluster (`GET /v1/usage?scope=cluster`): each node counts in process as
//! in single-node mode, and every heartbeat adds what it counted since the last one to
//! Redis (`HINCRBY duet:usage:<credential> <field> <delta>`): a constant number of commands
//! per heartbeat, none per request or media packet, and nothing lost when a node restarts.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::Cluster;
use crate::session::UsageSink;
use crate::stores::usage::{report_of, Flat, LlmCall, Opened};
use crate::stores::usage::{LocalUsage, UsageLedger};
use crate::stores::{StoreDown, StoreFuture};

/// Credentials listed in a cluster report at the most (the rest still count in `total`
/// of their own node's report).
const MAX_REPORTED: usize = 10_000;
const CREDS: &str = "duet:usage:creds";
const SINCE: &str = "duet:usage:since";

/// This node's usage, added to the cluster's in Redis.
pub struct ClusterUsage {
    local: LocalUsage,
    cluster: Arc<Cluster>,
    /// What Redis has of this node's counts (one flush at a time).
    flushed: tokio::sync::Mutex<BTreeMap<String, Flat>>,
}

impl ClusterUsage {
    /// Counting from `since` (unix seconds) on this node.
    pub fn new(cluster: Arc<Cluster>, since: u64) -> Self {
        Self {
            local: LocalUsage::new(since),
            cluster,
            flushed: tokio::sync::Mutex::default(),
        }
    }

    async fn flush_now(&self) -> redis::RedisResult<()> {
        let mut flushed = self.flushed.lock().await;
        let now = self.local.flat();
        let mut p = redis::pipe();
        p.cmd("SET")
            .arg(SINCE)
            .arg(self.local.since())
            .arg("NX")
            .ignore();
        let mut any = false;
        for (cred, figures) in &now {
            let before = flushed.get(cred);
            for (field, v) in figures {
                let delta =
                    v.saturating_sub(before.and_then(|b| b.get(field)).copied().unwrap_or(0));
                if delta > 0 {
                    p.cmd("HINCRBY")
                        .arg(format!("duet:usage:{cred}"))
                        .arg(field)
                        .arg(delta)
                        .ignore();
                    p.cmd("SADD").arg(CREDS).arg(cred).ignore();
                    any = true;
                }
            }
        }
        if any {
            let mut con = self.cluster.redis();
            p.query_async::<()>(&mut con).await?;
        }
        *flushed = now;
        Ok(())
    }

    async fn read(&self) -> Result<Value, StoreDown> {
        self.flush_now().await.map_err(|_| StoreDown)?;
        let mut con = self.cluster.redis();
        let (since, creds): (Option<u64>, Vec<String>) = redis::pipe()
            .cmd("GET")
            .arg(SINCE)
            .cmd("SRANDMEMBER")
            .arg(CREDS)
            .arg(MAX_REPORTED)
            .query_async(&mut con)
            .await
            .map_err(|_| StoreDown)?;
        let mut p = redis::pipe();
        for c in &creds {
            p.cmd("HGETALL").arg(format!("duet:usage:{c}"));
        }
        let figures: Vec<BTreeMap<String, u64>> = if creds.is_empty() {
            Vec::new()
        } else {
            p.query_async(&mut con).await.map_err(|_| StoreDown)?
        };
        let per: BTreeMap<String, Flat> = creds.into_iter().zip(figures).collect();
        Ok(report_of(
            since.unwrap_or(self.local.since()),
            &per,
            "cluster",
        ))
    }
}

impl UsageLedger for ClusterUsage {
    fn sink(&self, credential: &str) -> Arc<dyn UsageSink> {
        self.local.sink(credential)
    }

    fn opened(&self, credential: &str, what: Opened) {
        self.local.opened(credential, what);
    }

    fn llm(&self, credential: &str, call: LlmCall) {
        self.local.llm(credential, call);
    }

    fn report(&self) -> Value {
        self.local.report()
    }

    fn cluster_report(&self) -> StoreFuture<'_, Result<Value, StoreDown>> {
        Box::pin(self.read())
    }

    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = self.flush_now().await {
                tracing::debug!(error = %e, "cluster usage flush failed; retried next heartbeat");
            }
        })
    }
}
