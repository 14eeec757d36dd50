//! A request's `tools` and `tool_choice`, checked; the schema of one call; and the system
//! prompt that lists the tools for a chat template that does not.

use ch11_server::error::ApiError;

use crate::json::Json;
use crate::schema::{Limits, compile};

/// Tools one request may list at most.
pub const MAX_TOOLS: usize = 64;

/// One tool of a request.
pub struct Tool {
    pub name: String,
    pub description: String,
    pub parameters: Json,
}

/// What `tool_choice` asks.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    None,
    Auto,
    Required,
    Named(String),
}

/// The request's `tools`, checked, each one's parameters compiled on their own so that an
/// error names the place in the schema the client wrote.
pub fn tools(request: &Json, limits: Limits) -> Result<Vec<Tool>, ApiError> {
    let items = match request.get("tools") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(items)) if items.len() <= MAX_TOOLS => items,
        Some(_) => {
            return Err(ApiError::invalid(
                "tools",
                format!("tools must be a list of at most {MAX_TOOLS} functions"),
            ));
        }
    };
    let mut tools: Vec<Tool> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let bad = |m: &str| ApiError::invalid("tools", format!("tools[{i}]: {m}"));
        if !matches!(item.get("type"), Some(Json::String(t)) if t == "function") {
            return Err(bad("only {\"type\": \"function\"} tools are supported"));
        }
        let f = item.get("function").ok_or_else(|| bad("no \"function\""))?;
        let name = match f.get("name") {
            Some(Json::String(n)) if plain_name(n) => n.clone(),
            _ => {
                return Err(bad(
                    "function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -",
                ));
            }
        };
        if tools.iter().any(|t| t.name == name) {
            return Err(bad(&format!("the name {name:?} is given twice")));
        }
        let description = match f.get("description") {
            Some(Json::String(d)) => d.clone(),
            _ => String::new(),
        };
        let parameters = match f.get("parameters") {
            None | Some(Json::Null) => Json::Object(vec![
                ("type".into(), Json::String("object".into())),
                ("properties".into(), Json::Object(Vec::new())),
                ("additionalProperties".into(), Json::Bool(false)),
            ]),
            Some(p) => p.clone(),
        };
        if let Err(e) = compile(&parameters, limits) {
            return Err(ApiError::invalid(
                "tools",
                format!(
                    "tools[{i}].function.parameters, at {}: {}",
                    e.path, e.message
                ),
            )
            .code("unsupported_schema"));
        }
        tools.push(Tool {
            name,
            description,
            parameters,
        });
    }
    Ok(tools)
}

/// OpenAI's rule for a function's name.
fn plain_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `tool_choice`, checked against the tools (`"auto"` when tools are given without it).
pub fn choice(request: &Json, tools: &[Tool]) -> Result<Choice, ApiError> {
    let bad = |m: String| ApiError::invalid("tool_choice", m);
    match request.get("tool_choice") {
        None | Some(Json::Null) => Ok(Choice::Auto),
        Some(Json::String(s)) => match s.as_str() {
            "none" => Ok(Choice::None),
            "auto" => Ok(Choice::Auto),
            "required" if !tools.is_empty() => Ok(Choice::Required),
            "required" => Err(bad("tool_choice \"required\" needs tools".into())),
            other => Err(bad(format!(
                "tool_choice {other:?}: none, auto, required, or a function"
            ))),
        },
        Some(named) => {
            let name = named.get("function").and_then(|f| f.get("name"));
            match name {
                Some(Json::String(n)) if tools.iter().any(|t| &t.name == n) => {
                    Ok(Choice::Named(n.clone()))
                }
                _ => Err(bad(
                    "tool_choice {\"type\": \"function\", \"function\": {\"name\": …}} must name one of the tools".into(),
                )),
            }
        }
    }
}

// ANCHOR: call_schema
/// The schema of one call to one of `tools`: `{"name": <its name>, "arguments": <its
/// parameters>}`, the name first, so that the name is known before the arguments begin.
pub fn call_schema(tools: &[&Tool]) -> Json {
    let s = |t: &str| Json::String(t.into());
    let one = |t: &Tool, at: &str| {
        let properties = vec![
            (
                "name".to_string(),
                Json::Object(vec![("const".into(), s(&t.name))]),
            ),
            ("arguments".to_string(), rebase(&t.parameters, at)),
        ];
        Json::Object(vec![
            ("type".into(), s("object")),
            ("properties".into(), Json::Object(properties)),
            (
                "required".into(),
                Json::Array(vec![s("name"), s("arguments")]),
            ),
            ("additionalProperties".into(), Json::Bool(false)),
        ])
    };
    match tools {
        [t] => one(t, "#/properties/arguments"),
        _ => {
            let alts = tools
                .iter()
                .enumerate()
                .map(|(i, t)| one(t, &format!("#/anyOf/{i}/properties/arguments")))
                .collect();
            Json::Object(vec![("anyOf".into(), Json::Array(alts))])
        }
    }
}

/// `schema` with its `$ref`s (`#/$defs/X`, pydantic's) pointing where it now stands, at `at`.
fn rebase(schema: &Json, at: &str) -> Json {
    match schema {
        Json::Object(members) => Json::Object(
            members
                .iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("$ref", Json::String(p)) if p.starts_with('#') => {
                        (k.clone(), Json::String(format!("{at}{}", &p[1..])))
                    }
                    _ => (k.clone(), rebase(v, at)),
                })
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(|v| rebase(v, at)).collect()),
        other => other.clone(),
    }
}
// ANCHOR_END: call_schema

/// With a template that lists the tools itself: only which call is wanted, when one is.
pub fn instruction(choice: &Choice) -> Option<String> {
    match choice {
        Choice::Named(n) => Some(format!("Call the tool {n} now.")),
        Choice::Required => Some("Call one of the tools now.".to_string()),
        _ => None,
    }
}

/// The system prompt that lists the tools (our own words; the shape of llama.cpp's
/// "generic" format).
pub fn tools_prompt(tools: &[Tool], choice: &Choice) -> String {
    let mut text = String::from("You can call these tools:\n");
    for t in tools {
        text += &format!(
            "- {}: {} Parameters (a JSON schema): {}\n",
            t.name,
            t.description,
            t.parameters.to_text()
        );
    }
    let call = "{\"name\": \"<the tool's name>\", \"arguments\": {<its parameters>}}";
    match choice {
        Choice::Named(n) => {
            text += &format!("Call the tool {n} now. Answer with JSON only: {call}")
        }
        Choice::Required => text += &format!("Call one tool now. Answer with JSON only: {call}"),
        _ => {
            text += &format!(
                "To call a tool, answer with JSON only: {call}. Otherwise answer in plain text."
            )
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::Matcher;

    #[test]
    fn a_call_schema_admits_a_call_of_each_tool_and_nothing_else() {
        let body = r##"{"tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters":
                {"type": "object", "properties": {"city": {"$ref": "#/$defs/City"}},
                 "required": ["city"], "$defs": {"City": {"type": "string", "maxLength": 20}}}}},
            {"type": "function", "function": {"name": "now"}}]}"##;
        let request = Json::parse(body).unwrap();
        let tools = tools(&request, Limits::default()).unwrap();
        let all: Vec<&Tool> = tools.iter().collect();
        let g = compile(&call_schema(&all), Limits::default()).unwrap();
        let takes = |doc: &str| {
            let mut m = Matcher::new(&g);
            m.accept(doc.as_bytes()) && m.is_complete()
        };
        assert!(takes(
            r#"{"name":"get_weather","arguments":{"city":"Paris"}}"#
        ));
        assert!(takes(r#"{"name":"now","arguments":{}}"#));
        assert!(!takes(r#"{"name":"now","arguments":{"city":"Paris"}}"#));
        assert!(!takes(r#"{"name":"other","arguments":{}}"#));
        assert!(!takes(r#"{"arguments":{},"name":"now"}"#));
    }

    #[test]
    fn bad_tools_and_choices_are_named() {
        let plan = |body: &str| {
            let r = Json::parse(body).unwrap();
            tools(&r, Limits::default()).and_then(|t| choice(&r, &t))
        };
        let e = plan(r#"{"tools":[{"type":"function","function":{"name":"a b"}}]}"#).unwrap_err();
        assert!(e.message.contains("tools[0]"), "{}", e.message);
        let e = plan(r#"{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tool_choice"));
        assert_eq!(
            plan(r#"{"tools":[{"type":"function","function":{"name":"f"}}]}"#).unwrap(),
            Choice::Auto
        );
        let e = plan(
            r#"{"tools":[{"type":"function","function":{"name":"f","parameters":
            {"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}}}]}"#,
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("tools[0].function.parameters, at #/properties/a/pattern"),
            "{}",
            e.message
        );
    }
}
