//! `--max-sessions-per-key` across a cluster: each credential's sessions are counted in one
//! Redis hash (`duet:keys:<credential>`), a field per node life (`<node>:<boot>`), so that a
//! node that died or restarted stops counting at once: only the fields of live nodes add
//! up. Two commands per session (one at its admission, one at its end), none per media
//! packet; with Redis down, each node's own cap applies alone.
//!
//! The counts heal: an increment whose answer timed out still lands when Redis wakes, and a
//! decrement can be lost while Redis is unreachable, so every heartbeat rewrites this node's
//! field of each credential it counted from the node's own count of its sessions
//! ([`ClusterKeys::heal`]), and deletes the field once the node holds none.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Cluster;
use crate::stores::{SharedHold, SharedKeys, StoreFuture};

/// A credential's hash outlives its last session by this much (then Redis forgets it).
const KEEP: Duration = Duration::from_secs(24 * 3600);

/// The cluster's count of sessions per credential.
pub struct ClusterKeys {
    cluster: Arc<Cluster>,
    /// Credentials whose hash holds (or may hold) a field of this node's.
    written: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for ClusterKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterKeys")
            .field("node", &self.cluster.node_id())
            .finish_non_exhaustive()
    }
}

impl ClusterKeys {
    /// Counting in `cluster`'s Redis.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self {
            cluster,
            written: Mutex::new(HashSet::new()),
        }
    }

    /// Writes this node's field of every credential it counted from `local`: the count, or
    /// no field when it holds none of that credential's sessions.
    async fn rewrite(&self, local: HashMap<String, usize>) {
        let keys: Vec<String> = match self.written.lock() {
            Ok(mut w) => {
                w.extend(local.keys().cloned());
                w.iter().cloned().collect()
            }
            Err(_) => return,
        };
        if keys.is_empty() {
            return;
        }
        let field = self.cluster.incarnation();
        let mut pipe = redis::pipe();
        for key in &keys {
            let hash = format!("duet:keys:{key}");
            match local.get(key).copied().unwrap_or(0) {
                0 => pipe.cmd("HDEL").arg(&hash).arg(&field).ignore(),
                n => pipe
                    .cmd("HSET")
                    .arg(&hash)
                    .arg(&field)
                    .arg(n)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(&hash)
                    .arg(KEEP.as_millis() as u64)
                    .ignore(),
            };
        }
        let mut con = self.cluster.redis();
        let written: redis::RedisResult<()> = pipe.query_async(&mut con).await;
        if written.is_ok() {
            if let Ok(mut w) = self.written.lock() {
                w.retain(|k| local.get(k).is_some_and(|n| *n > 0));
            }
        }
    }

    async fn count(&self, key: &str, max: usize) -> Result<Option<SharedHold>, ()> {
        let hash = format!("duet:keys:{key}");
        let field = self.cluster.incarnation();
        if let Ok(mut w) = self.written.lock() {
            w.insert(key.to_string());
        }
        let mut con = self.cluster.redis();
        let counted: redis::RedisResult<(HashMap<String, i64>,)> = redis::pipe()
            .cmd("HINCRBY")
            .arg(&hash)
            .arg(&field)
            .arg(1)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&hash)
            .arg(KEEP.as_millis() as u64)
            .ignore()
            .cmd("HGETALL")
            .arg(&hash)
            .query_async(&mut con)
            .await;
        let Ok((fields,)) = counted else {
            return Ok(None);
        };
        let live = self.cluster.incarnations();
        let total: i64 = fields
            .iter()
            .filter(|(f, _)| live.contains(*f))
            .map(|(_, n)| (*n).max(0))
            .sum();
        let hold = Hold {
            cluster: self.cluster.clone(),
            hash,
            field,
        };
        if total > max as i64 {
            // Dropping the hold takes the count back.
            drop(hold);
            return Err(());
        }
        Ok(Some(SharedHold(Box::new(hold))))
    }
}

impl SharedKeys for ClusterKeys {
    fn take<'a>(
        &'a self,
        key: &'a str,
        max: usize,
    ) -> StoreFuture<'a, Result<Option<SharedHold>, ()>> {
        Box::pin(self.count(key, max))
    }

    fn heal<'a>(&'a self, local: HashMap<String, usize>) -> StoreFuture<'a, ()> {
        Box::pin(self.rewrite(local))
    }
}

/// One session's count; taken back when dropped.
struct Hold {
    cluster: Arc<Cluster>,
    hash: String,
    field: String,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut con = self.cluster.redis();
        let (hash, field) = (
            std::mem::take(&mut self.hash),
            std::mem::take(&mut self.field),
        );
        rt.spawn(async move {
            let _: redis::RedisResult<i64> = redis::cmd("HINCRBY")
                .arg(hash)
                .arg(field)
                .arg(-1)
                .query_async(&mut con)
                .await;
        });
    }
}
