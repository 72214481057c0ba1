//! This node in the cluster's registry: its record (what it has free, whether it takes new
//! work) and the heartbeat that writes it, flushes usage and heals the shared per-key
//! counts. Here, beside the state they read; the cluster module holds the registry.

use std::sync::{Arc, Weak};

use super::AppState;
use crate::cluster::{now_ms, ClusterSettings, NodeRecord, HEARTBEAT, REDIS_TIMEOUT};

/// This node's record now (its CPU load as of the last heartbeat).
pub fn own_record(state: &AppState, settings: &ClusterSettings) -> NodeRecord {
    let info = state.backends.model.info();
    let (max_sessions, max_calls) = state.sessions.admissions.limits();
    let public_ip = settings.public_ip;
    NodeRecord {
        id: settings.node_id.clone(),
        node_url: settings.node_url.clone(),
        public_url: settings.public_url.clone(),
        udp: state
            .calls
            .engines
            .local_addrs()
            .iter()
            .map(|a| public_ip.map_or(*a, |ip| std::net::SocketAddr::new(ip, a.port())))
            .map(|a| a.to_string())
            .collect(),
        free_slots: info
            .max_slots
            .saturating_sub(state.backends.model.active_sessions()),
        slots: info.max_slots,
        calls: state.sessions.admissions.calls(),
        max_calls,
        sessions: state.sessions.admissions.sessions(),
        max_sessions,
        load: state.cluster.as_ref().map_or(0.0, |c| c.load()),
        // Draining, not warm yet, or the model thread stopped: it takes nothing new.
        draining: state.accepting().is_err(),
        seen_ms: now_ms(),
        boot: state
            .cluster
            .as_ref()
            .map_or_else(String::new, |c| c.boot.clone()),
    }
}

/// Beats every [`HEARTBEAT`](crate::cluster::HEARTBEAT) (and at once when the node starts draining) until the state
/// is dropped; then leaves the registry.
pub fn spawn_heartbeat(state: &Arc<AppState>) -> Option<tokio::task::JoinHandle<()>> {
    let cluster = state.cluster.clone()?;
    let weak: Weak<AppState> = Arc::downgrade(state);
    let mut lifecycle = state.lifecycle.subscribe();
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                changed = lifecycle.changed() => if changed.is_err() { break },
            }
            let Some(state) = weak.upgrade() else { break };
            cluster.refresh_load();
            let own = own_record(&state, &cluster.settings);
            drop(state);
            let beat = tokio::time::timeout(REDIS_TIMEOUT * 2, cluster.beat(&own)).await;
            let ok = matches!(beat, Ok(Ok(())));
            if let Ok(Err(e)) = &beat {
                tracing::debug!(error = %e, "cluster heartbeat failed");
            }
            cluster.note_redis(ok);
            if ok {
                if let Some(state) = weak.upgrade() {
                    state.credentials.usage.flush().await;
                    let heal = state.sessions.admissions.heal_shared();
                    let _ = tokio::time::timeout(REDIS_TIMEOUT, heal).await;
                }
            }
        }
    }))
}
