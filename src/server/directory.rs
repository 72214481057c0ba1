//! The session directory: where a resume finds the session it names. Opted-in sessions
//! register their inbox when they open and leave when they end. Behind a small trait so
//! that a shared store (many nodes behind one API) can stand in for the in-process map.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;

use crate::session::Inbound;

/// Where live opted-in sessions can be reached, by session id.
pub trait SessionDirectory: Send + Sync {
    /// Records `id`'s inbox.
    fn insert(&self, id: &str, inbox: mpsc::Sender<Inbound>);
    /// The inbox of `id`, if the session is live.
    fn get(&self, id: &str) -> Option<mpsc::Sender<Inbound>>;
    /// Forgets `id` (the session ended).
    fn remove(&self, id: &str);
    /// Sessions recorded.
    fn len(&self) -> usize;
    /// Whether none is.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The directory of one process.
#[derive(Default)]
pub struct LocalDirectory {
    map: Mutex<HashMap<String, mpsc::Sender<Inbound>>>,
}

impl SessionDirectory for LocalDirectory {
    fn insert(&self, id: &str, inbox: mpsc::Sender<Inbound>) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(id.to_string(), inbox);
        }
    }

    fn get(&self, id: &str) -> Option<mpsc::Sender<Inbound>> {
        let m = self.map.lock().ok()?;
        m.get(id).filter(|tx| !tx.is_closed()).cloned()
    }

    fn remove(&self, id: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(id);
        }
    }

    fn len(&self) -> usize {
        self.map.lock().map_or(0, |m| m.len())
    }
}
