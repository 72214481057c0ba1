//! Client secrets as a store keeps them, and the store's trait.

use std::net::IpAddr;

use serde_json::Value;

use super::{StoreDown, StoreFuture};
use crate::protocol::SessionPatch;

/// A minted secret, as the store keeps it.
#[derive(Clone, Debug)]
pub struct SecretRecord {
    /// A non-reversible id for logs, usage and scoping (`cred_…`, from the digest).
    pub id: String,
    /// SHA-256 of the secret.
    pub(crate) digest: [u8; 32],
    /// Unix seconds when it stops opening sessions.
    pub expires_at: u64,
    /// The starting configuration of every session it opens.
    pub session: Option<SessionPatch>,
    /// The session object as the mint request sent it (what a shared store keeps, and
    /// reads back into `session`).
    pub session_json: Option<Value>,
    /// Minted anonymously for the demo page, by this address: counted apart from the
    /// server key's secrets.
    pub demo: Option<IpAddr>,
}

/// Why a secret was not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFull {
    /// `--max-client-secrets` live secrets minted with the server key.
    Secrets,
    /// `--max-demo-secrets` live demo secrets.
    Demo,
    /// `--max-demo-secrets-per-ip` live demo secrets for this address.
    DemoPerIp,
    /// The server's memory budget has no room for it.
    Memory(crate::memory::Exhausted),
    /// The shared store (cluster mode: Redis) cannot be reached.
    Unavailable,
}

/// Where secrets are kept (by digest): in this process, or shared by a cluster.
pub trait SecretStore: Send + Sync {
    /// Keeps `record`, or says which cap of live secrets it would pass.
    fn put(&self, record: SecretRecord, now: u64) -> StoreFuture<'_, Result<(), StoreFull>>;
    /// The live secret with this digest.
    fn find(
        &self,
        digest: [u8; 32],
        now: u64,
    ) -> StoreFuture<'_, Result<Option<SecretRecord>, StoreDown>>;
}

/// The caps of the server's local store of secrets.
#[derive(Clone, Copy, Debug)]
pub struct SecretCaps {
    /// Live secrets minted with the server key (`--max-client-secrets`).
    pub secrets: usize,
    /// Live demo-page secrets (`--max-demo-secrets`).
    pub demo: usize,
    /// Live demo-page secrets per address (`--max-demo-secrets-per-ip`).
    pub demo_per_ip: usize,
}
