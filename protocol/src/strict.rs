//! The rule strict clients (agents-js' zod schemas, the Python Agents SDK) impose on server
//! events: no `null` where the GA types make a field optional but not nullable.

use serde_json::Value;

/// Keys at which the GA types allow `null` (`code`, `param`, `event_id` only inside `error`).
pub const NULLABLE: &[&str] = &[
    "previous_item_id",
    "transcript",
    "audio",
    "output",
    "status_details",
    "usage",
    "conversation_id",
    "turn_detection",
    "code",
    "param",
    "event_id",
];

const ERROR_ONLY: &[&str] = &["code", "param", "event_id"];

/// Paths (`type.key.key`) of every `null` in `event` that the GA types do not allow.
pub fn forbidden_nulls(event: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let root = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    walk(event, &root, false, &mut found);
    found
}

fn walk(v: &Value, path: &str, under_error: bool, found: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let p = format!("{path}.{k}");
                let allowed = NULLABLE.contains(&k.as_str())
                    && (!ERROR_ONLY.contains(&k.as_str()) || under_error);
                if child.is_null() && !allowed {
                    found.push(p.clone());
                }
                walk(child, &p, under_error || k == "error", found);
            }
        }
        Value::Array(items) => items.iter().for_each(|c| walk(c, path, under_error, found)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_forbidden_nulls_only() {
        let ok = json!({"type":"error","error":{"code":null,"param":null,"event_id":null},"previous_item_id":null});
        assert!(forbidden_nulls(&ok).is_empty());
        let bad = json!({"type":"x","item":{"id":null,"content":[{"transcript":null,"text":null}]},"event_id":null});
        assert_eq!(
            forbidden_nulls(&bad),
            ["x.event_id", "x.item.content.text", "x.item.id"]
        );
    }
}
