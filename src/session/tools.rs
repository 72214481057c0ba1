//! Function tools: the `tools` and `tool_choice` of a session or a response, checked and
//! turned into what the model takes. A model that cannot call tools refuses them here, so
//! no client believes its tools are in use when they never will be.

use duet_models::{Tool, ToolChoice};
use serde_json::Value;

use super::machine::Caps;
use crate::protocol::{codes, ErrorPayload};

/// The most tools one session or response may offer (OpenAI's limit).
pub const MAX_TOOLS: usize = 128;
/// The longest tool name.
const MAX_NAME: usize = 64;

fn invalid(param: String, message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::invalid(codes::INVALID_VALUE, message).with_param(param)
}

/// `tools`: function tools, each `{type:"function", name, description?, parameters?}`.
pub fn parse_tools(tools: &[Value], param: &str) -> Result<Vec<Tool>, ErrorPayload> {
    if tools.len() > MAX_TOOLS {
        return Err(invalid(
            param.to_string(),
            format!("{} tools; at most {MAX_TOOLS}", tools.len()),
        ));
    }
    let mut out: Vec<Tool> = Vec::with_capacity(tools.len());
    for (i, v) in tools.iter().enumerate() {
        let at = format!("{param}[{i}]");
        let tool = parse_tool(v, &at)?;
        if out.iter().any(|t| t.name == tool.name) {
            return Err(invalid(
                format!("{at}.name"),
                format!("two tools are named {:?}", tool.name),
            ));
        }
        out.push(tool);
    }
    Ok(out)
}

fn parse_tool(v: &Value, at: &str) -> Result<Tool, ErrorPayload> {
    let Some(obj) = v.as_object() else {
        return Err(invalid(at.to_string(), "a tool is an object"));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("function") => {}
        Some(other) => {
            return Err(ErrorPayload::invalid(
                codes::UNSUPPORTED,
                format!("tools of type {other:?} are not supported; Duet offers function tools"),
            )
            .with_param(format!("{at}.type")))
        }
        None => {
            return Err(invalid(
                format!("{at}.type"),
                "a tool needs \"type\": \"function\"",
            ))
        }
    }
    let name = obj.get("name").and_then(Value::as_str).unwrap_or_default();
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(valid) {
        return Err(invalid(
            format!("{at}.name"),
            format!("tool name {name:?} must match ^[a-zA-Z0-9_-]{{1,{MAX_NAME}}}$"),
        ));
    }
    let description = match obj.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid(format!("{at}.description"), "must be a string")),
    };
    let parameters = match obj.get("parameters") {
        None | Some(Value::Null) => "{}".to_string(),
        Some(p @ Value::Object(_)) => p.to_string(),
        Some(_) => {
            return Err(invalid(
                format!("{at}.parameters"),
                "must be a JSON Schema object",
            ))
        }
    };
    Ok(Tool {
        name: name.to_string(),
        description,
        parameters,
    })
}

/// `tool_choice`: `"auto"`, `"none"`, `"required"`, or `{type:"function", name}` naming one
/// of `tools`.
pub fn parse_tool_choice(
    v: &Value,
    tools: &[Tool],
    param: &str,
) -> Result<ToolChoice, ErrorPayload> {
    let choice = match v {
        Value::String(s) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(invalid(
                    param.to_string(),
                    format!("tool_choice {other:?}: expected \"auto\", \"none\", \"required\" or a function"),
                ))
            }
        },
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
            ToolChoice::Function(name.to_string())
        }
        _ => {
            return Err(invalid(
                param.to_string(),
                "tool_choice is \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":…}",
            ))
        }
    };
    if let ToolChoice::Function(name) = &choice {
        if !tools.iter().any(|t| &t.name == name) {
            return Err(invalid(
                format!("{param}.name"),
                format!("tool_choice names {name:?}, which is not among the tools"),
            ));
        }
    }
    if choice == ToolChoice::Required && tools.is_empty() {
        return Err(invalid(
            param.to_string(),
            "tool_choice \"required\" needs at least one tool",
        ));
    }
    Ok(choice)
}

impl Caps {
    /// Checks `tools` and `tool_choice` (of the session, or of a response: `scope` is the
    /// param prefix) and refuses tools when the model (named `model`) cannot call them.
    pub(super) fn check_tools(
        &self,
        model: &str,
        tools: &[Value],
        tool_choice: &Value,
        scope: &str,
    ) -> Result<(Vec<Tool>, ToolChoice), ErrorPayload> {
        let parsed = parse_tools(tools, &format!("{scope}.tools"))?;
        let choice = parse_tool_choice(tool_choice, &parsed, &format!("{scope}.tool_choice"))?;
        if !parsed.is_empty() && !self.tools {
            return Err(ErrorPayload::invalid(
                codes::TOOLS_UNSUPPORTED,
                format!(
                    "the model {:?} cannot call tools; run the server with --model cascade for function calling",
                    model
                ),
            )
            .with_param(format!("{scope}.tools")));
        }
        Ok((parsed, choice))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn function_tools_parse_and_bad_ones_name_their_param() {
        let tools = [
            json!({"type":"function","name":"get_time","description":"Now","parameters":{"type":"object","properties":{}}}),
            json!({"type":"function","name":"lookup-2"}),
        ];
        let t = parse_tools(&tools, "session.tools").unwrap();
        assert_eq!(t[0].name, "get_time");
        assert_eq!(t[0].parameters, r#"{"properties":{},"type":"object"}"#);
        assert_eq!(
            (t[1].description.as_str(), t[1].parameters.as_str()),
            ("", "{}")
        );
        let bad = |v: Value| parse_tools(&[v], "session.tools").unwrap_err();
        assert_eq!(
            bad(json!({"type":"function","name":"a b"}))
                .param
                .as_deref(),
            Some("session.tools[0].name")
        );
        assert_eq!(
            bad(json!({"type":"mcp","name":"x"})).code.as_deref(),
            Some(codes::UNSUPPORTED)
        );
        assert_eq!(
            bad(json!({"name":"x"})).param.as_deref(),
            Some("session.tools[0].type")
        );
        assert_eq!(
            bad(json!({"type":"function","name":"x","parameters":"{}"}))
                .param
                .as_deref(),
            Some("session.tools[0].parameters")
        );
        let twice = parse_tools(&[tools[1].clone(), tools[1].clone()], "t").unwrap_err();
        assert_eq!(twice.param.as_deref(), Some("t[1].name"));
        let many = vec![json!({"type":"function","name":"x"}); MAX_TOOLS + 1];
        assert!(parse_tools(&many, "t").is_err());
    }

    #[test]
    fn tool_choice_names_a_known_function() {
        let tools = parse_tools(&[json!({"type":"function","name":"f"})], "t").unwrap();
        let p = |v: Value, tools: &[Tool]| parse_tool_choice(&v, tools, "tc");
        assert_eq!(p(json!("auto"), &tools).unwrap(), ToolChoice::Auto);
        assert_eq!(p(json!("none"), &[]).unwrap(), ToolChoice::None);
        assert_eq!(p(json!("required"), &tools).unwrap(), ToolChoice::Required);
        assert_eq!(
            p(json!({"type":"function","name":"f"}), &tools).unwrap(),
            ToolChoice::Function("f".into())
        );
        assert_eq!(
            p(json!({"type":"function","name":"g"}), &tools)
                .unwrap_err()
                .param
                .as_deref(),
            Some("tc.name")
        );
        assert!(p(json!("required"), &[]).is_err());
        assert!(p(json!("sometimes"), &tools).is_err());
        assert!(p(json!(3), &tools).is_err());
    }
}
