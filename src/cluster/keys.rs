//! `--max-sessions-per-key` across a cluster: each credential's sessions are counted in one
//! Redis hash (`duet:keys:<credential>`), a field per node life (`<node>:<boot>`), so that a
//! node that died or restarted stops counting at once: only the fields of live nodes add
//! up. Two commands per session (one at its admission, one at its end), none per media
//! packet; with Redis down, each node's own cap applies alone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::Cluster;
use crate::server::secrets::StoreFuture;
use crate::server::{SharedHold, SharedKeys};

/// A credential's hash outlives its last session by this much (then Redis forgets it).
const KEEP: Duration = Duration::from_secs(24 * 3600);

/// The cluster's count of sessions per credential.
pub struct ClusterKeys {
    cluster: Arc<Cluster>,
}

impl std::fmt::Debug for ClusterKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterKeys")
            .field("node", &self.cluster.node_id())
            .finish()
    }
}

impl ClusterKeys {
    /// Counting in `cluster`'s Redis.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self { cluster }
    }

    async fn count(&self, key: &str, max: usize) -> Result<Option<SharedHold>, ()> {
        let hash = format!("duet:keys:{key}");
        let field = self.cluster.incarnation();
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
