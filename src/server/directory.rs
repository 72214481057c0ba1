//! The session directory: where a resume finds the session it names. Opted-in sessions
//! register their inbox when they open and leave when they end. Behind a small trait so
//! that a shared store (many nodes behind one API) can stand in for the in-process map.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;

use crate::session::Inbound;

/// Where live opted-in sessions can be reached, by session id.
pub trait SessionDirectory: Send + Sync {
    /// Records `id`'s inbox and the credential it was opened with (`None`: the server key).
    fn insert(&self, id: &str, inbox: mpsc::Sender<Inbound>, owner: Option<String>);
    /// The inbox and owner of `id`, if the session is live.
    fn get(&self, id: &str) -> Option<Entry>;
    /// Forgets `id` (the session ended).
    fn remove(&self, id: &str);
    /// Sessions recorded.
    fn len(&self) -> usize;
    /// Whether none is.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A live session, as the directory has it.
#[derive(Clone)]
pub struct Entry {
    /// Where its input goes.
    pub inbox: mpsc::Sender<Inbound>,
    /// The credential that opened it (`None`: the server key).
    pub owner: Option<String>,
}

/// The directory of one process.
#[derive(Default)]
pub struct LocalDirectory {
    map: Mutex<HashMap<String, Entry>>,
}

impl SessionDirectory for LocalDirectory {
    fn insert(&self, id: &str, inbox: mpsc::Sender<Inbound>, owner: Option<String>) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(id.to_string(), Entry { inbox, owner });
        }
    }

    fn get(&self, id: &str) -> Option<Entry> {
        let m = self.map.lock().ok()?;
        m.get(id).filter(|e| !e.inbox.is_closed()).cloned()
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
