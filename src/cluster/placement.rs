//! Placement, sans IO: what a node tells the registry about itself, and which node a new
//! call or session goes to (the most free model slots; ties: the lowest load, then the
//! receiving node, so that nothing is forwarded for nothing).

use serde::{Deserialize, Serialize};

/// A node as the registry holds it (`duet:node:<id>`, refreshed every heartbeat).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// `--node-id`.
    pub id: String,
    /// `--node-url`: where other nodes forward requests.
    pub node_url: String,
    /// `--public-url`: where clients reach this node.
    pub public_url: String,
    /// The media sockets' addresses as callers see them (`ip:port`).
    pub udp: Vec<String>,
    /// Model slots free now.
    pub free_slots: usize,
    /// Model slots in all.
    pub slots: usize,
    /// Calls now, and `--max-calls`.
    pub calls: usize,
    /// `--max-calls`.
    pub max_calls: usize,
    /// Sessions now (sidebands included).
    pub sessions: usize,
    /// `--max-sessions`.
    pub max_sessions: usize,
    /// CPU load: the 1-minute load average per core.
    pub load: f64,
    /// Draining: takes nothing new.
    pub draining: bool,
    /// Unix milliseconds of this record.
    pub seen_ms: u64,
    /// This life of the node (random at each start).
    #[serde(default)]
    pub boot: String,
}

/// What is being placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// A WebRTC call (and its session).
    Call,
    /// A WebSocket session.
    Session,
    /// A transcription session (`?intent=transcription`): no model slot.
    Transcription,
}

impl NodeRecord {
    /// Whether the node takes a new `want`: not draining, below `--max-sessions`, a free
    /// model slot (but for a transcription session), and for a call below `--max-calls`.
    pub fn takes(&self, want: Want) -> bool {
        !self.draining
            && self.sessions < self.max_sessions
            && (want == Want::Transcription || self.free_slots > 0)
            && (want != Want::Call || self.calls < self.max_calls)
    }

    /// Counts one more `want` placed on it (until its next heartbeat says better).
    pub fn place(&mut self, want: Want) {
        if want != Want::Transcription {
            self.free_slots = self.free_slots.saturating_sub(1);
        }
        self.sessions += 1;
        if want == Want::Call {
            self.calls += 1;
        }
    }
}

/// The nodes that take `want`, best first: most free model slots, then the lowest load,
/// then `local`, then by id. Records older than `max_age_ms` at `now_ms` are left out (a
/// node that stopped beating is gone by the registry's expiry at the latest).
pub fn candidates<'a>(
    nodes: impl IntoIterator<Item = &'a NodeRecord>,
    want: Want,
    local: &str,
    (now_ms, max_age_ms): (u64, u64),
) -> Vec<&'a NodeRecord> {
    let mut c: Vec<&NodeRecord> = nodes
        .into_iter()
        .filter(|n| n.takes(want) && now_ms.saturating_sub(n.seen_ms) <= max_age_ms)
        .collect();
    c.sort_by(|a, b| {
        b.free_slots
            .cmp(&a.free_slots)
            .then(a.load.total_cmp(&b.load))
            .then((a.id != local).cmp(&(b.id != local)))
            .then(a.id.cmp(&b.id))
    });
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, free: usize, load: f64) -> NodeRecord {
        NodeRecord {
            id: id.into(),
            free_slots: free,
            slots: 10,
            max_calls: 10,
            max_sessions: 10,
            load,
            seen_ms: 1_000,
            ..Default::default()
        }
    }

    fn ids(c: &[&NodeRecord]) -> Vec<String> {
        c.iter().map(|n| n.id.clone()).collect()
    }

    #[test]
    fn most_free_slots_first_then_lowest_load_then_local() {
        let nodes = [
            node("a", 3, 0.1),
            node("b", 7, 0.9),
            node("c", 7, 0.2),
            node("d", 3, 0.1),
        ];
        let c = candidates(&nodes, Want::Call, "d", (1_000, 6_000));
        assert_eq!(ids(&c), ["c", "b", "d", "a"]);
    }

    #[test]
    fn never_a_draining_full_or_silent_node() {
        let mut draining = node("draining", 9, 0.0);
        draining.draining = true;
        let no_slot = node("no-slot", 0, 0.0);
        let mut calls_full = node("calls-full", 5, 0.0);
        calls_full.calls = 10;
        let mut sessions_full = node("sessions-full", 5, 0.0);
        sessions_full.sessions = 10;
        let mut silent = node("silent", 9, 0.0);
        silent.seen_ms = 0;
        let ok = node("ok", 1, 0.0);
        let nodes = [draining, no_slot, calls_full, sessions_full, silent, ok];
        let c = candidates(&nodes, Want::Call, "x", (6_500, 6_000));
        assert_eq!(ids(&c), ["ok"]);
        // A WebSocket session does not need a call slot; a transcription session no model
        // slot either.
        let c = candidates(&nodes, Want::Session, "x", (6_500, 6_000));
        assert_eq!(ids(&c), ["calls-full", "ok"]);
        let c = candidates(&nodes, Want::Transcription, "x", (6_500, 6_000));
        assert_eq!(ids(&c), ["calls-full", "ok", "no-slot"]);
    }

    /// The record is a wire format: other nodes (maybe of another version during a rolling
    /// upgrade) read it from Redis, and `/v1/pool?scope=cluster` shows it.
    #[test]
    fn the_record_on_the_wire() {
        let n = NodeRecord {
            id: "duet-0".into(),
            node_url: "http://10.0.1.7:8080".into(),
            public_url: "https://duet-0.example.com".into(),
            udp: vec!["203.0.113.10:40000".into(), "203.0.113.10:40001".into()],
            free_slots: 6,
            slots: 8,
            calls: 2,
            max_calls: 100,
            sessions: 2,
            max_sessions: 256,
            load: 0.25,
            draining: false,
            seen_ms: 1_796_000_000_000,
            boot: "00c0ffee00c0ffee".into(),
        };
        insta::assert_json_snapshot!("node_record", n);
        // A record without the fields a newer version adds still reads.
        let mut v = serde_json::to_value(&n).expect("json");
        v.as_object_mut().expect("object").remove("boot");
        let old: NodeRecord = serde_json::from_value(v).expect("an older node's record");
        assert_eq!(old.boot, "");
    }

    #[test]
    fn placing_spreads_by_free_slots() {
        let mut nodes = vec![node("a", 10, 0.0), node("b", 10, 0.0), node("c", 10, 0.0)];
        let mut placed = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..30 {
            let id = candidates(&nodes, Want::Call, "a", (1_000, 6_000))[0]
                .id
                .clone();
            *placed.entry(id.clone()).or_default() += 1;
            if let Some(n) = nodes.iter_mut().find(|n| n.id == id) {
                n.place(Want::Call);
            }
        }
        assert_eq!(placed.values().copied().collect::<Vec<_>>(), [10, 10, 10]);
        assert!(candidates(&nodes, Want::Call, "a", (1_000, 6_000)).is_empty());
    }
}
