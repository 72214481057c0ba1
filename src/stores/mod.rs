//! The stores behind the server's credentials and counts, as traits that both the local
//! stores (in this process) and the cluster's (in Redis) implement: client secrets
//! ([`secrets::SecretStore`]), usage per credential ([`usage::UsageLedger`], with the local
//! ledger the cluster's builds on), and the per-credential session count a cluster shares
//! ([`SharedKeys`]). Below both `server` and `cluster`, so neither imports the other.

use std::collections::HashMap;

pub mod secrets;
pub mod usage;

/// The shared store (cluster mode: Redis) cannot be reached: a secret can be neither
/// minted nor checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreDown;

/// A store operation's future.
pub type StoreFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A count of sessions per credential that a cluster shares.
pub trait SharedKeys: Send + Sync + std::fmt::Debug {
    /// Counts one more session of `key` across the cluster: `Err` when that passes `max`
    /// (nothing counted then); `Ok(None)` when the count cannot be reached (the node's own
    /// cap then applies alone). The hold gives the session back when dropped.
    fn take<'a>(
        &'a self,
        key: &'a str,
        max: usize,
    ) -> StoreFuture<'a, Result<Option<SharedHold>, ()>>;

    /// Rewrites this node's share of every credential's count from `local`, this node's own
    /// count of its sessions per credential (a credential missing from it holds none here).
    /// A count an increment or decrement left wrong (Redis slow or briefly unreachable)
    /// heals by the next call.
    fn heal<'a>(&'a self, local: HashMap<String, usize>) -> StoreFuture<'a, ()>;
}

/// A session counted by [`SharedKeys`]; given back on drop.
pub struct SharedHold(pub Box<dyn Send + Sync>);

impl std::fmt::Debug for SharedHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedHold")
    }
}
