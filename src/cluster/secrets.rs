//! Client secrets shared by a cluster: minted on one node, used on any. Redis keeps each
//! record under its digest (`duet:secret:<sha256 hex>`, never the secret), expiring with it
//! (Redis TTL); the caps of live secrets are counted cluster-wide in sorted sets scored by
//! expiry (`duet:secrets:api`, `duet:secrets:demo`, `duet:secrets:demo:<ip>`).

use std::net::IpAddr;
use std::sync::Arc;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Cluster;
use crate::stores::secrets::{SecretCaps, SecretRecord, SecretStore, StoreFull};
use crate::stores::{StoreDown, StoreFuture};

/// The secrets of a cluster, in Redis.
pub struct RedisSecrets {
    cluster: Arc<Cluster>,
    caps: SecretCaps,
}

/// A record as Redis keeps it.
#[derive(Serialize, Deserialize)]
struct Stored {
    id: String,
    expires_at: u64,
    session: Option<Value>,
    demo: Option<IpAddr>,
}

fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn key(digest: &[u8; 32]) -> String {
    format!("duet:secret:{}", hex(digest))
}

impl RedisSecrets {
    /// Secrets in `cluster`'s Redis, with these caps of live ones (cluster-wide).
    pub fn new(cluster: Arc<Cluster>, caps: SecretCaps) -> Self {
        Self { cluster, caps }
    }

    /// The sorted sets a record counts in, with their caps.
    fn counted_in(&self, record: &SecretRecord) -> Vec<(String, usize, StoreFull)> {
        match record.demo {
            None => vec![(
                "duet:secrets:api".into(),
                self.caps.secrets,
                StoreFull::Secrets,
            )],
            Some(ip) => vec![
                ("duet:secrets:demo".into(), self.caps.demo, StoreFull::Demo),
                (
                    format!("duet:secrets:demo:{ip}"),
                    self.caps.demo_per_ip,
                    StoreFull::DemoPerIp,
                ),
            ],
        }
    }

    async fn insert(&self, record: SecretRecord, now: u64) -> Result<(), StoreFull> {
        let mut con = self.cluster.redis();
        let down = |e: redis::RedisError| {
            tracing::warn!(error = %e, "cluster: a client secret could not be stored");
            StoreFull::Unavailable
        };
        let sets = self.counted_in(&record);
        // Expired members leave, then each count is checked (two nodes minting at the same
        // instant may both pass a cap by one: the caps bound memory, not billing).
        for (set, cap, full) in &sets {
            let mut p = redis::pipe();
            p.cmd("ZREMRANGEBYSCORE")
                .arg(set)
                .arg("-inf")
                .arg(now)
                .ignore();
            p.cmd("ZCARD").arg(set);
            let (live,): (usize,) = p.query_async(&mut con).await.map_err(down)?;
            if live >= *cap {
                return Err(*full);
            }
        }
        let stored = Stored {
            id: record.id.clone(),
            expires_at: record.expires_at,
            session: record.session_json.clone(),
            demo: record.demo,
        };
        let json = serde_json::to_string(&stored).map_err(|_| StoreFull::Unavailable)?;
        let member = hex(&record.digest);
        let mut p = redis::pipe();
        p.cmd("SET")
            .arg(key(&record.digest))
            .arg(json)
            .arg("EXAT")
            .arg(record.expires_at)
            .ignore();
        for (set, _, _) in &sets {
            p.cmd("ZADD")
                .arg(set)
                .arg(record.expires_at)
                .arg(&member)
                .ignore();
            p.cmd("EXPIREAT")
                .arg(set)
                .arg(record.expires_at)
                .arg("GT")
                .ignore();
        }
        p.query_async::<()>(&mut con).await.map_err(down)
    }

    async fn get(&self, digest: [u8; 32], now: u64) -> Result<Option<SecretRecord>, StoreDown> {
        let mut con = self.cluster.redis();
        let json: Option<String> = con.get(key(&digest)).await.map_err(|_| StoreDown)?;
        let Some(stored) = json.and_then(|j| serde_json::from_str::<Stored>(&j).ok()) else {
            return Ok(None);
        };
        if stored.expires_at <= now {
            return Ok(None);
        }
        // Checked when it was minted; a record that no longer parses opens nothing.
        let session = match stored.session.clone() {
            Some(v) => match duet_protocol::secrets::session_patch(v) {
                Ok(p) => Some(p),
                Err(_) => return Ok(None),
            },
            None => None,
        };
        Ok(Some(SecretRecord {
            id: stored.id,
            digest,
            expires_at: stored.expires_at,
            session,
            session_json: stored.session,
            demo: stored.demo,
        }))
    }
}

impl SecretStore for RedisSecrets {
    fn put(&self, record: SecretRecord, now: u64) -> StoreFuture<'_, Result<(), StoreFull>> {
        Box::pin(self.insert(record, now))
    }

    fn find(
        &self,
        digest: [u8; 32],
        now: u64,
    ) -> StoreFuture<'_, Result<Option<SecretRecord>, StoreDown>> {
        Box::pin(self.get(digest, now))
    }
}
