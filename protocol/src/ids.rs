//! Identifiers in OpenAI's shapes: `event_…`, `item_…`, `resp_…`, `sess_…`, `conv_…`.

use rand::Rng;

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A fresh random id: `prefix` + `_` + 22 base62 characters (~131 bits).
pub fn new_id(prefix: &str) -> String {
    let mut rng = rand::rng();
    let mut id = String::with_capacity(prefix.len() + 23);
    id.push_str(prefix);
    id.push('_');
    for _ in 0..22 {
        id.push(ALPHABET[rng.random_range(0..ALPHABET.len())] as char);
    }
    id
}

/// `event_…`, the id of a server event.
pub fn event_id() -> String {
    new_id("event")
}

/// `item_…`, a conversation item.
pub fn item_id() -> String {
    new_id("item")
}

/// `resp_…`, a response.
pub fn response_id() -> String {
    new_id("resp")
}

/// `sess_…`, a session.
pub fn session_id() -> String {
    new_id("sess")
}

/// `sess_<node>_…`, a session owned by cluster node `node` (a plain one for `None`).
pub fn session_id_on(node: Option<&str>) -> String {
    match node {
        Some(node) => new_id(&format!("sess_{node}")),
        None => session_id(),
    }
}

/// The cluster node that owns session `id` (`sess_<node>_<22 base62>`), if it names one.
pub fn session_node(id: &str) -> Option<&str> {
    let (node, random) = id.strip_prefix("sess_")?.rsplit_once('_')?;
    let node_ok = (1..=32).contains(&node.len())
        && node
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (node_ok && random.len() == 22 && random.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(node)
}

/// `call_…`, a function call made by a model that named none itself.
pub fn call_id() -> String {
    new_id("call")
}

/// `conv_…`, a conversation.
pub fn conversation_id() -> String {
    new_id("conv")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_prefix_and_are_unique() {
        let a = item_id();
        let b = item_id();
        assert!(a.starts_with("item_") && a.len() == 27, "{a}");
        assert_ne!(a, b);
        assert!(event_id().starts_with("event_"));
        assert!(response_id().starts_with("resp_"));
        assert!(session_id().starts_with("sess_"));
        assert!(conversation_id().starts_with("conv_"));
    }

    #[test]
    fn session_ids_name_their_node() {
        let id = session_id_on(Some("b-1"));
        assert!(id.starts_with("sess_b-1_") && id.len() == 31, "{id}");
        assert_eq!(session_node(&id), Some("b-1"));
        assert_eq!(session_node(&session_id()), None);
        assert_eq!(session_node("sess_B_0123456789012345678901"), None);
        assert_eq!(session_node("sess_b_short"), None);
    }
}
